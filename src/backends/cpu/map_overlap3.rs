//! The 3D MapOverlap loop, shared by the `cpu` and `rayon` backends: each call computes
//! whole rows `(i, j, ..)` of the output, so Rayon splits the output into runs of rows that
//! no two threads share.
//!
//! As in 2D, a row splits into an interior, whose windows lie inside the tensor and are
//! read in place at fixed offsets (strides `d1 * d2` and `d2`) with no edge logic, and a
//! border, each of whose windows is built from the edge mode. The user function sees the
//! same window values either way, so the results are those of the per-element definition.

use super::{Edge, Stencil};
use crate::userfn::{Window3, Window3Fn};
use crate::DeviceType;

/// Radii `(r0, r1, r2)`.
type Radius = (usize, usize, usize);

/// 3D stencil outputs for the rows `first_row..` (row `r` is `(r / d1, r % d1, ..)`) of a
/// `d0 x d1 x d2` tensor; `out` holds whole rows. With `Edge::None`, border outputs are left
/// untouched.
pub(crate) fn overlap_3d_rows<F: Window3Fn>(
    input: &[F::Elem],
    dims: (usize, usize, usize),
    out: &mut [F::Out],
    first_row: usize,
    stencil: &Stencil<F::Elem, Radius>,
    uniforms: &F::Uniforms,
) {
    let (d0, d1, d2) = dims;
    let (r0, r1, r2) = stencil.radius;
    if d2 == 0 {
        return;
    }
    let rows = out.len() / d2;
    let (mut left, mut right) = (Vec::new(), Vec::new());
    let mut n = 0;
    while n < rows {
        let row = first_row + n;
        let (i, j) = (row / d1, row % d1);
        let inner_row = i >= r0 && i + r0 < d0 && j >= r1 && j + r1 < d1;
        if !inner_row || d2 <= 2 * r2 {
            // Every window of the row reaches outside the tensor.
            if stencil.edge != Edge::None {
                let len = d2 + 2 * r2;
                fill_slab(
                    input,
                    dims,
                    (i, j),
                    1,
                    -(r2 as isize),
                    len,
                    stencil,
                    &mut left,
                );
                let strides = ((2 * r1 + 1) * len, len);
                let out_row = &mut out[n * d2..(n + 1) * d2];
                interior::<F>(&left, strides, stencil.radius, out_row, uniforms);
            }
            n += 1;
            continue;
        }
        // A run of `m` inner rows `(i, j..j + m)`: only the columns `..lo` and `hi..` of
        // each reach outside the tensor. Their neighbourhoods, built once for the run from
        // the edge mode as two narrow tensors `left` and `right`, are read in place like
        // the interior (a window built per output read each element up to `(2 r0 + 1)(2 r1 + 1)(2 r2 + 1)`
        // times through the edge logic, which made the border the larger part of a step).
        let m = (d1 - r1 - j).min(rows - n);
        let (lo, hi) = (r2, d2 - r2);
        let width = 3 * r2;
        let edges = stencil.edge != Edge::None && r2 > 0;
        if edges {
            fill_slab(
                input,
                dims,
                (i, j),
                m,
                -(r2 as isize),
                width,
                stencil,
                &mut left,
            );
            let from = (hi - r2) as isize;
            fill_slab(input, dims, (i, j), m, from, width, stencil, &mut right);
        }
        let strides = ((m + 2 * r1) * width, width);
        for (q, out_row) in out[n * d2..(n + m) * d2].chunks_mut(d2).enumerate() {
            // In column order, so that a function that faults at several outputs reports
            // the same one on every backend that goes in order.
            if edges {
                let span = &left[q * width..];
                interior::<F>(span, strides, stencil.radius, &mut out_row[..lo], uniforms);
            }
            // The window of output `(i, j + q, k)` starts at `(i - r0, j + q - r1, k - r2)`.
            let first = ((i - r0) * d1 + (j + q - r1)) * d2;
            interior::<F>(
                &input[first..],
                (d1 * d2, d2),
                stencil.radius,
                &mut out_row[lo..hi],
                uniforms,
            );
            if edges {
                let span = &right[q * width..];
                interior::<F>(span, strides, stencil.radius, &mut out_row[hi..], uniforms);
            }
        }
        n += m;
    }
}

