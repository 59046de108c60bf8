//! Container arguments (`&[T]` and `Mat<T>` parameters bound with `.arrays(..)`) in the
//! kernels of both GPU backends: their kernel parameter names and the arguments a user call
//! passes for them.
//!
//! Container `k` of a function is the kernel parameter `ca<k>` followed by its dimensions
//! `ca<k>_rows` and `ca<k>_cols` (a vector is one row), and in OpenCL its offset
//! `ca<k>_off`. A function whose only container is one `&[T]` (MapArray's shape) calls it
//! with the backend's MapArray array expression (CUDA: `arr`, with `arr_rows`, `arr_cols`).

use crate::codegen::array_len_param_named;
use crate::codegen::ir::{FnDef, Param, ParamKind};

/// The container parameters of `def`, in declaration order.
pub(crate) fn containers(def: &FnDef) -> Vec<&Param> {
    def.params
        .iter()
        .filter(|p| matches!(p.kind, ParamKind::Array | ParamKind::Mat))
        .collect()
}

/// Whether `def`'s containers are exactly one `&[T]`, the MapArray shape.
pub(crate) fn single_array(def: &FnDef) -> bool {
    matches!(containers(def)[..], [p] if p.kind == ParamKind::Array)
}

/// The arguments of a call for container parameter `p` of `def`: the pointer `ptr` then,
/// for a `Mat<T>`, its rows and columns `<dims>_rows, <dims>_cols`, for a `&[T]` whose
/// length the body reads (or whose indices the `checked` variant checks), its length
/// `<dims>_cols`.
pub(crate) fn call_args(
    def: &'static FnDef,
    p: &Param,
    ptr: &str,
    dims: &str,
    checked: bool,
) -> String {
    match p.kind {
        ParamKind::Mat => format!("{ptr}, {dims}_rows, {dims}_cols"),
        _ if checked || array_len_param_named(def, p.name) => format!("{ptr}, {dims}_cols"),
        _ => ptr.to_string(),
    }
}

/// Row (`op` `/`) or column (`%`) of flat position `index` in rows of `cols`, as a C
/// expression of types `wide` and `narrow` (64 and 32 bits): a 64-bit division is a
/// subroutine of some 70 instructions on NVIDIA GPUs, a 32-bit one a few, and it was the
/// larger part of a 2D `#[index]` call's cost (the lazy stencil of a MapReduce, CG), so
/// positions and widths that fit 32 bits (every container below 2^32 elements) divide in 32.
pub(crate) fn index_part(index: &str, op: &str, wide: &str, narrow: &str) -> String {
    format!(
        "({wide})(((({index}) | cols) >> 32) ? ({index}) {op} cols \
         : ({wide})(({narrow})({index}) {op} ({narrow})cols))"
    )
}
