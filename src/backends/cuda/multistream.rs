//! MultiStream: one skeleton call split into `k` chunks on `k` streams, issued
//! breadth-first, so the uploads, kernels and downloads of different chunks overlap.
//!
//! For a call over `n` positions, [`split`] cuts `0..n` into `k` nearly equal chunks (their
//! boundaries multiples of an alignment the kernel needs: 4 elements for the vectorised
//! Map, whole rows for row bands) and takes `k` streams from the device's pool. Each
//! skeleton then issues, in this order:
//!
//! 1. every chunk's uploads (only the ranges not valid on the device; MapOverlap chunks
//!    include their halo; the shared array of MapArray is uploaded once, by chunk 0, and
//!    the other chunks' streams wait for its event);
//! 2. every chunk's kernel (Scan: each chunk starts from the previous chunk's total, so its
//!    kernel waits for the previous one; Reduce and MapReduce: per-chunk partials, combined
//!    on the device by one final kernel, with one small download);
//! 3. every chunk's download, when the result will be read on the host: `.download(true)`,
//!    or by default when the host read at least half of the container after the previous
//!    device write. Otherwise the result stays on the device (lazy copy-back).
//!
//! The copy engines and the compute engine each work through their queue in issue order,
//! so breadth-first issue lets chunk `c + 1`'s upload run during chunk `c`'s kernel and
//! chunk `c - 1`'s download. Every chunk's operations record events in the containers'
//! coherence state for exactly its range, so host access to a range waits only for the
//! chunks that cover it, and the next call can start while this one is still copying.
//!
//! # Choosing `k`
//!
//! `.streams(k)` forces `k` (1 to the pool's 16 streams), and so does `SKEL_STREAMS=k` for
//! every call that does not say. Otherwise the cost model of
//! [`crate::debug::StreamModel`] picks it: with `T_up`, `T_kernel`, `T_down` the stage times
//! of the whole call (bytes over the bandwidths measured once per device, see
//! [`measure`]) and a fixed cost per chunk,
//!
//! ```text
//! T(k) = (T_up + T_kernel + T_down) / k + (k - 1) / k * max(T_up, T_kernel, T_down) + k * overhead
//! ```
//!
//! and the call takes the `k` that minimises it: 1 for small calls and for calls that move
//! nothing (their inputs already on the device, their result staying there). A call made
//! while earlier calls are still running on the device also takes `k = 1`: it is issued on
//! other streams, so its copies already overlap theirs (an image stream of asynchronous
//! calls pipelines across frames), and chunks would only add their fixed cost. On the H200,
//! 60 frames of 1920x1080 RGB f32 ran at 0.518 ms/frame with one stream per call against
//! 0.538 ms with four.

use std::ops::Range;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Instant;

use cudarc::driver::{result, sys};

use super::context::{Ctx, Lane, STREAMS};
use super::driver;
use super::memory::{self, CuEvent, Scratch};
use super::trace::Tag;
use crate::containers::ArgMut;
use crate::debug::{CopyBound, StreamModel};
use crate::{DeviceType, Error, Result};

/// The bytes one call moves and touches (see [`StreamModel`]).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Work {
    /// Host to device.
    pub(crate) up: usize,
    /// Read and written by the kernel in device memory.
    pub(crate) kernel: usize,
    /// Device to host.
    pub(crate) down: usize,
    /// The stream of the latest unfinished work on the call's result (or input), or of the
    /// latest work if that stream has been given nothing else since: a call that runs as
    /// one chunk goes on that stream, so a chain of dependent calls needs no waits between
    /// streams (each costs a few microseconds on the device) and no driver queries, while
    /// calls on independent containers still spread over the pool and overlap.
    pub(crate) follows: Option<usize>,
}

/// One call's chunks and their streams: chunk `c` is `chunks[c]` on `lanes[c]`.
pub(crate) struct Split {
    pub(crate) chunks: Vec<Range<usize>>,
    pub(crate) lanes: Vec<Lane>,
    pub(crate) tag: Tag,
}

impl Split {
    /// `(chunk, its range, its stream, its trace tag)` for every chunk.
    pub(crate) fn parts(&self) -> impl Iterator<Item = (usize, Range<usize>, Lane, Tag)> + '_ {
        self.chunks
            .iter()
            .zip(&self.lanes)
            .enumerate()
            .map(|(c, (r, &l))| (c, r.clone(), l, self.tag.chunk(c)))
    }

    /// Moves every chunk `by` positions on: the split of a band that starts there (one
    /// device slot's part of a call, `devices.rs`).
    pub(crate) fn shift(&mut self, by: usize) {
        for chunk in &mut self.chunks {
            *chunk = chunk.start + by..chunk.end + by;
        }
    }

    /// Number of chunks.
    pub(crate) fn len(&self) -> usize {
        self.chunks.len()
    }

    /// The last phase: copies each chunk's part of `out` (`elems` of the chunk's range)
    /// back to the host on the chunk's stream, asynchronously.
    pub(crate) fn download<T: DeviceType>(
        &self,
        ctx: &Ctx,
        out: &ArgMut<'_, T>,
        elems: impl Fn(Range<usize>) -> Range<usize>,
    ) -> Result<()> {
        for (_, part, lane, tag) in self.parts() {
            memory::download_part(ctx, out, elems(part), lane, tag)?;
        }
        Ok(())
    }
}

