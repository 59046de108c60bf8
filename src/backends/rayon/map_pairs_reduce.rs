//! MapPairsReduce `run_cols` over few columns on all cores: each result must fold its
//! column in row order (bit-identical to `cpu`), so a column is one chain of dependent
//! operations, and a few columns leave most threads idle or, split between the threads,
//! make every thread stream the whole pair matrix (each row is a cache line or two: 262145
//! x 17 took 30x the time of a hand-written Rayon loop on 16 cores).
//!
//! Here the rows are cut into blocks. All threads compute a block's pair elements
//! `map(v[i], h[j])` (in parallel over bands of rows), stored column by column, while the
//! previous block's columns are folded (in parallel over the columns, each reading only its
//! own columns' runs): each column is still one fold from row 0 down, and the time is that
//! of the folds' chains of operations, not of streaming the matrix once per thread.

use std::any::Any;
use std::sync::{Mutex, PoisonError};

use rayon::prelude::*;

use crate::backends::BinaryFn;
use crate::userfn::sealed::Only;
use crate::userfn::{ContainerArgs, ElementwiseFn, IndexKind};
use crate::DeviceType;

/// Rows per band of a block that one task maps: few enough that the band's rows of the
/// container arguments, read once per column, stay in L1 (at 1024 rows of 17 `f32`, the
/// strided reads from L2 took most of the mapping time), enough for the folds to stream
/// each run.
const BAND_ROWS: usize = 256;

/// Elements from the start of one run of a band to the next: a run of [`BAND_ROWS`] and 16
/// more, so that the runs' starts fall in different cache sets (a fold task reads up to
/// [`FOLD_COLUMNS`] runs side by side; at a stride of 4096 bytes they would share one set of
/// L1).
const RUN: usize = BAND_ROWS + 16;

/// Pair elements per block, about: a block's folds (for 17 columns, a chain of some 30000
/// operations per column, tens of microseconds) outweigh a fork and join, and the block's
/// pair elements (two buffers of them, a few MiB) stay in the cache of a many-core machine.
const BLOCK: usize = 1 << 19;

/// Columns folded by one task of a block's folds: a fold is a chain of dependent operations
/// (an `f32` add every four cycles or so), and four chains side by side still run at the
/// chains' pace (four loads and four adds every four cycles, half of what a core issues),
/// so a task of four columns takes as long as a task of one, and leaves more threads to
/// map the next block. With one task per thread's share of the columns (262145 x 17 on 16
/// threads: nine tasks of two columns, five times the time of a hand-written Rayon loop,
/// round 7), seven threads were left to map a block while nine folded the last; by the
/// count of operations (a block's mapping is some ten times its folds' chain), the mapping
/// was the bottleneck. Four columns: five tasks fold, eleven threads map.
const FOLD_COLUMNS: usize = 4;

/// Whether `run_cols` over `cols` results of `size` bytes is better pipelined
/// ([`fold_cols`]) than split into column ranges: when a thread's share of a row is less
/// than a cache line (threads then read each other's lines, up to the whole matrix each),
/// and there are more than two threads (on one or two, the column ranges read the matrix
/// once or twice, and the pipeline's extra pass over the pair elements weighs).
pub(super) fn pipelined(cols: usize, size: usize) -> bool {
    rayon::current_num_threads() > 2 && narrow(cols, size)
}

/// Whether a column `run_cols` over `cols` results of `size` bytes runs as `cpu` does, on
/// the calling thread: when it is [`narrow`] but not [`pipelined`] (one or two threads).
/// The route decision itself, so that tests assert it rather than its parts.
pub(super) fn cols_run_as_cpu(cols: usize, size: usize) -> bool {
    narrow(cols, size) && !pipelined(cols, size)
}

/// Whether a thread's share of a row of `cols` results of `size` bytes is less than a
/// cache line. On one or two threads such a `run_cols` runs on the calling thread: split
/// into column ranges, each thread streams the whole matrix for half the folds, which on
/// 2 threads of the GPU host took 1.5x (16385 x 17) and 1.6x (262145 x 17) the time of the
/// sequential fold; pipelined ([`fold_cols`]), 3x here.
pub(super) fn narrow(cols: usize, size: usize) -> bool {
    cols.div_ceil(rayon::current_num_threads()) * size < 64
}

