//! Reduction loop nests (issue 24): the SkePU forms of matrix products, a min-plus product,
//! matrix-vector products and n-body as users write them, on every backend present, next to
//! hand-written baselines, in one run (own report, no criterion).
//!
//! ```text
//! cargo bench --bench loopnest                                   # CPU backends
//! cargo bench --features cuda,opencl --bench loopnest            # and the GPUs
//! cargo bench --bench loopnest -- --short                        # tiny sizes, results only (CI)
//! cargo bench --bench loopnest -- --only mmmult --repeat 5 --sizes 256,512
//! ```
//!
//! Baselines: on the CPU a hand-written ikj Rayon loop (rows in parallel; for each `l`, the
//! row of `b` scaled into the output row: contiguous and vectorised, and the same order of
//! accumulation per element as the user function, so its results equal skel's bit for bit);
//! on CUDA a naive kernel (one thread per output, the user function's loop) compiled with
//! skel's NVRTC options, and for matrix-vector products the memory bound (a hand kernel
//! streaming the matrix once; skel's GPU rows give their ratio to it). Peers (torch.mm / torch.mv, TF32 off; torch CPU) are
//! `benches/peers/loopnest_peers.py`, run beside this. GPU series are device-resident: the
//! operands stay on the device and the output is not read inside the timed calls.
//! Every skel result is compared with the hand loop's (or the cpu backend's) before timing.

#![allow(clippy::needless_range_loop)]

#[cfg(feature = "cuda")]
#[path = "common/hand.rs"]
mod hand;

use std::time::Instant;

use rayon::prelude::*;
use skel::prelude::*;

#[path = "common/args.rs"]
mod args;

type Res<T> = std::result::Result<T, String>;

// ---- user functions, as users write them -------------------------------------------------

#[userfn]
fn mmmult(#[index] (i, j): (usize, usize), a: Mat<f32>, b: Mat<f32>) -> f32 {
    let mut sum = 0.0f32;
    for l in 0..a.cols() {
        sum += a[(i, l)] * b[(l, j)];
    }
    sum
}

#[userfn]
fn min_plus(#[index] (i, j): (usize, usize), a: Mat<f32>, b: Mat<f32>) -> f32 {
    let mut d = f32::INFINITY;
    for l in 0..a.cols() {
        d = d.min(a[(i, l)] + b[(l, j)]);
    }
    d
}

#[userfn]
fn mvmult(#[index] i: usize, a: Mat<f32>, x: &[f32]) -> f32 {
    let mut s = 0.0f32;
    for j in 0..a.cols() {
        s += a[(i, j)] * x[j];
    }
    s
}

/// PolyBench bicg's `s = A^T r`.
#[userfn]
fn bicg_s(#[index] j: usize, a: Mat<f32>, r: &[f32]) -> f32 {
    let mut s = 0.0f32;
    for i in 0..a.rows() {
        s += r[i] * a[(i, j)];
    }
    s
}

#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
struct Body {
    x: f32,
    y: f32,
    z: f32,
    m: f32,
}

/// n-body as users write it: a `u32` count and `bodies[j as usize]`.
#[userfn]
fn accel_user(p: Body, bodies: &[Body], #[uniform] n: u32) -> f32 {
    let mut ax = 0.0f32;
    for j in 0..n {
        let q = bodies[j as usize];
        let dx = q.x - p.x;
        let dy = q.y - p.y;
        let dz = q.z - p.z;
        let d2 = dx * dx + dy * dy + dz * dz + 0.01;
        let inv = 1.0 / d2.sqrt();
        ax += dx * q.m * (inv * inv * inv);
    }
    ax
}

