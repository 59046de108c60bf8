//! Reduction loop nests: index Maps whose user function is one accumulation over `l` of
//! reads of container arguments at (output row, `l`) and (`l`, output column), the SkePU
//! form of a matrix product, or their 1D relatives (a matrix-vector product). The GPU
//! backends run these through tiled kernels (`cuda/loopnest_body.inc`) that stage operand
//! tiles in shared memory and give each thread a register tile of outputs.
//!
//! A recognised function has the shape
//!
//! ```text
//! fn f(#[index] (i, j): (usize, usize), a: Mat<A>, b: Mat<B>, #[uniform] u..) -> T {
//!     let mut acc = INIT;                         // INIT reads only uniforms and constants
//!     for l in 0..K { acc = STEP(acc, a[(i, l)], b[(l, j)]); }   // or `acc op= ..`
//!     acc
//! }
//! ```
//!
//! where `K` reads only uniforms, constants and the dimensions of the containers
//! (`.rows()`, `.cols()`, `.len()`), the indices may be cast (`l as usize`), the loop may be
//! `let mut l = 0; while l < K { ..; l += 1; }`, and `STEP` reads nothing but `acc`, the two
//! reads, uniforms and constants (calls of user functions included). The matrix-vector
//! form has a 1D index `i` and reads `m[(i, l)]` with `x[l]`; `m[(l, i)]` with `x[l]` is
//! its transpose (a column per output: already coalesced one thread per output).
//!
//! What a kernel needs is split into three small user functions built here, so the C
//! emitter translates them with the user's types and operations, exactly as it does the
//! whole function: `skel_ln_init(uniforms) -> T` (INIT), `skel_ln_step(acc, x, y,
//! uniforms) -> T` (one step of the accumulation, the reads replaced by `x` and `y`) and
//! `skel_ln_bound(containers, uniforms) -> usize` (K). A kernel that applies the steps of
//! each output in ascending `l` from INIT computes what the function does, bit for bit
//! (the kernels are compiled without FMA contraction, as every kernel is).
//!
//! A step that only selects between the accumulator and a term (`acc.min(TERM)`,
//! `TERM.max(acc)`: min-plus, max-times) is a [`Pick`], with a fourth function
//! `skel_ln_term(x, y, uniforms) -> T` (TERM): the GPU kernels select with one comparison
//! instead of the exact NaN- and zero-sign-aware `min`/`max`, and fold again with the
//! exact step the outputs the comparison may have got wrong (`loopnest_kernels.rs` says
//! which and why).

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, OnceLock, PoisonError};

use super::ir::{
    visit_expr, BinOp, Block, Expr, FieldInit, FnDef, MathFn, Node, Param, ParamKind, Stmt,
};
use super::{Prim, Ty};

/// Which loop nest a function is, with the positions of its operands among its container
/// arguments (`&[T]` and `Mat<T>` parameters, in declaration order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Nest {
    /// `out[(i, j)] = fold over l of (a[(i, l)], b[(l, j)])`: a matrix product.
    Gemm {
        /// The container read at (row, l).
        a: usize,
        /// The container read at (l, column).
        b: usize,
    },
    /// `out[i] = fold over l of (m[(i, l)], x[l])`: a matrix-vector product.
    Gemv {
        /// The matrix.
        m: usize,
        /// The vector.
        x: usize,
    },
    /// `out[i] = fold over l of (m[(l, i)], x[l])`: the transposed product.
    GemvT {
        /// The matrix.
        m: usize,
        /// The vector.
        x: usize,
    },
}

/// A recognised loop nest and the functions a kernel calls (see the module documentation).
#[derive(Clone, Copy, Debug)]
pub(crate) struct LoopNest {
    /// The form.
    pub nest: Nest,
    /// `skel_ln_init(uniforms..) -> T`.
    pub init: &'static FnDef,
    /// `skel_ln_step(skel_ln_acc: T, skel_ln_x: A, skel_ln_y: B, uniforms..) -> T`.
    pub step: &'static FnDef,
    /// `skel_ln_bound(containers.., uniforms..) -> usize`, the parameters in `def`'s order.
    pub bound: &'static FnDef,
    /// Where the step is `acc.min(TERM)` or `acc.max(TERM)` (either operand order; a
    /// min-plus or max-times product): which, and `skel_ln_term(skel_ln_x: A, skel_ln_y:
    /// B, uniforms..) -> T` (TERM).
    pub pick: Option<(Pick, &'static FnDef)>,
}

/// The selection a min/max step makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pick {
    /// `acc.min(term)`.
    Min,
    /// `acc.max(term)`.
    Max,
}

