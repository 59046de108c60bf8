//! SkePU's `median` filter: a 2D MapOverlap whose user function copies its 5x5 window into
//! a local array and selects its middle value. Removes salt-and-pepper noise from a grey image.
//!
//! `cargo run --example skepu_median -- --backend rayon --size 128`

use skel::prelude::*;

mod common;

#[userfn]
fn median5x5(w: Window2<f32>) -> f32 {
    let mut v = [0.0f32; 25];
    let mut k = 0;
    for di in -2..=2 {
        for dj in -2..=2 {
            v[k] = w[(di, dj)];
            k += 1;
        }
    }
    // The median is the value with at most 12 smaller ones and more than 12 smaller or
    // equal: found without sorting, by counting, so every thread runs the same loops.
    for i in 0..v.len() {
        let mut below = 0;
        let mut equal = 0;
        for j in 0..v.len() {
            if v[j] < v[i] {
                below += 1;
            } else if v[j] == v[i] {
                equal += 1;
            }
        }
        if below <= 12 && 12 < below + equal {
            return v[i];
        }
    }
    // Only reached when the window holds a NaN.
    v[12]
}

/// `image` filtered on `backend`; borders repeat the edge pixels.
pub fn compute(backend: Backend, image: &Matrix<f32>) -> skel::Result<Matrix<f32>> {
    let mut out = Matrix::zeroed(image.rows(), image.cols());
    MapOverlap::new(median5x5, (2, 2))
        .edge(Edge::Duplicate)
        .backend(backend)
        .run(image, &mut out)?;
    Ok(out)
}

/// The same in plain Rust: clamp to the border, sort, take the middle.
pub fn reference(image: &Matrix<f32>) -> Matrix<f32> {
    let (rows, cols) = (image.rows() as isize, image.cols() as isize);
    let pixels = image.as_slice();
    Matrix::from_fn(image.rows(), image.cols(), |r, c| {
        let mut window: Vec<f32> = (0..25)
            .map(|k| {
                let rr = (r as isize + k / 5 - 2).clamp(0, rows - 1);
                let cc = (c as isize + k % 5 - 2).clamp(0, cols - 1);
                pixels[(rr * cols + cc) as usize]
            })
            .collect();
        window.sort_by(f32::total_cmp);
        window[12]
    })
}

/// A smooth `n x n` image with 10 % of its pixels set to black or white.
pub fn inputs(n: usize) -> Matrix<f32> {
    let noise = common::data(n * n, 9);
    Matrix::from_fn(n, n, |r, c| match noise[r * n + c] {
        p if p < 0.05 => 0.0,
        p if p < 0.10 => 255.0,
        _ => 128.0 + 100.0 * ((r as f32 * 0.1).sin() * (c as f32 * 0.07).cos()),
    })
}

fn main() -> std::process::ExitCode {
    common::main("skepu_median", 128, |backend, n| {
        let image = inputs(n);
        let (got, want) = (compute(backend, &image)?, reference(&image));
        let extreme = |m: &Matrix<f32>| {
            m.as_slice()
                .iter()
                .filter(|&&p| p == 0.0 || p == 255.0)
                .count()
        };
        let line = format!(
            "salt-and-pepper pixels: {} before, {} after",
            extreme(&image),
            extreme(&got)
        );
        Ok((line, got == want))
    })
}
