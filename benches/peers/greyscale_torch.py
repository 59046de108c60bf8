#!/usr/bin/env python3
"""PyTorch peer of skel's image-stream benchmark (MultiStream, examples/greyscale_stream.rs).

What it measures: a stream of --frames frames of WIDTHxHEIGHT RGB f32 pixels (interleaved
r,g,b float32; 24,883,200 bytes for 1920x1080), each in its own pinned host tensor, is
uploaded, converted to greyscale on the GPU and downloaded into pinned host tensors (one
output tensor per frame, so every frame really travels both ways). Frame i runs on CUDA
stream i % k; each stream has its own device input/output buffers, reused from frame to
frame, and same-stream ordering guarantees that a stream's next upload only overwrites its
input buffer after its previous kernel has read it. Copies are non_blocking. For each k of
--streams the whole stream is timed with torch.cuda.synchronize() around a host timer,
best of --repeat, after one untimed warm-up run.

The per-pixel function is the example's `grey`: sRGB gamma expansion, BT.709 luma, gamma
compression, *255, round half to even; the output pixel has r = g = b = grey level. It is
written in float32 torch ops (eager is the main peer); if torch.compile works (and takes
at most --compile-timeout seconds) a compiled variant is reported too.

The same run measures the bound: upload alone (H2D, one stream), download alone (D2H), both
directions at once (H2D on one stream, D2H on another) and the kernel alone on
device-resident data, all per frame; bound = max(up, kernel, down). Results are checked
once against a numpy float64 evaluation of the formula (max |difference| <= 1 grey level),
and every frame of every timed configuration is compared with a synchronous run.

Run on the GPU machine:
    python3 benches/peers/greyscale_torch.py --frames 60
    python3 benches/peers/greyscale_torch.py --frames 60 --size 1920x1080 --streams 1,2,4,8 \\
        --repeat 5 --json /tmp/greyscale_torch.json

Greppable output lines:
    device: NVIDIA H200, torch 2.x, CUDA 12.x
    bound: up U ms/frame, down D, both-directions B, kernel K -> bound X ms/frame
    torch eager k=4: T ms/frame (P% of bound, Q% of both-directions bound)
    torch compiled k=4: ...          (or "compile: skipped (reason)")
    check: max difference N grey levels
Exits 0 with "skipped: no CUDA device" where there is no GPU; exits 1 if a check fails.
"""
import argparse
import json
import os
import signal
import sys
import time

# ITU-R BT.709 luminance weights (the example's LUMA uniform).
LR, LG, LB = 0.2126, 0.7152, 0.0722


def parse_size(s):
    w, sep, h = s.lower().partition("x")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT such as 1920x1080, got {s!r}")
    try:
        w, h = int(w), int(h)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT such as 1920x1080, got {s!r}")
    if w <= 0 or h <= 0:
        raise argparse.ArgumentTypeError(f"frame size must be positive, got {s!r}")
    return w, h


