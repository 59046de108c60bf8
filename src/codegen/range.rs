//! Indices that are in range by construction, so that the generated C reads them without
//! the clamp (unchecked) or the check (checked) every other index gets.
//!
//! One pattern, the common one: the variable of a loop `for j in a..x.len()` (or
//! `a..N` with a constant `N`) used as the index of `x` (of an array of at least `N`
//! elements), where `a` is an integer literal, the loop's body neither assigns `j` nor
//! binds `j` or `x` again, and the range is exclusive. Every value `j` takes is then below
//! the length of `x`: the bound is evaluated once, before the loop, and neither a `&[T]`
//! parameter's nor an array's length can change. Anything else keeps its clamp.

use super::ir::{visit_block, Block, Expr, Node, Stmt};

/// What a proven loop variable is below.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bound {
    /// `x.len()` of the variable named.
    Len(&'static str),
    /// An integer constant.
    Const(u128),
}

/// The loops around the statement being emitted, innermost last: each loop variable with
/// its proven bound, or none.
#[derive(Debug, Default)]
pub(crate) struct Ranges {
    loops: Vec<(&'static str, Option<Bound>)>,
}

impl Ranges {
    /// Enters the body of `for var in start..end` (`..=` when `inclusive`).
    pub(crate) fn enter(
        &mut self,
        var: &'static str,
        start: &Expr,
        end: &Expr,
        inclusive: bool,
        body: &Block,
    ) {
        self.loops
            .push((var, loop_bound(var, start, end, inclusive, body)));
    }

    /// Leaves the innermost loop entered.
    pub(crate) fn leave(&mut self) {
        self.loops.pop();
    }

    /// Whether `base[index]` is in range: `index` is the variable of an enclosing loop
    /// whose bound is `base.len()`, or a constant no larger than `array_len` (the length
    /// of `base`'s array type, when it is a local array).
    pub(crate) fn proves(&self, base: &Expr, index: &Expr, array_len: Option<usize>) -> bool {
        let Expr::Var(i) = index else {
            return false;
        };
        // the innermost loop of that name: an inner one hides an outer one
        let Some((_, bound)) = self.loops.iter().rev().find(|(v, _)| v == i) else {
            return false;
        };
        match (bound, base) {
            (Some(Bound::Len(x)), Expr::Var(b)) => x == b,
            (Some(Bound::Const(n)), _) => array_len.is_some_and(|len| *n <= len as u128),
            _ => false,
        }
    }
}

/// The bound every value of the loop variable is below, if the loop proves one.
fn loop_bound(
    var: &'static str,
    start: &Expr,
    end: &Expr,
    inclusive: bool,
    body: &Block,
) -> Option<Bound> {
    if inclusive || !matches!(start, Expr::Int { .. }) {
        return None;
    }
    let bound = match end {
        Expr::Len(Expr::Var(x)) => Bound::Len(x),
        Expr::Int { value, .. } => Bound::Const(*value),
        _ => return None,
    };
    let mut names = vec![var];
    if let Bound::Len(x) = bound {
        names.push(x);
    }
    (!rebinds(body, &names) && !assigns(body, var)).then_some(bound)
}

/// Whether `body` binds any of `names` again (`let`, a tuple `let`, a loop variable).
fn rebinds(body: &Block, names: &[&str]) -> bool {
    let mut found = false;
    visit_block(body, &mut |n| {
        if let Node::Stmt(s) = n {
            found |= match s {
                Stmt::Let { name, .. } => names.contains(name),
                Stmt::LetTuple { names: bound, .. } => bound.iter().any(|(b, _)| names.contains(b)),
                Stmt::For { var, .. } => names.contains(var),
                _ => false,
            };
        }
    });
    found
}

/// Whether `body` assigns to the variable `var` (`for mut j` .. `j += 1`).
fn assigns(body: &Block, var: &str) -> bool {
    let mut found = false;
    visit_block(body, &mut |n| {
        if let Node::Stmt(Stmt::Assign {
            place: Expr::Var(v),
            ..
        }) = n
        {
            found |= *v == var;
        }
    });
    found
}

#[cfg(test)]
mod tests {
    use super::Ranges;
    use crate::codegen::ir::{Block, Expr, FnDef, Stmt};
    use crate::prelude::*;
    use crate::userfn::UserFn;

    /// Every `base[index]` the body reads, with whether the loops around it prove it in
    /// range (`array_len` 4 for any base that is not a parameter, as for `[T; 4]`).
    fn proven(def: &'static FnDef) -> Vec<(String, bool)> {
        fn block(b: &'static Block, r: &mut Ranges, out: &mut Vec<(String, bool)>) {
            for s in b.stmts {
                match s {
                    Stmt::For {
                        var,
                        start,
                        end,
                        inclusive,
                        body,
                    } => {
                        r.enter(var, start, end, *inclusive, body);
                        block(body, r, out);
                        r.leave();
                    }
                    Stmt::Let { init: Some(e), .. } | Stmt::Expr(e) => expr(e, r, out),
                    Stmt::Assign { place, value, .. } => {
                        expr(place, r, out);
                        expr(value, r, out);
                    }
                    Stmt::While { body, .. } | Stmt::Loop { body } => block(body, r, out),
                    _ => {}
                }
            }
            if let Some(t) = b.tail {
                expr(t, r, out);
            }
        }
        fn expr(e: &'static Expr, r: &mut Ranges, out: &mut Vec<(String, bool)>) {
            match e {
                Expr::Index { base, index } => {
                    let name = match (base, index) {
                        (Expr::Var(b), Expr::Var(i)) => format!("{b}[{i}]"),
                        _ => "other".into(),
                    };
                    let arr = (!matches!(base, Expr::Var("t"))).then_some(4);
                    out.push((name, r.proves(base, index, arr)));
                    expr(index, r, out);
                }
                Expr::Binary { lhs, rhs, .. } => {
                    expr(lhs, r, out);
                    expr(rhs, r, out);
                }
                Expr::Cast { expr: x, .. } | Expr::Unary { expr: x, .. } => expr(x, r, out),
                Expr::If { then, els, .. } => {
                    block(then, r, out);
                    if let Some(b) = els {
                        block(b, r, out);
                    }
                }
                Expr::Block(b) => block(b, r, out),
                _ => {}
            }
        }
        let mut out = Vec::new();
        block(&def.body, &mut Ranges::default(), &mut out);
        out
    }

