//! `DistMatrix`: a matrix block-distributed over the ranks by rows.

use std::cell::RefCell;
use std::ops::Range;
use std::rc::Rc;

use super::vector::{gather_units, scatter_units};
use super::{Blocks, Spread, World};
use crate::containers::{Arg, ArgMut, Input, Output, Shape};
use crate::{DeviceType, Matrix, Result};

/// A `rows x cols` row-major matrix spread over the ranks of a [`World`] in blocks of whole
/// rows, in rank order (the first `rows % size` ranks hold one row more). Every rank holds
/// its rows as an ordinary [`Matrix`] ([`DistMatrix::local`]). Skeletons take it wherever
/// they take a `Matrix`; a 2D MapOverlap exchanges the halo rows with the neighbours.
///
/// ```
/// use skel::prelude::*;
/// use skel::dist::{self, DistMatrix};
/// #[userfn]
/// fn lap(w: Window2<i32>) -> i32 { w[(-1, 0)] + w[(1, 0)] + w[(0, -1)] + w[(0, 1)] - 4 * w[(0, 0)] }
/// let world = dist::init()?;
/// let m = DistMatrix::from_fn(&world, 6, 5, |r, c| (r * c) as i32);
/// let mut out = DistMatrix::zeroed(&world, 6, 5);
/// MapOverlap::new(lap, (1, 1)).edge(Edge::Duplicate).run(&m, &mut out)?;
/// # Ok::<(), skel::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct DistMatrix<T: DeviceType> {
    world: World,
    local: Matrix<T>,
    rows: usize,
    start: usize,
    /// The whole matrix as the last call that read it whole gathered it; `None` once the
    /// block was borrowed mutably.
    whole: RefCell<Option<Rc<Matrix<T>>>>,
}

impl<T: DeviceType> DistMatrix<T> {
    /// Element `(r, c)` is `f(r, c)`; each rank calls `f` only for the rows it holds.
    ///
    /// ```
    /// let world = skel::dist::init()?;
    /// let m = skel::dist::DistMatrix::from_fn(&world, 4, 3, |r, c| (r * 3 + c) as u32);
    /// assert_eq!(m.local().rows(), m.local_rows().len());
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn from_fn(
        world: &World,
        rows: usize,
        cols: usize,
        mut f: impl FnMut(usize, usize) -> T,
    ) -> Self {
        let range = Blocks::new(rows, world.size()).range(world.rank());
        let start = range.start;
        DistMatrix {
            world: world.clone(),
            local: Matrix::from_fn(range.len(), cols, |r, c| f(start + r, c)),
            rows,
            start,
            whole: RefCell::new(None),
        }
    }

    /// A `rows x cols` matrix of `value`.
    ///
    /// ```
    /// let world = skel::dist::init()?;
    /// let m = skel::dist::DistMatrix::filled(&world, 4, 3, 1u8);
    /// assert_eq!((m.rows(), m.cols()), (4, 3));
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn filled(world: &World, rows: usize, cols: usize, value: T) -> Self {
        Self::from_fn(world, rows, cols, |_, _| value)
    }

    /// A `rows x cols` matrix of `T::default()`.
    ///
    /// ```
    /// let world = skel::dist::init()?;
    /// let m: skel::dist::DistMatrix<f32> = skel::dist::DistMatrix::zeroed(&world, 4, 3);
    /// assert_eq!(m.cols(), 3);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn zeroed(world: &World, rows: usize, cols: usize) -> Self
    where
        T: Default,
    {
        Self::filled(world, rows, cols, T::default())
    }

    /// Spreads `data`, given on rank `root` (`None` on every other rank), over the ranks by
    /// rows.
    ///
    /// # Errors
    /// As [`DistVector::scatter`](super::DistVector::scatter).
    ///
    /// ```
    /// let world = skel::dist::init()?;
    /// let all = skel::Matrix::from_fn(5, 2, |r, c| (r + c) as i64);
    /// let m = skel::dist::DistMatrix::scatter(0, &world, (world.rank() == 0).then_some(&all))?;
    /// assert_eq!((m.rows(), m.cols()), (5, 2));
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn scatter(root: usize, world: &World, data: Option<&Matrix<T>>) -> Result<Self> {
        let data = match data {
            Some(m) => Some((m.try_as_slice()?, m.rows(), m.cols())),
            None => None,
        };
        let (local, rows, cols) = scatter_units(root, world, data)?;
        let range = Blocks::new(rows, world.size()).range(world.rank());
        Ok(DistMatrix {
            world: world.clone(),
            local: Matrix::from_vec(range.len(), cols, local)?,
            rows,
            start: range.start,
            whole: RefCell::new(None),
        })
    }

