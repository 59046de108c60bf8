//! Every skeleton form on the CPU (issue 25): skel `cpu` and `rayon` next to a hand-written
//! plain loop and a hand-written Rayon loop of the same computation, in one run (own report,
//! no criterion).
//!
//! ```text
//! cargo bench --bench cpu_forms                       # two sizes per form, median of 7
//! cargo bench --bench cpu_forms -- --repeat 11        # more runs per median
//! cargo bench --bench cpu_forms -- --short            # tiny sizes, 1 run: results only (CI)
//! cargo bench --bench cpu_forms -- --only jacobi      # forms whose name contains "jacobi"
//! cargo bench --bench cpu_forms -- --best             # fastest run, not the median
//! ```
//!
//! Each row is the median (`--best`: the fastest) wall time of `repeat` calls (after one
//! warm-up call) of each of the four versions, and the ratio skel-rayon / hand-rayon.
//! Every skel result is compared with the plain loop's, bit for bit, before anything is
//! printed: the hand loops evaluate each element in the same order as skel's `cpu` backend
//! (the oracle).
//!
//! The hand loops are what a Rust programmer would write: row slices, iterators and
//! `par_chunks_mut` over rows; they rely on LLVM's autovectorisation. The compute-heavy
//! Maps also get a hand-written SIMD Rayon loop (`simd-ray`): Mandelbrot over eight pixels
//! at a time with a per-lane mask, the greyscale formula over eight pixels with the channels
//! pulled apart first, both written as fixed-width lane arrays that LLVM turns into vector
//! code (stable Rust has no `std::simd`), and both bit-identical to the scalar loop. The
//! transcendental chain has none: `sin`, `cos`, `exp`, `ln` are scalar libm calls, and a
//! vector version is a different approximation (different results).
//! The softmax rows' hand loops are one fused pass per row (what a hand-written softmax
//! does); `form-ray` is skel's own form written by hand, the same passes over the matrix as
//! separate Rayon loops, so that `ray/form` is the backend's speed on its form and
//! `ray/hand` what the form costs against the fused program. The backprop row's hand
//! Rayon loop adds partial sums of bands of rows (other bits than `cpu`'s one fold per
//! column, compared within a tolerance); its `form-ray` is the floor of any program with
//! `cpu`'s bits: one column's fold, a chain of dependent additions, on one core.
//! `SKEL_CPU_FORMS_SHORT=1` is the same as `--short`.

// The hand loops index like the formulas they transcribe.
#![allow(clippy::needless_range_loop)]

use std::hint::black_box;
use std::time::Instant;

use rayon::prelude::*;
use skel::prelude::*;
use skel::userfn::ElementwiseFn;

#[path = "common/args.rs"]
mod args;

// ---- user functions ----------------------------------------------------------------------

#[userfn]
fn jacobi(w: Window2<f64>) -> f64 {
    0.2 * (w[(0, 0)] + w[(-1, 0)] + w[(1, 0)] + w[(0, -1)] + w[(0, 1)])
}

#[userfn]
fn smooth_u8(w: Window<u8>) -> u8 {
    ((w[-1] as u16 + 2 * w[0] as u16 + w[1] as u16) / 4) as u8
}

#[userfn]
fn heat(#[index] (i, j): (usize, usize), a: Mat<f64>) -> f64 {
    if i == 0 || j == 0 || i + 1 == a.rows() || j + 1 == a.cols() {
        a[(i, j)]
    } else {
        let c = a[(i, j)];
        c + 0.125 * (a[(i - 1, j)] - 2.0 * c + a[(i + 1, j)])
            + 0.125 * (a[(i, j - 1)] - 2.0 * c + a[(i, j + 1)])
    }
}

#[userfn]
fn weight(#[index] (i, j): (usize, usize), x: f32, _h: f32, w: Mat<f32>) -> f32 {
    x * w[(i, j)]
}

#[userfn]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

#[userfn]
fn max(a: f32, b: f32) -> f32 {
    a.max(b)
}

#[userfn]
fn exp_shifted(#[index] (i, _j): (usize, usize), x: f32, m: &[f32]) -> f32 {
    (x - m[i]).exp()
}

#[userfn]
fn divide_row(#[index] (i, _j): (usize, usize), x: f32, s: &[f32]) -> f32 {
    x / s[i]
}

#[path = "common/softmax.rs"]
mod softmax;
use softmax::{merge, normalise, to_stat, RowStat};

/// Hotspot's constants: `(cap, rx, ry, rz, ambient)`.
const HOT: (f32, f32, f32, f32, f32) = (0.5, 0.1, 0.1, 0.05, 80.0); // as in `hotspot`

#[userfn]
fn hotspot(w: Window2<(f32, f32)>) -> (f32, f32) {
    let (t, p) = w[(0, 0)];
    let d = p
        + (w[(-1, 0)].0 + w[(1, 0)].0 - 2.0 * t) * 0.1
        + (w[(0, -1)].0 + w[(0, 1)].0 - 2.0 * t) * 0.1
        + (80.0 - t) * 0.05;
    (t + 0.5 * d, p)
}

#[userfn]
fn escape(
    #[index] (row, col): (usize, usize),
    #[uniform] height: u32,
    #[uniform] width: u32,
) -> u32 {
    let cx = col as f32 * (3.0 / width as f32) - 2.0;
    let cy = row as f32 * (2.0 / height as f32) - 1.0;
    let (mut x, mut y, mut iters) = (0.0f32, 0.0f32, 0u32);
    while iters < 64 && x * x + y * y <= 4.0 {
        let next_x = x * x - y * y + cx;
        y = 2.0 * x * y + cy;
        x = next_x;
        iters += 1;
    }
    iters
}

