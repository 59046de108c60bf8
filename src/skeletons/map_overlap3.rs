//! MapOverlap in 3D: a `Window3` function over a `Tensor3` (SkePU 3's `Region3D`).

use super::{check_radius, MapOverlap};
use crate::backends;
use crate::containers::{Output, Shape, Source};
use crate::plan;
use crate::skeletons::{check_shape, uniforms_or_missing, Edge};
use crate::userfn::Window3Fn;
use crate::{Error, Result};

impl<F: Window3Fn> MapOverlap<F, (usize, usize, usize)>
where
    F::Elem: Default,
{
    /// Runs the 3D stencil over a [`Tensor3`](crate::Tensor3): `out[(i, j, k)]` is `f` of
    /// the window around `(i, j, k)` with radii `(r0, r1, r2)`. The default edge is
    /// [`Edge::None`] (only the interior is computed, border outputs keep their values),
    /// as for 2D; `Duplicate`, `Cyclic` and `Pad` apply per axis. Each extent must be at
    /// least twice its radius.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] unless input and output are tensors of the same extents;
    /// [`Error::InvalidArgument`] for an extent shorter than twice its radius, or with
    /// `.rowwise()`/`.colwise()`.
    ///
    /// ```
    /// use skel::prelude::*;
    /// #[userfn]
    /// fn lap3(w: Window3<f32>) -> f32 {
    ///     w[(-1, 0, 0)] + w[(1, 0, 0)] + w[(0, -1, 0)] + w[(0, 1, 0)] + w[(0, 0, -1)]
    ///         + w[(0, 0, 1)] - 6.0 * w[(0, 0, 0)]
    /// }
    /// let t = Tensor3::from_fn(4, 4, 4, |i, j, k| (i * i + j + k) as f32);
    /// let mut out = Tensor3::zeroed(4, 4, 4);
    /// MapOverlap::new(lap3, (1, 1, 1)).edge(Edge::Duplicate).run(&t, &mut out)?;
    /// assert_eq!(out[(1, 1, 1)], 2.0); // d²(i²)/di² = 2
    /// assert_eq!(out[(0, 0, 0)], 1.0 + 1.0 + 1.0); // the clamped neighbours below
    /// MapOverlap::new(lap3, (1, 1, 1)).edge(Edge::Pad).pad(0.0).run(&t, &mut out)?;
    /// assert_eq!(out[(0, 0, 0)], 1.0 + 1.0 + 1.0);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn run(&self, input: &impl Source<F::Elem>, out: &mut impl Output<F::Out>) -> Result<()> {
        self.options.validate()?;
        let input = input.resolve(self.options.backend)?;
        let (input, out) = (input.arg(), out.arg_mut());
        let uniforms = &uniforms_or_missing(F::NAME, &self.uniforms, &self.options)?;
        let plan = plan::MapOverlap3d::<F> {
            input,
            out,
            stencil: self.stencil(Edge::None),
            dims: (0, 0, 0),
            uniforms,
        };
        backends::map_overlap_3d(self.options, plan, |plan| {
            let Shape::Tensor3 { d0, d1, d2 } = plan.input.global_shape() else {
                return Err(Error::shape(
                    "MapOverlap 3D input",
                    "a Tensor3",
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
                    "MapOverlap: .rowwise()/.colwise() apply to 1D window functions, not Window3"
                        .into(),
                ));
            }
            let (r0, r1, r2) = self.radius;
            check_radius("axis 0 (i)", d0, r0)?;
            check_radius("axis 1 (j)", d1, r1)?;
            check_radius("axis 2 (k)", d2, r2)?;
            plan.dims = (d0, d1, d2);
            Ok(())
        })
    }
}
