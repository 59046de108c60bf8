//! The Rust side of a user function computes what the generated C computes: integer
//! `+ - *`, negation, shifts, `pow` and `abs` wrap in every build (a debug build would
//! panic where a GPU wraps), and an index out of range or an integer division by zero is a
//! `skel::check::Fault` naming the function (which a skeleton call returns as
//! `Err(Error::UserFunction)`), not an anonymous panic.

use proc_macro2::TokenStream;
use quote::quote;
use syn::visit_mut::VisitMut;
use syn::{BinOp, Expr, UnOp};

pub struct WrapRewriter {
    /// The user function's name, reported by its faults.
    pub function: String,
    /// Window and `Mat` parameters: their `Index` impls check themselves.
    pub windows: Vec<syn::Ident>,
}

fn parse(ts: TokenStream) -> Expr {
    syn::parse2(ts).expect("the rewrite of a valid expression is an expression")
}

const INTS: &[&str] = &[
    "i8", "i16", "i32", "i64", "isize", "u8", "u16", "u32", "u64", "usize",
];

impl WrapRewriter {
    fn is_window(&self, e: &Expr) -> bool {
        matches!(e, Expr::Path(p) if p.qself.is_none()
            && self.windows.iter().any(|w| p.path.is_ident(w)))
    }

