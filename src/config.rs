//! The process configuration: every `SKEL_*` environment variable, each also settable from
//! code.
//!
//! Each variable is one [`Setting`] static below. Its value is the one set from code
//! ([`Setting::set`]), else the environment variable's (read once, at its first use), else
//! the default. An empty variable counts as unset. The library reads the environment
//! nowhere else.
//!
//! | Variable | From code | Accepted values | Default | What it does |
//! |---|---|---|---|---|
//! | `SKEL_BACKEND` | [`BACKEND`], [`crate::set_default_backend`] | `auto`, `cpu`, `rayon`, `cuda`, `opencl` (any case) | `auto` | The backend of skeletons without `.backend(..)`; one that cannot run here is [`Error::BackendUnavailable`] |
//! | `SKEL_CHECK` | [`CHECK`] | a boolean | on in debug builds, off in release builds | Whether skeletons without `.checked(..)` run their user function checked ([`crate::check`]) |
//! | `SKEL_STREAMS` | [`STREAMS`] | 1 to 16 | unset: a cost model picks per call | CUDA streams of every call without `.streams(..)` |
//! | `SKEL_CUDA_DEVICES` | [`CUDA_DEVICES`] | 1 to 8 device ordinals, comma-separated (`0,0` is two slots on one GPU, for testing) | unset: every device, `SKEL_CUDA_DEVICE`'s first | The CUDA device slots. Fixed at the first CUDA use |
//! | `SKEL_CUDA_DEVICE` | [`CUDA_DEVICE`] | a device ordinal | `0` | The first CUDA device slot where `SKEL_CUDA_DEVICES` is unset; `skel::dist::init` (feature `mpi`) sets it to the node-local rank where nothing else did. Fixed at the first CUDA use |
//! | `SKEL_OPENCL_DEVICE` | [`OPENCL_DEVICE`] | a device index, or a case-insensitive substring of its name | the first GPU, else the first device | The OpenCL device. Fixed at the first OpenCL use |
//! | `SKEL_PAGEABLE` | [`PAGEABLE`] | a boolean | off | New host buffers are pageable even where a pinned allocator is registered |
//! | `SKEL_CACHE_DIR` | [`CACHE_DIR`] | a directory; `off` or `0` (`None` from code) disables | `skel` in the platform's cache directory (`$XDG_CACHE_HOME` or `~/.cache`, `~/Library/Caches`, `%LOCALAPPDATA%`) | Where compiled GPU kernels are kept across processes |
//! | `SKEL_DUMP_SOURCE` | [`DUMP_SOURCE`] | a directory | unset | Every generated kernel source (CUDA and OpenCL) is written there |
//! | `SKEL_JIT_LOG` | [`JIT_LOG`] | a boolean | off | Logs each kernel build (`info`, target `skel::jit`): compiled, and in how long, or loaded from disk |
//! | `SKEL_NVRTC_DIR` | [`NVRTC_DIR`] | a directory | unset | Looked in for libnvrtc after the loader path, before `$CUDA_HOME/lib64`, `$CUDA_PATH/lib64`, `/usr/local/cuda/lib64`. Fixed at the first kernel build |
//! | `SKEL_TUNE_DIR` | [`TUNE_DIR`] | a directory | `tune/` in the kernel cache directory (none where that is disabled) | Where [`Backend::Auto`]'s models are read and saved ([`crate::tune`]). Fixed at Auto's first use (then [`crate::tune::set_model_dir`]) |
//! | `SKEL_TUNE_LOG` | [`TUNE_LOG`] | a boolean | off | Logs every Auto decision and why (`info`, target `skel::tune`) |
//! | `SKEL_TRACE` | [`TRACE`] | a file | unset | Records every CUDA upload, kernel and download as Chrome-trace JSON there ([`crate::trace`]). Fixed at the first CUDA operation |
//! | `SKEL_LAUNCH` | [`LAUNCH`] | `auto`, `memory`, `compute` | `auto` | Forces the launch class of CUDA Map kernels (for measuring). Fixed at the first CUDA Map |
//! | `SKEL_STENCIL` | [`STENCIL`] | `auto`, `tiled`, `direct`, `capped`, `uncapped` | `auto` | Forces the CUDA MapOverlap kernel (for measuring). Fixed at the first CUDA MapOverlap |
//! | `SKEL_SCAN_TUNE` | [`SCAN_TUNE`] | `threads,bytes per thread[,min blocks per SM]`: threads 64, 128, 256, 512 or 1024, bytes at least 1, blocks 1 to 32 (default 1) | unset: `256,128,4` | The CUDA Scan kernel's shape (for benchmarking). Fixed at the first CUDA Scan |
//! | `SKEL_FILTER_TUNE` | [`FILTER_TUNE`] | as `SKEL_SCAN_TUNE` | unset: `512,96,3` | The CUDA Filter kernel's shape (for benchmarking). Fixed at the first CUDA Filter |
//! | `SKEL_SCAN_PACKED` | [`SCAN_PACKED`] | a boolean | on | CUDA Scan's look-back packs a tile's status and value into one 64-bit word for values of at most 4 bytes; off runs the general path (for benchmarking). Fixed at the first CUDA Scan |
//! | `SKEL_OPENCL_TUNE` | [`OPENCL_TUNE`] | any of `wg=W` (a power of two, 16 to 1024), `items=K` (a power of two, 1 to 64), `groups=G` (1 to 1024), `vec=0` or `vec=1`, comma-separated | unset: the measured plan | The launch shape of OpenCL Reduce and Scan (for benchmarking). Fixed at the first OpenCL Reduce or Scan |
//! | `SKEL_TUNE_BUDGET` | [`TUNE_BUDGET`] | 0 to 100 | `5` | The percentage of a job's time (since its first Auto call, at least 50 ms at 5 %) that [`Backend::Auto`] may spend trying backends other than the one it predicts fastest ([`crate::tune`]); `0`: only the predicted fastest is ever measured |
//!
//! A boolean is `1`, `true`, `yes` or `on`, or `0`, `false`, `no` or `off`, in any case.
//! The library also reads, as given, through the `dirs` crate: `HOME` and
//! `XDG_CACHE_HOME` (the default kernel cache directory on Linux), `CUDA_HOME` and `CUDA_PATH` (where NVRTC is looked for), and, in
//! `skel::dist::init` (feature `mpi`), `OMPI_COMM_WORLD_LOCAL_RANK`, `MPI_LOCALRANKID` or `SLURM_LOCALID`
//! (the node-local rank).
//!
//! ## Malformed values
//!
//! A malformed value is [`Error::InvalidArgument`] naming the variable, the value and what
//! it accepts, for every variable alike: never a silent fallback to the default. Every
//! skeleton call checks every variable first ([`validate`]), so the first skeleton call
//! returns the error even where the variable is first needed by something that cannot
//! fail (allocating a container, which logs the error and uses the default until then);
//! [`Setting::get`] returns it too. A value set from code is checked by
//! [`Setting::set`], and a valid one set from code replaces a malformed one in the
//! environment.
//!
//! ## Fixed at first use
//!
//! Some settings are taken once for the life of the process (the table says when): the
//! CUDA device slots open once, compiled kernels keep the shape they were built with.
//! [`Setting::set`] and [`Setting::unset`] change them only before that; after it, a
//! change is [`Error::InvalidArgument`] saying why (setting the value in use again is
//! fine). The other settings apply from the next call that reads them.
//!
//! ## Diagnostics
//!
//! The library never prints. What it has to say goes through the [`log`] crate: the
//! `SKEL_JIT_LOG` and `SKEL_TUNE_LOG` records at `info`, a tune model that cannot be read or
//! saved at `warn`, a malformed variable met where no error can be returned and a trace
//! file that cannot be written at exit at `error`, all under targets starting with `skel::`.
//! A program shows them by installing a logger (for example `env_logger` with
//! `RUST_LOG=skel=info`); without one they go nowhere.
//!
//! ```
//! use skel::config::{self, Source};
//!
//! // Code wins over the environment, and a value is checked when it is set.
//! config::CHECK.set(true)?;
//! assert!(config::CHECK.get()?);
//! assert_eq!(config::CHECK.source(), Source::Code);
//! config::STREAMS.set(Some(4))?;
//! let err = config::STREAMS.set(Some(0)).unwrap_err();
//! assert!(err.to_string().contains("SKEL_STREAMS"), "{err}");
//! // Back to SKEL_CHECK, else the default.
//! config::CHECK.unset()?;
//! assert_ne!(config::CHECK.source(), Source::Code);
//! // Every variable well-formed (what every skeleton call checks first).
//! config::validate()?;
//! # Ok::<(), skel::Error>(())
//! ```

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{OnceLock, PoisonError, RwLock};

