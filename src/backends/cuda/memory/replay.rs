//! The operands of a recorded device graph (`cuda/graph.rs`): every container range a
//! recorded kernel reads or writes, with the device address it had at the recording. A
//! launch checks them (the container still exists, its device copy is the one the kernels
//! were recorded with, what they read is current on the device), orders the graph's stream
//! after other streams' conflicting work, and afterwards marks them as the eager calls'
//! staging does (`staging.rs`): reads recorded against the graph's event, written ranges
//! valid only on the device, ready after it.

use std::ops::Range;
use std::sync::{Arc, MutexGuard};

use cudarc::driver::sys;

use super::super::context::{Ctx, Lane};
use super::buffers::{device_buffer, free_after};
use super::events::CuEvent;
use crate::containers::store::Store;
use crate::containers::{RangeSet, ReadyEvent, Shared, State};
use crate::{DeviceType, Error, Result};

/// One container range a recorded kernel reads or writes.
pub(crate) struct Operand {
    /// The container's state and host-access flags, shared with it (see `Store::shared`).
    state: Arc<Shared>,
    /// Absolute element range.
    range: Range<usize>,
    write: bool,
    /// The device buffer's address when the kernels were recorded.
    base: sys::CUdeviceptr,
}

impl Operand {
    /// `range` of `store`, whose device buffer on `ctx` starts at `base`, read (or written).
    pub(crate) fn new<T: DeviceType>(
        store: &Store<T>,
        range: Range<usize>,
        write: bool,
        base: sys::CUdeviceptr,
    ) -> Operand {
        Operand {
            state: store.shared(),
            range,
            write,
            base,
        }
    }

    /// Whether the container was dropped (the state, with its device buffers, lives on in
    /// the graph until the graph goes). Told by the store's own flag, not by counting the
    /// state's owners: one container is often several operands of a graph.
    pub(crate) fn detached(&self) -> bool {
        self.state.dropped()
    }

    /// Whether `other` is the same access (container, range, read or write): checking and
    /// marking it once does for both, wherever they fall in the graph.
    pub(crate) fn same(&self, other: &Operand) -> bool {
        Arc::ptr_eq(&self.state, &other.state)
            && self.range == other.range
            && self.write == other.write
            && self.base == other.base
    }

    /// The container's state, locked; host access takes the lock from now on (as after
    /// an eager call's staging) until a host read publishes what it may skip it for.
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock()
    }
}

/// The distinct containers among a graph's operands, in one global order (by the address
/// of their shared state), so that a launch can hold all their locks at once: from its
/// checks through the graph launch to its marks, no host read can slip a view in between
/// (and two launches on two threads take them in the same order).
pub(crate) struct Containers {
    /// For each distinct container, the index of one operand of it, in lock order.
    first: Vec<usize>,
    /// For each operand, the index of its container in `first`.
    at: Vec<usize>,
}

impl Containers {
    /// The containers of `ops`.
    pub(crate) fn of(ops: &[Operand]) -> Containers {
        let mut first: Vec<usize> = Vec::new();
        for (k, op) in ops.iter().enumerate() {
            if !first.iter().any(|&f| Arc::ptr_eq(&ops[f].state, &op.state)) {
                first.push(k);
            }
        }
        first.sort_by_key(|&f| Arc::as_ptr(&ops[f].state) as usize);
        let at = ops
            .iter()
            .map(|op| {
                first
                    .iter()
                    .position(|&f| Arc::ptr_eq(&ops[f].state, &op.state))
                    .unwrap_or(0)
            })
            .collect();
        Containers { first, at }
    }

    /// Locks every container of `ops` (in the global order).
    pub(crate) fn lock<'g>(&self, ops: &'g [Operand]) -> Vec<MutexGuard<'g, State>> {
        self.first.iter().map(|&f| ops[f].lock()).collect()
    }
}

/// What a launch finds before replaying the graph.
pub(crate) enum Found {
    /// Every operand as recorded, every range the kernels read current on the device.
    Ready,
    /// Some range the kernels read is not current on the device (the host wrote it since):
    /// the calls run eagerly this time, uploading it.
    Stale,
    /// The host may still hold a view of a container the kernels write (it read the
    /// container since a call last borrowed it `&mut`): replaying would make the viewed
    /// elements stale under the view, and a later copy-back would write under it. The
    /// calls run eagerly this time: their `&mut` borrows (a `RefCell::borrow_mut`, say)
    /// are what proves the view gone.
    Viewed,
    /// A container the kernels use has no device copy on this device any more: the calls
    /// run eagerly this time, making one (at a new address, which a later launch refuses).
    Gone,
}

