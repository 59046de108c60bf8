//! Histogram and ReduceByKey (issue 28): every skel backend here next to a hand-written
//! Rayon loop of the same computation and, on CUDA, the device copy bound, in one run (own
//! report, no criterion). The GPU peers (torch.bincount, cupy.bincount, a CuPy atomics
//! kernel for the k-means sums) are `benches/peers/histogram_peers.py`, same sizes.
//!
//! ```text
//! cargo bench --bench histogram                          # full sizes (cargo passes --bench)
//! cargo bench --features "cuda opencl" --bench histogram
//! ./bench-histogram --full [--repeat 15]                 # the built binary, full sizes
//! ./bench-histogram --full --log2 26 20                  # 2^26 bytes, 2^20 points
//! ./bench-histogram --full --no-cpu                      # without the sequential rows
//! ./bench-histogram                                      # short: tiny sizes, 1 run (CI,
//!                                                        # `cargo test --benches`)
//! ```
//!
//! Rows: (1) Histogram, 256 bins of 2^28 `u8` (2^16 short), `counts[x] += 1`; (2)
//! ReduceByKey k-means step, 2^24 2D points (2^14 short), k = 16, 64, 256: per cluster the
//! sum of the points nearest to its centre and their count. Each time is the median of
//! `repeat` calls after a warm-up call. GPU rows are device-resident: the input is on the
//! device after the warm-up and the result stays there (the call is waited for, not
//! copied back). Every skel result is compared with the hand loop's before timing:
//! counts exactly, float sums within the bound of reassociated f32 sums.

use std::time::Instant;

use rayon::prelude::*;
use skel::prelude::*;

#[path = "common/args.rs"]
mod args;

#[userfn]
fn byte_bin(x: u8) -> u32 {
    x as u32
}

