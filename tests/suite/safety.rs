//! Memory safety and the same answer everywhere (issue 23): every host-side call of a user
//! function inside a skeleton (a device's `.start(v)` fold, partial merges) is an
//! `Err(UserFunction)` naming the function that failed; `clamp` faults alike on every
//! backend.

use skel::prelude::*;

use super::available;

const BACKENDS: [Backend; 4] = [Backend::Cpu, Backend::Rayon, Backend::OpenCl, Backend::Cuda];

fn backends() -> impl Iterator<Item = Backend> {
    BACKENDS.into_iter().filter(|&b| available(b))
}

/// `max`, but a negative left operand (only ever the start value here) is a `clamp` with
/// `min > max`: on a device that fold is the host's, after the kernels.
#[userfn]
pub fn max_from_positive(a: i64, b: i64) -> i64 {
    let hi = if a < 0 { 0 } else { i64::MAX };
    a.max(b).clamp(1, hi)
}

#[userfn]
pub fn plus_one(x: i64) -> i64 {
    x + 1
}

/// `(function, what)` of an `Err(UserFunction)`; fails on anything else.
#[track_caller]
fn user_fault<T: std::fmt::Debug>(be: Backend, r: Result<T>) -> (String, String) {
    match r {
        Err(Error::UserFunction { function, what, .. }) => (function, what),
        other => panic!("{be}: expected Err(UserFunction), got {other:?}"),
    }
}

#[test]
fn a_fault_in_the_start_fold_is_an_err_naming_the_function() {
    let v = Vector::from_fn(100_003, |i| (i % 1000) as i64 + 1);
    for be in backends() {
        for checked in [true, false] {
            let r = Reduce::new(max_from_positive)
                .backend(be)
                .checked(checked)
                .start(-1)
                .run(&v);
            let (function, what) = user_fault(be, r);
            assert_eq!(function, "max_from_positive", "{be} checked={checked}");
            assert!(what.contains("min > max"), "{be}: {what}");
            // a start the function takes: the same value everywhere
            let ok = Reduce::new(max_from_positive)
                .backend(be)
                .checked(checked)
                .start(3)
                .run(&v)
                .unwrap();
            assert_eq!(ok, 1000, "{be}");
        }
    }
}

#[test]
fn a_fault_in_the_reduce_function_of_map_reduce_names_it() {
    let v = Vector::from_fn(100_003, |i| (i % 1000) as i64);
    for be in backends() {
        for checked in [true, false] {
            let r = MapReduce::new(plus_one, max_from_positive)
                .backend(be)
                .checked(checked)
                .start(-5)
                .run(&v);
            let (function, what) = user_fault(be, r);
            assert_eq!(
                function, "max_from_positive",
                "{be} checked={checked}: {what}"
            );
            let ok = MapReduce::new(plus_one, max_from_positive)
                .backend(be)
                .checked(checked)
                .start(0)
                .run(&v)
                .unwrap();
            assert_eq!(ok, 1000, "{be}");
        }
    }
}

#[userfn]
pub fn clamp_by(x: f32, lo: f32, hi: f32) -> f32 {
    x.clamp(lo, hi)
}

#[userfn]
pub fn clamp_i32(x: i32, lo: i32, hi: i32) -> i32 {
    i32::clamp(x, lo, hi)
}

