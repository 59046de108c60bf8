//! Multi-output Map (a tuple result written into a tuple of `&mut` containers or views) and
//! container arguments (`Mat<T>` / `&[T]` parameters bound with `.arrays(..)` on Map and
//! MapReduce), on the backend under test against the `cpu` oracle and plain Rust:
//! `args_suite!()` is expanded inside `backend_suite!`.

use skel::prelude::*;

/// Straight-line (the memory-bound launch form on CUDA), exactly rounded operations only,
/// so every backend gives the `cpu` backend's bits.
#[userfn]
pub fn polar_exact(x: f32, y: f32) -> (f32, f32) {
    ((x * x + y * y).sqrt(), x * y - x)
}

/// Three outputs of three types, an index and a uniform.
#[userfn]
pub fn split3(#[index] i: usize, a: i32, #[uniform] k: i32) -> (i32, u32, f32) {
    (a * k + i as i32, (a as u32) ^ (i as u32), a as f32 * 0.5)
}

/// Four one-byte outputs: the bytes of a word.
#[userfn]
pub fn bytes4(w: u32) -> (u8, u8, u8, u8) {
    (w as u8, (w >> 8) as u8, (w >> 16) as u8, (w >> 24) as u8)
}

/// A loop whose trip count differs per element (the compute-bound launch form).
#[userfn]
pub fn collatz2(x: u32) -> (u32, u32) {
    let mut v = x;
    let mut steps = 0u32;
    let mut peak = x;
    while v > 1 && steps < 500 {
        v = if v % 2 == 0 { v / 2 } else { 3 * v + 1 };
        peak = peak.max(v);
        steps += 1;
    }
    (steps, peak)
}

/// A 2D index map with two outputs.
#[userfn]
pub fn rowcol(#[index] (row, col): (usize, usize)) -> (u32, u32) {
    (row as u32, col as u32)
}

/// Matrix-vector product, the API's form: every element reads a row of `m` and all of `x`.
#[userfn]
pub fn mv(#[index] i: usize, m: Mat<f32>, x: &[f32]) -> f32 {
    let mut s = 0.0;
    for j in 0..m.cols() {
        s += m[(i, j)] * x[j];
    }
    s
}

/// Two `&[T]` containers around an element, one read through its length, and a uniform.
#[userfn]
pub fn pick(x: u32, a: &[i64], b: &[i64], #[uniform] k: i64) -> i64 {
    let j = x as usize;
    a[j % a.len()] * k - b[j % 7]
}

/// A transpose through a 2D index (the 2D launch forms) reading a `Mat<T>`.
#[userfn]
pub fn transpose(#[index] (r, c): (usize, usize), m: Mat<u32>) -> u32 {
    m[(c, r)] + (m.rows() * 1000 + m.cols()) as u32
}

/// Multi-output with a container: the minimum and maximum of row `i`.
#[userfn]
pub fn row_range(#[index] i: usize, m: Mat<i32>) -> (i32, i32) {
    let mut lo = i32::MAX;
    let mut hi = i32::MIN;
    for j in 0..m.cols() {
        lo = lo.min(m[(i, j)]);
        hi = hi.max(m[(i, j)]);
    }
    (lo, hi)
}

/// A weighted_by element for MapReduce.
#[userfn]
pub fn weighted_by(#[index] i: usize, x: i64, w: &[i64]) -> i64 {
    x * w[i % w.len()]
}

#[userfn]
pub fn add_i64s(a: i64, b: i64) -> i64 {
    a + b
}

/// A pair function reading a matrix and a vector container, with a 2D index.
#[userfn]
pub fn pair_cost(#[index] (r, c): (usize, usize), p: u32, q: u32, t: Mat<i64>, w: &[i64]) -> i64 {
    t[(p as usize % t.rows(), q as usize % t.cols())] * w[(r + 2 * c) % w.len()]
}

pub fn words(n: usize, seed: u32) -> Vec<u32> {
    (0..n as u32)
        .map(|i| i.wrapping_mul(2_654_435_761).wrapping_add(seed))
        .collect()
}

