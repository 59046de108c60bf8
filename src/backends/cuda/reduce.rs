//! Reduce on CUDA: one pass over each chunk with per-block partials folded by the last
//! block on the device (`cuda/reduce.cu`), the chunks' results folded in order by one final
//! kernel; and row-wise / column-wise reductions of a matrix.

use std::ops::Range;
use std::sync::Arc;

use super::context::{ctx, Ctx, Lane, STREAMS};
use super::fault::{self, Record};
use super::memory::{self, from_bytes, CuEvent, ResultLease, Scratch};
use super::module_cache::{launch, module, resident_blocks, Dims, KernelArgs, Module};
use super::multistream::{self, Split, Work};
use super::trace::Tag;
use super::{assemble, cty, devices, grid_for, Cuda};
use crate::backends::jit::ProgKey;
use crate::backends::BinaryFn;
use crate::codegen::ir::FnDef;
use crate::codegen::{device_source_checked, Dialect};
use crate::containers::{Arg, ArgMut};
use crate::plan::Axis;
use crate::{DeviceType, Error, Result};

pub(crate) const TEMPLATE: &str = include_str!("../../../cuda/reduce.cu");

/// Threads per block of the reduce kernels (`SKEL_BLOCK` in the template).
const BLOCK: usize = 256;

/// Values per lane and tile, and whether they are one 16-byte load (plain Reduce only).
pub(crate) fn items<T>(vector: bool) -> (usize, bool) {
    let size = std::mem::size_of::<T>();
    if vector && size <= 16 && 16 % size == 0 {
        (16 / size, true)
    } else if size <= 16 {
        (4, false)
    } else {
        (1, false)
    }
}

/// The kernel source for reducing `T`s with `F`, the checked variant with `checked`.
pub(crate) fn source<F: BinaryFn<T>, T: DeviceType>(checked: bool) -> Result<String> {
    let (items, vec) = items::<T>(true);
    let user = device_source_checked(&[F::definition()], Dialect::Cuda, checked)?;
    let t = cty::<T>();
    let mut defines = vec![
        ("SKEL_T", t.clone()),
        ("SKEL_OP(a, b)", format!("{}(SKEL_FARG a, b)", user.entry())),
        ("SKEL_ELEM(i)", "in0[i]".to_string()),
        ("SKEL_PARAMS", format!(", const {t}* __restrict__ in0")),
        ("SKEL_ITEMS", items.to_string()),
        ("SKEL_VEC", u8::from(vec).to_string()),
    ];
    defines.extend(fault::defines(checked));
    Ok(assemble(&user.source, &defines, TEMPLATE))
}

pub(crate) fn reduce_module<F: BinaryFn<T>, T: DeviceType>(
    ctx: &Ctx,
    checked: bool,
) -> Result<Arc<Module>> {
    let key = if checked { "reduce_checked" } else { "reduce" };
    module(
        ctx,
        ProgKey::of::<(F, T)>(key, ctx.ordinal),
        "reduce",
        &[
            "skel_reduce",
            "skel_reduce_parts",
            "skel_reduce_rows",
            "skel_reduce_cols",
            "skel_reduce_into",
        ],
        || source::<F, T>(checked),
    )
}

