//! MapOverlap over distributed operands: each rank posts non-blocking sends of the units
//! (elements of a vector, rows of a matrix) its neighbours' windows read and receives of
//! the `r` units beyond either end of its block, computes the interior of its block (the
//! units whose windows lie in the block) while they are in flight, then its two borders.

use std::ops::Range;

use super::{Blocks, Call};
use crate::backends::{dispatch, Stencil};
use crate::containers::host::{as_bytes, from_bytes};
use crate::containers::{Arg, ArgMut, Input, Matrix, Output, Vector};
use crate::plan::{self, Axis};
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
            dispatch!(options, F::NAME, |exec| exec.map_overlap(
                plan::MapOverlap::<F> {
                    input,
                    out,
                    stencil,
                    axis,
                    uniforms
                }
            ))
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
    let local = halo.run(call, input, &mut out, stencil.pad, |a, b| {
        dispatch!(options, F::NAME, |exec| exec.map_overlap(
            plan::MapOverlap::<F> {
                input: a,
                out: b,
                stencil,
                axis,
                uniforms
            }
        ))
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
    let local = halo.run(call, input, &mut out, stencil.pad, |a, b| {
        dispatch!(options, F::NAME, |exec| exec.map_overlap_2d(
            plan::MapOverlap2d::<F> {
                input: a,
                out: b,
                stencil,
                uniforms
            }
        ))
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

    /// Runs the stencil on this rank's block: posts the halo messages, computes the
    /// interior on the block itself meanwhile, then the `r` units at either end on the
    /// block extended by the halo. A block of at most `2r` units has no interior: it waits
    /// and computes all of it on the extended block (its halo may come from several ranks
    /// on either side). Errors of this rank, or of a rank that could send no halo, are
    /// this rank's outcome (`Call::finish` makes them every rank's).
    fn run<T: DeviceType, U: DeviceType>(
        &self,
        call: &Call,
        input: Arg<'_, T>,
        out: &mut ArgMut<'_, U>,
        pad: T,
        mut run: impl FnMut(Arg<'_, T>, ArgMut<'_, U>) -> Result<()>,
    ) -> Result<()> {
        let me = self.rank;
        let unit_bytes = self.unit * std::mem::size_of::<T>();
        // Every rank derives every message size from the global shape, so all of them
        // refuse an oversized message together, before any is sent.
        let widest = 2 * self.radius.saturating_mul(unit_bytes);
        if widest.saturating_add(1) > i32::MAX as usize {
            return Err(Error::InvalidArgument(format!(
                "MapOverlap: a halo of 2 x {} units of {unit_bytes} bytes exceeds MPI's \
                 message limit of 2^31 - 1 bytes; use a smaller radius or fewer columns",
                self.radius
            )));
        }
        let block = input.host();
        let sends = self.sends(block.as_ref().ok().copied());
        let recvs: Vec<(usize, usize)> = (0..call.size())
            .filter(|&q| q != me)
            .map(|q| (q, self.units_from(q) * unit_bytes))
            .filter(|&(_, n)| n > 0)
            .map(|(q, n)| (q, n + 1))
            .collect();
        let (len, r) = (self.blocks.range(me).len(), self.reach(me));
        let overlapped = len > 2 * r && block.is_ok();
        let mut interior = Ok(());
        let got = call.exchange_during(&sends, &recvs, &mut || {
            if overlapped {
                // Straight on the operands: the units within `r` of the block's ends come
                // out wrong (or untouched) here and are overwritten below.
                interior = run(input, out.reborrow());
            }
        });
        interior?;
        let block = block?;
        let mut received = vec![&[][..]; call.size()];
        for (&(q, _), msg) in recvs.iter().zip(&got) {
            received[q] = open_halo(q, msg)?;
        }
        let ext = self.extend(block, &received, pad)?;
        if overlapped {
            self.compute(&ext, 0..r, out, &mut run)?;
            self.compute(&ext, len - r..len, out, &mut run)
        } else {
            self.compute(&ext, 0..len, out, &mut run)
        }
    }

    /// Units of this rank's block that `rank`'s extension reads, in the order it reads them.
    fn read_by(&self, rank: usize) -> impl Iterator<Item = usize> + '_ {
        let mine = self.blocks.range(self.rank);
        self.halo_positions(rank)
            .filter_map(move |e| self.source(rank, e))
            .filter(move |g| mine.contains(g))
    }

    /// Number of units of this rank's extension that rank `q` holds.
    fn units_from(&self, q: usize) -> usize {
        let theirs = self.blocks.range(q);
        self.halo_positions(self.rank)
            .filter_map(|e| self.source(self.rank, e))
            .filter(|g| theirs.contains(g))
            .count()
    }

    /// The message to every other rank that reads units of this block: a status byte, then
    /// the units (zeros after a failure: the receiver knows the size, not the failure).
    fn sends<T: DeviceType>(&self, block: Option<&[T]>) -> Vec<(usize, Vec<u8>)> {
        let start = self.blocks.range(self.rank).start;
        let unit_bytes = self.unit * std::mem::size_of::<T>();
        (0..self.blocks.ranks())
            .filter(|&p| p != self.rank)
            .filter_map(|p| {
                let units: Vec<usize> = self.read_by(p).collect();
                if units.is_empty() {
                    return None;
                }
                let mut msg = Vec::with_capacity(1 + units.len() * unit_bytes);
                match block {
                    Some(block) => {
                        msg.push(HALO_OK);
                        for g in units {
                            let at = (g - start) * self.unit;
                            msg.extend_from_slice(as_bytes(&block[at..at + self.unit]));
                        }
                    }
                    None => msg.resize(1 + units.len() * unit_bytes, 0),
                }
                Some((p, msg))
            })
            .collect()
    }

    /// This rank's block with its halo, from the units `received` from each rank.
    fn extend<T: DeviceType>(&self, block: &[T], received: &[&[u8]], pad: T) -> Result<Vec<T>> {
        let mine = self.blocks.range(self.rank);
        let (len, r) = (mine.len(), self.reach(self.rank));
        let unit_bytes = self.unit * std::mem::size_of::<T>();
        let mut read = vec![0usize; received.len()];
        let mut ext = Vec::with_capacity((len + 2 * r) * self.unit);
        for e in 0..len + 2 * r {
            match self.source(self.rank, e) {
                None => ext.extend(std::iter::repeat(pad).take(self.unit)),
                Some(g) if mine.contains(&g) => {
                    let at = (g - mine.start) * self.unit;
                    ext.extend_from_slice(&block[at..at + self.unit]);
                }
                Some(g) => {
                    let q = self.blocks.owner(g);
                    let part = received[q]
                        .get(read[q]..read[q] + unit_bytes)
                        .ok_or_else(|| Error::Distributed {
                            rank: q,
                            message: "sent fewer halo elements than its block provides \
                                      (ranks disagree on the distribution)"
                                .into(),
                        })?;
                    ext.extend(from_bytes::<T>(part));
                    read[q] += unit_bytes;
                }
            }
        }
        Ok(ext)
    }

    /// Computes the block's units `units` on the part of the extension `ext` their windows
    /// read, and writes them to `out`, except, with `Edge::None`, the units within
    /// `radius` of the container's ends, which keep their values as on one process.
    fn compute<T: DeviceType, U: DeviceType>(
        &self,
        ext: &[T],
        units: Range<usize>,
        out: &mut ArgMut<'_, U>,
        run: &mut impl FnMut(Arg<'_, T>, ArgMut<'_, U>) -> Result<()>,
    ) -> Result<()> {
        let mine = self.blocks.range(self.rank);
        let (len, r, unit) = (mine.len(), self.reach(self.rank), self.unit);
        if units.is_empty() {
            return Ok(());
        }
        // Extension positions units.start .. units.end + 2r hold the windows of `units`.
        let piece = units.len() + 2 * r;
        let input = ext[units.start * unit..(units.end + 2 * r) * unit].to_vec();
        // The output's current values fill the piece: what the stencil leaves as it was
        // (Edge::None, also across the columns of a 2D stencil) must come back unchanged.
        let current = out.host_mut()?;
        let mut init = Vec::with_capacity(piece * unit);
        for k in 0..piece {
            let u = (units.start + k).saturating_sub(r).min(len - 1);
            init.extend_from_slice(&current[u * unit..(u + 1) * unit]);
        }
        let result = if self.matrix {
            let a = Matrix::from_vec(piece, unit, input)?;
            let mut b = Matrix::from_vec(piece, unit, init)?;
            run(a.arg(), b.arg_mut())?;
            b.try_as_slice()?.to_vec()
        } else {
            let a = Vector::from_vec(input);
            let mut b = Vector::from_vec(init);
            run(a.arg(), b.arg_mut())?;
            b.try_as_slice()?.to_vec()
        };
        let dst = out.host_mut()?;
        for (k, u) in units.enumerate() {
            let g = mine.start + u;
            if self.edge == Edge::None && (g < self.radius || g + self.radius >= self.n) {
                continue;
            }
            dst[u * unit..(u + 1) * unit]
                .copy_from_slice(&result[(k + r) * unit..(k + r + 1) * unit]);
        }
        Ok(())
    }
}

const HALO_OK: u8 = 1;

/// The units in rank `rank`'s halo message, or the error it reported by its status byte.
fn open_halo(rank: usize, msg: &[u8]) -> Result<&[u8]> {
    match msg.split_first() {
        Some((&HALO_OK, units)) => Ok(units),
        _ => Err(Error::Distributed {
            rank,
            message: "could not read its block to send the halo (its own error says why)".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::{Blocks, Edge, Halo};

    fn halo(n: usize, ranks: usize, rank: usize, radius: usize, edge: Edge) -> Halo {
        Halo {
            blocks: Blocks::new(n, ranks),
            n,
            unit: 1,
            matrix: false,
            radius,
            edge,
            rank,
        }
    }

    /// What each rank sends to another is exactly what that rank expects from it, in
    /// number and in the order it reads the units: the sizes of the point-to-point
    /// messages agree on both sides for every distribution, short blocks included.
    #[test]
    fn senders_and_receivers_agree_on_every_message() {
        for n in [1, 2, 3, 5, 7, 16] {
            for ranks in 1..=5 {
                for radius in 0..=n.min(3) {
                    for edge in [Edge::Duplicate, Edge::Cyclic, Edge::Pad, Edge::None] {
                        for s in 0..ranks {
                            for p in (0..ranks).filter(|&p| p != s) {
                                let sender = halo(n, ranks, s, radius, edge);
                                let receiver = halo(n, ranks, p, radius, edge);
                                let sent: Vec<usize> = sender.read_by(p).collect();
                                let wanted: Vec<usize> = receiver
                                    .halo_positions(p)
                                    .filter_map(|e| receiver.source(p, e))
                                    .filter(|g| receiver.blocks.range(s).contains(g))
                                    .collect();
                                assert_eq!(
                                    sent, wanted,
                                    "n {n} ranks {ranks} r {radius} {edge:?} {s}->{p}"
                                );
                                assert_eq!(receiver.units_from(s), sent.len());
                            }
                        }
                    }
                }
            }
        }
    }
}
