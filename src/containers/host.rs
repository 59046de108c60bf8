//! Host storage of containers: aligned pageable memory, or page-locked (pinned) memory from
//! an allocator a device backend registers at run time.
//!
//! - [`HostBuf`] owns `len` elements through a raw pointer, aligned to 64 bytes (a cache
//!   line, enough for any SIMD width) or to a page for buffers of two pages or more (what
//!   DMA engines and `cuMemHostRegister` like).
//! - Pinned memory comes from a [`PinnedAllocator`] that a backend (CUDA) registers with
//!   [`register_pinned_allocator`] once it has a device. Without one, asking for pinned
//!   memory explicitly is [`Error::BackendUnavailable`]: there is no silent fallback.
//! - The default ([`HostKind::default_kind`]) is pinned when an allocator is registered and
//!   the environment variable `SKEL_PAGEABLE` is not set (or is `0`), pageable otherwise.
//!   A default allocation that cannot get pinned memory uses pageable memory instead.

// The pinned-allocator hook is for the CUDA backend, which lands after the containers.
#![allow(dead_code)]

use std::alloc::{self, Layout};
use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::{Arc, PoisonError, RwLock};

use crate::{Backend, Error, Result};

/// Alignment of every host buffer (a cache line).
pub(crate) const ALIGN: usize = 64;
/// Alignment of buffers of at least two pages.
pub(crate) const PAGE: usize = 4096;

/// Provides page-locked host memory (implemented by the CUDA backend).
pub(crate) trait PinnedAllocator: Send + Sync {
    /// A name for messages (`"cuda"`).
    fn name(&self) -> &str;
    /// Allocates `layout.size() > 0` bytes of page-locked memory aligned to at least
    /// `layout.align()`, or reports why it cannot ([`Error::OutOfMemory`], [`Error::Driver`]).
    fn alloc(&self, layout: Layout) -> Result<NonNull<u8>>;
    /// Frees memory from [`PinnedAllocator::alloc`].
    ///
    /// # Safety
    /// `ptr` came from `self.alloc(layout)` with this `layout` and is not used afterwards.
    unsafe fn dealloc(&self, ptr: NonNull<u8>, layout: Layout);
}

static PINNED: RwLock<Option<Arc<dyn PinnedAllocator>>> = RwLock::new(None);

/// Installs (or with `None` removes) the process-wide pinned allocator; returns the
/// previous one. Buffers already allocated keep the allocator that made them.
pub(crate) fn register_pinned_allocator(
    allocator: Option<Arc<dyn PinnedAllocator>>,
) -> Option<Arc<dyn PinnedAllocator>> {
    let mut current = PINNED.write().unwrap_or_else(PoisonError::into_inner);
    std::mem::replace(&mut *current, allocator)
}

/// The registered pinned allocator, if any.
pub(crate) fn pinned_allocator() -> Option<Arc<dyn PinnedAllocator>> {
    PINNED
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

/// Whether `SKEL_PAGEABLE` ([`crate::config::PAGEABLE`]) asks for pageable defaults.
fn pageable_forced() -> bool {
    crate::config::PAGEABLE.value()
}

/// What kind of host memory a buffer uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum HostKind {
    /// Ordinary (swappable) memory from the global allocator.
    Pageable,
    /// Page-locked memory from the registered [`PinnedAllocator`].
    Pinned,
}

impl HostKind {
    /// Pinned if an allocator is registered and `SKEL_PAGEABLE` is unset; else pageable.
    pub(crate) fn default_kind() -> HostKind {
        if !pageable_forced() && pinned_allocator().is_some() {
            HostKind::Pinned
        } else {
            HostKind::Pageable
        }
    }
}

enum Alloc {
    /// Nothing allocated (zero bytes): the pointer is dangling.
    None,
    Pageable(Layout),
    Pinned(Layout, Arc<dyn PinnedAllocator>),
}

/// `len` elements of host memory, owned through a raw pointer.
///
/// The buffer hands out raw pointers only; the container ([`super::store::Store`]) decides
/// when a slice over them may be formed. Elements are `Copy`, so nothing is ever dropped
/// in place, and uninitialised memory is never read (every constructor initialises all
/// elements before the buffer is used).
pub(crate) struct HostBuf<T> {
    ptr: NonNull<T>,
    len: usize,
    alloc: Alloc,
    _owns: PhantomData<T>,
}

