//! Wavefront on every backend: dynamic-programming sweeps (Needleman-Wunsch with container
//! arguments, a uniform and a 2D index; Smith-Waterman with a `&[T]`, a `Mat<T>` and two
//! uniforms; one `&[T]` alone; LCS over bytes; dynamic time warping in f32; a
//! 1D-index and a no-index integer mix; a 64-byte struct cell, too large for a GPU tile in
//! shared memory) against a plain Rust loop, exactly (floats bit for bit: every cell is
//! the function of the same three values). Shapes: empty, one cell, one row or column
//! (nothing to compute, also past Rayon's sequential size), 2x2, primes, around the GPU tile (32) and the Rayon tile (64), tall
//! and wide; views of whole rows; a proptest against the cpu oracle; a recorded `Graph`
//! replayed; the errors (not a matrix, containers of the wrong kind, missing uniforms, a
//! checked fault leaving the matrix as it was, also one in the last tile of 200x200 after a
//! Map left the matrix on the device) and `.streams(..)` / `.devices(..)` counts as Map.

use proptest::prelude::*;
use skel::prelude::*;
use skel::Graph;

use super::available;

/// `(rows, cols)` of the matrices, boundary included.
pub const WF_SHAPES: &[(usize, usize)] = &[
    (0, 0),
    (0, 5),
    (1, 1),
    (1, 9),
    (9, 1),
    (2, 2),
    (2, 40),
    (40, 2),
    (3, 3),
    (37, 53),
    (33, 33),
    (34, 35),
    (65, 65),
    (66, 67),
    (97, 31),
    (129, 257),
    (700, 3),
    (3, 700),
    (301, 263),
    // One column or row past Rayon's sequential size (nothing to compute), and the
    // skinniest shapes that Rayon cuts into tiles.
    (20000, 1),
    (1, 20000),
    (2, 20000),
    (20000, 2),
];

/// Letters of the sequences (the substitution table is `LETTERS x LETTERS`).
pub const LETTERS: usize = 24;

/// Needleman-Wunsch as Rodinia scores it: a substitution table over the letters of `a`
/// and `b`, a linear gap penalty.
#[userfn]
pub fn wf_nw(
    #[index] (i, j): (usize, usize),
    up: i32,
    left: i32,
    diag: i32,
    a: &[i32],
    b: &[i32],
    score: &[i32],
    #[uniform] penalty: i32,
) -> i32 {
    let s = score[(a[i - 1] * 24 + b[j - 1]) as usize];
    (diag + s).max(up - penalty).max(left - penalty)
}

/// The length of the longest common subsequence of `x[..i]` and `y[..j]`.
#[userfn]
pub fn wf_lcs(
    #[index] (i, j): (usize, usize),
    up: u32,
    left: u32,
    diag: u32,
    x: &[u8],
    y: &[u8],
) -> u32 {
    if x[i - 1] == y[j - 1] {
        diag + 1
    } else {
        up.max(left)
    }
}

/// Dynamic time warping of `x` against `y`.
#[userfn]
pub fn wf_dtw(
    #[index] (i, j): (usize, usize),
    up: f32,
    left: f32,
    diag: f32,
    x: &[f32],
    y: &[f32],
) -> f32 {
    (x[i - 1] - y[j - 1]).abs() + up.min(left).min(diag)
}

/// No index, no containers: the neighbours alone (wrapping integer arithmetic).
#[userfn]
pub fn wf_mix(up: i64, left: i64, diag: i64) -> i64 {
    (up * 3 + left * 5 - diag) % 1_000_003
}

/// A 1D index: the cell's flat position.
#[userfn]
pub fn wf_flat(#[index] k: usize, up: i64, left: i64, diag: i64) -> i64 {
    (up + 2 * left + diag + k as i64) % 1_000_007
}

/// A cell of 64 bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
pub struct Wide {
    pub a: i64,
    pub b: i64,
    pub c: i64,
    pub d: i64,
    pub e: i64,
    pub f: i64,
    pub g: i64,
    pub h: i64,
}

