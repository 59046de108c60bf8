//! MapOverlap in SkePU 3's form (issue 27): window functions with `#[index]`, container
//! arguments, uniforms, 2..=4 windowed inputs and `w.radius()`, every edge mode, and the
//! update modes of `run_in_place`, checked against a plain Rust model of the definition on
//! every backend (the GPU backends through their tile kernel of the general form).

use proptest::prelude::*;
use skel::prelude::*;

use super::available;

const BACKENDS: [Backend; 4] = [Backend::Cpu, Backend::Rayon, Backend::OpenCl, Backend::Cuda];
const EDGES: [Edge; 4] = [Edge::None, Edge::Pad, Edge::Duplicate, Edge::Cyclic];
/// Matrix shapes: one element, primes, a row, a column, wider than a Rayon band.
const SHAPES: &[(usize, usize)] = &[
    (1, 1),
    (2, 3),
    (7, 13),
    (31, 17),
    (1, 29),
    (23, 1),
    (131, 257),
];

fn backends() -> impl Iterator<Item = Backend> {
    BACKENDS.into_iter().filter(|&b| available(b))
}

/// The result of a general-form call: every backend must compute the model's.
fn expect<T: PartialEq + std::fmt::Debug>(
    b: Backend,
    r: skel::Result<()>,
    got: impl FnOnce() -> T,
    want: &T,
    what: &str,
) {
    r.unwrap_or_else(|e| panic!("{b:?} {what}: {e}"));
    assert_eq!(&got(), want, "{b:?} {what}");
}

/// Element `(i, j)` of a `rows x cols` row-major matrix read with `edge` (`None` for the pad).
fn at(
    m: &[i64],
    (rows, cols): (usize, usize),
    (i, j): (isize, isize),
    edge: Edge,
    pad: i64,
) -> i64 {
    let (r, c) = (rows as isize, cols as isize);
    if (0..r).contains(&i) && (0..c).contains(&j) {
        return m[(i * c + j) as usize];
    }
    match edge {
        Edge::Duplicate => m[(i.clamp(0, r - 1) * c + j.clamp(0, c - 1)) as usize],
        Edge::Cyclic => m[(i.rem_euclid(r) * c + j.rem_euclid(c)) as usize],
        _ => pad,
    }
}

/// Hotspot's shape: index, a window, a container at the same cell, a uniform.
#[userfn]
pub fn hot(
    #[index] (i, j): (usize, usize),
    t: Window2<i64>,
    p: Mat<i64>,
    #[uniform] k: i64,
) -> i64 {
    t[(0, 0)] * 3
        + k * (p[(i, j)] + t[(-1, 0)] - t[(1, 0)] + 2 * t[(0, -1)] - t[(0, 1)])
        + (i * 100 + j) as i64
}

/// Hotspot's shape reading a container of any shape at the output's index, clamped to it.
#[userfn]
pub fn hot_clamped(#[index] (i, j): (usize, usize), t: Window2<i64>, p: Mat<i64>) -> i64 {
    let (pi, pj) = (i.min(p.rows() - 1), j.min(p.cols() - 1));
    t[(0, 0)] * 3 + p[(pi, pj)] * 5 - t[(1, 0)] + (i * 100 + j) as i64
}

/// Two windows (FDTD's curl).
#[userfn]
pub fn curl(e: Window2<i64>, h: Window2<i64>) -> i64 {
    e[(0, 1)] - e[(0, 0)] + 3 * (h[(1, 0)] - h[(0, 0)]) + h[(-1, -1)]
}

/// Three windows and a uniform.
#[userfn]
pub fn three(a: Window2<i64>, b: Window2<i64>, c: Window2<i64>, #[uniform] k: i64) -> i64 {
    a[(1, 1)] + 2 * b[(-1, 1)] + k * c[(0, -1)]
}

/// Four windows, reading each window's whole extent through `w.radius()`.
#[userfn]
pub fn four(a: Window2<i64>, b: Window2<i64>, c: Window2<i64>, d: Window2<i64>) -> i64 {
    let (rr, rc) = a.radius();
    let mut s = 0i64;
    for di in -(rr as isize)..=rr as isize {
        for dj in -(rc as isize)..=rc as isize {
            s += a[(di, dj)] + 3 * b[(di, dj)] - c[(di, dj)] * 5
                + d[(di, dj)] * ((di * 7 + dj) as i64);
        }
    }
    s
}

