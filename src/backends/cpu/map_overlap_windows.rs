//! MapOverlap in the general form (an `#[index]`, 1..=4 windowed inputs, container
//! arguments, update modes), shared by the `cpu` and `rayon` backends: each computes whole
//! output rows (2D) or a range of flat positions (1D), so Rayon splits the output into
//! parts that no two threads share.
//!
//! An output whose windows lie inside the data reads them in place; a border output builds
//! each window from the edge mode, element by element, in the order of the plain
//! definition, as the single-window loops do.

use super::{Edge, Stencil};
use crate::plan::{Axis, Cells};
use crate::userfn::{ContainerArgs, IndexKind, Overlap1Fn, Overlap2Fn, Window, Window2};

/// Most windowed inputs of one function.
const MAX_WINDOWS: usize = 4;

/// The refs of a function's container arguments.
type Refs<'a, F> = <<F as crate::userfn::OverlapFn>::Arrays as ContainerArgs>::Refs<'a>;

/// 2D outputs for whole rows `first_row..` of `rows x cols` matrices `inputs`; `out` holds
/// those rows.
#[allow(clippy::too_many_arguments)] // the plan's fields, unpacked for the row loop
pub(crate) fn windows_2d_rows<F: Overlap2Fn>(
    inputs: &[&[F::Elem]],
    (rows, cols): (usize, usize),
    out: &mut [F::Out],
    first_row: usize,
    stencil: &Stencil<F::Elem, (usize, usize)>,
    cells: &Cells<F::Elem, F::Out>,
    arrays: Refs<'_, F>,
    uniforms: &F::Uniforms,
) {
    // The window count is a constant of `F`: the match folds to one arm, whose windows are
    // an array of exactly that many.
    match F::WINDOWS {
        1 => rows_with::<F, 1>(
            inputs,
            (rows, cols),
            out,
            first_row,
            stencil,
            cells,
            arrays,
            uniforms,
        ),
        2 => rows_with::<F, 2>(
            inputs,
            (rows, cols),
            out,
            first_row,
            stencil,
            cells,
            arrays,
            uniforms,
        ),
        3 => rows_with::<F, 3>(
            inputs,
            (rows, cols),
            out,
            first_row,
            stencil,
            cells,
            arrays,
            uniforms,
        ),
        _ => rows_with::<F, MAX_WINDOWS>(
            inputs,
            (rows, cols),
            out,
            first_row,
            stencil,
            cells,
            arrays,
            uniforms,
        ),
    }
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn rows_with<F: Overlap2Fn, const N: usize>(
    inputs: &[&[F::Elem]],
    (rows, cols): (usize, usize),
    out: &mut [F::Out],
    first_row: usize,
    stencil: &Stencil<F::Elem, (usize, usize)>,
    cells: &Cells<F::Elem, F::Out>,
    arrays: Refs<'_, F>,
    uniforms: &F::Uniforms,
) {
    let (rr, rc) = stencil.radius;
    // Elements from a window's first to its last: each interior window is a slice of
    // exactly this many, so that its reads need no bounds check.
    let needed = 2 * rr * cols + 2 * rc + 1;
    let mut bufs: [Vec<F::Elem>; N] = std::array::from_fn(|_| Vec::new());
    for (k, out_row) in out.chunks_mut(cols.max(1)).enumerate() {
        let i = first_row + k;
        let row_inside = i >= rr && i + rr < rows;
        // The outputs not computed keep input 0's elements where asked (set first, so
        // that the loop below visits only the computed cells).
        if let Some(keep) = cells.keep {
            for (o, &x) in out_row.iter_mut().zip(&inputs[0][i * cols..]) {
                *o = keep(x);
            }
        }
        let (first, step) = match cells.parity {
            // `(i + j) % 2 == p` from `j = (p + i) % 2` on, every other column.
            Some(p) => ((p + i) % 2, 2),
            None => (0, 1),
        };
        // A plain loop: `step_by`'s `try_fold` kept the body out of line (measured: 37% of
        // fdtd2d's time in the closure call).
        let mut j = first;
        while j < cols {
            let at = j;
            j += step;
            let j = at;
            let inside = row_inside && j >= rc && j + rc < cols;
            if !inside && stencil.edge == Edge::None {
                continue;
            }
            let index = F::Index::from_parts(i * cols + j, (i, j), cols);
            out_row[j] = if inside {
                let start = (i - rr) * cols + j - rc;
                // Filled by a loop: `array::from_fn` stayed out of line (measured: a third
                // of fdtd2d's time in its closure calls).
                let window =
                    |q: usize| Window2::new(&inputs[q][start..start + needed], cols, (rr, rc));
                let mut ws = [window(0); N];
                for (q, w) in ws.iter_mut().enumerate().skip(1) {
                    *w = window(q);
                }
                F::apply_windows(index, &ws, arrays, uniforms)
            } else {
                for (buf, input) in bufs.iter_mut().zip(inputs) {
                    buf.clear();
                    for di in -(rr as isize)..=rr as isize {
                        for dj in -(rc as isize)..=rc as isize {
                            buf.push(super::map_overlap::element_2d(
                                input,
                                (rows, cols),
                                (i as isize + di, j as isize + dj),
                                stencil,
                            ));
                        }
                    }
                }
                let window = |q: usize| Window2::new(&bufs[q], 2 * rc + 1, (rr, rc));
                let mut ws = [window(0); N];
                for (q, w) in ws.iter_mut().enumerate().skip(1) {
                    *w = window(q);
                }
                F::apply_windows(index, &ws, arrays, uniforms)
            };
        }
    }
}

/// 1D outputs at flat positions `first..first + out.len()` of `inputs` (`rows x cols`
/// matrices, a vector one row), windows along `axis` (`Flat` and `Rows` along a row).
#[allow(clippy::too_many_arguments)] // the plan's fields, unpacked for the loop
pub(crate) fn windows_1d_range<F: Overlap1Fn>(
    inputs: &[&[F::Elem]],
    (rows, cols): (usize, usize),
    axis: Axis,
    out: &mut [F::Out],
    first: usize,
    stencil: &Stencil<F::Elem, usize>,
    cells: &Cells<F::Elem, F::Out>,
    arrays: Refs<'_, F>,
    uniforms: &F::Uniforms,
) {
    let r = stencil.radius;
    let n = inputs.len().clamp(1, MAX_WINDOWS);
    let mut bufs: [Vec<F::Elem>; MAX_WINDOWS] = Default::default();
    let (mut i, mut j) = (first / cols.max(1), first % cols.max(1));
    for (k, o) in out.iter_mut().enumerate() {
        let at = first + k;
        // Along a row the window is a slice of it where it lies inside; down a column it
        // is always gathered.
        let (pos, len) = if axis == Axis::Cols {
            (i, rows)
        } else {
            (j, cols)
        };
        let inside = pos >= r && pos + r < len;
        if !cells.computes((i, j)) || (!inside && stencil.edge == Edge::None) {
            if let Some(keep) = cells.keep {
                *o = keep(inputs[0][at]);
            }
        } else {
            let index = F::Index::from_parts(at, (i, j), cols);
            *o = if inside && axis != Axis::Cols {
                let ws: [Window<'_, F::Elem>; MAX_WINDOWS] =
                    std::array::from_fn(|q| Window::new(&inputs[q.min(n - 1)][at - r..=at + r], r));
                F::apply_windows(index, &ws[..n], arrays, uniforms)
            } else {
                for (buf, input) in bufs.iter_mut().zip(inputs) {
                    buf.clear();
                    for d in -(r as isize)..=r as isize {
                        let v = virtual_pos(len, pos as isize + d, stencil.edge);
                        buf.push(match v {
                            Some(v) if axis == Axis::Cols => input[v * cols + j],
                            Some(v) => input[i * cols + v],
                            None => stencil.pad,
                        });
                    }
                }
                let ws: [Window<'_, F::Elem>; MAX_WINDOWS] =
                    std::array::from_fn(|q| Window::new(&bufs[q.min(n - 1)], r));
                F::apply_windows(index, &ws[..n], arrays, uniforms)
            };
        }
        j += 1;
        if j == cols {
            (i, j) = (i + 1, 0);
        }
    }
}

/// The position that virtual position `p` of a line of `len` elements reads with `edge`,
/// or `None` for the pad value.
fn virtual_pos(len: usize, p: isize, edge: Edge) -> Option<usize> {
    let n = len as isize;
    match edge {
        _ if (0..n).contains(&p) => Some(p as usize),
        Edge::Duplicate => Some(p.clamp(0, n - 1) as usize),
        Edge::Cyclic => Some(p.rem_euclid(n) as usize),
        Edge::Pad | Edge::None => None,
    }
}
