//! The body of a user function -> tokens that build its `::skel::plumbing::codegen::FnDef`.
//!
//! This is where the supported Rust subset is enforced: anything else is a compile error at
//! its span. Types are not checked here (rustc checks the Rust body; the library's type
//! inference checks the tree when it translates it).

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{BinOp, Expr, ItemFn, Lit, Pat, RangeLimits, ReturnType, Stmt, Type, UnOp};

pub struct ParamDesc {
    pub kind: &'static str,
    pub names: Vec<syn::Ident>,
    pub ty: Type,
}

const PRIMS: &[(&str, &str)] = &[
    ("bool", "Bool"),
    ("i8", "I8"),
    ("i16", "I16"),
    ("i32", "I32"),
    ("i64", "I64"),
    ("isize", "Isize"),
    ("u8", "U8"),
    ("u16", "U16"),
    ("u32", "U32"),
    ("u64", "U64"),
    ("usize", "Usize"),
    ("f32", "F32"),
    ("f64", "F64"),
];

/// Math methods: Rust name, `MathFn` variant, arity (receiver included), and whether
/// floats / integers have it.
const MATH: &[(&str, &str, usize, bool, bool)] = &[
    ("abs", "Abs", 1, true, true),
    ("sqrt", "Sqrt", 1, true, false),
    ("cbrt", "Cbrt", 1, true, false),
    ("powf", "Powf", 2, true, false),
    ("powi", "Powi", 2, true, false),
    ("exp", "Exp", 1, true, false),
    ("exp2", "Exp2", 1, true, false),
    ("ln", "Ln", 1, true, false),
    ("log2", "Log2", 1, true, false),
    ("log10", "Log10", 1, true, false),
    ("sin", "Sin", 1, true, false),
    ("cos", "Cos", 1, true, false),
    ("tan", "Tan", 1, true, false),
    ("asin", "Asin", 1, true, false),
    ("acos", "Acos", 1, true, false),
    ("atan", "Atan", 1, true, false),
    ("atan2", "Atan2", 2, true, false),
    ("sinh", "Sinh", 1, true, false),
    ("cosh", "Cosh", 1, true, false),
    ("tanh", "Tanh", 1, true, false),
    ("hypot", "Hypot", 2, true, false),
    ("floor", "Floor", 1, true, false),
    ("ceil", "Ceil", 1, true, false),
    ("round", "Round", 1, true, false),
    ("round_ties_even", "RoundTiesEven", 1, true, false),
    ("trunc", "Trunc", 1, true, false),
    ("fract", "Fract", 1, true, false),
    ("min", "Min", 2, true, true),
    ("max", "Max", 2, true, true),
    ("clamp", "Clamp", 3, true, true),
    ("mul_add", "MulAdd", 3, true, false),
    ("signum", "Signum", 1, true, false),
    ("copysign", "Copysign", 2, true, false),
    ("is_nan", "IsNan", 1, true, false),
    ("is_finite", "IsFinite", 1, true, false),
    ("pow", "Pow", 2, false, true),
    ("wrapping_add", "WrappingAdd", 2, false, true),
    ("wrapping_sub", "WrappingSub", 2, false, true),
    ("wrapping_mul", "WrappingMul", 2, false, true),
    ("rotate_left", "RotateLeft", 2, false, true),
    ("rotate_right", "RotateRight", 2, false, true),
    ("count_ones", "CountOnes", 1, false, true),
    ("leading_zeros", "LeadingZeros", 1, false, true),
    ("trailing_zeros", "TrailingZeros", 1, false, true),
];

/// Heap and pointer-owning types, rejected with a hint.
const HEAP_TYPES: &[&str] = &[
    "Vec",
    "String",
    "Box",
    "Rc",
    "Arc",
    "HashMap",
    "HashSet",
    "BTreeMap",
    "BTreeSet",
    "VecDeque",
    "BinaryHeap",
    "LinkedList",
    "Cow",
    "RefCell",
    "Cell",
];

/// Whether `path` names one of std's heap types: by a `std::`/`alloc::`/`core::` path, or
/// by the bare name with its generic arguments (`Vec<f32>`, `Cell<u32>`), or `String`. A
/// user's own `#[repr(C)] struct Cell` (no generic arguments) is a device type like any
/// other, which the `DeviceType` bound then checks.
fn is_heap_type(path: &syn::Path) -> bool {
    let Some(last) = path.segments.last() else {
        return false;
    };
    let n = last.ident.to_string();
    if !HEAP_TYPES.contains(&n.as_str()) {
        return false;
    }
    let std_path = path.segments.len() > 1
        && matches!(
            path.segments[0].ident.to_string().as_str(),
            "std" | "alloc" | "core"
        );
    std_path || !last.arguments.is_none() || n == "String"
}

thread_local! {
    /// Names bound by the function's parameters and `let`/`for` patterns (so that a
    /// SCREAMING_CASE name is a local, not a module-level constant) and the function's
    /// own name (recursion).
    static SCOPE: std::cell::RefCell<(std::collections::HashSet<String>, String)> =
        Default::default();
    /// The function's `Window2<T>` parameters: their `.radius()` is a pair.
    static WINDOWS2: std::cell::RefCell<std::collections::HashSet<String>> =
        Default::default();
    /// The name of the function's `&mut Random` parameter, if it has one.
    static RANDOM: std::cell::RefCell<Option<String>> = Default::default();
}

/// The draws of a `&mut Random` parameter: the method, the generator step it takes and
/// the function that reads the drawn value (both in `skel::random::device`).
const DRAWS: &[(&str, &str, &str)] = &[
    ("next_u32", "skel_random_step32", "skel_random_u32"),
    ("next_u64", "skel_random_step64", "skel_random_u64"),
    ("next_f32", "skel_random_step32", "skel_random_f32"),
    ("next_f64", "skel_random_step64", "skel_random_f64"),
];

