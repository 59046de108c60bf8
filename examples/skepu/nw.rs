//! Rodinia's `nw` (Needleman-Wunsch global alignment of two sequences of `--size`
//! residues) written with skel's forms.
//!
//! The scores are `M[i][j] = max(M[i-1][j-1] + s(i, j), M[i-1][j] - p, M[i][j-1] - p)` (`p`
//! the gap penalty, `M[i][0] = M[0][i] = -i p`) over the `(n + 1) x (n + 1)` matrix.
//!
//! **`--form wavefront`** (the default): that recurrence as it is written, one
//! [`Wavefront`] call over the matrix, whose user function [`nw`] takes the cell's upper,
//! left and upper-left neighbours, the cell `(i, j)`, the two sequences and the
//! substitution table as container arguments, and the penalty as a uniform. The backends
//! sweep tiles along anti-diagonals (CUDA and OpenCL: a launch per anti-diagonal of 32 x 32
//! tiles; Rayon: 64 x 64 tiles in parallel); the matrix stays on the device.
//!
//! **`--form rows`**, for comparison: a row at a time, two calls per row. Stored shifted,
//! `W[i][j] = M[i][j] + p j`, the dependence along the row becomes a running maximum: with
//! `u[j] = max(W[i-1][j-1] + s(i, j) + p, W[i-1][j] - p)` (and `u[0] = -i p`),
//! `W[i][j] = max(u[0..=j])`. So a row is an index Map (the previous row, the sequence and
//! the substitution table as container arguments) and an inclusive max Scan into the row's
//! view of `W`: 2n calls.
//!
//! `cargo run --release --example skepu_nw -- --backend cuda [--size N] [--form wavefront|rows] [--check] [--bench]`
//! In both forms the sequences are container arguments, so the whole sweep can be recorded
//! once as a `skel::Graph` and launched for every new pair: the pair is copied into the
//! graph's sequence containers by two eager Maps first (a device write, which a launch
//! replays after; a host write into a container the graph reads would make that launch run
//! the calls eagerly), and the uniforms a graph freezes (row number, penalty) are the same
//! for every pair.
//!
//! `--check` compares every backend's score matrix (eager, and a second pair aligned by
//! launching the sweep recorded on a first) with the plain sequential loop, exactly.
//! `--bench` times one alignment in the chosen form: skel's eager call(s); the recorded
//! sweep for a new pair (the two copies and one launch); a hand-written Rayon wavefront
//! over blocks; and the plain sequential loop, in one run.

use std::cell::RefCell;

use rayon::prelude::*;
use skel::prelude::*;

mod common;

/// The gap penalty (Rodinia's default).
pub const PENALTY: i32 = 10;
/// Residue kinds (BLOSUM62's alphabet size).
pub const ALPHABET: usize = 24;
/// The side of the hand-written wavefront's blocks.
const BLOCK: usize = 64;

/// The score of cell `(i, j)` from its neighbours (`a` and `b` start at index 1, as in
/// Rodinia): the wavefront form's user function.
#[userfn]
pub fn nw(
    #[index] (i, j): (usize, usize),
    up: i32,
    left: i32,
    diag: i32,
    a: &[i32],
    b: &[i32],
    score: &[i32],
    #[uniform] penalty: i32,
) -> i32 {
    let s = score[a[i] as usize * ALPHABET + b[j] as usize];
    (diag + s).max(up - penalty).max(left - penalty)
}

/// `u[j]` of row `row` (see the module docs) from the previous row of `W`.
#[userfn]
fn cell(
    #[index] j: usize,
    prev: &[i32],
    a: &[i32],
    b: &[i32],
    score: &[i32],
    #[uniform] row: u32,
    #[uniform] penalty: i32,
) -> i32 {
    if j == 0 {
        -(row as i32) * penalty
    } else {
        let s = score[a[row as usize] as usize * ALPHABET + b[j] as usize];
        (prev[j - 1] + s + penalty).max(prev[j] - penalty)
    }
}

