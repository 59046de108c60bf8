//! Filter on OpenCL (`opencl/filter.cl`): per-group counts, one work-group scanning them
//! into output offsets, then each group writing its kept values at its offset; the total
//! is read back once.

use std::fmt::Write as _;

use super::context::Ctx;
use super::program_cache::{program, ProgKey};
use super::{
    checked_call_expr, checked_source_head, cty, elem_params, fault, fault_param, launch, memory,
    push_uniforms, uniform_params, CallShape, KArg, OpenCl,
};
use crate::backends::PredicateFn;
use crate::containers::{Arg, ArgMut};
use crate::{DeviceType, Error, Result};

const TEMPLATE: &str = include_str!("../../../opencl/filter.cl");

/// Values per work-item (at most 32: the scatter keeps one bit per value).
const K: usize = 8;

fn source<F: PredicateFn<T>, T: DeviceType>(ctx: &Ctx, checked: bool) -> Result<String> {
    let def = F::definition();
    let (mut s, entries) = checked_source_head(ctx, "__global", &[def], checked)?;
    let shape = CallShape {
        pos: "p",
        base: "skel_base",
        array: "",
        window: ("", ""),
    };
    let _ = writeln!(s, "#define SKEL_T {}", cty::<T>());
    let _ = writeln!(s, "#define SKEL_K {K}");
    let _ = writeln!(
        s,
        "#define SKEL_PARAMS , ulong skel_base{}{}{}",
        elem_params(def, ""),
        uniform_params(def, ""),
        fault_param(checked)
    );
    let _ = writeln!(
        s,
        "#define SKEL_PRED(p) {}",
        checked_call_expr(def, &entries[0], &shape, "", checked)
    );
    s.push_str(TEMPLATE);
    Ok(s)
}

pub(super) fn run<F: PredicateFn<T>, T: DeviceType>(
    ctx: &Ctx,
    input: Arg<'_, T>,
    mut out: ArgMut<'_, T>,
    uniforms: &F::Uniforms,
    exec: &OpenCl,
) -> Result<usize> {
    let (checked, index_base) = (exec.checked, exec.index_base);
    let n = input.shape().len();
    if n == 0 {
        return Ok(0);
    }
    let kind = if checked { "filter_checked" } else { "filter" };
    let prog = program(ctx, ProgKey::of::<(F, T)>(kind), F::NAME, || {
        source::<F, T>(ctx, checked)
    })?;
    let rec = fault::record_if(ctx, checked)?;
    let groups = n.div_ceil(ctx.wg * K);
    let counts = memory::alloc_elems::<u64>(ctx, groups)?;
    let total = memory::alloc_elems::<u64>(ctx, 1)?;
    let in_mem = memory::input(ctx, &input)?;
    let out_mem = memory::output(ctx, &out, false)?;
    let operands = |first: Vec<KArg>| {
        let mut args = first;
        args.push(KArg::U64(index_base as u64));
        args.push(KArg::Mem(in_mem.clone()));
        args.push(KArg::U64(input.offset() as u64));
        push_uniforms(uniforms, &mut args);
        args.extend(rec.iter().map(|r| KArg::Mem(r.clone())));
        args
    };
    let local = Some([ctx.wg, 1, 1]);
    let global = [groups * ctx.wg, 1, 1];
    let count_args = operands(vec![KArg::U64(n as u64), KArg::Mem(counts.clone())]);
    launch(
        ctx,
        &prog,
        "skel_filter_count",
        &count_args,
        1,
        global,
        local,
    )?;
    let offset_args = [
        KArg::Mem(counts.clone()),
        KArg::U64(groups as u64),
        KArg::Mem(total.clone()),
    ];
    let one = [ctx.wg, 1, 1];
    launch(
        ctx,
        &prog,
        "skel_filter_offsets",
        &offset_args,
        1,
        one,
        local,
    )?;
    let scatter_args = operands(vec![
        KArg::U64(n as u64),
        KArg::Mem(counts),
        KArg::Mem(out_mem),
        KArg::U64(out.offset() as u64),
    ]);
    let ev = launch(
        ctx,
        &prog,
        "skel_filter_scatter",
        &scatter_args,
        1,
        global,
        local,
    )?;
    // A checked call that faulted: the scatter wrote no results (it ran on any count).
    if let Some(rec) = &rec {
        if let Some(err) = fault::read(ctx, rec, &[F::definition()])? {
            memory::discarded(ctx, &out, ev);
            return Err(err);
        }
    }
    let counted = memory::read_elems::<u64>(ctx, &total, 1).and_then(|t| match t[0] as usize {
        kept if kept <= n => Ok(kept),
        kept => Err(Error::Driver(
            format!("OpenCL: Filter counted {kept} kept values out of {n}").into(),
        )),
    });
    match counted {
        Ok(kept) => {
            memory::written(ctx, &out.head(kept), ev);
            Ok(kept)
        }
        // Whatever the scatter wrote is the newest data of `out`'s first elements, but
        // only where the device copy was current: elsewhere it may be uninitialised.
        Err(e) => {
            memory::maybe_written(ctx, &out, ev);
            Err(e)
        }
    }
}
