//! Greyscale: the image-stream pipeline of the MultiStream thesis (Parisi 2015, appendix B),
//! with skel's `Map` in place of SkePU's and four crossbeam-connected threads in place of
//! FastFlow's `ff_pipeline`.
//!
//! ```text
//! S1 load ──► S2 Map(grey) on skel ──► S3 CPU work ──► S4 collect, convert, write
//! (decode)    (any backend)           (independent    (reads the Map result: on a
//!                                       of S2's output) device backend, the copy-back)
//! ```
//!
//! * S1 decodes a photo (or copies a prepared synthetic frame) into a `Vector<Pixel>` of
//!   sRGB-encoded components scaled to 0..1 (the thesis divides by 255 inside the kernel; we
//!   do it while decoding, so the kernel sees the same values).
//! * S2 runs `Map::new(grey).uniforms((LUMA,))`: gamma expansion, BT.709 luminance, gamma
//!   compression, scale to 0..255 and round (ties to even, as `rintf` does in the thesis).
//!   As in the thesis, the output is a `Pixel` with r = g = b = grey level.
//! * S3 is the thesis' "the CPU is free" stage: it works on task data that the Map does not
//!   produce (statistics of the input frame: 256-bin histogram and mean of 8-bit luma Y'),
//!   so on a GPU backend it overlaps the kernel and the copy-back.
//! * S4 reads the Map result (on a device backend this is what brings it back), converts it
//!   to an 8-bit luma buffer, checks it against an f64 reference with `--check`, and writes
//!   an 8-bit grey PNG.
//!
//! Note: the thesis' listing computes the compression as `powf(y * 1.055, 1/2.4) - 0.055`;
//! the sRGB standard (and this example) uses `1.055 * y^(1/2.4) - 0.055`.
//!
//! ```text
//! cargo run --release --example greyscale                       # the sample photos
//! cargo run --release --example greyscale -- --check            # + verify every pixel
//! cargo run --release --example greyscale -- --frames 120 --size 1920x1080 --backend rayon
//! cargo run --release --example greyscale -- --input my/photos --output /tmp/grey
//! ```
//!
//! ## Stream mode: throughput against the transfer bound
//!
//! `--frames N --stream` measures the device pipeline alone, as a camera feeding pinned
//! buffers would drive it. Before the clock starts, N distinct frames (input and output) are
//! prepared in pinned host memory and the kernel is warmed up. Each pass (`--repeat R`
//! passes) then sends the frames through the same four stages with no per-pixel CPU work:
//!
//! * S1 marks the next input as freshly written by the producer (it rewrites one pixel: the
//!   device copy becomes stale, so the whole frame is really uploaded again);
//! * S2 issues `Map(grey)` asynchronously with `.download(true)` (and `.streams(k)` with
//!   `--streams k`): on CUDA the call is cut into k chunks whose uploads, kernels and
//!   downloads overlap, and the next frames are issued while they run;
//! * S3 passes the frame on; S4 waits for the result (the chunks' downloads).
//!
//! It prints ms/frame (best pass) against the bound measured in the same process right
//! after: pure pinned copies of a frame's bytes each way (`skel::debug::copy_bound`) and the
//! kernel alone (device-resident calls), `max(upload, kernel, download)` per frame, as
//! "x% of transfer bound". `--check` verifies every 97th pixel of each frame and all pixels
//! of the first and the last, after each pass (outside its clock). With `SKEL_TRACE` set,
//! the CUDA timeline of the run is written for `skel_trace`.
//!
//! ```text
//! cargo run --release --features cuda --example greyscale -- \
//!     --backend cuda --frames 60 --stream --streams 4 --repeat 3 --check
//! SKEL_TRACE=trace.json cargo run --release --features cuda --example greyscale -- \
//!     --backend cuda --frames 60 --stream --streams 4
//! cargo run --release --example skel_trace -- trace.json -o timeline.svg
//! cargo run --release --example greyscale -- --backend rayon --frames 8 --size 640x360 --stream --check
//! ```

use std::error::Error;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use crossbeam::channel::{bounded, unbounded, Receiver, Sender};
use indicatif::{ProgressBar, ProgressStyle};
use skel::prelude::*;

type BoxError = Box<dyn Error + Send + Sync>;
type Res<T> = std::result::Result<T, BoxError>;

/// One pixel: sRGB-encoded components in 0..1 on input, grey levels 0..255 on output.
#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
struct Pixel {
    r: f32,
    g: f32,
    b: f32,
}

/// ITU-R BT.709 luminance weights (the thesis' `LUMA` constant).
const LUMA: Pixel = Pixel {
    r: 0.2126,
    g: 0.7152,
    b: 0.0722,
};

/// Capacity of each channel between stages: frames in flight per link.
const CHANNEL_CAPACITY: usize = 2;

/// Channel capacity in stream mode: S2 only issues (the Map runs asynchronously), so the
/// links must hold enough frames for S2 to run a few frames ahead of S4 and keep the copy
/// engines busy while S4 waits.
const STREAM_CHANNEL_CAPACITY: usize = 4;

/// Stream-mode `--check` looks at every this-many-th pixel (prime, so the sample does not
/// line up with the period of the tiled frames).
const CHECK_STRIDE: usize = 97;

/// Device-resident calls timed for the kernel-alone bound.
const KERNEL_CALLS: usize = 20;

/// Pixels of the warm-up call: enough to reach the device, too few to be timed.
const WARM_UP_PIXELS: usize = 1 << 16;

/// How far (in pixels) each reuse of a synthetic base is rotated, so that frames made from
/// the same photo are not the same bytes (prime: it does not match the tiles' period).
const ROTATE_STEP: usize = 104_729;

/// The most streams one call may use (`.streams(k)` accepts 1..=16).
const MAX_STREAMS: usize = 16;

