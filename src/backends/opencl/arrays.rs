//! Container arguments on OpenCL: each `Mat<T>` / `&[T]` bound with `.arrays(..)` is
//! uploaded whole where the device copy is stale (nothing when it is current) and passed to
//! the kernel as a buffer, the container's offset in it, its rows and its columns (see
//! [`crate::backends::args`] for the names).

use std::fmt::Write as _;

use super::context::Ctx;
use super::{memory, KArg};
use crate::backends::args::containers;
use crate::codegen::ir::FnDef;
use crate::codegen::{c_type, Dialect};
use crate::containers::Arg;
use crate::plan::{ArgTuple, ArgVisitor};
use crate::{DeviceType, Result};

/// Kernel parameters for the container arguments of `def`: `, __global const T* ca<k>,
/// ulong ca<k>_off, ulong ca<k>_rows, ulong ca<k>_cols` each.
pub(crate) fn container_params(def: &FnDef, prefix: &str) -> String {
    let mut s = String::new();
    for (k, p) in containers(def).iter().enumerate() {
        let _ = write!(
            s,
            ", __global const {t}* {prefix}ca{k}, ulong {prefix}ca{k}_off, \
             ulong {prefix}ca{k}_rows, ulong {prefix}ca{k}_cols",
            t = c_type(p.ty, Dialect::OpenCl)
        );
    }
    s
}

/// The kernel arguments for `arrays`, in order: buffer, offset, rows, columns each.
pub(crate) fn push<'a>(ctx: &Ctx, arrays: &impl ArgTuple<'a>, args: &mut Vec<KArg>) -> Result<()> {
    struct Whole<'c> {
        ctx: &'c Ctx,
        args: &'c mut Vec<KArg>,
    }
    impl ArgVisitor for Whole<'_> {
        fn visit<T: DeviceType>(&mut self, arg: Arg<'_, T>) -> Result<()> {
            let (rows, cols) = arg.shape().dims();
            self.args.push(KArg::Mem(memory::input(self.ctx, &arg)?));
            self.args.push(KArg::U64(arg.offset() as u64));
            self.args.push(KArg::U64(rows as u64));
            self.args.push(KArg::U64(cols as u64));
            Ok(())
        }
    }
    arrays.visit(&mut Whole { ctx, args })
}
