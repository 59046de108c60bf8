//! Reduce on CUDA: one pass over the data with per-block partials folded by the last block
//! on the device (`cuda/reduce.cu`), and row-wise / column-wise reductions of a matrix.

use std::sync::Arc;

use super::context::{ctx, Ctx};
use super::memory::{self, from_bytes, Scratch};
use super::module_cache::{launch, module, KernelArgs, Module};
use super::{assemble, cty, grid_for};
use crate::backends::cpu::combine;
use crate::backends::jit::ProgKey;
use crate::backends::BinaryFn;
use crate::codegen::{device_source, Dialect};
use crate::containers::{Arg, ArgMut};
use crate::plan::Axis;
use crate::{DeviceType, Error, Result};

pub(crate) const TEMPLATE: &str = include_str!("../../../cuda/reduce.cu");

/// Threads per block of the reduce kernels (`SKEL_BLOCK` in the template).
const BLOCK: usize = 256;

/// Values per lane and tile, and whether they are one 16-byte load (plain Reduce only).
pub(crate) fn items<T>(vector: bool) -> (usize, bool) {
    let size = std::mem::size_of::<T>();
    if vector && size <= 16 && 16 % size == 0 {
        (16 / size, true)
    } else if size <= 16 {
        (4, false)
    } else {
        (1, false)
    }
}

/// The kernel source for reducing `T`s with `F`.
pub(crate) fn source<F: BinaryFn<T>, T: DeviceType>() -> Result<String> {
    let (items, vec) = items::<T>(true);
    let user = device_source::<F>(Dialect::Cuda)?;
    let t = cty::<T>();
    let defines = [
        ("SKEL_T", t.clone()),
        ("SKEL_OP(a, b)", format!("{}(a, b)", user.entry())),
        ("SKEL_ELEM(i)", "in0[i]".to_string()),
        ("SKEL_PARAMS", format!(", const {t}* __restrict__ in0")),
        ("SKEL_ITEMS", items.to_string()),
        ("SKEL_VEC", u8::from(vec).to_string()),
    ];
    Ok(assemble(&user.source, &defines, TEMPLATE))
}

fn reduce_module<F: BinaryFn<T>, T: DeviceType>(ctx: &Ctx) -> Result<Arc<Module>> {
    module(
        ctx,
        ProgKey::of::<(F, T)>("reduce", ctx.ordinal),
        "reduce",
        &["skel_reduce", "skel_reduce_rows", "skel_reduce_cols"],
        source::<F, T>,
    )
}

/// Runs `skel_reduce` of module `m` over `n` positions with the kernel parameters after
/// the scratch pointer given by `extra`; the fold of all values, or `None` for `n == 0`.
pub(crate) fn one_pass<T: DeviceType>(
    ctx: &Ctx,
    m: &Module,
    n: usize,
    cols: usize,
    items: usize,
    extra: impl FnOnce(&mut KernelArgs),
) -> Result<Option<T>> {
    if n == 0 {
        return Ok(None);
    }
    let w = std::mem::size_of::<T>().div_ceil(4);
    let unit = BLOCK * items; // 8 warps x one tile of 32 * items
    let blocks = grid_for(ctx, n, unit, 4) as usize;
    let chunk = n.div_ceil(blocks).div_ceil(unit) * unit;
    let blocks = n.div_ceil(chunk);
    let words = 2 + w + blocks + blocks * w;
    let scratch = Scratch::new(ctx, words * 4)?;
    scratch.zero(ctx, 0, 8)?;
    let mut args = KernelArgs::default();
    args.u64(n as u64)
        .u64(chunk as u64)
        .u64(cols as u64)
        .ptr(scratch.ptr);
    extra(&mut args);
    launch(
        ctx,
        m.func("skel_reduce")?,
        (blocks as u32, 1, 1),
        (BLOCK as u32, 1, 1),
        0,
        &mut args,
    )?;
    let mut head = vec![0u8; (2 + w) * 4];
    scratch.read(ctx, 0, &mut head)?;
    let has = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) != 0;
    Ok(has.then(|| from_bytes::<T>(&head[8..])))
}

/// `start` folded with every element of `input`.
pub(crate) fn run<F: BinaryFn<T>, T: DeviceType>(input: Arg<'_, T>, start: T) -> Result<T> {
    let ctx = ctx()?;
    let n = input.shape().len();
    if n == 0 {
        return Ok(start);
    }
    let m = reduce_module::<F, T>(ctx)?;
    let src = memory::input(ctx, &input)?;
    let (items, _) = items::<T>(true);
    let total = one_pass::<T>(ctx, &m, n, input.shape().cols(), items, |a| {
        a.ptr(src);
    })?;
    Ok(combine::<F, T>(start, total))
}

/// One result per row (`Axis::Rows`) or per column (`Axis::Cols`) of a matrix.
pub(crate) fn run_axis<F: BinaryFn<T>, T: DeviceType>(
    input: Arg<'_, T>,
    out: ArgMut<'_, T>,
    axis: Axis,
) -> Result<()> {
    let ctx = ctx()?;
    let (rows, cols) = input.shape().dims();
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let (kernel, lines) = match axis {
        Axis::Rows => ("skel_reduce_rows", rows),
        Axis::Cols => ("skel_reduce_cols", cols),
        Axis::Flat => {
            return Err(Error::InvalidArgument(
                "internal: a flat reduction is not an axis reduction".into(),
            ))
        }
    };
    let m = reduce_module::<F, T>(ctx)?;
    let src = memory::input(ctx, &input)?;
    let dst = memory::output(ctx, &out, false)?;
    let mut args = KernelArgs::default();
    args.u64(rows as u64).u64(cols as u64).ptr(dst).ptr(src);
    let grid = if axis == Axis::Rows {
        grid_for(ctx, lines, BLOCK / 32, 8)
    } else {
        grid_for(ctx, lines, BLOCK, 8)
    };
    launch(
        ctx,
        m.func(kernel)?,
        (grid, 1, 1),
        (BLOCK as u32, 1, 1),
        0,
        &mut args,
    )?;
    memory::written(ctx, &out)
}
