//! Typed tree -> C source in one of the [`Dialect`]s.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::dialect::{c_type, float_math, prelude, Dialect, RESERVED};
use super::ir::{self, BinOp, Block, ConstValue, Expr, FnDef, MathFn, ParamKind, Stmt, UnOp};
use super::typeck::{self, is_float, is_int, ty_eq, ty_name, TBlock, TExpr, TStmt};
use super::{tuple_field, Prim, Ty};
use crate::check::FaultKind;
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
    device_source_checked(defs, dialect, false)
}

/// Like [`device_source_multi`]; with `checked`, the checked variant: every function takes
/// a fault record `SKEL_FAULT_SPACE unsigned* skel_fault` first (every array parameter its
/// length after the pointer, a window its radius, a 2D window its row and column radii
/// after the stride); an index out of range of an array parameter or a local array, a
/// window offset beyond the radius, or an integer division or remainder by zero, stores the
/// first fault there
/// (`[code, index low, index high, len low, len high, function]`, code from
/// [`crate::check::FaultKind::code`], function the position in
/// [`checked_functions`]) and goes on with index 0 / result 0.
///
/// ```
/// use skel::prelude::*;
/// use skel::userfn::UserFn;
/// use skel::codegen::{device_source_checked, Dialect};
/// #[userfn]
/// fn pick(t: &[f32], i: u32) -> f32 { t[i as usize] }
/// let src = device_source_checked(&[pick::definition()], Dialect::OpenCl, true)?;
/// assert!(src.source.contains("skel_fn_pick(SKEL_FAULT_SPACE uint* skel_fault"));
/// assert!(src.source.contains("skel_chk(skel_fault"));
/// # Ok::<(), skel::Error>(())
/// ```
#[doc(hidden)]
pub fn device_source_checked(
    defs: &[&'static FnDef],
    dialect: Dialect,
    checked: bool,
) -> crate::Result<DeviceSource> {
    let kernel = defs.first().map(|d| d.name).unwrap_or("");
    let mut prog = Program {
        checked,
        current: 0,
        dialect,
        names: HashMap::new(),
        used_fn_names: HashSet::new(),
        order: Vec::new(),
        aggregates: Vec::new(),
        helpers: BTreeMap::new(),
    };
    let build = |prog: &mut Program| -> R<DeviceSource> {
        for d in defs {
            prog.collect(d, &mut Vec::new())?;
        }
        let mut fns = String::new();
        for (id, def) in prog.order.clone().into_iter().enumerate() {
            prog.current = id;
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
        for t in &prog.aggregates {
            out.push_str(&aggregate_decl(*t, dialect));
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

/// The functions of the program of `defs`, in the order a fault record numbers them.
#[doc(hidden)]
pub fn checked_functions(defs: &[&'static FnDef]) -> Vec<&'static str> {
    let mut prog = Program {
        checked: true,
        current: 0,
        dialect: Dialect::HostC,
        names: HashMap::new(),
        used_fn_names: HashSet::new(),
        order: Vec::new(),
        aggregates: Vec::new(),
        helpers: BTreeMap::new(),
    };
    for d in defs {
        // A recursive program never compiles, so it never records a fault.
        if prog.collect(d, &mut Vec::new()).is_err() {
            return Vec::new();
        }
    }
    prog.order.iter().map(|d| d.name).collect()
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

/// The C typedef of a struct, array or tuple type, and for structs and tuples a
/// constructor `skel_make_<name>(members in Rust order)`.
fn aggregate_decl(t: Ty, d: Dialect) -> String {
    let name = c_type(t, d);
    let members: Vec<(String, Ty)> = match t {
        Ty::Struct(s) => s
            .fields
            .iter()
            .map(|f| (field_name(f.name), f.ty))
            .collect(),
        Ty::Tuple(tt) => tt
            .elems
            .iter()
            .enumerate()
            .map(|(k, e)| (tuple_field(k), *e))
            .collect(),
        Ty::Array(a) => {
            return format!(
                "typedef struct {name} {{\n    {} v[{}];\n}} {name};\n\n",
                c_type(a.elem, d),
                a.len
            )
        }
        Ty::Prim(_) => return String::new(),
    };
    // Declared in memory order: Rust may place tuple elements in any order.
    let mut order: Vec<usize> = (0..members.len()).collect();
    if let Ty::Tuple(tt) = t {
        order.sort_by_key(|&k| tt.offsets[k]);
    }
    let mut out = format!("typedef struct {name} {{\n");
    for &k in &order {
        out.push_str(&format!(
            "    {} {};\n",
            c_type(members[k].1, d),
            members[k].0
        ));
    }
    out.push_str(&format!("}} {name};\n"));
    let params: Vec<String> = members
        .iter()
        .enumerate()
        .map(|(i, (_, ty))| format!("{} f{i}", c_type(*ty, d)))
        .collect();
    out.push_str(&format!(
        "SKEL_FN {name} skel_make_{name}({}) {{\n    {name} s;\n",
        params.join(", ")
    ));
    for (i, (m, _)) in members.iter().enumerate() {
        out.push_str(&format!("    s.{m} = f{i};\n"));
    }
    out.push_str("    return s;\n}\n\n");
    out
}

struct Program {
    /// The checked variant (see [`device_source_checked`]).
    checked: bool,
    /// The position in `order` of the function being emitted (its id in a fault record).
    current: usize,
    dialect: Dialect,
    names: HashMap<usize, String>,
    used_fn_names: HashSet<String>,
    order: Vec<&'static FnDef>,
    /// Struct, array and tuple types in dependency order.
    aggregates: Vec<Ty>,
    helpers: BTreeMap<String, String>,
}

/// Whether node `e` reads `.len()` of parameter `name` or passes `name` to a callee that
/// needs its length.
fn node_uses_len(e: &'static Expr, name: &str, seen: &mut Vec<usize>) -> bool {
    match e {
        Expr::Len(b) => matches!(b, Expr::Var(n) if *n == name),
        Expr::Call { callee, args } => {
            let def = callee();
            let params = def.params.iter().filter(|p| p.kind != ParamKind::IndexCol);
            params.zip(args.iter()).any(|(p, a)| {
                p.kind == ParamKind::Array
                    && matches!(a, Expr::Var(n) if *n == name)
                    && array_len_param_of(def, p.name, seen)
            })
        }
        _ => false,
    }
}

/// Calls `f` on every expression of `b`, outermost first.
fn visit_block(b: &'static Block, f: &mut dyn FnMut(&'static Expr)) {
    ir::visit_block(b, &mut |node| {
        if let ir::Node::Expr(e) = node {
            f(e)
        }
    });
}

fn array_len_param_of(def: &'static FnDef, name: &str, seen: &mut Vec<usize>) -> bool {
    if seen.contains(&key(def)) {
        // recursion, reported by `collect`
        return false;
    }
    seen.push(key(def));
    let mut found = false;
    visit_block(&def.body, &mut |e| {
        found = found || node_uses_len(e, name, seen)
    });
    seen.pop();
    found
}

/// Whether the C function of `def` takes the length of its `&[T]` parameter: it does
/// when the body (or a user function it passes the array to) reads `.len()` of it. Then
/// the parameter `SKEL_ARRAY_SPACE const T* name` is followed by `unsigned long long
/// name_len` (`ulong` in OpenCL), which the kernel passes.
///
/// ```
/// use skel::prelude::*;
/// use skel::userfn::UserFn;
/// #[userfn]
/// fn last(t: &[f32], x: f32) -> f32 { t[t.len() - 1] * x }
/// #[userfn]
/// fn first(t: &[f32], x: f32) -> f32 { t[0] * x }
/// assert!(skel::codegen::array_len_param(last::definition()));
/// assert!(!skel::codegen::array_len_param(first::definition()));
/// ```
pub fn array_len_param(def: &'static FnDef) -> bool {
    def.params
        .iter()
        .filter(|p| p.kind == ParamKind::Array)
        .any(|p| array_len_param_of(def, p.name, &mut Vec::new()))
}

/// [`array_len_param`] for the one `&[T]` parameter named `name`.
pub fn array_len_param_named(def: &'static FnDef, name: &str) -> bool {
    array_len_param_of(def, name, &mut Vec::new())
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
        visit_block(&def.body, &mut |e| {
            if let Expr::Call { callee, .. } = e {
                callees.push(callee());
            }
        });
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
        if let Ty::Prim(_) = t {
            return Ok(());
        }
        let name = c_type(t, self.dialect);
        if let Some(old) = self
            .aggregates
            .iter()
            .find(|o| c_type(**o, self.dialect) == name)
        {
            if !ty_eq(*old, t) {
                return Err(format!("two different types named `{name}` in one program"));
            }
            return Ok(());
        }
        match t {
            Ty::Struct(s) => s.fields.iter().try_for_each(|f| self.add_ty(f.ty))?,
            Ty::Tuple(tt) => tt.elems.iter().try_for_each(|e| self.add_ty(*e))?,
            Ty::Array(a) => {
                if a.len == 0 {
                    return Err(
                        "an empty array has no device type (arrays need 1 or more elements)".into(),
                    );
                }
                self.add_ty(a.elem)?
            }
            Ty::Prim(_) => {}
        }
        self.aggregates.push(t);
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
                ParamKind::Window if e.prog.checked => {
                    let r = e.fresh_name(&format!("{cname}_r"));
                    params.push(format!(
                        "SKEL_WINDOW_SPACE const {}* {cname}, {} {r}",
                        c_type(p.ty, d),
                        c_type(Ty::Prim(Prim::I64), d)
                    ));
                    Bind::Win(cname, None, vec![r])
                }
                ParamKind::Window => {
                    params.push(format!(
                        "SKEL_WINDOW_SPACE const {}* {cname}",
                        c_type(p.ty, d)
                    ));
                    Bind::Slice(cname, None, None)
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
                ParamKind::Window2 if e.prog.checked => {
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
                ParamKind::Window2 => {
                    let stride = e.fresh_name(&format!("{cname}_stride"));
                    params.push(format!(
                        "SKEL_WINDOW_SPACE const {}* {cname}, {} {stride}",
                        c_type(p.ty, d),
                        c_type(Ty::Prim(Prim::Isize), d)
                    ));
                    Bind::Slice(cname, Some(stride), None)
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
    /// An array or window pointer, with the stride name of a 2D window and the length
    /// name of an array whose length the function takes.
    Slice(String, Option<String>, Option<String>),
    /// A window of the checked variant: its pointer, the row stride of a 2D window and the
    /// radius names (one; a 2D window's row and column radii).
    Win(String, Option<String>, Vec<String>),
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
        self.line(&format!("if ({}) {{", unparen(&c)));
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
                    self.line(&format!("while ({}) {{", unparen(&c)));
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
            Stmt::Loop { body } => {
                self.line("for (;;) {");
                self.braced(body, &ts.blocks[0], Tail::Discard)?;
                self.line("}");
            }
            Stmt::LetTuple { names, init } => {
                let te = &ts.kids[0];
                // `let (a, b) = (x, y)`: every element is evaluated before any name is
                // bound (a name may shadow a variable the other elements read).
                let vals: Vec<(String, Ty)> = match (init, ts.ty) {
                    (Expr::Tuple(es), None) => {
                        let mut vals = Vec::new();
                        for (x, tx) in es.iter().zip(&te.kids) {
                            let ty = Self::ty_of(tx)?;
                            let v = self.expr(x, tx)?;
                            let t = self.temp();
                            self.line(&format!("{} {t} = {v};", c_type(ty, d)));
                            vals.push((t, ty));
                        }
                        vals
                    }
                    (_, Some(ty @ Ty::Tuple(tt))) => {
                        let v = self.expr(init, te)?;
                        let t = self.temp();
                        self.line(&format!("{} {t} = {v};", c_type(ty, d)));
                        (0..tt.elems.len())
                            .map(|k| (format!("{t}.{}", tuple_field(k)), tt.elems[k]))
                            .collect()
                    }
                    _ => return Err("`let (..)` of a value that is not a tuple".into()),
                };
                for ((name, _), (v, ty)) in names.iter().zip(vals) {
                    if *name == "_" {
                        continue;
                    }
                    let cname = self.declare_name(name);
                    self.line(&format!("{} {cname} = {v};", c_type(ty, d)));
                    self.scopes
                        .last_mut()
                        .unwrap()
                        .insert(name, Bind::Value(cname));
                }
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

    /// A C expression of type `ty` with the value of `bytes` (Rust's layout, no padding).
    fn const_c(&mut self, ty: Ty, bytes: &[u8]) -> R<String> {
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
            other => Err(format!(
                "operator applied to a value of type {}",
                ty_name(other)
            )),
        }
    }

    fn binary(&mut self, op: BinOp, l: &str, r: &str, lt: Ty, out: Ty) -> R<String> {
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

    /// The checked variant's fault recording: `skel_fault_rec` keeps the first fault of a
    /// launch (an atomic compare-and-swap of its code), `skel_chk` passes an index in range
    /// and records any other, going on with index 0.
    fn fault_helpers(&mut self) {
        let d = self.d();
        let (u32t, u64t, i64t) = (
            c_type(Ty::Prim(Prim::U32), d),
            c_type(Ty::Prim(Prim::U64), d),
            c_type(Ty::Prim(Prim::I64), d),
        );
        let (space, claim) = match d {
            Dialect::Cuda => ("", "atomicCAS(f, 0u, code) == 0u"),
            Dialect::OpenCl => (
                "__global",
                "atomic_cmpxchg((volatile __global uint*)f, 0u, code) == 0u",
            ),
            Dialect::HostC => ("", "f[0] == 0u && (f[0] = code, 1)"),
        };
        let code = FaultKind::Index.code();
        // `skel_0` sorts before every other helper, which may call these.
        self.helper_fn("skel_0fault".into(), |_| {
            format!(
                "#ifndef SKEL_FAULT_SPACE\n#define SKEL_FAULT_SPACE {space}\n#endif\n\
                 SKEL_FN void skel_fault_rec(SKEL_FAULT_SPACE {u32t}* f, {u32t} code, {i64t} index, {u64t} len, {u32t} id) {{ \
                 if ({claim}) {{ f[1] = ({u32t})index; f[2] = ({u32t})(({u64t})index >> 32); \
                 f[3] = ({u32t})len; f[4] = ({u32t})(len >> 32); f[5] = id; }} }}\n\
                 SKEL_FN {u64t} skel_chk(SKEL_FAULT_SPACE {u32t}* f, {u64t} i, {u64t} len, {u32t} id) {{ \
                 if (i < len) return i; skel_fault_rec(f, {code}u, ({i64t})i, len, id); return 0; }}\n"
            )
        });
    }

    /// `i`, checked against `len` in the checked variant.
    fn check_index(&mut self, i: &str, len: &str) -> String {
        self.fault_helpers();
        let u64t = c_type(Ty::Prim(Prim::U64), self.d());
        let id = self.prog.current;
        format!("skel_chk(skel_fault, ({u64t})({i}), ({u64t})({len}), {id}u)")
    }

    /// The position in a checked window of offset `offs[0]` (a 1D window of radius
    /// `radii[0]`) or of offsets `(offs[0], offs[1])` (a 2D window of radii `radii`, rows
    /// `stride` apart): an offset beyond its radius is a [`FaultKind::Window`] fault, the row
    /// offset checked first as on the CPU, and reads the centre.
    fn check_window(&mut self, offs: &[&str], radii: &[String], stride: Option<&str>) -> String {
        self.fault_helpers();
        let d = self.d();
        let (u32t, u64t, i64t) = (
            c_type(Ty::Prim(Prim::U32), d),
            c_type(Ty::Prim(Prim::U64), d),
            c_type(Ty::Prim(Prim::I64), d),
        );
        let code = FaultKind::Window.code();
        let name = self.helper_fn("skel_chkw".into(), |n| {
            format!(
                "SKEL_FN int {n}(SKEL_FAULT_SPACE {u32t}* f, {i64t} i, {i64t} r, {u32t} id) {{ \
                 if (i >= -r && i <= r) return 1; \
                 skel_fault_rec(f, {code}u, i, ({u64t})(2 * r + 1), id); return 0; }}\n"
            )
        });
        let id = self.prog.current;
        let ok = |k: usize| {
            format!(
                "{name}(skel_fault, ({i64t})({}), {}, {id}u)",
                offs[k], radii[k]
            )
        };
        match stride {
            None => format!("({} ? ({}) : 0)", ok(0), offs[0]),
            // `&&` stops at the row: a bad row offset is the fault, as on the CPU.
            Some(s) => format!(
                "({} && {} ? ({}) * {s} + ({}) : 0)",
                ok(0),
                ok(1),
                offs[0],
                offs[1]
            ),
        }
    }

    /// A C helper function `name`, defined once per program by `code(name)`.
    fn helper_fn(&mut self, name: String, code: impl FnOnce(&str) -> String) -> String {
        if !self.prog.helpers.contains_key(&name) {
            let c = code(&name);
            self.prog.helpers.insert(name.clone(), c);
        }
        name
    }

    /// The C of `func(args..)` for receiver type `p`, with Rust's semantics.
    fn math(&mut self, func: MathFn, p: Prim, vs: &[String]) -> R<String> {
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
                Bind::Slice(..) | Bind::Win(..) => return Err(format!("`{n}` used as a value")),
            },
            Expr::Const { ty, name } => const_value(*ty, name, self)?,
            Expr::Extern { name, value } => {
                let ConstValue { ty, bytes } = value();
                if bytes.len() != ty.size() {
                    return Err(format!(
                        "constant `{name}`: {} bytes for a {}",
                        bytes.len(),
                        ty_name(ty)
                    ));
                }
                self.const_c(ty, &bytes)?
            }
            Expr::Array(es) => {
                let ty = Self::ty_of(te)?;
                let mut vals = Vec::new();
                for (x, tx) in es.iter().zip(&te.kids) {
                    vals.push(self.expr(x, tx)?);
                }
                let t = self.temp();
                self.line(&format!("{} {t};", c_type(ty, d)));
                for (k, v) in vals.iter().enumerate() {
                    self.line(&format!("{t}.v[{k}] = {v};"));
                }
                t
            }
            Expr::Repeat { value, len } => {
                let ty = Self::ty_of(te)?;
                let ety = Self::ty_of(&te.kids[0])?;
                let v = self.expr(value, &te.kids[0])?;
                let (x, t, k) = (self.temp(), self.temp(), self.temp());
                self.line(&format!("{} {x} = {v};", c_type(ety, d)));
                self.line(&format!("{} {t};", c_type(ty, d)));
                self.line(&format!(
                    "for (int {k} = 0; {k} < {len}; ++{k}) {t}.v[{k}] = {x};"
                ));
                t
            }
            Expr::Tuple(es) => {
                let ty = Self::ty_of(te).map_err(|_| {
                    "a tuple can only be returned or destructured with `let (a, b) = ..`"
                        .to_string()
                })?;
                let mut vals = Vec::new();
                for (x, tx) in es.iter().zip(&te.kids) {
                    vals.push(self.expr(x, tx)?);
                }
                format!("skel_make_{}({})", c_type(ty, d), vals.join(", "))
            }
            Expr::Len(base) => match te.kids.first() {
                Some(tb) => match Self::ty_of(tb)? {
                    Ty::Array(a) => self.int_lit(a.len as i128, Prim::Usize),
                    other => return Err(format!("`.len()` of a {}", ty_name(other))),
                },
                None => {
                    let Expr::Var(n) = base else {
                        return Err("`.len()` of an array parameter".into());
                    };
                    match self.lookup(n)? {
                        Bind::Slice(_, _, Some(len)) => len,
                        _ => {
                            return Err(format!(
                                "`{n}.len()`: the length of `{n}` is not available"
                            ))
                        }
                    }
                }
            },
            Expr::Unary { op, expr } => {
                let p = Self::prim_of(te)?;
                if let (UnOp::Neg, Expr::Int { value, .. }) = (op, &**expr) {
                    if !is_float(p) {
                        return Ok(self.int_lit(-(*value as i128), p));
                    }
                }
                let v = self.expr(expr, &te.kids[0])?;
                if *op == UnOp::Neg && is_int(p) {
                    let bits = int_bits(p).0;
                    let ut = c_type(Ty::Prim(if bits <= 32 { Prim::U32 } else { Prim::U64 }), d);
                    let t = c_type(Ty::Prim(p), d);
                    return Ok(format!("(({t})(({ut})0 - ({ut})({v})))"));
                }
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
                        ParamKind::Array
                        | ParamKind::Window
                        | ParamKind::Window2
                        | ParamKind::Mat => {
                            let Expr::Var(n) = a else {
                                return Err("array/window argument must be a parameter".into());
                            };
                            let wants_len = p.kind == ParamKind::Array
                                && (self.prog.checked
                                    || array_len_param_of(def, p.name, &mut Vec::new()));
                            match self.lookup(n)? {
                                Bind::Slice(c, Some(cols), Some(rows))
                                    if p.kind == ParamKind::Mat =>
                                {
                                    cargs.push(format!("{c}, {rows}, {cols}"))
                                }
                                Bind::Slice(c, Some(s), _) => cargs.push(format!("{c}, {s}")),
                                Bind::Slice(c, None, Some(len)) if wants_len => {
                                    cargs.push(format!("{c}, {len}"))
                                }
                                Bind::Slice(c, None, _) if !wants_len => cargs.push(c),
                                Bind::Win(c, stride, radii) => cargs.push(
                                    std::iter::once(c)
                                        .chain(stride)
                                        .chain(radii)
                                        .collect::<Vec<_>>()
                                        .join(", "),
                                ),
                                _ => return Err(format!("`{n}` cannot be passed as `{}`", p.name)),
                            }
                        }
                        _ => cargs.push(self.expr(a, ta)?),
                    }
                }
                if self.prog.checked {
                    cargs.insert(0, "skel_fault".into());
                }
                format!("{name}({})", cargs.join(", "))
            }
            Expr::Math { func, args, .. } => {
                let p = Self::prim_of(&te.kids[0])?;
                let mut vs = Vec::new();
                for (a, ta) in args.iter().zip(&te.kids) {
                    vs.push(self.expr(a, ta)?);
                }
                self.math(*func, p, &vs)?
            }
            // `m.rows()` / `m.cols()` of a `Mat<T>` parameter (typed without children).
            Expr::Field { expr, name } if te.kids.is_empty() => {
                let Expr::Var(n) = expr else {
                    return Err(format!("`.{name}()` of a non-parameter"));
                };
                match (self.lookup(n)?, *name) {
                    (Bind::Slice(_, _, Some(rows)), "rows") => rows,
                    (Bind::Slice(_, Some(cols), _), "cols") => cols,
                    _ => return Err(format!("`{n}` is not a Mat")),
                }
            }
            Expr::Field { expr, name } => {
                let v = self.expr(expr, &te.kids[0])?;
                match Self::ty_of(&te.kids[0])? {
                    Ty::Tuple(_) => format!("{v}.f{name}"),
                    _ => format!("{v}.{}", field_name(name)),
                }
            }
            Expr::Index { base, index } if te.kids.len() == 2 => {
                let b = self.expr(base, &te.kids[0])?;
                let i = self.expr(index, &te.kids[1])?;
                match Self::ty_of(&te.kids[0])? {
                    Ty::Array(a) if self.prog.checked => {
                        let len = self.int_lit(a.len as i128, Prim::Usize);
                        format!("{b}.v[{}]", self.check_index(&i, &len))
                    }
                    _ => format!("{b}.v[{i}]"),
                }
            }
            Expr::Index { base, index } => {
                let Expr::Var(n) = base else {
                    return Err("only parameters can be indexed".into());
                };
                let i = self.expr(index, &te.kids[0])?;
                match self.lookup(n)? {
                    Bind::Slice(c, None, Some(len)) if self.prog.checked => {
                        format!("{c}[{}]", self.check_index(&i, &len))
                    }
                    Bind::Slice(c, None, _) => format!("{c}[{i}]"),
                    Bind::Win(c, None, radii) => {
                        format!("{c}[{}]", self.check_window(&[&i], &radii, None))
                    }
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
                    // a `Mat<T>`: its rows, then its columns (the stride)
                    Bind::Slice(w, Some(s), Some(rows)) if self.prog.checked => {
                        let (r, c) = (self.check_index(&r, &rows), self.check_index(&c, &s));
                        format!("{w}[({r}) * {s} + ({c})]")
                    }
                    Bind::Slice(w, Some(s), _) => format!("{w}[({r}) * {s} + ({c})]"),
                    Bind::Win(w, Some(s), radii) => {
                        format!("{w}[{}]", self.check_window(&[&r, &c], &radii, Some(&s)))
                    }
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
                        self.line(&format!("if ({}) {{", unparen(&c)));
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

/// `c` without the parentheses around the whole of it, if any: `if ((a == b))` makes C
/// compilers warn (`-Wparentheses-equality`).
fn unparen(c: &str) -> &str {
    let Some(inner) = c.strip_prefix('(').and_then(|c| c.strip_suffix(')')) else {
        return c;
    };
    let mut depth = 0i32;
    for ch in inner.chars() {
        depth += match ch {
            '(' => 1,
            ')' => -1,
            _ => 0,
        };
        if depth < 0 {
            // `(a) + (b)`: the first and last parentheses are not a pair
            return c;
        }
    }
    inner
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
