//! `Matrix<T>`: a row-major 2D smart container.

use std::fmt;
use std::ops::{Index, IndexMut, Range};

use super::host::HostBuf;
use super::store::Store;
use super::{Arg, ArgMut, Input, Output, Shape};
use crate::{DeviceType, Error, Result};

const COPY_BACK: &str = "skel: copying a matrix back from the device failed";

/// A row-major 2D smart container, coherent between host and devices like
/// [`Vector`](crate::Vector) (lazy copy-back of stale ranges only).
///
/// ```
/// use skel::prelude::*;
/// let mut m = Matrix::from_vec(2, 3, vec![1, 2, 3, 4, 5, 6])?;
/// assert_eq!((m.rows(), m.cols(), m.len()), (2, 3, 6));
/// assert_eq!(m[(1, 0)], 4);
/// m[(0, 2)] = 30;
/// assert_eq!(m.row(0), &[1, 2, 30]);
/// # Ok::<(), skel::Error>(())
/// ```
pub struct Matrix<T> {
    // Shared with the row views (`matrix_view.rs`).
    pub(super) store: Store<T>,
    pub(super) rows: usize,
    pub(super) cols: usize,
}

fn elements(rows: usize, cols: usize) -> usize {
    rows.checked_mul(cols)
        .unwrap_or_else(|| panic!("a {rows}x{cols} matrix has more elements than usize holds"))
}

impl<T: DeviceType> Matrix<T> {
    /// A `rows` x `cols` matrix from row-major `data`.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] if `data.len() != rows * cols`, naming both.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let m = Matrix::from_vec(2, 2, vec![1.0f32, 2.0, 3.0, 4.0])?;
    /// assert_eq!(m.row(1), &[3.0, 4.0]);
    /// let err = Matrix::from_vec(2, 3, vec![0u8; 5]).unwrap_err();
    /// assert!(matches!(err, Error::ShapeMismatch { .. }));
    /// assert!(err.to_string().contains("6 elements for a 2x3 matrix, got 5"), "{err}");
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn from_vec(rows: usize, cols: usize, data: Vec<T>) -> Result<Self> {
        let expected = match rows.checked_mul(cols) {
            Some(n) => n.to_string(),
            None => "more than usize::MAX".into(),
        };
        if rows.checked_mul(cols) != Some(data.len()) {
            return Err(Error::shape(
                "Matrix::from_vec",
                format!("{expected} elements for a {rows}x{cols} matrix"),
                data.len(),
            ));
        }
        Ok(Matrix {
            store: Store::new(HostBuf::from_slice_default(&data)),
            rows,
            cols,
        })
    }

    /// Element `(r, c)` is `f(r, c)`.
    ///
    /// # Panics
    /// If `rows * cols` overflows `usize`.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let m = Matrix::from_fn(2, 3, |r, c| (10 * r + c) as u32);
    /// assert_eq!(m.to_vec(), vec![0, 1, 2, 10, 11, 12]);
    /// ```
    pub fn from_fn(rows: usize, cols: usize, mut f: impl FnMut(usize, usize) -> T) -> Self {
        let n = elements(rows, cols);
        let buf = HostBuf::from_fn_default(n, |i| f(i / cols, i % cols));
        Matrix {
            store: Store::new(buf),
            rows,
            cols,
        }
    }

    /// Every element `value`.
    ///
    /// # Panics
    /// If `rows * cols` overflows `usize`.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let m = Matrix::filled(2, 2, 1.5f64);
    /// assert_eq!(m.to_vec(), vec![1.5; 4]);
    /// ```
    pub fn filled(rows: usize, cols: usize, value: T) -> Self {
        let buf = HostBuf::from_fn_default(elements(rows, cols), |_| value);
        Matrix {
            store: Store::new(buf),
            rows,
            cols,
        }
    }

    /// A `rows x cols` [`Vector::scratch`]: all-zero bits, pageable, untouched.
    pub(crate) fn scratch(rows: usize, cols: usize) -> Self {
        Matrix {
            store: Store::new(HostBuf::zeroed_pageable(elements(rows, cols))),
            rows,
            cols,
        }
    }

    /// Every element `T::default()` (zero for numbers). Where that value is all zero bits
    /// and host memory is pageable (no pinned allocator registered), the pages are left
    /// untouched until written, as with `vec![0; n]`: a call that then writes the matrix
    /// in parallel (an output) faults them in on every thread, rather than the caller
    /// filling it alone first.
    ///
    /// # Panics
    /// If `rows * cols` overflows `usize`.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let m: Matrix<f32> = Matrix::zeroed(2, 3);
    /// assert_eq!(m.as_slice(), &[0.0; 6]);
    /// ```
    pub fn zeroed(rows: usize, cols: usize) -> Self
    where
        T: Default,
    {
        let zero = T::default();
        let zero_bits = super::host::as_bytes(std::slice::from_ref(&zero))
            .iter()
            .all(|&b| b == 0);
        if zero_bits && super::host::HostKind::default_kind() == super::host::HostKind::Pageable {
            return Self::scratch(rows, cols);
        }
        Self::filled(rows, cols, zero)
    }

