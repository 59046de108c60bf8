//! Conjugate gradient on the 5-point Laplacian of an `n x n` grid (zero outside), matrix
//! free: `A p` is a Map with `#[index]` reading `p` as a container argument, evaluated
//! lazily inside the calls that read it. The scalars of an iteration (`p·Ap`, `r·r`) are
//! written by `run_into` to one-element vectors and read by the next calls as container
//! arguments (`.arrays`), so on a GPU nothing comes back to the host between iterations.
//!
//! ```text
//! cargo run --release --example cg -- [n] [--iters k] [--backend cuda] [--graph] [--check] [--bench]
//! ```
//!
//! `--check` runs the same iterations in plain Rust (f64) and compares the solutions;
//! `--bench` reports the time per iteration (after a warm-up, ended by a synchronisation).
//! `--graph` records a pair of iterations once (`skel::Graph`: the state is double
//! buffered, so the pair leaves it where it was) and launches the recording for every
//! further pair, as a solver that repeats one step would.

use std::time::Instant;

use skel::prelude::*;

/// `(A p)[i, j]` for the 5-point Laplacian with zero boundary values: `c` is `p[i, j]`.
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
fn add(a: f32, b: f32) -> f32 {
    a + b
}

#[userfn]
fn square(a: f32) -> f32 {
    a * a
}

/// `x + alpha p` and `r - alpha A p`, with `alpha = r·r / p·Ap` read where it was computed.
#[userfn]
fn step(x: f32, r: f32, p: f32, ap: f32, rr: &[f32], pap: &[f32]) -> (f32, f32) {
    let alpha = rr[0] / pap[0];
    (x + alpha * p, r - alpha * ap)
}

/// The next direction `r + beta p`, with `beta = r·r (new) / r·r (old)`.
#[userfn]
fn direction(r: f32, p: f32, rr_new: &[f32], rr: &[f32]) -> f32 {
    r + rr_new[0] / rr[0] * p
}

/// One copy of the solver's state: solution, residual, direction and `r·r`.
struct State {
    x: Matrix<f32>,
    r: Matrix<f32>,
    p: Matrix<f32>,
    rr: Vector<f32>,
}

impl State {
    fn zeroed(n: usize, m: usize) -> State {
        State {
            x: Matrix::zeroed(n, m),
            r: Matrix::zeroed(n, m),
            p: Matrix::zeroed(n, m),
            rr: Vector::zeroed(1),
        }
    }
}

/// The solver: the current state, `p·Ap`, and the state the next iteration writes (the two
/// swap roles every iteration, so that a pair of iterations leaves them where they were).
struct Cg {
    now: State,
    pap: Vector<f32>,
    next: State,
}

impl Cg {
    /// `x = 0`, `r = p = rhs`.
    fn new(b: Backend, rhs: &Matrix<f32>) -> skel::Result<Cg> {
        let (n, m) = (rhs.rows(), rhs.cols());
        let mut rr = Vector::zeroed(1);
        MapReduce::new(square, add)
            .backend(b)
            .run_into(rhs, &mut rr)?;
        Ok(Cg {
            now: State {
                x: Matrix::zeroed(n, m),
                r: rhs.clone(),
                p: rhs.clone(),
                rr,
            },
            pap: Vector::zeroed(1),
            next: State::zeroed(n, m),
        })
    }

    /// One iteration from `s` into `t`: four calls, `A p` never stored, no value read by
    /// the host.
    fn iterate(b: Backend, s: &State, pap: &mut Vector<f32>, t: &mut State) -> skel::Result<()> {
        let ap = Map::new(laplace).arrays((&s.p,)).lazy(&s.p);
        MapReduce::new(mul, add)
            .backend(b)
            .run_into(&s.p, &ap, &mut *pap)?;
        Map::new(step).arrays((&s.rr, &*pap)).backend(b).run(
            &s.x,
            &s.r,
            &s.p,
            &ap,
            &mut (&mut t.x, &mut t.r),
        )?;
        MapReduce::new(square, add)
            .backend(b)
            .run_into(&t.r, &mut t.rr)?;
        Map::new(direction)
            .arrays((&t.rr, &s.rr))
            .backend(b)
            .run(&t.r, &s.p, &mut t.p)
    }

    /// `k` iterations, each made eagerly (`graph`: `false`) or, in pairs, as launches of
    /// one recorded pair of iterations (`now -> next -> now`: the recording is the first
    /// launch; an odd last iteration is made eagerly).
    /// Returns whether the launches replayed one device graph (a CUDA graph).
    fn run(&mut self, b: Backend, k: usize, graph: bool) -> skel::Result<bool> {
        let Cg { now, pap, next } = self;
        let mut device = false;
        if graph && k >= 2 {
            let g = skel::Graph::record(|| {
                Cg::iterate(b, now, pap, next)?;
                Cg::iterate(b, next, pap, now)
            })?;
            device = g.device_graph();
            for _ in 1..k / 2 {
                g.launch()?;
            }
        } else {
            for _ in 0..k / 2 {
                Cg::iterate(b, now, pap, next)?;
                Cg::iterate(b, next, pap, now)?;
            }
        }
        if k % 2 == 1 {
            Cg::iterate(b, now, pap, next)?;
            std::mem::swap(now, next);
        }
        Ok(device)
    }

