//! MapOverlap of the general form on OpenCL (`#[index]`, several windowed inputs,
//! container arguments, update modes): the tile kernel of
//! [`crate::backends::overlap_windows`] (`cuda/map_overlap_windows.cu`, compiled as OpenCL
//! C), each windowed input's tile in local memory. The in-order queue orders the call
//! after the uploads of its inputs and containers, and the sweeps of an in-place update
//! one after the other.

use std::fmt::Write as _;

use super::context::Ctx;
use super::program_cache::{program, ProgKey};
use super::{arrays, checked_source_head, cty, fault, launch, memory, push_uniforms, KArg};
use crate::backends::jit::interned;
use crate::backends::overlap_windows::{self as ow, Geometry, Job};
use crate::codegen::Dialect;
use crate::containers::{Arg, ArgMut};
use crate::plan::ArgTuple;
use crate::userfn::{DeviceType, OverlapFn};
use crate::Result;

fn source<F: OverlapFn>(ctx: &Ctx, job: &Job, g: &Geometry, checked: bool) -> Result<String> {
    let def = F::definition();
    let (mut s, entries) = checked_source_head(ctx, "__local", &[def], checked)?;
    let types = (cty::<F::Elem>(), cty::<F::Out>());
    for (name, value) in ow::defines(def, &entries[0], types, (job, g), Dialect::OpenCl, checked)? {
        let _ = writeln!(s, "#define {name} {value}");
    }
    s.push_str(ow::TEMPLATE);
    Ok(s)
}

/// Runs `job` of window function `F` over `inputs` into `out`.
#[allow(clippy::too_many_arguments)] // the plan's fields, unpacked
pub(super) fn run<'c, F: OverlapFn>(
    ctx: &Ctx,
    job: Job,
    inputs: &[Arg<'_, F::Elem>],
    arrays: &impl ArgTuple<'c>,
    out: ArgMut<'_, F::Out>,
    pad: &F::Elem,
    uniforms: &F::Uniforms,
    checked: bool,
) -> Result<()> {
    if job.rows == 0 || job.cols == 0 {
        return Ok(());
    }
    let local = usize::try_from(ctx.local_mem).unwrap_or(usize::MAX);
    let g = Geometry::choose(&job, std::mem::size_of::<F::Elem>(), ctx.wg, local)?;
    let variant = interned(g.variant(&job, checked));
    let p = program(ctx, ProgKey::of::<F>(variant), F::NAME, || {
        source::<F>(ctx, &job, &g, checked)
    })?;
    let out_mem = memory::output(ctx, &out, job.reads_old_output())?;
    let mut args = vec![KArg::Mem(out_mem), KArg::U64(out.offset() as u64)];
    for input in inputs {
        args.push(KArg::Mem(memory::input(ctx, input)?));
        args.push(KArg::U64(input.offset() as u64));
    }
    let (tiles_x, tiles_y) = g.tiles(job.rows, job.cols);
    args.extend(grid_args(&job, pad, (tiles_x, tiles_y)));
    arrays::push(ctx, arrays, &mut args)?;
    push_uniforms(uniforms, &mut args);
    let rec = fault::record_if(ctx, checked)?;
    args.extend(rec.iter().map(|r| KArg::Mem(r.clone())));
    let ev = launch(
        ctx,
        &p,
        ow::KERNEL,
        &args,
        2,
        [tiles_x * g.bx, tiles_y * g.by, 1],
        Some([g.bx, g.by, 1]),
    )?;
    fault::settle(ctx, rec.as_ref(), &[F::definition()], &out, ev)
}

/// One colour sweep of `job` (an in-place sweep) over `m` in place: the kernel reads its
/// window's tile from `m` and writes the sweep's cells into it, with no second matrix and
/// no copy. `Ok(false)`, having done nothing, where that would not give the bits of a
/// sweep from a copy ([`ow::in_place_exact`]) or the call is checked (a fault would leave
/// `m` half updated, where the sweep from a copy leaves it as it was).
pub(super) fn run_in_place<'c, F: OverlapFn>(
    ctx: &Ctx,
    job: Job,
    arrays: &impl ArgTuple<'c>,
    m: ArgMut<'_, F::Out>,
    pad: &F::Elem,
    uniforms: &F::Uniforms,
    checked: bool,
) -> Result<bool> {
    let same_type = std::any::TypeId::of::<F::Elem>() == std::any::TypeId::of::<F::Out>();
    if !same_type || checked || !ow::in_place_exact(F::definition(), (job.rows, job.cols), job.edge)
    {
        return Ok(false);
    }
    if job.rows == 0 || job.cols == 0 {
        return Ok(true);
    }
    let local = usize::try_from(ctx.local_mem).unwrap_or(usize::MAX);
    let g = Geometry::choose(&job, std::mem::size_of::<F::Elem>(), ctx.wg, local)?;
    let variant = interned(g.variant(&job, false));
    let p = program(ctx, ProgKey::of::<F>(variant), F::NAME, || {
        source::<F>(ctx, &job, &g, false)
    })?;
    // `keep`: the cells the sweep does not write, and the halo, are read from `m`.
    let mem = memory::output(ctx, &m, true)?;
    let (tiles_x, tiles_y) = g.tiles(job.rows, job.cols);
    let mut args = vec![KArg::Mem(mem), KArg::U64(m.offset() as u64)];
    args.extend(grid_args(&job, pad, (tiles_x, tiles_y)));
    arrays::push(ctx, arrays, &mut args)?;
    push_uniforms(uniforms, &mut args);
    let ev = launch(
        ctx,
        &p,
        ow::KERNEL,
        &args,
        2,
        [tiles_x * g.bx, tiles_y * g.by, 1],
        Some([g.bx, g.by, 1]),
    )?;
    fault::settle(ctx, None, &[F::definition()], &m, ev)?;
    Ok(true)
}

/// The kernel's arguments after its matrices, the same for a sweep in place and from a
/// copy: the extent, the edge mode and pad, the colour, the rows of this launch (all of
/// them: OpenCL runs one launch) and the tile grid.
fn grid_args<T: DeviceType>(job: &Job, pad: &T, (tiles_x, tiles_y): (usize, usize)) -> [KArg; 9] {
    [
        KArg::I64(job.rows as i64),
        KArg::I64(job.cols as i64),
        KArg::I32(job.edge_code()),
        KArg::value(pad),
        KArg::I32(job.parity_code()),
        KArg::I64(0),
        KArg::I64(job.rows as i64),
        KArg::I64(tiles_x as i64),
        KArg::I64(tiles_y as i64),
    ]
}
