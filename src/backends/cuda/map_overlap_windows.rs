//! MapOverlap of the general form on CUDA (`#[index]`, several windowed inputs, container
//! arguments, update modes): the tile kernel of [`crate::backends::overlap_windows`]
//! (`cuda/map_overlap_windows.cu`), each windowed input's tile in shared memory.
//!
//! The same shape of call as the one-window stencil (`map_overlap.rs`): split over device
//! slots and MultiStream chunks into bands of whole rows, each band uploading its rows of
//! every windowed input plus the halo rows its outputs read (wrapped around for a cyclic
//! edge); the container arguments are made readable whole on every stream.

use std::ops::Range;

use super::context::ctx;
use super::fault::{self, Record};
use super::map_overlap::halo;
use super::memory::{self, CuEvent};
use super::module_cache::{launch, module, Dims, KernelArgs};
use super::multistream::{self, Work};
use super::{arrays, assemble, cty, devices, Cuda};
use crate::backends::jit::{interned, ProgKey};
use crate::backends::overlap_windows::{self as ow, Geometry, Job};
use crate::codegen::{device_source_checked, Dialect};
use crate::containers::{Arg, ArgMut};
use crate::plan::{ArgTuple, Edge};
use crate::userfn::OverlapFn;
use crate::Result;

/// Bytes of static shared memory a block may declare (the tiles are static arrays).
const STATIC_SHARED: usize = 48 * 1024;

/// Threads a block may have.
const MAX_THREADS: usize = 1024;

pub(super) fn source<F: OverlapFn>(job: &Job, g: &Geometry, checked: bool) -> Result<String> {
    let def = F::definition();
    let user = device_source_checked(&[def], Dialect::Cuda, checked)?;
    let types = (cty::<F::Elem>(), cty::<F::Out>());
    let mut defines = ow::defines(def, user.entry(), types, (job, g), Dialect::Cuda, checked)?;
    defines.extend(fault::defines(checked));
    Ok(assemble(&user.source, &defines, ow::TEMPLATE))
}

/// Runs `job` of window function `F` over `inputs` into `out`.
pub(crate) fn run<'c, F: OverlapFn>(
    exec: &Cuda,
    job: Job,
    (inputs, arrays): (&[Arg<'_, F::Elem>], &impl ArgTuple<'c>),
    out: ArgMut<'_, F::Out>,
    pad: F::Elem,
    uniforms: &F::Uniforms,
) -> Result<()> {
    if job.rows == 0 || job.cols == 0 {
        return Ok(());
    }
    let ops = (inputs, arrays);
    // A vector is one row: nothing to split into bands of rows.
    if job.rows == 1 {
        return rows_band::<F>(exec, job, ops, out, (pad, uniforms), 0..1);
    }
    devices::by_lines(
        exec,
        (job.rows, job.cols),
        &(inputs[0],),
        out,
        |exec, out, band| rows_band::<F>(exec, job, ops, out, (pad, uniforms), band),
    )
}

/// The stencil for rows `band` of the output, split into bands over streams.
fn rows_band<'c, F: OverlapFn>(
    exec: &Cuda,
    job: Job,
    (inputs, arrays): (&[Arg<'_, F::Elem>], &impl ArgTuple<'c>),
    out: ArgMut<'_, F::Out>,
    (pad, uniforms): (F::Elem, &F::Uniforms),
    band: Range<usize>,
) -> Result<()> {
    let ctx = ctx()?;
    let elem = std::mem::size_of::<F::Elem>();
    let g = Geometry::choose(&job, elem, MAX_THREADS, STATIC_SHARED)?;
    let checked = exec.checked;
    let m = module(
        ctx,
        ProgKey::of::<F>(interned(g.variant(&job, checked)), ctx.ordinal),
        "overlap_windows",
        &[ow::KERNEL],
        || source::<F>(&job, &g, checked),
    )?;
    let (rows, cols) = (job.rows, job.cols);
    let eager = memory::eager_download(&out, exec.download);
    let n = band.len() * cols;
    let out_bytes = n * std::mem::size_of::<F::Out>();
    let elems = band.start * cols..band.end * cols;
    let up = inputs
        .iter()
        .map(|input| memory::missing_bytes(ctx, input, elems.clone()))
        .sum();
    let work = Work {
        up,
        kernel: n * elem * inputs.len() + out_bytes,
        down: if eager { out_bytes } else { 0 },
        follows: memory::busy_lane(ctx, &out.lock()),
    };
    let mut split = multistream::split(
        ctx,
        "overlap_windows",
        band.len(),
        1,
        multistream::forced(exec.streams)?,
        work,
    )?;
    split.shift(band.start);
    let (rr, cyclic) = (job.radius.0, job.edge == Edge::Cyclic);
    let halo_of = |part: &Range<usize>| halo(part.start, part.end, rr, rows, cyclic, cols);
    let mut staged = Vec::with_capacity(split.len());
    for (_, part, lane, tag) in split.parts() {
        for input in inputs {
            for range in halo_of(&part).into_iter().filter(|r| !r.is_empty()) {
                memory::input_part(ctx, input, range, lane, tag)?;
            }
        }
        staged.push(arrays::stage(ctx, arrays, lane, tag)?);
    }
    // The device address of each input's first element (its rows were staged above).
    let srcs = inputs
        .iter()
        .map(|input| memory::input_part(ctx, input, 0..0, split.lanes[0], split.tag))
        .collect::<Result<Vec<_>>>()?;
    let rec = Record::new(checked, &split.lanes)?;
    let mut written = fault::Written::new(ctx, vec![&out]);
    for ((_, part, lane, tag), whole) in split.parts().zip(staged) {
        let elems = part.start * cols..part.end * cols;
        let keep = job.reads_old_output();
        let dst = memory::output_part(ctx, &out, elems.clone(), keep, lane, tag)?;
        // Shifted so that the kernel indexes the output by global position.
        let dst = dst - (elems.start * std::mem::size_of::<F::Out>()) as u64;
        let (tiles_x, tiles_y) = g.tiles(part.len(), cols);
        let mut args = KernelArgs::default();
        args.ptr(dst);
        for &src in &srcs {
            args.ptr(src);
        }
        args.i64(rows as i64)
            .i64(cols as i64)
            .i32(job.edge_code())
            .value(&pad)
            .i32(job.parity_code())
            .i64(part.start as i64)
            .i64(part.end as i64)
            .i64(tiles_x as i64)
            .i64(tiles_y as i64);
        arrays::push(&mut args, &whole, true);
        args.uniforms(uniforms);
        if let Some(rec) = &rec {
            args.ptr(rec.ptr());
        }
        let dims = Dims {
            grid: (
                tiles_x.min(i32::MAX as usize) as u32,
                tiles_y.min(65535) as u32,
                1,
            ),
            block: (g.bx as u32, g.by as u32, 1),
            shared: 0,
        };
        launch(ctx, lane, tag, m.func(ow::KERNEL)?, dims, &mut args)?;
        let ev = CuEvent::record(lane)?;
        for input in inputs {
            for range in halo_of(&part).into_iter().filter(|r| !r.is_empty()) {
                memory::read_by(ctx, input, range, &ev)?;
            }
        }
        arrays::read(ctx, arrays, (lane, tag), &ev)?;
        written.push(elems, ev);
    }
    written.settle(rec.as_ref(), &[F::definition()])?;
    if eager {
        split.download(ctx, &out, |part| part.start * cols..part.end * cols)?;
    }
    Ok(())
}

