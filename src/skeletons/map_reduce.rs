//! MapReduce: a Map fused with a Reduce, without the intermediate container.

use std::marker::PhantomData;

use super::{
    check_arrays, check_index_dims, check_inputs, check_one, check_shape, common_options,
    uniforms_or_missing, FoldTo, Options,
};
use crate::backends::{self, BinaryFn};
use crate::containers::{Output, Shape, Source};
use crate::plan::{self, ArgTuple, Axis};
use crate::userfn::{BindArrays, ContainerArgs, ElementwiseFn, IndexKind};
use crate::{DeviceType, Error, Map, Reduce, Result};

/// `start ⊕ reduce(map(a[i], b[i], ..))` in one pass; `start` defaults to `T::default()`.
///
/// ```
/// use skel::prelude::*;
/// #[userfn]
/// fn mult(a: f64, b: f64) -> f64 { a * b }
/// #[userfn]
/// fn add(a: f64, b: f64) -> f64 { a + b }
///
/// let a = Vector::from(vec![1.0, 2.0, 3.0]);
/// let b = Vector::from(vec![4.0, 5.0, 6.0]);
/// let dot: f64 = MapReduce::new(mult, add).run(&a, &b)?;
/// assert_eq!(dot, 32.0);
/// # Ok::<(), skel::Error>(())
/// ```
#[must_use = "a skeleton does nothing until one of its `run` methods is called"]
#[derive(Clone, Copy, Debug)]
pub struct MapReduce<M: ElementwiseFn, R: BinaryFn<M::Out>, E = <M as ElementwiseFn>::Elems, A = ()>
{
    map: M,
    reduce: R,
    start: M::Out,
    uniforms: Option<M::Uniforms>,
    options: Options,
    elems: PhantomData<fn() -> E>,
    arrays: A,
}

impl<M: ElementwiseFn, R: BinaryFn<M::Out>> MapReduce<M, R, M::Elems>
where
    M::Out: Default,
{
    /// A MapReduce of `map` then `reduce`, starting from `M::Out::default()`.
    pub fn new(map: M, reduce: R) -> Self {
        Self::with_start(map, reduce, M::Out::default())
    }
}

impl<M: ElementwiseFn, R: BinaryFn<M::Out>> MapReduce<M, R, M::Elems> {
    /// A MapReduce of `map` then `reduce` starting from `start`: also for result types
    /// without `Default` (arrays longer than 32, structs holding them).
    pub fn with_start(map: M, reduce: R, start: M::Out) -> Self {
        MapReduce {
            map,
            reduce,
            start,
            uniforms: None,
            options: Options::default(),
            elems: PhantomData,
            arrays: (),
        }
    }
}

impl<M: ElementwiseFn, R: BinaryFn<M::Out>, A: Clone> MapReduce<M, R, M::Elems, A> {
    /// The MapReduce that folds the lazy Map `map`'s values with `reduce` (its function,
    /// start and options): what a Reduce of a lazy input runs on the GPUs.
    pub(crate) fn of_lazy(map: &Map<M, M::Elems, A>, reduce: &Reduce<R, M::Out>) -> Result<Self> {
        let (r, start, mut options) = reduce.parts();
        // The random streams are the producer's: its seed, not the fold's.
        options.seed = map.seed_given();
        Ok(MapReduce {
            map: map.function(),
            reduce: r,
            start,
            uniforms: Some(*map.bound_uniforms()?),
            options,
            elems: PhantomData,
            arrays: map.bound_arrays().clone(),
        })
    }
}

impl<M: ElementwiseFn, R: BinaryFn<M::Out>, E, A> MapReduce<M, R, E, A> {
    /// The value the fold starts from (default `T::default()`).
    pub fn start(mut self, start: M::Out) -> Self {
        self.start = start;
        self
    }

    /// Binds the map function's `#[uniform]` parameters.
    pub fn uniforms(
        mut self,
        uniforms: <M::Uniforms as crate::userfn::UniformTuple>::User,
    ) -> Self {
        self.uniforms = Some(crate::userfn::UniformTuple::from_user(uniforms));
        self
    }

