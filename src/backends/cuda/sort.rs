//! Sort on CUDA: an LSD radix sort of 8-bit digits with decoupled look-back per pass
//! (`cuda/sort.cu`, the structure of CUB's onesweep): one histogram pass over all digits,
//! a scan of the counts, then one kernel per digit that ranks its tiles and publishes
//! per-digit prefixes with look-back.
//!
//! Keys ping-pong between the operand's device copy and one scratch buffer (a last pass
//! that ends in the scratch buffer is copied back). Values of 4 bytes ride along as the
//! kernels' 32-bit payload; values of any other size are sorted as their positions, then
//! gathered (`values[i] = old[position[i]]`). The sort runs on one stream: `.streams(k)`
//! is accepted and checked, but a sort is one permutation of the whole operand and is not
//! cut into chunks.

use std::sync::Arc;

use super::context::ctx;
use super::memory::{self, CuEvent, Scratch};
use super::module_cache::{launch, module, Dims, KernelArgs};
use super::multistream::{self, Work};
use super::{assemble, Cuda};
use crate::backends::jit::ProgKey;
use crate::containers::ArgMut;
use crate::skeletons::{KeyKind, RadixBits};
use crate::{DeviceType, Error, Result, SortKey};

const TEMPLATE: &str = include_str!("../../../cuda/sort.cu");

/// Threads per block of every kernel (the pass kernel has one thread per digit value).
const BLOCK: usize = 256;

/// Keys per thread of a pass: 16 (tiles of 4096) for keys of up to 4 bytes, 8 for 8-byte
/// keys, so that the tile's keys and payloads fit the 48 KiB of static shared memory.
fn items<K>() -> usize {
    if std::mem::size_of::<K>() > 4 {
        8
    } else {
        16
    }
}

/// The unsigned C type of `bits` bits.
fn key_type(bits: u32) -> &'static str {
    match bits {
        8 => "unsigned char",
        16 => "unsigned short",
        32 => "unsigned int",
        _ => "unsigned long long",
    }
}

/// The kernels for keys `K`, with a 32-bit payload when `pairs`, with 64-bit status words
/// when `wide`.
pub(crate) fn source<K: SortKey>(pairs: bool, wide: bool) -> String {
    let bits = <K::Bits as RadixBits>::BITS;
    let kind = match K::KIND {
        KeyKind::Unsigned => 0,
        KeyKind::Signed => 1,
        KeyKind::Float => 2,
    };
    let defines = [
        ("SKEL_KEY", key_type(bits).to_string()),
        ("SKEL_KBITS", bits.to_string()),
        ("SKEL_KIND", kind.to_string()),
        ("SKEL_ITEMS", items::<K>().to_string()),
        ("SKEL_PAIRS", i32::from(pairs).to_string()),
        ("SKEL_WIDE", i32::from(wide).to_string()),
    ];
    assemble("", &defines, TEMPLATE)
}

/// How the values travel: as the kernels' payload themselves (4 bytes), or as positions
/// gathered at the end.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Payload {
    None,
    Values,
    Positions,
}

