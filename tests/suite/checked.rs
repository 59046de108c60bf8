//! The same answer or the same error on every backend: integer arithmetic wraps at the
//! extremes everywhere (the `cpu` oracle runs in this debug build, where plain Rust would
//! panic), and on the host backends a fault or a panic inside a user function is an
//! `Err(Error::UserFunction)` with the same function, index and length, inputs intact and
//! the containers usable afterwards.

use skel::prelude::*;

use super::available;

const BACKENDS: [Backend; 4] = [Backend::Cpu, Backend::Rayon, Backend::OpenCl, Backend::Cuda];
const HOST: [Backend; 2] = [Backend::Cpu, Backend::Rayon];

fn backends() -> impl Iterator<Item = Backend> {
    BACKENDS.into_iter().filter(|&b| available(b))
}

/// The extremes of `i32` and their neighbours, against each other.
fn extremes_i32() -> (Vec<i32>, Vec<i32>) {
    let v = [
        i32::MIN,
        i32::MIN + 1,
        -2,
        -1,
        0,
        1,
        2,
        31,
        32,
        33,
        64,
        i32::MAX - 1,
        i32::MAX,
    ];
    let a: Vec<i32> = v.iter().flat_map(|&x| v.iter().map(move |_| x)).collect();
    let b: Vec<i32> = v.iter().flat_map(|_| v.iter().copied()).collect();
    (a, b)
}

#[userfn]
pub fn ops_i32(a: i32, b: i32) -> [i32; 10] {
    let mut c = a;
    c *= b;
    c -= i32::MAX;
    [
        a + b,
        a - b,
        a * b,
        -a,
        a << b,
        a >> b,
        a / (b | 1),
        a % (b | 1),
        c,
        a.abs() + b.pow(3),
    ]
}

fn ops_i32_want(a: i32, b: i32) -> [i32; 10] {
    [
        a.wrapping_add(b),
        a.wrapping_sub(b),
        a.wrapping_mul(b),
        a.wrapping_neg(),
        a.wrapping_shl(b as u32),
        a.wrapping_shr(b as u32),
        a.wrapping_div(b | 1),
        a.wrapping_rem(b | 1),
        a.wrapping_mul(b).wrapping_sub(i32::MAX),
        a.wrapping_abs().wrapping_add(b.wrapping_pow(3)),
    ]
}

#[userfn]
pub fn ops_u16(a: u16, b: u16) -> u16 {
    // u16 * u16 promotes to C's `int`, where 65535 * 65535 would overflow
    a * b * a + (a << b) - (b >> 17u32)
}

#[userfn]
pub fn ops_i64(a: i64, b: i64) -> i64 {
    a * b - (a << (b & 127)) + -b
}

#[userfn]
pub fn add_i32(a: i32, b: i32) -> i32 {
    a + b
}

#[test]
fn integer_arithmetic_wraps_at_the_extremes_on_every_backend() {
    let (ha, hb) = extremes_i32();
    let want: Vec<[i32; 10]> = ha
        .iter()
        .zip(&hb)
        .map(|(&a, &b)| ops_i32_want(a, b))
        .collect();
    let (a, b) = (Vector::from(ha.clone()), Vector::from(hb.clone()));
    let ha16: Vec<u16> = ha.iter().map(|&x| x as u16).collect();
    let hb16: Vec<u16> = hb.iter().map(|&x| x as u16).collect();
    let want16: Vec<u16> = ha16
        .iter()
        .zip(&hb16)
        .map(|(&a, &b)| {
            a.wrapping_mul(b)
                .wrapping_mul(a)
                .wrapping_add(a.wrapping_shl(b as u32))
                .wrapping_sub(b.wrapping_shr(17))
        })
        .collect();
    let h64: (Vec<i64>, Vec<i64>) = (
        ha.iter().map(|&x| (x as i64) << 32 | 7).collect(),
        hb.iter().map(|&x| x as i64 * 3).collect(),
    );
    let want64: Vec<i64> = h64
        .0
        .iter()
        .zip(&h64.1)
        .map(|(&a, &b)| {
            a.wrapping_mul(b)
                .wrapping_sub(a.wrapping_shl((b & 127) as u32))
                .wrapping_add(b.wrapping_neg())
        })
        .collect();
    let sum: i32 = ha.iter().fold(0i32, |s, &x| s.wrapping_add(x));
    for be in backends() {
        let mut out = Vector::filled(ha.len(), [0i32; 10]);
        Map::new(ops_i32).backend(be).run(&a, &b, &mut out).unwrap();
        assert_eq!(out.to_vec(), want, "{be}: i32 operators");

        let (a16, b16) = (Vector::from(ha16.clone()), Vector::from(hb16.clone()));
        let mut out16 = Vector::zeroed(ha.len());
        Map::new(ops_u16)
            .backend(be)
            .run(&a16, &b16, &mut out16)
            .unwrap();
        assert_eq!(out16.to_vec(), want16, "{be}: u16 operators");

        let (a64, b64) = (Vector::from(h64.0.clone()), Vector::from(h64.1.clone()));
        let mut out64 = Vector::zeroed(ha.len());
        Map::new(ops_i64)
            .backend(be)
            .run(&a64, &b64, &mut out64)
            .unwrap();
        assert_eq!(out64.to_vec(), want64, "{be}: i64 operators");

        assert_eq!(
            Reduce::new(add_i32).backend(be).run(&a).unwrap(),
            sum,
            "{be}: Reduce wraps"
        );
        let mut scan = Vector::zeroed(ha.len());
        Scan::new(add_i32).backend(be).run(&a, &mut scan).unwrap();
        assert_eq!(scan[ha.len() - 1], sum, "{be}: Scan wraps");
    }
}

