//! The standard-library conventions of `Vector` and `Matrix`: `Default`, `Display`,
//! iteration by value, by reference and by mutable reference, `Extend`, conversions from
//! arrays and rows, a row iterator.
//!
//! Every host access here goes through the coherence protocol like `as_slice` /
//! `as_mut_slice` do: an iterator over shared references first brings stale ranges back from
//! a device, one over mutable references also marks the device copies invalid, so a
//! skeleton called afterwards uploads what the loop wrote.

use std::fmt;

use super::{Arg, ArgMut, Matrix, Vector};
use crate::error::{Error, Result};
use crate::userfn::DeviceType;

impl<T: DeviceType> Default for Vector<T> {
    /// An empty vector.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let v: Vector<f32> = Vector::default();
    /// assert!(v.is_empty());
    /// ```
    fn default() -> Self {
        Vector::from_vec(Vec::new())
    }
}

impl<T: DeviceType> Vector<T> {
    /// An iterator over the host elements for writing; device copies become invalid (as
    /// [`as_mut_slice`](Vector::as_mut_slice), which it iterates).
    ///
    /// # Panics
    /// If copying stale data back from a device fails; see
    /// [`try_as_mut_slice`](Vector::try_as_mut_slice).
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut v = Vector::from(vec![1, 2, 3]);
    /// v.iter_mut().for_each(|x| *x *= 10);
    /// assert_eq!(v.as_slice(), &[10, 20, 30]);
    /// ```
    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, T> {
        self.as_mut_slice().iter_mut()
    }

    /// The elements as a `Vec` (brought back from a device first where stale). The host
    /// buffer is aligned (and maybe page-locked) memory that a `Vec` cannot own, so this
    /// copies once and frees the container.
    ///
    /// # Panics
    /// As [`to_vec`](Vector::to_vec); [`try_to_vec`](Vector::try_to_vec) returns the error
    /// instead.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let v = Vector::from_fn(3, |i| i as u8);
    /// assert_eq!(v.into_vec(), vec![0, 1, 2]);
    /// ```
    pub fn into_vec(self) -> Vec<T> {
        self.to_vec()
    }
}

impl<'a, T: DeviceType> IntoIterator for &'a mut Vector<T> {
    type Item = &'a mut T;
    type IntoIter = std::slice::IterMut<'a, T>;
    /// Iterates over the host elements for writing (see [`Vector::iter_mut`]).
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut v = Vector::from(vec![1, 2]);
    /// for x in &mut v { *x += 1; }
    /// assert_eq!(v.as_slice(), &[2, 3]);
    /// ```
    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}

impl<T: DeviceType> IntoIterator for Vector<T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;
    /// Iterates over the elements by value (see [`Vector::into_vec`]).
    ///
    /// ```
    /// use skel::prelude::*;
    /// let v = Vector::from(vec![1u32, 2, 3]);
    /// let doubled: Vec<u32> = v.into_iter().map(|x| 2 * x).collect();
    /// assert_eq!(doubled, vec![2, 4, 6]);
    /// ```
    fn into_iter(self) -> Self::IntoIter {
        self.into_vec().into_iter()
    }
}

impl<T: DeviceType> Extend<T> for Vector<T> {
    /// Appends the elements. A container's length is fixed once it has device copies, so
    /// this builds a new host buffer (the current data, brought back first, then the new
    /// elements) and drops every device copy: extend before handing the vector to a
    /// skeleton, not between calls in a loop.
    ///
    /// # Panics
    /// If copying stale data back from a device fails.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut v = Vector::from(vec![1, 2]);
    /// v.extend([3, 4]);
    /// v.extend(&[5]);
    /// assert_eq!(v.as_slice(), &[1, 2, 3, 4, 5]);
    /// ```
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        let mut data = self.to_vec();
        let before = data.len();
        data.extend(iter);
        if data.len() != before {
            *self = Vector::from_vec(data);
        }
    }
}

impl<'a, T: DeviceType> Extend<&'a T> for Vector<T> {
    /// Appends copies of the elements (as `Extend<T>`).
    fn extend<I: IntoIterator<Item = &'a T>>(&mut self, iter: I) {
        self.extend(iter.into_iter().copied());
    }
}

/// Writes `items` as `[a, b, c]`, each with the caller's format spec (`{:.2}` reaches
/// every element).
fn display_list<T: fmt::Display>(f: &mut fmt::Formatter<'_>, items: &[T]) -> fmt::Result {
    f.write_str("[")?;
    for (k, x) in items.iter().enumerate() {
        if k > 0 {
            f.write_str(", ")?;
        }
        fmt::Display::fmt(x, f)?;
    }
    f.write_str("]")
}

