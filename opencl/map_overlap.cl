// MapOverlap: 1D (flat), row-wise, column-wise and 2D stencils through local-memory tiles
// with halo; the OpenCL twin of cuda/map_overlap.cu (same defines, same tiling).
// Instantiated with: SKEL_T (element), SKEL_OUT_T, SKEL_UPARAMS, SKEL_CALL(w, s) (the user
// call with the window's centre pointer and, for 2D, its row stride); the work-group
// SKEL_BX x SKEL_BY, SKEL_EX outputs per work-item along x (SKEL_BX apart) and SKEL_IY
// along y (consecutive rows); the radius SKEL_RR (rows), SKEL_RC (columns); SKEL_REGWIN
// (1: each work-item copies its window into private memory and slides it down its
// SKEL_IY rows; SKEL_WINDOW_SPACE is then __private, else __local).
//
// The data is a rows x cols matrix (a vector is one row). A work-group computes a tile of
// (SKEL_BY*SKEL_IY) x (SKEL_BX*SKEL_EX) outputs after loading it plus its halo into local
// memory: tiles whose halo lies inside the data copy the aligned 16-byte words around each
// row (`pitch` keeps tile rows at their global rows' offset modulo 16, 32 bytes apart) and
// compute without a test; only border tiles apply the edge mode (argument `edge`: 0
// Duplicate, 1 Cyclic, 2 Pad, 3 None: border outputs are not written), element by element.

#define SKEL_TWO (SKEL_BX * SKEL_EX)
#define SKEL_THO (SKEL_BY * SKEL_IY)
#define SKEL_TW (SKEL_TWO + 2 * SKEL_RC)
#define SKEL_TH (SKEL_THO + 2 * SKEL_RR)
#define SKEL_WW (2 * SKEL_RC + 1)
#define SKEL_WH (2 * SKEL_RR + 1)
#define SKEL_ROW_BYTES ((int)(SKEL_TW * sizeof(SKEL_T)))
#define SKEL_NT (SKEL_BX * SKEL_BY)
// The aligned 16-byte words a tile row can touch, wherever it starts, and in all the tile.
#define SKEL_SLOTS ((SKEL_ROW_BYTES + 30) / 16)
#define SKEL_TILE_WORDS (SKEL_TH * SKEL_SLOTS)
// Words per work-item and round of the fast copy: a round issues all its loads before its
// first store, so they are in flight together.
#define SKEL_ROUND_ALL ((SKEL_TILE_WORDS + SKEL_NT - 1) / SKEL_NT)
#define SKEL_ROUND (SKEL_ROUND_ALL < 8 ? SKEL_ROUND_ALL : 8)

static inline long skel_wrap(long i, long n) {
    long r = i % n;
    return r < 0 ? r + n : r;
}

// Word e of the fast copy: its tile row ty and the aligned word's offset a from the row's
// first byte (negative for the word it starts in); false past the tile or the row.
static inline bool skel_word(int e, __global const uchar* g0, size_t row_bytes, int* ty, int* a) {
    *ty = e / SKEL_SLOTS;
    *a = 16 * (e - *ty * SKEL_SLOTS) - (int)((size_t)(g0 + *ty * row_bytes) & 15);
    return e < SKEL_TILE_WORDS && *a < SKEL_ROW_BYTES;
}

