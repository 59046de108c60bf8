// One pass of an order-preserving tree reduction (f associative, maybe not commutative).
// Work-group g folds positions [g*chunk, min(n, (g+1)*chunk)) into partials[part_off + g]:
// each work-item folds a contiguous run, then the runs are combined pairwise in local
// memory, left to right. Only work-items that hold a value take part (the items holding
// values are always a prefix), so f never sees padding.
// Instantiated with: SKEL_KNAME, SKEL_T, SKEL_F(a, b), SKEL_LOAD(p), SKEL_LOAD_PARAMS, SKEL_WG.
__kernel __attribute__((reqd_work_group_size(SKEL_WG, 1, 1)))
void SKEL_KNAME(ulong n, ulong chunk, __global SKEL_T* partials, ulong part_off SKEL_LOAD_PARAMS)
{
    __local SKEL_T scratch[SKEL_WG];
    ulong g = get_group_id(0);
    uint l = (uint)get_local_id(0);
    ulong lo = g * chunk;
    ulong hi = lo + chunk < n ? lo + chunk : n;
    ulong len = hi > lo ? hi - lo : 0;
    ulong per = (len + SKEL_WG - 1) / SKEL_WG;
    uint valid = per ? (uint)((len + per - 1) / per) : 0;
    if (l < valid) {
        ulong a = lo + (ulong)l * per;
        ulong b = a + per < hi ? a + per : hi;
        SKEL_T acc = SKEL_LOAD(a);
        for (ulong p = a + 1; p < b; ++p) {
            acc = SKEL_F(acc, SKEL_LOAD(p));
        }
        scratch[l] = acc;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = 1; s < SKEL_WG; s <<= 1) {
        if ((l & (2 * s - 1)) == 0 && l + s < valid) {
            scratch[l] = SKEL_F(scratch[l], scratch[l + s]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0 && valid > 0) {
        partials[part_off + g] = scratch[0];
    }
}
