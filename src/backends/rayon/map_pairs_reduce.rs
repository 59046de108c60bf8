//! MapPairsReduce `run_cols` over few columns on all cores: each result must fold its
//! column in row order (bit-identical to `cpu`), so a column is one chain of dependent
//! operations, and a few columns leave most threads idle or, split between the threads,
//! make every thread stream the whole pair matrix (each row is a cache line or two: 262145
//! x 17 took 30x the time of a hand-written Rayon loop on 16 cores).
//!
//! Here the rows are cut into bands, mapped into a ring of band buffers (the pair elements
//! `map(v[i], h[j])`, row by row, vectorised across the columns as on `cpu`, then put group
//! by group) by whichever threads are free, and each group of a few columns is folded band
//! after band, in row order, by one thread at a time: each column is still one fold from
//! row 0 down, and the time is that of a group's chain of additions or of mapping the
//! matrix once on the other threads, whichever is longer.
//!
//! No thread ever waits for a fixed other one. A thread folds any column group whose lock
//! it gets and whose next band is ready, else maps the next band whose slot of the ring is
//! free, else spins while the others make progress, and leaves after a while without any
//! (a thread in a nested Rayon call may hold a band the others need). What the threads
//! leave, the caller finishes alone, which it always can. Blocks separated by a fork and a
//! join instead (round 10) took 2.5x as long: a block's folds waited for its last band, and
//! the next block's mapping for the slowest fold.

use std::any::Any;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use rayon::prelude::*;

use crate::backends::BinaryFn;
use crate::userfn::sealed::Only;
use crate::userfn::{ContainerArgs, ElementwiseFn, IndexKind};
use crate::DeviceType;

/// Rows per band: a band's fold (per column, a chain of this many additions, one or two
/// microseconds) outweighs the atomics that hand it over. 512 to 2048 measured alike on 16
/// cores; 256 took 1.5x as long.
const BAND_ROWS: usize = 1024;

/// Elements from the start of one group's block of a slot to the next: a block of
/// [`BAND_ROWS`] rows of [`FOLD_COLUMNS`] and 16 more, so that the blocks' starts fall in
/// different cache sets (a band is mapped into all of them side by side; at a stride of
/// 4096 bytes they would share one set of L1).
const GROUP: usize = BAND_ROWS * FOLD_COLUMNS + 16;

/// Rows mapped at a time, before they go to their groups' blocks: few enough to stay in L1
/// between the two (a whole band's rows, 70 KB for 17 `f32` columns, took 3x as long).
const TILE_ROWS: usize = 64;

/// Band buffers in the ring: enough that the mapping runs ahead of the slowest fold by
/// many bands (8 took 1.7x as long as 32 on 16 cores, 16 1.25x), few enough to stay in
/// the cache (32 bands of 17 `f32` columns: 2.2 MiB).
const RING: usize = 32;

/// Columns folded together by one thread: a fold is a chain of dependent operations, and a
/// few chains side by side (one SIMD addition per row) run at the pace of one, which leaves
/// more threads to map (1 column per group took 1.6x as long as 4 on 16 cores; 2 and 3,
/// 1.05-1.1x).
const FOLD_COLUMNS: usize = 4;
// `fold_band` and `map_band` have loops for groups of up to four columns.
const _: () = assert!(FOLD_COLUMNS <= 4);

