//! Device memory, pinned host memory, events, and the ordering of work across streams.
//!
//! - [`CuBuffer`]: a container's copy on the device (one buffer for the whole container,
//!   made on first use and reused by every later call), the container's [`DeviceCopy`]. It
//!   remembers the recent device accesses to its ranges (which stream read or wrote what,
//!   up to which event), so work on one stream waits for conflicting work on another:
//!   a read waits for earlier writes of its range, a write for earlier reads and writes.
//! - [`Scratch`]: a temporary buffer (partials, look-back state) for one call, freed
//!   stream-ordered when dropped, so the next call's allocation reuses the pool's memory.
//! - [`CudaPinned`]: the page-locked host allocator registered for containers
//!   (`cuMemHostAlloc`, portable: cached, not write-combined, so host reads are fast, and
//!   pinned for every device slot).
//! - [`CuEvent`]: a point in one stream's work; also the [`ReadyEvent`] a container waits
//!   on before host access, where a failed kernel surfaces (`try_as_slice`).
//!
//! Reads upload only the ranges not valid on the device; writes mark the written range
//! valid only on the device, after the kernel's event; eager downloads mark it valid on the
//! host again, after the copy's event. Nothing here blocks except synchronous downloads
//! (a host read of data still on the device) and scalar results.

use std::alloc::Layout;
use std::any::Any;
use std::ffi::c_void;
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use cudarc::driver::{result, sys};

use super::context::{opened, opened_slot, opened_slots, Ctx, Lane, LANES, STREAMS};
use super::trace::{self, Op, Tag};
use super::{driver, injected, oom_or_driver};
use crate::containers::store::Store;
use crate::containers::{Arg, ArgMut, DeviceCopy, Location, PinnedAllocator, ReadyEvent, State};
use crate::debug::Fault;
use crate::{DeviceType, Error, Result};

/// Allocates `bytes` (at least 1) from the device's pool, ordered on `lane`.
fn alloc(lane: Lane, bytes: usize) -> Result<sys::CUdeviceptr> {
    injected(Fault::Alloc).map_err(|e| oom_or_driver(e, bytes))?;
    // SAFETY: the stream is valid; users on other streams are ordered after the allocation
    // through an event (`CuBuffer::new`, `Scratch::share`).
    unsafe { result::malloc_async(lane.raw, bytes.max(1)) }.map_err(|e| oom_or_driver(e, bytes))
}

/// Frees `ptr` (of slot `slot`) on `lane` (`None`: the slot's first stream) once `after`
/// are done.
fn free_after(ptr: sys::CUdeviceptr, slot: usize, lane: Option<Lane>, after: &[Arc<CuEvent>]) {
    let Some(ctx) = opened_slot(slot) else {
        return;
    };
    if ctx.bind().is_err() {
        return;
    }
    let lane = lane.unwrap_or_else(|| ctx.lane(0));
    for ev in after {
        let _ = ev.order(lane);
    }
    // SAFETY: `ptr` came from `alloc`; every use of it is ordered before this point of the
    // stream (same stream, or an event waited on just above).
    let _ = unsafe { result::free_async(ptr, lane.raw) };
}

/// Driver objects alive now, for leak checks over long runs (`skel::debug::device_objects`):
/// recorded events still referenced and device buffers of containers.
static LIVE_EVENTS: AtomicUsize = AtomicUsize::new(0);
static LIVE_BUFFERS: AtomicUsize = AtomicUsize::new(0);

/// `(events, spare events, buffers, idle result slots)` alive now.
pub(crate) fn live_objects() -> (usize, usize, usize, usize) {
    (
        LIVE_EVENTS.load(Ordering::Relaxed),
        (0..super::context::MAX_SLOTS)
            .map(|s| spare_events(s).0.len())
            .sum(),
        LIVE_BUFFERS.load(Ordering::Relaxed),
        slot_pool().len(),
    )
}

/// A point in one stream's work; ready once everything enqueued on it before is done.
pub(crate) struct CuEvent {
    raw: sys::CUevent,
    lane: usize,
    /// Its place among the events recorded on its stream (see [`Marks`]).
    seq: u64,
}

/// Per stream of the pool: how many events were recorded on it, and up to which of them
/// the work is known to be done. A stream runs its work in order, so an event seen done
/// (queried, waited for, or the stream synchronised) makes every earlier event on that
/// stream done too, without asking the driver: each `cuEventQuery` costs about as much as
/// a quarter of a small call (1.4 us on the H100 machine).
struct Marks {
    /// Held while an event is numbered and recorded, so numbers follow the stream's order.
    recorded: [std::sync::Mutex<u64>; LANES],
    done: [AtomicU64; LANES],
}

static MARKS: Marks = Marks {
    recorded: [const { std::sync::Mutex::new(0) }; LANES],
    done: [const { AtomicU64::new(0) }; LANES],
};

