//! Backends and their selection.
//!
//! [`Backend`] names a backend; the crate-internal [`Execute`] trait is what each backend
//! implements, one method per skeleton, taking backend-neutral call plans
//! ([`crate::plan`]). Skeletons resolve a `Backend` to an executor with [`dispatch!`] and
//! never see which one runs them.

pub(crate) mod cpu;
#[cfg(feature = "rayon")]
pub(crate) mod rayon;

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

use crate::{Error, Result};

/// A place skeletons can run.
///
/// ```
/// use skel::prelude::*;
/// let b: Backend = "rayon".parse()?;
/// assert_eq!(b.to_string(), "rayon");
/// assert!(Backend::available().contains(&Backend::Cpu));
/// # Ok::<(), skel::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// Sequential, one CPU core: the reference every other backend is tested against.
    Cpu,
    /// All CPU cores through Rayon (feature `rayon`, default).
    Rayon,
    /// An NVIDIA GPU through CUDA (feature `cuda`).
    Cuda,
    /// Any OpenCL device (feature `opencl`).
    OpenCl,
}

impl Backend {
    /// Every backend, in order of preference for the default.
    pub const ALL: [Backend; 4] = [Backend::Cuda, Backend::OpenCl, Backend::Rayon, Backend::Cpu];

    /// The backends that are compiled in and have a device, best first.
    pub fn available() -> Vec<Backend> {
        Backend::ALL.into_iter().filter(|b| b.check().is_ok()).collect()
    }

    /// `Ok` if this backend can run here, else [`Error::BackendUnavailable`] saying why.
    pub fn check(self) -> Result<()> {
        let missing = |reason: &str| Err(Error::BackendUnavailable { backend: self, reason: reason.into() });
        match self {
            Backend::Cpu => Ok(()),
            Backend::Rayon if cfg!(feature = "rayon") => Ok(()),
            Backend::Rayon => missing("skel was built without the `rayon` feature"),
            Backend::Cuda => missing("skel was built without the `cuda` feature"),
            Backend::OpenCl => missing("skel was built without the `opencl` feature"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Rayon => "rayon",
            Backend::Cuda => "cuda",
            Backend::OpenCl => "opencl",
        }
    }

    fn code(self) -> u8 {
        self as u8 + 1
    }

    fn from_code(code: u8) -> Option<Backend> {
        Backend::ALL.into_iter().find(|b| b.code() == code)
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let wanted = s.trim().to_ascii_lowercase();
        Backend::ALL.into_iter().find(|b| b.name() == wanted).ok_or_else(|| {
            Error::InvalidArgument(format!("unknown backend {s:?}: expected one of cpu, rayon, cuda, opencl"))
        })
    }
}

/// 0: not set by `set_default_backend`; otherwise `Backend::code`.
static DEFAULT_BACKEND: AtomicU8 = AtomicU8::new(0);

/// Sets the backend that skeletons without `.backend(..)` use in this process.
///
/// Fails with [`Error::BackendUnavailable`] if `backend` cannot run here; the default is then
/// left as it was.
///
/// ```
/// skel::set_default_backend(skel::Backend::Cpu)?;
/// assert_eq!(skel::default_backend()?, skel::Backend::Cpu);
/// # Ok::<(), skel::Error>(())
/// ```
pub fn set_default_backend(backend: Backend) -> Result<()> {
    backend.check()?;
    DEFAULT_BACKEND.store(backend.code(), Ordering::Relaxed);
    Ok(())
}

/// The backend skeletons use when none is set per instance: the one given to
/// [`set_default_backend`], else `SKEL_BACKEND` from the environment, else the best available
/// (CUDA, then OpenCL, then Rayon, then Cpu).
///
/// An unknown or unavailable `SKEL_BACKEND` is an error, not a silent fallback.
pub fn default_backend() -> Result<Backend> {
    if let Some(b) = Backend::from_code(DEFAULT_BACKEND.load(Ordering::Relaxed)) {
        return Ok(b);
    }
    static FROM_ENV: OnceLock<Result<Backend, String>> = OnceLock::new();
    let chosen = FROM_ENV.get_or_init(|| match std::env::var("SKEL_BACKEND") {
        Ok(name) => name
            .parse::<Backend>()
            .and_then(|b| b.check().map(|()| b))
            .map_err(|e| format!("SKEL_BACKEND={name}: {e}")),
        Err(_) => Ok(Backend::available().first().copied().unwrap_or(Backend::Cpu)),
    });
    chosen.clone().map_err(Error::InvalidArgument)
}

/// Resolves a per-instance choice (or the process default) to a runnable backend.
pub(crate) fn resolve(choice: Option<Backend>) -> Result<Backend> {
    let backend = match choice {
        Some(b) => b,
        None => default_backend()?,
    };
    backend.check()?;
    Ok(backend)
}
