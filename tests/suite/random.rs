//! `rng: &mut Random` parameters on every backend, against the host's `Random::at` (the
//! recipe itself, computed in plain Rust) bit for bit: 1D, 2D and hidden indices, every
//! draw kind, with elements and uniforms, in Map, MapReduce (`run` and `run_index`),
//! MapPairs, a lazy Map, split over streams; different seeds give different numbers;
//! the Monte-Carlo estimate of pi is statistically sane; random seeds and sizes.

use proptest::prelude::*;
use skel::prelude::*;

use super::available;

/// Empty, one, primes, around the Rayon chunk (2^14) and one large odd size.
pub const RANDOM_SIZES: &[usize] = &[0, 1, 2, 3, 7, 13, 257, 1009, 16383, 16385, 65_537];

#[userfn]
pub fn hit(#[index] i: usize, rng: &mut Random) -> u32 {
    let (x, y) = (rng.next_f32(), rng.next_f32());
    let _ = i;
    (x * x + y * y <= 1.0) as u32
}

#[userfn]
pub fn add_u32(a: u32, b: u32) -> u32 {
    a + b
}

/// Every draw kind, mixed with an element and a uniform, without `#[index]`.
#[userfn]
pub fn mix(x: u32, rng: &mut Random, #[uniform] k: u32) -> u64 {
    let a = rng.next_u32();
    let b = rng.next_u64();
    let c = rng.next_f64();
    let d = rng.next_f32();
    let mut s = (a ^ x ^ k) as u64 ^ b;
    if c < 0.5 {
        s += (d * 1000.0) as u64;
    }
    // A draw in a loop: the stream goes on across iterations.
    for _ in 0..3 {
        s = s.rotate_left(7) ^ rng.next_u32() as u64;
    }
    s
}

#[userfn]
pub fn noise2(#[index] (row, col): (usize, usize), rng: &mut Random) -> f64 {
    rng.next_f64() + (row * 3 + col) as f64
}

#[userfn]
pub fn jitter(x: f32, rng: &mut Random) -> f32 {
    x + rng.next_f32()
}

#[userfn]
pub fn add_f32r(a: f32, b: f32) -> f32 {
    a + b
}

#[userfn]
pub fn pair_noise(#[index] (i, j): (usize, usize), a: u32, b: u32, rng: &mut Random) -> u32 {
    let _ = i + j;
    a * 3 + b + (rng.next_u32() & 0xff)
}

/// `hit` in plain Rust from `Random::at`.
pub fn plain_hit(seed: u64, i: usize) -> u32 {
    let mut r = Random::at(seed, i);
    let (x, y) = (r.next_f32(), r.next_f32());
    (x * x + y * y <= 1.0) as u32
}

pub fn plain_mix(seed: u64, i: usize, x: u32, k: u32) -> u64 {
    let mut r = Random::at(seed, i);
    let a = r.next_u32();
    let b = r.next_u64();
    let c = r.next_f64();
    let d = r.next_f32();
    let mut s = (a ^ x ^ k) as u64 ^ b;
    if c < 0.5 {
        s = s.wrapping_add((d * 1000.0) as u64);
    }
    for _ in 0..3 {
        s = s.rotate_left(7) ^ r.next_u32() as u64;
    }
    s
}

fn elems(n: usize) -> Vector<u32> {
    Vector::from_fn(n, |i| (i as u32).wrapping_mul(2_654_435_761))
}

