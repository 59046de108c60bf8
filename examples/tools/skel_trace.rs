//! skel_trace: draws a MultiStream trace as an SVG timeline, so you can see whether the
//! uploads, kernels and downloads of the chunks really overlap.
//!
//! Run any skel program on the CUDA backend with `SKEL_TRACE=trace.json` and the library
//! writes a Chrome trace (`chrome://tracing` / Perfetto open it too) with one complete event
//! (`"ph":"X"`) per chunk operation: `upload`, `kernel`, `download` (and e.g. `combine`, the
//! final kernel of a reduce). This example turns it into a picture:
//!
//! ```text
//!  --by stream (default)                        --by engine
//!  stream 0 │▇▇▇upload▇▇▇│k│▇▇download▇▇│        H2D copy │▇▇▇▇│▇▇▇▇│▇▇▇▇│
//!  stream 1 │      │▇▇▇upload▇▇▇│k│▇▇▇download   compute  │    │k   │k   │k
//!           └──────────────────────── ms         D2H copy │    │    │▇▇▇▇│▇▇▇▇
//! ```
//!
//! * `--by stream`: one lane per CUDA stream of the device's pool (the event's `tid`).
//! * `--by engine`: three lanes, "H2D copy", "compute", "D2H copy". A GPU has one engine per
//!   copy direction, so this view shows most directly how much of the copy time the kernels
//!   (and the other direction) hide. Operations that overlap inside one lane (kernels of
//!   different streams running concurrently) are stacked in sub-rows instead of drawn on top
//!   of each other.
//!
//! Colours: upload blue, kernel green, download orange, other kernels (e.g. `combine`)
//! dark green. Spans narrower than a pixel are widened to one pixel so short kernels stay
//! visible. Under the title a summary line gives the time span, the bytes moved each way
//! with the bandwidth achieved over the span, and how busy each engine was (the union of its
//! intervals over the span, so concurrent kernels are not counted twice). The same line is
//! printed on stdout. With `--from`/`--to` only that window is drawn and summarised; the
//! bytes of a copy cut by the window are counted in proportion to the part inside it.
//!
//! ```text
//! SKEL_TRACE=trace.json cargo run --release --features cuda --example greyscale -- --frames 60
//! cargo run --release --example skel_trace -- trace.json -o timeline.svg
//! cargo run --release --example skel_trace -- trace.json -o engines.svg --by engine
//! cargo run --release --example skel_trace -- trace.json -o zoom.svg --from 10 --to 12.5 --width 2400
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::error::Error;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use plotters::prelude::*;
use serde_json::Value;

type BoxError = Box<dyn Error + Send + Sync>;
type Res<T> = std::result::Result<T, BoxError>;

/// What a span did; decides its colour and, with `--by engine`, its lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Upload,
    Kernel,
    Download,
    /// Any other event name (e.g. "combine"): a kernel that is not a chunk's map kernel.
    Other,
}

impl Kind {
    fn from_name(name: &str) -> Kind {
        match name {
            "upload" => Kind::Upload,
            "kernel" => Kind::Kernel,
            "download" => Kind::Download,
            _ => Kind::Other,
        }
    }

    /// The hardware engine that executes this kind of operation.
    fn engine(self) -> Engine {
        match self {
            Kind::Upload => Engine::H2D,
            Kind::Download => Engine::D2H,
            Kind::Kernel | Kind::Other => Engine::Compute,
        }
    }

    fn colour(self) -> RGBColor {
        match self {
            Kind::Upload => RGBColor(31, 119, 180),
            Kind::Kernel => RGBColor(44, 160, 44),
            Kind::Download => RGBColor(255, 127, 14),
            Kind::Other => RGBColor(0, 90, 0),
        }
    }

    /// The colour at 60% brightness, for the outline of the boxes.
    fn outline(self) -> RGBColor {
        let RGBColor(r, g, b) = self.colour();
        let dark = |c: u8| (u16::from(c) * 3 / 5) as u8;
        RGBColor(dark(r), dark(g), dark(b))
    }

    fn legend(self) -> &'static str {
        match self {
            Kind::Upload => "upload (H2D)",
            Kind::Kernel => "kernel",
            Kind::Download => "download (D2H)",
            Kind::Other => "other kernel",
        }
    }
}

/// The three engines of `--by engine`, in lane order (top to bottom).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Engine {
    H2D = 0,
    Compute = 1,
    D2H = 2,
}