/// The number of the latest event recorded on stream `lane` (to pass to [`synced`] after
/// waiting for the stream).
pub(crate) fn recorded(lane: usize) -> u64 {
    *MARKS.recorded[lane % LANES]
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Stream `lane` finished every event up to number `upto`.
pub(crate) fn synced(lane: usize, upto: u64) {
    MARKS.done[lane % LANES].fetch_max(upto, Ordering::Relaxed);
}

// SAFETY: an event handle is a driver object usable from any thread of the process.
unsafe impl Send for CuEvent {}
// SAFETY: as above; waiting on an event from several threads is allowed.
unsafe impl Sync for CuEvent {}

impl CuEvent {
    /// Records an event after the work enqueued on `lane` so far.
    pub(crate) fn record(lane: Lane) -> Result<Arc<CuEvent>> {
        // Events belong to a context: each slot keeps its own spares.
        let spare = spare_events(lane.slot()).0.pop();
        let raw = match spare {
            Some(raw) => raw,
            None => result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
                .map_err(driver)?,
        };
        let mut count = MARKS.recorded[lane.index % LANES]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // SAFETY: both handles are valid.
        if let Err(e) = unsafe { result::event::record(raw, lane.raw) } {
            spare_events(lane.slot()).0.push(raw);
            return Err(driver(e));
        }
        *count += 1;
        LIVE_EVENTS.fetch_add(1, Ordering::Relaxed);
        Ok(Arc::new(CuEvent {
            raw,
            lane: lane.index,
            seq: *count,
        }))
    }

    /// Makes `lane` wait for this event (nothing to do on its own stream).
    pub(crate) fn order(&self, lane: Lane) -> Result<()> {
        if lane.index == self.lane {
            return Ok(());
        }
        // SAFETY: both handles are valid.
        unsafe {
            result::stream::wait_event(
                lane.raw,
                self.raw,
                sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        }
        .map_err(driver)
    }

    /// The index of the stream the event was recorded on.
    pub(crate) fn lane(&self) -> usize {
        self.lane
    }

    /// Whether the work before the event is done (errors count as done: they surface when
    /// the host waits).
    fn done(&self) -> bool {
        if self.known_done() {
            return true;
        }
        // SAFETY: the event is valid until dropped.
        let state = unsafe { sys::cuEventQuery(self.raw) };
        // Only a success is remembered: an error must still surface when the host waits.
        if state == sys::CUresult::CUDA_SUCCESS {
            synced(self.lane, self.seq);
        }
        state != sys::CUresult::CUDA_ERROR_NOT_READY
    }

    /// Whether the work before the event is known to be done, without asking the driver.
    fn known_done(&self) -> bool {
        MARKS.done[self.lane % LANES].load(Ordering::Relaxed) >= self.seq
    }
}

/// Events no longer referenced, kept for reuse: creating one costs about as much as the
/// rest of a small call. Recording a reused event is safe: stream waits enqueued earlier
/// keep waiting for the record they saw, and nothing else refers to the event any more.
struct SpareEvents(Vec<sys::CUevent>);

// SAFETY: event handles are driver objects usable from any thread of the process.
unsafe impl Send for SpareEvents {}

/// At most this many spare events are kept.
const SPARE_EVENTS: usize = 1024;

fn spare_events(slot: usize) -> std::sync::MutexGuard<'static, SpareEvents> {
    static SPARE: [std::sync::Mutex<SpareEvents>; super::context::MAX_SLOTS] =
        [const { std::sync::Mutex::new(SpareEvents(Vec::new())) }; super::context::MAX_SLOTS];
    SPARE[slot % super::context::MAX_SLOTS]
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Drop for CuEvent {
    fn drop(&mut self) {
        LIVE_EVENTS.fetch_sub(1, Ordering::Relaxed);
        let slot = self.lane / STREAMS;
        let mut spare = spare_events(slot);
        if spare.0.len() < SPARE_EVENTS {
            spare.0.push(self.raw);
            return;
        }
        drop(spare);
        if let Some(ctx) = opened_slot(slot) {
            if ctx.bind().is_ok() {
                // SAFETY: the event is not used after this; destroying a recorded event
                // whose work is pending is allowed (resources are freed on completion).
                let _ = unsafe { result::event::destroy(self.raw) };
            }
        }
    }
}

impl ReadyEvent for CuEvent {
    fn wait(&self) -> Result<()> {
        if let Some(ctx) = opened_slot(self.lane / STREAMS) {
            ctx.bind()?;
        }
        if self.known_done() {
            return Ok(());
        }
        // SAFETY: the event is valid until dropped.
        unsafe { result::event::synchronize(self.raw) }.map_err(driver)?;
        synced(self.lane, self.seq);
        Ok(())
    }
}

/// Accesses a buffer remembers before the ones already done are looked for.
const PRUNE_AT: usize = 8;

/// One recent device access to a range of a buffer.
struct Access {
    range: Range<usize>,
    event: Arc<CuEvent>,
    write: bool,
}

/// A container's copy on the device.
pub(crate) struct CuBuffer {
    pub(crate) ptr: sys::CUdeviceptr,
    /// The device slot it lives on.
    slot: usize,
    elem: usize,
    /// Accesses that may still be running, oldest first.
    accesses: Vec<Access>,
    /// Bytes copied host -> device and device -> host (see `skel::debug::transfers`).
    up: u64,
    down: AtomicU64,
}

// SAFETY: a device pointer is a plain address valid in the process's context on any
// thread; accesses are ordered through streams and events (see the module docs).
unsafe impl Send for CuBuffer {}
// SAFETY: as above; `&CuBuffer` only reads the address and counters.
unsafe impl Sync for CuBuffer {}

impl CuBuffer {
    /// A buffer of `len` elements of `elem` bytes, allocated on `lane`; other streams wait
    /// for the allocation through its event.
    fn new(lane: Lane, len: usize, elem: usize) -> Result<Self> {
        let ptr = alloc(lane, len * elem)?;
        let event = CuEvent::record(lane)?;
        LIVE_BUFFERS.fetch_add(1, Ordering::Relaxed);
        Ok(CuBuffer {
            ptr,
            slot: lane.slot(),
            elem,
            accesses: vec![Access {
                range: 0..len,
                event,
                write: true,
            }],
            up: 0,
            down: AtomicU64::new(0),
        })
    }

    /// The device address of element `i`.
    pub(crate) fn at(&self, i: usize) -> sys::CUdeviceptr {
        self.ptr + (i * self.elem) as u64
    }

    /// Makes `lane` wait for earlier accesses that conflict with reading (or, with `write`,
    /// writing) `range`.
    pub(crate) fn order(&mut self, lane: Lane, range: &Range<usize>, write: bool) -> Result<()> {
        // Forget what is known to be done; ask the driver only when the list grows (work
        // on the same stream is ordered anyway, so a chain of calls on one stream asks
        // nothing here).
        self.accesses.retain(|a| !a.event.known_done());
        if self.accesses.len() > PRUNE_AT {
            self.accesses.retain(|a| !a.event.done());
        }
        for a in &self.accesses {
            let overlaps = a.range.start < range.end && range.start < a.range.end;
            if overlaps && (write || a.write) && a.event.lane != lane.index && !a.event.done() {
                a.event.order(lane)?;
            }
        }
        Ok(())
    }

    /// The stream of the latest device access that may still be running, if any. An
    /// access whose event is the last one recorded on its stream counts without asking the
    /// driver: the stream then runs nothing but this container's work, so following it
    /// costs nothing even if that work is over (a chain of small calls asks nothing).
    fn busy_lane(&self) -> Option<usize> {
        self.accesses
            .iter()
            .rev()
            .find(|a| {
                !a.event.known_done() && (a.event.seq == recorded(a.event.lane) || !a.event.done())
            })
            .map(|a| a.event.lane())
    }

    /// Records that the work before `event` accesses `range`.
    pub(crate) fn accessed(&mut self, range: Range<usize>, event: &Arc<CuEvent>, write: bool) {
        let covered = |a: &Access| range.start <= a.range.start && a.range.end <= range.end;
        let lane = event.lane();
        // Everything a write waited for is ordered before it: drop what it covers. A read
        // supersedes earlier reads on its own stream (they finish before it), so a chain of
        // calls on one stream keeps this list short.
        self.accesses
            .retain(|a| !(covered(a) && (write || (!a.write && a.event.lane() == lane))));
        self.accesses.push(Access {
            range,
            event: event.clone(),
            write,
        });
    }
}

impl Drop for CuBuffer {
    fn drop(&mut self) {
        LIVE_BUFFERS.fetch_sub(1, Ordering::Relaxed);
        let after: Vec<Arc<CuEvent>> = self.accesses.drain(..).map(|a| a.event).collect();
        free_after(self.ptr, self.slot, None, &after);
    }
}

impl DeviceCopy for CuBuffer {
    fn download(&self, range: Range<usize>, dst: &mut [u8]) -> Result<()> {
        if dst.is_empty() {
            return Ok(());
        }
        let ctx =
            opened_slot(self.slot).ok_or_else(|| Error::Driver("CUDA context gone".into()))?;
        ctx.bind()?;
        debug_assert_eq!(dst.len(), range.len() * self.elem);
        // The caller waited for the range's writers (its coherence events); this copy and
        // the wait below are on the pool's first stream.
        let lane = ctx.lane(0);
        injected(Fault::Download).map_err(driver)?;
        // SAFETY: `range` lies inside the container, which the buffer covers; `dst` holds
        // exactly the range's bytes and outlives the copy (we synchronise before returning).
        unsafe {
            result::memcpy_dtoh_async(dst, self.at(range.start), lane.raw).map_err(driver)?;
            result::stream::synchronize(lane.raw).map_err(driver)?;
        }
        self.down.fetch_add(dst.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// A temporary device buffer for one call, allocated on one stream.
pub(crate) struct Scratch {
    pub(crate) ptr: sys::CUdeviceptr,
    lane: Lane,
    /// The last work on other streams using it (the free waits for them).
    users: Vec<Arc<CuEvent>>,
}

impl Scratch {
    /// `bytes` bytes, uninitialised, ordered on `lane`.
    pub(crate) fn new(lane: Lane, bytes: usize) -> Result<Self> {
        Ok(Scratch {
            ptr: alloc(lane, bytes)?,
            lane,
            users: Vec::new(),
        })
    }

    /// Zeroes `bytes` bytes from `offset`, ordered on the scratch's stream.
    pub(crate) fn zero(&self, offset: usize, bytes: usize) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: the caller asks only for bytes inside this allocation.
        unsafe { result::memset_d8_async(self.ptr + offset as u64, 0, bytes, self.lane.raw) }
            .map_err(driver)
    }

    /// Writes `v` at byte `offset`, ordered on the scratch's stream.
    pub(crate) fn write_value<T: DeviceType>(&self, offset: usize, v: &T) -> Result<()> {
        // SAFETY: `v` is a plain value of `size_of::<T>()` bytes (DeviceType: no padding
        // that is read as data, any bytes valid); viewed as bytes only for the copy.
        let bytes = unsafe {
            std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>())
        };
        // SAFETY: the caller asks only for bytes inside this allocation; a copy from
        // pageable host memory is staged by the driver before the call returns, so `v` may
        // go away afterwards.
        unsafe { result::memcpy_htod_async(self.ptr + offset as u64, bytes, self.lane.raw) }
            .map_err(driver)
    }

    /// Lets `lanes` use the buffer: they wait for its allocation and initialisation.
    pub(crate) fn share(&self, lanes: &[Lane]) -> Result<()> {
        let ready = CuEvent::record(self.lane)?;
        for &lane in lanes {
            ready.order(lane)?;
        }
        Ok(())
    }

    /// The buffer is freed only after the work before `event` (on another stream).
    pub(crate) fn used_until(&mut self, event: &Arc<CuEvent>) {
        self.users.push(event.clone());
    }

    /// Copies `dst.len()` bytes from `offset` to the host and waits for them.
    pub(crate) fn read(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        injected(Fault::Download).map_err(driver)?;
        self.read_control(offset, dst)
    }

    /// [`Scratch::read`] of control words that are no container's data (a checked call's
    /// fault record): `skel::debug::inject_fault` leaves it alone, so that checked and
    /// unchecked calls meet injected faults at the same operations.
    pub(crate) fn read_control(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        // SAFETY: the caller asks only for bytes inside this allocation; `dst` outlives the
        // copy (synchronised before returning).
        unsafe {
            result::memcpy_dtoh_async(dst, self.ptr + offset as u64, self.lane.raw)
                .map_err(driver)?;
            result::stream::synchronize(self.lane.raw).map_err(driver)
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // On its own stream: its work there is ordered before the free without an event.
        free_after(self.ptr, self.lane.slot(), Some(self.lane), &self.users);
    }
}

/// Reusable scratch for calls that wait for their result (Reduce, MapReduce): device words
/// that are zero between calls (the kernels leave every word they count with at zero), and
/// page-locked host words mapped into the device's address space, where the last kernel
/// writes the result. A small call thus allocates, clears and copies nothing: it launches
/// its kernel and waits for its stream.
struct Slot {
    /// The device (context) whose memory it is.
    ordinal: u32,
    dev: sys::CUdeviceptr,
    dev_bytes: usize,
    host: *mut u8,
    host_dev: sys::CUdeviceptr,
    host_bytes: usize,
}

// SAFETY: a device address and a pinned host allocation owned by the slot; a slot is used
// by one call at a time (taken out of the pool, see `ResultSlot`).
unsafe impl Send for Slot {}

/// Idle slots kept for reuse.
const SLOTS: usize = 16;

fn slot_pool() -> std::sync::MutexGuard<'static, Vec<Slot>> {
    static POOL: std::sync::Mutex<Vec<Slot>> = std::sync::Mutex::new(Vec::new());
    POOL.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Slot {
    fn new(ordinal: u32, dev_bytes: usize, host_bytes: usize) -> Result<Slot> {
        let dev_bytes = dev_bytes.max(4096).next_power_of_two();
        let host_bytes = host_bytes.max(64).next_power_of_two();
        // SAFETY: plain allocations, owned by the slot and freed in its drop; the clear runs
        // on the legacy stream, which the pool's non-blocking streams do not wait for, so
        // it is waited for here: afterwards every stream sees zeroed words.
        unsafe {
            let dev = result::malloc_sync(dev_bytes).map_err(|e| oom_or_driver(e, dev_bytes))?;
            let mut slot = Slot {
                ordinal,
                dev,
                dev_bytes,
                host: std::ptr::null_mut(),
                host_dev: 0,
                host_bytes,
            };
            result::memset_d8_sync(dev, 0, dev_bytes).map_err(driver)?;
            result::stream::synchronize(std::ptr::null_mut()).map_err(driver)?;
            slot.host = result::malloc_host(host_bytes, sys::CU_MEMHOSTALLOC_DEVICEMAP)
                .map_err(|e| oom_or_driver(e, host_bytes))?
                .cast::<u8>();
            sys::cuMemHostGetDevicePointer_v2(&mut slot.host_dev, slot.host.cast::<c_void>(), 0)
                .result()
                .map_err(driver)?;
            Ok(slot)
        }
    }
}

/// An opened slot on device `ordinal`, to bind its context.
fn ctx_of(ordinal: u32) -> Option<&'static Ctx> {
    opened_slots().find(|c| c.ordinal == ordinal)
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(ctx) = ctx_of(self.ordinal) {
            let _ = ctx.bind();
        }
        // SAFETY: allocated in `Slot::new`; no work uses them any more (`ResultSlot`'s drop
        // waits for every stream before a slot whose call failed is dropped).
        unsafe {
            let _ = result::free_sync(self.dev);
            if !self.host.is_null() {
                let _ = result::free_host(self.host.cast::<c_void>());
            }
        }
    }
}

/// A [`Slot`] taken from the pool for one call; back to the pool by [`ResultSlot::finish`].
pub(crate) struct ResultSlot(Option<Slot>);

impl ResultSlot {
    /// A slot with at least `dev_bytes` zeroed device bytes and `host_bytes` of result.
    pub(crate) fn take(dev_bytes: usize, host_bytes: usize) -> Result<ResultSlot> {
        // The calling thread's current slot's device (its context is bound).
        let ordinal = super::context::ctx()?.ordinal;
        let reused = {
            let mut pool = slot_pool();
            pool.iter()
                .position(|s| {
                    s.ordinal == ordinal && s.dev_bytes >= dev_bytes && s.host_bytes >= host_bytes
                })
                .map(|i| pool.swap_remove(i))
        };
        let slot = match reused {
            Some(slot) => slot,
            None => Slot::new(ordinal, dev_bytes, host_bytes)?,
        };
        Ok(ResultSlot(Some(slot)))
    }

    fn slot(&self) -> Result<&Slot> {
        self.0
            .as_ref()
            .ok_or_else(|| Error::Driver("internal: result slot already returned".into()))
    }

    /// The device words (zero, and to be left zero by the call's kernels).
    pub(crate) fn scratch(&self) -> Result<sys::CUdeviceptr> {
        Ok(self.slot()?.dev)
    }

    /// The device address of the host words the result is written to.
    pub(crate) fn result(&self) -> Result<sys::CUdeviceptr> {
        Ok(self.slot()?.host_dev)
    }

    /// Waits for `lane` (whose work is the last to write the result), copies the result's
    /// first `dst.len()` bytes to `dst`, and returns the slot to the pool.
    pub(crate) fn finish(mut self, lane: Lane, dst: &mut [u8]) -> Result<()> {
        let upto = recorded(lane.index);
        // SAFETY: a valid stream; a failure leaves the slot to the drop below, which waits
        // for every stream before freeing it.
        unsafe { result::stream::synchronize(lane.raw) }.map_err(driver)?;
        synced(lane.index, upto);
        let slot = self
            .0
            .take()
            .ok_or_else(|| Error::Driver("internal: result slot".into()))?;
        if dst.len() > slot.host_bytes {
            return Err(Error::Driver(
                "internal: result larger than its slot".into(),
            ));
        }
        // SAFETY: the host words hold at least `dst.len()` bytes (checked); the kernels
        // that wrote them are done (the stream was waited for above).
        unsafe { std::ptr::copy_nonoverlapping(slot.host, dst.as_mut_ptr(), dst.len()) };
        let mut pool = slot_pool();
        if pool.len() < SLOTS {
            pool.push(slot);
        }
        Ok(())
    }
}

impl Drop for ResultSlot {
    fn drop(&mut self) {
        // A call that failed after launching: its kernels may still use the slot, and may
        // have stopped before leaving the words at zero; wait for them and free it.
        if let Some(slot) = self.0.take() {
            for ctx in opened_slots().filter(|c| c.ordinal == slot.ordinal) {
                let _ = ctx.synchronize();
            }
            drop(slot);
        }
    }
}

/// Page-locked host memory with default flags (not write-combined).
pub(crate) struct CudaPinned;

impl PinnedAllocator for CudaPinned {
    fn name(&self) -> &str {
        "cuda"
    }

    fn alloc(&self, layout: Layout) -> Result<NonNull<u8>> {
        let ctx = opened().ok_or_else(|| Error::Driver("CUDA context not open".into()))?;
        ctx.bind()?;
        // SAFETY: plain allocation of `size` bytes, cached (not write-combined), and
        // portable: pinned for every context, so copies to any device slot are async.
        let p = unsafe { result::malloc_host(layout.size(), sys::CU_MEMHOSTALLOC_PORTABLE) }
            .map_err(|e| oom_or_driver(e, layout.size()))?;
        let p = NonNull::new(p.cast::<u8>())
            .ok_or_else(|| Error::Driver("cuMemHostAlloc returned null".into()))?;
        if (p.as_ptr() as usize) % layout.align() != 0 {
            // SAFETY: `p` came from cuMemHostAlloc just above and is not used again.
            let _ = unsafe { result::free_host(p.as_ptr().cast::<c_void>()) };
            return Err(Error::Driver(format!(
                "pinned memory not aligned to {}",
                layout.align()
            )));
        }
        Ok(p)
    }

    unsafe fn dealloc(&self, ptr: NonNull<u8>, _layout: Layout) {
        if let Some(ctx) = opened() {
            let _ = ctx.bind();
        }
        // SAFETY: forwarded contract: `ptr` came from `alloc` (cuMemHostAlloc).
        let _ = unsafe { result::free_host(ptr.as_ptr().cast::<c_void>()) };
    }
}

/// The container's device buffer (made on `lane` on first use, then reused).
fn buffer<'s, T: DeviceType>(
    ctx: &Ctx,
    st: &'s mut State,
    full_len: usize,
    lane: Lane,
) -> Result<&'s mut CuBuffer> {
    let dev = ctx.slot;
    let present = st
        .device(dev)
        .is_some_and(|c| c.as_any().downcast_ref::<CuBuffer>().is_some());
    if !present {
        let buf = CuBuffer::new(lane, full_len, std::mem::size_of::<T>())?;
        st.set_device(dev, Box::new(buf));
    }
    st.device_mut(dev)
        .and_then(|c| c.as_any_mut().downcast_mut::<CuBuffer>())
        .ok_or_else(|| Error::Driver("internal: CUDA buffer missing".into()))
}

