//! `#[userfn]`: the signature (parameter kinds, traits to implement) and the expansion.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::visit_mut::VisitMut;
use syn::{FnArg, GenericArgument, ItemFn, Pat, PathArguments, ReturnType, Type};

use crate::body;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Index,
    Index2,
    Elem,
    Uniform,
    Array,
    Mat,
    Window,
    Window2,
    Window3,
    /// `rng: &mut Random`.
    Random,
}

struct ParamInfo {
    kind: Kind,
    /// Names bound by the pattern (two for a 2D index).
    names: Vec<syn::Ident>,
    /// The declared type (for arrays and windows: the element type).
    ty: Type,
}

pub fn expand_userfn(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut func: ItemFn = match syn::parse2(item) {
        Ok(f) => f,
        Err(e) => return e.to_compile_error(),
    };
    let mut errors: Vec<syn::Error> = Vec::new();
    if !attr.is_empty() {
        errors.push(syn::Error::new_spanned(
            &attr,
            "#[userfn] takes no arguments",
        ));
    }
    let result = analyse(&func);
    // Strip our parameter attributes so that the fallback output compiles cleanly.
    for arg in func.sig.inputs.iter_mut() {
        if let FnArg::Typed(pt) = arg {
            pt.attrs
                .retain(|a| !a.path().is_ident("index") && !a.path().is_ident("uniform"));
        }
    }
    match result {
        Ok(params) if errors.is_empty() => match generate(&func, &params) {
            Ok(ts) => ts,
            Err(e) => {
                let err = e.to_compile_error();
                quote!(#err #func)
            }
        },
        Ok(_) => {
            let errs = errors.iter().map(|e| e.to_compile_error());
            quote!(#(#errs)* #func)
        }
        Err(e) => {
            errors.push(e);
            let errs = errors.iter().map(|e| e.to_compile_error());
            quote!(#(#errs)* #func)
        }
    }
}

fn has_attr(attrs: &[syn::Attribute], name: &str) -> bool {
    attrs.iter().any(|a| a.path().is_ident(name))
}

fn is_ident_type(ty: &Type, name: &str) -> bool {
    matches!(ty, Type::Path(p) if p.qself.is_none() && p.path.is_ident(name))
}

/// `&mut Random` (any path ending so).
fn is_random_ref(ty: &Type) -> bool {
    matches!(ty, Type::Reference(r) if r.mutability.is_some()
        && matches!(&*r.elem, Type::Path(p) if p.qself.is_none()
            && p.path.segments.last().is_some_and(|s| s.ident == "Random" && s.arguments.is_none())))
}

/// `Window<T>` / `Window2<T>` / `Mat<T>` (any path ending so), returning the element type.
fn window_elem(ty: &Type) -> Option<(Kind, Type)> {
    let Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    let kind = match last.ident.to_string().as_str() {
        "Window" => Kind::Window,
        "Window2" => Kind::Window2,
        "Window3" => Kind::Window3,
        "Mat" => Kind::Mat,
        _ => return None,
    };
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    let tys: Vec<&Type> = args
        .args
        .iter()
        .filter_map(|a| match a {
            GenericArgument::Type(t) => Some(t),
            _ => None,
        })
        .collect();
    if tys.len() == 1 {
        Some((kind, tys[0].clone()))
    } else {
        None
    }
}

fn analyse(func: &ItemFn) -> syn::Result<Vec<ParamInfo>> {
    let sig = &func.sig;
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        return Err(syn::Error::new_spanned(
            &sig.generics,
            "a user function cannot be generic (its C translation needs concrete types): write one function per type, e.g. from a `macro_rules!` around `#[userfn]`",
        ));
    }
    if let syn::Safety::Unsafe(u) = &sig.safety {
        return Err(syn::Error::new_spanned(
            u,
            "a user function cannot be unsafe (write it in safe Rust)",
        ));
    }
    if let Some(a) = &sig.asyncness {
        return Err(syn::Error::new_spanned(
            a,
            "a user function cannot be async",
        ));
    }
    if let Some(v) = &sig.variadic {
        return Err(syn::Error::new_spanned(
            v,
            "a user function cannot be variadic",
        ));
    }
    if let ReturnType::Default = sig.output {
        return Err(syn::Error::new_spanned(
            sig,
            "a user function must return a value (add `-> T` with a DeviceType T)",
        ));
    }
    let mut params: Vec<ParamInfo> = Vec::new();
    for (pos, arg) in sig.inputs.iter().enumerate() {
        let pt = match arg {
            FnArg::Receiver(r) => {
                return Err(syn::Error::new_spanned(
                    r,
                    "a user function cannot take `self`",
                ))
            }
            FnArg::Typed(pt) => pt,
        };
        let is_index = has_attr(&pt.attrs, "index");
        let is_uniform = has_attr(&pt.attrs, "uniform");
        for a in &pt.attrs {
            if !a.path().is_ident("index") && !a.path().is_ident("uniform") {
                return Err(syn::Error::new_spanned(
                    a,
                    "only #[index] and #[uniform] are allowed on user-function parameters",
                ));
            }
        }
        if is_index && is_uniform {
            return Err(syn::Error::new_spanned(
                pt,
                "a parameter cannot be both #[index] and #[uniform]",
            ));
        }
        let ty = (*pt.ty).clone();
        if is_index {
            if pos != 0 {
                return Err(syn::Error::new_spanned(
                    pt,
                    "the #[index] parameter must be the first parameter",
                ));
            }
            match &*pt.pat {
                Pat::Ident(pi) if pi.subpat.is_none() && is_ident_type(&ty, "usize") => {
                    params.push(ParamInfo {
                        kind: Kind::Index,
                        names: vec![pi.ident.clone()],
                        ty,
                    });
                }
                Pat::Tuple(tp) if tp.elems.len() == 2 => {
                    let ok_ty = matches!(&ty, Type::Tuple(t) if t.elems.len() == 2
                        && t.elems.iter().all(|e| is_ident_type(e, "usize")));
                    if !ok_ty {
                        return Err(syn::Error::new_spanned(
                            &pt.ty,
                            "a 2D #[index] parameter has type (usize, usize)",
                        ));
                    }
                    let mut names = Vec::new();
                    for e in &tp.elems {
                        match e {
                            Pat::Ident(pi) if pi.subpat.is_none() => names.push(pi.ident.clone()),
                            other => {
                                return Err(syn::Error::new_spanned(
                                    other,
                                    "expected a name in the 2D index pattern `(row, col)`",
                                ))
                            }
                        }
                    }
                    params.push(ParamInfo {
                        kind: Kind::Index2,
                        names,
                        ty,
                    });
                }
                _ => {
                    return Err(syn::Error::new_spanned(
                        pt,
                        "an #[index] parameter is `#[index] i: usize` or `#[index] (row, col): (usize, usize)`",
                    ))
                }
            }
            continue;
        }
        let name = match &*pt.pat {
            Pat::Ident(pi) if pi.subpat.is_none() && pi.by_ref.is_none() => pi.ident.clone(),
            other => {
                return Err(syn::Error::new_spanned(
                    other,
                    "a user-function parameter must be a plain name",
                ))
            }
        };
        if is_random_ref(&ty) {
            if is_uniform {
                return Err(syn::Error::new_spanned(
                    pt,
                    "a `&mut Random` parameter is not a #[uniform]: drop the attribute (the seed is the skeleton's `.seed(..)`)",
                ));
            }
            if params.iter().any(|p| p.kind == Kind::Random) {
                return Err(syn::Error::new_spanned(
                    pt,
                    "a user function takes at most one `&mut Random` parameter (draw all numbers from it)",
                ));
            }
            if params.iter().any(|p| p.kind == Kind::Uniform) {
                return Err(syn::Error::new_spanned(
                    pt,
                    "#[uniform] parameters must come after all other parameters",
                ));
            }
            params.push(ParamInfo {
                kind: Kind::Random,
                names: vec![name],
                ty,
            });
            continue;
        }
        let (kind, ty) = match &ty {
            Type::Reference(r) => match &*r.elem {
                Type::Slice(s) if r.mutability.is_none() => (Kind::Array, (*s.elem).clone()),
                _ => {
                    return Err(syn::Error::new_spanned(
                        &pt.ty,
                        "references are not supported in user functions, except read-only arrays `&[T]` and `rng: &mut Random`: take the value itself (`x: T`, device types are `Copy`)",
                    ))
                }
            },
            Type::Ptr(_) => {
                return Err(syn::Error::new_spanned(
                    &pt.ty,
                    "pointers are not supported in user functions",
                ))
            }
            _ => match window_elem(&ty) {
                Some(kt) => kt,
                None => (Kind::Elem, ty.clone()),
            },
        };
        let kind = if is_uniform {
            if kind != Kind::Elem {
                return Err(syn::Error::new_spanned(
                    pt,
                    "a #[uniform] parameter is passed by value (a DeviceType)",
                ));
            }
            Kind::Uniform
        } else {
            kind
        };
        if kind != Kind::Uniform && params.iter().any(|p| p.kind == Kind::Uniform) {
            return Err(syn::Error::new_spanned(
                pt,
                "#[uniform] parameters must come after all other parameters",
            ));
        }
        params.push(ParamInfo {
            kind,
            names: vec![name],
            ty,
        });
    }
    let count = |k: Kind| params.iter().filter(|p| p.kind == k).count();
    let (arrays, windows, windows2) = (
        count(Kind::Array) + count(Kind::Mat),
        count(Kind::Window),
        count(Kind::Window2) + count(Kind::Window3),
    );
    if arrays > 4 {
        return Err(syn::Error::new_spanned(
            &sig.inputs,
            "a user function takes at most four container parameters (`&[T]`, `Mat<T>`)",
        ));
    }
    if count(Kind::Window3) > 0 && params.iter().any(|p| p.kind == Kind::Random) {
        return Err(syn::Error::new_spanned(
            &sig.inputs,
            "a 3D stencil (Window3) user function cannot take `&mut Random` yet: draw the numbers in a Map (e.g. into a noise Tensor3) and read them through the window; Window<T> and Window2<T> functions can",
        ));
    }
    if windows + windows2 > 0 {
        if count(Kind::Window3) > 0 {
            // 3D windows have the original form only: one window and uniforms.
            let bad = windows + windows2 > 1
                || arrays > 0
                || params
                    .iter()
                    .any(|p| !matches!(p.kind, Kind::Window3 | Kind::Uniform));
            if bad {
                return Err(syn::Error::new_spanned(
                    &sig.inputs,
                    "a 3D stencil user function takes one Window3<T> parameter and #[uniform] parameters only (#[index], containers and several windowed inputs are for Window<T> and Window2<T>)",
                ));
            }
        } else {
            crate::overlap::check_stencil_params(
                &sig.inputs,
                &params
                    .iter()
                    .map(|p| (kind_name(p.kind), &p.ty))
                    .collect::<Vec<_>>(),
            )?;
        }
    }
    Ok(params)
}

/// Rewrites calls `g(x)` to other user functions into `g::call(x)`.
struct CallRewriter;

impl VisitMut for CallRewriter {
    fn visit_expr_path_mut(&mut self, p: &mut syn::ExprPath) {
        // `f32::consts::PI` -> `::core::f32::consts::PI`
        let segs = body::path_names(&p.path);
        if p.qself.is_none()
            && p.path.leading_colon.is_none()
            && segs.len() == 3
            && (segs[0] == "f32" || segs[0] == "f64")
            && segs[1] == "consts"
        {
            let span = p.path.segments[0].ident.span();
            p.path
                .segments
                .insert(0, syn::PathSegment::from(syn::Ident::new("core", span)));
            p.path.leading_colon = Some(syn::Token![::](span));
        }
    }

    fn visit_expr_call_mut(&mut self, call: &mut syn::ExprCall) {
        syn::visit_mut::visit_expr_call_mut(self, call);
        if let syn::Expr::Path(p) = &mut *call.func {
            if p.qself.is_none() && !body::is_primitive_path(&p.path) {
                let span = p.path.segments.last().unwrap().ident.span();
                p.path
                    .segments
                    .push(syn::PathSegment::from(syn::Ident::new("call", span)));
            }
        }
    }
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Index => "Index",
        Kind::Index2 => "Index2",
        Kind::Elem => "Elem",
        Kind::Uniform => "Uniform",
        Kind::Array => "Array",
        Kind::Mat => "Mat",
        Kind::Window => "Window",
        Kind::Window2 => "Window2",
        Kind::Window3 => "Window3",
        Kind::Random => "Random",
    }
}

fn tuple_ty(tys: &[TokenStream]) -> TokenStream {
    quote!((#(#tys,)*))
}

fn generate(func: &ItemFn, params: &[ParamInfo]) -> syn::Result<TokenStream> {
    // A body outside the supported subset is one error at its span; the rest of the
    // expansion still stands (with a definition that is never reached, as the crate does not
    // build), so that the caller's uses type-check and add no errors of their own.
    let def = body::definition(
        func,
        params
            .iter()
            .map(|p| body::ParamDesc {
                kind: match p.kind {
                    Kind::Index => "Index",
                    Kind::Index2 => "Index2",
                    Kind::Elem => "Elem",
                    Kind::Uniform => "Uniform",
                    Kind::Array => "Array",
                    Kind::Mat => "Mat",
                    Kind::Window => "Window",
                    Kind::Window2 => "Window2",
                    Kind::Window3 => "Window3",
                    Kind::Random => "Random",
                },
                names: p.names.clone(),
                ty: p.ty.clone(),
            })
            .collect(),
    );
    // A stub needs a signature of device types; an error in the signature is reported
    // alone, with the function kept as written.
    let signature_ok = || {
        let ret_ok = match &func.sig.output {
            ReturnType::Type(_, t) => body::ty_tokens(t).is_ok(),
            ReturnType::Default => false,
        };
        ret_ok
            && params
                .iter()
                .filter(|p| !matches!(p.kind, Kind::Index | Kind::Index2 | Kind::Random))
                .all(|p| body::ty_tokens(&p.ty).is_ok())
    };
    let (def, def_error) = match def {
        Ok(def) => (def, None),
        Err(e) if !signature_ok() => return Err(e),
        Err(e) => (
            quote!(::core::unreachable!("the user function did not compile")),
            Some(e.to_compile_error()),
        ),
    };

    let vis = &func.vis;
    let name = &func.sig.ident;
    let name_str = name.to_string();
    let out_ty = match &func.sig.output {
        ReturnType::Type(_, t) => (**t).clone(),
        ReturnType::Default => unreachable!("checked in analyse"),
    };
    let attrs = &func.attrs;
    let mut block = (*func.block).clone();
    CallRewriter.visit_block_mut(&mut block);
    crate::wrap::WrapRewriter {
        function: name_str.clone(),
        windows: params
            .iter()
            .filter(|p| {
                matches!(
                    p.kind,
                    Kind::Window | Kind::Window2 | Kind::Window3 | Kind::Mat
                )
            })
            .flat_map(|p| p.names.clone())
            .collect(),
    }
    .visit_block_mut(&mut block);
    if def_error.is_some() {
        // The body is outside the subset: its rewrites may not type-check either, and the
        // crate does not build anyway, so `call` is a stub that adds no errors.
        block = syn::parse_quote!({ ::core::unreachable!("the user function did not compile") });
    }
    let inputs = &func.sig.inputs;

    let random = params.iter().any(|p| p.kind == Kind::Random);
    // A function that draws random numbers without an `#[index]` still needs its element's
    // position, which selects its stream: a hidden 1D index.
    let index_ty = match params.first().map(|p| p.kind) {
        Some(Kind::Index) => quote!(usize),
        Some(Kind::Index2) => quote!((usize, usize)),
        _ if random => quote!(usize),
        _ => quote!(()),
    };
    let has_index = matches!(
        params.first().map(|p| p.kind),
        Some(Kind::Index | Kind::Index2)
    );
    let mut elem_tys = Vec::new();
    let mut elem_names = Vec::new();
    let mut uni_tys = Vec::new();
    let mut uni_names = Vec::new();
    let mut call_args = Vec::new();
    // The call from `ElementwiseFn::apply_with`: containers from the `arrays` tuple.
    let mut with_args = Vec::new();
    let mut array_tys = Vec::new();
    let mut kinds = Vec::new();
    let mut container_names = Vec::new();
    let mut window = None;
    for (i, p) in params.iter().enumerate() {
        let ty = &p.ty;
        match p.kind {
            Kind::Index | Kind::Index2 => call_args.push(quote!(index)),
            Kind::Elem => {
                let n = format_ident!("__skel_e{}", i);
                elem_tys.push(quote!(#ty));
                elem_names.push(n.clone());
                call_args.push(quote!(#n));
            }
            Kind::Uniform => {
                let n = format_ident!("__skel_u{}", i);
                uni_tys.push(quote!(#ty));
                uni_names.push(n.clone());
                call_args.push(quote!(#n));
            }
            Kind::Array | Kind::Mat => {
                let n = format_ident!("__skel_c{}", i);
                container_names.push(n.clone());
                kinds.push(if p.kind == Kind::Mat {
                    quote!(::skel::plumbing::MatArg<#ty>)
                } else {
                    quote!(::skel::plumbing::SliceArg<#ty>)
                });
                with_args.push(quote!(#n));
                if p.kind == Kind::Array {
                    array_tys.push(ty.clone());
                }
                call_args.push(quote!(array));
                continue;
            }
            Kind::Window | Kind::Window2 | Kind::Window3 => {
                window = window.or(Some((p.kind, ty.clone())));
                call_args.push(quote!(window));
            }
            Kind::Random => call_args.push(quote!(&mut __skel_rng)),
        }
        with_args.push(call_args.last().cloned().expect("pushed above"));
    }
    // MapArray takes functions whose only container is one `&[T]`.
    let array_ty = (kinds.len() == 1 && array_tys.len() == 1).then(|| array_tys[0].clone());
    let kinds_t = tuple_ty(&kinds);
    let _ = has_index;
    let elems_t = tuple_ty(&elem_tys);
    // Each uniform's type is checked at its parameter, and the tuple of them is spanned
    // there too: an error about a uniform (not a device type) points at the parameter, not
    // at the attribute.
    let uni_spans: Vec<proc_macro2::Span> = params
        .iter()
        .filter(|p| p.kind == Kind::Uniform)
        .map(|p| syn::spanned::Spanned::span(&p.ty))
        .collect();
    let uni_checks = params.iter().filter(|p| p.kind == Kind::Uniform).map(|p| {
        let ty = &p.ty;
        quote_spanned! {syn::spanned::Spanned::span(ty)=>
            const _: () = {
                fn __skel_uniform_is_a_device_type<T: ::skel::DeviceType>() {}
                let _ = __skel_uniform_is_a_device_type::<#ty>;
            };
        }
    });
    let uni_checks = quote!(#(#uni_checks)*);
    let uni_tuple = |tys: &[TokenStream]| match uni_spans.first() {
        Some(&span) => quote_spanned!(span=> (#(#tys,)*)),
        None => tuple_ty(tys),
    };
    let unis_t = if random {
        let user = uni_tuple(&uni_tys);
        quote!(::skel::plumbing::Seeded<#user>)
    } else {
        uni_tuple(&uni_tys)
    };
    let unpack = if random {
        quote! {
            let (#(#elem_names,)*) = elems;
            let (#(#uni_names,)*) = uniforms.user;
            let mut __skel_rng = ::skel::plumbing::RandomIndex::stream(index, uniforms.seed);
        }
    } else {
        quote! {
            let (#(#elem_names,)*) = elems;
            let (#(#uni_names,)*) = *uniforms;
        }
    };
    let unpack_u = quote! {
        let (#(#uni_names,)*) = *uniforms;
    };
    let call_trait = if let Some((kind, elem)) = window {
        if kind == Kind::Window3 {
            quote! {
                impl ::skel::userfn::StencilFn for #name {
                    type Radius = (usize, usize, usize);
                    type Elem = #elem;
                    type Uniforms = #unis_t;
                    type Windows = ::skel::plumbing::PlainWindow;
                }
                impl ::skel::userfn::Window3Fn for #name {
                    #[inline(always)]
                    #[allow(unused_variables)]
                    fn apply(window: ::skel::Window3<'_, #elem>, uniforms: &#unis_t) -> #out_ty {
                        #unpack_u
                        Self::call(#(#call_args),*)
                    }
                }
            }
        } else {
            // A `&mut Random` draws from the stream of its output's index (the flat
            // position where the function has no `#[index]`), as in a Map.
            let unpack_stencil = if random {
                quote! {
                    let (#(#uni_names,)*) = uniforms.user;
                    let mut __skel_rng = ::skel::plumbing::RandomIndex::stream(index, uniforms.seed);
                }
            } else {
                unpack_u.clone()
            };
            crate::overlap::stencil_impls(&crate::overlap::Stencil {
                name,
                two_d: kind == Kind::Window2,
                elem: &elem,
                out: &out_ty,
                index: &index_ty,
                kinds: &kinds_t,
                uniforms: &unis_t,
                unpack_uniforms: &unpack_stencil,
                container_names: &container_names,
                params: &params.iter().map(|p| kind_name(p.kind)).collect::<Vec<_>>(),
            })
        }
    } else {
        let array_fn = array_ty.map(|array| quote! {
            impl ::skel::userfn::ArrayFn for #name {
                type Index = #index_ty;
                type Array = #array;
                type Elems = #elems_t;
                type Uniforms = #unis_t;
                #[inline(always)]
                #[allow(unused_variables)]
                fn apply(index: #index_ty, array: &[#array], elems: #elems_t, uniforms: &#unis_t) -> #out_ty {
                    #unpack
                    Self::call(#(#call_args),*)
                }
            }
        });
        let names_of = |k: Kind| -> Vec<&syn::Ident> {
            params
                .iter()
                .filter(|p| p.kind == k)
                .flat_map(|p| p.names.first())
                .collect()
        };
        let index = match params.first() {
            Some(p) if p.kind == Kind::Index2 => (p.names.first(), p.names.get(1)),
            Some(p) if p.kind == Kind::Index => (p.names.first(), None),
            _ => (None, None),
        };
        let typed = |k: Kind| -> Vec<(&syn::Ident, &Type)> {
            params
                .iter()
                .filter(|p| p.kind == k)
                .flat_map(|p| p.names.first().map(|n| (n, &p.ty)))
                .collect()
        };
        let nest_sig = crate::nest::Sig {
            index,
            mats: typed(Kind::Mat),
            arrays: typed(Kind::Array),
            containers: params
                .iter()
                .filter(|p| matches!(p.kind, Kind::Mat | Kind::Array))
                .flat_map(|p| p.names.first())
                .collect(),
            uniforms: names_of(Kind::Uniform),
            out: &out_ty,
        };
        let nest = if elem_tys.is_empty() && !random {
            crate::nest::nest_block(&block, &nest_sig)
        } else {
            None
        };
        quote! {
            impl ::skel::userfn::ElementwiseFn for #name {
                #nest
                type Index = #index_ty;
                type Elems = #elems_t;
                type Uniforms = #unis_t;
                type Arrays = #kinds_t;
                #[inline(always)]
                #[allow(unused_variables)]
                fn apply_with(
                    index: #index_ty,
                    __skel_arrays: <#kinds_t as ::skel::plumbing::ContainerArgs>::Refs<'_>,
                    elems: #elems_t,
                    uniforms: &#unis_t,
                ) -> #out_ty {
                    #unpack
                    let (#(#container_names,)*) = __skel_arrays;
                    Self::call(#(#with_args),*)
                }
            }
            #array_fn
        }
    };
    let span = name.span();
    let struct_def = quote_spanned! {span=>
        #[allow(non_camel_case_types, dead_code)]
        #[derive(Clone, Copy, Debug, Default)]
        #vis struct #name;
    };
    let stub_allow = def_error
        .is_some()
        .then(|| quote!(#[allow(unused_variables, unused_mut)]));
    Ok(quote! {
        #def_error
        #uni_checks
        #struct_def
        impl #name {
            #(#attrs)*
            #[inline(always)]
            // Index loops are how a body walks an array: device code has no iterators.
            #[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
            // The wrapping rewrite turns operands into call arguments, keeping their parentheses.
            #[allow(unused_parens)]
            #stub_allow
            #vis fn call(#inputs) -> #out_ty #block
        }
        impl ::skel::userfn::UserFn for #name {
            type Out = #out_ty;
            const NAME: &'static str = #name_str;
            fn definition() -> &'static ::skel::plumbing::codegen::FnDef {
                #def
            }
        }
        #call_trait
    })
}
