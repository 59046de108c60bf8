//! Reduce on OpenCL (`opencl/reduce.cl`, `opencl/reduce_rows.cl`, `opencl/reduce_cols.cl`).
//!
//! 1D: each work-group folds one contiguous chunk of the input in order, tile by tile
//! (coalesced striped loads, blocked folds through local memory), one partial per
//! work-group; a second pass folds the partials in one work-group on the device; only the
//! final value is read back and folded with `start` on the host. Rows: the same kernel,
//! one work-group per row; rows of at most a work-item's share of a tile go in bands, one
//! work-group per band and one work-item per row. Columns: each work-item folds one column
//! over a block of rows (coalesced across work-items), then one pass over the block
//! partials. Temporaries live in one reused device buffer ([`Scratch`]).

use std::fmt::Write as _;
use std::sync::{Mutex, PoisonError};

use ocl::core as cl;

use super::context::Ctx;
use super::program_cache::{self, program, ProgKey};
use super::{check_local, checked_source_head, cty, dims, fault, launch, memory, round_up, KArg};
use crate::backends::BinaryFn;
use crate::codegen::FnDef;
use crate::containers::{Arg, ArgMut};
use crate::plan::Axis;
use crate::{DeviceType, Result};

pub(super) const TEMPLATE: &str = include_str!("../../../opencl/reduce.cl");

/// 16-byte loads and stores of 4 values of a 4-byte `SKEL_T` (kernel parameters `in`,
/// `in_off`, `out`, `out_off`); buffers are at least 16-byte aligned, so an offset that is a
/// multiple of 4 values is too.
const VEC4: &str = "typedef union { uint4 v; SKEL_T t[4]; } skel_vec4;
#define SKEL_VEC_OK(lo) ((in_off + (lo)) % 4 == 0)
#define SKEL_VLOAD(p, dst) do { skel_vec4 u_; \\
    u_.v = *(__global const uint4*)(in + in_off + (p)); \\
    (dst)[0] = u_.t[0]; (dst)[1] = u_.t[1]; (dst)[2] = u_.t[2]; (dst)[3] = u_.t[3]; } while (0)
#define SKEL_VSTORE(p, src) do { skel_vec4 u_; \\
    u_.t[0] = (src)[0]; u_.t[1] = (src)[1]; u_.t[2] = (src)[2]; u_.t[3] = (src)[3]; \\
    *(__global uint4*)(out + out_off + (p)) = u_.v; } while (0)
";
const COLS_TEMPLATE: &str = include_str!("../../../opencl/reduce_cols.cl");
const ROWS_TEMPLATE: &str = include_str!("../../../opencl/reduce_rows.cl");

/// The launch shape of the `reduce.cl` / `scan.cl` kernels for one element size: work-group
/// size (`SKEL_RWG`), values per work-item and tile (`SKEL_RK`), work-item results per run
/// (`SKEL_RUN`), how many work-groups per compute unit a large input is split over, and
/// whether plain loads (and Scan's stores) of 4-byte values go 16 bytes at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Plan {
    pub(super) wg: usize,
    pub(super) items: usize,
    pub(super) run: usize,
    pub(super) per_cu: usize,
    pub(super) vec: bool,
}

// Overrides of the defaults of `Plan`, from `SKEL_OPENCL_TUNE`.
use crate::config::OpenClTune as Tune;

/// `SKEL_OPENCL_TUNE=wg=W,items=K,groups=G,vec=0|1` (any subset) overrides the defaults of
/// [`Plan`], for benchmarks ([`crate::config::OPENCL_TUNE`]); fixed at the first use.
fn tune() -> Result<Tune> {
    crate::config::OPENCL_TUNE.fix()
}

