//! Device-resident and host-to-host throughput of the CUDA backend, for the tables in docs/performance.md
//! (the CuPy/PyTorch peers are `benches/peers/cuda_peers.py`, run on the same machine).
//!
//! `cargo run --release --features cuda --example cuda_bench -- [log2 n]` (default 28).
//! Prints one line per measurement: `name  time  throughput`. `-- small [calls]` runs only
//! the per-call rows (Reduce of 1000 read back, Map of 1000 asynchronous), `calls` times.

use std::time::Instant;

use skel::prelude::*;

#[userfn]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

#[userfn]
fn first_call_probe(a: f32, b: f32) -> f32 {
    a * 0.5 + b
}

/// Best of `reps` timings of `f` (seconds).
fn best(reps: usize, mut f: impl FnMut()) -> f64 {
    let mut t = f64::MAX;
    for _ in 0..reps {
        let s = Instant::now();
        f();
        t = t.min(s.elapsed().as_secs_f64());
    }
    t
}

/// Per-call cost at small sizes: a Reduce of 1000 with its result read back, and a Map of
/// 1000 issued `k` times then waited for once.
fn small_calls(b: Backend, k: usize) -> Result<()> {
    let small = Vector::from(vec![1.0f32; 1000]);
    let mut sout = Vector::zeroed(1000);
    let _: f32 = Reduce::new(add).backend(b).run(&small)?;
    let s = Instant::now();
    for _ in 0..k {
        let _: f32 = Reduce::new(add).backend(b).run(&small)?;
    }
    println!(
        "reduce 1000 per call (sync) {:8.2} us",
        s.elapsed().as_secs_f64() / k as f64 * 1e6
    );
    Map::new(add).backend(b).run(&small, &small, &mut sout)?;
    skel::debug::synchronize()?;
    let s = Instant::now();
    for _ in 0..k {
        Map::new(add).backend(b).run(&small, &small, &mut sout)?;
    }
    skel::debug::synchronize()?;
    println!(
        "map 1000 per call (async)   {:8.2} us",
        s.elapsed().as_secs_f64() / k as f64 * 1e6
    );
    assert_eq!(sout[999], 2.0);
    Ok(())
}

/// skel's CUDA backend on its own: first call, Map, Reduce, per-call cost.
#[derive(clap::Parser)]
#[command(name = "cuda_bench")]
struct Cli {
    /// Elements as a power of two (default 28), or `small` for only the per-call rows (a
    /// host profile of the call path).
    size: Option<String>,
    /// `scan`: only the Scan rows; after `small`: the number of calls (default 20000).
    only: Option<String>,
}

fn main() -> Result<()> {
    let cli = <Cli as clap::Parser>::parse();
    let b = Backend::Cuda;
    b.check()?;
    if cli.size.as_deref() == Some("small") {
        let k = cli.only.and_then(|s| s.parse().ok()).unwrap_or(20_000);
        return small_calls(b, k);
    }
    let log2: u32 = match cli.size {
        None => 28,
        Some(s) => s.parse().map_err(|_| {
            Error::InvalidArgument(format!("size {s:?}: a power of two or `small`"))
        })?,
    };
    let only = cli.only.unwrap_or_default();
    let n = 1usize << log2;
    println!("cuda_bench: n = 2^{log2} f32");

    // JIT: the first call of a kernel in this process (compile, or load from the disk cache).
    let x = Vector::from(vec![1.0f32; 1024]);
    let mut y = Vector::zeroed(1024);
    let s = Instant::now();
    Map::new(first_call_probe).backend(b).run(&x, &x, &mut y)?;
    let _ = y[0];
    println!(
        "first-call (jit or disk cache)  {:8.2} ms",
        s.elapsed().as_secs_f64() * 1e3
    );

    let a = Vector::from(vec![1.0f32; n]);
    let c = Vector::from(vec![2.0f32; n]);
    let mut out: Vector<f32> = Vector::zeroed(n);
    // Warm up: uploads and compiles.
    Map::new(add).backend(b).run(&a, &c, &mut out)?;
    let _ = out[0];
    let s: f32 = Reduce::new(add).backend(b).run(&a)?;
    assert_eq!(s, n as f32);
    Scan::new(add).backend(b).run(&a, &mut out)?;
    if n <= 1 << 24 {
        assert_eq!(out[n - 1], n as f32);
    }

    let reps = 10;
    if only == "scan" {
        let t = best(reps, || {
            Scan::new(add).backend(b).run(&a, &mut out).unwrap();
            let _ = out[0];
        });
        println!(
            "scan device-resident        {:8.3} ms  {:7.1} GB/s",
            t * 1e3,
            2.0 * 4.0 * n as f64 / t / 1e9
        );
        return Ok(());
    }
    let t = best(reps, || {
        Map::new(add).backend(b).run(&a, &c, &mut out).unwrap();
        let _ = out[0];
    });
    println!(
        "map a+b device-resident     {:8.3} ms  {:7.1} GB/s",
        t * 1e3,
        3.0 * 4.0 * n as f64 / t / 1e9
    );
    let t = best(reps, || {
        let _: f32 = Reduce::new(add).backend(b).run(&a).unwrap();
    });
    println!(
        "reduce device-resident      {:8.3} ms  {:7.1} GB/s",
        t * 1e3,
        4.0 * n as f64 / t / 1e9
    );
    let t = best(reps, || {
        Scan::new(add).backend(b).run(&a, &mut out).unwrap();
        let _ = out[0];
    });
    println!(
        "scan device-resident        {:8.3} ms  {:7.1} GB/s",
        t * 1e3,
        2.0 * 4.0 * n as f64 / t / 1e9
    );
    drop((a, c, out));

    small_calls(b, 2000)?;

    // Host-to-host Map of 2^24: upload both inputs, compute, download, per call.
    let m = 1usize << 24;
    for (name, pinned) in [("pinned", true), ("pageable", false)] {
        let mk = |v: f32| -> Result<Vector<f32>> {
            if pinned {
                Vector::pinned(vec![v; m])
            } else {
                Ok(Vector::pageable(vec![v; m]))
            }
        };
        let (mut ha, mut hb, mut ho) = (mk(1.0)?, mk(2.0)?, mk(0.0)?);
        let t = best(5, || {
            ha.as_mut_slice()[0] = 1.0; // host write: the device copy is stale again
            hb.as_mut_slice()[0] = 2.0;
            Map::new(add).backend(b).run(&ha, &hb, &mut ho).unwrap();
            assert_eq!(ho.as_slice()[m - 1], 3.0);
        });
        println!(
            "host-to-host map 2^24 {name:8} {:8.3} ms  {:7.1} GB/s",
            t * 1e3,
            3.0 * 4.0 * m as f64 / t / 1e9
        );
    }
    Ok(())
}
