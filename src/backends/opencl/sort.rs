//! Sort on OpenCL (`opencl/sort.cl`): an LSD radix sort of 8-bit digits with decoupled
//! look-back per digit, as on CUDA: one histogram pass over all digits, a scan of each
//! pass's counts, then one kernel per digit whose work-groups take tiles from an atomic
//! counter and look back over the earlier tiles' per-digit counts. The look-back only waits
//! for work-groups that took an earlier tile, so have started: it needs a started
//! work-group to keep running while another waits, which GPUs and PoCL's CPU drivers (a
//! work-group runs to its end on one thread) give. On a CPU device a waiting work-group
//! spins on a thread its predecessor may need, so there each digit takes three kernels
//! instead (counts per tile, one scan, a stable scatter; 3x faster on PoCL): the look-back
//! runs on GPUs, and on PoCL in this file's tests.
//!
//! Keys ping-pong between the operand's buffer and a scratch buffer (copied back after an
//! odd number of passes); values are sorted as their positions, then gathered.

use std::fmt::Write as _;

use ocl::core as cl;

use super::context::Ctx;
use super::program_cache::{program, ProgKey};
use super::{launch, memory, KArg};
use crate::containers::ArgMut;
use crate::skeletons::{KeyKind, RadixBits};
use crate::{DeviceType, Error, Result, SortKey};

const TEMPLATE: &str = include_str!("../../../opencl/sort.cl");

/// Work-items per group (divides 256) and keys per work-item: the scatter's local counts
/// are 256 x WG 16-bit words (16 KiB).
const WG: usize = 32;
const K: usize = 32;

fn source<K: SortKey>() -> String {
    let bits = <K::Bits as RadixBits>::BITS;
    let key = match bits {
        8 => "uchar",
        16 => "ushort",
        32 => "uint",
        _ => "ulong",
    };
    let kind = match K::KIND {
        KeyKind::Unsigned => 0,
        KeyKind::Signed => 1,
        KeyKind::Float => 2,
    };
    let mut s = String::new();
    let _ = writeln!(s, "#define SKEL_KEY {key}");
    let _ = writeln!(s, "#define SKEL_KBITS {bits}");
    let _ = writeln!(s, "#define SKEL_KIND {kind}");
    let _ = writeln!(s, "#define SKEL_WG {WG}");
    let _ = writeln!(s, "#define SKEL_K {K}");
    s.push_str(TEMPLATE);
    s
}

/// Sorts `keys` (and moves `values` with them): with decoupled look-back on a GPU, with
/// three kernels per digit on a CPU device (see `opencl/sort.cl` for why).
pub(super) fn run<Key: SortKey, V: DeviceType>(
    ctx: &Ctx,
    keys: ArgMut<'_, Key>,
    values: Option<ArgMut<'_, V>>,
) -> Result<()> {
    run_with(ctx, keys, values, ctx.gpu)
}