impl Plan {
    /// The plan for elements of `elem` bytes on `ctx`'s device: work-groups of 64 and 32
    /// values per work-item on GPUs, of the context's size and 16 values on CPUs (fewer
    /// values while a tile would take more than half the local memory a work-group may
    /// have), runs of 16,
    /// 16-byte loads for 4-byte values.
    pub(super) fn new(ctx: &Ctx, elem: usize) -> Result<Plan> {
        let tune = tune()?;
        // Measured on an H100 (NVIDIA's OpenCL): work-groups of 64 with 32 values per
        // work-item beat 256 x 16 by 4-20 % (Reduce, Scan, rows) at the same tile size.
        let (wg, default_items) = if ctx.gpu {
            (ctx.wg.min(64), 32)
        } else {
            (ctx.wg, 16)
        };
        let wg = tune.wg.unwrap_or(wg);
        // Explicit items are only capped by what fits at all.
        let budget = match tune.items {
            Some(_) => ctx.local_mem * 3 / 4,
            None => ctx.local_mem / 2,
        };
        let items = tune.items.unwrap_or(default_items);
        let mut plan = fit(wg, items, elem, budget, tune.wg.is_none());
        // GPUs: enough work-groups for two full waves of 2048 work-items per compute unit;
        // CPUs (one work-group at a time per core): a few per core, for balance.
        let default_per_cu = if ctx.gpu { (4096 / plan.wg).max(1) } else { 4 };
        plan.per_cu = tune.groups.unwrap_or(default_per_cu);
        plan.vec = tune.vec.unwrap_or(true) && elem == 4 && items % 4 == 0;
        Ok(plan)
    }

    /// Positions per tile.
    pub(super) fn tile(&self) -> usize {
        self.wg * self.items
    }

    /// Bytes of local memory the kernels take per work-group, elements of `elem` bytes.
    pub(super) fn local_bytes(&self, elem: usize) -> usize {
        let t = self.tile();
        (t + t / 32 + self.wg + self.wg / self.run + self.wg / self.run) * elem
    }

    /// `#define`s of the plan's sizes, for a program source.
    pub(super) fn defines(&self, s: &mut String) {
        let _ = writeln!(s, "#define SKEL_RWG {}", self.wg);
        let _ = writeln!(s, "#define SKEL_RK {}", self.items);
        let _ = writeln!(s, "#define SKEL_RUN {}", self.run);
    }

    /// `(chunk, groups)`: `n > 0` positions split into `groups` contiguous chunks of `chunk`
    /// positions (a whole number of tiles; the last chunk may be shorter), at most
    /// `per_cu` per compute unit.
    pub(super) fn split(&self, ctx: &Ctx, n: usize) -> (usize, usize) {
        chunks(n, self.tile(), ctx.compute_units * self.per_cu)
    }
}

/// The work-group size and values per work-item for elements of `elem` bytes, from `wg`
/// and `items`, within `budget` bytes of local memory: fewer values per work-item first,
/// then (where `shrink`: the work-group size was not set explicitly, which is for
/// measuring) smaller work-groups, so that large elements (a struct of hundreds of bytes)
/// still fit: a Reduce of `[u32; 256]` needed 141312 bytes at 64 x 1, NVIDIA's OpenCL
/// allows 49152.
fn fit(wg: usize, mut items: usize, elem: usize, budget: u64, shrink: bool) -> Plan {
    while items > 1 && (wg * items * elem) as u64 > budget {
        items /= 2;
    }
    let mut plan = Plan {
        wg,
        items,
        run: wg.min(16),
        per_cu: 1,
        vec: false,
    };
    while shrink && plan.wg > 1 && plan.local_bytes(elem) as u64 > budget {
        plan.wg /= 2;
        plan.run = plan.wg.min(16);
    }
    plan
}

/// `(chunk, groups)`: `n > 0` positions in at most `cap` chunks of whole tiles of `tile`.
fn chunks(n: usize, tile: usize, cap: usize) -> (usize, usize) {
    let chunk = n.div_ceil(tile).div_ceil(cap.max(1)) * tile;
    (chunk, n.div_ceil(chunk))
}

