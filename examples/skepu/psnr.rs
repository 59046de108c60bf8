//! SkePU's `psnr`: the peak signal-to-noise ratio of a noisy image against the original,
//! from the mean squared error (a MapReduce over two matrices).
//!
//! `cargo run --example skepu_psnr -- --backend rayon --size 512`

use skel::prelude::*;

mod common;

#[userfn]
fn squared_error(a: f32, b: f32) -> f32 {
    (a - b) * (a - b)
}

#[userfn]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

/// The largest pixel value of the 8-bit images.
pub const PEAK: f64 = 255.0;

/// PSNR in dB of `noisy` against `original` (both `n x n` grey images) on `backend`.
pub fn compute(backend: Backend, original: &Matrix<f32>, noisy: &Matrix<f32>) -> skel::Result<f64> {
    if original.is_empty() {
        return Err(skel::Error::InvalidArgument(
            "the PSNR of an empty image is undefined".into(),
        ));
    }
    let sse = MapReduce::new(squared_error, add)
        .backend(backend)
        .run(original, noisy)?;
    let mse = sse as f64 / original.len() as f64;
    Ok(10.0 * (PEAK * PEAK / mse).log10())
}

/// The same in plain Rust, in f64.
pub fn reference(original: &Matrix<f32>, noisy: &Matrix<f32>) -> f64 {
    let (a, b) = (original.as_slice(), noisy.as_slice());
    let sse: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| (x as f64 - y as f64).powi(2))
        .sum();
    10.0 * (PEAK * PEAK / (sse / a.len() as f64)).log10()
}

/// An `n x n` gradient image and a copy with up to +-8 grey levels of noise, clamped.
pub fn inputs(n: usize) -> (Matrix<f32>, Matrix<f32>) {
    let noise = common::data(n * n, 5);
    let original = Matrix::from_fn(n, n, |r, c| ((r + 2 * c) % 256) as f32);
    let noisy = Matrix::from_fn(n, n, |r, c| {
        let e = (noise[r * n + c] * 17.0).floor() - 8.0;
        (original[(r, c)] + e).clamp(0.0, 255.0)
    });
    (original, noisy)
}

fn main() -> std::process::ExitCode {
    common::main("skepu_psnr", 512, |backend, n| {
        let (original, noisy) = inputs(n);
        let (got, want) = (
            compute(backend, &original, &noisy)?,
            reference(&original, &noisy),
        );
        let ok = common::close(got, want, 1e-5);
        Ok((format!("PSNR = {got:.4} dB (reference {want:.4} dB)"), ok))
    })
}
