//! MapPairs on CUDA: shared-memory tiles (`cuda/map_pairs.cu`). A block stages the slices
//! of `v` and `h` its tile of outputs needs, once, and computes the tile from there.
//! MultiStream splits the output into bands of rows; each band uploads its rows of `v`,
//! and the first band all of `h`, which the other bands' streams wait for.

use super::context::ctx;
use super::fault::{self, Record};
use super::memory::{self, CuEvent};
use super::module_cache::{launch, module, Dims, KernelArgs};
use super::multistream::{self, Work};
use super::{arrays, assemble, checked_call_expr, cty, devices, uniform_params, CallSite, Cuda};
use crate::backends::jit::ProgKey;
use crate::backends::ContainerOps;
use crate::codegen::ir::FnDef;
use crate::codegen::{device_source_checked, Dialect};
use crate::containers::{Arg, ArgMut};
use crate::userfn::ElementwiseFn;
use crate::{DeviceType, Result};

pub(crate) const TEMPLATE: &str = include_str!("../../../cuda/map_pairs.cu");

/// MapPairs blocks: `TX x TY` threads, `IY` rows each, so a tile is `TY * IY` rows of `TX`.
const TX: usize = 32;
const TY: usize = 8;
const IY: usize = 4;
/// Threads per block of MapPairsReduce (and elements of the other operand per stage).
pub(crate) const RB: usize = 256;

/// The `#define`s both pair skeletons share: block shapes, element and result types, the
/// uniforms, and the call of `entry` (`def`) on `in0[0]`, `in1[0]` at position `skel_flat`;
/// those of the checked variant with `checked`.
pub(crate) fn pair_defines(
    entry: &str,
    def: &'static FnDef,
    (a, b, out): (String, String, String),
    checked: bool,
) -> Vec<(&'static str, String)> {
    let site = CallSite {
        pos: "0",
        index: "skel_flat",
        window: "",
        stride: "",
    };
    let mut defines = vec![
        ("SKEL_TX", TX.to_string()),
        ("SKEL_TY", TY.to_string()),
        ("SKEL_IY", IY.to_string()),
        ("SKEL_RB", RB.to_string()),
        ("SKEL_A_T", a),
        ("SKEL_B_T", b),
        ("SKEL_OUT_T", out),
        (
            "SKEL_PARAMS",
            arrays::container_params(def) + &uniform_params(def),
        ),
        ("SKEL_CALL", checked_call_expr(entry, def, &site, checked)),
    ];
    defines.extend(fault::defines(checked));
    defines
}

pub(crate) fn source<F, A, B>(checked: bool) -> Result<String>
where
    F: ElementwiseFn<Elems = (A, B)>,
    A: DeviceType,
    B: DeviceType,
{
    let user = device_source_checked(&[F::definition()], Dialect::Cuda, checked)?;
    let types = (cty::<A>(), cty::<B>(), cty::<F::Out>());
    let defines = pair_defines(user.entry(), F::definition(), types, checked);
    Ok(assemble(&user.source, &defines, TEMPLATE))
}

/// `out[(i, j)] = F(v[i], h[j])`, the output split into bands of rows over streams.
pub(crate) fn run<'c, F, A, B>(
    exec: &Cuda,
    arrays: ContainerOps<'c, F>,
    v: Arg<'_, A>,
    h: Arg<'_, B>,
    out: ArgMut<'_, F::Out>,
    uniforms: &F::Uniforms,
) -> Result<()>
where
    F: ElementwiseFn<Elems = (A, B)>,
    A: DeviceType,
    B: DeviceType,
{
    let (rows, cols) = (v.shape().len(), h.shape().len());
    devices::by_lines(exec, (rows, cols), &(v,), out, |exec, out, band| {
        rows_band::<F, A, B>(exec, arrays, (v, h), out, uniforms, band)
    })
}

