//! Views of whole rows of a [`Matrix`]: `m.view_rows(a..b)` / `m.view_rows_mut(a..b)`.
//!
//! A view is a range of the matrix's own storage (rows are contiguous in row-major order),
//! so it has no coherence state of its own: a skeleton reading a view uploads only the
//! view's rows that are not valid on its device, one writing a view marks only those rows
//! stale elsewhere, and a device backend reads and writes the view inside the matrix's one
//! device buffer at its offset (no host round trip, no copy).

use std::fmt;
use std::ops::{Index, IndexMut, Range, RangeBounds};

use super::store::Store;
use super::{resolve_range, Arg, ArgMut, Input, Matrix, Output, Shape};
use crate::{DeviceType, Result};

const COPY_BACK: &str = "skel: copying a matrix view back from the device failed";

impl<T: DeviceType> Matrix<T> {
    /// A read view of rows `rows` (whole rows), accepted by skeletons wherever a `Matrix`
    /// is: a `rows.len() x cols` matrix. Only the view's rows are uploaded or brought back.
    ///
    /// # Panics
    /// If the range is out of bounds or decreasing, like slicing (and like
    /// [`Vector::view`](crate::Vector::view)).
    ///
    /// ```
    /// use skel::prelude::*;
    /// #[userfn]
    /// fn twice(x: u32) -> u32 { 2 * x }
    /// let m = Matrix::from_fn(4, 3, |r, c| (10 * r + c) as u32);
    /// let band = m.view_rows(1..3);
    /// assert_eq!((band.rows(), band.cols()), (2, 3));
    /// assert_eq!(band[(1, 2)], 22);
    /// let mut out = Matrix::zeroed(2, 3);
    /// Map::new(twice).run(&band, &mut out)?;
    /// assert_eq!(out.row(0), &[20, 22, 24]);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn view_rows(&self, rows: impl RangeBounds<usize>) -> MatrixView<'_, T> {
        let rows = resolve_range(rows, self.rows, "matrix row view");
        MatrixView {
            store: &self.store,
            rows,
            cols: self.cols,
        }
    }

    /// A write view of rows `rows` (whole rows), accepted by skeletons wherever a
    /// `&mut Matrix` is. Only the view's rows are computed and marked stale.
    ///
    /// # Panics
    /// If the range is out of bounds or decreasing, like slicing.
    ///
    /// ```
    /// use skel::prelude::*;
    /// #[userfn]
    /// fn inc(x: i32) -> i32 { x + 1 }
    /// let src = Matrix::filled(2, 2, 5i32);
    /// let mut m: Matrix<i32> = Matrix::zeroed(4, 2);
    /// Map::new(inc).run(&src, &mut m.view_rows_mut(2..))?;
    /// assert_eq!(m.to_vec(), vec![0, 0, 0, 0, 6, 6, 6, 6]);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn view_rows_mut(&mut self, rows: impl RangeBounds<usize>) -> MatrixViewMut<'_, T> {
        let rows = resolve_range(rows, self.rows, "matrix row view");
        MatrixViewMut {
            store: &mut self.store,
            rows,
            cols: self.cols,
        }
    }
}

/// A read view of whole rows of a [`Matrix`] (from [`Matrix::view_rows`]).
///
/// ```
/// use skel::prelude::*;
/// let m = Matrix::from_fn(3, 2, |r, c| (2 * r + c) as u8);
/// let v = m.view_rows(1..);
/// assert_eq!(v.as_slice(), &[2, 3, 4, 5]);
/// assert_eq!(v.row(1), &[4, 5]);
/// ```
pub struct MatrixView<'a, T> {
    store: &'a Store<T>,
    rows: Range<usize>,
    cols: usize,
}

impl<T> Clone for MatrixView<'_, T> {
    fn clone(&self) -> Self {
        MatrixView {
            store: self.store,
            rows: self.rows.clone(),
            cols: self.cols,
        }
    }
}

/// What both views share: their rows of the matrix and the flat range they cover.
fn elements(rows: &Range<usize>, cols: usize) -> Range<usize> {
    rows.start * cols..rows.end * cols
}

