//! Wavefront on all cores: the interior cut into tiles of [`TILE`] x [`TILE`] cells, the
//! tiles of one anti-diagonal of tiles in parallel (each row-major, by the `cpu` backend's
//! own tile function), the anti-diagonals in order. Every cell is the user function of the
//! same three values as in the sequential loop, so the result is bit-identical to it.

use std::cell::Cell;

use rayon::prelude::*;

use crate::backends::cpu::wavefront_tile;
use crate::userfn::{ContainerArgs, ElementwiseFn};
use crate::DeviceType;

/// Cells per side of a tile: 4096 cells of work per task, and a tile row of 64 cells
/// (a few cache lines) to read from the tile above.
pub(crate) const TILE: usize = 64;

/// The matrix's cells, shared by the tasks of one anti-diagonal of tiles.
struct Cells<'m, T>(&'m [Cell<T>]);

// SAFETY: the tasks that share a `Cells` at once are the tiles of one anti-diagonal of
// tiles. Each writes only its own tile's cells, which no other tile reads or writes; it
// reads, besides its own cells, the row above and the column left of its tile, which
// belong to tiles of earlier anti-diagonals. Those were written before this anti-diagonal
// started (Rayon's `for_each` returns after every task of it is done, which orders their
// writes before the next anti-diagonal's reads), and nobody writes them now. So no cell is
// accessed by two threads unless both only read it: no data race.
unsafe impl<T: Send> Sync for Cells<'_, T> {}

impl<T> Cells<'_, T> {
    /// The cells (a method, so that closures capture the `Sync` wrapper, not the field).
    fn get(&self) -> &[Cell<T>] {
        self.0
    }
}

/// Every cell `(i, j)`, `i >= 1`, `j >= 1`, of the `rows x cols` matrix `m`, tile by tile.
pub(crate) fn wavefront_tiles<F, T>(
    arrays: <F::Arrays as ContainerArgs>::Refs<'_>,
    m: &mut [T],
    (rows, cols): (usize, usize),
    uniforms: &F::Uniforms,
) where
    F: ElementwiseFn<Elems = (T, T, T), Out = T>,
    T: DeviceType,
{
    // The caller returns before a matrix without interior cells: no tile row or column.
    debug_assert!(rows >= 2 && cols >= 2, "wavefront_tiles on {rows}x{cols}");
    let (tr, tc) = ((rows - 1).div_ceil(TILE), (cols - 1).div_ceil(TILE));
    let cells = Cells(Cell::from_mut(m).as_slice_of_cells());
    let cells = &cells;
    for d in 0..tr + tc - 1 {
        // Tile (ti, tj) covers rows 1 + ti * TILE .. and columns 1 + tj * TILE ..
        let first = d.saturating_sub(tc - 1);
        let last = d.min(tr - 1);
        (first..=last).into_par_iter().for_each(|ti| {
            let tj = d - ti;
            let r0 = 1 + ti * TILE;
            let c0 = 1 + tj * TILE;
            let tile = (r0..(r0 + TILE).min(rows), c0..(c0 + TILE).min(cols));
            wavefront_tile::<F, T>(arrays, cells.get(), cols, tile, uniforms);
        });
    }
}
