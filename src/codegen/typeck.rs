//! Type inference for a [`FnDef`] body, mirroring Rust's for the supported subset.
//!
//! Every expression gets a type variable; variables are unified by the operators, lets,
//! assignments, calls, returns and struct fields that connect them (union-find). An
//! unsuffixed literal starts as "some integer" / "some float" and takes whatever type it is
//! unified with; one still unconstrained at the end defaults like Rust: integers to `i32`,
//! floats to `f64`. A literal cast with `as` takes the cast's target type when it is of the
//! same class (`0.5 as f32` is an `f32` literal), as in rustc.

use std::collections::HashMap;
use std::sync::Mutex;

use super::ir::{BinOp, Block, Expr, FnDef, MathFn, ParamKind, Stmt, UnOp};
use super::{ArrayTy, Prim, Ty};

/// A typed mirror of one [`Expr`]: its type and the mirrors of its sub-expressions and
/// blocks, in a fixed order per node kind (the emitter walks both trees in lock step;
/// addresses of nodes are not used as keys because identical constants may be merged).
///
/// Children: `Unary`/`Cast`/`Field`/`Len`: `[expr]` (`Len` of a `&[T]`: none); `Binary`:
/// `[lhs, rhs]`; `Call`/`Math`: the arguments; `Index`: `[index]` on a parameter, `[base,
/// index]` on an array value; `Index2`: `[row, col]`; `Struct`: field values in source
/// order; `Array`/`Tuple`: the elements; `Repeat`: `[value]`; `If`: `[cond]` and blocks
/// `[then, else?]`; `Block`: block `[b]`.
#[derive(Debug, Default)]
pub(crate) struct TExpr {
    /// The inferred type (`None` for unit-valued expressions).
    pub ty: Option<Ty>,
    var: usize,
    pub kids: Vec<TExpr>,
    pub blocks: Vec<TBlock>,
}

/// Typed mirror of a [`Block`].
#[derive(Debug, Default)]
pub(crate) struct TBlock {
    pub stmts: Vec<TStmt>,
    pub tail: Option<TExpr>,
}

impl TBlock {
    /// The bytes of the local arrays this block and the blocks inside it declare (each
    /// `let` of an array type, arrays in disjoint scopes counted apart): what a device
    /// thread keeps in private memory beyond its scalars.
    pub(crate) fn local_array_bytes(&self) -> usize {
        fn expr(e: &TExpr) -> usize {
            e.kids.iter().map(expr).sum::<usize>()
                + e.blocks
                    .iter()
                    .map(TBlock::local_array_bytes)
                    .sum::<usize>()
        }
        let stmts: usize = self
            .stmts
            .iter()
            .map(|s| {
                let own = match s.ty {
                    Some(t @ Ty::Array(_)) => t.size(),
                    _ => 0,
                };
                own + s.kids.iter().map(expr).sum::<usize>()
                    + s.blocks
                        .iter()
                        .map(TBlock::local_array_bytes)
                        .sum::<usize>()
            })
            .sum();
        stmts + self.tail.as_ref().map_or(0, expr)
    }
}

/// Typed mirror of a [`Stmt`]. `ty` is the type of the local a `Let`/`For` introduces.
/// Children: `Let`: `[init?]`; `LetTuple`: `[init]` (`ty` is the tuple's type, `None` when
/// `init` is a tuple expression, bound element by element); `Assign`: `[place, value]`;
/// `Expr`: `[e]`; `For`: `[start, end]` + block body; `While`: `[cond]` + block body;
/// `Loop`: block body; `Return`: `[value?]`.
#[derive(Debug, Default)]
pub(crate) struct TStmt {
    pub ty: Option<Ty>,
    var: Option<usize>,
    pub kids: Vec<TExpr>,
    pub blocks: Vec<TBlock>,
}