    /// Seconds per iteration over `pairs` pairs of iterations, timed after a warm-up (the
    /// recording, with `graph`) and ended by a synchronisation.
    fn timed(&mut self, b: Backend, pairs: usize, graph: bool) -> skel::Result<f64> {
        let Cg { now, pap, next } = self;
        let mut pair = || -> skel::Result<()> {
            Cg::iterate(b, now, pap, next)?;
            Cg::iterate(b, next, pap, now)
        };
        let elapsed = if graph {
            let g = skel::Graph::record(pair)?;
            skel::tune::synchronize()?;
            let start = Instant::now();
            for _ in 0..pairs {
                g.launch()?;
            }
            skel::tune::synchronize()?;
            start.elapsed()
        } else {
            pair()?;
            skel::tune::synchronize()?;
            let start = Instant::now();
            for _ in 0..pairs {
                pair()?;
            }
            skel::tune::synchronize()?;
            start.elapsed()
        };
        Ok(elapsed.as_secs_f64() / (2 * pairs) as f64)
    }
}

/// The right-hand side: a smooth bump.
fn rhs(n: usize) -> Matrix<f32> {
    Matrix::from_fn(n, n, |i, j| {
        let (u, v) = ((i as f32 + 0.5) / n as f32, (j as f32 + 0.5) / n as f32);
        (u * (1.0 - u) * v * (1.0 - v)) * 16.0
    })
}

/// `A v` in plain Rust (f64).
fn apply(n: usize, v: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            let mut s = 4.0 * v[i * n + j];
            if i > 0 {
                s -= v[(i - 1) * n + j];
            }
            if i + 1 < n {
                s -= v[(i + 1) * n + j];
            }
            if j > 0 {
                s -= v[i * n + j - 1];
            }
            if j + 1 < n {
                s -= v[i * n + j + 1];
            }
            out[i * n + j] = s;
        }
    }
    out
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `iters` CG iterations in plain Rust (f64): the solution.
fn reference(n: usize, rhs: &[f64], iters: usize) -> Vec<f64> {
    let mut x = vec![0.0; n * n];
    let (mut r, mut p) = (rhs.to_vec(), rhs.to_vec());
    let mut rr = dot(&r, &r);
    for _ in 0..iters {
        let ap = apply(n, &p);
        let alpha = rr / dot(&p, &ap);
        for k in 0..n * n {
            x[k] += alpha * p[k];
            r[k] -= alpha * ap[k];
        }
        let rr_new = dot(&r, &r);
        for k in 0..n * n {
            p[k] = r[k] + rr_new / rr * p[k];
        }
        rr = rr_new;
    }
    x
}

fn main() -> skel::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| args.iter().position(|a| a == flag).map(|k| args.get(k + 1));
    let n = args
        .first()
        .and_then(|a| a.parse().ok())
        .unwrap_or(256usize);
    let iters = match value("--iters") {
        Some(Some(k)) => k
            .parse()
            .map_err(|_| Error::InvalidArgument(format!("--iters {k}: not a count")))?,
        Some(None) => return Err(Error::InvalidArgument("--iters needs a count".into())),
        None => 50usize,
    };
    let backend = match value("--backend") {
        Some(Some(name)) => name.parse()?,
        Some(None) => return Err(Error::InvalidArgument("--backend needs a name".into())),
        None => skel::default_backend()?,
    };
    // `--graph`: pairs of iterations recorded once (`skel::Graph`) and launched.
    let graph = args.iter().any(|a| a == "--graph");
    let b = rhs(n);
    let mut cg = Cg::new(backend, &b)?;
    let how = match (graph, cg.run(backend, iters, graph)?) {
        (false, _) => "eager",
        (true, true) => "graph: one CUDA graph per launch",
        (true, false) => "graph: the closure runs on every launch",
    };
    println!(
        "cg {n} x {n} on {backend} ({how}): {iters} iterations, r·r = {:.3e} (from {:.3e})",
        cg.now.rr[0],
        b.iter().map(|v| v * v).sum::<f32>()
    );
    if args.iter().any(|a| a == "--check") {
        let rhs64: Vec<f64> = b.iter().map(|&v| v as f64).collect();
        let want = reference(n, &rhs64, iters);
        let got: Vec<f64> = cg.now.x.iter().map(|&v| v as f64).collect();
        let diff: Vec<f64> = got.iter().zip(&want).map(|(g, w)| g - w).collect();
        let rel = (dot(&diff, &diff) / dot(&want, &want).max(1e-300)).sqrt();
        let res: Vec<f64> = apply(n, &got)
            .iter()
            .zip(&rhs64)
            .map(|(a, r)| r - a)
            .collect();
        let res_want: Vec<f64> = apply(n, &want)
            .iter()
            .zip(&rhs64)
            .map(|(a, r)| r - a)
            .collect();
        let (res, res_want) = (dot(&res, &res).sqrt(), dot(&res_want, &res_want).sqrt());
        println!(
            "check: |x - x_ref| / |x_ref| = {rel:.2e}; |b - A x| = {res:.3e} (plain Rust f64: {res_want:.3e})"
        );
        let bad = |v: f64, limit: f64| v.is_nan() || v > limit;
        if bad(rel, 1e-2) || bad(res, 2.0 * res_want + 1e-3 * dot(&rhs64, &rhs64).sqrt()) {
            return Err(Error::InvalidArgument(format!(
                "cg check failed: relative difference {rel:.2e}, residual {res:.3e} vs {res_want:.3e}"
            )));
        }
        println!("check: ok, the solution matches plain Rust CG");
    }
    if args.iter().any(|a| a == "--bench") {
        // From the start again: the same number of iterations as above (rounded up to
        // pairs), timed after a warm-up pair.
        let pairs = iters.div_ceil(2).max(1);
        let runs = 2 * pairs;
        cg = Cg::new(backend, &b)?;
        let per = cg.timed(backend, pairs, graph)?;
        println!(
            "bench: {:.1} us per iteration ({runs} iterations, {n} x {n}, {backend}, {how})",
            per * 1e6
        );
    }
    Ok(())
}