#[userfn]
pub fn lookup(#[index] i: usize, t: &[f32]) -> f32 {
    t[i * 3]
}

/// Row `i` of `m`, column 0.
#[userfn]
pub fn mat_at(#[index] i: usize, m: Mat<i32>) -> i32 {
    m[(i, 0)]
}

/// Row 0 of `m`, column `i + 3`.
#[userfn]
pub fn mat_col(#[index] i: usize, m: Mat<i32>) -> i32 {
    m[(0, i + 3)]
}

#[userfn]
pub fn reverse(#[index] i: usize, t: &[f32]) -> f32 {
    t[t.len() - 1 - i]
}

#[userfn]
pub fn bins(x: u32) -> u32 {
    let mut h = [0u32; 4];
    h[x as usize] += 1;
    h[0] + h[3]
}

#[userfn]
pub fn ratio(a: i32, b: i32) -> i32 {
    a / b
}

#[userfn]
pub fn modulo(a: i64, b: i64) -> i64 {
    a % b
}

#[userfn]
pub fn inner(x: i32) -> i32 {
    100 / x
}

#[userfn]
pub fn outer(a: i32, b: i32) -> i32 {
    inner(a) + inner(b)
}

#[userfn]
pub fn reach(w: Window<i32>, #[uniform] k: i32) -> i32 {
    w[k as isize]
}

#[userfn]
pub fn keep_if_div(x: i32) -> bool {
    10 % x == 0
}

#[userfn]
pub fn pair_div(a: i32, b: i32) -> i32 {
    a / b
}

#[userfn]
pub fn bad_clamp(x: f32, #[uniform] lo: f32) -> f32 {
    x.clamp(lo, 0.0)
}

/// `(function, index, len)` of a `UserFunction` error; fails on any other result.
fn fault<T: std::fmt::Debug>(r: Result<T>) -> (String, Option<i64>, Option<u64>, String) {
    match r {
        Err(Error::UserFunction {
            function,
            what,
            index,
            len,
        }) => (function, index, len, what),
        other => panic!("expected Err(UserFunction), got {other:?}"),
    }
}

#[userfn]
pub fn reach2(w: Window2<i32>, #[uniform] dr: i32, #[uniform] dc: i32) -> i32 {
    w[(dr as isize, dc as isize)]
}

/// A combiner reading a local array with its right operand.
#[userfn]
pub fn pick(a: u32, b: u32) -> u32 {
    let t = [1u32, 2, 3];
    t[b as usize] + a
}

#[userfn]
pub fn add_u32(a: u32, b: u32) -> u32 {
    a + b
}

#[userfn]
pub fn same(x: i32) -> i32 {
    x
}

#[userfn]
pub fn pair_sub(a: i32, b: i32) -> i32 {
    a - b
}

#[userfn]
pub fn pair_mat(a: i32, b: i32, m: Mat<i32>) -> i32 {
    m[(a as usize, 0)] + b
}

#[userfn]
pub fn look(x: u32, t: &[f32]) -> f32 {
    t[x as usize]
}

/// The modes a backend is probed in: the host backends check in both.
fn modes(be: Backend) -> Vec<bool> {
    match be {
        Backend::Cpu | Backend::Rayon => vec![true, false],
        _ => vec![true],
    }
}

