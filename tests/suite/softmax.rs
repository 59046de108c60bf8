//! Row-wise programs (a row softmax and its parts) on every backend: row folds of user
//! structs (`Reduce::run_rows` of a struct matrix, `MapReduce::run_rows` into a struct
//! accumulator, the online softmax statistic), and 2D-index Maps that read a per-row
//! container argument, plain and over lazy inputs. Shapes cover empty, one, primes, rows
//! shorter than a GPU tile (128 values of 4 bytes), around the lengths where CUDA's row fold
//! takes four tiles at once (512 columns for 4-byte values, 256 for 8-byte ones: two per
//! lane, 64-value tiles; 128 for 16-byte ones) and
//! longer, and fewer columns than a vector load; several chunks start inside a row. Integer results
//! are compared exactly with plain Rust and the cpu oracle; float ones with plain Rust
//! within rounding, and bit for bit with the cpu oracle on the host backends.

use proptest::prelude::*;
use skel::prelude::*;

use super::available;

/// `(rows, cols)`: empty, one, primes, around the GPU tiles, long rows and short ones.
pub const ROW_SHAPES: &[(usize, usize)] = &[
    (0, 3),
    (1, 1),
    (2, 1),
    (1, 2),
    (3, 3),
    (5, 4),
    (7, 5),
    (7, 13),
    (3, 127),
    (3, 128),
    (3, 129),
    (2, 511),
    (2, 512),
    (2, 513),
    (2, 1023),
    (3, 1024),
    (2, 1031),
    (1, 2560),
    (1, 4099),
    (131, 67),
    (1031, 2),
];

/// A composable affine map `x -> m x + c` of whole numbers: associative, not commutative,
/// so a fold that regroups keeps the result but one that reorders does not.
#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
pub struct Step {
    pub m: i64,
    pub c: i64,
}

#[userfn]
pub fn to_step(x: i64) -> Step {
    Step {
        m: 1 - 2 * (x & 1),
        c: x,
    }
}

#[userfn]
pub fn then(a: Step, b: Step) -> Step {
    Step {
        m: a.m * b.m,
        c: a.c * b.m + b.c,
    }
}

// The online softmax statistic (`RowStat`) and its user functions, the same file the
// benches time.
#[path = "../../benches/common/softmax.rs"]
mod online;
use online::{merge, normalise, to_stat};

/// Whole numbers (exact in f32): the element, its row's value and its column.
#[userfn]
pub fn cell(#[index] (i, j): (usize, usize), x: f32, per_row: &[f32]) -> f32 {
    x * 3.0 + per_row[i] * 1000.0 + (j % 1000) as f32
}

#[userfn]
pub fn cell_i64(#[index] (i, j): (usize, usize), x: i64, per_row: &[i64]) -> i64 {
    x * 3 + per_row[i] * 100_000 + j as i64
}

#[userfn]
pub fn wrap_add_u8(a: u8, b: u8) -> u8 {
    a + b
}

/// `(rows, cols)` whole numbers in `-8..=8`.
pub fn ints(rows: usize, cols: usize, seed: u64) -> Matrix<f32> {
    Matrix::from_fn(rows, cols, |r, c| {
        (((r * cols + c) as u64 * 2_654_435_761 + seed) % 17) as f32 - 8.0
    })
}

pub fn ints_i64(rows: usize, cols: usize, seed: u64) -> Matrix<i64> {
    Matrix::from_fn(rows, cols, |r, c| {
        (((r * cols + c) as u64 * 2_654_435_761 + seed) % 1001) as i64 - 500
    })
}

/// `then` folded along each row from its first element, as plain Rust.
pub fn steps_plain(m: &Matrix<i64>) -> Vec<Step> {
    let step = |x: i64| Step {
        m: 1 - 2 * (x & 1),
        c: x,
    };
    (0..m.rows())
        .map(|r| {
            m.row(r).iter().skip(1).fold(step(m.row(r)[0]), |a, &x| {
                let b = step(x);
                Step {
                    m: a.m.wrapping_mul(b.m),
                    c: a.c.wrapping_mul(b.m).wrapping_add(b.c),
                }
            })
        })
        .collect()
}

