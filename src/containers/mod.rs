//! Smart containers: [`Vector`], [`Matrix`] and their views.
//!
//! Skeletons never see a container directly: they take anything that is an [`Input`] or an
//! [`Output`], which hands the backend an [`Arg`] / [`ArgMut`]: the range of one container's
//! storage the call touches plus its shape. Backends reach host memory through
//! `Arg::host` / `ArgMut::host_mut` / `ArgMut::host_overwrite`, which keep the coherence state
//! of the container right (bring stale ranges back, invalidate other locations).

mod vector;
mod matrix;

pub use matrix::Matrix;
pub use vector::{Vector, VectorView, VectorViewMut};

use std::fmt;

use crate::{DeviceType, Result};

/// The shape of an operand, as skeletons check and report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Shape {
    /// A vector (or vector view) of this length.
    Vector(usize),
    /// A row-major matrix.
    Matrix {
        /// Number of rows.
        rows: usize,
        /// Number of columns.
        cols: usize,
    },
}

impl Shape {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match *self {
            Shape::Vector(n) => n,
            Shape::Matrix { rows, cols } => rows * cols,
        }
    }

    /// Whether the shape holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Columns per row: the length for a vector.
    pub fn cols(&self) -> usize {
        match *self {
            Shape::Vector(n) => n,
            Shape::Matrix { cols, .. } => cols,
        }
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Shape::Vector(n) => write!(f, "vector of {n}"),
            Shape::Matrix { rows, cols } => write!(f, "{rows}x{cols} matrix"),
        }
    }
}

/// Anything a skeleton reads: `Vector`, `Matrix`, or a view.
pub trait Input<T: DeviceType> {
    /// The range of storage this operand covers.
    fn arg(&self) -> Arg<'_, T>;
}

/// Anything a skeleton writes: `Vector`, `Matrix`, or a mutable view.
pub trait Output<T: DeviceType> {
    /// The range of storage this operand covers.
    fn arg_mut(&mut self) -> ArgMut<'_, T>;
}

/// A read operand handed to a backend.
pub struct Arg<'a, T> {
    data: &'a [T],
    shape: Shape,
}

impl<'a, T: DeviceType> Arg<'a, T> {
    pub(crate) fn new(data: &'a [T], shape: Shape) -> Self {
        Arg { data, shape }
    }

    /// The operand's shape.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// The elements on the host, brought back from a device first where stale.
    pub(crate) fn host(&self) -> Result<&'a [T]> {
        Ok(self.data)
    }
}

/// A write operand handed to a backend.
pub struct ArgMut<'a, T> {
    data: &'a mut [T],
    shape: Shape,
}

impl<'a, T: DeviceType> ArgMut<'a, T> {
    pub(crate) fn new(data: &'a mut [T], shape: Shape) -> Self {
        ArgMut { data, shape }
    }

    /// The operand's shape.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// The elements on the host, current (stale ranges brought back first); device copies
    /// of the range become invalid.
    pub(crate) fn host_mut(&mut self) -> Result<&mut [T]> {
        Ok(self.data)
    }

    /// The elements on the host for a call that overwrites all of them: nothing is brought
    /// back; device copies of the range become invalid.
    pub(crate) fn host_overwrite(&mut self) -> Result<&mut [T]> {
        Ok(self.data)
    }
}
