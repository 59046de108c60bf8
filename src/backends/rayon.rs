//! The Rayon backend: the sequential loops of [`super::cpu`] over chunks on all cores.
//!
//! A call of at most [`MIN_CHUNK`] elements runs inline without touching the thread pool;
//! a larger one is cut into about four chunks per thread ([`chunk_len`]), except where the
//! chunks' partial results are combined, whose chunks depend on the size alone
//! ([`fold_len`]). Reduce and MapReduce fold each chunk and combine the partials in order; Scan is the classic
//! two-pass parallel scan (totals of all chunks but the last, a short sequential scan of
//! the totals, then each chunk rescanned from its carry): it reads the input twice and
//! applies `f` about `2n` times, which pays off from two cores on. Filter evaluates the
//! predicate once per element into a bit mask per chunk with its count, takes the prefix
//! of the counts, and copies each chunk's kept elements to its own part of the output.

use std::ops::Range;

use rayon::prelude::*;

mod map_pairs_reduce;
mod sort;
mod wavefront;

use super::cpu::{self, Cpu, OldValues};
use super::{Execute, PredicateFn};
use crate::codegen::cost::{classify, Cost};
use crate::codegen::loopnest::Nest;
use crate::containers::{HostOut, OutArgs, Shape};
use crate::plan::{
    self, FilterSig, FoldSig, HistogramSig, MapArraySig, MapReduceSig, MapSig, PairsReduceSig,
    PairsSig, ReduceByKeySig, SortSig, WavefrontSig,
};
use crate::plan::{ArgTuple, Axis, HostSlices, ScanMode};
use crate::userfn::{ContainerArgs, ElementwiseFn, UserFn, Window2Fn, WindowFn};
use crate::{DeviceType, Result};

/// The multi-core executor.
pub(crate) struct Rayon {
    /// Added to every `#[index]` (see [`Cpu::base`]).
    pub(crate) base: usize,
    /// Whether the call is checked (see [`Cpu::checked`]).
    pub(crate) checked: bool,
}

impl Rayon {
    /// The sequential executor with this call's settings, for calls too small to split.
    fn cpu(&self) -> Cpu {
        Cpu {
            base: self.base,
            checked: self.checked,
        }
    }
}

/// Smallest chunk worth a task: below this, thread hand-off costs more than it saves.
pub(crate) const MIN_CHUNK: usize = 1 << 14;

/// Smallest chunk a call big enough to split is cut into: a few microseconds of the
/// cheapest element-wise work, several times a task's hand-off.
const MIN_LEAF: usize = 1 << 12;

/// Chunks per thread: enough that a thread slowed by anything else on the machine, or
/// given the slow part of an uneven call, hands the rest to the others.
const CHUNKS_PER_THREAD: usize = 4;

/// Elements per chunk for `n` elements of work: about [`CHUNKS_PER_THREAD`] chunks per
/// thread, at least [`MIN_LEAF`] and at most `4 * MIN_CHUNK` elements (fixed per-thread
/// shares measured 10-20 % behind hand-written Rayon on a busy VM; a fixed `4 * MIN_CHUNK`
/// left 12 of 16 threads idle on a 512 x 512 call), and a multiple of 64 elements, so
/// that two threads write the same cache line of an output only where one chunk ends.
fn chunk_len(n: usize) -> usize {
    let share = n.div_ceil(CHUNKS_PER_THREAD * rayon::current_num_threads());
    let len = share.clamp(MIN_LEAF, 4 * MIN_CHUNK).next_multiple_of(64);
    len.min(n).max(1)
}

/// Elements per chunk of a memory-bound Map (and of a row fold of one, in whole rows):
/// about 16 chunks per thread, of [`MIN_LEAF`] to [`MIN_CHUNK`] elements, a multiple of 64,
/// as the 2D stencils' bands ([`stencil_band`]). With [`chunk_len`]'s four per thread an
/// idle thread could take only a quarter of a thread's share at the end of a call: heat's
/// 2D index Map took 1.21-1.48x the time of a hand-written Rayon loop over rows on 16
/// cores, where the stencils cut this way took 0.73-1.22x.
fn map_len(n: usize) -> usize {
    let share = n.div_ceil(16 * rayon::current_num_threads());
    let len = share.clamp(MIN_LEAF, MIN_CHUNK).next_multiple_of(64);
    len.min(n).max(1)
}

/// Elements per chunk of a fold whose chunks are combined (Reduce, MapReduce, Scan, column
/// Reduce): the chunk boundaries decide the order in which partial results are combined,
/// so they depend on `n` alone, not on the thread count (the same `f32` sum on every
/// machine, and the one these calls have always given).
fn fold_len(n: usize) -> usize {
    n.clamp(1, 4 * MIN_CHUNK)
}

