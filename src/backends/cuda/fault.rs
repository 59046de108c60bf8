//! The fault record of a checked call (`codegen::device_source_checked`): six words, zero
//! until the first fault of the launch (of all its MultiStream chunks) claims them, read
//! back once every chunk is done; the outputs become results only if it is still zero.

use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::sys;

use super::context::{Ctx, Lane};
use super::memory::{self, CuEvent, Scratch};
use crate::check::{Fault, FaultKind};
use crate::codegen::{checked_functions, FnDef};
use crate::containers::ArgMut;
use crate::{DeviceType, Error, Result};

/// Words of a fault record.
const WORDS: usize = 6;

/// The zeroed record of one checked call, usable on every stream of the call.
pub(crate) struct Record {
    rec: Scratch,
    /// The stream it was zeroed on, where it is read.
    first: Lane,
}

impl Record {
    /// A record for a checked call (`checked`) over the streams `lanes` (the first zeroes
    /// it, the others wait for that), else none.
    pub(crate) fn new(checked: bool, lanes: &[Lane]) -> Result<Option<Record>> {
        let Some(&first) = lanes.first().filter(|_| checked) else {
            return Ok(None);
        };
        let rec = Scratch::new(first, WORDS * 4)?;
        rec.zero(0, WORDS * 4)?;
        rec.share(lanes)?;
        Ok(Some(Record { rec, first }))
    }

    /// The device address kernels record into.
    pub(crate) fn ptr(&self) -> sys::CUdeviceptr {
        self.rec.ptr
    }

