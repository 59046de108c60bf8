//! `Store<T>`: the storage and coherence core shared by [`super::Vector`] and
//! [`super::Matrix`]: a host buffer, the device copies a backend attached, and the
//! coherence state saying which element ranges are valid where.
//!
//! # Soundness of shared host access
//!
//! `Store` is `Sync` and hands out `&[T]` over host ranges from `&self`, while a later
//! `&self` call may have to copy stale data back into the host buffer. That is sound
//! because of one invariant, kept under the state mutex:
//!
//! 1. A shared slice is only formed over host-**valid** ranges (stale parts are brought
//!    back first, under the lock).
//! 2. A host-valid range only becomes stale (or is written on the host) through `&mut
//!    Store` (an `Output`/`ArgMut`, `as_mut_slice`, ...), which cannot coexist with any
//!    live shared slice; through `&Store` backends only add valid ranges (uploads) on
//!    devices. The one exception is the launch of a recorded device graph, which marks
//!    what its kernels write through the state it shares ([`Shared`]) without a borrow:
//!    it does so only while no view was handed out since a skeleton call last borrowed the
//!    store `&mut` ([`Shared::viewed`]), so no slice covers the range it makes stale. A
//!    user's `&mut [T]` (`as_mut_slice`, `row_mut`, ...) counts as a view: it stays alive
//!    after the `&mut` borrow that made it, across a launch on a `RefCell`'d container.
//! 3. Copy-back writes go only into host-**stale** ranges, through raw pointers, while
//!    holding the lock.
//!
//! So memory covered by a live `&[T]` is never written, and two copy-backs never race.

// Parts of this API are for the device backends (CUDA/OpenCL), which land after the
// containers; until then some items are only used by tests.
#![allow(dead_code)]

use std::any::Any;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::coherence::{Coherence, Location};
use super::host::{HostBuf, HostKind};
use crate::{DeviceType, Error, Result};

/// A container's copy on one device, created by a backend (one buffer for the whole
/// container, reused across calls). Lets the container bring stale ranges back without
/// knowing the backend.
pub(crate) trait DeviceCopy: Any + Send + Sync {
    /// Copies elements `range` (element indices of the whole container) of the device
    /// buffer into `dst` (`range.len() * size_of::<T>()` bytes), synchronously. The caller
    /// has waited for the range's ready events.
    fn download(&self, range: Range<usize>, dst: &mut [u8]) -> Result<()>;
    /// For the backend to get its concrete buffer type back.
    fn as_any(&self) -> &dyn Any;
    /// For the backend to get its concrete buffer type back, mutably.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// The mutable part of a container, behind its mutex.
#[derive(Debug)]
pub(crate) struct State {
    /// Which ranges are valid where, and their ready events.
    pub(crate) coherence: Coherence,
    devices: Vec<(u32, Box<dyn DeviceCopy>)>,
    /// Elements the host read since the last device write: when that is at least half the
    /// container, device backends copy the next result back eagerly (the host is likely to
    /// read it again). A peek at a few elements does not count.
    host_read: usize,
}

impl std::fmt::Debug for dyn DeviceCopy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DeviceCopy")
    }
}

impl State {
    /// Whether the host read at least half of the container since the last device write.
    pub(crate) fn host_read_since_device_write(&self) -> bool {
        self.host_read.saturating_mul(2) >= self.coherence.len().max(1)
    }

    /// A device wrote the container (see [`State::host_read_since_device_write`]).
    pub(crate) fn device_written(&mut self) {
        self.host_read = 0;
    }

    /// The host read `elems` elements of the container.
    fn host_reads(&mut self, elems: usize) {
        self.host_read = self.host_read.saturating_add(elems);
    }

    /// The copy on device `dev`, if a backend attached one.
    pub(crate) fn device(&self, dev: u32) -> Option<&dyn DeviceCopy> {
        self.devices
            .iter()
            .find(|(d, _)| *d == dev)
            .map(|(_, c)| &**c)
    }

    /// The copy on device `dev`, mutably.
    pub(crate) fn device_mut(&mut self, dev: u32) -> Option<&mut (dyn DeviceCopy + 'static)> {
        self.devices
            .iter_mut()
            .find(|(d, _)| *d == dev)
            .map(|(_, c)| &mut **c)
    }

