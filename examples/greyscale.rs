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

    /// Process the whole stream K times (outputs are written once)
    #[arg(long, value_name = "K", default_value_t = 1)]
    repeat: usize,

    /// Streams per Map call (`.streams(k)`; only meaningful on CUDA)
    #[arg(long, value_name = "K")]
    streams: Option<usize>,

    /// Verify every output pixel against an f64 evaluation of the formula (within 1 level)
    #[arg(long)]
    check: bool,
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
    if args.repeat == 0 {
        return Err("--repeat must be at least 1".into());
    }

    let backend = match args.backend {
        Some(b) => b,
        None => skel::default_backend()?,
    };
    backend.check()?;

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
        let h2 = s.spawn(move || stage_map(rx1, tx2, backend, streams));
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

    if check {
        if collected.bad_pixels == 0 {
            println!(
                "check: ok, {} pixels within 1 grey level of the f64 reference (max difference {})",
                collected.checked_pixels, collected.max_diff
            );
        } else {
            eprintln!(
                "check: FAILED, {} of {} pixels differ from the f64 reference by more than 1 level (max {}):",
                collected.bad_pixels, collected.checked_pixels, collected.max_diff
            );
            for e in &collected.examples {
                eprintln!("  {e}");
            }
            return Ok(false);
        }
    }
    Ok(true)
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
fn stage_map(
    rx: Receiver<Frame>,
    tx: Sender<Frame>,
    backend: Backend,
    streams: Option<usize>,
) -> Res<Clock> {
    let mut map = Map::new(grey).uniforms((LUMA,)).backend(backend);
    if let Some(k) = streams {
        map = map.streams(k);
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
            check_frame(&frame, rgb, result, &mut col);
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

/// Compares every pixel of one frame with [`grey_reference`].
fn check_frame(frame: &Frame, rgb: &[Pixel], result: &[Pixel], col: &mut Collected) {
    let width = frame.width.max(1) as usize;
    for (i, (src, out)) in rgb.iter().zip(result).enumerate() {
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
}
