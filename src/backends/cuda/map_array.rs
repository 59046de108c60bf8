//! MapArray on CUDA: the Map kernel (`cuda/map.cu`) with the whole array as one more
//! parameter (`const __restrict__`: read through the read-only data path). All-pairs
//! functions whose loop can be tiled (`codegen/tile.rs`) read the array through shared
//! memory instead: the two tile functions of the rewritten tree get the bodies below. The array is uploaded once per call (only what is not on the device
//! already), by the first chunk's stream; the other chunks' streams wait for its event.

use super::context::ctx;
use super::map::{chunked, map_source, Kernel, Launch};
use super::module_cache::module;
use super::{array_param, cty, Cuda};
use crate::backends::chain::Reads;
use crate::backends::jit::ProgKey;
use crate::codegen::tile::{tiled, TILE};
use crate::codegen::{
    array_len_param_named, c_type, device_source_checked, device_source_multi, Dialect, Prim, Ty,
};
use crate::containers::{Arg, ArgMut};
use crate::plan::ArgTuple;
use crate::userfn::ArrayFn;
use crate::Result;

/// Tiles larger than this would leave too little shared memory for several blocks per
/// multiprocessor; such arrays are read through the read-only path.
const MAX_TILE_BYTES: usize = 16 * 1024;

/// The launch for `F`: tiled when its all-pairs loop can be (and the call is unchecked:
/// the checked variant reads the array as written, with its indices checked).
fn launch_of<F: ArrayFn>(checked: bool) -> Result<Launch> {
    let def = F::definition();
    let bytes = TILE * std::mem::size_of::<F::Array>();
    Ok(match Launch::of(def)? {
        Launch::Tiled(_)
            if !checked && bytes <= MAX_TILE_BYTES && tiled::<F::Array>(def).is_some() =>
        {
            Launch::Tiled(bytes as u32)
        }
        Launch::Tiled(_) => Launch::One,
        other => other,
    })
}

/// The kernel source for `F`.
pub(crate) fn source<F: ArrayFn>(checked: bool) -> Result<String> {
    let def = F::definition();
    let launch = launch_of::<F>(checked)?;
    let user = match (launch, tiled::<F::Array>(def)) {
        (Launch::Tiled(_), Some(t)) => {
            let mut user = device_source_multi(&[t.def, t.stage, t.get], Dialect::Cuda)?;
            let elem = cty::<F::Array>();
            let (stage, get) = (user.entries[1].clone(), user.entries[2].clone());
            // Should the emitter's layout ever defeat the replacement, the functions keep
            // their written bodies: the same results, read without tiles.
            for (name, body) in [
                (&stage, stage_body(&elem, &stage)),
                (
                    &get,
                    get_body(&elem, &get, array_len_param_named(t.get, "src")),
                ),
            ] {
                if let Some(src) = replace_fn(&user.source, name, &body) {
                    user.source = src;
                }
            }
            user.entries.truncate(1);
            user
        }
        _ => device_source_checked(&[def], Dialect::Cuda, checked)?,
    };
    Ok(map_source(
        &user,
        def,
        (cty::<F::Out>(), array_param(def)),
        launch,
        (checked, &Reads::default()),
    ))
}

/// `skel_tile_stage`: every thread of the block helps load `src[start..min(start + TILE,
/// end)]`; the first barrier lets the previous tile's readers finish.
fn stage_body(elem: &str, name: &str) -> String {
    let (u32, usize) = (prim(Prim::U32), prim(Prim::Usize));
    format!(
        "SKEL_FN {u32} {name}(const {elem}* src, {usize} start, {usize} end) {{\n\
         \x20   extern __shared__ __align__(16) unsigned char skel_smem[];\n\
         \x20   {elem}* tile = reinterpret_cast<{elem}*>(skel_smem);\n\
         \x20   __syncthreads();\n\
         \x20   for ({usize} k = threadIdx.x; k < {TILE} && start + k < end; k += blockDim.x) tile[k] = src[start + k];\n\
         \x20   __syncthreads();\n\
         \x20   return 0u;\n\
         }}\n"
    )
}

