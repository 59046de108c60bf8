//! A distributed 2D heat equation (Jacobi sweeps): MapOverlap 2D for the stencil, MapReduce
//! for the residual, on a grid spread over MPI ranks by rows. The same program runs on one
//! process and on N ranks:
//!
//! ```text
//! cargo run --release --features mpi --example heat_dist -- --n 512 --sweeps 200
//! mpirun -np 4 target/release/examples/heat_dist --n 512 --sweeps 200 --check
//! ```
//!
//! `--int` solves in fixed point (i64): every rank count gives the single-process residuals
//! and grid bit for bit. In f64 the residual's sum is regrouped by rank (within rounding).
//! `--check` also runs the single-process `cpu` solve and compares.

use clap::Parser;
use skel::containers::{Input, Output};
use skel::dist::{self, DistMatrix, World};
use skel::prelude::*;

#[userfn]
fn jacobi(w: Window2<f64>) -> f64 {
    0.25 * (w[(-1, 0)] + w[(1, 0)] + w[(0, -1)] + w[(0, 1)])
}

#[userfn]
fn jacobi_fixed(w: Window2<i64>) -> i64 {
    (w[(-1, 0)] + w[(1, 0)] + w[(0, -1)] + w[(0, 1)]) / 4
}

#[userfn]
fn sq_diff(a: f64, b: f64) -> f64 {
    (a - b) * (a - b)
}

#[userfn]
fn abs_diff(a: i64, b: i64) -> i64 {
    (a - b).abs()
}

#[userfn]
fn add(a: f64, b: f64) -> f64 {
    a + b
}

#[userfn]
fn add_fixed(a: i64, b: i64) -> i64 {
    a + b
}

#[derive(Parser)]
struct Args {
    /// Grid size (n x n); the top row is held hot, the other borders cold.
    #[arg(long, default_value_t = 256)]
    n: usize,
    /// Jacobi sweeps.
    #[arg(long, default_value_t = 100)]
    sweeps: usize,
    /// Print the residual every this many sweeps.
    #[arg(long, default_value_t = 20)]
    every: usize,
    /// Fixed-point (i64) instead of f64.
    #[arg(long)]
    int: bool,
    /// Compare with the single-process `cpu` solve (bit for bit with --int).
    #[arg(long)]
    check: bool,
}

/// Runs the sweeps on `u` (with `v` of the same shape as scratch) and returns the residual
/// after every `every`-th sweep; the result ends in `u`. Edge::None leaves the border, the
/// boundary condition, as it is in both buffers.
macro_rules! solver {
    ($name:ident, $t:ty, $step:ident, $diff:ident, $add:ident) => {
        fn $name<C: Input<$t> + Output<$t>>(
            u: &mut C,
            v: &mut C,
            sweeps: usize,
            every: usize,
            backend: Option<Backend>,
        ) -> skel::Result<Vec<$t>> {
            let mut stencil = MapOverlap::new($step, (1, 1));
            let mut residual = MapReduce::new($diff, $add);
            if let Some(b) = backend {
                stencil = stencil.backend(b);
                residual = residual.backend(b);
            }
            let mut residuals = Vec::new();
            for sweep in 1..=sweeps {
                stencil.run(u, v)?;
                std::mem::swap(u, v);
                if sweep % every == 0 || sweep == sweeps {
                    residuals.push(residual.run(u, v)?);
                }
            }
            Ok(residuals)
        }
    };
}

solver!(solve_f64, f64, jacobi, sq_diff, add);
solver!(solve_fixed, i64, jacobi_fixed, abs_diff, add_fixed);

/// The hot top row at `degrees`, the rest at 0.
fn hot<T: Default>(r: usize, degrees: T) -> T {
    if r == 0 {
        degrees
    } else {
        T::default()
    }
}

/// 100 degrees in fixed point, 2^20 steps per degree.
const HOT_FIXED: i64 = 100 << 20;

fn report<T: std::fmt::Debug>(world: &World, args: &Args, residuals: &[T]) {
    if world.rank() == 0 {
        for (k, r) in residuals.iter().enumerate() {
            let sweep = ((k + 1) * args.every).min(args.sweeps);
            println!("sweep {sweep:>6}: residual {r:?}");
        }
    }
}

fn main() -> skel::Result<()> {
    let args = Args::parse();
    let world = dist::init()?;
    let (n, every) = (args.n, args.every.max(1));
    if world.rank() == 0 {
        println!(
            "heat: {n}x{n} grid, {} sweeps, {}, {} rank(s)",
            args.sweeps,
            if args.int { "i64 fixed point" } else { "f64" },
            world.size()
        );
    }
    let start = std::time::Instant::now();
    let ok = if args.int {
        let mut u = DistMatrix::from_fn(&world, n, n, |r, _| hot(r, HOT_FIXED));
        let mut v = u.clone();
        let res = solve_fixed(&mut u, &mut v, args.sweeps, every, None)?;
        report(&world, &args, &res);
        let grid = u.all_gather()?;
        !args.check || {
            let mut lu = Matrix::from_fn(n, n, |r, _| hot(r, HOT_FIXED));
            let mut lv = lu.clone();
            let want = solve_fixed(&mut lu, &mut lv, args.sweeps, every, Some(Backend::Cpu))?;
            res == want && grid.to_vec() == lu.to_vec()
        }
    } else {
        let mut u = DistMatrix::from_fn(&world, n, n, |r, _| hot(r, 100.0));
        let mut v = u.clone();
        let res = solve_f64(&mut u, &mut v, args.sweeps, every, None)?;
        report(&world, &args, &res);
        let grid = u.all_gather()?;
        !args.check || {
            let mut lu = Matrix::from_fn(n, n, |r, _| hot(r, 100.0));
            let mut lv = lu.clone();
            let want = solve_f64(&mut lu, &mut lv, args.sweeps, every, Some(Backend::Cpu))?;
            // The stencil is the same per point on any rank count: the grid is identical;
            // only the residual's sum is regrouped.
            let close = res
                .iter()
                .zip(&want)
                .all(|(a, b)| (a - b).abs() <= 1e-12 * b.abs().max(1e-300));
            close && grid.to_vec() == lu.to_vec()
        }
    };
    if world.rank() == 0 {
        println!("time: {:.3} s", start.elapsed().as_secs_f64());
        if args.check {
            println!(
                "check: {}",
                if ok {
                    "matches the single-process cpu run"
                } else {
                    "DIFFERS from the single-process cpu run"
                }
            );
        }
    }
    if !ok {
        std::process::exit(1);
    }
    Ok(())
}
