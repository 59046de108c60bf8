//! Scan (inclusive prefix sum) of an f32 vector: skel backends vs a plain loop and a
//! hand-written two-pass chunked rayon scan.
//!
//! `cargo bench --bench scan` or `cargo bench --bench scan -- --quick`.

mod common;

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rayon::prelude::*;
use skel::prelude::*;

#[userfn]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

fn plain_loop(a: &[f32], out: &mut [f32]) {
    let mut acc = 0.0;
    for (o, &x) in out.iter_mut().zip(a) {
        acc += x;
        *o = acc;
    }
}

/// Two passes over chunks: chunk totals in parallel, a sequential exclusive scan of the
/// totals, then each chunk scanned in parallel from its offset.
fn hand_rayon(a: &[f32], out: &mut [f32], sums: &mut Vec<f32>) {
    let chunk = (a.len() / (4 * rayon::current_num_threads())).max(4096);
    a.par_chunks(chunk)
        .map(|c| c.iter().sum::<f32>())
        .collect_into_vec(sums);
    let mut acc = 0.0;
    for s in sums.iter_mut() {
        let total = *s;
        *s = acc;
        acc += total;
    }
    out.par_chunks_mut(chunk)
        .zip(a.par_chunks(chunk))
        .zip(sums.par_iter())
        .for_each(|((o, c), &offset)| {
            let mut acc = offset;
            for (o, &x) in o.iter_mut().zip(c) {
                acc += x;
                *o = acc;
            }
        });
}

fn bench(c: &mut Criterion) {
    let backends = common::backends();
    let mut group = c.benchmark_group("scan");
    for n in common::SIZES {
        group.throughput(Throughput::Bytes(
            (2 * n * std::mem::size_of::<f32>()) as u64,
        ));
        let a = common::data(n, 1);
        let mut want = vec![0.0; n];
        plain_loop(&a, &mut want);

        let va = Vector::from(a.clone());
        let mut out: Vector<f32> = Vector::zeroed(n);
        for &backend in &backends {
            let scan = Scan::new(add).backend(backend);
            if n <= common::VALIDATE_UP_TO {
                scan.run(&va, &mut out).expect("skel Scan failed");
                common::assert_all_close("scan", out.as_slice(), &want, 1e-3);
            }
            group.bench_with_input(
                BenchmarkId::new(common::series(backend), n),
                &n,
                |bch, _| bch.iter(|| scan.run(&va, &mut out).expect("skel Scan failed")),
            );
        }

        let mut plain = vec![0.0; n];
        group.bench_with_input(BenchmarkId::new("plain-loop", n), &n, |bch, _| {
            bch.iter(|| plain_loop(black_box(&a), &mut plain))
        });
        let (mut par, mut sums) = (vec![0.0; n], Vec::new());
        if n <= common::VALIDATE_UP_TO {
            hand_rayon(&a, &mut par, &mut sums);
            common::assert_all_close("hand-rayon scan", &par, &want, 1e-3);
        }
        group.bench_with_input(BenchmarkId::new("hand-rayon", n), &n, |bch, _| {
            bch.iter(|| hand_rayon(black_box(&a), &mut par, &mut sums))
        });
    }
    group.finish();
}

criterion_group! { name = benches; config = common::criterion(); targets = bench }
criterion_main!(benches);
