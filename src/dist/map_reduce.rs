//! MapReduce over distributed operands: local map-folds, then the partials in rank order.

use super::{fold, Call};
use crate::backends::dispatch;
use crate::containers::{Output, Shape, Vector};
use crate::plan::{self, ArgTuple, MapReduceSig};
use crate::skeletons::Options;
use crate::userfn::UserFn;
use crate::Result;

/// `start ⊕ m(x0) ⊕ ... ⊕ m(x_{n-1})` over the blocks of all ranks, on every rank (`plan`
/// holds this rank's block and the container arguments whole).
pub(crate) fn map_reduce<'a, S: MapReduceSig<'a>>(
    call: &Call,
    options: Options,
    plan: plan::MapReduce<'_, 'a, S>,
) -> Result<<S::M as UserFn>::Out> {
    let plan::MapReduce {
        arrays,
        inputs,
        uniforms,
        start,
        ..
    } = plan;
    let name = <S::M as UserFn>::NAME;
    let n = inputs.shapes().first().map_or(0, Shape::len);
    // The block's fold without the start value: m(x0) first, the rest folded onto it.
    let local = (|| {
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut first = Vector::filled(1, start);
        dispatch!(options, name, |exec| exec.map(
            plan::Map::<(S::M, S::I, _)> {
                arrays,
                inputs: inputs.sub(0..1),
                out: first.arg_mut(),
                uniforms
            }
        ))?;
        let first = first.try_as_slice()?[0];
        // The rest of the block starts one element later, and so does its `#[index]`.
        let rest = Options {
            index_base: options.index_base.map(|b| b + 1),
            ..options
        };
        dispatch!(rest, name, |exec| exec.map_reduce(plan::MapReduce::<S> {
            arrays,
            inputs: inputs.sub(1..n),
            shape: Shape::Vector(n - 1),
            uniforms,
            start: first
        }))
        .map(|p| vec![p])
    })();
    let partials = call.exchange(local)?;
    Ok(
        fold::<S::R, <S::M as UserFn>::Out>(Some(start), partials.into_iter().flatten())?
            .unwrap_or(start),
    )
}