/// The fold of `positions`: halved recursively with `rayon::join` down to leaves of at most
/// `most` elements ([`fold_len`] for cheap elements) that `leaf` folds, so idle threads
/// steal work as it frees up (measured: fixed chunks fell 10-20 % behind hand-written Rayon
/// on a busy machine). Halves are combined left to right, which keeps the order an
/// associative `f` needs.
fn split_fold<T: DeviceType>(
    (positions, most): (Range<usize>, usize),
    leaf: &(impl Fn(Range<usize>) -> Option<T> + Sync),
    f: &(impl Fn(T, T) -> T + Sync),
) -> Option<T> {
    if positions.len() <= most {
        return leaf(positions);
    }
    let mid = positions.start + positions.len() / 2;
    let (left, right) = rayon::join(
        || split_fold((positions.start..mid, most), leaf, f),
        || split_fold((mid..positions.end, most), leaf, f),
    );
    match (left, right) {
        (Some(l), Some(r)) => Some(f(l, r)),
        (l, r) => l.or(r),
    }
}

/// One bit per element of `part` (whose first element is at position `first` of the
/// input): whether `F` keeps it; and how many it keeps.
fn keep_mask<F: PredicateFn<T>, T: DeviceType>(
    part: &[T],
    first: usize,
    uniforms: &F::Uniforms,
) -> (Vec<u64>, usize) {
    let mut mask = vec![0u64; part.len().div_ceil(64)];
    let mut kept = 0;
    for (w, (bits, xs)) in mask.iter_mut().zip(part.chunks(64)).enumerate() {
        for (b, &x) in xs.iter().enumerate() {
            let keep = cpu::keeps::<F, T>(x, first + 64 * w + b, uniforms);
            *bits |= u64::from(keep) << b;
        }
        kept += bits.count_ones() as usize;
    }
    (mask, kept)
}

/// Rows per band of a column-wise MapOverlap: about [`chunk_len`] elements, or a quarter
/// of a thread's share where that is more, so that the halo each band copies (its radius in
/// rows above and below) stays a small part of it.
fn cols_band(rows: usize, cols: usize) -> usize {
    let share = rows.div_ceil(4 * rayon::current_num_threads());
    chunk_len(rows * cols).div_ceil(cols).max(share).max(1)
}

/// Most elements of a column Reduce folded on the calling thread (1 MiB of `f32`).
const SMALL_COLUMN_FOLD: usize = 1 << 18;

/// Fewest columns in a stripe of a column Reduce's block (a few cache lines per row).
const MIN_STRIPE: usize = 32;

/// Whether `n` elements are too few to split.
fn sequential(n: usize) -> bool {
    n <= MIN_CHUNK
}

/// Elements per chunk of an element-wise call (Map, MapReduce) of `F` over `n` elements, or
/// `None` to run it inline. An element of a function with container arguments that loops (not
/// memory-bound) reads many container elements (a row of a matrix, a whole vector), so
/// even a few thousand of them are worth all cores: about four chunks per thread
/// (measured on 2 cores, a 2048 x 2048 matrix-vector Map: inline 1.7x the time of a
/// hand-written Rayon loop, split within 1 % of it).
///
/// A function that loops without container arguments (Mandelbrot's escape loop) is as
/// heavy per element and often uneven (a row inside the set costs 64 iterations per pixel,
/// one outside a few): it is split as finely from a few hundred elements on, 16 chunks
/// per thread (measured on 16 cores, 256 x 256 Mandelbrot: one chunk, as a memory-bound
/// call is cut, took 11.5x the time of a hand-written Rayon loop over rows).
fn map_chunk<F: ElementwiseFn>(n: usize) -> Option<usize> {
    let class = classify(F::definition());
    let arrays = !<F::Arrays as ContainerArgs>::KINDS.is_empty();
    let threads = rayon::current_num_threads();
    match class {
        Cost::Memory if !sequential(n) => Some(chunk_len(n)),
        Cost::Memory => None,
        _ if arrays && n > 1 => Some(n.div_ceil(CHUNKS_PER_THREAD * threads).max(1)),
        _ if n >= MIN_COMPUTE => Some(n.div_ceil(16 * threads).max(1)),
        _ => None,
    }
}

/// [`map_chunk`] for a call whose results do not depend on where it is cut (Map, a row
/// fold in whole rows): a memory-bound function gets [`map_len`]'s finer chunks.
/// (ReduceByKey keeps `map_chunk`'s: its chunks decide the order of its sums.)
fn map_split<F: ElementwiseFn>(n: usize) -> Option<usize> {
    let chunk = map_chunk::<F>(n)?;
    Some(match classify(F::definition()) {
        Cost::Memory => map_len(n),
        _ => chunk,
    })
}

/// Elements per chunk of a matrix product ([`cpu::loopnest::band_rows`] whole rows), or
/// `None` where `F` is no product.
fn product_chunk<F: ElementwiseFn>(shape: Shape) -> Option<usize> {
    let nest = crate::codegen::loopnest::loop_nest(F::definition())?;
    match (nest.nest, shape) {
        (Nest::Gemm { .. }, Shape::Matrix { rows, cols }) if rows > 0 && cols > 0 => {
            Some(cpu::loopnest::band_rows(rows, rayon::current_num_threads()) * cols)
        }
        _ => None,
    }
}

