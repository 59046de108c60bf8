#!/usr/bin/env python3
"""Peers of skel's Sort on the GPU machine: 2^26 uniformly random keys, device-resident, as
benches/sort.rs times them (the input restored before each call, not timed):
  - u32 keys: torch.sort of int32 keys (torch sorts no uint32 on CUDA in every version; a
    radix sort of int32 and of uint32 does the same work), cupy.sort of uint32 (CUB radix
    sort);
  - f32 keys: torch.sort, cupy.sort;
  - u32 -> u32 pairs: torch.sort(keys, stable=True) returning the permutation, then the
    values gathered through it (how a torch user sorts pairs); cupy.argsort + take.
Times: CUDA events around each call, median of 10 after 3 warm-up calls.
Run on the GPU machine:
    python3 benches/peers/sort_peers.py [log2 n]
"""
import os, sys

log2 = int(sys.argv[1]) if len(sys.argv) > 1 else 26
n = 1 << log2
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peerlib import cupy  # noqa: E402


def median_ms(reset, f, reps=10, warm=3):
    for _ in range(warm):
        reset()
        f()
    times = []
    for _ in range(reps):
        reset()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        f()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def row(what, name, ms):
    print(f"| {what} | {name} | {ms:.3f} | {n / ms / 1e3:.0f} |")


print(f"Sort peers, 2^{log2} = {n} uniformly random keys, {torch.cuda.get_device_name()}")
print()
print("| workload | peer | ms | M keys/s |")
print("|---|---|---:|---:|")
g = torch.Generator(device="cuda").manual_seed(1)
k32 = torch.randint(-(1 << 31), (1 << 31) - 1, (n,), device="cuda", dtype=torch.int32, generator=g)
f32 = k32.to(torch.float32) * 1e-3
vals = torch.arange(n, device="cuda", dtype=torch.int32)
x = torch.empty_like(k32)
row("u32 keys", "torch.sort (int32)", median_ms(lambda: x.copy_(k32), lambda: torch.sort(x)))
y = torch.empty_like(f32)
row("f32 keys", "torch.sort", median_ms(lambda: y.copy_(f32), lambda: torch.sort(y)))


def torch_pairs():
    s, idx = torch.sort(x, stable=True)
    return s, vals[idx]


row("u32 -> u32 pairs", "torch.sort(stable) + gather", median_ms(lambda: x.copy_(k32), torch_pairs))
cp = cupy()
if cp is not None:
    ck = cp.asarray(k32).view(cp.uint32)
    cf = cp.asarray(f32)
    cv = cp.asarray(vals)
    cx, cy = cp.empty_like(ck), cp.empty_like(cf)

    def reset_k():
        cx[...] = ck

    def reset_f():
        cy[...] = cf

    row("u32 keys", "cupy.sort (uint32, CUB)", median_ms(reset_k, lambda: cx.sort()))
    row("f32 keys", "cupy.sort (CUB)", median_ms(reset_f, lambda: cy.sort()))
    def cupy_pairs():
        idx = cp.argsort(cx)
        return cx.take(idx), cv.take(idx)

    row("u32 -> u32 pairs", "cupy.argsort + take", median_ms(reset_k, cupy_pairs))