fn device_fn(name: &str) -> TokenStream {
    let id = syn::Ident::new(name, proc_macro2::Span::call_site());
    quote!(<::skel::random::device::#id as ::skel::userfn::UserFn>::definition)
}

fn is_random_name(e: &Expr) -> Option<String> {
    let Expr::Path(p) = e else { return None };
    let id = p.path.get_ident()?.to_string();
    RANDOM.with(|r| (r.borrow().as_deref() == Some(id.as_str())).then_some(id))
}

/// `rng.next_f32()` -> `{ rng = step(rng); read(rng) }`, the generator state being a local
/// of the C function (see `definition`).
fn random_draw(m: &syn::ExprMethodCall) -> Option<syn::Result<TokenStream>> {
    let rng = is_random_name(&m.receiver)?;
    let name = m.method.to_string();
    let Some(&(_, step, read)) = DRAWS.iter().find(|d| d.0 == name) else {
        return Some(Err(unsupported(
            &m.method,
            &format!(
                "the method `{name}` of `Random` (supported: next_u32 next_u64 next_f32 next_f64)"
            ),
        )));
    };
    if !m.args.is_empty() {
        return Some(Err(syn::Error::new_spanned(
            m,
            format!("`{name}` takes no arguments"),
        )));
    }
    let (step, read) = (device_fn(step), device_fn(read));
    Some(Ok(quote! {
        __ir::Expr::Block(__ir::Block {
            stmts: &[__ir::Stmt::Assign {
                place: &__ir::Expr::Var(#rng),
                op: ::core::option::Option::None,
                value: &__ir::Expr::Call { callee: #step, args: &[__ir::Expr::Var(#rng)] },
            }],
            tail: ::core::option::Option::Some(&__ir::Expr::Call {
                callee: #read,
                args: &[__ir::Expr::Var(#rng)],
            }),
        })
    }))
}

/// Collects every name a pattern in the function binds.
struct Binders(std::collections::HashSet<String>);

impl<'ast> syn::visit::Visit<'ast> for Binders {
    fn visit_pat_ident(&mut self, p: &'ast syn::PatIdent) {
        self.0.insert(p.ident.to_string());
        syn::visit::visit_pat_ident(self, p);
    }
}

/// `SCREAMING_CASE`: how Rust names constants.
fn is_const_name(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && s.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

fn is_bound(name: &str) -> bool {
    SCOPE.with(|s| s.borrow().0.contains(name))
}

fn math_names() -> String {
    MATH.iter().map(|m| m.0).collect::<Vec<_>>().join(" ")
}

const FLOAT_CONSTS: &[&str] = &[
    "MAX",
    "MIN",
    "MIN_POSITIVE",
    "EPSILON",
    "INFINITY",
    "NEG_INFINITY",
    "NAN",
];
const MATH_CONSTS: &[&str] = &[
    "PI",
    "E",
    "TAU",
    "SQRT_2",
    "LN_2",
    "LN_10",
    "LOG2_E",
    "LOG10_E",
    "LOG2_10",
    "LOG10_2",
    "FRAC_PI_2",
    "FRAC_PI_3",
    "FRAC_PI_4",
    "FRAC_PI_6",
    "FRAC_PI_8",
    "FRAC_1_PI",
    "FRAC_2_PI",
    "FRAC_2_SQRT_PI",
    "FRAC_1_SQRT_2",
];

fn prim_variant(name: &str) -> Option<&'static str> {
    PRIMS.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

fn is_float(name: &str) -> bool {
    name == "f32" || name == "f64"
}

/// The names of `path`'s segments (`["f32", "consts", "PI"]`).
pub fn path_names(path: &syn::Path) -> Vec<String> {
    path.segments.iter().map(|s| s.ident.to_string()).collect()
}

/// Is `path` rooted at a primitive type (`f32::sqrt`, `f32::MAX`, `std::f32::consts::PI`)?
pub fn is_primitive_path(path: &syn::Path) -> bool {
    let segs = path_names(path);
    let segs: Vec<&str> = segs.iter().map(|s| s.as_str()).collect();
    let rest = match segs.as_slice() {
        ["std" | "core", rest @ ..] => rest,
        rest => rest,
    };
    rest.len() >= 2 && prim_variant(rest[0]).is_some()
}

fn prim_tokens(v: &str) -> TokenStream {
    let id = syn::Ident::new(v, proc_macro2::Span::call_site());
    quote!(::skel::plumbing::codegen::Prim::#id)
}

/// Tokens of a `::skel::plumbing::codegen::Ty` for a Rust type.
pub fn ty_tokens(ty: &Type) -> syn::Result<TokenStream> {
    match ty {
        Type::Paren(p) => ty_tokens(&p.elem),
        Type::Group(g) => ty_tokens(&g.elem),
        Type::Path(p) if p.qself.is_none() => {
            if let Some(id) = p.path.get_ident() {
                if let Some(v) = prim_variant(&id.to_string()) {
                    let pt = prim_tokens(v);
                    return Ok(quote!(::skel::plumbing::codegen::Ty::Prim(#pt)));
                }
            }
            if let Some(last) = p.path.segments.last() {
                let n = last.ident.to_string();
                if is_heap_type(&p.path) {
                    return Err(syn::Error::new_spanned(
                        ty,
                        format!("`{n}` lives on the heap, which device code cannot use; use a fixed-size array `[T; N]` (or a `&[T]` parameter)"),
                    ));
                }
            }
            Ok(quote_spanned!(ty.span()=> <#ty as ::skel::DeviceType>::TY))
        }
        Type::Array(a) => {
            ty_tokens(&a.elem)?;
            Ok(quote_spanned!(ty.span()=> <#ty as ::skel::DeviceType>::TY))
        }
        Type::Tuple(t) if (2..=4).contains(&t.elems.len()) => {
            for e in &t.elems {
                ty_tokens(e)?;
            }
            Ok(quote_spanned!(ty.span()=> <#ty as ::skel::DeviceType>::TY))
        }
        Type::Tuple(t) => Err(syn::Error::new_spanned(
            t,
            "a tuple in a user function has 2 to 4 elements (use a DeviceType struct for more)",
        )),
        Type::Reference(_) | Type::Ptr(_) => Err(syn::Error::new_spanned(
            ty,
            "references are not supported here: pass values (DeviceType), or take `&[T]` as a parameter",
        )),
        Type::Slice(_) => Err(syn::Error::new_spanned(
            ty,
            "a slice has no fixed size; use an array `[T; N]` (or a `&[T]` parameter)",
        )),
        _ => Err(syn::Error::new_spanned(
            ty,
            "unsupported type in a user function (use a number, bool, array, tuple or DeviceType struct)",
        )),
    }
}

/// "`what` is not supported in a user function", with the hint that ends `what` in
/// parentheses (what to write instead), if any, after a colon.
fn unsupported(node: &impl quote::ToTokens, what: &str) -> syn::Error {
    let msg = match what.strip_suffix(')').and_then(|w| w.split_once(" (")) {
        Some((what, hint)) => format!("{what} is not supported in a user function: {hint}"),
        None => format!(
            "{what} is not supported in a user function (it cannot be translated to device code)"
        ),
    };
    syn::Error::new_spanned(node, msg)
}

pub fn definition(func: &ItemFn, params: Vec<ParamDesc>) -> syn::Result<TokenStream> {
    let name = func.sig.ident.to_string();
    let mut ps = Vec::new();
    let mut random = None;
    let usize_ty = quote!(::skel::plumbing::codegen::Ty::Prim(
        ::skel::plumbing::codegen::Prim::Usize
    ));
    for p in &params {
        if p.kind == "Random" {
            // Not a C parameter: a local generator made from the index and the seed.
            random = Some(p.names[0].to_string());
        } else if p.kind == "Index2" {
            let (r, c) = (p.names[0].to_string(), p.names[1].to_string());
            ps.push(quote!(__ir::Param { name: #r, kind: __ir::ParamKind::IndexRow, ty: ::skel::plumbing::codegen::Ty::Prim(::skel::plumbing::codegen::Prim::Usize) }));
            ps.push(quote!(__ir::Param { name: #c, kind: __ir::ParamKind::IndexCol, ty: ::skel::plumbing::codegen::Ty::Prim(::skel::plumbing::codegen::Prim::Usize) }));
        } else {
            let ty = ty_tokens(&p.ty)?;
            let n = p.names[0].to_string();
            let k = syn::Ident::new(p.kind, proc_macro2::Span::call_site());
            ps.push(quote!(__ir::Param { name: #n, kind: __ir::ParamKind::#k, ty: #ty }));
        }
    }
    let ret = match &func.sig.output {
        ReturnType::Type(_, t) => ty_tokens(t)?,
        ReturnType::Default => unreachable!(),
    };
    // The generator of a `&mut Random` parameter: `let mut rng = at(index, seed);` first,
    // from the index (a hidden one where the function has none) and the seed, a uniform
    // after the user's.
    let prologue = match &random {
        Some(rng) => {
            let (at, index): (_, Vec<String>) = match params.first() {
                Some(p) if p.kind == "Index" => ("skel_random_at", vec![p.names[0].to_string()]),
                Some(p) if p.kind == "Index2" => (
                    "skel_random_at2",
                    vec![p.names[0].to_string(), p.names[1].to_string()],
                ),
                _ => {
                    ps.insert(0, quote!(__ir::Param { name: "__skel_i", kind: __ir::ParamKind::Index, ty: #usize_ty }));
                    ("skel_random_at", vec!["__skel_i".to_string()])
                }
            };
            ps.push(quote!(__ir::Param {
                name: "__skel_seed",
                kind: __ir::ParamKind::Uniform,
                ty: ::skel::plumbing::codegen::Ty::Prim(::skel::plumbing::codegen::Prim::U64)
            }));
            let at = device_fn(at);
            Some(quote! {
                __ir::Stmt::Let {
                    name: #rng,
                    mutable: true,
                    ty: ::core::option::Option::None,
                    init: ::core::option::Option::Some(&__ir::Expr::Call {
                        callee: #at,
                        args: &[#(__ir::Expr::Var(#index),)* __ir::Expr::Var("__skel_seed")],
                    }),
                }
            })
        }
        None => None,
    };
    let mut binders = Binders(Default::default());
    syn::visit::Visit::visit_item_fn(&mut binders, func);
    SCOPE.with(|s| *s.borrow_mut() = (binders.0, name.clone()));
    RANDOM.with(|r| *r.borrow_mut() = random);
    WINDOWS2.with(|w| {
        *w.borrow_mut() = params
            .iter()
            .filter(|p| p.kind == "Window2")
            .map(|p| p.names[0].to_string())
            .collect()
    });
    let body = block_with(&func.block, prologue)?;
    Ok(quote! {
        use ::skel::plumbing::codegen::ir as __ir;
        static __SKEL_DEF: ::skel::plumbing::codegen::FnDef = ::skel::plumbing::codegen::FnDef {
            name: #name,
            params: &[#(#ps),*],
            ret: #ret,
            body: #body,
        };
        &__SKEL_DEF
    })
}

fn block(b: &syn::Block) -> syn::Result<TokenStream> {
    block_with(b, None)
}

/// A block whose statements start with `first`.
fn block_with(b: &syn::Block, first: Option<TokenStream>) -> syn::Result<TokenStream> {
    let mut stmts: Vec<TokenStream> = first.into_iter().collect();
    let mut tail = quote!(::core::option::Option::None);
    let n = b.stmts.len();
    for (i, s) in b.stmts.iter().enumerate() {
        match s {
            Stmt::Local(l) => stmts.push(local(l)?),
            Stmt::Item(it) => {
                return Err(unsupported(
                    it,
                    "an item declaration (declare constants and functions outside: the body reads SCREAMING_CASE module constants and calls other `#[userfn]` functions)",
                ))
            }
            Stmt::Macro(m) => {
                return Err(unsupported(
                    &m.mac,
                    "a macro invocation (write the expression out in the supported subset)",
                ))
            }
            Stmt::Expr(e, semi) => {
                if semi.is_none() && i + 1 == n && (!is_stmt_like(e) || is_valued_if(e)) {
                    let t = expr(e)?;
                    tail = quote!(::core::option::Option::Some(&#t));
                } else {
                    stmts.push(stmt_expr(e)?);
                }
            }
        }
    }
    Ok(quote!(__ir::Block { stmts: &[#(#stmts),*], tail: #tail }))
}

/// Expressions that are statements when they end a block without `;`.
fn is_stmt_like(e: &Expr) -> bool {
    matches!(
        e,
        Expr::ForLoop(_)
            | Expr::While(_)
            | Expr::Return(_)
            | Expr::Break(_)
            | Expr::Continue(_)
            | Expr::Assign(_)
            | Expr::If(_)
            | Expr::Loop(_)
    ) || matches!(e, Expr::Binary(b) if is_compound(&b.op).is_some())
}

/// An `if` with an `else` (possibly a chain) is a value when it ends a block.
fn is_valued_if(e: &Expr) -> bool {
    match e {
        Expr::If(i) => {
            let els_ok = match &i.else_branch {
                None => false,
                Some((_, e)) => match &**e {
                    Expr::If(_) => is_valued_if(e),
                    Expr::Block(b) => block_has_tail(&b.block),
                    _ => false,
                },
            };
            els_ok && block_has_tail(&i.then_branch)
        }
        _ => false,
    }
}

fn block_has_tail(b: &syn::Block) -> bool {
    match b.stmts.last() {
        Some(Stmt::Expr(e, None)) => !is_stmt_like(e) || is_valued_if(e),
        _ => false,
    }
}

fn is_compound(op: &BinOp) -> Option<TokenStream> {
    let v = match op {
        BinOp::AddAssign(_) => "Add",
        BinOp::SubAssign(_) => "Sub",
        BinOp::MulAssign(_) => "Mul",
        BinOp::DivAssign(_) => "Div",
        BinOp::RemAssign(_) => "Rem",
        BinOp::BitAndAssign(_) => "BitAnd",
        BinOp::BitOrAssign(_) => "BitOr",
        BinOp::BitXorAssign(_) => "BitXor",
        BinOp::ShlAssign(_) => "Shl",
        BinOp::ShrAssign(_) => "Shr",
        _ => return None,
    };
    let id = syn::Ident::new(v, proc_macro2::Span::call_site());
    Some(quote!(__ir::BinOp::#id))
}

fn local(l: &syn::Local) -> syn::Result<TokenStream> {
    if let Pat::Tuple(tp) = &l.pat {
        let mut names = Vec::new();
        for e in &tp.elems {
            match e {
                Pat::Ident(pi) if pi.subpat.is_none() && pi.by_ref.is_none() => {
                    let (n, m) = (pi.ident.to_string(), pi.mutability.is_some());
                    names.push(quote!((#n, #m)));
                }
                Pat::Wild(_) => names.push(quote!(("_", false))),
                other => return Err(unsupported(other, "this pattern (use plain names or `_`)")),
            }
        }
        let Some(init) = &l.init else {
            return Err(unsupported(l, "`let (..)` without a value"));
        };
        if let Some((_, d)) = &init.diverge {
            return Err(unsupported(&**d, "`let ... else`"));
        }
        let e = expr(&init.expr)?;
        return Ok(quote!(__ir::Stmt::LetTuple { names: &[#(#names),*], init: &#e }));
    }
    if let (Pat::Wild(_), Some(init)) = (&l.pat, &l.init) {
        if init.diverge.is_none() {
            // `let _ = e;` evaluates `e` and drops it
            let e = expr(&init.expr)?;
            return Ok(quote!(__ir::Stmt::Expr(&#e)));
        }
    }
    let (pat, ty) = match &l.pat {
        Pat::Type(pt) => (&*pt.pat, Some(ty_tokens(&pt.ty)?)),
        p => (p, None),
    };
    let (name, mutable) = match pat {
        Pat::Ident(pi) if pi.subpat.is_none() && pi.by_ref.is_none() => {
            (pi.ident.to_string(), pi.mutability.is_some())
        }
        other => return Err(unsupported(other, "this pattern (use a plain name)")),
    };
    let ty = match ty {
        Some(t) => quote!(::core::option::Option::Some(#t)),
        None => quote!(::core::option::Option::None),
    };
    let init = match &l.init {
        None => quote!(::core::option::Option::None),
        Some(init) => {
            if let Some((_, d)) = &init.diverge {
                return Err(unsupported(&**d, "`let ... else`"));
            }
            let e = expr(&init.expr)?;
            quote!(::core::option::Option::Some(&#e))
        }
    };
    Ok(quote!(__ir::Stmt::Let { name: #name, mutable: #mutable, ty: #ty, init: #init }))
}

fn stmt_expr(e: &Expr) -> syn::Result<TokenStream> {
    Ok(match e {
        Expr::Assign(a) => {
            let place = place(&a.left)?;
            let value = expr(&a.right)?;
            quote!(__ir::Stmt::Assign { place: &#place, op: ::core::option::Option::None, value: &#value })
        }
        Expr::Binary(b) if is_compound(&b.op).is_some() => {
            let op = is_compound(&b.op).unwrap();
            let place = place(&b.left)?;
            let value = expr(&b.right)?;
            quote!(__ir::Stmt::Assign { place: &#place, op: ::core::option::Option::Some(#op), value: &#value })
        }
        Expr::ForLoop(f) => {
            if let Some(l) = &f.label {
                return Err(unsupported(
                    l,
                    "a loop label (use a flag variable and `break`)",
                ));
            }
            let var = match &*f.pat {
                Pat::Ident(pi) if pi.subpat.is_none() && pi.by_ref.is_none() => {
                    pi.ident.to_string()
                }
                Pat::Wild(_) => "_".to_string(),
                other => return Err(unsupported(other, "this loop pattern (use a plain name)")),
            };
            let range = match &*f.expr {
                Expr::Range(r) => r,
                Expr::Paren(p) => match &*p.expr {
                    Expr::Range(r) => r,
                    other => {
                        return Err(unsupported(
                            other,
                            "a `for` loop over anything but a range `a..b` (write `for i in 0..a.len()` and index `a[i]`)",
                        ))
                    }
                },
                other => {
                    return Err(unsupported(
                        other,
                        "a `for` loop over anything but a range `a..b` (write `for i in 0..a.len()` and index `a[i]`)",
                    ))
                }
            };
            let (Some(start), Some(end)) = (&range.start, &range.end) else {
                return Err(unsupported(range, "an open range"));
            };
            let inclusive = matches!(range.limits, RangeLimits::Closed(_));
            let start = expr(start)?;
            let end = expr(end)?;
            let body = block(&f.body)?;
            quote!(__ir::Stmt::For { var: #var, start: &#start, end: &#end, inclusive: #inclusive, body: #body })
        }
        Expr::While(w) => {
            if let Some(l) = &w.label {
                return Err(unsupported(
                    l,
                    "a loop label (use a flag variable and `break`)",
                ));
            }
            if let Expr::Let(l) = &*w.cond {
                return Err(unsupported(l, "`while let`"));
            }
            let cond = expr(&w.cond)?;
            let body = block(&w.body)?;
            quote!(__ir::Stmt::While { cond: &#cond, body: #body })
        }
        Expr::Return(r) => match &r.expr {
            None => quote!(__ir::Stmt::Return(::core::option::Option::None)),
            Some(v) => {
                let v = expr(v)?;
                quote!(__ir::Stmt::Return(::core::option::Option::Some(&#v)))
            }
        },
        Expr::Loop(l) => {
            if let Some(l) = &l.label {
                return Err(unsupported(
                    l,
                    "a loop label (use a flag variable and `break`)",
                ));
            }
            let body = block(&l.body)?;
            quote!(__ir::Stmt::Loop { body: #body })
        }
        Expr::Break(b) => {
            if b.expr.is_some() {
                return Err(unsupported(
                    b,
                    "`break` with a value (assign to a `let mut` variable declared before the loop, then `break`)",
                ));
            }
            if b.label.is_some() {
                return Err(unsupported(b, "`break` with a label (use a flag variable)"));
            }
            quote!(__ir::Stmt::Break)
        }
        Expr::Continue(c) => {
            if c.label.is_some() {
                return Err(unsupported(
                    c,
                    "`continue` with a label (use a flag variable)",
                ));
            }
            quote!(__ir::Stmt::Continue)
        }
        Expr::Paren(p) => return stmt_expr(&p.expr),
        Expr::Group(g) => return stmt_expr(&g.expr),
        other => {
            let e = expr(other)?;
            quote!(__ir::Stmt::Expr(&#e))
        }
    })
}

fn place(e: &Expr) -> syn::Result<TokenStream> {
    match e {
        Expr::Path(_) => expr(e),
        Expr::Field(f) => {
            place(&f.base)?;
            expr(e)
        }
        Expr::Index(i) => {
            place(&i.expr)?;
            expr(e)
        }
        Expr::Paren(p) => place(&p.expr),
        other => Err(unsupported(
            other,
            "assigning to anything but a local variable, one of its fields or an element of a local array",
        )),
    }
}

fn lit(l: &Lit) -> syn::Result<TokenStream> {
    Ok(match l {
        Lit::Int(i) => {
            let value: u128 = i
                .base10_parse()
                .map_err(|e| syn::Error::new_spanned(i, e.to_string()))?;
            let suffix = i.suffix();
            let suffix = if suffix.is_empty() {
                quote!(::core::option::Option::None)
            } else if is_float(suffix) {
                // `2f32`: a float literal written like an integer.
                let v = prim_tokens(prim_variant(suffix).unwrap());
                let text = format!("{value}.0");
                return Ok(
                    quote!(__ir::Expr::Float { text: #text, suffix: ::core::option::Option::Some(#v) }),
                );
            } else {
                match prim_variant(suffix) {
                    Some(v) if suffix != "bool" => {
                        let v = prim_tokens(v);
                        quote!(::core::option::Option::Some(#v))
                    }
                    _ => return Err(syn::Error::new_spanned(i, "unsupported literal suffix")),
                }
            };
            quote!(__ir::Expr::Int { value: #value, suffix: #suffix })
        }
        Lit::Float(f) => {
            let mut text: String = f.base10_digits().to_string();
            if !text.contains(['.', 'e', 'E']) {
                text.push_str(".0");
            }
            if text.ends_with('.') {
                text.push('0');
            }
            let suffix = f.suffix();
            let suffix = if suffix.is_empty() {
                quote!(::core::option::Option::None)
            } else {
                let v = prim_tokens(prim_variant(suffix).unwrap_or("F64"));
                quote!(::core::option::Option::Some(#v))
            };
            quote!(__ir::Expr::Float { text: #text, suffix: #suffix })
        }
        Lit::Bool(b) => {
            let v = b.value;
            quote!(__ir::Expr::Bool(#v))
        }
        other => return Err(unsupported(other, "this kind of literal")),
    })
}

fn path_expr(p: &syn::ExprPath) -> syn::Result<TokenStream> {
    if p.qself.is_some() {
        return Err(unsupported(p, "a qualified path"));
    }
    if let Some(id) = p.path.get_ident() {
        let n = id.to_string();
        if RANDOM.with(|r| r.borrow().as_deref() == Some(n.as_str())) {
            return Err(unsupported(
                p,
                "this use of a `&mut Random` parameter (device code only draws from it: `rng.next_u32()`, `next_u64`, `next_f32`, `next_f64`)",
            ));
        }
        if !is_const_name(&n) || is_bound(&n) {
            return Ok(quote!(__ir::Expr::Var(#n)));
        }
    }
    if !is_primitive_path(&p.path) {
        // A constant outside the function (`K`, `filters::GAUSS`, `Pixel::ZERO`): its value
        // is read through a function the expansion defines next to the tree.
        let last = p.path.segments.last().map(|s| s.ident.to_string());
        if last.as_deref().is_some_and(is_const_name) {
            let path = &p.path;
            let name = quote!(#path).to_string().replace(' ', "");
            return Ok(quote_spanned! {p.span()=>
                __ir::Expr::Extern {
                    name: #name,
                    value: {
                        fn __skel_const() -> ::skel::plumbing::codegen::ConstValue {
                            ::skel::plumbing::codegen::ConstValue::of(&#path)
                        }
                        __skel_const
                    },
                }
            });
        }
        return Err(unsupported(
            p,
            "this path (use locals, parameters, SCREAMING_CASE constants, or constants like f32::MAX or f32::consts::PI)",
        ));
    }
    let segs = path_names(&p.path);
    let segs: Vec<&str> = segs.iter().map(|s| s.as_str()).collect();
    let rest = match segs.as_slice() {
        ["std" | "core", rest @ ..] => rest,
        rest => rest,
    };
    let ok = match rest {
        [t, c] if is_float(t) => FLOAT_CONSTS.contains(c),
        [t, c] if prim_variant(t).is_some() && *t != "bool" => matches!(*c, "MAX" | "MIN" | "BITS"),
        [t, "consts", c] if is_float(t) => MATH_CONSTS.contains(c),
        _ => false,
    };
    if !ok {
        return Err(unsupported(
            p,
            "this path (only locals, parameters and constants like f32::MAX or f32::consts::PI)",
        ));
    }
    let v = prim_tokens(prim_variant(rest[0]).unwrap());
    let c = rest[rest.len() - 1];
    Ok(quote!(__ir::Expr::Const { ty: #v, name: #c }))
}

fn bin_op(op: &BinOp) -> Option<&'static str> {
    Some(match op {
        BinOp::Add(_) => "Add",
        BinOp::Sub(_) => "Sub",
        BinOp::Mul(_) => "Mul",
        BinOp::Div(_) => "Div",
        BinOp::Rem(_) => "Rem",
        BinOp::And(_) => "And",
        BinOp::Or(_) => "Or",
        BinOp::BitAnd(_) => "BitAnd",
        BinOp::BitOr(_) => "BitOr",
        BinOp::BitXor(_) => "BitXor",
        BinOp::Shl(_) => "Shl",
        BinOp::Shr(_) => "Shr",
        BinOp::Eq(_) => "Eq",
        BinOp::Ne(_) => "Ne",
        BinOp::Lt(_) => "Lt",
        BinOp::Le(_) => "Le",
        BinOp::Gt(_) => "Gt",
        BinOp::Ge(_) => "Ge",
        _ => return None,
    })
}

fn math_variant(name: &str) -> Option<TokenStream> {
    MATH.iter().find(|m| m.0 == name).map(|m| {
        let id = syn::Ident::new(m.1, proc_macro2::Span::call_site());
        quote!(__ir::MathFn::#id)
    })
}

fn arity(name: &str) -> usize {
    MATH.iter().find(|m| m.0 == name).map_or(1, |m| m.2)
}

fn exprs<'a>(es: impl IntoIterator<Item = &'a Expr>) -> syn::Result<Vec<TokenStream>> {
    es.into_iter().map(expr).collect()
}

fn expr(e: &Expr) -> syn::Result<TokenStream> {
    Ok(match e {
        Expr::Lit(l) => lit(&l.lit)?,
        Expr::Path(p) => path_expr(p)?,
        Expr::Paren(p) => expr(&p.expr)?,
        Expr::Group(g) => expr(&g.expr)?,
        Expr::Unary(u) => {
            let op = match u.op {
                UnOp::Neg(_) => quote!(__ir::UnOp::Neg),
                UnOp::Not(_) => quote!(__ir::UnOp::Not),
                _ => {
                    return Err(unsupported(
                        u,
                        "dereferencing (parameters and locals are values: drop the `*`)",
                    ))
                }
            };
            let inner = expr(&u.expr)?;
            quote!(__ir::Expr::Unary { op: #op, expr: &#inner })
        }
        Expr::Binary(b) => {
            let Some(op) = bin_op(&b.op) else {
                return Err(unsupported(b, "a compound assignment inside an expression"));
            };
            let op = syn::Ident::new(op, proc_macro2::Span::call_site());
            let (l, r) = (expr(&b.left)?, expr(&b.right)?);
            quote!(__ir::Expr::Binary { op: __ir::BinOp::#op, lhs: &#l, rhs: &#r })
        }
        Expr::Cast(c) => {
            let ty = ty_tokens(&c.ty)?;
            let inner = expr(&c.expr)?;
            quote!(__ir::Expr::Cast { expr: &#inner, ty: #ty })
        }
        Expr::Call(c) => {
            let Expr::Path(p) = &*c.func else {
                return Err(unsupported(&c.func, "calling this kind of expression"));
            };
            if p.qself.is_some() {
                return Err(unsupported(p, "a qualified path"));
            }
            if is_primitive_path(&p.path) {
                // f32::sqrt(x)
                let segs = path_names(&p.path);
                let (t, m) = if segs.len() == 2 {
                    (segs[0].as_str(), segs[1].as_str())
                } else {
                    return Err(unsupported(p, "this function"));
                };
                let allowed = MATH
                    .iter()
                    .any(|x| x.0 == m && if is_float(t) { x.3 } else { t != "bool" && x.4 });
                if !allowed {
                    return Err(unsupported(p, &format!("the function `{t}::{m}`")));
                }
                if c.args.len() != arity(m) {
                    return Err(syn::Error::new_spanned(
                        c,
                        format!("`{t}::{m}` takes {} arguments", arity(m)),
                    ));
                }
                let f = math_variant(m).unwrap();
                let pt = prim_tokens(prim_variant(t).unwrap());
                let args = exprs(&c.args)?;
                quote!(__ir::Expr::Math { func: #f, ty: ::core::option::Option::Some(#pt), args: &[#(#args),*] })
            } else {
                if let Some(seg) = p
                    .path
                    .segments
                    .iter()
                    .take(p.path.segments.len().saturating_sub(1))
                    .find(|s| {
                        // `Vec::new()`, `std::cell::Cell::new(..)`: a heap type's
                        // constructor; a user's `Cell` (whose name std shares) is not
                        // refused by its name.
                        let n = s.ident.to_string();
                        HEAP_TYPES.contains(&n.as_str())
                            && (!matches!(n.as_str(), "Cell" | "RefCell" | "Cow")
                                || is_heap_type(&p.path))
                    })
                {
                    return Err(syn::Error::new_spanned(
                        p,
                        format!("`{}` lives on the heap, which device code cannot use; use a fixed-size array `[T; N]` (or a `&[T]` parameter)", seg.ident),
                    ));
                }
                for seg in &p.path.segments {
                    if !seg.arguments.is_none() {
                        return Err(unsupported(
                            seg,
                            "a generic call (call a `#[userfn]` function of concrete types)",
                        ));
                    }
                }
                let own = SCOPE.with(|s| s.borrow().1.clone());
                if p.path.is_ident(&own) {
                    return Err(unsupported(
                        c,
                        "recursion (device code has no call stack to speak of; write it as a loop)",
                    ));
                }
                let path = &p.path;
                let args = exprs(&c.args)?;
                // By value, so that a plain Rust function is a "not a user function" error
                // (`UserFn`'s message says to mark it `#[userfn]`).
                let callee = quote_spanned!(p.span()=> ::skel::plumbing::definition_of(#path));
                quote!(__ir::Expr::Call { callee: #callee, args: &[#(#args),*] })
            }
        }
        Expr::MethodCall(m) => {
            if let Some(draw) = random_draw(m) {
                return draw;
            }
            let name = m.method.to_string();
            if m.turbofish.is_some() {
                return Err(unsupported(m, "a turbofish"));
            }
            if name == "len" && m.args.is_empty() {
                let base = expr(&m.receiver)?;
                return Ok(quote!(__ir::Expr::Len(&#base)));
            }
            // The dimensions of a `Mat<T>` parameter (typeck checks the receiver).
            if (name == "rows" || name == "cols") && m.args.is_empty() {
                let base = expr(&m.receiver)?;
                return Ok(quote!(__ir::Expr::Field { expr: &#base, name: #name }));
            }
            // A window's radius: `r` of a `Window<T>`, `(rows, cols)` of a `Window2<T>`.
            if name == "radius" && m.args.is_empty() {
                let base = expr(&m.receiver)?;
                let pair = matches!(&*m.receiver, Expr::Path(p)
                    if WINDOWS2.with(|w| p.path.get_ident().is_some_and(|i| w.borrow().contains(&i.to_string()))));
                return Ok(if pair {
                    quote!(__ir::Expr::Tuple(&[
                        __ir::Expr::Field { expr: &#base, name: "radius_rows" },
                        __ir::Expr::Field { expr: &#base, name: "radius_cols" },
                    ]))
                } else {
                    quote!(__ir::Expr::Field { expr: &#base, name: "radius" })
                });
            }
            let Some(f) = math_variant(&name) else {
                return Err(unsupported(
                    &m.method,
                    &format!(
                        "the method `{name}` (supported: len radius {})",
                        math_names()
                    ),
                ));
            };
            if m.args.len() + 1 != arity(&name) {
                return Err(syn::Error::new_spanned(
                    m,
                    format!("`{name}` takes {} arguments", arity(&name) - 1),
                ));
            }
            let mut args = vec![expr(&m.receiver)?];
            args.extend(exprs(&m.args)?);
            quote!(__ir::Expr::Math { func: #f, ty: ::core::option::Option::None, args: &[#(#args),*] })
        }
        Expr::Field(f) => {
            let name = match &f.member {
                syn::Member::Named(n) => n.to_string(),
                syn::Member::Unnamed(i) => i.index.to_string(),
            };
            let inner = expr(&f.base)?;
            quote!(__ir::Expr::Field { expr: &#inner, name: #name })
        }
        Expr::Index(i) => {
            let base = expr(&i.expr)?;
            let idx = match &*i.index {
                Expr::Paren(p) => &*p.expr,
                other => other,
            };
            match idx {
                Expr::Tuple(t) if t.elems.len() == 2 => {
                    let r = expr(&t.elems[0])?;
                    let c = expr(&t.elems[1])?;
                    quote!(__ir::Expr::Index2 { base: &#base, row: &#r, col: &#c })
                }
                Expr::Tuple(t) if t.elems.len() == 3 => {
                    let a = expr(&t.elems[0])?;
                    let b = expr(&t.elems[1])?;
                    let c = expr(&t.elems[2])?;
                    quote!(__ir::Expr::Index3 { base: &#base, offsets: [&#a, &#b, &#c] })
                }
                Expr::Tuple(t) => return Err(unsupported(t, "this index")),
                other => {
                    let ix = expr(other)?;
                    quote!(__ir::Expr::Index { base: &#base, index: &#ix })
                }
            }
        }
        Expr::Struct(s) => {
            if s.qself.is_some() {
                return Err(unsupported(s, "a qualified struct path"));
            }
            if let Some(r) = &s.rest {
                return Err(unsupported(r, "struct update syntax `..`"));
            }
            let path = &s.path;
            let ty = quote_spanned!(path.span()=> <#path as ::skel::DeviceType>::TY);
            let mut fields = Vec::new();
            for f in &s.fields {
                let name = match &f.member {
                    syn::Member::Named(n) => n.to_string(),
                    syn::Member::Unnamed(_) => return Err(unsupported(f, "a tuple struct")),
                };
                let v = expr(&f.expr)?;
                fields.push(quote!(__ir::FieldInit { name: #name, value: #v }));
            }
            quote!(__ir::Expr::Struct { ty: #ty, fields: &[#(#fields),*] })
        }
        Expr::If(i) => {
            if let Expr::Let(l) = &*i.cond {
                return Err(unsupported(l, "`if let`"));
            }
            let cond = expr(&i.cond)?;
            let then = block(&i.then_branch)?;
            let els = match &i.else_branch {
                None => quote!(::core::option::Option::None),
                Some((_, e)) => match &**e {
                    Expr::Block(b) => {
                        let b = block(&b.block)?;
                        quote!(::core::option::Option::Some(#b))
                    }
                    Expr::If(_) => {
                        let inner = expr(e)?;
                        quote!(::core::option::Option::Some(__ir::Block { stmts: &[], tail: ::core::option::Option::Some(&#inner) }))
                    }
                    other => return Err(unsupported(other, "this else branch")),
                },
            };
            quote!(__ir::Expr::If { cond: &#cond, then: #then, els: #els })
        }
        Expr::Block(b) => {
            if let Some(l) = &b.label {
                return Err(unsupported(l, "a block label"));
            }
            let b = block(&b.block)?;
            quote!(__ir::Expr::Block(#b))
        }
        Expr::Closure(c) => {
            return Err(unsupported(
                c,
                "a closure (write another `#[userfn]` function and call it)",
            ))
        }
        Expr::Macro(m) => {
            return Err(unsupported(
                &m.mac,
                "a macro invocation (write the expression out in the supported subset)",
            ))
        }
        Expr::Unsafe(u) => {
            return Err(unsupported(
                u,
                "`unsafe` (write the body in safe Rust: device code is translated from it)",
            ))
        }
        Expr::Reference(r) => {
            return Err(unsupported(
                r,
                "taking a reference (use the value itself: device types are `Copy`)",
            ))
        }
        Expr::Match(m) => return Err(unsupported(m, "`match` (use `if`/`else`)")),
        Expr::Tuple(t) if (2..=4).contains(&t.elems.len()) => {
            let es = exprs(&t.elems)?;
            quote!(__ir::Expr::Tuple(&[#(#es),*]))
        }
        Expr::Tuple(t) => return Err(unsupported(t, "a tuple of other than 2 to 4 values")),
        Expr::Array(a) => {
            let es = exprs(&a.elems)?;
            quote!(__ir::Expr::Array(&[#(#es),*]))
        }
        Expr::Repeat(r) => {
            let v = expr(&r.expr)?;
            let len = &r.len;
            quote!(__ir::Expr::Repeat { value: &#v, len: #len })
        }
        Expr::Range(r) => return Err(unsupported(r, "a range outside `for`")),
        Expr::Try(t) => return Err(unsupported(t, "the `?` operator")),
        Expr::Async(a) => return Err(unsupported(a, "`async`")),
        Expr::Await(a) => return Err(unsupported(a, "`.await`")),
        Expr::Let(l) => return Err(unsupported(l, "`let` in an expression")),
        Expr::Assign(a) => return Err(unsupported(a, "an assignment inside an expression")),
        Expr::Loop(l) => return Err(unsupported(
            l,
            "`loop` as a value (declare `let mut result` before the loop, assign it, then `break`)",
        )),
        Expr::ForLoop(_)
        | Expr::While(_)
        | Expr::Return(_)
        | Expr::Break(_)
        | Expr::Continue(_) => return Err(unsupported(e, "this statement in expression position")),
        other => return Err(unsupported(other, "this expression")),
    })
}
