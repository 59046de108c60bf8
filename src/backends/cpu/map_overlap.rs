//! The MapOverlap loops over matrices (2D windows and column-wise 1D windows), shared by the
//! `cpu` and `rayon` backends: each computes whole output rows, so Rayon splits the output
//! into bands of rows that no two threads share.
//!
//! Both split the work into an interior, whose windows lie inside the matrix and are read in
//! place with no edge logic, and a border, which builds each window from the edge mode. The
//! user function sees the same window values in the same order either way: the results are
//! the ones of the plain per-element definition.

use super::{overlap_inner, Edge, Stencil};
use crate::userfn::{Window, Window2, Window2Fn, WindowFn};
use crate::DeviceType;

/// 2D stencil outputs for whole rows `first_row..` of a `rows x cols` matrix; `out` holds
/// those rows. With `Edge::None`, border outputs are left untouched.
pub(crate) fn overlap_2d_rows<F: Window2Fn>(
    input: &[F::Elem],
    (rows, cols): (usize, usize),
    out: &mut [F::Out],
    first_row: usize,
    stencil: &Stencil<F::Elem, (usize, usize)>,
    uniforms: &F::Uniforms,
) {
    let (rr, rc) = stencil.radius;
    let mut border = Vec::new();
    for (k, out_row) in out.chunks_mut(cols.max(1)).enumerate() {
        let i = first_row + k;
        // Columns whose window lies inside the matrix: `lo..hi` (empty on a border row).
        let (lo, hi) = if i >= rr && i + rr < rows && cols > 2 * rc {
            (rc, cols - rc)
        } else {
            (cols, cols)
        };
        if lo == hi && stencil.edge != Edge::None {
            // A border row: its `2 rr + 1` window rows, extended by `rc` edge-mode columns
            // on each side, are built once; the interior loop then reads every window of
            // the row from them (the same values as `border_2d`'s, in the same order).
            let wide = cols + 2 * rc;
            border.clear();
            for di in 0..2 * rr + 1 {
                let vi = i as isize + di as isize - rr as isize;
                border.extend((0..wide).map(|c| {
                    let vj = c as isize - rc as isize;
                    element_2d(input, (rows, cols), (vi, vj), stencil)
                }));
            }
            interior_row::<F>(&border, wide, stencil.radius, out_row, uniforms);
            continue;
        }
        // Left border, interior, right border: the outputs in the order of the columns, so
        // that a user function that faults at several of them reports the same one.
        let mut edge = |js: std::ops::Range<usize>, out_row: &mut [F::Out]| {
            if stencil.edge != Edge::None {
                for j in js {
                    out_row[j] =
                        border_2d::<F>(input, (rows, cols), (i, j), stencil, &mut border, uniforms);
                }
            }
        };
        edge(0..lo, out_row);
        if lo < hi {
            let span = &input[(i - rr) * cols..(i + rr + 1) * cols];
            interior_row::<F>(span, cols, stencil.radius, &mut out_row[lo..hi], uniforms);
        }
        edge(hi..cols, out_row);
    }
}

/// The output at `(i, j)`, its window built from the edge mode in `border`.
fn border_2d<F: Window2Fn>(
    input: &[F::Elem],
    (rows, cols): (usize, usize),
    (i, j): (usize, usize),
    stencil: &Stencil<F::Elem, (usize, usize)>,
    border: &mut Vec<F::Elem>,
    uniforms: &F::Uniforms,
) -> F::Out {
    let (rr, rc) = stencil.radius;
    border.clear();
    for di in -(rr as isize)..=rr as isize {
        for dj in -(rc as isize)..=rc as isize {
            border.push(element_2d(
                input,
                (rows, cols),
                (i as isize + di, j as isize + dj),
                stencil,
            ));
        }
    }
    F::apply(Window2::new(border, 2 * rc + 1, (rr, rc)), uniforms)
}

