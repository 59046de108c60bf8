//! Side by side, device-resident, in one process: every GPU backend of skel (CUDA, and
//! OpenCL when compiled in with a GPU device) next to a naive hand-written CUDA C kernel of
//! the same computation (compiled with NVRTC through cudarc, with the same floating-point
//! options as skel: `--fmad=false`, precise division and square root) and the
//! device-to-device copy bound (`cuMemcpyDtoD` of half the bytes the workload reads and
//! writes, so the copy moves the same bytes).
//!
//! ```text
//! cargo bench --features "cuda opencl" --bench kernels -- [options]
//!   --only a,b     run the workloads whose name contains one of these words
//!   --quick        small sizes (a smoke test: 2^20 vectors, 1024x1024 matrices, ...)
//!   --log2 N       1D sizes 2^N f32 (default 28)    --side N    2D stencils N x N (8192)
//!   --mandel N     Mandelbrot N x N (4096)          --pairs N   MapPairs N x N (8192)
//!   --bodies N,M   n-body bodies, one row per count (4096,32768)
//!   --reps N       timings per cell, best taken (default 10)
//!   --anatomy      also time the driver calls a small call is made of
//! ```
//!
//! `SKEL_LAUNCH=memory|compute` (read by skel) forces the launch class of skel's CUDA Map
//! kernels, to measure the classification against both shapes: run the bench once with
//! each (e.g. `--only mandelbrot,nbody,transcendental,heavy`) and compare the rows; the
//! header line says which class was forced. The n-body rows come twice: against the naive
//! kernel and against the textbook shared-memory tiled one.
//!
//! Every call is device-resident: inputs are uploaded by a warm-up call, outputs stay on
//! the device, and each timing is the host time of one call followed by a synchronisation
//! of the device (best of `--reps`). The small-call rows are per call: a Reduce of 1000
//! f32 with its result read back (synchronous), and a Map of 1000 issued 2000 times then
//! synchronised once (asynchronous issue rate). Every skel result is checked against the
//! hand-written kernel's before it is timed; a row whose check fails says so.
//!
//! Output: one table (times, GB/s where the workload is memory-bound, ratios skel /
//! hand-written, > 1 is slower), then one `KERNELS {json}` line per row. The peers
//! (PyTorch, CuPy) are `benches/peers/kernels_peers.py`, run on the same machine.

mod common;
#[path = "common/hand.rs"]
mod hand;

use std::time::Instant;

use common::data;
use hand::{best, skel_sync as sync, Args, DevBuf, Hand, Res};
use skel::prelude::*;

// ---------------------------------------------------------------------------------------
// The skel user functions.

#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
struct Body {
    x: f32,
    y: f32,
    z: f32,
    m: f32,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
struct Acc {
    x: f32,
    y: f32,
    z: f32,
}

#[userfn]
fn mandel(
    #[index] (row, col): (usize, usize),
    #[uniform] scale: f32,
    #[uniform] iters: u32,
) -> u32 {
    let cx = col as f32 * scale - 2.0;
    let cy = row as f32 * scale - 1.5;
    let mut x = 0.0f32;
    let mut y = 0.0f32;
    let mut k = 0u32;
    while k < iters && x * x + y * y <= 4.0 {
        let xt = x * x - y * y + cx;
        y = 2.0 * x * y + cy;
        x = xt;
        k += 1;
    }
    k
}

#[userfn]
fn accel(#[index] i: usize, bodies: &[Body]) -> Acc {
    let p = bodies[i];
    let mut ax = 0.0f32;
    let mut ay = 0.0f32;
    let mut az = 0.0f32;
    // bounded by the array's length: `bodies[j]` is proven in range, read unclamped
    for j in 0..bodies.len() {
        let q = bodies[j];
        let dx = q.x - p.x;
        let dy = q.y - p.y;
        let dz = q.z - p.z;
        let d2 = dx * dx + dy * dy + dz * dz + 0.01;
        let inv = 1.0 / d2.sqrt();
        let s = q.m * (inv * inv * inv);
        ax += dx * s;
        ay += dy * s;
        az += dz * s;
    }
    Acc {
        x: ax,
        y: ay,
        z: az,
    }
}

#[userfn]
fn trig(x: f32) -> f32 {
    x.sin() * x.cos() + (0.5 * x).exp() + (1.0 + x).ln() + x.powf(1.5)
}

/// 32 transcendental calls: above skel's straight-line threshold (one element per thread).
#[userfn]
fn heavy32(x: f32) -> f32 {
    let a = x.sin().cos().exp().sin().cos().exp().sin().cos();
    let b = a.sin().cos().exp().sin().cos().exp().sin().cos();
    let c = b.sin().cos().exp().sin().cos().exp().sin().cos();
    c.sin().cos().exp().sin().cos().exp().sin().cos()
}

#[userfn]
fn dist(p: f32, q: f32) -> f32 {
    (p - q).abs()
}

#[userfn]
fn box1(w: Window<f32>) -> f32 {
    (w[-1] + w[0] + w[1]) / 3.0
}

#[userfn]
fn box2(w: Window<f32>) -> f32 {
    (w[-2] + w[-1] + w[0] + w[1] + w[2]) / 5.0
}

#[userfn]
fn box4(w: Window<f32>) -> f32 {
    (w[-4] + w[-3] + w[-2] + w[-1] + w[0] + w[1] + w[2] + w[3] + w[4]) / 9.0
}

#[userfn]
fn box3x3(w: Window2<f32>) -> f32 {
    let mut s = 0.0f32;
    let mut di: i32 = -1;
    while di <= 1 {
        let mut dj: i32 = -1;
        while dj <= 1 {
            s += w[(di as isize, dj as isize)];
            dj += 1;
        }
        di += 1;
    }
    s / 9.0
}

#[userfn]
fn box5x5(w: Window2<f32>) -> f32 {
    let mut s = 0.0f32;
    let mut di: i32 = -2;
    while di <= 2 {
        let mut dj: i32 = -2;
        while dj <= 2 {
            s += w[(di as isize, dj as isize)];
            dj += 1;
        }
        di += 1;
    }
    s / 25.0
}

#[userfn]
fn box9x9(w: Window2<f32>) -> f32 {
    let mut s = 0.0f32;
    let mut di: i32 = -4;
    while di <= 4 {
        let mut dj: i32 = -4;
        while dj <= 4 {
            s += w[(di as isize, dj as isize)];
            dj += 1;
        }
        di += 1;
    }
    s / 81.0
}

#[userfn]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

#[userfn]
fn mult(a: f32, b: f32) -> f32 {
    a * b
}

// ---------------------------------------------------------------------------------------
// The hand-written kernels: the straightforward CUDA C a programmer writes first (one
// element per thread, global memory only, clamped loads; grid-stride loops and one atomic
// per block for the reductions; three passes for the scan).

const HAND: &str = r#"
typedef unsigned long long u64;
struct Body { float x, y, z, m; };
struct Acc { float x, y, z; };

extern "C" __global__ void h_mandel(unsigned* out, u64 w, u64 h, float scale, unsigned iters) {
    u64 col = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    u64 row = (u64)blockIdx.y * blockDim.y + threadIdx.y;
    if (col >= w || row >= h) return;
    float cx = (float)col * scale - 2.0f, cy = (float)row * scale - 1.5f;
    float x = 0.0f, y = 0.0f;
    unsigned k = 0;
    while (k < iters && x * x + y * y <= 4.0f) {
        float xt = x * x - y * y + cx;
        y = 2.0f * x * y + cy;
        x = xt;
        ++k;
    }
    out[row * w + col] = k;
}

// The pull of q on p added to a, in the user function's order.
__device__ void interact(Body p, Body q, Acc& a) {
    float dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;
    float d2 = dx * dx + dy * dy + dz * dz + 0.01f;
    float inv = 1.0f / sqrtf(d2);
    float s = q.m * (inv * inv * inv);
    a.x += dx * s; a.y += dy * s; a.z += dz * s;
}

extern "C" __global__ void h_nbody(const Body* b, Acc* out, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Body p = b[i];
    Acc a = {0.0f, 0.0f, 0.0f};
    for (unsigned j = 0; j < n; ++j) {
        interact(p, b[j], a);
    }
    out[i] = a;
}

// The textbook shared-memory version: each block stages 256 bodies at a time; the same
// arithmetic in the same order as h_nbody.
extern "C" __global__ void h_nbody_tiled(const Body* b, Acc* out, unsigned n) {
    __shared__ Body tile[256];
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    Body p = b[i < n ? i : 0];
    Acc a = {0.0f, 0.0f, 0.0f};
    for (unsigned t = 0; t < n; t += 256) {
        if (t + threadIdx.x < n) tile[threadIdx.x] = b[t + threadIdx.x];
        __syncthreads();
        unsigned m = n - t < 256 ? n - t : 256;
        for (unsigned j = 0; j < m; ++j) {
            interact(p, tile[j], a);
        }
        __syncthreads();
    }
    if (i < n) out[i] = a;
}

// 32 transcendental calls per element: past skel's threshold for one element per thread.
extern "C" __global__ void h_heavy32(const float* in, float* out, u64 n) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = in[i];
    for (int k = 0; k < 4; ++k) x = cosf(sinf(expf(cosf(sinf(expf(cosf(sinf(x))))))));
    out[i] = x;
}

