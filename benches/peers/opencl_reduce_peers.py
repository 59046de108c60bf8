#!/usr/bin/env python3
"""CUB-backed peers of examples/tools/opencl_reduce_bench.rs on device-resident f32: torch.sum,
cupy.sum (reduce), torch.dot, cupy.dot (dot), torch.cumsum, cupy.cumsum (scan, scan-excl),
torch.sum(dim=1) (rows), torch.sum(dim=0) (cols); best of 10 calls, the same shapes and the
same synchronisation as the skel calls (reductions read their scalar back). Run on the GPU
machine after the skel bench, with its output:
    python3 benches/peers/opencl_reduce_peers.py skel.log [log2 ...]
prints the peers, then one ratio per skel line: peer time / skel time against the fastest
peer of that row (>= 1 means skel is faster).
"""
import os, sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peerlib import best, cupy  # noqa: E402

args = sys.argv[1:]
skel_log = args.pop(0) if args and not args[0].isdigit() else None
sizes = [int(a) for a in args] or [20, 24, 28]

cp = cupy()


peers = {}  # (op, log2) -> [(name, seconds)]


def record(op, log2, name, bytes_, f):
    t = best(f, 10, warm=3)
    peers.setdefault((op, log2), []).append((name, t))
    print(f"peer {op:<10} 2^{log2} {name:<16} {t*1e3:9.4f} ms {bytes_/t/1e9:8.1f} GB/s")


for log2 in sizes:
    n = 1 << log2
    a = torch.ones(n, device="cuda", dtype=torch.float32)
    b = torch.full((n,), 2.0, device="cuda", dtype=torch.float32)
    out = torch.empty_like(a)
    record("reduce", log2, "torch.sum", 4 * n, lambda: a.sum().item())
    record("dot", log2, "torch.dot", 8 * n, lambda: torch.dot(a, b).item())
    record("scan", log2, "torch.cumsum", 8 * n, lambda: torch.cumsum(a, 0, out=out))
    if cp is not None:
        ca = cp.asarray(a)
        cb = cp.asarray(b)
        co = cp.empty_like(ca)
        record("reduce", log2, "cupy.sum", 4 * n, lambda: float(ca.sum()))
        record("dot", log2, "cupy.dot", 8 * n, lambda: float(cp.dot(ca, cb)))
        record("scan", log2, "cupy.cumsum", 8 * n, lambda: cp.cumsum(ca, out=co))
        del ca, cb, co
    # An exclusive scan has no CUB-backed call of its own: compare with the inclusive one.
    peers[("scan-excl", log2)] = peers[("scan", log2)]
    del a, b, out
    side = 1 << (log2 // 2)
    m = torch.ones(n // side, side, device="cuda", dtype=torch.float32)
    pr = torch.empty(n // side, device="cuda", dtype=torch.float32)
    pc = torch.empty(side, device="cuda", dtype=torch.float32)
    record("rows", log2, "torch.sum(dim=1)", 4 * n, lambda: torch.sum(m, dim=1, out=pr))
    record("cols", log2, "torch.sum(dim=0)", 4 * n, lambda: torch.sum(m, dim=0, out=pc))
    if cp is not None:
        cm = cp.asarray(m)
        record("rows", log2, "cupy.sum(axis=1)", 4 * n, lambda: cm.sum(axis=1))
        record("cols", log2, "cupy.sum(axis=0)", 4 * n, lambda: cm.sum(axis=0))
        del cm
    del m, pr, pc
    torch.cuda.empty_cache()

if skel_log:
    print("\nratio = fastest peer time / skel time (target: >= 0.85 reduce, dot, rows, cols; >= 0.60 scan)")
    for line in open(skel_log):
        f = line.split()
        if len(f) < 5 or f[0] != "skel-opencl":
            continue
        op, log2, t = f[1], int(f[2][2:]), float(f[3]) / 1e3
        row = peers.get((op, log2))
        if not row:
            continue
        name, pt = min(row, key=lambda x: x[1])
        print(f"ratio {op:<10} 2^{log2}  skel {t*1e3:9.4f} ms  {name:<16} {pt*1e3:9.4f} ms  {pt/t:5.2f}")
