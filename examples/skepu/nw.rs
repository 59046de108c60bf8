//! Rodinia's `nw` (Needleman-Wunsch global alignment of two sequences of `--size`
//! residues) written with skel's forms, row by row: two calls per row of the
//! `(n + 1) x (n + 1)` score matrix.
//!
//! Row `i` of the scores is `M[i][j] = max(M[i-1][j-1] + s(i, j), M[i-1][j] - p, M[i][j-1] - p)`
//! (`p` the gap penalty, `M[i][0] = M[0][i] = -i p`). Stored shifted, `W[i][j] = M[i][j] + p j`,
//! the dependence along the row becomes a running maximum: with
//! `u[j] = max(W[i-1][j-1] + s(i, j) + p, W[i-1][j] - p)` (and `u[0] = -i p`),
//! `W[i][j] = max(u[0..=j])`. So a row is an index Map (the previous row, the sequence and
//! the substitution table as container arguments) and an inclusive max Scan into the row's
//! view of `W`: 2n calls.
//!
//! `cargo run --release --example skepu_nw -- --backend cuda [--size N] [--check] [--bench]`
//! `--check` compares every backend's score matrix (eager, and the whole sweep recorded as
//! a `skel::Graph` and launched again) with the plain sequential loop, exactly. `--bench`
//! times one alignment: skel's eager calls; the recorded sweep launched again (the same
//! input: a graph freezes its calls' uniforms, and a new input written from the host makes
//! a launch run the calls eagerly, so this row is what a program that re-runs one sweep
//! would see, not a new alignment); a hand-written Rayon wavefront over blocks; and the
//! plain sequential loop, in one run.

use rayon::prelude::*;
use skel::prelude::*;

mod common;

/// The gap penalty (Rodinia's default).
pub const PENALTY: i32 = 10;
/// Residue kinds (BLOSUM62's alphabet size).
pub const ALPHABET: usize = 24;
/// The side of the hand-written wavefront's blocks.
const BLOCK: usize = 64;

/// `u[j]` of row `row` (see the module docs) from the previous row of `W`.
#[userfn]
fn cell(
    #[index] j: usize,
    prev: &[i32],
    b: &[i32],
    score: &[i32],
    #[uniform] row: i32,
    #[uniform] a: i32,
    #[uniform] penalty: i32,
) -> i32 {
    if j == 0 {
        -row * penalty
    } else {
        let s = score[a as usize * ALPHABET + b[j] as usize];
        (prev[j - 1] + s + penalty).max(prev[j] - penalty)
    }
}

#[userfn]
fn max(x: i32, y: i32) -> i32 {
    x.max(y)
}

/// Two sequences of `n` residues (index 0 unused, as in Rodinia) and a substitution table.
pub struct Pair {
    pub a: Vec<i32>,
    pub b: Vector<i32>,
    pub score: Vector<i32>,
}

/// A deterministic pair of sequences of `n` residues and a BLOSUM-like table (symmetric,
/// +4..+11 on the diagonal, -4..+3 elsewhere).
pub fn inputs(n: usize) -> Pair {
    let residue = |x: f32| ((x * ALPHABET as f32) as i32).min(ALPHABET as i32 - 1);
    let mut a: Vec<i32> = common::data(n + 1, 21).into_iter().map(residue).collect();
    let mut b: Vec<i32> = common::data(n + 1, 22).into_iter().map(residue).collect();
    a[0] = 0;
    b[0] = 0;
    let r = common::data(ALPHABET * ALPHABET, 23);
    let score = (0..ALPHABET * ALPHABET)
        .map(|k| {
            let (x, y) = (k / ALPHABET, k % ALPHABET);
            let (lo, hi) = (x.min(y), x.max(y));
            let v = r[lo * ALPHABET + hi];
            if x == y {
                4 + (v * 8.0) as i32
            } else {
                (v * 8.0) as i32 - 4
            }
        })
        .collect::<Vec<_>>();
    Pair {
        a,
        b: Vector::from(b),
        score: Vector::from(score),
    }
}