    /// Attaches `copy` as the buffer on device `dev`, returning the previous one. The new
    /// buffer holds nothing valid yet. Ranges valid *only* on the old buffer would be lost:
    /// bring them back to the host first (debug builds check).
    pub(crate) fn set_device(
        &mut self,
        dev: u32,
        copy: Box<dyn DeviceCopy>,
    ) -> Option<Box<dyn DeviceCopy>> {
        let old = self.remove_device(dev);
        self.devices.push((dev, copy));
        old
    }

    /// Detaches the buffer on device `dev`; its location becomes invalid everywhere. Ranges
    /// valid only there must have been brought back (debug builds check).
    pub(crate) fn remove_device(&mut self, dev: u32) -> Option<Box<dyn DeviceCopy>> {
        let loc = Location::Device(dev);
        let len = self.coherence.len();
        debug_assert!(
            {
                let only_there = self.coherence.valid(loc);
                let elsewhere: usize = self
                    .coherence
                    .sources(0..len, loc)
                    .iter()
                    .map(|(_, r)| r.len())
                    .sum();
                only_there.is_empty() || elsewhere == len
            },
            "device {dev} holds the only copy of some elements"
        );
        self.coherence.invalidate(loc, 0..len);
        let i = self.devices.iter().position(|(d, _)| *d == dev)?;
        Some(self.devices.swap_remove(i).1)
    }
}

/// Elements brought back together when the host reads one stale element (16 KiB of `f32`).
pub(crate) const ELEMENT_BLOCK: usize = 4096;

/// Storage plus coherence of one container of `T`.
pub(crate) struct Store<T> {
    buf: HostBuf<T>,
    /// The coherence state and the host-access flags, shared only with a recorded device
    /// graph (`crate::graph`), which reads and marks them on a launch as an eager call
    /// would, and sees through them whether the store still exists.
    shared: Arc<Shared>,
}

/// The part of a container that a recorded device graph shares with it (see
/// [`Store::shared`]).
pub(crate) struct Shared {
    state: Mutex<State>,
    /// What host access may take without the lock ([`HostAccess`] as a `u8`): set under
    /// the lock from the coherence state, cleared by every [`Shared::lock`] (whoever holds
    /// the state may change it, a graph's launch included), so element access in a host
    /// loop costs a load.
    fast: AtomicU8,
    /// Whether the host may hold a view (`&[T]`, `&T`, `&mut [T]`, `&mut T`) of the
    /// elements: set when one is handed out, cleared when a skeleton call borrows the store
    /// `&mut` ([`super::ArgMut`], which no view outlives). A
    /// launch that replays a graph without running its closure may make host elements
    /// stale only while this is clear (module invariant 2).
    viewed: AtomicBool,
    /// Cleared when the store is dropped: a graph that outlives a container (through a
    /// `RefCell` or a replacement) must not launch on its orphaned device buffer.
    alive: AtomicBool,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("state", &self.state)
            .field("viewed", &self.viewed.load(Ordering::Relaxed))
            .field("alive", &self.alive.load(Ordering::Relaxed))
            .finish()
    }
}

impl Shared {
    /// Locks the state (a poisoned lock is taken over: the state is updated only after
    /// each copy succeeded, so it is consistent). Host access takes the lock from now on,
    /// until the holder publishes what it may skip it for.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        let st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        // SeqCst, with the load in `viewed` after it, against the store in `view` and the
        // load in `Store::fast` after it: a launch either sees a reader's view or the
        // reader sees the lock flag (and waits for the launch's marks).
        self.fast.store(HostAccess::Locked as u8, Ordering::SeqCst);
        st
    }

    /// Whether the container was dropped.
    pub(crate) fn dropped(&self) -> bool {
        !self.alive.load(Ordering::Acquire)
    }

    /// Whether the host may still hold a view of the elements (see the field).
    pub(crate) fn viewed(&self) -> bool {
        self.viewed.load(Ordering::SeqCst)
    }

    /// A view is about to be handed out: called before the host-access flag is read (see
    /// [`Shared::lock`]). Loaded first: host loops on several threads read the flag
    /// without writing its cache line.
    #[inline]
    fn view(&self) {
        if !self.viewed.load(Ordering::SeqCst) {
            self.viewed.store(true, Ordering::SeqCst);
        }
    }
}

