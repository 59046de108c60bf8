//! MapPairs: `m[(i, j)] = f(v[i], h[j])` for every pair of a vertical and a horizontal
//! vector (SkePU 3's MapPairs).

use super::{
    check_arrays, check_index_dims, check_shape, common_options, uniforms_or_missing, Options,
};
use crate::backends;
use crate::containers::{Arg, Input, Output, Shape};
use crate::plan::{self, ArgTuple};
use crate::userfn::{BindArrays, ContainerArgs, ElementwiseFn, IndexKind};
use crate::{DeviceType, Error, Result};

/// Applies a user function `f(p: A, q: B) -> R` to every pair `(v[i], h[j])` of two vectors,
/// writing the `v.len() x h.len()` matrix of results.
///
/// The function may take `#[index] (row, col): (usize, usize)` first (the pair's position
/// in the output) and `#[uniform]` parameters last, bound with `.uniforms((..))`. `v` and `h`
/// are vectors or views; the output must be a `v.len() x h.len()` matrix, else
/// [`Error::ShapeMismatch`] naming both shapes, and nothing is written.
///
/// ```
/// use skel::prelude::*;
/// #[userfn]
/// fn abs_diff(p: f32, q: f32) -> f32 { (p - q).abs() }
/// #[userfn]
/// fn tagged(#[index] (row, col): (usize, usize), p: f32, q: f32, #[uniform] k: f32) -> f32 {
///     k * (p - q) + (10 * row + col) as f32
/// }
///
/// let v = Vector::from(vec![0.0f32, 1.0, 4.0]);
/// let h = Vector::from(vec![1.0f32, 3.0]);
/// let mut m = Matrix::zeroed(3, 2);
/// MapPairs::new(abs_diff).run(&v, &h, &mut m)?;
/// assert_eq!(m.to_vec(), vec![1.0, 3.0, 0.0, 2.0, 3.0, 1.0]);
///
/// MapPairs::new(tagged).uniforms((2.0,)).run(&v.view(1..3), &h, &mut Matrix::zeroed(2, 2))?;
///
/// let mut wrong = Matrix::filled(2, 3, 7.0f32);
/// let err = MapPairs::new(abs_diff).run(&v, &h, &mut wrong).unwrap_err();
/// assert!(err.to_string().contains("3x2 matrix") && err.to_string().contains("2x3 matrix"));
/// assert_eq!(wrong.to_vec(), vec![7.0; 6]);
/// # Ok::<(), skel::Error>(())
/// ```
#[must_use = "a skeleton does nothing until one of its `run` methods is called"]
#[derive(Clone, Copy, Debug)]
pub struct MapPairs<F: ElementwiseFn, C = ()> {
    f: F,
    uniforms: Option<F::Uniforms>,
    options: Options,
    arrays: C,
}

impl<F: ElementwiseFn> MapPairs<F> {
    /// A MapPairs of `f`, a function of two elements (`v`'s, then `h`'s).
    pub fn new(f: F) -> Self {
        MapPairs {
            f,
            uniforms: None,
            options: Options::default(),
            arrays: (),
        }
    }
}

impl<F: ElementwiseFn, C> MapPairs<F, C> {
    /// Binds the container parameters (`Mat<T>`, `&[T]`), in declaration order, as for
    /// [`crate::Map::arrays`]: every pair reads them whole.
    ///
    /// ```
    /// use skel::prelude::*;
    /// #[userfn]
    /// fn weighted(p: f32, q: f32, w: &[f32]) -> f32 { w[0] * p + w[1] * q }
    ///
    /// let (v, h) = (Vector::from(vec![1.0f32, 2.0]), Vector::from(vec![10.0f32]));
    /// let w = Vector::from(vec![2.0f32, 0.5]);
    /// let mut m = Matrix::zeroed(2, 1);
    /// MapPairs::new(weighted).arrays((&w,)).run(&v, &h, &mut m)?;
    /// assert_eq!(m.to_vec(), vec![7.0, 9.0]);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn arrays<B: BindArrays<F::Arrays>>(self, arrays: B) -> MapPairs<F, B> {
        MapPairs {
            f: self.f,
            uniforms: self.uniforms,
            options: self.options,
            arrays,
        }
    }

    /// Binds the `#[uniform]` parameters, as a tuple in declaration order.
    pub fn uniforms(
        mut self,
        uniforms: <F::Uniforms as crate::userfn::UniformTuple>::User,
    ) -> Self {
        self.uniforms = Some(crate::userfn::UniformTuple::from_user(uniforms));
        self
    }

    common_options!();

    /// The user function.
    pub fn function(&self) -> F {
        self.f
    }

    /// `out[(i, j)] = f(v[i], h[j])` for every `i < v.len()`, `j < h.len()`; `out` is a
    /// `v.len() x h.len()` matrix.
    pub fn run<A: DeviceType, B: DeviceType>(
        &self,
        v: &impl Input<A>,
        h: &impl Input<B>,
        out: &mut impl Output<F::Out>,
    ) -> Result<()>
    where
        F: ElementwiseFn<Elems = (A, B)>,
        C: BindArrays<F::Arrays>,
    {
        self.options.validate()?;
        let uniforms = &uniforms_or_missing(F::NAME, &self.uniforms, &self.options)?;
        let plan = plan::MapPairs::<(F, A, B)> {
            arrays: self.arrays.bind(),
            v: v.arg(),
            h: h.arg(),
            out: out.arg_mut(),
            uniforms,
        };
        // Spread over MPI ranks: v and out in blocks of rows; h and the container arguments
        // whole on every rank.
        backends::map_pairs(self.options, (&self.arrays, h), plan, |plan| {
            check_arrays("MapPairs", F::NAME, F::Arrays::KINDS, &plan.arrays.shapes())?;
            let (rows, cols) = pair_lengths("MapPairs", &plan.v, &plan.h)?;
            check_shape(
                "MapPairs output (v.len() x h.len())",
                Shape::Matrix { rows, cols },
                plan.out.shape(),
            )?;
            check_index_dims(
                "MapPairs",
                F::NAME,
                <F::Index as IndexKind>::DIMS,
                plan.out.shape(),
            )
        })
    }
}

/// `(v.len(), h.len())`, or a [`Error::ShapeMismatch`] if either operand is not a vector.
pub(super) fn pair_lengths<A: DeviceType, B: DeviceType>(
    skeleton: &str,
    v: &Arg<'_, A>,
    h: &Arg<'_, B>,
) -> Result<(usize, usize)> {
    match (v.shape(), h.shape()) {
        (Shape::Vector(rows), Shape::Vector(cols)) => Ok((rows, cols)),
        (Shape::Vector(_), other) => Err(Error::shape(
            format!("{skeleton} horizontal operand h"),
            "a vector",
            other,
        )),
        (other, _) => Err(Error::shape(
            format!("{skeleton} vertical operand v"),
            "a vector",
            other,
        )),
    }
}
