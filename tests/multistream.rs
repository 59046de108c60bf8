//! MultiStream: every skeleton split over k CUDA streams (`.streams(k)`), with its result
//! copied back eagerly (`.download(true)`), lazily (`.download(false)`) or as the backend
//! decides (no `.download`), must give exactly what the sequential `cpu` backend gives; and
//! cutting a call into chunks must not change what crosses the bus (each input up once,
//! each result down once, partial host reads bring back only their part).
//!
//! Without a CUDA device every CUDA test prints `skipped: no cuda device (...)` and passes
//! (`SKEL_REQUIRE=cuda` turns that into a failure). `streams_zero_is_rejected_everywhere`
//! and `sixteen_streams_on_one_element_everywhere` run on every available backend.

mod common;

use std::fmt::{Debug, Display};

use proptest::prelude::*;
use skel::debug::{transfers, Transfers};
use skel::prelude::*;

const CUDA: Backend = Backend::Cuda;
const CPU: Backend = Backend::Cpu;

/// Vector lengths: empty, tiny (fewer elements than streams), primes, and two large ones
/// (above 2^16, and above 2^20 and not a multiple of 16).
const SIZES: &[usize] = &[0, 1, 2, 3, 7, 13, 97, 1000, 4099, 65_537, (1 << 20) + 7];

/// Matrix shapes: rows not divisible by most k, a single row, a single column.
const SHAPES: &[(usize, usize)] = &[
    (1, 1),
    (2, 3),
    (13, 7),
    (37, 53),
    (1, 1000),
    (1000, 1),
    (129, 257),
    (1031, 1021), // 1_052_651 elements, above 2^20
];

/// Operands above this many elements run with `LARGE_KS` only.
const LARGE: usize = 5000;
const LARGE_KS: &[usize] = &[1, 3, 16];
const DOWNLOADS: [Option<bool>; 3] = [None, Some(true), Some(false)];
const EDGES: [Edge; 4] = [Edge::Duplicate, Edge::Cyclic, Edge::Pad, Edge::None];

/// The (streams, download) pairs an operand of `n` elements runs with: every k in 1..=16
/// (1, 3 and 16 when large), the download option cycling with `salt` so every size sees
/// every option.
fn launches(n: usize, salt: usize) -> Vec<(usize, Option<bool>)> {
    let ks: Vec<usize> = if n > LARGE {
        LARGE_KS.to_vec()
    } else {
        (1..=16).collect()
    };
    ks.into_iter()
        .map(|k| (k, DOWNLOADS[(k + salt) % 3]))
        .collect()
}

/// `$skel` on CUDA over `$k` streams, with `.download(d)` when `$dl` is `Some(d)`.
macro_rules! on_cuda {
    ($skel:expr, $k:expr, $dl:expr) => {{
        let s = $skel.backend(CUDA).streams($k);
        match $dl {
            Some(d) => s.download(d),
            None => s,
        }
    }};
}

fn cuda() -> bool {
    common::available(CUDA)
}

