//! Reduction loop nests on OpenCL (see [`crate::codegen::loopnest`]): the kernels of
//! `cuda/loopnest.cu` (the template is the same OpenCL C), launched by the Map.

use super::context::Ctx;
use super::{arrays, checked_source_head, uniform_params};
use crate::backends::loopnest_kernels::{choose, elem_bytes, gpu_nest, instantiate, Kernel, Names};
use crate::codegen::loopnest::LoopNest;
use crate::codegen::Dialect;
use crate::userfn::ElementwiseFn;
use crate::Result;

/// The loop nest `F` runs as, where the device takes the kernels' work-groups of 256 and
/// their local memory (34 KiB at most).
pub(super) fn nest<F: ElementwiseFn>(ctx: &Ctx) -> Option<LoopNest> {
    gpu_nest(F::definition()).filter(|_| ctx.wg >= 256 && ctx.local_mem >= 40 << 10)
}

/// The program for `F`, whose loop nest is `nest`.
pub(super) fn source<F: ElementwiseFn>(ctx: &Ctx, nest: &LoopNest) -> Result<String> {
    let def = F::definition();
    let (mut s, entries) = checked_source_head(ctx, "__global", &nest.functions(), false)?;
    let ptr = |k: usize| format!("(ca{k} + ca{k}_off)");
    let names = Names {
        dialect: Dialect::OpenCl,
        ptr: &ptr,
        out: (
            "__global SKEL_LN_T* out, ulong out_off",
            "out[out_off + (i)]",
        ),
        params: format!(
            "{}{}",
            arrays::container_params(def, ""),
            uniform_params(def, "")
        ),
    };
    s.push_str(&instantiate(nest, def, &entries, &names));
    Ok(s)
}

/// The kernel, its work dimensions, global and local sizes for an output of `(rows, cols)`
/// whose flat positions `part` the call writes.
pub(super) fn launch_shape<F: ElementwiseFn>(
    ctx: &Ctx,
    nest: &LoopNest,
    (rows, cols): (usize, usize),
    part: std::ops::Range<usize>,
) -> (Kernel, [usize; 3]) {
    let which = choose(
        nest,
        elem_bytes(nest, F::definition()),
        (rows, cols),
        ctx.compute_units,
    );
    let (gx, gy) = which.grid(&part, cols);
    (which, [gx * which.threads(), gy, 1])
}
