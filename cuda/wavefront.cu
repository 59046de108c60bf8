// Wavefront: m[i][j] = f(m[i-1][j], m[i][j-1], m[i-1][j-1]) for every i, j >= 1, in place
// (the kernel of opencl/wavefront.cl in CUDA C). One launch per anti-diagonal of tiles of
// SKEL_T x SKEL_T cells (the tiles (ti, tj) with ti + tj == diag_k, ti from first_ti); one
// block of SKEL_T threads per tile. Inside a tile, thread t owns tile row t and computes its
// cell on each of the tile's own anti-diagonals in turn, a barrier between them: every
// cell is f of the same three values as in the sequential loop, so the result is the same
// bits. `m` points at the matrix's cell (0, 0).
// Defines: SKEL_CELL_T (the cell type), SKEL_T, SKEL_LOCAL (1: the tile and its upper row
// and left column live in shared memory while it is computed; 0: it is computed in device
// memory), SKEL_PARAMS (container arguments and uniforms, each preceded by a comma) and
// SKEL_CALL (the user call; it reads its neighbours as in0[0] (up), in1[0] (left), in2[0]
// (upper-left), the cell as i, j and its flat position skel_flat = i * cols + j).

// A tile row in local memory holds SKEL_S = SKEL_T + 2 cells: the cells of one of the
// tile's anti-diagonals are then SKEL_T + 1 apart, an odd stride, so the work-items reading
// them hit distinct banks (with SKEL_T + 1 they would all hit one).
#define SKEL_S (SKEL_T + 2)

extern "C" __global__ void __launch_bounds__(SKEL_T)
skel_wavefront(SKEL_CELL_T* __restrict__ m, skel_u64 rows, skel_u64 cols, skel_u64 diag_k,
               skel_u64 first_ti SKEL_PARAMS SKEL_FP) {
    const skel_u64 ti = first_ti + blockIdx.x, tj = diag_k - ti;
    const skel_u64 r0 = 1 + ti * SKEL_T, c0 = 1 + tj * SKEL_T;
    const unsigned nr = (unsigned)min((skel_u64)SKEL_T, rows - r0);
    const unsigned nc = (unsigned)min((skel_u64)SKEL_T, cols - c0);
    const unsigned t = threadIdx.x;
    // The tile's upper-left neighbour: (r, c) below is cell (r0 - 1 + r, c0 - 1 + c).
    SKEL_CELL_T* g = m + (r0 - 1) * cols + (c0 - 1);
#if SKEL_LOCAL
    __shared__ SKEL_CELL_T s[(SKEL_T + 1) * SKEL_S];
    for (unsigned c = t; c <= nc; c += SKEL_T) s[c] = g[c];
    for (unsigned r = t + 1; r <= nr; r += SKEL_T) s[r * SKEL_S] = g[r * cols];
    __syncthreads();
#define SKEL_AT(r, c) s[(r) * SKEL_S + (c)]
#else
#define SKEL_AT(r, c) g[(r) * cols + (c)]
#endif
    for (unsigned k = 0; k + 1 < nr + nc; ++k) {
        if (t < nr && k >= t && k - t < nc) {
            const unsigned r = t + 1, c = k - t + 1;
            const skel_u64 i = r0 + t, j = c0 + (k - t);
            const skel_u64 skel_flat = i * cols + j;
            (void)skel_flat;
            const SKEL_CELL_T* in0 = &SKEL_AT(r - 1, c);
            const SKEL_CELL_T* in1 = &SKEL_AT(r, c - 1);
            const SKEL_CELL_T* in2 = &SKEL_AT(r - 1, c - 1);
            SKEL_AT(r, c) = SKEL_CALL;
        }
        __syncthreads();
    }
#if SKEL_LOCAL
    for (unsigned r = 1; r <= nr; ++r) {
        for (unsigned c = t + 1; c <= nc; c += SKEL_T) g[r * cols + c] = s[r * SKEL_S + c];
    }
#endif
}
