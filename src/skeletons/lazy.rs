//! Lazy composition: `Map::new(f).lazy(&x)` is an input that every skeleton accepts
//! wherever it accepts a container, evaluated when the consumer runs.
//!
//! [`Source`] is what a skeleton's `run` takes for each element input: every container and
//! view (anything that is an [`Input`]) and every [`Lazy`] map. A consumer turns each source
//! into an operand with [`Source::resolve`] before it builds its plan.
//!
//! Today a lazy input is materialised into a temporary container by the consumer's
//! backend (the backend named on the consumer, else the one named on the lazy Map, else
//! the default) immediately before the consumer runs: the result is, by construction,
//! bit-identical to materialising the intermediate by hand and running the consumer on the
//! same backend. Evaluating the producer inside the consumer's pass (no temporary) is the
//! planned fast path; it changes no result and no signature.

use crate::containers::{Arg, Input, Shape};
use crate::userfn::{BindArrays, ElementwiseFn};
use crate::{Backend, DeviceType, Map, Matrix, Result, Vector};

/// An element input of a skeleton call: a container or view ([`Input`]), or a [`Lazy`] Map
/// that is evaluated when the consumer runs.
///
/// Every skeleton's `run` takes `&impl Source<T>` for each element input; users never
/// implement it.
///
/// ```
/// use skel::prelude::*;
/// use skel::containers::Source;
///
/// #[userfn]
/// fn sq(x: f32) -> f32 { x * x }
///
/// fn total(input: &impl Source<f32>) -> skel::Result<f32> {
///     #[userfn]
///     fn add(a: f32, b: f32) -> f32 { a + b }
///     Reduce::new(add).run(input)
/// }
/// let x = Vector::from(vec![1.0f32, 2.0, 3.0]);
/// assert_eq!(total(&x)?, 6.0);
/// assert_eq!(total(&Map::new(sq).lazy(&x))?, 14.0);
/// # Ok::<(), skel::Error>(())
/// ```
pub trait Source<T: DeviceType> {
    /// The shape of the operand this source stands for.
    fn shape(&self) -> Shape;

    /// The operand, for one call that runs on `backend` (`None`: the consumer names no
    /// backend). A lazy source evaluates its producer chain here.
    #[doc(hidden)]
    fn resolve(&self, backend: Option<Backend>) -> Result<Resolved<'_, T>>;
}

impl<T: DeviceType, X: Input<T> + ?Sized> Source<T> for X {
    fn shape(&self) -> Shape {
        self.arg().shape()
    }

    #[inline]
    fn resolve(&self, _: Option<Backend>) -> Result<Resolved<'_, T>> {
        Ok(Resolved::Borrowed(self.arg()))
    }
}

/// A source made into an operand: the container itself, or a temporary that holds a lazy
/// Map's values for the length of one call.
#[doc(hidden)]
pub enum Resolved<'s, T> {
    /// A container or view, borrowed.
    Borrowed(Arg<'s, T>),
    /// A lazy vector's values.
    Vector(Vector<T>),
    /// A lazy matrix's values.
    Matrix(Matrix<T>),
}

impl<T: DeviceType> Resolved<'_, T> {
    /// The operand a plan borrows.
    #[inline]
    pub fn arg(&self) -> Arg<'_, T> {
        match self {
            Resolved::Borrowed(a) => *a,
            Resolved::Vector(v) => v.arg(),
            Resolved::Matrix(m) => m.arg(),
        }
    }
}

/// A Map that has not run: `Map::new(f).lazy(&x, ..)`, an input of `f`'s result type for
/// any skeleton (see [`Map::lazy`](crate::Map)).
///
/// It borrows its operands (containers, views or other lazy Maps), its container arguments
/// and copies its uniforms; nothing runs until a consumer does, and then only for that
/// consumer. `#[index]` in the lazy Map's function is the index of the consumer's element.
#[must_use = "a lazy Map does nothing until a skeleton consumes it"]
pub struct Lazy<'l, F: ElementwiseFn, I, A = ()> {
    pub(crate) map: Map<F, F::Elems, A>,
    pub(crate) inputs: I,
    pub(crate) _borrow: std::marker::PhantomData<&'l ()>,
}

impl<F: ElementwiseFn, I: Clone, A: Clone> Clone for Lazy<'_, F, I, A> {
    fn clone(&self) -> Self {
        Lazy {
            map: self.map.clone(),
            inputs: self.inputs.clone(),
            _borrow: std::marker::PhantomData,
        }
    }
}

impl<F: ElementwiseFn, I, A> std::fmt::Debug for Lazy<'_, F, I, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lazy").field("map", &F::NAME).finish()
    }
}

macro_rules! lazy_sources {
    ($(($($t:ident $x:ident $i:tt),+))*) => {$(
        impl<'l, F, Bound, $($t: DeviceType, $x: Source<$t>),+> Source<F::Out>
            for Lazy<'l, F, ($(&'l $x,)+), Bound>
        where
            F: ElementwiseFn<Elems = ($($t,)+)>,
            F::Out: DeviceType + Default,
            Bound: BindArrays<F::Arrays> + Clone,
        {
            fn shape(&self) -> Shape {
                self.inputs.0.shape()
            }

            fn resolve(&self, backend: Option<Backend>) -> Result<Resolved<'_, F::Out>> {
                let map = match backend {
                    Some(b) => self.map.clone().backend(b),
                    None => self.map.clone(),
                };
                // The producer's own checks (every input of one shape) run in `map.run`.
                Ok(match self.shape() {
                    Shape::Vector(n) => {
                        let mut v = Vector::zeroed(n);
                        map.run($(self.inputs.$i,)+ &mut v)?;
                        Resolved::Vector(v)
                    }
                    Shape::Matrix { rows, cols } => {
                        let mut m = Matrix::zeroed(rows, cols);
                        map.run($(self.inputs.$i,)+ &mut m)?;
                        Resolved::Matrix(m)
                    }
                })
            }
        }
    )*};
}

lazy_sources! {
    (A XA 0)
    (A XA 0, B XB 1)
    (A XA 0, B XB 1, C XC 2)
    (A XA 0, B XB 1, C XC 2, D XD 3)
}
