//! MapOverlap: stencils. 1D on vectors (or along matrix rows/columns), 2D on matrices.

use std::marker::PhantomData;

use super::update::{self, Update};
use super::{check_arrays, check_shape, common_options, uniforms_or_missing, Edge, Options};
use crate::backends::{self, Stencil};
use crate::containers::{Arg, ArgMut, Input, Matrix, Output, Shape, Source};
use crate::plan::{self, Axis, Cells};
use crate::userfn::{
    BindArrays, ContainerArgs, Overlap1Fn, Overlap2Fn, OverlapFn, PlainWindow, StencilFn,
    Window2Fn, WindowFn,
};
use crate::{DeviceType, Error, Result};

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
/// As in SkePU 3, a window function may also take an `#[index]` first (`i: usize` in 1D,
/// the flat position; `(i, j): (usize, usize)` in 2D), one to four windows (all `Window<T>`
/// or all `Window2<T>`, one `T`: `run` then takes one input per window, of one shape, every
/// one read with the edge mode), container arguments (`Mat<T>`, `&[T]`, see
/// [`MapOverlap::arrays`]) and uniforms, and read `w.radius()`. 2D stencils have SkePU's
/// update modes ([`MapOverlap::update`], [`MapOverlap::run_in_place`]). These forms run on
/// every backend (on CUDA and OpenCL through a tile kernel that holds each windowed
/// input's tile in shared memory; `Backend::Auto` runs them on Rayon).
///
/// ```
/// use skel::prelude::*;
/// #[userfn]
/// fn curl(e: Window2<f32>, h: Window2<f32>) -> f32 { e[(0, 1)] - e[(0, 0)] + h[(1, 0)] - h[(0, 0)] }
/// let ex = Matrix::from_fn(3, 3, |i, j| (i * 3 + j) as f32);
/// let hz = Matrix::filled(3, 3, 1.0f32);
/// let mut out = Matrix::zeroed(3, 3);
/// MapOverlap::new(curl, (1, 1)).backend(Backend::Rayon).run(&ex, &hz, &mut out)?;
/// assert_eq!(out[(1, 1)], 1.0);
/// # Ok::<(), skel::Error>(())
/// ```
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
///
/// `W` (the windowed inputs) and `A` (the containers bound with [`MapOverlap::arrays`])
/// are always inferred.
#[derive(Clone, Copy, Debug)]
pub struct MapOverlap<
    F: StencilFn,
    R = <F as StencilFn>::Radius,
    W = <F as StencilFn>::Windows,
    A = (),
> {
    f: F,
    radius: R,
    edge: Option<Edge>,
    pad: Option<F::Elem>,
    axis: Option<Axis>,
    uniforms: Option<F::Uniforms>,
    options: Options,
    update: Update,
    arrays: A,
    windows: PhantomData<fn() -> W>,
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
            update: Update::Normal,
            arrays: (),
            windows: PhantomData,
        }
    }
}

impl<F: StencilFn, R: Copy, W, A> MapOverlap<F, R, W, A> {
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

