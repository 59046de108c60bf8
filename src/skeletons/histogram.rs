//! Histogram: `counts[b] = #{x : bin(x) == b}`, the bin computed by a user function.

use std::marker::PhantomData;

use super::{
    check_arrays, check_index_dims, check_inputs, common_options, uniforms_or_missing, Options,
};
use crate::backends;
use crate::containers::{Input, Output, Shape};
use crate::plan::{self, ArgTuple};
use crate::userfn::{BindArrays, ContainerArgs, ElementwiseFn, IndexKind, UserFn};
use crate::{DeviceType, Error, Result};

/// The element type of a histogram's counts: `u32` or `u64`.
///
/// `u32` counts wrap modulo 2^32 on every backend (a bin that receives 2^32 elements or
/// more in one call); `u64` counts do not wrap in practice.
pub trait Count: DeviceType + sealed::Sealed {
    /// The count `n`, wrapped to the type's width.
    fn from_u64(n: u64) -> Self;
}

impl Count for u32 {
    fn from_u64(n: u64) -> Self {
        n as u32
    }
}

impl Count for u64 {
    fn from_u64(n: u64) -> Self {
        n
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for u64 {}
}

/// Counts the elements of the inputs per bin: `counts[b]` becomes the number of positions
/// `i` where `bin(inputs[i]..) == b` (SkePU has no Histogram; this is CUB's
/// `DeviceHistogram` with the bin computed by a user function).
///
/// The user function returns the bin as a `u32` and takes what a [`crate::Map`]'s does:
/// one element per input (1..=4 inputs of one shape, vectors or matrices), optionally an
/// `#[index]` first, container arguments (`.arrays(..)`) and `#[uniform]` parameters.
/// `counts` (a `Vector<u32>` or `Vector<u64>`, see [`Count`]) is **overwritten**, as a
/// SkePU user expects of an output: its length is the number of bins, and its old values
/// play no part. A bin outside `0..counts.len()` is not counted; a checked call
/// (`.checked(true)`) returns [`Error::UserFunction`] naming the function instead and
/// leaves `counts` as it was. An empty `counts` is [`Error::InvalidArgument`].
///
/// The CPU backends count per thread and merge; the GPU backends count into sub-histograms
/// in shared (local) memory where the bins fit, merged by a second kernel, and with global
/// atomics where they do not. Counts are integers, so every backend gives the same answer.
///
/// ```
/// use skel::prelude::*;
///
/// #[userfn]
/// fn decade(x: u32) -> u32 { x / 10 }
///
/// let v = Vector::from(vec![3u32, 14, 15, 92, 65, 35, 8]);
/// let mut counts = Vector::filled(10, 7u32); // old values are overwritten
/// Histogram::new(decade).run(&v, &mut counts)?;
/// assert_eq!(counts.to_vec(), vec![2, 2, 0, 1, 0, 0, 1, 0, 0, 1]);
///
/// // 92 falls in bin 9, outside a histogram of 5 bins: not counted, or an error when checked.
/// let mut few = Vector::<u64>::zeroed(5);
/// Histogram::new(decade).checked(false).run(&v, &mut few)?;
/// assert_eq!(few.to_vec(), vec![2, 2, 0, 1, 0]);
/// let err = Histogram::new(decade).checked(true).run(&v, &mut few).unwrap_err();
/// assert!(matches!(err, Error::UserFunction { .. }), "{err}");
/// # Ok::<(), skel::Error>(())
/// ```
#[must_use = "a skeleton does nothing until one of its `run` methods is called"]
#[derive(Clone, Copy, Debug)]
pub struct Histogram<F: ElementwiseFn, E = <F as ElementwiseFn>::Elems, A = ()> {
    f: F,
    uniforms: Option<F::Uniforms>,
    options: Options,
    elems: PhantomData<fn() -> E>,
    arrays: A,
}

impl<F: ElementwiseFn + UserFn<Out = u32>> Histogram<F, F::Elems> {
    /// A Histogram whose bins `bin` computes.
    pub fn new(bin: F) -> Self {
        Histogram {
            f: bin,
            uniforms: None,
            options: Options::default(),
            elems: PhantomData,
            arrays: (),
        }
    }
}

impl<F: ElementwiseFn + UserFn<Out = u32>, E, A> Histogram<F, E, A> {
    /// Binds the `#[uniform]` parameters, as a tuple in declaration order.
    pub fn uniforms(
        mut self,
        uniforms: <F::Uniforms as crate::userfn::UniformTuple>::User,
    ) -> Self {
        self.uniforms = Some(crate::userfn::UniformTuple::from_user(uniforms));
        self
    }

