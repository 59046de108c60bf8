//! MapOverlap 3D on CUDA (`cuda/map_overlap3.cu`): each block computes a 32 x 8 tile of
//! (k, j) outputs for a run of planes, marching along the slowest axis with the window's
//! `2 r0 + 1` tile planes in shared memory (one new plane loaded per step).
//!
//! The same shape of call as the 2D stencil (`map_overlap.rs`): split over device slots
//! and MultiStream chunks into bands of whole planes, each band uploading its planes plus
//! the `r0` halo planes its outputs read (wrapped around for a cyclic edge).

use std::ops::Range;

use super::context::ctx;
use super::fault::{self, Record};
use super::memory::{self, CuEvent};
use super::module_cache::{launch, module, Dims, KernelArgs};
use super::multistream::{self, Work};
use super::{assemble, checked_call_expr, cty, devices, uniform_params, CallSite, Cuda};
use crate::backends::jit::{interned, ProgKey};
use crate::backends::stencil_tile::edge_code;
use crate::backends::Stencil;
use crate::codegen::{device_source_checked, Dialect};
use crate::containers::{Arg, ArgMut};
use crate::plan::Edge;
use crate::userfn::Window3Fn;
use crate::{Error, Result};

const TEMPLATE: &str = include_str!("../../../cuda/map_overlap3.cu");

/// Outputs of a block along k and j, and planes a block marches through.
const BX: usize = 32;
const BY: usize = 8;
const PZ: usize = 16;

/// Radii `(r0, r1, r2)`.
type Radius = (usize, usize, usize);

fn source<F: Window3Fn>(radius: Radius, checked: bool) -> Result<String> {
    let user = device_source_checked(&[F::definition()], Dialect::Cuda, checked)?;
    let def = F::definition();
    let site = CallSite {
        pos: "",
        index: "",
        window: "SKEL_W",
        stride: "",
    };
    let mut defines = vec![
        ("SKEL_IN_T", cty::<F::Elem>()),
        ("SKEL_OUT_T", cty::<F::Out>()),
        (
            "SKEL_CALL(SKEL_W)",
            checked_call_expr(user.entry(), def, &site, checked),
        ),
        ("SKEL_PARAMS", uniform_params(def)),
        ("SKEL_R0", radius.0.to_string()),
        ("SKEL_R1", radius.1.to_string()),
        ("SKEL_R2", radius.2.to_string()),
        ("SKEL_BX", BX.to_string()),
        ("SKEL_BY", BY.to_string()),
        ("SKEL_PZ", PZ.to_string()),
    ];
    defines.extend(fault::defines(checked));
    Ok(assemble(&user.source, &defines, TEMPLATE))
}

/// Bytes of shared memory a block needs: the tile's window planes, each stored twice.
fn shared_bytes<T>((r0, r1, r2): Radius) -> Option<usize> {
    let plane = (BY + 2 * r1).checked_mul(BX + 2 * r2)?;
    (2 * (2 * r0 + 1))
        .checked_mul(plane)?
        .checked_mul(std::mem::size_of::<T>())
}

/// Planes `lo .. hi` of `n` plus those within `r` of them, as element ranges (a plane has
/// `unit` elements); with a cyclic edge, the halo wraps around. Unused ranges are empty.
fn halo(lo: usize, hi: usize, r: usize, n: usize, cyclic: bool, unit: usize) -> [Range<usize>; 3] {
    let mut planes = [0..0, 0..0, 0..0];
    if r >= n {
        planes[0] = 0..n;
    } else {
        planes[0] = lo.saturating_sub(r)..(hi + r).min(n);
        if cyclic && lo < r {
            planes[1] = n - (r - lo)..n;
        }
        if cyclic && hi + r > n {
            planes[2] = 0..hi + r - n;
        }
    }
    planes.map(|p| p.start * unit..p.end * unit)
}

/// 3D stencil over a `dims` tensor.
pub(crate) fn run_3d<F: Window3Fn>(
    exec: &Cuda,
    input: Arg<'_, F::Elem>,
    out: ArgMut<'_, F::Out>,
    stencil: Stencil<F::Elem, Radius>,
    dims: (usize, usize, usize),
    uniforms: &F::Uniforms,
) -> Result<()> {
    let (d0, d1, d2) = dims;
    if d0 == 0 || d1 == 0 || d2 == 0 {
        return Ok(());
    }
    devices::by_lines(exec, (d0, d1 * d2), &(input,), out, |exec, out, band| {
        planes_band::<F>(exec, (input, out), &stencil, dims, uniforms, band)
    })
}