impl Engine {
    const ALL: [Engine; 3] = [Engine::H2D, Engine::Compute, Engine::D2H];

    fn label(self) -> &'static str {
        match self {
            Engine::H2D => "H2D copy",
            Engine::Compute => "compute",
            Engine::D2H => "D2H copy",
        }
    }
}

/// One complete ("X") event of the trace. Times are in microseconds, as in the file.
#[derive(Clone, Debug, PartialEq)]
struct Span {
    name: String,
    kind: Kind,
    /// The trace's `pid`: the device (the library writes 1 for a single device).
    device: i64,
    /// The trace's `tid`: the stream's index in the device's pool.
    stream: i64,
    start: f64,
    dur: f64,
    /// `args.bytes`; fractional once a window has cut the span (see [`clip`]).
    bytes: f64,
}

impl Span {
    fn end(&self) -> f64 {
        self.start + self.dur
    }
}

/// Reads the spans out of a Chrome trace: either `{"traceEvents": [...]}` or a bare array of
/// events. Events that are not complete events ("ph" other than "X", e.g. the "M" metadata
/// naming the streams) and fields we do not use are skipped, so the library can add to the
/// format; a complete event without a name, a time or a stream is an error, not a gap.
fn parse_trace(text: &str) -> Res<Vec<Span>> {
    let root: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    let events = match &root {
        Value::Array(events) => events,
        Value::Object(map) => match map.get("traceEvents") {
            Some(Value::Array(events)) => events,
            Some(_) => return Err("\"traceEvents\" is not an array".into()),
            None => return Err("no \"traceEvents\" array: not a Chrome trace".into()),
        },
        _ => return Err("expected a JSON object with \"traceEvents\" or an array".into()),
    };
    let mut spans = Vec::new();
    for (i, event) in events.iter().enumerate() {
        if let Some(span) = parse_event(event).map_err(|e| format!("event {i}: {e}"))? {
            spans.push(span);
        }
    }
    Ok(spans)
}

/// One event: `Ok(None)` for the kinds we do not draw.
fn parse_event(event: &Value) -> Res<Option<Span>> {
    let Value::Object(map) = event else {
        return Err("not a JSON object".into());
    };
    if map.get("ph").and_then(Value::as_str) != Some("X") {
        return Ok(None);
    }
    let name = map
        .get("name")
        .and_then(Value::as_str)
        .ok_or("complete event without a string \"name\"")?;
    let number = |key: &str| -> Res<f64> {
        match map.get(key).and_then(Value::as_f64) {
            Some(v) if v.is_finite() => Ok(v),
            _ => Err(format!("{name:?} has no numeric {key:?}").into()),
        }
    };
    let start = number("ts")?;
    let dur = number("dur")?;
    if dur < 0.0 {
        return Err(format!("{name:?} has a negative \"dur\" ({dur})").into());
    }
    let stream = map
        .get("tid")
        .and_then(Value::as_i64)
        .ok_or_else(|| format!("{name:?} has no integer \"tid\" (stream)"))?;
    // Chrome traces always carry a pid; default it anyway, one device is the common case.
    let device = match map.get("pid") {
        None => 0,
        Some(v) => v
            .as_i64()
            .ok_or_else(|| format!("{name:?} has a non-integer \"pid\""))?,
    };
    let bytes = match map.get("args").and_then(|a| a.get("bytes")) {
        None => 0.0,
        Some(v) => match v.as_f64() {
            Some(b) if b >= 0.0 => b,
            _ => return Err(format!("{name:?} has a bad \"args.bytes\" ({v})").into()),
        },
    };
    Ok(Some(Span {
        name: name.to_owned(),
        kind: Kind::from_name(name),
        device,
        stream,
        start,
        dur,
        bytes,
    }))
}

/// The time range drawn and summarised, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Window {
    start: f64,
    end: f64,
}

impl Window {
    fn len(&self) -> f64 {
        self.end - self.start
    }
}

