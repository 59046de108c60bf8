//! `Debug` for the plumbing types of lazy Maps, which hold closures' operands and trait
//! objects that have no useful `Debug` of their own: each prints what it is and its map.

use std::fmt;

use super::lazy::{LazyHost, LazyOp, Resolved};
use crate::userfn::{DeviceType, ElementwiseFn};

impl<T: DeviceType> fmt::Debug for Resolved<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resolved::Borrowed(a) => f.debug_tuple("Resolved::Borrowed").field(a).finish(),
            Resolved::Vector(v) => write!(f, "Resolved::Vector(<{} elements>)", v.len()),
            Resolved::Matrix(m) => write!(f, "Resolved::Matrix(<{}x{}>)", m.rows(), m.cols()),
            Resolved::Tensor3(t) => {
                let (d0, d1, d2) = t.dims();
                write!(f, "Resolved::Tensor3(<{d0}x{d1}x{d2}>)")
            }
        }
    }
}

impl<F: ElementwiseFn, I> fmt::Debug for LazyOp<'_, F, I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LazyOp")
            .field("map", &F::NAME)
            .finish_non_exhaustive()
    }
}

impl<F: ElementwiseFn, H> fmt::Debug for LazyHost<'_, F, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LazyHost")
            .field("map", &F::NAME)
            .finish_non_exhaustive()
    }
}
