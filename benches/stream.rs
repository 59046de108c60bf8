//! `skel::stream` costs: pipeline overhead per item against a hand-written crossbeam
//! pipeline, and farm scaling over 1..16 workers on a CPU-heavy stage.
//!
//! ```text
//! cargo bench --bench stream                      # both tables
//! cargo bench --bench stream -- --items 100000 --heavy-us 500 --repeat 5
//! ```
//!
//! Overhead: `items` integers through `k` empty stages (identity closures), skel's
//! `Pipeline` (`.stage` or `.farm(1, ..)`) against threads joined by bounded crossbeam
//! channels of the same capacity, doing the same hand-overs; best of `repeat` runs, in ns per
//! item. Farm scaling: `8 * cores` items (at least 64), each costing about `heavy-us` us of
//! arithmetic on one core, through one farm of w workers; items/s and the speedup over one
//! worker, next to the ideal `min(w, cores)`.

use std::hint::black_box;
use std::thread;
use std::time::{Duration, Instant};

use crossbeam::channel::bounded;
use skel::stream::Pipeline;

#[path = "common/args.rs"]
mod args;

/// Channel capacity used by both sides of the overhead comparison (skel's default).
const CAPACITY: usize = 2;

struct Options {
    items: u64,
    heavy_us: u64,
    repeat: usize,
}

fn options() -> Options {
    let mut o = Options {
        items: 200_000,
        heavy_us: 1_000,
        repeat: 3,
    };
    let args: Args = clap::Parser::parse();
    o.items = args.items.unwrap_or(o.items);
    o.heavy_us = args.heavy_us.unwrap_or(o.heavy_us);
    o.repeat = args.repeat.map_or(o.repeat, |v| v.max(1));
    o
}

/// skel::stream pipelines against hand-written crossbeam threads.
#[derive(clap::Parser, Debug)]
struct Args {
    /// Items through each pipeline (default 200000).
    #[arg(long)]
    items: Option<u64>,
    /// Microseconds of work per item in the heavy stage (default 1000).
    #[arg(long)]
    heavy_us: Option<u64>,
    /// Rounds of every case (the best is kept; default 3).
    #[arg(long)]
    repeat: Option<usize>,
    #[command(flatten)]
    cargo: args::Cargo,
}

