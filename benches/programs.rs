//! Whole programs (issue 26): a chain of element-wise calls (stored, and summed by a
//! MapReduce), a row softmax and conjugate gradient on a 5-point Laplacian (256^2, 2048^2,
//! 8192^2; eager with host scalars, and with `run_into` + `.arrays` + a lazy `A p`), each as separate skel calls (eager), with lazy inputs
//! (evaluated inside the consumer's kernel or loop), and as one hand-fused skel call, on
//! every backend present, in one run (own report, no criterion).
//!
//! ```text
//! cargo bench --bench programs                    # 2^20 and 2^26 chains, 8192^2 softmax, median of 7
//! cargo bench --bench programs -- --short         # tiny sizes, 1 run: results only (CI)
//! cargo bench --bench programs -- --repeat 11     # more runs per median
//! cargo bench --bench programs -- --chain 4194304 --softmax 1024   # other sizes
//! cargo bench --bench programs -- --cg 2048 --cg-iters 50          # one CG grid
//! cargo bench --bench programs -- --only cg                        # one program (chain, softmax, cg)
//! ```
//!
//! Each row is the median wall time of `repeat` runs of the whole program (after one
//! warm-up run), each ended by a synchronisation of the backend, and the ratio of the
//! fused form's time to this form's (1.0: as fast as one fused call). A chain's lazy and
//! fused forms run in turns, one run of each at a time, so that their ratio compares them
//! on the same state of the machine. Every form's result
//! is compared bit for bit with the eager form's on the same backend before anything is
//! printed. The peers (torch eager, torch.compile, torch.softmax, the copy bound) are
//! `benches/peers/programs_peers.py`, run in the same lease.
//! `SKEL_PROGRAMS_SHORT=1` is the same as `--short`.

use std::time::Instant;

use skel::prelude::*;

#[path = "common/args.rs"]
mod args;

#[userfn]
fn step1(x: f32) -> f32 {
    x * 1.5 + 0.25
}

#[userfn]
fn step2(x: f32) -> f32 {
    x * x - 0.5
}

#[userfn]
fn step3(x: f32) -> f32 {
    x * 0.75 + 2.0
}

