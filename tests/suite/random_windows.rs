//! `rng: &mut Random` in MapOverlap window functions (1D along a vector, rows and columns;
//! 2D with and without `#[index]`, with a container, a uniform and two windowed inputs; in
//! place) on every backend, against the host's recipe (`Random::at`, `Random::at2`, the
//! stream of the output's index: its flat position where the function has no `#[index]`)
//! bit for bit, every edge mode, edge sizes.

use skel::prelude::*;

use super::available;

const BACKENDS: [Backend; 4] = [Backend::Cpu, Backend::Rayon, Backend::OpenCl, Backend::Cuda];
const EDGES: [Edge; 4] = [Edge::None, Edge::Pad, Edge::Duplicate, Edge::Cyclic];
const SEEDS: [u64; 3] = [0, 7, u64::MAX];

fn backends() -> impl Iterator<Item = Backend> {
    BACKENDS.into_iter().filter(|&b| available(b))
}

/// A 1D window, a uniform, a hidden index (the flat position).
#[userfn]
pub fn jitter1(w: Window<f32>, rng: &mut Random, #[uniform] k: f32) -> f32 {
    w[-1] + w[1] * k + rng.next_f32()
}

/// A 2D index, two windows, a container, every draw kind.
#[userfn]
pub fn mix2(
    #[index] (i, j): (usize, usize),
    a: Window2<u32>,
    b: Window2<u32>,
    v: &[u32],
    rng: &mut Random,
) -> u32 {
    let x = rng.next_u32();
    let y = rng.next_u64() as u32;
    let z = (rng.next_f32() * 256.0) as u32 + (rng.next_f64() * 256.0) as u32;
    a[(-1, 0)] ^ b[(0, 1)] ^ x ^ (y >> 3) ^ z ^ v[(i + j) % v.len()]
}

/// A 2D window without `#[index]`: draws as the flat position, a data-dependent count.
#[userfn]
pub fn flip2(w: Window2<f64>, rng: &mut Random) -> f64 {
    if rng.next_f64() < 0.5 {
        w[(0, -1)]
    } else {
        w[(1, 0)] + rng.next_f64()
    }
}

/// SkePU's heat with noise, for a red-black update in place.
#[userfn]
pub fn noisy_heat(w: Window2<f32>, rng: &mut Random) -> f32 {
    (w[(-1, 0)] + w[(1, 0)] + w[(0, -1)] + w[(0, 1)]) * 0.25 + rng.next_f32() * 0.01
}

/// Element `p` of a line of `len` read with `edge` (`None`: the pad).
fn on_line(len: usize, p: isize, edge: Edge) -> Option<usize> {
    let n = len as isize;
    match edge {
        _ if (0..n).contains(&p) => Some(p as usize),
        Edge::Duplicate => Some(p.clamp(0, n - 1) as usize),
        Edge::Cyclic => Some(p.rem_euclid(n) as usize),
        _ => None,
    }
}

#[test]
fn one_d_windows_draw_the_stream_of_their_flat_position() {
    let pad = 0.5f32;
    for (rows, cols) in [
        (1, 1),
        (1, 2),
        (1, 13),
        (1, 1009),
        (3, 7),
        (17, 5),
        (29, 31),
    ] {
        let m = Matrix::from_fn(rows, cols, |i, j| (i * 3 + j) as f32 * 0.25);
        let x = m.to_vec();
        for axis in ["flat", "rows", "cols"] {
            if axis == "flat" && rows > 1 {
                continue;
            }
            for edge in EDGES {
                for seed in SEEDS {
                    let r = 1;
                    let mut want = vec![0.0f32; rows * cols];
                    for i in 0..rows {
                        for j in 0..cols {
                            let (pos, len) = if axis == "cols" { (i, rows) } else { (j, cols) };
                            let read = |d: isize| match on_line(len, pos as isize + d, edge) {
                                Some(q) if axis == "cols" => x[q * cols + j],
                                Some(q) => x[i * cols + q],
                                None => pad,
                            };
                            let inside = pos >= r && pos + r < len;
                            if edge == Edge::None && !inside {
                                continue;
                            }
                            let mut g = Random::at(seed, i * cols + j);
                            want[i * cols + j] = read(-1) + read(1) * 3.0 + g.next_f32();
                        }
                    }
                    for b in backends() {
                        let what = format!("{b:?} {rows}x{cols} {axis} {edge:?} seed {seed}");
                        let s = MapOverlap::new(jitter1, r)
                            .edge(edge)
                            .pad(pad)
                            .uniforms((3.0,))
                            .seed(seed)
                            .backend(b);
                        let got = if axis == "flat" {
                            let v = Vector::from(x.clone());
                            let mut out = Vector::zeroed(cols);
                            s.run(&v, &mut out).map(|()| out.to_vec())
                        } else {
                            let s = if axis == "rows" {
                                s.rowwise()
                            } else {
                                s.colwise()
                            };
                            let mut out = Matrix::zeroed(rows, cols);
                            s.run(&m, &mut out).map(|()| out.to_vec())
                        };
                        let len = if axis == "cols" { rows } else { cols };
                        if len < 2 * r {
                            assert!(got.is_err(), "{what}: a line shorter than the window");
                            continue;
                        }
                        let got = got.unwrap_or_else(|e| panic!("{what}: {e}"));
                        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                        assert_eq!(bits(&got), bits(&want), "{what}");
                    }
                }
            }
        }
    }
}

