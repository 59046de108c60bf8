//! The sequential backend: one core, plain loops. It is the oracle every other backend is
//! tested against, so it stays as direct a transcription of the semantics as possible.
//!
//! The loops over one range of elements live here as free functions; the Rayon backend
//! calls the same functions on the chunks it schedules, so both share one definition of
//! each skeleton's semantics.

use std::ops::Range;

mod histogram;
#[doc(hidden)]
pub mod loopnest;
mod map_overlap;
mod map_overlap3;
mod map_overlap_windows;
mod map_pairs_reduce;
mod reduce_by_key;
mod sort;
mod wavefront;

pub(crate) use histogram::{add_table, count_range, store, Outside, TABLE_SPAN};
pub(crate) use map_overlap::{overlap_2d_rows, overlap_cols_rows};
pub(crate) use map_overlap3::overlap_3d_rows;
pub(crate) use map_overlap_windows::{windows_1d_range, windows_2d_rows};
pub(crate) use map_pairs_reduce::pairs_fold_cols;
pub(crate) use reduce_by_key::{merge_range, merge_tables};
pub(crate) use sort::sort_range;
pub(crate) use wavefront::wavefront_tile;

use super::{BinaryFn, ContainerOps, Execute, PredicateFn, Stencil};
use crate::containers::{ArgMut, HostOut, OutArgs, OutCollector};
use crate::plan::{
    self, FilterSig, FoldSig, HistogramSig, MapArraySig, MapReduceSig, MapSig, PairsReduceSig,
    PairsSig, ReduceByKeySig, SortSig, WavefrontSig,
};
use crate::plan::{ArgTuple, Axis, Edge, HostSlices, ScanMode};
use crate::userfn::sealed::Only;
use crate::userfn::{
    ArrayFn, ContainerArgs, ContainerKind, ElementwiseFn, IndexKind, UserFn, Window, Window2Fn,
    WindowFn,
};
use crate::{DeviceType, Result};

/// The sequential executor.
pub(crate) struct Cpu {
    /// Added to every `#[index]` (the first global index of a distributed block, else 0).
    pub(crate) base: usize,
    /// Whether the call is checked: its `Err` then leaves the outputs as they were
    /// ([`OldValues`]).
    pub(crate) checked: bool,
}

/// The outputs of a checked call as they were before it. If the call unwinds (a fault of
/// the user function, which `check::catch` turns into `Err(UserFunction)`), dropping it
/// writes them back: an `Err` leaves no partial result that could pass for one, as on the
/// devices, which discard a faulting call's output.
pub(crate) struct OldValues {
    /// Per output: its first host element and its old bytes.
    saved: Vec<(*mut u8, Vec<u8>)>,
}

impl OldValues {
    /// The current values of every operand of `out` (brought back to the host first) when
    /// `checked`; `None` for an unchecked call, whose `Err` may leave what it computed
    /// before the panic (see `crate::check`).
    pub(crate) fn of<'o, O: OutArgs<'o>>(checked: bool, out: &mut O) -> Result<Option<Self>> {
        if !checked {
            return Ok(None);
        }
        let len = out.shapes()[0].len();
        let mut saver = Saver {
            old: OldValues { saved: Vec::new() },
            error: None,
        };
        out.part(0..len).collect(&mut saver);
        match saver.error {
            Some(e) => Err(e),
            None => Ok(Some(saver.old)),
        }
    }
}

impl Drop for OldValues {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        for (dst, bytes) in &self.saved {
            // SAFETY: `dst` points at the first of `bytes.len()` bytes of an output's host
            // range, derived from the container's raw buffer pointer (not from a slice that
            // a later borrow invalidated). The output is still borrowed `&mut` by the call
            // being unwound, whose slices over it are dead now; the range was current on
            // the host when saved and the call only wrote it on the host.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), *dst, bytes.len()) };
        }
    }
}

/// What [`OldValues::of`] hands every output to.
struct Saver {
    old: OldValues,
    error: Option<crate::Error>,
}

impl<'a> OutCollector<'a> for Saver {
    fn push<T: DeviceType>(&mut self, mut arg: ArgMut<'a, T>) {
        if self.error.is_some() {
            return;
        }
        let bytes = match arg.host_mut() {
            Ok(host) => {
                // SAFETY: `T` is a plain `DeviceType` value (`Copy`, no padding read as
                // anything but bytes that are copied back verbatim); the slice is valid.
                unsafe { std::slice::from_raw_parts(host.as_ptr().cast::<u8>(), size_of_val(host)) }
                    .to_vec()
            }
            Err(e) => {
                self.error = Some(e);
                return;
            }
        };
        // SAFETY: the offset lies inside the container (the operand is part of it).
        let first = unsafe { arg.store().host_ptr().add(arg.offset()) };
        self.old.saved.push((first.cast::<u8>(), bytes));
    }
}

/// The container arguments of `F` as the Rust body takes them, over their host copies.
pub(crate) fn container_refs<'c, F: ElementwiseFn>(
    arrays: &ContainerOps<'c, F>,
) -> Result<<F::Arrays as ContainerArgs>::Refs<'c>> {
    Ok(<F::Arrays as ContainerArgs>::refs(
        arrays.host()?,
        &arrays.shapes(),
    ))
}