#[userfn]
pub fn wf_wide(#[index] (i, j): (usize, usize), up: Wide, left: Wide, diag: Wide) -> Wide {
    Wide {
        a: (up.a + left.a + 1) % 1_000_003,
        b: diag.b + i as i64,
        c: left.c.max(up.c) + j as i64,
        d: (up.d * 7 + diag.a) % 65_521,
        e: up.e,
        f: left.f - 1,
        g: up.g ^ left.h,
        h: (diag.h + up.a) % 1_000,
    }
}

/// A random step: the cell's stream depends only on the seed and the cell.
#[userfn]
pub fn wf_rand(
    #[index] (i, j): (usize, usize),
    up: u32,
    left: u32,
    diag: u32,
    rng: &mut Random,
) -> u32 {
    (up.max(left).max(diag) + (rng.next_u32() & 7) + ((i + j) % 2) as u32) % 100_000
}

/// Smith-Waterman (local alignment, linear gap): both sequences packed in one array
/// (`seqs[..split]`, then the other), the substitution scores a `Mat`.
#[userfn]
pub fn wf_sw(
    #[index] (i, j): (usize, usize),
    up: i32,
    left: i32,
    diag: i32,
    seqs: &[i32],
    sub: Mat<i32>,
    #[uniform] split: u32,
    #[uniform] gap: i32,
) -> i32 {
    let x = seqs[i - 1] as usize;
    let y = seqs[split as usize + j - 1] as usize;
    (diag + sub[(x, y)]).max(up - gap).max(left - gap).max(0)
}

/// One container argument alone (a GPU kernel names it differently).
#[userfn]
pub fn wf_weights(up: i64, left: i64, diag: i64, w: &[i64]) -> i64 {
    (up * w[0] + left * w[1] + diag * w[2]) % 1_000_003
}

/// A copy (puts a matrix's newest values where a backend computes).
#[userfn]
pub fn wf_same(x: i32) -> i32 {
    x
}

/// A row of the boundary: the new row 0 of a matrix from its last row.
#[userfn]
pub fn wf_reseed(x: i64) -> i64 {
    (x * 31 + 7) % 1_000_003
}

/// `m` with every cell `(i, j)`, `i, j >= 1`, set by the plain loop `f(i, j, up, left, diag)`.
pub fn plain<T: Copy>(
    m: &[T],
    (rows, cols): (usize, usize),
    f: impl Fn(usize, usize, T, T, T) -> T,
) -> Vec<T> {
    let mut m = m.to_vec();
    for i in 1..rows {
        for j in 1..cols {
            m[i * cols + j] = f(
                i,
                j,
                m[(i - 1) * cols + j],
                m[i * cols + j - 1],
                m[(i - 1) * cols + j - 1],
            );
        }
    }
    m
}

/// A pseudo-random value from `k` and `salt` (a multiplicative hash), below `modulus`.
pub fn below(k: usize, salt: u64, modulus: u64) -> u64 {
    ((k as u64 ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407)
        >> 33)
        % modulus
}

/// The NW inputs for a `rows x cols` matrix: sequences, table, and the boundary.
pub fn nw_inputs(
    rows: usize,
    cols: usize,
    penalty: i32,
) -> (Vec<i32>, Vec<i32>, Vec<i32>, Matrix<i32>) {
    let a: Vec<i32> = (0..rows.saturating_sub(1))
        .map(|k| below(k, 1, LETTERS as u64) as i32)
        .collect();
    let b: Vec<i32> = (0..cols.saturating_sub(1))
        .map(|k| below(k, 2, LETTERS as u64) as i32)
        .collect();
    let score: Vec<i32> = (0..LETTERS * LETTERS)
        .map(|k| below(k, 3, 21) as i32 - 10)
        .collect();
    let m = Matrix::from_fn(rows, cols, |i, j| {
        if i == 0 {
            -penalty * j as i32
        } else if j == 0 {
            -penalty * i as i32
        } else {
            // Garbage inside: every interior cell must be written.
            below(i * 7919 + j, 4, 1000) as i32
        }
    });
    (a, b, score, m)
}

