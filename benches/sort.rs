//! Sort of 2^26 u32 keys, f32 keys and u32 -> u32 key-value pairs (uniformly random): every
//! skel backend here against `par_sort_unstable` (Rayon's parallel pdqsort, the CPU
//! baseline) and `slice::sort` (std's stable sort, one core), in one run. Every skel result
//! is checked against `slice::sort`'s (keys as bit patterns, values too: the sort is
//! stable).
//!
//! Not a criterion bench: it prints one Markdown table ready to paste.
//!
//! ```text
//! cargo bench --bench sort                           # n = 2^26: slice::sort, par_sort_unstable, rayon
//! cargo bench --bench sort -- --short                # n = 2^20, every row (CI)
//! cargo bench --features "cuda opencl" --bench sort -- 26
//! ./bench-sort [--short] [--cpu] [LOG2_N]            # the built binary alone
//! ```
//!
//! Times are the median of the calls after a warm-up one (`slice::sort` and skel `cpu`, the
//! sequential sorts: one call, and the cpu row only with `--short` or `--cpu`). Before each
//! call the operand is reset from the unsorted data (not timed): on the host by a copy, on
//! a GPU by a skel Map copy on that device, so GPU rows are device-resident (no transfer
//! timed); a CUDA call is timed up to `skel::debug::synchronize()`, an OpenCL call up to
//! reading back its first key (4 bytes). The GPU peers (torch.sort, cupy.sort) are
//! `benches/peers/sort_peers.py`.

use std::time::Instant;

use rayon::prelude::*;
use skel::prelude::*;

#[path = "common/args.rs"]
mod args;

#[userfn]
fn same_u32(x: u32) -> u32 {
    x
}

#[userfn]
fn same_f32(x: f32) -> f32 {
    x
}

/// Uniform random 32-bit words (xorshift64).
fn words(n: usize, seed: u64) -> Vec<u32> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 32) as u32
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median milliseconds of `reps` timed calls of `once` on `state` after one untimed, each
/// preceded by an untimed `reset`.
fn timed<S: ?Sized>(
    reps: usize,
    state: &mut S,
    mut reset: impl FnMut(&mut S),
    mut once: impl FnMut(&mut S),
) -> f64 {
    reset(state);
    once(state);
    median(
        (0..reps)
            .map(|_| {
                reset(state);
                let t0 = Instant::now();
                once(state);
                t0.elapsed().as_secs_f64() * 1e3
            })
            .collect(),
    )
}

/// One table row.
struct Row {
    what: &'static str,
    name: String,
    ms: f64,
}

/// Waits for a device-resident result: CUDA's streams, or OpenCL's queue through a
/// 4-byte read.
fn wait<T: DeviceType>(b: Backend, v: &Vector<T>) {
    if b == Backend::Cuda {
        skel::debug::synchronize().expect("synchronize");
    } else if b == Backend::OpenCl {
        let _ = v.view(0..1.min(v.len())).to_vec();
    }
}

/// Times `Sort::new().run` of `data` on `b` and checks the result.
fn skel_keys<K: SortKey + PartialEq + Default>(
    b: Backend,
    data: &[K],
    want: &[K],
    reps: usize,
    copy: impl Fn(&Vector<K>, &mut Vector<K>),
) -> f64 {
    let src = Vector::from(data.to_vec());
    let sort = Sort::new().backend(b);
    let gpu = matches!(b, Backend::Cuda | Backend::OpenCl);
    let mut v = Vector::from(data.to_vec());
    let ms = timed(
        reps,
        &mut v,
        |v| {
            if gpu {
                copy(&src, v);
                wait(b, v);
            } else {
                v.as_mut_slice().copy_from_slice(data);
            }
        },
        |v| {
            sort.run(v).expect("sort");
            wait(b, v);
        },
    );
    let got = v.to_vec();
    let same = got
        .iter()
        .zip(want)
        .all(|(a, w)| a.order_bits() == w.order_bits());
    assert!(same && got.len() == want.len(), "{b}: wrong result");
    ms
}

/// Times `Sort::new().run_pairs` of `keys -> values` on `b` and checks the result.
fn skel_pairs(b: Backend, keys: &[u32], values: &[u32], want: &[(u32, u32)], reps: usize) -> f64 {
    let (src_k, src_v) = (Vector::from(keys.to_vec()), Vector::from(values.to_vec()));
    let mut kv = (Vector::from(keys.to_vec()), Vector::from(values.to_vec()));
    let gpu = matches!(b, Backend::Cuda | Backend::OpenCl);
    let sort = Sort::new().backend(b);
    let copy = Map::new(same_u32).backend(b);
    let ms = timed(
        reps,
        &mut kv,
        |(k, v)| {
            if gpu {
                copy.run(&src_k, k).expect("copy");
                copy.run(&src_v, v).expect("copy");
                wait(b, v);
            } else {
                k.as_mut_slice().copy_from_slice(keys);
                v.as_mut_slice().copy_from_slice(values);
            }
        },
        |(k, v)| {
            sort.run_pairs(k, v).expect("sort");
            wait(b, v);
        },
    );
    let (k, v) = kv;
    let got: Vec<(u32, u32)> = k.to_vec().into_iter().zip(v.to_vec()).collect();
    assert!(got == want, "{b}: wrong pairs");
    ms
}

