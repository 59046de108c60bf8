//! Map on OpenCL: one work-item per output element (`opencl/map.cl`), over a 2D range for
//! compute-bound 2D index maps.

use std::fmt::Write as _;

use super::context::Ctx;
use super::program_cache::{program, ProgKey};
use super::{
    call_expr, cty, elem_params, launch, memory, push_uniforms, round_up, source_head,
    uniform_params, CallShape, Inputs, KArg,
};
use crate::codegen::cost::{classify, Cost};
use crate::codegen::ir::{FnDef, ParamKind};
use crate::containers::ArgMut;
use crate::plan::ArgTuple;
use crate::userfn::ElementwiseFn;
use crate::Result;

const TEMPLATE: &str = include_str!("../../../opencl/map.cl");

fn source<F: ElementwiseFn>(ctx: &Ctx) -> Result<String> {
    let def = F::definition();
    let (mut s, entries) = source_head(ctx, "__global", &[def])?;
    let shape = CallShape {
        pos: "i",
        array: "",
        window: ("", ""),
    };
    let _ = writeln!(s, "#define SKEL_OUT_T {}", cty::<F::Out>());
    let _ = writeln!(
        s,
        "#define SKEL_PARAMS {}{}",
        elem_params(def, ""),
        uniform_params(def, "")
    );
    let call = call_expr(def, &entries[0], &shape, "");
    if grid_2d(def) {
        let call2 = call
            .replace("(ulong)((i) / cols)", "(ulong)(row)")
            .replace("(ulong)((i) % cols)", "(ulong)(col)");
        let _ = writeln!(s, "#define SKEL_GRID2D 1");
        let _ = writeln!(s, "#define SKEL_CALL2(i, row, col) {call2}");
    }
    let _ = writeln!(s, "#define SKEL_CALL(i) {call}");
    s.push_str(TEMPLATE);
    Ok(s)
}

/// Whether `def` is a 2D index map that runs long enough per element to launch as a 2D
/// range (its cost class is not memory-bound).
fn grid_2d(def: &'static FnDef) -> bool {
    def.params.iter().any(|p| p.kind == ParamKind::IndexRow) && classify(def) != Cost::Memory
}

pub(super) fn run<'a, F, I>(
    ctx: &Ctx,
    inputs: I,
    out: ArgMut<'_, F::Out>,
    uniforms: &F::Uniforms,
) -> Result<()>
where
    F: ElementwiseFn,
    I: ArgTuple<'a, Elems = F::Elems>,
{
    let n = out.shape().len();
    if n == 0 {
        return Ok(());
    }
    let prog = program(ctx, ProgKey::of::<F>("map"), F::NAME, || source::<F>(ctx))?;
    let out_mem = memory::output(ctx, &out, false)?;
    let cols = out.shape().cols().max(1);
    let mut up = Inputs {
        ctx,
        args: vec![
            KArg::Mem(out_mem),
            KArg::U64(out.offset() as u64),
            KArg::U64(n as u64),
            KArg::U64(cols as u64),
        ],
    };
    inputs.visit(&mut up)?;
    let mut args = up.args;
    push_uniforms(uniforms, &mut args);
    let (dims, global, local) = if grid_2d(F::definition()) {
        let wide = 16.min(ctx.wg);
        let tall = ctx.wg / wide;
        let rows = n.div_ceil(cols);
        (
            2,
            [round_up(cols, wide), round_up(rows, tall), 1],
            [wide, tall, 1],
        )
    } else {
        (1, [round_up(n, ctx.wg), 1, 1], [ctx.wg, 1, 1])
    };
    let ev = launch(ctx, &prog, "skel_map", &args, dims, global, Some(local))?;
    memory::written(ctx, &out, ev);
    Ok(())
}