/// Fills `slab` with the neighbourhood of the rows `(i, j..j + m)` over the columns
/// `from..from + width`, each element read as the per-element definition reads it
/// (`tests::element_3d`): a small tensor of `2 r0 + 1` planes of `m + 2 r1` rows of
/// `width` columns, whose windows are then read in place like the interior's.
#[allow(clippy::too_many_arguments)]
fn fill_slab<T: DeviceType>(
    input: &[T],
    dims: (usize, usize, usize),
    (i, j): (usize, usize),
    m: usize,
    from: isize,
    width: usize,
    stencil: &Stencil<T, Radius>,
    slab: &mut Vec<T>,
) {
    let (r0, r1, _) = stencil.radius;
    let rows = m + 2 * r1;
    slab.clear();
    slab.resize((2 * r0 + 1) * rows * width, stencil.pad);
    let at = |p: usize, q: usize| {
        (
            i as isize - r0 as isize + p as isize,
            j as isize - r1 as isize + q as isize,
        )
    };
    for (n, line) in slab.chunks_exact_mut(width).enumerate() {
        slab_row(input, dims, at(n / rows, n % rows), from, stencil, line);
    }
}

/// Fills `line` with the elements `(vi, vj, from + n)`, each read as the per-element
/// definition reads it (`tests::element_3d`); `line` holds the pad value on entry.
fn slab_row<T: DeviceType>(
    input: &[T],
    (d0, d1, d2): (usize, usize, usize),
    (vi, vj): (isize, isize),
    from: isize,
    stencil: &Stencil<T, Radius>,
    line: &mut [T],
) {
    let inside = |v: isize, n: usize| v >= 0 && (v as usize) < n;
    let row = if inside(vi, d0) && inside(vj, d1) {
        vi as usize * d1 + vj as usize
    } else {
        match stencil.edge {
            Edge::Duplicate => {
                let clamp = |v: isize, n: usize| v.clamp(0, n as isize - 1) as usize;
                clamp(vi, d0) * d1 + clamp(vj, d1)
            }
            Edge::Cyclic => {
                let wrap = |v: isize, n: usize| v.rem_euclid(n as isize) as usize;
                wrap(vi, d0) * d1 + wrap(vj, d1)
            }
            // The pad value, already there.
            _ => return,
        }
    };
    let src = &input[row * d2..(row + 1) * d2];
    let n = d2 as isize;
    let outside = |vk: isize| match stencil.edge {
        Edge::Duplicate => src[vk.clamp(0, n - 1) as usize],
        Edge::Cyclic => src[vk.rem_euclid(n) as usize],
        _ => stencil.pad,
    };
    // Three runs: the columns before the row, those inside it (copied), those after it.
    let to = from + line.len() as isize;
    let (a, b) = (from.clamp(0, n), to.clamp(0, n).max(from.clamp(0, n)));
    let (before, rest) = line.split_at_mut((a - from).clamp(0, line.len() as isize) as usize);
    for (vk, x) in (from..).zip(before.iter_mut()) {
        *x = outside(vk);
    }
    let (inside, after) = rest.split_at_mut((b - a) as usize);
    inside.copy_from_slice(&src[a as usize..b as usize]);
    for (vk, x) in (b.max(from)..).zip(after.iter_mut()) {
        *x = outside(vk);
    }
}

/// The interior outputs of one row: `out[k]` is the window starting at `span[k]`. Common
/// radii get a copy of the loop with the radius as a constant, so that the window's radius
/// checks fold away.
#[inline]
fn interior<F: Window3Fn>(
    span: &[F::Elem],
    strides: (usize, usize),
    radius: Radius,
    out: &mut [F::Out],
    uniforms: &F::Uniforms,
) {
    match radius {
        (1, 1, 1) => interior_with::<F>(span, strides, (1, 1, 1), out, uniforms),
        (2, 2, 2) => interior_with::<F>(span, strides, (2, 2, 2), out, uniforms),
        _ => interior_with::<F>(span, strides, radius, out, uniforms),
    }
}

