//! `Tensor3<T>`: a row-major 3D smart container (SkePU 3's `Tensor3`).

use std::fmt;
use std::ops::{Index, IndexMut};

use super::host::HostBuf;
use super::store::Store;
use super::{Arg, ArgMut, Input, Output, Shape};
use crate::{DeviceType, Error, Result};

const COPY_BACK: &str = "skel: copying a tensor back from the device failed";

/// A row-major 3D smart container of `d0 x d1 x d2` elements, element `(i, j, k)` at flat
/// position `(i * d1 + j) * d2 + k` (`k` fastest), coherent between host and devices like
/// [`Vector`](crate::Vector) and [`Matrix`](crate::Matrix) (the same storage: lazy
/// copy-back of stale ranges only).
///
/// `MapOverlap` runs 3D window functions ([`Window3`](crate::Window3)) over it; `Map`,
/// `Reduce` and `MapReduce` take it as a flat container (its elements in row-major order;
/// a `#[index] i: usize` is the flat position).
///
/// ```
/// use skel::prelude::*;
/// let mut t = Tensor3::from_fn(2, 3, 4, |i, j, k| (100 * i + 10 * j + k) as u32);
/// assert_eq!(t.dims(), (2, 3, 4));
/// assert_eq!(t[(1, 2, 3)], 123);
/// t[(0, 0, 1)] = 7;
/// assert_eq!(&t.as_slice()[..3], &[0, 7, 2]);
/// ```
pub struct Tensor3<T> {
    store: Store<T>,
    dims: (usize, usize, usize),
}

fn elements((d0, d1, d2): (usize, usize, usize)) -> Option<usize> {
    d0.checked_mul(d1)?.checked_mul(d2)
}

fn elements_or_panic(dims: (usize, usize, usize)) -> usize {
    elements(dims).unwrap_or_else(|| {
        panic!(
            "a {}x{}x{} tensor has more elements than usize holds",
            dims.0, dims.1, dims.2
        )
    })
}

