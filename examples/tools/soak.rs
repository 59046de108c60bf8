//! Soak: many small skeleton calls and a stream of image-sized Maps on one backend, with
//! host RSS (`/proc/self/statm`), device memory (`skel::debug::device_memory`, CUDA) and the
//! driver objects the library holds (`skel::debug::device_objects`: events, device buffers,
//! result slots) sampled every few seconds, so that a leak in the buffer pool, the event
//! lists or the containers shows as a rising line. Every round also makes one checked call fault, so
//! the error path is soaked too.
//!
//! ```text
//! cargo run --release --example soak -- [--backend NAME] [--minutes M] [--every SECS] [--out docs/soak]
//! ```
//!
//! Short by default (10 seconds). `--out PREFIX` writes `PREFIX.csv` and `PREFIX.svg`. The
//! exit status is 1 if host RSS or device memory grew by more than 10% (and 16 MiB) between
//! the end of the first quarter of the run (warm-up: caches, pools) and its end.

use std::time::{Duration, Instant};

use plotters::prelude::*;
use skel::prelude::*;

#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
struct Pixel {
    r: f32,
    g: f32,
    b: f32,
}

#[userfn]
fn luma(p: Pixel, #[uniform] gain: f32) -> f32 {
    (0.299 * p.r + 0.587 * p.g + 0.114 * p.b) * gain
}

#[userfn]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

#[userfn]
fn pick(#[index] i: usize, t: &[f32]) -> f32 {
    t[i % 16]
}

#[userfn]
fn out_of_range(#[index] i: usize, t: &[f32]) -> f32 {
    t[i + t.len()]
}

struct Args {
    backend: Backend,
    minutes: f64,
    every: f64,
    out: Option<String>,
}

/// Mixed skeleton calls for a while, sampling memory and driver objects.
#[derive(clap::Parser)]
#[command(name = "soak")]
struct Cli {
    /// The backend (default: skel's default backend).
    #[arg(long)]
    backend: Option<Backend>,
    /// How long to run, in minutes.
    #[arg(long, default_value_t = 10.0 / 60.0, value_parser = positive)]
    minutes: f64,
    /// Seconds between samples.
    #[arg(long, default_value_t = 1.0, value_parser = positive)]
    every: f64,
    /// Write PREFIX.csv and PREFIX.svg of the samples.
    #[arg(long, value_name = "PREFIX")]
    out: Option<String>,
}

fn positive(v: &str) -> std::result::Result<f64, String> {
    v.parse::<f64>()
        .ok()
        .filter(|x| *x > 0.0)
        .ok_or_else(|| format!("`{v}` is not a positive number"))
}

fn parse_args() -> Result<Args> {
    let cli = <Cli as clap::Parser>::parse();
    Ok(Args {
        backend: cli.backend.map_or_else(skel::default_backend, Ok)?,
        minutes: cli.minutes,
        every: cli.every,
        out: cli.out,
    })
}

/// Resident set size of this process in MiB.
fn rss_mib() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: f64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0.0);
    pages * 4096.0 / (1024.0 * 1024.0)
}

struct Sample {
    secs: f64,
    calls: u64,
    frames: u64,
    rss: f64,
    device: Option<f64>,
    objects: Option<skel::debug::DeviceObjects>,
}