#[test]
fn two_d_windows_draw_the_stream_of_their_index() {
    let v = Vector::from((0..5u32).map(|k| k * 977).collect::<Vec<_>>());
    for (rows, cols) in [(2, 2), (2, 3), (7, 13), (33, 65), (130, 257)] {
        let a = Matrix::from_fn(rows, cols, |i, j| (i * 7919 + j * 104_729) as u32);
        let b = Matrix::from_fn(rows, cols, |i, j| (i ^ (j << 3)) as u32);
        let f = Matrix::from_fn(rows, cols, |i, j| (i as f64) - 0.5 * j as f64);
        let (av, bv, fv) = (a.to_vec(), b.to_vec(), f.to_vec());
        for edge in EDGES {
            for seed in SEEDS {
                let read = |m: &[u32], i: usize, j: usize, di: isize, dj: isize| -> u32 {
                    match (
                        on_line(rows, i as isize + di, edge),
                        on_line(cols, j as isize + dj, edge),
                    ) {
                        (Some(p), Some(q)) => m[p * cols + q],
                        _ => 9,
                    }
                };
                let readf = |i: usize, j: usize, di: isize, dj: isize| -> f64 {
                    match (
                        on_line(rows, i as isize + di, edge),
                        on_line(cols, j as isize + dj, edge),
                    ) {
                        (Some(p), Some(q)) => fv[p * cols + q],
                        _ => 0.0,
                    }
                };
                let mut want = vec![0u32; rows * cols];
                let mut wantf = vec![0.0f64; rows * cols];
                for i in 0..rows {
                    for j in 0..cols {
                        let border = i == 0 || j == 0 || i + 1 == rows || j + 1 == cols;
                        if edge == Edge::None && border {
                            continue;
                        }
                        let mut g = Random::at2(seed, (i, j));
                        let x = g.next_u32();
                        let y = g.next_u64() as u32;
                        let z = (g.next_f32() * 256.0) as u32 + (g.next_f64() * 256.0) as u32;
                        want[i * cols + j] = read(&av, i, j, -1, 0)
                            ^ read(&bv, i, j, 0, 1)
                            ^ x
                            ^ (y >> 3)
                            ^ z
                            ^ v.to_vec()[(i + j) % 5];
                        let mut h = Random::at(seed, i * cols + j);
                        wantf[i * cols + j] = if h.next_f64() < 0.5 {
                            readf(i, j, 0, -1)
                        } else {
                            readf(i, j, 1, 0) + h.next_f64()
                        };
                    }
                }
                for bk in backends() {
                    let what = format!("{bk:?} {rows}x{cols} {edge:?} seed {seed}");
                    let mut out = Matrix::zeroed(rows, cols);
                    MapOverlap::new(mix2, (1, 1))
                        .arrays((&v,))
                        .edge(edge)
                        .pad(9)
                        .seed(seed)
                        .backend(bk)
                        .run(&a, &b, &mut out)
                        .unwrap_or_else(|e| panic!("mix2 {what}: {e}"));
                    assert_eq!(out.to_vec(), want, "mix2 {what}");
                    let mut out = Matrix::zeroed(rows, cols);
                    MapOverlap::new(flip2, (1, 1))
                        .edge(edge)
                        .seed(seed)
                        .backend(bk)
                        .run(&f, &mut out)
                        .unwrap_or_else(|e| panic!("flip2 {what}: {e}"));
                    let bits = |v: &[f64]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&out.to_vec()), bits(&wantf), "flip2 {what}");
                }
            }
        }
    }
}

#[test]
fn red_black_in_place_with_noise_matches_cpu_bit_for_bit_and_seeds_differ() {
    for (rows, cols) in [(3, 3), (17, 30), (130, 258)] {
        let m0 = Matrix::from_fn(rows, cols, |i, j| ((i * 5 + j * 11) % 17) as f32 * 0.5);
        let run = |b: Backend, seed: u64| -> Vec<u32> {
            let mut m = m0.clone();
            let sweep = MapOverlap::new(noisy_heat, (1, 1))
                .edge(Edge::None)
                .update(Update::RedBlack)
                .checked(false)
                .seed(seed)
                .backend(b);
            for _ in 0..3 {
                sweep
                    .run_in_place(&mut m)
                    .unwrap_or_else(|e| panic!("{b:?} {rows}x{cols}: {e}"));
            }
            m.to_vec().into_iter().map(f32::to_bits).collect()
        };
        let want = run(Backend::Cpu, 3);
        assert_ne!(
            want,
            run(Backend::Cpu, 4),
            "{rows}x{cols}: seeds 3 and 4 drew the same"
        );
        for b in backends() {
            assert_eq!(run(b, 3), want, "{b:?} {rows}x{cols}");
        }
    }
}
