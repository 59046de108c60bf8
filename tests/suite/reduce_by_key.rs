//! ReduceByKey on every backend against a plain loop: integer values exactly (empty, one,
//! primes, around the chunk sizes; few keys, many keys, more keys than fit on chip), struct
//! values with float fields (k-means cluster sums) within a tolerance, keys out of range
//! (dropped; a checked call's `Err` leaves the sums as they were), random inputs.

use proptest::prelude::*;
use skel::prelude::*;

use super::{available, SIZES};

#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
pub struct Tally {
    pub sum: u32,
    pub count: u32,
}

#[userfn]
pub fn by_mod(x: u32, #[uniform] m: u32) -> (u32, Tally) {
    (x % m, Tally { sum: x, count: 1 })
}

#[userfn]
pub fn merge_tally(a: Tally, b: Tally) -> Tally {
    Tally {
        sum: a.sum.wrapping_add(b.sum),
        count: a.count + b.count,
    }
}

#[userfn]
pub fn by_index(#[index] i: usize, x: u32) -> (u32, u32) {
    ((i % 5) as u32, x)
}

#[userfn]
pub fn add_u32(a: u32, b: u32) -> u32 {
    a + b
}

#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
pub struct Point {
    pub x: f32,
    pub y: f32,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
pub struct Acc {
    pub x: f32,
    pub y: f32,
    pub n: u32,
}

#[userfn]
pub fn nearest(p: Point, centres: &[Point]) -> (u32, Acc) {
    let mut best = 0u32;
    let mut dist = f32::MAX;
    for k in 0..centres.len() {
        let (dx, dy) = (p.x - centres[k].x, p.y - centres[k].y);
        let d = dx * dx + dy * dy;
        if d < dist {
            dist = d;
            best = k as u32;
        }
    }
    (
        best,
        Acc {
            x: p.x,
            y: p.y,
            n: 1,
        },
    )
}

#[userfn]
pub fn merge_acc(a: Acc, b: Acc) -> Acc {
    Acc {
        x: a.x + b.x,
        y: a.y + b.y,
        n: a.n + b.n,
    }
}

pub fn data(n: usize) -> Vec<u32> {
    (0..n)
        .map(|i| ((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as u32)
        .collect()
}

/// The plain loop: per key below `keys`, the wrapping sum and the count.
pub fn tallies(raw: &[u32], m: u32, keys: usize) -> Vec<Tally> {
    let mut t = vec![Tally::default(); keys];
    for &x in raw {
        let k = (x % m) as usize;
        if k < keys {
            t[k].sum = t[k].sum.wrapping_add(x);
            t[k].count += 1;
        }
    }
    t
}

macro_rules! reduce_by_key_suite {
    ($name:ident, $backend:expr) => {
        mod $name {
            use super::*;

            const B: Backend = $backend;

            macro_rules! require {
                () => {
                    if !available(B) {
                        return;
                    }
                };
            }

            #[test]
            fn integer_tallies_every_size_and_key_count() {
                require!();
                for &n in SIZES {
                    let raw = data(n);
                    let v = Vector::from(raw.clone());
                    for keys in [1usize, 7, 16, 256, 1000, 20_000] {
                        let m = keys as u32;
                        let mut got = Vector::filled(keys, Tally { sum: 9, count: 9 });
                        ReduceByKey::new(by_mod, merge_tally)
                            .uniforms((m,))
                            .backend(B)
                            .run(&v, &mut got)
                            .unwrap();
                        assert_eq!(got.to_vec(), tallies(&raw, m, keys), "n = {n}, keys = {keys}");
                    }
                }
            }

            #[test]
            fn more_keys_than_fit_on_chip() {
                require!();
                for &n in &[0usize, 1, 31, 100_003] {
                    let raw = data(n);
                    let v = Vector::from(raw.clone());
                    let keys = 1usize << 20;
                    let m = keys as u32 + 7;
                    let mut got = Vector::filled(keys, Tally { sum: 9, count: 9 });
                    ReduceByKey::new(by_mod, merge_tally)
                        .uniforms((m,))
                        .checked(false)
                        .backend(B)
                        .run(&v, &mut got)
                        .unwrap();
                    assert!(got.to_vec() == tallies(&raw, m, keys), "n = {n}");
                }
            }

            #[test]
            fn index_keys_and_numbers() {
                require!();
                let x = Vector::from_fn(1009, |i| i as u32 * 3);
                let mut got = Vector::filled(5, 77u32);
                ReduceByKey::new(by_index, add_u32).backend(B).run(&x, &mut got).unwrap();
                let mut want = vec![0u32; 5];
                for i in 0..1009 {
                    want[i % 5] += i as u32 * 3;
                }
                assert_eq!(got.to_vec(), want);
            }

            #[test]
            fn k_means_sums_within_float_reassociation() {
                require!();
                for &(n, k) in &[(0usize, 16usize), (1, 16), (10_007, 16), (65_537, 256), (4099, 3)] {
                    let raw = data(2 * n);
                    let pts = Vector::from_fn(n, |i| Point {
                        x: (raw[2 * i] % 1000) as f32 / 100.0,
                        y: (raw[2 * i + 1] % 1000) as f32 / 100.0,
                    });
                    let centres = Vector::from_fn(k, |j| Point {
                        x: (j * 37 % 10) as f32,
                        y: (j * 53 % 10) as f32 + 0.5,
                    });
                    let mut got = Vector::zeroed(k);
                    ReduceByKey::new(nearest, merge_acc)
                        .arrays((&centres,))
                        .backend(B)
                        .run(&pts, &mut got)
                        .unwrap();
                    let mut oracle = Vector::zeroed(k);
                    ReduceByKey::new(nearest, merge_acc)
                        .arrays((&centres,))
                        .backend(Backend::Cpu)
                        .run(&pts, &mut oracle)
                        .unwrap();
                    let (got, oracle) = (got.to_vec(), oracle.to_vec());
                    assert_eq!(oracle.iter().map(|a| a.n as usize).sum::<usize>(), n);
                    // The exact sums (f64), and the bound on any order of f32 additions of
                    // n values: n * 2^-24 * the sum of their magnitudes.
                    let mut exact = vec![(0f64, 0f64); k];
                    for p in pts.to_vec().iter() {
                        let (mut best, mut dist) = (0usize, f32::MAX);
                        for (j, c) in centres.to_vec().iter().enumerate() {
                            let (dx, dy) = (p.x - c.x, p.y - c.y);
                            if dx * dx + dy * dy < dist {
                                (best, dist) = (j, dx * dx + dy * dy);
                            }
                        }
                        exact[best].0 += f64::from(p.x);
                        exact[best].1 += f64::from(p.y);
                    }
                    for ((g, o), e) in got.iter().zip(&oracle).zip(&exact) {
                        assert_eq!(g.n, o.n, "n = {n}, k = {k}");
                        let tol = |s: f64| f64::from(g.n) * s / f64::from(1u32 << 24) + 1e-3;
                        assert!((f64::from(g.x) - e.0).abs() <= tol(e.0), "{g:?} vs {e:?}");
                        assert!((f64::from(g.y) - e.1).abs() <= tol(e.1), "{g:?} vs {e:?}");
                    }
                }
            }

            #[test]
            fn out_of_range_keys_are_dropped_or_an_error_when_checked() {
                require!();
                let raw = data(20_011);
                let v = Vector::from(raw.clone());
                let keys = 100usize;
                let r = ReduceByKey::new(by_mod, merge_tally).uniforms((300,)).backend(B);
                let mut got = Vector::filled(keys, Tally { sum: 1, count: 1 });
                r.checked(false).run(&v, &mut got).unwrap();
                assert_eq!(got.to_vec(), tallies(&raw, 300, keys));
                let mut kept = Vector::filled(keys, Tally { sum: 1, count: 1 });
                let err = r.checked(true).run(&v, &mut kept).unwrap_err();
                let worst = raw.iter().map(|&x| x % 300).max().unwrap();
                match &err {
                    Error::UserFunction { function, index, len, .. } => {
                        assert_eq!(function, "by_mod");
                        assert_eq!(index, &Some(worst as i64));
                        assert_eq!(len, &Some(keys as u64));
                    }
                    other => panic!("{other}"),
                }
                assert_eq!(kept.to_vec(), vec![Tally { sum: 1, count: 1 }; keys]);
                let mut none = Vector::<Tally>::zeroed(0);
                let err = r.run(&v, &mut none).unwrap_err();
                assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
            }

            proptest! {
                #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
                #[test]
                fn random_inputs_match_a_plain_loop(
                    raw in proptest::collection::vec(0u32..100_000, 0..5000),
                    keys in 1usize..600,
                    m in 1u32..700,
                ) {
                    if available(B) {
                        let v = Vector::from(raw.clone());
                        let mut got = Vector::filled(keys, Tally { sum: 5, count: 5 });
                        ReduceByKey::new(by_mod, merge_tally).uniforms((m,)).checked(false).backend(B).run(&v, &mut got).unwrap();
                        prop_assert_eq!(got.to_vec(), tallies(&raw, m, keys));
                    }
                }
            }
        }
    };
}

reduce_by_key_suite!(cpu, Backend::Cpu);
reduce_by_key_suite!(rayon, Backend::Rayon);
reduce_by_key_suite!(opencl, Backend::OpenCl);
reduce_by_key_suite!(cuda, Backend::Cuda);
