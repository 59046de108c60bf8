//! MapReduce on OpenCL: `reduce.cl` instantiated with the map applied at load time
//! (`skel_map_reduce`, no intermediate buffer), then the plain `skel_reduce` over the
//! per-group partials on the device; the final value is folded with `start` on the host.

use std::fmt::Write as _;

use ocl::core as cl;

use super::context::Ctx;
use super::program_cache::{program, ProgKey};
use super::{
    arrays, chain, checked_call_expr, checked_source_head, cty, fault, memory, push_uniforms,
    reduce, uniform_params, CallShape, Inputs, KArg, OpenCl,
};
use crate::backends::chain::Reads;
use crate::backends::{BinaryFn, ContainerOps};
use crate::codegen::FnDef;
use crate::containers::{ArgMut, Shape};
use crate::plan::ArgTuple;
use crate::userfn::ElementwiseFn;
use crate::Result;

/// Only a comment: MapReduce is `reduce.cl` instantiated twice.
const TEMPLATE: &str = include_str!("../../../opencl/map_reduce.cl");

fn source<M: ElementwiseFn, R: BinaryFn<M::Out>>(
    ctx: &Ctx,
    plan: &reduce::Plan,
    checked: bool,
    reads: &Reads,
) -> Result<String> {
    let mdef = M::definition();
    let defs = reads.with_defs(&[mdef, R::definition()]);
    let (mut s, entries) = checked_source_head(ctx, "__global", &defs, checked)?;
    let _ = writeln!(s, "#define SKEL_T {}", cty::<M::Out>());
    let _ = writeln!(
        s,
        "#define SKEL_F(a, b) {}({}(a), (b))",
        entries[1],
        fault::arg(checked)
    );
    fault::defines(&mut s, checked);
    let shape = CallShape {
        pos: "p",
        base: "skel_base",
        array: "(ca0 + ca0_off)",
        window: ("", ""),
    };
    let load_params = format!(
        ", ulong cols, ulong skel_base{}{}{}",
        arrays::container_params(mdef, ""),
        chain::fused_elem_params(mdef, reads),
        uniform_params(mdef, "")
    );
    let load = checked_call_expr(mdef, &entries[0], &shape, "", checked);
    let load = chain::fuse_call(load, reads, &shape, (&defs, &entries), checked);
    plan.defines(&mut s);
    s.push_str(TEMPLATE);
    reduce::instantiate(&mut s, "skel_map_reduce", &load_params, &load);
    reduce::plain(&mut s, plan);
    reduce::into_kernel(&mut s);
    Ok(s)
}

pub(super) fn run<'a, 'c, M, R, I>(
    ctx: &Ctx,
    arrays: ContainerOps<'c, M>,
    inputs: I,
    shape: Shape,
    uniforms: &M::Uniforms,
    start: M::Out,
    exec: &OpenCl,
) -> Result<M::Out>
where
    M: ElementwiseFn,
    R: BinaryFn<M::Out>,
    I: ArgTuple<'a, Elems = M::Elems>,
{
    let total = run_to::<M, R, I>(ctx, (arrays, inputs, shape, uniforms), start, None, exec)?;
    total.ok_or_else(|| crate::Error::Driver("internal: empty MapReduce result".into()))
}

/// The program of `M` mapped and `R` reducing over `reads` (also the rows of
/// `MapReduce::run_rows`: one work-group per row, as `Reduce::run_rows` folds wide rows).
fn prog<M: ElementwiseFn, R: BinaryFn<M::Out>>(
    ctx: &Ctx,
    reads: &Reads,
    checked: bool,
) -> Result<(cl::Program, reduce::Plan, Vec<&'static FnDef>)> {
    let defs = reads.with_defs(&[M::definition(), R::definition()]);
    let plan = reduce::plan_for::<M::Out>(ctx, "MapReduce", &defs)?;
    let kind = if checked {
        "map_reduce_checked"
    } else {
        "map_reduce"
    };
    let key = ProgKey::of::<(M, R)>(kind).chained(reads.key());
    let p = program(ctx, key, M::NAME, || {
        source::<M, R>(ctx, &plan, checked, reads)
    })?;
    Ok((p, plan, defs))
}

