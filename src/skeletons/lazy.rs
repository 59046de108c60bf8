//! Lazy composition: `Map::new(f).lazy(&x)` is an input that every skeleton accepts
//! wherever it accepts a container, evaluated when the consumer runs.
//!
//! [`Source`] is what a skeleton's `run` takes for each element input: every container and
//! view (anything that is an [`Input`]) and every [`Lazy`] map. A consumer turns each source
//! into an operand with [`Source::resolve`] before it builds its plan.
//!
//! A Map or MapReduce consumer evaluates its lazy inputs per element, so that the
//! intermediates never exist: the host backends' loops call the producers' functions
//! (`LazyOp`), and the CUDA and OpenCL kernels hold the producers' user functions as
//! device functions and read each lazy input as the call chain on the producers' own
//! operands (`backends::chain`; one kernel per consumer and chain, cached). On the GPUs the
//! consumer's `checked` setting applies to the whole chain. A Reduce (`run`, `run_into`,
//! `run_rows`, `run_cols`) of a lazy input on CUDA or OpenCL runs as the MapReduce of the
//! producer's function and the Reduce's, grouped as the Reduce groups materialised values
//! ([`Source::fold`]); on the host backends a Reduce `run_rows` of one folds each row as
//! it maps it (`Execute::map_reduce_axis`). Other consumers (the other Reduce calls on the
//! host backends, Scan, Filter, MapArray,
//! MapOverlap) and calls on `Auto` get each lazy input materialised into
//! a temporary by the consumer's backend (the backend named on the consumer, else the one
//! named on the lazy Map, else the default) immediately before they run, reused from call
//! to call. Either way the result is bit-identical to materialising the intermediate by
//! hand and running the consumer on the same backend (no contraction into FMAs anywhere).

use std::any::Any;
use std::ops::Range;
use std::sync::{Mutex, PoisonError};

use super::{check_arrays, check_index_dims, check_inputs};
use crate::backends::ContainerOps;
use crate::containers::{Arg, Input, Shape};
#[cfg(feature = "mpi")]
use crate::dist::Spread;
use crate::plan::{ArgTuple, ArgVisitor, HostAt, HostSlices, Operand};
use crate::userfn::{BindArrays, ContainerArgs, ElementwiseFn, IndexKind, UniformTuple};
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

    /// The operand a host backend's loop reads: the container, or the lazy Map's
    /// function over its own operands, evaluated per element.
    #[doc(hidden)]
    type Operand<'s>: Operand<'s, Elem = T>
    where
        Self: 's;

    /// [`Source::Operand`] for one call; `Err` where the lazy Map's own operands do not
    /// fit it (shapes, container kinds, uniforms not bound).
    #[doc(hidden)]
    fn operand(&self) -> Result<Self::Operand<'_>>;

    /// Whether this is a lazy Map (a consumer asks where its call runs only then).
    #[doc(hidden)]
    fn is_lazy(&self) -> bool {
        true
    }

    /// `reduce` folded over this source's values, delivered as `to` says, in one pass that
    /// evaluates the producer chain per element (the MapReduce of the lazy Map's function
    /// and `reduce`'s, grouped as `reduce` groups materialised values). `Ok(None)` where
    /// the result was written to `to`'s container. A container (not lazy) has nothing to
    /// fuse: the consumer runs it as it is (`Err` here, never reached by the skeletons).
    #[doc(hidden)]
    fn fold<R: crate::backends::BinaryFn<T>>(
        &self,
        reduce: &crate::Reduce<R, T>,
        to: FoldTo<'_, T>,
    ) -> Result<Option<T>> {
        let _ = (reduce, to);
        Err(crate::Error::InvalidArgument(
            "internal: a fused fold of an input that is not lazy".into(),
        ))
    }
}

