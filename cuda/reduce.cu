// Reduce and MapReduce in one pass, plus row-wise and column-wise reductions.
// Defines: SKEL_T (the value type), SKEL_OP(a, b) (the reduce function), SKEL_ELEM(i)
// (the value at flat position i: in0[i] for Reduce, the map call for MapReduce),
// SKEL_PARAMS (inputs and uniforms, each preceded by a comma), SKEL_ITEMS (values per lane
// and tile), SKEL_VEC (1: SKEL_ITEMS values of in0 are one aligned 16-byte load).
//
// One pass: the positions are cut into parts of `chunk` (part p: [p*chunk, (p+1)*chunk));
// block b folds parts b, b + gridDim.x, ..., each in order (each warp a contiguous piece of
// it, tile by tile: lane l takes SKEL_ITEMS consecutive values, then an ordered warp fold)
// into the part's partial; the last block to finish (atomic ticket) folds the partials in
// part order and writes the result. No identity: partial tiles use "has" flags. The
// grouping depends on n and chunk only, not on the grid, so the host sizes the grid to the
// blocks the device holds at once (a kernel that needs more registers gets fewer blocks
// and the same bits), and neighbouring parts are folded at about the same time (a lazy
// stencil's rows are read once from DRAM, not once per neighbour).
// A MultiStream chunk passes its positions base .. base + n (pointers at `skel_base`); the
// chunks' results are then folded in order by skel_reduce_parts.

#define SKEL_BLOCK 256
#define SKEL_NWARPS (SKEL_BLOCK / 32)
#define SKEL_TILE (32 * SKEL_ITEMS)
// Tiles whose values a lane loads before folding them (a lazy 5-point stencil ran as fast
// with 1, 2 or 4 on an H100: 451-466 us at 8192^2, instruction-bound either way).
#define SKEL_UNROLL 4
// SKEL_ELEM_RC(i, row, col) is SKEL_ELEM(i) given the element's row and column (the index
// parameters of a 2D element take them as they are, not through a division per value).
#ifndef SKEL_ELEM_RC
#define SKEL_ELEM_RC(i, row, col) SKEL_ELEM(i)
#endif

// Row and column of flat position g in rows of `cols` values (32-bit division where both
// fit, as the index parameters' own division does).
__device__ __forceinline__ void skel_row_col(skel_u64 g, skel_u64 cols, skel_u64& row, skel_u64& col) {
    if ((g | cols) >> 32) {
        row = g / cols;
        col = g - row * cols;
    } else {
        const unsigned q = (unsigned)g / (unsigned)cols;
        row = q;
        col = (unsigned)g - q * (unsigned)cols;
    }
}
// Groups of 32 partials the last block folds per round (shared memory: one value each).
#define SKEL_GROUPS 32

