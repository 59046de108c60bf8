//! 8-bit pixel types that travel to the devices.

use crate::DeviceType;

/// An 8-bit RGB pixel, laid out as three bytes like `image::Rgb<u8>` (no padding), usable
/// as a user function's parameter, result or struct field on every backend.
///
/// ```
/// use skel::prelude::*;
/// use skel::Rgb8;
///
/// #[userfn]
/// fn luma(p: Rgb8) -> u8 {
///     ((p.r as u32 * 54 + p.g as u32 * 183 + p.b as u32 * 19) >> 8) as u8
/// }
///
/// let img = Vector::from(vec![Rgb8::new(255, 255, 255), Rgb8::new(0, 0, 0)]);
/// let mut grey = Vector::zeroed(2);
/// Map::new(luma).run(&img, &mut grey)?;
/// assert_eq!(grey.to_vec(), vec![255, 0]);
/// # Ok::<(), skel::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, DeviceType)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[repr(C)]
pub struct Rgb8 {
    /// Red.
    pub r: u8,
    /// Green.
    pub g: u8,
    /// Blue.
    pub b: u8,
}

/// An 8-bit RGBA pixel, laid out as four bytes like `image::Rgba<u8>`; see [`Rgb8`].
///
/// ```
/// use skel::Rgba8;
/// let p = Rgba8::new(1, 2, 3, 255);
/// assert_eq!((p.r, p.a), (1, 255));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, DeviceType)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[repr(C)]
pub struct Rgba8 {
    /// Red.
    pub r: u8,
    /// Green.
    pub g: u8,
    /// Blue.
    pub b: u8,
    /// Alpha (opacity).
    pub a: u8,
}

impl Rgb8 {
    /// The pixel `(r, g, b)`.
    ///
    /// ```
    /// assert_eq!(skel::Rgb8::new(1, 2, 3).b, 3);
    /// ```
    pub const fn new(r: u8, g: u8, b: u8) -> Self {
        Rgb8 { r, g, b }
    }
}

impl Rgba8 {
    /// The pixel `(r, g, b, a)`.
    ///
    /// ```
    /// assert_eq!(skel::Rgba8::new(1, 2, 3, 4).a, 4);
    /// ```
    pub const fn new(r: u8, g: u8, b: u8, a: u8) -> Self {
        Rgba8 { r, g, b, a }
    }
}

impl From<[u8; 3]> for Rgb8 {
    fn from([r, g, b]: [u8; 3]) -> Self {
        Rgb8 { r, g, b }
    }
}

impl From<Rgb8> for [u8; 3] {
    fn from(p: Rgb8) -> Self {
        [p.r, p.g, p.b]
    }
}

impl From<[u8; 4]> for Rgba8 {
    fn from([r, g, b, a]: [u8; 4]) -> Self {
        Rgba8 { r, g, b, a }
    }
}

impl From<Rgba8> for [u8; 4] {
    fn from(p: Rgba8) -> Self {
        [p.r, p.g, p.b, p.a]
    }
}
