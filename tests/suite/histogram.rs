//! Histogram on every backend against the `cpu` oracle and a plain counting loop: empty,
//! one, primes and sizes around every backend's chunk, `u32` and `u64` counts, counts that
//! held other values (overwritten), bins out of range (not counted; a checked call's `Err`
//! leaves the counts as they were), many bins (the GPU's global-atomics form), matrices
//! with a 2D index, container arguments and uniforms, struct elements, random inputs.

use proptest::prelude::*;
use skel::prelude::*;

use super::{available, Pixel, SIZES};

#[userfn]
pub fn byte_bin(x: u8) -> u32 {
    x as u32
}

#[userfn]
pub fn mod_bin(x: u32, #[uniform] m: u32) -> u32 {
    x % m
}

#[userfn]
pub fn wide_bin(x: u32) -> u32 {
    x.wrapping_mul(2_654_435_761) % 70_001
}

#[userfn]
pub fn diagonal_bin(#[index] (row, col): (usize, usize), x: u32) -> u32 {
    if row == col {
        x % 4
    } else {
        4 + (x % 4)
    }
}

#[userfn]
pub fn bucket(x: f32, edges: &[f32]) -> u32 {
    let mut b = 0u32;
    for k in 0..edges.len() {
        if x >= edges[k] {
            b = k as u32 + 1;
        }
    }
    b
}

#[userfn]
pub fn brightness(px: Pixel) -> u32 {
    let s = px.r + px.g + px.b;
    if s < 1.0 {
        0
    } else if s < 2.0 {
        1
    } else {
        2
    }
}

#[userfn]
pub fn pair_bin(a: u32, b: u32) -> u32 {
    (a + b) % 16
}

/// A 256-bin histogram as one value (1 KiB): the element type of the Map + Reduce
/// formulation of a histogram, which needs Reduce and MapReduce of large elements.
#[derive(Clone, Copy, Debug, PartialEq, DeviceType)]
#[repr(C)]
pub struct Bins {
    pub c: [u32; 256],
}

impl Default for Bins {
    fn default() -> Self {
        Bins { c: [0; 256] }
    }
}

#[userfn]
pub fn add_bins(a: Bins, b: Bins) -> Bins {
    let mut c = [0u32; 256];
    for k in 0..256 {
        c[k] = a.c[k] + b.c[k];
    }
    Bins { c }
}

#[userfn]
pub fn one_hot(x: u32) -> Bins {
    let mut c = [0u32; 256];
    c[(x % 256) as usize] = 1;
    Bins { c }
}

/// The plain loop every result is checked against: `bins(i)` for each position, counted
/// where it is below `bins`.
pub fn count(n: usize, bins: usize, bin: impl Fn(usize) -> u32) -> Vec<u64> {
    let mut c = vec![0u64; bins];
    for i in 0..n {
        let b = bin(i) as usize;
        if b < bins {
            c[b] += 1;
        }
    }
    c
}

