// Sort: LSD radix sort of 8-bit digits, one pass per digit with decoupled look-back (the
// structure of CUB's onesweep, Adinets & Merrill 2022).
// Defines: SKEL_KEY (the unsigned type of the keys' width), SKEL_KBITS (its bits),
// SKEL_KIND (0 unsigned, 1 two's complement, 2 IEEE float: how bits map to the order),
// SKEL_ITEMS (keys per thread), SKEL_PAIRS (1: a 32-bit payload moves with each key),
// SKEL_WIDE (1: 64-bit look-back status words, for 2^30 keys or more).
//
// 1. skel_sort_hist: the counts of every digit of every pass, in one read of the keys
//    (per-block shared histograms, then global atomics).
// 2. skel_sort_offsets: per pass, the exclusive scan of its 256 counts: where each digit's
//    keys start in the pass's output.
// 3. skel_sort_pass, once per digit: a block takes the next tile (a global atomic counter,
//    so every earlier tile was taken by a block that started before it: the look-back only
//    ever waits for blocks that are running, whatever order the hardware starts them in),
//    loads it warp-striped (warp w owns the contiguous positions w * 32 * ITEMS ..), and
//    ranks every key among the keys of its digit in the tile, in position order (stable):
//    per item, __match_any_sync groups the lanes of one digit, the group's lowest lane adds
//    the group's size to the warp's counter of the digit (shared atomics), and each lane's
//    rank is the counter before plus the lanes below it in the group. Thread d (one per
//    digit, 256 threads) then turns the warps' counters into exclusive prefixes, publishes
//    the tile's count of digit d (flag AGGREGATE; tile 0 publishes INCLUSIVE at once), looks
//    back over the earlier tiles' words of digit d until it meets an INCLUSIVE one, and
//    publishes its own inclusive prefix. Each key goes to shared memory at its position in
//    the tile sorted by digit, then out to `digit offset + prefix of the earlier tiles + rank
//    among its digit in the tile`: consecutive threads write consecutive positions of one
//    digit's run.
// 4. skel_sort_gather: `dst[i] = src[idx[i]]` of `size`-byte elements (a plain copy without
//    `idx`): the values of a pair sort that carried indices, and the last pass's output back
//    to the operand when the number of passes is odd.
//
// Status words: flag in the top two bits (1 aggregate, 2 inclusive), count in the rest,
// written with one store and read with one load (a count is never seen without its flag).

#define SKEL_BLOCK 256
#define SKEL_NWARPS (SKEL_BLOCK / 32)
#define SKEL_PASSES (SKEL_KBITS / 8)
#define SKEL_TILE (SKEL_BLOCK * SKEL_ITEMS)

typedef SKEL_KEY skel_key;
#if SKEL_WIDE
typedef skel_u64 skel_status;
#define SKEL_FLAG_SHIFT 62
#else
typedef unsigned skel_status;
#define SKEL_FLAG_SHIFT 30
#endif
#define SKEL_AGGREGATE ((skel_status)1 << SKEL_FLAG_SHIFT)
#define SKEL_INCLUSIVE ((skel_status)2 << SKEL_FLAG_SHIFT)
#define SKEL_COUNT_MASK (SKEL_AGGREGATE - 1)

// The order-preserving bits of a key.
__device__ __forceinline__ skel_key skel_order(skel_key x) {
    const skel_key sign = (skel_key)((skel_key)1 << (SKEL_KBITS - 1));
#if SKEL_KIND == 0
    return x;
#elif SKEL_KIND == 1
    return (skel_key)(x ^ sign);
#else
    return (x & sign) ? (skel_key)~x : (skel_key)(x | sign);
#endif
}

__device__ __forceinline__ unsigned skel_digit(skel_key x, unsigned shift) {
    return (unsigned)((skel_order(x) >> shift) & 0xffu);
}

