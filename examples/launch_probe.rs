//! Launch shapes on compute-heavy user functions: skel on CUDA and OpenCL next to a naive
//! hand-written CUDA C kernel of the same computation, compiled with NVRTC (same options
//! as skel's: no FMA contraction, IEEE division and square root) in the same process, all
//! device-resident. Prints one line per workload: times in ms and skel / hand-written.
//!
//! `cargo run --release --features "cuda opencl" --example launch_probe -- [cuda]`
//! (`cuda`: skip OpenCL). `SKEL_LAUNCH=memory|compute` forces skel's launch class, to
//! measure the classification against both shapes.

// The all-pairs user function indexes its array: the pattern skel tiles.
#![allow(clippy::needless_range_loop)]
// 3 / 4096 is exact in f32: the same constant as in the hand-written kernel.
#![allow(clippy::excessive_precision)]

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};
use skel::prelude::*;

const ITERS: u32 = 256;

#[userfn]
fn mandel(#[index] (row, col): (usize, usize), #[uniform] iters: u32) -> u32 {
    let cr = col as f32 * 0.000732421875 - 2.25;
    let ci = row as f32 * 0.000732421875 - 1.5;
    let mut zr = 0.0f32;
    let mut zi = 0.0f32;
    let mut k = 0u32;
    while k < iters && zr * zr + zi * zi < 4.0 {
        let t = zr * zr - zi * zi + cr;
        zi = 2.0 * zr * zi + ci;
        zr = t;
        k += 1;
    }
    k
}

#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
struct Body {
    x: f32,
    y: f32,
    z: f32,
    m: f32,
}

#[userfn]
fn accel(p: Body, bodies: &[Body], #[uniform] n: u32) -> Body {
    let mut ax = 0.0f32;
    let mut ay = 0.0f32;
    let mut az = 0.0f32;
    for j in 0..n as usize {
        let q = bodies[j];
        let dx = q.x - p.x;
        let dy = q.y - p.y;
        let dz = q.z - p.z;
        let r2 = dx * dx + dy * dy + dz * dz + 0.01;
        let s = q.m / (r2 * r2.sqrt());
        ax += dx * s;
        ay += dy * s;
        az += dz * s;
    }
    Body {
        x: ax,
        y: ay,
        z: az,
        m: p.m,
    }
}

#[userfn]
fn trig(x: f32) -> f32 {
    let a = x.sin() * 0.5 + 1.0;
    let b = (a.ln() + x.cos()).exp();
    let c = (b * 0.25).sin() + a.sqrt();
    (c * x).cos() + (b + c).ln()
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
fn add(a: f32, b: f32) -> f32 {
    a + b
}

const HAND: &str = r#"
struct Body { float x, y, z, m; };

extern "C" __global__ void mandel(unsigned* out, int w, int h, unsigned iters) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (col >= w || row >= h) return;
    float cr = (float)col * 0.000732421875f - 2.25f;
    float ci = (float)row * 0.000732421875f - 1.5f;
    float zr = 0.0f, zi = 0.0f;
    unsigned k = 0;
    while (k < iters && zr * zr + zi * zi < 4.0f) {
        float t = zr * zr - zi * zi + cr;
        zi = 2.0f * zr * zi + ci;
        zr = t;
        k++;
    }
    out[row * w + col] = k;
}

extern "C" __global__ void accel(const Body* __restrict__ ps, const Body* __restrict__ bodies, Body* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Body p = ps[i];
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    for (int j = 0; j < n; j++) {
        Body q = bodies[j];
        float dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;
        float r2 = dx * dx + dy * dy + dz * dz + 0.01f;
        float s = q.m / (r2 * sqrtf(r2));
        ax += dx * s; ay += dy * s; az += dz * s;
    }
    Body r = {ax, ay, az, p.m};
    out[i] = r;
}

