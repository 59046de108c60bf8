//! C code generation for the GPU backends (owned by the codegen work; see README).
//!
//! `#[userfn]` describes each function body as a typed tree ([`FnDef`]); this module turns
//! it into CUDA C or OpenCL C. Types of struct fields and of called user functions are only
//! known once every macro has expanded, so the translation runs here, in the library, with
//! the [`DeviceType::TY`](crate::DeviceType::TY) descriptions at hand.

/// A primitive type as the code generator sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Prim {
    Bool,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    Usize,
    Isize,
    F32,
    F64,
}

/// A device type: a primitive or a `#[repr(C)]` struct of device types.
#[derive(Clone, Copy, Debug)]
pub enum Ty {
    /// A primitive number.
    Prim(Prim),
    /// A `#[derive(DeviceType)]` struct.
    Struct(&'static StructTy),
}

impl Ty {
    /// The struct's name, or `None` for a primitive.
    pub const fn c_struct_name(&self) -> Option<&'static str> {
        match self {
            Ty::Prim(_) => None,
            Ty::Struct(s) => Some(s.name),
        }
    }
}

/// A `#[repr(C)]` struct: its name and fields in declaration order.
#[derive(Debug)]
pub struct StructTy {
    /// The Rust (and C) name.
    pub name: &'static str,
    /// Fields in declaration order.
    pub fields: &'static [FieldTy],
}

/// One field of a [`StructTy`].
#[derive(Debug)]
pub struct FieldTy {
    /// Field name.
    pub name: &'static str,
    /// Field type.
    pub ty: Ty,
}

pub mod ir;

pub use ir::FnDef;
