//! Copies between pageable host memory and a device through a few page-locked bounce
//! buffers of the library's own, filled and emptied by several threads.
//!
//! The driver copies pageable memory itself through staging buffers of its own, with one
//! thread: 12-17 GB/s on the H200 machine against 52-55 GB/s from pinned memory. Pinning
//! the caller's memory instead (`cuMemHostAlloc` or `cuMemHostRegister`) costs more than
//! the copy it speeds up, and serialises in the driver with every other call (36 frame
//! buffers re-pinned by the greyscale example stalled its uploads for 40 frames). Here an
//! upload copies each chunk on several threads into the next bounce buffer, whose copy to
//! the device then runs while the next chunk is being filled; a buffer is refilled once the
//! copy that read it is done (its event). A download keeps every buffer's copy from the
//! device in flight and empties each, on several threads, as its copy lands. Downloads of
//! 6-64 MB run at 25-34 GB/s (1.6-2x the driver's); uploads at 14-26 GB/s (1.1-1.9x),
//! bounded by the host's memory bandwidth, which the fill and the copies in flight share.
//! The ring is made on the first such copy of a device slot and kept for the process.
//!
//! Small copies and page-locked memory take the driver's path: it copies them through its
//! command queue at once, or by direct DMA.

use std::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use cudarc::driver::{result, sys};

use super::super::context::{Ctx, Lane, MAX_SLOTS};
use super::super::{driver, oom_or_driver};
use super::events::CuEvent;
use crate::containers::ReadyEvent;
use crate::Result;

/// Copies of at least this many bytes to or from pageable memory go through the bounce
/// buffers. Below it the driver's own path was as fast for downloads and faster for uploads
/// (1-5 MB uploads at 0.7-1.0 of its speed on the H200 machine).
const BOUNCE_FROM: usize = 4 << 20;

/// Bytes of one bounce buffer: large enough that a chunk's copy (40 us at 55 GB/s) dwarfs
/// its issue, small enough that a 6 MB frame is three chunks, so its copy to the device
/// starts before its last chunk is filled.
const CHUNK: usize = 2 << 20;

/// Bounce buffers per device slot: one being filled while the others' copies run.
const BUFFERS: usize = 4;

/// Threads filling and emptying bounce buffers (at most, and no more than the machine's
/// cores): four copy 43 GB/s on the H200 machine's host.
const COPY_THREADS: usize = 4;

/// A page-locked buffer of [`CHUNK`] bytes and the copy that last read it.
struct Bounce {
    ptr: *mut u8,
    read_by: Option<Arc<CuEvent>>,
}

/// A device slot's bounce buffers, used in turn.
struct Ring {
    buffers: Vec<Bounce>,
    next: usize,
}

// SAFETY: the buffer is page-locked host memory owned by its ring for the process; a
// ring is only used under its slot's mutex (by the copy thread running a caller's copy).
unsafe impl Send for Bounce {}

/// Per device slot, made on its first bounced copy; a slot whose buffers could not be
/// allocated keeps an empty ring (its copies take the driver's path).
static RINGS: [OnceLock<Mutex<Ring>>; MAX_SLOTS] = [const { OnceLock::new() }; MAX_SLOTS];

/// Copies `src` (host memory) to `dst` on the device, in stream order on `lane`; `src` may
/// be written or freed once this returns (only the bounce buffers are read afterwards).
/// Returns `false`, having done nothing, where the copy is small, `src` is page-locked or
/// no bounce buffer could be allocated: the caller then copies it directly.
pub(super) fn upload(ctx: &Ctx, lane: Lane, dst: sys::CUdeviceptr, src: &[u8]) -> Result<bool> {
    let Some(mut ring) = ring_for(ctx, src) else {
        return Ok(false);
    };
    let ring = &mut *ring;
    let mut issued = false;
    let copies = on_copy_threads(ctx, || {
        for (k, chunk) in src.chunks(CHUNK).enumerate() {
            let buffer = ring.next_idle()?.1;
            // SAFETY: the buffer holds CHUNK bytes, owned by the ring, and the device copy
            // that read it last is done (`next_idle`); the ring's lock is held.
            let staged = unsafe { std::slice::from_raw_parts_mut(buffer.ptr, chunk.len()) };
            fill(staged, chunk);
            let to = dst + (k * CHUNK) as u64;
            // SAFETY: `to..to + chunk.len()` lies inside the caller's destination range;
            // the bounce buffer stays allocated and unwritten until the event recorded
            // below, which the next use of the buffer waits for.
            unsafe { result::memcpy_htod_async(to, &*staged, lane.raw) }.map_err(driver)?;
            issued = true;
            buffer.read_by = Some(CuEvent::record(lane)?);
        }
        Ok(())
    });
    settle(lane, copies, issued)?;
    Ok(true)
}

