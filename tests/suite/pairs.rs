//! MapPairs, MapPairsReduce and whole-matrix Reduce, on the backend under test against the
//! `cpu` oracle and plain Rust: `pairs_suite!()` is expanded inside `backend_suite!`.

use skel::prelude::*;

use super::{Affine, Pixel};

/// Pair shapes `(v.len(), h.len())`: empty either way, one pair, primes, around the CUDA
/// tiles (32 x 32) and the fold stage (256), one row and one column, and more pairs than
/// the Rayon chunk (2^14).
pub const PAIR_SHAPES: &[(usize, usize)] = &[
    (0, 0),
    (0, 5),
    (5, 0),
    (1, 1),
    (2, 3),
    (7, 13),
    (31, 33),
    (33, 31),
    (1, 1000),
    (1000, 1),
    (97, 101),
    (257, 3),
    (3, 257),
    (300, 129),
];

#[userfn]
pub fn dist(p: f32, q: f32) -> f32 {
    (p - q).abs()
}

/// Rounds differently if `p * q + p` were contracted into an fma.
#[userfn]
pub fn mul_add_pair(p: f32, q: f32) -> f32 {
    p * q + p
}

/// Different element types, a 2D index and uniforms.
#[userfn]
pub fn pair_tag(
    #[index] (row, col): (usize, usize),
    p: i64,
    q: i32,
    #[uniform] k: i64,
    #[uniform] bias: i32,
) -> i64 {
    k * p - (q + bias) as i64 + (row * 1000 + col) as i64
}

/// A 1D index: the pair's flat position in the matrix of pairs.
#[userfn]
pub fn pair_flat(#[index] i: usize, p: i64, q: i64) -> i64 {
    p * 3 + q + i as i64
}

#[userfn]
pub fn shade(p: Pixel, w: f32) -> Pixel {
    Pixel {
        r: p.r * w,
        g: p.g + w,
        b: p.b - w,
    }
}

#[userfn]
pub fn diff_i64(p: i64, q: i64) -> i64 {
    p - q
}

/// Pairs as affine maps, folded with the non-commutative `affine_compose`.
#[userfn]
pub fn pair_affine(p: i64, q: i64) -> Affine {
    let m = if (p + q) % 3 == 0 { -1 } else { 1 };
    Affine { m, c: p - 2 * q }
}

/// A pair weighted by two cells of a `Mat`: the pair's own `(i, j)` and the one below it,
/// which is outside a `Mat` of as many rows as pairs.
#[userfn]
pub fn pair_two_rows(#[index] (i, j): (usize, usize), p: f32, q: f32, w: Mat<f32>) -> f32 {
    p * (w[(i + 1, j)] + w[(i, j)]) + q
}

/// The plain-Rust matrix of `f(v[i], h[j])`.
pub fn pairs_of<A: Copy, B: Copy, R>(
    v: &[A],
    h: &[B],
    f: impl Fn(usize, usize, A, B) -> R,
) -> Vec<R> {
    v.iter()
        .enumerate()
        .flat_map(|(i, &p)| h.iter().enumerate().map(move |(j, &q)| (i, j, p, q)))
        .map(|(i, j, p, q)| f(i, j, p, q))
        .collect()
}