/// Runs every case `repeat` times, round-robin (so that a burst of load on a shared machine
/// hits all cases alike), and returns each case's best time. A case returns the sum of what
/// came out, checked against `want`, so that no side can skip work.
fn best_of(repeat: usize, want: u64, cases: &mut [Box<dyn FnMut() -> u64 + '_>]) -> Vec<Duration> {
    let mut best = vec![Duration::MAX; cases.len()];
    for _ in 0..repeat {
        for (case, best) in cases.iter_mut().zip(&mut best) {
            let t = Instant::now();
            let got = case();
            *best = (*best).min(t.elapsed());
            assert_eq!(got, want, "a pipeline lost or changed items");
        }
    }
    best
}

/// `items` integers through `stages` identity threads on bounded crossbeam channels.
fn hand_written(items: u64, stages: usize) -> u64 {
    thread::scope(|s| {
        let (tx, mut rx) = bounded::<u64>(CAPACITY);
        s.spawn(move || {
            for i in 0..items {
                if tx.send(i).is_err() {
                    break;
                }
            }
        });
        for _ in 0..stages {
            let (tx, next) = bounded::<u64>(CAPACITY);
            let input = rx;
            s.spawn(move || {
                for x in input {
                    if tx.send(black_box(x)).is_err() {
                        break;
                    }
                }
            });
            rx = next;
        }
        rx.iter().sum()
    })
}

/// The same through skel: `stages` sequential stages, or farms of `farm` workers.
fn skel_pipeline(items: u64, stages: usize, farm: Option<usize>) -> u64 {
    let mut p = Pipeline::from_iter(0..items).capacity(CAPACITY);
    for _ in 0..stages {
        p = match farm {
            None => p.stage(|x| Ok(black_box(x))),
            Some(w) => p.farm(w, |x| Ok(black_box(x))),
        };
    }
    let mut sum = 0;
    // Summed in the last stage, so that the skel side keeps no output vector either.
    let run = p.for_each(|x| {
        sum += x;
        Ok(())
    });
    if let Err(e) = run {
        panic!("pipeline failed: {e}");
    }
    sum
}

/// About `us` microseconds of dependent floating-point work on one core.
fn heavy(seed: u64, iters: u64) -> u64 {
    let mut x = seed as f64 * 1e-3 + 1.0;
    for _ in 0..iters {
        x = (x * 1.000_000_1 + 0.5).sqrt() + 0.25;
    }
    black_box(x).to_bits() & 0xff
}

/// Iterations of [`heavy`] that take about `us` microseconds here.
fn calibrate(us: u64) -> u64 {
    let probe = 200_000;
    let per_iter = (0..5)
        .map(|_| {
            let t = Instant::now();
            black_box(heavy(1, probe));
            t.elapsed().as_secs_f64() / probe as f64
        })
        .fold(f64::INFINITY, f64::min);
    ((us as f64 * 1e-6) / per_iter.max(1e-12)).max(1.0) as u64
}

fn main() {
    let o = options();
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "stream bench: {cores} cores, {} items, best of {}",
        o.items, o.repeat
    );
    let want: u64 = (0..o.items).sum();
    println!("\npipeline overhead per item (empty stages, channel capacity {CAPACITY})");
    println!(
        "  {:<8} {:>14} {:>14} {:>16} {:>8}",
        "stages", "crossbeam ns", "skel .stage", "skel .farm(1)", "ratio"
    );
    let per = |d: &Duration| d.as_secs_f64() * 1e9 / o.items as f64;
    for stages in [1usize, 2, 4, 8] {
        let items = o.items;
        let times = best_of(
            o.repeat,
            want,
            &mut [
                Box::new(|| hand_written(items, stages)),
                Box::new(|| skel_pipeline(items, stages, None)),
                Box::new(|| skel_pipeline(items, stages, Some(1))),
            ],
        );
        let [hand, seq, farm] = [per(&times[0]), per(&times[1]), per(&times[2])];
        println!(
            "  {stages:<8} {hand:>14.1} {seq:>14.1} {farm:>16.1} {:>7.2}x",
            seq / hand.max(1e-9)
        );
    }

    let iters = calibrate(o.heavy_us);
    let n = (8 * cores as u64).max(64);
    let want: u64 = (0..n).map(|i| heavy(i, iters)).sum();
    println!("\nfarm scaling: {n} items of ~{} us CPU each", o.heavy_us);
    println!(
        "  {:<8} {:>10} {:>10} {:>9} {:>8}",
        "workers", "ms", "items/s", "speedup", "ideal"
    );
    let workers = [1usize, 2, 4, 8, 16];
    let farm = |w: usize| -> Box<dyn FnMut() -> u64> {
        Box::new(move || {
            let run = Pipeline::from_iter(0..n)
                .farm(w, |i| Ok(heavy(i, iters)))
                .run();
            match run {
                Ok(report) => report.outputs().iter().sum(),
                Err(e) => panic!("farm failed: {e}"),
            }
        })
    };
    let mut cases: Vec<_> = workers.iter().map(|&w| farm(w)).collect();
    let times = best_of(o.repeat, want, &mut cases);
    let one = times[0].as_secs_f64();
    for (w, took) in workers.iter().zip(&times) {
        let secs = took.as_secs_f64();
        println!(
            "  {w:<8} {:>10.1} {:>10.0} {:>8.2}x {:>7}x",
            secs * 1e3,
            n as f64 / secs,
            one / secs,
            w.min(&cores)
        );
    }
}