fn main() -> Result<()> {
    let args = parse_args()?;
    let b = args.backend;
    let (w, h) = (1920, 1080);
    let frame = Matrix::from_fn(h, w, |r, c| Pixel {
        r: (r % 256) as f32,
        g: (c % 256) as f32,
        b: ((r + c) % 256) as f32,
    });
    let mut grey = Matrix::zeroed(h, w);
    let small_a = Vector::from_fn(64, |i| i as f32);
    let small_b = Vector::from_fn(64, |i| (64 - i) as f32);
    let mut small_out = Vector::zeroed(64);
    // `pick` reads it modulo 16
    let table = Vector::from_fn(16, |i| i as f32 * 0.5);

    let start = Instant::now();
    let end = start + Duration::from_secs_f64(args.minutes * 60.0);
    let every = Duration::from_secs_f64(args.every);
    let mut next = start;
    let (mut calls, mut frames) = (0u64, 0u64);
    let mut samples = Vec::new();
    println!(
        "soak on {b} for {:.1} min, a sample every {:.1} s",
        args.minutes, args.every
    );
    println!("{CSV_HEADER}");
    loop {
        let now = Instant::now();
        if now >= next {
            let s = Sample {
                secs: now.duration_since(start).as_secs_f64(),
                calls,
                frames,
                rss: rss_mib(),
                device: skel::debug::device_memory()
                    .map(|(used, _)| used as f64 / (1024.0 * 1024.0)),
                objects: skel::debug::device_objects(),
            };
            println!("{}", csv_line(&s));
            samples.push(s);
            next += every;
        }
        if now >= end {
            break;
        }
        for _ in 0..100 {
            Map::new(add)
                .backend(b)
                .run(&small_a, &small_b, &mut small_out)?;
            let s = Reduce::new(add).backend(b).run(&small_out)?;
            if s != 64.0 * 64.0 {
                return Err(Error::other(format!("small calls: sum {s}, expected 4096")));
            }
            MapArray::new(pick)
                .backend(b)
                .run_index(&table, &mut small_out)?;
            calls += 3;
        }
        match MapArray::new(out_of_range)
            .backend(b)
            .checked(true)
            .run_index(&table, &mut small_out)
        {
            Err(Error::UserFunction { .. }) => calls += 1,
            other => {
                return Err(Error::other(format!(
                    "a faulting checked call gave {other:?}"
                )))
            }
        }
        Map::new(luma)
            .uniforms((1.0,))
            .backend(b)
            .run(&frame, &mut grey)?;
        // reading a pixel brings the frame back (device backends), as a consumer would
        if grey[(h - 1, w - 1)] < 0.0 {
            return Err(Error::other("negative luma"));
        }
        frames += 1;
    }
    let flat = judge(&samples);
    if let Some(prefix) = &args.out {
        write_csv(&format!("{prefix}.csv"), &samples)?;
        plot(&format!("{prefix}.svg"), &samples, b).map_err(|e| Error::other(e.to_string()))?;
        println!("wrote {prefix}.csv and {prefix}.svg");
    }
    if !flat {
        std::process::exit(1);
    }
    Ok(())
}

/// Whether RSS and device memory stayed flat after warm-up (the first quarter).
fn judge(samples: &[Sample]) -> bool {
    let Some(last) = samples.last() else {
        return true;
    };
    let warm = &samples[samples.len() / 4];
    let grew = |a: f64, b: f64| b > a * 1.1 && b - a > 16.0;
    let rss_grew = grew(warm.rss, last.rss);
    let dev_grew = matches!((warm.device, last.device), (Some(a), Some(b)) if grew(a, b));
    // Counts, not sizes: any steady rise beyond the warm-up's high-water mark is a leak.
    let peak_objects = samples[..=samples.len() / 4]
        .iter()
        .filter_map(|s| s.objects)
        .map(|o| o.events + o.buffers)
        .max();
    let objects_grew = matches!(
        (peak_objects, last.objects),
        (Some(peak), Some(o)) if o.events + o.buffers > peak + 64
    );
    println!(
        "after warm-up ({:.0} s): rss {:.1} -> {:.1} MiB{}; {} calls, {} frames: {}",
        warm.secs,
        warm.rss,
        last.rss,
        match (warm.device, last.device) {
            (Some(a), Some(b)) => format!(", device {a:.1} -> {b:.1} MiB"),
            _ => String::new(),
        },
        last.calls,
        last.frames,
        if rss_grew || dev_grew || objects_grew {
            "GREW"
        } else {
            "flat"
        }
    );
    if let Some(o) = last.objects {
        println!(
            "driver objects at the end: {} events ({} spare), {} buffers, {} result slots{}",
            o.events,
            o.spare_events,
            o.buffers,
            o.result_slots,
            if objects_grew { ": GREW" } else { "" }
        );
    }
    !(rss_grew || dev_grew || objects_grew)
}