/// `out[j]` = the fold, in row order, of column `j` of the pair matrix `map(v[i], h[j])`
/// (as [`crate::backends::cpu::pairs_fold_cols`] with `first = 0`); with no rows, `out`
/// keeps its values.
pub(super) fn fold_cols<M, R, A, B>(
    arrays: <M::Arrays as ContainerArgs>::Refs<'_>,
    (v, h): (&[A], &[B]),
    out: &mut [M::Out],
    uniforms: &M::Uniforms,
) where
    M: ElementwiseFn<Elems = (A, B)>,
    R: BinaryFn<M::Out>,
    A: DeviceType,
    B: DeviceType,
{
    let (rows, cols) = (v.len(), h.len());
    let Some(&fill) = out.first() else {
        return;
    };
    if rows == 0 {
        return;
    }
    let block = (BLOCK / cols)
        .next_multiple_of(BAND_ROWS)
        .max(BAND_ROWS)
        .min(rows);
    let blocks = rows.div_ceil(block);
    let per = FOLD_COLUMNS;
    let map_block = |b: usize, buf: &mut [M::Out]| {
        let at = b * block..rows.min((b + 1) * block);
        buf[..at.len().div_ceil(BAND_ROWS) * RUN * cols]
            .par_chunks_mut(RUN * cols)
            .enumerate()
            .for_each(|(s, band)| {
                let first = at.start + s * BAND_ROWS;
                let n = BAND_ROWS.min(at.end - first);
                map_band::<M, A, B>(arrays, (v, h), (band, n), first, uniforms);
            });
    };
    let fold_block = |b: usize, buf: &[M::Out], out: &mut [M::Out]| {
        let len = block.min(rows - b * block);
        out.par_chunks_mut(per).enumerate().for_each(|(c, o)| {
            fold_band_columns::<R, M::Out>(buf, (len, cols), (c * per, o), b == 0);
        });
    };
    let size = block.div_ceil(BAND_ROWS) * RUN * cols;
    let mut scratch = Scratch::take(2 * size, fill);
    let (even, odd) = scratch[..2 * size].split_at_mut(size);
    map_block(0, even);
    for b in 0..blocks {
        let (now, next) = match b % 2 {
            0 => (&mut *even, &mut *odd),
            _ => (&mut *odd, &mut *even),
        };
        if b + 1 < blocks {
            rayon::join(|| fold_block(b, now, out), || map_block(b + 1, next));
        } else {
            fold_block(b, now, out);
        }
    }
    Scratch::give_back(scratch);
}

/// The last call's two block buffers, kept for the next: fresh ones (a few MiB) cost more
/// in page faults than a short call's whole work (16385 x 17: 6.6 ms against 0.3 ms, on a
/// VM).
struct Scratch;

static SCRATCH: Mutex<Option<Box<dyn Any + Send>>> = Mutex::new(None);

impl Scratch {
    /// At least `len` elements (of unspecified values: every one is written before it is
    /// read), `fill` where new.
    fn take<T: DeviceType>(len: usize, fill: T) -> Vec<T> {
        let kept = SCRATCH
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .and_then(|b| b.downcast::<Vec<T>>().ok());
        match kept {
            Some(v) if v.len() >= len => *v,
            _ => vec![fill; len],
        }
    }

    fn give_back<T: DeviceType>(buf: Vec<T>) {
        *SCRATCH.lock().unwrap_or_else(PoisonError::into_inner) = Some(Box::new(buf));
    }
}

/// The pair elements of rows `first..first + n` (`n >= 1`), column by column:
/// `band[j * RUN + k]` = `map(v[first + k], h[j])`.
fn map_band<M, A, B>(
    arrays: <M::Arrays as ContainerArgs>::Refs<'_>,
    (v, h): (&[A], &[B]),
    (band, n): (&mut [M::Out], usize),
    first: usize,
    uniforms: &M::Uniforms,
) where
    M: ElementwiseFn<Elems = (A, B)>,
    A: DeviceType,
    B: DeviceType,
{
    // Two copies of the loop, as `cpu::map_range` has: where the band's last cell is inside
    // every `Mat` argument, so is every cell of the band, and a read at the pair's own
    // index has no check (a backprop weight `w[(i, j)]`: a compare and a branch less per
    // pair, in the mapping that the other threads do while a block is folded).
    let last = (first + n - 1, h.len() - 1);
    if <M::Arrays as ContainerArgs>::inside(arrays, last, Only) {
        map_band_cells::<M, A, B, true>(arrays, (v, h), (band, n), first, uniforms);
    } else {
        map_band_cells::<M, A, B, false>(arrays, (v, h), (band, n), first, uniforms);
    }
}

