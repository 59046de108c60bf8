//! SkePU's `mmmult`: `C = A B`, one index Map over `C` that reads a row of `A` and a column
//! of `B` per element, both as `Mat` container arguments (SkePU 3).
//!
//! `cargo run --example skepu_mmmult -- --backend rayon --size 256`

use skel::prelude::*;

mod common;

#[userfn]
fn row_times_col(#[index] (i, j): (usize, usize), a: Mat<f32>, b: Mat<f32>) -> f32 {
    let mut sum = 0.0f32;
    for l in 0..a.cols() {
        sum += a[(i, l)] * b[(l, j)];
    }
    sum
}

/// `a b` on `backend`; `a.cols()` must be `b.rows()`.
pub fn compute(backend: Backend, a: &Matrix<f32>, b: &Matrix<f32>) -> skel::Result<Matrix<f32>> {
    // The user function walks a row of A and a column of B in step: they must agree.
    common::same_len(
        "mmmult: rows of B against the columns of A",
        a.cols(),
        b.rows(),
    )?;
    let mut c = Matrix::zeroed(a.rows(), b.cols());
    Map::new(row_times_col)
        .arrays((a, b))
        .backend(backend)
        .run_index(&mut c)?;
    Ok(c)
}

/// The textbook triple loop in plain Rust, summing each entry in the same order.
pub fn reference(a: &Matrix<f32>, b: &Matrix<f32>) -> Matrix<f32> {
    // Through slices: `Matrix` indexing checks coherence on every access.
    let (k, m, bs) = (a.cols(), b.cols(), b.as_slice());
    Matrix::from_fn(a.rows(), m, |i, j| {
        let row = a.row(i);
        (0..k).fold(0.0f32, |s, l| s + row[l] * bs[l * m + j])
    })
}

/// An `n x (n + 1)` and an `(n + 1) x (n + 2)` matrix, entries in `[-1, 1)`.
pub fn inputs(n: usize) -> (Matrix<f32>, Matrix<f32>) {
    let (a, b) = (
        common::data(n * (n + 1), 13),
        common::data((n + 1) * (n + 2), 14),
    );
    let a = Matrix::from_fn(n, n + 1, |r, c| 2.0 * a[r * (n + 1) + c] - 1.0);
    let b = Matrix::from_fn(n + 1, n + 2, |r, c| 2.0 * b[r * (n + 2) + c] - 1.0);
    (a, b)
}

fn main() -> std::process::ExitCode {
    common::main("skepu_mmmult", 256, |backend, n| {
        let (a, b) = inputs(n);
        let (got, want) = (compute(backend, &a, &b)?, reference(&a, &b));
        let trace: f32 = (0..n).map(|i| got[(i, i)]).sum();
        Ok((
            format!("C is {}x{}, trace {trace}", got.rows(), got.cols()),
            got == want,
        ))
    })
}
