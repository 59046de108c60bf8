// ReduceByKey: each work-group merges tiles of SKEL_TILE positions into its own table of
// `keys` values (with a `seen` flag per key), then skel_rbk_sum merges the groups' tables
// into `sums`, starting from `zero` (V's default).
// Per tile: every work-item computes the (key, value) of SKEL_ITEMS positions; an integer
// counting sort in local memory groups the values by key (atomic slot per key, a scan of
// the counts, a scatter); each key's run is then merged in order by SKEL_R work-items
// (`parts` sub-runs, then one work-item per key folds them into the table). Values are
// only ever merged by one work-item at a time: no atomics on values, any V works.
// Defines: SKEL_V, SKEL_KV(p) (the key function at position p of the call: a struct with
// the key in .f0 and the value in .f1), SKEL_MERGE(a, b), SKEL_PARAMS (container arguments,
// inputs, uniforms, fault record), SKEL_ITEMS, SKEL_TS (__local: the table, counts and
// offsets are the work-group's local memory; __global: rows of the scratch, one per group).

#define SKEL_TILE (SKEL_WG_RBK * SKEL_ITEMS)

__kernel void skel_rbk(ulong n, ulong cols, ulong skel_base, uint keys, uint parts,
                       SKEL_V zero,
                       SKEL_TS uint* cnt0, SKEL_TS uint* off0, SKEL_TS uint* seen0,
                       SKEL_TS SKEL_V* tbl0,
                       __global SKEL_V* out_tbl, __global uint* out_seen,
                       __global uint* skel_outside,
                       __local SKEL_V* sorted, __local SKEL_V* pacc, __local uint* phas,
                       __local uint* scan SKEL_PARAMS) {
    (void)cols;
    (void)skel_base;
    const uint lid = get_local_id(0);
    const ulong group = get_group_id(0), groups = get_num_groups(0);
#if SKEL_LOCAL_TABLE
    const ulong row = 0;
#else
    const ulong row = group * keys;
#endif
    SKEL_TS uint* cnt = cnt0 + row;
    SKEL_TS uint* off = off0 + row;
    SKEL_TS uint* seen = seen0 + row;
    SKEL_TS SKEL_V* tbl = tbl0 + row;
    for (uint k = lid; k < keys; k += SKEL_WG_RBK) seen[k] = 0;
    uint outside = 0, worst = 0;
    const uint seg = (keys + SKEL_WG_RBK - 1) / SKEL_WG_RBK;
    const uint R = parts;
    for (ulong t0 = group * SKEL_TILE; t0 < n; t0 += groups * SKEL_TILE) {
        for (uint k = lid; k < keys; k += SKEL_WG_RBK) cnt[k] = 0;
        barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
        uint key[SKEL_ITEMS], slot[SKEL_ITEMS];
        SKEL_V val[SKEL_ITEMS];
        for (uint j = 0; j < SKEL_ITEMS; ++j) {
            const ulong p = t0 + j * SKEL_WG_RBK + lid;
            key[j] = keys;
            if (p < n) {
                const SKEL_KVT kv = SKEL_KV(p);
                if (kv.f0 < keys) {
                    key[j] = kv.f0;
                    val[j] = kv.f1;
                    slot[j] = atomic_inc(&cnt[kv.f0]);
                } else {
                    outside += 1;
                    worst = max(worst, kv.f0);
                }
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
        // Exclusive scan of the counts: each work-item sums a segment, the segment sums
        // are scanned (Hillis-Steele), then each segment is written out.
        const uint lo = min(keys, lid * seg), hi = min(keys, lo + seg);
        uint s = 0;
        for (uint k = lo; k < hi; ++k) s += cnt[k];
        scan[lid] = s;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint d = 1; d < SKEL_WG_RBK; d <<= 1) {
            const uint add = lid >= d ? scan[lid - d] : 0;
            barrier(CLK_LOCAL_MEM_FENCE);
            scan[lid] += add;
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        uint run = scan[lid] - s;
        for (uint k = lo; k < hi; ++k) {
            off[k] = run;
            run += cnt[k];
        }
        barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
        for (uint j = 0; j < SKEL_ITEMS; ++j) {
            if (key[j] < keys) sorted[off[key[j]] + slot[j]] = val[j];
        }
        barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
        if (R > 1) {
            // keys * R <= SKEL_WG_RBK: work-item lid merges sub-run lid / keys of key
            // lid % keys.
            if (lid < keys * R) {
                const uint k = lid % keys, r = lid / keys, c = cnt[k];
                const uint a = off[k] + c * r / R, b = off[k] + c * (r + 1) / R;
                uint h = 0;
                if (a < b) {
                    SKEL_V acc = sorted[a];
                    for (uint q = a + 1; q < b; ++q) acc = SKEL_MERGE(acc, sorted[q]);
                    pacc[lid] = acc;
                    h = 1;
                }
                phas[lid] = h;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            for (uint k = lid; k < keys; k += SKEL_WG_RBK) {
                for (uint r = 0; r < R; ++r) {
                    const uint i = r * keys + k;
                    if (phas[i]) {
                        tbl[k] = seen[k] ? SKEL_MERGE(tbl[k], pacc[i]) : pacc[i];
                        seen[k] = 1;
                    }
                }
            }
        } else {
            for (uint k = lid; k < keys; k += SKEL_WG_RBK) {
                const uint c = cnt[k];
                if (c != 0) {
                    const uint a = off[k];
                    SKEL_V acc = seen[k] ? SKEL_MERGE(tbl[k], sorted[a]) : sorted[a];
                    for (uint q = a + 1; q < a + c; ++q) acc = SKEL_MERGE(acc, sorted[q]);
                    tbl[k] = acc;
                    seen[k] = 1;
                }
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    }
    if (outside != 0) {
        atomic_add(&skel_outside[0], outside);
        atomic_max(&skel_outside[1], worst);
    }
#if SKEL_LOCAL_TABLE
    for (uint k = lid; k < keys; k += SKEL_WG_RBK) {
        out_seen[group * keys + k] = seen[k];
        if (seen[k]) out_tbl[group * keys + k] = tbl[k];
    }
#else
    (void)out_tbl;
    (void)out_seen;
#endif
    (void)zero;
}

__kernel void skel_rbk_sum(__global const SKEL_V* tbl, __global const uint* seen, uint rows,
                           uint keys, SKEL_V zero, __global SKEL_V* sums, ulong sums_off
                           SKEL_FP) {
    for (uint k = get_global_id(0); k < keys; k += get_global_size(0)) {
        SKEL_V acc = zero;
        for (uint r = 0; r < rows; ++r) {
            const ulong i = (ulong)r * keys + k;
            if (seen[i]) acc = SKEL_MERGE(acc, tbl[i]);
        }
        sums[sums_off + k] = acc;
    }
}
