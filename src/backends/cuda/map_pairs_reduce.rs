//! MapPairsReduce on CUDA (`cuda/map_pairs.cu`, `skel_pairs_fold`): one thread per result
//! folds its row (or column) of pairs in order, reading the other operand from shared
//! memory, staged once per block and tile. When there are too few results to fill the
//! device, the folded range is also cut into segments whose partials
//! `skel_pairs_combine` folds in order. MultiStream splits the results over streams; each
//! chunk uploads its part of its own operand, the first chunk all of the other.

use std::ops::Range;

use cudarc::driver::sys;

use super::context::{ctx, Ctx, Lane};
use super::fault::{self, Record};
use super::map_pairs::{pair_defines, RB, TEMPLATE};
use super::memory::{self, CuEvent, Scratch};
use super::module_cache::{launch, module, Dims, KernelArgs};
use super::multistream::{self, Work};
use super::trace::Tag;
use super::{arrays, assemble, cty, devices, grid_for, Cuda};
use crate::backends::jit::ProgKey;
use crate::backends::{BinaryFn, ContainerOps};
use crate::codegen::{device_source_checked, Dialect};
use crate::containers::{Arg, ArgMut};
use crate::plan::Axis;
use crate::userfn::ElementwiseFn;
use crate::{DeviceType, Result};

pub(crate) fn source<M, R, A, B>(cols: bool, checked: bool) -> Result<String>
where
    M: ElementwiseFn<Elems = (A, B)>,
    R: BinaryFn<M::Out>,
    A: DeviceType,
    B: DeviceType,
{
    let defs = [M::definition(), R::definition()];
    let user = device_source_checked(&defs, Dialect::Cuda, checked)?;
    let types = (cty::<A>(), cty::<B>(), cty::<M::Out>());
    let mut defines = pair_defines(&user.entries[0], M::definition(), types, checked);
    defines.push((
        "SKEL_OP(a, b)",
        format!("{}(SKEL_FARG a, b)", user.entries[1]),
    ));
    defines.push(("SKEL_COLS", u8::from(cols).to_string()));
    Ok(assemble(&user.source, &defines, TEMPLATE))
}

/// The two operands of one call, seen from the results: `own` (one result per element)
/// and `other` (folded).
struct Operands<'a, 'b, A, B> {
    v: &'a Arg<'b, A>,
    h: &'a Arg<'b, B>,
    cols: bool,
}

impl<A: DeviceType, B: DeviceType> Operands<'_, '_, A, B> {
    /// Device addresses of `part` of the own operand and of the whole other one, readable
    /// on `lane`.
    fn stage(
        &self,
        ctx: &Ctx,
        part: Range<usize>,
        lane: Lane,
        tag: Tag,
    ) -> Result<(sys::CUdeviceptr, sys::CUdeviceptr)> {
        let (rows, cols) = (self.v.shape().len(), self.h.shape().len());
        Ok(if self.cols {
            let other = memory::input_part(ctx, self.v, 0..rows, lane, tag)?;
            (memory::input_part(ctx, self.h, part, lane, tag)?, other)
        } else {
            let other = memory::input_part(ctx, self.h, 0..cols, lane, tag)?;
            (memory::input_part(ctx, self.v, part, lane, tag)?, other)
        })
    }

    /// Records that the work before `ev` read `part` of the own operand and the other one.
    fn read_by(&self, ctx: &Ctx, part: Range<usize>, ev: &std::sync::Arc<CuEvent>) -> Result<()> {
        let (rows, cols) = (self.v.shape().len(), self.h.shape().len());
        let (v_part, h_part) = if self.cols {
            (0..rows, part)
        } else {
            (part, 0..cols)
        };
        memory::read_by(ctx, self.v, v_part, ev)?;
        memory::read_by(ctx, self.h, h_part, ev)
    }
}

/// `(segments, segment length)` for folding `n_fold` pairs per result when `tiles` blocks
/// of results are too few to fill the device: about 8 blocks per multiprocessor in all,
/// every segment at least one stage of `RB` elements and never empty.
fn segments(ctx: &Ctx, tiles: usize, n_fold: usize) -> (usize, usize) {
    let wanted = (ctx.sms as usize * 8).div_ceil(tiles.max(1));
    let segs = wanted.clamp(1, n_fold.div_ceil(RB).clamp(1, 65535));
    let seg_len = n_fold.div_ceil(segs);
    (n_fold.div_ceil(seg_len), seg_len)
}

/// `out[o]` = the in-order fold of row `o` (`Axis::Rows`) or column `o` of the pairs.
pub(crate) fn run<'c, M, R, A, B>(
    exec: &Cuda,
    arrays: ContainerOps<'c, M>,
    v: Arg<'_, A>,
    h: Arg<'_, B>,
    out: ArgMut<'_, M::Out>,
    axis: Axis,
    uniforms: &M::Uniforms,
) -> Result<()>
where
    M: ElementwiseFn<Elems = (A, B)>,
    R: BinaryFn<M::Out>,
    A: DeviceType,
    B: DeviceType,
{
    let n_own = match axis {
        Axis::Cols => h.shape().len(),
        _ => v.shape().len(),
    };
    let band = |exec: &Cuda, out: ArgMut<'_, M::Out>, band| {
        own_band::<M, R, A, B>(exec, arrays, (v, h), out, (axis, band), uniforms)
    };
    match axis {
        Axis::Cols => devices::by_lines(exec, (n_own, 1), &(h,), out, band),
        _ => devices::by_lines(exec, (n_own, 1), &(v,), out, band),
    }
}