impl<T: DeviceType + fmt::Display> fmt::Display for Vector<T> {
    /// The host elements as `[1, 2, 3]` (brought back from a device first); a format spec
    /// applies to every element. A copy-back failure is printed in place of the elements.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let v = Vector::from(vec![1.0f32, 2.5]);
    /// assert_eq!(v.to_string(), "[1, 2.5]");
    /// assert_eq!(format!("{v:.2}"), "[1.00, 2.50]");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.try_as_slice() {
            Ok(s) => display_list(f, s),
            Err(e) => write!(f, "<{} elements, copy-back failed: {e}>", self.len()),
        }
    }
}

impl<T: DeviceType> Default for Matrix<T> {
    /// A 0 x 0 matrix.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let m: Matrix<u8> = Matrix::default();
    /// assert_eq!((m.rows(), m.cols()), (0, 0));
    /// ```
    fn default() -> Self {
        Matrix::from_fn(0, 0, |_, _| unreachable!("a 0x0 matrix has no elements"))
    }
}

impl<T: DeviceType + fmt::Display> fmt::Display for Matrix<T> {
    /// One row per line, each as `[1, 2, 3]` (brought back from a device first); a format
    /// spec applies to every element.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let m = Matrix::from([[1, 2], [3, 4]]);
    /// assert_eq!(m.to_string(), "[1, 2]\n[3, 4]");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Err(e) = self.try_as_slice() {
            return write!(
                f,
                "<{}x{} matrix, copy-back failed: {e}>",
                self.rows(),
                self.cols()
            );
        }
        for (r, row) in self.iter_rows().enumerate() {
            if r > 0 {
                f.write_str("\n")?;
            }
            display_list(f, row)?;
        }
        Ok(())
    }
}

impl<T: DeviceType> Matrix<T> {
    /// An iterator over the rows on the host, each a slice of `cols` elements (the whole
    /// matrix is brought back from a device first where stale, once).
    ///
    /// # Panics
    /// If copying back fails; see [`try_as_slice`](Matrix::try_as_slice).
    ///
    /// ```
    /// use skel::prelude::*;
    /// let m = Matrix::from_fn(3, 2, |r, c| (10 * r + c) as u32);
    /// let sums: Vec<u32> = m.iter_rows().map(|row| row.iter().sum()).collect();
    /// assert_eq!(sums, vec![1, 21, 41]);
    /// ```
    pub fn iter_rows(&self) -> Rows<'_, T> {
        Rows {
            data: self.as_slice(),
            cols: self.cols(),
            left: self.rows(),
        }
    }

    /// An iterator over the rows on the host for writing; device copies become invalid.
    ///
    /// # Panics
    /// If copying stale data back fails; see [`try_as_mut_slice`](Matrix::try_as_mut_slice).
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut m: Matrix<i32> = Matrix::zeroed(2, 3);
    /// for (r, row) in m.iter_rows_mut().enumerate() { row.fill(r as i32); }
    /// assert_eq!(m.as_slice(), &[0, 0, 0, 1, 1, 1]);
    /// ```
    pub fn iter_rows_mut(&mut self) -> RowsMut<'_, T> {
        let (cols, left) = (self.cols(), self.rows());
        RowsMut {
            data: self.as_mut_slice(),
            cols,
            left,
        }
    }

    /// An iterator over the elements in row-major order, on the host.
    ///
    /// # Panics
    /// As [`as_slice`](Matrix::as_slice).
    ///
    /// ```
    /// use skel::prelude::*;
    /// let m = Matrix::from([[1, 2], [3, 4]]);
    /// assert_eq!(m.iter().max(), Some(&4));
    /// ```
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.as_slice().iter()
    }

    /// An iterator over the elements in row-major order for writing; device copies become
    /// invalid.
    ///
    /// # Panics
    /// As [`as_mut_slice`](Matrix::as_mut_slice).
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut m = Matrix::from([[1, 2], [3, 4]]);
    /// m.iter_mut().for_each(|x| *x = -*x);
    /// assert_eq!(m.row(1), &[-3, -4]);
    /// ```
    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, T> {
        self.as_mut_slice().iter_mut()
    }

    /// The elements in row-major order as a `Vec` (one copy, as [`Vector::into_vec`]).
    ///
    /// # Panics
    /// As [`to_vec`](Matrix::to_vec).
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(Matrix::from([[1, 2], [3, 4]]).into_vec(), vec![1, 2, 3, 4]);
    /// ```
    pub fn into_vec(self) -> Vec<T> {
        self.to_vec()
    }

    /// A matrix from its rows, each given as anything iterable; every row must have the
    /// length of the first.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] naming the first row whose length differs.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let m = Matrix::from_rows(vec![vec![1, 2, 3], vec![4, 5, 6]])?;
    /// assert_eq!((m.rows(), m.cols()), (2, 3));
    /// let err = Matrix::from_rows([vec![1, 2], vec![3]]).unwrap_err();
    /// assert!(err.to_string().contains("row 1"), "{err}");
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn from_rows<R, I>(rows: R) -> Result<Self>
    where
        R: IntoIterator<Item = I>,
        I: IntoIterator<Item = T>,
    {
        let mut data = Vec::new();
        let (mut n_rows, mut cols) = (0usize, 0usize);
        for row in rows {
            let before = data.len();
            data.extend(row);
            let len = data.len() - before;
            if n_rows == 0 {
                cols = len;
            } else if len != cols {
                return Err(Error::shape(
                    format!("Matrix::from_rows, row {n_rows}"),
                    format!("{cols} elements (the length of row 0)"),
                    len,
                ));
            }
            n_rows += 1;
        }
        Matrix::from_vec(n_rows, cols, data)
    }
}