// MapPairs |v[i] - h[j]|: one thread per pair; MapPairsReduce rows: one thread per row.
extern "C" __global__ void h_pairs(float* out, const float* v, const float* h, u64 cols) {
    u64 j = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    u64 i = blockIdx.y;
    if (j < cols) out[i * cols + j] = fabsf(v[i] - h[j]);
}
extern "C" __global__ void h_pairs_rows(float* out, const float* v, const float* h, u64 rows, u64 cols) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows) return;
    float acc = fabsf(v[i] - h[0]);
    for (u64 j = 1; j < cols; ++j) acc += fabsf(v[i] - h[j]);
    out[i] = acc;
}

extern "C" __global__ void h_trig(const float* in, float* out, u64 n) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = in[i];
    out[i] = sinf(x) * cosf(x) + expf(0.5f * x) + logf(1.0f + x) + powf(x, 1.5f);
}

template <int R> __device__ void st1(const float* in, float* out, u64 n) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = 0.0f;
    for (int d = -R; d <= R; ++d) {
        long long j = (long long)i + d;
        j = j < 0 ? 0 : (j >= (long long)n ? (long long)n - 1 : j);
        s += in[j];
    }
    out[i] = s / (float)(2 * R + 1);
}
extern "C" __global__ void h_st1_r1(const float* in, float* out, u64 n) { st1<1>(in, out, n); }
extern "C" __global__ void h_st1_r2(const float* in, float* out, u64 n) { st1<2>(in, out, n); }
extern "C" __global__ void h_st1_r4(const float* in, float* out, u64 n) { st1<4>(in, out, n); }

template <int R> __device__ void st2(const float* in, float* out, long long rows, long long cols) {
    long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long r = (long long)blockIdx.y * blockDim.y + threadIdx.y;
    if (r >= rows || c >= cols) return;
    float s = 0.0f;
    for (int di = -R; di <= R; ++di) {
        long long rr = r + di;
        rr = rr < 0 ? 0 : (rr >= rows ? rows - 1 : rr);
        for (int dj = -R; dj <= R; ++dj) {
            long long cc = c + dj;
            cc = cc < 0 ? 0 : (cc >= cols ? cols - 1 : cc);
            s += in[rr * cols + cc];
        }
    }
    out[r * cols + c] = s / (float)((2 * R + 1) * (2 * R + 1));
}
extern "C" __global__ void h_st2_r1(const float* in, float* out, long long r, long long c) { st2<1>(in, out, r, c); }
extern "C" __global__ void h_st2_r2(const float* in, float* out, long long r, long long c) { st2<2>(in, out, r, c); }
extern "C" __global__ void h_st2_r4(const float* in, float* out, long long r, long long c) { st2<4>(in, out, r, c); }

__device__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}
// The sum of v over the block, valid in thread 0 (blockDim.x a multiple of 32).
__device__ float block_sum(float v) {
    __shared__ float sh[32];
    unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    v = threadIdx.x < blockDim.x / 32 ? sh[lane] : 0.0f;
    if (warp == 0) v = warp_sum(v);
    return v;
}

