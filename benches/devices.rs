//! Several CUDA devices: the same calls on one device slot and split over all of them
//! (`.devices(1)` against `.devices(Devices::All)`), side by side in one run.
//!
//! Not a criterion bench: it prints one Markdown table ready to paste.
//!
//! ```text
//! SKEL_CUDA_DEVICES=0,1 cargo bench --features cuda --bench devices            # n = 2^28 f32
//! SKEL_CUDA_DEVICES=0,1 cargo bench --features cuda --bench devices -- --quick  # fewer reps
//! SKEL_CUDA_DEVICES=0,0 ./bench-devices 26    # two slots on one GPU: the split's overhead
//! ```
//!
//! Rows: device-resident Map (`2x + 1`), Reduce (sum), Scan (inclusive sum) and MapOverlap
//! (5-point blur) over `n` f32, each timed after a warm-up call that leaves the operands
//! where that split wants them (so the timed calls move nothing between devices); and one
//! host-to-host Map `a + b` (inputs rewritten on the host before every repetition, result
//! copied back eagerly and waited for). Every result is checked against the host on a
//! sample of elements. Run `nvidia-smi topo -m` before it for the link topology: each GPU's
//! own PCIe link is what lets host-to-host throughput grow with the devices.
//!
//! Without a CUDA device it prints "skipped: no CUDA device" and exits 0.

use std::time::Instant;

use skel::debug;
use skel::prelude::*;

#[path = "common/args.rs"]
mod args;

#[userfn]
fn affine(x: f32) -> f32 {
    2.0 * x + 1.0
}

#[userfn]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

#[userfn]
fn blur5(w: Window<f32>) -> f32 {
    (w[-2] + w[-1] + w[0] + w[1] + w[2]) * 0.2
}

const F32: usize = std::mem::size_of::<f32>();

/// One CUDA device slot against all of them.
#[derive(clap::Parser, Debug)]
struct Opts {
    /// Elements of the vectors, as a power of two.
    #[arg(default_value_t = 28, value_parser = clap::value_parser!(u32).range(10..=30))]
    log2: u32,
    /// Three repetitions instead of ten.
    #[arg(long)]
    quick: bool,
    #[command(flatten)]
    cargo: args::Cargo,
}