/// The three steps in one user function: the hand-fused Map.
#[userfn]
fn steps123(x: f32) -> f32 {
    step3(step2(step1(x)))
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
use softmax::{merge, normalise, to_stat};

/// `(A p)[i, j]` of the 5-point Laplacian, zero outside the grid (`c` is `p[i, j]`).
#[userfn]
fn laplace(#[index] (i, j): (usize, usize), c: f32, p: Mat<f32>) -> f32 {
    let mut s = 4.0 * c;
    if i > 0 {
        s -= p[(i - 1, j)];
    }
    if i + 1 < p.rows() {
        s -= p[(i + 1, j)];
    }
    if j > 0 {
        s -= p[(i, j - 1)];
    }
    if j + 1 < p.cols() {
        s -= p[(i, j + 1)];
    }
    s
}

#[userfn]
fn mul(a: f32, b: f32) -> f32 {
    a * b
}

#[userfn]
fn square(a: f32) -> f32 {
    a * a
}

/// `x + a y`, `a` passed from the host.
#[userfn]
fn axpy(x: f32, y: f32, #[uniform] a: f32) -> f32 {
    x + a * y
}

/// `x + alpha p` and `r - alpha A p`, `alpha = r·r / p·Ap` read on the device.
#[userfn]
fn cg_step(x: f32, r: f32, p: f32, ap: f32, rr: &[f32], pap: &[f32]) -> (f32, f32) {
    let alpha = rr[0] / pap[0];
    (x + alpha * p, r - alpha * ap)
}

/// `r + beta p`, `beta = r·r (new) / r·r (old)` read on the device.
#[userfn]
fn cg_direction(r: f32, p: f32, rr_new: &[f32], rr: &[f32]) -> f32 {
    r + rr_new[0] / rr[0] * p
}

/// Probe for [`sync`].
#[userfn]
fn probe_add(a: f32, b: f32) -> f32 {
    a + b
}

type Res<T> = std::result::Result<T, String>;

/// Waits for everything skel enqueued on `b`.
fn sync(b: Backend, probe: &Vector<f32>) -> Res<()> {
    match b {
        Backend::Cuda => skel::debug::synchronize().map_err(|e| e.to_string()),
        // One in-order queue (OpenCL), or nothing pending (host backends): a Reduce, which
        // reads its result back, waits for all of it.
        _ => Reduce::new(probe_add)
            .backend(b)
            .run(probe)
            .map(|_| ())
            .map_err(|e| e.to_string()),
    }
}

/// Median seconds of `repeat` runs of `f` (after one warm-up run), each ended by [`sync`].
fn median(
    repeat: usize,
    b: Backend,
    probe: &Vector<f32>,
    mut f: impl FnMut() -> Res<()>,
) -> Res<f64> {
    f()?;
    sync(b, probe)?;
    let mut times = Vec::with_capacity(repeat);
    for _ in 0..repeat {
        let s = Instant::now();
        f()?;
        sync(b, probe)?;
        times.push(s.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// Median seconds of `repeat` runs of each of `f` and `g`, run in turns (after one warm-up
/// run of each), each ended by [`sync`]: two forms compared by their ratio see the same
/// state of the machine (frequency, other load, memory just written by the form before),
/// where timing one form's runs after the other's gave the second a head start (the 2^26
/// chain on 16 cores: 0.87 of the fused Map for the lazy chain, whose loops execute the
/// same instructions as the fused Map's).
fn medians(
    repeat: usize,
    b: Backend,
    probe: &Vector<f32>,
    mut f: impl FnMut() -> Res<()>,
    mut g: impl FnMut() -> Res<()>,
) -> Res<(f64, f64)> {
    let timed = |h: &mut dyn FnMut() -> Res<()>| -> Res<f64> {
        let s = Instant::now();
        h()?;
        sync(b, probe)?;
        Ok(s.elapsed().as_secs_f64())
    };
    timed(&mut f)?;
    timed(&mut g)?;
    let (mut tf, mut tg) = (Vec::with_capacity(repeat), Vec::with_capacity(repeat));
    for k in 0..repeat {
        // Alternate which goes first, so neither always runs right after the other.
        if k % 2 == 0 {
            tf.push(timed(&mut f)?);
            tg.push(timed(&mut g)?);
        } else {
            tg.push(timed(&mut g)?);
            tf.push(timed(&mut f)?);
        }
    }
    let mid = |mut t: Vec<f64>| {
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    };
    Ok((mid(tf), mid(tg)))
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn e(err: skel::Error) -> String {
    err.to_string()
}

struct Row {
    program: String,
    backend: Backend,
    form: &'static str,
    seconds: f64,
    fused: f64,
}

/// The 3-Map chain over `n` elements: eager (three calls, two temporaries), lazy (one
/// call over a lazy chain) and one hand-fused Map.
fn chain(b: Backend, n: usize, repeat: usize, probe: &Vector<f32>, rows: &mut Vec<Row>) -> Res<()> {
    let x = Vector::from_fn(n, |i| (i % 1000) as f32 * 0.001);
    let (mut t1, mut t2, mut out) = (Vector::zeroed(n), Vector::zeroed(n), Vector::zeroed(n));
    let eager = median(repeat, b, probe, || {
        Map::new(step1).backend(b).run(&x, &mut t1).map_err(e)?;
        Map::new(step2).backend(b).run(&t1, &mut t2).map_err(e)?;
        Map::new(step3).backend(b).run(&t2, &mut out).map_err(e)
    })?;
    let want = out.to_vec();
    let (mut lazy_out, mut fused_out) = (Vector::zeroed(n), Vector::zeroed(n));
    let (lazy, fused) = medians(
        repeat,
        b,
        probe,
        || {
            let u1 = Map::new(step1).lazy(&x);
            let u2 = Map::new(step2).lazy(&u1);
            Map::new(step3)
                .backend(b)
                .run(&u2, &mut lazy_out)
                .map_err(e)
        },
        || {
            Map::new(steps123)
                .backend(b)
                .run(&x, &mut fused_out)
                .map_err(e)
        },
    )?;
    if bits(&lazy_out.to_vec()) != bits(&want) {
        return Err(format!(
            "chain on {b}: the lazy result differs from the eager one"
        ));
    }
    let got = fused_out.to_vec();
    if got
        .iter()
        .zip(&want)
        .any(|(g, w)| (g - w).abs() > 1e-4 * w.abs().max(1.0))
    {
        return Err(format!(
            "chain on {b}: the fused result differs from the eager one"
        ));
    }
    let program = format!("3-Map chain, n = {n}");
    for (form, seconds) in [
        ("eager (3 calls)", eager),
        ("lazy inputs", lazy),
        ("one fused Map", fused),
    ] {
        rows.push(Row {
            program: program.clone(),
            backend: b,
            form,
            seconds,
            fused,
        });
    }
    Ok(())
}

/// The 3-Map chain summed: eager (two Maps into temporaries, then a MapReduce of the last
/// step), lazy (one MapReduce over the lazy chain of the first two steps) and the one
/// hand-fused MapReduce.
fn chain_sum(
    b: Backend,
    n: usize,
    repeat: usize,
    probe: &Vector<f32>,
    rows: &mut Vec<Row>,
) -> Res<()> {
    let x = Vector::from_fn(n, |i| (i % 1000) as f32 * 0.001);
    let (mut t1, mut t2) = (Vector::zeroed(n), Vector::zeroed(n));
    let mut want = 0.0f32;
    let eager = median(repeat, b, probe, || {
        Map::new(step1).backend(b).run(&x, &mut t1).map_err(e)?;
        Map::new(step2).backend(b).run(&t1, &mut t2).map_err(e)?;
        want = MapReduce::new(step3, add).backend(b).run(&t2).map_err(e)?;
        Ok(())
    })?;
    let (mut got, mut fused_got) = (0.0f32, 0.0f32);
    let (lazy, fused) = medians(
        repeat,
        b,
        probe,
        || {
            let u1 = Map::new(step1).lazy(&x);
            let u2 = Map::new(step2).lazy(&u1);
            got = MapReduce::new(step3, add).backend(b).run(&u2).map_err(e)?;
            Ok(())
        },
        || {
            fused_got = MapReduce::new(steps123, add)
                .backend(b)
                .run(&x)
                .map_err(e)?;
            Ok(())
        },
    )?;
    if got.to_bits() != want.to_bits() {
        return Err(format!(
            "summed chain on {b}: the lazy result {got} differs from the eager one {want}"
        ));
    }
    let got = fused_got;
    if (got - want).abs() > 1e-3 * want.abs().max(1.0) {
        return Err(format!(
            "summed chain on {b}: the fused result {got} differs from the eager one {want}"
        ));
    }
    let program = format!("3-Map chain summed, n = {n}");
    for (form, seconds) in [
        ("eager (2 Maps + MapReduce)", eager),
        ("MapReduce of lazy inputs", lazy),
        ("one fused MapReduce", fused),
    ] {
        rows.push(Row {
            program: program.clone(),
            backend: b,
            form,
            seconds,
            fused,
        });
    }
    Ok(())
}

/// Row softmax of an `n x n` matrix: four calls (Reduce rows, Map, Reduce rows, Map), the
/// same with lazy inputs (the exponentials never stored), with `MapReduce::run_rows`, and
/// online (one row fold of `(max, sum)` pairs, then one Map: two passes).
fn softmax(
    b: Backend,
    n: usize,
    repeat: usize,
    probe: &Vector<f32>,
    rows: &mut Vec<Row>,
) -> Res<()> {
    let m = Matrix::from_fn(n, n, |i, j| ((i * 31 + j * 17) % 101) as f32 * 0.05 - 2.5);
    let (mut mx, mut sum) = (Vector::zeroed(n), Vector::zeroed(n));
    let (mut ex, mut out) = (Matrix::zeroed(n, n), Matrix::zeroed(n, n));
    let four = median(repeat, b, probe, || {
        Reduce::new(max)
            .start(f32::MIN)
            .backend(b)
            .run_rows(&m, &mut mx)
            .map_err(e)?;
        Map::new(exp_shifted)
            .arrays((&mx,))
            .backend(b)
            .run(&m, &mut ex)
            .map_err(e)?;
        Reduce::new(add)
            .backend(b)
            .run_rows(&ex, &mut sum)
            .map_err(e)?;
        Map::new(divide_row)
            .arrays((&sum,))
            .backend(b)
            .run(&ex, &mut out)
            .map_err(e)
    })?;
    let want = out.to_vec();
    let mut lazy_out = Matrix::zeroed(n, n);
    let (mut mx2, mut sum2) = (Vector::zeroed(n), Vector::zeroed(n));
    let lazy = median(repeat, b, probe, || {
        Reduce::new(max)
            .backend(b)
            .run_rows(&m, &mut mx2)
            .map_err(e)?;
        let ex = Map::new(exp_shifted).arrays((&mx2,)).lazy(&m);
        Reduce::new(add)
            .backend(b)
            .run_rows(&ex, &mut sum2)
            .map_err(e)?;
        Map::new(divide_row)
            .arrays((&sum2,))
            .backend(b)
            .run(&ex, &mut lazy_out)
            .map_err(e)
    })?;
    if bits(&lazy_out.to_vec()) != bits(&want) {
        return Err(format!(
            "softmax on {b}: the lazy result differs from four calls"
        ));
    }
    let mut mr_out = Matrix::zeroed(n, n);
    let (mut mx3, mut sum3) = (Vector::zeroed(n), Vector::zeroed(n));
    let map_reduce = median(repeat, b, probe, || {
        Reduce::new(max)
            .backend(b)
            .run_rows(&m, &mut mx3)
            .map_err(e)?;
        MapReduce::new(exp_shifted, add)
            .arrays((&mx3,))
            .backend(b)
            .run_rows(&m, &mut sum3)
            .map_err(e)?;
        let ex = Map::new(exp_shifted).arrays((&mx3,)).lazy(&m);
        Map::new(divide_row)
            .arrays((&sum3,))
            .backend(b)
            .run(&ex, &mut mr_out)
            .map_err(e)
    })?;
    if bits(&mr_out.to_vec()) != bits(&want) {
        return Err(format!(
            "softmax on {b}: MapReduce::run_rows differs from four calls"
        ));
    }
    // Online: one row fold of (max, sum) pairs and one Map, two passes over `m`. Other
    // arithmetic than the four calls' (the sums rescaled as the maximum grows): checked
    // against them within rounding.
    let mut online_out = Matrix::zeroed(n, n);
    let mut stats = Vector::zeroed(n);
    let online = median(repeat, b, probe, || {
        MapReduce::new(to_stat, merge)
            .backend(b)
            .run_rows(&m, &mut stats)
            .map_err(e)?;
        Map::new(normalise)
            .arrays((&stats,))
            .backend(b)
            .run(&m, &mut online_out)
            .map_err(e)
    })?;
    if let Some((k, (got, want))) = online_out
        .as_slice()
        .iter()
        .zip(&want)
        .enumerate()
        .find(|(_, (g, w))| (**g - **w).abs() > 1e-5 * w.abs() + 1e-9)
    {
        return Err(format!(
            "softmax on {b}: the online form differs from four calls at {k}: {got} vs {want}"
        ));
    }
    let program = format!("row softmax, {n} x {n}");
    // No single skel call computes a softmax: the ratio column compares with four calls.
    for (form, seconds) in [
        ("four calls", four),
        ("lazy inputs", lazy),
        ("MapReduce::run_rows + lazy", map_reduce),
        ("online: MapReduce::run_rows of (max, sum) + Map", online),
    ] {
        rows.push(Row {
            program: program.clone(),
            backend: b,
            form,
            seconds,
            fused: four,
        });
    }
    Ok(())
}

/// Whole programs (a 3-Map chain, a row softmax): eager, lazy and fused.
#[derive(clap::Parser, Debug)]
struct Args {
    /// Small sizes, one repetition (CI; also SKEL_PROGRAMS_SHORT=1).
    #[arg(long)]
    short: bool,
    /// Repetitions per row (default 1 short, 7 full).
    #[arg(long)]
    repeat: Option<usize>,
    /// Elements of the chain (default 2^26, 2^12 short).
    #[arg(long)]
    chain: Option<usize>,
    /// Rows and columns of the softmax matrix (default 8192, 64 short).
    #[arg(long)]
    softmax: Option<usize>,
    /// CG grid side (default 256, 2048 and 8192; 64 short).
    #[arg(long)]
    cg: Option<usize>,
    /// CG iterations per run (default 20, 3 short).
    #[arg(long)]
    cg_iters: Option<usize>,
    /// Only one program: chain, softmax or cg (each finishes well within a minute alone).
    #[arg(long)]
    only: Option<String>,
    #[command(flatten)]
    cargo: args::Cargo,
}

/// Conjugate gradient on the 5-point Laplacian of an `n x n` grid, `iters` iterations per
/// run: eager (`A p` stored, `p·Ap` and `r·r` read back to the host, `alpha`/`beta` passed
/// as uniforms: six calls), and as `examples/cg.rs` writes it (`run_into` + `.arrays`,
/// `A p` a lazy input: four calls, no host round trip). Reported per iteration; the
/// solutions of the two forms are compared (relative 1e-3).
fn cg(
    b: Backend,
    n: usize,
    (iters, repeat): (usize, usize),
    probe: &Vector<f32>,
    rows: &mut Vec<Row>,
) -> Res<()> {
    let rhs = Matrix::from_fn(n, n, |i, j| {
        let (u, v) = ((i as f32 + 0.5) / n as f32, (j as f32 + 0.5) / n as f32);
        u * (1.0 - u) * v * (1.0 - v) * 16.0
    });
    let zero = || Matrix::<f32>::zeroed(n, n);
    let (mut x, mut r, mut p, mut ap, mut t) = (zero(), zero(), zero(), zero(), zero());
    let eager = median(repeat, b, probe, || {
        x = zero();
        r = rhs.clone();
        p = rhs.clone();
        let mut rr = MapReduce::new(square, add).backend(b).run(&r).map_err(e)?;
        for _ in 0..iters {
            Map::new(laplace)
                .arrays((&p,))
                .backend(b)
                .run(&p, &mut ap)
                .map_err(e)?;
            let pap = MapReduce::new(mul, add)
                .backend(b)
                .run(&p, &ap)
                .map_err(e)?;
            let alpha = rr / pap;
            Map::new(axpy)
                .uniforms((alpha,))
                .backend(b)
                .run(&x, &p, &mut t)
                .map_err(e)?;
            std::mem::swap(&mut x, &mut t);
            Map::new(axpy)
                .uniforms((-alpha,))
                .backend(b)
                .run(&r, &ap, &mut t)
                .map_err(e)?;
            std::mem::swap(&mut r, &mut t);
            let rr_new = MapReduce::new(square, add).backend(b).run(&r).map_err(e)?;
            Map::new(axpy)
                .uniforms((rr_new / rr,))
                .backend(b)
                .run(&r, &p, &mut t)
                .map_err(e)?;
            std::mem::swap(&mut p, &mut t);
            rr = rr_new;
        }
        Ok(())
    })?;
    let want = x.to_vec();
    let (mut x2, mut r2, mut p2) = (zero(), zero(), zero());
    let (mut rr, mut pap, mut rr2) = (Vector::zeroed(1), Vector::zeroed(1), Vector::zeroed(1));
    let device = median(repeat, b, probe, || {
        x = zero();
        r = rhs.clone();
        p = rhs.clone();
        MapReduce::new(square, add)
            .backend(b)
            .run_into(&r, &mut rr)
            .map_err(e)?;
        for _ in 0..iters {
            let lap = Map::new(laplace).arrays((&p,)).lazy(&p);
            MapReduce::new(mul, add)
                .backend(b)
                .run_into(&p, &lap, &mut pap)
                .map_err(e)?;
            Map::new(cg_step)
                .arrays((&rr, &pap))
                .backend(b)
                .run(&x, &r, &p, &lap, &mut (&mut x2, &mut r2))
                .map_err(e)?;
            MapReduce::new(square, add)
                .backend(b)
                .run_into(&r2, &mut rr2)
                .map_err(e)?;
            Map::new(cg_direction)
                .arrays((&rr2, &rr))
                .backend(b)
                .run(&r2, &p, &mut p2)
                .map_err(e)?;
            std::mem::swap(&mut x, &mut x2);
            std::mem::swap(&mut r, &mut r2);
            std::mem::swap(&mut p, &mut p2);
            std::mem::swap(&mut rr, &mut rr2);
        }
        Ok(())
    })?;
    let got = x.to_vec();
    let (num, den) = got
        .iter()
        .zip(&want)
        .fold((0.0f64, 0.0f64), |(a, d), (g, w)| {
            (a + (*g as f64 - *w as f64).powi(2), d + (*w as f64).powi(2))
        });
    let rel = (num / den.max(1e-300)).sqrt();
    if rel.is_nan() || rel > 1e-3 {
        return Err(format!(
            "cg {n}^2 on {b}: run_into form differs from eager by {rel:.2e} (relative)"
        ));
    }
    let program = format!("CG iteration, {n} x {n}");
    let per = iters.max(1) as f64;
    for (form, seconds) in [
        ("eager (host scalars, 6 calls)", eager / per),
        ("run_into + .arrays + lazy A p (4 calls)", device / per),
    ] {
        rows.push(Row {
            program: program.clone(),
            backend: b,
            form,
            seconds,
            fused: eager / per,
        });
    }
    Ok(())
}

fn main() -> Res<()> {
    let args: Args = clap::Parser::parse();
    let short = args.short || std::env::var("SKEL_PROGRAMS_SHORT").is_ok_and(|v| v == "1");
    let repeat = args.repeat.unwrap_or(if short { 1 } else { 7 });
    let (chain_n, softmax_n) = if short {
        (1 << 12, 64)
    } else {
        (1 << 26, 8192)
    };
    let chain_n = args.chain.unwrap_or(chain_n);
    let softmax_n = args.softmax.unwrap_or(softmax_n);
    let cg_sizes = match args.cg {
        Some(n) => vec![n],
        None if short => vec![64],
        None => vec![256, 2048, 8192],
    };
    let cg_iters = args.cg_iters.unwrap_or(if short { 3 } else { 20 });
    let only = args.only.clone();
    let runs = |program: &str| only.as_deref().map_or(true, |o| o == program);
    let probe = Vector::from(vec![1.0f32; 4]);
    let mut rows = Vec::new();
    let available = Backend::available();
    for b in [Backend::Cpu, Backend::Rayon, Backend::OpenCl, Backend::Cuda] {
        if !available.contains(&b) {
            eprintln!("skel-{b}: skipped (not compiled in or no device)");
            continue;
        }
        // The sequential oracle is only timed at the short sizes.
        if b == Backend::Cpu && !short {
            continue;
        }
        // A launch-bound size too (2^20), where per-call costs count more than bandwidth.
        let sizes = if short || chain_n <= 1 << 20 {
            vec![chain_n]
        } else {
            vec![1 << 20, chain_n]
        };
        for &n in sizes.iter().filter(|_| runs("chain")) {
            chain(b, n, repeat, &probe, &mut rows)?;
            chain_sum(b, n, repeat, &probe, &mut rows)?;
        }
        if runs("softmax") {
            softmax(b, softmax_n, repeat, &probe, &mut rows)?;
        }
        for &n in cg_sizes.iter().filter(|_| runs("cg")) {
            // The sequential oracle only at small grids.
            if b == Backend::Cpu && n > 256 {
                continue;
            }
            cg(b, n, (cg_iters, repeat), &probe, &mut rows)?;
        }
    }
    println!(
        "programs{}: every result checked against the eager form on its backend",
        if short {
            " (short: no timing meaning)"
        } else {
            ""
        }
    );
    println!("| program | backend | form | ms | reference / this |");
    println!("|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {:.3} | {:.2} |",
            r.program,
            r.backend,
            r.form,
            r.seconds * 1e3,
            r.fused / r.seconds
        );
    }
    println!(
        "(reference: the one fused Map or MapReduce for the chains, the four calls for the softmax, the eager iteration for CG; CG rows are per iteration)"
    );
    Ok(())
}
