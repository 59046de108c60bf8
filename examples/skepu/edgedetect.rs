//! SkePU 3's `edgedetect` in SkePU 3's own form: a greyscale image convolved with two
//! filters (Sobel, horizontal and vertical) passed as a container argument, the window's
//! size read from `w.radius()` inside the user function, the gradient's magnitude kept.
//!
//! The image is `examples/images/coffee.png` (loaded with the `image` crate, scaled to
//! `--size` columns) where it exists, else a generated one.
//!
//! `cargo run --release --example skepu_edgedetect -- --backend rayon --size 512 [--check] [--bench]`
//! `--bench` times it next to the same filter written by hand with Rayon and as a plain
//! sequential loop.

use rayon::prelude::*;
use skel::prelude::*;

mod common;

/// Sobel's two 3 x 3 filters, one after the other.
pub const SOBEL: [f32; 18] = [
    -1.0, 0.0, 1.0, -2.0, 0.0, 2.0, -1.0, 0.0, 1.0, // horizontal gradient
    -1.0, -2.0, -1.0, 0.0, 0.0, 0.0, 1.0, 2.0, 1.0, // vertical gradient
];

#[userfn]
fn edge(w: Window2<f32>, filter: &[f32]) -> f32 {
    let (rr, rc) = w.radius();
    let (h, wd) = (2 * rr + 1, 2 * rc + 1);
    let mut gx = 0.0f32;
    let mut gy = 0.0f32;
    for a in 0..h {
        for b in 0..wd {
            let x = w[(a as isize - rr as isize, b as isize - rc as isize)];
            gx += filter[a * wd + b] * x;
            gy += filter[h * wd + a * wd + b] * x;
        }
    }
    (gx * gx + gy * gy).sqrt()
}

/// The gradient magnitude of `image` on `backend` (a border of 1 pixel left at 0).
pub fn compute(
    backend: Backend,
    image: &Matrix<f32>,
    filter: &Vector<f32>,
) -> skel::Result<Matrix<f32>> {
    let mut out = Matrix::zeroed(image.rows(), image.cols());
    compute_into(backend, image, filter, &mut out)?;
    Ok(out)
}

/// The same into `out` (its border left as it is): a program filtering frame after frame
/// reuses one output.
pub fn compute_into(
    backend: Backend,
    image: &Matrix<f32>,
    filter: &Vector<f32>,
    out: &mut Matrix<f32>,
) -> skel::Result<()> {
    MapOverlap::new(edge, (1, 1))
        .edge(Edge::None)
        .arrays((filter,))
        .backend(backend)
        .run(image, out)
}

/// One pixel's gradient magnitude; `at(a, b)` the window's element, top-left `(0, 0)`.
#[inline(always)]
fn pixel(filter: &[f32], at: impl Fn(usize, usize) -> f32) -> f32 {
    let (mut gx, mut gy) = (0.0f32, 0.0f32);
    for a in 0..3 {
        for b in 0..3 {
            let x = at(a, b);
            gx += filter[a * 3 + b] * x;
            gy += filter[9 + a * 3 + b] * x;
        }
    }
    (gx * gx + gy * gy).sqrt()
}

/// The same filter by hand with Rayon.
pub fn hand_rayon(image: &Matrix<f32>, filter: &[f32]) -> Matrix<f32> {
    let (rows, cols) = (image.rows(), image.cols());
    let img = image.as_slice();
    let mut out = vec![0.0f32; rows * cols];
    if rows >= 3 && cols >= 3 {
        out.par_chunks_mut(cols)
            .enumerate()
            .skip(1)
            .take(rows - 2)
            .for_each(|(i, row)| {
                for (j, o) in row.iter_mut().enumerate().skip(1).take(cols - 2) {
                    *o = pixel(filter, |a, b| img[(i + a - 1) * cols + j + b - 1]);
                }
            });
    }
    Matrix::from_vec(rows, cols, out).expect("rows * cols pixels")
}

/// The same filter as a plain sequential loop.
pub fn sequential(image: &Matrix<f32>, filter: &[f32]) -> Matrix<f32> {
    let (rows, cols) = (image.rows(), image.cols());
    let img = image.as_slice();
    let mut out = vec![0.0f32; rows * cols];
    for i in 1..rows.saturating_sub(1) {
        for j in 1..cols.saturating_sub(1) {
            out[i * cols + j] = pixel(filter, |a, b| img[(i + a - 1) * cols + j + b - 1]);
        }
    }
    Matrix::from_vec(rows, cols, out).expect("rows * cols pixels")
}

/// The greyscale image: the sample photo scaled to `n` columns, or a generated one.
pub fn inputs(n: usize) -> Matrix<f32> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/images/coffee.png");
    if let Ok(img) = image::open(path) {
        let (w, h) = (img.width().max(1), img.height());
        let rows = ((n as u64 * h as u64) / w as u64).max(1) as u32;
        let g = img
            .resize_exact(n.max(1) as u32, rows, image::imageops::FilterType::Triangle)
            .to_luma8();
        return Matrix::from_fn(rows as usize, n, |i, j| {
            g.get_pixel(j as u32, i as u32)[0] as f32 / 255.0
        });
    }
    synthetic(n)
}

/// A generated `n x n` image: discs and stripes over noise.
pub fn synthetic(n: usize) -> Matrix<f32> {
    let noise = common::data(n * n, 77);
    Matrix::from_fn(n, n, |i, j| {
        let (x, y) = (i as f32 - n as f32 / 2.0, j as f32 - n as f32 / 3.0);
        let disc = if x * x + y * y < (n * n / 16) as f32 {
            0.8
        } else {
            0.2
        };
        let stripe = if (j / 8) % 2 == 0 { 0.1 } else { 0.0 };
        disc + stripe + 0.05 * noise[i * n + j]
    })
}

fn main() -> std::process::ExitCode {
    let filter = Vector::from(SOBEL.to_vec());
    common::ported_main(common::Port {
        name: "skepu_edgedetect",
        default_size: 512,
        run: &|backend, n| {
            let img = inputs(n);
            let got = compute(backend, &img, &filter)?;
            let edges = got.as_slice().iter().filter(|&&g| g > 0.5).count();
            Ok((
                format!(
                    "{}x{} image: {edges} edge pixels (gradient > 0.5)",
                    img.rows(),
                    img.cols()
                ),
                got == hand_rayon(&img, &SOBEL),
            ))
        },
        result: &|backend, n| Ok(compute(backend, &inputs(n), &filter)?.to_vec()),
        timings: &|backend, n| {
            let img = inputs(n);
            let mut out = Matrix::zeroed(img.rows(), img.cols());
            Ok(vec![
                (
                    format!("skel {backend} (filter as &[f32], w.radius())"),
                    common::best_of(|| {
                        compute(backend, &img, &filter)?;
                        // The result stays on a device: wait for it.
                        skel::tune::synchronize()
                    })?,
                ),
                (
                    format!("skel {backend}, one output reused"),
                    common::best_of(|| {
                        compute_into(backend, &img, &filter, &mut out)?;
                        skel::tune::synchronize()
                    })?,
                ),
                (
                    "hand-written Rayon".into(),
                    common::best_of(|| {
                        hand_rayon(&img, &SOBEL);
                        Ok(())
                    })?,
                ),
                (
                    "sequential loop".into(),
                    common::best_of(|| {
                        sequential(&img, &SOBEL);
                        Ok(())
                    })?,
                ),
            ])
        },
    })
}
