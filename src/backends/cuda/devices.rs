//! Several CUDA devices in one call: the call is cut into one part per device slot (see
//! `context.rs` for slots and `SKEL_CUDA_DEVICES`), and each part is the single-device code
//! run on its slot ([`context::on_slot`]), which splits it again over that slot's streams
//! (MultiStream).
//!
//! - Where: the parts follow the operands. If the first operand's copies on the slots
//!   already tile the call in slot order (what an earlier call with the same split left),
//!   that tiling is kept, so a chain of split calls moves nothing between devices;
//!   otherwise the call is cut evenly (the slots are identical devices, or slots on one
//!   GPU), matrices in whole rows.
//! - Map / MapArray: each part reads and writes its own rows of the element-wise operands
//!   (matrix parts keep their columns, and the part's executor its first flat index as
//!   index base, so `#[index]` is global) and the whole of every container argument
//!   (uploaded once per slot, then kept there). The parts are only enqueued, one slot
//!   after the other, so the devices run together.
//! - Reduce / MapReduce: each slot folds its part to one partial, on its own thread (the
//!   partials are waited for); the host folds `start` and the partials in part order, as the
//!   single-device code folds its chunks.
//! - Scan: the totals of every part but the last are reduced first (at once), folded on the
//!   host into each part's carry-in, and each part scans from its carry (a read pass more
//!   than on one device).
//! - MapOverlap, MapPairs, MapPairsReduce, row reductions: each slot computes its band of
//!   output lines ([`by_lines`]) from the whole input; a halo valid only on a neighbour
//!   slot is copied device to device. Column reductions: a partial row per slot, folded on
//!   the host.
//! - Filter: the parts run in turn (each needs the previous parts' counts), each writing
//!   where the previous ones stopped.
//!
//! A range a part needs that is valid only on another slot is copied device to device
//! (`memory/staging.rs`, `peer_copies`: `cuMemcpyPeerAsync`, direct where peer access is enabled),
//! not through the host.

use std::ops::Range;

use super::context::{self, on_slot};
use super::{reduce, scan, Cuda};
use crate::backends::cpu::combine;
use crate::backends::{BinaryFn, PredicateFn};
use crate::check::host_call;
use crate::containers::Arg;
use crate::containers::{ArgMut, Location, Output, Shape, State, Vector};
use crate::plan::{ArgTuple, ArgVisitor, Axis, ScanMode};
use crate::skeletons::Devices;
use crate::{DeviceType, Error, Result};

/// One device slot's part of a call: elements `range` of its operands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Part {
    pub(crate) slot: usize,
    pub(crate) range: Range<usize>,
}

impl Part {
    /// The part's rows of an operand of `shape` (its elements, for a vector): parts of a
    /// matrix are whole rows.
    pub(crate) fn rows(&self, shape: Shape) -> Range<usize> {
        match shape {
            Shape::Vector(_) => self.range.clone(),
            // A tensor splits into whole rows of `d2`, like a matrix.
            Shape::Matrix { cols, .. } | Shape::Tensor3 { d2: cols, .. } => {
                let cols = cols.max(1);
                self.range.start / cols..self.range.end / cols
            }
        }
    }
}

/// How many device slots a call with `.devices(devices)` uses: without it, every slot
/// `SKEL_CUDA_DEVICES` names if set, else one (and no device is probed for that).
pub(crate) fn count(devices: Option<Devices>) -> Result<usize> {
    match devices {
        None if context::devices_env().is_none() => Ok(1),
        None | Some(Devices::All) => context::slot_count(),
        Some(Devices::Count(0)) => Err(Error::InvalidArgument(
            ".devices(0): a call needs at least one device".into(),
        )),
        Some(Devices::Count(n)) => {
            let have = context::slot_count()?;
            if n > have {
                return Err(Error::BackendUnavailable {
                    backend: crate::Backend::Cuda,
                    reason: format!(
                        ".devices({n}): only {have} CUDA device slot(s) here (ordinals {:?}); \
                         name the devices with SKEL_CUDA_DEVICES=0,1 (an ordinal named twice, \
                         as in SKEL_CUDA_DEVICES=0,0, makes two slots on one GPU for testing), \
                         or ask for .devices(Devices::All)",
                        context::slot_ordinals()
                    ),
                });
            }
            Ok(n)
        }
    }
}

