//! Shared-memory tiles for all-pairs MapArray functions ([`super::cost::Cost::AllPairs`]),
//! as hand-written n-body kernels stage their bodies: the threads of a block load a tile of
//! the array together, wait, and all run their loop iterations over that tile.
//!
//! The rewrite is done on the typed tree, so the C emitter stays as it is: a loop
//! `for j in a..b { .. arr[j] .. }` becomes
//!
//! ```text
//! let mut start: usize = a; let end: usize = b;
//! while start < end {
//!     skel_tile_stage(arr, start, end);                  // the block loads the tile
//!     let stop: usize = if end - start < TILE { end } else { start + TILE };
//!     for j in start..stop { .. skel_tile_get(arr, j, start) .. }
//!     start = stop;
//! }
//! ```
//!
//! `skel_tile_stage` and `skel_tile_get` are ordinary user functions (as written, the first
//! does nothing and the second returns `arr[j]`, so the rewritten function computes what
//! the original does); a backend replaces their bodies with its shared-memory code.
//!
//! Barriers need every thread of a block to reach them, so a loop is only tiled when that
//! holds and the rewrite cannot change what it computes: a `for` over `a..b` among the
//! function's top-level statements, with bounds the same for every element; a function
//! without `return`; a loop body that reads the array only as `arr[j]` (no other index, not
//! passed to a call), does not `break` out of this loop and does not rebind `j`. Anything
//! else keeps the generic one-element-per-thread launch.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use super::cost::{same_for_all, varying};
use super::ir::{visit_block, BinOp, Block, Expr, FieldInit, FnDef, Node, Param, ParamKind, Stmt};
use super::{Prim, Ty};
use crate::DeviceType;

/// Array elements per tile.
pub(crate) const TILE: usize = 256;

/// The tiled form of a function and the two functions it calls whose bodies a backend
/// replaces (see the module documentation).
#[derive(Clone, Copy)]
pub(crate) struct Tiled {
    /// The rewritten function: same name, parameters and result as the original.
    pub def: &'static FnDef,
    /// `skel_tile_stage(src: &[T], start: usize, end: usize) -> u32`: loads
    /// `src[start..min(start + TILE, end)]` into the tile.
    pub stage: &'static FnDef,
    /// `skel_tile_get(src: &[T], j: usize, start: usize) -> T`: `src[j]`, from the tile
    /// loaded at `start`.
    pub get: &'static FnDef,
}

/// The tiled form of `def`, whose array has element type `T`, or `None` when no loop of
/// it can be tiled. Built once per function and element type (the trees are leaked: there
/// are as many as user functions).
pub(crate) fn tiled<T: DeviceType>(def: &'static FnDef) -> Option<Tiled> {
    type Cache = Mutex<HashMap<(usize, TypeId), Option<Tiled>>>;
    static CACHE: std::sync::OnceLock<Cache> = std::sync::OnceLock::new();
    let key = (def as *const FnDef as usize, TypeId::of::<T>());
    let cache = CACHE.get_or_init(Default::default);
    if let Some(t) = cache
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
    {
        return *t;
    }
    let t = rewrite(def, stage_def::<T>, get_def::<T>).map(|body| Tiled {
        def: leak(FnDef {
            name: def.name,
            params: def.params,
            ret: def.ret,
            body,
        }),
        stage: stage_def::<T>(),
        get: get_def::<T>(),
    });
    cache
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(key, t);
    t
}

fn leak<T>(t: T) -> &'static T {
    Box::leak(Box::new(t))
}

fn usize_ty() -> Ty {
    Ty::Prim(Prim::Usize)
}

fn param(name: &'static str, kind: ParamKind, ty: Ty) -> Param {
    Param { name, kind, ty }
}

/// One leaked definition per element type, built by `make`.
fn intrinsic<T: DeviceType>(which: usize, make: impl FnOnce() -> FnDef) -> &'static FnDef {
    type Defs = Mutex<HashMap<(usize, TypeId), &'static FnDef>>;
    static DEFS: std::sync::OnceLock<Defs> = std::sync::OnceLock::new();
    DEFS.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry((which, TypeId::of::<T>()))
        .or_insert_with(|| leak(make()))
}

fn stage_def<T: DeviceType>() -> &'static FnDef {
    intrinsic::<T>(0, || FnDef {
        name: "skel_tile_stage",
        params: Vec::leak(vec![
            param("src", ParamKind::Array, T::TY),
            param("start", ParamKind::Elem, usize_ty()),
            param("end", ParamKind::Elem, usize_ty()),
        ]),
        ret: Ty::Prim(Prim::U32),
        body: Block {
            stmts: &[],
            tail: Some(leak(Expr::Int {
                value: 0,
                suffix: Some(Prim::U32),
            })),
        },
    })
}