/// Structural type equality (struct constants may be duplicated in memory).
pub(crate) fn ty_eq(a: Ty, b: Ty) -> bool {
    match (a, b) {
        (Ty::Array(x), Ty::Array(y)) => x.len == y.len && ty_eq(x.elem, y.elem),
        (Ty::Tuple(x), Ty::Tuple(y)) => {
            x.offsets == y.offsets
                && x.elems.len() == y.elems.len()
                && x.elems.iter().zip(y.elems).all(|(p, q)| ty_eq(*p, *q))
        }
        (Ty::Prim(x), Ty::Prim(y)) => x == y,
        (Ty::Struct(x), Ty::Struct(y)) => {
            std::ptr::eq(x, y)
                || (x.name == y.name
                    && x.fields.len() == y.fields.len()
                    && x.fields
                        .iter()
                        .zip(y.fields)
                        .all(|(f, g)| f.name == g.name && ty_eq(f.ty, g.ty)))
        }
        _ => false,
    }
}

/// Rust spelling of a type, for messages.
pub(crate) fn ty_name(t: Ty) -> String {
    match t {
        Ty::Struct(s) => s.name.to_string(),
        Ty::Array(a) => format!("[{}; {}]", ty_name(a.elem), a.len),
        Ty::Tuple(t) => {
            let parts: Vec<String> = t.elems.iter().map(|e| ty_name(*e)).collect();
            format!("({})", parts.join(", "))
        }
        Ty::Prim(p) => format!("{p:?}").to_lowercase(),
    }
}

pub(crate) fn is_float(p: Prim) -> bool {
    matches!(p, Prim::F32 | Prim::F64)
}

pub(crate) fn is_int(p: Prim) -> bool {
    !is_float(p) && p != Prim::Bool
}

/// The array type `[elem; len]` as a `'static` [`Ty`]: array types that inference builds
/// (literals, `[x; N]`) are interned, so each distinct one is allocated once per process.
pub(crate) fn intern_array(elem: Ty, len: usize) -> Ty {
    static TABLE: Mutex<Vec<&'static ArrayTy>> = Mutex::new(Vec::new());
    let mut table = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(a) = table.iter().find(|a| a.len == len && ty_eq(a.elem, elem)) {
        return Ty::Array(a);
    }
    let a: &'static ArrayTy = Box::leak(Box::new(ArrayTy { elem, len }));
    table.push(a);
    Ty::Array(a)
}

#[derive(Clone, Copy, Debug)]
enum Tv {
    Known(Ty),
    Int,
    Float,
    Any,
    Unit,
    /// `[elem; len]` with an element type still being inferred.
    Array(usize, usize),
    /// A tuple whose element types are the variables `start..start + count`.
    Tuple(usize, usize),
}

#[derive(Clone, Copy)]
enum Binding {
    Value(usize),
    /// `&[T]`, `Window<T>` or `Window2<T>` parameter: element type and kind.
    Slice(ParamKind, Ty),
}

struct Infer {
    vars: Vec<Tv>,
    parent: Vec<usize>,
    scopes: Vec<HashMap<&'static str, Binding>>,
    kids: Vec<Vec<TExpr>>,
    blocks: Vec<Vec<TBlock>>,
    stmts: Vec<Vec<TStmt>>,
    ret: usize,
}

type R<T> = std::result::Result<T, String>;

