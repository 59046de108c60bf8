//! Greyscale stream benchmark: the device pipeline alone against the transfer bound (the
//! former `greyscale --stream` mode), as a camera feeding pinned buffers would drive it.
//!
//! Before the clock starts, N distinct frames (input and output) are prepared in pinned host
//! memory and the kernel is warmed up. Each pass (`--repeat R` passes) then sends the frames
//! through a four-stage `skel::stream` pipeline with no per-pixel CPU work:
//!
//! * touch: marks the next input as freshly written by the producer (it rewrites one pixel:
//!   the device copy becomes stale, so the whole frame is really uploaded again);
//! * map: issues `Map(grey)` asynchronously with `.download(true)` (and `.streams(k)` with
//!   `--streams k`): on CUDA the call is cut into k chunks whose uploads, kernels and
//!   downloads overlap, and the next frames are issued while they run;
//! * forward: passes the frame on; wait: waits for the result (the chunks' downloads).
//!
//! It prints ms/frame (best pass) against the bound measured in the same process right
//! after: pure pinned copies of a frame's bytes each way (`skel::debug::copy_bound`) and the
//! kernel alone (device-resident calls), `max(upload, kernel, download)` per frame, as
//! "x% of transfer bound". `--check` verifies every 97th pixel of each frame and all pixels
//! of the first and the last, after each pass (outside its clock). With `SKEL_TRACE` set,
//! the CUDA timeline of the run is written for `skel_trace`. The Map, the pixel type and the
//! check are the main example's (`greyscale.rs`, included as a module).
//!
//! ```text
//! cargo run --release --features cuda --example greyscale_stream -- \
//!     --backend cuda --frames 60 --streams 4 --repeat 3 --check
//! SKEL_TRACE=trace.json cargo run --release --features cuda --example greyscale_stream -- \
//!     --backend cuda --frames 60 --streams 4
//! cargo run --release --example skel_trace -- trace.json -o timeline.svg
//! cargo run --release --example greyscale_stream -- --backend rayon --frames 8 --size 640x360 --check
//! ```

// Only the Map, the pixel type and the helpers are used here, not its `main`.
#[allow(dead_code)]
mod greyscale;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use greyscale::io::{self, Checked, Res};
use greyscale::{grey, Pixel, LUMA};
use skel::prelude::*;
use skel::stream::Pipeline;

/// Channel capacity: the map stage only issues (the Map runs asynchronously), so the links
/// must hold enough frames for it to run a few frames ahead of the wait stage and keep the
/// copy engines busy while that one waits.
const STREAM_CHANNEL_CAPACITY: usize = 4;

/// `--check` looks at every this-many-th pixel (prime, so the sample does not line up with
/// the period of the tiled frames).
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

#[derive(Parser, Debug)]
#[command(
    about = "Greyscale Map over a stream of prepared pinned frames: ms/frame against the transfer bound"
)]
struct Args {
    /// Photos the synthetic frames are tiled from (.png, .jpg, .jpeg) [default: the sample photos]
    #[arg(long, num_args = 1.., value_name = "PATH")]
    input: Vec<PathBuf>,

    /// Backend for the Map: cpu, rayon, cuda, opencl [default: skel's default backend]
    #[arg(long, value_name = "NAME")]
    backend: Option<Backend>,

    /// Number of distinct prepared frames
    #[arg(long, value_name = "N")]
    frames: usize,

    /// Size of the frames, WIDTHxHEIGHT
    #[arg(long, value_name = "WxH", default_value = "1920x1080", value_parser = io::parse_size)]
    size: (u32, u32),

    /// Timed passes over the frames; the best is reported
    #[arg(long, value_name = "K", default_value_t = 1)]
    repeat: usize,

    /// Streams per Map call (`.streams(k)`; only meaningful on CUDA)
    #[arg(long, value_name = "K")]
    streams: Option<usize>,

    /// Verify a sample of each frame and all of the first and last, after each pass
    #[arg(long)]
    check: bool,