impl LoopNest {
    /// The functions a kernel needs emitted, in this order: init, step, bound, and the
    /// term where the step is a [`Pick`].
    pub(crate) fn functions(&self) -> Vec<&'static FnDef> {
        let mut fs = vec![self.init, self.step, self.bound];
        fs.extend(self.pick.map(|(_, t)| t));
        fs
    }
}

/// The loop nest `def` is, or `None`; worked out once per function.
pub(crate) fn loop_nest(def: &'static FnDef) -> Option<LoopNest> {
    type Known = Mutex<HashMap<usize, Option<LoopNest>>>;
    static KNOWN: OnceLock<Known> = OnceLock::new();
    let known = KNOWN.get_or_init(Default::default);
    let key = def as *const FnDef as usize;
    let lock = || known.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(n) = lock().get(&key) {
        return *n;
    }
    let n = recognise(def);
    lock().insert(key, n);
    n
}

fn leak<T>(t: T) -> &'static T {
    Box::leak(Box::new(t))
}

/// The names of the step function's accumulator and operands.
const ACC: &str = "skel_ln_acc";
const X: &str = "skel_ln_x";
const Y: &str = "skel_ln_y";

fn recognise(def: &'static FnDef) -> Option<LoopNest> {
    let (acc, init, l, bound, assign) = accumulation(def)?;
    let name_of = |k: ParamKind| def.params.iter().find(|p| p.kind == k).map(|p| p.name);
    let (row, col) = match (name_of(ParamKind::IndexRow), name_of(ParamKind::Index)) {
        (Some(r), _) => (r, name_of(ParamKind::IndexCol)?),
        (None, Some(i)) => (i, ""),
        _ => return None,
    };
    if def.params.iter().any(|p| p.kind == ParamKind::Elem) {
        return None;
    }
    let containers: Vec<&Param> = def
        .params
        .iter()
        .filter(|p| matches!(p.kind, ParamKind::Array | ParamKind::Mat))
        .collect();
    let uniforms: HashSet<&str> = def
        .params
        .iter()
        .filter(|p| p.kind == ParamKind::Uniform)
        .map(|p| p.name)
        .collect();
    let cont_names: HashSet<&str> = containers.iter().map(|p| p.name).collect();
    // INIT: uniforms and constants; K: those and the containers' dimensions.
    if !reads_only(init, &uniforms, &HashSet::new()) || !reads_only(bound, &uniforms, &cont_names) {
        return None;
    }
    let (op, value) = assign;
    // The reads in the step, each classified: (container, which operand).
    let mut reads: Vec<(usize, Operand)> = Vec::new();
    let mut ok = true;
    visit_expr(value, &mut |n| {
        if let Node::Expr(e) = n {
            match e {
                Expr::Index2 {
                    base,
                    row: r,
                    col: c,
                } => match container(base, &containers) {
                    Some(k) => match operand(r, c, (row, col), l) {
                        Some(o) => reads.push((k, o)),
                        None => ok = false,
                    },
                    None => ok = false,
                },
                Expr::Index { base, index } => match container(base, &containers) {
                    Some(k) if containers[k].kind == ParamKind::Array && is_var(index, l) => {
                        reads.push((k, Operand::Vec))
                    }
                    _ => ok = false,
                },
                Expr::Len(_) => ok = false,
                _ => {}
            }
        }
    });
    if !ok {
        return None;
    }
    // Outside the reads, the step reads the accumulator, uniforms and constants only.
    let stripped = substitute(value, &|e| match e {
        Expr::Index2 { .. } | Expr::Index { .. } => Some(Expr::Var(X)),
        _ => None,
    });
    let allowed: HashSet<&str> = uniforms.iter().copied().chain([acc, X]).collect();
    if !reads_only(leak(stripped), &allowed, &HashSet::new()) {
        return None;
    }
    let kinds: HashSet<(usize, Operand)> = reads.iter().copied().collect();
    let find = |o: Operand| {
        let mut ks = kinds.iter().filter(|(_, x)| *x == o).map(|(k, _)| *k);
        let k = ks.next();
        ks.next().is_none().then_some(k).flatten()
    };
    let two_d = !col.is_empty();
    let nest = match (
        find(Operand::RowL),
        find(Operand::LCol),
        find(Operand::LRow),
        find(Operand::Vec),
    ) {
        (Some(a), Some(b), None, None) if two_d && kinds.len() == 2 => Nest::Gemm { a, b },
        (Some(m), None, None, Some(x)) if !two_d && kinds.len() == 2 => Nest::Gemv { m, x },
        (None, None, Some(m), Some(x)) if !two_d && kinds.len() == 2 => Nest::GemvT { m, x },
        _ => return None,
    };
    let (xk, yk) = match nest {
        Nest::Gemm { a, b } => (a, b),
        Nest::Gemv { m, x } | Nest::GemvT { m, x } => (m, x),
    };
    if containers[xk].kind != ParamKind::Mat {
        return None;
    }
    // The first operand (the matrix read along a row, or the matrix of a matrix-vector
    // product) becomes `x`, the other `y`: by how each read is indexed, so `a` times
    // itself has both.
    let step_value = substitute(value, &|e| match e {
        Expr::Index2 { row: r, col: c, .. } => match operand(r, c, (row, col), l)? {
            Operand::RowL | Operand::LRow => Some(Expr::Var(X)),
            _ => Some(Expr::Var(Y)),
        },
        Expr::Index { .. } => Some(Expr::Var(Y)),
        Expr::Var(v) if *v == acc => Some(Expr::Var(ACC)),
        _ => None,
    });
    let step_value = match op {
        None => step_value,
        Some(op) => Expr::Binary {
            op,
            lhs: leak(Expr::Var(ACC)),
            rhs: leak(step_value),
        },
    };
    let uniform_params: Vec<Param> = def
        .params
        .iter()
        .filter(|p| p.kind == ParamKind::Uniform)
        .map(copy_param)
        .collect();
    let elem = |name, ty| Param {
        name,
        kind: ParamKind::Elem,
        ty,
    };
    let mut step_params = vec![
        elem(ACC, def.ret),
        elem(X, containers[xk].ty),
        elem(Y, containers[yk].ty),
    ];
    step_params.extend(uniform_params.iter().map(copy_param));
    let tail = |e: Expr| Block {
        stmts: &[],
        tail: Some(leak(e)),
    };
    let step_value: &'static Expr = leak(step_value);
    let pick = pick_of(step_value).map(|(p, term)| {
        let mut params = vec![elem(X, containers[xk].ty), elem(Y, containers[yk].ty)];
        params.extend(uniform_params.iter().map(copy_param));
        let term = leak(FnDef {
            name: "skel_ln_term",
            params: Vec::leak(params),
            ret: def.ret,
            body: tail(substitute(term, &|_| None)),
        });
        (p, term)
    });
    Some(LoopNest {
        pick,
        nest,
        init: leak(FnDef {
            name: "skel_ln_init",
            params: Vec::leak(uniform_params),
            ret: def.ret,
            body: tail(substitute(init, &|_| None)),
        }),
        step: leak(FnDef {
            name: "skel_ln_step",
            params: Vec::leak(step_params),
            ret: def.ret,
            body: Block {
                stmts: &[],
                tail: Some(step_value),
            },
        }),
        bound: leak(FnDef {
            name: "skel_ln_bound",
            params: Vec::leak(
                def.params
                    .iter()
                    .filter(|p| {
                        matches!(
                            p.kind,
                            ParamKind::Array | ParamKind::Mat | ParamKind::Uniform
                        )
                    })
                    .map(copy_param)
                    .collect(),
            ),
            ret: Ty::Prim(Prim::Usize),
            body: tail(Expr::Cast {
                expr: bound,
                ty: Ty::Prim(Prim::Usize),
            }),
        }),
    })
}

