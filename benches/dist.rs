//! Scaling of the distributed skeletons (`skel::dist`) over MPI ranks: strong scaling (one
//! global size, more ranks) and weak scaling (one size per rank) of Map, Reduce, Scan and a
//! 2D Jacobi stencil. Its own report, one line per workload; run it under mpirun with each
//! rank count and compare the lines:
//!
//! ```text
//! cargo bench --features mpi --bench dist --no-run        # prints the binary's path
//! for n in 1 2 3 4; do mpirun -np $n --oversubscribe target/release/deps/dist-<hash> --bench; done
//! ```
//!
//! Times are per call on rank 0 between barriers (the slowest rank decides), the median of
//! `SKEL_DIST_REPS` (default 5) runs. `SKEL_DIST_SCALE` (default 1) multiplies the sizes.

use std::time::Instant;

use skel::dist::{self, DistMatrix, DistVector, World};
use skel::prelude::*;

#[userfn]
fn axpy(a: f64, b: f64) -> f64 {
    2.5 * a + b
}

#[userfn]
fn add(a: f64, b: f64) -> f64 {
    a + b
}

#[userfn]
fn jacobi(w: Window2<f64>) -> f64 {
    0.25 * (w[(-1, 0)] + w[(1, 0)] + w[(0, -1)] + w[(0, 1)])
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Median seconds per call of `f` over `reps` timed runs (after one warm-up), on rank 0.
fn time(world: &World, reps: usize, mut f: impl FnMut() -> skel::Result<()>) -> skel::Result<f64> {
    f()?;
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        world.barrier();
        let t = Instant::now();
        f()?;
        world.barrier();
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

fn workloads(
    world: &World,
    scaling: &str,
    n: usize,
    (rows, cols): (usize, usize),
    reps: usize,
) -> skel::Result<()> {
    let a = DistVector::from_fn(world, n, |i| i as f64 * 1e-3);
    let b = DistVector::filled(world, n, 1.0f64);
    let mut out = DistVector::zeroed(world, n);
    let t_map = time(world, reps, || Map::new(axpy).run(&a, &b, &mut out))?;
    let t_reduce = time(world, reps, || Reduce::new(add).run(&a).map(|_| ()))?;
    let t_scan = time(world, reps, || Scan::new(add).run(&a, &mut out))?;
    let u = DistMatrix::from_fn(world, rows, cols, |r, c| ((r * cols + c) % 97) as f64);
    let mut v = DistMatrix::zeroed(world, rows, cols);
    let t_stencil = time(world, reps, || {
        MapOverlap::new(jacobi, (1, 1)).run(&u, &mut v)
    })?;
    if world.rank() == 0 {
        let ranks = world.size();
        let gbs = |t: f64, bytes: f64| bytes / t / 1e9;
        let per = |what: &str, size: String, t: f64, bytes: f64| {
            println!(
                "dist {scaling:<6} {what:<8} ranks {ranks}  {size:<14} {:>10.3} ms  {:>7.2} GB/s",
                t * 1e3,
                gbs(t, bytes)
            );
        };
        let nf = n as f64 * 8.0;
        per("map", format!("n {n}"), t_map, 3.0 * nf);
        per("reduce", format!("n {n}"), t_reduce, nf);
        per("scan", format!("n {n}"), t_scan, 2.0 * nf);
        let sf = (rows * cols) as f64 * 8.0;
        per("stencil", format!("{rows}x{cols}"), t_stencil, 2.0 * sf);
    }
    Ok(())
}

fn main() -> skel::Result<()> {
    let world = dist::init()?;
    let (scale, reps) = (
        env("SKEL_DIST_SCALE", 1).max(1),
        env("SKEL_DIST_REPS", 5).max(1),
    );
    let ranks = world.size();
    if world.rank() == 0 {
        println!(
            "dist bench: {ranks} rank(s), backend {}, scale {scale}, median of {reps}",
            skel::default_backend().map_or("none".to_string(), |b| b.to_string())
        );
    }
    // Strong: one global size whatever the rank count.
    let side = 1024 * scale;
    workloads(&world, "strong", (1 << 22) * scale, (side, side), reps)?;
    // Weak: the same size per rank (the stencil grid grows by rows).
    workloads(
        &world,
        "weak",
        (1 << 21) * scale * ranks,
        (side * ranks, side),
        reps,
    )?;
    Ok(())
}