    /// Binds the map function's container parameters (`Mat<T>`, `&[T]`), in declaration
    /// order, as for [`crate::Map::arrays`].
    ///
    /// ```
    /// use skel::prelude::*;
    /// #[userfn]
    /// fn weighted(#[index] i: usize, x: f32, w: &[f32]) -> f32 { x * w[i % w.len()] }
    /// #[userfn]
    /// fn add(a: f32, b: f32) -> f32 { a + b }
    ///
    /// let x = Vector::from(vec![1.0f32, 2.0, 3.0, 4.0]);
    /// let w = Vector::from(vec![1.0f32, -1.0]);
    /// let s: f32 = MapReduce::new(weighted, add).arrays((&w,)).run(&x)?;
    /// assert_eq!(s, -2.0);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn arrays<B: BindArrays<M::Arrays>>(self, arrays: B) -> MapReduce<M, R, E, B> {
        MapReduce {
            map: self.map,
            reduce: self.reduce,
            start: self.start,
            uniforms: self.uniforms,
            options: self.options,
            elems: PhantomData,
            arrays,
        }
    }

    common_options!();

    /// The map and reduce functions.
    pub fn functions(&self) -> (M, R) {
        (self.map, self.reduce)
    }

    fn execute<'a, I>(&self, inputs: I, index_only: Option<usize>) -> Result<M::Out>
    where
        I: ArgTuple<'a, Elems = M::Elems>,
        A: BindArrays<M::Arrays>,
    {
        self.options.validate()?;
        let uniforms = &uniforms_or_missing(M::NAME, &self.uniforms, &self.options)?;
        let shapes = inputs.shapes();
        let plan = plan::MapReduce::<(M, R, I)> {
            arrays: self.arrays.bind(),
            inputs,
            shape: Self::fold_shape(&shapes, index_only),
            uniforms,
            start: self.start,
        };
        backends::map_reduce(self.options, &self.arrays, plan, |plan| {
            Self::check(&shapes, plan)
        })
    }

    /// The shape a fold runs over: the first input's, which [`Self::check`] confirms is
    /// every input's (`run` takes at least one input); `run_index` names its length.
    fn fold_shape(shapes: &[Shape], index_only: Option<usize>) -> Shape {
        match index_only {
            Some(n) => Shape::Vector(n),
            None => shapes.first().copied().unwrap_or(Shape::Vector(0)),
        }
    }

    /// The checks of a fold whose inputs have `shapes`: container arguments, inputs of one
    /// shape, the `#[index]` rank.
    fn check<'a, I>(shapes: &[Shape], plan: &plan::MapReduce<'_, 'a, (M, R, I)>) -> Result<()>
    where
        I: ArgTuple<'a, Elems = M::Elems>,
    {
        check_arrays(
            "MapReduce",
            M::NAME,
            M::Arrays::KINDS,
            &plan.arrays.shapes(),
        )?;
        check_inputs("MapReduce", shapes, plan.shape)?;
        check_index_dims(
            "MapReduce",
            M::NAME,
            <M::Index as IndexKind>::DIMS,
            plan.shape,
        )
    }
}

