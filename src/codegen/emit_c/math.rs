//! Method calls of the math library (`x.sqrt()`, `a.min(b)`, `n.count_ones()`) with Rust's
//! semantics in each dialect.

use super::function::FnEmitter;
use super::literals::{fmt_f32, fmt_f64};
use super::types::{int_bits, prim_tag};
use super::R;
use crate::check::FaultKind;
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
        if func == MathFn::Clamp {
            return Ok(self.clamp(p, &name, vs));
        }
        if is_float(p) && matches!(func, MathFn::Min | MathFn::Max) {
            // As `skel::check::MinMax`: a NaN operand gives the other one, and of two zeros
            // `min` gives -0.0 and `max` +0.0 (C's `fmin`/`fmax` may give either).
            let (lt, neg) = if func == MathFn::Min {
                ("<", "a : b")
            } else {
                (">", "b : a")
            };
            let cs = float_math(MathFn::Copysign, p, d).unwrap_or_default();
            let one = if p == Prim::F32 { "1.0f" } else { "1.0" };
            let h = self.helper_fn(name, |n| {
                format!(
                    "SKEL_FN {t} {n}({t} a, {t} b) {{ return a {lt} b ? a : b {lt} a ? b : \
                     a != a ? b : b != b ? a : {cs}({one}, a) < 0 ? {neg}; }}\n"
                )
            });
            return Ok(format!("{h}({args})"));
        }
        if is_float(p) {
            let f = |m: MathFn| float_math(m, p, d).unwrap_or_default();
            let one = if p == Prim::F32 { "1.0f" } else { "1.0" };
            let body = match func {
                // Rust's `powi` (LLVM's `powi`, compiler-rt's `__powisf2`): squarings and
                // products in this order, then one reciprocal for a negative exponent; a
                // device `pow`/`pown` may round differently.
                MathFn::Powi => {
                    let i32t = c_type(Ty::Prim(Prim::I32), d);
                    let h = self.helper_fn(name, |n| {
                        format!(
                            "SKEL_FN {t} {n}({t} a, {i32t} b) {{ int recip = b < 0; {t} r = {one}; \
                             for (;;) {{ if (b & 1) r *= a; b /= 2; if (b == 0) break; a *= a; }} \
                             return recip ? {one} / r : r; }}\n"
                        )
                    });
                    return Ok(format!("{h}({args})"));
                }
                // As `skel::check::Powf`: 1 for a base of 1 or an exponent of ±0 whatever
                // the other operand (a NaN, quiet or signaling, included), as IEEE 754,
                // OpenCL and CUDA specify; glibc gives NaN for a signaling one.
                MathFn::Powf => {
                    let zero = if p == Prim::F32 { "0.0f" } else { "0.0" };
                    let pow = f(MathFn::Powf);
                    let h = self.helper_fn(name, |n| {
                        format!(
                            "SKEL_FN {t} {n}({t} a, {t} b) {{ return a == {one} || b == {zero} \
                             ? {one} : {pow}(a, b); }}\n"
                        )
                    });
                    return Ok(format!("{h}({args})"));
                }
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
                _ => match float_math(func, p, d) {
                    Some(c) => return Ok(format!("{c}({args})")),
                    None => return Err(format!("`{}` is not defined for floats", func.name())),
                },
            };
            let ret = match func {
                MathFn::IsNan | MathFn::IsFinite => c_type(Ty::Prim(Prim::Bool), d),
                _ => t.clone(),
            };
            let params = format!("{t} x");
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

    /// `x.clamp(lo, hi)` as Rust computes it: `if x < lo { lo } else if x > hi { hi } else
    /// { x }` (a NaN `x` stays NaN). Where Rust panics (`lo > hi` or a NaN bound) the
    /// checked variant records a [`FaultKind::Clamp`] fault, as the CPU backends return
    /// it; the unchecked variant gives that same expression's value.
    fn clamp(&mut self, p: Prim, name: &str, vs: &[String]) -> String {
        let d = self.d();
        let t = c_type(Ty::Prim(p), d);
        let body = "return x < lo ? lo : x > hi ? hi : x;";
        let args = vs.join(", ");
        if !self.prog.checked {
            let h = self.helper_fn(name.to_string(), |n| {
                format!("SKEL_FN {t} {n}({t} x, {t} lo, {t} hi) {{ {body} }}\n")
            });
            return format!("{h}({args})");
        }
        self.fault_helpers();
        let u32t = c_type(Ty::Prim(Prim::U32), d);
        let code = FaultKind::Clamp.code();
        let h = self.helper_fn(format!("{name}_chk"), |n| {
            format!(
                "SKEL_FN {t} {n}(SKEL_FAULT_SPACE {u32t}* f, {t} x, {t} lo, {t} hi, {u32t} id) {{ \
                 if (!(lo <= hi)) skel_fault_rec(f, {code}u, 0, 0, id); {body} }}\n"
            )
        });
        format!("{h}(skel_fault, {args}, {}u)", self.prog.current)
    }
}
