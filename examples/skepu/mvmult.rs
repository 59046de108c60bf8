//! SkePU's `mvmult`: `y = A x`, one index Map over `y` that reads `A` and `x` as container
//! arguments (SkePU 3's `Mat` and `Vec` proxies): each element is one row times `x`.
//!
//! `cargo run --example skepu_mvmult -- --backend rayon --size 512`

use skel::prelude::*;

mod common;

#[userfn]
fn mv(#[index] i: usize, a: Mat<f32>, x: &[f32]) -> f32 {
    let mut s = 0.0;
    for j in 0..a.cols() {
        s += a[(i, j)] * x[j];
    }
    s
}

/// `a x` on `backend`; `x.len()` must be `a.cols()`.
pub fn compute(backend: Backend, a: &Matrix<f32>, x: &[f32]) -> skel::Result<Vec<f32>> {
    // The user function indexes `x` by column: a short `x` would be read out of bounds.
    common::same_len("mvmult: x against the columns of A", a.cols(), x.len())?;
    let x = Vector::from(x.to_vec());
    let mut y = Vector::zeroed(a.rows());
    Map::new(mv)
        .arrays((a, &x))
        .backend(backend)
        .run_index(&mut y)?;
    Ok(y.to_vec())
}

/// The same in plain Rust, summed in f64.
pub fn reference(a: &Matrix<f32>, x: &[f32]) -> Vec<f32> {
    let row = |i| {
        a.row(i)
            .iter()
            .zip(x)
            .map(|(&m, &v)| m as f64 * v as f64)
            .sum::<f64>()
    };
    (0..a.rows()).map(|i| row(i) as f32).collect()
}

/// A `rows x cols` matrix and a vector of `cols`, entries in `[-1, 1)`.
pub fn inputs(rows: usize, cols: usize) -> (Matrix<f32>, Vec<f32>) {
    let m = common::data(rows * cols, 11)
        .iter()
        .map(|v| 2.0 * v - 1.0)
        .collect();
    let x = common::data(cols, 12)
        .iter()
        .map(|v| 2.0 * v - 1.0)
        .collect();
    (
        Matrix::from_vec(rows, cols, m).expect("rows * cols entries"),
        x,
    )
}

fn main() -> std::process::ExitCode {
    common::main("skepu_mvmult", 512, |backend, n| {
        let (a, x) = inputs(n, n + 3);
        let (got, want) = (compute(backend, &a, &x)?, reference(&a, &x));
        let ok = common::all_close(&got, &want, 1e-4);
        Ok((format!("y[0..4] = {:?}", &got[..got.len().min(4)]), ok))
    })
}