// SAFETY: a HostBuf owns its allocation exclusively (like a Box<[T]>); moving it to another
// thread moves that ownership. The pinned allocator is Send + Sync.
unsafe impl<T: Send> Send for HostBuf<T> {}
// SAFETY: &HostBuf only exposes the pointer value and metadata. Shared access to the
// elements from several threads goes through `Store`, which forms shared slices only over
// host-valid ranges and writes (copy-back) only stale ranges while holding its mutex; see
// the soundness section of store.rs. T: Sync because shared slices of T are handed out.
unsafe impl<T: Sync> Sync for HostBuf<T> {}

impl<T> fmt::Debug for HostBuf<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostBuf")
            .field("len", &self.len)
            .field("kind", &self.kind())
            .finish()
    }
}

fn layout_for<T>(len: usize) -> Layout {
    let bytes = len
        .checked_mul(std::mem::size_of::<T>())
        .expect("container size overflows usize");
    let align = if bytes >= 2 * PAGE { PAGE } else { ALIGN };
    Layout::from_size_align(bytes, align.max(std::mem::align_of::<T>()))
        .expect("container size overflows isize")
}

impl<T: crate::DeviceType> HostBuf<T> {
    /// `len` elements of all-zero bits in pageable memory, straight from the allocator's
    /// zeroed pages (no pass over them): the host side of a temporary whose values are
    /// computed and read where a skeleton runs.
    pub(crate) fn zeroed_pageable(len: usize) -> Self {
        let layout = layout_for::<T>(len);
        if layout.size() == 0 {
            return HostBuf {
                ptr: NonNull::dangling(),
                len,
                alloc: Alloc::None,
                _owns: PhantomData,
            };
        }
        // SAFETY: layout has non-zero size (checked above). All-zero bits are a valid value
        // of every `DeviceType` (its contract: any bit pattern a device writes is valid).
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let raw = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        HostBuf {
            ptr: raw.cast(),
            len,
            alloc: Alloc::Pageable(layout),
            _owns: PhantomData,
        }
    }
}

impl<T: Copy> HostBuf<T> {
    /// Allocates `len` uninitialised elements.
    fn alloc_uninit(kind: HostKind, len: usize) -> Result<Self> {
        let layout = layout_for::<T>(len);
        if layout.size() == 0 {
            return Ok(HostBuf {
                ptr: NonNull::dangling(),
                len,
                alloc: Alloc::None,
                _owns: PhantomData,
            });
        }
        let (raw, alloc) = match kind {
            HostKind::Pageable => {
                // SAFETY: layout has non-zero size (checked above).
                let raw = unsafe { alloc::alloc(layout) };
                let raw = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
                (raw, Alloc::Pageable(layout))
            }
            HostKind::Pinned => {
                let a = pinned_allocator().ok_or_else(no_pinned_allocator)?;
                let raw = a.alloc(layout)?;
                assert!(
                    (raw.as_ptr() as usize) & (layout.align() - 1) == 0,
                    "pinned allocator {} returned misaligned memory",
                    a.name()
                );
                (raw, Alloc::Pinned(layout, a))
            }
        };
        Ok(HostBuf {
            ptr: raw.cast(),
            len,
            alloc,
            _owns: PhantomData,
        })
    }

    /// A buffer of `kind` holding `f(0), f(1), .., f(len - 1)`.
    pub(crate) fn from_fn(
        kind: HostKind,
        len: usize,
        mut f: impl FnMut(usize) -> T,
    ) -> Result<Self> {
        let buf = Self::alloc_uninit(kind, len)?;
        for i in 0..len {
            // SAFETY: i < len, so the write is inside the allocation (or a no-op for a
            // zero-sized T); `write` does not read or drop the uninitialised old value. If `f`
            // panics, `buf` is freed without its elements being read or dropped.
            unsafe { buf.ptr.as_ptr().add(i).write(f(i)) };
        }
        Ok(buf)
    }

    /// A buffer of `kind` holding a copy of `src`.
    pub(crate) fn from_slice(kind: HostKind, src: &[T]) -> Result<Self> {
        let buf = Self::alloc_uninit(kind, src.len())?;
        // SAFETY: the new allocation holds src.len() elements and cannot overlap `src`.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), buf.ptr.as_ptr(), src.len()) };
        Ok(buf)
    }

