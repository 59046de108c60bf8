//! Smart containers: [`Vector`], [`Matrix`], [`Tensor3`] and their views.
//!
//! Skeletons never see a container directly: they take anything that is an [`Input`] or an
//! [`Output`], which hands the backend an [`Arg`] / [`ArgMut`] (see [`crate::plumbing`]): the
//! range of one container's storage the call touches plus its shape. Backends reach host memory through
//! `Arg::host` / `ArgMut::host_mut` / `ArgMut::host_overwrite`, which keep the coherence state
//! of the container right (bring stale ranges back, invalidate other locations).
//!
//! Inside (crate-internal):
//! - `host.rs`: `HostBuf`, aligned pageable or pinned host memory, and the
//!   pinned-allocator hook a CUDA backend registers;
//! - `coherence.rs`: per location (host, each device) the element ranges holding the newest
//!   data, and the events they wait on;
//! - `store.rs`: `Store<T>`, the host buffer + coherence state + per-device copies
//!   (`DeviceCopy`) that `Vector` and `Matrix` share;
//! - `vector.rs`, `matrix.rs`: the public containers.
//!
//! ```
//! use skel::prelude::*;
//! let mut v = Vector::from(vec![1, 2, 3]);
//! v[0] = 10;
//! assert_eq!(v.as_slice(), &[10, 2, 3]);
//! let m = Matrix::from_fn(2, 2, |r, c| (r * 2 + c) as u32);
//! assert_eq!(m.row(1), &[2, 3]);
//! ```

pub(crate) mod coherence;
pub(crate) mod host;
mod matrix;
mod matrix_view;
mod outputs;
#[cfg(feature = "serde")]
mod serde;
mod std_traits;
pub(crate) mod store;
mod tensor3;
#[cfg(test)]
mod tests;
mod vector;

pub use crate::skeletons::Source;
pub use matrix::Matrix;
pub use matrix_view::{MatrixView, MatrixViewMut};
pub use outputs::Outputs;
pub use std_traits::{Rows, RowsMut};
// Documented in `skel::plumbing`; this path stays for existing code.
#[doc(hidden)]
pub use outputs::{HostOut, OutArgs, OutCollector};
pub use tensor3::Tensor3;
pub use vector::{Vector, VectorView, VectorViewMut};

// The crate-internal API of device backends (CUDA/OpenCL).
#[allow(unused_imports)]
pub(crate) use coherence::{Coherence, Location, RangeSet, ReadyEvent};
#[allow(unused_imports)]
pub(crate) use host::{register_pinned_allocator, HostKind, PinnedAllocator};
#[allow(unused_imports)]
pub(crate) use store::{DeviceCopy, Shared, State};

use std::fmt;
use std::ops::{Bound, Range, RangeBounds};
use std::sync::MutexGuard;

use store::Store;

#[cfg(feature = "mpi")]
use crate::dist::Spread;
use crate::{DeviceType, Result};

/// Where a call keeps the whole copy of a distributed container it reads whole (a
/// container argument, MapArray's array) while it runs (see [`Input::gather_whole`]).
#[doc(hidden)]
pub type WholeCell = std::cell::OnceCell<std::rc::Rc<dyn std::any::Any>>;

/// One [`WholeCell`] per container parameter (a user function has at most four).
#[doc(hidden)]
pub type WholeCells = [WholeCell; 4];

/// The shape of an operand, as skeletons check and report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
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
    /// A row-major 3D tensor (`d2` fastest), see [`Tensor3`].
    Tensor3 {
        /// Extent of the slowest axis (planes).
        d0: usize,
        /// Extent of the middle axis (rows of a plane).
        d1: usize,
        /// Extent of the fastest axis (elements of a row).
        d2: usize,
    },
}

impl Shape {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match *self {
            Shape::Vector(n) => n,
            Shape::Matrix { rows, cols } => rows * cols,
            Shape::Tensor3 { d0, d1, d2 } => d0 * d1 * d2,
        }
    }

    /// Whether the shape holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `(rows, cols)`: a vector is one row; a tensor is `d0 * d1` rows of `d2` (its flat,
    /// row-major order, which is how the element-wise skeletons see it).
    ///
    /// ```
    /// use skel::containers::Shape;
    /// assert_eq!(Shape::Vector(5).dims(), (1, 5));
    /// assert_eq!(Shape::Matrix { rows: 2, cols: 3 }.dims(), (2, 3));
    /// assert_eq!(Shape::Tensor3 { d0: 2, d1: 3, d2: 4 }.dims(), (6, 4));
    /// ```
    pub fn dims(&self) -> (usize, usize) {
        match *self {
            Shape::Vector(n) => (1, n),
            Shape::Matrix { rows, cols } => (rows, cols),
            Shape::Tensor3 { d0, d1, d2 } => (d0 * d1, d2),
        }
    }

    /// Columns per row: the length for a vector.
    pub fn cols(&self) -> usize {
        match *self {
            Shape::Vector(n) => n,
            Shape::Matrix { cols, .. } => cols,
            Shape::Tensor3 { d2, .. } => d2,
        }
    }
}