use crate::{Backend, Error, Result};

/// The most CUDA streams a call is split over (the stream pool of each device slot).
const MAX_STREAMS: usize = 16;

/// The most CUDA device slots.
pub(crate) const MAX_DEVICE_SLOTS: usize = 8;

const BOOLEAN: &str = "a boolean: 1, true, yes or on, or 0, false, no or off (any case)";

/// Where a setting's value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// Set from code ([`Setting::set`]).
    Code,
    /// The environment variable (set and not empty; it may be malformed).
    Environment,
    /// Neither: the default.
    Default,
}

/// The launch class of CUDA Map kernels ([`LAUNCH`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Launch {
    /// From the user function's cost: memory-bound or compute-bound.
    Auto,
    /// Every Map kernel launched as memory-bound.
    Memory,
    /// Every Map kernel launched as compute-bound.
    Compute,
}

/// The CUDA MapOverlap kernel ([`STENCIL`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Stencil {
    /// Tiles, registers capped where that was measured to pay.
    Auto,
    /// The same as `Auto` (the name says what runs).
    Tiled,
    /// The direct kernel: no tiles.
    Direct,
    /// Tiles, registers capped for every 2D window.
    Capped,
    /// Tiles, registers never capped.
    Uncapped,
}

/// The shape asked of a tiled CUDA kernel ([`SCAN_TUNE`], [`FILTER_TUNE`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelShape {
    /// Threads per block: 64, 128, 256, 512 or 1024.
    pub threads: usize,
    /// Bytes of values per thread (at least 1; the kernel takes 1 to 32 values).
    pub bytes_per_thread: usize,
    /// Blocks per multiprocessor asked of the compiler: 1 to 32.
    pub min_blocks_per_sm: usize,
}

impl KernelShape {
    fn valid(&self) -> bool {
        [64, 128, 256, 512, 1024].contains(&self.threads)
            && self.bytes_per_thread > 0
            && (1..=32).contains(&self.min_blocks_per_sm)
    }
}

/// Overrides of the OpenCL Reduce and Scan launch shape ([`OPENCL_TUNE`]); `None` keeps
/// the measured default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct OpenClTune {
    /// Work-group size: a power of two, 16 to 1024.
    pub wg: Option<usize>,
    /// Values per work-item: a power of two, 1 to 64.
    pub items: Option<usize>,
    /// Work-groups per compute unit: 1 to 1024.
    pub groups: Option<usize>,
    /// Whether 4-byte values load 16 bytes at a time.
    pub vec: Option<bool>,
}

impl OpenClTune {
    fn valid(&self) -> bool {
        self.wg
            .map_or(true, |w| w.is_power_of_two() && (16..=1024).contains(&w))
            && self.items.map_or(true, |k| k.is_power_of_two() && k <= 64)
            && self.groups.map_or(true, |g| (1..=1024).contains(&g))
    }
}

mod sealed {
    /// A value type of a setting; a value that fits in 32 bits is read without a lock.
    pub trait Sealed: Sized {
        fn pack(&self) -> Option<u32> {
            None
        }
        fn unpack(_bits: u32) -> Option<Self> {
            None
        }
    }
}

/// The type of a setting's value (implemented for the types of the settings in this
/// module only).
pub trait Value: sealed::Sealed + Clone + PartialEq + fmt::Debug + Send + Sync + 'static {}

impl<T: sealed::Sealed + Clone + PartialEq + fmt::Debug + Send + Sync + 'static> Value for T {}

impl sealed::Sealed for bool {
    fn pack(&self) -> Option<u32> {
        Some(u32::from(*self))
    }
    fn unpack(bits: u32) -> Option<Self> {
        Some(bits != 0)
    }
}

impl sealed::Sealed for u32 {
    fn pack(&self) -> Option<u32> {
        Some(*self)
    }
    fn unpack(bits: u32) -> Option<Self> {
        Some(bits)
    }
}

impl sealed::Sealed for Option<usize> {
    fn pack(&self) -> Option<u32> {
        match *self {
            None => Some(0),
            Some(k) => u32::try_from(k).ok()?.checked_add(1),
        }
    }
    fn unpack(bits: u32) -> Option<Self> {
        Some(bits.checked_sub(1).map(|k| k as usize))
    }
}

/// Backends, launch classes and stencil kernels pack as their index in these lists.
const BACKENDS: [Backend; 5] = [
    Backend::Auto,
    Backend::Cpu,
    Backend::Rayon,
    Backend::Cuda,
    Backend::OpenCl,
];
const LAUNCHES: [Launch; 3] = [Launch::Auto, Launch::Memory, Launch::Compute];
const STENCILS: [Stencil; 5] = [
    Stencil::Auto,
    Stencil::Tiled,
    Stencil::Direct,
    Stencil::Capped,
    Stencil::Uncapped,
];

fn pack_in<T: PartialEq>(all: &[T], v: &T) -> Option<u32> {
    all.iter().position(|x| x == v).map(|i| i as u32)
}

fn unpack_in<T: Copy>(all: &[T], bits: u32) -> Option<T> {
    all.get(bits as usize).copied()
}

impl sealed::Sealed for Backend {
    fn pack(&self) -> Option<u32> {
        pack_in(&BACKENDS, self)
    }
    fn unpack(bits: u32) -> Option<Self> {
        unpack_in(&BACKENDS, bits)
    }
}

impl sealed::Sealed for Launch {
    fn pack(&self) -> Option<u32> {
        pack_in(&LAUNCHES, self)
    }
    fn unpack(bits: u32) -> Option<Self> {
        unpack_in(&LAUNCHES, bits)
    }
}