/// [`map_chunk`] for a MapReduce, whose leaves are combined: as [`fold_len`] says, they
/// stay independent of the thread count, except for the heavy functions with container
/// arguments, which have been cut per thread from the start.
fn fold_chunk<F: ElementwiseFn>(n: usize) -> Option<usize> {
    let heavy = !<F::Arrays as ContainerArgs>::KINDS.is_empty()
        && classify(F::definition()) != Cost::Memory;
    match heavy {
        true if n > 1 => Some(n.div_ceil(CHUNKS_PER_THREAD * rayon::current_num_threads())),
        false if !sequential(n) => Some(fold_len(n)),
        _ => None,
    }
}

/// Fewest elements of a looping function without container arguments worth splitting.
const MIN_COMPUTE: usize = 256;

impl Execute for Rayon {
    fn filter<S: FilterSig>(&self, plan: plan::Filter<'_, S>) -> Result<usize> {
        let n = plan.input.shape().len();
        if sequential(n) {
            return self.cpu().filter(plan);
        }
        let plan::Filter {
            input,
            mut out,
            uniforms,
        } = plan;
        let data = input.host()?;
        let chunk = chunk_len(n);
        let masks: Vec<(Vec<u64>, usize)> = data
            .par_chunks(chunk)
            .enumerate()
            .map(|(c, part)| keep_mask::<S::F, S::T>(part, self.base + c * chunk, uniforms))
            .collect();
        let kept = masks.iter().map(|&(_, count)| count).sum();
        // `out[kept..]` keeps its values: the whole range must be current on the host.
        let _old = OldValues::of(self.checked, &mut out)?;
        let out = out.host_mut()?;
        // Chunk c's kept elements go to the next `count` positions after chunk c - 1's.
        let mut rest = &mut out[..kept];
        let mut parts = Vec::with_capacity(masks.len());
        for &(_, count) in &masks {
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(count);
            parts.push(head);
            rest = tail;
        }
        parts
            .into_par_iter()
            .zip(masks.par_iter())
            .zip(data.par_chunks(chunk))
            .for_each(|((dst, (mask, _)), part)| {
                let mut k = 0;
                for (bits, xs) in mask.iter().zip(part.chunks(64)) {
                    let mut bits = *bits;
                    while bits != 0 {
                        dst[k] = xs[bits.trailing_zeros() as usize];
                        k += 1;
                        bits &= bits - 1;
                    }
                }
            });
        Ok(kept)
    }

    fn map<'a, 'o, S: MapSig<'a, 'o>>(&self, plan: plan::Map<'_, 'a, 'o, S>) -> Result<()> {
        let shape = plan.out.shapes()[0];
        let Some(chunk) = map_split::<S::F>(shape.len()) else {
            return self.cpu().map(plan);
        };
        let chunk = product_chunk::<S::F>(shape).unwrap_or(chunk);
        let plan::Map {
            arrays,
            inputs,
            mut out,
            uniforms,
        } = plan;
        let cols = shape.cols();
        let arrays = cpu::container_refs::<S::F>(&arrays)?;
        let inputs = inputs.host()?;
        // Every output is cut at the same positions (a tuple of slices has no par_chunks).
        let mut parts = Vec::with_capacity(shape.len().div_ceil(chunk));
        let _old = OldValues::of(self.checked, &mut out)?;
        let mut rest = out.host_overwrite()?;
        while rest.len() > chunk {
            let (head, tail) = rest.split_at(chunk);
            parts.push(head);
            rest = tail;
        }
        parts.push(rest);
        parts.into_par_iter().enumerate().for_each(|(c, o)| {
            let first = c * chunk;
            cpu::map_range::<S::F>(
                arrays,
                inputs.slice(first..first + o.len()),
                o,
                self.base + first,
                cols,
                uniforms,
            );
        });
        Ok(())
    }

    fn map_array<'a, S: MapArraySig<'a>>(&self, plan: plan::MapArray<'_, 'a, S>) -> Result<()> {
        if sequential(plan.out.shape().len()) {
            return self.cpu().map_array(plan);
        }
        let plan::MapArray {
            array,
            inputs,
            mut out,
            uniforms,
        } = plan;
        let cols = out.shape().cols();
        let (array, inputs) = (array.host()?, inputs.host()?);
        let _old = OldValues::of(self.checked, &mut out)?;
        let out = out.host_overwrite()?;
        let chunk = chunk_len(out.len());
        out.par_chunks_mut(chunk).enumerate().for_each(|(c, o)| {
            let first = c * chunk;
            cpu::map_array_range::<S::F>(
                array,
                inputs.slice(first..first + o.len()),
                o,
                self.base + first,
                cols,
                uniforms,
            );
        });
        Ok(())
    }

    fn reduce<S: FoldSig>(&self, plan: plan::Reduce<'_, S>) -> Result<S::T> {
        if sequential(plan.input.shape().len()) {
            return self.cpu().reduce(plan);
        }
        let plan::Reduce { input, start } = plan;
        let data = input.host()?;
        let folded = split_fold(
            (0..data.len(), fold_len(data.len())),
            &|r: Range<usize>| cpu::fold::<S::F, S::T>(&data[r]),
            &|a, b| S::F::apply((), (a, b), &()),
        );
        Ok(cpu::combine::<S::F, S::T>(start, folded))
    }

