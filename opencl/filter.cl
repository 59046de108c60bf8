// Filter: stable stream compaction in three kernels (reduce, scan, scatter).
//  1. skel_filter_count: work-group g counts the values its tile of SKEL_WG*SKEL_K keeps
//     (striped, coalesced loads) into counts[g];
//  2. skel_filter_offsets: one work-group turns counts into exclusive offsets, in place,
//     and writes the total to total[0];
//  3. skel_filter_scatter: work-item l of group g owns a contiguous run of SKEL_K values;
//     a scan of the runs' counts in local memory gives each kept value its position
//     offsets[g] + (kept before it in the tile), so the order is the input's.
// The predicate runs twice per value (1 and 3); no flags are stored between kernels.
// Instantiated with: SKEL_T, SKEL_WG, SKEL_K, SKEL_PARAMS (element and uniform parameters),
// SKEL_PRED(p) (the predicate of element p).

#define SKEL_TILE ((ulong)SKEL_WG * SKEL_K)

// Inclusive scan of one uint per work-item in local memory (Hillis-Steele); returns the
// work-item's inclusive value. Leaves `s` holding the scan.
uint skel_local_scan(__local uint* s, uint l, uint v)
{
    s[l] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint d = 1; d < SKEL_WG; d <<= 1) {
        uint t = l >= d ? s[l - d] : 0u;
        barrier(CLK_LOCAL_MEM_FENCE);
        s[l] += t;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    return s[l];
}

__kernel __attribute__((reqd_work_group_size(SKEL_WG, 1, 1)))
void skel_filter_count(ulong n, __global ulong* counts SKEL_PARAMS)
{
    __local uint s[SKEL_WG];
    ulong lo = get_group_id(0) * SKEL_TILE;
    uint l = (uint)get_local_id(0);
    uint c = 0;
    for (uint k = 0; k < SKEL_K; ++k) {
        ulong p = lo + (ulong)k * SKEL_WG + l;
        if (p < n && SKEL_PRED(p)) ++c;
    }
    uint sum = skel_local_scan(s, l, c);
    if (l == SKEL_WG - 1) counts[get_group_id(0)] = sum;
}

__kernel __attribute__((reqd_work_group_size(SKEL_WG, 1, 1)))
void skel_filter_offsets(__global ulong* counts, ulong groups, __global ulong* total)
{
    __local ulong s[SKEL_WG];
    uint l = (uint)get_local_id(0);
    ulong carry = 0;
    for (ulong b = 0; b < groups; b += SKEL_WG) {
        ulong v = b + l < groups ? counts[b + l] : 0;
        s[l] = v;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint d = 1; d < SKEL_WG; d <<= 1) {
            ulong t = l >= d ? s[l - d] : 0;
            barrier(CLK_LOCAL_MEM_FENCE);
            s[l] += t;
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (b + l < groups) counts[b + l] = carry + s[l] - v;
        carry += s[SKEL_WG - 1];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0) total[0] = carry;
}

__kernel __attribute__((reqd_work_group_size(SKEL_WG, 1, 1)))
void skel_filter_scatter(ulong n, __global const ulong* offsets, __global SKEL_T* out,
                         ulong out_off SKEL_PARAMS)
{
    __local uint s[SKEL_WG];
    ulong g = get_group_id(0);
    uint l = (uint)get_local_id(0);
    ulong a = g * SKEL_TILE + (ulong)l * SKEL_K;
    uint keep = 0;
    uint c = 0;
    for (uint k = 0; k < SKEL_K; ++k) {
        if (a + k < n && SKEL_PRED(a + k)) {
            keep |= 1u << k;
            ++c;
        }
    }
    ulong at = out_off + offsets[g] + (skel_local_scan(s, l, c) - c);
    for (uint k = 0; k < SKEL_K; ++k) {
        if (keep & (1u << k)) out[at++] = in0[in0_off + a + k];
    }
}
