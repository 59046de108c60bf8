//! Reusable scratch words and mapped result memory for calls that wait for their result
//! (Reduce, MapReduce), pooled across calls.

use std::ffi::c_void;

use cudarc::driver::{result, sys};

use super::super::context::{opened_slots, Ctx, Lane};
use super::super::{driver, oom_or_driver};
use super::events::{recorded, synced};
use crate::{Error, Result};

/// Reusable scratch for calls that wait for their result (Reduce, MapReduce): device words
/// that are zero between calls (the kernels leave every word they count with at zero), and
/// page-locked host words mapped into the device's address space, where the last kernel
/// writes the result. A small call thus allocates, clears and copies nothing: it launches
/// its kernel and waits for its stream.
pub(super) struct ResultBuffers {
    /// The device (context) whose memory it is.
    ordinal: u32,
    dev: sys::CUdeviceptr,
    dev_bytes: usize,
    host: *mut u8,
    host_dev: sys::CUdeviceptr,
    host_bytes: usize,
}

// SAFETY: a device address and a pinned host allocation owned by the buffers; they are
// used by one call at a time (taken out of the pool, see `ResultLease`).
unsafe impl Send for ResultBuffers {}

/// Idle result buffers kept for reuse.
const IDLE_RESULT_BUFFERS: usize = 16;

pub(super) fn result_pool() -> std::sync::MutexGuard<'static, Vec<ResultBuffers>> {
    static POOL: std::sync::Mutex<Vec<ResultBuffers>> = std::sync::Mutex::new(Vec::new());
    POOL.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl ResultBuffers {
    fn new(ordinal: u32, dev_bytes: usize, host_bytes: usize) -> Result<ResultBuffers> {
        let dev_bytes = dev_bytes.max(4096).next_power_of_two();
        let host_bytes = host_bytes.max(64).next_power_of_two();
        // SAFETY: plain allocations, owned by the buffers and freed in their drop; the clear runs
        // on the legacy stream, which the pool's non-blocking streams do not wait for, so
        // it is waited for here: afterwards every stream sees zeroed words.
        unsafe {
            let dev = result::malloc_sync(dev_bytes).map_err(|e| oom_or_driver(e, dev_bytes))?;
            let mut bufs = ResultBuffers {
                ordinal,
                dev,
                dev_bytes,
                host: std::ptr::null_mut(),
                host_dev: 0,
                host_bytes,
            };
            result::memset_d8_sync(dev, 0, dev_bytes).map_err(driver)?;
            result::stream::synchronize(std::ptr::null_mut()).map_err(driver)?;
            bufs.host = result::malloc_host(host_bytes, sys::CU_MEMHOSTALLOC_DEVICEMAP)
                .map_err(|e| oom_or_driver(e, host_bytes))?
                .cast::<u8>();
            sys::cuMemHostGetDevicePointer_v2(&mut bufs.host_dev, bufs.host.cast::<c_void>(), 0)
                .result()
                .map_err(driver)?;
            Ok(bufs)
        }
    }
}

/// An opened slot on device `ordinal`, to bind its context.
fn ctx_of(ordinal: u32) -> Option<&'static Ctx> {
    opened_slots().find(|c| c.ordinal == ordinal)
}

impl Drop for ResultBuffers {
    fn drop(&mut self) {
        if let Some(ctx) = ctx_of(self.ordinal) {
            let _ = ctx.bind();
        }
        // SAFETY: allocated in `ResultBuffers::new`; no work uses them any more (`ResultLease`'s
        // drop waits for every stream before buffers whose call failed are dropped).
        unsafe {
            let _ = result::free_sync(self.dev);
            if !self.host.is_null() {
                let _ = result::free_host(self.host.cast::<c_void>());
            }
        }
    }
}

/// [`ResultBuffers`] taken from the pool for one call; back to the pool by
/// [`ResultLease::finish`].
pub(crate) struct ResultLease(Option<ResultBuffers>);

impl ResultLease {
    /// Buffers with at least `dev_bytes` zeroed device bytes and `host_bytes` of result.
    pub(crate) fn take(dev_bytes: usize, host_bytes: usize) -> Result<ResultLease> {
        super::super::graph::refuse("a call returns its result to the host");
        // The calling thread's current slot's device (its context is bound).
        let ordinal = super::super::context::ctx()?.ordinal;
        let reused = {
            let mut pool = result_pool();
            pool.iter()
                .position(|b| {
                    b.ordinal == ordinal && b.dev_bytes >= dev_bytes && b.host_bytes >= host_bytes
                })
                .map(|i| pool.swap_remove(i))
        };
        let bufs = match reused {
            Some(bufs) => bufs,
            None => ResultBuffers::new(ordinal, dev_bytes, host_bytes)?,
        };
        Ok(ResultLease(Some(bufs)))
    }

    fn buffers(&self) -> Result<&ResultBuffers> {
        self.0
            .as_ref()
            .ok_or_else(|| Error::Driver("internal: result buffers already returned".into()))
    }

    /// The device words (zero, and to be left zero by the call's kernels).
    pub(crate) fn scratch(&self) -> Result<sys::CUdeviceptr> {
        Ok(self.buffers()?.dev)
    }

    /// The device address of the host words the result is written to.
    pub(crate) fn result(&self) -> Result<sys::CUdeviceptr> {
        Ok(self.buffers()?.host_dev)
    }

    /// Waits for `lane` (whose work is the last to write the result), copies the result's
    /// first `dst.len()` bytes to `dst`, and returns the buffers to the pool.
    pub(crate) fn finish(mut self, lane: Lane, dst: &mut [u8]) -> Result<()> {
        let upto = recorded(lane.index);
        // SAFETY: a valid stream; a failure leaves the buffers to the drop below, which waits
        // for every stream before freeing it.
        unsafe { result::stream::synchronize(lane.raw) }.map_err(driver)?;
        synced(lane.index, upto);
        let bufs = self
            .0
            .take()
            .ok_or_else(|| Error::Driver("internal: result buffers".into()))?;
        if dst.len() > bufs.host_bytes {
            return Err(Error::Driver(
                "internal: result larger than its buffer".into(),
            ));
        }
        // SAFETY: the host words hold at least `dst.len()` bytes (checked); the kernels
        // that wrote them are done (the stream was waited for above).
        unsafe { std::ptr::copy_nonoverlapping(bufs.host, dst.as_mut_ptr(), dst.len()) };
        let mut pool = result_pool();
        if pool.len() < IDLE_RESULT_BUFFERS {
            pool.push(bufs);
        }
        Ok(())
    }
}

impl Drop for ResultLease {
    fn drop(&mut self) {
        // A call that failed after launching: its kernels may still use the buffers, and may
        // have stopped before leaving the words at zero; wait for them and free it.
        if let Some(bufs) = self.0.take() {
            for ctx in opened_slots().filter(|c| c.ordinal == bufs.ordinal) {
                let _ = ctx.synchronize();
            }
            drop(bufs);
        }
    }
}
