//! # skel
//!
//! Data-parallel skeletons — [`Map`], [`Reduce`], [`MapReduce`], [`MapArray`],
//! [`MapOverlap`], [`Scan`] — over smart containers ([`Vector`], [`Matrix`]), from one user
//! function written in Rust, on the sequential CPU, Rayon, CUDA or OpenCL.
//!
//! ```
//! use skel::prelude::*;
//!
//! #[userfn]
//! fn add(a: f32, b: f32) -> f32 { a + b }
//!
//! let a = Vector::from_fn(1000, |i| i as f32);
//! let b = Vector::filled(1000, 1.0f32);
//! let mut out = Vector::zeroed(1000);
//! Map::new(add).run(&a, &b, &mut out)?;
//! assert_eq!(out[999], 1000.0);
//! let total: f32 = Reduce::new(add).run(&out)?;
//! assert_eq!(total, 500_500.0);
//! # Ok::<(), skel::Error>(())
//! ```
#![deny(missing_docs)]

// The macros emit `::skel::...` paths; this lets them work inside the crate too.
extern crate self as skel;

pub mod backends;
pub mod codegen;
pub mod containers;
mod error;
mod plan;
pub mod skeletons;
pub mod userfn;

pub use backends::{default_backend, set_default_backend, Backend};
pub use containers::{Matrix, Vector, VectorView, VectorViewMut};
pub use error::{Error, Result};
pub use skel_macros::{userfn, DeviceType};
pub use skeletons::{Edge, Map, MapArray, MapOverlap, MapReduce, Reduce, Scan, ScanMode};
pub use userfn::{DeviceType, Window, Window2};

/// Everything a skeleton program needs: `use skel::prelude::*;`.
pub mod prelude {
    pub use crate::{
        userfn, Backend, DeviceType, Edge, Error, Map, MapArray, MapOverlap, MapReduce, Matrix,
        Reduce, Result, Scan, ScanMode, Vector, Window, Window2,
    };
}