impl<T: DeviceType, const C: usize, const R: usize> From<[[T; C]; R]> for Matrix<T> {
    /// An `R x C` matrix from an array of rows.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let m = Matrix::from([[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]]);
    /// assert_eq!((m.rows(), m.cols()), (2, 3));
    /// assert_eq!(m[(1, 2)], 6.0);
    /// ```
    fn from(rows: [[T; C]; R]) -> Self {
        Matrix::from_fn(R, C, |r, c| rows[r][c])
    }
}

impl<T: DeviceType, const C: usize> From<Vec<[T; C]>> for Matrix<T> {
    /// A `len x C` matrix, one row per array.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let m = Matrix::from(vec![[1u8, 2], [3, 4], [5, 6]]);
    /// assert_eq!(m.row(2), &[5, 6]);
    /// ```
    fn from(rows: Vec<[T; C]>) -> Self {
        Matrix::from_fn(rows.len(), C, |r, c| rows[r][c])
    }
}

impl<T: DeviceType, const C: usize> FromIterator<[T; C]> for Matrix<T> {
    /// Collects rows of `C` elements into a matrix.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let m: Matrix<u32> = (0..3u32).map(|r| [r, r * r]).collect();
    /// assert_eq!(m.to_vec(), vec![0, 0, 1, 1, 2, 4]);
    /// ```
    fn from_iter<I: IntoIterator<Item = [T; C]>>(iter: I) -> Self {
        Matrix::from(iter.into_iter().collect::<Vec<_>>())
    }
}

impl<T: DeviceType> TryFrom<Vec<Vec<T>>> for Matrix<T> {
    type Error = Error;
    /// A matrix from a `Vec` of rows (see [`Matrix::from_rows`]).
    ///
    /// ```
    /// use skel::prelude::*;
    /// let m = Matrix::try_from(vec![vec![1, 2], vec![3, 4]])?;
    /// assert_eq!(m.row(1), &[3, 4]);
    /// assert!(Matrix::try_from(vec![vec![1, 2], vec![3]]).is_err());
    /// # Ok::<(), skel::Error>(())
    /// ```
    fn try_from(rows: Vec<Vec<T>>) -> Result<Self> {
        Matrix::from_rows(rows)
    }
}

impl<T: DeviceType> From<Vector<T>> for Matrix<T> {
    /// A `1 x n` matrix holding the vector's elements (one copy).
    ///
    /// ```
    /// use skel::prelude::*;
    /// let m = Matrix::from(Vector::from(vec![1, 2, 3]));
    /// assert_eq!((m.rows(), m.cols()), (1, 3));
    /// ```
    fn from(v: Vector<T>) -> Self {
        let n = v.len();
        let data = v.into_vec();
        Matrix::from_fn(1, n, |_, c| data[c])
    }
}

impl<'a, T: DeviceType> IntoIterator for &'a Matrix<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    /// Iterates over the elements in row-major order (see [`Matrix::iter`]).
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a, T: DeviceType> IntoIterator for &'a mut Matrix<T> {
    type Item = &'a mut T;
    type IntoIter = std::slice::IterMut<'a, T>;
    /// Iterates over the elements in row-major order for writing (see [`Matrix::iter_mut`]).
    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}

/// The rows of a [`Matrix`] on the host, from [`Matrix::iter_rows`].
#[derive(Debug, Clone)]
pub struct Rows<'a, T> {
    data: &'a [T],
    cols: usize,
    left: usize,
}

