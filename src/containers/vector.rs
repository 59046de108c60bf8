//! `Vector<T>` and its views.

use std::fmt;
use std::ops::{Index, IndexMut, Range, RangeBounds};

use super::host::{HostBuf, HostKind};
use super::store::Store;
use super::{resolve_range, Arg, ArgMut, Input, Output, Shape};
use crate::{DeviceType, Result};

const COPY_BACK: &str = "skel: copying a vector back from the device failed";

/// A 1D smart container.
///
/// Host and device copies are kept coherent lazily: a skeleton that writes the vector on a
/// device leaves the result there, and host access ([`as_slice`](Vector::as_slice),
/// indexing, [`to_vec`](Vector::to_vec), ...) brings back only the stale ranges, once.
/// Mutable host access ([`as_mut_slice`](Vector::as_mut_slice), `v[i] = x`) invalidates the
/// device copies of what it covers.
///
/// Host memory is 64-byte aligned (page aligned when large), and page-locked when a CUDA
/// device is in use (see [`Vector::pinned`], [`Vector::pageable`]).
///
/// ```
/// use skel::prelude::*;
/// let mut v = Vector::from(vec![1.0f32, 2.0, 3.0]);
/// v[1] = 20.0;
/// assert_eq!(v.len(), 3);
/// assert_eq!(v.to_vec(), vec![1.0, 20.0, 3.0]);
/// assert_eq!(v.iter().sum::<f32>(), 24.0);
/// ```
pub struct Vector<T> {
    store: Store<T>,
}

impl<T: DeviceType> Vector<T> {
    fn with(buf: HostBuf<T>) -> Self {
        Vector {
            store: Store::new(buf),
        }
    }

    /// `n` elements of all-zero bits in pageable memory that nothing has touched: a
    /// temporary that a skeleton fills where it runs (a lazy Map materialised for a call).
    pub(crate) fn scratch(n: usize) -> Self {
        Self::with(HostBuf::zeroed_pageable(n))
    }

    /// A vector holding `data` (host memory of the default kind: pinned when a CUDA device
    /// is in use and `SKEL_PAGEABLE` is unset, else pageable).
    ///
    /// ```
    /// use skel::prelude::*;
    /// let v = Vector::from_vec(vec![1u32, 2, 3]);
    /// assert_eq!(v.as_slice(), &[1, 2, 3]);
    /// ```
    pub fn from_vec(data: Vec<T>) -> Self {
        Self::with(HostBuf::from_slice_default(&data))
    }

    /// `n` copies of `value`.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let v = Vector::filled(3, 2.5f64);
    /// assert_eq!(v.to_vec(), vec![2.5; 3]);
    /// ```
    pub fn filled(n: usize, value: T) -> Self {
        Self::with(HostBuf::from_fn_default(n, |_| value))
    }

    /// `n` elements of `T::default()` (zero for numbers).
    ///
    /// ```
    /// use skel::prelude::*;
    /// let v: Vector<i32> = Vector::zeroed(4);
    /// assert_eq!(v.to_vec(), vec![0; 4]);
    /// ```
    pub fn zeroed(n: usize) -> Self
    where
        T: Default,
    {
        Self::filled(n, T::default())
    }

    /// Element `i` is `f(i)`.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let v = Vector::from_fn(4, |i| (i * i) as u64);
    /// assert_eq!(v.to_vec(), vec![0, 1, 4, 9]);
    /// ```
    pub fn from_fn(n: usize, f: impl FnMut(usize) -> T) -> Self {
        Self::with(HostBuf::from_fn_default(n, f))
    }

    /// A vector in ordinary pageable host memory, whatever devices are in use.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let v = Vector::pageable(vec![1i16, 2]);
    /// assert!(!v.is_pinned());
    /// ```
    pub fn pageable(data: Vec<T>) -> Self {
        Self::with(
            HostBuf::from_slice(HostKind::Pageable, &data)
                .expect("pageable allocation does not fail"),
        )
    }

