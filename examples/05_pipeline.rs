//! Tutorial 5: streams of tasks. `skel::stream` runs a pipeline of stages and farms of
//! threads over a stream of items, in input order, with a skeleton call inside a stage:
//! here a farm makes signals, a stage normalises each with a `MapReduce` and a `Map`, and
//! a farm checks them.
//!
//! `cargo run --release --example 05_pipeline -- --backend rayon --items 64`

use clap::Parser;
use skel::prelude::*;
use skel::stream::Pipeline;

#[userfn]
fn square(x: f32) -> f32 {
    x * x
}

#[userfn]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

#[userfn]
fn scale(x: f32, #[uniform] k: f32) -> f32 {
    x * k
}

#[derive(Parser)]
struct Args {
    /// cpu | rayon | cuda | opencl | auto
    #[arg(long, default_value = "auto")]
    backend: Backend,
    /// How many signals flow through the pipeline.
    #[arg(long, default_value_t = 32)]
    items: usize,
}

fn main() -> skel::Result<()> {
    let args = Args::parse();
    skel::set_default_backend(args.backend)?;

    let report = Pipeline::from_iter(0..args.items)
        .farm(2, |seed| {
            Ok(Vector::from_fn(4096, |i| ((i + seed) % 7) as f32 + 1.0))
        })
        .stage(|signal| {
            let energy: f32 = MapReduce::new(square, add).run(&signal)?;
            let mut unit = Vector::zeroed(signal.len());
            Map::new(scale)
                .uniforms((1.0 / energy.sqrt(),))
                .run(&signal, &mut unit)?;
            Ok(unit)
        })
        .farm(2, |unit: Vector<f32>| {
            let norm = unit.iter().map(|x| x * x).sum::<f32>().sqrt();
            Ok((norm - 1.0).abs() < 1e-3)
        })
        .run()?;
    let ok = report.outputs().iter().all(|&good| good);
    println!(
        "backend {}: {} signals normalised: {}",
        args.backend,
        report.outputs().len(),
        if ok { "ok" } else { "WRONG" }
    );
    println!("{report}");
    assert!(ok);
    Ok(())
}
