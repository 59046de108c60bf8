//! Histogram on CUDA (`cuda/histogram.cu`): each block counts into sub-histograms in shared
//! memory (one per group of warps, as many as fit) and writes their sum to its own row of a
//! scratch table; where the bins do not fit in shared memory, blocks count with global
//! atomics into a few shared rows. A second kernel adds the rows into `counts`, which it
//! overwrites. MultiStream chunks count into rows of their own; the sum follows them all.
//! A checked call reads the bins out of range (and the fault record) before the sum, so
//! an `Err` leaves `counts` as it was.

use super::context::{ctx, Ctx};
use super::fault::{self, Record};
use super::memory::{self, CuEvent, Scratch};
use super::module_cache::{launch, module, Dims, KernelArgs};
use super::multistream::{self, Work};
use super::{
    arrays, assemble, checked_call_expr, cty, grid_for, input_params, inputs_read, stage_inputs,
    uniform_params, CallSite, Cuda, MissingBytes,
};
use crate::backends::cpu::Outside;
use crate::backends::jit::ProgKey;
use crate::backends::ContainerOps;
use crate::codegen::ir::ParamKind;
use crate::codegen::{c_type, device_source_checked, Dialect};
use crate::containers::{ArgMut, Shape};
use crate::plan::ArgTuple;
use crate::skeletons::Count;
use crate::userfn::{ElementwiseFn, UserFn};
use crate::{Error, Result};

const TEMPLATE: &str = include_str!("../../../cuda/histogram.cu");

/// Threads per block of the counting kernel.
const BLOCK: usize = 256;

/// Sub-histograms per block in shared memory: one per warp at most.
const MAX_COPIES: usize = BLOCK / 32;

/// Shared memory a block may take without the opt-in attribute (every CUDA device has it).
const SHARED_BYTES: usize = 48 << 10;

/// Bytes of global scratch the rows of the global-atomics form may take.
const GLOBAL_ROWS_BYTES: usize = 64 << 20;

/// The element type of the one input whose values a thread loads 16 bytes at a time, if
/// the function has exactly one input and its size divides 16 (`None`: value by value).
fn vector_input(def: &'static crate::codegen::ir::FnDef) -> Option<(String, usize)> {
    let elems: Vec<_> = def
        .params
        .iter()
        .filter(|p| p.kind == ParamKind::Elem)
        .collect();
    let [p] = elems.as_slice() else {
        return None;
    };
    let size = p.ty.size();
    (size > 0 && size <= 16 && 16 % size == 0).then(|| (c_type(p.ty, Dialect::Cuda), 16 / size))
}

/// The kernel source for bins `F` counted into `C`s, in shared memory with `shared`, the
/// checked variant with `checked`.
pub(crate) fn source<F: ElementwiseFn + UserFn<Out = u32>, C: Count>(
    shared: bool,
    checked: bool,
) -> Result<String> {
    let def = F::definition();
    let user = device_source_checked(&[def], Dialect::Cuda, checked)?;
    let site = CallSite {
        pos: "SKEL_I",
        index: "skel_base + (SKEL_I)",
        window: "",
        stride: "",
    };
    let call = checked_call_expr(user.entry(), def, &site, checked);
    let mut defines = vec![
        ("SKEL_BLOCK", BLOCK.to_string()),
        ("SKEL_C", cty::<C>()),
        ("SKEL_SHARED", u8::from(shared).to_string()),
        (
            "SKEL_PARAMS",
            format!(
                "{}{}{}{}",
                arrays::container_params(def),
                input_params(def),
                uniform_params(def),
                if checked {
                    ", unsigned int* skel_fault"
                } else {
                    ""
                }
            ),
        ),
        ("SKEL_CALL(SKEL_I)", call),
    ];
    match vector_input(def) {
        Some((ty, v)) => {
            let site = CallSite {
                pos: "(SKEL_I) + (SKEL_W)",
                index: "skel_base + (SKEL_I) + (SKEL_W)",
                window: "",
                stride: "",
            };
            let callv = checked_call_expr(user.entry(), def, &site, checked)
                .replace("in0[(SKEL_I) + (SKEL_W)]", "skel_u.t[SKEL_W]");
            defines.push(("SKEL_VEC", "1".into()));
            defines.push(("SKEL_IN_T", ty));
            defines.push(("SKEL_V", v.to_string()));
            defines.push(("SKEL_CALLV(SKEL_I, SKEL_W)", callv));
        }
        None => defines.push(("SKEL_VEC", "0".into())),
    }
    defines.extend(fault::defines(checked));
    Ok(assemble(&user.source, &defines, TEMPLATE))
}

