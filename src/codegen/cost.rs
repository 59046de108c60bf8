//! How much work a user function does per element, read from its typed tree: the GPU
//! backends choose a kernel's launch shape from it.
//!
//! - [`Cost::Memory`]: straight-line code of a few cheap operations. The kernel is limited
//!   by memory bandwidth, so it handles several consecutive elements per thread with wide
//!   loads and stores (CUDA's vectorised Map).
//! - [`Cost::Compute`]: a loop (`for`, `while`), or far more straight-line work than
//!   memory traffic (see [`COMPUTE_WEIGHT`]). One element per thread and as many
//!   threads as there are elements: a loop whose trip count varies per element (Mandelbrot)
//!   then runs once per thread instead of several times in series, and a call of a few
//!   thousand heavy elements still spreads over every multiprocessor.
//! - [`Cost::AllPairs`]: a loop over the `&[T]` parameter of a MapArray whose bounds are
//!   the same for every element (n-body, all-pairs distances): every thread of a block
//!   reads the same array element at the same time, so the array is read through the
//!   read-only data path, where such reads are served once per warp.
//!
//! Calls to other user functions count as their bodies (the calls are inlined in device
//! code). The weights of [`op_weight`] and the threshold [`COMPUTE_WEIGHT`] come from timing
//! both launch shapes on functions of growing weight (`benches/kernels.rs` with
//! `SKEL_LAUNCH=memory|compute`, which forces a class).

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, OnceLock, PoisonError};

use super::ir::{
    visit_block, visit_expr, BinOp, Block, Expr, FnDef, MathFn, Node, ParamKind, Stmt,
};

/// The launch class of a user function (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cost {
    /// Few cheap operations per element: vectorised, several elements per thread.
    Memory,
    /// Loops or heavy arithmetic: one element per thread.
    Compute,
    /// A loop over the whole shared array, the same for every element.
    AllPairs,
}

/// Straight-line weight from which a loop-free function counts as compute-bound: about
/// 32 transcendental calls per element. Measured (H100, both classes forced): a chain of eight
/// (weight ~70) ran 10% faster vectorised at 2^24 elements and as fast at 2^16 and 2^20,
/// so lighter straight-line code stays vectorised.
pub(crate) const COMPUTE_WEIGHT: u32 = 256;

/// The launch class of `def`, worked out once per function: every backend asks on every
/// call, and then pays a lookup, not a walk of the tree.
pub(crate) fn classify(def: &'static FnDef) -> Cost {
    type Known = Mutex<HashMap<usize, Cost>>;
    static KNOWN: OnceLock<Known> = OnceLock::new();
    let known = KNOWN.get_or_init(Default::default);
    let key = def as *const FnDef as usize;
    let lock = || known.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(&c) = lock().get(&key) {
        return c;
    }
    let class = walk_class(def);
    lock().insert(key, class);
    class
}

/// [`classify`] without the memory.
fn walk_class(def: &'static FnDef) -> Cost {
    let mut walk = Walk::default();
    weigh(&def.body, &mut walk, &mut Vec::new());
    let arrays: Vec<&str> = def
        .params
        .iter()
        .filter(|p| p.kind == ParamKind::Array)
        .map(|p| p.name)
        .collect();
    let varying = varying(def);
    let mut all_pairs = false;
    visit_block(&def.body, &mut |node| {
        if let Node::Stmt(s) = node {
            all_pairs |=
                same_for_all(s, &varying) && indexes(loop_body(s), &arrays, &mut Vec::new());
        }
    });
    if all_pairs {
        Cost::AllPairs
    } else if walk.loops || walk.weight >= COMPUTE_WEIGHT {
        Cost::Compute
    } else {
        Cost::Memory
    }
}

