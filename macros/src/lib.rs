//! Procedural macros of skel: `#[userfn]` and `#[derive(DeviceType)]`.
//!
//! `#[userfn]` keeps the Rust body (as `name::call`), implements the user-function traits
//! of `skel::userfn` from the parameter kinds, and describes the body as a typed tree
//! (`skel::plumbing::codegen::FnDef`) that the library translates to C at run time.
//! Constructs outside the supported subset are compile errors at their span.
//!
//! Users depend on `skel`, which re-exports these macros; every emitted path is `::skel::..`:
//! the user-function traits (`skel::userfn`), `skel::DeviceType`, `skel::Window`/`Window2`,
//! the parameter-kind types and the code generator's tree (`skel::plumbing`), and the hidden
//! helpers of `skel::check` the rewritten body calls.

use proc_macro::TokenStream;

mod body;
mod derive;
mod nest;
mod overlap;
mod parse;
mod wrap;

/// Turns a Rust function into a skel user function. See `skel`'s documentation.
#[proc_macro_attribute]
pub fn userfn(attr: TokenStream, item: TokenStream) -> TokenStream {
    parse::expand_userfn(attr.into(), item.into()).into()
}

/// Derives `skel::DeviceType` for a `#[repr(C)]` struct with named fields of device types.
#[proc_macro_derive(DeviceType)]
pub fn derive_device_type(item: TokenStream) -> TokenStream {
    derive::expand(item.into()).into()
}
