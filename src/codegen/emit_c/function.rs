//! One user function: its C signature (how each kind of parameter is passed) and the
//! emitter state its body is written with (output, indentation, scopes of names).

use std::collections::{HashMap, HashSet};

use super::array_len::array_len_param_of;
use super::program::Program;
use super::{key, R};
use crate::codegen::dialect::{c_type, Dialect, RESERVED};
use crate::codegen::ir::{FnDef, ParamKind};
use crate::codegen::range::Ranges;
use crate::codegen::typeck::TBlock;
use crate::codegen::{Prim, Ty};

impl Program {
    pub(super) fn emit_fn(&mut self, def: &'static FnDef, body: &TBlock) -> R<String> {
        self.add_ty(def.ret)?;
        for p in def.params {
            self.add_ty(p.ty)?;
        }
        self.add_types_block(body)?;
        let d = self.dialect;
        let mut e = FnEmitter {
            prog: self,
            out: String::new(),
            indent: 1,
            scopes: vec![HashMap::new()],
            used: HashSet::new(),
            tmp: 0,
            ranges: Ranges::default(),
        };
        let mut params = Vec::new();
        if e.prog.checked {
            e.fault_helpers();
            params.push(format!(
                "SKEL_FAULT_SPACE {}* skel_fault",
                c_type(Ty::Prim(Prim::U32), d)
            ));
        }
        for p in def.params {
            let cname = e.declare_name(p.name);
            let b = match p.kind {
                ParamKind::Index | ParamKind::IndexRow | ParamKind::IndexCol => {
                    params.push(format!("{} {cname}", c_type(Ty::Prim(Prim::Usize), d)));
                    Bind::Value(cname)
                }
                ParamKind::Elem | ParamKind::Uniform => {
                    params.push(format!("{} {cname}", c_type(p.ty, d)));
                    Bind::Value(cname)
                }
                ParamKind::Array => {
                    params.push(format!(
                        "SKEL_ARRAY_SPACE const {}* {cname}",
                        c_type(p.ty, d)
                    ));
                    let wants_len =
                        e.prog.checked || array_len_param_of(def, p.name, &mut Vec::new());
                    let len = wants_len.then(|| {
                        let len = e.fresh_name(&format!("{cname}_len"));
                        params.push(format!("{} {len}", c_type(Ty::Prim(Prim::Usize), d)));
                        len
                    });
                    Bind::Slice(cname, None, len)
                }
                // Every variant takes the radii: the checked one checks offsets against
                // them, the unchecked one clamps offsets into them.
                ParamKind::Window => {
                    let r = e.fresh_name(&format!("{cname}_r"));
                    params.push(format!(
                        "SKEL_WINDOW_SPACE const {}* {cname}, {} {r}",
                        c_type(p.ty, d),
                        c_type(Ty::Prim(Prim::I64), d)
                    ));
                    Bind::Win(cname, None, vec![r])
                }
                ParamKind::Mat => {
                    // Bound like a 2D window whose stride is the column count, plus the rows.
                    let rows = e.fresh_name(&format!("{cname}_rows"));
                    let cols = e.fresh_name(&format!("{cname}_cols"));
                    let usize_t = c_type(Ty::Prim(Prim::Usize), d);
                    params.push(format!(
                        "SKEL_ARRAY_SPACE const {}* {cname}, {usize_t} {rows}, {usize_t} {cols}",
                        c_type(p.ty, d)
                    ));
                    Bind::Slice(cname, Some(cols), Some(rows))
                }
                ParamKind::Window2 => {
                    let stride = e.fresh_name(&format!("{cname}_stride"));
                    let rr = e.fresh_name(&format!("{cname}_rr"));
                    let rc = e.fresh_name(&format!("{cname}_rc"));
                    let (it, i64t) = (
                        c_type(Ty::Prim(Prim::Isize), d),
                        c_type(Ty::Prim(Prim::I64), d),
                    );
                    params.push(format!(
                        "SKEL_WINDOW_SPACE const {}* {cname}, {it} {stride}, {i64t} {rr}, {i64t} {rc}",
                        c_type(p.ty, d)
                    ));
                    Bind::Win(cname, Some(stride), vec![rr, rc])
                }
                ParamKind::Window3 => {
                    let strides = ["s0", "s1"].map(|s| e.fresh_name(&format!("{cname}_{s}")));
                    let radii: Vec<String> = ["r0", "r1", "r2"]
                        .iter()
                        .map(|r| e.fresh_name(&format!("{cname}_{r}")))
                        .collect();
                    let (it, i64t) = (
                        c_type(Ty::Prim(Prim::Isize), d),
                        c_type(Ty::Prim(Prim::I64), d),
                    );
                    params.push(format!(
                        "SKEL_WINDOW_SPACE const {}* {cname}, {it} {}, {it} {}, {i64t} {}, {i64t} {}, {i64t} {}",
                        c_type(p.ty, d),
                        strides[0],
                        strides[1],
                        radii[0],
                        radii[1],
                        radii[2]
                    ));
                    Bind::Win3(cname, strides, radii)
                }
            };
            e.scopes[0].insert(p.name, b);
        }
        e.block_stmts(&def.body, body, Tail::Return)?;
        let code = std::mem::take(&mut e.out);
        let name = &self.names[&key(def)];
        Ok(format!(
            "SKEL_FN {} {name}({}) {{\n{code}}}\n\n",
            c_type(def.ret, d),
            params.join(", ")
        ))
    }
}