/// How long a thread with nothing to do waits for another to make progress before it
/// leaves the pipeline to the others and the caller: far longer than a band takes, far
/// shorter than a call.
const PATIENCE: Duration = Duration::from_micros(200);

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
    let bands = rows.div_ceil(BAND_ROWS);
    let slots = RING.min(bands);
    let groups = cols.div_ceil(FOLD_COLUMNS);
    let mut scratch = Scratch::take(slots * GROUP * groups, fill);
    let ring = Ring::new(&mut scratch[..slots * GROUP * groups], slots);
    let pipeline = Pipeline {
        bands,
        rows,
        cols,
        ring,
        groups: out
            .chunks(FOLD_COLUMNS)
            .map(|o| {
                Padded(Group {
                    busy: AtomicBool::new(false),
                    folded: AtomicUsize::new(0),
                    acc: UnsafeCell::new(std::array::from_fn(|l| {
                        o.get(l).copied().unwrap_or(fill)
                    })),
                })
            })
            .collect(),
        mapped: (0..slots).map(|_| Padded(AtomicUsize::new(0))).collect(),
        next_band: Padded(AtomicUsize::new(0)),
    };
    let map = |band: usize, buf: &mut [M::Out], tile: &mut Vec<M::Out>| {
        let first = band * BAND_ROWS;
        let n = BAND_ROWS.min(rows - first);
        map_band::<M, A, B>(arrays, (v, h), (buf, tile, n), first, uniforms);
    };
    (0..rayon::current_num_threads())
        .into_par_iter()
        .with_max_len(1)
        .for_each(|t| pipeline.work::<R>(t, &map, Some(PATIENCE)));
    pipeline.work::<R>(0, &map, None);
    for (o, group) in out.chunks_mut(FOLD_COLUMNS).zip(pipeline.groups) {
        o.copy_from_slice(&group.0.acc.into_inner()[..o.len()]);
    }
    Scratch::give_back(scratch);
}

/// A value on cache lines of its own: the pipeline's counters are written by one thread
/// and polled by all the others, and on a shared line each write stalled every poller and
/// each poll the writer.
#[repr(align(128))]
struct Padded<T>(T);

/// One group of [`FOLD_COLUMNS`] columns' folds.
struct Group<T> {
    /// Held by the one thread folding the group.
    busy: AtomicBool,
    /// The bands folded so far (changed only by the holder of `busy`).
    folded: AtomicUsize,
    /// The folds so far (read and written only by the holder of `busy`); the group's
    /// columns first, the last group's unused lanes after them.
    acc: UnsafeCell<[T; FOLD_COLUMNS]>,
}

/// The shared state of one [`fold_cols`].
struct Pipeline<'a, T> {
    bands: usize,
    rows: usize,
    cols: usize,
    ring: Ring<'a, T>,
    groups: Vec<Padded<Group<T>>>,
    /// Per slot of the ring, 1 + the band whose pair elements it holds, 0 before any.
    mapped: Vec<Padded<AtomicUsize>>,
    /// The next band to map.
    next_band: Padded<AtomicUsize>,
}

// SAFETY: a group's `acc`, the only state behind an `UnsafeCell`, is read and written only
// by the thread that set its `busy` flag (Acquire) until it clears it (Release); the ring
// is `Sync` itself.
unsafe impl<T: Send + Sync> Sync for Pipeline<'_, T> {}