/// `k` from `.streams(k)`, checked against the pool.
pub(crate) fn forced(streams: Option<usize>) -> Result<Option<usize>> {
    match streams {
        Some(k) if k > STREAMS => Err(Error::InvalidArgument(format!(
            ".streams({k}): the CUDA backend splits a call over at most {STREAMS} streams"
        ))),
        other => Ok(other),
    }
}

/// Splits `0..n` (`n > 0`) into chunks whose boundaries are multiples of `align`, on
/// streams from the pool: `forced` chunks if given, else as many as the cost model of
/// `work` picks (never more chunks than aligned units).
pub(crate) fn split(
    ctx: &Ctx,
    skeleton: &'static str,
    n: usize,
    align: usize,
    forced: Option<usize>,
    work: Work,
) -> Result<Split> {
    let align = align.max(1);
    let units = n.div_ceil(align);
    let k = match forced.or(crate::config::STREAMS.get()?) {
        Some(k) => k,
        None if work.up == 0 && work.down == 0 => 1,
        // Earlier calls still running: this call's copies already overlap theirs (it runs
        // on other streams), so splitting it would only add per-chunk cost. (Asked only
        // when the model would split: it queries every stream of the pool.)
        None => match model(ctx)?.best_k(work.up, work.kernel, work.down, STREAMS) {
            k if k > 1 && ctx.busy() => 1,
            k => k,
        },
    }
    .clamp(1, units.clamp(1, STREAMS));
    let chunks = (0..k)
        .map(|c| ((c * units / k) * align).min(n)..(((c + 1) * units / k) * align).min(n))
        .collect();
    let lanes = match work.follows {
        Some(lane) if k == 1 => vec![ctx.lane(lane)],
        _ => ctx.lanes(k),
    };
    Ok(Split {
        chunks,
        lanes,
        tag: Tag::call(skeleton, k),
    })
}

/// The cost model of the device, measured on first use. A failed measurement (its probe
/// buffers did not fit in device memory) is not remembered: the next call measures again,
/// rather than every later call failing.
pub(crate) fn model(ctx: &Ctx) -> Result<StreamModel> {
    static MODEL: OnceLock<StreamModel> = OnceLock::new();
    static MEASURING: Mutex<()> = Mutex::new(());
    if let Some(m) = MODEL.get() {
        return Ok(*m);
    }
    // One measurement at a time: concurrent ones would time each other.
    let _one = MEASURING.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(m) = MODEL.get() {
        return Ok(*m);
    }
    let what = "measuring the MultiStream cost model";
    let m = measure(ctx).map_err(|e| match e {
        Error::OutOfMemory(m) => Error::OutOfMemory(m.context(what)),
        Error::Driver(m) => Error::Driver(m.context(what)),
        e => Error::driver(format!("{what}: {e}"), e),
    })?;
    Ok(*MODEL.get_or_init(|| m))
}

/// Bytes per bandwidth probe: large enough to reach full speed, small enough to take a
/// few milliseconds.
const PROBE_BYTES: usize = 32 << 20;

