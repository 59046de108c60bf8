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
    let cli: Cli = match parse_cli(name) {
        Ok(cli) => cli,
        Err(code) => return code,
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

/// The command line of `C`, or the exit code after clap printed help (0) or an error (2).
fn parse_cli<C: clap::Parser>(name: &str) -> Result<C, ExitCode> {
    let matches = C::command().bin_name(name.to_string()).try_get_matches();
    matches.and_then(|m| C::from_arg_matches(&m)).map_err(|e| {
        let _ = e.print(); // --help and --version are "errors" that exit 0
        ExitCode::from(if e.use_stderr() { 2 } else { 0 })
    })
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

/// The command line of a ported SkePU 3 program: the shared one plus its two modes.
#[derive(clap::Parser)]
struct PortCli {
    #[command(flatten)]
    common: Cli,
    /// Compare every available backend with `cpu`, bit for bit.
    #[arg(long)]
    check: bool,
    /// Time the program next to its hand-written peers, in one run.
    #[arg(long)]
    bench: bool,
    /// Which form of the program runs, where it has several (see its docs; default: its
    /// first).
    #[arg(long)]
    form: Option<String>,
}

/// The form `--form` picked for a [`Program`] (its first where none was named).
static FORM: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// The form of the [`Program`] that runs (`""` for a program of one form).
pub fn form() -> &'static str {
    FORM.get().copied().unwrap_or("")
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
    let name = port.name;
    let cli: PortCli = match parse_cli(name) {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    if let Some(f) = &cli.form {
        eprintln!("{name}: --form {f}: this program has one form");
        return ExitCode::from(2);
    }
    let (check, bench) = (cli.check, cli.bench);
    let size = cli.common.size.unwrap_or(port.default_size);
    let (backend, size) = match resolve(cli.common.backend, size) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("{name}: {e}");
            return ExitCode::from(2);
        }
    };
    if check {
        return check_all(&port, size);
    }
    if bench {
        return match (port.timings)(backend, size) {
            Ok(rows) => {
                print_timings(name, size, &rows);
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

/// `(label, result)` of each way a [`Program`] runs on one backend.
pub type Runs = Vec<(String, Vec<f64>)>;

/// What a program of many calls (backprop, nw) gives [`program_main`]: like [`Port`], but
/// its results are checked against its plain sequential reference, within a tolerance
/// where a device may fold in another order or round a transcendental otherwise.
pub struct Program<'a> {
    pub name: &'a str,
    pub default_size: usize,
    /// `(label, result)` of each way the program runs on one backend (eager calls, a
    /// recorded `skel::Graph`, ...).
    pub results: &'a dyn Fn(Backend, usize) -> skel::Result<Runs>,
    /// The plain sequential program's result.
    pub reference: &'a dyn Fn(usize) -> Vec<f64>,
    /// The forms the program is written in, which `--form` picks from ([`form`]); the
    /// first is the default. Empty for a program of one form.
    pub forms: &'static [&'static str],
    /// How far a result may be from the reference, relative to `max(|want|, 1)` (0: equal).
    pub tolerance: f64,
    /// `(label, seconds)` of the program on one backend and of its hand-written peers
    /// (`--bench`), in one run.
    pub timings: &'a dyn Fn(Backend, usize) -> skel::Result<Vec<(String, f64)>>,
}

/// The largest difference between `got` and `want`, relative to `max(|want|, 1)`
/// (infinite where the lengths differ or a value is NaN).
pub fn max_rel_diff(got: &[f64], want: &[f64]) -> f64 {
    if got.len() != want.len() {
        return f64::INFINITY;
    }
    got.iter().zip(want).fold(0.0, |m: f64, (&g, &w)| {
        if g == w {
            m
        } else if g.is_nan() || w.is_nan() {
            f64::INFINITY
        } else {
            m.max((g - w).abs() / w.abs().max(1.0))
        }
    })
}

/// The shared command line for a [`Program`]: by default its results on the chosen
/// backend against the reference; `--check`, every available backend's; `--bench`, the
/// timing report with each skel row's ratio to the hand-written Rayon one.
pub fn program_main(program: Program<'_>) -> ExitCode {
    let name = program.name;
    let cli: PortCli = match parse_cli(name) {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let picked = match cli.form.as_deref() {
        None => program.forms.first().copied().unwrap_or(""),
        Some(f) => match program.forms.iter().find(|&&known| known == f) {
            Some(&known) => known,
            None => {
                eprintln!("{name}: --form {f}: the forms are {:?}", program.forms);
                return ExitCode::from(2);
            }
        },
    };
    let _ = FORM.set(picked);
    let size = cli.common.size.unwrap_or(program.default_size);
    let (backend, size) = match resolve(cli.common.backend, size) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("{name}: {e}");
            return ExitCode::from(2);
        }
    };
    if cli.bench {
        return match (program.timings)(backend, size) {
            Ok(rows) => {
                print_timings(name, size, &rows);
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{name}: {e}");
                ExitCode::from(2)
            }
        };
    }
    let backends = if cli.check {
        vec![Backend::Cpu, Backend::Rayon, Backend::OpenCl, Backend::Cuda]
    } else {
        vec![backend]
    };
    let want = (program.reference)(size);
    let mut ok = true;
    for b in backends {
        if b.check().is_err() {
            println!("{name} --check: {b}: no device");
            continue;
        }
        match (program.results)(b, size) {
            Ok(runs) => {
                for (label, got) in runs {
                    let diff = max_rel_diff(&got, &want);
                    let good = diff <= program.tolerance;
                    ok &= good;
                    println!(
                        "{name}: {b} {label}: {} (largest relative difference {diff:.2e}, allowed {:.0e})",
                        if good { "ok" } else { "FAILED" },
                        program.tolerance
                    );
                }
            }
            Err(e) => {
                ok = false;
                println!("{name}: {b}: FAILED: {e}");
            }
        }
    }
    println!(
        "check against the plain sequential reference: {}",
        if ok { "ok" } else { "FAILED" }
    );
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The `--bench` report: milliseconds per row, the ratio to the first row, and for every
/// skel row its ratio to the hand-written Rayon row (below 1: skel is faster).
pub fn print_timings(name: &str, size: usize, rows: &[(String, f64)]) {
    println!("{name}: size {size}, best of {REPS} runs");
    let base = rows.first().map_or(1.0, |r| r.1);
    let rayon = rows
        .iter()
        .find(|(label, _)| label.starts_with("hand-written Rayon"))
        .map(|r| r.1);
    for (label, secs) in rows {
        let vs = match rayon {
            Some(r) if label.starts_with("skel") => format!("  skel/hand-Rayon {:.2}", secs / r),
            _ => String::new(),
        };
        println!(
            "  {label:<52} {:>10.3} ms  {:>6.2}x{vs}",
            secs * 1e3,
            secs / base
        );
    }
}
