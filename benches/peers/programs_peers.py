"""Peers of benches/programs.rs (issue 26), on the GPU, device-resident, f32:

- the 3-Map chain over 2^20 and 2^26 elements (x*1.5+0.25, then x*x-0.5, then x*0.75+2),
  stored and summed: torch eager (three kernels and two temporaries), torch.compile (fused,
  where it is available) and the copy bound (one read and one write of n floats:
  `out.copy_(x)`; summed: one read, `x.sum()`);
- row softmax of an 8192 x 8192 matrix: torch.softmax(dim=1), the same four steps in torch
  eager (max, exp(x - max), sum, divide), torch.compile, torch CPU, and its bounds (2N at
  copy speed; 3N, the traffic of skel's two-pass online form);
- conjugate gradient on the 5-point Laplacian of 256^2, 2048^2 and 8192^2 grids, per
  iteration (20 iterations per run): torch eager (scalars kept on the device),
  torch.compile of the iteration (with --compile-cg: it compiles per size), and the bound
  (11N at copy speed).

    python3 benches/peers/programs_peers.py            # full sizes
    python3 benches/peers/programs_peers.py --short    # tiny sizes (checks that it runs)

Prints one table row per measurement, in ms (best of 10 after a warm-up).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from peerlib import best  # noqa: E402


def chain_eager(x):
    return ((x * 1.5 + 0.25) ** 2 - 0.5) * 0.75 + 2.0


def softmax_four(m):
    mx = m.max(dim=1, keepdim=True).values
    ex = torch.exp(m - mx)
    s = ex.sum(dim=1, keepdim=True)
    return ex / s


def chain_sum(x):
    return chain_eager(x).sum()


def chains(n, dev):
    """The 3-Map chain stored and summed: torch eager, torch.compile, the bounds."""
    x = (torch.arange(n, device=dev) % 1000).float() * 0.001
    out = torch.empty_like(x)
    for name, f in [("3-Map chain", chain_eager), ("3-Map chain summed", chain_sum)]:
        label = f"{name}, n = {n}"
        print(f"| {label} | torch eager | {best(lambda: f(x)) * 1e3:.3f} |")
        try:
            compiled = torch.compile(f)
            compiled(x)
            print(f"| {label} | torch.compile | {best(lambda: compiled(x)) * 1e3:.3f} |")
        except Exception as e:  # noqa: BLE001  (torch.compile needs a working Triton)
            print(f"| {label} | torch.compile | unavailable: {type(e).__name__} |")
    print(f"| 3-Map chain, n = {n} | copy bound (out.copy_(x)) | {best(lambda: out.copy_(x)) * 1e3:.3f} |")
    print(f"| 3-Map chain summed, n = {n} | read bound (x.sum()) | {best(lambda: x.sum()) * 1e3:.3f} |")


def laplace(p):
    """A p for the 5-point Laplacian, zero outside the grid (as benches/programs.rs)."""
    ap = 4.0 * p
    ap[1:, :] -= p[:-1, :]
    ap[:-1, :] -= p[1:, :]
    ap[:, 1:] -= p[:, :-1]
    ap[:, :-1] -= p[:, 1:]
    return ap


def cg_iteration(x, r, p, rr):
    """One CG iteration in torch eager; rr stays a device tensor (no host round trip)."""
    ap = laplace(p)
    alpha = rr / torch.dot(p.flatten(), ap.flatten())
    x = x + alpha * p
    r = r - alpha * ap
    rr_new = torch.dot(r.flatten(), r.flatten())
    p = r + (rr_new / rr) * p
    return x, r, p, rr_new


def cg(n, dev, iters):
    """CG on an n x n grid, per iteration: torch eager, torch.compile, the 11N bound."""
    i = torch.arange(n, device=dev, dtype=torch.float32).unsqueeze(1)
    j = torch.arange(n, device=dev, dtype=torch.float32).unsqueeze(0)
    u, v = (i + 0.5) / n, (j + 0.5) / n
    b = u * (1.0 - u) * v * (1.0 - v) * 16.0

    def run(step):
        x, r, p = torch.zeros_like(b), b.clone(), b.clone()
        rr = torch.dot(r.flatten(), r.flatten())
        for _ in range(iters):
            x, r, p, rr = step(x, r, p, rr)
        return x

    label = f"CG iteration, {n} x {n}"
    print(f"| {label} | torch eager (us per iteration) | {best(lambda: run(cg_iteration)) * 1e6 / iters:.1f} |")
    if "--compile-cg" not in sys.argv:
        # Compiling per grid size takes tens of seconds: asked for explicitly.
        print(f"| {label} | torch.compile | not run (--compile-cg) |")
    else:
        try:
            compiled = torch.compile(cg_iteration)
            run(compiled)
            print(f"| {label} | torch.compile (us per iteration) | {best(lambda: run(compiled)) * 1e6 / iters:.1f} |")
        except Exception as e:  # noqa: BLE001  (torch.compile needs a working Triton)
            print(f"| {label} | torch.compile | unavailable: {type(e).__name__} |")
    out = torch.empty_like(b)
    copy = best(lambda: out.copy_(b))
    # 11N: 11 reads or writes of n*n floats; a copy moves 2N.
    print(f"| {label} | bound (11N at copy speed, us) | {copy * 5.5 * 1e6:.1f} |")


def main():
    short = "--short" in sys.argv
    n = 1 << (12 if short else 26)
    rows = 64 if short else 8192
    dev = "cuda"
    print(f"device: {torch.cuda.get_device_name(0)}; torch {torch.__version__}")
    print("| program | peer | ms |")
    print("|---|---|---|")

    for n in ([n] if short else [1 << 20, n]):
        chains(n, dev)

    i = torch.arange(rows, device=dev).unsqueeze(1)
    j = torch.arange(rows, device=dev).unsqueeze(0)
    m = ((i * 31 + j * 17) % 101).float() * 0.05 - 2.5
    mo = torch.empty_like(m)
    name = f"row softmax, {rows} x {rows}"
    print(f"| {name} | torch.softmax | {best(lambda: torch.softmax(m, dim=1)) * 1e3:.3f} |")
    print(f"| {name} | torch eager, four steps | {best(lambda: softmax_four(m)) * 1e3:.3f} |")
    copy = best(lambda: mo.copy_(m))
    print(f"| {name} | bound (2N at copy speed) | {copy * 1e3:.3f} |")
    # skel's online form reads m twice and writes once (statistics, then the Map).
    print(f"| {name} | bound of two passes (3N at copy speed) | {copy * 1.5e3:.3f} |")
    err = (torch.softmax(m, dim=1) - softmax_four(m)).abs().max().item()
    print(f"check: torch.softmax vs four steps, max abs difference {err:.2e}")
    try:
        compiled = torch.compile(lambda t: torch.softmax(t, dim=1))
        compiled(m)
        print(f"| {name} | torch.compile | {best(lambda: compiled(m)) * 1e3:.3f} |")
    except Exception as e:  # noqa: BLE001
        print(f"| {name} | torch.compile | unavailable: {type(e).__name__} |")
    mc = m.cpu()
    print(f"| {name} | torch CPU ({torch.get_num_threads()} threads) | {best(lambda: torch.softmax(mc, dim=1)) * 1e3:.3f} |")

    for n in ([64] if short else [256, 2048, 8192]):
        cg(n, dev, 3 if short else 20)


if __name__ == "__main__":
    main()
