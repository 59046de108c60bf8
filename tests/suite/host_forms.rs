//! The forms the host backends compute with their own loops (issue 25): 2D stencils split
//! into interior and border, column-wise stencils, 2D index Maps with container arguments,
//! and MapPairsReduce column folds, each against plain Rust (not only the `cpu` oracle,
//! which runs the same loops): `host_forms_suite!()` is expanded inside `backend_suite!`.
//!
//! The shapes straddle what those loops cut the work at: the radii with a loop of their
//! own (0 to 3 column-wise; (1, 1), (2, 2), (1, 0), (0, 1), (3, 3) in 2D) and wider ones,
//! windows as tall or wide as the matrix allows, blocks of 64 columns and 256 rows, tiles of
//! 1024 results, Rayon chunks (2^14 elements) that start inside a row, looping Maps around
//! the sizes Rayon starts splitting them at, and empty inputs.

use skel::prelude::*;

/// A 2D index and a `Mat` read around it, clipped at the borders.
#[userfn]
pub fn cross_sum(#[index] (i, j): (usize, usize), x: i64, a: Mat<i64>) -> i64 {
    let mut s = x * 1000 + (i * 7 + j) as i64;
    if i > 0 {
        s += 3 * a[(i - 1, j)];
    }
    if j + 1 < a.cols() {
        s += 5 * a[(i, j + 1)];
    }
    s
}

/// Heat's explicit step: the border copied, the interior a 5-point update of `a` (the
/// reads' checks follow from the tests and from the output lying inside `a`).
#[userfn]
pub fn heat_step(#[index] (i, j): (usize, usize), a: Mat<f64>) -> f64 {
    if i == 0 || j == 0 || i + 1 == a.rows() || j + 1 == a.cols() {
        a[(i, j)]
    } else {
        let c = a[(i, j)];
        c + 0.125 * (a[(i - 1, j)] - 2.0 * c + a[(i + 1, j)])
            + 0.125 * (a[(i, j - 1)] - 2.0 * c + a[(i, j + 1)])
    }
}

/// Reads `a` at the output's own index where `a` has an element there.
#[userfn]
pub fn read_where_inside(#[index] (i, j): (usize, usize), x: i64, a: Mat<i64>) -> i64 {
    if i < a.rows() && j < a.cols() {
        3 * a[(i, j)] + x
    } else {
        x - 1
    }
}

/// Reads `a` at the output's own index, wherever that is.
#[userfn]
pub fn read_at(#[index] (i, j): (usize, usize), x: i64, a: Mat<i64>) -> i64 {
    a[(i, j)] + x
}

/// The eight neighbours of `(i, j)` in `a`, weighted, where all of them exist; minus the
/// own element on `a`'s border; 0 outside `a`. On the host backends the interior's nine
/// reads lose their checks (the neighbourhood is known to lie inside every `Mat`).
#[userfn]
pub fn ring_sum(#[index] (i, j): (usize, usize), x: i64, a: Mat<i64>) -> i64 {
    if i > 0 && j > 0 && i + 1 < a.rows() && j + 1 < a.cols() {
        x + a[(i - 1, j - 1)]
            + 2 * a[(i - 1, j)]
            + 3 * a[(i - 1, j + 1)]
            + 5 * a[(i, j - 1)]
            + 7 * a[(i, j)]
            + 11 * a[(i, j + 1)]
            + 13 * a[(i + 1, j - 1)]
            + 17 * a[(i + 1, j)]
            + 19 * a[(i + 1, j + 1)]
    } else if i < a.rows() && j < a.cols() {
        x - a[(i, j)]
    } else {
        x
    }
}

/// Reads `a` below and right of the output's index, unguarded: outside `a`, an error.
#[userfn]
pub fn below_right(#[index] (i, j): (usize, usize), a: Mat<i64>) -> i64 {
    a[(i + 1, j + 1)] * 3 - a[(i, j)]
}

/// An interior cell (its 3 x 3 neighbourhood inside `a`) that also reads two rows below,
/// unguarded: the host loops know only the neighbourhood to be inside, so this read keeps
/// its check and, past `a`'s last row, is an error.
#[userfn]
pub fn two_below(#[index] (i, j): (usize, usize), a: Mat<i64>) -> i64 {
    if i > 0 && j > 0 && i + 1 < a.rows() && j + 1 < a.cols() {
        a[(i - 1, j)] + 2 * a[(i + 2, j)]
    } else {
        a[(i, j)]
    }
}

