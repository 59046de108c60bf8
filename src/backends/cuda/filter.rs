//! Filter on CUDA: single-pass stream compaction with decoupled look-back
//! (`cuda/filter.cu`), the predicate evaluated inside the kernel; the checked variant
//! (`.checked(true)`) is a kernel of its own whose fault record is read with the counts.

use std::sync::{Arc, OnceLock};

use super::context::ctx;
use super::fault::{self, Record};
use super::memory::{self, CuEvent, Scratch};
use super::module_cache::{launch, module, Dims, KernelArgs};
use super::multistream::{self, Work};
use super::{assemble, checked_call_expr, cty, tuned_shape, uniform_params, CallSite, Cuda};
use crate::backends::jit::ProgKey;
use crate::backends::PredicateFn;
use crate::codegen::{device_source_checked, Dialect};
use crate::containers::{Arg, ArgMut};
use crate::{DeviceType, Error, Result};

const TEMPLATE: &str = include_str!("../../../cuda/filter.cu");

/// Threads per block, values per thread and blocks per SM asked of the compiler: 512
/// threads with 96 bytes of values each (24 `i32`s, six 16-byte loads; at most 32 values, at
/// least 1), three blocks per SM. Chosen by `benches/peers/filter_sweep.py` on the H100 for
/// 2^28 i32 at selectivity 0.5 (kernel ms): 512x96 B x3 0.715, 256x128 B x1 0.751,
/// 512x96 B x1 0.802, 512x64 B x1 0.820, 256x64 B x1 0.862, 128x64 B x1 0.912; the previous
/// kernel's best shape, 512x64 B x2, took 1.026 ms in the same run.
/// The tuning knob `SKEL_FILTER_TUNE=<threads>,<bytes per thread>[,<min blocks per SM>]`
/// overrides them (for benchmarking).
fn shape<T>() -> (usize, usize, usize) {
    static TUNE: OnceLock<(usize, usize, usize)> = OnceLock::new();
    tuned_shape::<T>(&TUNE, &crate::config::FILTER_TUNE, (512, 96, 3))
}

/// The kernel source for filtering `T`s with `F`, the checked variant with `checked`.
pub(crate) fn source<F: PredicateFn<T>, T: DeviceType>(checked: bool) -> Result<String> {
    let user = device_source_checked(&[F::definition()], Dialect::Cuda, checked)?;
    let site = CallSite {
        pos: "SKEL_P",
        index: "skel_base + (SKEL_P)",
        window: "",
        stride: "",
    };
    // The element comes from registers, not from `in0`.
    let call = checked_call_expr(user.entry(), F::definition(), &site, checked)
        .replace("in0[SKEL_P]", "(SKEL_X)");
    let (block, items, min_blocks) = shape::<T>();
    let mut defines = vec![
        ("SKEL_T", cty::<T>()),
        ("SKEL_PRED(SKEL_P, SKEL_X)", call),
        ("SKEL_PARAMS", uniform_params(F::definition())),
        ("SKEL_BLOCK", block.to_string()),
        ("SKEL_ITEMS", items.to_string()),
        ("SKEL_MIN_BLOCKS", min_blocks.to_string()),
    ];
    defines.extend(fault::defines(checked));
    Ok(assemble(&user.source, &defines, TEMPLATE))
}

