//! MapArray on CUDA: the Map kernel (`cuda/map.cu`) with the whole array as one more
//! parameter, uploaded once per call (only what is not on the device already).

use super::context::ctx;
use super::module_cache::{launch, module, KernelArgs};
use super::{
    array_param, assemble, call_expr, cty, grid_for, input_params, memory, vector_defines,
};
use super::{uniform_params, CallSite, Uploader};
use crate::backends::jit::ProgKey;
use crate::codegen::{device_source, Dialect};
use crate::containers::{Arg, ArgMut};
use crate::plan::ArgTuple;
use crate::userfn::ArrayFn;
use crate::Result;

const TEMPLATE: &str = include_str!("../../../cuda/map.cu");

/// The kernel source for `F`.
pub(crate) fn source<F: ArrayFn>() -> Result<String> {
    let user = device_source::<F>(Dialect::Cuda)?;
    let def = F::definition();
    let site = CallSite {
        pos: "SKEL_I",
        window: "",
        stride: "",
    };
    let params = format!(
        "{}{}{}",
        array_param(def),
        input_params(def),
        uniform_params(def)
    );
    let defines = [
        ("SKEL_OUT_T", cty::<F::Out>()),
        ("SKEL_PARAMS", params),
        ("SKEL_CALL(SKEL_I)", call_expr(user.entry(), def, &site)),
    ];
    let mut defines = defines.to_vec();
    defines.extend(vector_defines(user.entry(), def));
    Ok(assemble(&user.source, &defines, TEMPLATE))
}

/// `out[i] = F(index(i), array, inputs[i], uniforms)`.
pub(crate) fn run<'a, F, I>(
    array: Arg<'_, F::Array>,
    inputs: I,
    out: ArgMut<'_, F::Out>,
    uniforms: &F::Uniforms,
) -> Result<()>
where
    F: ArrayFn,
    I: ArgTuple<'a, Elems = F::Elems>,
{
    let ctx = ctx()?;
    let n = out.shape().len();
    if n == 0 {
        return Ok(());
    }
    let m = module(
        ctx,
        ProgKey::of::<F>("map_array", ctx.ordinal),
        "map_array",
        &["skel_map"],
        source::<F>,
    )?;
    let arr = memory::input(ctx, &array)?;
    let mut up = Uploader {
        ctx,
        ptrs: Vec::new(),
    };
    inputs.visit(&mut up)?;
    let dst = memory::output(ctx, &out, false)?;
    let mut args = KernelArgs::default();
    args.ptr(dst)
        .u64(n as u64)
        .u64(out.shape().cols() as u64)
        .ptr(arr);
    for p in up.ptrs {
        args.ptr(p);
    }
    args.uniforms(uniforms);
    let grid = grid_for(ctx, n, 256, 8);
    launch(
        ctx,
        m.func("skel_map")?,
        (grid, 1, 1),
        (256, 1, 1),
        0,
        &mut args,
    )?;
    memory::written(ctx, &out)
}
