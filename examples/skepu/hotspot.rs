//! Rodinia's `hotspot` in SkePU 3's form: the chip's temperature as a 2D window, the power
//! dissipated in each cell as a `Mat` container argument read at the output's `#[index]`,
//! and the model's coefficients as a uniform. The border cells read their own temperature
//! beyond the edge (Rodinia's clamped neighbours: `Edge::Duplicate`).
//!
//! `cargo run --release --example skepu_hotspot -- --backend rayon --size 512 [--check] [--bench]`
//! `--bench` times it next to the same computation written by hand with Rayon.

use rayon::prelude::*;
use skel::prelude::*;

mod common;

/// Time steps of one run.
pub const STEPS: usize = 10;

/// Rodinia's coefficients, derived from the chip's size and material.
#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
pub struct Coeffs {
    pub step_div_cap: f32,
    pub rx1: f32,
    pub ry1: f32,
    pub rz1: f32,
    pub amb: f32,
}

impl Coeffs {
    /// The coefficients of Rodinia's `hotspot` for an `n x n` grid of a 16 mm chip.
    pub fn for_grid(n: usize) -> Coeffs {
        let (chip, t_chip, k_si, spec_heat, factor) =
            (0.016f32, 0.0005f32, 100.0f32, 1.75e6f32, 3.0f32);
        let (w, h) = (chip / n.max(1) as f32, chip / n.max(1) as f32);
        let cap = factor * spec_heat * t_chip * w * h;
        let rx = w / (2.0 * k_si * t_chip * h);
        let ry = h / (2.0 * k_si * t_chip * w);
        let rz = t_chip / (k_si * h * w);
        let max_slope = 3.0e6 / (factor * t_chip * spec_heat);
        let step = 0.001 / max_slope;
        Coeffs {
            step_div_cap: step / cap,
            rx1: 1.0 / rx,
            ry1: 1.0 / ry,
            rz1: 1.0 / rz,
            amb: 80.0,
        }
    }
}

#[userfn]
fn hotspot(
    #[index] (i, j): (usize, usize),
    t: Window2<f32>,
    power: Mat<f32>,
    #[uniform] c: Coeffs,
) -> f32 {
    let centre = t[(0, 0)];
    centre
        + c.step_div_cap
            * (power[(i, j)]
                + (t[(1, 0)] + t[(-1, 0)] - 2.0 * centre) * c.ry1
                + (t[(0, 1)] + t[(0, -1)] - 2.0 * centre) * c.rx1
                + (c.amb - centre) * c.rz1)
}

/// The temperature after `steps` steps on `backend`.
pub fn compute(
    backend: Backend,
    temp: &Matrix<f32>,
    power: &Matrix<f32>,
    steps: usize,
) -> skel::Result<Matrix<f32>> {
    let c = Coeffs::for_grid(temp.rows());
    let step = MapOverlap::new(hotspot, (1, 1))
        .edge(Edge::Duplicate)
        .arrays((power,))
        .uniforms((c,))
        .backend(backend);
    let mut t = temp.clone();
    let mut next = Matrix::zeroed(t.rows(), t.cols());
    for _ in 0..steps {
        step.run(&t, &mut next)?;
        std::mem::swap(&mut t, &mut next);
    }
    Ok(t)
}

/// One cell's new temperature; `at(di, dj)` reads a clamped neighbour.
#[inline(always)]
fn cell(c: &Coeffs, p: f32, at: impl Fn(isize, isize) -> f32) -> f32 {
    let centre = at(0, 0);
    centre
        + c.step_div_cap
            * (p + (at(1, 0) + at(-1, 0) - 2.0 * centre) * c.ry1
                + (at(0, 1) + at(0, -1) - 2.0 * centre) * c.rx1
                + (c.amb - centre) * c.rz1)
}

/// The same by hand with Rayon: rows in parallel, neighbours clamped at the border.
pub fn hand_rayon(temp: &Matrix<f32>, power: &Matrix<f32>, steps: usize) -> Matrix<f32> {
    let (rows, cols) = (temp.rows(), temp.cols());
    let c = Coeffs::for_grid(rows);
    let p = power.as_slice();
    let mut t = temp.to_vec();
    let mut next = t.clone();
    for _ in 0..steps {
        let src = &t;
        next.par_chunks_mut(cols.max(1))
            .enumerate()
            .for_each(|(i, row)| {
                let (up, down) = (i.saturating_sub(1), (i + 1).min(rows - 1));
                for (j, o) in row.iter_mut().enumerate() {
                    let (l, r) = (j.saturating_sub(1), (j + 1).min(cols - 1));
                    *o = cell(&c, p[i * cols + j], |di, dj| {
                        let ii = match di {
                            -1 => up,
                            1 => down,
                            _ => i,
                        };
                        let jj = match dj {
                            -1 => l,
                            1 => r,
                            _ => j,
                        };
                        src[ii * cols + jj]
                    });
                }
            });
        std::mem::swap(&mut t, &mut next);
    }
    Matrix::from_vec(rows, cols, t).expect("rows * cols cells")
}

/// The plain sequential definition.
pub fn reference(temp: &Matrix<f32>, power: &Matrix<f32>, steps: usize) -> Matrix<f32> {
    let (rows, cols) = (temp.rows(), temp.cols());
    let c = Coeffs::for_grid(rows);
    let mut t = temp.to_vec();
    for _ in 0..steps {
        let next: Vec<f32> = (0..rows * cols)
            .map(|k| {
                let (i, j) = (k / cols, k % cols);
                cell(&c, power.as_slice()[k], |di, dj| {
                    let ii = (i as isize + di).clamp(0, rows as isize - 1) as usize;
                    let jj = (j as isize + dj).clamp(0, cols as isize - 1) as usize;
                    t[ii * cols + jj]
                })
            })
            .collect();
        t = next;
    }
    Matrix::from_vec(rows, cols, t).expect("rows * cols cells")
}

/// Rodinia-like inputs: temperatures around 323 K, power up to a few milliwatts a cell.
pub fn inputs(n: usize) -> (Matrix<f32>, Matrix<f32>) {
    let (a, b) = (common::data(n * n, 31), common::data(n * n, 32));
    (
        Matrix::from_fn(n, n, |i, j| 320.0 + 6.0 * a[i * n + j]),
        Matrix::from_fn(n, n, |i, j| 0.005 * b[i * n + j]),
    )
}

fn main() -> std::process::ExitCode {
    common::ported_main(common::Port {
        name: "skepu_hotspot",
        default_size: 256,
        run: &|backend, n| {
            let (t, p) = inputs(n);
            let got = compute(backend, &t, &p, STEPS)?;
            let max = got.as_slice().iter().fold(f32::MIN, |m, &x| m.max(x));
            Ok((
                format!("hottest cell after {STEPS} steps: {max:.4} K"),
                got == reference(&t, &p, STEPS),
            ))
        },
        result: &|backend, n| {
            let (t, p) = inputs(n);
            Ok(compute(backend, &t, &p, STEPS)?.to_vec())
        },
        timings: &|backend, n| {
            let (t, p) = inputs(n);
            Ok(vec![
                (
                    format!("skel {backend} (index, Mat argument, uniform)"),
                    common::best_of(|| compute(backend, &t, &p, STEPS).map(drop))?,
                ),
                (
                    "hand-written Rayon".into(),
                    common::best_of(|| {
                        hand_rayon(&t, &p, STEPS);
                        Ok(())
                    })?,
                ),
            ])
        },
    })
}