/// Checks `cell` and `cell_i64` over `rows x cols` on `b` (forced into `streams` chunks
/// where the backend splits calls), plain and over a lazy input, against plain Rust.
pub fn check_index_maps(b: Backend, rows: usize, cols: usize, streams: usize) {
    let m = ints(rows, cols, 3);
    let per_row = Vector::from_fn(rows, |r| (r % 97) as f32);
    let mut got = Matrix::zeroed(rows, cols);
    Map::new(cell)
        .arrays((&per_row,))
        .backend(b)
        .streams(streams)
        .run(&m, &mut got)
        .unwrap();
    let want = |x: f32, r: usize, c: usize| x * 3.0 + (r % 97) as f32 * 1000.0 + (c % 1000) as f32;
    for r in 0..rows {
        for c in 0..cols {
            assert_eq!(
                got[(r, c)],
                want(m[(r, c)], r, c),
                "cell ({r}, {c}) of {rows}x{cols}, {streams} streams"
            );
        }
    }
    // The same Map over a lazy one: both read (row, column) from the consumer's loop.
    let lazy = Map::new(cell).arrays((&per_row,)).lazy(&m);
    let mut twice = Matrix::zeroed(rows, cols);
    Map::new(cell)
        .arrays((&per_row,))
        .backend(b)
        .streams(streams)
        .run(&lazy, &mut twice)
        .unwrap();
    for r in 0..rows {
        for c in 0..cols {
            let once = want(m[(r, c)], r, c);
            assert_eq!(
                twice[(r, c)],
                want(once, r, c),
                "lazy cell ({r}, {c}) of {rows}x{cols}"
            );
        }
    }
    let mi = ints_i64(rows, cols, 5);
    let per_row_i = Vector::from_fn(rows, |r| r as i64 * 7 - 40);
    let mut got = Matrix::zeroed(rows, cols);
    Map::new(cell_i64)
        .arrays((&per_row_i,))
        .backend(b)
        .streams(streams)
        .run(&mi, &mut got)
        .unwrap();
    for r in 0..rows {
        for c in 0..cols {
            let want = mi[(r, c)] * 3 + (r as i64 * 7 - 40) * 100_000 + c as i64;
            assert_eq!(got[(r, c)], want, "cell_i64 ({r}, {c}) of {rows}x{cols}");
        }
    }
}

/// Checks the struct row folds over `rows x cols` on `b` against plain Rust and the oracle.
pub fn check_struct_folds(b: Backend, rows: usize, cols: usize) {
    let m = ints_i64(rows, cols, 11);
    let want = steps_plain(&m);
    let mut got = Vector::zeroed(rows);
    MapReduce::new(to_step, then)
        .backend(b)
        .run_rows(&m, &mut got)
        .unwrap();
    assert_eq!(
        got.to_vec(),
        want,
        "MapReduce::run_rows of Steps, {rows}x{cols}"
    );
    // The same over a lazy input, and Reduce::run_rows of the materialised structs.
    let lazy = Map::new(to_step).lazy(&m);
    let mut via_lazy = Vector::zeroed(rows);
    Reduce::new(then)
        .backend(b)
        .run_rows(&lazy, &mut via_lazy)
        .unwrap();
    assert_eq!(
        via_lazy.to_vec(),
        want,
        "Reduce::run_rows of lazy Steps, {rows}x{cols}"
    );
    let mut steps = Matrix::zeroed(rows, cols);
    Map::new(to_step).backend(b).run(&m, &mut steps).unwrap();
    let mut direct = Vector::zeroed(rows);
    Reduce::new(then)
        .backend(b)
        .run_rows(&steps, &mut direct)
        .unwrap();
    assert_eq!(
        direct.to_vec(),
        want,
        "Reduce::run_rows of Steps, {rows}x{cols}"
    );
    // One-byte values: sixteen to a vector load, wrapping.
    let bytes = Matrix::from_fn(rows, cols, |r, c| ((r * 31 + c * 7) % 251) as u8);
    let mut sums = Vector::zeroed(rows);
    Reduce::new(wrap_add_u8)
        .backend(b)
        .run_rows(&bytes, &mut sums)
        .unwrap();
    for r in 0..rows {
        let want = bytes.row(r).iter().fold(0u8, |s, &x| s.wrapping_add(x));
        assert_eq!(sums[r], want, "u8 row {r} of {rows}x{cols}");
    }
}

