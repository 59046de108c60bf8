//! MultiStream on CUDA: host-to-host skeleton calls split over `k` streams, measured against
//! the pure-copy bound and against the cost model (`skel::debug::StreamModel`).
//!
//! Not a criterion bench: it prints two Markdown tables ready to paste.
//!
//! ```text
//! cargo bench --features cuda --bench multistream              # n = 2^24 f32
//! cargo bench --features cuda --bench multistream -- --quick   # fewer repetitions
//! cargo bench --features cuda --bench multistream -- 22        # n = 2^22
//! ./bench-multistream [--quick] [LOG2_N]                        # the built binary alone
//! ```
//!
//! Table 1: one Map `a + b` over two inputs, host to host (inputs invalidated on the device
//! before every repetition, result downloaded eagerly and waited for), for k = 1, the cost
//! model's choice, 2, 4, 8, 16; against the bound max(upload, kernel, download) from
//! `skel::debug::copy_bound` and the device-resident time of the same Map.
//!
//! Table 2: Map, MapArray, MapReduce, Scan and MapOverlap host to host for k = 1..16 next to
//! the cost model's prediction `StreamModel::predict_ms`.
//!
//! Without a CUDA device (or without the `cuda` feature) it prints
//! "skipped: no CUDA device" and exits 0.

mod common;

use std::time::Instant;

use skel::debug::{self, StreamModel};
use skel::prelude::*;

#[userfn]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

#[userfn]
fn mult(a: f32, b: f32) -> f32 {
    a * b
}

#[userfn]
fn tile_scale(#[index] i: usize, arr: &[f32], a: f32) -> f32 {
    a * arr[i % 1024]
}

#[userfn]
fn blur5(w: Window<f32>) -> f32 {
    (w[-2] + w[-1] + w[0] + w[1] + w[2]) * 0.2
}

/// Length of the MapArray array.
const ARRAY: usize = 1024;
/// MapOverlap radius.
const RADIUS: usize = 2;
/// The `k` of the forced rows.
const KS: [usize; 5] = [1, 2, 4, 8, 16];
/// The largest `k` the model may pick (the CUDA stream pool).
const MAX_K: usize = 16;
/// Device-resident calls per timing of the kernel alone.
const KERNEL_CALLS: usize = 20;
/// Elements checked against the host after each series.
const SAMPLES: usize = 4096;

const F32: usize = std::mem::size_of::<f32>();

struct Config {
    log2: u32,
    n: usize,
    warm: usize,
    reps: usize,
}