fn main() {
    let opts = <Opts as clap::Parser>::parse();
    if let Err(e) = Backend::Cuda.check() {
        println!("skipped: no CUDA device");
        eprintln!("({e})");
        return;
    }
    let log2 = opts.log2;
    let reps = if opts.quick { 3 } else { 10 };
    if let Err(e) = run(log2, reps) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// Best of `reps` timings of `once` (seconds), after one untimed call.
fn best(reps: usize, mut once: impl FnMut() -> skel::Result<()>) -> skel::Result<f64> {
    once()?;
    debug::synchronize()?;
    let mut best = f64::INFINITY;
    for _ in 0..reps {
        let t = Instant::now();
        once()?;
        debug::synchronize()?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok(best)
}

/// `got` agrees with `want` at a sample of positions (relative error 1e-4: f32 sums of
/// 2^28 values are not exact, and their order differs with the split).
fn check(what: &str, got: &[f32], want: impl Fn(usize) -> f32) -> skel::Result<()> {
    let n = got.len();
    for i in (0..n).step_by((n / 4096).max(1)).chain([n - 1]) {
        let (g, w) = (got[i], want(i));
        if (g - w).abs() > 1e-4 * w.abs().max(1.0) {
            return Err(Error::InvalidArgument(format!(
                "{what}: element {i} is {g}, expected {w}"
            )));
        }
    }
    Ok(())
}

/// The `.devices(..)` of a column.
#[derive(Clone, Copy)]
enum On {
    One,
    All,
}

impl On {
    fn devices(self) -> Devices {
        match self {
            On::One => Devices::Count(1),
            On::All => Devices::All,
        }
    }
}

fn run(log2: u32, reps: usize) -> skel::Result<()> {
    let n = 1usize << log2;
    let slots = std::env::var("SKEL_CUDA_DEVICES").unwrap_or_else(|_| "(all devices)".into());
    println!("# skel: 1 device slot vs all (SKEL_CUDA_DEVICES={slots}), n = 2^{log2} f32, best of {reps}\n");
    let x = Vector::from_fn(n, |i| (i % 7) as f32);
    let mut y = Vector::zeroed(n);
    let mut rows = Vec::new();
    let gbs = |bytes: usize, s: f64| bytes as f64 / s / 1e9;
    let mut row = |name: &str, bytes: usize, t: [f64; 2]| {
        rows.push(format!(
            "| {name} | {:.3} ms ({:.0} GB/s) | {:.3} ms ({:.0} GB/s) | {:.2}x |",
            t[0] * 1e3,
            gbs(bytes, t[0]),
            t[1] * 1e3,
            gbs(bytes, t[1]),
            t[0] / t[1]
        ));
    };

    let mut t = [0.0; 2];
    for (k, on) in [On::One, On::All].into_iter().enumerate() {
        let map = Map::new(affine)
            .backend(Backend::Cuda)
            .devices(on.devices())
            .download(false);
        t[k] = best(reps, || map.run(&x, &mut y))?;
        check("Map", y.as_slice(), |i| 2.0 * (i % 7) as f32 + 1.0)?;
    }
    row("Map 2x+1 (resident)", 2 * n * F32, t);

    let sum = (0..n).map(|i| (i % 7) as f64).sum::<f64>() as f32;
    for (k, on) in [On::One, On::All].into_iter().enumerate() {
        let red = Reduce::new(add)
            .backend(Backend::Cuda)
            .devices(on.devices());
        let mut got = 0.0;
        t[k] = best(reps, || {
            got = red.run(&x)?;
            Ok(())
        })?;
        check("Reduce", &[got], |_| sum)?;
    }
    row("Reduce sum (resident)", n * F32, t);

    for (k, on) in [On::One, On::All].into_iter().enumerate() {
        // Checked on 2^20 small values, whose prefix sums stay exact in f32; timed on x.
        let small = Vector::from_fn(1 << 20.min(log2), |i| (i % 3) as f32);
        let mut out = Vector::zeroed(small.len());
        Scan::new(add)
            .backend(Backend::Cuda)
            .devices(on.devices())
            .run(&small, &mut out)?;
        check("Scan", out.as_slice(), prefix3)?;
        let scan = Scan::new(add)
            .backend(Backend::Cuda)
            .devices(on.devices())
            .download(false);
        t[k] = best(reps, || scan.run(&x, &mut y))?;
    }
    row("Scan inclusive (resident)", 2 * n * F32, t);

    for (k, on) in [On::One, On::All].into_iter().enumerate() {
        let ov = MapOverlap::new(blur5, 2)
            .backend(Backend::Cuda)
            .devices(on.devices())
            .download(false);
        t[k] = best(reps, || ov.run(&x, &mut y))?;
        check("MapOverlap", y.as_slice(), |i| {
            let at = |j: isize| (j.clamp(0, n as isize - 1) as usize % 7) as f32;
            let i = i as isize;
            (at(i - 2) + at(i - 1) + at(i) + at(i + 1) + at(i + 2)) * 0.2
        })?;
    }
    row("MapOverlap blur5 (resident)", 2 * n * F32, t);

    let mut a = Vector::from_fn(n, |i| (i % 5) as f32);
    let mut b = Vector::from_fn(n, |i| (i % 3) as f32);
    for (k, on) in [On::One, On::All].into_iter().enumerate() {
        let map = Map::new(add)
            .backend(Backend::Cuda)
            .devices(on.devices())
            .download(true);
        t[k] = best(reps, || {
            // Rewritten on the host: every repetition uploads both inputs.
            let _ = a.as_mut_slice();
            let _ = b.as_mut_slice();
            map.run(&a, &b, &mut y)
        })?;
        check("Map host to host", y.as_slice(), |i| {
            ((i % 5) + (i % 3)) as f32
        })?;
    }
    row("Map a+b host to host", 3 * n * F32, t);

    println!("| call | 1 slot | all slots | speed-up |");
    println!("|---|---|---|---|");
    for r in rows {
        println!("{r}");
    }
    Ok(())
}

/// The inclusive prefix sum of `i % 3` up to `i`.
fn prefix3(i: usize) -> f32 {
    let full = (i + 1) / 3;
    let rest = (i + 1) % 3;
    (full * 3 + [0, 0, 1][rest]) as f32
}
