#!/usr/bin/env python3
"""CUB-backed peers for the CUDA backend's README rows: torch.add / cupy.sum / torch.cumsum
on device-resident 2^28 f32, per-call time of torch.sum at small sizes, and host-to-host
add of 2^24 f32 with pinned vs pageable memory. Run on the GPU machine:
    python3 benches/peers/cuda_peers.py [log2 n]
"""
import os, sys

log2 = int(sys.argv[1]) if len(sys.argv) > 1 else 28
n = 1 << log2
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peerlib import best, cupy, per_call  # noqa: E402

a = torch.ones(n, device="cuda", dtype=torch.float32)
b = torch.full((n,), 2.0, device="cuda", dtype=torch.float32)
out = torch.empty_like(a)
for _ in range(3):
    torch.add(a, b, out=out); torch.cumsum(a, 0, out=out); a.sum()
t = best(lambda: torch.add(a, b, out=out), warm=0)
print(f"torch.add device-resident   {t*1e3:8.3f} ms  {3*4*n/t/1e9:7.1f} GB/s")
t = best(lambda: a.sum().item(), warm=0)
print(f"torch.sum device-resident   {t*1e3:8.3f} ms  {4*n/t/1e9:7.1f} GB/s")
t = best(lambda: torch.cumsum(a, 0, out=out), warm=0)
print(f"torch.cumsum device-resident{t*1e3:8.3f} ms  {2*4*n/t/1e9:7.1f} GB/s")
cp = cupy()
if cp is not None:
    ca = cp.ones(n, dtype=cp.float32)
    tt = best(lambda: float(ca.sum()), warm=3)
    print(f"cupy.sum device-resident    {tt*1e3:8.3f} ms  {4*n/tt/1e9:7.1f} GB/s")
    cs = cp.cumsum(ca)
    tt = best(lambda: cp.cumsum(ca, out=cs))
    print(f"cupy.cumsum device-resident {tt*1e3:8.3f} ms  {2*4*n/tt/1e9:7.1f} GB/s")
    del ca, cs
del a, b, out

small = torch.ones(1000, device="cuda")
t = per_call(lambda: small.sum().item(), end=lambda: None)
print(f"torch.sum 1000 per call (sync)  {t*1e6:8.2f} us")
so = torch.empty_like(small)
t = per_call(lambda: torch.add(small, small, out=so))
print(f"torch.add 1000 per call (async) {t*1e6:8.2f} us")

m = 1 << 24
for name, pin in (("pinned", True), ("pageable", False)):
    ha = torch.ones(m, pin_memory=pin); hb = torch.full((m,), 2.0, pin_memory=pin)
    ho = torch.empty(m, pin_memory=pin)
    def h2h():
        da = ha.to("cuda", non_blocking=pin); db = hb.to("cuda", non_blocking=pin)
        ho.copy_(da + db, non_blocking=pin)
        torch.cuda.synchronize()
    t = best(h2h, 5)
    print(f"torch host-to-host add 2^24 {name:8} {t*1e3:8.3f} ms  {3*4*m/t/1e9:7.1f} GB/s")
