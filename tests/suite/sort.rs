//! Sort on every backend against `slice::sort_by(total_cmp)` / `sort_by_key` (stable):
//! sizes 0, 1, primes, 2^k ± 1 and around every backend's tile and chunk; all-equal and
//! few distinct keys (stability, skipped passes); every integer width, negative integers;
//! floats with -0.0/+0.0, NaNs of both signs with payloads, infinities and subnormals (total
//! order, bit patterns kept); key-value pairs (values of every size); by_key with a struct
//! record; matrices; a length mismatch; views; proptest.

use proptest::prelude::*;
use skel::prelude::*;

use super::{available, Affine, Pixel};

/// Empty, one, primes, 2^k ± 1 (the GPU tiles are powers of two), around the Rayon
/// sequential limit (2^14) and chunk, and one size above 2^20.
pub const SORT_SIZES: &[usize] = &[
    0,
    1,
    2,
    3,
    7,
    31,
    255,
    256,
    257,
    1009,
    3071,
    3073,
    4095,
    4096,
    4097,
    8191,
    8193,
    16383,
    16385,
    65_535,
    65_537,
    100_003,
    (1 << 20) + 7,
];

/// A deterministic scramble of `i` (splitmix64).
pub fn mix(i: usize, salt: u64) -> u64 {
    let mut z = (i as u64)
        .wrapping_add(salt)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Floats of every class: both zeros, NaNs of both signs with payloads, infinities,
/// subnormals, the extremes, and ordinary values.
pub fn special_f32(i: usize) -> f32 {
    let r = mix(i, 5);
    match r % 16 {
        0 => -0.0,
        1 => 0.0,
        2 => f32::from_bits(0x7fc0_0000 | (r >> 40) as u32 & 0x3f_ffff),
        3 => f32::from_bits(0xffc0_0000 | (r >> 40) as u32 & 0x3f_ffff),
        4 => f32::INFINITY,
        5 => f32::NEG_INFINITY,
        6 => f32::from_bits((r >> 40) as u32 & 0x7f_ffff),
        7 => -f32::from_bits((r >> 40) as u32 & 0x7f_ffff),
        8 => f32::MAX,
        9 => f32::MIN,
        _ => f32::from_bits((r >> 32) as u32),
    }
}

pub fn special_f64(i: usize) -> f64 {
    let r = mix(i, 9);
    match r % 12 {
        0 => -0.0,
        1 => 0.0,
        2 => f64::from_bits(0x7ff8_0000_0000_0000 | r >> 20),
        3 => f64::from_bits(0xfff8_0000_0000_0000 | r >> 20),
        4 => f64::INFINITY,
        5 => f64::NEG_INFINITY,
        6 => f64::from_bits(r >> 12),
        _ => f64::from_bits(r),
    }
}

/// Sorts `data` on `backend` and compares with `sort_by(total_order)`, as bit patterns
/// (`K::order_bits` is a bijection, so equal bits mean equal values and NaN payloads).
pub fn check_keys<K: SortKey + std::fmt::Debug>(backend: Backend, data: Vec<K>, what: &str) {
    let mut v = Vector::from(data.clone());
    Sort::new().backend(backend).run(&mut v).unwrap();
    let mut want = data;
    want.sort_by(|a, b| a.total_order(b));
    let got = v.to_vec();
    let bits = |xs: &[K]| xs.iter().map(|x| x.order_bits()).collect::<Vec<_>>();
    let (g, w) = (bits(&got), bits(&want));
    assert!(
        g == w,
        "{backend} {what} n={}: first difference at {:?}",
        w.len(),
        g.iter().zip(&w).position(|(a, b)| a != b)
    );
}

/// Pairs on `backend` against a stable `sort_by` of the zipped pairs.
pub fn check_pairs<K, V>(backend: Backend, keys: Vec<K>, values: Vec<V>, what: &str)
where
    K: SortKey + std::fmt::Debug,
    V: DeviceType + PartialEq + std::fmt::Debug,
{
    let (mut k, mut v) = (Vector::from(keys.clone()), Vector::from(values.clone()));
    Sort::new()
        .backend(backend)
        .run_pairs(&mut k, &mut v)
        .unwrap();
    let mut want: Vec<(K, V)> = keys.into_iter().zip(values).collect();
    want.sort_by(|a, b| a.0.total_order(&b.0));
    let (got_k, got_v) = (k.to_vec(), v.to_vec());
    let ok_keys = got_k
        .iter()
        .zip(&want)
        .all(|(a, b)| a.order_bits() == b.0.order_bits());
    assert!(ok_keys, "{backend} {what} n={}: keys differ", want.len());
    let first = got_v.iter().zip(&want).position(|(a, b)| *a != b.1);
    assert!(
        first.is_none(),
        "{backend} {what} n={}: values differ at {first:?}",
        want.len()
    );
}

#[userfn]
pub fn pixel_brightness(px: Pixel) -> f32 {
    px.r + px.g + px.b
}

#[userfn]
pub fn affine_slope(a: Affine) -> i64 {
    a.m
}

#[userfn]
pub fn twice_u32(x: u32) -> u32 {
    x.wrapping_mul(2)
}

#[userfn]
pub fn low_byte(x: u32) -> u8 {
    (x & 0xff) as u8
}

macro_rules! sort_suite {
    ($name:ident, $backend:expr) => {
        mod $name {
            use super::*;

            const B: Backend = $backend;

            #[test]
            fn u32_keys_every_size() {
                if !available(B) {
                    return;
                }
                for &n in SORT_SIZES {
                    check_keys(B, (0..n).map(|i| mix(i, 1) as u32).collect(), "u32 random");
                    // Few distinct values: digits that are the same for every key.
                    check_keys(B, (0..n).map(|i| (mix(i, 2) % 5) as u32 * 0x0101).collect(), "u32 few");
                    check_keys(B, (0..n).map(|i| (n - i) as u32).collect(), "u32 descending");
                }
            }

            #[test]
            fn every_integer_width_and_sign() {
                if !available(B) {
                    return;
                }
                for &n in &[0usize, 1, 13, 4097, 70_001] {
                    check_keys(B, (0..n).map(|i| mix(i, 3) as u8).collect::<Vec<u8>>(), "u8");
                    check_keys(B, (0..n).map(|i| mix(i, 3) as i8).collect::<Vec<i8>>(), "i8");
                    check_keys(B, (0..n).map(|i| mix(i, 3) as u16).collect::<Vec<u16>>(), "u16");
                    check_keys(B, (0..n).map(|i| mix(i, 3) as i16).collect::<Vec<i16>>(), "i16");
                    check_keys(B, (0..n).map(|i| mix(i, 3) as i32).collect::<Vec<i32>>(), "i32");
                    check_keys(B, (0..n).map(|i| (mix(i, 3) % 201) as i32 - 100).collect::<Vec<i32>>(), "i32 small");
                    check_keys(B, (0..n).map(|i| mix(i, 3)).collect::<Vec<u64>>(), "u64");
                    check_keys(B, (0..n).map(|i| mix(i, 3) as i64).collect::<Vec<i64>>(), "i64");
                    let ext = [i64::MIN, -1, 0, 1, i64::MAX];
                    check_keys(B, (0..n).map(|i| ext[i % 5]).collect::<Vec<i64>>(), "i64 extremes");
                }
            }

            #[test]
            fn floats_in_total_order_keep_their_bits() {
                if !available(B) {
                    return;
                }
                for &n in &[1usize, 2, 17, 4096, 12_289, 100_003] {
                    check_keys(B, (0..n).map(special_f32).collect::<Vec<f32>>(), "f32 special");
                    check_keys(B, (0..n).map(special_f64).collect::<Vec<f64>>(), "f64 special");
                    // Only zeros of both signs: -0.0 before +0.0.
                    check_keys(B, (0..n).map(|i| if mix(i, 4) % 2 == 0 { 0.0f32 } else { -0.0 }).collect::<Vec<f32>>(), "f32 zeros");
                }
            }

            #[test]
            fn pairs_are_stable_for_all_equal_keys() {
                if !available(B) {
                    return;
                }
                for &n in SORT_SIZES {
                    // Every key equal: the values must stay in their order.
                    check_pairs(B, vec![7u32; n], (0..n as u32).collect(), "equal keys");
                    check_pairs(B, (0..n).map(|i| (mix(i, 6) % 3) as i32 - 1).collect(), (0..n as u32).collect(), "3 keys");
                    check_pairs(B, (0..n).map(|i| mix(i, 7) as u32).collect(), (0..n as u32).collect(), "u32 -> u32");
                }
            }

            #[test]
            fn pairs_of_every_value_size() {
                if !available(B) {
                    return;
                }
                for &n in &[0usize, 1, 255, 4097, 65_537] {
                    let keys: Vec<f32> = (0..n).map(|i| special_f32(i % 97)).collect();
                    check_pairs(B, keys.clone(), (0..n).map(|i| i as u8).collect(), "f32 -> u8");
                    check_pairs(B, keys.clone(), (0..n).map(|i| i as u64).collect(), "f32 -> u64");
                    let px: Vec<Pixel> = (0..n).map(|i| Pixel { r: i as f32, g: 1.0, b: -(i as f32) }).collect();
                    check_pairs(B, keys, px, "f32 -> Pixel");
                    let k16: Vec<u16> = (0..n).map(|i| (mix(i, 8) % 50) as u16).collect();
                    let af: Vec<Affine> = (0..n).map(|i| Affine { m: i as i64, c: -(i as i64) }).collect();
                    check_pairs(B, k16, af, "u16 -> Affine");
                    let k64: Vec<i64> = (0..n).map(|i| (mix(i, 9) % 1000) as i64 - 500).collect();
                    check_pairs(B, k64, (0..n as u32).collect(), "i64 -> u32");
                }
            }

            #[test]
            fn by_key_sorts_struct_records_stably() {
                if !available(B) {
                    return;
                }
                for &n in &[0usize, 1, 31, 4097, 70_001] {
                    let px: Vec<Pixel> = (0..n)
                        .map(|i| Pixel { r: (i % 7) as f32, g: (i % 3) as f32 * 0.5, b: i as f32 })
                        .collect();
                    let mut v = Vector::from(px.clone());
                    Sort::by_key(pixel_brightness).backend(B).run(&mut v).unwrap();
                    let mut want = px;
                    // `b` is unique: the brightness differs, ties fall to the stable order.
                    want.sort_by(|a, b| (a.r + a.g + a.b).total_cmp(&(b.r + b.g + b.b)));
                    assert_eq!(v.to_vec(), want, "{B} by_key Pixel n={n}");

                    let af: Vec<Affine> = (0..n).map(|i| Affine { m: (mix(i, 10) % 9) as i64 - 4, c: i as i64 }).collect();
                    let mut v = Vector::from(af.clone());
                    Sort::by_key(affine_slope).backend(B).run(&mut v).unwrap();
                    let mut want = af;
                    want.sort_by_key(|a| a.m);
                    assert_eq!(v.to_vec(), want, "{B} by_key Affine n={n}");

                    let xs: Vec<u32> = (0..n).map(|i| mix(i, 11) as u32).collect();
                    let mut v = Vector::from(xs.clone());
                    Sort::by_key(low_byte).backend(B).run(&mut v).unwrap();
                    let mut want = xs;
                    want.sort_by_key(|x| x & 0xff);
                    assert_eq!(v.to_vec(), want, "{B} by_key low byte n={n}");
                }
            }

            #[test]
            fn matrices_views_and_mismatches() {
                if !available(B) {
                    return;
                }
                // A matrix sorts as its row-major sequence.
                let mut m = Matrix::from_fn(37, 41, |r, c| mix(r * 41 + c, 12) as i32);
                let mut want = m.to_vec();
                Sort::new().backend(B).run(&mut m).unwrap();
                want.sort();
                assert_eq!(m.to_vec(), want, "{B} matrix");
                let mut recs = Matrix::from_fn(5, 3, |r, c| Affine { m: ((r * 3 + c) % 4) as i64, c: (r * 3 + c) as i64 });
                let mut want = recs.to_vec();
                Sort::by_key(affine_slope).backend(B).run(&mut recs).unwrap();
                want.sort_by_key(|a| a.m);
                assert_eq!(recs.to_vec(), want, "{B} matrix by_key");

                // `.streams(k)` is accepted (a sort is one permutation: one stream on CUDA).
                let mut s = Vector::from_fn(5000, |i| mix(i, 15) as u16);
                let mut want = s.to_vec();
                Sort::new().backend(B).streams(3).run(&mut s).unwrap();
                want.sort();
                assert_eq!(s.to_vec(), want, "{B} streams(3)");

                // A view sorts its range only.
                let data: Vec<u32> = (0..10_000).map(|i| mix(i, 13) as u32).collect();
                let mut v = Vector::from(data.clone());
                Sort::new().backend(B).run(&mut v.view_mut(1000..9000)).unwrap();
                let mut want = data;
                want[1000..9000].sort();
                assert_eq!(v.to_vec(), want, "{B} view");

                // Lengths that differ: an error, nothing moved.
                let mut k = Vector::from(vec![3u32, 2, 1]);
                let mut val = Vector::from(vec![1u8, 2]);
                let err = Sort::new().backend(B).run_pairs(&mut k, &mut val).unwrap_err();
                assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
                assert!(err.to_string().contains("one value per key"), "{err}");
                assert_eq!((k.to_vec(), val.to_vec()), (vec![3, 2, 1], vec![1, 2]));
            }

            #[test]
            fn device_resident_operands_and_repeated_calls() {
                if !available(B) {
                    return;
                }
                // The output of a Map on the backend (valid only there for devices), sorted
                // twice: the second call sorts sorted data.
                let n = 50_001;
                let src = Vector::from_fn(n, |i| mix(i, 14) as u32);
                let mut v = Vector::zeroed(n);
                Map::new(twice_u32).backend(B).run(&src, &mut v).unwrap();
                let mut want: Vec<u32> = src.to_vec().iter().map(|x| x.wrapping_mul(2)).collect();
                want.sort();
                Sort::new().backend(B).run(&mut v).unwrap();
                Sort::new().backend(B).run(&mut v).unwrap();
                assert_eq!(v.to_vec(), want, "{B} resident");
            }

            proptest! {
                #![proptest_config(ProptestConfig::with_cases(24))]

                #[test]
                fn random_u32_and_f32(xs in proptest::collection::vec(any::<u32>(), 0..3000), salt in any::<u64>()) {
                    if !available(B) {
                        return Ok(());
                    }
                    check_keys(B, xs.clone(), "proptest u32");
                    let fs: Vec<f32> = xs.iter().map(|&x| f32::from_bits(x)).collect();
                    check_keys(B, fs, "proptest f32 bits");
                    let keys: Vec<i16> = xs.iter().map(|&x| (x % 17) as i16 - 8).collect();
                    let vals: Vec<u64> = (0..xs.len()).map(|i| mix(i, salt)).collect();
                    check_pairs(B, keys, vals, "proptest pairs");
                }
            }
        }
    };
}

sort_suite!(cpu, Backend::Cpu);
sort_suite!(rayon, Backend::Rayon);
sort_suite!(opencl, Backend::OpenCl);
sort_suite!(cuda, Backend::Cuda);
sort_suite!(auto, Backend::Auto);
