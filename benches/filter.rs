//! Filter (stream compaction) of i32 at selectivity 0.5, `x < t` on uniformly random
//! values: every skel backend here against a plain loop, a hand-written Rayon compaction
//! and, on CUDA, the device's copy bound for the bytes the Filter moves.
//!
//! Not a criterion bench: it prints one Markdown table ready to paste.
//!
//! ```text
//! cargo bench --bench filter                          # n = 2^24, cpu and rayon
//! cargo bench --features "cuda opencl" --bench filter -- 28
//! ./bench-filter [--quick] [--gpu-only] [LOG2_N]      # the built binary alone
//! ```
//!
//! GPU rows are device-resident: the input is valid on the device after the first call and
//! the output stays there; each call includes reading the kept count back (a Filter
//! returns it, so every call waits for the device). The copy bounds are `(n + kept) * 4`
//! bytes (read all, write the kept) at two device copy speeds measured in the same run: a
//! hand-written copy kernel (16-byte loads and stores, the best of four grid sizes; with
//! the `cuda` feature) and `cuMemcpyDtoD` (as `skel::debug::stream_model()` measured it);
//! the ratio columns are bound time / Filter time. The `skel Map x -> x` row is the copy
//! speed through a skel kernel. `SKEL_FILTER_TUNE=threads,bytes[,blocks per SM]` changes
//! the CUDA kernel's shape.

use std::time::Instant;

#[cfg(feature = "cuda")]
#[path = "common/hand.rs"]
mod hand;

use rayon::prelude::*;
use skel::prelude::*;

#[path = "common/args.rs"]
mod args;

#[userfn]
fn below(x: i32, #[uniform] t: i32) -> bool {
    x < t
}

#[userfn]
fn same(x: i32) -> i32 {
    x
}

/// Values uniform in `0..2^30`; half of them are below this.
const THRESHOLD: i32 = 1 << 29;

fn data(n: usize) -> Vec<i32> {
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 34) as i32
        })
        .collect()
}

fn plain_loop(a: &[i32], out: &mut [i32], t: i32) -> usize {
    let mut k = 0;
    for &x in a {
        if x < t {
            out[k] = x;
            k += 1;
        }
    }
    k
}

/// Counts per chunk in parallel, a sequential prefix, then each chunk copies its kept
/// values to its place in parallel (evaluating the predicate again).
fn hand_rayon(a: &[i32], out: &mut [i32], t: i32) -> usize {
    let chunk = (a.len() / (8 * rayon::current_num_threads())).max(1 << 14);
    let counts: Vec<usize> = a
        .par_chunks(chunk)
        .map(|c| c.iter().filter(|&&x| x < t).count())
        .collect();
    let kept = counts.iter().sum();
    let mut rest = &mut out[..kept];
    let mut parts = Vec::with_capacity(counts.len());
    for &c in &counts {
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(c);
        parts.push(head);
        rest = tail;
    }
    parts
        .into_par_iter()
        .zip(a.par_chunks(chunk))
        .for_each(|(dst, src)| {
            plain_loop(src, dst, t);
        });
    kept
}

/// The device's copy speed in GB/s (bytes read + written per second) through a
/// hand-written kernel (`common/copy4.cu`) copying `n` i32 with 16-byte accesses: the best
/// of four grid sizes, each the best of 15 synchronised launches.
#[cfg(feature = "cuda")]
fn copy_kernel_gbps(n: usize) -> Result<f64, String> {
    let h = hand::Hand::new(include_str!("common/copy4.cu"))?;
    let bytes = n * 4;
    let (a, b) = (hand::DevBuf::new(bytes)?, hand::DevBuf::new(bytes)?);
    let n4 = (bytes / 16) as u64;
    let mut best = f64::INFINITY;
    for grid in [
        h.sms * 4,
        h.sms * 8,
        h.sms * 16,
        hand::Hand::blocks(n / 4, 256),
    ] {
        let t = hand::best(15, || {
            let args = hand::Args::default().push(a.ptr).push(b.ptr).push(n4);
            h.launch("copy4", (grid, 1), (256, 1), args)?;
            h.sync()
        })?;
        best = best.min(t);
    }
    Ok(2.0 * bytes as f64 / best / 1e9)
}