/// A pair with a 2D index and a `Mat` read at it (the backprop shape).
#[userfn]
pub fn weigh(#[index] (i, j): (usize, usize), x: i64, q: i64, w: Mat<i64>) -> i64 {
    x * w[(i, j)] - q + (i % 3) as i64
}

/// A loop per element with no container argument (the Mandelbrot shape): Rayon cuts such
/// calls much finer than memory-bound ones.
#[userfn]
pub fn collatz_steps(x: u32) -> u32 {
    let mut n = x;
    let mut steps = 0u32;
    while n > 1 && steps < 300 {
        if n % 2 == 0 {
            n /= 2;
        } else {
            n = 3 * n + 1;
        }
        steps += 1;
    }
    steps
}

/// Plain Rust: [`collatz_steps`].
pub fn collatz_plain(x: u32) -> u32 {
    let (mut n, mut steps) = (x, 0u32);
    while n > 1 && steps < 300 {
        n = if n % 2 == 0 { n / 2 } else { 3 * n + 1 };
        steps += 1;
    }
    steps
}

/// Plain Rust: the element at virtual `(i, j)` of `m` read with `edge`.
pub fn at_edge_2d(
    m: &[f32],
    (rows, cols): (usize, usize),
    (i, j): (isize, isize),
    edge: Edge,
    pad: f32,
) -> f32 {
    let (ri, ci) = (rows as isize, cols as isize);
    if (0..ri).contains(&i) && (0..ci).contains(&j) {
        return m[i as usize * cols + j as usize];
    }
    match edge {
        Edge::Duplicate => m[i.clamp(0, ri - 1) as usize * cols + j.clamp(0, ci - 1) as usize],
        Edge::Cyclic => m[i.rem_euclid(ri) as usize * cols + j.rem_euclid(ci) as usize],
        _ => pad,
    }
}

