//! MapOverlap on the GPU, side by side in one process, device-resident: skel CUDA and skel
//! OpenCL against a naive hand-written CUDA C stencil of the same computation (one thread
//! per output, global loads, compiled with NVRTC through cudarc) and the d2d copy bound
//! (`cuMemcpyDtoD` of the same bytes). 1D radius 1, 2, 4 over vectors and 2D 3x3, 5x5, 9x9
//! over square matrices, 2^16 .. 2^28 `f32`, `Edge::Duplicate`. GB/s count the input read
//! once and the output written once; every skel result is checked against the hand-written
//! one.
//!
//! ```text
//! cargo bench --features "cuda opencl" --bench stencil                 # 2^16, 2^18 .. 2^28
//! cargo bench --features "cuda opencl" --bench stencil -- --quick      # 2^16, 2^20, 2^24
//! cargo bench --features "cuda opencl" --bench stencil -- --log2 20,28 --only 2d
//! ```
//!
//! After the table, the cost of issuing a call: microseconds per back-to-back call on 2^10
//! elements (a kernel of a few microseconds), skel CUDA MapOverlap 1D and 2D next to a skel
//! Map of the same data and the hand-written stencil's bare launch.
//! `SKEL_STENCIL=tiled|direct|capped|uncapped` forces the CUDA kernel (see docs/configuration.md).
//!
//! A time is per call: the best of `--reps` batches of back-to-back calls (about 2 ms of
//! work each), each batch ended by one synchronisation, so it includes each side's cost of
//! issuing a call (small next to the kernel from about 2^20 elements up). The OpenCL side
//! runs on the platform `SKEL_OPENCL_DEVICE` picks (NVIDIA's, for a comparison on one
//! GPU). Without a CUDA device it prints "skipped: no CUDA device" and exits 0.

mod common;
#[path = "common/hand.rs"]
mod hand;

use hand::{per_call, skel_sync, Args, DevBuf, Hand, Res};
use skel::prelude::*;

#[userfn]
fn blur1(w: Window<f32>) -> f32 {
    (w[-1] + w[0] + w[1]) / 3.0
}

#[userfn]
fn blur2(w: Window<f32>) -> f32 {
    (w[-2] + w[-1] + w[0] + w[1] + w[2]) / 5.0
}

#[userfn]
fn blur4(w: Window<f32>) -> f32 {
    (w[-4] + w[-3] + w[-2] + w[-1] + w[0] + w[1] + w[2] + w[3] + w[4]) / 9.0
}

#[userfn]
fn box3(w: Window2<f32>) -> f32 {
    (w[(-1, -1)]
        + w[(-1, 0)]
        + w[(-1, 1)]
        + w[(0, -1)]
        + w[(0, 0)]
        + w[(0, 1)]
        + w[(1, -1)]
        + w[(1, 0)]
        + w[(1, 1)])
        / 9.0
}

#[userfn]
fn box5(w: Window2<f32>) -> f32 {
    (w[(-2, -2)]
        + w[(-2, -1)]
        + w[(-2, 0)]
        + w[(-2, 1)]
        + w[(-2, 2)]
        + w[(-1, -2)]
        + w[(-1, -1)]
        + w[(-1, 0)]
        + w[(-1, 1)]
        + w[(-1, 2)]
        + w[(0, -2)]
        + w[(0, -1)]
        + w[(0, 0)]
        + w[(0, 1)]
        + w[(0, 2)]
        + w[(1, -2)]
        + w[(1, -1)]
        + w[(1, 0)]
        + w[(1, 1)]
        + w[(1, 2)]
        + w[(2, -2)]
        + w[(2, -1)]
        + w[(2, 0)]
        + w[(2, 1)]
        + w[(2, 2)])
        / 25.0
}