impl<M: ElementwiseFn, R: BinaryFn<M::Out>, E, A: BindArrays<M::Arrays>> MapReduce<M, R, E, A> {
    /// The fold of `inputs` delivered as `to` says; `as_reduce`: grouped as `Reduce` groups
    /// materialised values (the map is a lazy input's producer); `skeleton`: the one the
    /// user called, as errors name it.
    fn execute_to<'a, I>(
        &self,
        inputs: I,
        to: FoldTo<'_, M::Out>,
        (as_reduce, index_only): (bool, Option<usize>),
        skeleton: &'static str,
    ) -> Result<Option<M::Out>>
    where
        I: ArgTuple<'a, Elems = M::Elems>,
    {
        let (out, axis) = match to {
            FoldTo::Value if !as_reduce => return self.execute(inputs, index_only).map(Some),
            FoldTo::Value => (None, None),
            FoldTo::Into(out) => (Some(out), None),
            FoldTo::Rows(out) => (Some(out), Some(Axis::Rows)),
            FoldTo::Cols(out) => (Some(out), Some(Axis::Cols)),
        };
        self.options.validate()?;
        let uniforms = &uniforms_or_missing(M::NAME, &self.uniforms, &self.options)?;
        let shapes = inputs.shapes();
        let plan = plan::MapReduce::<(M, R, I)> {
            arrays: self.arrays.bind(),
            inputs,
            shape: Self::fold_shape(&shapes, index_only),
            uniforms,
            start: self.start,
        };
        let checks = |plan: &plan::MapReduce<'_, 'a, (M, R, I)>| Self::check(&shapes, plan);
        let Some(axis) = axis else {
            let fold = plan::Fold {
                as_reduce,
                into: out,
            };
            return backends::map_reduce_fold(self.options, &self.arrays, plan, fold, checks);
        };
        let Some(out) = out else {
            return Ok(None);
        };
        let plan = plan::MapReduceAxis {
            map_reduce: plan,
            out,
            axis,
        };
        backends::map_reduce_axis(self.options, plan, skeleton, |plan| {
            checks(&plan.map_reduce)?;
            let (global, global_out) = (plan.map_reduce.shape, plan.out.global_shape());
            let Shape::Matrix { rows, cols } = global else {
                return Err(Error::shape(
                    format!("{skeleton} {axis:?} input"),
                    "a matrix",
                    global,
                ));
            };
            let (results, folded) = if axis == Axis::Rows {
                (rows, cols)
            } else {
                (cols, rows)
            };
            if folded == 0 && results > 0 {
                return Err(Error::InvalidArgument(format!(
                    "{skeleton} {axis:?} of a {global}: every fold needs at least one element",
                )));
            }
            check_shape(
                format_args!("{skeleton} {axis:?} output"),
                Shape::Vector(results),
                global_out,
            )
        })
        .map(|()| None)
    }
}

impl<M, R, Bound> MapReduce<M, R, (), Bound>
where
    M: ElementwiseFn<Elems = ()>,
    R: BinaryFn<M::Out>,
    Bound: BindArrays<M::Arrays>,
{
    /// Index-only MapReduce (SkePU's `MapReduce<0>`): `start ⊕ map(0) ⊕ ... ⊕ map(n-1)`,
    /// for a map function that takes only `#[index] i: usize` (and container arguments,
    /// uniforms).
    ///
    /// ```
    /// use skel::prelude::*;
    /// #[userfn]
    /// fn odd(#[index] i: usize) -> u64 { (i % 2) as u64 }
    /// #[userfn]
    /// fn add(a: u64, b: u64) -> u64 { a + b }
    /// assert_eq!(MapReduce::new(odd, add).run_index(7)?, 3);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn run_index(&self, n: usize) -> Result<M::Out> {
        self.execute((), Some(n))
    }

    /// [`run_index`](Self::run_index), with the result written to element 0 of a
    /// one-element `out`.
    /// As `run_into`, the result is written where it is computed (on the device on CUDA
    /// and OpenCL).
    pub fn run_index_into(&self, n: usize, out: &mut impl Output<M::Out>) -> Result<()> {
        check_one("MapReduce", out)?;
        self.execute_to(
            (),
            FoldTo::Into(out.arg_mut()),
            (false, Some(n)),
            "MapReduce",
        )
        .map(drop)
    }
}