impl<'a, T> Iterator for Rows<'a, T> {
    type Item = &'a [T];
    fn next(&mut self) -> Option<&'a [T]> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let (row, rest) = self.data.split_at(self.cols);
        self.data = rest;
        Some(row)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<T> ExactSizeIterator for Rows<'_, T> {}

impl<'a, T> DoubleEndedIterator for Rows<'a, T> {
    fn next_back(&mut self) -> Option<&'a [T]> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let (rest, row) = self.data.split_at(self.data.len() - self.cols);
        self.data = rest;
        Some(row)
    }
}

/// The rows of a [`Matrix`] on the host for writing, from [`Matrix::iter_rows_mut`].
#[derive(Debug)]
pub struct RowsMut<'a, T> {
    data: &'a mut [T],
    cols: usize,
    left: usize,
}

impl<'a, T> Iterator for RowsMut<'a, T> {
    type Item = &'a mut [T];
    fn next(&mut self) -> Option<&'a mut [T]> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let (row, rest) = std::mem::take(&mut self.data).split_at_mut(self.cols);
        self.data = rest;
        Some(row)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<T> ExactSizeIterator for RowsMut<'_, T> {}

impl<T> fmt::Debug for Arg<'_, T> {
    /// Where the operand starts in its container and its shape (not the data, which may
    /// live on a device).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Arg")
            .field("offset", &self.offset)
            .field("shape", &self.shape)
            .finish_non_exhaustive()
    }
}

impl<T> fmt::Debug for ArgMut<'_, T> {
    /// As `Arg`'s.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArgMut")
            .field("offset", &self.offset)
            .field("shape", &self.shape)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rust API Guidelines C-SEND-SYNC: what a user moves between threads (a pipeline's
    /// stages, a farm's workers) can be moved; a change that made one of these `!Send` or
    /// `!Sync` fails to compile here.
    #[test]
    fn public_types_are_send_and_sync() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Vector<f32>>();
        send_sync::<Matrix<crate::interop::Rgb8>>();
        send_sync::<super::super::VectorView<'static, u8>>();
        send_sync::<super::super::VectorViewMut<'static, u8>>();
        send_sync::<Rows<'static, f64>>();
        send_sync::<RowsMut<'static, f64>>();
        send_sync::<Error>();
        send_sync::<crate::Backend>();
        send_sync::<crate::Edge>();
        send_sync::<crate::stream::Report<Vector<f32>>>();
        fn error_trait<E: std::error::Error + Send + Sync + 'static>() {}
        error_trait::<Error>();
    }

    #[test]
    fn rows_of_a_matrix_without_columns_are_empty_slices() {
        let m: Matrix<u8> = Matrix::zeroed(3, 0);
        assert_eq!(m.iter_rows().len(), 3);
        assert!(m.iter_rows().all(|r| r.is_empty()));
        assert_eq!(m.to_string(), "[]\n[]\n[]");
        let mut m = m;
        assert_eq!(m.iter_rows_mut().count(), 3);
    }

    #[test]
    fn rows_from_both_ends_meet() {
        let m = Matrix::from([[1, 2], [3, 4], [5, 6]]);
        let mut it = m.iter_rows();
        assert_eq!(it.next_back(), Some(&[5, 6][..]));
        assert_eq!(it.next(), Some(&[1, 2][..]));
        assert_eq!(it.next_back(), Some(&[3, 4][..]));
        assert_eq!((it.next(), it.next_back()), (None, None));
    }

    #[test]
    fn extend_keeps_the_old_elements_and_an_empty_extend_changes_nothing() {
        let mut v: Vector<i32> = Vector::default();
        v.extend(std::iter::empty::<i32>());
        assert!(v.is_empty());
        v.extend(0..3);
        v.extend(&[7, 8]);
        assert_eq!(v.into_vec(), vec![0, 1, 2, 7, 8]);
    }

    #[test]
    fn from_rows_of_nothing_is_a_0x0_matrix_and_ragged_rows_are_an_error() {
        let m = Matrix::<f32>::from_rows(Vec::<Vec<f32>>::new()).unwrap();
        assert_eq!((m.rows(), m.cols()), (0, 0));
        let e = Matrix::from_rows([vec![1], vec![2], vec![3, 4]]).unwrap_err();
        assert!(matches!(e, Error::ShapeMismatch { .. }));
        assert!(e.to_string().contains("row 2"), "{e}");
        let m: Matrix<u8> = Vec::<[u8; 4]>::new().into_iter().collect();
        assert_eq!((m.rows(), m.cols()), (0, 4));
    }

    #[test]
    fn display_of_structs_is_not_needed_and_numbers_take_the_format_spec() {
        let m = Matrix::from([[1.5f64, -2.0]]);
        assert_eq!(format!("{m:>5}"), "[  1.5,    -2]");
        assert_eq!(Vector::<u8>::default().to_string(), "[]");
    }
}