/// Runs `skel_reduce` of module `m` once per chunk of `split` (chunk `c` on its stream,
/// with the kernel parameters after the scratch pointers from `params(c, args)`), then
/// folds the chunks' results in order on the device (`skel_reduce_parts`, on the first
/// chunk's stream) and reads the one result back. `after(c, event)` learns the event after
/// chunk `c`'s kernel when there are several chunks (one chunk needs no event: the call
/// waits for its result, so its reads are over before it returns). `None` if every chunk
/// is empty.
///
/// Per-call cost: the scratch and the result's host words come from a pool
/// ([`ResultLease`]) and are left as the kernels found them (tickets back at zero), the
/// result is written by the last kernel straight into mapped host memory, so a one-chunk
/// call is one launch and one wait.
///
/// A checked module (`fault`: its record, after every kernel's parameters, and the user
/// functions of its program) reports a fault of any kernel instead of the value. The
/// element at position `p` of the call has flat index `index_base + p` (rows of `cols`).
///
/// With `into` (`run_into`: a one-element output and the start value) nothing comes back:
/// `skel_reduce_into` folds the start value with the result and writes it to the output's
/// device copy, which becomes the valid one; the scratch is a stream-ordered allocation
/// freed after the kernels, and the call returns without waiting (`Ok(None)`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn reduce_chunks<T: DeviceType>(
    ctx: &Ctx,
    m: &Module,
    split: &Split,
    (cols, index_base): (usize, usize),
    items: usize,
    mut params: impl FnMut(usize, &mut KernelArgs),
    mut after: impl FnMut(usize, &Arc<CuEvent>) -> Result<()>,
    fault: (Option<&Record>, &[&'static FnDef]),
    into: Option<(&mut ArgMut<'_, T>, T)>,
) -> Result<Option<T>> {
    let w = std::mem::size_of::<T>().div_ceil(4);
    // 8 warps x one tile of 32 * items.
    let unit = BLOCK * items;
    // Per chunk: parts (each folded into a partial) and positions per part; every chunk's
    // scratch has `stride` words. Four parts per multiprocessor up to 16 units of positions
    // a part, more parts above (up to 16 per multiprocessor): the grid is sized to the
    // blocks the device holds at once and walks the parts, so long inputs keep every
    // multiprocessor busy whatever the kernel's registers, and the grouping (the bits)
    // depends on the length alone.
    let sms = ctx.sms as usize;
    let shapes: Vec<(usize, usize)> = split
        .chunks
        .iter()
        .map(|part| {
            let n = part.len().max(1);
            let parts = n
                .div_ceil(unit)
                .min(n.div_ceil(16 * unit).clamp(4 * sms, 16 * sms));
            let per_part = n.div_ceil(parts).div_ceil(unit) * unit;
            (n.div_ceil(per_part), per_part)
        })
        .collect();
    let stride = shapes
        .iter()
        .map(|&(b, _)| 2 + w + b + b * w)
        .max()
        .unwrap_or(0);
    let k = split.len();
    let lead = split.lanes[0];
    // Words: a ticket per stream of the pool (at the same place in every call, so they
    // are zero whatever the previous call's layout), then the chunks' scratch (then, for
    // `into`, the result).
    let words = STREAMS + k * stride;
    let (lease, mut own) = match into {
        None => (Some(ResultLease::take(words * 4, (1 + w) * 4)?), None),
        Some(_) => {
            let own = Scratch::new(lead, (words + 1 + w) * 4)?;
            own.zero(0, STREAMS * 4)?;
            own.share(&split.lanes)?;
            (None, Some(own))
        }
    };
    let (tickets, result) = match (&lease, &own) {
        (Some(lease), _) => (lease.scratch()?, lease.result()?),
        (None, Some(own)) => (own.ptr, own.ptr + (words * 4) as u64),
        (None, None) => return Err(Error::Driver("internal: no reduce scratch".into())),
    };
    let scratch = |c: usize| tickets + ((STREAMS + c * stride) * 4) as u64;
    let func = m.func("skel_reduce")?;
    let resident = resident_blocks(func, BLOCK as u32, 0)? as usize;
    for ((c, part, lane, tag), &(parts, per_part)) in split.parts().zip(&shapes) {
        // As many blocks as the device holds, each walking the same number of parts (a
        // block left with one part fewer idles its multiprocessor's share at the end).
        let cap = resident.saturating_mul(sms).max(1);
        let blocks = parts.div_ceil(parts.div_ceil(cap));
        let mut args = KernelArgs::default();
        args.u64(part.len() as u64)
            .u64(per_part as u64)
            .u64(cols as u64)
            .u64((index_base + part.start) as u64)
            .ptr(tickets + (c * 4) as u64)
            .ptr(scratch(c))
            // Several chunks: each result goes to its scratch's result words.
            .ptr(if k == 1 { result } else { scratch(c) + 4 });
        params(c, &mut args);
        if let Some(rec) = fault.0 {
            args.ptr(rec.ptr());
        }
        launch(
            ctx,
            lane,
            tag,
            func,
            Dims::line(blocks as u32, BLOCK as u32, 0),
            &mut args,
        )?;
        if k > 1 {
            let ev = CuEvent::record(lane)?;
            after(c, &ev)?;
            ev.order(lead)?;
        }
    }
    if k > 1 {
        let mut args = KernelArgs::default();
        args.ptr(scratch(0))
            .u64(k as u64)
            .u64(stride as u64)
            .ptr(result);
        if let Some(rec) = fault.0 {
            args.ptr(rec.ptr());
        }
        let func = m.func("skel_reduce_parts")?;
        launch(ctx, lead, split.tag, func, Dims::line(1, 32, 0), &mut args)?;
    }
    if let (Some((out, start)), Some(own)) = (into, own.as_mut()) {
        let dst = memory::output_part(ctx, out, 0..1, false, lead, split.tag)?;
        let mut written = fault::Written::new(ctx, vec![&*out]);
        let mut args = KernelArgs::default();
        args.ptr(result).value(&start).ptr(dst);
        if let Some(rec) = fault.0 {
            args.ptr(rec.ptr());
        }
        let func = m.func("skel_reduce_into")?;
        launch(ctx, lead, split.tag, func, Dims::line(1, 32, 0), &mut args)?;
        let ev = CuEvent::record(lead)?;
        if k == 1 {
            // Nobody waits for this call: its one chunk's reads end with the event.
            after(0, &ev)?;
        }
        own.used_until(&ev);
        written.push(0..1, ev);
        written.settle(fault.0, fault.1)?;
        return Ok(None);
    }
    let mut bytes = vec![0u8; (1 + w) * 4];
    let lease = lease.ok_or_else(|| Error::Driver("internal: reduce result buffers".into()))?;
    lease.finish(lead, &mut bytes)?;
    // Every chunk's kernel was ordered before the last one, on `lead`, the record's stream.
    if let Some(rec) = fault.0 {
        rec.check(&[], fault.1)?;
    }
    let has = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) != 0;
    Ok(has.then(|| from_bytes::<T>(&bytes[4..])))
}

/// Every element of `input` folded (`None` when it is empty), which the caller folds `start`
/// with (on several device slots: each slot's part, `devices.rs`); with `into`, written
/// with the start value folded in to the one-element output on the device (`None`).
pub(crate) fn partial<F: BinaryFn<T>, T: DeviceType>(
    exec: &Cuda,
    input: Arg<'_, T>,
    into: Option<(&mut ArgMut<'_, T>, T)>,
) -> Result<Option<T>> {
    let ctx = ctx()?;
    let n = input.shape().len();
    if n == 0 {
        return start_into(into);
    }
    let m = reduce_module::<F, T>(ctx, exec.checked)?;
    let (items, _) = items::<T>(true);
    let work = Work {
        up: memory::missing_bytes(ctx, &input, 0..n),
        kernel: n * std::mem::size_of::<T>(),
        down: 0,
        follows: memory::busy_lane(ctx, &input.lock()),
    };
    // Chunks of whole vector loads (16 bytes) keep every chunk's pointer aligned.
    let split = multistream::split(
        ctx,
        "reduce",
        n,
        items,
        multistream::forced(exec.streams)?,
        work,
    )?;
    let mut srcs = Vec::with_capacity(split.len());
    for (_, part, lane, tag) in split.parts() {
        srcs.push(memory::input_part(ctx, &input, part, lane, tag)?);
    }
    let rec = Record::new(exec.checked, &split.lanes)?;
    reduce_chunks::<T>(
        ctx,
        &m,
        &split,
        (input.shape().cols(), 0),
        items,
        |c, a| {
            a.ptr(srcs[c]);
        },
        |c, ev| memory::read_by(ctx, &input, split.chunks[c].clone(), ev),
        (rec.as_ref(), &[F::definition()]),
        into,
    )
}

/// An empty fold's result: nothing to return, or the start value written to the
/// one-element output (on the host: there is no kernel to write it).
pub(crate) fn start_into<T: DeviceType>(
    into: Option<(&mut ArgMut<'_, T>, T)>,
) -> Result<Option<T>> {
    if let Some((out, start)) = into {
        out.host_overwrite()?[0] = start;
    }
    Ok(None)
}

/// One result per row (`Axis::Rows`) or per column (`Axis::Cols`) of a matrix. Rows are
/// split into bands over device slots and streams; a column reduction reads every row for
/// each result, so it runs as one chunk per slot (over the slot's rows).
pub(crate) fn run_axis<F: BinaryFn<T>, T: DeviceType>(
    exec: &Cuda,
    input: Arg<'_, T>,
    out: ArgMut<'_, T>,
    axis: Axis,
) -> Result<()> {
    let (rows, cols) = input.shape().dims();
    let plain = |exec: &Cuda, out: ArgMut<'_, T>, band: Range<usize>| {
        let up = memory::missing_bytes(ctx()?, &input, 0..rows * cols);
        axis_band::<T, _>(
            exec,
            (rows, cols),
            (
                &|ctx| reduce_module::<F, T>(ctx, exec.checked),
                &[F::definition()],
                up,
            ),
            (out, axis, band),
            |ctx, elems, lane, tag| memory::input_part(ctx, &input, elems, lane, tag),
            |src, a| {
                a.ptr(*src);
            },
            |ctx, elems, _, ev| memory::read_by(ctx, &input, elems, ev),
        )
    };
    if axis != Axis::Rows {
        return match exec.device_parts(input.shape(), &(input,))? {
            Some(parts) => devices::reduce_cols::<F, T>(exec, &parts, input, out),
            None => plain(exec, out, 0..1),
        };
    }
    devices::by_lines(exec, (rows, cols), &(input,), out, plain)
}

/// The module of an axis reduction on a device, the user functions it holds, and the
/// bytes its operands still need uploaded.
pub(crate) type AxisModule<'m> = (
    &'m dyn Fn(&Ctx) -> Result<Arc<Module>>,
    &'m [&'static FnDef],
    usize,
);