/// The interior outputs of one row: `out[j]` is the window whose top-left element is
/// `span[j]` (`span`: the `2 rr + 1` rows around the output row). Common radii get a copy
/// of the loop with the radius as a constant, so that the window's own radius checks fold
/// away (as the 1D loops do).
#[inline]
fn interior_row<F: Window2Fn>(
    span: &[F::Elem],
    cols: usize,
    radius: (usize, usize),
    out: &mut [F::Out],
    uniforms: &F::Uniforms,
) {
    match radius {
        (1, 1) => interior_row_with::<F>(span, cols, (1, 1), out, uniforms),
        (2, 2) => interior_row_with::<F>(span, cols, (2, 2), out, uniforms),
        (1, 0) => interior_row_with::<F>(span, cols, (1, 0), out, uniforms),
        (0, 1) => interior_row_with::<F>(span, cols, (0, 1), out, uniforms),
        (3, 3) => interior_row_with::<F>(span, cols, (3, 3), out, uniforms),
        _ => interior_row_with::<F>(span, cols, radius, out, uniforms),
    }
}

#[inline(always)]
fn interior_row_with<F: Window2Fn>(
    span: &[F::Elem],
    cols: usize,
    radius: (usize, usize),
    out: &mut [F::Out],
    uniforms: &F::Uniforms,
) {
    // Each window a slice of exactly its size: `Window2` then reads it with no bounds check
    // (see its `Index`), and the loop vectorises. `span` holds one window per output.
    let needed = 2 * radius.0 * cols + 2 * radius.1 + 1;
    debug_assert_eq!(span.len() + 1, needed + out.len());
    for (w, o) in span.windows(needed).zip(out.iter_mut()) {
        *o = F::apply(Window2::new(w, cols, radius), uniforms);
    }
}

/// The element at virtual position `(i, j)` of a matrix read with the stencil's edge mode.
pub(super) fn element_2d<T: DeviceType>(
    input: &[T],
    (rows, cols): (usize, usize),
    (i, j): (isize, isize),
    stencil: &Stencil<T, (usize, usize)>,
) -> T {
    let (rows, cols) = (rows as isize, cols as isize);
    let inside = (0..rows).contains(&i) && (0..cols).contains(&j);
    let (i, j) = match stencil.edge {
        _ if inside => (i, j),
        Edge::Duplicate => (i.clamp(0, rows - 1), j.clamp(0, cols - 1)),
        Edge::Cyclic => (i.rem_euclid(rows), j.rem_euclid(cols)),
        Edge::Pad | Edge::None => return stencil.pad,
    };
    input[(i * cols + j) as usize]
}

/// Columns copied together into contiguous windows: a 64-byte cache line of `u8` per row.
const COLUMN_BLOCK: usize = 64;
/// Rows of one copied block (plus the halo): with [`COLUMN_BLOCK`], a few tens of KiB.
const ROW_BLOCK: usize = 256;

