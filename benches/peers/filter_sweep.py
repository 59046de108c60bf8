#!/usr/bin/env python3
"""Shapes and variants of skel's CUDA Filter kernel (cuda/filter.cu) for 2^28 i32, `x < t` at
selectivity 0.5, compiled with NVRTC through CuPy as skel assembles it (user function,
defines, cuda/common.cuh, template; --fmad=false), each checked against torch (count, kept
values, untouched tail; also a misaligned, odd-length call) and timed with CUDA events
(state zeroing + kernel, best of 3 batches of 30). Sweeps threads x values per thread x
SKEL_SCATTER, then refines the best with SKEL_STREAMING=1, a shared-memory carveout and
min blocks per SM; prints the top 8 also as synchronised calls with the count read back,
and writes the best to $OUT/best.json (`filter_sweep.py one best.json` runs it alone, for
ncu). FILTER_OLD=path adds an older template of the same signature as a baseline.
Run on the GPU machine, from the repository root:
    python3 benches/peers/filter_sweep.py            # LOG2=28 by default
    ncu --set full -k regex:skel_filter -c 1 python3 benches/peers/filter_sweep.py one $OUT/best.json
"""
import json, os, sys, time
import numpy as np
import cupy as cp
import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
COMMON = open(os.path.join(ROOT, "cuda", "common.cuh")).read()
TPL = {"new": open(os.path.join(ROOT, "cuda", "filter.cu")).read()}
if os.environ.get("FILTER_OLD"):
    TPL["old"] = open(os.environ["FILTER_OLD"]).read()
USER = "__device__ bool below(int x, int t) { return x < t; }\n"
OPTS = ("--std=c++17", "--fmad=false", "--device-as-default-execution-space")
OUT = os.environ.get("OUT", ".")