#[userfn]
fn max(x: i32, y: i32) -> i32 {
    x.max(y)
}

#[userfn]
fn same(x: i32) -> i32 {
    x
}

/// Two sequences of `n` residues (index 0 unused, as in Rodinia) and a substitution table.
pub struct Pair {
    pub a: Vector<i32>,
    pub b: Vector<i32>,
    pub score: Vector<i32>,
}

/// A deterministic pair of sequences of `n` residues and a BLOSUM-like table (symmetric,
/// +4..+11 on the diagonal, -4..+3 elsewhere).
pub fn inputs(n: usize) -> Pair {
    inputs_seeded(n, 21)
}

/// Another pair of the same length (`seed` picks it), the same table.
pub fn inputs_seeded(n: usize, seed: u64) -> Pair {
    let residue = |x: f32| ((x * ALPHABET as f32) as i32).min(ALPHABET as i32 - 1);
    let mut a: Vec<i32> = common::data(n + 1, seed).into_iter().map(residue).collect();
    let mut b: Vec<i32> = common::data(n + 1, seed + 1000)
        .into_iter()
        .map(residue)
        .collect();
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
        a: Vector::from(a),
        b: Vector::from(b),
        score: Vector::from(score),
    }
}

/// The sweep over sequences `a` and `b`: rows `1..=n` of `w` (row 0 is all 0), two calls
/// each.
fn sweep(
    backend: Backend,
    (a, b, score): (&Vector<i32>, &Vector<i32>, &Vector<i32>),
    w: &mut Vector<i32>,
    u: &mut Vector<i32>,
) -> skel::Result<()> {
    let n1 = b.len();
    let prefix = Scan::new(max).backend(backend);
    for i in 1..n1 {
        {
            let prev = w.view((i - 1) * n1..i * n1);
            Map::new(cell)
                .arrays((&prev, a, b, score))
                .uniforms((i as u32, PENALTY))
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

/// The score matrix, row-major, by the rows form's eager calls on `backend`.
pub fn compute_rows(backend: Backend, pair: &Pair) -> skel::Result<Vec<f64>> {
    let n1 = pair.b.len();
    let mut w = Vector::zeroed(n1 * n1);
    let mut u = Vector::zeroed(n1);
    sweep(backend, (&pair.a, &pair.b, &pair.score), &mut w, &mut u)?;
    Ok(unshift(w.as_slice(), n1))
}

/// The sequences a recorded sweep reads, each in a cell: loading a new pair (by eager
/// copies on the device) borrows them mutably while the graph holds them.
pub struct Loaded {
    a: RefCell<Vector<i32>>,
    b: RefCell<Vector<i32>>,
}

impl Loaded {
    fn new(n1: usize) -> Loaded {
        Loaded {
            a: RefCell::new(Vector::zeroed(n1)),
            b: RefCell::new(Vector::zeroed(n1)),
        }
    }

    /// Copies `pair`'s sequences in on `backend`.
    fn load(&self, backend: Backend, pair: &Pair) -> skel::Result<()> {
        let copy = Map::new(same).backend(backend);
        copy.run(&pair.a, &mut *self.a.borrow_mut())?;
        copy.run(&pair.b, &mut *self.b.borrow_mut())
    }

    fn sweep(
        &self,
        backend: Backend,
        score: &Vector<i32>,
        w: &mut Vector<i32>,
        u: &mut Vector<i32>,
    ) -> skel::Result<()> {
        sweep(backend, (&self.a.borrow(), &self.b.borrow(), score), w, u)
    }

    fn wavefront(
        &self,
        backend: Backend,
        score: &Vector<i32>,
        m: &mut Matrix<i32>,
    ) -> skel::Result<()> {
        wavefront_sweep(backend, (&self.a.borrow(), &self.b.borrow(), score), m)
    }
}

/// The matrix of the wavefront form: the boundary `M[i][0] = M[0][i] = -i p`, the interior
/// (which the sweep overwrites) 0.
fn boundary(n1: usize) -> Matrix<i32> {
    Matrix::from_fn(n1, n1, |i, j| match (i, j) {
        (0, k) | (k, 0) => -(k as i32) * PENALTY,
        _ => 0,
    })
}

/// The wavefront form: every cell of `m` (boundary filled) in one call.
fn wavefront_sweep(
    backend: Backend,
    (a, b, score): (&Vector<i32>, &Vector<i32>, &Vector<i32>),
    m: &mut Matrix<i32>,
) -> skel::Result<()> {
    Wavefront::new(nw)
        .arrays((a, b, score))
        .uniforms((PENALTY,))
        .backend(backend)
        .run(m)
}

/// The score matrix, row-major, by one eager Wavefront call on `backend`.
pub fn compute(backend: Backend, pair: &Pair) -> skel::Result<Vec<f64>> {
    let mut m = boundary(pair.b.len());
    wavefront_sweep(backend, (&pair.a, &pair.b, &pair.score), &mut m)?;
    Ok(m.as_slice().iter().map(|&x| f64::from(x)).collect())
}

/// The score matrix of `second`, by launching the Wavefront call recorded (as a
/// [`skel::Graph`]) on `first` (of the same length).
pub fn compute_graph(backend: Backend, first: &Pair, second: &Pair) -> skel::Result<Vec<f64>> {
    let n1 = first.b.len();
    common::same_len("nw: the second pair", n1, second.b.len())?;
    let mut m = boundary(n1);
    let seqs = Loaded::new(n1);
    seqs.load(backend, first)?;
    {
        let g = skel::Graph::record(|| seqs.wavefront(backend, &first.score, &mut m))?;
        seqs.load(backend, second)?;
        g.launch()?;
    }
    Ok(m.as_slice().iter().map(|&x| f64::from(x)).collect())
}

/// The score matrix of `second`, by launching the rows form's sweep recorded (as a
/// [`skel::Graph`]) on `first` (of the same length).
pub fn compute_rows_graph(backend: Backend, first: &Pair, second: &Pair) -> skel::Result<Vec<f64>> {
    let n1 = first.b.len();
    common::same_len("nw: the second pair", n1, second.b.len())?;
    let mut w = Vector::zeroed(n1 * n1);
    let mut u = Vector::zeroed(n1);
    let seqs = Loaded::new(n1);
    seqs.load(backend, first)?;
    {
        let g = skel::Graph::record(|| seqs.sweep(backend, &first.score, &mut w, &mut u))?;
        seqs.load(backend, second)?;
        g.launch()?;
    }
    Ok(unshift(w.as_slice(), n1))
}

/// The plain sequential loop (Rodinia's recurrence, row by row) into `m`, row-major.
fn plain(pair: &Pair, m: &mut [i32]) {
    let n1 = pair.b.len();
    let (a, b, score) = (pair.a.as_slice(), pair.b.as_slice(), pair.score.as_slice());
    for (j, x) in m[..n1].iter_mut().enumerate() {
        *x = -(j as i32) * PENALTY;
    }
    for i in 1..n1 {
        m[i * n1] = -(i as i32) * PENALTY;
        let row = a[i] as usize * ALPHABET;
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
    let (a, b, score) = (pair.a.as_slice(), pair.b.as_slice(), pair.score.as_slice());
    let w = c.len();
    let mut out = vec![0i32; r.len() * w];
    for (bi, i) in r.enumerate() {
        let row = a[i] as usize * ALPHABET;
        let mut west = left[bi];
        for (bj, j) in c.clone().enumerate() {
            let (corner, north) = if bi == 0 {
                (top[bj], top[bj + 1])
            } else if bj == 0 {
                (left[bi - 1], out[(bi - 1) * w])
            } else {
                (out[(bi - 1) * w + bj - 1], out[(bi - 1) * w + bj])
            };
            let s = score[row + b[j] as usize];
            west = (corner + s).max(north - PENALTY).max(west - PENALTY);
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

/// How the recorded sweep ran on its launches.
fn replayed_how(g: &skel::Graph<'_>) -> &'static str {
    if g.device_graph() && g.eager_launches() == 0 {
        "a CUDA graph"
    } else if g.device_graph() {
        "CUDA graph, some launches eager"
    } else {
        "closure"
    }
}

/// Seconds per alignment of the wavefront form: skel eager and replayed.
fn wavefront_timings(backend: Backend, n: usize) -> skel::Result<Vec<(String, f64)>> {
    let pair = inputs(n);
    let pairs = [inputs_seeded(n, 31), inputs_seeded(n, 32)];
    let mut m = boundary(n + 1);
    let io = (&pair.a, &pair.b, &pair.score);
    let eager = common::best_of(|| {
        wavefront_sweep(backend, io, &mut m)?;
        skel::tune::synchronize()
    })?;
    let mut rows = vec![(format!("skel {backend} Wavefront eager (1 call)"), eager)];
    let seqs = Loaded::new(n + 1);
    seqs.load(backend, &pair)?;
    let g = skel::Graph::record(|| seqs.wavefront(backend, &pair.score, &mut m))?;
    let mut next = 0;
    let replay = common::best_of(|| {
        seqs.load(backend, &pairs[next])?;
        next = 1 - next;
        g.launch()?;
        skel::tune::synchronize()
    })?;
    let how = replayed_how(&g);
    rows.push((
        format!("skel {backend} Wavefront Graph, a new pair each ({how})"),
        replay,
    ));
    Ok(rows)
}

/// Seconds per alignment of the rows form: skel eager and replayed.
fn rows_timings(backend: Backend, n: usize) -> skel::Result<Vec<(String, f64)>> {
    let pair = inputs(n);
    let pairs = [inputs_seeded(n, 31), inputs_seeded(n, 32)];
    let n1 = n + 1;
    let mut rows = Vec::new();
    let mut w = Vector::zeroed(n1 * n1);
    let mut u = Vector::zeroed(n1);
    let io = (&pair.a, &pair.b, &pair.score);
    let eager = common::best_of(|| {
        sweep(backend, io, &mut w, &mut u)?;
        skel::tune::synchronize()
    })?;
    rows.push((
        format!("skel {backend} rows eager ({} calls)", 2 * n),
        eager,
    ));
    let seqs = Loaded::new(n1);
    seqs.load(backend, &pair)?;
    let g = skel::Graph::record(|| seqs.sweep(backend, &pair.score, &mut w, &mut u))?;
    let mut next = 0;
    let replay = common::best_of(|| {
        seqs.load(backend, &pairs[next])?;
        next = 1 - next;
        g.launch()?;
        skel::tune::synchronize()
    })?;
    let how = replayed_how(&g);
    rows.push((
        format!("skel {backend} rows Graph, a new pair each ({how})"),
        replay,
    ));
    Ok(rows)
}

/// Seconds per alignment: skel (the chosen form) eager and replayed, by hand with Rayon,
/// sequential.
fn timings(backend: Backend, n: usize) -> skel::Result<Vec<(String, f64)>> {
    let mut rows = if common::form() == "rows" {
        rows_timings(backend, n)?
    } else {
        wavefront_timings(backend, n)?
    };
    let pair = inputs(n);
    let n1 = n + 1;
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
            let other = inputs_seeded(n, 99);
            Ok(if common::form() == "rows" {
                vec![
                    ("rows, eager".into(), compute_rows(backend, &pair)?),
                    (
                        "rows, skel::Graph recorded on another pair".into(),
                        compute_rows_graph(backend, &other, &pair)?,
                    ),
                ]
            } else {
                vec![
                    ("Wavefront, eager".into(), compute(backend, &pair)?),
                    (
                        "Wavefront, skel::Graph recorded on another pair".into(),
                        compute_graph(backend, &other, &pair)?,
                    ),
                ]
            })
        },
        reference: &|n| reference(&inputs(n)),
        forms: &["wavefront", "rows"],
        tolerance: 0.0,
        timings: &timings,
    })
}
