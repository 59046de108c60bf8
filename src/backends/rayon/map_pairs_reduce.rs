//! MapPairsReduce `run_cols` over few columns on all cores: each result must fold its
//! column in row order (bit-identical to `cpu`), so a column is one chain of dependent
//! operations, and a few columns leave most threads idle or, split between the threads,
//! make every thread stream the whole pair matrix (each row is a cache line or two: 262145
//! x 17 took 30x the time of a hand-written Rayon loop on 16 cores).
//!
//! Here the folds are relayed from thread to thread, band after band, to where each band's
//! pair elements are. Every thread takes the next band of rows, maps its pair elements
//! into a buffer of its own (row by row, vectorised across the columns, then group by
//! group of columns), and folds it into the results group after group, each group's fold
//! when its turn for this band comes (the band before folded into it): each column is
//! still one fold from row 0 down. All threads map; the pair elements never
//! leave the core that mapped them, only the results do, a few values per band; and the
//! groups' relays run side by side, each band's group 0 folded while the band before folds
//! group 1. History, 262145 x 17 on 16 cores of the H100 host against a hand-written Rayon
//! loop's 0.2 ms: blocks of rows separated by a fork and a join, 1.2-1.4 ms (a block's
//! folds waited for its last band, the next block's mapping for the slowest fold); a ring
//! of band buffers folded group by group by whichever thread held the group, 0.4-0.55 ms
//! on a quiet host and 0.7-3.7 ms on a busy one (five folders pulled every band from the
//! cores that mapped it, and a descheduled folder stopped its group); one relay for all
//! columns, 0.55-0.74 ms (its serial fold read every band from L2, 1.9 us a band).
//!
//! A thread waits only for the band before its own, whose thread is running: it took that
//! band first, and waits only for the band before. A thread in a nested Rayon call inside
//! the user function may pick up another of this call's tasks while it waits; that task
//! leaves at once ([`IN_RELAY`]), so no thread ever waits for a band lower on its own
//! stack. A panic (a fault of the user function in a checked call) stops every waiter.

use std::cell::{Cell, UnsafeCell};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use rayon::prelude::*;

use crate::backends::BinaryFn;
use crate::userfn::sealed::Only;
use crate::userfn::{ContainerArgs, ElementwiseFn, IndexKind};
use crate::DeviceType;

/// Rows per band, at most: a band's fold (per column, a chain of this many additions, about
/// a microsecond) outweighs passing the turn on.
const BAND_ROWS: usize = 1024;

/// Rows per band, at least, where a band of [`BAND_ROWS`] would take more than
/// [`BAND_BYTES`].
const MIN_BAND_ROWS: usize = 64;

/// A band's pair elements, at most, about: each thread holds a band (17 `f32` columns: 80
/// KB), and with thousands of columns on a many-core machine bands of [`BAND_ROWS`] would
/// take gigabytes.
const BAND_BYTES: usize = 1 << 18;

/// Elements between one group's block of a band's buffer and the next, past the block's
/// rows: the blocks' starts fall in different cache sets (a band is mapped into all of
/// them side by side; at a stride of 4096 bytes they would share one set of L1).
const GROUP_GAP: usize = 16;

/// Rows mapped at a time, before they go to their groups' blocks: few enough to stay in L1
/// between the two (a whole band's rows, 70 KB for 17 `f32` columns, took 3x as long).
const TILE_ROWS: usize = 64;

/// Columns whose folds pass from thread to thread together, where many threads map: the
/// groups' relays run side by side, each band's fold of a group a short chain (a SIMD
/// addition per row). On 16 cores, 262145 x 17 took 0.40 ms in groups of four against
/// 0.64-0.87 ms in one group of all columns, whose one relay was the bound.
const NARROW_GROUP: usize = 4;

/// Columns per group where few threads map: one group of all columns (up to this many),
/// one pass over a band's pair elements per band (in groups of four, each band's five folds
/// of 262145 x 17 weighed more than the relay's waits: 1.4x the time on 4 cores, 1.2x on
/// 8).
const WIDE_GROUP: usize = 32;

/// Threads from which the groups are [`NARROW_GROUP`] wide.
const NARROW_FROM_THREADS: usize = 12;

/// Spins between looks at a turn before a waiting thread yields its core: a band takes
/// microseconds, but on a machine with fewer cores than threads (a test's pool of 16 on 2)
/// the thread whose turn it is may need this one's core.
const SPINS_BEFORE_YIELD: u32 = 1 << 14;

