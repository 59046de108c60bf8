//! Calls split over CUDA device slots (`.devices(k)`), compared with the `cpu` oracle for
//! every `k` up to the slots `SKEL_CUDA_DEVICES` names (on a one-GPU machine,
//! `SKEL_CUDA_DEVICES=0,0` gives two slots on it), and the errors of `.devices(..)`. The
//! whole CUDA instantiation of the suite also runs split when `SKEL_CUDA_DEVICES` is set.

use skel::prelude::*;

use super::{add_i64, available, where2d};

/// Sizes around the slot count (empty, fewer elements than slots) and primes.
const SIZES: &[usize] = &[0, 1, 2, 3, 7, 31, 257, 1009, 65537];

/// The device slots `SKEL_CUDA_DEVICES` names (1 when it is not set).
pub(super) fn slots() -> usize {
    std::env::var("SKEL_CUDA_DEVICES")
        .map_or(1, |s| s.split(',').count())
        .max(1)
}

#[userfn]
fn scale_i64(x: i64, #[uniform] k: i64) -> i64 {
    x * k - 3
}

#[userfn]
fn sum5(w: Window<i64>) -> i64 {
    w[-2] + 2 * w[-1] + 3 * w[0] + 5 * w[1] + 7 * w[2]
}

#[userfn]
fn cross(w: Window2<i64>) -> i64 {
    w[(-1, 0)] + 2 * w[(0, -1)] + 3 * w[(0, 0)] + 5 * w[(0, 1)] + 7 * w[(1, 0)]
}

#[userfn]
fn odd(x: i64) -> bool {
    x % 2 != 0
}

#[userfn]
fn prod(a: i64, b: i64) -> i64 {
    a * 31 + b
}

#[userfn]
fn dot_row(#[index] i: usize, a: &[i64], x: i64) -> i64 {
    a[i % a.len()] * x
}

fn data(n: usize, seed: i64) -> Vector<i64> {
    Vector::from_fn(n, |i| (i as i64 * 7919 + seed) % 1013 - 500)
}

/// Every element-wise and reducing skeleton with `.devices(k)` against `cpu`.
#[test]
fn every_skeleton_split_over_device_slots_matches_cpu() {
    if !available(Backend::Cuda) {
        return;
    }
    for k in 1..=slots() {
        for &n in SIZES {
            let (a, b) = (data(n, 1), data(n, 2));
            let on = |backend| (backend, if backend == Backend::Cuda { k } else { 1 });
            let mut outs = Vec::new();
            for (backend, k) in [on(Backend::Cpu), on(Backend::Cuda)] {
                let mut m = Vector::zeroed(n);
                // Checked calls split over slots run their parts as a trial first.
                let checked = n % 2 == 0;
                Map::new(scale_i64)
                    .uniforms((5,))
                    .backend(backend)
                    .devices(k)
                    .checked(checked)
                    .run(&a, &mut m)
                    .unwrap();
                let arr = data(13, 3);
                let mut ma = Vector::zeroed(n);
                Map::new(dot_row)
                    .arrays((&arr,))
                    .backend(backend)
                    .devices(k)
                    .run(&b, &mut ma)
                    .unwrap();
                let red = Reduce::new(add_i64).backend(backend).devices(k);
                let total = red.start(11).run(&m).unwrap();
                let mr = MapReduce::new(prod, add_i64)
                    .backend(backend)
                    .devices(k)
                    .run(&a, &b)
                    .unwrap();
                let mut sc = Vector::zeroed(n);
                Scan::new(add_i64)
                    .backend(backend)
                    .devices(k)
                    .checked(checked)
                    .run(&m, &mut sc)
                    .unwrap();
                let mut ex = Vector::zeroed(n);
                Scan::new(add_i64)
                    .mode(ScanMode::Exclusive)
                    .start(4)
                    .backend(backend)
                    .devices(k)
                    .checked(!checked)
                    .run(&ma, &mut ex)
                    .unwrap();
                let mut ov = Vector::zeroed(n);
                // A window of radius 2 needs at least 4 elements.
                let edges = if n >= 4 {
                    &[Edge::Duplicate, Edge::Cyclic, Edge::Pad][..]
                } else {
                    &[]
                };
                for &edge in edges {
                    MapOverlap::new(sum5, 2)
                        .edge(edge)
                        .pad(9)
                        .backend(backend)
                        .devices(k)
                        .checked(checked)
                        .run(&sc, &mut ov)
                        .unwrap();
                    outs.push(ov.to_vec());
                }
                let mut kept = Vector::zeroed(n);
                let count = Filter::new(odd)
                    .backend(backend)
                    .devices(k)
                    .run(&sc, &mut kept)
                    .unwrap();
                outs.push(kept.to_vec()[..count].to_vec());
                outs.push(vec![total, mr]);
                outs.extend([m.to_vec(), ma.to_vec(), sc.to_vec(), ex.to_vec()]);
            }
            let (cpu, cuda) = outs.split_at(outs.len() / 2);
            assert_eq!(cpu, cuda, "n={n}, {k} slot(s)");
        }
    }
}

