//! SkePU's `cma`: the cumulative moving average `avg[i] = (x[0] + .. + x[i]) / (i + 1)`,
//! an inclusive Scan followed by an index Map.
//!
//! `cargo run --example skepu_cma -- --backend rayon --size 100000`

use skel::prelude::*;

mod common;

#[userfn]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

#[userfn]
fn average(#[index] i: usize, sum: f32) -> f32 {
    sum / (i + 1) as f32
}

/// The cumulative moving average of `x` on `backend`.
pub fn compute(backend: Backend, x: &[f32]) -> skel::Result<Vec<f32>> {
    let x = Vector::from(x.to_vec());
    let mut sums = Vector::zeroed(x.len());
    let mut avg = Vector::zeroed(x.len());
    Scan::new(add).backend(backend).run(&x, &mut sums)?;
    Map::new(average).backend(backend).run(&sums, &mut avg)?;
    Ok(avg.to_vec())
}

/// The same in plain Rust: a running f64 total.
pub fn reference(x: &[f32]) -> Vec<f32> {
    let mut total = 0.0f64;
    let running = x.iter().enumerate().map(|(i, &v)| {
        total += v as f64;
        (total / (i + 1) as f64) as f32
    });
    running.collect()
}

/// `n` samples in `[0, 1)`.
pub fn inputs(n: usize) -> Vec<f32> {
    common::data(n, 6)
}

fn main() -> std::process::ExitCode {
    common::main("skepu_cma", 100_000, |backend, n| {
        let x = inputs(n);
        let (got, want) = (compute(backend, &x)?, reference(&x));
        let ok = common::all_close(&got, &want, 1e-4);
        let last = |v: &[f32]| v.last().copied().unwrap_or(0.0);
        Ok((
            format!("last average = {} (reference {})", last(&got), last(&want)),
            ok,
        ))
    })
}