impl Infer {
    fn fresh(&mut self, t: Tv) -> usize {
        self.vars.push(t);
        self.parent.push(self.parent.len());
        self.vars.len() - 1
    }
    fn known(&mut self, t: Ty) -> usize {
        self.fresh(Tv::Known(t))
    }
    fn find(&mut self, mut v: usize) -> usize {
        while self.parent[v] != v {
            self.parent[v] = self.parent[self.parent[v]];
            v = self.parent[v];
        }
        v
    }
    fn get(&mut self, v: usize) -> Tv {
        let r = self.find(v);
        self.vars[r]
    }
    fn describe(&mut self, v: usize) -> String {
        match self.get(v) {
            Tv::Known(t) => ty_name(t),
            Tv::Int => "{integer}".into(),
            Tv::Float => "{float}".into(),
            Tv::Any => "_".into(),
            Tv::Unit => "()".into(),
            Tv::Array(e, n) => format!("[{}; {n}]", self.describe(e)),
            Tv::Tuple(s, n) => {
                let parts: Vec<String> = (s..s + n).map(|v| self.describe(v)).collect();
                format!("({})", parts.join(", "))
            }
        }
    }
    fn unify(&mut self, a: usize, b: usize) -> R<()> {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra == rb {
            return Ok(());
        }
        let merged = match (self.vars[ra], self.vars[rb]) {
            (Tv::Any, t) | (t, Tv::Any) => t,
            (Tv::Unit, Tv::Unit) => Tv::Unit,
            (Tv::Int, Tv::Int) => Tv::Int,
            (Tv::Float, Tv::Float) => Tv::Float,
            (Tv::Int, Tv::Known(Ty::Prim(p))) | (Tv::Known(Ty::Prim(p)), Tv::Int) if is_int(p) => {
                Tv::Known(Ty::Prim(p))
            }
            (Tv::Float, Tv::Known(Ty::Prim(p))) | (Tv::Known(Ty::Prim(p)), Tv::Float)
                if is_float(p) =>
            {
                Tv::Known(Ty::Prim(p))
            }
            (Tv::Known(x), Tv::Known(y)) if ty_eq(x, y) => Tv::Known(x),
            (Tv::Array(e, n), Tv::Array(f, m)) if n == m => {
                self.unify(e, f)?;
                Tv::Array(e, n)
            }
            (Tv::Array(e, n), Tv::Known(t @ Ty::Array(a)))
            | (Tv::Known(t @ Ty::Array(a)), Tv::Array(e, n))
                if a.len == n =>
            {
                self.unify_ty(e, a.elem)?;
                Tv::Known(t)
            }
            (Tv::Tuple(s, n), Tv::Tuple(t, m)) if n == m => {
                for k in 0..n {
                    self.unify(s + k, t + k)?;
                }
                Tv::Tuple(s, n)
            }
            (Tv::Tuple(s, n), Tv::Known(t @ Ty::Tuple(tt)))
            | (Tv::Known(t @ Ty::Tuple(tt)), Tv::Tuple(s, n))
                if tt.elems.len() == n =>
            {
                for (k, e) in tt.elems.iter().enumerate() {
                    self.unify_ty(s + k, *e)?;
                }
                Tv::Known(t)
            }
            _ => {
                return Err(format!(
                    "mismatched types: {} and {}",
                    self.describe(a),
                    self.describe(b)
                ))
            }
        };
        let (ra, rb) = (self.find(ra), self.find(rb));
        self.parent[ra] = rb;
        self.vars[rb] = merged;
        Ok(())
    }
    fn unify_ty(&mut self, a: usize, t: Ty) -> R<()> {
        let k = self.known(t);
        self.unify(a, k)
    }
    fn lookup(&self, name: &str) -> R<Binding> {
        for s in self.scopes.iter().rev() {
            if let Some(b) = s.get(name) {
                return Ok(*b);
            }
        }
        Err(format!("unknown variable `{name}`"))
    }
    fn bind(&mut self, name: &'static str, b: Binding) {
        self.scopes.last_mut().unwrap().insert(name, b);
    }

    fn block(&mut self, b: &'static Block) -> R<usize> {
        self.scopes.push(HashMap::new());
        self.stmts.push(Vec::new());
        let mut diverges = false;
        for s in b.stmts {
            self.stmt(s)?;
            diverges = match s {
                Stmt::Return(_) | Stmt::Break | Stmt::Continue => true,
                Stmt::Loop { body } => !breaks_block(body),
                _ => false,
            };
        }
        self.kids.push(Vec::new());
        let t = match b.tail {
            Some(e) => self.expr(e)?,
            None if diverges => self.fresh(Tv::Any),
            None => self.fresh(Tv::Unit),
        };
        let tail = self.kids.pop().unwrap().pop();
        let stmts = self.stmts.pop().unwrap();
        self.blocks.last_mut().unwrap().push(TBlock { stmts, tail });
        self.scopes.pop();
        Ok(t)
    }

    fn stmt(&mut self, s: &'static Stmt) -> R<()> {
        self.kids.push(Vec::new());
        self.blocks.push(Vec::new());
        let var = self.stmt_inner(s)?;
        let kids = self.kids.pop().unwrap();
        let blocks = self.blocks.pop().unwrap();
        self.stmts.last_mut().unwrap().push(TStmt {
            ty: None,
            var,
            kids,
            blocks,
        });
        Ok(())
    }

    fn placeholder(&mut self) {
        let var = self.fresh(Tv::Unit);
        self.kids.last_mut().unwrap().push(TExpr {
            var,
            ..TExpr::default()
        });
    }