/// Bytes of `T` in `range`.
fn bytes_of<T>(range: &Range<usize>) -> usize {
    range.len() * std::mem::size_of::<T>()
}

/// Uploads on `lane` the parts of `range` (container elements) that are not valid on the
/// device and orders `lane` after earlier writes of `range`: afterwards, work on `lane`
/// may read `range`. Returns the buffer's base address.
fn stage_read<T: DeviceType>(
    ctx: &Ctx,
    store: &Store<T>,
    st: &mut State,
    range: Range<usize>,
    lane: Lane,
    tag: Tag,
) -> Result<sys::CUdeviceptr> {
    let loc = ctx.location();
    buffer::<T>(ctx, st, store.len(), lane)?;
    peer_copies::<T>(ctx, st, range.clone(), lane, tag)?;
    let missing = st.coherence.missing(loc, range.clone());
    for part in &missing {
        // The newest data may be on another device: bring it to the host first (this also
        // waits for eager downloads still writing the host range).
        store.bring_back(st, part.clone())?;
    }
    buffer::<T>(ctx, st, store.len(), lane)?;
    if !missing.is_empty() {
        let bytes: usize = missing.iter().map(bytes_of::<T>).sum();
        let span = trace::begin(lane, Op::Upload, bytes, tag)?;
        let mut issued = false;
        let copies = (|| -> Result<()> {
            for part in &missing {
                // The host must not write `part` until the copy is done: every host write
                // first waits for the range's events (Store::overwrite -> wait_all), and
                // the event recorded below covers this copy (after a failure, the wait
                // below does).
                let src = store.host_slice(st, part.clone());
                let buf = device_buffer(ctx, st)?;
                buf.order(lane, part, true)?;
                injected(Fault::Upload).map_err(driver)?;
                // SAFETY: the destination lies inside the device buffer (it covers the
                // container); `src` is host-valid data that stays allocated and unwritten
                // until the event (see above).
                unsafe { result::memcpy_htod_async(buf.at(part.start), src, lane.raw) }
                    .map_err(driver)?;
                issued = true;
            }
            Ok(())
        })();
        if let Err(e) = copies {
            if issued {
                // No event covers the copies already issued, so nothing would keep the
                // host from writing or freeing what they read, nor later work on other
                // streams from overlapping them: let them finish. Its own failure would
                // only repeat the driver's state; the first error is the one to report.
                // SAFETY: a valid stream of the context.
                let _ = unsafe { result::stream::synchronize(lane.raw) };
            }
            return Err(e);
        }
        trace::end(span, lane)?;
        let ev = CuEvent::record(lane)?;
        let buf = device_buffer(ctx, st)?;
        buf.up += bytes as u64;
        for part in &missing {
            buf.accessed(part.clone(), &ev, true);
        }
        let ready: Arc<dyn ReadyEvent> = ev;
        for part in missing {
            st.coherence.mark_valid(loc, part, Some(ready.clone()));
        }
    }
    let buf = device_buffer(ctx, st)?;
    buf.order(lane, &range, false)?;
    Ok(buf.ptr)
}

