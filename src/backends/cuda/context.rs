//! The CUDA device, its primary context and its stream: probed once per process.
//!
//! The driver (`libcuda`) and NVRTC (`libnvrtc`) are loaded at run time (cudarc's dynamic
//! loading), so a build with the `cuda` feature runs anywhere; without a driver or a device
//! the backend is unavailable and says why. `SKEL_CUDA_DEVICE=<ordinal>` picks the device
//! (default 0).
//!
//! Several devices: the process's device *slots* are the ordinals `SKEL_CUDA_DEVICES`
//! names (comma-separated), else the default device followed by every other one. Each slot
//! has its own [`Ctx`] (the primary context of its ordinal, its own pool of streams), its
//! own copies of containers (coherence location `Device(slot)`) and its own lane numbers
//! (`slot * STREAMS + i`). Naming an ordinal twice (`SKEL_CUDA_DEVICES=0,0`) gives two
//! slots on one GPU: a testing aid that runs every multi-device path (split, per-slot
//! buffers, device-to-device copies) on a one-GPU machine. The slot a thread works on is
//! thread-local ([`on_slot`]); it is 0, the default device, unless a split call
//! (`devices.rs`) runs a part.
//!
//! Finding NVRTC: the loader's search path is tried first (`LD_LIBRARY_PATH`, ldconfig).
//! If `libnvrtc` is not found there, it is loaded from `$SKEL_NVRTC_DIR`, `$CUDA_HOME/lib64`,
//! `$CUDA_PATH/lib64` or `/usr/local/cuda/lib64` by full path (kept loaded, so cudarc's own
//! lookup by name finds the already-loaded library).
//!
//! Work goes to a pool of [`STREAMS`] non-blocking streams ([`Lane`]s): each call takes
//! the next `k` of them in turn (MultiStream, see `multistream.rs`), so consecutive calls
//! on independent containers overlap, and calls that share data are ordered by events
//! (`memory/`). Device buffers come from the device's default memory pool
//! (stream-ordered allocation), whose release threshold is raised so freed buffers are
//! reused, not returned to the driver.

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use cudarc::driver::{result, sys};

use super::driver;
use crate::containers::{register_pinned_allocator, Location};
use crate::{Backend, Error, Result};

/// Streams in the device's pool: the most a call can be split over.
pub(crate) const STREAMS: usize = 16;

/// Device slots a process can name (`SKEL_CUDA_DEVICES`).
pub(crate) const MAX_SLOTS: usize = crate::config::MAX_DEVICE_SLOTS;

/// Lanes over all slots: the range of [`Lane::index`].
pub(crate) const LANES: usize = MAX_SLOTS * STREAMS;

/// One stream of a slot's pool, with its index over all slots (`slot * STREAMS + i`; events
/// and traces name it).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lane {
    pub(crate) index: usize,
    pub(crate) raw: sys::CUstream,
}

// SAFETY: a stream handle is a process-wide driver object, usable from any thread that
// binds its context (the bounce buffers' copy threads issue copies on a caller's lane).
unsafe impl Send for Lane {}
// SAFETY: as above; a `Lane` is an immutable pair of an index and a handle.
unsafe impl Sync for Lane {}

impl Lane {
    /// The device slot whose pool the stream belongs to.
    pub(crate) fn slot(self) -> usize {
        self.index / STREAMS
    }
}

/// One device slot: a CUDA device's primary context and a pool of streams.
pub(crate) struct Ctx {
    /// The slot's number: its place in the device list and its coherence location.
    pub(crate) slot: u32,
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
    /// Where device copies of containers live in their coherence state: the slot, so two
    /// slots on one GPU keep separate copies.
    pub(crate) fn location(&self) -> Location {
        Location::Device(self.slot)
    }

    /// Makes the context current on the calling thread (cheap; needed before driver calls).
    pub(crate) fn bind(&self) -> Result<()> {
        // SAFETY: `ctx` is the retained primary context, valid for the process's lifetime.
        unsafe { result::ctx::set_current(self.ctx) }.map_err(driver)
    }

