//! Scan: prefix sums with any associative binary user function.

use super::{check_shape, common_options, Options, ScanMode};
use crate::backends::{self, BinaryFn};
use crate::containers::{Output, Source};
use crate::plan;
use crate::{DeviceType, Result};

/// Prefix scan with SkePU's semantics.
///
/// - Inclusive (default): `out[0] = v[0]`, `out[i] = f(out[i-1], v[i])`; `start` is ignored.
/// - Exclusive: `out[0] = start`, `out[i] = f(out[i-1], v[i-1])`; `start` defaults to
///   `T::default()`.
///
/// `f` must be associative: parallel backends regroup it. It is never applied to padding
/// or uninitialised memory.
///
/// ```
/// use skel::prelude::*;
/// #[userfn]
/// fn add(a: f32, b: f32) -> f32 { a + b }
/// let v = Vector::from(vec![1.0f32, 2.0, 3.0, 4.0]);
/// let mut out = Vector::zeroed(4);
/// Scan::new(add).run(&v, &mut out)?;
/// assert_eq!(out.to_vec(), vec![1.0, 3.0, 6.0, 10.0]);
/// Scan::new(add).mode(ScanMode::Exclusive).start(10.0).run(&v, &mut out)?;
/// assert_eq!(out.to_vec(), vec![10.0, 11.0, 13.0, 16.0]);
/// # Ok::<(), skel::Error>(())
/// ```
#[must_use = "a skeleton does nothing until one of its `run` methods is called"]
#[derive(Clone, Copy, Debug)]
pub struct Scan<F: BinaryFn<T>, T: DeviceType = <F as crate::userfn::UserFn>::Out> {
    f: F,
    mode: ScanMode,
    start: Option<T>,
    options: Options,
}

impl<T: DeviceType + Default, F: BinaryFn<T>> Scan<F, T> {
    /// An inclusive Scan of `f`.
    pub fn new(f: F) -> Self {
        Scan {
            f,
            mode: ScanMode::Inclusive,
            start: None,
            options: Options::default(),
        }
    }

    /// Inclusive or exclusive.
    pub fn mode(mut self, mode: ScanMode) -> Self {
        self.mode = mode;
        self
    }

    /// The first output of an exclusive scan (default `T::default()`).
    pub fn start(mut self, start: T) -> Self {
        self.start = Some(start);
        self
    }

    common_options!();

    /// The user function.
    pub fn function(&self) -> F {
        self.f
    }

    /// Scans `input` into `out` (same length).
    pub fn run(&self, input: &impl Source<T>, out: &mut impl Output<T>) -> Result<()> {
        self.options.validate()?;
        let input = input.resolve(self.options.backend)?;
        let (input, out) = (input.arg(), out.arg_mut());
        let plan = plan::Scan::<(F, T)> {
            input,
            out,
            mode: self.mode,
            start: self.start.unwrap_or_default(),
        };
        backends::scan(self.options, plan, |plan| {
            check_shape(
                "Scan output against the input",
                plan.input.shape(),
                plan.out.shape(),
            )
        })
    }
}
