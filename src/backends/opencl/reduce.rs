//! Reduce on OpenCL (`opencl/reduce.cl`, `opencl/reduce_cols.cl`).
//!
//! 1D: a tree reduction in local memory, one partial per work-group, then a second pass
//! over the partials in one work-group on the device; only the final value is read back
//! and folded with `start` on the host. Rows: one work-group per row. Columns: blocks of
//! rows per work-item, then one pass over the block partials.

use std::fmt::Write as _;

use ocl::core as cl;

use super::context::Ctx;
use super::program_cache::{program, ProgKey};
use super::{check_local, cty, dims, launch, memory, source_head, KArg};
use crate::backends::BinaryFn;
use crate::containers::{Arg, ArgMut};
use crate::plan::Axis;
use crate::{DeviceType, Result};

pub(super) const TEMPLATE: &str = include_str!("../../../opencl/reduce.cl");
const COLS_TEMPLATE: &str = include_str!("../../../opencl/reduce_cols.cl");

/// Elements each work-item folds per tile in `reduce.cl` (`SKEL_RK`) for elements of
/// `elem` bytes: 8, halved while the tile would take more than half the device's local
/// memory (at least 1).
pub(super) fn tile_k(ctx: &Ctx, elem: usize) -> usize {
    let mut k = 8;
    while k > 1 && (ctx.wg * k * elem) as u64 > ctx.local_mem / 2 {
        k /= 2;
    }
    k
}

/// `Ok` if the tile of `reduce.cl` over elements of type `T` fits the device's local
/// memory (checked before building, so a large element type is a clear error).
pub(super) fn check_tile<T: DeviceType>(ctx: &Ctx, what: &str) -> Result<()> {
    let elem = std::mem::size_of::<T>();
    check_local(ctx, ctx.wg * tile_k(ctx, elem) * elem, what)
}

/// `reduce.cl` instantiated as kernel `name` over elements of `elem` bytes, reading
/// elements with `load(p)` whose buffers are the kernel parameters `load_params`.
pub(super) fn instantiate(
    ctx: &Ctx,
    elem: usize,
    s: &mut String,
    name: &str,
    load_params: &str,
    load: &str,
) {
    let _ = writeln!(s, "#define SKEL_KNAME {name}");
    let _ = writeln!(s, "#define SKEL_LOAD_PARAMS {load_params}");
    let _ = writeln!(s, "#define SKEL_LOAD(p) {load}");
    let _ = writeln!(s, "#define SKEL_RK {}", tile_k(ctx, elem));
    s.push_str(TEMPLATE);
    s.push_str("\n#undef SKEL_KNAME\n#undef SKEL_LOAD_PARAMS\n#undef SKEL_LOAD\n#undef SKEL_RK\n");
}

/// The plain reduction kernel `skel_reduce` of `SKEL_T` (`elem` bytes) with `SKEL_F`
/// defined.
pub(super) fn plain(ctx: &Ctx, elem: usize, s: &mut String) {
    instantiate(
        ctx,
        elem,
        s,
        "skel_reduce",
        ", __global const SKEL_T* in, ulong in_off",
        "in[in_off + (p)]",
    );
}

fn source<F: BinaryFn<T>, T: DeviceType>(ctx: &Ctx) -> Result<String> {
    let (mut s, entries) = source_head(ctx, "__global", &[F::definition()])?;
    let _ = writeln!(s, "#define SKEL_T {}", cty::<T>());
    let _ = writeln!(s, "#define SKEL_F(a, b) {}((a), (b))", entries[0]);
    plain(ctx, std::mem::size_of::<T>(), &mut s);
    s.push_str(COLS_TEMPLATE);
    Ok(s)
}

fn prog<F: BinaryFn<T>, T: DeviceType>(ctx: &Ctx) -> Result<cl::Program> {
    check_tile::<T>(ctx, "Reduce")?;
    program(ctx, ProgKey::of::<(F, T)>("reduce"), F::NAME, || {
        source::<F, T>(ctx)
    })
}

/// Number of work-groups of the first pass over `n` elements of `elem` bytes (each at
/// least one tile, if there are enough elements).
fn groups(ctx: &Ctx, n: usize, elem: usize) -> usize {
    let cap = (ctx.compute_units * 8).clamp(64, 1024);
    n.div_ceil(ctx.wg * tile_k(ctx, elem)).clamp(1, cap)
}

