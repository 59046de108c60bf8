//! Update modes of 2D stencils (SkePU's `UpdateMode`): which cells a sweep computes, and
//! the sweeps of an in-place update. The skeletons ask here; the backends only see the
//! cells of one sweep ([`crate::plan::Cells`]), so a 3D stencil can reuse the same logic
//! with `(i + j + k)` parity.

use crate::plan::Cells;
use crate::{Error, Result};

/// Which cells a 2D stencil updates, as SkePU's `UpdateMode`. Red cells are those with
/// `(i + j)` even, black ones those with `(i + j)` odd.
///
/// In place ([`crate::MapOverlap::run_in_place`]) each sweep computes its cells from the
/// matrix as the previous sweep left it, writing a new matrix that is then swapped in:
/// `Normal` is one sweep of every cell (from the old values, not Gauss-Seidel order),
/// `RedBlack` a red sweep then a black sweep (the black cells read the updated red ones).
///
/// ```
/// use skel::prelude::*;
/// #[userfn]
/// fn up(w: Window2<i32>) -> i32 { w[(0, 0)] + 1 }
/// let mut m = Matrix::<i32>::zeroed(3, 4);
/// MapOverlap::new(up, (0, 0)).update(Update::Red).backend(Backend::Cpu).run_in_place(&mut m)?;
/// assert_eq!(m.to_vec(), vec![1, 0, 1, 0, 0, 1, 0, 1, 1, 0, 1, 0]);
/// # Ok::<(), skel::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Update {
    /// Every cell, from the old values (the default).
    #[default]
    Normal,
    /// Only the red cells (`(i + j)` even).
    Red,
    /// Only the black cells (`(i + j)` odd).
    Black,
    /// In place: the red cells from the old values, then the black cells from the matrix
    /// with the red ones updated.
    RedBlack,
}

/// The parity of the cells each sweep of an in-place update computes (`None`: all).
pub(crate) fn sweeps(update: Update) -> Vec<Option<usize>> {
    match update {
        Update::Normal => vec![None],
        Update::Red => vec![Some(0)],
        Update::Black => vec![Some(1)],
        Update::RedBlack => vec![Some(0), Some(1)],
    }
}

/// The cells an out-of-place `run` computes: all, or those of one colour (the others are
/// left as they were). `RedBlack` reads cells another sweep writes: only in place.
pub(crate) fn cells_of_run<T, O>(update: Update) -> Result<Cells<T, O>> {
    match update {
        Update::Normal => Ok(Cells::all()),
        Update::Red | Update::Black => Ok(Cells {
            parity: Some(usize::from(update == Update::Black)),
            keep: None,
        }),
        Update::RedBlack => Err(Error::InvalidArgument(
            "MapOverlap: Update::RedBlack updates a matrix in place: call run_in_place(&mut m)"
                .into(),
        )),
    }
}

/// `Err` for an update mode on a 1D stencil (update modes are for 2D grids).
pub(crate) fn only_2d(update: Update) -> Result<()> {
    if update == Update::Normal {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "MapOverlap: Update::{update:?} applies to 2D stencils (Window2), not to 1D windows"
        )))
    }
}

/// The values an in-place sweep keeps for the cells it does not compute: the old ones, a
/// row at a time (one copy, not a call per element).
pub(crate) fn same<T: Copy>(old: &[T], new: &mut [T]) {
    new.copy_from_slice(old);
}
