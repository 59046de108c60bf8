//! SkePU's example programs (`examples/skepu/`) on every backend, each against its
//! plain-Rust reference: exactly where the order of operations is fixed (Map, MapArray,
//! MapOverlap, MapPairs, max-folds), within a tolerance where a reduction or scan may
//! reorder. Small sizes, so the debug build stays fast; a backend without a device prints
//! `skipped: no <backend> device` unless `SKEL_REQUIRE` names it.

// Every example is a crate of its own with `mod common;`, so this file, which includes them
// all, holds one copy of the helpers per example.
#![allow(clippy::duplicate_mod)]

mod common;

use skel::prelude::*;

macro_rules! examples {
    ($($name:ident: $path:literal)*) => {$(
        // The examples' `main` and command-line helpers are not called from here.
        #[allow(dead_code)]
        #[path = $path]
        mod $name;
    )*};
}

examples! {
    dot: "../examples/skepu/dot.rs"
    ppmcc: "../examples/skepu/ppmcc.rs"
    psnr: "../examples/skepu/psnr.rs"
    cma: "../examples/skepu/cma.rs"
    mandelbrot: "../examples/skepu/mandelbrot.rs"
    nbody: "../examples/skepu/nbody.rs"
    coulombic: "../examples/skepu/coulombic.rs"
    median: "../examples/skepu/median.rs"
    life: "../examples/skepu/life.rs"
    mvmult: "../examples/skepu/mvmult.rs"
    mmmult: "../examples/skepu/mmmult.rs"
    pairs: "../examples/skepu/pairs.rs"
    taylor: "../examples/skepu/taylor.rs"
    montecarlo: "../examples/skepu/montecarlo.rs"
    hotspot: "../examples/skepu/hotspot.rs"
    fdtd2d: "../examples/skepu/fdtd2d.rs"
    heat: "../examples/skepu/heat.rs"
    edgedetect: "../examples/skepu/edgedetect.rs"
    backprop: "../examples/skepu/backprop.rs"
    nw: "../examples/skepu/nw.rs"
}

#[path = "../examples/skepu/common.rs"]
mod check;

fn backends() -> Vec<Backend> {
    [Backend::Cpu, Backend::Rayon, Backend::OpenCl, Backend::Cuda]
        .into_iter()
        .filter(|&b| common::available(b))
        .collect()
}

#[test]
fn dot_product() {
    for b in backends() {
        for n in [0, 1, 1009, 65537] {
            let (x, y) = dot::inputs(n);
            let got = dot::compute(b, &x, &y).unwrap();
            let want = dot::reference(&x, &y);
            assert!(
                check::close(got as f64, want, 1e-4),
                "{b} n={n}: {got} vs {want}"
            );
        }
    }
}

#[test]
fn ppmcc() {
    for b in backends() {
        for n in [3, 1009, 65537] {
            let (x, y) = ppmcc::inputs(n);
            let got = ppmcc::compute(b, &x, &y).unwrap();
            let want = ppmcc::reference(&x, &y);
            assert!(check::close(got, want, 1e-3), "{b} n={n}: {got} vs {want}");
        }
        let err = ppmcc::compute(b, &[1.0], &[2.0]).unwrap_err();
        assert!(
            err.to_string().contains("at least 2 samples, got 1"),
            "{b}: {err}"
        );
    }
}

#[test]
fn psnr() {
    for b in backends() {
        for n in [17, 128] {
            let (original, noisy) = psnr::inputs(n);
            let got = psnr::compute(b, &original, &noisy).unwrap();
            let want = psnr::reference(&original, &noisy);
            assert!(check::close(got, want, 1e-5), "{b} n={n}: {got} vs {want}");
        }
        let (same, _) = psnr::inputs(9);
        assert_eq!(
            psnr::compute(b, &same, &same).unwrap(),
            f64::INFINITY,
            "{b}"
        );
        let empty = Matrix::zeroed(0, 0);
        let err = psnr::compute(b, &empty, &empty).unwrap_err();
        assert!(matches!(err, skel::Error::InvalidArgument(_)), "{b}: {err}");
    }
}