#[userfn]
fn chain(x: f32) -> f32 {
    ((x.sin() * x.cos()).exp() + 1.0).ln().sqrt()
}

#[userfn]
fn grey(px: [f32; 3]) -> f32 {
    0.2126 * px[0] + 0.7152 * px[1] + 0.0722 * px[2]
}

// ---- plain Rust twins of the user functions (same operations, same order) -----------------

#[inline(always)]
fn jacobi_at(a: &[f64], n: usize, i: usize, j: usize) -> f64 {
    let c = i * n + j;
    0.2 * (a[c] + a[c - n] + a[c + n] + a[c - 1] + a[c + 1])
}

#[inline(always)]
fn heat_at(a: &[f64], (rows, cols): (usize, usize), i: usize, j: usize) -> f64 {
    let k = i * cols + j;
    if i == 0 || j == 0 || i + 1 == rows || j + 1 == cols {
        a[k]
    } else {
        let c = a[k];
        c + 0.125 * (a[k - cols] - 2.0 * c + a[k + cols]) + 0.125 * (a[k - 1] - 2.0 * c + a[k + 1])
    }
}

#[inline(always)]
fn hotspot_at((t, p): (f32, f32), (up, down, left, right): (f32, f32, f32, f32)) -> (f32, f32) {
    let (cap, rx, ry, rz, amb) = HOT;
    let d = p + (up + down - 2.0 * t) * ry + (left + right - 2.0 * t) * rx + (amb - t) * rz;
    (t + cap * d, p)
}

#[inline(always)]
fn escape_at(row: usize, col: usize, height: u32, width: u32) -> u32 {
    let cx = col as f32 * (3.0 / width as f32) - 2.0;
    let cy = row as f32 * (2.0 / height as f32) - 1.0;
    let (mut x, mut y, mut iters) = (0.0f32, 0.0f32, 0u32);
    while iters < 64 && x * x + y * y <= 4.0 {
        let next_x = x * x - y * y + cx;
        y = 2.0 * x * y + cy;
        x = next_x;
        iters += 1;
    }
    iters
}

#[inline(always)]
fn chain_at(x: f32) -> f32 {
    ((x.sin() * x.cos()).exp() + 1.0).ln().sqrt()
}

#[inline(always)]
fn grey_at(px: [f32; 3]) -> f32 {
    0.2126 * px[0] + 0.7152 * px[1] + 0.0722 * px[2]
}

/// Pixels per SIMD step of the hand-written SIMD loops: two SSE vectors of `f32` (the
/// baseline x86-64 target), one AVX vector.
const LANES: usize = 8;

/// [`escape_at`] for pixels `(row, col0 + l)`, `l < LANES`: every lane runs the scalar loop's
/// operations in the same order, and stops (keeps its values, no longer counts) at the
/// iteration where the scalar loop would leave; the step ends when every lane has.
#[inline(always)]
fn escape_lanes(row: usize, col0: usize, height: u32, width: u32) -> [u32; LANES] {
    let cy = row as f32 * (2.0 / height as f32) - 1.0;
    let cx: [f32; LANES] = std::array::from_fn(|l| (col0 + l) as f32 * (3.0 / width as f32) - 2.0);
    let (mut x, mut y) = ([0.0f32; LANES], [0.0f32; LANES]);
    let (mut iters, mut live) = ([0u32; LANES], [true; LANES]);
    for _ in 0..64 {
        let mut any = false;
        for l in 0..LANES {
            let go = live[l] & (x[l] * x[l] + y[l] * y[l] <= 4.0);
            let next_x = x[l] * x[l] - y[l] * y[l] + cx[l];
            let next_y = 2.0 * x[l] * y[l] + cy;
            x[l] = if go { next_x } else { x[l] };
            y[l] = if go { next_y } else { y[l] };
            iters[l] += u32::from(go);
            live[l] = go;
            any |= go;
        }
        if !any {
            break;
        }
    }
    iters
}

/// [`grey_at`] over `LANES` pixels: the channels are pulled apart into lane arrays first,
/// so that each product is one vector operation.
#[inline(always)]
fn grey_lanes(px: &[[f32; 3]], out: &mut [f32]) {
    let channel = |c: usize| -> [f32; LANES] { std::array::from_fn(|l| px[l][c]) };
    let (r, g, b) = (channel(0), channel(1), channel(2));
    for l in 0..LANES {
        out[l] = 0.2126 * r[l] + 0.7152 * g[l] + 0.0722 * b[l];
    }
}

// ---- harness -------------------------------------------------------------------------------

struct Config {
    short: bool,
    repeat: usize,
    best: bool,
    only: Option<String>,
}

/// Every skeleton form on the CPU against hand-written plain and Rayon loops.
#[derive(clap::Parser, Debug)]
struct Args {
    /// Tiny sizes, one repetition (CI; also SKEL_CPU_FORMS_SHORT=1).
    #[arg(long)]
    short: bool,
    /// Repetitions per row (the median is kept; default 1 short, 7 full).
    #[arg(long)]
    repeat: Option<usize>,
    /// Only the forms whose name contains this word.
    #[arg(long)]
    only: Option<String>,
    /// Report the fastest repetition instead of the median (for a loaded machine).
    #[arg(long)]
    best: bool,
    #[command(flatten)]
    cargo: args::Cargo,
}

