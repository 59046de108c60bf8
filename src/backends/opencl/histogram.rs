//! Histogram on OpenCL (`opencl/histogram.cl`): each work-group counts into sub-histograms
//! in local memory and writes their sum to its own row of a scratch table, or, where the
//! bins do not fit in local memory, counts with global atomics into a few shared rows; a
//! second kernel adds the rows into `counts`. Calls longer than [`PIECE`] run in pieces,
//! each adding to `counts`, so that no `u32` row can wrap.

use std::fmt::Write as _;

use super::context::Ctx;
use super::program_cache::{program, ProgKey};
use super::{
    arrays, checked_call_expr, checked_source_head, cty, elem_params, fault, fault_param, launch,
    memory, push_uniforms, uniform_params, CallShape, Inputs, KArg, OpenCl,
};
use crate::backends::cpu::Outside;
use crate::backends::ContainerOps;
use crate::containers::{ArgMut, Shape};
use crate::plan::ArgTuple;
use crate::skeletons::Count;
use crate::userfn::{ElementwiseFn, UserFn};
use crate::Result;

const TEMPLATE: &str = include_str!("../../../opencl/histogram.cl");

/// Positions one launch counts at most: a row's `u32` count stays below 2^31.
const PIECE: usize = 1 << 31;

/// Sub-histograms per work-group in local memory: at most this many copies, as many as fit.
const MAX_COPIES: usize = 8;

/// Bytes of global scratch the rows of the global-atomics form may take.
const GLOBAL_ROWS_BYTES: usize = 64 << 20;

/// How one call counts: `copies` sub-histograms per work-group in local memory (0: global
/// atomics), `groups` work-groups, `rows` rows of scratch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub copies: usize,
    pub groups: usize,
    pub rows: usize,
}

/// The layout for `bins` bins on a device with `local_mem` bytes of local memory per
/// work-group and `units` compute units, work-groups of `wg`, over `n` positions.
pub(crate) fn layout(bins: usize, local_mem: usize, units: usize, wg: usize, n: usize) -> Layout {
    // Leave room for what the compiler itself places in local memory.
    let room = local_mem.saturating_sub(1024) / 4;
    let copies = (room / (bins + 1)).min(MAX_COPIES);
    let groups = (4 * units.max(1)).min(n.div_ceil(wg)).max(1);
    if copies > 0 {
        return Layout {
            copies,
            groups,
            rows: groups,
        };
    }
    let rows = (GLOBAL_ROWS_BYTES / (4 * bins)).clamp(1, groups);
    Layout {
        copies: 0,
        groups,
        rows,
    }
}

fn source<F: ElementwiseFn + UserFn<Out = u32>, C: Count>(
    ctx: &Ctx,
    local: bool,
    checked: bool,
) -> Result<String> {
    let def = F::definition();
    let (mut s, entries) = checked_source_head(ctx, "__global", &[def], checked)?;
    let shape = CallShape {
        pos: "p",
        base: "skel_base",
        array: "(ca0 + ca0_off)",
        window: ("", ""),
    };
    let _ = writeln!(s, "#define SKEL_C {}", cty::<C>());
    let _ = writeln!(s, "#define SKEL_LOCAL {}", u8::from(local));
    let _ = writeln!(
        s,
        "#define SKEL_PARAMS {}{}{}{}",
        arrays::container_params(def, ""),
        elem_params(def, ""),
        uniform_params(def, ""),
        fault_param(checked)
    );
    let call = checked_call_expr(def, &entries[0], &shape, "", checked);
    let _ = writeln!(s, "#define SKEL_CALL(p) {call}");
    s.push_str(TEMPLATE);
    Ok(s)
}

