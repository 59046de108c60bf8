//! The distributed executor layer: what `backends` routes a plan to when one of its
//! operands is a block of a distributed container. Like `backends::auto` it decorates the
//! usual executors: the ranks first agree on the call (skeleton, user function, global
//! shapes), only then run the skeleton's shape checks (so a check that fails fails on every
//! rank, and no rank waits for one that returned early), then each rank runs its block on
//! the executor its options resolve to (`dispatch!`, `Auto` included) with the form's
//! communication around it, and the ranks agree on the outcome.

use super::{Call, Operand};
use crate::plan::{self, FilterSig, FoldSig};
use crate::skeletons::Options;
use crate::userfn::{Window2Fn, WindowFn};
use crate::Result;

/// The layer for one call: the options its local blocks run with.
pub(crate) struct Distributed {
    options: Options,
}

impl Distributed {
    pub(crate) fn new(options: Options) -> Self {
        Distributed { options }
    }

    /// The call the ranks agreed on, described as `call` over `operands`.
    fn agree(&self, call: impl FnOnce() -> String, operands: &[Operand]) -> Result<Call> {
        Call::agree(call(), operands)
    }

    pub(crate) fn reduce<S: FoldSig>(&self, plan: plan::Reduce<'_, S>) -> Result<S::T> {
        let call = self.agree(
            || format!("Reduce({})", <S::F as crate::userfn::UserFn>::NAME),
            &[Operand::of(&plan.input)],
        )?;
        super::reduce::<S::F, S::T>(&call, self.options, plan.input, plan.start)
    }

    pub(crate) fn reduce_axis<S: FoldSig>(
        &self,
        plan: plan::ReduceAxis<'_, S>,
        checks: impl FnOnce(&plan::ReduceAxis<'_, S>) -> Result<()>,
    ) -> Result<()>
    where
        S::T: Default,
    {
        let call = self.agree(
            || {
                let name = <S::F as crate::userfn::UserFn>::NAME;
                format!("Reduce {:?}({name})", plan.axis)
            },
            &[Operand::of(&plan.input), Operand::of_mut(&plan.out)],
        )?;
        checks(&plan)?;
        super::reduce_axis::<S::F, S::T>(&call, self.options, plan.input, plan.out, plan.axis)
    }

    pub(crate) fn scan<S: FoldSig>(
        &self,
        plan: plan::Scan<'_, S>,
        checks: impl FnOnce(&plan::Scan<'_, S>) -> Result<()>,
    ) -> Result<()> {
        let operands = [Operand::of(&plan.input), Operand::of_mut(&plan.out)];
        let call = self.agree(
            || format!("Scan({})", <S::F as crate::userfn::UserFn>::NAME),
            &operands,
        )?;
        call.same_global_shape(&operands)?;
        checks(&plan)?;
        let plan::Scan {
            input,
            out,
            mode,
            start,
        } = plan;
        super::scan::<S::F, S::T>(&call, self.options, input, out, mode, start)
    }

    pub(crate) fn map_overlap<F: WindowFn>(
        &self,
        mut plan: plan::MapOverlap<'_, F>,
        checks: impl FnOnce(&mut plan::MapOverlap<'_, F>) -> Result<()>,
    ) -> Result<()>
    where
        F::Elem: Default,
    {
        let operands = [Operand::of(&plan.input), Operand::of_mut(&plan.out)];
        let radius = plan.stencil.radius;
        let call = self.agree(
            || format!("MapOverlap({}, radius {radius})", F::NAME),
            &operands,
        )?;
        call.same_global_shape(&operands)?;
        checks(&mut plan)?;
        let plan::MapOverlap {
            input,
            out,
            stencil,
            axis,
            uniforms,
        } = plan;
        super::map_overlap::<F>(&call, self.options, input, out, stencil, axis, uniforms)
    }

    pub(crate) fn map_overlap_2d<F: Window2Fn>(
        &self,
        mut plan: plan::MapOverlap2d<'_, F>,
        checks: impl FnOnce(&mut plan::MapOverlap2d<'_, F>) -> Result<()>,
    ) -> Result<()>
    where
        F::Elem: Default,
    {
        let operands = [Operand::of(&plan.input), Operand::of_mut(&plan.out)];
        let radius = plan.stencil.radius;
        let call = self.agree(
            || format!("MapOverlap({}, radius {radius:?})", F::NAME),
            &operands,
        )?;
        call.same_global_shape(&operands)?;
        checks(&mut plan)?;
        let plan::MapOverlap2d {
            input,
            out,
            stencil,
            uniforms,
        } = plan;
        super::map_overlap_2d::<F>(&call, self.options, input, out, stencil, uniforms)
    }

    /// Filter has no distributed form yet: refused on every rank, before any check.
    pub(crate) fn filter<S: FilterSig>(&self, _plan: plan::Filter<'_, S>) -> Result<usize> {
        Err(super::refusal("Filter"))
    }
}