    /// A vector in page-locked host memory, so device transfers are asynchronous.
    ///
    /// # Errors
    /// [`Error::BackendUnavailable`](crate::Error::BackendUnavailable) when no CUDA device
    /// provides pinned memory (there is no silent fallback to pageable memory), or the
    /// allocator's own error ([`Error::OutOfMemory`](crate::Error::OutOfMemory), ...).
    ///
    /// ```
    /// use skel::prelude::*;
    /// match Vector::pinned(vec![1.0f32; 4]) {
    ///     Ok(v) => assert!(v.is_pinned()),
    ///     Err(e) => assert!(matches!(e, Error::BackendUnavailable { .. })),
    /// }
    /// ```
    pub fn pinned(data: Vec<T>) -> Result<Self> {
        Ok(Self::with(HostBuf::from_slice(HostKind::Pinned, &data)?))
    }

    /// Whether the host memory is page-locked.
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert!(!Vector::pageable(vec![0u8]).is_pinned());
    /// ```
    pub fn is_pinned(&self) -> bool {
        self.store.host_kind() == HostKind::Pinned
    }

    /// Number of elements.
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Vector::filled(5, 0u8).len(), 5);
    /// ```
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// Whether the vector has no element.
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert!(Vector::<f32>::zeroed(0).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements on the host, brought back from a device first where stale.
    ///
    /// # Errors
    /// The device backend's error if copying back fails; the vector is unchanged.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let v = Vector::from(vec![1, 2]);
    /// assert_eq!(v.try_as_slice()?, &[1, 2]);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn try_as_slice(&self) -> Result<&[T]> {
        self.store.read(0..self.len())
    }

    /// The elements on the host, brought back from a device first where stale.
    ///
    /// # Panics
    /// If copying back from a device fails (a driver error); see
    /// [`try_as_slice`](Vector::try_as_slice).
    ///
    /// ```
    /// use skel::prelude::*;
    /// let v = Vector::from(vec![1, 2]);
    /// assert_eq!(v.as_slice(), &[1, 2]);
    /// ```
    pub fn as_slice(&self) -> &[T] {
        self.try_as_slice().expect(COPY_BACK)
    }

    /// The elements on the host for reading and writing; device copies become invalid.
    ///
    /// # Errors
    /// The device backend's error if copying stale data back fails; the vector is unchanged.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut v = Vector::from(vec![1, 2]);
    /// v.try_as_mut_slice()?[0] = 5;
    /// assert_eq!(v.as_slice(), &[5, 2]);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn try_as_mut_slice(&mut self) -> Result<&mut [T]> {
        let n = self.len();
        self.store.write(0..n)
    }

    /// The elements on the host for reading and writing; device copies become invalid.
    ///
    /// # Panics
    /// If copying stale data back from a device fails; see
    /// [`try_as_mut_slice`](Vector::try_as_mut_slice).
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut v = Vector::from(vec![3, 1, 2]);
    /// v.as_mut_slice().sort();
    /// assert_eq!(v.as_slice(), &[1, 2, 3]);
    /// ```
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        self.try_as_mut_slice().expect(COPY_BACK)
    }

    /// A copy of the elements, or the device backend's error if copying back fails (the
    /// way to read a result that a device may have failed to compute).
    ///
    /// # Errors
    /// As [`try_as_slice`](Vector::try_as_slice).
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Vector::filled(2, 7u8).try_to_vec()?, vec![7, 7]);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn try_to_vec(&self) -> Result<Vec<T>> {
        self.store.copy_out(0..self.len())
    }

    /// A copy of the elements.
    ///
    /// # Panics
    /// As [`as_slice`](Vector::as_slice); [`try_to_vec`](Vector::try_to_vec) returns the
    /// error instead.
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Vector::filled(2, 7u8).to_vec(), vec![7, 7]);
    /// ```
    pub fn to_vec(&self) -> Vec<T> {
        self.try_to_vec().expect(COPY_BACK)
    }

    /// An iterator over the elements (on the host).
    ///
    /// # Panics
    /// As [`as_slice`](Vector::as_slice).
    ///
    /// ```
    /// use skel::prelude::*;
    /// let v = Vector::from_fn(4, |i| i as i32);
    /// assert_eq!(v.iter().max(), Some(&3));
    /// ```
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.as_slice().iter()
    }

    /// A read view of elements `range`, accepted by skeletons wherever a `Vector` is.
    /// Only the range is uploaded or brought back.
    ///
    /// # Panics
    /// If the range is out of bounds or decreasing, like slicing.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let v = Vector::from_fn(10, |i| i as u32);
    /// let w = v.view(2..5);
    /// assert_eq!(w.len(), 3);
    /// assert_eq!(w.as_slice(), &[2, 3, 4]);
    /// assert_eq!(v.view(8..).to_vec(), vec![8, 9]);
    /// ```
    pub fn view(&self, range: impl RangeBounds<usize>) -> VectorView<'_, T> {
        let range = resolve_range(range, self.len(), "vector view");
        VectorView {
            store: &self.store,
            range,
        }
    }

    /// A write view of elements `range`, accepted by skeletons wherever a `&mut Vector` is.
    /// Only the range is computed and marked stale.
    ///
    /// # Panics
    /// If the range is out of bounds or decreasing, like slicing.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut v: Vector<i32> = Vector::zeroed(6);
    /// let mut w = v.view_mut(1..3);
    /// w.as_mut_slice().fill(7);
    /// assert_eq!(w.len(), 2);
    /// assert_eq!(v.as_slice(), &[0, 7, 7, 0, 0, 0]);
    /// ```
    pub fn view_mut(&mut self, range: impl RangeBounds<usize>) -> VectorViewMut<'_, T> {
        let range = resolve_range(range, self.len(), "vector view");
        VectorViewMut {
            store: &mut self.store,
            range,
        }
    }
}

