//! Which `&[T]` parameters a C function takes the length of.

use super::key;
use crate::codegen::ir::{self, Block, Expr, FnDef, ParamKind};

/// Whether node `e` reads `.len()` of parameter `name`, indexes it (an index is clamped
/// into the length in the unchecked variant, checked against it in the checked one) or
/// passes `name` to a callee that needs its length.
fn node_uses_len(e: &'static Expr, name: &str, seen: &mut Vec<usize>) -> bool {
    match e {
        Expr::Len(b) => matches!(b, Expr::Var(n) if *n == name),
        Expr::Index { base, .. } => matches!(&**base, Expr::Var(n) if *n == name),
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
pub(super) fn visit_block(b: &'static Block, f: &mut dyn FnMut(&'static Expr)) {
    ir::visit_block(b, &mut |node| {
        if let ir::Node::Expr(e) = node {
            f(e)
        }
    });
}

pub(super) fn array_len_param_of(def: &'static FnDef, name: &str, seen: &mut Vec<usize>) -> bool {
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
/// when the body (or a user function it passes the array to) reads `.len()` of it or
/// indexes it (every index stays inside the array, in every mode). Then
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
/// #[userfn]
/// fn pass(t: &[f32], x: f32) -> f32 { x }
/// assert!(skel::plumbing::codegen::array_len_param(last::definition()));
/// assert!(skel::plumbing::codegen::array_len_param(first::definition()));
/// assert!(!skel::plumbing::codegen::array_len_param(pass::definition()));
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
