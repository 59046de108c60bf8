//! Typed tree -> C source in one of the [`Dialect`](crate::codegen::Dialect)s.
//!
//! One file per kind of construct: [`program`] holds the entry points, [`function`] a
//! function's signature and emitter state, then statements, expressions, operators,
//! literals, math calls, types and the checked variant's guards.

mod array_len;
mod checked;
mod expressions;
mod function;
mod literals;
mod math;
mod operators;
mod program;
mod statements;
mod types;

pub use array_len::{array_len_param, array_len_param_named};
pub use program::{
    checked_functions, device_source, device_source_checked, device_source_multi,
    local_array_bytes_of, DeviceSource,
};

use super::ir::FnDef;

type R<T> = std::result::Result<T, String>;

fn key(d: &'static FnDef) -> usize {
    d as *const FnDef as usize
}