#[test]
fn cumulative_moving_average() {
    for b in backends() {
        for n in [0, 1, 1009, 65537] {
            let x = cma::inputs(n);
            let got = cma::compute(b, &x).unwrap();
            assert!(
                check::all_close(&got, &cma::reference(&x), 1e-4),
                "{b} n={n}"
            );
        }
    }
}

#[test]
fn mandelbrot() {
    for b in backends() {
        for (h, w) in [(1, 1), (17, 40), (48, 96)] {
            let got = mandelbrot::compute(b, h, w).unwrap();
            assert!(got == mandelbrot::reference(h, w), "{b} {h}x{w}");
        }
    }
}

#[test]
fn nbody_step() {
    for b in backends() {
        for n in [1, 7, 300] {
            let ps = nbody::inputs(n);
            assert_eq!(
                nbody::compute(b, &ps).unwrap(),
                nbody::reference(&ps),
                "{b} n={n}"
            );
        }
    }
}

#[test]
fn coulombic_potential() {
    for b in backends() {
        for (atoms, n) in [(1, 1), (50, 33)] {
            let a = coulombic::inputs(atoms, n);
            let got = coulombic::compute(b, &a, n).unwrap();
            assert!(
                got == coulombic::reference(&a, n),
                "{b} {atoms} atoms, {n}x{n}"
            );
        }
    }
}

#[test]
fn median_filter() {
    for b in backends() {
        for n in [5, 37, 64] {
            let image = median::inputs(n);
            let got = median::compute(b, &image).unwrap();
            assert!(got == median::reference(&image), "{b} {n}x{n}");
        }
    }
}

#[test]
fn game_of_life() {
    for b in backends() {
        for (n, generations) in [(3, 1), (17, 0), (17, 10), (40, 7)] {
            let board = life::inputs(n);
            let got = life::compute(b, &board, generations).unwrap();
            let want = life::reference(&board, generations);
            assert!(got == want, "{b} {n}x{n}, {generations} generations");
        }
    }
}

#[test]
fn matrix_vector() {
    for b in backends() {
        for (rows, cols) in [(1, 1), (33, 36), (257, 260)] {
            let (a, x) = mvmult::inputs(rows, cols);
            let got = mvmult::compute(b, &a, &x).unwrap();
            assert!(
                check::all_close(&got, &mvmult::reference(&a, &x), 1e-4),
                "{b} {rows}x{cols}"
            );
        }
        let (a, x) = mvmult::inputs(4, 5);
        let err = mvmult::compute(b, &a, &x[..4]).unwrap_err();
        assert!(
            matches!(err, skel::Error::ShapeMismatch { .. }),
            "{b}: {err}"
        );
    }
}

#[test]
fn matrix_matrix() {
    for b in backends() {
        for n in [1, 17, 64] {
            let (x, y) = mmmult::inputs(n);
            assert!(
                mmmult::compute(b, &x, &y).unwrap() == mmmult::reference(&x, &y),
                "{b} n={n}"
            );
        }
        let (x, _) = mmmult::inputs(3);
        let err = mmmult::compute(b, &x, &x).unwrap_err();
        assert!(err.to_string().contains("rows of B"), "{b}: {err}");
    }
}

#[test]
fn pairwise_distances() {
    for b in backends() {
        for n in [1, 33, 200] {
            let (v, h) = pairs::inputs(n);
            assert!(
                pairs::compute(b, &v, &h).unwrap() == pairs::reference(&v, &h),
                "{b} n={n}"
            );
        }
    }
}