/// Where a fused fold of a lazy input ([`Source::fold`]) delivers its result.
#[doc(hidden)]
#[derive(Debug)]
pub enum FoldTo<'o, T: DeviceType> {
    /// Returned (`Reduce::run`).
    Value,
    /// Written to element 0 of a one-element container (`run_into`).
    Into(crate::containers::ArgMut<'o, T>),
    /// One result per row (`run_rows`).
    Rows(crate::containers::ArgMut<'o, T>),
    /// One result per column (`run_cols`).
    Cols(crate::containers::ArgMut<'o, T>),
}

impl<T: DeviceType, X: Input<T> + ?Sized> Source<T> for X {
    fn shape(&self) -> Shape {
        self.arg().shape()
    }

    #[inline]
    fn resolve(&self, _: Option<Backend>) -> Result<Resolved<'_, T>> {
        Ok(Resolved::Borrowed(self.arg()))
    }

    type Operand<'s>
        = Arg<'s, T>
    where
        Self: 's;

    #[inline]
    fn operand(&self) -> Result<Arg<'_, T>> {
        Ok(self.arg())
    }

    #[inline]
    fn is_lazy(&self) -> bool {
        false
    }
}

/// A source made into an operand: the container itself, or a temporary that holds a lazy
/// Map's values for the length of one call (taken from [`Spares`] and given back to it).
#[doc(hidden)]
pub enum Resolved<'s, T: DeviceType> {
    /// A container or view, borrowed.
    Borrowed(Arg<'s, T>),
    /// A lazy vector's values.
    Vector(Vector<T>),
    /// A lazy matrix's values.
    Matrix(Matrix<T>),
    /// A lazy tensor's values.
    Tensor3(crate::Tensor3<T>),
}

impl<T: DeviceType> Drop for Resolved<'_, T> {
    fn drop(&mut self) {
        let spare: Box<dyn Any + Send> = match self {
            Resolved::Borrowed(_) => return,
            Resolved::Vector(v) => Box::new(std::mem::replace(v, Vector::scratch(0))),
            Resolved::Matrix(m) => Box::new(std::mem::replace(m, Matrix::scratch(0, 0))),
            Resolved::Tensor3(t) => {
                Box::new(std::mem::replace(t, crate::Tensor3::scratch((0, 0, 0))))
            }
        };
        Spares::give_back(spare);
    }
}

/// Temporaries of lazy Maps kept for the next call of the same element type and shape: a
/// fresh one per call would allocate, fault in and (on a GPU) place the whole intermediate
/// every time, where a reused one is already where the last call wrote it. At most
/// [`Spares::KEPT`] are kept, the oldest dropped first.
struct Spares;

static SPARES: Mutex<Vec<Box<dyn Any + Send>>> = Mutex::new(Vec::new());

impl Spares {
    const KEPT: usize = 4;

    fn take<C: Any>(fits: impl Fn(&C) -> bool) -> Option<C> {
        let mut spares = SPARES.lock().unwrap_or_else(PoisonError::into_inner);
        let at = spares
            .iter()
            .position(|s| s.downcast_ref::<C>().is_some_and(&fits))?;
        spares.remove(at).downcast::<C>().ok().map(|c| *c)
    }

    fn give_back(spare: Box<dyn Any + Send>) {
        let mut spares = SPARES.lock().unwrap_or_else(PoisonError::into_inner);
        if spares.len() == Self::KEPT {
            spares.remove(0);
        }
        spares.push(spare);
    }

    fn vector<T: DeviceType>(n: usize) -> Vector<T> {
        Self::take(|v: &Vector<T>| v.len() == n).unwrap_or_else(|| Vector::scratch(n))
    }

    fn matrix<T: DeviceType>(rows: usize, cols: usize) -> Matrix<T> {
        Self::take(|m: &Matrix<T>| (m.rows(), m.cols()) == (rows, cols))
            .unwrap_or_else(|| Matrix::scratch(rows, cols))
    }

    fn tensor3<T: DeviceType>(dims: (usize, usize, usize)) -> crate::Tensor3<T> {
        Self::take(|t: &crate::Tensor3<T>| t.dims() == dims)
            .unwrap_or_else(|| crate::Tensor3::scratch(dims))
    }
}

impl<T: DeviceType> Resolved<'static, T> {
    /// A temporary of `shape` for one call (taken from [`Spares`], given back on drop): where
    /// an executor materialises a lazy input itself.
    pub(crate) fn scratch(shape: Shape) -> Self {
        match shape {
            Shape::Vector(n) => Resolved::Vector(Spares::vector(n)),
            Shape::Matrix { rows, cols } => Resolved::Matrix(Spares::matrix(rows, cols)),
            Shape::Tensor3 { d0, d1, d2 } => Resolved::Tensor3(Spares::tensor3((d0, d1, d2))),
        }
    }
}

