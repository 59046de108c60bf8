//! Greyscale: colour images to 8-bit grey, as a stream of frames through a `skel::stream`
//! pipeline around skel's `Map` (the MultiStream thesis' application, Parisi 2015, app. B):
//!
//! ```text
//! decode farm ──► Map(grey) + Histogram(luma) on skel ──► check + encode farm
//! (w threads)     (one backend, the input uploaded once)   (w threads: copy-back, PNG)
//! ```
//!
//! Farms have one worker per core and keep the frames in order; the input statistics are a
//! `Histogram` on the Map's backend. Image interop, synthetic frames and the per-pixel check
//! are in `common/greyscale_io.rs`; the device-only benchmark is `greyscale_stream.rs`.
//!
//! ```text
//! cargo run --release --example greyscale                       # the sample photos
//! cargo run --release --example greyscale -- --check            # + verify every pixel
//! cargo run --release --example greyscale -- --frames 120 --size 1920x1080 --backend rayon
//! cargo run --release --example greyscale -- --input my/photos --output /tmp/grey
//! ```

#[path = "common/greyscale_io.rs"]
pub mod io;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::Parser;
use crossbeam::channel::{bounded, Receiver, Sender};
use indicatif::ProgressBar;
use io::{Checked, Res};
use skel::prelude::*;
use skel::{stream::Pipeline, Rgb8};

/// One pixel: sRGB-encoded components in 0..1 on input, grey levels 0..255 on output.
#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
pub struct Pixel {
    pub r: f32,
    pub g: f32,
    pub b: f32,
}

/// ITU-R BT.709 luminance weights.
pub const LUMA: Pixel = Pixel {
    r: 0.2126,
    g: 0.7152,
    b: 0.0722,
};

/// sRGB gamma expansion: an encoded component in 0..1 to linear light.
#[userfn]
pub fn expand(c: f32) -> f32 {
    if c <= 0.04045 {
        c / 12.92
    } else {
        ((c + 0.055) / 1.055).powf(2.4)
    }
}

/// The thesis' map function `Ycom(Luma(Yexp(sRGB)))`: luminance of the linear components,
/// gamma-compressed, scaled to 0..255 and rounded half to even (as `rintf` does).
#[userfn]
pub fn grey(px: Pixel, #[uniform] luma: Pixel) -> Pixel {
    let y = luma.r * expand(px.r) + luma.g * expand(px.g) + luma.b * expand(px.b);
    let c = if y <= 0.0031308 {
        12.92 * y
    } else {
        1.055 * y.powf(1.0 / 2.4) - 0.055
    };
    let v = (c * 255.0).round_ties_even();
    Pixel { r: v, g: v, b: v }
}

/// [`grey`] on a decoded 8-bit pixel, to an 8-bit grey level: what the pipeline maps.
#[userfn]
pub fn grey8(px: Rgb8, #[uniform] luma: Pixel) -> u8 {
    let r = px.r as f32 / 255.0;
    let g = px.g as f32 / 255.0;
    let b = px.b as f32 / 255.0;
    let y = grey(Pixel { r, g, b }, luma);
    y.r as u8
}

/// The luminance bin (0..=255) of an 8-bit pixel, for the input statistics.
#[userfn]
pub fn luma_bin(px: Rgb8, #[uniform] luma: Pixel) -> u32 {
    let y = luma.r * px.r as f32 + luma.g * px.g as f32 + luma.b * px.b as f32;
    y.round().min(255.0) as u32
}

#[derive(Parser, Debug)]
#[command(about = "Colour -> greyscale over a stream of images: farms around skel's Map")]
pub struct Args {
    /// Image files or directories of them (.png, .jpg, .jpeg) [default: the sample photos]
    #[arg(long, num_args = 1.., value_name = "PATH")]
    input: Vec<PathBuf>,
    /// Directory for the grey PNGs [default: target/greyscale-out]
    #[arg(long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// Backend for the Map: cpu, rayon, cuda, opencl [default: skel's default backend]
    #[arg(long, value_name = "NAME")]
    backend: Option<Backend>,
    /// Stream N synthetic frames of --size (tiled from the input photos) instead of the photos
    #[arg(long, value_name = "N")]
    frames: Option<usize>,
    /// Size of the synthetic frames, WIDTHxHEIGHT
    #[arg(long, value_name = "WxH", default_value = "1920x1080", value_parser = io::parse_size)]
    size: (u32, u32),
    /// Also write the synthetic frames' output (off by default: they are for throughput)
    #[arg(long)]
    write_synthetic: bool,
    /// Process the whole stream K times (outputs are written once)
    #[arg(long, value_name = "K", default_value_t = 1)]
    repeat: usize,
    /// Streams per Map call (`.streams(k)`; only meaningful on CUDA)
    #[arg(long, value_name = "K")]
    streams: Option<usize>,
    /// Workers per farm [default: one per core]
    #[arg(long, value_name = "W")]
    workers: Option<usize>,
    /// Verify every output pixel against an f64 evaluation of the formula (within 1 level)
    #[arg(long)]
    check: bool,
    #[arg(long, hide = true)]
    stream: bool,
}