#[macro_export]
macro_rules! host_forms_suite {
    () => {
        mod host_forms {
            use super::*;
            use $crate::suite::host_forms::*;
            use $crate::suite::pairs::pair_affine;

            const EDGES: [Edge; 4] = [Edge::Duplicate, Edge::Cyclic, Edge::Pad, Edge::None];

            #[test]
            fn colwise_stencils_against_the_definition() {
                require!();
                let shapes = [
                    (2, 1),
                    (3, 5),
                    (7, 1),
                    (8, 64),
                    (13, 65),
                    (31, 3),
                    (300, 67),
                    (263, 129),
                    (601, 61),
                ];
                for (rows, cols) in shapes {
                    let host = ints_i64(rows * cols, 21);
                    let m = Matrix::from_vec(rows, cols, host.clone()).unwrap();
                    for r in [0usize, 1, 2, 3, 4, 6, rows / 2] {
                        if rows < 2 * r || (r > 6 && rows * cols > 20_000) {
                            continue;
                        }
                        for edge in EDGES {
                            let mut got = Matrix::filled(rows, cols, -11i64);
                            MapOverlap::new(weighted, r)
                                .colwise()
                                .edge(edge)
                                .pad(6)
                                .uniforms((r as i32,))
                                .backend(B)
                                .run(&m, &mut got)
                                .unwrap();
                            for c in 0..cols {
                                let line: Vec<i64> =
                                    (0..rows).map(|i| host[i * cols + c]).collect();
                                for i in 0..rows {
                                    let want = if edge == Edge::None && (i < r || i + r >= rows) {
                                        -11
                                    } else {
                                        (-(r as isize)..=r as isize)
                                            .map(|d| {
                                                at_edge(&line, i as isize + d, edge, 6)
                                                    * (d as i64 + 10)
                                            })
                                            .sum()
                                    };
                                    assert_eq!(
                                        got[(i, c)],
                                        want,
                                        "{rows}x{cols} r={r} {edge:?} at ({i}, {c})"
                                    );
                                }
                            }
                        }
                    }
                }
            }

            #[test]
            fn stencils_2d_against_the_definition() {
                require!();
                let shapes = [
                    (2, 2),
                    (3, 3),
                    (5, 7),
                    (6, 1),
                    (1, 6),
                    (13, 17),
                    (64, 65),
                    (131, 257),
                ];
                let radii = [
                    (0, 0),
                    (0, 1),
                    (1, 0),
                    (1, 1),
                    (2, 2),
                    (3, 3),
                    (2, 1),
                    (4, 4),
                    (1, 5),
                ];
                for (rows, cols) in shapes {
                    let host = ints_f32(rows * cols, 23);
                    let m = Matrix::from_vec(rows, cols, host.clone()).unwrap();
                    for (rr, rc) in radii {
                        if rows < 2 * rr || cols < 2 * rc {
                            continue;
                        }
                        for edge in EDGES {
                            let mut got = Matrix::filled(rows, cols, -0.5f32);
                            MapOverlap::new(box2, (rr, rc))
                                .edge(edge)
                                .pad(3.0)
                                .uniforms((rr as i32, rc as i32))
                                .backend(B)
                                .run(&m, &mut got)
                                .unwrap();
                            let (ri, ci) = (rr as isize, rc as isize);
                            for i in 0..rows {
                                for j in 0..cols {
                                    let border =
                                        i < rr || j < rc || i + rr >= rows || j + rc >= cols;
                                    let want = if edge == Edge::None && border {
                                        -0.5
                                    } else {
                                        let mut acc = 0.0f32;
                                        for di in -ri..=ri {
                                            for dj in -ci..=ci {
                                                let x = at_edge_2d(
                                                    &host,
                                                    (rows, cols),
                                                    (i as isize + di, j as isize + dj),
                                                    edge,
                                                    3.0,
                                                );
                                                acc += x * (di * 7 + dj + 1) as f32;
                                            }
                                        }
                                        acc
                                    };
                                    assert_eq!(
                                        got[(i, j)],
                                        want,
                                        "{rows}x{cols} ({rr}, {rc}) {edge:?} at ({i}, {j})"
                                    );
                                }
                            }
                        }
                    }
                }
            }

            #[test]
            fn index_maps_2d_with_a_mat_against_the_definition() {
                require!();
                // 257 x 255 and 300 x 301 put Rayon's chunk boundaries inside rows.
                for (rows, cols) in [
                    (0, 0),
                    (0, 3),
                    (1, 1),
                    (1, 9),
                    (9, 1),
                    (3, 7),
                    (257, 255),
                    (300, 301),
                    (17, 1031),
                ] {
                    let x = Matrix::from_vec(rows, cols, ints_i64(rows * cols, 2)).unwrap();
                    let a = Matrix::from_vec(rows, cols, ints_i64(rows * cols, 3)).unwrap();
                    let mut got = Matrix::filled(rows, cols, 9i64);
                    Map::new(cross_sum)
                        .arrays((&a,))
                        .backend(B)
                        .run(&x, &mut got)
                        .unwrap();
                    let mut w2 = Matrix::filled(rows, cols, 9i32);
                    let xi = Matrix::from_fn(rows, cols, |i, j| (i + 2 * j) as i32 % 13);
                    Map::new(where2d).backend(B).run(&xi, &mut w2).unwrap();
                    for i in 0..rows {
                        for j in 0..cols {
                            let mut want = x[(i, j)] * 1000 + (i * 7 + j) as i64;
                            if i > 0 {
                                want += 3 * a[(i - 1, j)];
                            }
                            if j + 1 < cols {
                                want += 5 * a[(i, j + 1)];
                            }
                            assert_eq!(got[(i, j)], want, "{rows}x{cols} at ({i}, {j})");
                            assert_eq!(
                                w2[(i, j)],
                                (i * 1000 + j) as i32 + xi[(i, j)],
                                "where2d {rows}x{cols}"
                            );
                        }
                    }
                }
            }

            #[test]
            fn index_maps_2d_with_a_mat_of_any_shape() {
                require!();
                // Rows of a prime length, Rayon chunks that start inside rows, one long row.
                for (rows, cols) in [
                    (0, 0),
                    (1, 1),
                    (2, 2),
                    (3, 3),
                    (13, 1),
                    (1, 13),
                    (131, 127),
                    (257, 67),
                    (1, 16411),
                ] {
                    let a: Vec<f64> = (0..rows * cols)
                        .map(|k| ((k * 37) % 101) as f64 * 0.25)
                        .collect();
                    let am = Matrix::from_vec(rows, cols, a.clone()).unwrap();
                    let mut got = Matrix::filled(rows, cols, 7.0f64);
                    Map::new(heat_step)
                        .arrays((&am,))
                        .backend(B)
                        .run_index(&mut got)
                        .unwrap();
                    for i in 0..rows {
                        for j in 0..cols {
                            let k = i * cols + j;
                            let want = if i == 0 || j == 0 || i + 1 == rows || j + 1 == cols {
                                a[k]
                            } else {
                                let c = a[k];
                                c + 0.125 * (a[k - cols] - 2.0 * c + a[k + cols])
                                    + 0.125 * (a[k - 1] - 2.0 * c + a[k + 1])
                            };
                            assert_eq!(
                                got[(i, j)].to_bits(),
                                want.to_bits(),
                                "heat {rows}x{cols} at ({i}, {j})"
                            );
                        }
                    }
                    // A `Mat` of another shape: only part of each row lies inside it.
                    let x = Matrix::from_vec(rows, cols, ints_i64(rows * cols, 4)).unwrap();
                    let host = matches!(B, Backend::Cpu | Backend::Rayon);
                    let shapes = [
                        (rows + 1, cols.saturating_sub(1)),
                        (rows.saturating_sub(1), cols + 2),
                        (rows, cols / 2),
                    ];
                    // Empty `Mat`s on the host only (the devices' suites cover empty buffers).
                    for (ar, ac) in shapes.into_iter().filter(|&(ar, ac)| host || ar * ac > 0) {
                        let small = Matrix::from_vec(ar, ac, ints_i64(ar * ac, 5)).unwrap();
                        let mut got = Matrix::filled(rows, cols, 9i64);
                        Map::new(read_where_inside)
                            .arrays((&small,))
                            .backend(B)
                            .run(&x, &mut got)
                            .unwrap();
                        for i in 0..rows {
                            for j in 0..cols {
                                let want = if i < ar && j < ac {
                                    3 * small[(i, j)] + x[(i, j)]
                                } else {
                                    x[(i, j)] - 1
                                };
                                assert_eq!(
                                    got[(i, j)],
                                    want,
                                    "{rows}x{cols} with a {ar}x{ac} Mat at ({i}, {j})"
                                );
                            }
                        }
                        // The same read without the test: outside the `Mat` is an error
                        // (checked on every backend; unchecked too on the host's).
                        let outside = rows * cols > 0 && (ar < rows || ac < cols);
                        for checked in [true, false].into_iter().filter(|&c| c || host) {
                            let mut out = Matrix::filled(rows, cols, 9i64);
                            let map = Map::new(read_at)
                                .arrays((&small,))
                                .backend(B)
                                .checked(checked);
                            let r = map.run(&x, &mut out);
                            assert_eq!(
                                r.is_err(),
                                outside,
                                "{rows}x{cols} reading a {ar}x{ac} Mat: {r:?}"
                            );
                        }
                    }
                }
            }

            #[test]
            fn index_maps_2d_reading_neighbours_of_mats_of_any_shape() {
                require!();
                let host = matches!(B, Backend::Cpu | Backend::Rayon);
                // Prime sides, rows of one or two columns, Rayon chunks inside rows.
                for (rows, cols) in [
                    (1, 1),
                    (2, 2),
                    (3, 3),
                    (3, 7),
                    (7, 2),
                    (131, 5),
                    (5, 131),
                    (257, 129),
                ] {
                    let x = Matrix::from_vec(rows, cols, ints_i64(rows * cols, 6)).unwrap();
                    let shapes = [
                        (rows, cols),
                        (rows + 1, cols + 1),
                        (rows + 2, cols.saturating_sub(1)),
                        (rows.saturating_sub(1), cols + 3),
                        (rows, 1),
                        (2, cols),
                    ];
                    for (ar, ac) in shapes.into_iter().filter(|&(ar, ac)| host || ar * ac > 0) {
                        let a = Matrix::from_vec(ar, ac, ints_i64(ar * ac, 7)).unwrap();
                        let mut got = Matrix::filled(rows, cols, 9i64);
                        Map::new(ring_sum)
                            .arrays((&a,))
                            .backend(B)
                            .run(&x, &mut got)
                            .unwrap();
                        for i in 0..rows {
                            for j in 0..cols {
                                let xv = x[(i, j)];
                                let want = if i > 0 && j > 0 && i + 1 < ar && j + 1 < ac {
                                    let w = [1, 2, 3, 5, 7, 11, 13, 17, 19];
                                    let mut s = xv;
                                    for (n, (di, dj)) in (0..3)
                                        .flat_map(|di| (0..3).map(move |dj| (di, dj)))
                                        .enumerate()
                                    {
                                        s += w[n] * a[(i + di - 1, j + dj - 1)];
                                    }
                                    s
                                } else if i < ar && j < ac {
                                    xv - a[(i, j)]
                                } else {
                                    xv
                                };
                                assert_eq!(
                                    got[(i, j)],
                                    want,
                                    "{rows}x{cols} ring of a {ar}x{ac} Mat at ({i}, {j})"
                                );
                            }
                        }
                        // Unguarded reads below and right: an error exactly where they
                        // leave `a` somewhere (the last row's and column's outputs), checked
                        // on every backend, unchecked too on the host's; a good call's values.
                        let fits = rows < ar && cols < ac;
                        for checked in [true, false].into_iter().filter(|&c| c || host) {
                            let mut out = Matrix::filled(rows, cols, 9i64);
                            let r = Map::new(below_right)
                                .arrays((&a,))
                                .backend(B)
                                .checked(checked)
                                .run_index(&mut out);
                            assert_eq!(r.is_ok(), fits, "{rows}x{cols} below-right of {ar}x{ac}");
                            if checked && !fits && host {
                                assert_eq!(out.to_vec(), vec![9i64; rows * cols]);
                            }
                            if fits {
                                for i in 0..rows {
                                    for j in 0..cols {
                                        let want = a[(i + 1, j + 1)] * 3 - a[(i, j)];
                                        assert_eq!(out[(i, j)], want, "below-right ({i}, {j})");
                                    }
                                }
                            }
                        }
                    }
                }
            }

            #[test]
            fn index_maps_2d_interior_reads_past_the_neighbourhood_stay_checked() {
                require!();
                let host = matches!(B, Backend::Cpu | Backend::Rayon);
                // At least 129 columns: the host loops' interior copy (16 columns or more)
                // runs on every row from the second; 64 x 257 has a Rayon chunk start
                // inside a row.
                for (rows, cols) in [(3, 129), (17, 130), (64, 257)] {
                    // `rows + 1` rows: the last output row is an interior of `a` whose read
                    // two rows down leaves it; `rows + 2`: every read is inside.
                    for ar in [rows + 1, rows + 2] {
                        let a = Matrix::from_vec(ar, cols, ints_i64(ar * cols, 8)).unwrap();
                        let fits = ar >= rows + 2;
                        for checked in [true, false].into_iter().filter(|&c| c || host) {
                            let mut out = Matrix::filled(rows, cols, 9i64);
                            let r = Map::new(two_below)
                                .arrays((&a,))
                                .backend(B)
                                .checked(checked)
                                .run_index(&mut out);
                            let what = format!("{rows}x{cols} two below in {ar}x{cols}");
                            assert_eq!(r.is_ok(), fits, "{what} checked={checked}: {r:?}");
                            if !fits {
                                if host {
                                    let err = r.unwrap_err();
                                    assert!(matches!(err, Error::UserFunction { .. }), "{err}");
                                }
                                if checked && host {
                                    assert_eq!(out.to_vec(), vec![9i64; rows * cols], "{what}");
                                }
                                continue;
                            }
                            for i in 0..rows {
                                for j in 0..cols {
                                    let want = if i > 0 && j > 0 && j + 1 < cols {
                                        a[(i - 1, j)] + 2 * a[(i + 2, j)]
                                    } else {
                                        a[(i, j)]
                                    };
                                    assert_eq!(out[(i, j)], want, "{what} at ({i}, {j})");
                                }
                            }
                        }
                    }
                }
            }

            #[test]
            fn looping_maps_around_the_split_sizes_against_the_definition() {
                require!();
                // Rayon splits a looping function from 256 elements into 16 chunks per
                // thread; sizes around that, primes, and 2^14 +- 1 (where cheap ones split).
                for n in [0usize, 1, 2, 255, 256, 257, 1009, 4099, 16_383, 16_385] {
                    let host: Vec<u32> = (0..n as u32).map(|k| k * 7 % 9973).collect();
                    let x = Vector::from(host.clone());
                    let mut got = Vector::filled(n, 77u32);
                    Map::new(collatz_steps)
                        .backend(B)
                        .run(&x, &mut got)
                        .unwrap();
                    for k in 0..n {
                        assert_eq!(got[k], collatz_plain(host[k]), "n = {n} at {k}");
                    }
                }
            }

            #[test]
            fn pairs_reduce_cols_tall_and_wide_against_the_definition() {
                require!();
                let compose = |a: Affine, b: Affine| Affine {
                    m: a.m * b.m,
                    c: a.c * b.m + b.c,
                };
                for (rows, cols) in [
                    (1, 1),
                    (2, 1),
                    (1, 5),
                    (1031, 3),
                    (3, 1031),
                    (5, 2053),
                    (20_011, 17),
                    (41, 701),
                ] {
                    let hv = ints_i64(rows, 31);
                    let hh = ints_i64(cols, 32);
                    let (v, h) = (Vector::from(hv.clone()), Vector::from(hh.clone()));
                    let wh = ints_i64(rows * cols, 33);
                    let w = Matrix::from_vec(rows, cols, wh.clone()).unwrap();
                    let mut got = Vector::filled(cols, 5i64);
                    MapPairsReduce::new(weigh, add_i64)
                        .arrays((&w,))
                        .backend(B)
                        .run_cols(&v, &h, &mut got)
                        .unwrap();
                    let mut order = Vector::filled(cols, Affine { m: 7, c: 7 });
                    MapPairsReduce::new(pair_affine, affine_compose)
                        .backend(B)
                        .run_cols(&v, &h, &mut order)
                        .unwrap();
                    for j in 0..cols {
                        let want: i64 = (0..rows)
                            .map(|i| hv[i] * wh[i * cols + j] - hh[j] + (i % 3) as i64)
                            .sum();
                        assert_eq!(got[j], want, "weigh {rows}x{cols} column {j}");
                        let mut pairs = (0..rows).map(|i| pair_affine::call(hv[i], hh[j]));
                        let first = pairs.next().unwrap();
                        let want = pairs.fold(first, compose);
                        assert_eq!(order[j], want, "affine {rows}x{cols} column {j}");
                    }
                }
            }

            #[test]
            fn reduce_cols_over_many_blocks_in_row_order() {
                require!();
                // An associative, non-commutative fold: every column must combine its
                // elements in row order, whichever blocks of rows and stripes of columns
                // Rayon folds and combines them in.
                let compose = |a: Affine, b: Affine| Affine {
                    m: a.m * b.m,
                    c: a.c * b.m + b.c,
                };
                for (rows, cols) in [
                    (1, 1),
                    (70_001, 1),
                    (1, 70_001),
                    (300, 1_000),
                    (1_031, 257),
                    (20_011, 17),
                ] {
                    let (p, q) = (ints_i64(rows * cols, 41), ints_i64(rows * cols, 42));
                    let cells: Vec<Affine> = p
                        .iter()
                        .zip(&q)
                        .map(|(&p, &q)| pair_affine::call(p, q))
                        .collect();
                    let m = Matrix::from_vec(rows, cols, cells.clone()).unwrap();
                    let mut got = Vector::filled(cols, Affine { m: 7, c: 7 });
                    Reduce::new(affine_compose)
                        .backend(B)
                        .run_cols(&m, &mut got)
                        .unwrap();
                    for j in 0..cols {
                        let mut down = (0..rows).map(|i| cells[i * cols + j]);
                        let first = down.next().unwrap();
                        let want = down.fold(first, compose);
                        assert_eq!(got[j], want, "{rows}x{cols} column {j}");
                    }
                }
            }
        }
    };
}
