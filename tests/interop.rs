//! The `ndarray` and `image` interop (features `ndarray`, `image`): round trips, strided
//! and reversed layouts, empty arrays, shape errors, and the 8-bit pixel types in kernels on
//! every backend against the `cpu` backend.

mod common;

use image::{GrayImage, ImageBuffer, Luma, Rgb, RgbImage, Rgba, RgbaImage};
use ndarray::{s, Array1, Array2, ArrayView2, ShapeBuilder};
use proptest::prelude::*;
use skel::prelude::*;
use skel::{Rgb8, Rgba8};

const BACKENDS: [Backend; 4] = [Backend::Cpu, Backend::Rayon, Backend::Cuda, Backend::OpenCl];

fn backends() -> impl Iterator<Item = Backend> {
    BACKENDS.into_iter().filter(|&b| common::available(b))
}

#[test]
fn matrix_array2_round_trip_standard_layout() {
    let a = Array2::from_shape_fn((5, 7), |(r, c)| (100 * r + c) as f32);
    let m = Matrix::from_ndarray(&a);
    assert_eq!((m.rows(), m.cols()), (5, 7));
    assert_eq!(m.as_slice(), a.as_slice().unwrap());
    assert_eq!(m.to_ndarray().unwrap(), a);
    assert_eq!(Array2::try_from(&m).unwrap(), a);
    assert_eq!(m.as_ndarray().unwrap(), a.view());
    let by_value: Matrix<f32> = a.clone().into();
    assert_eq!(by_value, m);
}

#[test]
fn non_standard_layouts_keep_the_logical_order() {
    let a = Array2::from_shape_fn((6, 9), |(r, c)| (10 * r + c) as i32);
    let fortran = Array2::from_shape_vec((6, 9).f(), a.t().iter().copied().collect()).unwrap();
    assert_eq!(fortran, a);
    assert!(!fortran.is_standard_layout());
    let views: [ArrayView2<i32>; 5] = [
        a.t(),
        fortran.view(),
        a.slice(s![1..5, 2..8;2]),
        a.slice(s![..;-1, ..]),
        a.slice(s![..;-2, ..;-3]),
    ];
    for v in views {
        let m = Matrix::from_ndarray(&v);
        assert_eq!((m.rows(), m.cols()), v.dim());
        for ((r, c), x) in v.indexed_iter() {
            assert_eq!(
                m[(r, c)],
                *x,
                "({r}, {c}) of a view with strides {:?}",
                v.strides()
            );
        }
        assert_eq!(m.to_ndarray().unwrap(), v);
        assert_eq!(Matrix::from(v), m);
    }
}

#[test]
fn empty_arrays() {
    for shape in [(0, 0), (0, 5), (4, 0)] {
        let a = Array2::<f64>::zeros(shape);
        let m = Matrix::from(&a);
        assert_eq!((m.rows(), m.cols(), m.len()), (shape.0, shape.1, 0));
        assert_eq!(m.to_ndarray().unwrap().dim(), shape);
        assert_eq!(m.as_ndarray().unwrap().dim(), shape);
    }
    let v = Vector::from_ndarray(&Array1::<u8>::zeros(0));
    assert!(v.is_empty());
    assert_eq!(v.to_ndarray().unwrap().len(), 0);
}

#[test]
fn vector_array1_round_trip_and_strides() {
    let a = Array1::from_shape_fn(37, |i| i as u64 * 3);
    let v = Vector::from(&a);
    assert_eq!(v.to_ndarray().unwrap(), a);
    assert_eq!(Array1::try_from(&v).unwrap(), a);
    let rev = Vector::from(a.slice(s![..;-1]));
    assert_eq!(rev.to_vec(), a.iter().rev().copied().collect::<Vec<_>>());
    let step = Vector::from_ndarray(&a.slice(s![3..;5]));
    assert_eq!(
        step.to_vec(),
        (3..37).step_by(5).map(|i| i as u64 * 3).collect::<Vec<_>>()
    );
    let column = Array2::from_shape_fn((4, 3), |(r, c)| (r * 3 + c) as u64);
    assert_eq!(Vector::from(column.column(1)).to_vec(), vec![1, 4, 7, 10]);
}