impl<T: DeviceType> Resolved<'_, T> {
    /// The temporary as a written operand (`Err` for a borrowed container, which is not
    /// this call's to write).
    pub(crate) fn arg_mut(&mut self) -> Result<crate::containers::ArgMut<'_, T>> {
        use crate::containers::Output;
        match self {
            Resolved::Borrowed(_) => Err(crate::Error::InvalidArgument(
                "internal: a borrowed input is not a temporary".into(),
            )),
            Resolved::Vector(v) => Ok(v.arg_mut()),
            Resolved::Matrix(m) => Ok(m.arg_mut()),
            Resolved::Tensor3(t) => Ok(t.arg_mut()),
        }
    }

    /// The operand a plan borrows.
    #[inline]
    pub fn arg(&self) -> Arg<'_, T> {
        match self {
            Resolved::Borrowed(a) => *a,
            Resolved::Vector(v) => v.arg(),
            Resolved::Matrix(m) => m.arg(),
            Resolved::Tensor3(t) => t.arg(),
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

/// A lazy Map as the operand of a host backend's loop: its function over its own operands
/// (containers or other lazy Maps), container arguments and uniforms.
#[doc(hidden)]
pub struct LazyOp<'a, F: ElementwiseFn, I> {
    inputs: I,
    arrays: ContainerOps<'a, F>,
    uniforms: &'a F::Uniforms,
    /// The consumer's element index of this operand's element 0 (a sub-range starts later).
    first: usize,
    shape: Shape,
    /// The columns of the whole operand, for a 2D `#[index]`.
    cols: usize,
}

impl<F: ElementwiseFn, I: Copy> Clone for LazyOp<'_, F, I> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<F: ElementwiseFn, I: Copy> Copy for LazyOp<'_, F, I> {}

impl<'a, F, I> Operand<'a> for LazyOp<'a, F, I>
where
    F: ElementwiseFn,
    I: ArgTuple<'a, Elems = F::Elems>,
{
    type Elem = F::Out;
    type Host = LazyHost<'a, F, I::Host>;

    fn shape(&self) -> Shape {
        self.shape
    }

    fn host(&self) -> Result<Self::Host> {
        Ok(LazyHost {
            inputs: self.inputs.host()?,
            arrays: <F::Arrays as ContainerArgs>::refs(self.arrays.host()?, &self.arrays.shapes()),
            uniforms: self.uniforms,
            first: self.first,
            cols: self.cols,
        })
    }

    fn visit<V: ArgVisitor>(&self, v: &mut V) -> Result<()> {
        if !v.chain(F::definition()) {
            self.inputs.visit(v)?;
            return self.arrays.visit(v);
        }
        self.inputs.visit(v)?;
        self.arrays.visit(&mut AsArrays(&mut *v))?;
        self.uniforms.for_each_bytes(&mut |b| v.uniform(b));
        v.chain_end();
        Ok(())
    }

    /// Never distributed: `operand` refuses a lazy Map over a distributed container.
    #[cfg(feature = "mpi")]
    fn spread(&self) -> Option<Spread> {
        None
    }

    fn sub(&self, range: Range<usize>) -> Self {
        LazyOp {
            inputs: self.inputs.sub(range.clone()),
            first: self.first + range.start,
            shape: Shape::Vector(range.len()),
            ..*self
        }
    }
}

/// Hands a chain's container arguments to [`ArgVisitor::array`].
struct AsArrays<'v, V>(&'v mut V);

impl<V: ArgVisitor> ArgVisitor for AsArrays<'_, V> {
    fn visit<T: DeviceType>(&mut self, arg: Arg<'_, T>) -> Result<()> {
        self.0.array(arg)
    }
}

/// The host view of a [`LazyOp`]: element `i` is the function at the consumer's element
/// `first + i`.
#[doc(hidden)]
pub struct LazyHost<'a, F: ElementwiseFn, H> {
    inputs: H,
    arrays: <F::Arrays as ContainerArgs>::Refs<'a>,
    uniforms: &'a F::Uniforms,
    first: usize,
    cols: usize,
}

impl<F: ElementwiseFn, H: Copy> Clone for LazyHost<'_, F, H> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<F: ElementwiseFn, H: Copy> Copy for LazyHost<'_, F, H> {}