#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
struct Point {
    x: f32,
    y: f32,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
struct Acc {
    x: f32,
    y: f32,
    n: u32,
}

#[userfn]
fn nearest(p: Point, centres: &[Point]) -> (u32, Acc) {
    let mut best = 0u32;
    let mut dist = f32::MAX;
    for k in 0..centres.len() {
        let (dx, dy) = (p.x - centres[k].x, p.y - centres[k].y);
        let d = dx * dx + dy * dy;
        if d < dist {
            dist = d;
            best = k as u32;
        }
    }
    (
        best,
        Acc {
            x: p.x,
            y: p.y,
            n: 1,
        },
    )
}

#[userfn]
fn merge(a: Acc, b: Acc) -> Acc {
    Acc {
        x: a.x + b.x,
        y: a.y + b.y,
        n: a.n + b.n,
    }
}

struct Config {
    short: bool,
    repeat: usize,
    /// `--log2 H P`: 2^H bytes and 2^P points instead of the mode's sizes.
    log2: Option<(u32, u32)>,
    /// `--no-cpu`: no row of the sequential `cpu` backend (seconds per call at full size).
    no_cpu: bool,
}

/// Histogram and ReduceByKey against hand-written Rayon and the copy bound.
#[derive(clap::Parser, Debug)]
struct Opts {
    /// Small sizes, one repetition (the default unless cargo bench runs it or --full).
    #[arg(long)]
    short: bool,
    /// The full sizes even outside `cargo bench`.
    #[arg(long)]
    full: bool,
    /// Repetitions per row (the median is reported; default 1 short, 9 full).
    #[arg(long)]
    repeat: Option<usize>,
    /// 2^H bytes and 2^P points instead of the mode's sizes.
    #[arg(long, num_args = 2, value_names = ["H", "P"])]
    log2: Option<Vec<u32>>,
    /// No row of the sequential `cpu` backend.
    #[arg(long)]
    no_cpu: bool,
    #[command(flatten)]
    cargo: args::Cargo,
}

impl Config {
    fn from_args() -> Config {
        let o: Opts = clap::Parser::parse();
        // `cargo bench` passes --bench; `cargo test --benches` and a bare run do not.
        let short = o.short || !(o.cargo.bench || o.full);
        let repeat = o.repeat.unwrap_or(if short { 1 } else { 9 });
        Config {
            short,
            repeat: usize::max(repeat, 1),
            log2: o.log2.map(|v| (v[0], v[1])),
            no_cpu: o.no_cpu,
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median milliseconds of `reps` calls after one unmeasured call.
fn timed(reps: usize, mut once: impl FnMut()) -> f64 {
    once();
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

/// Waits for the device work of a call whose result `out` stays on the device.
fn settle<T: DeviceType>(backend: Backend, out: &Vector<T>) {
    match backend {
        Backend::Cuda => skel::debug::synchronize().expect("synchronize"),
        // Host access waits for the OpenCL queue; one element is enough.
        Backend::OpenCl => drop(out.view(0..1).to_vec()),
        _ => {}
    }
}

fn data(n: usize, seed: u64) -> Vec<u32> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 32) as u32
        })
        .collect()
}

fn hand_histogram(a: &[u8]) -> Vec<u64> {
    a.par_chunks(1 << 16)
        .fold(
            || vec![0u64; 256],
            |mut h, c| {
                let mut t = [0u32; 256];
                for &x in c {
                    t[x as usize] += 1;
                }
                for (h, t) in h.iter_mut().zip(t) {
                    *h += u64::from(t);
                }
                h
            },
        )
        .reduce(
            || vec![0u64; 256],
            |mut a, b| {
                a.iter_mut().zip(b).for_each(|(a, b)| *a += b);
                a
            },
        )
}

fn nearest_plain(p: &Point, centres: &[Point]) -> usize {
    let (mut best, mut dist) = (0usize, f32::MAX);
    for (k, c) in centres.iter().enumerate() {
        let (dx, dy) = (p.x - c.x, p.y - c.y);
        let d = dx * dx + dy * dy;
        if d < dist {
            (best, dist) = (k, d);
        }
    }
    best
}

fn hand_kmeans(points: &[Point], centres: &[Point]) -> Vec<Acc> {
    let k = centres.len();
    points
        .par_chunks(1 << 14)
        .fold(
            || vec![Acc::default(); k],
            |mut t, c| {
                for p in c {
                    let a = &mut t[nearest_plain(p, centres)];
                    (a.x, a.y, a.n) = (a.x + p.x, a.y + p.y, a.n + 1);
                }
                t
            },
        )
        .reduce(
            || vec![Acc::default(); k],
            |mut a, b| {
                for (a, b) in a.iter_mut().zip(b) {
                    (a.x, a.y, a.n) = (a.x + b.x, a.y + b.y, a.n + b.n);
                }
                a
            },
        )
}

const BACKENDS: [Backend; 4] = [Backend::Cpu, Backend::Rayon, Backend::OpenCl, Backend::Cuda];

fn histogram_rows(cfg: &Config) {
    let log2 = cfg.log2.map_or(if cfg.short { 16 } else { 28 }, |l| l.0);
    let n = 1usize << log2;
    let raw: Vec<u8> = data(n, 7).iter().map(|&x| x as u8).collect();
    let want = hand_histogram(&raw);
    println!(
        "\n## Histogram: 256 bins of 2^{log2} u8 ({:.3} GB read)",
        n as f64 / 1e9
    );
    println!("\n| series | ms per call | GB/s | of hand-rayon | of copy bound |\n|---|---:|---:|---:|---:|");
    let gbs = |ms: f64| n as f64 / 1e6 / ms;
    let bound = skel::debug::stream_model().ok().map(|m| {
        // cuMemcpyDtoD of the input: n bytes read and n written, a conservative bound for
        // a kernel that only reads them.
        let ms = n as f64 / 1e6 / m.device_gbps;
        println!(
            "| copy bound: cuMemcpyDtoD of the input ({:.0} GB/s) | {ms:.3} | {:.0} | - | 1.00 |",
            m.device_gbps, m.device_gbps
        );
        ms
    });
    let hand = timed(cfg.repeat, || assert_eq!(hand_histogram(&raw), want));
    println!(
        "| hand-rayon (per-chunk [u32; 256], merged) | {hand:.3} | {:.1} | 1.00 | - |",
        gbs(hand)
    );
    let v = Vector::from(raw);
    let mut counts = Vector::<u64>::zeroed(256);
    for backend in BACKENDS {
        if cfg.no_cpu && backend == Backend::Cpu {
            continue;
        }
        if let Err(e) = backend.check() {
            println!("| skel-{backend} | skipped: {e} | | | |");
            continue;
        }
        let h = Histogram::new(byte_bin).backend(backend).download(false);
        h.run(&v, &mut counts).expect("skel Histogram failed");
        assert_eq!(counts.to_vec(), want, "skel-{backend}: counts differ");
        let gpu = matches!(backend, Backend::Cuda | Backend::OpenCl);
        let t = timed(
            if backend == Backend::Cpu {
                1
            } else {
                cfg.repeat
            },
            || {
                h.run(&v, &mut counts).expect("skel Histogram failed");
                settle(backend, &counts);
            },
        );
        let of_bound = match bound {
            Some(b) if gpu => format!("{:.2}", b / t),
            _ => "-".into(),
        };
        println!(
            "| skel-{backend} Histogram | {t:.3} | {:.1} | {:.2} | {of_bound} |",
            gbs(t),
            hand / t
        );
    }
}

fn kmeans_rows(cfg: &Config) {
    let log2 = cfg.log2.map_or(if cfg.short { 14 } else { 24 }, |l| l.1);
    let n = 1usize << log2;
    let raw = data(2 * n, 11);
    let unit = |x: u32| (x >> 8) as f32 / (1u32 << 24) as f32;
    let points: Vec<Point> = (0..n)
        .map(|i| Point {
            x: unit(raw[2 * i]),
            y: unit(raw[2 * i + 1]),
        })
        .collect();
    println!("\n## ReduceByKey: k-means cluster sums of 2^{log2} 2D points (f32)");
    println!("\n| k | series | ms per call | of hand-rayon |\n|---:|---|---:|---:|");
    let v = Vector::from(points.clone());
    for k in [16usize, 64, 256] {
        let cs = data(2 * k, 13 + k as u64);
        let centres: Vec<Point> = (0..k)
            .map(|j| Point {
                x: unit(cs[2 * j]),
                y: unit(cs[2 * j + 1]),
            })
            .collect();
        let want = hand_kmeans(&points, &centres);
        let hand = timed(cfg.repeat, || drop(hand_kmeans(&points, &centres)));
        println!("| {k} | hand-rayon (per-chunk tables, merged) | {hand:.3} | 1.00 |");
        let cv = Vector::from(centres.clone());
        let mut sums = Vector::<Acc>::zeroed(k);
        for backend in BACKENDS {
            if cfg.no_cpu && backend == Backend::Cpu {
                continue;
            }
            if let Err(e) = backend.check() {
                println!("| {k} | skel-{backend} | skipped: {e} | |");
                continue;
            }
            let r = ReduceByKey::new(nearest, merge)
                .arrays((&cv,))
                .backend(backend)
                .download(false);
            r.run(&v, &mut sums).expect("skel ReduceByKey failed");
            for (g, w) in sums.to_vec().iter().zip(&want) {
                assert_eq!(g.n, w.n, "skel-{backend}: counts differ");
                // Both are sums of w.n values in 0..1 in some order: within n * 2^-23 * sum.
                let tol = f64::from(w.n) * f64::from(w.x.max(w.y)) / f64::from(1u32 << 23) + 1e-3;
                assert!(
                    f64::from((g.x - w.x).abs()) <= tol,
                    "skel-{backend}: {g:?} vs {w:?}"
                );
                assert!(
                    f64::from((g.y - w.y).abs()) <= tol,
                    "skel-{backend}: {g:?} vs {w:?}"
                );
            }
            let t = timed(
                if backend == Backend::Cpu {
                    1
                } else {
                    cfg.repeat
                },
                || {
                    r.run(&v, &mut sums).expect("skel ReduceByKey failed");
                    settle(backend, &sums);
                },
            );
            println!(
                "| {k} | skel-{backend} ReduceByKey | {t:.3} | {:.2} |",
                hand / t
            );
        }
    }
}

fn main() {
    let cfg = Config::from_args();
    println!(
        "histogram bench ({} sizes, median of {}), {} Rayon threads",
        if cfg.short { "short" } else { "full" },
        cfg.repeat,
        rayon::current_num_threads()
    );
    histogram_rows(&cfg);
    kmeans_rows(&cfg);
}
