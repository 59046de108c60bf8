//! MapPairsReduce over distributed operands (`h` whole on every rank, see map_pairs.rs).
//! Row-wise, every fold lies in one row and so on one rank; column-wise, each rank folds
//! its rows for every column, and the owner of each output element folds the ranks'
//! partials in rank order.

use super::{fold, Blocks, Call};
use crate::backends::{dispatch, BinaryFn};
use crate::containers::host::{as_bytes, from_bytes};
use crate::containers::{Arg, ArgMut, Output, Vector};
use crate::plan::{self, Axis};
use crate::skeletons::Options;
use crate::userfn::{ContainerArgs, ElementwiseFn};
use crate::{DeviceType, Error, Result};

/// `out[j] = fold_i m(v[i], h[j])` over the rows of all ranks, `out` distributed over the
/// columns; `h` is whole.
#[allow(clippy::too_many_arguments)]
pub(crate) fn map_pairs_reduce_cols<'c, M, R, A, B>(
    call: &Call,
    options: Options,
    arrays: <M::Arrays as ContainerArgs>::Args<'c>,
    v: Arg<'_, A>,
    h: Arg<'_, B>,
    mut out: ArgMut<'_, M::Out>,
    uniforms: &'c M::Uniforms,
) -> Result<()>
where
    M: ElementwiseFn<Elems = (A, B)>,
    R: BinaryFn<M::Out>,
    A: DeviceType,
    B: DeviceType,
{
    let (rows, cols) = (v.shape().len(), h.shape().len());
    let owners = Blocks::new(cols, call.size());
    // This rank's fold of its rows for every column, cut into the parts each owner holds
    // (nothing from a rank without rows).
    let partial = (|| {
        if rows == 0 {
            return Ok(vec![Vec::new(); call.size()]);
        }
        // Every element is written; zero bytes only give the buffer its length.
        let zeros = vec![0u8; cols * std::mem::size_of::<M::Out>()];
        let mut partial = Vector::<M::Out>::from_vec(from_bytes(&zeros));
        dispatch!(options, M::NAME, |exec| exec.map_pairs_reduce(
            plan::MapPairsReduce::<(M, R, A, B)> {
                arrays,
                v,
                h,
                out: partial.arg_mut(),
                axis: Axis::Cols,
                uniforms
            }
        ))?;
        let partial = partial.try_as_slice()?;
        Ok((0..call.size())
            .map(|p| as_bytes(&partial[owners.range(p)]).to_vec())
            .collect())
    })();
    let got = call.all_to_all(partial)?;
    let local = (|| {
        let parts: Vec<Vec<M::Out>> = got.iter().map(|b| from_bytes(b)).collect();
        let dst = out.host_mut()?;
        if let Some(q) = parts
            .iter()
            .position(|p| !p.is_empty() && p.len() != dst.len())
        {
            return Err(Error::Distributed {
                rank: q,
                message: "sent partial folds for another number of columns (ranks disagree \
                          on the distribution)"
                    .into(),
            });
        }
        for (k, d) in dst.iter_mut().enumerate() {
            let column = parts.iter().filter(|p| !p.is_empty()).map(|p| p[k]);
            *d = fold::<R, M::Out>(None, column)?.ok_or_else(|| {
                Error::InvalidArgument(
                    "MapPairsReduce Cols: a column of no pairs (v is empty)".into(),
                )
            })?;
        }
        Ok(())
    })();
    call.finish(local)
}