/// The online softmax (`examples/softmax.rs`) over `rows x cols` on `b`: the statistics
/// and the result against plain Rust within rounding, and on the host backends bit for bit
/// against the cpu oracle.
pub fn check_online_softmax(b: Backend, rows: usize, cols: usize) {
    let m = Matrix::from_fn(rows, cols, |r, c| {
        ((r * 31 + c * 17) % 101) as f32 * 0.05 - 2.5
    });
    let softmax = |b: Backend| {
        let mut stats = Vector::zeroed(rows);
        MapReduce::new(to_stat, merge)
            .backend(b)
            .run_rows(&m, &mut stats)
            .unwrap();
        let mut out = Matrix::zeroed(rows, cols);
        Map::new(normalise)
            .arrays((&stats,))
            .backend(b)
            .run(&m, &mut out)
            .unwrap();
        (stats, out)
    };
    let (stats, out) = softmax(b);
    for r in 0..rows {
        let row = m.row(r);
        let mx = row.iter().copied().fold(f32::MIN, f32::max);
        let sum: f64 = row.iter().map(|&x| ((x - mx) as f64).exp()).sum();
        assert_eq!(stats[r].max, mx, "row {r} max of {rows}x{cols}");
        let rel = (stats[r].sum as f64 - sum).abs() / sum;
        assert!(
            rel < 1e-5,
            "row {r} sum of {rows}x{cols}: {} vs {sum}",
            stats[r].sum
        );
        for c in 0..cols {
            let want = ((row[c] - mx) as f64).exp() / sum;
            let got = out[(r, c)] as f64;
            assert!(
                (got - want).abs() <= 2e-5 * want + 1e-9,
                "({r}, {c}) of {rows}x{cols}: {got} vs {want}"
            );
        }
    }
    if matches!(b, Backend::Cpu | Backend::Rayon) {
        let (oracle_stats, oracle) = softmax(Backend::Cpu);
        assert_eq!(
            stats.to_vec(),
            oracle_stats.to_vec(),
            "stats against cpu, {rows}x{cols}"
        );
        let bits = |m: &Matrix<f32>| m.as_slice().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&out),
            bits(&oracle),
            "softmax against cpu, {rows}x{cols}"
        );
    }
}

/// A non-associative fold of whole words: any regrouping or reordering changes it.
#[userfn]
pub fn mix_u32(a: u32, b: u32) -> u32 {
    a.wrapping_mul(31) ^ b
}

#[userfn]
pub fn mix_u64(a: u64, b: u64) -> u64 {
    a.wrapping_mul(31) ^ b
}

#[userfn]
pub fn same_u32(x: u32) -> u32 {
    x
}

#[userfn]
pub fn row_add_i64(a: i64, b: i64) -> i64 {
    a + b
}

#[userfn]
pub fn row_add_f32(a: f32, b: f32) -> f32 {
    a + b
}

/// The documented order of CUDA's row fold (`cuda/reduce.cu`, `skel_fold_row`) on the
/// host: tiles of `32 * items` values; lane `l` folds the values at `l * items ..` in order,
/// the warp tree combines lane `i` with lane `i + off` for `off` = 1, 2, 4, 8, 16 (lanes
/// without values skipped), and the tiles' results are folded in order.
pub fn cuda_row_order<T: Copy>(row: &[T], items: usize, op: impl Fn(T, T) -> T) -> Option<T> {
    let mut acc: Option<T> = None;
    for tile in row.chunks(32 * items) {
        let mut v: Vec<Option<T>> = (0..32)
            .map(|l| {
                let s = (l * items).min(tile.len());
                let e = (s + items).min(tile.len());
                tile[s..e].iter().copied().reduce(&op)
            })
            .collect();
        for off in [1, 2, 4, 8, 16] {
            for i in (0..32).step_by(2 * off) {
                if let Some(o) = v[i + off] {
                    v[i] = Some(v[i].map_or(o, |a| op(a, o)));
                }
            }
        }
        if let Some(t) = v[0] {
            acc = Some(acc.map_or(t, |a| op(a, t)));
        }
    }
    acc
}