/// Copies `src` on the device into `dst` (host memory), in stream order on `lane`, and
/// waits for it (as the driver does for pageable memory). Returns `false`, having done
/// nothing, where [`upload`] would.
pub(super) fn download(
    ctx: &Ctx,
    lane: Lane,
    src: sys::CUdeviceptr,
    dst: &mut [u8],
) -> Result<bool> {
    let Some(mut ring) = ring_for(ctx, dst) else {
        return Ok(false);
    };
    let ring = &mut *ring;
    let mut issued = false;
    let copies = on_copy_threads(ctx, || {
        // Copies in flight, oldest first (buffer, chunk): one per buffer at most.
        let mut landing = std::collections::VecDeque::with_capacity(ring.buffers.len());
        for k in 0..dst.len().div_ceil(CHUNK) {
            let len = CHUNK.min(dst.len() - k * CHUNK);
            if landing.len() == ring.buffers.len() {
                if let Some(oldest) = landing.pop_front() {
                    ring.empty(oldest, dst)?;
                }
            }
            let (at, buffer) = ring.next_idle()?;
            // SAFETY: the buffer holds CHUNK bytes, owned by the ring (lock held), and no
            // copy reads or writes it now (`next_idle`, or emptied above); the host reads
            // it only after the event recorded below.
            let into = unsafe { std::slice::from_raw_parts_mut(buffer.ptr, len) };
            let from = src + (k * CHUNK) as u64;
            // SAFETY: `from..from + len` lies inside the caller's source range, whose
            // writers are ordered before `lane`.
            unsafe { result::memcpy_dtoh_async(into, from, lane.raw) }.map_err(driver)?;
            issued = true;
            buffer.read_by = Some(CuEvent::record(lane)?);
            landing.push_back((at, k));
        }
        while let Some(oldest) = landing.pop_front() {
            ring.empty(oldest, dst)?;
        }
        Ok(())
    });
    settle(lane, copies, issued)?;
    Ok(true)
}

/// The slot's ring, locked, where a copy of `host` should bounce: large enough and not
/// page-locked already, and the ring's buffers could be allocated (on first use).
fn ring_for(ctx: &Ctx, host: &[u8]) -> Option<MutexGuard<'static, Ring>> {
    if host.len() < BOUNCE_FROM || page_locked(host) {
        return None;
    }
    let ring = RINGS[ctx.slot as usize % MAX_SLOTS]
        .get_or_init(|| Mutex::new(Ring::allocate(ctx)))
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    (!ring.buffers.is_empty()).then_some(ring)
}

