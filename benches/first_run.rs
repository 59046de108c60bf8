//! What a user does, from a cold start: the README's main command (greyscale) and ported
//! SkePU programs, on the default backend (`Backend::Auto`) and on every fixed backend
//! present, each run as a process of its own (own report, no criterion).
//!
//! Per job and backend, three runs, each a fresh process:
//! - **cold**: a fresh model directory and an empty kernel cache (`SKEL_TUNE_DIR`,
//!   `SKEL_CACHE_DIR`): a newcomer's first run;
//! - **warm cache**: a fresh model directory, the kernel cache the cold run left: a first
//!   run of a program whose kernels were compiled before;
//! - **warm**: the models and kernel cache the warm-cache run left (the steady state).
//!
//! With `--runs N`, each cell is the median of N such sequences (the rates of a whole
//! process move by up to 1.5x from one process to the next on a busy host).
//!
//! A job's time is its whole run inside the process (the greyscale pipeline from start to
//! end, or a SkePU program's calls, results fetched to the host), so first-call costs
//! (kernel compiles, calibration) count. Jobs: greyscale on the sample photos
//! (`$SKEL_DATA_DIR/images`, else `../shared/data/images`, else the repository's), on N
//! synthetic 1920x1080 frames (`--frames N`, default 240), and every program of
//! `examples/skepu` (dot, ppmcc, mandelbrot, median, nbody, mmmult, cma, coulombic, life,
//! mvmult, pairs, psnr, taylor), each repeating its computation `reps` times.
//! Every line ends with `auto/best`, Auto's rate over the best fixed backend's in the same
//! column (the target is at least 0.9).
//!
//! With `SKEL_TUNE_LOG=1` every Auto decision of a child is shown: the child logs the
//! library's records to its stderr (a logger of its own, below), and the parent prints
//! them after the table, per job and state, or with `--log DIR` writes them to
//! `DIR/<job>-<state>.log` instead.
//!
//! ```text
//! cargo bench --features opencl --bench first_run -- --short
//! cargo bench --features "cuda opencl" --bench first_run -- --frames 240
//! cargo bench --features opencl --bench first_run -- --jobs photos,dot --backends rayon
//! cargo bench --features "cuda opencl" --bench first_run -- --runs 3
//! SKEL_TUNE_LOG=1 cargo bench --features opencl --bench first_run -- --jobs coulombic
//! ```

// Every example is a crate of its own with `mod common;`: one copy of the helpers each.
#![allow(clippy::duplicate_mod)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use clap::Parser as _;
use skel::prelude::*;

// Its `main` is not called from here; its file's unit tests are not run either.
#[allow(dead_code, unused_imports)]
#[path = "../examples/greyscale.rs"]
mod greyscale;

macro_rules! examples {
    ($($name:ident: $path:literal)*) => {$(
        // The examples' `main` and command-line helpers are not called from here.
        #[allow(dead_code)]
        #[path = $path]
        mod $name;
    )*};
}

examples! {
    dot: "../examples/skepu/dot.rs"
    ppmcc: "../examples/skepu/ppmcc.rs"
    mandelbrot: "../examples/skepu/mandelbrot.rs"
    median: "../examples/skepu/median.rs"
    nbody: "../examples/skepu/nbody.rs"
    mmmult: "../examples/skepu/mmmult.rs"
    cma: "../examples/skepu/cma.rs"
    coulombic: "../examples/skepu/coulombic.rs"
    life: "../examples/skepu/life.rs"
    mvmult: "../examples/skepu/mvmult.rs"
    pairs: "../examples/skepu/pairs.rs"
    psnr: "../examples/skepu/psnr.rs"
    taylor: "../examples/skepu/taylor.rs"
}

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The child's logger where `SKEL_TUNE_LOG` is on: every record of the library (Auto's
/// decisions at `info`) to stderr, each line marked, with the time since the child began,
/// for the parent to pick out.
struct StderrLog(Instant);

/// What marks a log line of a child on its stderr.
const LOG_MARK: &str = "skel-log ";

impl log::Log for StderrLog {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.target().starts_with("skel") && m.level() <= log::Level::Info
    }

    fn log(&self, r: &log::Record<'_>) {
        if !self.enabled(r.metadata()) {
            return;
        }
        let at = self.0.elapsed().as_secs_f64() * 1e3;
        let text = r.args().to_string();
        let mut lines = text.lines();
        let first = lines.next().unwrap_or_default();
        // One write per record: the lines of a decision stay together.
        let mut out = format!("{LOG_MARK}{at:9.3} ms {} {first}\n", r.level());
        for line in lines {
            out += &format!("{LOG_MARK}{:>18}{line}\n", "");
        }
        eprint!("{out}");
    }

    fn flush(&self) {}
}

