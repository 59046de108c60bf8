//! Literals and constants: integer and float literals in each dialect, the named constants of
//! the primitive types (`f32::PI`, `u8::MAX`) and `const` values from their bytes.

use super::function::FnEmitter;
use super::types::int_bits;
use super::R;
use crate::codegen::dialect::{c_type, Dialect};
use crate::codegen::typeck::ty_name;
use crate::codegen::{Prim, Ty};

impl FnEmitter<'_> {
    /// A C expression of type `ty` with the value of `bytes` (Rust's layout, no padding).
    pub(super) fn const_c(&mut self, ty: Ty, bytes: &[u8]) -> R<String> {
        let d = self.d();
        Ok(match ty {
            Ty::Prim(p) => {
                let n = bytes.len();
                let mut b = [0u8; 8];
                b[..n].copy_from_slice(bytes);
                let raw = u64::from_ne_bytes(b);
                // the value's bits are in the low bytes on a little-endian host and in the
                // high ones on a big-endian host
                let raw = if cfg!(target_endian = "big") {
                    raw >> (64 - 8 * n as u32)
                } else {
                    raw
                };
                match p {
                    Prim::F32 => fmt_f32(f32::from_bits(raw as u32)),
                    Prim::F64 => fmt_f64(f64::from_bits(raw)),
                    Prim::Bool => (raw != 0).to_string(),
                    _ => {
                        let (bits, signed) = int_bits(p);
                        let v = if signed {
                            ((raw << (64 - bits)) as i64 >> (64 - bits)) as i128
                        } else {
                            raw as i128
                        };
                        self.int_lit(v, p)
                    }
                }
            }
            Ty::Struct(s) => {
                let mut vals = Vec::new();
                let mut at = 0;
                for f in s.fields {
                    let n = f.ty.size();
                    vals.push(self.const_c(f.ty, &bytes[at..at + n])?);
                    at += n;
                }
                format!("skel_make_{}({})", s.name, vals.join(", "))
            }
            Ty::Tuple(tt) => {
                let mut vals = Vec::new();
                for (e, &at) in tt.elems.iter().zip(tt.offsets) {
                    vals.push(self.const_c(*e, &bytes[at..at + e.size()])?);
                }
                format!("skel_make_{}({})", c_type(ty, d), vals.join(", "))
            }
            Ty::Array(a) => {
                let n = a.elem.size();
                let mut vals = Vec::new();
                for k in 0..a.len {
                    vals.push(self.const_c(a.elem, &bytes[k * n..(k + 1) * n])?);
                }
                let t = self.temp();
                self.line(&format!("{} {t};", c_type(ty, d)));
                for (k, v) in vals.iter().enumerate() {
                    self.line(&format!("{t}.v[{k}] = {v};"));
                }
                t
            }
        })
    }

    pub(super) fn int_lit(&self, v: i128, p: Prim) -> String {
        let ocl = self.d() == Dialect::OpenCl;
        let ct = c_type(Ty::Prim(p), self.d());
        match p {
            Prim::I32 => {
                if v == i32::MIN as i128 {
                    "(-2147483647 - 1)".into()
                } else if v < 0 {
                    format!("({v})")
                } else {
                    format!("{v}")
                }
            }
            Prim::U32 => format!("{v}u"),
            Prim::I64 | Prim::Isize => {
                let s = if ocl { "L" } else { "LL" };
                if v == i64::MIN as i128 {
                    format!("(-9223372036854775807{s} - 1{s})")
                } else if v < 0 {
                    format!("({v}{s})")
                } else {
                    format!("{v}{s}")
                }
            }
            Prim::U64 | Prim::Usize => format!("{v}{}", if ocl { "UL" } else { "ULL" }),
            _ => format!("(({ct})({v}))"),
        }
    }

    pub(super) fn float_lit(&self, text: &str, p: Prim) -> R<String> {
        if p == Prim::F32 {
            let v: f32 = text
                .parse()
                .map_err(|_| format!("bad float literal `{text}`"))?;
            Ok(fmt_f32(v))
        } else if p == Prim::F64 {
            let v: f64 = text
                .parse()
                .map_err(|_| format!("bad float literal `{text}`"))?;
            Ok(fmt_f64(v))
        } else {
            Err(format!(
                "float literal `{text}` used as {}",
                ty_name(Ty::Prim(p))
            ))
        }
    }
}

