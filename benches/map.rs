//! Map `a + b` over f32 vectors: skel backends vs a plain loop and idiomatic rayon.
//!
//! `cargo bench --bench map` (all sizes) or `cargo bench --bench map -- --quick`;
//! one size: `cargo bench --bench map -- 16777216`.

mod common;

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rayon::prelude::*;
use skel::prelude::*;

#[userfn]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

fn plain_loop(a: &[f32], b: &[f32], out: &mut [f32]) {
    for ((o, x), y) in out.iter_mut().zip(a).zip(b) {
        *o = x + y;
    }
}

fn hand_rayon(a: &[f32], b: &[f32], out: &mut Vec<f32>) {
    a.par_iter()
        .zip(b)
        .map(|(x, y)| x + y)
        .collect_into_vec(out);
}

fn bench(c: &mut Criterion) {
    let backends = common::backends();
    let mut group = c.benchmark_group("map");
    for n in common::SIZES {
        group.throughput(Throughput::Bytes(
            (3 * n * std::mem::size_of::<f32>()) as u64,
        ));
        let (a, b) = (common::data(n, 1), common::data(n, 2));
        let mut want = vec![0.0; n];
        plain_loop(&a, &b, &mut want);

        let (va, vb) = (Vector::from(a.clone()), Vector::from(b.clone()));
        let mut out: Vector<f32> = Vector::zeroed(n);
        for &backend in &backends {
            let map = Map::new(add).backend(backend);
            if n <= common::VALIDATE_UP_TO {
                map.run(&va, &vb, &mut out).expect("skel Map failed");
                common::assert_all_close("map", out.as_slice(), &want, 0.0);
            }
            group.bench_with_input(
                BenchmarkId::new(common::series(backend), n),
                &n,
                |bch, _| bch.iter(|| map.run(&va, &vb, &mut out).expect("skel Map failed")),
            );
        }

        let mut plain = vec![0.0; n];
        group.bench_with_input(BenchmarkId::new("plain-loop", n), &n, |bch, _| {
            bch.iter(|| plain_loop(black_box(&a), black_box(&b), &mut plain))
        });
        let mut par = Vec::with_capacity(n);
        group.bench_with_input(BenchmarkId::new("hand-rayon", n), &n, |bch, _| {
            bch.iter(|| hand_rayon(black_box(&a), black_box(&b), &mut par))
        });
    }
    group.finish();
}

criterion_group! { name = benches; config = common::criterion(); targets = bench }
criterion_main!(benches);
