//! Fuzzing of the user-function language (issue 23): random well-typed `#[userfn]` bodies
//! (drawn at compile time by the test-only `skel-fuzzgen` macro from a fixed seed: see its
//! documentation for what a body may contain), each run through `Map` on every backend in
//! both modes and compared with the `cpu` backend: integers bit for bit, floats bit for bit
//! or both NaN (the README's float table: a NaN's payload and sign may differ). A body
//! contains nothing that faults or that the float table lets differ.
//!
//! `cargo test` runs 12 bodies; `SKEL_FUZZ_BODIES=n` (and `SKEL_FUZZ_SEED=s`) at build time
//! draws more (or others): e.g. `SKEL_FUZZ_BODIES=400 cargo test --features opencl --test
//! backends fuzz`.

use skel::prelude::*;

use super::available;

/// The inputs every generated function reads: elements with the edge values of their
/// types, and the two tables of its `&[T]` parameters.
pub struct FuzzInputs {
    pub a: Vector<i32>,
    pub b: Vector<u32>,
    pub x: Vector<f32>,
    pub y: Vector<f64>,
    pub ti: Vector<i32>,
    pub tf: Vector<f32>,
}

impl FuzzInputs {
    fn new(n: usize) -> Self {
        let ai = [0, 1, -1, i32::MAX, i32::MIN, 7, -100_000, 65_536];
        let bi = [0, 1, u32::MAX, 1 << 31, 3, 1_000_000, 255];
        let xf = [
            0.0,
            -0.0,
            1.0,
            -1.5,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            3.0e38,
            0.3,
            -7.25e-3,
            1.0e9,
        ];
        let yf = [
            0.0,
            -0.0,
            2.5,
            f64::NAN,
            f64::INFINITY,
            -1.0e308,
            0.1,
            1.0e-300,
            -3.0,
        ];
        FuzzInputs {
            a: Vector::from_fn(n, |i| ai[i % ai.len()] ^ (i as i32 * 977)),
            b: Vector::from_fn(n, |i| bi[i % bi.len()].wrapping_mul(i as u32 + 1)),
            x: Vector::from_fn(n, |i| {
                xf[i % xf.len()] * if i % 3 == 0 { 1.0 } else { -0.5 }
            }),
            y: Vector::from_fn(n, |i| yf[(i * 5) % yf.len()] + i as f64 * 0.125),
            ti: Vector::from_fn(13, |i| ai[i % ai.len()].wrapping_sub(i as i32)),
            tf: Vector::from_fn(11, |i| xf[(i * 3) % xf.len()]),
        }
    }

    pub fn n(&self) -> usize {
        self.a.len()
    }
}

/// The four outputs of a generated function.
pub struct FuzzOutputs {
    pub r64: Vector<f64>,
    pub ri: Vector<i64>,
    pub r32: Vector<f32>,
    pub ru: Vector<u32>,
}

impl FuzzOutputs {
    pub fn new(n: usize) -> Self {
        FuzzOutputs {
            r64: Vector::filled(n, -9.0),
            ri: Vector::filled(n, -9),
            r32: Vector::filled(n, -9.0),
            ru: Vector::filled(n, 9),
        }
    }
}

skel_fuzzgen::userfns!(0x5EED_2023, 12);

const BACKENDS: [Backend; 3] = [Backend::Rayon, Backend::OpenCl, Backend::Cuda];

/// The first element where `got` differs from `want`, described.
fn differs(want: &FuzzOutputs, got: &FuzzOutputs) -> Option<String> {
    let f64s = |g: f64, w: f64| g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan());
    let f32s = |g: f32, w: f32| g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan());
    for i in 0..want.ri.len() {
        let (w, g) = (
            (want.r64[i], want.ri[i], want.r32[i], want.ru[i]),
            (got.r64[i], got.ri[i], got.r32[i], got.ru[i]),
        );
        if !(f64s(g.0, w.0) && g.1 == w.1 && f32s(g.2, w.2) && g.3 == w.3) {
            return Some(format!("element {i}: {g:?}, the cpu gives {w:?}"));
        }
    }
    None
}

#[test]
fn random_user_functions_agree_with_the_cpu() {
    let inputs = FuzzInputs::new(41);
    let cases = fz_cases();
    assert!(!cases.is_empty());
    for (name, src, run) in cases {
        let want = run(&inputs, Backend::Cpu, false)
            .unwrap_or_else(|e| panic!("seed {FUZZ_SEED:#x} {name} on cpu: {e}\n{src}"));
        for be in BACKENDS.into_iter().filter(|&b| available(b)) {
            for checked in [false, true] {
                let got = run(&inputs, be, checked).unwrap_or_else(|e| {
                    panic!("seed {FUZZ_SEED:#x} {name} on {be} checked={checked}: {e}\n{src}")
                });
                if let Some(d) = differs(&want, &got) {
                    panic!("seed {FUZZ_SEED:#x} {name} on {be} checked={checked}: {d}\n{src}");
                }
            }
        }
    }
}
