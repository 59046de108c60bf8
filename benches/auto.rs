//! `Backend::Auto` against every fixed backend (own report, no criterion).
//!
//! 1. Size sweep 2^6..2^MAX (step 2 in the exponent; `--max-exp`, default 24) for Map,
//!    Reduce, MapReduce, Scan and MapOverlap: each backend gets its own containers filled
//!    on the host, one warm-up call, then the median of timed calls (each followed by
//!    `skel::tune::synchronize` where it ran on a device); device backends keep their inputs resident after the
//!    first call, as any steady-state loop would. Auto first calibrates lazily (calls until
//!    its decision is no longer "calibrating"), then is timed the same way. Each line says
//!    how far Auto is from the best fixed backend.
//! 2. A chain of 20 Maps and a Reduce on data that stays on the device: Auto against Rayon
//!    and the device backend, with how many of Auto's calls ran on the device.
//! 3. Hybrid: a compute-heavy Map and MapReduce on inputs the host rewrites before every
//!    call (so a GPU pays the upload each time): Rayon, the GPU, and Auto (which may split).
//!
//! `--overhead` instead measures Auto's own cost per call: at 2^6..2^12 elements, the mean
//! time per call in batches of calls on Auto and on the fixed backend Auto chose.
//!
//! `cargo bench --features "cuda opencl" --bench auto -- --max-exp 28`. The sequential
//! `cpu` series stops at 2^20 (Auto never considers it beyond 2^16 with Rayon present).

mod common;

use std::time::Instant;

use skel::prelude::*;
use skel::tune::{explain, Choice};

#[userfn]
fn poly(x: f32) -> f32 {
    (x * 0.5 + 1.0) * x - 2.0
}

#[userfn]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

#[userfn]
fn mul(a: f32, b: f32) -> f32 {
    a * b
}

#[userfn]
fn blur(w: Window<f32>) -> f32 {
    (w[-2] + w[-1] + w[0] + w[1] + w[2]) * 0.2
}

#[userfn]
fn heavy(x: f32) -> f32 {
    let mut v = x;
    for _k in 0..48 {
        v = v * 0.999 + 0.5 / (1.0 + v * v);
    }
    v
}

/// One call of a workload on its own containers, on the backend given.
type Run = Box<dyn FnMut(Backend) -> skel::Result<()>>;

/// A workload: builds its containers from `data` and returns the timed call.
struct Case {
    name: &'static str,
    make: fn(&[f32]) -> Run,
}

fn map_case(data: &[f32]) -> Run {
    let x = Vector::from(data.to_vec());
    let mut y = Vector::zeroed(data.len());
    Box::new(move |b| Map::new(poly).backend(b).run(&x, &mut y))
}

fn reduce_case(data: &[f32]) -> Run {
    let x = Vector::from(data.to_vec());
    Box::new(move |b| Reduce::new(add).backend(b).run(&x).map(|_| ()))
}

fn map_reduce_case(data: &[f32]) -> Run {
    let x = Vector::from(data.to_vec());
    let y = Vector::from(data.iter().rev().copied().collect::<Vec<_>>());
    Box::new(move |b| MapReduce::new(mul, add).backend(b).run(&x, &y).map(|_| ()))
}

fn scan_case(data: &[f32]) -> Run {
    let x = Vector::from(data.to_vec());
    let mut y = Vector::zeroed(data.len());
    Box::new(move |b| Scan::new(add).backend(b).run(&x, &mut y))
}

fn overlap_case(data: &[f32]) -> Run {
    let x = Vector::from(data.to_vec());
    let mut y = Vector::zeroed(data.len());
    Box::new(move |b| {
        MapOverlap::new(blur, 2)
            .edge(Edge::Duplicate)
            .backend(b)
            .run(&x, &mut y)
    })
}

