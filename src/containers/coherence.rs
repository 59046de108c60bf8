//! Coherence state of one container: which element ranges hold the newest data where.
//!
//! A container's elements can live in several [`Location`]s at once: the host buffer and a
//! buffer per device. For every location, [`Coherence`] keeps the set of element ranges
//! that hold the newest data there ([`RangeSet`]), and for ranges whose data is still
//! being produced asynchronously (a kernel writing, a copy in flight) the [`ReadyEvent`]
//! after which it is ready. Indices are absolute element indices of the whole container.
//!
//! Protocol (see DESIGN.md, "Coherence protocol"):
//! - reading `range` at `loc`: copy [`Coherence::missing`] there from a location that
//!   holds it ([`Coherence::sources`]), then [`Coherence::mark_valid`];
//! - writing `range` at `loc`: [`Coherence::write`]; `loc` becomes the only valid location;
//! - dropping a device copy: [`Coherence::invalidate`].
//!
//! Invariant the callers keep: every element is valid in at least one location.

// Parts of this API are for the device backends (CUDA/OpenCL), which land after the
// containers; until then some items are only used by tests.
#![allow(dead_code)]

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use crate::Result;

/// A place a container's elements can live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Location {
    /// The host buffer.
    Host,
    /// The buffer on device `n` (numbering is the backend's).
    Device(u32),
}

/// Something a backend can wait on: data at a location becomes ready after it
/// (a CUDA event, an OpenCL event, a host-side ticket, ...).
pub(crate) trait ReadyEvent: Send + Sync {
    /// Blocks until the operation behind the event has completed; its error otherwise.
    fn wait(&self) -> Result<()>;

    /// Whether the operation is known to have completed without error, asked of no driver
    /// (`false` where unknown): such an event is forgotten, as after a [`wait`](Self::wait).
    fn known_ready(&self) -> bool {
        false
    }

    /// The event itself, for a backend to recognise its own events (to order a stream
    /// after one instead of blocking the host); `None` where not offered.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }
}

/// A set of `usize` indices stored as sorted, disjoint, non-adjacent, non-empty ranges.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct RangeSet {
    ranges: Vec<Range<usize>>,
}

impl fmt::Debug for RangeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.ranges.iter()).finish()
    }
}

impl RangeSet {
    /// The empty set.
    pub(crate) fn new() -> Self {
        RangeSet { ranges: Vec::new() }
    }

    /// The set holding exactly `range` (empty if `range` is empty).
    pub(crate) fn from_range(range: Range<usize>) -> Self {
        let mut s = RangeSet::new();
        s.insert(range);
        s
    }

    /// The ranges, sorted, disjoint and non-adjacent.
    pub(crate) fn ranges(&self) -> &[Range<usize>] {
        &self.ranges
    }

    /// Whether no index is in the set.
    pub(crate) fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Number of indices in the set.
    pub(crate) fn count(&self) -> usize {
        self.ranges.iter().map(|r| r.end - r.start).sum()
    }

    /// Whether every index of `range` is in the set (true for an empty range).
    pub(crate) fn contains(&self, range: &Range<usize>) -> bool {
        if range.start >= range.end {
            return true;
        }
        // The first stored range ending after range.start is the only candidate.
        let i = self.ranges.partition_point(|r| r.end <= range.start);
        self.ranges
            .get(i)
            .is_some_and(|r| r.start <= range.start && range.end <= r.end)
    }

    /// Whether index `i` is in the set.
    pub(crate) fn contains_index(&self, i: usize) -> bool {
        self.contains(&(i..i + 1))
    }

    /// Adds `range`, merging with overlapping and adjacent ranges.
    pub(crate) fn insert(&mut self, range: Range<usize>) {
        if range.start >= range.end {
            return;
        }
        // Stored ranges that overlap or touch `range`: end >= start and start <= end.
        let lo = self.ranges.partition_point(|r| r.end < range.start);
        let hi = self.ranges.partition_point(|r| r.start <= range.end);
        if lo == hi {
            self.ranges.insert(lo, range);
        } else {
            let start = range.start.min(self.ranges[lo].start);
            let end = range.end.max(self.ranges[hi - 1].end);
            self.ranges.splice(lo..hi, std::iter::once(start..end));
        }
    }

