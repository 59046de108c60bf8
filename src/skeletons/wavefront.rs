//! Wavefront: a dynamic-programming sweep over a matrix in place, every cell from its
//! upper, left and upper-left neighbours (Needleman-Wunsch, Smith-Waterman, LCS, edit
//! distance, dynamic time warping).

use super::{check_arrays, common_options, uniforms_or_missing, Options};
use crate::backends;
use crate::containers::{Output, Shape};
use crate::plan::{self, ArgTuple};
use crate::userfn::{BindArrays, ContainerArgs, ElementwiseFn};
use crate::{DeviceType, Error, Result};

/// Fills a matrix cell by cell in dependence order:
/// `m[(i, j)] = f(m[(i-1, j)], m[(i, j-1)], m[(i-1, j-1)])` (up, left, diagonal) for every
/// `i >= 1` and `j >= 1`. Row 0 and column 0 are the boundary: the caller fills them and
/// the call never writes them.
///
/// The user function is an ordinary `#[userfn]` of three elements of the matrix's type,
/// returning that type. Like a Map's, it may take `#[index] (i, j): (usize, usize)` first
/// (the cell; a 1D `#[index]` is the flat position `i * cols + j`), container arguments
/// (`&[T]`, `Mat<T>`, bound with [`Wavefront::arrays`], read whole and never written) and
/// `#[uniform]` parameters last ([`Wavefront::uniforms`]). SkePU has no such skeleton;
/// this is the classic wavefront pattern, written as a skeleton call, so that a whole
/// sweep is one call instead of a call (or two) per row.
///
/// Every cell is `f` of the same three values on every backend, so every backend gives the
/// same bits (floats included) as the sequential loop
/// `for i in 1..rows { for j in 1..cols { .. } }` that the `cpu` backend runs. Rayon
/// computes tiles of 64 x 64 cells, the tiles of one anti-diagonal of tiles in parallel;
/// CUDA and OpenCL launch one kernel per anti-diagonal of tiles, a work-group per tile
/// that walks the tile's own anti-diagonals in local memory. The matrix stays where it is
/// computed, like any output; [`crate::Graph::record`] records a call like any other. On
/// CUDA a call runs on one device and one stream: `.devices(..)` and `.streams(..)` do not
/// split it, since every tile waits for the tiles above and left of it.
///
/// A matrix of fewer than two rows or columns has no cell to compute: the call does
/// nothing. The operand must be a [`crate::Matrix`] or a view of whole rows of one
/// ([`crate::Matrix::view_rows_mut`], whose own row 0 is then the boundary); anything else
/// is [`Error::ShapeMismatch`].
///
/// ```
/// use skel::prelude::*;
///
/// /// Needleman-Wunsch: the best score of aligning a[..i] with b[..j].
/// #[userfn]
/// fn nw(#[index] (i, j): (usize, usize), up: i32, left: i32, diag: i32,
///       a: &[i32], b: &[i32], #[uniform] gap: i32) -> i32 {
///     let hit = if a[i - 1] == b[j - 1] { 1 } else { -1 };
///     (diag + hit).max(up - gap).max(left - gap)
/// }
///
/// let a = Vector::from(vec![1, 2, 3, 4]);
/// let b = Vector::from(vec![1, 3, 4]);
/// let gap = 2;
/// // The boundary: aligning a prefix with nothing costs a gap per element.
/// let mut m = Matrix::from_fn(5, 4, |i, j| if i == 0 || j == 0 { -gap * (i + j) as i32 } else { 0 });
/// Wavefront::new(nw).arrays((&a, &b)).uniforms((gap,)).run(&mut m)?;
/// assert_eq!(m[(4, 3)], 1); // three matches, one gap
///
/// // Longest common subsequence, no index or arrays needed when the scores are inputs.
/// #[userfn]
/// fn lcs(#[index] (i, j): (usize, usize), up: u32, left: u32, diag: u32,
///        x: &[u8], y: &[u8]) -> u32 {
///     if x[i - 1] == y[j - 1] { diag + 1 } else { up.max(left) }
/// }
/// let (x, y) = (Vector::from(b"AGGTAB".to_vec()), Vector::from(b"GXTXAYB".to_vec()));
/// let mut t = Matrix::zeroed(x.len() + 1, y.len() + 1);
/// Wavefront::new(lcs).arrays((&x, &y)).backend(Backend::Rayon).run(&mut t)?;
/// assert_eq!(t[(6, 7)], 4); // "GTAB"
///
/// // A vector has no rows and columns: an error, not a guess.
/// let mut v = Vector::zeroed(12);
/// let err = Wavefront::new(lcs).arrays((&x, &y)).run(&mut v).unwrap_err();
/// assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
/// # Ok::<(), skel::Error>(())
/// ```
#[must_use = "a skeleton does nothing until its `run` method is called"]
#[derive(Clone, Copy, Debug)]
pub struct Wavefront<F: ElementwiseFn, A = ()> {
    f: F,
    uniforms: Option<F::Uniforms>,
    options: Options,
    arrays: A,
}