/// The plan for elements of type `T`, `Ok` if its local memory fits the device (checked
/// before building, so a large element type is a clear error).
///
/// On a CPU device the work-groups are halved while the local arrays of the user functions
/// `defs` would not fit in [`program_cache::CPU_GROUP_PRIVATE_BYTES`] per work-group.
pub(super) fn plan_for<T: DeviceType>(
    ctx: &Ctx,
    what: &str,
    defs: &[&'static FnDef],
) -> Result<Plan> {
    let elem = std::mem::size_of::<T>();
    let mut plan = Plan::new(ctx, elem)?;
    if !ctx.gpu {
        let private = program_cache::local_array_bytes(defs)?;
        while plan.wg > 1 && plan.wg * private > program_cache::CPU_GROUP_PRIVATE_BYTES {
            plan.wg /= 2;
        }
        plan.run = plan.wg.min(16);
    }
    check_local(ctx, plan.local_bytes(elem), what)?;
    Ok(plan)
}

/// `reduce.cl` instantiated as kernel `name`, reading elements with `load(p)` whose buffers
/// are the kernel parameters `load_params` (the plan's `#define`s come first).
pub(super) fn instantiate(s: &mut String, name: &str, load_params: &str, load: &str) {
    let _ = writeln!(s, "#define SKEL_KNAME {name}");
    let _ = writeln!(s, "#define SKEL_LOAD_PARAMS {load_params}");
    let _ = writeln!(s, "#define SKEL_LOAD(p) {load}");
    s.push_str(TEMPLATE);
    s.push_str("\n#undef SKEL_KNAME\n#undef SKEL_LOAD_PARAMS\n#undef SKEL_LOAD\n");
}

/// The plain reduction kernel `skel_reduce` of `SKEL_T` with `SKEL_F` defined (and the
/// 16-byte load and store macros, which `scan.cl` uses too, if the plan says so).
pub(super) fn plain(s: &mut String, plan: &Plan) {
    if plan.vec {
        s.push_str(VEC4);
    }
    instantiate(
        s,
        "skel_reduce",
        ", __global const SKEL_T* in, ulong in_off",
        "in[in_off + (p)]",
    );
}

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
    plain(&mut s, plan);
    s.push_str(ROWS_TEMPLATE);
    s.push_str(COLS_TEMPLATE);
    into_kernel(&mut s);
    Ok(s)
}

fn prog<F: BinaryFn<T>, T: DeviceType>(ctx: &Ctx, checked: bool) -> Result<(cl::Program, Plan)> {
    let plan = plan_for::<T>(ctx, "Reduce", &[F::definition()])?;
    let kind = if checked { "reduce_checked" } else { "reduce" };
    let p = program(ctx, ProgKey::of::<(F, T)>(kind), F::NAME, || {
        source::<F, T>(ctx, &plan, checked)
    })?;
    Ok((p, plan))
}

/// Enqueues `name` of `prog` (a `reduce.cl` kernel whose load parameters are `load_args`)
/// over positions `0..n`, in `groups` chunks of `chunk` positions, one result per chunk
/// into `dst` from `dst_off`.
#[allow(clippy::too_many_arguments)]
pub(super) fn pass(
    ctx: &Ctx,
    plan: &Plan,
    prog: &cl::Program,
    name: &'static str,
    load_args: Vec<KArg>,
    n: usize,
    (chunk, groups): (usize, usize),
    dst: &cl::Mem,
    dst_off: usize,
) -> Result<cl::Event> {
    let mut args = vec![
        KArg::U64(n as u64),
        KArg::U64(chunk as u64),
        KArg::Mem(dst.clone()),
        KArg::U64(dst_off as u64),
    ];
    args.extend(load_args);
    let wg = plan.wg;
    launch(
        ctx,
        prog,
        name,
        &args,
        1,
        [groups * wg, 1, 1],
        Some([wg, 1, 1]),
    )
}

/// A device buffer for the temporaries of Reduce, MapReduce and Scan (partials, carries,
/// the result; the block partials of column reductions), kept from call to call: allocating and freeing device memory in every call
/// costs more than a small reduction (a free waits for the device on NVIDIA's driver).
/// Commands run in the order of the one in-order queue, so a call may reuse the buffer as
/// soon as the previous call's commands using it are enqueued; a call that finds it taken
/// (by another thread) allocates its own.
pub(super) struct Scratch {
    pub(super) mem: cl::Mem,
    bytes: usize,
}