extern "C" __global__ void __launch_bounds__(SKEL_BLOCK)
skel_sort_hist(const skel_key* __restrict__ keys, skel_u64 n, unsigned* __restrict__ hist) {
    __shared__ unsigned h[SKEL_PASSES * 256];
    for (unsigned i = threadIdx.x; i < SKEL_PASSES * 256; i += SKEL_BLOCK) h[i] = 0;
    __syncthreads();
    const skel_u64 stride = (skel_u64)gridDim.x * SKEL_BLOCK;
    for (skel_u64 i = (skel_u64)blockIdx.x * SKEL_BLOCK + threadIdx.x; i < n; i += stride) {
        const skel_key k = skel_order(keys[i]);
#pragma unroll
        for (int p = 0; p < SKEL_PASSES; ++p) atomicAdd(&h[p * 256 + (unsigned)((k >> (8 * p)) & 0xffu)], 1u);
    }
    __syncthreads();
    for (unsigned i = threadIdx.x; i < SKEL_PASSES * 256; i += SKEL_BLOCK)
        if (h[i] != 0) atomicAdd(&hist[i], h[i]);
}

// One block of 256 threads per pass.
extern "C" __global__ void __launch_bounds__(SKEL_BLOCK) skel_sort_offsets(unsigned* hist) {
    __shared__ unsigned wsum[SKEL_NWARPS];
    unsigned* h = hist + blockIdx.x * 256;
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned c = h[threadIdx.x];
    unsigned incl = c;
#pragma unroll
    for (unsigned off = 1; off < 32; off <<= 1) {
        const unsigned o = __shfl_up_sync(SKEL_FULL_MASK, incl, off);
        if (lane >= off) incl += o;
    }
    if (lane == 31) wsum[warp] = incl;
    __syncthreads();
    unsigned before = 0;
    for (unsigned w = 0; w < warp; ++w) before += wsum[w];
    h[threadIdx.x] = before + incl - c;
}