impl sealed::Sealed for Stencil {
    fn pack(&self) -> Option<u32> {
        pack_in(&STENCILS, self)
    }
    fn unpack(bits: u32) -> Option<Self> {
        unpack_in(&STENCILS, bits)
    }
}

impl sealed::Sealed for Option<PathBuf> {}
impl sealed::Sealed for Option<String> {}
impl sealed::Sealed for Option<Vec<u32>> {}
impl sealed::Sealed for Option<KernelShape> {}
impl sealed::Sealed for OpenClTune {}

/// The top half of [`Setting::word`]: no value from code, one behind the lock, one packed
/// into the bottom half.
const UNSET: u64 = 0;
const LOCKED: u64 = 1 << 32;
const PACKED: u64 = 2 << 32;

/// One configuration variable: its value from code, else from the environment, else its
/// default. See the [module docs](self) for the table of them all.
pub struct Setting<T: 'static> {
    name: &'static str,
    accepted: &'static str,
    /// The variable's text as a value (`None`: malformed); an accepted value only.
    parse: fn(&OsStr) -> Option<T>,
    /// Whether a value is accepted (what `parse` also ensures).
    accepts: fn(&T) -> bool,
    /// A further check of a value set from code (a backend that cannot run here).
    admit: fn(&T) -> Result<()>,
    default: fn() -> T,
    /// What takes the value for good, where something does.
    fixed_by: Option<&'static str>,
    /// Whether there is a value from code, and the value itself where it packs.
    word: AtomicU64,
    code: RwLock<Option<T>>,
    /// The environment's value, or its text where malformed.
    env: OnceLock<std::result::Result<Option<T>, OsString>>,
    /// Something took the value for good.
    used: AtomicBool,
    /// A malformed value was logged where no error could be returned.
    logged: AtomicBool,
}

fn admit_any<T>(_: &T) -> Result<()> {
    Ok(())
}

fn accept_any<T>(_: &T) -> bool {
    true
}

impl<T: Value> Setting<T> {
    const fn new(
        name: &'static str,
        accepted: &'static str,
        parse: fn(&OsStr) -> Option<T>,
        default: fn() -> T,
    ) -> Self {
        Setting {
            name,
            accepted,
            parse,
            accepts: accept_any::<T>,
            admit: admit_any::<T>,
            default,
            fixed_by: None,
            word: AtomicU64::new(UNSET),
            code: RwLock::new(None),
            env: OnceLock::new(),
            used: AtomicBool::new(false),
            logged: AtomicBool::new(false),
        }
    }

    const fn accepts(mut self, accepts: fn(&T) -> bool) -> Self {
        self.accepts = accepts;
        self
    }

    const fn admit(mut self, admit: fn(&T) -> Result<()>) -> Self {
        self.admit = admit;
        self
    }

    const fn fixed_by(mut self, what: &'static str) -> Self {
        self.fixed_by = Some(what);
        self
    }

    /// The environment variable, e.g. `"SKEL_CHECK"`.
    ///
    /// ```
    /// assert_eq!(skel::config::CHECK.name(), "SKEL_CHECK");
    /// ```
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// What the variable accepts, in words (as in the module's table).
    ///
    /// ```
    /// assert!(skel::config::STREAMS.accepted().contains("16"));
    /// ```
    pub fn accepted(&self) -> &'static str {
        self.accepted
    }

    /// The value: set from code, else from the environment, else the default.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] where the value comes from a malformed environment
    /// variable (the message names the variable, the value and what it accepts).
    ///
    /// ```
    /// // Unset (or set and valid) in the environment that runs this example:
    /// let k: Option<usize> = skel::config::STREAMS.get()?;
    /// assert!(k.map_or(true, |k| (1..=16).contains(&k)));
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn get(&self) -> Result<T> {
        self.resolve().map(|(v, _)| v)
    }

    /// Sets the value from code; it takes precedence over the environment.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] where the value is not accepted (see the module's table)
    /// or where the setting is already fixed for the process with another value (see "Fixed
    /// at first use" in the module docs); [`Error::BackendUnavailable`] for a backend that
    /// cannot run here. The value is then left as it was.
    ///
    /// ```
    /// use skel::config;
    /// config::PAGEABLE.set(true)?;
    /// assert!(config::PAGEABLE.get()?);
    /// assert!(config::OPENCL_TUNE
    ///     .set(config::OpenClTune { wg: Some(100), ..Default::default() })
    ///     .is_err()); // not a power of two
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn set(&self, value: T) -> Result<()> {
        if !(self.accepts)(&value) {
            return Err(Error::InvalidArgument(format!(
                "{} set from code to {value:?}: expected {}",
                self.name, self.accepted
            )));
        }
        (self.admit)(&value)?;
        self.replace(Some(value))
    }

    /// Forgets the value set from code: the environment's value (else the default) applies
    /// again.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] where the setting is already fixed for the process and
    /// that would change its value.
    ///
    /// ```
    /// use skel::config::{self, Source};
    /// config::JIT_LOG.set(true)?;
    /// config::JIT_LOG.unset()?;
    /// assert_ne!(config::JIT_LOG.source(), Source::Code);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn unset(&self) -> Result<()> {
        self.replace(None)
    }

    /// Where the value comes from now.
    ///
    /// ```
    /// use skel::config::{self, Source};
    /// config::TUNE_LOG.set(false)?;
    /// assert_eq!(config::TUNE_LOG.source(), Source::Code);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn source(&self) -> Source {
        if self.word.load(Ordering::Acquire) != UNSET {
            return Source::Code;
        }
        match self.env() {
            Ok(None) => Source::Default,
            _ => Source::Environment,
        }
    }

    /// The value and where it comes from.
    pub(crate) fn resolve(&self) -> Result<(T, Source)> {
        let word = self.word.load(Ordering::Acquire);
        if word & !u64::from(u32::MAX) == PACKED {
            if let Some(v) = T::unpack(word as u32) {
                return Ok((v, Source::Code));
            }
        }
        if word == UNSET {
            return self.effective(None);
        }
        let code = self.code.read().unwrap_or_else(PoisonError::into_inner);
        self.effective(code.as_ref())
    }

    /// The value, or the default where the environment's is malformed: for places that
    /// cannot return an error. Every skeleton call returns that error ([`validate`]); here
    /// it is logged, once.
    pub(crate) fn value(&self) -> T {
        self.get().unwrap_or_else(|e| self.fallback(e))
    }

    /// The value, taken for good: from now on [`Setting::set`] cannot change it.
    pub(crate) fn fix(&self) -> Result<T> {
        if self.used.load(Ordering::Acquire) {
            return self.get();
        }
        // Under the lock, so that no `set` slips in between being marked used and read.
        let code = self.code.read().unwrap_or_else(PoisonError::into_inner);
        self.used.store(true, Ordering::Release);
        self.effective(code.as_ref()).map(|(v, _)| v)
    }

    /// [`Setting::fix`], or the default where the environment's value is malformed (logged,
    /// as in [`Setting::value`]).
    pub(crate) fn fixed_value(&self) -> T {
        self.fix().unwrap_or_else(|e| self.fallback(e))
    }

    fn fallback(&self, e: Error) -> T {
        if !self.logged.swap(true, Ordering::Relaxed) {
            log::error!(target: "skel::config", "{e}; using the default until it is corrected");
        }
        (self.default)()
    }

    fn effective(&self, code: Option<&T>) -> Result<(T, Source)> {
        if let Some(v) = code {
            return Ok((v.clone(), Source::Code));
        }
        Ok(match self.env()? {
            Some(v) => (v.clone(), Source::Environment),
            None => ((self.default)(), Source::Default),
        })
    }

    fn env(&self) -> Result<Option<&T>> {
        match self.env.get_or_init(|| read_env(self.name, self.parse)) {
            Ok(v) => Ok(v.as_ref()),
            Err(text) => Err(Error::InvalidArgument(format!(
                "{}={:?} in the environment: expected {}",
                self.name,
                text.to_string_lossy(),
                self.accepted
            ))),
        }
    }

    fn replace(&self, value: Option<T>) -> Result<()> {
        let mut code = self.code.write().unwrap_or_else(PoisonError::into_inner);
        if self.used.load(Ordering::Acquire) {
            let now = self.effective(code.as_ref()).ok().map(|(v, _)| v);
            let then = self.effective(value.as_ref()).ok().map(|(v, _)| v);
            if now != then {
                return Err(Error::InvalidArgument(format!(
                    "{} cannot change now: {} (it is {now:?}); set it before that",
                    self.name,
                    self.fixed_by.unwrap_or("it is in use")
                )));
            }
        }
        let word = match &value {
            None => UNSET,
            Some(v) => v.pack().map_or(LOCKED, |bits| PACKED | u64::from(bits)),
        };
        if value.is_none() {
            // The environment's value applies again: check it at the next call.
            VALID.store(false, Ordering::Release);
        }
        *code = value;
        self.word.store(word, Ordering::Release);
        Ok(())
    }
}

