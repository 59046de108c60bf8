//! What every SkePU example shares: the command line (`--backend cpu|rayon|cuda|opencl`,
//! `--size N`), deterministic input data, and the printed result and check.

// Each example uses only some of these helpers.
#![allow(dead_code)]

use std::process::ExitCode;

use skel::Backend;

/// The command line every SkePU example shares.
#[derive(clap::Parser)]
struct Cli {
    /// cpu | rayon | cuda | opencl | auto (default: the process default, `SKEL_BACKEND`).
    #[arg(long)]
    backend: Option<Backend>,
    /// The problem size (each example says what it counts).
    #[arg(long)]
    size: Option<usize>,
}

/// Parses the command line, runs `example(backend, size)` and prints what it returns: a line
/// describing the result and whether it agreed with the plain-Rust reference. Exits with 1
/// when the check failed and 2 on a bad command line or a skeleton error.
pub fn main(
    name: &str,
    default_size: usize,
    example: impl FnOnce(Backend, usize) -> skel::Result<(String, bool)>,
) -> ExitCode {
    use clap::{CommandFactory, FromArgMatches};
    let matches = Cli::command().bin_name(name.to_string()).try_get_matches();
    let cli = match matches.and_then(|m| Cli::from_arg_matches(&m)) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print(); // --help and --version are "errors" that exit 0
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let (backend, size) = match resolve(cli.backend, cli.size.unwrap_or(default_size)) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("{name}: {e}");
            return ExitCode::from(2);
        }
    };
    println!("{name}: backend {backend}, size {size}");
    match example(backend, size) {
        Ok((result, ok)) => {
            println!("{result}");
            println!(
                "check against the plain-Rust reference: {}",
                if ok { "ok" } else { "FAILED" }
            );
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("{name}: {e}");
            ExitCode::from(2)
        }
    }
}

/// `--backend B` and `--size N` of a ported program's command line (its own flags taken out).
fn parse(mut args: impl Iterator<Item = String>, size: usize) -> Result<(Backend, usize), String> {
    let mut backend = None;
    let mut size = size;
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--backend" => backend = Some(value.parse::<Backend>().map_err(|e| e.to_string())?),
            "--size" => size = value.parse().map_err(|e| format!("--size {value}: {e}"))?,
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    resolve(backend, size).map_err(|e| e.to_string())
}

/// The backend to run on (the process default where none is named), checked to be usable.
fn resolve(backend: Option<Backend>, size: usize) -> skel::Result<(Backend, usize)> {
    let backend = match backend {
        Some(b) => b,
        None => skel::default_backend()?,
    };
    backend.check()?;
    Ok((backend, size))
}

/// `n` pseudo-random numbers in `[0, 1)` (a fixed linear congruential sequence per `seed`),
/// so every run and every backend sees the same input.
pub fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect()
}

/// Whether `got` is within `rel` of `want`, relative to `max(|want|, 1)` (or equal, which
/// takes in infinities).
pub fn close(got: f64, want: f64, rel: f64) -> bool {
    got == want || (got - want).abs() <= rel * want.abs().max(1.0)
}

/// Whether every element of `got` is [`close`] to the one of `want`.
pub fn all_close(got: &[f32], want: &[f32], rel: f64) -> bool {
    got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|(&g, &w)| close(g as f64, w as f64, rel))
}

/// `Err(ShapeMismatch)` unless `found == expected`: for the checks a skeleton cannot make
/// because the sizes only meet inside the user function.
pub fn same_len(context: &str, expected: usize, found: usize) -> skel::Result<()> {
    if expected == found {
        return Ok(());
    }
    Err(skel::Error::ShapeMismatch {
        context: context.to_string(),
        expected: expected.to_string(),
        found: found.to_string(),
    })
}

/// What a ported SkePU 3 program (hotspot, fdtd2d, heat, edgedetect) gives [`ported_main`].
pub struct Port<'a> {
    pub name: &'a str,
    pub default_size: usize,
    /// The program on one backend, against its plain-Rust reference (the default mode).
    pub run: &'a dyn Fn(Backend, usize) -> skel::Result<(String, bool)>,
    /// The program's result on one backend (`--check` compares every backend with `cpu`).
    pub result: &'a dyn Fn(Backend, usize) -> skel::Result<Vec<f32>>,
    /// `(label, seconds)` of the program on one backend and of its hand-written peers
    /// (`--bench`), in one run.
    pub timings: &'a dyn Fn(Backend, usize) -> skel::Result<Vec<(String, f64)>>,
}

/// [`main`] for a ported program, plus `--check` (every available backend against `cpu`,
/// bit for bit) and `--bench` (its timing report).
pub fn ported_main(port: Port<'_>) -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut take = |flag: &str| {
        let found = args.iter().any(|a| a == flag);
        args.retain(|a| a != flag);
        found
    };
    let (check, bench) = (take("--check"), take("--bench"));
    let name = port.name;
    let (backend, size) = match parse(args.into_iter(), port.default_size) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!(
                "{name}: {e}\nusage: {name} [--backend cpu|rayon|cuda|opencl] [--size N] [--check] [--bench]"
            );
            return ExitCode::from(2);
        }
    };
    if check {
        return check_all(&port, size);
    }
    if bench {
        return match (port.timings)(backend, size) {
            Ok(rows) => {
                println!("{name}: size {size}, best of {REPS} runs");
                let base = rows.first().map_or(1.0, |r| r.1);
                for (label, secs) in rows {
                    println!(
                        "  {label:<44} {:>10.3} ms  {:>6.2}x",
                        secs * 1e3,
                        secs / base
                    );
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{name}: {e}");
                ExitCode::from(2)
            }
        };
    }
    main(name, port.default_size, |_, _| (port.run)(backend, size))
}

/// Every available backend's result against the `cpu` backend's, bit for bit; a backend
/// that does not have the program's form says so (a typed `BackendUnavailable`).
fn check_all(port: &Port<'_>, size: usize) -> ExitCode {
    let name = port.name;
    let want = match (port.result)(Backend::Cpu, size) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("{name}: cpu: {e}");
            return ExitCode::from(2);
        }
    };
    let mut ok = true;
    for b in [Backend::Rayon, Backend::OpenCl, Backend::Cuda] {
        if b.check().is_err() {
            println!("{name} --check: {b}: no device");
            continue;
        }
        match (port.result)(b, size) {
            Ok(got) => {
                let same = got.len() == want.len()
                    && got
                        .iter()
                        .zip(&want)
                        .all(|(g, w)| g.to_bits() == w.to_bits());
                ok &= same;
                println!(
                    "{name} --check: {b}: {}",
                    if same {
                        "bit-identical to cpu"
                    } else {
                        "DIFFERS from cpu"
                    }
                );
            }
            Err(skel::Error::BackendUnavailable { reason, .. }) => {
                println!("{name} --check: {b}: not on this backend ({reason})");
            }
            Err(e) => {
                ok = false;
                println!("{name} --check: {b}: FAILED: {e}");
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Runs of each timed program in `--bench`.
pub const REPS: usize = 5;

/// The best of [`REPS`] runs of `f`, in seconds.
pub fn best_of(mut f: impl FnMut() -> skel::Result<()>) -> skel::Result<f64> {
    f()?;
    let mut best = f64::INFINITY;
    for _ in 0..REPS {
        let t = std::time::Instant::now();
        f()?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok(best)
}
