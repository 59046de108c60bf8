//! SkePU's `dotproduct`: a fused MapReduce of `a[i] * b[i]` with `+`.
//!
//! `cargo run --example skepu_dot -- --backend rayon --size 100000`

use skel::prelude::*;

mod common;

#[userfn]
fn mult(a: f32, b: f32) -> f32 {
    a * b
}

#[userfn]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

/// The dot product of `a` and `b` on `backend`.
pub fn compute(backend: Backend, a: &[f32], b: &[f32]) -> skel::Result<f32> {
    let (a, b) = (Vector::from(a.to_vec()), Vector::from(b.to_vec()));
    MapReduce::new(mult, add).backend(backend).run(&a, &b)
}

/// The same in plain Rust, summed in f64.
pub fn reference(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum()
}

/// Two input vectors of length `n`.
pub fn inputs(n: usize) -> (Vec<f32>, Vec<f32>) {
    (common::data(n, 1), common::data(n, 2))
}

fn main() -> std::process::ExitCode {
    common::main("skepu_dot", 100_000, |backend, n| {
        let (a, b) = inputs(n);
        let (got, want) = (compute(backend, &a, &b)?, reference(&a, &b));
        let ok = common::close(got as f64, want, 1e-4);
        Ok((format!("a . b = {got} (reference {want:.6})"), ok))
    })
}