/// Runs `first` (a `reduce.cl` kernel whose load parameters are `load_args`) over `n > 0`
/// positions, then `skel_reduce` of `final_prog` over its partials; returns the value.
pub(super) fn two_pass<T: DeviceType>(
    ctx: &Ctx,
    first_prog: &cl::Program,
    first: &str,
    final_prog: &cl::Program,
    load_args: Vec<KArg>,
    n: usize,
) -> Result<T> {
    let chunk = n.div_ceil(groups(ctx, n, std::mem::size_of::<T>()));
    let g = n.div_ceil(chunk);
    let partials = memory::alloc_elems::<T>(ctx, g)?;
    let mut args = vec![
        KArg::U64(n as u64),
        KArg::U64(chunk as u64),
        KArg::Mem(partials.clone()),
        KArg::U64(0),
    ];
    args.extend(load_args);
    let local = Some([ctx.wg, 1, 1]);
    launch(ctx, first_prog, first, &args, 1, [g * ctx.wg, 1, 1], local)?;
    let result = if g > 1 {
        let result = memory::alloc_elems::<T>(ctx, 1)?;
        let args = vec![
            KArg::U64(g as u64),
            KArg::U64(g as u64),
            KArg::Mem(result.clone()),
            KArg::U64(0),
            KArg::Mem(partials),
            KArg::U64(0),
        ];
        launch(
            ctx,
            final_prog,
            "skel_reduce",
            &args,
            1,
            [ctx.wg, 1, 1],
            local,
        )?;
        result
    } else {
        partials
    };
    memory::read_elems::<T>(ctx, &result, 1)?
        .pop()
        .ok_or_else(|| crate::Error::Driver("internal: empty reduction result".into()))
}

pub(super) fn run<F: BinaryFn<T>, T: DeviceType>(
    ctx: &Ctx,
    input: Arg<'_, T>,
    start: T,
) -> Result<T> {
    let n = input.shape().len();
    if n == 0 {
        return Ok(start);
    }
    let p = prog::<F, T>(ctx)?;
    let mem = memory::input(ctx, &input)?;
    let args = vec![KArg::Mem(mem), KArg::U64(input.offset() as u64)];
    let total = two_pass::<T>(ctx, &p, "skel_reduce", &p, args, n)?;
    Ok(F::apply((), (start, total), &()))
}

pub(super) fn run_axis<F: BinaryFn<T>, T: DeviceType>(
    ctx: &Ctx,
    input: Arg<'_, T>,
    out: ArgMut<'_, T>,
    axis: Axis,
) -> Result<()> {
    let (rows, cols) = dims(input.shape());
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let p = prog::<F, T>(ctx)?;
    let in_mem = memory::input(ctx, &input)?;
    let out_mem = memory::output(ctx, &out, false)?;
    let ev = if axis == Axis::Cols {
        let blocks_wanted = 16384usize.div_ceil(cols).clamp(1, rows);
        let per = rows.div_ceil(blocks_wanted);
        let blocks = rows.div_ceil(per);
        let pass = |src: cl::Mem,
                    src_off: usize,
                    rows: usize,
                    per: usize,
                    dst: cl::Mem,
                    dst_off: usize,
                    blocks: usize| {
            let args = vec![
                KArg::Mem(src),
                KArg::U64(src_off as u64),
                KArg::U64(rows as u64),
                KArg::U64(cols as u64),
                KArg::U64(per as u64),
                KArg::Mem(dst),
                KArg::U64(dst_off as u64),
            ];
            launch(
                ctx,
                &p,
                "skel_reduce_cols",
                &args,
                2,
                [cols, blocks, 1],
                None,
            )
        };
        if blocks == 1 {
            pass(in_mem, input.offset(), rows, rows, out_mem, out.offset(), 1)?
        } else {
            let partials = memory::alloc_elems::<T>(ctx, blocks * cols)?;
            pass(
                in_mem,
                input.offset(),
                rows,
                per,
                partials.clone(),
                0,
                blocks,
            )?;
            pass(partials, 0, blocks, blocks, out_mem, out.offset(), 1)?
        }
    } else {
        let args = vec![
            KArg::U64((rows * cols) as u64),
            KArg::U64(cols as u64),
            KArg::Mem(out_mem),
            KArg::U64(out.offset() as u64),
            KArg::Mem(in_mem),
            KArg::U64(input.offset() as u64),
        ];
        launch(
            ctx,
            &p,
            "skel_reduce",
            &args,
            1,
            [rows * ctx.wg, 1, 1],
            Some([ctx.wg, 1, 1]),
        )?
    };
    memory::written(ctx, &out, ev);
    Ok(())
}
