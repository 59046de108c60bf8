//! MapOverlap on CUDA: shared-memory tiles with halo (`cuda/map_overlap.cu`). One kernel
//! template serves every form: a vector is a one-row matrix; row-wise is a 2D stencil of
//! radius (0, r); column-wise one of radius (r, 0) whose tile is stored column by column,
//! so the 1D window runs down a column contiguously.
//!
//! MultiStream splits a matrix into bands of rows and a vector into bands of columns; each
//! band uploads its part of the input plus its halo (wrapping around for a cyclic edge)
//! and computes only its own outputs.

use std::ops::Range;

use super::context::{ctx, Ctx, Lane};
use super::memory::{self, CuEvent};
use super::module_cache::{launch, module, Dims, KernelArgs};
use super::multistream::{self, Work};
use super::trace::Tag;
use super::{assemble, call_expr, cty, uniform_params, CallSite, Cuda};
use crate::backends::jit::ProgKey;
use crate::backends::Stencil;
use crate::codegen::{device_source, Dialect};
use crate::containers::{Arg, ArgMut};
use crate::plan::{Axis, Edge};
use crate::userfn::{UniformTuple, UserFn, Window2Fn, WindowFn};
use crate::{DeviceType, Error, Result};

const TEMPLATE: &str = include_str!("../../../cuda/map_overlap.cu");

/// Block shape and tile layout of one form.
#[derive(Clone, Copy)]
pub(crate) struct Layout {
    bx: usize,
    by: usize,
    iy: usize,
    colmajor: bool,
}

pub(crate) const FLAT: Layout = Layout {
    bx: 256,
    by: 1,
    iy: 1,
    colmajor: false,
};
pub(crate) const ROWS: Layout = Layout {
    bx: 128,
    by: 2,
    iy: 1,
    colmajor: false,
};
pub(crate) const COLS: Layout = Layout {
    bx: 32,
    by: 8,
    iy: 4,
    colmajor: true,
};
pub(crate) const TILE2D: Layout = Layout {
    bx: 32,
    by: 8,
    iy: 4,
    colmajor: false,
};

fn edge_code(edge: Edge) -> i32 {
    match edge {
        Edge::Duplicate => 0,
        Edge::Cyclic => 1,
        Edge::Pad => 2,
        Edge::None => 3,
    }
}

pub(crate) fn source<F: UserFn>(layout: Layout, elem: String, out: String) -> Result<String> {
    let user = device_source::<F>(Dialect::Cuda)?;
    let def = F::definition();
    let site = CallSite {
        pos: "",
        index: "",
        window: "SKEL_W",
        stride: "SKEL_S",
    };
    let defines = [
        ("SKEL_IN_T", elem),
        ("SKEL_OUT_T", out),
        (
            "SKEL_CALL(SKEL_W, SKEL_S)",
            call_expr(user.entry(), def, &site),
        ),
        ("SKEL_BX", layout.bx.to_string()),
        ("SKEL_BY", layout.by.to_string()),
        ("SKEL_IY", layout.iy.to_string()),
        ("SKEL_COLMAJOR", u8::from(layout.colmajor).to_string()),
        ("SKEL_PARAMS", uniform_params(def)),
    ];
    Ok(assemble(&user.source, &defines, TEMPLATE))
}

/// Rows (or columns, for a vector) `lo .. hi` of `n` plus those within `r` of them that a
/// stencil reads, as element ranges (a line has `unit` elements); with a cyclic edge, the
/// halo wraps around.
fn halo(lo: usize, hi: usize, r: usize, n: usize, cyclic: bool, unit: usize) -> Vec<Range<usize>> {
    let mut lines = Vec::new();
    if r >= n {
        lines.push(0..n);
    } else {
        lines.push(lo.saturating_sub(r)..(hi + r).min(n));
        if cyclic && lo < r {
            lines.push(n - (r - lo)..n);
        }
        if cyclic && hi + r > n {
            lines.push(0..hi + r - n);
        }
    }
    lines
        .into_iter()
        .map(|l| l.start * unit..l.end * unit)
        .collect()
}

/// A stencil over a `rows x cols` matrix.
struct Grid2 {
    rows: usize,
    cols: usize,
    radius: (usize, usize),
    edge: Edge,
}

