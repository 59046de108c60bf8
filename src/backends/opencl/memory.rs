//! Device buffers: one per container (its [`DeviceCopy`] on the OpenCL device), reused
//! across calls, plus temporary buffers for partial results.
//!
//! A read operand uploads only the ranges not valid on the device; a written operand is
//! recorded as valid only on the device (the host copy goes stale and is brought back
//! lazily through [`DeviceCopy::download`]). Every copy is counted per container.

use std::any::Any;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use ocl::core as cl;

use super::context::Ctx;
use super::{driver, injected};
use crate::containers::host::as_bytes;
use crate::containers::{Arg, ArgMut, DeviceCopy, Location, ReadyEvent, State};
use crate::debug::Fault;
use crate::{DeviceType, Error, Result};

/// A container's copy on the OpenCL device: the whole container, in one buffer.
pub(crate) struct ClBuffer {
    pub(crate) mem: cl::Mem,
    queue: cl::CommandQueue,
    elem: usize,
    len: usize,
    up: AtomicU64,
    down: AtomicU64,
    /// Read-ahead of small downloads: (first element, bytes) copied from the device after
    /// its last change. Host access element by element (`v[i]` in a loop) then costs one
    /// device read per `READ_AHEAD` bytes instead of one per element. Dropped whenever the
    /// buffer is written (uploads, kernels).
    ahead: Mutex<Option<(usize, Vec<u8>)>>,
    /// The last ranges kernels wrote (the ones the host will find stale): read-ahead
    /// stays inside them, so it copies back nothing the host does not need.
    kernel_writes: Mutex<Vec<Range<usize>>>,
}

/// Single-element downloads read ahead up to this many bytes.
const READ_AHEAD: usize = 1 << 16;