extern "C" __global__ void h_reduce(const float* in, float* out, u64 n) {
    float s = 0.0f;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) s += in[i];
    s = block_sum(s);
    if (threadIdx.x == 0) atomicAdd(out, s);
}

extern "C" __global__ void h_dot(const float* a, const float* b, float* out, u64 n) {
    float s = 0.0f;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) s += a[i] * b[i];
    s = block_sum(s);
    if (threadIdx.x == 0) atomicAdd(out, s);
}

// One block: the whole (small) reduction, result written directly.
extern "C" __global__ void h_reduce_one(const float* in, float* out, u64 n) {
    float s = 0.0f;
    for (u64 i = threadIdx.x; i < n; i += blockDim.x) s += in[i];
    s = block_sum(s);
    if (threadIdx.x == 0) *out = s;
}

extern "C" __global__ void h_add(const float* a, const float* b, float* out, u64 n) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

// Scan in three passes over blocks of SCAN_B elements (1024 threads x 8 each).
#define SCAN_T 1024
#define SCAN_I 8
#define SCAN_B (SCAN_T * SCAN_I)
// Inclusive scan of v over the block's 1024 threads; *total gets the block's sum.
__device__ float block_scan(float v, float* total) {
    __shared__ float ws[32];
    unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int o = 1; o < 32; o <<= 1) {
        float t = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o) v += t;
    }
    if (lane == 31) ws[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float w = ws[lane];
        for (int o = 1; o < 32; o <<= 1) {
            float t = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= o) w += t;
        }
        ws[lane] = w;
    }
    __syncthreads();
    if (warp > 0) v += ws[warp - 1];
    *total = ws[31];
    __syncthreads();
    return v;
}
extern "C" __global__ void h_scan_sums(const float* in, float* sums, u64 n) {
    u64 base = (u64)blockIdx.x * SCAN_B;
    float s = 0.0f;
    for (int k = 0; k < SCAN_I; ++k) {
        u64 i = base + (u64)k * SCAN_T + threadIdx.x;
        if (i < n) s += in[i];
    }
    s = block_sum(s);
    if (threadIdx.x == 0) sums[blockIdx.x] = s;
}
extern "C" __global__ void h_scan_offsets(float* sums, u64 m) {
    float carry = 0.0f;
    for (u64 b = 0; b < m; b += SCAN_T) {
        u64 i = b + threadIdx.x;
        float v = i < m ? sums[i] : 0.0f, total;
        float inc = block_scan(v, &total);
        if (i < m) sums[i] = carry + (inc - v);
        carry += total;
    }
}
extern "C" __global__ void h_scan_apply(const float* in, float* out, const float* offs, u64 n) {
    u64 base = (u64)blockIdx.x * SCAN_B + (u64)threadIdx.x * SCAN_I;
    float x[SCAN_I], s = 0.0f, total;
    for (int k = 0; k < SCAN_I; ++k) {
        s += base + k < n ? in[base + k] : 0.0f;
        x[k] = s;
    }
    float off = offs[blockIdx.x] + (block_scan(s, &total) - s);
    for (int k = 0; k < SCAN_I; ++k)
        if (base + k < n) out[base + k] = off + x[k];
}
"#;

// ---------------------------------------------------------------------------------------
// Command line.

struct Opts {
    only: Vec<String>,
    anatomy: bool,
    log2: u32,
    side: usize,
    mandel: usize,
    bodies: Vec<usize>,
    pairs: usize,
    reps: usize,
}

fn opts() -> Res<Opts> {
    let mut o = Opts {
        only: Vec::new(),
        anatomy: false,
        log2: 28,
        side: 8192,
        mandel: 4096,
        bodies: vec![4096, 32768],
        pairs: 8192,
        reps: 10,
    };
    let cli: Cli = clap::Parser::parse();
    if cli.quick {
        (o.log2, o.side, o.mandel, o.pairs, o.reps) = (20, 1024, 512, 1024, 3);
        o.bodies = vec![2048];
    }
    o.only = cli.only.into_iter().chain(cli.words).collect();
    o.anatomy = cli.anatomy;
    o.log2 = cli.log2.unwrap_or(o.log2);
    o.side = cli.side.unwrap_or(o.side);
    o.mandel = cli.mandel_side.unwrap_or(o.mandel);
    if !cli.bodies.is_empty() {
        o.bodies = cli.bodies;
    }
    o.pairs = cli.pairs.unwrap_or(o.pairs);
    o.reps = cli.reps.map_or(o.reps, |r| r.max(1));
    Ok(o)
}

/// skel CUDA / OpenCL kernels against hand-written CUDA C and the copy bound.
#[derive(clap::Parser, Debug)]
struct Cli {
    /// Only these cases, comma-separated words of their names.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Filter words, taken as --only (as `cargo bench -- WORD` passes them).
    words: Vec<String>,
    /// Small sizes and three repetitions (explicit sizes below still apply).
    #[arg(long)]
    quick: bool,
    /// Where the time of a call goes (launch, kernel, transfers).
    #[arg(long)]
    anatomy: bool,
    /// Elements of the vector cases, as a power of two (default 28).
    #[arg(long)]
    log2: Option<u32>,
    /// Side of the matrix cases (default 8192).
    #[arg(long)]
    side: Option<usize>,
    /// Side of the Mandelbrot image (default 4096).
    #[arg(long = "mandel")]
    mandel_side: Option<usize>,
    /// N-body sizes, comma-separated (default 4096,32768).
    #[arg(long, value_delimiter = ',')]
    bodies: Vec<usize>,
    /// Points of the pairs case (default 8192).
    #[arg(long)]
    pairs: Option<usize>,
    /// Repetitions per row (default 10).
    #[arg(long)]
    reps: Option<usize>,
    #[command(flatten)]
    cargo: common::args::Cargo,
}

// ---------------------------------------------------------------------------------------
// Timing and checking.