/// Lines that pass one group's turn: more than there are threads waiting, so that each
/// waits on a line of its own (with one counter for all, every pass of the turn made all
/// the waiters fetch it again, the next band's thread among them).
const TURNS: usize = 64;

thread_local! {
    /// Whether this thread is inside a relay's task (lower on its stack).
    static IN_RELAY: Cell<bool> = const { Cell::new(false) };
}

/// Whether `run_cols` over `cols` results of `size` bytes is better relayed
/// ([`fold_cols`]) than split into column ranges: when a thread's share of a row is less
/// than a cache line (threads then read each other's lines, up to the whole matrix each),
/// on two threads or more (on 2 threads of the H100 host, 262145 x 17 took 1.65 ms relayed
/// against 1.76 ms on one thread).
pub(super) fn relayed(cols: usize, size: usize) -> bool {
    rayon::current_num_threads() > 1 && narrow(cols, size)
}

/// Whether a column `run_cols` over `cols` results of `size` bytes runs as `cpu` does, on
/// the calling thread: when it is [`narrow`] but not [`relayed`] (one thread).
/// The route decision itself, so that tests assert it rather than its parts.
pub(super) fn cols_run_as_cpu(cols: usize, size: usize) -> bool {
    narrow(cols, size) && !relayed(cols, size)
}

/// Whether a thread's share of a row of `cols` results of `size` bytes is less than a
/// cache line: split into column ranges, each thread would stream the whole matrix for a
/// few folds (on 2 threads of the GPU host, 1.5x the time of the sequential fold).
pub(super) fn narrow(cols: usize, size: usize) -> bool {
    cols.div_ceil(rayon::current_num_threads()) * size < 64
}

/// `out[j]` = the fold, in row order, of column `j` of the pair matrix `map(v[i], h[j])`
/// (as [`crate::backends::cpu::pairs_fold_cols`] with `first = 0`); with no rows, `out`
/// keeps its values.
pub(super) fn fold_cols<M, R, A, B>(
    arrays: <M::Arrays as ContainerArgs>::Refs<'_>,
    operands: (&[A], &[B]),
    out: &mut [M::Out],
    uniforms: &M::Uniforms,
) where
    M: ElementwiseFn<Elems = (A, B)>,
    R: BinaryFn<M::Out>,
    A: DeviceType,
    B: DeviceType,
{
    let width = match rayon::current_num_threads() >= NARROW_FROM_THREADS {
        true => NARROW_GROUP,
        false => out.len().next_multiple_of(4).min(WIDE_GROUP),
    };
    match width {
        4 => relay::<M, R, A, B, 4>(arrays, operands, out, uniforms),
        8 => relay::<M, R, A, B, 8>(arrays, operands, out, uniforms),
        12 => relay::<M, R, A, B, 12>(arrays, operands, out, uniforms),
        16 => relay::<M, R, A, B, 16>(arrays, operands, out, uniforms),
        20 => relay::<M, R, A, B, 20>(arrays, operands, out, uniforms),
        24 => relay::<M, R, A, B, 24>(arrays, operands, out, uniforms),
        28 => relay::<M, R, A, B, 28>(arrays, operands, out, uniforms),
        _ => relay::<M, R, A, B, WIDE_GROUP>(arrays, operands, out, uniforms),
    }
}

