//! SkePU 3's 3D heat diffusion in SkePU form: a `Tensor3` of temperatures and one 3D
//! MapOverlap per step (SkePU's `Region3D<float>` is `Window3<f32>`), with a cold boundary
//! (`Edge::Pad`, 0.0).
//!
//! `cargo run --release --example skepu_heat3d -- --backend rayon --size 128 --steps 20`
//! `--check` compares the result with the `cpu` backend bit for bit and with plain Rust;
//! `--report` times, side by side in one run, this form, a hand-written Rayon loop and the
//! flat index-Map over a `Vector` that programs wrote before `Tensor3` existed.

use std::process::ExitCode;
use std::time::Instant;

use rayon::prelude::*;
use skel::prelude::*;

mod common;

/// One explicit step: `t + alpha * (sum of the six neighbours - 6 t)`.
#[userfn]
fn heat(r: Window3<f32>, #[uniform] alpha: f32) -> f32 {
    r[(0, 0, 0)]
        + alpha
            * (r[(-1, 0, 0)]
                + r[(1, 0, 0)]
                + r[(0, -1, 0)]
                + r[(0, 1, 0)]
                + r[(0, 0, -1)]
                + r[(0, 0, 1)]
                - 6.0 * r[(0, 0, 0)])
}

/// The workaround without `Tensor3`: an index Map over the flat grid with hand-made offsets
/// and bounds tests (the same arithmetic in the same order, so the same bits).
#[userfn]
fn heat_flat(#[index] at: usize, t: &[f32], #[uniform] side: u32, #[uniform] alpha: f32) -> f32 {
    let n = side as usize;
    let i = at / (n * n);
    let j = at / n % n;
    let k = at % n;
    let c = t[at];
    let mut xm = 0.0;
    let mut xp = 0.0;
    let mut ym = 0.0;
    let mut yp = 0.0;
    let mut zm = 0.0;
    let mut zp = 0.0;
    if i > 0 {
        xm = t[at - n * n];
    }
    if i + 1 < n {
        xp = t[at + n * n];
    }
    if j > 0 {
        ym = t[at - n];
    }
    if j + 1 < n {
        yp = t[at + n];
    }
    if k > 0 {
        zm = t[at - 1];
    }
    if k + 1 < n {
        zp = t[at + 1];
    }
    c + alpha * (xm + xp + ym + yp + zm + zp - 6.0 * c)
}

/// The diffusion number of the explicit scheme (stable below 1/6).
pub const ALPHA: f32 = 0.1;

/// An `n^3` grid: a warm cube in the middle of a cold one, with some texture.
pub fn inputs(n: usize) -> Tensor3<f32> {
    let noise = common::data(n * n * n, 3);
    let (lo, hi) = (n / 3, n - n / 3);
    Tensor3::from_fn(n, n, n, |i, j, k| {
        let warm = (lo..hi).contains(&i) && (lo..hi).contains(&j) && (lo..hi).contains(&k);
        f32::from(u8::from(warm)) * 100.0 + noise[(i * n + j) * n + k]
    })
}

/// `steps` steps of the SkePU form on `backend`.
pub fn compute(backend: Backend, grid: &Tensor3<f32>, steps: usize) -> skel::Result<Tensor3<f32>> {
    let step = MapOverlap::new(heat, (1, 1, 1))
        .edge(Edge::Pad)
        .pad(0.0)
        .uniforms((ALPHA,))
        .backend(backend);
    let (d0, d1, d2) = grid.dims();
    let mut current = grid.clone();
    let mut next = Tensor3::zeroed(d0, d1, d2);
    for _ in 0..steps {
        step.run(&current, &mut next)?;
        std::mem::swap(&mut current, &mut next);
    }
    Ok(current)
}

/// `steps` steps of the flat index-Map workaround on `backend` (a cube only).
pub fn compute_flat(backend: Backend, grid: &Tensor3<f32>, steps: usize) -> skel::Result<Vec<f32>> {
    let n = grid.d0();
    let mut current = Vector::from(grid.to_vec());
    let mut next = Vector::zeroed(current.len());
    for _ in 0..steps {
        Map::new(heat_flat)
            .arrays((&current,))
            .uniforms((n as u32, ALPHA))
            .backend(backend)
            .run_index(&mut next)?;
        std::mem::swap(&mut current, &mut next);
    }
    current.try_to_vec()
}