/// Installs [`StderrLog`] where `SKEL_TUNE_LOG` is on (read through `skel::config`; a
/// malformed value is the library's to report, and logs nothing here).
fn log_to_stderr(start: Instant) {
    if !skel::config::TUNE_LOG.get().unwrap_or(false) {
        return;
    }
    let logger: &'static StderrLog = Box::leak(Box::new(StderrLog(start)));
    if log::set_logger(logger).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
}

/// One SkePU program: name, size (full, short), calls per run (full, short).
const SKEPU: [(&str, [usize; 2], [usize; 2]); 13] = [
    ("dot", [1 << 22, 1 << 18], [20, 5]),
    ("ppmcc", [1 << 22, 1 << 18], [10, 3]),
    ("mandelbrot", [512, 128], [5, 2]),
    ("median", [1024, 256], [5, 2]),
    ("nbody", [2048, 512], [3, 2]),
    ("mmmult", [256, 128], [5, 2]),
    ("cma", [1 << 22, 1 << 16], [5, 2]),
    ("coulombic", [256, 64], [3, 2]),
    ("life", [1024, 128], [3, 2]),
    ("mvmult", [2048, 256], [10, 3]),
    ("pairs", [1024, 128], [3, 2]),
    ("psnr", [2048, 256], [5, 2]),
    ("taylor", [1 << 20, 1 << 14], [5, 2]),
];

/// The calls of SkePU program `name` at `size`, `reps` times, on `backend`; a checksum.
fn skepu(name: &str, backend: Backend, size: usize, reps: usize) -> Res<f64> {
    let mut sum = 0.0;
    match name {
        "dot" => {
            let (a, b) = dot::inputs(size);
            for _ in 0..reps {
                sum += f64::from(dot::compute(backend, &a, &b)?);
            }
        }
        "ppmcc" => {
            let (x, y) = ppmcc::inputs(size);
            for _ in 0..reps {
                sum += ppmcc::compute(backend, &x, &y)?;
            }
        }
        "mandelbrot" => {
            for _ in 0..reps {
                let m = mandelbrot::compute(backend, size, 2 * size)?;
                sum += m.to_vec().iter().map(|&v| f64::from(v)).sum::<f64>();
            }
        }
        "median" => {
            let image = median::inputs(size);
            for _ in 0..reps {
                let m = median::compute(backend, &image)?;
                sum += m.to_vec().iter().map(|&v| f64::from(v)).sum::<f64>();
            }
        }
        "nbody" => {
            let ps = nbody::inputs(size);
            for _ in 0..reps {
                sum += nbody::compute(backend, &ps)?.len() as f64;
            }
        }
        "mmmult" => {
            let (a, b) = mmmult::inputs(size);
            for _ in 0..reps {
                let c = mmmult::compute(backend, &a, &b)?;
                sum += c.to_vec().iter().map(|&v| f64::from(v)).sum::<f64>();
            }
        }
        "cma" => {
            let x = cma::inputs(size);
            for _ in 0..reps {
                sum += cma::compute(backend, &x)?
                    .iter()
                    .map(|&v| f64::from(v))
                    .sum::<f64>();
            }
        }
        "coulombic" => {
            let atoms = coulombic::inputs(100, size);
            for _ in 0..reps {
                let m = coulombic::compute(backend, &atoms, size)?;
                sum += m.to_vec().iter().map(|&v| f64::from(v)).sum::<f64>();
            }
        }
        "life" => {
            let board = life::inputs(size);
            for _ in 0..reps {
                let m = life::compute(backend, &board, 10)?;
                sum += m.to_vec().iter().map(|&v| f64::from(v)).sum::<f64>();
            }
        }
        "mvmult" => {
            let (a, x) = mvmult::inputs(size, size + 3);
            for _ in 0..reps {
                sum += mvmult::compute(backend, &a, &x)?
                    .iter()
                    .map(|&v| f64::from(v))
                    .sum::<f64>();
            }
        }
        "pairs" => {
            let (v, h) = pairs::inputs(size);
            for _ in 0..reps {
                let (_, far) = pairs::compute(backend, &v, &h)?;
                sum += far.iter().map(|&v| f64::from(v)).sum::<f64>();
            }
        }
        "psnr" => {
            let (original, noisy) = psnr::inputs(size);
            for _ in 0..reps {
                sum += psnr::compute(backend, &original, &noisy)?;
            }
        }
        "taylor" => {
            for _ in 0..reps {
                sum += f64::from(taylor::compute(backend, 0.5, size)?);
            }
        }
        other => return Err(format!("no SkePU program {other}").into()),
    }
    Ok(sum)
}

