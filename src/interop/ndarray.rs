//! `Matrix` <-> `ndarray::Array2`, `Vector` <-> `ndarray::Array1` (feature `ndarray`).

use ::ndarray::{
    Array1, Array2, ArrayBase, ArrayRef1, ArrayRef2, ArrayView1, ArrayView2, ArrayViewMut1,
    ArrayViewMut2, Data, Ix1, Ix2,
};

use crate::{DeviceType, Error, Matrix, Result, Vector};

/// A view's shape disagreed with its slice: cannot happen for a container's own host copy,
/// but ndarray reports it as an error, so it stays one.
fn view_error(what: &str, e: ::ndarray::ShapeError) -> Error {
    Error::InvalidArgument(format!("{what}: {e}"))
}

#[cfg_attr(docsrs, doc(cfg(feature = "ndarray")))]
impl<T: DeviceType> Matrix<T> {
    /// A matrix holding the elements of any 2D array or view (`&Array2`, `&ArrayView2`, a
    /// slice of a bigger array, a transposed one), in row-major order: one pass that copies
    /// a standard-layout array as a block and gathers the others by stride.
    ///
    /// ```
    /// use ndarray::{array, s};
    /// use skel::Matrix;
    ///
    /// let a = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
    /// let m = Matrix::from_ndarray(&a);
    /// assert_eq!((m.rows(), m.cols(), m.to_vec()), (2, 3, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]));
    /// let t = Matrix::from_ndarray(&a.t());              // strided: gathered
    /// assert_eq!(t.row(0), &[1.0, 4.0]);
    /// let corner = Matrix::from_ndarray(&a.slice(s![.., 1..]));
    /// assert_eq!(corner.to_vec(), vec![2.0, 3.0, 5.0, 6.0]);
    /// ```
    pub fn from_ndarray(a: &ArrayRef2<T>) -> Self {
        let (rows, cols) = a.dim();
        match a.as_slice() {
            Some(s) => Matrix::from_fn(rows, cols, |r, c| s[r * cols + c]),
            None => Matrix::from_fn(rows, cols, |r, c| a[(r, c)]),
        }
    }

    /// A copy of the matrix as an owned `Array2` (the host copy is brought up to date
    /// first, as [`to_vec`](Matrix::to_vec) does).
    ///
    /// # Errors
    /// A device error while copying stale ranges back.
    ///
    /// ```
    /// use skel::Matrix;
    /// let m = Matrix::from_fn(2, 3, |r, c| (10 * r + c) as i32);
    /// let a = m.to_ndarray()?;
    /// assert_eq!(a, ndarray::array![[0, 1, 2], [10, 11, 12]]);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn to_ndarray(&self) -> Result<Array2<T>> {
        let data = self.try_as_slice()?.to_vec();
        Array2::from_shape_vec((self.rows(), self.cols()), data)
            .map_err(|e| view_error("Matrix::to_ndarray", e))
    }

    /// The host copy as an `ArrayView2`, without a copy (stale ranges are copied back from
    /// the device first).
    ///
    /// # Errors
    /// A device error while copying stale ranges back.
    ///
    /// ```
    /// use skel::Matrix;
    /// let m = Matrix::from_fn(2, 2, |r, c| (r + c) as f64);
    /// assert_eq!(m.as_ndarray()?.sum(), 4.0);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn as_ndarray(&self) -> Result<ArrayView2<'_, T>> {
        let shape = (self.rows(), self.cols());
        ArrayView2::from_shape(shape, self.try_as_slice()?)
            .map_err(|e| view_error("Matrix::as_ndarray", e))
    }

    /// The host copy as an `ArrayViewMut2`, without a copy; writing through it invalidates
    /// the device copies, as [`as_mut_slice`](Matrix::as_mut_slice) does.
    ///
    /// # Errors
    /// A device error while copying stale ranges back.
    ///
    /// ```
    /// use skel::Matrix;
    /// let mut m = Matrix::filled(2, 3, 0u32);
    /// m.as_ndarray_mut()?.column_mut(1).fill(7);
    /// assert_eq!(m.to_vec(), vec![0, 7, 0, 0, 7, 0]);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn as_ndarray_mut(&mut self) -> Result<ArrayViewMut2<'_, T>> {
        let shape = (self.rows(), self.cols());
        ArrayViewMut2::from_shape(shape, self.try_as_mut_slice()?)
            .map_err(|e| view_error("Matrix::as_ndarray_mut", e))
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "ndarray")))]
impl<T: DeviceType> Vector<T> {
    /// A vector holding the elements of any 1D array or view, in logical order (a
    /// contiguous one copied as a block, a strided or reversed one gathered).
    ///
    /// ```
    /// use ndarray::{array, s};
    /// use skel::Vector;
    /// let a = array![1u8, 2, 3, 4, 5];
    /// assert_eq!(Vector::from_ndarray(&a).to_vec(), vec![1, 2, 3, 4, 5]);
    /// assert_eq!(Vector::from_ndarray(&a.slice(s![..;-2])).to_vec(), vec![5, 3, 1]);
    /// ```
    pub fn from_ndarray(a: &ArrayRef1<T>) -> Self {
        match a.as_slice() {
            Some(s) => Vector::from(s),
            None => Vector::from_fn(a.len(), |i| a[i]),
        }
    }

