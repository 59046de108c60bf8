//! `SKEL_TRACE=path.json`: a timeline of every upload, kernel and download.
//!
//! Each operation is bracketed by two timing events on its stream; the times are read back
//! only when the trace is written (by [`crate::trace::flush`], and once more at process
//! exit), so tracing adds two event records per operation and no synchronisation. The file
//! is Chrome-trace JSON (`chrome://tracing`, <https://ui.perfetto.dev>): one complete event
//! (`"ph":"X"`) per operation with `ts`/`dur` in microseconds from the first traced
//! operation, `tid` the stream's index in the pool, and `args` giving bytes, chunk, chunk
//! count, call number and skeleton. `cargo run --example skel_trace` draws it as an SVG.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use cudarc::driver::{result, sys};
use serde_json::{json, Value};

use super::context::{opened_slot, Lane, MAX_SLOTS};
use super::driver;
use crate::{Error, Result};

/// What an operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Upload,
    Kernel,
    Download,
    /// A copy from another device slot.
    Peer,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Upload => "upload",
            Op::Peer => "peer copy",
            Op::Kernel => "kernel",
            Op::Download => "download",
        }
    }
}

/// Which call and chunk an operation belongs to.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tag {
    pub(crate) skeleton: &'static str,
    pub(crate) call: u64,
    pub(crate) chunk: usize,
    pub(crate) chunks: usize,
}

impl Tag {
    /// A new call of `skeleton` split into `chunks`, tagged as its chunk 0.
    pub(crate) fn call(skeleton: &'static str, chunks: usize) -> Tag {
        static CALLS: AtomicU64 = AtomicU64::new(0);
        Tag {
            skeleton,
            call: CALLS.fetch_add(1, Ordering::Relaxed),
            chunk: 0,
            chunks,
        }
    }

    /// The same call's chunk `chunk`.
    pub(crate) fn chunk(self, chunk: usize) -> Tag {
        Tag { chunk, ..self }
    }
}

/// A timing event (created with timing enabled, unlike the ordering events), and the device
/// slot whose context it belongs to.
struct TimingEvent(sys::CUevent, usize);

// SAFETY: an event handle is a driver object usable from any thread of the process.
unsafe impl Send for TimingEvent {}

impl TimingEvent {
    fn record(lane: Lane) -> Result<Self> {
        let ev = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT).map_err(driver)?;
        let ev = TimingEvent(ev, lane.slot());
        // SAFETY: both handles are valid.
        unsafe { result::event::record(ev.0, lane.raw) }.map_err(driver)?;
        Ok(ev)
    }

    /// Milliseconds from `base` to this event, once both are done.
    fn since(&self, base: &TimingEvent) -> Result<f32> {
        // SAFETY: both events were recorded; synchronising then reading the elapsed time.
        unsafe {
            result::event::synchronize(self.0).map_err(driver)?;
            result::event::elapsed(base.0, self.0).map_err(driver)
        }
    }
}

impl Drop for TimingEvent {
    fn drop(&mut self) {
        if let Some(ctx) = opened_slot(self.1) {
            if ctx.bind().is_ok() {
                // SAFETY: not used after this.
                let _ = unsafe { result::event::destroy(self.0) };
            }
        }
    }
}

/// An operation whose start was recorded.
pub(crate) struct Span {
    op: Op,
    lane: usize,
    bytes: usize,
    tag: Tag,
    start: TimingEvent,
}

/// A finished operation, times not read yet.
struct Traced {
    span: Span,
    end: TimingEvent,
}

struct Tracer {
    path: PathBuf,
    /// Per device slot, recorded just before its first traced operation: time zero. (Work
    /// already queued on other streams may start earlier; such times are clamped to zero.)
    /// Events of two devices cannot be compared, so each slot has its own.
    base: Vec<Option<TimingEvent>>,
    ops: Vec<Traced>,
    /// Already resolved, with their stream (kept, so a later flush writes the whole trace
    /// again).
    written: Vec<(usize, Value)>,
}

/// Operations kept before older ones are written out to make room.
const MAX_PENDING: usize = 1 << 16;

fn tracer() -> Option<&'static Mutex<Tracer>> {
    static TRACER: OnceLock<Option<Mutex<Tracer>>> = OnceLock::new();
    TRACER
        .get_or_init(|| {
            let path = crate::config::TRACE.fixed_value()?;
            write_at_exit();
            Some(Mutex::new(Tracer {
                path,
                base: (0..MAX_SLOTS).map(|_| None).collect(),
                ops: Vec::new(),
                written: Vec::new(),
            }))
        })
        .as_ref()
}

