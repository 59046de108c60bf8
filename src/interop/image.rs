//! `Matrix<u8>` / `Matrix<Rgb8>` / `Matrix<Rgba8>` <-> `image::ImageBuffer` (feature `image`).

use std::ops::Deref;

use ::image::{ImageBuffer, Luma, Pixel, Rgb, Rgba};

use super::{Rgb8, Rgba8};
use crate::{DeviceType, Error, Matrix, Result};

mod sealed {
    pub trait Sealed {}
    impl Sealed for image::Luma<u8> {}
    impl Sealed for image::Rgb<u8> {}
    impl Sealed for image::Rgba<u8> {}
}

/// An `image` pixel type with a skel pixel type of the same bytes: `Luma<u8>` ↔ `u8`,
/// `Rgb<u8>` ↔ [`Rgb8`], `Rgba<u8>` ↔ [`Rgba8`]. It lets [`Matrix::from_image`] find the
/// matrix's element type from the image. Sealed: implemented for those three only.
#[cfg_attr(docsrs, doc(cfg(feature = "image")))]
pub trait ImagePixel: Pixel<Subpixel = u8> + sealed::Sealed {
    /// The skel pixel type.
    type Device: DeviceType;
    #[doc(hidden)]
    fn from_bytes(b: &[u8]) -> Self::Device;
    #[doc(hidden)]
    fn push_bytes(p: Self::Device, out: &mut Vec<u8>);
}

impl ImagePixel for Luma<u8> {
    type Device = u8;
    fn from_bytes(b: &[u8]) -> u8 {
        b[0]
    }
    fn push_bytes(p: u8, out: &mut Vec<u8>) {
        out.push(p);
    }
}

impl ImagePixel for Rgb<u8> {
    type Device = Rgb8;
    fn from_bytes(b: &[u8]) -> Rgb8 {
        Rgb8::new(b[0], b[1], b[2])
    }
    fn push_bytes(p: Rgb8, out: &mut Vec<u8>) {
        out.extend_from_slice(&[p.r, p.g, p.b]);
    }
}

impl ImagePixel for Rgba<u8> {
    type Device = Rgba8;
    fn from_bytes(b: &[u8]) -> Rgba8 {
        Rgba8::new(b[0], b[1], b[2], b[3])
    }
    fn push_bytes(p: Rgba8, out: &mut Vec<u8>) {
        out.extend_from_slice(&[p.r, p.g, p.b, p.a]);
    }
}

/// The pixels of `img` by (row, column): `img.height()` rows of `img.width()`.
fn pixel_at<Px: ImagePixel, C: Deref<Target = [u8]>>(
    img: &ImageBuffer<Px, C>,
) -> impl Fn(usize, usize) -> Px::Device + '_ {
    let (n, w) = (usize::from(Px::CHANNEL_COUNT), img.width() as usize);
    let raw: &[u8] = img;
    move |r, c| Px::from_bytes(&raw[(r * w + c) * n..][..n])
}

#[cfg_attr(docsrs, doc(cfg(feature = "image")))]
impl<T: DeviceType> Matrix<T> {
    /// A matrix of the pixels of an `image::GrayImage`, `RgbImage` or `RgbaImage` (any
    /// `ImageBuffer` of `Luma<u8>`, `Rgb<u8>`, `Rgba<u8>`; the element type follows:
    /// `u8`, [`Rgb8`], [`Rgba8`]): `height` rows of `width` pixels, row-major, copied in
    /// one pass. `Matrix::from(&img)` does the same.
    ///
    /// ```
    /// use skel::{Matrix, Rgb8};
    /// let img = image::RgbImage::from_pixel(4, 2, image::Rgb([1, 2, 3]));
    /// let m = Matrix::from_image(&img);
    /// assert_eq!((m.rows(), m.cols(), m[(1, 3)]), (2, 4, Rgb8::new(1, 2, 3)));
    /// assert_eq!(m.to_image()?, img);
    /// let grey = image::GrayImage::from_fn(3, 2, |x, y| image::Luma([(10 * y + x) as u8]));
    /// assert_eq!(Matrix::from_image(&grey)[(1, 2)], 12u8);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn from_image<Px, C>(img: &ImageBuffer<Px, C>) -> Self
    where
        Px: ImagePixel<Device = T>,
        C: Deref<Target = [u8]>,
    {
        Matrix::from_fn(img.height() as usize, img.width() as usize, pixel_at(img))
    }

    /// Overwrites the matrix with the pixels of `img`, reusing its memory (a frame buffer
    /// of a stream, page-locked with CUDA).
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] if the matrix is not `height` x `width` of `img` (nothing
    /// is written); a device error while copying stale ranges back.
    ///
    /// ```
    /// use skel::{Matrix, Rgba8};
    /// let img = image::RgbaImage::from_pixel(1, 3, image::Rgba([1, 2, 3, 4]));
    /// let mut m = Matrix::filled(3, 1, Rgba8::default());
    /// m.copy_from_image(&img)?;
    /// assert_eq!(m[(2, 0)], Rgba8::new(1, 2, 3, 4));
    /// assert!(m.copy_from_image(&image::RgbaImage::new(2, 2)).is_err());
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn copy_from_image<Px, C>(&mut self, img: &ImageBuffer<Px, C>) -> Result<()>
    where
        Px: ImagePixel<Device = T>,
        C: Deref<Target = [u8]>,
    {
        let (rows, cols) = (img.height() as usize, img.width() as usize);
        if (self.rows(), self.cols()) != (rows, cols) {
            return Err(Error::shape(
                "Matrix::copy_from_image",
                format!("a {}x{} image (height x width)", self.rows(), self.cols()),
                format!("{rows}x{cols}"),
            ));
        }
        let at = pixel_at(img);
        let dst = self.try_as_mut_slice()?;
        for (r, row) in dst.chunks_exact_mut(cols.max(1)).enumerate() {
            row.iter_mut().enumerate().for_each(|(c, p)| *p = at(r, c));
        }
        Ok(())
    }
}