/// Filter coefficients as a container argument, the window's size from `w.radius()`.
#[userfn]
pub fn taps(w: Window2<i64>, k: &[i64]) -> i64 {
    let (rr, rc) = w.radius();
    let width = 2 * rc + 1;
    let mut s = 0i64;
    for di in 0..2 * rr + 1 {
        for dj in 0..width {
            s += k[di * width + dj] * w[(di as isize - rr as isize, dj as isize - rc as isize)];
        }
    }
    s
}

/// 1D: index, two windows, a container, a uniform.
#[userfn]
pub fn line(
    #[index] i: usize,
    a: Window<i64>,
    b: Window<i64>,
    v: &[i64],
    #[uniform] k: i64,
) -> i64 {
    let r = a.radius() as isize;
    a[-r] - 2 * a[0] + b[r] * k + v[i % v.len()]
}

/// A plain window function, for the update modes.
#[userfn]
pub fn smooth(w: Window2<i64>) -> i64 {
    (w[(-1, 0)] + w[(1, 0)] + w[(0, -1)] + w[(0, 1)] + 2 * w[(-1, -1)]) / 3 + 1
}

fn grid(rows: usize, cols: usize, seed: i64) -> Matrix<i64> {
    Matrix::from_fn(rows, cols, |i, j| {
        ((i as i64 * 31 + j as i64 * 17 + seed) % 23) - 11
    })
}

/// The model of a 2D call: `f(i, j, read)` with `read(k, di, dj)` window `k`'s element;
/// outputs `Edge::None` leaves alone keep `old`.
fn model_2d(
    (rows, cols): (usize, usize),
    (rr, rc): (usize, usize),
    edge: Edge,
    pad: i64,
    inputs: &[Vec<i64>],
    old: &[i64],
    f: impl Fn(usize, usize, &dyn Fn(usize, isize, isize) -> i64) -> i64,
) -> Vec<i64> {
    let mut out = old.to_vec();
    for i in 0..rows {
        for j in 0..cols {
            if edge == Edge::None && (i < rr || i + rr >= rows || j < rc || j + rc >= cols) {
                continue;
            }
            let read = |k: usize, di: isize, dj: isize| {
                at(
                    &inputs[k],
                    (rows, cols),
                    (i as isize + di, j as isize + dj),
                    edge,
                    pad,
                )
            };
            out[i * cols + j] = f(i, j, &read);
        }
    }
    out
}

#[test]
fn index_containers_and_uniforms_in_2d_every_edge() {
    for (rows, cols) in SHAPES.iter().copied().filter(|&(r, c)| r >= 2 && c >= 2) {
        let t = grid(rows, cols, 1);
        let p = grid(rows, cols, 5);
        for edge in EDGES {
            let old = vec![-7i64; rows * cols];
            let want = model_2d(
                (rows, cols),
                (1, 1),
                edge,
                4,
                &[t.to_vec()],
                &old,
                |i, j, w| {
                    w(0, 0, 0) * 3
                        + 2 * (p[(i, j)] + w(0, -1, 0) - w(0, 1, 0) + 2 * w(0, 0, -1) - w(0, 0, 1))
                        + (i * 100 + j) as i64
                },
            );
            for b in backends() {
                let mut out = Matrix::filled(rows, cols, -7i64);
                let r = MapOverlap::new(hot, (1, 1))
                    .edge(edge)
                    .pad(4)
                    .arrays((&p,))
                    .uniforms((2,))
                    .backend(b)
                    .run(&t, &mut out);
                expect(
                    b,
                    r,
                    || out.to_vec(),
                    &want,
                    &format!("hot {rows}x{cols} {edge:?}"),
                );
            }
        }
    }
}

