//! MapOverlap: stencils. 1D on vectors (or along matrix rows/columns), 2D on matrices.

use super::{check_shape, common_options, uniforms_or_missing, Edge, Options};
use crate::backends::{self, Stencil};
use crate::containers::{Output, Shape, Source};
use crate::plan::{self, Axis};
use crate::userfn::{StencilFn, Window2Fn, WindowFn};
use crate::{Error, Result};

// 3D (`Window3`, on a `Tensor3`): a child module, so it shares the builder's fields.
#[path = "map_overlap3.rs"]
mod three_d;

/// Applies a window function to every element's neighbourhood.
///
/// A 1D function (`Window<T>`, radius `r: usize`) runs on a vector, or along each row
/// (`.rowwise()`, the default for a matrix) or column (`.colwise()`) of a matrix; the
/// default edge is [`Edge::Duplicate`]. A 2D function (`Window2<T>`, radius
/// `(rows, cols)`) runs on a matrix; its default edge is [`Edge::None`] (only the interior
/// is computed), as in SkePU. Each dimension must be at least twice its radius long.
///
/// ```
/// use skel::prelude::*;
/// #[userfn]
/// fn blur(w: Window<f32>) -> f32 { (w[-1] + w[0] + w[1]) / 3.0 }
/// #[userfn]
/// fn lap(w: Window2<f32>) -> f32 {
///     w[(-1, 0)] + w[(1, 0)] + w[(0, -1)] + w[(0, 1)] - 4.0 * w[(0, 0)]
/// }
///
/// let v = Vector::from(vec![3.0f32, 6.0, 9.0]);
/// let mut out = Vector::zeroed(3);
/// MapOverlap::new(blur, 1).edge(Edge::Duplicate).run(&v, &mut out)?;
/// assert_eq!(out.to_vec(), vec![4.0, 6.0, 8.0]);
/// MapOverlap::new(blur, 1).edge(Edge::Pad).pad(0.0).run(&v, &mut out)?;
/// assert_eq!(out.to_vec(), vec![3.0, 6.0, 5.0]);
///
/// let m = Matrix::from_fn(3, 3, |r, c| (r * c) as f32);
/// let mut mout = Matrix::zeroed(3, 3);
/// MapOverlap::new(lap, (1, 1)).edge(Edge::Cyclic).run(&m, &mut mout)?;
/// assert_eq!(mout[(1, 1)], 0.0 + 2.0 + 0.0 + 2.0 - 4.0);
/// # Ok::<(), skel::Error>(())
/// ```
#[must_use = "a skeleton does nothing until one of its `run` methods is called"]
#[derive(Clone, Copy, Debug)]
pub struct MapOverlap<F: StencilFn, R = <F as StencilFn>::Radius> {
    f: F,
    radius: R,
    edge: Option<Edge>,
    pad: Option<F::Elem>,
    axis: Option<Axis>,
    uniforms: Option<F::Uniforms>,
    options: Options,
}

impl<F: StencilFn> MapOverlap<F, F::Radius> {
    /// A MapOverlap of `f` with window radius `radius` (`usize` for 1D, `(rows, cols)` for 2D).
    pub fn new(f: F, radius: F::Radius) -> Self {
        MapOverlap {
            f,
            radius,
            edge: None,
            pad: None,
            axis: None,
            uniforms: None,
            options: Options::default(),
        }
    }
}

impl<F: StencilFn, R: Copy> MapOverlap<F, R> {
    /// How elements beyond the borders are read.
    pub fn edge(mut self, edge: Edge) -> Self {
        self.edge = Some(edge);
        self
    }

    /// The constant read beyond the borders with [`Edge::Pad`] (default `T::default()`).
    pub fn pad(mut self, value: F::Elem) -> Self {
        self.pad = Some(value);
        self
    }

    /// Applies a 1D window along each row of a matrix (the default for matrices).
    pub fn rowwise(mut self) -> Self {
        self.axis = Some(Axis::Rows);
        self
    }

