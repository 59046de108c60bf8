//! The 3D window of a MapOverlap user function over a [`Tensor3`](crate::Tensor3).

use std::ops::Index;

use super::StencilFn;

/// A 3D stencil (`fn f(w: Window3<T>, #[uniform] ..) -> R`), for MapOverlap on a
/// [`Tensor3`](crate::Tensor3) (SkePU 3's `Region3D`).
pub trait Window3Fn: StencilFn<Radius = (usize, usize, usize)> {
    /// Calls the Rust body.
    fn apply(window: Window3<'_, Self::Elem>, uniforms: &Self::Uniforms) -> Self::Out;
}

/// The neighbourhood of one tensor element, indexed by `(di, dj, dk)` (offsets along the
/// slowest, middle and fastest axis), each within its radius.
///
/// ```
/// use skel::prelude::*;
/// // a 3x3x3 neighbourhood stored row-major: planes 9 apart, rows 3 apart
/// let data: Vec<i32> = (0..27).collect();
/// let w = Window3::new(&data, (9, 3), (1, 1, 1));
/// assert_eq!((w[(0, 0, 0)], w[(-1, 0, 0)], w[(1, 1, 1)]), (13, 4, 26));
/// assert_eq!(w.radius(), (1, 1, 1));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Window3<'a, T> {
    data: &'a [T],
    strides: (usize, usize),
    radius: (usize, usize, usize),
}

impl<'a, T> Window3<'a, T> {
    /// A window whose first element (offsets `(-r0, -r1, -r2)`) is `data[0]`, planes
    /// `strides.0` and rows `strides.1` apart, with radii `(r0, r1, r2)`.
    ///
    /// # Panics
    /// If `data` is too short to hold the window.
    #[inline(always)]
    pub fn new(data: &'a [T], strides: (usize, usize), radius: (usize, usize, usize)) -> Self {
        // Checked: [`Index`] relies on `needed` being the true count (see there).
        let needed = 2 * radius.0 as u128 * strides.0 as u128
            + 2 * radius.1 as u128 * strides.1 as u128
            + 2 * radius.2 as u128
            + 1;
        assert!(
            data.len() as u128 >= needed,
            "a window of radius {radius:?} with strides {strides:?} needs {needed} elements"
        );
        Window3 {
            data,
            strides,
            radius,
        }
    }

    /// The radii `(r0, r1, r2)`.
    #[inline(always)]
    pub fn radius(&self) -> (usize, usize, usize) {
        self.radius
    }
}

impl<T> Index<(isize, isize, isize)> for Window3<'_, T> {
    type Output = T;
    /// # Panics
    /// If an offset is outside the window's radius.
    #[inline(always)]
    fn index(&self, (di, dj, dk): (isize, isize, isize)) -> &T {
        let (r0, r1, r2) = (
            self.radius.0 as isize,
            self.radius.1 as isize,
            self.radius.2 as isize,
        );
        if di.abs() > r0 {
            crate::check::window_fault(di, self.radius.0);
        }
        if dj.abs() > r1 {
            crate::check::window_fault(dj, self.radius.1);
        }
        if dk.abs() > r2 {
            crate::check::window_fault(dk, self.radius.2);
        }
        // Within the radii `k < needed <= len` (`new`): the clamp moves no index but lets
        // LLVM drop the bounds check (as in `Window2`).
        let k = ((r0 + di) as usize) * self.strides.0
            + ((r1 + dj) as usize) * self.strides.1
            + (r2 + dk) as usize;
        &self.data[k.min(self.data.len().wrapping_sub(1))]
    }
}
