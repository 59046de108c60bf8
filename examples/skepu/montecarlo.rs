//! SkePU's `montecarlo` (pi by sampling the unit square), in SkePU 3's own form: an
//! index-only MapReduce (`MapReduce<0>`) whose map function draws two uniforms from its
//! `Random` parameter, no dummy input vector.
//!
//! `cargo run --example skepu_montecarlo -- --backend rayon --size 10000000`

use skel::prelude::*;

mod common;

/// The seed of every run: the same samples on every backend.
pub const SEED: u64 = 2026;

#[userfn]
fn hit(#[index] i: usize, rng: &mut Random) -> u32 {
    let _ = i;
    let x = rng.next_f32();
    let y = rng.next_f32();
    (x * x + y * y <= 1.0) as u32
}

#[userfn]
fn add(a: u32, b: u32) -> u32 {
    a + b
}

/// The samples of `n` that fall inside the quarter circle, on `backend`.
pub fn compute(backend: Backend, n: usize) -> skel::Result<u32> {
    MapReduce::new(hit, add)
        .seed(SEED)
        .backend(backend)
        .run_index(n)
}

/// The same count in plain Rust, from the streams `Random::at` gives each sample.
pub fn reference(n: usize) -> u32 {
    (0..n)
        .map(|i| {
            let mut rng = Random::at(SEED, i);
            let (x, y) = (rng.next_f32(), rng.next_f32());
            (x * x + y * y <= 1.0) as u32
        })
        .sum()
}

/// The estimate of pi from `inside` of `n` samples.
pub fn estimate(inside: u32, n: usize) -> f64 {
    4.0 * inside as f64 / n.max(1) as f64
}

fn main() -> std::process::ExitCode {
    common::main("skepu_montecarlo", 10_000_000, |backend, n| {
        let (got, want) = (compute(backend, n)?, reference(n));
        // Exact: every backend draws the same numbers; and the estimate is within 6
        // standard deviations (sqrt(pi (4 - pi) / n)) of pi.
        let sigma = (std::f64::consts::PI * (4.0 - std::f64::consts::PI) / n.max(1) as f64).sqrt();
        let pi = estimate(got, n);
        let ok = got == want && (n < 1000 || (pi - std::f64::consts::PI).abs() < 6.0 * sigma);
        Ok((
            format!("pi ~ {pi:.6} ({got} of {n} samples inside; reference count {want})"),
            ok,
        ))
    })
}