/// `out[k] = f(index(first + k), arrays, inputs[k], uniforms)`; `inputs` start at element
/// `first`.
#[inline]
pub(crate) fn map_range<F: ElementwiseFn>(
    arrays: <F::Arrays as ContainerArgs>::Refs<'_>,
    inputs: impl HostSlices<Elems = F::Elems>,
    mut out: impl HostOut<Elems = F::Out>,
    first: usize,
    cols: usize,
    uniforms: &F::Uniforms,
) {
    let n = out.len();
    // A matrix or matrix-vector product: a blocked loop over contiguous rows.
    if !<F::Arrays as ContainerArgs>::KINDS.is_empty()
        && crate::codegen::loopnest::loop_nest(F::definition()).is_some()
    {
        if let Some(values) = F::nest_block(arrays, first, n, cols, uniforms) {
            for (k, v) in values.into_iter().enumerate() {
                out.set(k, v);
            }
            return;
        }
    }
    let inputs = inputs.slice(0..n);
    if F::Index::DIMS < 2 {
        for k in 0..n {
            out.set(
                k,
                F::apply_with(
                    F::Index::from_flat(first + k, cols),
                    arrays,
                    inputs.at(k),
                    uniforms,
                ),
            );
        }
        return;
    }
    // A 2D index: one division per row segment, then the column counts up.
    let mut k = 0;
    while k < n {
        let (row, col) = ((first + k) / cols, (first + k) % cols);
        let len = (cols - col).min(n - k);
        let segment = (k, (row, col), len);
        // Two copies of the loop where the function has `Mat` arguments: in the first every
        // output's index lies inside every `Mat` (checked at the segment's last: the column
        // only rises), so a read at the output's own index has no check and the loop can
        // vectorise; the second (a `Mat` smaller than the output) keeps the checks. Without
        // `Mat`s the condition is `true` and the second copy folds away.
        let at = (first, cols);
        if !<F::Arrays as ContainerArgs>::inside(arrays, (row, col + len - 1), Only) {
            map_segment::<F, CHECKED>(arrays, inputs, &mut out, segment, at, uniforms);
        } else if let Some((lo, hi)) = interior::<F>(arrays, (row, col), len) {
            // A third copy for the columns whose 3 x 3 neighbourhood lies inside every
            // `Mat` (a stencil's interior): reads at the neighbours' indices lose their
            // checks too (heat's five reads: three checks per element fewer), and the
            // loads of a border test's both branches can be done unconditionally.
            let part = |c: usize, end: usize| (k + c - col, (row, c), end - c);
            map_segment::<F, OWN>(arrays, inputs, &mut out, part(col, lo), at, uniforms);
            map_segment::<F, AROUND>(arrays, inputs, &mut out, part(lo, hi), at, uniforms);
            map_segment::<F, OWN>(arrays, inputs, &mut out, part(hi, col + len), at, uniforms);
        } else {
            map_segment::<F, OWN>(arrays, inputs, &mut out, segment, at, uniforms);
        }
        k += len;
    }
}

/// [`map_segment`]'s reach: no index is known to be inside the `Mat` arguments.
const CHECKED: u8 = 0;
/// Every output's own index is inside every `Mat`.
const OWN: u8 = 1;
/// Every output's index and its eight neighbours' are inside every `Mat`.
const AROUND: u8 = 2;

/// The columns `lo..hi` of the segment of `len` outputs from `(row, col)` whose 3 x 3
/// neighbourhoods lie inside every `Mat` argument of `F`, where there are at least
/// [`MIN_INTERIOR`] and `F` has `Mat`s (without, every index is inside and one copy of the
/// loop does).
#[inline(always)]
fn interior<F: ElementwiseFn>(
    arrays: <F::Arrays as ContainerArgs>::Refs<'_>,
    (row, col): (usize, usize),
    len: usize,
) -> Option<(usize, usize)> {
    if !<F::Arrays as ContainerArgs>::KINDS.contains(&ContainerKind::Mat) || row == 0 {
        return None;
    }
    let end = col + len;
    let inside = |c: usize| <F::Arrays as ContainerArgs>::inside(arrays, (row + 1, c), Only);
    // The far corner of the last column's neighbourhood (`inside` is monotone in the row
    // and the column: every index above and left of an inside one is inside).
    let hi = match () {
        _ if inside(end) => end,
        _ if inside(end - 1) => end - 1,
        _ => return None,
    };
    let lo = col.max(1);
    // A short interior is not worth three loops' entries (narrow matrices: a row of 17).
    (hi >= lo + MIN_INTERIOR).then_some((lo, hi))
}

/// Fewest columns of a segment's interior run by their own copy of the loop.
const MIN_INTERIOR: usize = 16;

/// The outputs `k..k + len` of [`map_range`]'s 2D loop, which lie on row `row` from column
/// `col` on; `REACH`: which indices around each output lie inside every `Mat` argument
/// ([`CHECKED`], [`OWN`], [`AROUND`]).
#[inline(always)]
fn map_segment<F: ElementwiseFn, const REACH: u8>(
    arrays: <F::Arrays as ContainerArgs>::Refs<'_>,
    inputs: impl HostSlices<Elems = F::Elems>,
    out: &mut impl HostOut<Elems = F::Out>,
    (k, (row, col), len): (usize, (usize, usize), usize),
    (first, cols): (usize, usize),
    uniforms: &F::Uniforms,
) {
    // One check per segment instead of one per store (`map_range` cuts every segment
    // inside `out`): with it and one counter for the loop, LLVM drops the store's check.
    assert!(k + len <= out.len(), "a segment past the output's end");
    let first_col = col;
    for j in 0..len {
        let col = first_col + j;
        let inside = |at| <F::Arrays as ContainerArgs>::inside(arrays, at, Only);
        // A debug build checks the hints below.
        debug_assert!(
            REACH < OWN || inside((row, col)),
            "a Mat check fails at ({row}, {col}), inside its segment's last",
        );
        // Tells LLVM `inside` holds here (`assert_unchecked` is newer than the MSRV).
        if REACH >= OWN && !inside((row, col)) {
            // SAFETY: never reached. `OWN` is passed where `inside` holds at `(row, c)`
            // for the segment's last column `c`, and `col <= c`. `inside` is `true` for a
            // slice and, for a `Mat`, compares the row and column with its shape and `row *
            // cols + col` with its length: it holds at every smaller row and column. No
            // other crate can override `inside` (`sealed::Only`).
            unsafe { std::hint::unreachable_unchecked() }
        }
        if REACH == AROUND {
            // SAFETY (of each `assume_inside` below): `AROUND` is passed (by `map_range`,
            // from `interior`) for columns `col` with `1 <= col` and `col + 1 <= c` on a
            // row `row >= 1`, where `inside` holds at `(row + 1, c)`: every neighbour lies
            // at a row <= `row + 1` and a column <= `col + 1` (none below 0), where
            // `inside` holds as well (monotone, above).
            unsafe {
                assume_inside::<F>(arrays, (row - 1, col - 1));
                assume_inside::<F>(arrays, (row - 1, col));
                assume_inside::<F>(arrays, (row - 1, col + 1));
                assume_inside::<F>(arrays, (row, col - 1));
                assume_inside::<F>(arrays, (row, col + 1));
                assume_inside::<F>(arrays, (row + 1, col - 1));
                assume_inside::<F>(arrays, (row + 1, col));
                assume_inside::<F>(arrays, (row + 1, col + 1));
            }
        }
        out.set(
            k + j,
            F::apply_with(
                F::Index::from_parts(first + k + j, (row, col), cols),
                arrays,
                inputs.at_cell(k + j, (row, col)),
                uniforms,
            ),
        );
    }
}