__kernel __attribute__((reqd_work_group_size(SKEL_BX, SKEL_BY, 1)))
void skel_map_overlap(__global const SKEL_T* in_buf, ulong in_off, __global SKEL_OUT_T* out_buf,
                      ulong out_off, long rows, long cols, int pitch, int edge, SKEL_T pad,
                      __local uint4* skel_smem SKEL_UPARAMS)
{
    __global const SKEL_T* in = in_buf + in_off;
    __global SKEL_OUT_T* out = out_buf + out_off;
    const int tid = (int)get_local_id(1) * SKEL_BX + (int)get_local_id(0);
    const size_t in_addr = (size_t)in;
    const size_t row_bytes = (size_t)cols * sizeof(SKEL_T);
    const long r0 = (long)get_group_id(1) * SKEL_THO, c0 = (long)get_group_id(0) * SKEL_TWO;
    // Every output of the tile exists and its whole window is in the data.
    const bool interior = r0 >= SKEL_RR && r0 + SKEL_THO + SKEL_RR <= rows &&
                          c0 >= SKEL_RC && c0 + SKEL_TWO + SKEL_RC <= cols;
    // The tile's first element (meaningful for an interior tile).
    __global const uchar* g0 = (__global const uchar*)(in + (interior ? (r0 - SKEL_RR) * cols + (c0 - SKEL_RC) : 0));
    // The fast copy reads the aligned words around each tile row: they must be in the data.
    const size_t last_end = (size_t)g0 + (SKEL_TH - 1) * row_bytes + SKEL_ROW_BYTES;
    const bool fast = interior && (in_addr & 15) == 0 &&
                      ((last_end + 15) & ~(size_t)15) <= in_addr + (size_t)rows * row_bytes;
    // Tile rows sit at the same offset modulo 16 as their global rows (the pitch keeps it
    // so, with at least 32 bytes between rows for the words around them).
    __local uchar* base = (__local uchar*)skel_smem + (((size_t)g0) & 15);
    __local SKEL_T* tile = (__local SKEL_T*)base;
    if (fast) {
        for (int first = 0; first < SKEL_TILE_WORDS; first += SKEL_ROUND * SKEL_NT) {
            uint4 v[SKEL_ROUND];
            int ty, a;
#pragma unroll
            for (int k = 0; k < SKEL_ROUND; ++k) {
                if (skel_word(first + k * SKEL_NT + tid, g0, row_bytes, &ty, &a))
                    v[k] = *(__global const uint4*)(g0 + ty * row_bytes + a);
            }
#pragma unroll
            for (int k = 0; k < SKEL_ROUND; ++k) {
                if (skel_word(first + k * SKEL_NT + tid, g0, row_bytes, &ty, &a))
                    *(__local uint4*)(base + ty * pitch * (int)sizeof(SKEL_T) + a) = v[k];
            }
        }
    } else {
        for (int e = tid; e < SKEL_TH * SKEL_TW; e += SKEL_NT) {
            const int ty = e / SKEL_TW, tx = e - ty * SKEL_TW;
            long gi = r0 - SKEL_RR + ty, gj = c0 - SKEL_RC + tx;
            SKEL_T v = pad;
            if (gi >= 0 && gi < rows && gj >= 0 && gj < cols) {
                v = in[gi * cols + gj];
            } else if (edge == 0) {
                gi = gi < 0 ? 0 : (gi >= rows ? rows - 1 : gi);
                gj = gj < 0 ? 0 : (gj >= cols ? cols - 1 : gj);
                v = in[gi * cols + gj];
            } else if (edge == 1) {
                v = in[skel_wrap(gi, rows) * cols + skel_wrap(gj, cols)];
            }
            tile[ty * pitch + tx] = v;
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const int ly0 = (int)get_local_id(1) * SKEL_IY;
#pragma unroll
    for (int k = 0; k < SKEL_EX; ++k) {
        const int lx = (int)get_local_id(0) + k * SKEL_BX;
        const long j = c0 + lx;
        const bool col_ok = j < cols && (edge != 3 || (j >= SKEL_RC && j < cols - SKEL_RC));
#if SKEL_REGWIN
        SKEL_T win[SKEL_WH * SKEL_WW];
#pragma unroll
        for (int t = 0; t < (SKEL_WH - 1) * SKEL_WW; ++t)
            win[t] = tile[(ly0 + t / SKEL_WW) * pitch + lx + t % SKEL_WW];
#endif
#pragma unroll
        for (int m = 0; m < SKEL_IY; ++m) {
            const long i = r0 + ly0 + m;
#if SKEL_REGWIN
#pragma unroll
            for (int t = 0; t < SKEL_WW; ++t)
                win[(SKEL_WH - 1) * SKEL_WW + t] = tile[(ly0 + m + SKEL_WH - 1) * pitch + lx + t];
            __private const SKEL_T* w = win + SKEL_RR * SKEL_WW + SKEL_RC;
            const int s = SKEL_WW;
#else
            __local const SKEL_T* w = tile + (ly0 + m + SKEL_RR) * pitch + lx + SKEL_RC;
            const int s = pitch;
#endif
            (void)s;
            if (interior ||
                (col_ok && i < rows && (edge != 3 || (i >= SKEL_RR && i < rows - SKEL_RR)))) {
                out[i * cols + j] = SKEL_CALL(w, s);
            }
#if SKEL_REGWIN
#pragma unroll
            for (int t = 0; t < (SKEL_WH - 1) * SKEL_WW; ++t) win[t] = win[t + SKEL_WW];
#endif
        }
    }
}
