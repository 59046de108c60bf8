//! MapReduce on CUDA: the one-pass reduce kernel (`cuda/reduce.cu`) whose values are the
//! map function's results, computed on the fly (nothing is materialised).

use std::sync::Arc;

use super::context::{ctx, Ctx};
use super::fault::{self, Record};
use super::module_cache::{module, Module};
use super::multistream::{self, Work};
use super::reduce::{self, items, reduce_chunks, start_into, TEMPLATE};
use super::{
    arrays, assemble, chain, checked_call_expr, cty, devices, input_params, inputs_read,
    push_inputs, stage_operands, uniform_params, with_row_col, CallSite, Cuda, MissingBytes,
};
use crate::backends::chain::Reads;
use crate::backends::jit::ProgKey;
use crate::backends::{BinaryFn, ContainerOps};
use crate::codegen::{device_source_checked, Dialect};
use crate::containers::{ArgMut, Shape};
use crate::plan::{ArgTuple, Axis};
use crate::userfn::ElementwiseFn;
use crate::Result;

/// The kernel source for `M` mapped and `R` reducing, `items` values per lane, the checked
/// variant with `checked`.
pub(crate) fn source<M: ElementwiseFn, R: BinaryFn<M::Out>>(
    items: usize,
    checked: bool,
    reads: &Reads,
) -> Result<String> {
    let defs = reads.with_defs(&[M::definition(), R::definition()]);
    let user = device_source_checked(&defs, Dialect::Cuda, checked)?;
    let def = M::definition();
    let site = CallSite {
        pos: "SKEL_I",
        index: "skel_base + (SKEL_I)",
        window: "",
        stride: "",
    };
    let elem = chain::fuse_call(
        &checked_call_expr(&user.entries[0], def, &site, checked),
        reads,
        &site,
        (&defs, &user.entries),
        checked,
    );
    // The row fold knows each element's row and column: index parameters take them as
    // they are (`cuda/reduce.cu`, `skel_reduce_rows`).
    let elem_rc = with_row_col(&elem, site.index, ("(SKEL_ROW)", "(SKEL_COL)"));
    let mut defines = vec![
        ("SKEL_T", cty::<M::Out>()),
        (
            "SKEL_OP(a, b)",
            format!("{}(SKEL_FARG a, b)", user.entries[1]),
        ),
        ("SKEL_ELEM(SKEL_I)", elem),
        ("SKEL_ELEM_RC(SKEL_I, SKEL_ROW, SKEL_COL)", elem_rc),
        (
            "SKEL_PARAMS",
            format!(
                "{}{}{}",
                arrays::container_params(def),
                if reads.fused() {
                    chain::fused_input_params(reads)
                } else {
                    input_params(def)
                },
                uniform_params(def)
            ),
        ),
        ("SKEL_ITEMS", items.to_string()),
        ("SKEL_VEC", "0".to_string()),
    ];
    defines.extend(fault::defines(checked));
    Ok(assemble(&user.source, &defines, TEMPLATE))
}

/// The module of `M` mapped and `R` reducing over `reads`: MapReduce's own grouping
/// (`as_reduce` false), or Reduce's values per lane (`as_reduce`: a lazy input's fold,
/// grouped as `Reduce` groups the materialised values, rows and columns included).
/// Returns the module and its values per lane.
pub(crate) fn fold_module<M: ElementwiseFn, R: BinaryFn<M::Out>>(
    ctx: &Ctx,
    checked: bool,
    reads: &Reads,
    as_reduce: bool,
) -> Result<(Arc<Module>, usize)> {
    let (items, _) = items::<M::Out>(as_reduce);
    let key = match (as_reduce, checked) {
        (false, false) => "map_reduce",
        (false, true) => "map_reduce_checked",
        (true, false) => "map_reduce_as_reduce",
        (true, true) => "map_reduce_as_reduce_checked",
    };
    let m = module(
        ctx,
        ProgKey::of::<(M, R)>(key, ctx.ordinal).chained(reads.key()),
        "map_reduce",
        &[
            "skel_reduce",
            "skel_reduce_parts",
            "skel_reduce_rows",
            "skel_reduce_cols",
            "skel_reduce_into",
        ],
        || source::<M, R>(items, checked, reads),
    )?;
    Ok((m, items))
}

