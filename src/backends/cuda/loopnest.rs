//! Reduction loop nests on CUDA (see [`crate::codegen::loopnest`]): an index Map that is a
//! matrix product or a matrix-vector product runs the tiled kernels of `cuda/loopnest.cu`
//! through the Map's chunked launch (uploads, streams and downloads as for any Map).

use super::context::Ctx;
use super::map::{chunked, Kernel, Launch};
use std::sync::Arc;

use super::module_cache::{module, Module};
use super::{arrays, assemble, uniform_params, Cuda};
use crate::backends::jit::ProgKey;
use crate::backends::loopnest_kernels::{choose, elem_bytes, instantiate, kernels, Names};
use crate::backends::ContainerOps;
use crate::codegen::loopnest::LoopNest;
use crate::codegen::{device_source_checked, Dialect};
use crate::containers::OutArgs;
use crate::plan::ArgTuple;
use crate::userfn::ElementwiseFn;
use crate::Result;

/// The kernel source for `F`, whose loop nest is `nest`.
fn source<F: ElementwiseFn>(nest: &LoopNest) -> Result<String> {
    let def = F::definition();
    let user = device_source_checked(&nest.functions(), Dialect::Cuda, false)?;
    let ptr = |k: usize| format!("ca{k}");
    let names = Names {
        dialect: Dialect::Cuda,
        ptr: &ptr,
        out: ("SKEL_LN_T* __restrict__ out", "out[i]"),
        params: format!("{}{}", arrays::container_params(def), uniform_params(def)),
    };
    let template = instantiate(nest, def, &user.entries, &names);
    Ok(assemble(&user.source, &[], &template))
}

/// The module of `F`'s loop-nest kernels (built once).
pub(crate) fn build<F: ElementwiseFn>(ctx: &Ctx, nest: &LoopNest) -> Result<Arc<Module>> {
    module(
        ctx,
        ProgKey::of::<F>("loopnest", ctx.ordinal),
        "loopnest",
        kernels(nest, elem_bytes(nest, F::definition())),
        || source::<F>(nest),
    )
}

/// `out[i] = F(index(i), containers, uniforms)` through the loop-nest kernel for `nest`
/// in module `m` ([`build`]).
pub(crate) fn run<'a, 'c, 'o, F, I, O>(
    exec: &Cuda,
    ctx: &Ctx,
    (nest, m): (LoopNest, &Module),
    arrays: ContainerOps<'c, F>,
    inputs: I,
    out: O,
    uniforms: &F::Uniforms,
) -> Result<()>
where
    F: ElementwiseFn,
    I: ArgTuple<'a, Elems = F::Elems>,
    O: OutArgs<'o, Elems = F::Out>,
{
    let def = F::definition();
    let elem = elem_bytes(&nest, def);
    let shape = out.shapes()[0];
    let which = choose(&nest, elem, shape.dims(), ctx.sms as usize);
    let kernel = Kernel {
        func: m.func(which.name())?,
        launch: Launch::Nest(which),
        defs: vec![def],
        checked: false,
    };
    chunked(
        exec,
        ctx,
        "map",
        kernel,
        ((&arrays, true), &inputs),
        out,
        uniforms,
    )
}

#[cfg(test)]
mod tests {
    use super::source;
    use crate::backends::loopnest_kernels::gpu_nest;
    use crate::prelude::*;
    use crate::userfn::UserFn;

    #[userfn]
    fn mm(#[index] (i, j): (usize, usize), a: Mat<f32>, b: Mat<f32>) -> f32 {
        let mut s = 0.0f32;
        for l in 0..a.cols() {
            s += a[(i, l)] * b[(l, j)];
        }
        s
    }

    #[userfn]
    fn mv(#[index] i: usize, a: Mat<f64>, x: &[f64], #[uniform] k: u32) -> f64 {
        let mut s = 0.0;
        for l in 0..k as usize {
            s += a[(i, l)] * x[l];
        }
        s
    }

    #[userfn]
    fn min_plus(#[index] (i, j): (usize, usize), a: Mat<f32>, b: Mat<f32>) -> f32 {
        let mut d = f32::INFINITY;
        for l in 0..a.cols() {
            d = d.min(a[(i, l)] + b[(l, j)]);
        }
        d
    }

    #[userfn]
    fn max_times(#[index] (i, j): (usize, usize), a: Mat<f64>, b: Mat<f64>) -> f64 {
        let mut p = f64::NEG_INFINITY;
        for l in 0..a.cols() {
            p = (a[(i, l)] * b[(l, j)]).max(p);
        }
        p
    }