/// The window: `--from`/`--to` (ms) where given, otherwise the extent of the spans, so the
/// busy fractions are relative to the time the trace actually covers.
fn resolve_window(spans: &[Span], from_ms: Option<f64>, to_ms: Option<f64>) -> Res<Window> {
    let first = spans.iter().map(|s| s.start).reduce(f64::min);
    let last = spans.iter().map(Span::end).reduce(f64::max);
    let (Some(first), Some(last)) = (first, last) else {
        return Err("the trace has no complete (\"ph\":\"X\") events to draw".into());
    };
    let window = Window {
        start: from_ms.map_or(first, |ms| ms * 1e3),
        end: to_ms.map_or(last, |ms| ms * 1e3),
    };
    if !(window.start.is_finite() && window.end.is_finite()) {
        return Err("--from/--to must be finite numbers".into());
    }
    if window.len() <= 0.0 {
        return Err(format!(
            "empty time window: {:.3} ms to {:.3} ms",
            window.start / 1e3,
            window.end / 1e3
        )
        .into());
    }
    Ok(window)
}

/// The parts of the spans inside `window`. A copy cut by the window keeps the share of its
/// bytes that matches the share of its duration inside, so bandwidths over a zoomed window
/// stay meaningful.
fn clip(spans: &[Span], window: Window) -> Vec<Span> {
    spans
        .iter()
        // Zero-length spans (an instant) are kept when the instant is inside.
        .filter(|s| {
            (s.end() > window.start && s.start < window.end)
                || (s.dur == 0.0 && s.start >= window.start && s.start <= window.end)
        })
        .map(|s| {
            let start = s.start.max(window.start);
            let end = s.end().min(window.end);
            let share = if s.dur > 0.0 {
                (end - start) / s.dur
            } else {
                1.0
            };
            Span {
                start,
                dur: end - start,
                bytes: s.bytes * share,
                ..s.clone()
            }
        })
        .collect()
}

/// Total length of the union of the intervals: overlapping time is counted once.
fn union_length(mut intervals: Vec<(f64, f64)>) -> f64 {
    intervals.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut total = 0.0;
    let mut current: Option<(f64, f64)> = None;
    for (start, end) in intervals {
        match &mut current {
            Some((_, cur_end)) if start <= *cur_end => *cur_end = cur_end.max(end),
            _ => {
                if let Some((s, e)) = current {
                    total += e - s;
                }
                current = Some((start, end));
            }
        }
    }
    if let Some((s, e)) = current {
        total += e - s;
    }
    total
}

/// The numbers of the subtitle and of stdout.
#[derive(Clone, Debug, PartialEq)]
struct Summary {
    /// Window length, µs.
    span: f64,
    uploaded: f64,
    downloaded: f64,
    /// Busy fraction (0..=1) of each engine, indexed by `Engine as usize`.
    busy: [f64; 3],
    spans: usize,
}

impl Summary {
    /// Bytes per µs is MB/s; / 1e3 gives GB/s (10^9 bytes, as copy bandwidths are quoted).
    fn gbps(&self, bytes: f64) -> f64 {
        bytes / self.span / 1e3
    }
}

/// Summarises spans already clipped to `window`. The engines are merged across devices and
/// streams: a lane's busy time is the union of its intervals.
fn summarize(spans: &[Span], window: Window) -> Summary {
    let bytes_of = |kind: Kind| -> f64 {
        spans
            .iter()
            .filter(|s| s.kind == kind)
            .map(|s| s.bytes)
            // Not `sum()`: the empty f64 sum is -0.0, which would print as "-0 B".
            .fold(0.0, |a, b| a + b)
    };
    let busy = Engine::ALL.map(|engine| {
        let intervals = spans
            .iter()
            .filter(|s| s.kind.engine() == engine)
            .map(|s| (s.start, s.end()))
            .collect();
        union_length(intervals) / window.len()
    });
    Summary {
        span: window.len(),
        uploaded: bytes_of(Kind::Upload),
        downloaded: bytes_of(Kind::Download),
        busy,
        spans: spans.len(),
    }
}

/// Bytes in decimal units, like the bandwidths.
fn human_bytes(bytes: f64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut value = bytes;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{value:.0} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [h2d, compute, d2h] = self.busy.map(|b| b * 100.0);
        write!(
            f,
            "{:.3} ms, {} spans | H2D {} at {:.2} GB/s | D2H {} at {:.2} GB/s | \
             busy: H2D {h2d:.0}%, compute {compute:.0}%, D2H {d2h:.0}%",
            self.span / 1e3,
            self.spans,
            human_bytes(self.uploaded),
            self.gbps(self.uploaded),
            human_bytes(self.downloaded),
            self.gbps(self.downloaded),
        )
    }
}

