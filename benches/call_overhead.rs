//! What one small skeleton call costs on each backend: a Map and a Reduce of 64 `f32`,
//! back to back on resident data, in microseconds per call (the fixed cost a call pays
//! before its size matters: argument setup, launch, waiting for a Reduce's value); then a
//! Map of 1000 `f32` called eagerly next to the same call recorded in a `skel::Graph` and
//! launched (one call per launch, and ten per launch), with a plain Rust loop over the
//! host slices as the floor a call cannot beat on the host.
//!
//! ```text
//! cargo bench --bench call_overhead                          # cpu, rayon
//! cargo bench --features "cuda opencl" --bench call_overhead -- --calls 20000
//! cargo bench --bench call_overhead -- --backend rayon        # one backend (for a profiler)
//! ```

use std::time::Instant;

use clap::Parser;
use skel::prelude::*;

#[path = "common/args.rs"]
mod args;

/// The fixed cost of one small skeleton call per backend.
#[derive(Parser, Debug)]
struct Opts {
    /// Calls per round (best of three rounds).
    #[arg(long, default_value_t = 5000)]
    calls: usize,
    #[command(flatten)]
    cargo: args::Cargo,
}

#[userfn]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

/// The backends to time: `--backend name` (for profiling one), else every one available.
fn backends() -> skel::Result<Vec<Backend>> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == "--backend") {
        Some(i) => Ok(vec![args.get(i + 1).map_or("", String::as_str).parse()?]),
        None => Ok(Backend::available()),
    }
}

fn calls() -> usize {
    Opts::parse().calls
}

/// Best of three rounds of `calls` calls of `call`, in microseconds per call (each round
/// ends with one synchronisation).
fn per_call(calls: usize, mut call: impl FnMut() -> skel::Result<()>) -> skel::Result<f64> {
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let t = Instant::now();
        for _ in 0..calls {
            call()?;
        }
        skel::tune::synchronize()?;
        best = best.min(t.elapsed().as_secs_f64() * 1e6 / calls as f64);
    }
    Ok(best)
}

fn main() -> skel::Result<()> {
    let calls = calls();
    let a = Vector::filled(64, 1.0f32);
    let b = Vector::filled(64, 2.0f32);
    let mut out = Vector::zeroed(64);
    println!("per-call cost of 64-element calls, best of 3 x {calls} calls");
    // What waiting for a device costs when nothing is pending (a timing loop pays it per
    // call it times).
    let idle = per_call(calls, skel::tune::synchronize)?;
    println!("skel::tune::synchronize() with nothing pending: {idle:.2} us");
    println!("{:<8} {:>12} {:>12}", "backend", "Map us", "Reduce us");
    for backend in backends()? {
        let map = Map::new(add).backend(backend);
        let reduce = Reduce::new(add).backend(backend);
        // Warm-up: kernels built, operands resident where the backend computes.
        map.run(&a, &b, &mut out)?;
        reduce.run(&a)?;
        let m = per_call(calls, || map.run(&a, &b, &mut out))?;
        let r = per_call(calls, || reduce.run(&a).map(|_| ()))?;
        println!("{:<8} {m:>12.2} {r:>12.2}", backend.to_string());
    }
    replay(calls)
}

/// A Map of 1000 elements per backend: eager, replayed from a graph of one call, replayed
/// from a graph of ten calls (per call), and a hand-written host loop.
fn replay(calls: usize) -> skel::Result<()> {
    const N: usize = 1000;
    let x = Vector::from_fn(N, |i| i as f32);
    let y = Vector::filled(N, 2.0f32);
    let mut o = Vector::zeroed(N);
    println!("\nMap of {N} f32, us per call (graph: skel::Graph::record once, launch per call)");
    let (xs, ys) = (x.to_vec(), y.to_vec());
    let mut os = vec![0.0f32; N];
    let host = per_call(calls, || {
        let (xs, ys) = std::hint::black_box((&xs, &ys));
        for ((o, a), b) in os.iter_mut().zip(xs).zip(ys) {
            *o = *a + *b;
        }
        std::hint::black_box(&mut os);
        Ok(())
    })?;
    println!("hand-written host loop: {host:.2} us");
    println!(
        "{:<8} {:>10} {:>12} {:>14} {:>12} {:>10} {:>11}",
        "backend", "eager", "graph of 1", "graph of 10", "eager again", "eager/1", "replay"
    );
    for backend in backends()? {
        let map = Map::new(add).backend(backend);
        map.run(&x, &y, &mut o)?;
        let eager = per_call(calls, || map.run(&x, &y, &mut o))?;
        let one = {
            let g = skel::Graph::record(|| map.run(&x, &y, &mut o))?;
            per_call(calls, || g.launch())?
        };
        let (ten, device) = {
            let g = skel::Graph::record(|| (0..10).try_for_each(|_| map.run(&x, &y, &mut o)))?;
            let t = per_call(calls.div_ceil(10), || g.launch())? / 10.0;
            (
                t,
                if g.device_graph() {
                    "cuda graph"
                } else {
                    "closure"
                },
            )
        };
        // Eager once more, after the replays: what changed between the rounds (a device
        // queue, a clock) shows as a difference from the first eager column.
        let again = per_call(calls, || map.run(&x, &y, &mut o))?;
        // The result stays checked: a replay that computed nothing would show here.
        if o.as_slice()
            .iter()
            .enumerate()
            .any(|(i, &v)| v != i as f32 + 2.0)
        {
            return Err(skel::Error::InvalidArgument(format!(
                "{backend}: the replayed Map computed a wrong result"
            )));
        }
        println!(
            "{:<8} {eager:>10.2} {one:>12.2} {ten:>14.2} {again:>12.2} {:>10.2} {device:>11}",
            backend.to_string(),
            eager / one
        );
    }
    Ok(())
}