impl<T: Value> fmt::Debug for Setting<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Setting")
            .field("name", &self.name)
            .field("value", &self.get())
            .field("source", &self.source())
            .finish()
    }
}

/// The variable `name` through `parse`: `Ok(None)` where unset or empty, `Err(text)` where
/// malformed.
fn read_env<T>(
    name: &str,
    parse: fn(&OsStr) -> Option<T>,
) -> std::result::Result<Option<T>, OsString> {
    match std::env::var_os(name) {
        None => Ok(None),
        Some(v) if v.to_str().is_some_and(|s| s.trim().is_empty()) => Ok(None),
        Some(v) => parse(&v).map(Some).ok_or(v),
    }
}

/// What [`validate`] checks: each setting, whatever its type.
trait Check: Sync {
    fn check(&self) -> Result<()>;
    #[cfg(test)]
    fn name(&self) -> &'static str;
}

impl<T: Value> Check for Setting<T> {
    fn check(&self) -> Result<()> {
        self.resolve().map(drop)
    }
    #[cfg(test)]
    fn name(&self) -> &'static str {
        self.name
    }
}

/// Every setting, in the order of the table.
fn all() -> [&'static dyn Check; 21] {
    [
        &BACKEND,
        &CHECK,
        &STREAMS,
        &CUDA_DEVICES,
        &CUDA_DEVICE,
        &OPENCL_DEVICE,
        &PAGEABLE,
        &CACHE_DIR,
        &DUMP_SOURCE,
        &JIT_LOG,
        &NVRTC_DIR,
        &TUNE_DIR,
        &TUNE_LOG,
        &TRACE,
        &LAUNCH,
        &STENCIL,
        &SCAN_TUNE,
        &FILTER_TUNE,
        &SCAN_PACKED,
        &OPENCL_TUNE,
        &TUNE_BUDGET,
    ]
}

/// Every setting checked and found well-formed (until a value set from code is unset).
static VALID: AtomicBool = AtomicBool::new(false);

/// Checks every variable: `Ok` when each one's value (from code, else the environment) is
/// well-formed. Every skeleton call does this first, so a malformed variable is the error
/// of the first call whichever variable it is; a program may call it at start to fail
/// early.
///
/// # Errors
/// [`Error::InvalidArgument`] for the first malformed variable, in the order of the table.
///
/// ```
/// skel::config::validate()?;
/// # Ok::<(), skel::Error>(())
/// ```
pub fn validate() -> Result<()> {
    if VALID.load(Ordering::Acquire) {
        return Ok(());
    }
    for s in all() {
        s.check()?;
    }
    VALID.store(true, Ordering::Release);
    Ok(())
}

// ---- the settings ---------------------------------------------------------------------

/// `SKEL_BACKEND`: the backend of skeletons without `.backend(..)` (`auto`, `cpu`, `rayon`,
/// `cuda`, `opencl`; default [`Backend::Auto`]). Setting it checks that the backend can run
/// here, as [`crate::set_default_backend`] (the same setting) does; [`crate::default_backend`]
/// checks one from the environment.
///
/// ```
/// skel::config::BACKEND.set(skel::Backend::Cpu)?;
/// assert_eq!(skel::default_backend()?, skel::Backend::Cpu);
/// # Ok::<(), skel::Error>(())
/// ```
pub static BACKEND: Setting<Backend> = Setting::new(
    "SKEL_BACKEND",
    "one of auto, cpu, rayon, cuda, opencl (any case)",
    parse_backend,
    default_backend,
)
.admit(admit_backend);

/// `SKEL_CHECK`: whether skeletons without `.checked(..)` run their user function checked
/// (a boolean; default: checked in debug builds, unchecked in release builds). See
/// [`crate::check`].
///
/// ```
/// // Checked from here on, release build or not, whatever SKEL_CHECK says.
/// skel::config::CHECK.set(true)?;
/// assert!(skel::config::CHECK.get()?);
/// # Ok::<(), skel::Error>(())
/// ```
pub static CHECK: Setting<bool> = Setting::new("SKEL_CHECK", BOOLEAN, parse_bool, build_checks);

/// `SKEL_STREAMS`: the CUDA streams of every call without `.streams(..)` (1 to 16; default
/// `None`: a cost model picks per call).
///
/// ```
/// skel::config::STREAMS.set(Some(2))?;
/// assert_eq!(skel::config::STREAMS.get()?, Some(2));
/// skel::config::STREAMS.set(None)?; // the cost model, whatever the environment says
/// # Ok::<(), skel::Error>(())
/// ```
pub static STREAMS: Setting<Option<usize>> = Setting::new(
    "SKEL_STREAMS",
    "a number of streams, 1 to 16",
    parse_streams,
    none,
)
.accepts(streams_accepted);

/// `SKEL_CUDA_DEVICES`: the CUDA device slots, as device ordinals (1 to 8 of them; one may
/// repeat, which makes two slots on one GPU, for testing). Default `None`: every device,
/// [`CUDA_DEVICE`] first. Fixed at the first CUDA use.
///
/// ```
/// skel::config::CUDA_DEVICES.set(Some(vec![0, 0]))?;
/// assert_eq!(skel::config::CUDA_DEVICES.get()?, Some(vec![0, 0]));
/// assert!(skel::config::CUDA_DEVICES.set(Some(Vec::new())).is_err());
/// # Ok::<(), skel::Error>(())
/// ```
pub static CUDA_DEVICES: Setting<Option<Vec<u32>>> = Setting::new(
    "SKEL_CUDA_DEVICES",
    "1 to 8 CUDA device ordinals, comma-separated (e.g. 0,1)",
    parse_ordinals,
    none,
)
.accepts(ordinals_accepted)
.fixed_by("the CUDA device slots were opened at the first CUDA use");

