//! Lazy composition (`Map::new(f).lazy(..)`) and results that stay where computed
//! (`run_into`, `MapReduce::run_rows`/`run_cols`/`run_index`) on every backend: every
//! consumer form, chains of one to four lazy Maps, several lazy inputs in one call, lazy
//! Maps with container arguments, uniforms and `#[index]`, edge sizes and random inputs.
//! Each result is compared bit for bit with materialising the intermediates by hand and
//! running the consumer on the same backend, and with a plain Rust computation.

use proptest::prelude::*;
use skel::containers::Source;
use skel::prelude::*;

use super::available;

/// Empty, one, primes, around the Rayon chunk (2^14) and one large odd size.
pub const LAZY_SIZES: &[usize] = &[0, 1, 2, 3, 7, 13, 257, 1009, 16383, 16385, 65_537];

#[userfn]
pub fn halve(x: f32) -> f32 {
    x * 0.5 + 0.25
}

#[userfn]
pub fn cube(x: f32) -> f32 {
    x * x * x - 1.5
}

#[userfn]
pub fn twist(x: f32) -> f32 {
    (x - 3.0) * 0.75
}

#[userfn]
pub fn plus(a: f32, b: f32) -> f32 {
    a + b
}

#[userfn]
pub fn times(a: f32, b: f32) -> f32 {
    a * b
}

#[userfn]
pub fn biggest(a: f32, b: f32) -> f32 {
    a.max(b)
}

#[userfn]
pub fn affine(x: f32, #[uniform] k: f32, #[uniform] c: f32) -> f32 {
    x * k + c
}

#[userfn]
pub fn at_index(#[index] i: usize, x: f32) -> f32 {
    x + (i % 97) as f32
}

#[userfn]
pub fn at_cell(#[index] (r, c): (usize, usize), x: f32) -> f32 {
    x + (r * 10 + c % 10) as f32
}

#[userfn]
pub fn shifted(#[index] i: usize, x: f32, w: &[f32]) -> f32 {
    x - w[i % w.len()]
}

#[userfn]
pub fn row_shift(#[index] (r, _c): (usize, usize), x: f32, mx: &[f32]) -> f32 {
    x - mx[r]
}

#[userfn]
pub fn exp_shift(#[index] (r, _c): (usize, usize), x: f32, mx: &[f32]) -> f32 {
    (x - mx[r]).exp()
}

/// Row folds of lazy inputs on every side of the host backends' cuts (Rayon takes whole
/// rows, about 2^14 elements a chunk): empty, one, primes, one long row, rows across chunks,
/// and fewer long rows than threads (Rayon maps those on every core first).
pub const ROW_FOLD_SHAPES: &[(usize, usize)] = &[
    (0, 3),
    (1, 1),
    (2, 1),
    (7, 13),
    (1, 16411),
    (1, 65537),
    (2, 100003),
    (131, 257),
    (1031, 67),
    (16411, 2),
];

#[userfn]
pub fn positive(x: f32) -> bool {
    x > 0.0
}

#[userfn]
pub fn pick(table: &[f32], x: f32) -> f32 {
    table[(x.abs() as usize) % table.len()]
}

#[userfn]
pub fn smooth(w: Window<f32>) -> f32 {
    w[-1] + 2.0 * w[0] + w[1]
}

#[userfn]
pub fn cross(w: Window2<f32>) -> f32 {
    w[(-1, 0)] + w[(1, 0)] + w[(0, -1)] + w[(0, 1)] - 4.0 * w[(0, 0)]
}

#[userfn]
pub fn sum_and_product(a: f32, b: f32) -> (f32, f32) {
    (a + b, a * b)
}

#[userfn]
pub fn to_int(x: f32) -> i32 {
    x as i32 * 3
}

#[userfn]
pub fn int_plus(a: i32, b: f32) -> f32 {
    a as f32 + b
}

#[userfn]
pub fn unit_hit(#[index] i: usize) -> u64 {
    ((i * 7919) % 13 < 5) as u64
}

#[userfn]
pub fn add_u64(a: u64, b: u64) -> u64 {
    a + b
}

/// Integer-valued data in `-8..=8`, so sums are exact in any order.
pub fn data(n: usize, seed: u64) -> Vector<f32> {
    Vector::from_fn(n, |i| ((i as u64 * 2_654_435_761 + seed) % 17) as f32 - 8.0)
}

/// The bits of a float vector, so that `-0.0 != 0.0` and equal NaNs compare equal.
pub fn bits(v: &Vector<f32>) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// `f` applied with a Map on `b`, materialised.
pub fn eager(
    b: Backend,
    x: &Vector<f32>,
    f: impl Fn(Backend, &Vector<f32>, &mut Vector<f32>),
) -> Vector<f32> {
    let mut out = Vector::zeroed(x.len());
    f(b, x, &mut out);
    out
}

