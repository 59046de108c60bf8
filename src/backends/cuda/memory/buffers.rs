//! [`CuBuffer`]: a container's copy on the device (one buffer for the whole container, made
//! on first use and reused by every later call), the container's [`DeviceCopy`], with the
//! recent device accesses to its ranges; and the stream-ordered device allocations under
//! it and under [`super::Scratch`].

use std::any::Any;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use cudarc::driver::{result, sys};

use super::super::context::{opened_slot, Ctx, Lane};
use super::super::{driver, injected, oom_or_driver};
use super::events::{recorded, CuEvent};
use crate::containers::{DeviceCopy, State};
use crate::debug::Fault;
use crate::{DeviceType, Error, Result};

/// Allocates `bytes` (at least 1) from the device's pool, ordered on `lane`.
pub(super) fn alloc(lane: Lane, bytes: usize) -> Result<sys::CUdeviceptr> {
    injected(Fault::Alloc).map_err(|e| oom_or_driver(e, bytes))?;
    // SAFETY: the stream is valid; users on other streams are ordered after the allocation
    // through an event (`CuBuffer::new`, `Scratch::share`).
    unsafe { result::malloc_async(lane.raw, bytes.max(1)) }.map_err(|e| oom_or_driver(e, bytes))
}

/// Frees `ptr` (of slot `slot`) on `lane` (`None`: the slot's first stream) once `after`
/// are done.
pub(super) fn free_after(
    ptr: sys::CUdeviceptr,
    slot: usize,
    lane: Option<Lane>,
    after: &[Arc<CuEvent>],
) {
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

/// Device buffers of containers alive now, for leak checks over long runs
/// (`skel::debug::device_objects`).
pub(super) static LIVE_BUFFERS: AtomicUsize = AtomicUsize::new(0);

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
    pub(super) up: u64,
    pub(super) down: AtomicU64,
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
        // A range next to one of the same kind that the same event follows (a graph launch
        // marks its kernels' accesses one by one: a wavefront's rows) extends that entry,
        // or this list, which every access scans, grows by one per row. Only among the
        // newest entries, all of this event, so which access is the latest stays the same.
        for a in self.accesses.iter_mut().rev() {
            if !Arc::ptr_eq(&a.event, event) {
                break;
            }
            if a.write == write && (a.range.end == range.start || range.end == a.range.start) {
                a.range = a.range.start.min(range.start)..a.range.end.max(range.end);
                return;
            }
        }
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
        // Large copies into pageable memory bounce (waited for there).
        if !super::bounce::download(ctx, lane, self.at(range.start), dst)? {
            // SAFETY: `range` lies inside the container, which the buffer covers; `dst`
            // holds exactly the range's bytes and outlives the copy (we synchronise before
            // returning).
            unsafe {
                result::memcpy_dtoh_async(dst, self.at(range.start), lane.raw).map_err(driver)?;
                result::stream::synchronize(lane.raw).map_err(driver)?;
            }
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

/// The container's device buffer (made on `lane` on first use, then reused).
pub(super) fn buffer<'s, T: DeviceType>(
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

/// The CUDA buffer already attached to a locked state.
pub(super) fn device_buffer<'s>(ctx: &Ctx, st: &'s mut State) -> Result<&'s mut CuBuffer> {
    st.device_mut(ctx.slot)
        .and_then(|c| c.as_any_mut().downcast_mut::<CuBuffer>())
        .ok_or_else(|| Error::Driver("internal: CUDA buffer missing".into()))
}

/// The stream of the latest unfinished device access to a container (see
/// `multistream::Work::follows`).
pub(crate) fn busy_lane(ctx: &Ctx, st: &State) -> Option<usize> {
    st.device(ctx.slot)
        .and_then(|c| c.as_any().downcast_ref::<CuBuffer>())
        .and_then(CuBuffer::busy_lane)
}

/// Host <-> device bytes moved for a container (for `skel::debug::transfers`).
pub(crate) fn transfers(st: &State, dev: u32) -> Option<(u64, u64)> {
    st.device(dev)
        .and_then(|c| c.as_any().downcast_ref::<CuBuffer>())
        .map(|b| (b.up, b.down.load(Ordering::Relaxed)))
}
