//! MapPairsReduce over distributed operands (`h` whole on every rank, see map_pairs.rs).
//! Row-wise, every fold lies in one row and so on one rank; column-wise, each rank folds
//! its rows for every column, and the owner of each output element folds the ranks'
//! partials in rank order.

use super::{fold, Blocks, Call};
use crate::backends::dispatch;
use crate::containers::host::{as_bytes, from_bytes};
use crate::containers::{Output, Vector};
use crate::plan::{self, Axis, PairsReduceSig};
use crate::skeletons::Options;
use crate::userfn::UserFn;
use crate::{Error, Result};

/// The element type of the pairs and the folds.
type Out<S> = <<S as PairsReduceSig>::M as UserFn>::Out;

/// `out[j] = fold_i m(v[i], h[j])` over the rows of all ranks, `out` distributed over the
/// columns; `plan.h` is whole.
pub(crate) fn map_pairs_reduce_cols<S: PairsReduceSig>(
    call: &Call,
    options: Options,
    plan: plan::MapPairsReduce<'_, '_, S>,
) -> Result<()> {
    let plan::MapPairsReduce {
        arrays,
        v,
        h,
        mut out,
        uniforms,
        ..
    } = plan;
    let (rows, cols) = (v.shape().len(), h.shape().len());
    let owners = Blocks::new(cols, call.size());
    // This rank's fold of its rows for every column, cut into the parts each owner holds
    // (nothing from a rank without rows).
    let partial = (|| {
        if rows == 0 {
            return Ok(vec![Vec::new(); call.size()]);
        }
        // Every element is written; zero bytes only give the buffer its length.
        let zeros = vec![0u8; cols * std::mem::size_of::<Out<S>>()];
        let mut partial = Vector::<Out<S>>::from_vec(from_bytes(&zeros));
        dispatch!(options, <S::M as UserFn>::NAME, |exec| exec
            .map_pairs_reduce(plan::MapPairsReduce::<S> {
                arrays,
                v,
                h,
                out: partial.arg_mut(),
                axis: Axis::Cols,
                uniforms
            }))?;
        let partial = partial.try_as_slice()?;
        Ok((0..call.size())
            .map(|p| as_bytes(&partial[owners.range(p)]).to_vec())
            .collect())
    })();
    let got = call.all_to_all(partial)?;
    let local = (|| {
        let parts: Vec<Vec<Out<S>>> = got.iter().map(|b| from_bytes(b)).collect();
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
            *d = fold::<S::R, Out<S>>(None, column)?.ok_or_else(|| {
                Error::InvalidArgument(
                    "MapPairsReduce Cols: a column of no pairs (v is empty)".into(),
                )
            })?;
        }
        Ok(())
    })();
    call.finish(local)
}
