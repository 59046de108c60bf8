//! The ReduceByKey loop, shared by the `cpu` and `rayon` backends: each merges one range of
//! positions into its own table (per task on Rayon), and the tables are merged key by key.

use std::ops::Range;

use super::histogram::Outside;
use crate::backends::BinaryFn;
use crate::plan::HostSlices;
use crate::userfn::{ContainerArgs, ElementwiseFn, IndexKind, UserFn};
use crate::DeviceType;

/// Merges the values of `positions` (whose inputs are `inputs`, starting at element
/// `positions.start` of the call) into `table` by key.
#[inline]
pub(crate) fn merge_range<F, R, V>(
    arrays: <F::Arrays as ContainerArgs>::Refs<'_>,
    inputs: impl HostSlices<Elems = F::Elems>,
    positions: Range<usize>,
    cols: usize,
    uniforms: &F::Uniforms,
    table: &mut [V],
) -> Outside
where
    F: ElementwiseFn + UserFn<Out = (u32, V)>,
    R: BinaryFn<V>,
    V: DeviceType,
{
    let (first, n) = (positions.start, positions.len());
    // Re-slicing to exactly `n` lets the compiler drop the bounds checks in `at`.
    let inputs = inputs.slice(0..n);
    let mut outside = Outside::default();
    for k in 0..n {
        let (key, v) = F::apply_with(
            F::Index::from_flat(first + k, cols),
            arrays,
            inputs.at(k),
            uniforms,
        );
        match table.get_mut(key as usize) {
            Some(acc) => *acc = R::apply((), (*acc, v), &()),
            None => {
                outside.count += 1;
                outside.max = outside.max.max(key);
            }
        }
    }
    outside
}

/// Merges table `b` into table `a`, key by key.
pub(crate) fn merge_tables<R: BinaryFn<V>, V: DeviceType>(a: &mut [V], b: &[V]) {
    for (x, &y) in a.iter_mut().zip(b) {
        *x = R::apply((), (*x, y), &());
    }
}
