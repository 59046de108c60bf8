//! The one error type of skel.

use std::sync::Arc;

use crate::backends::Backend;

/// Shorthand for `Result<T, skel::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything a skeleton call, a container or a backend can report.
///
/// Every variant carries enough context to act on: both shapes of a mismatch, the backend
/// that is missing and why, the compiler log and the generated source of a failed build.
///
/// What the CUDA or OpenCL runtime or the operating system reported stays reachable through
/// [`std::error::Error::source`]: [`Error::Driver`], [`Error::OutOfMemory`] and
/// [`Error::DeviceLost`] carry a [`DriverError`] whose source is the driver's own error
/// (`cudarc`'s or `ocl`'s), and [`Error::Io`] the [`std::io::Error`]. The messages already
/// include the cause's text, for programs that print only `{err}`.
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
    OutOfMemory(#[source] DriverError),
    /// Anything else the CUDA or OpenCL runtime reported.
    #[error("driver error: {0}")]
    Driver(#[source] DriverError),
    /// The device's context is lost for the rest of the process (CUDA: an illegal memory
    /// access or another sticky launch failure; every later call on that backend returns
    /// this error, and host copies of results left on the device cannot be read back).
    #[error("{backend} device lost for the rest of the process: {reason}")]
    DeviceLost {
        /// The backend whose device is lost.
        backend: Backend,
        /// What the driver reported first.
        #[source]
        reason: DriverError,
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
    /// Reading or writing a file failed (the `SKEL_TRACE` timeline, a model or cache file);
    /// the operating system's error is the [`source`](std::error::Error::source).
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: std::path::PathBuf,
        /// What the operating system reported.
        source: std::io::Error,
    },
    /// A call that a recorded [`crate::Graph`] cannot hold (one that returns a value to the
    /// host: use its `run_into` form), or a launch whose closure made other calls than it
    /// made when it was recorded.
    #[error("graph recording: {0}")]
    Recording(String),
}

/// What a GPU runtime reported: a message in words and, where the failure came from a
/// driver call, the driver's own error (`cudarc::driver::DriverError`, `ocl::Error`, ...) as
/// its [`source`](std::error::Error::source), for programs that walk the chain or downcast.
///
/// It compares equal to its message and converts from a `String` or `&str`, so matching on
/// [`Error::Driver`] reads as before:
///
/// ```
/// use std::error::Error as _;
/// let io = std::io::Error::other("cuMemAlloc failed");
/// let e = skel::Error::Driver(skel::DriverError::with_source("CUDA: allocating", io));
/// assert!(matches!(&e, skel::Error::Driver(m) if m == "CUDA: allocating"));
/// let driver = e.source().unwrap().source().unwrap();
/// assert_eq!(driver.to_string(), "cuMemAlloc failed");
/// let plain = skel::Error::Driver("internal: buffer missing".into());
/// assert!(plain.source().unwrap().source().is_none());
/// ```
#[derive(Clone, Debug)]
pub struct DriverError {
    message: String,
    source: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
}

impl DriverError {
    /// A driver error described by `message` alone (no driver error behind it).
    pub fn new(message: impl Into<String>) -> Self {
        DriverError {
            message: message.into(),
            source: None,
        }
    }

    /// A driver error described by `message`, caused by `source`.
    pub fn with_source(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        DriverError {
            message: message.into(),
            source: Some(Arc::new(source)),
        }
    }

    /// The message, in words (it includes the driver's own text where there is one).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The same error with `context` put in front of its message; the source is kept.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))] // only the CUDA backend adds context
    pub(crate) fn context(mut self, context: impl std::fmt::Display) -> Self {
        self.message = format!("{context}: {}", self.message);
        self
    }
}

impl std::fmt::Display for DriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DriverError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        let source: &(dyn std::error::Error + 'static) = self.source.as_deref()?;
        Some(source)
    }
}

impl From<String> for DriverError {
    fn from(message: String) -> Self {
        DriverError::new(message)
    }
}

impl From<&str> for DriverError {
    fn from(message: &str) -> Self {
        DriverError::new(message)
    }
}

impl AsRef<str> for DriverError {
    fn as_ref(&self) -> &str {
        &self.message
    }
}

impl PartialEq<str> for DriverError {
    fn eq(&self, other: &str) -> bool {
        self.message == other
    }
}

impl PartialEq<&str> for DriverError {
    fn eq(&self, other: &&str) -> bool {
        self.message == *other
    }
}

impl PartialEq<String> for DriverError {
    fn eq(&self, other: &String) -> bool {
        self.message == *other
    }
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

    /// A driver error: `message` in words, `source` the driver's own error.
    #[cfg_attr(not(any(feature = "cuda", feature = "opencl")), allow(dead_code))]
    pub(crate) fn driver(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Driver(DriverError::with_source(message, source))
    }

    /// A failed file operation on `path`.
    pub(crate) fn io(path: impl Into<std::path::PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    fn error_type<T: std::error::Error + Send + Sync + 'static>() {}

    #[test]
    fn errors_are_send_sync_and_keep_their_sources() {
        error_type::<Error>();
        error_type::<DriverError>();
        let io = || std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        let e = Error::driver("CUDA: cuMemcpy: denied", io());
        assert_eq!(e.to_string(), "driver error: CUDA: cuMemcpy: denied");
        let mut chain = Vec::new();
        let mut next = e.source();
        while let Some(s) = next {
            chain.push(s.to_string());
            next = s.source();
        }
        assert_eq!(chain, ["CUDA: cuMemcpy: denied", "denied"]);
        let oom = Error::OutOfMemory(DriverError::with_source("CUDA: allocating 8 bytes", io()));
        assert!(oom.source().and_then(|s| s.source()).is_some());
        let lost = Error::DeviceLost {
            backend: Backend::Cuda,
            reason: DriverError::with_source("CUDA: illegal address", io()),
        };
        assert!(lost.source().and_then(|s| s.source()).is_some());
        let file = Error::io("/x/model.json", io());
        assert_eq!(file.to_string(), "/x/model.json: denied");
        let source = file.source().expect("the io error");
        assert!(source.downcast_ref::<std::io::Error>().is_some());
        // A copy (the kernel cache hands one to every caller) keeps the same source.
        let DriverError { source, .. } = DriverError::with_source("m", io()).context("c");
        assert_eq!(source.map(|s| s.to_string()).as_deref(), Some("denied"));
    }

    #[test]
    fn driver_errors_read_as_their_message() {
        let e = Error::Driver("no OpenCL device found".into());
        assert!(matches!(&e, Error::Driver(m) if m == "no OpenCL device found"));
        assert!(matches!(&e, Error::Driver(m) if *m == *"no OpenCL device found"));
        let Error::Driver(m) = e else { unreachable!() };
        assert_eq!(m.message(), "no OpenCL device found");
        assert_eq!(m.as_ref(), "no OpenCL device found");
        assert_eq!(m, String::from("no OpenCL device found"));
        assert!(m.source().is_none());
    }
}