#[userfn]
fn box9(w: Window2<f32>) -> f32 {
    (w[(-4, -4)]
        + w[(-4, -3)]
        + w[(-4, -2)]
        + w[(-4, -1)]
        + w[(-4, 0)]
        + w[(-4, 1)]
        + w[(-4, 2)]
        + w[(-4, 3)]
        + w[(-4, 4)]
        + w[(-3, -4)]
        + w[(-3, -3)]
        + w[(-3, -2)]
        + w[(-3, -1)]
        + w[(-3, 0)]
        + w[(-3, 1)]
        + w[(-3, 2)]
        + w[(-3, 3)]
        + w[(-3, 4)]
        + w[(-2, -4)]
        + w[(-2, -3)]
        + w[(-2, -2)]
        + w[(-2, -1)]
        + w[(-2, 0)]
        + w[(-2, 1)]
        + w[(-2, 2)]
        + w[(-2, 3)]
        + w[(-2, 4)]
        + w[(-1, -4)]
        + w[(-1, -3)]
        + w[(-1, -2)]
        + w[(-1, -1)]
        + w[(-1, 0)]
        + w[(-1, 1)]
        + w[(-1, 2)]
        + w[(-1, 3)]
        + w[(-1, 4)]
        + w[(0, -4)]
        + w[(0, -3)]
        + w[(0, -2)]
        + w[(0, -1)]
        + w[(0, 0)]
        + w[(0, 1)]
        + w[(0, 2)]
        + w[(0, 3)]
        + w[(0, 4)]
        + w[(1, -4)]
        + w[(1, -3)]
        + w[(1, -2)]
        + w[(1, -1)]
        + w[(1, 0)]
        + w[(1, 1)]
        + w[(1, 2)]
        + w[(1, 3)]
        + w[(1, 4)]
        + w[(2, -4)]
        + w[(2, -3)]
        + w[(2, -2)]
        + w[(2, -1)]
        + w[(2, 0)]
        + w[(2, 1)]
        + w[(2, 2)]
        + w[(2, 3)]
        + w[(2, 4)]
        + w[(3, -4)]
        + w[(3, -3)]
        + w[(3, -2)]
        + w[(3, -1)]
        + w[(3, 0)]
        + w[(3, 1)]
        + w[(3, 2)]
        + w[(3, 3)]
        + w[(3, 4)]
        + w[(4, -4)]
        + w[(4, -3)]
        + w[(4, -2)]
        + w[(4, -1)]
        + w[(4, 0)]
        + w[(4, 1)]
        + w[(4, 2)]
        + w[(4, 3)]
        + w[(4, 4)])
        / 81.0
}

/// The naive kernels: one thread per output, every window element read from global memory
/// (through L1), borders clamped (`Edge::Duplicate`); sums in the user functions' order.
const HAND: &str = r#"
template <int R>
__device__ void st1(const float* in, float* out, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = 0.0f;
#pragma unroll
    for (int d = -R; d <= R; ++d) {
        long long j = i + d;
        j = j < 0 ? 0 : (j >= n ? n - 1 : j);
        s = d == -R ? in[j] : s + in[j];
    }
    out[i] = s / (float)(2 * R + 1);
}

template <int R>
__device__ void st2(const float* in, float* out, long long rows, long long cols) {
    long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    long long r = blockIdx.y * (long long)blockDim.y + threadIdx.y;
    if (r >= rows || c >= cols) return;
    float s = 0.0f;
#pragma unroll
    for (int di = -R; di <= R; ++di) {
        long long i = r + di;
        i = i < 0 ? 0 : (i >= rows ? rows - 1 : i);
#pragma unroll
        for (int dj = -R; dj <= R; ++dj) {
            long long j = c + dj;
            j = j < 0 ? 0 : (j >= cols ? cols - 1 : j);
            s = (di == -R && dj == -R) ? in[i * cols + j] : s + in[i * cols + j];
        }
    }
    out[r * cols + c] = s / (float)((2 * R + 1) * (2 * R + 1));
}

extern "C" __global__ void st1_r1(const float* in, float* out, long long n) { st1<1>(in, out, n); }
extern "C" __global__ void st1_r2(const float* in, float* out, long long n) { st1<2>(in, out, n); }
extern "C" __global__ void st1_r4(const float* in, float* out, long long n) { st1<4>(in, out, n); }
extern "C" __global__ void st2_r1(const float* in, float* out, long long rows, long long cols) { st2<1>(in, out, rows, cols); }
extern "C" __global__ void st2_r2(const float* in, float* out, long long rows, long long cols) { st2<2>(in, out, rows, cols); }
extern "C" __global__ void st2_r4(const float* in, float* out, long long rows, long long cols) { st2<4>(in, out, rows, cols); }
"#;

