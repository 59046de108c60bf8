//! Debug counters for tests and benches (not part of the stable API).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::containers::Input;
use crate::DeviceType;

/// Bytes a container has copied between the host and device memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Transfers {
    /// Host -> device bytes.
    pub up: u64,
    /// Device -> host bytes.
    pub down: u64,
}

/// The bytes `container` has copied to and from its device copies so far (zero on
/// backends without device memory).
///
/// ```
/// use skel::prelude::*;
/// let v = Vector::from(vec![1.0f32; 4]);
/// assert_eq!(skel::debug::transfers(&v), skel::debug::Transfers::default());
/// ```
pub fn transfers<T: DeviceType>(container: &impl Input<T>) -> Transfers {
    #[allow(unused_mut)]
    let mut t = Transfers::default();
    #[cfg(feature = "opencl")]
    {
        let arg = container.arg();
        if let Some((up, down)) = crate::backends::opencl::transfers(&arg.lock()) {
            t.up += up;
            t.down += down;
        }
    }
    #[cfg(feature = "cuda")]
    {
        let arg = container.arg();
        if let Some((up, down)) = crate::backends::cuda::transfers(&arg.lock()) {
            t.up += up;
            t.down += down;
        }
    }
    #[cfg(not(any(feature = "opencl", feature = "cuda")))]
    let _ = container;
    t
}

/// `(used, total)` bytes of the CUDA device's memory (`cuMemGetInfo`: every process's
/// allocations, this one's memory pool included), once the CUDA backend has opened the
/// device; `None` before, and without the `cuda` feature. For leak checks over long runs
/// (`examples/tools/soak.rs`).
///
/// ```
/// if let Some((used, total)) = skel::debug::device_memory() {
///     assert!(used <= total);
/// }
/// ```
pub fn device_memory() -> Option<(u64, u64)> {
    #[cfg(feature = "cuda")]
    return crate::backends::cuda::device_memory();
    #[cfg(not(feature = "cuda"))]
    None
}

/// CUDA driver objects the library holds now: a leak in the event lists, the buffer pool
/// or the containers shows as a count that keeps rising over a long run (`examples/tools/soak.rs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceObjects {
    /// Recorded events still referenced (by containers' access lists and pending calls).
    pub events: usize,
    /// Events kept for reuse (at most 1024).
    pub spare_events: usize,
    /// Device buffers of containers alive now.
    pub buffers: usize,
    /// Idle result slots (scratch words and mapped result memory of small calls, at most 16).
    pub result_slots: usize,
}

/// The CUDA driver objects alive now, once the CUDA backend has opened the device; `None`
/// before, and without the `cuda` feature. The streams are a fixed pool of 16 per device.
///
/// ```
/// if let Some(objects) = skel::debug::device_objects() {
///     assert!(objects.spare_events <= 1024);
/// }
/// ```
pub fn device_objects() -> Option<DeviceObjects> {
    #[cfg(feature = "cuda")]
    return crate::backends::cuda::device_objects();
    #[cfg(not(feature = "cuda"))]
    None
}

/// The MultiStream cost model of a device: what splitting one call into `k` chunks on `k`
/// streams is predicted to cost (Parisi 2015, chapter 3).
///
/// A call moves `up` bytes to the device, runs a kernel touching `kernel` bytes of device
/// memory, and moves `down` bytes back. Alone, each stage takes its bytes over its
/// bandwidth: `T_up`, `T_kernel`, `T_down`. Cut into `k` chunks issued breadth-first, the
/// stages of different chunks overlap, so the call takes one chunk of every stage to fill
/// and drain the pipeline plus `k - 1` chunks of the slowest stage, plus a fixed cost per
/// chunk (issuing its copies and kernel, recording its events):
///
/// ```text
/// T(k) = (T_up + T_kernel + T_down) / k + (k - 1) / k * max(T_up, T_kernel, T_down) + k * overhead
/// ```
///
/// `T(1)` is the sum of the stages; as `k` grows, `T(k)` falls towards the slowest stage
/// until the per-chunk overhead wins. [`StreamModel::best_k`] is the `k` that minimises it;
/// the CUDA backend measures the model once per device ([`stream_model`]) and uses it for
/// every call without `.streams(k)`.
///
/// ```
/// use skel::debug::StreamModel;
/// let m = StreamModel { h2d_gbps: 50.0, d2h_gbps: 50.0, device_gbps: 4000.0, overhead_us: 10.0 };
/// let (up, kernel, down) = (100_000_000, 200_000_000, 100_000_000);
/// assert!((m.predict_ms(up, kernel, down, 1) - 4.06).abs() < 0.01);
/// assert!(m.best_k(up, kernel, down, 16) > 4);
/// assert_eq!(m.best_k(4_000, 8_000, 4_000, 16), 1); // tiny calls: overhead dominates
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StreamModel {
    /// Host-to-device bandwidth from pinned memory, GB/s (10^9 bytes per second).
    pub h2d_gbps: f64,
    /// Device-to-host bandwidth into pinned memory, GB/s.
    pub d2h_gbps: f64,
    /// Device memory bandwidth (bytes read plus written), GB/s.
    pub device_gbps: f64,
    /// Fixed cost per chunk, microseconds.
    pub overhead_us: f64,
}

