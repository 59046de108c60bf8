//! Scan on OpenCL (`opencl/scan.cl`): per-block scans in local memory, a recursive scan
//! of the block totals, then each block adds the total of everything before it.
//! Exclusive scans finish with one more pass: `out[0] = start`,
//! `out[i] = f(start, inclusive[i-1])`.

use std::fmt::Write as _;

use ocl::core as cl;

use super::context::Ctx;
use super::program_cache::{program, ProgKey};
use super::{check_local, cty, launch, memory, round_up, source_head, KArg};
use crate::backends::BinaryFn;
use crate::containers::{Arg, ArgMut};
use crate::plan::ScanMode;
use crate::{DeviceType, Result};

const TEMPLATE: &str = include_str!("../../../opencl/scan.cl");

/// Elements per work-item in the block scan.
const K: usize = 4;

fn source<F: BinaryFn<T>, T: DeviceType>(ctx: &Ctx) -> Result<String> {
    let (mut s, entries) = source_head(ctx, "__global", &[F::definition()])?;
    let _ = writeln!(s, "#define SKEL_T {}", cty::<T>());
    let _ = writeln!(s, "#define SKEL_F(a, b) {}((a), (b))", entries[0]);
    let _ = writeln!(s, "#define SKEL_K {K}");
    s.push_str(TEMPLATE);
    Ok(s)
}

/// Inclusive scan of `n > 0` elements of `src` (from `src_off`) into `dst` (from `dst_off`).
/// `touched` is called with the completion of the first kernel that writes `dst`, as soon
/// as it is enqueued (later launches may still fail).
#[allow(clippy::too_many_arguments)]
fn inclusive<T: DeviceType>(
    ctx: &Ctx,
    p: &cl::Program,
    src: &cl::Mem,
    src_off: usize,
    dst: &cl::Mem,
    dst_off: usize,
    n: usize,
    touched: &mut dyn FnMut(&cl::Event),
) -> Result<cl::Event> {
    let block = ctx.wg * K;
    let blocks = n.div_ceil(block);
    let sums = memory::alloc_elems::<T>(ctx, blocks)?;
    let args = vec![
        KArg::Mem(src.clone()),
        KArg::U64(src_off as u64),
        KArg::U64(n as u64),
        KArg::Mem(dst.clone()),
        KArg::U64(dst_off as u64),
        KArg::Mem(sums.clone()),
    ];
    let local = Some([ctx.wg, 1, 1]);
    let ev = launch(
        ctx,
        p,
        "skel_scan_blocks",
        &args,
        1,
        [blocks * ctx.wg, 1, 1],
        local,
    )?;
    touched(&ev);
    if blocks == 1 {
        return Ok(ev);
    }
    inclusive::<T>(ctx, p, &sums, 0, &sums, 0, blocks, &mut |_| {})?;
    let args = vec![
        KArg::Mem(dst.clone()),
        KArg::U64(dst_off as u64),
        KArg::U64(n as u64),
        KArg::Mem(sums),
    ];
    launch(
        ctx,
        p,
        "skel_scan_add",
        &args,
        1,
        [round_up(n, ctx.wg), 1, 1],
        local,
    )
}

pub(super) fn run<F: BinaryFn<T>, T: DeviceType>(
    ctx: &Ctx,
    input: Arg<'_, T>,
    out: ArgMut<'_, T>,
    mode: ScanMode,
    start: T,
) -> Result<()> {
    let n = input.shape().len();
    if n == 0 {
        return Ok(());
    }
    check_local(ctx, ctx.wg * std::mem::size_of::<T>(), "Scan")?;
    let p = program(ctx, ProgKey::of::<(F, T)>("scan"), F::NAME, || {
        source::<F, T>(ctx)
    })?;
    let in_mem = memory::input(ctx, &input)?;
    let out_mem = memory::output(ctx, &out, false)?;
    // As soon as a kernel writing `out` is enqueued, `out` is recorded as written on the
    // device: if a later allocation or launch fails, the host copy must not be believed
    // current (nor an earlier device copy intact).
    let mut mark = |ev: &cl::Event| memory::written(ctx, &out, ev.clone());
    let ev = match mode {
        ScanMode::Inclusive => inclusive::<T>(
            ctx,
            &p,
            &in_mem,
            input.offset(),
            &out_mem,
            out.offset(),
            n,
            &mut mark,
        )?,
        ScanMode::Exclusive => {
            let tmp = memory::alloc_elems::<T>(ctx, n)?;
            inclusive::<T>(ctx, &p, &in_mem, input.offset(), &tmp, 0, n, &mut |_| {})?;
            let args = vec![
                KArg::Mem(tmp),
                KArg::U64(n as u64),
                KArg::Mem(out_mem),
                KArg::U64(out.offset() as u64),
                KArg::value(&start),
            ];
            let local = Some([ctx.wg, 1, 1]);
            launch(
                ctx,
                &p,
                "skel_scan_exclusive",
                &args,
                1,
                [round_up(n, ctx.wg), 1, 1],
                local,
            )?
        }
    };
    // The last kernel's completion: waiting on it waits for every write to `out`.
    memory::written(ctx, &out, ev);
    Ok(())
}
