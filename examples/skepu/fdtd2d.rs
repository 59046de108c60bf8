//! PolyBench's `fdtd-2d` in SkePU 3's form: three MapOverlaps per time step, each over
//! several windowed fields of one shape (`run(&a, &b, &mut out)`), the boundary rules from
//! the output's `#[index]`:
//!
//! - `ey[0][j] = fict[t]`, else `ey[i][j] -= 0.5 (hz[i][j] - hz[i-1][j])`;
//! - `ex[i][j] -= 0.5 (hz[i][j] - hz[i][j-1])` for `j > 0`;
//! - `hz[i][j] -= 0.7 (ex[i][j+1] - ex[i][j] + ey[i+1][j] - ey[i][j])` inside.
//!
//! `cargo run --release --example skepu_fdtd2d -- --backend rayon --size 512 [--check] [--bench]`
//! `--bench` times it next to a hand-written Rayon version and the index-Map workaround this
//! form replaces (Maps over the fields as `Mat` arguments).

use rayon::prelude::*;
use skel::prelude::*;

mod common;

/// Time steps of one run.
pub const STEPS: usize = 10;

#[userfn]
fn ey_step(
    #[index] (i, _j): (usize, usize),
    ey: Window2<f32>,
    hz: Window2<f32>,
    #[uniform] fict: f32,
) -> f32 {
    if i == 0 {
        fict
    } else {
        ey[(0, 0)] - 0.5 * (hz[(0, 0)] - hz[(-1, 0)])
    }
}

#[userfn]
fn ex_step(#[index] (_i, j): (usize, usize), ex: Window2<f32>, hz: Window2<f32>) -> f32 {
    if j == 0 {
        ex[(0, 0)]
    } else {
        ex[(0, 0)] - 0.5 * (hz[(0, 0)] - hz[(0, -1)])
    }
}

#[userfn]
fn hz_step(
    #[index] (i, j): (usize, usize),
    hz: Window2<f32>,
    ex: Window2<f32>,
    ey: Window2<f32>,
    #[uniform] rows: u32,
    #[uniform] cols: u32,
) -> f32 {
    if i + 1 < rows as usize && j + 1 < cols as usize {
        hz[(0, 0)] - 0.7 * (ex[(0, 1)] - ex[(0, 0)] + ey[(1, 0)] - ey[(0, 0)])
    } else {
        hz[(0, 0)]
    }
}

/// The index-Map workaround of the same three steps: the fields as container arguments.
#[userfn]
fn ey_index(
    #[index] (i, j): (usize, usize),
    ey: Mat<f32>,
    hz: Mat<f32>,
    #[uniform] fict: f32,
) -> f32 {
    if i == 0 {
        fict
    } else {
        ey[(i, j)] - 0.5 * (hz[(i, j)] - hz[(i - 1, j)])
    }
}

#[userfn]
fn ex_index(#[index] (i, j): (usize, usize), ex: Mat<f32>, hz: Mat<f32>) -> f32 {
    if j == 0 {
        ex[(i, j)]
    } else {
        ex[(i, j)] - 0.5 * (hz[(i, j)] - hz[(i, j - 1)])
    }
}

#[userfn]
fn hz_index(#[index] (i, j): (usize, usize), hz: Mat<f32>, ex: Mat<f32>, ey: Mat<f32>) -> f32 {
    if i + 1 < hz.rows() && j + 1 < hz.cols() {
        hz[(i, j)] - 0.7 * (ex[(i, j + 1)] - ex[(i, j)] + ey[(i + 1, j)] - ey[(i, j)])
    } else {
        hz[(i, j)]
    }
}

/// The three fields.
#[derive(Clone, Debug, PartialEq)]
pub struct Fields {
    pub ex: Matrix<f32>,
    pub ey: Matrix<f32>,
    pub hz: Matrix<f32>,
}

impl Fields {
    /// The fields concatenated (ex, ey, hz), for comparisons.
    pub fn to_vec(&self) -> Vec<f32> {
        [self.ex.to_vec(), self.ey.to_vec(), self.hz.to_vec()].concat()
    }
}

/// The source term of step `t`.
fn fict(t: usize) -> f32 {
    t as f32
}

/// `STEPS` time steps on `backend` in SkePU 3's form.
pub fn compute(backend: Backend, f: &Fields, steps: usize) -> skel::Result<Fields> {
    let mut f = f.clone();
    let (rows, cols) = (f.hz.rows(), f.hz.cols());
    let mut tmp = Matrix::zeroed(rows, cols);
    let (r, c) = (rows as u32, cols as u32);
    for t in 0..steps {
        let (ey, ex, hz) = (
            MapOverlap::new(ey_step, (1, 1))
                .edge(Edge::Duplicate)
                .uniforms((fict(t),))
                .backend(backend),
            MapOverlap::new(ex_step, (1, 1))
                .edge(Edge::Duplicate)
                .backend(backend),
            MapOverlap::new(hz_step, (1, 1))
                .edge(Edge::Duplicate)
                .uniforms((r, c))
                .backend(backend),
        );
        ey.run(&f.ey, &f.hz, &mut tmp)?;
        std::mem::swap(&mut f.ey, &mut tmp);
        ex.run(&f.ex, &f.hz, &mut tmp)?;
        std::mem::swap(&mut f.ex, &mut tmp);
        hz.run(&f.hz, &f.ex, &f.ey, &mut tmp)?;
        std::mem::swap(&mut f.hz, &mut tmp);
    }
    Ok(f)
}