/// The sweep: rows `1..=n` of `w` (row 0 is all 0), two calls each.
fn sweep(
    backend: Backend,
    pair: &Pair,
    w: &mut Vector<i32>,
    u: &mut Vector<i32>,
) -> skel::Result<()> {
    let n1 = pair.b.len();
    let prefix = Scan::new(max).backend(backend);
    for i in 1..n1 {
        {
            let prev = w.view((i - 1) * n1..i * n1);
            Map::new(cell)
                .arrays((&prev, &pair.b, &pair.score))
                .uniforms((i as i32, pair.a[i], PENALTY))
                .backend(backend)
                .run_index(u)?;
        }
        prefix.run(&*u, &mut w.view_mut(i * n1..(i + 1) * n1))?;
    }
    Ok(())
}

/// `M` from the shifted scores `W`.
fn unshift(w: &[i32], n1: usize) -> Vec<f64> {
    w.iter()
        .enumerate()
        .map(|(k, &x)| f64::from(x - PENALTY * (k % n1) as i32))
        .collect()
}

/// The score matrix, row-major, by eager calls on `backend`.
pub fn compute(backend: Backend, pair: &Pair) -> skel::Result<Vec<f64>> {
    let n1 = pair.b.len();
    let mut w = Vector::zeroed(n1 * n1);
    let mut u = Vector::zeroed(n1);
    sweep(backend, pair, &mut w, &mut u)?;
    Ok(unshift(w.as_slice(), n1))
}

/// The same, the sweep recorded once as a [`skel::Graph`] and launched a second time.
pub fn compute_graph(backend: Backend, pair: &Pair) -> skel::Result<Vec<f64>> {
    let n1 = pair.b.len();
    let mut w = Vector::zeroed(n1 * n1);
    let mut u = Vector::zeroed(n1);
    {
        let g = skel::Graph::record(|| sweep(backend, pair, &mut w, &mut u))?;
        g.launch()?;
    }
    Ok(unshift(w.as_slice(), n1))
}

/// The plain sequential loop (Rodinia's recurrence, row by row) into `m`, row-major.
fn plain(pair: &Pair, m: &mut [i32]) {
    let n1 = pair.b.len();
    let (b, score) = (pair.b.as_slice(), pair.score.as_slice());
    for (j, x) in m[..n1].iter_mut().enumerate() {
        *x = -(j as i32) * PENALTY;
    }
    for i in 1..n1 {
        m[i * n1] = -(i as i32) * PENALTY;
        let row = pair.a[i] as usize * ALPHABET;
        for j in 1..n1 {
            let s = score[row + b[j] as usize];
            m[i * n1 + j] = (m[(i - 1) * n1 + j - 1] + s)
                .max(m[(i - 1) * n1 + j] - PENALTY)
                .max(m[i * n1 + j - 1] - PENALTY);
        }
    }
}

/// The score matrix by the plain sequential loop, row-major.
pub fn reference(pair: &Pair) -> Vec<f64> {
    let n1 = pair.b.len();
    let mut m = vec![0i32; n1 * n1];
    plain(pair, &mut m);
    m.into_iter().map(f64::from).collect()
}

/// One block of the hand-written wavefront: rows `r` and columns `c` of `M`, from the row
/// above it (`top`, one longer: the corner first) and the column left of it (`left`).
fn block(
    pair: &Pair,
    r: std::ops::Range<usize>,
    c: std::ops::Range<usize>,
    top: &[i32],
    left: &[i32],
) -> Vec<i32> {
    let (b, score) = (pair.b.as_slice(), pair.score.as_slice());
    let w = c.len();
    let mut out = vec![0i32; r.len() * w];
    for (bi, i) in r.enumerate() {
        let row = pair.a[i] as usize * ALPHABET;
        let mut west = left[bi];
        for (bj, j) in c.clone().enumerate() {
            let (nw, north) = if bi == 0 {
                (top[bj], top[bj + 1])
            } else if bj == 0 {
                (left[bi - 1], out[(bi - 1) * w])
            } else {
                (out[(bi - 1) * w + bj - 1], out[(bi - 1) * w + bj])
            };
            let s = score[row + b[j] as usize];
            west = (nw + s).max(north - PENALTY).max(west - PENALTY);
            out[bi * w + bj] = west;
        }
    }
    out
}

