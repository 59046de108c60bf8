//! Scan over distributed operands: each rank starts its block from the fold of the block
//! totals of the ranks before it.

use super::reduce::partial;
use super::{fold, Call};
use crate::backends::{dispatch, BinaryFn};
use crate::containers::{Arg, ArgMut};
use crate::plan;
use crate::skeletons::{Options, ScanMode};
use crate::{DeviceType, Result};

/// A global scan of `input` into `out` (blocks of one distribution).
pub(crate) fn scan<F: BinaryFn<T>, T: DeviceType>(
    call: &Call,
    options: Options,
    input: Arg<'_, T>,
    mut out: ArgMut<'_, T>,
    mode: ScanMode,
    start: T,
) -> Result<()> {
    let n = input.shape().len();
    let before = call.rank();
    match mode {
        ScanMode::Exclusive => {
            // Totals first, so each block scans once, from its own start value.
            let totals = call.exchange(partial::<F, T>(options, input).map(Vec::from_iter))?;
            let local = (|| {
                let carry = fold::<F, T>(Some(start), totals[..before].iter().flatten().copied())?
                    .unwrap_or(start);
                if n == 0 {
                    return Ok(());
                }
                dispatch!(options, F::NAME, |exec| exec.scan(plan::Scan::<(F, T)> {
                    input,
                    out,
                    mode,
                    start: carry
                }))
            })();
            call.finish(local)
        }
        ScanMode::Inclusive => {
            // An inclusive scan ignores its start value, so the carry is applied after.
            let local = (|| {
                if n == 0 {
                    return Ok(Vec::new());
                }
                dispatch!(options, F::NAME, |exec| exec.scan(plan::Scan::<(F, T)> {
                    input,
                    out: out.reborrow(),
                    mode,
                    start
                }))?;
                let last = out.offset() + n - 1;
                Ok(vec![out.store().read(last..last + 1)?[0]])
            })();
            let totals = call.exchange(local)?;
            let local = (|| {
                let Some(carry) = fold::<F, T>(None, totals[..before].iter().flatten().copied())?
                else {
                    return Ok(());
                };
                let block = out.host_mut()?;
                crate::check::catch(F::NAME, || {
                    for x in block.iter_mut() {
                        *x = F::apply((), (carry, *x), &());
                    }
                    Ok(())
                })
            })();
            call.finish(local)
        }
    }
}
