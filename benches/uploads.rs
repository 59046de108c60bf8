//! Uploads from host memory to a CUDA device: a Reduce (sum of `u32`) over a container just
//! written on the host, so every call uploads all of it, from pinned memory and from
//! pageable memory (a `Vec` the container took over: skel's bounce buffers), next to
//! hand-written copies of the same bytes through the driver (`cuMemcpyHtoDAsync` from
//! pinned memory: the link's bound; from the same pageable memory: the driver's own
//! staging), side by side in one run.
//!
//! Not a criterion bench: it prints one Markdown table, GB/s of the container's bytes
//! (best of `--reps` calls each). The skel columns include the Reduce's kernel and its
//! result's read-back (about 20 us), so small sizes sit below the copies.
//!
//! ```text
//! cargo bench --features cuda --bench uploads
//! cargo bench --features cuda --bench uploads -- --reps 50
//! ```
//!
//! Without a CUDA device it prints "skipped: no CUDA device" and exits 0.

use clap::Parser;
use skel::prelude::*;

#[path = "common/hand.rs"]
mod hand;

#[path = "common/args.rs"]
mod args;

use hand::{best, DevBuf, Hand, Res};

/// Uploads from pinned and pageable memory, skel against the driver's own copies.
#[derive(Parser, Debug)]
struct Opts {
    /// Timed calls per cell (the best is kept).
    #[arg(long, default_value_t = 20)]
    reps: usize,
    #[command(flatten)]
    cargo: args::Cargo,
}

#[userfn]
fn add(a: u32, b: u32) -> u32 {
    a.wrapping_add(b)
}

/// Sizes in bytes: below and at the bounce threshold, a 1080p RGB frame, a large array.
const SIZES: [(&str, usize); 5] = [
    ("256 KiB", 256 << 10),
    ("1 MiB", 1 << 20),
    ("1080p RGB frame (6.2 MB)", 1920 * 1080 * 3),
    ("16 MiB", 16 << 20),
    ("64 MiB", 64 << 20),
];

/// Seconds per upload of `v` by a Reduce on CUDA (the host write before it makes the whole
/// container stale on the device); the last sum is checked against the host's.
fn skel_upload(v: &mut Vector<u32>, reps: usize) -> Res<f64> {
    let reduce = Reduce::new(add).backend(Backend::Cuda);
    let (mut k, mut got) = (0u32, 0u32);
    let t = best(reps, || {
        k = k.wrapping_add(1);
        v.as_mut_slice()[0] = k;
        got = reduce.run(v).map_err(|e| e.to_string())?;
        Ok(())
    })?;
    let want = v.iter().fold(0u32, |s, &x| s.wrapping_add(x));
    (got == want)
        .then_some(t)
        .ok_or_else(|| format!("sum {got}, expected {want}"))
}

fn main() -> Res<()> {
    let opts = Opts::parse();
    if let Err(e) = Backend::Cuda.check() {
        println!("skipped: no CUDA device ({e})");
        return Ok(());
    }
    let hand = Hand::new("extern \"C\" __global__ void unused() {}")?;
    println!("| size | skel, pinned | skel, pageable (bounce buffers) | driver, pinned (the link) | driver, pageable |");
    println!("|---|---|---|---|---|");
    for (name, bytes) in SIZES {
        let n = bytes / 4;
        let data: Vec<u32> = (0..n as u32).collect();
        let gbs = |t: f64| format!("{:.1} GB/s", (n * 4) as f64 / t / 1e9);
        let mut pinned = Vector::pinned(data.clone()).map_err(|e| e.to_string())?;
        let mut pageable = Vector::pageable(data);
        let dev = DevBuf::new(n * 4)?;
        let skel_pinned = skel_upload(&mut pinned, opts.reps)?;
        let skel_pageable = skel_upload(&mut pageable, opts.reps)?;
        let driver_pinned = best(opts.reps, || hand.upload(&dev, pinned.as_slice()))?;
        let driver_pageable = best(opts.reps, || hand.upload(&dev, pageable.as_slice()))?;
        println!(
            "| {name} | {} | {} | {} | {} |",
            gbs(skel_pinned),
            gbs(skel_pageable),
            gbs(driver_pinned),
            gbs(driver_pageable)
        );
    }
    Ok(())
}
