//! Recorded replay (`skel::Graph`) on every backend: a recorded sequence launched N times
//! leaves every container exactly as the same calls made eagerly N times do (and, for
//! integer programs, as the cpu oracle does), across edge sizes and random programs;
//! calls that return a value to the host are refused inside a recording; a closure that
//! makes other calls on a launch than it recorded is an error, never a wrong answer.

use std::cell::{Cell, RefCell};

use proptest::prelude::*;
use skel::prelude::*;
use skel::Graph;

use super::available;

/// Sizes: empty, one, primes, around the Rayon chunk (2^14).
pub const GRAPH_SIZES: &[usize] = &[0, 1, 2, 7, 13, 257, 1009, 16385];

#[userfn]
pub fn g_add(a: i64, b: i64) -> i64 {
    a + b
}

#[userfn]
pub fn g_id(x: i64) -> i64 {
    x
}

#[userfn]
pub fn g_mul(a: i64, b: i64) -> i64 {
    a * b
}

#[userfn]
pub fn g_step(x: i64, #[uniform] k: i64) -> i64 {
    (x * k + 3) % 1_000_003
}

/// `y + s[0] * x`, the scale read from a one-element container (a CG step's `alpha`).
#[userfn]
pub fn g_axpy(x: i64, y: i64, s: &[i64]) -> i64 {
    (y + s[0] % 7 * x) % 1_000_000_007
}

#[userfn]
pub fn g_blur(w: Window<i64>) -> i64 {
    (w[-1] + w[0] + w[1]) % 1_000_003
}

#[userfn]
pub fn g_keep(x: i64) -> bool {
    x % 2 == 0
}

#[userfn]
pub fn g_idx(#[index] i: usize) -> i64 {
    (i % 5) as i64
}

/// Element `j` of a wavefront's next row from the previous one (`nw`'s shape).
#[userfn]
pub fn g_row(#[index] j: usize, prev: &[i64], #[uniform] r: i64) -> i64 {
    let left = if j == 0 { r } else { prev[j - 1] };
    (prev[j] * 3 + left + j as i64) % 1_000_003
}

/// A sweep over the rows of `w` (`cols` elements each), every row written through a view:
/// an index Map from the previous row into `u`, a Scan of `u` into the row; the last row
/// then becomes row 0, so every sweep goes on from the one before.
pub fn wavefront(b: Backend, cols: usize, w: &mut Vector<i64>, u: &mut Vector<i64>) -> Result<()> {
    let rows = w.len() / cols.max(1);
    for i in 1..rows {
        {
            let prev = w.view((i - 1) * cols..i * cols);
            Map::new(g_row)
                .arrays((&prev,))
                .uniforms((i as i64,))
                .backend(b)
                .run_index(u)?;
        }
        Scan::new(g_add)
            .backend(b)
            .run(&*u, &mut w.view_mut(i * cols..(i + 1) * cols))?;
    }
    Map::new(g_id).backend(b).run(&*u, &mut w.view_mut(0..cols))
}

#[userfn]
pub fn g_fadd(a: f32, b: f32) -> f32 {
    a + b
}

#[userfn]
pub fn g_fmul(a: f32, b: f32) -> f32 {
    a * b
}

#[userfn]
pub fn g_fscale(x: f32, s: &[f32]) -> f32 {
    x * 0.5 + s[0] * 1e-6
}

/// One call of a random program over three containers `v[0..3]` and a one-element `s`.
#[derive(Clone, Copy, Debug)]
pub enum Op {
    /// `v[d] = step(v[a], k)`
    Step(usize, usize, i64),
    /// `v[d] = v[a] + v[b]` (d differs from a and b)
    Add(usize, usize, usize),
    /// `s = sum(v[a] * v[b])` (MapReduce::run_into)
    Dot(usize, usize),
    /// `s = sum(v[a])` (Reduce::run_into)
    Sum(usize),
    /// `v[d] = v[d] + s[0] % 7 * v[a]`, through a new container (the axpy reads `v[d]`)
    Axpy(usize, usize),
    /// `v[d] = inclusive scan of v[a]`
    Scan(usize, usize),
    /// `v[d] = blur of v[a]` (needs len >= 2)
    Blur(usize, usize),
    /// `v[d][1..] = v[a][..len-1] + v[b][1..]`: views
    Views(usize, usize, usize),
}