impl<F: ElementwiseFn> Wavefront<F> {
    /// A Wavefront of `f`, a function of the cell's upper, left and upper-left neighbours
    /// (in that order).
    pub fn new(f: F) -> Self {
        Wavefront {
            f,
            uniforms: None,
            options: Options::default(),
            arrays: (),
        }
    }
}

impl<F: ElementwiseFn, A> Wavefront<F, A> {
    /// Binds the container parameters (`Mat<T>`, `&[T]`), as a tuple of references in
    /// declaration order, as for [`crate::Map::arrays`]: every cell reads them whole
    /// (the two sequences of an alignment, a substitution matrix). A container of the
    /// wrong kind is a `ShapeMismatch` when the call runs.
    ///
    /// ```
    /// use skel::prelude::*;
    /// /// Edit distance with a substitution cost table `cost[x * 4 + y]`.
    /// #[userfn]
    /// fn edit(#[index] (i, j): (usize, usize), up: u32, left: u32, diag: u32,
    ///         s: &[u32], t: &[u32], cost: &[u32]) -> u32 {
    ///     (diag + cost[(s[i - 1] * 4 + t[j - 1]) as usize]).min(up + 1).min(left + 1)
    /// }
    /// let (s, t) = (Vector::from(vec![0u32, 1, 2]), Vector::from(vec![0u32, 2]));
    /// let cost = Vector::from_fn(16, |k| u32::from(k / 4 != k % 4));
    /// let mut d = Matrix::from_fn(4, 3, |i, j| (i + j) as u32 * u32::from(i == 0 || j == 0));
    /// Wavefront::new(edit).arrays((&s, &t, &cost)).run(&mut d)?;
    /// assert_eq!(d[(3, 2)], 1); // delete the 1
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn arrays<B: BindArrays<F::Arrays>>(self, arrays: B) -> Wavefront<F, B> {
        Wavefront {
            f: self.f,
            uniforms: self.uniforms,
            options: self.options,
            arrays,
        }
    }

    /// Binds the `#[uniform]` parameters, as a tuple in declaration order.
    pub fn uniforms(
        mut self,
        uniforms: <F::Uniforms as crate::userfn::UniformTuple>::User,
    ) -> Self {
        self.uniforms = Some(crate::userfn::UniformTuple::from_user(uniforms));
        self
    }

    common_options!();

    /// The user function.
    pub fn function(&self) -> F {
        self.f
    }

    /// Computes every cell `(i, j)`, `i >= 1`, `j >= 1`, of `m` in place, from its upper,
    /// left and upper-left neighbours; row 0 and column 0 are read, never written. `m` is
    /// a [`crate::Matrix`] or a view of whole rows of one.
    ///
    /// On a device the matrix is uploaded where stale and left there, as any output.
    /// A failed call (an `Err` from a checked user function) leaves `m` as it was.
    pub fn run<T: DeviceType>(&self, m: &mut impl Output<T>) -> Result<()>
    where
        F: ElementwiseFn<Elems = (T, T, T), Out = T>,
        A: BindArrays<F::Arrays>,
    {
        self.options.validate()?;
        let uniforms = &uniforms_or_missing(F::NAME, &self.uniforms, &self.options)?;
        let plan = plan::Wavefront::<(F, T)> {
            arrays: self.arrays.bind(),
            m: m.arg_mut(),
            uniforms,
        };
        backends::wavefront(self.options, plan, |plan| {
            check_arrays(
                "Wavefront",
                F::NAME,
                <F::Arrays as ContainerArgs>::KINDS,
                &plan.arrays.shapes(),
            )?;
            match plan.m.shape() {
                Shape::Matrix { .. } => Ok(()),
                other => Err(Error::shape(
                    format!("Wavefront matrix of `{}`", F::NAME),
                    "a matrix (or a view of whole rows of one)",
                    other,
                )),
            }
        })
    }
}