/// How to split the chart into lanes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum By {
    /// One lane per CUDA stream
    Stream,
    /// One lane per engine: H2D copy, compute, D2H copy
    Engine,
}

/// A horizontal band of the chart.
#[derive(Clone, Debug, PartialEq)]
struct Lane {
    label: String,
    /// Sub-rows needed so that no two spans of the lane overlap (at least 1).
    rows: usize,
}

/// Where each span goes: `placed[i]` = (lane, row) of `spans[i]`.
#[derive(Clone, Debug, PartialEq)]
struct Layout {
    lanes: Vec<Lane>,
    placed: Vec<(usize, usize)>,
}

/// Lanes sorted by device then stream (or engine), labelled "stream N" / the engine's name,
/// with "dev P" in front only when the trace has several devices. Within a lane, spans go
/// greedily into the first sub-row that is free at their start: in stream mode a stream
/// serialises its work, so that is one row; in engine mode concurrent kernels get one each.
fn assign_lanes(spans: &[Span], by: By) -> Layout {
    let devices: BTreeSet<i64> = spans.iter().map(|s| s.device).collect();
    let key = |s: &Span| match by {
        By::Stream => (s.device, s.stream),
        By::Engine => (s.device, s.kind.engine() as i64),
    };
    let keys: BTreeSet<(i64, i64)> = match by {
        By::Stream => spans.iter().map(key).collect(),
        // Always all three engines, so an idle engine shows as an empty lane.
        By::Engine => devices
            .iter()
            .flat_map(|&d| Engine::ALL.map(|e| (d, e as i64)))
            .collect(),
    };
    let index: BTreeMap<(i64, i64), usize> =
        keys.iter().enumerate().map(|(i, &k)| (k, i)).collect();
    let mut lanes: Vec<Lane> = keys
        .iter()
        .map(|&(device, id)| {
            let name = match by {
                By::Stream => format!("stream {id}"),
                By::Engine => Engine::ALL[id as usize].label().to_owned(),
            };
            let label = if devices.len() > 1 {
                format!("dev {device} {name}")
            } else {
                name
            };
            Lane { label, rows: 1 }
        })
        .collect();

    let mut order: Vec<usize> = (0..spans.len()).collect();
    order.sort_by(|&a, &b| spans[a].start.total_cmp(&spans[b].start));
    // Per lane, the end time of the last span in each sub-row.
    let mut row_ends: Vec<Vec<f64>> = vec![Vec::new(); lanes.len()];
    let mut placed = vec![(0, 0); spans.len()];
    for i in order {
        let lane = index[&key(&spans[i])];
        let ends = &mut row_ends[lane];
        let row = match ends.iter().position(|&end| end <= spans[i].start) {
            Some(row) => row,
            None => {
                ends.push(f64::NEG_INFINITY);
                ends.len() - 1
            }
        };
        ends[row] = spans[i].end();
        placed[i] = (lane, row);
    }
    for (lane, ends) in lanes.iter_mut().zip(&row_ends) {
        lane.rows = ends.len().max(1);
    }
    Layout { lanes, placed }
}

#[derive(Parser, Debug)]
#[command(
    about = "Render a skel MultiStream trace (SKEL_TRACE=trace.json) as an SVG timeline",
    after_help = "Times on the axis and in --from/--to are milliseconds from the start of the \
                  trace. The summary (span, bytes and GB/s each way, busy fraction of each \
                  engine) is printed on stdout and drawn under the title."
)]
struct Args {
    /// The Chrome trace JSON written by the library
    trace: PathBuf,

    /// Output SVG file
    #[arg(short, long, value_name = "SVG")]
    output: PathBuf,

    /// Lanes: one per stream, or one per engine (H2D copy, compute, D2H copy)
    #[arg(long, value_enum, default_value_t = By::Stream)]
    by: By,

    /// Start of the window to draw, in ms [default: first event]
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    from: Option<f64>,

    /// End of the window to draw, in ms [default: end of the last event]
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    to: Option<f64>,

    /// Width of the image in pixels (the height follows from the lanes)
    #[arg(long, value_name = "PX", default_value_t = 1600,
          value_parser = clap::value_parser!(u32).range(400..=20_000))]
    width: u32,

    /// Title [default: "skel MultiStream trace: <file name>"]
    #[arg(long, value_name = "TEXT")]
    title: Option<String>,
}