impl<T: DeviceType> Tensor3<T> {
    /// A `d0 x d1 x d2` tensor from row-major `data` (`k` fastest).
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] if `data.len() != d0 * d1 * d2`, naming both.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let t = Tensor3::from_vec(1, 2, 2, vec![1, 2, 3, 4])?;
    /// assert_eq!(t[(0, 1, 0)], 3);
    /// let err = Tensor3::from_vec(2, 2, 2, vec![0u8; 7]).unwrap_err();
    /// assert!(err.to_string().contains("8 elements for a 2x2x2 tensor, got 7"), "{err}");
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn from_vec(d0: usize, d1: usize, d2: usize, data: Vec<T>) -> Result<Self> {
        let n = elements((d0, d1, d2));
        if n != Some(data.len()) {
            let expected = n.map_or("more than usize::MAX".into(), |n| n.to_string());
            return Err(Error::shape(
                "Tensor3::from_vec",
                format!("{expected} elements for a {d0}x{d1}x{d2} tensor"),
                data.len(),
            ));
        }
        Ok(Tensor3 {
            store: Store::new(HostBuf::from_slice_default(&data)),
            dims: (d0, d1, d2),
        })
    }

    /// Element `(i, j, k)` is `f(i, j, k)`.
    ///
    /// # Panics
    /// If `d0 * d1 * d2` overflows `usize`.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let t = Tensor3::from_fn(2, 1, 2, |i, _, k| (10 * i + k) as u8);
    /// assert_eq!(t.to_vec(), vec![0, 1, 10, 11]);
    /// ```
    pub fn from_fn(
        d0: usize,
        d1: usize,
        d2: usize,
        mut f: impl FnMut(usize, usize, usize) -> T,
    ) -> Self {
        let n = elements_or_panic((d0, d1, d2));
        let plane = d1 * d2;
        let buf = HostBuf::from_fn_default(n, |at| {
            let (i, rest) = (at / plane, at % plane);
            f(i, rest / d2, rest % d2)
        });
        Tensor3 {
            store: Store::new(buf),
            dims: (d0, d1, d2),
        }
    }

    /// Every element `value`.
    ///
    /// # Panics
    /// If `d0 * d1 * d2` overflows `usize`.
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Tensor3::filled(1, 2, 1, 0.5f32).to_vec(), vec![0.5, 0.5]);
    /// ```
    pub fn filled(d0: usize, d1: usize, d2: usize, value: T) -> Self {
        let buf = HostBuf::from_fn_default(elements_or_panic((d0, d1, d2)), |_| value);
        Tensor3 {
            store: Store::new(buf),
            dims: (d0, d1, d2),
        }
    }

    /// A [`Vector::scratch`](crate::Vector) of these extents: all-zero bits, pageable,
    /// untouched (a lazy Map's temporary).
    pub(crate) fn scratch(dims: (usize, usize, usize)) -> Self {
        Tensor3 {
            store: Store::new(HostBuf::zeroed_pageable(elements_or_panic(dims))),
            dims,
        }
    }

    /// Every element `T::default()` (zero for numbers).
    ///
    /// # Panics
    /// If `d0 * d1 * d2` overflows `usize`.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let t: Tensor3<f64> = Tensor3::zeroed(2, 2, 2);
    /// assert_eq!(t.as_slice(), &[0.0; 8]);
    /// ```
    pub fn zeroed(d0: usize, d1: usize, d2: usize) -> Self
    where
        T: Default,
    {
        Self::filled(d0, d1, d2, T::default())
    }

    /// The extents `(d0, d1, d2)`, slowest axis first.
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Tensor3::<u8>::zeroed(2, 3, 4).dims(), (2, 3, 4));
    /// ```
    pub fn dims(&self) -> (usize, usize, usize) {
        self.dims
    }

    /// Extent of the slowest axis (`i`).
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Tensor3::<u8>::zeroed(2, 3, 4).d0(), 2);
    /// ```
    pub fn d0(&self) -> usize {
        self.dims.0
    }

    /// Extent of the middle axis (`j`).
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Tensor3::<u8>::zeroed(2, 3, 4).d1(), 3);
    /// ```
    pub fn d1(&self) -> usize {
        self.dims.1
    }

    /// Extent of the fastest axis (`k`).
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Tensor3::<u8>::zeroed(2, 3, 4).d2(), 4);
    /// ```
    pub fn d2(&self) -> usize {
        self.dims.2
    }

    /// Number of elements, `d0 * d1 * d2`.
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Tensor3::<u8>::zeroed(2, 3, 4).len(), 24);
    /// ```
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// Whether the tensor has no element.
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert!(Tensor3::<u8>::zeroed(2, 0, 4).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the host memory is page-locked.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let _maybe = Tensor3::<u8>::zeroed(1, 1, 1).is_pinned(); // true only with a CUDA device in use
    /// ```
    pub fn is_pinned(&self) -> bool {
        self.store.host_kind() == super::host::HostKind::Pinned
    }

    /// The elements (row-major) on the host, brought back from a device first where stale.
    ///
    /// # Errors
    /// The device backend's error if copying back fails; the tensor is unchanged.
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Tensor3::filled(1, 1, 2, 3u16).try_as_slice()?, &[3, 3]);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn try_as_slice(&self) -> Result<&[T]> {
        self.store.read(0..self.len())
    }

    /// The elements (row-major) on the host, brought back from a device first where stale.
    ///
    /// # Panics
    /// If copying back fails; see [`try_as_slice`](Tensor3::try_as_slice).
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Tensor3::from_fn(1, 2, 1, |_, j, _| j as u8).as_slice(), &[0, 1]);
    /// ```
    pub fn as_slice(&self) -> &[T] {
        self.try_as_slice().expect(COPY_BACK)
    }

    /// The elements on the host for reading and writing; device copies become invalid.
    ///
    /// # Errors
    /// The device backend's error if copying stale data back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut t = Tensor3::filled(1, 1, 2, 0i8);
    /// t.try_as_mut_slice()?[1] = -1;
    /// assert_eq!(t.as_slice(), &[0, -1]);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn try_as_mut_slice(&mut self) -> Result<&mut [T]> {
        let n = self.len();
        self.store.write(0..n)
    }

    /// The elements on the host for reading and writing; device copies become invalid.
    ///
    /// # Panics
    /// If copying back fails; see [`try_as_mut_slice`](Tensor3::try_as_mut_slice).
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut t: Tensor3<i32> = Tensor3::zeroed(2, 2, 2);
    /// t.as_mut_slice().fill(4);
    /// assert_eq!(t[(1, 1, 1)], 4);
    /// ```
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        self.try_as_mut_slice().expect(COPY_BACK)
    }

    /// A copy of the elements, row-major.
    ///
    /// # Panics
    /// As [`as_slice`](Tensor3::as_slice); [`try_to_vec`](Tensor3::try_to_vec) returns the
    /// error instead.
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Tensor3::filled(2, 1, 1, 5u8).to_vec(), vec![5, 5]);
    /// ```
    pub fn to_vec(&self) -> Vec<T> {
        self.try_to_vec().expect(COPY_BACK)
    }

    /// A copy of the elements in row-major order, or the device backend's error if copying
    /// back fails.
    ///
    /// # Errors
    /// As [`try_as_slice`](Tensor3::try_as_slice).
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Tensor3::filled(1, 2, 1, 5u8).try_to_vec()?, vec![5, 5]);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn try_to_vec(&self) -> Result<Vec<T>> {
        self.store.copy_out(0..self.len())
    }

    fn flat(&self, (i, j, k): (usize, usize, usize)) -> usize {
        let (d0, d1, d2) = self.dims;
        assert!(
            i < d0 && j < d1 && k < d2,
            "index ({i}, {j}, {k}) out of bounds for a {d0}x{d1}x{d2} tensor"
        );
        (i * d1 + j) * d2 + k
    }

    fn shape(&self) -> Shape {
        let (d0, d1, d2) = self.dims;
        Shape::Tensor3 { d0, d1, d2 }
    }
}