    /// The fault of the call, once the work before `events` (every chunk's kernels) is
    /// done: `Some` error naming the faulting function of the program of `defs`.
    pub(crate) fn read(
        &self,
        events: &[Arc<CuEvent>],
        defs: &[&'static FnDef],
    ) -> Result<Option<Error>> {
        for ev in events {
            ev.order(self.first)?;
        }
        let mut bytes = [0u8; WORDS * 4];
        self.rec.read_control(0, &mut bytes)?;
        let w: Vec<u32> = bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let Some(kind) = FaultKind::from_code(w[0]) else {
            return Ok(None);
        };
        let wide = |lo: u32, hi: u32| u64::from(lo) | u64::from(hi) << 32;
        Ok(Some(
            Fault {
                function: checked_functions(defs).get(w[5] as usize).copied(),
                kind,
                index: wide(w[1], w[2]) as i64,
                len: wide(w[3], w[4]),
            }
            .into_error(defs.first().map_or("?", |d| d.name)),
        ))
    }

    /// The error of a call whose only result is read back (Reduce, MapReduce): `Err` if a
    /// kernel before `events` faulted.
    pub(crate) fn check(&self, events: &[Arc<CuEvent>], defs: &[&'static FnDef]) -> Result<()> {
        match self.read(events, defs)? {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }
}

/// An output whose parts a call records as results ([`Settle::written`]) or as discarded
/// ([`Settle::discarded`]: the host keeps its values from before the call).
pub(crate) trait Settle {
    /// Elements `part` hold results once the work before `ev` is done.
    fn written(&self, ctx: &Ctx, part: Range<usize>, ev: &Arc<CuEvent>) -> Result<()>;
    /// Elements `part` were written by the work before `ev`, but not with results.
    fn discarded(&self, ctx: &Ctx, part: Range<usize>, ev: &Arc<CuEvent>) -> Result<()>;
}

impl<T: DeviceType> Settle for ArgMut<'_, T> {
    fn written(&self, ctx: &Ctx, part: Range<usize>, ev: &Arc<CuEvent>) -> Result<()> {
        memory::written_part(ctx, self, part, ev)
    }
    fn discarded(&self, ctx: &Ctx, part: Range<usize>, ev: &Arc<CuEvent>) -> Result<()> {
        memory::discarded_part(ctx, self, part, ev)
    }
}

thread_local! {
    /// Whether calls on this thread settle as trial runs (see [`trial`]).
    static TRIAL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with every call settling as a trial: results are discarded even without a
/// fault, and nothing is copied back eagerly. A checked call split over device slots runs
/// its parts so first (`devices.rs`): each part settles its own outputs, so a fault of a
/// later part must be found before any part keeps its results.
pub(crate) fn trial<R>(f: impl FnOnce() -> R) -> R {
    let before = TRIAL.with(|t| t.replace(true));
    let r = f();
    TRIAL.with(|t| t.set(before));
    r
}

/// Whether this thread's calls run as trials ([`trial`]).
pub(crate) fn in_trial() -> bool {
    TRIAL.with(std::cell::Cell::get)
}

/// Settles the parts of `outs` that kernels wrote (each done after its event) in a call
/// whose record is `rec` (none: unchecked): results if no kernel faulted, else discarded
/// (the host keeps its values from before the call) and the fault is the call's error.
pub(crate) fn settle<O: Settle + ?Sized>(
    ctx: &Ctx,
    rec: Option<&Record>,
    defs: &[&'static FnDef],
    outs: &[&O],
    parts: &[(Range<usize>, Arc<CuEvent>)],
) -> Result<()> {
    let fault = match rec {
        Some(rec) => {
            let events: Vec<_> = parts.iter().map(|(_, ev)| ev.clone()).collect();
            rec.read(&events, defs)
        }
        None => Ok(None),
    };
    let trial = in_trial();
    for (part, ev) in parts {
        for out in outs {
            match fault {
                Ok(Some(_)) => out.discarded(ctx, part.clone(), ev)?,
                Ok(None) if trial => out.discarded(ctx, part.clone(), ev)?,
                // no fault, or the record could not be read (the kernels ran: new values)
                Ok(None) | Err(_) => out.written(ctx, part.clone(), ev)?,
            }
        }
    }
    match fault? {
        Some(err) => Err(err),
        None => Ok(()),
    }
}

/// The parts of `outs` the kernels of one call wrote so far (each done after its event),
/// settled by [`Written::settle`] once every chunk is issued. Dropped unsettled, because
/// issuing a later chunk failed, it records the parts already issued as written: their
/// kernels run and leave new values on the device, so the device copy must become the
/// newest of those ranges, or host and device would hold different data both marked
/// current (the call's error says its output may be partly new).
pub(crate) struct Written<'o, O: Settle + ?Sized> {
    ctx: &'o Ctx,
    outs: Vec<&'o O>,
    parts: Vec<(Range<usize>, Arc<CuEvent>)>,
}

impl<'o, O: Settle + ?Sized> Written<'o, O> {
    /// Nothing of `outs` written yet.
    pub(crate) fn new(ctx: &'o Ctx, outs: Vec<&'o O>) -> Self {
        Written {
            ctx,
            outs,
            parts: Vec::new(),
        }
    }

    /// Elements `part` of every output are written by the work before `event`.
    pub(crate) fn push(&mut self, part: Range<usize>, event: Arc<CuEvent>) {
        self.parts.push((part, event));
    }

    /// [`settle`] of every part pushed.
    pub(crate) fn settle(mut self, rec: Option<&Record>, defs: &[&'static FnDef]) -> Result<()> {
        let parts = std::mem::take(&mut self.parts);
        settle(self.ctx, rec, defs, &self.outs, &parts)
    }
}

impl<O: Settle + ?Sized> Drop for Written<'_, O> {
    fn drop(&mut self) {
        for (part, event) in self.parts.drain(..) {
            for out in &self.outs {
                // The call already fails with the error that brought us here; a failure
                // to record a part adds nothing the caller could act on.
                let _ = out.written(self.ctx, part.clone(), &event);
            }
        }
    }
}

/// `#define`s of a template in the checked variant (`checked`): `SKEL_FP` declares the
/// record after a parameter list, `SKEL_FA` passes it on (`cuda/common.cuh` makes both
/// empty otherwise, so unchecked kernels stay as they were), and `SKEL_FARG` is the first
/// argument of a user call.
pub(crate) fn defines(checked: bool) -> Vec<(&'static str, String)> {
    if !checked {
        return vec![("SKEL_FARG", String::new())];
    }
    vec![
        ("SKEL_FP", ", unsigned int* skel_fault".into()),
        ("SKEL_FA", ", skel_fault".into()),
        ("SKEL_FARG", "skel_fault, ".into()),
    ]
}
