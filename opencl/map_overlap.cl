// MapOverlap: 1D (flat), row-wise, column-wise and 2D stencils through local-memory tiles
// with halo; the OpenCL twin of cuda/map_overlap.cu (same defines, same tiling).
// Instantiated with: SKEL_T (element), SKEL_OUT_T, SKEL_UPARAMS, SKEL_CALL(w, s) (the user
// call with the window's centre pointer and, for 2D, its row stride); the work-group
// SKEL_BX x SKEL_BY, SKEL_EX outputs per work-item along x (SKEL_BX apart) and SKEL_IY
// along y (consecutive rows); the radius SKEL_RR (rows), SKEL_RC (columns); SKEL_UNIT, the largest power of two up to 16 dividing the element's size; SKEL_REGWIN
// (1: each work-item copies its window into private memory and slides it down its
// SKEL_IY rows; SKEL_WINDOW_SPACE is then __private, else __local).
//
// The data is a rows x cols matrix (a vector is one row). A work-group computes a tile of
// (SKEL_BY*SKEL_IY) x (SKEL_BX*SKEL_EX) outputs after loading it plus its halo into local
// memory: tiles whose halo lies inside the data copy each row with 16-byte loads and
// compute without a test; only border tiles apply the edge mode (argument `edge`: 0
// Duplicate, 1 Cyclic, 2 Pad, 3 None: border outputs are not written), element by element.

#define SKEL_TWO (SKEL_BX * SKEL_EX)
#define SKEL_THO (SKEL_BY * SKEL_IY)
#define SKEL_TW (SKEL_TWO + 2 * SKEL_RC)
#define SKEL_TH (SKEL_THO + 2 * SKEL_RR)
#define SKEL_WW (2 * SKEL_RC + 1)
#define SKEL_WH (2 * SKEL_RR + 1)
#define SKEL_ROW_BYTES ((int)(SKEL_TW * sizeof(SKEL_T)))
// The 16-byte words a tile row can touch, wherever it starts.
#define SKEL_SLOTS ((SKEL_ROW_BYTES + 30) / 16)

#if SKEL_UNIT == 16
typedef uint4 skel_unit_t;
#elif SKEL_UNIT == 8
typedef ulong skel_unit_t;
#elif SKEL_UNIT == 4
typedef uint skel_unit_t;
#elif SKEL_UNIT == 2
typedef ushort skel_unit_t;
#else
typedef uchar skel_unit_t;
#endif

static inline long skel_wrap(long i, long n) {
    long r = i % n;
    return r < 0 ? r + n : r;
}

// Copies the part of a tile row (global bytes g .. g + SKEL_ROW_BYTES) that falls in its
// 16-byte word `slot` to local memory at s, where s and g agree modulo 16: a whole word
// with one 16-byte load, the row's partial first and last words in SKEL_UNIT pieces.
static inline void skel_copy_slot(__global const uchar* g, __local uchar* s, int slot) {
    const int lo = 16 * slot - (int)((size_t)g & 15), hi = lo + 16;
    const int a = lo > 0 ? lo : 0, b = hi < SKEL_ROW_BYTES ? hi : SKEL_ROW_BYTES;
    if (a == lo && b == hi) {
        *(__local uint4*)(s + a) = *(__global const uint4*)(g + a);
    } else {
        for (int p = a; p < b; p += SKEL_UNIT)
            *(__local skel_unit_t*)(s + p) = *(__global const skel_unit_t*)(g + p);
    }
}

__kernel __attribute__((reqd_work_group_size(SKEL_BX, SKEL_BY, 1)))
void skel_map_overlap(__global const SKEL_T* in_buf, ulong in_off, __global SKEL_OUT_T* out_buf,
                      ulong out_off, long rows, long cols, int pitch, int edge, SKEL_T pad,
                      __local uint4* skel_smem SKEL_UPARAMS)
{
    __global const SKEL_T* in = in_buf + in_off;
    __global SKEL_OUT_T* out = out_buf + out_off;
    const int tid = (int)get_local_id(1) * SKEL_BX + (int)get_local_id(0);
    const int nthreads = SKEL_BX * SKEL_BY;
    const bool aligned = ((size_t)in & (SKEL_UNIT - 1)) == 0;
    const long r0 = (long)get_group_id(1) * SKEL_THO, c0 = (long)get_group_id(0) * SKEL_TWO;
    // Every output of the tile exists and its whole window is in the data.
    const bool interior = r0 >= SKEL_RR && r0 + SKEL_THO + SKEL_RR <= rows &&
                          c0 >= SKEL_RC && c0 + SKEL_TWO + SKEL_RC <= cols;
    const bool fast = interior && aligned;
    // The tile's first element in global memory (only formed for a fast tile, where it is
    // inside the data).
    __global const uchar* g0 =
        (__global const uchar*)(fast ? in + (r0 - SKEL_RR) * cols + (c0 - SKEL_RC) : in);
    __local uchar* base = (__local uchar*)skel_smem + ((size_t)g0 & 15);
    __local SKEL_T* tile = (__local SKEL_T*)base;
    if (fast) {
        for (int e = tid; e < SKEL_TH * SKEL_SLOTS; e += nthreads) {
            const int ty = e / SKEL_SLOTS, slot = e - ty * SKEL_SLOTS;
            skel_copy_slot(g0 + ty * cols * (long)sizeof(SKEL_T),
                           base + ty * pitch * (int)sizeof(SKEL_T), slot);
        }
    } else {
        for (int e = tid; e < SKEL_TH * SKEL_TW; e += nthreads) {
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
            const SKEL_T* w = win + SKEL_RR * SKEL_WW + SKEL_RC;
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
