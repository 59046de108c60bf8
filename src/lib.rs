//! # skel
//!
//! Data-parallel skeletons — [`Map`], [`Reduce`], [`MapReduce`], [`MapArray`],
//! [`MapOverlap`], [`Scan`], [`MapPairs`], [`MapPairsReduce`], [`Filter`], [`Sort`] — over
//! smart containers ([`Vector`], [`Matrix`]), from one user function written in Rust, on the
//! sequential CPU, Rayon, CUDA or OpenCL; and [`stream`]: pipelines and farms of threads over
//! a stream of items, around them.
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
//!
//! ## A guided tour
//!
//! Read these in order; each step links to the page that says the rest.
//!
//! 1. **User functions.** Mark an ordinary function [`#[userfn]`](macro@userfn). Its
//!    parameters are elements (numbers, `bool`, fixed-size arrays, `#[repr(C)]` structs
//!    with [`#[derive(DeviceType)]`](derive@DeviceType)), and optionally `#[index]` (the
//!    element's position), `#[uniform]` values bound with `.uniforms(..)`, and whole
//!    containers (`&[T]`, [`Mat<T>`](userfn::Mat)) bound with `.arrays(..)`. The body is a
//!    Rust subset (`let`, `if`, loops, tuples, math methods) that the macro also
//!    translates to CUDA C and OpenCL C. What the language allows: [`userfn`](mod@userfn).
//! 2. **Containers.** [`Vector`] and [`Matrix`] (row-major) hold the data on the host and on
//!    devices and keep the copies coherent: a call uploads only what a device lacks, a host
//!    read (`v[i]`, [`as_slice`](Vector::as_slice), iterators, `Display`) brings back only
//!    stale ranges. Views ([`Vector::view`], [`Vector::view_mut`]) pass a sub-range. They
//!    convert to and from `Vec`, arrays and iterators like the standard containers
//!    ([`containers`]).
//! 3. **Skeletons.** [`Map`], [`Reduce`], [`MapReduce`], [`Scan`], [`MapOverlap`],
//!    [`MapArray`], [`MapPairs`], [`MapPairsReduce`], [`Filter`], [`Sort`], [`Histogram`],
//!    [`ReduceByKey`], [`Wavefront`]: `Skeleton::new(f)`, options, then
//!    `.run(inputs.., &mut output)`. A Map can be handed to the next call unevaluated with
//!    `.lazy(..)` ([`skeletons`]).
//! 4. **Backends.** Each call runs where [`Backend::Auto`] predicts it is fastest, unless
//!    `.backend(..)`, [`set_default_backend`] or `SKEL_BACKEND` names one; every
//!    process-wide setting is in [`config`], Auto's models in [`tune`]. Several CUDA
//!    devices: `.devices(n)`.
//! 5. **Errors.** Bad input is an [`Error`] value with the shapes or names needed to fix it,
//!    never a panic; checked calls ([`check`]) report a user function's out-of-range index
//!    or division by zero on every backend, and integer arithmetic wraps everywhere.
//! 6. **Programs.** [`stream`] builds pipelines and farms of threads around skeleton
//!    calls; with feature `mpi`, `skel::dist` spreads containers over MPI ranks.
//!
//! The repository's `examples/01_first_map.rs` .. `05_pipeline.rs` walk the same path as
//! programs (each runs on every backend with `--backend`), `examples/skepu/` holds SkePU's
//! example programs ported, and `docs/` has the guide, the SkePU mapping, performance,
//! reliability and clusters.
//!
//! ## The whole API at a glance
//!
//! Every snippet of the API contract, compiled and run as a test:
//!
//! ```
//! use skel::prelude::*;
//!
//! #[userfn]
//! fn add(a: f32, b: f32) -> f32 { a + b }
//! #[userfn]
//! fn mult(a: f32, b: f32) -> f32 { a * b }
//! #[userfn]
//! fn max(a: f32, b: f32) -> f32 { a.max(b) }
//!
//! #[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
//! #[repr(C)]
//! struct Pixel { r: f32, g: f32, b: f32 }
//!
//! #[userfn]
//! fn grey(px: Pixel, #[uniform] luma: Pixel) -> Pixel {
//!     let y = luma.r * px.r + luma.g * px.g + luma.b * px.b;
//!     Pixel { r: y, g: y, b: y }
//! }
//! #[userfn]
//! fn iota(#[index] i: usize) -> u32 { i as u32 }
//! #[userfn]
//! fn lookup(table: &[f32], x: u32) -> f32 { table[x as usize] }
//! #[userfn]
//! fn blur(w: Window<f32>) -> f32 { (w[-1] + w[0] + w[1]) / 3.0 }
//! #[userfn]
//! fn lap(w: Window2<f32>) -> f32 { w[(-1, 0)] + w[(1, 0)] + w[(0, -1)] + w[(0, 1)] - 4.0 * w[(0, 0)] }
//!
//! const LUMA: Pixel = Pixel { r: 0.2126, g: 0.7152, b: 0.0722 };
//!
//! // Containers
//! let a = Vector::from(vec![1.0f32, 2.0, 3.0]);
//! let b = Vector::filled(3, 2.0f32);
//! let z: Vector<f32> = Vector::zeroed(3);
//! let f = Vector::from_fn(3, |i| i as f32);
//! let m = Matrix::from_vec(2, 3, vec![0i32; 6])?;
//! let mz: Matrix<f32> = Matrix::zeroed(2, 3);
//! assert!(Matrix::from_vec(2, 3, vec![0i32; 5]).is_err());
//! assert_eq!((z.len(), f[2], m.rows(), mz.cols()), (3, 2.0, 2, 3));
//!
//! // Skeletons
//! let mut out = Vector::zeroed(3);
//! Map::new(add).run(&a, &b, &mut out)?;
//! assert_eq!(out.to_vec(), vec![3.0, 4.0, 5.0]);
//! let img = Vector::filled(3, Pixel { r: 1.0, g: 1.0, b: 1.0 });
//! let mut grey_out = Vector::zeroed(3);
//! Map::new(grey).uniforms((LUMA,)).run(&img, &mut grey_out)?;
//! let mut ids = Vector::zeroed(3);
//! Map::new(iota).run_index(&mut ids)?;
//! assert_eq!(ids.to_vec(), vec![0, 1, 2]);
//! let s: f32 = Reduce::new(add).run(&a)?;
//! assert_eq!(s, 6.0);
//! let s: f32 = Reduce::new(max).start(f32::MIN).run(&a)?;
//! assert_eq!(s, 3.0);
//! let mm = Matrix::from_vec(2, 3, vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?;
//! let (mut per_row, mut per_col) = (Vector::zeroed(2), Vector::zeroed(3));
//! Reduce::new(add).run_rows(&mm, &mut per_row)?;
//! Reduce::new(add).run_cols(&mm, &mut per_col)?;
//! assert_eq!((per_row.to_vec(), per_col.to_vec()), (vec![6.0, 15.0], vec![5.0, 7.0, 9.0]));
//! let d: f32 = MapReduce::new(mult, add).run(&a, &b)?;
//! assert_eq!(d, 12.0);
//! let table = Vector::from(vec![10.0f32, 20.0, 30.0]);
//! let idx = Vector::from(vec![2u32, 1, 0]);
//! MapArray::new(lookup).run(&table, &idx, &mut out)?;
//! assert_eq!(out.to_vec(), vec![30.0, 20.0, 10.0]);
//! let v = Vector::from(vec![3.0f32, 6.0, 9.0, 12.0]);
//! let mut vout = Vector::zeroed(4);
//! MapOverlap::new(blur, 1).edge(Edge::Duplicate).run(&v, &mut vout)?;
//! MapOverlap::new(blur, 1).edge(Edge::Pad).pad(0.0).run(&v, &mut vout)?;
//! let mut mout = Matrix::zeroed(2, 3);
//! MapOverlap::new(lap, (1, 1)).edge(Edge::Cyclic).run(&mz, &mut mout)?;
//! Scan::new(add).run(&v, &mut vout)?;
//! assert_eq!(vout.to_vec(), vec![3.0, 9.0, 18.0, 30.0]);
//! Scan::new(add).mode(ScanMode::Exclusive).start(10.0).run(&v, &mut vout)?;
//! assert_eq!(vout.to_vec(), vec![10.0, 13.0, 19.0, 28.0]);
//!
//! // Irregular streams: Filter keeps, in order, the elements its bool function accepts.
//! #[userfn]
//! fn is_hit(x: u32, #[uniform] t: u32) -> bool { x % t == 0 }
//! let hits = Vector::from_fn(30, |i| i as u32);
//! let mut kept_out = Vector::filled(30, 0u32);
//! let kept: usize = Filter::new(is_hit).uniforms((7,)).run(&hits, &mut kept_out)?;
//! assert_eq!(&kept_out.to_vec()[..kept], &[0, 7, 14, 21, 28]);
//!
//! // Sort: ascending and stable; floats in total order; pairs; records by a key function.
//! let mut keys = Vector::from(vec![2.5f32, -1.0, 0.0]);
//! let mut ids = Vector::from(vec![0u32, 1, 2]);
//! Sort::new().run_pairs(&mut keys, &mut ids)?;
//! assert_eq!(ids.to_vec(), vec![1, 2, 0]);
//! #[userfn]
//! fn brightness(px: Pixel) -> f32 { px.r + px.g + px.b }
//! let mut pixels = Vector::from(vec![LUMA, Pixel { r: 0.0, g: 0.0, b: 0.0 }]);
//! Sort::by_key(brightness).run(&mut pixels)?;
//! Sort::new().run(&mut keys)?;
//! assert_eq!(pixels[0].r, 0.0);
//!
//! // Views: only the range is read, computed and written.
//! let a = Vector::from_fn(20, |i| i as f32);
//! let b = Vector::filled(20, 1.0f32);
//! let mut out = Vector::zeroed(20);
//! Map::new(add).run(&a.view(10..20), &b.view(0..10), &mut out.view_mut(5..15))?;
//! assert_eq!((out[4], out[5], out[14], out[15]), (0.0, 11.0, 20.0, 0.0));
//!
//! // Backends
//! let on_cpu: f32 = Reduce::new(add).backend(Backend::Cpu).run(&a)?;
//! assert_eq!(on_cpu, 190.0);
//! assert!(Backend::available().contains(&Backend::Cpu));
//! # Ok::<(), skel::Error>(())
//! ```
//!
//! MapPairs, MapPairsReduce and whole-matrix Reduce (SkePU 3):
//!
//! ```
//! use skel::prelude::*;
//!
//! #[userfn]
//! fn dist(p: f32, q: f32) -> f32 { (p - q).abs() }
//! #[userfn]
//! fn add(a: f32, b: f32) -> f32 { a + b }
//!
//! let (v, h) = (Vector::from(vec![0.0f32, 2.0, 5.0]), Vector::from(vec![1.0f32, 4.0]));
//! let mut m = Matrix::zeroed(3, 2);
//! MapPairs::new(dist).run(&v, &h, &mut m)?;           // m[(i, j)] = dist(v[i], h[j])
//! assert_eq!(m.to_vec(), vec![1.0, 4.0, 1.0, 2.0, 4.0, 1.0]);
//! let (mut per_v, mut per_h) = (Vector::zeroed(3), Vector::zeroed(2));
//! MapPairsReduce::new(dist, add).run_rows(&v, &h, &mut per_v)?;   // per_v[i] = fold_j dist(v[i], h[j])
//! MapPairsReduce::new(dist, add).run_cols(&v, &h, &mut per_h)?;   // per_h[j] = fold_i dist(v[i], h[j])
//! assert_eq!((per_v.to_vec(), per_h.to_vec()), (vec![5.0, 3.0, 5.0], vec![6.0, 7.0]));
//! let total: f32 = Reduce::new(add).run(&m)?;          // whole-matrix reduce (row-major order)
//! assert_eq!(total, 13.0);
//! # Ok::<(), skel::Error>(())
//! ```
//!
//! ## What is where
//!
//! A skeleton program needs the prelude and little else: the skeletons and their options
//! ([`skeletons`], also at the crate root), the containers ([`containers`]: [`Vector`],
//! [`Matrix`], views, and the [`Input`](containers::Input) /
//! [`Output`](containers::Output) traits to write generic code over them), the
//! user-function traits ([`userfn`](mod@userfn)), the errors ([`Error`], [`check`] for
//! checked user functions), the backends ([`Backend`], [`tune`] for `Backend::Auto`),
//! streams of tasks ([`stream`]) and, with feature `mpi`, distributed containers
//! (`skel::dist`). What only the `#[userfn]` macro and backend implementers need (the operands
//! a backend receives, the traits the macro implements for container and uniform
//! parameters, the code generator and its typed tree) is in [`plumbing`].
//!
//! ## Feature flags
//!
//! `rayon` (default) compiles in the multi-core CPU backend, `cuda` the CUDA backend
//! (driver and NVRTC loaded at run time: no toolkit needed to build), `opencl` the OpenCL
//! backend; `ndarray` and `image` add conversions between the containers and
//! `ndarray::Array1`/`Array2` and `image::ImageBuffer` ([`interop`]). A backend's feature
//! only compiles it in: whether it runs is decided at run time (see [`Backend::available`]).
#![deny(missing_docs)]
// Rust API Guidelines C-DEBUG: every public type can be printed.
#![deny(missing_debug_implementations)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// The macros emit `::skel::...` paths; this lets them work inside the crate too.
extern crate self as skel;

