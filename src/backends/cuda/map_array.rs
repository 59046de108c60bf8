//! MapArray on CUDA: the Map kernel (`cuda/map.cu`) with the whole array as one more
//! parameter (`const __restrict__`: read through the read-only data path, where the
//! threads of a warp reading one element, as all-pairs functions do, are served at once). The array is uploaded once per call (only what is not on the device
//! already), by the first chunk's stream; the other chunks' streams wait for its event.

use super::context::ctx;
use super::map::{chunked, map_source, Launch};
use super::module_cache::module;
use super::{array_param, cty, Cuda};
use crate::backends::jit::ProgKey;
use crate::codegen::{device_source, Dialect};
use crate::containers::{Arg, ArgMut};
use crate::plan::ArgTuple;
use crate::userfn::ArrayFn;
use crate::Result;

/// The kernel source for `F`.
pub(crate) fn source<F: ArrayFn>() -> Result<String> {
    let user = device_source::<F>(Dialect::Cuda)?;
    let def = F::definition();
    Ok(map_source(
        &user,
        def,
        (cty::<F::Out>(), array_param(def)),
        Launch::of(def)?,
    ))
}

/// `out[i] = F(index(i), array, inputs[i], uniforms)`.
pub(crate) fn run<'a, F, I>(
    exec: &Cuda,
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
    if out.shape().is_empty() {
        return Ok(());
    }
    let m = module(
        ctx,
        ProgKey::of::<F>("map_array", ctx.ordinal),
        "map_array",
        &["skel_map"],
        source::<F>,
    )?;
    chunked(
        exec,
        ctx,
        "map_array",
        (m.func("skel_map")?, Launch::of(F::definition())?),
        (Some(array), &inputs),
        out,
        uniforms,
    )
}
