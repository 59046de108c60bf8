//! The C dialects the generator writes, and how each names types and math functions.

use super::ir::MathFn;
use super::{Prim, Ty};

/// Which C the generated source is for.
///
/// ```
/// use skel::plumbing::codegen::{c_type, Dialect, Prim, Ty};
/// assert_eq!(c_type(Ty::Prim(Prim::U8), Dialect::OpenCl), "uchar");
/// assert_eq!(c_type(Ty::Prim(Prim::I64), Dialect::Cuda), "long long");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Dialect {
    /// CUDA C++ (NVRTC).
    Cuda,
    /// OpenCL C.
    OpenCl,
    /// Plain C99 with `<math.h>`, for testing the generator on the host.
    #[doc(hidden)]
    HostC,
}

/// The C spelling of a device type in `dialect` (structs are named by their Rust name).
///
/// ```
/// use skel::plumbing::codegen::{c_type, Dialect, Prim, Ty};
/// assert_eq!(c_type(Ty::Prim(Prim::F32), Dialect::Cuda), "float");
/// assert_eq!(c_type(Ty::Prim(Prim::Usize), Dialect::OpenCl), "ulong");
/// ```
pub fn c_type(ty: Ty, dialect: Dialect) -> String {
    let ocl = dialect == Dialect::OpenCl;
    match ty {
        Ty::Struct(s) => s.name.to_string(),
        Ty::Array(_) | Ty::Tuple(_) => format!("skel_{}", ty_tag(ty)),
        Ty::Prim(p) => match p {
            // OpenCL C allows no `bool` in buffers or kernel arguments.
            Prim::Bool if ocl => "uchar",
            Prim::Bool => "bool",
            Prim::I8 if ocl => "char",
            Prim::I8 => "signed char",
            Prim::I16 => "short",
            Prim::I32 => "int",
            Prim::I64 | Prim::Isize if ocl => "long",
            Prim::I64 | Prim::Isize => "long long",
            Prim::U8 if ocl => "uchar",
            Prim::U8 => "unsigned char",
            Prim::U16 if ocl => "ushort",
            Prim::U16 => "unsigned short",
            Prim::U32 if ocl => "uint",
            Prim::U32 => "unsigned int",
            Prim::U64 | Prim::Usize if ocl => "ulong",
            Prim::U64 | Prim::Usize => "unsigned long long",
            Prim::F32 => "float",
            Prim::F64 => "double",
        }
        .to_string(),
    }
}

/// A C identifier fragment naming `ty` uniquely: primitives by their Rust name, structs
/// length-prefixed (`5Pixel`), arrays `a<N>_<elem>`, tuples `t<K>_<elems>` (the parts are
/// prefix-free, so two different types never get the same tag).
pub(crate) fn ty_tag(ty: Ty) -> String {
    match ty {
        Ty::Prim(p) => format!("{p:?}").to_lowercase(),
        Ty::Struct(s) => format!("{}{}", s.name.len(), s.name),
        Ty::Array(a) => format!("a{}_{}", a.len, ty_tag(a.elem)),
        Ty::Tuple(t) => {
            let parts: String = t.elems.iter().map(|e| ty_tag(*e)).collect();
            format!("t{}_{parts}", t.elems.len())
        }
    }
}

/// The dialect's prelude: includes, qualifiers and the address-space macros.
pub(crate) fn prelude(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Cuda => {
            "#ifndef SKEL_PRELUDE\n#define SKEL_PRELUDE\n\
             #ifndef SKEL_ARRAY_SPACE\n#define SKEL_ARRAY_SPACE\n#endif\n\
             #ifndef SKEL_WINDOW_SPACE\n#define SKEL_WINDOW_SPACE\n#endif\n\
             #define SKEL_FN static __device__ __forceinline__\n\
             #endif\n"
        }
        Dialect::OpenCl => {
            "#ifndef SKEL_PRELUDE\n#define SKEL_PRELUDE\n\
             #ifdef cl_khr_fp64\n#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n#endif\n\
             #pragma OPENCL FP_CONTRACT OFF\n\
             #ifndef SKEL_ARRAY_SPACE\n#define SKEL_ARRAY_SPACE __global\n#endif\n\
             #ifndef SKEL_WINDOW_SPACE\n#define SKEL_WINDOW_SPACE __global\n#endif\n\
             #define SKEL_FN static inline\n\
             #endif\n"
        }
        Dialect::HostC => {
            "#ifndef SKEL_PRELUDE\n#define SKEL_PRELUDE\n\
             #include <math.h>\n#include <stdbool.h>\n\
             #ifndef SKEL_ARRAY_SPACE\n#define SKEL_ARRAY_SPACE\n#endif\n\
             #ifndef SKEL_WINDOW_SPACE\n#define SKEL_WINDOW_SPACE\n#endif\n\
             #define SKEL_FN static inline\n\
             #endif\n"
        }
    }
}

