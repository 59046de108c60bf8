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
    let mut slab = Vec::new();
    for (n, out_row) in out.chunks_mut(d2).enumerate() {
        let row = first_row + n;
        let (i, j) = (row / d1, row % d1);
        let inner_row = i >= r0 && i + r0 < d0 && j >= r1 && j + r1 < d1;
        // Columns whose window lies inside the tensor: `lo..hi` (empty on a border row).
        let (lo, hi) = if inner_row && d2 > 2 * r2 {
            (r2, d2 - r2)
        } else {
            (d2, d2)
        };
        // In column order, so that a function that faults at several outputs reports the
        // same one on every backend that goes in order.
        border_run::<F>(
            input,
            dims,
            (i, j),
            0..lo,
            stencil,
            &mut slab,
            out_row,
            uniforms,
        );
        if lo < hi {
            // The window of output `(i, j, k)` starts at `(i - r0, j - r1, k - r2)`.
            let first = ((i - r0) * d1 + (j - r1)) * d2;
            interior::<F>(
                &input[first..],
                (d1 * d2, d2),
                stencil.radius,
                &mut out_row[lo..hi],
                uniforms,
            );
        }
        border_run::<F>(
            input,
            dims,
            (i, j),
            hi..d2,
            stencil,
            &mut slab,
            out_row,
            uniforms,
        );
    }
}

/// The outputs `(i, j, k)` for `k` in `ks`, whose windows reach outside the tensor (left
/// untouched for `Edge::None`). Their neighbourhood is built once, from the edge mode, as a
/// small tensor `slab` of `2 r0 + 1` planes of `2 r1 + 1` rows covering columns
/// `ks.start - r2 .. ks.end + r2`, and then read in place like the interior: a window built
/// per output would read each element up to `(2 r0 + 1)(2 r1 + 1)(2 r2 + 1)` times through
/// the edge logic, which made the border the larger part of a step.
#[allow(clippy::too_many_arguments)]
fn border_run<F: Window3Fn>(
    input: &[F::Elem],
    dims: (usize, usize, usize),
    (i, j): (usize, usize),
    ks: std::ops::Range<usize>,
    stencil: &Stencil<F::Elem, Radius>,
    slab: &mut Vec<F::Elem>,
    out_row: &mut [F::Out],
    uniforms: &F::Uniforms,
) {
    if ks.is_empty() || stencil.edge == Edge::None {
        return;
    }
    let (r0, r1, r2) = stencil.radius;
    let (len, w2) = (ks.len() + 2 * r2, 2 * r1 + 1);
    slab.clear();
    slab.resize((2 * r0 + 1) * w2 * len, stencil.pad);
    let mut lines = slab.chunks_exact_mut(len);
    for di in -(r0 as isize)..=r0 as isize {
        for dj in -(r1 as isize)..=r1 as isize {
            if let Some(line) = lines.next() {
                let at = (i as isize + di, j as isize + dj);
                slab_row(
                    input,
                    dims,
                    at,
                    ks.start as isize - r2 as isize,
                    stencil,
                    line,
                );
            }
        }
    }
    interior::<F>(
        slab,
        (w2 * len, len),
        stencil.radius,
        &mut out_row[ks],
        uniforms,
    );
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
    for (vk, x) in (from..).zip(line.iter_mut()) {
        *x = if inside(vk, d2) {
            src[vk as usize]
        } else {
            match stencil.edge {
                Edge::Duplicate => src[vk.clamp(0, n - 1) as usize],
                Edge::Cyclic => src[vk.rem_euclid(n) as usize],
                _ => stencil.pad,
            }
        };
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

    /// Every output against the per-element definition, for every edge mode and shapes
    /// with and without an interior.
    #[test]
    fn rows_match_the_definition() {
        for dims in [(2, 2, 2), (3, 4, 5), (5, 3, 2), (4, 4, 7)] {
            let n = dims.0 * dims.1 * dims.2;
            let input: Vec<i64> = (0..n as i64).map(|x| x * 7 % 11 - 5).collect();
            for edge in [Edge::Duplicate, Edge::Cyclic, Edge::Pad, Edge::None] {
                let stencil = Stencil {
                    radius: (1, 1, 1),
                    edge,
                    pad: 100,
                };
                let mut out = vec![-1i64; n];
                overlap_3d_rows::<sum27>(&input, dims, &mut out, 0, &stencil, &());
                let mut border = Vec::new();
                for i in 0..dims.0 {
                    for j in 0..dims.1 {
                        for k in 0..dims.2 {
                            let inner = (1..dims.0 - 1).contains(&i)
                                && (1..dims.1 - 1).contains(&j)
                                && (1..dims.2 - 1).contains(&k);
                            let want = if edge == Edge::None && !inner {
                                -1
                            } else {
                                border_3d::<sum27>(
                                    &input,
                                    dims,
                                    (i, j, k),
                                    &stencil,
                                    &mut border,
                                    &(),
                                )
                            };
                            let got = out[(i * dims.1 + j) * dims.2 + k];
                            assert_eq!(got, want, "{dims:?} {edge:?} at ({i}, {j}, {k})");
                        }
                    }
                }
            }
        }
    }
}