/// Tells LLVM that `at` is inside every `Mat` argument of `F` (checked in debug builds).
///
/// # Safety
/// `ContainerArgs::inside(arrays, at)` must hold.
#[inline(always)]
unsafe fn assume_inside<F: ElementwiseFn>(
    arrays: <F::Arrays as ContainerArgs>::Refs<'_>,
    at: (usize, usize),
) {
    let inside = <F::Arrays as ContainerArgs>::inside(arrays, at, Only);
    debug_assert!(inside, "a Mat check fails at {at:?}, in an interior");
    if !inside {
        // SAFETY: the caller's contract.
        unsafe { std::hint::unreachable_unchecked() }
    }
}

/// [`map_range`] for a function that also reads a whole array.
#[inline]
pub(crate) fn map_array_range<F: ArrayFn>(
    array: &[F::Array],
    inputs: impl HostSlices<Elems = F::Elems>,
    out: &mut [F::Out],
    first: usize,
    cols: usize,
    uniforms: &F::Uniforms,
) {
    for (k, o) in out.iter_mut().enumerate() {
        *o = F::apply(
            F::Index::from_flat(first + k, cols),
            array,
            inputs.at(k),
            uniforms,
        );
    }
}

/// Rows folded side by side by [`fold_rows`].
const ROWS_AT_ONCE: usize = 8;

/// `out[r]` = the fold of row `r` of `data` (rows of `cols` elements), each from the
/// row's first element as [`fold`] folds it; with no columns, `out` keeps its values.
///
/// A row's fold is a chain of dependent operations (an `f32` add waits for the one
/// before), so [`ROWS_AT_ONCE`] rows are folded side by side, one element of each per
/// step: the same operations per row in the same order, with the chains interleaved (one
/// row at a time, a 2048 x 2048 sum on 16 cores ran at the chain's pace, 1.0-1.2x a
/// hand-written Rayon loop's time).
pub(crate) fn fold_rows<F: BinaryFn<T>, T: DeviceType>(data: &[T], cols: usize, out: &mut [T]) {
    if cols == 0 {
        return;
    }
    let mut outs = out.chunks_exact_mut(ROWS_AT_ONCE);
    let mut blocks = data.chunks_exact(ROWS_AT_ONCE * cols);
    for (o, block) in outs.by_ref().zip(blocks.by_ref()) {
        let rows: [&[T]; ROWS_AT_ONCE] = std::array::from_fn(|r| &block[r * cols..][..cols]);
        let mut acc: [T; ROWS_AT_ONCE] = std::array::from_fn(|r| rows[r][0]);
        // Column c of every row per step, so that the rows' chains interleave.
        #[allow(clippy::needless_range_loop)]
        for c in 1..cols {
            for r in 0..ROWS_AT_ONCE {
                acc[r] = F::apply((), (acc[r], rows[r][c]), &());
            }
        }
        o.copy_from_slice(&acc);
    }
    let rest = blocks.remainder().chunks_exact(cols);
    for (o, row) in outs.into_remainder().iter_mut().zip(rest) {
        *o = fold::<F, T>(row).unwrap_or(*o);
    }
}

/// `data[0] ⊕ ... ⊕ data[n-1]`, or `None` for no data.
#[inline]
pub(crate) fn fold<F: BinaryFn<T>, T: DeviceType>(data: &[T]) -> Option<T> {
    let (&first, rest) = data.split_first()?;
    Some(
        rest.iter()
            .fold(first, |acc, &x| F::apply((), (acc, x), &())),
    )
}

/// The fold of `map(inputs[k])` over `len` positions starting at element `first`.
#[inline]
pub(crate) fn map_fold<M: ElementwiseFn, R: BinaryFn<M::Out>>(
    arrays: <M::Arrays as ContainerArgs>::Refs<'_>,
    inputs: impl HostSlices<Elems = M::Elems>,
    positions: Range<usize>,
    cols: usize,
    uniforms: &M::Uniforms,
) -> Option<M::Out> {
    let (first, n) = (positions.start, positions.len());
    // Re-slicing to exactly `n` lets the compiler drop the bounds checks in `at`.
    let inputs = inputs.slice(0..n);
    if M::Index::DIMS < 2 || n == 0 {
        let mut mapped = (0..n).map(|k| {
            M::apply_with(
                M::Index::from_flat(first + k, cols),
                arrays,
                inputs.at(k),
                uniforms,
            )
        });
        let head = mapped.next()?;
        return Some(mapped.fold(head, |acc, x| R::apply((), (acc, x), &())));
    }
    // A 2D index: one division per row segment, then the column counts up (as in
    // `map_range`; a division per element cost more than a cheap map itself).
    let value = |k: usize, cell: (usize, usize)| {
        M::apply_with(
            M::Index::from_parts(first + k, cell, cols),
            arrays,
            inputs.at_cell(k, cell),
            uniforms,
        )
    };
    let mut acc = value(0, (first / cols, first % cols));
    let mut k = 1;
    while k < n {
        let (row, col) = ((first + k) / cols, (first + k) % cols);
        let len = (cols - col).min(n - k);
        for (j, col) in (col..col + len).enumerate() {
            acc = R::apply((), (acc, value(k + j, (row, col))), &());
        }
        k += len;
    }
    Some(acc)
}