/// The same, in the form the all-pairs tiling was first written for.
#[userfn]
fn accel_tiled(p: Body, bodies: &[Body], #[uniform] n: u32) -> f32 {
    let mut ax = 0.0f32;
    for j in 0..n as usize {
        let q = bodies[j];
        let dx = q.x - p.x;
        let dy = q.y - p.y;
        let dz = q.z - p.z;
        let d2 = dx * dx + dy * dy + dz * dz + 0.01;
        let inv = 1.0 / d2.sqrt();
        ax += dx * q.m * (inv * inv * inv);
    }
    ax
}

// ---- set-up ------------------------------------------------------------------------------

struct Config {
    short: bool,
    repeat: usize,
    only: Option<String>,
    /// `--sizes 256,512`: the matrix sizes of the products and matrix-vector products
    /// instead of the defaults.
    sizes: Option<Vec<usize>>,
}

/// Loop nests (products, matrix-vector, n-body) against hand-written code and peers.
#[derive(clap::Parser, Debug)]
struct Args {
    /// Small sizes, one repetition (CI).
    #[arg(long)]
    short: bool,
    /// Repetitions per row (default 1 short, 5 full).
    #[arg(long)]
    repeat: Option<usize>,
    /// Only the rows whose name contains this word.
    #[arg(long)]
    only: Option<String>,
    /// Matrix sizes of the products and matrix-vector products, comma-separated.
    #[arg(long, value_delimiter = ',')]
    sizes: Option<Vec<usize>>,
    #[command(flatten)]
    cargo: args::Cargo,
}

impl Config {
    fn from_args() -> Config {
        let args: Args = clap::Parser::parse();
        let short = args.short;
        let repeat = args.repeat.unwrap_or(if short { 1 } else { 5 });
        Config {
            short,
            repeat: repeat.max(1),
            only: args.only,
            sizes: args.sizes,
        }
    }

    fn wants(&self, what: &str) -> bool {
        self.only
            .as_ref()
            .map_or(true, |o| what.contains(o.as_str()))
    }
}

fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

fn backends() -> Vec<Backend> {
    let available = Backend::available();
    [Backend::Cpu, Backend::Rayon, Backend::OpenCl, Backend::Cuda]
        .into_iter()
        .filter(|b| available.contains(b))
        .collect()
}

/// Waits for every device call in flight (a device call returns once it is queued).
fn sync() -> Res<()> {
    skel::tune::synchronize().map_err(|e| e.to_string())
}

/// Median seconds of `repeat` calls of `f` (one warm-up call first).
fn median(repeat: usize, mut f: impl FnMut() -> Res<()>) -> Res<f64> {
    f()?;
    let mut t: Vec<f64> = (0..repeat)
        .map(|_| {
            let s = Instant::now();
            f().map(|_| s.elapsed().as_secs_f64())
        })
        .collect::<Res<_>>()?;
    t.sort_by(f64::total_cmp);
    Ok(t[t.len() / 2])
}

fn row(what: &str, size: &str, series: &str, secs: f64, work: f64, unit: &str, vs: Option<f64>) {
    let ratio = vs.map_or(String::new(), |b| format!("{:>8.3}", b / secs));
    println!(
        "{what:<22} {size:>16} {series:<14} {:>11.3} ms {:>9.1} {unit} {ratio}",
        secs * 1e3,
        work / secs / 1e9
    );
}

fn same(what: &str, got: &[f32], want: &[f32]) -> Res<()> {
    let bad = got
        .iter()
        .zip(want)
        .position(|(g, w)| g.to_bits() != w.to_bits());
    match (got.len() == want.len(), bad) {
        (true, None) => Ok(()),
        (_, Some(k)) => Err(format!(
            "{what}: element {k} is {}, the baseline {}",
            got[k], want[k]
        )),
        _ => Err(format!(
            "{what}: {} elements, the baseline {}",
            got.len(),
            want.len()
        )),
    }
}

// ---- hand-written baselines --------------------------------------------------------------

