//! MapOverlap on CUDA: shared-memory tiles with halo (`cuda/map_overlap.cu`). One kernel
//! template serves every form: a vector is a one-row matrix; row-wise is a 2D stencil of
//! radius (0, r); column-wise one of radius (r, 0) whose tile is stored column by column,
//! so the 1D window runs down a column contiguously.

use super::context::ctx;
use super::module_cache::{launch, module, KernelArgs};
use super::{assemble, call_expr, cty, memory, uniform_params, CallSite};
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

/// Launches the stencil kernel of module `kind` over a `rows x cols` matrix.
#[allow(clippy::too_many_arguments)]
fn launch_stencil<F: UserFn, T: DeviceType, U: UniformTuple>(
    kind: &'static str,
    layout: Layout,
    input: Arg<'_, T>,
    out: ArgMut<'_, F::Out>,
    (rows, cols): (usize, usize),
    (rr, rc): (usize, usize),
    stencil_edge: Edge,
    pad: T,
    uniforms: &U,
) -> Result<()> {
    let ctx = ctx()?;
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
    let src = memory::input(ctx, &input)?;
    let dst = memory::output(ctx, &out, stencil_edge == Edge::None)?;
    let tiles_x = cols.div_ceil(layout.bx);
    let tiles_y = rows.div_ceil(layout.by * layout.iy);
    let mut args = KernelArgs::default();
    args.ptr(src)
        .ptr(dst)
        .i64(rows as i64)
        .i64(cols as i64)
        .i32(rr32)
        .i32(rc32)
        .i32(edge_code(stencil_edge))
        .value(&pad)
        .i64(tiles_x as i64)
        .i64(tiles_y as i64)
        .uniforms(uniforms);
    let grid = (
        tiles_x.min(i32::MAX as usize) as u32,
        tiles_y.min(65535) as u32,
        1,
    );
    let block = (layout.bx as u32, layout.by as u32, 1);
    launch(ctx, m.func("skel_overlap")?, grid, block, shared, &mut args)?;
    memory::written(ctx, &out)
}

/// 1D stencil over a vector (`Axis::Flat`) or along the rows or columns of a matrix.
pub(crate) fn run_1d<F: WindowFn>(
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
    launch_stencil::<F, F::Elem, F::Uniforms>(
        kind,
        layout,
        input,
        out,
        shape,
        radius,
        stencil.edge,
        stencil.pad,
        uniforms,
    )
}

/// 2D stencil over a matrix.
pub(crate) fn run_2d<F: Window2Fn>(
    input: Arg<'_, F::Elem>,
    out: ArgMut<'_, F::Out>,
    stencil: Stencil<F::Elem, (usize, usize)>,
    uniforms: &F::Uniforms,
) -> Result<()> {
    let shape = input.shape().dims();
    launch_stencil::<F, F::Elem, F::Uniforms>(
        "overlap_2d",
        TILE2D,
        input,
        out,
        shape,
        stencil.radius,
        stencil.edge,
        stencil.pad,
        uniforms,
    )
}