pub fn data(n: usize) -> Vec<u32> {
    (0..n)
        .map(|i| ((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as u32)
        .collect()
}

macro_rules! histogram_suite {
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
            fn bytes_every_size_u32_and_u64() {
                require!();
                for &n in SIZES {
                    let raw: Vec<u8> = data(n).iter().map(|&x| x as u8).collect();
                    let want = count(n, 256, |i| raw[i] as u32);
                    let v = Vector::from(raw.clone());
                    let mut c32 = Vector::filled(256, 7u32);
                    Histogram::new(byte_bin).backend(B).run(&v, &mut c32).unwrap();
                    let want32: Vec<u32> = want.iter().map(|&c| c as u32).collect();
                    assert_eq!(c32.to_vec(), want32, "n = {n}");
                    let mut c64 = Vector::filled(256, 7u64);
                    Histogram::new(byte_bin).backend(B).run(&v, &mut c64).unwrap();
                    assert_eq!(c64.to_vec(), want, "n = {n}");
                }
            }

            #[test]
            fn out_of_range_bins_are_not_counted_or_an_error_when_checked() {
                require!();
                for &n in &[1usize, 13, 1009, 65_537] {
                    let raw = data(n);
                    let v = Vector::from(raw.clone());
                    for bins in [1usize, 7, 256, 1000] {
                        let m = 300u32;
                        let want = count(n, bins, |i| raw[i] % m);
                        let mut got = Vector::filled(bins, 5u64);
                        let h = Histogram::new(mod_bin).uniforms((m,)).backend(B);
                        h.checked(false).run(&v, &mut got).unwrap();
                        assert_eq!(got.to_vec(), want, "n = {n}, bins = {bins}");
                        let outside: Vec<u32> =
                            raw.iter().map(|&x| x % m).filter(|&b| b as usize >= bins).collect();
                        let mut kept = Vector::filled(bins, 5u64);
                        let r = h.checked(true).run(&v, &mut kept);
                        match outside.iter().max() {
                            None => {
                                r.unwrap();
                                assert_eq!(kept.to_vec(), want);
                            }
                            Some(&worst) => {
                                let err = r.unwrap_err();
                                match &err {
                                    Error::UserFunction { function, index, len, .. } => {
                                        assert_eq!(function, "mod_bin");
                                        assert_eq!(*index, Some(worst as i64), "{err}");
                                        assert_eq!(*len, Some(bins as u64));
                                    }
                                    other => panic!("{other}"),
                                }
                                assert_eq!(kept.to_vec(), vec![5u64; bins], "{err}");
                            }
                        }
                    }
                }
            }

            #[test]
            fn many_bins_match_the_oracle() {
                require!();
                for &n in &[0usize, 1, 31, 16_385, 100_003] {
                    let raw = data(n);
                    let v = Vector::from(raw.clone());
                    for bins in [20_000usize, 70_001, 1 << 20] {
                        let want = count(n, bins, |i| raw[i].wrapping_mul(2_654_435_761) % 70_001);
                        let mut got = Vector::filled(bins, 1u32);
                        Histogram::new(wide_bin).checked(false).backend(B).run(&v, &mut got).unwrap();
                        let want: Vec<u32> = want.iter().map(|&c| c as u32).collect();
                        assert_eq!(got.to_vec(), want, "n = {n}, bins = {bins}");
                    }
                }
            }

            #[test]
            fn matrices_arrays_structs_and_two_inputs() {
                require!();
                let m = Matrix::from_fn(37, 41, |r, c| (r * 41 + c) as u32);
                let mut got = Vector::<u64>::zeroed(8);
                Histogram::new(diagonal_bin).backend(B).run(&m, &mut got).unwrap();
                let want = count(37 * 41, 8, |i| {
                    let (r, c) = (i / 41, i % 41);
                    let x = i as u32;
                    if r == c { x % 4 } else { 4 + x % 4 }
                });
                assert_eq!(got.to_vec(), want);

                let edges = Vector::from(vec![-1.0f32, 0.0, 0.5]);
                let x = Vector::from_fn(1009, |i| (i as f32 * 0.37).sin());
                let mut got = Vector::<u32>::zeroed(4);
                Histogram::new(bucket).arrays((&edges,)).backend(B).run(&x, &mut got).unwrap();
                let mut oracle = Vector::<u32>::zeroed(4);
                Histogram::new(bucket).arrays((&edges,)).backend(Backend::Cpu).run(&x, &mut oracle).unwrap();
                assert_eq!(got.to_vec(), oracle.to_vec());
                assert_eq!(got.to_vec().iter().sum::<u32>(), 1009);

                let px = Vector::from_fn(257, |i| Pixel { r: (i % 3) as f32 * 0.4, g: 0.3, b: 0.1 });
                let mut got = Vector::<u32>::zeroed(3);
                Histogram::new(brightness).backend(B).run(&px, &mut got).unwrap();
                let want = count(257, 3, |i| {
                    let s = (i % 3) as f32 * 0.4 + 0.3 + 0.1;
                    if s < 1.0 { 0 } else if s < 2.0 { 1 } else { 2 }
                });
                assert_eq!(got.to_vec(), want.iter().map(|&c| c as u32).collect::<Vec<_>>());

                let a = Vector::from(data(1009));
                let b = Vector::from_fn(1009, |i| i as u32);
                let mut got = Vector::<u32>::zeroed(16);
                Histogram::new(pair_bin).backend(B).run(&a, &b, &mut got).unwrap();
                let raw = data(1009);
                let want = count(1009, 16, |i| raw[i].wrapping_add(i as u32) % 16);
                assert_eq!(got.to_vec(), want.iter().map(|&c| c as u32).collect::<Vec<_>>());
            }

            #[test]
            fn views_and_bad_operands() {
                require!();
                let raw: Vec<u8> = data(5000).iter().map(|&x| x as u8).collect();
                let v = Vector::from(raw.clone());
                let mut got = Vector::<u32>::zeroed(256);
                Histogram::new(byte_bin).backend(B).run(&v.view(1000..3001), &mut got).unwrap();
                let want = count(2001, 256, |i| raw[1000 + i] as u32);
                assert_eq!(got.to_vec(), want.iter().map(|&c| c as u32).collect::<Vec<_>>());
                let mut none = Vector::<u32>::zeroed(0);
                let err = Histogram::new(byte_bin).backend(B).run(&v, &mut none).unwrap_err();
                assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
                let a = Vector::from(vec![1u32; 3]);
                let b = Vector::from(vec![1u32; 4]);
                let err = Histogram::new(pair_bin).backend(B).run(&a, &b, &mut got).unwrap_err();
                assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
            }

            #[test]
            fn reduce_and_map_reduce_of_a_1k_struct() {
                require!();
                for &n in &[0usize, 1, 13, 1009, 16_385] {
                    let raw = data(n);
                    let want = count(n, 256, |i| raw[i] % 256);
                    let want: Vec<u32> = want.iter().map(|&c| c as u32).collect();
                    let v = Vector::from(raw.clone());
                    let got: Bins = MapReduce::new(one_hot, add_bins).backend(B).run(&v).unwrap();
                    assert_eq!(got.c.to_vec(), want, "MapReduce, n = {n}");
                    let hot = Vector::from_fn(n, |i| {
                        let mut c = [0u32; 256];
                        c[(raw[i] % 256) as usize] = 1;
                        Bins { c }
                    });
                    let got: Bins = Reduce::new(add_bins).backend(B).run(&hot).unwrap();
                    assert_eq!(got.c.to_vec(), want, "Reduce, n = {n}");
                }
            }

            proptest! {
                #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
                #[test]
                fn random_inputs_match_a_plain_loop(
                    raw in proptest::collection::vec(0u32..400, 0..5000),
                    bins in 1usize..300,
                    m in 1u32..400,
                ) {
                    if available(B) {
                        let v = Vector::from(raw.clone());
                        let mut got = Vector::filled(bins, 3u64);
                        Histogram::new(mod_bin).uniforms((m,)).checked(false).backend(B).run(&v, &mut got).unwrap();
                        prop_assert_eq!(got.to_vec(), count(raw.len(), bins, |i| raw[i] % m));
                    }
                }
            }
        }
    };
}