macro_rules! random_suite {
    ($name:ident, $backend:expr) => {
        mod $name {
            use super::*;

            const B: Backend = $backend;

            #[test]
            fn map_draws_what_the_host_recipe_draws() {
                if !available(B) {
                    return;
                }
                for &n in RANDOM_SIZES {
                    for seed in [0u64, 42, u64::MAX] {
                        let mut out = Vector::zeroed(n);
                        Map::new(hit).seed(seed).backend(B).run_index(&mut out).unwrap();
                        let want: Vec<u32> = (0..n).map(|i| plain_hit(seed, i)).collect();
                        assert_eq!(out.to_vec(), want, "hit n={n} seed={seed}");

                        let x = elems(n);
                        let mut out = Vector::zeroed(n);
                        Map::new(mix).uniforms((9,)).seed(seed).backend(B).run(&x, &mut out).unwrap();
                        let want: Vec<u64> = (0..n).map(|i| plain_mix(seed, i, x[i], 9)).collect();
                        assert_eq!(out.to_vec(), want, "mix n={n} seed={seed}");
                    }
                }
            }

            #[test]
            fn two_dimensional_indices_and_pairs() {
                if !available(B) {
                    return;
                }
                for (rows, cols) in [(1, 1), (3, 7), (13, 31), (130, 257)] {
                    let mut out = Matrix::zeroed(rows, cols);
                    Map::new(noise2).seed(5).backend(B).run_index(&mut out).unwrap();
                    for r in 0..rows {
                        for c in 0..cols {
                            let want = Random::at2(5, (r, c)).next_f64() + (r * 3 + c) as f64;
                            assert_eq!(out[(r, c)].to_bits(), want.to_bits(), "({r}, {c})");
                        }
                    }
                    let (a, b) = (elems(rows), elems(cols));
                    let mut got = Matrix::zeroed(rows, cols);
                    MapPairs::new(pair_noise).seed(8).backend(B).run(&a, &b, &mut got).unwrap();
                    let mut want = Matrix::zeroed(rows, cols);
                    MapPairs::new(pair_noise).seed(8).backend(Backend::Cpu).run(&a, &b, &mut want).unwrap();
                    assert_eq!(got.to_vec(), want.to_vec(), "MapPairs {rows}x{cols}");
                    let plain = (a[rows - 1].wrapping_mul(3).wrapping_add(b[cols - 1]))
                        .wrapping_add(Random::at2(8, (rows - 1, cols - 1)).next_u32() & 0xff);
                    assert_eq!(got[(rows - 1, cols - 1)], plain);
                }
            }

            #[test]
            fn map_reduce_lazy_and_streams_agree_with_the_oracle() {
                if !available(B) {
                    return;
                }
                for &n in RANDOM_SIZES {
                    let inside = MapReduce::new(hit, add_u32).seed(42).backend(B).run_index(n).unwrap();
                    let plain: u32 = (0..n).map(|i| plain_hit(42, i)).sum();
                    assert_eq!(inside, plain, "run_index n={n}");

                    let x = Vector::from_fn(n, |i| (i % 17) as f32);
                    let mut sum_cpu = Vector::zeroed(n);
                    Map::new(jitter).seed(3).backend(Backend::Cpu).run(&x, &mut sum_cpu).unwrap();
                    let mut split = Vector::zeroed(n);
                    Map::new(jitter).seed(3).streams(3).backend(B).run(&x, &mut split).unwrap();
                    assert_eq!(split.to_vec(), sum_cpu.to_vec(), "streams n={n}");
                    // A lazy Map draws by the consumer's index, as materialised.
                    let lazy: f32 = Reduce::new(add_f32r).backend(B).run(&Map::new(jitter).seed(3).lazy(&x)).unwrap();
                    let eager: f32 = Reduce::new(add_f32r).backend(B).run(&split).unwrap();
                    assert_eq!(lazy.to_bits(), eager.to_bits(), "lazy n={n}");
                    let fused = MapReduce::new(jitter, add_f32r).seed(3).backend(B).run(&x).unwrap();
                    assert_eq!(fused.to_bits(), eager.to_bits(), "MapReduce n={n}");
                }
            }

            #[test]
            fn seeds_matter_and_pi_is_sane() {
                if !available(B) {
                    return;
                }
                let n = 1 << 20;
                let (mut a, mut b) = (Vector::zeroed(64), Vector::zeroed(64));
                Map::new(hit).seed(1).backend(B).run_index(&mut a).unwrap();
                Map::new(hit).seed(2).backend(B).run_index(&mut b).unwrap();
                assert_ne!(a.to_vec(), b.to_vec());
                let inside = MapReduce::new(hit, add_u32).seed(7).backend(B).run_index(n).unwrap();
                let pi = 4.0 * inside as f64 / n as f64;
                // The estimate's standard deviation is ~0.0016 at 2^20 samples: 6 sigma.
                assert!((pi - std::f64::consts::PI).abs() < 0.01, "pi = {pi}");
            }

            proptest! {
                #![proptest_config(ProptestConfig::with_cases(16))]
                #[test]
                fn any_seed_and_size_matches_the_recipe(seed in any::<u64>(), n in 0usize..5000, k in any::<u32>()) {
                    if !available(B) {
                        return Ok(());
                    }
                    let x = elems(n);
                    let mut out = Vector::zeroed(n);
                    Map::new(mix).uniforms((k,)).seed(seed).backend(B).run(&x, &mut out).unwrap();
                    let want: Vec<u64> = (0..n).map(|i| plain_mix(seed, i, x[i], k)).collect();
                    prop_assert_eq!(out.to_vec(), want);
                }
            }
        }
    };
}

random_suite!(cpu, Backend::Cpu);
random_suite!(rayon, Backend::Rayon);
random_suite!(opencl, Backend::OpenCl);
random_suite!(cuda, Backend::Cuda);