/// Rows of `unit` elements, as even as can be, over `k` slots; empty parts are left out.
fn even(n: usize, unit: usize, k: usize) -> Vec<Part> {
    let unit = unit.max(1);
    let rows = n.div_ceil(unit);
    (0..k)
        .map(|s| Part {
            slot: s,
            range: (rows * s / k * unit).min(n)..(rows * (s + 1) / k * unit).min(n),
        })
        .filter(|p| !p.range.is_empty())
        .collect()
}

/// The parts a container's copies on slots `0..k` make of elements `range` (relative to
/// `range.start`), if they tile it in slot order at multiples of `unit`.
fn resident(st: &State, range: Range<usize>, unit: usize, k: usize) -> Option<Vec<Part>> {
    let mut parts = Vec::new();
    let mut at = range.start;
    for slot in 0..k {
        let on = st
            .coherence
            .valid(Location::Device(slot as u32))
            .intersect_range(range.clone());
        match on.as_slice() {
            [] => {}
            [r] if r.start == at && (r.start - range.start) % unit.max(1) == 0 => {
                parts.push(Part {
                    slot,
                    range: r.start - range.start..r.end - range.start,
                });
                at = r.end;
            }
            _ => return None,
        }
    }
    (at == range.end && parts.len() > 1).then_some(parts)
}

/// Finds the tiling of the first operand a visitor is shown.
struct FirstResident {
    unit: usize,
    k: usize,
    seen: bool,
    parts: Option<Vec<Part>>,
}

impl ArgVisitor for FirstResident {
    fn visit<T: DeviceType>(&mut self, arg: Arg<'_, T>) -> Result<()> {
        if !std::mem::replace(&mut self.seen, true) {
            self.parts = resident(&arg.lock(), arg.range(), self.unit, self.k);
        }
        Ok(())
    }
}

/// The parts of a call over `shape` on `k` slots, placed by where the first operand of
/// `first` is valid now (see the module docs).
pub(crate) fn parts<'a, I: ArgTuple<'a>>(shape: Shape, k: usize, first: &I) -> Result<Vec<Part>> {
    let unit = match shape {
        Shape::Vector(_) => 1,
        Shape::Matrix { cols, .. } | Shape::Tensor3 { d2: cols, .. } => cols,
    };
    let mut find = FirstResident {
        unit,
        k,
        seen: false,
        parts: None,
    };
    first.visit(&mut find)?;
    Ok(find.parts.unwrap_or_else(|| even(shape.len(), unit, k)))
}

/// Runs `f` on each part, one after the other on the calling thread, each on its slot: for
/// calls that only enqueue their work (so the devices still run at once). A `checked` call
/// runs every part as a trial first (`fault::trial`: results discarded, nothing copied
/// back), so that a fault of any part is the call's error before any part keeps its results
/// (each part settles its own outputs); then for real.
pub(crate) fn in_turn(
    checked: bool,
    parts: &[Part],
    mut f: impl FnMut(&Part) -> Result<()>,
) -> Result<()> {
    if parts.len() > 1 {
        super::graph::refuse("a call runs on several device slots");
    }
    let mut all = || parts.iter().try_for_each(|p| on_slot(p.slot, || f(p)));
    if checked && parts.len() > 1 {
        super::fault::trial(&mut all)?;
    }
    all()
}

/// Runs `f` on each part at once, one thread per part (the first on the calling thread),
/// each on its slot: for calls that wait for their result. Results in part order; the first
/// error in part order wins.
pub(crate) fn at_once<R: Send>(
    parts: &[Part],
    f: impl Fn(&Part) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    if parts.len() > 1 {
        // The other parts' launches are made on other threads, which no recording logs.
        super::graph::refuse("a call runs on several device slots at once");
    }
    let f = &f;
    std::thread::scope(|s| {
        let rest: Vec<_> = parts
            .iter()
            .skip(1)
            .map(|p| s.spawn(move || on_slot(p.slot, || f(p))))
            .collect();
        let first = parts.first().map(|p| on_slot(p.slot, || f(p)));
        let mut out = Vec::with_capacity(parts.len());
        out.extend(first);
        for h in rest {
            out.push(h.join().map_err(|_| {
                Error::Driver("a device part of a split CUDA call panicked".into())
            })?);
        }
        out.into_iter().collect()
    })
}