impl ClBuffer {
    /// Forgets the read-ahead copy (the buffer is about to change).
    fn changed(&self) {
        *self.ahead.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// Blocking read of the bytes of elements `first..` into `dst`, counted.
    fn read(&self, first: usize, dst: &mut [u8]) -> Result<()> {
        injected(Fault::Download)?;
        // SAFETY: a blocking read of `dst.len()` bytes inside the buffer (callers keep the
        // range within the container, which the buffer covers) into `dst`, which outlives
        // the call.
        unsafe {
            cl::enqueue_read_buffer(
                &self.queue,
                &self.mem,
                true,
                first * self.elem,
                dst,
                None::<&cl::Event>,
                None::<&mut cl::Event>,
            )
        }
        .map_err(driver)?;
        self.down.fetch_add(dst.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Bytes copied host -> device and device -> host through this buffer so far.
    pub(crate) fn transfers(&self) -> (u64, u64) {
        (
            self.up.load(Ordering::Relaxed),
            self.down.load(Ordering::Relaxed),
        )
    }
}

impl DeviceCopy for ClBuffer {
    fn download(&self, range: Range<usize>, dst: &mut [u8]) -> Result<()> {
        if dst.is_empty() {
            return Ok(());
        }
        debug_assert_eq!(dst.len(), range.len() * self.elem);
        let mut ahead = self.ahead.lock().unwrap_or_else(PoisonError::into_inner);
        let hit = |a: &Option<(usize, Vec<u8>)>| {
            a.as_ref().and_then(|(first, bytes)| {
                let from = range.start.checked_sub(*first)? * self.elem;
                bytes.get(from..from + dst.len()).map(|b| b.to_vec())
            })
        };
        if hit(&ahead).is_none() {
            // Only single elements (`v[i]`) read ahead, to the end of the kernel-written
            // range they lie in; every other range is copied exactly.
            let end = if range.len() == 1 {
                let writes = self
                    .kernel_writes
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                writes
                    .iter()
                    .rev()
                    .find(|w| w.contains(&range.start))
                    .map_or(range.end, |w| w.end)
                    .min(range.start + (READ_AHEAD / self.elem).max(1))
                    .min(self.len)
            } else {
                range.end
            };
            if end == range.end {
                return self.read(range.start, dst);
            }
            let mut bytes = vec![0u8; (end - range.start) * self.elem];
            self.read(range.start, &mut bytes)?;
            *ahead = Some((range.start, bytes));
        }
        let got = hit(&ahead).ok_or_else(|| Error::Driver("internal: read-ahead miss".into()))?;
        dst.copy_from_slice(&got);
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// A kernel's completion, as the containers wait on it.
pub(crate) struct ClEvent(pub(crate) cl::Event);

impl ReadyEvent for ClEvent {
    fn wait(&self) -> Result<()> {
        cl::wait_for_event(&self.0).map_err(driver)
    }
}

/// A new device buffer of `bytes` bytes (at least one).
pub(crate) fn alloc(ctx: &Ctx, bytes: usize) -> Result<cl::Mem> {
    injected(Fault::Alloc)?;
    // SAFETY: no host pointer is passed; the driver allocates and owns the memory.
    unsafe {
        cl::create_buffer::<_, u8>(
            &ctx.context,
            cl::MemFlags::new().read_write(),
            bytes.max(1),
            None,
        )
    }
    .map_err(driver)
}

/// A temporary buffer for `n` elements of `T`.
pub(crate) fn alloc_elems<T: DeviceType>(ctx: &Ctx, n: usize) -> Result<cl::Mem> {
    alloc(ctx, n * std::mem::size_of::<T>())
}

/// The container's device buffer (created on first use, then reused).
fn buffer<'s, T: DeviceType>(
    ctx: &Ctx,
    st: &'s mut State,
    full_len: usize,
) -> Result<&'s ClBuffer> {
    let dev = super::context::LOCATION_ID;
    let present = st
        .device(dev)
        .is_some_and(|c| c.as_any().downcast_ref::<ClBuffer>().is_some());
    if !present {
        let mem = alloc(ctx, full_len * std::mem::size_of::<T>())?;
        st.set_device(
            dev,
            Box::new(ClBuffer {
                mem,
                queue: ctx.queue.clone(),
                elem: std::mem::size_of::<T>(),
                len: full_len,
                ahead: Mutex::new(None),
                kernel_writes: Mutex::new(Vec::new()),
                up: AtomicU64::new(0),
                down: AtomicU64::new(0),
            }),
        );
    }
    st.device(dev)
        .and_then(|c| c.as_any().downcast_ref::<ClBuffer>())
        .ok_or_else(|| Error::Driver("internal: OpenCL buffer missing".into()))
}

/// Uploads the parts of `range` that are not valid on the device. The caller holds the
/// store's lock (`st`).
fn upload_missing<T: DeviceType>(
    ctx: &Ctx,
    store: &crate::containers::store::Store<T>,
    st: &mut State,
    range: Range<usize>,
) -> Result<cl::Mem> {
    let loc = ctx.location();
    let full_len = store.len();
    let missing = st.coherence.missing(loc, range);
    for part in &missing {
        // The newest data may be on another device: bring it to the host first.
        store.bring_back(st, part.clone())?;
    }
    let buf = buffer::<T>(ctx, st, full_len)?;
    let mem = buf.mem.clone();
    if !missing.is_empty() {
        buf.changed();
    }
    let size = std::mem::size_of::<T>();
    // Read-only from here to the copies' end: the host slices and the buffer's counters.
    let shared: &State = st;
    for part in &missing {
        if part.is_empty() {
            continue;
        }
        // Valid on the host (brought back above, under the lock): host_slice checks it.
        let src = as_bytes(store.host_slice(shared, part.clone()));
        injected(Fault::Upload)?;
        // SAFETY: a blocking write of `src` (inside the buffer, which covers the whole
        // container); `src` outlives the call.
        unsafe {
            cl::enqueue_write_buffer(
                &ctx.queue,
                &mem,
                true,
                part.start * size,
                src,
                None::<&cl::Event>,
                None::<&mut cl::Event>,
            )
        }
        .map_err(driver)?;
        if let Some(buf) = cl_buffer(shared) {
            buf.up.fetch_add(src.len() as u64, Ordering::Relaxed);
        }
    }
    for part in missing {
        st.coherence.mark_valid(loc, part, None);
    }
    Ok(mem)
}

/// A read operand on the device: its buffer, current over the operand's range.
pub(crate) fn input<T: DeviceType>(ctx: &Ctx, arg: &Arg<'_, T>) -> Result<cl::Mem> {
    let mut st = arg.lock();
    upload_missing::<T>(ctx, arg.store(), &mut st, arg.range())
}

/// A written operand's buffer. With `keep`, the operand's current values are uploaded
/// first (a kernel that leaves some outputs untouched); otherwise nothing is copied.
pub(crate) fn output<T: DeviceType>(ctx: &Ctx, out: &ArgMut<'_, T>, keep: bool) -> Result<cl::Mem> {
    let mut st = out.lock();
    if keep {
        let mem = upload_missing::<T>(ctx, out.store(), &mut st, out.range())?;
        buffer::<T>(ctx, &mut st, out.full_len())?.changed();
        return Ok(mem);
    }
    // Pending copies from/to the host of this range must be done before it is overwritten.
    st.coherence.wait_all(out.range())?;
    let buf = buffer::<T>(ctx, &mut st, out.full_len())?;
    buf.changed();
    Ok(buf.mem.clone())
}

/// The container's OpenCL buffer, if it has one.
fn cl_buffer(st: &State) -> Option<&ClBuffer> {
    st.device(super::context::LOCATION_ID)?
        .as_any()
        .downcast_ref::<ClBuffer>()
}

/// Records that a kernel (done after `event`) wrote the operand's range on the device.
pub(crate) fn written<T: DeviceType>(ctx: &Ctx, out: &ArgMut<'_, T>, event: cl::Event) {
    let ev: Arc<dyn ReadyEvent> = Arc::new(ClEvent(event));
    let mut st = out.lock();
    st.coherence.write(ctx.location(), out.range(), Some(ev));
    if let Some(buf) = cl_buffer(&st) {
        let mut w = buf
            .kernel_writes
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        w.retain(|r| r.end <= out.range().start || r.start >= out.range().end);
        w.push(out.range());
        if w.len() > 16 {
            w.remove(0);
        }
    }
}

/// Records that a kernel (done after `event`) wrote the operand's range on the device, but
/// not results (a checked call that faulted): where the host holds the whole range, the
/// device copy is invalidated, so the host keeps reading the values from before the call.
pub(crate) fn discarded<T: DeviceType>(ctx: &Ctx, out: &ArgMut<'_, T>, event: cl::Event) {
    let host_holds = out.lock().coherence.is_valid(Location::Host, out.range());
    if host_holds {
        out.lock().coherence.invalidate(ctx.location(), out.range());
    } else {
        written(ctx, out, event);
    }
}

/// After a failed call: a kernel (done after `event`) may have written any part of the
/// operand's range. Where the device copy was current, it stays the newest (each element
/// old or written); elsewhere the buffer may hold memory no kernel wrote, so the current
/// copy elsewhere keeps the old values.
pub(crate) fn maybe_written<T: DeviceType>(ctx: &Ctx, out: &ArgMut<'_, T>, event: cl::Event) {
    let ev: Arc<dyn ReadyEvent> = Arc::new(ClEvent(event));
    let mut st = out.lock();
    let loc = ctx.location();
    for part in st.coherence.valid(loc).intersect_range(out.range()) {
        st.coherence.write(loc, part, Some(ev.clone()));
    }
}

/// Blocking read of `n` elements of `T` from a temporary buffer.
pub(crate) fn read_elems<T: DeviceType>(ctx: &Ctx, mem: &cl::Mem, n: usize) -> Result<Vec<T>> {
    let mut bytes = vec![0u8; n * std::mem::size_of::<T>()];
    if !bytes.is_empty() {
        injected(Fault::Download)?;
        // SAFETY: a blocking read of `bytes.len()` bytes, within the buffer.
        unsafe {
            cl::enqueue_read_buffer(
                &ctx.queue,
                mem,
                true,
                0,
                &mut bytes,
                None::<&cl::Event>,
                None::<&mut cl::Event>,
            )
        }
        .map_err(driver)?;
    }
    Ok(bytes
        .chunks_exact(std::mem::size_of::<T>().max(1))
        .take(n)
        // SAFETY: each chunk holds size_of::<T>() bytes; any bit pattern is a valid T
        // (DeviceType); read_unaligned because Vec<u8> is only byte-aligned.
        .map(|c| unsafe { std::ptr::read_unaligned(c.as_ptr().cast::<T>()) })
        .collect())
}

/// Transfer counters of a container's OpenCL copy, if it has one.
pub(crate) fn transfers(st: &State) -> Option<(u64, u64)> {
    cl_buffer(st).map(ClBuffer::transfers)
}
