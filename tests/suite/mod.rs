//! The backend-generic test suite: every test runs one skeleton on the backend under test
//! and compares with the sequential `cpu` backend (the oracle) and, where the semantics are
//! simple, with a plain Rust computation. `backend_suite!(name, Backend::X)` instantiates
//! it; a backend without a device prints `skipped: no <backend> device` and passes.

#![allow(dead_code)]
// All-pairs user functions index their array: the pattern the GPU backends tile.
#![allow(clippy::needless_range_loop)]

pub mod checked;
pub mod devices;
pub mod fuzz;
pub mod lang;
pub mod loopnest;
pub mod overlap_forms;
pub mod safety;

use skel::prelude::*;

#[macro_use]
pub mod pairs;
#[macro_use]
pub mod args;
#[macro_use]
pub mod host_forms;
#[macro_use]
pub mod tensor3;

/// Sizes every element-wise test covers: empty, one, primes, around the Rayon chunk size
/// (2^14) and its multiples, and one large odd size.
pub const SIZES: &[usize] = &[
    0, 1, 2, 3, 7, 13, 31, 257, 1009, 16383, 16384, 16385, 65537, 100_003,
];

#[userfn]
pub fn add_f32(a: f32, b: f32) -> f32 {
    a + b
}

#[userfn]
pub fn add_i64(a: i64, b: i64) -> i64 {
    a + b
}

#[userfn]
pub fn mul_i64(a: i64, b: i64) -> i64 {
    a * b
}

#[userfn]
pub fn max_i64(a: i64, b: i64) -> i64 {
    a.max(b)
}

#[userfn]
pub fn neg_f64(a: f64) -> f64 {
    -a
}

#[userfn]
pub fn fma3(a: f32, b: f32, c: f32) -> f32 {
    a * b + c
}

#[userfn]
pub fn mix4(a: i32, b: i32, c: i32, d: i32) -> i32 {
    a - 2 * b + 3 * c - d
}

#[userfn]
pub fn iota(#[index] i: usize) -> u64 {
    i as u64
}

#[userfn]
pub fn where2d(#[index] (row, col): (usize, usize), x: i32) -> i32 {
    (row * 1000 + col) as i32 + x
}

#[userfn]
pub fn scaled(x: f32, #[uniform] k: f32, #[uniform] bias: f32) -> f32 {
    x * k + bias
}