/// A container smaller, then larger, than the output in each dimension: the host loops
/// read it unchecked where every output's index lies inside it (rows and whole runs of
/// columns) and checked elsewhere; both give the model's result.
#[test]
fn containers_of_other_shapes_at_the_output_index() {
    for (rows, cols) in SHAPES.iter().copied().filter(|&(r, c)| r >= 3 && c >= 3) {
        let t = grid(rows, cols, 2);
        let shapes = [
            (rows - 2, cols),
            (rows, cols - 2),
            (rows - 1, cols - 2),
            (rows + 3, cols + 1),
        ];
        for (pr, pc) in shapes {
            let p = grid(pr, pc, 9);
            for edge in [Edge::None, Edge::Duplicate] {
                let old = vec![-7i64; rows * cols];
                let want = model_2d(
                    (rows, cols),
                    (1, 1),
                    edge,
                    0,
                    &[t.to_vec()],
                    &old,
                    |i, j, w| {
                        w(0, 0, 0) * 3 + p[(i.min(pr - 1), j.min(pc - 1))] * 5 - w(0, 1, 0)
                            + (i * 100 + j) as i64
                    },
                );
                for b in backends() {
                    let mut out = Matrix::filled(rows, cols, -7i64);
                    let r = MapOverlap::new(hot_clamped, (1, 1))
                        .edge(edge)
                        .arrays((&p,))
                        .backend(b)
                        .run(&t, &mut out);
                    let what = format!("hot_clamped {rows}x{cols}, Mat {pr}x{pc}, {edge:?}");
                    expect(b, r, || out.to_vec(), &want, &what);
                }
            }
        }
    }
}

#[test]
fn two_three_and_four_windows_every_edge() {
    for &(rows, cols) in SHAPES {
        let ms: Vec<Matrix<i64>> = (0..4).map(|s| grid(rows, cols, s * 3)).collect();
        let vs: Vec<Vec<i64>> = ms.iter().map(|m| m.to_vec()).collect();
        for edge in EDGES {
            let old = vec![9i64; rows * cols];
            let radius = (rows.min(2) / 2, cols.min(2) / 2);
            let want2 = model_2d((rows, cols), (1, 1), edge, -3, &vs, &old, |_, _, w| {
                w(0, 0, 1) - w(0, 0, 0) + 3 * (w(1, 1, 0) - w(1, 0, 0)) + w(1, -1, -1)
            });
            let want3 = model_2d((rows, cols), (1, 1), edge, -3, &vs, &old, |_, _, w| {
                w(0, 1, 1) + 2 * w(1, -1, 1) + 5 * w(2, 0, -1)
            });
            let (rr, rc) = (radius.0 as isize, radius.1 as isize);
            let want4 = model_2d((rows, cols), radius, edge, -3, &vs, &old, |_, _, w| {
                let mut s = 0;
                for di in -rr..=rr {
                    for dj in -rc..=rc {
                        s += w(0, di, dj) + 3 * w(1, di, dj) - w(2, di, dj) * 5
                            + w(3, di, dj) * (di * 7 + dj) as i64;
                    }
                }
                s
            });
            let fits = rows >= 2 && cols >= 2;
            for b in backends() {
                let what = format!("{rows}x{cols} {edge:?}");
                let mut out = Matrix::filled(rows, cols, 9i64);
                if fits {
                    let r = MapOverlap::new(curl, (1, 1))
                        .edge(edge)
                        .pad(-3)
                        .backend(b)
                        .run(&ms[0], &ms[1], &mut out);
                    expect(b, r, || out.to_vec(), &want2, &format!("curl {what}"));
                    let mut out = Matrix::filled(rows, cols, 9i64);
                    let r = MapOverlap::new(three, (1, 1))
                        .edge(edge)
                        .pad(-3)
                        .uniforms((5,))
                        .backend(b)
                        .run(&ms[0], &ms[1], &ms[2], &mut out);
                    expect(b, r, || out.to_vec(), &want3, &format!("three {what}"));
                }
                let mut out = Matrix::filled(rows, cols, 9i64);
                let r = MapOverlap::new(four, radius)
                    .edge(edge)
                    .pad(-3)
                    .backend(b)
                    .run(&ms[0], &ms[1], &ms[2], &ms[3], &mut out);
                expect(
                    b,
                    r,
                    || out.to_vec(),
                    &want4,
                    &format!("four {what} r{radius:?}"),
                );
            }
        }
    }
}

