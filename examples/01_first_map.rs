//! Tutorial 1: a first program. Two user functions, a `Map`, a fused `MapReduce` and a
//! `Reduce` pinned to the sequential backend, on vectors of 2^20 elements.
//!
//! `cargo run --release --example 01_first_map -- --backend rayon` (cpu | rayon | cuda |
//! opencl | auto; GPU backends need `--features cuda` / `--features opencl`).

use clap::Parser;
use skel::prelude::*;

#[userfn]
fn mult(a: f32, b: f32) -> f32 {
    a * b
}

#[userfn]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

/// The command line of every numbered example.
#[derive(Parser)]
struct Args {
    /// The backend of every skeleton call without `.backend(..)`.
    #[arg(long, default_value = "auto")]
    backend: Backend,
}

fn main() -> skel::Result<()> {
    let args = Args::parse();
    skel::set_default_backend(args.backend)?; // an unavailable backend is an Err, not a panic

    let a = Vector::from_fn(1 << 20, |i| i as f32);
    let b = Vector::filled(1 << 20, 0.5f32);
    let mut sum = Vector::zeroed(1 << 20);
    Map::new(add).run(&a, &b, &mut sum)?; // sum = a + b
    let dot: f32 = MapReduce::new(mult, add).run(&a, &b)?; // fused a . b
    let total: f32 = Reduce::new(add).backend(Backend::Cpu).run(&sum)?; // the oracle
    println!("backend {}: dot = {dot}, total = {total}", args.backend);
    assert_eq!(sum[10], 10.5);
    Ok(())
}