impl Shape {
    /// Rows `rows` of the shape (elements `rows` of a vector, a one-row shape): the flat
    /// position of the first element and the part's shape, which keeps a matrix's columns.
    ///
    /// # Panics
    /// If `rows` reaches beyond the shape.
    pub(crate) fn rows_part(&self, rows: Range<usize>) -> (usize, Shape) {
        match *self {
            Shape::Vector(n) => {
                assert!(rows.end <= n, "rows beyond the operand");
                (rows.start, Shape::Vector(rows.len()))
            }
            Shape::Matrix { rows: r, cols } => {
                assert!(rows.end <= r, "rows beyond the operand");
                let part = Shape::Matrix {
                    rows: rows.len(),
                    cols,
                };
                (rows.start * cols, part)
            }
            // A part of a tensor call split by whole rows: rows of `d2`, flat.
            Shape::Tensor3 { d0, d1, d2 } => {
                assert!(rows.end <= d0 * d1, "rows beyond the operand");
                let part = Shape::Matrix {
                    rows: rows.len(),
                    cols: d2,
                };
                (rows.start * d2, part)
            }
        }
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Shape::Vector(n) => write!(f, "vector of {n}"),
            Shape::Matrix { rows, cols } => write!(f, "{rows}x{cols} matrix"),
            Shape::Tensor3 { d0, d1, d2 } => write!(f, "{d0}x{d1}x{d2} tensor"),
        }
    }
}

/// Keeps [`Input`] to this crate's containers, which lets every `Input` be a
/// [`Source`] while a lazy Map is a `Source` of its own kind.
pub(crate) mod sealed {
    /// Implemented by the containers and views of this crate only.
    pub trait Container {}
}

/// Anything a skeleton reads: `Vector`, `Matrix`, `Tensor3`, or a view. Implemented by this crate's
/// containers only; every `Input` is also a [`Source`], the wider kind of input that also
/// takes lazy Maps.
pub trait Input<T: DeviceType>: sealed::Container {
    /// The range of storage this operand covers.
    fn arg(&self) -> Arg<'_, T>;

    /// For a parameter that reads the whole container (a container argument, MapArray's
    /// array): a distributed container puts its whole copy in `slot`, all-gathered or
    /// cached (every rank calls it together); others have nothing to do.
    #[doc(hidden)]
    fn gather_whole(&self, _slot: &WholeCell) -> crate::Result<()> {
        Ok(())
    }

    /// The whole container after `gather_whole` filled `slot`: the copy there, or the
    /// operand itself.
    #[doc(hidden)]
    fn whole_arg<'k>(&'k self, _slot: &'k WholeCell) -> Arg<'k, T> {
        self.arg()
    }
}

/// Anything a skeleton writes: `Vector`, `Matrix`, or a mutable view.
pub trait Output<T: DeviceType> {
    /// The range of storage this operand covers.
    fn arg_mut(&mut self) -> ArgMut<'_, T>;
}

/// A read operand handed to a backend: a range of one container's elements and its shape.
///
/// ```
/// use skel::prelude::*;
/// use skel::containers::Input;
/// let v = Vector::from(vec![1.0f32; 8]);
/// assert_eq!(v.view(2..6).arg().shape().len(), 4);
/// ```
// Documented in `skel::plumbing` (re-exported there); this path stays for existing code.
#[doc(hidden)]
pub struct Arg<'a, T> {
    store: &'a Store<T>,
    offset: usize,
    shape: Shape,
    /// Where the block of a distributed container lies (`None`: an ordinary operand).
    #[cfg(feature = "mpi")]
    spread: Option<Spread>,
}

impl<T> Clone for Arg<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Arg<'_, T> {}

// The accessors beyond `shape`/`host` are for the device backends (next issue).
#[allow(dead_code)]
impl<'a, T: DeviceType> Arg<'a, T> {
    /// Elements `offset .. offset + shape.len()` of `store`.
    pub(crate) fn new(store: &'a Store<T>, offset: usize, shape: Shape) -> Self {
        assert!(
            offset + shape.len() <= store.len(),
            "operand outside its container"
        );
        Arg {
            store,
            offset,
            shape,
            #[cfg(feature = "mpi")]
            spread: None,
        }
    }

