//! The CUDA device, its primary context and its stream: probed once per process.
//!
//! The driver (`libcuda`) and NVRTC (`libnvrtc`) are loaded at run time (cudarc's dynamic
//! loading), so a build with the `cuda` feature runs anywhere; without a driver or a device
//! the backend is unavailable and says why. `SKEL_CUDA_DEVICE=<ordinal>` picks the device
//! (default 0).
//!
//! Finding NVRTC: the loader's search path is tried first (`LD_LIBRARY_PATH`, ldconfig).
//! If `libnvrtc` is not found there, it is loaded from `$SKEL_NVRTC_DIR`, `$CUDA_HOME/lib64`,
//! `$CUDA_PATH/lib64` or `/usr/local/cuda/lib64` by full path (kept loaded, so cudarc's own
//! lookup by name finds the already-loaded library).
//!
//! Work goes to a pool of [`STREAMS`] non-blocking streams ([`Lane`]s): each call takes
//! the next `k` of them in turn (MultiStream, see `multistream.rs`), so consecutive calls
//! on independent containers overlap, and calls that share data are ordered by events
//! (`memory.rs`). Device buffers come from the device's default memory pool
//! (stream-ordered allocation), whose release threshold is raised so freed buffers are
//! reused, not returned to the driver.

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use cudarc::driver::{result, sys};

use super::driver;
use crate::containers::{register_pinned_allocator, Location};
use crate::{Backend, Error, Result};

/// Streams in the device's pool: the most a call can be split over.
pub(crate) const STREAMS: usize = 16;

/// One stream of the pool, with its index (events and traces name it).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lane {
    pub(crate) index: usize,
    pub(crate) raw: sys::CUstream,
}

/// The process's CUDA device.
pub(crate) struct Ctx {
    pub(crate) ordinal: u32,
    pub(crate) ctx: sys::CUcontext,
    streams: Vec<sys::CUstream>,
    /// Where the next call's streams start in the pool.
    next: AtomicUsize,
    pub(crate) name: String,
    /// Compute capability (major, minor).
    pub(crate) cc: (i32, i32),
    pub(crate) sms: u32,
    /// Largest dynamic shared memory a block may opt in to, in bytes.
    pub(crate) smem_optin: u32,
    pub(crate) driver_version: i32,
}

// SAFETY: the context and stream handles are process-wide driver objects; the driver API
// is thread-safe, and every thread binds the context before using them (`bind`).
unsafe impl Send for Ctx {}
// SAFETY: as above; `Ctx` is immutable after creation.
unsafe impl Sync for Ctx {}

impl Ctx {
    /// Where device copies of containers live in their coherence state.
    pub(crate) fn location(&self) -> Location {
        Location::Device(self.ordinal)
    }

    /// Makes the context current on the calling thread (cheap; needed before driver calls).
    pub(crate) fn bind(&self) -> Result<()> {
        // SAFETY: `ctx` is the retained primary context, valid for the process's lifetime.
        unsafe { result::ctx::set_current(self.ctx) }.map_err(driver)
    }

    /// Stream `index` of the pool.
    pub(crate) fn lane(&self, index: usize) -> Lane {
        let index = index % self.streams.len();
        Lane {
            index,
            raw: self.streams[index],
        }
    }

    /// `k` consecutive streams of the pool for one call (at most the pool's size), the
    /// next call starting after them: consecutive calls overlap on distinct streams.
    pub(crate) fn lanes(&self, k: usize) -> Vec<Lane> {
        let k = k.clamp(1, self.streams.len());
        let first = self.next.fetch_add(k, Ordering::Relaxed);
        (first..first + k).map(|i| self.lane(i)).collect()
    }

    /// Whether any stream of the pool still has work queued or running.
    pub(crate) fn busy(&self) -> bool {
        self.streams.iter().any(|&s| {
            // SAFETY: a valid stream of the pool; the query does not block.
            let state = unsafe { sys::cuStreamQuery(s) };
            state == sys::CUresult::CUDA_ERROR_NOT_READY
        })
    }

    /// Waits for the work on every stream of the pool.
    pub(crate) fn synchronize(&self) -> Result<()> {
        self.bind()?;
        for (lane, &s) in self.streams.iter().enumerate() {
            let upto = super::memory::recorded(lane);
            // SAFETY: a valid stream of the pool.
            unsafe { result::stream::synchronize(s) }.map_err(driver)?;
            super::memory::synced(lane, upto);
        }
        Ok(())
    }

    /// `--gpu-architecture` value for NVRTC: the device's own.
    pub(crate) fn arch(&self) -> String {
        format!("sm_{}{}", self.cc.0, self.cc.1)
    }
}

fn nvrtc_dirs() -> Vec<std::path::PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os("SKEL_NVRTC_DIR") {
        dirs.push(d.into());
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(d) = std::env::var_os(var) {
            dirs.push(std::path::PathBuf::from(d).join("lib64"));
        }
    }
    dirs.push("/usr/local/cuda/lib64".into());
    dirs
}