/// `r` is the `Err(UserFunction)` of `function` with `index` and `len`, and `what` says
/// `says`.
#[track_caller]
fn expect<T: std::fmt::Debug>(
    be: Backend,
    r: Result<T>,
    (function, index, len): (&str, i64, Option<u64>),
    says: &str,
) {
    let (f, i, n, what) = fault(r);
    assert_eq!(
        (f.as_str(), i, n),
        (function, Some(index), len),
        "{be}: {what}"
    );
    assert!(what.contains(says), "{be}: `{what}` does not say `{says}`");
}

/// Every skeleton other than Map and MapArray, on every backend: the same `Err` (function,
/// what, index, length) for a division or remainder by zero, a local array, a `&[T]` or
/// `Mat` container argument and a window read out of range, in the combining function too;
/// outputs keep their old values, inputs stay intact, and the next call works.
#[test]
fn faults_of_every_skeleton_are_the_same_err_on_every_backend() {
    let z = Vector::from(vec![4, 0]);
    let p = Vector::from(vec![0u32, 1, 7]);
    for be in backends() {
        for checked in modes(be) {
            // Reduce and Scan: a fault of the combining function
            let r = Reduce::new(ratio).backend(be).checked(checked).run(&z);
            expect(be, r, ("ratio", 4, None), "division of 4 by zero");
            // the start folded with the device's result on the host
            let r = Reduce::new(ratio)
                .start(8)
                .backend(be)
                .checked(checked)
                .run(&Vector::from(vec![0]));
            expect(be, r, ("ratio", 8, None), "division of 8 by zero");
            let r = Reduce::new(pick).backend(be).checked(checked).run(&p);
            expect(be, r, ("pick", 7, Some(3)), "index 7 out of range");
            let m = Matrix::from_vec(2, 2, vec![4, 0, 8, 0]).unwrap();
            let mut per = Vector::filled(2, -1);
            let r = Reduce::new(ratio)
                .backend(be)
                .checked(checked)
                .run_rows(&m, &mut per);
            let (f, _, _, what) = fault(r);
            assert_eq!(f, "ratio", "{be}: {what}");
            let mc = Matrix::from_vec(2, 2, vec![4, 8, 0, 8]).unwrap();
            let r = Reduce::new(ratio)
                .backend(be)
                .checked(checked)
                .run_cols(&mc, &mut per);
            expect(be, r, ("ratio", 4, None), "division of 4 by zero");
            let mut s = Vector::filled(3, 9u32);
            let r = Scan::new(pick).backend(be).checked(checked).run(&p, &mut s);
            expect(be, r, ("pick", 7, Some(3)), "index 7 out of range");
            let mut sz = Vector::filled(2, -1);
            let r = Scan::new(ratio)
                .backend(be)
                .checked(checked)
                .run(&z, &mut sz);
            expect(be, r, ("ratio", 4, None), "division of 4 by zero");
            if checked {
                assert_eq!(s.to_vec(), vec![9; 3], "{be}: no results in the output");
                assert_eq!(per.to_vec(), vec![-1; 2], "{be}: no results in the output");
            }

            // MapReduce: the map function, a container argument, the reduce function
            let (la, lb) = (Vector::from(vec![5i64]), Vector::from(vec![0i64]));
            let r = MapReduce::new(modulo, add_i64)
                .backend(be)
                .checked(checked)
                .run(&la, &lb);
            expect(be, r, ("modulo", 5, None), "remainder of 5 by zero");
            let table = Vector::from(vec![1.0f32, 2.0, 3.0, 4.0]);
            let r = MapReduce::new(look, super::add_f32)
                .arrays((&table,))
                .backend(be)
                .checked(checked)
                .run(&p);
            expect(be, r, ("look", 7, Some(4)), "index 7 out of range");
            let r = MapReduce::new(same, ratio)
                .backend(be)
                .checked(checked)
                .run(&z);
            expect(be, r, ("ratio", 4, None), "division of 4 by zero");

            // MapPairs and MapPairsReduce (rows and columns)
            let (v, h) = (Vector::from(vec![4]), Vector::from(vec![2, 0]));
            let mut pm = Matrix::filled(1, 2, -1);
            let r = MapPairs::new(pair_div)
                .backend(be)
                .checked(checked)
                .run(&v, &h, &mut pm);
            expect(be, r, ("pair_div", 4, None), "division of 4 by zero");
            let mat = Matrix::from_vec(2, 1, vec![10, 20]).unwrap();
            let (mv, one) = (Vector::from(vec![0, 5]), Vector::from(vec![1]));
            let r = MapPairs::new(pair_mat)
                .arrays((&mat,))
                .backend(be)
                .checked(checked)
                .run(&mv, &one, &mut Matrix::zeroed(2, 1));
            expect(be, r, ("pair_mat", 5, Some(2)), "index 5 out of range");
            let mut rows = Vector::filled(1, -1);
            let r = MapPairsReduce::new(pair_div, add_i32)
                .backend(be)
                .checked(checked)
                .run_rows(&v, &h, &mut rows);
            expect(be, r, ("pair_div", 4, None), "division of 4 by zero");
            let mut cols = Vector::filled(2, -1);
            let r = MapPairsReduce::new(pair_div, add_i32)
                .backend(be)
                .checked(checked)
                .run_cols(&v, &h, &mut cols);
            expect(be, r, ("pair_div", 4, None), "division of 4 by zero");
            // Long columns (rayon folds them in blocks while mapping the next block).
            let r = MapPairsReduce::new(pair_div, add_i32)
                .backend(be)
                .checked(checked)
                .run_cols(&Vector::from(vec![4; 40_000]), &h, &mut cols);
            expect(be, r, ("pair_div", 4, None), "division of 4 by zero");
            let h2 = Vector::from(vec![0, 4]);
            for r in [
                MapPairsReduce::new(pair_sub, ratio)
                    .backend(be)
                    .checked(checked)
                    .run_rows(&v, &h2, &mut rows),
                MapPairsReduce::new(pair_sub, ratio)
                    .backend(be)
                    .checked(checked)
                    .run_cols(&Vector::from(vec![8, 4]), &v, &mut Vector::filled(1, -1)),
            ] {
                expect(be, r, ("ratio", 4, None), "division of 4 by zero");
            }
            if checked {
                assert_eq!(pm.to_vec(), vec![-1, -1], "{be}: no results in the output");
                assert_eq!(rows.to_vec(), vec![-1], "{be}: no results in the output");
                assert_eq!(
                    cols.to_vec(),
                    vec![-1, -1],
                    "{be}: no results in the output"
                );
            }

            // Filter
            let mut kept = Vector::filled(2, 7);
            let r = Filter::new(keep_if_div)
                .backend(be)
                .checked(checked)
                .run(&z, &mut kept);
            expect(be, r, ("keep_if_div", 10, None), "remainder of 10 by zero");
            if checked {
                assert_eq!(kept.to_vec(), vec![7, 7], "{be}: no results in the output");
            }

            // a window offset beyond the radius: vector, rows, columns, 2D
            let v4 = Vector::from(vec![1, 2, 3, 4]);
            let mut o = Vector::filled(4, -1);
            let r = MapOverlap::new(reach, 1)
                .uniforms((2,))
                .backend(be)
                .checked(checked)
                .run(&v4, &mut o);
            expect(be, r, ("reach", 2, Some(3)), "window offset 2 outside");
            if checked {
                assert_eq!(o.to_vec(), vec![-1; 4], "{be}: no results in the output");
            }
            let m3 = Matrix::from_fn(6, 6, |r, c| (r * 6 + c) as i32);
            let mut mo = Matrix::filled(6, 6, -1);
            for (rowwise, k) in [(true, -3), (false, 3)] {
                let s = MapOverlap::new(reach, 2).uniforms((k,));
                let s = if rowwise { s.rowwise() } else { s.colwise() };
                let r = s.backend(be).checked(checked).run(&m3, &mut mo);
                expect(be, r, ("reach", k as i64, Some(5)), "outside a window of 5");
            }
            for (dr, dc, bad, len) in [(2, 0, 2, 3), (0, -3, -3, 5), (2, 9, 2, 3)] {
                let r = MapOverlap::new(reach2, (1, 2))
                    .uniforms((dr, dc))
                    .backend(be)
                    .checked(checked)
                    .run(&m3, &mut mo);
                expect(be, r, ("reach2", bad, Some(len)), "window offset");
            }
            if checked {
                assert_eq!(mo.to_vec(), vec![-1; 36], "{be}: no results in the output");
            }
            MapOverlap::new(reach, 1)
                .uniforms((-1,))
                .backend(be)
                .checked(checked)
                .run(&v4, &mut o)
                .unwrap();
            assert_eq!(o.to_vec(), vec![1, 1, 2, 3], "{be}: usable afterwards");
            assert_eq!(v4.to_vec(), vec![1, 2, 3, 4], "{be}: input intact");
            assert_eq!(z.to_vec(), vec![4, 0], "{be}: input intact");
        }
    }
}

