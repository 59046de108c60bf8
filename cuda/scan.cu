// Scan: single pass with decoupled look-back (Merrill & Garland).
// Defines: SKEL_T, SKEL_OP(a, b), SKEL_ITEMS (values per thread).
//
// Each block takes the next tile (atomic counter, so every earlier tile is already running),
// scans it (thread-local, then warp shuffles, then across warps), publishes its aggregate,
// looks back over the predecessors' published aggregates / inclusive prefixes a warp-width
// at a time until it meets an inclusive prefix, then publishes its own inclusive prefix and
// writes its outputs. Exclusive mode seeds tile 0 with `start`. Only real values are ever
// combined ("has" flags for the partial last tile; predecessors always hold a value).
// MultiStream: a chunk after the first seeds tile 0 with `carry_in` (the inclusive prefix
// of everything before it, written by the previous chunk's last tile to `carry_out`).
//
// State (words): [0] tile counter, then `tiles` flags (0 none, 1 aggregate, 2 inclusive),
// then `tiles` aggregate slots and `tiles` inclusive slots of W words each.
//
// SKEL_PACKED (values of at most 4 bytes): instead, [0] counter, [1] unused, then one
// 64-bit word per tile, flag in the high half and value in the low half, written with one
// store and read with one load: a status and its value are never seen apart, so the
// look-back needs no memory fences (as in CUB's tile status for small types).

#ifndef SKEL_BLOCK
#define SKEL_BLOCK 256
#endif
#define SKEL_NWARPS (SKEL_BLOCK / 32)
#define SKEL_TILE (SKEL_BLOCK * SKEL_ITEMS)
// Shared-memory index with one element of padding per 32: the blocked accesses (thread t,
// item k at t*ITEMS + k) would otherwise hit the same banks; striped ones stay conflict-free.
#define SKEL_PAD(j) ((j) + ((j) >> 5))
#ifndef SKEL_MIN_BLOCKS
#define SKEL_MIN_BLOCKS 1
#endif
#ifndef SKEL_PACKED
#define SKEL_PACKED 0
#endif

#if SKEL_PACKED
__device__ __forceinline__ unsigned long long skel_pack(unsigned flag, SKEL_T v) {
    union { SKEL_T t; unsigned w; } u;
    u.w = 0u;
    u.t = v;
    return ((unsigned long long)flag << 32) | u.w;
}

__device__ __forceinline__ SKEL_T skel_unpack(unsigned long long word) {
    union { SKEL_T t; unsigned w; } u;
    u.w = (unsigned)word;
    return u.t;
}
#endif