impl<T: DeviceType> Index<(usize, usize, usize)> for Tensor3<T> {
    type Output = T;
    /// Element `(i, j, k)` (if stale, the stale part of the 4096 elements around it is
    /// brought back with it).
    ///
    /// # Panics
    /// If an index is out of its extent, or if copying back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let t = Tensor3::from_fn(2, 2, 2, |i, j, k| (4 * i + 2 * j + k) as u32);
    /// assert_eq!(t[(1, 0, 1)], 5);
    /// ```
    #[inline]
    fn index(&self, ijk: (usize, usize, usize)) -> &T {
        let at = self.flat(ijk);
        self.store.element(at).expect(COPY_BACK)
    }
}

impl<T: DeviceType> IndexMut<(usize, usize, usize)> for Tensor3<T> {
    /// Element `(i, j, k)` for writing; its device copies become invalid.
    ///
    /// # Panics
    /// If an index is out of its extent, or if copying back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut t: Tensor3<f32> = Tensor3::zeroed(1, 1, 2);
    /// t[(0, 0, 1)] = 1.0;
    /// assert_eq!(t.as_slice(), &[0.0, 1.0]);
    /// ```
    #[inline]
    fn index_mut(&mut self, ijk: (usize, usize, usize)) -> &mut T {
        let at = self.flat(ijk);
        &mut self.store.write(at..at + 1).expect(COPY_BACK)[0]
    }
}

impl<T: DeviceType> Clone for Tensor3<T> {
    /// A new tensor with the current data (brought back from devices first), host only.
    ///
    /// # Panics
    /// If copying back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let a = Tensor3::filled(1, 1, 2, 1u8);
    /// let mut b = a.clone();
    /// b[(0, 0, 0)] = 2;
    /// assert_eq!((a[(0, 0, 0)], b[(0, 0, 0)]), (1, 2));
    /// ```
    fn clone(&self) -> Self {
        Tensor3 {
            store: self.store.try_clone().expect(COPY_BACK),
            dims: self.dims,
        }
    }
}

impl<T: DeviceType + fmt::Debug> fmt::Debug for Tensor3<T> {
    /// Formats as the list of planes of rows: `Tensor3(2x1x2, [[[1, 2]], [[3, 4]]])`.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let t = Tensor3::from_vec(2, 1, 2, vec![1, 2, 3, 4])?;
    /// assert_eq!(format!("{t:?}"), "Tensor3(2x1x2, [[[1, 2]], [[3, 4]]])");
    /// # Ok::<(), skel::Error>(())
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (d0, d1, d2) = self.dims;
        let s = match self.try_as_slice() {
            Ok(s) => s,
            Err(e) => return write!(f, "Tensor3({d0}x{d1}x{d2}, <copy-back failed: {e}>)"),
        };
        write!(f, "Tensor3({d0}x{d1}x{d2}, ")?;
        let plane = |i: usize| {
            let rows: Vec<&[T]> = (0..d1)
                .map(|j| &s[(i * d1 + j) * d2..(i * d1 + j + 1) * d2])
                .collect();
            rows
        };
        f.debug_list().entries((0..d0).map(plane)).finish()?;
        write!(f, ")")
    }
}

impl<T: DeviceType + PartialEq> PartialEq for Tensor3<T> {
    /// Same extents and element-wise equal host data.
    ///
    /// # Panics
    /// If copying back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let a = Tensor3::from_vec(1, 1, 2, vec![1, 2])?;
    /// assert_eq!(a, Tensor3::from_fn(1, 1, 2, |_, _, k| k as i32 + 1));
    /// assert_ne!(a, Tensor3::from_vec(1, 2, 1, vec![1, 2])?);
    /// # Ok::<(), skel::Error>(())
    /// ```
    fn eq(&self, other: &Self) -> bool {
        self.dims == other.dims && self.as_slice() == other.as_slice()
    }
}

impl<T: DeviceType> From<Tensor3<T>> for Vec<T> {
    /// The elements in row-major order.
    ///
    /// # Panics
    /// If copying back fails ([`Tensor3::try_to_vec`] returns the error instead).
    ///
    /// ```
    /// use skel::prelude::*;
    /// let v: Vec<u8> = Tensor3::filled(1, 2, 2, 3u8).into();
    /// assert_eq!(v, vec![3; 4]);
    /// ```
    fn from(t: Tensor3<T>) -> Vec<T> {
        t.to_vec()
    }
}

impl<T> super::sealed::Container for Tensor3<T> {}

impl<T: DeviceType> Input<T> for Tensor3<T> {
    fn arg(&self) -> Arg<'_, T> {
        Arg::new(&self.store, 0, self.shape())
    }
}

impl<T: DeviceType> Output<T> for Tensor3<T> {
    fn arg_mut(&mut self) -> ArgMut<'_, T> {
        let shape = self.shape();
        ArgMut::new(&mut self.store, 0, shape)
    }
}
