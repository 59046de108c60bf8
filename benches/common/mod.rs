//! Shared set-up of the skeleton benches: sizes, criterion settings, backends, data.
//!
//! Every bench file (`map.rs`, `reduce.rs`, ...) builds one criterion group per skeleton with
//! the series `skel-<backend>` for each backend in [`Backend::ALL`] that can run here
//! (the others print "skipped"), plus hand-written baselines `plain-loop` and `hand-rayon`.
//! A GPU series therefore appears by itself once the `cuda` / `opencl` feature is on and a
//! device is present: `cargo bench --features opencl --bench map`. Such a series measures
//! device-resident calls: after the first call the inputs are valid on the device and the
//! output is never read by the host inside the timed loop, so no transfer is timed.
//!
//! Output containers are allocated once, outside the timed loop; every skel result is
//! compared with the plain-loop baseline (up to [`VALIDATE_UP_TO`] elements) before timing.

#![allow(dead_code)] // each bench uses its own subset

use std::time::Duration;

use criterion::Criterion;
use skel::Backend;

/// Element counts (f32) benchmarked: 2^10, 2^14, 2^18, 2^22, 2^24.
pub const SIZES: [usize; 5] = [1 << 10, 1 << 14, 1 << 18, 1 << 22, 1 << 24];

/// Results are compared with the baseline up to this size (large f32 sums drift with order).
pub const VALIDATE_UP_TO: usize = 1 << 18;

/// Short runs: all five bench files finish in a few minutes on 2 cores. (Command-line
/// options such as `--quick` or a filter are applied on top by `criterion_group!`.)
pub fn criterion() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

/// The skel backends to bench here: every one that is compiled in and has a device, in a
/// stable order (cpu, rayon, opencl, cuda). Prints the ones skipped.
pub fn backends() -> Vec<Backend> {
    let available = Backend::available();
    let order = [Backend::Cpu, Backend::Rayon, Backend::OpenCl, Backend::Cuda];
    order
        .into_iter()
        .filter(|b| {
            let ok = available.contains(b);
            if !ok {
                let why = b.check().err().map(|e| e.to_string()).unwrap_or_default();
                eprintln!("skel-{b}: skipped ({why})");
            }
            ok
        })
        .collect()
}

/// The series name of a skel backend.
pub fn series(b: Backend) -> String {
    format!("skel-{b}")
}

/// `n` pseudo-random f32 in [0, 1), reproducible per `seed` (xorshift; no rand dependency).
pub fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect()
}

/// Panics with a useful message if `got` and `want` differ by more than `rel` (relative).
pub fn assert_close(what: &str, got: f32, want: f32, rel: f32) {
    let scale = want.abs().max(1.0);
    assert!(
        (got - want).abs() <= rel * scale,
        "{what}: skel gave {got}, the baseline {want}"
    );
}

/// Panics if two slices differ anywhere by more than `rel` (relative).
pub fn assert_all_close(what: &str, got: &[f32], want: &[f32], rel: f32) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert_close(&format!("{what}[{i}]"), g, w, rel);
    }
}

/// The comma-separated list of numbers given to command-line option `what` (e.g. `16,20,28`).
pub fn list<T: std::str::FromStr>(what: &str, value: Option<String>) -> Result<Vec<T>, String> {
    let v = value.ok_or_else(|| format!("{what} takes a list of numbers, e.g. 16,20,28"))?;
    v.split(',')
        .map(|s| s.trim().parse().map_err(|_| format!("bad {what} {v}")))
        .collect()
}

/// The flag cargo passes, shared by the benches with a report of their own.
pub mod args;
