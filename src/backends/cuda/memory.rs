//! Device memory, pinned host memory and events.
//!
//! - [`CuBuffer`]: a container's copy on the device (one buffer for the whole container,
//!   made on first use and reused by every later call), the container's [`DeviceCopy`].
//! - [`Scratch`]: a temporary buffer (partials, look-back state) for one call, freed
//!   stream-ordered when dropped, so the next call's allocation reuses the pool's memory.
//! - [`CudaPinned`]: the page-locked host allocator registered for containers
//!   (`cuMemHostAlloc` with flags 0: cached, not write-combined, so host reads are fast).
//! - [`CuEvent`]: the [`ReadyEvent`] a container waits on before host access; a failed
//!   kernel surfaces there (`try_as_slice`).
//!
//! Reads upload only the ranges not valid on the device; writes mark the written range
//! valid only on the device, after the kernel's event. Nothing here blocks except
//! downloads and scalar results.

use std::alloc::Layout;
use std::any::Any;
use std::ffi::c_void;
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::Arc;

use cudarc::driver::{result, sys};

use super::context::{opened, Ctx};
use super::{driver, oom_or_driver};
use crate::containers::store::Store;
use crate::containers::{Arg, ArgMut, DeviceCopy, PinnedAllocator, ReadyEvent, State};
use crate::{DeviceType, Error, Result};

/// Allocates `bytes` (at least 1) from the device's pool, ordered on the stream.
pub(crate) fn alloc(ctx: &Ctx, bytes: usize) -> Result<sys::CUdeviceptr> {
    // SAFETY: the stream is valid; the memory is only used on this stream (or after it).
    unsafe { result::malloc_async(ctx.stream, bytes.max(1)) }.map_err(|e| oom_or_driver(e, bytes))
}

fn free(ptr: sys::CUdeviceptr) {
    if let Some(ctx) = opened() {
        if ctx.bind().is_ok() {
            // SAFETY: `ptr` came from `alloc`; every use of it was enqueued on this stream
            // before, so the stream-ordered free happens after them.
            let _ = unsafe { result::free_async(ptr, ctx.stream) };
        }
    }
}

/// A container's copy on the device.
pub(crate) struct CuBuffer {
    pub(crate) ptr: sys::CUdeviceptr,
    elem: usize,
}

// SAFETY: a device pointer is a plain address valid in the process's context on any
// thread; all accesses go through the one stream, which the driver synchronises.
unsafe impl Send for CuBuffer {}
// SAFETY: as above; `&CuBuffer` only reads the address.
unsafe impl Sync for CuBuffer {}

impl Drop for CuBuffer {
    fn drop(&mut self) {
        free(self.ptr);
    }
}

