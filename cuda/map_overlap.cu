// MapOverlap: 1D (flat), row-wise, column-wise and 2D stencils through shared-memory tiles
// with halo. Defines: SKEL_IN_T, SKEL_OUT_T, SKEL_CALL(w, stride) (the user call with the
// window's centre pointer; a 2D window also gets the row stride), SKEL_PARAMS (uniforms);
// the block shape SKEL_BX x SKEL_BY, SKEL_EX outputs per thread along x (SKEL_BX apart) and
// SKEL_IY along y (consecutive rows); the radius SKEL_RR (rows), SKEL_RC (columns);
// SKEL_REGWIN (1: each thread copies its window into registers and slides it down its
// SKEL_IY rows, so a 2D window costs one new row of shared-memory reads per output instead
// of all of it, and a column-wise 1D window is contiguous).
//
// The data is a rows x cols matrix (a vector is one row). A block computes a tile of
// (SKEL_BY*SKEL_IY) x (SKEL_BX*SKEL_EX) outputs; it first loads the tile plus a halo of
// SKEL_RR rows and SKEL_RC columns into shared memory. A tile whose halo lies inside the
// data (nearly all of them) copies the aligned 16-byte words around each of its rows and
// computes without a test; only tiles at the border apply the edge mode, element by
// element. The tile's row pitch (elements, `pitch`) keeps its rows at the offset modulo 16
// bytes of their global rows, at least 32 bytes apart.
// The edge mode `edge` is an argument (0 duplicate, 1 cyclic, 2 pad, 3 none: outputs
// whose window leaves the data are not written): only border tiles look at it.
// A MultiStream chunk computes only the outputs in rows row_lo .. row_hi and columns
// col_lo .. col_hi (a band), reading the whole input's coordinates (its halo is uploaded).
//
// SKEL_DIRECT (1) compiles the direct kernel instead, of the same arguments: one thread per
// output, no tile, no barrier; the window is read where it lies in global memory (through
// L1), or, where it leaves the data (or SKEL_REGWIN asks for a contiguous column), copied
// into registers with the edge mode applied per element. A "tile" is then SKEL_BY x SKEL_BX
// outputs. Measured on an H100 it is slower than the tiles from 2^18 elements up (0.6x at
// 2^22) and no faster below, so it runs only when SKEL_STENCIL=direct asks for it.

#define SKEL_TWO (SKEL_BX * SKEL_EX)
#define SKEL_THO (SKEL_BY * SKEL_IY)
#define SKEL_TW (SKEL_TWO + 2 * SKEL_RC)
#define SKEL_TH (SKEL_THO + 2 * SKEL_RR)
#define SKEL_WW (2 * SKEL_RC + 1)
#define SKEL_WH (2 * SKEL_RR + 1)
#define SKEL_ROW_BYTES ((int)(SKEL_TW * sizeof(SKEL_IN_T)))
#define SKEL_NT (SKEL_BX * SKEL_BY)
// The aligned 16-byte words a tile row can touch, wherever it starts, and in all the tile.
#define SKEL_SLOTS ((SKEL_ROW_BYTES + 30) / 16)
#define SKEL_TILE_WORDS (SKEL_TH * SKEL_SLOTS)
// Words per thread and round of the fast copy: a round issues all its loads before its
// first store, so they are in flight together (a load-store loop would wait for each).
#define SKEL_ROUND_ALL ((SKEL_TILE_WORDS + SKEL_NT - 1) / SKEL_NT)
#define SKEL_ROUND (SKEL_ROUND_ALL < 8 ? SKEL_ROUND_ALL : 8)

__device__ __forceinline__ skel_i64 skel_wrap(skel_i64 i, skel_i64 n) {
    skel_i64 r = i % n;
    return r < 0 ? r + n : r;
}

// The element at (gi, gj), which may lie outside the data: there the edge mode says what
// is read (pad also for edge 3, whose outputs there are not written).
__device__ __forceinline__ SKEL_IN_T skel_fetch(const SKEL_IN_T* __restrict__ in, skel_i64 gi,
                                                skel_i64 gj, skel_i64 rows, skel_i64 cols,
                                                int edge, SKEL_IN_T pad) {
    if (gi >= 0 && gi < rows && gj >= 0 && gj < cols) return in[gi * cols + gj];
    if (edge == 0) {
        gi = gi < 0 ? 0 : (gi >= rows ? rows - 1 : gi);
        gj = gj < 0 ? 0 : (gj >= cols ? cols - 1 : gj);
        return in[gi * cols + gj];
    }
    if (edge == 1) return in[skel_wrap(gi, rows) * cols + skel_wrap(gj, cols)];
    return pad;
}