fn main() {
    if let Err(e) = Backend::Cuda.check() {
        println!("skipped: no CUDA device");
        eprintln!("({e})");
        return;
    }
    let cfg = match config() {
        Ok(c) => c,
        Err(msg) => {
            eprintln!("{msg}\nusage: multistream [--quick] [LOG2_N]   (default LOG2_N = 24)");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&cfg) {
        eprintln!("multistream bench failed: {e}");
        std::process::exit(1);
    }
}

/// MultiStream against one stream on CUDA.
#[derive(clap::Parser, Debug)]
struct Opts {
    /// Elements, as a power of two.
    #[arg(default_value_t = 24, value_parser = clap::value_parser!(u32).range(10..=28))]
    log2: u32,
    /// Fewer repetitions.
    #[arg(long)]
    quick: bool,
    #[command(flatten)]
    cargo: common::args::Cargo,
}

fn config() -> Result<Config, String> {
    let Opts { log2, quick, .. } = clap::Parser::parse();
    let (warm, reps) = if quick { (2, 10) } else { (3, 30) };
    Ok(Config {
        log2,
        n: 1 << log2,
        warm,
        reps,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// Median of `reps` calls of `once` (each returns its own timed milliseconds) after `warm`
/// untimed ones.
fn timed(cfg: &Config, mut once: impl FnMut() -> skel::Result<f64>) -> skel::Result<f64> {
    for _ in 0..cfg.warm {
        once()?;
    }
    let mut t = Vec::with_capacity(cfg.reps);
    for _ in 0..cfg.reps {
        t.push(once()?);
    }
    Ok(median(t))
}

fn ms_since(t0: Instant) -> f64 {
    t0.elapsed().as_secs_f64() * 1e3
}

fn pinned(data: Vec<f32>) -> skel::Result<Vector<f32>> {
    Vector::pinned(data)
}

/// Evenly spread sample positions (first and last included).
fn samples(n: usize) -> impl Iterator<Item = usize> {
    let step = (n / SAMPLES).max(1);
    (0..n).step_by(step).chain(std::iter::once(n - 1))
}

/// `Err` unless `got` is within `rel` (relative, scale at least 1) of `want`.
fn check(what: &str, i: usize, got: f32, want: f64, rel: f64) -> skel::Result<()> {
    let scale = want.abs().max(1.0);
    if (f64::from(got) - want).abs() <= rel * scale {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "{what}: wrong result at {i}: got {got}, want {want}"
        )))
    }
}

fn run(cfg: &Config) -> skel::Result<()> {
    let n = cfg.n;
    let model = debug::stream_model()?;
    println!(
        "MultiStream, n = 2^{} = {} f32 ({:.1} MiB per vector), median of {} reps after {} warm-up.\n",
        cfg.log2,
        n,
        (n * F32) as f64 / (1 << 20) as f64,
        cfg.reps,
        cfg.warm
    );
    println!(
        "Cost model: h2d {:.1} GB/s, d2h {:.1} GB/s, device {:.0} GB/s, overhead {:.1} µs per chunk\n",
        model.h2d_gbps, model.d2h_gbps, model.device_gbps, model.overhead_us
    );
    table1(cfg, &model)?;
    println!();
    table2(cfg, &model)?;
    Ok(())
}

/// Table 1: Map `a + b` host to host against the copy bound.
fn table1(cfg: &Config, model: &StreamModel) -> skel::Result<()> {
    let n = cfg.n;
    let (up_b, kernel_b, down_b) = (2 * n * F32, 3 * n * F32, n * F32);
    let bound = debug::copy_bound(up_b, down_b)?;

    let (ha, hb) = (common::data(n, 1), common::data(n, 2));
    let (mut a, mut b) = (pinned(ha.clone())?, pinned(hb.clone())?);
    let mut c = pinned(vec![0.0; n])?;

    // The kernel alone: inputs valid on the device, result left there.
    let resident = Map::new(add)
        .backend(Backend::Cuda)
        .streams(1)
        .download(false);
    resident.run(&a, &b, &mut c)?;
    debug::synchronize()?;
    let kernel_ms = timed(cfg, || {
        debug::synchronize()?;
        let t0 = Instant::now();
        for _ in 0..KERNEL_CALLS {
            resident.run(&a, &b, &mut c)?;
        }
        debug::synchronize()?;
        Ok(ms_since(t0) / KERNEL_CALLS as f64)
    })?;
    let bound_ms = bound.up_ms.max(kernel_ms).max(bound.down_ms);

    let auto_k = model.best_k(up_b, kernel_b, down_b, MAX_K);
    let mut rows: Vec<(String, Option<usize>)> = vec![
        ("1".into(), Some(1)),
        (format!("default (model: {auto_k})"), None),
    ];
    rows.extend(KS[1..].iter().map(|&k| (k.to_string(), Some(k))));

    println!("### Map a + b, host to host (2 inputs up, 1 result down)\n");
    println!(
        "Bound: up {:.3} ms ({:.1} GB/s), kernel {:.3} ms (device-resident, {:.0} GB/s), down {:.3} ms ({:.1} GB/s); both directions at once {:.3} ms.\n",
        bound.up_ms,
        up_b as f64 / (bound.up_ms * 1e6),
        kernel_ms,
        kernel_b as f64 / (kernel_ms * 1e6),
        bound.down_ms,
        down_b as f64 / (bound.down_ms * 1e6),
        bound.both_ms
    );
    println!("| k | measured ms | bound ms | measured / bound |");
    println!("|---|---:|---:|---:|");
    for (label, k) in rows {
        let mut map = Map::new(add).backend(Backend::Cuda).download(true);
        if let Some(k) = k {
            map = map.streams(k);
        }
        let ms = timed(cfg, || {
            // Coherence bookkeeping only (no host writes): the device copies become stale,
            // so the call really uploads both inputs.
            let _ = a.as_mut_slice();
            let _ = b.as_mut_slice();
            let t0 = Instant::now();
            map.run(&a, &b, &mut c)?;
            c.try_as_slice()?;
            Ok(ms_since(t0))
        })?;
        let got = c.try_as_slice()?;
        for i in samples(n) {
            check("Map", i, got[i], f64::from(ha[i] + hb[i]), 0.0)?;
        }
        println!(
            "| {label} | {ms:.3} | {bound_ms:.3} | {:.2} |",
            ms / bound_ms
        );
    }
    Ok(())
}

/// One skeleton of Table 2: its bytes for the model and one host-to-host call.
struct Case {
    name: &'static str,
    up: usize,
    kernel: usize,
    down: usize,
}

/// Table 2: every skeleton host to host, measured vs predicted.
fn table2(cfg: &Config, model: &StreamModel) -> skel::Result<()> {
    let n = cfg.n;
    let (ha, hb) = (common::data(n, 3), common::data(n, 4));
    let harr = common::data(ARRAY, 5);
    let (mut a, mut b) = (pinned(ha.clone())?, pinned(hb.clone())?);
    let mut arr = pinned(harr.clone())?;
    let mut out = pinned(vec![0.0; n])?;

    let cases = [
        Case {
            name: "Map",
            up: 2 * n * F32,
            kernel: 3 * n * F32,
            down: n * F32,
        },
        Case {
            name: "MapArray",
            up: (ARRAY + n) * F32,
            kernel: (ARRAY + 2 * n) * F32,
            down: n * F32,
        },
        Case {
            name: "MapReduce",
            up: 2 * n * F32,
            kernel: 2 * n * F32,
            down: 0,
        },
        Case {
            name: "Scan",
            up: n * F32,
            kernel: 2 * n * F32,
            down: n * F32,
        },
        Case {
            name: "MapOverlap",
            up: n * F32,
            kernel: 2 * n * F32,
            down: n * F32,
        },
    ];

    // Reference values at the sample positions (f64).
    let scan_ref: Vec<f64> = ha
        .iter()
        .scan(0.0f64, |s, &x| {
            *s += f64::from(x);
            Some(*s)
        })
        .collect();
    let dot_ref: f64 = ha
        .iter()
        .zip(&hb)
        .map(|(&x, &y)| f64::from(x) * f64::from(y))
        .sum();
    let at = |i: isize| ha[i.clamp(0, n as isize - 1) as usize];

    let mut table = Vec::new();
    let mut picks = Vec::new();
    for case in &cases {
        let auto_k = model.best_k(case.up, case.kernel, case.down, MAX_K);
        picks.push(format!(
            "{} k = {} ({:.3} ms predicted)",
            case.name,
            auto_k,
            model.predict_ms(case.up, case.kernel, case.down, auto_k)
        ));
        for &k in &KS {
            let ms = match case.name {
                "Map" => {
                    let sk = Map::new(add)
                        .backend(Backend::Cuda)
                        .streams(k)
                        .download(true);
                    let ms = timed(cfg, || {
                        let _ = a.as_mut_slice();
                        let _ = b.as_mut_slice();
                        let t0 = Instant::now();
                        sk.run(&a, &b, &mut out)?;
                        out.try_as_slice()?;
                        Ok(ms_since(t0))
                    })?;
                    let got = out.try_as_slice()?;
                    for i in samples(n) {
                        check("Map", i, got[i], f64::from(ha[i] + hb[i]), 0.0)?;
                    }
                    ms
                }
                "MapArray" => {
                    let sk = MapArray::new(tile_scale)
                        .backend(Backend::Cuda)
                        .streams(k)
                        .download(true);
                    let ms = timed(cfg, || {
                        let _ = arr.as_mut_slice();
                        let _ = a.as_mut_slice();
                        let t0 = Instant::now();
                        sk.run(&arr, &a, &mut out)?;
                        out.try_as_slice()?;
                        Ok(ms_since(t0))
                    })?;
                    let got = out.try_as_slice()?;
                    for i in samples(n) {
                        check(
                            "MapArray",
                            i,
                            got[i],
                            f64::from(ha[i] * harr[i % ARRAY]),
                            0.0,
                        )?;
                    }
                    ms
                }
                "MapReduce" => {
                    let sk = MapReduce::new(mult, add).backend(Backend::Cuda).streams(k);
                    let mut last = 0.0f32;
                    let ms = timed(cfg, || {
                        let _ = a.as_mut_slice();
                        let _ = b.as_mut_slice();
                        let t0 = Instant::now();
                        last = sk.run(&a, &b)?;
                        Ok(ms_since(t0))
                    })?;
                    check("MapReduce", 0, last, dot_ref, 1e-3)?;
                    ms
                }
                "Scan" => {
                    let sk = Scan::new(add)
                        .backend(Backend::Cuda)
                        .streams(k)
                        .download(true);
                    let ms = timed(cfg, || {
                        let _ = a.as_mut_slice();
                        let t0 = Instant::now();
                        sk.run(&a, &mut out)?;
                        out.try_as_slice()?;
                        Ok(ms_since(t0))
                    })?;
                    let got = out.try_as_slice()?;
                    for i in samples(n) {
                        check("Scan", i, got[i], scan_ref[i], 1e-3)?;
                    }
                    ms
                }
                _ => {
                    let sk = MapOverlap::new(blur5, RADIUS)
                        .backend(Backend::Cuda)
                        .streams(k)
                        .download(true);
                    let ms = timed(cfg, || {
                        let _ = a.as_mut_slice();
                        let t0 = Instant::now();
                        sk.run(&a, &mut out)?;
                        out.try_as_slice()?;
                        Ok(ms_since(t0))
                    })?;
                    let got = out.try_as_slice()?;
                    for i in samples(n) {
                        let i_ = i as isize;
                        let want =
                            (at(i_ - 2) + at(i_ - 1) + at(i_) + at(i_ + 1) + at(i_ + 2)) * 0.2;
                        check("MapOverlap", i, got[i], f64::from(want), 1e-5)?;
                    }
                    ms
                }
            };
            let predicted = model.predict_ms(case.up, case.kernel, case.down, k);
            let accuracy = 1.0 - (ms - predicted).abs() / ms;
            table.push(format!(
                "| {}{} | {k} | {ms:.3} | {predicted:.3} | {:.1}% |",
                case.name,
                if k == auto_k { " (model's k)" } else { "" },
                accuracy * 100.0
            ));
        }
    }

    println!("### Every skeleton host to host: measured vs the cost model\n");
    println!(
        "Bytes per call (up / kernel / down): Map 2n / 3n / n, MapArray {ARRAY} + n / 2n / n, MapReduce 2n / 2n / 0, Scan n / 2n / n, MapOverlap n / 2n / n (f32, n = 2^{}).\n",
        cfg.log2
    );
    println!("| skeleton | k | measured ms | predicted ms | accuracy |");
    println!("|---|---:|---:|---:|---:|");
    for row in table {
        println!("{row}");
    }
    println!("\nThe model picks (k <= {MAX_K}): {}.", picks.join("; "));
    Ok(())
}