/// Where the sample photos are: `$SKEL_DATA_DIR/images`, `shared/data/images` in or
/// next to the repository, else (`None`) the example's own.
fn photos() -> Option<PathBuf> {
    let data = std::env::var_os("SKEL_DATA_DIR").map(|d| Path::new(&d).join("images"));
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shared = ["shared/data/images", "../shared/data/images"].map(|d| repo.join(d));
    data.into_iter().chain(shared).find(|d| d.is_dir())
}

/// The child: runs one job on `backend` (`auto`: the default) and prints
/// `RESULT <items> <seconds>`, and for Auto the line where the Map ran.
fn child(job: &str, backend: &str, arg: usize, reps: usize) -> Res<()> {
    let fixed = (backend != "auto")
        .then(|| backend.parse::<Backend>())
        .transpose()?;
    let start = Instant::now();
    if fixed.is_none() {
        log_to_stderr(start);
    }
    let items = match job {
        "photos" | "frames" => {
            let out = std::env::temp_dir().join(format!("skel-first-run-{}", std::process::id()));
            let mut args = vec!["greyscale".to_string(), "--output".into()];
            args.push(out.display().to_string());
            if let Some(b) = fixed {
                args.extend(["--backend".into(), b.to_string()]);
            }
            if job == "frames" {
                args.extend(["--frames".into(), arg.to_string()]);
            } else if let Some(dir) = photos() {
                args.extend(["--input".into(), dir.display().to_string()]);
            }
            let ok =
                greyscale::run(greyscale::Args::parse_from(args)).map_err(|e| e.to_string())?;
            let _ = std::fs::remove_dir_all(&out);
            if !ok {
                return Err("greyscale failed".into());
            }
            match job {
                "frames" => arg,
                _ => greyscale::io::collect_images(&photos().into_iter().collect::<Vec<_>>())
                    .map_err(|e| e.to_string())?
                    .len(),
            }
        }
        name => {
            skepu(name, fixed.unwrap_or(Backend::Auto), arg, reps)?;
            if let (None, Some(e)) = (fixed, skel::tune::explain()) {
                println!("  last call (skel): {} ({})", e.choice, e.reason);
            }
            reps
        }
    };
    println!("RESULT {items} {:.6}", start.elapsed().as_secs_f64());
    Ok(())
}

/// Runs the child for `job` on `backend` with the given model and kernel-cache
/// directories: items per second, Auto's one-line placement if printed, and the child's
/// log lines (`SKEL_TUNE_LOG`).
fn spawn(
    job: &str,
    backend: &str,
    arg: usize,
    reps: usize,
    tune: &Path,
    cache: &Path,
) -> Res<(f64, String, Vec<String>)> {
    let exe = std::env::current_exe()?;
    let out = Command::new(exe)
        .args(["--child", job, backend, &arg.to_string(), &reps.to_string()])
        .env("SKEL_TUNE_DIR", tune)
        .env("SKEL_CACHE_DIR", cache)
        .env_remove("SKEL_BACKEND")
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!("{job} on {backend}: {}\n{text}\n{err}", out.status).into());
    }
    let line = text.lines().find_map(|l| l.strip_prefix("RESULT "));
    let line = line.ok_or_else(|| format!("{job} on {backend}: no RESULT line\n{text}"))?;
    let mut f = line.split_whitespace().map(str::parse::<f64>);
    let (items, secs) = match (f.next(), f.next()) {
        (Some(Ok(i)), Some(Ok(s))) => (i, s),
        _ => return Err(format!("{job} on {backend}: bad RESULT line {line}").into()),
    };
    let placed = text
        .lines()
        .find_map(|l| l.trim().split_once("(skel): ").map(|(_, r)| r))
        .unwrap_or_default()
        .to_string();
    let logged = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter_map(|l| l.strip_prefix(LOG_MARK))
        .map(String::from)
        .collect();
    Ok((items / secs.max(1e-9), placed, logged))
}