    #[userfn]
    fn mm_i32(#[index] (i, j): (usize, usize), a: Mat<i32>, b: Mat<i32>) -> i32 {
        let mut s = 0i32;
        for l in 0..a.cols() {
            s = s.wrapping_add(a[(i, l)].wrapping_mul(b[(l, j)]));
        }
        s
    }

    #[userfn]
    fn mv_min(#[index] i: usize, a: Mat<f32>, x: &[f32]) -> f32 {
        let mut d = f32::INFINITY;
        for l in 0..x.len() {
            d = d.min(a[(i, l)] + x[l]);
        }
        d
    }

    /// NVRTC compiles every kernel of both templates, for products, min-plus and
    /// max-times, integers and f64 (a build that fails would leave the calls to the Map
    /// kernel, silently but for the log).
    #[test]
    fn the_kernels_build_where_there_is_a_device() {
        let Ok(ctx) = crate::backends::cuda::context::ctx() else {
            return;
        };
        let n = gpu_nest(<mm as UserFn>::definition()).unwrap();
        super::build::<mm>(ctx, &n).unwrap();
        let n = gpu_nest(<mv as UserFn>::definition()).unwrap();
        super::build::<mv>(ctx, &n).unwrap();
        let n = gpu_nest(<min_plus as UserFn>::definition()).unwrap();
        super::build::<min_plus>(ctx, &n).unwrap();
        let n = gpu_nest(<max_times as UserFn>::definition()).unwrap();
        super::build::<max_times>(ctx, &n).unwrap();
        let n = gpu_nest(<mm_i32 as UserFn>::definition()).unwrap();
        super::build::<mm_i32>(ctx, &n).unwrap();
        let n = gpu_nest(<mv_min as UserFn>::definition()).unwrap();
        super::build::<mv_min>(ctx, &n).unwrap();
        let n = gpu_nest(<mv32 as UserFn>::definition()).unwrap();
        super::build::<mv32>(ctx, &n).unwrap();
        let n = gpu_nest(<mv_u8 as UserFn>::definition()).unwrap();
        super::build::<mv_u8>(ctx, &n).unwrap();
    }

    /// A min/max step takes the select in the tiles and refolds what it may get wrong;
    /// integers have nothing to refold; a product keeps its step.
    #[test]
    fn a_min_or_max_step_runs_as_a_select() {
        let n = gpu_nest(<min_plus as UserFn>::definition()).unwrap();
        let src = source::<min_plus>(&n).unwrap();
        assert!(src.contains("return v < acc ? v : acc;"), "{src}");
        assert!(src.contains("#define SKEL_LN_FSTEP(acc, x, y) skel_ln_pick("));
        assert!(src.contains("#define SKEL_LN_REDO(v) ((v) != (v)"));
        let n = gpu_nest(<max_times as UserFn>::definition()).unwrap();
        let src = source::<max_times>(&n).unwrap();
        assert!(src.contains("return v > acc ? v : acc;"), "{src}");
        let src = source::<mm_i32>(&gpu_nest(<mm_i32 as UserFn>::definition()).unwrap()).unwrap();
        assert!(src.contains("#define SKEL_LN_FSTEP(acc, x, y) SKEL_LN_STEP(acc, x, y)"));
        assert!(src.contains("#define SKEL_LN_REDO(v) 0"));
    }

    #[test]
    fn a_module_defines_the_kernels_it_is_asked_for() {
        let n = gpu_nest(<mm as UserFn>::definition()).unwrap();
        let src = source::<mm>(&n).unwrap();
        assert!(src.contains("#define SKEL_LN_NAME skel_ln_gemm128"));
        assert!(src.contains("#define SKEL_LN_NAME skel_ln_gemm64"));
        let n = gpu_nest(<mv as UserFn>::definition()).unwrap();
        let src = source::<mv>(&n).unwrap();
        // f64: two elements per 16-byte vector, chunks of 32 steps of the 32-row band
        // (8 KiB), 128 steps of the 8-row one.
        assert!(
            src.contains("#define SKEL_VW 2\n#define SKEL_NS 4"),
            "{src}"
        );
        assert!(src.contains(
            "#define SKEL_LN_NAME skel_ln_gemv32\n#define SKEL_GR 32\n#define SKEL_CH 32"
        ));
        assert!(src.contains(
            "#define SKEL_LN_NAME skel_ln_gemv16\n#define SKEL_GR 16\n#define SKEL_CH 64"
        ));
        assert!(src.contains(
            "#define SKEL_LN_NAME skel_ln_gemv8\n#define SKEL_GR 8\n#define SKEL_CH 128"
        ));
        assert!(!src.contains("#define SKEL_LN_GEMM"));
    }

    #[userfn]
    fn mv32(#[index] i: usize, a: Mat<f32>, x: &[f32]) -> f32 {
        let mut s = 0.0f32;
        for l in 0..a.cols() {
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
}