/// Sort on every backend against par_sort_unstable and slice::sort.
#[derive(clap::Parser, Debug)]
struct Opts {
    /// Keys, as a power of two (at most 20 with --short).
    #[arg(default_value_t = 26, value_parser = clap::value_parser!(u32).range(0..=40))]
    log2: u32,
    /// Small sizes, fewer repetitions, the cpu backend included (CI).
    #[arg(long)]
    short: bool,
    /// Include the sequential cpu backend.
    #[arg(long)]
    cpu: bool,
    #[command(flatten)]
    cargo: args::Cargo,
}

fn main() {
    let Opts {
        short,
        mut cpu,
        mut log2,
        ..
    } = clap::Parser::parse();
    if short {
        log2 = log2.min(20);
        cpu = true;
    }
    let n = 1usize << log2;
    let reps = if short { 3 } else { 5 };
    let backends: Vec<Backend> = [Backend::Cuda, Backend::OpenCl, Backend::Rayon]
        .into_iter()
        .chain(cpu.then_some(Backend::Cpu))
        .filter(|b| b.check().is_ok())
        .collect();
    let mut rows = Vec::new();

    // u32 keys.
    let data = words(n, 0x9E37_79B9_7F4A_7C15);
    let mut want = data.clone();
    let t0 = Instant::now();
    want.sort();
    let stable_ms = t0.elapsed().as_secs_f64() * 1e3;
    let mut tmp = data.clone();
    let par_ms = timed(
        reps,
        &mut tmp[..],
        |t| t.copy_from_slice(&data),
        |t| t.par_sort_unstable(),
    );
    rows.push(Row {
        what: "u32 keys",
        name: "slice::sort (1 core)".into(),
        ms: stable_ms,
    });
    rows.push(Row {
        what: "u32 keys",
        name: "par_sort_unstable".into(),
        ms: par_ms,
    });
    for &b in &backends {
        let ms = skel_keys(
            b,
            &data,
            &want,
            if b == Backend::Cpu { 1 } else { reps },
            |s, v| Map::new(same_u32).backend(b).run(s, v).expect("copy"),
        );
        rows.push(Row {
            what: "u32 keys",
            name: format!("skel {b}"),
            ms,
        });
    }

    // f32 keys: both signs, a wide range of magnitudes.
    let fdata: Vec<f32> = words(n, 0x1234_5678_9ABC_DEF1)
        .iter()
        .map(|&w| ((w as i32) as f32) * 1e-3)
        .collect();
    let mut fwant = fdata.clone();
    let t0 = Instant::now();
    fwant.sort_by(f32::total_cmp);
    let stable_ms = t0.elapsed().as_secs_f64() * 1e3;
    let mut ftmp = fdata.clone();
    let par_ms = timed(
        reps,
        &mut ftmp[..],
        |t| t.copy_from_slice(&fdata),
        |t| t.par_sort_unstable_by(f32::total_cmp),
    );
    rows.push(Row {
        what: "f32 keys",
        name: "slice::sort_by(total_cmp)".into(),
        ms: stable_ms,
    });
    rows.push(Row {
        what: "f32 keys",
        name: "par_sort_unstable_by(total_cmp)".into(),
        ms: par_ms,
    });
    for &b in &backends {
        let ms = skel_keys(
            b,
            &fdata,
            &fwant,
            if b == Backend::Cpu { 1 } else { reps },
            |s, v| Map::new(same_f32).backend(b).run(s, v).expect("copy"),
        );
        rows.push(Row {
            what: "f32 keys",
            name: format!("skel {b}"),
            ms,
        });
    }
    drop((fdata, fwant, ftmp));

    // u32 -> u32 pairs.
    let values: Vec<u32> = (0..n as u32).collect();
    let pairs: Vec<(u32, u32)> = data.iter().copied().zip(values.iter().copied()).collect();
    let mut pwant = pairs.clone();
    let t0 = Instant::now();
    pwant.sort_by_key(|p| p.0);
    let stable_ms = t0.elapsed().as_secs_f64() * 1e3;
    let mut ptmp = pairs.clone();
    let par_ms = timed(
        reps,
        &mut ptmp[..],
        |t| t.copy_from_slice(&pairs),
        |t| t.par_sort_unstable_by_key(|p| p.0),
    );
    rows.push(Row {
        what: "u32 -> u32 pairs",
        name: "slice::sort_by_key (1 core)".into(),
        ms: stable_ms,
    });
    rows.push(Row {
        what: "u32 -> u32 pairs",
        name: "par_sort_unstable_by_key".into(),
        ms: par_ms,
    });
    for &b in &backends {
        let ms = skel_pairs(
            b,
            &data,
            &values,
            &pwant,
            if b == Backend::Cpu { 1 } else { reps },
        );
        rows.push(Row {
            what: "u32 -> u32 pairs",
            name: format!("skel {b}"),
            ms,
        });
    }

    println!(
        "Sort of 2^{log2} = {n} uniformly random keys, {} threads; every skel result checked",
        rayon::current_num_threads()
    );
    println!();
    println!("| workload | implementation | ms | M keys/s | par_sort_unstable time / this |");
    println!("|---|---|---:|---:|---:|");
    for what in ["u32 keys", "f32 keys", "u32 -> u32 pairs"] {
        let base = rows
            .iter()
            .find(|r| r.what == what && r.name.starts_with("par_sort"))
            .map(|r| r.ms)
            .unwrap_or(f64::NAN);
        for r in rows.iter().filter(|r| r.what == what) {
            println!(
                "| {what} | {} | {:.2} | {:.0} | {:.2} |",
                r.name,
                r.ms,
                n as f64 / r.ms / 1e3,
                base / r.ms
            );
        }
    }
}