/// One colour sweep of `job` (an [`Job::in_place_sweep`]) over `m` in place, on the
/// current slot and one stream: the kernel reads its window's tile from `m` and writes
/// the sweep's cells into it, with no second matrix and no copy. `Ok(false)`, having done
/// nothing, where that would not give the bits of a sweep from a copy
/// ([`ow::in_place_exact`]), the call is split over several device slots (each would hold
/// a stale halo of the others' cells), or it is checked (a fault would leave `m` half
/// updated, where the sweep from a copy leaves it as it was).
///
/// [`Job::in_place_sweep`]: crate::backends::overlap_windows::Job::in_place_sweep
pub(crate) fn run_in_place<'c, F: OverlapFn>(
    exec: &Cuda,
    job: Job,
    arrays: &impl ArgTuple<'c>,
    m: ArgMut<'_, F::Out>,
    pad: F::Elem,
    uniforms: &F::Uniforms,
) -> Result<bool> {
    let same_type = std::any::TypeId::of::<F::Elem>() == std::any::TypeId::of::<F::Out>();
    if !same_type
        || exec.checked
        || devices::count(exec.devices)? > 1
        || !ow::in_place_exact(F::definition(), (job.rows, job.cols), job.edge)
    {
        return Ok(false);
    }
    if job.rows == 0 || job.cols == 0 {
        return Ok(true);
    }
    let ctx = ctx()?;
    let g = Geometry::choose(
        &job,
        std::mem::size_of::<F::Elem>(),
        MAX_THREADS,
        STATIC_SHARED,
    )?;
    let module = module(
        ctx,
        ProgKey::of::<F>(interned(g.variant(&job, false)), ctx.ordinal),
        "overlap_windows",
        &[ow::KERNEL],
        || source::<F>(&job, &g, false),
    )?;
    let (rows, cols) = (job.rows, job.cols);
    let n = rows * cols;
    let eager = memory::eager_download(&m, exec.download);
    let bytes = n * std::mem::size_of::<F::Out>();
    let work = Work {
        up: 0,
        kernel: 2 * bytes,
        down: if eager { bytes } else { 0 },
        // The previous sweep's stream, so that the sweeps run in order.
        follows: memory::busy_lane(ctx, &m.lock()),
    };
    // One part: the sweep's cells read other cells of the whole matrix.
    let split = multistream::split(ctx, "overlap_windows", rows, rows, Some(1), work)?;
    let (lane, tag) = (split.lanes[0], split.tag);
    let whole = arrays::stage(ctx, arrays, lane, tag)?;
    // `keep`: the cells the sweep does not write, and the halo, are read from `m`.
    let dst = memory::output_part(ctx, &m, 0..n, true, lane, tag)?;
    let (tiles_x, tiles_y) = g.tiles(rows, cols);
    let mut args = KernelArgs::default();
    args.ptr(dst)
        .i64(rows as i64)
        .i64(cols as i64)
        .i32(job.edge_code())
        .value(&pad)
        .i32(job.parity_code())
        .i64(0)
        .i64(rows as i64)
        .i64(tiles_x as i64)
        .i64(tiles_y as i64);
    arrays::push(&mut args, &whole, true);
    args.uniforms(uniforms);
    let dims = Dims {
        grid: (
            tiles_x.min(i32::MAX as usize) as u32,
            tiles_y.min(65535) as u32,
            1,
        ),
        block: (g.bx as u32, g.by as u32, 1),
        shared: 0,
    };
    launch(ctx, lane, tag, module.func(ow::KERNEL)?, dims, &mut args)?;
    let ev = CuEvent::record(lane)?;
    arrays::read(ctx, arrays, (lane, tag), &ev)?;
    let mut written = fault::Written::new(ctx, vec![&m]);
    written.push(0..n, ev);
    written.settle(None, &[F::definition()])?;
    if eager {
        split.download(ctx, &m, |part| part.start * cols..part.end * cols)?;
    }
    Ok(true)
}
