// The device copy bound of the Filter benches (benches/filter.rs, benches/peers/
// filter_peers.py): a grid-stride copy of n4 16-byte words, one load and one store each.
extern "C" __global__ void copy4(const int4* __restrict__ a, int4* __restrict__ b,
                                 unsigned long long n4) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         i < n4; i += stride)
        b[i] = a[i];
}