/// The cost of one operation in the units of [`COMPUTE_WEIGHT`]: a cheap operation is 1,
/// a division or square root a few, a transcendental function about eight (what they cost
/// with IEEE-exact division and square root, as the kernels are compiled).
fn op_weight(f: MathFn) -> u32 {
    match f {
        MathFn::Abs
        | MathFn::Floor
        | MathFn::Ceil
        | MathFn::Round
        | MathFn::RoundTiesEven
        | MathFn::Min
        | MathFn::Max
        | MathFn::MulAdd
        | MathFn::Trunc
        | MathFn::Fract
        | MathFn::Clamp
        | MathFn::Signum
        | MathFn::Copysign
        | MathFn::IsNan
        | MathFn::IsFinite
        | MathFn::WrappingAdd
        | MathFn::WrappingSub
        | MathFn::WrappingMul
        | MathFn::RotateLeft
        | MathFn::RotateRight
        | MathFn::CountOnes
        | MathFn::LeadingZeros
        | MathFn::TrailingZeros => 1,
        MathFn::Sqrt | MathFn::Pow => 4,
        MathFn::Exp | MathFn::Exp2 | MathFn::Ln | MathFn::Log2 | MathFn::Log10 => 8,
        MathFn::Sin | MathFn::Cos | MathFn::Powi | MathFn::Cbrt | MathFn::Hypot => 8,
        MathFn::Sinh | MathFn::Cosh | MathFn::Tanh => 8,
        MathFn::Tan | MathFn::Powf | MathFn::Asin | MathFn::Acos | MathFn::Atan | MathFn::Atan2 => {
            16
        }
    }
}

/// Straight-line weight and whether any loop runs, summed over `b` and its callees.
/// `stack` holds the callees being walked: a recursive call (which the code generator
/// rejects anyway) is not followed twice.
fn weigh(b: &'static Block, walk: &mut Walk, stack: &mut Vec<*const FnDef>) {
    visit_block(b, &mut |node| match node {
        Node::Stmt(Stmt::For { .. } | Stmt::While { .. } | Stmt::Loop { .. }) => walk.loops = true,
        Node::Stmt(Stmt::Assign { op: Some(_), .. }) => walk.weight += 1,
        Node::Stmt(_) => {}
        Node::Expr(e) => {
            walk.weight += match e {
                Expr::Binary {
                    op: BinOp::Div | BinOp::Rem,
                    ..
                } => 4,
                Expr::Math { func, .. } => op_weight(*func),
                Expr::Unary { .. }
                | Expr::Cast { .. }
                | Expr::Field { .. }
                | Expr::Binary { .. }
                | Expr::Index { .. }
                | Expr::Index2 { .. }
                | Expr::Index3 { .. }
                | Expr::If { .. } => 1,
                _ => 0,
            };
            if let Expr::Call { callee, .. } = e {
                let def: &'static FnDef = callee();
                let key = def as *const FnDef;
                if !stack.contains(&key) {
                    stack.push(key);
                    weigh(&def.body, walk, stack);
                    stack.pop();
                }
            }
        }
    });
}

/// Straight-line weight and whether any loop runs.
#[derive(Default)]
struct Walk {
    weight: u32,
    loops: bool,
}

