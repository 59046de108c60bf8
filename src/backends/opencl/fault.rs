//! The fault record of a checked call (`codegen::device_source_checked`): six `uint`s,
//! zero until the first fault of the launch claims them, read back with the result.

use ocl::core as cl;

use super::context::Ctx;
use super::driver;
use crate::check::{Fault, FaultKind};
use crate::codegen::{checked_functions, FnDef};
use crate::{Error, Result};

/// A zeroed fault record for one launch.
pub(crate) fn record(ctx: &Ctx) -> Result<cl::Mem> {
    let zeros = [0u32; 6];
    // SAFETY: the driver copies `zeros` (COPY_HOST_PTR) before create_buffer returns.
    unsafe {
        cl::create_buffer(
            &ctx.context,
            cl::MemFlags::new().read_write().copy_host_ptr(),
            zeros.len(),
            Some(&zeros[..]),
        )
    }
    .map_err(driver)
}

/// Waits for the launch that wrote fault record `rec` and reads it: `Some` error naming the
/// faulting function of the program of `defs` if the launch faulted (its outputs then hold
/// no results; see `memory::discarded`).
pub(crate) fn read(ctx: &Ctx, rec: &cl::Mem, defs: &[&'static FnDef]) -> Result<Option<Error>> {
    // Not a container transfer: `skel::debug::inject_fault` leaves this read alone, so that
    // checked and unchecked calls meet injected faults at the same operations.
    let mut r = [0u32; 6];
    // SAFETY: a blocking read of the record's 24 bytes into `r`, which outlives it.
    unsafe {
        cl::enqueue_read_buffer(
            &ctx.queue,
            rec,
            true,
            0,
            &mut r[..],
            None::<&cl::Event>,
            None::<&mut cl::Event>,
        )
    }
    .map_err(driver)?;
    let Some(kind) = FaultKind::from_code(r[0]) else {
        return Ok(None);
    };
    let wide = |lo: u32, hi: u32| u64::from(lo) | u64::from(hi) << 32;
    let functions = checked_functions(defs);
    Ok(Some(
        Fault {
            function: functions.get(r[5] as usize).copied(),
            kind,
            index: wide(r[1], r[2]) as i64,
            len: wide(r[3], r[4]),
        }
        .into_error(defs.first().map_or("?", |d| d.name)),
    ))
}
