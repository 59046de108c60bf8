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
        // SAFETY: plain allocation of `size` bytes, cached (not write-combined), and
        // portable: pinned for every context, so copies to any device slot are async.
        let p = unsafe { result::malloc_host(layout.size(), sys::CU_MEMHOSTALLOC_PORTABLE) }
            .map_err(|e| oom_or_driver(e, layout.size()))?;
        let p = NonNull::new(p.cast::<u8>())
            .ok_or_else(|| Error::Driver("cuMemHostAlloc returned null".into()))?;
        if (p.as_ptr() as usize) % layout.align() != 0 {
            // SAFETY: `p` came from cuMemHostAlloc just above and is not used again.
            let _ = unsafe { result::free_host(p.as_ptr().cast::<c_void>()) };
            return Err(Error::Driver(
                format!("pinned memory not aligned to {}", layout.align()).into(),
            ));
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
