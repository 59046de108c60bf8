//! The complete user-function language on every backend: local arrays, `[T; N]` elements,
//! uniforms and struct fields, `bool`, `loop`/`break`/`continue`/`return`, tuple returns and
//! destructuring, `.len()`, the math and integer methods, module-level constants. Each
//! case runs on every backend that can run here and compares with the `cpu` oracle and,
//! where it is simple, with plain Rust.

use skel::prelude::*;

use super::available;

const BACKENDS: [Backend; 4] = [Backend::Cpu, Backend::Rayon, Backend::OpenCl, Backend::Cuda];

/// Transcendental math (`sin`, `atan2`, `powf`, ..) of a device may differ from the `cpu`
/// backend's by this many units in the last place: the largest bound of the OpenCL 1.2
/// full profile (`pow`); CUDA's documented bounds are lower.
pub const TRANSCENDENTAL_ULPS: u32 = 16;

fn backends() -> impl Iterator<Item = Backend> {
    BACKENDS.into_iter().filter(|&b| available(b))
}

/// A 3x3 median: the window copied into a local array, sorted by insertion.
#[userfn]
pub fn median3x3(w: Window2<f32>) -> f32 {
    let mut v = [0.0f32; 9];
    let mut k = 0;
    for di in -1..=1 {
        for dj in -1..=1 {
            v[k] = w[(di, dj)];
            k += 1;
        }
    }
    for i in 1..v.len() {
        let x = v[i];
        let mut j = i;
        while j > 0 && v[j - 1] > x {
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = x;
    }
    v[4]
}

#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
pub struct Sample {
    pub taps: [f32; 4],
    pub count: u32,
    pub valid: bool,
    pub flags: [u8; 3],
}

pub const BIAS: [f32; 4] = [0.5, -0.25, 0.125, 1.0];
pub const UNIT: Sample = Sample {
    taps: [1.0, 1.0, 1.0, 1.0],
    count: 1,
    valid: true,
    flags: [0; 3],
};

/// A 5-tap filter passed as a uniform array, a struct element with array fields, an
/// array return, module-level constants.
#[userfn]
pub fn filter5(s: Sample, #[uniform] k: [f32; 5]) -> [f32; 4] {
    let mut out = [0.0; 4];
    for i in 0..out.len() {
        let mut acc = 0.0;
        for j in 0..k.len() {
            acc += k[j] * s.taps[(i + j) % 4];
        }
        out[i] = if s.valid {
            acc + BIAS[i]
        } else {
            UNIT.taps[i] * s.count as f32
        };
    }
    out
}

/// `bool` in and out.
#[userfn]
pub fn pick(c: bool, a: i32, b: i32) -> i32 {
    if c {
        a
    } else {
        b
    }
}

#[userfn]
pub fn is_odd(x: i32) -> bool {
    x % 2 != 0
}

/// `loop` with `break`, `continue` and `return` inside, a per-thread histogram.
#[userfn]
pub fn digits(#[index] i: usize, x: u32) -> u32 {
    let mut hist = [0u32; 10];
    let mut v = x;
    let mut steps = 0u32;
    loop {
        steps += 1;
        if steps > 12 {
            return u32::MAX;
        }
        let d = v % 10;
        v /= 10;
        if d == 7 {
            continue;
        }
        hist[d as usize] += 1;
        if v == 0 {
            break;
        }
    }
    let mut best = 0;
    for d in 0..hist.len() {
        if hist[d] > hist[best] {
            best = d;
        }
    }
    (best as u32) * 100 + hist[best] + (i as u32 % 3) * 1000
}

#[userfn]
pub fn polar(x: f32, y: f32) -> (f32, f32) {
    ((x * x + y * y).sqrt(), y.atan2(x))
}

#[userfn]
pub fn split(x: i64) -> (i32, u16, u16) {
    ((x >> 32) as i32, (x >> 16) as u16, x as u16)
}

/// Destructures the results of other user functions.
#[userfn]
pub fn rejoin(x: i64) -> i64 {
    let (hi, mid, lo) = split(x);
    let (a, b) = (lo, mid);
    ((hi as i64) << 32) | ((b as i64) << 16) | a as i64
}

/// Methods that are exact on every backend.
#[userfn]
pub fn exact_math(x: f32, y: f64) -> [f64; 12] {
    [
        x.abs() as f64 + y.sqrt(),
        x.floor() as f64 + y.ceil(),
        x.round() as f64 - y.round_ties_even(),
        x.trunc() as f64 + y.fract(),
        x.min(1.5) as f64 + y.max(-2.0),
        x.clamp(-3.0, 3.0) as f64 * y.clamp(-1.0, 1.0),
        x.mul_add(2.0, 0.25) as f64 + y.mul_add(y, -1.0),
        x.signum() as f64 + f64::signum(y),
        x.copysign(-1.0) as f64 + y.copysign(x as f64),
        if x.is_nan() || y.is_nan() { 1.0 } else { 0.0 },
        if x.is_finite() && y.is_finite() {
            1.0
        } else {
            0.0
        },
        f32::sqrt(x.abs()) as f64
            + (f64::MAX.sqrt() - f64::EPSILON) * 0.0
            + f32::MIN_POSITIVE as f64,
    ]
}

/// Transcendental methods (compared within [`TRANSCENDENTAL_ULPS`]).
#[userfn]
pub fn approx_math(x: f32) -> [f32; 19] {
    let a = x.abs() + 0.5;
    let s = x * 0.1;
    [
        x.cbrt(),
        a.powf(1.3),
        x.powi(3),
        s.exp(),
        s.exp2(),
        a.ln(),
        a.log2(),
        a.log10(),
        x.sin(),
        x.cos(),
        s.tan(),
        (s * 0.1).asin(),
        (s * 0.1).acos(),
        x.atan(),
        x.atan2(a),
        s.sinh(),
        s.cosh(),
        s.tanh(),
        x.hypot(a) + std::f32::consts::PI,
    ]
}

/// Every integer method, on three widths (`abs` is the method under test, not `unsigned_abs`).
#[userfn]
#[allow(clippy::cast_abs_to_unsigned)]
pub fn int_math(a: i32, b: u8, c: u64) -> [u64; 14] {
    [
        a.abs() as u64,
        a.min(-3) as u64,
        a.max(7) as u64,
        a.clamp(-100, 100) as u64,
        (b % 6).pow(3) as u64,
        a.wrapping_add(i32::MAX) as u64,
        b.wrapping_sub(200) as u64,
        c.wrapping_mul(0x9e37_79b9_7f4a_7c15),
        b.rotate_left(3) as u64,
        c.rotate_right(b as u32),
        (a.count_ones() + b.count_ones() + c.count_ones()) as u64,
        (a.leading_zeros() + b.leading_zeros() * 100) as u64,
        (c.trailing_zeros() + b.trailing_zeros() * 100) as u64,
        u64::MAX - c.leading_zeros() as u64,
    ]
}

/// A `&[T]` parameter's `.len()`.
#[userfn]
pub fn last_le(t: &[i64], x: i64) -> i64 {
    let mut best = -1;
    for i in 0..t.len() {
        if t[i] <= x {
            best = i as i64;
        }
    }
    best
}

fn ulps_apart(a: f32, b: f32) -> u32 {
    if a == b || (a.is_nan() && b.is_nan()) {
        return 0;
    }
    let ord = |v: f32| {
        let bits = v.to_bits() as i64;
        if bits < 0x8000_0000 {
            bits
        } else {
            0x8000_0000 - bits
        }
    };
    (ord(a) - ord(b)).unsigned_abs().min(u32::MAX as u64) as u32
}

#[test]
fn median_filter_with_a_local_array() {
    for b in backends() {
        for (rows, cols) in [(3, 3), (5, 8), (33, 65)] {
            let m = Matrix::from_fn(rows, cols, |r, c| ((r * 31 + c * 17) % 23) as f32 - 11.0);
            let mut got = Matrix::filled(rows, cols, 99.0f32);
            MapOverlap::new(median3x3, (1, 1))
                .backend(b)
                .run(&m, &mut got)
                .unwrap();
            for r in 1..rows - 1 {
                for c in 1..cols - 1 {
                    let mut v: Vec<f32> =
                        (0..9).map(|k| m[(r + k / 3 - 1, c + k % 3 - 1)]).collect();
                    v.sort_by(f32::total_cmp);
                    assert_eq!(got[(r, c)], v[4], "{b} {rows}x{cols} at ({r}, {c})");
                }
            }
        }
    }
}

#[test]
fn array_elements_uniforms_and_constants() {
    let k = [0.1f32, 0.2, 0.4, 0.2, 0.1];
    for b in backends() {
        for n in [0, 1, 7, 1000] {
            let s = Vector::from_fn(n, |i| Sample {
                taps: [i as f32, 1.0 - i as f32, 0.5, (i % 5) as f32],
                count: i as u32,
                valid: i % 3 != 0,
                flags: [i as u8; 3],
            });
            let mut got: Vector<[f32; 4]> = Vector::filled(n, [f32::NAN; 4]);
            let mut want = Vector::filled(n, [0.0; 4]);
            Map::new(filter5)
                .uniforms((k,))
                .backend(b)
                .run(&s, &mut got)
                .unwrap();
            Map::new(filter5)
                .uniforms((k,))
                .backend(Backend::Cpu)
                .run(&s, &mut want)
                .unwrap();
            assert_eq!(got, want, "{b} n={n}");
            for i in 0..n {
                assert_eq!(want[i], filter5::call(s[i], k), "oracle n={n} i={i}");
            }
        }
    }
}

#[test]
fn bool_elements_and_results() {
    for b in backends() {
        for n in [0, 1, 13, 4097] {
            let c = Vector::from_fn(n, |i| i % 3 == 0);
            let (x, y) = (
                Vector::from_fn(n, |i| i as i32),
                Vector::from_fn(n, |i| -(i as i32)),
            );
            let mut got = Vector::zeroed(n);
            Map::new(pick).backend(b).run(&c, &x, &y, &mut got).unwrap();
            let want: Vec<i32> = (0..n)
                .map(|i| if i % 3 == 0 { i as i32 } else { -(i as i32) })
                .collect();
            assert_eq!(got.to_vec(), want, "{b} pick n={n}");
            let mut odd = Vector::filled(n, true);
            Map::new(is_odd).backend(b).run(&x, &mut odd).unwrap();
            assert_eq!(
                odd.to_vec(),
                (0..n).map(|i| i % 2 == 1).collect::<Vec<_>>(),
                "{b} is_odd n={n}"
            );
        }
    }
}

#[test]
fn loops_with_break_continue_and_return() {
    for b in backends() {
        for n in [0, 1, 257, 5000] {
            let x = Vector::from_fn(n, |i| (i as u32).wrapping_mul(2_654_435_761));
            let mut got = Vector::zeroed(n);
            let mut want = Vector::zeroed(n);
            Map::new(digits).backend(b).run(&x, &mut got).unwrap();
            Map::new(digits)
                .backend(Backend::Cpu)
                .run(&x, &mut want)
                .unwrap();
            assert_eq!(got, want, "{b} n={n}");
        }
    }
}

#[test]
fn tuple_returns_and_destructuring() {
    for b in backends() {
        for n in [0, 1, 31, 3001] {
            let x = Vector::from_fn(n, |i| (i as f32 * 0.37).sin() * 10.0);
            let y = Vector::from_fn(n, |i| (i as f32 * 0.11).cos() * 10.0);
            let mut got: Vector<(f32, f32)> = Vector::zeroed(n);
            let mut want = Vector::zeroed(n);
            Map::new(polar).backend(b).run(&x, &y, &mut got).unwrap();
            Map::new(polar)
                .backend(Backend::Cpu)
                .run(&x, &y, &mut want)
                .unwrap();
            for i in 0..n {
                assert_eq!(got[i].0, want[i].0, "{b} radius n={n} i={i}");
                assert!(
                    ulps_apart(got[i].1, want[i].1) <= TRANSCENDENTAL_ULPS,
                    "{b} angle n={n} i={i}"
                );
            }
            let v = Vector::from_fn(n, |i| (i as i64).wrapping_mul(0x0123_4567_89ab_cdef));
            let mut back = Vector::zeroed(n);
            Map::new(rejoin).backend(b).run(&v, &mut back).unwrap();
            assert_eq!(back, v, "{b} rejoin n={n}");
        }
    }
}

#[test]
fn math_methods_match_the_oracle() {
    for b in backends() {
        let n = 2000;
        let x = Vector::from_fn(n, |i| match i % 50 {
            0 => f32::NAN,
            1 => f32::INFINITY,
            2 => -0.0,
            3 => 2.5,
            4 => -2.5,
            _ => (i as f32 - 1000.0) * 0.013,
        });
        let y = Vector::from_fn(n, |i| (i as f64 - 990.0) * 0.0071);
        let mut got = Vector::zeroed(n);
        let mut want = Vector::zeroed(n);
        Map::new(exact_math)
            .backend(b)
            .run(&x, &y, &mut got)
            .unwrap();
        Map::new(exact_math)
            .backend(Backend::Cpu)
            .run(&x, &y, &mut want)
            .unwrap();
        for i in 0..n {
            let same = got[i]
                .iter()
                .zip(&want[i])
                .all(|(g, w)| g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()));
            assert!(same, "{b} exact i={i}: {:?} vs {:?}", got[i], want[i]);
        }
        let mut got = Vector::zeroed(n);
        let mut want = Vector::zeroed(n);
        Map::new(approx_math).backend(b).run(&x, &mut got).unwrap();
        Map::new(approx_math)
            .backend(Backend::Cpu)
            .run(&x, &mut want)
            .unwrap();
        for i in 0..n {
            for (k, (g, w)) in got[i].iter().zip(&want[i]).enumerate() {
                assert!(
                    ulps_apart(*g, *w) <= TRANSCENDENTAL_ULPS,
                    "{b} approx {k} of x={}: {g} vs {w}",
                    x[i]
                );
            }
        }
        let a = Vector::from_fn(n, |i| match i % 7 {
            0 => i32::MIN + 1,
            1 => i32::MAX,
            _ => (i as i32 - 1000) * 1_000_003,
        });
        let bb = Vector::from_fn(n, |i| (i * 37) as u8);
        let c = Vector::from_fn(n, |i| {
            (i as u64).wrapping_mul(0xdead_beef_1234_5678) >> (i % 64)
        });
        let mut got = Vector::zeroed(n);
        Map::new(int_math)
            .backend(b)
            .run(&a, &bb, &c, &mut got)
            .unwrap();
        for i in 0..n {
            let (a, b8, c) = (a[i], bb[i], c[i]);
            let want = [
                a.wrapping_abs() as u64,
                a.min(-3) as u64,
                a.max(7) as u64,
                a.clamp(-100, 100) as u64,
                (b8 % 6).pow(3) as u64,
                a.wrapping_add(i32::MAX) as u64,
                b8.wrapping_sub(200) as u64,
                c.wrapping_mul(0x9e37_79b9_7f4a_7c15),
                b8.rotate_left(3) as u64,
                c.rotate_right(b8 as u32),
                (a.count_ones() + b8.count_ones() + c.count_ones()) as u64,
                (a.leading_zeros() + b8.leading_zeros() * 100) as u64,
                (c.trailing_zeros() + b8.trailing_zeros() * 100) as u64,
                u64::MAX - c.leading_zeros() as u64,
            ];
            assert_eq!(got[i], want, "{b} ints i={i}");
        }
    }
}

#[test]
fn len_of_an_array_parameter() {
    let table = Vector::from_fn(100, |i| (i as i64) * 3 - 50);
    for b in backends() {
        let x = Vector::from_fn(500, |i| i as i64 - 100);
        let mut got = Vector::zeroed(500);
        MapArray::new(last_le)
            .backend(b)
            .run(&table, &x, &mut got)
            .unwrap();
        for i in 0..500 {
            let want = table
                .iter()
                .rposition(|&t| t <= x[i])
                .map_or(-1, |p| p as i64);
            assert_eq!(got[i], want, "{b} i={i}");
        }
    }
}