    /// The operand's shape.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// This operand as the local block of a container spread over processes.
    #[cfg(feature = "mpi")]
    pub(crate) fn spread_over(self, spread: Spread) -> Self {
        Arg {
            spread: Some(spread),
            ..self
        }
    }

    /// Where the operand lies among the processes of a distributed container; `None` for
    /// an ordinary one.
    #[cfg(feature = "mpi")]
    pub(crate) fn spread(&self) -> Option<Spread> {
        self.spread
    }

    /// The shape of the whole container: the global one for the block of a distributed
    /// container, else the operand's own.
    pub(crate) fn global_shape(&self) -> Shape {
        #[cfg(feature = "mpi")]
        if let Some(spread) = self.spread {
            return spread.global;
        }
        self.shape
    }

    /// Elements `range` of the operand, as an ordinary vector operand of their own.
    ///
    /// # Panics
    /// If `range` exceeds the operand.
    pub(crate) fn sub(&self, range: Range<usize>) -> Arg<'a, T> {
        assert!(
            range.end <= self.shape.len(),
            "sub-range beyond the operand"
        );
        Arg::new(
            self.store,
            self.offset + range.start,
            Shape::Vector(range.len()),
        )
    }

    /// Rows `rows` of the operand as an operand of their own that keeps a matrix's columns
    /// (see [`Shape::rows_part`]): a part of a call split by whole rows, whose 2D `#[index]`
    /// is right when the part's executor has the part's first flat position as its index
    /// base.
    pub(crate) fn rows(&self, rows: Range<usize>) -> Arg<'a, T> {
        let (first, shape) = self.shape.rows_part(rows);
        Arg::new(self.store, self.offset + first, shape)
    }

    /// The elements on the host, brought back from a device first where stale.
    pub(crate) fn host(&self) -> Result<&'a [T]> {
        self.store.read(self.range())
    }

    /// Number of elements of the whole container (device buffers cover all of it).
    pub(crate) fn full_len(&self) -> usize {
        self.store.len()
    }

    /// Index of the operand's first element in the container.
    pub(crate) fn offset(&self) -> usize {
        self.offset
    }

    /// The operand's elements as indices of the container: `offset .. offset + len`.
    pub(crate) fn range(&self) -> Range<usize> {
        self.offset..self.offset + self.shape.len()
    }

    /// The container's storage: `lock()` for the coherence state and device-copy slots,
    /// `bring_back`, `host_ptr`, `host_kind`. Through an `Arg` (a read), backends may only
    /// add valid ranges on devices (uploads); never write or invalidate the host.
    pub(crate) fn store(&self) -> &'a Store<T> {
        self.store
    }

    /// The container's coherence state and device copies, locked. Do not call `host()` while
    /// holding the guard (use `store().bring_back(&mut guard, range)`).
    pub(crate) fn lock(&self) -> MutexGuard<'a, State> {
        self.store.lock()
    }
}

/// A write operand handed to a backend: a range of one container's elements (borrowed
/// exclusively) and its shape.
///
/// ```
/// use skel::prelude::*;
/// use skel::containers::Output;
/// let mut m: Matrix<f32> = Matrix::zeroed(2, 3);
/// assert_eq!(m.arg_mut().shape().to_string(), "2x3 matrix");
/// ```
// Documented in `skel::plumbing` (re-exported there); this path stays for existing code.
#[doc(hidden)]
pub struct ArgMut<'a, T> {
    store: &'a mut Store<T>,
    offset: usize,
    shape: Shape,
    /// Where the block of a distributed container lies (`None`: an ordinary operand).
    #[cfg(feature = "mpi")]
    spread: Option<Spread>,
}

// The accessors beyond `shape`/`host_*` are for the device backends (next issue).
#[allow(dead_code)]
impl<'a, T: DeviceType> ArgMut<'a, T> {
    /// Elements `offset .. offset + shape.len()` of `store`.
    pub(crate) fn new(store: &'a mut Store<T>, offset: usize, shape: Shape) -> Self {
        assert!(
            offset + shape.len() <= store.len(),
            "operand outside its container"
        );
        // No host view outlives this borrow: a recorded graph that writes the store may
        // make its host elements stale again without running its closure.
        store.exclusive();
        ArgMut {
            store,
            offset,
            shape,
            #[cfg(feature = "mpi")]
            spread: None,
        }
    }

    /// The operand's shape.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// This operand as the local block of a container spread over processes.
    #[cfg(feature = "mpi")]
    pub(crate) fn spread_over(self, spread: Spread) -> Self {
        ArgMut {
            spread: Some(spread),
            ..self
        }
    }

