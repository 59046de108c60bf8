//! Tutorial 3: stencils. `MapOverlap` runs a user function on a window around every
//! element: a 3-point average on a vector and a 5-point Laplacian on a matrix, with the
//! edge modes that say what lies beyond the border.
//!
//! `cargo run --release --example 03_stencil -- --backend rayon`

use clap::Parser;
use skel::prelude::*;

#[userfn]
fn blur(w: Window<f32>) -> f32 {
    (w[-1] + w[0] + w[1]) / 3.0
}

#[userfn]
fn laplace(w: Window2<f32>) -> f32 {
    w[(-1, 0)] + w[(1, 0)] + w[(0, -1)] + w[(0, 1)] - 4.0 * w[(0, 0)]
}

#[derive(Parser)]
struct Args {
    /// cpu | rayon | cuda | opencl | auto
    #[arg(long, default_value = "auto")]
    backend: Backend,
}

fn main() -> skel::Result<()> {
    let args = Args::parse();
    skel::set_default_backend(args.backend)?;

    let v = Vector::from(vec![0.0f32, 3.0, 6.0, 9.0]);
    let mut out = Vector::zeroed(4);
    MapOverlap::new(blur, 1)
        .edge(Edge::Duplicate)
        .run(&v, &mut out)?; // repeat the border
    println!("backend {}: duplicate edges {out:.2}", args.backend);
    MapOverlap::new(blur, 1)
        .edge(Edge::Pad)
        .pad(0.0)
        .run(&v, &mut out)?; // zeros outside
    println!("padded with 0 {out:.2}");
    assert_eq!(out[0], 1.0);

    let m = Matrix::from_fn(5, 5, |r, c| (r * r + c * c) as f32); // Laplacian 4 inside
    let mut lap = Matrix::zeroed(5, 5);
    MapOverlap::new(laplace, (1, 1))
        .edge(Edge::Duplicate)
        .run(&m, &mut lap)?;
    println!("laplacian:\n{lap}");
    assert_eq!(lap[(2, 2)], 4.0);
    Ok(())
}
