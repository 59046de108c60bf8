//! A process that ends while `Backend::Auto` still compiles GPU kernels in the background:
//! it must exit with its own status, never crash in the driver's or the compiler's exit
//! code. Run it with a fresh kernel cache so the compiles are real (NVRTC):
//!
//! ```text
//! d=$(mktemp -d); SKEL_CACHE_DIR=$d SKEL_TUNE_DIR=$d/tune \
//!   cargo run --release --features cuda --example exit_stress -- return; echo "exit=$?"
//! ```
//!
//! Modes (the status each must end with):
//! - `return` (0): three Auto calls, each starting a compile of its own kernel, then `main`
//!   returns at once, the compiles still running.
//! - `exit-thread` (3): the main thread keeps calling while another thread calls
//!   `std::process::exit(3)` after `MS` milliseconds (second argument, default 0).
//! - `return-mid-call` (0): another thread keeps calling (on the device once its kernels
//!   are loaded) while `main` returns after `MS` milliseconds.
//!
//! Each mode prints where its first calls ran and why (`skel::tune::explain`) first.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use skel::prelude::*;

#[userfn]
fn scale(x: f32) -> f32 {
    x * 1.5 + 0.25
}

#[userfn]
fn wave(x: f32) -> f32 {
    let mut y = x;
    for _ in 0..8 {
        y = y * 0.999 + 0.001;
    }
    y
}

#[userfn]
fn square(x: f32) -> f32 {
    x * x
}

/// Elements per call: large enough that the host is predicted to take milliseconds, so
/// Auto probes the GPU and starts compiling for it.
const N: usize = 1 << 25;

/// One round of the three calls on the default backend; says where the first round ran.
fn round(x: &Vector<f32>, y: &mut Vector<f32>, say: bool) -> skel::Result<()> {
    Map::new(scale).backend(Backend::Auto).run(x, y)?;
    let first = skel::tune::explain();
    Map::new(wave).backend(Backend::Auto).run(x, y)?;
    Map::new(square).backend(Backend::Auto).run(x, y)?;
    if say {
        match first {
            Some(e) => println!("exit_stress: first call on {} ({})", e.choice, e.reason),
            None => println!("exit_stress: no Auto decision recorded"),
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().map_or("return", String::as_str).to_string();
    let ms: u64 = match args.get(1).map(|s| s.parse()) {
        None => 0,
        Some(Ok(ms)) => ms,
        Some(Err(e)) => {
            eprintln!("exit_stress: the second argument is milliseconds: {e}");
            return ExitCode::from(2);
        }
    };
    let x = Vector::from_fn(N, |i| (i % 1000) as f32 * 0.001);
    let mut y = Vector::zeroed(N);
    let t = Instant::now();
    let ran = match mode.as_str() {
        "return" => round(&x, &mut y, true),
        "exit-thread" => {
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(ms));
                println!("exit_stress: exit(3) from another thread");
                std::process::exit(3);
            });
            let mut say = true;
            loop {
                if let Err(e) = round(&x, &mut y, std::mem::take(&mut say)) {
                    break Err(e);
                }
            }
        }
        "return-mid-call" => {
            std::thread::spawn(move || {
                let mut say = true;
                while round(&x, &mut y, std::mem::take(&mut say)).is_ok() {}
            });
            std::thread::sleep(Duration::from_millis(ms));
            Ok(())
        }
        other => {
            eprintln!("exit_stress: unknown mode {other:?} (return, exit-thread, return-mid-call)");
            return ExitCode::from(2);
        }
    };
    match ran {
        Ok(()) => {
            println!(
                "exit_stress: {mode}: leaving main after {:.0} ms",
                t.elapsed().as_secs_f64() * 1e3
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("exit_stress: {e}");
            ExitCode::FAILURE
        }
    }
}