/// `(Min or Max, TERM)` where `step` is `acc.min(TERM)`, `TERM.min(acc)` or `max` so, with
/// TERM not reading the accumulator.
fn pick_of(step: &'static Expr) -> Option<(Pick, &'static Expr)> {
    let Expr::Math { func, args, .. } = step else {
        return None;
    };
    let [p, q] = *args else {
        return None;
    };
    let pick = match func {
        MathFn::Min => Pick::Min,
        MathFn::Max => Pick::Max,
        _ => return None,
    };
    let term = match (p, q) {
        (Expr::Var(v), t) | (t, Expr::Var(v)) if *v == ACC => t,
        _ => return None,
    };
    let mut reads_acc = false;
    visit_expr(term, &mut |n| {
        if let Node::Expr(Expr::Var(v)) = n {
            reads_acc |= *v == ACC;
        }
    });
    (!reads_acc).then_some((pick, term))
}

fn copy_param(p: &Param) -> Param {
    Param {
        name: p.name,
        kind: p.kind,
        ty: p.ty,
    }
}

/// How a read is indexed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Operand {
    /// `m[(row, l)]`.
    RowL,
    /// `m[(l, col)]`.
    LCol,
    /// `m[(l, i)]` of a 1D index.
    LRow,
    /// `x[l]`.
    Vec,
}