pub fn bits(v: &Vector<f32>) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[macro_export]
macro_rules! args_suite {
    () => {
        mod args {
            use super::*;
            use $crate::suite::args::*;

            #[test]
            fn multi_output_two_to_four_outputs_all_sizes() {
                require!();
                for &n in SIZES {
                    let x = Vector::from_fn(n, |i| (i as f32 * 0.37).sin());
                    let y = Vector::from_fn(n, |i| (i as f32 * 0.11).cos());
                    let (mut r, mut t) = (Vector::filled(n, f32::NAN), Vector::filled(n, f32::NAN));
                    Map::new(polar_exact).backend(B).run(&x, &y, &mut (&mut r, &mut t)).unwrap();
                    let (mut wr, mut wt) = (Vector::zeroed(n), Vector::zeroed(n));
                    Map::new(polar_exact).backend(Backend::Cpu).run(&x, &y, &mut (&mut wr, &mut wt)).unwrap();
                    assert_eq!((bits(&r), bits(&t)), (bits(&wr), bits(&wt)), "polar n={n}");
                    let plain: Vec<(f32, f32)> = (0..n).map(|i| polar_exact::call(x[i], y[i])).collect();
                    assert!(plain.iter().enumerate().all(|(i, p)| p.0.to_bits() == wr[i].to_bits() && p.1.to_bits() == wt[i].to_bits()), "cpu n={n}");
                    // The whole tuple in one container is still one output.
                    let mut pairs = Vector::filled(n, (f32::NAN, f32::NAN));
                    Map::new(polar_exact).backend(B).run(&x, &y, &mut pairs).unwrap();
                    assert!(pairs.iter().enumerate().all(|(i, p)| p.0.to_bits() == wr[i].to_bits() && p.1.to_bits() == wt[i].to_bits()), "tuple vector n={n}");

                    let a = Vector::from_fn(n, |i| (i as i32 * 7919) % 1001 - 500);
                    let (mut o0, mut o1, mut o2) = (Vector::filled(n, -1), Vector::filled(n, 7), Vector::filled(n, f32::NAN));
                    Map::new(split3).uniforms((3,)).backend(B).run(&a, &mut (&mut o0, &mut o1, &mut o2)).unwrap();
                    for i in 0..n {
                        let want = (a[i] * 3 + i as i32, (a[i] as u32) ^ (i as u32), a[i] as f32 * 0.5);
                        assert_eq!((o0[i], o1[i], o2[i]), want, "split3 n={n} i={i}");
                    }

                    let w = Vector::from(words(n, 17));
                    let mut bs: Vec<Vector<u8>> = (0..4).map(|_| Vector::filled(n, 0xAA)).collect();
                    let [b0, b1, b2, b3] = &mut bs[..] else { unreachable!() };
                    Map::new(bytes4).backend(B).run(&w, &mut (b0, b1, b2, b3)).unwrap();
                    for (k, b) in bs.iter().enumerate() {
                        let want: Vec<u8> = w.iter().map(|x| x.to_le_bytes()[k]).collect();
                        assert_eq!(b.to_vec(), want, "bytes4 output {k} n={n}");
                    }
                }
            }

            #[test]
            fn multi_output_loops_views_and_2d_indices() {
                require!();
                for &n in SIZES.iter().filter(|&&n| n <= 20_000) {
                    let x = Vector::from_fn(n, |i| (i as u32 * 7919) % 10_000);
                    let (mut s, mut p) = (Vector::filled(n, u32::MAX), Vector::filled(n, u32::MAX));
                    Map::new(collatz2).backend(B).run(&x, &mut (&mut s, &mut p)).unwrap();
                    let want: Vec<(u32, u32)> = x.iter().map(|&v| collatz2::call(v)).collect();
                    let got: Vec<(u32, u32)> = s.iter().copied().zip(p.iter().copied()).collect();
                    assert_eq!(got, want, "collatz2 n={n}");

                    // Views at different offsets of bigger containers: only the ranges change.
                    let (mut big0, mut big1) = (Vector::filled(n + 9, 1u32), Vector::filled(n + 4, 2u32));
                    Map::new(collatz2)
                        .backend(B)
                        .run(&x, &mut (&mut big0.view_mut(5..n + 5), &mut big1.view_mut(3..n + 3)))
                        .unwrap();
                    assert_eq!(&big0.as_slice()[5..n + 5], s.as_slice(), "view 0 n={n}");
                    assert_eq!(&big1.as_slice()[3..n + 3], p.as_slice(), "view 1 n={n}");
                    assert!(big0.as_slice()[..5].iter().chain(&big0.as_slice()[n + 5..]).all(|&v| v == 1));
                    assert!(big1.as_slice()[..3].iter().chain(&big1.as_slice()[n + 3..]).all(|&v| v == 2));
                }
                for (rows, cols) in [(0, 0), (1, 1), (3, 5), (17, 13), (130, 129), (1, 300), (300, 1)] {
                    let (mut r, mut c) = (Matrix::filled(rows, cols, u32::MAX), Matrix::filled(rows, cols, u32::MAX));
                    Map::new(rowcol).backend(B).run_index(&mut (&mut r, &mut c)).unwrap();
                    for i in 0..rows {
                        for j in 0..cols {
                            assert_eq!((r[(i, j)], c[(i, j)]), (i as u32, j as u32), "{rows}x{cols}");
                        }
                    }
                }
            }

            #[test]
            fn multi_output_results_chain_on_the_device_and_host_writes_win() {
                require!();
                let n = 40_000;
                let x = Vector::from_fn(n, |i| (i % 97) as f32 - 48.0);
                let y = Vector::from_fn(n, |i| (i % 13) as f32);
                let (mut r, mut t) = (Vector::zeroed(n), Vector::zeroed(n));
                Map::new(polar_exact).backend(B).run(&x, &y, &mut (&mut r, &mut t)).unwrap();
                // Both outputs feed the next call without a host read in between.
                let mut sum = Vector::zeroed(n);
                Map::new(add_f32).backend(B).run(&r, &t, &mut sum).unwrap();
                // A host write to one output invalidates its device copy.
                t[7] = 1000.0;
                let mut sum2 = Vector::zeroed(n);
                Map::new(add_f32).backend(B).run(&r, &t, &mut sum2).unwrap();
                for i in 0..n {
                    let (pr, pt) = polar_exact::call(x[i], y[i]);
                    assert_eq!(sum[i].to_bits(), (pr + pt).to_bits(), "i={i}");
                    let pt = if i == 7 { 1000.0 } else { pt };
                    assert_eq!(sum2[i].to_bits(), (pr + pt).to_bits(), "after host write, i={i}");
                }
            }

            #[test]
            fn multi_output_shape_mismatch_is_an_error_and_writes_nothing() {
                require!();
                let x = Vector::from(vec![1.0f32, 2.0, 3.0]);
                let (mut r, mut t) = (Vector::filled(3, 9.0f32), Vector::filled(4, 9.0f32));
                let err = Map::new(polar_exact).backend(B).run(&x, &x, &mut (&mut r, &mut t)).unwrap_err();
                assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
                let msg = err.to_string();
                assert!(msg.contains("vector of 3") && msg.contains("vector of 4") && msg.contains("output 1"), "{msg}");
                assert_eq!((r.to_vec(), t.to_vec()), (vec![9.0; 3], vec![9.0; 4]));

                // Outputs agree with each other but not with the inputs.
                let mut t3 = Vector::filled(2, 9.0f32);
                let mut r3 = Vector::filled(2, 9.0f32);
                let err = Map::new(polar_exact).backend(B).run(&x, &x, &mut (&mut r3, &mut t3)).unwrap_err();
                assert!(err.to_string().contains("vector of 2"), "{err}");
                assert_eq!((r3.to_vec(), t3.to_vec()), (vec![9.0; 2], vec![9.0; 2]));

                // A matrix and a vector of as many elements are different shapes.
                let mut m = Matrix::filled(1, 3, 9.0f32);
                let mut v = Vector::filled(3, 9.0f32);
                let err = Map::new(polar_exact).backend(B).run(&x, &x, &mut (&mut v, &mut m)).unwrap_err();
                assert!(err.to_string().contains("1x3 matrix"), "{err}");
                assert_eq!((v.to_vec(), m.to_vec()), (vec![9.0; 3], vec![9.0; 3]));
            }

            #[test]
            fn container_args_matrix_vector_product() {
                require!();
                for (rows, cols) in [(1, 1), (1, 0), (3, 2), (7, 13), (33, 65), (300, 129), (1000, 3)] {
                    let a = Matrix::from_fn(rows, cols, |r, c| ((r * 31 + c * 17) % 23) as f32 * 0.37 - 4.0);
                    let x = Vector::from_fn(cols, |j| (j % 11) as f32 * 0.5 - 2.0);
                    let mut y = Vector::filled(rows, f32::NAN);
                    Map::new(mv).arrays((&a, &x)).backend(B).run_index(&mut y).unwrap();
                    let want: Vec<u32> = (0..rows)
                        .map(|i| {
                            let mut s = 0.0f32;
                            for j in 0..cols {
                                s += a[(i, j)] * x[j];
                            }
                            s.to_bits()
                        })
                        .collect();
                    assert_eq!(bits(&y), want, "{rows}x{cols}");

                    // A view of a longer vector binds like a vector.
                    let long = Vector::from_fn(cols + 5, |j| if j < 3 { 99.0 } else { x.as_slice().get(j - 3).copied().unwrap_or(99.0) });
                    let mut yv = Vector::filled(rows, f32::NAN);
                    Map::new(mv).arrays((&a, &long.view(3..cols + 3))).backend(B).run_index(&mut yv).unwrap();
                    assert_eq!(bits(&yv), want, "view {rows}x{cols}");
                }
            }

            #[test]
            fn container_args_with_elements_uniforms_lengths_and_2d() {
                require!();
                let a = Vector::from_fn(13, |j| j as i64 * 3 - 10);
                let b = Vector::from_fn(7, |j| 100 - j as i64);
                for &n in SIZES {
                    let x = Vector::from(words(n, 5));
                    let mut out = Vector::filled(n, -1i64);
                    Map::new(pick).arrays((&a, &b)).uniforms((-3,)).backend(B).run(&x, &mut out).unwrap();
                    let want: Vec<i64> = x.iter().map(|&v| pick::call(v, a.as_slice(), b.as_slice(), -3)).collect();
                    assert_eq!(out.to_vec(), want, "pick n={n}");
                }
                for (rows, cols) in [(1, 1), (2, 3), (17, 13), (64, 65), (130, 129)] {
                    let m = Matrix::from_fn(rows, cols, |r, c| (r * 7 + c * 3) as u32);
                    let mut t = Matrix::filled(cols, rows, u32::MAX);
                    Map::new(transpose).arrays((&m,)).backend(B).run_index(&mut t).unwrap();
                    for r in 0..cols {
                        for c in 0..rows {
                            assert_eq!(t[(r, c)], m[(c, r)] + (rows * 1000 + cols) as u32, "{rows}x{cols}");
                        }
                    }
                }
            }

            #[test]
            fn container_args_with_multi_output_and_map_reduce() {
                require!();
                for (rows, cols) in [(1, 1), (5, 1), (9, 31), (257, 40)] {
                    let m = Matrix::from_fn(rows, cols, |r, c| ((r * 7919 + c * 104_729) % 2001) as i32 - 1000);
                    let (mut lo, mut hi) = (Vector::filled(rows, 0), Vector::filled(rows, 0));
                    Map::new(row_range).arrays((&m,)).backend(B).run_index(&mut (&mut lo, &mut hi)).unwrap();
                    for i in 0..rows {
                        let row = m.row(i);
                        assert_eq!((lo[i], hi[i]), (*row.iter().min().unwrap(), *row.iter().max().unwrap()), "{rows}x{cols} row {i}");
                    }
                }
                let w = Vector::from(vec![3i64, -1, 4, -1, 5]);
                for &n in SIZES {
                    let x = Vector::from_fn(n, |i| (i % 101) as i64 - 50);
                    let got = MapReduce::new(weighted_by, add_i64s).arrays((&w,)).backend(B).run(&x).unwrap();
                    let want: i64 = (0..n).map(|i| x[i] * w[i % 5]).sum();
                    assert_eq!(got, want, "weighted_by n={n}");
                    let started = MapReduce::new(weighted_by, add_i64s).arrays((&w,)).start(7).backend(B).run(&x).unwrap();
                    assert_eq!(started, want + 7, "start n={n}");
                }
            }

            #[test]
            fn container_args_follow_host_writes_and_are_never_written() {
                require!();
                let rows = 50;
                let mut a = Matrix::from_fn(rows, 8, |r, c| (r + c) as f32);
                let x = Vector::filled(8, 1.0f32);
                let mut y = Vector::zeroed(rows);
                Map::new(mv).arrays((&a, &x)).backend(B).run_index(&mut y).unwrap();
                let up = skel::debug::transfers(&a).up;
                // A second call with the same containers uploads nothing more.
                Map::new(mv).arrays((&a, &x)).backend(B).run_index(&mut y).unwrap();
                assert_eq!(skel::debug::transfers(&a).up, up, "second call re-uploaded the matrix");
                assert_eq!(y[3], (3..11).sum::<usize>() as f32);
                // A host write invalidates the device copy: the next call sees it.
                a[(3, 0)] = 100.0;
                Map::new(mv).arrays((&a, &x)).backend(B).run_index(&mut y).unwrap();
                assert_eq!(y[3], (3..11).sum::<usize>() as f32 - 3.0 + 100.0);
                assert_eq!(a[(3, 0)], 100.0);
                assert_eq!(a[(4, 7)], 11.0, "containers are read, never written");
            }

            #[test]
            fn container_args_of_the_wrong_kind_are_errors() {
                require!();
                let m = Matrix::from_fn(3, 4, |r, c| (r + c) as f32);
                let v = Vector::filled(4, 1.0f32);
                let mut y = Vector::filled(3, 9.0f32);
                let err = Map::new(mv).arrays((&v, &v)).backend(B).run_index(&mut y).unwrap_err();
                assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
                let msg = err.to_string();
                assert!(msg.contains("container argument 0") && msg.contains("Mat<T>") && msg.contains("vector of 4"), "{msg}");
                let err = Map::new(mv).arrays((&m, &m)).backend(B).run_index(&mut y).unwrap_err();
                let msg = err.to_string();
                assert!(msg.contains("container argument 1") && msg.contains("&[T]") && msg.contains("3x4 matrix"), "{msg}");
                assert_eq!(y.to_vec(), vec![9.0; 3], "nothing written");
                let w = Matrix::from_fn(1, 5, |_, c| c as i64);
                let x = Vector::from(vec![1i64, 2, 3]);
                let err = MapReduce::new(weighted_by, add_i64s).arrays((&w,)).backend(B).run(&x).unwrap_err();
                assert!(err.to_string().contains("1x5 matrix"), "{err}");
            }

            #[test]
            fn container_args_in_map_pairs_and_map_pairs_reduce() {
                require!();
                let t = Matrix::from_fn(5, 7, |r, c| (r * 7 + c) as i64 - 17);
                let w = Vector::from(vec![3i64, -2, 5]);
                let want = |v: &Vector<u32>, h: &Vector<u32>, i: usize, j: usize| {
                    pair_cost::call((i, j), v[i], h[j], Mat::new(t.as_slice(), 5, 7), w.as_slice())
                };
                for (rows, cols) in [(1, 1), (2, 3), (7, 13), (33, 31), (300, 129), (40_000, 3)] {
                    let v = Vector::from(words(rows, 3));
                    let h = Vector::from(words(cols, 4));
                    let mut m = Matrix::filled(rows, cols, i64::MIN);
                    MapPairs::new(pair_cost).arrays((&t, &w)).backend(B).run(&v, &h, &mut m).unwrap();
                    for i in 0..rows {
                        for j in 0..cols {
                            assert_eq!(m[(i, j)], want(&v, &h, i, j), "pairs {rows}x{cols} ({i}, {j})");
                        }
                    }
                    let mut per_v = Vector::filled(rows, 0i64);
                    MapPairsReduce::new(pair_cost, add_i64s).arrays((&t, &w)).backend(B).run_rows(&v, &h, &mut per_v).unwrap();
                    let rows_want: Vec<i64> = (0..rows).map(|i| (0..cols).map(|j| want(&v, &h, i, j)).sum()).collect();
                    assert_eq!(per_v.to_vec(), rows_want, "rows {rows}x{cols}");
                    let mut per_h = Vector::filled(cols, 0i64);
                    MapPairsReduce::new(pair_cost, add_i64s).arrays((&t, &w)).backend(B).run_cols(&v, &h, &mut per_h).unwrap();
                    let cols_want: Vec<i64> = (0..cols).map(|j| (0..rows).map(|i| want(&v, &h, i, j)).sum()).collect();
                    assert_eq!(per_h.to_vec(), cols_want, "cols {rows}x{cols}");
                }
                let v = Vector::from(vec![1u32, 2]);
                let mut m = Matrix::filled(2, 2, 5i64);
                let err = MapPairs::new(pair_cost).arrays((&w, &w)).backend(B).run(&v, &v, &mut m).unwrap_err();
                assert!(err.to_string().contains("MapPairs container argument 0"), "{err}");
                assert_eq!(m.to_vec(), vec![5; 4]);
            }

            #[test]
            fn map_array_reads_the_length_of_its_array() {
                require!();
                for len in [1usize, 7, 100, 300] {
                    let table = Vector::from_fn(len, |i| (i as i64) * 3 - 50);
                    let x = Vector::from_fn(500, |i| i as i64 - 100);
                    let mut got = Vector::filled(500, i64::MIN);
                    MapArray::new($crate::suite::lang::last_le).backend(B).run(&table, &x, &mut got).unwrap();
                    for i in 0..500 {
                        let want = table.iter().rposition(|&t| t <= x[i]).map_or(-1, |p| p as i64);
                        assert_eq!(got[i], want, "len={len} i={i}");
                    }
                    // The same function as a Map with the table as a container argument.
                    let mut via_map = Vector::filled(500, i64::MIN);
                    Map::new($crate::suite::lang::last_le).arrays((&table,)).backend(B).run(&x, &mut via_map).unwrap();
                    assert_eq!(via_map, got, "len={len}");
                }
            }

            proptest::proptest! {
                #![proptest_config(proptest::prelude::ProptestConfig { cases: 24, ..Default::default() })]
                #[test]
                fn multi_output_matches_cpu(data in proptest::collection::vec(proptest::prelude::any::<u32>(), 0..3000), k in -50i32..50) {
                    if !available(B) {
                        return Ok(());
                    }
                    let n = data.len();
                    let w = Vector::from(data);
                    let a = Vector::from_fn(n, |i| w[i] as i32 % 1000);
                    let mut got = (Vector::filled(n, 0), Vector::filled(n, 0u32), Vector::filled(n, 0.0f32));
                    let mut want = (Vector::zeroed(n), Vector::zeroed(n), Vector::zeroed(n));
                    Map::new(split3).uniforms((k,)).backend(B).run(&a, &mut (&mut got.0, &mut got.1, &mut got.2)).unwrap();
                    Map::new(split3).uniforms((k,)).backend(Backend::Cpu).run(&a, &mut (&mut want.0, &mut want.1, &mut want.2)).unwrap();
                    proptest::prop_assert_eq!(got.0.to_vec(), want.0.to_vec());
                    proptest::prop_assert_eq!(got.1.to_vec(), want.1.to_vec());
                    proptest::prop_assert_eq!(bits(&got.2), bits(&want.2));
                    let (mut s, mut p) = (Vector::zeroed(n), Vector::zeroed(n));
                    let (mut ws, mut wp) = (Vector::zeroed(n), Vector::zeroed(n));
                    let x = Vector::from_fn(n, |i| w[i] % 100_000);
                    Map::new(collatz2).backend(B).run(&x, &mut (&mut s, &mut p)).unwrap();
                    Map::new(collatz2).backend(Backend::Cpu).run(&x, &mut (&mut ws, &mut wp)).unwrap();
                    proptest::prop_assert_eq!((s.to_vec(), p.to_vec()), (ws.to_vec(), wp.to_vec()));
                }

                #[test]
                fn container_args_match_cpu(rows in 1usize..40, cols in 0usize..40, seed in 0u32..1000) {
                    if !available(B) {
                        return Ok(());
                    }
                    let m = Matrix::from_fn(rows, cols, |r, c| ((r as u32 * 31 + c as u32 * 7 + seed) % 97) as f32 * 0.25 - 12.0);
                    let x = Vector::from_fn(cols, |j| ((j as u32 + seed) % 13) as f32 - 6.0);
                    let (mut got, mut want) = (Vector::filled(rows, f32::NAN), Vector::filled(rows, f32::NAN));
                    Map::new(mv).arrays((&m, &x)).backend(B).run_index(&mut got).unwrap();
                    Map::new(mv).arrays((&m, &x)).backend(Backend::Cpu).run_index(&mut want).unwrap();
                    proptest::prop_assert_eq!(bits(&got), bits(&want));
                }
            }
        }
    };
}
