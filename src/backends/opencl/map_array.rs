//! MapArray on OpenCL: one work-item per output element, the whole array passed as a
//! `__global` pointer and uploaded once (`opencl/map_array.cl`).

use std::fmt::Write as _;

use super::context::Ctx;
use super::program_cache::{program, ProgKey};
use super::{
    arrays, call_expr, cty, elem_params, launch, memory, push_uniforms, round_up, source_head,
    uniform_params, CallShape, Inputs, KArg,
};
use crate::containers::{Arg, ArgMut};
use crate::plan::ArgTuple;
use crate::userfn::ArrayFn;
use crate::Result;

const TEMPLATE: &str = include_str!("../../../opencl/map_array.cl");

fn source<F: ArrayFn>(ctx: &Ctx) -> Result<String> {
    let def = F::definition();
    let (mut s, entries) = source_head(ctx, "__global", &[def])?;
    // The array is a container argument (`ca0`, its offset, rows and columns).
    let shape = CallShape {
        pos: "i",
        array: "(ca0 + ca0_off)",
        window: ("", ""),
    };
    let _ = writeln!(s, "#define SKEL_OUT_T {}", cty::<F::Out>());
    let _ = writeln!(
        s,
        "#define SKEL_PARAMS {}{}{}",
        arrays::container_params(def, ""),
        elem_params(def, ""),
        uniform_params(def, "")
    );
    let _ = writeln!(
        s,
        "#define SKEL_CALL(i) {}",
        call_expr(def, &entries[0], &shape, "")
    );
    s.push_str(TEMPLATE);
    Ok(s)
}

pub(super) fn run<'a, F, I>(
    ctx: &Ctx,
    array: Arg<'_, F::Array>,
    inputs: I,
    out: ArgMut<'_, F::Out>,
    uniforms: &F::Uniforms,
) -> Result<()>
where
    F: ArrayFn,
    I: ArgTuple<'a, Elems = F::Elems>,
{
    let n = out.shape().len();
    if n == 0 {
        return Ok(());
    }
    let prog = program(ctx, ProgKey::of::<F>("map_array"), F::NAME, || {
        source::<F>(ctx)
    })?;
    let out_mem = memory::output(ctx, &out, false)?;
    let mut args = vec![
        KArg::Mem(out_mem),
        KArg::U64(out.offset() as u64),
        KArg::U64(n as u64),
        KArg::U64(out.shape().cols().max(1) as u64),
    ];
    arrays::push(ctx, &(array,), &mut args)?;
    let mut up = Inputs { ctx, args };
    inputs.visit(&mut up)?;
    let mut args = up.args;
    push_uniforms(uniforms, &mut args);
    let ev = launch(
        ctx,
        &prog,
        "skel_map_array",
        &args,
        1,
        [round_up(n, ctx.wg), 1, 1],
        Some([ctx.wg, 1, 1]),
    )?;
    memory::written(ctx, &out, ev);
    Ok(())
}