impl<T: DeviceType> From<Vec<T>> for Vector<T> {
    /// Same as [`Vector::from_vec`].
    ///
    /// ```
    /// use skel::prelude::*;
    /// let v: Vector<u8> = vec![1, 2].into();
    /// assert_eq!(v.len(), 2);
    /// ```
    fn from(v: Vec<T>) -> Self {
        Vector::from_vec(v)
    }
}

impl<T: DeviceType> From<&[T]> for Vector<T> {
    /// A vector holding a copy of the slice.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let v = Vector::from(&[1.0f32, 2.0][..]);
    /// assert_eq!(v.len(), 2);
    /// ```
    fn from(s: &[T]) -> Self {
        Self::with(HostBuf::from_slice_default(s))
    }
}

impl<T: DeviceType> FromIterator<T> for Vector<T> {
    /// Collects into a vector.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let v: Vector<u32> = (0..4).collect();
    /// assert_eq!(v.as_slice(), &[0, 1, 2, 3]);
    /// ```
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Vector::from_vec(iter.into_iter().collect())
    }
}

impl<'a, T: DeviceType> IntoIterator for &'a Vector<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    /// Iterates over the host elements (see [`Vector::iter`]).
    ///
    /// ```
    /// use skel::prelude::*;
    /// let v = Vector::from(vec![1, 2, 3]);
    /// let mut sum = 0;
    /// for x in &v { sum += x; }
    /// assert_eq!(sum, 6);
    /// ```
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<T: DeviceType> Index<usize> for Vector<T> {
    type Output = T;
    /// Element `i`, brought back from a device first if stale (with the stale part of the 4096
    /// elements around it, so a loop over a device result copies block by block).
    ///
    /// # Panics
    /// If `i >= len`, or if copying back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let v = Vector::from(vec![4, 5]);
    /// assert_eq!(v[1], 5);
    /// ```
    #[inline]
    fn index(&self, i: usize) -> &T {
        check_index(i, self.len());
        self.store.element(i).expect(COPY_BACK)
    }
}

