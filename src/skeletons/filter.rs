//! Filter: stable stream compaction with a `bool` user function.

use std::marker::PhantomData;

use super::{common_options, uniforms_or_missing, Options};
use crate::backends::{self, PredicateFn};
use crate::containers::{Output, Source};
use crate::plan;
use crate::userfn::IndexKind;
use crate::{DeviceType, Error, Result};

/// Keeps the elements for which a predicate holds, in their order (stream compaction).
///
/// `run(&v, &mut out)` writes the kept elements of `v` to `out[..kept]` and returns `kept`;
/// `out[kept..]` is left as it was. `out` must hold at least `v.len()` elements (every
/// element may be kept), else the call is [`Error::ShapeMismatch`] and nothing is written.
/// The predicate takes one element, optionally an `#[index]` first (the element's position
/// in `v`) and `#[uniform]` parameters last. Matrices are filtered as their row-major
/// element sequence.
///
/// Filter has no SkePU counterpart: it is the compaction step of irregular streams, whose
/// stages drop items (MERCATOR), done on the device so that the next stage runs on full
/// lanes. On CUDA it is one pass over the data (decoupled look-back, as CUB's
/// `DeviceSelect::If`), with the predicate evaluated inside the kernel.
///
/// ```
/// use skel::prelude::*;
///
/// #[userfn]
/// fn is_hit(x: u32, #[uniform] t: u32) -> bool { x % t == 0 }
///
/// let v = Vector::from_fn(30, |i| i as u32);
/// let mut out = Vector::filled(32, 99u32);
/// let kept: usize = Filter::new(is_hit).uniforms((7,)).run(&v, &mut out)?;
/// assert_eq!(kept, 5);
/// assert_eq!(&out.to_vec()[..6], &[0, 7, 14, 21, 28, 99]);
///
/// // Views work wherever vectors do; a short output is an error that writes nothing.
/// let mut short = Vector::filled(3, 0u32);
/// let err = Filter::new(is_hit).uniforms((2,)).run(&v.view(10..20), &mut short);
/// assert!(matches!(err, Err(Error::ShapeMismatch { .. })));
/// assert_eq!(short.to_vec(), vec![0, 0, 0]);
/// # Ok::<(), skel::Error>(())
/// ```
#[must_use = "a skeleton does nothing until one of its `run` methods is called"]
#[derive(Clone, Copy, Debug)]
pub struct Filter<F: PredicateFn<T>, T: DeviceType> {
    f: F,
    uniforms: Option<F::Uniforms>,
    options: Options,
    elem: PhantomData<fn() -> T>,
}

impl<T: DeviceType, F: PredicateFn<T>> Filter<F, T> {
    /// A Filter keeping the elements for which `f` returns `true`.
    pub fn new(f: F) -> Self {
        Filter {
            f,
            uniforms: None,
            options: Options::default(),
            elem: PhantomData,
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

    /// Compacts `input` into `out[..kept]` and returns `kept`; `out[kept..]` keeps its
    /// values. `out.len() >= input.len()`, else [`Error::ShapeMismatch`].
    pub fn run(&self, input: &impl Source<T>, out: &mut impl Output<T>) -> Result<usize> {
        self.options.validate()?;
        let input = input.resolve(self.options.backend)?;
        let (input, out) = (input.arg(), out.arg_mut());
        let uniforms = &uniforms_or_missing(F::NAME, &self.uniforms, &self.options)?;
        let plan = plan::Filter::<(F, T)> {
            input,
            out,
            uniforms,
        };
        backends::filter(self.options, plan, |plan| {
            let (n, room) = (plan.input.shape().len(), plan.out.shape().len());
            if room < n {
                return Err(Error::shape(
                    format!(
                        "Filter output against the input (the output needs room for every \
                         element of the input: at least {n}, it has {room})"
                    ),
                    plan.input.shape(),
                    plan.out.shape(),
                ));
            }
            if <F::Index as IndexKind>::DIMS == 2 {
                return Err(Error::InvalidArgument(format!(
                    "Filter: `{}` takes a 2D #[index] (row, col); a Filter's index is the \
                     element's position in the input: use #[index] i: usize",
                    F::NAME
                )));
            }
            Ok(())
        })
    }
}