/// Measures the model: pinned copies each way and a device-to-device copy of
/// [`PROBE_BYTES`] (best of three, timed with events), and the cost of issuing one chunk's
/// worth of tiny operations (host clock).
fn measure(ctx: &Ctx) -> Result<StreamModel> {
    let lane = ctx.lane(0);
    let host = PinnedBytes::new(PROBE_BYTES)?;
    let dev = Scratch::new(lane, 2 * PROBE_BYTES)?;
    let dst = dev.ptr + PROBE_BYTES as u64;
    let time_ms = |op: &dyn Fn() -> Result<()>| -> Result<f64> {
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            let t = Timer::start(lane)?;
            op()?;
            best = best.min(t.stop_ms()?);
        }
        Ok(best)
    };
    // SAFETY (three closures): the copies stay inside the pinned buffer and the scratch
    // allocation, and `Timer::stop_ms` synchronises before either is freed.
    let up = time_ms(&|| unsafe {
        sys::cuMemcpyHtoDAsync_v2(dev.ptr, host.ptr, PROBE_BYTES, lane.raw)
            .result()
            .map_err(driver)
    })?;
    let down = time_ms(&|| unsafe {
        sys::cuMemcpyDtoHAsync_v2(host.ptr, dev.ptr, PROBE_BYTES, lane.raw)
            .result()
            .map_err(driver)
    })?;
    let copy = time_ms(&|| unsafe {
        sys::cuMemcpyDtoDAsync_v2(dst, dev.ptr, PROBE_BYTES, lane.raw)
            .result()
            .map_err(driver)
    })?;
    // Per chunk: an upload, a kernel-sized operation, a download and three events.
    let rounds = 64;
    let t0 = Instant::now();
    for _ in 0..rounds {
        // SAFETY: as above, 4-byte copies inside both buffers.
        unsafe {
            sys::cuMemcpyHtoDAsync_v2(dev.ptr, host.ptr, 4, lane.raw)
                .result()
                .map_err(driver)?;
            sys::cuMemsetD8Async(dst, 0, 4, lane.raw)
                .result()
                .map_err(driver)?;
            sys::cuMemcpyDtoHAsync_v2(host.ptr, dev.ptr, 4, lane.raw)
                .result()
                .map_err(driver)?;
        }
        for _ in 0..3 {
            CuEvent::record(lane)?;
        }
    }
    // SAFETY: a valid stream.
    unsafe { result::stream::synchronize(lane.raw) }.map_err(driver)?;
    let overhead_us = t0.elapsed().as_secs_f64() * 1e6 / f64::from(rounds);
    let gbps = |bytes: usize, ms: f64| bytes as f64 / (ms.max(1e-6) * 1e6);
    Ok(StreamModel {
        h2d_gbps: gbps(PROBE_BYTES, up),
        d2h_gbps: gbps(PROBE_BYTES, down),
        device_gbps: gbps(2 * PROBE_BYTES, copy),
        overhead_us,
    })
}

/// Pure pinned copies of `up` bytes to the device and `down` bytes back: each alone, and
/// both at once on two streams (best of five each).
pub(crate) fn copy_bound(ctx: &Ctx, up: usize, down: usize) -> Result<CopyBound> {
    let (a, b) = (ctx.lane(0), ctx.lane(1));
    let host_up = PinnedBytes::new(up.max(1))?;
    let host_down = PinnedBytes::new(down.max(1))?;
    let dev = Scratch::new(a, up.max(1) + down.max(1))?;
    let dev_down = dev.ptr + up.max(1) as u64;
    dev.share(&[b])?;
    // SAFETY (both closures): the copies stay inside the pinned buffers and the scratch
    // allocation; every timing waits for both streams before they are freed.
    let upload = |lane: Lane| unsafe {
        sys::cuMemcpyHtoDAsync_v2(dev.ptr, host_up.ptr, up, lane.raw)
            .result()
            .map_err(driver)
    };
    let download = |lane: Lane| unsafe {
        sys::cuMemcpyDtoHAsync_v2(host_down.ptr, dev_down, down, lane.raw)
            .result()
            .map_err(driver)
    };
    let best = |f: &dyn Fn() -> Result<()>| -> Result<f64> {
        let mut best = f64::INFINITY;
        for _ in 0..5 {
            let t0 = Instant::now();
            f()?;
            ctx.synchronize()?;
            best = best.min(t0.elapsed().as_secs_f64() * 1e3);
        }
        Ok(best)
    };
    ctx.synchronize()?;
    Ok(CopyBound {
        up_ms: best(&|| upload(a))?,
        down_ms: best(&|| download(a))?,
        both_ms: best(&|| {
            upload(a)?;
            download(b)
        })?,
    })
}

/// Page-locked host bytes for the probes.
struct PinnedBytes {
    ptr: *mut std::ffi::c_void,
}

impl PinnedBytes {
    fn new(bytes: usize) -> Result<Self> {
        // SAFETY: plain allocation; freed in drop.
        let ptr = unsafe { result::malloc_host(bytes, 0) }.map_err(driver)?;
        Ok(PinnedBytes { ptr })
    }
}

impl Drop for PinnedBytes {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemHostAlloc; every copy using it was synchronised.
        let _ = unsafe { result::free_host(self.ptr) };
    }
}

/// Two timing events around work on one stream.
struct Timer {
    start: sys::CUevent,
    lane: Lane,
}

impl Timer {
    fn start(lane: Lane) -> Result<Self> {
        let start = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT).map_err(driver)?;
        // SAFETY: valid handles.
        unsafe { result::event::record(start, lane.raw) }.map_err(driver)?;
        Ok(Timer { start, lane })
    }

    /// Milliseconds from the start to now on the stream (waits for the stream).
    fn stop_ms(self) -> Result<f64> {
        let stop = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT).map_err(driver)?;
        // SAFETY: valid handles; both events are destroyed after the elapsed time is read.
        unsafe {
            let ms = result::event::record(stop, self.lane.raw)
                .and_then(|_| result::event::synchronize(stop))
                .and_then(|_| result::event::elapsed(self.start, stop));
            let _ = result::event::destroy(stop);
            let _ = result::event::destroy(self.start);
            ms.map(f64::from).map_err(driver)
        }
    }
}
