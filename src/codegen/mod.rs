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
//! `Window<T>` is `SKEL_WINDOW_SPACE const T* name, <i64> name_r` pointing at the *centre*
//! element (`w[k]` ↦ `name[k]`, `k` checked against or clamped into the radius `name_r`);
//! `Window2<T>` is `SKEL_WINDOW_SPACE const T* name, <isize> name_stride, <i64> name_rr,
//! <i64> name_rc` pointing at the centre (`w[(di, dj)]` ↦ `name[(di) * name_stride + (dj)]`,
//! each offset checked or clamped). The prelude
//! defines `SKEL_ARRAY_SPACE` / `SKEL_WINDOW_SPACE` only `#ifndef` (empty for CUDA, `__global`
//! for OpenCL), so a template may define them first (e.g. `__local` for tiled stencils).
//! A `&[T]` parameter the body indexes or reads the length of (`t.len()`, also through a
//! callee) is followed by `<c_type(Usize)> name_len` ([`array_len_param`] says whether);
//! the checked variant checks each index against it, the unchecked one clamps it into
//! range, so no index leaves the array. Arrays `[T; N]`
//! and tuples are wrapper structs (`skel_a<N>_<T> { T v[N]; }`, `skel_t<K>_.. { f0; f1; .. }`,
//! see [`Ty`]), passed and returned by value like structs; `bool` is `bool` in CUDA and host
//! C and `uchar` in OpenCL C.
//! `SKEL_FN` is `static __device__ __forceinline__` (CUDA) or `static inline` (OpenCL).
//! The prelude is guarded by `SKEL_PRELUDE`. User locals/parameters keep their names unless
//! they could clash with C (keywords, builtins, macros: `float` becomes `float_`).
//!
//! **Semantics.** Math maps per type (`f32` uses `sqrtf`... in CUDA, the type-generic
//! builtins in OpenCL; `ln`→`log`, `mul_add`→`fma`, `round`→`round`,
//! `round_ties_even`→`rint`); `min`/`max` (a NaN gives the other operand, of two zeros `min`
//! gives -0.0), `powi` (Rust's repeated squaring), `fract`, `signum`, `clamp`, `is_nan`, `is_finite` and every integer method are typed helpers
//! with Rust's (release-build) semantics: wrapping in a wide unsigned type, `rotate_*` by
//! the amount modulo the width, `leading_zeros`/`trailing_zeros`/`count_ones` on the
//! value's own width. 8/16-bit arithmetic is truncated back to its type. Local arrays are
//! built by statements before the expression that uses them (a literal element by element,
//! `[x; N]` by a loop); module-level constants ([`ir::Expr::Extern`]) are emitted as
//! literals from their bytes.
//! Results equal Rust's for non-overflowing values; out-of-range float→int casts (which
//! saturate in Rust) are undefined in C.

/// A primitive type as the code generator sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
#[non_exhaustive]
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

/// A device type: a primitive, a `#[repr(C)]` struct, a fixed-size array or a tuple.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Ty {
    /// A primitive number or `bool`.
    Prim(Prim),
    /// A `#[derive(DeviceType)]` struct.
    Struct(&'static StructTy),
    /// `[T; N]`: in C a wrapper struct `skel_a<N>_<T>` with one member `v[N]` (C cannot
    /// pass, return or assign arrays by value), with the array's layout.
    Array(&'static ArrayTy),
    /// `(A, B, ..)` of two to four device types (a tuple return): in C a struct
    /// `skel_t<K>_<A><B>..` with members `f0`, `f1`, .. declared in Rust's memory order.
    Tuple(&'static TupleTy),
}

impl Ty {
    /// The struct's name, or `None` for a primitive, an array or a tuple.
    pub const fn c_struct_name(&self) -> Option<&'static str> {
        match self {
            Ty::Struct(s) => Some(s.name),
            _ => None,
        }
    }

    /// The element types of a tuple, `None` for any other type. A multi-output skeleton
    /// writes element `k` of the C value to its `k`-th output through the member named
    /// [`tuple_field`]`(k)`.
    ///
    /// ```
    /// use skel::prelude::*;
    /// use skel::plumbing::codegen::{Prim, Ty};
    /// let tys = <(f32, u32) as DeviceType>::TY.tuple_elems().unwrap();
    /// assert!(matches!(tys, [Ty::Prim(Prim::F32), Ty::Prim(Prim::U32)]));
    /// assert!(<f32 as DeviceType>::TY.tuple_elems().is_none());
    /// ```
    pub const fn tuple_elems(&self) -> Option<&'static [Ty]> {
        match self {
            Ty::Tuple(t) => Some(t.elems),
            _ => None,
        }
    }

    /// Size in bytes (device types have no padding, so this is also Rust's size).
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_eq!(<[f64; 3] as DeviceType>::TY.size(), 24);
    /// assert_eq!(<(u8, bool) as DeviceType>::TY.size(), 2);
    /// ```
    pub fn size(&self) -> usize {
        match self {
            Ty::Prim(p) => match p {
                Prim::Bool | Prim::I8 | Prim::U8 => 1,
                Prim::I16 | Prim::U16 => 2,
                Prim::I32 | Prim::U32 | Prim::F32 => 4,
                _ => 8,
            },
            Ty::Struct(s) => s.fields.iter().map(|f| f.ty.size()).sum(),
            Ty::Array(a) => a.len * a.elem.size(),
            Ty::Tuple(t) => t.elems.iter().map(Ty::size).sum(),
        }
    }
}

/// The C member name of element `k` of a tuple value (see [`Ty::Tuple`]).
///
/// ```
/// assert_eq!(skel::plumbing::codegen::tuple_field(1), "f1");
/// ```
pub fn tuple_field(k: usize) -> String {
    format!("f{k}")
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

/// `[elem; len]`.
#[derive(Debug)]
pub struct ArrayTy {
    /// Element type.
    pub elem: Ty,
    /// Number of elements.
    pub len: usize,
}

/// A tuple type: element types in order, and where Rust put each element.
#[derive(Debug)]
pub struct TupleTy {
    /// Element types, `.0` first.
    pub elems: &'static [Ty],
    /// Byte offset of each element in Rust's layout (Rust may reorder tuple elements).
    pub offsets: &'static [usize],
}

#[cfg_attr(not(any(feature = "cuda", feature = "opencl")), allow(dead_code))]
pub(crate) mod cost;
mod dialect;
mod emit_c;
pub mod ir;
#[cfg_attr(not(any(feature = "cuda", feature = "opencl")), allow(dead_code))]
pub(crate) mod loopnest;
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) mod tile;
mod typeck;
// Added after the others to ease merges.
pub(crate) mod range;

pub use dialect::{c_type, Dialect};
pub use emit_c::{
    array_len_param, array_len_param_named, checked_functions, device_source,
    device_source_checked, device_source_multi, local_array_bytes_of, DeviceSource,
};
pub use ir::ConstValue;
pub use ir::FnDef;
