//! MapOverlap 3D on OpenCL (`opencl/map_overlap3.cl`, the twin of the CUDA template): each
//! work-group computes a tile of (k, j) outputs for a run of planes, marching along the
//! slowest axis with the window's `2 r0 + 1` tile planes in local memory. With
//! `Edge::None` the output's current values are made valid on the device first, since
//! border outputs are left as they were.

use std::fmt::Write as _;

use super::context::Ctx;
use super::program_cache::{program, ProgKey};
use super::{
    check_local, checked_call_expr, checked_source_head, cty, fault, fault_param, launch, memory,
    push_uniforms, uniform_params, CallShape, KArg,
};
use crate::backends::jit::interned;
use crate::backends::stencil_tile::edge_code;
use crate::backends::Stencil;
use crate::containers::{Arg, ArgMut};
use crate::plan::Edge;
use crate::userfn::Window3Fn;
use crate::Result;

const TEMPLATE: &str = include_str!("../../../opencl/map_overlap3.cl");

/// Planes a work-group marches through.
const PZ: usize = 16;

/// Radii `(r0, r1, r2)`.
type Radius = (usize, usize, usize);

/// The work-group: 32 outputs along k (fewer on a device that takes fewer work-items) and
/// up to 8 rows along j.
fn block(wg: usize) -> (usize, usize) {
    let bx = wg.clamp(1, 32);
    (bx, (wg / bx).clamp(1, 8))
}

fn source<F: Window3Fn>(
    ctx: &Ctx,
    radius: Radius,
    (bx, by): (usize, usize),
    checked: bool,
) -> Result<String> {
    let def = F::definition();
    let (mut s, entries) = checked_source_head(ctx, "__local", &[def], checked)?;
    let shape = CallShape {
        pos: "0",
        base: "0",
        array: "",
        window: ("(w)", ""),
    };
    let _ = writeln!(s, "#define SKEL_T {}", cty::<F::Elem>());
    let _ = writeln!(s, "#define SKEL_OUT_T {}", cty::<F::Out>());
    for (name, value) in [
        ("SKEL_R0", radius.0),
        ("SKEL_R1", radius.1),
        ("SKEL_R2", radius.2),
        ("SKEL_BX", bx),
        ("SKEL_BY", by),
        ("SKEL_PZ", PZ),
    ] {
        let _ = writeln!(s, "#define {name} {value}");
    }
    let _ = writeln!(
        s,
        "#define SKEL_UPARAMS {}{}",
        uniform_params(def, ""),
        fault_param(checked)
    );
    let _ = writeln!(
        s,
        "#define SKEL_CALL(w) {}",
        checked_call_expr(def, &entries[0], &shape, "", checked)
    );
    s.push_str(TEMPLATE);
    Ok(s)
}

/// 3D stencil over a `dims` tensor.
pub(super) fn run_3d<F: Window3Fn>(
    ctx: &Ctx,
    input: Arg<'_, F::Elem>,
    out: ArgMut<'_, F::Out>,
    stencil: Stencil<F::Elem, Radius>,
    (d0, d1, d2): (usize, usize, usize),
    uniforms: &F::Uniforms,
    checked: bool,
) -> Result<()> {
    if d0 == 0 || d1 == 0 || d2 == 0 {
        return Ok(());
    }
    let (r0, r1, r2) = stencil.radius;
    let (bx, by) = block(ctx.wg);
    // The tile's window planes, each stored twice.
    let ring = (by + 2 * r1)
        .checked_mul(bx + 2 * r2)
        .and_then(|p| p.checked_mul(2 * (2 * r0 + 1)))
        .and_then(|e| e.checked_mul(std::mem::size_of::<F::Elem>()))
        .unwrap_or(usize::MAX);
    check_local(ctx, ring, "MapOverlap 3D (the window's planes)")?;
    let variant = interned(format!(
        "overlap_3d_{r0}_{r1}_{r2}_{bx}x{by}{}",
        if checked { "_checked" } else { "" }
    ));
    let p = program(ctx, ProgKey::of::<F>(variant), F::NAME, || {
        source::<F>(ctx, stencil.radius, (bx, by), checked)
    })?;
    let in_mem = memory::input(ctx, &input)?;
    let out_mem = memory::output(ctx, &out, stencil.edge == Edge::None)?;
    let mut args = vec![
        KArg::Mem(in_mem),
        KArg::U64(input.offset() as u64),
        KArg::Mem(out_mem),
        KArg::U64(out.offset() as u64),
        KArg::I64(d0 as i64),
        KArg::I64(d1 as i64),
        KArg::I64(d2 as i64),
        KArg::I32(edge_code(stencil.edge)),
        KArg::value(&stencil.pad),
        KArg::Local(ring),
    ];
    push_uniforms(uniforms, &mut args);
    let rec = fault::record_if(ctx, checked)?;
    args.extend(rec.iter().map(|r| KArg::Mem(r.clone())));
    let ev = launch(
        ctx,
        &p,
        "skel_map_overlap3",
        &args,
        3,
        [d2.div_ceil(bx) * bx, d1.div_ceil(by) * by, d0.div_ceil(PZ)],
        Some([bx, by, 1]),
    )?;
    fault::settle(ctx, rec.as_ref(), &[F::definition()], &out, ev)
}