/// Makes sure libnvrtc can be loaded; `Err` says where it was looked for.
pub(crate) fn ensure_nvrtc() -> Result<()> {
    static FOUND: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            // SAFETY: only tries to dlopen the library by its usual names.
            if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
                return Ok(());
            }
            for dir in nvrtc_dirs() {
                let Ok(entries) = std::fs::read_dir(&dir) else {
                    continue;
                };
                let mut names: Vec<_> = entries
                    .filter_map(|e| e.ok())
                    .map(|e| e.path())
                    .filter(|p| {
                        p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with("libnvrtc.so"))
                    })
                    .collect();
                names.sort();
                for path in names {
                    // SAFETY: loading NVIDIA's NVRTC library runs its initialisers only.
                    if let Ok(lib) = unsafe { libloading::Library::new(&path) } {
                        // Keep it loaded for the process: cudarc's later dlopen by soname
                        // finds this copy.
                        std::mem::forget(lib);
                        // SAFETY: as above.
                        if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
                            return Ok(());
                        }
                    }
                }
            }
            Err(format!(
                "libnvrtc not found on the loader path nor in {:?} (set SKEL_NVRTC_DIR or \
                 LD_LIBRARY_PATH)",
                nvrtc_dirs()
            ))
        })
        .clone()
        .map_err(Error::Driver)
}

fn attr(dev: sys::CUdevice, a: sys::CUdevice_attribute) -> Result<i32> {
    // SAFETY: `dev` is a valid device handle from cuDeviceGet.
    unsafe { result::device::get_attribute(dev, a) }.map_err(driver)
}

fn open() -> std::result::Result<Ctx, String> {
    // SAFETY: only tries to dlopen libcuda by its usual names.
    if !unsafe { sys::is_culib_present() } {
        return Err("no CUDA driver (libcuda) found".into());
    }
    result::init().map_err(|e| format!("cuInit failed: {e}"))?;
    let count = result::device::get_count().map_err(|e| e.to_string())?;
    if count <= 0 {
        return Err("the CUDA driver reports no device".into());
    }
    let ordinal = match std::env::var("SKEL_CUDA_DEVICE") {
        Ok(s) if !s.trim().is_empty() => s
            .trim()
            .parse::<i32>()
            .ok()
            .filter(|&o| (0..count).contains(&o))
            .ok_or_else(|| format!("SKEL_CUDA_DEVICE={s}: expected 0..{count}"))?,
        _ => 0,
    };
    let dev = result::device::get(ordinal).map_err(|e| e.to_string())?;
    // SAFETY: `dev` is valid; the primary context is retained for the process's lifetime.
    let ctx = unsafe { result::primary_ctx::retain(dev) }.map_err(|e| e.to_string())?;
    // SAFETY: `ctx` was just retained.
    unsafe { result::ctx::set_current(ctx) }.map_err(|e| e.to_string())?;
    let streams = (0..STREAMS)
        .map(|_| result::stream::create(result::stream::StreamKind::NonBlocking))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let name = result::device::get_name(dev).unwrap_or_else(|_| "CUDA device".into());
    use sys::CUdevice_attribute as A;
    let e = |x: Error| x.to_string();
    let cc = (
        attr(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR).map_err(e)?,
        attr(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR).map_err(e)?,
    );
    let sms = attr(dev, A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).map_err(e)?;
    let smem_optin = attr(
        dev,
        A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
    )
    .unwrap_or(48 * 1024);
    let pools = attr(dev, A::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED).unwrap_or(0);
    if pools == 0 {
        return Err(format!(
            "{name}: no stream-ordered allocator (memory pools)"
        ));
    }
    // Keep freed pool memory for reuse instead of returning it at each synchronisation.
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: out-pointer to a local; `dev` is valid.
    if unsafe { sys::cuDeviceGetDefaultMemPool(&mut pool, dev) } == sys::CUresult::CUDA_SUCCESS {
        let mut threshold: u64 = u64::MAX;
        // SAFETY: the attribute takes a cuuint64_t, passed by pointer.
        unsafe {
            sys::cuMemPoolSetAttribute(
                pool,
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                (&mut threshold as *mut u64).cast::<c_void>(),
            )
        };
    }
    let mut driver_version = 0;
    // SAFETY: out-pointer to a local.
    unsafe { sys::cuDriverGetVersion(&mut driver_version) };
    Ok(Ctx {
        ordinal: ordinal as u32,
        ctx,
        streams,
        next: AtomicUsize::new(0),
        name,
        cc,
        sms: sms.max(1) as u32,
        smem_optin: smem_optin.max(48 * 1024) as u32,
        driver_version,
    })
}

static CTX: OnceLock<std::result::Result<Ctx, String>> = OnceLock::new();

/// The process's CUDA device, opened on first use (the probe result is cached). The
/// context is bound to the calling thread.
pub(crate) fn ctx() -> Result<&'static Ctx> {
    let c = CTX
        .get_or_init(|| {
            let c = open()?;
            register_pinned_allocator(Some(Arc::new(super::memory::CudaPinned)));
            Ok(c)
        })
        .as_ref()
        .map_err(|reason| Error::BackendUnavailable {
            backend: Backend::Cuda,
            reason: reason.clone(),
        })?;
    c.bind()?;
    Ok(c)
}

/// The context if it was opened already (for destructors, which must not open it).
pub(crate) fn opened() -> Option<&'static Ctx> {
    CTX.get().and_then(|c| c.as_ref().ok())
}

/// `Ok` if a CUDA device can be used (for `Backend::check`), else why not.
pub(crate) fn probe() -> std::result::Result<(), String> {
    ctx().map(|_| ()).map_err(|e| match e {
        Error::BackendUnavailable { reason, .. } => reason,
        other => other.to_string(),
    })
}