/// Pixels per sub-row of a lane, and the padding of each lane.
const ROW_PX: u32 = 22;
const LANE_PAD_PX: u32 = 14;
/// Title, summary line and legend above the chart; axis and margins below.
const HEADER_PX: u32 = 100;
/// Height of a lane on the (integer) y axis.
const LANE_UNITS: i32 = 1000;
const FOOTER_PX: u32 = 70;

fn run(args: Args) -> Res<()> {
    let text = std::fs::read_to_string(&args.trace)
        .map_err(|e| format!("cannot read {}: {e}", args.trace.display()))?;
    let spans = parse_trace(&text).map_err(|e| format!("{}: {e}", args.trace.display()))?;
    let window = resolve_window(&spans, args.from, args.to)?;
    let all = spans.len();
    let spans = clip(&spans, window);
    if spans.is_empty() {
        return Err(format!(
            "none of the {all} spans is between {:.3} ms and {:.3} ms",
            window.start / 1e3,
            window.end / 1e3
        )
        .into());
    }
    let summary = summarize(&spans, window);
    let layout = assign_lanes(&spans, args.by);
    let title = args.title.clone().unwrap_or_else(|| {
        let file = args.trace.file_name().unwrap_or(args.trace.as_os_str());
        format!("skel MultiStream trace: {}", file.to_string_lossy())
    });
    render(
        &args.output,
        args.width,
        &title,
        &spans,
        &layout,
        &summary,
        window,
    )
    .map_err(|e| format!("cannot write {}: {e}", args.output.display()))?;
    println!("{summary}");
    println!("wrote {}", args.output.display());
    Ok(())
}

/// Decimals for axis labels: enough to tell ticks about a tenth of the window apart.
fn axis_decimals(window_ms: f64) -> usize {
    (-(window_ms / 10.0).log10()).ceil().clamp(0.0, 6.0) as usize
}

fn render(
    path: &Path,
    width: u32,
    title: &str,
    spans: &[Span],
    layout: &Layout,
    summary: &Summary,
    window: Window,
) -> Res<()> {
    let lane_px: Vec<u32> = layout
        .lanes
        .iter()
        .map(|l| l.rows as u32 * ROW_PX + LANE_PAD_PX)
        .collect();
    let height = HEADER_PX + FOOTER_PX + lane_px.iter().sum::<u32>();
    let root = SVGBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let area = root.titled(title, ("sans-serif", 22))?;
    let (header, body) = area.split_vertically(HEADER_PX - 36);
    draw_header(&header, spans, summary)?;

    // The y axis runs over lane slots of LANE_UNITS each, lane 0 on top, with its tick
    // labels at the lane centres. (Integer units: plotters formats custom key points only
    // on integer axes; 1000 per lane is finer than any pixel.)
    let n = layout.lanes.len() as i32;
    let top = n * LANE_UNITS;
    let centres: Vec<i32> = (0..n)
        .map(|i| top - i * LANE_UNITS - LANE_UNITS / 2)
        .collect();
    let label_px = layout
        .lanes
        .iter()
        .map(|l| l.label.len() as u32 * 8 + 16)
        .max()
        .unwrap_or(60);
    let (from_ms, to_ms) = (window.start / 1e3, window.end / 1e3);
    let mut chart = ChartBuilder::on(&body)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(label_px)
        .build_cartesian_2d(from_ms..to_ms, (0..top).with_key_points(centres))?;

    let lane_of = |y: &i32| -> String {
        let i = ((top - y) / LANE_UNITS) as usize;
        layout
            .lanes
            .get(i)
            .map_or(String::new(), |l| l.label.clone())
    };
    let decimals = axis_decimals(to_ms - from_ms);
    let time_label = move |x: &f64| format!("{x:.decimals$}");
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc("time (ms)")
        .x_label_formatter(&time_label)
        .y_label_formatter(&lane_of)
        .label_style(("sans-serif", 14))
        .draw()?;

    // Alternate lane backgrounds so long lanes are easy to follow.
    chart.draw_series((0..n).filter(|i| i % 2 == 1).map(|i| {
        let y = top - i * LANE_UNITS;
        let band = [(from_ms, y), (to_ms, y - LANE_UNITS)];
        Rectangle::new(band, RGBColor(240, 240, 240).filled())
    }))?;

    // One pixel of the x axis in ms: the minimum width of a span.
    let plot_px = chart.plotting_area().dim_in_pixel().0.max(1);
    let min_width = (to_ms - from_ms) / f64::from(plot_px);
    let boxes = spans.iter().zip(&layout.placed).map(|(s, &(lane, row))| {
        // The lane's band less its padding, split into `rows` rows with a gap between them.
        let units = f64::from(LANE_UNITS);
        let pad = units * 0.5 * f64::from(LANE_PAD_PX) / f64::from(lane_px[lane]);
        let row_h = (units - 2.0 * pad) / layout.lanes[lane].rows as f64;
        let lane_top = f64::from(top) - lane as f64 * units - pad;
        let y0 = lane_top - row as f64 * row_h;
        let y1 = y0 - row_h * 0.85;
        let x0 = s.start / 1e3;
        let x1 = (s.end() / 1e3).max(x0 + min_width);
        ([(x0, y0.round() as i32), (x1, y1.round() as i32)], s.kind)
    });
    let boxes: Vec<_> = boxes.collect();
    let fills = boxes
        .iter()
        .map(|&(c, kind)| Rectangle::new(c, kind.colour().filled()));
    chart.draw_series(fills)?;
    // A darker outline separates back-to-back operations (consecutive chunks on one engine)
    // that would otherwise merge into one bar.
    let outlines = boxes
        .iter()
        .map(|&(c, kind)| Rectangle::new(c, kind.outline()));
    chart.draw_series(outlines)?;
    root.present()?;
    Ok(())
}