fn flat(rows: &Range<usize>, cols: usize, (r, c): (usize, usize)) -> usize {
    assert!(
        r < rows.len() && c < cols,
        "index ({r}, {c}) out of bounds for a {}x{cols} matrix view",
        rows.len()
    );
    (rows.start + r) * cols + c
}

fn row_of(rows: &Range<usize>, cols: usize, i: usize) -> Range<usize> {
    assert!(
        i < rows.len(),
        "row index {i} out of range for a {}x{cols} matrix view",
        rows.len()
    );
    let first = (rows.start + i) * cols;
    first..first + cols
}

fn shape(rows: &Range<usize>, cols: usize) -> Shape {
    Shape::Matrix {
        rows: rows.len(),
        cols,
    }
}

impl<'a, T: DeviceType> MatrixView<'a, T> {
    /// Number of rows in the view.
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Matrix::<u8>::zeroed(5, 2).view_rows(1..4).rows(), 3);
    /// ```
    pub fn rows(&self) -> usize {
        self.rows.len()
    }

    /// Number of columns (the matrix's).
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Matrix::<u8>::zeroed(5, 2).view_rows(1..4).cols(), 2);
    /// ```
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The matrix rows the view covers.
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Matrix::<u8>::zeroed(5, 2).view_rows(1..).row_range(), 1..5);
    /// ```
    pub fn row_range(&self) -> Range<usize> {
        self.rows.clone()
    }

    /// Number of elements, `rows * cols`.
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Matrix::<u8>::zeroed(5, 2).view_rows(1..4).len(), 6);
    /// ```
    pub fn len(&self) -> usize {
        self.rows.len() * self.cols
    }

    /// Whether the view has no element.
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert!(Matrix::<u8>::zeroed(5, 2).view_rows(2..2).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The view's elements (row-major) on the host; only its stale ranges are brought back.
    ///
    /// # Errors
    /// The device backend's error if copying back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let m = Matrix::from_fn(2, 2, |r, _| r as u8);
    /// assert_eq!(m.view_rows(1..).try_as_slice()?, &[1, 1]);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn try_as_slice(&self) -> Result<&'a [T]> {
        self.store.read(elements(&self.rows, self.cols))
    }

    /// The view's elements (row-major) on the host.
    ///
    /// # Panics
    /// If copying back fails; see [`try_as_slice`](MatrixView::try_as_slice).
    ///
    /// ```
    /// use skel::prelude::*;
    /// let m = Matrix::from_fn(2, 2, |r, _| r as u8);
    /// assert_eq!(m.view_rows(..1).as_slice(), &[0, 0]);
    /// ```
    pub fn as_slice(&self) -> &'a [T] {
        self.try_as_slice().expect(COPY_BACK)
    }

    /// A copy of the view's elements, row-major.
    ///
    /// # Panics
    /// As [`as_slice`](MatrixView::as_slice).
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Matrix::filled(3, 1, 4u8).view_rows(1..).to_vec(), vec![4, 4]);
    /// ```
    pub fn to_vec(&self) -> Vec<T> {
        self.as_slice().to_vec()
    }

    /// Row `i` of the view on the host.
    ///
    /// # Panics
    /// If `i >= rows`, or if copying back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let m = Matrix::from_fn(3, 2, |r, c| (2 * r + c) as u8);
    /// assert_eq!(m.view_rows(1..).row(0), &[2, 3]);
    /// ```
    pub fn row(&self, i: usize) -> &'a [T] {
        self.store
            .read(row_of(&self.rows, self.cols, i))
            .expect(COPY_BACK)
    }
}

impl<T: DeviceType> Index<(usize, usize)> for MatrixView<'_, T> {
    type Output = T;
    /// Element `(r, c)` of the view (row `r` of the view, not of the matrix).
    ///
    /// # Panics
    /// If `r >= rows` or `c >= cols`, or if copying back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let m = Matrix::from_fn(3, 2, |r, c| (2 * r + c) as u8);
    /// assert_eq!(m.view_rows(2..)[(0, 1)], 5);
    /// ```
    #[inline]
    fn index(&self, rc: (usize, usize)) -> &T {
        let at = flat(&self.rows, self.cols, rc);
        self.store.element(at).expect(COPY_BACK)
    }
}

