//! Reduction loop nests on the CPU (see [`crate::codegen`]'s loop-nest forms): a matrix
//! product or matrix-vector product written as an index Map runs as a cache-blocked loop
//! over contiguous rows instead of one call of the user function per element. `#[userfn]`
//! generates, for a body of that shape, the accumulation's start and step as Rust (the
//! body's own operations, wrapping and all); these loops apply the steps of every output
//! element in ascending `l` from the start, as the body does, so results are the
//! per-element call's bit for bit: only the order *between* elements changes, which
//! lets LLVM vectorise the loop over a row.
//!
//! On x86-64 the loops are also compiled for AVX2 and, with Rust 1.89 or later (the build
//! script's `skel_avx512`; the crate's minimum is 1.80), for AVX-512F; the widest build the
//! CPU has runs (the crate's baseline is SSE2). LLVM fuses a multiplication and an
//! addition into an FMA only under fast-math flags, which Rust never sets, so products
//! stay separate multiplications and additions, as in the user function, in every build
//! (AVX-512F implies the FMA instructions; the AVX-512 build of the dev machine's bench
//! contains none).
//!
//! Each returns `None` where an index the body would use leaves its container: the
//! per-element path then runs and reports the fault as it always does.

use crate::userfn::Mat;

/// `$body` for `$r` in `0..$rows` (a constant, at most [`MR`]), written out row by row: a
/// register tile's rows must be straight-line code for its accumulators to stay in
/// registers, and a loop over them is unrolled or not at the optimiser's discretion. With
/// the default 16 codegen units of a release build it was not: the accumulators lived on
/// the stack and the product ran at a fifth of the rate (dev machine, one core, 384^3).
macro_rules! each_row {
    ($rows:expr, |$r:ident| $body:block) => {{
        const _: () = assert!(MR <= 6, "each_row! writes out 6 rows");
        if 0 < $rows {
            let $r = 0;
            $body
        }
        if 1 < $rows {
            let $r = 1;
            $body
        }
        if 2 < $rows {
            let $r = 2;
            $body
        }
        if 3 < $rows {
            let $r = 3;
            $body
        }
        if 4 < $rows {
            let $r = 4;
            $body
        }
        if 5 < $rows {
            let $r = 5;
            $body
        }
    }};
}