extern "C" __global__ void __launch_bounds__(SKEL_BLOCK, SKEL_MIN_BLOCKS)
skel_scan(const SKEL_T* __restrict__ in, SKEL_T* __restrict__ out, skel_u64 n,
          unsigned* state, unsigned tiles, int exclusive, SKEL_T start,
          const SKEL_T* carry_in, SKEL_T* carry_out SKEL_FP) {
    const unsigned W = SKEL_WORDS(SKEL_T);
    extern __shared__ __align__(16) unsigned char skel_smem[];
    SKEL_T* s_items = reinterpret_cast<SKEL_T*>(skel_smem);
    __shared__ SKEL_T s_warp[SKEL_NWARPS];
    __shared__ int s_warp_has[SKEL_NWARPS];
    __shared__ SKEL_T s_prefix;
    __shared__ int s_prefix_has;
    __shared__ unsigned s_tile;

#if SKEL_PACKED
    volatile unsigned long long* status = reinterpret_cast<volatile unsigned long long*>(state + 2);
#else
    volatile unsigned* flags = state + 1;
    unsigned* aggs = state + 1 + tiles;
    unsigned* incls = aggs + (skel_u64)tiles * W;
#endif
    const unsigned tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    if (tid == 0) s_tile = atomicAdd(state, 1u);
    __syncthreads();
    const unsigned tile = s_tile;
    const skel_u64 base = (skel_u64)tile * SKEL_TILE;
    const unsigned valid = (unsigned)min((skel_u64)SKEL_TILE, n - base);

    // Striped, coalesced load into shared memory.
#pragma unroll
    for (int k = 0; k < SKEL_ITEMS; ++k) {
        const unsigned j = k * SKEL_BLOCK + tid;
        if (j < valid) s_items[SKEL_PAD(j)] = in[base + j];
    }
    __syncthreads();

    // Blocked: thread t owns items [t*ITEMS, t*ITEMS + cnt).
    const unsigned first = tid * SKEL_ITEMS;
    const unsigned cnt = valid > first ? min((unsigned)SKEL_ITEMS, valid - first) : 0u;
    SKEL_T x[SKEL_ITEMS];
#pragma unroll
    for (int k = 0; k < SKEL_ITEMS; ++k)
        if ((unsigned)k < cnt) x[k] = s_items[SKEL_PAD(first + k)];
    SKEL_T agg = skel_zero<SKEL_T>();
    bool has = false;
#pragma unroll
    for (int k = 0; k < SKEL_ITEMS; ++k)
        if ((unsigned)k < cnt) skel_fold(agg, has, x[k] SKEL_FA);

    // Warp inclusive scan of the thread aggregates; lane-exclusive part from lane - 1.
    SKEL_T inc = agg;
    bool ih = skel_warp_scan(inc, has SKEL_FA);
    SKEL_T ex = skel_shfl_up(inc, 1);
    bool exh = (__shfl_up_sync(SKEL_FULL_MASK, (int)ih, 1) != 0) && lane > 0;
    if (lane == 31) {
        s_warp[warp] = inc;
        s_warp_has[warp] = ih;
    }
    __syncthreads();

    if (warp == 0) {
        // Block aggregate (every lane computes it; all tiles hold at least one value).
        SKEL_T blk = skel_zero<SKEL_T>();
        bool bh = false;
        for (int w = 0; w < SKEL_NWARPS; ++w)
            if (s_warp_has[w]) skel_fold(blk, bh, s_warp[w] SKEL_FA);

        SKEL_T tp = start;
        bool tph = exclusive != 0;
        if (carry_in != nullptr && tile == 0) {
            tp = *carry_in;
            tph = true;
        }
        if (tile > 0) {
            if (lane == 0) {
#if SKEL_PACKED
                status[tile] = skel_pack(1u, blk);
#else
                skel_put_cg(aggs + (skel_u64)tile * W, blk);
                __threadfence();
                flags[tile] = 1u;
#endif
            }
            tph = false;
            long long pos = tile;
            while (true) {
                const long long idx = pos - 32 + lane;
                unsigned fl = 2u;
                SKEL_T v = skel_zero<SKEL_T>();
                bool vh = false;
#if SKEL_PACKED
                if (idx >= 0) {
                    unsigned long long word;
                    do {
                        word = status[idx];
                    } while ((word >> 32) == 0ull);
                    fl = (unsigned)(word >> 32);
                    v = skel_unpack(word);
                    vh = true;
                }
#else
                if (idx >= 0) {
                    do {
                        fl = flags[idx];
                    } while (fl == 0u);
                }
                __syncwarp();
                __threadfence();
                if (idx >= 0) {
                    v = skel_get_cg<SKEL_T>((fl == 2u ? incls : aggs) + (skel_u64)idx * W);
                    vh = true;
                }
#endif
                const unsigned stop = __ballot_sync(SKEL_FULL_MASK, fl == 2u);
                const int hi = stop ? 31 - __clz(stop) : -1;
                if ((int)lane < hi) vh = false;
                vh = skel_warp_reduce(v, vh SKEL_FA);
                if (lane == 0 && vh) {
                    tp = tph ? SKEL_OP(v, tp) : v;
                    tph = true;
                }
                if (stop) break;
                pos -= 32;
            }
        }
        if (lane == 0) {
            SKEL_T incl = blk;
            if (tph) incl = SKEL_OP(tp, blk);
#if SKEL_PACKED
            status[tile] = skel_pack(2u, incl);
#else
            skel_put_cg(incls + (skel_u64)tile * W, incl);
            __threadfence();
            flags[tile] = 2u;
#endif
            if (carry_out != nullptr && tile == tiles - 1) *carry_out = incl;
            s_prefix = tp;
            s_prefix_has = tph;
        }
    }
    __syncthreads();

    // This thread's prefix: tile prefix, earlier warps, earlier lanes.
    SKEL_T p = s_prefix;
    bool ph = s_prefix_has != 0;
    for (unsigned w = 0; w < warp; ++w)
        if (s_warp_has[w]) skel_fold(p, ph, s_warp[w] SKEL_FA);
    if (exh) skel_fold(p, ph, ex SKEL_FA);
#pragma unroll
    for (int k = 0; k < SKEL_ITEMS; ++k) {
        if ((unsigned)k < cnt) {
            if (exclusive) {
                s_items[SKEL_PAD(first + k)] = p;
                skel_fold(p, ph, x[k] SKEL_FA);
            } else {
                skel_fold(p, ph, x[k] SKEL_FA);
                s_items[SKEL_PAD(first + k)] = p;
            }
        }
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < SKEL_ITEMS; ++k) {
        const unsigned j = k * SKEL_BLOCK + tid;
        if (j < valid) out[base + j] = s_items[SKEL_PAD(j)];
    }
}