/// `out[r]` = the fold of `map` over row `first_row + r` of `inputs` (rows of `cols`
/// elements; `base` is added to every position), each from the row's first element, as
/// `reduce_axis` folds a materialised map: the map is evaluated inside the fold, so the
/// intermediate matrix never exists.
///
/// Where every row starts a row of the index space, [`ROWS_AT_ONCE`] rows are mapped and
/// folded side by side, as [`fold_rows`] folds them.
pub(crate) fn map_fold_rows<M: ElementwiseFn, R: BinaryFn<M::Out>>(
    arrays: <M::Arrays as ContainerArgs>::Refs<'_>,
    inputs: impl HostSlices<Elems = M::Elems>,
    out: &mut [M::Out],
    (first_row, base, cols): (usize, usize, usize),
    uniforms: &M::Uniforms,
) {
    let mut done = 0;
    if cols > 1 && base % cols == 0 {
        for o in out.chunks_exact_mut(ROWS_AT_ONCE) {
            let at: [usize; ROWS_AT_ONCE] = std::array::from_fn(|i| (first_row + done + i) * cols);
            let rows: [_; ROWS_AT_ONCE] =
                std::array::from_fn(|i| inputs.slice(at[i]..at[i] + cols));
            let row_of: [usize; ROWS_AT_ONCE] = std::array::from_fn(|i| (base + at[i]) / cols);
            let value = |i: usize, c: usize| {
                let cell = (row_of[i], c);
                M::apply_with(
                    M::Index::from_parts(base + at[i] + c, cell, cols),
                    arrays,
                    rows[i].at_cell(c, cell),
                    uniforms,
                )
            };
            let mut acc: [M::Out; ROWS_AT_ONCE] = std::array::from_fn(|i| value(i, 0));
            for c in 1..cols {
                for (i, a) in acc.iter_mut().enumerate() {
                    *a = R::apply((), (*a, value(i, c)), &());
                }
            }
            o.copy_from_slice(&acc);
            done += ROWS_AT_ONCE;
        }
    }
    for (r, o) in out.iter_mut().enumerate().skip(done) {
        let at = (first_row + r) * cols;
        let row = inputs.slice(at..at + cols);
        if let Some(v) = map_fold::<M, R>(arrays, row, base + at..base + at + cols, cols, uniforms)
        {
            *o = v;
        }
    }
}

/// Folds `value` into an optional accumulator.
#[inline]
pub(crate) fn combine<F: BinaryFn<T>, T: DeviceType>(acc: T, value: Option<T>) -> T {
    match value {
        Some(v) => F::apply((), (acc, v), &()),
        None => acc,
    }
}

/// Inclusive scan of `input` into `out`, continuing from `carry` (the scan of everything
/// before this range), or starting afresh if there is none.
#[inline]
pub(crate) fn scan_inclusive<F: BinaryFn<T>, T: DeviceType>(
    input: &[T],
    out: &mut [T],
    carry: Option<T>,
) {
    let mut acc = carry;
    for (o, &x) in out.iter_mut().zip(input) {
        let next = match acc {
            Some(a) => F::apply((), (a, x), &()),
            None => x,
        };
        *o = next;
        acc = Some(next);
    }
}

/// Exclusive scan: `out[0] = carry`, `out[k] = out[k-1] ⊕ input[k-1]`.
#[inline]
pub(crate) fn scan_exclusive<F: BinaryFn<T>, T: DeviceType>(input: &[T], out: &mut [T], carry: T) {
    let mut acc = carry;
    for (o, &x) in out.iter_mut().zip(input) {
        *o = acc;
        acc = F::apply((), (acc, x), &());
    }
}

/// The element at virtual position `p` of a sequence read with `edge` (never `None`).
#[inline]
fn beyond<T: DeviceType>(input: &[T], p: isize, edge: Edge, pad: T) -> T {
    let n = input.len() as isize;
    match edge {
        _ if (0..n).contains(&p) => input[p as usize],
        Edge::Duplicate => input[p.clamp(0, n - 1) as usize],
        Edge::Cyclic => input[p.rem_euclid(n) as usize],
        Edge::Pad | Edge::None => pad,
    }
}

/// 1D stencil outputs for positions `first..first + out.len()` of `input`.
/// With `Edge::None`, border outputs are left untouched.
pub(crate) fn overlap_range<F: WindowFn>(
    input: &[F::Elem],
    out: &mut [F::Out],
    first: usize,
    stencil: &Stencil<F::Elem, usize>,
    uniforms: &F::Uniforms,
) {
    let (n, r) = (input.len(), stencil.radius);
    let end = first + out.len();
    // Positions whose whole window lies inside the input, clipped to this range.
    let inner_start = r.clamp(first, end);
    let inner_end = n.saturating_sub(r).clamp(inner_start, end);
    let (head, rest) = out.split_at_mut(inner_start - first);
    let (inner, tail) = rest.split_at_mut(inner_end - inner_start);
    if !inner.is_empty() {
        overlap_inner::<F>(&input[inner_start - r..inner_end + r], inner, r, uniforms);
    }
    if stencil.edge == Edge::None {
        return;
    }
    let mut border = Vec::with_capacity(2 * r + 1);
    let borders = head
        .iter_mut()
        .zip(first..)
        .chain(tail.iter_mut().zip(inner_end..));
    for (o, p) in borders {
        border.clear();
        let centre = p as isize;
        border.extend(
            (-(r as isize)..=r as isize)
                .map(|d| beyond(input, centre + d, stencil.edge, stencil.pad)),
        );
        *o = F::apply(Window::new(&border, r), uniforms);
    }
}