/// The `R`-reduce of `M(index(i), inputs[i], uniforms)` over all `i` (`None` when there is
/// none), which the caller folds `start` with (on several device slots: each slot's part,
/// `devices.rs`). `as_reduce`: grouped as `Reduce` groups the materialised values (see
/// [`fold_module`]; one chunk unless streams are forced, as for a Reduce of a
/// device-resident temporary). `into`: written, with the start value folded in, to the
/// one-element output on the device (`None`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn partial<'a, 'c, M, R, I>(
    exec: &Cuda,
    arrays: ContainerOps<'c, M>,
    inputs: I,
    shape: Shape,
    uniforms: &M::Uniforms,
    as_reduce: bool,
    into: Option<(&mut ArgMut<'_, M::Out>, M::Out)>,
) -> Result<Option<M::Out>>
where
    M: ElementwiseFn,
    R: BinaryFn<M::Out>,
    I: ArgTuple<'a, Elems = M::Elems>,
{
    let ctx = ctx()?;
    let n = shape.len();
    if n == 0 {
        return start_into(into);
    }
    let checked = exec.checked;
    let reads = Reads::of(&inputs)?;
    let (m, items) = fold_module::<M, R>(ctx, checked, &reads, as_reduce)?;
    let mut missing = MissingBytes {
        ctx,
        bytes: 0,
        total: 0,
    };
    inputs.visit(&mut missing)?;
    arrays.visit(&mut missing)?;
    let work = Work {
        up: if as_reduce { 0 } else { missing.bytes },
        kernel: missing.total,
        down: 0,
        follows: None,
    };
    let split = multistream::split(
        ctx,
        "map_reduce",
        n,
        if as_reduce { items } else { 1 },
        multistream::forced(exec.streams)?,
        work,
    )?;
    let staged = split
        .parts()
        .map(|(_, part, lane, tag)| {
            let whole = arrays::stage(ctx, &arrays, lane, tag)?;
            Ok((whole, stage_operands(ctx, &inputs, part, lane, tag)?))
        })
        .collect::<Result<Vec<_>>>()?;
    let rec = Record::new(checked, &split.lanes)?;
    reduce_chunks::<M::Out>(
        ctx,
        &m,
        &split,
        (shape.cols(), exec.index_base),
        items,
        |c, a| {
            arrays::push(a, &staged[c].0, true);
            push_inputs(a, &staged[c].1);
            a.uniforms(uniforms);
        },
        |c, ev| {
            let lane = (split.lanes[c], split.tag.chunk(c));
            arrays::read(ctx, &arrays, lane, ev)?;
            inputs_read(ctx, &inputs, split.chunks[c].clone(), lane, ev)
        },
        (
            rec.as_ref(),
            &reads.with_defs(&[M::definition(), R::definition()]),
        ),
        into,
    )
}

/// `MapReduce::run_rows` / `run_cols` (and a Reduce of a lazy input per row or column)
/// fused: the axis kernels of [`fold_module`]'s module, grouped as `ReduceAxis` groups the
/// materialised values, reading `M` over the inputs per element (rows split over device
/// slots as `ReduceAxis` splits them; columns on one slot: the caller materialises a
/// column fold split over several).
pub(crate) fn axis<'a, 'c, M, R, I>(
    exec: &Cuda,
    (arrays, inputs, shape, uniforms): (ContainerOps<'c, M>, I, Shape, &M::Uniforms),
    out: ArgMut<'_, M::Out>,
    axis: Axis,
) -> Result<()>
where
    M: ElementwiseFn,
    R: BinaryFn<M::Out>,
    I: ArgTuple<'a, Elems = M::Elems>,
{
    let ctx = ctx()?;
    let (rows, cols) = shape.dims();
    let reads = Reads::of(&inputs)?;
    let defs = reads.with_defs(&[M::definition(), R::definition()]);
    let mut missing = MissingBytes {
        ctx,
        bytes: 0,
        total: 0,
    };
    inputs.visit(&mut missing)?;
    arrays.visit(&mut missing)?;
    let checked = exec.checked;
    let module = |ctx: &Ctx| fold_module::<M, R>(ctx, checked, &reads, true).map(|(m, _)| m);
    let band = |exec: &Cuda, out: ArgMut<'_, M::Out>, band: std::ops::Range<usize>| {
        reduce::axis_band::<M::Out, _>(
            exec,
            (rows, cols),
            (&module, &defs, missing.bytes),
            (out, axis, band),
            |ctx, elems, lane, tag| {
                Ok((
                    arrays::stage(ctx, &arrays, lane, tag)?,
                    stage_operands(ctx, &inputs, elems, lane, tag)?,
                ))
            },
            |staged, a| {
                arrays::push(a, &staged.0, true);
                push_inputs(a, &staged.1);
                a.uniforms(uniforms);
            },
            |ctx, elems, lane, ev| {
                arrays::read(ctx, &arrays, lane, ev)?;
                inputs_read(ctx, &inputs, elems, lane, ev)
            },
        )
    };
    if axis == Axis::Rows {
        return devices::by_lines(exec, (rows, cols), &inputs, out, band);
    }
    band(exec, out, 0..1)
}