// `ticket` is zero at the start and zero again at the end (the last block resets it), so
// scratch can be reused without clearing. Scratch layout (words): [0] unused, [1] chunk
// result has-flag, [2..2+W) chunk result (where skel_reduce_parts reads them),
// [2+W .. 2+W+nparts) partial has-flags, then nparts partial slots of W words. The
// result goes to `result`: has-flag word, then the value (host-mapped memory for a call
// of one chunk, else the chunk's result words of its scratch).
extern "C" __global__ void __launch_bounds__(SKEL_BLOCK)
skel_reduce(skel_u64 n, skel_u64 chunk, skel_u64 cols, skel_u64 skel_base, unsigned* __restrict__ ticket,
            unsigned* __restrict__ scratch, unsigned* result SKEL_PARAMS SKEL_FP) {
    const unsigned W = SKEL_WORDS(SKEL_T);
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned nparts = (unsigned)((n + chunk - 1) / chunk);
    unsigned* part_has = scratch + 2 + W;
    unsigned* parts = part_has + nparts;
    (void)skel_base;
    __shared__ SKEL_T s_val[SKEL_NWARPS];
    __shared__ int s_has[SKEL_NWARPS];
    __shared__ int s_last;
#if SKEL_VEC
    const bool aligned = (((size_t)in0) & 15) == 0;
#else
    const bool aligned = false;
#endif
    (void)aligned;

    for (unsigned p = blockIdx.x; p < nparts; p += gridDim.x) {
        const skel_u64 b0 = (skel_u64)p * chunk;
        const skel_u64 b1 = min(n, b0 + chunk);
        const skel_u64 wchunk = chunk / SKEL_NWARPS;
        const skel_u64 w0 = min(b1, b0 + warp * wchunk);
        const skel_u64 w1 = min(b1, w0 + wchunk);

        SKEL_T acc = skel_zero<SKEL_T>();
        bool has = false;
        skel_u64 base = w0;
        for (; base + SKEL_UNROLL * SKEL_TILE <= w1; base += SKEL_UNROLL * SKEL_TILE) {
            SKEL_T x[SKEL_UNROLL][SKEL_ITEMS];
#if SKEL_VEC
            if (aligned) {
#pragma unroll
                for (int u = 0; u < SKEL_UNROLL; ++u) {
                    union { uint4 q; SKEL_T t[SKEL_ITEMS]; } ld;
                    ld.q = __ldg(reinterpret_cast<const uint4*>(in0 + base + u * SKEL_TILE + lane * SKEL_ITEMS));
#pragma unroll
                    for (int k = 0; k < SKEL_ITEMS; ++k) x[u][k] = ld.t[k];
                }
            } else
#endif
            {
#pragma unroll
                for (int u = 0; u < SKEL_UNROLL; ++u) {
                    const skel_u64 i0 = base + u * SKEL_TILE + lane * SKEL_ITEMS;
                    skel_u64 row, col;
                    skel_row_col(skel_base + i0, cols, row, col);
#pragma unroll
                    for (int k = 0; k < SKEL_ITEMS; ++k) {
                        x[u][k] = SKEL_ELEM_RC(i0 + k, row, col);
                        if (++col == cols) {
                            col = 0;
                            ++row;
                        }
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < SKEL_UNROLL; ++u) {
                SKEL_T v = x[u][0];
#pragma unroll
                for (int k = 1; k < SKEL_ITEMS; ++k) v = SKEL_OP(v, x[u][k]);
                skel_warp_reduce_full(v SKEL_FA);
                if (lane == 0) skel_fold(acc, has, v SKEL_FA);
            }
        }
        for (; base < w1; base += SKEL_TILE) {
            SKEL_T v = skel_zero<SKEL_T>();
            bool h = false;
#pragma unroll
            for (int k = 0; k < SKEL_ITEMS; ++k) {
                const skel_u64 i = base + lane * SKEL_ITEMS + k;
                if (i < w1) skel_fold(v, h, (SKEL_T)(SKEL_ELEM(i)) SKEL_FA);
            }
            h = skel_warp_reduce(v, h SKEL_FA);
            if (lane == 0 && h) skel_fold(acc, has, v SKEL_FA);
        }

        if (lane == 0) {
            s_val[warp] = acc;
            s_has[warp] = has;
        }
        __syncthreads();
        if (warp == 0) {
            SKEL_T v = skel_zero<SKEL_T>();
            bool h = false;
            if (lane < SKEL_NWARPS && s_has[lane]) {
                v = s_val[lane];
                h = true;
            }
            h = skel_warp_reduce(v, h SKEL_FA);
            if (lane == 0) {
                if (h) skel_put_cg(parts + (skel_u64)p * W, v);
                __stcg(part_has + p, (unsigned)h);
            }
        }
        // s_val and s_has are the next part's.
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        __threadfence();
        const unsigned t = atomicAdd(ticket, 1u);
        s_last = (t == gridDim.x - 1);
    }
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    // The partials in groups of 32, each group a warp's ordered fold, then the groups in
    // order by one thread: the same operations as one warp walking the groups, but every
    // warp loads and folds groups of its own at once (one warp alone waited for the L2
    // once per group: ~7 us of a 20 us reduction of 4M values with 512 blocks).
    __shared__ SKEL_T s_grp[SKEL_GROUPS];
    __shared__ int s_grp_has[SKEL_GROUPS];
    const unsigned groups = (nparts + 31) / 32;
    SKEL_T total = skel_zero<SKEL_T>();
    bool th = false;
    for (unsigned g0 = 0; g0 < groups; g0 += SKEL_GROUPS) {
        const unsigned gn = min(groups - g0, (unsigned)SKEL_GROUPS);
        for (unsigned g = warp; g < gn; g += SKEL_NWARPS) {
            const unsigned j = (g0 + g) * 32 + lane;
            SKEL_T v = skel_zero<SKEL_T>();
            bool h = false;
            if (j < nparts && __ldcg(part_has + j)) {
                v = skel_get_cg<SKEL_T>(parts + (skel_u64)j * W);
                h = true;
            }
            h = skel_warp_reduce(v, h SKEL_FA);
            if (lane == 0) {
                s_grp[g] = v;
                s_grp_has[g] = h;
            }
        }
        __syncthreads();
        if (threadIdx.x == 0)
            for (unsigned g = 0; g < gn; ++g)
                if (s_grp_has[g]) skel_fold(total, th, s_grp[g] SKEL_FA);
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        if (th) skel_put_cg(result + 1, total);
        __stcg(result, (unsigned)th);
        *ticket = 0u;
    }
}

// Folds the results of `parts` one-pass reductions, in order: the scratch of part p starts
// at word p * stride (layout above); the result goes to out (has-flag word, then value).
extern "C" __global__ void skel_reduce_parts(const unsigned* scratch,
                                             skel_u64 parts, skel_u64 stride,
                                             unsigned* __restrict__ out SKEL_FP) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    SKEL_T total = skel_zero<SKEL_T>();
    bool th = false;
    for (skel_u64 p = 0; p < parts; ++p) {
        const unsigned* head = scratch + p * stride;
        if (__ldcg(head + 1)) skel_fold(total, th, skel_get_cg<SKEL_T>(head + 2) SKEL_FA);
    }
    if (th) skel_put_cg(out + 1, total);
    out[0] = (unsigned)th;
}

// Any plain type from lane `lane ^ m`, word by word.
template <typename T>
__device__ __forceinline__ T skel_shfl_xor(T v, unsigned m) {
    union { T t; unsigned w[SKEL_WORDS(T)]; } u;
    u.t = v;
    const unsigned src = (threadIdx.x & 31) ^ m;
#pragma unroll
    for (int k = 0; k < (int)SKEL_WORDS(T); ++k) u.w[k] = __shfl_sync(SKEL_FULL_MASK, u.w[k], src);
    return u.t;
}

// The ordered warp folds of four values per lane at once (p[u]: this lane's part of tile
// u), each combining exactly the pairs skel_warp_reduce_full combines, so each result is
// bit-identical to four calls of it; returns tile (lane & 3)'s result in lanes 0..3. The
// first two levels trade halves (after them lane l holds tile l & 3 of its group of four),
// so four trees cost one user call per lane and level where four calls would cost four.
__device__ __forceinline__ SKEL_T skel_warp_reduce4(const SKEL_T (&p)[4] SKEL_FP) {
    const unsigned lane = threadIdx.x & 31;
    // Level 1: even lanes keep tiles 0 and 2, odd lanes 1 and 3; each sends the others.
    const bool odd = (lane & 1) != 0;
    const SKEL_T r0 = skel_shfl_xor(odd ? p[0] : p[1], 1);
    const SKEL_T r1 = skel_shfl_xor(odd ? p[2] : p[3], 1);
    const SKEL_T q0 = SKEL_OP(odd ? r0 : p[0], odd ? p[1] : r0);
    const SKEL_T q1 = SKEL_OP(odd ? r1 : p[2], odd ? p[3] : r1);
    // Level 2: lanes with bit 1 clear keep q0's tile, the others q1's.
    const bool up = (lane & 2) != 0;
    const SKEL_T r = skel_shfl_xor(up ? q0 : q1, 2);
    SKEL_T v = SKEL_OP(up ? r : q0, up ? q1 : r);
    // Levels 4, 8, 16: lane l (one of the first four of its group) and lane l + off hold
    // the same tile.
#pragma unroll
    for (unsigned off = 4; off < 32; off <<= 1) {
        const SKEL_T o = skel_shfl_down(v, off);
        if ((lane & (2 * off - 1)) < 4) v = SKEL_OP(v, o);
    }
    return v;
}

// Folds one row of `cols` values (`elem(j)`: value j; `vp`: the row's first value where
// SKEL_VEC loads may read it as 16-byte words, else null) into acc/has of lane 0, in order:
// lane l folds the SKEL_ITEMS values of tile t at l * SKEL_ITEMS, an ordered warp fold gives
// the tile's value, lane 0 folds the tiles in order. Whole tiles go four at a time, every
// load issued first, their warp folds together (skel_warp_reduce4) and without "has" flags;
// the rest one tile at a time with them: the same values and folds either way, so the result
// does not depend on the path a tile took.
template <typename E>
__device__ __forceinline__ void skel_fold_row(E elem, const SKEL_T* __restrict__ vp, skel_u64 cols,
                                              SKEL_T& acc, bool& has SKEL_FP) {
    const unsigned lane = threadIdx.x & 31;
    (void)vp;
    skel_u64 c = 0;
    for (; c + 4 * SKEL_TILE <= cols; c += 4 * SKEL_TILE) {
        SKEL_T x[4][SKEL_ITEMS];
        bool loaded = false;
#if SKEL_VEC
        if (vp != nullptr) {
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                union { uint4 q; SKEL_T t[SKEL_ITEMS]; } ld;
                ld.q = __ldg(reinterpret_cast<const uint4*>(vp + c + u * SKEL_TILE + lane * SKEL_ITEMS));
#pragma unroll
                for (int k = 0; k < SKEL_ITEMS; ++k) x[u][k] = ld.t[k];
            }
            loaded = true;
        }
#endif
        if (!loaded) {
#pragma unroll
            for (int u = 0; u < 4; ++u)
#pragma unroll
                for (int k = 0; k < SKEL_ITEMS; ++k) x[u][k] = elem(c + u * SKEL_TILE + lane * SKEL_ITEMS + k);
        }
        SKEL_T p[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            p[u] = x[u][0];
#pragma unroll
            for (int k = 1; k < SKEL_ITEMS; ++k) p[u] = SKEL_OP(p[u], x[u][k]);
        }
        const SKEL_T v = skel_warp_reduce4(p SKEL_FA);
        const SKEL_T t1 = skel_shfl_down(v, 1), t2 = skel_shfl_down(v, 2), t3 = skel_shfl_down(v, 3);
        if (lane == 0) {
            skel_fold(acc, has, v SKEL_FA);
            skel_fold(acc, has, t1 SKEL_FA);
            skel_fold(acc, has, t2 SKEL_FA);
            skel_fold(acc, has, t3 SKEL_FA);
        }
    }
    for (; c < cols; c += SKEL_TILE) {
        SKEL_T v = skel_zero<SKEL_T>();
        bool h = false;
#pragma unroll
        for (int k = 0; k < SKEL_ITEMS; ++k) {
            const skel_u64 j = c + lane * SKEL_ITEMS + k;
            if (j < cols) skel_fold(v, h, elem(j) SKEL_FA);
        }
        h = skel_warp_reduce(v, h SKEL_FA);
        if (lane == 0 && h) skel_fold(acc, has, v SKEL_FA);
    }
}