/// ikj over rows in parallel: `out[i, j] = step(out[i, j], a[i, l], b[l, j])` for l
/// ascending, j contiguous.
fn hand_ikj(
    a: &[f32],
    b: &[f32],
    (m, k, n): (usize, usize, usize),
    init: f32,
    step: impl Fn(f32, f32, f32) -> f32 + Sync,
) -> Vec<f32> {
    let mut out = vec![init; m * n];
    out.par_chunks_mut(n.max(1))
        .enumerate()
        .for_each(|(i, row)| {
            for l in 0..k {
                let x = a[i * k + l];
                let brow = &b[l * n..(l + 1) * n];
                for (o, &y) in row.iter_mut().zip(brow) {
                    *o = step(*o, x, y);
                }
            }
        });
    out
}

#[cfg(feature = "cuda")]
const NAIVE: &str = r#"
extern "C" __global__ void naive_mm(float* out, const float* a, const float* b, unsigned long long m, unsigned long long k, unsigned long long n) {
    unsigned long long j = blockIdx.x * 16ull + threadIdx.x, i = blockIdx.y * 16ull + threadIdx.y;
    if (i >= m || j >= n) return;
    float s = 0.0f;
    for (unsigned long long l = 0; l < k; ++l) s += a[i * k + l] * b[l * n + j];
    out[i * n + j] = s;
}
extern "C" __global__ void naive_mv(float* out, const float* a, const float* x, unsigned long long m, unsigned long long k) {
    unsigned long long i = blockIdx.x * 256ull + threadIdx.x;
    if (i >= m) return;
    float s = 0.0f;
    for (unsigned long long l = 0; l < k; ++l) s += a[i * k + l] * x[l];
    out[i] = s;
}
// The memory bound of a matrix-vector product: the matrix streamed once, 16-byte loads,
// four in flight per thread; the sum is kept only so that the loads are not dropped.
extern "C" __global__ void read_bound(float* out, const float4* a, unsigned long long n4) {
    unsigned long long i = blockIdx.x * 1024ull + threadIdx.x;
    float4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = i + u * 256 < n4 ? a[i + u * 256] : make_float4(0.f, 0.f, 0.f, 0.f);
    float s = 0.0f;
#pragma unroll
    for (int u = 0; u < 4; ++u) s += v[u].x + v[u].y + v[u].z + v[u].w;
    if (s == 1234.5f) out[0] = s;
}
"#;

/// The time to stream a `rows x cols` f32 matrix once (the memory bound of a
/// matrix-vector product), by a hand kernel in the same process.
#[cfg(feature = "cuda")]
fn read_bound_cuda(cfg: &Config, a: &[f32]) -> Res<f64> {
    use hand::{Args, DevBuf, Hand};
    let h = Hand::new(NAIVE)?;
    let da = DevBuf::from(a)?;
    let out = DevBuf::new(4)?;
    let n4 = a.len() / 4;
    median(cfg.repeat, || {
        let args = Args::default().push(out.ptr).push(da.ptr).push(n4 as u64);
        h.launch(
            "read_bound",
            (n4.div_ceil(1024).max(1) as u32, 1),
            (256, 1),
            args,
        )?;
        h.sync()
    })
}

/// The naive CUDA kernel's time for `(m, k, n)` (`n == 0`: matrix-vector), its result.
#[cfg(feature = "cuda")]
fn naive_cuda(
    cfg: &Config,
    a: &[f32],
    b: &[f32],
    (m, k, n): (usize, usize, usize),
) -> Res<(f64, Vec<f32>)> {
    use hand::{Args, DevBuf, Hand};
    let h = Hand::new(NAIVE)?;
    let (da, db) = (DevBuf::from(a)?, DevBuf::from(b)?);
    let outs = if n == 0 { m } else { m * n };
    let out = DevBuf::new(outs * 4)?;
    let go = || {
        if n == 0 {
            let args = Args::default()
                .push(out.ptr)
                .push(da.ptr)
                .push(db.ptr)
                .push(m as u64)
                .push(k as u64);
            h.launch("naive_mv", (m.div_ceil(256) as u32, 1), (256, 1), args)?;
        } else {
            let args = Args::default()
                .push(out.ptr)
                .push(da.ptr)
                .push(db.ptr)
                .push(m as u64)
                .push(k as u64)
                .push(n as u64);
            h.launch(
                "naive_mm",
                (n.div_ceil(16) as u32, m.div_ceil(16) as u32),
                (16, 16),
                args,
            )?;
        }
        h.sync()
    };
    let t = median(cfg.repeat, go)?;
    Ok((t, out.to_vec::<f32>()?))
}