/// Launches the stencil kernel of module `kind` over a `rows x cols` matrix, split into
/// bands over streams: bands of rows, or of columns for a vector (one row). Each band
/// uploads its rows (or columns) plus the halo its outputs read.
#[allow(clippy::too_many_arguments)]
fn launch_stencil<F: UserFn, T: DeviceType, U: UniformTuple>(
    exec: &Cuda,
    kind: &'static str,
    layout: Layout,
    input: Arg<'_, T>,
    out: ArgMut<'_, F::Out>,
    g: Grid2,
    pad: T,
    uniforms: &U,
) -> Result<()> {
    let ctx = ctx()?;
    let Grid2 {
        rows,
        cols,
        radius: (rr, rc),
        edge,
    } = g;
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let too_big = || Error::InvalidArgument(format!("stencil radius ({rr}, {rc}) is too large"));
    let rr32 = i32::try_from(rr).map_err(|_| too_big())?;
    let rc32 = i32::try_from(rc).map_err(|_| too_big())?;
    let m = module(
        ctx,
        ProgKey::of::<(F, T)>(kind, ctx.ordinal),
        kind,
        &["skel_overlap"],
        || source::<F>(layout, cty::<T>(), cty::<F::Out>()),
    )?;
    let tw = layout.bx + 2 * rc;
    let th = layout.by * layout.iy + 2 * rr;
    let cells = if layout.colmajor {
        tw * (th | 1)
    } else {
        tw * th
    };
    let shared = cells
        .checked_mul(std::mem::size_of::<T>())
        .and_then(|b| u32::try_from(b).ok())
        .ok_or_else(too_big)?;
    let keep = edge == Edge::None;
    let eager = memory::eager_download(&out, exec.download);
    let n = rows * cols;
    let out_bytes = n * std::mem::size_of::<F::Out>();
    let work = Work {
        up: memory::missing_bytes(ctx, &input, 0..n),
        kernel: n * std::mem::size_of::<T>() + out_bytes,
        down: if eager { out_bytes } else { 0 },
        follows: memory::busy_lane(ctx, &out.lock()),
    };
    // A vector is split into column bands (its halo is columns), a matrix into row bands.
    let by_cols = rows == 1;
    let (lines, unit, r) = if by_cols {
        (cols, 1, rc)
    } else {
        (rows, cols, rr)
    };
    let split = multistream::split(
        ctx,
        kind,
        lines,
        1,
        multistream::forced(exec.streams)?,
        work,
    )?;
    let cyclic = edge == Edge::Cyclic;
    for (_, part, lane, tag) in split.parts() {
        for range in halo(part.start, part.end, r, lines, cyclic, unit) {
            memory::input_part(ctx, &input, range, lane, tag)?;
        }
    }
    let src = input_base(ctx, &input, split.lanes[0], split.tag)?;
    for (_, part, lane, tag) in split.parts() {
        let elems = part.start * unit..part.end * unit;
        let dst = memory::output_part(ctx, &out, elems.clone(), keep, lane, tag)?;
        let dst = dst - (elems.start * std::mem::size_of::<F::Out>()) as u64;
        let ((row_lo, row_hi), (col_lo, col_hi)) = if by_cols {
            ((0, 1), (part.start, part.end))
        } else {
            ((part.start, part.end), (0, cols))
        };
        let tiles_x = (col_hi - col_lo).div_ceil(layout.bx);
        let tiles_y = (row_hi - row_lo).div_ceil(layout.by * layout.iy);
        let mut args = KernelArgs::default();
        args.ptr(src)
            .ptr(dst)
            .i64(rows as i64)
            .i64(cols as i64)
            .i32(rr32)
            .i32(rc32)
            .i32(edge_code(edge))
            .value(&pad)
            .i64(tiles_x as i64)
            .i64(tiles_y as i64)
            .i64(row_lo as i64)
            .i64(row_hi as i64)
            .i64(col_lo as i64)
            .i64(col_hi as i64)
            .uniforms(uniforms);
        let dims = Dims {
            grid: (
                tiles_x.min(i32::MAX as usize) as u32,
                tiles_y.min(65535) as u32,
                1,
            ),
            block: (layout.bx as u32, layout.by as u32, 1),
            shared,
        };
        launch(ctx, lane, tag, m.func("skel_overlap")?, dims, &mut args)?;
        let ev = CuEvent::record(lane)?;
        for range in halo(part.start, part.end, r, lines, cyclic, unit) {
            memory::read_by(ctx, &input, range, &ev)?;
        }
        memory::written_part(ctx, &out, elems, &ev)?;
    }
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
    let (rows, cols) = input.shape().dims();
    let r = stencil.radius;
    let (kind, layout, shape, radius) = match axis {
        Axis::Flat => ("overlap_flat", FLAT, (1, input.shape().len()), (0, r)),
        Axis::Rows => ("overlap_rows", ROWS, (rows, cols), (0, r)),
        Axis::Cols => ("overlap_cols", COLS, (rows, cols), (r, 0)),
    };
    let (rows, cols) = shape;
    let grid = Grid2 {
        rows,
        cols,
        radius,
        edge: stencil.edge,
    };
    launch_stencil::<F, F::Elem, F::Uniforms>(
        exec,
        kind,
        layout,
        input,
        out,
        grid,
        stencil.pad,
        uniforms,
    )
}

/// 2D stencil over a matrix.
pub(crate) fn run_2d<F: Window2Fn>(
    exec: &Cuda,
    input: Arg<'_, F::Elem>,
    out: ArgMut<'_, F::Out>,
    stencil: Stencil<F::Elem, (usize, usize)>,
    uniforms: &F::Uniforms,
) -> Result<()> {
    let (rows, cols) = input.shape().dims();
    let grid = Grid2 {
        rows,
        cols,
        radius: stencil.radius,
        edge: stencil.edge,
    };
    launch_stencil::<F, F::Elem, F::Uniforms>(
        exec,
        "overlap_2d",
        TILE2D,
        input,
        out,
        grid,
        stencil.pad,
        uniforms,
    )
}