#[inline(always)]
fn interior_with<F: Window3Fn>(
    span: &[F::Elem],
    strides: (usize, usize),
    radius: Radius,
    out: &mut [F::Out],
    uniforms: &F::Uniforms,
) {
    // Each window a slice of exactly its size: `Window3` then reads it with no bounds check
    // (see its `Index`), as `Window2` does in the 2D loop.
    let needed = 2 * radius.0 * strides.0 + 2 * radius.1 * strides.1 + 2 * radius.2 + 1;
    let span = &span[..out.len() + needed - 1];
    for (w, o) in span.windows(needed).zip(out.iter_mut()) {
        *o = F::apply(Window3::new(w, strides, radius), uniforms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::*;

    /// The output at `(i, j, k)`, its window built from the edge mode in `border`.
    fn border_3d<F: Window3Fn>(
        input: &[F::Elem],
        dims: (usize, usize, usize),
        (i, j, k): (usize, usize, usize),
        stencil: &Stencil<F::Elem, Radius>,
        border: &mut Vec<F::Elem>,
        uniforms: &F::Uniforms,
    ) -> F::Out {
        let (r0, r1, r2) = stencil.radius;
        let (w1, w2) = (2 * r1 + 1, 2 * r2 + 1);
        border.clear();
        for di in -(r0 as isize)..=r0 as isize {
            for dj in -(r1 as isize)..=r1 as isize {
                for dk in -(r2 as isize)..=r2 as isize {
                    let at = (i as isize + di, j as isize + dj, k as isize + dk);
                    border.push(element_3d(input, dims, at, stencil));
                }
            }
        }
        F::apply(
            Window3::new(border, (w1 * w2, w2), stencil.radius),
            uniforms,
        )
    }

    /// The element at `(vi, vj, vk)`, which may lie outside the tensor: there the edge mode
    /// says what is read (the pad value for `Pad`, and for `None`, whose outputs there are not
    /// written).
    fn element_3d<T: DeviceType>(
        input: &[T],
        (d0, d1, d2): (usize, usize, usize),
        (vi, vj, vk): (isize, isize, isize),
        stencil: &Stencil<T, Radius>,
    ) -> T {
        let inside = |v: isize, n: usize| v >= 0 && (v as usize) < n;
        let at = |i: usize, j: usize, k: usize| input[(i * d1 + j) * d2 + k];
        if inside(vi, d0) && inside(vj, d1) && inside(vk, d2) {
            return at(vi as usize, vj as usize, vk as usize);
        }
        match stencil.edge {
            Edge::Duplicate => {
                let clamp = |v: isize, n: usize| v.clamp(0, n as isize - 1) as usize;
                at(clamp(vi, d0), clamp(vj, d1), clamp(vk, d2))
            }
            Edge::Cyclic => {
                let wrap = |v: isize, n: usize| v.rem_euclid(n as isize) as usize;
                at(wrap(vi, d0), wrap(vj, d1), wrap(vk, d2))
            }
            _ => stencil.pad,
        }
    }

    #[userfn]
    fn sum27(w: Window3<i64>) -> i64 {
        let mut s = 0;
        for a in -1..2 {
            for b in -1..2 {
                for c in -1..2 {
                    s = s * 3 + w[(a, b, c)];
                }
            }
        }
        s
    }

    #[userfn]
    fn sum15(w: Window3<i64>) -> i64 {
        let mut s = 0;
        for a in -1..2 {
            for c in -2..3 {
                s = s * 3 + w[(a, 0, c)];
            }
        }
        s
    }

    /// Every output against the per-element definition, for every edge mode, shapes with
    /// and without an interior, and the rows computed in bands of several sizes (as Rayon
    /// splits them, cutting runs of inner rows).
    fn check<F: Window3Fn<Elem = i64, Out = i64, Uniforms = ()>>(radius: Radius) {
        let shapes = [
            (2, 2, 2),
            (3, 4, 5),
            (5, 3, 2),
            (4, 4, 7),
            (5, 6, 9),
            (1, 3, 3),
        ];
        for dims in shapes {
            let n = dims.0 * dims.1 * dims.2;
            let input: Vec<i64> = (0..n as i64).map(|x| x * 7 % 11 - 5).collect();
            for edge in [Edge::Duplicate, Edge::Cyclic, Edge::Pad, Edge::None] {
                let stencil = Stencil {
                    radius,
                    edge,
                    pad: 100,
                };
                let mut border = Vec::new();
                let inside = |v: usize, r: usize, d: usize| v >= r && v + r < d;
                let want: Vec<i64> = (0..n)
                    .map(|at| {
                        let (i, j, k) = (at / (dims.1 * dims.2), at / dims.2 % dims.1, at % dims.2);
                        let inner = inside(i, radius.0, dims.0)
                            && inside(j, radius.1, dims.1)
                            && inside(k, radius.2, dims.2);
                        if edge == Edge::None && !inner {
                            -1
                        } else {
                            border_3d::<F>(&input, dims, (i, j, k), &stencil, &mut border, &())
                        }
                    })
                    .collect();
                for band in [1, 2, 3, dims.0 * dims.1] {
                    let mut out = vec![-1i64; n];
                    for (b, o) in out.chunks_mut(band * dims.2).enumerate() {
                        overlap_3d_rows::<F>(&input, dims, o, b * band, &stencil, &());
                    }
                    assert_eq!(out, want, "{dims:?} {edge:?} radius {radius:?} band {band}");
                }
            }
        }
    }

    #[test]
    fn rows_match_the_definition() {
        check::<sum27>((1, 1, 1));
        check::<sum15>((1, 0, 2));
    }
}