    fn stmt_inner(&mut self, s: &'static Stmt) -> R<Option<usize>> {
        let mut bound = None;
        match s {
            Stmt::Let { name, ty, init, .. } => {
                if let Some(Expr::Tuple(_)) = init {
                    return Err(format!(
                        "`let {name} = (..)`: a tuple can only be returned or destructured (`let (a, b) = ..`)"
                    ));
                }
                let v = match ty {
                    Some(t) => self.known(*t),
                    None => self.fresh(Tv::Any),
                };
                if let Some(e) = init {
                    let ti = self.expr(e)?;
                    self.unify(v, ti)
                        .map_err(|m| format!("in `let {name}`: {m}"))?;
                }
                bound = Some(v);
                self.bind(name, Binding::Value(v));
            }
            Stmt::Assign { place, op, value } => {
                let tp = self.expr(place)?;
                let tv = self.expr(value)?;
                if !matches!(op, Some(BinOp::Shl | BinOp::Shr)) {
                    self.unify(tp, tv)
                        .map_err(|m| format!("in assignment: {m}"))?;
                }
            }
            Stmt::Expr(e) => {
                self.expr(e)?;
            }
            Stmt::For {
                var,
                start,
                end,
                body,
                ..
            } => {
                let a = self.expr(start)?;
                let b = self.expr(end)?;
                self.unify(a, b)
                    .map_err(|m| format!("in `for` range: {m}"))?;
                let iv = self.fresh(Tv::Int);
                self.unify(a, iv)
                    .map_err(|m| format!("`for` over a non-integer range: {m}"))?;
                bound = Some(a);
                self.scopes.push(HashMap::new());
                self.bind(var, Binding::Value(a));
                self.block(body)?;
                self.scopes.pop();
            }
            Stmt::While { cond, body } => {
                let c = self.expr(cond)?;
                self.unify_ty(c, Ty::Prim(Prim::Bool))?;
                self.block(body)?;
            }
            Stmt::Loop { body } => {
                self.block(body)?;
            }
            Stmt::LetTuple { names, init } => {
                let t = self.expr(init)?;
                let elems: Vec<usize> = match (self.get(t), init) {
                    (Tv::Tuple(start, n), Expr::Tuple(_)) => (start..start + n).collect(),
                    (Tv::Known(Ty::Tuple(tt)), _) => {
                        bound = Some(t);
                        tt.elems.iter().map(|e| self.known(*e)).collect()
                    }
                    _ => {
                        return Err(format!(
                            "`let ({}) = ..` destructures a tuple, found {}",
                            names.iter().map(|n| n.0).collect::<Vec<_>>().join(", "),
                            self.describe(t)
                        ))
                    }
                };
                if elems.len() != names.len() {
                    return Err(format!(
                        "a tuple of {} values destructured into {} names",
                        elems.len(),
                        names.len()
                    ));
                }
                for ((name, _), v) in names.iter().zip(elems) {
                    if *name != "_" {
                        self.bind(name, Binding::Value(v));
                    }
                }
            }
            Stmt::Return(v) => {
                let t = match v {
                    Some(e) => self.expr(e)?,
                    None => self.fresh(Tv::Unit),
                };
                let r = self.ret;
                self.unify(t, r).map_err(|m| format!("in `return`: {m}"))?;
            }
            Stmt::Break | Stmt::Continue => {}
        }
        Ok(bound)
    }

    fn slice_of(&self, e: &Expr) -> Option<(ParamKind, Ty)> {
        match e {
            Expr::Var(n) => match self.lookup(n) {
                Ok(Binding::Slice(k, t)) => Some((k, t)),
                _ => None,
            },
            _ => None,
        }
    }

    fn expr(&mut self, e: &'static Expr) -> R<usize> {
        self.kids.push(Vec::new());
        self.blocks.push(Vec::new());
        let var = self.expr_inner(e)?;
        let kids = self.kids.pop().unwrap();
        let blocks = self.blocks.pop().unwrap();
        self.kids.last_mut().unwrap().push(TExpr {
            ty: None,
            var,
            kids,
            blocks,
        });
        Ok(var)
    }