/// One step in plain Rust, sequential: the reference the check compares with.
fn step_reference(t: &[f32], out: &mut [f32], n: usize) {
    let at = |i: isize, j: isize, k: isize| -> f32 {
        let inside = |v: isize| v >= 0 && (v as usize) < n;
        if inside(i) && inside(j) && inside(k) {
            t[(i as usize * n + j as usize) * n + k as usize]
        } else {
            0.0
        }
    };
    for i in 0..n as isize {
        for j in 0..n as isize {
            for k in 0..n as isize {
                let c = at(i, j, k);
                let s = at(i - 1, j, k)
                    + at(i + 1, j, k)
                    + at(i, j - 1, k)
                    + at(i, j + 1, k)
                    + at(i, j, k - 1)
                    + at(i, j, k + 1);
                out[((i as usize) * n + j as usize) * n + k as usize] = c + ALPHA * (s - 6.0 * c);
            }
        }
    }
}

/// `steps` steps in plain Rust.
pub fn reference(grid: &Tensor3<f32>, steps: usize) -> Vec<f32> {
    let n = grid.d0();
    let mut t = grid.to_vec();
    let mut next = vec![0.0; t.len()];
    for _ in 0..steps {
        step_reference(&t, &mut next, n);
        std::mem::swap(&mut t, &mut next);
    }
    t
}

/// One step hand-written with Rayon: rows `(i, j)` in parallel, the interior of each row
/// read at fixed offsets, the borders with bounds tests.
fn step_rayon(t: &[f32], out: &mut [f32], n: usize) {
    out.par_chunks_mut(n).enumerate().for_each(|(row, o)| {
        let (i, j) = (row / n, row % n);
        let base = row * n;
        let get = |ii: usize, jj: usize, kk: usize| t[(ii * n + jj) * n + kk];
        let inner = i > 0 && i + 1 < n && j > 0 && j + 1 < n;
        for (k, o) in o.iter_mut().enumerate() {
            let c = t[base + k];
            let s = if inner && k > 0 && k + 1 < n {
                t[base + k - n * n]
                    + t[base + k + n * n]
                    + t[base + k - n]
                    + t[base + k + n]
                    + t[base + k - 1]
                    + t[base + k + 1]
            } else {
                let xm = if i > 0 { get(i - 1, j, k) } else { 0.0 };
                let xp = if i + 1 < n { get(i + 1, j, k) } else { 0.0 };
                let ym = if j > 0 { get(i, j - 1, k) } else { 0.0 };
                let yp = if j + 1 < n { get(i, j + 1, k) } else { 0.0 };
                let zm = if k > 0 { get(i, j, k - 1) } else { 0.0 };
                let zp = if k + 1 < n { get(i, j, k + 1) } else { 0.0 };
                xm + xp + ym + yp + zm + zp
            };
            *o = c + ALPHA * (s - 6.0 * c);
        }
    });
}

/// `steps` steps hand-written with Rayon.
pub fn compute_rayon(grid: &Tensor3<f32>, steps: usize) -> Vec<f32> {
    let n = grid.d0();
    let mut t = grid.to_vec();
    let mut next = vec![0.0; t.len()];
    for _ in 0..steps {
        step_rayon(&t, &mut next, n);
        std::mem::swap(&mut t, &mut next);
    }
    t
}

struct Args {
    backend: Backend,
    size: usize,
    steps: usize,
    check: bool,
    report: bool,
}

/// 3D heat diffusion (Jacobi, 7-point) with MapOverlap on a Tensor3.
#[derive(clap::Parser)]
#[command(name = "skepu_heat3d")]
struct Cli {
    /// The backend (default: skel's default backend).
    #[arg(long)]
    backend: Option<Backend>,
    /// Cells per side of the cube.
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Time steps.
    #[arg(long, default_value_t = 10)]
    steps: usize,
    /// Compare with the cpu backend, plain Rust and the index-Map workaround.
    #[arg(long)]
    check: bool,
    /// Print the timing report.
    #[arg(long)]
    report: bool,
}

