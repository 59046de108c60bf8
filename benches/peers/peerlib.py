"""Shared helpers of the peer scripts (benches/peers/*.py): device synchronisation, best-of
timings, per-call timings, CuPy when it is installed.

The scripts run as `python3 benches/peers/X.py` from the repository root and as copies in
one folder on the GPU machine; each puts its own directory first on sys.path, so
`from peerlib import ...` finds this file in both cases.
"""
import time

import torch


def sync():
    """Waits for all work on the current CUDA device (device-wide: CuPy's work too)."""
    torch.cuda.synchronize()


def best(f, reps=10, warm=1):
    """Seconds of the fastest of `reps` calls of `f`, each bracketed by a synchronisation of
    the device, after `warm` untimed calls (compilation, allocation, caches)."""
    for _ in range(warm):
        f()
    t = float("inf")
    for _ in range(reps):
        sync()
        s = time.perf_counter()
        f()
        sync()
        t = min(t, time.perf_counter() - s)
    return t


def per_call(f, end=sync, calls=2000, reps=5):
    """Seconds per call of `f` over `calls` back-to-back calls ended by one `end()` (a
    synchronisation, or nothing for calls that wait themselves), best of `reps` batches."""
    def batch():
        for _ in range(calls):
            f()
        end()
    return best(batch, reps) / calls


def cupy():
    """The cupy module, or None (saying why) where it is not installed."""
    try:
        import cupy as cp
        return cp
    except Exception as e:  # noqa: BLE001  (a missing peer must not stop the others)
        print("cupy unavailable:", e)
        return None