// out[r] = fold of row r (cols >= 1 values), one warp per row, in order (skel_fold_row).
// The row's elements follow its first one (skel_row_col, then an add and a compare per
// element).
extern "C" __global__ void __launch_bounds__(SKEL_BLOCK)
skel_reduce_rows(skel_u64 rows, skel_u64 cols, skel_u64 skel_base, SKEL_T* __restrict__ out SKEL_PARAMS SKEL_FP) {
    const unsigned lane = threadIdx.x & 31;
    const skel_u64 warps = (skel_u64)gridDim.x * SKEL_NWARPS;
    const skel_u64 base_row = skel_base / cols;
    const skel_u64 base_col = skel_base - base_row * cols;
    const SKEL_T* vbase = nullptr;
#if SKEL_VEC
    if (((((size_t)in0) | (size_t)(cols * sizeof(SKEL_T))) & 15) == 0) vbase = in0;
#endif
    for (skel_u64 r = (skel_u64)blockIdx.x * SKEL_NWARPS + (threadIdx.x >> 5); r < rows; r += warps) {
        const skel_u64 row0 = r * cols;
        auto elem = [=](skel_u64 j) -> SKEL_T {
            skel_u64 row = base_row + r, col = base_col + j;
            if (col >= cols) {
                col -= cols;
                ++row;
            }
            (void)row;
            (void)col;
            return (SKEL_T)(SKEL_ELEM_RC(row0 + j, row, col));
        };
        const SKEL_T* vp = vbase == nullptr ? nullptr : vbase + row0;
        SKEL_T acc = skel_zero<SKEL_T>();
        bool has = false;
        skel_fold_row(elem, vp, cols, acc, has SKEL_FA);
        if (lane == 0 && has) out[r] = acc;
    }
}