    fn reduce_axis<S: FoldSig>(&self, plan: plan::ReduceAxis<'_, S>) -> Result<()> {
        let (_, cols) = plan.input.shape().dims();
        if sequential(plan.input.shape().len()) || cols == 0 {
            return self.cpu().reduce_axis(plan);
        }
        let plan::ReduceAxis {
            input,
            mut out,
            axis,
        } = plan;
        let data = input.host()?;
        let _old = OldValues::of(self.checked, &mut out)?;
        let out = out.host_overwrite()?;
        if axis == Axis::Cols {
            let rows_per_chunk = fold_len(data.len()).div_ceil(cols);
            let blocks: Vec<&[S::T]> = data.chunks(rows_per_chunk * cols).collect();
            // The blocks decide the order of the combines (fixed by the size); fewer blocks
            // than the threads want (512 x 512: four) are also cut into column stripes,
            // each folded in the same order (512 x 512 on 16 cores took 1.5x the time of a
            // hand-written Rayon loop with four threads busy).
            // A small matrix is folded on the calling thread, block by block in the same
            // order: on the GPU host, 512 x 512 took 2.35x the time of a hand-written Rayon
            // loop on 2 threads and 1.4x the sequential fold's on 16 (waking the pool costs
            // more than the 1 MiB fold).
            let inline = data.len() <= SMALL_COLUMN_FOLD;
            let want = CHUNKS_PER_THREAD * rayon::current_num_threads();
            let stripes = match inline {
                true => 1,
                false => want
                    .div_ceil(blocks.len())
                    .min(cols.div_ceil(MIN_STRIPE))
                    .max(1),
            };
            let width = cols.div_ceil(stripes);
            let fold = |t: usize| {
                let (block, first) = (blocks[t / stripes], t % stripes * width);
                let range = first.min(cols)..(first + width).min(cols);
                cpu::fold_column_range::<S::F, S::T>(block, cols, range)
            };
            let tasks = 0..blocks.len() * stripes;
            let parts: Vec<Vec<S::T>> = match inline {
                true => tasks.map(fold).collect(),
                false => tasks.into_par_iter().map(fold).collect(),
            };
            // One stripe (a matrix with enough row blocks) keeps the blocks' partials as
            // they are: joining them copied every partial on the calling thread while the
            // others waited (2048 x 2048: 64 partials of 8 KiB, in a 0.2 ms call on 16
            // cores, which took 1.34x the hand-written loop's time after the stripes came).
            let partials: Vec<Vec<S::T>> = match stripes {
                1 => parts,
                _ => parts.chunks(stripes).map(<[_]>::concat).collect(),
            };
            // Each column combines the blocks' partials in block order, as before; the
            // columns are independent, so they are combined in stripes on all threads
            // (2048 x 2048: 64 blocks, so 131072 combines, which on one thread weigh half
            // as much as a sixteenth of the 4M folds).
            let stripe = chunk_len(cols * partials.len()).div_ceil(partials.len());
            let combine = |(s, o): (usize, &mut [S::T])| {
                let at = s * stripe..s * stripe + o.len();
                o.copy_from_slice(&partials[0][at.clone()]);
                for block in &partials[1..] {
                    for (a, &x) in o.iter_mut().zip(&block[at.clone()]) {
                        *a = S::F::apply((), (*a, x), &());
                    }
                }
            };
            // One stripe (a few thousand combines) runs here: handing it to the pool is a
            // round trip through another thread for nothing.
            match stripe >= cols || inline {
                true => out.chunks_mut(stripe.max(1)).enumerate().for_each(combine),
                false => out.par_chunks_mut(stripe).enumerate().for_each(combine),
            }
        } else {
            let rows_per_chunk = chunk_len(data.len()).div_ceil(cols);
            out.par_chunks_mut(rows_per_chunk)
                .zip(data.par_chunks(rows_per_chunk * cols))
                .for_each(|(o, rows)| cpu::fold_rows::<S::F, S::T>(rows, cols, o));
        }
        Ok(())
    }

    fn map_reduce<'a, S: MapReduceSig<'a>>(
        &self,
        plan: plan::MapReduce<'_, 'a, S>,
    ) -> Result<<S::M as UserFn>::Out> {
        let n = plan.shape.len();
        let Some(most) = fold_chunk::<S::M>(n) else {
            return self.cpu().map_reduce(plan);
        };
        let plan::MapReduce {
            arrays,
            inputs,
            shape,
            uniforms,
            start,
        } = plan;
        let arrays = cpu::container_refs::<S::M>(&arrays)?;
        let inputs = inputs.host()?;
        let leaf = |range: Range<usize>| {
            let part = inputs.slice(range.clone());
            let global = self.base + range.start..self.base + range.end;
            cpu::map_fold::<S::M, S::R>(arrays, part, global, shape.cols(), uniforms)
        };
        let folded = split_fold((0..n, most), &leaf, &|a, b| S::R::apply((), (a, b), &()));
        Ok(cpu::combine::<S::R, _>(start, folded))
    }

