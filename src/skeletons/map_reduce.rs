//! MapReduce: a Map fused with a Reduce, without the intermediate container.

use std::marker::PhantomData;

use super::{
    check_arrays, check_index_dims, check_inputs, common_options, uniforms_or_missing, Options,
};
use crate::backends::{self, BinaryFn};
use crate::containers::{Input, Shape};
use crate::plan::{self, ArgTuple};
use crate::userfn::{BindArrays, ContainerArgs, ElementwiseFn, IndexKind};
use crate::{DeviceType, Result};

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
    start: Option<M::Out>,
    uniforms: Option<M::Uniforms>,
    options: Options,
    elems: PhantomData<fn() -> E>,
    arrays: A,
}

impl<M: ElementwiseFn, R: BinaryFn<M::Out>> MapReduce<M, R, M::Elems> {
    /// A MapReduce of `map` then `reduce`.
    pub fn new(map: M, reduce: R) -> Self {
        MapReduce {
            map,
            reduce,
            start: None,
            uniforms: None,
            options: Options::default(),
            elems: PhantomData,
            arrays: (),
        }
    }
}

impl<M: ElementwiseFn, R: BinaryFn<M::Out>, E, A> MapReduce<M, R, E, A>
where
    M::Out: Default,
{
    /// The value the fold starts from (default `T::default()`).
    pub fn start(mut self, start: M::Out) -> Self {
        self.start = Some(start);
        self
    }

    /// Binds the map function's `#[uniform]` parameters.
    pub fn uniforms(mut self, uniforms: M::Uniforms) -> Self {
        self.uniforms = Some(uniforms);
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

    fn execute<'a, I>(&self, inputs: I) -> Result<M::Out>
    where
        I: ArgTuple<'a, Elems = M::Elems>,
        A: BindArrays<M::Arrays>,
    {
        self.options.validate()?;
        let uniforms = uniforms_or_missing(M::NAME, &self.uniforms)?;
        let shapes = inputs.shapes();
        let plan = plan::MapReduce::<(M, R, I)> {
            arrays: self.arrays.bind(),
            inputs,
            // The first input's shape, which `checks` confirm is every input's (`run` takes
            // at least one input).
            shape: shapes.first().copied().unwrap_or(Shape::Vector(0)),
            uniforms,
            start: self.start.unwrap_or_default(),
        };
        backends::map_reduce(self.options, &self.arrays, plan, |plan| {
            check_arrays(
                "MapReduce",
                M::NAME,
                M::Arrays::KINDS,
                &plan.arrays.shapes(),
            )?;
            check_inputs("MapReduce", &shapes, plan.shape)?;
            check_index_dims(
                "MapReduce",
                M::NAME,
                <M::Index as IndexKind>::DIMS,
                plan.shape,
            )
        })
    }
}

macro_rules! map_reduce_run {
    ($(($($t:ident $a:ident),+))*) => {$(
        impl<M, R, Bound, $($t: DeviceType),+> MapReduce<M, R, ($($t,)+), Bound>
        where
            M: ElementwiseFn<Elems = ($($t,)+)>,
            M::Out: Default,
            R: BinaryFn<M::Out>,
            Bound: BindArrays<M::Arrays>,
        {
            /// Runs the fused map and reduce over inputs of one shape.
            pub fn run(&self, $($a: &impl Input<$t>),+) -> Result<M::Out> {
                self.execute(($($a.arg(),)+))
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