// out[c] = fold of column c (rows >= 1 values), one thread per column, top to bottom.
extern "C" __global__ void __launch_bounds__(SKEL_BLOCK)
skel_reduce_cols(skel_u64 rows, skel_u64 cols, skel_u64 skel_base, SKEL_T* __restrict__ out SKEL_PARAMS SKEL_FP) {
    (void)skel_base;
    const skel_u64 stride = (skel_u64)gridDim.x * blockDim.x;
    for (skel_u64 c = (skel_u64)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += stride) {
        SKEL_T acc = SKEL_ELEM(c);
        for (skel_u64 r = 1; r < rows; ++r) acc = SKEL_OP(acc, (SKEL_T)(SKEL_ELEM(r * cols + c)));
        out[c] = acc;
    }
}

// run_into: out[0] = start folded with the result `res` (has-flag word, then the value; the
// layout skel_reduce and skel_reduce_parts write), or start where nothing was folded. The
// value stays on the device: the next call reads out as an operand.
extern "C" __global__ void skel_reduce_into(const unsigned* __restrict__ res, SKEL_T start,
                                            SKEL_T* __restrict__ out SKEL_FP) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    SKEL_T v = start;
    if (__ldcg(res)) v = SKEL_OP(v, skel_get_cg<SKEL_T>(res + 1));
    out[0] = v;
}