/// The thesis' map function `Ycom(Luma(Yexp(sRGB)))`, written once for every backend.
#[userfn]
fn grey(px: Pixel, #[uniform] luma: Pixel) -> Pixel {
    // Gamma expansion: sRGB-encoded -> linear light.
    let r = if px.r <= 0.04045 {
        px.r / 12.92
    } else {
        ((px.r + 0.055) / 1.055).powf(2.4)
    };
    let g = if px.g <= 0.04045 {
        px.g / 12.92
    } else {
        ((px.g + 0.055) / 1.055).powf(2.4)
    };
    let b = if px.b <= 0.04045 {
        px.b / 12.92
    } else {
        ((px.b + 0.055) / 1.055).powf(2.4)
    };
    // Relative luminance (BT.709 weights, passed as a uniform).
    let y = r * luma.r + g * luma.g + b * luma.b;
    // Gamma compression back to sRGB, then to 0..255, rounded half to even like rintf.
    let c = if y <= 0.0031308 {
        12.92 * y
    } else {
        1.055 * y.powf(1.0 / 2.4) - 0.055
    };
    let v = (c * 255.0).round_ties_even();
    Pixel { r: v, g: v, b: v }
}

/// The same per-pixel formula, evaluated straightforwardly in f64: the `--check` oracle.
fn grey_reference(r: u8, g: u8, b: u8) -> u8 {
    fn expand(c: u8) -> f64 {
        let c = f64::from(c) / 255.0;
        if c <= 0.04045 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    }
    let y = 0.2126 * expand(r) + 0.7152 * expand(g) + 0.0722 * expand(b);
    let c = if y <= 0.0031308 {
        12.92 * y
    } else {
        1.055 * y.powf(1.0 / 2.4) - 0.055
    };
    (c * 255.0).round_ties_even().clamp(0.0, 255.0) as u8
}

#[derive(Parser, Debug)]
#[command(
    about = "Colour -> greyscale over a stream of images: a 4-stage pipeline around skel's Map",
    after_help = "Without --frames, converts the photos given by --input and writes <stem>.png \
                  (8-bit grey) into --output. With --frames N, streams N synthetic frames of \
                  --size made by scaling and tiling those photos (throughput runs)."
)]
struct Args {
    /// Image files or directories of them (.png, .jpg, .jpeg) [default: examples/images]
    #[arg(long, num_args = 1.., value_name = "PATH")]
    input: Vec<PathBuf>,

    /// Directory for the grey PNGs [default: target/greyscale-out]
    #[arg(long, value_name = "DIR")]
    output: Option<PathBuf>,

    /// Backend for the Map: cpu, rayon, cuda, opencl [default: skel's default backend]
    #[arg(long, value_name = "NAME")]
    backend: Option<Backend>,

    /// Stream N synthetic frames of --size (made from the input photos) instead of the photos
    #[arg(long, value_name = "N")]
    frames: Option<usize>,

    /// Size of the synthetic frames, WIDTHxHEIGHT
    #[arg(long, value_name = "WxH", default_value = "1920x1080", value_parser = parse_size)]
    size: (u32, u32),

    /// Also write the synthetic frames' output (off by default: they are for throughput)
    #[arg(long)]
    write_synthetic: bool,

    /// Process the whole stream K times (outputs are written once; with --stream, each pass
    /// is timed and the best is reported)
    #[arg(long, value_name = "K", default_value_t = 1)]
    repeat: usize,

    /// Streams per Map call (`.streams(k)`; only meaningful on CUDA)
    #[arg(long, value_name = "K")]
    streams: Option<usize>,

    /// Verify every output pixel against an f64 evaluation of the formula (within 1 level);
    /// with --stream, a sample of each frame and all of the first and last
    #[arg(long)]
    check: bool,

    /// Throughput mode (needs --frames): prepared pinned frames, asynchronous Map calls, no
    /// per-pixel CPU work; reports ms/frame against the transfer bound measured in-process
    #[arg(long)]
    stream: bool,
}

/// Rejects option combinations that cannot run, before any work is done.
fn validate(args: &Args) -> std::result::Result<(), String> {
    if args.repeat == 0 {
        return Err("--repeat must be at least 1".into());
    }
    if args.stream {
        match args.frames {
            None => {
                return Err(
                    "--stream needs --frames N: it streams N prepared synthetic frames".into(),
                )
            }
            Some(0) => return Err("nothing to do: --frames 0".into()),
            Some(_) => {}
        }
        if args.write_synthetic {
            return Err(
                "--write-synthetic does not apply to --stream: the stream mode writes no images"
                    .into(),
            );
        }
    }
    Ok(())
}

fn parse_size(s: &str) -> std::result::Result<(u32, u32), String> {
    let bad = || format!("expected WIDTHxHEIGHT such as 1920x1080, got {s:?}");
    let (w, h) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let w: u32 = w.trim().parse().map_err(|_| bad())?;
    let h: u32 = h.trim().parse().map_err(|_| bad())?;
    if w == 0 || h == 0 {
        return Err(format!("frame size must be positive, got {s:?}"));
    }
    Ok((w, h))
}

/// Where S1 gets a frame from.
enum Source {
    File(PathBuf),
    /// A prepared synthetic frame (sRGB in 0..1); S1 copies it, as a producer would.
    Synthetic(Arc<Vec<Pixel>>),
}

/// One unit of work for S1.
struct Job {
    name: String,
    source: Source,
    size: (u32, u32),
    write: bool,
}

/// The task that travels down the pipeline (the thesis' `sv_t *task`).
struct Frame {
    name: String,
    width: u32,
    height: u32,
    write: bool,
    rgb: Vector<Pixel>,
    grey: Vector<Pixel>,
    /// Mean 8-bit luma Y' of the input, from S3.
    input_mean: f64,
}

/// Busy time and work of one stage.
#[derive(Default, Clone, Copy)]
struct Clock {
    busy: Duration,
    frames: usize,
    pixels: u64,
}

impl Clock {
    fn add(&mut self, since: Instant, pixels: u64) {
        self.busy += since.elapsed();
        self.frames += 1;
        self.pixels += pixels;
    }
}