/// `out[k] = f(window centred on span[k + r])`: the windows that lie inside the input.
#[inline]
pub(crate) fn overlap_inner<F: WindowFn>(
    span: &[F::Elem],
    out: &mut [F::Out],
    r: usize,
    uniforms: &F::Uniforms,
) {
    // Small radii get their own copy of the loop with the radius as a constant: then
    // every window access is provably in bounds and the checks (and the branches that
    // stop vectorisation) disappear.
    match r {
        1 => overlap_interior::<F, 1>(span, out, uniforms),
        2 => overlap_interior::<F, 2>(span, out, uniforms),
        3 => overlap_interior::<F, 3>(span, out, uniforms),
        _ => {
            for (o, window) in out.iter_mut().zip(span.windows(2 * r + 1)) {
                *o = F::apply(Window::new(window, r), uniforms);
            }
        }
    }
}

/// `out[k] = f(window centred on span[k + R])` for a radius known at compile time.
#[inline]
fn overlap_interior<F: WindowFn, const R: usize>(
    span: &[F::Elem],
    out: &mut [F::Out],
    uniforms: &F::Uniforms,
) {
    for (o, window) in out.iter_mut().zip(span.windows(2 * R + 1)) {
        *o = F::apply(Window::new(window, R), uniforms);
    }
}

/// Folds the rows of `block` (whole rows of `cols` elements) column by column.
pub(crate) fn fold_columns<F: BinaryFn<T>, T: DeviceType>(block: &[T], cols: usize) -> Vec<T> {
    fold_column_range::<F, T>(block, cols, 0..cols)
}

/// [`fold_columns`] of the columns `range` only (each folded in the same order).
pub(crate) fn fold_column_range<F: BinaryFn<T>, T: DeviceType>(
    block: &[T],
    cols: usize,
    range: Range<usize>,
) -> Vec<T> {
    if cols == 0 {
        return Vec::new();
    }
    let mut rows = block.chunks(cols).map(|row| &row[range.clone()]);
    let mut acc = rows.next().map(<[T]>::to_vec).unwrap_or_default();
    for row in rows {
        for (a, &x) in acc.iter_mut().zip(row) {
            *a = F::apply((), (*a, x), &());
        }
    }
    acc
}

/// Rows `first_row..` of the pair matrix `f(v[i], h[j])`; `out` holds whole rows of
/// `h.len()` results.
#[inline]
pub(crate) fn pairs_rows<F, A, B>(
    arrays: <F::Arrays as ContainerArgs>::Refs<'_>,
    v: &[A],
    h: &[B],
    out: &mut [F::Out],
    first_row: usize,
    uniforms: &F::Uniforms,
) where
    F: ElementwiseFn<Elems = (A, B)>,
    A: DeviceType,
    B: DeviceType,
{
    let cols = h.len();
    for (k, row) in out.chunks_mut(cols.max(1)).enumerate() {
        let i = first_row + k;
        let p = v[i];
        for (j, (o, &q)) in row.iter_mut().zip(h).enumerate() {
            *o = F::apply_with(
                F::Index::from_parts(i * cols + j, (i, j), cols),
                arrays,
                (p, q),
                uniforms,
            );
        }
    }
}

/// MapPairsReduce results `first..first + out.len()`: each the fold, in order, of its row
/// (`Axis::Rows`) or column of the pair matrix `map(v[i], h[j])`.
#[inline]
pub(crate) fn pairs_fold_range<M, R, A, B>(
    arrays: <M::Arrays as ContainerArgs>::Refs<'_>,
    (v, h): (&[A], &[B]),
    out: &mut [M::Out],
    first: usize,
    axis: Axis,
    uniforms: &M::Uniforms,
) where
    M: ElementwiseFn<Elems = (A, B)>,
    R: BinaryFn<M::Out>,
    A: DeviceType,
    B: DeviceType,
{
    if axis == Axis::Cols {
        return pairs_fold_cols::<M, R, A, B>(arrays, (v, h), out, first, uniforms);
    }
    let cols = h.len();
    let folded = if axis == Axis::Rows { cols } else { v.len() };
    for (o, own) in out.iter_mut().zip(first..) {
        let mut acc = None;
        for k in 0..folded {
            let (i, j) = if axis == Axis::Rows {
                (own, k)
            } else {
                (k, own)
            };
            let x = M::apply_with(
                M::Index::from_parts(i * cols + j, (i, j), cols),
                arrays,
                (v[i], h[j]),
                uniforms,
            );
            acc = Some(match acc {
                Some(a) => R::apply((), (a, x), &()),
                None => x,
            });
        }
        *o = acc.unwrap_or(*o);
    }
}

/// Whether `F` keeps `x`, the element at position `at` of the whole input.
#[inline(always)]
pub(crate) fn keeps<F: PredicateFn<T>, T: DeviceType>(
    x: T,
    at: usize,
    uniforms: &F::Uniforms,
) -> bool {
    // A Filter's index is 1D (checked by the skeleton): `cols` is never used.
    F::apply(F::Index::from_flat(at, 0), (x,), uniforms)
}

/// Copies the elements of `input` that `F` keeps to the front of `out`, in order, and
/// returns how many; `input` starts at position `first` of the whole input.
#[inline]
pub(crate) fn filter_range<F: PredicateFn<T>, T: DeviceType>(
    input: &[T],
    first: usize,
    out: &mut [T],
    uniforms: &F::Uniforms,
) -> usize {
    let mut kept = 0;
    for (k, &x) in input.iter().enumerate() {
        if keeps::<F, T>(x, first + k, uniforms) {
            out[kept] = x;
            kept += 1;
        }
    }
    kept
}