#[cfg(not(feature = "cuda"))]
fn copy_kernel_gbps(_: usize) -> Result<f64, String> {
    Err("built without the cuda feature".into())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median milliseconds of `reps` calls after `warm` unmeasured ones.
fn timed(warm: usize, reps: usize, mut once: impl FnMut()) -> f64 {
    for _ in 0..warm {
        once();
    }
    median(
        (0..reps)
            .map(|_| {
                let t0 = Instant::now();
                once();
                t0.elapsed().as_secs_f64() * 1e3
            })
            .collect(),
    )
}

/// Filter on every backend against a plain loop and hand-written Rayon.
#[derive(clap::Parser, Debug)]
struct Opts {
    /// Elements, as a power of two.
    #[arg(default_value_t = 24, value_parser = clap::value_parser!(u32).range(10..=30))]
    log2: u32,
    /// Fewer repetitions.
    #[arg(long)]
    quick: bool,
    /// Only the device rows (for sweeping SKEL_FILTER_TUNE).
    #[arg(long)]
    gpu_only: bool,
    #[command(flatten)]
    cargo: args::Cargo,
}

fn main() {
    let Opts {
        log2,
        quick,
        gpu_only,
        ..
    } = clap::Parser::parse();
    let (warm, reps) = if quick { (1, 5) } else { (3, 15) };
    let n = 1usize << log2;
    let a = data(n);
    let mut want = vec![0; n];
    let kept = plain_loop(&a, &mut want, THRESHOLD);
    let gb = (n + kept) as f64 * 4.0 / 1e9;
    println!(
        "Filter of 2^{log2} i32, `x < t`, selectivity {:.3}: {kept} kept, {:.3} GB moved",
        kept as f64 / n as f64,
        gb
    );
    println!(
        "\n| series | ms per call | GB/s | of copy kernel | of cuMemcpyDtoD |\n|---|---:|---:|---:|---:|"
    );
    // Both bounds: the bytes the Filter moves at each measured copy speed.
    let kernel_bound = match copy_kernel_gbps(n) {
        Ok(gbps) => {
            let ms = gb * 1e3 / gbps;
            println!("| copy bound: hand-written int4 copy kernel ({gbps:.0} GB/s) | {ms:.3} | {gbps:.0} | 1.00 | - |");
            Some(ms)
        }
        Err(e) => {
            println!("| copy bound: hand-written int4 copy kernel | skipped: {e} | | | |");
            None
        }
    };
    let d2d_bound = skel::debug::stream_model().ok().map(|m| {
        let ms = gb * 1e3 / m.device_gbps;
        println!(
            "| copy bound: cuMemcpyDtoD ({:.0} GB/s) | {ms:.3} | {:.0} | - | 1.00 |",
            m.device_gbps, m.device_gbps
        );
        ms
    });
    let row = |name: &str, ms: f64, gpu: bool| {
        let ratio = |bound: Option<f64>| match bound {
            Some(b) if gpu => format!("{:.2}", b / ms),
            _ => "-".into(),
        };
        println!(
            "| {name} | {ms:.3} | {:.1} | {} | {} |",
            gb / ms * 1e3,
            ratio(kernel_bound),
            ratio(d2d_bound)
        );
    };

    if !gpu_only {
        let mut out = vec![0; n];
        let t = timed(1, reps.min(5), || {
            assert_eq!(plain_loop(&a, &mut out, THRESHOLD), kept);
        });
        row("plain loop", t, false);
        let t = timed(warm, reps, || {
            assert_eq!(hand_rayon(&a, &mut out, THRESHOLD), kept);
        });
        assert_eq!(
            out[..kept],
            want[..kept],
            "hand-rayon differs from the plain loop"
        );
        row("hand-rayon", t, false);
    }

    let v = Vector::from(a.clone());
    let mut vout = Vector::filled(n, -1i32);
    let backends = [Backend::Cpu, Backend::Rayon, Backend::OpenCl, Backend::Cuda];
    let skip = if gpu_only { 2 } else { 0 };
    for backend in backends.into_iter().skip(skip) {
        if let Err(e) = backend.check() {
            println!("| skel-{backend} | skipped: {e} | | | |");
            continue;
        }
        let f = Filter::new(below)
            .uniforms((THRESHOLD,))
            .backend(backend)
            .download(false);
        let got = f.run(&v, &mut vout).expect("skel Filter failed");
        assert_eq!(got, kept, "skel-{backend}: count");
        assert!(
            vout.as_slice()[..kept] == want[..kept],
            "skel-{backend}: kept values differ from the plain loop"
        );
        let gpu = matches!(backend, Backend::Cuda | Backend::OpenCl);
        let (w, r) = if backend == Backend::Cpu {
            (1, reps.min(5))
        } else {
            (warm, reps)
        };
        let t = timed(w, r, || {
            f.run(&v, &mut vout).expect("skel Filter failed");
        });
        row(&format!("skel-{backend} Filter"), t, gpu);
        if gpu {
            let copy = Map::new(same).backend(backend).download(false);
            let mut c = Vector::filled(n, 0i32);
            let t = timed(warm, reps, || {
                copy.run(&v, &mut c).expect("skel Map failed");
                skel::debug::synchronize().expect("synchronize");
                if backend == Backend::OpenCl {
                    // Host access waits for the OpenCL queue; one element is enough.
                    let _ = c.view(0..1).to_vec();
                }
            });
            println!(
                "| skel-{backend} Map x -> x (copy through a kernel, {:.3} GB) | {t:.3} | {:.1} | - | - |",
                2.0 * n as f64 * 4.0 / 1e9,
                2.0 * n as f64 * 4.0 / 1e6 / t
            );
        }
    }
}