#[userfn]
fn scale(x: f32) -> f32 {
    x * 3.0 - 1.0
}

#[test]
fn views_see_device_results_and_writes_reach_the_device() {
    let a = Array2::from_shape_fn((33, 17), |(r, c)| (r as f32) - 0.5 * c as f32);
    let want = a.mapv(|x| x * 3.0 - 1.0);
    for b in backends() {
        let m = Matrix::from(&a);
        let mut out = Matrix::zeroed(33, 17);
        Map::new(scale).backend(b).run(&m, &mut out).unwrap();
        assert_eq!(out.as_ndarray().unwrap(), want, "{b}");
        // A host write through the view must be seen by the next device call.
        out.as_ndarray_mut().unwrap().row_mut(2).fill(1.0);
        let mut again = Matrix::zeroed(33, 17);
        Map::new(scale).backend(b).run(&out, &mut again).unwrap();
        assert_eq!(
            again.as_ndarray().unwrap().row(2),
            Array1::from_elem(17, 2.0),
            "{b}"
        );
        assert_eq!(again[(3, 4)], want[(3, 4)] * 3.0 - 1.0, "{b}");
        let mut v = Vector::from(a.row(5));
        v.as_ndarray_mut().unwrap().fill(4.0);
        let mut vout = Vector::zeroed(17);
        Map::new(scale).backend(b).run(&v, &mut vout).unwrap();
        assert_eq!(
            vout.as_ndarray().unwrap(),
            Array1::from_elem(17, 11.0),
            "{b}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn any_slice_of_any_layout_round_trips(
        rows in 0usize..9, cols in 0usize..9, fortran: bool,
        r0 in 0usize..4, c0 in 0usize..4, rs in 1isize..4, cs in 1isize..4,
        flip_r: bool, flip_c: bool,
    ) {
        let data: Vec<i16> = (0..rows * cols).map(|i| i as i16).collect();
        let a = match fortran {
            true => Array2::from_shape_vec((rows, cols).f(), data).unwrap(),
            false => Array2::from_shape_vec((rows, cols), data).unwrap(),
        };
        let (rs, cs) = (if flip_r { -rs } else { rs }, if flip_c { -cs } else { cs });
        let v = a.slice(s![r0.min(rows).., c0.min(cols)..]);
        let v = v.slice(s![..;rs, ..;cs]);
        let m = Matrix::from_ndarray(&v);
        prop_assert_eq!((m.rows(), m.cols()), v.dim());
        prop_assert_eq!(m.to_vec(), v.iter().copied().collect::<Vec<_>>());
        prop_assert_eq!(m.to_ndarray().unwrap(), v);
    }
}

#[test]
fn images_round_trip() {
    let grey = GrayImage::from_fn(13, 5, |x, y| Luma([(x * 17 + y * 3) as u8]));
    let m = Matrix::from_image(&grey);
    assert_eq!(
        (m.rows(), m.cols(), m[(4, 12)]),
        (5, 13, (12 * 17 + 4 * 3) as u8)
    );
    assert_eq!(m.to_image().unwrap(), grey);

    let rgb = RgbImage::from_fn(7, 3, |x, y| Rgb([x as u8, y as u8, (x * y) as u8]));
    let m: Matrix<Rgb8> = Matrix::from(&rgb);
    assert_eq!(m[(2, 6)], Rgb8::new(6, 2, 12));
    assert_eq!(RgbImage::try_from(&m).unwrap(), rgb);
    assert_eq!(Matrix::from(rgb.clone()), m);

    let rgba = RgbaImage::from_fn(4, 6, |x, y| Rgba([x as u8, y as u8, 9, 200]));
    let m = Matrix::from_image(&rgba);
    assert_eq!(m[(5, 3)], Rgba8::new(3, 5, 9, 200));
    assert_eq!(m.to_image().unwrap(), rgba);
}

#[test]
fn image_edge_cases() {
    for (w, h) in [(0, 0), (0, 4), (3, 0)] {
        let m = Matrix::<Rgb8>::from_image(&RgbImage::new(w, h));
        assert_eq!((m.rows(), m.cols()), (h as usize, w as usize));
        assert_eq!(m.to_image().unwrap().dimensions(), (w, h));
    }
    // A container longer than the image: only the image's pixels count.
    let mut raw: Vec<u8> = (0..2 * 2 * 3).collect();
    raw.extend([255; 7]);
    let img: ImageBuffer<Rgb<u8>, Vec<u8>> = ImageBuffer::from_raw(2, 2, raw).unwrap();
    let m = Matrix::from_image(&img);
    assert_eq!(
        m.to_vec(),
        [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]]
            .map(Rgb8::from)
            .to_vec()
    );
    // A borrowed container works as well as an owned one.
    let bytes = [1u8, 2, 3, 4];
    let borrowed: ImageBuffer<Luma<u8>, &[u8]> = ImageBuffer::from_raw(2, 2, &bytes[..]).unwrap();
    assert_eq!(Matrix::from_image(&borrowed).to_vec(), vec![1, 2, 3, 4]);
}