/// `SKEL_CUDA_DEVICE`: the first CUDA device slot where [`CUDA_DEVICES`] is not set (a
/// device ordinal; default 0). `skel::dist::init` (feature `mpi`) sets it to the node-local rank where
/// neither code nor the environment did. Fixed at the first CUDA use.
///
/// ```
/// skel::config::CUDA_DEVICE.set(0)?;
/// assert_eq!(skel::config::CUDA_DEVICE.get()?, 0);
/// # Ok::<(), skel::Error>(())
/// ```
pub static CUDA_DEVICE: Setting<u32> = Setting::new(
    "SKEL_CUDA_DEVICE",
    "a CUDA device ordinal",
    parse_ordinal,
    zero,
)
.fixed_by("the CUDA device slots were opened at the first CUDA use");

/// `SKEL_OPENCL_DEVICE`: the OpenCL device, as an index or a case-insensitive substring of
/// its name (default `None`: the first GPU, else the first device). Fixed at the first
/// OpenCL use.
///
/// ```
/// skel::config::OPENCL_DEVICE.set(Some("NVIDIA".to_string()))?;
/// # Ok::<(), skel::Error>(())
/// ```
pub static OPENCL_DEVICE: Setting<Option<String>> = Setting::new(
    "SKEL_OPENCL_DEVICE",
    "an OpenCL device index or a substring of its name",
    parse_text,
    none,
)
.fixed_by("the OpenCL device was opened at the first OpenCL use");

/// `SKEL_PAGEABLE`: new host buffers are pageable even where a pinned allocator is
/// registered (a boolean; default off). Buffers already allocated keep their memory.
///
/// ```
/// skel::config::PAGEABLE.set(false)?;
/// # Ok::<(), skel::Error>(())
/// ```
pub static PAGEABLE: Setting<bool> = Setting::new("SKEL_PAGEABLE", BOOLEAN, parse_bool, off);

/// `SKEL_CACHE_DIR`: where compiled GPU kernels are kept across processes. From the
/// environment a directory, or `off` / `0` to disable; from code `Some(dir)`, or `None` to
/// disable. Default `skel` in the platform's cache directory (the `dirs` crate:
/// `$XDG_CACHE_HOME` or `~/.cache` on Linux, `~/Library/Caches` on macOS, `%LOCALAPPDATA%` on
/// Windows); `None`, with a `warn` log record once, where there is none.
///
/// ```
/// skel::config::CACHE_DIR.set(None)?; // no disk cache
/// assert_eq!(skel::config::CACHE_DIR.get()?, None);
/// # Ok::<(), skel::Error>(())
/// ```
pub static CACHE_DIR: Setting<Option<PathBuf>> = Setting::new(
    "SKEL_CACHE_DIR",
    "a directory, or off (or 0) to disable the kernel cache",
    parse_cache_dir,
    default_cache_dir,
);

/// `SKEL_DUMP_SOURCE`: a directory every generated kernel source (CUDA and OpenCL) is
/// written to (default `None`). Failures to write are ignored: it is a debugging aid.
///
/// ```
/// skel::config::DUMP_SOURCE.set(Some(std::env::temp_dir().join("skel-sources")))?;
/// # Ok::<(), skel::Error>(())
/// ```
pub static DUMP_SOURCE: Setting<Option<PathBuf>> =
    Setting::new("SKEL_DUMP_SOURCE", "a directory", parse_path, none);

/// `SKEL_JIT_LOG`: log each GPU kernel build (a boolean; default off): compiled, and in how
/// long, or loaded from the disk cache, at `info` under the target `skel::jit`.
///
/// ```
/// skel::config::JIT_LOG.set(true)?;
/// # Ok::<(), skel::Error>(())
/// ```
pub static JIT_LOG: Setting<bool> = Setting::new("SKEL_JIT_LOG", BOOLEAN, parse_bool, off);

/// `SKEL_NVRTC_DIR`: a directory looked in for libnvrtc after the loader path, before
/// `$CUDA_HOME/lib64`, `$CUDA_PATH/lib64` and `/usr/local/cuda/lib64` (default `None`).
/// Fixed at the first kernel build.
///
/// ```
/// skel::config::NVRTC_DIR.set(Some("/opt/cuda/lib64".into()))?;
/// # Ok::<(), skel::Error>(())
/// ```
pub static NVRTC_DIR: Setting<Option<PathBuf>> =
    Setting::new("SKEL_NVRTC_DIR", "a directory", parse_path, none)
        .fixed_by("NVRTC was looked up at the first CUDA kernel build");

/// `SKEL_TUNE_DIR`: where [`Backend::Auto`]'s models are read and saved (default: `tune/`
/// in the [`CACHE_DIR`], `None` where that is disabled: the models then live in memory).
/// Fixed at Auto's first use.
///
/// ```
/// skel::config::TUNE_DIR.set(Some(std::env::temp_dir().join("skel-tune")))?;
/// # Ok::<(), skel::Error>(())
/// ```
pub static TUNE_DIR: Setting<Option<PathBuf>> =
    Setting::new("SKEL_TUNE_DIR", "a directory", parse_path, default_tune_dir).fixed_by(
        "Backend::Auto opened its models at its first use \
             (skel::tune::set_model_dir changes the directory from then on)",
    );

/// `SKEL_TUNE_LOG`: log every [`Backend::Auto`] decision and why, at `info` under the
/// target `skel::tune` (a boolean; default off). [`crate::tune::explain`] returns the last
/// one without a logger.
///
/// ```
/// skel::config::TUNE_LOG.set(true)?;
/// # Ok::<(), skel::Error>(())
/// ```
pub static TUNE_LOG: Setting<bool> = Setting::new("SKEL_TUNE_LOG", BOOLEAN, parse_bool, off);

/// `SKEL_TRACE`: a file every CUDA upload, kernel and download is recorded in, as
/// Chrome-trace JSON (default `None`). See [`crate::trace`]. Fixed at the first CUDA
/// operation.
///
/// ```
/// skel::config::TRACE.set(Some(std::env::temp_dir().join("skel-trace.json")))?;
/// # Ok::<(), skel::Error>(())
/// ```
pub static TRACE: Setting<Option<PathBuf>> = Setting::new(
    "SKEL_TRACE",
    "a file to write the trace to",
    parse_path,
    none,
)
.fixed_by("the trace started at the first CUDA operation");

/// `SKEL_LAUNCH`: forces the launch class of CUDA Map kernels (`auto`, `memory`,
/// `compute`; default [`Launch::Auto`]), for measuring. Fixed at the first CUDA Map.
///
/// ```
/// skel::config::LAUNCH.set(skel::config::Launch::Memory)?;
/// # Ok::<(), skel::Error>(())
/// ```
pub static LAUNCH: Setting<Launch> = Setting::new(
    "SKEL_LAUNCH",
    "one of auto, memory, compute",
    parse_launch,
    launch_auto,
)
.fixed_by("CUDA Map kernels were built with it");

