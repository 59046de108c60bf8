// Histogram: part[row][b] counts the positions of the call whose bin is b; skel_histogram_sum
// then adds the rows into `counts` (count type SKEL_C), overwriting it.
// Defines: SKEL_BLOCK (threads per block), SKEL_PARAMS (the container arguments, inputs,
// uniforms and, checked, the fault record), SKEL_CALL(i) (the bin of position i of this
// chunk), SKEL_C, SKEL_SHARED (1: `copies` sub-histograms per block in dynamic shared
// memory, one per group of warps, `bins + 1` words apart so that the same bin of two copies
// lies in different banks, summed into the block's own row at the end; 0: the bins do not
// fit, block g counts with global atomics into row g % rows), SKEL_VEC (1: one input whose
// values a thread loads SKEL_V at a time as one 16-byte access; SKEL_CALLV(i, v) is then the
// call for value v of the load at position i, which reads skel_u.t[v]).
// Bins outside 0..bins are not counted: skel_outside[0] counts them and skel_outside[1]
// keeps the largest, which a checked call reports.

__device__ __forceinline__ void skel_count(unsigned* h, unsigned b, unsigned bins,
                                           unsigned& outside, unsigned& worst) {
    if (b < bins) {
        atomicAdd(&h[b], 1u);
    } else {
        outside += 1;
        worst = max(worst, b);
    }
}

extern "C" __global__ void __launch_bounds__(SKEL_BLOCK)
skel_histogram(unsigned* __restrict__ part, skel_u64 n, skel_u64 cols, skel_u64 skel_base,
               unsigned bins, unsigned rows, unsigned copies, unsigned* __restrict__ skel_outside
               SKEL_PARAMS) {
    (void)cols;
    (void)skel_base;
#if SKEL_SHARED
    extern __shared__ unsigned skel_h[];
    const unsigned span = bins + 1;
    for (unsigned b = threadIdx.x; b < span * copies; b += blockDim.x) skel_h[b] = 0;
    __syncthreads();
    unsigned* h = skel_h + ((threadIdx.x / 32) % copies) * span;
    (void)rows;
#else
    unsigned* h = part + (skel_u64)(blockIdx.x % rows) * bins;
    (void)copies;
#endif
    unsigned outside = 0, worst = 0;
    const skel_u64 stride = (skel_u64)gridDim.x * blockDim.x;
    skel_u64 i = (skel_u64)blockIdx.x * blockDim.x + threadIdx.x;
#if SKEL_VEC
    if (((size_t)in0 & 15) == 0) {
        const skel_u64 nq = n / SKEL_V;
        for (skel_u64 q = i; q < nq; q += stride) {
            union { uint4 q; SKEL_IN_T t[SKEL_V]; } skel_u;
            skel_u.q = __ldg(reinterpret_cast<const uint4*>(in0) + q);
            const skel_u64 skel_at = q * SKEL_V;
            (void)skel_at;
#pragma unroll
            for (int v = 0; v < SKEL_V; ++v) skel_count(h, SKEL_CALLV(skel_at, v), bins, outside, worst);
        }
        i += nq * SKEL_V;
    }
#endif
    for (; i < n; i += stride) skel_count(h, SKEL_CALL(i), bins, outside, worst);
    if (outside != 0) {
        atomicAdd(&skel_outside[0], outside);
        atomicMax(&skel_outside[1], worst);
    }
#if SKEL_SHARED
    __syncthreads();
    for (unsigned b = threadIdx.x; b < bins; b += blockDim.x) {
        unsigned s = 0;
        for (unsigned c = 0; c < copies; ++c) s += skel_h[c * span + b];
        part[(skel_u64)blockIdx.x * bins + b] = s;
    }
#endif
}

extern "C" __global__ void __launch_bounds__(256)
skel_histogram_sum(const unsigned* __restrict__ part, unsigned rows, unsigned bins,
                   SKEL_C* __restrict__ counts) {
    for (unsigned b = blockIdx.x * blockDim.x + threadIdx.x; b < bins; b += gridDim.x * blockDim.x) {
        SKEL_C s = 0;
        for (unsigned r = 0; r < rows; ++r) s += (SKEL_C)part[(skel_u64)r * bins + b];
        counts[b] = s;
    }
}
