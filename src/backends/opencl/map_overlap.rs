//! MapOverlap on OpenCL: tiled stencils (`opencl/map_overlap.cl`, the twin of the CUDA
//! template, with the geometry of [`crate::backends::stencil_tile`]). Each work-group loads
//! its outputs' neighbourhood into local memory once, with 16-byte loads away from the
//! borders; the user function reads its window from there (`SKEL_WINDOW_SPACE` `__local`),
//! or from a private copy where the plan keeps windows in registers.
//! With `Edge::None` the output's current values are made valid on the device first, since
//! border outputs are left as they were.

use std::fmt::Write as _;

use super::context::Ctx;
use super::program_cache::{program, ProgKey};
use super::{
    check_local, checked_call_expr, checked_source_head, cty, fault, fault_param, launch, memory,
    push_uniforms, uniform_params, CallShape, KArg,
};
use crate::backends::jit::interned;
use crate::backends::stencil_tile::{edge_code, Plan};
use crate::backends::Stencil;
use crate::containers::{Arg, ArgMut};
use crate::plan::{Axis, Edge};
use crate::userfn::{StencilFn, Window2Fn, WindowFn};
use crate::Result;

const TEMPLATE: &str = include_str!("../../../opencl/map_overlap.cl");

fn source<F: StencilFn>(ctx: &Ctx, plan: &Plan, checked: bool) -> Result<String> {
    let def = F::definition();
    let space = if plan.regwin() {
        "__private"
    } else {
        "__local"
    };
    let (mut s, entries) = checked_source_head(ctx, space, &[def], checked)?;
    let shape = CallShape {
        pos: "0",
        base: "0",
        array: "",
        window: ("(w)", "(long)(s)"),
    };
    let _ = writeln!(s, "#define SKEL_T {}", cty::<F::Elem>());
    let _ = writeln!(s, "#define SKEL_OUT_T {}", cty::<F::Out>());
    for (name, value) in plan.defines() {
        let _ = writeln!(s, "#define {name} {value}");
    }
    let _ = writeln!(
        s,
        "#define SKEL_UPARAMS {}{}",
        uniform_params(def, ""),
        fault_param(checked)
    );
    let _ = writeln!(
        s,
        "#define SKEL_CALL(w, s) {}",
        checked_call_expr(def, &entries[0], &shape, "", checked)
    );
    s.push_str(TEMPLATE);
    Ok(s)
}

fn run<F: StencilFn>(
    ctx: &Ctx,
    plan: Plan,
    input: Arg<'_, F::Elem>,
    out: ArgMut<'_, F::Out>,
    pad: &F::Elem,
    uniforms: &F::Uniforms,
    checked: bool,
) -> Result<()> {
    if plan.rows == 0 || plan.cols == 0 {
        return Ok(());
    }
    let plan = plan.fit_block(ctx.wg);
    let (tile, pitch) = match (plan.shared_bytes(), plan.pitch()) {
        (Some(t), Some(p)) => (t, p),
        _ => (usize::MAX, 0),
    };
    check_local(ctx, tile, "MapOverlap (the window's tile)")?;
    let variant = if checked {
        interned(plan.variant() + "_checked")
    } else {
        interned(plan.variant())
    };
    let p = program(ctx, ProgKey::of::<F>(variant), F::NAME, || {
        source::<F>(ctx, &plan, checked)
    })?;
    let in_mem = memory::input(ctx, &input)?;
    let out_mem = memory::output(ctx, &out, plan.edge == Edge::None)?;
    let mut args = vec![
        KArg::Mem(in_mem),
        KArg::U64(input.offset() as u64),
        KArg::Mem(out_mem),
        KArg::U64(out.offset() as u64),
        KArg::I64(plan.rows as i64),
        KArg::I64(plan.cols as i64),
        KArg::I32(pitch),
        KArg::I32(edge_code(plan.edge)),
        KArg::value(pad),
        KArg::Local(tile),
    ];
    push_uniforms(uniforms, &mut args);
    let rec = fault::record_if(ctx, checked)?;
    args.extend(rec.iter().map(|r| KArg::Mem(r.clone())));
    let (tile_rows, tile_cols) = plan.tile_outputs();
    let (bx, by) = (plan.layout.bx, plan.layout.by);
    let ev = launch(
        ctx,
        &p,
        "skel_map_overlap",
        &args,
        2,
        [
            plan.cols.div_ceil(tile_cols) * bx,
            plan.rows.div_ceil(tile_rows) * by,
            1,
        ],
        Some([bx, by, 1]),
    )?;
    fault::settle(ctx, rec.as_ref(), &[F::definition()], &out, ev)
}

pub(super) fn run_1d<F: WindowFn>(
    ctx: &Ctx,
    input: Arg<'_, F::Elem>,
    out: ArgMut<'_, F::Out>,
    stencil: Stencil<F::Elem, usize>,
    axis: Axis,
    uniforms: &F::Uniforms,
    checked: bool,
) -> Result<()> {
    let plan = Plan::one_d(axis, input.shape(), &stencil);
    run::<F>(ctx, plan, input, out, &stencil.pad, uniforms, checked)
}

pub(super) fn run_2d<F: Window2Fn>(
    ctx: &Ctx,
    input: Arg<'_, F::Elem>,
    out: ArgMut<'_, F::Out>,
    stencil: Stencil<F::Elem, (usize, usize)>,
    uniforms: &F::Uniforms,
    checked: bool,
) -> Result<()> {
    let plan = Plan::two_d(input.shape(), &stencil);
    run::<F>(ctx, plan, input, out, &stencil.pad, uniforms, checked)
}