/// `Reduce::run_rows` and `MapReduce::run_rows` with a non-associative operator over
/// `rows x cols` on `b`: on CUDA exactly the documented device order (4 values per lane
/// for `u32`; 2 for a `u64` Reduce, one 16-byte load), on the host backends the sequential
/// fold. OpenCL groups its row folds its own way (not a documented order): skipped there.
pub fn check_fold_order(b: Backend, rows: usize, cols: usize) {
    let words = Matrix::from_fn(rows, cols, |r, c| {
        ((r * cols + c) as u32).wrapping_mul(2_654_435_761) ^ 0x9e37
    });
    let wide = Matrix::from_fn(rows, cols, |r, c| {
        ((r * cols + c) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5bd1
    });
    let m32 = |a: u32, x: u32| a.wrapping_mul(31) ^ x;
    let m64 = |a: u64, x: u64| a.wrapping_mul(31) ^ x;
    let want32: Vec<u32> = (0..rows)
        .map(|r| match b {
            Backend::Cuda => cuda_row_order(words.row(r), 4, m32).unwrap(),
            _ => words.row(r).iter().copied().reduce(m32).unwrap(),
        })
        .collect();
    let want64: Vec<u64> = (0..rows)
        .map(|r| match b {
            Backend::Cuda => cuda_row_order(wide.row(r), 2, m64).unwrap(),
            _ => wide.row(r).iter().copied().reduce(m64).unwrap(),
        })
        .collect();
    let mut got = Vector::zeroed(rows);
    Reduce::new(mix_u32)
        .backend(b)
        .run_rows(&words, &mut got)
        .unwrap();
    assert_eq!(
        got.to_vec(),
        want32,
        "Reduce::run_rows u32 order, {rows}x{cols}"
    );
    let mut got = Vector::zeroed(rows);
    MapReduce::new(same_u32, mix_u32)
        .backend(b)
        .run_rows(&words, &mut got)
        .unwrap();
    assert_eq!(
        got.to_vec(),
        want32,
        "MapReduce::run_rows u32 order, {rows}x{cols}"
    );
    let mut got = Vector::zeroed(rows);
    Reduce::new(mix_u64)
        .backend(b)
        .run_rows(&wide, &mut got)
        .unwrap();
    assert_eq!(
        got.to_vec(),
        want64,
        "Reduce::run_rows u64 order, {rows}x{cols}"
    );
}

/// Plain sums along rows, exact: `i64` and whole-number `f32`, over `rows x cols`.
pub fn check_plain_row_sums(b: Backend, rows: usize, cols: usize) {
    let m = ints_i64(rows, cols, 5);
    let mut got = Vector::zeroed(rows);
    Reduce::new(row_add_i64)
        .backend(b)
        .run_rows(&m, &mut got)
        .unwrap();
    let want: Vec<i64> = (0..rows).map(|r| m.row(r).iter().sum()).collect();
    assert_eq!(got.to_vec(), want, "i64 row sums, {rows}x{cols}");
    let f = ints(rows, cols, 5);
    let mut got = Vector::zeroed(rows);
    Reduce::new(row_add_f32)
        .backend(b)
        .run_rows(&f, &mut got)
        .unwrap();
    let want: Vec<f32> = (0..rows).map(|r| f.row(r).iter().sum()).collect();
    assert_eq!(
        got.to_vec(),
        want,
        "whole-number f32 row sums, {rows}x{cols}"
    );
}

macro_rules! softmax_suite {
    ($name:ident, $backend:expr) => {
        mod $name {
            use super::*;

            const B: Backend = $backend;

            #[test]
            fn struct_row_folds_match_plain_rust() {
                if !available(B) {
                    return;
                }
                for &(rows, cols) in ROW_SHAPES {
                    check_struct_folds(B, rows, cols);
                }
                // A row of no elements has no fold: an error, and the output is untouched.
                let empty = Matrix::<i64>::zeroed(2, 0);
                let mut out = Vector::filled(2, Step { m: 9, c: 9 });
                assert!(MapReduce::new(to_step, then).backend(B).run_rows(&empty, &mut out).is_err());
                assert_eq!(out.to_vec(), vec![Step { m: 9, c: 9 }; 2]);
            }

            #[test]
            fn index_maps_with_per_row_arrays_match_plain_rust() {
                if !available(B) {
                    return;
                }
                for &(rows, cols) in ROW_SHAPES {
                    check_index_maps(B, rows, cols, 1);
                    check_index_maps(B, rows, cols, 3);
                }
            }

            #[test]
            fn online_softmax_matches_plain_rust() {
                if !available(B) {
                    return;
                }
                for &(rows, cols) in ROW_SHAPES {
                    check_online_softmax(B, rows, cols);
                }
            }

            #[test]
            fn non_associative_row_folds_keep_the_documented_order() {
                // OpenCL's row fold order is not the documented CUDA one: not checked.
                if !available(B) || B == Backend::OpenCl {
                    return;
                }
                for cols in [1, 5, 127, 128, 129, 511, 512, 513, 1031, 2560] {
                    check_fold_order(B, 5, cols);
                }
            }

            #[test]
            fn plain_row_sums_take_the_16_byte_loads() {
                if !available(B) {
                    return;
                }
                // Rows a multiple of 16 bytes long: every row starts 16-byte aligned.
                for (rows, cols) in [(3, 128), (2, 512), (3, 1024), (4, 256), (2, 1031)] {
                    check_plain_row_sums(B, rows, cols);
                }
            }

            #[test]
            fn index_map_longer_than_one_grid() {
                if !available(B) {
                    return;
                }
                // Over 4M elements, columns not a multiple of 4: CUDA's grid-stride step runs.
                check_index_maps(B, 2051, 2053, 1);
            }

            proptest! {
                #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

                #[test]
                fn prop_row_forms_of_any_shape(rows in 0usize..40, cols in 1usize..700, streams in 1usize..4) {
                    if available(B) {
                        check_struct_folds(B, rows, cols);
                        check_index_maps(B, rows, cols, streams);
                        check_online_softmax(B, rows, cols);
                    }
                }
            }
        }
    };
}

softmax_suite!(cpu, Backend::Cpu);
softmax_suite!(rayon, Backend::Rayon);
softmax_suite!(opencl, Backend::OpenCl);
softmax_suite!(cuda, Backend::Cuda);
