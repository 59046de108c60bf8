//! The distributed executor layer: what `backends` routes a plan to when one of its
//! operands is a block of a distributed container. Like `backends::auto` it decorates the
//! usual executors: the ranks first agree on the call (skeleton, user function, global
//! shapes), only then run the skeleton's shape checks (so a check that fails fails on every
//! rank, and no rank waits for one that returned early), then each rank runs its block on
//! the executor its options resolve to (`dispatch!`, `Auto` included) with the form's
//! communication around it, and the ranks agree on the outcome.

use super::map_pairs::{check_pairs, pair_operands};
use super::{block_options, Call, Operand, WholeCell, WholeCells};
use crate::backends::dispatch;
use crate::containers::{Input, OutArgs, Shape};
use crate::plan::{
    self, ArgTuple, Axis, FilterSig, FoldSig, MapArraySig, MapReduceSig, MapSig, PairsReduceSig,
    PairsSig,
};
use crate::skeletons::{every_fold_has_pairs, Options};
use crate::userfn::{ArrayFn, BindArrays, ElementwiseFn, IndexKind, UserFn, Window2Fn, WindowFn};
use crate::Result;

/// The layer for one call: the options its local blocks run with.
pub(crate) struct Distributed {
    options: Options,
}

impl Distributed {
    pub(crate) fn new(options: Options) -> Self {
        Distributed { options }
    }

    /// The call the ranks agreed on, described as `call` over the element-wise operands and
    /// those read whole; then every rank checks that the element-wise ones have one global
    /// shape (only after agreeing, so no rank fails alone while the others wait).
    fn agree_elementwise(call: String, elementwise: &[Operand], whole: &[Operand]) -> Result<Call> {
        let call = Call::agree(call, &[elementwise, whole].concat())?;
        call.same_global_shape(elementwise)?;
        Ok(call)
    }

    pub(crate) fn reduce<S: FoldSig>(&self, plan: plan::Reduce<'_, S>) -> Result<S::T> {
        let call = Call::agree(
            format!("Reduce({})", <S::F as crate::userfn::UserFn>::NAME),
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
        let name = <S::F as crate::userfn::UserFn>::NAME;
        let call = Call::agree(
            format!("Reduce {:?}({name})", plan.axis),
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
        let call = Self::agree_elementwise(
            format!("Scan({})", <S::F as crate::userfn::UserFn>::NAME),
            &operands,
            &[],
        )?;
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
        let call = Self::agree_elementwise(
            format!("MapOverlap({}, radius {radius})", F::NAME),
            &operands,
            &[],
        )?;
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
        let call = Self::agree_elementwise(
            format!("MapOverlap({}, radius {radius:?})", F::NAME),
            &operands,
            &[],
        )?;
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

    /// Map: the element-wise operands stay in blocks, the container arguments (`bound`,
    /// which `plan.arrays` binds) are read whole, `#[index]` is global.
    pub(crate) fn map<'a, 'o, S, B>(
        &self,
        bound: &B,
        plan: plan::Map<'_, 'a, 'o, S>,
        checks: impl for<'k> FnOnce(&plan::Map<'k, 'a, 'o, S>) -> Result<()>,
    ) -> Result<()>
    where
        S: MapSig<'a, 'o>,
        B: BindArrays<<S::F as ElementwiseFn>::Arrays>,
    {
        let mut elementwise = Operand::all(plan.inputs.shapes(), plan.inputs.spreads());
        elementwise.extend(Operand::all(plan.out.shapes(), plan.out.spreads()));
        let arrays = Operand::all(plan.arrays.shapes(), plan.arrays.spreads());
        let call = Self::agree_elementwise(
            format!("Map({})", <S::F as UserFn>::NAME),
            &elementwise,
            &arrays,
        )?;
        let slots = WholeCells::default();
        bound.gather_wholes(&slots)?;
        let plan = plan::Map::<S> {
            arrays: bound.bind_whole(&slots),
            inputs: plan.inputs,
            out: plan.out,
            uniforms: plan.uniforms,
        };
        checks(&plan)?;
        let options = block_options(self.options, &elementwise);
        let result = dispatch!(options, <S::F as UserFn>::NAME, |exec| exec.map(plan));
        call.finish(result)
    }

    /// MapArray: as [`Distributed::map`], `bound` (which `plan.array` binds) read whole.
    pub(crate) fn map_array<'a, S, X>(
        &self,
        bound: &X,
        plan: plan::MapArray<'_, 'a, S>,
        checks: impl for<'k> FnOnce(&plan::MapArray<'k, 'a, S>) -> Result<()>,
    ) -> Result<()>
    where
        S: MapArraySig<'a>,
        X: Input<<S::F as ArrayFn>::Array> + ?Sized,
    {
        let mut elementwise = Operand::all(plan.inputs.shapes(), plan.inputs.spreads());
        elementwise.push(Operand::of_mut(&plan.out));
        let call = Self::agree_elementwise(
            format!("MapArray({})", <S::F as UserFn>::NAME),
            &elementwise,
            &[Operand::of(&plan.array)],
        )?;
        checks(&plan)?;
        // Every element may read any of the array: a distributed one is gathered whole.
        let slot = WholeCell::default();
        bound.gather_whole(&slot)?;
        let plan = plan::MapArray::<S> {
            array: bound.whole_arg(&slot),
            inputs: plan.inputs,
            out: plan.out,
            uniforms: plan.uniforms,
        };
        let options = block_options(self.options, &elementwise);
        let result = dispatch!(options, <S::F as UserFn>::NAME, |exec| exec.map_array(plan));
        call.finish(result)
    }

    /// MapReduce: each rank folds its block, the partials are folded in rank order.
    pub(crate) fn map_reduce<'a, S, B>(
        &self,
        bound: &B,
        plan: plan::MapReduce<'_, 'a, S>,
        checks: impl for<'k> FnOnce(&plan::MapReduce<'k, 'a, S>) -> Result<()>,
    ) -> Result<<S::M as UserFn>::Out>
    where
        S: MapReduceSig<'a>,
        B: BindArrays<<S::M as ElementwiseFn>::Arrays>,
    {
        let (m, r) = (<S::M as UserFn>::NAME, <S::R as UserFn>::NAME);
        let elementwise = Operand::all(plan.inputs.shapes(), plan.inputs.spreads());
        let arrays = Operand::all(plan.arrays.shapes(), plan.arrays.spreads());
        let call = Self::agree_elementwise(format!("MapReduce({m}, {r})"), &elementwise, &arrays)?;
        // The block is folded as two vector parts (see `dist::map_reduce`), which keep a
        // flat index but not a row and column.
        call.no_index(m, <<S::M as ElementwiseFn>::Index as IndexKind>::DIMS, 1)?;
        let slots = WholeCells::default();
        bound.gather_wholes(&slots)?;
        let plan = plan::MapReduce::<S> {
            arrays: bound.bind_whole(&slots),
            inputs: plan.inputs,
            shape: plan.shape,
            uniforms: plan.uniforms,
            start: plan.start,
        };
        checks(&plan)?;
        let options = block_options(self.options, &elementwise);
        super::map_reduce::<S>(&call, options, plan)
    }