impl<T: DeviceType + fmt::Debug> fmt::Debug for MatrixView<'_, T> {
    /// Formats like `MatrixView(rows 1..3 of 2 columns, [[2, 3], [4, 5]])`.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let m = Matrix::from_fn(3, 2, |r, c| (2 * r + c) as u8);
    /// assert_eq!(format!("{:?}", m.view_rows(1..)), "MatrixView(rows 1..3 of 2 columns, [[2, 3], [4, 5]])");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug_rows(f, "MatrixView", self.store, &self.rows, self.cols)
    }
}

fn debug_rows<T: DeviceType + fmt::Debug>(
    f: &mut fmt::Formatter<'_>,
    name: &str,
    store: &Store<T>,
    rows: &Range<usize>,
    cols: usize,
) -> fmt::Result {
    write!(f, "{name}(rows {rows:?} of {cols} columns, ")?;
    match store.read(elements(rows, cols)) {
        Ok(s) => {
            let row = |i: usize| &s[i * cols..(i + 1) * cols];
            f.debug_list().entries((0..rows.len()).map(row)).finish()?;
        }
        Err(e) => write!(f, "<copy-back failed: {e}>")?,
    }
    write!(f, ")")
}

impl<T> super::sealed::Container for MatrixView<'_, T> {}

impl<T: DeviceType> Input<T> for MatrixView<'_, T> {
    fn arg(&self) -> Arg<'_, T> {
        Arg::new(
            self.store,
            self.rows.start * self.cols,
            shape(&self.rows, self.cols),
        )
    }
}

/// A write view of whole rows of a [`Matrix`] (from [`Matrix::view_rows_mut`]).
///
/// ```
/// use skel::prelude::*;
/// let mut m: Matrix<u8> = Matrix::zeroed(3, 2);
/// let mut v = m.view_rows_mut(1..2);
/// v[(0, 1)] = 9;
/// v.row_mut(0)[0] = 8;
/// assert_eq!(m.to_vec(), vec![0, 0, 8, 9, 0, 0]);
/// ```
pub struct MatrixViewMut<'a, T> {
    store: &'a mut Store<T>,
    rows: Range<usize>,
    cols: usize,
}

impl<T: DeviceType> MatrixViewMut<'_, T> {
    /// Number of rows in the view.
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Matrix::<u8>::zeroed(5, 2).view_rows_mut(1..4).rows(), 3);
    /// ```
    pub fn rows(&self) -> usize {
        self.rows.len()
    }

    /// Number of columns (the matrix's).
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Matrix::<u8>::zeroed(5, 2).view_rows_mut(..).cols(), 2);
    /// ```
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The matrix rows the view covers.
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Matrix::<u8>::zeroed(5, 2).view_rows_mut(..=1).row_range(), 0..2);
    /// ```
    pub fn row_range(&self) -> Range<usize> {
        self.rows.clone()
    }

    /// Number of elements, `rows * cols`.
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Matrix::<u8>::zeroed(5, 2).view_rows_mut(1..4).len(), 6);
    /// ```
    pub fn len(&self) -> usize {
        self.rows.len() * self.cols
    }

    /// Whether the view has no element.
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert!(Matrix::<u8>::zeroed(5, 2).view_rows_mut(5..).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The view's elements (row-major) on the host.
    ///
    /// # Panics
    /// If copying back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut m = Matrix::from_fn(2, 2, |r, _| r as u8);
    /// assert_eq!(m.view_rows_mut(1..).as_slice(), &[1, 1]);
    /// ```
    pub fn as_slice(&self) -> &[T] {
        self.store
            .read(elements(&self.rows, self.cols))
            .expect(COPY_BACK)
    }

    /// The view's elements on the host for writing; device copies of its rows become
    /// invalid.
    ///
    /// # Errors
    /// The device backend's error if copying stale data back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut m: Matrix<u8> = Matrix::zeroed(2, 2);
    /// m.view_rows_mut(1..).try_as_mut_slice()?.fill(3);
    /// assert_eq!(m.to_vec(), vec![0, 0, 3, 3]);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn try_as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.store.write(elements(&self.rows, self.cols))
    }

    /// The view's elements on the host for writing; device copies of its rows become
    /// invalid.
    ///
    /// # Panics
    /// If copying back fails; see [`try_as_mut_slice`](MatrixViewMut::try_as_mut_slice).
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut m: Matrix<u8> = Matrix::zeroed(2, 2);
    /// m.view_rows_mut(..1).as_mut_slice().fill(1);
    /// assert_eq!(m.to_vec(), vec![1, 1, 0, 0]);
    /// ```
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        self.try_as_mut_slice().expect(COPY_BACK)
    }

    /// A copy of the view's elements, row-major.
    ///
    /// # Panics
    /// If copying back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut m = Matrix::filled(3, 1, 4u8);
    /// assert_eq!(m.view_rows_mut(2..).to_vec(), vec![4]);
    /// ```
    pub fn to_vec(&self) -> Vec<T> {
        self.as_slice().to_vec()
    }

    /// Row `i` of the view on the host, for writing.
    ///
    /// # Panics
    /// If `i >= rows`, or if copying back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut m: Matrix<u8> = Matrix::zeroed(3, 2);
    /// m.view_rows_mut(1..).row_mut(1).fill(7);
    /// assert_eq!(m.row(2), &[7, 7]);
    /// ```
    pub fn row_mut(&mut self, i: usize) -> &mut [T] {
        let range = row_of(&self.rows, self.cols, i);
        self.store.write(range).expect(COPY_BACK)
    }
}