    /// Binds the container parameters (`Mat<T>`, `&[T]`), in declaration order, as for
    /// [`crate::Map::arrays`].
    ///
    /// ```
    /// use skel::prelude::*;
    ///
    /// #[userfn]
    /// fn nearest(x: f32, edges: &[f32]) -> u32 {
    ///     let mut b = 0u32;
    ///     for k in 0..edges.len() {
    ///         if x >= edges[k] { b = k as u32; }
    ///     }
    ///     b
    /// }
    ///
    /// let edges = Vector::from(vec![0.0f32, 1.0, 10.0]);
    /// let x = Vector::from(vec![0.5f32, 2.0, 3.0, 20.0]);
    /// let mut counts = Vector::<u32>::zeroed(3);
    /// Histogram::new(nearest).arrays((&edges,)).run(&x, &mut counts)?;
    /// assert_eq!(counts.to_vec(), vec![1, 2, 1]);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn arrays<B: BindArrays<F::Arrays>>(self, arrays: B) -> Histogram<F, E, B> {
        Histogram {
            f: self.f,
            uniforms: self.uniforms,
            options: self.options,
            elems: PhantomData,
            arrays,
        }
    }

    common_options!();

    /// The user function.
    pub fn function(&self) -> F {
        self.f
    }

    fn execute<'a, I, C: Count>(&self, inputs: I, counts: &mut impl Output<C>) -> Result<()>
    where
        I: ArgTuple<'a, Elems = F::Elems>,
        A: BindArrays<F::Arrays>,
    {
        self.options.validate()?;
        let uniforms = &uniforms_or_missing(F::NAME, &self.uniforms, &self.options)?;
        let shapes = inputs.shapes();
        let plan = plan::Histogram::<(F, I, C)> {
            arrays: self.arrays.bind(),
            inputs,
            // The first input's shape, which `checks` confirm is every input's (`run` takes
            // at least one input).
            shape: shapes.first().copied().unwrap_or(Shape::Vector(0)),
            counts: counts.arg_mut(),
            uniforms,
        };
        backends::histogram(self.options, plan, |plan| {
            check_arrays(
                "Histogram",
                F::NAME,
                F::Arrays::KINDS,
                &plan.arrays.shapes(),
            )?;
            check_inputs("Histogram", &shapes, plan.shape)?;
            check_index_dims(
                "Histogram",
                F::NAME,
                <F::Index as IndexKind>::DIMS,
                plan.shape,
            )?;
            match plan.counts.shape() {
                Shape::Vector(0) => Err(Error::InvalidArgument(format!(
                    "Histogram of `{}`: the counts vector is empty; its length is the \
                     number of bins",
                    F::NAME
                ))),
                Shape::Vector(b) if b > u32::MAX as usize => Err(Error::InvalidArgument(format!(
                    "Histogram of `{}`: {b} bins; bins are u32, at most {}",
                    F::NAME,
                    u32::MAX
                ))),
                Shape::Vector(_) => Ok(()),
                other => Err(Error::shape(
                    "Histogram counts (one vector, one element per bin)",
                    "a vector",
                    other,
                )),
            }
        })
    }
}

macro_rules! histogram_run {
    ($(($($t:ident $a:ident),+))*) => {$(
        impl<F, Bound, $($t: DeviceType),+> Histogram<F, ($($t,)+), Bound>
        where
            F: ElementwiseFn<Elems = ($($t,)+)> + UserFn<Out = u32>,
            Bound: BindArrays<F::Arrays>,
        {
            /// Counts the inputs (one per element parameter, all of one shape) per bin into
            /// `counts` (`u32` or `u64`), which is overwritten; its length is the number
            /// of bins.
            pub fn run<N: Count>(&self, $($a: &impl Input<$t>,)+ counts: &mut impl Output<N>) -> Result<()> {
                self.execute(($($a.arg(),)+), counts)
            }
        }
    )*};
}

histogram_run! {
    (A a)
    (A a, B b)
    (A a, B b, C c)
    (A a, B b, C c, D d)
}