/// `SKEL_STENCIL`: forces the CUDA MapOverlap kernel (`auto`, `tiled`, `direct`, `capped`,
/// `uncapped`; default [`Stencil::Auto`]), for measuring. Fixed at the first CUDA
/// MapOverlap.
///
/// ```
/// skel::config::STENCIL.set(skel::config::Stencil::Direct)?;
/// # Ok::<(), skel::Error>(())
/// ```
pub static STENCIL: Setting<Stencil> = Setting::new(
    "SKEL_STENCIL",
    "one of auto, tiled, direct, capped, uncapped",
    parse_stencil,
    stencil_auto,
)
.fixed_by("CUDA MapOverlap kernels were built with it");

const SHAPE: &str = "threads,bytes per thread[,min blocks per SM]: threads 64, 128, 256, 512 \
                     or 1024, bytes at least 1, blocks 1 to 32";

/// `SKEL_SCAN_TUNE`: the CUDA Scan kernel's shape, for benchmarking (default `None`: 256
/// threads, 128 bytes per thread, 4 blocks per SM). Fixed at the first CUDA Scan.
///
/// ```
/// use skel::config::{KernelShape, SCAN_TUNE};
/// SCAN_TUNE.set(Some(KernelShape { threads: 512, bytes_per_thread: 64, min_blocks_per_sm: 2 }))?;
/// # Ok::<(), skel::Error>(())
/// ```
pub static SCAN_TUNE: Setting<Option<KernelShape>> =
    Setting::new("SKEL_SCAN_TUNE", SHAPE, parse_shape, none)
        .accepts(shape_accepted)
        .fixed_by("CUDA Scan kernels were built with it");

/// `SKEL_FILTER_TUNE`: the CUDA Filter kernel's shape, for benchmarking (default `None`:
/// 512 threads, 96 bytes per thread, 3 blocks per SM). Fixed at the first CUDA Filter.
///
/// ```
/// use skel::config::{KernelShape, FILTER_TUNE};
/// let odd = KernelShape { threads: 100, bytes_per_thread: 64, min_blocks_per_sm: 1 };
/// assert!(FILTER_TUNE.set(Some(odd)).is_err());
/// ```
pub static FILTER_TUNE: Setting<Option<KernelShape>> =
    Setting::new("SKEL_FILTER_TUNE", SHAPE, parse_shape, none)
        .accepts(shape_accepted)
        .fixed_by("CUDA Filter kernels were built with it");

/// `SKEL_SCAN_PACKED`: whether CUDA Scan's look-back packs a tile's status and value into
/// one 64-bit word for values of at most 4 bytes (a boolean; default on; off runs the
/// general path, for benchmarking). Fixed at the first CUDA Scan.
///
/// ```
/// skel::config::SCAN_PACKED.set(false)?;
/// # Ok::<(), skel::Error>(())
/// ```
pub static SCAN_PACKED: Setting<bool> = Setting::new("SKEL_SCAN_PACKED", BOOLEAN, parse_bool, on)
    .fixed_by("CUDA Scan kernels were built with it");

/// `SKEL_OPENCL_TUNE`: overrides of the OpenCL Reduce and Scan launch shape, for
/// benchmarking (default: none). From the environment any of `wg=W`, `items=K`,
/// `groups=G`, `vec=0` or `vec=1`, comma-separated. Fixed at the first OpenCL Reduce or Scan.
///
/// ```
/// use skel::config::{OpenClTune, OPENCL_TUNE};
/// OPENCL_TUNE.set(OpenClTune { wg: Some(128), items: Some(8), ..Default::default() })?;
/// # Ok::<(), skel::Error>(())
/// ```
pub static OPENCL_TUNE: Setting<OpenClTune> = Setting::new(
    "SKEL_OPENCL_TUNE",
    "any of wg=<a power of two, 16 to 1024>, items=<a power of two, 1 to 64>, \
     groups=<1 to 1024 per compute unit>, vec=0|1, comma-separated",
    parse_opencl_tune,
    OpenClTune::default,
)
.accepts(OpenClTune::valid)
.fixed_by("OpenCL Reduce and Scan kernels were built with it");

/// `SKEL_TUNE_BUDGET`: the percentage (0 to 100, default 5) of a job's time, counted from
/// its first `Backend::Auto` call, that Auto may spend calibrating backends other than the
/// one it predicts fastest (at least 50 ms at the default, in proportion otherwise); `0`
/// measures only the predicted fastest. See [`crate::tune`].
///
/// ```
/// skel::config::TUNE_BUDGET.set(10)?;
/// assert_eq!(skel::config::TUNE_BUDGET.get()?, 10);
/// # skel::config::TUNE_BUDGET.set(5)?;
/// # Ok::<(), skel::Error>(())
/// ```
pub static TUNE_BUDGET: Setting<u32> = Setting::new(
    "SKEL_TUNE_BUDGET",
    "a percentage, 0 to 100",
    parse_percent,
    five,
)
.accepts(|p| *p <= 100);

// ---- other variables ---------------------------------------------------------------------

/// The CUDA toolkit's library directories from `$CUDA_HOME` and `$CUDA_PATH`, where set.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn cuda_toolkit_lib_dirs() -> Vec<PathBuf> {
    ["CUDA_HOME", "CUDA_PATH"]
        .into_iter()
        .filter_map(std::env::var_os)
        .map(|d| PathBuf::from(d).join("lib64"))
        .collect()
}

/// This process's rank on its node, as the MPI launcher or the batch system says
/// (`OMPI_COMM_WORLD_LOCAL_RANK`, `MPI_LOCALRANKID` or `SLURM_LOCALID`).
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) fn node_local_rank() -> Option<u32> {
    [
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "MPI_LOCALRANKID",
        "SLURM_LOCALID",
    ]
    .into_iter()
    .find_map(|v| std::env::var(v).ok())
    .and_then(|r| r.trim().parse().ok())
}

// ---- parsing ---------------------------------------------------------------------------

fn text(s: &OsStr) -> Option<&str> {
    s.to_str().map(str::trim)
}