/// [`run`], with the per-digit prefix from a look-back (`look_back`) or from a scan kernel.
pub(super) fn run_with<Key: SortKey, V: DeviceType>(
    ctx: &Ctx,
    keys: ArgMut<'_, Key>,
    values: Option<ArgMut<'_, V>>,
    look_back: bool,
) -> Result<()> {
    let n = keys.shape().len();
    if n <= 1 {
        return Ok(());
    }
    if n >= u32::MAX as usize {
        return Err(Error::InvalidArgument(format!(
            "Sort of {n} keys on OpenCL: at most {} keys per call (counts and positions are \
             32-bit); sort parts and merge them, or use the rayon backend",
            u32::MAX - 1
        )));
    }
    let prog = program(ctx, ProgKey::of::<Key>("sort"), "sort", || {
        Ok(source::<Key>())
    })?;
    let (ksize, vsize) = (std::mem::size_of::<Key>(), std::mem::size_of::<V>());
    let passes = (<Key::Bits as RadixBits>::BITS / 8) as usize;
    let tile = WG * K;
    let tiles = n.div_ceil(tile);
    // The look-back state, zeroed: per pass one 64-bit status word per (tile, digit), one
    // tile counter, and the digit counts (turned into offsets); without the look-back, the
    // counts of every (digit, tile) of one pass instead.
    let status_words = if look_back { passes * tiles * 256 } else { 1 };
    let counts = memory::alloc_elems::<u32>(ctx, if look_back { 1 } else { 256 * tiles })?;
    let status = memory::alloc_elems::<u64>(ctx, status_words)?;
    let counters = memory::alloc_elems::<u32>(ctx, passes)?;
    let hist = memory::alloc_elems::<u32>(ctx, passes * 256)?;
    let k_mem = memory::output(ctx, &keys, true)?;
    let k_tmp = memory::alloc_elems::<Key>(ctx, n)?;
    let kbuf = [(k_mem.clone(), keys.offset() as u64), (k_tmp.clone(), 0u64)];
    let v_mem = match &values {
        Some(v) => Some(memory::output(ctx, v, true)?),
        None => None,
    };
    let positions = match v_mem {
        Some(_) => [
            memory::alloc_elems::<u32>(ctx, n)?,
            memory::alloc_elems::<u32>(ctx, n)?,
        ],
        // Never read (`vmode` 0), but every kernel argument needs a buffer.
        None => {
            let unused = memory::alloc(ctx, 4)?;
            [unused.clone(), unused]
        }
    };
    let local = Some([WG, 1, 1]);
    let vmode = |p: usize| match (&v_mem, p) {
        (None, _) => 0,
        (Some(_), 0) => 1,
        (Some(_), _) => 2,
    };
    // Pass `p` as count, scan and scatter kernels.
    let three_kernel_pass = |p: usize| -> Result<cl::Event> {
        let (from, to) = (p % 2, 1 - p % 2);
        let shift = (8 * p) as i32;
        let count_args = [
            KArg::Mem(kbuf[from].0.clone()),
            KArg::U64(kbuf[from].1),
            KArg::U64(n as u64),
            KArg::I32(shift),
            KArg::Mem(counts.clone()),
            KArg::U64(tiles as u64),
        ];
        let global = [tiles * WG, 1, 1];
        launch(ctx, &prog, "skel_sort_count", &count_args, 1, global, local)?;
        let scan_args = [
            KArg::Mem(counts.clone()),
            KArg::U64(0),
            KArg::U64((256 * tiles) as u64),
        ];
        launch(
            ctx,
            &prog,
            "skel_sort_scan",
            &scan_args,
            1,
            [WG, 1, 1],
            local,
        )?;
        let scatter_args = [
            KArg::Mem(kbuf[from].0.clone()),
            KArg::U64(kbuf[from].1),
            KArg::Mem(kbuf[to].0.clone()),
            KArg::U64(kbuf[to].1),
            KArg::Mem(positions[from].clone()),
            KArg::Mem(positions[to].clone()),
            KArg::I32(vmode(p)),
            KArg::U64(n as u64),
            KArg::I32(shift),
            KArg::Mem(counts.clone()),
            KArg::U64(tiles as u64),
        ];
        launch(
            ctx,
            &prog,
            "skel_sort_scatter",
            &scatter_args,
            1,
            global,
            local,
        )
    };
    // The event of the last kernel enqueued: after it, the operands hold what was written.
    let mut last: Option<cl::Event> = None;
    let issued = (|| -> Result<()> {
        let zero = |mem: &cl::Mem, words: usize| {
            let args = [KArg::Mem(mem.clone()), KArg::U64(words as u64)];
            let global = [words.div_ceil(WG) * WG, 1, 1];
            launch(ctx, &prog, "skel_sort_zero", &args, 1, global, local)
        };
        zero(&status, 2 * status_words)?;
        zero(&counters, passes)?;
        zero(&hist, passes * 256)?;
        if !look_back {
            for p in 0..passes {
                last = Some(three_kernel_pass(p)?);
            }
        }
        if look_back {
            let hist_args = [
                KArg::Mem(kbuf[0].0.clone()),
                KArg::U64(kbuf[0].1),
                KArg::U64(n as u64),
                KArg::Mem(hist.clone()),
            ];
            let groups = n.div_ceil(WG * 64).clamp(1, 1024);
            launch(
                ctx,
                &prog,
                "skel_sort_hist",
                &hist_args,
                1,
                [groups * WG, 1, 1],
                local,
            )?;
            for p in 0..passes {
                let scan_args = [
                    KArg::Mem(hist.clone()),
                    KArg::U64((p * 256) as u64),
                    KArg::U64(256),
                ];
                launch(
                    ctx,
                    &prog,
                    "skel_sort_scan",
                    &scan_args,
                    1,
                    [WG, 1, 1],
                    local,
                )?;
            }
            for p in 0..passes {
                let (from, to) = (p % 2, 1 - p % 2);
                let pass_args = [
                    KArg::Mem(kbuf[from].0.clone()),
                    KArg::U64(kbuf[from].1),
                    KArg::Mem(kbuf[to].0.clone()),
                    KArg::U64(kbuf[to].1),
                    KArg::Mem(positions[from].clone()),
                    KArg::Mem(positions[to].clone()),
                    KArg::I32(vmode(p)),
                    KArg::U64(n as u64),
                    KArg::I32(p as i32),
                    KArg::U64(tiles as u64),
                    KArg::Mem(hist.clone()),
                    KArg::Mem(status.clone()),
                    KArg::Mem(counters.clone()),
                ];
                let global = [tiles * WG, 1, 1];
                last = Some(launch(
                    ctx,
                    &prog,
                    "skel_sort_pass",
                    &pass_args,
                    1,
                    global,
                    local,
                )?);
            }
        }
        let gather =
            |src: (&cl::Mem, u64), dst: (&cl::Mem, u64), idx: Option<&cl::Mem>, size: usize| {
                let args = [
                    KArg::Mem(src.0.clone()),
                    KArg::U64(src.1 * size as u64),
                    KArg::Mem(dst.0.clone()),
                    KArg::U64(dst.1 * size as u64),
                    KArg::Mem(idx.unwrap_or(&positions[0]).clone()),
                    KArg::I32(i32::from(idx.is_some())),
                    KArg::U64(n as u64),
                    KArg::I32(size as i32),
                ];
                let global = [n.div_ceil(WG) * WG, 1, 1];
                launch(ctx, &prog, "skel_sort_gather", &args, 1, global, local)
            };
        let end = passes % 2; // the buffers the last pass wrote
        if end == 1 {
            last = Some(gather(
                (&kbuf[1].0, 0),
                (&kbuf[0].0, kbuf[0].1),
                None,
                ksize,
            )?);
        }
        if let (Some(v_mem), Some(v)) = (&v_mem, &values) {
            let copy = memory::alloc_elems::<V>(ctx, n)?;
            gather((v_mem, v.offset() as u64), (&copy, 0), None, vsize)?;
            last = Some(gather(
                (&copy, 0),
                (v_mem, v.offset() as u64),
                Some(&positions[end]),
                vsize,
            )?);
        }
        Ok(())
    })();
    match (issued, last) {
        (Ok(()), Some(ev)) => {
            memory::written(ctx, &keys, ev.clone());
            if let Some(v) = &values {
                memory::written(ctx, v, ev);
            }
            Ok(())
        }
        (Ok(()), None) => Ok(()),
        // Kernels that ran may have moved some elements where the device copy was current.
        (Err(e), Some(ev)) => {
            memory::maybe_written(ctx, &keys, ev.clone());
            if let Some(v) = &values {
                memory::maybe_written(ctx, v, ev);
            }
            Err(e)
        }
        (Err(e), None) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::containers::Output;
    use crate::Vector;

    /// Both prefix strategies on this machine's device (PoCL in CI), against a stable sort.
    #[test]
    fn look_back_and_three_kernels_agree_with_a_stable_sort() {
        let Ok(ctx) = super::super::ctx() else {
            return; // no OpenCL device
        };
        for look_back in [true, false] {
            for n in [0usize, 1, 1023, 1024, 1025, 40_009] {
                let mix = |i: usize| (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 33;
                let data: Vec<i32> = (0..n).map(|i| (mix(i) % 3000) as i32 - 1500).collect();
                let mut keys = Vector::from(data.clone());
                let mut vals = Vector::from_fn(n, |i| [i as u16; 3]);
                run_with(ctx, keys.arg_mut(), Some(vals.arg_mut()), look_back).unwrap();
                let mut want: Vec<(i32, [u16; 3])> = data
                    .iter()
                    .enumerate()
                    .map(|(i, &k)| (k, [i as u16; 3]))
                    .collect();
                want.sort_by_key(|p| p.0);
                let got: Vec<(i32, [u16; 3])> =
                    keys.to_vec().into_iter().zip(vals.to_vec()).collect();
                assert!(got == want, "look_back={look_back} n={n}");
                let fdata: Vec<f64> = (0..n).map(|i| (mix(i) as f64 - 1e9) * 0.5).collect();
                let mut f = Vector::from(fdata.clone());
                run_with::<f64, f64>(ctx, f.arg_mut(), None, look_back).unwrap();
                let mut fwant = fdata;
                fwant.sort_by(f64::total_cmp);
                assert_eq!(f.to_vec(), fwant, "look_back={look_back} n={n} f64");
            }
        }
    }
}
