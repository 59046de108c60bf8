//! The cpu form of a reduction loop nest (a matrix or matrix-vector product written as an
//! index Map, see skel's `codegen::loopnest`): for a body
//!
//! ```text
//! let mut acc = INIT; for l in 0..K { <one statement updating acc> } acc
//! ```
//!
//! (or `let mut l = 0; while l < K { ..; l += 1; }`) whose update reads only `acc`, the two
//! operands and uniforms, `ElementwiseFn::nest_block` runs skel's blocked loop
//! (`skel::plumbing::nest`) with the start `INIT` and the update as a closure of
//! `(acc, x, y)`, where `x` is the matrix read along the output row and `y` the other
//! operand. The library uses it only where its own recognition of the typed tree agrees;
//! here the shape is only matched far enough that the generated code compiles.

use proc_macro2::TokenStream;
use quote::quote;
use syn::visit::Visit;
use syn::visit_mut::VisitMut;
use syn::{Expr, Ident, Pat, Stmt, Type};

/// What the generator needs of the signature.
pub struct Sig<'a> {
    /// Row and column of a 2D index, or the 1D index and `None`.
    pub index: (Option<&'a Ident>, Option<&'a Ident>),
    /// `Mat<T>` parameters: name and element type.
    pub mats: Vec<(&'a Ident, &'a Type)>,
    /// `&[T]` parameters: name and element type.
    pub arrays: Vec<(&'a Ident, &'a Type)>,
    /// Every container parameter's name, in order.
    pub containers: Vec<&'a Ident>,
    /// Uniform names, in order.
    pub uniforms: Vec<&'a Ident>,
    /// The result type.
    pub out: &'a Type,
}

fn ident_of(p: &Pat) -> Option<&Ident> {
    match p {
        Pat::Ident(i) => Some(&i.ident),
        Pat::Type(t) => ident_of(&t.pat),
        _ => None,
    }
}

fn strip(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => strip(&p.expr),
        Expr::Cast(c) => strip(&c.expr),
        Expr::Group(g) => strip(&g.expr),
        _ => e,
    }
}

fn is_ident(e: &Expr, name: &Ident) -> bool {
    matches!(strip(e), Expr::Path(p) if p.qself.is_none() && p.path.is_ident(name))
}

fn is_zero(e: &Expr) -> bool {
    matches!(strip(e), Expr::Lit(l) if matches!(&l.lit, syn::Lit::Int(i) if i.base10_digits() == "0"))
}

/// The `nest_block` method for `block` (the body after skel's rewrites), or nothing.
pub fn nest_block(block: &syn::Block, sig: &Sig<'_>) -> Option<TokenStream> {
    let (acc, init, l, bound, step) = shape(block)?;
    // Which kernel: a 2D index is a matrix product; a 1D one reads its matrix along a row
    // (matrix-vector) or down a column (the transposed product).
    let mut step = step.clone();
    let mut reads = Reads {
        sig,
        x: None,
        y: None,
        row_read: None,
        bad: false,
    };
    reads.visit_stmt_mut(&mut step);
    if reads.bad {
        return None;
    }
    let (x, xty) = reads.x?;
    let (y, yty) = reads.y?;
    let free = |e: &dyn Fn(&mut Free)| {
        let mut f = Free {
            names: Vec::new(),
            bad: false,
        };
        e(&mut f);
        (f.names, f.bad)
    };
    let (names, bad) = free(&|f| f.visit_stmt(&step));
    let ok =
        |n: &Ident| n == acc || sig.uniforms.contains(&n) || n == "__skel_x" || n == "__skel_y";
    if bad || !names.iter().all(ok) {
        return None;
    }
    let (names, bad) = free(&|f| {
        f.visit_expr(init);
        f.visit_expr(bound);
    });
    if bad
        || !names
            .iter()
            .all(|n| sig.uniforms.contains(&n) || sig.containers.contains(&n))
        || names.iter().any(|n| n == l)
    {
        return None;
    }
    let (func, range) = match (sig.index, reads.row_read) {
        ((Some(_), Some(_)), _) => (quote!(gemm), quote!((__skel_first, __skel_n, __skel_cols))),
        ((Some(_), None), Some(true)) => (quote!(gemv), quote!((__skel_first, __skel_n))),
        ((Some(_), None), Some(false)) => (quote!(gemv_t), quote!((__skel_first, __skel_n))),
        _ => return None,
    };
    let (out, containers, uniforms) = (sig.out, &sig.containers, &sig.uniforms);
    Some(quote! {
        #[inline(always)]
        #[allow(unused_variables, unused_mut, unused_parens, unused_assignments, clippy::all)]
        fn nest_block(
            __skel_arrays: <<Self as ::skel::userfn::ElementwiseFn>::Arrays as ::skel::plumbing::ContainerArgs>::Refs<'_>,
            __skel_first: usize,
            __skel_n: usize,
            __skel_cols: usize,
            uniforms: &<Self as ::skel::userfn::ElementwiseFn>::Uniforms,
        ) -> ::core::option::Option<::std::vec::Vec<#out>> {
            let (#(#containers,)*) = __skel_arrays;
            let (#(#uniforms,)*) = *uniforms;
            let __skel_k: usize = (#bound) as usize;
            let __skel_init: #out = #init;
            ::skel::plumbing::nest::#func((#x, #y), __skel_k, #range, __skel_init, |__skel_acc: #out, __skel_x: #xty, __skel_y: #yty| -> #out {
                let mut #acc: #out = __skel_acc;
                #step
                #acc
            })
        }
    })
}