fn operand(r: &Expr, c: &Expr, (row, col): (&str, &str), l: &str) -> Option<Operand> {
    if is_var(r, row) && is_var(c, l) {
        Some(Operand::RowL)
    } else if is_var(r, l) && !col.is_empty() && is_var(c, col) {
        Some(Operand::LCol)
    } else if is_var(r, l) && col.is_empty() && is_var(c, row) {
        Some(Operand::LRow)
    } else {
        None
    }
}

/// Whether `e` is `name`, possibly cast to an integer type (`l as usize`).
fn is_var(e: &Expr, name: &str) -> bool {
    match e {
        Expr::Var(v) => *v == name,
        Expr::Cast { expr, ty } => {
            matches!(ty, Ty::Prim(p) if super::typeck::is_int(*p)) && is_var(expr, name)
        }
        _ => false,
    }
}

/// The position among the containers of the one `base` names.
fn container(base: &Expr, containers: &[&Param]) -> Option<usize> {
    match base {
        Expr::Var(v) => containers.iter().position(|p| p.name == *v),
        _ => None,
    }
}

/// Whether `e` reads no variable but `vars`, and containers in `dims` only through their
/// dimensions (`.rows()`, `.cols()`, `.len()`).
fn reads_only(e: &'static Expr, vars: &HashSet<&str>, dims: &HashSet<&str>) -> bool {
    let dim_of = |e: &Expr| match e {
        Expr::Field { expr, name } if matches!(*name, "rows" | "cols") => {
            matches!(expr, Expr::Var(v) if dims.contains(v))
        }
        Expr::Len(x) => matches!(x, Expr::Var(v) if dims.contains(v)),
        _ => false,
    };
    // The dimensions are replaced by a constant, then every variable left must be allowed.
    let rest = substitute(e, &|x| {
        dim_of(x).then_some(Expr::Int {
            value: 0,
            suffix: Some(Prim::Usize),
        })
    });
    let mut ok = true;
    visit_expr(leak(rest), &mut |n| {
        if let Node::Expr(x) = n {
            match x {
                Expr::Var(v) => ok &= vars.contains(v),
                Expr::Block(_) | Expr::Index { .. } | Expr::Index2 { .. } | Expr::Index3 { .. } => {
                    ok = false
                }
                _ => {}
            }
        }
    });
    ok
}

