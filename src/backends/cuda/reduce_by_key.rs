//! ReduceByKey on CUDA (`cuda/reduce_by_key.cu`, the CUDA form of the OpenCL kernels): each
//! block groups every tile of (key, value)s by key with an integer counting sort in shared
//! memory and merges each key's run into the block's table (in shared memory where it
//! fits, else in a row of global scratch); a second kernel merges the blocks' tables into
//! `sums`. A checked call reads the keys out of range and the fault record before that
//! kernel, so an `Err` leaves `sums` as it was.

use super::context::ctx;
use super::fault::{self, Record};
use super::memory::{self, CuEvent, Scratch};
use super::module_cache::{launch, module, Dims, KernelArgs};
use super::multistream::{self, Work};
use super::trace::Tag;
use super::{
    arrays, assemble, checked_call_expr, cty, input_params, inputs_read, stage_inputs,
    uniform_params, CallSite, Cuda, MissingBytes,
};
use crate::backends::cpu::Outside;
use crate::backends::jit::ProgKey;
use crate::backends::{BinaryFn, ContainerOps};
use crate::codegen::{device_source_checked, Dialect};
use crate::containers::{ArgMut, Shape};
use crate::plan::ArgTuple;
use crate::userfn::{ElementwiseFn, UserFn};
use crate::{DeviceType, Error, Result};

const TEMPLATE: &str = include_str!("../../../cuda/reduce_by_key.cu");

/// Shared memory a block may take without the opt-in attribute.
const SHARED_BYTES: usize = 48 << 10;

/// Bytes the global rows of the scratch form may take.
const GLOBAL_ROWS_BYTES: usize = 256 << 20;

/// Threads per block, positions per thread and tile, for values of `elem` bytes: 256 x 4,
/// fewer while the tile's shared memory exceeds half of what a block may have.
fn tile_shape(elem: usize) -> Result<(usize, usize)> {
    let bytes = |wg: usize, items: usize| wg * items * elem + wg * (elem + 8);
    let (mut wg, mut items) = (256usize, 4usize);
    while items > 1 && bytes(wg, items) > SHARED_BYTES / 2 {
        items /= 2;
    }
    while wg > 32 && bytes(wg, items) > SHARED_BYTES / 2 {
        wg /= 2;
    }
    if bytes(wg, items) > SHARED_BYTES - 1024 {
        return Err(Error::InvalidArgument(format!(
            "ReduceByKey on CUDA: a value of {elem} bytes does not fit a block's shared \
             memory; use the cpu or rayon backend"
        )));
    }
    Ok((wg, items))
}

/// The kernel source: keys and values `F`, merged with `R`, tile `(wg, items)`, the table
/// in shared memory with `local`, the checked variant with `checked`.
pub(crate) fn source<F, R, V>(
    (wg, items): (usize, usize),
    local: bool,
    checked: bool,
) -> Result<String>
where
    F: ElementwiseFn + UserFn<Out = (u32, V)>,
    R: BinaryFn<V>,
    V: DeviceType,
{
    let def = F::definition();
    let user = device_source_checked(&[def, R::definition()], Dialect::Cuda, checked)?;
    let site = CallSite {
        pos: "SKEL_I",
        index: "skel_base + (SKEL_I)",
        window: "",
        stride: "",
    };
    let mut defines = vec![
        ("SKEL_V", cty::<V>()),
        ("SKEL_KVT", cty::<F::Out>()),
        ("SKEL_WG_RBK", wg.to_string()),
        ("SKEL_ITEMS", items.to_string()),
        ("SKEL_LOCAL_TABLE", u8::from(local).to_string()),
        (
            "SKEL_MERGE(a, b)",
            format!("{}(SKEL_FARG a, b)", user.entries[1]),
        ),
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
        (
            "SKEL_KV(SKEL_I)",
            checked_call_expr(&user.entries[0], def, &site, checked),
        ),
    ];
    defines.extend(fault::defines(checked));
    Ok(assemble(&user.source, &defines, TEMPLATE))
}

