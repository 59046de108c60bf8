//! `Random` in a user function against the same arithmetic without it: a Map whose
//! function draws two `f32` from `rng: &mut Random` (Monte-Carlo pi's sample), and a Map
//! whose function computes the same Philox4x32-10 block from its `#[index]` and a uniform
//! seed by hand (`skel::random::device::skel_philox`, the generator's own arithmetic) and
//! turns its first two words into the same two `f32`. Both write `u32` hits; their outputs
//! are checked equal bit for bit before timing. The ratio is the cost of the `Random`
//! plumbing (the generator state, the hidden seed uniform); the target is <= 1.10.
//!
//! Not a criterion bench: it prints one Markdown table ready to paste.
//!
//! ```text
//! cargo bench --bench random                          # n = 2^24, cpu and rayon
//! cargo bench --features "cuda opencl" --bench random -- 26
//! ./bench-random [--quick] [LOG2_N]                   # the built binary alone
//! ```
//!
//! GPU rows are device-resident: the output stays on the device between calls.

use std::time::Instant;

use skel::prelude::*;
use skel::random::device::skel_philox;

#[path = "common/args.rs"]
mod args;

const SEED: u64 = 0x5EED_2026;

#[userfn]
fn with_random(#[index] i: usize, rng: &mut Random) -> u32 {
    let _ = i;
    let x = rng.next_f32();
    let y = rng.next_f32();
    (x * x + y * y <= 1.0) as u32
}

#[userfn]
fn by_hand(#[index] i: usize, #[uniform] seed: u64) -> u32 {
    let id = i as u64;
    let (w0, w1, _, _) = skel_philox(
        0,
        0,
        id as u32,
        (id >> 32) as u32,
        seed as u32,
        (seed >> 32) as u32,
    );
    let x = ((w0 >> 8) as f32) * 5.960_464_5e-8_f32;
    let y = ((w1 >> 8) as f32) * 5.960_464_5e-8_f32;
    (x * x + y * y <= 1.0) as u32
}

/// Best of `reps` timed calls of `f`, in seconds (after one warm-up call).
fn best(reps: usize, mut f: impl FnMut() -> skel::Result<()>) -> skel::Result<f64> {
    f()?;
    let mut t = f64::INFINITY;
    for _ in 0..reps {
        let s = Instant::now();
        f()?;
        t = t.min(s.elapsed().as_secs_f64());
    }
    Ok(t)
}

/// `Random` in a user function against the same Philox arithmetic by hand.
#[derive(clap::Parser, Debug)]
struct Opts {
    /// Samples, as a power of two (default 24, 18 with --quick).
    #[arg(value_parser = clap::value_parser!(u32).range(0..=40))]
    log2: Option<u32>,
    /// Small size, fewer repetitions.
    #[arg(long)]
    quick: bool,
    #[command(flatten)]
    cargo: args::Cargo,
}

fn main() -> skel::Result<()> {
    let Opts { log2, quick, .. } = clap::Parser::parse();
    let log2 = log2.unwrap_or(if quick { 18 } else { 24 });
    let n = 1usize << log2;
    let reps = if quick { 3 } else { 10 };
    println!(
        "| backend | n | Random (Msamples/s) | by hand (Msamples/s) | Random time / by-hand time |"
    );
    println!("|---|---|---|---|---|");
    for backend in [Backend::Cpu, Backend::Rayon, Backend::OpenCl, Backend::Cuda] {
        if backend.check().is_err() {
            continue;
        }
        let (mut a, mut b) = (Vector::<u32>::zeroed(n), Vector::<u32>::zeroed(n));
        let rng_map = Map::new(with_random).seed(SEED).backend(backend);
        let hand_map = Map::new(by_hand).uniforms((SEED,)).backend(backend);
        rng_map.run_index(&mut a)?;
        hand_map.run_index(&mut b)?;
        if a.to_vec() != b.to_vec() {
            return Err(skel::Error::InvalidArgument(format!(
                "{backend}: the Random Map and the by-hand Map disagree"
            )));
        }
        // Alternate the two so that clock and thermal drift hit both alike.
        let (mut tr, mut th) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..3 {
            tr = tr.min(best(reps, || rng_map.run_index(&mut a))?);
            th = th.min(best(reps, || hand_map.run_index(&mut b))?);
        }
        println!(
            "| {backend} | 2^{log2} | {:.0} | {:.0} | {:.3} |",
            n as f64 / tr / 1e6,
            n as f64 / th / 1e6,
            tr / th
        );
    }
    Ok(())
}
