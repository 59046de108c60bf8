//! Reduce: fold a container with an associative binary user function.

use super::{check_shape, common_options, Options};
use crate::backends::{self, BinaryFn};
use crate::containers::{Output, Shape, Source};
use crate::plan::{self, Axis};
use crate::skeletons::FoldTo;
use crate::{DeviceType, Error, Result};

/// Folds all elements (`run`), each row (`run_rows`) or each column (`run_cols`) with an
/// associative function `f(T, T) -> T`.
///
/// `run` computes `start ⊕ v[0] ⊕ ... ⊕ v[n-1]` (start defaults to `T::default()`, as in
/// SkePU); rows and columns fold from their first element and ignore `start`. Backends may
/// regroup the operations, so `f` must be associative.
///
/// ```
/// use skel::prelude::*;
/// #[userfn]
/// fn add(a: f32, b: f32) -> f32 { a + b }
/// #[userfn]
/// fn max(a: f32, b: f32) -> f32 { a.max(b) }
///
/// let v = Vector::from(vec![-3.0f32, -1.0, -2.0]);
/// assert_eq!(Reduce::new(add).run(&v)?, -6.0);
/// assert_eq!(Reduce::new(max).run(&v)?, 0.0); // start is T::default(), as in SkePU
/// assert_eq!(Reduce::new(max).start(f32::MIN).run(&v)?, -1.0);
///
/// let m = Matrix::from_vec(2, 3, vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?;
/// let mut per_row = Vector::zeroed(2);
/// let mut per_col = Vector::zeroed(3);
/// Reduce::new(add).run_rows(&m, &mut per_row)?;
/// Reduce::new(add).run_cols(&m, &mut per_col)?;
/// assert_eq!(per_row.to_vec(), vec![6.0, 15.0]);
/// assert_eq!(per_col.to_vec(), vec![5.0, 7.0, 9.0]);
/// # Ok::<(), skel::Error>(())
/// ```
#[must_use = "a skeleton does nothing until one of its `run` methods is called"]
#[derive(Clone, Copy, Debug)]
pub struct Reduce<F: BinaryFn<T>, T: DeviceType = <F as crate::userfn::UserFn>::Out> {
    f: F,
    start: T,
    options: Options,
}

impl<T: DeviceType + Default, F: BinaryFn<T>> Reduce<F, T> {
    /// A Reduce of `f`, starting from `T::default()`.
    pub fn new(f: F) -> Self {
        Self::with_start(f, T::default())
    }
}

impl<T: DeviceType, F: BinaryFn<T>> Reduce<F, T> {
    /// A Reduce of `f` starting from `start`: also for result types without `Default`
    /// (arrays longer than 32, structs holding them).
    ///
    /// ```
    /// use skel::prelude::*;
    /// #[userfn]
    /// fn or64(a: [u32; 64], b: [u32; 64]) -> [u32; 64] {
    ///     let mut c = a;
    ///     for k in 0..64 {
    ///         c[k] = a[k] | b[k];
    ///     }
    ///     c
    /// }
    /// let v = Vector::from_fn(64, |i| { let mut m = [0u32; 64]; m[i] = 1; m });
    /// assert_eq!(Reduce::with_start(or64, [0; 64]).run(&v)?, [1; 64]);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn with_start(f: F, start: T) -> Self {
        Reduce {
            f,
            start,
            options: Options::default(),
        }
    }

    /// The value the 1D fold starts from (default `T::default()`).
    pub fn start(mut self, start: T) -> Self {
        self.start = start;
        self
    }

    common_options!();

    /// The user function.
    pub fn function(&self) -> F {
        self.f
    }

    /// The function, start value and options, for a fold of a lazy input.
    pub(crate) fn parts(&self) -> (F, T, Options) {
        (self.f, self.start, self.options)
    }

    /// Whether `input` is lazy and this call's backend folds it fused (CUDA, OpenCL).
    fn fused(&self, input: &impl Source<T>) -> bool {
        input.is_lazy() && backends::fuses_lazy_folds(&self.options)
    }

    /// Folds every element of `input` (a vector, view or matrix) into one value.
    ///
    /// A lazy input (`Map::new(f).lazy(..)`) is folded in one pass on CUDA and OpenCL (the
    /// fold's kernel evaluates the producer chain per element), bit-identical to
    /// materialising it and folding that.
    pub fn run(&self, input: &impl Source<T>) -> Result<T> {
        self.options.validate()?;
        if self.fused(input) {
            return input.fold(self, FoldTo::Value)?.ok_or_else(|| {
                Error::InvalidArgument("internal: a fused Reduce returned no value".into())
            });
        }
        let input = input.resolve(self.options.backend)?;
        let input = input.arg();
        let start = self.start;
        backends::reduce(self.options, plan::Reduce::<(F, T)> { input, start })
    }

    /// [`run`](Self::run), with the result written to element 0 of `out`, a container of
    /// exactly one element (else [`Error::ShapeMismatch`]), so that a later call can read
    /// it as an input or a container argument.
    ///
    /// ```
    /// use skel::prelude::*;
    /// #[userfn]
    /// fn add(a: f32, b: f32) -> f32 { a + b }
    /// let r = Vector::from(vec![1.0f32, 2.0, 3.0]);
    /// let mut rr = Vector::zeroed(1);
    /// Reduce::new(add).run_into(&r, &mut rr)?;
    /// assert_eq!(rr[0], 6.0);
    /// # Ok::<(), skel::Error>(())
    /// ```
    ///
    /// On CUDA and OpenCL the result is written on the device, where it is computed: no
    /// host round trip, and `out`'s device copy is the valid one (reading it on the host
    /// brings it back then).
    pub fn run_into(&self, input: &impl Source<T>, out: &mut impl Output<T>) -> Result<()> {
        super::check_one("Reduce", out)?;
        self.options.validate()?;
        if self.fused(input) {
            return input.fold(self, FoldTo::Into(out.arg_mut())).map(drop);
        }
        let input = input.resolve(self.options.backend)?;
        let input = input.arg();
        let start = self.start;
        let plan = plan::Reduce::<(F, T)> { input, start };
        backends::reduce_into(self.options, plan, out.arg_mut())
    }
}