#[test]
fn filter_taps_as_a_container_with_radius() {
    for &(rows, cols) in &[(5usize, 5usize), (11, 7), (40, 33)] {
        let m = grid(rows, cols, 2);
        for (rr, rc) in [(1usize, 1usize), (2, 1), (0, 2)] {
            let k: Vec<i64> = (0..(2 * rr + 1) * (2 * rc + 1))
                .map(|x| x as i64 - 3)
                .collect();
            let kv = Vector::from(k.clone());
            for edge in EDGES {
                let old = vec![0i64; rows * cols];
                let want = model_2d(
                    (rows, cols),
                    (rr, rc),
                    edge,
                    1,
                    &[m.to_vec()],
                    &old,
                    |_, _, w| {
                        let mut s = 0;
                        for di in 0..2 * rr + 1 {
                            for dj in 0..2 * rc + 1 {
                                s += k[di * (2 * rc + 1) + dj]
                                    * w(0, di as isize - rr as isize, dj as isize - rc as isize);
                            }
                        }
                        s
                    },
                );
                for b in backends() {
                    let mut out = Matrix::zeroed(rows, cols);
                    let r = MapOverlap::new(taps, (rr, rc))
                        .edge(edge)
                        .pad(1)
                        .arrays((&kv,))
                        .backend(b)
                        .run(&m, &mut out);
                    expect(
                        b,
                        r,
                        || out.to_vec(),
                        &want,
                        &format!("taps {rows}x{cols} r({rr},{rc}) {edge:?}"),
                    );
                }
            }
        }
    }
}

#[test]
fn one_d_index_windows_and_containers_flat_rows_and_cols() {
    let v = Vector::from(vec![5i64, -2, 7]);
    for n in [1usize, 2, 3, 7, 13, 31, 1009, 20011] {
        let a = Vector::from((0..n as i64).map(|x| (x * 7) % 11 - 5).collect::<Vec<_>>());
        let bb = Vector::from((0..n as i64).map(|x| (x * 3) % 13 - 6).collect::<Vec<_>>());
        let r = if n >= 4 { 2 } else { n / 2 };
        for edge in EDGES {
            let line_of = |av: &[i64],
                           bv: &[i64],
                           len: usize,
                           at: &dyn Fn(usize) -> (usize, usize),
                           old: i64| {
                (0..len)
                    .map(|p| {
                        let (pos, flat) = at(p);
                        let _ = pos;
                        if edge == Edge::None && (p < r || p + r >= len) {
                            return old;
                        }
                        let rd = |x: &[i64], d: isize| at_line(x, len, p as isize + d, edge, 8);
                        rd(av, -(r as isize)) - 2 * rd(av, 0)
                            + rd(bv, r as isize) * 3
                            + [5i64, -2, 7][flat % 3]
                    })
                    .collect::<Vec<_>>()
            };
            let want = line_of(&a.to_vec(), &bb.to_vec(), n, &|p| (p, p), 0);
            for b in backends() {
                let mut out = Vector::zeroed(n);
                let res = MapOverlap::new(line, r)
                    .edge(edge)
                    .pad(8)
                    .arrays((&v,))
                    .uniforms((3,))
                    .backend(b)
                    .run(&a, &bb, &mut out);
                expect(
                    b,
                    res,
                    || out.to_vec(),
                    &want,
                    &format!("line n={n} {edge:?}"),
                );
            }
        }
    }
    // Along rows and down columns of a matrix: the index is the flat position.
    let (rows, cols) = (13usize, 7usize);
    let m = grid(rows, cols, 4);
    let m2 = grid(rows, cols, 9);
    for edge in EDGES {
        for cols_wise in [false, true] {
            let mut want = vec![-1i64; rows * cols];
            for i in 0..rows {
                for j in 0..cols {
                    let (p, len) = if cols_wise { (i, rows) } else { (j, cols) };
                    if edge == Edge::None && (p < 1 || p + 1 >= len) {
                        continue;
                    }
                    let line_a: Vec<i64> = (0..len)
                        .map(|q| if cols_wise { m[(q, j)] } else { m[(i, q)] })
                        .collect();
                    let line_b: Vec<i64> = (0..len)
                        .map(|q| if cols_wise { m2[(q, j)] } else { m2[(i, q)] })
                        .collect();
                    want[i * cols + j] = at_line(&line_a, len, p as isize - 1, edge, 8)
                        - 2 * line_a[p]
                        + at_line(&line_b, len, p as isize + 1, edge, 8) * 3
                        + [5i64, -2, 7][(i * cols + j) % 3];
                }
            }
            for b in backends() {
                let mut out = Matrix::filled(rows, cols, -1i64);
                let s = MapOverlap::new(line, 1)
                    .edge(edge)
                    .pad(8)
                    .arrays((&v,))
                    .uniforms((3,))
                    .backend(b);
                let s = if cols_wise { s.colwise() } else { s.rowwise() };
                let res = s.run(&m, &m2, &mut out);
                expect(
                    b,
                    res,
                    || out.to_vec(),
                    &want,
                    &format!("line matrix cols={cols_wise} {edge:?}"),
                );
            }
        }
    }
}

