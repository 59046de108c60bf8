#!/usr/bin/env python3
"""CUB-backed peers for the CUDA backend's README rows: torch.add / cupy.sum / torch.cumsum
on device-resident 2^28 f32, per-call time of torch.sum at small sizes, and host-to-host
add of 2^24 f32 with pinned vs pageable memory. Run on the GPU machine:
    python3 benches/peers/cuda_peers.py [log2 n]
"""
import sys, time

log2 = int(sys.argv[1]) if len(sys.argv) > 1 else 28
n = 1 << log2
import torch

def best(reps, f):
    t = float("inf")
    for _ in range(reps):
        torch.cuda.synchronize()
        s = time.perf_counter()
        f()
        torch.cuda.synchronize()
        t = min(t, time.perf_counter() - s)
    return t

a = torch.ones(n, device="cuda", dtype=torch.float32)
b = torch.full((n,), 2.0, device="cuda", dtype=torch.float32)
out = torch.empty_like(a)
for _ in range(3):
    torch.add(a, b, out=out); torch.cumsum(a, 0, out=out); a.sum()
t = best(10, lambda: torch.add(a, b, out=out))
print(f"torch.add device-resident   {t*1e3:8.3f} ms  {3*4*n/t/1e9:7.1f} GB/s")
t = best(10, lambda: a.sum().item())
print(f"torch.sum device-resident   {t*1e3:8.3f} ms  {4*n/t/1e9:7.1f} GB/s")
t = best(10, lambda: torch.cumsum(a, 0, out=out))
print(f"torch.cumsum device-resident{t*1e3:8.3f} ms  {2*4*n/t/1e9:7.1f} GB/s")
try:
    import cupy as cp
    ca = cp.ones(n, dtype=cp.float32)
    for _ in range(3):
        ca.sum()
    cp.cuda.Device().synchronize()
    tt = float("inf")
    for _ in range(10):
        s = time.perf_counter(); float(ca.sum()); tt = min(tt, time.perf_counter() - s)
    print(f"cupy.sum device-resident    {tt*1e3:8.3f} ms  {4*n/tt/1e9:7.1f} GB/s")
    cs = cp.cumsum(ca); cp.cuda.Device().synchronize()
    tt = float("inf")
    for _ in range(10):
        s = time.perf_counter(); cp.cumsum(ca, out=cs); cp.cuda.Device().synchronize(); tt = min(tt, time.perf_counter() - s)
    print(f"cupy.cumsum device-resident {tt*1e3:8.3f} ms  {2*4*n/tt/1e9:7.1f} GB/s")
    del ca, cs
except Exception as e:  # noqa
    print("cupy unavailable:", e)
del a, b, out

small = torch.ones(1000, device="cuda")
k = 2000
small.sum().item()
s = time.perf_counter()
for _ in range(k):
    small.sum().item()
print(f"torch.sum 1000 per call (sync)  {(time.perf_counter()-s)/k*1e6:8.2f} us")
so = torch.empty_like(small)
torch.cuda.synchronize()
s = time.perf_counter()
for _ in range(k):
    torch.add(small, small, out=so)
torch.cuda.synchronize()
print(f"torch.add 1000 per call (async) {(time.perf_counter()-s)/k*1e6:8.2f} us")

m = 1 << 24
for name, pin in (("pinned", True), ("pageable", False)):
    ha = torch.ones(m, pin_memory=pin); hb = torch.full((m,), 2.0, pin_memory=pin)
    ho = torch.empty(m, pin_memory=pin)
    def h2h():
        da = ha.to("cuda", non_blocking=pin); db = hb.to("cuda", non_blocking=pin)
        ho.copy_(da + db, non_blocking=pin)
        torch.cuda.synchronize()
    h2h()
    t = best(5, h2h)
    print(f"torch host-to-host add 2^24 {name:8} {t*1e3:8.3f} ms  {3*4*m/t/1e9:7.1f} GB/s")