/// `(acc, INIT, l, K, (op, value))` of a function shaped as in the module documentation.
#[allow(clippy::type_complexity)]
fn accumulation(
    def: &'static FnDef,
) -> Option<(
    &'static str,
    &'static Expr,
    &'static str,
    &'static Expr,
    (Option<BinOp>, &'static Expr),
)> {
    let acc = match def.body.tail {
        Some(Expr::Var(v)) => *v,
        _ => return None,
    };
    let (init, rest) = match def.body.stmts {
        [Stmt::Let {
            name,
            mutable: true,
            ty,
            init: Some(init),
        }, rest @ ..]
            if *name == acc && ty.map_or(true, |t| super::typeck::ty_eq(t, def.ret)) =>
        {
            (*init, rest)
        }
        _ => return None,
    };
    let (l, bound, body) = match rest {
        [Stmt::For {
            var,
            start,
            end,
            inclusive: false,
            body,
        }] if is_zero(start) && body.tail.is_none() => (*var, *end, body.stmts),
        [Stmt::Let {
            name,
            mutable: true,
            ty,
            init: Some(start),
        }, Stmt::While { cond, body }]
            if is_zero(start)
                && ty.map_or(
                    true,
                    |t| matches!(t, Ty::Prim(p) if super::typeck::is_int(p)),
                )
                && body.tail.is_none() =>
        {
            let bound = match cond {
                Expr::Binary {
                    op: BinOp::Lt,
                    lhs: Expr::Var(v),
                    rhs,
                } if v == name => *rhs,
                _ => return None,
            };
            match body.stmts {
                [step, Stmt::Assign {
                    place: Expr::Var(v),
                    op: Some(BinOp::Add),
                    value,
                }] if v == name && is_one(value) => (*name, bound, std::slice::from_ref(step)),
                _ => return None,
            }
        }
        _ => return None,
    };
    match body {
        [Stmt::Assign {
            place: Expr::Var(v),
            op,
            value,
        }] if *v == acc && !matches!(op, Some(BinOp::And | BinOp::Or)) => {
            Some((acc, init, l, bound, (*op, *value)))
        }
        _ => None,
    }
}

fn is_zero(e: &Expr) -> bool {
    matches!(e, Expr::Int { value: 0, .. })
}

fn is_one(e: &Expr) -> bool {
    matches!(e, Expr::Int { value: 1, .. })
}

/// A copy of `e` with every sub-expression `f` maps replaced (outermost first).
fn substitute(e: &'static Expr, f: &dyn Fn(&'static Expr) -> Option<Expr>) -> Expr {
    if let Some(x) = f(e) {
        return x;
    }
    let b = |e: &'static Expr| -> &'static Expr { leak(substitute(e, f)) };
    let list = |es: &'static [Expr]| -> &'static [Expr] {
        Vec::leak(es.iter().map(|e| substitute(e, f)).collect())
    };
    let block = |blk: &'static Block| Block {
        stmts: Vec::leak(blk.stmts.iter().map(|s| substitute_stmt(s, f)).collect()),
        tail: blk.tail.map(|t| leak(substitute(t, f))),
    };
    match e {
        Expr::Int { value, suffix } => Expr::Int {
            value: *value,
            suffix: *suffix,
        },
        Expr::Float { text, suffix } => Expr::Float {
            text,
            suffix: *suffix,
        },
        Expr::Bool(v) => Expr::Bool(*v),
        Expr::Var(v) => Expr::Var(v),
        Expr::Const { ty, name } => Expr::Const { ty: *ty, name },
        Expr::Extern { name, value } => Expr::Extern {
            name,
            value: *value,
        },
        Expr::Array(items) => Expr::Array(list(items)),
        Expr::Repeat { value, len } => Expr::Repeat {
            value: b(value),
            len: *len,
        },
        Expr::Tuple(items) => Expr::Tuple(list(items)),
        Expr::Len(x) => Expr::Len(b(x)),
        Expr::Unary { op, expr } => Expr::Unary {
            op: *op,
            expr: b(expr),
        },
        Expr::Binary { op, lhs, rhs } => Expr::Binary {
            op: *op,
            lhs: b(lhs),
            rhs: b(rhs),
        },
        Expr::Cast { expr, ty } => Expr::Cast {
            expr: b(expr),
            ty: *ty,
        },
        Expr::Call { callee, args } => Expr::Call {
            callee: *callee,
            args: list(args),
        },
        Expr::Math { func, ty, args } => Expr::Math {
            func: *func,
            ty: *ty,
            args: list(args),
        },
        Expr::Field { expr, name } => Expr::Field {
            expr: b(expr),
            name,
        },
        Expr::Index { base, index } => Expr::Index {
            base: b(base),
            index: b(index),
        },
        Expr::Index2 { base, row, col } => Expr::Index2 {
            base: b(base),
            row: b(row),
            col: b(col),
        },
        Expr::Index3 { base, offsets } => Expr::Index3 {
            base: b(base),
            offsets: offsets.map(b),
        },
        Expr::Struct { ty, fields } => Expr::Struct {
            ty: *ty,
            fields: Vec::leak(
                fields
                    .iter()
                    .map(|x| FieldInit {
                        name: x.name,
                        value: substitute(&x.value, f),
                    })
                    .collect(),
            ),
        },
        Expr::If { cond, then, els } => Expr::If {
            cond: b(cond),
            then: block(then),
            els: els.as_ref().map(block),
        },
        Expr::Block(blk) => Expr::Block(block(blk)),
    }
}