struct Options {
    log2: Vec<u32>,
    reps: usize,
    one_d: bool,
    two_d: bool,
}

/// MapOverlap on CUDA / OpenCL against a hand-written CUDA C stencil and the copy bound.
#[derive(clap::Parser, Debug)]
struct Cli {
    /// Sizes 2^16, 2^20, 2^24 and three repetitions.
    #[arg(long)]
    quick: bool,
    /// Sizes as powers of two, comma-separated (default 16,18,..,28).
    #[arg(long, value_delimiter = ',')]
    log2: Vec<u32>,
    /// Repetitions per row (default 5).
    #[arg(long)]
    reps: Option<usize>,
    /// Only the 1D or the 2D stencils: `1d` or `2d`.
    #[arg(long, value_parser = ["1d", "2d"])]
    only: Option<String>,
    #[command(flatten)]
    cargo: common::args::Cargo,
}

fn options() -> Res<Options> {
    let mut o = Options {
        log2: (16..=28).step_by(2).collect(),
        reps: 5,
        one_d: true,
        two_d: true,
    };
    let args: Cli = clap::Parser::parse();
    if args.quick {
        (o.log2, o.reps) = (vec![16, 20, 24], 3);
    }
    if !args.log2.is_empty() {
        o.log2 = args.log2;
    }
    if let Some(reps) = args.reps {
        o.reps = reps.max(1);
    }
    match args.only.as_deref() {
        None => {}
        Some("1d") => o.two_d = false,
        Some("2d") => o.one_d = false,
        Some(other) => return Err(format!("--only 1d or 2d, not {other:?}")),
    }
    if let Some(&bad) = o.log2.iter().find(|&&l| !(2..=30).contains(&l)) {
        return Err(format!("--log2 {bad}: sizes from 2^2 to 2^30"));
    }
    Ok(o)
}

#[userfn]
fn half(a: f32) -> f32 {
    a * 0.5
}

/// Microseconds per back-to-back CUDA call on 2^10 elements: where the host's cost of
/// issuing a call shows (the kernels take a few microseconds).
fn host_cost(h: &Hand, o: &Options, probe: &Vector<f32>) -> Res<()> {
    const N: usize = 1 << 10;
    let calls = 2000;
    let host = common::data(N, 3);
    let v = Vector::from(host.clone());
    let m = Matrix::from_vec(32, 32, host.clone()).map_err(|e| e.to_string())?;
    let mut out: Vector<f32> = Vector::zeroed(N);
    let mut mout: Matrix<f32> = Matrix::zeroed(32, 32);
    let (inp, dst) = (DevBuf::from(&host)?, DevBuf::new(4 * N)?);
    let us = |t: f64| format!("{:.2}", t * 1e6);
    let skel = |r: skel::Result<()>| r.map_err(|e| e.to_string());
    let cuda = Backend::Cuda;
    let overlap1 = MapOverlap::new(blur1, 1).backend(cuda).download(false);
    let overlap2 = MapOverlap::new(box3, (1, 1))
        .edge(Edge::Duplicate)
        .backend(cuda)
        .download(false);
    let map = Map::new(half).backend(cuda).download(false);
    let sync = || skel_sync(cuda, probe);
    let rows = [
        (
            "skel MapOverlap 1D radius 1",
            per_call(o.reps, calls, || skel(overlap1.run(&v, &mut out)), sync)?,
        ),
        (
            "skel MapOverlap 2D 3x3 (32 x 32)",
            per_call(o.reps, calls, || skel(overlap2.run(&m, &mut mout)), sync)?,
        ),
        (
            "skel Map x * 0.5",
            per_call(o.reps, calls, || skel(map.run(&v, &mut out)), sync)?,
        ),
        (
            "hand-written 1D radius 1 (cuLaunchKernel)",
            per_call(
                o.reps,
                calls,
                || {
                    let a = Args::default().push(inp.ptr).push(dst.ptr).push(N as u64);
                    h.launch("st1_r1", (4, 1), (256, 1), a)
                },
                || h.sync(),
            )?,
        ),
    ];
    println!("\n### Per call, 2^10 f32, back to back (µs)\n");
    println!("| call | µs |\n|---|---:|");
    for (what, t) in rows {
        println!("| {what} | {} |", us(t));
    }
    Ok(())
}

