//! Reduction loop nests (issue 24): matrix products, min-plus products, integer and f64
//! products and matrix-vector products written as SkePU-style index Maps give the `cpu`
//! backend's results bit for bit on every backend, checked and unchecked, at odd sizes
//! (tile borders in every direction, a trip count that is not a multiple of the tile).
//! The GPU backends run these through tiled kernels: `cargo test --test backends loopnest`
//! is the filter for compute-sanitizer.

use skel::prelude::*;

use super::available;

const BACKENDS: [Backend; 4] = [Backend::Cpu, Backend::Rayon, Backend::OpenCl, Backend::Cuda];

fn backends() -> impl Iterator<Item = Backend> {
    BACKENDS.into_iter().filter(|&b| available(b))
}

/// `(rows of A, steps, columns of B)`: one element, tile-sized and off by one around the
/// tiles (16, 64, 128), primes.
const SHAPES: &[(usize, usize, usize)] = &[
    (1, 1, 1),
    (17, 17, 17),
    (33, 65, 31),
    (1, 129, 1),
    (131, 67, 257),
    (64, 16, 64),
    (129, 9, 130),
    (7, 0, 5),
    (11, 129, 33),
    (23, 37, 131),
];

#[userfn]
pub fn mm(#[index] (i, j): (usize, usize), a: Mat<f32>, b: Mat<f32>) -> f32 {
    let mut sum = 0.0f32;
    for l in 0..a.cols() {
        sum += a[(i, l)] * b[(l, j)];
    }
    sum
}

#[userfn]
pub fn min_plus(
    #[index] (i, j): (usize, usize),
    a: Mat<f32>,
    b: Mat<f32>,
    #[uniform] k: u32,
) -> f32 {
    let mut d = f32::INFINITY;
    let mut l = 0u32;
    while l < k {
        d = d.min(a[(i, l as usize)] + b[(l as usize, j)]);
        l += 1;
    }
    d
}

#[userfn]
pub fn mm_i64(#[index] (i, j): (usize, usize), a: Mat<i64>, b: Mat<i64>) -> i64 {
    let mut s = 0;
    for l in 0..b.rows() {
        s += a[(i, l)] * b[(l, j)];
    }
    s
}

#[userfn]
pub fn mm_f64(
    #[index] (i, j): (usize, usize),
    a: Mat<f64>,
    b: Mat<f64>,
    #[uniform] alpha: f64,
) -> f64 {
    let mut s = 0.0;
    for l in 0..a.cols() {
        s += alpha * a[(i, l)] * b[(l, j)];
    }
    s
}

#[userfn]
pub fn mv(#[index] i: usize, a: Mat<f32>, x: &[f32]) -> f32 {
    let mut s = 0.0f32;
    for l in 0..a.cols() {
        s += a[(i, l)] * x[l];
    }
    s
}

#[userfn]
pub fn mv_f64(#[index] i: usize, a: Mat<f64>, x: &[f64]) -> f64 {
    let mut s = 0.0;
    for l in 0..x.len() {
        s += a[(i, l)] * x[l];
    }
    s
}

/// bicg's `s = A^T r`: a column of `A` per output.
#[userfn]
pub fn mtv(#[index] j: usize, a: Mat<f32>, r: &[f32]) -> f32 {
    let mut s = 0.0f32;
    for l in 0..a.rows() {
        s += r[l] * a[(l, j)];
    }
    s
}

