//! Expressions: each kind of expression node to a C expression (with any statements it
//! needs written before it).

use super::array_len::array_len_param_of;
use super::function::{Bind, FnEmitter, Tail};
use super::literals::const_value;
use super::statements::unparen;
use super::types::{field_name, int_bits};
use super::{key, R};
use crate::codegen::dialect::c_type;
use crate::codegen::ir::{BinOp, ConstValue, Expr, ParamKind, UnOp};
use crate::codegen::typeck::{is_float, is_int, ty_name, TExpr};
use crate::codegen::{Prim, Ty};

impl FnEmitter<'_> {
    pub(super) fn ty_of(te: &TExpr) -> R<Ty> {
        te.ty
            .ok_or_else(|| "an expression without a value is used as a value".to_string())
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

    pub(super) fn expr(&mut self, e: &'static Expr, te: &TExpr) -> R<String> {
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
                Bind::Slice(..) | Bind::Win(..) | Bind::Win3(..) => {
                    return Err(format!("`{n}` used as a value"))
                }
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
                        | ParamKind::Window3
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
                                Bind::Win3(c, strides, radii) => cargs.push(
                                    std::iter::once(c)
                                        .chain(strides)
                                        .chain(radii)
                                        .collect::<Vec<_>>()
                                        .join(", "),
                                ),
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
                    (Bind::Win(_, _, radii), "radius" | "radius_rows") if !radii.is_empty() => {
                        format!("(({}){})", c_type(Ty::Prim(Prim::Usize), d), radii[0])
                    }
                    (Bind::Win(_, _, radii), "radius_cols") if radii.len() == 2 => {
                        format!("(({}){})", c_type(Ty::Prim(Prim::Usize), d), radii[1])
                    }
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
                    // an index proven in range needs no clamp (`codegen::range`)
                    Ty::Array(a) if self.ranges.proves(base, index, Some(a.len)) => {
                        format!("{b}.v[{i}]")
                    }
                    Ty::Array(a) => {
                        let len = self.int_lit(a.len as i128, Prim::Usize);
                        format!("{b}.v[{}]", self.safe_index(&i, &len))
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
                    Bind::Slice(c, None, Some(_)) if self.ranges.proves(base, index, None) => {
                        format!("{c}[{i}]")
                    }
                    Bind::Slice(c, None, Some(len)) => {
                        format!("{c}[{}]", self.safe_index(&i, &len))
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
                    Bind::Slice(w, Some(s), Some(rows)) => {
                        let (r, c) = (self.safe_index(&r, &rows), self.safe_index(&c, &s));
                        format!("{w}[({r}) * {s} + ({c})]")
                    }
                    Bind::Slice(w, Some(s), _) => format!("{w}[({r}) * {s} + ({c})]"),
                    Bind::Win(w, Some(s), radii) => {
                        format!("{w}[{}]", self.check_window(&[&r, &c], &radii, Some(&s)))
                    }
                    _ => return Err(format!("`{n}` is not a Window2")),
                }
            }
            Expr::Index3 { base, offsets } => {
                let Expr::Var(n) = base else {
                    return Err("only parameters can be indexed".into());
                };
                let mut offs = Vec::with_capacity(3);
                for (o, t) in offsets.iter().zip(&te.kids) {
                    offs.push(self.expr(o, t)?);
                }
                match self.lookup(n)? {
                    Bind::Win3(w, strides, radii) => {
                        let offs = [offs[0].as_str(), &offs[1], &offs[2]];
                        format!("{w}[{}]", self.check_window3(offs, &radii, &strides))
                    }
                    _ => return Err(format!("`{n}` is not a Window3")),
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