/// Without a fault, checked and unchecked calls of every skeleton give the `cpu` values.
#[test]
fn checked_and_unchecked_agree_with_cpu_on_valid_programs() {
    let p = Vector::from(vec![0u32, 1, 2, 1, 0, 2, 2]);
    let q = Vector::from(vec![3, -7, 11, 2, -5]);
    let m = Matrix::from_fn(4, 5, |r, c| (r * 5 + c) as i32 - 7);
    let table = Vector::from(vec![1.0f32, 2.0, 3.0, 4.0]);
    let run = |be: Backend, checked: bool| -> Result<_> {
        let mut scan = Vector::zeroed(7);
        Scan::new(add_u32)
            .backend(be)
            .checked(checked)
            .run(&p, &mut scan)?;
        let mut ov = Vector::zeroed(5);
        MapOverlap::new(reach, 2)
            .uniforms((-2,))
            .backend(be)
            .checked(checked)
            .run(&q, &mut ov)?;
        let mut o2 = Matrix::zeroed(4, 5);
        MapOverlap::new(reach2, (1, 2))
            .uniforms((1, -2))
            .backend(be)
            .checked(checked)
            .run(&m, &mut o2)?;
        let mut pm = Matrix::zeroed(5, 5);
        MapPairs::new(pair_sub)
            .backend(be)
            .checked(checked)
            .run(&q, &q, &mut pm)?;
        let mut pr = Vector::zeroed(5);
        MapPairsReduce::new(pair_sub, add_i32)
            .backend(be)
            .checked(checked)
            .run_cols(&q, &q, &mut pr)?;
        let mut rows = Vector::zeroed(4);
        Reduce::new(add_i32)
            .backend(be)
            .checked(checked)
            .run_rows(&m, &mut rows)?;
        Ok((
            Reduce::new(add_u32).backend(be).checked(checked).run(&p)?,
            MapReduce::new(look, super::add_f32)
                .arrays((&table,))
                .backend(be)
                .checked(checked)
                .run(&p)?,
            scan.to_vec(),
            ov.to_vec(),
            o2.to_vec(),
            pm.to_vec(),
            pr.to_vec(),
            rows.to_vec(),
        ))
    };
    let want = run(Backend::Cpu, true).unwrap();
    for be in backends() {
        for checked in [true, false] {
            assert_eq!(run(be, checked).unwrap(), want, "{be}, checked: {checked}");
        }
    }
}