/// Copies the parts of `range` that are missing on `ctx`'s slot but valid on another
/// opened slot device to device (`cuMemcpyPeerAsync`: direct where peer access is enabled,
/// through the host by the driver where it is not; within one context a plain device copy),
/// on `lane`, ordered after the source range's writers; the source buffer records the read.
fn peer_copies<T: DeviceType>(
    ctx: &Ctx,
    st: &mut State,
    range: Range<usize>,
    lane: Lane,
    tag: Tag,
) -> Result<()> {
    let loc = ctx.location();
    for other in opened_slots().filter(|o| o.slot != ctx.slot) {
        let missing = crate::containers::coherence::RangeSet::from_range(range.clone())
            .subtract(&st.coherence.valid(loc));
        let parts = missing.intersect(&st.coherence.valid(other.location()));
        if parts.is_empty() {
            continue;
        }
        let parts = parts.ranges().to_vec();
        let bytes: usize = parts.iter().map(bytes_of::<T>).sum();
        let src = st
            .device_mut(other.slot)
            .and_then(|c| c.as_any_mut().downcast_mut::<CuBuffer>())
            .ok_or_else(|| Error::Driver("internal: CUDA buffer of another slot missing".into()))?;
        for part in &parts {
            src.order(lane, part, false)?;
        }
        let from: Vec<sys::CUdeviceptr> = parts.iter().map(|p| src.at(p.start)).collect();
        let dst = device_buffer(ctx, st)?;
        let span = trace::begin(lane, Op::Peer, bytes, tag)?;
        for (part, &from) in parts.iter().zip(&from) {
            dst.order(lane, part, true)?;
            // SAFETY: both ranges lie inside their container's buffers (each covers the
            // container); the source range is valid and its writers are ordered before
            // `lane` (above); the destination's earlier accesses are too.
            let r = unsafe {
                sys::cuMemcpyPeerAsync(
                    dst.at(part.start),
                    ctx.ctx,
                    from,
                    other.ctx,
                    bytes_of::<T>(part),
                    lane.raw,
                )
            };
            if let Err(e) = r.result() {
                // Copies already issued must finish before anything else touches them.
                // SAFETY: a valid stream of the context.
                let _ = unsafe { result::stream::synchronize(lane.raw) };
                return Err(driver(e));
            }
        }
        trace::end(span, lane)?;
        let ev = CuEvent::record(lane)?;
        let dst = device_buffer(ctx, st)?;
        for part in &parts {
            dst.accessed(part.clone(), &ev, true);
        }
        if let Some(src) = st
            .device_mut(other.slot)
            .and_then(|c| c.as_any_mut().downcast_mut::<CuBuffer>())
        {
            for part in &parts {
                src.accessed(part.clone(), &ev, false);
            }
        }
        let ready: Arc<dyn ReadyEvent> = ev;
        for part in parts {
            st.coherence.mark_valid(loc, part, Some(ready.clone()));
        }
    }
    Ok(())
}