/// The median of `v` (the mean of the middle two for an even count).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Shows the log lines of the Auto child `name` (`<job>-<state>`): written to
/// `dir/<name>.log` where `--log DIR` names one, else printed under a heading.
fn show_log(dir: Option<&Path>, name: &str, lines: &[String]) -> Res<()> {
    match dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            let file = dir.join(format!("{name}.log"));
            std::fs::write(&file, lines.join("\n") + "\n")?;
            println!("auto's decisions, {name}: {}", file.display());
        }
        None => {
            println!("\n## auto's decisions, {name}\n\n```text");
            lines.iter().for_each(|l| println!("{l}"));
            println!("```");
        }
    }
    Ok(())
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        let num = |i: usize| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(1);
        return child(&args[1], &args[2], num(3), num(4));
    }
    let short = args.iter().any(|a| a == "--short");
    let option = |name: &str| {
        let i = args.iter().position(|a| a == name)?;
        args.get(i + 1).cloned()
    };
    let frames = option("--frames")
        .and_then(|f| f.parse().ok())
        .unwrap_or(if short { 24 } else { 240 });
    let listed =
        |name: &str| option(name).map(|l| l.split(',').map(String::from).collect::<Vec<_>>());
    let (only_jobs, only_backends) = (listed("--jobs"), listed("--backends"));
    let log_dir = option("--log").map(PathBuf::from);
    let runs = option("--runs")
        .and_then(|r| r.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1);
    let k = usize::from(short);
    let mut jobs: Vec<(String, usize, usize)> =
        vec![("photos".into(), 0, 1), ("frames".into(), frames, 1)];
    for (name, size, reps) in SKEPU {
        jobs.push((name.into(), size[k], reps[k]));
    }
    jobs.retain(|j| only_jobs.as_ref().map_or(true, |o| o.contains(&j.0)));
    let mut backends = vec!["auto".to_string()];
    backends.extend(Backend::available().iter().map(Backend::to_string));
    backends.retain(|b| b == "auto" || only_backends.as_ref().map_or(true, |o| o.contains(b)));
    let root = std::env::temp_dir().join(format!("skel-first-run-bench-{}", std::process::id()));
    println!(
        "# first run: cold (fresh models, empty kernel cache), warm cache (fresh models), warm"
    );
    let where_photos = photos().map_or("the example's own".into(), |d| d.display().to_string());
    println!("# photos: {where_photos}; {frames} synthetic 1920x1080 frames");
    println!(
        "# {} cores; backends {}",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        backends.join(", ")
    );
    println!("\n| job | backend | cold items/s | warm-cache items/s | warm items/s |");
    println!("|---|---|---|---|---|");
    let mut worst = f64::INFINITY;
    // Per job and state, Auto's log lines (`SKEL_TUNE_LOG`), shown after the table.
    let mut logs: Vec<(String, Vec<String>)> = Vec::new();
    for (job, arg, reps) in &jobs {
        let mut rows: Vec<(String, [f64; 3], String)> = Vec::new();
        for b in &backends {
            // Per state, the rate of each of `runs` sequences of three fresh processes.
            let mut rates: [Vec<f64>; 3] = Default::default();
            let mut placed = String::new();
            for run in 0..runs {
                let dir = root.join(format!("{job}-{b}-{run}"));
                let _ = std::fs::remove_dir_all(&dir);
                let cache = dir.join("cache");
                let cold = spawn(job, b, *arg, *reps, &dir.join("tune-cold"), &cache)?;
                let warm_cache = spawn(job, b, *arg, *reps, &dir.join("tune-warm"), &cache)?;
                let warm = spawn(job, b, *arg, *reps, &dir.join("tune-warm"), &cache)?;
                let _ = std::fs::remove_dir_all(&dir);
                for (k, (state, done)) in [
                    ("cold", &cold),
                    ("warm-cache", &warm_cache),
                    ("warm", &warm),
                ]
                .into_iter()
                .enumerate()
                {
                    rates[k].push(done.0);
                    if run == 0 && !done.2.is_empty() {
                        logs.push((format!("{job}-{state}"), done.2.clone()));
                    }
                }
                if run == 0 {
                    placed = cold.1;
                }
            }
            rows.push((b.clone(), rates.map(median), placed));
        }
        let best: Vec<f64> = (0..3)
            .map(|c| rows.iter().skip(1).map(|r| r.1[c]).fold(0.0, f64::max))
            .collect();
        for (b, r, placed) in &rows {
            println!("| {job} | {b} | {:.2} | {:.2} | {:.2} |", r[0], r[1], r[2]);
            if b == "auto" && !placed.is_empty() {
                println!("|  | (auto, cold run: {placed}) | | | |");
            }
        }
        let auto = rows[0].1;
        let ratio: Vec<f64> = (0..3).map(|c| auto[c] / best[c].max(1e-12)).collect();
        worst = worst.min(ratio.iter().copied().fold(f64::INFINITY, f64::min));
        println!(
            "| {job} | **auto/best** | {:.2} | {:.2} | {:.2} |",
            ratio[0], ratio[1], ratio[2]
        );
    }
    println!("\nworst auto/best: {worst:.2} (target >= 0.9)");
    for (name, lines) in &logs {
        show_log(log_dir.as_deref(), name, lines)?;
    }
    let _ = std::fs::remove_dir_all(&root);
    Ok(())
}