// The row and column folds of a distributed matrix need `Default` (see `dist::reduce`).
impl<T: DeviceType + Default, F: BinaryFn<T>> Reduce<F, T> {
    /// `out[r]` = fold of row `r` of `input`; `out` has one element per row.
    ///
    /// A lazy input is mapped and folded in one pass on every backend but `Auto` (each
    /// row's values are folded as they are computed; the intermediate matrix never exists;
    /// on the host backends a call with distributed operands still materialises it),
    /// bit-identical to materialising it and folding that:
    ///
    /// ```
    /// use skel::prelude::*;
    /// #[userfn]
    /// fn add(a: f32, b: f32) -> f32 { a + b }
    /// #[userfn]
    /// fn exp_shifted(#[index] (i, _j): (usize, usize), x: f32, m: &[f32]) -> f32 {
    ///     (x - m[i]).exp()
    /// }
    /// let x = Matrix::from_vec(2, 2, vec![1.0f32, 2.0, 3.0, 5.0])?;
    /// let m = Vector::from(vec![2.0f32, 5.0]);
    /// let mut sums = Vector::zeroed(2);
    /// let e = Map::new(exp_shifted).arrays((&m,)).lazy(&x);
    /// Reduce::new(add).backend(Backend::Rayon).run_rows(&e, &mut sums)?;
    /// assert_eq!(sums[0], (-1.0f32).exp() + 1.0);
    /// assert_eq!(sums[1], (-2.0f32).exp() + 1.0);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn run_rows(&self, input: &impl Source<T>, out: &mut impl Output<T>) -> Result<()> {
        self.run_axis(input, out, Axis::Rows)
    }

    /// `out[c]` = fold of column `c` of `input`; `out` has one element per column.
    pub fn run_cols(&self, input: &impl Source<T>, out: &mut impl Output<T>) -> Result<()> {
        self.run_axis(input, out, Axis::Cols)
    }

    fn run_axis(&self, input: &impl Source<T>, out: &mut impl Output<T>, axis: Axis) -> Result<()> {
        self.options.validate()?;
        // The host backends fold each row of a lazy input as they map it (one pass, no
        // intermediate matrix); a column fold of one, or a distributed call, still gets it
        // materialised.
        let host_rows = axis == Axis::Rows
            && input.is_lazy()
            && backends::folds_lazy_rows(&self.options, input, &out.arg_mut());
        if self.fused(input) || host_rows {
            let to = match axis {
                Axis::Cols => FoldTo::Cols(out.arg_mut()),
                _ => FoldTo::Rows(out.arg_mut()),
            };
            return input.fold(self, to).map(drop);
        }
        let input = input.resolve(self.options.backend)?;
        let (input, out) = (input.arg(), out.arg_mut());
        let plan = plan::ReduceAxis::<(F, T)> { input, out, axis };
        backends::reduce_axis(self.options, plan, |plan| {
            let (global, global_out) = (plan.input.global_shape(), plan.out.global_shape());
            let Shape::Matrix { rows, cols } = global else {
                return Err(Error::shape(
                    format!("Reduce {axis:?} input"),
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
                    "Reduce {axis:?} of a {global}: every fold needs at least one element",
                )));
            }
            check_shape(
                format_args!("Reduce {axis:?} output"),
                Shape::Vector(results),
                global_out,
            )
        })
    }
}