/// Output of a stencil with `Edge::None` keeps its borders, so it must be current on the
/// host; any other edge mode overwrites every element.
pub(crate) fn stencil_output<'o, T: DeviceType>(
    out: &'o mut ArgMut<'_, T>,
    edge: Edge,
) -> Result<&'o mut [T]> {
    if edge == Edge::None {
        out.host_mut()
    } else {
        out.host_overwrite()
    }
}

/// The host slice of a general stencil's output: overwritten where every output is written,
/// else read first (outputs left as they were).
pub(crate) fn windows_output<'o, T: DeviceType, U>(
    out: &'o mut ArgMut<'_, T>,
    edge: Edge,
    cells: &plan::Cells<U, T>,
) -> Result<&'o mut [T]> {
    if cells.keep.is_some() || (edge != Edge::None && cells.parity.is_none()) {
        out.host_overwrite()
    } else {
        out.host_mut()
    }
}

/// The container arguments of a general stencil, as its body reads them.
type WindowRefs<'p, F> =
    <<F as crate::userfn::OverlapFn>::Arrays as crate::userfn::ContainerArgs>::Refs<'p>;

/// The windowed inputs' host slices and the container arguments of a general stencil.
type WindowHost<'p, F> = (
    Vec<&'p [<F as crate::userfn::StencilFn>::Elem]>,
    WindowRefs<'p, F>,
);

/// The host slices of a general stencil's windowed inputs and container arguments.
pub(crate) fn windows_host<'p, F: crate::userfn::OverlapFn>(
    plan: &plan::MapOverlapWindows<'p, F>,
) -> Result<WindowHost<'p, F>> {
    let inputs = plan
        .inputs
        .iter()
        .map(|a| a.host())
        .collect::<Result<Vec<_>>>()?;
    let arrays = <F::Arrays as crate::userfn::ContainerArgs>::refs(
        plan.arrays.host()?,
        &plan.arrays.shapes(),
    );
    Ok((inputs, arrays))
}

impl Execute for Cpu {
    fn map<'a, 'o, S: MapSig<'a, 'o>>(&self, plan: plan::Map<'_, 'a, 'o, S>) -> Result<()> {
        let plan::Map {
            arrays,
            inputs,
            mut out,
            uniforms,
        } = plan;
        let cols = out.shapes()[0].cols();
        let inputs = inputs.host()?;
        let arrays = container_refs::<S::F>(&arrays)?;
        let _old = OldValues::of(self.checked, &mut out)?;
        map_range::<S::F>(
            arrays,
            inputs,
            out.host_overwrite()?,
            self.base,
            cols,
            uniforms,
        );
        Ok(())
    }

    fn map_array<'a, S: MapArraySig<'a>>(&self, plan: plan::MapArray<'_, 'a, S>) -> Result<()> {
        let plan::MapArray {
            array,
            inputs,
            mut out,
            uniforms,
        } = plan;
        let cols = out.shape().cols();
        let (array, inputs) = (array.host()?, inputs.host()?);
        let _old = OldValues::of(self.checked, &mut out)?;
        map_array_range::<S::F>(
            array,
            inputs,
            out.host_overwrite()?,
            self.base,
            cols,
            uniforms,
        );
        Ok(())
    }

    fn reduce<S: FoldSig>(&self, plan: plan::Reduce<'_, S>) -> Result<S::T> {
        let plan::Reduce { input, start } = plan;
        Ok(combine::<S::F, S::T>(
            start,
            fold::<S::F, S::T>(input.host()?),
        ))
    }

    fn reduce_axis<S: FoldSig>(&self, plan: plan::ReduceAxis<'_, S>) -> Result<()> {
        let plan::ReduceAxis {
            input,
            mut out,
            axis,
        } = plan;
        let (_, cols) = input.shape().dims();
        let data = input.host()?;
        let _old = OldValues::of(self.checked, &mut out)?;
        let out = out.host_overwrite()?;
        if axis == Axis::Cols {
            out.copy_from_slice(&fold_columns::<S::F, S::T>(data, cols));
        } else {
            fold_rows::<S::F, S::T>(data, cols, out);
        }
        Ok(())
    }

    fn map_reduce<'a, S: MapReduceSig<'a>>(
        &self,
        plan: plan::MapReduce<'_, 'a, S>,
    ) -> Result<<S::M as UserFn>::Out> {
        let plan::MapReduce {
            arrays,
            inputs,
            shape,
            uniforms,
            start,
        } = plan;
        let inputs = inputs.host()?;
        Ok(combine::<S::R, _>(
            start,
            map_fold::<S::M, S::R>(
                container_refs::<S::M>(&arrays)?,
                inputs,
                self.base..self.base + shape.len(),
                shape.cols(),
                uniforms,
            ),
        ))
    }

    fn scan<S: FoldSig>(&self, plan: plan::Scan<'_, S>) -> Result<()> {
        let plan::Scan {
            input,
            mut out,
            mode,
            start,
        } = plan;
        let input = input.host()?;
        let _old = OldValues::of(self.checked, &mut out)?;
        let out = out.host_overwrite()?;
        match mode {
            ScanMode::Inclusive => scan_inclusive::<S::F, S::T>(input, out, None),
            ScanMode::Exclusive => scan_exclusive::<S::F, S::T>(input, out, start),
        }
        Ok(())
    }

    fn map_overlap<F: WindowFn>(&self, plan: plan::MapOverlap<'_, F>) -> Result<()> {
        let plan::MapOverlap {
            input,
            mut out,
            stencil,
            axis,
            uniforms,
        } = plan;
        let (_, cols) = input.shape().dims();
        let input = input.host()?;
        let _old = OldValues::of(self.checked, &mut out)?;
        let out = stencil_output(&mut out, stencil.edge)?;
        match axis {
            Axis::Flat => overlap_range::<F>(input, out, 0, &stencil, uniforms),
            Axis::Rows => {
                for (in_row, out_row) in input.chunks(cols.max(1)).zip(out.chunks_mut(cols.max(1)))
                {
                    overlap_range::<F>(in_row, out_row, 0, &stencil, uniforms);
                }
            }
            Axis::Cols => overlap_cols_rows::<F>(input, cols, out, 0, &stencil, uniforms),
        }
        Ok(())
    }