/// The parts' partials folded in part order (`None` if every part was empty): `start` is
/// folded with the total afterwards, as one device folds its chunks' totals before it, so a
/// fault of the function names the same operands on one device and on several.
pub(crate) fn fold<F: BinaryFn<T>, T: DeviceType>(partials: Vec<Option<T>>) -> Result<Option<T>> {
    host_call(F::NAME, || {
        partials.into_iter().fold(None, |acc, p| match acc {
            Some(a) => Some(combine::<F, T>(a, p)),
            None => p,
        })
    })
}

/// Scan split over device slots: the totals of every part but the last are reduced on
/// their slots at once (a read pass more than on one device), folded on the host into each
/// part's carry-in, then every part scans from its carry (`scan::run`).
pub(crate) fn scan<F: BinaryFn<T>, T: DeviceType>(
    one: &Cuda,
    parts: &[Part],
    input: Arg<'_, T>,
    mut out: ArgMut<'_, T>,
    (mode, start): (ScanMode, T),
) -> Result<()> {
    let heads = &parts[..parts.len().saturating_sub(1)];
    let totals = at_once(heads, |p| {
        reduce::partial::<F, T>(one, input.sub(p.range.clone()), None)
    })?;
    let carries = host_call(F::NAME, || {
        let mut acc = (mode == ScanMode::Exclusive).then_some(start);
        let mut carries = vec![None];
        for total in totals {
            acc = match acc {
                Some(a) => Some(combine::<F, T>(a, total)),
                None => total,
            };
            carries.push(acc);
        }
        carries
    })?;
    // By position, not consumed: a checked call runs the parts twice (`in_turn`).
    in_turn(one.checked, parts, |p| {
        let r = p.range.clone();
        let carry = parts.iter().position(|q| q == p).and_then(|i| carries[i]);
        scan::run::<F, T>(one, input.sub(r.clone()), out.part(r), (mode, start), carry)
    })
}