    /// The whole matrix on rank `root` (`Some` there, `None` on the others).
    ///
    /// ```
    /// let world = skel::dist::init()?;
    /// let m = skel::dist::DistMatrix::from_fn(&world, 3, 2, |r, c| (r * 2 + c) as u8);
    /// if let Some(all) = m.gather(0)? {
    ///     assert_eq!(all.to_vec(), vec![0, 1, 2, 3, 4, 5]);
    /// }
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn gather(&self, root: usize) -> Result<Option<Matrix<T>>> {
        let what = format!("DistMatrix::gather(root {root})");
        gather_units(&what, Some(root), self.arg(), self.local.try_as_slice())?
            .map(|all| Matrix::from_vec(self.rows, self.cols(), all))
            .transpose()
    }

    /// The whole matrix on every rank.
    ///
    /// ```
    /// let world = skel::dist::init()?;
    /// let m = skel::dist::DistMatrix::from_fn(&world, 3, 2, |r, c| (r * 2 + c) as u8);
    /// assert_eq!(m.all_gather()?.to_vec(), vec![0, 1, 2, 3, 4, 5]);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn all_gather(&self) -> Result<Matrix<T>> {
        let all = gather_units(
            "DistMatrix::all_gather",
            None,
            self.arg(),
            self.local.try_as_slice(),
        )?;
        Matrix::from_vec(self.rows, self.cols(), all.unwrap_or_default())
    }

    /// Global number of rows.
    ///
    /// ```
    /// let world = skel::dist::init()?;
    /// assert_eq!(skel::dist::DistMatrix::filled(&world, 4, 3, 0u8).rows(), 4);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns.
    ///
    /// ```
    /// let world = skel::dist::init()?;
    /// assert_eq!(skel::dist::DistMatrix::filled(&world, 4, 3, 0u8).cols(), 3);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn cols(&self) -> usize {
        self.local.cols()
    }

    /// The global rows this rank holds.
    ///
    /// ```
    /// let world = skel::dist::init()?;
    /// let m = skel::dist::DistMatrix::filled(&world, 4, 3, 0u8);
    /// assert_eq!(m.local_rows().len(), m.local().rows());
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn local_rows(&self) -> Range<usize> {
        self.start..self.start + self.local.rows()
    }

    /// This rank's rows.
    ///
    /// ```
    /// let world = skel::dist::init()?;
    /// let m = skel::dist::DistMatrix::filled(&world, 4, 3, 7u8);
    /// assert!(m.local().to_vec().iter().all(|&x| x == 7));
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn local(&self) -> &Matrix<T> {
        &self.local
    }

    /// This rank's rows, writable on the host, row-major (device copies become stale).
    ///
    /// ```
    /// let world = skel::dist::init()?;
    /// let mut m = skel::dist::DistMatrix::filled(&world, 4, 3, 0u8);
    /// m.local_mut()?.fill(1);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn local_mut(&mut self) -> Result<&mut [T]> {
        *self.whole.get_mut() = None;
        self.local.try_as_mut_slice()
    }

    /// The world the matrix is spread over.
    ///
    /// ```
    /// let world = skel::dist::init()?;
    /// let m = skel::dist::DistMatrix::filled(&world, 4, 3, 0u8);
    /// assert_eq!(m.world().rank(), world.rank());
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn world(&self) -> &World {
        &self.world
    }

    fn spread(&self) -> Spread {
        Spread {
            global: Shape::Matrix {
                rows: self.rows,
                cols: self.cols(),
            },
            start: self.start,
        }
    }

    fn assemble(&self, all: Vec<T>) -> Result<Matrix<T>> {
        Matrix::from_vec(self.rows, self.cols(), all)
    }
}

block_operand!(DistMatrix, Matrix);
