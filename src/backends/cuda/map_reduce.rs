//! MapReduce on CUDA: the one-pass reduce kernel (`cuda/reduce.cu`) whose values are the
//! map function's results, computed on the fly (nothing is materialised).

use super::context::ctx;
use super::module_cache::module;
use super::reduce::{items, one_pass, TEMPLATE};
use super::{assemble, call_expr, cty, input_params, uniform_params, CallSite, Uploader};
use crate::backends::cpu::combine;
use crate::backends::jit::ProgKey;
use crate::backends::BinaryFn;
use crate::codegen::{device_source_multi, Dialect};
use crate::containers::Shape;
use crate::plan::ArgTuple;
use crate::userfn::ElementwiseFn;
use crate::Result;

/// The kernel source for `M` mapped and `R` reducing, `items` values per lane.
pub(crate) fn source<M: ElementwiseFn, R: BinaryFn<M::Out>>(items: usize) -> Result<String> {
    let user = device_source_multi(&[M::definition(), R::definition()], Dialect::Cuda)?;
    let def = M::definition();
    let site = CallSite {
        pos: "SKEL_I",
        window: "",
        stride: "",
    };
    let defines = [
        ("SKEL_T", cty::<M::Out>()),
        ("SKEL_OP(a, b)", format!("{}(a, b)", user.entries[1])),
        ("SKEL_ELEM(SKEL_I)", call_expr(&user.entries[0], def, &site)),
        (
            "SKEL_PARAMS",
            format!("{}{}", input_params(def), uniform_params(def)),
        ),
        ("SKEL_ITEMS", items.to_string()),
        ("SKEL_VEC", "0".to_string()),
    ];
    Ok(assemble(&user.source, &defines, TEMPLATE))
}

/// `start` folded with `R`-reduce of `M(index(i), inputs[i], uniforms)` over all `i`.
pub(crate) fn run<'a, M, R, I>(
    inputs: I,
    shape: Shape,
    uniforms: &M::Uniforms,
    start: M::Out,
) -> Result<M::Out>
where
    M: ElementwiseFn,
    R: BinaryFn<M::Out>,
    I: ArgTuple<'a, Elems = M::Elems>,
{
    let ctx = ctx()?;
    let n = shape.len();
    if n == 0 {
        return Ok(start);
    }
    let (items, _) = items::<M::Out>(false);
    let m = module(
        ctx,
        ProgKey::of::<(M, R)>("map_reduce", ctx.ordinal),
        "map_reduce",
        &["skel_reduce"],
        || source::<M, R>(items),
    )?;
    let mut up = Uploader {
        ctx,
        ptrs: Vec::new(),
    };
    inputs.visit(&mut up)?;
    let total = one_pass::<M::Out>(ctx, &m, n, shape.cols(), items, |a| {
        for p in &up.ptrs {
            a.ptr(*p);
        }
        a.uniforms(uniforms);
    })?;
    Ok(combine::<R, M::Out>(start, total))
}