/// `skel_tile_get`: element `j` from the tile loaded at `start`. Its parameters are those
/// the emitter gave the written `get` (the array's length follows the array where the
/// written body indexes it, as every unchecked index is clamped into its array), so the
/// callers' argument lists fit either way.
fn get_body(elem: &str, name: &str, takes_len: bool) -> String {
    let usize = prim(Prim::Usize);
    let len = if takes_len {
        format!(", {usize} src_len")
    } else {
        String::new()
    };
    let unused_len = if takes_len { " (void)src_len;" } else { "" };
    format!(
        "SKEL_FN {elem} {name}(const {elem}* src{len}, {usize} j, {usize} start) {{\n\
         \x20   extern __shared__ __align__(16) unsigned char skel_smem[];\n\
         \x20   (void)src;{unused_len}\n\
         \x20   return reinterpret_cast<const {elem}*>(skel_smem)[j - start];\n\
         }}\n"
    )
}

/// The C name of a primitive (the user functions come before `skel_u64` is defined).
fn prim(p: Prim) -> String {
    c_type(Ty::Prim(p), Dialect::Cuda)
}

/// `src` with the definition of function `name` (from its `SKEL_FN` line to the first
/// closing brace in column 0) replaced by `body`; `None` if it is not found.
fn replace_fn(src: &str, name: &str, body: &str) -> Option<String> {
    let head = src.match_indices(&format!(" {name}(")).find_map(|(i, _)| {
        let line = src[..i].rfind('\n').map_or(0, |p| p + 1);
        src[line..].starts_with("SKEL_FN ").then_some(line)
    })?;
    let end = head + src[head..].find("\n}\n")? + 3;
    Some(format!("{}{body}{}", &src[..head], &src[end..]))
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
    let checked = exec.checked;
    let key = if checked {
        "map_array_checked"
    } else {
        "map_array"
    };
    let m = module(
        ctx,
        ProgKey::of::<F>(key, ctx.ordinal),
        "map_array",
        &["skel_map"],
        || source::<F>(checked),
    )?;
    let kernel = Kernel {
        func: m.func("skel_map")?,
        launch: launch_of::<F>(checked)?,
        defs: vec![F::definition()],
        checked,
    };
    chunked(
        exec,
        ctx,
        "map_array",
        kernel,
        ((&(array,), true), &inputs),
        out,
        uniforms,
    )
}

#[cfg(test)]
#[allow(clippy::needless_range_loop)] // the functions under test index their arrays
mod tests {
    use super::source;
    use crate::prelude::*;

    #[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
    #[repr(C)]
    struct P {
        x: f32,
        m: f32,
    }

    #[userfn]
    fn pull(p: P, ps: &[P], #[uniform] n: u32) -> f32 {
        let mut s = 0.0f32;
        for j in 0..n as usize {
            s += (ps[j].x - p.x) * ps[j].m;
        }
        s
    }

    #[userfn]
    fn lookup(ps: &[P], i: u32) -> f32 {
        ps[i as usize].x
    }

    #[test]
    fn all_pairs_sources_read_the_array_through_tiles() {
        let src = source::<pull>(false).unwrap();
        assert!(src.contains("#define SKEL_LAUNCH 3"), "{src}");
        // the written bodies were replaced by the shared-memory ones
        assert_eq!(src.matches("__syncthreads();").count(), 2);
        assert!(src.contains("reinterpret_cast<const P*>(skel_smem)[j - start]"));
        // the written `get` indexes the array, so it (and its replacement) takes its length
        assert!(src.contains("src_len, "), "{src}");
        assert!(!src.contains("return src[j]"));
        let plain = source::<lookup>(false).unwrap();
        assert!(plain.contains("#define SKEL_LAUNCH 0") && !plain.contains("skel_smem"));
    }
}