/// The CUDA buffer already attached to a locked state.
fn device_buffer<'s>(ctx: &Ctx, st: &'s mut State) -> Result<&'s mut CuBuffer> {
    st.device_mut(ctx.slot)
        .and_then(|c| c.as_any_mut().downcast_mut::<CuBuffer>())
        .ok_or_else(|| Error::Driver("internal: CUDA buffer missing".into()))
}

/// Elements `part` (relative to the operand) of a read operand, readable by work on `lane`
/// (uploaded if needed); returns the device address of the operand's element `part.start`.
pub(crate) fn input_part<T: DeviceType>(
    ctx: &Ctx,
    arg: &Arg<'_, T>,
    part: Range<usize>,
    lane: Lane,
    tag: Tag,
) -> Result<sys::CUdeviceptr> {
    let mut st = arg.lock();
    let off = arg.offset();
    let base = stage_read::<T>(
        ctx,
        arg.store(),
        &mut st,
        off + part.start..off + part.end,
        lane,
        tag,
    )?;
    Ok(base + ((off + part.start) * std::mem::size_of::<T>()) as u64)
}

/// Elements `part` of a written operand, writable by work on `lane` (earlier readers and
/// writers on other streams are waited for); the device address of element `part.start`.
/// With `keep`, the current values are uploaded first (a kernel that leaves some outputs
/// as they were).
pub(crate) fn output_part<T: DeviceType>(
    ctx: &Ctx,
    out: &ArgMut<'_, T>,
    part: Range<usize>,
    keep: bool,
    lane: Lane,
    tag: Tag,
) -> Result<sys::CUdeviceptr> {
    let mut st = out.lock();
    let range = out.offset() + part.start..out.offset() + part.end;
    if keep {
        stage_read::<T>(ctx, out.store(), &mut st, range.clone(), lane, tag)?;
    }
    let buf = buffer::<T>(ctx, &mut st, out.full_len(), lane)?;
    buf.order(lane, &range, true)?;
    Ok(buf.at(range.start))
}