/// Runs `op` on `b` over `v` and `s` (`t` is scratch of the same length as `v[i]`).
pub fn apply(
    b: Backend,
    op: Op,
    v: &mut [Vector<i64>; 3],
    s: &mut Vector<i64>,
    t: &mut Vector<i64>,
) -> Result<()> {
    let n = v[0].len();
    let copy = Map::new(g_id).backend(b);
    match op {
        Op::Step(a, d, k) => {
            let step = Map::new(g_step).uniforms((k,)).backend(b);
            if a == d {
                // A skeleton's input and output never alias: the input as its own copy,
                // made on the host like a user would (on every launch).
                let old = v[a].clone();
                step.run(&old, &mut v[d])
            } else {
                let [x, y, z] = v;
                let (src, dst) = pick2(x, y, z, a, d);
                step.run(src, dst)
            }
        }
        Op::Add(a, bb, d) => {
            Map::new(g_add).backend(b).run(&v[a], &v[bb], t)?;
            copy.run(t, &mut v[d])
        }
        Op::Dot(a, bb) => MapReduce::new(g_mul, g_add)
            .backend(b)
            .run_into(&v[a], &v[bb], s),
        Op::Sum(a) => Reduce::new(g_add).backend(b).run_into(&v[a], s),
        Op::Axpy(a, d) => {
            Map::new(g_axpy)
                .arrays((&*s,))
                .backend(b)
                .run(&v[a], &v[d], t)?;
            copy.run(t, &mut v[d])
        }
        Op::Scan(a, d) => {
            Scan::new(g_add).backend(b).run(&v[a], t)?;
            copy.run(t, &mut v[d])
        }
        Op::Blur(a, d) if n >= 2 => {
            MapOverlap::new(g_blur, 1).backend(b).run(&v[a], t)?;
            copy.run(t, &mut v[d])
        }
        Op::Blur(..) => Ok(()),
        Op::Views(a, bb, d) if n >= 2 && d != a && d != bb => {
            let [x, y, z] = v;
            let (src_a, src_b, dst) = pick3(x, y, z, a, bb, d);
            Map::new(g_add).backend(b).run(
                &src_a.view(0..n - 1),
                &src_b.view(1..n),
                &mut dst.view_mut(1..n),
            )
        }
        Op::Views(..) => Ok(()),
    }
}

fn pick2<'v>(
    x: &'v mut Vector<i64>,
    y: &'v mut Vector<i64>,
    z: &'v mut Vector<i64>,
    a: usize,
    d: usize,
) -> (&'v Vector<i64>, &'v mut Vector<i64>) {
    match (a, d) {
        (0, 1) => (x, y),
        (0, 2) => (x, z),
        (1, 0) => (y, x),
        (1, 2) => (y, z),
        (2, 0) => (z, x),
        _ => (z, y),
    }
}

