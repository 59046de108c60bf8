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
use crate::userfn::sealed::Only;
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
    let mut bufs: [Vec<F::Elem>; N] = std::array::from_fn(|_| Vec::new());
    for (k, out_row) in out.chunks_mut(cols.max(1)).enumerate() {
        let i = first_row + k;
        // The outputs not computed keep input 0's elements where asked: the whole row at
        // once (a copy for an in-place update), then the loops below visit only the
        // computed cells.
        if let Some(keep) = cells.keep {
            keep(&inputs[0][i * cols..(i + 1) * cols], out_row);
        }
        let (first, step) = match cells.parity {
            // `(i + j) % 2 == p` from `j = (p + i) % 2` on, every other column.
            Some(p) => ((p + i) % 2, 2),
            None => (0, 1),
        };
        let row_inside = i >= rr && i + rr < rows;
        let edge = stencil.edge != Edge::None;
        // The outputs `from..to` whose windows reach past the matrix, from a block built
        // with the edge mode.
        let mut border = |from: usize, to: usize, out_row: &mut [F::Out]| {
            if edge && from < to {
                let run = Run {
                    first: first_from(from, first, step),
                    end: to,
                    step,
                    shift: 0,
                };
                edge_outputs::<F, N>(
                    inputs,
                    (rows, cols),
                    i,
                    run,
                    stencil,
                    &mut bufs,
                    out_row,
                    arrays,
                    uniforms,
                );
            }
        };
        if !row_inside || cols <= 2 * rc {
            border(0, cols, out_row);
            continue;
        }
        // Columns `rc..cols - rc` read their windows in place; the others from the edge
        // mode. In the order of the columns, so that a user function that faults at
        // several outputs reports the same one as the plain loop.
        let (lo, hi) = (rc, cols - rc);
        border(0, lo, out_row);
        let top = (i - rr) * cols;
        let span = (2 * rr + 1) * cols;
        let mut blocks: [&[F::Elem]; N] = [&inputs[0][top..top + span]; N];
        for (q, b) in blocks.iter_mut().enumerate().skip(1) {
            *b = &inputs[q][top..top + span];
        }
        let run = Run {
            first: first_from(lo, first, step),
            end: hi,
            step,
            shift: rc,
        };
        interior::<F, N>(
            &blocks,
            (i, cols, cols),
            run,
            stencil.radius,
            out_row,
            arrays,
            uniforms,
        );
        border(hi, cols, out_row);
    }
}

/// The first column `from..` of the sweep's colour (`first` the first of the row, every
/// `step`-th from there).
#[inline(always)]
fn first_from(from: usize, first: usize, step: usize) -> usize {
    if step == 2 && from % 2 != first {
        from + 1
    } else {
        from
    }
}

/// The outputs `first..end` (every `step`-th) of one row; the window of column `j` starts
/// at `blocks[q][j - shift]`.
#[derive(Clone, Copy)]
struct Run {
    first: usize,
    end: usize,
    step: usize,
    shift: usize,
}

/// The outputs of `run` in row `i` of a `cols`-column output: `blocks` hold the `2 rr + 1`
/// rows around row `i`, `stride` apart. Common radii get a copy of the loop with the
/// radius as a constant, so that the window's own radius checks fold away (as in the
/// single-window loops).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn interior<F: Overlap2Fn, const N: usize>(
    blocks: &[&[F::Elem]; N],
    at: (usize, usize, usize),
    run: Run,
    radius: (usize, usize),
    out_row: &mut [F::Out],
    arrays: Refs<'_, F>,
    uniforms: &F::Uniforms,
) {
    let (b, o, a, u) = (blocks, out_row, arrays, uniforms);
    match (radius, run.step) {
        ((1, 1), 1) => interior_with::<F, N>(b, at, run, (1, 1), 1, o, a, u),
        ((1, 1), _) => interior_with::<F, N>(b, at, run, (1, 1), 2, o, a, u),
        ((2, 2), s) => interior_with::<F, N>(b, at, run, (2, 2), s, o, a, u),
        ((1, 0), s) => interior_with::<F, N>(b, at, run, (1, 0), s, o, a, u),
        ((0, 1), s) => interior_with::<F, N>(b, at, run, (0, 1), s, o, a, u),
        (r, s) => interior_with::<F, N>(b, at, run, r, s, o, a, u),
    }
}