/// C name of a float math function for `p` (`f32`/`f64`) in `dialect`.
pub(crate) fn float_math(f: MathFn, p: Prim, dialect: Dialect) -> Option<String> {
    let base = match f {
        MathFn::Abs => "fabs",
        MathFn::Sqrt => "sqrt",
        MathFn::Cbrt => "cbrt",
        MathFn::Powf | MathFn::Powi => "pow",
        MathFn::Exp => "exp",
        MathFn::Exp2 => "exp2",
        MathFn::Ln => "log",
        MathFn::Log2 => "log2",
        MathFn::Log10 => "log10",
        MathFn::Sin => "sin",
        MathFn::Cos => "cos",
        MathFn::Tan => "tan",
        MathFn::Asin => "asin",
        MathFn::Acos => "acos",
        MathFn::Atan => "atan",
        MathFn::Atan2 => "atan2",
        MathFn::Sinh => "sinh",
        MathFn::Cosh => "cosh",
        MathFn::Tanh => "tanh",
        MathFn::Hypot => "hypot",
        MathFn::Floor => "floor",
        MathFn::Ceil => "ceil",
        MathFn::Round => "round",
        MathFn::RoundTiesEven => "rint",
        MathFn::Trunc => "trunc",
        MathFn::Min => "fmin",
        MathFn::Max => "fmax",
        MathFn::MulAdd => "fma",
        MathFn::Copysign => "copysign",
        _ => return None,
    };
    // f32 in CUDA / C99: the `f`-suffixed functions (no silent double math); OpenCL's
    // built-ins are overloaded.
    Some(if dialect == Dialect::OpenCl || p == Prim::F64 {
        base.to_string()
    } else {
        format!("{base}f")
    })
}

/// Identifiers a user's name must not become in C (keywords of C, C++ and OpenCL C,
/// builtins and macros of the dialects' math libraries and work-item functions).
pub(crate) const RESERVED: &[&str] = &[
    // C / C++ keywords
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "bool",
    "true",
    "false",
    "alignas",
    "alignof",
    "and",
    "and_eq",
    "asm",
    "bitand",
    "bitor",
    "catch",
    "class",
    "compl",
    "concept",
    "consteval",
    "constexpr",
    "constinit",
    "const_cast",
    "co_await",
    "co_return",
    "co_yield",
    "decltype",
    "delete",
    "dynamic_cast",
    "explicit",
    "export",
    "friend",
    "mutable",
    "namespace",
    "new",
    "noexcept",
    "not",
    "not_eq",
    "nullptr",
    "operator",
    "or",
    "or_eq",
    "private",
    "protected",
    "public",
    "reinterpret_cast",
    "requires",
    "static_assert",
    "static_cast",
    "template",
    "this",
    "thread_local",
    "throw",
    "try",
    "typeid",
    "typename",
    "using",
    "virtual",
    "wchar_t",
    "xor",
    "xor_eq",
    "main",
    // OpenCL C
    "kernel",
    "global",
    "local",
    "constant",
    "private",
    "read_only",
    "write_only",
    "read_write",
    "uniform",
    "pipe",
    "half",
    "uchar",
    "ushort",
    "uint",
    "ulong",
    "size_t",
    "ptrdiff_t",
    "intptr_t",
    "uintptr_t",
    "image2d_t",
    "image3d_t",
    "sampler_t",
    "event_t",
    "get_global_id",
    "get_local_id",
    "get_group_id",
    "get_global_size",
    "get_local_size",
    "get_num_groups",
    "get_work_dim",
    "barrier",
    "mem_fence",
    "printf",
    "vload",
    "vstore",
    "min",
    "max",
    "clamp",
    "mix",
    "step",
    "smoothstep",
    "sign",
    "select",
    "dot",
    "cross",
    "length",
    "distance",
    "normalize",
    "abs",
    "abs_diff",
    "mad",
    "mad24",
    "mul24",
    "rsqrt",
    "rotate",
    "popcount",
    "clz",
    "ctz",
    "hadd",
    "rhadd",
    "upsample",
    "degrees",
    "radians",
    "any",
    "all",
    "bitselect",
    "shuffle",
    "convert",
    "as_float",
    "as_int",
    // CUDA
    "threadIdx",
    "blockIdx",
    "blockDim",
    "gridDim",
    "warpSize",
    "dim3",
    // math
    "fabs",
    "fabsf",
    "sqrt",
    "sqrtf",
    "pow",
    "powf",
    "pown",
    "powr",
    "exp",
    "expf",
    "exp2",
    "exp10",
    "log",
    "logf",
    "log2",
    "log2f",
    "log10",
    "log10f",
    "log1p",
    "expm1",
    "sin",
    "sinf",
    "cos",
    "cosf",
    "tan",
    "tanf",
    "asin",
    "acos",
    "atan",
    "atan2",
    "sinh",
    "cosh",
    "tanh",
    "floor",
    "floorf",
    "ceil",
    "ceilf",
    "round",
    "roundf",
    "rint",
    "rintf",
    "trunc",
    "fmin",
    "fminf",
    "fmax",
    "fmaxf",
    "fma",
    "fmaf",
    "fmod",
    "fmodf",
    "remainder",
    "hypot",
    "cbrt",
    "erf",
    "erfc",
    "lgamma",
    "tgamma",
    "gamma",
    "j0",
    "j1",
    "jn",
    "y0",
    "y1",
    "yn",
    "nan",
    "frexp",
    "ldexp",
    "modf",
    "copysign",
    "nextafter",
    "signbit",
    "isnan",
    "isinf",
    "isfinite",
    "sincos",
    "native_sin",
    "native_cos",
    "native_exp",
    "native_log",
    "native_sqrt",
    "native_divide",
    "native_recip",
    "exit",
    "abort",
    "malloc",
    "free",
    "memcpy",
    "memset",
    "assert",
];
