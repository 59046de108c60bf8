//! Filter on every backend against the `cpu` oracle and a plain `Iterator::filter`: sizes
//! around every backend's tile, every selectivity pattern, struct elements, index and
//! uniform parameters, views, outputs longer than the input (their tail untouched, also
//! when it is only current on a device), a too-short output, random inputs, faults of a
//! checked predicate (an `Err`, nothing written); and on CUDA, every split over 1..=16
//! streams.

use proptest::prelude::*;
use skel::prelude::*;

use super::{available, Affine, Pixel};

/// Empty, one, primes, around the CUDA tile (512 threads x 96 bytes: 12288 values of 4
/// bytes, 6144 of 8, 4096 of 12, 16384 of 1), the OpenCL tile (work-group x 8), the Rayon
/// chunk (2^14, 2^16), and above 2^20.
pub const FILTER_SIZES: &[usize] = &[
    0, 1, 2, 3, 7, 31, 255, 256, 257, 1009, 2047, 2048, 2049, 4095, 4096, 4097, 6143, 6144, 6145,
    8193, 12287, 12288, 12289, 16385, 24577, 65_537, 100_003,
];

/// Above 2^20, not a multiple of anything: run with fewer patterns (debug builds).
pub const LARGE: usize = (1 << 20) + 7;

#[userfn]
pub fn odd(x: u32) -> bool {
    x % 2 == 1
}

#[userfn]
pub fn at_least(x: u32, #[uniform] t: u32) -> bool {
    x >= t
}

#[userfn]
pub fn bright(px: Pixel, #[uniform] t: f32) -> bool {
    px.r + px.g + px.b > t
}

#[userfn]
pub fn rising(a: Affine) -> bool {
    a.m > a.c
}

#[userfn]
pub fn diagonal(#[index] (row, col): (usize, usize), x: u32) -> bool {
    row == col && x > 0
}

#[userfn]
pub fn third_positive(#[index] i: usize, x: i64) -> bool {
    i % 3 == 0 && x > 0
}

/// Which values a pattern keeps, by position.
#[derive(Clone, Copy, Debug)]
pub enum Pattern {
    None,
    All,
    Half,
    Alternating,
    AllButLast,
}

pub const PATTERNS: [Pattern; 5] = [
    Pattern::None,
    Pattern::All,
    Pattern::Half,
    Pattern::Alternating,
    Pattern::AllButLast,
];