/// [`fold_cols`] in groups of `W` columns (a multiple of 4: a group's folds in `W / 4`
/// SIMD registers).
fn relay<M, R, A, B, const W: usize>(
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
    let groups = cols.div_ceil(W);
    let band_rows =
        (BAND_BYTES / (groups * W * size_of::<M::Out>()).max(1)).clamp(MIN_BAND_ROWS, BAND_ROWS);
    let relay = Relay {
        bands: rows.div_ceil(band_rows),
        band_rows,
        rows,
        next: Padded(AtomicUsize::new(0)),
        turns: (0..groups * TURNS)
            .map(|t| {
                Padded(AtomicUsize::new(if t % TURNS == 0 {
                    0
                } else {
                    usize::MAX
                }))
            })
            .collect(),
        accs: (0..groups)
            .map(|_| Padded(UnsafeCell::new([fill; W])))
            .collect(),
        poisoned: AtomicBool::new(false),
    };
    let map = |rows: Range<usize>, buf: &mut [M::Out], tile: &mut Vec<M::Out>| {
        let stride = band_rows * W + GROUP_GAP;
        map_band::<M, A, B, W>(arrays, (v, h), (buf, stride, tile), rows, uniforms);
    };
    (0..rayon::current_num_threads())
        .into_par_iter()
        .with_max_len(1)
        .for_each(|_| relay.run::<R, _>(&map, fill, true));
    // Every task that ran took bands until none was left and folded each: the bands are
    // all folded unless no task ran (each found this thread's relay below it), and then
    // this thread folds them all.
    if !relay.is_turn(groups - 1, relay.bands) {
        relay.run::<R, _>(&map, fill, false);
    }
    for (o, acc) in out.chunks_mut(W).zip(relay.accs) {
        o.copy_from_slice(&acc.0.into_inner()[..o.len()]);
    }
}

/// A value on cache lines of its own: the turns are written by one thread and polled by
/// another, and on a shared line each write stalled every poller and each poll the writer.
#[repr(align(128))]
struct Padded<T>(T);

/// The shared state of one [`fold_cols`].
struct Relay<T, const W: usize> {
    bands: usize,
    band_rows: usize,
    rows: usize,
    /// The next band to take.
    next: Padded<AtomicUsize>,
    /// Whose turn it is to fold group `g`: band `b` may, once `turns[g * TURNS + b % TURNS]`
    /// holds `b`, stored by the thread that folded group `g` of band `b - 1`.
    turns: Vec<Padded<AtomicUsize>>,
    /// Per group, its folds so far (the last group's lanes past the columns fold copies of
    /// its first column), read and written only by the thread whose turn it is.
    accs: Vec<Padded<UnsafeCell<[T; W]>>>,
    /// Set by a thread that unwinds: its band will never be folded.
    poisoned: AtomicBool,
}

// SAFETY: a group's `acc`, the only state behind an `UnsafeCell`, is read and written only
// by the thread whose band's turn it is for that group (an Acquire load of `turns`), which
// passes it on with its Release store.
unsafe impl<T: Send + Sync, const W: usize> Sync for Relay<T, W> {}

impl<T: DeviceType, const W: usize> Relay<T, W> {
    /// Takes, maps and folds bands until none is left. `nested`: leave at once if this
    /// thread is already inside a relay's task.
    fn run<R, F>(&self, map: &F, fill: T, nested: bool)
    where
        R: BinaryFn<T>,
        F: Fn(Range<usize>, &mut [T], &mut Vec<T>) + Sync,
    {
        if nested && IN_RELAY.with(Cell::get) {
            return;
        }
        let _inside = Inside::enter();
        let _poison = PoisonOnUnwind(&self.poisoned);
        let groups = self.accs.len();
        let stride = self.band_rows * W + GROUP_GAP;
        let mut buf = vec![fill; groups * stride];
        // A band's pair elements row by row, before they go to their groups' blocks.
        let mut tile = Vec::new();
        loop {
            let band = self.next.0.fetch_add(1, Ordering::Relaxed);
            if band >= self.bands {
                return;
            }
            let first = band * self.band_rows;
            let n = self.band_rows.min(self.rows - first);
            map(first..first + n, &mut buf, &mut tile);
            for (g, acc) in self.accs.iter().enumerate() {
                if !self.wait_for_turn(g, band) {
                    return;
                }
                // SAFETY: it is this band's turn for group `g` (the Acquire load in
                // `is_turn` pairs with the Release store of the band before): no other
                // thread touches its `acc` until the store below.
                let acc = unsafe { &mut *acc.0.get() };
                let block = &buf[g * stride..][..n * W];
                fold_rows::<R, T, W>(block, acc, band == 0);
                self.turns[g * TURNS + (band + 1) % TURNS]
                    .0
                    .store(band + 1, Ordering::Release);
            }
        }
    }

    /// Whether band `band` may fold group `g` (all bands before it have).
    fn is_turn(&self, g: usize, band: usize) -> bool {
        self.turns[g * TURNS + band % TURNS]
            .0
            .load(Ordering::Acquire)
            == band
    }

