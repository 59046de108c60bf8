//! Device-resident OpenCL reductions and scans: Reduce (sum), MapReduce (dot), Scan
//! (inclusive, exclusive), Reduce of rows and of columns, f32. The CUB-backed peers
//! (torch/cupy) are `benches/peers/opencl_reduce_peers.py`, which also prints the ratios
//! from this program's output; run both on the same machine:
//!
//! ```text
//! SKEL_OPENCL_DEVICE=NVIDIA cargo run --release --features opencl \
//!     --example opencl_reduce_bench -- 20 24 28 > skel.log
//! python3 benches/peers/opencl_reduce_peers.py skel.log 20 24 28
//! ```
//!
//! Arguments: log2 sizes (default 20 24 28); rows/cols use a square matrix of the same
//! size (2^k elements). Every result is checked (all inputs hold small integers, so the
//! sums are exact in any order). One line per measurement:
//! `skel-opencl <op> 2^<k> <ms> ms <GB/s> GB/s` (best of 10 calls).

use std::time::Instant;

use skel::prelude::*;

#[userfn]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

#[userfn]
fn mul(a: f32, b: f32) -> f32 {
    a * b
}

/// Best of `reps` timings of `f` (seconds).
fn best(reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut t = f64::MAX;
    for _ in 0..reps {
        let s = Instant::now();
        f()?;
        t = t.min(s.elapsed().as_secs_f64());
    }
    Ok(t)
}

fn report(op: &str, log2: u32, t: f64, bytes: f64) {
    println!(
        "skel-opencl {op:<10} 2^{log2} {:9.4} ms {:8.1} GB/s",
        t * 1e3,
        bytes / t / 1e9
    );
}

fn check(what: &str, ok: bool) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!("wrong result: {what}")))
    }
}

fn size(log2: u32) -> Result<()> {
    let b = Backend::OpenCl;
    let n = 1usize << log2;
    let reps = 10;
    let f = 4.0f64;
    let a = Vector::from(vec![1.0f32; n]);
    let c = Vector::from(vec![2.0f32; n]);
    let mut out: Vector<f32> = Vector::zeroed(n);

    // Warm-up calls (upload, build) that also check the results.
    let s: f32 = Reduce::new(add).backend(b).run(&a)?;
    check("reduce", s == n as f32)?;
    let d: f32 = MapReduce::new(mul, add).backend(b).run(&a, &c)?;
    check("dot", d == 2.0 * n as f32)?;
    Scan::new(add).backend(b).run(&c, &mut out)?;
    // Prefix sums of 2.0 are exact up to 2^25.
    let k = n.min(1 << 24) - 1;
    check("scan", out[k] == 2.0 * (k + 1) as f32)?;
    Scan::new(add)
        .mode(ScanMode::Exclusive)
        .start(3.0)
        .backend(b)
        .run(&c, &mut out)?;
    check(
        "exclusive scan",
        out[0] == 3.0 && out[k] == 3.0 + 2.0 * k as f32,
    )?;

    let t = best(reps, || {
        Reduce::new(add).backend(b).run(&a).map(|_: f32| ())
    })?;
    report("reduce", log2, t, f * n as f64);
    let t = best(reps, || {
        MapReduce::new(mul, add)
            .backend(b)
            .run(&a, &c)
            .map(|_: f32| ())
    })?;
    report("dot", log2, t, 2.0 * f * n as f64);
    let t = best(reps, || {
        Scan::new(add).backend(b).run(&a, &mut out)?;
        let _ = out[0];
        Ok(())
    })?;
    report("scan", log2, t, 2.0 * f * n as f64);
    let t = best(reps, || {
        Scan::new(add)
            .mode(ScanMode::Exclusive)
            .backend(b)
            .run(&a, &mut out)?;
        let _ = out[0];
        Ok(())
    })?;
    report("scan-excl", log2, t, 2.0 * f * n as f64);
    drop((a, c, out));

    let side = 1usize << (log2 / 2);
    let (rows, cols) = (n / side, side);
    let m = Matrix::from_fn(rows, cols, |r, c| ((r + c) % 4) as f32);
    let mut per_row: Vector<f32> = Vector::zeroed(rows);
    let mut per_col: Vector<f32> = Vector::zeroed(cols);
    Reduce::new(add).backend(b).run_rows(&m, &mut per_row)?;
    Reduce::new(add).backend(b).run_cols(&m, &mut per_col)?;
    // Rows (columns) cycle through 0..4, which sums to 6 per 4 elements.
    check("rows", per_row[rows - 1] == (cols / 4 * 6) as f32)?;
    check("cols", per_col[cols - 1] == (rows / 4 * 6) as f32)?;
    let t = best(reps, || {
        Reduce::new(add).backend(b).run_rows(&m, &mut per_row)?;
        let _ = per_row[0];
        Ok(())
    })?;
    report("rows", log2, t, f * n as f64);
    let t = best(reps, || {
        Reduce::new(add).backend(b).run_cols(&m, &mut per_col)?;
        let _ = per_col[0];
        Ok(())
    })?;
    report("cols", log2, t, f * n as f64);
    Ok(())
}

/// skel's OpenCL Reduce against the copy bound, per size.
#[derive(clap::Parser)]
#[command(name = "opencl_reduce_bench")]
struct Cli {
    /// Sizes as powers of two (default 20 24 28).
    sizes: Vec<u32>,
}

fn main() -> Result<()> {
    let mut sizes = <Cli as clap::Parser>::parse().sizes;
    Backend::OpenCl.check()?;
    if sizes.is_empty() {
        sizes = vec![20, 24, 28];
    }
    println!(
        "opencl_reduce_bench: SKEL_OPENCL_TUNE={}",
        std::env::var("SKEL_OPENCL_TUNE").unwrap_or_default()
    );
    for log2 in sizes {
        size(log2)?;
    }
    Ok(())
}