fn parse() -> Result<Args, String> {
    let cli = <Cli as clap::Parser>::parse();
    let backend = match cli.backend {
        Some(b) => b,
        None => skel::default_backend().map_err(|e| e.to_string())?,
    };
    backend.check().map_err(|e| e.to_string())?;
    Ok(Args {
        backend,
        size: cli.size,
        steps: cli.steps,
        check: cli.check,
        report: cli.report,
    })
}

/// The wall time of one call of `f`, in milliseconds.
fn time_ms<T>(f: &mut impl FnMut() -> T) -> f64 {
    let t = Instant::now();
    std::hint::black_box(f());
    t.elapsed().as_secs_f64() * 1e3
}

/// The median of `ms`, in place.
fn median(ms: &mut [f64]) -> f64 {
    ms.sort_by(f64::total_cmp);
    ms[ms.len() / 2]
}

fn run(a: &Args) -> skel::Result<bool> {
    let grid = inputs(a.size);
    let got = compute(a.backend, &grid, a.steps)?;
    let total: f64 = got.as_slice().iter().map(|&x| x as f64).sum();
    println!(
        "skepu_heat3d: backend {}, {}^3 grid, {} steps: heat left {total:.1}",
        a.backend, a.size, a.steps
    );
    let mut ok = true;
    if a.check {
        let oracle = compute(Backend::Cpu, &grid, a.steps)?;
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let same_cpu = bits(got.as_slice()) == bits(oracle.as_slice());
        let same_ref = bits(got.as_slice()) == bits(&reference(&grid, a.steps));
        let flat = compute_flat(a.backend, &grid, a.steps)?;
        let same_flat = bits(&flat) == bits(got.as_slice());
        println!(
            "check on {}: cpu backend {}, plain Rust {}, index-Map workaround {}",
            a.backend,
            verdict(same_cpu),
            verdict(same_ref),
            verdict(same_flat)
        );
        ok = same_cpu && same_ref && same_flat;
    }
    if a.report {
        // Whole runs of `steps` steps: the device keeps the grid between steps, and the
        // result is brought back once at the end (as a program would).
        // The three forms take turns, `runs` times after one untimed warm-up round, so
        // that a shared machine's load changes weigh on each alike; medians are reported.
        let runs = 5;
        let mut skel = || compute(a.backend, &grid, a.steps).map(|t| t.to_vec());
        let mut flat = || compute_flat(a.backend, &grid, a.steps);
        let mut hand = || compute_rayon(&grid, a.steps);
        let (mut skel_ms, mut flat_ms, mut rayon_ms) = (vec![], vec![], vec![]);
        for round in 0..=runs {
            let times = (time_ms(&mut skel), time_ms(&mut flat), time_ms(&mut hand));
            if round > 0 {
                skel_ms.push(times.0);
                flat_ms.push(times.1);
                rayon_ms.push(times.2);
            }
        }
        let (skel_ms, flat_ms, rayon_ms) = (
            median(&mut skel_ms),
            median(&mut flat_ms),
            median(&mut rayon_ms),
        );
        let cells = (a.size * a.size * a.size * a.steps) as f64;
        println!(
            "{:<34} {:>10} {:>12}",
            format!("form (median of {runs})"),
            "ms",
            "Mcells/s"
        );
        for (name, ms) in [
            (format!("skel Window3 MapOverlap ({})", a.backend), skel_ms),
            (format!("skel flat index Map ({})", a.backend), flat_ms),
            (
                format!(
                    "hand-written Rayon ({} threads)",
                    rayon::current_num_threads()
                ),
                rayon_ms,
            ),
        ] {
            println!("{name:<34} {ms:>10.2} {:>12.1}", cells / ms / 1e3);
        }
        println!(
            "Window3 vs hand-written Rayon: {:.2}x; vs the index-Map workaround: {:.2}x (>1: faster)",
            rayon_ms / skel_ms,
            flat_ms / skel_ms
        );
    }
    Ok(ok)
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "identical"
    } else {
        "DIFFERENT"
    }
}

fn main() -> ExitCode {
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("skepu_heat3d: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&a) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            println!("check: FAILED");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("skepu_heat3d: {e}");
            ExitCode::from(2)
        }
    }
}
