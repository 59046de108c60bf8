//! Traits and types for the `#[userfn]` macro and for backend implementers.
//!
//! A skeleton program never names anything in this module: it writes user functions, builds
//! skeletons and hands them containers, and the items here appear only in the signatures
//! and bounds those involve (like `rayon::iter::plumbing` behind rayon's iterators). They
//! are public because the code `#[userfn]` and `#[derive(DeviceType)]` expand to lives in
//! the user's crate, and because a backend needs them to read its operands and translate a
//! user function; they change more freely than the rest of the API.
//!
//! What is here:
//!
//! - **Operands**, what a skeleton hands a backend: [`Arg`] (a range of a container that the
//!   call reads, and its shape) and [`ArgMut`] (one it writes); tuples of inputs as
//!   [`ArgTuple`] with their host slices as [`HostSlices`] and a per-operand
//!   [`ArgVisitor`]; the outputs of a (multi-output) Map as [`OutArgs`], with their host
//!   slices as [`HostOut`] and a per-operand [`OutCollector`].
//! - **Parameter kinds** the macro implements the user-function traits with: the optional
//!   `#[index]` ([`IndexKind`]), the `#[uniform]` tuple ([`UniformTuple`], passed to
//!   kernels as raw bytes), container parameters ([`ContainerArgs`], a tuple of
//!   [`ContainerArg`]s: [`MatArg`] for `Mat<T>`, [`SliceArg`] for `&[T]`, of a
//!   [`ContainerKind`]) and what `.arrays(..)` binds to them ([`BindArrays`]).
//! - **Code generation** ([`codegen`]): the typed tree a user function's body is described
//!   by ([`codegen::FnDef`], [`codegen::ir`]), the device types' layout
//!   ([`codegen::Ty`], what [`DeviceType::TY`](crate::DeviceType::TY) holds) and the
//!   translation to CUDA and OpenCL C.
//!
//! The helpers that the rewritten body of a user function calls (the checked index and
//! division, the wrapping arithmetic of [`crate::check`]) are hidden: only expansions use
//! them.
//!
//! Before this module existed these items were reachable as `skel::codegen::..`,
//! `skel::containers::{Arg, ArgMut, OutArgs, OutCollector, HostOut}` and
//! `skel::userfn::{IndexKind, UniformTuple, ContainerArg, ContainerArgs, ContainerKind,
//! MatArg, SliceArg, BindArrays}`; those paths still work, undocumented.
//!
//! ```
//! use skel::plumbing::codegen::{device_source, Dialect};
//! use skel::plumbing::{ContainerArgs, ContainerKind, UniformTuple};
//! use skel::prelude::*;
//! use skel::userfn::ElementwiseFn;
//!
//! #[userfn]
//! fn scale(#[index] i: usize, m: Mat<f32>, x: f32, #[uniform] k: f32) -> f32 {
//!     m[(i, 0)] * x * k
//! }
//!
//! // The parameter kinds the macro found, as types.
//! assert_eq!(<scale as ElementwiseFn>::Arrays::KINDS, [ContainerKind::Mat]);
//! assert_eq!(<<scale as ElementwiseFn>::Uniforms as UniformTuple>::LEN, 1);
//! // The C a GPU backend compiles for it.
//! let src = device_source::<scale>(Dialect::OpenCl)?;
//! assert_eq!(src.entry(), "skel_fn_scale");
//! # Ok::<(), skel::Error>(())
//! ```

/// The cpu loop-nest kernels `#[userfn]`'s generated code calls.
#[doc(hidden)]
pub use crate::backends::cpu::loopnest as nest;
#[doc(inline)]
pub use crate::codegen;
#[doc(inline)]
pub use crate::containers::{Arg, ArgMut, HostOut, OutArgs, OutCollector};
#[doc(inline)]
pub use crate::plan::{ArgTuple, ArgVisitor, HostAt, HostSlices, Operand};
/// The uniforms of a function with a `&mut Random` parameter (the user's tuple and the
/// seed), and how an `#[index]` value selects an element's stream.
#[doc(inline)]
pub use crate::random::{RandomIndex, Seeded};
#[doc(hidden)]
pub use crate::userfn::definition_of;
#[doc(inline)]
pub use crate::userfn::{
    BindArrays, ContainerArg, ContainerArgs, ContainerKind, IndexKind, MatArg, PlainWindow,
    SliceArg, UniformTuple,
};
