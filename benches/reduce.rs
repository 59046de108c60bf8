//! Reduce (sum) of an f32 vector: skel backends vs a plain loop and idiomatic rayon.
//!
//! `cargo bench --bench reduce` or `cargo bench --bench reduce -- --quick`.

mod common;

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rayon::prelude::*;
use skel::prelude::*;

#[userfn]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

fn plain_loop(a: &[f32]) -> f32 {
    let mut s = 0.0;
    for &x in a {
        s += x;
    }
    s
}

fn hand_rayon(a: &[f32]) -> f32 {
    a.par_iter().sum()
}

fn bench(c: &mut Criterion) {
    let backends = common::backends();
    let mut group = c.benchmark_group("reduce");
    for n in common::SIZES {
        group.throughput(Throughput::Bytes((n * std::mem::size_of::<f32>()) as u64));
        let a = common::data(n, 1);
        let want = plain_loop(&a);

        let va = Vector::from(a.clone());
        for &backend in &backends {
            let reduce = Reduce::new(add).backend(backend);
            if n <= common::VALIDATE_UP_TO {
                let got: f32 = reduce.run(&va).expect("skel Reduce failed");
                common::assert_close("reduce", got, want, 1e-3);
            }
            group.bench_with_input(
                BenchmarkId::new(common::series(backend), n),
                &n,
                |bch, _| bch.iter(|| -> f32 { reduce.run(&va).expect("skel Reduce failed") }),
            );
        }

        group.bench_with_input(BenchmarkId::new("plain-loop", n), &n, |bch, _| {
            bch.iter(|| plain_loop(black_box(&a)))
        });
        group.bench_with_input(BenchmarkId::new("hand-rayon", n), &n, |bch, _| {
            bch.iter(|| hand_rayon(black_box(&a)))
        });
    }
    group.finish();
}

criterion_group! { name = benches; config = common::criterion(); targets = bench }
criterion_main!(benches);
