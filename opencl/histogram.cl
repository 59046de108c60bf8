// Histogram: part[row][b] counts the positions whose bin is b, then skel_histogram_sum adds
// the rows into `counts` (the count type SKEL_C), overwriting it or, for a later piece of a
// long call, adding to it.
// Defines: SKEL_CALL(p) (the bin function at position p of this piece), SKEL_PARAMS (the
// container arguments, the inputs, the uniforms and the fault record of a checked call),
// SKEL_C, SKEL_LOCAL (1: each work-group counts into `copies` sub-histograms in local
// memory, `bins + 1` words apart so that work-items counting the same bin in different
// copies use different banks, and writes their sum to its own row; 0: the bins do not fit,
// work-group g counts with global atomics into row g % rows).
// Bins outside 0..bins are not counted; skel_outside[0] counts them and skel_outside[1] keeps
// the largest, which a checked call reports.

__kernel void skel_histogram_zero(__global uint* part, ulong words) {
    for (ulong i = get_global_id(0); i < words; i += get_global_size(0)) part[i] = 0;
}

__kernel void skel_histogram(ulong n, ulong cols, ulong skel_base, uint bins, uint rows, uint copies,
                             __global uint* part, __global uint* skel_outside,
                             __local uint* skel_h SKEL_PARAMS) {
    (void)cols;
    (void)skel_base;
    const uint lid = get_local_id(0);
    const uint wg = get_local_size(0);
    const ulong stride = get_global_size(0);
#if SKEL_LOCAL
    const uint span = bins + 1;
    for (uint b = lid; b < span * copies; b += wg) skel_h[b] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    __local uint* h = skel_h + (lid % copies) * span;
#else
    (void)rows;
    (void)copies;
    __global uint* h = part + (ulong)(get_group_id(0) % rows) * bins;
#endif
    uint outside = 0, worst = 0;
    for (ulong p = get_global_id(0); p < n; p += stride) {
        const uint b = SKEL_CALL(p);
        if (b < bins) {
            atomic_inc(&h[b]);
        } else {
            outside += 1;
            worst = max(worst, b);
        }
    }
    if (outside != 0) {
        atomic_add(&skel_outside[0], outside);
        atomic_max(&skel_outside[1], worst);
    }
#if SKEL_LOCAL
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint b = lid; b < bins; b += wg) {
        uint s = 0;
        for (uint c = 0; c < copies; ++c) s += skel_h[c * span + b];
        part[(ulong)get_group_id(0) * bins + b] = s;
    }
#endif
}

__kernel void skel_histogram_sum(__global const uint* part, uint rows, uint bins,
                                 __global SKEL_C* counts, ulong counts_off, int accumulate) {
    for (uint b = get_global_id(0); b < bins; b += get_global_size(0)) {
        SKEL_C s = accumulate ? counts[counts_off + b] : (SKEL_C)0;
        for (uint r = 0; r < rows; ++r) s += (SKEL_C)part[(ulong)r * bins + b];
        counts[counts_off + b] = s;
    }
}
