//! MapArray on OpenCL: one work-item per output element, the whole array passed as a
//! `__global` pointer and uploaded once (`opencl/map_array.cl`).

use std::fmt::Write as _;

use super::context::Ctx;
use super::program_cache::{program, ProgKey};
use super::{
    arrays, checked_call_expr, checked_source_head, cty, elem_params, fault, fault_param, launch,
    memory, push_uniforms, round_up, uniform_params, CallShape, Inputs, KArg, OpenCl,
};
use crate::containers::{Arg, ArgMut};
use crate::plan::ArgTuple;
use crate::userfn::ArrayFn;
use crate::Result;

const TEMPLATE: &str = include_str!("../../../opencl/map_array.cl");

fn source<F: ArrayFn>(ctx: &Ctx, checked: bool) -> Result<String> {
    let def = F::definition();
    let (mut s, entries) = checked_source_head(ctx, "__global", &[def], checked)?;
    // The array is a container argument (`ca0`, its offset, rows and columns).
    let shape = CallShape {
        pos: "i",
        base: "skel_base",
        array: "(ca0 + ca0_off)",
        window: ("", ""),
    };
    let _ = writeln!(s, "#define SKEL_OUT_T {}", cty::<F::Out>());
    let _ = writeln!(
        s,
        "#define SKEL_PARAMS {}{}{}{}",
        arrays::container_params(def, ""),
        elem_params(def, ""),
        uniform_params(def, ""),
        fault_param(checked)
    );
    let _ = writeln!(
        s,
        "#define SKEL_CALL(i) {}",
        checked_call_expr(def, &entries[0], &shape, "", checked)
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
    exec: &OpenCl,
) -> Result<()>
where
    F: ArrayFn,
    I: ArgTuple<'a, Elems = F::Elems>,
{
    let (checked, index_base) = (exec.checked, exec.index_base);
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
    let mut args = vec![
        KArg::Mem(out_mem),
        KArg::U64(out.offset() as u64),
        KArg::U64(n as u64),
        KArg::U64(out.shape().cols().max(1) as u64),
        KArg::U64(index_base as u64),
    ];
    arrays::push(ctx, &(array,), &mut args)?;
    let mut up = Inputs { ctx, args };
    inputs.visit(&mut up)?;
    let mut args = up.args;
    push_uniforms(uniforms, &mut args);
    let rec = checked.then(|| fault::record(ctx)).transpose()?;
    args.extend(rec.iter().map(|r| KArg::Mem(r.clone())));
    // Smaller work-groups where the user function's local arrays need it (CPU devices).
    let wg = super::program_cache::fit_work_group(ctx, &prog, "skel_map_array")?;
    let ev = launch(
        ctx,
        &prog,
        "skel_map_array",
        &args,
        1,
        [round_up(n, wg), 1, 1],
        Some([wg, 1, 1]),
    )?;
    if let Some(rec) = rec {
        return match fault::read(ctx, &rec, &[F::definition()]) {
            Ok(None) => {
                memory::written(ctx, &out, ev);
                Ok(())
            }
            Ok(Some(err)) => {
                memory::discarded(ctx, &out, ev);
                Err(err)
            }
            // the record could not be read: as after any failed call
            Err(e) => {
                memory::maybe_written(ctx, &out, ev);
                Err(e)
            }
        };
    }
    memory::written(ctx, &out, ev);
    Ok(())
}