// ---- the workloads -----------------------------------------------------------------------

/// Whether `b` runs size `n` of an O(n^3) workload in reasonable time: the sequential
/// backend up to 512, Rayon up to 1024, the GPUs everything.
fn fits(b: Backend, n: usize) -> bool {
    match b {
        Backend::Cpu => n <= 512,
        Backend::Rayon => n <= 1024,
        _ => true,
    }
}

fn product(cfg: &Config, name: &str, n: usize, min_plus_form: bool) -> Res<()> {
    let (a, b) = (
        Matrix::from_vec(n, n, data(n * n, 1)).map_err(|e| e.to_string())?,
        Matrix::from_vec(n, n, data(n * n, 2)).map_err(|e| e.to_string())?,
    );
    let flops = 2.0 * (n as f64).powi(3);
    let size = format!("{n}x{n}x{n}");
    // A closure per form (not a function pointer): the hand loop inlines and vectorises it.
    let hand = || {
        if min_plus_form {
            hand_ikj(
                a.as_slice(),
                b.as_slice(),
                (n, n, n),
                f32::INFINITY,
                |o, x, y| o.min(x + y),
            )
        } else {
            hand_ikj(a.as_slice(), b.as_slice(), (n, n, n), 0.0, |o, x, y| {
                o + x * y
            })
        }
    };
    let s = Instant::now();
    let want = hand();
    let hand_t = if n <= 1024 || cfg.repeat == 1 {
        median(cfg.repeat, || {
            std::hint::black_box(hand());
            Ok(())
        })?
    } else {
        s.elapsed().as_secs_f64()
    };
    row(
        name,
        &size,
        "hand-ikj-rayon",
        hand_t,
        flops,
        "GFLOP/s",
        None,
    );
    #[cfg(feature = "cuda")]
    let naive = if !min_plus_form && Backend::Cuda.check().is_ok() {
        let (t, got) = naive_cuda(cfg, a.as_slice(), b.as_slice(), (n, n, n))?;
        same("naive CUDA", &got, &want)?;
        row(name, &size, "naive-cuda", t, flops, "GFLOP/s", Some(hand_t));
        Some(t)
    } else {
        None
    };
    #[cfg(not(feature = "cuda"))]
    let naive: Option<f64> = None;
    for be in backends().into_iter().filter(|&b| fits(b, n)) {
        let mut c = Matrix::zeroed(n, n);
        let call = |c: &mut Matrix<f32>| {
            let r = if min_plus_form {
                Map::new(min_plus).arrays((&a, &b)).backend(be).run_index(c)
            } else {
                Map::new(mmmult).arrays((&a, &b)).backend(be).run_index(c)
            };
            r.map_err(|e| e.to_string())
        };
        call(&mut c)?;
        same(&format!("{name} skel-{be}"), c.as_slice(), &want)?;
        let t = median(cfg.repeat, || {
            call(&mut c)?;
            sync()
        })?;
        // GPU rows: the ratio to the naive kernel; CPU rows: to the hand ikj loop.
        let base = if matches!(be, Backend::Cuda | Backend::OpenCl) {
            naive
        } else {
            Some(hand_t)
        };
        row(
            name,
            &size,
            &format!("skel-{be}"),
            t,
            flops,
            "GFLOP/s",
            base,
        );
    }
    Ok(())
}