impl Pattern {
    pub fn keeps(self, i: usize, n: usize) -> bool {
        match self {
            Pattern::None => false,
            Pattern::All => true,
            // A hash: about half, with runs of every length.
            Pattern::Half => (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 63 == 1,
            Pattern::Alternating => i % 2 == 1,
            Pattern::AllButLast => i + 1 < n,
        }
    }

    /// Values that `odd` keeps exactly at the pattern's positions; each value names its
    /// position, so a wrong order or a duplicate shows.
    pub fn data(self, n: usize) -> Vec<u32> {
        (0..n)
            .map(|i| ((i as u32) << 1) | u32::from(self.keeps(i, n)))
            .collect()
    }
}

/// Runs `odd` on `backend` and checks the count, the kept prefix and the untouched tail.
pub fn check_odd(backend: Backend, pattern: Pattern, n: usize, extra: usize) {
    let data = pattern.data(n);
    let v = Vector::from(data.clone());
    let mut out = Vector::from_fn(n + extra, |i| 0xdead_0000 + i as u32);
    let kept = Filter::new(odd).backend(backend).run(&v, &mut out).unwrap();
    let want: Vec<u32> = data.iter().copied().filter(|x| x % 2 == 1).collect();
    let got = out.to_vec();
    assert_eq!(kept, want.len(), "{backend} {pattern:?} n={n}: count");
    assert!(
        got[..kept] == want[..],
        "{backend} {pattern:?} n={n}: kept values differ (first: {:?})",
        got.iter().zip(&want).position(|(a, b)| a != b)
    );
    assert!(
        got.iter()
            .enumerate()
            .skip(kept)
            .all(|(i, &x)| x == 0xdead_0000 + i as u32),
        "{backend} {pattern:?} n={n}: the tail was written"
    );
}

/// `$filter` on `$b` and on `cpu`, from the same initial output: the same count and the
/// same whole output.
macro_rules! same_as_cpu {
    ($b:expr, $filter:expr, $input:expr, $init:expr, $what:expr) => {{
        let (mut got, mut want) = ($init.clone(), $init);
        let k = $filter.backend($b).run($input, &mut got).unwrap();
        let w = $filter
            .backend(Backend::Cpu)
            .run($input, &mut want)
            .unwrap();
        assert_eq!((k, got.to_vec()), (w, want.to_vec()), "{}", $what);
    }};
}

macro_rules! filter_suite {
    ($name:ident, $backend:expr) => {
        mod $name {
            use super::*;

            const B: Backend = $backend;

            #[test]
            fn every_size_and_pattern() {
                if !available(B) {
                    return;
                }
                for &n in FILTER_SIZES {
                    for pattern in PATTERNS {
                        check_odd(B, pattern, n, n % 5);
                    }
                }
                for pattern in [Pattern::Half, Pattern::AllButLast] {
                    check_odd(B, pattern, LARGE, 3);
                }
            }

            #[test]
            fn uniforms_structs_and_index_match_the_oracle() {
                if !available(B) {
                    return;
                }
                for &n in &[0usize, 1, 1000, 4097, 70_001] {
                    let v = Vector::from_fn(n, |i| (i as u32).wrapping_mul(2_654_435_761) % 1000);
                    same_as_cpu!(B, Filter::new(at_least).uniforms((700,)), &v, Vector::filled(n, 7u32), format!("at_least n={n}"));
                    let px = Vector::from_fn(n, |i| Pixel {
                        r: (i % 7) as f32,
                        g: (i % 11) as f32 * 0.5,
                        b: (i % 3) as f32,
                    });
                    let init = Vector::filled(n + 2, Pixel::default());
                    same_as_cpu!(B, Filter::new(bright).uniforms((6.5,)), &px, init, format!("bright n={n}"));
                    let af = Vector::from_fn(n, |i| Affine {
                        m: (i % 13) as i64,
                        c: (i % 5) as i64 * 2,
                    });
                    let init = Vector::filled(n, Affine { m: -1, c: -1 });
                    same_as_cpu!(B, Filter::new(rising), &af, init, format!("rising n={n}"));

                    let xs = Vector::from_fn(n, |i| (i as i64 % 9) - 3);
                    let mut got = Vector::filled(n, 0i64);
                    let k = Filter::new(third_positive).backend(B).run(&xs, &mut got).unwrap();
                    let want: Vec<i64> = (0..n)
                        .filter(|&i| i % 3 == 0 && xs[i] > 0)
                        .map(|i| xs[i])
                        .collect();
                    assert_eq!(&got.to_vec()[..k], &want[..], "third_positive n={n}");
                }
            }

            #[test]
            fn views_in_and_out() {
                if !available(B) {
                    return;
                }
                let n = 9000;
                let v = Vector::from(Pattern::Half.data(n));
                let mut out = Vector::filled(n, 5u32);
                // Input positions 1000..6000 into output positions 2000..7500.
                let kept = Filter::new(odd)
                    .backend(B)
                    .run(&v.view(1000..6000), &mut out.view_mut(2000..7500))
                    .unwrap();
                let want: Vec<u32> = v.to_vec()[1000..6000]
                    .iter()
                    .copied()
                    .filter(|x| x % 2 == 1)
                    .collect();
                assert_eq!(kept, want.len());
                let got = out.to_vec();
                assert_eq!(&got[2000..2000 + kept], &want[..]);
                assert!(got[..2000].iter().all(|&x| x == 5));
                assert!(got[2000 + kept..].iter().all(|&x| x == 5));

                // The index parameter counts from the view's start.
                let xs = Vector::from_fn(100, |i| i as i64 + 1);
                let mut o = Vector::filled(40, 0i64);
                let k = Filter::new(third_positive)
                    .backend(B)
                    .run(&xs.view(10..40), &mut o.view_mut(5..40))
                    .unwrap();
                let want: Vec<i64> = (0..30).filter(|i| i % 3 == 0).map(|i| i + 11).collect();
                assert_eq!(&o.to_vec()[5..5 + k], &want[..]);
            }

            #[test]
            fn the_tail_keeps_values_only_a_device_holds() {
                if !available(B) {
                    return;
                }
                let n = 5000;
                let v = Vector::from(Pattern::Alternating.data(n));
                let mut out = Vector::filled(n + 100, 0u32);
                // The output's values now live on B's device (host copy stale there).
                Map::new(double_u32).backend(B).run(&Vector::from_fn(n + 100, |i| i as u32), &mut out).unwrap();
                let kept = Filter::new(odd).backend(B).run(&v, &mut out).unwrap();
                assert_eq!(kept, n / 2);
                let got = out.to_vec();
                assert!(got[..kept].iter().enumerate().all(|(j, &x)| x == ((2 * j as u32 + 1) << 1) | 1));
                assert!(got.iter().enumerate().skip(kept).all(|(i, &x)| x == 2 * i as u32));
                // A second filter reads the first one's output where it lives.
                let mut again = Vector::filled(n + 100, 1u32);
                let k2 = Filter::new(at_least)
                    .uniforms((3 * n as u32,))
                    .backend(B)
                    .run(&out.view(0..n), &mut again)
                    .unwrap();
                let want: Vec<u32> = got[..n].iter().copied().filter(|&x| x >= 3 * n as u32).collect();
                assert_eq!(&again.to_vec()[..k2], &want[..]);
            }

            #[test]
            fn a_short_output_is_a_shape_mismatch_that_writes_nothing() {
                if !available(B) {
                    return;
                }
                let v = Vector::from(Pattern::All.data(100));
                let mut out = Vector::filled(99, 3u32);
                match Filter::new(odd).backend(B).run(&v, &mut out) {
                    Err(Error::ShapeMismatch { context, expected, found }) => {
                        assert!(context.contains("100") && context.contains("99"), "{context}");
                        assert!(expected.contains("100") && found.contains("99"));
                    }
                    other => panic!("expected ShapeMismatch, got {other:?}"),
                }
                assert_eq!(out.to_vec(), vec![3; 99]);
                match Filter::new(diagonal).backend(B).run(&v, &mut Vector::filled(100, 0u32)) {
                    Err(Error::InvalidArgument(m)) => assert!(m.contains("diagonal") && m.contains("usize"), "{m}"),
                    other => panic!("expected a 2D-index error, got {other:?}"),
                }
                match Filter::new(at_least).backend(B).run(&v, &mut Vector::filled(100, 0u32)) {
                    Err(Error::InvalidArgument(m)) => assert!(m.contains("uniforms"), "{m}"),
                    other => panic!("expected a missing-uniforms error, got {other:?}"),
                }
            }

            #[test]
            fn a_checked_fault_in_the_predicate_is_an_err_that_writes_nothing() {
                if !available(B) {
                    return;
                }
                // Two tiles and a tail on every backend's tiling; one bad value, late.
                let n = 20_011;
                // The host backends write in place as they go (noticed, left to them).
                let device = matches!(B, Backend::OpenCl | Backend::Cuda);
                let bad = |at: usize, value: u32| {
                    Vector::from_fn(n, |i| if i == at { value } else { (i % 4) as u32 + 1 })
                };
                for k in [1, 3] {
                    let mut out = Vector::filled(n, 7u32);
                    let r = Filter::new(divides_12).backend(B).streams(k).checked(true).run(&bad(17_000, 0), &mut out);
                    match r {
                        Err(Error::UserFunction { function, what, .. }) => {
                            assert_eq!(function, "divides_12", "{B} k={k}");
                            assert!(what.contains("remainder of 12 by zero"), "{B} k={k}: {what}");
                        }
                        other => panic!("{B} k={k}: expected Err(UserFunction), got {other:?}"),
                    }
                    assert!(!device || out.to_vec().iter().all(|&x| x == 7), "{B} k={k}: results in the output");

                    let r = Filter::new(small_digit).backend(B).streams(k).checked(true).run(&bad(9_000, 9), &mut out);
                    match r {
                        Err(Error::UserFunction { function, index, len, .. }) => {
                            assert_eq!((function.as_str(), index, len), ("small_digit", Some(9), Some(5)), "{B} k={k}");
                        }
                        other => panic!("{B} k={k}: expected Err(UserFunction), got {other:?}"),
                    }
                    assert!(!device || out.to_vec().iter().all(|&x| x == 7), "{B} k={k}: results in the output");

                    // The checked variant computes what the oracle does, and the output is
                    // usable after the faults.
                    let good = bad(0, 1);
                    same_as_cpu!(B, Filter::new(divides_12).streams(k).checked(true), &good, Vector::filled(n, 7u32), format!("divides_12 k={k}"));
                    same_as_cpu!(B, Filter::new(small_digit).streams(k).checked(true), &good, Vector::filled(n + 3, 7u32), format!("small_digit k={k}"));
                    let kept = Filter::new(small_digit).backend(B).streams(k).checked(true).run(&good, &mut out).unwrap();
                    let want: Vec<u32> = good.to_vec().into_iter().filter(|&x| x == 3 || x == 4).collect();
                    assert_eq!(&out.to_vec()[..kept], &want[..], "{B} k={k}");
                }
            }

            proptest! {
                #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
                #[test]
                fn random_inputs_match_iterator_filter(
                    data in proptest::collection::vec(0u32..1000, 0..6000),
                    t in 0u32..1001,
                    extra in 0usize..50,
                ) {
                    if available(B) {
                        let v = Vector::from(data.clone());
                        let mut out = Vector::filled(data.len() + extra, u32::MAX);
                        let kept = Filter::new(at_least).uniforms((t,)).backend(B).run(&v, &mut out).unwrap();
                        let want: Vec<u32> = data.iter().copied().filter(|&x| x >= t).collect();
                        let got = out.to_vec();
                        prop_assert_eq!(kept, want.len());
                        prop_assert_eq!(&got[..kept], &want[..]);
                        prop_assert!(got[kept..].iter().all(|&x| x == u32::MAX));
                    }
                }
            }
        }
    };
}

#[userfn]
pub fn double_u32(x: u32) -> u32 {
    2 * x
}

#[userfn]
pub fn divides_12(x: u32) -> bool {
    12 % x == 0
}

#[userfn]
pub fn small_digit(x: u32) -> bool {
    let t = [9u32, 3, 1, 4, 5];
    t[x as usize] > 3
}

filter_suite!(cpu, Backend::Cpu);
filter_suite!(rayon, Backend::Rayon);
filter_suite!(opencl, Backend::OpenCl);
filter_suite!(cuda, Backend::Cuda);

/// On CUDA, every split of a call over `k` streams gives the oracle's answer, with the
/// result copied back eagerly, lazily or as the backend decides.
#[test]
fn cuda_every_stream_count() {
    if !available(Backend::Cuda) {
        return;
    }
    let downloads = [None, Some(true), Some(false)];
    for &n in &[1usize, 4097, 100_003, LARGE] {
        let ks: Vec<usize> = if n == LARGE {
            vec![1, 3, 16]
        } else {
            (1..=16).collect()
        };
        for pattern in [Pattern::Half, Pattern::AllButLast, Pattern::None] {
            let v = Vector::from(pattern.data(n));
            let mut want = Vector::filled(n + 1, 9u32);
            let w = Filter::new(odd)
                .backend(Backend::Cpu)
                .run(&v, &mut want)
                .unwrap();
            for &k in &ks {
                let mut out = Vector::filled(n + 1, 9u32);
                let mut f = Filter::new(odd).backend(Backend::Cuda).streams(k);
                if let Some(d) = downloads[k % 3] {
                    f = f.download(d);
                }
                let kept = f.run(&v, &mut out).unwrap();
                assert_eq!(kept, w, "n={n} k={k} {pattern:?}");
                assert!(
                    out.to_vec() == want.to_vec(),
                    "n={n} k={k} {pattern:?}: values differ"
                );
            }
        }
    }
}
