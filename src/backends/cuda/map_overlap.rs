//! MapOverlap on CUDA: shared-memory tiles with halo (`cuda/map_overlap.cu`, geometry in
//! [`crate::backends::stencil_tile`]). One kernel template serves every form: a vector is a
//! one-row matrix; row-wise is a 2D stencil of radius (0, r); column-wise one of radius
//! (r, 0) whose window each thread copies into registers, so it runs down a column
//! contiguously.
//!
//! A 2D 3x3 window runs with its registers capped for full occupancy ([`Plan::cap_pays`]).
//! The template's direct kernel (one thread per output, the window read in place:
//! [`Plan::direct`]) was measured slower than the tiles, so it runs only when asked for.
//! `SKEL_STENCIL=tiled|direct|capped|uncapped` forces the kernel or the cap (for measuring
//! the choice; `auto` or unset chooses).
//!
//! MultiStream splits a matrix into bands of rows and a vector into bands of columns; each
//! band uploads its part of the input plus its halo (wrapping around for a cyclic edge)
//! and computes only its own outputs.

use std::ops::Range;

use super::context::{ctx, Ctx, Lane};
use super::fault::{self, Record};
use super::memory::{self, CuEvent};
use super::module_cache::{launch, module, Dims, KernelArgs};
use super::multistream::{self, Work};
use super::trace::Tag;
use super::{assemble, checked_call_expr, cty, devices, uniform_params, CallSite, Cuda};
use crate::backends::jit::{interned, ProgKey};
use crate::backends::stencil_tile::{edge_code, Plan};
use crate::backends::Stencil;
use crate::codegen::{device_source_checked, Dialect};
use crate::containers::{Arg, ArgMut};
use crate::plan::{Axis, Edge};
use crate::userfn::{UniformTuple, UserFn, Window2Fn, WindowFn};
use crate::{DeviceType, Error, Result};

const TEMPLATE: &str = include_str!("../../../cuda/map_overlap.cu");

pub(crate) fn source<F: UserFn>(
    plan: &Plan,
    (elem, out): (String, String),
    checked: bool,
) -> Result<String> {
    let user = device_source_checked(&[F::definition()], Dialect::Cuda, checked)?;
    let def = F::definition();
    let site = CallSite {
        pos: "",
        index: "",
        window: "SKEL_W",
        stride: "SKEL_S",
    };
    let mut defines = vec![
        ("SKEL_IN_T", elem),
        ("SKEL_OUT_T", out),
        (
            "SKEL_CALL(SKEL_W, SKEL_S)",
            checked_call_expr(user.entry(), def, &site, checked),
        ),
        ("SKEL_PARAMS", uniform_params(def)),
    ];
    defines.extend(plan.defines());
    defines.extend(fault::defines(checked));
    Ok(assemble(&user.source, &defines, TEMPLATE))
}

/// Threads per multiprocessor a capped kernel must fit: 64 registers each (of 64K), the
/// `__launch_bounds__(128, 8)` measured for 3x3.
const CAPPED_THREADS: usize = 1024;

// What `SKEL_STENCIL` forces.
use crate::config::Stencil as Forced;

/// `SKEL_STENCIL`, fixed for the process at the first use.
fn forced() -> Result<Forced> {
    crate::config::STENCIL.fix()
}

/// The kernel `plan` runs on CUDA: tiled, registers capped where that was measured to
/// pay, or what `SKEL_STENCIL` forces.
fn cuda_plan(plan: Plan) -> Result<Plan> {
    let forced = forced()?;
    if forced == Forced::Direct {
        return Ok(plan.direct());
    }
    let cap = match forced {
        Forced::Capped => true,
        Forced::Uncapped => false,
        _ => plan.cap_pays(),
    };
    let blocks = CAPPED_THREADS / (plan.layout.bx * plan.layout.by).max(1);
    Ok(plan.min_blocks(if cap { blocks.max(1) } else { 0 }))
}