const CSV_HEADER: &str =
    "secs,calls,frames,rss_mib,device_mib,events,spare_events,buffers,result_slots";

fn csv_line(x: &Sample) -> String {
    let dev = x.device.map(|d| format!("{d:.3}")).unwrap_or_default();
    let objects = x.objects.map_or(",,,".to_string(), |o| {
        format!(
            "{},{},{},{}",
            o.events, o.spare_events, o.buffers, o.result_slots
        )
    });
    format!(
        "{:.3},{},{},{:.3},{dev},{objects}",
        x.secs, x.calls, x.frames, x.rss
    )
}

fn write_csv(path: &str, samples: &[Sample]) -> Result<()> {
    let mut s = format!("{CSV_HEADER}\n");
    for x in samples {
        s.push_str(&csv_line(x));
        s.push('\n');
    }
    std::fs::write(path, s).map_err(|e| Error::other(format!("{path}: {e}")))
}

fn plot(
    path: &str,
    samples: &[Sample],
    b: Backend,
) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let secs = samples.last().map_or(1.0, |s| s.secs.max(1.0));
    let calls = samples.last().map_or(0, |s| s.calls);
    let with_objects = samples.iter().any(|s| s.objects.is_some());
    let root =
        SVGBackend::new(path, (900, if with_objects { 720 } else { 420 })).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(
        &format!("skel soak on {b}: {calls} calls"),
        ("sans-serif", 18),
    )?;
    let (memory_area, objects_area) = if with_objects {
        let (top, bottom) = root.split_vertically(400);
        (top, Some(bottom))
    } else {
        (root, None)
    };
    let memory = [
        (
            "host RSS",
            BLUE,
            samples.iter().map(|s| (s.secs, s.rss)).collect(),
        ),
        (
            "device memory used",
            RED,
            samples
                .iter()
                .filter_map(|s| s.device.map(|d| (s.secs, d)))
                .collect(),
        ),
    ];
    lines(&memory_area, secs, "MiB", &memory)?;
    if let Some(area) = objects_area {
        let count = |f: fn(&skel::debug::DeviceObjects) -> usize| -> Vec<(f64, f64)> {
            samples
                .iter()
                .filter_map(|s| s.objects.as_ref().map(|o| (s.secs, f(o) as f64)))
                .collect()
        };
        let objects = [
            ("events referenced", GREEN, count(|o| o.events)),
            ("spare events", MAGENTA, count(|o| o.spare_events)),
            ("device buffers", BLACK, count(|o| o.buffers)),
            ("idle result slots", CYAN, count(|o| o.result_slots)),
        ];
        lines(&area, secs, "driver objects", &objects)?;
    }
    Ok(())
}

/// A labelled line: its name, colour and (seconds, value) points.
type Line<'a> = (&'a str, RGBColor, Vec<(f64, f64)>);

/// One chart of labelled lines over the run's seconds.
fn lines<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    secs: f64,
    unit: &str,
    series: &[Line<'_>],
) -> std::result::Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let top = series
        .iter()
        .flat_map(|(_, _, points)| points.iter().map(|p| p.1))
        .fold(1.0f64, f64::max)
        * 1.2;
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..secs, 0.0..top)?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc(unit)
        .draw()?;
    for (label, color, points) in series.iter().filter(|s| !s.2.is_empty()) {
        let color = *color;
        chart
            .draw_series(std::iter::once(PathElement::new(points.clone(), color)))?
            .label(*label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    area.present()?;
    Ok(())
}
