//! Map and index Map on CUDA: a grid-stride kernel (`cuda/map.cu`), one launch per
//! MultiStream chunk. MapArray (`map_array.rs`) runs through the same code.

use cudarc::driver::sys;

use super::context::{ctx, Ctx};
use super::memory::{self, CuEvent};
use super::module_cache::{launch, module, Dims, KernelArgs};
use super::multistream::{self, Work};
use super::{
    assemble, call_expr, cty, grid_for, input_params, inputs_read, stage_inputs, uniform_params,
    vector_defines, CallSite, Cuda, MissingBytes,
};
use crate::backends::jit::ProgKey;
use crate::codegen::ir::FnDef;
use crate::codegen::{device_source, DeviceSource, Dialect};
use crate::containers::{Arg, ArgMut};
use crate::plan::{ArgTuple, ArgVisitor};
use crate::userfn::{ElementwiseFn, UniformTuple};
use crate::{DeviceType, Result};

pub(crate) const TEMPLATE: &str = include_str!("../../../cuda/map.cu");

/// The Map kernel source for user function `def` writing `out_ty`, with `array` (the
/// MapArray parameter, or nothing) before the inputs.
pub(crate) fn map_source(
    user: &DeviceSource,
    def: &FnDef,
    out_ty: String,
    array: String,
) -> String {
    let site = CallSite {
        pos: "SKEL_I",
        index: "skel_base + (SKEL_I)",
        window: "",
        stride: "",
    };
    let mut defines = vec![
        ("SKEL_OUT_T", out_ty),
        (
            "SKEL_PARAMS",
            format!("{array}{}{}", input_params(def), uniform_params(def)),
        ),
        ("SKEL_CALL(SKEL_I)", call_expr(user.entry(), def, &site)),
    ];
    defines.extend(vector_defines(user.entry(), def));
    assemble(&user.source, &defines, TEMPLATE)
}

/// The kernel source for `F`.
pub(crate) fn source<F: ElementwiseFn>() -> Result<String> {
    let user = device_source::<F>(Dialect::Cuda)?;
    Ok(map_source(
        &user,
        F::definition(),
        cty::<F::Out>(),
        String::new(),
    ))
}

/// `out[i] = F(index(i), inputs[i], uniforms)`.
pub(crate) fn run<'a, F, I>(
    exec: &Cuda,
    inputs: I,
    out: ArgMut<'_, F::Out>,
    uniforms: &F::Uniforms,
) -> Result<()>
where
    F: ElementwiseFn,
    I: ArgTuple<'a, Elems = F::Elems>,
{
    let ctx = ctx()?;
    if out.shape().is_empty() {
        return Ok(());
    }
    let m = module(
        ctx,
        ProgKey::of::<F>("map", ctx.ordinal),
        "map",
        &["skel_map"],
        source::<F>,
    )?;
    chunked::<I, u8, F::Out>(
        exec,
        ctx,
        "map",
        m.func("skel_map")?,
        (None, &inputs),
        out,
        uniforms,
    )
}

/// An element-wise call split into chunks: per chunk, its part of every input (and the
/// whole `array`, uploaded once) is made readable on its stream, then its kernel writes its
/// part of `out`, then, if the host will read `out`, its part is copied back.
pub(crate) fn chunked<'a, I: ArgTuple<'a>, A: DeviceType, O: DeviceType>(
    exec: &Cuda,
    ctx: &Ctx,
    skeleton: &'static str,
    func: sys::CUfunction,
    (array, inputs): (Option<Arg<'_, A>>, &I),
    out: ArgMut<'_, O>,
    uniforms: &impl UniformTuple,
) -> Result<()> {
    let n = out.shape().len();
    let eager = memory::eager_download(&out, exec.download);
    let mut missing = MissingBytes {
        ctx,
        bytes: 0,
        total: 0,
    };
    inputs.visit(&mut missing)?;
    if let Some(a) = array {
        missing.visit(a)?;
    }
    let out_bytes = n * std::mem::size_of::<O>();
    let work = Work {
        up: missing.bytes,
        kernel: missing.total + out_bytes,
        down: if eager { out_bytes } else { 0 },
        follows: memory::busy_lane(ctx, &out.lock()),
    };
    // Chunk boundaries at multiples of 4 keep every chunk's pointers 16-byte aligned for
    // the vectorised loads.
    let split = multistream::split(
        ctx,
        skeleton,
        n,
        4,
        multistream::forced(exec.streams)?,
        work,
    )?;
    let whole = |a: Arg<'_, A>| 0..a.shape().len();
    let mut staged = Vec::with_capacity(split.len());
    for (_, part, lane, tag) in split.parts() {
        let mut ptrs = Vec::new();
        if let Some(a) = array {
            ptrs.push(memory::input_part(ctx, &a, whole(a), lane, tag)?);
        }
        ptrs.extend(stage_inputs(ctx, inputs, part, lane, tag)?);
        staged.push(ptrs);
    }
    for ((_, part, lane, tag), ptrs) in split.parts().zip(staged) {
        let dst = memory::output_part(ctx, &out, part.clone(), false, lane, tag)?;
        let mut args = KernelArgs::default();
        args.ptr(dst)
            .u64(part.len() as u64)
            .u64(out.shape().cols() as u64)
            .u64(part.start as u64);
        for p in ptrs {
            args.ptr(p);
        }
        args.uniforms(uniforms);
        let grid = grid_for(ctx, part.len(), 256, 8);
        launch(ctx, lane, tag, func, Dims::line(grid, 256, 0), &mut args)?;
        let ev = CuEvent::record(lane)?;
        if let Some(a) = array {
            memory::read_by(ctx, &a, whole(a), &ev)?;
        }
        inputs_read(ctx, inputs, part.clone(), (lane, tag), &ev)?;
        memory::written_part(ctx, &out, part, &ev)?;
    }
    if eager {
        split.download(ctx, &out, |part| part)?;
    }
    Ok(())
}
