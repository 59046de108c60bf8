//! [`CuEvent`]: a point in one stream's work, also the [`ReadyEvent`] a container waits on
//! before host access; per stream, how far its work is known to be done; spare events kept
//! for reuse.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use cudarc::driver::{result, sys};

use super::super::context::{opened_slot, Lane, LANES, STREAMS};
use super::super::driver;
use crate::containers::ReadyEvent;
use crate::Result;

/// Recorded events still referenced, for leak checks over long runs
/// (`skel::debug::device_objects`).
pub(super) static LIVE_EVENTS: AtomicUsize = AtomicUsize::new(0);

/// A point in one stream's work; ready once everything enqueued on it before is done.
pub(crate) struct CuEvent {
    raw: sys::CUevent,
    pub(super) lane: usize,
    /// Its place among the events recorded on its stream (see [`Marks`]).
    pub(super) seq: u64,
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
    // Release/Acquire: a thread that sees the mark also sees what the sync made visible
    // (host bytes a device-to-host copy wrote), also on weakly ordered CPUs.
    MARKS.done[lane % LANES].fetch_max(upto, Ordering::Release);
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
    pub(super) fn done(&self) -> bool {
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
    pub(super) fn known_done(&self) -> bool {
        MARKS.done[self.lane % LANES].load(Ordering::Acquire) >= self.seq
    }
}

/// Events no longer referenced, kept for reuse: creating one costs about as much as the
/// rest of a small call. Recording a reused event is safe: stream waits enqueued earlier
/// keep waiting for the record they saw, and nothing else refers to the event any more.
pub(super) struct SpareEvents(pub(super) Vec<sys::CUevent>);

// SAFETY: event handles are driver objects usable from any thread of the process.
unsafe impl Send for SpareEvents {}

/// At most this many spare events are kept.
const SPARE_EVENTS: usize = 1024;

pub(super) fn spare_events(slot: usize) -> std::sync::MutexGuard<'static, SpareEvents> {
    static SPARE: [std::sync::Mutex<SpareEvents>; super::super::context::MAX_SLOTS] =
        [const { std::sync::Mutex::new(SpareEvents(Vec::new())) };
            super::super::context::MAX_SLOTS];
    SPARE[slot % super::super::context::MAX_SLOTS]
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

    fn known_ready(&self) -> bool {
        self.known_done()
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}