#[test]
fn taylor_series() {
    for b in backends() {
        for (x, terms) in [(0.5, 1), (0.5, 10), (-0.5, 1000), (1.0, 1000)] {
            let got = taylor::compute(b, x, terms).unwrap();
            let want = taylor::reference(x, terms);
            assert!(
                check::close(got as f64, want, 1e-5),
                "{b} x={x} terms={terms}: {got} vs {want}"
            );
        }
    }
}

#[path = "../examples/skepu/heat3d.rs"]
#[allow(dead_code)]
mod heat3d;

#[test]
fn heat3d_window3_matches_cpu_plain_rust_and_the_index_map_bit_for_bit() {
    for b in backends() {
        // A 1^3 grid is too small for a window of radius 1: an error, nothing computed.
        let err = heat3d::compute(b, &heat3d::inputs(1), 1).unwrap_err();
        assert!(err.to_string().contains("radius 1"), "{b}: {err}");
        for n in [2, 5, 17, 33] {
            let grid = heat3d::inputs(n);
            let got = heat3d::compute(b, &grid, 4).unwrap();
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            let oracle = heat3d::compute(Backend::Cpu, &grid, 4).unwrap();
            assert_eq!(
                bits(got.as_slice()),
                bits(oracle.as_slice()),
                "{b} n={n}: cpu"
            );
            assert_eq!(
                bits(got.as_slice()),
                bits(&heat3d::reference(&grid, 4)),
                "{b} n={n}: plain Rust"
            );
            let flat = heat3d::compute_flat(b, &grid, 4).unwrap();
            assert_eq!(bits(got.as_slice()), bits(&flat), "{b} n={n}: index Map");
            assert_eq!(
                bits(&heat3d::compute_rayon(&grid, 4)),
                bits(&flat),
                "n={n}: hand Rayon"
            );
        }
    }
}

#[test]
fn montecarlo_pi() {
    for b in backends() {
        for n in [0, 1, 1009, 65537, 1 << 20] {
            let got = montecarlo::compute(b, n).unwrap();
            assert_eq!(got, montecarlo::reference(n), "{b} n={n}");
        }
        let pi = montecarlo::estimate(montecarlo::compute(b, 1 << 20).unwrap(), 1 << 20);
        assert!((pi - std::f64::consts::PI).abs() < 0.01, "{b}: {pi}");
    }
}

/// The ports in SkePU 3's MapOverlap form (issue 27) on every backend, bit for bit against
/// their plain-Rust and hand-written Rayon versions.
fn ported(b: Backend, r: skel::Result<Vec<f32>>, want: &[f32], what: &str) {
    let got = r.unwrap_or_else(|e| panic!("{b} {what}: {e}"));
    let same = got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|(g, w)| g.to_bits() == w.to_bits());
    assert!(same, "{b} {what}");
}

#[test]
fn hotspot_port() {
    for b in backends() {
        for n in [2, 3, 17, 64] {
            let (t, p) = hotspot::inputs(n);
            let want = hotspot::reference(&t, &p, 4);
            assert_eq!(hotspot::hand_rayon(&t, &p, 4), want, "hand-written {n}");
            let got = hotspot::compute(b, &t, &p, 4).map(|m| m.to_vec());
            ported(b, got, &want.to_vec(), &format!("hotspot {n}"));
        }
    }
}

#[test]
fn fdtd2d_port() {
    for b in backends() {
        for n in [2, 5, 33] {
            let f = fdtd2d::inputs(n);
            let want = fdtd2d::hand_rayon(&f, 3).to_vec();
            let got = fdtd2d::compute(b, &f, 3).map(|f| f.to_vec());
            ported(b, got, &want, &format!("fdtd2d {n}"));
            let idx = fdtd2d::compute_index_map(b, &f, 3).unwrap().to_vec();
            assert_eq!(idx, want, "{b} fdtd2d index Map {n}");
        }
    }
}