// The textbook shared-memory version, for comparison with the naive one.
extern "C" __global__ void accel_tiled(const Body* __restrict__ ps, const Body* __restrict__ bodies, Body* out, int n) {
    __shared__ Body tile[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    Body p = ps[i < n ? i : 0];
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    for (int t = 0; t < n; t += 256) {
        if (t + threadIdx.x < n) tile[threadIdx.x] = bodies[t + threadIdx.x];
        __syncthreads();
        int m = min(256, n - t);
        for (int j = 0; j < m; j++) {
            Body q = tile[j];
            float dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;
            float r2 = dx * dx + dy * dy + dz * dz + 0.01f;
            float s = q.m / (r2 * sqrtf(r2));
            ax += dx * s; ay += dy * s; az += dz * s;
        }
        __syncthreads();
    }
    if (i < n) { Body r = {ax, ay, az, p.m}; out[i] = r; }
}

extern "C" __global__ void trig(const float* __restrict__ x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    float a = sinf(v) * 0.5f + 1.0f;
    float b = expf(logf(a) + cosf(v));
    float c = sinf(b * 0.25f) + sqrtf(a);
    out[i] = cosf(c * v) + logf(b + c);
}
"#;

/// Best over 5 rounds of the mean time of `reps` runs of `f`, each round ended by `sync`
/// (milliseconds).
fn time(reps: usize, mut f: impl FnMut(), mut sync: impl FnMut()) -> f64 {
    f();
    sync();
    let mut best = f64::MAX;
    for _ in 0..5 {
        let s = Instant::now();
        for _ in 0..reps {
            f();
        }
        sync();
        best = best.min(s.elapsed().as_secs_f64() / reps as f64);
    }
    best * 1e3
}

struct Hand {
    stream: Arc<CudaStream>,
    mandel: CudaFunction,
    accel: CudaFunction,
    accel_tiled: CudaFunction,
    trig: CudaFunction,
}

fn hand() -> std::result::Result<Hand, Box<dyn std::error::Error>> {
    let ctx = CudaContext::new(0)?;
    let ptx = compile_ptx_with_opts(
        HAND,
        CompileOptions {
            fmad: Some(false),
            ..Default::default()
        },
    )?;
    let m = ctx.load_module(ptx)?;
    Ok(Hand {
        stream: ctx.default_stream(),
        mandel: m.load_function("mandel")?,
        accel: m.load_function("accel")?,
        accel_tiled: m.load_function("accel_tiled")?,
        trig: m.load_function("trig")?,
    })
}

fn row(name: &str, cuda: f64, opencl: Option<f64>, hand: f64) {
    let ocl = opencl.map_or("       -".to_string(), |t| format!("{t:8.3}"));
    let ratio = opencl.map_or("    -".to_string(), |t| format!("{:5.2}", hand / t));
    println!(
        "{name:<34} skel-cuda {cuda:8.3} ms  skel-opencl {ocl} ms  hand {hand:8.3} ms  hand/cuda {:5.2}  hand/opencl {ratio}",
        hand / cuda
    );
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let with_opencl =
        std::env::args().nth(1).as_deref() != Some("cuda") && Backend::OpenCl.check().is_ok();
    Backend::Cuda.check()?;
    let h = hand()?;
    let s = &h.stream;
    let sync_cuda = || skel::debug::synchronize().unwrap();
    let sync_hand = || s.synchronize().unwrap();
    println!(
        "launch_probe: SKEL_LAUNCH={}",
        std::env::var("SKEL_LAUNCH").unwrap_or_else(|_| "auto".into())
    );

    // Mandelbrot, index Map 2D.
    let (w, hgt) = (4096usize, 4096usize);
    let mut img: Matrix<u32> = Matrix::zeroed(hgt, w);
    let mut want: Matrix<u32> = Matrix::zeroed(hgt, w);
    let run = |b: Backend, m: &mut Matrix<u32>| {
        Map::new(mandel)
            .uniforms((ITERS,))
            .backend(b)
            .download(false)
            .run_index(m)
            .unwrap()
    };
    let tc = time(10, || run(Backend::Cuda, &mut img), sync_cuda);
    let mut dout = s.alloc_zeros::<u32>(w * hgt)?;
    let cfg = LaunchConfig {
        grid_dim: ((w as u32).div_ceil(16), (hgt as u32).div_ceil(16), 1),
        block_dim: (16, 16, 1),
        shared_mem_bytes: 0,
    };
    let (wi, hi) = (w as i32, hgt as i32);
    let th = time(
        10,
        || {
            let mut l = s.launch_builder(&h.mandel);
            l.arg(&mut dout).arg(&wi).arg(&hi).arg(&ITERS);
            // SAFETY: the kernel's parameters are (unsigned*, int, int, unsigned) and the
            // buffer holds w * h values.
            unsafe { l.launch(cfg) }.unwrap();
        },
        sync_hand,
    );
    let hand_img = s.clone_dtoh(&dout)?;
    let to = with_opencl.then(|| {
        let mut o: Matrix<u32> = Matrix::zeroed(hgt, w);
        let t = time(10, || run(Backend::OpenCl, &mut o), sync_opencl);
        check(
            o.as_slice() == img.as_slice(),
            "mandel: opencl differs from cuda",
        );
        t
    });
    Map::new(mandel)
        .uniforms((ITERS,))
        .backend(Backend::Rayon)
        .run_index(&mut want)?;
    check(
        img.as_slice() == want.as_slice(),
        "mandel: cuda differs from rayon",
    );
    check(
        hand_img == want.as_slice(),
        "mandel: hand-written differs from rayon",
    );
    row(&format!("mandelbrot {w}x{hgt} {ITERS} it"), tc, to, th);

    // All-pairs n-body acceleration, MapArray.
    for n in [4096usize, 32768] {
        let bodies: Vec<Body> = (0..n)
            .map(|i| {
                let f = i as f32;
                Body {
                    x: (f * 0.618).sin() * 10.0,
                    y: (f * 0.377).cos() * 10.0,
                    z: (f * 0.211).sin() * 5.0,
                    m: 1.0 + (i % 7) as f32,
                }
            })
            .collect();
        let arr = Vector::from(bodies.clone());
        let mut out: Vector<Body> = Vector::zeroed(n);
        let run = |b: Backend, o: &mut Vector<Body>| {
            MapArray::new(accel)
                .uniforms((n as u32,))
                .backend(b)
                .download(false)
                .run(&arr, &arr, o)
                .unwrap()
        };
        let tc = time(5, || run(Backend::Cuda, &mut out), sync_cuda);
        let got = out.to_vec();
        let dps = s.clone_htod(&flat(&bodies))?;
        let mut dres = s.alloc_zeros::<f32>(4 * n)?;
        let cfg = LaunchConfig {
            grid_dim: ((n as u32).div_ceil(256), 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let ni = n as i32;
        let hand_run = |f: &CudaFunction, dres: &mut cudarc::driver::CudaSlice<f32>| {
            let mut l = s.launch_builder(f);
            l.arg(&dps).arg(&dps).arg(dres).arg(&ni);
            // SAFETY: parameters (const Body*, const Body*, Body*, int); Body is four f32,
            // both buffers hold 4 * n floats.
            unsafe { l.launch(cfg) }.unwrap();
        };
        let th = time(5, || hand_run(&h.accel, &mut dres), sync_hand);
        let hand_out = s.clone_dtoh(&dres)?;
        let tt = time(5, || hand_run(&h.accel_tiled, &mut dres), sync_hand);
        let tiled_out = s.clone_dtoh(&dres)?;
        let to = with_opencl.then(|| {
            let mut o: Vector<Body> = Vector::zeroed(n);
            let t = time(5, || run(Backend::OpenCl, &mut o), sync_opencl);
            check(flat(&o.to_vec()) == hand_out, "accel: opencl differs");
            t
        });
        check(
            flat(&got) == hand_out,
            "accel: cuda differs from hand-written",
        );
        check(tiled_out == hand_out, "accel: tiled differs from naive");
        row(&format!("n-body all-pairs N={n}"), tc, to, th);
        println!(
            "{:<34} hand-tiled {tt:8.3} ms  naive/tiled {:5.2}",
            format!("n-body N={n} (shared-memory tiles)"),
            th / tt
        );
    }

    // Transcendental chain, Map.
    for log2 in [16u32, 20, 24] {
        let n = 1usize << log2;
        let x = Vector::from_fn(n, |i| (i % 1000) as f32 * 0.01);
        let mut out: Vector<f32> = Vector::zeroed(n);
        let run = |b: Backend, o: &mut Vector<f32>| {
            Map::new(trig)
                .backend(b)
                .download(false)
                .run(&x, o)
                .unwrap()
        };
        let tc = time(20, || run(Backend::Cuda, &mut out), sync_cuda);
        let dx = s.clone_htod(x.as_slice())?;
        let mut dy = s.alloc_zeros::<f32>(n)?;
        let cfg = LaunchConfig {
            grid_dim: ((n as u32).div_ceil(256), 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let ni = n as i32;
        let th = time(
            20,
            || {
                let mut l = s.launch_builder(&h.trig);
                l.arg(&dx).arg(&mut dy).arg(&ni);
                // SAFETY: parameters (const float*, float*, int), both buffers of n floats.
                unsafe { l.launch(cfg) }.unwrap();
            },
            sync_hand,
        );
        check(
            out.to_vec() == s.clone_dtoh(&dy)?,
            "trig: cuda differs from hand-written",
        );
        let to = with_opencl.then(|| {
            let mut o: Vector<f32> = Vector::zeroed(n);
            time(20, || run(Backend::OpenCl, &mut o), sync_opencl)
        });
        row(&format!("transcendental map 2^{log2}"), tc, to, th);
    }

    // The classification threshold: functions of growing weight, and a+b (memory-bound).
    for log2 in [16u32, 20, 24] {
        let n = 1usize << log2;
        let x = Vector::from_fn(n, |i| (i % 1000) as f32 * 0.01);
        let mut out: Vector<f32> = Vector::zeroed(n);
        let mut on_cuda = |f: &dyn Fn(&mut Vector<f32>) -> Result<()>| {
            time(20, || f(&mut out).unwrap(), sync_cuda)
        };
        let t1 = on_cuda(&|o| {
            Map::new(trig)
                .backend(Backend::Cuda)
                .download(false)
                .run(&x, o)
        });
        let t3 = on_cuda(&|o| {
            Map::new(heavy32)
                .backend(Backend::Cuda)
                .download(false)
                .run(&x, o)
        });
        let ta = on_cuda(&|o| {
            Map::new(add)
                .backend(Backend::Cuda)
                .download(false)
                .run(&x, &x, o)
        });
        let _ = out[0];
        println!(
            "weights 2^{log2:<2}  trig (8 calls) {t1:8.4} ms  heavy32 {t3:8.4} ms  a+b {ta:8.4} ms"
        );
    }
    Ok(())
}

#[userfn]
fn max_u32(a: u32, b: u32) -> u32 {
    a.max(b)
}

/// A wrong result is reported, and the measurements go on.
fn check(ok: bool, what: &str) {
    if !ok {
        println!("MISMATCH {what}");
    }
}

fn flat(b: &[Body]) -> Vec<f32> {
    b.iter().flat_map(|b| [b.x, b.y, b.z, b.m]).collect()
}

/// Waits for skel's OpenCL work: a Reduce returns its value, after everything queued
/// before it on the one in-order queue.
fn sync_opencl() {
    let one = Vector::from(vec![0u32]);
    let _: u32 = Reduce::new(max_u32)
        .backend(Backend::OpenCl)
        .run(&one)
        .unwrap();
}