#[test]
fn copy_from_image_reuses_the_matrix_or_says_why_not() {
    let mut m = Matrix::filled(2, 3, 7u8);
    let err = m.copy_from_image(&GrayImage::new(2, 3)).unwrap_err();
    assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
    assert!(
        err.to_string().contains("2x3") && err.to_string().contains("3x2"),
        "{err}"
    );
    assert_eq!(m.to_vec(), vec![7; 6], "a refused copy writes nothing");
    let img = GrayImage::from_fn(3, 2, |x, y| Luma([(y * 3 + x) as u8]));
    m.copy_from_image(&img).unwrap();
    assert_eq!(m.to_vec(), vec![0, 1, 2, 3, 4, 5]);
}

#[userfn]
fn to_luma(p: Rgb8) -> u8 {
    ((p.r as u32 * 54 + p.g as u32 * 183 + p.b as u32 * 19) >> 8) as u8
}

#[userfn]
fn swap(p: Rgba8) -> Rgba8 {
    Rgba8 {
        r: p.b,
        g: p.g,
        b: p.r,
        a: 255 - p.a,
    }
}

#[test]
fn pixel_types_run_on_every_backend() {
    let rgb = RgbImage::from_fn(61, 37, |x, y| {
        Rgb([(x * 4) as u8, (y * 7) as u8, (x ^ y) as u8])
    });
    let rgba = RgbaImage::from_fn(29, 31, |x, y| {
        Rgba([x as u8, y as u8, (x + y) as u8, x as u8])
    });
    let (m, m4) = (Matrix::from(&rgb), Matrix::from(&rgba));
    let reference = |b: Backend| {
        let mut grey = Matrix::zeroed(37, 61);
        Map::new(to_luma).backend(b).run(&m, &mut grey).unwrap();
        let mut swapped = Matrix::filled(31, 29, Rgba8::default());
        Map::new(swap).backend(b).run(&m4, &mut swapped).unwrap();
        (grey.to_image().unwrap(), swapped.to_image().unwrap())
    };
    let want = reference(Backend::Cpu);
    assert_eq!(
        want.0.get_pixel(60, 36).0[0],
        to_luma::call(Rgb8::new(240, 252, 24))
    );
    assert_eq!(want.1.get_pixel(3, 2).0, [5, 2, 3, 252]);
    for b in backends() {
        assert!(reference(b) == want, "{b} differs from cpu");
    }
}