/// Whether `host` lies in page-locked memory the driver knows (ours or the user's; also
/// an address inside such a block, which `cuMemHostGetFlags` does not take).
fn page_locked(host: &[u8]) -> bool {
    let mut kind: u32 = 0;
    // SAFETY: a query about an address; writes only `kind` (a CUmemorytype, 4 bytes).
    let known = unsafe {
        sys::cuPointerGetAttribute(
            (&mut kind as *mut u32).cast::<c_void>(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            host.as_ptr() as sys::CUdeviceptr,
        )
    };
    known == sys::CUresult::CUDA_SUCCESS && kind == sys::CUmemorytype::CU_MEMORYTYPE_HOST as u32
}

/// `copies`' outcome. After a failure, copies already issued (`issued`) are let finish: one
/// without its event would let its buffer be reused under it, and later work on other
/// streams overlap it. Their own failure would only repeat the driver's state: the first
/// error is the one reported.
fn settle(lane: Lane, copies: Result<()>, issued: bool) -> Result<()> {
    if copies.is_err() && issued {
        // SAFETY: a valid stream of the context.
        let _ = unsafe { result::stream::synchronize(lane.raw) };
    }
    copies
}

impl Bounce {
    /// Waits for the copy that last used the buffer, if any.
    fn idle(&mut self) -> Result<()> {
        match self.read_by.take() {
            Some(copy) => copy.wait(),
            None => Ok(()),
        }
    }
}

impl Ring {
    /// The next buffer in turn (and its place), once the copy that last used it is done.
    fn next_idle(&mut self) -> Result<(usize, &mut Bounce)> {
        let at = self.next;
        self.next = (at + 1) % self.buffers.len();
        let buffer = &mut self.buffers[at];
        buffer.idle()?;
        Ok((at, buffer))
    }

    /// Copies chunk `j` of a download out of buffer `at`, once its copy from the device
    /// landed.
    fn empty(&mut self, (at, j): (usize, usize), dst: &mut [u8]) -> Result<()> {
        let buffer = &mut self.buffers[at];
        buffer.idle()?;
        let end = dst.len().min((j + 1) * CHUNK);
        let part = &mut dst[j * CHUNK..end];
        // SAFETY: the buffer holds CHUNK bytes, owned by the ring (lock held); the copy
        // that wrote its first `part.len()` bytes is done (waited for above).
        let landed = unsafe { std::slice::from_raw_parts(buffer.ptr, part.len()) };
        fill(part, landed);
        Ok(())
    }

    /// [`BUFFERS`] page-locked buffers on `ctx`; none where the driver refuses them (told
    /// once in the log: copies then take the driver's own path, slower but correct).
    fn allocate(ctx: &Ctx) -> Ring {
        let mut buffers = Vec::with_capacity(BUFFERS);
        let made = ctx.bind().and_then(|()| {
            for _ in 0..BUFFERS {
                // SAFETY: a plain allocation of CHUNK bytes, freed in `Drop` below.
                let ptr = unsafe { result::malloc_host(CHUNK, sys::CU_MEMHOSTALLOC_PORTABLE) }
                    .map_err(|e| oom_or_driver(e, CHUNK))?;
                buffers.push(Bounce {
                    ptr: ptr.cast::<u8>(),
                    read_by: None,
                });
            }
            Ok(())
        });
        if let Err(e) = made {
            log::warn!(
                "CUDA: no page-locked bounce buffers ({e}): copies to and from pageable memory take the driver's path"
            );
            buffers.clear(); // the ones made are freed by their drop
        }
        Ring { buffers, next: 0 }
    }
}

impl Drop for Bounce {
    fn drop(&mut self) {
        let _ = self.idle();
        // SAFETY: `ptr` came from cuMemHostAlloc and no copy reads it any more.
        let _ = unsafe { result::free_host(self.ptr.cast::<c_void>()) };
    }
}

/// The threads that fill and empty bounce buffers ([`COPY_THREADS`] of them, no more than
/// the machine's cores); `None` on one core or where no thread could be started.
fn copy_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = COPY_THREADS.min(cores);
        (threads > 1)
            .then(|| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|i| format!("skel-bounce-{i}"))
                    .build()
                    .ok()
            })
            .flatten()
    })
    .as_ref()
}

/// Runs a copy's loop on one of the copy threads, so that the others, awake from the first
/// chunk to the last, help with every chunk ([`fill`]); one wake-up per chunk cost more
/// than the chunk's copy on a busy host. A thread of another Rayon pool runs it itself and
/// fills alone: while it waited for the copy threads it could take up work of its own pool
/// that needs the container lock its caller holds.
fn on_copy_threads(ctx: &Ctx, copies: impl FnOnce() -> Result<()> + Send) -> Result<()> {
    match copy_pool() {
        Some(pool) if rayon::current_thread_index().is_none() => pool.install(|| {
            ctx.bind()?;
            copies()
        }),
        _ => copies(),
    }
}