/// The chain `halve, cube, twist, halve` cut to its first `len` steps, materialised on `b`.
pub fn chain_eager(b: Backend, x: &Vector<f32>, len: usize) -> Vector<f32> {
    let mut cur = x.clone();
    for step in 0..len {
        let mut next = Vector::zeroed(x.len());
        match step % 4 {
            0 => Map::new(halve).backend(b).run(&cur, &mut next).unwrap(),
            1 => Map::new(cube).backend(b).run(&cur, &mut next).unwrap(),
            2 => Map::new(twist).backend(b).run(&cur, &mut next).unwrap(),
            _ => Map::new(halve).backend(b).run(&cur, &mut next).unwrap(),
        }
        cur = next;
    }
    cur
}

/// The same chain, lazy, consumed by a Map with `y` and by a Reduce.
pub fn chain_lazy(b: Backend, x: &Vector<f32>, y: &Vector<f32>, len: usize) -> (Vector<f32>, f32) {
    let mut o = Vector::zeroed(x.len());
    let t1 = Map::new(halve).lazy(x);
    let t2 = Map::new(cube).lazy(&t1);
    let t3 = Map::new(twist).lazy(&t2);
    let t4 = Map::new(halve).lazy(&t3);
    let sum = match len {
        1 => {
            Map::new(plus).backend(b).run(&t1, y, &mut o).unwrap();
            Reduce::new(plus).backend(b).run(&t1).unwrap()
        }
        2 => {
            Map::new(plus).backend(b).run(&t2, y, &mut o).unwrap();
            Reduce::new(plus).backend(b).run(&t2).unwrap()
        }
        3 => {
            Map::new(plus).backend(b).run(&t3, y, &mut o).unwrap();
            Reduce::new(plus).backend(b).run(&t3).unwrap()
        }
        _ => {
            Map::new(plus).backend(b).run(&t4, y, &mut o).unwrap();
            Reduce::new(plus).backend(b).run(&t4).unwrap()
        }
    };
    (o, sum)
}

/// A plain Rust evaluation of the chain at one value.
pub fn chain_plain(mut v: f32, len: usize) -> f32 {
    for step in 0..len {
        v = match step % 4 {
            0 | 3 => halve::call(v),
            1 => cube::call(v),
            _ => twist::call(v),
        };
    }
    v
}

/// `biggest` over a chain and a leaf, then a leaf and the other chain, against the same
/// with the chains materialised (`mf`, `ms`): one consumer, two kernels.
pub fn one_consumer_two_chains(
    b: Backend,
    (first, second): (&impl Source<f32>, &impl Source<f32>),
    (mf, ms): (&Vector<f32>, &Vector<f32>),
    y: &Vector<f32>,
) {
    let n = y.len();
    let (mut got, mut want) = (Vector::zeroed(n), Vector::zeroed(n));
    Map::new(biggest)
        .backend(b)
        .run(first, y, &mut got)
        .unwrap();
    Map::new(biggest).backend(b).run(mf, y, &mut want).unwrap();
    assert_eq!(bits(&got), bits(&want), "chain, leaf, n={n}");
    Map::new(biggest)
        .backend(b)
        .run(y, second, &mut got)
        .unwrap();
    Map::new(biggest).backend(b).run(y, ms, &mut want).unwrap();
    assert_eq!(bits(&got), bits(&want), "leaf, chain, n={n}");
}

