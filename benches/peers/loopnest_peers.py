"""Peers of benches/loopnest.rs (issue 24): torch.mm / torch.mv in FP32 with TF32 off on the
GPU, torch CPU with all threads on the host, and a min-plus product in torch (broadcast
min over chunks: what torch offers for it), at the sizes the bench uses.

    python3 benches/peers/loopnest_peers.py            # full sizes
    python3 benches/peers/loopnest_peers.py --short    # tiny sizes (smoke test)
    python3 benches/peers/loopnest_peers.py --cpu --only mmmult --sizes 1024
                                                       # torch CPU only, as bench-loopnest's
                                                       # --only / --sizes pick rows

Rows: workload, size, series, milliseconds, rate (GFLOP/s for products, GB/s of the matrix
for matrix-vector products).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from peerlib import best  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.set_num_threads(os.cpu_count() or 1)


def cpu_best(f, reps=5):
    f()
    t = float("inf")
    for _ in range(reps):
        s = time.perf_counter()
        f()
        t = min(t, time.perf_counter() - s)
    return t


def row(what, size, series, secs, work, unit):
    print(f"{what:<22} {size:>16} {series:<16} {secs * 1e3:>11.3f} ms {work / secs / 1e9:>9.1f} {unit}")


def min_plus(a, b, chunk=64):
    out = torch.full((a.shape[0], b.shape[1]), float("inf"), device=a.device)
    for l0 in range(0, a.shape[1], chunk):
        blk = a[:, l0:l0 + chunk, None] + b[None, l0:l0 + chunk, :]
        out = torch.minimum(out, blk.amin(dim=1))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--short", action="store_true", help="tiny sizes (smoke test)")
    ap.add_argument("--cpu", action="store_true", help="torch CPU rows only (no GPU peers)")
    ap.add_argument("--only", default="", help="only the workloads whose name contains this word")
    ap.add_argument("--sizes", default="", help="matrix sizes, comma-separated (as the bench's --sizes)")
    args = ap.parse_args()
    short = args.short
    gpu = torch.cuda.is_available() and not args.cpu
    wants = lambda what: args.only in what  # noqa: E731
    picked = [int(n) for n in args.sizes.split(",") if n]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, "
          f"GPU: {torch.cuda.get_device_name() if gpu else 'none'}, TF32 off")
    sizes = picked or ([33, 129] if short else [512, 1024, 2048, 4096])
    for n in sizes if wants("mmmult") else []:
        flops = 2.0 * n ** 3
        a, b = torch.rand(n, n), torch.rand(n, n)
        if n <= 1024 or short or picked:
            row("mmmult", f"{n}x{n}x{n}", "torch-cpu", cpu_best(lambda: torch.mm(a, b)), flops, "GFLOP/s")
        if gpu:
            ga, gb = a.cuda(), b.cuda()
            row("mmmult", f"{n}x{n}x{n}", "torch.mm-fp32", best(lambda: torch.mm(ga, gb)), flops, "GFLOP/s")
    for n in ([65] if short else [1024, 4096]) if wants("min-plus") else []:
        if gpu:
            ga, gb = torch.rand(n, n, device="cuda"), torch.rand(n, n, device="cuda")
            row("min-plus", f"{n}x{n}x{n}", "torch-broadcast", best(lambda: min_plus(ga, gb), reps=3),
                2.0 * n ** 3, "GFLOP/s")
    shapes = [(n, n) for n in picked] or ([(257, 129)] if short else [(4096, 4096), (16384, 16384)])
    for r, c in shapes:
        a, x = torch.rand(r, c), torch.rand(c)
        byts = 4.0 * r * c
        if wants("mvmult"):
            row("mvmult", f"{r}x{c}", "torch-cpu", cpu_best(lambda: torch.mv(a, x)), byts, "GB/s")
        xt = torch.rand(r)
        if wants("bicg"):
            row("bicg s = A^T r", f"{r}x{c}", "torch-cpu", cpu_best(lambda: torch.mv(a.t(), xt)), byts, "GB/s")
        if gpu:
            ga, gx, gxt = a.cuda(), x.cuda(), xt.cuda()
            if wants("mvmult"):
                row("mvmult", f"{r}x{c}", "torch.mv", best(lambda: torch.mv(ga, gx)), byts, "GB/s")
            if wants("bicg"):
                row("bicg s = A^T r", f"{r}x{c}", "torch.mv", best(lambda: torch.mv(ga.t(), gxt)), byts, "GB/s")


if __name__ == "__main__":
    main()
