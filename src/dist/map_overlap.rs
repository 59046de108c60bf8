//! MapOverlap over distributed operands: each rank receives the `r` units (elements of a
//! vector, rows of a matrix) beyond either end of its block from the ranks holding them,
//! and runs its block extended by them.

use super::{Blocks, Call};
use crate::backends::{dispatch, Stencil};
use crate::containers::host::{as_bytes, from_bytes};
use crate::containers::{Arg, ArgMut, Input, Matrix, Output, Vector};
use crate::plan::Axis;
use crate::skeletons::{Edge, Options};
use crate::userfn::{Window2Fn, WindowFn};
use crate::{DeviceType, Error, Result};

/// A 1D stencil on blocks of a distributed vector, or along the columns of a distributed
/// matrix (along rows, every window lies in one row and so on one rank).
pub(crate) fn map_overlap<F: WindowFn>(
    call: &Call,
    options: Options,
    input: Arg<'_, F::Elem>,
    mut out: ArgMut<'_, F::Out>,
    stencil: Stencil<F::Elem, usize>,
    axis: Axis,
    uniforms: &F::Uniforms,
) -> Result<()> {
    if axis == Axis::Rows {
        let local = if input.shape().is_empty() {
            Ok(())
        } else {
            dispatch!(options, F::NAME, |exec| exec
                .map_overlap::<F>(input, out, stencil, axis, uniforms))
        };
        return call.finish(local);
    }
    let halo = Halo::new(
        call,
        &input,
        axis == Axis::Cols,
        stencil.radius,
        stencil.edge,
    );
    let ext = halo.extend(call, input.host(), stencil.pad)?;
    let local = halo.compute(ext, &mut out, |a, b| {
        dispatch!(options, F::NAME, |exec| exec
            .map_overlap::<F>(a, b, stencil, axis, uniforms))
    });
    call.finish(local)
}

/// A 2D stencil on a matrix distributed by rows: the halo is `radius.0` whole rows.
pub(crate) fn map_overlap_2d<F: Window2Fn>(
    call: &Call,
    options: Options,
    input: Arg<'_, F::Elem>,
    mut out: ArgMut<'_, F::Out>,
    stencil: Stencil<F::Elem, (usize, usize)>,
    uniforms: &F::Uniforms,
) -> Result<()> {
    let halo = Halo::new(call, &input, true, stencil.radius.0, stencil.edge);
    let ext = halo.extend(call, input.host(), stencil.pad)?;
    let local = halo.compute(ext, &mut out, |a, b| {
        dispatch!(options, F::NAME, |exec| exec
            .map_overlap_2d::<F>(a, b, stencil, uniforms))
    });
    call.finish(local)
}

/// How the blocks of one distribution are extended by `radius` units on either side.
struct Halo {
    blocks: Blocks,
    /// Units in the whole container.
    n: usize,
    /// Elements per unit: 1 for a vector, the columns of a matrix.
    unit: usize,
    matrix: bool,
    radius: usize,
    edge: Edge,
    rank: usize,
}

impl Halo {
    fn new<T: DeviceType>(
        call: &Call,
        input: &Arg<'_, T>,
        by_rows: bool,
        radius: usize,
        edge: Edge,
    ) -> Self {
        let global = input.spread().map_or(input.shape(), |s| s.global);
        let (n, unit) = if by_rows {
            global.dims()
        } else {
            (global.len(), 1)
        };
        Halo {
            blocks: Blocks::new(n, call.size()),
            n,
            unit,
            matrix: by_rows,
            radius,
            edge,
            rank: call.rank(),
        }
    }

    /// The radius around `rank`'s block: none around an empty block (nothing to compute).
    fn reach(&self, rank: usize) -> usize {
        if self.blocks.range(rank).is_empty() {
            0
        } else {
            self.radius
        }
    }

    /// Positions of the extension of `rank`'s block that lie outside the block.
    fn halo_positions(&self, rank: usize) -> impl Iterator<Item = usize> {
        let (len, r) = (self.blocks.range(rank).len(), self.reach(rank));
        (0..r).chain(r + len..len + 2 * r)
    }