/// `clamp` with valid bounds is Rust's on every backend in every mode (a NaN input stays
/// NaN); `min > max` or a NaN bound is the same `Err` on every backend in checked mode, and
/// on the host backends in both modes; an unchecked device gives
/// `x < lo ? lo : x > hi ? hi : x` (documented in `skel::check`).
#[test]
fn clamp_is_the_same_on_every_backend() {
    let nan = f32::NAN;
    let ok = (
        vec![nan, -2.0, 0.5, 7.0, -0.0, 0.0],
        vec![0.0, -1.0, 0.0, 0.0, 0.0, -0.0],
        vec![1.0, 1.0, 1.0, 1.0, 1.0, 0.0],
    );
    let want: Vec<u32> = (0..ok.0.len())
        .map(|i| ok.0[i].clamp(ok.1[i], ok.2[i]).to_bits())
        .collect();
    let (x, lo, hi) = (Vector::from(ok.0), Vector::from(ok.1), Vector::from(ok.2));
    for be in backends() {
        for checked in [true, false] {
            let mut out = Vector::filled(x.len(), 9.0f32);
            Map::new(clamp_by)
                .backend(be)
                .checked(checked)
                .run(&x, &lo, &hi, &mut out)
                .unwrap();
            let got: Vec<u32> = out.to_vec().iter().map(|v| v.to_bits()).collect();
            assert_eq!(got, want, "{be} checked={checked}");
        }
    }
    // min > max, a NaN min, a NaN max
    let bad = (
        vec![0.5f32, 0.5, 0.5],
        vec![1.0f32, nan, 0.0],
        vec![0.0f32, 1.0, nan],
    );
    let (x, lo, hi) = (
        Vector::from(bad.0),
        Vector::from(bad.1),
        Vector::from(bad.2),
    );
    let (xi, loi, hii) = (
        Vector::from(vec![5i32, -5, 0]),
        Vector::from(vec![3i32, 3, 0]),
        Vector::from(vec![1i32, 1, 0]),
    );
    for be in backends() {
        let host = matches!(be, Backend::Cpu | Backend::Rayon);
        for checked in [true, false] {
            let mut out = Vector::filled(3, 9.0f32);
            let r = Map::new(clamp_by)
                .backend(be)
                .checked(checked)
                .run(&x, &lo, &hi, &mut out);
            let mut outi = Vector::filled(3, 9i32);
            let ri = Map::new(clamp_i32)
                .backend(be)
                .checked(checked)
                .run(&xi, &loi, &hii, &mut outi);
            if checked || host {
                let (function, what) = user_fault(be, r);
                assert_eq!(function, "clamp_by", "{be}");
                assert!(what.contains("clamp with min > max"), "{be}: {what}");
                let (function, _) = user_fault(be, ri);
                assert_eq!(function, "clamp_i32", "{be}");
                if checked {
                    assert_eq!(out.to_vec(), vec![9.0; 3], "{be}: old values kept");
                }
            } else {
                r.unwrap();
                ri.unwrap();
                // `x < lo ? lo : x > hi ? hi : x`
                assert_eq!(out[0], 1.0, "{be}");
                assert!(out[1].is_nan() || out[1] == 0.5, "{be}: {}", out[1]);
                assert_eq!(outi.to_vec(), vec![1, 3, 0], "{be}");
            }
        }
    }
}

#[userfn]
pub fn min_max(a: f64, b: f64) -> (f64, f64) {
    (a.min(b), f64::max(a, b))
}