/// Checks `ops` (in the order the kernels used them) before a launch on `lane` of `ctx`,
/// making `lane` wait for other streams' work that conflicts with them; `Err` when the
/// graph can no longer run (a container dropped, its device copy made again). `held`: the
/// containers' locks ([`Containers::lock`]), held until [`mark`] is done.
pub(crate) fn prepare(
    ctx: &Ctx,
    ops: &[Operand],
    cs: &Containers,
    held: &mut [MutexGuard<'_, State>],
    lane: Lane,
) -> Result<Found> {
    let loc = ctx.location();
    for (k, op) in ops.iter().enumerate() {
        let st = &mut *held[cs.at[k]];
        // A container dropped after this check leaves its device buffer to the state,
        // which this operand keeps: the graph's kernels never use freed memory.
        if op.detached() {
            return Err(Error::Recording(super::super::graph::DROPPED.into()));
        }
        if op.write && op.state.viewed() {
            return Ok(Found::Viewed);
        }
        let Ok(buf) = device_buffer(ctx, st) else {
            return Ok(Found::Gone);
        };
        if buf.ptr != op.base {
            return Err(Error::Recording(
                "the device copy of a container that the recorded graph uses was made again since the recording (its kernels hold the old address): record the graph again".into(),
            ));
        }
        // Waiting costs nothing when the launch then runs eagerly instead.
        buf.order(lane, &op.range, op.write)?;
        if op.write {
            continue;
        }
        // What the graph's own earlier kernels write needs no upload.
        let missing = st.coherence.missing(loc, op.range.clone());
        if missing.is_empty() {
            continue;
        }
        let mut missing = missing.into_iter().fold(RangeSet::new(), |mut m, r| {
            m.insert(r);
            m
        });
        for w in ops[..k]
            .iter()
            .filter(|w| w.write && Arc::ptr_eq(&w.state, &op.state))
        {
            missing.remove(w.range.clone());
        }
        if !missing.is_empty() {
            return Ok(Found::Stale);
        }
    }
    Ok(Found::Ready)
}

/// Records that the work before `event` (the graph) accessed `ops`: written ranges become
/// valid only on the device, ready after it. Every operand is marked even when one's
/// device buffer is gone (`prepare` checked them; the first such error is returned after):
/// a written range left valid elsewhere would be read back stale.
pub(crate) fn mark(
    ctx: &Ctx,
    ops: &[Operand],
    cs: &Containers,
    held: &mut [MutexGuard<'_, State>],
    event: &Arc<CuEvent>,
) -> Result<()> {
    let loc = ctx.location();
    let mut failed = None;
    for (k, op) in ops.iter().enumerate() {
        let st = &mut *held[cs.at[k]];
        if op.write {
            let ready: Arc<dyn ReadyEvent> = event.clone();
            st.coherence.write(loc, op.range.clone(), Some(ready));
            st.device_written();
        }
        match device_buffer(ctx, st) {
            Ok(buf) => buf.accessed(op.range.clone(), event, op.write),
            Err(e) => {
                failed.get_or_insert(e);
            }
        }
    }
    failed.map_or(Ok(()), Err)
}

/// [`mark`] for a launch whose stream was synchronised instead of followed by an event
/// (recording the event failed): written ranges become valid only on the device, ready.
pub(crate) fn mark_done(
    ctx: &Ctx,
    ops: &[Operand],
    cs: &Containers,
    held: &mut [MutexGuard<'_, State>],
) {
    let loc = ctx.location();
    for (k, op) in ops.iter().enumerate().filter(|(_, op)| op.write) {
        let st = &mut *held[cs.at[k]];
        st.coherence.write(loc, op.range.clone(), None);
        st.device_written();
    }
}

/// [`mark`] for a launch whose stream could not even be synchronised after a failure: what
/// the graph wrote may be half done on the device, so the device copy of the written ranges
/// becomes invalid (a host copy still valid stays the current one).
pub(crate) fn mark_lost(
    ctx: &Ctx,
    ops: &[Operand],
    cs: &Containers,
    held: &mut [MutexGuard<'_, State>],
) {
    let loc = ctx.location();
    for (k, op) in ops.iter().enumerate().filter(|(_, op)| op.write) {
        held[cs.at[k]].coherence.invalidate(loc, op.range.clone());
    }
}

/// A temporary buffer (`Scratch`) that a recorded kernel uses, kept for the graph's
/// launches instead of being freed after its call.
pub(crate) struct Kept {
    pub(crate) ptr: sys::CUdeviceptr,
    pub(crate) lane: Lane,
    /// The work on other streams that used it at the recording.
    pub(crate) users: Vec<Arc<CuEvent>>,
}

impl Kept {
    /// Frees the buffer once `after` (the graph's last launch) and its users are done.
    pub(crate) fn free(mut self, after: Option<&Arc<CuEvent>>) {
        self.users.extend(after.cloned());
        free_after(self.ptr, self.lane.slot(), Some(self.lane), &self.users);
    }
}