#[userfn]
pub fn add_i64(a: i64, b: i64) -> i64 {
    a + b
}

#[test]
fn a_panic_in_a_user_function_is_an_err_and_leaves_the_pool_usable() {
    for be in HOST.into_iter().filter(|&b| available(b)) {
        let x = Vector::from_fn(100_000, |i| i as f32);
        let mut out = Vector::zeroed(100_000);
        let r = Map::new(bad_clamp)
            .uniforms((1.0,))
            .backend(be)
            .run(&x, &mut out);
        let (f, i, n, what) = fault(r);
        assert_eq!((f.as_str(), i, n), ("bad_clamp", None, None), "{be}");
        assert!(what.contains("clamp with min > max"), "{be}: {what}");
        // the same containers and the pool work on
        Map::new(bad_clamp)
            .uniforms((-1e9,))
            .backend(be)
            .run(&x, &mut out)
            .unwrap();
        assert_eq!((out[0], out[99_999]), (0.0, 0.0), "{be}");
        let s = Reduce::new(super::add_f32)
            .backend(be)
            .run(&Vector::filled(1000, 1.0f32))
            .unwrap();
        assert_eq!(s, 1000.0, "{be}");
    }
}

/// The backends whose Map and MapArray run checked user functions.
const CHECKED: [Backend; 4] = [Backend::Cpu, Backend::Rayon, Backend::OpenCl, Backend::Cuda];

