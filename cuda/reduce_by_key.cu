// ReduceByKey (the CUDA form of opencl/reduce_by_key.cl): each block merges tiles of SKEL_TILE positions into its own table of
// `keys` values (with a `seen` flag per key), then skel_rbk_sum merges the groups' tables
// into `sums`, starting from `zero` (V's default).
// Per tile: every work-item computes the (key, value) of SKEL_ITEMS positions; an integer
// counting sort in local memory groups the values by key (atomic slot per key, a scan of
// the counts, a scatter); each key's run is then merged in order by SKEL_R work-items
// (`parts` sub-runs, then one work-item per key folds them into the table). Values are
// only ever merged by one work-item at a time: no atomics on values, any V works.
// Defines: SKEL_V, SKEL_KV(p) (the key function at position p of the call: a struct with
// the key in .f0 and the value in .f1), SKEL_MERGE(a, b), SKEL_PARAMS (container arguments,
// inputs, uniforms, fault record), SKEL_ITEMS, SKEL_LOCAL_TABLE (1: the table, counts and
// offsets are in the block's dynamic shared memory; 0: rows of the scratch, one per block).
// Shared memory: the tile's values, the sub-run results, then (local table) the table, then
// the flags, the scan and (local table) counts, offsets and seen flags.

#define SKEL_TILE (SKEL_WG_RBK * SKEL_ITEMS)

