//! Tutorial 2: matrices. An `#[index]` Map that fills a matrix from its coordinates, a
//! uniform, a row-wise `Reduce`, and the containers' `Display` and row iterator.
//!
//! `cargo run --release --example 02_matrices -- --backend rayon`

use clap::Parser;
use skel::prelude::*;

/// Element (r, c) of a `scale`d multiplication table.
#[userfn]
fn table(#[index] (r, c): (usize, usize), #[uniform] scale: f32) -> f32 {
    scale * ((r + 1) * (c + 1)) as f32
}

#[userfn]
fn add(a: f32, b: f32) -> f32 {
    a + b
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

    let mut m: Matrix<f32> = Matrix::zeroed(4, 5);
    Map::new(table).uniforms((0.5,)).run_index(&mut m)?; // index-only Map over m's shape
    let mut per_row = Vector::zeroed(4);
    Reduce::new(add).run_rows(&m, &mut per_row)?; // one sum per row

    println!("backend {}:\n{m:.1}", args.backend); // Display: one row per line
    println!("row sums: {per_row}");
    for (r, row) in m.iter_rows().enumerate() {
        assert_eq!(row.iter().sum::<f32>(), per_row[r]);
    }
    Ok(())
}
