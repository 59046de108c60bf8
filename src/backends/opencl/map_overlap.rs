//! MapOverlap on OpenCL: tiled stencils (`opencl/map_overlap.cl`, `opencl/map_overlap_2d.cl`).
//! Each work-group loads its outputs' neighbourhood, edge mode applied, into local memory
//! once; the user function reads its window from there (`SKEL_WINDOW_SPACE` is `__local`).
//! With `Edge::None` the output's current values are made valid on the device first, since
//! border outputs are left as they were.

use std::fmt::Write as _;

use super::context::Ctx;
use super::program_cache::{program, ProgKey};
use super::{
    call_expr, cty, dims, launch, memory, push_uniforms, round_up, source_head, uniform_params,
    CallShape, KArg,
};
use crate::backends::Stencil;
use crate::containers::{Arg, ArgMut};
use crate::plan::{Axis, Edge};
use crate::userfn::{StencilFn, Window2Fn, WindowFn};
use crate::{Error, Result};

const TEMPLATE_1D: &str = include_str!("../../../opencl/map_overlap.cl");
const TEMPLATE_2D: &str = include_str!("../../../opencl/map_overlap_2d.cl");

/// Width of a 2D tile (work-items along a row).
const TW: usize = 16;

fn source<F: StencilFn>(
    ctx: &Ctx,
    template: &str,
    call: (&str, &str),
    extra: &str,
) -> Result<String> {
    let def = F::definition();
    let (mut s, entries) = source_head(ctx, "__local", &[def])?;
    let shape = CallShape {
        pos: "0",
        array: "",
        window: call,
    };
    let _ = writeln!(s, "#define SKEL_T {}", cty::<F::Elem>());
    let _ = writeln!(s, "#define SKEL_OUT_T {}", cty::<F::Out>());
    s.push_str(extra);
    let _ = writeln!(s, "#define SKEL_UPARAMS {}", uniform_params(def, ""));
    let _ = writeln!(
        s,
        "#define SKEL_CALL({}) {}",
        if call.1.is_empty() {
            "w".to_string()
        } else {
            "w, s".to_string()
        },
        call_expr(def, &entries[0], &shape, "")
    );
    s.push_str(template);
    Ok(s)
}

fn edge_code(edge: Edge) -> i32 {
    match edge {
        Edge::Duplicate => 0,
        Edge::Cyclic => 1,
        Edge::Pad => 2,
        Edge::None => 3,
    }
}

fn check_local(ctx: &Ctx, bytes: usize) -> Result<()> {
    if bytes as u64 > ctx.local_mem {
        return Err(Error::InvalidArgument(format!(
            "MapOverlap on OpenCL: the window's tile needs {bytes} bytes of local memory, \
             the device has {}",
            ctx.local_mem
        )));
    }
    Ok(())
}

pub(super) fn run_1d<F: WindowFn>(
    ctx: &Ctx,
    input: Arg<'_, F::Elem>,
    out: ArgMut<'_, F::Out>,
    stencil: Stencil<F::Elem, usize>,
    axis: Axis,
    uniforms: &F::Uniforms,
) -> Result<()> {
    let (rows, cols) = dims(input.shape());
    let (len, stride, line_stride, lines) = match axis {
        Axis::Flat => (input.shape().len(), 1, 0, 1),
        Axis::Rows => (cols, 1, cols, rows),
        Axis::Cols => (rows, cols, 1, cols),
    };
    if len == 0 || lines == 0 {
        return Ok(());
    }
    let r = stencil.radius;
    let tile = (ctx.wg + 2 * r) * std::mem::size_of::<F::Elem>();
    check_local(ctx, tile)?;
    let p = program(ctx, ProgKey::of::<F>("map_overlap"), F::NAME, || {
        source::<F>(ctx, TEMPLATE_1D, ("(w)", ""), "")
    })?;
    let in_mem = memory::input(ctx, &input)?;
    let out_mem = memory::output(ctx, &out, stencil.edge == Edge::None)?;
    let mut args = vec![
        KArg::Mem(in_mem),
        KArg::U64(input.offset() as u64),
        KArg::Mem(out_mem),
        KArg::U64(out.offset() as u64),
        KArg::I64(len as i64),
        KArg::I64(stride as i64),
        KArg::I64(line_stride as i64),
        KArg::I64(r as i64),
        KArg::I32(edge_code(stencil.edge)),
        KArg::value(&stencil.pad),
        KArg::Local(tile),
    ];
    push_uniforms(uniforms, &mut args);
    let ev = launch(
        ctx,
        &p,
        "skel_map_overlap",
        &args,
        2,
        [round_up(len, ctx.wg), lines, 1],
        Some([ctx.wg, 1, 1]),
    )?;
    memory::written(ctx, &out, ev);
    Ok(())
}

pub(super) fn run_2d<F: Window2Fn>(
    ctx: &Ctx,
    input: Arg<'_, F::Elem>,
    out: ArgMut<'_, F::Out>,
    stencil: Stencil<F::Elem, (usize, usize)>,
    uniforms: &F::Uniforms,
) -> Result<()> {
    let (rows, cols) = dims(input.shape());
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let (rr, rc) = stencil.radius;
    let th = (ctx.wg / TW).max(1);
    let tile = (TW + 2 * rc) * (th + 2 * rr) * std::mem::size_of::<F::Elem>();
    check_local(ctx, tile)?;
    let extra = format!("#define SKEL_TW {TW}\n#define SKEL_TH {th}\n");
    let p = program(ctx, ProgKey::of::<F>("map_overlap_2d"), F::NAME, || {
        source::<F>(ctx, TEMPLATE_2D, ("(w)", "(long)(s)"), &extra)
    })?;
    let in_mem = memory::input(ctx, &input)?;
    let out_mem = memory::output(ctx, &out, stencil.edge == Edge::None)?;
    let mut args = vec![
        KArg::Mem(in_mem),
        KArg::U64(input.offset() as u64),
        KArg::Mem(out_mem),
        KArg::U64(out.offset() as u64),
        KArg::I64(rows as i64),
        KArg::I64(cols as i64),
        KArg::I64(rr as i64),
        KArg::I64(rc as i64),
        KArg::I32(edge_code(stencil.edge)),
        KArg::value(&stencil.pad),
        KArg::Local(tile),
    ];
    push_uniforms(uniforms, &mut args);
    let ev = launch(
        ctx,
        &p,
        "skel_map_overlap_2d",
        &args,
        2,
        [round_up(cols, TW), round_up(rows, th), 1],
        Some([TW, th, 1]),
    )?;
    memory::written(ctx, &out, ev);
    Ok(())
}