/// `sums[k]` = the merge of the values with key `k`, from `V::default()`.
pub(crate) fn run<'a, 'c, F, R, I, V>(
    exec: &Cuda,
    arrays: ContainerOps<'c, F>,
    inputs: I,
    shape: Shape,
    (sums, uniforms): (ArgMut<'_, V>, &F::Uniforms),
) -> Result<()>
where
    F: ElementwiseFn + UserFn<Out = (u32, V)>,
    R: BinaryFn<V>,
    I: ArgTuple<'a, Elems = F::Elems>,
    V: DeviceType + Default,
{
    let ctx = ctx()?;
    let n = shape.len();
    let keys = sums.shape().len();
    let elem = std::mem::size_of::<V>();
    let (wg, items) = tile_shape(elem)?;
    let tile = wg * items * elem + wg * (elem + 8);
    let table = keys * (elem + 12);
    let local = tile + table <= SHARED_BYTES - 1024;
    let checked = exec.checked;
    let key = match (local, checked) {
        (true, false) => "reduce_by_key_shared",
        (true, true) => "reduce_by_key_shared_checked",
        (false, false) => "reduce_by_key_global",
        (false, true) => "reduce_by_key_global_checked",
    };
    let m = module(
        ctx,
        ProgKey::of::<(F, R)>(key, ctx.ordinal),
        "reduce_by_key",
        &["skel_rbk", "skel_rbk_sum"],
        || source::<F, R, V>((wg, items), local, checked),
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
        follows: memory::busy_lane(ctx, &sums.lock()),
    };
    // One chunk: the blocks' tables are merged once, after every block (`.streams(k)` is
    // only validated).
    multistream::forced(exec.streams)?;
    let split = match n {
        0 => None,
        _ => Some(multistream::split(
            ctx,
            "reduce_by_key",
            n,
            1,
            Some(1),
            work,
        )?),
    };
    let (lane, tag) = match &split {
        Some(s) => (s.lanes[0], s.tag),
        None => (ctx.lane(0), Tag::call("reduce_by_key", 1)),
    };
    let tiles = n.div_ceil(wg * items).max(1);
    let mut groups = (ctx.sms as usize * (2048 / wg).max(1)).min(tiles);
    if !local {
        groups = groups.min((GLOBAL_ROWS_BYTES / table).max(1));
    }
    let rows = if n == 0 { 0 } else { groups };
    // Bytes: the two out-of-range words, the tables, their seen flags, (global form) the
    // counts and offsets.
    let cells = rows * keys;
    let tbl_at = 8;
    let seen_at = tbl_at + (cells * elem).next_multiple_of(8);
    let cnt_at = seen_at + cells * 4;
    let off_at = cnt_at + if local { 0 } else { cells * 4 };
    let end = off_at + if local { 0 } else { cells * 4 };
    let mut scratch = Scratch::new(lane, end.max(16))?;
    scratch.zero(0, 8)?;
    let base = scratch.ptr;
    let at = |b: usize| base + b as u64;
    let rec = Record::new(checked, &[lane])?;
    if let Some(split) = &split {
        let part = split.chunks[0].clone();
        let whole = arrays::stage(ctx, &arrays, lane, tag)?;
        let ptrs = stage_inputs(ctx, &inputs, part.clone(), lane, tag)?;
        let mut args = KernelArgs::default();
        args.u64(n as u64)
            .u64(shape.cols().max(1) as u64)
            .u64(exec.index_base as u64)
            .i32(keys as i32)
            .i32((wg / keys).max(1) as i32)
            .ptr(at(cnt_at))
            .ptr(at(off_at))
            .ptr(at(tbl_at))
            .ptr(at(seen_at))
            .ptr(scratch.ptr);
        arrays::push(&mut args, &whole, true);
        for p in &ptrs {
            args.ptr(*p);
        }
        args.uniforms(uniforms);
        if let Some(rec) = &rec {
            args.ptr(rec.ptr());
        }
        let shared = tile + if local { table } else { 0 };
        let dims = Dims::line(groups as u32, wg as u32, shared as u32);
        launch(ctx, lane, tag, m.func("skel_rbk")?, dims, &mut args)?;
        let ev = CuEvent::record(lane)?;
        arrays::read(ctx, &arrays, (lane, tag), &ev)?;
        inputs_read(ctx, &inputs, part, (lane, tag), &ev)?;
        scratch.used_until(&ev);
    }
    if checked {
        if let Some(rec) = &rec {
            rec.check(&[], &[F::definition(), R::definition()])?;
        }
        let mut words = [0u8; 8];
        scratch.read_control(0, &mut words)?;
        let outside = Outside {
            count: u64::from(memory::from_bytes::<u32>(&words[..4])),
            max: memory::from_bytes::<u32>(&words[4..]),
        };
        outside.check(F::NAME, "key", keys)?;
    }
    let eager = memory::eager_download(&sums, exec.download);
    let dst = memory::output_part(ctx, &sums, 0..keys, false, lane, tag)?;
    let mut args = KernelArgs::default();
    args.ptr(at(tbl_at))
        .ptr(at(seen_at))
        .i32(rows as i32)
        .i32(keys as i32)
        .value(&V::default())
        .ptr(dst);
    if let Some(rec) = &rec {
        args.ptr(rec.ptr());
    }
    let grid = keys.div_ceil(256).min(4 * ctx.sms as usize) as u32;
    let dims = Dims::line(grid, 256, 0);
    launch(ctx, lane, tag, m.func("skel_rbk_sum")?, dims, &mut args)?;
    let ev = CuEvent::record(lane)?;
    scratch.used_until(&ev);
    let mut written = fault::Written::new(ctx, vec![&sums]);
    written.push(0..keys, ev);
    written.settle(rec.as_ref(), &[F::definition(), R::definition()])?;
    if eager {
        memory::download_part(ctx, &sums, 0..keys, lane, tag)?;
    }
    Ok(())
}