extern "C" __global__ void __launch_bounds__(SKEL_BLOCK)
skel_sort_pass(const skel_key* __restrict__ kin, skel_key* __restrict__ kout,
               const unsigned* __restrict__ vin, unsigned* __restrict__ vout, skel_u64 n,
               unsigned shift, const unsigned* __restrict__ offsets, skel_status* status_words,
               unsigned* counter) {
    __shared__ unsigned s_whist[SKEL_NWARPS][256];
    __shared__ unsigned s_tstart[256];
    __shared__ skel_i64 s_gbase[256];
    __shared__ unsigned s_wsum[SKEL_NWARPS];
    __shared__ unsigned s_tile;
    __shared__ skel_key s_keys[SKEL_TILE];
#if SKEL_PAIRS
    __shared__ unsigned s_vals[SKEL_TILE];
#endif
    volatile skel_status* status = status_words;
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

    if (threadIdx.x == 0) s_tile = atomicAdd(counter, 1u);
    for (unsigned i = threadIdx.x; i < SKEL_NWARPS * 256; i += SKEL_BLOCK) (&s_whist[0][0])[i] = 0;
    __syncthreads();
    const unsigned tile = s_tile;
    const skel_u64 base = (skel_u64)tile * SKEL_TILE;
    const skel_u64 first = base + (skel_u64)warp * 32 * SKEL_ITEMS + lane;

    skel_key k[SKEL_ITEMS];
    unsigned rank[SKEL_ITEMS];
#if SKEL_PAIRS
    unsigned v[SKEL_ITEMS];
#endif
#pragma unroll
    for (int i = 0; i < SKEL_ITEMS; ++i) {
        const skel_u64 pos = first + (skel_u64)i * 32;
        k[i] = pos < n ? kin[pos] : (skel_key)0;
#if SKEL_PAIRS
        v[i] = pos < n ? (vin != nullptr ? vin[pos] : (unsigned)pos) : 0u;
#endif
    }
    const unsigned below = (1u << lane) - 1u;
#pragma unroll
    for (int i = 0; i < SKEL_ITEMS; ++i) {
        const bool valid = first + (skel_u64)i * 32 < n;
        // Lanes past the end form a group of their own that counts nothing.
        const unsigned d = valid ? skel_digit(k[i], shift) : 256u;
        const unsigned peers = __match_any_sync(SKEL_FULL_MASK, d);
        const unsigned leader = __ffs(peers) - 1;
        unsigned old = 0;
        if (valid && lane == leader) old = atomicAdd(&s_whist[warp][d], (unsigned)__popc(peers));
        old = __shfl_sync(SKEL_FULL_MASK, old, leader);
        rank[i] = old + __popc(peers & below);
    }
    __syncthreads();

    // Thread d: digit d.
    const unsigned d = threadIdx.x;
    unsigned count = 0;
#pragma unroll
    for (int w = 0; w < SKEL_NWARPS; ++w) {
        const unsigned c = s_whist[w][d];
        s_whist[w][d] = count;
        count += c;
    }
    if (tile == 0) {
        status[d] = SKEL_INCLUSIVE | (skel_status)count;
    } else {
        status[(skel_u64)tile * 256 + d] = SKEL_AGGREGATE | (skel_status)count;
    }
    // The tile's own digit starts: an exclusive scan of the counts over the block.
    unsigned incl = count;
#pragma unroll
    for (unsigned off = 1; off < 32; off <<= 1) {
        const unsigned o = __shfl_up_sync(SKEL_FULL_MASK, incl, off);
        if (lane >= off) incl += o;
    }
    if (lane == 31) s_wsum[warp] = incl;
    // Look back over the earlier tiles' counts of digit d.
    skel_status prefix = 0;
    if (tile != 0) {
        for (long long t = (long long)tile - 1; t >= 0; --t) {
            skel_status word;
            do {
                word = status[(skel_u64)t * 256 + d];
            } while ((word >> SKEL_FLAG_SHIFT) == 0);
            prefix += word & SKEL_COUNT_MASK;
            if ((word >> SKEL_FLAG_SHIFT) == 2) break;
        }
        status[(skel_u64)tile * 256 + d] = SKEL_INCLUSIVE | (prefix + (skel_status)count);
    }
    __syncthreads();
    unsigned tstart = incl - count;
    for (unsigned w = 0; w < warp; ++w) tstart += s_wsum[w];
    s_tstart[d] = tstart;
    s_gbase[d] = (skel_i64)offsets[d] + (skel_i64)prefix - (skel_i64)tstart;
    __syncthreads();

    // The tile sorted by digit, in shared memory.
#pragma unroll
    for (int i = 0; i < SKEL_ITEMS; ++i) {
        if (first + (skel_u64)i * 32 < n) {
            const unsigned dd = skel_digit(k[i], shift);
            const unsigned at = s_tstart[dd] + s_whist[warp][dd] + rank[i];
            s_keys[at] = k[i];
#if SKEL_PAIRS
            s_vals[at] = v[i];
#endif
        }
    }
    __syncthreads();
    const unsigned valid = (unsigned)min((skel_u64)SKEL_TILE, n - base);
    for (unsigned j = threadIdx.x; j < valid; j += SKEL_BLOCK) {
        const skel_key x = s_keys[j];
        const skel_i64 to = s_gbase[skel_digit(x, shift)] + (skel_i64)j;
        kout[to] = x;
#if SKEL_PAIRS
        vout[to] = s_vals[j];
#endif
    }
}

extern "C" __global__ void __launch_bounds__(SKEL_BLOCK)
skel_sort_gather(const unsigned char* __restrict__ src, unsigned char* __restrict__ dst,
                 const unsigned* __restrict__ idx, skel_u64 n, unsigned size) {
    const skel_u64 stride = (skel_u64)gridDim.x * SKEL_BLOCK;
    for (skel_u64 i = (skel_u64)blockIdx.x * SKEL_BLOCK + threadIdx.x; i < n; i += stride) {
        const skel_u64 from = idx != nullptr ? (skel_u64)idx[i] : i;
        if (size % 4 == 0) {
            const unsigned* s = reinterpret_cast<const unsigned*>(src + from * size);
            unsigned* t = reinterpret_cast<unsigned*>(dst + i * size);
            for (unsigned w = 0; w < size / 4; ++w) t[w] = s[w];
        } else {
            for (unsigned b = 0; b < size; ++b) dst[i * size + b] = src[from * size + b];
        }
    }
}
