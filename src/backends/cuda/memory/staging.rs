//! Staging operands between host and device for a call: reads upload only the ranges not
//! valid on the device (or copy them from another device slot); writes mark the written
//! range valid only on the device, after the kernel's event; eager downloads mark it valid
//! on the host again, after the copy's event.

use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use cudarc::driver::{result, sys};

use super::super::context::{opened_slots, Ctx, Lane, STREAMS};
use super::super::graph;
use super::super::trace::{self, Op, Tag};
use super::super::{driver, injected};
use super::bounce;
use super::buffers::{buffer, device_buffer, CuBuffer};
use super::events::CuEvent;
use super::replay::Operand;
use crate::containers::host::as_bytes;
use crate::containers::store::Store;
use crate::containers::{Arg, ArgMut, Location, ReadyEvent, State};
use crate::debug::Fault;
use crate::{DeviceType, Error, Result};

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
                let to = buf.at(part.start);
                // Large copies from pageable memory bounce (`bounce.rs`, which settles
                // its own copies after a failure).
                if !bounce::upload(ctx, lane, to, as_bytes(src))? {
                    // SAFETY: the destination lies inside the device buffer (it covers the
                    // container); `src` is host-valid data that stays allocated and
                    // unwritten until the event (see above).
                    unsafe { result::memcpy_htod_async(to, src, lane.raw) }.map_err(driver)?;
                }
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
    let range = off + part.start..off + part.end;
    let base = stage_read::<T>(ctx, arg.store(), &mut st, range.clone(), lane, tag)?;
    if graph::capturing() {
        graph::operand(Operand::new(arg.store(), range, false, base));
    }
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
    if graph::capturing() {
        let base = buf.ptr;
        if keep {
            graph::operand(Operand::new(out.store(), range.clone(), false, base));
        }
        graph::operand(Operand::new(out.store(), range.clone(), true, base));
    }
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
    // Copies into this host range still in flight (an earlier call's eager download whose
    // range went stale on the host since) must land before this one: the event recorded
    // below replaces theirs. One from this slot is ordered already (the kernel that wrote
    // the range here waited for its read of the buffer); one from another slot is not.
    for ev in st.coherence.events(Location::Host, range.clone()) {
        if ev.known_ready() {
            continue;
        }
        match ev.as_any().and_then(|e| e.downcast_ref::<CuEvent>()) {
            Some(cu) if cu.lane() / STREAMS == ctx.slot as usize || cu.done() => {}
            Some(cu) => cu.order(lane)?,
            None => ev.wait()?,
        }
    }
    let buf = device_buffer(ctx, &mut st)?;
    buf.order(lane, &range, false)?;
    let span = trace::begin(lane, Op::Download, bytes, tag)?;
    injected(Fault::Download).map_err(driver)?;
    // SAFETY: `range` lies inside the container; the host range is stale there (the device
    // wrote it), so no shared slice covers it (store.rs, invariants 1-2), and the container
    // is borrowed mutably by this call. Once marked valid below, every host access first
    // waits for the copy's event (Store::bring_back / overwrite), and the store's drop waits
    // for it too, so the memory stays allocated and unread until the copy is done.
    let dst = unsafe { std::slice::from_raw_parts_mut(host.add(range.start).cast::<u8>(), bytes) };
    // Large copies into pageable memory bounce (waited for there, as the driver's own
    // copy into pageable memory is).
    if !bounce::download(ctx, lane, buf.at(range.start), dst)? {
        // SAFETY: as above.
        unsafe { result::memcpy_dtoh_async(dst, buf.at(range.start), lane.raw) }.map_err(driver)?;
    }
    trace::end(span, lane)?;
    let ev = CuEvent::record(lane)?;
    buf.down.fetch_add(bytes as u64, Ordering::Relaxed);
    buf.accessed(range.clone(), &ev, false);
    let ready: Arc<dyn ReadyEvent> = ev;
    st.coherence.mark_valid(Location::Host, range, Some(ready));
    Ok(())
}

/// Whether the result of the call writing `out` is copied back eagerly: the caller's
/// choice, else whether the host read at least half of the container after the previous
/// device write.
pub(crate) fn eager_download<T: DeviceType>(out: &ArgMut<'_, T>, choice: Option<bool>) -> bool {
    // A trial run (`fault::trial`) must leave the host copy as it was.
    !super::super::fault::in_trial()
        && choice.unwrap_or_else(|| out.lock().host_read_since_device_write())
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
