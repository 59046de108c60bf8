//! MapPairs over distributed operands: the vertical operand `v` and the output stay
//! distributed by rows, the horizontal operand `h` is needed whole by every rank.
//!
//! `h` moves by an all-gather (cached in its container like a container argument), not by
//! a ring of `size - 1` block passes: every rank's output block already holds `h.len()`
//! elements per row it owns, so a whole `h` costs no more memory than the output does, and
//! one backend call per rank over the whole `h` writes the block in place (one kernel
//! launch, no temporaries) and folds every row of MapPairsReduce in the same order as on
//! one process.

use super::Operand;
use crate::containers::{Arg, ArgMut, Shape};
use crate::plan::ArgTuple;
use crate::{DeviceType, Error, Result};

/// The operands of a MapPairs / MapPairsReduce call as the ranks compare them: `v`, `h`,
/// the output, then the container arguments.
pub(crate) fn pair_operands<'c, A: DeviceType, B: DeviceType, U: DeviceType>(
    (v, h, out): (&Arg<'_, A>, &Arg<'_, B>, &ArgMut<'_, U>),
    arrays: &impl ArgTuple<'c>,
) -> Vec<Operand> {
    let mut operands = vec![Operand::of(v), Operand::of(h), Operand::of_mut(out)];
    operands.extend(Operand::all(arrays.shapes(), arrays.spreads()));
    operands
}

/// Checks of a distributed MapPairs / MapPairsReduce (`operands`: v, h, the output) on the
/// global shapes, which every rank shares, so that all ranks pass or fail alike: `v` and
/// the output are distributed, `v` and `h` are vectors, the output is `out(rows, cols)`.
/// Returns the global `(rows, cols)` of the pairs.
pub(crate) fn check_pairs(
    skeleton: &str,
    operands: &[Operand],
    out: impl Fn(usize, usize) -> Shape,
) -> Result<(usize, usize)> {
    for (k, what) in [(0, "vertical operand v"), (2, "output")] {
        if !operands[k].is_distributed() {
            return Err(Error::InvalidArgument(format!(
                "distributed {skeleton}: the {what} is a local container; v and the output are \
                 distributed by rows (DistVector / DistMatrix), h may be either"
            )));
        }
    }
    let lengths = match (operands[0].global(), operands[1].global()) {
        (Shape::Vector(rows), Shape::Vector(cols)) => (rows, cols),
        (Shape::Vector(_), other) => {
            return Err(Error::shape(
                format!("{skeleton} horizontal operand h"),
                "a vector",
                other,
            ))
        }
        (other, _) => {
            return Err(Error::shape(
                format!("{skeleton} vertical operand v"),
                "a vector",
                other,
            ))
        }
    };
    let want = out(lengths.0, lengths.1);
    if operands[2].global() != want {
        return Err(Error::shape(
            format!("distributed {skeleton} output"),
            want,
            operands[2].global(),
        ));
    }
    Ok(lengths)
}