/// Rows (or columns, for a vector) `lo .. hi` of `n` plus those within `r` of them that a
/// stencil reads, as element ranges (a line has `unit` elements); with a cyclic edge, the
/// halo wraps around. Unused ranges are empty (no allocation: this runs on every call).
pub(super) fn halo(
    lo: usize,
    hi: usize,
    r: usize,
    n: usize,
    cyclic: bool,
    unit: usize,
) -> [Range<usize>; 3] {
    let mut lines = [0..0, 0..0, 0..0];
    if r >= n {
        lines[0] = 0..n;
    } else {
        lines[0] = lo.saturating_sub(r)..(hi + r).min(n);
        if cyclic && lo < r {
            lines[1] = n - (r - lo)..n;
        }
        if cyclic && hi + r > n {
            lines[2] = 0..hi + r - n;
        }
    }
    lines.map(|l| l.start * unit..l.end * unit)
}

/// Launches the stencil kernel of `plan`: split over device slots into bands of whole
/// rows (of columns for a vector), each slot reading its halo from its neighbours' copies
/// (device to device, `memory/staging.rs`) and the global edges as on one device.
fn launch_stencil<F: UserFn, T: DeviceType, U: UniformTuple>(
    exec: &Cuda,
    plan: Plan,
    input: Arg<'_, T>,
    out: ArgMut<'_, F::Out>,
    pad: T,
    uniforms: &U,
) -> Result<()> {
    let (rows, cols) = (plan.rows, plan.cols);
    let lines = if rows == 1 { (cols, 1) } else { (rows, cols) };
    devices::by_lines(exec, lines, &(input,), out, |exec, out, band| {
        stencil_band::<F, T, U>(exec, plan, (input, out), pad, uniforms, band)
    })
}