    /// A copy of the vector as an owned `Array1`.
    ///
    /// # Errors
    /// A device error while copying stale ranges back.
    ///
    /// ```
    /// let v = skel::Vector::from(vec![1.5f32, 2.5]);
    /// assert_eq!(v.to_ndarray()?, ndarray::array![1.5, 2.5]);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn to_ndarray(&self) -> Result<Array1<T>> {
        Ok(Array1::from(self.try_as_slice()?.to_vec()))
    }

    /// The host copy as an `ArrayView1`, without a copy.
    ///
    /// # Errors
    /// A device error while copying stale ranges back.
    ///
    /// ```
    /// let v = skel::Vector::from(vec![1, 2, 3]);
    /// assert_eq!(v.as_ndarray()?.sum(), 6);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn as_ndarray(&self) -> Result<ArrayView1<'_, T>> {
        Ok(ArrayView1::from(self.try_as_slice()?))
    }

    /// The host copy as an `ArrayViewMut1`, without a copy; writing through it
    /// invalidates the device copies.
    ///
    /// # Errors
    /// A device error while copying stale ranges back.
    ///
    /// ```
    /// let mut v = skel::Vector::from(vec![1, 2, 3]);
    /// v.as_ndarray_mut()?.map_inplace(|x| *x *= 10);
    /// assert_eq!(v.to_vec(), vec![10, 20, 30]);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn as_ndarray_mut(&mut self) -> Result<ArrayViewMut1<'_, T>> {
        Ok(ArrayViewMut1::from(self.try_as_mut_slice()?))
    }
}

/// Same as [`Matrix::from_ndarray`]: `Matrix::from(array)` or `Matrix::from(&view)`.
///
/// ```
/// let m = skel::Matrix::from(ndarray::Array2::<f32>::zeros((3, 4)));
/// assert_eq!((m.rows(), m.cols()), (3, 4));
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "ndarray")))]
impl<T: DeviceType, S: Data<Elem = T>> From<ArrayBase<S, Ix2>> for Matrix<T> {
    fn from(a: ArrayBase<S, Ix2>) -> Self {
        Matrix::from_ndarray(&a)
    }
}

/// Same as [`Matrix::from_ndarray`].
#[cfg_attr(docsrs, doc(cfg(feature = "ndarray")))]
impl<T: DeviceType, S: Data<Elem = T>> From<&ArrayBase<S, Ix2>> for Matrix<T> {
    fn from(a: &ArrayBase<S, Ix2>) -> Self {
        Matrix::from_ndarray(a)
    }
}

/// Same as [`Vector::from_ndarray`]: `Vector::from(array)` or `Vector::from(&view)`.
///
/// ```
/// let v = skel::Vector::from(ndarray::Array1::from(vec![1u32, 2]));
/// assert_eq!(v.to_vec(), vec![1, 2]);
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "ndarray")))]
impl<T: DeviceType, S: Data<Elem = T>> From<ArrayBase<S, Ix1>> for Vector<T> {
    fn from(a: ArrayBase<S, Ix1>) -> Self {
        Vector::from_ndarray(&a)
    }
}

/// Same as [`Vector::from_ndarray`].
#[cfg_attr(docsrs, doc(cfg(feature = "ndarray")))]
impl<T: DeviceType, S: Data<Elem = T>> From<&ArrayBase<S, Ix1>> for Vector<T> {
    fn from(a: &ArrayBase<S, Ix1>) -> Self {
        Vector::from_ndarray(a)
    }
}

/// Same as [`Matrix::to_ndarray`]: `Array2::try_from(&matrix)?`.
///
/// ```
/// use skel::Matrix;
/// let a = ndarray::Array2::try_from(&Matrix::filled(2, 2, 1u8))?;
/// assert_eq!(a.shape(), &[2, 2]);
/// # Ok::<(), skel::Error>(())
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "ndarray")))]
impl<T: DeviceType> TryFrom<&Matrix<T>> for Array2<T> {
    type Error = Error;
    fn try_from(m: &Matrix<T>) -> Result<Self> {
        m.to_ndarray()
    }
}

/// Same as [`Vector::to_ndarray`]: `Array1::try_from(&vector)?`.
#[cfg_attr(docsrs, doc(cfg(feature = "ndarray")))]
impl<T: DeviceType> TryFrom<&Vector<T>> for Array1<T> {
    type Error = Error;
    fn try_from(v: &Vector<T>) -> Result<Self> {
        v.to_ndarray()
    }
}