/// `(acc, INIT, l, K, the update statement)`.
fn shape(b: &syn::Block) -> Option<(&Ident, &Expr, &Ident, &Expr, &Stmt)> {
    let (first, rest) = b.stmts.split_first()?;
    let (acc, init) = match first {
        Stmt::Local(local) => (ident_of(&local.pat)?, &*local.init.as_ref()?.expr),
        _ => return None,
    };
    let (last, middle) = rest.split_last()?;
    if !matches!(last, Stmt::Expr(e, None) if is_ident(e, acc)) {
        return None;
    }
    match middle {
        [Stmt::Expr(Expr::ForLoop(f), _)] => {
            let l = ident_of(&f.pat)?;
            let Expr::Range(r) = &*f.expr else {
                return None;
            };
            if !matches!(r.limits, syn::RangeLimits::HalfOpen(_))
                || !r.start.as_deref().is_some_and(is_zero)
            {
                return None;
            }
            match &f.body.stmts[..] {
                [s] => Some((acc, init, l, r.end.as_deref()?, s)),
                _ => None,
            }
        }
        [Stmt::Local(local), Stmt::Expr(Expr::While(w), _)] => {
            let l = ident_of(&local.pat)?;
            if !local.init.as_ref().is_some_and(|i| is_zero(&i.expr)) {
                return None;
            }
            let Expr::Binary(c) = &*w.cond else {
                return None;
            };
            if !matches!(c.op, syn::BinOp::Lt(_)) || !is_ident(&c.left, l) {
                return None;
            }
            match &w.body.stmts[..] {
                [s, _] => Some((acc, init, l, &*c.right, s)),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Replaces the operand reads by `__skel_x` / `__skel_y`, noting their containers.
struct Reads<'s, 'a> {
    sig: &'s Sig<'a>,
    x: Option<(&'a Ident, &'a Type)>,
    y: Option<(&'a Ident, &'a Type)>,
    /// Whether a 1D index's matrix is read along its row (`m[(i, l)]`).
    row_read: Option<bool>,
    bad: bool,
}

impl<'a> Reads<'_, 'a> {
    fn note(&mut self, as_x: bool, c: (&'a Ident, &'a Type)) -> Ident {
        let slot = if as_x { &mut self.x } else { &mut self.y };
        match slot {
            Some((n, _)) if *n != c.0 => self.bad = true,
            _ => *slot = Some(c),
        }
        Ident::new(
            if as_x { "__skel_x" } else { "__skel_y" },
            proc_macro2::Span::call_site(),
        )
    }
}

impl VisitMut for Reads<'_, '_> {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        if let Expr::Index(ix) = e {
            let base = match strip(&ix.expr) {
                Expr::Path(p) => p.path.get_ident().cloned(),
                _ => None,
            };
            if let Some(base) = base {
                let sig = self.sig;
                if let Some(&m) = sig.mats.iter().find(|(n, _)| **n == base) {
                    let Expr::Tuple(t) = strip(&ix.index) else {
                        self.bad = true;
                        return;
                    };
                    let (Some(r), Some(c)) = (t.elems.first(), t.elems.iter().nth(1)) else {
                        self.bad = true;
                        return;
                    };
                    let as_x = match sig.index {
                        (Some(row), Some(_)) => is_ident(r, row),
                        (Some(i), None) => {
                            self.row_read = Some(is_ident(r, i) || !is_ident(c, i));
                            true
                        }
                        _ => false,
                    };
                    let id = self.note(as_x, m);
                    *e = syn::parse_quote!(#id);
                    return;
                }
                if let Some(&a) = sig.arrays.iter().find(|(n, _)| **n == base) {
                    let id = self.note(false, a);
                    *e = syn::parse_quote!(#id);
                    return;
                }
            }
        }
        syn::visit_mut::visit_expr_mut(self, e);
    }
}

/// The single-segment names an expression reads (not callees, not macro or closure
/// bodies, which make it `bad`).
struct Free {
    names: Vec<Ident>,
    bad: bool,
}

impl<'ast> Visit<'ast> for Free {
    fn visit_expr_path(&mut self, p: &'ast syn::ExprPath) {
        if let Some(i) = p.path.get_ident() {
            self.names.push(i.clone());
        }
    }
    fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
        if !matches!(&*c.func, Expr::Path(_)) {
            self.visit_expr(&c.func);
        }
        for a in &c.args {
            self.visit_expr(a);
        }
    }
    fn visit_expr_closure(&mut self, _: &'ast syn::ExprClosure) {
        self.bad = true;
    }
    fn visit_macro(&mut self, _: &'ast syn::Macro) {
        self.bad = true;
    }
    fn visit_local(&mut self, _: &'ast syn::Local) {
        self.bad = true;
    }
    fn visit_expr_block(&mut self, _: &'ast syn::ExprBlock) {
        self.bad = true;
    }
}