/// How much of a container the host holds, for access that skips the lock.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
enum HostAccess {
    /// Unknown, or some element is stale on the host or has a copy pending.
    Locked = 0,
    /// Every element is current on the host and no copy into the host is pending: reads
    /// need no lock (by the module invariant no `&self` holder can make a host-valid range
    /// stale).
    Read = 1,
    /// Moreover no device holds a valid copy and no copy is pending anywhere: a host write
    /// changes no coherence state.
    Write = 2,
}

impl HostAccess {
    fn of(st: &State) -> HostAccess {
        let c = &st.coherence;
        if c.pending_at(Location::Host) || !c.is_valid(Location::Host, 0..c.len()) {
            HostAccess::Locked
        } else if c.has_pending() || c.holders().any(|loc| loc != Location::Host) {
            // A copy still in flight may read the host buffer (an upload), which a host
            // write must wait for; a host read need not.
            HostAccess::Read
        } else {
            HostAccess::Write
        }
    }
}

// Store is Send + Sync through its fields: HostBuf<T> (whose unsafe impls rely on the
// invariant above) and Mutex<State> (events and device copies are Send + Sync).

impl<T: std::fmt::Debug> std::fmt::Debug for Store<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("buf", &self.buf)
            .field("shared", &self.shared)
            .finish()
    }
}

impl<T> Drop for Store<T> {
    fn drop(&mut self) {
        // Asynchronous copies may still read or write the host buffer: let them finish
        // before it is freed. Errors cannot be reported from drop.
        // Locked, not `get_mut`: a recorded graph may share the state (and keeps it, with
        // the device buffers its kernels use, after the store is gone).
        let mut st = self.shared.lock();
        self.shared.alive.store(false, Ordering::Release);
        let len = st.coherence.len();
        let _ = st.coherence.wait_all(0..len);
    }
}

impl<T: DeviceType> Store<T> {
    /// A store whose data is `buf`, valid on the host only.
    pub(crate) fn new(buf: HostBuf<T>) -> Self {
        // A program's main thread makes containers: from then on its exit waits for
        // background kernel compiles before anything else runs (see the function).
        crate::backends::kernel_cache::guard_this_threads_exit();
        let state = State {
            coherence: Coherence::new_on_host(buf.len()),
            devices: Vec::new(),
            host_read: 0,
        };
        Store {
            buf,
            shared: Arc::new(Shared {
                state: Mutex::new(state),
                fast: AtomicU8::new(HostAccess::Locked as u8),
                viewed: AtomicBool::new(false),
                alive: AtomicBool::new(true),
            }),
        }
    }

