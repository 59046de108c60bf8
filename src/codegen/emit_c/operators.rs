//! Binary operators and float-to-integer casts with Rust's semantics (wrapping integer
//! arithmetic, defined division by zero, saturating casts).

use super::function::FnEmitter;
use super::types::{int_bits, prim_tag};
use super::R;
use crate::check::FaultKind;
use crate::codegen::dialect::{c_type, Dialect};
use crate::codegen::ir::BinOp;
use crate::codegen::typeck::{is_float, is_int};
use crate::codegen::{Prim, Ty};

impl FnEmitter<'_> {
    pub(super) fn binary(&mut self, op: BinOp, l: &str, r: &str, lt: Ty, out: Ty) -> R<String> {
        let d = self.d();
        let Ty::Prim(p) = lt else {
            return Err("operator applied to a struct".into());
        };
        if is_int(p) {
            if let Some(e) = self.int_binary(op, l, r, p)? {
                return Ok(e);
            }
        }
        let sym = match op {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem if is_float(p) => {
                let f = if d == Dialect::OpenCl || p == Prim::F64 {
                    "fmod"
                } else {
                    "fmodf"
                };
                return Ok(format!("{f}({l}, {r})"));
            }
            BinOp::Rem => "%",
            BinOp::And => "&&",
            BinOp::Or => "||",
            BinOp::BitAnd => "&",
            BinOp::BitOr => "|",
            BinOp::BitXor => "^",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
        };
        let e = format!("({l} {sym} {r})");
        Ok(match out {
            Ty::Prim(q @ (Prim::I8 | Prim::I16 | Prim::U8 | Prim::U16)) => {
                format!("(({}){e})", c_type(Ty::Prim(q), d))
            }
            Ty::Prim(Prim::Bool) if matches!(op, BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor) => {
                format!("((bool){e})")
            }
            _ => e,
        })
    }

    /// Integer `+ - * / % << >>` with Rust's wrapping semantics (a release build's): the
    /// arithmetic runs in an unsigned type of at least 32 bits, so neither signed overflow
    /// nor the promotion of a narrow type to `int` is undefined; shift amounts are taken
    /// modulo the width; division and remainder go through helpers that define `MIN / -1`
    /// (wraps) and a zero divisor. `None` for the other operators.
    fn int_binary(&mut self, op: BinOp, l: &str, r: &str, p: Prim) -> R<Option<String>> {
        let d = self.d();
        let t = c_type(Ty::Prim(p), d);
        let (bits, signed) = int_bits(p);
        let ut = c_type(Ty::Prim(if bits <= 32 { Prim::U32 } else { Prim::U64 }), d);
        let mask = bits - 1;
        Ok(Some(match op {
            BinOp::Add | BinOp::Sub | BinOp::Mul => {
                let sym = match op {
                    BinOp::Add => "+",
                    BinOp::Sub => "-",
                    _ => "*",
                };
                format!("(({t})(({ut})({l}) {sym} ({ut})({r})))")
            }
            BinOp::Shl => format!("(({t})(({ut})({l}) << (({r}) & {mask})))"),
            // `>>` of a signed value is arithmetic in every dialect skel emits
            BinOp::Shr => format!("(({t})(({l}) >> (({r}) & {mask})))"),
            BinOp::Div | BinOp::Rem => {
                let div = op == BinOp::Div;
                let checked = self.prog.checked;
                let (params, fault, args) = if checked {
                    let i64t = c_type(Ty::Prim(Prim::I64), d);
                    let kind = if div {
                        FaultKind::DivZero
                    } else {
                        FaultKind::RemZero
                    };
                    self.fault_helpers();
                    (
                        format!(
                            "SKEL_FAULT_SPACE {u32t}* f, {t} a, {t} b, {u32t} id",
                            u32t = c_type(Ty::Prim(Prim::U32), d)
                        ),
                        format!("if (b == 0) {{ skel_fault_rec(f, {}u, ({i64t})a, 0, id); return 0; }} ", kind.code()),
                        format!("skel_fault, {l}, {r}, {}u", self.prog.current),
                    )
                } else {
                    (format!("{t} a, {t} b"), String::new(), format!("{l}, {r}"))
                };
                let name = format!(
                    "skel_{}_{}{}",
                    if div { "div" } else { "rem" },
                    prim_tag(p),
                    if checked { "_chk" } else { "" }
                );
                let body = match (div, signed) {
                    (true, true) => format!(
                        "if (b == 0) return 0; if (b == -1) return ({t})(({ut})0 - ({ut})a); return a / b;"
                    ),
                    (false, true) => "if (b == 0 || b == -1) return 0; return a % b;".to_string(),
                    (true, false) => "if (b == 0) return 0; return a / b;".to_string(),
                    (false, false) => "if (b == 0) return 0; return a % b;".to_string(),
                };
                let h = self.helper_fn(name, |n| {
                    format!("SKEL_FN {t} {n}({params}) {{ {fault}{body} }}\n")
                });
                format!("{h}({args})")
            }
            _ => return Ok(None),
        }))
    }

    /// `v as to` for a float `v`: Rust's `as` truncates toward zero and saturates (NaN
    /// gives 0, out of range the nearest bound), where a plain C cast is undefined. OpenCL
    /// too gets the helper: `convert_int_sat_rtz` of a NaN double is INT_MIN on NVIDIA's
    /// driver although the specification says 0.
    pub(super) fn float_to_int(&mut self, v: &str, from: Prim, to: Prim) -> String {
        let d = self.d();
        let it = c_type(Ty::Prim(to), d);
        let name = format!("skel_{}_to_{}", prim_tag(from), prim_tag(to));
        if !self.prog.helpers.contains_key(&name) {
            let ft = c_type(Ty::Prim(from), d);
            let (bits, signed) = int_bits(to);
            // Both bounds are powers of two (or zero), exact in f32 and f64: at or below
            // `lo` the result is MIN, at or above `hi` = MAX + 1 it is MAX (e.g.
            // `(float)INT_MAX` would round up to 2^31, which does not fit); strictly in
            // between, truncation toward zero gives a value in range.
            let (min, max) = if signed {
                (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
            } else {
                (0, (1i128 << bits) - 1)
            };
            let flit = |x: i128| {
                let s = format!("{x}.0{}", if from == Prim::F32 { "f" } else { "" });
                if x < 0 {
                    format!("({s})")
                } else {
                    s
                }
            };
            let code = format!(
                "SKEL_FN {it} {name}({ft} x) {{ return x != x ? {zero} : x <= {lo} ? {min} : x >= {hi} ? {max} : ({it})x; }}\n",
                zero = self.int_lit(0, to),
                lo = flit(min),
                hi = flit(max + 1),
                min = self.int_lit(min, to),
                max = self.int_lit(max, to),
            );
            self.prog.helpers.insert(name.clone(), code);
        }
        format!("{name}({v})")
    }
}