log2 = int(os.environ.get("LOG2", "28"))
n = 1 << log2
T = 1 << 29
x = torch.randint(0, 1 << 30, (n + 64,), device="cuda", dtype=torch.int32)
cx = cp.asarray(x)
want = torch.masked_select(x[:n], x[:n] < T)
kept = want.numel()
moved = (n + kept) * 4
out = cp.empty(n + 64, dtype=cp.int32)
state = cp.zeros(n // 256 + 64, dtype=cp.uint64)
carry = cp.zeros(2, dtype=cp.uint64)


def build(tpl, block, items, minb, scatter=1, streaming=0, carveout=None):
    defs = [("SKEL_T", "int"), ("SKEL_PRED(SKEL_P, SKEL_X)", "below((SKEL_X), u0)"),
            ("SKEL_PARAMS", ", int u0"), ("SKEL_BLOCK", str(block)), ("SKEL_ITEMS", str(items)),
            ("SKEL_MIN_BLOCKS", str(minb)), ("SKEL_SCATTER", str(scatter)),
            ("SKEL_STREAMING", str(streaming))]
    src = USER + "".join(f"#define {a} {b}\n" for a, b in defs) + COMMON + "\n" + TPL[tpl]
    m = cp.RawModule(code=src, options=OPTS, backend="nvrtc")
    k = m.get_function("skel_filter")
    tile = block * items
    smem = tile * 4 + (16 if tpl == "new" else 0)
    if smem > 48 * 1024:
        k.max_dynamic_shared_size_bytes = smem
    if carveout is not None:
        k.preferred_shared_memory_carveout = carveout
    return k, tile, smem


def call(k, tile, smem, block, n_=n, src=None, dst=None):
    src = cx if src is None else src
    dst = out if dst is None else dst
    tiles = (n_ + tile - 1) // tile
    cp.cuda.runtime.memsetAsync(state.data.ptr, 0, (1 + tiles) * 8, cp.cuda.get_current_stream().ptr)
    k((tiles,), (block,), (src, dst, np.uint64(n_), np.uint64(0), state, np.uint32(tiles),
                           np.uint64(0), carry[0:], np.int32(T)), shared_mem=smem)


def check(k, tile, smem, block):
    out[:] = -1
    call(k, tile, smem, block)
    c = int(carry[0].get())
    ok = c == kept and bool((torch.as_tensor(out[:kept], device="cuda") == want).all())
    ok = ok and int(out[kept].get()) == -1
    # misaligned input and output, odd length
    m = (1 << 20) + 7
    xs, os_ = cx[1:1 + m], out[3:3 + m]
    out[:] = -1
    call(k, tile, smem, block, m, xs, os_)
    w = xs[xs < T]
    c2 = int(carry[0].get())
    ok = ok and c2 == w.size and bool((os_[:c2] == w).all()) and int(out[2].get()) == -1 and int(os_[c2].get()) == -1
    return ok


def timed(f, reps=30):
    f(); f()
    cp.cuda.Device().synchronize()
    s, e = cp.cuda.Event(), cp.cuda.Event()
    best = 1e9
    for _ in range(3):
        s.record()
        for _ in range(reps):
            f()
        e.record(); e.synchronize()
        best = min(best, cp.cuda.get_elapsed_time(s, e) / reps)
    return best


def timed_sync(f, reps=30):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter(); f(); carry[0].get(); ts.append((time.perf_counter() - t0) * 1e3)
    ts.sort()
    return ts[len(ts) // 2]


copy_src = r'''
extern "C" __global__ void copy4(const int4* __restrict__ a, int4* __restrict__ b, unsigned long long n4) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n4; i += (unsigned long long)gridDim.x * blockDim.x) b[i] = a[i];
}'''


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "sweep"
    print(f"n=2^{log2} kept={kept} ({kept/n:.3f}) moved={moved/1e9:.3f} GB", flush=True)
    if mode == "one":
        cfg = json.load(open(sys.argv[2]))
        kk = build(cfg["tpl"], cfg["block"], cfg["items"], cfg["minb"], cfg.get("scatter", 1), cfg.get("streaming", 0), cfg.get("carveout"))
        call(*kk, cfg["block"]); call(*kk, cfg["block"])
        cp.cuda.Device().synchronize()
        print("one", cfg)
        return
    # copy bounds
    c4 = cp.RawKernel(copy_src, "copy4")
    y = cp.empty_like(cx)
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    for grid in (sms * 4, sms * 8, sms * 16, (n // 4 + 255) // 256):
        t = timed(lambda: c4((grid,), (256,), (cx, y, np.uint64(n // 4))))
        print(f"copy4 kernel grid {grid}: {t:.4f} ms for {8*n/1e9:.3f} GB = {8*n/t/1e6:.0f} GB/s; scaled to moved: {t*moved/(8*n):.4f} ms", flush=True)
    ty = torch.empty_like(x)
    t = timed(lambda: ty.copy_(x))
    print(f"torch copy_: {t:.4f} ms = {(8*(n+64))/t/1e6:.0f} GB/s; scaled {t*moved/(8*n):.4f} ms")
    t = timed(lambda: cp.cuda.runtime.memcpyAsync(y.data.ptr, cx.data.ptr, 4 * n, 3, cp.cuda.get_current_stream().ptr))
    print(f"memcpyDtoD: {t:.4f} ms = {8*n/t/1e6:.0f} GB/s; scaled {t*moved/(8*n):.4f} ms", flush=True)
    del y, ty
    results = []
    variants = [dict(tpl="old", block=512, items=16, minb=2)] if "old" in TPL else []
    for block in (128, 256, 512):
        for items in (8, 12, 16, 20, 24, 32):
            for scatter in ((1, 0) if block == 256 else (1,)):
                variants.append(dict(tpl="new", block=block, items=items, minb=1, scatter=scatter))
    for cfg in variants:
        try:
            kk = build(cfg["tpl"], cfg["block"], cfg["items"], cfg["minb"], cfg.get("scatter", 1), cfg.get("streaming", 0), cfg.get("carveout"))
            ok = check(*kk, cfg["block"])
            t = timed(lambda: call(*kk, cfg["block"]))
            regs = kk[0].attributes.get("num_regs")
            print(f"{json.dumps(cfg)} regs={regs} ok={ok} kernel+memset {t:.4f} ms {moved/t/1e6:.0f} GB/s", flush=True)
            results.append((t, cfg, ok))
        except Exception as e:  # noqa
            print(f"{json.dumps(cfg)} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)
    results = [r for r in results if r[2]]
    results.sort(key=lambda r: r[0])
    top = results[:4]
    # refinements of the best: streaming hints, carveout, min blocks
    for t0, cfg, _ in top[:3]:
        for extra in (dict(streaming=1), dict(carveout=100), dict(minb=2), dict(minb=3), dict(minb=4)):
            c2 = dict(cfg, **extra)
            try:
                kk = build(c2["tpl"], c2["block"], c2["items"], c2["minb"], c2.get("scatter", 1), c2.get("streaming", 0), c2.get("carveout"))
                ok = check(*kk, c2["block"])
                t = timed(lambda: call(*kk, c2["block"]))
                print(f"  {json.dumps(c2)} regs={kk[0].attributes.get('num_regs')} ok={ok} {t:.4f} ms", flush=True)
                if ok:
                    results.append((t, c2, ok))
            except Exception as e:  # noqa
                print(f"  {json.dumps(c2)} FAILED {type(e).__name__}: {str(e)[:200]}", flush=True)
    results.sort(key=lambda r: r[0])
    print("TOP:")
    for t, cfg, _ in results[:8]:
        kk = build(cfg["tpl"], cfg["block"], cfg["items"], cfg["minb"], cfg.get("scatter", 1), cfg.get("streaming", 0), cfg.get("carveout"))
        ts = timed_sync(lambda: call(*kk, cfg["block"]))
        print(f"  {t:.4f} ms kernel; {ts:.4f} ms per synced call (median)  {json.dumps(cfg)}", flush=True)
    json.dump(results[0][1], open(os.path.join(OUT, "best.json"), "w"))


main()
