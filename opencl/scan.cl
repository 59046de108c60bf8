// Work-efficient scan across work-groups (f associative, maybe not commutative):
//  1. skel_scan_blocks: each work-group scans a block of SKEL_WG*SKEL_K elements
//     (each work-item a contiguous run of SKEL_K, then a scan of the run totals in local
//     memory) and writes the block total to sums[g];
//  2. the host recursively scans `sums` the same way;
//  3. skel_scan_add: element p of block b > 0 becomes f(sums[b-1], out[p]).
// Exclusive scans run 1-3 into a temporary and finish with skel_scan_exclusive.
// Work-items without elements never call f.
// Instantiated with: SKEL_T, SKEL_F(a, b), SKEL_WG, SKEL_K.
__kernel __attribute__((reqd_work_group_size(SKEL_WG, 1, 1)))
void skel_scan_blocks(__global const SKEL_T* in, ulong in_off, ulong n,
                      __global SKEL_T* out, ulong out_off, __global SKEL_T* sums)
{
    __local SKEL_T totals[SKEL_WG];
    ulong g = get_group_id(0);
    uint l = (uint)get_local_id(0);
    ulong lo = g * (ulong)(SKEL_WG * SKEL_K);
    ulong len = n - lo < (ulong)(SKEL_WG * SKEL_K) ? n - lo : (ulong)(SKEL_WG * SKEL_K);
    uint valid = (uint)((len + SKEL_K - 1) / SKEL_K);
    ulong a = lo + (ulong)l * SKEL_K;
    ulong b = a + SKEL_K < lo + len ? a + SKEL_K : lo + len;
    if (l < valid) {
        SKEL_T acc = in[in_off + a];
        out[out_off + a] = acc;
        for (ulong p = a + 1; p < b; ++p) {
            acc = SKEL_F(acc, in[in_off + p]);
            out[out_off + p] = acc;
        }
        totals[l] = acc;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = 1; s < SKEL_WG; s <<= 1) {
        bool up = l >= s && l < valid;
        SKEL_T t;
        if (up) t = SKEL_F(totals[l - s], totals[l]);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (up) totals[l] = t;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l > 0 && l < valid) {
        SKEL_T prefix = totals[l - 1];
        for (ulong p = a; p < b; ++p) {
            out[out_off + p] = SKEL_F(prefix, out[out_off + p]);
        }
    }
    if (l == 0 && valid > 0) {
        sums[g] = totals[valid - 1];
    }
}

__kernel void skel_scan_add(__global SKEL_T* out, ulong out_off, ulong n, __global const SKEL_T* sums)
{
    ulong p = get_global_id(0);
    if (p >= n) return;
    ulong b = p / (ulong)(SKEL_WG * SKEL_K);
    if (b > 0) {
        out[out_off + p] = SKEL_F(sums[b - 1], out[out_off + p]);
    }
}

__kernel void skel_scan_exclusive(__global const SKEL_T* incl, ulong n,
                                  __global SKEL_T* out, ulong out_off, SKEL_T start)
{
    ulong p = get_global_id(0);
    if (p >= n) return;
    out[out_off + p] = p == 0 ? start : SKEL_F(start, incl[p - 1]);
}