/// [`map_band`]'s loop; `INSIDE`: every cell of the band is inside every `Mat` argument.
#[inline(always)]
fn map_band_cells<M, A, B, const INSIDE: bool>(
    arrays: <M::Arrays as ContainerArgs>::Refs<'_>,
    (v, h): (&[A], &[B]),
    (band, n): (&mut [M::Out], usize),
    first: usize,
    uniforms: &M::Uniforms,
) where
    M: ElementwiseFn<Elems = (A, B)>,
    A: DeviceType,
    B: DeviceType,
{
    let cols = h.len();
    // Column by column: each run is written front to back (row by row, the 17 runs of a
    // row of 17 results took 70 % of the time in stalled stores); the band's rows of the
    // container arguments, read once per column, stay in L2.
    for (j, (run, &q)) in band.chunks_mut(RUN).zip(h).enumerate() {
        for (k, (o, &p)) in run[..n].iter_mut().zip(&v[first..first + n]).enumerate() {
            let i = first + k;
            // A debug build checks the hint below.
            debug_assert!(
                !INSIDE || <M::Arrays as ContainerArgs>::inside(arrays, (i, j), Only),
                "a Mat check fails at ({i}, {j}), inside its band's last cell",
            );
            if INSIDE && !<M::Arrays as ContainerArgs>::inside(arrays, (i, j), Only) {
                // SAFETY: never reached. `INSIDE` is passed where `inside` holds at the
                // band's last cell `(first + n - 1, cols - 1)`, and `i <= first + n - 1`,
                // `j <= cols - 1`. `inside` is `true` for a slice and, for a `Mat`, compares
                // the row and the column with its shape and `row * cols + col` with its
                // length, each of which holds at every smaller row and column (a tuple of
                // arguments: all of them). No other crate can override `inside`
                // (`sealed::Only`).
                unsafe { std::hint::unreachable_unchecked() }
            }
            *o = M::apply_with(
                M::Index::from_parts(i * cols + j, (i, j), cols),
                arrays,
                (p, q),
                uniforms,
            );
        }
    }
}

/// Folds columns `first..first + out.len()` of a block of `len` rows (bands of
/// [`BAND_ROWS`] rows laid out by [`map_band`]) into `out`, in row order; `start`: the block is
/// the first, whose row 0 starts each fold.
fn fold_band_columns<R: BinaryFn<T>, T: DeviceType>(
    buf: &[T],
    (len, cols): (usize, usize),
    (first, out): (usize, &mut [T]),
    start: bool,
) {
    let mut j = 0;
    while j < out.len() {
        // Up to four columns' folds at once (a task holds at most [`FOLD_COLUMNS`]):
        // independent chains that fill the pipeline.
        let lanes = match out.len() - j {
            4.. => 4,
            2..=3 => 2,
            _ => 1,
        };
        let o = &mut out[j..j + lanes];
        match lanes {
            4 => fold_lanes::<R, T, 4>(buf, (len, cols), first + j, o, start),
            2 => fold_lanes::<R, T, 2>(buf, (len, cols), first + j, o, start),
            _ => fold_lanes::<R, T, 1>(buf, (len, cols), first + j, o, start),
        }
        j += lanes;
    }
}