/// NW, LCS, DTW, mix, flat and the wide struct on `b` over a `rows x cols` matrix, each
/// against the plain loop.
pub fn check_shape(b: Backend, rows: usize, cols: usize) {
    let what = |f: &str| format!("{f} {rows}x{cols} on {b:?}");
    // Needleman-Wunsch.
    let penalty = 10;
    let (a, bb, score, mut m) = nw_inputs(rows, cols, penalty);
    let want = plain(m.as_slice(), (rows, cols), |i, j, up, left, diag| {
        let s = score[(a[i - 1] * 24 + bb[j - 1]) as usize];
        (diag + s).max(up - penalty).max(left - penalty)
    });
    let (av, bv, sv) = (
        Vector::from(a.clone()),
        Vector::from(bb.clone()),
        Vector::from(score.clone()),
    );
    Wavefront::new(wf_nw)
        .arrays((&av, &bv, &sv))
        .uniforms((penalty,))
        .backend(b)
        .run(&mut m)
        .unwrap();
    assert_eq!(m.to_vec(), want, "{}", what("nw"));

    // LCS over bytes.
    let x: Vec<u8> = (0..rows.saturating_sub(1))
        .map(|k| b"ACGT"[below(k, 5, 4) as usize])
        .collect();
    let y: Vec<u8> = (0..cols.saturating_sub(1))
        .map(|k| b"ACGT"[below(k, 6, 4) as usize])
        .collect();
    let mut t = Matrix::from_fn(rows, cols, |i, j| if i == 0 || j == 0 { 0u32 } else { 77 });
    let want = plain(t.as_slice(), (rows, cols), |i, j, up, left, diag| {
        if x[i - 1] == y[j - 1] {
            diag + 1
        } else {
            up.max(left)
        }
    });
    let (xv, yv) = (Vector::from(x.clone()), Vector::from(y.clone()));
    Wavefront::new(wf_lcs)
        .arrays((&xv, &yv))
        .backend(b)
        .run(&mut t)
        .unwrap();
    assert_eq!(t.to_vec(), want, "{}", what("lcs"));

    // DTW in f32, bit for bit.
    let xf: Vec<f32> = (0..rows.saturating_sub(1))
        .map(|k| below(k, 7, 1000) as f32 * 0.37)
        .collect();
    let yf: Vec<f32> = (0..cols.saturating_sub(1))
        .map(|k| below(k, 8, 1000) as f32 * 0.41)
        .collect();
    let mut w = Matrix::from_fn(rows, cols, |i, j| match (i, j) {
        (0, 0) => 0.0f32,
        (0, _) | (_, 0) => f32::INFINITY,
        _ => f32::NAN,
    });
    let want = plain(w.as_slice(), (rows, cols), |i, j, up, left, diag| {
        (xf[i - 1] - yf[j - 1]).abs() + up.min(left).min(diag)
    });
    let (xv, yv) = (Vector::from(xf.clone()), Vector::from(yf.clone()));
    Wavefront::new(wf_dtw)
        .arrays((&xv, &yv))
        .backend(b)
        .run(&mut w)
        .unwrap();
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&w.to_vec()), bits(&want), "{}", what("dtw"));

    // No index, and a 1D index.
    let init = Matrix::from_fn(rows, cols, |i, j| below(i * 131 + j, 9, 1000) as i64);
    let mut mm = init.clone();
    let want = plain(init.as_slice(), (rows, cols), |_, _, up, left, diag| {
        (up * 3 + left * 5 - diag) % 1_000_003
    });
    Wavefront::new(wf_mix).backend(b).run(&mut mm).unwrap();
    assert_eq!(mm.to_vec(), want, "{}", what("mix"));
    let mut mf = init.clone();
    let want = plain(init.as_slice(), (rows, cols), |i, j, up, left, diag| {
        (up + 2 * left + diag + (i * cols + j) as i64) % 1_000_007
    });
    Wavefront::new(wf_flat).backend(b).run(&mut mf).unwrap();
    assert_eq!(mf.to_vec(), want, "{}", what("flat index"));

    // A cell too large for a GPU tile in shared memory.
    if rows * cols <= 40_000 {
        let init = Matrix::from_fn(rows, cols, |i, j| Wide {
            a: i as i64,
            b: j as i64,
            c: (i * j) as i64,
            d: 3,
            e: (i + j) as i64,
            f: 1,
            g: (i ^ j) as i64,
            h: 5,
        });
        let mut mw = init.clone();
        let want = plain(init.as_slice(), (rows, cols), |i, j, up, left, diag| Wide {
            a: (up.a + left.a + 1) % 1_000_003,
            b: diag.b + i as i64,
            c: left.c.max(up.c) + j as i64,
            d: (up.d * 7 + diag.a) % 65_521,
            e: up.e,
            f: left.f - 1,
            g: up.g ^ left.h,
            h: (diag.h + up.a) % 1_000,
        });
        Wavefront::new(wf_wide).backend(b).run(&mut mw).unwrap();
        assert_eq!(mw.to_vec(), want, "{}", what("wide struct"));
    }
}