/// Floats in [-1, 1) with many bits set (sums round differently in another order).
fn floats(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

fn mat(rows: usize, cols: usize, seed: u64) -> Matrix<f32> {
    Matrix::from_vec(rows, cols, floats(rows * cols, seed)).unwrap()
}

fn bits<T: Copy, U: PartialEq + std::fmt::Debug>(v: &[T], f: impl Fn(T) -> U) -> Vec<U> {
    v.iter().map(|&x| f(x)).collect()
}

#[test]
fn loopnest_matrix_products_match_cpu_bit_for_bit() {
    for &(m, k, n) in SHAPES {
        let (a, b) = (mat(m, k, 1), mat(k, n, 2));
        let mut want = Matrix::filled(m, n, f32::NAN);
        Map::new(mm)
            .arrays((&a, &b))
            .backend(Backend::Cpu)
            .run_index(&mut want)
            .unwrap();
        let mut want_mp = Matrix::filled(m, n, f32::NAN);
        Map::new(min_plus)
            .arrays((&a, &b))
            .uniforms((k as u32,))
            .backend(Backend::Cpu)
            .run_index(&mut want_mp)
            .unwrap();
        for be in backends() {
            for checked in [false, true] {
                let mut got = Matrix::filled(m, n, f32::NAN);
                Map::new(mm)
                    .arrays((&a, &b))
                    .backend(be)
                    .checked(checked)
                    .run_index(&mut got)
                    .unwrap();
                assert_eq!(
                    bits(got.as_slice(), f32::to_bits),
                    bits(want.as_slice(), f32::to_bits),
                    "{be} checked={checked} {m}x{k}x{n}"
                );
                let mut got = Matrix::filled(m, n, f32::NAN);
                Map::new(min_plus)
                    .arrays((&a, &b))
                    .uniforms((k as u32,))
                    .backend(be)
                    .checked(checked)
                    .run_index(&mut got)
                    .unwrap();
                assert_eq!(
                    bits(got.as_slice(), f32::to_bits),
                    bits(want_mp.as_slice(), f32::to_bits),
                    "min-plus {be} checked={checked} {m}x{k}x{n}"
                );
            }
        }
    }
}

/// The oracle itself: the cpu backend runs these through a blocked loop; each element must
/// still be the user function's own fold, in its order.
#[test]
fn loopnest_cpu_equals_the_per_element_fold() {
    // and empty outputs and operands, which only the CPU backends' blocked loops see
    for &(m, k, n) in SHAPES.iter().chain(&[(0, 4, 3), (3, 4, 0), (0, 0, 0)]) {
        let (a, b) = (mat(m, k, 7), mat(k, n, 8));
        let (ad, bd) = (a.as_slice(), b.as_slice());
        let fold = |init: f32, step: &dyn Fn(f32, f32, f32) -> f32| -> Vec<u32> {
            (0..m * n)
                .map(|p| {
                    let (i, j) = (p / n, p % n);
                    (0..k)
                        .fold(init, |s, l| step(s, ad[i * k + l], bd[l * n + j]))
                        .to_bits()
                })
                .collect()
        };
        for be in [Backend::Cpu, Backend::Rayon]
            .into_iter()
            .filter(|&b| available(b))
        {
            let mut got = Matrix::filled(m, n, f32::NAN);
            Map::new(mm)
                .arrays((&a, &b))
                .backend(be)
                .run_index(&mut got)
                .unwrap();
            assert_eq!(
                bits(got.as_slice(), f32::to_bits),
                fold(0.0, &|s, x, y| s + x * y),
                "{be}"
            );
            Map::new(min_plus)
                .arrays((&a, &b))
                .uniforms((k as u32,))
                .backend(be)
                .run_index(&mut got)
                .unwrap();
            assert_eq!(
                bits(got.as_slice(), f32::to_bits),
                fold(f32::INFINITY, &|s, x, y| s.min(x + y)),
                "{be}"
            );
        }
        // matrix-vector and its transpose, over `a` as m x k
        let x = floats(k, 9);
        let r = floats(m, 10);
        let want_y: Vec<u32> = (0..m)
            .map(|i| {
                (0..k)
                    .fold(0.0f32, |s, l| s + ad[i * k + l] * x[l])
                    .to_bits()
            })
            .collect();
        let want_s: Vec<u32> = (0..k)
            .map(|j| {
                (0..m)
                    .fold(0.0f32, |s, l| s + r[l] * ad[l * k + j])
                    .to_bits()
            })
            .collect();
        let (xv, rv) = (Vector::from(x), Vector::from(r));
        for be in [Backend::Cpu, Backend::Rayon]
            .into_iter()
            .filter(|&b| available(b))
        {
            let mut y = Vector::filled(m, f32::NAN);
            Map::new(mv)
                .arrays((&a, &xv))
                .backend(be)
                .run_index(&mut y)
                .unwrap();
            assert_eq!(bits(&y.to_vec(), f32::to_bits), want_y, "{be}");
            let mut s = Vector::filled(k, f32::NAN);
            Map::new(mtv)
                .arrays((&a, &rv))
                .backend(be)
                .run_index(&mut s)
                .unwrap();
            assert_eq!(bits(&s.to_vec(), f32::to_bits), want_s, "{be}");
        }
    }
}

/// A trip count past the matrix is the per-element path's fault, as without the nest.
#[test]
fn loopnest_an_out_of_range_step_count_is_still_an_err() {
    let (a, b) = (mat(4, 3, 1), mat(3, 5, 2));
    for be in backends() {
        let mut got = Matrix::filled(4, 5, 0.0f32);
        let r = Map::new(min_plus)
            .arrays((&a, &b))
            .uniforms((4u32,))
            .backend(be)
            .checked(true)
            .run_index(&mut got);
        assert!(matches!(r, Err(Error::UserFunction { .. })), "{be}: {r:?}");
    }
}

#[test]
fn loopnest_integer_and_f64_products_match_cpu() {
    for &(m, k, n) in SHAPES {
        let ai = Matrix::from_fn(m, k, |r, c| ((r * 31 + c * 7) % 19) as i64 - 9);
        let bi = Matrix::from_fn(k, n, |r, c| ((r * 5 + c * 13) % 23) as i64 - 11);
        let ad = Matrix::from_fn(m, k, |r, c| (r as f64 + 0.3).sin() * (c as f64 + 0.7).cos());
        let bd = Matrix::from_fn(k, n, |r, c| (r as f64 * 0.37).cos() - c as f64 * 1e-3);
        let mut want_i = Matrix::filled(m, n, 0i64);
        Map::new(mm_i64)
            .arrays((&ai, &bi))
            .backend(Backend::Cpu)
            .run_index(&mut want_i)
            .unwrap();
        let mut want_d = Matrix::filled(m, n, f64::NAN);
        Map::new(mm_f64)
            .arrays((&ad, &bd))
            .uniforms((0.75,))
            .backend(Backend::Cpu)
            .run_index(&mut want_d)
            .unwrap();
        for be in backends() {
            let mut got = Matrix::filled(m, n, 0i64);
            Map::new(mm_i64)
                .arrays((&ai, &bi))
                .backend(be)
                .run_index(&mut got)
                .unwrap();
            assert_eq!(got.as_slice(), want_i.as_slice(), "{be} {m}x{k}x{n}");
            let mut got = Matrix::filled(m, n, f64::NAN);
            Map::new(mm_f64)
                .arrays((&ad, &bd))
                .uniforms((0.75,))
                .backend(be)
                .run_index(&mut got)
                .unwrap();
            assert_eq!(
                bits(got.as_slice(), f64::to_bits),
                bits(want_d.as_slice(), f64::to_bits),
                "{be} {m}x{k}x{n}"
            );
        }
    }
}

#[test]
fn loopnest_matrix_vector_products_match_cpu() {
    for &(rows, cols) in &[
        (1, 1),
        (17, 17),
        (65, 33),
        (1, 300),
        (257, 129),
        (3, 0),
        (131, 64),
    ] {
        let a = mat(rows, cols, 3);
        let x = Vector::from(floats(cols, 4));
        let r = Vector::from(floats(rows, 5));
        let ad = Matrix::from_fn(rows, cols, |i, j| (i as f64 * 0.1 + j as f64).sqrt());
        let xd = Vector::from_fn(cols, |j| 1.0 / (j as f64 + 3.0));
        let run = |be: Backend, checked: bool| {
            let mut y = Vector::filled(rows, f32::NAN);
            Map::new(mv)
                .arrays((&a, &x))
                .backend(be)
                .checked(checked)
                .run_index(&mut y)
                .unwrap();
            let mut s = Vector::filled(cols, f32::NAN);
            Map::new(mtv)
                .arrays((&a, &r))
                .backend(be)
                .checked(checked)
                .run_index(&mut s)
                .unwrap();
            (
                bits(&y.to_vec(), f32::to_bits),
                bits(&s.to_vec(), f32::to_bits),
            )
        };
        let run_d = |be: Backend| {
            let mut y = Vector::filled(rows, f64::NAN);
            Map::new(mv_f64)
                .arrays((&ad, &xd))
                .backend(be)
                .run_index(&mut y)
                .unwrap();
            bits(&y.to_vec(), f64::to_bits)
        };
        let want = run(Backend::Cpu, false);
        let want_d = run_d(Backend::Cpu);
        for be in backends() {
            for checked in [false, true] {
                assert_eq!(
                    run(be, checked),
                    want,
                    "{be} checked={checked} {rows}x{cols}"
                );
            }
            assert_eq!(run_d(be), want_d, "{be} {rows}x{cols}");
        }
    }
}

#[test]
fn loopnest_a_matrix_times_itself() {
    #[userfn]
    fn square(#[index] (i, j): (usize, usize), a: Mat<i32>) -> i32 {
        let mut s = 0i32;
        for l in 0..a.cols() {
            s = s.wrapping_add(a[(i, l)].wrapping_mul(a[(l, j)]));
        }
        s
    }
    for n in [1usize, 5, 67, 130] {
        let a = Matrix::from_fn(n, n, |r, c| (r as i32 * 7919) ^ (c as i32 * 104_729));
        let mut want = Matrix::filled(n, n, 0);
        Map::new(square)
            .arrays((&a,))
            .backend(Backend::Cpu)
            .run_index(&mut want)
            .unwrap();
        for be in backends() {
            let mut got = Matrix::filled(n, n, 0);
            Map::new(square)
                .arrays((&a,))
                .backend(be)
                .run_index(&mut got)
                .unwrap();
            assert_eq!(got.as_slice(), want.as_slice(), "{be} n={n}");
        }
    }
}

#[userfn]
pub fn min_plus_from(
    #[index] (i, j): (usize, usize),
    a: Mat<f32>,
    b: Mat<f32>,
    #[uniform] start: f32,
) -> f32 {
    let mut d = start;
    for l in 0..a.cols() {
        d = d.min(a[(i, l)] + b[(l, j)]);
    }
    d
}

/// The accumulator second and the term first: `max` keeps its own operand order.
#[userfn]
pub fn max_times(
    #[index] (i, j): (usize, usize),
    a: Mat<f64>,
    b: Mat<f64>,
    #[uniform] start: f64,
) -> f64 {
    let mut p = start;
    for l in 0..b.rows() {
        p = (a[(i, l)] * b[(l, j)]).max(p);
    }
    p
}

#[userfn]
pub fn min_plus_i32(#[index] (i, j): (usize, usize), a: Mat<i32>, b: Mat<i32>) -> i32 {
    let mut d = i32::MAX;
    for l in 0..a.cols() {
        d = d.min(a[(i, l)].wrapping_add(b[(l, j)]));
    }
    d
}

#[userfn]
pub fn mv_min_plus(#[index] i: usize, a: Mat<f32>, x: &[f32], #[uniform] start: f32) -> f32 {
    let mut d = start;
    for l in 0..x.len() {
        d = d.min(a[(i, l)] + x[l]);
    }
    d
}

/// `n` values drawn from `pool` (a xorshift of `seed`).
fn drawn<T: Copy>(n: usize, seed: u64, pool: &[T]) -> Vec<T> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            pool[(x >> 33) as usize % pool.len()]
        })
        .collect()
}

