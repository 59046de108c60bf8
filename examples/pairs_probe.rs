//! MapPairs and MapPairsReduce on CUDA against naive hand-written kernels (NVRTC through
//! cudarc: one thread per pair, one thread per row), device-resident, in one process; and
//! a run of every pair kernel form (bands over streams, segmented folds, rows and columns)
//! small enough for compute-sanitizer.
//!
//! `cargo run --release --features cuda --example pairs_probe -- [n] [reps]` (default
//! 8192 and 20): MapPairs of `n` x `n` f32. Prints `name  ms per call  GB/s written`.

use std::time::Instant;

use cudarc::driver::{CudaContext, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};
use skel::prelude::*;

#[userfn]
fn dist(p: f32, q: f32) -> f32 {
    (p - q).abs()
}

#[userfn]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

/// The same computations, written the obvious way.
const NAIVE: &str = r#"
extern "C" __global__ void naive_pairs(float* out, const float* v, const float* h,
                                       unsigned long long cols) {
    unsigned long long j = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    unsigned long long i = blockIdx.y;
    if (j < cols) out[i * cols + j] = fabsf(v[i] - h[j]);
}
extern "C" __global__ void naive_rows(float* out, const float* v, const float* h,
                                      unsigned long long rows, unsigned long long cols) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i >= rows) return;
    float acc = fabsf(v[i] - h[0]);
    for (unsigned long long j = 1; j < cols; ++j) acc += fabsf(v[i] - h[j]);
    out[i] = acc;
}
"#;

