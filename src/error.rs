//! The one error type of skel.

use crate::backends::Backend;

/// Shorthand for `Result<T, skel::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything a skeleton call, a container or a backend can report.
///
/// Every variant carries enough context to act on: both shapes of a mismatch, the backend
/// that is missing and why, the compiler log and the generated source of a failed build.
///
/// ```
/// use skel::prelude::*;
/// let a = Vector::from(vec![1.0f32, 2.0]);
/// let mut out = Vector::zeroed(3);
/// #[userfn]
/// fn twice(x: f32) -> f32 { 2.0 * x }
/// let err = Map::new(twice).run(&a, &mut out).unwrap_err();
/// assert!(matches!(err, Error::ShapeMismatch { .. }));
/// assert!(err.to_string().contains("vector of 2"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Operands of one call disagree in length or shape.
    #[error("shape mismatch in {context}: expected {expected}, got {found}")]
    ShapeMismatch {
        /// Which call and which operand.
        context: String,
        /// The shape the call needs.
        expected: String,
        /// The shape it was given.
        found: String,
    },
    /// A parameter (radius, matrix length, ...) is out of its valid range.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The backend is not compiled in or has no device.
    #[error("backend {backend} is unavailable: {reason}")]
    BackendUnavailable {
        /// The backend that was asked for.
        backend: Backend,
        /// Why it cannot run (feature not compiled in, no device, driver missing).
        reason: String,
    },
    /// Building a kernel failed.
    #[error("kernel build failed for {kernel}:\n{log}\n--- generated source ---\n{source_code}")]
    Compile {
        /// Which kernel.
        kernel: String,
        /// The compiler's log.
        log: String,
        /// The generated source that failed.
        source_code: String,
    },
    /// A device ran out of memory; the inputs are intact.
    #[error("out of device memory: {0}")]
    OutOfMemory(String),
    /// Anything else the CUDA or OpenCL runtime reported.
    #[error("driver error: {0}")]
    Driver(String),
    /// The device's context is lost for the rest of the process (CUDA: an illegal memory
    /// access or another sticky launch failure; every later call on that backend returns
    /// this error, and host copies of results left on the device cannot be read back).
    #[error("{backend} device lost for the rest of the process: {reason}")]
    DeviceLost {
        /// The backend whose device is lost.
        backend: Backend,
        /// What the driver reported first.
        reason: String,
    },
    /// A stage of a [`skel::stream::Pipeline`](crate::stream::Pipeline) failed (returned
    /// `Err` or panicked) on one item; the pipeline was stopped and drained.
    #[error("stage {stage} failed on item {item}: {source}")]
    Stage {
        /// 0-based position of the stage (or farm) in the pipeline.
        stage: usize,
        /// 0-based position of the failing item in the pipeline's input.
        item: usize,
        /// What the stage reported (a panic becomes [`Error::Other`]).
        source: Box<Error>,
    },
    /// A user function went wrong: an index out of range (a `&[T]` parameter, a local array,
    /// a window), an integer division or remainder by zero, or, on the `cpu` and `rayon`
    /// backends, a panic. Checked calls (see [`crate::check`]) report it on every backend; the
    /// call's output holds no results then, and its inputs are intact.
    #[error("user function `{function}` failed: {what}")]
    UserFunction {
        /// The user function's name.
        function: String,
        /// What went wrong, in words.
        what: String,
        /// The offending index (window offset; dividend of a division), where there is one.
        index: Option<i64>,
        /// The length of what was indexed, for an index out of range.
        len: Option<u64>,
    },
    /// A distributed call (`skel::dist`) failed on another rank; that rank returned the
    /// error itself.
    #[error("distributed call failed on rank {rank}: {message}")]
    Distributed {
        /// The first rank that failed.
        rank: usize,
        /// Its error, in words.
        message: String,
    },
    /// An error of the user's own, wrapped by [`Error::other`].
    #[error(transparent)]
    Other(Box<dyn std::error::Error + Send + Sync + 'static>),
    /// A call that a recorded [`crate::Graph`] cannot hold (one that returns a value to the
    /// host: use its `run_into` form), or a launch whose closure made other calls than it
    /// made when it was recorded.
    #[error("graph recording: {0}")]
    Recording(String),
}

impl Error {
    /// Wraps an error of the user's own (anything `std::error::Error + Send + Sync`, or a
    /// message) so that it can travel as a `skel::Error`, e.g. out of a pipeline stage.
    ///
    /// ```
    /// let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such photo");
    /// let err = skel::Error::other(io);
    /// assert_eq!(err.to_string(), "no such photo");
    /// assert!(matches!(err, skel::Error::Other(_)));
    /// let msg = skel::Error::other("frame 3 is empty");
    /// assert_eq!(msg.to_string(), "frame 3 is empty");
    /// ```
    pub fn other(error: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>) -> Self {
        Error::Other(error.into())
    }

    pub(crate) fn shape(
        context: impl Into<String>,
        expected: impl std::fmt::Display,
        found: impl std::fmt::Display,
    ) -> Self {
        Error::ShapeMismatch {
            context: context.into(),
            expected: expected.to_string(),
            found: found.to_string(),
        }
    }
}
