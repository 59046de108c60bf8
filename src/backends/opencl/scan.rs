//! Scan on OpenCL (`opencl/scan.cl`), reduce-then-scan in three kernels and no host round
//! trip: the totals of contiguous chunks (`reduce.cl`), their exclusive scan in one
//! work-group (seeded with `start` for exclusive scans), then every chunk scanned from its
//! carry. Reads the input twice, writes the output once; exclusive scans need no
//! temporary.

use std::fmt::Write as _;

use ocl::core as cl;

use super::context::Ctx;
use super::program_cache::{program, ProgKey};
use super::reduce::{self, Plan};
use super::{checked_source_head, cty, fault, launch, memory, KArg};
use crate::backends::BinaryFn;
use crate::containers::{Arg, ArgMut};
use crate::plan::ScanMode;
use crate::{DeviceType, Result};

const TEMPLATE: &str = include_str!("../../../opencl/scan.cl");

fn source<F: BinaryFn<T>, T: DeviceType>(ctx: &Ctx, plan: &Plan, checked: bool) -> Result<String> {
    let (mut s, entries) = checked_source_head(ctx, "__global", &[F::definition()], checked)?;
    let _ = writeln!(s, "#define SKEL_T {}", cty::<T>());
    let _ = writeln!(
        s,
        "#define SKEL_F(a, b) {}({}(a), (b))",
        entries[0],
        fault::arg(checked)
    );
    fault::defines(&mut s, checked);
    plan.defines(&mut s);
    reduce::plain(&mut s, plan);
    s.push_str(TEMPLATE);
    Ok(s)
}

/// One launch of `skel_scan_chunks`: `src` (from `src_off`, `n` positions) scanned into `dst`
/// (from `dst_off`) in `groups` chunks of `chunk`; chunk g > 0 starts from `carries[g]` if
/// given, chunk 0 from `start` if `seeded`.
struct Chunks<'a, T> {
    src: (&'a cl::Mem, usize),
    dst: (&'a cl::Mem, usize),
    n: usize,
    split: (usize, usize),
    carries: Option<&'a cl::Mem>,
    start: T,
    seeded: bool,
    exclusive: bool,
    /// The fault record of a checked call.
    rec: Option<&'a cl::Mem>,
}

impl<T: DeviceType> Chunks<'_, T> {
    fn launch(&self, ctx: &Ctx, plan: &Plan, p: &cl::Program) -> Result<cl::Event> {
        let (chunk, groups) = self.split;
        let mut args = vec![
            KArg::Mem(self.src.0.clone()),
            KArg::U64(self.src.1 as u64),
            KArg::U64(self.n as u64),
            KArg::U64(chunk as u64),
            KArg::Mem(self.dst.0.clone()),
            KArg::U64(self.dst.1 as u64),
            // Never read without carries: any buffer will do.
            KArg::Mem(self.carries.unwrap_or(self.src.0).clone()),
            KArg::I32(self.carries.is_some() as i32),
            KArg::I32(self.seeded as i32),
            KArg::value(&self.start),
            KArg::I32(self.exclusive as i32),
        ];
        args.extend(self.rec.map(|r| KArg::Mem(r.clone())));
        let wg = plan.wg;
        launch(
            ctx,
            p,
            "skel_scan_chunks",
            &args,
            1,
            [groups * wg, 1, 1],
            Some([wg, 1, 1]),
        )
    }
}

pub(super) fn run<F: BinaryFn<T>, T: DeviceType>(
    ctx: &Ctx,
    input: Arg<'_, T>,
    out: ArgMut<'_, T>,
    mode: ScanMode,
    start: T,
    checked: bool,
) -> Result<()> {
    let n = input.shape().len();
    if n == 0 {
        return Ok(());
    }
    let plan = reduce::plan_for::<T>(ctx, "Scan", &[F::definition()])?;
    let kind = if checked { "scan_checked" } else { "scan" };
    let p = program(ctx, ProgKey::of::<(F, T)>(kind), F::NAME, || {
        source::<F, T>(ctx, &plan, checked)
    })?;
    let rec = fault::record_if(ctx, checked)?;
    let in_mem = memory::input(ctx, &input)?;
    let out_mem = memory::output(ctx, &out, false)?;
    let exclusive = mode == ScanMode::Exclusive;
    let split = plan.split(ctx, n);
    let g = split.1;
    // carries[0..g) at element 0 (skel_scan_chunks indexes them from there), the chunk
    // totals from element g.
    let scratch = if g > 1 {
        let s = reduce::Scratch::take::<T>(ctx, 2 * g)?;
        let mut load = vec![KArg::Mem(in_mem.clone()), KArg::U64(input.offset() as u64)];
        load.extend(rec.iter().map(|r| KArg::Mem(r.clone())));
        reduce::pass(ctx, &plan, &p, "skel_reduce", load, n, split, &s.mem, g)?;
        Chunks {
            src: (&s.mem, g),
            dst: (&s.mem, 0),
            n: g,
            split: (g, 1),
            carries: None,
            start,
            seeded: exclusive,
            exclusive: true,
            rec: rec.as_ref(),
        }
        .launch(ctx, &plan, &p)?;
        Some(s)
    } else {
        None
    };
    let ev = Chunks {
        src: (&in_mem, input.offset()),
        dst: (&out_mem, out.offset()),
        n,
        split,
        carries: scratch.as_ref().map(|s| &s.mem),
        start,
        seeded: exclusive,
        exclusive,
        rec: rec.as_ref(),
    }
    .launch(ctx, &plan, &p)?;
    if let Some(s) = scratch {
        s.give_back();
    }
    // The only kernel writing `out`, the last one enqueued: waiting on it waits for all.
    fault::settle(ctx, rec.as_ref(), &[F::definition()], &out, ev)
}