fn substitute_stmt(s: &'static Stmt, f: &dyn Fn(&'static Expr) -> Option<Expr>) -> Stmt {
    let b = |e: &'static Expr| -> &'static Expr { leak(substitute(e, f)) };
    let block = |blk: &'static Block| Block {
        stmts: Vec::leak(blk.stmts.iter().map(|s| substitute_stmt(s, f)).collect()),
        tail: blk.tail.map(|t| leak(substitute(t, f))),
    };
    match s {
        Stmt::Let {
            name,
            mutable,
            ty,
            init,
        } => Stmt::Let {
            name,
            mutable: *mutable,
            ty: *ty,
            init: init.map(b),
        },
        Stmt::Assign { place, op, value } => Stmt::Assign {
            place: b(place),
            op: *op,
            value: b(value),
        },
        Stmt::Expr(e) => Stmt::Expr(b(e)),
        Stmt::For {
            var,
            start,
            end,
            inclusive,
            body,
        } => Stmt::For {
            var,
            start: b(start),
            end: b(end),
            inclusive: *inclusive,
            body: block(body),
        },
        Stmt::While { cond, body } => Stmt::While {
            cond: b(cond),
            body: block(body),
        },
        Stmt::Loop { body } => Stmt::Loop { body: block(body) },
        Stmt::LetTuple { names, init } => Stmt::LetTuple {
            names,
            init: b(init),
        },
        Stmt::Return(e) => Stmt::Return(e.map(b)),
        Stmt::Break => Stmt::Break,
        Stmt::Continue => Stmt::Continue,
    }
}

#[cfg(test)]
#[allow(clippy::needless_range_loop)] // the functions under test index their containers
mod tests {
    use super::{loop_nest, Nest, Pick};
    use crate::codegen::{device_source_multi, Dialect};
    use crate::prelude::*;
    use crate::userfn::UserFn;

    #[userfn]
    fn mm(#[index] (i, j): (usize, usize), a: Mat<f32>, b: Mat<f32>) -> f32 {
        let mut sum = 0.0f32;
        for l in 0..a.cols() {
            sum += a[(i, l)] * b[(l, j)];
        }
        sum
    }

    #[userfn]
    fn min_plus(
        #[index] (i, j): (usize, usize),
        a: Mat<f32>,
        b: Mat<f32>,
        #[uniform] k: u32,
    ) -> f32 {
        let mut d = f32::INFINITY;
        let mut l = 0u32;
        while l < k {
            d = d.min(a[(i, l as usize)] + b[(l as usize, j)]);
            l += 1;
        }
        d
    }

    #[userfn]
    fn squared(#[index] (i, j): (usize, usize), a: Mat<i64>) -> i64 {
        let mut s = 0;
        for l in 0..a.rows() {
            s += a[(i, l)] * a[(l, j)];
        }
        s
    }

    #[userfn]
    fn mv(#[index] i: usize, a: Mat<f64>, x: &[f64]) -> f64 {
        let mut s = 0.0;
        for l in 0..x.len() {
            s += a[(i, l)] * x[l];
        }
        s
    }