/// Sub-histograms per block in shared memory for `bins` bins (0: they do not fit).
fn copies(bins: usize) -> usize {
    // Leave room for what the compiler itself places in shared memory.
    ((SHARED_BYTES - 1024) / 4 / (bins + 1)).min(MAX_COPIES)
}

/// `counts[b] = #{i : F(inputs[i]..) == b}`, `counts` overwritten.
pub(crate) fn run<'a, 'c, F, I, C>(
    exec: &Cuda,
    arrays: ContainerOps<'c, F>,
    inputs: I,
    shape: Shape,
    (counts, uniforms): (ArgMut<'_, C>, &F::Uniforms),
) -> Result<()>
where
    F: ElementwiseFn + UserFn<Out = u32>,
    I: ArgTuple<'a, Elems = F::Elems>,
    C: Count,
{
    let ctx = ctx()?;
    let n = shape.len();
    let bins = counts.shape().len();
    let copies = copies(bins);
    let checked = exec.checked;
    let key = match (copies > 0, checked) {
        (true, false) => "histogram_shared",
        (true, true) => "histogram_shared_checked",
        (false, false) => "histogram_global",
        (false, true) => "histogram_global_checked",
    };
    let m = module(
        ctx,
        ProgKey::of::<(F, C)>(key, ctx.ordinal),
        "histogram",
        &["skel_histogram", "skel_histogram_sum"],
        || source::<F, C>(copies > 0, checked),
    )?;
    let mut missing = MissingBytes {
        ctx,
        bytes: 0,
        total: 0,
    };
    inputs.visit(&mut missing)?;
    arrays.visit(&mut missing)?;
    let work = Work {
        up: missing.bytes,
        kernel: missing.total,
        down: 0,
        follows: memory::busy_lane(ctx, &counts.lock()),
    };
    // Chunks start at multiples of 16 values: a 16-byte aligned input stays aligned.
    let split = if n == 0 {
        None
    } else {
        Some(multistream::split(
            ctx,
            "histogram",
            n,
            16,
            multistream::forced(exec.streams)?,
            work,
        )?)
    };
    let chunks: Vec<_> = split.iter().flat_map(|s| s.parts()).collect();
    // Per chunk: its blocks, and its first row.
    // Eight blocks of 256 threads fill an SM (8 sub-histograms of 256 bins take 8 KiB of
    // its shared memory per block).
    let grids: Vec<usize> = chunks
        .iter()
        .map(|(_, part, _, _)| grid_for(ctx, part.len(), BLOCK * 4, 8) as usize)
        .collect();
    let rows_of = |grid: usize| {
        if copies > 0 {
            grid
        } else {
            (GLOBAL_ROWS_BYTES / (4 * bins)).clamp(1, grid)
        }
    };
    for ((_, part, _, _), &grid) in chunks.iter().zip(&grids) {
        if part.len().div_ceil(rows_of(grid)) > u32::MAX as usize {
            return Err(Error::InvalidArgument(format!(
                "Histogram of `{}`: {} elements into {bins} bins overflow the device's \
                 32-bit sub-histograms; split the call (or use fewer bins)",
                F::NAME,
                part.len()
            )));
        }
    }
    let rows: usize = grids.iter().map(|&g| rows_of(g)).sum();
    let lead = match &split {
        Some(s) => s.lanes[0],
        None => ctx.lane(0),
    };
    let lanes: Vec<_> = chunks.iter().map(|c| c.2).collect();
    // Words: the two out-of-range words, then the rows.
    let mut scratch = Scratch::new(lead, (2 + rows.max(1) * bins) * 4)?;
    let zeroed = if copies > 0 { 2 } else { 2 + rows * bins };
    scratch.zero(0, zeroed * 4)?;
    scratch.share(&lanes)?;
    let part_ptr = scratch.ptr + 8;
    let staged = chunks
        .iter()
        .map(|&(_, ref part, lane, tag)| {
            let whole = arrays::stage(ctx, &arrays, lane, tag)?;
            Ok((whole, stage_inputs(ctx, &inputs, part.clone(), lane, tag)?))
        })
        .collect::<Result<Vec<_>>>()?;
    let rec = Record::new(checked, &lanes)?;
    let func = m.func("skel_histogram")?;
    let mut events = Vec::with_capacity(chunks.len());
    let mut row = 0;
    for ((c, part, lane, tag), &grid) in chunks.iter().cloned().zip(&grids) {
        let r = rows_of(grid);
        let mut args = KernelArgs::default();
        args.ptr(part_ptr + (row * bins * 4) as u64)
            .u64(part.len() as u64)
            .u64(shape.cols().max(1) as u64)
            .u64((exec.index_base + part.start) as u64)
            .i32(bins as i32)
            .i32(r as i32)
            .i32(copies.max(1) as i32)
            .ptr(scratch.ptr);
        arrays::push(&mut args, &staged[c].0, true);
        for p in &staged[c].1 {
            args.ptr(*p);
        }
        args.uniforms(uniforms);
        if let Some(rec) = &rec {
            args.ptr(rec.ptr());
        }
        let shared = (copies * (bins + 1) * 4) as u32;
        let dims = Dims::line(grid as u32, BLOCK as u32, shared);
        launch(ctx, lane, tag, func, dims, &mut args)?;
        let ev = CuEvent::record(lane)?;
        arrays::read(ctx, &arrays, (lane, tag), &ev)?;
        inputs_read(ctx, &inputs, part, (lane, tag), &ev)?;
        scratch.used_until(&ev);
        ev.order(lead)?;
        events.push(ev);
        row += r;
    }
    if checked {
        if let Some(rec) = &rec {
            rec.check(&events, &[F::definition()])?;
        }
        let mut words = [0u8; 8];
        scratch.read_control(0, &mut words)?;
        let outside = Outside {
            count: u64::from(memory::from_bytes::<u32>(&words[..4])),
            max: memory::from_bytes::<u32>(&words[4..]),
        };
        outside.check(F::NAME, "bin", bins)?;
    }
    sum(
        ctx,
        exec,
        &m,
        (part_ptr, rows, bins),
        &counts,
        lead,
        split.as_ref(),
    )
}

/// Adds the `rows` rows at `part` into `counts` (overwriting it) on `lead`, after the
/// counting kernels (already ordered there).
fn sum<C: Count>(
    ctx: &Ctx,
    exec: &Cuda,
    m: &super::module_cache::Module,
    (part, rows, bins): (u64, usize, usize),
    counts: &ArgMut<'_, C>,
    lead: super::context::Lane,
    split: Option<&multistream::Split>,
) -> Result<()> {
    let tag = match split {
        Some(s) => s.tag,
        None => super::trace::Tag::call("histogram", 1),
    };
    let eager = memory::eager_download(counts, exec.download);
    let dst = memory::output_part(ctx, counts, 0..bins, false, lead, tag)?;
    let mut args = KernelArgs::default();
    args.ptr(part).i32(rows as i32).i32(bins as i32).ptr(dst);
    let grid = bins.div_ceil(256).min(4 * ctx.sms as usize) as u32;
    launch(
        ctx,
        lead,
        tag,
        m.func("skel_histogram_sum")?,
        Dims::line(grid, 256, 0),
        &mut args,
    )?;
    let ev = CuEvent::record(lead)?;
    let mut written = fault::Written::new(ctx, vec![counts]);
    written.push(0..bins, ev);
    written.settle(None, &[])?;
    if eager {
        memory::download_part(ctx, counts, 0..bins, lead, tag)?;
    }
    Ok(())
}