/// Sorts `keys` (and moves `values` with them) on the device.
pub(crate) fn run<K: SortKey, V: DeviceType>(
    exec: &Cuda,
    keys: ArgMut<'_, K>,
    values: Option<ArgMut<'_, V>>,
) -> Result<()> {
    let ctx = ctx()?;
    let n = keys.shape().len();
    if n <= 1 {
        return Ok(());
    }
    if n >= u32::MAX as usize {
        return Err(Error::InvalidArgument(format!(
            "Sort of {n} keys on CUDA: at most {} keys per call (counts and positions are \
             32-bit); sort parts and merge them, or use the rayon backend",
            u32::MAX - 1
        )));
    }
    let payload = match &values {
        None => Payload::None,
        Some(_) if std::mem::size_of::<V>() == 4 => Payload::Values,
        Some(_) => Payload::Positions,
    };
    let pairs = payload != Payload::None;
    let wide = n >= 1 << 30;
    let kind = match (pairs, wide) {
        (false, false) => "sort_keys",
        (false, true) => "sort_keys_wide",
        (true, false) => "sort_pairs",
        (true, true) => "sort_pairs_wide",
    };
    let m = module(
        ctx,
        ProgKey::of::<K>(kind, ctx.ordinal),
        "sort",
        &[
            "skel_sort_hist",
            "skel_sort_offsets",
            "skel_sort_pass",
            "skel_sort_gather",
        ],
        || Ok(source::<K>(pairs, wide)),
    )?;
    let (ksize, vsize) = (std::mem::size_of::<K>(), std::mem::size_of::<V>());
    let eager = memory::eager_download(&keys, exec.download);
    let work = Work {
        up: 0,
        kernel: n * ksize,
        down: 0,
        follows: memory::busy_lane(ctx, &keys.lock()),
    };
    // One chunk: `align` of `n` leaves one unit.
    let split = multistream::split(ctx, "sort", n, n, multistream::forced(exec.streams)?, work)?;
    let (lane, tag) = (split.lanes[0], split.tag);

    let passes = (<K::Bits as RadixBits>::BITS / 8) as usize;
    let tile = BLOCK * items::<K>();
    let tiles = n.div_ceil(tile);
    let status_bytes = if wide { 8 } else { 4 };
    // Scratch layout (bytes): per pass its look-back status words and its tile counter,
    // then the counts (turned into offsets) of every pass; all zeroed. Then the keys'
    // second buffer, the payload buffers, and a copy of the values for the gather.
    let status_at = |p: usize| p * tiles * 256 * status_bytes;
    let counters_at = status_at(passes);
    let hist_at = counters_at + passes * 4;
    let zeroed = hist_at + passes * 256 * 4;
    let keys2_at = zeroed.next_multiple_of(16);
    let pay_at = (keys2_at + n * ksize).next_multiple_of(16);
    let pay_bytes = n * 4;
    // Payload buffers in scratch: the values' second buffer, or both position buffers.
    let pay_buffers = match payload {
        Payload::None => 0,
        Payload::Values => 1,
        Payload::Positions => 2,
    };
    let copy_at = (pay_at + pay_buffers * pay_bytes).next_multiple_of(16);
    let copy_bytes = if payload == Payload::Positions {
        n * vsize
    } else {
        0
    };
    let scratch = Scratch::new(lane, copy_at + copy_bytes)?;
    scratch.zero(0, zeroed)?;
    let s = |at: usize| scratch.ptr + at as u64;

    let kbuf = [
        memory::output_part(ctx, &keys, 0..n, true, lane, tag)?,
        s(keys2_at),
    ];
    let vdst = match &values {
        Some(v) => Some(memory::output_part(ctx, v, 0..n, true, lane, tag)?),
        None => None,
    };
    let pbuf = match (payload, vdst) {
        (Payload::Values, Some(v)) => [v, s(pay_at)],
        (Payload::Positions, _) => [s(pay_at), s(pay_at + pay_bytes)],
        _ => [0, 0],
    };
    let grid = |work: usize| (n.div_ceil(work).min(ctx.sms as usize * 8)).max(1) as u32;

    let issued = (|| -> Result<()> {
        let mut args = KernelArgs::default();
        args.ptr(kbuf[0]).u64(n as u64).ptr(s(hist_at));
        let dims = Dims::line(grid(BLOCK * 16), BLOCK as u32, 0);
        launch(ctx, lane, tag, m.func("skel_sort_hist")?, dims, &mut args)?;
        let mut args = KernelArgs::default();
        args.ptr(s(hist_at));
        let dims = Dims::line(passes as u32, BLOCK as u32, 0);
        launch(
            ctx,
            lane,
            tag,
            m.func("skel_sort_offsets")?,
            dims,
            &mut args,
        )?;
        for p in 0..passes {
            let (from, to) = (p % 2, 1 - p % 2);
            // The first pass of a position payload starts from the positions themselves.
            let vin = if payload == Payload::Positions && p == 0 {
                0
            } else {
                pbuf[from]
            };
            let mut args = KernelArgs::default();
            args.ptr(kbuf[from])
                .ptr(kbuf[to])
                .ptr(vin)
                .ptr(pbuf[to])
                .u64(n as u64)
                .i32((8 * p) as i32)
                .ptr(s(hist_at + p * 256 * 4))
                .ptr(s(status_at(p)))
                .ptr(s(counters_at + p * 4));
            let dims = Dims::line(tiles as u32, BLOCK as u32, 0);
            launch(ctx, lane, tag, m.func("skel_sort_pass")?, dims, &mut args)?;
        }
        let gather = |src: u64, dst: u64, idx: u64, size: usize| -> Result<()> {
            let mut args = KernelArgs::default();
            args.ptr(src)
                .ptr(dst)
                .ptr(idx)
                .u64(n as u64)
                .i32(size as i32);
            let dims = Dims::line(grid(BLOCK * 4), BLOCK as u32, 0);
            launch(ctx, lane, tag, m.func("skel_sort_gather")?, dims, &mut args)
        };
        let last = passes % 2; // the buffer the last pass wrote
        if last == 1 {
            gather(kbuf[1], kbuf[0], 0, ksize)?;
            if payload == Payload::Values {
                gather(pbuf[1], pbuf[0], 0, 4)?;
            }
        }
        if let (Payload::Positions, Some(v)) = (payload, vdst) {
            gather(v, s(copy_at), 0, vsize)?;
            gather(s(copy_at), v, pbuf[last], vsize)?;
        }
        Ok(())
    })();
    let ev: Arc<CuEvent> = CuEvent::record(lane)?;
    if let Err(e) = issued {
        // A failed launch may have left any mix of old and moved elements where the device
        // copy was current: it stays the newest; elsewhere the old copy stays valid.
        memory::maybe_written_part(ctx, &keys, 0..n, &ev)?;
        if let Some(v) = &values {
            memory::maybe_written_part(ctx, v, 0..n, &ev)?;
        }
        return Err(e);
    }
    memory::written_part(ctx, &keys, 0..n, &ev)?;
    if let Some(v) = &values {
        memory::written_part(ctx, v, 0..n, &ev)?;
    }
    if eager {
        memory::download_part(ctx, &keys, 0..n, lane, tag)?;
        if let Some(v) = &values {
            memory::download_part(ctx, v, 0..n, lane, tag)?;
        }
    }
    drop(scratch); // freed in stream order, after the kernels
    Ok(())
}