    fn of<F: UserFn>(_: F) -> Vec<(String, bool)> {
        proven(F::definition())
    }

    fn pairs(v: &[(&str, bool)]) -> Vec<(String, bool)> {
        v.iter().map(|(s, b)| (s.to_string(), *b)).collect()
    }

    #[userfn]
    fn over_len(#[index] i: usize, t: &[f32]) -> f32 {
        let mut s = t[i];
        for j in 0..t.len() {
            s += t[j];
            if s > 1.0 {
                s -= t[j];
            }
        }
        for k in 1..t.len() {
            s += t[k];
        }
        s
    }

    #[userfn]
    fn over_array(x: u32) -> u32 {
        let mut a = [0u32; 4];
        for j in 0..a.len() {
            a[j] = x;
        }
        for j in 0..4 {
            a[j] += 1;
        }
        for j in 0..3 {
            a[j] += 1;
        }
        a[0]
    }

    #[test]
    fn a_loop_over_the_length_proves_its_variable() {
        assert_eq!(
            of(over_len),
            pairs(&[
                ("t[i]", false),
                ("t[j]", true),
                ("t[j]", true),
                ("t[k]", true)
            ])
        );
        assert_eq!(
            of(over_array),
            pairs(&[
                ("a[j]", true),
                ("a[j]", true),
                ("a[j]", true),
                ("other", false)
            ])
        );
    }

    #[userfn]
    fn sum_all(t: &[f32], x: f32) -> f32 {
        let mut s = x;
        for j in 0..t.len() {
            s += t[j];
        }
        s
    }

    #[userfn]
    fn sum_n(t: &[f32], x: f32, #[uniform] n: u32) -> f32 {
        let mut s = x;
        for j in 0..n as usize {
            s += t[j];
        }
        s
    }

    /// The generated C reads a proven index as it is, and clamps any other (unchecked).
    #[test]
    fn the_unchecked_source_clamps_only_what_is_not_proven() {
        use crate::codegen::{device_source, Dialect};
        for d in [Dialect::OpenCl, Dialect::Cuda] {
            let all = device_source::<sum_all>(d).unwrap().source;
            let n = device_source::<sum_n>(d).unwrap().source;
            assert!(!all.contains("skel_0idx("), "{all}");
            assert!(n.contains("skel_0idx("), "{n}");
        }
        // a loop over the array's length is as much all-pairs (tiled on CUDA) as one over
        // a uniform count
        use crate::codegen::cost::{classify, Cost};
        assert_eq!(classify(sum_all::definition()), Cost::AllPairs);
        assert_eq!(classify(sum_n::definition()), Cost::AllPairs);
    }

    #[userfn]
    fn not_proven(#[index] i: usize, t: &[f32], #[uniform] n: u32) -> f32 {
        let mut s = 0.0f32;
        // a bound that is not the array's length
        for j in 0..n as usize {
            s += t[j];
        }
        // inclusive
        for j in 0..=t.len() {
            s += t[j];
        }
        // a start that is not a literal (it could be anything, negative in a signed type)
        for j in i..t.len() {
            s += t[j];
        }
        // the variable assigned in the body
        for mut j in 0..t.len() {
            j += 1;
            s += t[j];
        }
        // the variable bound again
        for j in 0..t.len() {
            let j = j * 2;
            s += t[j];
        }
        // past the loop
        let mut j = 0usize;
        for k in 0..t.len() {
            j = k;
        }
        s += t[j];
        s
    }

    #[userfn]
    fn not_proven_array(x: u32) -> u32 {
        let mut a = [0u32; 4];
        // a constant above the array's length
        for j in 0..5 {
            a[j] = x;
        }
        // the array bound again inside the loop: another length
        let b = [1u32; 4];
        let mut s = 0u32;
        for j in 0..b.len() {
            let b = [2u32; 2];
            s += b[j];
        }
        // another array's length
        for j in 0..b.len() {
            s += a[j];
        }
        s
    }

    #[test]
    fn anything_else_keeps_its_clamp() {
        assert_eq!(
            of(not_proven),
            pairs(&[
                ("t[j]", false),
                ("t[j]", false),
                ("t[j]", false),
                ("t[j]", false),
                ("t[j]", false),
                ("t[j]", false),
            ])
        );
        // `a[j]` under `0..b.len()`: `b` is another array, proven only through the
        // constant bound (none here), so it keeps its clamp; `b[j]` is the inner `b`
        assert_eq!(
            of(not_proven_array),
            pairs(&[("a[j]", false), ("b[j]", false), ("a[j]", false)])
        );
    }
}
