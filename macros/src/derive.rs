//! `#[derive(DeviceType)]`.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Data, DeriveInput, Fields};

pub fn expand(item: TokenStream) -> TokenStream {
    match syn::parse2::<DeriveInput>(item).and_then(|input| derive(&input)) {
        Ok(ts) => ts,
        Err(e) => e.to_compile_error(),
    }
}

/// Whether the struct has `#[repr(C)]`. `packed` and `align(N)` are rejected at the
/// attribute: the C typedef the code generator emits has natural alignment, so either
/// would give the Rust struct a layout the device code does not share.
fn has_repr_c(input: &DeriveInput) -> syn::Result<bool> {
    let mut found = false;
    for attr in &input.attrs {
        if attr.path().is_ident("repr") {
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("C") {
                    found = true;
                } else if meta.path.is_ident("packed") || meta.path.is_ident("align") {
                    let which = if meta.path.is_ident("packed") {
                        "packed"
                    } else {
                        "align(N)"
                    };
                    return Err(syn::Error::new_spanned(
                        &meta.path,
                        format!(
                            "DeviceType does not support #[repr({which})]: the C type has natural \
                             alignment, so the layouts would differ; use plain #[repr(C)]"
                        ),
                    ));
                }
                // Skip any arguments of other representation hints (e.g. `u8`).
                if meta.input.peek(syn::token::Paren) {
                    let content;
                    syn::parenthesized!(content in meta.input);
                    content.parse::<TokenStream>()?;
                }
                Ok(())
            })?;
        }
    }
    Ok(found)
}

fn derive(input: &DeriveInput) -> syn::Result<TokenStream> {
    let name = &input.ident;
    let data = match &input.data {
        Data::Struct(s) => s,
        _ => {
            return Err(syn::Error::new_spanned(
                input,
                "DeviceType can only be derived for a #[repr(C)] struct with named fields",
            ))
        }
    };
    if !input.generics.params.is_empty() || input.generics.where_clause.is_some() {
        return Err(syn::Error::new_spanned(
            &input.generics,
            "DeviceType cannot be derived for a generic struct",
        ));
    }
    let fields = match &data.fields {
        Fields::Named(f) if !f.named.is_empty() => &f.named,
        _ => {
            return Err(syn::Error::new_spanned(
                input,
                "DeviceType can only be derived for a struct with named fields (no tuple or unit structs)",
            ))
        }
    };
    if !has_repr_c(input)? {
        return Err(syn::Error::new_spanned(
            input,
            "DeviceType requires #[repr(C)] on the struct (its layout must match C)",
        ));
    }
    let name_str = name.to_string();
    let field_names: Vec<String> = fields
        .iter()
        .map(|f| f.ident.as_ref().unwrap().to_string())
        .collect();
    let field_tys: Vec<&syn::Type> = fields.iter().map(|f| &f.ty).collect();
    let msg = format!(
        "DeviceType: struct {name_str} has padding between or after its fields; reorder the fields or add explicit padding fields"
    );
    Ok(quote! {
        // SAFETY: the struct is #[repr(C)] (checked by the derive), every field is a
        // DeviceType (checked by the trait bounds in TY below), and the assertion below
        // proves there is no padding, so TY describes the layout exactly and every bit
        // pattern copied from a device is a valid value.
        unsafe impl ::skel::DeviceType for #name {
            const TY: ::skel::plumbing::codegen::Ty = ::skel::plumbing::codegen::Ty::Struct(&::skel::plumbing::codegen::StructTy {
                name: #name_str,
                fields: &[#(::skel::plumbing::codegen::FieldTy {
                    name: #field_names,
                    ty: <#field_tys as ::skel::DeviceType>::TY,
                }),*],
            });
        }
        const _: () = {
            assert!(
                0 #(+ ::core::mem::size_of::<#field_tys>())* == ::core::mem::size_of::<#name>(),
                #msg
            );
        };
    })
}
