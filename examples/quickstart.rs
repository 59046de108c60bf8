//! The README's example, kept compiling: `cargo run --release --example quickstart`.

use skel::prelude::*;

#[userfn]
fn mult(a: f32, b: f32) -> f32 {
    a * b
}

#[userfn]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

fn main() -> skel::Result<()> {
    let a = Vector::from_fn(1 << 20, |i| i as f32);
    let b = Vector::filled(1 << 20, 0.5f32);
    let mut sum = Vector::zeroed(1 << 20);
    Map::new(add).run(&a, &b, &mut sum)?; // sum = a + b
    let dot: f32 = MapReduce::new(mult, add).run(&a, &b)?; // fused a . b
    let total: f32 = Reduce::new(add).backend(Backend::Cpu).run(&sum)?;
    println!("dot = {dot}, total = {total}");
    Ok(())
}
