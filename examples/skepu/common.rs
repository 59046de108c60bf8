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
