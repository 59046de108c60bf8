// MapOverlap of the general form (SkePU 3's window functions): 1..=4 windowed inputs of one
// shape, an #[index], container arguments, uniforms and the cells of an update mode. One
// source for both GPU backends: the OpenCL backend compiles this file too (the prologue
// below picks the dialect), as it does cuda/loopnest.cu.
//
// Defines from the backend (src/backends/overlap_windows.rs): SKEL_OW_T (element),
// SKEL_OW_OUT_T (result), SKEL_OW_N (windowed inputs), SKEL_RR / SKEL_RC (the radius; a 1D
// window along rows has SKEL_RR 0, one down columns SKEL_RC 0), SKEL_OW_COLS (1: tiles are
// stored column by column, so that a window down a column is contiguous), the block
// SKEL_OW_BX x SKEL_OW_BY, SKEL_OW_IY outputs per thread along y (consecutive rows),
// SKEL_OW_KEEP (1: every output not computed gets input 0's element, an in-place sweep),
// SKEL_OW_IN_PARAMS / SKEL_OW_IN_SETUP (the inputs' kernel parameters and the pointers
// in0.. to their first elements), SKEL_OW_OUT_PARAMS / SKEL_OW_OUT_SETUP (the same for
// `out`), SKEL_OW_PARAMS (container arguments, uniforms, the fault record), SKEL_OW_LOAD_ALL
// (SKEL_OW_LOAD(q, in<q>) for each input) and SKEL_OW_CALL, the user call, which reads the
// output's row i and column j, `cols`, and window q's centre SKEL_OW_W(q).
//
// A block computes a tile of (SKEL_OW_BY * SKEL_OW_IY) x SKEL_OW_BX outputs: it loads each
// input's tile plus a halo of SKEL_RR rows and SKEL_RC columns into shared (local) memory,
// element by element with the edge mode `edge` (0 duplicate, 1 cyclic, 2 pad, 3 none), then
// every thread calls the user function with windows into the tiles. An output (i, j) is
// computed when `parity` is negative or (i + j) % 2 == parity, and, with edge 3, when its
// window lies inside the data; the others keep their value (or input 0's, SKEL_OW_KEEP).
// A call covers rows row_lo .. row_hi (a band of a split call); a tile reads only the rows
// up to row_hi + SKEL_RR, which the band's upload holds. Results are the cpu backend's bit
// for bit: the kernels are compiled without FMA contraction.

#ifdef __OPENCL_VERSION__
typedef long skel_ow_i64;
#define SKEL_OW_KERNEL \
    __kernel __attribute__((reqd_work_group_size(SKEL_OW_BX, SKEL_OW_BY, 1))) void
#define SKEL_OW_LOCAL __local
#define SKEL_OW_BARRIER() barrier(CLK_LOCAL_MEM_FENCE)
#define SKEL_OW_TX ((int)get_local_id(0))
#define SKEL_OW_TY ((int)get_local_id(1))
#define SKEL_OW_GX ((skel_ow_i64)get_group_id(0))
#define SKEL_OW_GY ((skel_ow_i64)get_group_id(1))
#define SKEL_OW_NGX ((skel_ow_i64)get_num_groups(0))
#define SKEL_OW_NGY ((skel_ow_i64)get_num_groups(1))
#define SKEL_OW_INLINE static inline
#define SKEL_OW_GLOBAL __global
#else
typedef long long skel_ow_i64;
#define SKEL_OW_KERNEL extern "C" __global__ void __launch_bounds__(SKEL_OW_BX * SKEL_OW_BY)
#define SKEL_OW_LOCAL __shared__
#define SKEL_OW_BARRIER() __syncthreads()
#define SKEL_OW_TX ((int)threadIdx.x)
#define SKEL_OW_TY ((int)threadIdx.y)
#define SKEL_OW_GX ((skel_ow_i64)blockIdx.x)
#define SKEL_OW_GY ((skel_ow_i64)blockIdx.y)
#define SKEL_OW_NGX ((skel_ow_i64)gridDim.x)
#define SKEL_OW_NGY ((skel_ow_i64)gridDim.y)
#define SKEL_OW_INLINE __device__ __forceinline__
#define SKEL_OW_GLOBAL
#endif

#define SKEL_OW_TWO SKEL_OW_BX
#define SKEL_OW_THO (SKEL_OW_BY * SKEL_OW_IY)
#define SKEL_OW_TW (SKEL_OW_TWO + 2 * SKEL_RC)
#define SKEL_OW_TH (SKEL_OW_THO + 2 * SKEL_RR)
#define SKEL_OW_TSIZE (SKEL_OW_TH * SKEL_OW_TW)
#define SKEL_OW_NT (SKEL_OW_BX * SKEL_OW_BY)
// Tile element (y, x) of input q: rows SKEL_OW_TW apart, or columns SKEL_OW_TH apart.
#if SKEL_OW_COLS
#define SKEL_OW_AT(y, x) ((x) * SKEL_OW_TH + (y))
#define SKEL_OW_STRIDE SKEL_OW_TH
#else
#define SKEL_OW_AT(y, x) ((y) * SKEL_OW_TW + (x))
#define SKEL_OW_STRIDE SKEL_OW_TW
#endif

