//! Scan on CUDA: single pass with decoupled look-back (`cuda/scan.cu`).

use super::context::ctx;
use super::fault::{self, Record};
use super::memory::{self, CuEvent, Scratch};
use super::module_cache::{launch, module, Dims, KernelArgs};
use super::multistream::{self, Work};
use super::{assemble, cty, tuned_shape, Cuda};
use crate::backends::jit::ProgKey;
use crate::backends::BinaryFn;
use crate::codegen::{device_source_checked, Dialect};
use crate::containers::{Arg, ArgMut};
use crate::plan::ScanMode;
use crate::{DeviceType, Error, Result};

const TEMPLATE: &str = include_str!("../../../cuda/scan.cu");

/// Threads per block, values per thread and blocks per SM asked of the compiler
/// (`SKEL_BLOCK`, `SKEL_ITEMS`, `SKEL_MIN_BLOCKS` in the template): 256 threads with about
/// 128 bytes of values each (at most 32, at least 1), four blocks per SM. The scan is
/// latency-bound (ncu: 60% of cycles without a ready warp at 512 threads and 3 blocks/SM);
/// this shape keeps more tiles in flight and measured 0.87 ms against 1.14 ms for 2^28 f32
/// on the H200 (torch.cumsum: 0.83 ms). The tuning knob
/// `SKEL_SCAN_TUNE=<threads>,<bytes per thread>[,<min blocks per SM>]` overrides them (for
/// benchmarking).
fn shape<T>() -> (usize, usize, usize) {
    static TUNE: std::sync::OnceLock<(usize, usize, usize)> = std::sync::OnceLock::new();
    tuned_shape::<T>(&TUNE, &crate::config::SCAN_TUNE, (256, 128, 4))
}

/// Whether the look-back packs each tile's status and value into one 64-bit word
/// (`SKEL_PACKED`): for values of at most 4 bytes, unless `SKEL_SCAN_PACKED=0` (for
/// benchmarking the general path).
fn packed<T>() -> bool {
    static OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let off = *OFF.get_or_init(|| !crate::config::SCAN_PACKED.fixed_value());
    std::mem::size_of::<T>() <= 4 && !off
}

/// The kernel source for scanning `T`s with `F`, the checked variant with `checked`.
pub(crate) fn source<F: BinaryFn<T>, T: DeviceType>(checked: bool) -> Result<String> {
    let user = device_source_checked(&[F::definition()], Dialect::Cuda, checked)?;
    let mut defines = vec![
        ("SKEL_T", cty::<T>()),
        ("SKEL_OP(a, b)", format!("{}(SKEL_FARG a, b)", user.entry())),
        ("SKEL_BLOCK", shape::<T>().0.to_string()),
        ("SKEL_ITEMS", shape::<T>().1.to_string()),
        ("SKEL_MIN_BLOCKS", shape::<T>().2.to_string()),
        ("SKEL_PACKED", i32::from(packed::<T>()).to_string()),
    ];
    defines.extend(fault::defines(checked));
    Ok(assemble(&user.source, &defines, TEMPLATE))
}

