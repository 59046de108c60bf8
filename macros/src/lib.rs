//! Procedural macros of skel (placeholder: the codegen work replaces this file).
use proc_macro::TokenStream;

/// Placeholder.
#[proc_macro_attribute]
pub fn userfn(_attr: TokenStream, item: TokenStream) -> TokenStream {
    item
}

/// Placeholder.
#[proc_macro_derive(DeviceType)]
pub fn derive_device_type(_item: TokenStream) -> TokenStream {
    TokenStream::new()
}