fn parse_bool(s: &OsStr) -> Option<bool> {
    match text(s)?.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

fn parse_backend(s: &OsStr) -> Option<Backend> {
    text(s)?.parse().ok()
}

fn parse_ordinal(s: &OsStr) -> Option<u32> {
    text(s)?.parse().ok()
}

fn parse_percent(s: &OsStr) -> Option<u32> {
    text(s)?.parse().ok().filter(|p| *p <= 100)
}

fn five() -> u32 {
    5
}

fn parse_ordinals(s: &OsStr) -> Option<Option<Vec<u32>>> {
    let list = text(s)?
        .split(',')
        .map(|o| o.trim().parse().ok())
        .collect::<Option<Vec<u32>>>()?;
    Some(Some(list)).filter(ordinals_accepted)
}

fn ordinals_accepted(list: &Option<Vec<u32>>) -> bool {
    list.as_ref()
        .map_or(true, |l| (1..=MAX_DEVICE_SLOTS).contains(&l.len()))
}

fn parse_streams(s: &OsStr) -> Option<Option<usize>> {
    Some(Some(text(s)?.parse().ok()?)).filter(streams_accepted)
}

fn streams_accepted(k: &Option<usize>) -> bool {
    k.map_or(true, |k| (1..=MAX_STREAMS).contains(&k))
}

fn parse_path(s: &OsStr) -> Option<Option<PathBuf>> {
    Some(Some(PathBuf::from(s)))
}

fn parse_cache_dir(s: &OsStr) -> Option<Option<PathBuf>> {
    match text(s) {
        Some(t) if t.eq_ignore_ascii_case("off") || t == "0" => Some(None),
        _ => parse_path(s),
    }
}

fn parse_text(s: &OsStr) -> Option<Option<String>> {
    Some(Some(text(s)?.to_string()))
}

fn parse_launch(s: &OsStr) -> Option<Launch> {
    match text(s)?.to_ascii_lowercase().as_str() {
        "auto" => Some(Launch::Auto),
        "memory" => Some(Launch::Memory),
        "compute" => Some(Launch::Compute),
        _ => None,
    }
}

fn parse_stencil(s: &OsStr) -> Option<Stencil> {
    match text(s)?.to_ascii_lowercase().as_str() {
        "auto" => Some(Stencil::Auto),
        "tiled" => Some(Stencil::Tiled),
        "direct" => Some(Stencil::Direct),
        "capped" => Some(Stencil::Capped),
        "uncapped" => Some(Stencil::Uncapped),
        _ => None,
    }
}

fn parse_shape(s: &OsStr) -> Option<Option<KernelShape>> {
    let mut it = text(s)?.split(',').map(|x| x.trim().parse::<usize>().ok());
    let shape = KernelShape {
        threads: it.next()??,
        bytes_per_thread: it.next()??,
        min_blocks_per_sm: it.next().unwrap_or(Some(1))?,
    };
    if it.next().is_some() {
        return None;
    }
    Some(Some(shape)).filter(shape_accepted)
}

fn shape_accepted(s: &Option<KernelShape>) -> bool {
    s.as_ref().map_or(true, KernelShape::valid)
}

fn parse_opencl_tune(s: &OsStr) -> Option<OpenClTune> {
    let mut t = OpenClTune::default();
    for part in text(s)?.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, val) = part.split_once('=')?;
        let val: usize = val.trim().parse().ok()?;
        match key.trim() {
            "wg" => t.wg = Some(val),
            "items" => t.items = Some(val),
            "groups" => t.groups = Some(val),
            "vec" if val <= 1 => t.vec = Some(val == 1),
            _ => return None,
        }
    }
    Some(t).filter(OpenClTune::valid)
}

// ---- defaults ----------------------------------------------------------------------------

fn default_backend() -> Backend {
    Backend::Auto
}

fn admit_backend(b: &Backend) -> Result<()> {
    b.check()
}

fn build_checks() -> bool {
    cfg!(debug_assertions)
}

fn on() -> bool {
    true
}

fn off() -> bool {
    false
}

fn zero() -> u32 {
    0
}

fn none<T>() -> Option<T> {
    None
}

fn launch_auto() -> Launch {
    Launch::Auto
}

fn stencil_auto() -> Stencil {
    Stencil::Auto
}

fn default_cache_dir() -> Option<PathBuf> {
    // dirs reads XDG_CACHE_HOME / HOME (Linux), the user's Library (macOS) or the known
    // folder API (Windows); an empty XDG_CACHE_HOME counts as unset there too.
    let dir = dirs::cache_dir().map(|d| d.join("skel"));
    static SAID: std::sync::Once = std::sync::Once::new();
    if dir.is_none() {
        SAID.call_once(|| {
            log::warn!(
                target: "skel::config",
                "no cache directory known (no HOME or platform cache folder): compiled kernels \
                 and Backend::Auto's models are not kept across processes; set SKEL_CACHE_DIR"
            )
        });
    }
    dir
}

