//! MapReduce on OpenCL: `reduce.cl` instantiated with the map applied at load time
//! (`skel_map_reduce`, no intermediate buffer), then the plain `skel_reduce` over the
//! per-group partials on the device; the final value is folded with `start` on the host.

use std::fmt::Write as _;

use super::context::Ctx;
use super::program_cache::{program, ProgKey};
use super::{
    arrays, chain, checked_call_expr, checked_source_head, cty, fault, push_uniforms, reduce,
    uniform_params, CallShape, Inputs, KArg, OpenCl,
};
use crate::backends::chain::Reads;
use crate::backends::{BinaryFn, ContainerOps};
use crate::containers::Shape;
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
    let (checked, index_base) = (exec.checked, exec.index_base);
    let n = shape.len();
    if n == 0 {
        return Ok(start);
    }
    let reads = Reads::of(&inputs)?;
    let defs = reads.with_defs(&[M::definition(), R::definition()]);
    let plan = reduce::plan_for::<M::Out>(ctx, "MapReduce", &defs)?;
    let kind = if checked {
        "map_reduce_checked"
    } else {
        "map_reduce"
    };
    let key = ProgKey::of::<(M, R)>(kind).chained(reads.key());
    let p = program(ctx, key, M::NAME, || {
        source::<M, R>(ctx, &plan, checked, &reads)
    })?;
    let mut args = vec![
        KArg::U64(shape.cols().max(1) as u64),
        KArg::U64(index_base as u64),
    ];
    arrays::push(ctx, &arrays, &mut args)?;
    let mut up = Inputs { ctx, args };
    inputs.visit(&mut up)?;
    let mut args = up.args;
    push_uniforms(uniforms, &mut args);
    let rec = fault::record_if(ctx, checked)?;
    let fault = (rec.as_ref(), &defs[..]);
    let total = reduce::two_pass::<M::Out>(ctx, &plan, &p, "skel_map_reduce", args, n, fault)?;
    crate::check::host_call(R::NAME, || R::apply((), (start, total), &()))
}