/// Results `band` (split over device slots: one slot's part), split into bands over
/// streams.
fn own_band<'c, M, R, A, B>(
    exec: &Cuda,
    arrays: ContainerOps<'c, M>,
    (v, h): (Arg<'_, A>, Arg<'_, B>),
    out: ArgMut<'_, M::Out>,
    (axis, band): (Axis, std::ops::Range<usize>),
    uniforms: &M::Uniforms,
) -> Result<()>
where
    M: ElementwiseFn<Elems = (A, B)>,
    R: BinaryFn<M::Out>,
    A: DeviceType,
    B: DeviceType,
{
    let ctx = ctx()?;
    let (rows, cols) = (v.shape().len(), h.shape().len());
    let by_cols = axis == Axis::Cols;
    let n_fold = if by_cols { rows } else { cols };
    let n_own = band.len();
    if n_own == 0 || n_fold == 0 {
        return Ok(());
    }
    let kind = if by_cols {
        "map_pairs_cols"
    } else {
        "map_pairs_rows"
    };
    let checked = exec.checked;
    let key = match (by_cols, checked) {
        (_, false) => kind,
        (true, true) => "map_pairs_cols_checked",
        (false, true) => "map_pairs_rows_checked",
    };
    let m = module(
        ctx,
        ProgKey::of::<(M, R, A, B)>(key, ctx.ordinal),
        kind,
        &["skel_pairs_fold", "skel_pairs_combine"],
        || source::<M, R, A, B>(by_cols, checked),
    )?;
    let eager = memory::eager_download(&out, exec.download);
    let size = std::mem::size_of::<M::Out>();
    let out_bytes = n_own * size;
    let work = Work {
        up: memory::missing_bytes(ctx, &v, 0..rows) + memory::missing_bytes(ctx, &h, 0..cols),
        kernel: rows * std::mem::size_of::<A>() + cols * std::mem::size_of::<B>() + out_bytes,
        down: if eager { out_bytes } else { 0 },
        follows: memory::busy_lane(ctx, &out.lock()),
    };
    let mut split = multistream::split(
        ctx,
        kind,
        n_own,
        1,
        multistream::forced(exec.streams)?,
        work,
    )?;
    split.shift(band.start);
    let ops = Operands {
        v: &v,
        h: &h,
        cols: by_cols,
    };
    let staged = split
        .parts()
        .map(|(_, part, lane, tag)| {
            let whole = arrays::stage(ctx, &arrays, lane, tag)?;
            Ok((ops.stage(ctx, part, lane, tag)?, whole))
        })
        .collect::<Result<Vec<_>>>()?;
    let (fold, combine) = (m.func("skel_pairs_fold")?, m.func("skel_pairs_combine")?);
    let rec = Record::new(checked, &split.lanes)?;
    let mut written = fault::Written::new(ctx, vec![&out]);
    for ((_, part, lane, tag), ((own, other), whole)) in split.parts().zip(staged) {
        let dst = memory::output_part(ctx, &out, part.clone(), false, lane, tag)?;
        let tiles = part.len().div_ceil(RB);
        let (segs, seg_len) = segments(ctx, tiles, n_fold);
        // Freed on its own stream after the kernels below.
        let scratch = if segs > 1 {
            Some(Scratch::new(lane, segs * part.len() * size)?)
        } else {
            None
        };
        let mut args = KernelArgs::default();
        args.ptr(dst)
            .ptr(own)
            .ptr(other)
            .u64(part.len() as u64)
            .u64(n_fold as u64)
            .u64(part.start as u64)
            .u64(cols as u64)
            .u64(seg_len as u64)
            .u64(tiles as u64)
            .ptr(scratch.as_ref().map_or(0, |s| s.ptr));
        arrays::push(&mut args, &whole, true);
        args.uniforms(uniforms);
        if let Some(rec) = &rec {
            args.ptr(rec.ptr());
        }
        let dims = Dims {
            grid: (tiles.min(i32::MAX as usize) as u32, segs as u32, 1),
            block: (RB as u32, 1, 1),
            shared: 0,
        };
        launch(ctx, lane, tag, fold, dims, &mut args)?;
        if let Some(s) = &scratch {
            let mut args = KernelArgs::default();
            args.ptr(dst)
                .ptr(s.ptr)
                .u64(part.len() as u64)
                .u64(segs as u64);
            if let Some(rec) = &rec {
                args.ptr(rec.ptr());
            }
            let grid = grid_for(ctx, part.len(), RB, 8);
            launch(
                ctx,
                lane,
                tag,
                combine,
                Dims::line(grid, RB as u32, 0),
                &mut args,
            )?;
        }
        let ev = CuEvent::record(lane)?;
        ops.read_by(ctx, part.clone(), &ev)?;
        arrays::read(ctx, &arrays, (lane, tag), &ev)?;
        written.push(part, ev);
    }
    let defs = [M::definition(), R::definition()];
    written.settle(rec.as_ref(), &defs)?;
    if eager {
        split.download(ctx, &out, |part| part)?;
    }
    Ok(())
}