/// The load parameters of `skel_map_reduce` (after its first four): `cols`, the index
/// base, the container arguments, the inputs (uploaded), the uniforms.
fn load_args<'a, 'c, M: ElementwiseFn, I: ArgTuple<'a, Elems = M::Elems>>(
    ctx: &Ctx,
    (arrays, inputs, shape, uniforms): (ContainerOps<'c, M>, I, Shape, &M::Uniforms),
    index_base: usize,
) -> Result<Vec<KArg>> {
    let mut args = vec![
        KArg::U64(shape.cols().max(1) as u64),
        KArg::U64(index_base as u64),
    ];
    arrays::push(ctx, &arrays, &mut args)?;
    let mut up = Inputs { ctx, args };
    inputs.visit(&mut up)?;
    let mut args = up.args;
    push_uniforms(uniforms, &mut args);
    Ok(args)
}

/// `MapReduce::run_rows` of rows wider than a work-item's share of a tile, fused: one
/// work-group per row of `M` over the inputs, folded as `Reduce::run_rows` folds the
/// materialised rows. `false` (nothing run) for narrower rows, which the caller
/// materialises.
pub(super) fn rows<'a, 'c, M, R, I>(
    ctx: &Ctx,
    call: (ContainerOps<'c, M>, I, Shape, &M::Uniforms),
    out: &ArgMut<'_, M::Out>,
    exec: &OpenCl,
) -> Result<bool>
where
    M: ElementwiseFn,
    R: BinaryFn<M::Out>,
    I: ArgTuple<'a, Elems = M::Elems>,
{
    let (rows, cols) = call.2.dims();
    let reads = Reads::of(&call.1)?;
    let (p, plan, defs) = prog::<M, R>(ctx, &reads, exec.checked)?;
    if cols <= plan.items {
        return Ok(false);
    }
    if rows == 0 {
        return Ok(true);
    }
    let mut args = load_args::<M, I>(ctx, call, exec.index_base)?;
    let rec = fault::record_if(ctx, exec.checked)?;
    args.extend(rec.iter().map(|r| KArg::Mem(r.clone())));
    let out_mem = memory::output(ctx, out, false)?;
    let split = (cols, rows);
    let ev = reduce::pass(
        ctx,
        &plan,
        &p,
        "skel_map_reduce",
        args,
        rows * cols,
        split,
        &out_mem,
        out.offset(),
    )?;
    fault::settle(ctx, rec.as_ref(), &defs, out, ev)?;
    Ok(true)
}

/// [`run`]; with `into` the result, `start` folded in, is written to the one-element
/// output on the device (`Ok(None)`).
pub(super) fn run_to<'a, 'c, M, R, I>(
    ctx: &Ctx,
    call: (ContainerOps<'c, M>, I, Shape, &M::Uniforms),
    start: M::Out,
    into: Option<&mut ArgMut<'_, M::Out>>,
    exec: &OpenCl,
) -> Result<Option<M::Out>>
where
    M: ElementwiseFn,
    R: BinaryFn<M::Out>,
    I: ArgTuple<'a, Elems = M::Elems>,
{
    let (checked, index_base) = (exec.checked, exec.index_base);
    let (_, inputs, shape, _) = call;
    let n = shape.len();
    if n == 0 {
        return match into {
            Some(out) => {
                out.host_overwrite()?[0] = start;
                Ok(None)
            }
            None => Ok(Some(start)),
        };
    }
    let reads = Reads::of(&inputs)?;
    let (p, plan, defs) = prog::<M, R>(ctx, &reads, checked)?;
    let args = load_args::<M, I>(ctx, call, index_base)?;
    let rec = fault::record_if(ctx, checked)?;
    let fault = (rec.as_ref(), &defs[..]);
    if let Some(out) = into {
        let into = Some((&*out, start));
        return reduce::two_pass_to::<M::Out>(
            ctx,
            &plan,
            &p,
            "skel_map_reduce",
            args,
            n,
            fault,
            into,
        );
    }
    let total = reduce::two_pass::<M::Out>(ctx, &plan, &p, "skel_map_reduce", args, n, fault)?;
    crate::check::host_call(R::NAME, || R::apply((), (start, total), &())).map(Some)
}