/// The stencil for planes `band` of the output, split into bands over streams.
fn planes_band<F: Window3Fn>(
    exec: &Cuda,
    (input, out): (Arg<'_, F::Elem>, ArgMut<'_, F::Out>),
    stencil: &Stencil<F::Elem, Radius>,
    (d0, d1, d2): (usize, usize, usize),
    uniforms: &F::Uniforms,
    band: Range<usize>,
) -> Result<()> {
    let ctx = ctx()?;
    let (r0, r1, r2) = stencil.radius;
    let shared = shared_bytes::<F::Elem>(stencil.radius)
        .and_then(|b| u32::try_from(b).ok())
        .filter(|&b| b <= ctx.smem_optin);
    let Some(shared) = shared else {
        return Err(Error::InvalidArgument(format!(
            "MapOverlap: a 3D window of radius ({r0}, {r1}, {r2}) needs a tile larger than the \
             {} bytes of shared memory a block may use on this device; use a smaller radius",
            ctx.smem_optin
        )));
    };
    let checked = exec.checked;
    let variant = interned(format!(
        "overlap_3d_{r0}_{r1}_{r2}{}",
        if checked { "_checked" } else { "" }
    ));
    let m = module(
        ctx,
        ProgKey::of::<(F, F::Elem)>(variant, ctx.ordinal),
        "overlap_3d",
        &["skel_overlap3"],
        || source::<F>(stencil.radius, checked),
    )?;
    let keep = stencil.edge == Edge::None;
    let eager = memory::eager_download(&out, exec.download);
    let unit = d1 * d2;
    let n = band.len() * unit;
    let out_bytes = n * std::mem::size_of::<F::Out>();
    let work = Work {
        up: memory::missing_bytes(ctx, &input, band.start * unit..band.end * unit),
        kernel: n * std::mem::size_of::<F::Elem>() + out_bytes,
        down: if eager { out_bytes } else { 0 },
        follows: memory::busy_lane(ctx, &out.lock()),
    };
    let mut split = multistream::split(
        ctx,
        "overlap_3d",
        band.len(),
        1,
        multistream::forced(exec.streams)?,
        work,
    )?;
    split.shift(band.start);
    let cyclic = stencil.edge == Edge::Cyclic;
    for (_, part, lane, tag) in split.parts() {
        for range in halo(part.start, part.end, r0, d0, cyclic, unit) {
            if !range.is_empty() {
                memory::input_part(ctx, &input, range, lane, tag)?;
            }
        }
    }
    // The device address of the input's first element (its planes were staged above).
    let src = memory::input_part(ctx, &input, 0..0, split.lanes[0], split.tag)?;
    let rec = Record::new(checked, &split.lanes)?;
    let mut written = fault::Written::new(ctx, vec![&out]);
    let (tiles_x, tiles_y) = (d2.div_ceil(BX), d1.div_ceil(BY));
    for (_, part, lane, tag) in split.parts() {
        let elems = part.start * unit..part.end * unit;
        let dst = memory::output_part(ctx, &out, elems.clone(), keep, lane, tag)?;
        // Shifted so that the kernel indexes the output by global position.
        let dst = dst - (elems.start * std::mem::size_of::<F::Out>()) as u64;
        let mut args = KernelArgs::default();
        args.ptr(src)
            .ptr(dst)
            .i64(d0 as i64)
            .i64(d1 as i64)
            .i64(d2 as i64)
            .i32(edge_code(stencil.edge))
            .value(&stencil.pad)
            .i64(tiles_x as i64)
            .i64(tiles_y as i64)
            .i64(part.start as i64)
            .i64(part.end as i64)
            .uniforms(uniforms);
        if let Some(rec) = &rec {
            args.ptr(rec.ptr());
        }
        let runs = part.len().div_ceil(PZ);
        let dims = Dims {
            grid: (
                tiles_x.min(i32::MAX as usize) as u32,
                tiles_y.min(65535) as u32,
                runs.min(65535) as u32,
            ),
            block: (BX as u32, BY as u32, 1),
            shared,
        };
        launch(ctx, lane, tag, m.func("skel_overlap3")?, dims, &mut args)?;
        let ev = CuEvent::record(lane)?;
        for range in halo(part.start, part.end, r0, d0, cyclic, unit) {
            if !range.is_empty() {
                memory::read_by(ctx, &input, range, &ev)?;
            }
        }
        written.push(elems, ev);
    }
    written.settle(rec.as_ref(), &[F::definition()])?;
    if eager {
        split.download(ctx, &out, |part| part.start * unit..part.end * unit)?;
    }
    Ok(())
}
