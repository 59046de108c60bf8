//! Device memory, pinned host memory, events, and the ordering of work across streams; one
//! file per job:
//!
//! - `buffers.rs`: [`CuBuffer`](buffers::CuBuffer), a container's copy on the device (one
//!   buffer for the whole container, made on first use and reused by every later call), the
//!   container's `DeviceCopy`. It remembers the recent device accesses to its ranges (which
//!   stream read or wrote what, up to which event), so work on one stream waits for
//!   conflicting work on another: a read waits for earlier writes of its range, a write for
//!   earlier reads and writes.
//! - `scratch.rs`: [`Scratch`], a temporary buffer (partials, look-back state) for one
//!   call, freed stream-ordered when dropped, so the next call's allocation reuses the
//!   pool's memory.
//! - `result_buffers.rs`: [`ResultLease`], pooled zeroed device words and mapped host
//!   result words for calls that wait for their result (Reduce, MapReduce).
//! - `pinned.rs`: [`CudaPinned`], the page-locked host allocator registered for containers
//!   (`cuMemHostAlloc`, portable: cached, not write-combined, so host reads are fast, and
//!   pinned for every device slot).
//! - `replay.rs`: the operands of a recorded device graph (`cuda/graph.rs`), checked,
//!   ordered and marked on a launch as `staging.rs` does for an eager call, and the
//!   temporary buffers the graph keeps.
//! - `events.rs`: [`CuEvent`], a point in one stream's work; also the `ReadyEvent` a
//!   container waits on before host access, where a failed kernel surfaces
//!   (`try_as_slice`).
//! - `bounce.rs`: uploads from pageable host memory through a few page-locked buffers of
//!   the library's own, filled by several threads (the driver's own path for pageable
//!   memory runs at a fifth of the link's speed).
//! - `staging.rs`: operands to and from the device for a call. Reads upload only the
//!   ranges not valid on the device; writes mark the written range valid only on the
//!   device, after the kernel's event; eager downloads mark it valid on the host again,
//!   after the copy's event.
//!
//! Nothing here blocks except synchronous downloads (a host read of data still on the
//! device) and scalar results.

mod bounce;
mod buffers;
mod events;
mod pinned;
pub(crate) mod replay;
mod result_buffers;
mod scratch;
mod staging;

pub(crate) use buffers::{busy_lane, transfers};
pub(crate) use events::{recorded, synced, CuEvent};
pub(crate) use pinned::CudaPinned;
pub(crate) use replay::{Containers, Found, Kept, Operand};
pub(crate) use result_buffers::ResultLease;
pub(crate) use scratch::Scratch;
pub(crate) use staging::{
    discarded_part, download_part, eager_download, input_part, maybe_written_part, missing_bytes,
    output_part, read_by, written_part,
};

use std::sync::atomic::Ordering;

use crate::DeviceType;

/// `(events, spare events, buffers, idle result buffers)` alive now.
pub(crate) fn live_objects() -> (usize, usize, usize, usize) {
    (
        events::LIVE_EVENTS.load(Ordering::Relaxed),
        (0..super::context::MAX_SLOTS)
            .map(|s| events::spare_events(s).0.len())
            .sum(),
        buffers::LIVE_BUFFERS.load(Ordering::Relaxed),
        result_buffers::result_pool().len(),
    )
}

/// A `T` from raw bytes (any bit pattern is a valid `DeviceType`).
pub(crate) fn from_bytes<T: DeviceType>(bytes: &[u8]) -> T {
    assert!(bytes.len() >= std::mem::size_of::<T>());
    // SAFETY: enough bytes (checked); any bit pattern is a valid T (DeviceType); unaligned
    // read because the bytes are only byte-aligned.
    unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) }
}
