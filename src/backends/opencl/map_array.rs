//! MapArray on OpenCL: one work-item per output element, the whole array passed as a
//! `__global` pointer and uploaded once (`opencl/map_array.cl`).

use std::fmt::Write as _;

use super::context::Ctx;
use super::program_cache::{program, ProgKey};
use super::{
    array_ty, call_expr, checked_call, checked_source_head, cty, elem_params, fault, fault_param,
    launch, memory, push_uniforms, round_up, uniform_params, CallShape, Inputs, KArg,
};
use crate::codegen::ir::FnDef;
use crate::codegen::{array_len_param, c_type, Dialect};
use crate::containers::{Arg, ArgMut};
use crate::plan::ArgTuple;
use crate::userfn::ArrayFn;
use crate::{Error, Result};

const TEMPLATE: &str = include_str!("../../../opencl/map_array.cl");

/// Whether the kernel passes the array's length (the user function reads `.len()` of it, or
/// checks its indices).
fn with_len(def: &'static FnDef, checked: bool) -> bool {
    checked || array_len_param(def)
}

fn source<F: ArrayFn>(ctx: &Ctx, checked: bool) -> Result<String> {
    let def = F::definition();
    let (mut s, entries) = checked_source_head(ctx, "__global", &[def], checked)?;
    let aty = array_ty(def).ok_or_else(|| Error::Driver("internal: no array parameter".into()))?;
    let shape = CallShape {
        pos: "i",
        array: if with_len(def, checked) {
            "(arr + arr_off), arr_len"
        } else {
            "(arr + arr_off)"
        },
        window: ("", ""),
    };
    let _ = writeln!(s, "#define SKEL_OUT_T {}", cty::<F::Out>());
    let _ = writeln!(
        s,
        "#define SKEL_PARAMS , __global const {}* arr, ulong arr_off{}{}{}{}",
        c_type(aty, Dialect::OpenCl),
        if with_len(def, checked) {
            ", ulong arr_len"
        } else {
            ""
        },
        elem_params(def, ""),
        uniform_params(def, ""),
        fault_param(checked)
    );
    let call = call_expr(def, &entries[0], &shape, "");
    let _ = writeln!(
        s,
        "#define SKEL_CALL(i) {}",
        checked_call(&call, &entries[0], checked)
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
    checked: bool,
) -> Result<()>
where
    F: ArrayFn,
    I: ArgTuple<'a, Elems = F::Elems>,
{
    let n = out.shape().len();
    if n == 0 {
        return Ok(());
    }
    let kind = if checked {
        "map_array_checked"
    } else {
        "map_array"
    };
    let prog = program(ctx, ProgKey::of::<F>(kind), F::NAME, || {
        source::<F>(ctx, checked)
    })?;
    let out_mem = memory::output(ctx, &out, false)?;
    let arr_mem = memory::input(ctx, &array)?;
    let mut up = Inputs {
        ctx,
        args: vec![
            KArg::Mem(out_mem),
            KArg::U64(out.offset() as u64),
            KArg::U64(n as u64),
            KArg::U64(out.shape().cols().max(1) as u64),
            KArg::Mem(arr_mem),
            KArg::U64(array.offset() as u64),
        ],
    };
    if with_len(F::definition(), checked) {
        up.args.push(KArg::U64(array.shape().len() as u64));
    }
    inputs.visit(&mut up)?;
    let mut args = up.args;
    push_uniforms(uniforms, &mut args);
    let rec = checked.then(|| fault::record(ctx)).transpose()?;
    args.extend(rec.iter().map(|r| KArg::Mem(r.clone())));
    let ev = launch(
        ctx,
        &prog,
        "skel_map_array",
        &args,
        1,
        [round_up(n, ctx.wg), 1, 1],
        Some([ctx.wg, 1, 1]),
    )?;
    match rec {
        Some(rec) => fault::finish(ctx, &rec, &out, ev, &[F::definition()]),
        None => {
            memory::written(ctx, &out, ev);
            Ok(())
        }
    }
}