impl Config {
    fn from_args() -> Config {
        let args: Args = clap::Parser::parse();
        let short = args.short || std::env::var("SKEL_CPU_FORMS_SHORT").is_ok_and(|v| v == "1");
        let repeat = args.repeat.unwrap_or(if short { 1 } else { 7 });
        Config {
            short,
            repeat: repeat.max(1),
            best: args.best,
            only: args.only,
        }
    }

    /// The full size, or a tiny one in short mode.
    fn size(&self, full: usize, short: usize) -> usize {
        if self.short {
            short
        } else {
            full
        }
    }

    /// Median seconds of `repeat` runs of `f` after one warm-up run (the fastest with
    /// `--best`).
    fn time(&self, mut f: impl FnMut()) -> f64 {
        f();
        let mut times: Vec<f64> = (0..self.repeat)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64()
            })
            .collect();
        times.sort_by(f64::total_cmp);
        times[if self.best { 0 } else { times.len() / 2 }]
    }

    fn wants(&self, form: &str) -> bool {
        self.only
            .as_ref()
            .map_or(true, |o| form.contains(o.as_str()))
    }
}

/// One line of the report: seconds of skel cpu, skel rayon, hand plain, hand rayon, of the
/// hand-written SIMD Rayon loop where the form has one, and of a hand-written Rayon
/// version of skel's own form where the hand loops are a different (fused) program: the
/// softmax rows, whose hand loops make one pass per row where skel's calls make two to
/// four passes over the matrix.
struct Row {
    form: &'static str,
    size: String,
    secs: [f64; 4],
    simd: Option<f64>,
    form_par: Option<f64>,
}

fn print_header(cfg: &Config) {
    println!(
        "cpu_forms: {} threads, {} of {}{}",
        rayon::current_num_threads(),
        if cfg.best { "best" } else { "median" },
        cfg.repeat,
        if cfg.short {
            " (short: no timing meaning)"
        } else {
            ""
        }
    );
    println!(
        "{:<34} {:>13} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>10} {:>9} {:>10} {:>9}",
        "form",
        "size",
        "skel-cpu",
        "skel-ray",
        "hand",
        "hand-ray",
        "ray/hand",
        "cpu/hand",
        "simd-ray",
        "ray/simd",
        "form-ray",
        "ray/form"
    );
}

fn print_row(r: &Row) {
    let ms = |s: f64| format!("{:.3}", s * 1e3);
    let peer = |t: Option<f64>| -> (String, String) {
        t.map_or(("-".into(), "-".into()), |s| {
            (ms(s), format!("{:.2}", r.secs[1] / s))
        })
    };
    let (simd, ratio) = peer(r.simd);
    let (form_par, form_ratio) = peer(r.form_par);
    println!(
        "{:<34} {:>13} {:>10} {:>10} {:>10} {:>10} {:>9.2} {:>9.2} {:>10} {:>9} {:>10} {:>9}",
        r.form,
        r.size,
        ms(r.secs[0]),
        ms(r.secs[1]),
        ms(r.secs[2]),
        ms(r.secs[3]),
        r.secs[1] / r.secs[3],
        r.secs[0] / r.secs[2],
        simd,
        ratio,
        form_par,
        form_ratio,
    );
}

/// Panics unless `got` equals `want` bit for bit (through `PartialEq` on the bits' type).
fn same<T: PartialEq + std::fmt::Debug>(what: &str, got: &[T], want: &[T]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    if let Some(k) = (0..got.len()).find(|&k| got[k] != want[k]) {
        panic!("{what}: element {k}: {:?} != {:?}", got[k], want[k]);
    }
}

/// `n` reproducible values in [0, 1) (xorshift).
fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect()
}

const BACKENDS: [Backend; 2] = [Backend::Cpu, Backend::Rayon];

// ---- forms ---------------------------------------------------------------------------------