macro_rules! map_reduce_run {
    ($(($($t:ident $a:ident),+))*) => {$(
        impl<M, R, Bound, $($t: DeviceType),+> MapReduce<M, R, ($($t,)+), Bound>
        where
            M: ElementwiseFn<Elems = ($($t,)+)>,
            R: BinaryFn<M::Out>,
            Bound: BindArrays<M::Arrays>,
        {
            /// Runs the fused map and reduce over inputs of one shape.
            pub fn run(&self, $($a: &impl Source<$t>),+) -> Result<M::Out> {
                if ($($a.is_lazy())||+) && backends::fuses_lazy_inputs(&self.options) {
                    return self.execute(($($a.operand()?,)+), None);
                }
                $(let $a = $a.resolve(self.options.backend)?;)+
                self.execute(($($a.arg(),)+), None)
            }

            /// The fold of a lazy input's producer (this MapReduce's map) delivered as `to`
            /// says, grouped as `Reduce` groups materialised values (`Source::fold`).
            pub(crate) fn fold_to(&self, $($a: &impl Source<$t>,)+ to: FoldTo<'_, M::Out>) -> Result<Option<M::Out>> {
                self.run_to($($a,)+ to, (true, "Reduce"))
            }

            fn run_to(&self, $($a: &impl Source<$t>,)+ to: FoldTo<'_, M::Out>, (as_reduce, skeleton): (bool, &'static str)) -> Result<Option<M::Out>> {
                if ($($a.is_lazy())||+) && backends::fuses_lazy_inputs(&self.options) {
                    return self.execute_to(($($a.operand()?,)+), to, (as_reduce, None), skeleton);
                }
                $(let $a = $a.resolve(self.options.backend)?;)+
                self.execute_to(($($a.arg(),)+), to, (as_reduce, None), skeleton)
            }

            /// [`run`](Self::run), with the result written to element 0 of `out`, a
            /// container of exactly one element (else `ShapeMismatch`), so that a later call
            /// can read it as an input or a container argument (a CG step's `alpha`).
            ///
            /// ```
            /// use skel::prelude::*;
            /// #[userfn]
            /// fn mul(a: f32, b: f32) -> f32 { a * b }
            /// #[userfn]
            /// fn add(a: f32, b: f32) -> f32 { a + b }
            /// let p = Vector::from(vec![1.0f32, 2.0, 3.0]);
            /// let mut dot = Vector::zeroed(1);
            /// MapReduce::new(mul, add).run_into(&p, &p, &mut dot)?;
            /// assert_eq!(dot[0], 14.0);
            /// # Ok::<(), skel::Error>(())
            /// ```
            ///
            /// On CUDA and OpenCL the result is written on the device, where it is
            /// computed: no host round trip, and `out`'s device copy is the valid one.
            pub fn run_into(&self, $($a: &impl Source<$t>,)+ out: &mut impl Output<M::Out>) -> Result<()> {
                check_one("MapReduce", out)?;
                self.run_to($($a,)+ FoldTo::Into(out.arg_mut()), (false, "MapReduce")).map(drop)
            }

            /// `out[r]` = the `reduce` fold, from the row's first element, of `map` over row
            /// `r` of the matrix inputs (`start` is not used, as in `Reduce::run_rows`).
            ///
            /// ```
            /// use skel::prelude::*;
            /// #[userfn]
            /// fn sq(x: i32) -> i32 { x * x }
            /// #[userfn]
            /// fn add(a: i32, b: i32) -> i32 { a + b }
            /// let m = Matrix::from_vec(2, 2, vec![1, 2, 3, 4])?;
            /// let (mut rows, mut cols) = (Vector::zeroed(2), Vector::zeroed(2));
            /// MapReduce::new(sq, add).run_rows(&m, &mut rows)?;
            /// MapReduce::new(sq, add).run_cols(&m, &mut cols)?;
            /// assert_eq!((rows.to_vec(), cols.to_vec()), (vec![5, 25], vec![10, 20]));
            /// # Ok::<(), skel::Error>(())
            /// ```
            pub fn run_rows(&self, $($a: &impl Source<$t>,)+ out: &mut impl Output<M::Out>) -> Result<()>
            where
                Bound: Clone,
                M::Out: Default,
            {
                self.run_to($($a,)+ FoldTo::Rows(out.arg_mut()), (true, "MapReduce")).map(drop)
            }

            /// `out[c]` = the `reduce` fold of `map` over column `c` (see
            /// [`run_rows`](Self::run_rows)).
            pub fn run_cols(&self, $($a: &impl Source<$t>,)+ out: &mut impl Output<M::Out>) -> Result<()>
            where
                Bound: Clone,
                M::Out: Default,
            {
                self.run_to($($a,)+ FoldTo::Cols(out.arg_mut()), (true, "MapReduce")).map(drop)
            }
        }
    )*};
}

map_reduce_run! {
    (A a)
    (A a, B b)
    (A a, B b, C c)
    (A a, B b, C c, D d)
}
