// MapOverlap: 1D (flat), row-wise, column-wise and 2D stencils through shared-memory tiles
// with halo. Defines: SKEL_IN_T, SKEL_OUT_T, SKEL_CALL(w, stride) (the user call with the
// window's centre pointer; a 2D window also gets the row stride), SKEL_BX, SKEL_BY,
// SKEL_IY (outputs per thread along y), SKEL_COLMAJOR (1: the tile is stored column by
// column, so a 1D window runs down a column), SKEL_PARAMS (uniforms).
//
// The data is a rows x cols matrix (a vector is one row). A block computes a tile of
// (SKEL_BY*SKEL_IY) x SKEL_BX outputs; it first loads the tile plus a halo of rr rows and rc
// columns into shared memory, reading beyond the borders by the edge mode (0 duplicate,
// 1 cyclic, 2 pad; 3 none: outputs whose window leaves the data are not written).
// A MultiStream chunk computes only the outputs in rows row_lo .. row_hi and columns
// col_lo .. col_hi (a band), reading the whole input's coordinates (its halo is uploaded).

#define SKEL_TH_OUT (SKEL_BY * SKEL_IY)

__device__ __forceinline__ skel_i64 skel_wrap(skel_i64 i, skel_i64 n) {
    skel_i64 r = i % n;
    return r < 0 ? r + n : r;
}

extern "C" __global__ void __launch_bounds__(SKEL_BX * SKEL_BY)
skel_overlap(const SKEL_IN_T* __restrict__ in, SKEL_OUT_T* __restrict__ out, skel_i64 rows,
             skel_i64 cols, int rr, int rc, int edge, SKEL_IN_T pad, skel_i64 tiles_x,
             skel_i64 tiles_y, skel_i64 row_lo, skel_i64 row_hi, skel_i64 col_lo,
             skel_i64 col_hi SKEL_PARAMS) {
    extern __shared__ __align__(16) unsigned char skel_smem[];
    SKEL_IN_T* tile = reinterpret_cast<SKEL_IN_T*>(skel_smem);
    const int TW = SKEL_BX + 2 * rc;
    const int TH = SKEL_TH_OUT + 2 * rr;
    const int LD = SKEL_COLMAJOR ? (TH | 1) : TW;
    const int tid = threadIdx.y * SKEL_BX + threadIdx.x;
    const int nthreads = SKEL_BX * SKEL_BY;

    for (skel_i64 ty_ = blockIdx.y; ty_ < tiles_y; ty_ += gridDim.y) {
        for (skel_i64 tx_ = blockIdx.x; tx_ < tiles_x; tx_ += gridDim.x) {
            const skel_i64 r0 = row_lo + ty_ * SKEL_TH_OUT, c0 = col_lo + tx_ * SKEL_BX;
            __syncthreads();
            for (int e = tid; e < TW * TH; e += nthreads) {
                const int ty = e / TW, tx = e - (e / TW) * TW;
                skel_i64 gi = r0 - rr + ty, gj = c0 - rc + tx;
                // Past the band's halo: no output of the band reads it (and another
                // chunk's upload may still be writing it).
                if (gi >= row_hi + rr || gj >= col_hi + rc) continue;
                SKEL_IN_T v;
                const bool inside = gi >= 0 && gi < rows && gj >= 0 && gj < cols;
                if (inside) {
                    v = in[gi * cols + gj];
                } else if (edge == 0) {
                    gi = gi < 0 ? 0 : (gi >= rows ? rows - 1 : gi);
                    gj = gj < 0 ? 0 : (gj >= cols ? cols - 1 : gj);
                    v = in[gi * cols + gj];
                } else if (edge == 1) {
                    v = in[skel_wrap(gi, rows) * cols + skel_wrap(gj, cols)];
                } else {
                    v = pad;
                }
                if (SKEL_COLMAJOR) tile[tx * LD + ty] = v;
                else tile[ty * TW + tx] = v;
            }
            __syncthreads();
#pragma unroll
            for (int k = 0; k < SKEL_IY; ++k) {
                const int ly = threadIdx.y + k * SKEL_BY, lx = threadIdx.x;
                const skel_i64 i = r0 + ly, j = c0 + lx;
                if (i < row_hi && j < col_hi) {
                    const bool inner = i >= rr && i < rows - rr && j >= rc && j < cols - rc;
                    if (edge != 3 || inner) {
                        const SKEL_IN_T* w = SKEL_COLMAJOR ? &tile[(lx + rc) * LD + (ly + rr)]
                                                           : &tile[(ly + rr) * TW + (lx + rc)];
                        out[i * cols + j] = SKEL_CALL(w, TW);
                    }
                }
            }
        }
    }
}