static SCRATCH: Mutex<Option<Scratch>> = Mutex::new(None);

impl Scratch {
    /// A buffer of at least `n` elements of `T`.
    pub(super) fn take<T: DeviceType>(ctx: &Ctx, n: usize) -> Result<Scratch> {
        let bytes = n * std::mem::size_of::<T>();
        let cached = SCRATCH
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match cached {
            Some(s) if s.bytes >= bytes => Ok(s),
            _ => {
                // Rounded up, so slowly growing sizes do not allocate every time.
                let n = n.next_power_of_two().max(1024);
                Ok(Scratch {
                    mem: memory::alloc_elems::<T>(ctx, n)?,
                    bytes: n * std::mem::size_of::<T>(),
                })
            }
        }
    }

    /// Returns the buffer for later calls (call only after the last command using it is
    /// enqueued); the larger of two buffers is kept.
    pub(super) fn give_back(self) {
        let mut kept = SCRATCH.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.as_ref().map_or(true, |s| s.bytes < self.bytes) {
            *kept = Some(self);
        }
    }
}

/// `skel_reduce_into`, which every program with `SKEL_F` and `SKEL_T` holds:
/// `out[out_off] = start ⊕ res[0]` on the device (`run_into`).
const INTO: &str = "
__kernel void skel_reduce_into(__global const SKEL_T* res, SKEL_T start, __global SKEL_T* out,
                               ulong out_off SKEL_FP)
{
    if (get_global_id(0) == 0) out[out_off] = SKEL_F(start, res[0]);
}
";

/// [`INTO`], for a program source after its `SKEL_F`.
pub(super) fn into_kernel(s: &mut String) {
    s.push_str(INTO);
}