    #[userfn]
    fn mtv(#[index] j: usize, a: Mat<f32>, r: &[f32]) -> f32 {
        let mut s = 0.0f32;
        for l in 0..a.rows() {
            s += r[l] * a[(l, j)];
        }
        s
    }

    #[userfn]
    fn scaled(
        #[index] (i, j): (usize, usize),
        a: Mat<f32>,
        b: Mat<f32>,
        #[uniform] alpha: f32,
    ) -> f32 {
        let mut s = 0.0f32;
        for l in 0..b.rows() {
            s += alpha * a[(i, l)] * b[(l, j)];
        }
        s
    }

    #[userfn]
    fn transposed_read(#[index] (i, j): (usize, usize), a: Mat<f32>, b: Mat<f32>) -> f32 {
        let mut s = 0.0f32;
        for l in 0..a.cols() {
            s += a[(l, i)] * b[(l, j)];
        }
        s
    }

    #[userfn]
    fn bound_by_row(#[index] (i, j): (usize, usize), a: Mat<f32>, b: Mat<f32>) -> f32 {
        let mut s = 0.0f32;
        for l in 0..i {
            s += a[(i, l)] * b[(l, j)];
        }
        s
    }

    #[userfn]
    fn uses_index(#[index] (i, j): (usize, usize), a: Mat<f32>, b: Mat<f32>) -> f32 {
        let mut s = 0.0f32;
        for l in 0..a.cols() {
            s += a[(i, l)] * b[(l, j)] * i as f32;
        }
        s
    }

    #[userfn]
    fn two_statements(#[index] (i, j): (usize, usize), a: Mat<f32>, b: Mat<f32>) -> f32 {
        let mut s = 0.0f32;
        for l in 0..a.cols() {
            s += a[(i, l)];
            s += b[(l, j)];
        }
        s
    }

    #[userfn]
    fn shifted(#[index] (i, j): (usize, usize), a: Mat<f32>, b: Mat<f32>) -> f32 {
        let mut s = 0.0f32;
        for l in 1..a.cols() {
            s += a[(i, l)] * b[(l, j)];
        }
        s
    }

    #[userfn]
    fn returns_other(#[index] (i, j): (usize, usize), a: Mat<f32>, b: Mat<f32>) -> f32 {
        let mut s = 0.0f32;
        for l in 0..a.cols() {
            s += a[(i, l)] * b[(l, j)];
        }
        s * 2.0
    }

    #[userfn]
    fn with_input(#[index] i: usize, x: f32, a: Mat<f32>, v: &[f32]) -> f32 {
        let mut s = x;
        for l in 0..v.len() {
            s += a[(i, l)] * v[l];
        }
        s
    }

    #[userfn]
    fn max_times(#[index] (i, j): (usize, usize), a: Mat<f64>, b: Mat<f64>) -> f64 {
        let mut p = f64::NEG_INFINITY;
        for l in 0..a.cols() {
            p = (a[(i, l)] * b[(l, j)]).max(p);
        }
        p
    }

    #[userfn]
    fn int_min_plus(#[index] (i, j): (usize, usize), a: Mat<i32>, b: Mat<i32>) -> i32 {
        let mut d = i32::MAX;
        for l in 0..a.cols() {
            d = i32::min(d, a[(i, l)].wrapping_add(b[(l, j)]));
        }
        d
    }

    #[userfn]
    fn clamped_min(#[index] (i, j): (usize, usize), a: Mat<f32>, b: Mat<f32>) -> f32 {
        let mut d = f32::INFINITY;
        for l in 0..a.cols() {
            d = d.min(a[(i, l)] + b[(l, j)]).max(0.0);
        }
        d
    }

    #[userfn]
    fn min_of_acc(#[index] (i, j): (usize, usize), a: Mat<f32>, b: Mat<f32>) -> f32 {
        let mut d = f32::INFINITY;
        for l in 0..a.cols() {
            d = d.min(a[(i, l)] + b[(l, j)] + d);
        }
        d
    }

    fn pick<F: UserFn>(_: F) -> Option<Pick> {
        loop_nest(F::definition()).and_then(|n| n.pick.map(|(p, _)| p))
    }