/// The summary line and a legend of the kinds present in the window.
fn draw_header(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    spans: &[Span],
    summary: &Summary,
) -> Res<()> {
    let text = ("sans-serif", 15).into_font().color(&BLACK);
    area.draw_text(&summary.to_string(), &text, (20, 4))?;
    let kinds: BTreeSet<Kind> = spans.iter().map(|s| s.kind).collect();
    let mut x = 20;
    for kind in kinds {
        let swatch = Rectangle::new([(x, 32), (x + 14, 46)], kind.colour().filled());
        area.draw(&swatch)?;
        area.draw_text(kind.legend(), &text, (x + 20, 32))?;
        // The naive font metrics of plotters' SVG backend: about 8 px per character.
        x += 40 + kind.legend().len() as i32 * 8;
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("skel_trace: error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two streams of a 2-chunk map; the kernels of the two streams overlap (6..8 µs).
    const TRACE: &str = r#"{"displayTimeUnit":"ms","traceEvents":[
      {"name":"thread_name","ph":"M","pid":1,"tid":0,"args":{"name":"stream 0"}},
      {"name":"thread_name","ph":"M","pid":1,"tid":3,"args":{"name":"stream 3"}},
      {"name":"upload","cat":"copy","ph":"X","pid":1,"tid":0,"ts":0.0,"dur":4.0,
       "args":{"bytes":4000,"chunk":0,"chunks":2,"call":1,"skeleton":"map"},"extra":[1,2]},
      {"name":"upload","cat":"copy","ph":"X","pid":1,"tid":3,"ts":4.0,"dur":4.0,
       "args":{"bytes":4000,"chunk":1,"chunks":2,"call":1,"skeleton":"map"}},
      {"name":"kernel","cat":"kernel","ph":"X","pid":1,"tid":0,"ts":4.0,"dur":4.0,"args":{"bytes":0}},
      {"name":"kernel","cat":"kernel","ph":"X","pid":1,"tid":3,"ts":8.0,"dur":2.0,"args":{"bytes":0}},
      {"name":"combine","cat":"kernel","ph":"X","pid":1,"tid":3,"ts":6.0,"dur":1.0},
      {"name":"download","cat":"copy","ph":"X","pid":1,"tid":0,"ts":8.0,"dur":2.0,"args":{"bytes":2000}},
      {"name":"download","cat":"copy","ph":"X","pid":1,"tid":3,"ts":10.0,"dur":2.0,"args":{"bytes":2000}},
      {"name":"some_counter","ph":"C","pid":1,"ts":3.0,"args":{"x":1}}
    ]}"#;

    fn spans() -> Vec<Span> {
        parse_trace(TRACE).expect("valid trace")
    }

    #[test]
    fn parses_complete_events_only() {
        let s = spans();
        assert_eq!(s.len(), 7);
        assert_eq!(s[0].kind, Kind::Upload);
        assert_eq!((s[0].device, s[0].stream), (1, 0));
        assert_eq!((s[0].start, s[0].dur, s[0].bytes), (0.0, 4.0, 4000.0));
        assert_eq!(s[4].kind, Kind::Other);
        assert_eq!(s[4].name, "combine");
        assert_eq!(s[4].bytes, 0.0); // no args at all
        assert_eq!(s[6].kind, Kind::Download);
        // A bare event array is a valid Chrome trace too.
        let bare = r#"[{"name":"kernel","ph":"X","pid":1,"tid":2,"ts":1,"dur":2}]"#;
        assert_eq!(parse_trace(bare).expect("bare array").len(), 1);
    }

    #[test]
    fn malformed_input_is_an_error() {
        for bad in [
            "",
            "{",
            "42",
            r#"{"displayTimeUnit":"ms"}"#,
            r#"{"traceEvents":{}}"#,
            r#"{"traceEvents":[7]}"#,
            r#"{"traceEvents":[{"name":"kernel","ph":"X","tid":0,"dur":1}]}"#,
            r#"{"traceEvents":[{"name":"kernel","ph":"X","tid":0,"ts":"1","dur":1}]}"#,
            r#"{"traceEvents":[{"name":"kernel","ph":"X","tid":0,"ts":1,"dur":-1}]}"#,
            r#"{"traceEvents":[{"name":"kernel","ph":"X","ts":1,"dur":1}]}"#,
            r#"{"traceEvents":[{"ph":"X","tid":0,"ts":1,"dur":1}]}"#,
            r#"{"traceEvents":[{"name":"upload","ph":"X","tid":0,"ts":1,"dur":1,"args":{"bytes":-5}}]}"#,
        ] {
            assert!(parse_trace(bad).is_err(), "accepted {bad:?}");
        }
        let err = parse_trace(r#"{"traceEvents":[{"name":"kernel","ph":"X","tid":0,"dur":1}]}"#)
            .expect_err("no ts");
        assert!(err.to_string().contains("event 0"), "{err}");
        // Valid JSON without complete events has nothing to draw.
        let none = parse_trace(r#"{"traceEvents":[{"name":"x","ph":"M"}]}"#).expect("valid");
        assert!(resolve_window(&none, None, None).is_err());
    }

    #[test]
    fn lanes_by_stream() {
        let s = spans();
        let layout = assign_lanes(&s, By::Stream);
        let labels: Vec<&str> = layout.lanes.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(labels, ["stream 0", "stream 3"]);
        for (span, &(lane, _)) in s.iter().zip(&layout.placed) {
            assert_eq!(lane, if span.stream == 0 { 0 } else { 1 });
        }
        // Stream 0 never overlaps itself; stream 3's combine (6..7) overlaps its upload (4..8).
        assert_eq!(layout.lanes[0].rows, 1);
        assert_eq!(layout.lanes[1].rows, 2);
    }

    #[test]
    fn lanes_by_engine_stack_overlaps() {
        let s = spans();
        let layout = assign_lanes(&s, By::Engine);
        let labels: Vec<&str> = layout.lanes.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(labels, ["H2D copy", "compute", "D2H copy"]);
        let lanes: Vec<usize> = layout.placed.iter().map(|p| p.0).collect();
        assert_eq!(lanes, [0, 0, 1, 1, 1, 2, 2]);
        // Uploads 0..4 and 4..8 touch but do not overlap: one row.
        assert_eq!(layout.lanes[0].rows, 1);
        // Kernel 4..8 and combine 6..7 overlap; kernel 8..10 reuses the first row.
        assert_eq!(layout.lanes[1].rows, 2);
        assert_eq!(layout.placed[2], (1, 0));
        assert_eq!(layout.placed[4], (1, 1));
        assert_eq!(layout.placed[3], (1, 0));
    }

    #[test]
    fn lanes_name_devices_when_several() {
        let mut s = spans();
        s[1].device = 2;
        let layout = assign_lanes(&s, By::Engine);
        assert_eq!(layout.lanes.len(), 6);
        assert_eq!(layout.lanes[0].label, "dev 1 H2D copy");
        assert_eq!(layout.lanes[3].label, "dev 2 H2D copy");
        let by_stream = assign_lanes(&s, By::Stream);
        assert_eq!(by_stream.lanes.len(), 3);
        assert_eq!(by_stream.lanes[2].label, "dev 2 stream 3");
    }

    #[test]
    fn union_merges_overlaps() {
        assert_eq!(union_length(vec![]), 0.0);
        assert_eq!(
            union_length(vec![(4.0, 8.0), (0.0, 2.0), (6.0, 7.0), (7.5, 9.0)]),
            7.0
        );
        assert_eq!(union_length(vec![(0.0, 1.0), (1.0, 2.0)]), 2.0);
    }

    #[test]
    fn summary_of_whole_trace() {
        let s = spans();
        let window = resolve_window(&s, None, None).expect("window");
        assert_eq!(
            window,
            Window {
                start: 0.0,
                end: 12.0
            }
        );
        let sum = summarize(&clip(&s, window), window);
        assert_eq!(sum.span, 12.0);
        assert_eq!(sum.spans, 7);
        assert_eq!((sum.uploaded, sum.downloaded), (8000.0, 4000.0));
        // Uploads 0..8, kernels 4..8 ∪ 6..7 ∪ 8..10 = 6 µs (not 7), downloads 8..12.
        assert_eq!(sum.busy, [8.0 / 12.0, 6.0 / 12.0, 4.0 / 12.0]);
        // 8000 B in 12 µs = 0.667 GB/s.
        assert!((sum.gbps(sum.uploaded) - 8000.0 / 12e3).abs() < 1e-12);
        let line = sum.to_string();
        assert!(line.contains("0.012 ms"), "{line}");
        assert!(line.contains("H2D 8.0 kB at 0.67 GB/s"), "{line}");
        assert!(line.contains("compute 50%"), "{line}");
    }

    #[test]
    fn window_clips_and_prorates() {
        let s = spans();
        // 2..9 µs, given in ms.
        let window = resolve_window(&s, Some(0.002), Some(0.009)).expect("window");
        assert!((window.start - 2.0).abs() < 1e-9 && (window.end - 9.0).abs() < 1e-9);
        let window = Window {
            start: 2.0,
            end: 9.0,
        };
        let clipped = clip(&s, window);
        // The download on stream 3 (10..12) is outside.
        assert_eq!(clipped.len(), 6);
        assert!(clipped.iter().all(|c| c.start >= 2.0 && c.end() <= 9.0));
        assert_eq!((clipped[0].start, clipped[0].dur), (2.0, 2.0));
        assert_eq!(clipped[0].bytes, 2000.0); // half of the upload is inside
        let sum = summarize(&clipped, window);
        assert_eq!(sum.span, 7.0);
        assert_eq!(sum.uploaded, 6000.0);
        assert_eq!(sum.downloaded, 1000.0); // 8..9 of the 8..10 download
        assert_eq!(sum.busy, [6.0 / 7.0, 5.0 / 7.0, 1.0 / 7.0]);
        // An inverted or empty window is refused.
        assert!(resolve_window(&s, Some(0.009), Some(0.002)).is_err());
        assert!(resolve_window(&s, Some(0.005), Some(0.005)).is_err());
        assert!(resolve_window(&s, Some(f64::NAN), None).is_err());
        // A window after the trace holds nothing, and the summary says so plainly.
        let later = Window {
            start: 100.0,
            end: 200.0,
        };
        assert!(clip(&s, later).is_empty());
        let empty = summarize(&[], later);
        assert_eq!((empty.uploaded, empty.busy), (0.0, [0.0; 3]));
        assert!(
            empty.to_string().contains("H2D 0 B at 0.00 GB/s"),
            "{empty}"
        );
    }

    #[test]
    fn renders_an_svg() {
        let s = spans();
        let window = resolve_window(&s, None, None).expect("window");
        let path = std::env::temp_dir().join(format!("skel_trace_test_{}.svg", std::process::id()));
        for by in [By::Stream, By::Engine] {
            let layout = assign_lanes(&s, by);
            let sum = summarize(&s, window);
            render(&path, 800, "test", &s, &layout, &sum, window).expect("render");
            let svg = std::fs::read_to_string(&path).expect("svg written");
            assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
            assert!(svg.contains(if by == By::Stream {
                "stream 3"
            } else {
                "D2H copy"
            }));
            assert!(svg.contains("busy: H2D"));
        }
        let _ = std::fs::remove_file(&path);
    }
}