impl<T: DeviceType> IndexMut<usize> for Vector<T> {
    /// Element `i` for writing; device copies of that element become invalid.
    ///
    /// # Panics
    /// If `i >= len`, or if copying back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut v = Vector::from(vec![4, 5]);
    /// v[0] += 1;
    /// assert_eq!(v[0], 5);
    /// ```
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut T {
        check_index(i, self.len());
        &mut self.store.write(i..i + 1).expect(COPY_BACK)[0]
    }
}

pub(super) fn check_index(i: usize, len: usize) {
    assert!(
        i < len,
        "index out of bounds: the len is {len} but the index is {i}"
    );
}

impl<T: DeviceType> Clone for Vector<T> {
    /// A new vector with the current data (brought back from devices first), on the host
    /// only, in the same kind of host memory where possible.
    ///
    /// # Panics
    /// If copying back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let a = Vector::from(vec![1, 2]);
    /// let mut b = a.clone();
    /// b[0] = 9;
    /// assert_eq!((a[0], b[0]), (1, 9));
    /// ```
    fn clone(&self) -> Self {
        Vector {
            store: self.store.try_clone().expect(COPY_BACK),
        }
    }
}

impl<T: DeviceType + fmt::Debug> fmt::Debug for Vector<T> {
    /// Formats like `Vector([1, 2])` (the host data, brought back first).
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(format!("{:?}", Vector::from(vec![1, 2])), "Vector([1, 2])");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.try_as_slice() {
            Ok(s) => f.debug_tuple("Vector").field(&s).finish(),
            Err(e) => write!(
                f,
                "Vector(<{} elements, copy-back failed: {e}>)",
                self.len()
            ),
        }
    }
}

impl<T: DeviceType + PartialEq> PartialEq for Vector<T> {
    /// Element-wise equality of the host data.
    ///
    /// # Panics
    /// If copying back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Vector::from(vec![1, 2]), Vector::from_fn(2, |i| i as i32 + 1));
    /// ```
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T> super::sealed::Container for Vector<T> {}

impl<T: DeviceType> Input<T> for Vector<T> {
    fn arg(&self) -> Arg<'_, T> {
        Arg::new(&self.store, 0, Shape::Vector(self.len()))
    }
}

impl<T: DeviceType> Output<T> for Vector<T> {
    fn arg_mut(&mut self) -> ArgMut<'_, T> {
        let n = self.len();
        ArgMut::new(&mut self.store, 0, Shape::Vector(n))
    }
}

/// A read view of a range of a [`Vector`] (from [`Vector::view`]).
///
/// ```
/// use skel::prelude::*;
/// let v = Vector::from_fn(5, |i| i as f32);
/// let w = v.view(1..4);
/// assert_eq!(w[0], 1.0);
/// assert_eq!(w.iter().sum::<f32>(), 6.0);
/// ```
pub struct VectorView<'a, T> {
    store: &'a Store<T>,
    range: Range<usize>,
}

impl<T> Clone for VectorView<'_, T> {
    fn clone(&self) -> Self {
        VectorView {
            store: self.store,
            range: self.range.clone(),
        }
    }
}