/// Inclusive or exclusive scan of `input` into `out`, split into chunks over streams:
/// chunk `c` starts from the total of everything before it, which chunk `c - 1`'s last
/// tile writes to a carry slot, so the kernels run one after another (each filling the
/// device) while the other chunks' uploads and downloads overlap them. With `carry` (a part
/// of a call split over device slots, `devices.rs`), chunk 0 starts from it: the inclusive
/// prefix of everything before the part, `start` included in exclusive mode.
pub(crate) fn run<F: BinaryFn<T>, T: DeviceType>(
    exec: &Cuda,
    input: Arg<'_, T>,
    out: ArgMut<'_, T>,
    (mode, start): (ScanMode, T),
    carry: Option<T>,
) -> Result<()> {
    let ctx = ctx()?;
    let n = input.shape().len();
    if n == 0 {
        return Ok(());
    }
    let (block, items, _) = shape::<T>();
    let tile = block * items;
    let too_long = || Error::InvalidArgument(format!("Scan of {n} elements is too long"));
    if n.div_ceil(tile) >= (u32::MAX / 2) as usize {
        return Err(too_long());
    }
    let checked = exec.checked;
    let key = if checked { "scan_checked" } else { "scan" };
    let m = module(
        ctx,
        ProgKey::of::<(F, T)>(key, ctx.ordinal),
        "scan",
        &["skel_scan"],
        || source::<F, T>(checked),
    )?;
    let size = std::mem::size_of::<T>();
    let eager = memory::eager_download(&out, exec.download);
    let work = Work {
        up: memory::missing_bytes(ctx, &input, 0..n),
        kernel: 2 * n * size,
        down: if eager { n * size } else { 0 },
        follows: memory::busy_lane(ctx, &out.lock()),
    };
    // Chunks of whole tiles: only a chunk's last tile is partial.
    let split = multistream::split(
        ctx,
        "scan",
        n,
        tile,
        multistream::forced(exec.streams)?,
        work,
    )?;
    // Per chunk: its look-back state (counter and flags zeroed; packed: counter, one
    // unused word, one 64-bit status word per tile, all zeroed), then one carry slot per
    // chunk, 8-byte aligned.
    let w = size.div_ceil(4);
    let states: Vec<(usize, usize)> = split
        .chunks
        .iter()
        .map(|part| {
            let tiles = part.len().div_ceil(tile);
            if packed::<T>() {
                (2 + 2 * tiles, 2 + 2 * tiles)
            } else {
                (1 + tiles + 2 * tiles * w, 1 + tiles)
            }
        })
        .collect();
    let state_words: usize = states
        .iter()
        .map(|&(words, _)| words.next_multiple_of(2))
        .sum();
    let carry_words = w.next_multiple_of(2);
    let lead = split.lanes[0];
    // The carry slot after the chunks' holds the part's carry-in, if any.
    let mut state = Scratch::new(lead, (state_words + (split.len() + 1) * carry_words) * 4)?;
    state.zero(0, state_words * 4)?;
    if let Some(v) = &carry {
        state.write_value((state_words + split.len() * carry_words) * 4, v)?;
    }
    state.share(&split.lanes[1..])?;
    let state_base = state.ptr;
    let seed = carry.map(|_| state_base + ((state_words + split.len() * carry_words) * 4) as u64);
    let carry = |c: usize| state_base + ((state_words + c * carry_words) * 4) as u64;
    let mut srcs = Vec::with_capacity(split.len());
    for (_, part, lane, tag) in split.parts() {
        srcs.push(memory::input_part(ctx, &input, part, lane, tag)?);
    }
    let rec = Record::new(checked, &split.lanes)?;
    let mut written = fault::Written::new(ctx, vec![&out]);
    let mut at = 0;
    let mut previous: Option<std::sync::Arc<CuEvent>> = None;
    for (((c, part, lane, tag), src), &(words, _)) in split.parts().zip(srcs).zip(&states) {
        let tiles = part.len().div_ceil(tile);
        let dst = memory::output_part(ctx, &out, part.clone(), false, lane, tag)?;
        if let Some(ev) = &previous {
            ev.order(lane)?;
        }
        let last = c + 1 == split.len();
        let mut args = KernelArgs::default();
        args.ptr(src)
            .ptr(dst)
            .u64(part.len() as u64)
            .ptr(state.ptr + (at * 4) as u64)
            .i32(tiles as i32)
            .i32(i32::from(mode == ScanMode::Exclusive))
            .value(&start)
            .ptr(if c == 0 {
                seed.unwrap_or(0)
            } else {
                carry(c - 1)
            })
            .ptr(if last { 0 } else { carry(c) });
        if let Some(rec) = &rec {
            args.ptr(rec.ptr());
        }
        at += words.next_multiple_of(2);
        // One element of padding per 32 (SKEL_PAD in the template).
        let shared = ((tile + tile / 32) * size) as u32;
        let dims = Dims::line(tiles as u32, block as u32, shared);
        launch(ctx, lane, tag, m.func("skel_scan")?, dims, &mut args)?;
        let ev = CuEvent::record(lane)?;
        memory::read_by(ctx, &input, part.clone(), &ev)?;
        state.used_until(&ev);
        written.push(part, ev.clone());
        previous = Some(ev);
    }
    written.settle(rec.as_ref(), &[F::definition()])?;
    if eager {
        split.download(ctx, &out, |part| part)?;
    }
    Ok(())
}