/// Column-wise 1D stencil outputs for whole rows `first_row..` of a row-major matrix of
/// `cols` columns (`input` holds all of it, `out` those rows). With `Edge::None`, border
/// outputs are left untouched.
///
/// A window runs down a column, but the user function reads it as a contiguous slice: the
/// interior copies windows (small ones into registers, wide ones a block at a time into
/// column-major scratch) so that the matrix is read and written along its rows; the border
/// rows build each window from the edge mode.
pub(crate) fn overlap_cols_rows<F: WindowFn>(
    input: &[F::Elem],
    cols: usize,
    out: &mut [F::Out],
    first_row: usize,
    stencil: &Stencil<F::Elem, usize>,
    uniforms: &F::Uniforms,
) {
    if cols == 0 || out.is_empty() {
        return;
    }
    let (rows, r) = (input.len() / cols, stencil.radius);
    let end_row = first_row + out.len() / cols;
    // Rows whose window lies inside the column, clipped to this band.
    let inner_start = r.clamp(first_row, end_row);
    let inner_end = rows.saturating_sub(r).clamp(inner_start, end_row);
    let mut window = Vec::with_capacity(2 * r + 1);
    if stencil.edge != Edge::None && r <= REGISTER_WINDOW / 2 {
        // Small radii: a border row's window rows are whole rows of the matrix (or of pad
        // values), so the row runs the interior's loop over those rows.
        let pad = vec![stencil.pad; cols];
        for i in (first_row..inner_start).chain(inner_end..end_row) {
            let mut lines: [&[F::Elem]; REGISTER_WINDOW] = [&[]; REGISTER_WINDOW];
            for (d, line) in lines[..2 * r + 1].iter_mut().enumerate() {
                *line = match virtual_row(rows, i as isize + d as isize - r as isize, stencil) {
                    Some(row) => &input[row * cols..][..cols],
                    None => &pad,
                };
            }
            let out_row = &mut out[(i - first_row) * cols..][..cols];
            match r {
                0 => cols_row_in_registers::<F, 0>(&lines, out_row, uniforms),
                1 => cols_row_in_registers::<F, 1>(&lines, out_row, uniforms),
                2 => cols_row_in_registers::<F, 2>(&lines, out_row, uniforms),
                _ => cols_row_in_registers::<F, 3>(&lines, out_row, uniforms),
            }
        }
    } else if stencil.edge != Edge::None {
        for i in (first_row..inner_start).chain(inner_end..end_row) {
            let out_row = &mut out[(i - first_row) * cols..][..cols];
            for (c, o) in out_row.iter_mut().enumerate() {
                window.clear();
                window.extend(
                    (-(r as isize)..=r as isize)
                        .map(|d| column_element(input, (rows, cols), c, i as isize + d, stencil)),
                );
                *o = F::apply(Window::new(&window, r), uniforms);
            }
        }
    }
    if inner_start == inner_end {
        return;
    }
    let inner = &mut out[(inner_start - first_row) * cols..(inner_end - first_row) * cols];
    // Small radii copy each window into registers, the rows read side by side (the loop a
    // hand-written column filter is); wider windows are copied a block at a time.
    match r {
        0 => cols_in_registers::<F, 0>(input, cols, inner, inner_start, uniforms),
        1 => cols_in_registers::<F, 1>(input, cols, inner, inner_start, uniforms),
        2 => cols_in_registers::<F, 2>(input, cols, inner, inner_start, uniforms),
        3 => cols_in_registers::<F, 3>(input, cols, inner, inner_start, uniforms),
        _ => cols_in_blocks::<F>(input, cols, inner, inner_start, r, uniforms),
    }
}

/// Widest window [`cols_in_registers`] copies: radius 3.
const REGISTER_WINDOW: usize = 7;

/// Interior column-wise outputs for whole rows `first_row..` (`out`), radius `R` (at most
/// 3): each window is copied from the `2 R + 1` rows around its output into an array.
#[inline]
fn cols_in_registers<F: WindowFn, const R: usize>(
    input: &[F::Elem],
    cols: usize,
    out: &mut [F::Out],
    first_row: usize,
    uniforms: &F::Uniforms,
) {
    let width = 2 * R + 1;
    let mut lines: [&[F::Elem]; REGISTER_WINDOW] = [&[]; REGISTER_WINDOW];
    for (k, out_row) in out.chunks_exact_mut(cols).enumerate() {
        let top = first_row + k - R;
        for (d, line) in lines[..width].iter_mut().enumerate() {
            *line = &input[(top + d) * cols..][..cols];
        }
        cols_row_in_registers::<F, R>(&lines, out_row, uniforms);
    }
}