extern "C" __global__ void __launch_bounds__(SKEL_WG_RBK)
skel_rbk(skel_u64 n, skel_u64 cols, skel_u64 skel_base, unsigned keys, unsigned parts,
         unsigned* cnt0, unsigned* off0, SKEL_V* out_tbl, unsigned* out_seen,
         unsigned* __restrict__ skel_outside SKEL_PARAMS) {
    (void)cols;
    (void)skel_base;
    extern __shared__ __align__(16) unsigned char skel_smem[];
    SKEL_V* sorted = reinterpret_cast<SKEL_V*>(skel_smem);
    SKEL_V* pacc = sorted + SKEL_TILE;
    const unsigned lid = threadIdx.x;
    const skel_u64 group = blockIdx.x, groups = gridDim.x;
#if SKEL_LOCAL_TABLE
    SKEL_V* tbl = pacc + SKEL_WG_RBK;
    unsigned* phas = reinterpret_cast<unsigned*>(tbl + keys);
    unsigned* scan = phas + SKEL_WG_RBK;
    unsigned* cnt = scan + SKEL_WG_RBK;
    unsigned* off = cnt + keys;
    unsigned* seen = off + keys;
    (void)cnt0;
    (void)off0;
#else
    unsigned* phas = reinterpret_cast<unsigned*>(pacc + SKEL_WG_RBK);
    unsigned* scan = phas + SKEL_WG_RBK;
    const skel_u64 row = group * keys;
    unsigned* cnt = cnt0 + row;
    unsigned* off = off0 + row;
    unsigned* seen = out_seen + row;
    SKEL_V* tbl = out_tbl + row;
#endif
    for (unsigned k = lid; k < keys; k += SKEL_WG_RBK) seen[k] = 0;
    unsigned outside = 0, worst = 0;
    const unsigned seg = (keys + SKEL_WG_RBK - 1) / SKEL_WG_RBK;
    const unsigned R = parts;
    for (skel_u64 t0 = group * SKEL_TILE; t0 < n; t0 += groups * SKEL_TILE) {
        for (unsigned k = lid; k < keys; k += SKEL_WG_RBK) cnt[k] = 0;
        __syncthreads();
        unsigned key[SKEL_ITEMS], slot[SKEL_ITEMS];
        SKEL_V val[SKEL_ITEMS];
        for (unsigned j = 0; j < SKEL_ITEMS; ++j) {
            const skel_u64 p = t0 + j * SKEL_WG_RBK + lid;
            key[j] = keys;
            if (p < n) {
                const SKEL_KVT kv = SKEL_KV(p);
                if (kv.f0 < keys) {
                    key[j] = kv.f0;
                    val[j] = kv.f1;
                    slot[j] = atomicAdd(&cnt[kv.f0], 1u);
                } else {
                    outside += 1;
                    worst = max(worst, kv.f0);
                }
            }
        }
        __syncthreads();
        // Exclusive scan of the counts: each work-item sums a segment, the segment sums
        // are scanned (Hillis-Steele), then each segment is written out.
        const unsigned lo = min(keys, lid * seg), hi = min(keys, lo + seg);
        unsigned s = 0;
        for (unsigned k = lo; k < hi; ++k) s += cnt[k];
        scan[lid] = s;
        __syncthreads();
        for (unsigned d = 1; d < SKEL_WG_RBK; d <<= 1) {
            const unsigned add = lid >= d ? scan[lid - d] : 0;
            __syncthreads();
            scan[lid] += add;
            __syncthreads();
        }
        unsigned run = scan[lid] - s;
        for (unsigned k = lo; k < hi; ++k) {
            off[k] = run;
            run += cnt[k];
        }
        __syncthreads();
        for (unsigned j = 0; j < SKEL_ITEMS; ++j) {
            if (key[j] < keys) sorted[off[key[j]] + slot[j]] = val[j];
        }
        __syncthreads();
        if (R > 1) {
            // keys * R <= SKEL_WG_RBK: work-item lid merges sub-run lid / keys of key
            // lid % keys.
            if (lid < keys * R) {
                const unsigned k = lid % keys, r = lid / keys, c = cnt[k];
                const unsigned a = off[k] + c * r / R, b = off[k] + c * (r + 1) / R;
                unsigned h = 0;
                if (a < b) {
                    SKEL_V acc = sorted[a];
                    for (unsigned q = a + 1; q < b; ++q) acc = SKEL_MERGE(acc, sorted[q]);
                    pacc[lid] = acc;
                    h = 1;
                }
                phas[lid] = h;
            }
            __syncthreads();
            for (unsigned k = lid; k < keys; k += SKEL_WG_RBK) {
                for (unsigned r = 0; r < R; ++r) {
                    const unsigned i = r * keys + k;
                    if (phas[i]) {
                        tbl[k] = seen[k] ? SKEL_MERGE(tbl[k], pacc[i]) : pacc[i];
                        seen[k] = 1;
                    }
                }
            }
        } else {
            for (unsigned k = lid; k < keys; k += SKEL_WG_RBK) {
                const unsigned c = cnt[k];
                if (c != 0) {
                    const unsigned a = off[k];
                    SKEL_V acc = seen[k] ? SKEL_MERGE(tbl[k], sorted[a]) : sorted[a];
                    for (unsigned q = a + 1; q < a + c; ++q) acc = SKEL_MERGE(acc, sorted[q]);
                    tbl[k] = acc;
                    seen[k] = 1;
                }
            }
        }
        __syncthreads();
    }
    if (outside != 0) {
        atomicAdd(&skel_outside[0], outside);
        atomicMax(&skel_outside[1], worst);
    }
#if SKEL_LOCAL_TABLE
    for (unsigned k = lid; k < keys; k += SKEL_WG_RBK) {
        out_seen[group * keys + k] = seen[k];
        if (seen[k]) out_tbl[group * keys + k] = tbl[k];
    }
#endif
}

extern "C" __global__ void __launch_bounds__(256)
skel_rbk_sum(const SKEL_V* __restrict__ tbl, const unsigned* __restrict__ seen, unsigned rows,
             unsigned keys, const SKEL_V zero, SKEL_V* __restrict__ sums SKEL_FP) {
    for (unsigned k = blockIdx.x * blockDim.x + threadIdx.x; k < keys; k += gridDim.x * blockDim.x) {
        SKEL_V acc = zero;
        for (unsigned r = 0; r < rows; ++r) {
            const skel_u64 i = (skel_u64)r * keys + k;
            if (seen[i]) acc = SKEL_MERGE(acc, tbl[i]);
        }
        sums[k] = acc;
    }
}