/// Rows `band` of the output (split over device slots: one slot's part), split into bands
/// over streams.
fn rows_band<'c, F, A, B>(
    exec: &Cuda,
    arrays: ContainerOps<'c, F>,
    (v, h): (Arg<'_, A>, Arg<'_, B>),
    out: ArgMut<'_, F::Out>,
    uniforms: &F::Uniforms,
    band: std::ops::Range<usize>,
) -> Result<()>
where
    F: ElementwiseFn<Elems = (A, B)>,
    A: DeviceType,
    B: DeviceType,
{
    let ctx = ctx()?;
    let cols = h.shape().len();
    let rows = band.len();
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let checked = exec.checked;
    let key = if checked {
        "map_pairs_checked"
    } else {
        "map_pairs"
    };
    let m = module(
        ctx,
        ProgKey::of::<(F, A, B)>(key, ctx.ordinal),
        "map_pairs",
        &["skel_map_pairs"],
        || source::<F, A, B>(checked),
    )?;
    let eager = memory::eager_download(&out, exec.download);
    let (a_bytes, b_bytes) = (
        rows * std::mem::size_of::<A>(),
        cols * std::mem::size_of::<B>(),
    );
    let out_bytes = rows * cols * std::mem::size_of::<F::Out>();
    let work = Work {
        up: memory::missing_bytes(ctx, &v, band.clone()) + memory::missing_bytes(ctx, &h, 0..cols),
        kernel: a_bytes + b_bytes + out_bytes,
        down: if eager { out_bytes } else { 0 },
        follows: memory::busy_lane(ctx, &out.lock()),
    };
    let mut split = multistream::split(
        ctx,
        "map_pairs",
        rows,
        1,
        multistream::forced(exec.streams)?,
        work,
    )?;
    split.shift(band.start);
    let mut staged = Vec::with_capacity(split.len());
    for (_, part, lane, tag) in split.parts() {
        let whole = arrays::stage(ctx, &arrays, lane, tag)?;
        let hp = memory::input_part(ctx, &h, 0..cols, lane, tag)?;
        staged.push((memory::input_part(ctx, &v, part, lane, tag)?, hp, whole));
    }
    let func = m.func("skel_map_pairs")?;
    let rec = Record::new(checked, &split.lanes)?;
    let mut written = fault::Written::new(ctx, vec![&out]);
    for ((_, part, lane, tag), (vp, hp, whole)) in split.parts().zip(staged) {
        let elems = part.start * cols..part.end * cols;
        let dst = memory::output_part(ctx, &out, elems.clone(), false, lane, tag)?;
        let tiles_x = cols.div_ceil(TX);
        let tiles_y = part.len().div_ceil(TY * IY);
        let mut args = KernelArgs::default();
        args.ptr(dst)
            .ptr(vp)
            .ptr(hp)
            .u64(part.len() as u64)
            .u64(cols as u64)
            .u64(part.start as u64)
            .u64(tiles_x as u64)
            .u64(tiles_y as u64);
        arrays::push(&mut args, &whole, true);
        args.uniforms(uniforms);
        if let Some(rec) = &rec {
            args.ptr(rec.ptr());
        }
        // Tiles beyond the grid's limits are covered by the kernel's grid-stride loops.
        let dims = Dims {
            grid: (
                tiles_x.min(i32::MAX as usize) as u32,
                tiles_y.min(65535) as u32,
                1,
            ),
            block: (TX as u32, TY as u32, 1),
            shared: 0,
        };
        launch(ctx, lane, tag, func, dims, &mut args)?;
        let ev = CuEvent::record(lane)?;
        memory::read_by(ctx, &h, 0..cols, &ev)?;
        memory::read_by(ctx, &v, part.clone(), &ev)?;
        arrays::read(ctx, &arrays, (lane, tag), &ev)?;
        written.push(elems, ev);
    }
    written.settle(rec.as_ref(), &[F::definition()])?;
    if eager {
        split.download(ctx, &out, |part| part.start * cols..part.end * cols)?;
    }
    Ok(())
}