    fn map_overlap_2d<F: Window2Fn>(&self, plan: plan::MapOverlap2d<'_, F>) -> Result<()> {
        let plan::MapOverlap2d {
            input,
            mut out,
            stencil,
            uniforms,
        } = plan;
        let shape = input.shape().dims();
        let input = input.host()?;
        let _old = OldValues::of(self.checked, &mut out)?;
        let out = stencil_output(&mut out, stencil.edge)?;
        overlap_2d_rows::<F>(input, shape, out, 0, &stencil, uniforms);
        Ok(())
    }

    fn map_pairs<S: PairsSig>(&self, plan: plan::MapPairs<'_, '_, S>) -> Result<()> {
        let plan::MapPairs {
            arrays,
            v,
            h,
            mut out,
            uniforms,
        } = plan;
        let (v, h) = (v.host()?, h.host()?);
        let arrays = container_refs::<S::F>(&arrays)?;
        let _old = OldValues::of(self.checked, &mut out)?;
        pairs_rows::<S::F, S::A, S::B>(arrays, v, h, out.host_overwrite()?, 0, uniforms);
        Ok(())
    }

    fn map_pairs_reduce<S: PairsReduceSig>(
        &self,
        plan: plan::MapPairsReduce<'_, '_, S>,
    ) -> Result<()> {
        let plan::MapPairsReduce {
            arrays,
            v,
            h,
            mut out,
            axis,
            uniforms,
        } = plan;
        let operands = (v.host()?, h.host()?);
        let arrays = container_refs::<S::M>(&arrays)?;
        let _old = OldValues::of(self.checked, &mut out)?;
        let out = out.host_overwrite()?;
        pairs_fold_range::<S::M, S::R, S::A, S::B>(arrays, operands, out, 0, axis, uniforms);
        Ok(())
    }

    fn filter<S: FilterSig>(&self, plan: plan::Filter<'_, S>) -> Result<usize> {
        let plan::Filter {
            input,
            mut out,
            uniforms,
        } = plan;
        let input = input.host()?;
        let _old = OldValues::of(self.checked, &mut out)?;
        // `out[kept..]` keeps its values: the whole range must be current on the host.
        Ok(filter_range::<S::F, S::T>(
            input,
            self.base,
            out.host_mut()?,
            uniforms,
        ))
    }

    fn sort<S: SortSig>(&self, plan: plan::Sort<'_, S>) -> Result<()> {
        let plan::Sort { mut keys, values } = plan;
        let mut values = values;
        let values = match &mut values {
            Some(v) => Some(v.host_mut()?),
            None => None,
        };
        sort_range::<S::K, S::V>(keys.host_mut()?, values);
        Ok(())
    }

    fn histogram<'a, S: HistogramSig<'a>>(
        &self,
        plan: plan::Histogram<'_, 'a, '_, S>,
    ) -> Result<()> {
        let plan::Histogram {
            arrays,
            inputs,
            shape,
            mut counts,
            uniforms,
        } = plan;
        let arrays = container_refs::<S::F>(&arrays)?;
        let inputs = inputs.host()?;
        let bins = counts.shape().len();
        let (mut totals, mut table) = (vec![0u64; bins], vec![0u32; bins]);
        let mut outside = Outside::default();
        let (n, mut at) = (shape.len(), 0);
        while at < n {
            let end = n.min(at + TABLE_SPAN);
            table.fill(0);
            let part = inputs.slice(at..end);
            let global = self.base + at..self.base + end;
            outside = outside.merge(count_range::<S::F>(
                arrays,
                part,
                global,
                shape.cols(),
                uniforms,
                &mut table,
            ));
            add_table(&mut totals, &table);
            at = end;
        }
        if self.checked {
            outside.check(<S::F as UserFn>::NAME, "bin", bins)?;
        }
        store(counts.host_overwrite()?, &totals);
        Ok(())
    }

    fn reduce_by_key<'a, S: ReduceByKeySig<'a>>(
        &self,
        plan: plan::ReduceByKey<'_, 'a, S>,
    ) -> Result<()> {
        let plan::ReduceByKey {
            arrays,
            inputs,
            shape,
            mut sums,
            uniforms,
        } = plan;
        let arrays = container_refs::<S::F>(&arrays)?;
        let inputs = inputs.host()?;
        let mut table = vec![S::V::default(); sums.shape().len()];
        let outside = merge_range::<S::F, S::R, S::V>(
            arrays,
            inputs,
            self.base..self.base + shape.len(),
            shape.cols(),
            uniforms,
            &mut table,
        );
        if self.checked {
            outside.check(<S::F as UserFn>::NAME, "key", table.len())?;
        }
        sums.host_overwrite()?.copy_from_slice(&table);
        Ok(())
    }

    fn map_overlap_3d<F: crate::userfn::Window3Fn>(
        &self,
        plan: plan::MapOverlap3d<'_, F>,
    ) -> Result<()> {
        let plan::MapOverlap3d {
            input,
            mut out,
            stencil,
            dims,
            uniforms,
        } = plan;
        let input = input.host()?;
        let _old = OldValues::of(self.checked, &mut out)?;
        let out = stencil_output(&mut out, stencil.edge)?;
        overlap_3d_rows::<F>(input, dims, out, 0, &stencil, uniforms);
        Ok(())
    }

    fn map_overlap_windows<F: crate::userfn::Overlap1Fn>(
        &self,
        mut plan: plan::MapOverlapWindows<'_, F>,
    ) -> Result<()> {
        let (inputs, arrays) = windows_host(&plan)?;
        let dims = plan.out.shape().dims();
        let _old = OldValues::of(self.checked, &mut plan.out)?;
        let out = windows_output(&mut plan.out, plan.stencil.edge, &plan.cells)?;
        windows_1d_range::<F>(
            &inputs,
            dims,
            plan.axis,
            out,
            0,
            &plan.stencil,
            &plan.cells,
            arrays,
            plan.uniforms,
        );
        Ok(())
    }