/// Container arguments of the other kinds: a `&[T]` and a `Mat<T>` with two uniforms, and
/// one `&[T]` alone.
pub fn check_containers(b: Backend, rows: usize, cols: usize) {
    let split = rows.saturating_sub(1);
    let seqs: Vec<i32> = (0..split + cols.saturating_sub(1))
        .map(|k| below(k, 11, 5) as i32)
        .collect();
    let sub = Matrix::from_fn(
        5,
        5,
        |x, y| if x == y { 3 } else { -1 - ((x + y) % 2) as i32 },
    );
    let gap = 2;
    let mut m = Matrix::from_fn(rows, cols, |i, j| if i == 0 || j == 0 { 0 } else { -9 });
    let want = plain(m.as_slice(), (rows, cols), |i, j, up, left, diag| {
        let (x, y) = (seqs[i - 1] as usize, seqs[split + j - 1] as usize);
        (diag + sub[(x, y)]).max(up - gap).max(left - gap).max(0)
    });
    let sv = Vector::from(seqs.clone());
    Wavefront::new(wf_sw)
        .arrays((&sv, &sub))
        .uniforms((split as u32, gap))
        .backend(b)
        .run(&mut m)
        .unwrap();
    assert_eq!(m.to_vec(), want, "smith-waterman {rows}x{cols} on {b:?}");

    let w = Vector::from(vec![3i64, -2, 5]);
    let init = Matrix::from_fn(rows, cols, |i, j| below(i * 31 + j, 12, 100) as i64);
    let mut m = init.clone();
    let want = plain(init.as_slice(), (rows, cols), |_, _, up, left, diag| {
        (up * 3 - left * 2 + diag * 5) % 1_000_003
    });
    Wavefront::new(wf_weights)
        .arrays((&w,))
        .backend(b)
        .run(&mut m)
        .unwrap();
    assert_eq!(m.to_vec(), want, "one &[T] {rows}x{cols} on {b:?}");
}

/// A random function over `rows x cols` on `b` against the cpu oracle (same seed).
pub fn check_random(b: Backend, rows: usize, cols: usize, seed: u64) {
    let init = Matrix::from_fn(rows, cols, |i, j| (i * 3 + j) as u32);
    let mut got = init.clone();
    Wavefront::new(wf_rand)
        .seed(seed)
        .backend(b)
        .run(&mut got)
        .unwrap();
    let mut want = init.clone();
    Wavefront::new(wf_rand)
        .seed(seed)
        .backend(Backend::Cpu)
        .run(&mut want)
        .unwrap();
    assert_eq!(
        got.to_vec(),
        want.to_vec(),
        "random {rows}x{cols} seed {seed} on {b:?}"
    );
    if rows >= 2 && cols >= 2 {
        // The draws do enter the result.
        let plainly = plain(init.as_slice(), (rows, cols), |_, _, up, left, diag| {
            up.max(left).max(diag) % 100_000
        });
        assert_ne!(
            want.to_vec(),
            plainly,
            "random {rows}x{cols}: the draws are used"
        );
    }
}