#[derive(Clone)]
pub(super) enum Bind {
    Value(String),
    /// An array or window pointer, with the stride name of a 2D window and the length
    /// name of an array whose length the function takes.
    Slice(String, Option<String>, Option<String>),
    /// A window of the checked variant: its pointer, the row stride of a 2D window and the
    /// radius names (one; a 2D window's row and column radii).
    Win(String, Option<String>, Vec<String>),
    /// A 3D window: its pointer, the plane and row strides and the three radii.
    Win3(String, [String; 2], Vec<String>),
}

#[derive(Clone)]
pub(super) enum Tail {
    Return,
    Assign(String),
    Discard,
}

pub(super) struct FnEmitter<'p> {
    pub(super) prog: &'p mut Program,
    pub(super) out: String,
    pub(super) indent: usize,
    pub(super) scopes: Vec<HashMap<&'static str, Bind>>,
    pub(super) used: HashSet<String>,
    pub(super) tmp: usize,
    /// The loops around the code being emitted, for indices proven in range.
    pub(super) ranges: Ranges,
}

impl FnEmitter<'_> {
    pub(super) fn d(&self) -> Dialect {
        self.prog.dialect
    }

    pub(super) fn line(&mut self, s: &str) {
        for _ in 0..self.indent {
            self.out.push_str("    ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }

    fn fresh_name(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut n = 1;
        while self.used.contains(&name) {
            name = format!("{base}_{n}");
            n += 1;
        }
        self.used.insert(name.clone());
        name
    }

    /// A C name for a user's local or parameter: never a C keyword, builtin or macro.
    pub(super) fn declare_name(&mut self, rust: &str) -> String {
        let safe = !RESERVED.contains(&rust)
            && !rust.starts_with('_')
            && !rust.starts_with("skel")
            && !rust.chars().any(|c| c.is_ascii_uppercase());
        let base = if safe {
            rust.to_string()
        } else {
            format!("{rust}_")
        };
        self.fresh_name(&base)
    }

    pub(super) fn temp(&mut self) -> String {
        loop {
            let n = format!("skel_t{}", self.tmp);
            self.tmp += 1;
            if self.used.insert(n.clone()) {
                return n;
            }
        }
    }

    pub(super) fn lookup(&self, name: &str) -> R<Bind> {
        for s in self.scopes.iter().rev() {
            if let Some(b) = s.get(name) {
                return Ok(b.clone());
            }
        }
        Err(format!("unknown variable `{name}`"))
    }

    /// Runs `f` with a fresh output buffer; returns what it wrote and its result.
    pub(super) fn capture<T>(&mut self, f: impl FnOnce(&mut Self) -> R<T>) -> R<(String, T)> {
        let saved = std::mem::take(&mut self.out);
        let r = f(self);
        let pre = std::mem::replace(&mut self.out, saved);
        Ok((pre, r?))
    }

    /// A C helper function `name`, defined once per program by `code(name)`.
    pub(super) fn helper_fn(&mut self, name: String, code: impl FnOnce(&str) -> String) -> String {
        if !self.prog.helpers.contains_key(&name) {
            let c = code(&name);
            self.prog.helpers.insert(name.clone(), c);
        }
        name
    }
}
