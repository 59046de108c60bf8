// MapPairs and MapPairsReduce: f(v[i], h[j]) for every pair of a vertical vector v and a
// horizontal vector h, tiled through local memory.
// Instantiated with: SKEL_A_T, SKEL_B_T, SKEL_OUT_T, SKEL_UPARAMS (uniforms),
// SKEL_PAIR(p, q, i, j) (the user call on elements p of v and q of h at pair (i, j), with
// `cols` columns); MapPairsReduce also SKEL_F(a, b) (the reduce function) and SKEL_COLS
// (0: one result per row of pairs, 1: one per column).

#ifndef SKEL_F
// MapPairs: a SKEL_TW x SKEL_TH work-group computes a tile of outputs; it first stages
// the tile's SKEL_TH elements of v and SKEL_TW elements of h in local memory, so each input
// element is read from global memory once per tile, not once per pair.
__kernel __attribute__((reqd_work_group_size(SKEL_TW, SKEL_TH, 1)))
void skel_map_pairs(__global SKEL_OUT_T* out, ulong out_off, __global const SKEL_A_T* v,
                    ulong v_off, __global const SKEL_B_T* h, ulong h_off, ulong rows,
                    ulong cols, __local SKEL_A_T* sv, __local SKEL_B_T* sh SKEL_UPARAMS)
{
    const ulong lx = get_local_id(0), ly = get_local_id(1);
    const ulong c0 = get_group_id(0) * SKEL_TW, r0 = get_group_id(1) * SKEL_TH;
    for (ulong t = ly * SKEL_TW + lx; t < SKEL_TH + SKEL_TW; t += SKEL_TW * SKEL_TH) {
        if (t < SKEL_TH) {
            if (r0 + t < rows) sv[t] = v[v_off + r0 + t];
        } else if (c0 + (t - SKEL_TH) < cols) {
            sh[t - SKEL_TH] = h[h_off + c0 + (t - SKEL_TH)];
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const ulong i = r0 + ly, j = c0 + lx;
    if (i < rows && j < cols) {
        out[out_off + i * cols + j] = SKEL_PAIR(sv[ly], sh[lx], i, j);
    }
}
#else

#if SKEL_COLS
#define SKEL_OWN_T SKEL_B_T
#define SKEL_OTHER_T SKEL_A_T
#define SKEL_AT(mine, k, o, kk) SKEL_PAIR(so[k], mine, kk, o)
#else
#define SKEL_OWN_T SKEL_A_T
#define SKEL_OTHER_T SKEL_B_T
#define SKEL_AT(mine, k, o, kk) SKEL_PAIR(mine, so[k], o, kk)
#endif

// MapPairsReduce: work-item o owns result o (a row of pairs, or a column with SKEL_COLS)
// and folds its pairs strictly in order of the other index (the reduce function needs no
// commutativity). The work-group stages the other operand in local memory, SKEL_WG
// elements at a time, each read from global memory once per work-group and stage.
__kernel __attribute__((reqd_work_group_size(SKEL_WG, 1, 1)))
void skel_pairs_fold(__global SKEL_OUT_T* out, ulong out_off, __global const SKEL_OWN_T* own,
                     ulong own_off, __global const SKEL_OTHER_T* other, ulong other_off,
                     ulong n_own, ulong n_fold, ulong cols, __local SKEL_OTHER_T* so SKEL_UPARAMS)
{
    const ulong o = get_global_id(0), l = get_local_id(0);
    const int live = o < n_own;
    SKEL_OWN_T mine = own[own_off + (live ? o : 0)];
    SKEL_OUT_T acc;
    for (ulong base = 0; base < n_fold; base += SKEL_WG) {
        const ulong len = min((ulong)SKEL_WG, n_fold - base);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (l < len) so[l] = other[other_off + base + l];
        barrier(CLK_LOCAL_MEM_FENCE);
        if (live) {
            ulong k = 0;
            if (base == 0) {
                acc = SKEL_AT(mine, 0, o, base);
                k = 1;
            }
            for (; k < len; ++k) acc = SKEL_F(acc, SKEL_AT(mine, k, o, base + k));
        }
    }
    if (live) out[out_off + o] = acc;
}
#endif