fn at_line(x: &[i64], len: usize, p: isize, edge: Edge, pad: i64) -> i64 {
    let n = len as isize;
    if (0..n).contains(&p) {
        return x[p as usize];
    }
    match edge {
        Edge::Duplicate => x[p.clamp(0, n - 1) as usize],
        Edge::Cyclic => x[p.rem_euclid(n) as usize],
        _ => pad,
    }
}

/// The model of an in-place update: each sweep computes its cells from the matrix the
/// previous sweep left.
fn model_update(m: &[i64], (rows, cols): (usize, usize), edge: Edge, update: Update) -> Vec<i64> {
    let sweeps: &[Option<usize>] = match update {
        Update::Normal => &[None],
        Update::Red => &[Some(0)],
        Update::Black => &[Some(1)],
        Update::RedBlack => &[Some(0), Some(1)],
    };
    let mut cur = m.to_vec();
    for parity in sweeps {
        let next = model_2d(
            (rows, cols),
            (1, 1),
            edge,
            0,
            &[cur.clone()],
            &cur,
            |i, j, w| {
                if parity.is_some_and(|p| (i + j) % 2 != p) {
                    return cur[i * cols + j];
                }
                (w(0, -1, 0) + w(0, 1, 0) + w(0, 0, -1) + w(0, 0, 1) + 2 * w(0, -1, -1)) / 3 + 1
            },
        );
        cur = next;
    }
    cur
}

#[test]
fn update_modes_in_place_match_the_model() {
    for (rows, cols) in SHAPES.iter().copied().filter(|&(r, c)| r >= 2 && c >= 2) {
        for edge in EDGES {
            for update in [Update::Normal, Update::Red, Update::Black, Update::RedBlack] {
                let m0 = grid(rows, cols, 7);
                let want = model_update(&m0.to_vec(), (rows, cols), edge, update);
                for b in backends() {
                    let mut m = m0.clone();
                    let r = MapOverlap::new(smooth, (1, 1))
                        .edge(edge)
                        .update(update)
                        .backend(b)
                        .run_in_place(&mut m);
                    expect(
                        b,
                        r,
                        || m.to_vec(),
                        &want,
                        &format!("{update:?} {rows}x{cols} {edge:?}"),
                    );
                }
            }
        }
    }
}

#[test]
fn red_and_black_out_of_place_write_only_their_cells() {
    let (rows, cols) = (9, 14);
    let m = grid(rows, cols, 3);
    let full = {
        let mut o = Matrix::filled(rows, cols, 0i64);
        MapOverlap::new(smooth, (1, 1))
            .edge(Edge::Cyclic)
            .backend(Backend::Cpu)
            .run(&m, &mut o)
            .unwrap();
        o
    };
    for (update, parity) in [(Update::Red, 0), (Update::Black, 1)] {
        let want: Vec<i64> = (0..rows * cols)
            .map(|p| {
                if (p / cols + p % cols) % 2 == parity {
                    full.to_vec()[p]
                } else {
                    55
                }
            })
            .collect();
        for b in backends() {
            let mut o = Matrix::filled(rows, cols, 55i64);
            let r = MapOverlap::new(smooth, (1, 1))
                .edge(Edge::Cyclic)
                .update(update)
                .backend(b)
                .run(&m, &mut o);
            expect(b, r, || o.to_vec(), &want, &format!("{update:?}"));
        }
    }
    let mut o = Matrix::filled(rows, cols, 0i64);
    let err = MapOverlap::new(smooth, (1, 1))
        .update(Update::RedBlack)
        .run(&m, &mut o)
        .unwrap_err();
    assert!(err.to_string().contains("run_in_place"), "{err}");
}

