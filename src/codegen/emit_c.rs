//! Typed tree -> C source in one of the [`Dialect`]s.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::dialect::{c_type, float_math, prelude, Dialect, RESERVED};
use super::ir::{BinOp, Block, Expr, FnDef, MathFn, ParamKind, Stmt, UnOp};
use super::typeck::{self, is_float, ty_eq, ty_name, TBlock, TExpr, TStmt};
use super::{Prim, StructTy, Ty};
use crate::userfn::UserFn;
use crate::Error;

type R<T> = std::result::Result<T, String>;

/// Generated C source of one or more user functions, ready to be prepended to a kernel.
///
/// ```
/// use skel::prelude::*;
/// use skel::codegen::{device_source, Dialect};
/// #[userfn]
/// fn add(a: f32, b: f32) -> f32 { a + b }
/// let src = device_source::<add>(Dialect::Cuda)?;
/// assert_eq!(src.entry(), "skel_fn_add");
/// assert!(src.source.contains("float skel_fn_add(float a, float b)"));
/// # Ok::<(), skel::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceSource {
    /// Prelude, struct typedefs, helpers and every needed function, in dependency order.
    pub source: String,
    /// C identifiers of the requested functions, in the order they were requested.
    pub entries: Vec<String>,
}

impl DeviceSource {
    /// C identifier of the first requested function.
    pub fn entry(&self) -> &str {
        &self.entries[0]
    }
}

/// Translates user function `F` (and everything it calls) to C in `dialect`.
///
/// The emitted function follows the calling convention of [`crate::codegen`]. Errors are
/// [`Error::Compile`] with the reason in `log`.
///
/// ```
/// use skel::prelude::*;
/// use skel::codegen::{device_source, Dialect};
/// #[userfn]
/// fn half(x: f32) -> f32 { x * 0.5 }
/// let src = device_source::<half>(Dialect::OpenCl)?;
/// assert!(src.source.contains("0.5f"));
/// # Ok::<(), skel::Error>(())
/// ```
pub fn device_source<F: UserFn>(dialect: Dialect) -> crate::Result<DeviceSource> {
    device_source_multi(&[F::definition()], dialect)
}