pub(super) fn fmt_f32(v: f32) -> String {
    if v.is_nan() {
        "(0.0f / 0.0f)".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "(1.0f / 0.0f)".into()
        } else {
            "(-1.0f / 0.0f)".into()
        }
    } else {
        let s = format!("{v:?}");
        let s = if s.contains(['.', 'e']) {
            s
        } else {
            format!("{s}.0")
        };
        if v < 0.0 {
            format!("({s}f)")
        } else {
            format!("{s}f")
        }
    }
}

pub(super) fn fmt_f64(v: f64) -> String {
    if v.is_nan() {
        "(0.0 / 0.0)".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "(1.0 / 0.0)".into()
        } else {
            "(-1.0 / 0.0)".into()
        }
    } else {
        let s = format!("{v:?}");
        let s = if s.contains(['.', 'e']) {
            s
        } else {
            format!("{s}.0")
        };
        if v < 0.0 {
            format!("({s})")
        } else {
            s
        }
    }
}

pub(super) fn const_value(p: Prim, name: &str, e: &FnEmitter<'_>) -> R<String> {
    macro_rules! float_consts {
        ($t:ident, $fmt:ident) => {{
            use std::$t::consts as c;
            let v: $t = match name {
                "MAX" => $t::MAX,
                "MIN" => $t::MIN,
                "MIN_POSITIVE" => $t::MIN_POSITIVE,
                "EPSILON" => $t::EPSILON,
                "INFINITY" => $t::INFINITY,
                "NEG_INFINITY" => $t::NEG_INFINITY,
                "NAN" => $t::NAN,
                "PI" => c::PI,
                "E" => c::E,
                "TAU" => c::TAU,
                "SQRT_2" => c::SQRT_2,
                "LN_2" => c::LN_2,
                "LN_10" => c::LN_10,
                "LOG2_E" => c::LOG2_E,
                "LOG10_E" => c::LOG10_E,
                "LOG2_10" => c::LOG2_10,
                "LOG10_2" => c::LOG10_2,
                "FRAC_PI_2" => c::FRAC_PI_2,
                "FRAC_PI_3" => c::FRAC_PI_3,
                "FRAC_PI_4" => c::FRAC_PI_4,
                "FRAC_PI_6" => c::FRAC_PI_6,
                "FRAC_PI_8" => c::FRAC_PI_8,
                "FRAC_1_PI" => c::FRAC_1_PI,
                "FRAC_2_PI" => c::FRAC_2_PI,
                "FRAC_2_SQRT_PI" => c::FRAC_2_SQRT_PI,
                "FRAC_1_SQRT_2" => c::FRAC_1_SQRT_2,
                _ => return Err(format!("unknown constant `{}::{name}`", stringify!($t))),
            };
            Ok($fmt(v))
        }};
    }
    macro_rules! int_consts {
        ($t:ident) => {
            match name {
                "MAX" => Ok(e.int_lit($t::MAX as i128, p)),
                "BITS" => Ok(e.int_lit($t::BITS as i128, Prim::U32)),
                "MIN" => Ok(e.int_lit($t::MIN as i128, p)),
                _ => Err(format!("unknown constant `{}::{name}`", stringify!($t))),
            }
        };
    }
    match p {
        Prim::F32 => float_consts!(f32, fmt_f32),
        Prim::F64 => float_consts!(f64, fmt_f64),
        Prim::I8 => int_consts!(i8),
        Prim::I16 => int_consts!(i16),
        Prim::I32 => int_consts!(i32),
        Prim::I64 | Prim::Isize => int_consts!(i64),
        Prim::U8 => int_consts!(u8),
        Prim::U16 => int_consts!(u16),
        Prim::U32 => int_consts!(u32),
        Prim::U64 | Prim::Usize => int_consts!(u64),
        Prim::Bool => Err(format!("unknown constant `bool::{name}`")),
    }
}