impl<T: DeviceType> Pipeline<'_, T> {
    /// Folds and maps whatever can be until all is done, or, with `patience`, until there
    /// has been nothing to do for that long. `seat` spreads the threads' first tries over
    /// the groups.
    fn work<R: BinaryFn<T>>(
        &self,
        seat: usize,
        map: &(impl Fn(usize, &mut [T], &mut Vec<T>) + Sync),
        patience: Option<Duration>,
    ) {
        let groups = self.groups.len();
        let mut idle: Option<(Instant, usize)> = None;
        // A band's pair elements row by row, before they go to their groups' blocks.
        let mut tile = Vec::new();
        loop {
            let mut did = false;
            for k in 0..groups {
                did |= self.fold_group::<R>((seat + k) % groups);
            }
            if !did {
                did = self.map_next(map, &mut tile);
            }
            if did {
                idle = None;
                continue;
            }
            let folded = self
                .groups
                .iter()
                .map(|g| g.0.folded.load(Ordering::Acquire));
            let state = folded.sum::<usize>() + self.next_band.0.load(Ordering::Relaxed);
            if state == (groups + 1) * self.bands {
                return;
            }
            let Some(patience) = patience else {
                // Alone, every band claimed has been mapped, so a group can always fold
                // its next band or the next band's slot is free.
                unreachable!("run_cols: a pipeline with nothing to do that is not done");
            };
            match idle {
                Some((since, seen)) if seen == state => {
                    if since.elapsed() > patience {
                        return;
                    }
                    // Polls far apart: each reads lines the busy threads write.
                    for _ in 0..16 {
                        std::hint::spin_loop();
                    }
                }
                _ => idle = Some((Instant::now(), state)),
            }
        }
    }

    /// Whether band `band` has been mapped (and its slot not yet reused).
    fn ready(&self, band: usize) -> bool {
        band < self.bands
            && self.mapped[band % self.ring.slots]
                .0
                .load(Ordering::Acquire)
                == band + 1
    }

    /// Folds group `g`'s ready bands if no other thread holds it; whether it folded any.
    fn fold_group<R: BinaryFn<T>>(&self, g: usize) -> bool {
        let group = &self.groups[g].0;
        // Look before taking the flag: an exchange on a line the holder reads stalls it.
        if !self.ready(group.folded.load(Ordering::Acquire))
            || group.busy.load(Ordering::Relaxed)
            || group
                .busy
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            return false;
        }
        // SAFETY: this thread holds the group's flag (the exchange above): no other thread
        // reads or writes `acc` until the Release store below.
        let acc = unsafe { &mut *group.acc.get() };
        let width = FOLD_COLUMNS.min(self.cols - g * FOLD_COLUMNS);
        let mut band = group.folded.load(Ordering::Relaxed);
        let start = band;
        while self.ready(band) {
            // SAFETY: the slot holds `band` (the Acquire load in `ready` pairs with the
            // mapping thread's Release store after it wrote the slot), and its next band is
            // mapped only once every group, this one included, has stored a count past
            // `band` (below, after this read).
            let slot = unsafe { self.ring.slot(band % self.ring.slots) };
            let n = BAND_ROWS.min(self.rows - band * BAND_ROWS);
            fold_band::<R, T>(slot, (g, n), &mut acc[..width], band == 0);
            band += 1;
            group.folded.store(band, Ordering::Release);
        }
        group.busy.store(false, Ordering::Release);
        band > start
    }

    /// Maps the next band if its slot is free; whether it did.
    fn map_next(&self, map: &impl Fn(usize, &mut [T], &mut Vec<T>), tile: &mut Vec<T>) -> bool {
        let slots = self.ring.slots;
        loop {
            let band = self.next_band.0.load(Ordering::Relaxed);
            // The slot's last band, `band - slots`, must be folded by every group.
            let free = band < slots
                || self
                    .groups
                    .iter()
                    .all(|g| g.0.folded.load(Ordering::Acquire) > band - slots);
            if band >= self.bands || !free {
                return false;
            }
            if self
                .next_band
                .0
                .compare_exchange(band, band + 1, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            // SAFETY: this thread alone claimed `band` (the exchange above), the slot's
            // last band has been folded by every group (the Acquire loads above pair with
            // their Release stores after their reads), and no group reads the slot again
            // before the Release store below says it holds `band`.
            let buf = unsafe { self.ring.slot_mut(band % slots) };
            map(band, buf, tile);
            self.mapped[band % slots]
                .0
                .store(band + 1, Ordering::Release);
            return true;
        }
    }
}

/// The ring of band buffers: slots of a [`GROUP`] of elements per group of columns, written by one thread
/// and then read by several, in turns that [`Pipeline`]'s atomics order.
struct Ring<'a, T> {
    cells: &'a [UnsafeCell<T>],
    slots: usize,
}

// SAFETY: a `Ring` hands out a slot only through its `unsafe` methods, whose callers
// (`Pipeline`) never let a slot be written while another thread reads or writes it.
unsafe impl<T: Send + Sync> Sync for Ring<'_, T> {}

impl<'a, T> Ring<'a, T> {
    fn new(buf: &'a mut [T], slots: usize) -> Self {
        let len = buf.len();
        let ptr = buf.as_mut_ptr().cast::<UnsafeCell<T>>();
        // SAFETY: `UnsafeCell<T>` has the layout of `T`, and the exclusive borrow of `buf`
        // lasts as long as the ring, so nothing else reaches these elements meanwhile.
        let cells = unsafe { std::slice::from_raw_parts(ptr, len) };
        Self { cells, slots }
    }

