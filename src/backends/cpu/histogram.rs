//! The Histogram loops, shared by the `cpu` and `rayon` backends: each counts one range of
//! positions into its own table of `u32`s (per thread on Rayon), and the tables are added
//! into `u64` totals before `counts` is written.

use std::ops::Range;

use crate::plan::HostSlices;
use crate::skeletons::Count;
use crate::userfn::{ContainerArgs, ElementwiseFn, IndexKind, UserFn};
use crate::{Error, Result};

/// Positions one `u32` table counts at most, so that no bin of it can wrap.
pub(crate) const TABLE_SPAN: usize = 1 << 31;

/// The bins of one range that fell outside the table: how many, and the largest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Outside {
    pub count: u64,
    pub max: u32,
}

impl Outside {
    /// Both ranges' bins outside the table.
    pub(crate) fn merge(self, other: Outside) -> Outside {
        Outside {
            count: self.count + other.count,
            max: self.max.max(other.max),
        }
    }

    /// The error of a checked call whose function `name` returned these bins (`kind`
    /// "bin") or keys ("key") for a table of `len` (`Ok` when there were none). Every
    /// backend reports the same values, so the error does not depend on the backend or
    /// the order of the work.
    pub(crate) fn check(self, name: &str, kind: &str, len: usize) -> Result<()> {
        if self.count == 0 {
            return Ok(());
        }
        Err(Error::UserFunction {
            function: name.to_string(),
            what: format!(
                "returned {kind} {} for a table of {len} {kind}s ({} element(s) outside \
                 0..{len}; an unchecked call drops them)",
                self.max, self.count
            ),
            index: Some(i64::from(self.max)),
            len: Some(len as u64),
        })
    }
}

/// Adds the bins of `positions` (whose inputs are `inputs`, starting at element
/// `positions.start` of the call) to `table`; at most [`TABLE_SPAN`] positions.
#[inline]
pub(crate) fn count_range<F: ElementwiseFn + UserFn<Out = u32>>(
    arrays: <F::Arrays as ContainerArgs>::Refs<'_>,
    inputs: impl HostSlices<Elems = F::Elems>,
    positions: Range<usize>,
    cols: usize,
    uniforms: &F::Uniforms,
    table: &mut [u32],
) -> Outside {
    let (first, n) = (positions.start, positions.len());
    debug_assert!(n <= TABLE_SPAN);
    // Re-slicing to exactly `n` lets the compiler drop the bounds checks in `at`.
    let inputs = inputs.slice(0..n);
    let mut outside = Outside::default();
    for k in 0..n {
        let b = F::apply_with(
            F::Index::from_flat(first + k, cols),
            arrays,
            inputs.at(k),
            uniforms,
        );
        match table.get_mut(b as usize) {
            Some(c) => *c += 1,
            None => {
                outside.count += 1;
                outside.max = outside.max.max(b);
            }
        }
    }
    outside
}

/// Adds a range's table into the totals.
#[inline]
pub(crate) fn add_table(totals: &mut [u64], table: &[u32]) {
    for (t, &c) in totals.iter_mut().zip(table) {
        *t += u64::from(c);
    }
}

/// Writes the totals into `counts` (wrapping `u32` counts).
pub(crate) fn store<C: Count>(counts: &mut [C], totals: &[u64]) {
    for (c, &t) in counts.iter_mut().zip(totals) {
        *c = C::from_u64(t);
    }
}