    /// Applies a 1D window along each column of a matrix.
    pub fn colwise(mut self) -> Self {
        self.axis = Some(Axis::Cols);
        self
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

    /// The window radius.
    pub fn radius(&self) -> R {
        self.radius
    }

    fn stencil(&self, default_edge: Edge) -> Stencil<F::Elem, R>
    where
        F::Elem: Default,
    {
        Stencil {
            radius: self.radius,
            edge: self.edge.unwrap_or(default_edge),
            pad: self.pad.unwrap_or_default(),
        }
    }
}

/// `Err` unless a dimension of `len` elements fits a window of radius `radius`.
fn check_radius(what: &str, len: usize, radius: usize) -> Result<()> {
    match radius.checked_mul(2) {
        Some(needed) if len >= needed => Ok(()),
        _ => Err(Error::InvalidArgument(format!(
            "MapOverlap: {what} has {len} elements, a window of radius {radius} needs at least twice that"
        ))),
    }
}

impl<F: WindowFn> MapOverlap<F, usize>
where
    F::Elem: Default,
{
    /// Runs the 1D stencil over a vector, or along the rows or columns of a matrix.
    pub fn run(&self, input: &impl Source<F::Elem>, out: &mut impl Output<F::Out>) -> Result<()> {
        self.options.validate()?;
        let input = input.resolve(self.options.backend)?;
        let (input, out) = (input.arg(), out.arg_mut());
        let uniforms = &uniforms_or_missing(F::NAME, &self.uniforms, &self.options)?;
        let plan = plan::MapOverlap::<F> {
            input,
            out,
            stencil: self.stencil(Edge::Duplicate),
            axis: Axis::Flat,
            uniforms,
        };
        backends::map_overlap(self.options, plan, |plan| {
            check_shape(
                "MapOverlap output against the input",
                plan.input.shape(),
                plan.out.shape(),
            )?;
            plan.axis = match (plan.input.global_shape(), self.axis) {
                (Shape::Vector(n), None | Some(Axis::Flat)) => {
                    check_radius("the vector", n, self.radius)?;
                    Axis::Flat
                }
                (Shape::Vector(_), Some(axis)) => {
                    return Err(Error::InvalidArgument(format!(
                        "MapOverlap {axis:?}: .rowwise()/.colwise() need a Matrix, got a {}",
                        plan.input.shape()
                    )))
                }
                (Shape::Matrix { cols, .. }, None | Some(Axis::Rows | Axis::Flat)) => {
                    check_radius("each row", cols, self.radius)?;
                    Axis::Rows
                }
                (Shape::Matrix { rows, .. }, Some(Axis::Cols)) => {
                    check_radius("each column", rows, self.radius)?;
                    Axis::Cols
                }
                (shape @ Shape::Tensor3 { .. }, _) => {
                    return Err(Error::shape(
                        "MapOverlap 1D input (a Tensor3 takes a Window3 function)",
                        "a vector or a matrix",
                        shape,
                    ))
                }
            };
            Ok(())
        })
    }
}

impl<F: Window2Fn> MapOverlap<F, (usize, usize)>
where
    F::Elem: Default,
{
    /// Runs the 2D stencil over a matrix.
    pub fn run(&self, input: &impl Source<F::Elem>, out: &mut impl Output<F::Out>) -> Result<()> {
        self.options.validate()?;
        let input = input.resolve(self.options.backend)?;
        let (input, out) = (input.arg(), out.arg_mut());
        let uniforms = &uniforms_or_missing(F::NAME, &self.uniforms, &self.options)?;
        let plan = plan::MapOverlap2d::<F> {
            input,
            out,
            stencil: self.stencil(Edge::None),
            uniforms,
        };
        backends::map_overlap_2d(self.options, plan, |plan| {
            let Shape::Matrix { rows, cols } = plan.input.global_shape() else {
                return Err(Error::shape(
                    "MapOverlap 2D input",
                    "a matrix",
                    plan.input.shape(),
                ));
            };
            check_shape(
                "MapOverlap output against the input",
                plan.input.shape(),
                plan.out.shape(),
            )?;
            if self.axis.is_some() {
                return Err(Error::InvalidArgument(
                    "MapOverlap: .rowwise()/.colwise() apply to 1D window functions, not Window2"
                        .into(),
                ));
            }
            check_radius("each column", rows, self.radius.0)?;
            check_radius("each row", cols, self.radius.1)
        })
    }
}