    /// Number of elements.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.buf.len()
    }

    /// Pageable or pinned host memory.
    pub(crate) fn host_kind(&self) -> HostKind {
        self.buf.kind()
    }

    /// Pointer to element 0 of the host buffer. Only host-valid ranges hold current data;
    /// writing through it is for the owner of `&mut Store` or for copy-back of stale ranges
    /// under the lock.
    #[inline]
    pub(crate) fn host_ptr(&self) -> *mut T {
        self.buf.as_ptr()
    }

    /// Locks the state (a poisoned lock is taken over: the state is updated only after
    /// each copy succeeded, so it is consistent).
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.shared.lock()
    }

    /// A skeleton call borrows the store `&mut` ([`super::ArgMut`]): no host view of it is
    /// alive any more. User-facing `&mut` access hands out a slice that outlives its start,
    /// so it sets the flag instead ([`Store::write`]).
    #[inline]
    pub(crate) fn exclusive(&mut self) {
        self.shared.viewed.store(false, Ordering::Relaxed);
    }

    /// The state and host-access flags, shared with a recorded device graph (see the
    /// field's docs): the graph sees through them whether the store still exists and keeps
    /// the device buffers alive.
    pub(crate) fn shared(&self) -> Arc<Shared> {
        Arc::clone(&self.shared)
    }

    /// Whether host access of `need` may skip the lock.
    #[inline]
    fn fast(&self, need: HostAccess) -> bool {
        // SeqCst: see `Shared::lock` (a plain load on x86 and Arm).
        self.shared.fast.load(Ordering::SeqCst) >= need as u8
    }

    /// Records, with the state `st` still locked (or borrowed `&mut`), what later host
    /// access may skip the lock for. `Release` publishes the copy-backs made under the lock
    /// to the readers that see the flag.
    fn publish(&self, st: &State) {
        self.shared
            .fast
            .store(HostAccess::of(st) as u8, Ordering::Release);
    }

    /// Element `i` on the host: without the lock when the host holds every element,
    /// else the stale part of the block of [`ELEMENT_BLOCK`] elements around it is
    /// brought back first (a loop over the elements of a device result then costs one
    /// copy per block, not one per element; a peek counts as reading one element).
    ///
    /// # Panics
    /// If `i` is out of bounds.
    #[inline]
    pub(crate) fn element(&self, i: usize) -> Result<&T> {
        self.check(&(i..i + 1));
        self.shared.view();
        if !self.fast(HostAccess::Read) {
            let mut st = self.lock();
            let first = i - i % ELEMENT_BLOCK;
            self.bring_back(&mut st, first..(first + ELEMENT_BLOCK).min(self.len()))?;
            st.host_reads(1);
            self.publish(&st);
        }
        // SAFETY: `i` is in bounds and valid on the host (brought back above, or the whole
        // host copy is current); by the module invariant it stays so while &self is
        // borrowed.
        Ok(unsafe { &*self.host_ptr().add(i) })
    }

    #[inline]
    fn check(&self, range: &Range<usize>) {
        assert!(
            range.start <= range.end && range.end <= self.len(),
            "range {}..{} out of bounds for a container of {} elements",
            range.start,
            range.end,
            self.len()
        );
    }

    /// Makes `range` valid on the host: waits for pending host writes, copies stale parts
    /// back from the devices holding them. `st` is this store's locked state.
    pub(crate) fn bring_back(&self, st: &mut State, range: Range<usize>) -> Result<()> {
        self.check(&range);
        bring_back(&self.buf, st, range)
    }

    /// The host elements of `range`, which must already be valid on the host (e.g. after
    /// [`Store::bring_back`] under the same lock): what a backend uploads from.
    ///
    /// # Panics
    /// If part of `range` is stale on the host.
    pub(crate) fn host_slice(&self, st: &State, range: Range<usize>) -> &[T] {
        self.check(&range);
        assert!(
            st.coherence.is_valid(Location::Host, range.clone()),
            "host_slice of stale elements {range:?}"
        );
        // SAFETY: range is in bounds and valid on the host; by the module invariant it stays
        // valid and unwritten while &self is borrowed.
        unsafe { std::slice::from_raw_parts(self.host_ptr().add(range.start), range.len()) }
    }

    /// The host elements of `range`, stale parts brought back first.
    pub(crate) fn read(&self, range: Range<usize>) -> Result<&[T]> {
        self.check(&range);
        self.shared.view();
        if !self.fast(HostAccess::Read) {
            let mut st = self.lock();
            self.bring_back(&mut st, range.clone())?;
            st.host_reads(range.len());
            self.publish(&st);
        }
        // SAFETY: range is in bounds and now valid on the host; by the module invariant it
        // stays valid and unwritten as long as &self is borrowed, which bounds the slice.
        Ok(unsafe { std::slice::from_raw_parts(self.host_ptr().add(range.start), range.len()) })
    }

    /// A copy of the host elements of `range`, stale parts brought back first. Made under
    /// the lock and leaving no view behind, so it does not count as one
    /// ([`Shared::viewed`]): a recorded graph that writes the store still replays after it.
    pub(crate) fn copy_out(&self, range: Range<usize>) -> Result<Vec<T>> {
        self.check(&range);
        let mut st = self.lock();
        self.bring_back(&mut st, range.clone())?;
        st.host_reads(range.len());
        self.publish(&st);
        // SAFETY: range is in bounds and valid on the host (brought back above). The lock,
        // held until the copy is made, keeps copy-backs and a graph's marks out of it, and
        // host writes need `&mut Store`.
        let host =
            unsafe { std::slice::from_raw_parts(self.host_ptr().add(range.start), range.len()) };
        Ok(host.to_vec())
    }

    /// The host elements of `range` for the user to read and write: stale parts are brought
    /// back, pending copies of the range are waited for, and device copies become invalid.
    /// The slice outlives the borrow's start, so it counts as a view ([`Shared::viewed`]).
    #[inline]
    pub(crate) fn write(&mut self, range: Range<usize>) -> Result<&mut [T]> {
        self.host_write(range, true, true)
    }

    /// The host elements of `range` for the user to overwrite every one: nothing is brought
    /// back; pending copies of the range are waited for, and device copies become invalid.
    /// Counts as a view, as [`Store::write`].
    pub(crate) fn overwrite(&mut self, range: Range<usize>) -> Result<&mut [T]> {
        self.host_write(range, false, true)
    }

    /// [`Store::write`] for a skeleton call's operand ([`super::ArgMut`]), whose slice dies
    /// with the call: no view.
    pub(crate) fn write_lent(&mut self, range: Range<usize>) -> Result<&mut [T]> {
        self.host_write(range, true, false)
    }

    /// [`Store::overwrite`] for a skeleton call's operand: no view.
    pub(crate) fn overwrite_lent(&mut self, range: Range<usize>) -> Result<&mut [T]> {
        self.host_write(range, false, false)
    }

    /// `range` of the host buffer for writing: its stale parts brought back first when
    /// `keep`; `view`: the slice is handed to the user and may stay alive across a graph
    /// launch, which must then not replay (module invariant 2).
    #[inline]
    fn host_write(&mut self, range: Range<usize>, keep: bool, view: bool) -> Result<&mut [T]> {
        self.check(&range);
        if view {
            // Before the host-access flag is read, as for shared views (see `Shared::lock`).
            self.shared.view();
        } else {
            self.exclusive();
        }
        if self.fast(HostAccess::Write) {
            return Ok(self.host_mut(range));
        }
        let Store { buf, shared } = self;
        // One lock from the copy-back to the published flag: a graph launch in between
        // would leave a flag that no longer says what the host holds.
        let mut st = shared.lock();
        if keep {
            bring_back(buf, &mut st, range.clone())?;
            st.host_reads(range.len());
        }
        st.coherence.wait_all(range.clone())?;
        st.coherence.write(Location::Host, range.clone(), None);
        shared
            .fast
            .store(HostAccess::of(&st) as u8, Ordering::Release);
        drop(st);
        Ok(self.host_mut(range))
    }

    /// `range` of the host buffer, for the owner of `&mut self` to write once it is current
    /// there and no copy of it is pending (see [`Store::host_write`]).
    #[inline]
    fn host_mut(&mut self, range: Range<usize>) -> &mut [T] {
        // SAFETY: range is in bounds (checked by the caller); &mut self excludes every other
        // slice of this buffer and no copy of the range is pending (the caller checked the
        // host-access flag or waited under the lock).
        unsafe { std::slice::from_raw_parts_mut(self.host_ptr().add(range.start), range.len()) }
    }

    /// A new store with a copy of the host data (brought back first), the same kind of
    /// host memory where possible, valid on the host only.
    pub(crate) fn try_clone(&self) -> Result<Self> {
        let data = self.read(0..self.len())?;
        let buf = match self.host_kind() {
            HostKind::Pinned => HostBuf::from_slice(HostKind::Pinned, data)
                .unwrap_or_else(|_| HostBuf::from_slice_default(data)),
            HostKind::Pageable => HostBuf::from_slice(HostKind::Pageable, data)?,
        };
        Ok(Store::new(buf))
    }
}

