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

#[cfg(test)]
mod tests {
    use super::super::context::ctx;
    use super::super::program_cache::{program, ProgKey};
    use super::{nest, source};
    use crate::prelude::*;
    use crate::userfn::ElementwiseFn;

    #[userfn]
    fn mm(#[index] (i, j): (usize, usize), a: Mat<f32>, b: Mat<f32>) -> f32 {
        let mut s = 0.0f32;
        for l in 0..a.cols() {
            s += a[(i, l)] * b[(l, j)];
        }
        s
    }

    #[userfn]
    fn mv(#[index] i: usize, a: Mat<f32>, x: &[f32]) -> f32 {
        let mut s = 0.0f32;
        for l in 0..a.cols() {
            s += a[(i, l)] * x[l];
        }
        s
    }

    #[userfn]
    fn mv_f64(#[index] i: usize, a: Mat<f64>, x: &[f64], #[uniform] k: u32) -> f64 {
        let mut s = 0.0;
        for l in 0..k as usize {
            s += a[(i, l)] * x[l];
        }
        s
    }

    #[userfn]
    fn mv_u8(#[index] i: usize, a: Mat<u8>, x: &[u8]) -> u32 {
        let mut s = 0u32;
        for l in 0..x.len() {
            s = s.wrapping_add(a[(i, l)] as u32 * x[l] as u32);
        }
        s
    }

    fn builds<F: ElementwiseFn>() {
        let Ok(ctx) = ctx() else {
            return;
        };
        let Some(n) = nest::<F>(ctx) else {
            return;
        };
        program(ctx, ProgKey::of::<F>("loopnest"), F::NAME, || {
            source::<F>(ctx, &n)
        })
        .unwrap();
    }

    /// The device's compiler takes both templates (a program that fails to build would
    /// leave the calls to the Map kernel, silently but for the log).
    #[test]
    fn the_kernels_build_where_there_is_a_device() {
        builds::<mm>();
        builds::<mv>();
        builds::<mv_f64>();
        builds::<mv_u8>();
    }
}
