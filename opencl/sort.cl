// Sort: LSD radix sort of 8-bit digits, three kernels per digit (reduce, scan, scatter).
// OpenCL promises no forward progress between work-groups (PoCL's CPU driver runs a
// work-group to its end before it starts another on that thread): a work-group spinning on
// an earlier one's look-back word could wait forever, so the per-digit prefix is not a
// decoupled look-back as on CUDA but a separate scan kernel between the count and the
// scatter kernels, which is correct on every device.
//  1. skel_sort_count: work-group g counts the digits of its tile (SKEL_WG * SKEL_K keys)
//     into counts[d * groups + g] (digit-major: the scan's order is the output's order);
//  2. skel_sort_scan: one work-group turns counts into exclusive offsets, in place;
//  3. skel_sort_scatter: work-item l of group g owns a contiguous run of SKEL_K keys of the
//     tile; its digit counts, scanned over (digit, work-item) in local memory, give every key
//     its place among the tile's keys of its digit in position order (stable), and
//     counts[d * groups + g] where the tile's keys of digit d start in the output.
//  4. skel_sort_gather: dst[i] = src[idx[i]] of `size`-byte elements (a plain copy
//     without idx): values sorted as positions, and the last pass's keys back to the
//     operand when the number of passes is odd.
// Instantiated with: SKEL_KEY (the unsigned type of the keys' width), SKEL_KBITS, SKEL_KIND
// (0 unsigned, 1 two's complement, 2 IEEE float), SKEL_WG (divides 256), SKEL_K.

#define SKEL_TILE ((ulong)SKEL_WG * SKEL_K)
typedef SKEL_KEY skel_key;

skel_key skel_order(skel_key x)
{
    const skel_key sign = (skel_key)((skel_key)1 << (SKEL_KBITS - 1));
#if SKEL_KIND == 0
    return x;
#elif SKEL_KIND == 1
    return (skel_key)(x ^ sign);
#else
    return (x & sign) ? (skel_key)~x : (skel_key)(x | sign);
#endif
}

uint skel_digit(skel_key x, uint shift)
{
    return (uint)((skel_order(x) >> shift) & 0xffu);
}

__kernel __attribute__((reqd_work_group_size(SKEL_WG, 1, 1)))
void skel_sort_count(__global const skel_key* keys, ulong koff, ulong n, uint shift,
                     __global uint* counts, ulong groups)
{
    __local uint h[256];
    uint l = (uint)get_local_id(0);
    ulong g = get_group_id(0);
    for (uint d = l; d < 256; d += SKEL_WG) h[d] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    ulong lo = g * SKEL_TILE;
    for (uint k = 0; k < SKEL_K; ++k) {
        ulong p = lo + (ulong)k * SKEL_WG + l;
        if (p < n) atomic_inc(&h[skel_digit(keys[koff + p], shift)]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint d = l; d < 256; d += SKEL_WG) counts[(ulong)d * groups + g] = h[d];
}

__kernel __attribute__((reqd_work_group_size(SKEL_WG, 1, 1)))
void skel_sort_scan(__global uint* counts, ulong len)
{
    __local uint tot[SKEL_WG];
    uint l = (uint)get_local_id(0);
    ulong seg = (len + SKEL_WG - 1) / SKEL_WG;
    ulong lo = min((ulong)l * seg, len), hi = min(lo + seg, len);
    uint sum = 0;
    for (ulong i = lo; i < hi; ++i) sum += counts[i];
    tot[l] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (l == 0) {
        uint run = 0;
        for (uint j = 0; j < SKEL_WG; ++j) {
            uint t = tot[j];
            tot[j] = run;
            run += t;
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    uint run = tot[l];
    for (ulong i = lo; i < hi; ++i) {
        uint c = counts[i];
        counts[i] = run;
        run += c;
    }
}

// vmode: 0 no values, 1 the values are the keys' positions (first pass), 2 from vin.
__kernel __attribute__((reqd_work_group_size(SKEL_WG, 1, 1)))
void skel_sort_scatter(__global const skel_key* kin, ulong kin_off, __global skel_key* kout,
                       ulong kout_off, __global const uint* vin, __global uint* vout, uint vmode,
                       ulong n, uint shift, __global const uint* counts, ulong groups)
{
    // cnt[d * SKEL_WG + l]: keys of digit d in work-item l's run, then where they start.
    __local ushort cnt[256 * SKEL_WG];
    __local ushort tstart[256];
    __local uint tot[SKEL_WG];
    uint l = (uint)get_local_id(0);
    ulong g = get_group_id(0);
    ulong lo = g * SKEL_TILE + (ulong)l * SKEL_K;
    for (uint i = l; i < 256 * SKEL_WG; i += SKEL_WG) cnt[i] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint k = 0; k < SKEL_K; ++k) {
        ulong p = lo + k;
        if (p < n) cnt[skel_digit(kin[kin_off + p], shift) * SKEL_WG + l] += 1;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    // Exclusive scan of cnt in (digit, work-item) order: work-item l owns 256 / SKEL_WG
    // digits' rows.
    const uint per = (256 / SKEL_WG) * SKEL_WG;
    uint sum = 0;
    for (uint i = l * per; i < (l + 1) * per; ++i) sum += cnt[i];
    tot[l] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (l == 0) {
        uint run = 0;
        for (uint j = 0; j < SKEL_WG; ++j) {
            uint t = tot[j];
            tot[j] = run;
            run += t;
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    uint run = tot[l];
    for (uint i = l * per; i < (l + 1) * per; ++i) {
        uint c = cnt[i];
        cnt[i] = (ushort)run;
        run += c;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint d = l; d < 256; d += SKEL_WG) tstart[d] = cnt[d * SKEL_WG];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint k = 0; k < SKEL_K; ++k) {
        ulong p = lo + k;
        if (p < n) {
            skel_key x = kin[kin_off + p];
            uint d = skel_digit(x, shift);
            uint at = cnt[d * SKEL_WG + l];
            cnt[d * SKEL_WG + l] = (ushort)(at + 1);
            ulong to = (ulong)counts[(ulong)d * groups + g] + (at - tstart[d]);
            kout[kout_off + to] = x;
            if (vmode == 1) vout[to] = (uint)p;
            else if (vmode == 2) vout[to] = vin[p];
        }
    }
}

__kernel void skel_sort_gather(__global const uchar* src, ulong src_off, __global uchar* dst,
                               ulong dst_off, __global const uint* idx, uint use_idx, ulong n,
                               uint size)
{
    ulong i = get_global_id(0);
    if (i >= n) return;
    ulong from = use_idx ? (ulong)idx[i] : i;
    __global const uchar* s = src + src_off + from * size;
    __global uchar* t = dst + dst_off + i * size;
    for (uint b = 0; b < size; ++b) t[b] = s[b];
}