    fn map_overlap_windows_2d<F: crate::userfn::Overlap2Fn>(
        &self,
        mut plan: plan::MapOverlapWindows<'_, F>,
    ) -> Result<()> {
        let (inputs, arrays) = windows_host(&plan)?;
        let dims = plan.out.shape().dims();
        let _old = OldValues::of(self.checked, &mut plan.out)?;
        let out = windows_output(&mut plan.out, plan.stencil.edge, &plan.cells)?;
        windows_2d_rows::<F>(
            &inputs,
            dims,
            out,
            0,
            &plan.stencil,
            &plan.cells,
            arrays,
            plan.uniforms,
        );
        Ok(())
    }

    fn map_reduce_axis<'a, S: MapReduceSig<'a>>(
        &self,
        plan: plan::MapReduceAxis<'_, 'a, S>,
    ) -> Result<()> {
        if plan.axis != Axis::Rows {
            return super::axis_materialised(self, plan);
        }
        let plan::MapReduceAxis {
            map_reduce: p,
            mut out,
            ..
        } = plan;
        let arrays = container_refs::<S::M>(&p.arrays)?;
        let inputs = p.inputs.host()?;
        let _old = OldValues::of(self.checked, &mut out)?;
        let out = out.host_overwrite()?;
        let at = (0, self.base, p.shape.cols());
        map_fold_rows::<S::M, S::R>(arrays, inputs, out, at, p.uniforms);
        Ok(())
    }

    fn wavefront<S: WavefrontSig>(&self, plan: plan::Wavefront<'_, '_, S>) -> Result<()> {
        let plan::Wavefront {
            arrays,
            mut m,
            uniforms,
        } = plan;
        let (rows, cols) = m.shape().dims();
        if rows < 2 || cols < 2 {
            return Ok(());
        }
        let arrays = container_refs::<S::F>(&arrays)?;
        let _old = OldValues::of(self.checked, &mut m)?;
        let cells = std::cell::Cell::from_mut(m.host_mut()?).as_slice_of_cells();
        wavefront_tile::<S::F, S::T>(arrays, cells, cols, (1..rows, 1..cols), uniforms);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;

    #[userfn]
    fn add(a: f32, b: f32) -> f32 {
        a + b
    }

    #[userfn]
    fn scaled(#[index] (i, j): (usize, usize), x: f32) -> f32 {
        x * (1.0 + (i % 3) as f32) - j as f32 * 0.01
    }

    /// Values whose `f32` sums depend on the order of the additions.
    fn uneven(n: usize, seed: usize) -> Vec<f32> {
        (0..n)
            .map(|i| ((i * 7919 + seed) % 1013) as f32 * 0.37 - 150.0 + 1e-3 * i as f32)
            .collect()
    }

    /// Rows folded side by side give each row's own fold, bit for bit, for row counts that
    /// are and are not a multiple of the rows folded at once, and on `cpu` and `rayon`
    /// (whose chunks of rows are cut elsewhere) alike.
    #[test]
    fn row_folds_side_by_side_are_each_rows_fold() {
        for (rows, cols) in [
            (0, 3),
            (1, 1),
            (7, 2),
            (8, 3),
            (9, 17),
            (21, 64),
            (2051, 129),
        ] {
            let data = uneven(rows * cols, rows + cols);
            let want: Vec<u32> = data
                .chunks(cols)
                .map(|row| row[1..].iter().fold(row[0], |a, &x| a + x).to_bits())
                .collect();
            let mut out = vec![f32::NAN; rows];
            super::fold_rows::<add, f32>(&data, cols, &mut out);
            let bits: Vec<u32> = out.iter().map(|x| x.to_bits()).collect();
            assert_eq!(bits, want, "{rows}x{cols}");
            let m = Matrix::from_vec(rows, cols, data).expect("shape");
            for b in [Backend::Cpu, Backend::Rayon] {
                let mut per_row = Vector::filled(rows, f32::NAN);
                Reduce::new(add)
                    .backend(b)
                    .run_rows(&m, &mut per_row)
                    .expect("run_rows");
                let bits: Vec<u32> = per_row.to_vec().iter().map(|x| x.to_bits()).collect();
                assert_eq!(bits, want, "{rows}x{cols} on {b:?}");
            }
        }
    }

    /// A MapReduce over rows maps and folds rows side by side: each row's own fold of its
    /// own mapped values (at their own 2D indices), bit for bit, on `cpu` and `rayon`.
    #[test]
    fn row_map_folds_side_by_side_are_each_rows_fold() {
        for (rows, cols) in [(1, 1), (7, 2), (8, 3), (9, 17), (21, 64), (2051, 129)] {
            let data = uneven(rows * cols, 3 * rows + cols);
            let want: Vec<u32> = data
                .chunks(cols)
                .enumerate()
                .map(|(i, row)| {
                    let v = |j: usize| row[j] * (1.0 + (i % 3) as f32) - j as f32 * 0.01;
                    (1..cols).fold(v(0), |a, j| a + v(j)).to_bits()
                })
                .collect();
            let m = Matrix::from_vec(rows, cols, data).expect("shape");
            for b in [Backend::Cpu, Backend::Rayon] {
                let mut per_row = Vector::filled(rows, f32::NAN);
                MapReduce::new(scaled, add)
                    .backend(b)
                    .run_rows(&m, &mut per_row)
                    .expect("run_rows");
                let bits: Vec<u32> = per_row.to_vec().iter().map(|x| x.to_bits()).collect();
                assert_eq!(bits, want, "{rows}x{cols} on {b:?}");
            }
        }
    }
}