impl<'a, T: DeviceType> VectorView<'a, T> {
    /// Number of elements in the view.
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Vector::filled(9, 0u8).view(2..7).len(), 5);
    /// ```
    pub fn len(&self) -> usize {
        self.range.len()
    }

    /// Whether the view has no element.
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert!(Vector::filled(9, 0u8).view(3..3).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }

    /// The view's elements on the host (only the view's stale ranges are brought back).
    ///
    /// # Errors
    /// The device backend's error if copying back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let v = Vector::from(vec![1, 2, 3]);
    /// assert_eq!(v.view(1..).try_as_slice()?, &[2, 3]);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn try_as_slice(&self) -> Result<&'a [T]> {
        self.store.read(self.range.clone())
    }

    /// The view's elements on the host (only the view's stale ranges are brought back).
    ///
    /// # Panics
    /// If copying back fails; see [`try_as_slice`](VectorView::try_as_slice).
    ///
    /// ```
    /// use skel::prelude::*;
    /// let v = Vector::from(vec![1, 2, 3]);
    /// assert_eq!(v.view(..2).as_slice(), &[1, 2]);
    /// ```
    pub fn as_slice(&self) -> &'a [T] {
        self.try_as_slice().expect(COPY_BACK)
    }

    /// A copy of the view's elements.
    ///
    /// # Panics
    /// As [`as_slice`](VectorView::as_slice).
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Vector::from(vec![1, 2, 3]).view(1..2).to_vec(), vec![2]);
    /// ```
    pub fn to_vec(&self) -> Vec<T> {
        self.as_slice().to_vec()
    }

    /// An iterator over the view's elements.
    ///
    /// # Panics
    /// As [`as_slice`](VectorView::as_slice).
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Vector::from(vec![1, 2, 3]).view(1..).iter().count(), 2);
    /// ```
    pub fn iter(&self) -> std::slice::Iter<'a, T> {
        self.as_slice().iter()
    }
}

impl<T: DeviceType> Index<usize> for VectorView<'_, T> {
    type Output = T;
    /// Element `i` of the view.
    ///
    /// # Panics
    /// If `i >= len`, or if copying back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let v = Vector::from(vec![1, 2, 3]);
    /// assert_eq!(v.view(1..)[1], 3);
    /// ```
    #[inline]
    fn index(&self, i: usize) -> &T {
        check_index(i, self.len());
        let at = self.range.start + i;
        self.store.element(at).expect(COPY_BACK)
    }
}

impl<T: DeviceType + fmt::Debug> fmt::Debug for VectorView<'_, T> {
    /// Formats like `VectorView(1..3, [2, 3])`.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let v = Vector::from(vec![1, 2, 3]);
    /// assert_eq!(format!("{:?}", v.view(1..)), "VectorView(1..3, [2, 3])");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.try_as_slice() {
            Ok(s) => f
                .debug_tuple("VectorView")
                .field(&self.range)
                .field(&s)
                .finish(),
            Err(e) => write!(f, "VectorView({:?}, <copy-back failed: {e}>)", self.range),
        }
    }
}

impl<T> super::sealed::Container for VectorView<'_, T> {}

impl<T: DeviceType> Input<T> for VectorView<'_, T> {
    fn arg(&self) -> Arg<'_, T> {
        Arg::new(self.store, self.range.start, Shape::Vector(self.len()))
    }
}

/// A write view of a range of a [`Vector`] (from [`Vector::view_mut`]).
///
/// ```
/// use skel::prelude::*;
/// let mut v: Vector<u8> = Vector::zeroed(4);
/// let mut w = v.view_mut(2..);
/// w[0] = 1;
/// assert_eq!(v.as_slice(), &[0, 0, 1, 0]);
/// ```
pub struct VectorViewMut<'a, T> {
    store: &'a mut Store<T>,
    range: Range<usize>,
}