    /// Where the operand lies among the processes (see [`Arg::spread`]).
    #[cfg(feature = "mpi")]
    pub(crate) fn spread(&self) -> Option<Spread> {
        self.spread
    }

    /// The shape of the whole container (see [`Arg::global_shape`]).
    pub(crate) fn global_shape(&self) -> Shape {
        #[cfg(feature = "mpi")]
        if let Some(spread) = self.spread {
            return spread.global;
        }
        self.shape
    }

    /// The elements on the host, current (stale ranges brought back first); device copies
    /// of the range become invalid.
    pub(crate) fn host_mut(&mut self) -> Result<&mut [T]> {
        crate::backends::device_graph::refuse("a call writes its result on the host");
        let range = self.range();
        self.store.write_lent(range)
    }

    /// The elements on the host for a call that overwrites all of them: nothing is brought
    /// back; device copies of the range become invalid.
    pub(crate) fn host_overwrite(&mut self) -> Result<&mut [T]> {
        crate::backends::device_graph::refuse("a call writes its result on the host");
        let range = self.range();
        self.store.overwrite_lent(range)
    }

    /// Number of elements of the whole container (device buffers cover all of it).
    pub(crate) fn full_len(&self) -> usize {
        self.store.len()
    }

    /// Index of the operand's first element in the container.
    pub(crate) fn offset(&self) -> usize {
        self.offset
    }

    /// The operand's elements as indices of the container: `offset .. offset + len`.
    pub(crate) fn range(&self) -> Range<usize> {
        self.offset..self.offset + self.shape.len()
    }

    /// The container's storage (see [`Arg::store`]). A backend that writes the range on a
    /// device records it with `lock().coherence.write(Location::Device(d), range, event)`.
    pub(crate) fn store(&self) -> &Store<T> {
        self.store
    }

    /// The container's coherence state and device copies, locked.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.store.lock()
    }

    /// The operand's first `len` elements as an operand of their own (a vector).
    ///
    /// # Panics
    /// If `len` exceeds the operand's length.
    pub(crate) fn head(&mut self, len: usize) -> ArgMut<'_, T> {
        assert!(len <= self.shape.len(), "head beyond the operand");
        ArgMut {
            store: self.store,
            offset: self.offset,
            shape: Shape::Vector(len),
            #[cfg(feature = "mpi")]
            spread: None,
        }
    }

    /// Elements `range` of the operand as an operand of their own (a vector).
    ///
    /// # Panics
    /// If `range` reaches beyond the operand.
    pub(crate) fn part(&mut self, range: Range<usize>) -> ArgMut<'_, T> {
        assert!(range.end <= self.shape.len(), "part beyond the operand");
        ArgMut {
            store: self.store,
            offset: self.offset + range.start,
            shape: Shape::Vector(range.len()),
            #[cfg(feature = "mpi")]
            spread: None,
        }
    }

    /// Rows `rows` of the operand as an operand of their own that keeps a matrix's columns
    /// (see [`Arg::rows`]).
    pub(crate) fn rows(&mut self, rows: Range<usize>) -> ArgMut<'_, T> {
        let (first, shape) = self.shape.rows_part(rows);
        ArgMut {
            store: self.store,
            offset: self.offset + first,
            shape,
            #[cfg(feature = "mpi")]
            spread: None,
        }
    }

    /// The same operand, borrowed for a shorter time.
    pub(crate) fn reborrow(&mut self) -> ArgMut<'_, T> {
        ArgMut {
            store: self.store,
            offset: self.offset,
            shape: self.shape,
            #[cfg(feature = "mpi")]
            spread: self.spread,
        }
    }

    /// The same range as a read operand, for a look at where it is valid (an operand that
    /// a call reads before it writes it, as a Wavefront's matrix).
    pub(crate) fn as_arg(&self) -> Arg<'_, T> {
        Arg::new(self.store, self.offset, self.shape)
    }
}

/// Resolves `range` against a container of `len` elements, panicking like slicing does.
pub(crate) fn resolve_range(
    range: impl RangeBounds<usize>,
    len: usize,
    what: &str,
) -> Range<usize> {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.checked_add(1).expect("range start overflows usize"),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.checked_add(1).expect("range end overflows usize"),
        Bound::Excluded(&e) => e,
        Bound::Unbounded => len,
    };
    assert!(
        start <= end,
        "{what} range starts at {start} but ends at {end}"
    );
    assert!(
        end <= len,
        "{what} range end {end} out of range for length {len}"
    );
    start..end
}