#[macro_export]
macro_rules! pairs_suite {
    () => {
        mod pairs {
            use super::*;
            use $crate::suite::pairs::*;

            #[test]
            fn map_pairs_every_shape() {
                require!();
                for &(rows, cols) in PAIR_SHAPES {
                    let (hv, hh) = (ints_f32(rows, 1), ints_f32(cols, 2));
                    let (v, h) = (Vector::from(hv.clone()), Vector::from(hh.clone()));
                    let mut m = Matrix::filled(rows, cols, f32::NAN);
                    MapPairs::new(dist).backend(B).run(&v, &h, &mut m).unwrap();
                    assert_eq!(m.to_vec(), pairs_of(&hv, &hh, |_, _, p, q| (p - q).abs()), "{rows}x{cols}");

                    let v = Vector::from_fn(rows, |i| (i as f32 * 0.37).sin());
                    let h = Vector::from_fn(cols, |j| (j as f32 * 0.11).cos());
                    let mut oracle = Matrix::zeroed(rows, cols);
                    MapPairs::new(mul_add_pair).backend(B).run(&v, &h, &mut m).unwrap();
                    MapPairs::new(mul_add_pair).backend(Backend::Cpu).run(&v, &h, &mut oracle).unwrap();
                    let bits = |x: &Matrix<f32>| x.as_slice().iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&m), bits(&oracle), "bit-identical to cpu, {rows}x{cols}");
                }
            }

            #[test]
            fn map_pairs_index_uniforms_and_structs() {
                require!();
                for &(rows, cols) in PAIR_SHAPES {
                    let hv = ints_i64(rows, 3);
                    let hh: Vec<i32> = (0..cols).map(|j| (j as i32 * 7) % 23 - 11).collect();
                    let (v, h) = (Vector::from(hv.clone()), Vector::from(hh.clone()));
                    let mut m = Matrix::filled(rows, cols, -1i64);
                    MapPairs::new(pair_tag).uniforms((3, 5)).backend(B).run(&v, &h, &mut m).unwrap();
                    let want = pairs_of(&hv, &hh, |i, j, p, q| 3 * p - (q + 5) as i64 + (i * 1000 + j) as i64);
                    assert_eq!(m.to_vec(), want, "index and uniforms, {rows}x{cols}");

                    let hh = ints_i64(cols, 4);
                    let h = Vector::from(hh.clone());
                    MapPairs::new(pair_flat).backend(B).run(&v, &h, &mut m).unwrap();
                    let want = pairs_of(&hv, &hh, |i, j, p, q| p * 3 + q + (i * cols + j) as i64);
                    assert_eq!(m.to_vec(), want, "flat index, {rows}x{cols}");

                    let px = Vector::from_fn(rows, |i| Pixel { r: (i % 7) as f32, g: (i % 5) as f32 - 2.0, b: 0.5 });
                    let w = Vector::from_fn(cols, |j| (j % 9) as f32 * 0.25);
                    let (mut got, mut oracle) = (Matrix::zeroed(rows, cols), Matrix::zeroed(rows, cols));
                    MapPairs::new(shade).backend(B).run(&px, &w, &mut got).unwrap();
                    MapPairs::new(shade).backend(Backend::Cpu).run(&px, &w, &mut oracle).unwrap();
                    assert_eq!(got, oracle, "struct elements, {rows}x{cols}");
                }
            }

            #[test]
            fn map_pairs_and_reduce_read_views() {
                require!();
                let v = Vector::from(ints_i64(200, 5));
                let h = Vector::from(ints_i64(300, 6));
                let (vv, hv) = (v.view(17..150), h.view(3..290));
                let (rows, cols) = (133, 287);
                let mut m = Matrix::filled(rows, cols, 0i64);
                MapPairs::new(diff_i64).backend(B).run(&vv, &hv, &mut m).unwrap();
                for i in [0, 1, 66, rows - 1] {
                    for j in [0, 2, 100, cols - 1] {
                        assert_eq!(m[(i, j)], v[17 + i] - h[3 + j], "({i}, {j})");
                    }
                }
                let mut per = Vector::filled(400, 9i64);
                MapPairsReduce::new(diff_i64, add_i64).backend(B).run_rows(&vv, &hv, &mut per.view_mut(10..10 + rows)).unwrap();
                for i in 0..rows {
                    let want: i64 = (0..cols).map(|j| v[17 + i] - h[3 + j]).sum();
                    assert_eq!(per[10 + i], want, "row {i}");
                }
                MapPairsReduce::new(diff_i64, add_i64).backend(B).run_cols(&vv, &hv, &mut per.view_mut(100..100 + cols)).unwrap();
                for j in 0..cols {
                    let want: i64 = (0..rows).map(|i| v[17 + i] - h[3 + j]).sum();
                    assert_eq!(per[100 + j], want, "column {j}");
                }
                assert!(per.as_slice()[..10].iter().chain(&per.as_slice()[387..]).all(|&x| x == 9));
            }

            #[test]
            fn map_pairs_reduce_rows_and_cols_keep_the_order() {
                require!();
                // Also long folds over few results (the GPU backends split those into
                // segments, rayon folds few columns in blocks of rows while the next block
                // is mapped: one block, several, a last one of one row) and many short ones.
                let shapes = PAIR_SHAPES.iter().copied().chain([(3, 5000), (5000, 3), (2, 70_001), (61_953, 17), (70_001, 3), (65_537, 2)]);
                for (rows, cols) in shapes {
                    let (hv, hh) = (ints_i64(rows, 7), ints_i64(cols, 8));
                    let (v, h) = (Vector::from(hv.clone()), Vector::from(hh.clone()));
                    let mut per_v = Vector::filled(rows, 0i64);
                    let mut per_h = Vector::filled(cols, 0i64);
                    let mpr = MapPairsReduce::new(diff_i64, add_i64).backend(B);
                    let (rows_ok, cols_ok) = (mpr.run_rows(&v, &h, &mut per_v), mpr.run_cols(&v, &h, &mut per_h));
                    // A fold over no pairs has no value.
                    assert_eq!(rows_ok.is_ok(), rows == 0 || cols > 0, "{rows}x{cols}");
                    assert_eq!(cols_ok.is_ok(), cols == 0 || rows > 0, "{rows}x{cols}");
                    if rows_ok.is_ok() {
                        let want: Vec<i64> = hv.iter().map(|p| hh.iter().map(|q| p - q).sum()).collect();
                        assert_eq!(per_v.to_vec(), want, "rows {rows}x{cols}");
                    }
                    if cols_ok.is_ok() {
                        let want: Vec<i64> = hh.iter().map(|q| hv.iter().map(|p| p - q).sum()).collect();
                        assert_eq!(per_h.to_vec(), want, "cols {rows}x{cols}");
                    }
                    if rows == 0 || cols == 0 {
                        continue;
                    }
                    let s = MapPairsReduce::new(pair_affine, affine_compose);
                    let (mut got, mut oracle) = (Vector::zeroed(rows), Vector::zeroed(rows));
                    s.backend(B).run_rows(&v, &h, &mut got).unwrap();
                    s.backend(Backend::Cpu).run_rows(&v, &h, &mut oracle).unwrap();
                    assert_eq!(got, oracle, "non-commutative rows {rows}x{cols}");
                    let (mut got, mut oracle) = (Vector::zeroed(cols), Vector::zeroed(cols));
                    s.backend(B).run_cols(&v, &h, &mut got).unwrap();
                    s.backend(Backend::Cpu).run_cols(&v, &h, &mut oracle).unwrap();
                    assert_eq!(got, oracle, "non-commutative cols {rows}x{cols}");
                }
                // The oracle itself against a plain in-order fold.
                let (v, h) = (Vector::from(ints_i64(4, 1)), Vector::from(ints_i64(6, 2)));
                let mut per = Vector::zeroed(4);
                MapPairsReduce::new(pair_affine, affine_compose).backend(Backend::Cpu).run_rows(&v, &h, &mut per).unwrap();
                let compose = |a: Affine, b: Affine| Affine { m: a.m * b.m, c: a.c * b.m + b.c };
                for i in 0..4 {
                    let mut pairs = (0..6).map(|j| pair_affine::call(v[i], h[j]));
                    let first = pairs.next().unwrap();
                    assert_eq!(per[i], pairs.fold(first, compose));
                }
            }

            #[test]
            fn map_pairs_reduce_f32_keeps_the_order_on_many_threads() {
                require!();
                // f32 sums (not associative) on pools of 1 to 17 threads; from 3 threads on,
                // rayon pipelines `run_cols` over more than 16384 pairs (blocks of rows
                // mapped on all threads while the last one is folded, four columns per fold
                // task): column counts below, at and above a task's, primes, several blocks
                // (61_953 x 17: 3 blocks, the last of one row; 314_881 x 5: 4 blocks, the
                // last of one row; 150_001 x 9: 3 blocks folded in tasks of 4 + 4 + 1
                // columns), and few long rows for `run_rows`. The host backends give the
                // bits of the in-order fold of `cpu`; the device backends may regroup long
                // folds (up to 314_881 terms: within a relative 1e-3 here).
                let host = matches!(B, Backend::Cpu | Backend::Rayon);
                let shapes = [
                    (16_411, 13),
                    (61_953, 17),
                    (31_013, 5),
                    (40_961, 4),
                    (24_593, 1),
                    (314_881, 5),
                    (150_001, 9),
                    (7, 70_001),
                ];
                for threads in [1, 2, 3, 7, 17] {
                    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                    pool.install(|| {
                        for (rows, cols) in shapes {
                            let v = Vector::from_fn(rows, |i| ((i * 37) % 101) as f32 * 0.013 - 0.6);
                            let h = Vector::from_fn(cols, |j| ((j * 11) % 23) as f32 * 0.07 + 0.3);
                            let s = MapPairsReduce::new(mul_add_pair, add_f32);
                            for cols_wise in [true, false] {
                                let n = if cols_wise { cols } else { rows };
                                let (mut got, mut oracle) = (Vector::filled(n, f32::NAN), Vector::filled(n, f32::NAN));
                                if cols_wise {
                                    s.backend(B).run_cols(&v, &h, &mut got).unwrap();
                                    s.backend(Backend::Cpu).run_cols(&v, &h, &mut oracle).unwrap();
                                } else {
                                    s.backend(B).run_rows(&v, &h, &mut got).unwrap();
                                    s.backend(Backend::Cpu).run_rows(&v, &h, &mut oracle).unwrap();
                                }
                                let what = format!("{rows}x{cols} cols={cols_wise} on {threads} threads");
                                for (k, (g, o)) in got.to_vec().into_iter().zip(oracle.to_vec()).enumerate() {
                                    if host {
                                        assert_eq!(g.to_bits(), o.to_bits(), "{what}: result {k}: {g} != {o}");
                                    } else {
                                        assert!((g - o).abs() <= 1e-3 * o.abs().max(1.0), "{what}: result {k}: {g} vs {o}");
                                    }
                                }
                            }
                        }
                    });
                }
                // The oracle against a plain in-order fold.
                let (v, h) = (Vector::from_fn(300, |i| i as f32 * 0.37 - 5.0), Vector::from(vec![0.1f32, 3.0]));
                let mut per = Vector::zeroed(2);
                MapPairsReduce::new(mul_add_pair, add_f32).backend(Backend::Cpu).run_cols(&v, &h, &mut per).unwrap();
                for j in 0..2 {
                    let mut pairs = (0..300).map(|i| mul_add_pair::call(v[i], h[j]));
                    let first = pairs.next().unwrap();
                    assert_eq!(per[j].to_bits(), pairs.fold(first, |a, b| a + b).to_bits());
                }
            }

            #[test]
            fn map_pairs_reduce_cols_reads_a_mat_on_three_threads() {
                require!();
                // Rayon maps a band of pairs without the check of a read at the pair's own
                // cell where the band's last cell is inside the `Mat`; a read at a later
                // cell (the row below) stays checked. The pipeline is rayon's (the device
                // backends' checks are in checked.rs), so the host backends only.
                if !matches!(B, Backend::Cpu | Backend::Rayon) {
                    return;
                }
                let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
                pool.install(|| {
                    for (rows, cols) in [(61_953, 17), (150_001, 9), (40_961, 4)] {
                        let v = Vector::from_fn(rows, |i| ((i * 37) % 101) as f32 * 0.013 - 0.6);
                        let h = Vector::from_fn(cols, |j| ((j * 11) % 23) as f32 * 0.07 + 0.3);
                        let mat = |r: usize, c: usize| Matrix::from_fn(r, c, |i, j| ((i * 7 + j) % 31) as f32 * 0.1 - 1.0);
                        let run = |be: Backend, w: &Matrix<f32>, out: &mut Vector<f32>| {
                            MapPairsReduce::new(pair_two_rows, add_f32).arrays((w,)).backend(be).checked(true).run_cols(&v, &h, out)
                        };
                        let w = mat(rows + 1, cols);
                        let (mut got, mut oracle) = (Vector::filled(cols, f32::NAN), Vector::filled(cols, f32::NAN));
                        run(B, &w, &mut got).unwrap();
                        run(Backend::Cpu, &w, &mut oracle).unwrap();
                        let bits = |x: &Vector<f32>| x.to_vec().iter().map(|g| g.to_bits()).collect::<Vec<_>>();
                        assert_eq!(bits(&got), bits(&oracle), "{rows}x{cols}");
                        // The last row's read below, and the last column's reads: Err, `out`
                        // as it was.
                        for (r, c) in [(rows, cols), (rows, cols - 1), (rows + 1, cols - 1)] {
                            let w = mat(r, c);
                            let mut out = Vector::filled(cols, 7.0f32);
                            let err = run(B, &w, &mut out).unwrap_err();
                            let want = run(Backend::Cpu, &w, &mut Vector::filled(cols, 7.0f32)).unwrap_err();
                            assert!(matches!(err, Error::UserFunction { .. }), "{rows}x{cols}, w {r}x{c}: {err}");
                            assert_eq!(err.to_string(), want.to_string(), "{rows}x{cols}, w {r}x{c}");
                            assert_eq!(out.to_vec(), vec![7.0; cols], "{rows}x{cols}, w {r}x{c}");
                        }
                    }
                });
            }

            #[test]
            fn map_pairs_reduce_index_and_uniforms() {
                require!();
                let shapes = PAIR_SHAPES.iter().copied().chain([(40_000, 17)]);
                for (rows, cols) in shapes.filter(|s| s.0 > 0 && s.1 > 0) {
                    let v = Vector::from(ints_i64(rows, 9));
                    let h = Vector::from_fn(cols, |j| (j as i32 * 5) % 17 - 8);
                    let s = MapPairsReduce::new(pair_tag, add_i64).uniforms((-2, 1));
                    for cols_wise in [false, true] {
                        let n = if cols_wise { cols } else { rows };
                        let (mut got, mut oracle) = (Vector::zeroed(n), Vector::zeroed(n));
                        if cols_wise {
                            s.backend(B).run_cols(&v, &h, &mut got).unwrap();
                            s.backend(Backend::Cpu).run_cols(&v, &h, &mut oracle).unwrap();
                        } else {
                            s.backend(B).run_rows(&v, &h, &mut got).unwrap();
                            s.backend(Backend::Cpu).run_rows(&v, &h, &mut oracle).unwrap();
                        }
                        assert_eq!(got, oracle, "{rows}x{cols} cols={cols_wise}");
                    }
                }
                // The oracle against plain Rust.
                let (v, h) = (Vector::from(vec![1i64, 2]), Vector::from(vec![10i32, 20, 30]));
                let mut per = Vector::zeroed(2);
                MapPairsReduce::new(pair_tag, add_i64).uniforms((-2, 1)).backend(Backend::Cpu).run_rows(&v, &h, &mut per).unwrap();
                let tag = |i: usize, j: usize| -2 * v[i] - (h[j] + 1) as i64 + (i * 1000 + j) as i64;
                assert_eq!(per.to_vec(), vec![(0..3).map(|j| tag(0, j)).sum::<i64>(), (0..3).map(|j| tag(1, j)).sum()]);
            }

            #[test]
            fn whole_matrix_reduce_is_row_major() {
                require!();
                for (rows, cols) in [(0, 3), (3, 0), (1, 1), (2, 3), (17, 13), (300, 301), (1, 70_001)] {
                    let m = Matrix::from_vec(rows, cols, ints_i64(rows * cols, 15)).unwrap();
                    let sum: i64 = m.as_slice().iter().sum();
                    assert_eq!(Reduce::new(add_i64).start(4).backend(B).run(&m).unwrap(), sum + 4, "{rows}x{cols}");
                    let fs = Matrix::from_fn(rows, cols, |r, c| Affine { m: if (r + c) % 4 == 0 { -1 } else { 1 }, c: (r * 7 + c) as i64 % 13 });
                    let id = Affine { m: 1, c: 0 };
                    let got = Reduce::new(affine_compose).start(id).backend(B).run(&fs).unwrap();
                    let compose = |a: Affine, b: Affine| Affine { m: a.m * b.m, c: a.c * b.m + b.c };
                    let want = fs.as_slice().iter().copied().fold(id, compose);
                    assert_eq!(got, want, "row-major order, {rows}x{cols}");
                }
            }

            #[test]
            fn pair_shape_errors_leave_the_output_untouched() {
                require!();
                let v = Vector::from(vec![1i64, 2, 3]);
                let h = Vector::from(vec![1i64, 2]);
                let mut wrong = Matrix::filled(2, 3, 7i64);
                let err = MapPairs::new(diff_i64).backend(B).run(&v, &h, &mut wrong).unwrap_err();
                assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
                assert!(err.to_string().contains("3x2 matrix") && err.to_string().contains("2x3 matrix"), "{err}");
                assert_eq!(wrong.to_vec(), vec![7; 6]);

                let m = Matrix::from_vec(1, 3, vec![1i64, 2, 3]).unwrap();
                let mut out = Matrix::filled(1, 2, 7i64);
                let err = MapPairs::new(diff_i64).backend(B).run(&m, &h, &mut out).unwrap_err();
                assert!(matches!(err, Error::ShapeMismatch { .. }) && err.to_string().contains("a vector"), "{err}");
                let err = MapPairs::new(diff_i64).backend(B).run(&h, &m, &mut out).unwrap_err();
                assert!(err.to_string().contains("h") && err.to_string().contains("1x3 matrix"), "{err}");

                let mut per = Vector::filled(2, 7i64);
                let s = MapPairsReduce::new(diff_i64, add_i64).backend(B);
                let err = s.run_rows(&v, &h, &mut per).unwrap_err();
                assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
                assert!(err.to_string().contains("vector of 3") && err.to_string().contains("vector of 2"), "{err}");
                let mut per3 = Vector::filled(3, 7i64);
                let err = s.run_cols(&v, &h, &mut per3).unwrap_err();
                assert!(err.to_string().contains("vector of 2") && err.to_string().contains("vector of 3"), "{err}");
                let empty = Vector::<i64>::zeroed(0);
                let err = s.run_rows(&v, &empty, &mut per3).unwrap_err();
                assert!(matches!(err, Error::InvalidArgument(_)) && err.to_string().contains("3x0"), "{err}");
                let mut out = Matrix::filled(3, 2, 7i64);
                let err = MapPairs::new(pair_tag).backend(B).run(&v, &Vector::from(vec![1i32, 2]), &mut out).unwrap_err();
                assert!(err.to_string().contains(".uniforms"), "{err}");
                let err = MapPairs::new(diff_i64).backend(B).streams(0).run(&v, &h, &mut out).unwrap_err();
                assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
                assert_eq!((per.to_vec(), per3.to_vec(), out.to_vec()), (vec![7; 2], vec![7; 3], vec![7; 6]));
                assert_eq!((v.to_vec(), h.to_vec()), (vec![1, 2, 3], vec![1, 2]));
            }

            #[test]
            fn pairs_over_one_to_sixteen_streams() {
                require!();
                let device = matches!(B, Backend::Cuda | Backend::OpenCl);
                for (rows, cols) in [(1, 7), (13, 5), (37, 41), (300, 33)] {
                    let (hv, hh) = (ints_i64(rows, 11), ints_i64(cols, 12));
                    let want = pairs_of(&hv, &hh, |_, _, p, q| p - q);
                    let per_v: Vec<i64> = hv.iter().map(|p| hh.iter().map(|q| p - q).sum()).collect();
                    let per_h: Vec<i64> = hh.iter().map(|q| hv.iter().map(|p| p - q).sum()).collect();
                    for k in 1..=16 {
                        let download = [None, Some(true), Some(false)][k % 3];
                        let opts = |s: MapPairs<diff_i64>| match download {
                            Some(d) => s.backend(B).streams(k).download(d),
                            None => s.backend(B).streams(k),
                        };
                        let (v, h) = (Vector::from(hv.clone()), Vector::from(hh.clone()));
                        let mut m = Matrix::filled(rows, cols, 0i64);
                        opts(MapPairs::new(diff_i64)).run(&v, &h, &mut m).unwrap();
                        assert_eq!(m.to_vec(), want, "{rows}x{cols} k={k} {download:?}");
                        if device {
                            let up = |x: &Vector<i64>| skel::debug::transfers(x).up;
                            assert_eq!((up(&v), up(&h)), ((rows * 8) as u64, (cols * 8) as u64), "each input up once, k={k}");
                        }
                        let (mut pv, mut ph) = (Vector::zeroed(rows), Vector::zeroed(cols));
                        let s = MapPairsReduce::new(diff_i64, add_i64).backend(B).streams(k);
                        s.run_rows(&v, &h, &mut pv).unwrap();
                        s.run_cols(&v, &h, &mut ph).unwrap();
                        assert_eq!((pv.to_vec(), ph.to_vec()), (per_v.clone(), per_h.clone()), "{rows}x{cols} k={k}");
                    }
                }
            }

            proptest::proptest! {
                #![proptest_config(proptest::prelude::ProptestConfig { cases: 32, ..Default::default() })]

                #[test]
                fn prop_pairs_match_the_oracle(
                    hv in proptest::collection::vec(-1000i64..1000, 0..70),
                    hh in proptest::collection::vec(-1000i64..1000, 0..70),
                    from in 0usize..5,
                ) {
                    if !available(B) {
                        return Ok(());
                    }
                    let (v, h) = (Vector::from(hv.clone()), Vector::from(hh.clone()));
                    let vv = v.view(from.min(hv.len())..hv.len());
                    let (rows, cols) = (hv.len() - from.min(hv.len()), hh.len());
                    let cpu = Backend::Cpu;
                    let (mut got, mut want) = (Matrix::zeroed(rows, cols), Matrix::zeroed(rows, cols));
                    MapPairs::new(pair_flat).backend(B).run(&vv, &h, &mut got).unwrap();
                    MapPairs::new(pair_flat).backend(cpu).run(&vv, &h, &mut want).unwrap();
                    proptest::prop_assert_eq!(&got, &want);
                    let s = MapPairsReduce::new(pair_affine, affine_compose);
                    let (mut got, mut want) = (Vector::zeroed(rows), Vector::zeroed(rows));
                    let (a, b) = (s.backend(B).run_rows(&vv, &h, &mut got), s.backend(cpu).run_rows(&vv, &h, &mut want));
                    proptest::prop_assert_eq!(a.is_ok(), b.is_ok());
                    proptest::prop_assert_eq!(&got, &want);
                    let (mut got, mut want) = (Vector::zeroed(cols), Vector::zeroed(cols));
                    let (a, b) = (s.backend(B).run_cols(&vv, &h, &mut got), s.backend(cpu).run_cols(&vv, &h, &mut want));
                    proptest::prop_assert_eq!(a.is_ok(), b.is_ok());
                    proptest::prop_assert_eq!(&got, &want);
                }
            }
        }
    };
}