/// The rows `first..first + n` of a matrix, as a view, swept on their own (their first
/// row and first column the boundary); the rows outside untouched.
pub fn check_view(b: Backend, rows: usize, cols: usize, band: std::ops::Range<usize>) {
    let init = Matrix::from_fn(rows, cols, |i, j| below(i * 1009 + j, 10, 5000) as i64);
    let mut m = init.clone();
    Wavefront::new(wf_mix)
        .backend(b)
        .run(&mut m.view_rows_mut(band.clone()))
        .unwrap();
    let sub = &init.as_slice()[band.start * cols..band.end * cols];
    let swept = plain(sub, (band.len(), cols), |_, _, up, left, diag| {
        (up * 3 + left * 5 - diag) % 1_000_003
    });
    let mut want = init.to_vec();
    want[band.start * cols..band.end * cols].copy_from_slice(&swept);
    assert_eq!(
        m.to_vec(),
        want,
        "view rows {band:?} of {rows}x{cols} on {b:?}"
    );
}

/// A recorded sweep and reseed (the new row 0 from the last row, through a 1-row matrix)
/// launched again and again, against the same calls made eagerly and on the cpu.
pub fn check_graph(b: Backend, rows: usize, cols: usize) {
    let run = |b: Backend, m: &mut Matrix<i64>, tmp: &mut Matrix<i64>| -> Result<()> {
        Wavefront::new(wf_mix).backend(b).run(m)?;
        Map::new(wf_reseed)
            .backend(b)
            .run(&m.view_rows(rows - 1..rows), tmp)?;
        Map::new(wf_reseed)
            .backend(b)
            .run(&*tmp, &mut m.view_rows_mut(0..1))
    };
    let init = Matrix::from_fn(rows, cols, |i, j| (i * 5 + j * 3) as i64 % 97);
    let (mut m, mut tmp) = (init.clone(), Matrix::zeroed(1, cols));
    {
        let g = Graph::record(|| run(b, &mut m, &mut tmp)).unwrap();
        for _ in 0..3 {
            g.launch().unwrap();
        }
    }
    let (mut em, mut et) = (init.clone(), Matrix::zeroed(1, cols));
    let (mut om, mut ot) = (init.clone(), Matrix::zeroed(1, cols));
    for _ in 0..4 {
        run(b, &mut em, &mut et).unwrap();
        run(Backend::Cpu, &mut om, &mut ot).unwrap();
    }
    assert_eq!(
        m.to_vec(),
        em.to_vec(),
        "graph {rows}x{cols} on {b:?}: replay vs eager"
    );
    assert_eq!(
        m.to_vec(),
        om.to_vec(),
        "graph {rows}x{cols} on {b:?}: replay vs cpu"
    );
}