/// Matrices split in whole rows: 2D `#[index]`, 2D stencils, row/column reductions,
/// all-pairs calls.
#[test]
fn matrices_split_in_whole_rows_match_cpu() {
    if !available(Backend::Cuda) {
        return;
    }
    for k in 1..=slots() {
        for (rows, cols) in [
            (0, 3),
            (1, 1),
            (1, 7),
            (2, 5),
            (3, 1),
            (3, 2),
            (17, 13),
            (64, 33),
        ] {
            let x = Matrix::from_fn(rows, cols, |r, c| ((r * 31 + c * 7) % 97) as i32);
            let xi = Matrix::from_fn(rows, cols, |r, c| ((r * 13 + c * 5) % 89) as i64 - 40);
            let (v, h) = (data(rows, 5), data(cols, 6));
            let mut outs = Vec::new();
            for backend in [Backend::Cpu, Backend::Cuda] {
                let k = if backend == Backend::Cuda { k } else { 1 };
                let mut w = Matrix::zeroed(rows, cols);
                Map::new(where2d)
                    .backend(backend)
                    .devices(k)
                    .run(&x, &mut w)
                    .unwrap();
                let mut st = Matrix::zeroed(rows, cols);
                // A window of radius (1, 1) needs at least 2 rows and 2 columns.
                let edges = if rows >= 2 && cols >= 2 {
                    &[Edge::Duplicate, Edge::Cyclic, Edge::None][..]
                } else {
                    &[]
                };
                for &edge in edges {
                    MapOverlap::new(cross, (1, 1))
                        .edge(edge)
                        .backend(backend)
                        .devices(k)
                        .run(&xi, &mut st)
                        .unwrap();
                    outs.push(st.to_vec());
                }
                let (mut rs, mut cs) = (Vector::zeroed(rows), Vector::zeroed(cols));
                let red = Reduce::new(add_i64).backend(backend).devices(k);
                red.run_rows(&xi, &mut rs).unwrap();
                if rows > 0 {
                    // A column fold needs at least one row.
                    red.run_cols(&xi, &mut cs).unwrap();
                }
                let mut pairs = Matrix::zeroed(rows, cols);
                MapPairs::new(prod)
                    .backend(backend)
                    .devices(k)
                    .run(&v, &h, &mut pairs)
                    .unwrap();
                let (mut pr, mut pc) = (Vector::zeroed(rows), Vector::zeroed(cols));
                let pred = MapPairsReduce::new(prod, add_i64)
                    .backend(backend)
                    .devices(k);
                // Every fold needs at least one pair.
                if cols > 0 {
                    pred.run_rows(&v, &h, &mut pr).unwrap();
                }
                if rows > 0 {
                    pred.run_cols(&v, &h, &mut pc).unwrap();
                }
                outs.push(w.to_vec().iter().map(|&e| e as i64).collect());
                outs.extend([
                    rs.to_vec(),
                    cs.to_vec(),
                    pairs.to_vec(),
                    pr.to_vec(),
                    pc.to_vec(),
                ]);
            }
            let (cpu, cuda) = outs.split_at(outs.len() / 2);
            assert_eq!(cpu, cuda, "{rows}x{cols}, {k} slot(s)");
        }
    }
}