/// Copies `src` into `dst` (same length): on every copy thread from one of them, else on
/// the calling thread alone.
fn fill(dst: &mut [u8], src: &[u8]) {
    use rayon::prelude::*;
    match copy_pool() {
        Some(pool) if pool.current_thread_index().is_some() => {
            let piece = dst.len().div_ceil(pool.current_num_threads()).max(1);
            dst.par_chunks_mut(piece)
                .zip(src.par_chunks(piece))
                .for_each(|(d, s)| d.copy_from_slice(s));
        }
        _ => dst.copy_from_slice(src),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::super::super::context;
    use super::*;

    /// Seconds for the best of five runs of `f`.
    fn best(mut f: impl FnMut()) -> f64 {
        (0..5)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min)
    }

    #[test]
    fn bounced_copies_round_trip_and_leave_page_locked_memory_alone() {
        let Ok(ctx) = context::ctx() else {
            println!("skipped: no cuda device");
            return;
        };
        ctx.bind().unwrap();
        let lane = ctx.lane(0);
        // More chunks than buffers, and a part.
        let n = 5 * CHUNK + 4321;
        let host: Vec<u8> = (0..n).map(|i| (i * 7 + i / 4099) as u8).collect();
        assert!(!page_locked(&host));
        // SAFETY: a plain device allocation, freed below.
        let dev = unsafe { result::malloc_sync(n) }.unwrap();
        assert!(upload(ctx, lane, dev, &host).unwrap());
        let mut back = vec![0u8; n];
        assert!(download(ctx, lane, dev, &mut back).unwrap());
        assert!(back == host, "the round trip changed bytes");
        // Below the threshold, and page-locked memory (also inside a block): the driver's.
        assert!(!upload(ctx, lane, dev, &host[..BOUNCE_FROM - 1]).unwrap());
        // SAFETY: a plain allocation, freed below.
        let locked = unsafe { result::malloc_host(2 * BOUNCE_FROM, 0) }.unwrap();
        // SAFETY: the block holds 2 * BOUNCE_FROM bytes, used only through this slice.
        let locked =
            unsafe { std::slice::from_raw_parts_mut(locked.cast::<u8>(), 2 * BOUNCE_FROM) };
        assert!(page_locked(locked) && page_locked(&locked[100..]));
        assert!(!upload(ctx, lane, dev, &locked[100..]).unwrap());
        assert!(!download(ctx, lane, dev, &mut locked[100..]).unwrap());
        // For the GPU machine's logs (no timing is asserted): bounced against the driver's own
        // pageable copy, and the bounce's halves alone. Their sum is the bounced time on the
        // H200 machine: beside copies in flight a fill runs at up to half its speed (both share
        // the host's memory bandwidth).
        let gbs = |t: f64| n as f64 / t / 1e9;
        let bounced = best(|| {
            upload(ctx, lane, dev, &host).unwrap();
            // SAFETY: a valid stream.
            unsafe { result::stream::synchronize(lane.raw) }.unwrap();
        });
        let driver = best(|| {
            // SAFETY: `dev` holds n bytes; synchronised before `host` is touched again.
            unsafe { result::memcpy_htod_async(dev, &host, lane.raw) }.unwrap();
            unsafe { result::stream::synchronize(lane.raw) }.unwrap();
        });
        // Its two halves alone: filling the ring's (page-locked) buffers chunk by chunk, and
        // their copies to the device.
        let mut ring = ring_for(ctx, &host).unwrap();
        let ring = &mut *ring;
        let chunks = || host.chunks(CHUNK).enumerate();
        let staged = best(|| {
            on_copy_threads(ctx, || {
                for (k, chunk) in chunks() {
                    let b = &mut ring.buffers[k % BUFFERS];
                    // SAFETY: CHUNK bytes, no copy in flight (the stream is synchronised).
                    fill(
                        unsafe { std::slice::from_raw_parts_mut(b.ptr, chunk.len()) },
                        chunk,
                    );
                }
                Ok(())
            })
            .unwrap()
        });
        let dma = best(|| {
            for (k, chunk) in chunks() {
                let b = &ring.buffers[k % BUFFERS];
                // SAFETY: as above; the copies only read the buffers.
                let from = unsafe { std::slice::from_raw_parts(b.ptr, chunk.len()) };
                let to = dev + (k * CHUNK) as u64;
                unsafe { result::memcpy_htod_async(to, from, lane.raw) }.unwrap();
            }
            unsafe { result::stream::synchronize(lane.raw) }.unwrap();
        });
        println!(
            "{n} bytes: bounced upload {:.1} GB/s, driver's pageable upload {:.1} GB/s; fill \
             of the page-locked chunks {:.1} GB/s, their copies {:.1} GB/s",
            gbs(bounced),
            gbs(driver),
            gbs(staged),
            gbs(dma)
        );
        // SAFETY: nothing uses either allocation any more (the stream is synchronised).
        unsafe {
            result::free_host(locked.as_ptr() as *mut c_void).unwrap();
            result::free_sync(dev).unwrap();
        }
    }
}