/// What a user can get wrong: an error, and nothing written.
pub fn check_errors(b: Backend) {
    let penalty = 3;
    let (a, bb, score, m) = nw_inputs(9, 7, penalty);
    let (av, bv, sv) = (Vector::from(a), Vector::from(bb), Vector::from(score));

    // Not a matrix.
    let mut v = Vector::filled(12, 5i32);
    let err = Wavefront::new(wf_nw)
        .arrays((&av, &bv, &sv))
        .uniforms((penalty,))
        .backend(b)
        .run(&mut v)
        .unwrap_err();
    assert!(matches!(err, Error::ShapeMismatch { .. }), "vector: {err}");
    assert!(err.to_string().contains("matrix"), "{err}");
    assert_eq!(v.to_vec(), vec![5; 12]);

    // A container of the wrong kind.
    let table = Matrix::from_fn(24, 24, |i, j| (i + j) as i32);
    let mut mm = m.clone();
    let err = Wavefront::new(wf_nw)
        .arrays((&av, &bv, &table))
        .uniforms((penalty,))
        .backend(b)
        .run(&mut mm)
        .unwrap_err();
    assert!(
        matches!(err, Error::ShapeMismatch { .. }),
        "Mat for &[T]: {err}"
    );
    assert_eq!(mm.to_vec(), m.to_vec());

    // Uniforms not bound.
    let err = Wavefront::new(wf_nw)
        .arrays((&av, &bv, &sv))
        .backend(b)
        .run(&mut mm)
        .unwrap_err();
    assert!(
        matches!(err, Error::InvalidArgument(_)),
        "no uniforms: {err}"
    );
    assert!(err.to_string().contains(".uniforms"), "{err}");
    assert_eq!(mm.to_vec(), m.to_vec());

    // A checked call whose function reads past a sequence: Err(UserFunction), the matrix
    // as it was (also where it was last written on the device).
    let short = Vector::from(vec![1i32; 3]);
    let mut mm = m.clone();
    Wavefront::new(wf_nw)
        .arrays((&av, &bv, &sv))
        .uniforms((penalty,))
        .backend(b)
        .run(&mut mm)
        .unwrap();
    let before = mm.to_vec();
    let mut on_device = mm.clone();
    Wavefront::new(wf_nw)
        .arrays((&av, &bv, &sv))
        .uniforms((penalty,))
        .backend(b)
        .run(&mut on_device)
        .unwrap();
    for target in [&mut mm, &mut on_device] {
        let what = "short sequence";
        assert_fault_keeps(b, ((&short, &bv, &sv), penalty), target, &before, what);
    }
}

/// Needleman-Wunsch's container arguments: the two sequences and the score table.
type NwSeqs<'a> = (&'a Vector<i32>, &'a Vector<i32>, &'a Vector<i32>);

/// A checked Needleman-Wunsch call on `b` with `seqs` fails with `Error::UserFunction` and
/// leaves `target` as `want`.
fn assert_fault_keeps(
    b: Backend,
    (seqs, penalty): (NwSeqs, i32),
    target: &mut Matrix<i32>,
    want: &[i32],
    what: &str,
) {
    let err = Wavefront::new(wf_nw)
        .arrays(seqs)
        .uniforms((penalty,))
        .checked(true)
        .backend(b)
        .run(target)
        .unwrap_err();
    assert!(
        matches!(err, Error::UserFunction { .. }),
        "{what} on {b:?}: {err}"
    );
    assert_eq!(
        target.to_vec(),
        want,
        "{what} on {b:?}: a failed checked call left the matrix changed"
    );
}

/// A checked call on a 200x200 matrix (many tiles on every backend) whose function faults
/// only in the bottom-right corner, the last tile to run: Err(UserFunction) and the matrix
/// as it was, also where a Map on `b` wrote it last (on a GPU backend: on the device).
pub fn check_late_fault(b: Backend) {
    let (rows, cols, penalty) = (200, 200, 3);
    let (mut a, mut bb, score, m) = nw_inputs(rows, cols, penalty);
    // `score[a * 24 + b]` is past the table only where both are out of range: the cells
    // (i, j), i, j >= 196.
    a[195..].fill(LETTERS as i32 - 1);
    bb[195..].fill(LETTERS as i32);
    let (av, bv, sv) = (Vector::from(a), Vector::from(bb), Vector::from(score));
    let mut fresh = m.clone();
    let mut mapped = Matrix::filled(rows, cols, 0i32);
    Map::new(wf_same).backend(b).run(&m, &mut mapped).unwrap();
    let want = m.to_vec();
    for (what, target) in [("fresh", &mut fresh), ("after a Map", &mut mapped)] {
        assert_fault_keeps(b, ((&av, &bv, &sv), penalty), target, &want, what);
    }
}

