#!/usr/bin/env python3
"""PyTorch / CuPy peers of benches/kernels.rs: the same workloads, device-resident, same
sizes and options, run on the same machine:

    python3 benches/peers/kernels_peers.py [--quick] [--log2 N] [--side N] [--mandel N]
                                           [--bodies N,M] [--pairs N] [--reps N] [--only a,b]

Each row is the best of --reps host timings of one call followed by
torch.cuda.synchronize() (reductions read their result back with .item()); the small-call
rows are per call over 2000 calls. Prints a table and one `PEERS {json}` line per row.
The workload keys match kernels.rs (mandelbrot, nbody, transcendental, stencil1d-r1, ...).
"""
import argparse, json, os, sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peerlib import best as best_of, cupy, per_call as per_call_of, sync  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--quick", action="store_true")
p.add_argument("--log2", type=int, default=28)
p.add_argument("--side", type=int, default=8192)
p.add_argument("--mandel", type=int, default=4096)
p.add_argument("--bodies", default="4096,32768")
p.add_argument("--pairs", type=int, default=8192)
p.add_argument("--reps", type=int, default=10)
p.add_argument("--only", default="")
a = p.parse_args()
if a.quick:
    a.log2, a.side, a.mandel, a.bodies, a.pairs, a.reps = 20, 1024, 512, "2048", 1024, 3
only = [w for w in a.only.split(",") if w]
dev = "cuda"
torch.backends.cudnn.benchmark = True
# Same arithmetic as the skel and hand-written kernels: no TF32 in convolutions.
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False



def best(f, reps=None):
    return best_of(f, reps or a.reps)


def per_call(f, end):
    return per_call_of(f, end, reps=min(a.reps, 5))


def rand(n, seed):
    g = torch.Generator(device=dev).manual_seed(seed)
    return torch.rand(n, device=dev, generator=g)


rows = []


def row(key, name, peer, t, nbytes=None, micro=False):
    rows.append(dict(key=key, workload=name, peer=peer, seconds=t, bytes=nbytes, micro=micro))


def mandelbrot():
    side, iters = a.mandel, 256
    scale = 3.0 / side
    cx = (torch.arange(side, device=dev, dtype=torch.float32) * scale - 2.0).expand(side, side)
    cy = (torch.arange(side, device=dev, dtype=torch.float32) * scale - 1.5)[:, None].expand(side, side)

    def run():
        x = torch.zeros(side, side, device=dev)
        y = torch.zeros_like(x)
        k = torch.zeros(side, side, device=dev, dtype=torch.int32)
        for _ in range(iters):
            xx, yy = x * x, y * y
            live = (xx + yy) <= 4.0
            xt = xx - yy + cx
            y = torch.where(live, 2.0 * x * y + cy, y)
            x = torch.where(live, xt, x)
            k += live
        return k

    row("mandelbrot", f"index Map, Mandelbrot {side}x{side}, {iters} it", "torch (masked, 256 steps)", best(run, min(a.reps, 3)))


