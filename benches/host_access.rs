//! Host element access through the containers: `v[i]`, `m[(r, c)]` and their writes,
//! against the same loops over a plain slice (the bound: what a `Vec` costs).
//!
//! ```text
//! cargo bench --bench host_access              # 1024 x 1024 elements, best of 5
//! cargo bench --bench host_access -- --side 2048 --repeat 3
//! ```
//!
//! Each row is ns per element of one pass over every element of a host-valid container
//! (the common case: data made or last written on the host), best of `repeat` passes.

// The bound indexes the slice as the container rows do, to compare like with like.
#![allow(clippy::needless_range_loop)]

use std::hint::black_box;
use std::time::Instant;

use clap::Parser;
use skel::prelude::*;

#[path = "common/args.rs"]
mod args;

/// Host element access through the containers against a plain slice.
#[derive(Parser, Debug)]
struct Opts {
    /// Rows and columns of the matrix (the vector has side * side elements).
    #[arg(long, default_value_t = 1024)]
    side: usize,
    /// Passes per row of the report (the best is kept).
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    #[command(flatten)]
    cargo: args::Cargo,
}

/// Best ns per element of `repeat` runs of `pass` over `n` elements.
fn best(n: usize, repeat: usize, mut pass: impl FnMut()) -> f64 {
    (0..repeat)
        .map(|_| {
            let t = Instant::now();
            pass();
            t.elapsed().as_secs_f64() * 1e9 / n as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let opts = Opts::parse();
    let side = opts.side;
    let repeat = opts.repeat.max(1);
    let n = side * side;
    let mut m = Matrix::from_fn(side, side, |r, c| (r ^ c) as u32);
    let mut v = Vector::from_fn(n, |i| i as u32);
    let mut plain: Vec<u32> = (0..n as u32).collect();

    let rows = [
        (
            "read  m[(r, c)]",
            best(n, repeat, || {
                let mut s = 0u32;
                for r in 0..side {
                    for c in 0..side {
                        s = s.wrapping_add(m[(r, c)]);
                    }
                }
                black_box(s);
            }),
        ),
        (
            "read  v[i]",
            best(n, repeat, || {
                let mut s = 0u32;
                for i in 0..n {
                    s = s.wrapping_add(v[i]);
                }
                black_box(s);
            }),
        ),
        (
            "read  slice[i] (bound)",
            best(n, repeat, || {
                let s = black_box(&plain[..]);
                let mut acc = 0u32;
                for i in 0..n {
                    acc = acc.wrapping_add(s[i]);
                }
                black_box(acc);
            }),
        ),
        (
            "write m[(r, c)]",
            best(n, repeat, || {
                for r in 0..side {
                    for c in 0..side {
                        m[(r, c)] = (r + c) as u32;
                    }
                }
                black_box(&m);
            }),
        ),
        (
            "write v[i]",
            best(n, repeat, || {
                for i in 0..n {
                    v[i] = i as u32;
                }
                black_box(&v);
            }),
        ),
        (
            "write slice[i] (bound)",
            best(n, repeat, || {
                let s = black_box(&mut plain[..]);
                for (i, x) in s.iter_mut().enumerate() {
                    *x = i as u32;
                }
            }),
        ),
    ];
    println!("host element access, {side} x {side} u32, best of {repeat}");
    println!("{:<24} {:>10}", "access", "ns/elem");
    for (name, ns) in rows {
        println!("{name:<24} {ns:>10.2}");
    }
}