    /// Removes every index of `range`, splitting a stored range if needed.
    pub(crate) fn remove(&mut self, range: Range<usize>) {
        if range.start >= range.end {
            return;
        }
        // Stored ranges that overlap `range`: end > start and start < end.
        let lo = self.ranges.partition_point(|r| r.end <= range.start);
        let hi = self.ranges.partition_point(|r| r.start < range.end);
        if lo >= hi {
            return;
        }
        let first = self.ranges[lo].clone();
        let last = self.ranges[hi - 1].clone();
        let mut keep = Vec::with_capacity(2);
        if first.start < range.start {
            keep.push(first.start..range.start);
        }
        if range.end < last.end {
            keep.push(range.end..last.end);
        }
        self.ranges.splice(lo..hi, keep);
    }

    /// `self ∪ other`.
    pub(crate) fn union(&self, other: &RangeSet) -> RangeSet {
        let mut out = self.clone();
        for r in &other.ranges {
            out.insert(r.clone());
        }
        out
    }

    /// `self \ other`.
    pub(crate) fn subtract(&self, other: &RangeSet) -> RangeSet {
        let mut out = self.clone();
        for r in &other.ranges {
            out.remove(r.clone());
        }
        out
    }

    /// `self ∩ other`.
    pub(crate) fn intersect(&self, other: &RangeSet) -> RangeSet {
        let mut out = Vec::new();
        let (mut i, mut j) = (0, 0);
        while i < self.ranges.len() && j < other.ranges.len() {
            let (a, b) = (&self.ranges[i], &other.ranges[j]);
            let start = a.start.max(b.start);
            let end = a.end.min(b.end);
            if start < end {
                out.push(start..end);
            }
            if a.end <= b.end {
                i += 1;
            } else {
                j += 1;
            }
        }
        // Pieces of disjoint, non-adjacent inputs are disjoint and non-adjacent.
        RangeSet { ranges: out }
    }

    /// The parts of `range` that are in the set, in order.
    pub(crate) fn intersect_range(&self, range: Range<usize>) -> Vec<Range<usize>> {
        if range.start >= range.end {
            return Vec::new();
        }
        let lo = self.ranges.partition_point(|r| r.end <= range.start);
        self.ranges[lo..]
            .iter()
            .take_while(|r| r.start < range.end)
            .map(|r| r.start.max(range.start)..r.end.min(range.end))
            .collect()
    }

    /// The parts of `range` that are *not* in the set, in order.
    pub(crate) fn missing_in(&self, range: Range<usize>) -> Vec<Range<usize>> {
        let mut out = Vec::new();
        let mut at = range.start;
        for r in self.intersect_range(range.clone()) {
            if at < r.start {
                out.push(at..r.start);
            }
            at = r.end;
        }
        if at < range.end {
            out.push(at..range.end);
        }
        out
    }
}

/// What one location holds.
#[derive(Default)]
struct LocState {
    valid: RangeSet,
    /// Ranges that are ready only after an event: within `valid`, except on the host, which
    /// also keeps the events of copies into it still in flight for ranges gone stale since
    /// (see [`Coherence::write`]).
    pending: Vec<(Range<usize>, Arc<dyn ReadyEvent>)>,
}

impl LocState {
    /// Forgets the events of `range` (they are replaced or the data is gone). In place:
    /// a program writing a container a row at a time (a wavefront) keeps one entry per row
    /// here, and this runs on every call.
    fn drop_events(&mut self, range: &Range<usize>) {
        let mut k = 0;
        while k < self.pending.len() {
            let r = self.pending[k].0.clone();
            if r.end <= range.start || range.end <= r.start {
                k += 1;
                continue;
            }
            match (r.start < range.start, range.end < r.end) {
                (false, false) => {
                    // The entry moved into `k` is looked at next.
                    self.pending.swap_remove(k);
                    continue;
                }
                (true, false) => self.pending[k].0 = r.start..range.start,
                (false, true) => self.pending[k].0 = range.end..r.end,
                (true, true) => {
                    self.pending[k].0 = r.start..range.start;
                    let ev = self.pending[k].1.clone();
                    // After `range`: skipped when the loop reaches it.
                    self.pending.push((range.end..r.end, ev));
                }
            }
            k += 1;
        }
    }