fn get_def<T: DeviceType>() -> &'static FnDef {
    intrinsic::<T>(1, || FnDef {
        name: "skel_tile_get",
        params: Vec::leak(vec![
            param("src", ParamKind::Array, T::TY),
            param("j", ParamKind::Elem, usize_ty()),
            param("start", ParamKind::Elem, usize_ty()),
        ]),
        ret: T::TY,
        body: Block {
            stmts: &[],
            tail: Some(leak(Expr::Index {
                base: leak(Expr::Var("src")),
                index: leak(Expr::Var("j")),
            })),
        },
    })
}

/// The body of `def` with its tileable loops rewritten, or `None` if there is none.
fn rewrite(
    def: &'static FnDef,
    stage: fn() -> &'static FnDef,
    get: fn() -> &'static FnDef,
) -> Option<Block> {
    let mut arrays = def.params.iter().filter(|p| p.kind == ParamKind::Array);
    let arr = arrays.next()?.name;
    if arrays.next().is_some() {
        return None;
    }
    let mut clash = false;
    visit_block(&def.body, &mut |node| match node {
        Node::Stmt(Stmt::Return(_)) => clash = true,
        Node::Stmt(Stmt::Let { name, .. }) | Node::Stmt(Stmt::For { var: name, .. }) => {
            clash |= *name == arr || name.starts_with("skel_tile");
        }
        _ => {}
    });
    if clash {
        return None;
    }
    let varying = varying(def);
    // The type of each top-level loop's variable: a tiled loop counts in `usize` and
    // rebinds the variable in its own type.
    let typed = super::typeck::check(def).ok()?;
    // "" is no variable's name: statements outside tiled loops are copied unchanged.
    let keep = Subst {
        arr,
        var: "",
        start: "",
        get,
    };
    let mut stmts = Vec::new();
    let mut any = false;
    for (k, s) in def.body.stmts.iter().enumerate() {
        match s {
            Stmt::For {
                var,
                start,
                end,
                inclusive: false,
                body,
            } if same_for_all(s, &varying) && tileable(body, arr, var) => {
                any = true;
                let names = Names::new(k);
                let sub = Subst {
                    arr,
                    var,
                    start: names.start,
                    get,
                };
                let var_ty = typed.stmts.get(k).and_then(|t| t.ty).unwrap_or(usize_ty());
                stmts.extend(tile_loop(
                    &names,
                    (start, end),
                    (var, var_ty),
                    sub.block(body),
                    (arr, stage),
                ));
            }
            _ => stmts.push(keep.stmt(s)),
        }
    }
    any.then(|| Block {
        stmts: Vec::leak(stmts),
        tail: def.body.tail,
    })
}

/// Whether the array appears in `body` only as `arr[var]`, `var` is not rebound and no
/// `break` leaves this loop.
fn tileable(body: &'static Block, arr: &str, var: &str) -> bool {
    let (mut uses, mut reads, mut ok) = (0, 0, true);
    visit_block(body, &mut |node| match node {
        Node::Expr(Expr::Var(v)) if *v == arr => uses += 1,
        Node::Expr(Expr::Index { base, index }) => {
            if matches!(base, Expr::Var(b) if *b == arr) {
                ok &= is_loop_var(index, var);
                reads += 1;
            }
        }
        Node::Stmt(Stmt::Let { name, .. }) | Node::Stmt(Stmt::For { var: name, .. }) => {
            ok &= *name != var
        }
        _ => {}
    });
    ok && reads > 0 && uses == reads && !breaks(body)
}

/// Whether `index` is the loop variable `var`, or that cast to `usize` (`j as usize` of a
/// `u32` loop variable, as n-body codes write it).
fn is_loop_var(index: &Expr, var: &str) -> bool {
    match index {
        Expr::Var(i) => *i == var,
        Expr::Cast {
            expr: Expr::Var(i),
            ty: Ty::Prim(Prim::Usize),
        } => *i == var,
        _ => false,
    }
}

/// Whether a `break` in `b` may leave the loop `b` is the body of: one outside the loops
/// nested in `b` (conservatively, also one in a loop inside an `if` or a `{ }`).
fn breaks(b: &'static Block) -> bool {
    let any_break = |b: &Block| {
        let mut found = false;
        visit_block(b, &mut |n| found |= matches!(n, Node::Stmt(Stmt::Break)));
        found
    };
    b.stmts.iter().any(|s| match s {
        Stmt::For { .. } | Stmt::While { .. } => false,
        _ => any_break(&Block {
            stmts: std::slice::from_ref(s),
            tail: None,
        }),
    }) || any_break(&Block {
        stmts: &[],
        tail: b.tail,
    })
}