/// Records that the work before `event` read elements `part` of `arg`.
pub(crate) fn read_by<T: DeviceType>(
    ctx: &Ctx,
    arg: &Arg<'_, T>,
    part: Range<usize>,
    event: &Arc<CuEvent>,
) -> Result<()> {
    let mut st = arg.lock();
    let off = arg.offset();
    device_buffer(ctx, &mut st)?.accessed(off + part.start..off + part.end, event, false);
    Ok(())
}

/// Records that the work before `event` wrote elements `part` of `out` on the device: the
/// part becomes valid only there, ready after the event.
pub(crate) fn written_part<T: DeviceType>(
    ctx: &Ctx,
    out: &ArgMut<'_, T>,
    part: Range<usize>,
    event: &Arc<CuEvent>,
) -> Result<()> {
    record_write(ctx, out, part, event, false)
}

/// After a failed call: the work before `event` may have written any of elements `part` of
/// `out`. Later work on the buffer is ordered after it; where the device copy was current,
/// it stays the newest (each element old or written); elsewhere the buffer may hold memory
/// no kernel wrote, so the current copy elsewhere keeps the old values.
pub(crate) fn maybe_written_part<T: DeviceType>(
    ctx: &Ctx,
    out: &ArgMut<'_, T>,
    part: Range<usize>,
    event: &Arc<CuEvent>,
) -> Result<()> {
    record_write(ctx, out, part, event, true)
}