/// Compacts `input` into `out[..kept]`, split into chunks over streams: chunk `c` starts
/// writing where chunk `c - 1` stopped, a count its last tile leaves in a carry word, so
/// the kernels run one after another (each filling the device) while later chunks'
/// uploads overlap them. The carries of every chunk are read back once, at the end: they
/// give `kept` and the range of `out` each chunk wrote.
pub(crate) fn run<F: PredicateFn<T>, T: DeviceType>(
    exec: &Cuda,
    input: Arg<'_, T>,
    out: ArgMut<'_, T>,
    uniforms: &F::Uniforms,
) -> Result<usize> {
    let ctx = ctx()?;
    let n = input.shape().len();
    if n == 0 {
        return Ok(0);
    }
    let (block, items, _) = shape::<T>();
    let tile = block * items;
    if n.div_ceil(tile) >= u32::MAX as usize {
        return Err(Error::InvalidArgument(format!(
            "Filter of {n} elements is too long"
        )));
    }
    let checked = exec.checked;
    let m = module(
        ctx,
        ProgKey::of::<(F, T)>(
            if checked { "filter_checked" } else { "filter" },
            ctx.ordinal,
        ),
        "filter",
        &["skel_filter"],
        || source::<F, T>(checked),
    )?;
    let size = std::mem::size_of::<T>();
    let eager = memory::eager_download(&out, exec.download);
    // The downloads can only start once the counts are known, after every kernel: they
    // never overlap the kernels, so the model sees only the uploads and the kernels.
    let work = Work {
        up: memory::missing_bytes(ctx, &input, 0..n),
        kernel: n * size + n * size / 2,
        down: 0,
        follows: memory::busy_lane(ctx, &out.lock()),
    };
    let split = multistream::split(
        ctx,
        "filter",
        n,
        tile,
        multistream::forced(exec.streams)?,
        work,
    )?;
    // Per chunk: its look-back state (one counter word, one status word per tile, all
    // zeroed); then one carry word per chunk.
    let states: Vec<usize> = split
        .chunks
        .iter()
        .map(|part| 1 + part.len().div_ceil(tile))
        .collect();
    let state_words: usize = states.iter().sum();
    let lead = split.lanes[0];
    let mut state = Scratch::new(lead, (state_words + split.len()) * 8)?;
    state.zero(0, state_words * 8)?;
    state.share(&split.lanes[1..])?;
    let carry = |c: usize| state.ptr + ((state_words + c) * 8) as u64;
    let mut srcs = Vec::with_capacity(split.len());
    for (_, part, lane, tag) in split.parts() {
        srcs.push(memory::input_part(ctx, &input, part, lane, tag)?);
    }
    let rec = Record::new(checked, &split.lanes)?;
    let mut events: Vec<Arc<CuEvent>> = Vec::with_capacity(split.len());
    let mut at = 0;
    let issued = (|| -> Result<()> {
        for ((c, part, lane, tag), src) in split.parts().zip(srcs) {
            let tiles = part.len().div_ceil(tile);
            // A chunk writes somewhere in `out[..part.end]`: at most as far as its input ends.
            let dst = memory::output_part(ctx, &out, 0..part.end, false, lane, tag)?;
            if let Some(ev) = events.last() {
                ev.order(lane)?;
            }
            let mut args = KernelArgs::default();
            args.ptr(src)
                .ptr(dst)
                .u64(part.len() as u64)
                .u64((exec.index_base + part.start) as u64)
                .ptr(state.ptr + (at * 8) as u64)
                .i32(tiles as i32)
                .ptr(if c == 0 { 0 } else { carry(c - 1) })
                .ptr(carry(c))
                .uniforms(uniforms);
            if let Some(rec) = &rec {
                args.ptr(rec.ptr());
            }
            at += states[c];
            // The kept values of a tile, and room to shift them to a 16-byte boundary.
            let dims = Dims::line(tiles as u32, block as u32, (tile * size + 16) as u32);
            launch(ctx, lane, tag, m.func("skel_filter")?, dims, &mut args)?;
            let ev = CuEvent::record(lane)?;
            memory::read_by(ctx, &input, part, &ev)?;
            events.push(ev);
        }
        Ok(())
    })();
    let Some(last) = events.last().cloned() else {
        return issued.map(|()| 0);
    };
    for ev in &events {
        state.used_until(ev);
    }
    // After a failure, whatever the launched kernels wrote is the newest data of the
    // range they may have written where the device copy was current; elsewhere the
    // buffer may be uninitialised and the other copy keeps the old values.
    let counts = issued.and_then(|()| {
        last.order(lead)?;
        let mut bytes = vec![0u8; split.len() * 8];
        state.read(state_words * 8, &mut bytes)?;
        Ok(bytes
            .chunks_exact(8)
            .map(|b| memory::from_bytes::<u64>(b) as usize)
            .collect::<Vec<usize>>())
    });
    let counts = match counts {
        Ok(c) => c,
        Err(e) => {
            let reach = split.chunks[events.len() - 1].end;
            memory::maybe_written_part(ctx, &out, 0..reach, &last)?;
            return Err(e);
        }
    };
    let kept = counts[split.len() - 1];
    // Chunk c wrote `out[counts[c - 1]..counts[c]]`: results unless a checked call's
    // predicate faulted.
    let wrote = |c: usize| if c == 0 { 0 } else { counts[c - 1] }..counts[c];
    let parts: Vec<_> = (events.iter().enumerate())
        .map(|(c, ev)| (wrote(c), ev.clone()))
        .collect();
    fault::settle(ctx, rec.as_ref(), &[F::definition()], &[&out], &parts)?;
    if eager {
        for (c, _, lane, tag) in split.parts() {
            memory::download_part(ctx, &out, wrote(c), lane, tag)?;
        }
    }
    Ok(kept)
}