impl<F: ElementwiseFn, H: HostSlices<Elems = F::Elems>> HostAt for LazyHost<'_, F, H> {
    type Elem = F::Out;

    #[inline(always)]
    fn at(&self, i: usize) -> F::Out {
        F::apply_with(
            F::Index::from_flat(self.first + i, self.cols),
            self.arrays,
            self.inputs.at(i),
            self.uniforms,
        )
    }

    #[inline(always)]
    fn at_cell(&self, i: usize, cell: (usize, usize)) -> F::Out {
        F::apply_with(
            F::Index::from_parts(self.first + i, cell, self.cols),
            self.arrays,
            self.inputs.at_cell(i, cell),
            self.uniforms,
        )
    }

    #[inline(always)]
    fn slice(&self, range: Range<usize>) -> Self {
        LazyHost {
            inputs: self.inputs.slice(range.clone()),
            first: self.first + range.start,
            ..*self
        }
    }
}

/// A lazy Map over a distributed container would read this rank's block as if it were the
/// whole operand: refused with an error rather than a wrong answer.
#[cfg(feature = "mpi")]
fn refuse_distributed<'a>(inputs: &impl ArgTuple<'a>) -> Result<()> {
    if inputs.any_distributed() {
        return Err(crate::Error::InvalidArgument(
            "a lazy Map over a distributed container (skel::dist) is not supported: \
             run the Map into a distributed container first"
                .into(),
        ));
    }
    Ok(())
}

#[cfg(not(feature = "mpi"))]
fn refuse_distributed<'a>(_: &impl ArgTuple<'a>) -> Result<()> {
    Ok(())
}

macro_rules! lazy_sources {
    ($(($($t:ident $x:ident $i:tt),+))*) => {$(
        impl<'l, F, Bound, $($t: DeviceType, $x: Source<$t>),+> Source<F::Out>
            for Lazy<'l, F, ($(&'l $x,)+), Bound>
        where
            F: ElementwiseFn<Elems = ($($t,)+)>,
            Bound: BindArrays<F::Arrays> + Clone,
        {
            fn shape(&self) -> Shape {
                self.inputs.0.shape()
            }

            type Operand<'s>
                = LazyOp<'s, F, ($($x::Operand<'s>,)+)>
            where
                Self: 's;

            fn operand(&self) -> Result<Self::Operand<'_>> {
                let inputs = ($(self.inputs.$i.operand()?,)+);
                let arrays = self.map.bound_arrays().bind();
                let uniforms = self.map.bound_uniforms()?;
                let shape = self.shape();
                // The checks the producer's own `run` makes.
                check_arrays("lazy Map", F::NAME, F::Arrays::KINDS, &arrays.shapes())?;
                check_inputs("lazy Map", &inputs.shapes(), shape)?;
                check_index_dims("lazy Map", F::NAME, <F::Index as IndexKind>::DIMS, shape)?;
                refuse_distributed(&inputs)?;
                Ok(LazyOp {
                    inputs,
                    arrays,
                    uniforms,
                    first: 0,
                    shape,
                    cols: shape.cols(),
                })
            }

            fn fold<R: crate::backends::BinaryFn<F::Out>>(
                &self,
                reduce: &crate::Reduce<R, F::Out>,
                to: FoldTo<'_, F::Out>,
            ) -> Result<Option<F::Out>> {
                crate::MapReduce::of_lazy(&self.map, reduce)?.fold_to($(self.inputs.$i,)+ to)
            }

            fn resolve(&self, backend: Option<Backend>) -> Result<Resolved<'_, F::Out>> {
                let map = match backend {
                    Some(b) => self.map.clone().backend(b),
                    None => self.map.clone(),
                };
                // The producer's own checks (every input of one shape) run in `map.run`.
                Ok(match self.shape() {
                    Shape::Vector(n) => {
                        let mut v = Spares::vector(n);
                        map.run($(self.inputs.$i,)+ &mut v)?;
                        Resolved::Vector(v)
                    }
                    Shape::Matrix { rows, cols } => {
                        let mut m = Spares::matrix(rows, cols);
                        map.run($(self.inputs.$i,)+ &mut m)?;
                        Resolved::Matrix(m)
                    }
                    Shape::Tensor3 { d0, d1, d2 } => {
                        let mut t = Spares::tensor3((d0, d1, d2));
                        map.run($(self.inputs.$i,)+ &mut t)?;
                        Resolved::Tensor3(t)
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
