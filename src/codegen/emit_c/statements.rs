//! Statements and blocks: locals, assignments, loops, `if` as a statement, returns.

use std::collections::HashMap;

use super::function::{Bind, FnEmitter, Tail};
use super::R;
use crate::codegen::dialect::c_type;
use crate::codegen::ir::{Block, Expr, Stmt};
use crate::codegen::typeck::{TBlock, TExpr, TStmt};
use crate::codegen::{tuple_field, Ty};

impl FnEmitter<'_> {
    pub(super) fn block_stmts(&mut self, b: &'static Block, tb: &TBlock, tail: Tail) -> R<()> {
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

    pub(super) fn braced(&mut self, b: &'static Block, tb: &TBlock, tail: Tail) -> R<()> {
        self.indent += 1;
        let r = self.block_stmts(b, tb, tail);
        self.indent -= 1;
        r
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

    pub(super) fn if_stmt(
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
                self.ranges.enter(var, start, end, *inclusive, body);
                let r = self.braced(body, &ts.blocks[0], Tail::Discard);
                self.ranges.leave();
                r?;
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
}

/// `c` without the parentheses around the whole of it, if any: `if ((a == b))` makes C
/// compilers warn (`-Wparentheses-equality`).
pub(super) fn unparen(c: &str) -> &str {
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