impl DeviceCopy for CuBuffer {
    fn download(&self, range: Range<usize>, dst: &mut [u8]) -> Result<()> {
        if dst.is_empty() {
            return Ok(());
        }
        let ctx = opened().ok_or_else(|| Error::Driver("CUDA context gone".into()))?;
        ctx.bind()?;
        debug_assert_eq!(dst.len(), range.len() * self.elem);
        let src = self.ptr + (range.start * self.elem) as u64;
        // SAFETY: `range` lies inside the container, which the buffer covers; `dst` holds
        // exactly the range's bytes and outlives the copy (we synchronise before returning).
        unsafe {
            result::memcpy_dtoh_async(dst, src, ctx.stream).map_err(driver)?;
            result::stream::synchronize(ctx.stream).map_err(driver)
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// A temporary device buffer for one call.
pub(crate) struct Scratch {
    pub(crate) ptr: sys::CUdeviceptr,
}

impl Scratch {
    /// `bytes` bytes, uninitialised.
    pub(crate) fn new(ctx: &Ctx, bytes: usize) -> Result<Self> {
        Ok(Scratch {
            ptr: alloc(ctx, bytes)?,
        })
    }

    /// Zeroes `bytes` bytes from `offset`, ordered on the stream.
    pub(crate) fn zero(&self, ctx: &Ctx, offset: usize, bytes: usize) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: the caller asks only for bytes inside this allocation.
        unsafe { result::memset_d8_async(self.ptr + offset as u64, 0, bytes, ctx.stream) }
            .map_err(driver)
    }

    /// Copies `dst.len()` bytes from `offset` to the host and waits for them.
    pub(crate) fn read(&self, ctx: &Ctx, offset: usize, dst: &mut [u8]) -> Result<()> {
        // SAFETY: the caller asks only for bytes inside this allocation; `dst` outlives the
        // copy (synchronised before returning).
        unsafe {
            result::memcpy_dtoh_async(dst, self.ptr + offset as u64, ctx.stream).map_err(driver)?;
            result::stream::synchronize(ctx.stream).map_err(driver)
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        free(self.ptr);
    }
}

/// A point in the stream's work; ready once everything before it is done.
pub(crate) struct CuEvent(sys::CUevent);

// SAFETY: an event handle is a driver object usable from any thread of the process.
unsafe impl Send for CuEvent {}
// SAFETY: as above; waiting on an event from several threads is allowed.
unsafe impl Sync for CuEvent {}

impl CuEvent {
    /// Records an event after the work enqueued so far.
    pub(crate) fn record(ctx: &Ctx) -> Result<Arc<CuEvent>> {
        let ev =
            result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING).map_err(driver)?;
        let ev = CuEvent(ev);
        // SAFETY: both handles are valid.
        unsafe { result::event::record(ev.0, ctx.stream) }.map_err(driver)?;
        Ok(Arc::new(ev))
    }
}

impl Drop for CuEvent {
    fn drop(&mut self) {
        if let Some(ctx) = opened() {
            if ctx.bind().is_ok() {
                // SAFETY: the event is not used after this; destroying a recorded event
                // whose work is pending is allowed (resources are freed on completion).
                let _ = unsafe { result::event::destroy(self.0) };
            }
        }
    }
}

impl ReadyEvent for CuEvent {
    fn wait(&self) -> Result<()> {
        if let Some(ctx) = opened() {
            ctx.bind()?;
        }
        // SAFETY: the event is valid until dropped.
        unsafe { result::event::synchronize(self.0) }.map_err(driver)
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
        // SAFETY: plain allocation of `size` bytes, flags 0 (cached, not write-combined).
        let p = unsafe { result::malloc_host(layout.size(), 0) }
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

/// The container's device buffer (made on first use, then reused).
fn buffer<'s, T: DeviceType>(
    ctx: &Ctx,
    st: &'s mut State,
    full_len: usize,
) -> Result<&'s CuBuffer> {
    let dev = ctx.ordinal;
    let present = st
        .device(dev)
        .is_some_and(|c| c.as_any().downcast_ref::<CuBuffer>().is_some());
    if !present {
        let ptr = alloc(ctx, full_len * std::mem::size_of::<T>())?;
        st.set_device(
            dev,
            Box::new(CuBuffer {
                ptr,
                elem: std::mem::size_of::<T>(),
            }),
        );
    }
    st.device(dev)
        .and_then(|c| c.as_any().downcast_ref::<CuBuffer>())
        .ok_or_else(|| Error::Driver("internal: CUDA buffer missing".into()))
}

/// Uploads the parts of `range` that are not valid on the device; returns the buffer's
/// base address. The caller holds the store's lock (`st`).
fn upload_missing<T: DeviceType>(
    ctx: &Ctx,
    store: &Store<T>,
    st: &mut State,
    range: Range<usize>,
) -> Result<sys::CUdeviceptr> {
    let loc = ctx.location();
    let missing = st.coherence.missing(loc, range);
    for part in &missing {
        // The newest data may be on another device: bring it to the host first.
        store.bring_back(st, part.clone())?;
    }
    let ptr = buffer::<T>(ctx, st, store.len())?.ptr;
    if missing.is_empty() {
        return Ok(ptr);
    }
    let size = std::mem::size_of::<T>();
    for part in &missing {
        // The host must not write `part` until the copy is done: every host write first
        // waits for the range's events (Store::overwrite -> wait_all), and the event
        // recorded below covers this copy.
        let src = store.host_slice(st, part.clone());
        // SAFETY: the destination lies inside the device buffer (it covers the container);
        // `src` is host-valid data that stays allocated and unwritten until the event.
        unsafe { result::memcpy_htod_async(ptr + (part.start * size) as u64, src, ctx.stream) }
            .map_err(driver)?;
    }
    let ev: Arc<dyn ReadyEvent> = CuEvent::record(ctx)?;
    for part in missing {
        st.coherence.mark_valid(loc, part, Some(ev.clone()));
    }
    Ok(ptr)
}

/// A read operand on the device: the address of its first element, current over its range.
pub(crate) fn input<T: DeviceType>(ctx: &Ctx, arg: &Arg<'_, T>) -> Result<sys::CUdeviceptr> {
    let mut st = arg.lock();
    let base = upload_missing::<T>(ctx, arg.store(), &mut st, arg.range())?;
    Ok(base + (arg.offset() * std::mem::size_of::<T>()) as u64)
}

/// A written operand on the device: the address of its first element. With `keep`, its
/// current values are uploaded first (a kernel that leaves some outputs as they were).
pub(crate) fn output<T: DeviceType>(
    ctx: &Ctx,
    out: &ArgMut<'_, T>,
    keep: bool,
) -> Result<sys::CUdeviceptr> {
    let mut st = out.lock();
    let base = if keep {
        upload_missing::<T>(ctx, out.store(), &mut st, out.range())?
    } else {
        // Earlier work on this buffer is ordered before the kernel by the stream.
        buffer::<T>(ctx, &mut st, out.full_len())?.ptr
    };
    Ok(base + (out.offset() * std::mem::size_of::<T>()) as u64)
}

/// Records that the kernel just enqueued writes the operand's range on the device.
pub(crate) fn written<T: DeviceType>(ctx: &Ctx, out: &ArgMut<'_, T>) -> Result<()> {
    let ev: Arc<dyn ReadyEvent> = CuEvent::record(ctx)?;
    out.lock()
        .coherence
        .write(ctx.location(), out.range(), Some(ev));
    Ok(())
}

/// A `T` from raw bytes (any bit pattern is a valid `DeviceType`).
pub(crate) fn from_bytes<T: DeviceType>(bytes: &[u8]) -> T {
    assert!(bytes.len() >= std::mem::size_of::<T>());
    // SAFETY: enough bytes (checked); any bit pattern is a valid T (DeviceType); unaligned
    // read because the bytes are only byte-aligned.
    unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) }
}