SKEL_OW_INLINE skel_ow_i64 skel_ow_wrap(skel_ow_i64 i, skel_ow_i64 n) {
    skel_ow_i64 r = i % n;
    return r < 0 ? r + n : r;
}

// The element at (gi, gj) of a rows x cols input, which may lie outside the data: there the
// edge mode says what is read (the pad also for edge 3, whose outputs there are not
// computed).
SKEL_OW_INLINE SKEL_OW_T skel_ow_fetch(SKEL_OW_GLOBAL const SKEL_OW_T* in, skel_ow_i64 gi,
                                       skel_ow_i64 gj, skel_ow_i64 rows, skel_ow_i64 cols,
                                       int edge, SKEL_OW_T pad) {
    if (gi >= 0 && gi < rows && gj >= 0 && gj < cols) return in[gi * cols + gj];
    if (edge == 0) {
        gi = gi < 0 ? 0 : (gi >= rows ? rows - 1 : gi);
        gj = gj < 0 ? 0 : (gj >= cols ? cols - 1 : gj);
        return in[gi * cols + gj];
    }
    if (edge == 1) return in[skel_ow_wrap(gi, rows) * cols + skel_ow_wrap(gj, cols)];
    return pad;
}

// Input q's tile of the block at rows r0.., columns c0.. (halo included).
#define SKEL_OW_LOAD(q, src)                                                                 \
    for (int e = tid; e < SKEL_OW_TSIZE; e += SKEL_OW_NT) {                                  \
        const int y = e / SKEL_OW_TW, x = e - y * SKEL_OW_TW;                                \
        const skel_ow_i64 gi = r0 - SKEL_RR + y, gj = c0 - SKEL_RC + x;                      \
        if (gi < row_hi + SKEL_RR)                                                           \
            skel_tile[(q) * SKEL_OW_TSIZE + SKEL_OW_AT(y, x)] =                              \
                skel_ow_fetch(src, gi, gj, rows, cols, edge, pad);                           \
    }

// Window q's centre for the output at tile position (ly, lx).
#define SKEL_OW_W(q) (skel_tile + (q) * SKEL_OW_TSIZE + SKEL_OW_AT(ly + SKEL_RR, lx + SKEL_RC))

SKEL_OW_KERNEL skel_overlap_windows(SKEL_OW_OUT_PARAMS SKEL_OW_IN_PARAMS, skel_ow_i64 rows,
                                    skel_ow_i64 cols, int edge, SKEL_OW_T pad, int parity,
                                    skel_ow_i64 row_lo, skel_ow_i64 row_hi,
                                    skel_ow_i64 tiles_x, skel_ow_i64 tiles_y SKEL_OW_PARAMS) {
    SKEL_OW_LOCAL SKEL_OW_T skel_tile[SKEL_OW_N * SKEL_OW_TSIZE];
    SKEL_OW_OUT_SETUP
    SKEL_OW_IN_SETUP
    const int tid = SKEL_OW_TY * SKEL_OW_BX + SKEL_OW_TX;
    for (skel_ow_i64 ty_ = SKEL_OW_GY; ty_ < tiles_y; ty_ += SKEL_OW_NGY) {
        for (skel_ow_i64 tx_ = SKEL_OW_GX; tx_ < tiles_x; tx_ += SKEL_OW_NGX) {
            const skel_ow_i64 r0 = row_lo + ty_ * SKEL_OW_THO, c0 = tx_ * SKEL_OW_TWO;
            // The previous tile's windows are read by every thread before this one's loads.
            SKEL_OW_BARRIER();
            SKEL_OW_LOAD_ALL
            SKEL_OW_BARRIER();
            const int lx = SKEL_OW_TX;
            const skel_ow_i64 j = c0 + lx;
            for (int m = 0; m < SKEL_OW_IY; ++m) {
                const int ly = SKEL_OW_TY * SKEL_OW_IY + m;
                const skel_ow_i64 i = r0 + ly;
                if (i >= row_hi || j >= cols) continue;
                const bool inside = i >= SKEL_RR && i + SKEL_RR < rows && j >= SKEL_RC &&
                                    j + SKEL_RC < cols;
                const bool mine = parity < 0 || (int)((i + j) & 1) == parity;
                if (mine && (edge != 3 || inside)) {
                    out[i * cols + j] = SKEL_OW_CALL;
                }
#if SKEL_OW_KEEP
                else {
                    out[i * cols + j] = in0[i * cols + j];
                }
#endif
            }
        }
    }
}
