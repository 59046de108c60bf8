//! Row softmax, in three forms a user would write:
//!
//! - `online` (the default): one row fold of `(max, sum)` pairs, merged online (the sum
//!   rescaled whenever the maximum grows), then one Map that reads each element and its
//!   row's pair: two passes over `m`, three reads and writes of it in all.
//! - `lazy`: a max per row, then the sums and the quotients of the exponentials, which stay
//!   a lazy Map (computed inside the calls that read them, never stored): three passes.
//! - `calls`: four plain calls, the exponentials stored (Reduce rows, Map, Reduce rows, Map).
//!
//! ```text
//! cargo run --release --example softmax -- [rows] [cols] [--backend cuda] [--form online|lazy|calls] [--check]
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

/// What the online form keeps per row: the largest value so far and the sum of
/// `exp(x - max)` over the values so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
struct RowStat {
    max: f32,
    sum: f32,
}

/// One value as a row statistic of its own.
#[userfn]
fn to_stat(x: f32) -> RowStat {
    RowStat { max: x, sum: 1.0 }
}

/// Two row statistics as one: the sum of the smaller maximum is rescaled to the larger.
/// Associative (up to rounding), so a backend may group the fold as it likes.
#[userfn]
fn merge(a: RowStat, b: RowStat) -> RowStat {
    let mut hi = a;
    let mut lo = b;
    if b.max > a.max {
        hi = b;
        lo = a;
    }
    RowStat {
        max: hi.max,
        sum: hi.sum + lo.sum * (lo.max - hi.max).exp(),
    }
}

#[userfn]
fn normalise(#[index] (i, _j): (usize, usize), x: f32, stats: &[RowStat]) -> f32 {
    let s = stats[i];
    (x - s.max).exp() / s.sum
}

/// The form a run measures.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Form {
    Online,
    Lazy,
    Calls,
}

/// `out` = softmax of each row of `m` as one row fold of [`RowStat`]s and one Map: two
/// passes over `m`, each one kernel on CUDA and OpenCL.
fn softmax_online(b: Backend, m: &Matrix<f32>, out: &mut Matrix<f32>) -> skel::Result<()> {
    let mut stats = Vector::zeroed(m.rows());
    MapReduce::new(to_stat, merge)
        .backend(b)
        .run_rows(m, &mut stats)?;
    Map::new(normalise).arrays((&stats,)).backend(b).run(m, out)
}

/// `out` = softmax of each row of `m`: a max per row, then the sums and the quotients of
/// the exponentials, which stay a lazy Map (computed inside the calls that read them): three
/// passes over `m`, each one kernel on CUDA and OpenCL (the row sums are the fused fold of
/// the lazy exponentials, as `MapReduce::new(exp_shifted, add).run_rows` would be).
fn softmax_lazy(b: Backend, m: &Matrix<f32>, out: &mut Matrix<f32>) -> skel::Result<()> {
    let (mut row_max, mut row_sum) = (Vector::zeroed(m.rows()), Vector::zeroed(m.rows()));
    Reduce::new(max).backend(b).run_rows(m, &mut row_max)?;
    let e = Map::new(exp_shifted).arrays((&row_max,)).lazy(m);
    Reduce::new(add).backend(b).run_rows(&e, &mut row_sum)?;
    Map::new(divide_row)
        .arrays((&row_sum,))
        .backend(b)
        .run(&e, out)
}

/// `out` = softmax of each row of `m` in four calls, the exponentials stored in `e`.
fn softmax_calls(
    b: Backend,
    m: &Matrix<f32>,
    e: &mut Matrix<f32>,
    out: &mut Matrix<f32>,
) -> skel::Result<()> {
    let (mut row_max, mut row_sum) = (Vector::zeroed(m.rows()), Vector::zeroed(m.rows()));
    Reduce::new(max).backend(b).run_rows(m, &mut row_max)?;
    Map::new(exp_shifted)
        .arrays((&row_max,))
        .backend(b)
        .run(m, e)?;
    Reduce::new(add).backend(b).run_rows(e, &mut row_sum)?;
    Map::new(divide_row)
        .arrays((&row_sum,))
        .backend(b)
        .run(e, out)
}

fn main() -> skel::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let numbers: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let (rows, cols) = (
        numbers.first().copied().unwrap_or(1024),
        numbers.get(1).copied().unwrap_or(1024),
    );
    let value = |flag: &str| match args.iter().position(|a| a == flag) {
        Some(k) => args
            .get(k + 1)
            .map(|v| Some(v.as_str()))
            .ok_or_else(|| Error::InvalidArgument(format!("{flag} needs a value"))),
        None => Ok(None),
    };
    let backend = match value("--backend")? {
        Some(name) => name.parse()?,
        None => skel::default_backend()?,
    };
    let form = match value("--form")? {
        None | Some("online") => Form::Online,
        Some("lazy") => Form::Lazy,
        Some("calls") => Form::Calls,
        Some(other) => {
            return Err(Error::InvalidArgument(format!(
                "--form {other}: expected online, lazy or calls"
            )))
        }
    };
    let m = Matrix::from_fn(rows, cols, |i, j| {
        ((i * 31 + j * 17) % 101) as f32 * 0.05 - 2.5
    });
    let mut out = Matrix::zeroed(rows, cols);
    let mut e = Matrix::zeroed(if form == Form::Calls { rows } else { 0 }, cols);
    let mut run = |out: &mut Matrix<f32>| match form {
        Form::Online => softmax_online(backend, &m, out),
        Form::Lazy => softmax_lazy(backend, &m, out),
        Form::Calls => softmax_calls(backend, &m, &mut e, out),
    };
    run(&mut out)?;
    let start = Instant::now();
    run(&mut out)?;
    let first = if out.as_slice().is_empty() {
        0.0
    } else {
        out[(0, 0)] // brings the result back: the time includes it
    };
    println!(
        "softmax {rows} x {cols} on {backend}, {form:?} form: {:.3} ms (out[0][0] = {first})",
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
