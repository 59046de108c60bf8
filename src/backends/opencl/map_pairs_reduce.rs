//! MapPairsReduce on OpenCL (`opencl/map_pairs.cl`, `skel_pairs_fold`): one work-item per
//! result folds its row (or column) of pairs in order, reading the other operand from
//! local memory, staged once per work-group and stage.

use std::fmt::Write as _;

use super::context::Ctx;
use super::map_pairs::{pair_head, TEMPLATE};
use super::program_cache::{program, ProgKey};
use super::{arrays, check_local, cty, fault, launch, memory, push_uniforms, round_up, KArg};
use crate::backends::{BinaryFn, ContainerOps};
use crate::containers::{Arg, ArgMut};
use crate::plan::Axis;
use crate::userfn::ElementwiseFn;
use crate::{DeviceType, Result};

fn source<M, R, A, B>(ctx: &Ctx, cols: bool, checked: bool) -> Result<String>
where
    M: ElementwiseFn<Elems = (A, B)>,
    R: BinaryFn<M::Out>,
    A: DeviceType,
    B: DeviceType,
{
    let types = (cty::<A>(), cty::<B>(), cty::<M::Out>());
    let defs = [M::definition(), R::definition()];
    let (mut s, entries) = pair_head(ctx, &defs, types, checked)?;
    let _ = writeln!(
        s,
        "#define SKEL_F(a, b) {}({}(a), (b))",
        entries[1],
        fault::arg(checked)
    );
    let _ = writeln!(s, "#define SKEL_COLS {}", u8::from(cols));
    s.push_str(TEMPLATE);
    Ok(s)
}

#[allow(clippy::too_many_arguments)]
pub(super) fn run<'c, M, R, A, B>(
    ctx: &Ctx,
    arrays: ContainerOps<'c, M>,
    v: Arg<'_, A>,
    h: Arg<'_, B>,
    out: ArgMut<'_, M::Out>,
    axis: Axis,
    uniforms: &M::Uniforms,
    checked: bool,
) -> Result<()>
where
    M: ElementwiseFn<Elems = (A, B)>,
    R: BinaryFn<M::Out>,
    A: DeviceType,
    B: DeviceType,
{
    let (rows, cols) = (v.shape().len(), h.shape().len());
    let by_cols = axis == Axis::Cols;
    let (n_own, n_fold, other_size) = if by_cols {
        (cols, rows, std::mem::size_of::<A>())
    } else {
        (rows, cols, std::mem::size_of::<B>())
    };
    if n_own == 0 || n_fold == 0 {
        return Ok(());
    }
    let stage = ctx.wg * other_size;
    check_local(ctx, stage, "MapPairsReduce (the staged operand)")?;
    let kind = match (by_cols, checked) {
        (true, false) => "map_pairs_cols",
        (true, true) => "map_pairs_cols_checked",
        (false, false) => "map_pairs_rows",
        (false, true) => "map_pairs_rows_checked",
    };
    let prog = program(ctx, ProgKey::of::<(M, R, A, B)>(kind), M::NAME, || {
        source::<M, R, A, B>(ctx, by_cols, checked)
    })?;
    let (v_mem, h_mem) = (memory::input(ctx, &v)?, memory::input(ctx, &h)?);
    let (v_arg, h_arg) = (
        [KArg::Mem(v_mem), KArg::U64(v.offset() as u64)],
        [KArg::Mem(h_mem), KArg::U64(h.offset() as u64)],
    );
    let (own, other) = if by_cols {
        (h_arg, v_arg)
    } else {
        (v_arg, h_arg)
    };
    let out_mem = memory::output(ctx, &out, false)?;
    let mut args = vec![KArg::Mem(out_mem), KArg::U64(out.offset() as u64)];
    args.extend(own);
    args.extend(other);
    args.extend([
        KArg::U64(n_own as u64),
        KArg::U64(n_fold as u64),
        KArg::U64(cols as u64),
        KArg::Local(stage),
    ]);
    arrays::push(ctx, &arrays, &mut args)?;
    push_uniforms(uniforms, &mut args);
    let rec = fault::record_if(ctx, checked)?;
    args.extend(rec.iter().map(|r| KArg::Mem(r.clone())));
    let ev = launch(
        ctx,
        &prog,
        "skel_pairs_fold",
        &args,
        1,
        [round_up(n_own, ctx.wg), 1, 1],
        Some([ctx.wg, 1, 1]),
    )?;
    let defs = [M::definition(), R::definition()];
    fault::settle(ctx, rec.as_ref(), &defs, &out, ev)
}