/// Runs `first` (a `reduce.cl` kernel whose load parameters are `load_args`) over `n > 0`
/// positions, then `skel_reduce` of `prog` over its partials in one work-group; reads back
/// only the value. A checked program (`rec`, its fault record, follows every kernel's
/// parameters) reports a fault of the user functions `defs` instead.
#[allow(clippy::too_many_arguments)]
pub(super) fn two_pass<T: DeviceType>(
    ctx: &Ctx,
    plan: &Plan,
    prog: &cl::Program,
    first: &'static str,
    load_args: Vec<KArg>,
    n: usize,
    fault: (Option<&cl::Mem>, &[&'static FnDef]),
) -> Result<T> {
    two_pass_to::<T>(ctx, plan, prog, first, load_args, n, fault, None)?
        .ok_or_else(|| crate::Error::Driver("internal: empty reduction result".into()))
}

/// [`two_pass`]; with `into` (a one-element output and the start value) the value is not
/// read back: `skel_reduce_into` writes the start value folded with it to the output on
/// the device, whose copy there becomes the valid one (`Ok(None)`).
#[allow(clippy::too_many_arguments)]
pub(super) fn two_pass_to<T: DeviceType>(
    ctx: &Ctx,
    plan: &Plan,
    prog: &cl::Program,
    first: &'static str,
    mut load_args: Vec<KArg>,
    n: usize,
    (rec, defs): (Option<&cl::Mem>, &[&'static FnDef]),
    into: Option<(&ArgMut<'_, T>, T)>,
) -> Result<Option<T>> {
    load_args.extend(rec.map(|r| KArg::Mem(r.clone())));
    let split = plan.split(ctx, n);
    let g = split.1;
    // The result at element 0, the partials (if more than one) from element 1.
    let s = Scratch::take::<T>(ctx, g + 1)?;
    if g == 1 {
        pass(ctx, plan, prog, first, load_args, n, split, &s.mem, 0)?;
    } else {
        pass(ctx, plan, prog, first, load_args, n, split, &s.mem, 1)?;
        let mut args = vec![KArg::Mem(s.mem.clone()), KArg::U64(1)];
        args.extend(rec.map(|r| KArg::Mem(r.clone())));
        pass(ctx, plan, prog, "skel_reduce", args, g, (g, 1), &s.mem, 0)?;
    }
    if let Some((out, start)) = into {
        let mut args = vec![
            KArg::Mem(s.mem.clone()),
            KArg::value(&start),
            KArg::Mem(memory::output(ctx, out, false)?),
            KArg::U64(out.offset() as u64),
        ];
        args.extend(rec.map(|r| KArg::Mem(r.clone())));
        let ev = launch(ctx, prog, "skel_reduce_into", &args, 1, [1, 1, 1], None);
        // The queue is in order: the next call may take the scratch once this is enqueued.
        s.give_back();
        fault::settle(ctx, rec, defs, out, ev?)?;
        return Ok(None);
    }
    let value = memory::read_elems::<T>(ctx, &s.mem, 1).map(|mut v| v.pop());
    s.give_back();
    fault::check(ctx, rec, defs)?;
    value
}

pub(super) fn run<F: BinaryFn<T>, T: DeviceType>(
    ctx: &Ctx,
    input: Arg<'_, T>,
    start: T,
    checked: bool,
) -> Result<T> {
    let n = input.shape().len();
    if n == 0 {
        return Ok(start);
    }
    let (p, plan) = prog::<F, T>(ctx, checked)?;
    let mem = memory::input(ctx, &input)?;
    let args = vec![KArg::Mem(mem), KArg::U64(input.offset() as u64)];
    let rec = fault::record_if(ctx, checked)?;
    let fault = (rec.as_ref(), &[F::definition()][..]);
    let total = two_pass::<T>(ctx, &plan, &p, "skel_reduce", args, n, fault)?;
    crate::check::host_call(F::NAME, || F::apply((), (start, total), &()))
}

/// [`run`] with the result written to the one-element `out` on the device (`run_into`).
pub(super) fn run_into<F: BinaryFn<T>, T: DeviceType>(
    ctx: &Ctx,
    input: Arg<'_, T>,
    start: T,
    mut out: ArgMut<'_, T>,
    checked: bool,
) -> Result<()> {
    let n = input.shape().len();
    if n == 0 {
        out.host_overwrite()?[0] = start;
        return Ok(());
    }
    let (p, plan) = prog::<F, T>(ctx, checked)?;
    let mem = memory::input(ctx, &input)?;
    let args = vec![KArg::Mem(mem), KArg::U64(input.offset() as u64)];
    let rec = fault::record_if(ctx, checked)?;
    let fault = (rec.as_ref(), &[F::definition()][..]);
    two_pass_to::<T>(
        ctx,
        &plan,
        &p,
        "skel_reduce",
        args,
        n,
        fault,
        Some((&out, start)),
    )
    .map(drop)
}

/// `(blocks, rows per block)` of the first column pass over a `rows x cols` matrix: enough
/// blocks for about 4096 work-items per compute unit (each work-item one column of one
/// block), blocks of at least 16 rows so the second pass stays small.
fn col_blocks(ctx: &Ctx, rows: usize, cols: usize) -> (usize, usize) {
    let wanted = (ctx.compute_units * 4096)
        .div_ceil(cols)
        .clamp(1, rows.div_ceil(16).max(1));
    let per = rows.div_ceil(wanted);
    (rows.div_ceil(per), per)
}

pub(super) fn run_axis<F: BinaryFn<T>, T: DeviceType>(
    ctx: &Ctx,
    input: Arg<'_, T>,
    out: ArgMut<'_, T>,
    axis: Axis,
    checked: bool,
) -> Result<()> {
    let (rows, cols) = dims(input.shape());
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let (p, plan) = prog::<F, T>(ctx, checked)?;
    let rec = fault::record_if(ctx, checked)?;
    let with_rec = |mut args: Vec<KArg>| {
        args.extend(rec.iter().map(|r| KArg::Mem(r.clone())));
        args
    };
    let in_mem = memory::input(ctx, &input)?;
    let out_mem = memory::output(ctx, &out, false)?;
    let ev = if axis == Axis::Cols {
        // Work-groups of 64: consecutive work-items take consecutive columns (coalesced
        // row segments); narrow matrices stack several blocks of rows in one work-group.
        let lx = cols.next_power_of_two().min(64);
        let ly = 64 / lx;
        let cols_pass = |src: cl::Mem, src_off: usize, rows: usize, per: usize, dst, dst_off| {
            let blocks = rows.div_ceil(per);
            let args = with_rec(vec![
                KArg::Mem(src),
                KArg::U64(src_off as u64),
                KArg::U64(rows as u64),
                KArg::U64(cols as u64),
                KArg::U64(per as u64),
                KArg::Mem(dst),
                KArg::U64(dst_off as u64),
            ]);
            let global = [round_up(cols, lx), round_up(blocks, ly), 1];
            launch(
                ctx,
                &p,
                "skel_reduce_cols",
                &args,
                2,
                global,
                Some([lx, ly, 1]),
            )
        };
        let (blocks, per) = col_blocks(ctx, rows, cols);
        if blocks == 1 {
            cols_pass(in_mem, input.offset(), rows, rows, out_mem, out.offset())?
        } else {
            let s = Scratch::take::<T>(ctx, blocks * cols)?;
            cols_pass(in_mem, input.offset(), rows, per, s.mem.clone(), 0)?;
            let ev = cols_pass(s.mem.clone(), 0, blocks, blocks, out_mem, out.offset())?;
            s.give_back();
            ev
        }
    } else if cols <= plan.items {
        // Bands of narrow rows, one work-group each, one work-item per row.
        let args = with_rec(vec![
            KArg::U64(rows as u64),
            KArg::U64(cols as u64),
            KArg::Mem(out_mem),
            KArg::U64(out.offset() as u64),
            KArg::Mem(in_mem),
            KArg::U64(input.offset() as u64),
        ]);
        let (wg, bands) = (plan.wg, rows.div_ceil(plan.wg));
        let name = "skel_reduce_rows_narrow";
        launch(
            ctx,
            &p,
            name,
            &args,
            1,
            [bands * wg, 1, 1],
            Some([wg, 1, 1]),
        )?
    } else {
        // One work-group per row: row r is chunk r of the flat positions.
        let args = with_rec(vec![KArg::Mem(in_mem), KArg::U64(input.offset() as u64)]);
        let split = (cols, rows);
        pass(
            ctx,
            &plan,
            &p,
            "skel_reduce",
            args,
            rows * cols,
            split,
            &out_mem,
            out.offset(),
        )?
    };
    fault::settle(ctx, rec.as_ref(), &[F::definition()], &out, ev)
}

#[cfg(test)]
mod tests {
    use super::{chunks, fit};

    #[test]
    fn chunks_are_whole_tiles_and_cover_the_input() {
        for (n, tile, cap) in [
            (1, 4096, 2112),
            (4096, 4096, 8),
            (4097, 4096, 8),
            (1 << 28, 4096, 2112),
        ] {
            let (chunk, groups) = chunks(n, tile, cap);
            assert_eq!(chunk % tile, 0);
            assert!(groups <= cap && groups * chunk >= n && (groups - 1) * chunk < n);
        }
        assert_eq!(chunks(4097, 4096, 8), (4096, 2));
        assert_eq!(chunks(1 << 20, 1024, 4), (1 << 18, 4));
    }

    #[test]
    fn large_elements_get_smaller_work_groups_that_fit() {
        // NVIDIA's OpenCL: 49152 bytes of local memory, half of it the budget.
        let budget = 49152 / 2;
        for elem in [4usize, 16, 64, 256, 1024, 4096] {
            let plan = fit(64, 32, elem, budget, true);
            assert!(plan.local_bytes(elem) as u64 <= budget, "{elem}: {plan:?}");
            assert_eq!(plan.wg % plan.run, 0, "{plan:?}");
        }
        let small = fit(64, 32, 4, budget, true);
        assert_eq!((small.wg, small.items), (64, 32));
        let big = fit(64, 32, 1024, budget, true);
        assert_eq!(big.items, 1);
        assert!(big.wg >= 8, "{big:?}");
        // An explicit work-group size is kept.
        assert_eq!(fit(64, 32, 1024, budget, false).wg, 64);
    }
}
