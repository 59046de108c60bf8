//! MapOverlap on OpenCL: tiled stencils (`opencl/map_overlap.cl`, `opencl/map_overlap_2d.cl`).
//! Each work-group loads its outputs' neighbourhood, edge mode applied, into local memory
//! once; the user function reads its window from there (`SKEL_WINDOW_SPACE` is `__local`).
//! With `Edge::None` the output's current values are made valid on the device first, since
//! border outputs are left as they were.

use std::fmt::Write as _;

use super::context::Ctx;
use super::program_cache::{program, ProgKey};
use super::{
    call_expr, check_local, cty, dims, launch, memory, push_uniforms, round_up, source_head,
    uniform_params, CallShape, KArg,
};
use crate::backends::Stencil;
use crate::containers::{Arg, ArgMut};
use crate::plan::{Axis, Edge};
use crate::userfn::{StencilFn, Window2Fn, WindowFn};
use crate::Result;

const TEMPLATE_1D: &str = include_str!("../../../opencl/map_overlap.cl");
const TEMPLATE_2D: &str = include_str!("../../../opencl/map_overlap_2d.cl");

/// Width of a 2D tile (work-items along a row), at most: `min(TW, wg)`.
const TW: usize = 16;

/// The 2D tile of a work-group of `wg` work-items (a power of two): `(width, height)`,
/// exactly `wg` work-items.
fn tile_2d(wg: usize) -> (usize, usize) {
    let tw = TW.min(wg).max(1);
    (tw, (wg / tw).max(1))
}

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
    check_local(ctx, tile, "MapOverlap (the window's tile)")?;
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
    let (tw, th) = tile_2d(ctx.wg);
    let tile = (tw + 2 * rc) * (th + 2 * rr) * std::mem::size_of::<F::Elem>();
    check_local(ctx, tile, "MapOverlap (the window's tile)")?;
    let extra = format!("#define SKEL_TW {tw}\n#define SKEL_TH {th}\n");
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
        [round_up(cols, tw), round_up(rows, th), 1],
        Some([tw, th, 1]),
    )?;
    memory::written(ctx, &out, ev);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::tile_2d;

    #[test]
    fn tile_2d_is_exactly_the_work_group() {
        for wg in [1, 2, 4, 8, 16, 32, 64, 128, 256] {
            let (tw, th) = tile_2d(wg);
            assert_eq!(tw * th, wg, "wg {wg}");
            assert!(tw <= 16);
        }
        assert_eq!(tile_2d(8), (8, 1));
        assert_eq!(tile_2d(256), (16, 16));
    }
}