/// What S4 found, for the summary and `--check`.
#[derive(Default)]
struct Collected {
    clock: Clock,
    written: Vec<(PathBuf, u32, u32, f64, f64)>,
    checked_pixels: u64,
    bad_pixels: u64,
    max_diff: u8,
    examples: Vec<String>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("greyscale: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the pipeline; `Ok(false)` when `--check` found wrong pixels.
fn run(args: Args) -> Res<bool> {
    validate(&args)?;
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let inputs = if args.input.is_empty() {
        vec![manifest.join("examples").join("images")]
    } else {
        args.input.clone()
    };
    let files = collect_images(&inputs)?;
    let out_dir = args
        .output
        .clone()
        .unwrap_or_else(|| manifest.join("target").join("greyscale-out"));

    let backend = match args.backend {
        Some(b) => b,
        None => skel::default_backend()?,
    };
    // Before any frame is allocated: with CUDA in use, vectors get pinned host memory.
    backend.check()?;
    if let (true, Some(n)) = (args.stream, args.frames) {
        return run_stream(&args, n, backend, &files);
    }

    // The job list: photos, or synthetic frames made from them.
    let mut jobs = Vec::new();
    let mut prep = Duration::ZERO;
    match args.frames {
        None => {
            for rep in 0..args.repeat {
                for f in &files {
                    let name = f
                        .file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_else(|| "image".into());
                    jobs.push(Job {
                        name,
                        source: Source::File(f.clone()),
                        size: (0, 0),
                        write: rep == 0,
                    });
                }
            }
        }
        Some(n) => {
            let t = Instant::now();
            let (w, h) = args.size;
            let bases = files
                .iter()
                .map(|f| synthetic_base(f, w, h).map(Arc::new))
                .collect::<Res<Vec<_>>>()?;
            prep = t.elapsed();
            for rep in 0..args.repeat {
                for i in 0..n {
                    jobs.push(Job {
                        name: format!("synthetic-{i:05}"),
                        source: Source::Synthetic(Arc::clone(&bases[i % bases.len()])),
                        size: (w, h),
                        write: args.write_synthetic && rep == 0,
                    });
                }
            }
        }
    }
    if jobs.is_empty() {
        return Err("nothing to do: --frames 0".into());
    }
    if jobs.iter().any(|j| j.write) {
        std::fs::create_dir_all(&out_dir)
            .map_err(|e| format!("cannot create output directory {}: {e}", out_dir.display()))?;
    }

    let total = jobs.len();
    let bar = if total > 4 {
        let bar = ProgressBar::new(total as u64);
        if let Ok(style) =
            ProgressStyle::with_template("{bar:40} {pos}/{len} frames {per_sec} eta {eta}")
        {
            bar.set_style(style);
        }
        bar
    } else {
        ProgressBar::hidden()
    };
    match args.frames {
        Some(_) => println!(
            "greyscale: {total} synthetic {}x{} frames from {} photo(s) (prepared in {:.0} ms), backend {backend}",
            args.size.0,
            args.size.1,
            files.len(),
            prep.as_secs_f64() * 1e3
        ),
        None => println!(
            "greyscale: {total} frame(s) from {} photo(s), backend {backend}",
            files.len()
        ),
    }

    let (tx1, rx1) = bounded::<Frame>(CHANNEL_CAPACITY);
    let (tx2, rx2) = bounded::<Frame>(CHANNEL_CAPACITY);
    let (tx3, rx3) = bounded::<Frame>(CHANNEL_CAPACITY);
    let (tx_back, rx_back) = unbounded::<Frame>();
    let streams = args.streams;
    let check = args.check;
    let start = Instant::now();
    let (c1, c2, c3, collected) = std::thread::scope(|s| {
        let h1 = s.spawn(move || stage_load(jobs, tx1, rx_back));
        let h2 = s.spawn(move || stage_map(rx1, tx2, backend, streams, None));
        let h3 = s.spawn(move || stage_cpu(rx2, tx3));
        let bar4 = bar.clone();
        let out = out_dir.as_path();
        let h4 = s.spawn(move || stage_collect(rx3, tx_back, out, check, &bar4));
        let joined = |name: &str, r: std::thread::Result<Res<Clock>>| -> Res<Clock> {
            r.map_err(|_| format!("stage {name} panicked"))?
        };
        // Join all four before reporting, so the first real error is the one shown.
        let r1 = joined("1 (load)", h1.join());
        let r2 = joined("2 (map)", h2.join());
        let r3 = joined("3 (cpu)", h3.join());
        let r4 = h4
            .join()
            .map_err(|_| BoxError::from("stage 4 (collect) panicked"))
            .and_then(|r| r);
        Ok::<_, BoxError>((r1?, r2?, r3?, r4?))
    })?;
    let wall = start.elapsed();
    bar.finish_and_clear();

    for (path, w, h, mean_in, mean_out) in &collected.written {
        println!(
            "  wrote {} ({w}x{h}, mean luma in {mean_in:.1}, mean grey out {mean_out:.1})",
            path.display()
        );
    }
    report(
        &[
            ("1 load/decode", c1),
            ("2 map (skel)", c2),
            ("3 cpu stats", c3),
            ("4 collect+png", collected.clock),
        ],
        wall,
        backend,
    );

    Ok(!check || print_check(&collected))
}

/// Prints the `--check` verdict; `false` when some pixels were wrong.
fn print_check(col: &Collected) -> bool {
    if col.bad_pixels == 0 {
        println!(
            "check: ok, {} pixels within 1 grey level of the f64 reference (max difference {})",
            col.checked_pixels, col.max_diff
        );
        return true;
    }
    eprintln!(
        "check: FAILED, {} of {} pixels differ from the f64 reference by more than 1 level (max {}):",
        col.bad_pixels, col.checked_pixels, col.max_diff
    );
    for e in &col.examples {
        eprintln!("  {e}");
    }
    false
}

/// The files to process, in a stable order: directories are listed (png/jpg/jpeg, sorted).
fn collect_images(inputs: &[PathBuf]) -> Res<Vec<PathBuf>> {
    let mut files = Vec::new();
    for p in inputs {
        let meta = std::fs::metadata(p).map_err(|e| format!("input {}: {e}", p.display()))?;
        if meta.is_dir() {
            let mut found = Vec::new();
            let entries =
                std::fs::read_dir(p).map_err(|e| format!("input {}: {e}", p.display()))?;
            for entry in entries {
                let path = entry
                    .map_err(|e| format!("input {}: {e}", p.display()))?
                    .path();
                let is_image = path
                    .extension()
                    .and_then(|e| e.to_str())
                    .map(|e| matches!(e.to_ascii_lowercase().as_str(), "png" | "jpg" | "jpeg"))
                    .unwrap_or(false);
                if is_image && path.is_file() {
                    found.push(path);
                }
            }
            if found.is_empty() {
                return Err(format!("no .png/.jpg/.jpeg images in {}", p.display()).into());
            }
            found.sort();
            files.extend(found);
        } else {
            files.push(p.clone());
        }
    }
    Ok(files)
}

/// Decodes one image file to 8-bit RGB.
fn decode(path: &Path) -> Res<image::RgbImage> {
    let img =
        image::open(path).map_err(|e| format!("cannot read image {}: {e}", path.display()))?;
    Ok(img.to_rgb8())
}

/// 8-bit sRGB to the pipeline's `Pixel` (0..1).
fn to_pixel(p: &image::Rgb<u8>) -> Pixel {
    Pixel {
        r: f32::from(p[0]) / 255.0,
        g: f32::from(p[1]) / 255.0,
        b: f32::from(p[2]) / 255.0,
    }
}

/// A `w`x`h` frame: the photo scaled to half the frame's height, tiled over it.
fn synthetic_base(path: &Path, w: u32, h: u32) -> Res<Vec<Pixel>> {
    let photo = decode(path)?;
    let th = (h / 2).max(1);
    let tw = ((u64::from(photo.width()) * u64::from(th)) / u64::from(photo.height().max(1)))
        .clamp(1, u64::from(u32::MAX)) as u32;
    let tile = image::imageops::resize(&photo, tw, th, image::imageops::FilterType::Triangle);
    let tile: Vec<Pixel> = tile.pixels().map(to_pixel).collect();
    let (tw, th) = (tw as usize, th as usize);
    let mut frame = Vec::with_capacity(w as usize * h as usize);
    for y in 0..h as usize {
        let row = &tile[(y % th) * tw..(y % th + 1) * tw];
        frame.extend((0..w as usize).map(|x| row[x % tw]));
    }
    Ok(frame)
}

/// S1: load (decode) each image or copy a synthetic frame; send it on.
///
/// Containers of finished frames come back from S4 on `recycled` and are refilled, so a
/// long stream neither allocates per frame nor (on a device backend) re-allocates device
/// buffers; only the pixels are rewritten.
fn stage_load(jobs: Vec<Job>, tx: Sender<Frame>, recycled: Receiver<Frame>) -> Res<Clock> {
    let mut clock = Clock::default();
    for job in jobs {
        let t = Instant::now();
        let mut spare = recycled.try_recv().ok();
        let (rgb, out, (width, height)) = match &job.source {
            Source::File(path) => {
                let img = decode(path)?;
                let n = img.pixels().len();
                let (mut rgb, out) = reuse(spare.take(), n);
                for (d, p) in rgb.as_mut_slice().iter_mut().zip(img.pixels()) {
                    *d = to_pixel(p);
                }
                (rgb, out, img.dimensions())
            }
            Source::Synthetic(base) => {
                let (mut rgb, out) = reuse(spare.take(), base.len());
                rgb.as_mut_slice().copy_from_slice(base);
                (rgb, out, job.size)
            }
        };
        let n = rgb.len();
        let frame = Frame {
            name: job.name,
            width,
            height,
            write: job.write,
            rgb,
            grey: out,
            input_mean: 0.0,
        };
        clock.add(t, n as u64);
        if tx.send(frame).is_err() {
            break; // a later stage failed; its error is reported
        }
    }
    Ok(clock)
}

/// The containers of a finished frame if they have `n` pixels, else new ones.
fn reuse(spare: Option<Frame>, n: usize) -> (Vector<Pixel>, Vector<Pixel>) {
    match spare {
        Some(f) if f.rgb.len() == n && f.grey.len() == n => (f.rgb, f.grey),
        _ => (Vector::zeroed(n), Vector::zeroed(n)),
    }
}

/// S2: the data-parallel part, on skel. Does not touch the host copy of the result.
///
/// `download: Some(true)` (stream mode) makes each call copy its result back chunk by chunk
/// as soon as it is computed, so `run` only issues the work and returns.
fn stage_map(
    rx: Receiver<Frame>,
    tx: Sender<Frame>,
    backend: Backend,
    streams: Option<usize>,
    download: Option<bool>,
) -> Res<Clock> {
    let mut map = Map::new(grey).uniforms((LUMA,)).backend(backend);
    if let Some(k) = streams {
        map = map.streams(k);
    }
    if let Some(eager) = download {
        map = map.download(eager);
    }
    let mut clock = Clock::default();
    for mut frame in rx {
        let t = Instant::now();
        map.run(&frame.rgb, &mut frame.grey)
            .map_err(|e| format!("Map(grey) on {} ({backend}): {e}", frame.name))?;
        clock.add(t, frame.rgb.len() as u64);
        if tx.send(frame).is_err() {
            break;
        }
    }
    Ok(clock)
}

/// S3: CPU work independent of the Map's output: 8-bit luma histogram and mean of the input.
fn stage_cpu(rx: Receiver<Frame>, tx: Sender<Frame>) -> Res<Clock> {
    let mut clock = Clock::default();
    for mut frame in rx {
        let t = Instant::now();
        let mut hist = [0u64; 256];
        let rgb = frame
            .rgb
            .try_as_slice()
            .map_err(|e| format!("{}: reading the input: {e}", frame.name))?;
        for p in rgb {
            // Luma Y' of the gamma-encoded components: a cheap brightness estimate.
            let y = 255.0 * (LUMA.r * p.r + LUMA.g * p.g + LUMA.b * p.b);
            hist[(y.round() as usize).min(255)] += 1;
        }
        let n: u64 = hist.iter().sum();
        let sum: u64 = hist.iter().enumerate().map(|(v, &c)| v as u64 * c).sum();
        frame.input_mean = if n == 0 { 0.0 } else { sum as f64 / n as f64 };
        clock.add(t, n);
        if tx.send(frame).is_err() {
            break;
        }
    }
    Ok(clock)
}

/// S4: read the Map result, convert to 8-bit grey, check, write PNG.
fn stage_collect(
    rx: Receiver<Frame>,
    recycle: Sender<Frame>,
    out_dir: &Path,
    check: bool,
    bar: &ProgressBar,
) -> Res<Collected> {
    let mut col = Collected::default();
    for frame in rx {
        let t = Instant::now();
        // On a device backend this is the copy-back, where device errors surface.
        let result = frame
            .grey
            .try_as_slice()
            .map_err(|e| format!("{}: copying the result back: {e}", frame.name))?;
        let luma: Vec<u8> = result.iter().map(|p| p.r as u8).collect();
        let mean_out = if luma.is_empty() {
            0.0
        } else {
            luma.iter().map(|&v| u64::from(v)).sum::<u64>() as f64 / luma.len() as f64
        };
        if check {
            let rgb = frame
                .rgb
                .try_as_slice()
                .map_err(|e| format!("{}: reading the input: {e}", frame.name))?;
            check_frame(&frame, rgb, result, &mut col, 1);
        }
        if frame.write {
            let path = out_dir.join(format!("{}.png", frame.name));
            let img = image::GrayImage::from_raw(frame.width, frame.height, luma)
                .ok_or_else(|| format!("{}: output buffer has the wrong size", frame.name))?;
            img.save(&path)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            col.written
                .push((path, frame.width, frame.height, frame.input_mean, mean_out));
        }
        col.clock.add(t, result.len() as u64);
        bar.inc(1);
        let _ = recycle.send(frame); // S1 may have finished already: then it is dropped
    }
    Ok(col)
}

/// Compares every `step`th pixel of one frame (every pixel with 1) with [`grey_reference`].
fn check_frame(frame: &Frame, rgb: &[Pixel], result: &[Pixel], col: &mut Collected, step: usize) {
    let width = frame.width.max(1) as usize;
    let pixels = rgb.iter().zip(result).enumerate().step_by(step.max(1));
    for (i, (src, out)) in pixels {
        // The inputs are k/255 in f32, so this recovers the 8-bit value exactly.
        let to8 = |c: f32| (c * 255.0).round() as u8;
        let (r, g, b) = (to8(src.r), to8(src.g), to8(src.b));
        let want = grey_reference(r, g, b);
        let consistent = out.r == out.g && out.g == out.b && out.r.fract() == 0.0;
        let got = out.r.clamp(0.0, 255.0) as u8;
        let diff = got.abs_diff(want);
        col.max_diff = col.max_diff.max(diff);
        col.checked_pixels += 1;
        if diff > 1 || !consistent {
            col.bad_pixels += 1;
            if col.examples.len() < 10 {
                col.examples.push(format!(
                    "{} pixel ({}, {}): rgb ({r}, {g}, {b}) -> got {:?}, want {want}",
                    frame.name,
                    i % width,
                    i / width,
                    out
                ));
            }
        }
    }
}

/// `--stream`: `n` prepared frames through the pipeline `--repeat` times, then the bound.
fn run_stream(args: &Args, n: usize, backend: Backend, files: &[PathBuf]) -> Res<bool> {
    let t = Instant::now();
    let (w, h) = args.size;
    let bases = files
        .iter()
        .map(|f| synthetic_base(f, w, h))
        .collect::<Res<Vec<_>>>()?;
    let mut frames = prepare_frames(&bases, n, args.size)?;
    drop(bases);
    warm_up(backend)?;
    println!(
        "greyscale: stream of {n} prepared {w}x{h} frames from {} photo(s) (prepared and warmed up in {:.0} ms), backend {backend}",
        files.len(),
        t.elapsed().as_secs_f64() * 1e3
    );
    let frame_bytes = w as usize * h as usize * std::mem::size_of::<Pixel>();
    if backend == Backend::Cuda {
        // Measured once per device on first use: here, rather than inside the first pass.
        println!(
            "{}",
            model_line(&skel::debug::stream_model()?, frame_bytes, args.streams)
        );
    }

    let mut passes = Vec::with_capacity(args.repeat);
    let mut best: Option<(Duration, [(&str, Clock); 4])> = None;
    let mut col = Collected::default();
    for pass in 0..args.repeat {
        let done = stream_pass(frames, pass, backend, args.streams)?;
        frames = done.frames;
        if frames.len() != n {
            return Err(format!("pass {pass}: {} of {n} frames came back", frames.len()).into());
        }
        passes.push(done.took.as_secs_f64() * 1e3 / n as f64);
        if best.as_ref().map_or(true, |(took, _)| done.took < *took) {
            best = Some((done.took, done.clocks));
        }
        if args.check {
            check_stream(&frames, &mut col)?;
        }
    }
    if let Some((took, clocks)) = &best {
        report(clocks, *took, backend);
    }
    let best_ms = passes.iter().copied().fold(f64::INFINITY, f64::min);
    println!("{}", stream_line(n, args.size, args.streams, &passes));

    if backend == Backend::Cuda {
        // Right after the run, in the same process: the same device, driver and host state.
        let copies = skel::debug::copy_bound(frame_bytes, frame_bytes)?;
        let first = frames
            .first_mut()
            .ok_or("no frames to time the kernel on")?;
        let kernel_ms = time_kernel(first, backend, args.streams, KERNEL_CALLS)?;
        let bound = Bound {
            up_ms: copies.up_ms,
            down_ms: copies.down_ms,
            both_ms: copies.both_ms,
            kernel_ms,
        };
        for line in bound_lines(&bound, best_ms) {
            println!("{line}");
        }
    } else {
        println!("bound: only measured on CUDA");
    }
    if let Some(path) = skel::trace::flush()? {
        println!("trace: wrote {}", path.display());
    }
    Ok(!args.check || print_check(&col))
}

/// `n` distinct frames and their outputs, allocated after the backend check so that on
/// CUDA they are pinned: frame `i` is base `i % bases.len()`, rotated by a multiple of
/// [`ROTATE_STEP`] pixels for each reuse of that base (cheap, and no two frames alike).
fn prepare_frames(bases: &[Vec<Pixel>], n: usize, (width, height): (u32, u32)) -> Res<Vec<Frame>> {
    if bases.is_empty() {
        return Err("no photos to make frames from".into());
    }
    let mut frames = Vec::with_capacity(n);
    for i in 0..n {
        let base = &bases[i % bases.len()];
        let len = base.len();
        let shift = ((i / bases.len()) * ROTATE_STEP) % len.max(1);
        let mut rgb = Vector::zeroed(len);
        let px = rgb.try_as_mut_slice()?;
        px[..len - shift].copy_from_slice(&base[shift..]);
        px[len - shift..].copy_from_slice(&base[..shift]);
        frames.push(Frame {
            name: format!("stream-{i:05}"),
            width,
            height,
            write: false,
            rgb,
            grey: Vector::zeroed(len),
            input_mean: 0.0,
        });
    }
    Ok(frames)
}

/// One small Map call before anything is timed, so that compiling or loading the kernel is
/// not in the first pass; its result, a neutral grey ramp, must come back as is.
fn warm_up(backend: Backend) -> Res<()> {
    let level = |i: usize| f32::from((i % 256) as u8);
    let input = Vector::from_fn(WARM_UP_PIXELS, |i| {
        let v = level(i) / 255.0;
        Pixel { r: v, g: v, b: v }
    });
    let mut out = Vector::zeroed(WARM_UP_PIXELS);
    Map::new(grey)
        .uniforms((LUMA,))
        .backend(backend)
        .run(&input, &mut out)
        .map_err(|e| format!("warm-up Map(grey) on {backend}: {e}"))?;
    let got = out
        .try_as_slice()
        .map_err(|e| format!("warm-up on {backend}: copying the result back: {e}"))?;
    match got
        .iter()
        .enumerate()
        .find(|(i, p)| (p.r - level(*i)).abs() > 1.0)
    {
        Some((i, p)) => Err(format!(
            "warm-up on {backend}: grey level {} came back as {:?}",
            level(i),
            p
        )
        .into()),
        None => Ok(()),
    }
}

/// What one timed pass of the stream left: the frames (for the next pass) and its times.
struct Pass {
    frames: Vec<Frame>,
    /// From S1's start to S4 holding the last result.
    took: Duration,
    clocks: [(&'static str, Clock); 4],
}

/// One pass of the prepared frames through the four stages.
fn stream_pass(
    frames: Vec<Frame>,
    pass: usize,
    backend: Backend,
    streams: Option<usize>,
) -> Res<Pass> {
    let n = frames.len();
    let (tx1, rx1) = bounded::<Frame>(STREAM_CHANNEL_CAPACITY);
    let (tx2, rx2) = bounded::<Frame>(STREAM_CHANNEL_CAPACITY);
    let (tx3, rx3) = bounded::<Frame>(STREAM_CHANNEL_CAPACITY);
    std::thread::scope(|s| {
        let h1 = s.spawn(move || stage_touch(frames, pass, tx1));
        let h2 = s.spawn(move || stage_map(rx1, tx2, backend, streams, Some(true)));
        let h3 = s.spawn(move || stage_forward(rx2, tx3));
        let h4 = s.spawn(move || stage_wait(rx3, n));
        // Join all four before reporting, so the first real error is the one shown.
        let r1 = join_stage("1 (touch)", h1.join());
        let r2 = join_stage("2 (map)", h2.join());
        let r3 = join_stage("3 (forward)", h3.join());
        let r4 = join_stage("4 (wait)", h4.join());
        let ((start, c1), c2, c3, (frames, end, c4)) = (r1?, r2?, r3?, r4?);
        Ok(Pass {
            frames,
            took: end.saturating_duration_since(start),
            clocks: [
                ("1 touch input", c1),
                ("2 map (issue)", c2),
                ("3 forward", c3),
                ("4 wait result", c4),
            ],
        })
    })
}

/// A stage's result, or its panic as an error.
fn join_stage<T>(name: &str, r: std::thread::Result<Res<T>>) -> Res<T> {
    r.map_err(|_| format!("stage {name} panicked"))?
}

/// S1 (stream mode): hands on each prepared frame as a producer that has just written it
/// (a camera filling a pinned buffer). The host write makes the input's device copy stale,
/// so S2's Map really uploads the whole frame. Only the first pixel is rewritten, with a
/// value that changes from pass to pass, so that `--check` would see a stale upload.
/// Returns when the pass started.
fn stage_touch(frames: Vec<Frame>, pass: usize, tx: Sender<Frame>) -> Res<(Instant, Clock)> {
    let start = Instant::now();
    let mut clock = Clock::default();
    for (i, mut frame) in frames.into_iter().enumerate() {
        let t = Instant::now();
        let px = frame
            .rgb
            .try_as_mut_slice()
            .map_err(|e| format!("{}: writing the input: {e}", frame.name))?;
        if let Some(first) = px.first_mut() {
            *first = marker(pass, i);
        }
        clock.add(t, frame.rgb.len() as u64);
        if tx.send(frame).is_err() {
            break; // a later stage failed; its error is reported
        }
    }
    Ok((start, clock))
}

/// The pixel S1 writes into frame `i` in pass `pass`: 8-bit levels scaled to 0..1 like a
/// decoded pixel (so `--check` recovers them exactly), different in consecutive passes.
fn marker(pass: usize, i: usize) -> Pixel {
    let level = |salt: usize| f32::from(((pass * 67 + i * 13 + salt) % 256) as u8) / 255.0;
    Pixel {
        r: level(0),
        g: level(85),
        b: level(170),
    }
}

/// S3 (stream mode): the CPU is free, and stays free: no per-pixel work, so S3 adds no host
/// memory traffic next to the copies'.
fn stage_forward(rx: Receiver<Frame>, tx: Sender<Frame>) -> Res<Clock> {
    let mut clock = Clock::default();
    for frame in rx {
        clock.add(Instant::now(), frame.rgb.len() as u64);
        if tx.send(frame).is_err() {
            break;
        }
    }
    Ok(clock)
}

/// S4 (stream mode): waits for each result (the chunks' downloads) and keeps the frames for
/// the next pass. Returns when it held the last result.
fn stage_wait(rx: Receiver<Frame>, n: usize) -> Res<(Vec<Frame>, Instant, Clock)> {
    let mut frames = Vec::with_capacity(n);
    let mut clock = Clock::default();
    let mut end = Instant::now();
    for frame in rx {
        let t = Instant::now();
        // On a device backend this waits for the copy-back; device errors surface here.
        frame
            .grey
            .try_as_slice()
            .map_err(|e| format!("{}: copying the result back: {e}", frame.name))?;
        end = Instant::now();
        clock.add(t, frame.grey.len() as u64);
        frames.push(frame);
    }
    Ok((frames, end, clock))
}

/// `--check` in stream mode, on a pass's frames once its clock has stopped: every
/// [`CHECK_STRIDE`]th pixel of each frame (pixel 0, S1's marker, included) and all pixels of
/// the first and the last. Not in S4: the f64 reference costs about 0.1 us a pixel, so even
/// the sample of a 1080p frame (21 000 pixels, ~2 ms) takes several times what the device
/// spends on the frame, and S4 would bound the stream.
fn check_stream(frames: &[Frame], col: &mut Collected) -> Res<()> {
    let last = frames.len().saturating_sub(1);
    for (i, frame) in frames.iter().enumerate() {
        let rgb = frame
            .rgb
            .try_as_slice()
            .map_err(|e| format!("{}: reading the input: {e}", frame.name))?;
        let result = frame
            .grey
            .try_as_slice()
            .map_err(|e| format!("{}: reading the result: {e}", frame.name))?;
        let step = if i == 0 || i == last { 1 } else { CHECK_STRIDE };
        check_frame(frame, rgb, result, col, step);
    }
    Ok(())
}

/// The kernel alone: `calls` Map calls on an input already on the device, leaving the
/// result there (`.download(false)`), between two device synchronisations; ms per call.
fn time_kernel(
    frame: &mut Frame,
    backend: Backend,
    streams: Option<usize>,
    calls: usize,
) -> Res<f64> {
    let mut map = Map::new(grey)
        .uniforms((LUMA,))
        .backend(backend)
        .download(false);
    if let Some(k) = streams {
        map = map.streams(k);
    }
    let kernel_err = |e: skel::Error| format!("kernel-alone Map(grey) on {backend}: {e}");
    // An untimed call first: afterwards the result lives on the device only, so the timed
    // calls neither wait for host reads nor copy anything.
    map.run(&frame.rgb, &mut frame.grey).map_err(kernel_err)?;
    skel::debug::synchronize()?;
    let moved = |f: &Frame| {
        let (a, b) = (
            skel::debug::transfers(&f.rgb),
            skel::debug::transfers(&f.grey),
        );
        a.up + a.down + b.up + b.down
    };
    let before = moved(frame);
    let t = Instant::now();
    for _ in 0..calls {
        map.run(&frame.rgb, &mut frame.grey).map_err(kernel_err)?;
    }
    skel::debug::synchronize()?;
    let ms = t.elapsed().as_secs_f64() * 1e3 / calls.max(1) as f64;
    let copied = moved(frame).saturating_sub(before);
    if copied != 0 {
        // Not fatal: the stream's result stands; only this bound is then an overestimate.
        eprintln!(
            "note: the kernel-alone calls copied {copied} bytes, so the kernel time includes copies"
        );
    }
    Ok(ms)
}

/// The transfer bound of one frame, measured in this process.
struct Bound {
    up_ms: f64,
    down_ms: f64,
    both_ms: f64,
    kernel_ms: f64,
}

impl Bound {
    /// The slowest stage: what a perfectly overlapped stream can reach per frame.
    fn per_frame_ms(&self) -> f64 {
        self.up_ms.max(self.kernel_ms).max(self.down_ms)
    }
}

/// `bound_ms` as a percentage of `measured_ms` (100% = at the bound).
fn percent_of(bound_ms: f64, measured_ms: f64) -> f64 {
    100.0 * bound_ms / measured_ms.max(1e-12)
}

/// The stream's result line: best ms/frame, frames/s and every pass.
fn stream_line(
    frames: usize,
    (w, h): (u32, u32),
    streams: Option<usize>,
    passes: &[f64],
) -> String {
    let best = passes.iter().copied().fold(f64::INFINITY, f64::min);
    let k = match streams {
        Some(k) => format!("k={k} stream{}", if k == 1 { "" } else { "s" }),
        None => "k from the cost model".into(),
    };
    let all: Vec<String> = passes.iter().map(|ms| format!("{ms:.3}")).collect();
    format!(
        "stream: {frames} frames {w}x{h}, {k}: {best:.3} ms/frame ({:.0} frames/s), best of {} pass{} [{}]",
        1e3 / best.max(1e-12),
        passes.len(),
        if passes.len() == 1 { "" } else { "es" },
        all.join(", ")
    )
}

/// The bound and how close the stream came to it.
fn bound_lines(b: &Bound, measured_ms: f64) -> [String; 2] {
    [
        format!(
            "bound: upload {:.3} ms, download {:.3} ms, both directions {:.3} ms, kernel {:.3} ms -> {:.3} ms/frame",
            b.up_ms,
            b.down_ms,
            b.both_ms,
            b.kernel_ms,
            b.per_frame_ms()
        ),
        format!(
            "stream: {:.1}% of transfer bound (both-directions bound {:.3} ms: {:.1}%)",
            percent_of(b.per_frame_ms(), measured_ms),
            b.both_ms,
            percent_of(b.both_ms, measured_ms)
        ),
    ]
}

/// The measured cost model, and what it predicts for one frame's call on its own.
fn model_line(m: &skel::debug::StreamModel, frame_bytes: usize, streams: Option<usize>) -> String {
    let (up, kernel, down) = (frame_bytes, 2 * frame_bytes, frame_bytes);
    let k = streams.unwrap_or_else(|| m.best_k(up, kernel, down, MAX_STREAMS));
    format!(
        "model: upload {:.1} GB/s, download {:.1} GB/s, device {:.0} GB/s, {:.1} us/chunk; one frame's call alone at k={k}: {:.3} ms",
        m.h2d_gbps,
        m.d2h_gbps,
        m.device_gbps,
        m.overhead_us,
        m.predict_ms(up, kernel, down, k)
    )
}

struct Row<'a>(&'a str, usize, f64, f64);

impl fmt::Display for Row<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "  {:<16} {:>7} {:>10.3} {:>10.1}",
            self.0, self.1, self.2, self.3
        )
    }
}

