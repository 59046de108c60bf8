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