fn pick3<'v>(
    x: &'v mut Vector<i64>,
    y: &'v mut Vector<i64>,
    z: &'v mut Vector<i64>,
    a: usize,
    b: usize,
    d: usize,
) -> (&'v Vector<i64>, &'v Vector<i64>, &'v mut Vector<i64>) {
    let (rest, dst): ([&'v Vector<i64>; 2], &'v mut Vector<i64>) = match d {
        0 => ([y, z], x),
        1 => ([x, z], y),
        _ => ([x, y], z),
    };
    // `a` and `b` name two of the containers that are not `d`, kept in index order.
    let slot = |i: usize| if i < d { i } else { i - 1 };
    (rest[slot(a)], rest[slot(b)], dst)
}

/// The program's containers for length `n`: three vectors of distinct values, `s`, `t`.
pub fn state(n: usize) -> ([Vector<i64>; 3], Vector<i64>, Vector<i64>) {
    let v = [0i64, 1, 2].map(|k| Vector::from_fn(n, |i| ((i as i64 * (k + 3) + k) % 97) - 40));
    (v, Vector::from(vec![5i64]), Vector::zeroed(n))
}

/// What the containers hold: every element, read on the host (downloads what is stale).
pub fn snapshot(v: &[Vector<i64>; 3], s: &Vector<i64>) -> Vec<Vec<i64>> {
    let mut all: Vec<Vec<i64>> = v.iter().map(Vector::to_vec).collect();
    all.push(s.to_vec());
    all
}

/// Runs `ops` `launches` times on `b`: eagerly, then recorded once and launched
/// `launches - 1` times, and on the cpu oracle; all three must agree element for element.
pub fn replay_against_eager(b: Backend, n: usize, ops: &[Op], launches: usize) {
    let (mut ev, mut es, mut et) = state(n);
    for _ in 0..launches {
        for &op in ops {
            apply(b, op, &mut ev, &mut es, &mut et).unwrap();
        }
    }
    let (mut ov, mut os, mut ot) = state(n);
    for _ in 0..launches {
        for &op in ops {
            apply(Backend::Cpu, op, &mut ov, &mut os, &mut ot).unwrap();
        }
    }
    let (mut gv, mut gs, mut gt) = state(n);
    {
        let g = Graph::record(|| {
            for &op in ops {
                apply(b, op, &mut gv, &mut gs, &mut gt)?;
            }
            Ok(())
        })
        .unwrap();
        for _ in 1..launches {
            g.launch().unwrap();
        }
    }
    let eager = snapshot(&ev, &es);
    assert_eq!(
        snapshot(&gv, &gs),
        eager,
        "{b}: replayed vs eager, n={n}, ops={ops:?}"
    );
    assert_eq!(
        snapshot(&ov, &os),
        eager,
        "{b}: eager vs the cpu oracle, n={n}, ops={ops:?}"
    );
}

/// A solver-like step: two dots into one-element containers, axpys reading them, a scan,
/// a stencil and views.
pub const PROGRAM: &[Op] = &[
    Op::Dot(0, 1),
    Op::Axpy(0, 2),
    Op::Step(2, 1, 31),
    Op::Sum(1),
    Op::Axpy(1, 0),
    Op::Scan(0, 2),
    Op::Blur(2, 1),
    Op::Views(0, 1, 2),
    Op::Add(0, 2, 1),
    Op::Step(1, 1, 7),
];

fn op_strategy() -> impl Strategy<Value = Op> {
    let ix = 0usize..3;
    prop_oneof![
        (ix.clone(), ix.clone(), -5i64..50).prop_map(|(a, d, k)| Op::Step(a, d, k)),
        (ix.clone(), ix.clone(), ix.clone()).prop_map(|(a, b, d)| Op::Add(a, b, d)),
        (ix.clone(), ix.clone()).prop_map(|(a, b)| Op::Dot(a, b)),
        ix.clone().prop_map(Op::Sum),
        (ix.clone(), ix.clone()).prop_map(|(a, d)| Op::Axpy(a, d)),
        (ix.clone(), ix.clone()).prop_map(|(a, d)| Op::Scan(a, d)),
        (ix.clone(), ix.clone()).prop_map(|(a, d)| Op::Blur(a, d)),
        (ix.clone(), ix.clone(), ix).prop_map(|(a, b, d)| Op::Views(a, b, d)),
    ]
}

macro_rules! graph_suite {
    ($name:ident, $backend:expr) => {
        mod $name {
            use super::*;

            const B: Backend = $backend;

            #[test]
            fn replayed_program_matches_eager_calls_and_the_oracle() {
                if !available(B) {
                    return;
                }
                for &n in GRAPH_SIZES {
                    for launches in [1, 2, 5] {
                        replay_against_eager(B, n, PROGRAM, launches);
                    }
                }
            }

            #[test]
            fn rows_written_through_views_replay_like_eager_sweeps() {
                if !available(B) {
                    return;
                }
                for (rows, cols) in [(2, 1), (5, 7), (40, 257), (300, 33)] {
                    let w0 = Vector::from_fn(rows * cols, |k| (k % 11) as i64);
                    let (mut w, mut u) = (w0.clone(), Vector::zeroed(cols));
                    let (mut ew, mut eu) = (w0.clone(), Vector::zeroed(cols));
                    let (mut ow, mut ou) = (w0, Vector::zeroed(cols));
                    for batch in 0..2 {
                        {
                            let g = Graph::record(|| wavefront(B, cols, &mut w, &mut u)).unwrap();
                            // Back to back, nothing waited for in between.
                            for _ in 0..3 {
                                g.launch().unwrap();
                            }
                        }
                        for _ in 0..4 {
                            wavefront(B, cols, &mut ew, &mut eu).unwrap();
                            wavefront(Backend::Cpu, cols, &mut ow, &mut ou).unwrap();
                        }
                        let what = format!("{rows}x{cols}, batch {batch}");
                        assert_eq!(w.to_vec(), ew.to_vec(), "{what}: replay vs eager");
                        assert_eq!(w.to_vec(), ow.to_vec(), "{what}: replay vs cpu");
                        assert_eq!(u.to_vec(), ou.to_vec(), "{what}");
                    }
                }
            }

            #[test]
            fn host_access_between_graphs_and_floats_bit_identical() {
                if !available(B) {
                    return;
                }
                for &n in GRAPH_SIZES {
                    let x = Vector::from_fn(n, |i| (i % 13) as f32 * 0.37 - 1.0);
                    let (mut a, mut s) = (Vector::filled(n, 1.0f32), Vector::zeroed(1));
                    let (mut ea, mut es) = (a.clone(), s.clone());
                    let eager = |a: &mut Vector<f32>, s: &mut Vector<f32>| -> Result<()> {
                        Reduce::new(g_fadd).backend(B).run_into(&*a, s)?;
                        Map::new(g_fscale)
                            .arrays((&*s,))
                            .backend(B)
                            .run(&x, &mut *a)
                    };
                    for round in 0..3 {
                        {
                            let g = Graph::record(|| {
                                Reduce::new(g_fadd).backend(B).run_into(&a, &mut s)?;
                                Map::new(g_fscale).arrays((&s,)).backend(B).run(&x, &mut a)
                            })
                            .unwrap();
                            assert_eq!(g.calls(), 2);
                            for _ in 0..4 {
                                g.launch().unwrap();
                            }
                        }
                        for _ in 0..5 {
                            eager(&mut ea, &mut es).unwrap();
                        }
                        let bits =
                            |v: &Vector<f32>| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                        assert_eq!(bits(&a), bits(&ea), "n={n}, round {round}");
                        assert_eq!(bits(&s), bits(&es), "n={n}, round {round}");
                        // Host writes between recordings: the next recording uploads them.
                        if n > 0 {
                            a.as_mut_slice()[n / 2] = round as f32;
                            ea.as_mut_slice()[n / 2] = round as f32;
                        }
                    }
                }
            }

            #[test]
            fn calls_returning_values_are_refused_and_leave_data_intact() {
                if !available(B) {
                    return;
                }
                let x = Vector::from_fn(10, |i| i as i64);
                let mut out = Vector::filled(10, -1i64);
                let refused: [(&str, Box<dyn Fn() -> Result<()>>); 4] = [
                    (
                        "MapReduce::run",
                        Box::new(|| {
                            MapReduce::new(g_idx, g_add)
                                .backend(B)
                                .run_index(12)
                                .map(drop)
                        }),
                    ),
                    (
                        "Reduce::run",
                        Box::new(|| Reduce::new(g_add).backend(B).run(&x).map(drop)),
                    ),
                    (
                        "MapReduce::run",
                        Box::new(|| {
                            MapReduce::new(g_mul, g_add)
                                .backend(B)
                                .run(&x, &x)
                                .map(drop)
                        }),
                    ),
                    (
                        "Filter::run",
                        Box::new(|| {
                            Filter::new(g_keep)
                                .backend(B)
                                .run(&x, &mut Vector::zeroed(10))
                                .map(drop)
                        }),
                    ),
                ];
                for (form, call) in refused {
                    let err = Graph::record(|| {
                        Map::new(g_step)
                            .uniforms((3,))
                            .backend(B)
                            .run(&x, &mut out)?;
                        call()
                    })
                    .unwrap_err();
                    assert!(matches!(err, Error::Recording(_)), "{form}: {err}");
                    let msg = err.to_string();
                    assert!(msg.contains(form) && msg.contains("run_into"), "{msg}");
                    // Outside a recording the same call works: the thread is back to eager.
                    call().unwrap();
                }
                assert_eq!(out.to_vec(), (0..10).map(|i| i * 3 + 3).collect::<Vec<_>>());
                assert_eq!(x.to_vec(), (0..10).collect::<Vec<_>>());
                let (mut total, mut count) = (Vector::zeroed(1), Vector::zeroed(1));
                Graph::record(|| {
                    Reduce::new(g_add).backend(B).run_into(&x, &mut total)?;
                    MapReduce::new(g_idx, g_add)
                        .backend(B)
                        .run_index_into(12, &mut count)
                })
                .unwrap();
                assert_eq!(
                    (total[0], count[0]),
                    (45, 0 + 1 + 2 + 3 + 4 + 0 + 1 + 2 + 3 + 4 + 0 + 1)
                );
            }

            #[test]
            fn closures_that_change_their_calls_are_errors() {
                if !available(B) {
                    return;
                }
                let x = Vector::from_fn(31, |i| i as i64);
                let mut out = Vector::zeroed(31);
                let launches = Cell::new(0);
                let g = Graph::record(|| {
                    let k = launches.get();
                    launches.set(k + 1);
                    match k {
                        0 => Map::new(g_step).uniforms((2,)).backend(B).run(&x, &mut out),
                        1 => Map::new(g_add).backend(B).run(&x, &x, &mut out),
                        2 => Ok(()),
                        _ => {
                            Map::new(g_step)
                                .uniforms((2,))
                                .backend(B)
                                .run(&x, &mut out)?;
                            Map::new(g_step).uniforms((2,)).backend(B).run(&x, &mut out)
                        }
                    }
                })
                .unwrap();
                if g.device_graph() {
                    // A device graph replays the recorded call; the closure does not run.
                    for _ in 0..3 {
                        g.launch().unwrap();
                    }
                    assert_eq!(launches.get(), 1);
                } else {
                    for what in ["g_add", "made 0", "more skeleton calls"] {
                        let err = g.launch().unwrap_err();
                        assert!(
                            matches!(err, Error::Recording(_)) && err.to_string().contains(what),
                            "{what}: {err}"
                        );
                    }
                }
                drop(g);
                assert_eq!(out.to_vec(), (0..31).map(|i| i * 2 + 3).collect::<Vec<_>>());
                // A launch inside a recording, and a recording inside a launch, are refused.
                let mut y = Vector::zeroed(31);
                let inner =
                    Graph::record(|| Map::new(g_step).uniforms((1,)).backend(B).run(&x, &mut y))
                        .unwrap();
                let err = Graph::record(|| inner.launch()).unwrap_err();
                assert!(matches!(err, Error::Recording(_)), "{err}");
                let outer = Graph::record(|| Ok(())).unwrap();
                assert_eq!(outer.calls(), 0);
                outer.launch().unwrap();
                inner.launch().unwrap();
                let err = Graph::record(|| Graph::record(|| Ok(())).map(drop)).unwrap_err();
                assert!(matches!(err, Error::Recording(_)), "{err}");
                // The closure's own error comes back from record and launch as it was.
                let flaky = Cell::new(false);
                let g = Graph::record(|| {
                    Map::new(g_step)
                        .uniforms((1,))
                        .backend(B)
                        .run(&x, &mut out)?;
                    if flaky.replace(true) {
                        return Err(Error::other("second time"));
                    }
                    Ok(())
                })
                .unwrap();
                if g.device_graph() {
                    // The closure (and its error) does not run again; its call is replayed.
                    g.launch().unwrap();
                    drop(g);
                    assert_eq!(out.to_vec(), (0..31).map(|i| i + 3).collect::<Vec<_>>());
                } else {
                    assert_eq!(g.launch().unwrap_err().to_string(), "second time");
                }
            }

            #[test]
            fn lazy_chains_and_folds_replay_bit_identical_to_eager() {
                if !available(B) {
                    return;
                }
                for &n in GRAPH_SIZES {
                    let x = Vector::from_fn(n, |i| (i % 17) as f32 * 0.25 - 2.0);
                    let y0 = Vector::from_fn(n, |i| (i % 5) as f32 - 1.0);
                    // t = (x + (x + y)) + y, both sums lazy; y = t * 0.5 + s[0] * 1e-6;
                    // s = sum(y * x)
                    let program = |y: &mut Vector<f32>,
                                   s: &mut Vector<f32>,
                                   t: &mut Vector<f32>|
                     -> Result<()> {
                        let inner = Map::new(g_fadd).lazy(&x, &*y);
                        let outer = Map::new(g_fadd).lazy(&x, &inner);
                        Map::new(g_fadd).backend(B).run(&outer, &*y, &mut *t)?;
                        Map::new(g_fscale)
                            .arrays((&*s,))
                            .backend(B)
                            .run(&*t, &mut *y)?;
                        MapReduce::new(g_fmul, g_fadd)
                            .backend(B)
                            .run_into(&*y, &x, s)
                    };
                    let (mut ey, mut es, mut et) =
                        (y0.clone(), Vector::from(vec![0.5f32]), Vector::zeroed(n));
                    for _ in 0..4 {
                        program(&mut ey, &mut es, &mut et).unwrap();
                    }
                    let (mut gy, mut gs, mut gt) =
                        (y0.clone(), Vector::from(vec![0.5f32]), Vector::zeroed(n));
                    {
                        let g = Graph::record(|| program(&mut gy, &mut gs, &mut gt)).unwrap();
                        assert_eq!(g.calls(), 3);
                        // On CUDA every call of this program can be one CUDA graph (an
                        // empty fold writes its start value on the host: not a kernel),
                        // unless another test's calls ran on other threads meanwhile (the
                        // recorder keeps the closure then); `--test-threads=1` makes it one.
                        assert!(
                            !g.device_graph() || (B == Backend::Cuda && n > 0),
                            "{B}: n={n}"
                        );
                        for _ in 1..4 {
                            g.launch().unwrap();
                        }
                    }
                    let bits = |v: &Vector<f32>| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&gy), bits(&ey), "{B}: n={n}");
                    assert_eq!(bits(&gs), bits(&es), "{B}: n={n}");
                    assert_eq!(bits(&gt), bits(&et), "{B}: n={n}");
                }
            }

            #[test]
            fn host_writes_and_reads_between_launches_are_seen() {
                if !available(B) {
                    return;
                }
                for &n in GRAPH_SIZES {
                    // The host reaches `x` between launches through a `RefCell` (the graph
                    // borrows it); the oracle is the program in plain Rust.
                    let x = RefCell::new(Vector::from_fn(n, |i| (i % 11) as i64 - 4));
                    let mut y = Vector::from_fn(n, |i| (i % 3) as i64);
                    let (mut s, mut t, mut out) = (
                        Vector::from(vec![1i64]),
                        Vector::zeroed(n),
                        Vector::zeroed(n),
                    );
                    let (mut ex, mut ey, mut es) = (x.borrow().to_vec(), y.to_vec(), 1i64);
                    let step = |ex: &[i64], ey: &mut Vec<i64>, es: &mut i64| {
                        for i in 0..n {
                            let o = (ex[i] * 5 + 3) % 1_000_003;
                            ey[i] = (ey[i] + *es % 7 * o) % 1_000_000_007;
                        }
                        *es = (0..n).map(|i| ey[i] * ex[i]).sum();
                    };
                    {
                        let g = Graph::record(|| {
                            let xs = x.borrow();
                            Map::new(g_step)
                                .uniforms((5,))
                                .backend(B)
                                .run(&*xs, &mut out)?;
                            Map::new(g_axpy)
                                .arrays((&s,))
                                .backend(B)
                                .run(&out, &y, &mut t)?;
                            Map::new(g_id).backend(B).run(&t, &mut y)?;
                            MapReduce::new(g_mul, g_add)
                                .backend(B)
                                .run_into(&y, &*xs, &mut s)
                        })
                        .unwrap();
                        step(&ex, &mut ey, &mut es);
                        for k in 0..7 {
                            if k % 2 == 0 && n > 0 {
                                let v = k as i64 * 3 - 1;
                                x.borrow_mut().as_mut_slice()[k % n] = v;
                                ex[k % n] = v;
                            }
                            if k % 3 == 1 {
                                assert_eq!(x.borrow().to_vec(), ex, "{B}: n={n}, launch {k}");
                            }
                            g.launch().unwrap();
                            step(&ex, &mut ey, &mut es);
                        }
                    }
                    assert_eq!(y.to_vec(), ey, "{B}: n={n}");
                    assert_eq!(s[0], es, "{B}: n={n}");
                }
            }

            #[test]
            fn a_container_replaced_since_the_recording_is_refused_on_a_device_graph() {
                if !available(B) {
                    return;
                }
                let x = Vector::from_fn(64, |i| i as i64);
                let out = RefCell::new(Vector::zeroed(64));
                let g = Graph::record(|| {
                    Map::new(g_step)
                        .uniforms((2,))
                        .backend(B)
                        .run(&x, &mut *out.borrow_mut())
                })
                .unwrap();
                g.launch().unwrap();
                // The container the graph wrote is dropped; a new one takes its place.
                *out.borrow_mut() = Vector::filled(64, -1);
                let launched = g.launch();
                if g.device_graph() {
                    // The device graph's kernels hold the old container's address.
                    let err = launched.unwrap_err();
                    assert!(matches!(err, Error::Recording(_)), "{err}");
                    assert!(err.to_string().contains("record the graph again"), "{err}");
                    assert_eq!(out.borrow().to_vec(), vec![-1; 64]);
                } else {
                    // Running the closure again writes the new container.
                    launched.unwrap();
                    let want: Vec<i64> = (0..64).map(|i| i * 2 + 3).collect();
                    assert_eq!(out.borrow().to_vec(), want);
                }
            }

            #[test]
            fn a_container_read_and_written_then_replaced_or_dropped_is_refused() {
                if !available(B) {
                    return;
                }
                for replace in [true, false] {
                    // `y` is written by the first call and read by the second: two operands
                    // of one container.
                    let x = Vector::from_fn(100, |i| i as i64);
                    let y = RefCell::new(Some(Vector::zeroed(100)));
                    let mut out = Vector::zeroed(100);
                    let runs = Cell::new(0);
                    let g = Graph::record(|| {
                        runs.set(runs.get() + 1);
                        let mut y = y.borrow_mut();
                        let y = y
                            .as_mut()
                            .ok_or_else(|| Error::Recording("the test dropped y".into()))?;
                        Map::new(g_step)
                            .uniforms((2,))
                            .backend(B)
                            .run(&x, &mut *y)?;
                        Map::new(g_id).backend(B).run(&*y, &mut out)
                    })
                    .unwrap();
                    g.launch().unwrap();
                    if replace {
                        *y.borrow_mut() = Some(Vector::filled(100, -1));
                    } else {
                        *y.borrow_mut() = None;
                    }
                    let launched = g.launch();
                    let want: Vec<i64> = (0..100).map(|i| i * 2 + 3).collect();
                    if g.device_graph() {
                        // The graph refuses before anything runs (not counting `y` as gone
                        // while its two operands hold its state): the new container is
                        // untouched.
                        let err = launched.unwrap_err();
                        assert!(matches!(err, Error::Recording(_)), "{B}: {err}");
                        assert!(err.to_string().contains("record the graph again"), "{err}");
                        assert_eq!(runs.get(), 1, "{B}");
                        if replace {
                            assert_eq!(y.borrow().as_ref().unwrap().to_vec(), vec![-1; 100]);
                        }
                    } else if replace {
                        // Running the closure again writes the new container.
                        launched.unwrap();
                        assert_eq!(y.borrow().as_ref().unwrap().to_vec(), want, "{B}");
                    } else {
                        let err = launched.unwrap_err();
                        assert!(err.to_string().contains("the test dropped y"), "{B}: {err}");
                    }
                    drop(g);
                    assert_eq!(out.to_vec(), want, "{B}");
                }
            }

            #[test]
            fn host_reads_of_written_containers_between_launches_are_current() {
                if !available(B) {
                    return;
                }
                for &n in GRAPH_SIZES {
                    let y = RefCell::new(Vector::from_fn(n, |i| i as i64));
                    let mut t = Vector::zeroed(n);
                    let runs = Cell::new(0);
                    let g = Graph::record(|| {
                        runs.set(runs.get() + 1);
                        let mut y = y.borrow_mut();
                        Map::new(g_step)
                            .uniforms((1,))
                            .backend(B)
                            .run(&*y, &mut t)?;
                        Map::new(g_id).backend(B).run(&t, &mut *y)
                    })
                    .unwrap();
                    // Each launch maps y to y + 3. A device graph runs the closure only on
                    // a launch after the host wrote y or took a view of it (a copy with
                    // `to_vec` is none); the other backends run it on every launch.
                    let (mut expected, device) = (1, g.device_graph());
                    let launch = |eager: bool, expected: &mut usize| {
                        g.launch().unwrap();
                        *expected += usize::from(eager || !device);
                        assert_eq!(runs.get(), *expected, "{B}: n={n}");
                        // The recording's own run is no launch; without a device graph
                        // no launch falls back.
                        let fell_back = if device { *expected - 1 } else { 0 };
                        assert_eq!(g.eager_launches(), fell_back as u64, "{B}: n={n}");
                    };
                    let want = |k: i64| (0..n as i64).map(|i| i + 3 * k).collect::<Vec<_>>();
                    assert_eq!(y.borrow().to_vec(), want(1), "{B}: n={n}");
                    let mut eager = false;
                    for k in 2..8 {
                        launch(eager, &mut expected);
                        // A host read right after a replay downloads (the replay locked the
                        // container's host access as an eager call does).
                        // An empty graph launches no kernel: nothing it writes can be viewed.
                        if k % 2 == 0 {
                            assert_eq!(y.borrow().as_slice(), &want(k)[..], "{B}: n={n}");
                            eager = n > 0;
                        } else if n > 0 {
                            assert_eq!(y.borrow()[n - 1], want(k)[n - 1], "{B}: n={n}");
                            eager = true;
                        } else {
                            eager = false;
                        }
                        launch(eager, &mut expected);
                        launch(false, &mut expected);
                        launch(false, &mut expected);
                        assert_eq!(y.borrow().to_vec(), want(k + 3), "{B}: n={n}");
                        launch(false, &mut expected);
                        assert_eq!(y.borrow().as_slice(), &want(k + 4)[..], "{B}: n={n}");
                        // Undo the extra launches on the host (a host write between launches:
                        // the next launch uploads it).
                        let mut yb = y.borrow_mut();
                        yb.as_mut_slice().iter_mut().for_each(|v| *v -= 12);
                        eager = n > 0;
                    }
                }
            }

            #[test]
            fn a_host_view_alive_across_a_launch_is_never_aliased() {
                if !available(B) {
                    return;
                }
                let n = 5000;
                let y = RefCell::new(Vector::from_fn(n, |i| i as i64));
                let mut t = Vector::zeroed(n);
                let g = Graph::record(|| {
                    // The closure takes its borrow as a user would who wants an error, not
                    // a panic, when the host still holds a view.
                    let mut y = y
                        .try_borrow_mut()
                        .map_err(|_| Error::Recording("y is borrowed".into()))?;
                    Map::new(g_step)
                        .uniforms((1,))
                        .backend(B)
                        .run(&*y, &mut t)?;
                    Map::new(g_id).backend(B).run(&t, &mut *y)
                })
                .unwrap();
                g.launch().unwrap();
                for _ in 0..3 {
                    let view = y.borrow();
                    let first = view.as_slice();
                    let before = first.to_vec();
                    // A replay would make the viewed elements stale, and the read below
                    // would copy the graph's result back under `first`: the launch takes the
                    // closure's borrow instead, which the view refuses.
                    let err = g.launch().unwrap_err();
                    assert!(err.to_string().contains("y is borrowed"), "{B}: {err}");
                    assert_eq!(view[n - 1], before[n - 1], "{B}");
                    assert_eq!(first, &before[..], "{B}");
                    drop(view);
                }
                g.launch().unwrap();
                drop(g);
                let want: Vec<i64> = (0..n as i64).map(|i| i + 9).collect();
                assert_eq!(y.borrow().to_vec(), want, "{B}");
            }

            #[test]
            fn a_mutable_host_view_alive_across_a_launch_is_never_aliased() {
                if !available(B) {
                    return;
                }
                let n = 5000;
                let y = RefCell::new(Vector::from_fn(n, |i| i as i64));
                let mut t = Vector::zeroed(n);
                let g = Graph::record(|| {
                    let mut y = y
                        .try_borrow_mut()
                        .map_err(|_| Error::Recording("y is borrowed".into()))?;
                    Map::new(g_step)
                        .uniforms((1,))
                        .backend(B)
                        .run(&*y, &mut t)?;
                    Map::new(g_id).backend(B).run(&t, &mut *y)
                })
                .unwrap();
                g.launch().unwrap();
                for _ in 0..3 {
                    let mut held = y.borrow_mut();
                    // A `&mut [T]` outlives the `&mut` borrow that made it: a replay would
                    // make `s[1]` stale and the next host read would copy the graph's
                    // result back over `s[0]`.
                    let s = held.as_mut_slice();
                    let before = s.to_vec();
                    let err = g.launch().unwrap_err();
                    assert!(err.to_string().contains("y is borrowed"), "{B}: {err}");
                    s[0] = -1;
                    assert_eq!(s[1], before[1], "{B}");
                    assert_eq!(&s[1..], &before[1..], "{B}");
                    drop(held);
                    assert_eq!(y.borrow()[0], -1, "{B}");
                    y.borrow_mut().as_mut_slice()[0] = before[0];
                }
                g.launch().unwrap();
                drop(g);
                let want: Vec<i64> = (0..n as i64).map(|i| i + 9).collect();
                assert_eq!(y.borrow().to_vec(), want, "{B}");
            }

            #[test]
            fn checked_calls_and_closure_temporaries_run_the_closure_again() {
                if !available(B) {
                    return;
                }
                let x = Vector::from_fn(100, |i| i as i64);
                let mut out = Vector::zeroed(100);
                let want = |k: i64| (0..100).map(|i| i * k + 3).collect::<Vec<_>>();
                let runs = Cell::new(0);
                {
                    // A checked call's fault record is read by the host after its kernel.
                    let g = Graph::record(|| {
                        runs.set(runs.get() + 1);
                        Map::new(g_step)
                            .uniforms((3,))
                            .checked(true)
                            .backend(B)
                            .run(&x, &mut out)
                    })
                    .unwrap();
                    assert!(!g.device_graph(), "{B}");
                    g.launch().unwrap();
                }
                assert_eq!(runs.get(), 2);
                assert_eq!(out.to_vec(), want(3));
                {
                    // A container made inside the closure is a new one on every run.
                    let g = Graph::record(|| {
                        runs.set(runs.get() + 1);
                        let t = Vector::from_fn(100, |i| i as i64 + 1);
                        Map::new(g_step).uniforms((4,)).backend(B).run(&t, &mut out)
                    })
                    .unwrap();
                    assert!(!g.device_graph(), "{B}");
                    g.launch().unwrap();
                }
                assert_eq!(runs.get(), 4);
                assert_eq!(
                    out.to_vec(),
                    (0..100).map(|i| (i + 1) * 4 + 3).collect::<Vec<_>>()
                );
            }

            #[test]
            fn calls_on_threads_of_the_closure_run_on_every_launch() {
                if !available(B) {
                    return;
                }
                let n = 1009;
                let x = Vector::from_fn(n, |i| i as i64);
                let mut a = Vector::zeroed(n);
                let mut c = Vector::from_fn(n, |i| i as i64);
                let mut t = Vector::zeroed(n);
                let runs = Cell::new(0);
                {
                    let g = Graph::record(|| {
                        runs.set(runs.get() + 1);
                        // On CUDA this call alone would make a device graph.
                        Map::new(g_step).uniforms((2,)).backend(B).run(&x, &mut a)?;
                        let (c, t) = (&mut c, &mut t);
                        std::thread::scope(|s| {
                            s.spawn(|| -> Result<()> {
                                Map::new(g_step).uniforms((1,)).backend(B).run(&*c, t)?;
                                Map::new(g_id).backend(B).run(&*t, c)
                            })
                            .join()
                            .map_err(|_| Error::Recording("the thread panicked".into()))?
                        })
                    })
                    .unwrap();
                    // The thread's calls would be lost on a replay of the device graph.
                    assert!(!g.device_graph(), "{B}");
                    for _ in 0..3 {
                        g.launch().unwrap();
                    }
                }
                assert_eq!(runs.get(), 4, "{B}");
                let want: Vec<i64> = (0..n as i64).map(|i| i + 12).collect();
                assert_eq!(c.to_vec(), want, "{B}");
                let want: Vec<i64> = (0..n as i64).map(|i| 2 * i + 3).collect();
                assert_eq!(a.to_vec(), want, "{B}");
            }

            proptest! {
                #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]
                #[test]
                fn random_programs_replay_like_eager_calls(
                    ops in proptest::collection::vec(op_strategy(), 1..8),
                    n in prop_oneof![Just(0usize), Just(1), Just(2), 3usize..300, Just(4099)],
                    launches in 1usize..5,
                ) {
                    if !available(B) {
                        return Ok(());
                    }
                    replay_against_eager(B, n, &ops, launches);
                }
            }
        }
    };
}

graph_suite!(cpu, Backend::Cpu);
graph_suite!(rayon, Backend::Rayon);
graph_suite!(opencl, Backend::OpenCl);
graph_suite!(cuda, Backend::Cuda);
