//! Backends and their selection.
//!
//! [`Backend`] names a backend; the crate-internal `Execute` trait is what each backend
//! implements, one method per skeleton, taking backend-neutral call plans
//! (`crate::plan`). Skeletons hand their plan and their shape checks to this module's
//! route for the form (`map`, `reduce`, ...), which runs the checks and resolves the
//! `Backend` to an executor with `dispatch!`, so a skeleton never sees which one runs it;
//! with feature `mpi`, a plan with an operand of a distributed container goes to the
//! distributed layer (`dist::Distributed`) instead, which wraps the same resolution.

#[cfg(any(feature = "cuda", feature = "opencl"))]
pub(crate) mod args;
pub(crate) mod auto;
#[cfg(any(feature = "cuda", feature = "opencl"))]
pub(crate) mod chain;
pub(crate) mod cpu;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;
pub(crate) mod device_graph;
pub(crate) mod jit;
#[cfg_attr(not(any(feature = "cuda", feature = "opencl")), allow(dead_code))]
pub(crate) mod kernel_cache;
#[cfg(any(feature = "cuda", feature = "opencl"))]
pub(crate) mod loopnest_kernels;
#[cfg(feature = "opencl")]
pub(crate) mod opencl;
#[cfg(any(feature = "cuda", feature = "opencl"))]
pub(crate) mod overlap_windows;
#[cfg(feature = "rayon")]
pub(crate) mod rayon;
pub(crate) mod stencil_tile;

#[cfg(test)]
mod index_base_tests;

pub(crate) use crate::plan::Stencil;

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(feature = "mpi")]
use crate::containers::OutArgs;
use crate::containers::{ArgMut, Input};
#[cfg(feature = "mpi")]
use crate::plan::ArgTuple;
use crate::plan::{
    self, FilterSig, FoldSig, HistogramSig, MapArraySig, MapReduceSig, MapSig, PairsReduceSig,
    PairsSig, ReduceByKeySig, SortSig, WavefrontSig,
};
use crate::skeletons::Options;
use crate::userfn::{
    ArrayFn, BindArrays, ElementwiseFn, Overlap1Fn, Overlap2Fn, UserFn, Window2Fn, WindowFn,
};
use crate::{Error, Result};

/// A user function that combines two `T`s into one: what Reduce, Scan and the reduce half
/// of MapReduce take.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a combining function of two `{T}`s",
    label = "a combining function takes two `{T}`s and returns a `{T}`",
    note = "it has no #[index], #[uniform], container or `&mut Random` parameter: which element's index, uniforms or random stream a combination of two partial results would see is not defined (draw random numbers in the map function instead)"
)]
pub trait BinaryFn<T>:
    ElementwiseFn<Index = (), Elems = (T, T), Out = T, Uniforms = (), Arrays = ()>
{
}

impl<T, F> BinaryFn<T> for F where
    F: ElementwiseFn<Index = (), Elems = (T, T), Out = T, Uniforms = (), Arrays = ()>
{
}

/// A user function that decides whether to keep one `T`: what Filter takes (an optional
/// `#[index]` first and `#[uniform]` parameters last are allowed).
pub trait PredicateFn<T>: ElementwiseFn<Elems = (T,), Out = bool, Arrays = ()> {}

impl<T, F> PredicateFn<T> for F where F: ElementwiseFn<Elems = (T,), Out = bool, Arrays = ()> {}