/// The outputs `run.first..run.end` of row `i` (their windows reach past the matrix): the
/// virtual columns `first - rc..end + rc` of the `2 rr + 1` rows around row `i` built once
/// per input in `bufs` from the edge mode, then read in place like the interior. Few
/// outputs, so one copy of the loop, out of line (a second inlined copy of [`interior`]
/// cost edgedetect its unrolled windows).
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn edge_outputs<F: Overlap2Fn, const N: usize>(
    inputs: &[&[F::Elem]],
    (rows, cols): (usize, usize),
    i: usize,
    run: Run,
    stencil: &Stencil<F::Elem, (usize, usize)>,
    bufs: &mut [Vec<F::Elem>; N],
    out_row: &mut [F::Out],
    arrays: Refs<'_, F>,
    uniforms: &F::Uniforms,
) {
    if run.first >= run.end {
        return;
    }
    let (rr, rc) = stencil.radius;
    // Virtual columns `c0..c0 + wide`: the window of output `j` starts at column `j - rc`,
    // element `j - first` of each block row.
    let c0 = run.first as isize - rc as isize;
    let wide = run.end - run.first + 2 * rc;
    for (buf, input) in bufs.iter_mut().zip(inputs) {
        buf.clear();
        for di in -(rr as isize)..=rr as isize {
            for c in 0..wide as isize {
                let at = (i as isize + di, c0 + c);
                buf.push(edge_element(input, (rows, cols), at, stencil));
            }
        }
    }
    let blocks = bufs.each_ref().map(|b| &b[..]);
    let run = Run {
        shift: run.first,
        ..run
    };
    let at = (i, cols, wide);
    interior_with::<F, N>(
        &blocks,
        at,
        run,
        stencil.radius,
        run.step,
        out_row,
        arrays,
        uniforms,
    );
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn interior_with<F: Overlap2Fn, const N: usize>(
    blocks: &[&[F::Elem]; N],
    (i, cols, stride): (usize, usize, usize),
    run: Run,
    (rr, rc): (usize, usize),
    step: usize,
    out_row: &mut [F::Out],
    arrays: Refs<'_, F>,
    uniforms: &F::Uniforms,
) {
    if run.first >= run.end {
        return;
    }
    // Each window a slice of exactly its size: `Window2` then reads it with no bounds
    // check (see its `Index`).
    let needed = 2 * rr * stride + 2 * rc + 1;
    // The last window ends inside every block and the outputs lie inside the row: checked
    // once here, so that the loop below has no checks and vectorises.
    let last = run.end - 1 - run.shift + needed;
    assert!(run.first >= run.shift && run.end <= out_row.len().min(cols));
    assert!(blocks.iter().all(|b| last <= b.len()));
    // Two copies of the loop where the function has `Mat` arguments: in the first every
    // output's index lies inside every `Mat` (checked at the last one: `j` only rises), so
    // a read at the output's own index (hotspot's `power[(i, j)]`) has no check and the
    // loop vectorises; the second (a `Mat` smaller than the output) keeps the checks.
    // Without `Mat`s the condition is `true` and the second copy folds away.
    if <F::Arrays as ContainerArgs>::inside(arrays, (i, run.end - 1), Only) {
        sweep::<F, N, true>(
            blocks,
            (i, cols, stride),
            run,
            (rr, rc),
            step,
            out_row,
            arrays,
            uniforms,
        );
    } else {
        sweep::<F, N, false>(
            blocks,
            (i, cols, stride),
            run,
            (rr, rc),
            step,
            out_row,
            arrays,
            uniforms,
        );
    }
}

/// The loop of [`interior_with`], its checks done there.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn sweep<F: Overlap2Fn, const N: usize, const INSIDE: bool>(
    blocks: &[&[F::Elem]; N],
    (i, cols, stride): (usize, usize, usize),
    run: Run,
    (rr, rc): (usize, usize),
    step: usize,
    out_row: &mut [F::Out],
    arrays: Refs<'_, F>,
    uniforms: &F::Uniforms,
) {
    let needed = 2 * rr * stride + 2 * rc + 1;
    let mut j = run.first;
    // A plain loop: `step_by`'s `try_fold` kept the body out of line (measured: 37% of
    // fdtd2d's time in the closure call).
    while j < run.end {
        let s = j - run.shift;
        // Written out, not in a closure: the closure stayed out of line (measured:
        // edgedetect 3x slower).
        // SAFETY: `run.shift <= run.first <= j < run.end`, so `s + needed <= last`, which
        // is within every block (asserted in `interior_with`).
        let first = unsafe { blocks[0].get_unchecked(s..s + needed) };
        let mut ws = [Window2::new(first, stride, (rr, rc)); N];
        // By index, not zipped with `blocks`: `Zip::nth` (from `skip`) stayed out of line
        // and took `ws` with it, and the function's radius was no longer a constant.
        for (q, w) in ws.iter_mut().enumerate().skip(1) {
            // SAFETY: as for the first window.
            *w = Window2::new(
                unsafe { blocks[q].get_unchecked(s..s + needed) },
                stride,
                (rr, rc),
            );
        }
        // A debug build checks the hint below.
        debug_assert!(
            !INSIDE || <F::Arrays as ContainerArgs>::inside(arrays, (i, j), Only),
            "a Mat check fails at ({i}, {j}), inside its run's last",
        );
        // Tells LLVM `inside` holds here (`assert_unchecked` is newer than the MSRV).
        if INSIDE && !<F::Arrays as ContainerArgs>::inside(arrays, (i, j), Only) {
            // SAFETY: never reached. `INSIDE` is passed where `inside` holds at
            // `(i, run.end - 1)`, and `j < run.end`. `inside` is `true` for a slice and,
            // for a `Mat`, compares `i` and `j` with its shape and `i * cols + j` with its
            // length: it holds at every smaller `j`. No other crate can override `inside`
            // (`sealed::Only`).
            unsafe { std::hint::unreachable_unchecked() }
        }
        let index = F::Index::from_parts(i * cols + j, (i, j), cols);
        // SAFETY: `j < run.end <= out_row.len()` (asserted in `interior_with`).
        unsafe { *out_row.get_unchecked_mut(j) = F::apply_windows(index, &ws, arrays, uniforms) };
        j += step;
    }
}

/// The element at virtual position `(i, j)` of a matrix read with the stencil's edge mode
/// (`element_2d`, inlined here: a border window reads `(2 rr + 1)(2 rc + 1)` of them).
#[inline(always)]
fn edge_element<T: crate::DeviceType>(
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
                keep(&inputs[0][at..=at], std::slice::from_mut(o));
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