    /// Waits until band `band` may fold group `g`; `false` if a thread unwound instead.
    fn wait_for_turn(&self, g: usize, band: usize) -> bool {
        let mut spins = 0;
        while !self.is_turn(g, band) {
            if self.poisoned.load(Ordering::Relaxed) {
                return false;
            }
            spins += 1;
            if spins < SPINS_BEFORE_YIELD {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        true
    }
}

/// [`IN_RELAY`] for as long as it lives.
struct Inside(bool);

impl Inside {
    fn enter() -> Self {
        Self(IN_RELAY.with(|f| f.replace(true)))
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        IN_RELAY.with(|f| f.set(self.0));
    }
}

/// Sets its flag if dropped while the thread unwinds.
struct PoisonOnUnwind<'a>(&'a AtomicBool);

impl Drop for PoisonOnUnwind<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}

/// The pair elements of the (non-empty) band of `rows` into a band's buffer, group by
/// group of `W` columns, each group's rows one after the other at `stride` elements from
/// the last: `buf[g * stride + k * W + l]` = `map(v[rows.start + k], h[g * W + l])`, and
/// the last group's lanes past the columns copies of its first column (so that they fault
/// only where it does).
fn map_band<M, A, B, const W: usize>(
    arrays: <M::Arrays as ContainerArgs>::Refs<'_>,
    (v, h): (&[A], &[B]),
    (buf, stride, tile): (&mut [M::Out], usize, &mut Vec<M::Out>),
    rows: Range<usize>,
    uniforms: &M::Uniforms,
) where
    M: ElementwiseFn<Elems = (A, B)>,
    A: DeviceType,
    B: DeviceType,
{
    tile.resize(TILE_ROWS * h.len(), buf[0]);
    // Two copies of the loop, as `cpu::map_range` has: where the band's last cell is inside
    // every `Mat` argument, so is every cell of the band, and a read at the pair's own
    // index has no check (a backprop weight `w[(i, j)]`: a compare and a branch less per
    // pair).
    let (first, n) = (rows.start, rows.len());
    let last = (first + n - 1, h.len() - 1);
    let at = (buf, stride, &mut tile[..], n);
    if <M::Arrays as ContainerArgs>::inside(arrays, last, Only) {
        map_band_cells::<M, A, B, W, true>(arrays, (v, h), at, first, uniforms);
    } else {
        map_band_cells::<M, A, B, W, false>(arrays, (v, h), at, first, uniforms);
    }
}

/// [`map_band`]'s loop; `INSIDE`: every cell of the band is inside every `Mat` argument.
#[inline(always)]
fn map_band_cells<M, A, B, const W: usize, const INSIDE: bool>(
    arrays: <M::Arrays as ContainerArgs>::Refs<'_>,
    (v, h): (&[A], &[B]),
    (buf, stride, tile, n): (&mut [M::Out], usize, &mut [M::Out], usize),
    first: usize,
    uniforms: &M::Uniforms,
) where
    M: ElementwiseFn<Elems = (A, B)>,
    A: DeviceType,
    B: DeviceType,
{
    let cols = h.len();
    let map = |i: usize, j: usize, p: A, q: B| {
        // A debug build checks the hint below.
        debug_assert!(
            !INSIDE || <M::Arrays as ContainerArgs>::inside(arrays, (i, j), Only),
            "a Mat check fails at ({i}, {j}), inside its band's last cell",
        );
        if INSIDE && !<M::Arrays as ContainerArgs>::inside(arrays, (i, j), Only) {
            // SAFETY: never reached. `INSIDE` is passed where `inside` holds at the band's
            // last cell `(first + n - 1, cols - 1)`, and `i <= first + n - 1`, `j <= cols -
            // 1`. `inside` is `true` for a slice and, for a `Mat`, compares the row and the
            // column with its shape and `row * cols + col` with its length, each of which
            // holds at every smaller row and column (a tuple of arguments: all of them). No
            // other crate can override `inside` (`sealed::Only`).
            unsafe { std::hint::unreachable_unchecked() }
        }
        M::apply_with(
            M::Index::from_parts(i * cols + j, (i, j), cols),
            arrays,
            (p, q),
            uniforms,
        )
    };
    if cols <= W {
        // One group: its rows are the band's.
        let rows = buf[..n * W].chunks_exact_mut(W).zip(&v[first..first + n]);
        for (k, (row, &p)) in rows.enumerate() {
            for (j, (o, &q)) in row.iter_mut().zip(h).enumerate() {
                *o = map(first + k, j, p, q);
            }
            let lane0 = row[0];
            row[cols..].fill(lane0);
        }
        return;
    }
    // Row by row into `tile`, as `cpu` walks them (the cells of a row are neighbours in a
    // row-major `Mat` argument, and their maps independent: SIMD code), then each row's
    // groups to their blocks. Mapped group by group straight into the blocks, the maps of a
    // group's few cells were scalar code and took three times as long.
    for start in (0..n).step_by(TILE_ROWS) {
        let m = TILE_ROWS.min(n - start);
        let tile = &mut tile[..m * cols];
        let v = &v[first + start..first + start + m];
        for (k, (row, &p)) in tile.chunks_exact_mut(cols).zip(v).enumerate() {
            let i = first + start + k;
            for (j, (o, &q)) in row.iter_mut().zip(h).enumerate() {
                *o = map(i, j, p, q);
            }
        }
        for (g, block) in buf.chunks_mut(stride).take(cols.div_ceil(W)).enumerate() {
            let j0 = g * W;
            let rows = block[start * W..][..m * W]
                .chunks_exact_mut(W)
                .zip(tile.chunks_exact(cols));
            if cols - j0 >= W {
                // A length known to the compiler: moves of a register or a few (a
                // `memmove` call per row took longer than the maps).
                for (to, row) in rows {
                    to.copy_from_slice(&row[j0..j0 + W]);
                }
            } else {
                let lanes: [usize; W] =
                    std::array::from_fn(|l| j0 + if j0 + l < cols { l } else { 0 });
                for (to, row) in rows {
                    for (t, &j) in to.iter_mut().zip(&lanes) {
                        *t = row[j];
                    }
                }
            }
        }
    }
}