fn check(what: &str, got: &[f32], want: &[f32]) -> Res<()> {
    let bad = got
        .iter()
        .zip(want)
        .position(|(&g, &w)| (g - w).abs() > 1e-5 * w.abs().max(1.0) || g.is_nan());
    match bad {
        None if got.len() == want.len() => Ok(()),
        None => Err(format!("{what}: {} values, want {}", got.len(), want.len())),
        Some(i) => Err(format!(
            "{what}: [{i}] = {}, hand-written {}",
            got[i], want[i]
        )),
    }
}

/// One stencil at one size: `(skel cuda, skel opencl, hand, copy)` seconds per call, or
/// why a column is missing.
struct Row {
    name: String,
    n: usize,
    cells: [Res<f64>; 4],
}

impl Row {
    fn print(&self) {
        let gbs = |t: &Res<f64>| match t {
            Ok(t) => format!("{:.0}", 8.0 * self.n as f64 / t / 1e9),
            Err(_) => "-".into(),
        };
        let ratio = |a: &Res<f64>, b: &Res<f64>| match (a, b) {
            (Ok(a), Ok(b)) => format!("{:.2}", b / a),
            _ => "-".into(),
        };
        let [cuda, ocl, hand, copy] = &self.cells;
        println!(
            "| {} | 2^{} | {} | {} | {} | {} | {} | {} | {} | {} |",
            self.name,
            self.n.trailing_zeros(),
            gbs(cuda),
            gbs(ocl),
            gbs(hand),
            gbs(copy),
            ratio(cuda, copy),
            ratio(cuda, hand),
            ratio(ocl, copy),
            ratio(ocl, hand),
        );
        for (what, c) in ["skel cuda", "skel opencl", "hand", "copy"]
            .iter()
            .zip(&self.cells)
        {
            if let Err(e) = c {
                println!("|   {what}: {} | | | | | | | | | |", e.replace('\n', " "));
            }
        }
    }
}

/// What a row runs: the hand kernel's launch and the skel call (`true`: read the result
/// back).
struct Case<'a> {
    name: String,
    n: usize,
    hand: &'a dyn Fn(&Hand, &DevBuf, &DevBuf) -> Res<()>,
    skel: &'a mut dyn FnMut(Backend, bool) -> skel::Result<Option<Vec<f32>>>,
}

fn row(h: &Hand, o: &Options, host: &[f32], case: Case<'_>, probe: &Vector<f32>) -> Row {
    let n = case.n;
    let calls = ((1usize << 26) / n).clamp(3, 400);
    let bufs = DevBuf::from(host).and_then(|i| Ok((i, DevBuf::new(4 * n)?)));
    let (inp, out) = match bufs {
        Ok(b) => b,
        Err(e) => {
            let cells = [Err(e.clone()), Err(e.clone()), Err(e.clone()), Err(e)];
            return Row {
                name: case.name,
                n,
                cells,
            };
        }
    };
    let hand = per_call(o.reps, calls, || (case.hand)(h, &inp, &out), || h.sync());
    let want = out.to_vec::<f32>();
    let copy = per_call(o.reps, calls, || h.copy(&out, &inp, 4 * n), || h.sync());
    let mut timed = |b: Backend| -> Res<f64> {
        b.check().map_err(|e| e.to_string())?;
        let got = (case.skel)(b, true)
            .map_err(|e| e.to_string())?
            .unwrap_or_default();
        check(&case.name, &got, want.as_ref().map_err(|e| e.clone())?)?;
        let mut call = || (case.skel)(b, false).map(|_| ()).map_err(|e| e.to_string());
        per_call(o.reps, calls, &mut call, || skel_sync(b, probe))
    };
    let cuda = timed(Backend::Cuda);
    let ocl = timed(Backend::OpenCl);
    Row {
        name: case.name,
        n,
        cells: [cuda, ocl, hand, copy],
    }
}

