//! [`CudaPinned`]: the page-locked host allocator registered for containers
//! (`cuMemHostAlloc`, portable: cached, not write-combined, so host reads are fast, and
//! pinned for every device slot).

use std::alloc::Layout;
use std::ffi::c_void;
use std::ptr::NonNull;

use cudarc::driver::{result, sys};

use super::super::context::opened;
use super::super::oom_or_driver;
use crate::containers::PinnedAllocator;
use crate::{Error, Result};

/// Page-locked host memory with default flags (not write-combined).
pub(crate) struct CudaPinned;

impl PinnedAllocator for CudaPinned {
    fn name(&self) -> &str {
        "cuda"
    }

    fn alloc(&self, layout: Layout) -> Result<NonNull<u8>> {
        let ctx = opened().ok_or_else(|| Error::Driver("CUDA context not open".into()))?;
        ctx.bind()?;
        // The driver hands out small page-locked blocks off page boundaries (CUDA 13 on the
        // H200 machine: 256 KiB ones), so the block has room to align the buffer, and the
        // block's own address lies just below the buffer, for `dealloc`.
        let total = layout.size() + layout.align() + HEADER;
        // SAFETY: plain allocation of `total` bytes, cached (not write-combined), and
        // portable: pinned for every context, so copies to any device slot are async.
        let block = unsafe { result::malloc_host(total, sys::CU_MEMHOSTALLOC_PORTABLE) }
            .map_err(|e| oom_or_driver(e, total))?;
        let block = NonNull::new(block.cast::<u8>())
            .ok_or_else(|| Error::Driver("cuMemHostAlloc returned null".into()))?;
        let at = block.as_ptr() as usize;
        let offset = (at + HEADER).next_multiple_of(layout.align()) - at;
        // SAFETY: HEADER <= offset <= layout.align() + HEADER - 1, so the buffer
        // (`layout.size()` bytes from `offset`) and the address below it lie in the block.
        unsafe {
            let buffer = block.add(offset);
            buffer.sub(HEADER).cast::<usize>().write_unaligned(at);
            Ok(buffer)
        }
    }

    unsafe fn dealloc(&self, ptr: NonNull<u8>, _layout: Layout) {
        if let Some(ctx) = opened() {
            let _ = ctx.bind();
        }
        // SAFETY: forwarded contract: `ptr` came from `alloc`, which wrote its block's
        // address (from cuMemHostAlloc) just below it.
        let _ = unsafe {
            let block = ptr.as_ptr().sub(HEADER).cast::<usize>().read_unaligned();
            result::free_host(block as *mut c_void)
        };
    }
}

/// Bytes below each buffer holding the address of its page-locked block.
const HEADER: usize = std::mem::size_of::<usize>();