/// Per-stage and total timings.
fn report(stages: &[(&str, Clock)], wall: Duration, backend: Backend) {
    println!(
        "  {:<16} {:>7} {:>10} {:>10}   (busy time per stage; backend {backend})",
        "stage", "frames", "ms/frame", "MPixel/s"
    );
    let rate = |pixels: u64, d: Duration| pixels as f64 / 1e6 / d.as_secs_f64().max(1e-12);
    for (name, c) in stages {
        let per = c.busy.as_secs_f64() * 1e3 / c.frames.max(1) as f64;
        println!("{}", Row(name, c.frames, per, rate(c.pixels, c.busy)));
    }
    let frames = stages.last().map(|(_, c)| c.frames).unwrap_or(0);
    let pixels = stages.last().map(|(_, c)| c.pixels).unwrap_or(0);
    let per = wall.as_secs_f64() * 1e3 / frames.max(1) as f64;
    println!("{}", Row("total (wall)", frames, per, rate(pixels, wall)));
    println!(
        "  {:.1} frames/s, {:.1} ms wall",
        frames as f64 / wall.as_secs_f64().max(1e-12),
        wall.as_secs_f64() * 1e3
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_extremes() {
        assert_eq!(grey_reference(0, 0, 0), 0);
        assert_eq!(grey_reference(255, 255, 255), 255);
        // A neutral grey maps to itself.
        for v in [1u8, 10, 50, 128, 200, 254] {
            assert_eq!(grey_reference(v, v, v), v);
        }
    }

    #[test]
    fn userfn_matches_reference() {
        for (r, g, b) in [
            (0u8, 0u8, 0u8),
            (255, 0, 0),
            (0, 255, 0),
            (0, 0, 255),
            (12, 200, 99),
        ] {
            let px = Pixel {
                r: f32::from(r) / 255.0,
                g: f32::from(g) / 255.0,
                b: f32::from(b) / 255.0,
            };
            let out = grey::call(px, LUMA);
            assert!((out.r as u8).abs_diff(grey_reference(r, g, b)) <= 1);
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("640x480"), Ok((640, 480)));
        assert!(parse_size("640").is_err());
        assert!(parse_size("0x5").is_err());
    }

    fn validated(cli: &[&str]) -> std::result::Result<(), String> {
        let args = Args::try_parse_from(std::iter::once("greyscale").chain(cli.iter().copied()))
            .map_err(|e| e.to_string())?;
        validate(&args)
    }

    #[test]
    fn stream_needs_frames() {
        assert!(validated(&[]).is_ok());
        assert!(validated(&["--frames", "8"]).is_ok());
        assert!(validated(&["--frames", "8", "--stream", "--repeat", "3", "--check"]).is_ok());
        let err = validated(&["--stream"]).unwrap_err();
        assert!(err.contains("--frames"), "{err}");
        assert!(validated(&["--stream", "--frames", "0"]).is_err());
        assert!(validated(&["--stream", "--frames", "4", "--write-synthetic"]).is_err());
        assert!(validated(&["--repeat", "0"]).is_err());
    }

    #[test]
    fn stream_report_lines() {
        let line = stream_line(60, (1920, 1080), Some(4), &[0.480, 0.468, 0.470]);
        assert_eq!(
            line,
            "stream: 60 frames 1920x1080, k=4 streams: 0.468 ms/frame (2137 frames/s), \
             best of 3 passes [0.480, 0.468, 0.470]"
        );
        let one = stream_line(8, (640, 360), None, &[2.0]);
        assert!(one.contains("k from the cost model"), "{one}");
        assert!(one.ends_with("best of 1 pass [2.000]"), "{one}");

        let bound = Bound {
            up_ms: 0.451,
            down_ms: 0.452,
            both_ms: 0.495,
            kernel_ms: 0.012,
        };
        assert_eq!(bound.per_frame_ms(), 0.452);
        let [b, pct] = bound_lines(&bound, 0.468);
        assert_eq!(
            b,
            "bound: upload 0.451 ms, download 0.452 ms, both directions 0.495 ms, \
             kernel 0.012 ms -> 0.452 ms/frame"
        );
        assert_eq!(
            pct,
            "stream: 96.6% of transfer bound (both-directions bound 0.495 ms: 105.8%)"
        );
        assert!((percent_of(1.0, 2.0) - 50.0).abs() < 1e-12);
    }

    #[test]
    fn markers_are_exact_levels_that_change_per_pass() {
        for (pass, i) in [(0, 0), (1, 0), (2, 59), (7, 1000)] {
            let m = marker(pass, i);
            for c in [m.r, m.g, m.b] {
                let level = (c * 255.0).round();
                assert_eq!(level / 255.0, c);
            }
            assert_ne!(marker(pass, i), marker(pass + 1, i));
        }
    }

    #[test]
    fn prepared_frames_are_distinct_rotations() {
        let base: Vec<Pixel> = (0..12)
            .map(|i| Pixel {
                r: i as f32,
                g: 0.0,
                b: 0.0,
            })
            .collect();
        let frames = prepare_frames(std::slice::from_ref(&base), 3, (4, 3)).expect("host vectors");
        assert_eq!(frames.len(), 3);
        assert_eq!(frames[0].rgb.to_vec(), base);
        let shift = ROTATE_STEP % base.len();
        let mut rotated = base.clone();
        rotated.rotate_left(shift);
        assert_eq!(frames[1].rgb.to_vec(), rotated);
        assert_ne!(frames[1].rgb.to_vec(), frames[2].rgb.to_vec());
        assert!(frames.iter().all(|f| f.grey.len() == base.len()));
    }
}