    fn scan<S: FoldSig>(&self, plan: plan::Scan<'_, S>) -> Result<()> {
        if sequential(plan.input.shape().len()) {
            return self.cpu().scan(plan);
        }
        let plan::Scan {
            input,
            mut out,
            mode,
            start,
        } = plan;
        let data = input.host()?;
        let _old = OldValues::of(self.checked, &mut out)?;
        let out = out.host_overwrite()?;
        let chunk = fold_len(data.len());
        // The last chunk's total would only feed a carry nobody reads.
        let all_but_last = &data[..(data.len() - 1) / chunk * chunk];
        let totals: Vec<Option<S::T>> = all_but_last
            .par_chunks(chunk)
            .map(cpu::fold::<S::F, S::T>)
            .collect();
        // carry[c] is the scan of everything before chunk c (None: nothing, inclusive mode).
        let mut carries = Vec::with_capacity(totals.len());
        let mut carry = (mode == ScanMode::Exclusive).then_some(start);
        for total in totals {
            carries.push(carry);
            carry = match (carry, total) {
                (Some(c), Some(t)) => Some(S::F::apply((), (c, t), &())),
                (c, t) => c.or(t),
            };
        }
        carries.push(carry);
        out.par_chunks_mut(chunk)
            .zip(data.par_chunks(chunk))
            .zip(carries)
            .for_each(|((o, v), carry)| match carry {
                Some(c) if mode == ScanMode::Exclusive => {
                    cpu::scan_exclusive::<S::F, S::T>(v, o, c)
                }
                _ => cpu::scan_inclusive::<S::F, S::T>(v, o, carry),
            });
        Ok(())
    }

    fn map_overlap<F: WindowFn>(&self, plan: plan::MapOverlap<'_, F>) -> Result<()> {
        let (rows, cols) = plan.input.shape().dims();
        if sequential(plan.input.shape().len()) {
            return self.cpu().map_overlap(plan);
        }
        let plan::MapOverlap {
            input,
            mut out,
            stencil,
            axis,
            uniforms,
        } = plan;
        let data = input.host()?;
        let _old = OldValues::of(self.checked, &mut out)?;
        let out = cpu::stencil_output(&mut out, stencil.edge)?;
        if axis == Axis::Flat {
            let chunk = chunk_len(data.len());
            out.par_chunks_mut(chunk).enumerate().for_each(|(c, o)| {
                cpu::overlap_range::<F>(data, o, c * chunk, &stencil, uniforms);
            });
        } else if axis == Axis::Cols {
            let band = cols_band(rows, cols);
            out.par_chunks_mut(band * cols)
                .enumerate()
                .for_each(|(b, o)| {
                    cpu::overlap_cols_rows::<F>(data, cols, o, b * band, &stencil, uniforms);
                });
        } else {
            let rows_per_chunk = chunk_len(rows * cols).div_ceil(cols);
            out.par_chunks_mut(cols)
                .zip(data.par_chunks(cols))
                .with_min_len(rows_per_chunk)
                .for_each(|(o, row)| {
                    cpu::overlap_range::<F>(row, o, 0, &stencil, uniforms);
                });
        }
        Ok(())
    }

    fn map_overlap_2d<F: Window2Fn>(&self, plan: plan::MapOverlap2d<'_, F>) -> Result<()> {
        let (rows, cols) = plan.input.shape().dims();
        if sequential(plan.input.shape().len()) {
            return self.cpu().map_overlap_2d(plan);
        }
        let plan::MapOverlap2d {
            input,
            mut out,
            stencil,
            uniforms,
        } = plan;
        let data = input.host()?;
        let _old = OldValues::of(self.checked, &mut out)?;
        let out = cpu::stencil_output(&mut out, stencil.edge)?;
        // Bands as the other 2D stencils' (Jacobi 2048 x 2048 in bands of four per thread
        // took 1.25x the time of a hand-written Rayon loop over rows on 16 cores, round 7).
        let band = stencil_band(rows, cols);
        out.par_chunks_mut(band * cols)
            .enumerate()
            .for_each(|(b, o)| {
                cpu::overlap_2d_rows::<F>(data, (rows, cols), o, b * band, &stencil, uniforms);
            });
        Ok(())
    }

    fn map_pairs<S: PairsSig>(&self, plan: plan::MapPairs<'_, '_, S>) -> Result<()> {
        let (rows, cols) = plan.out.shape().dims();
        if sequential(rows * cols) {
            return self.cpu().map_pairs(plan);
        }
        let plan::MapPairs {
            arrays,
            v,
            h,
            mut out,
            uniforms,
        } = plan;
        let arrays = cpu::container_refs::<S::F>(&arrays)?;
        let (v, h) = (v.host()?, h.host()?);
        let _old = OldValues::of(self.checked, &mut out)?;
        let out = out.host_overwrite()?;
        let band = chunk_len(rows * cols).div_ceil(cols);
        out.par_chunks_mut(band * cols)
            .enumerate()
            .for_each(|(b, o)| {
                cpu::pairs_rows::<S::F, S::A, S::B>(arrays, v, h, o, b * band, uniforms)
            });
        Ok(())
    }