impl StreamModel {
    /// The stage times `(T_up, T_kernel, T_down)` in milliseconds.
    pub fn stages_ms(&self, up: usize, kernel: usize, down: usize) -> (f64, f64, f64) {
        let ms = |bytes: usize, gbps: f64| bytes as f64 / (gbps.max(1e-9) * 1e6);
        (
            ms(up, self.h2d_gbps),
            ms(kernel, self.device_gbps),
            ms(down, self.d2h_gbps),
        )
    }

    /// Predicted time of the call in `k` chunks (`k >= 1`), milliseconds.
    pub fn predict_ms(&self, up: usize, kernel: usize, down: usize, k: usize) -> f64 {
        let k = k.max(1) as f64;
        let (u, c, d) = self.stages_ms(up, kernel, down);
        (u + c + d) / k + (k - 1.0) / k * u.max(c).max(d) + k * self.overhead_us * 1e-3
    }

    /// The `k` in `1..=max_k` with the smallest predicted time (the smallest such `k` on a
    /// tie).
    pub fn best_k(&self, up: usize, kernel: usize, down: usize, max_k: usize) -> usize {
        (1..=max_k.max(1))
            .map(|k| (k, self.predict_ms(up, kernel, down, k)))
            .fold(
                (1, f64::INFINITY),
                |best, (k, t)| if t < best.1 { (k, t) } else { best },
            )
            .0
    }
}

/// The cost model of the CUDA device, measured on first use (a few milliseconds of copies),
/// or [`crate::Error::BackendUnavailable`] without one.
pub fn stream_model() -> crate::Result<StreamModel> {
    #[cfg(feature = "cuda")]
    return crate::backends::cuda::stream_model();
    #[cfg(not(feature = "cuda"))]
    Err(crate::Error::BackendUnavailable {
        backend: crate::Backend::Cuda,
        reason: "skel was built without the `cuda` feature".into(),
    })
}

/// What pure pinned copies of some bytes take on the CUDA device: the transfer bound a
/// host-to-host pipeline is measured against.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CopyBound {
    /// Host to device alone, milliseconds.
    pub up_ms: f64,
    /// Device to host alone, milliseconds.
    pub down_ms: f64,
    /// Both at once (on two streams), milliseconds.
    pub both_ms: f64,
}

/// Measures [`CopyBound`] for `up` bytes host-to-device and `down` bytes device-to-host
/// between pinned host buffers and device memory (best of five, timed with CUDA events),
/// or [`crate::Error::BackendUnavailable`] without a CUDA device.
pub fn copy_bound(up: usize, down: usize) -> crate::Result<CopyBound> {
    #[cfg(feature = "cuda")]
    return crate::backends::cuda::copy_bound(up, down);
    #[cfg(not(feature = "cuda"))]
    {
        let _ = (up, down);
        Err(crate::Error::BackendUnavailable {
            backend: crate::Backend::Cuda,
            reason: "skel was built without the `cuda` feature".into(),
        })
    }
}

