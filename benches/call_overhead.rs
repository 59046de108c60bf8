//! What one small skeleton call costs on each backend: a Map and a Reduce of 64 `f32`,
//! back to back on resident data, in microseconds per call (the fixed cost a call pays
//! before its size matters: argument setup, launch, waiting for a Reduce's value).
//!
//! ```text
//! cargo bench --bench call_overhead                          # cpu, rayon
//! cargo bench --features "cuda opencl" --bench call_overhead -- --calls 20000
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
        skel::debug::synchronize()?;
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
    for backend in Backend::available() {
        let map = Map::new(add).backend(backend);
        let reduce = Reduce::new(add).backend(backend);
        // Warm-up: kernels built, operands resident where the backend computes.
        map.run(&a, &b, &mut out)?;
        reduce.run(&a)?;
        let m = per_call(calls, || map.run(&a, &b, &mut out))?;
        let r = per_call(calls, || reduce.run(&a).map(|_| ()))?;
        println!("{:<8} {m:>12.2} {r:>12.2}", backend.to_string());
    }
    Ok(())
}