fn default_tune_dir() -> Option<PathBuf> {
    CACHE_DIR.value().map(|d| d.join("tune"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(s: &str) -> &OsStr {
        OsStr::new(s)
    }

    #[test]
    fn booleans_take_the_common_spellings_in_any_case_and_nothing_else() {
        for t in ["1", "true", "TRUE", "Yes", "on", " ON "] {
            assert_eq!(parse_bool(os(t)), Some(true), "{t}");
        }
        for f in ["0", "false", "False", "NO", "off", "Off"] {
            assert_eq!(parse_bool(os(f)), Some(false), "{f}");
        }
        for bad in ["2", "tru", "y", "enabled", "-1", "o n"] {
            assert_eq!(parse_bool(os(bad)), None, "{bad}");
        }
    }

    #[test]
    fn every_kind_of_value_parses_and_rejects_what_it_does_not_accept() {
        assert_eq!(parse_backend(os("OpenCL")), Some(Backend::OpenCl));
        assert_eq!(parse_backend(os("gpu")), None);
        assert_eq!(parse_ordinal(os(" 3 ")), Some(3));
        assert_eq!(parse_ordinal(os("-1")), None);
        assert_eq!(parse_ordinals(os("0, 0,1")), Some(Some(vec![0, 0, 1])));
        for bad in ["0,,1", "a", "0,1,2,3,4,5,6,7,8"] {
            assert_eq!(parse_ordinals(os(bad)), None, "{bad}");
        }
        assert_eq!(parse_streams(os("16")), Some(Some(16)));
        for bad in ["0", "17", "four"] {
            assert_eq!(parse_streams(os(bad)), None, "{bad}");
        }
        assert_eq!(parse_cache_dir(os("OFF")), Some(None));
        assert_eq!(parse_cache_dir(os("0")), Some(None));
        assert_eq!(
            parse_cache_dir(os("/tmp/k")),
            Some(Some(PathBuf::from("/tmp/k")))
        );
        assert_eq!(parse_text(os(" NVIDIA ")), Some(Some("NVIDIA".into())));
        assert_eq!(parse_launch(os("Compute")), Some(Launch::Compute));
        assert_eq!(parse_launch(os("fast")), None);
        assert_eq!(parse_stencil(os("uncapped")), Some(Stencil::Uncapped));
        assert_eq!(parse_stencil(os("tile")), None);
        assert_eq!(
            parse_shape(os("512, 64")),
            Some(Some(KernelShape {
                threads: 512,
                bytes_per_thread: 64,
                min_blocks_per_sm: 1
            }))
        );
        assert_eq!(
            parse_shape(os("256,128,4"))
                .flatten()
                .map(|s| s.min_blocks_per_sm),
            Some(4)
        );
        for bad in ["100,64", "256,0", "256,64,33", "256", "256,64,2,1", "a,b"] {
            assert_eq!(parse_shape(os(bad)), None, "{bad}");
        }
    }

    #[test]
    fn opencl_tune_overrides_parse_and_bad_ones_are_rejected() {
        assert_eq!(parse_opencl_tune(os("")), Some(OpenClTune::default()));
        assert_eq!(
            parse_opencl_tune(os(" wg=128, items=8,groups=3,vec=0")),
            Some(OpenClTune {
                wg: Some(128),
                items: Some(8),
                groups: Some(3),
                vec: Some(false)
            })
        );
        for bad in ["wg=100", "items=3", "groups=0", "vec=2", "speed=1", "wg"] {
            assert_eq!(parse_opencl_tune(os(bad)), None, "{bad}");
        }
    }

    #[test]
    fn values_pack_and_unpack_to_themselves() {
        use sealed::Sealed;
        for b in BACKENDS {
            assert_eq!(Backend::unpack(b.pack().unwrap()), Some(b));
        }
        for l in LAUNCHES {
            assert_eq!(Launch::unpack(l.pack().unwrap()), Some(l));
        }
        for s in STENCILS {
            assert_eq!(Stencil::unpack(s.pack().unwrap()), Some(s));
        }
        for k in [None, Some(0), Some(1), Some(16)] {
            assert_eq!(<Option<usize>>::unpack(k.pack().unwrap()), Some(k));
        }
        assert_eq!(
            Some(usize::MAX).pack(),
            None,
            "too large: kept behind the lock"
        );
        for v in [false, true] {
            assert_eq!(bool::unpack(v.pack().unwrap()), Some(v));
        }
    }

    // Settings of variables no one else reads, so that these tests may set them.
    static FLAG: Setting<bool> = Setting::new("SKEL_TEST_CONFIG_FLAG", BOOLEAN, parse_bool, off);
    static BAD_FLAG: Setting<bool> =
        Setting::new("SKEL_TEST_CONFIG_BAD_FLAG", BOOLEAN, parse_bool, on);
    static DIR: Setting<Option<PathBuf>> =
        Setting::new("SKEL_TEST_CONFIG_DIR", "a directory", parse_path, none);
    static FIXED: Setting<Option<usize>> =
        Setting::new("SKEL_TEST_CONFIG_FIXED", "1 to 16", parse_streams, none)
            .accepts(streams_accepted)
            .fixed_by("a test took it");

    #[test]
    fn code_takes_precedence_over_the_environment_and_unset_goes_back_to_it() {
        std::env::set_var("SKEL_TEST_CONFIG_FLAG", "yes");
        assert!(FLAG.get().unwrap());
        assert_eq!(FLAG.source(), Source::Environment);
        FLAG.set(false).unwrap();
        assert_eq!((FLAG.get().unwrap(), FLAG.source()), (false, Source::Code));
        FLAG.unset().unwrap();
        assert_eq!(
            (FLAG.get().unwrap(), FLAG.source()),
            (true, Source::Environment)
        );

        // A value that does not pack goes behind the lock.
        DIR.set(Some(PathBuf::from("/a"))).unwrap();
        assert_eq!(DIR.get().unwrap(), Some(PathBuf::from("/a")));
        DIR.set(None).unwrap();
        assert_eq!((DIR.get().unwrap(), DIR.source()), (None, Source::Code));
        DIR.unset().unwrap();
        assert_eq!((DIR.get().unwrap(), DIR.source()), (None, Source::Default));
    }

    #[test]
    fn a_malformed_variable_is_an_invalid_argument_naming_it_until_code_sets_a_value() {
        std::env::set_var("SKEL_TEST_CONFIG_BAD_FLAG", "maybe");
        let err = BAD_FLAG.get().unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
        assert!(
            msg.contains("SKEL_TEST_CONFIG_BAD_FLAG")
                && msg.contains("\"maybe\"")
                && msg.contains("yes or on"),
            "{msg}"
        );
        assert_eq!(BAD_FLAG.source(), Source::Environment);
        // Where no error can be returned, the default (logged).
        assert!(BAD_FLAG.value());
        BAD_FLAG.set(false).unwrap();
        assert!(!BAD_FLAG.get().unwrap());
        BAD_FLAG.unset().unwrap();
        assert!(BAD_FLAG.get().is_err());
    }

    #[test]
    fn values_set_from_code_are_checked() {
        let err = FIXED.set(Some(17)).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArgument(m) if m.contains("SKEL_TEST_CONFIG_FIXED") && m.contains("17") && m.contains("1 to 16")),
            "{err:?}"
        );
        assert!(STREAMS.set(Some(0)).is_err());
        assert!(CUDA_DEVICES.set(Some(vec![0; 9])).is_err());
        assert!(SCAN_TUNE
            .set(Some(KernelShape {
                threads: 256,
                bytes_per_thread: 0,
                min_blocks_per_sm: 1
            }))
            .is_err());
    }

    #[test]
    fn a_fixed_setting_keeps_its_value_and_says_why() {
        FIXED.set(Some(4)).unwrap();
        assert_eq!(FIXED.fix().unwrap(), Some(4));
        let err = FIXED.set(Some(2)).unwrap_err().to_string();
        assert!(
            err.contains("SKEL_TEST_CONFIG_FIXED") && err.contains("a test took it"),
            "{err}"
        );
        assert!(FIXED.unset().is_err(), "unset would change it too");
        FIXED.set(Some(4)).unwrap(); // the value in use: fine
        assert_eq!(FIXED.get().unwrap(), Some(4));
    }

    #[test]
    fn the_table_in_the_docs_and_the_readme_lists_every_variable() {
        let docs = include_str!("config.rs");
        let readme = include_str!("../docs/configuration.md");
        let rows = |text: &str| {
            text.lines()
                .filter_map(|l| l.trim_start_matches("//! ").strip_prefix("| `SKEL_"))
                .map(|l| format!("SKEL_{}", &l[..l.find('`').unwrap_or(0)]))
                .collect::<Vec<_>>()
        };
        let names: Vec<String> = all().iter().map(|s| s.name().to_string()).collect();
        assert_eq!(names.len(), 21);
        assert_eq!(rows(docs), names, "the module docs' table");
        assert_eq!(rows(readme), names, "docs/configuration.md's table");
    }

    /// The rule this module exists for, checked on the sources: the environment is read
    /// here only, and the library prints nothing (doc comments and test code aside).
    #[test]
    fn only_this_module_reads_the_environment_and_nothing_prints() {
        fn walk(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p);
                }
            }
        }
        let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
        if !src.is_dir() {
            // A test binary moved to another machine (the GPU bundle) has no sources.
            println!("skipped: no sources at {}", src.display());
            return;
        }
        let mut files = Vec::new();
        walk(&src, &mut files);
        assert!(files.len() > 50, "{src:?}");
        let mut found = Vec::new();
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            let name = f.strip_prefix(&src).unwrap().display().to_string();
            let test_file = name.ends_with("tests.rs");
            let mut in_tests = false;
            for (i, line) in text.lines().enumerate() {
                let code = line.trim_start();
                in_tests |= code.starts_with("#[cfg(test)]");
                if code.starts_with("//") {
                    continue;
                }
                let reads = code.contains("env::var");
                let prints = ["println!", "eprintln!", "print!(", "eprint!("]
                    .iter()
                    .any(|p| code.contains(p));
                if (reads && name != "config.rs") || (prints && !in_tests && !test_file) {
                    found.push(format!("{name}:{}: {code}", i + 1));
                }
            }
        }
        assert!(found.is_empty(), "{found:#?}");
    }
}