#[test]
fn mismatched_windows_and_containers_are_typed_errors() {
    let a = grid(6, 7, 0);
    let b = grid(7, 6, 0);
    let mut out = Matrix::zeroed(6, 7);
    for bk in backends() {
        let err = MapOverlap::new(curl, (1, 1))
            .backend(bk)
            .run(&a, &b, &mut out)
            .unwrap_err();
        assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
        let v = Vector::from(vec![1i64; 42]);
        let err = MapOverlap::new(hot, (1, 1))
            .arrays((&v,))
            .uniforms((1,))
            .backend(bk)
            .run(&a, &mut out)
            .unwrap_err();
        assert!(err.to_string().contains("Mat<T>"), "{err}");
        let err = MapOverlap::new(hot, (1, 1))
            .arrays((&a,))
            .backend(bk)
            .run(&a, &mut out)
            .unwrap_err();
        assert!(err.to_string().contains("uniform"), "{err}");
        let mut small = Matrix::zeroed(1, 7);
        let err = MapOverlap::new(curl, (1, 1))
            .backend(bk)
            .run(&small.clone(), &small.clone(), &mut small)
            .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        let mut m = a.clone();
        let err = MapOverlap::new(curl, (1, 1))
            .backend(bk)
            .run_in_place(&mut m)
            .unwrap_err();
        assert!(err.to_string().contains("windowed inputs"), "{err}");
        let v1 = Vector::from(vec![1i64; 5]);
        let mut o1 = Vector::zeroed(5);
        let err = MapOverlap::new(line, 1)
            .arrays((&v1,))
            .uniforms((1,))
            .update(Update::Red)
            .backend(bk)
            .run(&v1, &v1, &mut o1)
            .unwrap_err();
        assert!(err.to_string().contains("2D"), "{err}");
    }
    // An empty matrix with radius 0: nothing to compute, no error.
    let e = Matrix::<i64>::zeroed(0, 0);
    let mut eo = Matrix::<i64>::zeroed(0, 0);
    for bk in backends() {
        MapOverlap::new(four, (0, 0))
            .backend(bk)
            .run(&e, &e, &e, &e, &mut eo)
            .unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn two_windows_match_the_model(rows in 2usize..40, cols in 2usize..40, e in 0usize..4, seed in 0i64..100) {
        let edge = EDGES[e];
        let ms = [grid(rows, cols, seed), grid(rows, cols, seed + 1)];
        let vs = [ms[0].to_vec(), ms[1].to_vec()];
        let want = model_2d((rows, cols), (1, 1), edge, 2, &vs, &vec![0; rows * cols], |_, _, w| {
            w(0, 0, 1) - w(0, 0, 0) + 3 * (w(1, 1, 0) - w(1, 0, 0)) + w(1, -1, -1)
        });
        for b in backends() {
            let mut out = Matrix::zeroed(rows, cols);
            MapOverlap::new(curl, (1, 1)).edge(edge).pad(2).backend(b).run(&ms[0], &ms[1], &mut out).unwrap();
            prop_assert_eq!(out.to_vec(), want.clone());
        }
    }
}

/// Two windows and a table read past its end from the output's `#[index]`.
#[userfn]
pub fn past_end(
    #[index] (i, j): (usize, usize),
    a: Window2<i32>,
    b: Window2<i32>,
    k: &[i32],
) -> i32 {
    a[(0, 0)] + b[(1, 1)] + k[i * 3 + j]
}

#[test]
fn checked_general_form_reports_the_bad_index_and_leaves_the_output() {
    let (rows, cols) = (6, 3);
    let a = Matrix::from_fn(rows, cols, |i, j| (i * cols + j) as i32);
    let short = Vector::from(vec![1i32; 7]);
    for b in backends() {
        let mut out = Matrix::filled(rows, cols, -1i32);
        let r = MapOverlap::new(past_end, (1, 1))
            .edge(Edge::Duplicate)
            .arrays((&short,))
            .backend(b)
            .checked(true)
            .run(&a, &a, &mut out);
        match r {
            Err(Error::UserFunction {
                function,
                index,
                len,
                ..
            }) => {
                assert_eq!(function, "past_end", "{b:?}");
                assert_eq!(len, Some(7), "{b:?}");
                assert!(
                    index.is_some_and(|i| (7..18).contains(&i)),
                    "{b:?}: {index:?}"
                );
            }
            other => panic!("{b:?}: expected Err(UserFunction), got {other:?}"),
        }
        assert_eq!(
            out.to_vec(),
            vec![-1; rows * cols],
            "{b:?}: output untouched"
        );
        // Long enough: every backend computes the model's result.
        let long = Vector::from((0..18).collect::<Vec<i32>>());
        MapOverlap::new(past_end, (1, 1))
            .edge(Edge::Duplicate)
            .arrays((&long,))
            .backend(b)
            .checked(true)
            .run(&a, &a, &mut out)
            .unwrap_or_else(|e| panic!("{b:?}: {e}"));
        let want: Vec<i32> = (0..rows * cols)
            .map(|p| {
                let (i, j) = (p / cols, p % cols);
                let (i1, j1) = ((i + 1).min(rows - 1), (j + 1).min(cols - 1));
                a[(i, j)] + a[(i1, j1)] + p as i32
            })
            .collect();
        assert_eq!(out.to_vec(), want, "{b:?}");
    }
}

/// A 5-point stencil with an index, a container and a uniform: it reads its window only at
/// its own cell and at cells of the other colour, so a colour sweep on a GPU updates the
/// matrix where it lies (no second matrix).
#[userfn]
pub fn five(#[index] (i, j): (usize, usize), w: Window2<i64>, v: &[i64], #[uniform] k: i64) -> i64 {
    (w[(-1, 0)] + w[(1, 0)] + w[(0, -1)] + w[(0, 1)] - 3 * w[(0, 0)]) / 2
        + k * v[(i + 2 * j) % v.len()]
}

/// Offsets of the other colour up to 2 away (in place on the GPUs except with
/// `Edge::Duplicate`, whose clamping could map them onto cells of the sweep's colour).
#[userfn]
pub fn knight(w: Window2<i64>) -> i64 {
    w[(2, -1)] - w[(-1, 2)] + 3 * w[(0, -1)] + w[(0, 0)] / 2
}

/// SkePU 3's heat: four neighbours of the other colour, in `f32`.
#[userfn]
pub fn heat4(w: Window2<f32>) -> f32 {
    (w[(-1, 0)] + w[(1, 0)] + w[(0, -1)] + w[(0, 1)]) * 0.25
}

/// The model of the sweeps of an in-place update with window function `f` of radius `r`.
fn model_sweeps(
    m: &[i64],
    dims: (usize, usize),
    r: (usize, usize),
    edge: Edge,
    update: Update,
    f: impl Fn(usize, usize, &dyn Fn(usize, isize, isize) -> i64) -> i64,
) -> Vec<i64> {
    let sweeps: &[usize] = match update {
        Update::Red => &[0],
        Update::Black => &[1],
        _ => &[0, 1],
    };
    let mut cur = m.to_vec();
    for &parity in sweeps {
        let snapshot = cur.clone();
        cur = model_2d(
            dims,
            r,
            edge,
            0,
            std::slice::from_ref(&snapshot),
            &snapshot,
            |i, j, w| {
                if (i + j) % 2 != parity {
                    return snapshot[i * dims.1 + j];
                }
                f(i, j, w)
            },
        );
    }
    cur
}

#[test]
fn colour_sweeps_in_place_match_the_model_every_edge() {
    let v: Vec<i64> = (0..7).map(|x| x * 3 - 5).collect();
    let vv = Vector::from(v.clone());
    let shapes = [
        (2, 2),
        (2, 3),
        (4, 6),
        (7, 13),
        (31, 17),
        (64, 66),
        (131, 257),
    ];
    for (rows, cols) in shapes {
        for edge in EDGES {
            for update in [Update::Red, Update::Black, Update::RedBlack] {
                let m0 = grid(rows, cols, 5);
                let what = format!("{update:?} {rows}x{cols} {edge:?}");
                let want = model_sweeps(
                    &m0.to_vec(),
                    (rows, cols),
                    (1, 1),
                    edge,
                    update,
                    |i, j, w| {
                        (w(0, -1, 0) + w(0, 1, 0) + w(0, 0, -1) + w(0, 0, 1) - 3 * w(0, 0, 0)) / 2
                            + 4 * v[(i + 2 * j) % v.len()]
                    },
                );
                for b in backends() {
                    let mut m = m0.clone();
                    let r = MapOverlap::new(five, (1, 1))
                        .arrays((&vv,))
                        .uniforms((4,))
                        .edge(edge)
                        .pad(0)
                        .update(update)
                        .checked(false)
                        .backend(b)
                        .run_in_place(&mut m);
                    expect(b, r, || m.to_vec(), &want, &format!("five {what}"));
                }
                if rows < 4 || cols < 4 {
                    continue;
                }
                let want = model_sweeps(
                    &m0.to_vec(),
                    (rows, cols),
                    (2, 2),
                    edge,
                    update,
                    |_, _, w| w(0, 2, -1) - w(0, -1, 2) + 3 * w(0, 0, -1) + w(0, 0, 0) / 2,
                );
                for b in backends() {
                    let mut m = m0.clone();
                    let r = MapOverlap::new(knight, (2, 2))
                        .edge(edge)
                        .update(update)
                        .checked(false)
                        .backend(b)
                        .run_in_place(&mut m);
                    expect(b, r, || m.to_vec(), &want, &format!("knight {what}"));
                }
            }
        }
    }
}

#[test]
fn heat_red_black_in_place_is_bit_identical_to_cpu() {
    for (rows, cols) in [(3, 3), (17, 29), (130, 258)] {
        let m0 = Matrix::from_fn(rows, cols, |i, j| {
            ((i * 7 + j * 13) % 19) as f32 * 0.37 - 2.0
        });
        let sweeps = |b: Backend| -> Vec<u32> {
            let mut m = m0.clone();
            let sweep = MapOverlap::new(heat4, (1, 1))
                .edge(Edge::None)
                .update(Update::RedBlack)
                .checked(false)
                .backend(b);
            for _ in 0..5 {
                sweep
                    .run_in_place(&mut m)
                    .unwrap_or_else(|e| panic!("{b:?} {rows}x{cols}: {e}"));
            }
            m.to_vec().into_iter().map(f32::to_bits).collect()
        };
        let want = sweeps(Backend::Cpu);
        for b in backends() {
            assert_eq!(sweeps(b), want, "{b:?} {rows}x{cols}");
        }
    }
}

#[test]
fn a_colour_sweep_on_a_gpu_updates_the_matrix_where_it_lies() {
    // Through a second matrix, a `Red` sweep swaps that matrix in (the host buffer
    // changes); in place it stays. `five` reads the other colour only, `smooth` does not.
    // Unchecked: a checked sweep goes through a second matrix (a fault leaves `m` as it was).
    let v = Vector::from(vec![1i64, 2, 3]);
    for b in [Backend::OpenCl, Backend::Cuda]
        .into_iter()
        .filter(|&b| available(b))
    {
        let mut m = grid(40, 70, 1);
        let before = m.as_slice().as_ptr();
        let want = {
            let mut c = m.clone();
            MapOverlap::new(five, (1, 1))
                .arrays((&v,))
                .uniforms((2,))
                .update(Update::Red)
                .backend(Backend::Cpu)
                .run_in_place(&mut c)
                .unwrap();
            c.to_vec()
        };
        MapOverlap::new(five, (1, 1))
            .arrays((&v,))
            .uniforms((2,))
            .update(Update::Red)
            .checked(false)
            .backend(b)
            .run_in_place(&mut m)
            .unwrap_or_else(|e| panic!("{b:?}: {e}"));
        assert_eq!(m.to_vec(), want, "{b:?}");
        // A CUDA call split over several device slots (`SKEL_CUDA_DEVICES=0,0`) sweeps
        // through a second matrix by design: only one slot updates in place.
        if b == Backend::OpenCl || super::devices::slots() == 1 {
            assert_eq!(
                m.as_slice().as_ptr(),
                before,
                "{b:?}: the sweep did not run in place"
            );
        }
        let before = m.as_slice().as_ptr();
        MapOverlap::new(smooth, (1, 1))
            .update(Update::Red)
            .checked(false)
            .backend(b)
            .run_in_place(&mut m)
            .unwrap_or_else(|e| panic!("{b:?}: {e}"));
        assert_ne!(
            m.as_slice().as_ptr(),
            before,
            "{b:?}: `smooth` reads its own colour"
        );
    }
}
