//! MapReduce over distributed operands: local map-folds, then the partials in rank order.

use super::{fold, Call, WholeCells};
use crate::backends::{dispatch, BinaryFn};
use crate::containers::{Output, Shape, Vector};
use crate::plan::{self, ArgTuple};
use crate::skeletons::Options;
use crate::userfn::{BindArrays, ElementwiseFn};
use crate::Result;

/// `start ⊕ m(x0) ⊕ ... ⊕ m(x_{n-1})` over the blocks of all ranks, on every rank.
pub(crate) fn map_reduce<'a, M, R, I, A>(
    call: &Call,
    options: Options,
    arrays: &A,
    slots: &WholeCells,
    inputs: I,
    uniforms: &M::Uniforms,
    start: M::Out,
) -> Result<M::Out>
where
    M: ElementwiseFn,
    M::Out: Default,
    R: BinaryFn<M::Out>,
    I: ArgTuple<'a, Elems = M::Elems>,
    A: BindArrays<M::Arrays>,
{
    let n = inputs.shapes().first().map_or(0, Shape::len);
    // The block's fold without the start value: m(x0) first, the rest folded onto it.
    let local = (|| {
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut first = Vector::<M::Out>::zeroed(1);
        dispatch!(options, M::NAME, |exec| exec.map(plan::Map::<(M, I, _)> {
            arrays: arrays.bind_whole(slots),
            inputs: inputs.sub(0..1),
            out: first.arg_mut(),
            uniforms
        }))?;
        let first = first.try_as_slice()?[0];
        // The rest of the block starts one element later, and so does its `#[index]`.
        let rest = Options {
            index_base: options.index_base.map(|b| b + 1),
            ..options
        };
        dispatch!(rest, M::NAME, |exec| exec.map_reduce(plan::MapReduce::<(
            M,
            R,
            I
        )> {
            arrays: arrays.bind_whole(slots),
            inputs: inputs.sub(1..n),
            shape: Shape::Vector(n - 1),
            uniforms,
            start: first
        }))
        .map(|p| vec![p])
    })();
    let partials = call.exchange(local)?;
    Ok(fold::<R, M::Out>(Some(start), partials.into_iter().flatten())?.unwrap_or(start))
}