/// Folds the rows of `block` (of `W`) into `acc`, lane by lane in row order, each fold's
/// value in a register of its own; `start`: the band is the first, whose row 0 starts each
/// fold.
#[inline(always)]
fn fold_rows<R: BinaryFn<T>, T: DeviceType, const W: usize>(
    block: &[T],
    acc: &mut [T; W],
    start: bool,
) {
    let mut rows = block.chunks_exact(W);
    let mut a = *acc;
    if start {
        if let Some(row) = rows.next() {
            a = std::array::from_fn(|l| row[l]);
        }
    }
    // A row of the W columns per step: W independent chains, interleaved.
    #[allow(clippy::needless_range_loop)]
    for row in rows {
        for l in 0..W {
            a[l] = R::apply((), (a[l], row[l]), &());
        }
    }
    *acc = a;
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

    /// `f32` sums (not associative) over one band, several, more bands than turn lines, and
    /// one column, on more threads than the machine may have (the relay runs from two
    /// threads on, and waits yield the core):
    /// bit-identical to the `cpu` oracle, and a fault is the same `Err` with `out` as it
    /// was.
    #[test]
    fn run_cols_relayed_is_the_cpu_fold() {
        // Bands of 1024 rows: one row, a band's edges, 64 bands or more (the turn lines'
        // wrap), groups with a narrower last group, and bands cut shorter for many columns
        // (240 on 16 threads).
        let shapes = [
            (1, 5),
            (1024, 4),
            (1025, 7),
            (64 * 1024 + 1, 2),
            (20_000, 17),
            (61_953, 17),
            (200_003, 3),
            (600_001, 1),
            (33_333, 9),
            (5_000, 40),
            (70_001, 33),
            (3_001, 240),
        ];
        for threads in [2, 3, 16] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("pool");
            pool.install(|| {
                assert!(super::relayed(17, 4));
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

    /// On one thread a narrow `run_cols` runs as `cpu` does, on two it is relayed: the same
    /// bits either way, and a fault leaves `out` as it was.
    #[test]
    fn run_cols_on_one_or_two_threads_is_the_cpu_fold() {
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("pool");
            pool.install(|| {
                // The route: a thread's share of a row under a cache line is relayed on two
                // threads (17 columns of `f32`) and runs as `cpu` on one (5 columns); at
                // least a cache line keeps the column ranges (64 columns; 17 on one thread,
                // 68 bytes).
                assert_eq!(super::relayed(17, 4), threads == 2);
                assert!(!super::cols_run_as_cpu(17, 4));
                assert_eq!(super::cols_run_as_cpu(5, 4), threads == 1);
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
