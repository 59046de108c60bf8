//! Method calls of the math library (`x.sqrt()`, `a.min(b)`, `n.count_ones()`) with Rust's
//! semantics in each dialect.

use super::function::FnEmitter;
use super::literals::{fmt_f32, fmt_f64};
use super::types::{int_bits, prim_tag};
use super::R;
use crate::codegen::dialect::{c_type, float_math, Dialect};
use crate::codegen::ir::MathFn;
use crate::codegen::typeck::is_float;
use crate::codegen::{Prim, Ty};

impl FnEmitter<'_> {
    /// The C of `func(args..)` for receiver type `p`, with Rust's semantics.
    pub(super) fn math(&mut self, func: MathFn, p: Prim, vs: &[String]) -> R<String> {
        let d = self.d();
        let t = c_type(Ty::Prim(p), d);
        let args = vs.join(", ");
        let name = format!("skel_{}_{}", func.name(), prim_tag(p));
        if is_float(p) {
            let f = |m: MathFn| float_math(m, p, d).unwrap_or_default();
            let one = if p == Prim::F32 { "1.0f" } else { "1.0" };
            let body = match func {
                MathFn::Powi if d == Dialect::OpenCl => return Ok(format!("pown({args})")),
                MathFn::Powi => return Ok(format!("{}({}, ({t})({}))", f(func), vs[0], vs[1])),
                MathFn::Fract => format!("return x - {}(x);", f(MathFn::Trunc)),
                // NaN stays NaN; zeros keep their sign: signum(-0.0) == -1.0
                MathFn::Signum => format!("return x != x ? x : {}({one}, x);", f(MathFn::Copysign)),
                MathFn::IsNan => "return x != x;".to_string(),
                MathFn::IsFinite => {
                    let max = if p == Prim::F32 {
                        fmt_f32(f32::MAX)
                    } else {
                        fmt_f64(f64::MAX)
                    };
                    format!("return {}(x) <= {max};", f(MathFn::Abs))
                }
                // As Rust: `if x < lo { lo } else if x > hi { hi } else { x }` (NaN x stays)
                MathFn::Clamp => "return x < lo ? lo : x > hi ? hi : x;".to_string(),
                _ => match float_math(func, p, d) {
                    Some(c) => return Ok(format!("{c}({args})")),
                    None => return Err(format!("`{}` is not defined for floats", func.name())),
                },
            };
            let ret = match func {
                MathFn::IsNan | MathFn::IsFinite => c_type(Ty::Prim(Prim::Bool), d),
                _ => t.clone(),
            };
            let params = if func == MathFn::Clamp {
                format!("{t} x, {t} lo, {t} hi")
            } else {
                format!("{t} x")
            };
            let h = self.helper_fn(name, |n| {
                format!("SKEL_FN {ret} {n}({params}) {{ {body} }}\n")
            });
            return Ok(format!("{h}({args})"));
        }
        let (bits, signed) = int_bits(p);
        // Wrapping arithmetic in an unsigned type of at least 32 bits (no promotion to a
        // signed `int` that could overflow), then truncated back to the type.
        let ut = c_type(Ty::Prim(if bits <= 32 { Prim::U32 } else { Prim::U64 }), d);
        let uw = c_type(
            Ty::Prim(match bits {
                8 => Prim::U8,
                16 => Prim::U16,
                32 => Prim::U32,
                _ => Prim::U64,
            }),
            d,
        );
        let u32t = c_type(Ty::Prim(Prim::U32), d);
        let popcount = |x: &str| match d {
            Dialect::Cuda if bits == 64 => format!("(unsigned int)__popcll({x})"),
            Dialect::Cuda => format!("(unsigned int)__popc((unsigned int)({x}))"),
            Dialect::OpenCl => format!("(uint)popcount({x})"),
            Dialect::HostC if bits == 64 => format!("(unsigned int)__builtin_popcountll({x})"),
            Dialect::HostC => format!("(unsigned int)__builtin_popcount((unsigned int)({x}))"),
        };
        let (params, ret, body) = match func {
            MathFn::Min => (format!("{t} a, {t} b"), t.clone(), "return a < b ? a : b;".to_string()),
            MathFn::Max => (format!("{t} a, {t} b"), t.clone(), "return a > b ? a : b;".to_string()),
            MathFn::Clamp => (
                format!("{t} a, {t} lo, {t} hi"),
                t.clone(),
                "return a < lo ? lo : a > hi ? hi : a;".to_string(),
            ),
            // MIN.abs() wraps to MIN, as in a release build
            MathFn::Abs if signed => (
                format!("{t} a"),
                t.clone(),
                format!("return a < 0 ? ({t})(({ut})0 - ({ut})a) : a;"),
            ),
            MathFn::Abs => (format!("{t} a"), t.clone(), "return a;".to_string()),
            MathFn::WrappingAdd | MathFn::WrappingSub | MathFn::WrappingMul => {
                let op = match func {
                    MathFn::WrappingAdd => "+",
                    MathFn::WrappingSub => "-",
                    _ => "*",
                };
                (
                    format!("{t} a, {t} b"),
                    t.clone(),
                    format!("return ({t})(({ut})a {op} ({ut})b);"),
                )
            }
            // wrapping, as in a release build
            MathFn::Pow => (
                format!("{t} a, {u32t} e"),
                t.clone(),
                format!(
                    "{ut} r = 1, b = ({ut})a; while (e) {{ if (e & 1u) r *= b; b *= b; e >>= 1; }} return ({t})r;"
                ),
            ),
            MathFn::RotateLeft | MathFn::RotateRight => {
                let (l, r) = if func == MathFn::RotateLeft { ("<<", ">>") } else { (">>", "<<") };
                (
                    format!("{t} a, {u32t} n"),
                    t.clone(),
                    format!(
                        "{uw} x = ({uw})a; n %= {bits}u; if (n == 0u) return a; return ({t})({uw})((x {l} n) | (x {r} ({bits}u - n)));"
                    ),
                )
            }
            MathFn::CountOnes => (
                format!("{t} a"),
                u32t.clone(),
                format!("return {};", popcount(&format!("({uw})a"))),
            ),
            // the bits below the lowest set bit (all of them for 0), counted
            MathFn::TrailingZeros => (
                format!("{t} a"),
                u32t.clone(),
                format!("{uw} x = ({uw})a; {uw} y = ({uw})(~x & (x - 1)); return {};", popcount("y")),
            ),
            MathFn::LeadingZeros => {
                let count = match d {
                    Dialect::OpenCl => "(uint)clz(x)".to_string(),
                    Dialect::Cuda if bits == 64 => "(unsigned int)__clzll((long long)x)".to_string(),
                    Dialect::Cuda => format!("(unsigned int)__clz((int)(unsigned int)x) - {}u", 32 - bits),
                    Dialect::HostC if bits == 64 => "x == 0 ? 64u : (unsigned int)__builtin_clzll(x)".to_string(),
                    Dialect::HostC => format!(
                        "x == 0 ? {bits}u : (unsigned int)__builtin_clz((unsigned int)x) - {}u",
                        32 - bits
                    ),
                };
                (format!("{t} a"), u32t.clone(), format!("{uw} x = ({uw})a; return {count};"))
            }
            _ => return Err(format!("`{}` is not defined for integers", func.name())),
        };
        let h = self.helper_fn(name, |n| {
            format!("SKEL_FN {ret} {n}({params}) {{ {body} }}\n")
        });
        Ok(format!("{h}({args})"))
    }
}
