//! The skeletons. Each file checks its operands, picks the backend and hands a plan to
//! it; none of them knows how or where the work runs.

mod debug_fmt;
mod filter;
mod histogram;
mod lazy;
mod map;
mod map_array;
mod map_overlap;
mod map_pairs;
mod map_pairs_reduce;
mod map_reduce;
mod reduce;
mod reduce_by_key;
mod scan;
mod sort;
mod update;
mod wavefront;

pub use filter::Filter;
pub use histogram::{Count, Histogram};
#[doc(hidden)]
pub use lazy::{FoldTo, Resolved};
pub use lazy::{Lazy, Source};
pub use map::Map;
pub use map_array::MapArray;
pub use map_overlap::MapOverlap;
pub use map_pairs::MapPairs;
pub use map_pairs_reduce::MapPairsReduce;
pub use map_reduce::MapReduce;
pub use reduce::Reduce;
pub use reduce_by_key::ReduceByKey;
pub use scan::Scan;
pub use sort::{ByValue, KeyFn, KeyKind, RadixBits, Sort, SortKey};
pub use update::Update;
pub use wavefront::Wavefront;

use crate::containers::Shape;
use crate::plan::Axis;
use crate::userfn::{ContainerKind, UniformTuple};
use crate::{Backend, Error, Result};

/// How MapOverlap treats the elements beyond the ends of its input.
///
/// ```
/// use skel::prelude::*;
/// #[userfn]
/// fn sum3(w: Window<i32>) -> i32 { w[-1] + w[0] + w[1] }
/// let v = Vector::from(vec![1, 2, 3]);
/// let mut out = Vector::zeroed(3);
/// MapOverlap::new(sum3, 1).edge(Edge::Cyclic).run(&v, &mut out)?;
/// assert_eq!(out.to_vec(), vec![6, 6, 6]);
/// MapOverlap::new(sum3, 1).edge(Edge::Pad).pad(10).run(&v, &mut out)?;
/// assert_eq!(out.to_vec(), vec![13, 6, 15]);
/// # Ok::<(), skel::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Edge {
    /// Repeat the first/last element (the default for 1D).
    #[default]
    Duplicate,
    /// Wrap around.
    Cyclic,
    /// A constant, set with `.pad(v)` (default `T::default()`).
    Pad,
    /// Compute only where the whole window is inside; border outputs keep their values
    /// (the default for 2D).
    None,
}

/// Inclusive or exclusive prefix scan.
///
/// ```
/// use skel::prelude::*;
/// #[userfn]
/// fn add(a: i64, b: i64) -> i64 { a + b }
/// let v = Vector::from(vec![1i64, 2, 3]);
/// let mut out = Vector::zeroed(3);
/// Scan::new(add).mode(ScanMode::Exclusive).start(10).run(&v, &mut out)?;
/// assert_eq!(out.to_vec(), vec![10, 11, 13]);
/// # Ok::<(), skel::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ScanMode {
    /// `out[i] = v[0] ⊕ ... ⊕ v[i]` (the default).
    #[default]
    Inclusive,
    /// `out[i] = start ⊕ v[0] ⊕ ... ⊕ v[i-1]`.
    Exclusive,
}

/// How many CUDA devices a call is split over (`.devices(..)` on any skeleton).
///
/// The devices are the ordinals `SKEL_CUDA_DEVICES` names (comma-separated, e.g. `0,1`),
/// else every CUDA device, the default one (`SKEL_CUDA_DEVICE`) first. Without
/// `.devices(..)`, a call uses every device `SKEL_CUDA_DEVICES` names if it is set, else one.
/// `Count(n)` takes the first `n`; more than there are is
/// [`Error::BackendUnavailable`]. `Devices::All` and `Count(n > 1)` mean the CUDA backend
/// (also where `Backend::Auto` or the default backend would choose); with another backend
/// named explicitly they are [`Error::InvalidArgument`]. `Count(1)` is any backend's normal
/// case.
///
/// Naming an ordinal twice (`SKEL_CUDA_DEVICES=0,0`) makes two device *slots* on one GPU,
/// each with its own streams and its own copies of the containers: a testing aid that runs
/// every multi-device path on a one-GPU machine.
///
/// ```
/// use skel::prelude::*;
/// #[userfn]
/// fn twice(x: f32) -> f32 { x * 2.0 }
/// let v = Vector::from(vec![1.0f32, 2.0, 3.0]);
/// let mut out = Vector::zeroed(3);
/// // One device is always there where CUDA is; without CUDA the call says why.
/// match Map::new(twice).devices(Devices::All).run(&v, &mut out) {
///     Ok(()) => assert_eq!(out.to_vec(), vec![2.0, 4.0, 6.0]),
///     Err(e) => assert!(matches!(e, Error::BackendUnavailable { .. })),
/// }
/// // Two devices and an explicit host backend contradict each other.
/// let err = Map::new(twice).devices(2).backend(Backend::Cpu).run(&v, &mut out);
/// assert!(matches!(err, Err(Error::InvalidArgument(_))));
/// # Ok::<(), skel::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Devices {
    /// Every device slot (see above).
    All,
    /// The first `n` device slots.
    Count(usize),
}