// Word e of the fast copy: its tile row ty, the row's first byte g in global memory and
// the aligned word's address a; false past the tile or the row.
__device__ __forceinline__ bool skel_word(int e, size_t g0, size_t row_bytes, int* ty, size_t* g,
                                          size_t* a) {
    *ty = e / SKEL_SLOTS;
    *g = g0 + *ty * row_bytes;
    *a = (*g & ~(size_t)15) + 16 * (size_t)(e - *ty * SKEL_SLOTS);
    return e < SKEL_TILE_WORDS && *a < *g + SKEL_ROW_BYTES;
}

// SKEL_MIN_BLOCKS, where defined: blocks per multiprocessor the register allocation must
// allow (for experiments: more blocks keep more loads in flight, but spill).
#ifdef SKEL_MIN_BLOCKS
#define SKEL_BOUNDS __launch_bounds__(SKEL_NT, SKEL_MIN_BLOCKS)
#else
#define SKEL_BOUNDS __launch_bounds__(SKEL_NT)
#endif

#if SKEL_DIRECT
extern "C" __global__ void __launch_bounds__(SKEL_NT)
skel_overlap(const SKEL_IN_T* __restrict__ in, SKEL_OUT_T* __restrict__ out, skel_i64 rows,
             skel_i64 cols, int pitch, int edge, SKEL_IN_T pad, skel_i64 tiles_x, skel_i64 tiles_y, skel_i64 row_lo,
             skel_i64 row_hi, skel_i64 col_lo, skel_i64 col_hi SKEL_PARAMS SKEL_FP) {
    (void)pitch;
    for (skel_i64 ty_ = blockIdx.y; ty_ < tiles_y; ty_ += gridDim.y) {
        const skel_i64 i = row_lo + ty_ * SKEL_BY + threadIdx.y;
        for (skel_i64 tx_ = blockIdx.x; tx_ < tiles_x; tx_ += gridDim.x) {
            const skel_i64 j = col_lo + tx_ * SKEL_BX + threadIdx.x;
            if (i >= row_hi || j >= col_hi) continue;
            const bool inside = i >= SKEL_RR && i + SKEL_RR < rows && j >= SKEL_RC && j + SKEL_RC < cols;
            if (!inside && edge == 3) continue;
#if !SKEL_REGWIN
            if (inside) {
                out[i * cols + j] = SKEL_CALL((in + i * cols + j), cols);
                continue;
            }
#endif
            SKEL_IN_T win[SKEL_WH * SKEL_WW];
#pragma unroll
            for (int t = 0; t < SKEL_WH * SKEL_WW; ++t) {
                const skel_i64 gi = i - SKEL_RR + t / SKEL_WW, gj = j - SKEL_RC + t % SKEL_WW;
                win[t] = inside ? in[gi * cols + gj] : skel_fetch(in, gi, gj, rows, cols, edge, pad);
            }
            out[i * cols + j] = SKEL_CALL((win + SKEL_RR * SKEL_WW + SKEL_RC), SKEL_WW);
        }
    }
}
#else
extern "C" __global__ void SKEL_BOUNDS
skel_overlap(const SKEL_IN_T* __restrict__ in, SKEL_OUT_T* __restrict__ out, skel_i64 rows,
             skel_i64 cols, int pitch, int edge, SKEL_IN_T pad, skel_i64 tiles_x, skel_i64 tiles_y, skel_i64 row_lo,
             skel_i64 row_hi, skel_i64 col_lo, skel_i64 col_hi SKEL_PARAMS SKEL_FP) {
    extern __shared__ __align__(16) unsigned char skel_smem[];
    const int tid = threadIdx.y * SKEL_BX + threadIdx.x;
    const size_t in_addr = reinterpret_cast<size_t>(in);
    const size_t row_bytes = (size_t)cols * sizeof(SKEL_IN_T);
    const size_t in_end = in_addr + (size_t)rows * row_bytes;

    for (skel_i64 ty_ = blockIdx.y; ty_ < tiles_y; ty_ += gridDim.y) {
        for (skel_i64 tx_ = blockIdx.x; tx_ < tiles_x; tx_ += gridDim.x) {
            const skel_i64 r0 = row_lo + ty_ * SKEL_THO, c0 = col_lo + tx_ * SKEL_TWO;
            // Every output of the tile is in the band and its whole window in the data.
            const bool interior = r0 >= SKEL_RR && r0 + SKEL_THO + SKEL_RR <= rows &&
                                  c0 >= SKEL_RC && c0 + SKEL_TWO + SKEL_RC <= cols &&
                                  r0 + SKEL_THO <= row_hi && c0 + SKEL_TWO <= col_hi;
            // The tile's first byte in global memory (meaningful for an interior tile).
            const size_t g0 = in_addr + (size_t)((r0 - SKEL_RR) * cols + (c0 - SKEL_RC)) *
                                            sizeof(SKEL_IN_T);
            // The fast copy reads the aligned words around each tile row: they must be in
            // the data (and, for a vector's band, in its uploaded halo).
            const size_t last_end = g0 + (SKEL_TH - 1) * row_bytes + SKEL_ROW_BYTES;
            const bool fast = interior && (in_addr & 15) == 0 &&
                              ((last_end + 15) & ~(size_t)15) <= in_end &&
                              (rows > 1 || ((c0 - col_lo) * (skel_i64)sizeof(SKEL_IN_T) >= 16 &&
                                            (col_hi - c0 - SKEL_TWO) * (skel_i64)sizeof(SKEL_IN_T) >= 16));
            // Tile rows sit at the same offset modulo 16 as their global rows (the pitch
            // keeps it so, with at least 32 bytes between rows for the words around them).
            unsigned char* base = skel_smem + ((fast ? g0 : in_addr) & 15);
            SKEL_IN_T* tile = reinterpret_cast<SKEL_IN_T*>(base);
            __syncthreads();
            if (fast) {
                for (int first = 0; first < SKEL_TILE_WORDS; first += SKEL_ROUND * SKEL_NT) {
                    uint4 v[SKEL_ROUND];
                    int ty;
                    size_t g, a;
#pragma unroll
                    for (int k = 0; k < SKEL_ROUND; ++k) {
                        if (skel_word(first + k * SKEL_NT + tid, g0, row_bytes, &ty, &g, &a))
                            v[k] = __ldg(reinterpret_cast<const uint4*>(a));
                    }
#pragma unroll
                    for (int k = 0; k < SKEL_ROUND; ++k) {
                        if (skel_word(first + k * SKEL_NT + tid, g0, row_bytes, &ty, &g, &a))
                            *reinterpret_cast<uint4*>(base + ty * pitch * (int)sizeof(SKEL_IN_T) +
                                                      (int)((skel_i64)a - (skel_i64)g)) = v[k];
                    }
                }
            } else {
                for (int e = tid; e < SKEL_TH * SKEL_TW; e += SKEL_NT) {
                    const int ty = e / SKEL_TW, tx = e - ty * SKEL_TW;
                    const skel_i64 gi = r0 - SKEL_RR + ty, gj = c0 - SKEL_RC + tx;
                    // Past the band's halo: no output of the band reads it (and another
                    // chunk's upload may still be writing it).
                    if (gi >= row_hi + SKEL_RR || gj >= col_hi + SKEL_RC) continue;
                    tile[ty * pitch + tx] = skel_fetch(in, gi, gj, rows, cols, edge, pad);
                }
            }
            __syncthreads();
#pragma unroll
            for (int k = 0; k < SKEL_EX; ++k) {
                const int lx = threadIdx.x + k * SKEL_BX, ly0 = threadIdx.y * SKEL_IY;
                const skel_i64 j = c0 + lx;
                const bool col_ok = j < col_hi && (edge != 3 || (j >= SKEL_RC && j < cols - SKEL_RC));
#if SKEL_REGWIN
                SKEL_IN_T win[SKEL_WH * SKEL_WW];
#pragma unroll
                for (int t = 0; t < (SKEL_WH - 1) * SKEL_WW; ++t)
                    win[t] = tile[(ly0 + t / SKEL_WW) * pitch + lx + t % SKEL_WW];
#endif
#pragma unroll
                for (int m = 0; m < SKEL_IY; ++m) {
                    const skel_i64 i = r0 + ly0 + m;
#if SKEL_REGWIN
#pragma unroll
                    for (int t = 0; t < SKEL_WW; ++t)
                        win[(SKEL_WH - 1) * SKEL_WW + t] = tile[(ly0 + m + SKEL_WH - 1) * pitch + lx + t];
                    const SKEL_IN_T* w = win + SKEL_RR * SKEL_WW + SKEL_RC;
                    const int stride = SKEL_WW;
#else
                    const SKEL_IN_T* w = &tile[(ly0 + m + SKEL_RR) * pitch + lx + SKEL_RC];
                    const int stride = pitch;
#endif
                    (void)stride;
                    if (interior || (col_ok && i < row_hi &&
                                     (edge != 3 || (i >= SKEL_RR && i < rows - SKEL_RR)))) {
                        out[i * cols + j] = SKEL_CALL(w, stride);
                    }
#if SKEL_REGWIN
#pragma unroll
                    for (int t = 0; t < (SKEL_WH - 1) * SKEL_WW; ++t) win[t] = win[t + SKEL_WW];
#endif
                }
            }
        }
    }
}
#endif