pub mod backends;
pub mod check;
// Documented as `skel::plumbing::codegen`; the old path stays for existing code.
#[doc(hidden)]
pub mod codegen;
pub mod config;
pub mod containers;
#[doc(hidden)]
pub mod debug;
#[cfg(feature = "mpi")]
pub mod dist;
mod error;
mod graph;
pub mod interop;
mod plan;
pub mod plumbing;
pub mod random;
pub mod skeletons;
pub mod stream;
pub mod trace;
pub mod tune;
pub mod userfn;

pub use backends::{default_backend, set_default_backend, Backend};
pub use containers::{Matrix, Vector, VectorView, VectorViewMut};
pub use containers::{MatrixView, MatrixViewMut, Tensor3};
pub use error::{DriverError, Error, Result};
pub use graph::Graph;
pub use interop::{Rgb8, Rgba8};
pub use random::Random;
pub use skel_macros::{userfn, DeviceType};
pub use skeletons::Wavefront;
pub use skeletons::{ByValue, KeyFn, KeyKind, RadixBits, Sort, SortKey};
pub use skeletons::{
    Count, Devices, Edge, Filter, Histogram, Lazy, Map, MapArray, MapOverlap, MapPairs,
    MapPairsReduce, MapReduce, Reduce, ReduceByKey, Scan, ScanMode, Update,
};
pub use userfn::Window3;
pub use userfn::{DeviceType, Mat, Window, Window2};

/// Everything a skeleton program needs: `use skel::prelude::*;`.
pub mod prelude {
    pub use crate::Random;
    pub use crate::Update;
    pub use crate::Wavefront;
    pub use crate::{
        userfn, Backend, Count, DeviceType, Devices, Edge, Error, Filter, Histogram, Map, MapArray,
        MapOverlap, MapPairs, MapPairsReduce, MapReduce, Mat, Matrix, Reduce, ReduceByKey, Result,
        Scan, ScanMode, Vector, Window, Window2,
    };
    pub use crate::{Sort, SortKey};
    pub use crate::{Tensor3, Window3};
}
