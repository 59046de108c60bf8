//! C code generation for the GPU backends.
//!
//! **Design.** `#[userfn]` parses and validates the body at compile time (unsupported
//! constructs are compile errors at their span) and emits a typed-tree description of it,
//! [`FnDef`] (see [`ir`]): parameters with kinds and [`Ty`]s, the return type, statements and
//! expressions, callees as `fn() -> &'static FnDef`, struct types as `<T as DeviceType>::TY`.
//! Translation to C happens here, at run time, because field types of structs and signatures
//! of called user functions are only known once every macro has expanded. Type inference
//! (`typeck`) mirrors Rust's for the subset: unsuffixed literals take the type of their
//! context (other operand, annotated or later-assigned variable, callee parameter, return
//! type, struct field, a cast to a type of the same class); unconstrained float literals
//! default to `f64`, integers to `i32`. So an `f32` function never does `f64` math in C.
//!
//! **Entry points.** [`device_source`] / [`device_source_multi`] return a [`DeviceSource`]:
//! one string with the dialect prelude, the struct typedefs (dependency order, each once,
//! each with a `skel_make_<Name>(fields...)` constructor), integer helpers, every called
//! user function (dependency order, each once) and the requested functions, plus the C
//! identifiers of the requested functions (`skel_fn_<name>`). [`c_type`] names a [`Ty`].
//! Errors are [`crate::Error::Compile`] (never a panic).
//!
//! **Calling convention** of an emitted function (kernel templates rely on it):
//! `SKEL_FN <ret> skel_fn_<name>(params...)`, parameters in the original order;
//! `#[index] i` is a 64-bit unsigned (`c_type(Usize)`), a 2D index is two such (row, col);
//! element and uniform parameters by value; `&[T]` is `SKEL_ARRAY_SPACE const T* name`;
//! `Window<T>` is `SKEL_WINDOW_SPACE const T* name` pointing at the *centre* element
//! (`w[k]` ↦ `name[k]`); `Window2<T>` is `SKEL_WINDOW_SPACE const T* name, <i64> name_stride`
//! pointing at the centre (`w[(di, dj)]` ↦ `name[(di) * name_stride + (dj)]`). The prelude
//! defines `SKEL_ARRAY_SPACE` / `SKEL_WINDOW_SPACE` only `#ifndef` (empty for CUDA, `__global`
//! for OpenCL), so a template may define them first (e.g. `__local` for tiled stencils).
//! `SKEL_FN` is `static __device__ __forceinline__` (CUDA) or `static inline` (OpenCL).
//! The prelude is guarded by `SKEL_PRELUDE`. User locals/parameters keep their names unless
//! they could clash with C (keywords, builtins, macros: `float` becomes `float_`).
//!
//! **Semantics.** Math maps per type (`f32` uses `sqrtf`... in CUDA, the type-generic
//! builtins in OpenCL; `ln`→`log`, `mul_add`→`fma`, `min`/`max`→`fmin`/`fmax`,
//! `round`→`round`, `round_ties_even`→`rint`, `powi`→`pown` (OpenCL) / `pow`); integer
//! `min`/`max`/`abs` use typed helpers; 8/16-bit arithmetic is truncated back to its type.
//! Results equal Rust's for non-overflowing values; out-of-range float→int casts (which
//! saturate in Rust) are undefined in C.

/// A primitive type as the code generator sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Prim {
    Bool,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    Usize,
    Isize,
    F32,
    F64,
}

/// A device type: a primitive or a `#[repr(C)]` struct of device types.
#[derive(Clone, Copy, Debug)]
pub enum Ty {
    /// A primitive number.
    Prim(Prim),
    /// A `#[derive(DeviceType)]` struct.
    Struct(&'static StructTy),
}

impl Ty {
    /// The struct's name, or `None` for a primitive.
    pub const fn c_struct_name(&self) -> Option<&'static str> {
        match self {
            Ty::Prim(_) => None,
            Ty::Struct(s) => Some(s.name),
        }
    }
}

/// A `#[repr(C)]` struct: its name and fields in declaration order.
#[derive(Debug)]
pub struct StructTy {
    /// The Rust (and C) name.
    pub name: &'static str,
    /// Fields in declaration order.
    pub fields: &'static [FieldTy],
}

/// One field of a [`StructTy`].
#[derive(Debug)]
pub struct FieldTy {
    /// Field name.
    pub name: &'static str,
    /// Field type.
    pub ty: Ty,
}

#[cfg_attr(not(any(feature = "cuda", feature = "opencl")), allow(dead_code))]
pub(crate) mod cost;
mod dialect;
mod emit_c;
pub mod ir;
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) mod tile;
mod typeck;

pub use dialect::{c_type, Dialect};
pub use emit_c::{device_source, device_source_multi, DeviceSource};
pub use ir::FnDef;