fn matvec(cfg: &Config, rows: usize, cols: usize, transposed: bool) -> Res<()> {
    let a = Matrix::from_vec(rows, cols, data(rows * cols, 3)).map_err(|e| e.to_string())?;
    let len = if transposed { rows } else { cols };
    let x = Vector::from(data(len, 4));
    let xs = x.to_vec();
    let bytes = 4.0 * (rows * cols) as f64;
    let (name, outs) = if transposed {
        ("bicg s = A^T r", cols)
    } else {
        ("mvmult", rows)
    };
    let size = format!("{rows}x{cols}");
    let am = a.as_slice();
    // Hand Rayon: rows in parallel, each a sequential sum (mvmult); bicg as ikj over
    // row blocks would change the order, so its hand loop is per column, in parallel.
    let hand = || -> Vec<f32> {
        if transposed {
            let mut s = vec![0.0f32; cols];
            s.par_chunks_mut(64).enumerate().for_each(|(cb, chunk)| {
                for i in 0..rows {
                    let r = xs[i];
                    let arow = &am[i * cols + cb * 64..];
                    for (o, &v) in chunk.iter_mut().zip(arow) {
                        *o += r * v;
                    }
                }
            });
            s
        } else {
            (0..rows)
                .into_par_iter()
                .map(|i| {
                    let mut s = 0.0f32;
                    for (v, w) in am[i * cols..(i + 1) * cols].iter().zip(&xs) {
                        s += v * w;
                    }
                    s
                })
                .collect()
        }
    };
    let want = hand();
    let hand_t = median(cfg.repeat, || {
        std::hint::black_box(hand());
        Ok(())
    })?;
    row(name, &size, "hand-rayon", hand_t, bytes, "GB/s", None);
    #[cfg(feature = "cuda")]
    let naive = if !transposed && Backend::Cuda.check().is_ok() {
        let (t, got) = naive_cuda(cfg, am, &xs, (rows, cols, 0))?;
        same("naive CUDA", &got, &want)?;
        row(name, &size, "naive-cuda", t, bytes, "GB/s", Some(hand_t));
        Some(t)
    } else {
        None
    };
    #[cfg(not(feature = "cuda"))]
    let naive: Option<f64> = None;
    // GPU rows of the matrix-vector product: the ratio to the read bound where it ran
    // (the fraction of the memory bound reached), else to the naive kernel.
    #[cfg(feature = "cuda")]
    let gpu_base = if !transposed && Backend::Cuda.check().is_ok() {
        let t = read_bound_cuda(cfg, am)?;
        row(name, &size, "read-bound-cuda", t, bytes, "GB/s", naive);
        Some(t)
    } else {
        naive
    };
    #[cfg(not(feature = "cuda"))]
    let gpu_base = naive;
    for be in backends() {
        if be == Backend::Cpu && rows * cols > 1 << 26 {
            continue;
        }
        let mut y = Vector::zeroed(outs);
        let call = |y: &mut Vector<f32>| {
            let r = if transposed {
                Map::new(bicg_s).arrays((&a, &x)).backend(be).run_index(y)
            } else {
                Map::new(mvmult).arrays((&a, &x)).backend(be).run_index(y)
            };
            r.map_err(|e| e.to_string())
        };
        call(&mut y)?;
        same(&format!("{name} skel-{be}"), &y.to_vec(), &want)?;
        let t = median(cfg.repeat, || {
            call(&mut y)?;
            sync()
        })?;
        let base = if matches!(be, Backend::Cuda | Backend::OpenCl) {
            gpu_base
        } else {
            Some(hand_t)
        };
        row(name, &size, &format!("skel-{be}"), t, bytes, "GB/s", base);
    }
    Ok(())
}