/// The names whose value may differ between the elements of one call: the index and
/// element parameters, every loop variable, every local assigned after its `let` (anywhere:
/// its value may then depend on a branch taken per element) and every local initialised
/// from one of those. Conservative: a name counts everywhere if it does anywhere.
pub(crate) fn varying(def: &'static FnDef) -> HashSet<&'static str> {
    let mut names: HashSet<&'static str> = def
        .params
        .iter()
        .filter(|p| {
            matches!(
                p.kind,
                ParamKind::Index | ParamKind::IndexRow | ParamKind::IndexCol | ParamKind::Elem
            )
        })
        .map(|p| p.name)
        .collect();
    let mut lets: Vec<(&'static str, &'static Expr)> = Vec::new();
    visit_block(&def.body, &mut |node| match node {
        Node::Stmt(Stmt::Assign { place, .. }) => names.extend(root_var(place)),
        Node::Stmt(Stmt::For { var, .. }) => {
            names.insert(var);
        }
        Node::Stmt(Stmt::Let { name, init, .. }) => match init {
            Some(e) => lets.push((name, e)),
            None => {
                names.insert(name);
            }
        },
        _ => {}
    });
    loop {
        let before = names.len();
        for (name, init) in &lets {
            if mentions(init, &names) {
                names.insert(name);
            }
        }
        if names.len() == before {
            return names;
        }
    }
}

/// Whether `s` is a `for` loop whose bounds are the same for every element.
pub(crate) fn same_for_all(s: &'static Stmt, varying: &HashSet<&'static str>) -> bool {
    matches!(s, Stmt::For { start, end, .. } if !mentions(start, varying) && !mentions(end, varying))
}

/// The body of a loop statement (an empty block for other statements).
fn loop_body(s: &'static Stmt) -> &'static Block {
    const EMPTY: Block = Block {
        stmts: &[],
        tail: None,
    };
    match s {
        Stmt::For { body, .. } | Stmt::While { body, .. } => body,
        _ => &EMPTY,
    }
}

/// The local a place expression (`x`, `x.f`, `x.f.g`) assigns to.
fn root_var(e: &'static Expr) -> Option<&'static str> {
    match e {
        Expr::Var(name) => Some(name),
        Expr::Field { expr, .. } | Expr::Index { base: expr, .. } => root_var(expr),
        _ => None,
    }
}

/// Whether `e` reads any of `names`.
pub(crate) fn mentions(e: &'static Expr, names: &HashSet<&'static str>) -> bool {
    let mut found = false;
    visit_expr(e, &mut |x| {
        if let Node::Expr(Expr::Var(v)) = x {
            found |= names.contains(v);
        }
    });
    found
}

/// Whether `b` (or a user function it calls with one of `arrays`) indexes one of `arrays`.
fn indexes(b: &'static Block, arrays: &[&str], stack: &mut Vec<*const FnDef>) -> bool {
    let mut found = false;
    visit_block(b, &mut |e| match e {
        Node::Expr(Expr::Index { base, .. }) => {
            found |= matches!(base, Expr::Var(v) if arrays.contains(v));
        }
        Node::Expr(Expr::Call { callee, args }) => {
            let def: &'static FnDef = callee();
            let key = def as *const FnDef;
            // The callee's names for the arrays passed to it.
            let passed: Vec<&str> = def
                .params
                .iter()
                .zip(args.iter())
                .filter(|(p, a)| {
                    p.kind == ParamKind::Array && matches!(a, Expr::Var(v) if arrays.contains(v))
                })
                .map(|(p, _)| p.name)
                .collect();
            if !passed.is_empty() && !stack.contains(&key) {
                stack.push(key);
                found |= indexes(&def.body, &passed, stack);
                stack.pop();
            }
        }
        _ => {}
    });
    found
}

#[cfg(test)]
#[allow(clippy::needless_range_loop)] // the functions under test index their arrays
mod tests {
    use super::{classify, Cost};
    use crate::prelude::*;
    use crate::userfn::UserFn;

    #[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
    #[repr(C)]
    struct Body {
        x: f32,
        y: f32,
        m: f32,
    }

    #[userfn]
    fn add(a: f32, b: f32) -> f32 {
        a + b
    }

    #[userfn]
    fn lerp(a: f32, b: f32, #[uniform] t: f32) -> f32 {
        let d = b - a;
        a + d * t
    }

    #[userfn]
    fn one_sin(x: f32) -> f32 {
        x.sin() * 0.5
    }

    #[userfn]
    fn trig_chain(x: f32) -> f32 {
        let a = x.sin().exp();
        let b = (a * x).cos().sqrt();
        let c = f32::ln(b + 2.0).sin();
        (a + b + c).exp().cos()
    }

    #[userfn]
    fn very_heavy(x: f32) -> f32 {
        let a = x.sin().cos().exp().sin().cos().exp().sin().cos();
        let b = a.sin().cos().exp().sin().cos().exp().sin().cos();
        let c = b.sin().cos().exp().sin().cos().exp().sin().cos();
        c.sin().cos().exp().sin().cos().exp().sin().cos()
    }

    #[userfn]
    fn mandel(#[index] (row, col): (usize, usize), #[uniform] iters: u32) -> u32 {
        let cr = col as f32 * 0.001 - 2.0;
        let ci = row as f32 * 0.001 - 1.0;
        let mut zr = 0.0f32;
        let mut zi = 0.0f32;
        let mut k = 0u32;
        while k < iters && zr * zr + zi * zi < 4.0 {
            let t = zr * zr - zi * zi + cr;
            zi = 2.0 * zr * zi + ci;
            zr = t;
            k += 1;
        }
        k
    }

    #[userfn]
    fn power(x: f32, #[uniform] n: u32) -> f32 {
        let mut p = 1.0f32;
        for _k in 0..n {
            p *= x;
        }
        p
    }

    #[userfn]
    fn heavy_helper(x: f32) -> f32 {
        let mut s = x;
        for _k in 0..8 {
            s = s * 0.5 + 1.0;
        }
        s
    }

    #[userfn]
    fn calls_heavy(a: f32, b: f32) -> f32 {
        heavy_helper(a) + b
    }

    #[userfn]
    fn lookup(table: &[f32], i: u32) -> f32 {
        table[i as usize]
    }

    #[userfn]
    fn accel(p: Body, bodies: &[Body], #[uniform] n: u32) -> Body {
        let mut ax = 0.0f32;
        let mut ay = 0.0f32;
        for j in 0..n as usize {
            let q = bodies[j];
            let dx = q.x - p.x;
            let dy = q.y - p.y;
            let r2 = dx * dx + dy * dy + 0.01;
            let inv = 1.0 / (r2 * r2.sqrt());
            ax += q.m * dx * inv;
            ay += q.m * dy * inv;
        }
        Body {
            x: ax,
            y: ay,
            m: p.m,
        }
    }

    #[userfn]
    fn pull(p: Body, q: Body) -> f32 {
        (q.x - p.x) * q.m
    }

    #[userfn]
    fn sum_pull(p: Body, bodies: &[Body]) -> f32 {
        pull(p, bodies[0])
    }

    #[userfn]
    fn total_pull(p: Body, bodies: &[Body], #[uniform] n: u32) -> f32 {
        let mut s = 0.0f32;
        let m = n as usize;
        for j in 0..m {
            s += first_pull(p, bodies, j as u32);
        }
        s
    }

    #[userfn]
    fn first_pull(p: Body, bodies: &[Body], j: u32) -> f32 {
        pull(p, bodies[j as usize])
    }

    #[userfn]
    fn window_sum(i: u32, table: &[f32], #[uniform] w: u32) -> f32 {
        // the run of the array read depends on the element: not all-pairs
        let mut s = 0.0f32;
        for j in i..i + w {
            s += table[j as usize];
        }
        s
    }

    #[userfn]
    fn bounded_by_local(i: u32, table: &[f32]) -> f32 {
        let end = i % 7;
        let mut s = 0.0f32;
        for j in 0..end {
            s += table[j as usize];
        }
        s
    }

    #[userfn]
    fn loop_without_array(x: f32, table: &[f32], #[uniform] n: u32) -> f32 {
        let mut s = table[0];
        for _k in 0..n {
            s *= x;
        }
        s
    }

    fn class<F: UserFn>(_: F) -> Cost {
        classify(F::definition())
    }

    #[test]
    fn cheap_straight_line_code_is_memory_bound() {
        assert_eq!(class(add), Cost::Memory);
        assert_eq!(class(lerp), Cost::Memory);
        assert_eq!(class(one_sin), Cost::Memory);
        assert_eq!(class(trig_chain), Cost::Memory);
        assert_eq!(class(lookup), Cost::Memory);
        assert_eq!(class(sum_pull), Cost::Memory);
    }

    #[test]
    fn loops_and_heavy_math_are_compute_bound() {
        assert_eq!(class(very_heavy), Cost::Compute);
        assert_eq!(class(mandel), Cost::Compute);
        assert_eq!(class(power), Cost::Compute);
        // the loop is in a callee
        assert_eq!(class(calls_heavy), Cost::Compute);
    }

    #[test]
    fn a_loop_over_the_whole_array_is_all_pairs() {
        assert_eq!(class(accel), Cost::AllPairs);
        // the array is indexed in a callee it is passed to, bounds through a local
        assert_eq!(class(total_pull), Cost::AllPairs);
    }

    #[test]
    fn loops_whose_run_depends_on_the_element_are_not_all_pairs() {
        assert_eq!(class(window_sum), Cost::Compute);
        assert_eq!(class(bounded_by_local), Cost::Compute);
        assert_eq!(class(loop_without_array), Cost::Compute);
    }
}
