//! MapPairsReduce: MapPairs fused with a row-wise or column-wise Reduce, without the
//! intermediate matrix (SkePU 3's MapPairsReduce).

use super::map_pairs::pair_lengths;
use super::{
    check_arrays, check_index_dims, check_shape, common_options, every_fold_has_pairs,
    uniforms_or_missing, Options,
};
use crate::backends::{self, BinaryFn};
use crate::containers::{Input, Output, Shape};
use crate::plan::{self, ArgTuple, Axis};
use crate::userfn::{BindArrays, ContainerArgs, ElementwiseFn, IndexKind};
use crate::{DeviceType, Result};

/// Folds the pairs of MapPairs per row (`run_rows`: `per_v[i] = fold_j map(v[i], h[j])`)
/// or per column (`run_cols`: `per_h[j] = fold_i map(v[i], h[j])`).
///
/// Each fold starts from its first pair, like [`Reduce::run_rows`](crate::Reduce::run_rows),
/// and runs in order of `j` (rows) or `i` (columns); backends may regroup it, so `reduce`
/// must be associative (it need not be commutative). The map function may take
/// `#[index] (row, col)` and uniforms, as for [`MapPairs`](crate::MapPairs). The output has
/// one element per row (`v.len()`) or per column (`h.len()`), else
/// [`Error::ShapeMismatch`](crate::Error::ShapeMismatch); a fold over no pairs (an empty
/// `h` for rows) is an [`Error::InvalidArgument`](crate::Error::InvalidArgument). On error
/// nothing is written.
///
/// ```
/// use skel::prelude::*;
/// #[userfn]
/// fn abs_diff(p: f32, q: f32) -> f32 { (p - q).abs() }
/// #[userfn]
/// fn add(a: f32, b: f32) -> f32 { a + b }
///
/// let v = Vector::from(vec![0.0f32, 1.0, 4.0]);
/// let h = Vector::from(vec![1.0f32, 3.0]);
/// let mut per_v = Vector::zeroed(3);
/// let mut per_h = Vector::zeroed(2);
/// MapPairsReduce::new(abs_diff, add).run_rows(&v, &h, &mut per_v)?;
/// MapPairsReduce::new(abs_diff, add).run_cols(&v, &h, &mut per_h)?;
/// assert_eq!(per_v.to_vec(), vec![4.0, 2.0, 4.0]);
/// assert_eq!(per_h.to_vec(), vec![4.0, 6.0]);
/// assert!(MapPairsReduce::new(abs_diff, add).run_rows(&v, &h, &mut per_h).is_err());
/// # Ok::<(), skel::Error>(())
/// ```
#[must_use = "a skeleton does nothing until one of its `run` methods is called"]
#[derive(Clone, Copy, Debug)]
pub struct MapPairsReduce<M: ElementwiseFn, R: BinaryFn<M::Out>, C = ()> {
    map: M,
    reduce: R,
    uniforms: Option<M::Uniforms>,
    options: Options,
    arrays: C,
}

impl<M: ElementwiseFn, R: BinaryFn<M::Out>> MapPairsReduce<M, R> {
    /// A MapPairsReduce of `map` (a function of two elements) then `reduce`.
    pub fn new(map: M, reduce: R) -> Self {
        MapPairsReduce {
            map,
            reduce,
            uniforms: None,
            options: Options::default(),
            arrays: (),
        }
    }
}

