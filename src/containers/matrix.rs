//! `Matrix<T>` (host-only placeholder until the containers work lands).

use super::{Arg, ArgMut, Input, Output, Shape};
use crate::{DeviceType, Error, Result};

/// A row-major 2D container.
#[derive(Clone, Debug, PartialEq)]
pub struct Matrix<T> {
    data: Vec<T>,
    rows: usize,
    cols: usize,
}

impl<T: DeviceType> Matrix<T> {
    /// From row-major data.
    pub fn from_vec(rows: usize, cols: usize, data: Vec<T>) -> Result<Self> {
        if data.len() != rows * cols {
            return Err(Error::shape("Matrix::from_vec", format!("{} elements", rows * cols), format!("{} elements", data.len())));
        }
        Ok(Matrix { data, rows, cols })
    }
    /// Zeroes.
    pub fn zeroed(rows: usize, cols: usize) -> Self
    where
        T: Default,
    {
        Matrix { data: vec![T::default(); rows * cols], rows, cols }
    }
    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Host slice.
    pub fn as_slice(&self) -> &[T] {
        &self.data
    }
    /// Host slice, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.data
    }
    /// A copy.
    pub fn to_vec(&self) -> Vec<T> {
        self.data.clone()
    }
}

impl<T: DeviceType> Input<T> for Matrix<T> {
    fn arg(&self) -> Arg<'_, T> {
        Arg::new(&self.data, Shape::Matrix { rows: self.rows, cols: self.cols })
    }
}
impl<T: DeviceType> Output<T> for Matrix<T> {
    fn arg_mut(&mut self) -> ArgMut<'_, T> {
        let shape = Shape::Matrix { rows: self.rows, cols: self.cols };
        ArgMut::new(&mut self.data, shape)
    }
}