/// `min`/`max` of floats: a NaN operand gives the other, two zeros give -0.0 (`min`) and
/// +0.0 (`max`), bit for bit on every backend.
#[test]
fn float_min_max_of_zeros_and_nans_are_the_same_everywhere() {
    let nan = f64::NAN;
    let a = vec![0.0, -0.0, nan, 1.0, nan, -0.0, 2.0, -3.0];
    let b = vec![-0.0, 0.0, 1.0, nan, nan, -0.0, 2.0, 4.0];
    let want_min = [-0.0f64, -0.0, 1.0, 1.0, nan, -0.0, 2.0, -3.0];
    let want_max = [0.0f64, 0.0, 1.0, 1.0, nan, -0.0, 2.0, 4.0];
    let (va, vb) = (Vector::from(a), Vector::from(b));
    for be in backends() {
        for checked in [true, false] {
            let mut lo = Vector::zeroed(va.len());
            let mut hi = Vector::zeroed(va.len());
            Map::new(min_max)
                .backend(be)
                .checked(checked)
                .run(&va, &vb, &mut (&mut lo, &mut hi))
                .unwrap();
            for i in 0..va.len() {
                let (l, h) = (lo[i], hi[i]);
                let same =
                    |x: f64, y: f64| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan());
                assert!(same(l, want_min[i]), "{be} min #{i}: {l:?}");
                assert!(same(h, want_max[i]), "{be} max #{i}: {h:?}");
            }
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
pub struct Pt {
    pub x: f32,
    pub y: f32,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
pub struct Near {
    pub d: f32,
    pub k: u32,
}

/// The squared distance of point `p` to centre `c` (column `k` of the pairs), the way the
/// k-means port computes it.
#[userfn]
pub fn to_centre(#[index] (_row, k): (usize, usize), p: Pt, c: Pt) -> Near {
    let (dx, dy) = (p.x - c.x, p.y - c.y);
    Near {
        d: dx.powi(2) + dy * dy,
        k: k as u32,
    }
}

/// The nearer of two, the first on a tie: the fold order decides ties.
#[userfn]
pub fn nearer(a: Near, b: Near) -> Near {
    if b.d < a.d {
        b
    } else {
        a
    }
}

/// The nearest row of `c` (a centre per row), the first on a tie.
#[userfn]
pub fn nearest(p: Pt, c: Mat<f32>) -> u32 {
    let mut best = 0u32;
    let mut best_d = f32::INFINITY;
    for k in 0..c.rows() {
        let (dx, dy) = (p.x - c[(k, 0)], p.y - c[(k, 1)]);
        let d = dx.powi(2) + dy * dy;
        if d < best_d {
            best_d = d;
            best = k as u32;
        }
    }
    best
}

/// A k-means membership step (MapPairsReduce rows with a struct result, and a Map with a
/// `Mat` argument): points on a grid and centres placed so that many points are exactly as
/// far from two centres; every backend gives the `cpu` membership bit for bit.
#[test]
fn k_means_membership_with_ties_is_the_same_everywhere() {
    for (points, centres) in [(300usize, 1000usize), (5000, 7), (2049, 64)] {
        let pts = Vector::from_fn(points, |i| Pt {
            x: (i % 37) as f32 * 0.25 - 4.0,
            y: (i / 37 % 41) as f32 * 0.5 - 10.0 + (i % 3) as f32 * 0.1,
        });
        // pairs of centres mirrored about x = 0 and y = 0: ties for points on the axes
        let cs: Vec<Pt> = (0..centres)
            .map(|k| {
                let s = if k % 2 == 0 { 1.0 } else { -1.0 };
                Pt {
                    x: s * ((k / 2) % 9) as f32 * 0.75,
                    y: if k % 4 < 2 { 1.0 } else { -1.0 } * ((k / 4) % 5) as f32,
                }
            })
            .collect();
        let flat: Vec<f32> = cs.iter().flat_map(|c| [c.x, c.y]).collect();
        let (cv, cm) = (
            Vector::from(cs),
            Matrix::from_vec(centres, 2, flat).unwrap(),
        );
        let mut want = Vector::zeroed(points);
        MapPairsReduce::new(to_centre, nearer)
            .backend(Backend::Cpu)
            .run_rows(&pts, &cv, &mut want)
            .unwrap();
        let mut want_map = Vector::zeroed(points);
        Map::new(nearest)
            .arrays((&cm,))
            .backend(Backend::Cpu)
            .run(&pts, &mut want_map)
            .unwrap();
        let ks: Vec<u32> = want.to_vec().iter().map(|n: &Near| n.k).collect();
        assert_eq!(ks, want_map.to_vec(), "the two forms agree on the cpu");
        for be in backends() {
            let mut got = Vector::zeroed(points);
            MapPairsReduce::new(to_centre, nearer)
                .backend(be)
                .run_rows(&pts, &cv, &mut got)
                .unwrap();
            for (i, (g, w)) in got.to_vec().iter().zip(want.to_vec()).enumerate() {
                assert!(
                    g.k == w.k && g.d.to_bits() == w.d.to_bits(),
                    "{be} {points}x{centres}: MISMATCH at {i}: {g:?} vs {w:?}"
                );
            }
            let mut got = Vector::zeroed(points);
            Map::new(nearest)
                .arrays((&cm,))
                .backend(be)
                .run(&pts, &mut got)
                .unwrap();
            assert_eq!(got.to_vec(), want_map.to_vec(), "{be} {points}x{centres}");
        }
    }
}

#[userfn]
pub fn far_read(#[index] i: usize, t: &[f32]) -> f32 {
    t[i + (1usize << 34)]
}

#[userfn]
pub fn far_bool(#[index] i: usize, t: &[bool]) -> bool {
    t[i * 1000 + 77]
}

#[userfn]
pub fn local_write(x: u32) -> u32 {
    let mut a = [0u32; 4];
    a[(x as usize) * 1000 + 5] = x;
    a[0] + a[3]
}

#[userfn]
pub fn far_window(w: Window<f32>, #[uniform] k: i32) -> f32 {
    w[k as isize]
}

#[userfn]
pub fn far_window2(w: Window2<f32>, #[uniform] k: i32) -> f32 {
    w[(k as isize, -(k as isize))]
}

#[userfn]
pub fn mat_far(#[index] i: usize, m: Mat<i32>) -> i32 {
    m[(i + 1000, i * 7 + 3)]
}

/// Out-of-range reads and writes never leave their buffers, in any mode (issue 23): a
/// checked call is `Err(UserFunction)` on every backend; an unchecked call returns an
/// unspecified but valid value on a device (an index is clamped into range) and the
/// host backends' `Err`. Before, unchecked OpenCL crashed (SIGSEGV) or returned other heap
/// data, and a `bool` read left bytes that were neither 0 nor 1.
#[test]
fn out_of_range_accesses_stay_inside_their_buffers() {
    let t = Vector::from_fn(1000, |i| i as f32);
    let bits = Vector::from_fn(100, |i| i % 3 == 0);
    let m = Matrix::from_fn(5, 4, |r, c| (r * 10 + c) as i32);
    let xs = Vector::from(vec![0u32, 1, 2, 3]);
    for be in backends() {
        for checked in [true, false] {
            let device = !matches!(be, Backend::Cpu | Backend::Rayon);
            let valid = device && !checked;
            let mut out = Vector::filled(64, -1.0f32);
            let r = MapArray::new(far_read)
                .backend(be)
                .checked(checked)
                .run_index(&t, &mut out);
            if valid {
                r.unwrap();
                let got = out.try_to_vec().unwrap();
                assert!(
                    got.iter().all(|v| t.as_slice().contains(v)),
                    "{be}: {got:?}"
                );
            } else {
                user_fault(be, r);
            }
            let mut flags = Vector::filled(4096, false);
            let r = MapArray::new(far_bool)
                .backend(be)
                .checked(checked)
                .run_index(&bits, &mut flags);
            if valid {
                r.unwrap();
                // every byte a valid bool: reading them back through u8 keeps 0 or 1
                let got = flags.try_to_vec().unwrap();
                let bytes: Vec<u8> = got.iter().map(|&b| b as u8).collect();
                assert!(bytes.iter().all(|&b| b <= 1), "{be}");
                // an unspecified but valid element: the clamp reads the last one
                assert!(
                    got.iter().all(|&b| !b || bits.as_slice().contains(&b)),
                    "{be}"
                );
            } else {
                user_fault(be, r);
            }
            let mut o = Vector::filled(4, 7u32);
            let r = Map::new(local_write)
                .backend(be)
                .checked(checked)
                .run(&xs, &mut o);
            if valid {
                r.unwrap();
                assert_eq!(o.try_to_vec().unwrap().len(), 4, "{be}");
            } else {
                user_fault(be, r);
            }
            let mut o = Vector::filled(8, 0i32);
            let r = Map::new(mat_far)
                .arrays((&m,))
                .backend(be)
                .checked(checked)
                .run_index(&mut o);
            if valid {
                r.unwrap();
                let got = o.try_to_vec().unwrap();
                assert!(
                    got.iter().all(|v| m.as_slice().contains(v)),
                    "{be}: {got:?}"
                );
            } else {
                user_fault(be, r);
            }
            let mut o = Vector::filled(1000, -1.0f32);
            let r = MapOverlap::new(far_window, 1)
                .uniforms((100_000_000,))
                .backend(be)
                .checked(checked)
                .run(&t, &mut o);
            if valid {
                r.unwrap();
                let got = o.try_to_vec().unwrap();
                assert!(
                    got.iter().all(|v| t.as_slice().contains(v) || *v == 0.0),
                    "{be}"
                );
            } else {
                user_fault(be, r);
            }
            let img = Matrix::from_fn(40, 30, |r, c| (r * 100 + c) as f32);
            let mut o = Matrix::filled(40, 30, -1.0f32);
            let r = MapOverlap::new(far_window2, (2, 2))
                .uniforms((100_000_000,))
                .backend(be)
                .checked(checked)
                .run(&img, &mut o);
            if valid {
                r.unwrap();
                let got = o.try_to_vec().unwrap();
                let inside = img.as_slice();
                // borders the default edge leaves untouched keep -1.0
                let bad: Vec<_> = got
                    .iter()
                    .filter(|v| !(inside.contains(v) || **v == 0.0 || **v == -1.0))
                    .take(8)
                    .collect();
                assert!(bad.is_empty(), "{be}: {bad:?}");
            } else {
                user_fault(be, r);
            }
            // the backend works on afterwards
            let s = Reduce::new(max_from_positive)
                .backend(be)
                .start(3)
                .run(&Vector::from(vec![5i64, 9, 2]))
                .unwrap();
            assert_eq!(s, 9, "{be}");
        }
    }
}

/// A 32 KiB local array (`skel::userfn::MAX_LOCAL_ARRAY_BYTES`), filled and read back in a
/// scrambled order; 8192 elements of `u32`.
#[userfn]
pub fn local_32k(x: u32) -> u32 {
    let mut a = [0u32; 8192];
    for i in 0..a.len() {
        a[i] = x.wrapping_mul(2654435761) ^ (i as u32);
    }
    let mut s = 0u32;
    for i in 0..a.len() {
        s = s.rotate_left(5) ^ a[(i * 7 + x as usize) % 8192];
    }
    s
}

/// Two 16 KiB local arrays in one function, the element read through a `&[u32]` too.
#[userfn]
pub fn local_2x16k(#[index] i: usize, t: &[u32]) -> u32 {
    let mut a = [0u32; 4096];
    let mut b = [0u32; 4096];
    for k in 0..a.len() {
        a[k] = t[(i + k) % t.len()] + k as u32;
        b[4095 - k] = a[k] ^ 0x5555;
    }
    a[i % 4096] ^ b[(i * 3) % 4096]
}

/// The same with a fold after it: a kernel whose work-group size is fixed when it is built.
#[userfn]
pub fn local_16k(x: u32) -> u32 {
    let mut a = [0u32; 4096];
    for i in 0..a.len() {
        a[i] = x ^ (i as u32);
    }
    a[(x as usize * 13) % 4096]
}

#[userfn]
pub fn pair_16k(r: u32, c: u32) -> u32 {
    let mut a = [0u32; 4096];
    for i in 0..a.len() {
        a[i] = r ^ (i as u32);
    }
    a[(c as usize * 13) % 4096]
}

#[userfn]
pub fn xor_u32(a: u32, b: u32) -> u32 {
    a ^ b
}

/// Local arrays up to the one limit (32 KiB each, a compile error above it: the doc tests
/// of `MAX_LOCAL_ARRAY_BYTES`) work on every backend in both modes, bit for bit as on the
/// `cpu` (issue 23: a 16 KiB array crashed PoCL with SIGSEGV, checked too): Map, MapArray,
/// MapReduce. MapPairsReduce, whose work-group size is fixed, gives the `cpu`'s result or,
/// on a CPU OpenCL device whose work-group cannot hold the arrays, `Err(Driver)` before
/// launch: never a crash.
#[test]
fn local_arrays_up_to_the_limit_work_everywhere() {
    let xs = Vector::from_fn(1031, |i| (i as u32).wrapping_mul(7919));
    let t = Vector::from_fn(997, |i| i as u32 * 3);
    let mut want = Vector::zeroed(xs.len());
    Map::new(local_32k)
        .backend(Backend::Cpu)
        .run(&xs, &mut want)
        .unwrap();
    let mut want2 = Vector::zeroed(300);
    MapArray::new(local_2x16k)
        .backend(Backend::Cpu)
        .run_index(&t, &mut want2)
        .unwrap();
    let want3 = MapReduce::new(local_16k, xor_u32)
        .backend(Backend::Cpu)
        .run(&xs)
        .unwrap();
    let rows = Vector::from_fn(300, |i| i as u32);
    let cols = Vector::from_fn(17, |i| i as u32 * 5);
    let mut want4 = Vector::zeroed(300);
    MapPairsReduce::new(pair_16k, xor_u32)
        .backend(Backend::Cpu)
        .run_rows(&rows, &cols, &mut want4)
        .unwrap();
    for be in backends() {
        for checked in [true, false] {
            let mut got = Vector::zeroed(xs.len());
            Map::new(local_32k)
                .backend(be)
                .checked(checked)
                .run(&xs, &mut got)
                .unwrap();
            assert_eq!(got.to_vec(), want.to_vec(), "{be} checked={checked}");
            let mut got = Vector::zeroed(300);
            MapArray::new(local_2x16k)
                .backend(be)
                .checked(checked)
                .run_index(&t, &mut got)
                .unwrap();
            assert_eq!(got.to_vec(), want2.to_vec(), "{be} checked={checked}");
            let v = MapReduce::new(local_16k, xor_u32)
                .backend(be)
                .checked(checked)
                .run(&xs)
                .unwrap();
            assert_eq!(v, want3, "{be} checked={checked}");
            let mut got = Vector::zeroed(300);
            MapPairsReduce::new(pair_16k, xor_u32)
                .backend(be)
                .checked(checked)
                .run_rows(&rows, &cols, &mut got)
                .map_or_else(
                    // a kernel of fixed work-group size on a CPU OpenCL device
                    |e| match e {
                        Error::Driver(m) if be == Backend::OpenCl => {
                            assert!(m.message().contains("local arrays"), "{be}: {m}")
                        }
                        e => panic!("{be} checked={checked}: {e}"),
                    },
                    |()| assert_eq!(got.to_vec(), want4.to_vec(), "{be} checked={checked}"),
                );
        }
    }
}

#[userfn]
pub fn pow_f32(x: f32, y: f32) -> f32 {
    x.powf(y)
}

#[userfn]
pub fn pow_f64(x: f64, y: f64) -> f64 {
    f64::powf(x, y)
}

/// `powf`'s exact cases are the same on every backend: a base of 1 or an exponent of ±0
/// gives 1 whatever the other operand, a quiet or signaling NaN included (glibc, which the
/// `cpu` backend's Rust called, gave NaN for `powf(1, sNaN)`); any other NaN operand gives
/// a NaN (payload and sign unspecified); the C99 special values (`pow(-1, ±inf)`, zeros,
/// infinities, a negative base with a non-integer exponent) are exact.
#[test]
fn powf_special_cases_are_the_same_everywhere() {
    let (qnan, snan) = (f32::NAN, f32::from_bits(0x7f80_0001));
    let (inf, one_third) = (f32::INFINITY, 1.0f32 / 3.0);
    #[rustfmt::skip]
    let cases: [(f32, f32, f32); 20] = [
        (1.0, snan, 1.0), (1.0, qnan, 1.0), (1.0, -snan, 1.0), (1.0, inf, 1.0),
        (snan, 0.0, 1.0), (qnan, 0.0, 1.0), (qnan, -0.0, 1.0), (inf, 0.0, 1.0),
        (qnan, 2.0, qnan), (2.0, qnan, qnan), (snan, 1.0, qnan), (-1.0, snan, qnan),
        (-1.0, inf, 1.0), (-1.0, -inf, 1.0), (-8.0, one_third, qnan), (0.0, -1.0, inf),
        (-0.0, -1.0, -inf), (-0.0, 3.0, -0.0), (inf, -1.0, 0.0), (0.5, inf, 0.0),
    ];
    let x = Vector::from_fn(cases.len(), |i| cases[i].0);
    let y = Vector::from_fn(cases.len(), |i| cases[i].1);
    let (x64, y64) = (
        Vector::from_fn(cases.len(), |i| cases[i].0 as f64),
        Vector::from_fn(cases.len(), |i| {
            // keeps a signaling NaN signaling (`as` would quiet it)
            let b = cases[i].1.to_bits();
            if cases[i].1.is_nan() && b & 0x0040_0000 == 0 {
                f64::from_bits(0x7ff0_0000_0000_0001 | ((b as u64 & 0x8000_0000) << 32))
            } else {
                cases[i].1 as f64
            }
        }),
    );
    let same = |g: f64, w: f32| (g.is_nan() && w.is_nan()) || g.to_bits() == (w as f64).to_bits();
    for be in backends() {
        for checked in [true, false] {
            let mut o = Vector::filled(cases.len(), 7.0f32);
            Map::new(pow_f32)
                .backend(be)
                .checked(checked)
                .run(&x, &y, &mut o)
                .unwrap();
            let mut o64 = Vector::filled(cases.len(), 7.0f64);
            Map::new(pow_f64)
                .backend(be)
                .checked(checked)
                .run(&x64, &y64, &mut o64)
                .unwrap();
            for (i, &(a, b, w)) in cases.iter().enumerate() {
                assert!(
                    same(o[i] as f64, w),
                    "{be} f32 #{i}: powf({a:?}, {b:?}) = {:?}",
                    o[i]
                );
                assert!(
                    same(o64[i], w),
                    "{be} f64 #{i}: powf({a:?}, {b:?}) = {:?}",
                    o64[i]
                );
            }
        }
    }
}

/// The nearest centre of point `i` over all features, as Rodinia's k-means port computes
/// it: both operands `Mat`s (points and centres by rows), the distance summed feature by
/// feature with `powi(2)`, the first centre on a tie.
#[userfn]
pub fn nearest_features(#[index] i: usize, pts: Mat<f32>, cs: Mat<f32>) -> u32 {
    let mut best = 0u32;
    let mut best_d = f32::MAX;
    for k in 0..cs.rows() {
        let mut d = 0.0f32;
        for f in 0..pts.cols() {
            d += (pts[(i, f)] - cs[(k, f)]).powi(2);
        }
        if d < best_d {
            best_d = d;
            best = k as u32;
        }
    }
    best
}

/// The k-means membership of Rodinia's shape (34 features, 5 clusters, centres that are
/// copies of each other so that every point ties): `Map` with two `Mat` arguments gives
/// the `cpu`'s membership bit for bit on every backend, in both modes (on CUDA the port
/// gave "MISMATCH at 463: 2 vs 0" while every other backend agreed).
#[test]
fn k_means_membership_over_many_features_is_the_same_everywhere() {
    let (n, feats, k) = (1009usize, 34usize, 5usize);
    let pts = Matrix::from_fn(n, feats, |r, c| {
        ((r * 31 + c * 7) % 97) as f32 * 0.125 - 6.0
    });
    // centres 0 and 3 are equal, so are 1 and 4: ties the first must win
    let cs = Matrix::from_fn(k, feats, |r, c| ((r % 3) * 13 + c) as f32 * 0.25 - 4.0);
    let mut want = Vector::zeroed(n);
    Map::new(nearest_features)
        .arrays((&pts, &cs))
        .backend(Backend::Cpu)
        .run_index(&mut want)
        .unwrap();
    assert!(
        want.to_vec().iter().all(|&m| m < 3),
        "ties go to the first centre"
    );
    for be in backends() {
        for checked in [true, false] {
            let mut got = Vector::filled(n, 99u32);
            Map::new(nearest_features)
                .arrays((&pts, &cs))
                .backend(be)
                .checked(checked)
                .run_index(&mut got)
                .unwrap();
            let (g, w) = (got.to_vec(), want.to_vec());
            if let Some(i) = (0..n).find(|&i| g[i] != w[i]) {
                panic!(
                    "{be} checked={checked}: MISMATCH at {i}: {} vs {}",
                    g[i], w[i]
                );
            }
        }
    }
}
