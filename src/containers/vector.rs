//! `Vector<T>` and its views (host-only placeholder until the containers work lands).

use std::ops::Range;

use super::{Arg, ArgMut, Input, Output, Shape};
use crate::DeviceType;

/// A 1D container.
#[derive(Clone, Debug, PartialEq)]
pub struct Vector<T> {
    data: Vec<T>,
}

impl<T: DeviceType> Vector<T> {
    /// From a `Vec`.
    pub fn from_vec(data: Vec<T>) -> Self {
        Vector { data }
    }
    /// `n` zeroes.
    pub fn zeroed(n: usize) -> Self
    where
        T: Default,
    {
        Vector { data: vec![T::default(); n] }
    }
    /// `n` copies of `value`.
    pub fn filled(n: usize, value: T) -> Self {
        Vector { data: vec![value; n] }
    }
    /// Element `i` is `f(i)`.
    pub fn from_fn(n: usize, f: impl FnMut(usize) -> T) -> Self {
        Vector { data: (0..n).map(f).collect() }
    }
    /// Length.
    pub fn len(&self) -> usize {
        self.data.len()
    }
    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
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
    /// A read view.
    pub fn view(&self, range: Range<usize>) -> VectorView<'_, T> {
        VectorView { data: &self.data[range] }
    }
    /// A write view.
    pub fn view_mut(&mut self, range: Range<usize>) -> VectorViewMut<'_, T> {
        VectorViewMut { data: &mut self.data[range] }
    }
}

impl<T: DeviceType> From<Vec<T>> for Vector<T> {
    fn from(v: Vec<T>) -> Self {
        Vector::from_vec(v)
    }
}

impl<T: DeviceType> std::ops::Index<usize> for Vector<T> {
    type Output = T;
    fn index(&self, i: usize) -> &T {
        &self.data[i]
    }
}

/// A read view.
pub struct VectorView<'a, T> {
    data: &'a [T],
}
/// A write view.
pub struct VectorViewMut<'a, T> {
    data: &'a mut [T],
}

impl<T: DeviceType> Input<T> for Vector<T> {
    fn arg(&self) -> Arg<'_, T> {
        Arg::new(&self.data, Shape::Vector(self.data.len()))
    }
}
impl<T: DeviceType> Output<T> for Vector<T> {
    fn arg_mut(&mut self) -> ArgMut<'_, T> {
        let n = self.data.len();
        ArgMut::new(&mut self.data, Shape::Vector(n))
    }
}
impl<T: DeviceType> Input<T> for VectorView<'_, T> {
    fn arg(&self) -> Arg<'_, T> {
        Arg::new(self.data, Shape::Vector(self.data.len()))
    }
}
impl<T: DeviceType> Output<T> for VectorViewMut<'_, T> {
    fn arg_mut(&mut self) -> ArgMut<'_, T> {
        let n = self.data.len();
        ArgMut::new(self.data, Shape::Vector(n))
    }
}