    fn rewrite(&self, e: &Expr) -> Option<Expr> {
        let f = &self.function;
        let rt = quote!(::skel::check);
        match e {
            // A local array: its size is checked against the limit when it compiles.
            Expr::Repeat(r) => {
                let (v, len) = (&r.expr, &r.len);
                let span = syn::spanned::Spanned::span(r);
                // A literal or a constant's name is a const argument as it is; anything
                // else needs braces.
                let len = match &**len {
                    Expr::Lit(_) | Expr::Path(_) => quote!(#len),
                    _ => quote!({ #len }),
                };
                // The path spanned at the array too: a too large one is reported there.
                Some(parse(
                    quote::quote_spanned!(span=> ::skel::check::local_array::<_, #len>(#v)),
                ))
            }
            Expr::Binary(b) => {
                let (l, r) = (&b.left, &b.right);
                let call = |method: &str| {
                    let m = syn::Ident::new(method, proc_macro2::Span::call_site());
                    match method {
                        "div" | "rem" => quote!(#rt::#m(#f, #l, #r)),
                        "w_shl" | "w_shr" => quote!(#rt::Shift::#m(#l, #r)),
                        _ => quote!(#rt::Wrap::#m(#l, #r)),
                    }
                };
                let (method, assign) = match b.op {
                    BinOp::Add(_) => ("w_add", false),
                    BinOp::Sub(_) => ("w_sub", false),
                    BinOp::Mul(_) => ("w_mul", false),
                    BinOp::Div(_) => ("div", false),
                    BinOp::Rem(_) => ("rem", false),
                    BinOp::Shl(_) => ("w_shl", false),
                    BinOp::Shr(_) => ("w_shr", false),
                    BinOp::AddAssign(_) => ("w_add", true),
                    BinOp::SubAssign(_) => ("w_sub", true),
                    BinOp::MulAssign(_) => ("w_mul", true),
                    BinOp::DivAssign(_) => ("div", true),
                    BinOp::RemAssign(_) => ("rem", true),
                    BinOp::ShlAssign(_) => ("w_shl", true),
                    BinOp::ShrAssign(_) => ("w_shr", true),
                    _ => return None,
                };
                let v = call(method);
                // The place is a variable, field or (checked) index: reading it twice is
                // what `+=` does.
                Some(parse(if assign { quote!(#l = #v) } else { v }))
            }
            Expr::Unary(u) if matches!(u.op, UnOp::Neg(_)) => {
                // `-1`, `-2147483648`: literals keep their meaning (and their range check)
                if matches!(&*u.expr, Expr::Lit(_)) {
                    return None;
                }
                let x = &u.expr;
                Some(parse(quote!(#rt::Wrap::w_neg(#x))))
            }
            // `(row, col)` indexes a `Mat` or a 2D window, whose `Index` checks itself
            Expr::Index(ix)
                if !self.is_window(&ix.expr) && !matches!(&*ix.index, Expr::Tuple(_)) =>
            {
                let (base, i) = (&ix.expr, &ix.index);
                Some(parse(quote!(#base[#rt::index(#f, #base.len(), #i)])))
            }
            Expr::MethodCall(m) if m.turbofish.is_none() => {
                let recv = &m.receiver;
                let args = m.args.iter();
                match (m.method.to_string().as_str(), m.args.len()) {
                    ("pow", 1) => Some(parse(quote!(#rt::Pow::w_pow(#recv, #(#args),*)))),
                    ("abs", 0) => Some(parse(quote!(#rt::Wrap::w_abs(#recv)))),
                    // Rust's `clamp` panics on `min > max` (and a NaN bound): a fault
                    // naming this function, as on every backend's checked kernels
                    ("min", 1) => Some(parse(quote!(#rt::MinMax::w_min(#recv, #(#args),*)))),
                    ("max", 1) => Some(parse(quote!(#rt::MinMax::w_max(#recv, #(#args),*)))),
                    ("clamp", 2) => Some(parse(quote!(#rt::clamp(#f, #recv, #(#args),*)))),
                    // `powf(1, NaN)` is 1 on every backend (glibc: NaN for a signaling one)
                    ("powf", 1) => Some(parse(quote!(#rt::Powf::w_powf(#recv, #(#args),*)))),
                    _ => None,
                }
            }
            Expr::Call(c) => {
                // `i32::pow(x, e)`, `i64::abs(x)`: the type is in the path
                let Expr::Path(p) = &*c.func else { return None };
                let segs = crate::body::path_names(&p.path);
                let [ty, func] = segs.as_slice() else {
                    return None;
                };
                let is_float = ty == "f32" || ty == "f64";
                if (is_float || INTS.contains(&ty.as_str())) && func == "clamp" {
                    let ty = syn::Ident::new(ty, proc_macro2::Span::call_site());
                    let args = c.args.iter();
                    return Some(parse(quote!(#rt::clamp::<#ty>(#f, #(#args),*))));
                }
                if is_float || INTS.contains(&ty.as_str()) {
                    let m = match func.as_str() {
                        "min" => Some(quote!(w_min)),
                        "max" => Some(quote!(w_max)),
                        _ => None,
                    };
                    if let Some(m) = m {
                        let ty = syn::Ident::new(ty, proc_macro2::Span::call_site());
                        let args = c.args.iter();
                        return Some(parse(quote!(<#ty as #rt::MinMax>::#m(#(#args),*))));
                    }
                    if is_float && func == "powf" {
                        let ty = syn::Ident::new(ty, proc_macro2::Span::call_site());
                        let args = c.args.iter();
                        return Some(parse(quote!(<#ty as #rt::Powf>::w_powf(#(#args),*))));
                    }
                }
                if !INTS.contains(&ty.as_str()) {
                    return None;
                }
                let wrapped = match func.as_str() {
                    "pow" => "wrapping_pow",
                    "abs" => "wrapping_abs",
                    _ => return None,
                };
                let (ty, wrapped) = (
                    syn::Ident::new(ty, proc_macro2::Span::call_site()),
                    syn::Ident::new(wrapped, proc_macro2::Span::call_site()),
                );
                let args = c.args.iter();
                Some(parse(quote!(#ty::#wrapped(#(#args),*))))
            }
            _ => None,
        }
    }
}

impl VisitMut for WrapRewriter {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        syn::visit_mut::visit_expr_mut(self, e);
        if let Some(new) = self.rewrite(e) {
            *e = new;
        }
    }

    // Array lengths are constant expressions: trait calls cannot go there, and a constant
    // that overflows is already a compile error.
    fn visit_expr_repeat_mut(&mut self, r: &mut syn::ExprRepeat) {
        self.visit_expr_mut(&mut r.expr);
    }

    fn visit_type_mut(&mut self, _: &mut syn::Type) {}

    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}
