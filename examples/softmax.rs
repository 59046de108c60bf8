//! Row softmax with lazy inputs: the exponentials are never stored.
//!
//! ```text
//! cargo run --release --example softmax -- [rows] [cols] [--backend cuda] [--check]
//! ```
//!
//! `--check` compares every value with a plain Rust softmax (relative error <= 1e-5).

use std::time::Instant;

use skel::prelude::*;

#[userfn]
fn max(a: f32, b: f32) -> f32 {
    a.max(b)
}

#[userfn]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

#[userfn]
fn exp_shifted(#[index] (i, _j): (usize, usize), x: f32, row_max: &[f32]) -> f32 {
    (x - row_max[i]).exp()
}

#[userfn]
fn divide_row(#[index] (i, _j): (usize, usize), e: f32, row_sum: &[f32]) -> f32 {
    e / row_sum[i]
}

/// `out` = softmax of each row of `m`: a max per row, then the sums and the quotients of
/// the exponentials, which stay a lazy Map (computed inside the calls that read them): three
/// passes over `m`, each one kernel on CUDA and OpenCL (the row sums are the fused fold of
/// the lazy exponentials, as `MapReduce::new(exp_shifted, add).run_rows` would be).
fn softmax(b: Backend, m: &Matrix<f32>, out: &mut Matrix<f32>) -> skel::Result<()> {
    let (mut row_max, mut row_sum) = (Vector::zeroed(m.rows()), Vector::zeroed(m.rows()));
    Reduce::new(max).backend(b).run_rows(m, &mut row_max)?;
    let e = Map::new(exp_shifted).arrays((&row_max,)).lazy(m);
    Reduce::new(add).backend(b).run_rows(&e, &mut row_sum)?;
    Map::new(divide_row)
        .arrays((&row_sum,))
        .backend(b)
        .run(&e, out)
}

fn main() -> skel::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let numbers: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let (rows, cols) = (
        numbers.first().copied().unwrap_or(1024),
        numbers.get(1).copied().unwrap_or(1024),
    );
    let backend = match args.iter().position(|a| a == "--backend") {
        Some(k) => args
            .get(k + 1)
            .ok_or_else(|| Error::InvalidArgument("--backend needs a name".into()))?
            .parse()?,
        None => skel::default_backend()?,
    };
    let m = Matrix::from_fn(rows, cols, |i, j| {
        ((i * 31 + j * 17) % 101) as f32 * 0.05 - 2.5
    });
    let mut out = Matrix::zeroed(rows, cols);
    softmax(backend, &m, &mut out)?;
    let start = Instant::now();
    softmax(backend, &m, &mut out)?;
    let first = out[(0, 0)]; // brings the result back: the time includes it
    println!(
        "softmax {rows} x {cols} on {backend}: {:.3} ms (out[0][0] = {first})",
        start.elapsed().as_secs_f64() * 1e3
    );
    if args.iter().any(|a| a == "--check") {
        for i in 0..rows {
            let row = m.row(i);
            let mx = row.iter().copied().fold(f32::MIN, f32::max);
            let sum: f32 = row.iter().map(|x| (x - mx).exp()).sum();
            for j in 0..cols {
                let want = (row[j] - mx).exp() / sum;
                let got = out[(i, j)];
                if (got - want).abs() > 1e-5 * want.abs().max(1e-30) + 1e-7 {
                    return Err(Error::InvalidArgument(format!(
                        "softmax check failed at ({i}, {j}): {got} != {want}"
                    )));
                }
            }
        }
        println!("check: every value matches a plain Rust softmax");
    }
    Ok(())
}
