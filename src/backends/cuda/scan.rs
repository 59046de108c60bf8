//! Scan on CUDA: single pass with decoupled look-back (`cuda/scan.cu`).

use super::context::ctx;
use super::memory::{self, Scratch};
use super::module_cache::{launch, module, KernelArgs};
use super::{assemble, cty};
use crate::backends::jit::ProgKey;
use crate::backends::BinaryFn;
use crate::codegen::{device_source, Dialect};
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
    let &(block, bytes, minb) = TUNE.get_or_init(|| {
        std::env::var("SKEL_SCAN_TUNE")
            .ok()
            .and_then(|s| {
                let mut it = s.split(',').map(|x| x.trim().parse::<usize>().ok());
                let b = it.next()??;
                let i = it.next()??;
                let m = it.next().unwrap_or(Some(1))?;
                Some((b, i, m))
            })
            .filter(|&(b, i, m)| {
                [64, 128, 256, 512, 1024].contains(&b) && i > 0 && (1..=32).contains(&m)
            })
            .unwrap_or((256, 128, 4))
    });
    (
        block,
        (bytes / std::mem::size_of::<T>().max(1)).clamp(1, 32),
        minb,
    )
}

/// Whether the look-back packs each tile's status and value into one 64-bit word
/// (`SKEL_PACKED`): for values of at most 4 bytes, unless `SKEL_SCAN_PACKED=0` (for
/// benchmarking the general path).
fn packed<T>() -> bool {
    static OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let off = *OFF.get_or_init(|| std::env::var("SKEL_SCAN_PACKED").is_ok_and(|v| v == "0"));
    std::mem::size_of::<T>() <= 4 && !off
}

/// The kernel source for scanning `T`s with `F`.
pub(crate) fn source<F: BinaryFn<T>, T: DeviceType>() -> Result<String> {
    let user = device_source::<F>(Dialect::Cuda)?;
    let defines = [
        ("SKEL_T", cty::<T>()),
        ("SKEL_OP(a, b)", format!("{}(a, b)", user.entry())),
        ("SKEL_BLOCK", shape::<T>().0.to_string()),
        ("SKEL_ITEMS", shape::<T>().1.to_string()),
        ("SKEL_MIN_BLOCKS", shape::<T>().2.to_string()),
        ("SKEL_PACKED", i32::from(packed::<T>()).to_string()),
    ];
    Ok(assemble(&user.source, &defines, TEMPLATE))
}

/// Inclusive or exclusive scan of `input` into `out`.
pub(crate) fn run<F: BinaryFn<T>, T: DeviceType>(
    input: Arg<'_, T>,
    out: ArgMut<'_, T>,
    mode: ScanMode,
    start: T,
) -> Result<()> {
    let ctx = ctx()?;
    let n = input.shape().len();
    if n == 0 {
        return Ok(());
    }
    let (block, items, _) = shape::<T>();
    let tile = block * items;
    let tiles = n.div_ceil(tile);
    let tiles32 = u32::try_from(tiles)
        .ok()
        .filter(|&t| t < u32::MAX / 2)
        .ok_or_else(|| Error::InvalidArgument(format!("Scan of {n} elements is too long")))?;
    let m = module(
        ctx,
        ProgKey::of::<(F, T)>("scan", ctx.ordinal),
        "scan",
        &["skel_scan"],
        source::<F, T>,
    )?;
    let src = memory::input(ctx, &input)?;
    // Counter and flags (zeroed), then the value slots; packed: counter, one unused word,
    // then one 64-bit status word per tile (all zeroed).
    let (words, zeroed) = if packed::<T>() {
        (2 + 2 * tiles, 2 + 2 * tiles)
    } else {
        let w = std::mem::size_of::<T>().div_ceil(4);
        (1 + tiles + 2 * tiles * w, 1 + tiles)
    };
    let state = Scratch::new(ctx, words * 4)?;
    let dst = memory::output(ctx, &out, false)?;
    state.zero(ctx, 0, zeroed * 4)?;
    let mut args = KernelArgs::default();
    args.ptr(src)
        .ptr(dst)
        .u64(n as u64)
        .ptr(state.ptr)
        .i32(tiles32 as i32)
        .i32(i32::from(mode == ScanMode::Exclusive))
        .value(&start);
    // One element of padding per 32 (SKEL_PAD in the template).
    let shared = ((tile + tile / 32) * std::mem::size_of::<T>()) as u32;
    launch(
        ctx,
        m.func("skel_scan")?,
        (tiles32, 1, 1),
        (block as u32, 1, 1),
        shared,
        &mut args,
    )?;
    memory::written(ctx, &out)
}