/// Launches the stencil kernel of `plan` for lines `band` of the output (rows, or columns
/// for a vector), split into bands over streams. Each band uploads its rows (or columns)
/// plus the halo its outputs read.
fn stencil_band<F: UserFn, T: DeviceType, U: UniformTuple>(
    exec: &Cuda,
    plan: Plan,
    (input, out): (Arg<'_, T>, ArgMut<'_, F::Out>),
    pad: T,
    uniforms: &U,
    band: Range<usize>,
) -> Result<()> {
    let ctx = ctx()?;
    let plan = cuda_plan(plan)?;
    let Plan {
        kind,
        rows,
        cols,
        radius: (rr, rc),
        edge,
        ..
    } = plan;
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let shared = plan
        .shared_bytes()
        .and_then(|b| u32::try_from(b).ok())
        .filter(|&b| b <= ctx.smem_optin);
    let (Some(shared), Some(pitch)) = (shared, plan.pitch()) else {
        return Err(Error::InvalidArgument(format!(
            "MapOverlap: a window of radius ({rr}, {rc}) needs a tile larger than the {} bytes \
             of shared memory a block may use on this device; use a smaller radius",
            ctx.smem_optin
        )));
    };
    let checked = exec.checked;
    let variant = if checked {
        interned(plan.variant() + "_checked")
    } else {
        plan.variant_name()
    };
    let m = module(
        ctx,
        ProgKey::of::<(F, T)>(variant, ctx.ordinal),
        kind,
        &["skel_overlap"],
        || source::<F>(&plan, (cty::<T>(), cty::<F::Out>()), checked),
    )?;
    let keep = edge == Edge::None;
    let eager = memory::eager_download(&out, exec.download);
    // A vector is split into column bands (its halo is columns), a matrix into row bands.
    let by_cols = rows == 1;
    let (lines, unit, r) = if by_cols {
        (cols, 1, rc)
    } else {
        (rows, cols, rr)
    };
    let n = band.len() * unit;
    let out_bytes = n * std::mem::size_of::<F::Out>();
    let elems = band.start * unit..band.end * unit;
    let work = Work {
        up: memory::missing_bytes(ctx, &input, elems),
        kernel: n * std::mem::size_of::<T>() + out_bytes,
        down: if eager { out_bytes } else { 0 },
        follows: memory::busy_lane(ctx, &out.lock()),
    };
    let mut split = multistream::split(
        ctx,
        kind,
        band.len(),
        1,
        multistream::forced(exec.streams)?,
        work,
    )?;
    split.shift(band.start);
    let cyclic = edge == Edge::Cyclic;
    for (_, part, lane, tag) in split.parts() {
        for range in halo(part.start, part.end, r, lines, cyclic, unit) {
            if !range.is_empty() {
                memory::input_part(ctx, &input, range, lane, tag)?;
            }
        }
    }
    let src = input_base(ctx, &input, split.lanes[0], split.tag)?;
    let rec = Record::new(checked, &split.lanes)?;
    let mut written = fault::Written::new(ctx, vec![&out]);
    for (_, part, lane, tag) in split.parts() {
        let elems = part.start * unit..part.end * unit;
        let dst = memory::output_part(ctx, &out, elems.clone(), keep, lane, tag)?;
        let dst = dst - (elems.start * std::mem::size_of::<F::Out>()) as u64;
        let ((row_lo, row_hi), (col_lo, col_hi)) = if by_cols {
            ((0, 1), (part.start, part.end))
        } else {
            ((part.start, part.end), (0, cols))
        };
        let (tile_rows, tile_cols) = plan.tile_outputs();
        let tiles_x = (col_hi - col_lo).div_ceil(tile_cols);
        let tiles_y = (row_hi - row_lo).div_ceil(tile_rows);
        let mut args = KernelArgs::default();
        args.ptr(src)
            .ptr(dst)
            .i64(rows as i64)
            .i64(cols as i64)
            .i32(pitch)
            .i32(edge_code(edge))
            .value(&pad)
            .i64(tiles_x as i64)
            .i64(tiles_y as i64)
            .i64(row_lo as i64)
            .i64(row_hi as i64)
            .i64(col_lo as i64)
            .i64(col_hi as i64)
            .uniforms(uniforms);
        if let Some(rec) = &rec {
            args.ptr(rec.ptr());
        }
        let dims = Dims {
            grid: (
                tiles_x.min(i32::MAX as usize) as u32,
                tiles_y.min(65535) as u32,
                1,
            ),
            block: (plan.layout.bx as u32, plan.layout.by as u32, 1),
            shared,
        };
        launch(ctx, lane, tag, m.func("skel_overlap")?, dims, &mut args)?;
        let ev = CuEvent::record(lane)?;
        for range in halo(part.start, part.end, r, lines, cyclic, unit) {
            if !range.is_empty() {
                memory::read_by(ctx, &input, range, &ev)?;
            }
        }
        written.push(elems, ev);
    }
    written.settle(rec.as_ref(), &[F::definition()])?;
    if eager {
        split.download(ctx, &out, |part| part.start * unit..part.end * unit)?;
    }
    Ok(())
}

/// The device address of `input`'s first element (its data was staged by the bands).
fn input_base<T: DeviceType>(
    ctx: &Ctx,
    input: &Arg<'_, T>,
    lane: Lane,
    tag: Tag,
) -> Result<cudarc::driver::sys::CUdeviceptr> {
    memory::input_part(ctx, input, 0..0, lane, tag)
}

/// 1D stencil over a vector (`Axis::Flat`) or along the rows or columns of a matrix.
pub(crate) fn run_1d<F: WindowFn>(
    exec: &Cuda,
    input: Arg<'_, F::Elem>,
    out: ArgMut<'_, F::Out>,
    stencil: Stencil<F::Elem, usize>,
    axis: Axis,
    uniforms: &F::Uniforms,
) -> Result<()> {
    let plan = Plan::one_d(axis, input.shape(), &stencil);
    launch_stencil::<F, F::Elem, F::Uniforms>(exec, plan, input, out, stencil.pad, uniforms)
}

/// 2D stencil over a matrix.
pub(crate) fn run_2d<F: Window2Fn>(
    exec: &Cuda,
    input: Arg<'_, F::Elem>,
    out: ArgMut<'_, F::Out>,
    stencil: Stencil<F::Elem, (usize, usize)>,
    uniforms: &F::Uniforms,
) -> Result<()> {
    let plan = Plan::two_d(input.shape(), &stencil);
    launch_stencil::<F, F::Elem, F::Uniforms>(exec, plan, input, out, stencil.pad, uniforms)
}