/// Where the decode farm gets a frame: a photo, or a prepared synthetic frame to copy.
#[derive(Clone)]
enum Source {
    File(PathBuf),
    Synthetic(Arc<image::RgbImage>),
}

/// The task travelling down the pipeline. Its containers are lent by a pool and go back to
/// it when the frame is dropped (also when a stage fails on it).
struct Frame {
    name: String,
    write: bool,
    rgb: Matrix<Rgb8>,
    out: Matrix<u8>,
    hist: Vector<u32>, // luminance histogram of the input
    pool: Sender<Pair>,
}

/// A pooled frame's containers.
type Pair = (Matrix<Rgb8>, Matrix<u8>, Vector<u32>);
type Pool = (Sender<Pair>, Receiver<Pair>);

impl Drop for Frame {
    fn drop(&mut self) {
        let rgb = std::mem::replace(&mut self.rgb, Matrix::zeroed(0, 0));
        let out = std::mem::replace(&mut self.out, Matrix::zeroed(0, 0));
        let hist = std::mem::replace(&mut self.hist, Vector::zeroed(0));
        let _ = self.pool.send((rgb, out, hist)); // never blocks: room for every frame
    }
}

fn main() -> ExitCode {
    let result = run(Args::parse());
    if let Err(e) = &result {
        eprintln!("greyscale: error: {e}");
    }
    ExitCode::from(u8::from(!matches!(result, Ok(true))))
}