    /// Number of rows.
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Matrix::<u8>::zeroed(2, 3).rows(), 2);
    /// ```
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns.
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Matrix::<u8>::zeroed(2, 3).cols(), 3);
    /// ```
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Number of elements, `rows * cols`.
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Matrix::<u8>::zeroed(2, 3).len(), 6);
    /// ```
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// Whether the matrix has no element.
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert!(Matrix::<u8>::zeroed(0, 3).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the host memory is page-locked.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let m = Matrix::<u8>::zeroed(1, 1);
    /// let _maybe = m.is_pinned(); // true only when a CUDA device is in use
    /// ```
    pub fn is_pinned(&self) -> bool {
        self.store.host_kind() == super::host::HostKind::Pinned
    }

    /// The elements (row-major) on the host, brought back from a device first where stale.
    ///
    /// # Errors
    /// The device backend's error if copying back fails; the matrix is unchanged.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let m = Matrix::filled(1, 2, 3u16);
    /// assert_eq!(m.try_as_slice()?, &[3, 3]);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn try_as_slice(&self) -> Result<&[T]> {
        self.store.read(0..self.len())
    }

    /// The elements (row-major) on the host, brought back from a device first where stale.
    ///
    /// # Panics
    /// If copying back fails; see [`try_as_slice`](Matrix::try_as_slice).
    ///
    /// ```
    /// use skel::prelude::*;
    /// let m = Matrix::from_fn(2, 2, |r, c| (r + c) as u8);
    /// assert_eq!(m.as_slice(), &[0, 1, 1, 2]);
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
    /// let mut m = Matrix::filled(1, 2, 0i8);
    /// m.try_as_mut_slice()?[1] = -1;
    /// assert_eq!(m.as_slice(), &[0, -1]);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn try_as_mut_slice(&mut self) -> Result<&mut [T]> {
        let n = self.len();
        self.store.write(0..n)
    }

    /// The elements on the host for reading and writing; device copies become invalid.
    ///
    /// # Panics
    /// If copying back fails; see [`try_as_mut_slice`](Matrix::try_as_mut_slice).
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut m: Matrix<i32> = Matrix::zeroed(2, 2);
    /// m.as_mut_slice().fill(4);
    /// assert_eq!(m[(1, 1)], 4);
    /// ```
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        self.try_as_mut_slice().expect(COPY_BACK)
    }

    /// A copy of the elements, row-major.
    ///
    /// # Panics
    /// As [`as_slice`](Matrix::as_slice); [`try_to_vec`](Matrix::try_to_vec) returns the
    /// error instead.
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Matrix::filled(2, 1, 5u8).to_vec(), vec![5, 5]);
    /// ```
    pub fn to_vec(&self) -> Vec<T> {
        self.try_to_vec().expect(COPY_BACK)
    }

    /// A copy of the elements in row-major order, or the device backend's error if copying
    /// back fails.
    ///
    /// # Errors
    /// As [`try_as_slice`](Matrix::try_as_slice).
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Matrix::filled(1, 2, 5u8).try_to_vec()?, vec![5, 5]);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn try_to_vec(&self) -> Result<Vec<T>> {
        self.store.copy_out(0..self.len())
    }

    fn row_range(&self, i: usize) -> Range<usize> {
        assert!(
            i < self.rows,
            "row index {i} out of range for a {}x{} matrix",
            self.rows,
            self.cols
        );
        i * self.cols..(i + 1) * self.cols
    }

    /// Row `i` on the host (only that row's stale ranges are brought back).
    ///
    /// # Panics
    /// If `i >= rows`, or if copying back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let m = Matrix::from_fn(3, 2, |r, c| (r * 2 + c) as u32);
    /// assert_eq!(m.row(2), &[4, 5]);
    /// ```
    pub fn row(&self, i: usize) -> &[T] {
        self.store.read(self.row_range(i)).expect(COPY_BACK)
    }

    /// Row `i` on the host for writing; device copies of the row become invalid.
    ///
    /// # Panics
    /// If `i >= rows`, or if copying back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut m: Matrix<u8> = Matrix::zeroed(2, 2);
    /// m.row_mut(1).fill(1);
    /// assert_eq!(m.as_slice(), &[0, 0, 1, 1]);
    /// ```
    pub fn row_mut(&mut self, i: usize) -> &mut [T] {
        let range = self.row_range(i);
        self.store.write(range).expect(COPY_BACK)
    }

    fn flat(&self, (r, c): (usize, usize)) -> usize {
        assert!(
            r < self.rows && c < self.cols,
            "index ({r}, {c}) out of bounds for a {}x{} matrix",
            self.rows,
            self.cols
        );
        r * self.cols + c
    }
}

