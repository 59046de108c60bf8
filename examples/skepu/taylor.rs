//! SkePU's `taylor`: ln(1 + x) from the first N terms of its Taylor series,
//! `sum_k (-1)^(k+1) x^k / k`: an index Map computes the terms, a Reduce adds them.
//!
//! `cargo run --example skepu_taylor -- --backend rayon --size 1000`

use skel::prelude::*;

mod common;

/// The point the series is evaluated at; it converges for `-1 < x <= 1`.
pub const X: f32 = 0.5;

#[userfn]
fn nth_term(#[index] i: usize, #[uniform] x: f32) -> f32 {
    let k = i as i32 + 1;
    let sign = if k % 2 == 0 { -1.0f32 } else { 1.0f32 };
    sign * x.powi(k) / k as f32
}

#[userfn]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

/// The sum of the first `terms` terms at `x`, on `backend`.
pub fn compute(backend: Backend, x: f32, terms: usize) -> skel::Result<f32> {
    let mut t = Vector::zeroed(terms);
    Map::new(nth_term)
        .uniforms((x,))
        .backend(backend)
        .run_index(&mut t)?;
    Reduce::new(add).backend(backend).run(&t)
}

/// The same partial sum in plain Rust, in f64.
pub fn reference(x: f32, terms: usize) -> f64 {
    let x = x as f64;
    (1..=terms).map(|k| -(-x).powi(k as i32) / k as f64).sum()
}

fn main() -> std::process::ExitCode {
    common::main("skepu_taylor", 1000, |backend, n| {
        let (got, want) = (compute(backend, X, n)?, reference(X, n));
        let ok = common::close(got as f64, want, 1e-5);
        let exact = (1.0 + X as f64).ln();
        Ok((
            format!("ln(1 + {X}) ~ {got} (reference {want:.7}, ln {exact:.7})"),
            ok,
        ))
    })
}
