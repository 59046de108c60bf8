//! Wavefront on CUDA (`cuda/wavefront.cu`, the kernel of `opencl/wavefront.cl`): one launch
//! per anti-diagonal of tiles, all on the call's stream (so a `Graph` records them), one
//! block per tile, which walks the tile's own anti-diagonals in shared memory. The matrix
//! is read and written in place on the device and stays there, like any output.

use super::context::ctx;
use super::devices;
use super::fault::{self, Record};
use super::memory::{self, CuEvent};
use super::module_cache::{launch, module, Dims, KernelArgs};
use super::multistream::{self, Work};
use super::{
    arrays, assemble, checked_call_expr, cty, uniform_params, with_row_col, CallSite, Cuda,
};
use crate::backends::jit::ProgKey;
use crate::backends::ContainerOps;
use crate::codegen::{device_source_checked, Dialect};
use crate::containers::ArgMut;
use crate::userfn::ElementwiseFn;
use crate::{DeviceType, Result};

pub(crate) const TEMPLATE: &str = include_str!("../../../cuda/wavefront.cu");

/// Cells per side of a tile, and threads per block: one warp, whose barrier is cheap.
pub(crate) const TILE: usize = 32;

/// Static shared memory a tile may take (the 48 KiB every device has).
const STATIC_SHARED: usize = 48 * 1024;

/// Whether a tile of `T` cells, with its upper row and left column, fits in shared memory
/// (rows of `TILE + 2` cells, see `cuda/wavefront.cu`).
pub(crate) fn tile_in_shared<T>() -> bool {
    (TILE + 1) * (TILE + 2) * std::mem::size_of::<T>() <= STATIC_SHARED
}

/// The kernel source for `F` over cells of `T`.
pub(crate) fn source<F, T>(checked: bool) -> Result<String>
where
    F: ElementwiseFn<Elems = (T, T, T), Out = T>,
    T: DeviceType,
{
    let def = F::definition();
    let user = device_source_checked(&[def], Dialect::Cuda, checked)?;
    let site = CallSite {
        pos: "0",
        index: "skel_flat",
        window: "",
        stride: "",
    };
    // The kernel keeps the cell's row and column: no division for a 2D index.
    let call = with_row_col(
        &checked_call_expr(user.entry(), def, &site, checked),
        "skel_flat",
        ("i", "j"),
    );
    let mut defines = vec![
        ("SKEL_CELL_T", cty::<T>()),
        ("SKEL_T", TILE.to_string()),
        ("SKEL_LOCAL", u8::from(tile_in_shared::<T>()).to_string()),
        (
            "SKEL_PARAMS",
            arrays::container_params(def) + &uniform_params(def),
        ),
        ("SKEL_CALL", call),
    ];
    defines.extend(fault::defines(checked));
    Ok(assemble(&user.source, &defines, TEMPLATE))
}

/// Every cell `(i, j)`, `i, j >= 1`, of `m` in place, one launch per anti-diagonal of tiles.
pub(crate) fn run<'c, F, T>(
    exec: &Cuda,
    arrays: ContainerOps<'c, F>,
    m: ArgMut<'_, T>,
    uniforms: &F::Uniforms,
) -> Result<()>
where
    F: ElementwiseFn<Elems = (T, T, T), Out = T>,
    T: DeviceType,
{
    // The options every CUDA call validates, even though this one runs on one device and
    // one stream (every tile waits for the tiles above and left of it): a count that no
    // other skeleton would accept is the same error here.
    multistream::forced(exec.streams)?;
    devices::count(exec.devices)?;
    let (rows, cols) = m.shape().dims();
    if rows < 2 || cols < 2 {
        return Ok(());
    }
    let ctx = ctx()?;
    let checked = exec.checked;
    let key = if checked {
        "wavefront_checked"
    } else {
        "wavefront"
    };
    let module = module(
        ctx,
        ProgKey::of::<(F, T)>(key, ctx.ordinal),
        "wavefront",
        &["skel_wavefront"],
        || source::<F, T>(checked),
    )?;
    if checked || fault::in_trial() {
        // A fault (or a trial) discards what the call wrote: the host copy must hold the
        // old values.
        m.as_arg().host()?;
    }
    let n = rows * cols;
    let eager = memory::eager_download(&m, exec.download);
    let bytes = n * std::mem::size_of::<T>();
    let work = Work {
        up: 0,
        kernel: 2 * bytes,
        down: if eager { bytes } else { 0 },
        // The stream of the matrix's last writer, so that calls on it run in order.
        follows: memory::busy_lane(ctx, &m.lock()),
    };
    // One part: every tile waits for the tiles above and left of it.
    let split = multistream::split(ctx, "wavefront", rows, rows, Some(1), work)?;
    let (lane, tag) = (split.lanes[0], split.tag);
    let whole = arrays::stage(ctx, &arrays, lane, tag)?;
    // `keep`: the call reads every cell it does not write, and the boundary.
    let dst = memory::output_part(ctx, &m, 0..n, true, lane, tag)?;
    let rec = Record::new(checked, &split.lanes)?;
    let func = module.func("skel_wavefront")?;
    let (tr, tc) = ((rows - 1).div_ceil(TILE), (cols - 1).div_ceil(TILE));
    for d in 0..tr + tc - 1 {
        let first = d.saturating_sub(tc - 1);
        let tiles = d.min(tr - 1) + 1 - first;
        let mut args = KernelArgs::default();
        args.ptr(dst)
            .u64(rows as u64)
            .u64(cols as u64)
            .u64(d as u64)
            .u64(first as u64);
        arrays::push(&mut args, &whole, true);
        args.uniforms(uniforms);
        if let Some(rec) = &rec {
            args.ptr(rec.ptr());
        }
        let dims = Dims {
            grid: (tiles as u32, 1, 1),
            block: (TILE as u32, 1, 1),
            shared: 0,
        };
        launch(ctx, lane, tag, func, dims, &mut args)?;
    }
    let ev = CuEvent::record(lane)?;
    arrays::read(ctx, &arrays, (lane, tag), &ev)?;
    let mut written = fault::Written::new(ctx, vec![&m]);
    written.push(0..n, ev);
    written.settle(rec.as_ref(), &[F::definition()])?;
    if eager {
        split.download(ctx, &m, |part| part.start * cols..part.end * cols)?;
    }
    Ok(())
}