    /// Accepted for the command lines of the former `greyscale --stream`; no effect
    #[arg(long, hide = true)]
    stream: bool,
}

/// Rejects option combinations that cannot run, before any work is done.
fn validate(args: &Args) -> std::result::Result<(), String> {
    if args.repeat == 0 {
        return Err("--repeat must be at least 1".into());
    }
    if args.frames == 0 {
        return Err("nothing to do: --frames 0".into());
    }
    Ok(())
}

/// A prepared frame and its output.
struct Frame {
    name: String,
    width: u32,
    rgb: Vector<Pixel>,
    grey: Vector<Pixel>,
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("greyscale_stream: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `n` prepared frames through the pipeline `--repeat` times, then the bound.
fn run(args: Args) -> Res<bool> {
    validate(&args)?;
    let files = io::collect_images(&args.input)?;
    let backend = args.backend.map_or_else(skel::default_backend, Ok)?;
    // Before any frame is allocated: with CUDA in use, vectors get pinned host memory.
    backend.check()?;
    let (n, (w, h)) = (args.frames, args.size);
    let t = Instant::now();
    let bases = files.iter().map(|f| io::synthetic_base(f, w, h));
    let bases = bases.collect::<Res<Vec<_>>>()?;
    let mut frames = prepare_frames(&bases, n, w)?;
    drop(bases);
    warm_up(backend)?;
    println!(
        "greyscale_stream: {n} prepared {w}x{h} frames from {} photo(s) (prepared and warmed up in {:.0} ms), backend {backend}",
        files.len(),
        t.elapsed().as_secs_f64() * 1e3
    );
    let frame_bytes = w as usize * h as usize * std::mem::size_of::<Pixel>();
    if backend == Backend::Cuda {
        // Measured once per device on first use: here, rather than inside the first pass.
        let model = skel::debug::stream_model()?;
        println!("{}", model_line(&model, frame_bytes, args.streams));
    }

    let mut passes = Vec::with_capacity(args.repeat);
    let mut best: Option<(Duration, String)> = None;
    let mut checked = Checked::default();
    for pass in 0..args.repeat {
        let (took, report) = stream_pass(frames, pass, backend, args.streams)?;
        passes.push(took.as_secs_f64() * 1e3 / n as f64);
        if best.as_ref().map_or(true, |(t, _)| took < *t) {
            best = Some((took, report.to_string()));
        }
        frames = report.into_outputs();
        if frames.len() != n {
            return Err(format!("pass {pass}: {} of {n} frames came back", frames.len()).into());
        }
        if args.check {
            check_stream(&frames, &mut checked)?;
        }
    }
    if let Some((_, table)) = &best {
        println!("{table}");
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
    Ok(!args.check || checked.print())
}

/// `n` distinct frames and their outputs, allocated after the backend check so that on
/// CUDA they are pinned: frame `i` is base `i % bases.len()`, rotated by a multiple of
/// [`ROTATE_STEP`] pixels for each reuse of that base (cheap, and no two frames alike).
fn prepare_frames(bases: &[Vec<Pixel>], n: usize, width: u32) -> Res<Vec<Frame>> {
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
        let name = format!("stream-{i:05}");
        frames.push(Frame {
            name,
            width,
            rgb,
            grey: Vector::zeroed(len),
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
    let map = Map::new(grey).uniforms((LUMA,)).backend(backend);
    map.run(&input, &mut out)
        .map_err(|e| format!("warm-up Map(grey) on {backend}: {e}"))?;
    let got = out
        .try_as_slice()
        .map_err(|e| format!("warm-up on {backend}: copying the result back: {e}"))?;
    let wrong = got
        .iter()
        .enumerate()
        .find(|(i, p)| (p.r - level(*i)).abs() > 1.0);
    match wrong {
        Some((i, p)) => Err(format!(
            "warm-up on {backend}: grey level {} came back as {p:?}",
            level(i)
        )
        .into()),
        None => Ok(()),
    }
}

/// One pass of the prepared frames through the four stages: the time from the first touch
/// to holding the last result, and the report (its outputs are the frames, in order).
fn stream_pass(
    frames: Vec<Frame>,
    pass: usize,
    backend: Backend,
    streams: Option<usize>,
) -> Res<(Duration, skel::stream::Report<Frame>)> {
    let mut map = Map::new(grey)
        .uniforms((LUMA,))
        .backend(backend)
        .download(true);
    if let Some(k) = streams {
        map = map.streams(k);
    }
    let (mut start, mut end) = (None, None);
    let report = Pipeline::from_iter(frames.into_iter().enumerate())
        .capacity(STREAM_CHANNEL_CAPACITY)
        .stage(|(i, mut frame): (usize, Frame)| {
            start.get_or_insert_with(Instant::now);
            // A producer that has just written the frame (a camera filling a pinned buffer):
            // the host write makes the device copy stale, so the Map uploads it all again.
            if let Some(first) = frame.rgb.try_as_mut_slice()?.first_mut() {
                *first = marker(pass, i);
            }
            Ok(frame)
        })
        .name("touch input")
        .stage(|mut frame: Frame| {
            map.run(&frame.rgb, &mut frame.grey)?;
            Ok(frame)
        })
        .name("map (issue)")
        // The CPU is free, and stays free: no host memory traffic next to the copies'.
        .stage(Ok)
        .name("forward")
        .stage(|frame: Frame| {
            // On a device backend this waits for the copy-back; device errors surface here.
            frame.grey.try_as_slice()?;
            end = Some(Instant::now());
            Ok(frame)
        })
        .name("wait result")
        .run()?;
    let took = match (start, end) {
        (Some(s), Some(e)) => e.saturating_duration_since(s),
        _ => Duration::ZERO,
    };
    Ok((took, report))
}

/// The pixel the touch stage writes into frame `i` in pass `pass`: 8-bit levels scaled to
/// 0..1 like a decoded pixel (so `--check` recovers them exactly), different in consecutive
/// passes.
fn marker(pass: usize, i: usize) -> Pixel {
    let level = |salt: usize| f32::from(((pass * 67 + i * 13 + salt) % 256) as u8) / 255.0;
    Pixel {
        r: level(0),
        g: level(85),
        b: level(170),
    }
}

/// `--check` on a pass's frames once its clock has stopped: every [`CHECK_STRIDE`]th pixel
/// of each frame (pixel 0, the marker, included) and all pixels of the first and the last.
/// Not in a stage: the f64 reference costs about 0.1 us a pixel, so even the sample of a
/// 1080p frame (21 000 pixels, ~2 ms) takes several times what the device spends on the
/// frame, and the wait stage would bound the stream.
fn check_stream(frames: &[Frame], checked: &mut Checked) -> Res<()> {
    let last = frames.len().saturating_sub(1);
    for (i, frame) in frames.iter().enumerate() {
        let rgb = frame.rgb.try_as_slice()?;
        let result = frame.grey.try_as_slice()?;
        let step = if i == 0 || i == last { 1 } else { CHECK_STRIDE };
        checked.add(Checked::frame(&frame.name, frame.width, rgb, result, step));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn validated(cli: &[&str]) -> std::result::Result<(), String> {
        let args = Args::try_parse_from(std::iter::once("greyscale").chain(cli.iter().copied()))
            .map_err(|e| e.to_string())?;
        validate(&args)
    }

    #[test]
    fn the_former_command_lines_still_parse() {
        assert!(validated(&["--frames", "8"]).is_ok());
        assert!(validated(&["--frames", "8", "--stream", "--repeat", "3", "--check"]).is_ok());
        let err = validated(&["--stream"]).unwrap_err();
        assert!(err.contains("--frames"), "{err}");
        assert!(validated(&["--frames", "0"]).is_err());
        assert!(validated(&["--frames", "4", "--repeat", "0"]).is_err());
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
        let frames = prepare_frames(std::slice::from_ref(&base), 3, 4).expect("host vectors");
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
