//! Map: `out[i] = f(a[i], b[i], ..)`, with an optional index and uniforms.

use std::marker::PhantomData;

use super::lazy::{Lazy, Source};
use super::{
    check_arrays, check_index_dims, check_inputs, common_options, uniforms_or_missing, Options,
};
use crate::backends;
use crate::containers::{OutArgs, Outputs};
use crate::plan::{self, ArgTuple};
use crate::userfn::{BindArrays, ContainerArgs, ElementwiseFn, IndexKind};
use crate::{DeviceType, Result};

/// Applies a user function element-wise to 0..=4 inputs of one shape.
///
/// `E` is the tuple of the function's element types; it picks the `run` of the right arity
/// and is always inferred.
///
/// ```
/// use skel::prelude::*;
///
/// #[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
/// #[repr(C)]
/// struct Pixel { r: f32, g: f32, b: f32 }
///
/// #[userfn]
/// fn luma(px: Pixel, #[uniform] w: Pixel) -> f32 { w.r * px.r + w.g * px.g + w.b * px.b }
///
/// #[userfn]
/// fn iota(#[index] i: usize) -> u32 { i as u32 }
///
/// let img = Vector::filled(4, Pixel { r: 1.0, g: 1.0, b: 1.0 });
/// let mut grey = Vector::zeroed(4);
/// let weights = Pixel { r: 0.25, g: 0.5, b: 0.25 };
/// Map::new(luma).uniforms((weights,)).run(&img, &mut grey)?;
/// assert_eq!(grey.to_vec(), vec![1.0; 4]);
///
/// let mut ids = Vector::zeroed(5);
/// Map::new(iota).backend(Backend::Cpu).run_index(&mut ids)?;
/// assert_eq!(ids.to_vec(), vec![0, 1, 2, 3, 4]);
/// # Ok::<(), skel::Error>(())
/// ```
#[must_use = "a skeleton does nothing until one of its `run` methods is called"]
#[derive(Clone, Copy, Debug)]
pub struct Map<F: ElementwiseFn, E = <F as ElementwiseFn>::Elems, A = ()> {
    f: F,
    uniforms: Option<F::Uniforms>,
    options: Options,
    elems: PhantomData<fn() -> E>,
    arrays: A,
}

impl<F: ElementwiseFn> Map<F, F::Elems> {
    /// A Map of `f`.
    pub fn new(f: F) -> Self {
        Map {
            f,
            uniforms: None,
            options: Options::default(),
            elems: PhantomData,
            arrays: (),
        }
    }
}

impl<F: ElementwiseFn, E, A> Map<F, E, A> {
    /// Binds the `#[uniform]` parameters, as a tuple in declaration order.
    pub fn uniforms(
        mut self,
        uniforms: <F::Uniforms as crate::userfn::UniformTuple>::User,
    ) -> Self {
        self.uniforms = Some(crate::userfn::UniformTuple::from_user(uniforms));
        self
    }

    /// Binds the container parameters (`Mat<T>`, `&[T]`), as a tuple of references in
    /// declaration order: a `Matrix` for each `Mat<T>`, a `Vector` or vector view for each
    /// `&[T]`. Every element of the call reads them whole; they are uploaded once per call
    /// (nothing if already on the device) and never written. A container of the wrong kind
    /// is a `ShapeMismatch` when the Map runs.
    ///
    /// ```
    /// use skel::prelude::*;
    ///
    /// #[userfn]
    /// fn mv(#[index] i: usize, m: Mat<f32>, x: &[f32]) -> f32 {
    ///     let mut s = 0.0;
    ///     for j in 0..m.cols() {
    ///         s += m[(i, j)] * x[j];
    ///     }
    ///     s
    /// }
    ///
    /// let a = Matrix::from_fn(3, 2, |r, c| (r * 2 + c) as f32);
    /// let x = Vector::from(vec![1.0f32, 10.0]);
    /// let mut y = Vector::zeroed(a.rows());
    /// Map::new(mv).arrays((&a, &x)).run_index(&mut y)?;
    /// assert_eq!(y.to_vec(), vec![10.0, 32.0, 54.0]);
    ///
    /// // A vector where the function takes a matrix is an error, not a guess.
    /// let err = Map::new(mv).arrays((&x, &x)).run_index(&mut y).unwrap_err();
    /// assert!(err.to_string().contains("Mat<T>"), "{err}");
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn arrays<B: BindArrays<F::Arrays>>(self, arrays: B) -> Map<F, E, B> {
        Map {
            f: self.f,
            uniforms: self.uniforms,
            options: self.options,
            elems: PhantomData,
            arrays,
        }
    }

    common_options!();

    /// The bound uniforms, or the error that they are missing.
    /// (A lazy Map's are bound and seeded when `.lazy` makes it, see [`Map::seeded`].)
    pub(super) fn bound_uniforms(&self) -> Result<&F::Uniforms> {
        self.uniforms
            .as_ref()
            .ok_or_else(|| super::missing_uniforms(F::NAME))
    }

    /// This Map with its uniforms bound (`()` where it has none) and carrying its seed.
    fn seeded(mut self) -> Self {
        if let Ok(u) = uniforms_or_missing(F::NAME, &self.uniforms, &self.options) {
            self.uniforms = Some(u);
        }
        self
    }