impl From<usize> for Devices {
    fn from(n: usize) -> Self {
        Devices::Count(n)
    }
}

/// Options every skeleton has: where it runs, over how many streams, and whether its
/// result is copied back eagerly.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Options {
    pub backend: Option<Backend>,
    pub streams: Option<usize>,
    pub download: Option<bool>,
    pub checked: Option<bool>,
    /// The global flat index of the first element of the call's operands: `Some` for the
    /// block one MPI rank runs of a call spread over ranks, whose `#[index]` is the global
    /// one.
    pub index_base: Option<usize>,
    /// `.devices(..)`, if given.
    pub devices: Option<Devices>,
    /// `.seed(..)`, if given: the key of the `&mut Random` parameters' streams.
    pub seed: Option<u64>,
}

impl Options {
    /// The index base the host backends add to every `#[index]` (0 outside a block).
    #[allow(dead_code)] // read by the host backends, which a build may leave out
    pub(crate) fn base(&self) -> usize {
        self.index_base.unwrap_or(0)
    }

    /// Checks what can be checked before any backend is touched.
    pub(crate) fn validate(&self) -> Result<()> {
        crate::config::validate()?;
        if self.streams == Some(0) {
            return Err(Error::InvalidArgument(
                ".streams(0): a call needs at least one stream".into(),
            ));
        }
        if self.devices == Some(Devices::Count(0)) {
            return Err(Error::InvalidArgument(
                ".devices(0): a call needs at least one device".into(),
            ));
        }
        match self.backend {
            Some(b) if self.several_devices() && !matches!(b, Backend::Cuda | Backend::Auto) => {
                Err(Error::InvalidArgument(format!(
                    ".devices({:?}) splits a call over CUDA devices, but .backend({b:?}) was \
                     named; drop one of the two",
                    self.devices.unwrap_or(Devices::All)
                )))
            }
            _ => Ok(()),
        }
    }

    /// Whether `.devices(..)` asks for more than one device (or for all of them).
    fn several_devices(&self) -> bool {
        matches!(self.devices, Some(Devices::All) | Some(Devices::Count(2..)))
    }

    /// The backend choice to resolve: CUDA when `.devices(..)` asks for several devices
    /// (only CUDA splits over devices), else the instance's own.
    pub(crate) fn backend_choice(&self) -> Option<Backend> {
        match self.backend {
            None | Some(Backend::Auto) if self.several_devices() => Some(Backend::Cuda),
            b => b,
        }
    }

    /// Whether this call runs its user function checked (`.checked(..)`, else the process
    /// default of [`crate::check`]).
    pub(crate) fn checked(&self) -> bool {
        // `validate` returned a malformed SKEL_CHECK as the call's error before this is asked.
        self.checked.unwrap_or_else(|| crate::config::CHECK.value())
    }
}

/// The builder methods every skeleton shares.
macro_rules! common_options {
    () => {
        /// Runs this instance on `backend` instead of the process default.
        pub fn backend(mut self, backend: $crate::Backend) -> Self {
            self.options.backend = Some(backend);
            self
        }

        /// Splits each call over `n` CUDA streams (MultiStream): the operands are cut into
        /// `n` chunks whose uploads, kernels and downloads overlap. Without it, a cost model
        /// picks `n` per call (1 for small calls). Other backends ignore it; `0` is rejected
        /// when the skeleton runs.
        pub fn streams(mut self, n: usize) -> Self {
            self.options.streams = Some(n);
            self
        }

        /// Whether a device backend copies the result back to the host as soon as each
        /// chunk is computed (`true`), or leaves it on the device until the host reads it
        /// (`false`, lazy copy-back). Without it, the result is copied back eagerly when the
        /// host read at least half of this container after the previous device write to it.
        /// Host backends ignore it.
        pub fn download(mut self, eager: bool) -> Self {
            self.options.download = Some(eager);
            self
        }

        /// Whether the user function runs checked: an index out of range or an integer
        /// division or remainder by zero then makes the call return
        /// [`Error::UserFunction`]($crate::Error::UserFunction) on every backend. Without
        /// it, `SKEL_CHECK=1|0` decides, else checked in debug builds and unchecked in
        /// release builds. See [`skel::check`]($crate::check) for what an unchecked call
        /// does on each backend.
        pub fn checked(mut self, on: bool) -> Self {
            self.options.checked = Some(on);
            self
        }

        /// Splits each call over CUDA devices: `n` (the first `n` of `SKEL_CUDA_DEVICES`,
        /// else of all devices) or [`Devices::All`]($crate::Devices::All). The operands are
        /// cut into one part per device (matrices in whole rows), each computed by its
        /// device over its own streams; containers keep one coherent copy per device, so a
        /// later call split the same way moves nothing. Several devices mean the CUDA
        /// backend. See [`Devices`]($crate::Devices) for the defaults and errors.
        pub fn devices(mut self, n: impl Into<$crate::Devices>) -> Self {
            self.options.devices = Some(n.into());
            self
        }

        /// The seed of the random numbers a user function with a `rng: &mut Random`
        /// parameter draws (default 0): element `i` draws the same numbers for the same
        /// seed on every backend, chunking and device split (see [`skel::random`]($crate::random)).
        /// Functions without `&mut Random` ignore it.
        pub fn seed(mut self, seed: u64) -> Self {
            self.options.seed = Some(seed);
            self
        }
    };
}
pub(crate) use common_options;