/// The same through index Maps (the workaround).
pub fn compute_index_map(backend: Backend, f: &Fields, steps: usize) -> skel::Result<Fields> {
    let mut f = f.clone();
    let mut tmp = Matrix::zeroed(f.hz.rows(), f.hz.cols());
    for t in 0..steps {
        Map::new(ey_index)
            .arrays((&f.ey, &f.hz))
            .uniforms((fict(t),))
            .backend(backend)
            .run_index(&mut tmp)?;
        std::mem::swap(&mut f.ey, &mut tmp);
        Map::new(ex_index)
            .arrays((&f.ex, &f.hz))
            .backend(backend)
            .run_index(&mut tmp)?;
        std::mem::swap(&mut f.ex, &mut tmp);
        Map::new(hz_index)
            .arrays((&f.hz, &f.ex, &f.ey))
            .backend(backend)
            .run_index(&mut tmp)?;
        std::mem::swap(&mut f.hz, &mut tmp);
    }
    Ok(f)
}

/// The same by hand with Rayon, in place row by row where PolyBench's loops allow it.
pub fn hand_rayon(f: &Fields, steps: usize) -> Fields {
    let (rows, cols) = (f.hz.rows(), f.hz.cols());
    let (mut ex, mut ey, mut hz) = (f.ex.to_vec(), f.ey.to_vec(), f.hz.to_vec());
    for t in 0..steps {
        {
            let hz = &hz;
            ey.par_chunks_mut(cols).enumerate().for_each(|(i, row)| {
                if i == 0 {
                    row.fill(fict(t));
                } else {
                    for (j, e) in row.iter_mut().enumerate() {
                        *e -= 0.5 * (hz[i * cols + j] - hz[(i - 1) * cols + j]);
                    }
                }
            });
            ex.par_chunks_mut(cols).enumerate().for_each(|(i, row)| {
                for j in 1..cols {
                    row[j] -= 0.5 * (hz[i * cols + j] - hz[i * cols + j - 1]);
                }
            });
        }
        let (ex, ey) = (&ex, &ey);
        hz.par_chunks_mut(cols)
            .enumerate()
            .take(rows.saturating_sub(1))
            .for_each(|(i, row)| {
                for j in 0..cols.saturating_sub(1) {
                    row[j] -= 0.7
                        * (ex[i * cols + j + 1] - ex[i * cols + j] + ey[(i + 1) * cols + j]
                            - ey[i * cols + j]);
                }
            });
    }
    let m = |v| Matrix::from_vec(rows, cols, v).expect("rows * cols cells");
    Fields {
        ex: m(ex),
        ey: m(ey),
        hz: m(hz),
    }
}

/// PolyBench's initial fields for an `n x n` grid.
pub fn inputs(n: usize) -> Fields {
    let nf = n.max(1) as f32;
    Fields {
        ex: Matrix::from_fn(n, n, |i, j| (i as f32 * (j + 1) as f32) / nf),
        ey: Matrix::from_fn(n, n, |i, j| (i as f32 * (j + 2) as f32) / nf),
        hz: Matrix::from_fn(n, n, |i, j| (i as f32 * (j + 3) as f32) / nf),
    }
}

fn main() -> std::process::ExitCode {
    common::ported_main(common::Port {
        name: "skepu_fdtd2d",
        default_size: 256,
        run: &|backend, n| {
            let f = inputs(n);
            let got = compute(backend, &f, STEPS)?;
            let norm: f64 = got.hz.as_slice().iter().map(|&x| (x as f64).abs()).sum();
            Ok((
                format!("sum |hz| after {STEPS} steps: {norm:.4}"),
                got == hand_rayon(&f, STEPS),
            ))
        },
        result: &|backend, n| Ok(compute(backend, &inputs(n), STEPS)?.to_vec()),
        timings: &|backend, n| {
            let f = inputs(n);
            Ok(vec![
                (
                    format!("skel {backend} (several windowed inputs)"),
                    common::best_of(|| compute(backend, &f, STEPS).map(drop))?,
                ),
                (
                    "hand-written Rayon".into(),
                    common::best_of(|| {
                        hand_rayon(&f, STEPS);
                        Ok(())
                    })?,
                ),
                (
                    format!("skel {backend} index-Map workaround"),
                    common::best_of(|| compute_index_map(backend, &f, STEPS).map(drop))?,
                ),
            ])
        },
    })
}