impl<M: ElementwiseFn, R: BinaryFn<M::Out>, C> MapPairsReduce<M, R, C> {
    /// Binds the map function's container parameters (`Mat<T>`, `&[T]`), in declaration
    /// order, as for [`crate::Map::arrays`]: every pair reads them whole.
    ///
    /// ```
    /// use skel::prelude::*;
    /// #[userfn]
    /// fn cost(p: u32, q: u32, table: Mat<u32>) -> u32 { table[(p as usize, q as usize)] }
    /// #[userfn]
    /// fn add(a: u32, b: u32) -> u32 { a + b }
    ///
    /// let table = Matrix::from_fn(2, 3, |r, c| (10 * r + c) as u32);
    /// let (v, h) = (Vector::from(vec![0u32, 1]), Vector::from(vec![2u32, 0]));
    /// let mut per_v = Vector::zeroed(2);
    /// MapPairsReduce::new(cost, add).arrays((&table,)).run_rows(&v, &h, &mut per_v)?;
    /// assert_eq!(per_v.to_vec(), vec![2, 22]);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn arrays<B: BindArrays<M::Arrays>>(self, arrays: B) -> MapPairsReduce<M, R, B> {
        MapPairsReduce {
            map: self.map,
            reduce: self.reduce,
            uniforms: self.uniforms,
            options: self.options,
            arrays,
        }
    }

    /// Binds the map function's `#[uniform]` parameters.
    pub fn uniforms(
        mut self,
        uniforms: <M::Uniforms as crate::userfn::UniformTuple>::User,
    ) -> Self {
        self.uniforms = Some(crate::userfn::UniformTuple::from_user(uniforms));
        self
    }

    common_options!();

    /// The map and reduce functions.
    pub fn functions(&self) -> (M, R) {
        (self.map, self.reduce)
    }

    /// `out[i] = map(v[i], h[0]) ⊕ map(v[i], h[1]) ⊕ ...`; `out.len() == v.len()`.
    pub fn run_rows<A: DeviceType, B: DeviceType>(
        &self,
        v: &impl Input<A>,
        h: &impl Input<B>,
        out: &mut impl Output<M::Out>,
    ) -> Result<()>
    where
        M: ElementwiseFn<Elems = (A, B)>,
        C: BindArrays<M::Arrays>,
    {
        self.execute(v, h, out, Axis::Rows)
    }

    /// `out[j] = map(v[0], h[j]) ⊕ map(v[1], h[j]) ⊕ ...`; `out.len() == h.len()`.
    pub fn run_cols<A: DeviceType, B: DeviceType>(
        &self,
        v: &impl Input<A>,
        h: &impl Input<B>,
        out: &mut impl Output<M::Out>,
    ) -> Result<()>
    where
        M: ElementwiseFn<Elems = (A, B)>,
        C: BindArrays<M::Arrays>,
    {
        self.execute(v, h, out, Axis::Cols)
    }

    fn execute<A: DeviceType, B: DeviceType>(
        &self,
        v: &impl Input<A>,
        h: &impl Input<B>,
        out: &mut impl Output<M::Out>,
        axis: Axis,
    ) -> Result<()>
    where
        M: ElementwiseFn<Elems = (A, B)>,
        C: BindArrays<M::Arrays>,
    {
        self.options.validate()?;
        let uniforms = &uniforms_or_missing(M::NAME, &self.uniforms, &self.options)?;
        let plan = plan::MapPairsReduce::<(M, R, A, B)> {
            arrays: self.arrays.bind(),
            v: v.arg(),
            h: h.arg(),
            out: out.arg_mut(),
            axis,
            uniforms,
        };
        // Spread over MPI ranks, v is in blocks of rows, out in blocks of its elements, h
        // and the container arguments whole: the layer checked the global shapes
        // (`globals_checked`), and the local ones of v and out are blocks of them.
        backends::map_pairs_reduce(
            self.options,
            (&self.arrays, h),
            plan,
            |plan, globals_checked| {
                check_arrays(
                    "MapPairsReduce",
                    M::NAME,
                    M::Arrays::KINDS,
                    &plan.arrays.shapes(),
                )?;
                let (rows, cols) = pair_lengths("MapPairsReduce", &plan.v, &plan.h)?;
                if globals_checked {
                    return Ok(());
                }
                let pairs = Shape::Matrix { rows, cols };
                let (results, name) = match axis {
                    Axis::Rows => (rows, "row of pairs, v.len()"),
                    _ => (cols, "column of pairs, h.len()"),
                };
                check_shape(
                    format_args!("MapPairsReduce {axis:?} output: one element per {name}"),
                    Shape::Vector(results),
                    plan.out.shape(),
                )?;
                every_fold_has_pairs(axis, rows, cols)?;
                check_index_dims(
                    "MapPairsReduce",
                    M::NAME,
                    <M::Index as IndexKind>::DIMS,
                    pairs,
                )
            },
        )
    }
}
