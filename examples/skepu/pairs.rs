//! Pairwise distances, after SkePU 3's MapPairs examples: the matrix of Euclidean distances
//! between two point sets (MapPairs), and each point's farthest partner (MapPairsReduce).
//!
//! `cargo run --example skepu_pairs -- --backend rayon --size 500`

use skel::prelude::*;

mod common;

/// A point in 3D.
#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
pub struct Point {
    pub x: f32,
    pub y: f32,
    pub z: f32,
}

#[userfn]
fn distance(p: Point, q: Point) -> f32 {
    let (dx, dy, dz) = (p.x - q.x, p.y - q.y, p.z - q.z);
    (dx * dx + dy * dy + dz * dz).sqrt()
}

#[userfn]
fn max(a: f32, b: f32) -> f32 {
    a.max(b)
}

/// The distance matrix of `v` against `h`, and for each point of `v` the largest distance,
/// on `backend`.
pub fn compute(
    backend: Backend,
    v: &[Point],
    h: &[Point],
) -> skel::Result<(Matrix<f32>, Vec<f32>)> {
    let (v, h) = (Vector::from(v.to_vec()), Vector::from(h.to_vec()));
    let mut d = Matrix::zeroed(v.len(), h.len());
    let mut farthest = Vector::zeroed(v.len());
    MapPairs::new(distance)
        .backend(backend)
        .run(&v, &h, &mut d)?;
    MapPairsReduce::new(distance, max)
        .backend(backend)
        .run_rows(&v, &h, &mut farthest)?;
    Ok((d, farthest.to_vec()))
}

/// The same in plain Rust.
pub fn reference(v: &[Point], h: &[Point]) -> (Matrix<f32>, Vec<f32>) {
    let d = Matrix::from_fn(v.len(), h.len(), |i, j| {
        let (p, q) = (v[i], h[j]);
        ((p.x - q.x).powi(2) + (p.y - q.y).powi(2) + (p.z - q.z).powi(2)).sqrt()
    });
    let farthest = (0..v.len())
        .map(|i| d.row(i).iter().fold(f32::MIN, |m, &x| m.max(x)))
        .collect();
    (d, farthest)
}

/// `n` and `n + 7` points in the unit cube.
pub fn inputs(n: usize) -> (Vec<Point>, Vec<Point>) {
    let points = |count: usize, seed| {
        let r = common::data(3 * count, seed);
        (0..count)
            .map(|k| Point {
                x: r[3 * k],
                y: r[3 * k + 1],
                z: r[3 * k + 2],
            })
            .collect()
    };
    (points(n, 15), points(n + 7, 16))
}

fn main() -> std::process::ExitCode {
    common::main("skepu_pairs", 500, |backend, n| {
        let (v, h) = inputs(n);
        let (got, want) = (compute(backend, &v, &h)?, reference(&v, &h));
        let far = got.1.iter().fold(0.0f32, |m, &x| m.max(x));
        Ok((
            format!("{}x{} distances, largest {far}", got.0.rows(), got.0.cols()),
            got == want,
        ))
    })
}