/// Defines the public `$name`, which runs `$loops` (an `#[inline(always)]` function of the
/// same parameters) compiled for AVX2 where the CPU has it, else as the crate is built.
macro_rules! widest_build {
    ($(#[$attr:meta])* pub fn $name:ident(ops: $ops:ty, k, range: $range:ty) => $loops:ident) => {
        $(#[$attr])*
        pub fn $name<A: Copy, B: Copy, O: Copy>(
            ops: $ops,
            k: usize,
            range: $range,
            init: O,
            step: impl Fn(O, A, B) -> O,
        ) -> Option<Vec<O>> {
            #[cfg(all(target_arch = "x86_64", skel_avx512))]
            if std::arch::is_x86_feature_detected!("avx512f") {
                #[target_feature(enable = "avx512f")]
                unsafe fn widest<A: Copy, B: Copy, O: Copy>(
                    ops: $ops,
                    k: usize,
                    range: $range,
                    init: O,
                    step: impl Fn(O, A, B) -> O,
                ) -> Option<Vec<O>> {
                    $loops(ops, k, range, init, step)
                }
                // SAFETY: the CPU has AVX-512F, checked just above.
                return unsafe { widest(ops, k, range, init, step) };
            }
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                #[target_feature(enable = "avx2")]
                unsafe fn wide<A: Copy, B: Copy, O: Copy>(
                    ops: $ops,
                    k: usize,
                    range: $range,
                    init: O,
                    step: impl Fn(O, A, B) -> O,
                ) -> Option<Vec<O>> {
                    $loops(ops, k, range, init, step)
                }
                // SAFETY: the CPU has AVX2, checked just above.
                return unsafe { wide(ops, k, range, init, step) };
            }
            $loops(ops, k, range, init, step)
        }
    };
}

/// Steps per block of the `l` loop and output columns per block: a block of `b`
/// (`L_BLOCK x J_BLOCK` elements) stays in the L2 cache while every output row passes it.
const L_BLOCK: usize = 128;
const J_BLOCK: usize = 512;

/// The register tile of the product loop: rows by columns of outputs kept in registers
/// while a block's steps pass.
const MR: usize = 6;
const NR: usize = 16;

/// Output rows whose steps are interleaved in the matrix-vector loop: independent
/// accumulations in flight instead of one dependent chain (one add latency a step). 16
/// rows measured 3x slower than 8 on the dev machine's EPYC (AVX2: the accumulators no
/// longer fit the registers).
const ROWS: usize = 8;

/// Steps per block of the matrix-vector loop: each row's run of a block is one slice.
const STEPS: usize = 8;

/// Output rows per task of a product split over threads ([`crate::backends`]'s rayon
/// Map): whole rows, a multiple of the register tile's, about one task per thread. Each
/// task packs the whole of `b` it passes over, so a task of few rows spends as much time
/// packing as multiplying (measured on the dev machine, one core, 1024^3: 16-row tasks
/// at about half the rate of 64-row ones).
pub(crate) fn band_rows(rows: usize, threads: usize) -> usize {
    rows.div_ceil(threads.max(1)).next_multiple_of(MR)
}

widest_build! {
    /// `out[(i, j)] = step(.. step(init, x[(i, 0)], y[(0, j)]) .., x[(i, k - 1)], y[(k - 1, j)])`
    /// for flat positions `first .. first + n` of an output of `cols` columns.
    pub fn gemm(ops: (Mat<'_, A>, Mat<'_, B>), k, range: (usize, usize, usize)) => gemm_loops
}

/// [`gemm`]'s loops, inlined into a build for the CPU's vector width.
#[inline(always)]
fn gemm_loops<A: Copy, B: Copy, O: Copy>(
    (x, y): (Mat<'_, A>, Mat<'_, B>),
    k: usize,
    (first, n, cols): (usize, usize, usize),
    init: O,
    step: impl Fn(O, A, B) -> O,
) -> Option<Vec<O>> {
    if n == 0 {
        return Some(Vec::new());
    }
    let cols = cols.max(1);
    let last_row = (first + n - 1) / cols;
    if last_row >= x.rows() || k > x.cols() || k > y.rows() || cols > y.cols() {
        return None;
    }
    let (xd, yd) = (x.data(), y.data());
    let (xc, yc) = (x.cols(), y.cols());
    let mut out = vec![init; n];
    let (rows, full) = (first / cols..last_row + 1, |row: usize| {
        row * cols >= first && (row + 1) * cols <= first + n
    });
    // Both operands are copied into panels (the GEMM libraries' packing): the block of
    // `y` as panels of NR columns, the steps' rows of a panel one after another, and
    // MR rows of `x` as the block's steps of MR values each. A register tile then reads
    // two contiguous runs, with no bounds checks left in its loop, instead of a cache
    // line a row of `y` apart (a page apart from 1024 columns of f32: a TLB miss a
    // step). Only the order between elements changes; each element's steps stay in
    // ascending `l`.
    let pack = rows.len() >= 2;
    let mut ypanels: Vec<B> = Vec::new();
    let mut xpanel: Vec<A> = Vec::new();
    for j0 in (0..cols).step_by(J_BLOCK) {
        let j1 = (j0 + J_BLOCK).min(cols);
        for l0 in (0..k).step_by(L_BLOCK) {
            let l1 = (l0 + L_BLOCK).min(k);
            if pack {
                ypanels.clear();
                for c in (j0..j1 - (j1 - j0) % NR).step_by(NR) {
                    for l in l0..l1 {
                        ypanels.extend_from_slice(&yd[l * yc + c..l * yc + c + NR]);
                    }
                }
            }
            let mut row = rows.start;
            while row < rows.end {
                // Whole rows from here (only the range's first and last rows can be
                // partial), taken by the widest register tile they fill.
                let mut whole = 0;
                while pack && whole < MR && row + whole < rows.end && full(row + whole) {
                    whole += 1;
                }
                if whole > 0 {
                    let at = row * cols - first;
                    let block = Block {
                        x: &xd[row * xc..(row + whole) * xc],
                        xc,
                        y: (yd, yc, &ypanels),
                        steps: l0..l1,
                        cols: j0..j1,
                    };
                    let o = &mut out[at..at + whole * cols];
                    let taken = match whole {
                        MR => tile::<_, _, _, MR>(o, cols, block, &mut xpanel, init, &step),
                        4 | 5 => tile::<_, _, _, 4>(o, cols, block, &mut xpanel, init, &step),
                        2 | 3 => tile::<_, _, _, 2>(o, cols, block, &mut xpanel, init, &step),
                        _ => tile::<_, _, _, 1>(o, cols, block, &mut xpanel, init, &step),
                    };
                    row += taken;
                    continue;
                }
                // This row's columns inside the call and the block.
                let c0 = j0.max(first.saturating_sub(row * cols));
                let c1 = j1.min(first + n - row * cols);
                if c0 < c1 {
                    let at = row * cols + c0 - first;
                    row_steps(
                        &mut out[at..at + (c1 - c0)],
                        &xd[row * xc..row * xc + k],
                        (yd, yc, c0),
                        l0..l1,
                        &step,
                    );
                }
                row += 1;
            }
        }
    }
    Some(out)
}

/// What a register tile reads: whole rows of `x` (`xc` apart), `y` with its packed
/// panels of the block, and the block's steps and columns.
struct Block<'a, A, B> {
    x: &'a [A],
    xc: usize,
    y: (&'a [B], usize, &'a [B]),
    steps: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
}

