//! An irregular stream after MERCATOR's synthetic pipelines (Cole et al.): three stages,
//! each doing heavy work per item and letting about half of the items through. Run twice
//! on one backend:
//!
//! - **compacted**: after each stage a `Filter` packs the survivors, so the next stage's
//!   `Map` runs on full lanes over half as many items (n + n/2 + n/4 work in all);
//! - **idle lanes**: every stage is a predicated `Map` over all n items; dead items
//!   return at once, but on a GPU they idle their warp's lanes while the live ones work
//!   (3n work).
//!
//! It checks that both give the same survivors with the same values and prints the
//! speedup, like the paper's Fig. 6 (1.27-1.78x there). Each time is the best of three
//! runs, from the input on the device to the survivors on the host.
//!
//! `cargo run --release --features cuda --example irregular -- --backend cuda`

use std::time::Instant;

use clap::Parser;
use skel::prelude::*;

#[derive(Parser)]
struct Args {
    /// cpu, rayon, cuda or opencl (default: the best available).
    #[arg(long)]
    backend: Option<Backend>,
    /// Items in the stream.
    #[arg(long, default_value_t = 1 << 20)]
    n: usize,
    /// Work per item and stage (iterations of `sin`).
    #[arg(long, default_value_t = 64)]
    rounds: u32,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
struct Item {
    id: u32,
    alive: u32,
    v: f32,
}

/// One stage: heavy work on a live item, then a pseudo-random pass/drop decision (rate
/// 0.5) from the item's id and the stage. Dead items pass through untouched.
#[userfn]
fn stage(it: Item, #[uniform] s: u32, #[uniform] rounds: u32) -> Item {
    if it.alive == 0 {
        return it;
    }
    let mut h = it.v;
    let mut k = 0;
    while k < rounds {
        h = (h * 1.7 + 0.3).sin();
        k += 1;
    }
    // A multiplicative hash in u64, so nothing overflows: independent decisions per stage.
    let mut r = (it.id as u64 + s as u64 * 0x9e37_79b9) % 4_294_967_296;
    r = r * 2_654_435_761 % 4_294_967_296;
    r ^= r >> 15;
    r = r * 2_246_822_519 % 4_294_967_296;
    Item {
        id: it.id,
        alive: ((r >> 16) & 1) as u32,
        v: h,
    }
}

#[userfn]
fn alive(it: Item) -> bool {
    it.alive == 1
}

const STAGES: u32 = 3;

/// Stage buffers, made (and placed on the device) once, outside the timings.
struct Buffers {
    a: Vector<Item>,
    b: Vector<Item>,
}

/// Survivors with Filter between the stages; returns them and the items each stage saw.
fn compacted(
    b: Backend,
    input: &Vector<Item>,
    bufs: &mut Buffers,
    rounds: u32,
) -> Result<(Vec<Item>, Vec<usize>)> {
    let Buffers {
        a: work,
        b: live_items,
    } = bufs;
    let (mut live, mut seen) = (input.len(), Vec::new());
    for s in 0..STAGES {
        seen.push(live);
        let map = Map::new(stage).uniforms((s, rounds)).backend(b);
        if s == 0 {
            map.run(input, work)?;
        } else {
            map.run(&live_items.view(0..live), &mut work.view_mut(0..live))?;
        }
        live = Filter::new(alive)
            .backend(b)
            .run(&work.view(0..live), &mut live_items.view_mut(0..live))?;
    }
    Ok((live_items.view(0..live).to_vec(), seen))
}

/// The same work with idle lanes: every stage maps all n items.
fn idle_lanes(
    b: Backend,
    input: &Vector<Item>,
    bufs: &mut Buffers,
    rounds: u32,
) -> Result<Vec<Item>> {
    let Buffers { a, b: other } = bufs;
    Map::new(stage)
        .uniforms((0, rounds))
        .backend(b)
        .run(input, a)?;
    for s in 1..STAGES {
        Map::new(stage)
            .uniforms((s, rounds))
            .backend(b)
            .run(a, other)?;
        std::mem::swap(a, other);
    }
    Ok(a.iter().copied().filter(|it| it.alive == 1).collect())
}

/// Best of three runs, in milliseconds, and the last run's result.
fn best_of_3<R>(mut run: impl FnMut() -> Result<R>) -> Result<(f64, R)> {
    let mut best = f64::INFINITY;
    let mut last = None;
    for _ in 0..3 {
        let t0 = Instant::now();
        last = Some(run()?);
        best = best.min(t0.elapsed().as_secs_f64() * 1e3);
    }
    last.map(|r| (best, r))
        .ok_or_else(|| Error::InvalidArgument("no run".into()))
}

fn main() -> Result<()> {
    let args = Args::parse();
    let b = match args.backend {
        Some(b) => b,
        None => skel::default_backend()?,
    };
    let input = Vector::from_fn(args.n, |i| Item {
        id: i as u32,
        alive: 1,
        v: (i % 1000) as f32 * 1e-3,
    });
    let mut bufs = Buffers {
        a: Vector::filled(args.n, Item::default()),
        b: Vector::filled(args.n, Item::default()),
    };
    // The first of three runs builds the kernels and places the buffers on the device.
    let (t_packed, (packed, seen)) = best_of_3(|| compacted(b, &input, &mut bufs, args.rounds))?;
    let (t_idle, idle) = best_of_3(|| idle_lanes(b, &input, &mut bufs, args.rounds))?;
    if packed != idle {
        return Err(Error::InvalidArgument(format!(
            "the pipelines disagree: {} survivors compacted, {} with idle lanes",
            packed.len(),
            idle.len()
        )));
    }
    println!(
        "{b}: {} items, {STAGES} stages of {} rounds; items per stage {seen:?}, {} survive",
        args.n,
        args.rounds,
        packed.len()
    );
    println!("compacted (Filter between stages): {t_packed:9.2} ms");
    println!("idle lanes (predicated Map):       {t_idle:9.2} ms");
    println!("speedup of compaction: {:.2}x", t_idle / t_packed);
    Ok(())
}