    /// Records that `range` is ready after `ev`. Entries whose event is known to be over
    /// are forgotten first, and a range next to the last entry's, with the same event
    /// (a graph launch marks its kernels' writes one by one), extends that entry: every
    /// later write scans this list.
    fn push_event(&mut self, range: Range<usize>, ev: Arc<dyn ReadyEvent>) {
        self.pending.retain(|(_, e)| !e.known_ready());
        if let Some((r, e)) = self.pending.last_mut() {
            if Arc::ptr_eq(e, &ev) && (r.end == range.start || range.end == r.start) {
                *r = r.start.min(range.start)..r.end.max(range.end);
                return;
            }
        }
        self.pending.push((range, ev));
    }
}

/// The coherence state of one container of `len` elements over any number of locations.
pub(crate) struct Coherence {
    len: usize,
    /// Sorted by location; `Host` first. Locations never seen hold nothing.
    locs: Vec<(Location, LocState)>,
}

impl fmt::Debug for Coherence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut m = f.debug_map();
        for (loc, st) in &self.locs {
            m.entry(loc, &st.valid);
        }
        m.finish()
    }
}

impl Coherence {
    /// A container of `len` elements whose data is on the host only.
    pub(crate) fn new_on_host(len: usize) -> Self {
        let host = LocState {
            valid: RangeSet::from_range(0..len),
            pending: Vec::new(),
        };
        Coherence {
            len,
            locs: vec![(Location::Host, host)],
        }
    }

