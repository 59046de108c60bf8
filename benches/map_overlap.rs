//! MapOverlap: 3-point blur (radius 1, `Edge::Duplicate`) of an f32 vector: skel backends vs
//! a plain loop and a windowed stencil over `par_chunks_mut`.
//!
//! `cargo bench --bench map_overlap` or `cargo bench --bench map_overlap -- --quick`.

mod common;

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rayon::prelude::*;
use skel::prelude::*;

#[userfn]
fn blur(w: Window<f32>) -> f32 {
    (w[-1] + w[0] + w[1]) / 3.0
}

/// Blurs `out`, which holds positions `start..start + out.len()` of `a`; edges duplicated.
fn blur_range(a: &[f32], start: usize, out: &mut [f32]) {
    let n = a.len();
    let at = |i: usize| -> f32 {
        let l = a[i.saturating_sub(1)];
        let r = a[(i + 1).min(n - 1)];
        (l + a[i] + r) / 3.0
    };
    let end = start + out.len();
    // Interior positions (both neighbours in range) take the fast windowed path.
    let lo = start.max(1).min(end);
    let hi = end.min(n.saturating_sub(1)).max(lo);
    let (head, rest) = out.split_at_mut(lo - start);
    let (mid, tail) = rest.split_at_mut(hi - lo);
    for (k, o) in head.iter_mut().enumerate() {
        *o = at(start + k);
    }
    if lo < hi {
        for (o, w) in mid.iter_mut().zip(a[lo - 1..hi + 1].windows(3)) {
            *o = (w[0] + w[1] + w[2]) / 3.0;
        }
    }
    for (k, o) in tail.iter_mut().enumerate() {
        *o = at(hi + k);
    }
}

fn plain_loop(a: &[f32], out: &mut [f32]) {
    blur_range(a, 0, out);
}

fn hand_rayon(a: &[f32], out: &mut [f32]) {
    let chunk = (a.len() / (4 * rayon::current_num_threads())).max(4096);
    out.par_chunks_mut(chunk)
        .enumerate()
        .for_each(|(c, o)| blur_range(a, c * chunk, o));
}

fn bench(c: &mut Criterion) {
    let backends = common::backends();
    let mut group = c.benchmark_group("map_overlap");
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
            let stencil = MapOverlap::new(blur, 1)
                .edge(Edge::Duplicate)
                .backend(backend);
            if n <= common::VALIDATE_UP_TO {
                stencil.run(&va, &mut out).expect("skel MapOverlap failed");
                common::assert_all_close("map_overlap", out.as_slice(), &want, 1e-6);
            }
            group.bench_with_input(
                BenchmarkId::new(common::series(backend), n),
                &n,
                |bch, _| bch.iter(|| stencil.run(&va, &mut out).expect("skel MapOverlap failed")),
            );
        }

        let mut plain = vec![0.0; n];
        group.bench_with_input(BenchmarkId::new("plain-loop", n), &n, |bch, _| {
            bch.iter(|| plain_loop(black_box(&a), &mut plain))
        });
        let mut par = vec![0.0; n];
        if n <= common::VALIDATE_UP_TO {
            hand_rayon(&a, &mut par);
            common::assert_all_close("hand-rayon blur", &par, &want, 0.0);
        }
        group.bench_with_input(BenchmarkId::new("hand-rayon", n), &n, |bch, _| {
            bch.iter(|| hand_rayon(black_box(&a), &mut par))
        });
    }
    group.finish();
}

criterion_group! { name = benches; config = common::criterion(); targets = bench }
criterion_main!(benches);
