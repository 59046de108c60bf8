//! Window (MapOverlap) user functions: which parameter lists are stencils, and the traits
//! their expansion implements.
//!
//! Every window function implements `StencilFn`, `OverlapFn` and `Overlap1Fn` /
//! `Overlap2Fn` (the general form: index, 1..=4 windows, containers, uniforms); one of a
//! single window and uniforms only also implements `WindowFn` / `Window2Fn`, which the
//! backends' dedicated stencil paths take.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::{punctuated::Punctuated, FnArg, Token, Type};

/// `Err` unless the parameters (kind names of `parse::Kind`, declared types) form a window
/// function: an optional index of the windows' dimension first, 1..=4 windows of one kind
/// and one element type, containers, uniforms last, and no element parameters.
pub fn check_stencil_params(
    inputs: &Punctuated<FnArg, Token![,]>,
    params: &[(&str, &Type)],
) -> syn::Result<()> {
    let windows: Vec<&(&str, &Type)> = params
        .iter()
        .filter(|(k, _)| matches!(*k, "Window" | "Window2"))
        .collect();
    let fail = |msg: &str| Err(syn::Error::new_spanned(inputs, msg));
    if windows.len() > 4 {
        return fail("a window function takes at most four windowed inputs");
    }
    let (kind, ty) = *windows[0];
    let same = |t: &Type| quote!(#t).to_string() == quote!(#ty).to_string();
    if windows.iter().any(|(k, t)| *k != kind || !same(t)) {
        return fail(
            "the windows of one function are all `Window<T>` or all `Window2<T>`, of one element type T (the windowed inputs have one shape)",
        );
    }
    if params.iter().any(|(k, _)| *k == "Elem") {
        return fail(
            "a window function takes no element parameters: read the element as `w[0]` / `w[(0, 0)]` of a window, or pass the container whole with `Mat<T>` / `&[T]` and `.arrays((..))`",
        );
    }
    match (kind, params.first().map(|p| p.0)) {
        ("Window", Some("Index2")) => fail(
            "a 1D window function's #[index] is `i: usize` (the flat position); `(usize, usize)` goes with `Window2<T>`",
        ),
        ("Window2", Some("Index")) => fail(
            "a 2D window function's #[index] is `(i, j): (usize, usize)`; `usize` goes with `Window<T>`",
        ),
        _ => Ok(()),
    }
}

/// What the stencil traits' impls need from the expansion.
pub struct Stencil<'a> {
    pub name: &'a syn::Ident,
    pub two_d: bool,
    pub elem: &'a Type,
    pub out: &'a Type,
    /// `()`, `usize` or `(usize, usize)`.
    pub index: &'a TokenStream,
    /// The container kinds tuple (`(MatArg<T>, ..)`).
    pub kinds: &'a TokenStream,
    pub uniforms: &'a TokenStream,
    /// `let (__skel_u<k>, ..) = *uniforms;` (and the generator `__skel_rng` of a
    /// `&mut Random` parameter, from `index` and the seed).
    pub unpack_uniforms: &'a TokenStream,
    /// `__skel_c<k>` of each container parameter, in order.
    pub container_names: &'a [syn::Ident],
    /// The kind name of every parameter, in order.
    pub params: &'a [&'a str],
}

/// The trait impls of a window function.
pub fn stencil_impls(s: &Stencil<'_>) -> TokenStream {
    let Stencil {
        name,
        elem,
        out,
        index,
        kinds,
        uniforms,
        unpack_uniforms,
        container_names,
        ..
    } = s;
    let mut window_count = 0usize;
    let args: Vec<TokenStream> = s
        .params
        .iter()
        .enumerate()
        .map(|(pos, kind)| match *kind {
            "Index" | "Index2" => quote!(index),
            "Window" | "Window2" => {
                window_count += 1;
                let k = window_count - 1;
                quote!(windows[#k])
            }
            "Array" | "Mat" => {
                let n = format_ident!("__skel_c{}", pos);
                quote!(#n)
            }
            "Random" => quote!(&mut __skel_rng),
            _ => {
                let n = format_ident!("__skel_u{}", pos);
                quote!(#n)
            }
        })
        .collect();
    let plain = window_count == 1
        && s.params
            .iter()
            .all(|k| matches!(*k, "Window" | "Window2" | "Uniform"));
    let (radius, win, plain_trait, general_trait) = if s.two_d {
        (
            quote!((usize, usize)),
            quote!(::skel::Window2<'_, #elem>),
            quote!(Window2Fn),
            quote!(Overlap2Fn),
        )
    } else {
        (
            quote!(usize),
            quote!(::skel::Window<'_, #elem>),
            quote!(WindowFn),
            quote!(Overlap1Fn),
        )
    };
    let windows_ty = if plain {
        quote!(::skel::plumbing::PlainWindow)
    } else {
        let elems = (0..window_count).map(|_| quote!(#elem));
        quote!((#(#elems,)*))
    };
    let plain_impl = plain.then(|| {
        quote! {
            impl ::skel::userfn::#plain_trait for #name {
                #[inline(always)]
                #[allow(unused_variables)]
                fn apply(window: #win, uniforms: &#uniforms) -> #out {
                    let windows = [window];
                    #unpack_uniforms
                    Self::call(#(#args),*)
                }
            }
        }
    });
    quote! {
        impl ::skel::userfn::StencilFn for #name {
            type Radius = #radius;
            type Elem = #elem;
            type Uniforms = #uniforms;
            type Windows = #windows_ty;
        }
        impl ::skel::userfn::OverlapFn for #name {
            type Index = #index;
            type Arrays = #kinds;
            const WINDOWS: usize = #window_count;
        }
        impl ::skel::userfn::#general_trait for #name {
            #[inline(always)]
            #[allow(unused_variables)]
            fn apply_windows(
                index: #index,
                windows: &[#win],
                __skel_arrays: <#kinds as ::skel::plumbing::ContainerArgs>::Refs<'_>,
                uniforms: &#uniforms,
            ) -> #out {
                #unpack_uniforms
                let (#(#container_names,)*) = __skel_arrays;
                Self::call(#(#args),*)
            }
        }
        #plain_impl
    }
}
