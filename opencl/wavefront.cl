// Wavefront: m[i][j] = f(m[i-1][j], m[i][j-1], m[i-1][j-1]) for every i, j >= 1, in place.
// One launch per anti-diagonal of tiles of SKEL_T x SKEL_T cells (the tiles (ti, tj) with
// ti + tj == diag_k, ti from first_ti); one work-group of SKEL_T work-items per tile. Inside a
// tile, work-item t owns tile row t and computes its cell on each of the tile's own
// anti-diagonals in turn, a barrier between them: every cell is f of the same three values
// as in the sequential loop, so the result is the same bits.
// Instantiated with: SKEL_CELL_T (the cell type), SKEL_T, SKEL_LOCAL (1: the tile and its
// upper row and left column live in local memory while it is computed; 0: it is computed
// in global memory), SKEL_UPARAMS (container arguments, uniforms, the fault record) and
// SKEL_CELL(up, left, diag, i, j), the user call for cell (i, j).

// A tile row in local memory holds SKEL_S = SKEL_T + 2 cells: the cells of one of the
// tile's anti-diagonals are then SKEL_T + 1 apart, an odd stride, so the work-items reading
// them hit distinct banks (with SKEL_T + 1 they would all hit one).
#define SKEL_S (SKEL_T + 2)

__kernel __attribute__((reqd_work_group_size(SKEL_T, 1, 1)))
void skel_wavefront(__global SKEL_CELL_T* m, ulong m_off, ulong rows, ulong cols,
                    ulong diag_k, ulong first_ti SKEL_UPARAMS)
{
    const ulong ti = first_ti + get_group_id(0), tj = diag_k - ti;
    const ulong r0 = 1 + ti * SKEL_T, c0 = 1 + tj * SKEL_T;
    const uint nr = (uint)min((ulong)SKEL_T, rows - r0), nc = (uint)min((ulong)SKEL_T, cols - c0);
    const uint t = get_local_id(0);
    // The tile's upper-left neighbour: (r, c) below is cell (r0 - 1 + r, c0 - 1 + c).
    __global SKEL_CELL_T* g = m + m_off + (r0 - 1) * cols + (c0 - 1);
#if SKEL_LOCAL
    __local SKEL_CELL_T s[(SKEL_T + 1) * SKEL_S];
    for (uint c = t; c <= nc; c += SKEL_T) s[c] = g[c];
    for (uint r = t + 1; r <= nr; r += SKEL_T) s[r * SKEL_S] = g[r * cols];
    barrier(CLK_LOCAL_MEM_FENCE);
#define SKEL_AT(r, c) s[(r) * SKEL_S + (c)]
#define SKEL_FENCE CLK_LOCAL_MEM_FENCE
#else
#define SKEL_AT(r, c) g[(r) * cols + (c)]
#define SKEL_FENCE CLK_GLOBAL_MEM_FENCE
#endif
    for (uint k = 0; k + 1 < nr + nc; ++k) {
        if (t < nr && k >= t && k - t < nc) {
            const uint r = t + 1, c = k - t + 1;
            SKEL_AT(r, c) = SKEL_CELL(SKEL_AT(r - 1, c), SKEL_AT(r, c - 1), SKEL_AT(r - 1, c - 1),
                                      r0 + t, c0 + (k - t));
        }
        barrier(SKEL_FENCE);
    }
#if SKEL_LOCAL
    for (uint r = 1; r <= nr; ++r) {
        for (uint c = t + 1; c <= nc; c += SKEL_T) g[r * cols + c] = s[r * SKEL_S + c];
    }
#endif
}