impl<T: DeviceType> Index<(usize, usize)> for MatrixViewMut<'_, T> {
    type Output = T;
    /// Element `(r, c)` of the view.
    ///
    /// # Panics
    /// If `r >= rows` or `c >= cols`, or if copying back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut m = Matrix::from_fn(3, 2, |r, c| (2 * r + c) as u8);
    /// assert_eq!(m.view_rows_mut(1..)[(1, 0)], 4);
    /// ```
    #[inline]
    fn index(&self, rc: (usize, usize)) -> &T {
        let at = flat(&self.rows, self.cols, rc);
        self.store.element(at).expect(COPY_BACK)
    }
}

impl<T: DeviceType> IndexMut<(usize, usize)> for MatrixViewMut<'_, T> {
    /// Element `(r, c)` of the view, for writing; its device copies become invalid.
    ///
    /// # Panics
    /// If `r >= rows` or `c >= cols`, or if copying back fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut m: Matrix<u8> = Matrix::zeroed(2, 2);
    /// m.view_rows_mut(1..)[(0, 0)] = 1;
    /// assert_eq!(m.to_vec(), vec![0, 0, 1, 0]);
    /// ```
    #[inline]
    fn index_mut(&mut self, rc: (usize, usize)) -> &mut T {
        let at = flat(&self.rows, self.cols, rc);
        &mut self.store.write(at..at + 1).expect(COPY_BACK)[0]
    }
}

impl<T: DeviceType + fmt::Debug> fmt::Debug for MatrixViewMut<'_, T> {
    /// Formats like `MatrixViewMut(rows 0..1 of 2 columns, [[0, 1]])`.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut m = Matrix::from_fn(2, 2, |r, c| (2 * r + c) as u8);
    /// assert_eq!(format!("{:?}", m.view_rows_mut(..1)), "MatrixViewMut(rows 0..1 of 2 columns, [[0, 1]])");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug_rows(f, "MatrixViewMut", self.store, &self.rows, self.cols)
    }
}

impl<T> super::sealed::Container for MatrixViewMut<'_, T> {}

impl<T: DeviceType> Input<T> for MatrixViewMut<'_, T> {
    fn arg(&self) -> Arg<'_, T> {
        Arg::new(
            self.store,
            self.rows.start * self.cols,
            shape(&self.rows, self.cols),
        )
    }
}

impl<T: DeviceType> Output<T> for MatrixViewMut<'_, T> {
    fn arg_mut(&mut self) -> ArgMut<'_, T> {
        let offset = self.rows.start * self.cols;
        ArgMut::new(self.store, offset, shape(&self.rows, self.cols))
    }
}