    fn map_pairs_reduce<S: PairsReduceSig>(
        &self,
        plan: plan::MapPairsReduce<'_, '_, S>,
    ) -> Result<()> {
        let (rows, cols) = (plan.v.shape().len(), plan.h.shape().len());
        let size = size_of::<<S::M as UserFn>::Out>();
        let pairs = rows * cols;
        let as_cpu = plan.axis == Axis::Cols && map_pairs_reduce::cols_run_as_cpu(cols, size);
        if sequential(pairs) || as_cpu {
            return self.cpu().map_pairs_reduce(plan);
        }
        let plan::MapPairsReduce {
            arrays,
            v,
            h,
            mut out,
            axis,
            uniforms,
        } = plan;
        let arrays = cpu::container_refs::<S::M>(&arrays)?;
        let operands = (v.host()?, h.host()?);
        let _old = OldValues::of(self.checked, &mut out)?;
        let out = out.host_overwrite()?;
        if axis == Axis::Cols
            && map_pairs_reduce::relayed(out.len(), size_of::<<S::M as UserFn>::Out>())
        {
            map_pairs_reduce::fold_cols::<S::M, S::R, S::A, S::B>(arrays, operands, out, uniforms);
            return Ok(());
        }
        // Each result folds its whole row (column) in order, as on `cpu`: only the results
        // are spread over the threads. A column fold walks rows shared by its neighbours
        // (cpu::pairs_fold_cols): the columns are cut into one range per thread.
        let per = match axis {
            Axis::Cols => out.len().div_ceil(rayon::current_num_threads()),
            _ => chunk_len(pairs).div_ceil(pairs / out.len()),
        };
        out.par_chunks_mut(per).enumerate().for_each(|(c, o)| {
            // A column fold stores its results every row: in `out`, threads folding
            // neighbouring columns fought over the same cache lines (124x the hand loop on
            // 16 cores), so each folds into a buffer of its own.
            let mut own = (axis == Axis::Cols).then(|| o.to_vec());
            cpu::pairs_fold_range::<S::M, S::R, S::A, S::B>(
                arrays,
                operands,
                own.as_deref_mut().unwrap_or(o),
                c * per,
                axis,
                uniforms,
            );
            if let Some(own) = own {
                o.copy_from_slice(&own);
            }
        });
        Ok(())
    }

    fn sort<S: SortSig>(&self, plan: plan::Sort<'_, S>) -> Result<()> {
        if sequential(plan.keys.shape().len()) {
            return self.cpu().sort(plan);
        }
        let plan::Sort { mut keys, values } = plan;
        let mut values = values;
        let values = match &mut values {
            Some(v) => Some(v.host_mut()?),
            None => None,
        };
        sort::radix_sort::<S::K, S::V>(keys.host_mut()?, values);
        Ok(())
    }

    fn histogram<'a, S: HistogramSig<'a>>(
        &self,
        plan: plan::Histogram<'_, 'a, '_, S>,
    ) -> Result<()> {
        let n = plan.shape.len();
        if sequential(n) {
            return self.cpu().histogram(plan);
        }
        let plan::Histogram {
            arrays,
            inputs,
            shape,
            mut counts,
            uniforms,
        } = plan;
        let arrays = cpu::container_refs::<S::F>(&arrays)?;
        let inputs = inputs.host()?;
        let bins = counts.shape().len();
        // A chunk counts into a table of its own, cleared and added to its task's totals
        // afterwards: at least as many elements as bins, so that clearing and adding the
        // table stays a small part of the chunk's work.
        let chunk = chunk_len(n).max(bins).min(cpu::TABLE_SPAN);
        let (totals, outside) = (0..n.div_ceil(chunk))
            .into_par_iter()
            .fold(
                || (vec![0u64; bins], vec![0u32; bins], cpu::Outside::default()),
                |(mut totals, mut table, outside), c| {
                    let range = c * chunk..n.min((c + 1) * chunk);
                    table.fill(0);
                    let global = self.base + range.start..self.base + range.end;
                    let more = cpu::count_range::<S::F>(
                        arrays,
                        inputs.slice(range),
                        global,
                        shape.cols(),
                        uniforms,
                        &mut table,
                    );
                    cpu::add_table(&mut totals, &table);
                    (totals, table, outside.merge(more))
                },
            )
            .map(|(totals, _, outside)| (totals, outside))
            .reduce(
                || (vec![0u64; bins], cpu::Outside::default()),
                |(mut a, x), (b, y)| {
                    for (a, b) in a.iter_mut().zip(&b) {
                        *a += b;
                    }
                    (a, x.merge(y))
                },
            );
        if self.checked {
            outside.check(<S::F as UserFn>::NAME, "bin", bins)?;
        }
        cpu::store(counts.host_overwrite()?, &totals);
        Ok(())
    }