/// Like [`device_source`] for several functions sharing one program (e.g. the map and the
/// reduce function of a MapReduce): structs and common callees are emitted once.
///
/// ```
/// use skel::prelude::*;
/// use skel::userfn::UserFn;
/// use skel::codegen::{device_source_multi, Dialect};
/// #[userfn]
/// fn mult(a: f32, b: f32) -> f32 { a * b }
/// #[userfn]
/// fn add(a: f32, b: f32) -> f32 { a + b }
/// let src = device_source_multi(&[mult::definition(), add::definition()], Dialect::Cuda)?;
/// assert_eq!(src.entries, ["skel_fn_mult", "skel_fn_add"]);
/// # Ok::<(), skel::Error>(())
/// ```
pub fn device_source_multi(
    defs: &[&'static FnDef],
    dialect: Dialect,
) -> crate::Result<DeviceSource> {
    let kernel = defs.first().map(|d| d.name).unwrap_or("");
    let mut prog = Program {
        dialect,
        names: HashMap::new(),
        used_fn_names: HashSet::new(),
        order: Vec::new(),
        structs: Vec::new(),
        helpers: BTreeMap::new(),
    };
    let build = |prog: &mut Program| -> R<DeviceSource> {
        for d in defs {
            prog.collect(d, &mut Vec::new())?;
        }
        let mut fns = String::new();
        for def in prog.order.clone() {
            let body =
                typeck::check(def).map_err(|m| format!("in user function `{}`: {m}", def.name))?;
            fns.push_str(
                &prog
                    .emit_fn(def, &body)
                    .map_err(|m| format!("in user function `{}`: {m}", def.name))?,
            );
        }
        let mut out = String::from(prelude(dialect));
        out.push('\n');
        for s in &prog.structs {
            out.push_str(&struct_decl(s, dialect));
        }
        for code in prog.helpers.values() {
            out.push_str(code);
        }
        out.push_str(&fns);
        let entries = defs.iter().map(|d| prog.names[&key(d)].clone()).collect();
        Ok(DeviceSource {
            source: out,
            entries,
        })
    };
    build(&mut prog).map_err(|log| Error::Compile {
        kernel: kernel.to_string(),
        log,
        source_code: String::new(),
    })
}

fn key(d: &'static FnDef) -> usize {
    d as *const FnDef as usize
}

fn field_name(n: &str) -> String {
    if RESERVED.contains(&n) || n.starts_with('_') || n.starts_with("skel") {
        format!("{n}_")
    } else {
        n.to_string()
    }
}

fn prim_tag(p: Prim) -> String {
    format!("{p:?}").to_lowercase()
}

fn struct_decl(s: &StructTy, d: Dialect) -> String {
    let mut out = format!("typedef struct {} {{\n", s.name);
    for f in s.fields {
        out.push_str(&format!(
            "    {} {};\n",
            c_type(f.ty, d),
            field_name(f.name)
        ));
    }
    out.push_str(&format!("}} {};\n", s.name));
    let params: Vec<String> = s
        .fields
        .iter()
        .enumerate()
        .map(|(i, f)| format!("{} f{i}", c_type(f.ty, d)))
        .collect();
    out.push_str(&format!(
        "SKEL_FN {n} skel_make_{n}({}) {{\n    {n} s;\n",
        params.join(", "),
        n = s.name
    ));
    for (i, f) in s.fields.iter().enumerate() {
        out.push_str(&format!("    s.{} = f{i};\n", field_name(f.name)));
    }
    out.push_str("    return s;\n}\n\n");
    out
}

struct Program {
    dialect: Dialect,
    names: HashMap<usize, String>,
    used_fn_names: HashSet<String>,
    order: Vec<&'static FnDef>,
    structs: Vec<&'static StructTy>,
    helpers: BTreeMap<String, String>,
}

fn callees_block(b: &'static Block, out: &mut Vec<&'static FnDef>) {
    for s in b.stmts {
        match s {
            Stmt::Let { init, .. } => {
                if let Some(e) = init {
                    callees_expr(e, out)
                }
            }
            Stmt::Assign { place, value, .. } => {
                callees_expr(place, out);
                callees_expr(value, out);
            }
            Stmt::Expr(e) => callees_expr(e, out),
            Stmt::For {
                start, end, body, ..
            } => {
                callees_expr(start, out);
                callees_expr(end, out);
                callees_block(body, out);
            }
            Stmt::While { cond, body } => {
                callees_expr(cond, out);
                callees_block(body, out);
            }
            Stmt::Return(Some(e)) => callees_expr(e, out),
            Stmt::Return(None) | Stmt::Break | Stmt::Continue => {}
        }
    }
    if let Some(t) = b.tail {
        callees_expr(t, out);
    }
}

fn callees_expr(e: &'static Expr, out: &mut Vec<&'static FnDef>) {
    match e {
        Expr::Int { .. }
        | Expr::Float { .. }
        | Expr::Bool(_)
        | Expr::Var(_)
        | Expr::Const { .. } => {}
        Expr::Unary { expr, .. } | Expr::Cast { expr, .. } | Expr::Field { expr, .. } => {
            callees_expr(expr, out)
        }
        Expr::Binary { lhs, rhs, .. } => {
            callees_expr(lhs, out);
            callees_expr(rhs, out);
        }
        Expr::Call { callee, args } => {
            out.push(callee());
            args.iter().for_each(|a| callees_expr(a, out));
        }
        Expr::Math { args, .. } => args.iter().for_each(|a| callees_expr(a, out)),
        Expr::Index { base, index } => {
            callees_expr(base, out);
            callees_expr(index, out);
        }
        Expr::Index2 { base, row, col } => {
            callees_expr(base, out);
            callees_expr(row, out);
            callees_expr(col, out);
        }
        Expr::Struct { fields, .. } => fields.iter().for_each(|f| callees_expr(&f.value, out)),
        Expr::If { cond, then, els } => {
            callees_expr(cond, out);
            callees_block(then, out);
            if let Some(b) = els {
                callees_block(b, out);
            }
        }
        Expr::Block(b) => callees_block(b, out),
    }
}

impl Program {
    fn collect(&mut self, def: &'static FnDef, stack: &mut Vec<usize>) -> R<()> {
        let k = key(def);
        if self.names.contains_key(&k) {
            return Ok(());
        }
        if stack.contains(&k) {
            return Err(format!(
                "user function `{}` is recursive, which device code does not allow",
                def.name
            ));
        }
        stack.push(k);
        let mut callees = Vec::new();
        callees_block(&def.body, &mut callees);
        for c in callees {
            self.collect(c, stack)?;
        }
        stack.pop();
        let base = format!("skel_fn_{}", def.name);
        let mut name = base.clone();
        let mut n = 2;
        while self.used_fn_names.contains(&name) {
            name = format!("{base}_{n}");
            n += 1;
        }
        self.used_fn_names.insert(name.clone());
        self.names.insert(k, name);
        self.order.push(def);
        Ok(())
    }

    fn add_ty(&mut self, t: Ty) -> R<()> {
        if let Ty::Struct(s) = t {
            if let Some(old) = self.structs.iter().find(|o| o.name == s.name) {
                if !ty_eq(Ty::Struct(old), t) {
                    return Err(format!(
                        "two different structs named `{}` in one program",
                        s.name
                    ));
                }
                return Ok(());
            }
            for f in s.fields {
                self.add_ty(f.ty)?;
            }
            self.structs.push(s);
        }
        Ok(())
    }

    fn add_types_expr(&mut self, e: &TExpr) -> R<()> {
        if let Some(t) = e.ty {
            self.add_ty(t)?;
        }
        for k in &e.kids {
            self.add_types_expr(k)?;
        }
        for b in &e.blocks {
            self.add_types_block(b)?;
        }
        Ok(())
    }

    fn add_types_block(&mut self, b: &TBlock) -> R<()> {
        for s in &b.stmts {
            if let Some(t) = s.ty {
                self.add_ty(t)?;
            }
            for k in &s.kids {
                self.add_types_expr(k)?;
            }
            for b in &s.blocks {
                self.add_types_block(b)?;
            }
        }
        if let Some(t) = &b.tail {
            self.add_types_expr(t)?;
        }
        Ok(())
    }

    fn emit_fn(&mut self, def: &'static FnDef, body: &TBlock) -> R<String> {
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
        };
        let mut params = Vec::new();
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
                    Bind::Slice(cname, None)
                }
                ParamKind::Window => {
                    params.push(format!(
                        "SKEL_WINDOW_SPACE const {}* {cname}",
                        c_type(p.ty, d)
                    ));
                    Bind::Slice(cname, None)
                }
                ParamKind::Window2 => {
                    let stride = e.fresh_name(&format!("{cname}_stride"));
                    params.push(format!(
                        "SKEL_WINDOW_SPACE const {}* {cname}, {} {stride}",
                        c_type(p.ty, d),
                        c_type(Ty::Prim(Prim::Isize), d)
                    ));
                    Bind::Slice(cname, Some(stride))
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
enum Bind {
    Value(String),
    /// An array or window pointer, with the stride name of a 2D window.
    Slice(String, Option<String>),
}

#[derive(Clone)]
enum Tail {
    Return,
    Assign(String),
    Discard,
}

struct FnEmitter<'p> {
    prog: &'p mut Program,
    out: String,
    indent: usize,
    scopes: Vec<HashMap<&'static str, Bind>>,
    used: HashSet<String>,
    tmp: usize,
}

impl FnEmitter<'_> {
    fn d(&self) -> Dialect {
        self.prog.dialect
    }

    fn line(&mut self, s: &str) {
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
    fn declare_name(&mut self, rust: &str) -> String {
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

    fn temp(&mut self) -> String {
        loop {
            let n = format!("skel_t{}", self.tmp);
            self.tmp += 1;
            if self.used.insert(n.clone()) {
                return n;
            }
        }
    }

    fn lookup(&self, name: &str) -> R<Bind> {
        for s in self.scopes.iter().rev() {
            if let Some(b) = s.get(name) {
                return Ok(b.clone());
            }
        }
        Err(format!("unknown variable `{name}`"))
    }

    /// Runs `f` with a fresh output buffer; returns what it wrote and its result.
    fn capture<T>(&mut self, f: impl FnOnce(&mut Self) -> R<T>) -> R<(String, T)> {
        let saved = std::mem::take(&mut self.out);
        let r = f(self);
        let pre = std::mem::replace(&mut self.out, saved);
        Ok((pre, r?))
    }

    fn block_stmts(&mut self, b: &'static Block, tb: &TBlock, tail: Tail) -> R<()> {
        self.scopes.push(HashMap::new());
        for (s, ts) in b.stmts.iter().zip(&tb.stmts) {
            self.stmt(s, ts)?;
        }
        if let (Some(t), Some(tt)) = (b.tail, &tb.tail) {
            match tail {
                Tail::Return => {
                    let v = self.expr(t, tt)?;
                    self.line(&format!("return {v};"));
                }
                Tail::Assign(n) => {
                    let v = self.expr(t, tt)?;
                    self.line(&format!("{n} = {v};"));
                }
                Tail::Discard => self.stmt_expr(t, tt)?,
            }
        }
        self.scopes.pop();
        Ok(())
    }

    fn braced(&mut self, b: &'static Block, tb: &TBlock, tail: Tail) -> R<()> {
        self.indent += 1;
        let r = self.block_stmts(b, tb, tail);
        self.indent -= 1;
        r
    }

    fn ty_of(te: &TExpr) -> R<Ty> {
        te.ty
            .ok_or_else(|| "an expression without a value is used as a value".to_string())
    }

    fn stmt_expr(&mut self, e: &'static Expr, te: &TExpr) -> R<()> {
        match e {
            Expr::If { cond, then, els } => {
                self.if_stmt(cond, then, els.as_ref(), te, Tail::Discard)
            }
            Expr::Block(b) => {
                self.line("{");
                self.braced(b, &te.blocks[0], Tail::Discard)?;
                self.line("}");
                Ok(())
            }
            _ => {
                let v = self.expr(e, te)?;
                self.line(&format!("(void){v};"));
                Ok(())
            }
        }
    }

    fn if_stmt(
        &mut self,
        cond: &'static Expr,
        then: &'static Block,
        els: Option<&'static Block>,
        te: &TExpr,
        tail: Tail,
    ) -> R<()> {
        let c = self.expr(cond, &te.kids[0])?;
        self.line(&format!("if ({c}) {{"));
        self.braced(then, &te.blocks[0], tail.clone())?;
        if let Some(b) = els {
            self.line("} else {");
            self.braced(b, &te.blocks[1], tail)?;
        }
        self.line("}");
        Ok(())
    }

    fn stmt(&mut self, s: &'static Stmt, ts: &TStmt) -> R<()> {
        let d = self.d();
        match s {
            Stmt::Let { name, init, .. } => {
                let ty = ts.ty.ok_or("cannot infer the type of a local")?;
                let init = match init {
                    Some(e) => Some(self.expr(e, &ts.kids[0])?),
                    None => None,
                };
                let cname = self.declare_name(name);
                match init {
                    Some(v) => self.line(&format!("{} {cname} = {v};", c_type(ty, d))),
                    None => self.line(&format!("{} {cname};", c_type(ty, d))),
                }
                self.scopes
                    .last_mut()
                    .unwrap()
                    .insert(name, Bind::Value(cname));
            }
            Stmt::Assign { place, op, value } => {
                let p = self.expr(place, &ts.kids[0])?;
                let v = self.expr(value, &ts.kids[1])?;
                match op {
                    None => self.line(&format!("{p} = {v};")),
                    Some(op) => {
                        let ty = Self::ty_of(&ts.kids[0])?;
                        let rhs = self.binary(*op, &p, &v, ty, ty)?;
                        self.line(&format!("{p} = {rhs};"));
                    }
                }
            }
            Stmt::Expr(e) => self.stmt_expr(e, &ts.kids[0])?,
            Stmt::For {
                var,
                start,
                end,
                inclusive,
                body,
            } => {
                let ty = ts.ty.ok_or("cannot infer the type of a loop variable")?;
                let ct = c_type(ty, d);
                let a = self.expr(start, &ts.kids[0])?;
                let b = self.expr(end, &ts.kids[1])?;
                self.line("{");
                self.indent += 1;
                let (sa, sb, k) = (self.temp(), self.temp(), self.temp());
                self.line(&format!("{ct} {sa} = {a};"));
                self.line(&format!("{ct} {sb} = {b};"));
                if *inclusive {
                    // `a..=MAX` must not wrap around, and the guard must run on `continue`
                    // too, so it is part of the step: `more` turns false on the last value
                    // and the counter then stays put.
                    let more = self.temp();
                    self.line(&format!("bool {more} = {sa} <= {sb};"));
                    self.line(&format!(
                        "for ({ct} {k} = {sa}; {more}; {more} = ({k} != {sb}), {k} += {more}) {{"
                    ));
                } else {
                    self.line(&format!("for ({ct} {k} = {sa}; {k} < {sb}; ++{k}) {{"));
                }
                // The user's variable is a copy: assigning to it (`for mut i`) must not
                // change the iteration, as in Rust.
                self.indent += 1;
                let iv = self.declare_name(var);
                self.line(&format!("{ct} {iv} = {k}; (void){iv};"));
                self.indent -= 1;
                self.scopes
                    .push(HashMap::from([(*var, Bind::Value(iv.clone()))]));
                self.braced(body, &ts.blocks[0], Tail::Discard)?;
                self.scopes.pop();
                self.line("}");
                self.indent -= 1;
                self.line("}");
            }
            Stmt::While { cond, body } => {
                let (pre, c) = self.capture(|this| {
                    this.indent += 1;
                    let r = this.expr(cond, &ts.kids[0]);
                    this.indent -= 1;
                    r
                })?;
                if pre.is_empty() {
                    self.line(&format!("while ({c}) {{"));
                } else {
                    self.line("while (1) {");
                    self.out.push_str(&pre);
                    self.indent += 1;
                    self.line(&format!("if (!{c}) break;"));
                    self.indent -= 1;
                }
                self.braced(body, &ts.blocks[0], Tail::Discard)?;
                self.line("}");
            }
            Stmt::Return(v) => match v {
                Some(e) => {
                    let v = self.expr(e, &ts.kids[0])?;
                    self.line(&format!("return {v};"));
                }
                None => self.line("return;"),
            },
            Stmt::Break => self.line("break;"),
            Stmt::Continue => self.line("continue;"),
        }
        Ok(())
    }

    fn int_lit(&self, v: i128, p: Prim) -> String {
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

    fn float_lit(&self, text: &str, p: Prim) -> R<String> {
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

    fn prim_of(te: &TExpr) -> R<Prim> {
        match Self::ty_of(te)? {
            Ty::Prim(p) => Ok(p),
            Ty::Struct(s) => Err(format!("operator applied to struct `{}`", s.name)),
        }
    }

    fn binary(&mut self, op: BinOp, l: &str, r: &str, lt: Ty, out: Ty) -> R<String> {
        let d = self.d();
        let Ty::Prim(p) = lt else {
            return Err("operator applied to a struct".into());
        };
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

    fn helper(&mut self, f: MathFn, p: Prim) -> String {
        let name = format!("skel_{}_{}", f.name(), prim_tag(p));
        if !self.prog.helpers.contains_key(&name) {
            let t = c_type(Ty::Prim(p), self.d());
            let body = match f {
                MathFn::Min => "a < b ? a : b".to_string(),
                MathFn::Max => "a > b ? a : b".to_string(),
                _ => format!("a < 0 ? ({t})(-a) : a"),
            };
            let params = if f == MathFn::Abs {
                format!("{t} a")
            } else {
                format!("{t} a, {t} b")
            };
            let code = format!("SKEL_FN {t} {name}({params}) {{ return {body}; }}\n");
            self.prog.helpers.insert(name.clone(), code);
        }
        name
    }

    /// `v as to` for a float `v`: Rust's `as` truncates toward zero and saturates (NaN
    /// gives 0, out of range the nearest bound), where a plain C cast is undefined.
    fn float_to_int(&mut self, v: &str, from: Prim, to: Prim) -> String {
        let d = self.d();
        let it = c_type(Ty::Prim(to), d);
        if d == Dialect::OpenCl {
            // Exactly Rust's semantics, NaN included (OpenCL C 6.2.3.3).
            return format!("convert_{it}_sat_rtz({v})");
        }
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

    fn expr(&mut self, e: &'static Expr, te: &TExpr) -> R<String> {
        let d = self.d();
        Ok(match e {
            Expr::Int { value, .. } => {
                let p = Self::prim_of(te)?;
                if is_float(p) {
                    format!("(({}){value})", c_type(Ty::Prim(p), d))
                } else {
                    self.int_lit(*value as i128, p)
                }
            }
            Expr::Float { text, .. } => self.float_lit(text, Self::prim_of(te)?)?,
            Expr::Bool(b) => b.to_string(),
            Expr::Var(n) => match self.lookup(n)? {
                Bind::Value(c) => c,
                Bind::Slice(..) => return Err(format!("`{n}` used as a value")),
            },
            Expr::Const { ty, name } => const_value(*ty, name, self)?,
            Expr::Unary { op, expr } => {
                let p = Self::prim_of(te)?;
                if let (UnOp::Neg, Expr::Int { value, .. }) = (op, &**expr) {
                    if !is_float(p) {
                        return Ok(self.int_lit(-(*value as i128), p));
                    }
                }
                let v = self.expr(expr, &te.kids[0])?;
                let sym = match (op, p) {
                    (UnOp::Neg, _) => "-",
                    (UnOp::Not, Prim::Bool) => "!",
                    (UnOp::Not, _) => "~",
                };
                match p {
                    Prim::I8 | Prim::I16 | Prim::U8 | Prim::U16 => {
                        format!("(({})({sym}{v}))", c_type(Ty::Prim(p), d))
                    }
                    _ => format!("({sym}{v})"),
                }
            }
            Expr::Binary { op, lhs, rhs } => {
                let lt = Self::ty_of(&te.kids[0])?;
                let out = Self::ty_of(te)?;
                let l = self.expr(lhs, &te.kids[0])?;
                if matches!(op, BinOp::And | BinOp::Or) {
                    let (pre, r) = self.capture(|this| {
                        this.indent += 1;
                        let r = this.expr(rhs, &te.kids[1]);
                        this.indent -= 1;
                        r
                    })?;
                    if pre.is_empty() {
                        return self.binary(*op, &l, &r, lt, out);
                    }
                    let t = self.temp();
                    self.line(&format!("bool {t} = {l};"));
                    let neg = if *op == BinOp::And { "" } else { "!" };
                    self.line(&format!("if ({neg}{t}) {{"));
                    self.out.push_str(&pre);
                    self.indent += 1;
                    self.line(&format!("{t} = {r};"));
                    self.indent -= 1;
                    self.line("}");
                    return Ok(t);
                }
                let r = self.expr(rhs, &te.kids[1])?;
                self.binary(*op, &l, &r, lt, out)?
            }
            Expr::Cast { expr, ty } => {
                let v = self.expr(expr, &te.kids[0])?;
                match (Self::ty_of(&te.kids[0])?, *ty) {
                    (Ty::Prim(from), Ty::Prim(to))
                        if is_float(from) && !is_float(to) && to != Prim::Bool =>
                    {
                        self.float_to_int(&v, from, to)
                    }
                    _ => format!("(({})({v}))", c_type(*ty, d)),
                }
            }
            Expr::Call { callee, args } => {
                let def = callee();
                let name = self.prog.names[&key(def)].clone();
                let params = def.params.iter().filter(|p| p.kind != ParamKind::IndexCol);
                let mut cargs = Vec::new();
                for ((p, a), ta) in params.zip(args.iter()).zip(&te.kids) {
                    match p.kind {
                        ParamKind::Array | ParamKind::Window | ParamKind::Window2 => {
                            let Expr::Var(n) = a else {
                                return Err("array/window argument must be a parameter".into());
                            };
                            match self.lookup(n)? {
                                Bind::Slice(c, None) => cargs.push(c),
                                Bind::Slice(c, Some(s)) => cargs.push(format!("{c}, {s}")),
                                Bind::Value(_) => return Err(format!("`{n}` is not an array")),
                            }
                        }
                        _ => cargs.push(self.expr(a, ta)?),
                    }
                }
                format!("{name}({})", cargs.join(", "))
            }
            Expr::Math { func, args, .. } => {
                let p = Self::prim_of(&te.kids[0])?;
                let mut vs = Vec::new();
                for (a, ta) in args.iter().zip(&te.kids) {
                    vs.push(self.expr(a, ta)?);
                }
                if is_float(p) {
                    if *func == MathFn::Powi {
                        if d == Dialect::OpenCl {
                            format!("pown({}, {})", vs[0], vs[1])
                        } else {
                            let ct = c_type(Ty::Prim(p), d);
                            format!("{}({}, ({ct})({}))", float_math(*func, p, d), vs[0], vs[1])
                        }
                    } else {
                        format!("{}({})", float_math(*func, p, d), vs.join(", "))
                    }
                } else {
                    if !matches!(func, MathFn::Min | MathFn::Max | MathFn::Abs) {
                        return Err(format!("`{}` is not defined for integers", func.name()));
                    }
                    let h = self.helper(*func, p);
                    format!("{h}({})", vs.join(", "))
                }
            }
            Expr::Field { expr, name } => {
                let v = self.expr(expr, &te.kids[0])?;
                format!("{v}.{}", field_name(name))
            }
            Expr::Index { base, index } => {
                let Expr::Var(n) = base else {
                    return Err("only parameters can be indexed".into());
                };
                let i = self.expr(index, &te.kids[0])?;
                match self.lookup(n)? {
                    Bind::Slice(c, None) => format!("{c}[{i}]"),
                    _ => return Err(format!("`{n}` cannot be indexed with one index")),
                }
            }
            Expr::Index2 { base, row, col } => {
                let Expr::Var(n) = base else {
                    return Err("only parameters can be indexed".into());
                };
                let r = self.expr(row, &te.kids[0])?;
                let c = self.expr(col, &te.kids[1])?;
                match self.lookup(n)? {
                    Bind::Slice(w, Some(s)) => format!("{w}[({r}) * {s} + ({c})]"),
                    _ => return Err(format!("`{n}` is not a Window2")),
                }
            }
            Expr::Struct { ty, fields } => {
                let Ty::Struct(s) = ty else {
                    return Err("struct literal of a non-struct".into());
                };
                let mut vals: Vec<Option<String>> = vec![None; s.fields.len()];
                for (f, tf) in fields.iter().zip(&te.kids) {
                    let i = s
                        .fields
                        .iter()
                        .position(|x| x.name == f.name)
                        .ok_or_else(|| format!("no field `{}` in `{}`", f.name, s.name))?;
                    vals[i] = Some(self.expr(&f.value, tf)?);
                }
                let vals: Option<Vec<String>> = vals.into_iter().collect();
                let vals = vals.ok_or_else(|| format!("missing field in `{}` literal", s.name))?;
                format!("skel_make_{}({})", s.name, vals.join(", "))
            }
            Expr::If { cond, then, els } => {
                let ty = Self::ty_of(te)?;
                let Some(els) = els else {
                    return Err("`if` without `else` used as a value".into());
                };
                if then.stmts.is_empty() && els.stmts.is_empty() {
                    if let (Some(a), Some(b)) = (then.tail, els.tail) {
                        let c = self.expr(cond, &te.kids[0])?;
                        let (pa, va) =
                            self.capture(|t| t.expr(a, te.blocks[0].tail.as_ref().unwrap()))?;
                        let (pb, vb) =
                            self.capture(|t| t.expr(b, te.blocks[1].tail.as_ref().unwrap()))?;
                        if pa.is_empty() && pb.is_empty() {
                            return Ok(format!("({c} ? {va} : {vb})"));
                        }
                        let t = self.temp();
                        self.line(&format!("{} {t};", c_type(ty, d)));
                        self.line(&format!("if ({c}) {{"));
                        self.braced(then, &te.blocks[0], Tail::Assign(t.clone()))?;
                        self.line("} else {");
                        self.braced(els, &te.blocks[1], Tail::Assign(t.clone()))?;
                        self.line("}");
                        return Ok(t);
                    }
                }
                let t = self.temp();
                self.line(&format!("{} {t};", c_type(ty, d)));
                self.if_stmt(cond, then, Some(els), te, Tail::Assign(t.clone()))?;
                t
            }
            Expr::Block(b) => {
                let ty = Self::ty_of(te)?;
                let t = self.temp();
                self.line(&format!("{} {t};", c_type(ty, d)));
                self.line("{");
                self.braced(b, &te.blocks[0], Tail::Assign(t.clone()))?;
                self.line("}");
                t
            }
        })
    }
}

/// Width in bits and signedness of an integer type (`usize`/`isize` are 64-bit in C).
fn int_bits(p: Prim) -> (u32, bool) {
    match p {
        Prim::I8 => (8, true),
        Prim::I16 => (16, true),
        Prim::I32 => (32, true),
        Prim::I64 | Prim::Isize => (64, true),
        Prim::U8 => (8, false),
        Prim::U16 => (16, false),
        Prim::U32 => (32, false),
        _ => (64, false),
    }
}

fn fmt_f32(v: f32) -> String {
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

fn fmt_f64(v: f64) -> String {
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

fn const_value(p: Prim, name: &str, e: &FnEmitter<'_>) -> R<String> {
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
