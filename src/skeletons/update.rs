//! Update modes of 2D stencils (SkePU's `UpdateMode`): which cells a sweep computes, and
//! the sweeps of an in-place update. The skeletons ask here; the backends only see the
//! cells of one sweep ([`crate::plan::Cells`]), so a 3D stencil can reuse the same logic
//! with `(i + j + k)` parity.

use std::any::Any;
use std::cell::RefCell;

use crate::plan::Cells;
use crate::{Backend, DeviceType, Error, Matrix, Result};

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

thread_local! {
    /// The scratch matrix the last in-place update on a host backend of this thread gave
    /// back (one, of any element type).
    static SCRATCH: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
}

/// Whether an in-place update on `backend` keeps its scratch matrix for the next one: on
/// the host backends only (a device copy would hold device memory).
fn host(backend: Option<Backend>) -> bool {
    matches!(backend, Some(Backend::Cpu | Backend::Rayon))
}

/// A `rows x cols` matrix for an in-place update to write its sweeps into: on a host
/// backend the one the last update of this thread gave back where it has that shape and
/// type (a loop of sweeps then allocates once: a fresh matrix costs a page fault per page,
/// measured at a third of a 512x512 red-black sweep), else a new one. Every sweep writes
/// all of it (`Cells::keep`), so what it held does not matter.
pub(crate) fn scratch<T: DeviceType + Default>(
    rows: usize,
    cols: usize,
    backend: Option<Backend>,
) -> Matrix<T> {
    let kept = if host(backend) {
        SCRATCH.with_borrow_mut(Option::take)
    } else {
        None
    };
    match kept.map(|b| b.downcast::<Matrix<T>>()) {
        Some(Ok(m)) if m.rows() == rows && m.cols() == cols => *m,
        _ => Matrix::zeroed(rows, cols),
    }
}

/// Gives `m` back after an in-place update on `backend`, for [`scratch`] to hand out again.
pub(crate) fn give_back<T: DeviceType>(m: Matrix<T>, backend: Option<Backend>) {
    if host(backend) {
        SCRATCH.with_borrow_mut(|s| *s = Some(Box::new(m)));
    }
}
