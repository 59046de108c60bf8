"""Peers of benches/programs.rs (issue 26), on the GPU, device-resident, f32:

- the 3-Map chain over 2^20 and 2^26 elements (x*1.5+0.25, then x*x-0.5, then x*0.75+2),
  stored and summed: torch eager (three kernels and two temporaries), torch.compile (fused,
  where it is available) and the copy bound (one read and one write of n floats:
  `out.copy_(x)`; summed: one read, `x.sum()`);
- row softmax of an 8192 x 8192 matrix: torch.softmax(dim=1), the same four steps in torch
  eager (max, exp(x - max), sum, divide), and its bound (2N at copy speed).

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
    print(f"| {name} | bound (2N at copy speed) | {best(lambda: mo.copy_(m)) * 1e3:.3f} |")
    err = (torch.softmax(m, dim=1) - softmax_four(m)).abs().max().item()
    print(f"check: torch.softmax vs four steps, max abs difference {err:.2e}")


if __name__ == "__main__":
    main()