    fn span(&self, slot: usize) -> &[UnsafeCell<T>] {
        let len = self.cells.len() / self.slots;
        &self.cells[slot * len..][..len]
    }

    /// # Safety
    /// No thread writes the slot while the returned slice lives.
    unsafe fn slot(&self, slot: usize) -> &[T] {
        let span = self.span(slot);
        // SAFETY: the layout as in `new`; no writer meanwhile (the caller's promise).
        unsafe { std::slice::from_raw_parts(span.as_ptr().cast::<T>(), span.len()) }
    }

    /// # Safety
    /// No other thread reads or writes the slot while the returned slice lives.
    #[allow(clippy::mut_from_ref)]
    unsafe fn slot_mut(&self, slot: usize) -> &mut [T] {
        let span = self.span(slot);
        // SAFETY: the layout as in `new`; `UnsafeCell` allows writes through a shared
        // reference, and no other access meanwhile (the caller's promise).
        unsafe { std::slice::from_raw_parts_mut(UnsafeCell::raw_get(span.as_ptr()), span.len()) }
    }
}

/// The last call's ring, kept for the next: a fresh one (about a MiB) costs more in page
/// faults than a short call's whole work (16385 x 17: 6.6 ms against 0.3 ms, on a VM).
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

/// The pair elements of rows `first..first + n` (`n >= 1`) into a slot of the ring, group
/// by group of [`FOLD_COLUMNS`] columns, each group's rows one after the other:
/// `slot[g * GROUP + k * width + l]` = `map(v[first + k], h[g * FOLD_COLUMNS + l])`, where
/// `width` is the group's number of columns.
fn map_band<M, A, B>(
    arrays: <M::Arrays as ContainerArgs>::Refs<'_>,
    (v, h): (&[A], &[B]),
    (slot, rows, n): (&mut [M::Out], &mut Vec<M::Out>, usize),
    first: usize,
    uniforms: &M::Uniforms,
) where
    M: ElementwiseFn<Elems = (A, B)>,
    A: DeviceType,
    B: DeviceType,
{
    rows.resize(TILE_ROWS * h.len(), slot[0]);
    // Two copies of the loop, as `cpu::map_range` has: where the band's last cell is inside
    // every `Mat` argument, so is every cell of the band, and a read at the pair's own
    // index has no check (a backprop weight `w[(i, j)]`: a compare and a branch less per
    // pair).
    let last = (first + n - 1, h.len() - 1);
    if <M::Arrays as ContainerArgs>::inside(arrays, last, Only) {
        map_band_cells::<M, A, B, true>(arrays, (v, h), (slot, rows, n), first, uniforms);
    } else {
        map_band_cells::<M, A, B, false>(arrays, (v, h), (slot, rows, n), first, uniforms);
    }
}