/// Largest relative difference between `got` and `want` (scaled by max(|want|, 1)).
fn max_rel(got: &[f32], want: &[f32]) -> f64 {
    got.iter()
        .zip(want)
        .map(|(&g, &w)| {
            let d = (f64::from(g) - f64::from(w)).abs() / f64::from(w.abs()).max(1.0);
            if d.is_nan() {
                f64::INFINITY
            } else {
                d
            }
        })
        .fold(0.0, f64::max)
}

fn check(what: &str, got: &[f32], want: &[f32], tol: f64) -> Res<()> {
    if got.len() != want.len() {
        return Err(format!("{what}: {} values, want {}", got.len(), want.len()));
    }
    let d = max_rel(got, want);
    if d > tol {
        return Err(format!(
            "{what}: differs from the hand-written result by {d:.2e} (tolerance {tol:.0e})"
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Rows.

#[derive(Default)]
struct Row {
    name: String,
    /// Bytes read and written by the computation (for GB/s and the copy bound).
    bytes: Option<f64>,
    /// Per-call rows are printed in microseconds.
    micro: bool,
    cuda: Option<f64>,
    opencl: Option<f64>,
    hand: Option<f64>,
    bound: Option<f64>,
    notes: Vec<String>,
}

impl Row {
    fn new(name: impl Into<String>, bytes: Option<f64>) -> Self {
        Row {
            name: name.into(),
            bytes,
            ..Row::default()
        }
    }

    fn cell(&self, t: Option<f64>) -> String {
        match (t, self.bytes) {
            (None, _) => "-".into(),
            (Some(t), _) if self.micro => format!("{:.2} us", t * 1e6),
            (Some(t), Some(b)) => format!("{:.3} ms {:>5.0} GB/s", t * 1e3, b / t / 1e9),
            (Some(t), None) => format!("{:.3} ms", t * 1e3),
        }
    }

    fn ratio(a: Option<f64>, b: Option<f64>) -> String {
        match (a, b) {
            (Some(a), Some(b)) => format!("{:.2}", a / b),
            _ => "-".into(),
        }
    }

    fn json(&self) -> String {
        let num = |v: Option<f64>| v.map_or("null".to_string(), |v| format!("{v:.9}"));
        format!(
            "KERNELS {{\"workload\":\"{}\",\"bytes\":{},\"skel_cuda_s\":{},\"skel_opencl_s\":{},\"hand_cuda_s\":{},\"d2d_bound_s\":{},\"notes\":\"{}\"}}",
            self.name,
            num(self.bytes),
            num(self.cuda),
            num(self.opencl),
            num(self.hand),
            num(self.bound),
            self.notes.join("; ").replace('"', "'")
        )
    }
}

/// Everything a workload needs.
struct Bench {
    o: Opts,
    hand: Option<Hand>,
    skel: Vec<Backend>,
    probe: Vector<f32>,
    copies: std::collections::HashMap<usize, f64>,
}

/// One skel call on a backend; with `read`, it also returns the output's host values.
type SkelCall<'f> = dyn FnMut(Backend, bool) -> skel::Result<Option<Vec<f32>>> + 'f;

impl Bench {
    /// Times `call` on every skel backend, after checking its result against `want`.
    fn skel_cells(&self, row: &mut Row, want: Option<&[f32]>, tol: f64, call: &mut SkelCall<'_>) {
        for &b in &self.skel {
            let mut timed = || -> Res<f64> {
                let err = |e: skel::Error| e.to_string();
                let got = call(b, want.is_some()).map_err(err)?;
                if let (Some(want), Some(got)) = (want, got) {
                    check(&format!("skel {b}"), &got, want, tol)?;
                    // After a host read the next call copies its result back eagerly; this
                    // untimed call resets that, so the timed calls stay device-resident.
                    call(b, false).map_err(err)?;
                }
                sync(b, &self.probe)?;
                best(self.o.reps, || {
                    call(b, false).map_err(err)?;
                    sync(b, &self.probe)
                })
            };
            match (timed(), b) {
                (Ok(t), Backend::Cuda) => row.cuda = Some(t),
                (Ok(t), _) => row.opencl = Some(t),
                (Err(e), _) => row.notes.push(format!("{b}: {e}")),
            }
        }
    }

    /// The d2d copy bound of the row's bytes (copies of one size measured once).
    fn bound(&mut self, row: &mut Row) {
        let (Some(h), Some(bytes)) = (&self.hand, row.bytes) else {
            return;
        };
        let half = (bytes / 2.0) as usize;
        let t = match self.copies.get(&half) {
            Some(&t) => Ok(t),
            None => h.copy_time(half, self.o.reps),
        };
        match t {
            Ok(t) => {
                self.copies.insert(half, t);
                row.bound = Some(t);
            }
            Err(e) => row.notes.push(format!("copy bound: {e}")),
        }
    }

    /// Runs the hand-written side of a row (nothing without a CUDA device): its best time
    /// and its result.
    fn hand_cell<T>(
        &self,
        row: &mut Row,
        f: impl FnOnce(&Hand, usize) -> Res<(f64, T)>,
    ) -> Option<T> {
        let h = self.hand.as_ref()?;
        match f(h, self.o.reps) {
            Ok((t, v)) => {
                row.hand = Some(t);
                Some(v)
            }
            Err(e) => {
                row.notes.push(format!("hand-written: {e}"));
                None
            }
        }
    }
}

fn as_f32<T: Copy + Into<f64>>(v: &[T]) -> Vec<f32> {
    v.iter().map(|&x| x.into() as f32).collect()
}

fn mandelbrot(b: &mut Bench) -> Row {
    let (side, iters) = (b.o.mandel, 256u32);
    let scale = 3.0 / side as f32;
    let mut row = Row::new(
        format!("index Map, Mandelbrot {side}x{side}, {iters} it"),
        None,
    );
    let want = b.hand_cell(&mut row, |h, reps| {
        let out = DevBuf::new(side * side * 4)?;
        let t = best(reps, || {
            let a = Args::default()
                .push(out.ptr)
                .push(side as u64)
                .push(side as u64)
                .push(scale)
                .push(iters);
            h.launch(
                "h_mandel",
                (Hand::blocks(side, 32), Hand::blocks(side, 8)),
                (32, 8),
                a,
            )?;
            h.sync()
        })?;
        Ok((t, as_f32(&out.to_vec::<u32>()?)))
    });
    let mut out: Matrix<u32> = Matrix::zeroed(side, side);
    b.skel_cells(&mut row, want.as_deref(), 0.0, &mut |bk, read| {
        Map::new(mandel)
            .uniforms((scale, iters))
            .backend(bk)
            .run_index(&mut out)?;
        Ok(read.then(|| as_f32(out.as_slice())))
    });
    row
}

fn bodies(n: usize) -> Vec<Body> {
    let d = data(4 * n, 7);
    d.chunks(4)
        .map(|c| Body {
            x: c[0] * 2.0 - 1.0,
            y: c[1] * 2.0 - 1.0,
            z: c[2] * 2.0 - 1.0,
            m: c[3] + 0.5,
        })
        .collect()
}

fn acc_f32(a: &[Acc]) -> Vec<f32> {
    a.iter().flat_map(|a| [a.x, a.y, a.z]).collect()
}

/// All-pairs n-body of `n` bodies, against the naive kernel or (`tiled`) the hand-tiled one.
fn nbody(b: &mut Bench, n: usize, tiled: bool) -> Row {
    let name = format!("MapArray, all-pairs n-body, N = {n}");
    let mut row = if tiled {
        Row::new(format!("{name}, vs hand-tiled"), None)
    } else {
        Row::new(name, None)
    };
    let kernel = if tiled { "h_nbody_tiled" } else { "h_nbody" };
    let host = bodies(n);
    let want = b.hand_cell(&mut row, |h, reps| {
        let (inp, out) = (DevBuf::from(&host)?, DevBuf::new(n * 12)?);
        let t = best(reps, || {
            let a = Args::default().push(inp.ptr).push(out.ptr).push(n as u32);
            h.launch(kernel, (Hand::blocks(n, 256), 1), (256, 1), a)?;
            h.sync()
        })?;
        Ok((t, out.to_vec::<f32>()?))
    });
    let v = Vector::from(host);
    let mut out: Vector<Acc> = Vector::zeroed(n);
    b.skel_cells(&mut row, want.as_deref(), 1e-5, &mut |bk, read| {
        MapArray::new(accel).backend(bk).run_index(&v, &mut out)?;
        Ok(read.then(|| acc_f32(out.as_slice())))
    });
    row
}

/// A Map of transcendental calls: eight in one expression, or (`heavy`) a chain of 32,
/// past skel's threshold for one element per thread (on 2^(log2 - 2) and 2^(log2 - 4) f32).
fn transcendental(b: &mut Bench, heavy: bool) -> Row {
    let lg = b.o.log2.saturating_sub(if heavy { 4 } else { 2 });
    let n = 1usize << lg;
    let (what, kernel, seed) = if heavy {
        ("Map, 32 transcendental calls", "h_heavy32", 41)
    } else {
        ("Map sin*cos+exp+ln+powf", "h_trig", 3)
    };
    let mut row = Row::new(format!("{what}, 2^{lg} f32"), Some(8.0 * n as f64));
    let host = data(n, seed);
    let want = b.hand_cell(&mut row, |h, reps| {
        let (inp, out) = (DevBuf::from(&host)?, DevBuf::new(n * 4)?);
        let t = best(reps, || {
            let a = Args::default().push(inp.ptr).push(out.ptr).push(n as u64);
            h.launch(kernel, (Hand::blocks(n, 256), 1), (256, 1), a)?;
            h.sync()
        })?;
        Ok((t, out.to_vec::<f32>()?))
    });
    let v = Vector::from(host);
    let mut out: Vector<f32> = Vector::zeroed(n);
    // 32 chained calls carry each library's last-bit differences along (OpenCL's own
    // sin / cos / exp): a looser tolerance than the one-expression row.
    let tol = if heavy { 1e-4 } else { 1e-5 };
    b.skel_cells(&mut row, want.as_deref(), tol, &mut |bk, read| {
        if heavy {
            Map::new(heavy32).backend(bk).run(&v, &mut out)?;
        } else {
            Map::new(trig).backend(bk).run(&v, &mut out)?;
        }
        Ok(read.then(|| out.to_vec()))
    });
    b.bound(&mut row);
    row
}

/// Operands of the pair rows: quarters below 250, so every pair sum is exact in f32 in any
/// order and all sides must agree bit for bit.
fn quarters(n: usize, mul: usize, modulus: usize) -> Vec<f32> {
    (0..n).map(|i| (i * mul % modulus) as f32 * 0.25).collect()
}

/// MapPairs `|v[i] - h[j]|` over `--pairs` x `--pairs` f32 (`rows == false`), or its
/// MapPairsReduce per row (the sum over `j`).
fn pairs(b: &mut Bench, rows: bool) -> Row {
    let n = b.o.pairs;
    let mut row = if rows {
        Row::new(
            format!("MapPairsReduce rows, sum abs(p - q), {n}x{n} f32"),
            None,
        )
    } else {
        Row::new(
            format!("MapPairs abs(p - q), {n}x{n} f32"),
            Some(4.0 * (n * n + 2 * n) as f64),
        )
    };
    let (hv, hh) = (quarters(n, 37, 1000), quarters(n, 91, 777));
    let want = b.hand_cell(&mut row, |h, reps| {
        let (dv, dh) = (DevBuf::from(&hv)?, DevBuf::from(&hh)?);
        let out = DevBuf::new(if rows { n * 4 } else { n * n * 4 })?;
        let t = best(reps, || {
            let a = Args::default().push(out.ptr).push(dv.ptr).push(dh.ptr);
            if rows {
                let a = a.push(n as u64).push(n as u64);
                h.launch("h_pairs_rows", (Hand::blocks(n, 256), 1), (256, 1), a)?;
            } else {
                let grid = (Hand::blocks(n, 256), n as u32);
                h.launch("h_pairs", grid, (256, 1), a.push(n as u64))?;
            }
            h.sync()
        })?;
        Ok((t, out.to_vec::<f32>()?))
    });
    let (v, hv) = (Vector::from(hv), Vector::from(hh));
    let mut m: Matrix<f32> = Matrix::zeroed(if rows { 1 } else { n }, n);
    let mut per_row: Vector<f32> = Vector::zeroed(n);
    b.skel_cells(&mut row, want.as_deref(), 0.0, &mut |bk, read| {
        if rows {
            MapPairsReduce::new(dist, add)
                .backend(bk)
                .run_rows(&v, &hv, &mut per_row)?;
            Ok(read.then(|| per_row.to_vec()))
        } else {
            MapPairs::new(dist).backend(bk).run(&v, &hv, &mut m)?;
            Ok(read.then(|| m.to_vec()))
        }
    });
    b.bound(&mut row);
    row
}

fn stencil_1d(b: &mut Bench, r: usize) -> Row {
    let n = 1usize << b.o.log2;
    let mut row = Row::new(
        format!("MapOverlap 1D radius {r}, 2^{} f32", b.o.log2),
        Some(8.0 * n as f64),
    );
    let host = data(n, 5);
    let kernel = format!("h_st1_r{r}");
    let want = b.hand_cell(&mut row, |h, reps| {
        let (inp, out) = (DevBuf::from(&host)?, DevBuf::new(n * 4)?);
        let t = best(reps, || {
            let a = Args::default().push(inp.ptr).push(out.ptr).push(n as u64);
            h.launch(&kernel, (Hand::blocks(n, 256), 1), (256, 1), a)?;
            h.sync()
        })?;
        Ok((t, out.to_vec::<f32>()?))
    });
    let v = Vector::from(host);
    let mut out: Vector<f32> = Vector::zeroed(n);
    b.skel_cells(&mut row, want.as_deref(), 1e-6, &mut |bk, read| {
        match r {
            1 => MapOverlap::new(box1, 1)
                .edge(Edge::Duplicate)
                .backend(bk)
                .run(&v, &mut out)?,
            2 => MapOverlap::new(box2, 2)
                .edge(Edge::Duplicate)
                .backend(bk)
                .run(&v, &mut out)?,
            _ => MapOverlap::new(box4, 4)
                .edge(Edge::Duplicate)
                .backend(bk)
                .run(&v, &mut out)?,
        }
        Ok(read.then(|| out.to_vec()))
    });
    b.bound(&mut row);
    row
}

fn stencil_2d(b: &mut Bench, r: usize) -> Row {
    let side = b.o.side;
    let w = 2 * r + 1;
    let mut row = Row::new(
        format!("MapOverlap 2D {w}x{w}, {side}x{side} f32"),
        Some(8.0 * (side * side) as f64),
    );
    let host = data(side * side, 9);
    let kernel = format!("h_st2_r{r}");
    let want = b.hand_cell(&mut row, |h, reps| {
        let (inp, out) = (DevBuf::from(&host)?, DevBuf::new(side * side * 4)?);
        let t = best(reps, || {
            let a = Args::default()
                .push(inp.ptr)
                .push(out.ptr)
                .push(side as i64)
                .push(side as i64);
            h.launch(
                &kernel,
                (Hand::blocks(side, 32), Hand::blocks(side, 8)),
                (32, 8),
                a,
            )?;
            h.sync()
        })?;
        Ok((t, out.to_vec::<f32>()?))
    });
    let m = match Matrix::from_vec(side, side, host) {
        Ok(m) => m,
        Err(e) => {
            row.notes.push(e.to_string());
            return row;
        }
    };
    let mut out: Matrix<f32> = Matrix::zeroed(side, side);
    b.skel_cells(&mut row, want.as_deref(), 1e-6, &mut |bk, read| {
        match r {
            1 => MapOverlap::new(box3x3, (1, 1))
                .edge(Edge::Duplicate)
                .backend(bk)
                .run(&m, &mut out)?,
            2 => MapOverlap::new(box5x5, (2, 2))
                .edge(Edge::Duplicate)
                .backend(bk)
                .run(&m, &mut out)?,
            _ => MapOverlap::new(box9x9, (4, 4))
                .edge(Edge::Duplicate)
                .backend(bk)
                .run(&m, &mut out)?,
        }
        Ok(read.then(|| out.to_vec()))
    });
    b.bound(&mut row);
    row
}

/// Reduce (`dot == false`) or MapReduce dot product of 2^log2 f32, result read back.
fn reduction(b: &mut Bench, dot: bool) -> Row {
    let n = 1usize << b.o.log2;
    let name = if dot { "MapReduce dot" } else { "Reduce sum" };
    let inputs = if dot { 2.0 } else { 1.0 };
    let mut row = Row::new(
        format!("{name}, 2^{} f32", b.o.log2),
        Some(inputs * 4.0 * n as f64),
    );
    let (ha, hb) = (data(n, 11), data(n, 13));
    let want = b.hand_cell(&mut row, |h, reps| {
        let (da, db, out) = (DevBuf::from(&ha)?, DevBuf::from(&hb)?, DevBuf::new(4)?);
        let grid = (h.sms * 8, 1);
        let kernel = || {
            let a = if dot {
                Args::default().push(da.ptr).push(db.ptr)
            } else {
                Args::default().push(da.ptr)
            };
            let a = a.push(out.ptr).push(n as u64);
            h.launch(if dot { "h_dot" } else { "h_reduce" }, grid, (256, 1), a)
        };
        let mut v = 0.0;
        let t = best(reps, || {
            v = h.reduce_to_host(&out, kernel)?;
            Ok(())
        })?;
        Ok((t, vec![v]))
    });
    let (va, vb) = (Vector::from(ha), Vector::from(hb));
    b.skel_cells(&mut row, want.as_deref(), 1e-4, &mut |bk, _| {
        let s = if dot {
            MapReduce::new(mult, add).backend(bk).run(&va, &vb)?
        } else {
            Reduce::new(add).backend(bk).run(&va)?
        };
        Ok(Some(vec![s]))
    });
    b.bound(&mut row);
    row
}

fn scan(b: &mut Bench) -> Row {
    let n = 1usize << b.o.log2;
    let mut row = Row::new(
        format!("Scan inclusive sum, 2^{} f32", b.o.log2),
        Some(8.0 * n as f64),
    );
    let host = data(n, 17);
    // Compared at a sample of positions: the sums grow to n / 2, and f32 prefix sums in
    // different orders differ by more than their last bits.
    let sample = |v: &[f32]| -> Vec<f32> { (0..64).map(|k| v[k * (v.len() - 1) / 63]).collect() };
    let want = b.hand_cell(&mut row, |h, reps| {
        let blocks = n.div_ceil(8192);
        let (inp, out, sums) = (
            DevBuf::from(&host)?,
            DevBuf::new(n * 4)?,
            DevBuf::new(blocks * 4)?,
        );
        let t = best(reps, || {
            let g = (blocks as u32, 1);
            h.launch(
                "h_scan_sums",
                g,
                (1024, 1),
                Args::default().push(inp.ptr).push(sums.ptr).push(n as u64),
            )?;
            h.launch(
                "h_scan_offsets",
                (1, 1),
                (1024, 1),
                Args::default().push(sums.ptr).push(blocks as u64),
            )?;
            let a = Args::default()
                .push(inp.ptr)
                .push(out.ptr)
                .push(sums.ptr)
                .push(n as u64);
            h.launch("h_scan_apply", g, (1024, 1), a)?;
            h.sync()
        })?;
        Ok((t, sample(&out.to_vec::<f32>()?)))
    });
    let v = Vector::from(host);
    let mut out: Vector<f32> = Vector::zeroed(n);
    b.skel_cells(&mut row, want.as_deref(), 1e-4, &mut |bk, read| {
        Scan::new(add).backend(bk).run(&v, &mut out)?;
        Ok(read.then(|| sample(out.as_slice())))
    });
    b.bound(&mut row);
    row
}

fn map_add(b: &mut Bench) -> Row {
    let n = 1usize << b.o.log2;
    let mut row = Row::new(
        format!("Map a+b, 2^{} f32", b.o.log2),
        Some(12.0 * n as f64),
    );
    let (ha, hb) = (data(n, 19), data(n, 23));
    let want = b.hand_cell(&mut row, |h, reps| {
        let (da, db, out) = (DevBuf::from(&ha)?, DevBuf::from(&hb)?, DevBuf::new(n * 4)?);
        let t = best(reps, || {
            let a = Args::default()
                .push(da.ptr)
                .push(db.ptr)
                .push(out.ptr)
                .push(n as u64);
            h.launch("h_add", (Hand::blocks(n, 256), 1), (256, 1), a)?;
            h.sync()
        })?;
        Ok((t, out.to_vec::<f32>()?))
    });
    let (va, vb) = (Vector::from(ha), Vector::from(hb));
    let mut out: Vector<f32> = Vector::zeroed(n);
    b.skel_cells(&mut row, want.as_deref(), 0.0, &mut |bk, read| {
        Map::new(add).backend(bk).run(&va, &vb, &mut out)?;
        Ok(read.then(|| out.to_vec()))
    });
    b.bound(&mut row);
    row
}

/// Calls per small-call timing.
const CALLS: usize = 2000;

/// Per call: [`CALLS`] calls of `f`, then `end`, best of `reps`.
fn per_call(reps: usize, f: impl FnMut() -> Res<()>, end: impl Fn() -> Res<()>) -> Res<f64> {
    hand::per_call(reps, CALLS, f, end)
}

fn small_reduce(b: &mut Bench) -> Row {
    let n = 1000;
    let mut row = Row::new("Reduce of 1000 f32, result read back (per call)", None);
    row.micro = true;
    let host = data(n, 29);
    let reps = b.o.reps.min(5);
    let want = b.hand_cell(&mut row, |h, _| {
        let (inp, out) = (DevBuf::from(&host)?, DevBuf::new(4)?);
        let mut v = 0.0;
        let mut call = || -> Res<()> {
            let a = Args::default().push(inp.ptr).push(out.ptr).push(n as u64);
            h.launch("h_reduce_one", (1, 1), (256, 1), a)?;
            v = h.read_f32(&out)?;
            Ok(())
        };
        let t = per_call(reps, &mut call, || Ok(()))?;
        Ok((t, vec![v]))
    });
    let v = Vector::from(host);
    for &bk in &b.skel.clone() {
        let r = (|| -> Res<f64> {
            let got: f32 = Reduce::new(add)
                .backend(bk)
                .run(&v)
                .map_err(|e| e.to_string())?;
            if let Some(w) = &want {
                check(&format!("skel {bk}"), &[got], w, 1e-5)?;
            }
            let call = || {
                Reduce::new(add)
                    .backend(bk)
                    .run(&v)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            };
            per_call(reps, call, || Ok(()))
        })();
        match (r, bk) {
            (Ok(t), Backend::Cuda) => row.cuda = Some(t),
            (Ok(t), _) => row.opencl = Some(t),
            (Err(e), _) => row.notes.push(format!("{bk}: {e}")),
        }
    }
    row
}

fn small_map(b: &mut Bench) -> Row {
    let n = 1000;
    let mut row = Row::new("Map a+b of 1000 f32, asynchronous (per call)", None);
    row.micro = true;
    let (ha, hb) = (data(n, 31), data(n, 37));
    let reps = b.o.reps.min(5);
    let want = b.hand_cell(&mut row, |h, _| {
        let (da, db, out) = (DevBuf::from(&ha)?, DevBuf::from(&hb)?, DevBuf::new(n * 4)?);
        let call = || {
            let a = Args::default()
                .push(da.ptr)
                .push(db.ptr)
                .push(out.ptr)
                .push(n as u64);
            h.launch("h_add", (Hand::blocks(n, 256), 1), (256, 1), a)
        };
        let t = per_call(reps, call, || h.sync())?;
        Ok((t, out.to_vec::<f32>()?))
    });
    let (va, vb) = (Vector::from(ha), Vector::from(hb));
    let mut out: Vector<f32> = Vector::zeroed(n);
    for &bk in &b.skel.clone() {
        let r = (|| -> Res<f64> {
            let err = |e: skel::Error| e.to_string();
            Map::new(add)
                .backend(bk)
                .run(&va, &vb, &mut out)
                .map_err(err)?;
            if let Some(w) = &want {
                check(&format!("skel {bk}"), out.as_slice(), w, 0.0)?;
            }
            Map::new(add)
                .backend(bk)
                .run(&va, &vb, &mut out)
                .map_err(err)?;
            let probe = &b.probe;
            per_call(
                reps,
                || {
                    Map::new(add)
                        .backend(bk)
                        .run(&va, &vb, &mut out)
                        .map_err(err)
                },
                || sync(bk, probe),
            )
        })();
        match (r, bk) {
            (Ok(t), Backend::Cuda) => row.cuda = Some(t),
            (Ok(t), _) => row.opencl = Some(t),
            (Err(e), _) => row.notes.push(format!("{bk}: {e}")),
        }
    }
    row
}

/// `--anatomy`: what the driver calls a small skeleton call is made of cost here, each per
/// call over [`CALLS`] calls (best of 5): the floor under the small-call rows.
fn anatomy(h: &Hand) -> Res<()> {
    let rows = h.anatomy("h_add", CALLS)?;
    println!("\nper-call anatomy (driver calls alone, per call):");
    for (what, t) in rows {
        println!("  {what:<48} {:7.2} us", t * 1e6);
    }
    Ok(())
}

/// A row of the report: its key (`--only` matches it) and how to measure it.
type Workload = (String, Box<dyn Fn(&mut Bench) -> Row>);

fn workloads(o: &Opts) -> Vec<Workload> {
    fn w(key: &str, f: impl Fn(&mut Bench) -> Row + 'static) -> Workload {
        (key.to_string(), Box::new(f))
    }
    let mut v = vec![w("mandelbrot", mandelbrot)];
    for &n in &o.bodies {
        v.push(w("nbody", move |b| nbody(b, n, false)));
        v.push(w("nbody-tiled", move |b| nbody(b, n, true)));
    }
    v.extend([
        w("transcendental", |b| transcendental(b, false)),
        w("heavy", |b| transcendental(b, true)),
        w("stencil1d-r1", |b| stencil_1d(b, 1)),
        w("stencil1d-r2", |b| stencil_1d(b, 2)),
        w("stencil1d-r4", |b| stencil_1d(b, 4)),
        w("stencil2d-3x3", |b| stencil_2d(b, 1)),
        w("stencil2d-5x5", |b| stencil_2d(b, 2)),
        w("stencil2d-9x9", |b| stencil_2d(b, 4)),
        w("reduce", |b| reduction(b, false)),
        w("dot", |b| reduction(b, true)),
        w("scan", scan),
        w("add", map_add),
        w("pairs", |b| pairs(b, false)),
        w("pairs-reduce", |b| pairs(b, true)),
        w("small-reduce", small_reduce),
        w("small-map", small_map),
    ]);
    v
}

fn main() {
    let o = match opts() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("kernels: {e}");
            std::process::exit(2);
        }
    };
    // The GPU backends compiled in and present (the others are said to be skipped).
    let skel: Vec<Backend> = common::backends()
        .into_iter()
        .filter(|b| matches!(b, Backend::Cuda | Backend::OpenCl))
        .collect();
    // skel opens the device first, so both sides share its primary context.
    let hand = match Hand::new(HAND) {
        Ok(h) => Some(h),
        Err(e) => {
            println!("hand-written CUDA: skipped ({e})");
            None
        }
    };
    let bodies: Vec<String> = o.bodies.iter().map(usize::to_string).collect();
    println!(
        "kernels: 1D 2^{} f32, 2D {}x{}, Mandelbrot {}x{}, n-body {}, pairs {}x{}, best of {}, \
         SKEL_LAUNCH={}",
        o.log2,
        o.side,
        o.side,
        o.mandel,
        o.mandel,
        bodies.join(","),
        o.pairs,
        o.pairs,
        o.reps,
        std::env::var("SKEL_LAUNCH").unwrap_or_else(|_| "auto".into())
    );
    let workloads = workloads(&o);
    let mut b = Bench {
        probe: Vector::from(vec![1.0f32; 4]),
        o,
        hand,
        skel,
        copies: Default::default(),
    };
    let mut rows = Vec::new();
    for (key, run) in &workloads {
        if !b.o.only.is_empty() && !b.o.only.iter().any(|w| key.contains(w.as_str())) {
            continue;
        }
        let t = Instant::now();
        let row = run(&mut b);
        eprintln!("  {key}: {:.1} s", t.elapsed().as_secs_f64());
        rows.push(row);
    }
    print_table(&rows);
    if let (true, Some(h)) = (b.o.anatomy, &b.hand) {
        if let Err(e) = anatomy(h) {
            println!("anatomy: {e}");
        }
    }
}

fn print_table(rows: &[Row]) {
    let head = [
        "workload",
        "skel cuda",
        "skel opencl",
        "hand-written CUDA",
        "d2d copy bound",
        "cuda/hand",
        "opencl/hand",
    ];
    let cells: Vec<[String; 7]> = rows
        .iter()
        .map(|r| {
            [
                r.name.clone(),
                r.cell(r.cuda),
                r.cell(r.opencl),
                r.cell(r.hand),
                r.cell(r.bound),
                Row::ratio(r.cuda, r.hand),
                Row::ratio(r.opencl, r.hand),
            ]
        })
        .collect();
    let mut width = head.map(str::len);
    for c in &cells {
        for (w, s) in width.iter_mut().zip(c) {
            *w = (*w).max(s.len());
        }
    }
    let line = |c: &[String]| {
        let s: Vec<String> = c
            .iter()
            .zip(width)
            .enumerate()
            .map(|(i, (s, w))| {
                if i == 0 {
                    format!("{s:<w$}")
                } else {
                    format!("{s:>w$}")
                }
            })
            .collect();
        println!("| {} |", s.join(" | "));
    };
    println!();
    line(&head.map(str::to_string));
    println!(
        "|{}|",
        width
            .iter()
            .enumerate()
            .map(|(i, &w)| if i == 0 {
                format!(":{}", "-".repeat(w + 1))
            } else {
                format!("{}:", "-".repeat(w + 1))
            })
            .collect::<Vec<_>>()
            .join("|")
    );
    for c in &cells {
        line(c);
    }
    println!("\nratios: time of skel / time of the hand-written kernel (> 1: skel is slower)");
    for r in rows {
        for n in &r.notes {
            println!("note: {}: {n}", r.name);
        }
    }
    for r in rows {
        println!("{}", r.json());
    }
}