/// The report row of a form whose hand-written baselines compute row by row
/// (`row(i, out_row)` over rows of `cols` elements, `len` in all): a plain loop and a Rayon
/// loop over the rows, timed; every skel result and the Rayon one must equal the plain one.
fn hand_rows<T>(
    cfg: &Config,
    (form, size): (&'static str, String),
    (len, cols): (usize, usize),
    row: impl Fn(usize, &mut [T]) + Sync,
    (skel_secs, results): ([f64; 2], &[Vec<T>]),
) -> Row
where
    T: Copy + Default + Send + PartialEq + std::fmt::Debug,
{
    let mut hand = vec![T::default(); len];
    let plain = cfg.time(|| {
        for (i, o) in hand.chunks_mut(cols).enumerate() {
            row(i, o);
        }
        black_box(&hand);
    });
    let mut hand_par = vec![T::default(); len];
    let par = cfg.time(|| {
        hand_par
            .par_chunks_mut(cols)
            .enumerate()
            .for_each(|(i, o)| row(i, o));
    });
    for r in results {
        same(form, r, &hand);
    }
    same(form, &hand_par, &hand);
    Row {
        form,
        size,
        secs: [skel_secs[0], skel_secs[1], plain, par],
        simd: None,
        form_par: None,
    }
}

fn jacobi_form(cfg: &Config, n: usize) -> Row {
    let a: Vec<f64> = data(n * n, 1).into_iter().map(f64::from).collect();
    let input = Matrix::from_vec(n, n, a.clone()).expect("shape");
    let mut skel_secs = [0.0; 2];
    let mut results = Vec::new();
    for (k, b) in BACKENDS.into_iter().enumerate() {
        let stencil = MapOverlap::new(jacobi, (1, 1)).backend(b);
        let mut out = Matrix::<f64>::zeroed(n, n);
        skel_secs[k] = cfg.time(|| stencil.run(&input, &mut out).expect("skel"));
        results.push(out.to_vec());
    }
    let row = |i: usize, o: &mut [f64]| {
        if i > 0 && i + 1 < n {
            for j in 1..n - 1 {
                o[j] = jacobi_at(&a, n, i, j);
            }
        }
    };
    let size = format!("{n}x{n}");
    hand_rows(
        cfg,
        ("MapOverlap 2D 5-pt f64 (Jacobi)", size),
        (n * n, n),
        row,
        (skel_secs, &results),
    )
}

fn colwise_form(cfg: &Config, (rows, cols): (usize, usize)) -> Row {
    let a: Vec<u8> = data(rows * cols, 2)
        .into_iter()
        .map(|x| (x * 256.0) as u8)
        .collect();
    let input = Matrix::from_vec(rows, cols, a.clone()).expect("shape");
    let mut skel_secs = [0.0; 2];
    let mut results = Vec::new();
    for (k, b) in BACKENDS.into_iter().enumerate() {
        let stencil = MapOverlap::new(smooth_u8, 1).colwise().backend(b);
        let mut out = Matrix::<u8>::zeroed(rows, cols);
        skel_secs[k] = cfg.time(|| stencil.run(&input, &mut out).expect("skel"));
        results.push(out.to_vec());
    }
    // Edge::Duplicate (the default): the rows above the first and below the last repeat them.
    let row = |i: usize, o: &mut [u8]| {
        let up = &a[i.saturating_sub(1) * cols..][..cols];
        let mid = &a[i * cols..][..cols];
        let down = &a[(i + 1).min(rows - 1) * cols..][..cols];
        for (((o, &u), &m), &d) in o.iter_mut().zip(up).zip(mid).zip(down) {
            *o = ((u as u16 + 2 * m as u16 + d as u16) / 4) as u8;
        }
    };
    let size = format!("{rows}x{cols}");
    hand_rows(
        cfg,
        ("MapOverlap colwise r1 u8", size),
        (rows * cols, cols),
        row,
        (skel_secs, &results),
    )
}

fn heat_form(cfg: &Config, n: usize) -> Row {
    let a: Vec<f64> = data(n * n, 3).into_iter().map(f64::from).collect();
    let input = Matrix::from_vec(n, n, a.clone()).expect("shape");
    let mut skel_secs = [0.0; 2];
    let mut results = Vec::new();
    for (k, b) in BACKENDS.into_iter().enumerate() {
        let map = Map::new(heat).arrays((&input,)).backend(b);
        let mut out = Matrix::<f64>::zeroed(n, n);
        skel_secs[k] = cfg.time(|| map.run_index(&mut out).expect("skel"));
        results.push(out.to_vec());
    }
    let row = |i: usize, o: &mut [f64]| {
        for (j, o) in o.iter_mut().enumerate() {
            *o = heat_at(&a, (n, n), i, j);
        }
    };
    let size = format!("{n}x{n}");
    hand_rows(
        cfg,
        ("Map 2D #[index] + Mat f64 (heat)", size),
        (n * n, n),
        row,
        (skel_secs, &results),
    )
}

fn backprop_form(cfg: &Config, (rows, cols): (usize, usize)) -> Row {
    let x = data(rows, 4);
    let h = data(cols, 5);
    let w = data(rows * cols, 6);
    let (xv, hv) = (Vector::from(x.clone()), Vector::from(h.clone()));
    let wm = Matrix::from_vec(rows, cols, w.clone()).expect("shape");
    let mut skel_secs = [0.0; 2];
    let mut results = Vec::new();
    for (k, b) in BACKENDS.into_iter().enumerate() {
        let pr = MapPairsReduce::new(weight, add).arrays((&wm,)).backend(b);
        let mut out = Vector::<f32>::zeroed(cols);
        skel_secs[k] = cfg.time(|| pr.run_cols(&xv, &hv, &mut out).expect("skel"));
        results.push(out.to_vec());
    }
    // out[j] = x[0] w[0][j] + x[1] w[1][j] + ... in row order: a row at a time keeps the
    // order per column and reads the matrix once, front to back.
    let fold_rows = |first: usize, block: &[f32]| -> Vec<f32> {
        let mut acc: Vec<f32> = block[..cols].iter().map(|&wj| x[first] * wj).collect();
        for (k, wrow) in block.chunks(cols).enumerate().skip(1) {
            let xi = x[first + k];
            for (a, &wj) in acc.iter_mut().zip(wrow) {
                *a += xi * wj;
            }
        }
        acc
    };
    let mut hand = Vec::new();
    let plain = cfg.time(|| hand = black_box(fold_rows(0, &w)));
    // In parallel the order per column is kept by folding bands of rows and adding the
    // bands' partial sums in order: not the same additions as one fold (f32 addition is
    // not associative), so this one is compared within a tolerance.
    let band = rows.div_ceil(4 * rayon::current_num_threads()).max(1);
    let mut hand_par = Vec::new();
    let par = cfg.time(|| {
        let parts: Vec<Vec<f32>> = w
            .par_chunks(band * cols)
            .enumerate()
            .map(|(b, block)| fold_rows(b * band, block))
            .collect();
        let mut parts = parts.into_iter();
        let mut acc = parts.next().unwrap_or_default();
        for p in parts {
            for (a, v) in acc.iter_mut().zip(p) {
                *a += v;
            }
        }
        hand_par = acc;
    });
    // The floor for cpu's bits, whatever the thread count: one column's fold, a chain of
    // `rows` dependent additions (each waits for the one before), here over `x`'s values
    // on one core.
    let mut one_fold = 0.0f32;
    let form_par = cfg.time(|| one_fold = black_box(x[1..].iter().fold(x[0], |a, &v| a + v)));
    black_box(one_fold);
    for r in &results {
        same("backprop", r, &hand);
    }
    for (a, b) in hand_par.iter().zip(&hand) {
        assert!(
            (a - b).abs() <= 1e-3 * b.abs().max(1.0),
            "backprop hand-rayon"
        );
    }
    Row {
        form: "MapPairsReduce run_cols (backprop)",
        size: format!("{rows}x{cols}"),
        secs: [skel_secs[0], skel_secs[1], plain, par],
        simd: None,
        form_par: Some(form_par),
    }
}

/// A row softmax as a user writes it: with `lazy`, the three calls of the lazy form (the
/// row maxima; the row sums of the lazy exponentials, mapped and folded in one pass; the
/// quotients of the same lazy exponentials: no intermediate matrix, each exponential
/// computed twice), else four eager calls (the exponentials stored once, read twice).
fn softmax_form(cfg: &Config, (rows, cols): (usize, usize), lazy: bool) -> Row {
    let a = data(rows * cols, 7);
    let input = Matrix::from_vec(rows, cols, a.clone()).expect("shape");
    let mut skel_secs = [0.0; 2];
    let mut results = Vec::new();
    for (k, b) in BACKENDS.into_iter().enumerate() {
        let (mut m, mut s) = (Vector::<f32>::zeroed(rows), Vector::<f32>::zeroed(rows));
        let (mut e, mut out) = (
            Matrix::<f32>::zeroed(rows, cols),
            Matrix::<f32>::zeroed(rows, cols),
        );
        let row_max = Reduce::new(max).backend(b);
        let row_sum = Reduce::new(add).backend(b);
        skel_secs[k] = cfg.time(|| {
            row_max.run_rows(&input, &mut m).expect("skel");
            let exp = Map::new(exp_shifted).arrays((&m,)).backend(b);
            if lazy {
                let e = exp.lazy(&input);
                row_sum.run_rows(&e, &mut s).expect("skel");
                let divide = Map::new(divide_row).arrays((&s,)).backend(b);
                divide.run(&e, &mut out).expect("skel");
            } else {
                exp.run(&input, &mut e).expect("skel");
                row_sum.run_rows(&e, &mut s).expect("skel");
                let divide = Map::new(divide_row).arrays((&s,)).backend(b);
                divide.run(&e, &mut out).expect("skel");
            }
        });
        results.push(out.to_vec());
    }
    // One pass per row, fused: what a hand-written softmax does.
    let row = |x: &[f32], o: &mut [f32]| {
        let m = x[1..].iter().fold(x[0], |m, &v| m.max(v));
        for (o, &v) in o.iter_mut().zip(x) {
            *o = (v - m).exp();
        }
        let s = o[1..].iter().fold(o[0], |s, &v| s + v);
        for o in o.iter_mut() {
            *o /= s;
        }
    };
    let mut hand = vec![0.0f32; rows * cols];
    let plain = cfg.time(|| {
        for (x, o) in a.chunks(cols).zip(hand.chunks_mut(cols)) {
            row(x, o);
        }
        black_box(&hand);
    });
    let mut hand_par = vec![0.0f32; rows * cols];
    let par = cfg.time(|| {
        hand_par
            .par_chunks_mut(cols)
            .zip(a.par_chunks(cols))
            .for_each(|(o, x)| row(x, o));
    });
    // skel's own form by hand: the same passes over the matrix, each a Rayon loop over rows
    // (the row maxima; the exponentials stored, or with `lazy` recomputed in the passes that
    // read them; the row sums; the quotients).
    let row_max = |x: &[f32]| x[1..].iter().fold(x[0], |m, &v| m.max(v));
    let row_sum = |x: &[f32]| x[1..].iter().fold(x[0], |s, &v| s + v);
    let (mut fm, mut fs) = (vec![0.0f32; rows], vec![0.0f32; rows]);
    let (mut fe, mut form_out) = (vec![0.0f32; rows * cols], vec![0.0f32; rows * cols]);
    let form_par = cfg.time(|| {
        fm.par_iter_mut()
            .zip(a.par_chunks(cols))
            .for_each(|(m, x)| *m = row_max(x));
        if lazy {
            fs.par_iter_mut()
                .zip(a.par_chunks(cols))
                .zip(&fm)
                .for_each(|((s, x), &m)| {
                    let e0 = (x[0] - m).exp();
                    *s = x[1..].iter().fold(e0, |s, &v| s + (v - m).exp());
                });
            form_out
                .par_chunks_mut(cols)
                .zip(a.par_chunks(cols))
                .zip(fm.par_iter().zip(&fs))
                .for_each(|((o, x), (&m, &s))| {
                    for (o, &v) in o.iter_mut().zip(x) {
                        *o = (v - m).exp() / s;
                    }
                });
        } else {
            fe.par_chunks_mut(cols)
                .zip(a.par_chunks(cols))
                .zip(&fm)
                .for_each(|((e, x), &m)| {
                    for (e, &v) in e.iter_mut().zip(x) {
                        *e = (v - m).exp();
                    }
                });
            fs.par_iter_mut()
                .zip(fe.par_chunks(cols))
                .for_each(|(s, e)| *s = row_sum(e));
            form_out
                .par_chunks_mut(cols)
                .zip(fe.par_chunks(cols))
                .zip(&fs)
                .for_each(|((o, e), &s)| {
                    for (o, &v) in o.iter_mut().zip(e) {
                        *o = v / s;
                    }
                });
        }
    });
    for r in &results {
        same("softmax", r, &hand);
    }
    same("softmax hand-rayon", &hand_par, &hand);
    same("softmax hand-rayon of skel's form", &form_out, &hand);
    Row {
        form: if lazy {
            "softmax rows (3 lazy vs 1 fused)"
        } else {
            "softmax rows (4 calls vs 1 fused)"
        },
        size: format!("{rows}x{cols}"),
        secs: [skel_secs[0], skel_secs[1], plain, par],
        simd: None,
        form_par: Some(form_par),
    }
}

/// The online row softmax (`examples/softmax.rs --form online`): `MapReduce::run_rows` of a
/// `(max, sum)` statistic per row, then one Map over the matrix: two passes. The hand loops
/// make both passes row by row (the row still in cache for the second); the same-form
/// Rayon loop makes them as skel does, one parallel pass over the matrix after the other.
fn softmax_online_form(cfg: &Config, (rows, cols): (usize, usize)) -> Row {
    let a = data(rows * cols, 14);
    let input = Matrix::from_vec(rows, cols, a.clone()).expect("shape");
    let mut skel_secs = [0.0; 2];
    let mut results = Vec::new();
    for (k, b) in BACKENDS.into_iter().enumerate() {
        let mut stats = Vector::<RowStat>::zeroed(rows);
        let mut out = Matrix::<f32>::zeroed(rows, cols);
        let fold = MapReduce::new(to_stat, merge).backend(b);
        skel_secs[k] = cfg.time(|| {
            fold.run_rows(&input, &mut stats).expect("skel");
            Map::new(normalise)
                .arrays((&stats,))
                .backend(b)
                .run(&input, &mut out)
                .expect("skel");
        });
        results.push(out.to_vec());
    }
    let stat = |x: &[f32]| {
        x[1..].iter().fold(to_stat::call(x[0]), |s, &v| {
            merge::call(s, to_stat::call(v))
        })
    };
    let divide = |x: &[f32], s: RowStat, o: &mut [f32]| {
        for (o, &v) in o.iter_mut().zip(x) {
            *o = (v - s.max).exp() / s.sum;
        }
    };
    let row = |x: &[f32], o: &mut [f32]| divide(x, stat(x), o);
    let mut hand = vec![0.0f32; rows * cols];
    let plain = cfg.time(|| {
        for (x, o) in a.chunks(cols).zip(hand.chunks_mut(cols)) {
            row(x, o);
        }
        black_box(&hand);
    });
    let mut hand_par = vec![0.0f32; rows * cols];
    let par = cfg.time(|| {
        hand_par
            .par_chunks_mut(cols)
            .zip(a.par_chunks(cols))
            .for_each(|(o, x)| row(x, o));
    });
    let mut stats = vec![RowStat::default(); rows];
    let mut form_out = vec![0.0f32; rows * cols];
    let form_par = cfg.time(|| {
        stats
            .par_iter_mut()
            .zip(a.par_chunks(cols))
            .for_each(|(s, x)| *s = stat(x));
        form_out
            .par_chunks_mut(cols)
            .zip(a.par_chunks(cols))
            .zip(&stats)
            .for_each(|((o, x), &s)| divide(x, s, o));
    });
    for r in &results {
        same("online softmax", r, &hand);
    }
    same("online softmax hand-rayon", &hand_par, &hand);
    same("online softmax hand-rayon of skel's form", &form_out, &hand);
    Row {
        form: "softmax rows (online: 2 calls)",
        size: format!("{rows}x{cols}"),
        secs: [skel_secs[0], skel_secs[1], plain, par],
        simd: None,
        form_par: Some(form_par),
    }
}

/// `n x n` small whole numbers as `f32`: every sum of up to 2^20 of them is exact, so a
/// fold gives the same bits in any order (the hand-written Rayon loops fold bands of rows
/// and add the bands; skel's folds keep their own orders).
fn whole_numbers(n: usize, seed: u64) -> Vec<f32> {
    data(n * n, seed)
        .into_iter()
        .map(|x| (x * 16.0).floor())
        .collect()
}

fn reduce_rows_form(cfg: &Config, n: usize) -> Row {
    let a = whole_numbers(n, 12);
    let input = Matrix::from_vec(n, n, a.clone()).expect("shape");
    let mut skel_secs = [0.0; 2];
    let mut results = Vec::new();
    for (k, b) in BACKENDS.into_iter().enumerate() {
        let sum = Reduce::new(add).backend(b);
        let mut out = Vector::<f32>::zeroed(n);
        skel_secs[k] = cfg.time(|| sum.run_rows(&input, &mut out).expect("skel"));
        results.push(out.to_vec());
    }
    let row = |i: usize, o: &mut [f32]| {
        let x = &a[i * n..][..n];
        o[0] = x[1..].iter().fold(x[0], |s, &v| s + v);
    };
    hand_rows(
        cfg,
        ("Reduce rows, sum f32", format!("{n}x{n}")),
        (n, 1),
        row,
        (skel_secs, &results),
    )
}

fn reduce_cols_form(cfg: &Config, n: usize) -> Row {
    let a = whole_numbers(n, 13);
    let input = Matrix::from_vec(n, n, a.clone()).expect("shape");
    let mut skel_secs = [0.0; 2];
    let mut results = Vec::new();
    for (k, b) in BACKENDS.into_iter().enumerate() {
        let sum = Reduce::new(add).backend(b);
        let mut out = Vector::<f32>::zeroed(n);
        skel_secs[k] = cfg.time(|| sum.run_cols(&input, &mut out).expect("skel"));
        results.push(out.to_vec());
    }
    // Row by row, all columns at once: the matrix is read along its rows.
    let fold_rows = |block: &[f32]| -> Vec<f32> {
        let mut acc = block[..n].to_vec();
        for row in block.chunks(n).skip(1) {
            for (s, &v) in acc.iter_mut().zip(row) {
                *s += v;
            }
        }
        acc
    };
    let mut hand = Vec::new();
    let plain = cfg.time(|| hand = black_box(fold_rows(&a)));
    let band = n.div_ceil(4 * rayon::current_num_threads()).max(1);
    let mut hand_par = Vec::new();
    let par = cfg.time(|| {
        let parts: Vec<Vec<f32>> = a.par_chunks(band * n).map(fold_rows).collect();
        let mut parts = parts.into_iter();
        let mut acc = parts.next().unwrap_or_default();
        for p in parts {
            for (s, v) in acc.iter_mut().zip(p) {
                *s += v;
            }
        }
        hand_par = acc;
    });
    for r in &results {
        same("Reduce cols", r, &hand);
    }
    same("Reduce cols hand-rayon", &hand_par, &hand);
    Row {
        form: "Reduce cols, sum f32",
        size: format!("{n}x{n}"),
        secs: [skel_secs[0], skel_secs[1], plain, par],
        simd: None,
        form_par: None,
    }
}

fn hotspot_form(cfg: &Config, n: usize) -> Row {
    let t = data(n * n, 8);
    let p = data(n * n, 9);
    let a: Vec<(f32, f32)> = t.iter().zip(&p).map(|(&t, &p)| (300.0 + t, p)).collect();
    let input = Matrix::from_vec(n, n, a.clone()).expect("shape");
    let mut skel_secs = [0.0; 2];
    let mut results = Vec::new();
    for (k, b) in BACKENDS.into_iter().enumerate() {
        let stencil = MapOverlap::new(hotspot, (1, 1))
            .edge(Edge::Duplicate)
            .backend(b);
        let mut out = Matrix::<(f32, f32)>::zeroed(n, n);
        skel_secs[k] = cfg.time(|| stencil.run(&input, &mut out).expect("skel"));
        results.push(out.to_vec());
    }
    let row = |i: usize, o: &mut [(f32, f32)]| {
        let up = &a[i.saturating_sub(1) * n..][..n];
        let mid = &a[i * n..][..n];
        let down = &a[(i + 1).min(n - 1) * n..][..n];
        for j in 0..n {
            let (l, r) = (j.saturating_sub(1), (j + 1).min(n - 1));
            o[j] = hotspot_at(mid[j], (up[j].0, down[j].0, mid[l].0, mid[r].0));
        }
    };
    let size = format!("{n}x{n}");
    hand_rows(
        cfg,
        ("MapOverlap 2D (f32,f32) (hotspot)", size),
        (n * n, n),
        row,
        (skel_secs, &results),
    )
}

fn mandelbrot_form(cfg: &Config, n: usize) -> Row {
    let mut skel_secs = [0.0; 2];
    let mut results = Vec::new();
    let dims = (n as u32, n as u32);
    for (k, b) in BACKENDS.into_iter().enumerate() {
        let map = Map::new(escape).uniforms(dims).backend(b);
        let mut out = Matrix::<u32>::zeroed(n, n);
        skel_secs[k] = cfg.time(|| map.run_index(&mut out).expect("skel"));
        results.push(out.to_vec());
    }
    let row = |i: usize, o: &mut [u32]| {
        for (j, o) in o.iter_mut().enumerate() {
            *o = escape_at(i, j, dims.0, dims.1);
        }
    };
    let size = format!("{n}x{n}");
    let lanes_row = |i: usize, o: &mut [u32]| {
        let mut groups = o.chunks_exact_mut(LANES);
        for (g, group) in groups.by_ref().enumerate() {
            group.copy_from_slice(&escape_lanes(i, g * LANES, dims.0, dims.1));
        }
        let done = n - groups.into_remainder().len();
        for j in done..n {
            o[j] = escape_at(i, j, dims.0, dims.1);
        }
    };
    let mut simd_out = vec![0u32; n * n];
    let simd = cfg.time(|| {
        simd_out
            .par_chunks_mut(n)
            .enumerate()
            .for_each(|(i, o)| lanes_row(i, o));
    });
    same("Mandelbrot hand SIMD", &simd_out, &results[0]);
    let row = hand_rows(
        cfg,
        ("Map #[index] Mandelbrot (64 it)", size),
        (n * n, n),
        row,
        (skel_secs, &results),
    );
    Row {
        simd: Some(simd),
        ..row
    }
}

/// A hand-written SIMD step: `LANES` inputs to `LANES` outputs.
type Lanes<T> = fn(&[T], &mut [f32]);

/// An element-wise Map of `f` (skel) against `g` (the same formula by hand) over `input`.
fn elementwise_form<T, F>(
    cfg: &Config,
    (form, f): (&'static str, F),
    input: Vec<T>,
    (g, lanes): (impl Fn(T) -> f32 + Sync, Option<Lanes<T>>),
) -> Row
where
    T: DeviceType + Sync,
    F: ElementwiseFn<Elems = (T,), Out = f32, Uniforms = (), Arrays = ()> + Copy,
{
    let n = input.len();
    let v = Vector::from(input.clone());
    let mut skel_secs = [0.0; 2];
    let mut results = Vec::new();
    for (k, b) in BACKENDS.into_iter().enumerate() {
        let map = Map::new(f).backend(b);
        let mut out = Vector::<f32>::zeroed(n);
        skel_secs[k] = cfg.time(|| map.run(&v, &mut out).expect("skel"));
        results.push(out.to_vec());
    }
    let mut hand = vec![0.0f32; n];
    let plain = cfg.time(|| {
        for (o, &x) in hand.iter_mut().zip(&input) {
            *o = g(x);
        }
        black_box(&hand);
    });
    let mut hand_par = vec![0.0f32; n];
    let par = cfg.time(|| {
        hand_par
            .par_iter_mut()
            .zip(input.par_iter())
            .for_each(|(o, &x)| *o = g(x));
    });
    // The SIMD loop: `LANES` elements per step, the last few one at a time.
    let simd = lanes.map(|lanes| {
        let chunk = n.div_ceil(4 * rayon::current_num_threads()).max(1);
        let chunk = chunk.next_multiple_of(LANES);
        let mut simd_out = vec![0.0f32; n];
        let secs = cfg.time(|| {
            simd_out
                .par_chunks_mut(chunk)
                .zip(input.par_chunks(chunk))
                .for_each(|(o, x)| {
                    let mut os = o.chunks_exact_mut(LANES);
                    let mut xs = x.chunks_exact(LANES);
                    for (o, x) in os.by_ref().zip(xs.by_ref()) {
                        lanes(x, o);
                    }
                    for (o, &x) in os.into_remainder().iter_mut().zip(xs.remainder()) {
                        *o = g(x);
                    }
                });
        });
        same(form, &simd_out, &hand);
        secs
    });
    for r in &results {
        same(form, r, &hand);
    }
    same(form, &hand_par, &hand);
    Row {
        form,
        size: n.to_string(),
        secs: [skel_secs[0], skel_secs[1], plain, par],
        simd,
        form_par: None,
    }
}

fn main() {
    let cfg = Config::from_args();
    print_header(&cfg);
    let mut rows = Vec::new();
    let mut run = |name: &str, row: &dyn Fn() -> Row| {
        if cfg.wants(name) {
            let r = row();
            print_row(&r);
            rows.push(r);
        }
    };
    for n in [cfg.size(512, 7), cfg.size(2048, 33)] {
        run("jacobi", &|| jacobi_form(&cfg, n));
    }
    for shape in [cfg.size(512, 5), cfg.size(2048, 31)].map(|r| (r, r * 4 / 3 + 1)) {
        run("colwise", &|| colwise_form(&cfg, shape));
    }
    for n in [cfg.size(512, 3), cfg.size(2048, 37)] {
        run("heat", &|| heat_form(&cfg, n));
    }
    for rows in [cfg.size(16385, 2), cfg.size(262_145, 67)] {
        run("backprop", &|| backprop_form(&cfg, (rows, 17)));
    }
    for n in [cfg.size(512, 3), cfg.size(2048, 29)] {
        run("softmax", &|| softmax_form(&cfg, (n, n), false));
        run("softmax_lazy", &|| softmax_form(&cfg, (n, n), true));
        run("softmax_online", &|| softmax_online_form(&cfg, (n, n)));
    }
    for n in [cfg.size(512, 3), cfg.size(2048, 41)] {
        run("reduce_rows", &|| reduce_rows_form(&cfg, n));
    }
    for n in [cfg.size(512, 2), cfg.size(2048, 43)] {
        run("reduce_cols", &|| reduce_cols_form(&cfg, n));
    }
    for n in [cfg.size(512, 4), cfg.size(1024, 31)] {
        run("hotspot", &|| hotspot_form(&cfg, n));
    }
    for n in [cfg.size(256, 5), cfg.size(1024, 23)] {
        run("mandelbrot", &|| mandelbrot_form(&cfg, n));
    }
    for n in [cfg.size(1 << 18, 13), cfg.size(1 << 22, 100_003)] {
        run("chain", &|| {
            let input = data(n, 10).into_iter().map(|x| 4.0 * x - 2.0).collect();
            elementwise_form(
                &cfg,
                ("Map sin*cos,exp,ln,sqrt chain", chain),
                input,
                (chain_at, None),
            )
        });
    }
    for n in [cfg.size(1 << 18, 11), cfg.size(1 << 22, 65_537)] {
        run("grey", &|| {
            let d = data(3 * n, 11);
            let input = d.chunks(3).map(|c| [c[0], c[1], c[2]]).collect();
            let lanes: Lanes<[f32; 3]> = grey_lanes;
            elementwise_form(
                &cfg,
                ("Map greyscale formula", grey),
                input,
                (grey_at, Some(lanes)),
            )
        });
    }
    if !rows.is_empty() && !cfg.short {
        let logs: f64 = rows.iter().map(|r| (r.secs[1] / r.secs[3]).ln()).sum();
        println!(
            "geometric mean skel-rayon / hand-rayon: {:.2}",
            (logs / rows.len() as f64).exp()
        );
    }
}