/// Runs `band` over lines `0..lines` (of `unit` elements each) of a call writing `out`, or,
/// split over device slots, over each slot's lines on that slot (one after the other: the
/// bands only enqueue their work). `first` places the parts (see [`parts`]).
pub(crate) fn by_lines<'a, I: ArgTuple<'a>, T: DeviceType>(
    exec: &Cuda,
    (lines, unit): (usize, usize),
    first: &I,
    mut out: ArgMut<'_, T>,
    mut band: impl FnMut(&Cuda, ArgMut<'_, T>, Range<usize>) -> Result<()>,
) -> Result<()> {
    let shape = Shape::Matrix {
        rows: lines,
        cols: unit,
    };
    let Some(parts) = exec.device_parts(shape, first)? else {
        return band(exec, out, 0..lines);
    };
    let (one, len, unit) = (exec.on_one(), out.shape().len(), unit.max(1));
    in_turn(exec.checked, &parts, |p| {
        band(
            &one,
            out.part(0..len),
            p.range.start / unit..p.range.end / unit,
        )
    })
}

/// Filter split over device slots: each part keeps its elements on its slot, written where
/// the previous parts' kept elements end. A part's count is known only when its kernels
/// are done, so the parts run one after the other (the devices do not overlap here). A
/// checked call filters into a scratch vector first and copies the kept elements to `out`
/// only when no part faulted: a fault leaves `out` as it was, as on one device.
pub(crate) fn filter<F: PredicateFn<T>, T: DeviceType>(
    exec: &Cuda,
    parts: &[Part],
    input: Arg<'_, T>,
    mut out: ArgMut<'_, T>,
    uniforms: &F::Uniforms,
) -> Result<usize> {
    if exec.checked {
        let mut scratch = scratch_vector::<T>(input.shape().len());
        let kept = filter_parts::<F, T>(exec, parts, input, scratch.arg_mut(), uniforms)?;
        let kept_elems = &scratch.try_as_slice()?[..kept];
        out.head(kept).host_overwrite()?.copy_from_slice(kept_elems);
        return Ok(kept);
    }
    filter_parts::<F, T>(exec, parts, input, out, uniforms)
}

/// The parts of a split Filter, each written after the previous ones' kept elements.
fn filter_parts<F: PredicateFn<T>, T: DeviceType>(
    exec: &Cuda,
    parts: &[Part],
    input: Arg<'_, T>,
    mut out: ArgMut<'_, T>,
    uniforms: &F::Uniforms,
) -> Result<usize> {
    let mut kept = 0;
    in_turn(false, parts, |p| {
        let r = p.range.clone();
        let dst = out.part(kept..kept + r.len());
        kept += super::filter::run::<F, T>(&exec.part_at(p), input.sub(r), dst, uniforms)?;
        Ok(())
    })?;
    Ok(kept)
}

/// A host-side vector of `n` zero-bit values, for results a split call combines.
fn scratch_vector<T: DeviceType>(n: usize) -> Vector<T> {
    let zero = super::memory::from_bytes::<T>(&vec![0u8; std::mem::size_of::<T>()]);
    Vector::filled(n, zero)
}

/// Column reduction split over device slots: each slot reduces the columns of its rows to
/// a partial row of its own (at once: the partials are only enqueued), and the host folds
/// the partial rows in part order into `out`.
pub(crate) fn reduce_cols<F: BinaryFn<T>, T: DeviceType>(
    exec: &Cuda,
    parts: &[Part],
    input: Arg<'_, T>,
    mut out: ArgMut<'_, T>,
) -> Result<()> {
    let (shape, one) = (input.shape(), exec.on_one());
    if parts.is_empty() {
        // No rows: the results keep their values, as on one device.
        return Ok(());
    }
    let mut partials: Vec<Vector<T>> = parts
        .iter()
        .map(|_| scratch_vector::<T>(shape.cols()))
        .collect();
    let mut each = partials.iter_mut();
    in_turn(false, parts, |p| {
        let partial = each
            .next()
            .ok_or_else(|| Error::Driver("internal: a partial row per part".into()))?;
        let rows = input.rows(p.rows(shape));
        reduce::run_axis::<F, T>(&one, rows, partial.arg_mut(), Axis::Cols)
    })?;
    let rows = partials
        .iter()
        .map(Vector::try_as_slice)
        .collect::<Result<Vec<_>>>()?;
    let host = out.host_overwrite()?;
    host_call(F::NAME, || {
        for (c, o) in host.iter_mut().enumerate() {
            *o = rows[1..]
                .iter()
                .fold(rows[0][c], |acc, r| combine::<F, T>(acc, Some(r[c])));
        }
    })
}

impl Cuda {
    /// The parts of a call over `shape` whose first operands are `first`, if the call is
    /// split over several device slots; `None` to run it on the current slot alone.
    pub(crate) fn device_parts<'a, I: ArgTuple<'a>>(
        &self,
        shape: Shape,
        first: &I,
    ) -> Result<Option<Vec<Part>>> {
        let k = count(self.devices)?;
        if k <= 1 {
            return Ok(None);
        }
        Ok(Some(parts(shape, k, first)?))
    }

    /// The executor of one part: the same call on the current slot alone.
    pub(crate) fn on_one(&self) -> Cuda {
        Cuda {
            devices: Some(Devices::Count(1)),
            ..*self
        }
    }

    /// The executor of part `p` of an element-wise call: on its slot alone, its `#[index]`
    /// counting from the part's first element.
    pub(crate) fn part_at(&self, p: &Part) -> Cuda {
        Cuda {
            index_base: self.index_base + p.range.start,
            ..self.on_one()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_parts_cover_in_whole_rows() {
        for n in [0usize, 1, 2, 3, 7, 64, 1001] {
            for unit in [1usize, 3, 8] {
                let n = n * unit;
                for k in 1..=5 {
                    let parts = even(n, unit, k);
                    let mut at = 0;
                    for p in &parts {
                        assert_eq!(p.range.start, at);
                        assert!(!p.range.is_empty());
                        assert_eq!(p.range.start % unit, 0);
                        at = p.range.end;
                    }
                    assert_eq!(at, n);
                    assert!(parts.len() <= k);
                }
            }
        }
    }
}