def parse_streams(s):
    try:
        ks = [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a list such as 1,2,4,8, got {s!r}")
    if not ks or any(k <= 0 for k in ks):
        raise argparse.ArgumentTypeError(f"stream counts must be positive, got {s!r}")
    return ks


def grey_into(x, out):
    """The example's `grey` on an (H, W, 3) float32 tensor, written into `out` (H, W, 3)."""
    import torch

    # Gamma expansion: sRGB-encoded -> linear light (both branches, then select).
    t = torch.add(x, 0.055).div_(1.055).pow_(2.4)
    lin = torch.where(x <= 0.04045, x / 12.92, t)
    # Relative luminance, left to right as in the example: r*Lr + g*Lg + b*Lb.
    y = (lin[..., 0] * LR).add_(lin[..., 1], alpha=LG).add_(lin[..., 2], alpha=LB)
    # Gamma compression back to sRGB, to 0..255, round half to even (torch.round does).
    c = torch.where(y <= 0.0031308, y * 12.92, torch.pow(y, 1.0 / 2.4).mul_(1.055).sub_(0.055))
    v = c.mul_(255.0).round_()
    out.copy_(v.unsqueeze(-1).expand_as(out))


def reference_grey(frame):
    """numpy float64 evaluation of the same formula (the example's `grey_reference`, on the
    float inputs); returns (H, W) grey levels. Falls back to torch float64 on the CPU."""
    try:
        import numpy as np
    except ImportError:
        np = None
    if np is not None:
        x = frame.numpy().astype(np.float64)
        lin = np.where(x <= 0.04045, x / 12.92, ((x + 0.055) / 1.055) ** 2.4)
        y = 0.2126 * lin[..., 0] + 0.7152 * lin[..., 1] + 0.0722 * lin[..., 2]
        c = np.where(y <= 0.0031308, 12.92 * y, 1.055 * np.power(y, 1.0 / 2.4) - 0.055)
        return np.clip(np.rint(c * 255.0), 0.0, 255.0), "numpy float64"
    import torch

    x = frame.to(torch.float64)
    lin = torch.where(x <= 0.04045, x / 12.92, ((x + 0.055) / 1.055) ** 2.4)
    y = 0.2126 * lin[..., 0] + 0.7152 * lin[..., 1] + 0.0722 * lin[..., 2]
    c = torch.where(y <= 0.0031308, 12.92 * y, 1.055 * torch.pow(y, 1.0 / 2.4) - 0.055)
    return torch.clamp(torch.round(c * 255.0), 0.0, 255.0).numpy(), "torch float64 (no numpy)"


def compare_with_reference(h_in, h_out):
    """(max |difference| in grey levels, pixels off by more than 1, inconsistent pixels,
    pixels, reference name) for one frame."""
    ref, name = reference_grey(h_in)
    out = h_out.numpy()
    g = out[..., 0]
    inconsistent = int(((g != out[..., 1]) | (g != out[..., 2]) | (g != g.round())).sum())
    diff = abs(g.astype("float64") - ref)
    return float(diff.max()), int((diff > 1).sum()), inconsistent, int(g.size), name


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=60, help="frames in the stream (default 60)")
    ap.add_argument("--size", type=parse_size, default=(1920, 1080), help="WIDTHxHEIGHT (default 1920x1080)")
    ap.add_argument("--streams", type=parse_streams, default=[1, 2, 4, 8], help="stream counts k (default 1,2,4,8)")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per configuration, best taken (default 5)")
    ap.add_argument("--json", metavar="PATH", help="also write a JSON summary to PATH")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile variant")
    ap.add_argument("--compile-timeout", type=int, default=60, help="give up on torch.compile after this many seconds (default 60)")
    ap.add_argument("--seed", type=int, default=0, help="seed for the random frames (default 0)")
    args = ap.parse_args()
    if args.frames <= 0 or args.repeat <= 0:
        ap.error("--frames and --repeat must be at least 1")

    try:
        import torch
    except ImportError:
        print("skipped: no CUDA device (torch is not installed)")
        return 0
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import peerlib
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        print("skipped: no CUDA device")
        return 0

    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    W, H = args.size
    F = args.frames
    ks = args.streams
    R = args.repeat
    frame_bytes = W * H * 3 * 4
    shape = (H, W, 3)
    print(f"device: {torch.cuda.get_device_name(dev)}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    print(f"frames: {F} x {W}x{H} RGB f32 ({frame_bytes} bytes each, {F * frame_bytes / 1e9:.2f} GB per direction), "
          f"pinned host memory, streams {','.join(map(str, ks))}, best of {R}", flush=True)

    # Distinct random frames in [0, 1), one pinned input and one pinned output tensor each.
    t0 = time.perf_counter()
    gen = torch.Generator(device=dev)
    gen.manual_seed(args.seed)
    h_in, h_out = [], []
    for _ in range(F):
        hi = torch.empty(shape, dtype=torch.float32, pin_memory=True)
        hi.copy_(torch.rand(shape, dtype=torch.float32, device=dev, generator=gen))
        h_in.append(hi)
        h_out.append(torch.empty(shape, dtype=torch.float32, pin_memory=True))
    torch.cuda.synchronize()
    if not all(t.is_pinned() for t in h_in + h_out):
        print("warning: some host frames are not pinned")
    print(f"prepared {2 * F} pinned frames in {time.perf_counter() - t0:.1f} s", flush=True)

    kmax = max(max(ks), 2)
    streams = [torch.cuda.Stream(device=dev) for _ in range(kmax)]
    d_in = [torch.empty(shape, dtype=torch.float32, device=dev) for _ in range(kmax)]
    d_out = [torch.empty(shape, dtype=torch.float32, device=dev) for _ in range(kmax)]
    for j in range(kmax):
        d_in[j].copy_(h_in[j % F])
        d_out[j].zero_()
    torch.cuda.synchronize()

    def best(f):
        return peerlib.best(f, R, warm=0)

    def per_frame_ms(f, warm=1):
        for _ in range(warm):
            f()
        torch.cuda.synchronize()
        return best(f) * 1e3 / F

    # ---- the bound --------------------------------------------------------------------
    s0, s1 = streams[0], streams[1]

    def upload():
        with torch.cuda.stream(s0):
            for i in range(F):
                d_in[0].copy_(h_in[i], non_blocking=True)

    def download():
        with torch.cuda.stream(s0):
            for i in range(F):
                h_out[i].copy_(d_out[0], non_blocking=True)

    def both_directions():
        for i in range(F):
            with torch.cuda.stream(s0):
                d_in[0].copy_(h_in[i], non_blocking=True)
            with torch.cuda.stream(s1):
                h_out[i].copy_(d_out[1], non_blocking=True)

    def kernel_alone(fn):
        def run():
            with torch.cuda.stream(s0):
                for _ in range(F):
                    fn(d_in[0], d_out[0])
        return run

    up_ms = per_frame_ms(upload)
    down_ms = per_frame_ms(download)
    both_ms = per_frame_ms(both_directions)
    d_in[0].copy_(h_in[0])
    torch.cuda.synchronize()
    kern = {"eager": per_frame_ms(kernel_alone(grey_into), warm=3)}

    # ---- torch.compile variant (optional) ---------------------------------------------
    variants = {"eager": grey_into}
    compile_info = {"status": "skipped", "reason": "--no-compile"}
    if not args.no_compile:
        compile_info = try_compile(torch, grey_into, d_in[0], d_out[0], s0, args.compile_timeout)
        if compile_info["status"] == "ok":
            variants["compiled"] = compile_info.pop("fn")
            kern["compiled"] = per_frame_ms(kernel_alone(variants["compiled"]), warm=3)

    bound = {v: max(up_ms, down_ms, kern[v]) for v in variants}
    bound_both = {v: max(both_ms, kern[v]) for v in variants}
    print(f"bound: up {up_ms:.3f} ms/frame, down {down_ms:.3f}, both-directions {both_ms:.3f}, "
          f"kernel {kern['eager']:.3f} -> bound {bound['eager']:.3f} ms/frame")
    gbs = lambda ms: frame_bytes / (ms * 1e-3) / 1e9
    print(f"transfer rates: up {gbs(up_ms):.1f} GB/s, down {gbs(down_ms):.1f} GB/s, "
          f"both directions 2 x {gbs(both_ms):.1f} GB/s")
    if "compiled" in variants:
        print(f"compile: ok in {compile_info['seconds']:.1f} s; kernel {kern['compiled']:.3f} ms/frame "
              f"-> bound compiled {bound['compiled']:.3f} ms/frame")
    else:
        print(f"compile: skipped ({compile_info['reason']})")
    sys.stdout.flush()

    # ---- the stream, per variant and k ------------------------------------------------
    def pipeline(fn, k):
        def run():
            for i in range(F):
                j = i % k
                with torch.cuda.stream(streams[j]):
                    d_in[j].copy_(h_in[i], non_blocking=True)
                    fn(d_in[j], d_out[j])
                    h_out[i].copy_(d_out[j], non_blocking=True)
        return run

    def synchronous_greys(fn):
        """Each frame's grey levels from a plain synchronous run, for the stream checks."""
        res = []
        with torch.cuda.stream(s0):
            for i in range(F):
                d_in[0].copy_(h_in[i], non_blocking=True)
                fn(d_in[0], d_out[0])
                res.append(d_out[0][..., 0].to(torch.uint8).cpu())
        torch.cuda.synchronize()
        return res

    def stream_mismatches(expected):
        bad = 0
        for i in range(F):
            g = h_out[i][..., 0]
            if not (torch.equal(g, expected[i].to(torch.float32))
                    and torch.equal(h_out[i][..., 1], g) and torch.equal(h_out[i][..., 2], g)):
                bad += 1
        return bad

    results = {}
    checks = {}
    worst = 0.0
    failed = False
    for name, fn in variants.items():
        expected = synchronous_greys(fn)
        results[name] = {}
        mismatched = {}
        for k in ks:
            for t in h_out:
                t.fill_(-1.0)
            ms = per_frame_ms(pipeline(fn, k))
            results[name][k] = ms
            mismatched[k] = stream_mismatches(expected)
            note = "" if mismatched[k] == 0 else f"  [{mismatched[k]} of {F} frames differ from the synchronous run]"
            print(f"torch {name} k={k}: {ms:.3f} ms/frame ({100 * bound[name] / ms:.1f}% of bound, "
                  f"{100 * bound_both[name] / ms:.1f}% of both-directions bound){note}", flush=True)
        # Reference check on the last configuration's output: first and last frame.
        frames = sorted({0, F - 1})
        mx, over, incons, px = 0.0, 0, 0, 0
        for i in frames:
            m, o, c, n, ref_name = compare_with_reference(h_in[i], h_out[i])
            mx, over, incons, px = max(mx, m), over + o, incons + c, px + n
        worst = max(worst, mx)
        ok = mx <= 1 and over == 0 and incons == 0 and all(v == 0 for v in mismatched.values())
        failed |= not ok
        checks[name] = {"max_diff": mx, "over_1": over, "inconsistent": incons, "pixels": px,
                        "frames": frames, "k": ks[-1], "reference": ref_name,
                        "stream_mismatched_frames": mismatched, "ok": ok}
        print(f"check {name}: max difference {mx:g} grey levels vs {ref_name} (frames "
              f"{','.join(map(str, frames))} of the k={ks[-1]} run, {px} pixels, {over} off by >1, "
              f"{incons} with r,g,b unequal or fractional); stream runs: "
              f"{sum(mismatched.values())} mismatched frames{'' if ok else ' -- FAILED'}")
    print(f"check: max difference {worst:g} grey levels{'' if not failed else ' -- FAILED'}")

    if args.json:
        summary = {
            "benchmark": "greyscale MultiStream peer (PyTorch)",
            "device": torch.cuda.get_device_name(dev),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "frames": F, "width": W, "height": H, "frame_bytes": frame_bytes,
            "streams": ks, "repeat": R,
            "bound_ms_per_frame": {
                "up": up_ms, "down": down_ms, "both_directions": both_ms,
                "kernel": kern, "bound": bound, "both_directions_bound": bound_both,
            },
            "compile": compile_info,
            "ms_per_frame": {v: {str(k): ms for k, ms in r.items()} for v, r in results.items()},
            "percent_of_bound": {v: {str(k): 100 * bound[v] / ms for k, ms in r.items()}
                                 for v, r in results.items()},
            "check": {v: dict(c, stream_mismatched_frames={str(k): n for k, n in
                                                            c["stream_mismatched_frames"].items()})
                      for v, c in checks.items()},
            "max_diff": worst,
            "ok": not failed,
        }
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)
        print(f"wrote {args.json}")
    return 1 if failed else 0