    /// Which cells a 2D stencil updates ([`Update`], SkePU's `UpdateMode`); default
    /// [`Update::Normal`]. `Red` and `Black` in [`MapOverlap::run`] write only the cells of
    /// their colour; `RedBlack` needs [`MapOverlap::run_in_place`].
    pub fn update(mut self, update: Update) -> Self {
        self.update = update;
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

impl<F: WindowFn> MapOverlap<F, usize, PlainWindow>
where
    F::Elem: Default,
{
    /// Runs the 1D stencil over a vector, or along the rows or columns of a matrix.
    pub fn run(&self, input: &impl Source<F::Elem>, out: &mut impl Output<F::Out>) -> Result<()> {
        self.options.validate()?;
        update::only_2d(self.update)?;
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

impl<F: Window2Fn + Overlap2Fn<Arrays = ()>> MapOverlap<F, (usize, usize), PlainWindow>
where
    F::Elem: Default,
{
    /// Runs the 2D stencil over a matrix.
    pub fn run(&self, input: &impl Source<F::Elem>, out: &mut impl Output<F::Out>) -> Result<()> {
        self.options.validate()?;
        let input = input.resolve(self.options.backend)?;
        if self.update != Update::Normal {
            let cells = update::cells_of_run(self.update)?;
            return self.execute_2d(vec![input.arg()], out.arg_mut(), cells);
        }
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

impl<F: OverlapFn, R: Copy, W, A> MapOverlap<F, R, W, A> {
    /// Binds the container parameters (`Mat<T>`, `&[T]`), as a tuple of references in
    /// declaration order, as [`crate::Map::arrays`] does: every output reads them whole.
    ///
    /// ```
    /// use skel::prelude::*;
    /// // Rodinia's hotspot: the temperature's window and the power field at the same cell.
    /// #[userfn]
    /// fn hot(#[index] (i, j): (usize, usize), t: Window2<f32>, p: Mat<f32>, #[uniform] k: f32) -> f32 {
    ///     t[(0, 0)] + k * (p[(i, j)] + t[(-1, 0)] + t[(1, 0)] + t[(0, -1)] + t[(0, 1)] - 4.0 * t[(0, 0)])
    /// }
    /// let temp = Matrix::from_fn(4, 4, |i, j| (i + j) as f32);
    /// let power = Matrix::filled(4, 4, 1.0f32);
    /// let mut out = Matrix::zeroed(4, 4);
    /// MapOverlap::new(hot, (1, 1)).edge(Edge::Duplicate).arrays((&power,)).uniforms((0.5,))
    ///     .backend(Backend::Cpu).run(&temp, &mut out)?;
    /// assert_eq!(out[(1, 1)], 2.0 + 0.5 * 1.0);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn arrays<B: BindArrays<F::Arrays>>(self, arrays: B) -> MapOverlap<F, R, W, B> {
        MapOverlap {
            f: self.f,
            radius: self.radius,
            edge: self.edge,
            pad: self.pad,
            axis: self.axis,
            uniforms: self.uniforms,
            options: self.options,
            update: self.update,
            arrays,
            windows: PhantomData,
        }
    }
}

/// The checks every general stencil call makes: windowed inputs of one shape, the output of
/// that shape, the containers of their kinds.
fn check_windows<F: OverlapFn>(plan: &plan::MapOverlapWindows<'_, F>) -> Result<Shape> {
    use crate::plan::ArgTuple as _;
    let shape = plan.inputs[0].shape();
    for (k, input) in plan.inputs.iter().enumerate().skip(1) {
        check_shape(
            format!("MapOverlap windowed input {k} against input 0"),
            shape,
            input.shape(),
        )?;
    }
    check_shape(
        "MapOverlap output against the input",
        shape,
        plan.out.shape(),
    )?;
    check_arrays(
        "MapOverlap",
        F::NAME,
        <F::Arrays as ContainerArgs>::KINDS,
        &plan.arrays.shapes(),
    )?;
    Ok(shape)
}

impl<F: Overlap1Fn, W, A: BindArrays<F::Arrays>> MapOverlap<F, usize, W, A>
where
    F::Elem: Default,
{
    fn execute_1d(&self, inputs: Vec<Arg<'_, F::Elem>>, out: ArgMut<'_, F::Out>) -> Result<()> {
        self.options.validate()?;
        update::only_2d(self.update)?;
        let uniforms = &uniforms_or_missing(F::NAME, &self.uniforms, &self.options)?;
        let plan = plan::MapOverlapWindows::<F> {
            inputs,
            arrays: self.arrays.bind(),
            out,
            stencil: self.stencil(Edge::Duplicate),
            axis: Axis::Flat,
            cells: Cells::all(),
            uniforms,
        };
        backends::map_overlap_windows(self.options, plan, |plan| {
            let shape = check_windows(plan)?;
            plan.axis = match (shape, self.axis) {
                (Shape::Vector(n), None | Some(Axis::Flat)) => {
                    check_radius("the vector", n, self.radius)?;
                    Axis::Flat
                }
                (Shape::Vector(_), Some(axis)) => {
                    return Err(Error::InvalidArgument(format!(
                        "MapOverlap {axis:?}: .rowwise()/.colwise() need a Matrix, got a {shape}"
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
                (Shape::Tensor3 { .. }, _) => {
                    return Err(Error::InvalidArgument(format!(
                        "a 1D MapOverlap takes a Vector or a Matrix, got a {shape}: a Tensor3 takes a `Window3<T>` function"
                    )))
                }
            };
            Ok(())
        })
    }
}

impl<F: Overlap2Fn, W, A: BindArrays<F::Arrays>> MapOverlap<F, (usize, usize), W, A>
where
    F::Elem: Default,
{
    fn execute_2d(
        &self,
        inputs: Vec<Arg<'_, F::Elem>>,
        out: ArgMut<'_, F::Out>,
        cells: Cells<F::Elem, F::Out>,
    ) -> Result<()> {
        self.options.validate()?;
        let uniforms = &uniforms_or_missing(F::NAME, &self.uniforms, &self.options)?;
        let plan = plan::MapOverlapWindows::<F> {
            inputs,
            arrays: self.arrays.bind(),
            out,
            stencil: self.stencil(Edge::None),
            axis: Axis::Flat,
            cells,
            uniforms,
        };
        backends::map_overlap_windows_2d(self.options, plan, |plan| {
            let shape = check_windows(plan)?;
            let Shape::Matrix { rows, cols } = shape else {
                return Err(Error::shape("MapOverlap 2D input", "a matrix", shape));
            };
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

impl<F, T, W, A> MapOverlap<F, (usize, usize), W, A>
where
    F: Overlap2Fn<Elem = T> + crate::userfn::UserFn<Out = T>,
    T: DeviceType + Default,
    A: BindArrays<F::Arrays>,
{
    /// Runs the 2D stencil over `m` in place, with the [`Update`] mode set by
    /// [`MapOverlap::update`] (SkePU's `UpdateMode`): `Normal` computes every cell from the
    /// old values; `Red` only the cells with `(i + j)` even, `Black` only the odd ones;
    /// `RedBlack` the red cells from the old values, then the black cells from the matrix
    /// with the red ones updated (a Gauss-Seidel sweep). The function's first window reads
    /// `m`; further windowed inputs are not allowed here (a sweep may write a new matrix
    /// and swap it in, so `m`'s storage may change: views of it are not updated). With
    /// `.backend(Backend::Cpu)` or `Backend::Rayon` the other matrix is kept (one per
    /// thread) for the next call of the same shape, so a loop of sweeps allocates once.
    /// On CUDA and OpenCL a colour sweep (`Red`, `Black`, each half of `RedBlack`) of a
    /// function that reads its window only at `(0, 0)` and at constant offsets of the other
    /// colour (odd `di + dj`, as a 5-point stencil) is one kernel that updates `m` where it
    /// lies, with no second matrix and no copy; the result is the same bits.
    ///
    /// ```
    /// use skel::prelude::*;
    /// #[userfn]
    /// fn avg(w: Window2<f32>) -> f32 { (w[(-1, 0)] + w[(1, 0)] + w[(0, -1)] + w[(0, 1)]) / 4.0 }
    /// let mut m = Matrix::from_fn(5, 5, |i, j| if i == 0 { 1.0f32 } else { 0.0 * j as f32 });
    /// MapOverlap::new(avg, (1, 1)).update(Update::RedBlack).backend(Backend::Cpu)
    ///     .run_in_place(&mut m)?;
    /// // (1, 1) is red: from the old values; (1, 2) is black: it reads the new (1, 1).
    /// assert_eq!(m[(1, 1)], 0.25);
    /// assert_eq!(m[(1, 2)], (1.0 + 0.25 + 0.25) / 4.0);
    /// assert_eq!(m[(0, 0)], 1.0); // Edge::None: the border keeps its values
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn run_in_place(&self, m: &mut Matrix<T>) -> Result<()> {
        if F::WINDOWS != 1 {
            return Err(Error::InvalidArgument(format!(
                "MapOverlap::run_in_place: `{}` takes {} windowed inputs; in place it reads one, the matrix it updates",
                F::NAME,
                F::WINDOWS
            )));
        }
        let mut sweeps = update::sweeps(self.update);
        // A colour sweep on a GPU reads and writes `m` itself where that gives the same
        // bits (the backend decides; the same for both colours): no second matrix.
        while let Some(&Some(parity)) = sweeps.first() {
            if !self.sweep_in_place(m, parity)? {
                break;
            }
            sweeps.remove(0);
        }
        if sweeps.is_empty() {
            return Ok(());
        }
        let (rows, cols) = (m.rows(), m.cols());
        let backend = self.options.backend;
        let mut next = update::scratch::<T>(rows, cols, backend);
        for parity in sweeps {
            let cells = Cells {
                parity,
                keep: Some(update::same::<T>),
            };
            self.execute_2d(vec![Input::arg(&*m)], next.arg_mut(), cells)?;
            std::mem::swap(m, &mut next);
        }
        update::give_back(next, backend);
        Ok(())
    }

    /// The cells of colour `parity` of `m` in place, where the backend has a path for it
    /// (`Ok(false)`, `m` untouched, where not).
    fn sweep_in_place(&self, m: &mut Matrix<T>, parity: usize) -> Result<bool> {
        self.options.validate()?;
        let uniforms = &uniforms_or_missing(F::NAME, &self.uniforms, &self.options)?;
        let plan = plan::MapOverlapInPlace::<F> {
            m: m.arg_mut(),
            arrays: self.arrays.bind(),
            stencil: self.stencil(Edge::None),
            parity,
            uniforms,
        };
        backends::map_overlap_in_place(self.options, plan, |plan| {
            if self.axis.is_some() {
                return Err(Error::InvalidArgument(
                    "MapOverlap: .rowwise()/.colwise() apply to 1D window functions, not Window2"
                        .into(),
                ));
            }
            use crate::plan::ArgTuple as _;
            let (rows, cols) = plan.m.shape().dims();
            check_radius("each column", rows, self.radius.0)?;
            check_radius("each row", cols, self.radius.1)?;
            check_arrays(
                "MapOverlap",
                F::NAME,
                <F::Arrays as ContainerArgs>::KINDS,
                &plan.arrays.shapes(),
            )
        })
    }
}

/// `$t` whatever `$a` is: one element type per windowed input in the `Windows` tuple.
macro_rules! each {
    ($a:ident $t:ty) => {
        $t
    };
}

macro_rules! general_runs {
    ($(($($a:ident),+))*) => {$(
        impl<F, T, A> MapOverlap<F, usize, ($(each!($a T),)+), A>
        where
            F: Overlap1Fn<Elem = T>,
            T: DeviceType + Default,
            A: BindArrays<F::Arrays>,
        {
            /// Runs the 1D stencil: one windowed input per window parameter (one shape),
            /// then the output.
            pub fn run(&self, $($a: &impl Source<T>,)+ out: &mut impl Output<F::Out>) -> Result<()> {
                $(let $a = $a.resolve(self.options.backend)?;)+
                self.execute_1d(vec![$($a.arg()),+], out.arg_mut())
            }
        }

        impl<F, T, A> MapOverlap<F, (usize, usize), ($(each!($a T),)+), A>
        where
            F: Overlap2Fn<Elem = T>,
            T: DeviceType + Default,
            A: BindArrays<F::Arrays>,
        {
            /// Runs the 2D stencil: one windowed matrix per window parameter (one shape),
            /// then the output. Different shapes are a `ShapeMismatch`.
            pub fn run(&self, $($a: &impl Source<T>,)+ out: &mut impl Output<F::Out>) -> Result<()> {
                $(let $a = $a.resolve(self.options.backend)?;)+
                let cells = update::cells_of_run(self.update)?;
                self.execute_2d(vec![$($a.arg()),+], out.arg_mut(), cells)
            }
        }
    )*};
}

general_runs! {
    (a)
    (a, b)
    (a, b, c)
    (a, b, c, d)
}