    /// The `.seed(..)` given, if any (a fold of this Map, lazy, draws with it).
    pub(super) fn seed_given(&self) -> Option<u64> {
        self.options.seed
    }

    /// The bound container arguments.
    pub(super) fn bound_arrays(&self) -> &A {
        &self.arrays
    }

    /// The user function.
    pub fn function(&self) -> F {
        self.f
    }

    /// This Map with another skeleton's options (a skeleton built on a Map, as
    /// `Sort::by_key` or a MapReduce over a lazy input, runs it where and how it runs
    /// itself).
    pub(crate) fn with_options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    fn execute<'a, I>(&self, inputs: I, out: &mut impl Outputs<F::Out>) -> Result<()>
    where
        I: ArgTuple<'a, Elems = F::Elems>,
        A: BindArrays<F::Arrays>,
    {
        self.options.validate()?;
        let uniforms = &uniforms_or_missing(F::NAME, &self.uniforms, &self.options)?;
        let plan = plan::Map::<(F, I, _)> {
            arrays: self.arrays.bind(),
            inputs,
            out: out.args_mut(),
            uniforms,
        };
        backends::map(self.options, &self.arrays, plan, |plan| {
            check_arrays("Map", F::NAME, F::Arrays::KINDS, &plan.arrays.shapes())?;
            let shape = plan.out.shape("Map")?;
            check_inputs("Map", &plan.inputs.shapes(), shape)?;
            check_index_dims("Map", F::NAME, <F::Index as IndexKind>::DIMS, shape)
        })
    }
}

impl<F: ElementwiseFn<Elems = ()>, A: BindArrays<F::Arrays>> Map<F, (), A> {
    /// Runs a function with no element parameters, only `#[index]` (and uniforms), over
    /// every position of `out` (one output, or a tuple of `&mut` outputs, see
    /// [`Outputs`]).
    pub fn run_index(&self, out: &mut impl Outputs<F::Out>) -> Result<()> {
        self.execute((), out)
    }
}

macro_rules! map_run {
    ($(($($t:ident $a:ident $x:ident),+))*) => {$(
        impl<F, Bound, $($t: DeviceType),+> Map<F, ($($t,)+), Bound>
        where
            F: ElementwiseFn<Elems = ($($t,)+)>,
            Bound: BindArrays<F::Arrays>,
        {
            /// Runs the map: one input per element parameter, then the output: one container
            /// or view, or for a function returning a tuple also a tuple of `&mut`
            /// containers or views, one per element ([`Outputs`]). All operands have one
            /// shape (vectors of one length, or matrices of one size).
            ///
            /// An input may be a [`Lazy`] Map (`Map::new(g).lazy(..)`), evaluated for this
            /// call.
            pub fn run(&self, $($a: &impl Source<$t>,)+ out: &mut impl Outputs<F::Out>) -> Result<()> {
                if ($($a.is_lazy())||+) && backends::fuses_lazy_inputs(&self.options) {
                    return self.execute(($($a.operand()?,)+), out);
                }
                $(let $a = $a.resolve(self.options.backend)?;)+
                self.execute(($($a.arg(),)+), out)
            }

            /// This Map as an input of another skeleton call: the same operands as `run`
            /// without the output. Nothing runs now; the consumer evaluates it for its own
            /// call, so the result is the one of materialising it first and running the
            /// consumer on the same backend. `#[index]` is the consumer's element index.
            /// Operands may themselves be lazy (chains of any length); container arguments
            /// and uniforms bound before `.lazy` go with it.
            ///
            /// ```
            /// use skel::prelude::*;
            /// #[userfn]
            /// fn inc(x: f32) -> f32 { x + 1.0 }
            /// #[userfn]
            /// fn mul(a: f32, b: f32) -> f32 { a * b }
            /// #[userfn]
            /// fn add(a: f32, b: f32) -> f32 { a + b }
            /// let x = Vector::from(vec![1.0f32, 2.0, 3.0]);
            /// let t = Map::new(inc).lazy(&x);              // nothing runs
            /// let u = Map::new(inc).lazy(&t);
            /// let mut o = Vector::zeroed(3);
            /// Map::new(mul).run(&u, &x, &mut o)?;           // o[i] = (x[i] + 2) * x[i]
            /// assert_eq!(o.to_vec(), vec![3.0, 8.0, 15.0]);
            /// assert_eq!(Reduce::new(add).run(&u)?, 12.0);
            /// # Ok::<(), skel::Error>(())
            /// ```
            pub fn lazy<'l, $($x: Source<$t>),+>(&self, $($a: &'l $x),+) -> Lazy<'l, F, ($(&'l $x,)+), Bound>
            where
                Bound: Clone,
            {
                Lazy {
                    map: self.clone().seeded(),
                    inputs: ($($a,)+),
                    _borrow: std::marker::PhantomData,
                }
            }
        }
    )*};
}

map_run! {
    (A a XA)
    (A a XA, B b XB)
    (A a XA, B b XB, C c XC)
    (A a XA, B b XB, C c XC, D d XD)
}