/// Whether the last call of `b` may have left work on a device (then the timing waits for
/// it; a host call is not charged for a device synchronisation it did not need).
fn on_device(b: Backend) -> bool {
    match b {
        Backend::Cpu | Backend::Rayon => false,
        Backend::Auto => !matches!(
            explain().map(|e| e.choice),
            Some(Choice::Backend(Backend::Cpu | Backend::Rayon))
        ),
        _ => true,
    }
}

/// Median seconds of timed calls of `f` on `b` (at least 3, until about 50 ms or 15 calls).
/// Whether the calls wait for a device is settled by the call made before (`explain`
/// clones the whole history, which would be timed as part of a 1 us call); the choice is
/// checked again afterwards.
fn time(f: &mut Run, b: Backend) -> skel::Result<f64> {
    let sync = on_device(b);
    let ran = choice();
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < 3 || (times.len() < 15 && start.elapsed().as_secs_f64() < 0.05) {
        let t = Instant::now();
        f(b)?;
        if sync {
            skel::tune::synchronize()?;
        }
        times.push(t.elapsed().as_secs_f64());
    }
    if b == Backend::Auto && choice() != ran {
        eprintln!("auto changed its choice while timed: {ran} -> {}", choice());
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// Calls `f` on Auto until it stops calibrating (at most 64 calls).
fn calibrate(f: &mut Run) -> skel::Result<()> {
    for _ in 0..64 {
        f(Backend::Auto)?;
        if !explain().is_some_and(|e| e.reason.starts_with("calibrating")) {
            break;
        }
    }
    skel::tune::synchronize()
}

fn choice() -> String {
    explain().map_or("?".into(), |e| match e.choice {
        Choice::Backend(b) => b.to_string(),
        Choice::Split { gpu, cpu_elems, .. } => {
            format!(
                "split {:.0}% rayon/{gpu}",
                100.0 * cpu_elems as f64 / e.size as f64
            )
        }
        other => other.to_string(),
    })
}

fn us(s: f64) -> String {
    format!("{:.1}", s * 1e6)
}

/// Backend::Auto against every fixed backend.
#[derive(clap::Parser, Debug)]
struct Opts {
    /// The largest size of the sweep, as a power of two.
    #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(u32).range(6..=30))]
    max_exp: u32,
    /// Measure only Auto's own cost per call.
    #[arg(long)]
    overhead: bool,
    #[command(flatten)]
    cargo: common::args::Cargo,
}

/// The command line: `--max-exp E`, `--overhead`.
fn args() -> Result<(u32, bool), String> {
    let o = <Opts as clap::Parser>::parse();
    Ok((o.max_exp, o.overhead))
}

fn cases() -> [Case; 5] {
    [
        Case {
            name: "Map",
            make: map_case,
        },
        Case {
            name: "Reduce",
            make: reduce_case,
        },
        Case {
            name: "MapReduce",
            make: map_reduce_case,
        },
        Case {
            name: "Scan",
            make: scan_case,
        },
        Case {
            name: "MapOverlap",
            make: overlap_case,
        },
    ]
}

/// Mean ns per call of `f` over batches of `calls` calls, the best of `rounds` batches.
fn per_call(f: &mut Run, b: Backend, calls: u32, sync: bool) -> skel::Result<f64> {
    let t = Instant::now();
    for _ in 0..calls {
        f(b)?;
    }
    if sync {
        skel::tune::synchronize()?;
    }
    Ok(t.elapsed().as_secs_f64() * 1e9 / f64::from(calls))
}

/// Auto's own cost per call: at 2^6..2^12 elements, Auto (after calibration) against the
/// fixed backend it chose, on containers of their own, in alternating batches of calls
/// (the best batch of each counts).
fn overhead() -> skel::Result<()> {
    println!("\n| skeleton | n | auto ran on | fixed ns/call | auto ns/call | overhead ns |");
    println!("|---|---|---|---|---|---|");
    for case in &cases() {
        for exp in (6..=12u32).step_by(2) {
            let n = 1usize << exp;
            let data = common::data(n, u64::from(exp));
            let mut auto = (case.make)(&data);
            calibrate(&mut auto)?;
            let Some(Choice::Backend(b)) = explain().map(|e| e.choice) else {
                println!("| {} | 2^{exp} | {} | - | - | - |", case.name, choice());
                continue;
            };
            let mut fixed = (case.make)(&data);
            let sync = on_device(b);
            let calls = (2_000_000 >> exp).clamp(200, 20_000);
            let (mut a, mut f) = (f64::INFINITY, f64::INFINITY);
            for _ in 0..7 {
                f = f.min(per_call(&mut fixed, b, calls, sync)?);
                a = a.min(per_call(&mut auto, Backend::Auto, calls, sync)?);
            }
            println!(
                "| {} | 2^{exp} | {b} | {f:.0} | {a:.0} | {:+.0} |",
                case.name,
                a - f
            );
        }
    }
    Ok(())
}

fn sweep(backends: &[Backend], max_exp: u32) -> skel::Result<()> {
    let cases = cases();
    let header: Vec<String> = backends.iter().map(|b| format!("{b} us")).collect();
    println!(
        "\n| skeleton | n | {} | auto us | auto ran on | best fixed | auto vs best | \
         auto's backend on auto's containers us |",
        header.join(" | ")
    );
    println!(
        "|---|---|{}---|---|---|---|---|",
        "---|".repeat(backends.len())
    );
    let mut worst = 0.0f64;
    let mut worst_at = String::new();
    let (mut cells_in, mut cells_all) = (0, 0);
    for case in &cases {
        for exp in (6..=max_exp).step_by(2) {
            let n = 1usize << exp;
            let data = common::data(n, u64::from(exp));
            let mut cells = Vec::new();
            let mut best = (f64::INFINITY, Backend::Cpu);
            for &b in backends {
                if b == Backend::Cpu && exp > 20 {
                    cells.push("-".to_string());
                    continue;
                }
                let mut f = (case.make)(&data);
                let timed = f(b)
                    .and_then(|()| skel::tune::synchronize())
                    .and_then(|()| time(&mut f, b));
                match timed {
                    Ok(t) => {
                        if t < best.0 {
                            best = (t, b);
                        }
                        cells.push(us(t));
                    }
                    Err(e) => {
                        eprintln!("{} 2^{exp} on {b}: {e}", case.name);
                        cells.push("error".into());
                    }
                }
            }
            let mut f = (case.make)(&data);
            let t = match calibrate(&mut f).and_then(|()| time(&mut f, Backend::Auto)) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("{} 2^{exp} on auto: {e}", case.name);
                    f64::NAN
                }
            };
            let ran = choice();
            // The chosen backend called directly on Auto's containers (which calibration
            // left valid in several places): tells Auto's choice from its containers.
            let direct = match explain().map(|e| e.choice) {
                Some(Choice::Backend(c)) => time(&mut f, c).map_or("error".into(), us),
                _ => "-".into(),
            };
            let off = 100.0 * (t / best.0 - 1.0);
            cells_all += 1;
            cells_in += usize::from(off <= 10.0);
            if off > 10.0 {
                // Why Auto ran where it did, for the cells that miss (on stderr).
                if let Some(why) = explain() {
                    eprint!("{} 2^{exp}, {off:+.1} %: {why}", case.name);
                }
            }
            if off > worst {
                worst = off;
                worst_at = format!("{} 2^{exp}", case.name);
            }
            println!(
                "| {} | 2^{exp} | {} | {} | {ran} | {} | {off:+.1} % | {direct} |",
                case.name,
                cells.join(" | "),
                us(t),
                best.1
            );
        }
    }
    println!("\nAuto within {worst:.1} % of best (worst: {worst_at})");
    println!("Auto within 10 % of the best fixed backend in {cells_in} of {cells_all} cells");
    Ok(())
}

