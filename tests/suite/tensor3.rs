//! `Tensor3`, 3D MapOverlap (`Window3`) and matrix row views (issue 27 item 2):
//! `tensor3_suite!()` is expanded inside `backend_suite!`. Every stencil result is checked
//! against a plain-Rust model of the per-element definition (not only the `cpu` oracle,
//! which runs the same loops), over extents of 0, 1, primes and sizes that straddle the
//! GPU tiles (32 x 8 outputs, runs of 16 planes) and the Rayon chunks.

use skel::prelude::*;

/// A weighted sum over a window of radii given as uniforms: every element is weighed by
/// its position, so a wrong offset, stride or edge changes the result.
#[userfn]
pub fn box3(w: Window3<i64>, #[uniform] r0: i32, #[uniform] r1: i32, #[uniform] r2: i32) -> i64 {
    let mut s = 0i64;
    for a in -r0..r0 + 1 {
        for b in -r1..r1 + 1 {
            for c in -r2..r2 + 1 {
                let weight = (a * 49 + b * 7 + c + 200) as i64;
                s += w[(a as isize, b as isize, c as isize)] * weight;
            }
        }
    }
    s
}

/// The 7-point Laplacian of SkePU 3's heat example, in f32 (compared bit for bit).
#[userfn]
pub fn lap7(w: Window3<f32>, #[uniform] alpha: f32) -> f32 {
    w[(0, 0, 0)]
        + alpha
            * (w[(-1, 0, 0)]
                + w[(1, 0, 0)]
                + w[(0, -1, 0)]
                + w[(0, 1, 0)]
                + w[(0, 0, -1)]
                + w[(0, 0, 1)]
                - 6.0 * w[(0, 0, 0)])
}

#[userfn]
pub fn twice_i64(x: i64) -> i64 {
    2 * x
}

#[userfn]
pub fn flat_ix(#[index] i: usize, x: i64) -> i64 {
    i as i64 * 10 + x
}

#[userfn]
pub fn plus_i64(a: i64, b: i64) -> i64 {
    a + b
}

#[userfn]
pub fn rc_mark(#[index] (r, c): (usize, usize), x: i64) -> i64 {
    (r * 1000 + c) as i64 + x
}

/// Integer data of a tensor with no two neighbours alike.
pub fn tensor_data(d: (usize, usize, usize), seed: i64) -> Tensor3<i64> {
    Tensor3::from_fn(d.0, d.1, d.2, |i, j, k| {
        ((i as i64 * 7919 + j as i64 * 104_729 + k as i64 * 31 + seed) % 1009) - 500
    })
}

/// The model: `box3` at every output by the definition (the edge mode per axis).
pub fn box3_model(
    t: &[i64],
    d: (usize, usize, usize),
    r: (usize, usize, usize),
    edge: Edge,
    pad: i64,
    keep: &[i64],
) -> Vec<i64> {
    let (d0, d1, d2) = d;
    let at = |i: isize, j: isize, k: isize| -> i64 {
        let inside = |v: isize, n: usize| v >= 0 && (v as usize) < n;
        let fix = |v: isize, n: usize| match edge {
            Edge::Duplicate => v.clamp(0, n as isize - 1) as usize,
            _ => v.rem_euclid(n as isize) as usize,
        };
        if inside(i, d0) && inside(j, d1) && inside(k, d2) {
            return t[(i as usize * d1 + j as usize) * d2 + k as usize];
        }
        match edge {
            Edge::Duplicate | Edge::Cyclic => t[(fix(i, d0) * d1 + fix(j, d1)) * d2 + fix(k, d2)],
            _ => pad,
        }
    };
    let mut out = keep.to_vec();
    let (r0, r1, r2) = (r.0 as isize, r.1 as isize, r.2 as isize);
    for i in 0..d0 {
        for j in 0..d1 {
            for k in 0..d2 {
                let interior = i >= r.0
                    && i + r.0 < d0
                    && j >= r.1
                    && j + r.1 < d1
                    && k >= r.2
                    && k + r.2 < d2;
                if edge == Edge::None && !interior {
                    continue;
                }
                let mut s = 0i64;
                for a in -r0..=r0 {
                    for b in -r1..=r1 {
                        for c in -r2..=r2 {
                            let weight = (a * 49 + b * 7 + c + 200) as i64;
                            s += at(i as isize + a, j as isize + b, k as isize + c) * weight;
                        }
                    }
                }
                out[(i * d1 + j) * d2 + k] = s;
            }
        }
    }
    out
}