/// Rows `band` of a row reduction (one slot's part), or the one band of a column one, of
/// a `rows x cols` matrix read through the module's `SKEL_ELEM`: `stage` makes elements
/// `elems` (flat, of the whole matrix) readable on a lane and returns what `push` passes
/// to the kernel after its output; `read` records that the work before an event read them.
#[allow(clippy::too_many_arguments)]
pub(crate) fn axis_band<T: DeviceType, X>(
    exec: &Cuda,
    (rows, cols): (usize, usize),
    (module, defs, up): AxisModule<'_>,
    (out, axis, band): (ArgMut<'_, T>, Axis, Range<usize>),
    mut stage: impl FnMut(&Ctx, Range<usize>, Lane, Tag) -> Result<X>,
    mut push: impl FnMut(&X, &mut KernelArgs),
    mut read: impl FnMut(&Ctx, Range<usize>, (Lane, Tag), &Arc<CuEvent>) -> Result<()>,
) -> Result<()> {
    let ctx = ctx()?;
    if rows == 0 || cols == 0 || band.is_empty() {
        return Ok(());
    }
    let kernel = match axis {
        Axis::Rows => "skel_reduce_rows",
        Axis::Cols => "skel_reduce_cols",
        Axis::Flat => {
            return Err(Error::InvalidArgument(
                "internal: a flat reduction is not an axis reduction".into(),
            ))
        }
    };
    let m = module(ctx)?;
    let eager = memory::eager_download(&out, exec.download);
    let size = std::mem::size_of::<T>();
    let out_bytes = out.shape().len() * size;
    let work = Work {
        up,
        kernel: rows * cols * size + out_bytes,
        down: if eager { out_bytes } else { 0 },
        follows: memory::busy_lane(ctx, &out.lock()),
    };
    let (lines, forced) = match axis {
        Axis::Rows => (band.len(), multistream::forced(exec.streams)?),
        _ => (1, Some(1)),
    };
    let mut split = multistream::split(ctx, "reduce", lines, 1, forced, work)?;
    split.shift(band.start);
    // A chunk of `lines` rows (or the one chunk of all columns): its input elements, its
    // outputs.
    let parts = |part: &Range<usize>| match axis {
        Axis::Rows => (part.start * cols..part.end * cols, part.clone()),
        _ => (0..rows * cols, 0..cols),
    };
    let mut srcs = Vec::with_capacity(split.len());
    for (_, part, lane, tag) in split.parts() {
        srcs.push(stage(ctx, parts(&part).0, lane, tag)?);
    }
    let rec = Record::new(exec.checked, &split.lanes)?;
    let mut written = fault::Written::new(ctx, vec![&out]);
    for ((_, part, lane, tag), src) in split.parts().zip(srcs) {
        let (elems, outs) = parts(&part);
        let band_rows = elems.len() / cols;
        let dst = memory::output_part(ctx, &out, outs.clone(), false, lane, tag)?;
        let mut args = KernelArgs::default();
        args.u64(band_rows as u64)
            .u64(cols as u64)
            .u64((exec.index_base + elems.start) as u64)
            .ptr(dst);
        push(&src, &mut args);
        if let Some(rec) = &rec {
            args.ptr(rec.ptr());
        }
        let grid = match axis {
            Axis::Rows => grid_for(ctx, band_rows, BLOCK / 32, 8),
            _ => grid_for(ctx, cols, BLOCK, 8),
        };
        let func = m.func(kernel)?;
        launch(
            ctx,
            lane,
            tag,
            func,
            Dims::line(grid, BLOCK as u32, 0),
            &mut args,
        )?;
        let ev = CuEvent::record(lane)?;
        read(ctx, elems, (lane, tag), &ev)?;
        written.push(outs, ev);
    }
    written.settle(rec.as_ref(), defs)?;
    if eager {
        split.download(ctx, &out, |part| parts(&part).1)?;
    }
    Ok(())
}