#[test]
fn heat_red_black_port() {
    for b in backends() {
        for n in [2, 3, 8, 41] {
            let g = heat::inputs(n);
            let want = heat::reference(&g, 3);
            assert_eq!(heat::hand_rayon(&g, 3), want, "hand-written {n}");
            let got = heat::compute(b, &g, 3).map(|m| m.to_vec());
            ported(b, got, &want.to_vec(), &format!("heat {n}"));
            let idx = heat::compute_index_map(b, &g, 3).unwrap();
            assert_eq!(idx, want, "{b} heat index Map {n}");
        }
    }
}

#[test]
fn edgedetect_port() {
    let filter = Vector::from(edgedetect::SOBEL.to_vec());
    for b in backends() {
        for n in [2, 3, 31, 64] {
            let img = edgedetect::synthetic(n);
            let want = edgedetect::hand_rayon(&img, &edgedetect::SOBEL).to_vec();
            let plain = edgedetect::sequential(&img, &edgedetect::SOBEL).to_vec();
            assert_eq!(plain, want, "sequential {n}");
            let got = edgedetect::compute(b, &img, &filter).map(|m| m.to_vec());
            ported(b, got, &want, &format!("edgedetect {n}"));
            let mut out = Matrix::zeroed(n, n);
            for _ in 0..2 {
                edgedetect::compute_into(b, &img, &filter, &mut out).unwrap();
            }
            assert_eq!(out.to_vec(), want, "{b} edgedetect into one output {n}");
        }
    }
}

/// Rodinia's backprop training steps (7 calls a step), eager and replayed as a recorded
/// `skel::Graph`, against the plain sequential program: exactly on the CPU backends (the
/// same folds in the same order), within a tolerance on the devices (their `exp` and the
/// order of the column folds may differ); the hand-written Rayon step adds its bands' sums
/// in another order, so within a tolerance too.
#[test]
fn backprop_port() {
    for n in [0, 1, 7, 1000] {
        let net = backprop::inputs(n);
        let want = backprop::reference(&net, 4);
        assert_ne!(
            want,
            backprop::reference(&net, 0),
            "training changes the weights"
        );
        let hand = backprop::hand_rayon(&net, 4);
        assert!(
            check::max_rel_diff(&hand, &want) <= 1e-4,
            "hand-written {n}"
        );
        for b in backends() {
            let tol = if matches!(b, Backend::Cpu | Backend::Rayon) {
                0.0
            } else {
                1e-4
            };
            let got = backprop::compute(b, &net, 4).unwrap();
            let diff = check::max_rel_diff(&got, &want);
            assert!(diff <= tol, "{b} backprop {n}: {diff}");
            let got = backprop::compute_graph(b, &net, 4).unwrap();
            let diff = check::max_rel_diff(&got, &want);
            assert!(diff <= tol, "{b} backprop Graph {n}: {diff}");
        }
    }
}

/// Needleman-Wunsch in both forms (one Wavefront call; row by row, an index Map and a max
/// Scan per row), eager and the whole sweep recorded on another pair and launched on this
/// one, exactly against the plain sequential loop; the hand-written block wavefront too
/// (block edges and a partial last block: 64 + 1, 130; GPU tiles of 32: 33, 65).
#[test]
fn needleman_wunsch_port() {
    for n in [0, 1, 2, 17, 32, 33, 65, 130] {
        let pair = nw::inputs(n);
        let want = nw::reference(&pair);
        assert_eq!(nw::hand_rayon(&pair), want, "hand-written {n}");
        for b in backends() {
            assert_eq!(nw::compute(b, &pair).unwrap(), want, "{b} nw {n}");
            let other = nw::inputs_seeded(n, 5);
            let got = nw::compute_graph(b, &other, &pair).unwrap();
            assert_eq!(got, want, "{b} nw Graph {n}");
            let rows = nw::compute_rows(b, &pair).unwrap();
            assert_eq!(rows, want, "{b} nw rows {n}");
            let got = nw::compute_rows_graph(b, &other, &pair).unwrap();
            assert_eq!(got, want, "{b} nw rows Graph {n}");
        }
    }
}