def try_compile(torch, fn, x, out, stream, timeout):
    """torch.compile(fn) and its first (compiling) call, within `timeout` seconds."""
    if not hasattr(torch, "compile"):
        return {"status": "skipped", "reason": "torch.compile not available"}

    class CompileTimeout(Exception):
        pass

    def on_alarm(signum, frame):
        raise CompileTimeout(f"took more than {timeout} s")

    use_alarm = hasattr(signal, "SIGALRM")
    old = signal.signal(signal.SIGALRM, on_alarm) if use_alarm else None
    t0 = time.perf_counter()
    try:
        if use_alarm:
            signal.alarm(max(1, timeout))
        cfn = torch.compile(fn, fullgraph=True, dynamic=False)
        with torch.cuda.stream(stream):
            cfn(x, out)
            cfn(x, out)
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 -- any failure means: no compiled variant
        if use_alarm:
            signal.alarm(0)
        msg = str(e).strip().splitlines()
        reason = f"{type(e).__name__}: {msg[0] if msg else ''}"[:300]
        if isinstance(e, CompileTimeout) or "CompileTimeout" in reason:
            reason = f"compile took more than {timeout} s"
        try:
            torch._dynamo.reset()
        except Exception:  # noqa: BLE001
            pass
        return {"status": "failed", "reason": reason, "seconds": time.perf_counter() - t0}
    finally:
        if use_alarm:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
    dt = time.perf_counter() - t0
    if dt > timeout:
        return {"status": "failed", "reason": f"compile took {dt:.0f} s > {timeout} s", "seconds": dt}
    return {"status": "ok", "fn": cfn, "seconds": dt}


if __name__ == "__main__":
    sys.exit(main())