/// [`written_part`], or with `only_current` [`maybe_written_part`].
fn record_write<T: DeviceType>(
    ctx: &Ctx,
    out: &ArgMut<'_, T>,
    part: Range<usize>,
    event: &Arc<CuEvent>,
    only_current: bool,
) -> Result<()> {
    let mut st = out.lock();
    let range = out.offset() + part.start..out.offset() + part.end;
    let loc = ctx.location();
    device_buffer(ctx, &mut st)?.accessed(range.clone(), event, true);
    let ready: Arc<dyn ReadyEvent> = event.clone();
    if only_current {
        for part in st.coherence.valid(loc).intersect_range(range) {
            st.coherence.write(loc, part, Some(ready.clone()));
        }
    } else {
        st.coherence.write(loc, range, Some(ready));
    }
    st.device_written();
    Ok(())
}

/// Records that the work before `event` wrote elements `part` of `out` on the device, but
/// not results (a checked call that faulted): where the host holds the part, the device copy
/// is invalidated, so the host keeps the values from before the call.
pub(crate) fn discarded_part<T: DeviceType>(
    ctx: &Ctx,
    out: &ArgMut<'_, T>,
    part: Range<usize>,
    event: &Arc<CuEvent>,
) -> Result<()> {
    let range = out.offset() + part.start..out.offset() + part.end;
    if !out.lock().coherence.is_valid(Location::Host, range.clone()) {
        return written_part(ctx, out, part, event);
    }
    let mut st = out.lock();
    device_buffer(ctx, &mut st)?.accessed(range.clone(), event, true);
    st.coherence.invalidate(ctx.location(), range);
    Ok(())
}

