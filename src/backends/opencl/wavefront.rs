//! Wavefront on OpenCL (`opencl/wavefront.cl`): one launch per anti-diagonal of tiles, one
//! work-group per tile, which walks the tile's own anti-diagonals in local memory. The
//! matrix is read and written in place on the device; the launches follow each other on
//! the in-order queue.

use std::fmt::Write as _;

use super::context::Ctx;
use super::program_cache::{program, ProgKey};
use super::{
    arrays, checked_source_head, cty, fault, fault_param, launch, memory, push_uniforms,
    uniform_params, KArg,
};
use crate::backends::args::call_args;
use crate::backends::ContainerOps;
use crate::codegen::ir::{FnDef, ParamKind};
use crate::containers::ArgMut;
use crate::userfn::ElementwiseFn;
use crate::{DeviceType, Result};

pub(super) const TEMPLATE: &str = include_str!("../../../opencl/wavefront.cl");

/// Widest tile side (work-items per work-group): a warp on NVIDIA devices.
const MAX_TILE: usize = 32;

/// The tile side for a device whose work-groups hold `wg` work-items.
pub(super) fn tile(wg: usize) -> usize {
    MAX_TILE.min(wg).max(1)
}

/// Bytes of local memory a tile of side `t` of `T` cells takes, with its upper row and
/// left column (rows of `t + 2` cells, see `opencl/wavefront.cl`).
fn tile_bytes<T>(t: usize) -> usize {
    (t + 1) * (t + 2) * std::mem::size_of::<T>()
}

/// `SKEL_CELL(up, left, diag, i, j)`: the call of `def` (entry `entry`) for cell `(i, j)`,
/// its element parameters in order the upper, left and upper-left neighbours.
pub(super) fn cell_call(def: &'static FnDef, entry: &str, checked: bool) -> String {
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
                ["(up)", "(left)", "(diag)"][(e - 1).min(2)].to_string()
            }
            ParamKind::Uniform => {
                u += 1;
                format!("u{}", u - 1)
            }
            // A 1D index (the only kind left for an element-wise function): the cell's flat
            // position in the matrix.
            _ => "(ulong)((i) * cols + (j))".to_string(),
        })
        .collect();
    format!("{entry}({}{})", fault::arg(checked), args.join(", "))
}

/// The kernel source for `F` over cells of `T`, tiles of side `t`, the tile in local
/// memory with `local`.
pub(super) fn source<F, T>(ctx: &Ctx, t: usize, local: bool, checked: bool) -> Result<String>
where
    F: ElementwiseFn<Elems = (T, T, T), Out = T>,
    T: DeviceType,
{
    let def = F::definition();
    let (mut s, entries) = checked_source_head(ctx, "__global", &[def], checked)?;
    let _ = writeln!(s, "#define SKEL_CELL_T {}", cty::<T>());
    let _ = writeln!(s, "#define SKEL_T {t}");
    let _ = writeln!(s, "#define SKEL_LOCAL {}", u8::from(local));
    let _ = writeln!(
        s,
        "#define SKEL_UPARAMS {}{}{}",
        arrays::container_params(def, ""),
        uniform_params(def, ""),
        fault_param(checked)
    );
    let _ = writeln!(
        s,
        "#define SKEL_CELL(up, left, diag, i, j) {}",
        cell_call(def, &entries[0], checked)
    );
    s.push_str(TEMPLATE);
    Ok(s)
}

pub(super) fn run<'c, F, T>(
    ctx: &Ctx,
    arrays: ContainerOps<'c, F>,
    m: ArgMut<'_, T>,
    uniforms: &F::Uniforms,
    checked: bool,
) -> Result<()>
where
    F: ElementwiseFn<Elems = (T, T, T), Out = T>,
    T: DeviceType,
{
    let (rows, cols) = m.shape().dims();
    if rows < 2 || cols < 2 {
        return Ok(());
    }
    let t = tile(ctx.wg);
    // A cell type too large for a tile in local memory is computed in global memory.
    let local = tile_bytes::<T>(t) as u64 <= ctx.local_mem;
    let kind = match (local, checked) {
        (true, false) => "wavefront",
        (true, true) => "wavefront_checked",
        (false, false) => "wavefront_global",
        (false, true) => "wavefront_global_checked",
    };
    let prog = program(ctx, ProgKey::of::<(F, T)>(kind), F::NAME, || {
        source::<F, T>(ctx, t, local, checked)
    })?;
    if checked {
        // A fault discards what the call wrote: the host copy must hold the old values.
        m.as_arg().host()?;
    }
    let mem = memory::output(ctx, &m, true)?;
    let mut tail = Vec::new();
    arrays::push(ctx, &arrays, &mut tail)?;
    push_uniforms(uniforms, &mut tail);
    let rec = fault::record_if(ctx, checked)?;
    tail.extend(rec.iter().map(|r| KArg::Mem(r.clone())));
    let (tr, tc) = ((rows - 1).div_ceil(t), (cols - 1).div_ceil(t));
    let mut last = None;
    for d in 0..tr + tc - 1 {
        let first = d.saturating_sub(tc - 1);
        let tiles = d.min(tr - 1) + 1 - first;
        let mut args = vec![
            KArg::Mem(mem.clone()),
            KArg::U64(m.offset() as u64),
            KArg::U64(rows as u64),
            KArg::U64(cols as u64),
            KArg::U64(d as u64),
            KArg::U64(first as u64),
        ];
        args.extend(tail.iter().cloned());
        let ev = launch(
            ctx,
            &prog,
            "skel_wavefront",
            &args,
            1,
            [tiles * t, 1, 1],
            Some([t, 1, 1]),
        )?;
        last = Some(ev);
    }
    match last {
        Some(ev) => fault::settle(ctx, rec.as_ref(), &[F::definition()], &m, ev),
        None => Ok(()),
    }
}