fn to_image<Px: ImagePixel>(
    m: &Matrix<Px::Device>,
    what: &str,
) -> Result<ImageBuffer<Px, Vec<u8>>> {
    let too_big = |n: usize| {
        Error::InvalidArgument(format!(
            "{what}: a {}x{} matrix does not fit an image ({n} exceeds u32::MAX pixels per side)",
            m.rows(),
            m.cols()
        ))
    };
    let w = u32::try_from(m.cols()).map_err(|_| too_big(m.cols()))?;
    let h = u32::try_from(m.rows()).map_err(|_| too_big(m.rows()))?;
    let mut raw = Vec::with_capacity(m.len() * usize::from(Px::CHANNEL_COUNT));
    m.try_as_slice()?
        .iter()
        .for_each(|&p| Px::push_bytes(p, &mut raw));
    ImageBuffer::from_raw(w, h, raw).ok_or_else(|| {
        Error::InvalidArgument(format!("{what}: the pixels do not fill a {w}x{h} image"))
    })
}

/// `Matrix<$t>` -> `ImageBuffer<$px<u8>, Vec<u8>>` and the `From`/`TryFrom` impls, per pixel
/// type (`to_image` cannot be generic: the image type would not follow from the matrix).
macro_rules! image_interop {
    ($t:ty, $px:ident, $alias:literal, $example:literal) => {
        #[cfg_attr(docsrs, doc(cfg(feature = "image")))]
        impl Matrix<$t> {
            #[doc = concat!("A copy of the matrix as an `image::", $alias, "` (`cols` wide, `rows` high).")]
            ///
            /// # Errors
            /// [`Error::InvalidArgument`] if a side exceeds `u32::MAX` pixels; a device
            /// error while copying stale ranges back.
            ///
            /// ```
            #[doc = $example]
            /// ```
            pub fn to_image(&self) -> Result<ImageBuffer<$px<u8>, Vec<u8>>> {
                to_image(self, concat!("Matrix::to_image (", $alias, ")"))
            }
        }

        /// Same as [`Matrix::from_image`].
        #[cfg_attr(docsrs, doc(cfg(feature = "image")))]
        impl<C: Deref<Target = [u8]>> From<&ImageBuffer<$px<u8>, C>> for Matrix<$t> {
            fn from(img: &ImageBuffer<$px<u8>, C>) -> Self {
                Matrix::from_image(img)
            }
        }

        /// Same as [`Matrix::from_image`].
        #[cfg_attr(docsrs, doc(cfg(feature = "image")))]
        impl<C: Deref<Target = [u8]>> From<ImageBuffer<$px<u8>, C>> for Matrix<$t> {
            fn from(img: ImageBuffer<$px<u8>, C>) -> Self {
                Matrix::from_image(&img)
            }
        }

        #[doc = concat!("Same as `Matrix::to_image`: `", $alias, "::try_from(&matrix)?`.")]
        #[cfg_attr(docsrs, doc(cfg(feature = "image")))]
        impl TryFrom<&Matrix<$t>> for ImageBuffer<$px<u8>, Vec<u8>> {
            type Error = Error;
            fn try_from(m: &Matrix<$t>) -> Result<Self> {
                m.to_image()
            }
        }
    };
}

image_interop!(
    u8,
    Luma,
    "GrayImage",
    "let img = image::GrayImage::from_fn(3, 2, |x, y| image::Luma([(10 * y + x) as u8]));
let m = skel::Matrix::from_image(&img);
assert_eq!((m.rows(), m.cols(), m[(1, 2)]), (2, 3, 12));
assert_eq!(m.to_image()?, img);
# Ok::<(), skel::Error>(())"
);
image_interop!(
    Rgb8,
    Rgb,
    "RgbImage",
    "use skel::{Matrix, Rgb8};
let img = image::RgbImage::from_pixel(4, 2, image::Rgb([1, 2, 3]));
let m: Matrix<Rgb8> = Matrix::from(&img);
assert_eq!((m.rows(), m.cols(), m[(1, 3)]), (2, 4, Rgb8::new(1, 2, 3)));
assert_eq!(image::RgbImage::try_from(&m)?, img);
# Ok::<(), skel::Error>(())"
);
image_interop!(
    Rgba8,
    Rgba,
    "RgbaImage",
    "use skel::{Matrix, Rgba8};
let m = Matrix::from_fn(2, 1, |r, _| Rgba8::new(r as u8, 0, 0, 255));
let img: image::RgbaImage = m.to_image()?;
assert_eq!(img.get_pixel(0, 1).0, [1, 0, 0, 255]);
# Ok::<(), skel::Error>(())"
);