/// The same by hand with Rayon into `m`: `BLOCK x BLOCK` blocks of the matrix, the blocks
/// of each anti-diagonal in parallel (Rodinia's OpenMP version does the same).
fn wavefront(pair: &Pair, m: &mut [i32]) {
    let n1 = pair.b.len();
    let n = n1 - 1;
    for j in 0..n1 {
        m[j] = -(j as i32) * PENALTY;
        m[j * n1] = -(j as i32) * PENALTY;
    }
    let nb = n.div_ceil(BLOCK);
    let span = |b: usize| 1 + b * BLOCK..(1 + (b + 1) * BLOCK).min(n1);
    for d in 0..(2 * nb).saturating_sub(1) {
        let first = d.saturating_sub(nb - 1);
        let last = d.min(nb - 1);
        let src = &*m;
        let done: Vec<(usize, usize, Vec<i32>)> = (first..=last)
            .into_par_iter()
            .map(|bi| {
                let bj = d - bi;
                let (r, c) = (span(bi), span(bj));
                let top = &src[(r.start - 1) * n1 + c.start - 1..(r.start - 1) * n1 + c.end];
                let left: Vec<i32> = r.clone().map(|i| src[i * n1 + c.start - 1]).collect();
                (bi, bj, block(pair, r, c, top, &left))
            })
            .collect();
        for (bi, bj, out) in done {
            let (r, c) = (span(bi), span(bj));
            for (k, i) in r.enumerate() {
                m[i * n1 + c.start..i * n1 + c.end]
                    .copy_from_slice(&out[k * c.len()..(k + 1) * c.len()]);
            }
        }
    }
}

/// The score matrix by hand with Rayon (a wavefront of blocks), row-major.
pub fn hand_rayon(pair: &Pair) -> Vec<f64> {
    let n1 = pair.b.len();
    let mut m = vec![0i32; n1 * n1];
    wavefront(pair, &mut m);
    m.into_iter().map(f64::from).collect()
}

/// Seconds per alignment: skel eager and replayed, by hand with Rayon, sequential.
fn timings(backend: Backend, n: usize) -> skel::Result<Vec<(String, f64)>> {
    let pair = inputs(n);
    let n1 = n + 1;
    let mut rows = Vec::new();
    {
        let mut w = Vector::zeroed(n1 * n1);
        let mut u = Vector::zeroed(n1);
        let eager = common::best_of(|| {
            sweep(backend, &pair, &mut w, &mut u)?;
            skel::tune::synchronize()
        })?;
        rows.push((format!("skel {backend} eager ({} calls)", 2 * n), eager));
        let g = skel::Graph::record(|| sweep(backend, &pair, &mut w, &mut u))?;
        let replay = common::best_of(|| {
            g.launch()?;
            skel::tune::synchronize()
        })?;
        let how = if g.device_graph() {
            "CUDA graph"
        } else {
            "closure"
        };
        rows.push((
            format!("skel {backend} Graph replay ({how}, same input)"),
            replay,
        ));
    }
    let mut m = vec![0i32; n1 * n1];
    rows.push((
        format!("hand-written Rayon ({BLOCK}x{BLOCK} block wavefront)"),
        common::best_of(|| {
            wavefront(&pair, std::hint::black_box(&mut m));
            Ok(())
        })?,
    ));
    rows.push((
        "sequential loop".into(),
        common::best_of(|| {
            plain(&pair, std::hint::black_box(&mut m));
            Ok(())
        })?,
    ));
    Ok(rows)
}

fn main() -> std::process::ExitCode {
    common::program_main(common::Program {
        name: "skepu_nw",
        default_size: 2048,
        results: &|backend, n| {
            let pair = inputs(n);
            Ok(vec![
                ("eager".into(), compute(backend, &pair)?),
                ("skel::Graph".into(), compute_graph(backend, &pair)?),
            ])
        },
        reference: &|n| reference(&inputs(n)),
        tolerance: 0.0,
        timings: &timings,
    })
}
