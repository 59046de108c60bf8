#!/usr/bin/env python3
"""Peers of skel's Filter on the GPU machine: stream compaction of 2^28 i32 at selectivity
0.5 (`x < t` on uniformly random values), device-resident, with the result's size read
back on the host each call (as a Filter returns its count):
  - torch.masked_select(x, mask) with the mask precomputed (compaction alone),
  - x[x < t] in torch (predicate + compaction),
  - x[x < t] in CuPy,
  - a device-to-device copy of the same bytes ((n + kept) * 4: read all, write the kept),
    timed as torch's copy of n i32 scaled to those bytes, and as a hand-written copy kernel
    (16-byte loads and stores, CuPy RawKernel, best of four grid sizes): the copy bounds.
Run on the GPU machine:
    python3 benches/peers/filter_peers.py [log2 n]
"""
import os, sys

log2 = int(sys.argv[1]) if len(sys.argv) > 1 else 28
n = 1 << log2
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peerlib import best, cupy  # noqa: E402

t_ = 1 << 29
x = torch.randint(0, 1 << 30, (n,), device="cuda", dtype=torch.int32)
mask = x < t_
kept = int(mask.sum())
moved = (n + kept) * 4
print(f"2^{log2} i32, selectivity {kept / n:.3f}, {moved / 1e9:.3f} GB moved (read all, write the kept)")
y = torch.empty_like(x)
t = best(lambda: y.copy_(x), warm=3)
copy = t * moved / (2 * 4 * n)
print(f"copy bound (torch copy_, {2*4*n/t/1e9:.0f} GB/s)      {copy*1e3:8.3f} ms")
t = best(lambda: torch.masked_select(x, mask).shape[0], warm=3)
print(f"torch.masked_select (mask precomputed) {t*1e3:8.3f} ms  {moved/t/1e9:7.1f} GB/s  {copy/t:5.2f} of copy")
t = best(lambda: x[x < t_].shape[0], warm=3)
print(f"torch x[x < t]                        {t*1e3:8.3f} ms  {moved/t/1e9:7.1f} GB/s  {copy/t:5.2f} of copy")
del y, mask
cp = cupy()
if cp is not None:
    here = os.path.dirname(os.path.abspath(__file__))
    copy4 = cp.RawKernel(open(os.path.join(here, "..", "common", "copy4.cu")).read(), "copy4")
    ca, cb = cp.asarray(x), cp.empty(n, dtype=cp.int32)
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]

    def kernel_copy(grid):
        copy4((grid,), (256,), (ca, cb, cp.uint64(n // 4)))

    t = min(best(lambda: kernel_copy(g), warm=3) for g in (4 * sms, 8 * sms, 16 * sms, (n // 4 + 255) // 256))
    print(f"copy bound (int4 copy kernel, {2*4*n/t/1e9:.0f} GB/s) {t * moved / (2 * 4 * n) * 1e3:8.3f} ms")
    del cb
    cx = cp.asarray(x)
    tt = best(lambda: int(cx[cx < t_].shape[0]), warm=3)
    print(f"cupy x[x < t]                         {tt*1e3:8.3f} ms  {moved/tt/1e9:7.1f} GB/s  {copy/tt:5.2f} of copy")
