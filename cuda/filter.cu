// Filter: stable stream compaction in one pass with decoupled look-back (Merrill &
// Garland; the structure of CUB's DeviceSelect::If), the predicate fused.
// Defines: SKEL_T, SKEL_BLOCK, SKEL_ITEMS (values per thread), SKEL_MIN_BLOCKS,
// SKEL_PARAMS (the uniform parameters), SKEL_PRED(p, x) (the user predicate for value x at
// position p of this chunk).
//
// Each block takes the next tile (atomic counter, so every earlier tile is already running)
// and loads it striped (thread t holds values t, t + BLOCK, ...: every load is coalesced).
// Each warp ballots its predicates row by row; the per-(row, warp) counts, scanned in
// row-major order, give every kept value its rank in the tile. Warp 0 publishes the tile's
// count, looks back over its predecessors' published counts / inclusive prefixes a
// warp-width at a time until it meets an inclusive prefix, and publishes its own inclusive
// prefix. The kept values are compacted into shared memory at their ranks and written out
// as one contiguous, coalesced run at the tile's prefix.
//
// State: [0] tile counter (low word), then one 64-bit status word per tile: flag in the top
// two bits (1 aggregate, 2 inclusive prefix), count in the low 62, written with one store
// and read with one load, so a status and its count are never seen apart.
// MultiStream: a chunk after the first starts from `carry_in` (the number of values kept
// before it, written by the previous chunk's last tile to `carry_out`); the positions its
// outputs go to are counted from the start of `out`.

#define SKEL_NWARPS (SKEL_BLOCK / 32)
#define SKEL_TILE (SKEL_BLOCK * SKEL_ITEMS)
#define SKEL_ROWS (SKEL_ITEMS * SKEL_NWARPS)
#define SKEL_PER_LANE ((SKEL_ROWS + 31) / 32)
#define SKEL_FLAG_SHIFT 62
#define SKEL_COUNT_MASK ((1ull << SKEL_FLAG_SHIFT) - 1ull)
#ifndef SKEL_MIN_BLOCKS
#define SKEL_MIN_BLOCKS 1
#endif

__device__ __forceinline__ skel_u64 skel_sum_up(skel_u64 v) {
#pragma unroll
    for (unsigned off = 1; off < 32; off <<= 1) {
        const skel_u64 o = __shfl_up_sync(SKEL_FULL_MASK, v, off);
        if ((threadIdx.x & 31) >= off) v += o;
    }
    return v;
}

extern "C" __global__ void __launch_bounds__(SKEL_BLOCK, SKEL_MIN_BLOCKS)
skel_filter(const SKEL_T* __restrict__ in0, SKEL_T* __restrict__ out, skel_u64 n,
            skel_u64 skel_base, skel_u64* state, unsigned tiles, const skel_u64* carry_in,
            skel_u64* carry_out SKEL_PARAMS) {
    extern __shared__ __align__(16) unsigned char skel_smem[];
    SKEL_T* s_kept = reinterpret_cast<SKEL_T*>(skel_smem);
    // Per (row k, warp w) at k * NWARPS + w: the count, then its exclusive prefix.
    __shared__ unsigned s_rank[SKEL_ROWS];
    __shared__ skel_u64 s_prefix;
    __shared__ unsigned s_total;
    __shared__ unsigned s_tile;
    volatile skel_u64* status = state + 1;

    const unsigned tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const unsigned below = (1u << lane) - 1u;

    if (tid == 0) s_tile = atomicAdd(reinterpret_cast<unsigned*>(state), 1u);
    __syncthreads();
    const unsigned tile = s_tile;
    const skel_u64 base = (skel_u64)tile * SKEL_TILE;
    const unsigned valid = (unsigned)min((skel_u64)SKEL_TILE, n - base);

    SKEL_T x[SKEL_ITEMS];
    unsigned votes[SKEL_ITEMS];
#pragma unroll
    for (int k = 0; k < SKEL_ITEMS; ++k) {
        const unsigned j = k * SKEL_BLOCK + tid;
        if (j < valid) x[k] = in0[base + j];
    }
#pragma unroll
    for (int k = 0; k < SKEL_ITEMS; ++k) {
        const unsigned j = k * SKEL_BLOCK + tid;
        bool keep = false;
        if (j < valid) keep = SKEL_PRED(base + j, x[k]);
        votes[k] = __ballot_sync(SKEL_FULL_MASK, keep);
        if (lane == 0) s_rank[k * SKEL_NWARPS + warp] = __popc(votes[k]);
    }
    __syncthreads();

    if (warp == 0) {
        // Exclusive scan of the (row, warp) counts: lane l owns a run of SKEL_PER_LANE.
        unsigned c[SKEL_PER_LANE];
        unsigned run = 0;
#pragma unroll
        for (int i = 0; i < SKEL_PER_LANE; ++i) {
            const unsigned r = lane * SKEL_PER_LANE + i;
            c[i] = r < SKEL_ROWS ? s_rank[r] : 0u;
            run += c[i];
        }
        const skel_u64 incl = skel_sum_up((skel_u64)run);
        unsigned at = (unsigned)incl - run;
#pragma unroll
        for (int i = 0; i < SKEL_PER_LANE; ++i) {
            const unsigned r = lane * SKEL_PER_LANE + i;
            if (r < SKEL_ROWS) s_rank[r] = at;
            at += c[i];
        }
        const skel_u64 total = __shfl_sync(SKEL_FULL_MASK, incl, 31);

        skel_u64 prefix = 0;
        if (tile == 0) {
            if (carry_in != nullptr) prefix = *carry_in;
        } else {
            if (lane == 0) status[tile] = (1ull << SKEL_FLAG_SHIFT) | total;
            long long pos = tile;
            while (true) {
                const long long idx = pos - 32 + lane;
                skel_u64 word = 2ull << SKEL_FLAG_SHIFT;
                if (idx >= 0) {
                    do {
                        word = status[idx];
                    } while ((word >> SKEL_FLAG_SHIFT) == 0ull);
                }
                const unsigned stop =
                    __ballot_sync(SKEL_FULL_MASK, (word >> SKEL_FLAG_SHIFT) == 2ull);
                const int hi = stop ? 31 - __clz(stop) : -1;
                // Only the last inclusive prefix and the aggregates after it count.
                skel_u64 v = (int)lane >= hi ? (word & SKEL_COUNT_MASK) : 0ull;
#pragma unroll
                for (unsigned off = 16; off > 0; off >>= 1) v += __shfl_down_sync(SKEL_FULL_MASK, v, off);
                prefix += v;
                if (stop) break;
                pos -= 32;
            }
        }
        if (lane == 0) {
            status[tile] = (2ull << SKEL_FLAG_SHIFT) | (prefix + total);
            if (carry_out != nullptr && tile == tiles - 1) *carry_out = prefix + total;
            s_prefix = prefix;
            s_total = (unsigned)total;
        }
    }
    __syncthreads();

    // Compact into shared memory at the ranks, then one contiguous coalesced write.
#pragma unroll
    for (int k = 0; k < SKEL_ITEMS; ++k) {
        if ((votes[k] >> lane) & 1u)
            s_kept[s_rank[k * SKEL_NWARPS + warp] + __popc(votes[k] & below)] = x[k];
    }
    __syncthreads();
    const skel_u64 prefix = s_prefix;
    const unsigned total = s_total;
    for (unsigned j = tid; j < total; j += SKEL_BLOCK) out[prefix + j] = s_kept[j];
}