/// Runs the pipeline; `Ok(false)` when `--check` found wrong pixels.
pub fn run(args: Args) -> Res<bool> {
    if args.stream {
        return Err("--stream moved: cargo run --release --example greyscale_stream".into());
    }
    let files = io::collect_images(&args.input)?;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out_dir = (args.output.clone()).unwrap_or_else(|| root.join("target/greyscale-out"));
    let backend = args.backend.map_or_else(skel::default_backend, Ok)?;
    // Before any frame exists: on a fixed CUDA backend, vectors get pinned memory. The
    // default (Auto) opens nothing here: it opens a GPU in the background once the calls
    // show it can pay (0.1-0.3 s of driver set-up), running them on the host meanwhile: no
    // frame waits for a device (a process that started the probe waits for it at exit).
    backend.check()?;
    let cores = std::thread::available_parallelism().map_or(4, |n| n.get());
    let workers = args.workers.unwrap_or(cores);

    let ((w, h), write) = (args.size, args.frames.is_none() || args.write_synthetic);
    let sources: Vec<Source> = match args.frames {
        None => files.iter().cloned().map(Source::File).collect(),
        Some(n) => {
            let base = |f: &PathBuf| io::synthetic_image(f, w, h).map(Arc::new);
            let bases = files.iter().map(base).collect::<Res<Vec<_>>>()?;
            let frame = |i: usize| Source::Synthetic(Arc::clone(&bases[i % bases.len()]));
            (0..n).map(frame).collect()
        }
    };
    let jobs: Vec<(Source, bool)> = (0..args.repeat)
        .flat_map(|rep| sources.iter().map(move |s| (s.clone(), write && rep == 0)))
        .collect();
    if jobs.iter().any(|(_, write)| *write) {
        let err = |e| format!("cannot create {}: {e}", out_dir.display());
        std::fs::create_dir_all(&out_dir).map_err(err)?;
    }
    let (n, photos) = (jobs.len(), files.len());
    println!("greyscale: {n} frame(s) from {photos} photo(s), backend {backend}, {workers} workers per farm");

    let mut map = Map::new(grey8).uniforms((LUMA,)).backend(backend);
    if let Some(k) = args.streams {
        map = map.streams(k);
    }
    let hist = Histogram::new(luma_bin).uniforms((LUMA,)).backend(backend);
    if matches!(backend, Backend::Cuda | Backend::OpenCl) {
        let (t, rgb) = (Instant::now(), Matrix::zeroed(16, 16));
        map.run(&rgb, &mut Matrix::zeroed(16, 16))?;
        hist.run(&rgb, &mut Vector::<u32>::zeroed(256))?;
        println!("kernels ready in {} ms", t.elapsed().as_millis());
    }

    // Containers for the frames in flight, allocated once (pinned with CUDA). Decode waits
    // for a free pair (in its busy time); no deadlock, as the pool holds more pairs than the
    // decode farm holds frames (workers + channel capacity 2).
    let (t, pairs) = (Instant::now(), 2 * workers + 4);
    let pool: Pool = bounded(pairs);
    let (r, c) = args.frames.map_or((0, 0), |_| (h as usize, w as usize));
    let counts = || Vector::zeroed(256); // the input's luminance histogram
    let pair = || (Matrix::zeroed(r, c), Matrix::zeroed(r, c), counts());
    (0..pairs).for_each(|_| drop(pool.0.send(pair())));
    println!(
        "{pairs} frame buffers ready in {:.0} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    let bar = ProgressBar::new(n as u64);
    let (check, out_dir) = (args.check, out_dir.as_path());
    let placed = io::Placed::default();
    let report = Pipeline::from_iter(jobs.into_iter().enumerate())
        .farm(workers, |job| load(job, &pool))
        .name("decode")
        .stage(|mut f: Frame| {
            map.run(&f.rgb, &mut f.out)?;
            placed.note("map", backend, &bar);
            hist.run(&f.rgb, &mut f.hist)?;
            placed.note("histogram", backend, &bar);
            Ok(f)
        })
        .name("map+histogram (skel)")
        .farm(workers, |f| finish(f, check, out_dir, &bar))
        .name("check+encode")
        .progress(|done| bar.set_position(done as u64))
        .run()?;
    bar.finish_and_clear();
    println!("{report}");
    println!("where each stage ran:");
    println!("  decode, check+encode: host threads, {workers} per farm");
    println!("  map+histogram (skel): {}", placed.line(backend));
    if let Some(s) = report.busiest() {
        let ms = s.busy_per_item().as_secs_f64() * 1e3 / s.workers() as f64;
        let name = s.name().unwrap_or("?");
        println!("  bound by {name}: {ms:.1} ms/frame of busy time per worker");
    }
    let mut all = Checked::default();
    report.into_outputs().into_iter().for_each(|c| all.add(c));
    Ok(!check || all.print())
}

/// Decode farm: a photo decoded, or a synthetic frame copied (as a producer would), into
/// containers from the pool.
fn load((i, (source, write)): (usize, (Source, bool)), pool: &Pool) -> skel::Result<Frame> {
    let (name, img) = match source {
        Source::File(path) => {
            let img = io::decode(&path).map_err(Error::other)?;
            let name = path.file_stem().unwrap_or_default().to_string_lossy();
            (name.into_owned(), Arc::new(img))
        }
        Source::Synthetic(img) => (format!("synthetic-{i:05}"), img),
    };
    let (mut rgb, mut out, hist) = pool.1.recv().map_err(Error::other)?;
    let (rows, cols) = (img.height() as usize, img.width() as usize);
    // The pooled buffers are pinned on a fixed CUDA backend; on the default one they were
    // made before Auto opened a GPU, so they are pageable, and the library uploads them
    // through page-locked buffers of its own (pinning them now would cost more than it
    // saves).
    if (rgb.rows(), rgb.cols()) == (rows, cols) {
        rgb.copy_from_image(&*img)?;
    } else {
        (rgb, out) = (Matrix::from_image(&*img), Matrix::zeroed(rows, cols));
    }
    Ok(Frame {
        name,
        write,
        rgb,
        out,
        hist,
        pool: pool.0.clone(),
    })
}

/// Check + encode farm: reads the Map result and the histogram (on a device backend, the
/// copy-back), checks them and writes the PNG.
fn finish(f: Frame, check: bool, out_dir: &Path, bar: &ProgressBar) -> skel::Result<Checked> {
    let hist = f.hist.try_as_slice()?;
    let pixels: u64 = hist.iter().map(|&c| u64::from(c)).sum();
    let checked = match check {
        true if pixels != f.rgb.len() as u64 => return Err(Error::other("histogram lost pixels")),
        true => Checked::frame8(&f.name, &f.rgb, &f.out)?,
        false => Checked::default(),
    };
    if f.write {
        let img = f.out.to_image()?;
        let mean = img.iter().map(|&v| f64::from(v)).sum::<f64>() / img.len().max(1) as f64;
        let path = out_dir.join(format!("{}.png", f.name));
        img.save(&path).map_err(Error::other)?;
        let sum: u64 = (0..256).map(|v| v as u64 * u64::from(hist[v])).sum();
        let ((w, h), mean_in) = (img.dimensions(), sum as f64 / pixels.max(1) as f64);
        let what = format!("{w}x{h}, mean luma in {mean_in:.1}, mean grey out {mean:.1}");
        bar.suspend(|| println!("  wrote {} ({what})", path.display()));
    }
    Ok(checked)
}