impl<T: DeviceType> Index<(usize, usize)> for Matrix<T> {
    type Output = T;
    /// Element at row `r`, column `c` (if stale, the stale part of the 4096 elements around it
    /// is brought back with it, so a loop over a device result copies block by block).
    ///
    /// # Panics
    /// If `r >= rows` or `c >= cols`, or if copying back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let m = Matrix::from_fn(2, 3, |r, c| (r * 3 + c) as u32);
    /// assert_eq!(m[(1, 2)], 5);
    /// ```
    #[inline]
    fn index(&self, rc: (usize, usize)) -> &T {
        let i = self.flat(rc);
        self.store.element(i).expect(COPY_BACK)
    }
}

impl<T: DeviceType> IndexMut<(usize, usize)> for Matrix<T> {
    /// Element at row `r`, column `c`, for writing; its device copies become invalid.
    ///
    /// # Panics
    /// If `r >= rows` or `c >= cols`, or if copying back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut m: Matrix<f32> = Matrix::zeroed(2, 2);
    /// m[(0, 1)] = 1.0;
    /// assert_eq!(m.as_slice(), &[0.0, 1.0, 0.0, 0.0]);
    /// ```
    #[inline]
    fn index_mut(&mut self, rc: (usize, usize)) -> &mut T {
        let i = self.flat(rc);
        &mut self.store.write(i..i + 1).expect(COPY_BACK)[0]
    }
}

impl<T: DeviceType> Clone for Matrix<T> {
    /// A new matrix with the current data (brought back from devices first), host only.
    ///
    /// # Panics
    /// If copying back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let a = Matrix::filled(1, 2, 1u8);
    /// let mut b = a.clone();
    /// b[(0, 0)] = 2;
    /// assert_eq!((a[(0, 0)], b[(0, 0)]), (1, 2));
    /// ```
    fn clone(&self) -> Self {
        Matrix {
            store: self.store.try_clone().expect(COPY_BACK),
            rows: self.rows,
            cols: self.cols,
        }
    }
}

impl<T: DeviceType + fmt::Debug> fmt::Debug for Matrix<T> {
    /// Formats as the list of rows: `Matrix(2x2, [[1, 2], [3, 4]])`.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let m = Matrix::from_vec(2, 2, vec![1, 2, 3, 4])?;
    /// assert_eq!(format!("{m:?}"), "Matrix(2x2, [[1, 2], [3, 4]])");
    /// # Ok::<(), skel::Error>(())
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.try_as_slice() {
            Ok(s) => {
                write!(f, "Matrix({}x{}, ", self.rows, self.cols)?;
                if self.cols == 0 {
                    f.debug_list()
                        .entries((0..self.rows).map(|_| &[] as &[T]))
                        .finish()?;
                } else {
                    f.debug_list().entries(s.chunks(self.cols)).finish()?;
                }
                write!(f, ")")
            }
            Err(e) => write!(
                f,
                "Matrix({}x{}, <copy-back failed: {e}>)",
                self.rows, self.cols
            ),
        }
    }
}

impl<T: DeviceType + PartialEq> PartialEq for Matrix<T> {
    /// Same shape and element-wise equal host data.
    ///
    /// # Panics
    /// If copying back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let a = Matrix::from_vec(1, 2, vec![1, 2])?;
    /// assert_eq!(a, Matrix::from_fn(1, 2, |_, c| c as i32 + 1));
    /// assert_ne!(a, Matrix::from_vec(2, 1, vec![1, 2])?);
    /// # Ok::<(), skel::Error>(())
    /// ```
    fn eq(&self, other: &Self) -> bool {
        self.rows == other.rows && self.cols == other.cols && self.as_slice() == other.as_slice()
    }
}

impl<T> super::sealed::Container for Matrix<T> {}

impl<T: DeviceType> Input<T> for Matrix<T> {
    fn arg(&self) -> Arg<'_, T> {
        Arg::new(
            &self.store,
            0,
            Shape::Matrix {
                rows: self.rows,
                cols: self.cols,
            },
        )
    }
}

impl<T: DeviceType> Output<T> for Matrix<T> {
    fn arg_mut(&mut self) -> ArgMut<'_, T> {
        let shape = Shape::Matrix {
            rows: self.rows,
            cols: self.cols,
        };
        ArgMut::new(&mut self.store, 0, shape)
    }
}