/// [`Store::bring_back`] on the parts of a store (so `&mut Store` callers can lend them out
/// separately).
fn bring_back<T: DeviceType>(buf: &HostBuf<T>, st: &mut State, range: Range<usize>) -> Result<()> {
    st.coherence.wait(Location::Host, range.clone())?;
    let missing = st.coherence.missing(Location::Host, range);
    for part in missing {
        let sources = st.coherence.sources(part.clone(), Location::Host);
        let covered: usize = sources.iter().map(|(_, r)| r.len()).sum();
        if covered != part.len() {
            return Err(Error::Driver(
                format!("internal: elements {part:?} of a container are valid nowhere").into(),
            ));
        }
        for (loc, r) in sources {
            let Location::Device(dev) = loc else {
                unreachable!("host is excluded")
            };
            st.coherence.wait(loc, r.clone())?;
            let copy = st.device(dev).ok_or_else(|| {
                Error::Driver(
                    format!("internal: device {dev} holds elements {r:?} but no buffer").into(),
                )
            })?;
            let size = std::mem::size_of::<T>();
            // SAFETY: r lies inside the buffer (checked above; coherence ranges are
            // within 0..len). It is stale on the host, so no live shared slice covers it
            // (module invariant 1, 2), and we hold the lock, so no other copy-back
            // writes it: this byte slice is the only reference to that memory. The
            // memory is initialised (every HostBuf is), and any bytes written are a
            // valid T (DeviceType: every bit pattern is valid).
            let dst = unsafe {
                std::slice::from_raw_parts_mut(
                    buf.as_ptr().add(r.start).cast::<u8>(),
                    r.len() * size,
                )
            };
            copy.download(r.clone(), dst)?;
            st.coherence.mark_valid(Location::Host, r, None);
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;

    use crate::containers::coherence::ReadyEvent;

    /// An in-memory "device": its own copy of the elements (as bytes), counting downloads.
    #[derive(Default)]
    pub(crate) struct FakeMem {
        pub(crate) mem: Mutex<Vec<u8>>,
        pub(crate) elem: usize,
        pub(crate) downloaded_bytes: AtomicUsize,
        pub(crate) downloads: AtomicUsize,
        pub(crate) fail: AtomicBool,
    }

    impl FakeMem {
        /// A "kernel" writing `vals` at element `start`.
        pub(crate) fn put<T: DeviceType>(&self, start: usize, vals: &[T]) {
            let bytes = std::mem::size_of_val(vals);
            // SAFETY: T is a DeviceType (plain data without padding); its bytes are read only.
            let src = unsafe { std::slice::from_raw_parts(vals.as_ptr().cast::<u8>(), bytes) };
            self.mem.lock().unwrap()[start * self.elem..][..bytes].copy_from_slice(src);
        }

        /// An "upload" of `range` from host data.
        pub(crate) fn upload<T: DeviceType>(&self, range: Range<usize>, host: &[T]) {
            self.put(range.start, &host[range]);
        }

        pub(crate) fn bytes(&self) -> usize {
            self.downloaded_bytes.load(Ordering::SeqCst)
        }
    }

    /// The [`DeviceCopy`] a fake backend attaches.
    pub(crate) struct FakeDevice(pub(crate) Arc<FakeMem>);

    impl DeviceCopy for FakeDevice {
        fn download(&self, range: Range<usize>, dst: &mut [u8]) -> Result<()> {
            let m = &self.0;
            if m.fail.load(Ordering::SeqCst) {
                return Err(Error::Driver("fake download failure".into()));
            }
            assert_eq!(dst.len(), range.len() * m.elem);
            dst.copy_from_slice(&m.mem.lock().unwrap()[range.start * m.elem..range.end * m.elem]);
            m.downloads.fetch_add(1, Ordering::SeqCst);
            m.downloaded_bytes.fetch_add(dst.len(), Ordering::SeqCst);
            Ok(())
        }
        fn as_any(&self) -> &dyn Any {
            self
        }
        fn as_any_mut(&mut self) -> &mut dyn Any {
            self
        }
    }

    /// Attaches a fake device `dev` with `len` elements of `T` to a locked state.
    pub(crate) fn attach_to<T: DeviceType>(st: &mut State, dev: u32, len: usize) -> Arc<FakeMem> {
        let elem = std::mem::size_of::<T>();
        let mem = Arc::new(FakeMem {
            mem: Mutex::new(vec![0; len * elem]),
            elem,
            ..Default::default()
        });
        st.set_device(dev, Box::new(FakeDevice(mem.clone())));
        mem
    }

    /// Attaches a fake device 0 to `store`.
    pub(crate) fn attach<T: DeviceType>(store: &Store<T>) -> Arc<FakeMem> {
        attach_to::<T>(&mut store.lock(), 0, store.len())
    }

    fn store(n: usize) -> Store<u32> {
        Store::new(HostBuf::from_fn(HostKind::Pageable, n, |i| i as u32).unwrap())
    }

    const D0: Location = Location::Device(0);

    #[test]
    fn host_read_downloads_only_stale_range_once() {
        let s = store(100);
        let dev = attach(&s);
        // Upload everything, then a "kernel" writes 40..50 on the device.
        dev.upload(0..100, s.read(0..100).unwrap());
        s.lock().coherence.mark_valid(D0, 0..100, None);
        dev.put(40, &[1000u32; 10]);
        s.lock().coherence.write(D0, 40..50, None);

        // Reading 0..30 needs nothing from the device.
        assert_eq!(s.read(0..30).unwrap()[29], 29);
        assert_eq!(dev.bytes(), 0);
        // Reading everything downloads exactly the stale 10 elements.
        let all = s.read(0..100).unwrap();
        assert_eq!(
            &all[38..52],
            &[38, 39, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 50, 51]
        );
        assert_eq!(dev.bytes(), 40);
        assert_eq!(dev.downloads.load(Ordering::SeqCst), 1);
        // A second read downloads nothing.
        let _ = s.read(0..100).unwrap();
        assert_eq!(dev.bytes(), 40);
        // The device copy is still valid (reading does not invalidate it).
        assert!(s.lock().coherence.is_valid(D0, 0..100));
    }

    #[test]
    fn partial_read_downloads_only_its_part() {
        let s = store(100);
        let dev = attach(&s);
        dev.put(0, &[7u32; 100]);
        s.lock().coherence.write(D0, 0..100, None);
        assert_eq!(s.read(10..20).unwrap(), &[7; 10]);
        assert_eq!(dev.bytes(), 40);
        assert_eq!(s.read(15..25).unwrap(), &[7; 10]);
        assert_eq!(dev.bytes(), 60);
        assert_eq!(
            s.lock().coherence.missing(Location::Host, 0..100),
            vec![0..10, 25..100]
        );
    }

    #[test]
    fn host_write_invalidates_device_and_overwrite_downloads_nothing() {
        let mut s = store(10);
        let dev = attach(&s);
        dev.put(0, &[5u32; 10]);
        s.lock().coherence.write(D0, 0..10, None);
        // write() brings the range back first, then owns it.
        s.write(2..4).unwrap()[0] = 99;
        assert_eq!(dev.bytes(), 8);
        assert_eq!(s.lock().coherence.valid(D0).ranges(), &[0..2, 4..10]);
        // overwrite() brings nothing back.
        s.overwrite(4..10).unwrap().fill(1);
        assert_eq!(dev.bytes(), 8);
        assert_eq!(s.read(0..10).unwrap(), &[5, 5, 99, 5, 1, 1, 1, 1, 1, 1]);
        assert_eq!(dev.bytes(), 16);
    }

    #[test]
    fn failed_download_leaves_range_stale() {
        let s = store(10);
        let dev = attach(&s);
        dev.put(0, &[5u32; 10]);
        s.lock().coherence.write(D0, 0..10, None);
        dev.fail.store(true, Ordering::SeqCst);
        assert!(matches!(s.read(0..10), Err(Error::Driver(_))));
        assert_eq!(
            s.lock().coherence.missing(Location::Host, 0..10),
            vec![0..10]
        );
        dev.fail.store(false, Ordering::SeqCst);
        assert_eq!(s.read(0..10).unwrap(), &[5; 10]);
    }

    struct Ticket(AtomicUsize);
    impl ReadyEvent for Ticket {
        fn wait(&self) -> Result<()> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    #[test]
    fn events_are_waited_before_download_and_before_host_writes() {
        let mut s = store(10);
        let dev = attach(&s);
        let k = Arc::new(Ticket(AtomicUsize::new(0)));
        dev.put(0, &[3u32; 5]);
        s.lock().coherence.write(D0, 0..5, Some(k.clone()));
        assert_eq!(s.read(5..10).unwrap(), &[5, 6, 7, 8, 9]);
        assert_eq!(k.0.load(Ordering::SeqCst), 0);
        assert_eq!(s.read(0..5).unwrap(), &[3; 5]);
        assert_eq!(k.0.load(Ordering::SeqCst), 1);
        // An upload in flight (reading host memory) is waited for before the host writes.
        let up = Arc::new(Ticket(AtomicUsize::new(0)));
        s.lock().coherence.mark_valid(D0, 5..10, Some(up.clone()));
        s.overwrite(0..3).unwrap();
        assert_eq!(up.0.load(Ordering::SeqCst), 0);
        s.overwrite(0..10).unwrap();
        assert_eq!(up.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn drop_waits_for_pending_copies() {
        let k = Arc::new(Ticket(AtomicUsize::new(0)));
        {
            let s = store(10);
            s.lock().coherence.mark_valid(D0, 0..10, Some(k.clone()));
        }
        assert_eq!(k.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn host_slice_only_of_valid_ranges() {
        let s = store(10);
        let _dev = attach(&s);
        s.lock().coherence.write(D0, 5..10, None);
        assert_eq!(s.host_slice(&s.lock(), 0..5), &[0, 1, 2, 3, 4]);
        let stale = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            s.host_slice(&s.lock(), 4..6).len()
        }));
        assert!(stale.is_err());
    }

    #[test]
    fn clone_copies_current_host_data() {
        let s = store(10);
        let dev = attach(&s);
        dev.put(8, &[42u32, 43]);
        s.lock().coherence.write(D0, 8..10, None);
        let c = s.try_clone().unwrap();
        assert_eq!(c.read(0..10).unwrap(), &[0, 1, 2, 3, 4, 5, 6, 7, 42, 43]);
        assert!(c.lock().device(0).is_none());
        assert!(c.lock().coherence.valid(D0).is_empty());
    }

    #[test]
    fn device_slot_replacement() {
        let s = store(4);
        let _ = attach(&s);
        s.lock().coherence.mark_valid(D0, 0..4, None);
        let old = s.lock().set_device(0, Box::new(FakeDevice(Arc::default())));
        assert!(old.is_some());
        assert!(s.lock().coherence.valid(D0).is_empty());
        assert!(s.lock().remove_device(0).is_some());
        assert!(s.lock().device(0).is_none());
        assert!(s.lock().remove_device(0).is_none());
    }

    #[test]
    fn a_graph_marking_through_the_shared_state_resets_host_access() {
        // A recorded graph's launch marks a write through `Shared` only, never through the
        // store: host reads after it must not take the lock-free path the store published.
        let mut s = store(100);
        let dev = attach(&s);
        let shared = s.shared();
        assert!(!shared.viewed());
        assert_eq!(s.read(0..100).unwrap()[7], 7);
        assert!(s.fast(HostAccess::Read));
        assert!(shared.viewed());
        // What `memory::replay::mark` does after the graph ran.
        dev.put(0, &[77u32; 100]);
        shared.lock().coherence.write(D0, 0..100, None);
        assert!(!s.fast(HostAccess::Read));
        assert_eq!(*s.element(7).unwrap(), 77);
        assert_eq!(s.read(0..100).unwrap(), &[77; 100]);
        // A skeleton call's `&mut` borrow ends every view; a user's `&mut [T]` is one (it
        // outlives the borrow that made it); dropping the store tells the graph.
        s.exclusive();
        assert!(!shared.viewed());
        s.write(0..1).unwrap()[0] = 1;
        assert!(shared.viewed());
        s.exclusive();
        s.overwrite(5..6).unwrap()[0] = 1;
        assert!(shared.viewed());
        s.write_lent(0..1).unwrap()[0] = 2;
        s.overwrite_lent(1..2).unwrap()[0] = 2;
        assert!(!shared.viewed());
        assert!(!shared.dropped());
        drop(s);
        assert!(shared.dropped());
    }

    #[test]
    fn concurrent_readers_bring_back_disjoint_parts() {
        let s = store(1000);
        let dev = attach(&s);
        dev.put(0, &vec![9u32; 1000]);
        s.lock().coherence.write(D0, 0..1000, None);
        std::thread::scope(|sc| {
            for t in 0..4 {
                let s = &s;
                sc.spawn(move || {
                    for _ in 0..10 {
                        assert!(s
                            .read(t * 250..(t + 1) * 250)
                            .unwrap()
                            .iter()
                            .all(|x| *x == 9));
                        assert!(s.read(0..1000).unwrap().iter().all(|x| *x == 9));
                    }
                });
            }
        });
        assert_eq!(dev.bytes(), 4000);
    }
}
