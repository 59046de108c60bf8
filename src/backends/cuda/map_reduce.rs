//! MapReduce on CUDA: the one-pass reduce kernel (`cuda/reduce.cu`) whose values are the
//! map function's results, computed on the fly (nothing is materialised).

use super::context::ctx;
use super::fault::{self, Record};
use super::module_cache::module;
use super::multistream::{self, Work};
use super::reduce::{items, reduce_chunks, TEMPLATE};
use super::{
    arrays, assemble, chain, checked_call_expr, cty, input_params, inputs_read, push_inputs,
    stage_operands, uniform_params, CallSite, Cuda, MissingBytes,
};
use crate::backends::chain::Reads;
use crate::backends::jit::ProgKey;
use crate::backends::{BinaryFn, ContainerOps};
use crate::codegen::{device_source_checked, Dialect};
use crate::containers::Shape;
use crate::plan::ArgTuple;
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
    let mut defines = vec![
        ("SKEL_T", cty::<M::Out>()),
        (
            "SKEL_OP(a, b)",
            format!("{}(SKEL_FARG a, b)", user.entries[1]),
        ),
        (
            "SKEL_ELEM(SKEL_I)",
            chain::fuse_call(
                &checked_call_expr(&user.entries[0], def, &site, checked),
                reads,
                &site,
                (&defs, &user.entries),
                checked,
            ),
        ),
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

/// The `R`-reduce of `M(index(i), inputs[i], uniforms)` over all `i` (`None` when there is
/// none), which the caller folds `start` with (on several device slots: each slot's part,
/// `devices.rs`).
pub(crate) fn partial<'a, 'c, M, R, I>(
    exec: &Cuda,
    arrays: ContainerOps<'c, M>,
    inputs: I,
    shape: Shape,
    uniforms: &M::Uniforms,
) -> Result<Option<M::Out>>
where
    M: ElementwiseFn,
    R: BinaryFn<M::Out>,
    I: ArgTuple<'a, Elems = M::Elems>,
{
    let ctx = ctx()?;
    let n = shape.len();
    if n == 0 {
        return Ok(None);
    }
    let (items, _) = items::<M::Out>(false);
    let checked = exec.checked;
    let key = if checked {
        "map_reduce_checked"
    } else {
        "map_reduce"
    };
    let reads = Reads::of(&inputs)?;
    let m = module(
        ctx,
        ProgKey::of::<(M, R)>(key, ctx.ordinal).chained(reads.key()),
        "map_reduce",
        &["skel_reduce", "skel_reduce_parts"],
        || source::<M, R>(items, checked, &reads),
    )?;
    let mut missing = MissingBytes {
        ctx,
        bytes: 0,
        total: 0,
    };
    inputs.visit(&mut missing)?;
    arrays.visit(&mut missing)?;
    let work = Work {
        up: missing.bytes,
        kernel: missing.total,
        down: 0,
        follows: None,
    };
    let split = multistream::split(
        ctx,
        "map_reduce",
        n,
        1,
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
    )
}