    fn expr_inner(&mut self, e: &'static Expr) -> R<usize> {
        Ok(match e {
            Expr::Int { suffix, .. } => match suffix {
                Some(p) => self.known(Ty::Prim(*p)),
                None => self.fresh(Tv::Int),
            },
            Expr::Float { suffix, .. } => match suffix {
                Some(p) => self.known(Ty::Prim(*p)),
                None => self.fresh(Tv::Float),
            },
            Expr::Bool(_) => self.known(Ty::Prim(Prim::Bool)),
            Expr::Var(n) => match self.lookup(n)? {
                Binding::Value(v) => v,
                Binding::Slice(..) => {
                    return Err(format!(
                    "`{n}` (an array or window) can only be indexed or passed to a user function"
                ))
                }
            },
            // `u8::BITS` is a `u32`, like every `BITS`
            Expr::Const { name: "BITS", .. } => self.known(Ty::Prim(Prim::U32)),
            Expr::Const { ty, .. } => self.known(Ty::Prim(*ty)),
            Expr::Extern { value, .. } => self.known(value().ty),
            Expr::Array(elems) => {
                if elems.is_empty() {
                    return Err(
                        "an empty array has no device type (arrays need 1 or more elements)".into(),
                    );
                }
                let e = self.fresh(Tv::Any);
                for (i, x) in elems.iter().enumerate() {
                    let t = self.expr(x)?;
                    self.unify(e, t)
                        .map_err(|m| format!("array element {i}: {m}"))?;
                }
                self.fresh(Tv::Array(e, elems.len()))
            }
            Expr::Repeat { value, len } => {
                if *len == 0 {
                    return Err(
                        "an empty array has no device type (arrays need 1 or more elements)".into(),
                    );
                }
                let e = self.expr(value)?;
                self.fresh(Tv::Array(e, *len))
            }
            Expr::Tuple(elems) => {
                let ts: Vec<usize> = elems.iter().map(|x| self.expr(x)).collect::<R<_>>()?;
                // consecutive variables, unified with the elements
                let start = self.vars.len();
                for &t in &ts {
                    let v = self.fresh(Tv::Any);
                    self.unify(v, t)?;
                }
                self.fresh(Tv::Tuple(start, ts.len()))
            }
            Expr::Len(base) => {
                if !matches!(self.slice_of(base), Some((ParamKind::Array, _))) {
                    let t = self.expr(base)?;
                    if !matches!(self.get(t), Tv::Array(..) | Tv::Known(Ty::Array(_))) {
                        return Err(format!(
                            "`.len()` of a value of type {} (only arrays and `&[T]` parameters have one)",
                            self.describe(t)
                        ));
                    }
                }
                self.known(Ty::Prim(Prim::Usize))
            }
            Expr::Unary { op, expr } => {
                let t = self.expr(expr)?;
                if *op == UnOp::Not {
                    if let Tv::Float = self.get(t) {
                        return Err("`!` applied to a float".into());
                    }
                }
                t
            }
            Expr::Binary { op, lhs, rhs } => {
                let l = self.expr(lhs)?;
                let r = self.expr(rhs)?;
                let ctx = |m: String| format!("in `{op:?}`: {m}");
                match op {
                    BinOp::Shl | BinOp::Shr => l,
                    BinOp::And | BinOp::Or => {
                        self.unify_ty(l, Ty::Prim(Prim::Bool)).map_err(ctx)?;
                        self.unify_ty(r, Ty::Prim(Prim::Bool)).map_err(ctx)?;
                        l
                    }
                    BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                        self.unify(l, r).map_err(ctx)?;
                        self.known(Ty::Prim(Prim::Bool))
                    }
                    _ => {
                        self.unify(l, r).map_err(ctx)?;
                        l
                    }
                }
            }
            Expr::Cast { expr, ty } => {
                let inner = self.expr(expr)?;
                if let Ty::Prim(p) = ty {
                    match (&**expr, self.get(inner)) {
                        (Expr::Int { suffix: None, .. }, Tv::Int) if is_int(*p) => {
                            self.unify_ty(inner, *ty)?
                        }
                        (Expr::Float { suffix: None, .. }, Tv::Float) if is_float(*p) => {
                            self.unify_ty(inner, *ty)?
                        }
                        _ => {}
                    }
                }
                self.known(*ty)
            }
            Expr::Call { callee, args } => {
                let def: &'static FnDef = callee();
                let rust_params: Vec<_> = def
                    .params
                    .iter()
                    .filter(|p| p.kind != ParamKind::IndexCol)
                    .collect();
                if rust_params.len() != args.len() {
                    return Err(format!(
                        "`{}` takes {} arguments, {} given",
                        def.name,
                        rust_params.len(),
                        args.len()
                    ));
                }
                for (p, a) in rust_params.iter().zip(args.iter()) {
                    match p.kind {
                        ParamKind::IndexRow => {
                            return Err(format!(
                                "calling `{}`, which takes a 2D #[index], from device code is not supported",
                                def.name
                            ))
                        }
                        ParamKind::Array
                        | ParamKind::Window
                        | ParamKind::Window2
                        | ParamKind::Window3
                        | ParamKind::Mat => {
                            match self.slice_of(a) {
                                Some((k, t)) if k == p.kind && ty_eq(t, p.ty) => self.placeholder(),
                                _ => {
                                    return Err(format!(
                                        "argument `{}` of `{}` must be an array/window parameter of the same kind and element type",
                                        p.name, def.name
                                    ))
                                }
                            }
                        }
                        _ => {
                            let t = self.expr(a)?;
                            self.unify_ty(t, p.ty).map_err(|m| {
                                format!("argument `{}` of `{}`: {m}", p.name, def.name)
                            })?;
                        }
                    }
                }
                self.known(def.ret)
            }
            Expr::Math { func, ty, args } => {
                if args.len() != func.arity() {
                    return Err(format!(
                        "`{}` takes {} arguments",
                        func.name(),
                        func.arity()
                    ));
                }
                let t0 = self.expr(&args[0])?;
                if let Some(p) = ty {
                    self.unify_ty(t0, Ty::Prim(*p))?;
                }
                for (i, a) in args.iter().enumerate().skip(1) {
                    let ta = self.expr(a)?;
                    let fixed = match func {
                        MathFn::Powi => Some(Prim::I32),
                        MathFn::Pow | MathFn::RotateLeft | MathFn::RotateRight => Some(Prim::U32),
                        _ => None,
                    };
                    match fixed {
                        Some(p) => self.unify_ty(ta, Ty::Prim(p)),
                        None => self.unify(t0, ta),
                    }
                    .map_err(|m| format!("argument {i} of `{}`: {m}", func.name()))?;
                }
                let (float_ok, int_ok) = func.classes();
                match self.get(t0) {
                    Tv::Known(Ty::Prim(p))
                        if (float_ok && is_float(p)) || (int_ok && is_int(p)) => {}
                    Tv::Float if float_ok => {}
                    Tv::Int if int_ok => {}
                    Tv::Any => {}
                    _ => {
                        return Err(format!(
                            "`{}` is not defined for {}",
                            func.name(),
                            self.describe(t0)
                        ))
                    }
                }
                match func {
                    MathFn::IsNan | MathFn::IsFinite => self.known(Ty::Prim(Prim::Bool)),
                    MathFn::CountOnes | MathFn::LeadingZeros | MathFn::TrailingZeros => {
                        self.known(Ty::Prim(Prim::U32))
                    }
                    _ => t0,
                }
            }
            // `w.radius()` of a window parameter (the macro splits a `Window2`'s pair).
            Expr::Field { expr, name }
                if matches!(
                    self.slice_of(expr),
                    Some((ParamKind::Window | ParamKind::Window2, _))
                ) =>
            {
                if !matches!(*name, "radius" | "radius_rows" | "radius_cols") {
                    return Err(format!("a window has `.radius()`, not `{name}`"));
                }
                self.known(Ty::Prim(Prim::Usize))
            }
            Expr::Field { expr, name }
                if matches!(self.slice_of(expr), Some((ParamKind::Mat, _))) =>
            {
                if !matches!(*name, "rows" | "cols") {
                    return Err(format!(
                        "a `Mat<T>` has `.rows()` and `.cols()`, not `{name}`"
                    ));
                }
                self.known(Ty::Prim(Prim::Usize))
            }
            Expr::Field { expr, name } => {
                let t = self.expr(expr)?;
                match self.get(t) {
                    Tv::Known(Ty::Struct(s)) => match s.fields.iter().find(|f| f.name == *name) {
                        Some(f) => self.known(f.ty),
                        None => return Err(format!("struct `{}` has no field `{name}`", s.name)),
                    },
                    Tv::Known(Ty::Tuple(tt)) => match name.parse::<usize>() {
                        Ok(k) if k < tt.elems.len() => self.known(tt.elems[k]),
                        _ => {
                            return Err(format!(
                                "a tuple of {} has no element `.{name}`",
                                tt.elems.len()
                            ))
                        }
                    },
                    Tv::Tuple(start, n) => match name.parse::<usize>() {
                        Ok(k) if k < n => start + k,
                        _ => return Err(format!("a tuple of {n} has no element `.{name}`")),
                    },
                    _ => {
                        return Err(format!(
                            "field `{name}` of a value whose type is not a known struct ({})",
                            self.describe(t)
                        ))
                    }
                }
            }
            Expr::Index { base, index } => {
                let Some((kind, elem)) = self.slice_of(base) else {
                    // an array value: a local, a field, an element of an array of arrays, ..
                    let tb = self.expr(base)?;
                    let ti = self.expr(index)?;
                    self.unify_ty(ti, Ty::Prim(Prim::Usize))
                        .map_err(|m| format!("array index: {m}"))?;
                    return match self.get(tb) {
                        Tv::Array(e, _) => Ok(e),
                        Tv::Known(Ty::Array(a)) => Ok(self.known(a.elem)),
                        _ => Err(format!(
                            "indexing a value of type {} (only arrays, `&[T]` parameters and windows can be indexed)",
                            self.describe(tb)
                        )),
                    };
                };
                let ti = self.expr(index)?;
                match kind {
                    ParamKind::Array => self.unify_ty(ti, Ty::Prim(Prim::Usize))?,
                    ParamKind::Window => self.unify_ty(ti, Ty::Prim(Prim::Isize))?,
                    ParamKind::Mat => return Err("a Mat is indexed with `m[(row, col)]`".into()),
                    _ => return Err("a Window2 is indexed with `w[(di, dj)]`".into()),
                }
                self.known(elem)
            }
            Expr::Index2 { base, row, col } => {
                let (pos, elem) =
                    match self.slice_of(base) {
                        Some((ParamKind::Window2, elem)) => (Prim::Isize, elem),
                        Some((ParamKind::Mat, elem)) => (Prim::Usize, elem),
                        _ => return Err(
                            "only `Window2<T>` and `Mat<T>` parameters are indexed with `[(i, j)]`"
                                .into(),
                        ),
                    };
                let r = self.expr(row)?;
                let c = self.expr(col)?;
                self.unify_ty(r, Ty::Prim(pos))?;
                self.unify_ty(c, Ty::Prim(pos))?;
                self.known(elem)
            }
            Expr::Index3 { base, offsets } => {
                let Some((ParamKind::Window3, elem)) = self.slice_of(base) else {
                    return Err(
                        "only `Window3<T>` parameters are indexed with `[(i, j, k)]`".into(),
                    );
                };
                for o in offsets {
                    let t = self.expr(o)?;
                    self.unify_ty(t, Ty::Prim(Prim::Isize))?;
                }
                self.known(elem)
            }
            Expr::Struct { ty, fields } => {
                let Ty::Struct(s) = ty else {
                    return Err("struct literal of a non-struct type".into());
                };
                for fi in fields.iter() {
                    let Some(f) = s.fields.iter().find(|f| f.name == fi.name) else {
                        return Err(format!("struct `{}` has no field `{}`", s.name, fi.name));
                    };
                    let t = self.expr(&fi.value)?;
                    self.unify_ty(t, f.ty)
                        .map_err(|m| format!("field `{}` of `{}`: {m}", f.name, s.name))?;
                }
                if fields.len() != s.fields.len() {
                    return Err(format!(
                        "struct literal of `{}` must set every field",
                        s.name
                    ));
                }
                self.known(*ty)
            }
            Expr::If { cond, then, els } => {
                let c = self.expr(cond)?;
                self.unify_ty(c, Ty::Prim(Prim::Bool))
                    .map_err(|m| format!("in `if` condition: {m}"))?;
                let t = self.block(then)?;
                match els {
                    Some(b) => {
                        let f = self.block(b)?;
                        self.unify(t, f)
                            .map_err(|m| format!("`if` and `else` have different types: {m}"))?;
                        t
                    }
                    None => self.fresh(Tv::Unit),
                }
            }
            Expr::Block(b) => self.block(b)?,
        })
    }
}

