#!/usr/bin/env python3
"""Peers of skel's Histogram and ReduceByKey on the GPU machine, device-resident, the same
sizes as benches/histogram.rs (--full):
  - Histogram, 256 bins of 2^28 u8: torch.bincount(x, minlength=256) (x widened to int64
    once, outside the timing: bincount does not take u8), torch.histc on the u8 values as
    float (skipped: it needs floats), cupy.bincount (CUB's histogram) on the u8 array,
    and a device-to-device copy of the 2^28 bytes (the copy bound);
  - ReduceByKey, the k-means step, 2^24 2D f32 points, k = 16, 64, 256: a hand-written
    CuPy RawKernel (nearest centre, then per-block sums in shared memory with shared
    atomics, merged with global atomicAdd: the usual atomics kernel), and torch's
    index_add_ after an argmin of the distance matrix (peer of the composition).
Run on the GPU machine:
    python3 benches/peers/histogram_peers.py [log2 n] [log2 points]
"""
import os, sys

log2 = int(sys.argv[1]) if len(sys.argv) > 1 else 28
log2p = int(sys.argv[2]) if len(sys.argv) > 2 else 24
n, npts = 1 << log2, 1 << log2p
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peerlib import best, cupy  # noqa: E402

print(f"## Histogram: 256 bins of 2^{log2} u8 ({n / 1e9:.3f} GB read)")
x8 = torch.randint(0, 256, (n,), device="cuda", dtype=torch.uint8)
want = None
y = torch.empty_like(x8)
t = best(lambda: y.copy_(x8), warm=3)
print(f"| copy bound: torch d2d copy of the input | {t * 1e3:.3f} ms | {n / t / 1e9:.0f} GB/s |")
try:
    x64 = x8.to(torch.int64)
    want = torch.bincount(x64, minlength=256)
    t = best(lambda: torch.bincount(x64, minlength=256), warm=3)
    print(f"| torch.bincount (int64 input, widened outside the timing) | {t * 1e3:.3f} ms | {n / t / 1e9:.0f} GB/s of u8 |")
    del x64
except RuntimeError as e:  # out of memory for the int64 copy
    print("torch.bincount skipped:", e)
cp = cupy()
if cp is not None:
    c8 = cp.asarray(x8)
    got = cp.bincount(c8, minlength=256)
    if want is not None:
        assert (torch.as_tensor(got, device="cuda") == want).all(), "cupy.bincount differs"
    t = best(lambda: cp.bincount(c8, minlength=256), warm=3)
    print(f"| cupy.bincount (u8 input, CUB) | {t * 1e3:.3f} ms | {n / t / 1e9:.0f} GB/s |")

print(f"\n## ReduceByKey: k-means cluster sums of 2^{log2p} 2D f32 points")
g = torch.Generator(device="cuda").manual_seed(11)
pts = torch.rand((npts, 2), device="cuda", generator=g)
KERNEL = r"""
extern "C" __global__ void kmeans_sums(const float2* __restrict__ p, long long n,
                                       const float2* __restrict__ c, int k,
                                       float* __restrict__ sx, float* __restrict__ sy,
                                       unsigned* __restrict__ cnt) {
    extern __shared__ float sh[];
    float* bx = sh;
    float* by = sh + k;
    unsigned* bn = (unsigned*)(sh + 2 * k);
    for (int j = threadIdx.x; j < k; j += blockDim.x) { bx[j] = 0.f; by[j] = 0.f; bn[j] = 0u; }
    __syncthreads();
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const float2 q = p[i];
        int best = 0;
        float dist = 3.4e38f;
        for (int j = 0; j < k; ++j) {
            const float dx = q.x - c[j].x, dy = q.y - c[j].y;
            const float d = dx * dx + dy * dy;
            if (d < dist) { dist = d; best = j; }
        }
        atomicAdd(&bx[best], q.x);
        atomicAdd(&by[best], q.y);
        atomicAdd(&bn[best], 1u);
    }
    __syncthreads();
    for (int j = threadIdx.x; j < k; j += blockDim.x) {
        atomicAdd(&sx[j], bx[j]);
        atomicAdd(&sy[j], by[j]);
        atomicAdd(&cnt[j], bn[j]);
    }
}
"""
if cp is not None:
    kern = cp.RawKernel(KERNEL, "kmeans_sums")
    cpts = cp.asarray(pts)
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
for k in (16, 64, 256):
    cen = torch.rand((k, 2), device="cuda", generator=g)

    def composed():
        d = torch.cdist(pts, cen)
        a = d.argmin(dim=1)
        s = torch.zeros((k, 2), device="cuda").index_add_(0, a, pts)
        c = torch.bincount(a, minlength=k)
        return s, c

    t = best(composed, reps=5, warm=2)
    print(f"| k = {k} | torch cdist + argmin + index_add_ + bincount | {t * 1e3:.3f} ms |")
    if cp is None:
        continue
    ccen = cp.asarray(cen)
    sx = cp.zeros(k, dtype=cp.float32)
    sy = cp.zeros(k, dtype=cp.float32)
    cnt = cp.zeros(k, dtype=cp.uint32)
    best_t = float("inf")
    for blocks_per_sm in (2, 4, 8):
        grid = sms * blocks_per_sm

        def hand():
            sx.fill(0)
            sy.fill(0)
            cnt.fill(0)
            kern((grid,), (256,), (cpts, cp.int64(npts), ccen, cp.int32(k), sx, sy, cnt),
                 shared_mem=k * 12)

        best_t = min(best_t, best(hand, reps=10, warm=2))
    # cdist's rounding may move a point that is almost equidistant: counts agree up to a few.
    _, c = composed()
    diff = (torch.as_tensor(cnt, device="cuda").to(torch.int64) - c).abs().max().item()
    assert int(cnt.sum()) == npts and diff <= max(4, npts >> 16), f"counts differ by {diff}"
    print(f"| k = {k} | hand-written CuPy RawKernel, shared + global atomics (best grid) | {best_t * 1e3:.3f} ms |")