/// [`map_band`]'s loop; `INSIDE`: every cell of the band is inside every `Mat` argument.
#[inline(always)]
fn map_band_cells<M, A, B, const INSIDE: bool>(
    arrays: <M::Arrays as ContainerArgs>::Refs<'_>,
    (v, h): (&[A], &[B]),
    (slot, rows, n): (&mut [M::Out], &mut [M::Out], usize),
    first: usize,
    uniforms: &M::Uniforms,
) where
    M: ElementwiseFn<Elems = (A, B)>,
    A: DeviceType,
    B: DeviceType,
{
    let cols = h.len();
    // Row by row into `rows`, as `cpu` walks them (the cells of a row are neighbours in a
    // row-major `Mat` argument, and their maps independent: SIMD code), then each row's
    // groups to their blocks. Mapped group by group straight into the blocks, the maps of a
    // group's few cells were scalar code and took three times as long.
    for start in (0..n).step_by(TILE_ROWS) {
        let m = TILE_ROWS.min(n - start);
        let tile = &mut rows[..m * cols];
        let v = &v[first + start..first + start + m];
        for (k, (row, &p)) in tile.chunks_exact_mut(cols).zip(v).enumerate() {
            let i = first + start + k;
            for (j, (o, &q)) in row.iter_mut().zip(h).enumerate() {
                // A debug build checks the hint below.
                debug_assert!(
                    !INSIDE || <M::Arrays as ContainerArgs>::inside(arrays, (i, j), Only),
                    "a Mat check fails at ({i}, {j}), inside its band's last cell",
                );
                if INSIDE && !<M::Arrays as ContainerArgs>::inside(arrays, (i, j), Only) {
                    // SAFETY: never reached. `INSIDE` is passed where `inside` holds at the
                    // band's last cell `(first + n - 1, cols - 1)`, and `i <= first + n - 1`,
                    // `j <= cols - 1`. `inside` is `true` for a slice and, for a `Mat`,
                    // compares the row and the column with its shape and `row * cols + col`
                    // with its length, each of which holds at every smaller row and column
                    // (a tuple of arguments: all of them). No other crate can override
                    // `inside` (`sealed::Only`).
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
        let groups = slot.chunks_mut(GROUP).take(cols.div_ceil(FOLD_COLUMNS));
        for (g, block) in groups.enumerate() {
            let j0 = g * FOLD_COLUMNS;
            // A group's few elements per row: copies of a length known to the compiler,
            // moves of a register or two (a `memmove` call per row took longer than the
            // maps).
            let width = FOLD_COLUMNS.min(cols - j0);
            let block = &mut block[start * width..][..m * width];
            match width {
                4 => group_rows::<_, 4>(block, tile, j0, cols),
                3 => group_rows::<_, 3>(block, tile, j0, cols),
                2 => group_rows::<_, 2>(block, tile, j0, cols),
                _ => group_rows::<_, 1>(block, tile, j0, cols),
            }
        }
    }
}

/// Columns `j0..j0 + N` of the rows of `tile` (of `cols` each) into `block`, row after row.
#[inline(always)]
fn group_rows<T: Copy, const N: usize>(block: &mut [T], tile: &[T], j0: usize, cols: usize) {
    for (to, row) in block.chunks_exact_mut(N).zip(tile.chunks_exact(cols)) {
        to.copy_from_slice(&row[j0..j0 + N]);
    }
}

/// Folds group `g`'s rows of the band in `slot` (`n` rows, laid out by [`map_band`]) into
/// its results `out`, in row order; `start`: the band is the first, whose row 0 starts each
/// fold.
fn fold_band<R: BinaryFn<T>, T: DeviceType>(
    slot: &[T],
    (g, n): (usize, usize),
    out: &mut [T],
    start: bool,
) {
    let block = &slot[g * GROUP..][..n * out.len()];
    match out.len() {
        4 => fold_lanes::<R, T, 4>(block, out, start),
        3 => fold_lanes::<R, T, 3>(block, out, start),
        2 => fold_lanes::<R, T, 2>(block, out, start),
        _ => fold_lanes::<R, T, 1>(block, out, start),
    }
}

/// [`fold_band`] for a group of `N` columns, each fold's value in a register of its own.
#[inline(always)]
fn fold_lanes<R: BinaryFn<T>, T: DeviceType, const N: usize>(
    block: &[T],
    out: &mut [T],
    start: bool,
) {
    let mut rows = block.chunks_exact(N);
    let mut acc: [T; N] = std::array::from_fn(|l| out[l]);
    if start {
        if let Some(row) = rows.next() {
            acc = std::array::from_fn(|l| row[l]);
        }
    }
    // A row of the N columns per step: N independent chains, interleaved.
    for row in rows {
        for l in 0..N {
            acc[l] = R::apply((), (acc[l], row[l]), &());
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

    /// `f32` sums (not associative) over one band, several, more than the ring holds, and
    /// one column, on more threads than the machine may have (the pipeline runs from three
    /// threads on, and threads that find nothing to do leave it to the caller):
    /// bit-identical to the `cpu` oracle, and a fault is the same `Err` with `out` as it
    /// was.
    #[test]
    fn run_cols_pipelined_is_the_cpu_fold() {
        // Bands of 1024 rows, a ring of 32: one row, a band's edges, the ring's wrap, and
        // groups of four columns with a narrower last group.
        let shapes = [
            (1, 5),
            (1024, 4),
            (1025, 7),
            (32 * 1024 + 1, 2),
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
