//! Wavefront on the host: the cells of one rectangle of the matrix, row by row, each from
//! its upper, left and upper-left neighbours. The `cpu` backend runs the whole interior as
//! one rectangle (the oracle's loop); Rayon runs tiles of it, the tiles of one
//! anti-diagonal of tiles in parallel, through the same function.

use std::cell::Cell;
use std::ops::Range;

use crate::userfn::{ContainerArgs, ElementwiseFn, IndexKind};
use crate::DeviceType;

/// Cells `(i, j)`, `i` in `rows`, `j` in `cols_of_tile`, of the row-major matrix `m` of
/// `cols` columns, in row-major order: `m[(i, j)] = F((i, j), up, left, diag)`. Every
/// neighbour read is either outside the rectangle (done before) or a cell of the rectangle
/// written earlier in this order. `rows.start` and `cols_of_tile.start` are at least 1.
#[inline]
pub(crate) fn wavefront_tile<F, T>(
    arrays: <F::Arrays as ContainerArgs>::Refs<'_>,
    m: &[Cell<T>],
    cols: usize,
    (rows, cols_of_tile): (Range<usize>, Range<usize>),
    uniforms: &F::Uniforms,
) where
    F: ElementwiseFn<Elems = (T, T, T), Out = T>,
    T: DeviceType,
{
    let c0 = cols_of_tile.start;
    for i in rows {
        let (above, here) = (&m[(i - 1) * cols..i * cols], &m[i * cols..(i + 1) * cols]);
        // The left and upper-left neighbours travel along the row in registers.
        let (mut left, mut diag) = (here[c0 - 1].get(), above[c0 - 1].get());
        for j in cols_of_tile.clone() {
            let up = above[j].get();
            let index = F::Index::from_parts(i * cols + j, (i, j), cols);
            let v = F::apply_with(index, arrays, (up, left, diag), uniforms);
            here[j].set(v);
            (left, diag) = (v, up);
        }
    }
}