    /// Like [`HostBuf::from_fn`] with the default kind; falls back to pageable memory when
    /// the pinned allocator fails.
    pub(crate) fn from_fn_default(len: usize, mut f: impl FnMut(usize) -> T) -> Self {
        if HostKind::default_kind() == HostKind::Pinned {
            if let Ok(buf) = Self::alloc_uninit(HostKind::Pinned, len) {
                for i in 0..len {
                    // SAFETY: as in from_fn.
                    unsafe { buf.ptr.as_ptr().add(i).write(f(i)) };
                }
                return buf;
            }
        }
        Self::from_fn(HostKind::Pageable, len, f).expect("pageable allocation does not fail")
    }

    /// Like [`HostBuf::from_slice`] with the default kind (see [`HostBuf::from_fn_default`]).
    pub(crate) fn from_slice_default(src: &[T]) -> Self {
        if HostKind::default_kind() == HostKind::Pinned {
            if let Ok(buf) = Self::from_slice(HostKind::Pinned, src) {
                return buf;
            }
        }
        Self::from_slice(HostKind::Pageable, src).expect("pageable allocation does not fail")
    }
}

impl<T> HostBuf<T> {
    /// Number of elements.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Pointer to element 0 (dangling but aligned when the buffer holds no bytes).
    pub(crate) fn as_ptr(&self) -> *mut T {
        self.ptr.as_ptr()
    }

    /// Pageable or pinned.
    pub(crate) fn kind(&self) -> HostKind {
        match self.alloc {
            Alloc::Pinned(..) => HostKind::Pinned,
            _ => HostKind::Pageable,
        }
    }

    /// The alignment of the allocation in bytes (0 when nothing is allocated).
    pub(crate) fn align(&self) -> usize {
        match &self.alloc {
            Alloc::None => 0,
            Alloc::Pageable(l) | Alloc::Pinned(l, _) => l.align(),
        }
    }
}

impl<T> Drop for HostBuf<T> {
    fn drop(&mut self) {
        match &self.alloc {
            Alloc::None => {}
            // SAFETY: the pointer came from alloc::alloc(layout) in alloc_uninit and is
            // owned by this buffer alone; elements are Copy and need no drop.
            Alloc::Pageable(layout) => unsafe { alloc::dealloc(self.ptr.as_ptr().cast(), *layout) },
            // SAFETY: the pointer came from a.alloc(layout) of this same allocator.
            Alloc::Pinned(layout, a) => unsafe { a.dealloc(self.ptr.cast(), *layout) },
        }
    }
}

/// The error for "pinned memory asked for, but no CUDA device provides it".
pub(crate) fn no_pinned_allocator() -> Error {
    Error::BackendUnavailable {
        backend: Backend::Cuda,
        reason: "pinned host memory needs a pinned-memory allocator, which the CUDA backend \
                 registers when it has a device; none is registered"
            .into(),
    }
}