/// String concatenation stand-in: associative, not commutative (checks order is kept).
#[userfn]
pub fn affine_compose(a: Affine, b: Affine) -> Affine {
    Affine {
        m: a.m * b.m,
        c: a.c * b.m + b.c,
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
pub struct Affine {
    pub m: i64,
    pub c: i64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
pub struct Pixel {
    pub r: f32,
    pub g: f32,
    pub b: f32,
}

#[userfn]
pub fn luma(px: Pixel, #[uniform] w: Pixel) -> Pixel {
    let y = w.r * px.r + w.g * px.g + w.b * px.b;
    Pixel { r: y, g: y, b: y }
}

#[userfn]
pub fn lookup(table: &[i64], x: u32) -> i64 {
    table[x as usize]
}

#[userfn]
pub fn gather_offset(#[index] i: usize, table: &[i64], #[uniform] offset: i64) -> i64 {
    table[i % 37] + offset
}

#[userfn]
pub fn weighted(w: Window<i64>, #[uniform] r: i32) -> i64 {
    let mut acc = 0;
    let mut d = -r;
    while d <= r {
        acc += w[d as isize] * (d as i64 + 10);
        d += 1;
    }
    acc
}

#[userfn]
pub fn blur3(w: Window<f32>) -> f32 {
    (w[-1] + w[0] + w[1]) / 3.0
}

#[userfn]
pub fn stencil2(w: Window2<i64>) -> i64 {
    w[(-1, 0)] + 2 * w[(1, 0)] + 3 * w[(0, -1)] + 5 * w[(0, 1)] - 7 * w[(0, 0)] + 11 * w[(-1, -1)]
}

/// Escape time of a Mandelbrot point: a loop whose trip count differs from element to
/// element (compute-bound).
#[userfn]
pub fn escape(cr: f32, ci: f32, iters: u32) -> u32 {
    let mut zr = 0.0f32;
    let mut zi = 0.0f32;
    let mut k = 0u32;
    while k < iters && zr * zr + zi * zi < 4.0 {
        let t = zr * zr - zi * zi + cr;
        zi = 2.0 * zr * zi + ci;
        zr = t;
        k += 1;
    }
    k
}

/// Mandelbrot over a 2D index.
#[userfn]
pub fn mandel(#[index] (row, col): (usize, usize), #[uniform] iters: u32) -> u32 {
    escape(col as f32 * 0.0625 - 2.0, row as f32 * 0.0625 - 1.0, iters)
}

/// The same with an element input: the 2D grid also reads inputs at the right position.
#[userfn]
pub fn mandel_from(#[index] (row, col): (usize, usize), shift: f32) -> f32 {
    let k = escape(col as f32 * 0.0625 - 2.0, row as f32 * 0.0625 - 1.0, 40);
    k as f32 + shift
}

/// Collatz steps: a data-dependent `while` over one element input (compute-bound, 1D).
#[userfn]
pub fn collatz(x: u32) -> u32 {
    let mut v = x;
    let mut steps = 0u32;
    while v > 1 {
        if v % 2 == 0 {
            v /= 2;
        } else {
            v = 3 * v + 1;
        }
        steps += 1;
    }
    steps
}

/// Straight-line and arithmetic-heavy, exactly rounded operations only, so every backend
/// gives the same bits.
#[userfn]
pub fn root_chain(x: f32, y: f32) -> f32 {
    let a = (x * x + 1.0).sqrt();
    let b = (a + y * y).sqrt() / (a + 2.0);
    let c = (b * b + a).sqrt() - (y.abs() + 1.0).sqrt();
    let d = (c * c + b + 3.0).sqrt() / (x.abs() + 0.5).sqrt();
    let e = (d + a * b).sqrt() + (c.abs() + d * d).sqrt();
    let f = (e * e + x * y + 100.0).sqrt() / (d + 1.5);
    (f + e).sqrt() - (a + b + c).abs().sqrt() + f.max(e).min(40.0)
}

#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
pub struct Body {
    pub x: f32,
    pub y: f32,
    pub z: f32,
    pub m: f32,
}

/// All-pairs: each body's acceleration from all `n` bodies of the array (itself included,
/// softened), the loop the same for every element.
#[userfn]
pub fn accel(p: Body, bodies: &[Body], #[uniform] n: u32) -> Body {
    let mut ax = 0.0f32;
    let mut ay = 0.0f32;
    let mut az = 0.0f32;
    for j in 0..n as usize {
        let q = bodies[j];
        let dx = q.x - p.x;
        let dy = q.y - p.y;
        let dz = q.z - p.z;
        let r2 = dx * dx + dy * dy + dz * dz + 0.01;
        let s = q.m / (r2 * r2.sqrt());
        ax += dx * s;
        ay += dy * s;
        az += dz * s;
    }
    Body {
        x: ax,
        y: ay,
        z: az,
        m: p.m,
    }
}

/// A loop over the array whose run depends on the element (not all-pairs: the generic
/// one-element-per-thread form).
#[userfn]
pub fn window_mass(
    #[index] i: usize,
    bodies: &[Body],
    #[uniform] n: u32,
    #[uniform] w: u32,
) -> f32 {
    let mut s = 0.0f32;
    let mut j = i as u32;
    while j < i as u32 + w {
        if n > 0 {
            s += bodies[(j % n) as usize].m;
        }
        j += 1;
    }
    s
}

/// Deterministic bodies with small integer-valued coordinates.
pub fn bodies(n: usize, seed: u64) -> Vec<Body> {
    let v = ints_f32(4 * n, seed);
    (0..n)
        .map(|i| Body {
            x: v[4 * i],
            y: v[4 * i + 1] * 0.5,
            z: v[4 * i + 2] * 0.25,
            m: v[4 * i + 3].abs() + 1.0,
        })
        .collect()
}

/// Weighted sum over a whole `(2rr+1) x (2rc+1)` window (GPU backends keep small ones in
/// registers and read large ones from the tile).
#[userfn]
pub fn box2(w: Window2<f32>, #[uniform] rr: i32, #[uniform] rc: i32) -> f32 {
    let mut acc = 0.0;
    let mut i = -rr;
    while i <= rr {
        let mut j = -rc;
        while j <= rc {
            acc += w[(i as isize, j as isize)] * (i * 7 + j + 1) as f32;
            j += 1;
        }
        i += 1;
    }
    acc
}

#[userfn]
pub fn pixel_blur(w: Window<Pixel>) -> Pixel {
    Pixel {
        r: w[-1].r + w[1].r,
        g: w[0].g * 2.0,
        b: w[1].b - w[-1].b,
    }
}

#[userfn]
pub fn affine_window(w: Window<Affine>) -> Affine {
    affine_compose(affine_compose(w[-2], w[0]), w[2])
}

#[userfn]
pub fn max3_u8(w: Window<u8>) -> u8 {
    w[-1].max(w[0]).max(w[1])
}

/// Integer-valued data, so float sums are exact in any order.
pub fn ints_f32(n: usize, seed: u64) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as u64 * 2654435761 + seed) % 17) as f32 - 8.0)
        .collect()
}

pub fn ints_i64(n: usize, seed: u64) -> Vec<i64> {
    (0..n)
        .map(|i| ((i as u64 * 2654435761 + seed) % 201) as i64 - 100)
        .collect()
}

/// Reference semantics of a 1D read beyond the borders.
pub fn at_edge(v: &[i64], p: isize, edge: Edge, pad: i64) -> i64 {
    let n = v.len() as isize;
    if (0..n).contains(&p) {
        return v[p as usize];
    }
    match edge {
        Edge::Duplicate => v[p.clamp(0, n - 1) as usize],
        Edge::Cyclic => v[p.rem_euclid(n) as usize],
        _ => pad,
    }
}

pub use super::common::available;