/// The block's steps of the first `R` rows of `out` (rows of `cols` outputs): a register
/// tile of `R x NR` outputs per pass over the steps, then the columns short of a panel
/// row by row. Returns `R`.
#[inline(always)]
fn tile<A: Copy, B: Copy, O: Copy, const R: usize>(
    out: &mut [O],
    cols: usize,
    blk: Block<'_, A, B>,
    xpanel: &mut Vec<A>,
    init: O,
    step: &impl Fn(O, A, B) -> O,
) -> usize {
    let Block {
        x,
        xc,
        y: (yd, yc, ypanels),
        steps,
        cols: js,
    } = blk;
    let kl = steps.len();
    xpanel.clear();
    for l in steps.clone() {
        xpanel.extend((0..R).map(|r| x[r * xc + l]));
    }
    let xs = &xpanel[..R * kl];
    let mut c = js.start;
    while c + NR <= js.end {
        let mut acc = [[init; NR]; R];
        for (r, a) in acc.iter_mut().enumerate() {
            a.copy_from_slice(&out[r * cols + c..r * cols + c + NR]);
        }
        let ys = &ypanels[(c - js.start) * kl..(c - js.start + NR) * kl];
        for (xv, yv) in xs.chunks_exact(R).zip(ys.chunks_exact(NR)) {
            let (Ok(xv), Ok(yv)) = (<&[A; R]>::try_from(xv), <&[B; NR]>::try_from(yv)) else {
                continue; // never: the chunks are exact
            };
            each_row!(R, |r| {
                for c in 0..NR {
                    acc[r][c] = step(acc[r][c], xv[r], yv[c]);
                }
            });
        }
        for (r, a) in acc.iter().enumerate() {
            out[r * cols + c..r * cols + c + NR].copy_from_slice(a);
        }
        c += NR;
    }
    for r in 0..R {
        row_steps(
            &mut out[r * cols + c..r * cols + js.end],
            &x[r * xc..(r + 1) * xc],
            (yd, yc, c),
            steps.clone(),
            step,
        );
    }
    R
}

/// Steps `ls` of one output row segment `o` (columns from `c0`): `o[c] = step(o[c],
/// xrow[l], y[(l, c0 + c)])`, `l` ascending, `c` contiguous.
fn row_steps<A: Copy, B: Copy, O: Copy>(
    o: &mut [O],
    xrow: &[A],
    (yd, yc, c0): (&[B], usize, usize),
    ls: std::ops::Range<usize>,
    step: &impl Fn(O, A, B) -> O,
) {
    let w = o.len();
    for l in ls {
        let a = xrow[l];
        for (o, &b) in o.iter_mut().zip(&yd[l * yc + c0..l * yc + c0 + w]) {
            *o = step(*o, a, b);
        }
    }
}