fn resolve(inf: &mut Infer, v: usize) -> Option<Ty> {
    match inf.get(v) {
        Tv::Known(t) => Some(t),
        Tv::Int => Some(Ty::Prim(Prim::I32)),
        Tv::Float => Some(Ty::Prim(Prim::F64)),
        Tv::Array(e, n) => resolve(inf, e).map(|t| intern_array(t, n)),
        // a tuple is only returned (typed by the return type) or destructured
        Tv::Unit | Tv::Any | Tv::Tuple(..) => None,
    }
}

/// Whether a `loop` body can be left with `break` (a `break` of an inner loop does not
/// count), i.e. whether the loop does not diverge.
fn breaks_block(b: &Block) -> bool {
    b.stmts.iter().any(|s| match s {
        Stmt::Break => true,
        Stmt::Let { init, .. } => init.is_some_and(breaks_expr),
        Stmt::LetTuple { init, .. } => breaks_expr(init),
        Stmt::Assign { place, value, .. } => breaks_expr(place) || breaks_expr(value),
        Stmt::Expr(e) => breaks_expr(e),
        Stmt::Return(e) => e.is_some_and(breaks_expr),
        Stmt::For { start, end, .. } => breaks_expr(start) || breaks_expr(end),
        Stmt::While { cond, .. } => breaks_expr(cond),
        Stmt::Loop { .. } | Stmt::Continue => false,
    }) || b.tail.is_some_and(breaks_expr)
}

