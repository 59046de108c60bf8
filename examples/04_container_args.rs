//! Tutorial 4: container arguments. A user function may read whole containers besides its
//! element: here one index Map computes a matrix-vector product, each output element
//! reading a row of `Mat<f32>` and all of `&[f32]` (SkePU 3's way to write it).
//!
//! `cargo run --release --example 04_container_args -- --backend rayon --size 512`

use clap::Parser;
use skel::prelude::*;

#[userfn]
fn row_times_x(#[index] i: usize, a: Mat<f32>, x: &[f32]) -> f32 {
    let mut sum = 0.0;
    for j in 0..x.len() {
        sum += a[(i, j)] * x[j];
    }
    sum
}

#[derive(Parser)]
struct Args {
    /// cpu | rayon | cuda | opencl | auto
    #[arg(long, default_value = "auto")]
    backend: Backend,
    /// The matrix is size x size.
    #[arg(long, default_value_t = 256)]
    size: usize,
}

fn main() -> skel::Result<()> {
    let args = Args::parse();
    skel::set_default_backend(args.backend)?;
    let n = args.size;

    let a = Matrix::from_fn(n, n, |r, c| if r == c { 2.0 } else { 0.0 }); // 2 * identity
    let x = Vector::from_fn(n, |i| i as f32);
    let mut y = Vector::zeroed(n);
    Map::new(row_times_x).arrays((&a, &x)).run_index(&mut y)?; // uploaded once per call
    let ok = y.iter().enumerate().all(|(i, &v)| v == 2.0 * i as f32);
    println!(
        "backend {}: y = A x for n = {n}: {}",
        args.backend,
        if ok { "ok" } else { "WRONG" }
    );
    assert!(ok);
    Ok(())
}
