//! The column folds of MapPairsReduce (`run_cols`), shared by the `cpu` and `rayon`
//! backends.

use crate::backends::BinaryFn;
use crate::userfn::{ContainerArgs, ElementwiseFn, IndexKind};
use crate::DeviceType;

/// Results folded together row by row: their accumulators stay in L1, and a row of a
/// container argument is read along its length.
const COLUMN_TILE: usize = 1024;

/// MapPairsReduce results `first..first + out.len()` of `run_cols`: `out[j]` is the fold,
/// in row order, of column `first + j` of the pair matrix `map(v[i], h[j])`; with no rows,
/// `out` keeps its values.
///
/// Each result still folds its own column from row 0 down, as the per-column definition
/// does, but all the results of a tile advance together one row at a time: the pair matrix
/// is walked along its rows, once, and the folds of neighbouring columns are independent
/// operations the compiler can interleave or vectorise.
///
/// The results are folded in `out` itself, which must not share cache lines with another
/// thread's (`rayon` passes a buffer of its own): the fold stores every row. Not inlined, so
/// that `out` is a parameter the compiler knows nothing else points into (folding into a
/// local `Vec` instead measured 2.5x slower).
#[inline(never)]
pub(crate) fn pairs_fold_cols<M, R, A, B>(
    arrays: <M::Arrays as ContainerArgs>::Refs<'_>,
    (v, h): (&[A], &[B]),
    out: &mut [M::Out],
    first: usize,
    uniforms: &M::Uniforms,
) where
    M: ElementwiseFn<Elems = (A, B)>,
    R: BinaryFn<M::Out>,
    A: DeviceType,
    B: DeviceType,
{
    let cols = h.len();
    let Some(&v0) = v.first() else {
        return;
    };
    let h = &h[first..first + out.len()];
    let map = |i: usize, j: usize, p: A, q: B| {
        M::apply_with(
            M::Index::from_parts(i * cols + first + j, (i, first + j), cols),
            arrays,
            (p, q),
            uniforms,
        )
    };
    for (t, (tile, h)) in out
        .chunks_mut(COLUMN_TILE)
        .zip(h.chunks(COLUMN_TILE))
        .enumerate()
    {
        let j0 = t * COLUMN_TILE;
        for (j, (o, &q)) in (j0..).zip(tile.iter_mut().zip(h)) {
            *o = map(0, j, v0, q);
        }
        for (i, &p) in v.iter().enumerate().skip(1) {
            for (j, (o, &q)) in (j0..).zip(tile.iter_mut().zip(h)) {
                *o = R::apply((), (*o, map(i, j, p, q)), &());
            }
        }
    }
}