/// [`fold_band_columns`] for the `N` columns `first..first + N`, each fold's value in a
/// register of its own.
#[inline(always)]
fn fold_lanes<R: BinaryFn<T>, T: DeviceType, const N: usize>(
    buf: &[T],
    (len, cols): (usize, usize),
    first: usize,
    out: &mut [T],
    start: bool,
) {
    let mut acc: [T; N] = std::array::from_fn(|l| out[l]);
    for (s, band) in buf
        .chunks(RUN * cols)
        .take(len.div_ceil(BAND_ROWS))
        .enumerate()
    {
        let n = BAND_ROWS.min(len - s * BAND_ROWS);
        let runs: [&[T]; N] = std::array::from_fn(|l| &band[(first + l) * RUN..][..n]);
        let skip = usize::from(start && s == 0);
        if skip == 1 {
            acc = std::array::from_fn(|l| runs[l][0]);
        }
        // Row k of all N runs per step, so that the N chains interleave.
        #[allow(clippy::needless_range_loop)]
        for k in skip..n {
            for l in 0..N {
                acc[l] = R::apply((), (acc[l], runs[l][k]), &());
            }
        }
    }
    out.copy_from_slice(&acc);
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;

    #[userfn]
    fn weight(#[index] (i, j): (usize, usize), x: f32, h: f32, w: Mat<f32>) -> f32 {
        x * w[(i, j)] + h
    }

    #[userfn]
    fn add(a: f32, b: f32) -> f32 {
        a + b
    }

    /// `f32` sums (not associative) over one block, several (61953 rows of 17: a last block
    /// of one row), and one column, on more threads than the machine may have (the
    /// pipeline runs from three threads on): bit-identical to the `cpu` oracle, and a fault
    /// is the same `Err` with `out` as it was.
    #[test]
    fn run_cols_pipelined_is_the_cpu_fold() {
        let shapes = [
            (20_000, 17),
            (61_953, 17),
            (200_003, 3),
            (600_001, 1),
            (33_333, 9),
        ];
        for threads in [3, 16] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("pool");
            pool.install(|| {
                assert!(super::pipelined(17, 4));
                assert!(!super::cols_run_as_cpu(17, 4));
                for (rows, cols) in shapes {
                    let x = Vector::from_fn(rows, |i| (i % 97) as f32 * 0.37 - 11.0);
                    let h = Vector::from_fn(cols, |j| j as f32 * 0.5);
                    let w = Matrix::from_fn(rows, cols, |i, j| ((i * 7 + j) % 31) as f32 * 0.1);
                    let mut got = Vector::filled(cols, f32::NAN);
                    let mut want = Vector::filled(cols, f32::NAN);
                    let s = MapPairsReduce::new(weight, add).arrays((&w,));
                    s.backend(Backend::Rayon)
                        .run_cols(&x, &h, &mut got)
                        .expect("rayon");
                    s.backend(Backend::Cpu)
                        .run_cols(&x, &h, &mut want)
                        .expect("cpu");
                    let bits = |v: &Vector<f32>| {
                        v.to_vec().iter().map(|x| x.to_bits()).collect::<Vec<_>>()
                    };
                    assert_eq!(
                        bits(&got),
                        bits(&want),
                        "{rows}x{cols} on {threads} threads"
                    );
                }
                // A read out of range in a late block: the Err, and `out` as it was.
                let (rows, cols) = (50_000, 4);
                let (x, h) = (Vector::filled(rows, 1.0f32), Vector::filled(cols, 1.0f32));
                let short = Matrix::filled(rows - 1, cols, 1.0f32);
                let mut out = Vector::filled(cols, 7.0f32);
                let err = MapPairsReduce::new(weight, add)
                    .arrays((&short,))
                    .backend(Backend::Rayon)
                    .checked(true)
                    .run_cols(&x, &h, &mut out)
                    .unwrap_err();
                assert!(matches!(err, Error::UserFunction { .. }), "{err}");
                assert_eq!(out.to_vec(), vec![7.0; cols]);
            });
        }
    }

    /// On one or two threads a narrow `run_cols` runs as `cpu` does (its own route, not
    /// the pipeline, not column ranges): the same bits, and a fault leaves `out` as it was.
    #[test]
    fn run_cols_narrow_on_two_threads_is_the_cpu_fold() {
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("pool");
            pool.install(|| {
                assert!(!super::pipelined(17, 4));
                // The route: a thread's share of a row under a cache line runs as `cpu`
                // (17 columns of `f32` on 2 threads, 5 on either); at least a cache line
                // keeps the column ranges (64 columns; 17 on one thread, 68 bytes).
                assert_eq!(super::cols_run_as_cpu(17, 4), threads == 2);
                assert!(super::cols_run_as_cpu(5, 4));
                assert!(!super::cols_run_as_cpu(64, 4));
                for (rows, cols) in [(16_385, 17), (40_001, 5), (5, 3)] {
                    let x = Vector::from_fn(rows, |i| (i % 89) as f32 * 0.41 - 9.0);
                    let h = Vector::from_fn(cols, |j| j as f32 * 0.25);
                    let w = Matrix::from_fn(rows, cols, |i, j| ((i * 5 + j) % 29) as f32 * 0.3);
                    let (mut got, mut want) = (Vector::zeroed(cols), Vector::zeroed(cols));
                    let s = MapPairsReduce::new(weight, add).arrays((&w,));
                    s.backend(Backend::Rayon)
                        .run_cols(&x, &h, &mut got)
                        .expect("rayon");
                    s.backend(Backend::Cpu)
                        .run_cols(&x, &h, &mut want)
                        .expect("cpu");
                    let bits = |v: &Vector<f32>| {
                        v.to_vec().iter().map(|x| x.to_bits()).collect::<Vec<_>>()
                    };
                    assert_eq!(bits(&got), bits(&want), "{rows}x{cols} on {threads}");
                }
                let (x, h) = (Vector::filled(30_000, 1.0f32), Vector::filled(17, 1.0f32));
                let short = Matrix::filled(29_999, 17, 1.0f32);
                let mut out = Vector::filled(17, 7.0f32);
                let err = MapPairsReduce::new(weight, add)
                    .arrays((&short,))
                    .backend(Backend::Rayon)
                    .checked(true)
                    .run_cols(&x, &h, &mut out)
                    .unwrap_err();
                assert!(matches!(err, Error::UserFunction { .. }), "{err}");
                assert_eq!(out.to_vec(), vec![7.0; 17]);
            });
        }
    }
}
