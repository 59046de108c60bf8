// Sort: LSD radix sort of 8-bit digits with decoupled look-back per digit (the structure of
// CUB's onesweep, as cuda/sort.cu):
//  1. skel_sort_hist: the counts of every digit of every pass, in one read of the keys
//     (local histograms, then global atomics);
//  2. skel_sort_scan, once per pass over its 256 counts: where each digit's keys start;
//  3. skel_sort_pass, once per digit: a work-group takes the next tile from a global atomic
//     counter (so every earlier tile belongs to a work-group that already started: the
//     look-back waits only for work-groups that are running, on every device where a
//     started work-group keeps running, PoCL's CPU drivers included, which run a work-group
//     to its end on one thread). Work-item l owns a contiguous run of SKEL_K keys; its digit
//     counts, scanned over (digit, work-item) in local memory, give every key its place
//     among the tile's keys of its digit in position order (stable). Work-item l publishes
//     the tile's counts of digits l, l + SKEL_WG, .. (AGGREGATE; tile 0 INCLUSIVE at once),
//     looks back over the earlier tiles' words of those digits until it meets an INCLUSIVE
//     one, and publishes its own inclusive prefix; each key goes to `digit offset + prefix
//     of the earlier tiles + rank among its digit in the tile`.
//  3'. on CPU devices, instead: skel_sort_count (each tile's digit counts), skel_sort_scan
//     over all of them, skel_sort_scatter (the same stable ranking, each tile's start of
//     digit d read from the scanned counts). A work-group spinning on a predecessor's word
//     holds a CPU thread that the predecessor may need (PoCL runs more work-groups than there
//     are cores, and OpenCL promises no forward progress between work-groups): measured on 2
//     busy cores of PoCL, the look-back pass was 3x slower than the three kernels.
//  4. skel_sort_gather: dst[i] = src[idx[i]] of `size`-byte elements (a plain copy
//     without idx): values sorted as positions, and the last pass's keys back to the
//     operand when the number of passes is odd; skel_sort_zero clears the look-back state.
// Status words (64-bit): flag in the top two bits (1 aggregate, 2 inclusive), count below,
// written with one store and read with one load.
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

#define SKEL_PASSES (SKEL_KBITS / 8)
#define SKEL_FLAG_SHIFT 62
#define SKEL_AGGREGATE (1ul << SKEL_FLAG_SHIFT)
#define SKEL_INCLUSIVE (2ul << SKEL_FLAG_SHIFT)
#define SKEL_COUNT_MASK (SKEL_AGGREGATE - 1ul)

__kernel __attribute__((reqd_work_group_size(SKEL_WG, 1, 1)))
void skel_sort_hist(__global const skel_key* keys, ulong koff, ulong n, __global uint* hist)
{
    __local uint h[SKEL_PASSES * 256];
    uint l = (uint)get_local_id(0);
    for (uint d = l; d < SKEL_PASSES * 256; d += SKEL_WG) h[d] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (ulong p = get_global_id(0); p < n; p += get_global_size(0)) {
        skel_key x = skel_order(keys[koff + p]);
        for (uint q = 0; q < SKEL_PASSES; ++q) atomic_inc(&h[q * 256 + (uint)((x >> (8 * q)) & 0xffu)]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint d = l; d < SKEL_PASSES * 256; d += SKEL_WG)
        if (h[d] != 0) atomic_add(&hist[d], h[d]);
}

__kernel void skel_sort_zero(__global uint* p, ulong words)
{
    ulong i = get_global_id(0);
    if (i < words) p[i] = 0;
}

__kernel __attribute__((reqd_work_group_size(SKEL_WG, 1, 1)))
void skel_sort_scan(__global uint* all_counts, ulong at, ulong len)
{
    __global uint* counts = all_counts + at;
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
void skel_sort_pass(__global const skel_key* kin, ulong kin_off, __global skel_key* kout,
                    ulong kout_off, __global const uint* vin, __global uint* vout, uint vmode,
                    ulong n, uint pass, ulong tiles, __global const uint* all_offsets,
                    __global ulong* all_status, __global uint* counters)
{
    // This pass's digit offsets, look-back words and tile counter.
    const uint shift = 8 * pass;
    __global const uint* offsets = all_offsets + pass * 256;
    __global ulong* status_words = all_status + (ulong)pass * tiles * 256;
    __global uint* counter = counters + pass;
    // cnt[d * SKEL_WG + l]: keys of digit d in work-item l's run, then where they start.
    __local ushort cnt[256 * SKEL_WG];
    __local ushort tstart[256];
    __local ulong gbase[256];
    __local uint tot[SKEL_WG];
    __local uint s_tile;
    volatile __global ulong* status = status_words;
    uint l = (uint)get_local_id(0);
    if (l == 0) s_tile = atomic_inc(counter);
    for (uint i = l; i < 256 * SKEL_WG; i += SKEL_WG) cnt[i] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    ulong g = s_tile;
    ulong lo = g * SKEL_TILE + (ulong)l * SKEL_K;
    for (uint k = 0; k < SKEL_K; ++k) {
        ulong p = lo + k;
        if (p < n) cnt[skel_digit(kin[kin_off + p], shift) * SKEL_WG + l] += 1;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    // The tile's count of each of this work-item's digits, published, then its prefix over
    // the earlier tiles through the look-back.
    for (uint d = l; d < 256; d += SKEL_WG) {
        uint c = 0;
        for (uint j = 0; j < SKEL_WG; ++j) c += cnt[d * SKEL_WG + j];
        status[g * 256 + d] = (g == 0 ? SKEL_INCLUSIVE : SKEL_AGGREGATE) | (ulong)c;
        gbase[d] = c; // the count, until the look-back below turns it into the start
    }
    for (uint d = l; d < 256; d += SKEL_WG) {
        ulong prefix = 0;
        if (g != 0) {
            for (long t = (long)g - 1; t >= 0; --t) {
                ulong word;
                do {
                    word = status[(ulong)t * 256 + d];
                } while ((word >> SKEL_FLAG_SHIFT) == 0);
                prefix += word & SKEL_COUNT_MASK;
                if ((word >> SKEL_FLAG_SHIFT) == 2) break;
            }
            status[g * 256 + d] = SKEL_INCLUSIVE | (prefix + gbase[d]);
        }
        gbase[d] = (ulong)offsets[d] + prefix;
    }
    // Exclusive scan of cnt in (digit, work-item) order: work-item l owns 256 / SKEL_WG
    // digits' rows.
    const uint per = (256 / SKEL_WG) * SKEL_WG;
    uint sum = 0;
    for (uint i = l * per; i < (l + 1) * per; ++i) sum += cnt[i];
    barrier(CLK_LOCAL_MEM_FENCE);
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
            ulong to = gbase[d] + (at - tstart[d]);
            kout[kout_off + to] = x;
            if (vmode == 1) vout[to] = (uint)p;
            else if (vmode == 2) vout[to] = vin[p];
        }
    }
}

// The three-kernel pass of CPU devices: per-tile digit counts into counts[d * groups + g]
// (digit-major: the scan's order is the output's order).
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

// The three-kernel pass (CPU devices): vmode as in skel_sort_pass.
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