/// The bytes of a slice of device values (what is copied to a device or passed to a
/// kernel by value).
pub(crate) fn as_bytes<T: crate::DeviceType>(v: &[T]) -> &[u8] {
    // SAFETY: DeviceType's contract: plain old data without padding, so all
    // `size_of_val(v)` bytes are initialised; they are only read, for the borrow of `v`
    // (u8 has alignment 1).
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// Device values from their bytes (what [`as_bytes`] gave on another process running this
/// program); `bytes.len()` must be a multiple of the value size.
///
/// # Panics
/// If it is not.
pub(crate) fn from_bytes<T: crate::DeviceType>(bytes: &[u8]) -> Vec<T> {
    let size = std::mem::size_of::<T>().max(1);
    assert!(
        bytes.len() % size == 0,
        "{} bytes are not whole values",
        bytes.len()
    );
    let n = bytes.len() / size;
    let mut out: Vec<T> = Vec::with_capacity(n);
    // SAFETY: the capacity holds `n` values, `n * size_of::<T>()` bytes, all written by the
    // copy before `set_len`; DeviceType's contract makes any bit pattern of a T that came
    // from a T a valid value. Zero-sized types copy nothing.
    unsafe {
        std::ptr::copy_nonoverlapping(
            bytes.as_ptr(),
            out.as_mut_ptr().cast::<u8>(),
            n * std::mem::size_of::<T>(),
        );
        out.set_len(n);
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::Mutex;

    /// Serialises tests that change the process-wide allocator registration.
    pub(crate) static REGISTRY_LOCK: Mutex<()> = Mutex::new(());

    /// A "pinned" allocator backed by the global allocator that records live allocations
    /// (by address: other tests may allocate through it concurrently while registered).
    #[derive(Default)]
    pub(crate) struct FakePinned {
        live: Mutex<HashSet<usize>>,
        freed: Mutex<Vec<usize>>,
    }

    impl FakePinned {
        /// Whether `ptr` is a live allocation of this allocator.
        pub(crate) fn owns<T>(&self, ptr: *const T) -> bool {
            self.live.lock().unwrap().contains(&(ptr as usize))
        }

        /// Whether `ptr` was freed through this allocator (robust against address reuse).
        pub(crate) fn freed<T>(&self, ptr: *const T) -> bool {
            self.freed.lock().unwrap().contains(&(ptr as usize))
        }
    }

    impl PinnedAllocator for FakePinned {
        fn name(&self) -> &str {
            "fake"
        }
        fn alloc(&self, layout: Layout) -> Result<NonNull<u8>> {
            // SAFETY: callers pass a non-zero size.
            let p = NonNull::new(unsafe { alloc::alloc(layout) })
                .ok_or_else(|| Error::OutOfMemory("fake".into()))?;
            self.live.lock().unwrap().insert(p.as_ptr() as usize);
            Ok(p)
        }
        unsafe fn dealloc(&self, ptr: NonNull<u8>, layout: Layout) {
            assert!(self.live.lock().unwrap().remove(&(ptr.as_ptr() as usize)));
            self.freed.lock().unwrap().push(ptr.as_ptr() as usize);
            // SAFETY: forwarded contract: ptr came from alloc(layout) above.
            unsafe { alloc::dealloc(ptr.as_ptr(), layout) }
        }
    }

    #[test]
    fn pageable_is_aligned_and_holds_data() {
        let b = HostBuf::from_fn(HostKind::Pageable, 100, |i| i as u8).unwrap();
        assert_eq!(b.as_ptr() as usize % ALIGN, 0);
        assert_eq!(b.kind(), HostKind::Pageable);
        assert_eq!(b.align(), ALIGN);
        // SAFETY: 100 initialised elements, no other access.
        let s = unsafe { std::slice::from_raw_parts(b.as_ptr(), b.len()) };
        assert_eq!(s[99], 99);
        let big = HostBuf::from_slice(HostKind::Pageable, &vec![1.5f64; 10_000]).unwrap();
        assert_eq!(big.as_ptr() as usize % PAGE, 0);
        assert_eq!(big.align(), PAGE);
    }

    #[test]
    fn empty_buffers_allocate_nothing() {
        let b = HostBuf::<f32>::from_slice(HostKind::Pageable, &[]).unwrap();
        assert_eq!(b.len(), 0);
        assert_eq!(b.align(), 0);
        assert_eq!(b.as_ptr() as usize % std::mem::align_of::<f32>(), 0);
    }

    #[test]
    fn pinned_without_allocator_is_an_error_and_registration_works() {
        let _g = REGISTRY_LOCK.lock().unwrap_or_else(PoisonError::into_inner);
        let prev = register_pinned_allocator(None);
        let err = HostBuf::from_slice(HostKind::Pinned, &[1u32, 2]).unwrap_err();
        assert!(
            matches!(
                err,
                Error::BackendUnavailable {
                    backend: Backend::Cuda,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(HostKind::default_kind(), HostKind::Pageable);
        assert_eq!(
            HostBuf::from_slice_default(&[1u32]).kind(),
            HostKind::Pageable
        );

        let fake = Arc::new(FakePinned::default());
        register_pinned_allocator(Some(fake.clone()));
        let ptr = {
            let b = HostBuf::from_slice(HostKind::Pinned, &[7u32; 100]).unwrap();
            assert_eq!(b.kind(), HostKind::Pinned);
            assert!(fake.owns(b.as_ptr()));
            if !pageable_forced() {
                assert_eq!(HostKind::default_kind(), HostKind::Pinned);
                assert_eq!(HostBuf::from_fn_default(3, |i| i).kind(), HostKind::Pinned);
            }
            // Zero bytes never reach the allocator.
            let e = HostBuf::<u32>::from_slice(HostKind::Pinned, &[]).unwrap();
            assert!(!fake.owns(e.as_ptr()));
            b.as_ptr()
        };
        assert!(fake.freed(ptr));
        register_pinned_allocator(prev);
    }
}