macro_rules! lazy_suite {
    ($name:ident, $backend:expr) => {
        mod $name {
            use super::*;

            const B: Backend = $backend;

            #[test]
            fn chains_of_one_to_four_match_materialising() {
                if !available(B) {
                    return;
                }
                for &n in LAZY_SIZES {
                    let (x, y) = (data(n, 1), data(n, 2));
                    for len in 1..=4 {
                        let mid = chain_eager(B, &x, len);
                        let want = eager(B, &mid, |b, m, o| Map::new(plus).backend(b).run(m, &y, o).unwrap());
                        let want_sum = Reduce::new(plus).backend(B).run(&mid).unwrap();
                        let (got, sum) = chain_lazy(B, &x, &y, len);
                        assert_eq!(bits(&got), bits(&want), "chain of {len}, n={n}");
                        assert_eq!(sum.to_bits(), want_sum.to_bits(), "reduce of a chain of {len}, n={n}");
                        let plain: Vec<f32> = (0..n).map(|i| chain_plain(x[i], len) + y[i]).collect();
                        assert_eq!(got.to_vec(), plain, "chain of {len} against plain Rust, n={n}");
                    }
                }
            }

            #[test]
            fn several_lazy_inputs_uniforms_index_and_arrays() {
                if !available(B) {
                    return;
                }
                for &n in LAZY_SIZES {
                    let (x, y) = (data(n, 3), data(n, 4));
                    let w = data(5, 9);
                    let a = Map::new(affine).uniforms((2.0, -1.0)).lazy(&x);
                    let i = Map::new(at_index).lazy(&y);
                    let s = Map::new(shifted).arrays((&w,)).lazy(&a);
                    let mut got = Vector::zeroed(n);
                    Map::new(times).backend(B).run(&s, &i, &mut got).unwrap();

                    let ma = eager(B, &x, |b, v, o| Map::new(affine).uniforms((2.0, -1.0)).backend(b).run(v, o).unwrap());
                    let mi = eager(B, &y, |b, v, o| Map::new(at_index).backend(b).run(v, o).unwrap());
                    let ms = eager(B, &ma, |b, v, o| Map::new(shifted).arrays((&w,)).backend(b).run(v, o).unwrap());
                    let mut want = Vector::zeroed(n);
                    Map::new(times).backend(B).run(&ms, &mi, &mut want).unwrap();
                    assert_eq!(bits(&got), bits(&want), "n={n}");
                    let plain: Vec<f32> = (0..n)
                        .map(|k| (x[k] * 2.0 - 1.0 - w[k % 5]) * (y[k] + (k % 97) as f32))
                        .collect();
                    assert_eq!(got.to_vec(), plain, "plain, n={n}");

                    // The same lazy input twice in one call, and a lazy Map of two lazy inputs.
                    let both = Map::new(plus).lazy(&a, &i);
                    Map::new(times).backend(B).run(&both, &both, &mut got).unwrap();
                    let plain: Vec<f32> = (0..n)
                        .map(|k| {
                            let v = x[k] * 2.0 - 1.0 + y[k] + (k % 97) as f32;
                            v * v
                        })
                        .collect();
                    assert_eq!(got.to_vec(), plain, "twice, n={n}");
                }
            }

            #[test]
            fn fused_kernels_checked_multi_output_types_and_cache_keys() {
                if !available(B) {
                    return;
                }
                for &n in LAZY_SIZES {
                    let (x, y) = (data(n, 5), data(n, 6));
                    let table = data(7, 11);
                    let h = Map::new(halve).lazy(&x);
                    let c = Map::new(cube).lazy(&y);
                    let mh = chain_eager(B, &x, 1);
                    let mc = eager(B, &y, |b, v, o| Map::new(cube).backend(b).run(v, o).unwrap());
                    // One consumer over two different chains, in both orders: each its own
                    // kernel (the cache key holds the chain).
                    one_consumer_two_chains(B, (&h, &c), (&mh, &mc), &y);
                    one_consumer_two_chains(B, (&c, &h), (&mc, &mh), &y);
                    // The checked variant evaluates the chain checked too (in range: equal).
                    let p = Map::new(pick).arrays((&table,)).lazy(&h);
                    let mp = eager(B, &mh, |b, v, o| Map::new(pick).arrays((&table,)).backend(b).run(v, o).unwrap());
                    for checked in [false, true] {
                        let mut got = Vector::zeroed(n);
                        Map::new(twist).checked(checked).backend(B).run(&p, &mut got).unwrap();
                        let want = eager(B, &mp, |b, v, o| Map::new(twist).backend(b).run(v, o).unwrap());
                        assert_eq!(bits(&got), bits(&want), "checked={checked}, n={n}");
                        let r = MapReduce::new(times, plus).checked(checked).backend(B).run(&p, &c).unwrap();
                        let w = MapReduce::new(times, plus).backend(B).run(&mp, &mc).unwrap();
                        assert_eq!(r.to_bits(), w.to_bits(), "MapReduce checked={checked}, n={n}");
                    }
                    // A multi-output Map over lazy inputs, and a chain through another type.
                    let (mut s, mut m) = (Vector::zeroed(n), Vector::zeroed(n));
                    Map::new(sum_and_product).backend(B).run(&h, &c, &mut (&mut s, &mut m)).unwrap();
                    let plain_s: Vec<f32> = (0..n).map(|k| halve::call(x[k]) + cube::call(y[k])).collect();
                    let plain_m: Vec<f32> = (0..n).map(|k| halve::call(x[k]) * cube::call(y[k])).collect();
                    assert_eq!((s.to_vec(), m.to_vec()), (plain_s, plain_m), "multi-output, n={n}");
                    let i = Map::new(to_int).lazy(&c);
                    let mut got = Vector::zeroed(n);
                    Map::new(int_plus).backend(B).run(&i, &h, &mut got).unwrap();
                    let plain: Vec<f32> = (0..n).map(|k| (cube::call(y[k]) as i32 * 3) as f32 + halve::call(x[k])).collect();
                    assert_eq!(got.to_vec(), plain, "i32 chain, n={n}");
                }
            }

            #[test]
            fn index_is_the_consumers_element_on_views() {
                if !available(B) {
                    return;
                }
                let x = data(300, 5);
                let part = x.view(100..200);
                let lazy = Map::new(at_index).lazy(&part);
                let mut out = Vector::filled(300, -1.0f32);
                Map::new(halve).backend(B).run(&lazy, &mut out.view_mut(50..150)).unwrap();
                for k in 0..100 {
                    assert_eq!(out[50 + k], halve::call(x[100 + k] + (k % 97) as f32), "k={k}");
                }
                assert!(out.to_vec()[..50].iter().all(|&v| v == -1.0));
                assert!(out.to_vec()[150..].iter().all(|&v| v == -1.0));
            }

            #[test]
            fn every_consumer_form() {
                if !available(B) {
                    return;
                }
                for &n in LAZY_SIZES {
                    let x = data(n, 6);
                    let lazy = Map::new(cube).lazy(&x);
                    let mid = eager(B, &x, |b, v, o| Map::new(cube).backend(b).run(v, o).unwrap());

                    // MapReduce over a lazy input and a container.
                    let got = MapReduce::new(times, plus).backend(B).run(&lazy, &x).unwrap();
                    let want = MapReduce::new(times, plus).backend(B).run(&mid, &x).unwrap();
                    assert_eq!(got.to_bits(), want.to_bits(), "MapReduce n={n}");
                    let m = Reduce::new(biggest).start(f32::MIN).backend(B).run(&lazy).unwrap();
                    let mw = Reduce::new(biggest).start(f32::MIN).backend(B).run(&mid).unwrap();
                    assert_eq!(m.to_bits(), mw.to_bits(), "Reduce max n={n}");

                    // Scan.
                    let (mut got, mut want) = (Vector::zeroed(n), Vector::zeroed(n));
                    Scan::new(plus).backend(B).run(&lazy, &mut got).unwrap();
                    Scan::new(plus).backend(B).run(&mid, &mut want).unwrap();
                    assert_eq!(bits(&got), bits(&want), "Scan n={n}");

                    // Filter.
                    let (mut got, mut want) = (Vector::filled(n, 9.0), Vector::filled(n, 9.0));
                    let k = Filter::new(positive).backend(B).run(&lazy, &mut got).unwrap();
                    let kw = Filter::new(positive).backend(B).run(&mid, &mut want).unwrap();
                    assert_eq!((k, bits(&got)), (kw, bits(&want)), "Filter n={n}");

                    // MapArray: the element input lazy.
                    let table = data(11, 7);
                    let (mut got, mut want) = (Vector::zeroed(n), Vector::zeroed(n));
                    MapArray::new(pick).backend(B).run(&table, &lazy, &mut got).unwrap();
                    MapArray::new(pick).backend(B).run(&table, &mid, &mut want).unwrap();
                    assert_eq!(bits(&got), bits(&want), "MapArray n={n}");

                    // MapOverlap 1D: the halo recomputes the producer.
                    if n >= 2 {
                        for edge in [Edge::Duplicate, Edge::Cyclic, Edge::Pad] {
                            let (mut got, mut want) = (Vector::zeroed(n), Vector::zeroed(n));
                            MapOverlap::new(smooth, 1).edge(edge).pad(0.5).backend(B).run(&lazy, &mut got).unwrap();
                            MapOverlap::new(smooth, 1).edge(edge).pad(0.5).backend(B).run(&mid, &mut want).unwrap();
                            assert_eq!(bits(&got), bits(&want), "MapOverlap {edge:?} n={n}");
                        }
                    }
                }
            }

            #[test]
            fn row_folds_of_lazy_inputs_across_the_cuts() {
                if !available(B) {
                    return;
                }
                for &(rows, cols) in ROW_FOLD_SHAPES {
                    let m = Matrix::from_fn(rows, cols, |r, c| ((r * 31 + c * 7) % 17) as f32 - 8.0);
                    let mut mx = Vector::zeroed(rows);
                    Reduce::new(biggest).backend(B).run_rows(&m, &mut mx).unwrap();
                    // Whole numbers: exact in any order, so against plain Rust too.
                    let shift = Map::new(row_shift).arrays((&mx,));
                    let (mut got, mut via_map_reduce) = (Vector::zeroed(rows), Vector::zeroed(rows));
                    Reduce::new(plus).backend(B).run_rows(&shift.lazy(&m), &mut got).unwrap();
                    MapReduce::new(row_shift, plus).arrays((&mx,)).backend(B).run_rows(&m, &mut via_map_reduce).unwrap();
                    for r in 0..rows {
                        let want = (1..cols).fold(m[(r, 0)] - mx[r], |s, c| s + (m[(r, c)] - mx[r]));
                        assert_eq!((got[r], via_map_reduce[r]), (want, want), "row {r} of {rows}x{cols}");
                    }
                    // Softmax sums: bit-identical to folding the materialised exponentials,
                    // and on the host backends to the cpu oracle's.
                    let exp = Map::new(exp_shift).arrays((&mx,)).backend(B);
                    let mut mid = Matrix::zeroed(rows, cols);
                    exp.run(&m, &mut mid).unwrap();
                    let (mut got, mut want) = (Vector::zeroed(rows), Vector::zeroed(rows));
                    Reduce::new(plus).backend(B).run_rows(&exp.lazy(&m), &mut got).unwrap();
                    Reduce::new(plus).backend(B).run_rows(&mid, &mut want).unwrap();
                    assert_eq!(bits(&got), bits(&want), "softmax sums {rows}x{cols}");
                    let mut fused = Vector::zeroed(rows);
                    MapReduce::new(exp_shift, plus).arrays((&mx,)).backend(B).run_rows(&m, &mut fused).unwrap();
                    assert_eq!(bits(&fused), bits(&want), "MapReduce softmax sums {rows}x{cols}");
                    if matches!(B, Backend::Cpu | Backend::Rayon) {
                        let mut oracle = Vector::zeroed(rows);
                        let exp = Map::new(exp_shift).arrays((&mx,)).backend(Backend::Cpu);
                        exp.run(&m, &mut mid).unwrap();
                        Reduce::new(plus).backend(Backend::Cpu).run_rows(&mid, &mut oracle).unwrap();
                        assert_eq!(bits(&got), bits(&oracle), "softmax sums {rows}x{cols} against cpu");
                    }
                }
                // A row of no elements has no fold: an error, not a value.
                let empty_rows = Matrix::<f32>::zeroed(3, 0);
                let mut out = Vector::zeroed(3);
                let lazy = Map::new(halve).lazy(&empty_rows);
                assert!(Reduce::new(plus).backend(B).run_rows(&lazy, &mut out).is_err());
                // A wrong output length is named as the Reduce the user called.
                let m = Matrix::<f32>::zeroed(3, 4);
                let err = Reduce::new(plus).backend(B).run_rows(&Map::new(halve).lazy(&m), &mut Vector::zeroed(4));
                let err = err.unwrap_err().to_string();
                assert!(err.contains("Reduce Rows output") && !err.contains("MapReduce"), "{err}");
            }

            #[test]
            fn matrix_consumers_rows_cols_and_stencils() {
                if !available(B) {
                    return;
                }
                for (rows, cols) in [(1, 1), (3, 7), (13, 1), (64, 33), (257, 5)] {
                    let m = Matrix::from_fn(rows, cols, |r, c| ((r * 31 + c * 7) % 17) as f32 - 8.0);
                    let lazy = Map::new(at_cell).lazy(&m);
                    let mut mid = Matrix::zeroed(rows, cols);
                    Map::new(at_cell).backend(B).run(&m, &mut mid).unwrap();

                    let (mut got, mut want) = (Vector::zeroed(rows), Vector::zeroed(rows));
                    Reduce::new(plus).backend(B).run_rows(&lazy, &mut got).unwrap();
                    Reduce::new(plus).backend(B).run_rows(&mid, &mut want).unwrap();
                    assert_eq!(bits(&got), bits(&want), "run_rows {rows}x{cols}");
                    let (mut got, mut want) = (Vector::zeroed(cols), Vector::zeroed(cols));
                    Reduce::new(plus).backend(B).run_cols(&lazy, &mut got).unwrap();
                    Reduce::new(plus).backend(B).run_cols(&mid, &mut want).unwrap();
                    assert_eq!(bits(&got), bits(&want), "run_cols {rows}x{cols}");

                    // A row softmax's first steps: max per row, then subtract it lazily.
                    let mut mx = Vector::zeroed(rows);
                    Reduce::new(biggest).backend(B).run_rows(&m, &mut mx).unwrap();
                    let sub = Map::new(row_shift).arrays((&mx,)).lazy(&m);
                    let mut sums = Vector::zeroed(rows);
                    Reduce::new(plus).backend(B).run_rows(&sub, &mut sums).unwrap();
                    for r in 0..rows {
                        let want: f32 = (0..cols).map(|c| m[(r, c)] - mx[r]).sum();
                        assert_eq!(sums[r], want, "softmax row {r} of {rows}x{cols}");
                    }

                    // MapReduce::run_rows / run_cols against Reduce over the materialised map.
                    let mut sq = Matrix::zeroed(rows, cols);
                    Map::new(times).backend(B).run(&m, &m, &mut sq).unwrap();
                    let (mut got, mut want) = (Vector::zeroed(rows), Vector::zeroed(rows));
                    MapReduce::new(times, plus).backend(B).run_rows(&m, &m, &mut got).unwrap();
                    Reduce::new(plus).backend(B).run_rows(&sq, &mut want).unwrap();
                    assert_eq!(bits(&got), bits(&want), "MapReduce::run_rows {rows}x{cols}");
                    let (mut got, mut want) = (Vector::zeroed(cols), Vector::zeroed(cols));
                    MapReduce::new(times, plus).backend(B).run_cols(&m, &m, &mut got).unwrap();
                    Reduce::new(plus).backend(B).run_cols(&sq, &mut want).unwrap();
                    assert_eq!(bits(&got), bits(&want), "MapReduce::run_cols {rows}x{cols}");

                    // MapOverlap 2D and a Map over a lazy matrix.
                    if rows >= 3 && cols >= 3 {
                        let (mut got, mut want) = (Matrix::zeroed(rows, cols), Matrix::zeroed(rows, cols));
                        MapOverlap::new(cross, (1, 1)).edge(Edge::Duplicate).backend(B).run(&lazy, &mut got).unwrap();
                        MapOverlap::new(cross, (1, 1)).edge(Edge::Duplicate).backend(B).run(&mid, &mut want).unwrap();
                        assert_eq!(got.to_vec(), want.to_vec(), "MapOverlap 2D {rows}x{cols}");
                    }
                    let mut got = Matrix::zeroed(rows, cols);
                    Map::new(halve).backend(B).run(&lazy, &mut got).unwrap();
                    let mut want = Matrix::zeroed(rows, cols);
                    Map::new(halve).backend(B).run(&mid, &mut want).unwrap();
                    assert_eq!(got.to_vec(), want.to_vec(), "Map of a lazy matrix {rows}x{cols}");
                }
            }

            #[test]
            fn run_into_run_index_and_their_errors() {
                if !available(B) {
                    return;
                }
                for &n in LAZY_SIZES {
                    let (p, q) = (data(n, 8), data(n, 9));
                    let mut dot = Vector::filled(1, -7.0f32);
                    MapReduce::new(times, plus).backend(B).run_into(&p, &q, &mut dot).unwrap();
                    let want = MapReduce::new(times, plus).backend(B).run(&p, &q).unwrap();
                    assert_eq!(dot[0].to_bits(), want.to_bits(), "dot n={n}");

                    // The result is an input of the next call where it was computed.
                    let mut rr = Vector::zeroed(1);
                    Reduce::new(plus).backend(B).run_into(&Map::new(cube).lazy(&p), &mut rr).unwrap();
                    let mut both = Vector::zeroed(1);
                    Map::new(plus).backend(B).run(&dot, &rr, &mut both).unwrap();
                    let r: f32 = (0..n).map(|i| cube::call(p[i])).sum();
                    assert_eq!(both[0], want + r, "dot + reduce n={n}");

                    let hits = MapReduce::new(unit_hit, add_u64).backend(B).run_index(n).unwrap();
                    let plain = (0..n).filter(|i| (i * 7919) % 13 < 5).count() as u64;
                    assert_eq!(hits, plain, "run_index n={n}");
                    let mut into = Vector::zeroed(1);
                    MapReduce::new(unit_hit, add_u64).start(5).backend(B).run_index_into(n, &mut into).unwrap();
                    assert_eq!(into[0], plain + 5, "run_index_into n={n}");
                }
                // A result container of another length, a lazy Map over inputs of two shapes,
                // and a lazy Map whose uniforms are not bound: typed errors, nothing written.
                let (p, q) = (data(4, 1), data(5, 1));
                let mut two = Vector::filled(2, 3.0f32);
                let err = MapReduce::new(times, plus).backend(B).run_into(&p, &p, &mut two).unwrap_err();
                assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
                let err = Reduce::new(plus).backend(B).run_into(&p, &mut two).unwrap_err();
                assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
                assert_eq!(two.to_vec(), vec![3.0, 3.0]);
                let bad = Map::new(plus).lazy(&p, &q);
                let mut out = Vector::filled(4, 1.0f32);
                let err = Map::new(halve).backend(B).run(&bad, &mut out).unwrap_err();
                assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
                let err = Reduce::new(plus).backend(B).run(&Map::new(affine).lazy(&p)).unwrap_err();
                assert!(err.to_string().contains("uniform"), "{err}");
                // A lazy input of the wrong length for its consumer.
                let err = Map::new(plus).backend(B).run(&Map::new(halve).lazy(&q), &p, &mut out).unwrap_err();
                assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
                assert_eq!(out.to_vec(), vec![1.0; 4]);
            }

            #[test]
            fn fused_folds_of_chains_with_index_arrays_and_uniforms() {
                if !available(B) {
                    return;
                }
                let w = data(5, 3);
                for &n in LAZY_SIZES {
                    let x = data(n, 11);
                    // A chain of two with #[index], a container argument and uniforms.
                    let inner = Map::new(shifted).arrays((&w,)).lazy(&x);
                    let outer = Map::new(affine).uniforms((0.5, -1.0)).lazy(&inner);
                    let mut mid = Vector::zeroed(n);
                    Map::new(shifted).arrays((&w,)).backend(B).run(&x, &mut mid).unwrap();
                    let mut mid2 = Vector::zeroed(n);
                    Map::new(affine).uniforms((0.5, -1.0)).backend(B).run(&mid, &mut mid2).unwrap();
                    for start in [0.0f32, 2.5] {
                        let got = Reduce::new(plus).start(start).backend(B).run(&outer).unwrap();
                        let want = Reduce::new(plus).start(start).backend(B).run(&mid2).unwrap();
                        assert_eq!(got.to_bits(), want.to_bits(), "Reduce of a chain, n={n}");
                        let mut into = Vector::filled(1, 9.0f32);
                        Reduce::new(plus).start(start).backend(B).run_into(&outer, &mut into).unwrap();
                        assert_eq!(into[0].to_bits(), want.to_bits(), "run_into of a chain, n={n}");
                    }
                    let got = Reduce::new(biggest).start(f32::MIN).backend(B).run(&outer).unwrap();
                    let want = Reduce::new(biggest).start(f32::MIN).backend(B).run(&mid2).unwrap();
                    assert_eq!(got.to_bits(), want.to_bits(), "max of a chain, n={n}");
                }
                // Rows and columns of a chain over a matrix, wide and narrow, and
                // MapReduce::run_rows / run_cols over a lazy input.
                for (rows, cols) in [(1, 1), (2, 3), (5, 17), (7, 64), (3, 257), (31, 31)] {
                    let m = Matrix::from_fn(rows, cols, |r, c| ((r * 13 + c * 5) % 23) as f32 * 0.25 - 2.0);
                    let a = Map::new(at_cell).lazy(&m);
                    let b = Map::new(halve).lazy(&a);
                    let mut mid = Matrix::zeroed(rows, cols);
                    Map::new(at_cell).backend(B).run(&m, &mut mid).unwrap();
                    let mut mid2 = Matrix::zeroed(rows, cols);
                    Map::new(halve).backend(B).run(&mid, &mut mid2).unwrap();
                    let (mut got, mut want) = (Vector::zeroed(rows), Vector::zeroed(rows));
                    Reduce::new(plus).backend(B).run_rows(&b, &mut got).unwrap();
                    Reduce::new(plus).backend(B).run_rows(&mid2, &mut want).unwrap();
                    assert_eq!(bits(&got), bits(&want), "rows of a chain {rows}x{cols}");
                    let (mut got, mut want) = (Vector::zeroed(cols), Vector::zeroed(cols));
                    Reduce::new(biggest).backend(B).run_cols(&b, &mut got).unwrap();
                    Reduce::new(biggest).backend(B).run_cols(&mid2, &mut want).unwrap();
                    assert_eq!(bits(&got), bits(&want), "cols of a chain {rows}x{cols}");
                    let (mut got, mut want) = (Vector::zeroed(rows), Vector::zeroed(rows));
                    MapReduce::new(times, plus).backend(B).run_rows(&a, &m, &mut got).unwrap();
                    let mut sq = Matrix::zeroed(rows, cols);
                    Map::new(times).backend(B).run(&mid, &m, &mut sq).unwrap();
                    Reduce::new(plus).backend(B).run_rows(&sq, &mut want).unwrap();
                    assert_eq!(bits(&got), bits(&want), "MapReduce rows of a lazy input {rows}x{cols}");
                    let plain: Vec<f32> = (0..rows)
                        .map(|r| (0..cols).map(|c| at_cell::call((r, c), m[(r, c)]) * m[(r, c)]).fold(None, |acc: Option<f32>, v| Some(acc.map_or(v, |a| a + v))).unwrap())
                        .collect();
                    for r in 0..rows {
                        let tol = 1e-4 * plain[r].abs().max(1.0);
                        assert!((got[r] - plain[r]).abs() <= tol, "row {r}: {} vs {}", got[r], plain[r]);
                    }
                }
                // Errors: a matrix fold of a lazy vector, an output of the wrong length.
                let v = data(6, 1);
                let mut out = Vector::filled(2, 4.0f32);
                let err = Reduce::new(plus).backend(B).run_rows(&Map::new(halve).lazy(&v), &mut out).unwrap_err();
                assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
                let m = Matrix::from_fn(3, 4, |r, c| (r + c) as f32);
                let err = MapReduce::new(halve, plus).backend(B).run_rows(&Map::new(halve).lazy(&m), &mut out).unwrap_err();
                assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
                assert_eq!(out.to_vec(), vec![4.0, 4.0]);
            }

            #[test]
            fn run_into_results_are_coherent_where_they_go_next() {
                if !available(B) {
                    return;
                }
                for &n in LAZY_SIZES {
                    let (p, q) = (data(n, 21), data(n, 22));
                    let want = MapReduce::new(times, plus).backend(B).run(&p, &q).unwrap();
                    let mut alpha = Vector::filled(1, 1.0f32);
                    // Written on the device (GPUs), read next as a container argument.
                    MapReduce::new(times, plus).backend(B).run_into(&p, &q, &mut alpha).unwrap();
                    let mut o = Vector::zeroed(n);
                    Map::new(shifted).arrays((&alpha,)).backend(B).run(&p, &mut o).unwrap();
                    let plain: Vec<f32> = (0..n).map(|i| p[i] - want).collect();
                    assert_eq!(o.to_vec(), plain, "Map after run_into, n={n}");
                    // Then read on the host.
                    assert_eq!(alpha[0].to_bits(), want.to_bits(), "host read, n={n}");
                    // A host write after it wins over the device copy.
                    alpha[0] = 3.0;
                    Map::new(shifted).arrays((&alpha,)).backend(B).run(&p, &mut o).unwrap();
                    let plain: Vec<f32> = (0..n).map(|i| p[i] - 3.0).collect();
                    assert_eq!(o.to_vec(), plain, "Map after a host write, n={n}");
                    // Written twice without a host read; the second result stands, also
                    // for a Reduce into the same container.
                    Reduce::new(plus).backend(B).run_into(&p, &mut alpha).unwrap();
                    Reduce::new(biggest).start(f32::MIN).backend(B).run_into(&q, &mut alpha).unwrap();
                    let m = Reduce::new(biggest).start(f32::MIN).backend(B).run(&q).unwrap();
                    assert_eq!(alpha[0].to_bits(), m.to_bits(), "second run_into, n={n}");
                }
            }

            proptest! {
                #![proptest_config(ProptestConfig::with_cases(24))]
                #[test]
                fn random_lazy_folds_match_materialising(
                    xs in proptest::collection::vec(-1000i32..1000, 1..600),
                    cols in 1usize..40,
                    len in 1usize..=4,
                ) {
                    if !available(B) {
                        return Ok(());
                    }
                    let rows = xs.len().div_ceil(cols);
                    let m = Matrix::from_fn(rows, cols, |r, c| xs[(r * cols + c) % xs.len()] as f32 * 0.125);
                    let x = Vector::from_fn(rows * cols, |i| m[(i / cols, i % cols)]);
                    let mid = chain_eager(B, &x, len);
                    let want = Reduce::new(plus).backend(B).run(&mid).unwrap();
                    let t1 = Map::new(halve).lazy(&x);
                    let t2 = Map::new(cube).lazy(&t1);
                    let got = if len == 1 {
                        Reduce::new(plus).backend(B).run(&t1).unwrap()
                    } else {
                        let t3 = Map::new(twist).lazy(&t2);
                        match len {
                            2 => Reduce::new(plus).backend(B).run(&t2).unwrap(),
                            3 => Reduce::new(plus).backend(B).run(&t3).unwrap(),
                            _ => Reduce::new(plus).backend(B).run(&Map::new(halve).lazy(&t3)).unwrap(),
                        }
                    };
                    prop_assert_eq!(got.to_bits(), want.to_bits());
                    let lz = Map::new(halve).lazy(&m);
                    let mut mh = Matrix::zeroed(rows, cols);
                    Map::new(halve).backend(B).run(&m, &mut mh).unwrap();
                    let (mut g, mut w) = (Vector::zeroed(rows), Vector::zeroed(rows));
                    Reduce::new(plus).backend(B).run_rows(&lz, &mut g).unwrap();
                    Reduce::new(plus).backend(B).run_rows(&mh, &mut w).unwrap();
                    prop_assert_eq!(bits(&g), bits(&w));
                    let (mut g, mut w) = (Vector::zeroed(cols), Vector::zeroed(cols));
                    Reduce::new(plus).backend(B).run_cols(&lz, &mut g).unwrap();
                    Reduce::new(plus).backend(B).run_cols(&mh, &mut w).unwrap();
                    prop_assert_eq!(bits(&g), bits(&w));
                }
            }

            proptest! {
                #![proptest_config(ProptestConfig::with_cases(24))]
                #[test]
                fn random_chains_match_materialising(
                    xs in proptest::collection::vec(-1000i32..1000, 0..3000),
                    len in 1usize..=4,
                ) {
                    if !available(B) {
                        return Ok(());
                    }
                    let x = Vector::from_fn(xs.len(), |i| xs[i] as f32 * 0.125);
                    let y = Vector::from_fn(xs.len(), |i| (i % 5) as f32);
                    let mid = chain_eager(B, &x, len);
                    let want = eager(B, &mid, |b, m, o| Map::new(plus).backend(b).run(m, &y, o).unwrap());
                    let (got, _) = chain_lazy(B, &x, &y, len);
                    prop_assert_eq!(bits(&got), bits(&want));
                }
            }
        }
    };
}

lazy_suite!(cpu, Backend::Cpu);
lazy_suite!(rayon, Backend::Rayon);
lazy_suite!(opencl, Backend::OpenCl);
lazy_suite!(cuda, Backend::Cuda);