#[test]
fn checked_map_and_map_array_give_the_same_err_on_every_backend() {
    let table = Vector::from(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
    // the fault is late: on a Rayon worker
    let xs = Vector::from_fn(40_000, |i| if i == 39_999 { 9 } else { i as u32 % 4 });
    let (a, b) = (
        Vector::from(vec![7, 8, i32::MIN]),
        Vector::from(vec![1, 0, -1]),
    );
    let z = Vector::from(vec![4, 0]);
    for be in CHECKED.into_iter().filter(|&b| available(b)) {
        let device = !matches!(be, Backend::Cpu | Backend::Rayon);
        // the host backends check in both modes
        for checked in if device {
            vec![true]
        } else {
            vec![true, false]
        } {
            let mut out = Vector::filled(5, -1.0f32);
            let r = MapArray::new(lookup)
                .backend(be)
                .checked(checked)
                .run_index(&table, &mut out);
            let (f, i, n, _) = fault(r);
            assert_eq!((f.as_str(), i, n), ("lookup", Some(6), Some(6)), "{be}");
            if checked {
                assert_eq!(
                    out.to_vec(),
                    vec![-1.0; 5],
                    "{be}: no results in the output"
                );
            }
            assert_eq!(
                table.to_vec(),
                vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
                "{be}: input intact"
            );
            let mut ok = Vector::zeroed(2);
            MapArray::new(lookup)
                .backend(be)
                .checked(checked)
                .run_index(&table, &mut ok)
                .unwrap();
            assert_eq!(
                ok.to_vec(),
                vec![1.0, 4.0],
                "{be}: the kernel computes, and the table is usable afterwards"
            );

            let mut out = Vector::filled(40_000, 3);
            let (f, i, n, _) = fault(
                Map::new(bins)
                    .backend(be)
                    .checked(checked)
                    .run(&xs, &mut out),
            );
            assert_eq!((f.as_str(), i, n), ("bins", Some(9), Some(4)), "{be}");
            if checked {
                assert!(
                    out.to_vec().iter().all(|&x| x == 3),
                    "{be}: a fault on a late worker leaves no results in the output"
                );
            }

            let mut q = Vector::filled(3, 5);
            let (f, i, n, what) = fault(
                Map::new(ratio)
                    .backend(be)
                    .checked(checked)
                    .run(&a, &b, &mut q),
            );
            assert_eq!((f.as_str(), i, n), ("ratio", Some(8), None), "{be}: {what}");
            if checked {
                assert_eq!(q.to_vec(), vec![5, 5, 5], "{be}: no results in the output");
            }
            let (f, ..) = fault(Map::new(outer).backend(be).checked(checked).run(
                &z,
                &z,
                &mut Vector::zeroed(2),
            ));
            assert_eq!(f, "inner", "{be}: the innermost function is named");
        }

        // a `Mat<T>` container argument read past its rows, then past its columns
        let m = Matrix::from_fn(2, 3, |r, c| (r * 3 + c) as i32);
        let mut o = Vector::filled(4, -1);
        let r = Map::new(mat_at)
            .arrays((&m,))
            .backend(be)
            .checked(true)
            .run_index(&mut o);
        let (f, i, n, what) = fault(r);
        assert_eq!(
            (f.as_str(), i, n),
            ("mat_at", Some(2), Some(2)),
            "{be}: {what}"
        );
        assert_eq!(o.to_vec(), vec![-1; 4], "{be}: no results in the output");
        let r = Map::new(mat_col)
            .arrays((&m,))
            .backend(be)
            .checked(true)
            .run_index(&mut o);
        let (f, i, n, what) = fault(r);
        assert_eq!(
            (f.as_str(), i, n),
            ("mat_col", Some(3), Some(3)),
            "{be}: {what}"
        );
        let mut ok = Vector::zeroed(2);
        Map::new(mat_at)
            .arrays((&m,))
            .backend(be)
            .checked(true)
            .run_index(&mut ok)
            .unwrap();
        assert_eq!(ok.to_vec(), vec![0, 3], "{be}");

        // `.len()` of the array, checked or not
        for checked in [true, false] {
            let mut back = Vector::zeroed(6);
            MapArray::new(reverse)
                .backend(be)
                .checked(checked)
                .run_index(&table, &mut back)
                .unwrap();
            assert_eq!(
                back.to_vec(),
                vec![6.0, 5.0, 4.0, 3.0, 2.0, 1.0],
                "{be}, checked: {checked}"
            );
        }

        // without a fault, checked and unchecked agree (MIN / -1 wraps)
        let b1 = Vector::from(vec![1, 3, -1]);
        let mut q = Vector::zeroed(3);
        for checked in [true, false] {
            Map::new(ratio)
                .backend(be)
                .checked(checked)
                .run(&a, &b1, &mut q)
                .unwrap();
            assert_eq!(q.to_vec(), vec![7, 2, i32::MIN], "{be}, checked: {checked}");
        }
    }
}