/// One row of column-wise outputs, radius `R` (at most 3): `out[c]` is the window down
/// column `c` of `lines` (the `2 R + 1` rows around the output row, each as long as `out`).
#[inline(always)]
fn cols_row_in_registers<F: WindowFn, const R: usize>(
    lines: &[&[F::Elem]; REGISTER_WINDOW],
    out: &mut [F::Out],
    uniforms: &F::Uniforms,
) {
    let width = 2 * R + 1;
    let Some(&first) = lines[0].first() else {
        return;
    };
    let mut window = [first; REGISTER_WINDOW];
    for (c, o) in out.iter_mut().enumerate() {
        for d in 0..width {
            window[d] = lines[d][c];
        }
        *o = F::apply(Window::new(&window[..width], R), uniforms);
    }
}

/// The matrix row that virtual row `i` of a `rows`-row matrix reads with the stencil's
/// edge mode, or `None` for a row of pad values (the row-level twin of [`column_element`]).
fn virtual_row<T: DeviceType>(rows: usize, i: isize, stencil: &Stencil<T, usize>) -> Option<usize> {
    let n = rows as isize;
    match stencil.edge {
        _ if (0..n).contains(&i) => Some(i as usize),
        Edge::Duplicate => Some(i.clamp(0, n - 1) as usize),
        Edge::Cyclic => Some(i.rem_euclid(n) as usize),
        Edge::Pad | Edge::None => None,
    }
}

/// [`cols_in_registers`] for any radius: blocks of `ROW_BLOCK` rows of `COLUMN_BLOCK`
/// columns (and the halo) are copied into column-major scratch, computed there by the 1D
/// interior loop, and copied back.
fn cols_in_blocks<F: WindowFn>(
    input: &[F::Elem],
    cols: usize,
    out: &mut [F::Out],
    first_row: usize,
    r: usize,
    uniforms: &F::Uniforms,
) {
    let (inner_start, inner_end) = (first_row, first_row + out.len() / cols);
    let block_rows = ROW_BLOCK.min(inner_end - inner_start);
    let block_cols = COLUMN_BLOCK.min(cols);
    let mut span = vec![input[0]; block_cols * (block_rows + 2 * r)];
    let mut results = vec![out[0]; block_cols * block_rows];
    for s0 in (inner_start..inner_end).step_by(block_rows) {
        let h = block_rows.min(inner_end - s0);
        let hs = h + 2 * r;
        for c0 in (0..cols).step_by(block_cols) {
            let w = block_cols.min(cols - c0);
            // Column k of the block at span[k * hs..]: rows s0 - r .. s0 + h + r.
            for (t, row) in input[(s0 - r) * cols..(s0 + h + r) * cols]
                .chunks_exact(cols)
                .enumerate()
            {
                for (k, &x) in row[c0..c0 + w].iter().enumerate() {
                    span[k * hs + t] = x;
                }
            }
            for k in 0..w {
                overlap_inner::<F>(
                    &span[k * hs..(k + 1) * hs],
                    &mut results[k * h..(k + 1) * h],
                    r,
                    uniforms,
                );
            }
            for (t, row) in out[(s0 - first_row) * cols..(s0 - first_row + h) * cols]
                .chunks_exact_mut(cols)
                .enumerate()
            {
                for (k, o) in row[c0..c0 + w].iter_mut().enumerate() {
                    *o = results[k * h + t];
                }
            }
        }
    }
}

/// The element at virtual row `i` of column `c`, read with the stencil's edge mode (the
/// column-wise twin of [`super::beyond`]).
fn column_element<T: DeviceType>(
    input: &[T],
    (rows, cols): (usize, usize),
    c: usize,
    i: isize,
    stencil: &Stencil<T, usize>,
) -> T {
    let n = rows as isize;
    let i = match stencil.edge {
        _ if (0..n).contains(&i) => i,
        Edge::Duplicate => i.clamp(0, n - 1),
        Edge::Cyclic => i.rem_euclid(n),
        Edge::Pad | Edge::None => return stencil.pad,
    };
    input[i as usize * cols + c]
}