/// Copies elements `part` of `out` (written on the device by work ordered before `lane`'s
/// current point) back to the host on `lane`, asynchronously: host access to the part waits
/// for the copy's event.
pub(crate) fn download_part<T: DeviceType>(
    ctx: &Ctx,
    out: &ArgMut<'_, T>,
    part: Range<usize>,
    lane: Lane,
    tag: Tag,
) -> Result<()> {
    let mut st = out.lock();
    let range = out.offset() + part.start..out.offset() + part.end;
    if range.is_empty() {
        return Ok(());
    }
    let bytes = bytes_of::<T>(&range);
    let host = out.store().host_ptr();
    let buf = device_buffer(ctx, &mut st)?;
    buf.order(lane, &range, false)?;
    let span = trace::begin(lane, Op::Download, bytes, tag)?;
    injected(Fault::Download).map_err(driver)?;
    // SAFETY: `range` lies inside the container; the host range is stale there (the device
    // wrote it), so no shared slice covers it (store.rs, invariants 1-2), and the container
    // is borrowed mutably by this call. Once marked valid below, every host access first
    // waits for the copy's event (Store::bring_back / overwrite), and the store's drop waits
    // for it too, so the memory stays allocated and unread until the copy is done.
    unsafe {
        let dst = std::slice::from_raw_parts_mut(host.add(range.start).cast::<u8>(), bytes);
        result::memcpy_dtoh_async(dst, buf.at(range.start), lane.raw).map_err(driver)?;
    }
    trace::end(span, lane)?;
    let ev = CuEvent::record(lane)?;
    buf.down.fetch_add(bytes as u64, Ordering::Relaxed);
    buf.accessed(range.clone(), &ev, false);
    let ready: Arc<dyn ReadyEvent> = ev;
    st.coherence
        .mark_valid(crate::containers::Location::Host, range, Some(ready));
    Ok(())
}

/// Whether the result of the call writing `out` is copied back eagerly: the caller's
/// choice, else whether the host read at least half of the container after the previous
/// device write.
pub(crate) fn eager_download<T: DeviceType>(out: &ArgMut<'_, T>, choice: Option<bool>) -> bool {
    // A trial run (`fault::trial`) must leave the host copy as it was.
    !super::fault::in_trial() && choice.unwrap_or_else(|| out.lock().host_read_since_device_write())
}

/// The stream of the latest unfinished device access to a container (see
/// `multistream::Work::follows`).
pub(crate) fn busy_lane(ctx: &Ctx, st: &State) -> Option<usize> {
    st.device(ctx.slot)
        .and_then(|c| c.as_any().downcast_ref::<CuBuffer>())
        .and_then(CuBuffer::busy_lane)
}

/// Bytes of `arg`'s elements `part` that are not on the device yet.
pub(crate) fn missing_bytes<T: DeviceType>(
    ctx: &Ctx,
    arg: &Arg<'_, T>,
    part: Range<usize>,
) -> usize {
    let st = arg.lock();
    let off = arg.offset();
    st.coherence
        .missing(ctx.location(), off + part.start..off + part.end)
        .iter()
        .map(bytes_of::<T>)
        .sum()
}

/// Host <-> device bytes moved for a container (for `skel::debug::transfers`).
pub(crate) fn transfers(st: &State, dev: u32) -> Option<(u64, u64)> {
    st.device(dev)
        .and_then(|c| c.as_any().downcast_ref::<CuBuffer>())
        .map(|b| (b.up, b.down.load(Ordering::Relaxed)))
}

/// A `T` from raw bytes (any bit pattern is a valid `DeviceType`).
pub(crate) fn from_bytes<T: DeviceType>(bytes: &[u8]) -> T {
    assert!(bytes.len() >= std::mem::size_of::<T>());
    // SAFETY: enough bytes (checked); any bit pattern is a valid T (DeviceType); unaligned
    // read because the bytes are only byte-aligned.
    unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) }
}