/// `counts[b] = #{i : F(inputs[i]..) == b}`, `counts` overwritten.
pub(super) fn run<'a, 'c, F, I, C>(
    ctx: &Ctx,
    arrays: ContainerOps<'c, F>,
    inputs: I,
    shape: Shape,
    (counts, uniforms): (ArgMut<'_, C>, &F::Uniforms),
    exec: &OpenCl,
) -> Result<()>
where
    F: ElementwiseFn + UserFn<Out = u32>,
    I: ArgTuple<'a, Elems = F::Elems>,
    C: Count,
{
    let (checked, index_base) = (exec.checked, exec.index_base);
    let n = shape.len();
    let bins = counts.shape().len();
    let lay = layout(
        bins,
        ctx.local_mem as usize,
        ctx.compute_units,
        ctx.wg,
        n.min(PIECE),
    );
    let kind = match (lay.copies > 0, checked) {
        (true, false) => "histogram_local",
        (true, true) => "histogram_local_checked",
        (false, false) => "histogram_global",
        (false, true) => "histogram_global_checked",
    };
    let prog = program(ctx, ProgKey::of::<(F, C)>(kind), F::NAME, || {
        source::<F, C>(ctx, lay.copies > 0, checked)
    })?;
    let part = memory::alloc_elems::<u32>(ctx, lay.rows * bins)?;
    let outside = fault::record(ctx)?;
    let rec = fault::record_if(ctx, checked)?;
    let counts_mem = memory::output(ctx, &counts, false)?;
    let local = Some([ctx.wg, 1, 1]);
    let sum_global = [bins.div_ceil(ctx.wg).min(1024) * ctx.wg, 1, 1];
    let mut at = 0;
    // An empty call still overwrites `counts` with zeros: one piece of nothing.
    let ev = loop {
        let piece = at..n.min(at + PIECE);
        if lay.copies == 0 {
            let zero_args = [KArg::Mem(part.clone()), KArg::U64((lay.rows * bins) as u64)];
            let g = (lay.rows * bins).div_ceil(ctx.wg).min(1024) * ctx.wg;
            launch(
                ctx,
                &prog,
                "skel_histogram_zero",
                &zero_args,
                1,
                [g, 1, 1],
                local,
            )?;
        }
        if !piece.is_empty() {
            let mut args = vec![
                KArg::U64(piece.len() as u64),
                KArg::U64(shape.cols().max(1) as u64),
                KArg::U64((index_base + piece.start) as u64),
                KArg::I32(bins as i32),
                KArg::I32(lay.rows as i32),
                KArg::I32(lay.copies.max(1) as i32),
                KArg::Mem(part.clone()),
                KArg::Mem(outside.clone()),
                KArg::Local(lay.copies * (bins + 1) * 4),
            ];
            arrays::push(ctx, &arrays, &mut args)?;
            let mut up = Inputs { ctx, args };
            inputs.sub(piece.clone()).visit(&mut up)?;
            let mut args = up.args;
            push_uniforms(uniforms, &mut args);
            args.extend(rec.iter().map(|r| KArg::Mem(r.clone())));
            let global = [lay.groups * ctx.wg, 1, 1];
            launch(ctx, &prog, "skel_histogram", &args, 1, global, local)?;
        }
        let rows = if piece.is_empty() { 0 } else { lay.rows };
        let sum_args = [
            KArg::Mem(part.clone()),
            KArg::I32(rows as i32),
            KArg::I32(bins as i32),
            KArg::Mem(counts_mem.clone()),
            KArg::U64(counts.offset() as u64),
            KArg::I32(i32::from(at > 0)),
        ];
        let ev = launch(
            ctx,
            &prog,
            "skel_histogram_sum",
            &sum_args,
            1,
            sum_global,
            local,
        )?;
        at = piece.end;
        if at >= n {
            break ev;
        }
    };
    if let Some(rec) = &rec {
        if let Some(err) = fault::read(ctx, rec, &[F::definition()])? {
            memory::discarded(ctx, &counts, ev);
            return Err(err);
        }
    }
    if checked {
        let words = memory::read_elems::<u32>(ctx, &outside, 2)?;
        let report = Outside {
            count: u64::from(words[0]),
            max: words[1],
        };
        if let Err(e) = report.check(F::NAME, "bin", bins) {
            memory::discarded(ctx, &counts, ev);
            return Err(e);
        }
    }
    memory::written(ctx, &counts, ev);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::layout;

    #[test]
    fn sub_histograms_fit_local_memory_or_go_global() {
        // NVIDIA's OpenCL: 48 KiB of local memory, 132 compute units, work-groups of 256.
        let small = layout(256, 49152, 132, 256, 1 << 28);
        assert_eq!((small.copies, small.rows), (8, small.groups));
        assert!(small.copies * 257 * 4 <= 49152 - 1024);
        let mid = layout(5000, 49152, 132, 256, 1 << 28);
        assert_eq!(mid.copies, 2);
        let many = layout(1 << 20, 49152, 132, 256, 1 << 28);
        assert_eq!(many.copies, 0);
        assert!(many.rows >= 1 && many.rows * (1 << 20) * 4 <= 64 << 20);
        // A short call takes no more work-groups than it has work for.
        assert_eq!(layout(256, 49152, 132, 256, 100).groups, 1);
    }
}
