//! The fault record of a checked call (`codegen::device_source_checked`): six `uint`s,
//! zero until the first fault of the launch claims them, read back with the result.

use ocl::core as cl;

use super::context::Ctx;
use super::{driver, memory};
use crate::check::{Fault, FaultKind};
use crate::codegen::{checked_functions, FnDef};
use crate::containers::ArgMut;
use crate::{DeviceType, Error, Result};

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

/// `#define`s of the kernel templates whose helpers call a user function (`reduce.cl`,
/// `scan.cl`): `SKEL_FP` declares the fault record after a parameter list, `SKEL_FA` passes
/// it on; both are empty in the unchecked variant, whose kernels stay as they were.
pub(crate) fn defines(s: &mut String, checked: bool) {
    s.push_str(if checked {
        "#define SKEL_FP , __global uint* skel_fault\n#define SKEL_FA , skel_fault\n"
    } else {
        "#define SKEL_FP\n#define SKEL_FA\n"
    });
}

/// A zeroed fault record for a checked call (`checked`), else none.
pub(crate) fn record_if(ctx: &Ctx, checked: bool) -> Result<Option<cl::Mem>> {
    checked.then(|| record(ctx)).transpose()
}

/// The error of the call whose record is `rec` (none: an unchecked call), once its
/// kernels are done.
pub(crate) fn check(ctx: &Ctx, rec: Option<&cl::Mem>, defs: &[&'static FnDef]) -> Result<()> {
    match rec.map(|r| read(ctx, r, defs)).transpose()?.flatten() {
        Some(err) => Err(err),
        None => Ok(()),
    }
}

/// Settles `out`, written by the kernel done after `ev`, of a call whose record is `rec`:
/// results if there was no fault (or the call was unchecked), else discarded (the host
/// keeps the values from before the call) and the fault is the call's error.
pub(crate) fn settle<T: DeviceType>(
    ctx: &Ctx,
    rec: Option<&cl::Mem>,
    defs: &[&'static FnDef],
    out: &ArgMut<'_, T>,
    ev: cl::Event,
) -> Result<()> {
    let Some(rec) = rec else {
        memory::written(ctx, out, ev);
        return Ok(());
    };
    match read(ctx, rec, defs) {
        Ok(None) => {
            memory::written(ctx, out, ev);
            Ok(())
        }
        Ok(Some(err)) => {
            memory::discarded(ctx, out, ev);
            Err(err)
        }
        // the record could not be read: as after any failed call
        Err(e) => {
            memory::maybe_written(ctx, out, ev);
            Err(e)
        }
    }
}

/// The first argument of a user call in the checked variant (`skel_fault, `), else nothing.
pub(crate) fn arg(checked: bool) -> &'static str {
    if checked {
        "skel_fault, "
    } else {
        ""
    }
}