    /// MapPairs: `v` and the output by rows, `h` (`bound_h`) and the container arguments
    /// (`bound`) whole on every rank.
    pub(crate) fn map_pairs<S, B, H>(
        &self,
        bound: &B,
        bound_h: &H,
        plan: plan::MapPairs<'_, '_, S>,
        checks: impl for<'k, 'p> FnOnce(&plan::MapPairs<'k, 'p, S>) -> Result<()>,
    ) -> Result<()>
    where
        S: PairsSig,
        B: BindArrays<<S::F as ElementwiseFn>::Arrays>,
        H: Input<S::B> + ?Sized,
    {
        let name = <S::F as UserFn>::NAME;
        let operands = pair_operands((&plan.v, &plan.h, &plan.out), &plan.arrays);
        let call = Call::agree(format!("MapPairs({name})"), &operands)?;
        check_pairs("MapPairs", &operands, |rows, cols| Shape::Matrix {
            rows,
            cols,
        })?;
        call.no_index(name, <<S::F as ElementwiseFn>::Index as IndexKind>::DIMS, 0)?;
        let (slots, whole_h) = (WholeCells::default(), WholeCell::default());
        bound.gather_wholes(&slots)?;
        bound_h.gather_whole(&whole_h)?;
        let plan = plan::MapPairs::<S> {
            arrays: bound.bind_whole(&slots),
            v: plan.v,
            h: bound_h.whole_arg(&whole_h),
            out: plan.out,
            uniforms: plan.uniforms,
        };
        checks(&plan)?;
        let result = if plan.v.shape().is_empty() {
            Ok(())
        } else {
            dispatch!(self.options, name, |exec| exec.map_pairs(plan))
        };
        call.finish(result)
    }

    /// MapPairsReduce: as [`Distributed::map_pairs`]; row folds lie on one rank each,
    /// column folds are folded across ranks in rank order. `checks` gets `true`: the
    /// global shapes are checked here, it checks the container arguments and `v`, `h`.
    pub(crate) fn map_pairs_reduce<S, B, H>(
        &self,
        bound: &B,
        bound_h: &H,
        plan: plan::MapPairsReduce<'_, '_, S>,
        checks: impl for<'k, 'p> FnOnce(&plan::MapPairsReduce<'k, 'p, S>, bool) -> Result<()>,
    ) -> Result<()>
    where
        S: PairsReduceSig,
        B: BindArrays<<S::M as ElementwiseFn>::Arrays>,
        H: Input<S::B> + ?Sized,
    {
        let (m, r, axis) = (<S::M as UserFn>::NAME, <S::R as UserFn>::NAME, plan.axis);
        let operands = pair_operands((&plan.v, &plan.h, &plan.out), &plan.arrays);
        let call = Call::agree(format!("MapPairsReduce({m}, {r}, {axis:?})"), &operands)?;
        // v by rows, out by its elements; h and the container arguments whole.
        let (rows, cols) = check_pairs("MapPairsReduce", &operands, |rows, cols| {
            Shape::Vector(if axis == Axis::Rows { rows } else { cols })
        })?;
        every_fold_has_pairs(axis, rows, cols)?;
        call.no_index(m, <<S::M as ElementwiseFn>::Index as IndexKind>::DIMS, 0)?;
        let (slots, whole_h) = (WholeCells::default(), WholeCell::default());
        bound.gather_wholes(&slots)?;
        bound_h.gather_whole(&whole_h)?;
        let plan = plan::MapPairsReduce::<S> {
            arrays: bound.bind_whole(&slots),
            v: plan.v,
            h: bound_h.whole_arg(&whole_h),
            out: plan.out,
            axis,
            uniforms: plan.uniforms,
        };
        checks(&plan, true)?;
        if axis == Axis::Cols {
            return super::map_pairs_reduce_cols::<S>(&call, self.options, plan);
        }
        let result = if plan.v.shape().is_empty() {
            Ok(())
        } else {
            dispatch!(self.options, m, |exec| exec.map_pairs_reduce(plan))
        };
        call.finish(result)
    }
}
