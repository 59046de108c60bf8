//! SkePU 3's `heat_diffusion` (2D) in SkePU 3's own form: a red-black Gauss-Seidel sweep,
//! in place (`Update::RedBlack`, `run_in_place`), the border held fixed (`Edge::None`).
//! Each red cell becomes the mean of its four neighbours (all black, so old values), then
//! each black cell the mean of its four (red) neighbours, updated.
//!
//! `cargo run --release --example skepu_heat -- --backend rayon --size 512 [--check] [--bench]`
//! `--bench` times it next to a hand-written Rayon red-black sweep and the index-Map
//! workaround this form replaces (a Map over the whole matrix as a `Mat` argument, once per
//! colour).

use rayon::prelude::*;
use skel::prelude::*;

mod common;

/// Sweeps of one run.
pub const ITERS: usize = 10;

#[userfn]
fn heat(w: Window2<f32>) -> f32 {
    (w[(-1, 0)] + w[(1, 0)] + w[(0, -1)] + w[(0, 1)]) * 0.25
}

/// The index-Map workaround: every cell computed from the matrix as a container argument,
/// the cells of the other colour (and the border) copied.
#[userfn]
fn heat_index(#[index] (i, j): (usize, usize), m: Mat<f32>, #[uniform] parity: u32) -> f32 {
    if i == 0 || j == 0 || i + 1 == m.rows() || j + 1 == m.cols() || (i + j) % 2 != parity as usize
    {
        m[(i, j)]
    } else {
        (m[(i - 1, j)] + m[(i + 1, j)] + m[(i, j - 1)] + m[(i, j + 1)]) * 0.25
    }
}

/// `ITERS` red-black sweeps of `grid` on `backend`, in SkePU 3's form.
pub fn compute(backend: Backend, grid: &Matrix<f32>, iters: usize) -> skel::Result<Matrix<f32>> {
    let sweep = MapOverlap::new(heat, (1, 1))
        .edge(Edge::None)
        .update(Update::RedBlack)
        .backend(backend);
    let mut m = grid.clone();
    for _ in 0..iters {
        sweep.run_in_place(&mut m)?;
    }
    Ok(m)
}

/// The same through index Maps (the workaround), ping-ponging two matrices.
pub fn compute_index_map(
    backend: Backend,
    grid: &Matrix<f32>,
    iters: usize,
) -> skel::Result<Matrix<f32>> {
    let mut m = grid.clone();
    let mut next = Matrix::zeroed(m.rows(), m.cols());
    for _ in 0..iters {
        for parity in [0u32, 1] {
            Map::new(heat_index)
                .arrays((&m,))
                .uniforms((parity,))
                .backend(backend)
                .run_index(&mut next)?;
            std::mem::swap(&mut m, &mut next);
        }
    }
    Ok(m)
}

/// A red-black sweep by hand with Rayon: each half sweep writes a whole new matrix (its
/// colour computed, the other copied) from the previous one, rows in parallel, and swaps
/// it in (in place would need `unsafe` aliasing of the rows a thread reads).
pub fn hand_rayon(grid: &Matrix<f32>, iters: usize) -> Matrix<f32> {
    let (rows, cols) = (grid.rows(), grid.cols());
    if rows < 3 || cols < 3 {
        return grid.clone();
    }
    let mut m = grid.to_vec();
    let mut next = m.clone();
    for _ in 0..iters {
        for parity in [0, 1] {
            let src = &m;
            next.par_chunks_mut(cols).enumerate().for_each(|(i, row)| {
                row.copy_from_slice(&src[i * cols..(i + 1) * cols]);
                if i == 0 || i + 1 == rows {
                    return;
                }
                let first = if (i + 1) % 2 == parity { 1 } else { 2 };
                for j in (first..cols - 1).step_by(2) {
                    row[j] = (src[(i - 1) * cols + j]
                        + src[(i + 1) * cols + j]
                        + src[i * cols + j - 1]
                        + src[i * cols + j + 1])
                        * 0.25;
                }
            });
            std::mem::swap(&mut m, &mut next);
        }
    }
    Matrix::from_vec(rows, cols, m).expect("rows * cols cells")
}

/// The plain sequential definition.
pub fn reference(grid: &Matrix<f32>, iters: usize) -> Matrix<f32> {
    let (rows, cols) = (grid.rows(), grid.cols());
    let mut m = grid.to_vec();
    for _ in 0..iters {
        for parity in [0, 1] {
            for i in 1..rows.saturating_sub(1) {
                for j in 1..cols.saturating_sub(1) {
                    if (i + j) % 2 == parity {
                        m[i * cols + j] = (m[(i - 1) * cols + j]
                            + m[(i + 1) * cols + j]
                            + m[i * cols + j - 1]
                            + m[i * cols + j + 1])
                            * 0.25;
                    }
                }
            }
        }
    }
    Matrix::from_vec(rows, cols, m).expect("rows * cols cells")
}

/// An `n x n` plate at 0 with its top edge at 100 and a hot spot in the middle.
pub fn inputs(n: usize) -> Matrix<f32> {
    Matrix::from_fn(n, n, |i, j| {
        if i == 0 || (i.abs_diff(n / 2) < n / 8 + 1 && j.abs_diff(n / 2) < n / 8 + 1) {
            100.0
        } else {
            0.0
        }
    })
}

fn main() -> std::process::ExitCode {
    common::ported_main(common::Port {
        name: "skepu_heat",
        default_size: 256,
        run: &|backend, n| {
            let g = inputs(n);
            let got = compute(backend, &g, ITERS)?;
            let mean =
                got.as_slice().iter().map(|&x| x as f64).sum::<f64>() / (n * n).max(1) as f64;
            Ok((
                format!("mean temperature after {ITERS} red-black sweeps: {mean:.4}"),
                got == reference(&g, ITERS),
            ))
        },
        result: &|backend, n| Ok(compute(backend, &inputs(n), ITERS)?.to_vec()),
        timings: &|backend, n| {
            let g = inputs(n);
            Ok(vec![
                (
                    format!("skel {backend} (Update::RedBlack, run_in_place)"),
                    common::best_of(|| compute(backend, &g, ITERS).map(drop))?,
                ),
                (
                    "hand-written Rayon red-black".into(),
                    common::best_of(|| {
                        hand_rayon(&g, ITERS);
                        Ok(())
                    })?,
                ),
                (
                    format!("skel {backend} index-Map workaround"),
                    common::best_of(|| compute_index_map(backend, &g, ITERS).map(drop))?,
                ),
            ])
        },
    })
}