/// What a backend implements: one method per skeleton form, each taking that form's
/// plan (`crate::plan`). Operands arrive checked (shapes agree, radii fit); a backend only
/// schedules and computes. The plan's signature type `S` names the user functions and
/// operand types (`S::F`, `S::T`, ...), so no executor states their bounds again.
pub(crate) trait Execute {
    fn map<'a, 'o, S: MapSig<'a, 'o>>(&self, plan: plan::Map<'_, 'a, 'o, S>) -> Result<()>;

    fn map_array<'a, S: MapArraySig<'a>>(&self, plan: plan::MapArray<'_, 'a, S>) -> Result<()>;

    fn reduce<S: FoldSig>(&self, plan: plan::Reduce<'_, S>) -> Result<S::T>;

    fn reduce_axis<S: FoldSig>(&self, plan: plan::ReduceAxis<'_, S>) -> Result<()>;

    fn map_reduce<'a, S: MapReduceSig<'a>>(
        &self,
        plan: plan::MapReduce<'_, 'a, S>,
    ) -> Result<<S::M as UserFn>::Out>;

    fn scan<S: FoldSig>(&self, plan: plan::Scan<'_, S>) -> Result<()>;

    fn map_overlap<F: WindowFn>(&self, plan: plan::MapOverlap<'_, F>) -> Result<()>;

    fn map_overlap_2d<F: Window2Fn>(&self, plan: plan::MapOverlap2d<'_, F>) -> Result<()>;

    fn map_pairs<S: PairsSig>(&self, plan: plan::MapPairs<'_, '_, S>) -> Result<()>;

    fn map_pairs_reduce<S: PairsReduceSig>(
        &self,
        plan: plan::MapPairsReduce<'_, '_, S>,
    ) -> Result<()>;

    /// Returns how many elements were kept.
    fn filter<S: FilterSig>(&self, plan: plan::Filter<'_, S>) -> Result<usize>;

    fn sort<S: SortSig>(&self, plan: plan::Sort<'_, S>) -> Result<()>;

    fn histogram<'a, S: HistogramSig<'a>>(
        &self,
        plan: plan::Histogram<'_, 'a, '_, S>,
    ) -> Result<()>;

    fn reduce_by_key<'a, S: ReduceByKeySig<'a>>(
        &self,
        plan: plan::ReduceByKey<'_, 'a, S>,
    ) -> Result<()>;

    fn map_overlap_3d<F: crate::userfn::Window3Fn>(
        &self,
        plan: plan::MapOverlap3d<'_, F>,
    ) -> Result<()>;

    /// A 1D stencil of the general form (index, several windows, containers).
    fn map_overlap_windows<F: Overlap1Fn>(
        &self,
        plan: plan::MapOverlapWindows<'_, F>,
    ) -> Result<()>;

    /// A 2D stencil of the general form (index, several windows, containers, update modes).
    fn map_overlap_windows_2d<F: Overlap2Fn>(
        &self,
        plan: plan::MapOverlapWindows<'_, F>,
    ) -> Result<()>;

    /// A MapReduce delivered and grouped as `fold` says: `Some(value)` when returned,
    /// `None` when written to `fold.into`. By default the map is materialised first where
    /// `fold.as_reduce` asks for Reduce's grouping, and a result is written on the host; the
    /// GPU backends fuse and write where they compute.
    fn map_reduce_fold<'a, S: MapReduceSig<'a>>(
        &self,
        plan: plan::MapReduce<'_, 'a, S>,
        fold: plan::Fold<'_, <S::M as UserFn>::Out>,
    ) -> Result<Option<<S::M as UserFn>::Out>>
    where
        Self: Sized,
    {
        fold_materialised(self, plan, fold)
    }

    /// A MapReduce per row or column. By default the map is materialised, then folded
    /// with `reduce_axis`; the GPU backends fuse the two.
    fn map_reduce_axis<'a, S: MapReduceSig<'a>>(
        &self,
        plan: plan::MapReduceAxis<'_, 'a, S>,
    ) -> Result<()>
    where
        Self: Sized,
    {
        axis_materialised(self, plan)
    }

    /// A Reduce whose result goes to element 0 of the one-element `out`. By default it is
    /// computed, then written on the host; the GPU backends write it where they compute.
    fn reduce_into<S: FoldSig>(
        &self,
        plan: plan::Reduce<'_, S>,
        out: ArgMut<'_, S::T>,
    ) -> Result<()>
    where
        Self: Sized,
    {
        reduce_into_host(self, plan, out)
    }

    /// One colour sweep of a 2D stencil in place: `Ok(true)` when done; `Ok(false)`, having
    /// done nothing, where this backend has no in-place path for it, and the caller runs
    /// the sweep through a second matrix. The GPU backends have one (no copy of the matrix
    /// per sweep); on the host a second matrix costs little and keeps Rayon's rows apart.
    fn map_overlap_in_place<F: Overlap2Fn>(
        &self,
        plan: plan::MapOverlapInPlace<'_, F>,
    ) -> Result<bool>
    where
        Self: Sized,
    {
        let _ = plan;
        Ok(false)
    }

    /// A wavefront sweep of a matrix in place, every cell after its upper, left and
    /// upper-left neighbours.
    fn wavefront<S: WavefrontSig>(&self, plan: plan::Wavefront<'_, '_, S>) -> Result<()>;
}

/// [`Execute::map_reduce_fold`] without fusion: the map materialised into a temporary on
/// the same executor where Reduce's grouping is asked for, the result written on the host.
pub(crate) fn fold_materialised<'a, E: Execute, S: MapReduceSig<'a>>(
    exec: &E,
    plan: plan::MapReduce<'_, 'a, S>,
    fold: plan::Fold<'_, <S::M as UserFn>::Out>,
) -> Result<Option<<S::M as UserFn>::Out>> {
    let value = if fold.as_reduce {
        let start = plan.start;
        let mut tmp = crate::skeletons::Resolved::scratch(plan.shape);
        exec.map(plan::Map::<(S::M, S::I, ArgMut<'_, _>)> {
            arrays: plan.arrays,
            inputs: plan.inputs,
            out: tmp.arg_mut()?,
            uniforms: plan.uniforms,
        })?;
        exec.reduce(plan::Reduce::<(S::R, _)> {
            input: tmp.arg(),
            start,
        })?
    } else {
        exec.map_reduce(plan)?
    };
    match fold.into {
        Some(mut out) => {
            out.host_overwrite()?[0] = value;
            Ok(None)
        }
        None => Ok(Some(value)),
    }
}

/// [`Execute::map_reduce_axis`] without fusion: the map materialised on the same executor,
/// then `reduce_axis`.
pub(crate) fn axis_materialised<'a, E: Execute, S: MapReduceSig<'a>>(
    exec: &E,
    plan: plan::MapReduceAxis<'_, 'a, S>,
) -> Result<()> {
    let plan::MapReduceAxis {
        map_reduce: p,
        out,
        axis,
    } = plan;
    let mut tmp = crate::skeletons::Resolved::scratch(p.shape);
    exec.map(plan::Map::<(S::M, S::I, ArgMut<'_, _>)> {
        arrays: p.arrays,
        inputs: p.inputs,
        out: tmp.arg_mut()?,
        uniforms: p.uniforms,
    })?;
    exec.reduce_axis(plan::ReduceAxis::<(S::R, _)> {
        input: tmp.arg(),
        out,
        axis,
    })
}

/// [`Execute::reduce_into`] through the host: the value computed, then written.
pub(crate) fn reduce_into_host<E: Execute, S: FoldSig>(
    exec: &E,
    plan: plan::Reduce<'_, S>,
    mut out: ArgMut<'_, S::T>,
) -> Result<()> {
    let value = exec.reduce(plan)?;
    out.host_overwrite()?[0] = value;
    Ok(())
}

/// The container arguments of user function `F` bound for one call.
pub(crate) type ContainerOps<'c, F> =
    <<F as ElementwiseFn>::Arrays as crate::userfn::ContainerArgs>::Args<'c>;

/// Runs `$body` with `$exec` bound to the executor of the resolved backend; on the host
/// backends an unwind out of the user function `$name` comes back as
/// [`Error::UserFunction`], on the devices a fault of a user function the host runs (Reduce
/// folding `.start(v)` with the device's result) does. `Backend::Auto` gets the executor
/// that chooses per call.
macro_rules! dispatch {
    ($options:expr, $name:expr, |$exec:ident| $body:expr) => {{
        let options: $crate::skeletons::Options = $options;
        // In a `Graph` launch, the backend recorded for this call (`crate::graph`).
        let (backend, _running) = $crate::graph::backend(options.backend_choice(), $name)?;
        match backend {
            $crate::Backend::Auto => {
                use $crate::backends::Execute as _;
                let $exec = &$crate::backends::auto::Auto::new(&options, $name);
                $body
            }
            backend => $crate::backends::concrete!(backend, options, $name, |$exec| $body),
        }
    }};
}

/// [`dispatch!`] for a backend that is not `Auto` (which `Auto` itself runs through).
macro_rules! concrete {
    ($backend:expr, $options:expr, $name:expr, |$exec:ident| $body:expr) => {{
        #[allow(unused_imports)] // where the caller imported it already
        use $crate::backends::Execute as _;
        #[allow(unused_variables)] // read by the device arms only
        let options: $crate::skeletons::Options = $options;
        #[allow(unreachable_patterns)]
        match $backend {
            $crate::Backend::Cpu => $crate::check::catch($name, || {
                let $exec = &$crate::backends::cpu::Cpu {
                    base: options.base(),
                    checked: options.checked(),
                };
                $body
            }),
            #[cfg(feature = "rayon")]
            $crate::Backend::Rayon => $crate::check::catch($name, || {
                let $exec = &$crate::backends::rayon::Rayon {
                    base: options.base(),
                    checked: options.checked(),
                };
                $body
            }),
            #[cfg(feature = "cuda")]
            $crate::Backend::Cuda => {
                let _counted = $crate::backends::Issued;
                $crate::check::catch_faults($name, || {
                    let $exec = &$crate::backends::cuda::Cuda::new(&options);
                    $body
                })
            }
            #[cfg(feature = "opencl")]
            $crate::Backend::OpenCl => {
                let _counted = $crate::backends::Issued;
                $crate::check::catch_faults($name, || {
                    let $exec = &$crate::backends::opencl::OpenCl {
                        checked: options.checked(),
                        index_base: options.base(),
                    };
                    $body
                })
            }
            other => Err($crate::Error::BackendUnavailable {
                backend: other,
                reason: "no executor for this backend in this build".into(),
            }),
        }
    }};
}
pub(crate) use concrete;
#[cfg(feature = "mpi")] // the distributed layer runs its blocks through it
pub(crate) use dispatch;

/// Runs a Reduce plan on the executor `options` resolve to, or on the distributed layer
/// (`dist::Distributed`, feature `mpi`) when its input is a block of a distributed
/// container.
pub(crate) fn reduce<S: FoldSig>(options: Options, plan: plan::Reduce<'_, S>) -> Result<S::T> {
    crate::graph::value_to_host("Reduce::run", <S::F as UserFn>::NAME)?;
    #[cfg(feature = "mpi")]
    if plan.input.spread().is_some() {
        return crate::dist::Distributed::new(options).reduce(plan);
    }
    dispatch!(options, <S::F as UserFn>::NAME, |exec| exec.reduce(plan))
}

// The routes below take the skeleton's shape checks as `checks`: run first on one process,
// and on the distributed layer only once the ranks agreed on the call, so that a check of
// global shapes fails on every rank or on none (no rank waits for one that returned early).

/// [`reduce`] for `ReduceAxis`, after `checks`.
pub(crate) fn reduce_axis<S: FoldSig>(
    options: Options,
    plan: plan::ReduceAxis<'_, S>,
    checks: impl FnOnce(&plan::ReduceAxis<'_, S>) -> Result<()>,
) -> Result<()>
where
    S::T: Default,
{
    #[cfg(feature = "mpi")]
    if plan.input.spread().is_some() || plan.out.spread().is_some() {
        return crate::dist::Distributed::new(options).reduce_axis(plan, checks);
    }
    checks(&plan)?;
    dispatch!(options, <S::F as UserFn>::NAME, |exec| exec
        .reduce_axis(plan))
}

/// [`reduce`] for `Scan`, after `checks`.
pub(crate) fn scan<S: FoldSig>(
    options: Options,
    plan: plan::Scan<'_, S>,
    checks: impl FnOnce(&plan::Scan<'_, S>) -> Result<()>,
) -> Result<()> {
    #[cfg(feature = "mpi")]
    if plan.input.spread().is_some() || plan.out.spread().is_some() {
        return crate::dist::Distributed::new(options).scan(plan, checks);
    }
    checks(&plan)?;
    dispatch!(options, <S::F as UserFn>::NAME, |exec| exec.scan(plan))
}

/// [`reduce`] for a 1D `MapOverlap`, after `checks` (which also settle the plan's axis).
pub(crate) fn map_overlap<F: WindowFn>(
    options: Options,
    mut plan: plan::MapOverlap<'_, F>,
    checks: impl FnOnce(&mut plan::MapOverlap<'_, F>) -> Result<()>,
) -> Result<()>
where
    F::Elem: Default,
{
    #[cfg(feature = "mpi")]
    if plan.input.spread().is_some() || plan.out.spread().is_some() {
        return crate::dist::Distributed::new(options).map_overlap(plan, checks);
    }
    checks(&mut plan)?;
    dispatch!(options, F::NAME, |exec| exec.map_overlap(plan))
}

/// `Err` for a distributed operand of a general stencil (not distributed yet).
#[cfg(feature = "mpi")]
fn local_windows<F: crate::userfn::OverlapFn>(plan: &plan::MapOverlapWindows<'_, F>) -> Result<()> {
    if plan.inputs.iter().any(|a| a.spread().is_some())
        || plan.out.spread().is_some()
        || plan.arrays.any_distributed()
    {
        return Err(Error::InvalidArgument(format!(
            "MapOverlap `{}`: a function with #[index], container arguments, several windows or an update mode runs on local containers only",
            F::NAME
        )));
    }
    Ok(())
}

/// [`reduce`] for a 1D `MapOverlap` of the general form, after `checks`.
pub(crate) fn map_overlap_windows<F: Overlap1Fn>(
    options: Options,
    mut plan: plan::MapOverlapWindows<'_, F>,
    checks: impl FnOnce(&mut plan::MapOverlapWindows<'_, F>) -> Result<()>,
) -> Result<()> {
    #[cfg(feature = "mpi")]
    local_windows(&plan)?;
    checks(&mut plan)?;
    dispatch!(options, F::NAME, |exec| exec.map_overlap_windows(plan))
}

/// [`reduce`] for a 2D `MapOverlap` of the general form, after `checks`.
pub(crate) fn map_overlap_windows_2d<F: Overlap2Fn>(
    options: Options,
    mut plan: plan::MapOverlapWindows<'_, F>,
    checks: impl FnOnce(&mut plan::MapOverlapWindows<'_, F>) -> Result<()>,
) -> Result<()> {
    #[cfg(feature = "mpi")]
    local_windows(&plan)?;
    checks(&mut plan)?;
    dispatch!(options, F::NAME, |exec| exec.map_overlap_windows_2d(plan))
}

/// [`reduce`] for a 2D `MapOverlap`, after `checks`.
pub(crate) fn map_overlap_2d<F: Window2Fn>(
    options: Options,
    mut plan: plan::MapOverlap2d<'_, F>,
    checks: impl FnOnce(&mut plan::MapOverlap2d<'_, F>) -> Result<()>,
) -> Result<()>
where
    F::Elem: Default,
{
    #[cfg(feature = "mpi")]
    if plan.input.spread().is_some() || plan.out.spread().is_some() {
        return crate::dist::Distributed::new(options).map_overlap_2d(plan, checks);
    }
    checks(&mut plan)?;
    dispatch!(options, F::NAME, |exec| exec.map_overlap_2d(plan))
}

/// [`reduce`] for `Filter`, after `checks` (a distributed Filter is refused before them).
pub(crate) fn filter<S: FilterSig>(
    options: Options,
    plan: plan::Filter<'_, S>,
    checks: impl FnOnce(&plan::Filter<'_, S>) -> Result<()>,
) -> Result<usize> {
    crate::graph::value_to_host("Filter::run", <S::F as UserFn>::NAME)?;
    #[cfg(feature = "mpi")]
    if plan.input.spread().is_some() || plan.out.spread().is_some() {
        return crate::dist::Distributed::new(options).filter(plan);
    }
    checks(&plan)?;
    dispatch!(options, <S::F as UserFn>::NAME, |exec| exec.filter(plan))
}

/// [`reduce`] for `Map`, after `checks`; `bound` holds the containers `plan.arrays` binds,
/// which a distributed call reads whole.
pub(crate) fn map<'a, 'o, S, B>(
    options: Options,
    bound: &B,
    plan: plan::Map<'_, 'a, 'o, S>,
    checks: impl for<'k> FnOnce(&plan::Map<'k, 'a, 'o, S>) -> Result<()>,
) -> Result<()>
where
    S: MapSig<'a, 'o>,
    B: BindArrays<<S::F as ElementwiseFn>::Arrays>,
{
    #[cfg(feature = "mpi")]
    if plan.inputs.any_distributed() || plan.out.any_distributed() || plan.arrays.any_distributed()
    {
        return crate::dist::Distributed::new(options).map(bound, plan, checks);
    }
    let _ = bound; // the containers behind the plan: only a distributed call gathers them
    checks(&plan)?;
    dispatch!(options, <S::F as UserFn>::NAME, |exec| exec.map(plan))
}

/// [`map`] for `MapArray`; `bound` is the container `plan.array` binds.
pub(crate) fn map_array<'a, S, X>(
    options: Options,
    bound: &X,
    plan: plan::MapArray<'_, 'a, S>,
    checks: impl for<'k> FnOnce(&plan::MapArray<'k, 'a, S>) -> Result<()>,
) -> Result<()>
where
    S: MapArraySig<'a>,
    X: Input<<S::F as ArrayFn>::Array> + ?Sized,
{
    #[cfg(feature = "mpi")]
    if plan.inputs.any_distributed() || plan.out.spread().is_some() || plan.array.spread().is_some()
    {
        return crate::dist::Distributed::new(options).map_array(bound, plan, checks);
    }
    let _ = bound; // the containers behind the plan: only a distributed call gathers them
    checks(&plan)?;
    dispatch!(options, <S::F as UserFn>::NAME, |exec| exec.map_array(plan))
}

/// [`map`] for `MapReduce`.
pub(crate) fn map_reduce<'a, S, B>(
    options: Options,
    bound: &B,
    plan: plan::MapReduce<'_, 'a, S>,
    checks: impl for<'k> FnOnce(&plan::MapReduce<'k, 'a, S>) -> Result<()>,
) -> Result<<S::M as UserFn>::Out>
where
    S: MapReduceSig<'a>,
    B: BindArrays<<S::M as ElementwiseFn>::Arrays>,
{
    crate::graph::value_to_host("MapReduce::run", <S::M as UserFn>::NAME)?;
    #[cfg(feature = "mpi")]
    if plan.inputs.any_distributed() || plan.arrays.any_distributed() {
        return crate::dist::Distributed::new(options).map_reduce(bound, plan, checks);
    }
    let _ = bound; // the containers behind the plan: only a distributed call gathers them
    checks(&plan)?;
    dispatch!(options, <S::M as UserFn>::NAME, |exec| exec
        .map_reduce(plan))
}

/// [`map`] for `MapPairs`; `bound_h` is the container `plan.h` binds, which a distributed
/// call reads whole.
pub(crate) fn map_pairs<S, B, H>(
    options: Options,
    (bound, bound_h): (&B, &H),
    plan: plan::MapPairs<'_, '_, S>,
    checks: impl for<'k, 'p> FnOnce(&plan::MapPairs<'k, 'p, S>) -> Result<()>,
) -> Result<()>
where
    S: PairsSig,
    B: BindArrays<<S::F as ElementwiseFn>::Arrays>,
    H: Input<S::B> + ?Sized,
{
    #[cfg(feature = "mpi")]
    if (plan.v, plan.h).any_distributed()
        || plan.out.spread().is_some()
        || plan.arrays.any_distributed()
    {
        return crate::dist::Distributed::new(options).map_pairs(bound, bound_h, plan, checks);
    }
    let _ = (bound, bound_h); // as in `map`: only a distributed call gathers them
    checks(&plan)?;
    dispatch!(options, <S::F as UserFn>::NAME, |exec| exec.map_pairs(plan))
}

/// [`map_pairs`] for `MapPairsReduce`; `checks` gets `false` here, `true` on the
/// distributed layer, which checks the global shapes itself.
pub(crate) fn map_pairs_reduce<S, B, H>(
    options: Options,
    (bound, bound_h): (&B, &H),
    plan: plan::MapPairsReduce<'_, '_, S>,
    checks: impl for<'k, 'p> FnOnce(&plan::MapPairsReduce<'k, 'p, S>, bool) -> Result<()>,
) -> Result<()>
where
    S: PairsReduceSig,
    B: BindArrays<<S::M as ElementwiseFn>::Arrays>,
    H: Input<S::B> + ?Sized,
{
    #[cfg(feature = "mpi")]
    if (plan.v, plan.h).any_distributed()
        || plan.out.spread().is_some()
        || plan.arrays.any_distributed()
    {
        return crate::dist::Distributed::new(options)
            .map_pairs_reduce(bound, bound_h, plan, checks);
    }
    let _ = (bound, bound_h); // as in `map`: only a distributed call gathers them
    checks(&plan, false)?;
    dispatch!(options, <S::M as UserFn>::NAME, |exec| exec
        .map_pairs_reduce(plan))
}

/// [`reduce`] for `Sort`, after `checks`; a distributed operand is refused (a sort moves
/// elements between every pair of blocks: gather it first).
pub(crate) fn sort<S: SortSig>(
    options: Options,
    plan: plan::Sort<'_, S>,
    checks: impl FnOnce(&plan::Sort<'_, S>) -> Result<()>,
) -> Result<()> {
    #[cfg(feature = "mpi")]
    if plan.keys.spread().is_some() || plan.values.as_ref().is_some_and(|v| v.spread().is_some()) {
        return Err(Error::InvalidArgument(
            "Sort of a distributed container: a sort moves elements between every pair of \
             blocks; gather the container on one process and sort it there"
                .into(),
        ));
    }
    checks(&plan)?;
    dispatch!(options, "sort", |exec| exec.sort(plan))
}

/// Calls handed to a device backend (CUDA, OpenCL) so far, counted once each call has
/// enqueued its work; [`SYNCED`] is the count that the last [`synchronize`] waited for.
/// Equal counts mean nothing is pending: `skel::tune::synchronize()` then returns at the
/// cost of two loads instead of a wait on every device.
static ISSUED: AtomicU64 = AtomicU64::new(0);
static SYNCED: AtomicU64 = AtomicU64::new(0);

/// Counts a call on a device backend when dropped, after the call enqueued its work
/// (successful, failed or unwinding: a failed call may have enqueued some).
#[cfg_attr(not(any(feature = "cuda", feature = "opencl")), allow(dead_code))]
pub(crate) struct Issued;

impl Drop for Issued {
    fn drop(&mut self) {
        ISSUED.fetch_add(1, Ordering::Release);
    }
}

/// Waits for every call enqueued on a device backend, unless none was enqueued since the
/// last wait. A call counts once it has enqueued its work, so a wait that begins after a
/// call returned covers it; calls still running on other threads when it begins are
/// covered by their own count, which the next wait sees.
pub(crate) fn synchronize() -> Result<()> {
    let upto = ISSUED.load(Ordering::Acquire);
    if upto == SYNCED.load(Ordering::Acquire) {
        return Ok(());
    }
    auto::finish(Backend::Cuda)?;
    auto::finish(Backend::OpenCl)?;
    SYNCED.fetch_max(upto, Ordering::AcqRel);
    Ok(())
}

/// Whether the CUDA backend can run here (the probe is cached), else why not.
fn cuda_check() -> Result<()> {
    #[cfg(feature = "cuda")]
    return cuda::probe();
    #[cfg(not(feature = "cuda"))]
    Err(Error::BackendUnavailable {
        backend: Backend::Cuda,
        reason: "skel was built without the `cuda` feature".into(),
    })
}

/// A place skeletons can run.
///
/// ```
/// use skel::prelude::*;
/// let b: Backend = "rayon".parse()?;
/// assert_eq!(b.to_string(), "rayon");
/// assert!(Backend::available().contains(&Backend::Cpu));
/// # Ok::<(), skel::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Backend {
    /// Sequential, one CPU core: the reference every other backend is tested against.
    Cpu,
    /// All CPU cores through Rayon (feature `rayon`, default).
    Rayon,
    /// An NVIDIA GPU through CUDA (feature `cuda`).
    Cuda,
    /// Any OpenCL device (feature `opencl`).
    OpenCl,
    /// Per call, the backend that calibrated performance models predict fastest for this
    /// skeleton, user function, size and the place the operands are valid now; large
    /// Map, Reduce and MapReduce calls may be split between Rayon and a GPU. The default
    /// when nothing else is set. See [`crate::tune`].
    Auto,
}

impl Backend {
    /// Every backend that computes itself (all but `Auto`, which picks one of them), in the
    /// static order of preference.
    pub const ALL: [Backend; 4] = [Backend::Cuda, Backend::OpenCl, Backend::Rayon, Backend::Cpu];

    /// The backends that are compiled in and have a device, in the static order (not
    /// `Auto`, which is always available).
    pub fn available() -> Vec<Backend> {
        Backend::ALL
            .into_iter()
            .filter(|b| b.check().is_ok())
            .collect()
    }

    /// `Ok` if this backend can run here, else [`Error::BackendUnavailable`] saying why.
    pub fn check(self) -> Result<()> {
        kernel_cache::guard_this_threads_exit();
        let missing = |reason: &str| {
            Err(Error::BackendUnavailable {
                backend: self,
                reason: reason.into(),
            })
        };
        match self {
            Backend::Cpu | Backend::Auto => Ok(()),
            Backend::Rayon if cfg!(feature = "rayon") => Ok(()),
            Backend::Rayon => missing("skel was built without the `rayon` feature"),
            Backend::Cuda => cuda_check(),
            #[cfg(feature = "opencl")]
            Backend::OpenCl => opencl::probe().or_else(|reason| missing(&reason)),
            #[cfg(not(feature = "opencl"))]
            Backend::OpenCl => missing("skel was built without the `opencl` feature"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Rayon => "rayon",
            Backend::Cuda => "cuda",
            Backend::OpenCl => "opencl",
            Backend::Auto => "auto",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let wanted = s.trim().to_ascii_lowercase();
        Backend::ALL
            .into_iter()
            .chain([Backend::Auto])
            .find(|b| b.name() == wanted)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "unknown backend {s:?}: expected one of auto, cpu, rayon, cuda, opencl"
                ))
            })
    }
}

/// Sets the backend that skeletons without `.backend(..)` use in this process (the
/// setting [`crate::config::BACKEND`], which takes precedence over `SKEL_BACKEND`).
///
/// Fails with [`Error::BackendUnavailable`] if `backend` cannot run here; the default is then
/// left as it was.
///
/// ```
/// skel::set_default_backend(skel::Backend::Cpu)?;
/// assert_eq!(skel::default_backend()?, skel::Backend::Cpu);
/// # Ok::<(), skel::Error>(())
/// ```
pub fn set_default_backend(backend: Backend) -> Result<()> {
    crate::config::BACKEND.set(backend)
}

/// The backend skeletons use when none is set per instance: the one given to
/// [`set_default_backend`], else `SKEL_BACKEND` from the environment, else
/// [`Backend::Auto`].
///
/// An unknown `SKEL_BACKEND` is [`Error::InvalidArgument`] and an unavailable one
/// [`Error::BackendUnavailable`]: never a silent fallback.
pub fn default_backend() -> Result<Backend> {
    let (backend, source) = crate::config::BACKEND.resolve()?;
    if source == crate::config::Source::Code {
        return Ok(backend); // checked when it was set
    }
    let from_env = source == crate::config::Source::Environment;
    backend.check().map_err(|e| match e {
        Error::BackendUnavailable { backend, reason } if from_env => Error::BackendUnavailable {
            backend,
            reason: format!("{reason} (chosen by SKEL_BACKEND)"),
        },
        other => other,
    })?;
    Ok(backend)
}

/// Creates Rayon's global thread pool (a no-op once it exists, or without the `rayon`
/// feature): `Backend::Auto` calls it before timing anything, so that spawning the
/// pool's threads is not counted as the first Rayon call's time.
pub(crate) fn start_host_pool() {
    #[cfg(feature = "rayon")]
    let _ = ::rayon::current_num_threads();
}

/// Whether the OpenCL device is a GPU, without opening a CPU device (see
/// `opencl::context::device_is_gpu`).
pub(crate) fn opencl_device_is_gpu() -> bool {
    #[cfg(feature = "opencl")]
    return opencl::context::device_is_gpu();
    #[cfg(not(feature = "opencl"))]
    false
}

/// Whether a CUDA device is open (something ran on the CUDA backend).
pub(crate) fn cuda_opened() -> bool {
    #[cfg(feature = "cuda")]
    return cuda::context::opened().is_some();
    #[cfg(not(feature = "cuda"))]
    false
}

/// Loads the CUDA kernel compiler (NVRTC) and runs its first compile here, where a CUDA
/// device is present and the kernel cache holds no CUDA binary yet (so the first kernels
/// will be compiled): called on a thread `Backend::Auto` starts beside its device probe,
/// off the calling threads, while the device's context is still being created.
pub(crate) fn warm_up_cuda_compiler() {
    #[cfg(feature = "cuda")]
    cuda::warm_up_if_cold();
}

/// Whether the OpenCL device is open (something ran on the OpenCL backend).
pub(crate) fn opencl_opened() -> bool {
    #[cfg(feature = "opencl")]
    return opencl::context::opened();
    #[cfg(not(feature = "opencl"))]
    false
}

/// Whether the OpenCL device is a GPU (only then is OpenCL a default choice).
pub(crate) fn opencl_is_gpu() -> bool {
    #[cfg(feature = "opencl")]
    return opencl::is_gpu();
    #[cfg(not(feature = "opencl"))]
    false
}

/// Resolves a per-instance choice (or the process default) to a runnable backend.
pub(crate) fn resolve(choice: Option<Backend>) -> Result<Backend> {
    let backend = match choice {
        Some(b) => b,
        None => default_backend()?,
    };
    backend.check()?;
    Ok(backend)
}

/// Whether a Map or MapReduce call with `options` evaluates lazy inputs per element: the
/// host backends' loops (`skeletons::lazy`) and the GPU kernels (`backends::chain`) do;
/// `Auto`, which may split a call between backends, gets them materialised. `false` when
/// the backend cannot be resolved: the call reports that itself.
pub(crate) fn fuses_lazy_inputs(options: &Options) -> bool {
    matches!(
        resolve(options.backend_choice()),
        Ok(Backend::Cpu | Backend::Rayon | Backend::OpenCl | Backend::Cuda)
    )
}

/// Whether a `Reduce::run_rows` of the lazy `input` into `out` folds each row as it maps
/// it on a host backend ([`Execute::map_reduce_axis`]): on Cpu and Rayon, where nothing the
/// call reads or writes is distributed (`skel::dist` runs those materialised, the Map then
/// the Reduce).
pub(crate) fn folds_lazy_rows<T: crate::DeviceType>(
    options: &Options,
    input: &impl crate::skeletons::Source<T>,
    out: &ArgMut<'_, T>,
) -> bool {
    matches!(
        resolve(options.backend_choice()),
        Ok(Backend::Cpu | Backend::Rayon)
    ) && all_local(input, out)
}

/// Whether no container `input`'s chain reads, and not `out`, is distributed (a lazy Map
/// over a distributed container refuses its operand: not local either).
#[cfg(feature = "mpi")]
fn all_local<T: crate::DeviceType>(
    input: &impl crate::skeletons::Source<T>,
    out: &ArgMut<'_, T>,
) -> bool {
    use crate::plan::{ArgVisitor, Operand};
    struct AnySpread(bool);
    impl ArgVisitor for AnySpread {
        fn visit<E: crate::DeviceType>(
            &mut self,
            arg: crate::containers::Arg<'_, E>,
        ) -> Result<()> {
            self.0 |= arg.spread().is_some();
            Ok(())
        }
    }
    let mut spread = AnySpread(out.spread().is_some());
    input
        .operand()
        .and_then(|op| op.visit(&mut spread))
        .is_ok_and(|()| !spread.0)
}

#[cfg(not(feature = "mpi"))]
fn all_local<T: crate::DeviceType>(
    _: &impl crate::skeletons::Source<T>,
    _: &ArgMut<'_, T>,
) -> bool {
    true
}

/// The route of a Histogram plan: `checks`, then the executor `options` resolve to.
/// Distributed operands are refused (a histogram of a distributed container is a local
/// Histogram per rank and a sum of the counts, which `skel::dist` does not do yet).
pub(crate) fn histogram<'a, S: HistogramSig<'a>>(
    options: Options,
    plan: plan::Histogram<'_, 'a, '_, S>,
    checks: impl for<'k, 'o> FnOnce(&plan::Histogram<'k, 'a, 'o, S>) -> Result<()>,
) -> Result<()> {
    #[cfg(feature = "mpi")]
    if plan.inputs.any_distributed()
        || plan.arrays.any_distributed()
        || plan.counts.spread().is_some()
    {
        return Err(Error::InvalidArgument(format!(
            "Histogram of `{}`: distributed operands are not supported; run it on each \
             rank's local block and sum the counts",
            <S::F as UserFn>::NAME
        )));
    }
    checks(&plan)?;
    dispatch!(options, <S::F as UserFn>::NAME, |exec| exec.histogram(plan))
}

/// The route of a ReduceByKey plan: `checks`, then the executor `options` resolve to.
/// Distributed operands are refused, as for [`histogram`].
pub(crate) fn reduce_by_key<'a, S: ReduceByKeySig<'a>>(
    options: Options,
    plan: plan::ReduceByKey<'_, 'a, S>,
    checks: impl for<'k> FnOnce(&plan::ReduceByKey<'k, 'a, S>) -> Result<()>,
) -> Result<()> {
    #[cfg(feature = "mpi")]
    if plan.inputs.any_distributed()
        || plan.arrays.any_distributed()
        || plan.sums.spread().is_some()
    {
        return Err(Error::InvalidArgument(format!(
            "ReduceByKey of `{}`: distributed operands are not supported; run it on each \
             rank's local block and merge the tables",
            <S::F as UserFn>::NAME
        )));
    }
    checks(&plan)?;
    dispatch!(options, <S::F as UserFn>::NAME, |exec| exec
        .reduce_by_key(plan))
}

/// [`reduce`] for a 3D `MapOverlap`, after `checks` (which settle the plan's extents). A
/// `Tensor3` is never distributed, so there is no hand-off to the dist layer.
pub(crate) fn map_overlap_3d<F: crate::userfn::Window3Fn>(
    options: Options,
    mut plan: plan::MapOverlap3d<'_, F>,
    checks: impl FnOnce(&mut plan::MapOverlap3d<'_, F>) -> Result<()>,
) -> Result<()>
where
    F::Elem: Default,
{
    checks(&mut plan)?;
    dispatch!(options, F::NAME, |exec| exec.map_overlap_3d(plan))
}

/// Whether a fold (Reduce, `MapReduce::run_rows`) of a lazy input runs fused on the
/// backend `options` resolve to: on CUDA and OpenCL, where the fold's kernel evaluates the
/// producer chain per element. Elsewhere the lazy input is materialised first.
pub(crate) fn fuses_lazy_folds(options: &Options) -> bool {
    matches!(
        resolve(options.backend_choice()),
        Ok(Backend::OpenCl | Backend::Cuda)
    )
}

/// [`map_reduce`] delivered and grouped as `fold` says (`run_into`, a Reduce of a lazy
/// input). A distributed call computes the value on the distributed layer and writes it on
/// the host.
pub(crate) fn map_reduce_fold<'a, S, B>(
    options: Options,
    bound: &B,
    plan: plan::MapReduce<'_, 'a, S>,
    fold: plan::Fold<'_, <S::M as UserFn>::Out>,
    checks: impl for<'k> FnOnce(&plan::MapReduce<'k, 'a, S>) -> Result<()>,
) -> Result<Option<<S::M as UserFn>::Out>>
where
    S: MapReduceSig<'a>,
    B: BindArrays<<S::M as ElementwiseFn>::Arrays>,
{
    if fold.into.is_none() {
        crate::graph::value_to_host(
            "a fold (Reduce::run, MapReduce::run)",
            <S::M as UserFn>::NAME,
        )?;
    }
    #[cfg(feature = "mpi")]
    if plan.inputs.any_distributed()
        || plan.arrays.any_distributed()
        || fold.into.as_ref().is_some_and(|o| o.spread().is_some())
    {
        let value = crate::dist::Distributed::new(options).map_reduce(bound, plan, checks)?;
        return match fold.into {
            Some(mut out) => {
                out.host_overwrite()?[0] = value;
                Ok(None)
            }
            None => Ok(Some(value)),
        };
    }
    let _ = bound; // the containers behind the plan: only a distributed call gathers them
    checks(&plan)?;
    dispatch!(options, <S::M as UserFn>::NAME, |exec| exec
        .map_reduce_fold(plan, fold))
}

/// [`map_reduce`] per row or column, after `checks`; distributed operands are refused
/// (fold the rows of each rank's block instead). `skeleton`: the one the user called
/// (`MapReduce`, or `Reduce` of a lazy input), as the error names it.
pub(crate) fn map_reduce_axis<'a, S: MapReduceSig<'a>>(
    options: Options,
    plan: plan::MapReduceAxis<'_, 'a, S>,
    skeleton: &str,
    checks: impl for<'k> FnOnce(&plan::MapReduceAxis<'k, 'a, S>) -> Result<()>,
) -> Result<()> {
    #[cfg(feature = "mpi")]
    if plan.map_reduce.inputs.any_distributed()
        || plan.map_reduce.arrays.any_distributed()
        || plan.out.spread().is_some()
    {
        return Err(Error::InvalidArgument(format!(
            "{skeleton}::run_rows/run_cols over `{}`: distributed operands are not supported; \
             run the Map into a distributed matrix, then Reduce::run_rows",
            <S::M as UserFn>::NAME
        )));
    }
    #[cfg(not(feature = "mpi"))]
    let _ = skeleton; // only the refusal of distributed operands names it
    checks(&plan)?;
    dispatch!(options, <S::M as UserFn>::NAME, |exec| exec
        .map_reduce_axis(plan))
}

/// [`reduce`] with the result written to element 0 of the one-element `out` (`run_into`).
/// A distributed call computes the value on the distributed layer and writes it on the
/// host.
pub(crate) fn reduce_into<S: FoldSig>(
    options: Options,
    plan: plan::Reduce<'_, S>,
    out: ArgMut<'_, S::T>,
) -> Result<()> {
    #[cfg(feature = "mpi")]
    if plan.input.spread().is_some() || out.spread().is_some() {
        let mut out = out;
        out.host_overwrite()?[0] = crate::dist::Distributed::new(options).reduce(plan)?;
        return Ok(());
    }
    dispatch!(options, <S::F as UserFn>::NAME, |exec| exec
        .reduce_into(plan, out))
}

/// [`reduce`] for one colour sweep of a 2D stencil in place, after `checks`: `Ok(false)`
/// where the backend has no in-place path for it (see [`Execute::map_overlap_in_place`]).
pub(crate) fn map_overlap_in_place<F: Overlap2Fn>(
    options: Options,
    plan: plan::MapOverlapInPlace<'_, F>,
    checks: impl FnOnce(&plan::MapOverlapInPlace<'_, F>) -> Result<()>,
) -> Result<bool> {
    #[cfg(feature = "mpi")]
    if plan.m.spread().is_some() || plan.arrays.any_distributed() {
        return Ok(false);
    }
    checks(&plan)?;
    dispatch!(options, F::NAME, |exec| exec.map_overlap_in_place(plan))
}

/// [`reduce`] for `Wavefront`, after `checks`; a distributed matrix is refused (each block
/// of rows waits for the one above it: gather it first).
pub(crate) fn wavefront<S: WavefrontSig>(
    options: Options,
    plan: plan::Wavefront<'_, '_, S>,
    checks: impl for<'k, 'p> FnOnce(&plan::Wavefront<'k, 'p, S>) -> Result<()>,
) -> Result<()> {
    #[cfg(feature = "mpi")]
    if plan.m.spread().is_some() || plan.arrays.any_distributed() {
        return Err(Error::InvalidArgument(
            "Wavefront of a distributed container: every block of rows waits for the one \
             above it; gather the matrix (and the container arguments) on one process"
                .into(),
        ));
    }
    checks(&plan)?;
    dispatch!(options, <S::F as UserFn>::NAME, |exec| exec.wavefront(plan))
}