    fn reduce_by_key<'a, S: ReduceByKeySig<'a>>(
        &self,
        plan: plan::ReduceByKey<'_, 'a, S>,
    ) -> Result<()> {
        let n = plan.shape.len();
        let Some(chunk) = map_chunk::<S::F>(n) else {
            return self.cpu().reduce_by_key(plan);
        };
        let plan::ReduceByKey {
            arrays,
            inputs,
            shape,
            mut sums,
            uniforms,
        } = plan;
        let arrays = cpu::container_refs::<S::F>(&arrays)?;
        let inputs = inputs.host()?;
        let keys = sums.shape().len();
        // Each task merges its chunks into a table of its own; a chunk has at least as
        // many elements as keys, so that merging the tables stays a small part of the work.
        let chunk = chunk.max(keys);
        let fresh = || (vec![S::V::default(); keys], cpu::Outside::default());
        let (table, outside) = (0..n.div_ceil(chunk))
            .into_par_iter()
            .fold(fresh, |(mut table, outside), c| {
                let range = c * chunk..n.min((c + 1) * chunk);
                let global = self.base + range.start..self.base + range.end;
                let more = cpu::merge_range::<S::F, S::R, S::V>(
                    arrays,
                    inputs.slice(range),
                    global,
                    shape.cols(),
                    uniforms,
                    &mut table,
                );
                (table, outside.merge(more))
            })
            .reduce(fresh, |(mut a, x), (b, y)| {
                cpu::merge_tables::<S::R, S::V>(&mut a, &b);
                (a, x.merge(y))
            });
        if self.checked {
            outside.check(<S::F as UserFn>::NAME, "key", keys)?;
        }
        sums.host_overwrite()?.copy_from_slice(&table);
        Ok(())
    }

    fn map_overlap_3d<F: crate::userfn::Window3Fn>(
        &self,
        plan: plan::MapOverlap3d<'_, F>,
    ) -> Result<()> {
        let (_, _, d2) = plan.dims;
        if sequential(plan.input.shape().len()) || d2 == 0 {
            return self.cpu().map_overlap_3d(plan);
        }
        let plan::MapOverlap3d {
            input,
            mut out,
            stencil,
            dims,
            uniforms,
        } = plan;
        let data = input.host()?;
        let _old = OldValues::of(self.checked, &mut out)?;
        let out = cpu::stencil_output(&mut out, stencil.edge)?;
        // Runs of whole rows `(i, j, ..)`: each thread reads its rows' windows in place.
        let band = chunk_len(out.len()).div_ceil(d2);
        out.par_chunks_mut(band * d2)
            .enumerate()
            .for_each(|(b, o)| {
                cpu::overlap_3d_rows::<F>(data, dims, o, b * band, &stencil, uniforms);
            });
        Ok(())
    }

    fn map_overlap_windows<F: crate::userfn::Overlap1Fn>(
        &self,
        mut plan: plan::MapOverlapWindows<'_, F>,
    ) -> Result<()> {
        let len = plan.out.shape().len();
        if sequential(len) {
            return self.cpu().map_overlap_windows(plan);
        }
        let (inputs, arrays) = cpu::windows_host(&plan)?;
        let dims = plan.out.shape().dims();
        let _old = OldValues::of(self.checked, &mut plan.out)?;
        let out = cpu::windows_output(&mut plan.out, plan.stencil.edge, &plan.cells)?;
        let chunk = chunk_len(len);
        let (stencil, cells, axis, uniforms) =
            (&plan.stencil, &plan.cells, plan.axis, plan.uniforms);
        out.par_chunks_mut(chunk).enumerate().for_each(|(c, o)| {
            cpu::windows_1d_range::<F>(
                &inputs,
                dims,
                axis,
                o,
                c * chunk,
                stencil,
                cells,
                arrays,
                uniforms,
            );
        });
        Ok(())
    }

    fn map_overlap_windows_2d<F: crate::userfn::Overlap2Fn>(
        &self,
        mut plan: plan::MapOverlapWindows<'_, F>,
    ) -> Result<()> {
        let (rows, cols) = plan.out.shape().dims();
        if sequential(rows * cols) || cols == 0 {
            return self.cpu().map_overlap_windows_2d(plan);
        }
        let (inputs, arrays) = cpu::windows_host(&plan)?;
        let _old = OldValues::of(self.checked, &mut plan.out)?;
        let out = cpu::windows_output(&mut plan.out, plan.stencil.edge, &plan.cells)?;
        let band = stencil_band(rows, cols);
        let (stencil, cells, uniforms) = (&plan.stencil, &plan.cells, plan.uniforms);
        out.par_chunks_mut(band * cols)
            .enumerate()
            .for_each(|(b, o)| {
                cpu::windows_2d_rows::<F>(
                    &inputs,
                    (rows, cols),
                    o,
                    b * band,
                    stencil,
                    cells,
                    arrays,
                    uniforms,
                );
            });
        Ok(())
    }

