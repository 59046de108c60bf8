//! Reduce over distributed operands: local folds, then the partials in rank order.

use super::{fold, Call};
use crate::backends::{dispatch, BinaryFn};
use crate::containers::{Arg, ArgMut, Output, Vector};
use crate::plan::{self, Axis};
use crate::skeletons::Options;
use crate::{DeviceType, Error, Result};

/// `start ⊕ v[0] ⊕ ... ⊕ v[n-1]` over the blocks of all ranks, on every rank.
pub(crate) fn reduce<F: BinaryFn<T>, T: DeviceType>(
    call: &Call,
    options: Options,
    input: Arg<'_, T>,
    start: T,
) -> Result<T> {
    let local = partial::<F, T>(options, input).map(Vec::from_iter);
    let partials = call.exchange(local)?;
    Ok(fold::<F, T>(Some(start), partials.into_iter().flatten())?.unwrap_or(start))
}

/// The fold of one block without a start value (`None` for an empty block): the start
/// belongs to the whole fold, once, and `f` need not have an identity.
pub(crate) fn partial<F: BinaryFn<T>, T: DeviceType>(
    options: Options,
    input: Arg<'_, T>,
) -> Result<Option<T>> {
    let n = input.shape().len();
    if n == 0 {
        return Ok(None);
    }
    let first = input.sub(0..1).host()?[0];
    let rest = input.sub(1..n);
    dispatch!(options, F::NAME, |exec| exec.reduce(
        plan::Reduce::<(F, T)> {
            input: rest,
            start: first
        }
    ))
    .map(Some)
}

/// Rows of a distributed matrix into a distributed vector (each rank its own rows), or
/// columns into an ordinary vector, the same on every rank.
pub(crate) fn reduce_axis<F: BinaryFn<T>, T: DeviceType + Default>(
    call: &Call,
    options: Options,
    input: Arg<'_, T>,
    mut out: ArgMut<'_, T>,
    axis: Axis,
) -> Result<()> {
    let rows = input.shape().dims().0;
    if axis == Axis::Rows {
        if out.spread().is_none() || input.spread().is_none() {
            return Err(Error::InvalidArgument(
                "distributed Reduce rows: a DistMatrix reduces into a DistVector (one value per row, on the rank holding the row)".into(),
            ));
        }
        let local = if rows == 0 {
            Ok(())
        } else {
            dispatch!(options, F::NAME, |exec| exec
                .reduce_axis(plan::ReduceAxis::<(F, T)> { input, out, axis }))
        };
        return call.finish(local);
    }
    if out.spread().is_some() || input.spread().is_none() {
        return Err(Error::InvalidArgument(
            "distributed Reduce cols: a DistMatrix reduces into an ordinary Vector (one value per column, the same on every rank)".into(),
        ));
    }
    let cols = out.shape().len();
    let local = if rows == 0 {
        Ok(Vec::new())
    } else {
        let mut part = Vector::<T>::zeroed(cols);
        dispatch!(options, F::NAME, |exec| exec.reduce_axis(
            plan::ReduceAxis::<(F, T)> {
                input,
                out: part.arg_mut(),
                axis
            }
        ))
        .and_then(|()| part.try_as_slice().map(<[T]>::to_vec))
    };
    let parts = call.exchange(local)?;
    let result = (|| {
        let dst = out.host_overwrite()?;
        for (c, slot) in dst.iter_mut().enumerate() {
            let column = parts.iter().filter(|p| !p.is_empty()).map(|p| p[c]);
            if let Some(v) = fold::<F, T>(None, column)? {
                *slot = v;
            }
        }
        Ok(())
    })();
    call.finish(result)
}
