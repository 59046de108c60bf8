//! Conversions between skel's containers and the array and image types users already hold.
//!
//! - [`Rgb8`] and [`Rgba8`]: 8-bit pixels as [`DeviceType`](crate::DeviceType)s, so a user
//!   function can take and return them on every backend (always available).
//! - Feature `ndarray`: [`Matrix`](crate::Matrix) from and to `ndarray::Array2` (and any
//!   2D array or view), [`Vector`](crate::Vector) from and to `Array1`; zero-copy
//!   `ArrayView`s of a container's host copy.
//! - Feature `image`: `Matrix<u8>`, `Matrix<Rgb8>` and `Matrix<Rgba8>` from and to
//!   `image::GrayImage`, `RgbImage` and `RgbaImage` (any `ImageBuffer` of those pixels).
//!
//! Into a container is always one copy, in one pass: a container owns 64-byte-aligned host
//! memory that is page-locked while CUDA is in use (what makes its asynchronous copies
//! possible), so it cannot adopt a `Vec` allocated by the global allocator. Out of a
//! container, `as_ndarray`/`as_ndarray_mut` are views of the host copy without a copy;
//! owned arrays and images are one copy.

#[cfg(feature = "image")]
mod image;
#[cfg(feature = "ndarray")]
mod ndarray;
mod pixel;

#[cfg(feature = "image")]
pub use self::image::ImagePixel;
pub use pixel::{Rgb8, Rgba8};