/// Equal element by element; on failure names the first difference (not the whole vector).
#[track_caller]
fn same<T: PartialEq + Debug>(got: &[T], want: &[T], what: impl Display) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let bad: Vec<usize> = (0..got.len()).filter(|&i| got[i] != want[i]).collect();
    if let Some(&i) = bad.first() {
        panic!(
            "{what}: {} of {} elements differ; first at {i}: got {:?}, want {:?}",
            bad.len(),
            got.len(),
            got[i],
            want[i]
        );
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Bit-exact f32 comparison (tells -0.0 from 0.0, and a contracted fma from `a * b + c`).
#[track_caller]
fn same_f32(got: &[f32], want: &[f32], what: impl Display) {
    same(&bits(got), &bits(want), what);
}

fn ints_i64(n: usize, seed: u64) -> Vec<i64> {
    (0..n)
        .map(|i| ((i as u64 * 2_654_435_761 + seed) % 201) as i64 - 100)
        .collect()
}

fn ints_i32(n: usize, seed: u64) -> Vec<i32> {
    (0..n)
        .map(|i| ((i as u64 * 40_503 + seed) % 61) as i32 - 30)
        .collect()
}

/// Non-integer floats, so rounding differences would show.
fn floats(n: usize, seed: u64) -> Vec<f32> {
    (0..n)
        .map(|i| (((i as u64 * 2_654_435_761 + seed) % 1999) as f32 - 999.0) * 0.0137)
        .collect()
}

fn matrix<T: DeviceType>(rows: usize, cols: usize, data: Vec<T>) -> Matrix<T> {
    Matrix::from_vec(rows, cols, data).expect("rows * cols elements")
}

// ---------------------------------------------------------------------------------------
// User functions

#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
struct Particle {
    x: f32,
    y: f32,
    mass: i32,
    tag: u32,
}

impl Particle {
    fn key(&self) -> (u32, u32, i32, u32) {
        (self.x.to_bits(), self.y.to_bits(), self.mass, self.tag)
    }
}

fn particles(n: usize, seed: u64) -> Vec<Particle> {
    let (xs, ys, ms) = (floats(n, seed), floats(n, seed + 1), ints_i32(n, seed));
    (0..n)
        .map(|i| Particle {
            x: xs[i],
            y: ys[i],
            mass: ms[i] * 2 + 1, // odd: never zero
            tag: (i as u32).wrapping_mul(2_654_435_761),
        })
        .collect()
}

/// Associative, not commutative: any chunk combined out of order shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
struct Affine {
    m: i64,
    c: i64,
}

fn affines(n: usize, seed: usize) -> Vec<Affine> {
    (0..n)
        .map(|i| Affine {
            m: if (i + seed) % 3 == 0 { -1 } else { 1 },
            c: ((i + seed) % 11) as i64 - 5,
        })
        .collect()
}

const IDENTITY: Affine = Affine { m: 1, c: 0 };

#[userfn]
fn negate(a: i64) -> i64 {
    -a
}

#[userfn]
fn add_f32(a: f32, b: f32) -> f32 {
    a + b
}

#[userfn]
fn scale_by(x: f32, n: i32) -> f32 {
    x * (n as f32) - 0.75
}

#[userfn]
fn fma3(a: f32, b: f32, c: f32) -> f32 {
    a * b + c
}

#[userfn]
fn mixed4(a: f32, n: i32, p: Particle, small: u8) -> f32 {
    (a * p.x + p.y) / ((p.mass + 2 * n) as f32 + 0.5) - (small as f32) * 0.125
}

#[userfn]
fn drift(p: Particle, #[uniform] dt: f32, #[uniform] push: Particle) -> Particle {
    Particle {
        x: p.x + dt * push.x,
        y: p.y * push.y - dt,
        mass: p.mass + push.mass,
        tag: p.tag ^ push.tag,
    }
}

#[userfn]
fn hash_index(#[index] i: usize) -> u64 {
    (i as u64) * 2654435761 % 1000003
}

#[userfn]
fn index_mix(#[index] i: usize, x: i32, #[uniform] k: i64) -> i64 {
    (i as i64) * k + (x as i64)
}

#[userfn]
fn where2d(#[index] (row, col): (usize, usize)) -> i64 {
    (row as i64) * 100000 + (col as i64)
}

#[userfn]
fn where2d_plus(#[index] (row, col): (usize, usize), x: f32, #[uniform] k: f32) -> f32 {
    x * k + (row as f32) * 0.5 - (col as f32)
}

#[userfn]
fn add_i64(a: i64, b: i64) -> i64 {
    a + b
}

#[userfn]
fn twice_minus(a: i64, b: i64) -> i64 {
    2 * a - b
}

#[userfn]
fn mul_i64(a: i64, b: i64) -> i64 {
    a * b
}

#[userfn]
fn max_i64(a: i64, b: i64) -> i64 {
    a.max(b)
}

#[userfn]
fn min_f32(a: f32, b: f32) -> f32 {
    a.min(b)
}

#[userfn]
fn compose(a: Affine, b: Affine) -> Affine {
    Affine {
        m: a.m * b.m,
        c: a.c * b.m + b.c,
    }
}

#[userfn]
fn index_weight(#[index] i: usize, x: i64) -> i64 {
    x * ((i % 7) as i64 - 3)
}

#[userfn]
fn where2d_weight(#[index] (row, col): (usize, usize), x: i64) -> i64 {
    x * ((row % 5) as i64) - ((col % 3) as i64)
}

#[userfn]
fn lookup(table: &[i64], x: u32) -> i64 {
    table[x as usize]
}

#[userfn]
fn lookup_scaled(table: &[i64], x: u32, f: f32) -> f32 {
    (table[x as usize] as f32) * f
}

#[userfn]
fn gather_index(#[index] i: usize, table: &[i64], #[uniform] offset: i64) -> i64 {
    table[i % 1000] + offset
}

#[userfn]
fn weighted(w: Window<i64>, #[uniform] r: i32) -> i64 {
    let mut acc = 0;
    let mut d = -r;
    while d <= r {
        acc += w[d as isize] * (d as i64 + 10);
        d += 1;
    }
    acc
}

#[userfn]
fn blur3(w: Window<f32>) -> f32 {
    (w[-1] + w[0] + w[1]) / 3.0
}

#[userfn]
fn box2(w: Window2<i64>, #[uniform] rr: i32, #[uniform] rc: i32) -> i64 {
    let mut acc = 0;
    let mut i = -rr;
    while i <= rr {
        let mut j = -rc;
        while j <= rc {
            acc += w[(i as isize, j as isize)] * ((i * 7 + j) as i64 + 100);
            j += 1;
        }
        i += 1;
    }
    acc
}

// ---------------------------------------------------------------------------------------
// Map

#[test]
fn map_one_to_four_inputs_match_the_cpu() {
    if !cuda() {
        return;
    }
    for (salt, &n) in SIZES.iter().enumerate() {
        let (hx, ha, hb, hc) = (ints_i64(n, 1), floats(n, 2), floats(n, 3), floats(n, 4));
        let (hn, hp) = (ints_i32(n, 5), particles(n, 6));
        let hs: Vec<u8> = (0..n).map(|i| (i * 31 % 256) as u8).collect();
        let v = |h: &Vec<f32>| Vector::from(h.clone());

        let mut w1 = Vector::zeroed(n);
        Map::new(negate)
            .backend(CPU)
            .run(&Vector::from(hx.clone()), &mut w1)
            .unwrap();
        let mut w2 = Vector::zeroed(n);
        Map::new(scale_by)
            .backend(CPU)
            .run(&v(&ha), &Vector::from(hn.clone()), &mut w2)
            .unwrap();
        let mut w3 = Vector::zeroed(n);
        Map::new(fma3)
            .backend(CPU)
            .run(&v(&ha), &v(&hb), &v(&hc), &mut w3)
            .unwrap();
        let mut w4 = Vector::zeroed(n);
        Map::new(mixed4)
            .backend(CPU)
            .run(
                &v(&ha),
                &Vector::from(hn.clone()),
                &Vector::from(hp.clone()),
                &Vector::from(hs.clone()),
                &mut w4,
            )
            .unwrap();
        let (w1, w2, w3, w4) = (w1.to_vec(), w2.to_vec(), w3.to_vec(), w4.to_vec());

        for (k, dl) in launches(n, salt) {
            let what = format!("n={n} k={k} download={dl:?}");
            // Fresh inputs every time, so each launch also cuts the uploads into chunks.
            let mut o1 = Vector::filled(n, 7i64);
            on_cuda!(Map::new(negate), k, dl)
                .run(&Vector::from(hx.clone()), &mut o1)
                .unwrap();
            same(o1.as_slice(), &w1, format_args!("1 input, {what}"));

            let mut o2 = Vector::filled(n, f32::NAN);
            on_cuda!(Map::new(scale_by), k, dl)
                .run(&v(&ha), &Vector::from(hn.clone()), &mut o2)
                .unwrap();
            same_f32(o2.as_slice(), &w2, format_args!("2 inputs, {what}"));

            let mut o3 = Vector::filled(n, f32::NAN);
            on_cuda!(Map::new(fma3), k, dl)
                .run(&v(&ha), &v(&hb), &v(&hc), &mut o3)
                .unwrap();
            same_f32(o3.as_slice(), &w3, format_args!("3 inputs (a*b+c), {what}"));

            let mut o4 = Vector::filled(n, f32::NAN);
            on_cuda!(Map::new(mixed4), k, dl)
                .run(
                    &v(&ha),
                    &Vector::from(hn.clone()),
                    &Vector::from(hp.clone()),
                    &Vector::from(hs.clone()),
                    &mut o4,
                )
                .unwrap();
            same_f32(o4.as_slice(), &w4, format_args!("4 mixed inputs, {what}"));
        }
    }
}

#[test]
fn map_index_uniforms_and_structs_match_the_cpu() {
    if !cuda() {
        return;
    }
    let dt = 0.37f32;
    let push = Particle {
        x: 1.5,
        y: -0.3,
        mass: 3,
        tag: 0xdead_beef,
    };
    for (salt, &n) in SIZES.iter().enumerate() {
        let (hx, hp) = (ints_i32(n, 8), particles(n, 9));
        let mut w1 = Vector::zeroed(n);
        Map::new(hash_index)
            .backend(CPU)
            .run_index(&mut w1)
            .unwrap();
        let mut w2 = Vector::zeroed(n);
        Map::new(index_mix)
            .uniforms((-3,))
            .backend(CPU)
            .run(&Vector::from(hx.clone()), &mut w2)
            .unwrap();
        let mut w3 = Vector::zeroed(n);
        Map::new(drift)
            .uniforms((dt, push))
            .backend(CPU)
            .run(&Vector::from(hp.clone()), &mut w3)
            .unwrap();
        let w3: Vec<_> = w3.iter().map(Particle::key).collect();

        for (k, dl) in launches(n, salt) {
            let what = format!("n={n} k={k} download={dl:?}");
            let mut o1 = Vector::filled(n, u64::MAX);
            on_cuda!(Map::new(hash_index), k, dl)
                .run_index(&mut o1)
                .unwrap();
            same(o1.as_slice(), w1.as_slice(), format_args!("index, {what}"));

            let mut o2 = Vector::filled(n, i64::MIN);
            on_cuda!(Map::new(index_mix).uniforms((-3,)), k, dl)
                .run(&Vector::from(hx.clone()), &mut o2)
                .unwrap();
            same(
                o2.as_slice(),
                w2.as_slice(),
                format_args!("index + uniform, {what}"),
            );

            let mut o3 = Vector::filled(n, Particle::default());
            on_cuda!(Map::new(drift).uniforms((dt, push)), k, dl)
                .run(&Vector::from(hp.clone()), &mut o3)
                .unwrap();
            let o3: Vec<_> = o3.iter().map(Particle::key).collect();
            same(&o3, &w3, format_args!("struct + uniforms, {what}"));
        }
    }
}

#[test]
fn map_on_matrices_with_a_2d_index_matches_the_cpu() {
    if !cuda() {
        return;
    }
    for (salt, &(rows, cols)) in SHAPES.iter().enumerate() {
        let n = rows * cols;
        let hx = floats(n, 10);
        let mut w1 = Matrix::zeroed(rows, cols);
        Map::new(where2d).backend(CPU).run_index(&mut w1).unwrap();
        let mut w2 = Matrix::zeroed(rows, cols);
        Map::new(where2d_plus)
            .uniforms((1.25,))
            .backend(CPU)
            .run(&matrix(rows, cols, hx.clone()), &mut w2)
            .unwrap();
        for (k, dl) in launches(n, salt) {
            let what = format!("{rows}x{cols} k={k} download={dl:?}");
            let mut o1 = Matrix::filled(rows, cols, -1i64);
            on_cuda!(Map::new(where2d), k, dl)
                .run_index(&mut o1)
                .unwrap();
            same(
                o1.as_slice(),
                w1.as_slice(),
                format_args!("2D index, {what}"),
            );
            let mut o2 = Matrix::filled(rows, cols, f32::NAN);
            on_cuda!(Map::new(where2d_plus).uniforms((1.25,)), k, dl)
                .run(&matrix(rows, cols, hx.clone()), &mut o2)
                .unwrap();
            same_f32(
                o2.as_slice(),
                w2.as_slice(),
                format_args!("2D index + input + uniform, {what}"),
            );
        }
    }
}

/// Escape time of a Mandelbrot point (a loop: the compute-bound, one-element-per-thread
/// launch; with a 2D index, the 2D grid, whose chunks start and end inside rows).
#[userfn]
fn escape(#[index] (row, col): (usize, usize), shift: f32) -> f32 {
    let cr = col as f32 * 0.002 - 1.5 + shift * 0.001;
    let ci = row as f32 * 0.003 - 1.0;
    let mut zr = 0.0f32;
    let mut zi = 0.0f32;
    let mut k = 0u32;
    while k < 24 && zr * zr + zi * zi < 4.0 {
        let t = zr * zr - zi * zi + cr;
        zi = 2.0 * zr * zi + ci;
        zr = t;
        k += 1;
    }
    k as f32 + shift
}

/// All-pairs: a loop over the whole array, the same for every element.
#[allow(clippy::needless_range_loop)]
#[userfn]
fn pull(x: f32, table: &[f32], #[uniform] n: u32) -> f32 {
    let mut s = 0.0f32;
    for j in 0..n as usize {
        let d = table[j] - x;
        s += d / (d * d + 1.0);
    }
    s
}

#[test]
fn compute_bound_launches_split_into_chunks_match_the_cpu() {
    if !cuda() {
        return;
    }
    for (salt, &(rows, cols)) in SHAPES.iter().enumerate() {
        let n = rows * cols;
        let shift = matrix(rows, cols, floats(n, 21));
        let mut want = Matrix::zeroed(rows, cols);
        Map::new(escape)
            .backend(CPU)
            .run(&shift, &mut want)
            .unwrap();
        for (k, dl) in launches(n, salt) {
            let mut got = Matrix::filled(rows, cols, f32::NAN);
            on_cuda!(Map::new(escape), k, dl)
                .run(&shift, &mut got)
                .unwrap();
            same_f32(
                got.as_slice(),
                want.as_slice(),
                format_args!("escape {rows}x{cols} k={k} download={dl:?}"),
            );
        }
    }
    let table = Vector::from(floats(300, 22));
    for (salt, &n) in SIZES.iter().enumerate().filter(|(_, &n)| n <= LARGE) {
        let x = Vector::from(floats(n, 23));
        let mut want = Vector::zeroed(n);
        MapArray::new(pull)
            .uniforms((300,))
            .backend(CPU)
            .run(&table, &x, &mut want)
            .unwrap();
        for (k, dl) in launches(n, salt) {
            let mut got = Vector::filled(n, f32::NAN);
            on_cuda!(MapArray::new(pull).uniforms((300,)), k, dl)
                .run(&table, &x, &mut got)
                .unwrap();
            same_f32(
                got.as_slice(),
                want.as_slice(),
                format_args!("pull n={n} k={k} download={dl:?}"),
            );
        }
    }
}

#[test]
fn map_on_views_with_chunks_touches_only_the_range() {
    if !cuda() {
        return;
    }
    for &n in &[20usize, 97, 1000, 65_537] {
        let (ha, hb) = (floats(n, 11), floats(n, 12));
        let len = n - 10;
        for k in 1..=16 {
            if n > LARGE && !LARGE_KS.contains(&k) {
                continue;
            }
            for dl in DOWNLOADS {
                let what = format!("n={n} k={k} download={dl:?}");
                let (a, b) = (Vector::from(ha.clone()), Vector::from(hb.clone()));
                let mut out = Vector::filled(n, -1.0f32);
                on_cuda!(Map::new(add_f32), k, dl)
                    .run(
                        &a.view(10..n),
                        &b.view(0..len),
                        &mut out.view_mut(5..5 + len),
                    )
                    .unwrap();
                let want: Vec<f32> = (0..n)
                    .map(|i| {
                        if (5..5 + len).contains(&i) {
                            ha[i + 5] + hb[i - 5]
                        } else {
                            -1.0
                        }
                    })
                    .collect();
                same_f32(out.as_slice(), &want, &what);
                let bytes = (len * 4) as u64;
                assert_eq!(transfers(&a).up, bytes, "a: only the view goes up, {what}");
                assert_eq!(transfers(&b).up, bytes, "b: only the view goes up, {what}");
                assert_eq!(
                    transfers(&out),
                    Transfers { up: 0, down: bytes },
                    "out: only the written range comes back, never up, {what}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// MapArray

#[test]
fn map_array_shares_the_array_across_chunks() {
    if !cuda() {
        return;
    }
    let htable = ints_i64(1000, 13);
    let tbytes = (htable.len() * 8) as u64;
    for (salt, &n) in SIZES.iter().enumerate() {
        let hidx: Vec<u32> = (0..n).map(|i| (i * 7919 % 1000) as u32).collect();
        let hf = floats(n, 14);
        let table = Vector::from(htable.clone());
        let mut w1 = Vector::zeroed(n);
        MapArray::new(lookup)
            .backend(CPU)
            .run(&table, &Vector::from(hidx.clone()), &mut w1)
            .unwrap();
        let mut w2 = Vector::zeroed(n);
        MapArray::new(lookup_scaled)
            .backend(CPU)
            .run(
                &table,
                &Vector::from(hidx.clone()),
                &Vector::from(hf.clone()),
                &mut w2,
            )
            .unwrap();
        let mut w3 = Vector::zeroed(n);
        MapArray::new(gather_index)
            .uniforms((4,))
            .backend(CPU)
            .run_index(&table, &mut w3)
            .unwrap();
        for (k, dl) in launches(n, salt) {
            let what = format!("n={n} k={k} download={dl:?}");
            let table = Vector::from(htable.clone());
            let idx = Vector::from(hidx.clone());
            let mut o1 = Vector::filled(n, -1i64);
            on_cuda!(MapArray::new(lookup), k, dl)
                .run(&table, &idx, &mut o1)
                .unwrap();
            same(o1.as_slice(), w1.as_slice(), format_args!("lookup, {what}"));
            if n > 0 {
                assert_eq!(
                    transfers(&table).up,
                    tbytes,
                    "the array goes up once for all chunks, {what}"
                );
                assert_eq!(
                    transfers(&idx).up,
                    (n * 4) as u64,
                    "the input goes up once, {what}"
                );
            }
            let mut o2 = Vector::filled(n, f32::NAN);
            on_cuda!(MapArray::new(lookup_scaled), k, dl)
                .run(&table, &idx, &Vector::from(hf.clone()), &mut o2)
                .unwrap();
            same_f32(
                o2.as_slice(),
                w2.as_slice(),
                format_args!("2 inputs, {what}"),
            );
            let mut o3 = Vector::filled(n, -1i64);
            on_cuda!(MapArray::new(gather_index).uniforms((4,)), k, dl)
                .run_index(&table, &mut o3)
                .unwrap();
            same(o3.as_slice(), w3.as_slice(), format_args!("index, {what}"));
            if n > 0 {
                assert_eq!(
                    transfers(&table).up,
                    tbytes,
                    "the array stays on the device between calls, {what}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Reduce and MapReduce

#[test]
fn reduce_flat_matches_the_cpu() {
    if !cuda() {
        return;
    }
    for (salt, &n) in SIZES.iter().enumerate() {
        let (hv, hf, ha) = (ints_i64(n, 15), floats(n, 16), affines(n, salt));
        let v = Vector::from(hv.clone());
        let want_sum = Reduce::new(add_i64).start(5).backend(CPU).run(&v).unwrap();
        let want_max = Reduce::new(max_i64)
            .start(i64::MIN)
            .backend(CPU)
            .run(&v)
            .unwrap();
        let want_max0 = Reduce::new(max_i64).backend(CPU).run(&v).unwrap();
        let want_min = Reduce::new(min_f32)
            .start(f32::MAX)
            .backend(CPU)
            .run(&Vector::from(hf.clone()))
            .unwrap();
        let want_aff = Reduce::new(compose)
            .start(IDENTITY)
            .backend(CPU)
            .run(&Vector::from(ha.clone()))
            .unwrap();
        let want_view = (n >= 3).then(|| {
            Reduce::new(add_i64)
                .backend(CPU)
                .run(&v.view(3..n))
                .unwrap()
        });
        for (k, dl) in launches(n, salt) {
            let what = format!("n={n} k={k} download={dl:?}");
            let v = Vector::from(hv.clone());
            let sum = on_cuda!(Reduce::new(add_i64).start(5), k, dl)
                .run(&v)
                .unwrap();
            assert_eq!(sum, want_sum, "sum, {what}");
            if n > 0 {
                assert_eq!(transfers(&v).up, (n * 8) as u64, "up once, {what}");
            }
            let max = on_cuda!(Reduce::new(max_i64).start(i64::MIN), k, dl)
                .run(&v)
                .unwrap();
            assert_eq!(max, want_max, "max, {what}");
            let max0 = on_cuda!(Reduce::new(max_i64), k, dl).run(&v).unwrap();
            assert_eq!(max0, want_max0, "max from the default start, {what}");
            let min = on_cuda!(Reduce::new(min_f32).start(f32::MAX), k, dl)
                .run(&Vector::from(hf.clone()))
                .unwrap();
            assert_eq!(min.to_bits(), want_min.to_bits(), "f32 min, {what}");
            let aff = on_cuda!(Reduce::new(compose).start(IDENTITY), k, dl)
                .run(&Vector::from(ha.clone()))
                .unwrap();
            assert_eq!(aff, want_aff, "non-commutative, {what}");
            if let Some(want) = want_view {
                let got = on_cuda!(Reduce::new(add_i64), k, dl)
                    .run(&v.view(3..n))
                    .unwrap();
                assert_eq!(got, want, "view 3..{n}, {what}");
            }
        }
    }
}

#[test]
fn reduce_matrices_flat_per_row_and_per_column_match_the_cpu() {
    if !cuda() {
        return;
    }
    for (salt, &(rows, cols)) in SHAPES.iter().enumerate() {
        let n = rows * cols;
        let (hm, ha) = (ints_i64(n, 17), affines(n, salt));
        let m = matrix(rows, cols, hm.clone());
        let am = matrix(rows, cols, ha.clone());
        let want_flat = Reduce::new(add_i64).start(-2).backend(CPU).run(&m).unwrap();
        let mut want_rows = Vector::zeroed(rows);
        Reduce::new(add_i64)
            .backend(CPU)
            .run_rows(&m, &mut want_rows)
            .unwrap();
        let mut want_cols = Vector::zeroed(cols);
        Reduce::new(max_i64)
            .backend(CPU)
            .run_cols(&m, &mut want_cols)
            .unwrap();
        let mut want_arows = Vector::zeroed(rows);
        Reduce::new(compose)
            .backend(CPU)
            .run_rows(&am, &mut want_arows)
            .unwrap();
        let mut want_acols = Vector::zeroed(cols);
        Reduce::new(compose)
            .backend(CPU)
            .run_cols(&am, &mut want_acols)
            .unwrap();
        for (k, dl) in launches(n, salt) {
            let what = format!("{rows}x{cols} k={k} download={dl:?}");
            let m = matrix(rows, cols, hm.clone());
            let flat = on_cuda!(Reduce::new(add_i64).start(-2), k, dl)
                .run(&m)
                .unwrap();
            assert_eq!(flat, want_flat, "flat, {what}");

            let mut per_row = Vector::filled(rows, -1i64);
            on_cuda!(Reduce::new(add_i64), k, dl)
                .run_rows(&m, &mut per_row)
                .unwrap();
            same(
                per_row.as_slice(),
                want_rows.as_slice(),
                format_args!("rows, {what}"),
            );
            let mut per_col = Vector::filled(cols, -1i64);
            on_cuda!(Reduce::new(max_i64), k, dl)
                .run_cols(&m, &mut per_col)
                .unwrap();
            same(
                per_col.as_slice(),
                want_cols.as_slice(),
                format_args!("cols, {what}"),
            );
            assert_eq!(
                transfers(&m).up,
                (n * 8) as u64,
                "the matrix goes up once for three calls, {what}"
            );
            if dl == Some(true) {
                assert_eq!(
                    transfers(&per_row).down,
                    (rows * 8) as u64,
                    "per-row result comes back once, {what}"
                );
            }

            let am = matrix(rows, cols, ha.clone());
            let mut arows = Vector::filled(rows, Affine::default());
            on_cuda!(Reduce::new(compose), k, dl)
                .run_rows(&am, &mut arows)
                .unwrap();
            same(
                arows.as_slice(),
                want_arows.as_slice(),
                format_args!("non-commutative rows, {what}"),
            );
            let mut acols = Vector::filled(cols, Affine::default());
            on_cuda!(Reduce::new(compose), k, dl)
                .run_cols(&am, &mut acols)
                .unwrap();
            same(
                acols.as_slice(),
                want_acols.as_slice(),
                format_args!("non-commutative cols, {what}"),
            );
        }
    }
}

#[test]
fn map_reduce_matches_the_cpu() {
    if !cuda() {
        return;
    }
    for (salt, &n) in SIZES.iter().enumerate() {
        let (ha, hb) = (ints_i64(n, 18), ints_i64(n, 19));
        let (hf, hg, hh) = (floats(n, 20), floats(n, 21), floats(n, 22));
        let (a, b) = (Vector::from(ha.clone()), Vector::from(hb.clone()));
        let want_dot = MapReduce::new(mul_i64, add_i64)
            .start(-7)
            .backend(CPU)
            .run(&a, &b)
            .unwrap();
        let want_idx = MapReduce::new(index_weight, add_i64)
            .backend(CPU)
            .run(&a)
            .unwrap();
        let want_idx_max = MapReduce::new(index_weight, max_i64)
            .start(i64::MIN)
            .backend(CPU)
            .run(&a)
            .unwrap();
        let f = |h: &Vec<f32>| Vector::from(h.clone());
        let want_fmin = MapReduce::new(fma3, min_f32)
            .start(f32::MAX)
            .backend(CPU)
            .run(&f(&hf), &f(&hg), &f(&hh))
            .unwrap();
        for (k, dl) in launches(n, salt) {
            let what = format!("n={n} k={k} download={dl:?}");
            let (a, b) = (Vector::from(ha.clone()), Vector::from(hb.clone()));
            let dot = on_cuda!(MapReduce::new(mul_i64, add_i64).start(-7), k, dl)
                .run(&a, &b)
                .unwrap();
            assert_eq!(dot, want_dot, "dot, {what}");
            let idx = on_cuda!(MapReduce::new(index_weight, add_i64), k, dl)
                .run(&a)
                .unwrap();
            assert_eq!(
                idx, want_idx,
                "with #[index] (global, not per chunk), {what}"
            );
            let idx_max = on_cuda!(MapReduce::new(index_weight, max_i64).start(i64::MIN), k, dl)
                .run(&a)
                .unwrap();
            assert_eq!(idx_max, want_idx_max, "index + max, {what}");
            let fmin = on_cuda!(MapReduce::new(fma3, min_f32).start(f32::MAX), k, dl)
                .run(&f(&hf), &f(&hg), &f(&hh))
                .unwrap();
            assert_eq!(fmin.to_bits(), want_fmin.to_bits(), "f32 fma3/min, {what}");
            if n > 0 {
                let bytes = (n * 8) as u64;
                assert_eq!(transfers(&a).up, bytes, "a up once over 3 calls, {what}");
                assert_eq!(transfers(&b).up, bytes, "b up once, {what}");
            }
        }
    }
    for (salt, &(rows, cols)) in SHAPES.iter().enumerate() {
        let hm = ints_i64(rows * cols, 23);
        let want = MapReduce::new(where2d_weight, add_i64)
            .start(3)
            .backend(CPU)
            .run(&matrix(rows, cols, hm.clone()))
            .unwrap();
        for (k, dl) in launches(rows * cols, salt) {
            let got = on_cuda!(MapReduce::new(where2d_weight, add_i64).start(3), k, dl)
                .run(&matrix(rows, cols, hm.clone()))
                .unwrap();
            assert_eq!(got, want, "2D index {rows}x{cols} k={k} download={dl:?}");
        }
    }
}

// ---------------------------------------------------------------------------------------
// Scan

#[test]
fn scan_inclusive_and_exclusive_match_the_cpu() {
    if !cuda() {
        return;
    }
    for (salt, &n) in SIZES.iter().enumerate() {
        let (hv, ha) = (ints_i64(n, 24), affines(n, salt));
        let mut wants = Vec::new();
        for mode in [ScanMode::Inclusive, ScanMode::Exclusive] {
            let mut sum = Vector::zeroed(n);
            Scan::new(add_i64)
                .mode(mode)
                .start(10)
                .backend(CPU)
                .run(&Vector::from(hv.clone()), &mut sum)
                .unwrap();
            let mut max = Vector::zeroed(n);
            Scan::new(max_i64)
                .mode(mode)
                .start(-1000)
                .backend(CPU)
                .run(&Vector::from(hv.clone()), &mut max)
                .unwrap();
            let mut aff = Vector::zeroed(n);
            Scan::new(compose)
                .mode(mode)
                .start(Affine { m: -1, c: 4 })
                .backend(CPU)
                .run(&Vector::from(ha.clone()), &mut aff)
                .unwrap();
            wants.push((mode, sum.to_vec(), max.to_vec(), aff.to_vec()));
        }
        for (k, dl) in launches(n, salt) {
            for (mode, want_sum, want_max, want_aff) in &wants {
                let what = format!("{mode:?} n={n} k={k} download={dl:?}");
                let v = Vector::from(hv.clone());
                let mut out = Vector::filled(n, i64::MIN);
                on_cuda!(Scan::new(add_i64).mode(*mode).start(10), k, dl)
                    .run(&v, &mut out)
                    .unwrap();
                same(out.as_slice(), want_sum, format_args!("sum, {what}"));
                let mut out = Vector::filled(n, i64::MIN);
                on_cuda!(Scan::new(max_i64).mode(*mode).start(-1000), k, dl)
                    .run(&v, &mut out)
                    .unwrap();
                same(out.as_slice(), want_max, format_args!("max, {what}"));
                if n > 0 {
                    assert_eq!(transfers(&v).up, (n * 8) as u64, "up once, {what}");
                }
                let mut out = Vector::filled(n, Affine::default());
                on_cuda!(
                    Scan::new(compose).mode(*mode).start(Affine { m: -1, c: 4 }),
                    k,
                    dl
                )
                .run(&Vector::from(ha.clone()), &mut out)
                .unwrap();
                same(
                    out.as_slice(),
                    want_aff,
                    format_args!("non-commutative, {what}"),
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// MapOverlap

#[test]
fn map_overlap_1d_every_edge_and_radius_matches_the_cpu() {
    if !cuda() {
        return;
    }
    for (salt, &n) in SIZES.iter().enumerate() {
        let hv = ints_i64(n, 25);
        let hf = floats(n, 26);
        for r in [1usize, 2, 3, 5] {
            if n < 2 * r {
                continue;
            }
            for edge in EDGES {
                let s = MapOverlap::new(weighted, r)
                    .edge(edge)
                    .pad(3)
                    .uniforms((r as i32,));
                let mut want = Vector::filled(n, -77i64);
                s.backend(CPU)
                    .run(&Vector::from(hv.clone()), &mut want)
                    .unwrap();
                for (k, dl) in launches(n, salt + r) {
                    let what = format!("n={n} r={r} {edge:?} k={k} download={dl:?}");
                    let mut got = Vector::filled(n, -77i64);
                    on_cuda!(s, k, dl)
                        .run(&Vector::from(hv.clone()), &mut got)
                        .unwrap();
                    same(got.as_slice(), want.as_slice(), &what);
                }
            }
        }
        if n >= 2 {
            let mut want = Vector::filled(n, f32::NAN);
            MapOverlap::new(blur3, 1)
                .backend(CPU)
                .run(&Vector::from(hf.clone()), &mut want)
                .unwrap();
            for (k, dl) in launches(n, salt) {
                let mut got = Vector::filled(n, f32::NAN);
                on_cuda!(MapOverlap::new(blur3, 1), k, dl)
                    .run(&Vector::from(hf.clone()), &mut got)
                    .unwrap();
                same_f32(
                    got.as_slice(),
                    want.as_slice(),
                    format_args!("f32 blur n={n} k={k} download={dl:?}"),
                );
            }
        }
    }
}

/// Radii as large as the input allows: with 16 streams most chunks are narrower than the
/// window, so halos span several chunks (or the whole input).
#[test]
fn map_overlap_radius_wider_than_a_chunk() {
    if !cuda() {
        return;
    }
    for n in [2usize, 4, 10, 11, 12, 13, 20, 33] {
        let hv = ints_i64(n, 27);
        for r in [n / 2, n / 3, n / 4].into_iter().filter(|&r| r >= 1) {
            for edge in EDGES {
                let s = MapOverlap::new(weighted, r)
                    .edge(edge)
                    .pad(-4)
                    .uniforms((r as i32,));
                let mut want = Vector::filled(n, 55i64);
                s.backend(CPU)
                    .run(&Vector::from(hv.clone()), &mut want)
                    .unwrap();
                for k in 1..=16 {
                    for dl in DOWNLOADS {
                        let mut got = Vector::filled(n, 55i64);
                        on_cuda!(s, k, dl)
                            .run(&Vector::from(hv.clone()), &mut got)
                            .unwrap();
                        same(
                            got.as_slice(),
                            want.as_slice(),
                            format_args!("n={n} r={r} {edge:?} k={k} download={dl:?}"),
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn map_overlap_rowwise_and_colwise_match_the_cpu() {
    if !cuda() {
        return;
    }
    for (salt, &(rows, cols)) in SHAPES.iter().enumerate() {
        let hm = ints_i64(rows * cols, 28);
        for r in [1usize, 2, 3] {
            for edge in EDGES {
                for rowwise in [true, false] {
                    let s = MapOverlap::new(weighted, r)
                        .edge(edge)
                        .pad(2)
                        .uniforms((r as i32,));
                    let s = if rowwise { s.rowwise() } else { s.colwise() };
                    let mut want = Matrix::filled(rows, cols, -5i64);
                    let ok = s
                        .backend(CPU)
                        .run(&matrix(rows, cols, hm.clone()), &mut want)
                        .is_ok();
                    let axis = if rowwise { "rowwise" } else { "colwise" };
                    for (k, dl) in launches(rows * cols, salt + r) {
                        let what =
                            format!("{axis} {rows}x{cols} r={r} {edge:?} k={k} download={dl:?}");
                        let mut got = Matrix::filled(rows, cols, -5i64);
                        let res = on_cuda!(s, k, dl).run(&matrix(rows, cols, hm.clone()), &mut got);
                        assert_eq!(res.is_ok(), ok, "{what}: {res:?}");
                        same(got.as_slice(), want.as_slice(), &what);
                    }
                }
            }
        }
    }
}

#[test]
fn map_overlap_2d_matches_the_cpu() {
    if !cuda() {
        return;
    }
    let radii = [(1usize, 1usize), (2, 1), (1, 3), (3, 2), (6, 3)];
    for (salt, &(rows, cols)) in SHAPES.iter().enumerate() {
        let hm = ints_i64(rows * cols, 29);
        for (rr, rc) in radii {
            if rows < 2 * rr || cols < 2 * rc {
                continue;
            }
            for edge in EDGES {
                let s = MapOverlap::new(box2, (rr, rc))
                    .edge(edge)
                    .pad(9)
                    .uniforms((rr as i32, rc as i32));
                let mut want = Matrix::filled(rows, cols, -9i64);
                s.backend(CPU)
                    .run(&matrix(rows, cols, hm.clone()), &mut want)
                    .unwrap();
                for (k, dl) in launches(rows * cols, salt + rr + rc) {
                    let what = format!(
                        "2D {rows}x{cols} radius ({rr}, {rc}) {edge:?} k={k} download={dl:?}"
                    );
                    let mut got = Matrix::filled(rows, cols, -9i64);
                    on_cuda!(s, k, dl)
                        .run(&matrix(rows, cols, hm.clone()), &mut got)
                        .unwrap();
                    same(got.as_slice(), want.as_slice(), &what);
                }
            }
        }
    }
    // The default 2D edge (None: only the interior is written) with chunks.
    let (rows, cols) = (37, 53);
    let hm = ints_i64(rows * cols, 30);
    let s = MapOverlap::new(box2, (2, 2)).uniforms((2, 2));
    let mut want = Matrix::filled(rows, cols, 1i64);
    s.backend(CPU)
        .run(&matrix(rows, cols, hm.clone()), &mut want)
        .unwrap();
    for k in 1..=16 {
        let mut got = Matrix::filled(rows, cols, 1i64);
        on_cuda!(s, k, None::<bool>)
            .run(&matrix(rows, cols, hm.clone()), &mut got)
            .unwrap();
        same(
            got.as_slice(),
            want.as_slice(),
            format_args!("2D default edge k={k}"),
        );
    }
}

// ---------------------------------------------------------------------------------------
// Host reads, transfers and chains

/// The elements a host read of stale element `i` of an `n`-element container brings back:
/// the block of 4096 around it (`Vector`'s `Index` docs).
fn element_block(i: usize, n: usize) -> std::ops::Range<usize> {
    let first = i - i % 4096;
    first..(first + 4096).min(n)
}

#[test]
fn host_reads_after_chunked_calls_move_each_byte_once() {
    if !cuda() {
        return;
    }
    for n in [13usize, 4099, 65_537] {
        let (ha, hb) = (floats(n, 31), floats(n, 32));
        let want: Vec<f32> = (0..n).map(|i| ha[i] + hb[i]).collect();
        let bytes = (n * 4) as u64;
        for k in [1, 2, 3, 7, 16] {
            for eager in [true, false] {
                let what = format!("n={n} k={k} download({eager})");
                let (a, b) = (Vector::from(ha.clone()), Vector::from(hb.clone()));
                let mut out = Vector::filled(n, -1.0f32);
                Map::new(add_f32)
                    .backend(CUDA)
                    .streams(k)
                    .download(eager)
                    .run(&a, &b, &mut out)
                    .unwrap();
                let up_once = Transfers { up: bytes, down: 0 };
                assert_eq!(transfers(&a), up_once, "a goes up once in k chunks, {what}");
                assert_eq!(transfers(&b), up_once, "b goes up once in k chunks, {what}");
                if !eager {
                    assert_eq!(
                        transfers(&out),
                        Transfers::default(),
                        "lazy: nothing comes back before a host read, {what}"
                    );
                }
                // Partial reads: one element, then a view that does not contain it.
                let i = n / 2;
                let range = n / 3..n / 2;
                assert_eq!(out[i].to_bits(), want[i].to_bits(), "out[{i}], {what}");
                same_f32(
                    out.view(range.clone()).as_slice(),
                    &want[range.clone()],
                    format_args!("view {range:?}, {what}"),
                );
                // Lazy: the element brings back the stale part of its block, the view what
                // of it the block did not cover.
                let block = element_block(i, n);
                let fetched = block.len() + range.clone().filter(|j| !block.contains(j)).count();
                let partial = if eager { bytes } else { fetched as u64 * 4 };
                assert_eq!(
                    transfers(&out),
                    Transfers {
                        up: 0,
                        down: partial
                    },
                    "after reading out[{i}] and {range:?}, {what}"
                );
                // The whole, twice: exactly one download of every byte in all.
                same_f32(out.as_slice(), &want, format_args!("whole, {what}"));
                same_f32(&out.to_vec(), &want, format_args!("again, {what}"));
                assert_eq!(
                    transfers(&out),
                    Transfers { up: 0, down: bytes },
                    "the result comes back exactly once, {what}"
                );
                assert_eq!(transfers(&a), up_once, "{what}");
            }
        }
    }
}

#[test]
fn other_skeletons_bring_their_result_back_once() {
    if !cuda() {
        return;
    }
    for n in [13usize, 4099, 65_537] {
        let hv = ints_i64(n, 33);
        let bytes = (n * 8) as u64;
        for k in [1, 3, 5, 16] {
            for eager in [true, false] {
                let what = format!("n={n} k={k} download({eager})");
                let check = |name: &str, v: &Vector<i64>, out: &Vector<i64>, want: &Vector<i64>| {
                    if !eager {
                        assert_eq!(transfers(out).down, 0, "{name}: lazy, {what}");
                    }
                    let i = n - 1;
                    assert_eq!(out[i], want.as_slice()[i], "{name}: out[{i}], {what}");
                    if eager {
                        assert_eq!(transfers(out).down, bytes, "{name}: eager, {what}");
                    } else {
                        let block = element_block(i, n).len() as u64 * 8;
                        assert_eq!(transfers(out).down, block, "{name}: one block, {what}");
                    }
                    same(
                        out.as_slice(),
                        want.as_slice(),
                        format_args!("{name}, {what}"),
                    );
                    let _ = out.to_vec();
                    assert_eq!(
                        transfers(out),
                        Transfers { up: 0, down: bytes },
                        "{name}: result down exactly once, never up, {what}"
                    );
                    assert!(transfers(v).up >= bytes, "{name}: {what}");
                };

                let v = Vector::from(hv.clone());
                let mut want = Vector::zeroed(n);
                let scan = Scan::new(add_i64).mode(ScanMode::Exclusive).start(-3);
                scan.backend(CPU).run(&v, &mut want).unwrap();
                let mut out = Vector::filled(n, 0i64);
                scan.backend(CUDA)
                    .streams(k)
                    .download(eager)
                    .run(&v, &mut out)
                    .unwrap();
                check("scan", &v, &out, &want);
                assert_eq!(transfers(&v).up, bytes, "scan input up once, {what}");

                let v = Vector::from(hv.clone());
                let r = 3;
                let overlap = MapOverlap::new(weighted, r).uniforms((r as i32,));
                overlap.backend(CPU).run(&v, &mut want).unwrap();
                let mut out = Vector::filled(n, 0i64);
                overlap
                    .backend(CUDA)
                    .streams(k)
                    .download(eager)
                    .run(&v, &mut out)
                    .unwrap();
                check("overlap", &v, &out, &want);
                // Halos may be read by two chunks; still at most one copy per chunk border.
                let halo = (2 * r * (k - 1) * 8) as u64;
                assert!(
                    transfers(&v).up <= bytes + halo,
                    "overlap input up {} > {bytes} + halos {halo}, {what}",
                    transfers(&v).up
                );
            }
        }
    }
}

#[test]
fn chained_calls_keep_intermediates_on_the_device() {
    if !cuda() {
        return;
    }
    for n in [13usize, 4099, 65_537] {
        let (ha, hb) = (ints_i64(n, 34), ints_i64(n, 35));
        let bytes = (n * 8) as u64;
        for (eager_c, eager_d) in [(false, true), (false, false), (true, true), (true, false)] {
            let what = format!("n={n} c: download({eager_c}), d: download({eager_d})");
            let (a, mut b) = (Vector::from(ha.clone()), Vector::from(hb.clone()));
            let mut c = Vector::filled(n, 0i64);
            let mut d = Vector::filled(n, 0i64);
            // c = a + b over 3 streams; d = 2c - b over 5.
            Map::new(add_i64)
                .backend(CUDA)
                .streams(3)
                .download(eager_c)
                .run(&a, &b, &mut c)
                .unwrap();
            Map::new(twice_minus)
                .backend(CUDA)
                .streams(5)
                .download(eager_d)
                .run(&c, &b, &mut d)
                .unwrap();
            let want_c: Vec<i64> = (0..n).map(|i| ha[i] + hb[i]).collect();
            let mut want_d: Vec<i64> = (0..n).map(|i| 2 * want_c[i] - hb[i]).collect();
            same(d.as_slice(), &want_d, format_args!("d, {what}"));
            let up_once = Transfers { up: bytes, down: 0 };
            assert_eq!(transfers(&a), up_once, "a, {what}");
            assert_eq!(transfers(&b), up_once, "b serves both calls, {what}");
            assert_eq!(
                transfers(&c),
                Transfers {
                    up: 0,
                    down: if eager_c { bytes } else { 0 }
                },
                "c stays on the device for the second call, {what}"
            );
            assert_eq!(transfers(&d), Transfers { up: 0, down: bytes }, "d, {what}");
            same(c.as_slice(), &want_c, format_args!("c, {what}"));
            assert_eq!(transfers(&c), Transfers { up: 0, down: bytes }, "c, {what}");

            // A host write of one element of b: the next call re-sends only that element.
            b[0] = 1000;
            let mut hb2 = hb.clone();
            hb2[0] = 1000;
            Map::new(twice_minus)
                .backend(CUDA)
                .streams(5)
                .download(eager_d)
                .run(&c, &b, &mut d)
                .unwrap();
            want_d[0] = 2 * want_c[0] - 1000;
            same(
                d.as_slice(),
                &want_d,
                format_args!("d after b[0] = 1000, {what}"),
            );
            assert_eq!(transfers(&b).up, bytes + 8, "b: only b[0] again, {what}");
            assert_eq!(transfers(&c), Transfers { up: 0, down: bytes }, "c, {what}");
            assert_eq!(transfers(&d).down, 2 * bytes, "d, {what}");

            // A host write of all of c: c goes up again (once), over 7 streams.
            for x in c.as_mut_slice() {
                *x -= 1;
            }
            Map::new(twice_minus)
                .backend(CUDA)
                .streams(7)
                .download(eager_d)
                .run(&c, &b, &mut d)
                .unwrap();
            let want_d: Vec<i64> = (0..n).map(|i| 2 * (want_c[i] - 1) - hb2[i]).collect();
            let i = n / 2;
            assert_eq!(d[i], want_d[i], "d[{i}] after writing c, {what}");
            same(
                d.as_slice(),
                &want_d,
                format_args!("d after writing c, {what}"),
            );
            assert_eq!(
                transfers(&c).up,
                bytes,
                "c up once after the host write, {what}"
            );
            assert_eq!(transfers(&b).up, bytes + 8, "b unchanged, {what}");
            assert_eq!(transfers(&d).down, 3 * bytes, "d, {what}");
        }
    }
}

// ---------------------------------------------------------------------------------------
// Every backend: the options are validated and otherwise harmless

fn backends() -> Vec<Backend> {
    [Backend::Cpu, Backend::Rayon, Backend::OpenCl, Backend::Cuda]
        .into_iter()
        .filter(|&b| common::available(b))
        .collect()
}

#[track_caller]
fn rejects_zero_streams(res: skel::Result<impl Debug>, what: &str) {
    match res {
        Err(Error::InvalidArgument(msg)) => assert!(
            msg.contains("streams"),
            "{what}: the message should name .streams: {msg}"
        ),
        other => panic!("{what}: .streams(0) gave {other:?}, want Err(InvalidArgument)"),
    }
}

#[test]
fn streams_zero_is_rejected_everywhere() {
    for b in backends() {
        let n = 100;
        let v = Vector::from(ints_i64(n, 36));
        let w = Vector::from(ints_i64(n, 37));
        let m = matrix(10, 10, ints_i64(n, 38));
        let table = Vector::from(ints_i64(1000, 39));
        let idx = Vector::from_fn(n, |i| (i * 3) as u32);
        for dl in DOWNLOADS {
            let what = |s: &str| format!("{s} on {b} with download {dl:?}");
            let mut out = Vector::filled(n, 42i64);
            let mut mout = Matrix::filled(10, 10, 42i64);
            macro_rules! zero {
                ($skel:expr) => {{
                    let s = $skel.backend(b).streams(0);
                    match dl {
                        Some(d) => s.download(d),
                        None => s,
                    }
                }};
            }
            rejects_zero_streams(zero!(Map::new(add_i64)).run(&v, &w, &mut out), &what("Map"));
            rejects_zero_streams(
                zero!(Map::new(hash_index)).run_index(&mut Vector::filled(n, 1u64)),
                &what("Map index"),
            );
            rejects_zero_streams(
                zero!(MapArray::new(lookup)).run(&table, &idx, &mut out),
                &what("MapArray"),
            );
            rejects_zero_streams(zero!(Reduce::new(add_i64)).run(&v), &what("Reduce"));
            rejects_zero_streams(
                zero!(Reduce::new(add_i64)).run_rows(&m, &mut out.view_mut(0..10)),
                &what("Reduce rows"),
            );
            rejects_zero_streams(
                zero!(Reduce::new(add_i64)).run_cols(&m, &mut out.view_mut(0..10)),
                &what("Reduce cols"),
            );
            rejects_zero_streams(
                zero!(MapReduce::new(mul_i64, add_i64)).run(&v, &w),
                &what("MapReduce"),
            );
            rejects_zero_streams(zero!(Scan::new(add_i64)).run(&v, &mut out), &what("Scan"));
            rejects_zero_streams(
                zero!(MapOverlap::new(weighted, 1).uniforms((1,))).run(&v, &mut out),
                &what("MapOverlap"),
            );
            rejects_zero_streams(
                zero!(MapOverlap::new(box2, (1, 1)).uniforms((1, 1))).run(&m, &mut mout),
                &what("MapOverlap 2D"),
            );
            assert_eq!(out.to_vec(), vec![42; n], "{}", what("outputs untouched"));
            assert_eq!(mout.to_vec(), vec![42; n], "{}", what("outputs untouched"));
            assert_eq!(v.to_vec(), ints_i64(n, 36), "{}", what("inputs untouched"));
        }
    }
}

#[test]
fn sixteen_streams_on_one_element_everywhere() {
    for b in backends() {
        for dl in DOWNLOADS {
            let what = format!("{b} with download {dl:?}");
            macro_rules! k16 {
                ($skel:expr) => {{
                    let s = $skel.backend(b).streams(16);
                    match dl {
                        Some(d) => s.download(d),
                        None => s,
                    }
                }};
            }
            let v = Vector::from(vec![5i64]);
            let w = Vector::from(vec![-2i64]);
            let mut out = Vector::filled(1, 0i64);
            k16!(Map::new(add_i64)).run(&v, &w, &mut out).unwrap();
            assert_eq!(out.to_vec(), vec![3], "Map {what}");
            let mut ids = Vector::filled(1, 9u64);
            k16!(Map::new(hash_index)).run_index(&mut ids).unwrap();
            assert_eq!(ids.to_vec(), vec![0], "Map index {what}");
            let table = Vector::from(vec![10i64, 20, 30]);
            let idx = Vector::from(vec![2u32]);
            k16!(MapArray::new(lookup))
                .run(&table, &idx, &mut out)
                .unwrap();
            assert_eq!(out.to_vec(), vec![30], "MapArray {what}");
            assert_eq!(
                k16!(Reduce::new(add_i64).start(1)).run(&v).unwrap(),
                6,
                "Reduce {what}"
            );
            assert_eq!(
                k16!(MapReduce::new(mul_i64, add_i64)).run(&v, &w).unwrap(),
                -10,
                "MapReduce {what}"
            );
            k16!(Scan::new(add_i64)).run(&v, &mut out).unwrap();
            assert_eq!(out.to_vec(), vec![5], "Scan {what}");
            k16!(Scan::new(add_i64).mode(ScanMode::Exclusive).start(7))
                .run(&v, &mut out)
                .unwrap();
            assert_eq!(out.to_vec(), vec![7], "exclusive Scan {what}");
            k16!(MapOverlap::new(weighted, 0).uniforms((0,)))
                .run(&v, &mut out)
                .unwrap();
            assert_eq!(out.to_vec(), vec![50], "MapOverlap {what}");
            let m = matrix(1, 1, vec![4i64]);
            let mut mout = Matrix::filled(1, 1, 0i64);
            k16!(MapOverlap::new(box2, (0, 0)).uniforms((0, 0)))
                .run(&m, &mut mout)
                .unwrap();
            assert_eq!(mout.to_vec(), vec![400], "MapOverlap 2D {what}");
            k16!(Reduce::new(add_i64)).run_rows(&m, &mut out).unwrap();
            assert_eq!(out.to_vec(), vec![4], "Reduce rows {what}");
            let mut idm = Matrix::filled(1, 1, -1i64);
            k16!(Map::new(where2d)).run_index(&mut idm).unwrap();
            assert_eq!(idm.to_vec(), vec![0], "Map 2D index {what}");
        }
    }
}

// ---------------------------------------------------------------------------------------
// Random lengths, stream counts and download modes

#[test]
fn prop_random_lengths_streams_and_downloads() {
    if !cuda() {
        return;
    }
    let config = ProptestConfig {
        cases: 64,
        ..ProptestConfig::default()
    };
    proptest!(config, |(
        n in 0usize..5000,
        k in 1usize..=16,
        eager in any::<bool>(),
        seed in 0u64..1000,
        r in 1usize..4,
        edge in 0usize..4,
        exclusive in any::<bool>(),
    )| {
        let what = format!("n={n} k={k} download({eager}) seed={seed}");
        let (ha, hb) = (floats(n, seed), floats(n, seed + 1));
        let (mut got, mut want) = (Vector::filled(n, f32::NAN), Vector::filled(n, f32::NAN));
        Map::new(fma3)
            .backend(CUDA)
            .streams(k)
            .download(eager)
            .run(&Vector::from(ha.clone()), &Vector::from(hb.clone()), &Vector::from(ha.clone()), &mut got)
            .unwrap();
        Map::new(fma3)
            .backend(CPU)
            .run(&Vector::from(ha.clone()), &Vector::from(hb.clone()), &Vector::from(ha.clone()), &mut want)
            .unwrap();
        prop_assert_eq!(bits(got.as_slice()), bits(want.as_slice()), "Map {}", what);

        let hv = ints_i64(n, seed);
        let mode = if exclusive { ScanMode::Exclusive } else { ScanMode::Inclusive };
        let scan = Scan::new(add_i64).mode(mode).start(seed as i64 - 500);
        let (mut got, mut want) = (Vector::filled(n, 1i64), Vector::filled(n, 1i64));
        scan.backend(CUDA).streams(k).download(eager).run(&Vector::from(hv.clone()), &mut got).unwrap();
        scan.backend(CPU).run(&Vector::from(hv.clone()), &mut want).unwrap();
        prop_assert_eq!(got.to_vec(), want.to_vec(), "{:?} Scan {}", mode, what);

        let edge = EDGES[edge];
        let overlap = MapOverlap::new(weighted, r).edge(edge).pad(seed as i64).uniforms((r as i32,));
        let (mut got, mut want) = (Vector::filled(n, 2i64), Vector::filled(n, 2i64));
        let g = overlap.backend(CUDA).streams(k).download(eager).run(&Vector::from(hv.clone()), &mut got);
        let w = overlap.backend(CPU).run(&Vector::from(hv.clone()), &mut want);
        prop_assert_eq!(g.is_ok(), w.is_ok(), "MapOverlap r={} {:?} {}: {:?}", r, edge, what, g);
        prop_assert_eq!(got.to_vec(), want.to_vec(), "MapOverlap r={} {:?} {}", r, edge, what);
    });
}

// ---------------------------------------------------------------------------------------
// Multi-output Map and container arguments

#[userfn]
fn sum_diff(a: f32, b: f32) -> (f32, f32) {
    (a + b, a - b)
}

#[userfn]
fn scaled_row_sum(#[index] i: usize, x: f32, m: Mat<f32>, w: &[f32]) -> (f32, u32) {
    let r = i % m.rows();
    let mut s = 0.0f32;
    for j in 0..m.cols() {
        s += m[(r, j)] * w[j];
    }
    (x * s, r as u32)
}

#[test]
fn multi_output_and_container_args_over_chunks() {
    if !cuda() {
        return;
    }
    let (rows, cols) = (37, 19);
    let m = matrix(rows, cols, floats(rows * cols, 21));
    let w = Vector::from(floats(cols, 22));
    let mbytes = (rows * cols * 4) as u64;
    for (salt, &n) in SIZES.iter().enumerate() {
        let (ha, hb) = (floats(n, 23), floats(n, 24));
        let (a, b) = (Vector::from(ha.clone()), Vector::from(hb.clone()));
        let (mut ws, mut wd) = (Vector::zeroed(n), Vector::zeroed(n));
        Map::new(sum_diff)
            .backend(CPU)
            .run(&a, &b, &mut (&mut ws, &mut wd))
            .unwrap();
        let (mut wx, mut wr) = (Vector::zeroed(n), Vector::zeroed(n));
        Map::new(scaled_row_sum)
            .arrays((&m, &w))
            .backend(CPU)
            .run(&a, &mut (&mut wx, &mut wr))
            .unwrap();
        for (k, dl) in launches(n, salt) {
            let what = format!("n={n} k={k} download={dl:?}");
            let (mut s, mut d) = (Vector::filled(n, f32::NAN), Vector::filled(n, f32::NAN));
            on_cuda!(Map::new(sum_diff), k, dl)
                .run(&a, &b, &mut (&mut s, &mut d))
                .unwrap();
            same_f32(s.as_slice(), ws.as_slice(), format_args!("sum {what}"));
            same_f32(d.as_slice(), wd.as_slice(), format_args!("diff {what}"));
            let bytes = (n * 4) as u64;
            assert_eq!(
                transfers(&s).down,
                bytes,
                "each output comes back once, {what}"
            );

            let (mut x, mut r) = (Vector::filled(n, f32::NAN), Vector::filled(n, u32::MAX));
            on_cuda!(Map::new(scaled_row_sum).arrays((&m, &w)), k, dl)
                .run(&a, &mut (&mut x, &mut r))
                .unwrap();
            same_f32(x.as_slice(), wx.as_slice(), format_args!("row sums {what}"));
            same(r.as_slice(), wr.as_slice(), format_args!("rows {what}"));
            // The matrix went up once, on the first call, whatever the chunk count.
            if n > 0 {
                assert_eq!(transfers(&m).up, mbytes, "matrix uploaded once, {what}");
            }
        }
    }
}
