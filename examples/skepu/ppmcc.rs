//! SkePU's `ppmcc`: Pearson's product-moment correlation coefficient of two samples, from
//! five sums (two Reduce, three MapReduce) in one pass each.
//!
//! `cargo run --example skepu_ppmcc -- --backend rayon --size 100000`

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

/// The correlation of `x` and `y` on `backend`.
pub fn compute(backend: Backend, x: &[f32], y: &[f32]) -> skel::Result<f64> {
    if x.len() < 2 {
        let n = x.len();
        return Err(skel::Error::InvalidArgument(format!(
            "a correlation needs at least 2 samples, got {n}"
        )));
    }
    let (xs, ys) = (Vector::from(x.to_vec()), Vector::from(y.to_vec()));
    let sum = Reduce::new(add).backend(backend);
    let dot = MapReduce::new(mult, add).backend(backend);
    let (sx, sy) = (sum.run(&xs)? as f64, sum.run(&ys)? as f64);
    let (sxy, sxx, syy) = (dot.run(&xs, &ys)?, dot.run(&xs, &xs)?, dot.run(&ys, &ys)?);
    let n = x.len() as f64;
    let num = n * sxy as f64 - sx * sy;
    let den = ((n * sxx as f64 - sx * sx) * (n * syy as f64 - sy * sy)).sqrt();
    Ok(num / den)
}

/// The textbook two-pass formula in f64: covariance over the product of deviations.
pub fn reference(x: &[f32], y: &[f32]) -> f64 {
    let n = x.len() as f64;
    let mx = x.iter().map(|&v| v as f64).sum::<f64>() / n;
    let my = y.iter().map(|&v| v as f64).sum::<f64>() / n;
    let (mut cov, mut vx, mut vy) = (0.0, 0.0, 0.0);
    for (&a, &b) in x.iter().zip(y) {
        let (dx, dy) = (a as f64 - mx, b as f64 - my);
        cov += dx * dy;
        vx += dx * dx;
        vy += dy * dy;
    }
    cov / (vx * vy).sqrt()
}

/// Two correlated samples of length `n`: `y = 0.6 x + noise`, so r is about 0.8.
pub fn inputs(n: usize) -> (Vec<f32>, Vec<f32>) {
    let x = common::data(n, 3);
    let noise = common::data(n, 4);
    let y = x
        .iter()
        .zip(&noise)
        .map(|(&a, &e)| 0.6 * a + 0.45 * e)
        .collect();
    (x, y)
}

fn main() -> std::process::ExitCode {
    common::main("skepu_ppmcc", 100_000, |backend, n| {
        let (x, y) = inputs(n);
        let (got, want) = (compute(backend, &x, &y)?, reference(&x, &y));
        let ok = common::close(got, want, 1e-3);
        Ok((format!("r = {got:.6} (reference {want:.6})"), ok))
    })
}