widest_build! {
    /// `out[i] = step(.. step(init, m[(i, 0)], v[0]) .., m[(i, k - 1)], v[k - 1])` for
    /// `i` in `first .. first + n`.
    pub fn gemv(ops: (Mat<'_, A>, &[B]), k, range: (usize, usize)) => gemv_loops
}

/// [`gemv`]'s loops, inlined into a build for the CPU's vector width.
#[inline(always)]
fn gemv_loops<A: Copy, B: Copy, O: Copy>(
    (m, v): (Mat<'_, A>, &[B]),
    k: usize,
    (first, n): (usize, usize),
    init: O,
    step: impl Fn(O, A, B) -> O,
) -> Option<Vec<O>> {
    if n > 0 && (first + n > m.rows() || k > m.cols() || k > v.len()) {
        return None;
    }
    let (md, mc) = (m.data(), m.cols());
    let v = &v[..k];
    let mut out = vec![init; n];
    let mut groups = out.chunks_exact_mut(ROWS);
    for (g, chunk) in groups.by_ref().enumerate() {
        let i0 = first + g * ROWS;
        let rows: [&[A]; ROWS] = std::array::from_fn(|r| &md[(i0 + r) * mc..(i0 + r) * mc + k]);
        chunk.copy_from_slice(&fold_rows(rows, v, init, &step));
    }
    let rest = groups.into_remainder();
    let i0 = first + n - rest.len();
    for (r, o) in rest.iter_mut().enumerate() {
        let row = &md[(i0 + r) * mc..(i0 + r) * mc + k];
        *o = fold_rows([row], v, init, &step)[0];
    }
    Some(out)
}

/// The folds of `R` rows over `v`, each in ascending `l`: each row's run of a block of
/// steps is one slice (one bounds check a row a block), taken a step at a time across the
/// rows, so `R` independent accumulations are in flight. (Copying the block into an
/// array first, the earlier form, ran at 0.3x the rate in cache on the dev machine.)
#[inline(always)]
fn fold_rows<A: Copy, B: Copy, O: Copy, const R: usize>(
    rows: [&[A]; R],
    v: &[B],
    init: O,
    step: &impl Fn(O, A, B) -> O,
) -> [O; R] {
    let k = v.len();
    let mut acc = [init; R];
    let mut l0 = 0;
    while l0 + STEPS <= k {
        let ys = &v[l0..l0 + STEPS];
        let blk: [&[A]; R] = std::array::from_fn(|r| &rows[r][l0..l0 + STEPS]);
        for s in 0..STEPS {
            for r in 0..R {
                acc[r] = step(acc[r], blk[r][s], ys[s]);
            }
        }
        l0 += STEPS;
    }
    for l in l0..k {
        for r in 0..R {
            acc[r] = step(acc[r], rows[r][l], v[l]);
        }
    }
    acc
}

widest_build! {
    /// `out[j] = step(.. step(init, m[(0, j)], v[0]) .., m[(k - 1, j)], v[k - 1])` for `j`
    /// in `first .. first + n`: a row of `m` per step, contiguous.
    pub fn gemv_t(ops: (Mat<'_, A>, &[B]), k, range: (usize, usize)) => gemv_t_loops
}

/// [`gemv_t`]'s loops, inlined into a build for the CPU's vector width.
#[inline(always)]
fn gemv_t_loops<A: Copy, B: Copy, O: Copy>(
    (m, v): (Mat<'_, A>, &[B]),
    k: usize,
    (first, n): (usize, usize),
    init: O,
    step: impl Fn(O, A, B) -> O,
) -> Option<Vec<O>> {
    if n > 0 && (first + n > m.cols() || k > m.rows() || k > v.len()) {
        return None;
    }
    let (md, mc) = (m.data(), m.cols());
    let mut out = vec![init; n];
    for l in 0..k {
        let y = v[l];
        let row = &md[l * mc + first..l * mc + first + n];
        for (o, &a) in out.iter_mut().zip(row) {
            *o = step(*o, a, y);
        }
    }
    Some(out)
}

#[cfg(test)]
#[allow(clippy::needless_range_loop)] // the user functions under test index their containers
mod tests {
    use super::{gemm, gemv, gemv_t};
    use crate::prelude::*;
    use crate::userfn::{ElementwiseFn, Mat};

    #[userfn]
    fn mm(#[index] (i, j): (usize, usize), a: Mat<f32>, b: Mat<f32>) -> f32 {
        let mut s = 0.0f32;
        for l in 0..a.cols() {
            s += a[(i, l)] * b[(l, j)];
        }
        s
    }

    #[userfn]
    fn mtv(#[index] j: usize, a: Mat<i32>, r: &[i32], #[uniform] k: u32) -> i32 {
        let mut s = 1;
        let mut l = 0u32;
        while l < k {
            s = s.max(r[l as usize] * a[(l as usize, j)]);
            l += 1;
        }
        s
    }

    #[userfn]
    fn weighted(#[index] (i, j): (usize, usize), a: Mat<f32>, b: Mat<f32>) -> f32 {
        let mut s = 0.0f32;
        for l in 0..a.cols() {
            s += a[(i, l)] * b[(l, j)] * j as f32;
        }
        s
    }

    #[test]
    fn userfn_generates_the_blocked_form_of_a_nest_only() {
        let (a, b) = (
            vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0],
            vec![1.0f32, -1.0, 0.5, 2.0, 0.0, 1.0],
        );
        let (am, bm) = (Mat::new(&a, 2, 3), Mat::new(&b, 3, 2));
        let got = <mm as ElementwiseFn>::nest_block((am, bm), 0, 4, 2, &()).unwrap();
        assert_eq!(got, vec![2.0, 6.0, 6.5, 12.0]);
        let r = [3, -1];
        let ai = [1, 2, 3, 4, 5, 6];
        let got =
            <mtv as ElementwiseFn>::nest_block((Mat::new(&ai, 2, 3), &r), 0, 3, 3, &(2,)).unwrap();
        assert_eq!(got, vec![3, 6, 9]);
        assert!(<weighted as ElementwiseFn>::nest_block((am, bm), 0, 4, 2, &()).is_none());
    }

    fn floats(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| ((i as u32).wrapping_mul(2_654_435_761) ^ seed) as f32 / u32::MAX as f32 - 0.5)
            .collect()
    }

    #[test]
    fn blocked_products_keep_each_elements_order() {
        // rows for two register tiles and a row left over; steps over two blocks
        let (m, k, n) = (13, 300, 700);
        let (a, b) = (floats(m * k, 1), floats(k * n, 2));
        let step = |o: f32, x: f32, y: f32| o + x * y;
        let want: Vec<f32> = (0..m * n)
            .map(|p| (0..k).fold(0.0, |s, l| step(s, a[(p / n) * k + l], b[l * n + p % n])))
            .collect();
        let (am, bm) = (Mat::new(&a, m, k), Mat::new(&b, k, n));
        for (first, len) in [
            (0, m * n),
            (3, 1000),
            (701, 2),
            (m * n - 1, 1),
            (n - 1, 7 * n + 5),
        ] {
            let got = gemm((am, bm), k, (first, len, n), 0.0, step).unwrap();
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want[first..first + len]), "{first}+{len}");
        }
        // a trip count past the columns of `a` is the per-element path's to report
        assert!(gemm((am, bm), k + 1, (0, 1, n), 0.0, step).is_none());
        let x = floats(k, 3);
        let want: Vec<f32> = (0..m)
            .map(|i| (0..k).fold(0.0, |s, l| step(s, a[i * k + l], x[l])))
            .collect();
        assert_eq!(gemv((am, &x), k, (0, m), 0.0, step).unwrap(), want);
        let r = floats(m, 4);
        let want: Vec<f32> = (0..k)
            .map(|j| (0..m).fold(0.0, |s, l| step(s, a[l * k + j], r[l])))
            .collect();
        assert_eq!(gemv_t((am, &r), m, (0, k), 0.0, step).unwrap(), want);
    }

    /// `out[p] = (0..k).fold(init, step(_, a[(p / n, l)], b[(l, p % n)]))`, the oracle.
    fn per_element<T: Copy, O: Copy>(
        (a, b): (&[T], &[T]),
        (m, k, n): (usize, usize, usize),
        init: O,
        step: impl Fn(O, T, T) -> O,
    ) -> Vec<O> {
        (0..m * n)
            .map(|p| (0..k).fold(init, |s, l| step(s, a[(p / n) * k + l], b[l * n + p % n])))
            .collect()
    }

    /// Every split a rayon Map makes (whole-row bands for 1-5 threads) and odd ones, at
    /// sizes of 0 and 1, primes, and neither a multiple of the register tile (6 x 16) nor
    /// of the blocks (128 steps, 512 columns): all rows' remainders take the narrower
    /// tiles; f32 sums, integer min-plus and f64 products stay the per-element fold.
    #[test]
    fn every_split_of_a_product_keeps_each_elements_order() {
        let shapes = [
            (0, 3, 4),
            (3, 4, 0),
            (1, 1, 1),
            (2, 0, 3),
            (5, 7, 17),
            (7, 131, 13),
            (11, 129, 33),
            (23, 37, 529),
            (41, 5, 16),
        ];
        for (m, k, n) in shapes {
            let (a, b) = (floats(m * k, 5), floats(k * n, 6));
            let sum = |o: f32, x: f32, y: f32| o + x * y;
            let want = per_element((&a, &b), (m, k, n), 0.0f32, sum);
            let ai: Vec<i32> = a.iter().map(|v| (v * 1e9) as i32).collect();
            let bi: Vec<i32> = b.iter().map(|v| (v * 2e9) as i32).collect();
            let min_plus = |o: i32, x: i32, y: i32| o.min(x.wrapping_add(y));
            let want_i = per_element((&ai, &bi), (m, k, n), i32::MAX, min_plus);
            let ad: Vec<f64> = a.iter().map(|&v| v as f64 / 3.0).collect();
            let bd: Vec<f64> = b.iter().map(|&v| v as f64 * 7.0).collect();
            let prod = |o: f64, x: f64, y: f64| o + x * y;
            let want_d = per_element((&ad, &bd), (m, k, n), 0.5f64, prod);
            let mut splits: Vec<Vec<usize>> = (1..=5)
                .map(|t| {
                    let band = super::band_rows(m, t) * n;
                    (0..m * n).step_by(band.max(1)).collect()
                })
                .collect();
            splits.push((0..m * n).step_by(7).collect());
            splits.push((0..m * n).step_by(n + 3).collect());
            for starts in splits {
                let ends = starts.iter().skip(1).copied().chain([m * n]);
                for (first, end) in starts.iter().copied().zip(ends) {
                    let len = end - first;
                    let got = gemm(
                        (Mat::new(&a, m, k), Mat::new(&b, k, n)),
                        k,
                        (first, len, n),
                        0.0,
                        sum,
                    )
                    .unwrap();
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(
                        bits(&got),
                        bits(&want[first..end]),
                        "{m}x{k}x{n} {first}+{len}"
                    );
                    let got = gemm(
                        (Mat::new(&ai, m, k), Mat::new(&bi, k, n)),
                        k,
                        (first, len, n),
                        i32::MAX,
                        min_plus,
                    )
                    .unwrap();
                    assert_eq!(got, want_i[first..end], "{m}x{k}x{n} {first}+{len}");
                    let got = gemm(
                        (Mat::new(&ad, m, k), Mat::new(&bd, k, n)),
                        k,
                        (first, len, n),
                        0.5,
                        prod,
                    )
                    .unwrap();
                    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(
                        bits(&got),
                        bits(&want_d[first..end]),
                        "{m}x{k}x{n} {first}+{len}"
                    );
                }
            }
            // matrix-vector: every group of 8 rows and the rows left over, from any row
            let x = floats(k, 7);
            let mv: Vec<u32> = (0..m)
                .map(|i| {
                    (0..k)
                        .fold(0.0f32, |s, l| sum(s, a[i * k + l], x[l]))
                        .to_bits()
                })
                .collect();
            for first in 0..m.min(10) {
                let got = gemv((Mat::new(&a, m, k), &x), k, (first, m - first), 0.0, sum).unwrap();
                let got: Vec<u32> = got.iter().map(|v| v.to_bits()).collect();
                assert_eq!(got, mv[first..], "{m}x{k} from {first}");
            }
        }
    }
}
