//! Copies between host memory and a CUDA device, from and into pinned memory and pageable
//! memory (a `Vec` the container took over: skel's bounce buffers), next to hand-written
//! copies of the same bytes through the driver (`cuMemcpyHtoDAsync` / `cuMemcpyDtoHAsync`:
//! from pinned memory the link's bound; from the same pageable memory the driver's own
//! staging), side by side in one run.
//!
//! Uploads: a Reduce (sum of `u32`) over a container just written on the host, so every
//! call uploads all of it. Downloads: a Map (`x + 1`) over a device-resident input whose
//! result the host then reads, so every call downloads all of it. The skel columns include
//! the kernel and, for the Reduce, its result's read-back (about 20 us in all), so small
//! sizes sit below the driver's copies.
//!
//! Not a criterion bench: it prints one Markdown table, GB/s of the container's bytes
//! (best of `--reps` calls each).
//!
//! ```text
//! cargo bench --features cuda --bench transfers
//! cargo bench --features cuda --bench transfers -- --reps 50
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

/// Copies from and into pinned and pageable memory, skel against the driver's own.
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

#[userfn]
fn next(x: u32) -> u32 {
    x.wrapping_add(1)
}

/// Sizes in bytes: below and at the bounce threshold, a 1080p RGB frame, larger arrays.
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

/// Seconds per download of `out`, written by a Map on CUDA from the device-resident `x`
/// and then read on the host; the last result is checked.
fn skel_download(x: &Vector<u32>, out: &mut Vector<u32>, reps: usize) -> Res<f64> {
    let map = Map::new(next).backend(Backend::Cuda);
    let t = best(reps, || {
        map.run(x, out).map_err(|e| e.to_string())?;
        out.try_as_slice().map(|_| ()).map_err(|e| e.to_string())
    })?;
    let right = out
        .iter()
        .zip(x.iter())
        .all(|(&o, &x)| o == x.wrapping_add(1));
    right.then_some(t).ok_or_else(|| "wrong Map result".into())
}

fn main() -> Res<()> {
    let opts = Opts::parse();
    if let Err(e) = Backend::Cuda.check() {
        println!("skipped: no CUDA device ({e})");
        return Ok(());
    }
    let hand = Hand::new("extern \"C\" __global__ void unused() {}")?;
    let head = "skel, pinned | skel, pageable (bounce buffers) | driver, pinned (the link) | driver, pageable";
    println!("| size | direction | {head} |");
    println!("|---|---|---|---|---|---|");
    for (name, bytes) in SIZES {
        let n = bytes / 4;
        let data: Vec<u32> = (0..n as u32).collect();
        let gbs = |t: f64| format!("{:.1} GB/s", (n * 4) as f64 / t / 1e9);
        let row = |dir: &str, t: [f64; 4]| {
            let cells: Vec<String> = t.iter().map(|&t| gbs(t)).collect();
            println!("| {name} | {dir} | {} |", cells.join(" | "));
        };
        let mut pinned = Vector::pinned(data.clone()).map_err(|e| e.to_string())?;
        let mut pageable = Vector::pageable(data.clone());
        let dev = DevBuf::new(n * 4)?;
        row(
            "host to device",
            [
                skel_upload(&mut pinned, opts.reps)?,
                skel_upload(&mut pageable, opts.reps)?,
                best(opts.reps, || hand.upload(&dev, pinned.as_slice()))?,
                best(opts.reps, || hand.upload(&dev, pageable.as_slice()))?,
            ],
        );
        let x = Vector::from_vec(data);
        let mut into_pinned = Vector::pinned(vec![0u32; n]).map_err(|e| e.to_string())?;
        let mut into_pageable = Vector::pageable(vec![0u32; n]);
        let skel = [
            skel_download(&x, &mut into_pinned, opts.reps)?,
            skel_download(&x, &mut into_pageable, opts.reps)?,
        ];
        row(
            "device to host",
            [
                skel[0],
                skel[1],
                best(opts.reps, || {
                    hand.download(into_pinned.as_mut_slice(), &dev)
                })?,
                best(opts.reps, || {
                    hand.download(into_pageable.as_mut_slice(), &dev)
                })?,
            ],
        );
    }
    Ok(())
}