fn main() {
    let o = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = Backend::Cuda.check() {
        println!("skipped: no CUDA device");
        eprintln!("({e})");
        return;
    }
    let h = match Hand::new(HAND) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let probe = Vector::from(vec![1.0f32; 4]);
    println!("### MapOverlap, device-resident, f32, Edge::Duplicate (GB/s: 8 bytes per element)\n");
    println!(
        "| stencil | elements | skel cuda GB/s | skel opencl GB/s | hand-written GB/s | \
         d2d copy GB/s | cuda / copy | cuda / hand | opencl / copy | opencl / hand |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for &log2 in &o.log2 {
        let n = 1usize << log2;
        let host = common::data(n, 7);
        if o.one_d {
            let v = Vector::from(host.clone());
            let mut out: Vector<f32> = Vector::zeroed(n);
            for r in [1usize, 2, 4] {
                let kernel = format!("st1_r{r}");
                let mut skel = |b: Backend, read: bool| {
                    match r {
                        1 => MapOverlap::new(blur1, 1)
                            .backend(b)
                            .download(false)
                            .run(&v, &mut out),
                        2 => MapOverlap::new(blur2, 2)
                            .backend(b)
                            .download(false)
                            .run(&v, &mut out),
                        _ => MapOverlap::new(blur4, 4)
                            .backend(b)
                            .download(false)
                            .run(&v, &mut out),
                    }?;
                    Ok(read.then(|| out.to_vec()))
                };
                let case = Case {
                    name: format!("1D radius {r}"),
                    n,
                    hand: &|h, i, out| {
                        let grid = (n.div_ceil(256) as u32, 1);
                        let a = Args::default().push(i.ptr).push(out.ptr).push(n as u64);
                        h.launch(&kernel, grid, (256, 1), a)
                    },
                    skel: &mut skel,
                };
                row(&h, &o, &host, case, &probe).print();
            }
        }
        if o.two_d && log2 % 2 == 0 {
            let side = 1usize << (log2 / 2);
            let m = match Matrix::from_vec(side, side, host.clone()) {
                Ok(m) => m,
                Err(e) => {
                    eprintln!("{e}");
                    continue;
                }
            };
            let mut out: Matrix<f32> = Matrix::zeroed(side, side);
            for r in [1usize, 2, 4] {
                let kernel = format!("st2_r{r}");
                let edge = Edge::Duplicate;
                let mut skel = |b: Backend, read: bool| {
                    match r {
                        1 => MapOverlap::new(box3, (1, 1))
                            .edge(edge)
                            .backend(b)
                            .download(false)
                            .run(&m, &mut out),
                        2 => MapOverlap::new(box5, (2, 2))
                            .edge(edge)
                            .backend(b)
                            .download(false)
                            .run(&m, &mut out),
                        _ => MapOverlap::new(box9, (4, 4))
                            .edge(edge)
                            .backend(b)
                            .download(false)
                            .run(&m, &mut out),
                    }?;
                    Ok(read.then(|| out.as_slice().to_vec()))
                };
                let case = Case {
                    name: format!("2D {0}x{0}", 2 * r + 1),
                    n,
                    hand: &|h, i, out| {
                        let grid = (side.div_ceil(32) as u32, side.div_ceil(8) as u32);
                        let a = Args::default()
                            .push(i.ptr)
                            .push(out.ptr)
                            .push(side as i64)
                            .push(side as i64);
                        h.launch(&kernel, grid, (32, 8), a)
                    },
                    skel: &mut skel,
                };
                row(&h, &o, &host, case, &probe).print();
            }
        }
    }
    if let Err(e) = host_cost(&h, &o, &probe) {
        println!("per-call cost: {e}");
    }
}