def nbody(n):
    b = torch.rand(n, 4, device=dev, generator=torch.Generator(device=dev).manual_seed(7))
    pos = b[:, :3] * 2.0 - 1.0
    m = b[:, 3] + 0.5
    rows_per = max(1, (1 << 27) // n)  # tiles of the n x n interaction matrix

    def run():
        out = torch.empty(n, 3, device=dev)
        for r in range(0, n, rows_per):
            d = pos[None, :, :] - pos[r:r + rows_per, None, :]
            d2 = (d * d).sum(-1) + 0.01
            inv = 1.0 / d2.sqrt()
            s = m[None, :] * (inv * inv * inv)
            out[r:r + rows_per] = (d * s[..., None]).sum(1)
        return out

    row("nbody", f"MapArray, all-pairs n-body, N = {n}", "torch (tiled broadcast)", best(run, min(a.reps, 3)))


def transcendental():
    lg = max(a.log2 - 2, 0)
    n = 1 << lg
    x = rand(n, 3)
    out = torch.empty_like(x)

    def run():
        torch.add(torch.sin(x) * torch.cos(x) + torch.exp(0.5 * x), torch.log(1.0 + x) + torch.pow(x, 1.5), out=out)

    row("transcendental", f"Map sin*cos+exp+ln+powf, 2^{lg} f32", "torch (eager)", best(run), 8.0 * n)


def heavy():
    lg = max(a.log2 - 4, 0)
    n = 1 << lg
    x = rand(n, 41)

    def run():
        y = x
        for _ in range(4):
            y = torch.cos(torch.sin(torch.exp(torch.cos(torch.sin(torch.exp(torch.cos(torch.sin(y))))))))
        return y

    row("heavy", f"Map, 32 transcendental calls, 2^{lg} f32", "torch (eager, 32 kernels)", best(run), 8.0 * n)


def pairs():
    n = a.pairs
    i = torch.arange(n, device=dev)
    v = ((i * 37) % 1000).float() * 0.25
    h = ((i * 91) % 777).float() * 0.25
    m = torch.empty(n, n, device=dev)
    row("pairs", f"MapPairs abs(p - q), {n}x{n} f32", "torch broadcast abs(v[:,None] - h)",
        best(lambda: torch.sub(v[:, None], h[None, :], out=m).abs_()), 4.0 * (n * n + 2 * n))
    row("pairs", f"MapPairs abs(p - q), {n}x{n} f32", "torch.cdist(p=1)",
        best(lambda: torch.cdist(v[:, None], h[:, None], p=1)), 4.0 * (n * n + 2 * n))
    row("pairs-reduce", f"MapPairsReduce rows, sum abs(p - q), {n}x{n} f32", "torch.cdist(p=1).sum(1)",
        best(lambda: torch.cdist(v[:, None], h[:, None], p=1).sum(1)))


def stencil1d(r):
    n = 1 << a.log2
    x = rand(n, 5).view(1, 1, n)
    w = torch.full((1, 1, 2 * r + 1), 1.0 / (2 * r + 1), device=dev)

    def run():
        return F.conv1d(F.pad(x, (r, r), mode="replicate"), w)

    row(f"stencil1d-r{r}", f"MapOverlap 1D radius {r}, 2^{a.log2} f32", "torch conv1d (replicate pad)", best(run), 8.0 * n)


def stencil2d(r):
    s = a.side
    x = rand(s * s, 9).view(1, 1, s, s)
    k = 2 * r + 1
    w = torch.full((1, 1, k, k), 1.0 / (k * k), device=dev)

    def run():
        return F.conv2d(F.pad(x, (r, r, r, r), mode="replicate"), w)

    row(f"stencil2d-{k}x{k}", f"MapOverlap 2D {k}x{k}, {s}x{s} f32", "torch conv2d (replicate pad)", best(run), 8.0 * s * s)


def reductions():
    n = 1 << a.log2
    x, y = rand(n, 11), rand(n, 13)
    out = torch.empty_like(x)
    row("reduce", f"Reduce sum, 2^{a.log2} f32", "torch.sum().item()", best(lambda: x.sum().item()), 4.0 * n)
    cp = cupy()
    if cp is not None:
        cx = cp.asarray(x)
        row("reduce", f"Reduce sum, 2^{a.log2} f32", "cupy.sum", best(lambda: float(cx.sum())), 4.0 * n)
    row("dot", f"MapReduce dot, 2^{a.log2} f32", "torch.dot().item()", best(lambda: torch.dot(x, y).item()), 8.0 * n)
    row("scan", f"Scan inclusive sum, 2^{a.log2} f32", "torch.cumsum", best(lambda: torch.cumsum(x, 0, out=out)), 8.0 * n)
    row("add", f"Map a+b, 2^{a.log2} f32", "torch.add", best(lambda: torch.add(x, y, out=out)), 12.0 * n)


def small():
    x = rand(1000, 29)
    y = rand(1000, 31)
    out = torch.empty_like(x)
    row("small-reduce", "Reduce of 1000 f32, result read back (per call)", "torch.sum().item()",
        per_call(lambda: x.sum().item(), lambda: None), micro=True)
    row("small-map", "Map a+b of 1000 f32, asynchronous (per call)", "torch.add(out=)",
        per_call(lambda: torch.add(x, y, out=out), sync), micro=True)


work = [
    ("mandelbrot", mandelbrot),
    *[("nbody", lambda n=int(n): nbody(n)) for n in a.bodies.split(",") if n],
    ("transcendental", transcendental), ("heavy", heavy),
    ("stencil1d-r1", lambda: stencil1d(1)), ("stencil1d-r2", lambda: stencil1d(2)),
    ("stencil1d-r4", lambda: stencil1d(4)), ("stencil2d-3x3", lambda: stencil2d(1)),
    ("stencil2d-5x5", lambda: stencil2d(2)), ("stencil2d-9x9", lambda: stencil2d(4)),
    ("reduce dot scan add", reductions), ("pairs pairs-reduce", pairs),
    ("small-reduce small-map", small),
]
print(f"kernels_peers: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
      f"1D 2^{a.log2}, 2D {a.side}x{a.side}, Mandelbrot {a.mandel}, n-body {a.bodies}, pairs {a.pairs}, best of {a.reps}")
for keys, f in work:
    if only and not any(w in k for k in keys.split() for w in only):
        continue
    try:
        f()
    except Exception as e:  # noqa: BLE001  (one failing peer must not lose the table)
        print(f"{keys}: failed: {e}")
    torch.cuda.empty_cache()

w = max(len(r["workload"]) for r in rows) if rows else 8
for r in rows:
    t = r["seconds"]
    if r["micro"]:
        cell = f"{t * 1e6:9.2f} us"
    else:
        cell = f"{t * 1e3:9.3f} ms"
        if r["bytes"]:
            cell += f" {r['bytes'] / t / 1e9:6.0f} GB/s"
    print(f"| {r['workload']:<{w}} | {r['peer']:<30} | {cell:>24} |")
for r in rows:
    print("PEERS " + json.dumps(r))
