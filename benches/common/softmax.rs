//! The online row softmax's user functions (a `(max, sum)` statistic per row, merged online,
//! then one 2D-index Map), shared by the benches that time it and the backend suite that
//! tests it (`tests/suite/softmax.rs`); `examples/softmax.rs` has the same functions for
//! users to read in one file.

use skel::prelude::*;

/// A row's online softmax statistic: its maximum and the sum of `exp(x - max)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
pub struct RowStat {
    pub max: f32,
    pub sum: f32,
}

#[userfn]
pub fn to_stat(x: f32) -> RowStat {
    RowStat { max: x, sum: 1.0 }
}

/// Two statistics as one: the smaller maximum's sum rescaled to the larger.
#[userfn]
pub fn merge(a: RowStat, b: RowStat) -> RowStat {
    let mut hi = a;
    let mut lo = b;
    if b.max > a.max {
        hi = b;
        lo = a;
    }
    RowStat {
        max: hi.max,
        sum: hi.sum + lo.sum * (lo.max - hi.max).exp(),
    }
}

#[userfn]
pub fn normalise(#[index] (i, _j): (usize, usize), x: f32, stats: &[RowStat]) -> f32 {
    let s = stats[i];
    (x - s.max).exp() / s.sum
}