/// A chain of calls on the same containers with different splits, host access between.
#[test]
fn containers_stay_coherent_across_changing_splits() {
    if !available(Backend::Cuda) {
        return;
    }
    let n = 4099;
    let mut x = data(n, 8);
    let mut want = x.to_vec();
    for step in 0..12usize {
        let k = step % slots() + 1;
        let mut y = Vector::zeroed(n);
        Map::new(scale_i64)
            .uniforms((3,))
            .backend(Backend::Cuda)
            .devices(k)
            .download(step % 3 == 0)
            .run(&x, &mut y)
            .unwrap();
        want.iter_mut().for_each(|e| *e = *e * 3 - 3);
        if step % 4 == 1 {
            // Host writes between split calls: x is replaced below, y is read next.
            x.as_mut_slice()[step] = 17;
            y.as_mut_slice()[step] = 17 * 3 - 3;
            want[step] = 17 * 3 - 3;
        }
        let got = Reduce::new(add_i64)
            .backend(Backend::Cuda)
            .devices(slots() + 1 - k)
            .run(&y)
            .unwrap();
        assert_eq!(got, want.iter().sum::<i64>(), "step {step}");
        want.iter_mut().for_each(|e| *e %= 1000);
        let mut z = Vector::zeroed(n);
        Map::new(modk)
            .backend(Backend::Cuda)
            .devices(k)
            .run(&y, &mut z)
            .unwrap();
        x = z;
        assert_eq!(x.to_vec(), want, "step {step}");
    }
}

#[userfn]
fn modk(x: i64) -> i64 {
    x % 1000
}

/// `.devices(..)`: zero, more slots than there are, and an explicit other backend are
/// errors; `Devices::All` is every slot (one without `SKEL_CUDA_DEVICES` on a one-GPU
/// machine).
#[test]
fn device_counts_that_cannot_be_met_are_typed_errors() {
    let v = data(10, 1);
    let mut out = Vector::zeroed(10);
    let err = Map::new(modk).devices(0).run(&v, &mut out).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    for b in [Backend::Cpu, Backend::Rayon, Backend::OpenCl] {
        let err = Map::new(modk)
            .devices(2)
            .backend(b)
            .run(&v, &mut out)
            .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{b}: {err}");
        let err = Reduce::new(add_i64)
            .devices(Devices::All)
            .backend(b)
            .run(&v)
            .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{b}: {err}");
    }
    // One device is any backend's normal case.
    Map::new(modk)
        .devices(1)
        .backend(Backend::Cpu)
        .run(&v, &mut out)
        .unwrap();
    if !available(Backend::Cuda) {
        let err = Map::new(modk).devices(2).run(&v, &mut out).unwrap_err();
        assert!(matches!(err, Error::BackendUnavailable { .. }), "{err}");
        return;
    }
    let err = Map::new(modk)
        .devices(slots().max(8) + 1)
        .run(&v, &mut out)
        .unwrap_err();
    match &err {
        Error::BackendUnavailable { reason, .. } => {
            assert!(reason.contains("SKEL_CUDA_DEVICES"), "{reason}")
        }
        other => panic!("expected BackendUnavailable, got {other}"),
    }
    if std::env::var("SKEL_CUDA_DEVICES").is_err() {
        // Without the variable, two slots exist only on a machine with two GPUs.
        match Map::new(modk).devices(2).run(&v, &mut out) {
            Ok(()) => assert_eq!(out.to_vec(), v.iter().map(|x| x % 1000).collect::<Vec<_>>()),
            Err(Error::BackendUnavailable { reason, .. }) => {
                assert!(reason.contains("SKEL_CUDA_DEVICES"), "{reason}")
            }
            Err(other) => panic!("expected BackendUnavailable, got {other}"),
        }
    }
    Map::new(modk)
        .devices(Devices::All)
        .run(&v, &mut out)
        .unwrap();
    assert_eq!(out.to_vec(), v.iter().map(|x| x % 1000).collect::<Vec<_>>());
}