fn nbody(cfg: &Config, n: usize) -> Res<()> {
    let d = data(4 * n, 5);
    let bodies = Vector::from_fn(n, |i| Body {
        x: d[4 * i],
        y: d[4 * i + 1],
        z: d[4 * i + 2],
        m: d[4 * i + 3].abs() + 0.1,
    });
    let inter = (n as f64) * (n as f64);
    let mut want = Vector::zeroed(n);
    // Rayon runs the same Rust per element as cpu (the oracle), in parallel.
    let oracle = if Backend::Rayon.check().is_ok() {
        Backend::Rayon
    } else {
        Backend::Cpu
    };
    MapArray::new(accel_tiled)
        .uniforms((n as u32,))
        .backend(oracle)
        .run(&bodies, &bodies, &mut want)
        .map_err(|e| e.to_string())?;
    let want = want.to_vec();
    for be in backends() {
        if matches!(be, Backend::Cpu | Backend::Rayon) && n > 8192 {
            continue;
        }
        let mut times = [0.0; 2];
        for (k, user_form) in [false, true].into_iter().enumerate() {
            let mut out = Vector::zeroed(n);
            let call = |out: &mut Vector<f32>| {
                let r = if user_form {
                    MapArray::new(accel_user)
                        .uniforms((n as u32,))
                        .backend(be)
                        .run(&bodies, &bodies, out)
                } else {
                    MapArray::new(accel_tiled)
                        .uniforms((n as u32,))
                        .backend(be)
                        .run(&bodies, &bodies, out)
                };
                r.map_err(|e| e.to_string())
            };
            call(&mut out)?;
            same(&format!("n-body skel-{be}"), &out.to_vec(), &want)?;
            times[k] = median(cfg.repeat, || {
                call(&mut out)?;
                sync()
            })?;
        }
        let size = format!("N={n}");
        row(
            "n-body (j in 0..n as usize)",
            &size,
            &format!("skel-{be}"),
            times[0],
            inter,
            "Gint/s",
            None,
        );
        row(
            "n-body (bodies[j as usize])",
            &size,
            &format!("skel-{be}"),
            times[1],
            inter,
            "Gint/s",
            Some(times[0]),
        );
    }
    Ok(())
}

fn main() {
    let cfg = Config::from_args();
    println!(
        "loopnest: {} threads, repeat {} (median), short={}; ratio column: baseline time / row time",
        rayon::current_num_threads(),
        cfg.repeat,
        cfg.short
    );
    println!(
        "{:<22} {:>16} {:<14} {:>14} {:>17} {:>8}",
        "workload", "size", "series", "time", "rate", "ratio"
    );
    let sizes: &[usize] = match &cfg.sizes {
        Some(s) => s,
        None if cfg.short => &[33, 129],
        None => &[512, 1024, 2048, 4096],
    };
    let mut failed = false;
    let mut run = |what: &str, f: &dyn Fn() -> Res<()>| {
        if cfg.wants(what) {
            if let Err(e) = f() {
                println!("{what}: FAILED: {e}");
                failed = true;
            }
        }
    };
    for &n in sizes {
        run("mmmult", &|| product(&cfg, "mmmult", n, false));
    }
    for &n in if cfg.short {
        &[65][..]
    } else {
        &[1024, 4096][..]
    } {
        run("min-plus", &|| product(&cfg, "min-plus", n, true));
    }
    let shapes: Vec<(usize, usize)> = match &cfg.sizes {
        Some(s) => s.iter().map(|&n| (n, n)).collect(),
        None if cfg.short => vec![(257, 129)],
        None => vec![(4096, 4096), (16384, 16384)],
    };
    for &(r, c) in &shapes {
        run("mvmult", &|| matvec(&cfg, r, c, false));
        run("bicg", &|| matvec(&cfg, r, c, true));
    }
    for &n in if cfg.short {
        &[1000][..]
    } else {
        &[8192, 32768][..]
    } {
        run("n-body", &|| nbody(&cfg, n));
    }
    if failed {
        std::process::exit(1);
    }
}