pub const EDGES: [Edge; 4] = [Edge::Duplicate, Edge::Cyclic, Edge::Pad, Edge::None];

/// Extents and radii: empty, one element, primes, flat and thin tensors, and sizes around
/// the GPU tiles (32 along k, 8 along j, runs of 16 planes).
/// Extents or radii along the three axes.
pub type Dims3 = (usize, usize, usize);

pub const CASES: &[(Dims3, Dims3)] = &[
    ((0, 3, 3), (0, 1, 1)),
    ((3, 0, 3), (1, 0, 1)),
    ((1, 1, 1), (0, 0, 0)),
    ((2, 2, 2), (1, 1, 1)),
    ((3, 5, 7), (1, 1, 1)),
    ((7, 3, 2), (1, 1, 1)),
    ((1, 13, 37), (0, 2, 3)),
    ((17, 9, 33), (1, 1, 1)),
    ((19, 11, 5), (2, 2, 2)),
    ((5, 6, 4), (2, 3, 2)),
    ((33, 17, 65), (1, 1, 1)),
];

#[macro_export]
macro_rules! tensor3_suite {
    () => {
        use $crate::suite::tensor3::*;

        #[test]
        fn overlap_3d_every_edge_and_extent_matches_the_model() {
            require!();
            for &(d, r) in CASES {
                let t = tensor_data(d, 3);
                let n = d.0 * d.1 * d.2;
                let ri = (r.0 as i32, r.1 as i32, r.2 as i32);
                for edge in EDGES {
                    let keep: Vec<i64> = (0..n as i64).map(|x| -x - 7).collect();
                    let mut out = Tensor3::from_vec(d.0, d.1, d.2, keep.clone()).unwrap();
                    MapOverlap::new(box3, r)
                        .edge(edge)
                        .pad(11)
                        .uniforms(ri)
                        .backend(B)
                        .run(&t, &mut out)
                        .unwrap();
                    let want = box3_model(t.as_slice(), d, r, edge, 11, &keep);
                    assert_eq!(out.to_vec(), want, "{d:?} radius {r:?} {edge:?}");
                }
            }
        }

        #[test]
        fn overlap_3d_f32_is_bit_identical_to_cpu_and_default_edge_is_none() {
            require!();
            for d in [(4, 4, 4), (16, 16, 16), (31, 7, 67)] {
                let t = Tensor3::from_fn(d.0, d.1, d.2, |i, j, k| ((i * 7 + j * 3 + k) % 19) as f32 * 0.37);
                let (mut got, mut want) = (Tensor3::filled(d.0, d.1, d.2, -1.0f32), Tensor3::filled(d.0, d.1, d.2, -1.0f32));
                MapOverlap::new(lap7, (1, 1, 1)).uniforms((0.1,)).backend(B).run(&t, &mut got).unwrap();
                MapOverlap::new(lap7, (1, 1, 1)).uniforms((0.1,)).backend(Backend::Cpu).run(&t, &mut want).unwrap();
                let bits = |x: &Tensor3<f32>| x.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "{d:?}");
                assert_eq!(got[(0, 1, 1)], -1.0, "Edge::None leaves the border");
                for edge in [Edge::Duplicate, Edge::Cyclic, Edge::Pad] {
                    MapOverlap::new(lap7, (1, 1, 1)).edge(edge).uniforms((0.1,)).backend(B).run(&t, &mut got).unwrap();
                    MapOverlap::new(lap7, (1, 1, 1)).edge(edge).uniforms((0.1,)).backend(Backend::Cpu).run(&t, &mut want).unwrap();
                    assert_eq!(bits(&got), bits(&want), "{d:?} {edge:?}");
                }
            }
        }

        #[test]
        fn overlap_3d_bad_operands_are_errors_that_write_nothing() {
            require!();
            let t = tensor_data((4, 3, 5), 1);
            let mut out = Tensor3::filled(4, 3, 5, 9i64);
            let err = MapOverlap::new(box3, (1, 2, 1)).uniforms((1, 2, 1)).backend(B).run(&t, &mut out).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
            assert!(err.to_string().contains("axis 1"), "{err}");
            let mut wrong = Tensor3::filled(4, 5, 3, 9i64);
            let err = MapOverlap::new(box3, (1, 1, 1)).uniforms((1, 1, 1)).backend(B).run(&t, &mut wrong).unwrap_err();
            assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
            assert!(err.to_string().contains("4x3x5 tensor"), "{err}");
            let m = Matrix::filled(4, 15, 1i64);
            let err = MapOverlap::new(box3, (1, 1, 1)).uniforms((1, 1, 1)).backend(B).run(&m, &mut out).unwrap_err();
            assert!(err.to_string().contains("Tensor3"), "{err}");
            assert_eq!(out.to_vec(), vec![9; 60]);
            assert_eq!(wrong.to_vec(), vec![9; 60]);
        }

        #[test]
        fn tensor3_is_a_flat_container_for_map_reduce_and_map_reduce() {
            require!();
            for d in [(0, 2, 2), (1, 1, 1), (2, 3, 5), (7, 11, 13), (17, 33, 31)] {
                let n = d.0 * d.1 * d.2;
                let a = tensor_data(d, 5);
                let b = tensor_data(d, 9);
                let mut out = Tensor3::zeroed(d.0, d.1, d.2);
                Map::new(plus_i64).backend(B).run(&a, &b, &mut out).unwrap();
                let want: Vec<i64> = a.as_slice().iter().zip(b.as_slice()).map(|(x, y)| x + y).collect();
                assert_eq!(out.to_vec(), want, "{d:?}");
                Map::new(flat_ix).backend(B).run(&a, &mut out).unwrap();
                assert!(out.as_slice().iter().enumerate().all(|(i, &v)| v == i as i64 * 10 + a.as_slice()[i]), "{d:?}");
                let s: i64 = Reduce::new(plus_i64).backend(B).run(&a).unwrap();
                assert_eq!(s, a.as_slice().iter().sum::<i64>(), "{d:?}");
                let dot: i64 = MapReduce::new(twice_i64, plus_i64).backend(B).run(&b).unwrap();
                assert_eq!(dot, 2 * b.as_slice().iter().sum::<i64>(), "{d:?}");
                // A lazy Map of a tensor is a tensor too.
                let s: i64 = Reduce::new(plus_i64).backend(B).run(&Map::new(twice_i64).lazy(&a)).unwrap();
                assert_eq!(s, 2 * a.as_slice().iter().sum::<i64>(), "{d:?}");
                // Tensors and vectors of one length are different shapes.
                let v = Vector::from(vec![1i64; n]);
                let err = Map::new(plus_i64).backend(B).run(&a, &v, &mut out).unwrap_err();
                assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
                let err = Map::new(rc_mark).backend(B).run(&a, &mut out).unwrap_err();
                assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
            }
        }

        #[test]
        fn tensor3_stays_coherent_between_device_and_host() {
            require!();
            let d = (9, 10, 11);
            let mut t = tensor_data(d, 2);
            let mut u = Tensor3::zeroed(9, 10, 11);
            Map::new(twice_i64).backend(B).run(&t, &mut u).unwrap();
            t[(3, 4, 5)] = 1000;
            Map::new(twice_i64).backend(B).run(&t, &mut u).unwrap();
            assert_eq!(u[(3, 4, 5)], 2000);
            let mut w = Tensor3::zeroed(9, 10, 11);
            MapOverlap::new(box3, (1, 1, 1)).edge(Edge::Cyclic).uniforms((1, 1, 1)).backend(B).run(&u, &mut w).unwrap();
            let want = box3_model(u.as_slice(), d, (1, 1, 1), Edge::Cyclic, 0, &vec![0; 990]);
            assert_eq!(w.to_vec(), want);
            u.as_mut_slice()[0] = 5;
            MapOverlap::new(box3, (1, 1, 1)).edge(Edge::Cyclic).uniforms((1, 1, 1)).backend(B).run(&u, &mut w).unwrap();
            let want = box3_model(u.as_slice(), d, (1, 1, 1), Edge::Cyclic, 0, &vec![0; 990]);
            assert_eq!(w.to_vec(), want);
            assert_eq!(format!("{:?}", Tensor3::from_vec(1, 1, 2, vec![1, 2]).unwrap()), "Tensor3(1x1x2, [[[1, 2]]])");
        }

        #[test]
        fn matrix_row_views_in_and_out_of_skeletons() {
            require!();
            for (rows, cols) in [(1, 1), (5, 3), (37, 41), (300, 257)] {
                let m = Matrix::from_fn(rows, cols, |r, c| (r * 1000 + c) as i64);
                for band in [0..rows, 0..1, rows / 2..rows, rows / 3..rows / 3] {
                    let view = m.view_rows(band.clone());
                    let mut out = Matrix::filled(band.len(), cols, -1i64);
                    Map::new(rc_mark).backend(B).run(&view, &mut out).unwrap();
                    for r in 0..band.len() {
                        for c in 0..cols {
                            let want = (r * 1000 + c) as i64 + ((band.start + r) * 1000 + c) as i64;
                            assert_eq!(out[(r, c)], want, "{rows}x{cols} rows {band:?} at ({r}, {c})");
                        }
                    }
                    let s: i64 = Reduce::new(plus_i64).backend(B).run(&view).unwrap();
                    assert_eq!(s, view.as_slice().iter().sum::<i64>());
                    // Into a band of a matrix: only the band changes.
                    let mut target = Matrix::filled(rows, cols, 7i64);
                    Map::new(twice_i64).backend(B).run(&view, &mut target.view_rows_mut(band.clone())).unwrap();
                    for r in 0..rows {
                        for c in 0..cols {
                            let want = if band.contains(&r) { 2 * m[(r, c)] } else { 7 };
                            assert_eq!(target[(r, c)], want, "{rows}x{cols} rows {band:?}");
                        }
                    }
                }
            }
            // A view of a matrix a device wrote: read in place, and written back in place.
            let src = Matrix::from_fn(64, 48, |r, c| (r * 48 + c) as i64);
            let mut m = Matrix::zeroed(64, 48);
            Map::new(twice_i64).backend(B).run(&src, &mut m).unwrap();
            let mut out = Matrix::zeroed(16, 48);
            Map::new(twice_i64).backend(B).run(&m.view_rows(16..32), &mut out).unwrap();
            assert_eq!(out.row(0)[5], 4 * (16 * 48 + 5));
            Map::new(twice_i64).backend(B).run(&out, &mut m.view_rows_mut(48..)).unwrap();
            assert_eq!(m[(48, 5)], 8 * (16 * 48 + 5));
            assert_eq!(m[(47, 5)], 2 * (47 * 48 + 5));
            let view = m.view_rows(60..);
            assert_eq!(view.row(3), m.row(63));
        }

        #[test]
        #[should_panic(expected = "matrix row view range end 5 out of range for length 4")]
        fn matrix_row_views_out_of_range_panic_like_slicing() {
            let m: Matrix<u8> = Matrix::zeroed(4, 2);
            let _ = m.view_rows(2..5);
        }

        proptest::proptest! {
            #![proptest_config(proptest::prelude::ProptestConfig { cases: 24, ..Default::default() })]

            #[test]
            fn prop_overlap_3d_matches_the_model(
                d0 in 1usize..7, d1 in 1usize..7, d2 in 1usize..40,
                r0 in 0usize..3, r1 in 0usize..3, r2 in 0usize..3,
                edge_pick in 0usize..4, seed in 0i64..1000,
            ) {
                if !available(B) {
                    return Ok(());
                }
                let r = (r0.min(d0 / 2), r1.min(d1 / 2), r2.min(d2 / 2));
                let d = (d0, d1, d2);
                let t = tensor_data(d, seed);
                let keep = vec![3i64; d0 * d1 * d2];
                let mut out = Tensor3::filled(d0, d1, d2, 3i64);
                let edge = EDGES[edge_pick];
                MapOverlap::new(box3, r)
                    .edge(edge)
                    .pad(-2)
                    .uniforms((r.0 as i32, r.1 as i32, r.2 as i32))
                    .backend(B)
                    .run(&t, &mut out)
                    .unwrap();
                let want = box3_model(t.as_slice(), d, r, edge, -2, &keep);
                proptest::prop_assert_eq!(out.to_vec(), want);
            }
        }
    };
}