    /// Stream `index` of the pool (an index over all slots names the same stream).
    pub(crate) fn lane(&self, index: usize) -> Lane {
        let local = index % self.streams.len();
        Lane {
            index: self.slot as usize * STREAMS + local,
            raw: self.streams[local],
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
        let first = self.slot as usize * STREAMS;
        let mut upto = [0u64; STREAMS];
        for (local, mark) in upto.iter_mut().enumerate() {
            *mark = super::memory::recorded(first + local);
        }
        // One wait for the whole context instead of one per stream of the pool: sixteen
        // stream synchronisations cost more than a small call itself (see docs/performance.md's
        // per-call table). Slots on one GPU share its context, so this also waits for the
        // other slots' streams: more than asked, never less.
        result::ctx::synchronize().map_err(driver)?;
        for (local, mark) in upto.into_iter().enumerate() {
            super::memory::synced(first + local, mark);
        }
        Ok(())
    }

    /// `--gpu-architecture` value for NVRTC: the device's own.
    pub(crate) fn arch(&self) -> String {
        arch_of(self.cc)
    }
}

fn nvrtc_dirs() -> Vec<std::path::PathBuf> {
    let mut dirs = Vec::new();
    dirs.extend(crate::config::NVRTC_DIR.fixed_value());
    dirs.extend(crate::config::cuda_toolkit_lib_dirs());
    dirs.push("/usr/local/cuda/lib64".into());
    dirs
}

/// Makes sure libnvrtc can be loaded; `Err` says where it was looked for.
pub(crate) fn ensure_nvrtc() -> Result<()> {
    static FOUND: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            if load_for_process("nvrtc") {
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
                        if load_for_process("nvrtc") {
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
        .map_err(|m| Error::Driver(m.into()))
}

/// Loads the CUDA library `lib` (`cuda`, `nvrtc`) by cudarc's names for it and keeps it
/// loaded for the whole process; `false` where none loads. cudarc's own presence check
/// (`is_culib_present`) unloads the library again at once: a library unloaded after its
/// initialisers ran, then loaded again elsewhere by cudarc's first call, leaves the
/// first copy's process-exit and thread-exit hooks pointing into unmapped code. Kept
/// loaded, cudarc's later load by the same name finds this copy, and nothing of it is
/// ever unloaded before the process ends (deliberately: the process's lifetime is
/// theirs).
fn load_for_process(lib: &str) -> bool {
    cudarc::get_lib_name_candidates(lib)
        .into_iter()
        .any(|name| {
            // SAFETY: loading NVIDIA's library runs its initialisers only.
            match unsafe { libloading::Library::new(&name) } {
                Ok(loaded) => {
                    std::mem::forget(loaded);
                    true
                }
                Err(_) => false,
            }
        })
}

fn attr(dev: sys::CUdevice, a: sys::CUdevice_attribute) -> Result<i32> {
    // SAFETY: `dev` is a valid device handle from cuDeviceGet.
    unsafe { result::device::get_attribute(dev, a) }.map_err(driver)
}

/// The compute capability (major, minor) of `dev`.
fn compute_capability(dev: sys::CUdevice) -> Result<(i32, i32)> {
    use sys::CUdevice_attribute as A;
    Ok((
        attr(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
        attr(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
    ))
}

/// The NVRTC architecture name (`sm_XY`) of compute capability `cc`.
fn arch_of((major, minor): (i32, i32)) -> String {
    format!("sm_{major}{minor}")
}

/// The ordinals of the device slots, in order (see the module docs), probed once.
fn slot_list() -> std::result::Result<&'static [u32], String> {
    static LIST: OnceLock<std::result::Result<Vec<u32>, String>> = OnceLock::new();
    LIST.get_or_init(|| {
        if !load_for_process("cuda") {
            return Err("no CUDA driver (libcuda) found".into());
        }
        result::init().map_err(|e| format!("cuInit failed: {e}"))?;
        let count = result::device::get_count().map_err(|e| e.to_string())?;
        if count <= 0 {
            return Err("the CUDA driver reports no device".into());
        }
        let parse = |var: &str, o: u32| {
            Some(o)
                .filter(|&o| i64::from(o) < i64::from(count))
                .ok_or_else(|| {
                    format!("{var}={o}: expected a device ordinal in 0..{count} (this machine has {count} CUDA device(s))")
                })
        };
        let config = |e: Error| e.to_string();
        if let Some(list) = crate::config::CUDA_DEVICES.fix().map_err(config)? {
            // At most MAX_SLOTS of them: the setting accepts no more.
            return list
                .into_iter()
                .map(|o| parse("SKEL_CUDA_DEVICES", o))
                .collect::<std::result::Result<Vec<u32>, String>>();
        }
        let first = parse(
            "SKEL_CUDA_DEVICE",
            crate::config::CUDA_DEVICE.fix().map_err(config)?,
        )?;
        let rest = (0..count as u32).filter(|&o| o != first);
        Ok(std::iter::once(first)
            .chain(rest)
            .take(MAX_SLOTS)
            .collect())
    })
    .as_deref()
    .map_err(Clone::clone)
}

/// The architecture (`sm_XY`) of the first device slot, read from the driver without
/// opening a context (`None`: no usable CUDA device): what NVRTC compiles for, known
/// before the context (the slow part of opening a device) exists.
pub(crate) fn first_arch() -> Option<String> {
    let ordinal = *slot_list().ok()?.first()? as i32;
    let dev = result::device::get(ordinal).ok()?;
    compute_capability(dev).ok().map(arch_of)
}

/// `SKEL_CUDA_DEVICES`, if set.
pub(crate) fn devices_env() -> Option<Vec<u32>> {
    crate::config::CUDA_DEVICES.value()
}

/// The number of device slots (`Err`: no usable CUDA device, and why).
pub(crate) fn slot_count() -> Result<usize> {
    slot_list().map(<[u32]>::len).map_err(unavailable)
}

/// The device ordinal of each slot, for messages.
pub(crate) fn slot_ordinals() -> Vec<u32> {
    slot_list().map(<[u32]>::to_vec).unwrap_or_default()
}

fn unavailable(reason: String) -> Error {
    Error::BackendUnavailable {
        backend: Backend::Cuda,
        reason,
    }
}

fn open(slot: usize) -> std::result::Result<Ctx, String> {
    let ordinal = *slot_list()?
        .get(slot)
        .ok_or_else(|| format!("no CUDA device slot {slot}"))? as i32;
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
    let cc = compute_capability(dev).map_err(e)?;
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
        slot: slot as u32,
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

static CTXS: [OnceLock<std::result::Result<Ctx, String>>; MAX_SLOTS] =
    [const { OnceLock::new() }; MAX_SLOTS];

thread_local! {
    /// The slot this thread's CUDA work goes to (see [`on_slot`]).
    static CURRENT: Cell<usize> = const { Cell::new(0) };
}

/// Runs `f` with `slot` as the calling thread's current device slot: every `ctx()` inside
/// is that slot's (how a split call runs the single-device code on one slot).
pub(crate) fn on_slot<R>(slot: usize, f: impl FnOnce() -> R) -> R {
    let before = CURRENT.with(|c| c.replace(slot));
    let r = f();
    CURRENT.with(|c| c.set(before));
    r
}

/// Device slot `slot`, opened on first use (the probe result is cached), bound to the
/// calling thread.
pub(crate) fn slot_ctx(slot: usize) -> Result<&'static Ctx> {
    super::not_lost()?;
    let cell = CTXS
        .get(slot)
        .ok_or_else(|| unavailable(format!("no CUDA device slot {slot}")))?;
    let mut fresh = false;
    let c = cell
        .get_or_init(|| {
            let c = open(slot)?;
            fresh = true;
            if slot == 0 {
                register_pinned_allocator(Some(Arc::new(super::memory::CudaPinned)));
            }
            Ok(c)
        })
        .as_ref()
        .map_err(|reason| unavailable(reason.clone()))?;
    if fresh {
        enable_peers(c);
    }
    c.bind()?;
    Ok(c)
}

/// Lets the new slot `c` and every opened slot on another device read each other's memory
/// where the hardware allows (`cuMemcpyPeerAsync` goes through the host where it does not).
fn enable_peers(c: &Ctx) {
    for other in (0..MAX_SLOTS).filter_map(opened_slot) {
        if other.ordinal == c.ordinal {
            continue;
        }
        for (from, to) in [(c, other), (other, c)] {
            let mut can = 0;
            // SAFETY: out-pointer to a local; both ordinals are valid devices.
            let r = unsafe {
                sys::cuDeviceCanAccessPeer(&mut can, from.ordinal as i32, to.ordinal as i32)
            };
            if r == sys::CUresult::CUDA_SUCCESS && can == 1 && from.bind().is_ok() {
                // SAFETY: both contexts are retained primary contexts; enabling twice only
                // returns an error, which is ignored.
                let _ = unsafe { sys::cuCtxEnablePeerAccess(to.ctx, 0) };
            }
        }
    }
}

/// The calling thread's current device slot, opened and bound.
pub(crate) fn ctx() -> Result<&'static Ctx> {
    slot_ctx(CURRENT.with(Cell::get))
}

/// The default slot (0) if it was opened already (for destructors, which must not open it).
pub(crate) fn opened() -> Option<&'static Ctx> {
    opened_slot(0)
}

/// Slot `slot` if it was opened already.
pub(crate) fn opened_slot(slot: usize) -> Option<&'static Ctx> {
    CTXS.get(slot)?.get().and_then(|c| c.as_ref().ok())
}

/// Every opened slot.
pub(crate) fn opened_slots() -> impl Iterator<Item = &'static Ctx> {
    (0..MAX_SLOTS).filter_map(opened_slot)
}

/// `Ok` if a CUDA device can be used (for `Backend::check`), else why not: a lost context
/// stays [`Error::DeviceLost`], anything else is [`Error::BackendUnavailable`].
pub(crate) fn probe() -> Result<()> {
    ctx().map(|_| ()).map_err(|e| match e {
        e @ (Error::BackendUnavailable { .. } | Error::DeviceLost { .. }) => e,
        other => unavailable(other.to_string()),
    })
}