    /// Number of elements tracked.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    fn get(&self, loc: Location) -> Option<&LocState> {
        self.locs.iter().find(|(l, _)| *l == loc).map(|(_, s)| s)
    }

    fn get_mut(&mut self, loc: Location) -> &mut LocState {
        let i = match self.locs.binary_search_by(|(l, _)| l.cmp(&loc)) {
            Ok(i) => i,
            Err(i) => {
                self.locs.insert(i, (loc, LocState::default()));
                i
            }
        };
        &mut self.locs[i].1
    }

    fn check(&self, range: &Range<usize>) {
        assert!(
            range.start <= range.end && range.end <= self.len,
            "coherence range {range:?} outside 0..{}",
            self.len
        );
    }

    /// The element ranges holding the newest data at `loc`.
    pub(crate) fn valid(&self, loc: Location) -> RangeSet {
        self.get(loc).map(|s| s.valid.clone()).unwrap_or_default()
    }

    /// Whether all of `range` is valid at `loc`.
    pub(crate) fn is_valid(&self, loc: Location, range: Range<usize>) -> bool {
        self.get(loc)
            .map_or(range.is_empty(), |s| s.valid.contains(&range))
    }

    /// What must be copied to `loc` to make `range` valid there, in order.
    pub(crate) fn missing(&self, loc: Location, range: Range<usize>) -> Vec<Range<usize>> {
        self.check(&range);
        match self.get(loc) {
            Some(s) => s.valid.missing_in(range),
            None if range.is_empty() => Vec::new(),
            None => vec![range],
        }
    }

    /// For each part of `range`, one location other than `not` that holds its newest data
    /// (the host preferred, then the lowest device). Parts valid nowhere else are left out.
    pub(crate) fn sources(
        &self,
        range: Range<usize>,
        not: Location,
    ) -> Vec<(Location, Range<usize>)> {
        self.check(&range);
        let mut todo = RangeSet::from_range(range);
        let mut out = Vec::new();
        for (loc, st) in &self.locs {
            if *loc == not || todo.is_empty() {
                continue;
            }
            let here = todo.intersect(&st.valid);
            for r in here.ranges() {
                out.push((*loc, r.clone()));
            }
            todo = todo.subtract(&here);
        }
        out.sort_by_key(|(_, r)| r.start);
        out
    }

    /// A copy of the newest data of `range` now is (or, after `event`, will be) at `loc`.
    /// `event` replaces any earlier event of `range` at `loc`; `None` means ready now.
    pub(crate) fn mark_valid(
        &mut self,
        loc: Location,
        range: Range<usize>,
        event: Option<Arc<dyn ReadyEvent>>,
    ) {
        self.check(&range);
        if range.is_empty() {
            return;
        }
        let st = self.get_mut(loc);
        st.valid.insert(range.clone());
        st.drop_events(&range);
        if let Some(ev) = event {
            st.push_event(range, ev);
        }
    }

    /// `range` was written at `loc` (ready now, or after `event`): `loc` becomes the only
    /// location where it is valid.
    pub(crate) fn write(
        &mut self,
        loc: Location,
        range: Range<usize>,
        event: Option<Arc<dyn ReadyEvent>>,
    ) {
        self.check(&range);
        if range.is_empty() {
            return;
        }
        for (l, st) in &mut self.locs {
            if *l != loc {
                st.valid.remove(range.clone());
                // A copy into host memory (an eager download) still in flight keeps
                // writing the range after it goes stale there, and nothing on the device
                // orders it before the next copy back when another device slot wrote the
                // range: its event stays, so that whatever writes the host range next (a
                // copy back, a host write, the store's drop) waits for it first.
                if *l != Location::Host {
                    st.drop_events(&range);
                }
            }
        }
        self.mark_valid(loc, range, event);
    }

    /// `loc` no longer holds valid data for `range` (e.g. its buffer is freed). The caller
    /// keeps the invariant that every element stays valid somewhere.
    pub(crate) fn invalidate(&mut self, loc: Location, range: Range<usize>) {
        self.check(&range);
        if let Some((_, st)) = self.locs.iter_mut().find(|(l, _)| *l == loc) {
            st.valid.remove(range.clone());
            st.drop_events(&range);
        }
    }

    /// The distinct events that `range` at `loc` is waiting on.
    pub(crate) fn events(&self, loc: Location, range: Range<usize>) -> Vec<Arc<dyn ReadyEvent>> {
        let mut out: Vec<Arc<dyn ReadyEvent>> = Vec::new();
        if let Some(st) = self.get(loc) {
            for (r, ev) in &st.pending {
                if r.start < range.end
                    && range.start < r.end
                    && !out.iter().any(|e| Arc::ptr_eq(e, ev))
                {
                    out.push(ev.clone());
                }
            }
        }
        out
    }

    /// Waits until `range` at `loc` is ready; completed events are forgotten.
    pub(crate) fn wait(&mut self, loc: Location, range: Range<usize>) -> Result<()> {
        let events = self.events(loc, range);
        if events.is_empty() {
            return Ok(());
        }
        for ev in &events {
            ev.wait()?;
        }
        let st = self.get_mut(loc);
        st.pending
            .retain(|(_, e)| !events.iter().any(|done| Arc::ptr_eq(done, e)));
        Ok(())
    }

    /// Waits for every pending operation touching `range` at any location (before the
    /// host overwrites memory an asynchronous copy may still read).
    pub(crate) fn wait_all(&mut self, range: Range<usize>) -> Result<()> {
        let locs: Vec<Location> = self.locs.iter().map(|(l, _)| *l).collect();
        for loc in locs {
            self.wait(loc, range.clone())?;
        }
        Ok(())
    }

    /// The locations holding at least one valid element.
    pub(crate) fn holders(&self) -> impl Iterator<Item = Location> + '_ {
        self.locs
            .iter()
            .filter(|(_, s)| !s.valid.is_empty())
            .map(|(l, _)| *l)
    }

    /// Whether an operation producing data at `loc` is still pending.
    pub(crate) fn pending_at(&self, loc: Location) -> bool {
        self.get(loc).is_some_and(|s| !s.pending.is_empty())
    }

    /// Whether any operation is still pending anywhere.
    pub(crate) fn has_pending(&self) -> bool {
        self.locs.iter().any(|(_, s)| !s.pending.is_empty())
    }
}

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn set(rs: &[Range<usize>]) -> RangeSet {
        let mut s = RangeSet::new();
        for r in rs {
            s.insert(r.clone());
        }
        s
    }

    #[test]
    fn insert_merges_overlapping_and_adjacent() {
        let mut s = RangeSet::new();
        s.insert(10..20);
        s.insert(30..40);
        assert_eq!(s.ranges(), &[10..20, 30..40]);
        s.insert(20..25); // adjacent on the left range
        assert_eq!(s.ranges(), &[10..25, 30..40]);
        s.insert(25..30); // closes the gap: both merge
        assert_eq!(s.ranges(), &[10..40]);
        s.insert(0..5);
        s.insert(50..60);
        s.insert(3..55); // swallows everything in between
        assert_eq!(s.ranges(), &[0..60]);
        s.insert(5..5);
        s.insert(70..70);
        assert_eq!(s.ranges(), &[0..60]);
        assert_eq!(s.count(), 60);
    }

    #[test]
    fn insert_keeps_order() {
        let s = set(&[50..60, 0..5, 20..30, 10..15]);
        assert_eq!(s.ranges(), &[0..5, 10..15, 20..30, 50..60]);
    }

    #[test]
    fn remove_splits_and_trims() {
        let mut s = set(&[0..100]);
        s.remove(40..60); // in the middle: split
        assert_eq!(s.ranges(), &[0..40, 60..100]);
        s.remove(0..10); // prefix
        s.remove(90..200); // suffix, past the end
        assert_eq!(s.ranges(), &[10..40, 60..90]);
        s.remove(30..70); // across a gap
        assert_eq!(s.ranges(), &[10..30, 70..90]);
        s.remove(50..55); // in a gap: nothing
        s.remove(20..20); // empty: nothing
        assert_eq!(s.ranges(), &[10..30, 70..90]);
        s.remove(0..1000);
        assert!(s.is_empty());
    }

    #[test]
    fn algebra() {
        let a = set(&[0..10, 20..30, 40..50]);
        let b = set(&[5..25, 45..60]);
        assert_eq!(a.union(&b).ranges(), &[0..30, 40..60]);
        assert_eq!(a.subtract(&b).ranges(), &[0..5, 25..30, 40..45]);
        assert_eq!(a.intersect(&b).ranges(), &[5..10, 20..25, 45..50]);
        assert_eq!(b.intersect(&a), a.intersect(&b));
        assert_eq!(a.missing_in(0..60), vec![10..20, 30..40, 50..60]);
        assert_eq!(a.missing_in(2..8), Vec::<Range<usize>>::new());
        assert_eq!(a.missing_in(8..22), vec![10..20]);
        assert_eq!(a.missing_in(7..7), Vec::<Range<usize>>::new());
        assert_eq!(a.intersect_range(8..42), vec![8..10, 20..30, 40..42]);
        let e = RangeSet::new();
        assert_eq!(e.missing_in(3..9), vec![3..9]);
        assert!(a.contains(&(20..30)) && !a.contains(&(20..31)) && a.contains(&(5..5)));
        assert!(a.contains_index(0) && !a.contains_index(10) && a.contains_index(49));
        assert_eq!(a.union(&e), a);
        assert!(a.intersect(&e).is_empty());
        assert_eq!(a.subtract(&e), a);
    }

    fn bitmap(s: &RangeSet, n: usize) -> Vec<bool> {
        let mut m = vec![false; n];
        for r in s.ranges() {
            for x in &mut m[r.clone()] {
                *x = true;
            }
        }
        m
    }

    fn well_formed(s: &RangeSet) -> bool {
        s.ranges().iter().all(|r| r.start < r.end)
            && s.ranges().windows(2).all(|w| w[0].end < w[1].start)
    }

    const N: usize = 64;

    fn arb_range() -> impl Strategy<Value = Range<usize>> {
        (0..=N, 0..=N).prop_map(|(a, b)| a.min(b)..a.max(b))
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(Range<usize>),
        Remove(Range<usize>),
    }

    fn arb_ops() -> impl Strategy<Value = Vec<Op>> {
        prop::collection::vec(
            prop_oneof![
                arb_range().prop_map(Op::Insert),
                arb_range().prop_map(Op::Remove)
            ],
            0..40,
        )
    }

    fn build(ops: &[Op]) -> (RangeSet, Vec<bool>) {
        let mut s = RangeSet::new();
        let mut m = vec![false; N];
        for op in ops {
            match op {
                Op::Insert(r) => {
                    s.insert(r.clone());
                    m[r.clone()].iter_mut().for_each(|x| *x = true);
                }
                Op::Remove(r) => {
                    s.remove(r.clone());
                    m[r.clone()].iter_mut().for_each(|x| *x = false);
                }
            }
        }
        (s, m)
    }

    fn runs(m: &[bool], r: Range<usize>, want: bool) -> Vec<Range<usize>> {
        let mut out: Vec<Range<usize>> = Vec::new();
        for i in r {
            if m[i] == want {
                match out.last_mut() {
                    Some(last) if last.end == i => last.end = i + 1,
                    _ => out.push(i..i + 1),
                }
            }
        }
        out
    }

    proptest! {
        #[test]
        fn rangeset_matches_bitmap(a in arb_ops(), b in arb_ops(), q in arb_range()) {
            let (sa, ma) = build(&a);
            let (sb, mb) = build(&b);
            prop_assert!(well_formed(&sa));
            prop_assert_eq!(bitmap(&sa, N), ma.clone());
            prop_assert_eq!(sa.count(), ma.iter().filter(|x| **x).count());

            let u = sa.union(&sb);
            let d = sa.subtract(&sb);
            let i = sa.intersect(&sb);
            for s in [&u, &d, &i] {
                prop_assert!(well_formed(s));
            }
            let zip = |f: fn(bool, bool) -> bool| ma.iter().zip(&mb).map(|(x, y)| f(*x, *y)).collect::<Vec<_>>();
            prop_assert_eq!(bitmap(&u, N), zip(|x, y| x || y));
            prop_assert_eq!(bitmap(&d, N), zip(|x, y| x && !y));
            prop_assert_eq!(bitmap(&i, N), zip(|x, y| x && y));

            prop_assert_eq!(sa.missing_in(q.clone()), runs(&ma, q.clone(), false));
            prop_assert_eq!(sa.intersect_range(q.clone()), runs(&ma, q.clone(), true));
            prop_assert_eq!(sa.contains(&q), ma[q.clone()].iter().all(|x| *x));
        }
    }

    struct Counter(AtomicUsize);
    impl ReadyEvent for Counter {
        fn wait(&self) -> Result<()> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    const D0: Location = Location::Device(0);
    const D1: Location = Location::Device(1);

    #[test]
    fn fresh_container_is_on_host() {
        let c = Coherence::new_on_host(100);
        assert!(c.is_valid(Location::Host, 0..100));
        assert_eq!(
            c.missing(Location::Host, 0..100),
            Vec::<Range<usize>>::new()
        );
        assert_eq!(c.missing(D0, 10..20), vec![10..20]);
        assert_eq!(c.missing(D0, 10..10), Vec::<Range<usize>>::new());
        assert!(c.valid(D1).is_empty());
    }

    #[test]
    fn read_write_protocol() {
        let mut c = Coherence::new_on_host(100);
        // Upload 10..50 to device 0.
        for r in c.missing(D0, 10..50) {
            c.mark_valid(D0, r, None);
        }
        assert!(c.is_valid(D0, 10..50) && c.is_valid(Location::Host, 0..100));
        // A later read of 0..60 uploads only the rest.
        assert_eq!(c.missing(D0, 0..60), vec![0..10, 50..60]);
        // A kernel writes 20..30 on device 0: host loses it.
        c.write(D0, 20..30, None);
        assert_eq!(c.missing(Location::Host, 0..100), vec![20..30]);
        // Sources never name the excluded location; the host is preferred over devices.
        assert_eq!(c.sources(0..100, Location::Host), vec![(D0, 10..50)]);
        assert_eq!(
            c.sources(15..35, D1),
            vec![
                (Location::Host, 15..20),
                (D0, 20..30),
                (Location::Host, 30..35)
            ]
        );
        // Device 1 writes 25..40: device 0 and host lose it.
        c.write(D1, 25..40, None);
        assert_eq!(c.valid(D0).ranges(), &[10..25, 40..50]);
        assert_eq!(c.valid(Location::Host).ranges(), &[0..20, 40..100]);
        assert_eq!(
            c.sources(0..100, Location::Host),
            vec![(D0, 10..25), (D1, 25..40), (D0, 40..50)]
        );
        assert_eq!(c.missing(Location::Host, 0..100), vec![20..40]);
        // Bring host back, then the host writes everything: devices invalid.
        c.mark_valid(Location::Host, 20..40, None);
        c.write(Location::Host, 0..100, None);
        assert!(c.valid(D0).is_empty() && c.valid(D1).is_empty());
        assert!(c.is_valid(Location::Host, 0..100));
        // Invalidate a device that holds a copy.
        c.mark_valid(D0, 0..100, None);
        c.invalidate(D0, 0..100);
        assert!(c.valid(D0).is_empty() && c.is_valid(Location::Host, 0..100));
    }

    #[test]
    fn events_are_tracked_per_range_and_waited_once() {
        let mut c = Coherence::new_on_host(100);
        let e1 = Arc::new(Counter(AtomicUsize::new(0)));
        let e2 = Arc::new(Counter(AtomicUsize::new(0)));
        c.write(D0, 0..50, Some(e1.clone()));
        c.write(D0, 50..100, Some(e2.clone()));
        assert!(c.has_pending());
        assert_eq!(c.events(D0, 10..20).len(), 1);
        assert_eq!(c.events(D0, 40..60).len(), 2);
        assert_eq!(c.events(D1, 0..100).len(), 0);
        c.wait(D0, 0..10).unwrap();
        assert_eq!(e1.0.load(Ordering::SeqCst), 1);
        assert_eq!(e2.0.load(Ordering::SeqCst), 0);
        // e1 is complete for its whole range: not waited again.
        c.wait(D0, 0..50).unwrap();
        assert_eq!(e1.0.load(Ordering::SeqCst), 1);
        // A new event for part of e2's range replaces it there only.
        let e3 = Arc::new(Counter(AtomicUsize::new(0)));
        c.mark_valid(D0, 50..60, Some(e3.clone()));
        assert_eq!(c.events(D0, 50..60).len(), 1);
        assert!(Arc::ptr_eq(
            &c.events(D0, 50..60)[0],
            &(e3.clone() as Arc<dyn ReadyEvent>)
        ));
        // The host writing 55..100 drops device events there.
        c.write(Location::Host, 55..100, None);
        assert_eq!(c.events(D0, 60..100).len(), 0);
        c.wait_all(0..100).unwrap();
        assert_eq!(e3.0.load(Ordering::SeqCst), 1);
        assert_eq!(e2.0.load(Ordering::SeqCst), 0);
        assert!(!c.has_pending());
    }

    #[test]
    fn a_write_inside_an_entry_splits_it_and_rows_of_one_event_share_an_entry() {
        let mut c = Coherence::new_on_host(100);
        let e1: Arc<dyn ReadyEvent> = Arc::new(Counter(AtomicUsize::new(0)));
        let e2: Arc<dyn ReadyEvent> = Arc::new(Counter(AtomicUsize::new(0)));
        c.write(D0, 0..100, Some(e1.clone()));
        c.write(D0, 40..60, Some(e2.clone()));
        let only = |c: &Coherence, r: Range<usize>, e: &Arc<dyn ReadyEvent>| {
            let evs = c.events(D0, r);
            evs.len() == 1 && Arc::ptr_eq(&evs[0], e)
        };
        assert!(only(&c, 0..40, &e1) && only(&c, 60..100, &e1) && only(&c, 40..60, &e2));
        assert_eq!(c.get(D0).map(|s| s.pending.len()), Some(3));
        // Rows written one by one after one event (a graph launch's marks): one entry.
        let e3: Arc<dyn ReadyEvent> = Arc::new(Counter(AtomicUsize::new(0)));
        let mut c = Coherence::new_on_host(100);
        for row in 0..10 {
            c.write(D0, row * 10..(row + 1) * 10, Some(e3.clone()));
        }
        assert_eq!(c.get(D0).map(|s| s.pending.len()), Some(1));
        assert!(only(&c, 0..100, &e3));
        // Not next to each other, or another event: entries of their own.
        let mut c = Coherence::new_on_host(100);
        c.write(D0, 0..10, Some(e3.clone()));
        c.write(D0, 20..30, Some(e3.clone()));
        c.write(D0, 30..40, Some(e1.clone()));
        assert_eq!(c.get(D0).map(|s| s.pending.len()), Some(3));
    }

    #[test]
    fn events_known_to_be_over_are_forgotten_on_the_next_write() {
        struct Over;
        impl ReadyEvent for Over {
            fn wait(&self) -> Result<()> {
                panic!("an event known to be over is not waited for")
            }
            fn known_ready(&self) -> bool {
                true
            }
        }
        let mut c = Coherence::new_on_host(100);
        for row in 0..5 {
            c.write(D0, row * 20..row * 20 + 10, Some(Arc::new(Over)));
        }
        let e: Arc<dyn ReadyEvent> = Arc::new(Counter(AtomicUsize::new(0)));
        c.write(D0, 10..20, Some(e.clone()));
        assert_eq!(c.get(D0).map(|s| s.pending.len()), Some(1));
        c.wait_all(0..100).unwrap();
        assert!(!c.has_pending());
    }

    #[test]
    fn a_download_in_flight_is_waited_for_after_another_device_writes_its_range() {
        // Device 0 wrote 0..10 and copies it back to the host (in flight); then device 1
        // writes 0..10. The copy still writes host memory: the next copy back (from device
        // 1) must wait for it, or it lands after and the host reads the old values.
        let mut c = Coherence::new_on_host(10);
        c.write(D0, 0..10, None);
        let down: Arc<dyn ReadyEvent> = Arc::new(Counter(AtomicUsize::new(0)));
        c.mark_valid(Location::Host, 0..10, Some(down.clone()));
        c.write(D1, 0..10, None);
        assert!(!c.is_valid(Location::Host, 0..10));
        let evs = c.events(Location::Host, 4..6);
        assert!(evs.len() == 1 && Arc::ptr_eq(&evs[0], &down));
        c.wait(Location::Host, 0..10).unwrap();
        assert!(!c.has_pending());
        // Device copies' events go with their data: their buffers order later copies.
        let up: Arc<dyn ReadyEvent> = Arc::new(Counter(AtomicUsize::new(0)));
        c.mark_valid(D0, 0..10, Some(up));
        c.write(D1, 0..10, None);
        assert!(c.events(D0, 0..10).is_empty());
    }

    #[test]
    fn failed_event_is_kept() {
        struct Fail;
        impl ReadyEvent for Fail {
            fn wait(&self) -> Result<()> {
                Err(crate::Error::Driver("boom".into()))
            }
        }
        let mut c = Coherence::new_on_host(10);
        c.write(D0, 0..10, Some(Arc::new(Fail)));
        assert!(c.wait(D0, 0..10).is_err());
        assert!(c.has_pending());
    }

    #[test]
    #[should_panic(expected = "outside")]
    fn out_of_range_panics() {
        let c = Coherence::new_on_host(10);
        c.missing(Location::Host, 5..11);
    }

    /// Model: for each element, the set of locations holding its newest data.
    #[derive(Clone, Debug)]
    enum COp {
        Read(u8, Range<usize>),
        Write(u8, Range<usize>),
        Invalidate(u8, Range<usize>),
    }

    fn loc(n: u8) -> Location {
        if n == 0 {
            Location::Host
        } else {
            Location::Device(u32::from(n) - 1)
        }
    }

    /// A sequence of operations over the host and `devices` device locations.
    fn ops_with_devices() -> impl Strategy<Value = (u8, Vec<COp>)> {
        (1u8..=7).prop_flat_map(|devices| {
            let all = 0..devices + 1;
            let ops = prop::collection::vec(
                prop_oneof![
                    (all.clone(), arb_range()).prop_map(|(l, r)| COp::Read(l, r)),
                    (all, arb_range()).prop_map(|(l, r)| COp::Write(l, r)),
                    (1..devices + 1, arb_range()).prop_map(|(l, r)| COp::Invalidate(l, r)),
                ],
                0..30,
            );
            (Just(devices), ops)
        })
    }

    proptest! {
        /// Random numbers of device locations (a process's CUDA device slots, OpenCL's).
        #[test]
        fn coherence_matches_model((devices, ops) in ops_with_devices()) {
            let locs = usize::from(devices) + 1;
            let mut c = Coherence::new_on_host(N);
            let mut host_only = vec![false; locs];
            host_only[0] = true;
            let mut model = vec![host_only; N];
            for op in ops {
                match op {
                    COp::Read(l, r) => {
                        let missing = c.missing(loc(l), r.clone());
                        prop_assert_eq!(&missing, &runs(&model.iter().map(|m| m[l as usize]).collect::<Vec<_>>(), r.clone(), false));
                        for m in missing {
                            // Every missing part has a source elsewhere.
                            let src = c.sources(m.clone(), loc(l));
                            prop_assert_eq!(src.iter().map(|(_, r)| r.end - r.start).sum::<usize>(), m.end - m.start);
                            for (sl, sr) in src {
                                prop_assert!(sl != loc(l));
                                prop_assert!(c.is_valid(sl, sr));
                            }
                            c.mark_valid(loc(l), m.clone(), None);
                            for x in &mut model[m] { x[l as usize] = true; }
                        }
                    }
                    COp::Write(l, r) => {
                        c.write(loc(l), r.clone(), None);
                        for x in &mut model[r] { x.fill(false); x[l as usize] = true; }
                    }
                    COp::Invalidate(l, r) => {
                        // Keep the invariant: only drop copies that exist elsewhere.
                        for (i, x) in model.iter_mut().enumerate().take(r.end).skip(r.start) {
                            if x.iter().filter(|v| **v).count() > 1 && x[l as usize] {
                                x[l as usize] = false;
                                c.invalidate(loc(l), i..i + 1);
                            }
                        }
                    }
                }
                for l in 0..locs as u8 {
                    let want: Vec<bool> = model.iter().map(|m| m[l as usize]).collect();
                    prop_assert_eq!(bitmap(&c.valid(loc(l)), N), want);
                }
            }
        }
    }
}