/// `.streams(..)` and `.devices(..)` counts that cannot be met: the same result as a Map's
/// on `b` (an error on a backend that checks them; Wavefront runs on one stream and one
/// device, but accepts no count another skeleton refuses).
pub fn check_options(b: Backend) {
    let v = Matrix::from_fn(5, 6, |i, j| (i * 6 + j) as i32);
    let penalty = 3;
    let (a, bb, score, m) = nw_inputs(5, 6, penalty);
    let (av, bv, sv) = (Vector::from(a), Vector::from(bb), Vector::from(score));
    let wf = Wavefront::new(wf_nw)
        .arrays((&av, &bv, &sv))
        .uniforms((penalty,))
        .backend(b);
    let map = Map::new(wf_same).backend(b);
    let mut out = Matrix::filled(5, 6, 0i32);
    for what in [".streams(100)", ".devices(1000)"] {
        let mut mm = m.clone();
        let (want, got) = if what == ".streams(100)" {
            (
                map.streams(100).run(&v, &mut out),
                wf.streams(100).run(&mut mm),
            )
        } else {
            (
                map.devices(1000).run(&v, &mut out),
                wf.devices(1000).run(&mut mm),
            )
        };
        let (want, got) = (
            want.map_err(|e| format!("{e:?}")),
            got.map_err(|e| format!("{e:?}")),
        );
        assert_eq!(got, want, "{what} on {b:?}: Wavefront and Map differ");
        if got.is_err() {
            assert_eq!(mm.to_vec(), m.to_vec(), "{what} on {b:?}");
        }
    }
}

macro_rules! wavefront_suite {
    ($name:ident, $backend:expr) => {
        mod $name {
            use super::*;

            const B: Backend = $backend;

            #[test]
            fn wavefront_matches_the_plain_loop() {
                if !available(B) {
                    return;
                }
                for &(rows, cols) in WF_SHAPES {
                    check_shape(B, rows, cols);
                    check_containers(B, rows, cols);
                }
            }

            #[test]
            fn wavefront_large_runs_many_tiles_at_once() {
                if !available(B) {
                    return;
                }
                check_shape(B, 1031, 1109);
            }

            #[test]
            fn wavefront_random_views_and_graph() {
                if !available(B) {
                    return;
                }
                for &(rows, cols) in &[(1, 1), (2, 2), (37, 53), (130, 140)] {
                    check_random(B, rows, cols, 7);
                }
                check_view(B, 40, 33, 5..29);
                check_view(B, 200, 150, 0..200);
                check_view(B, 10, 7, 9..10);
                for &(rows, cols) in &[(2, 2), (37, 53), (140, 200)] {
                    check_graph(B, rows, cols);
                }
            }

            #[test]
            fn wavefront_under_auto() {
                // Once, from the cpu instance: Auto picks any backend present.
                if B != Backend::Cpu {
                    return;
                }
                for &(rows, cols) in &[(2, 2), (37, 53), (301, 263)] {
                    check_shape(Backend::Auto, rows, cols);
                }
            }

            #[test]
            fn wavefront_errors_leave_the_matrix_as_it_was() {
                if !available(B) {
                    return;
                }
                check_errors(B);
                check_late_fault(B);
                check_options(B);
            }

            proptest! {
                #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

                #[test]
                fn prop_wavefront_matches_cpu(rows in 0usize..150, cols in 0usize..150, seed in 0u64..1000) {
                    if available(B) {
                        let init = Matrix::from_fn(rows, cols, |i, j| below(i * 977 + j, seed, 1 << 20) as i64);
                        let (mut got, mut want) = (init.clone(), init.clone());
                        Wavefront::new(wf_flat).backend(B).run(&mut got).unwrap();
                        Wavefront::new(wf_flat).backend(Backend::Cpu).run(&mut want).unwrap();
                        prop_assert_eq!(got.to_vec(), want.to_vec());
                    }
                }
            }
        }
    };
}

wavefront_suite!(cpu, Backend::Cpu);
wavefront_suite!(rayon, Backend::Rayon);
wavefront_suite!(opencl, Backend::OpenCl);
wavefront_suite!(cuda, Backend::Cuda);