    /// The global unit read at position `e` of `rank`'s extension, after the edge mode;
    /// `None` for the pad value.
    fn source(&self, rank: usize, e: usize) -> Option<usize> {
        let g = (self.blocks.range(rank).start + e) as i128 - self.reach(rank) as i128;
        let n = self.n as i128;
        if (0..n).contains(&g) {
            return Some(g as usize);
        }
        match self.edge {
            Edge::Cyclic => Some(g.rem_euclid(n) as usize),
            Edge::Pad => None,
            // Edge::None computes no output whose window leaves the container; the clamped
            // unit only fills the extension.
            Edge::Duplicate | Edge::None => Some(g.clamp(0, n - 1) as usize),
        }
    }

    /// This rank's block with its halo: the units other ranks hold arrive from them (one
    /// all-to-all exchange in which each rank sends exactly the units the others read).
    fn extend<T: DeviceType>(&self, call: &Call, local: Result<&[T]>, pad: T) -> Result<Vec<T>> {
        let me = self.rank;
        let mine = self.blocks.range(me);
        let unit_of = |block: &[T], g: usize| {
            let at = (g - mine.start) * self.unit;
            block[at..at + self.unit].to_vec()
        };
        let block = match local {
            Ok(block) => block,
            Err(e) => return call.all_to_all(Err(e)).map(|_| Vec::new()),
        };
        let send = (0..call.size())
            .map(|p| {
                let mut bytes = Vec::new();
                if p != me {
                    for g in self.halo_positions(p).filter_map(|e| self.source(p, e)) {
                        if mine.contains(&g) {
                            bytes.extend_from_slice(as_bytes(&unit_of(block, g)));
                        }
                    }
                }
                bytes
            })
            .collect();
        let got = call.all_to_all(Ok(send))?;
        let (len, r) = (mine.len(), self.reach(me));
        let unit_bytes = self.unit * std::mem::size_of::<T>();
        let mut read = vec![0usize; call.size()];
        let mut ext = Vec::with_capacity((len + 2 * r) * self.unit);
        for e in 0..len + 2 * r {
            match self.source(me, e) {
                None => ext.extend(std::iter::repeat(pad).take(self.unit)),
                Some(g) if mine.contains(&g) => ext.extend(unit_of(block, g)),
                Some(g) => {
                    let q = self.blocks.owner(g);
                    let part = got[q].get(read[q]..read[q] + unit_bytes).ok_or_else(|| {
                        Error::Distributed {
                            rank: q,
                            message: "sent fewer halo elements than its block provides (ranks disagree on the distribution)".into(),
                        }
                    })?;
                    ext.extend(from_bytes::<T>(part));
                    read[q] += unit_bytes;
                }
            }
        }
        Ok(ext)
    }

    /// Runs `run` on the extended block and writes its block part to `out`: all of it,
    /// except, with `Edge::None`, the units within `radius` of the container's ends, which
    /// keep their values as on one process.
    fn compute<T: DeviceType, U: DeviceType>(
        &self,
        ext: Vec<T>,
        out: &mut ArgMut<'_, U>,
        run: impl FnOnce(Arg<'_, T>, ArgMut<'_, U>) -> Result<()>,
    ) -> Result<()> {
        let mine = self.blocks.range(self.rank);
        let (len, r, unit) = (mine.len(), self.reach(self.rank), self.unit);
        if len == 0 {
            return Ok(());
        }
        // The output's current values fill the extension: what the stencil leaves as it
        // was (Edge::None) must come back unchanged.
        let current = out.host_mut()?;
        let mut init = Vec::with_capacity((len + 2 * r) * unit);
        for _ in 0..r {
            init.extend_from_slice(&current[..unit]);
        }
        init.extend_from_slice(current);
        for _ in 0..r {
            init.extend_from_slice(&current[current.len() - unit..]);
        }
        let result = if self.matrix {
            let a = Matrix::from_vec(len + 2 * r, unit, ext)?;
            let mut b = Matrix::from_vec(len + 2 * r, unit, init)?;
            run(a.arg(), b.arg_mut())?;
            b.try_as_slice()?.to_vec()
        } else {
            let a = Vector::from_vec(ext);
            let mut b = Vector::from_vec(init);
            run(a.arg(), b.arg_mut())?;
            b.try_as_slice()?.to_vec()
        };
        let dst = out.host_mut()?;
        for (u, g) in mine.enumerate() {
            if self.edge == Edge::None && (g < self.radius || g + self.radius >= self.n) {
                continue;
            }
            dst[u * unit..(u + 1) * unit]
                .copy_from_slice(&result[(u + r) * unit..(u + r + 1) * unit]);
        }
        Ok(())
    }
}