histogram_suite!(cpu, Backend::Cpu);
histogram_suite!(rayon, Backend::Rayon);
histogram_suite!(opencl, Backend::OpenCl);
histogram_suite!(cuda, Backend::Cuda);

/// `Backend::Auto` routes both forms like any other (by the tuner's model, or its default
/// choice before calibration) and gives the oracle's answer.
#[test]
fn auto_backend_gives_the_oracles_answer() {
    let raw: Vec<u8> = data(100_003).iter().map(|&x| x as u8).collect();
    let v = Vector::from(raw.clone());
    let mut got = Vector::<u32>::zeroed(256);
    Histogram::new(byte_bin)
        .backend(Backend::Auto)
        .run(&v, &mut got)
        .unwrap();
    let want = count(raw.len(), 256, |i| raw[i] as u32);
    assert_eq!(
        got.to_vec(),
        want.iter().map(|&c| c as u32).collect::<Vec<_>>()
    );
    let x = Vector::from(data(50_001));
    let mut sums = Vector::zeroed(7);
    let r = ReduceByKey::new(
        super::reduce_by_key::by_mod,
        super::reduce_by_key::merge_tally,
    );
    r.uniforms((7,))
        .backend(Backend::Auto)
        .run(&x, &mut sums)
        .unwrap();
    assert_eq!(
        sums.to_vec(),
        super::reduce_by_key::tallies(&data(50_001), 7, 7)
    );
}
