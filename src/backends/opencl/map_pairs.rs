//! MapPairs on OpenCL (`opencl/map_pairs.cl`): each work-group stages the slices of `v`
//! and `h` its tile of outputs needs in local memory, once, and computes the tile from
//! there.

use std::fmt::Write as _;

use super::context::Ctx;
use super::program_cache::{program, ProgKey};
use super::{
    arrays, check_local, checked_source_head, cty, fault, fault_param, launch, memory,
    push_uniforms, round_up, uniform_params, KArg,
};
use crate::backends::args::call_args;
use crate::backends::ContainerOps;
use crate::codegen::ir::{FnDef, ParamKind};
use crate::containers::{Arg, ArgMut};
use crate::userfn::ElementwiseFn;
use crate::{DeviceType, Result};

pub(super) const TEMPLATE: &str = include_str!("../../../opencl/map_pairs.cl");

/// Widest tile (work-items along a row of outputs).
const TW: usize = 32;

/// The source up to the template for pair function `defs[0]` (and the other `defs`, e.g.
/// a reduce function): user functions, `SKEL_A_T`, `SKEL_B_T`, `SKEL_OUT_T`,
/// `SKEL_UPARAMS` and `SKEL_PAIR(p, q, i, j)`, the call on elements `p` of `v` and `q` of
/// `h` at pair `(i, j)`. Returns it with the C names of `defs`.
pub(super) fn pair_head(
    ctx: &Ctx,
    defs: &[&'static FnDef],
    (a, b, out): (String, String, String),
    checked: bool,
) -> Result<(String, Vec<String>)> {
    let (mut s, entries) = checked_source_head(ctx, "__global", defs, checked)?;
    let def = defs[0];
    let (mut e, mut u, mut c) = (0, 0, 0);
    let args: Vec<String> = def
        .params
        .iter()
        .map(|p| match p.kind {
            ParamKind::Array | ParamKind::Mat => {
                c += 1;
                let name = format!("ca{}", c - 1);
                call_args(def, p, &format!("({name} + {name}_off)"), &name, checked)
            }
            ParamKind::IndexRow => "(ulong)(i)".to_string(),
            ParamKind::IndexCol => "(ulong)(j)".to_string(),
            ParamKind::Elem => {
                e += 1;
                ["(p)", "(q)"][(e - 1).min(1)].to_string()
            }
            ParamKind::Uniform => {
                u += 1;
                format!("u{}", u - 1)
            }
            // A 1D index (the only kind left for an element-wise function): the flat
            // position in the matrix of pairs.
            _ => "(ulong)((i) * cols + (j))".to_string(),
        })
        .collect();
    let _ = writeln!(s, "#define SKEL_A_T {a}");
    let _ = writeln!(s, "#define SKEL_B_T {b}");
    let _ = writeln!(s, "#define SKEL_OUT_T {out}");
    let _ = writeln!(
        s,
        "#define SKEL_UPARAMS {}{}{}",
        arrays::container_params(def, ""),
        uniform_params(def, ""),
        fault_param(checked)
    );
    let _ = writeln!(
        s,
        "#define SKEL_PAIR(p, q, i, j) {}({}{})",
        entries[0],
        fault::arg(checked),
        args.join(", ")
    );
    Ok((s, entries))
}

/// The tile of a work-group of `wg` work-items: `(width, height)`, exactly `wg`.
fn tile(wg: usize) -> (usize, usize) {
    let tw = TW.min(wg).max(1);
    (tw, (wg / tw).max(1))
}

fn source<F, A, B>(ctx: &Ctx, checked: bool) -> Result<String>
where
    F: ElementwiseFn<Elems = (A, B)>,
    A: DeviceType,
    B: DeviceType,
{
    let types = (cty::<A>(), cty::<B>(), cty::<F::Out>());
    let (mut s, _) = pair_head(ctx, &[F::definition()], types, checked)?;
    let (tw, th) = tile(ctx.wg);
    let _ = writeln!(s, "#define SKEL_TW {tw}\n#define SKEL_TH {th}");
    s.push_str(TEMPLATE);
    Ok(s)
}

pub(super) fn run<'c, F, A, B>(
    ctx: &Ctx,
    arrays: ContainerOps<'c, F>,
    v: Arg<'_, A>,
    h: Arg<'_, B>,
    out: ArgMut<'_, F::Out>,
    uniforms: &F::Uniforms,
    checked: bool,
) -> Result<()>
where
    F: ElementwiseFn<Elems = (A, B)>,
    A: DeviceType,
    B: DeviceType,
{
    let (rows, cols) = (v.shape().len(), h.shape().len());
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let (tw, th) = tile(ctx.wg);
    let (v_tile, h_tile) = (th * std::mem::size_of::<A>(), tw * std::mem::size_of::<B>());
    check_local(ctx, v_tile + h_tile, "MapPairs (the tile of v and h)")?;
    let kind = if checked {
        "map_pairs_checked"
    } else {
        "map_pairs"
    };
    let prog = program(ctx, ProgKey::of::<(F, A, B)>(kind), F::NAME, || {
        source::<F, A, B>(ctx, checked)
    })?;
    let (v_mem, h_mem) = (memory::input(ctx, &v)?, memory::input(ctx, &h)?);
    let out_mem = memory::output(ctx, &out, false)?;
    let mut args = vec![
        KArg::Mem(out_mem),
        KArg::U64(out.offset() as u64),
        KArg::Mem(v_mem),
        KArg::U64(v.offset() as u64),
        KArg::Mem(h_mem),
        KArg::U64(h.offset() as u64),
        KArg::U64(rows as u64),
        KArg::U64(cols as u64),
        KArg::Local(v_tile),
        KArg::Local(h_tile),
    ];
    arrays::push(ctx, &arrays, &mut args)?;
    push_uniforms(uniforms, &mut args);
    let rec = fault::record_if(ctx, checked)?;
    args.extend(rec.iter().map(|r| KArg::Mem(r.clone())));
    let ev = launch(
        ctx,
        &prog,
        "skel_map_pairs",
        &args,
        2,
        [round_up(cols, tw), round_up(rows, th), 1],
        Some([tw, th, 1]),
    )?;
    fault::settle(ctx, rec.as_ref(), &[F::definition()], &out, ev)
}