/// Starts tracing an operation about to be enqueued on `lane` (`None` when not tracing).
pub(crate) fn begin(lane: Lane, op: Op, bytes: usize, tag: Tag) -> Result<Option<Span>> {
    let Some(tracer) = tracer() else {
        return Ok(None);
    };
    {
        let mut t = tracer.lock().unwrap_or_else(PoisonError::into_inner);
        if t.base[lane.slot()].is_none() {
            t.base[lane.slot()] = Some(TimingEvent::record(lane)?);
        }
    }
    Ok(Some(Span {
        op,
        lane: lane.index,
        bytes,
        tag,
        start: TimingEvent::record(lane)?,
    }))
}

/// Ends the operation of `span`, just enqueued on `lane`.
pub(crate) fn end(span: Option<Span>, lane: Lane) -> Result<()> {
    let (Some(span), Some(tracer)) = (span, tracer()) else {
        return Ok(());
    };
    let end = TimingEvent::record(lane)?;
    let mut t = tracer.lock().unwrap_or_else(PoisonError::into_inner);
    t.ops.push(Traced { span, end });
    if t.ops.len() >= MAX_PENDING {
        resolve(&mut t)?;
    }
    Ok(())
}

/// Reads the times of finished operations into JSON lines.
fn resolve(t: &mut Tracer) -> Result<()> {
    let mut lines = Vec::with_capacity(t.ops.len());
    for op in &t.ops {
        // Every traced operation's slot has a base: `begin` recorded it first.
        let Some(base) = &t.base[op.span.start.1] else {
            continue;
        };
        if let Some(ctx) = opened_slot(op.span.start.1) {
            ctx.bind()?;
        }
        let start = op.span.start.since(base)?;
        let end = op.end.since(base)?;
        let (ts, dur) = (
            f64::from(start.max(0.0)) * 1e3,
            f64::from((end - start).max(0.0)) * 1e3,
        );
        let s = &op.span;
        // Microseconds to the nanosecond, as the format's readers expect.
        let us = |x: f64| (x * 1e3).round() / 1e3;
        let event = json!({
            "name": s.op.name(),
            "cat": if s.op == Op::Kernel { "kernel" } else { "copy" },
            "ph": "X",
            "pid": 1,
            "tid": s.lane,
            "ts": us(ts),
            "dur": us(dur),
            "args": {
                "bytes": s.bytes,
                "chunk": s.tag.chunk,
                "chunks": s.tag.chunks,
                "call": s.tag.call,
                "skeleton": s.tag.skeleton,
            },
        });
        lines.push((s.lane, event));
    }
    t.ops.clear();
    t.written.extend(lines);
    Ok(())
}

/// Writes the trace file (all operations so far); `None` when not tracing.
pub(crate) fn flush() -> Result<Option<PathBuf>> {
    let Some(tracer) = tracer() else {
        return Ok(None);
    };
    let mut t = tracer.lock().unwrap_or_else(PoisonError::into_inner);
    resolve(&mut t)?;
    let mut lanes: Vec<usize> = t.written.iter().map(|(lane, _)| *lane).collect();
    lanes.sort_unstable();
    lanes.dedup();
    let names = lanes.iter().map(|lane| {
        json!({
            "name": "thread_name",
            "ph": "M",
            "pid": 1,
            "tid": lane,
            "args": { "name": format!("stream {lane}") },
        })
    });
    let events: Vec<Value> = names
        .chain(t.written.iter().map(|(_, e)| e.clone()))
        .collect();
    let out = json!({ "displayTimeUnit": "ms", "traceEvents": events }).to_string();
    std::fs::write(&t.path, out).map_err(|e| Error::io(&t.path, e))?;
    Ok(Some(t.path.clone()))
}

/// Writes the trace once more when the process exits normally.
fn write_at_exit() {
    extern "C" fn at_exit() {
        if let Err(e) = flush() {
            log::error!(target: "skel::trace", "writing the SKEL_TRACE file failed: {e}");
        }
    }
    extern "C" {
        fn atexit(f: extern "C" fn()) -> std::ffi::c_int;
    }
    // SAFETY: registers a plain function with the C library; it runs before the CUDA
    // driver's own exit handlers (registered earlier, at cuInit, so run later).
    unsafe { atexit(at_exit) };
}