/// Min-plus and max-times products run on the GPUs as a plain select, which differs from
/// Rust's `min`/`max` only about NaNs and the sign of zeros; the outputs it may get wrong
/// are folded again exactly. Pools that make many outputs end at a zero of either sign,
/// at a NaN (of either sign, or from the start), or pass through them, and odd and prime
/// shapes, must give the cpu backend's bits everywhere.
#[test]
fn loopnest_min_and_max_products_with_zeros_and_nans_match_cpu() {
    let neg_nan = f32::from_bits(0xffc0_0000);
    let pools: [&[f32]; 3] = [
        &[0.0, -0.0, 1.0, 2.0],
        &[f32::NAN, neg_nan, f32::NAN, 0.0, -0.0, 1.5],
        &[
            0.0,
            -0.0,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1.0,
            -1.0,
            0.25,
            -3.5,
            7.0,
            -0.5,
            2.0,
        ],
    ];
    let shapes = [
        (1, 1, 1),
        (17, 3, 19),
        (67, 129, 61),
        (131, 1, 5),
        (7, 0, 5),
    ];
    for (v, pool) in pools.iter().enumerate() {
        for &(m, k, n) in &shapes {
            let seed = 10 * v as u64;
            let a = Matrix::from_vec(m, k, drawn(m * k, seed + 1, pool)).unwrap();
            let b = Matrix::from_vec(k, n, drawn(k * n, seed + 2, pool)).unwrap();
            let ad = Matrix::from_fn(m, k, |r, c| a[(r, c)] as f64);
            let bd = Matrix::from_fn(k, n, |r, c| -(b[(r, c)] as f64));
            let x = Vector::from(drawn(k, seed + 3, pool));
            for start in [f32::INFINITY, f32::NAN, 0.0, -0.0, 1.0] {
                let run = |be: Backend, checked: bool| {
                    let mut c = Matrix::filled(m, n, 7.0f32);
                    Map::new(min_plus_from)
                        .arrays((&a, &b))
                        .uniforms((start,))
                        .backend(be)
                        .checked(checked)
                        .run_index(&mut c)
                        .unwrap();
                    let mut p = Matrix::filled(m, n, 7.0f64);
                    Map::new(max_times)
                        .arrays((&ad, &bd))
                        .uniforms((-start as f64,))
                        .backend(be)
                        .checked(checked)
                        .run_index(&mut p)
                        .unwrap();
                    let mut y = Vector::filled(m, 7.0f32);
                    Map::new(mv_min_plus)
                        .arrays((&a, &x))
                        .uniforms((start,))
                        .backend(be)
                        .checked(checked)
                        .run_index(&mut y)
                        .unwrap();
                    // Every NaN counts as one value: which NaN an arithmetic operation
                    // gives is unspecified in Rust and differs by hardware (NVIDIA's
                    // OpenCL gives 0x7fffffff for NaN + x where x86 keeps the operand's
                    // 0x7fc00000); the sign and value of every other result must match.
                    let f32_bits = |x: f32| if x.is_nan() { u32::MAX } else { x.to_bits() };
                    let f64_bits = |x: f64| if x.is_nan() { u64::MAX } else { x.to_bits() };
                    (
                        bits(c.as_slice(), f32_bits),
                        bits(p.as_slice(), f64_bits),
                        bits(&y.to_vec(), f32_bits),
                    )
                };
                let want = run(Backend::Cpu, false);
                for be in backends() {
                    for checked in [false, true] {
                        assert_eq!(
                            run(be, checked),
                            want,
                            "{be} checked={checked} pool {v} start {start} {m}x{k}x{n}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn loopnest_integer_min_plus_matches_cpu() {
    for &(m, k, n) in SHAPES.iter().chain(&[(67, 61, 131)]) {
        let a = Matrix::from_fn(m, k, |r, c| ((r * 7919 + c * 31) % 1009) as i32 - 300);
        let b = Matrix::from_fn(k, n, |r, c| {
            if (r + c) % 5 == 0 {
                i32::MAX
            } else {
                ((r * 13 + c * 104_729) % 997) as i32 - 500
            }
        });
        let mut want = Matrix::filled(m, n, 0i32);
        Map::new(min_plus_i32)
            .arrays((&a, &b))
            .backend(Backend::Cpu)
            .run_index(&mut want)
            .unwrap();
        for be in backends() {
            let mut got = Matrix::filled(m, n, 0i32);
            Map::new(min_plus_i32)
                .arrays((&a, &b))
                .backend(be)
                .run_index(&mut got)
                .unwrap();
            assert_eq!(got.as_slice(), want.as_slice(), "{be} {m}x{k}x{n}");
        }
    }
}

#[userfn]
pub fn mv_k(#[index] i: usize, a: Mat<f32>, x: &[f32], #[uniform] k: u32) -> f32 {
    let mut s = 0.0f32;
    for l in 0..k as usize {
        s += a[(i, l)] * x[l];
    }
    s
}

#[userfn]
pub fn mv_u8(#[index] i: usize, a: Mat<u8>, x: &[u8]) -> u32 {
    let mut s = 0u32;
    for l in 0..a.cols() {
        s = s
            .wrapping_mul(3)
            .wrapping_add(a[(i, l)] as u32 * x[l] as u32);
    }
    s
}

/// The GPUs' matrix-vector kernels read rows in chunks (8 KiB of a band: 64 to 256 steps
/// of f32), by 16-byte vectors where every row starts 16-byte aligned and element by
/// element where not, a trip count below the row length or ending inside a chunk folding
/// only its own steps: bands of rows past a multiple of 32, rows of a multiple of 4 elements and not,
/// several chunks and a tail, one-byte elements (16 to a vector) and f64.
#[test]
fn loopnest_matrix_vector_chunks_and_alignments_match_cpu() {
    for &(rows, cols) in &[
        (70, 256),
        (45, 259),
        (33, 390),
        (96, 1000),
        (1, 4096),
        (40, 64),
    ] {
        let a = mat(rows, cols, 11);
        let x = Vector::from(floats(cols, 12));
        let a8 = Matrix::from_fn(rows, cols, |r, c| ((r * 131 + c * 7) % 251) as u8);
        let x8 = Vector::from_fn(cols, |c| (c % 13) as u8);
        let ad = Matrix::from_fn(rows, cols, |i, j| ((i * 3 + j) as f64 * 0.37).sin());
        let xd = Vector::from_fn(cols, |j| 1.0 / (j as f64 + 3.0));
        let run = |be: Backend| {
            let mut out = Vec::new();
            for k in [cols, cols - cols / 3, cols.min(129)] {
                let mut y = Vector::filled(rows, f32::NAN);
                Map::new(mv_k)
                    .arrays((&a, &x))
                    .uniforms((k as u32,))
                    .backend(be)
                    .run_index(&mut y)
                    .unwrap();
                out.push(bits(&y.to_vec(), |v: f32| v.to_bits() as u64));
            }
            let mut y = Vector::filled(rows, 0u32);
            Map::new(mv_u8)
                .arrays((&a8, &x8))
                .backend(be)
                .run_index(&mut y)
                .unwrap();
            out.push(bits(&y.to_vec(), u64::from));
            let mut y = Vector::filled(rows, f64::NAN);
            Map::new(mv_f64)
                .arrays((&ad, &xd))
                .backend(be)
                .run_index(&mut y)
                .unwrap();
            out.push(bits(&y.to_vec(), f64::to_bits));
            out
        };
        let want = run(Backend::Cpu);
        for be in backends() {
            assert_eq!(run(be), want, "{be} {rows}x{cols}");
        }
    }
}

/// The GPUs' matrix-vector kernels take bands of 32, 16 or 8 rows by the row count (the
/// tallest that gives every multiprocessor three bands: 16 from about 6,300 rows and 32
/// from about 12,700 on a 132-multiprocessor GPU, far lower on a 2-core CPU device) and a
/// ring of chunks on CUDA: no rows, one, around a band, primes, row lengths not a
/// multiple of a chunk or of a 16-byte vector, trip counts short of the row, tall and wide
/// matrices, f32, f64 and bytes, all as the cpu backend folds them.
#[test]
fn loopnest_matrix_vector_edge_sizes_match_cpu() {
    for &(rows, cols) in &[
        (0, 5),
        (4, 0),
        (1, 1),
        (31, 7),
        (33, 63),
        (127, 65),
        (8, 4099),
        (3, 10007),
        (6361, 37),
        (13007, 12),
        (12800, 64),
    ] {
        let a = mat(rows, cols, 21);
        let x = Vector::from(floats(cols, 22));
        let a8 = Matrix::from_fn(rows, cols, |r, c| ((r * 7 + c * 13) % 253) as u8);
        let x8 = Vector::from_fn(cols, |c| (c % 11) as u8);
        let ad = Matrix::from_fn(rows, cols, |i, j| ((i * 5 + j) as f64 * 0.29).cos());
        let xd = Vector::from_fn(cols, |j| 1.0 / (j as f64 + 2.0));
        let run = |be: Backend| {
            let mut out = Vec::new();
            let mut y = Vector::filled(rows, f32::NAN);
            Map::new(mv)
                .arrays((&a, &x))
                .backend(be)
                .run_index(&mut y)
                .unwrap();
            out.push(bits(&y.to_vec(), |v: f32| v.to_bits() as u64));
            for k in [cols - cols / 3, cols / 2] {
                let mut y = Vector::filled(rows, f32::NAN);
                Map::new(mv_k)
                    .arrays((&a, &x))
                    .uniforms((k as u32,))
                    .backend(be)
                    .run_index(&mut y)
                    .unwrap();
                out.push(bits(&y.to_vec(), |v: f32| v.to_bits() as u64));
            }
            let mut y = Vector::filled(rows, 0u32);
            Map::new(mv_u8)
                .arrays((&a8, &x8))
                .backend(be)
                .run_index(&mut y)
                .unwrap();
            out.push(bits(&y.to_vec(), u64::from));
            let mut y = Vector::filled(rows, f64::NAN);
            Map::new(mv_f64)
                .arrays((&ad, &xd))
                .backend(be)
                .run_index(&mut y)
                .unwrap();
            out.push(bits(&y.to_vec(), f64::to_bits));
            out
        };
        let want = run(Backend::Cpu);
        for be in backends() {
            assert_eq!(run(be), want, "{be} {rows}x{cols}");
        }
    }
}
