//! MapReduce on OpenCL: `reduce.cl` instantiated with the map applied at load time
//! (`skel_map_reduce`, no intermediate buffer), then the plain `skel_reduce` over the
//! per-group partials on the device; the final value is folded with `start` on the host.

use std::fmt::Write as _;

use super::context::Ctx;
use super::program_cache::{program, ProgKey};
use super::{
    arrays, call_expr, cty, elem_params, push_uniforms, reduce, source_head, uniform_params,
    CallShape, Inputs, KArg,
};
use crate::backends::{BinaryFn, ContainerOps};
use crate::containers::Shape;
use crate::plan::ArgTuple;
use crate::userfn::ElementwiseFn;
use crate::Result;

/// Only a comment: MapReduce is `reduce.cl` instantiated twice.
const TEMPLATE: &str = include_str!("../../../opencl/map_reduce.cl");

fn source<M: ElementwiseFn, R: BinaryFn<M::Out>>(ctx: &Ctx, plan: &reduce::Plan) -> Result<String> {
    let mdef = M::definition();
    let (mut s, entries) = source_head(ctx, "__global", &[mdef, R::definition()])?;
    let _ = writeln!(s, "#define SKEL_T {}", cty::<M::Out>());
    let _ = writeln!(s, "#define SKEL_F(a, b) {}((a), (b))", entries[1]);
    let shape = CallShape {
        pos: "p",
        array: "(ca0 + ca0_off)",
        window: ("", ""),
    };
    let load_params = format!(
        ", ulong cols{}{}{}",
        arrays::container_params(mdef, ""),
        elem_params(mdef, ""),
        uniform_params(mdef, "")
    );
    let load = call_expr(mdef, &entries[0], &shape, "");
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
) -> Result<M::Out>
where
    M: ElementwiseFn,
    R: BinaryFn<M::Out>,
    I: ArgTuple<'a, Elems = M::Elems>,
{
    let n = shape.len();
    if n == 0 {
        return Ok(start);
    }
    let plan = reduce::plan_for::<M::Out>(ctx, "MapReduce")?;
    let p = program(ctx, ProgKey::of::<(M, R)>("map_reduce"), M::NAME, || {
        source::<M, R>(ctx, &plan)
    })?;
    let mut args = vec![KArg::U64(shape.cols().max(1) as u64)];
    arrays::push(ctx, &arrays, &mut args)?;
    let mut up = Inputs { ctx, args };
    inputs.visit(&mut up)?;
    let mut args = up.args;
    push_uniforms(uniforms, &mut args);
    let total = reduce::two_pass::<M::Out>(ctx, &plan, &p, "skel_map_reduce", args, n)?;
    Ok(R::apply((), (start, total), &()))
}