/// Waits until all work enqueued on the CUDA device so far is done (for timing
/// device-resident calls); `Ok` without a CUDA device or when it was never used.
pub fn synchronize() -> crate::Result<()> {
    #[cfg(feature = "cuda")]
    return crate::backends::cuda::synchronize();
    #[cfg(not(feature = "cuda"))]
    Ok(())
}

/// A device operation that [`inject_fault`] makes fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// A device buffer allocation (fails as out of device memory:
    /// [`crate::Error::OutOfMemory`]).
    Alloc,
    /// A host-to-device copy ([`crate::Error::Driver`]).
    Upload,
    /// A device-to-host copy ([`crate::Error::Driver`]).
    Download,
    /// A kernel launch ([`crate::Error::Driver`]), or the adding of a node to a recorded
    /// CUDA graph (`skel::Graph`), which then launches by running its closure.
    Launch,
}

/// The armed fault: its kind and how many operations of that kind still succeed first.
/// `ARMED` is the only thing an operation reads while nothing is armed (one relaxed load).
static ARMED: AtomicBool = AtomicBool::new(false);
static FAULT: Mutex<Option<(Fault, usize)>> = Mutex::new(None);

fn armed() -> MutexGuard<'static, Option<(Fault, usize)>> {
    FAULT.lock().unwrap_or_else(PoisonError::into_inner)
}

/// For tests of error recovery: makes the device operation of kind `fault` after the next
/// `after` ones of that kind fail, once, on the CUDA and OpenCL backends (host backends
/// never reach one). The operation fails where the driver call is made, with the error a
/// driver failure of that kind gives, so the library's own recovery path runs. One fault is
/// armed at a time (a new one replaces it) and it is process-wide: tests that inject faults
/// must not run device calls concurrently. [`clear_fault`] disarms it.
///
/// While nothing is armed, each device operation costs one relaxed atomic load here.
///
/// ```
/// use skel::debug::{clear_fault, inject_fault, Fault};
/// inject_fault(Fault::Launch, 2); // the third kernel launch from now fails
/// assert_eq!(clear_fault(), Some(Fault::Launch)); // no launch happened: still armed
/// assert_eq!(clear_fault(), None);
/// ```
pub fn inject_fault(fault: Fault, after: usize) {
    let mut f = armed();
    *f = Some((fault, after));
    ARMED.store(true, Ordering::SeqCst);
}

/// Disarms the fault armed by [`inject_fault`]; returns it if it has not fired yet.
pub fn clear_fault() -> Option<Fault> {
    let mut f = armed();
    ARMED.store(false, Ordering::SeqCst);
    f.take().map(|(kind, _)| kind)
}

/// Armed by [`inject_device_loss`].
static LOSE: AtomicBool = AtomicBool::new(false);

/// For tests of a lost device (`Error::DeviceLost`): the next CUDA kernel launch fails as
/// an illegal address does (`CUDA_ERROR_ILLEGAL_ADDRESS`, a sticky error), so the CUDA
/// backend marks its context lost for the rest of the process: that call and every later
/// one return [`crate::Error::DeviceLost`]. Irreversible: run it in a process of its own.
/// Safe code cannot reach an illegal address any more (unchecked kernels clamp their
/// indices), hence this hook.
#[doc(hidden)]
pub fn inject_device_loss() {
    LOSE.store(true, Ordering::SeqCst);
}

/// Called by the CUDA backend right before a kernel launch: whether it must fail as a lost
/// device (once).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn loss_fires() -> bool {
    LOSE.load(Ordering::Relaxed) && LOSE.swap(false, Ordering::SeqCst)
}

/// Called by the backends right before a device operation of kind `kind`: whether it must
/// fail (the armed fault fires and disarms itself).
#[cfg_attr(not(any(feature = "cuda", feature = "opencl")), allow(dead_code))]
pub(crate) fn fault_fires(kind: Fault) -> bool {
    if !ARMED.load(Ordering::Relaxed) {
        return false;
    }
    let mut f = armed();
    match *f {
        Some((k, 0)) if k == kind => {
            *f = None;
            ARMED.store(false, Ordering::SeqCst);
            true
        }
        Some((k, ref mut n)) if k == kind => {
            *n -= 1;
            false
        }
        _ => false,
    }
}