    fn nest<F: UserFn>(_: F) -> Option<Nest> {
        loop_nest(F::definition()).map(|n| n.nest)
    }

    #[test]
    fn matrix_products_are_recognised() {
        assert_eq!(nest(mm), Some(Nest::Gemm { a: 0, b: 1 }));
        assert_eq!(nest(min_plus), Some(Nest::Gemm { a: 0, b: 1 }));
        assert_eq!(nest(squared), Some(Nest::Gemm { a: 0, b: 0 }));
        assert_eq!(nest(scaled), Some(Nest::Gemm { a: 0, b: 1 }));
    }

    /// A step that only selects between the accumulator and a term runs as a plain select
    /// in the GPU kernels; anything more around the select, or a term that reads the
    /// accumulator, keeps the exact step alone.
    #[test]
    fn min_and_max_steps_are_picks() {
        assert_eq!(pick(min_plus), Some(Pick::Min));
        assert_eq!(pick(max_times), Some(Pick::Max));
        assert_eq!(pick(int_min_plus), Some(Pick::Min));
        assert_eq!(nest(max_times), Some(Nest::Gemm { a: 0, b: 1 }));
        assert_eq!(nest(int_min_plus), Some(Nest::Gemm { a: 0, b: 1 }));
        assert_eq!(nest(clamped_min), Some(Nest::Gemm { a: 0, b: 1 }));
        assert_eq!(pick(clamped_min), None);
        assert_eq!(nest(min_of_acc), Some(Nest::Gemm { a: 0, b: 1 }));
        assert_eq!(pick(min_of_acc), None);
        assert_eq!(pick(mm), None);
        assert_eq!(pick(scaled), None);
    }

    /// The term is the user's expression with the reads as operands, in the user's types.
    #[test]
    fn the_term_of_a_pick_is_the_users_expression() {
        let n = loop_nest(<int_min_plus as UserFn>::definition()).unwrap();
        let src = device_source_multi(&n.functions(), Dialect::OpenCl).unwrap();
        assert_eq!(src.entries.len(), 4);
        let term = src.source.split("skel_fn_skel_ln_term(").nth(1).unwrap();
        assert!(term.contains("skel_ln_x"), "{}", src.source);
        assert!(term.contains("skel_ln_y"), "{}", src.source);
        assert!(!term.contains("skel_ln_acc"), "{}", src.source);
        let n = loop_nest(<mm as UserFn>::definition()).unwrap();
        assert_eq!(n.functions().len(), 3);
    }

    #[test]
    fn matrix_vector_products_are_recognised() {
        assert_eq!(nest(mv), Some(Nest::Gemv { m: 0, x: 1 }));
        assert_eq!(nest(mtv), Some(Nest::GemvT { m: 0, x: 1 }));
    }

    #[test]
    fn other_loops_are_not() {
        assert_eq!(nest(transposed_read), None);
        assert_eq!(nest(bound_by_row), None);
        assert_eq!(nest(uses_index), None);
        assert_eq!(nest(two_statements), None);
        assert_eq!(nest(shifted), None);
        assert_eq!(nest(returns_other), None);
        assert_eq!(nest(with_input), None);
    }

    #[test]
    fn the_step_inlines_the_users_operations() {
        let n = loop_nest(<min_plus as UserFn>::definition()).unwrap();
        let src = device_source_multi(&[n.init, n.step, n.bound], Dialect::Cuda).unwrap();
        let step = src.source.split("skel_fn_skel_ln_step(").nth(1).unwrap();
        assert!(step.contains("skel_min_f32(skel_ln_acc"), "{}", src.source);
        assert!(!step.contains("for ("), "{}", src.source);
        // both reads of `a` times itself become operands of one step
        let n = loop_nest(<squared as UserFn>::definition()).unwrap();
        let src = device_source_multi(&[n.init, n.step, n.bound], Dialect::OpenCl).unwrap();
        let step = src.source.split("skel_fn_skel_ln_step(").nth(1).unwrap();
        assert!(step.contains("skel_ln_y"), "{}", src.source);
    }
}