    fn map_reduce_axis<'a, S: MapReduceSig<'a>>(
        &self,
        plan: plan::MapReduceAxis<'_, 'a, S>,
    ) -> Result<()> {
        if plan.axis != Axis::Rows {
            return super::axis_materialised(self, plan);
        }
        let (rows, cols) = plan.map_reduce.shape.dims();
        // Whole rows per chunk, as many elements as a Map of the same function takes: each
        // row is mapped and folded in one pass (the row's values never leave registers).
        let Some(chunk) = map_split::<S::M>(rows * cols).filter(|_| cols > 0) else {
            return self.cpu().map_reduce_axis(plan);
        };
        // Fewer rows than threads (a 1 x N or 2 x 8M softmax) would map on only `rows`
        // threads: the map materialised first runs on every core (an expensive `exp`), and
        // each row is still folded in order by one thread, so the bits are the same.
        if rows < rayon::current_num_threads() {
            return super::axis_materialised(self, plan);
        }
        let per = chunk.div_ceil(cols);
        let plan::MapReduceAxis {
            map_reduce: p,
            mut out,
            ..
        } = plan;
        let arrays = cpu::container_refs::<S::M>(&p.arrays)?;
        let inputs = p.inputs.host()?;
        let _old = OldValues::of(self.checked, &mut out)?;
        let out = out.host_overwrite()?;
        out.par_chunks_mut(per).enumerate().for_each(|(c, o)| {
            let at = (c * per, self.base, cols);
            cpu::map_fold_rows::<S::M, S::R>(arrays, inputs, o, at, p.uniforms);
        });
        Ok(())
    }

    fn wavefront<S: WavefrontSig>(&self, plan: plan::Wavefront<'_, '_, S>) -> Result<()> {
        let dims = plan.m.shape().dims();
        // Fewer than two rows or columns: no cell to compute (and no tile to cut).
        if dims.0 < 2 || dims.1 < 2 {
            return Ok(());
        }
        // One tile, or too few cells to share: the sequential loop.
        if dims.0 <= wavefront::TILE + 1 && dims.1 <= wavefront::TILE + 1
            || sequential(dims.0 * dims.1)
        {
            return self.cpu().wavefront(plan);
        }
        let plan::Wavefront {
            arrays,
            mut m,
            uniforms,
        } = plan;
        let arrays = cpu::container_refs::<S::F>(&arrays)?;
        let _old = OldValues::of(self.checked, &mut m)?;
        wavefront::wavefront_tiles::<S::F, S::T>(arrays, m.host_mut()?, dims, uniforms);
        Ok(())
    }
}

/// Rows per band of a general 2D stencil: about 16 bands per thread (of [`MIN_LEAF`] to
/// [`MIN_CHUNK`] elements), which Rayon groups into tasks and splits further where a thread
/// runs out of work, as it splits a hand-written loop over rows. With [`chunk_len`]'s
/// four bands per thread an idle thread could take only a whole band, a quarter of a
/// thread's share, at the end of each call: the SkePU 3-form ports took 1.13-1.37x the
/// time of their hand-written Rayon versions (which split by rows) on 16 cores.
fn stencil_band(rows: usize, cols: usize) -> usize {
    let cols = cols.max(1);
    rows.div_ceil(16 * rayon::current_num_threads())
        .clamp(MIN_LEAF.div_ceil(cols), MIN_CHUNK.div_ceil(cols))
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;

    #[userfn]
    fn add(a: f32, b: f32) -> f32 {
        a + b
    }

    /// A column Reduce of `f32` (not associative) groups its sums as it always has: blocks of
    /// `fold_len` elements in whole rows, each folded from its first row down, combined in
    /// block order. A small matrix is folded on the calling thread (`SMALL_COLUMN_FOLD`),
    /// a larger one in stripes on the pool: the same bits either way, on any thread count.
    #[test]
    fn reduce_cols_small_and_large_group_the_sums_as_before() {
        for threads in [1, 2, 5] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("pool");
            pool.install(|| {
                for (rows, cols) in [
                    (512, 512),
                    (1024, 256),
                    (129, 1031),
                    (700, 513),
                    (300, 3),
                    // The `SMALL_COLUMN_FOLD` edge: exactly 2^18 elements, and just above.
                    (2048, 128),
                    (513, 512),
                    (1, 262_145),
                ] {
                    let data: Vec<f32> = (0..rows * cols)
                        .map(|k| ((k * 7919) % 1009) as f32 * 0.013 - 6.1)
                        .collect();
                    let m = Matrix::from_vec(rows, cols, data.clone()).expect("shape");
                    let mut got = Vector::zeroed(cols);
                    Reduce::new(add)
                        .backend(Backend::Rayon)
                        .run_cols(&m, &mut got)
                        .expect("rayon");
                    let n = rows * cols;
                    let want: Vec<f32> = if super::sequential(n) {
                        (0..cols)
                            .map(|j| (1..rows).fold(data[j], |s, i| s + data[i * cols + j]))
                            .collect()
                    } else {
                        let per = super::fold_len(n).div_ceil(cols);
                        let partial = |b: usize, j: usize| {
                            let last = rows.min((b + 1) * per);
                            (b * per + 1..last)
                                .fold(data[b * per * cols + j], |s, i| s + data[i * cols + j])
                        };
                        (0..cols)
                            .map(|j| {
                                (1..rows.div_ceil(per))
                                    .fold(partial(0, j), |s, b| s + partial(b, j))
                            })
                            .collect()
                    };
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(
                        bits(&got.to_vec()),
                        bits(&want),
                        "{rows}x{cols} on {threads}"
                    );
                }
            });
        }
    }
}