#[macro_export]
macro_rules! backend_suite {
    ($name:ident, $backend:expr) => {
        mod $name {
            use super::suite::*;
            use skel::prelude::*;

            const B: Backend = $backend;

            macro_rules! require {
                () => {
                    if !available(B) {
                        return;
                    }
                };
            }

            #[test]
            fn map_one_to_four_inputs_all_sizes() {
                require!();
                for &n in SIZES {
                    let a = Vector::from(ints_f32(n, 1));
                    let b = Vector::from(ints_f32(n, 2));
                    let c = Vector::from(ints_f32(n, 3));
                    let mut out = Vector::filled(n, f32::NAN);
                    Map::new(add_f32).backend(B).run(&a, &b, &mut out).unwrap();
                    let want: Vec<f32> = (0..n).map(|i| a[i] + b[i]).collect();
                    assert_eq!(out.to_vec(), want, "add, n={n}");

                    Map::new(fma3).backend(B).run(&a, &b, &c, &mut out).unwrap();
                    let want: Vec<f32> = (0..n).map(|i| a[i] * b[i] + c[i]).collect();
                    assert_eq!(out.to_vec(), want, "fma3, n={n}");

                    let x = Vector::from_fn(n, |i| i as f64 * 0.5);
                    let mut y = Vector::zeroed(n);
                    Map::new(neg_f64).backend(B).run(&x, &mut y).unwrap();
                    assert!(y.iter().enumerate().all(|(i, &v)| v == -(i as f64 * 0.5)), "neg, n={n}");

                    let ints: Vec<Vector<i32>> = (0..4).map(|s| Vector::from_fn(n, |i| (i as i32 * (s + 3)) % 101)).collect();
                    let mut iout = Vector::zeroed(n);
                    Map::new(mix4).backend(B).run(&ints[0], &ints[1], &ints[2], &ints[3], &mut iout).unwrap();
                    let want: Vec<i32> = (0..n).map(|i| ints[0][i] - 2 * ints[1][i] + 3 * ints[2][i] - ints[3][i]).collect();
                    assert_eq!(iout.to_vec(), want, "mix4, n={n}");
                }
            }

            #[test]
            fn map_index_uniforms_structs_and_matrices() {
                require!();
                for &n in SIZES {
                    let mut ids = Vector::zeroed(n);
                    Map::new(iota).backend(B).run_index(&mut ids).unwrap();
                    assert_eq!(ids.to_vec(), (0..n as u64).collect::<Vec<_>>());

                    let x = Vector::from(ints_f32(n, 7));
                    let mut y = Vector::zeroed(n);
                    Map::new(scaled).uniforms((2.0, 0.5)).backend(B).run(&x, &mut y).unwrap();
                    assert!((0..n).all(|i| y[i] == x[i] * 2.0 + 0.5));

                    let img = Vector::from_fn(n, |i| Pixel { r: (i % 7) as f32, g: (i % 5) as f32, b: (i % 3) as f32 });
                    let mut grey = Vector::zeroed(n);
                    let w = Pixel { r: 0.25, g: 0.5, b: 0.25 };
                    Map::new(luma).uniforms((w,)).backend(B).run(&img, &mut grey).unwrap();
                    let mut oracle = Vector::zeroed(n);
                    Map::new(luma).uniforms((w,)).backend(Backend::Cpu).run(&img, &mut oracle).unwrap();
                    assert_eq!(grey, oracle);
                }
                for (rows, cols) in [(0, 0), (1, 1), (3, 5), (17, 13), (130, 129), (300, 301)] {
                    let m = Matrix::from_fn(rows, cols, |r, c| (r + c) as i32);
                    let mut out = Matrix::zeroed(rows, cols);
                    Map::new(where2d).backend(B).run(&m, &mut out).unwrap();
                    for r in 0..rows {
                        for c in 0..cols {
                            assert_eq!(out[(r, c)], (r * 1000 + c) as i32 + (r + c) as i32);
                        }
                    }
                }
            }

            #[test]
            fn compute_heavy_maps_and_divergent_loops() {
                require!();
                for &n in SIZES.iter().filter(|&&n| n <= 20_000) {
                    let x = Vector::from_fn(n, |i| (i as u32 * 7919) % 10_000);
                    let mut got = Vector::filled(n, u32::MAX);
                    let mut want = Vector::zeroed(n);
                    Map::new(collatz).backend(B).run(&x, &mut got).unwrap();
                    Map::new(collatz).backend(Backend::Cpu).run(&x, &mut want).unwrap();
                    assert_eq!(got, want, "collatz n={n}");
                    let a = Vector::from(ints_f32(n, 3));
                    let b = Vector::from(ints_f32(n, 4));
                    let mut got = Vector::filled(n, f32::NAN);
                    let mut want = Vector::zeroed(n);
                    Map::new(root_chain).backend(B).run(&a, &b, &mut got).unwrap();
                    Map::new(root_chain).backend(Backend::Cpu).run(&a, &b, &mut want).unwrap();
                    let bits = |v: &Vector<f32>| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&got), bits(&want), "root_chain n={n}");
                }
            }

            #[test]
            fn index_maps_2d_of_odd_shapes() {
                require!();
                let shapes = [(0, 0), (0, 5), (1, 1), (1, 300), (300, 1), (1, 4099), (4099, 1), (13, 17), (31, 257), (33, 31), (64, 65)];
                for (rows, cols) in shapes {
                    let mut got = Matrix::filled(rows, cols, u32::MAX);
                    let mut want = Matrix::zeroed(rows, cols);
                    Map::new(mandel).uniforms((50,)).backend(B).run_index(&mut got).unwrap();
                    Map::new(mandel).uniforms((50,)).backend(Backend::Cpu).run_index(&mut want).unwrap();
                    assert_eq!(got.as_slice(), want.as_slice(), "mandel {rows}x{cols}");
                    let shift = Matrix::from_fn(rows, cols, |r, c| (r * 3 + c) as f32 * 0.5);
                    let mut got = Matrix::filled(rows, cols, f32::NAN);
                    let mut want = Matrix::zeroed(rows, cols);
                    Map::new(mandel_from).backend(B).run(&shift, &mut got).unwrap();
                    Map::new(mandel_from).backend(Backend::Cpu).run(&shift, &mut want).unwrap();
                    assert_eq!(got.as_slice(), want.as_slice(), "mandel_from {rows}x{cols}");
                }
            }

            #[test]
            fn map_array_all_pairs_and_data_dependent_reads() {
                require!();
                // array lengths: empty, one, primes, around and off a 256-element tile
                for (na, m) in [(0, 5), (1, 1), (1, 0), (2, 3), (13, 257), (255, 31), (256, 256), (257, 1000), (1009, 7), (1000, 1009)] {
                    let arr = Vector::from(bodies(na, 5));
                    let ps = Vector::from(bodies(m, 9));
                    let mut got = Vector::filled(m, Body { x: f32::NAN, ..Body::default() });
                    let mut want = Vector::zeroed(m);
                    MapArray::new(accel).uniforms((na as u32,)).backend(B).run(&arr, &ps, &mut got).unwrap();
                    MapArray::new(accel).uniforms((na as u32,)).backend(Backend::Cpu).run(&arr, &ps, &mut want).unwrap();
                    let bits = |v: &Vector<Body>| v.iter().flat_map(|b| [b.x, b.y, b.z, b.m].map(f32::to_bits)).collect::<Vec<_>>();
                    assert_eq!(bits(&got), bits(&want), "accel na={na} m={m}");
                    let mut got = Vector::filled(m, f32::NAN);
                    let mut want = Vector::zeroed(m);
                    MapArray::new(window_mass).uniforms((na as u32, 5)).backend(B).run_index(&arr, &mut got).unwrap();
                    MapArray::new(window_mass).uniforms((na as u32, 5)).backend(Backend::Cpu).run_index(&arr, &mut want).unwrap();
                    assert_eq!(got, want, "window_mass na={na} m={m}");
                }
            }

            #[test]
            fn map_on_views_touches_only_the_range() {
                require!();
                let a = Vector::from_fn(100, |i| i as f32);
                let b = Vector::from_fn(100, |i| 1000.0 + i as f32);
                let mut out = Vector::filled(100, -1.0f32);
                Map::new(add_f32).backend(B).run(&a.view(10..20), &b.view(0..10), &mut out.view_mut(5..15)).unwrap();
                for i in 0..100 {
                    let want = if (5..15).contains(&i) { (i + 5) as f32 + 1000.0 + (i - 5) as f32 } else { -1.0 };
                    assert_eq!(out[i], want, "i={i}");
                }
            }

            #[test]
            fn every_skeleton_reads_and_writes_views() {
                require!();
                let cpu = Backend::Cpu;
                let n = 20_000; // above the Rayon chunk and one work-group
                let v = Vector::from(ints_i64(n, 21));
                let w = Vector::from(ints_i64(n, 22));
                let (x, y, len) = (1_234, 7, 15_000);
                let (a, b) = (v.view(x..x + len), w.view(y..y + len));
                let check = |what: &str, run: &dyn Fn(Backend, &mut Vector<i64>)| {
                    let (mut got, mut want) = (Vector::filled(n, -1i64), Vector::filled(n, -1i64));
                    run(B, &mut got);
                    run(cpu, &mut want);
                    assert_eq!(got, want, "{what}");
                };
                check("map", &|bk, out| Map::new(add_i64).backend(bk).run(&a, &b, &mut out.view_mut(3..3 + len)).unwrap());
                check("scan", &|bk, out| {
                    Scan::new(add_i64).mode(ScanMode::Exclusive).start(4).backend(bk).run(&a, &mut out.view_mut(9..9 + len)).unwrap()
                });
                for edge in [Edge::Duplicate, Edge::Cyclic, Edge::Pad, Edge::None] {
                    check(&format!("overlap {edge:?}"), &|bk, out| {
                        let s = MapOverlap::new(weighted, 2).edge(edge).pad(5).uniforms((2,));
                        s.backend(bk).run(&a, &mut out.view_mut(100..100 + len)).unwrap()
                    });
                }
                let table = Vector::from(ints_i64(37, 1));
                let idx = Vector::from_fn(n, |i| (i % 37) as u32);
                check("map_array", &|bk, out| {
                    MapArray::new(lookup).backend(bk).run(&table.view(0..37), &idx.view(x..x + len), &mut out.view_mut(0..len)).unwrap()
                });
                let mr = |bk| MapReduce::new(mul_i64, add_i64).start(1).backend(bk).run(&a, &b).unwrap();
                assert_eq!(mr(B), mr(cpu));
                let red = |bk| Reduce::new(add_i64).backend(bk).run(&b).unwrap();
                assert_eq!(red(B), red(cpu));
            }

            #[test]
            fn reduce_and_map_reduce_all_sizes() {
                require!();
                for &n in SIZES {
                    let v = Vector::from(ints_i64(n, 3));
                    let sum: i64 = v.iter().sum();
                    assert_eq!(Reduce::new(add_i64).backend(B).run(&v).unwrap(), sum, "n={n}");
                    assert_eq!(Reduce::new(add_i64).start(5).backend(B).run(&v).unwrap(), sum + 5);
                    let max = v.iter().copied().fold(0, i64::max);
                    assert_eq!(Reduce::new(max_i64).backend(B).run(&v).unwrap(), max, "default start 0");
                    assert_eq!(
                        Reduce::new(max_i64).start(i64::MIN).backend(B).run(&v).unwrap(),
                        v.iter().copied().max().unwrap_or(i64::MIN)
                    );
                    let w = Vector::from(ints_i64(n, 9));
                    let dot: i64 = v.iter().zip(w.iter()).map(|(a, b)| a * b).sum();
                    assert_eq!(MapReduce::new(mul_i64, add_i64).backend(B).run(&v, &w).unwrap(), dot);
                    assert_eq!(MapReduce::new(mul_i64, add_i64).start(-3).backend(B).run(&v, &w).unwrap(), dot - 3);
                    // Associative but not commutative: order must be kept.
                    let fs = Vector::from_fn(n, |i| Affine { m: if i % 3 == 0 { -1 } else { 1 }, c: (i % 11) as i64 });
                    let oracle = Reduce::new(affine_compose).start(Affine { m: 1, c: 0 }).backend(Backend::Cpu).run(&fs).unwrap();
                    assert_eq!(Reduce::new(affine_compose).start(Affine { m: 1, c: 0 }).backend(B).run(&fs).unwrap(), oracle);
                }
            }

            #[test]
            fn reduce_rows_and_cols() {
                require!();
                for (rows, cols) in [(0, 0), (1, 1), (1, 9), (9, 1), (7, 13), (200, 301), (1000, 3)] {
                    let m = Matrix::from_vec(rows, cols, ints_i64(rows * cols, 5)).unwrap();
                    let mut per_row = Vector::zeroed(rows);
                    let mut per_col = Vector::zeroed(cols);
                    Reduce::new(add_i64).backend(B).run_rows(&m, &mut per_row).unwrap();
                    Reduce::new(add_i64).backend(B).run_cols(&m, &mut per_col).unwrap();
                    for r in 0..rows {
                        assert_eq!(per_row[r], m.row(r).iter().sum::<i64>());
                    }
                    for c in 0..cols {
                        assert_eq!(per_col[c], (0..rows).map(|r| m[(r, c)]).sum::<i64>());
                    }
                    assert_eq!(Reduce::new(add_i64).backend(B).run(&m).unwrap(), m.as_slice().iter().sum::<i64>());
                }
            }

            #[test]
            fn reduce_rows_and_cols_of_empty_matrices() {
                require!();
                // A fold of no elements has no value: an error naming the shape, never a panic.
                let wide = Matrix::from_vec(0, 4, Vec::<i64>::new()).unwrap();
                let tall = Matrix::from_vec(4, 0, Vec::<i64>::new()).unwrap();
                let (mut none, mut four) = (Vector::<i64>::zeroed(0), Vector::filled(4, 7i64));
                Reduce::new(add_i64).backend(B).run_rows(&wide, &mut none).unwrap();
                Reduce::new(add_i64).backend(B).run_cols(&tall, &mut none).unwrap();
                let err = Reduce::new(add_i64).backend(B).run_cols(&wide, &mut four).unwrap_err();
                assert!(err.to_string().contains("0x4 matrix"), "{err}");
                assert!(Reduce::new(add_i64).backend(B).run_rows(&tall, &mut four).is_err());
                assert_eq!(four.to_vec(), vec![7; 4]);
                assert_eq!(Reduce::new(add_i64).start(3).backend(B).run(&wide).unwrap(), 3);
            }

            #[test]
            fn scan_inclusive_exclusive_all_sizes() {
                require!();
                for &n in SIZES {
                    let v = Vector::from(ints_i64(n, 11));
                    let mut out = Vector::zeroed(n);
                    Scan::new(add_i64).backend(B).run(&v, &mut out).unwrap();
                    let mut acc = 0;
                    let want: Vec<i64> = v.iter().map(|x| { acc += x; acc }).collect();
                    assert_eq!(out.to_vec(), want, "inclusive n={n}");

                    Scan::new(add_i64).mode(ScanMode::Exclusive).start(10).backend(B).run(&v, &mut out).unwrap();
                    let mut acc = 10;
                    let want: Vec<i64> = v.iter().map(|x| { let before = acc; acc += x; before }).collect();
                    assert_eq!(out.to_vec(), want, "exclusive n={n}");

                    let fs = Vector::from_fn(n, |i| Affine { m: if i % 5 == 0 { -1 } else { 1 }, c: (i % 7) as i64 });
                    let mut got = Vector::zeroed(n);
                    let mut oracle = Vector::zeroed(n);
                    for mode in [ScanMode::Inclusive, ScanMode::Exclusive] {
                        let s = Scan::new(affine_compose).mode(mode).start(Affine { m: 1, c: 0 });
                        s.backend(B).run(&fs, &mut got).unwrap();
                        s.backend(Backend::Cpu).run(&fs, &mut oracle).unwrap();
                        assert_eq!(got, oracle, "{mode:?} n={n}");
                    }
                }
            }

            #[test]
            fn map_array_all_sizes() {
                require!();
                let table = Vector::from(ints_i64(37, 1));
                for &n in SIZES {
                    let idx = Vector::from_fn(n, |i| (i * 7 % 37) as u32);
                    let mut out = Vector::zeroed(n);
                    MapArray::new(lookup).backend(B).run(&table, &idx, &mut out).unwrap();
                    assert!((0..n).all(|i| out[i] == table[i * 7 % 37]), "n={n}");
                    MapArray::new(gather_offset).uniforms((4,)).backend(B).run_index(&table, &mut out).unwrap();
                    assert!((0..n).all(|i| out[i] == table[i % 37] + 4), "n={n}");
                }
            }

            #[test]
            fn map_overlap_1d_every_edge_and_radius() {
                require!();
                for &n in SIZES {
                    let host = ints_i64(n, 13);
                    let v = Vector::from(host.clone());
                    for r in [0usize, 1, 2, 5, 300] {
                        // wide windows on the small sizes only: the oracle is O(n r)
                        if n < 2 * r || (r > 5 && n > 20_000) {
                            continue;
                        }
                        for edge in [Edge::Duplicate, Edge::Cyclic, Edge::Pad, Edge::None] {
                            let mut out = Vector::filled(n, -77i64);
                            MapOverlap::new(weighted, r)
                                .edge(edge)
                                .pad(3)
                                .uniforms((r as i32,))
                                .backend(B)
                                .run(&v, &mut out)
                                .unwrap();
                            let out = out.to_vec();
                            for i in 0..n {
                                let border = i < r || i + r >= n;
                                let want = if edge == Edge::None && border {
                                    -77
                                } else {
                                    (-(r as isize)..=r as isize)
                                        .map(|d| at_edge(&host, i as isize + d, edge, 3) * (d as i64 + 10))
                                        .sum()
                                };
                                assert_eq!(out[i], want, "n={n} r={r} {edge:?} i={i}");
                            }
                        }
                    }
                }
            }

            #[test]
            fn map_overlap_rowwise_colwise_and_2d() {
                require!();
                for (rows, cols) in [(2, 2), (3, 5), (8, 7), (130, 257)] {
                    let m = Matrix::from_vec(rows, cols, ints_i64(rows * cols, 17)).unwrap();
                    for edge in [Edge::Duplicate, Edge::Cyclic, Edge::Pad, Edge::None] {
                        for (name, rowwise) in [("rowwise", true), ("colwise", false)] {
                            let mut got = Matrix::filled(rows, cols, -5i64);
                            let mut oracle = Matrix::filled(rows, cols, -5i64);
                            let s = MapOverlap::new(weighted, 1).edge(edge).pad(2).uniforms((1,));
                            let s = if rowwise { s.rowwise() } else { s.colwise() };
                            s.backend(B).run(&m, &mut got).unwrap();
                            s.backend(Backend::Cpu).run(&m, &mut oracle).unwrap();
                            assert_eq!(got, oracle, "{name} {rows}x{cols} {edge:?}");
                            // the oracle itself against the 1D definition, one row/column at a time
                            let line = |k: usize| -> Vec<i64> {
                                if rowwise { m.row(k).to_vec() } else { (0..rows).map(|r| m[(r, k)]).collect() }
                            };
                            let (lines, len) = if rowwise { (rows, cols) } else { (cols, rows) };
                            for k in 0..lines {
                                let l = line(k);
                                for i in 0..len {
                                    let want = if edge == Edge::None && (i < 1 || i + 1 >= len) {
                                        -5
                                    } else {
                                        (-1..=1isize).map(|d| at_edge(&l, i as isize + d, edge, 2) * (d as i64 + 10)).sum()
                                    };
                                    let at = if rowwise { (k, i) } else { (i, k) };
                                    assert_eq!(oracle[at], want, "{name} {rows}x{cols} {edge:?} at {at:?}");
                                }
                            }
                        }
                        for (rr, rc) in [(1usize, 1usize), (2, 1)] {
                            if rows < 2 * rr {
                                continue;
                            }
                            let mut got = Matrix::filled(rows, cols, -9i64);
                            let mut oracle = Matrix::filled(rows, cols, -9i64);
                            let s = MapOverlap::new(stencil2, (rr, rc)).edge(edge).pad(4);
                            s.backend(B).run(&m, &mut got).unwrap();
                            s.backend(Backend::Cpu).run(&m, &mut oracle).unwrap();
                            assert_eq!(got, oracle, "2D radius ({rr}, {rc}) {rows}x{cols} {edge:?}");
                            let at = |i: isize, j: isize| -> i64 {
                                let (ri, ci) = (rows as isize, cols as isize);
                                let inside = (0..ri).contains(&i) && (0..ci).contains(&j);
                                match edge {
                                    _ if inside => m[(i as usize, j as usize)],
                                    Edge::Duplicate => m[(i.clamp(0, ri - 1) as usize, j.clamp(0, ci - 1) as usize)],
                                    Edge::Cyclic => m[(i.rem_euclid(ri) as usize, j.rem_euclid(ci) as usize)],
                                    _ => 4,
                                }
                            };
                            let (rr, rc) = (rr as isize, rc as isize);
                            for i in 0..rows as isize {
                                for j in 0..cols as isize {
                                    let border = i < rr || j < rc || i + rr >= rows as isize || j + rc >= cols as isize;
                                    let want = if edge == Edge::None && border {
                                        -9
                                    } else {
                                        at(i - 1, j) + 2 * at(i + 1, j) + 3 * at(i, j - 1) + 5 * at(i, j + 1)
                                            - 7 * at(i, j)
                                            + 11 * at(i - 1, j - 1)
                                    };
                                    assert_eq!(oracle[(i as usize, j as usize)], want, "2D {edge:?} at ({i}, {j})");
                                }
                            }
                        }
                    }
                }
            }

            #[test]
            fn map_overlap_tiles_borders_and_element_types() {
                require!();
                let cpu = Backend::Cpu;
                let edges = [Edge::Duplicate, Edge::Cyclic, Edge::Pad, Edge::None];
                // around a GPU tile (2048 outputs of a vector), smaller, and a halo wider than it
                for (n, r) in [(5, 1), (2047, 4), (2048, 1), (2049, 4), (6150, 1), (2600, 1100)] {
                    let v = Vector::from(ints_i64(n, 5));
                    for edge in edges {
                        let s = MapOverlap::new(weighted, r).edge(edge).pad(-3).uniforms((r as i32,));
                        let (mut got, mut want) = (Vector::filled(n, 7i64), Vector::filled(n, 7i64));
                        s.backend(B).run(&v, &mut got).unwrap();
                        s.backend(cpu).run(&v, &mut want).unwrap();
                        assert_eq!(got, want, "n={n} r={r} {edge:?}");
                    }
                }
                // 1 x n and n x 1 matrices, 1D both ways and 2D; 2D windows in registers and not
                for (rows, cols, rr, rc) in [(1, 300, 0, 2), (300, 1, 2, 0), (70, 150, 4, 4), (70, 150, 5, 5), (97, 133, 3, 1)] {
                    let m = Matrix::from_vec(rows, cols, ints_f32(rows * cols, 9)).unwrap();
                    for edge in edges {
                        let (mut got, mut want) = (Matrix::filled(rows, cols, 0.5f32), Matrix::filled(rows, cols, 0.5f32));
                        let s = MapOverlap::new(box2, (rr, rc)).edge(edge).pad(2.0).uniforms((rr as i32, rc as i32));
                        s.backend(B).run(&m, &mut got).unwrap();
                        s.backend(cpu).run(&m, &mut want).unwrap();
                        assert_eq!(got, want, "2D {rows}x{cols} radius ({rr}, {rc}) {edge:?}");
                        let r = rr.max(rc);
                        let mi = Matrix::from_vec(rows, cols, ints_i64(rows * cols, 4)).unwrap();
                        for colwise in [false, true] {
                            if (colwise && rows < 2 * r) || (!colwise && cols < 2 * r) {
                                continue;
                            }
                            let s = MapOverlap::new(weighted, r).edge(edge).pad(1).uniforms((r as i32,));
                            let s = if colwise { s.colwise() } else { s.rowwise() };
                            let (mut got, mut want) = (Matrix::filled(rows, cols, 3i64), Matrix::filled(rows, cols, 3i64));
                            s.backend(B).run(&mi, &mut got).unwrap();
                            s.backend(cpu).run(&mi, &mut want).unwrap();
                            assert_eq!(got, want, "{rows}x{cols} r={r} colwise={colwise} {edge:?}");
                        }
                    }
                }
                // element sizes 12 (copied in 4-byte pieces), 16 (whole 16-byte words; a view
                // at an odd offset is not 16-byte aligned) and 1
                let n = 5000;
                let px = Vector::from_fn(n, |i| Pixel { r: i as f32, g: (i % 7) as f32, b: -(i as f32) });
                let aff = Vector::from_fn(n, |i| Affine { m: (i % 5) as i64 - 2, c: i as i64 });
                let bytes = Vector::from_fn(n, |i| (i * 37 % 251) as u8);
                for edge in edges {
                    let s = MapOverlap::new(pixel_blur, 1).edge(edge).pad(Pixel { r: 1.0, g: 2.0, b: 3.0 });
                    let (mut got, mut want) = (Vector::filled(n, Pixel::default()), Vector::filled(n, Pixel::default()));
                    s.backend(B).run(&px, &mut got).unwrap();
                    s.backend(cpu).run(&px, &mut want).unwrap();
                    assert_eq!(got, want, "Pixel {edge:?}");
                    for off in [0, 1] {
                        let a = aff.view(off..n - 2);
                        let s = MapOverlap::new(affine_window, 2).edge(edge).pad(Affine { m: 1, c: 1 });
                        let (mut got, mut want) = (Vector::filled(n - 2 - off, Affine::default()), Vector::filled(n - 2 - off, Affine::default()));
                        s.backend(B).run(&a, &mut got).unwrap();
                        s.backend(cpu).run(&a, &mut want).unwrap();
                        assert_eq!(got, want, "Affine offset {off} {edge:?}");
                    }
                    let s = MapOverlap::new(max3_u8, 1).edge(edge).pad(255);
                    let (mut got, mut want) = (Vector::filled(n, 0u8), Vector::filled(n, 0u8));
                    s.backend(B).run(&bytes.view(3..n), &mut got.view_mut(0..n - 3)).unwrap();
                    s.backend(cpu).run(&bytes.view(3..n), &mut want.view_mut(0..n - 3)).unwrap();
                    assert_eq!(got, want, "u8 {edge:?}");
                }
            }

            #[test]
            fn map_overlap_full_size_tiles() {
                require!();
                // enough for the GPUs' tiles at full size (1024 of them; CUDA's 3x3 with its
                // registers capped), a partial last tile; small windows, edges on both sides
                let cpu = Backend::Cpu;
                let n = (1 << 21) + 5;
                let v = Vector::from_fn(n, |i| (i % 1013) as f32 * 0.25);
                for edge in [Edge::Duplicate, Edge::Cyclic] {
                    let s = MapOverlap::new(blur3, 1).edge(edge);
                    let (mut got, mut want) = (Vector::zeroed(n), Vector::zeroed(n));
                    s.backend(B).run(&v, &mut got).unwrap();
                    s.backend(cpu).run(&v, &mut want).unwrap();
                    assert!(got == want, "1D n={n} {edge:?}");
                }
                let side = 1501;
                let m = Matrix::from_vec(side, side, ints_f32(side * side, 8)).unwrap();
                for edge in [Edge::Pad, Edge::None] {
                    let s = MapOverlap::new(box2, (1, 1)).edge(edge).pad(2.0).uniforms((1, 1));
                    let (mut got, mut want) = (Matrix::filled(side, side, 0.5f32), Matrix::filled(side, side, 0.5f32));
                    s.backend(B).run(&m, &mut got).unwrap();
                    s.backend(cpu).run(&m, &mut want).unwrap();
                    assert!(got == want, "2D {side}x{side} 3x3 {edge:?}");
                }
            }

            #[test]
            fn float_arithmetic_matches_the_oracle_exactly() {
                require!();
                for &n in SIZES.iter().filter(|&&n| n >= 2) {
                    let v = Vector::from_fn(n, |i| (i as f32).sin());
                    let mut got = Vector::zeroed(n);
                    let mut oracle = Vector::zeroed(n);
                    MapOverlap::new(blur3, 1).backend(B).run(&v, &mut got).unwrap();
                    MapOverlap::new(blur3, 1).backend(Backend::Cpu).run(&v, &mut oracle).unwrap();
                    assert_eq!(got, oracle, "n={n}");
                    // a * b + c must not be contracted into an fma on a device
                    let (b, c) = (Vector::from_fn(n, |i| (i as f32).cos()), Vector::from_fn(n, |i| (i as f32 * 0.37).sin()));
                    Map::new(fma3).backend(B).run(&v, &b, &c, &mut got).unwrap();
                    Map::new(fma3).backend(Backend::Cpu).run(&v, &b, &c, &mut oracle).unwrap();
                    assert_eq!(got, oracle, "fma3 n={n}");
                }
            }

            proptest::proptest! {
                #![proptest_config(proptest::prelude::ProptestConfig { cases: 48, ..Default::default() })]

                #[test]
                fn prop_every_skeleton_matches_the_oracle(
                    data in proptest::collection::vec(-1000i64..1000, 0..3000),
                    other_seed in 0u64..1000,
                    start in -100i64..100,
                    r in 0usize..4,
                    edge_pick in 0usize..4,
                ) {
                    if !available(B) {
                        return Ok(());
                    }
                    let n = data.len();
                    let v = Vector::from(data.clone());
                    let w = Vector::from(ints_i64(n, other_seed));
                    let cpu = Backend::Cpu;
                    let (mut got, mut want) = (Vector::zeroed(n), Vector::zeroed(n));

                    Map::new(add_i64).backend(B).run(&v, &w, &mut got).unwrap();
                    Map::new(add_i64).backend(cpu).run(&v, &w, &mut want).unwrap();
                    proptest::prop_assert_eq!(&got, &want);

                    let reduce = Reduce::new(add_i64).start(start);
                    proptest::prop_assert_eq!(reduce.backend(B).run(&v).unwrap(), reduce.backend(cpu).run(&v).unwrap());
                    let mr = MapReduce::new(mul_i64, add_i64).start(start);
                    proptest::prop_assert_eq!(mr.backend(B).run(&v, &w).unwrap(), mr.backend(cpu).run(&v, &w).unwrap());

                    for mode in [ScanMode::Inclusive, ScanMode::Exclusive] {
                        let scan = Scan::new(add_i64).mode(mode).start(start);
                        scan.backend(B).run(&v, &mut got).unwrap();
                        scan.backend(cpu).run(&v, &mut want).unwrap();
                        proptest::prop_assert_eq!(&got, &want);
                    }

                    let edge = [Edge::Duplicate, Edge::Cyclic, Edge::Pad, Edge::None][edge_pick];
                    let overlap = MapOverlap::new(weighted, r).edge(edge).pad(start).uniforms((r as i32,));
                    let (a, b) = (overlap.backend(B).run(&v, &mut got), overlap.backend(cpu).run(&v, &mut want));
                    proptest::prop_assert_eq!(a.is_ok(), b.is_ok());
                    proptest::prop_assert_eq!(a.is_ok(), n >= 2 * r);
                    proptest::prop_assert_eq!(&got, &want);
                }
            }

            #[test]
            fn bad_input_is_an_error_and_leaves_outputs_untouched() {
                require!();
                let a = Vector::from(vec![1.0f32, 2.0, 3.0]);
                let b = Vector::from(vec![1.0f32, 2.0]);
                let mut out = Vector::filled(3, 9.0f32);
                let err = Map::new(add_f32).backend(B).run(&a, &b, &mut out).unwrap_err();
                assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
                assert!(err.to_string().contains("vector of 3") && err.to_string().contains("vector of 2"), "{err}");
                assert_eq!(out.to_vec(), vec![9.0; 3]);
                assert_eq!(a.to_vec(), vec![1.0, 2.0, 3.0]);

                let err = Map::new(scaled).backend(B).run(&a, &mut out).unwrap_err();
                assert!(err.to_string().contains(".uniforms"), "{err}");

                let short = Vector::from(vec![1i64, 2, 3]);
                let mut sout = Vector::filled(3, 0i64);
                let err = MapOverlap::new(weighted, 2).uniforms((2,)).backend(B).run(&short, &mut sout).unwrap_err();
                assert!(err.to_string().contains("radius 2"), "{err}");

                let mut wrong = Vector::filled(4, 1i64);
                let err = Scan::new(add_i64).backend(B).run(&short, &mut wrong).unwrap_err();
                assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
                assert_eq!(wrong.to_vec(), vec![1; 4]);
                let m = Matrix::from_vec(2, 3, vec![1i64; 6]).unwrap();
                let mut per_row = Vector::filled(3, 2i64);
                let err = Reduce::new(add_i64).backend(B).run_rows(&m, &mut per_row).unwrap_err();
                assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
                let err = Reduce::new(add_i64).backend(B).run_cols(&m, &mut wrong).unwrap_err();
                assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
                assert_eq!((per_row.to_vec(), wrong.to_vec()), (vec![2; 3], vec![1; 4]));
                let err = Reduce::new(add_i64).backend(B).run_rows(&short, &mut per_row).unwrap_err();
                assert!(err.to_string().contains("a matrix"), "{err}");
                let err = Map::new(add_f32).backend(B).streams(0).run(&a, &a, &mut out).unwrap_err();
                assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
                let err = MapOverlap::new(stencil2, (1, 1)).backend(B).run(&short, &mut sout).unwrap_err();
                assert!(err.to_string().contains("a matrix"), "{err}");
                let err = MapOverlap::new(weighted, usize::MAX).uniforms((1,)).backend(B).run(&short, &mut sout).unwrap_err();
                assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
                assert_eq!((out.to_vec(), sout.to_vec()), (vec![9.0; 3], vec![0; 3]));
                let mut vid = Vector::zeroed(3);
                let err = Map::new(where2d).backend(B).run(&Vector::from(vec![1, 2, 3]), &mut vid).unwrap_err();
                assert!(err.to_string().contains("Matrix"), "{err}");
            }

            pairs_suite!();
            args_suite!();
            host_forms_suite!();
            tensor3_suite!();
        }
    };
}
pub mod filter;
pub mod graph;
pub mod histogram;
pub mod lang_fixes;
pub mod lazy;
pub mod random;
pub mod random_windows;
pub mod reduce_by_key;
pub mod softmax;
pub mod sort;
pub mod wavefront;