impl<T: DeviceType> VectorViewMut<'_, T> {
    /// Number of elements in the view.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut v = Vector::filled(9, 0u8);
    /// assert_eq!(v.view_mut(2..7).len(), 5);
    /// ```
    pub fn len(&self) -> usize {
        self.range.len()
    }

    /// Whether the view has no element.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut v = Vector::filled(9, 0u8);
    /// assert!(v.view_mut(9..).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }

    /// The view's elements on the host (only its stale ranges are brought back).
    ///
    /// # Panics
    /// If copying back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut v = Vector::from(vec![1, 2, 3]);
    /// assert_eq!(v.view_mut(1..).as_slice(), &[2, 3]);
    /// ```
    pub fn as_slice(&self) -> &[T] {
        self.store.read(self.range.clone()).expect(COPY_BACK)
    }

    /// The view's elements on the host for writing; device copies of the range become
    /// invalid.
    ///
    /// # Errors
    /// The device backend's error if copying stale data back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut v = Vector::from(vec![1, 2, 3]);
    /// v.view_mut(..1).try_as_mut_slice()?[0] = 0;
    /// assert_eq!(v[0], 0);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn try_as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.store.write(self.range.clone())
    }

    /// The view's elements on the host for writing; device copies of the range become
    /// invalid.
    ///
    /// # Panics
    /// If copying back fails; see [`try_as_mut_slice`](VectorViewMut::try_as_mut_slice).
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut v = Vector::from(vec![1, 2, 3]);
    /// v.view_mut(1..).as_mut_slice().fill(0);
    /// assert_eq!(v.as_slice(), &[1, 0, 0]);
    /// ```
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        self.try_as_mut_slice().expect(COPY_BACK)
    }

    /// A copy of the view's elements.
    ///
    /// # Panics
    /// If copying back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut v = Vector::from(vec![1, 2, 3]);
    /// assert_eq!(v.view_mut(2..).to_vec(), vec![3]);
    /// ```
    pub fn to_vec(&self) -> Vec<T> {
        self.as_slice().to_vec()
    }
}

impl<T: DeviceType> Index<usize> for VectorViewMut<'_, T> {
    type Output = T;
    /// Element `i` of the view.
    ///
    /// # Panics
    /// If `i >= len`, or if copying back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut v = Vector::from(vec![1, 2, 3]);
    /// assert_eq!(v.view_mut(1..)[0], 2);
    /// ```
    #[inline]
    fn index(&self, i: usize) -> &T {
        check_index(i, self.len());
        let at = self.range.start + i;
        self.store.element(at).expect(COPY_BACK)
    }
}

impl<T: DeviceType> IndexMut<usize> for VectorViewMut<'_, T> {
    /// Element `i` of the view, for writing.
    ///
    /// # Panics
    /// If `i >= len`, or if copying back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut v = Vector::from(vec![1, 2, 3]);
    /// v.view_mut(1..)[0] = 7;
    /// assert_eq!(v[1], 7);
    /// ```
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut T {
        check_index(i, self.len());
        let at = self.range.start + i;
        &mut self.store.write(at..at + 1).expect(COPY_BACK)[0]
    }
}

impl<T: DeviceType + fmt::Debug> fmt::Debug for VectorViewMut<'_, T> {
    /// Formats like `VectorViewMut(1..3, [2, 3])`.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut v = Vector::from(vec![1, 2, 3]);
    /// assert_eq!(format!("{:?}", v.view_mut(1..)), "VectorViewMut(1..3, [2, 3])");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.store.read(self.range.clone()) {
            Ok(s) => f
                .debug_tuple("VectorViewMut")
                .field(&self.range)
                .field(&s)
                .finish(),
            Err(e) => write!(
                f,
                "VectorViewMut({:?}, <copy-back failed: {e}>)",
                self.range
            ),
        }
    }
}

impl<T> super::sealed::Container for VectorViewMut<'_, T> {}

impl<T: DeviceType> Input<T> for VectorViewMut<'_, T> {
    fn arg(&self) -> Arg<'_, T> {
        Arg::new(self.store, self.range.start, Shape::Vector(self.len()))
    }
}

impl<T: DeviceType> Output<T> for VectorViewMut<'_, T> {
    fn arg_mut(&mut self) -> ArgMut<'_, T> {
        let shape = Shape::Vector(self.len());
        ArgMut::new(self.store, self.range.start, shape)
    }
}