/// `Err(ShapeMismatch)` unless `found == expected`.
pub(crate) fn check_shape(
    context: impl std::fmt::Display,
    expected: Shape,
    found: Shape,
) -> Result<()> {
    if expected == found {
        Ok(())
    } else {
        // Formatted only here: a call whose shapes match pays for no message.
        Err(Error::shape(context.to_string(), expected, found))
    }
}

/// Each container bound with `.arrays(..)` is of the kind its parameter takes: a matrix for
/// `Mat<T>`, a vector for `&[T]`.
pub(crate) fn check_arrays(
    skeleton: &str,
    name: &str,
    kinds: &[ContainerKind],
    shapes: &[Shape],
) -> Result<()> {
    for (k, (kind, shape)) in kinds.iter().zip(shapes).enumerate() {
        let fits = match kind {
            ContainerKind::Mat => matches!(shape, Shape::Matrix { .. }),
            ContainerKind::Slice => matches!(shape, Shape::Vector(_)),
        };
        if !fits {
            let wants = match kind {
                ContainerKind::Mat => "a Matrix (the parameter is a `Mat<T>`)",
                ContainerKind::Slice => "a Vector or a vector view (the parameter is a `&[T]`)",
            };
            return Err(Error::shape(
                format!("{skeleton} container argument {k} of `{name}` (bound with .arrays)"),
                wants,
                shape,
            ));
        }
    }
    Ok(())
}

/// Every input of an element-wise call has the output's shape.
pub(crate) fn check_inputs(skeleton: &str, inputs: &[Shape], out: Shape) -> Result<()> {
    for (i, &shape) in inputs.iter().enumerate() {
        check_shape(
            format_args!("{skeleton} input {i} against the output"),
            out,
            shape,
        )?;
    }
    Ok(())
}

/// Uniforms bound with `.uniforms(..)`, or `()` for a function that has none.
/// They carry the skeleton's `.seed(..)` (for a function with a `&mut Random` parameter).
pub(crate) fn uniforms_or_missing<U: UniformTuple>(
    name: &str,
    bound: &Option<U>,
    options: &Options,
) -> Result<U> {
    let seed = options.seed.unwrap_or(0);
    if let Some(u) = bound {
        return Ok(u.with_seed(seed));
    }
    // A function without uniforms needs no `.uniforms(())`.
    if let Some(unit) = U::unbound() {
        return Ok(unit.with_seed(seed));
    }
    Err(missing_uniforms(name))
}

/// The error of a call whose function's `#[uniform]` parameters were not bound.
pub(crate) fn missing_uniforms(name: &str) -> Error {
    Error::InvalidArgument(format!(
        "user function `{name}` has #[uniform] parameters: bind them with .uniforms((..)) before .run"
    ))
}

/// The index kind of a function must fit the operand: a 2D index needs a matrix (a tensor
/// is flat to element-wise skeletons: its `#[index]` is the flat position).
pub(crate) fn check_index_dims(skeleton: &str, name: &str, dims: u8, shape: Shape) -> Result<()> {
    if dims == 2 && !matches!(shape, Shape::Matrix { .. }) {
        return Err(Error::InvalidArgument(format!(
            "{skeleton}: `{name}` takes a 2D #[index] (row, col), but its operands are a {shape}; use Matrix operands"
        )));
    }
    Ok(())
}

/// `Err` when a fold along `axis` of the `rows x cols` pairs would have no pair while
/// there are results to write.
pub(crate) fn every_fold_has_pairs(axis: Axis, rows: usize, cols: usize) -> Result<()> {
    let (results, folded) = if axis == Axis::Rows {
        (rows, cols)
    } else {
        (cols, rows)
    };
    if folded == 0 && results > 0 {
        return Err(Error::InvalidArgument(format!(
            "MapPairsReduce {axis:?} over {} of pairs: every fold needs at least one pair",
            Shape::Matrix { rows, cols }
        )));
    }
    Ok(())
}

/// `Err(ShapeMismatch)` unless `out` has exactly one element: the place `run_into` writes.
pub(crate) fn check_one<T: crate::DeviceType>(
    skeleton: &str,
    out: &mut impl crate::containers::Output<T>,
) -> Result<()> {
    let shape = out.arg_mut().shape();
    check_shape(
        format_args!("{skeleton}::run_into result container"),
        Shape::Vector(1),
        Shape::Vector(shape.len()),
    )
}