/// Names of one tiled loop's locals (numbered by its position, so loops do not shadow).
struct Names {
    start: &'static str,
    end: &'static str,
    stop: &'static str,
    /// The `usize` counter of a loop whose variable has another type.
    count: &'static str,
}

impl Names {
    fn new(k: usize) -> Names {
        let name = |what: &str| -> &'static str { String::leak(format!("skel_tile_{what}{k}")) };
        Names {
            start: name("start"),
            end: name("end"),
            stop: name("stop"),
            count: name("j"),
        }
    }
}

fn var(name: &'static str) -> Expr {
    Expr::Var(name)
}

fn bin(op: BinOp, lhs: Expr, rhs: Expr) -> Expr {
    Expr::Binary {
        op,
        lhs: leak(lhs),
        rhs: leak(rhs),
    }
}

fn tail(e: Expr) -> Block {
    Block {
        stmts: &[],
        tail: Some(leak(e)),
    }
}

/// The statements replacing `for var in a..b { body }` (`body` already rewritten).
fn tile_loop(
    n: &Names,
    (a, b): (&'static Expr, &'static Expr),
    (var_name, var_ty): (&'static str, Ty),
    body: Block,
    (arr, stage): (&'static str, fn() -> &'static FnDef),
) -> Vec<Stmt> {
    let as_usize = |e: &'static Expr| -> &'static Expr {
        leak(Expr::Cast {
            expr: e,
            ty: usize_ty(),
        })
    };
    // `for j in start..stop` counts in usize; a `u32` (or other) `j` is rebound from the
    // counter in its own type, so the body types as written.
    let (counter, body) = if matches!(var_ty, Ty::Prim(Prim::Usize)) {
        (var_name, body)
    } else {
        let stmts = vec![
            Stmt::Let {
                name: var_name,
                mutable: false,
                ty: Some(var_ty),
                init: Some(leak(Expr::Cast {
                    expr: leak(var(n.count)),
                    ty: var_ty,
                })),
            },
            Stmt::Expr(leak(Expr::Block(body))),
        ];
        (
            n.count,
            Block {
                stmts: Vec::leak(stmts),
                tail: None,
            },
        )
    };
    let tile = || Expr::Int {
        value: TILE as u128,
        suffix: Some(Prim::Usize),
    };
    let stop = Expr::If {
        cond: leak(bin(
            BinOp::Lt,
            bin(BinOp::Sub, var(n.end), var(n.start)),
            tile(),
        )),
        then: tail(var(n.end)),
        els: Some(tail(bin(BinOp::Add, var(n.start), tile()))),
    };
    let round = vec![
        Stmt::Expr(leak(Expr::Call {
            callee: stage,
            args: Vec::leak(vec![var(arr), var(n.start), var(n.end)]),
        })),
        Stmt::Let {
            name: n.stop,
            mutable: false,
            ty: Some(usize_ty()),
            init: Some(leak(stop)),
        },
        Stmt::For {
            var: counter,
            start: leak(var(n.start)),
            end: leak(var(n.stop)),
            inclusive: false,
            body,
        },
        Stmt::Assign {
            place: leak(var(n.start)),
            op: None,
            value: leak(var(n.stop)),
        },
    ];
    vec![
        Stmt::Let {
            name: n.start,
            mutable: true,
            ty: Some(usize_ty()),
            init: Some(as_usize(a)),
        },
        Stmt::Let {
            name: n.end,
            mutable: false,
            ty: Some(usize_ty()),
            init: Some(as_usize(b)),
        },
        Stmt::While {
            cond: leak(bin(BinOp::Lt, var(n.start), var(n.end))),
            body: Block {
                stmts: Vec::leak(round),
                tail: None,
            },
        },
    ]
}

/// Replaces `arr[var]` by `skel_tile_get(arr, var, start)` in a loop body.
struct Subst {
    arr: &'static str,
    var: &'static str,
    start: &'static str,
    get: fn() -> &'static FnDef,
}

impl Subst {
    fn block(&self, b: &'static Block) -> Block {
        Block {
            stmts: Vec::leak(b.stmts.iter().map(|s| self.stmt(s)).collect()),
            tail: b.tail.map(|t| self.boxed(t)),
        }
    }

    fn boxed(&self, e: &'static Expr) -> &'static Expr {
        leak(self.expr(e))
    }

    fn stmt(&self, s: &'static Stmt) -> Stmt {
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
                init: init.map(|e| self.boxed(e)),
            },
            Stmt::Assign { place, op, value } => Stmt::Assign {
                place: self.boxed(place),
                op: *op,
                value: self.boxed(value),
            },
            Stmt::Expr(e) => Stmt::Expr(self.boxed(e)),
            Stmt::For {
                var,
                start,
                end,
                inclusive,
                body,
            } => Stmt::For {
                var,
                start: self.boxed(start),
                end: self.boxed(end),
                inclusive: *inclusive,
                body: self.block(body),
            },
            Stmt::While { cond, body } => Stmt::While {
                cond: self.boxed(cond),
                body: self.block(body),
            },
            Stmt::Loop { body } => Stmt::Loop {
                body: self.block(body),
            },
            Stmt::LetTuple { names, init } => Stmt::LetTuple {
                names,
                init: self.boxed(init),
            },
            Stmt::Return(e) => Stmt::Return(e.map(|e| self.boxed(e))),
            Stmt::Break => Stmt::Break,
            Stmt::Continue => Stmt::Continue,
        }
    }

    fn exprs(&self, es: &'static [Expr]) -> &'static [Expr] {
        Vec::leak(es.iter().map(|e| self.expr(e)).collect())
    }

    fn expr(&self, e: &'static Expr) -> Expr {
        match e {
            Expr::Index { base, index }
                if matches!(base, Expr::Var(b) if *b == self.arr)
                    && is_loop_var(index, self.var) =>
            {
                let j = Expr::Cast {
                    expr: leak(var(self.var)),
                    ty: usize_ty(),
                };
                Expr::Call {
                    callee: self.get,
                    args: Vec::leak(vec![var(self.arr), j, var(self.start)]),
                }
            }
            Expr::Int { value, suffix } => Expr::Int {
                value: *value,
                suffix: *suffix,
            },
            Expr::Float { text, suffix } => Expr::Float {
                text,
                suffix: *suffix,
            },
            Expr::Bool(b) => Expr::Bool(*b),
            Expr::Var(v) => Expr::Var(v),
            Expr::Const { ty, name } => Expr::Const { ty: *ty, name },
            Expr::Extern { name, value } => Expr::Extern {
                name,
                value: *value,
            },
            Expr::Array(items) => Expr::Array(self.exprs(items)),
            Expr::Repeat { value, len } => Expr::Repeat {
                value: self.boxed(value),
                len: *len,
            },
            Expr::Tuple(items) => Expr::Tuple(self.exprs(items)),
            Expr::Len(e) => Expr::Len(self.boxed(e)),
            Expr::Unary { op, expr } => Expr::Unary {
                op: *op,
                expr: self.boxed(expr),
            },
            Expr::Binary { op, lhs, rhs } => Expr::Binary {
                op: *op,
                lhs: self.boxed(lhs),
                rhs: self.boxed(rhs),
            },
            Expr::Cast { expr, ty } => Expr::Cast {
                expr: self.boxed(expr),
                ty: *ty,
            },
            Expr::Call { callee, args } => Expr::Call {
                callee: *callee,
                args: self.exprs(args),
            },
            Expr::Math { func, ty, args } => Expr::Math {
                func: *func,
                ty: *ty,
                args: self.exprs(args),
            },
            Expr::Field { expr, name } => Expr::Field {
                expr: self.boxed(expr),
                name,
            },
            Expr::Index { base, index } => Expr::Index {
                base: self.boxed(base),
                index: self.boxed(index),
            },
            Expr::Index2 { base, row, col } => Expr::Index2 {
                base: self.boxed(base),
                row: self.boxed(row),
                col: self.boxed(col),
            },
            Expr::Index3 { base, offsets } => Expr::Index3 {
                base: self.boxed(base),
                offsets: offsets.map(|o| self.boxed(o)),
            },
            Expr::Struct { ty, fields } => Expr::Struct {
                ty: *ty,
                fields: Vec::leak(
                    fields
                        .iter()
                        .map(|f| FieldInit {
                            name: f.name,
                            value: self.expr(&f.value),
                        })
                        .collect(),
                ),
            },
            Expr::If { cond, then, els } => Expr::If {
                cond: self.boxed(cond),
                then: self.block(then),
                els: els.as_ref().map(|b| self.block(b)),
            },
            Expr::Block(b) => Expr::Block(self.block(b)),
        }
    }
}

#[cfg(test)]
#[allow(clippy::needless_range_loop)] // the functions under test index their arrays
mod tests {
    use super::tiled;
    use crate::codegen::{device_source_multi, Dialect};
    use crate::prelude::*;
    use crate::userfn::UserFn;

    #[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
    #[repr(C)]
    struct P {
        x: f32,
        m: f32,
    }

    #[userfn]
    fn pull(p: P, ps: &[P], #[uniform] n: u32) -> f32 {
        let mut s = 0.0f32;
        let m = n as usize;
        for j in 0..m {
            let q = ps[j];
            if q.m > 0.0 {
                s += (q.x - p.x) * ps[j].m;
            }
        }
        for k in 0..2 {
            s += k as f32;
        }
        s
    }

    #[userfn]
    fn offset_read(p: P, ps: &[P], #[uniform] n: u32) -> f32 {
        let mut s = 0.0f32;
        for j in 0..n as usize {
            s += ps[(j + 1) % (n as usize)].x * p.x;
        }
        s
    }

    #[userfn]
    fn per_element_bound(p: P, ps: &[P]) -> f32 {
        let mut s = 0.0f32;
        for j in 0..p.m as usize {
            s += ps[j].x;
        }
        s
    }

    #[userfn]
    fn early_exit(p: P, ps: &[P], #[uniform] n: u32) -> f32 {
        let mut s = 0.0f32;
        for j in 0..n as usize {
            if ps[j].x > p.x {
                break;
            }
            s += ps[j].m;
        }
        s
    }

    #[userfn]
    fn returns(p: P, ps: &[P], #[uniform] n: u32) -> f32 {
        if p.m < 0.0 {
            return 0.0;
        }
        let mut s = 0.0f32;
        for j in 0..n as usize {
            s += ps[j].m;
        }
        s
    }

    #[userfn]
    fn nested(p: P, ps: &[P], #[uniform] n: u32) -> f32 {
        let mut s = 0.0f32;
        if p.m > 0.0 {
            for j in 0..n as usize {
                s += ps[j].m;
            }
        }
        s
    }

    #[userfn]
    fn inner_break(p: P, ps: &[P], #[uniform] n: u32) -> f32 {
        let mut s = 0.0f32;
        for j in 0..n as usize {
            let mut k = 0;
            while k < 10 {
                if k > 3 {
                    break;
                }
                k += 1;
            }
            s += ps[j].m * k as f32 + p.x;
        }
        s
    }

    #[userfn]
    fn shadowed(p: P, ps: &[P], #[uniform] n: u32) -> f32 {
        let mut s = 0.0f32;
        for j in 0..n as usize {
            s += ps[j].x;
            for j in 0..2 {
                s += ps[j].m * p.x;
            }
        }
        s
    }

    /// n-body as users write it: a `u32` loop variable cast at the read.
    #[userfn]
    fn cast_index(p: P, ps: &[P], #[uniform] n: u32) -> f32 {
        let mut s = 0.0f32;
        for j in 0..n {
            let q = ps[j as usize];
            if j != n {
                s += (q.x - p.x) * ps[j as usize].m;
            }
        }
        s
    }

    fn tiles<F: UserFn>(_: F) -> bool {
        tiled::<P>(F::definition()).is_some()
    }

    #[test]
    fn loops_that_read_only_the_loop_element_are_tiled() {
        assert!(tiles(pull));
        assert!(tiles(inner_break));
        assert!(tiles(cast_index));
        let t = tiled::<P>(<cast_index as UserFn>::definition()).unwrap();
        let src = device_source_multi(&[t.def, t.stage, t.get], Dialect::OpenCl).unwrap();
        let body = src.source.split("skel_fn_cast_index(").nth(1).unwrap();
        assert_eq!(
            body.matches("skel_fn_skel_tile_get(").count(),
            2,
            "{}",
            src.source
        );
        let t = tiled::<P>(<pull as UserFn>::definition()).unwrap();
        let src = device_source_multi(&[t.def, t.stage, t.get], Dialect::Cuda).unwrap();
        let body = src.source.split("skel_fn_pull(").nth(1).unwrap();
        // both reads of ps[j] come from the tile, the second loop is left alone
        assert_eq!(
            body.matches("skel_fn_skel_tile_get(").count(),
            2,
            "{}",
            src.source
        );
        assert_eq!(body.matches("skel_fn_skel_tile_stage(").count(), 1);
        assert_eq!(src.entries[1], "skel_fn_skel_tile_stage");
    }

    #[test]
    fn other_loops_keep_the_generic_launch() {
        assert!(!tiles(offset_read));
        assert!(!tiles(per_element_bound));
        assert!(!tiles(early_exit));
        assert!(!tiles(returns));
        assert!(!tiles(nested));
        // the inner `j` is another variable: its reads are not the tile's
        assert!(!tiles(shadowed));
    }
}