type Res<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn arg(k: usize, default: usize) -> usize {
    std::env::args()
        .nth(k)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Data whose pair sums are exact in f32 in any order (quarters, small), so every
/// implementation must agree bit for bit.
fn data(n: usize, mul: usize, modulus: usize) -> Vec<f32> {
    (0..n).map(|i| (i * mul % modulus) as f32 * 0.25).collect()
}

/// Milliseconds per call of `f` over `reps` calls, after `sync` waits for the device.
fn per_call(reps: usize, mut f: impl FnMut() -> Res<()>, sync: impl Fn() -> Res<()>) -> Res<f64> {
    f()?;
    sync()?;
    let t = Instant::now();
    for _ in 0..reps {
        f()?;
    }
    sync()?;
    Ok(t.elapsed().as_secs_f64() * 1e3 / reps as f64)
}

/// Every pair kernel form on CUDA against the cpu backend, at sizes compute-sanitizer
/// gets through quickly.
fn check_forms() -> Res<()> {
    let cuda = Backend::Cuda;
    for (rows, cols, k) in [(300, 129, 1), (37, 1000, 3), (3, 5000, 2), (5000, 3, 4)] {
        let (v, h) = (
            Vector::from(data(rows, 37, 1000)),
            Vector::from(data(cols, 91, 777)),
        );
        let (mut m, mut want) = (Matrix::zeroed(rows, cols), Matrix::zeroed(rows, cols));
        MapPairs::new(dist)
            .backend(cuda)
            .streams(k)
            .run(&v, &h, &mut m)?;
        MapPairs::new(dist)
            .backend(Backend::Cpu)
            .run(&v, &h, &mut want)?;
        assert_eq!(m, want, "MapPairs {rows}x{cols} k={k}");
        let s = MapPairsReduce::new(dist, add);
        let (mut got, mut want) = (Vector::zeroed(rows), Vector::zeroed(rows));
        s.backend(cuda).streams(k).run_rows(&v, &h, &mut got)?;
        s.backend(Backend::Cpu).run_rows(&v, &h, &mut want)?;
        assert_eq!(got, want, "rows {rows}x{cols} k={k}");
        let (mut got, mut want) = (Vector::zeroed(cols), Vector::zeroed(cols));
        s.backend(cuda).streams(k).run_cols(&v, &h, &mut got)?;
        s.backend(Backend::Cpu).run_cols(&v, &h, &mut want)?;
        assert_eq!(got, want, "cols {rows}x{cols} k={k}");
    }
    println!("pairs_probe: every form matches the cpu backend");
    Ok(())
}

fn main() -> Res<()> {
    let (n, reps) = (arg(1, 8192), arg(2, 20));
    Backend::Cuda.check()?;
    check_forms()?;
    if reps == 0 {
        return Ok(());
    }
    let (hv, hh) = (data(n, 37, 1000), data(n, 91, 777));
    let (v, h) = (Vector::from(hv.clone()), Vector::from(hh.clone()));
    let mut m: Matrix<f32> = Matrix::zeroed(n, n);
    let mut per_v: Vector<f32> = Vector::zeroed(n);
    let sync = || skel::debug::synchronize().map_err(Into::into);
    let pairs = MapPairs::new(dist).backend(Backend::Cuda).download(false);
    let t_pairs = per_call(reps, || Ok(pairs.run(&v, &h, &mut m)?), sync)?;
    let rows = MapPairsReduce::new(dist, add)
        .backend(Backend::Cuda)
        .download(false);
    let t_rows = per_call(reps, || Ok(rows.run_rows(&v, &h, &mut per_v)?), sync)?;

    let ctx = CudaContext::new(0)?;
    let stream = ctx.default_stream();
    let opts = CompileOptions {
        fmad: Some(false),
        ..Default::default()
    };
    let module = ctx.load_module(compile_ptx_with_opts(NAIVE, opts)?)?;
    let (f_pairs, f_rows) = (
        module.load_function("naive_pairs")?,
        module.load_function("naive_rows")?,
    );
    let (dv, dh) = (stream.clone_htod(&hv)?, stream.clone_htod(&hh)?);
    let mut dm = stream.alloc_zeros::<f32>(n * n)?;
    let mut dr = stream.alloc_zeros::<f32>(n)?;
    let n64 = n as u64;
    let sync_naive = || stream.synchronize().map_err(Into::into);
    let t_naive = per_call(
        reps,
        || {
            let cfg = LaunchConfig {
                grid_dim: (n.div_ceil(256) as u32, n as u32, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut b = stream.launch_builder(&f_pairs);
            b.arg(&mut dm).arg(&dv).arg(&dh).arg(&n64);
            // SAFETY: the kernel's parameters are exactly these; it writes n * n floats of
            // `dm` and reads n of `dv` and `dh`, all allocated above with those lengths.
            unsafe { b.launch(cfg) }?;
            Ok(())
        },
        sync_naive,
    )?;
    let t_naive_rows = per_call(
        reps,
        || {
            let cfg = LaunchConfig {
                grid_dim: (n.div_ceil(256) as u32, 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut b = stream.launch_builder(&f_rows);
            b.arg(&mut dr).arg(&dv).arg(&dh).arg(&n64).arg(&n64);
            // SAFETY: as above: n floats written to `dr`, n read from `dv` and `dh`.
            unsafe { b.launch(cfg) }?;
            Ok(())
        },
        sync_naive,
    )?;
    assert_eq!(
        stream.clone_dtoh(&dm)?,
        m.to_vec(),
        "MapPairs = naive kernel"
    );
    assert_eq!(
        stream.clone_dtoh(&dr)?,
        per_v.to_vec(),
        "MapPairsReduce = naive kernel"
    );

    let gbps = |ms: f64| (n * n * 4) as f64 / (ms * 1e6);
    println!("pairs_probe: {n} x {n} f32, device-resident, mean of {reps} calls");
    println!(
        "map_pairs skel          {t_pairs:8.3} ms  {:6.0} GB/s written",
        gbps(t_pairs)
    );
    println!(
        "map_pairs naive         {t_naive:8.3} ms  {:6.0} GB/s written",
        gbps(t_naive)
    );
    println!(
        "map_pairs_reduce skel   {t_rows:8.3} ms  {:6.1} Gpairs/s",
        (n * n) as f64 / (t_rows * 1e6)
    );
    println!(
        "map_pairs_reduce naive  {t_naive_rows:8.3} ms  {:6.1} Gpairs/s",
        (n * n) as f64 / (t_naive_rows * 1e6)
    );
    println!(
        "skel / naive time: map_pairs {:.3}, rows {:.3}",
        t_pairs / t_naive,
        t_rows / t_naive_rows
    );
    Ok(())
}
