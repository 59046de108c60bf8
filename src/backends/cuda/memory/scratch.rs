//! [`Scratch`]: a temporary buffer (partials, look-back state) for one call, freed
//! stream-ordered when dropped, so the next call's allocation reuses the pool's memory.

use std::sync::Arc;

use cudarc::driver::{result, sys};

use super::super::context::Lane;
use super::super::{driver, graph, injected};
use super::buffers::{alloc, free_after};
use super::events::CuEvent;
use super::replay::Kept;
use crate::debug::Fault;
use crate::{DeviceType, Result};

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
            .map_err(driver)?;
        if graph::capturing() {
            graph::memset(self.lane, self.ptr + offset as u64, bytes);
        }
        Ok(())
    }

    /// Writes `v` at byte `offset`, ordered on the scratch's stream.
    pub(crate) fn write_value<T: DeviceType>(&self, offset: usize, v: &T) -> Result<()> {
        graph::refuse("a call copies a value from the host into its temporary buffer");
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
        graph::refuse(
            "a call reads device words back to the host and waits for them (a checked call's fault record, a count)",
        );
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
        // A recorded graph's kernels use it again on every launch: the graph frees it.
        if graph::capturing() {
            graph::keep(Kept {
                ptr: self.ptr,
                lane: self.lane,
                users: std::mem::take(&mut self.users),
            });
            return;
        }
        // On its own stream: its work there is ordered before the free without an event.
        free_after(self.ptr, self.lane.slot(), Some(self.lane), &self.users);
    }
}