fn breaks_expr(e: &Expr) -> bool {
    match e {
        Expr::If { cond, then, els } => {
            breaks_expr(cond) || breaks_block(then) || els.as_ref().is_some_and(breaks_block)
        }
        Expr::Block(b) => breaks_block(b),
        _ => false,
    }
}

fn resolve_expr(inf: &mut Infer, e: &mut TExpr) -> R<()> {
    e.ty = resolve(inf, e.var);
    for k in &mut e.kids {
        resolve_expr(inf, k)?;
    }
    for b in &mut e.blocks {
        resolve_block(inf, b)?;
    }
    Ok(())
}

fn resolve_block(inf: &mut Infer, b: &mut TBlock) -> R<()> {
    for s in &mut b.stmts {
        if let Some(v) = s.var {
            s.ty = resolve(inf, v);
            if s.ty.is_none() {
                return Err("cannot infer the type of a local variable".into());
            }
        }
        for k in &mut s.kids {
            resolve_expr(inf, k)?;
        }
        for b in &mut s.blocks {
            resolve_block(inf, b)?;
        }
    }
    if let Some(t) = &mut b.tail {
        resolve_expr(inf, t)?;
    }
    Ok(())
}

/// Infers the types of `def`'s body; returns the typed mirror of the body.
pub(crate) fn check(def: &'static FnDef) -> std::result::Result<TBlock, String> {
    let mut inf = Infer {
        vars: Vec::new(),
        parent: Vec::new(),
        scopes: vec![HashMap::new()],
        kids: vec![Vec::new()],
        blocks: vec![Vec::new()],
        stmts: Vec::new(),
        ret: 0,
    };
    inf.ret = inf.known(def.ret);
    for p in def.params {
        let b = match p.kind {
            ParamKind::Index | ParamKind::IndexRow | ParamKind::IndexCol => {
                Binding::Value(inf.known(Ty::Prim(Prim::Usize)))
            }
            ParamKind::Elem | ParamKind::Uniform => Binding::Value(inf.known(p.ty)),
            k => Binding::Slice(k, p.ty),
        };
        inf.bind(p.name, b);
    }
    let body = inf.block(&def.body)?;
    if def.body.tail.is_some() {
        let r = inf.ret;
        inf.unify(body, r)
            .map_err(|m| format!("return value: {m}"))?;
    }
    let mut tb = inf.blocks[0].pop().expect("body block");
    resolve_block(&mut inf, &mut tb)?;
    Ok(tb)
}
