//! MapReduce (dot product) of two f32 vectors: skel backends vs a plain loop and rayon.
//!
//! `cargo bench --bench map_reduce` or `cargo bench --bench map_reduce -- --quick`.

mod common;

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rayon::prelude::*;
use skel::prelude::*;

#[userfn]
fn mult(a: f32, b: f32) -> f32 {
    a * b
}

#[userfn]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

fn plain_loop(a: &[f32], b: &[f32]) -> f32 {
    let mut s = 0.0;
    for (x, y) in a.iter().zip(b) {
        s += x * y;
    }
    s
}

fn hand_rayon(a: &[f32], b: &[f32]) -> f32 {
    a.par_iter().zip(b).map(|(x, y)| x * y).sum()
}

fn bench(c: &mut Criterion) {
    let backends = common::backends();
    let mut group = c.benchmark_group("map_reduce");
    for n in common::SIZES {
        group.throughput(Throughput::Bytes(
            (2 * n * std::mem::size_of::<f32>()) as u64,
        ));
        let (a, b) = (common::data(n, 1), common::data(n, 2));
        let want = plain_loop(&a, &b);

        let (va, vb) = (Vector::from(a.clone()), Vector::from(b.clone()));
        for &backend in &backends {
            let dot = MapReduce::new(mult, add).backend(backend);
            if n <= common::VALIDATE_UP_TO {
                let got: f32 = dot.run(&va, &vb).expect("skel MapReduce failed");
                common::assert_close("map_reduce", got, want, 1e-3);
            }
            group.bench_with_input(
                BenchmarkId::new(common::series(backend), n),
                &n,
                |bch, _| bch.iter(|| -> f32 { dot.run(&va, &vb).expect("skel MapReduce failed") }),
            );
        }

        group.bench_with_input(BenchmarkId::new("plain-loop", n), &n, |bch, _| {
            bch.iter(|| plain_loop(black_box(&a), black_box(&b)))
        });
        group.bench_with_input(BenchmarkId::new("hand-rayon", n), &n, |bch, _| {
            bch.iter(|| hand_rayon(black_box(&a), black_box(&b)))
        });
    }
    group.finish();
}

criterion_group! { name = benches; config = common::criterion(); targets = bench }
criterion_main!(benches);