fn chain(gpu: Backend, n: usize) -> skel::Result<()> {
    println!("\nChain on resident data: 20 Maps of poly back and forth + Reduce, n = {n}");
    let data = common::data(n, 99);
    for b in [Backend::Rayon, gpu, Backend::Auto] {
        let mut x = Vector::from(data.clone());
        let mut y = Vector::zeroed(n);
        // Device-resident data: the chain starts where an earlier GPU call left `x` (a
        // Reduce uploads it; the host copy stays valid too).
        Reduce::new(add).backend(gpu).run(&x)?;
        let (m, r) = (Map::new(poly).backend(b), Reduce::new(add).backend(b));
        let mut on_device = 0;
        let device = || {
            let ran = choice();
            usize::from(ran == Backend::Cuda.to_string() || ran == Backend::OpenCl.to_string())
        };
        let mut best = f64::INFINITY;
        for round in 0..4 {
            let t = Instant::now();
            for _ in 0..10 {
                m.run(&x, &mut y)?;
                on_device += usize::from(round == 3) * device();
                m.run(&y, &mut x)?;
                on_device += usize::from(round == 3) * device();
            }
            r.run(&x)?;
            skel::tune::synchronize()?;
            // The first rounds calibrate Auto (and build kernels); the best of the rest counts.
            if round >= 2 {
                best = best.min(t.elapsed().as_secs_f64());
            }
        }
        let note = if b == Backend::Auto {
            format!(
                " ({on_device}/20 Maps of the last round on a GPU, the last on {})",
                choice()
            )
        } else {
            String::new()
        };
        println!("  {b:<7} {:>10} us{note}", us(best));
    }
    Ok(())
}

fn hybrid(gpu: Backend, n: usize) -> skel::Result<()> {
    println!("\nHybrid: heavy Map / MapReduce (48 iterations per element) on host-rewritten input, n = {n}");
    let data = common::data(n, 7);
    for (name, reduce) in [("Map", false), ("MapReduce", true)] {
        let mut line = format!("  {name:<9}");
        for b in [Backend::Rayon, gpu, Backend::Auto] {
            let mut x = Vector::from(data.clone());
            let mut y = Vector::zeroed(n);
            let m = Map::new(heavy).backend(b).checked(false);
            let mr = MapReduce::new(heavy, add).backend(b);
            let mut times = Vec::new();
            // The first calls build kernels; Auto's calibrate (a warm-up and samples per
            // candidate): only the calls after those are timed.
            let mut warm = 0;
            for i in 0..70 {
                x.as_mut_slice()[i % n] += 1.0; // the host wrote the input: devices copy it again
                let t = Instant::now();
                if reduce {
                    mr.run(&x)?;
                } else {
                    m.run(&x, &mut y)?;
                }
                skel::tune::synchronize()?;
                let calibrating = b == Backend::Auto
                    && explain().is_some_and(|e| e.reason.starts_with("calibrating"));
                if warm < 3 || calibrating {
                    warm += 1;
                } else {
                    times.push(t.elapsed().as_secs_f64());
                    if times.len() == 6 {
                        break;
                    }
                }
            }
            times.sort_by(f64::total_cmp);
            let ran = if b == Backend::Auto {
                format!(" [{}]", choice())
            } else {
                String::new()
            };
            let median = times
                .get(times.len() / 2)
                .map_or("still calibrating".into(), |&t| us(t));
            line += &format!("  {b}: {median} us{ran}");
        }
        println!("{line}");
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (max_exp, only_overhead) = args()?;
    let dir = std::env::temp_dir().join(format!("skel-bench-auto-{}", std::process::id()));
    skel::tune::set_model_dir(Some(&dir));
    if only_overhead {
        overhead()?;
        let _ = std::fs::remove_dir_all(&dir);
        return Ok(());
    }
    let cal = skel::tune::calibrate()?;
    println!("Calibration: {cal}");
    let backends = common::backends();
    sweep(&backends, max_exp)?;
    let gpu = [Backend::Cuda, Backend::OpenCl]
        .into_iter()
        .find(|b| backends.contains(b));
    match gpu {
        Some(g) => {
            let n = 1 << max_exp.min(24);
            chain(g, n)?;
            hybrid(g, n)?;
        }
        None => println!("\nno device backend: chain and hybrid skipped"),
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
