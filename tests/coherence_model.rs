//! Model-based tests of the smart-container coherence protocol: random sequences of
//! skeleton calls (whole containers and views), host reads and host writes over several
//! containers, run on a backend and compared step by step with a host-only model.
//! On backends with device memory this exercises lazy copy-back, partial (view) uploads,
//! host-write invalidation and buffer reuse; on the CPU backends it checks the same
//! sequences stay correct. Every skeleton call also picks a random `.streams(k)` (k in
//! 1..=16, so on CUDA a 40-element call is cut into chunks of a few elements) and a random
//! `.download(..)` (eager, lazy or the default), which host backends accept and ignore.
//! On CUDA each call also picks a random `.devices(k)` among the device slots
//! `SKEL_CUDA_DEVICES` names (`0,0` gives two slots on one GPU), so consecutive calls split
//! the same containers differently and the copies move between the slots' buffers.
//! A sequence may also record a call as a `skel::Graph` and launch it several times (one
//! CUDA graph on CUDA), so replays are checked against the model like eager calls.
//! Backends that are not available print `skipped: ...`.

mod common;

use proptest::prelude::*;
use skel::prelude::*;

const LEN: usize = 40;
const CONTAINERS: usize = 4;

#[userfn]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

#[userfn]
fn twice_minus(a: i64, b: i64) -> i64 {
    2 * a - b
}

#[userfn]
fn sum3(w: Window<i64>) -> i64 {
    w[-1] + w[0] + w[1]
}

/// How one skeleton call is launched: over how many streams, and whether its result is
/// copied back eagerly (`Some(true)`), left on the device (`Some(false)`) or as the backend
/// decides (`None`).
#[derive(Clone, Copy, Debug)]
struct Launch {
    streams: usize,
    download: Option<bool>,
    /// `.devices(k)` on CUDA.
    devices: usize,
}

/// The device slots `SKEL_CUDA_DEVICES` names (1 when it is not set).
fn slots() -> usize {
    std::env::var("SKEL_CUDA_DEVICES")
        .map_or(1, |s| s.split(',').count())
        .max(1)
}

fn launch() -> impl Strategy<Value = Launch> {
    (
        1usize..=16,
        proptest::option::of(any::<bool>()),
        1..=slots(),
    )
        .prop_map(|(streams, download, devices)| Launch {
            streams,
            download,
            devices,
        })
}

/// `$skel` on `$backend` with the streams and download of `$launch`.
macro_rules! launched {
    ($skel:expr, $backend:expr, $launch:expr) => {{
        let l: Launch = $launch;
        let s = $skel.backend($backend).streams(l.streams);
        let s = if $backend == Backend::Cuda {
            s.devices(l.devices)
        } else {
            s
        };
        match l.download {
            Some(eager) => s.download(eager),
            None => s,
        }
    }};
}

#[derive(Clone, Debug)]
enum Op {
    /// dst[d..d+len] = f(a[x..x+len], b[y..y+len])
    Map {
        f: bool,
        a: usize,
        b: usize,
        dst: usize,
        x: usize,
        y: usize,
        d: usize,
        len: usize,
        launch: Launch,
    },
    /// dst = inclusive scan of src
    Scan {
        src: usize,
        dst: usize,
        launch: Launch,
    },
    /// dst = 3-point stencil of src with duplicated edges
    Stencil {
        src: usize,
        dst: usize,
        launch: Launch,
    },
    /// compare Reduce of src[x..x+len] with the model
    Reduce {
        src: usize,
        x: usize,
        len: usize,
        launch: Launch,
    },
    /// compare one host element with the model
    Read { c: usize, i: usize },
    /// compare the host elements c[x..x+len] (a view) with the model
    ReadView { c: usize, x: usize, len: usize },
    /// c[x..x+len] = value through a mutable view
    WriteView {
        c: usize,
        x: usize,
        len: usize,
        value: i64,
    },
    /// c[i] = value through IndexMut
    Write { c: usize, i: usize, value: i64 },
    /// overwrite c through as_mut_slice
    Fill { c: usize, value: i64 },
    /// dst[at] = Reduce of src[x..x+len], with `run_into` (the result stays where computed)
    ReduceInto {
        src: usize,
        x: usize,
        len: usize,
        dst: usize,
        at: usize,
        launch: Launch,
    },
    /// dst = add(lazy twice_minus(a, b), a): a lazy input, fused or materialised
    LazyMap {
        a: usize,
        b: usize,
        dst: usize,
        launch: Launch,
    },
    /// `Map` as above, recorded as a `skel::Graph` and launched `launches` more times
    Replay {
        f: bool,
        a: usize,
        b: usize,
        dst: usize,
        x: usize,
        y: usize,
        d: usize,
        len: usize,
        launch: Launch,
        launches: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let c = 0..CONTAINERS;
    prop_oneof![
        (
            any::<bool>(),
            c.clone(),
            c.clone(),
            c.clone(),
            0..LEN,
            0..LEN,
            0..LEN,
            0..LEN,
            launch()
        )
            .prop_map(|(f, a, b, dst, x, y, d, len, launch)| {
                let len = len.min(LEN - x).min(LEN - y).min(LEN - d);
                Op::Map {
                    f,
                    a,
                    b,
                    dst,
                    x,
                    y,
                    d,
                    len,
                    launch,
                }
            }),
        (c.clone(), c.clone(), launch()).prop_map(|(src, dst, launch)| Op::Scan {
            src,
            dst,
            launch
        }),
        (c.clone(), c.clone(), launch()).prop_map(|(src, dst, launch)| Op::Stencil {
            src,
            dst,
            launch
        }),
        (c.clone(), 0..LEN, 0..LEN, launch()).prop_map(|(src, x, len, launch)| Op::Reduce {
            src,
            x,
            len: len.min(LEN - x),
            launch
        }),
        (c.clone(), 0..LEN).prop_map(|(c, i)| Op::Read { c, i }),
        (c.clone(), 0..LEN, 0..LEN).prop_map(|(c, x, len)| Op::ReadView {
            c,
            x,
            len: len.min(LEN - x)
        }),
        (c.clone(), 0..LEN, 0..LEN, -50i64..50).prop_map(|(c, x, len, value)| {
            Op::WriteView {
                c,
                x,
                len: len.min(LEN - x),
                value,
            }
        }),
        (c.clone(), 0..LEN, -50i64..50).prop_map(|(c, i, value)| Op::Write { c, i, value }),
        (c.clone(), -5i64..5).prop_map(|(c, value)| Op::Fill { c, value }),
        (c.clone(), 0..LEN, 0..LEN, c.clone(), 0..LEN, launch()).prop_map(
            |(src, x, len, dst, at, launch)| Op::ReduceInto {
                src,
                x,
                len: len.min(LEN - x),
                dst,
                at,
                launch
            }
        ),
        (c.clone(), c.clone(), c.clone(), launch())
            .prop_map(|(a, b, dst, launch)| { Op::LazyMap { a, b, dst, launch } }),
        (
            (any::<bool>(), c.clone(), c.clone(), c),
            (0..LEN, 0..LEN, 0..LEN, 0..LEN),
            launch(),
            0usize..4
        )
            .prop_map(|((f, a, b, dst), (x, y, d, len), launch, launches)| {
                let len = len.min(LEN - x).min(LEN - y).min(LEN - d);
                Op::Replay {
                    f,
                    a,
                    b,
                    dst,
                    x,
                    y,
                    d,
                    len,
                    launch,
                    launches,
                }
            }),
    ]
}

/// The container to read as source `src` of a call writing `dst`: the container itself, or
/// a fresh copy of the model when it is the destination (one call cannot read and write
/// the same container).
fn source<'a>(
    vs: &'a [Vector<i64>],
    model: &[Vec<i64>],
    src: usize,
    dst: usize,
    fresh: &'a mut Option<Vector<i64>>,
) -> &'a Vector<i64> {
    if src == dst {
        fresh.insert(Vector::from(model[src].clone()))
    } else {
        &vs[src]
    }
}

fn run_sequence(backend: Backend, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut model: Vec<Vec<i64>> = (0..CONTAINERS)
        .map(|c| (0..LEN as i64).map(|i| i * (c as i64 + 1) % 13).collect())
        .collect();
    let mut vs: Vec<Vector<i64>> = model.iter().cloned().map(Vector::from).collect();
    for (step, op) in ops.iter().enumerate() {
        match *op {
            Op::Map {
                f,
                a,
                b,
                dst,
                x,
                y,
                d,
                len,
                launch,
            } => {
                let mut out = std::mem::replace(&mut vs[dst], Vector::zeroed(0));
                let (mut fa, mut fb) = (None, None);
                let va = source(&vs, &model, a, dst, &mut fa).view(x..x + len);
                let vb = source(&vs, &model, b, dst, &mut fb).view(y..y + len);
                let mut vo = out.view_mut(d..d + len);
                let result = if f {
                    launched!(Map::new(add), backend, launch).run(&va, &vb, &mut vo)
                } else {
                    launched!(Map::new(twice_minus), backend, launch).run(&va, &vb, &mut vo)
                };
                vs[dst] = out;
                prop_assert!(result.is_ok(), "step {step}: {result:?}");
                let (ma, mb) = (model[a].clone(), model[b].clone());
                for k in 0..len {
                    model[dst][d + k] = if f {
                        ma[x + k] + mb[y + k]
                    } else {
                        2 * ma[x + k] - mb[y + k]
                    };
                }
            }
            Op::Replay {
                f,
                a,
                b,
                dst,
                x,
                y,
                d,
                len,
                launch,
                launches,
            } => {
                let mut out = std::mem::replace(&mut vs[dst], Vector::zeroed(0));
                let (mut fa, mut fb) = (None, None);
                let va = source(&vs, &model, a, dst, &mut fa).view(x..x + len);
                let vb = source(&vs, &model, b, dst, &mut fb).view(y..y + len);
                let mut vo = out.view_mut(d..d + len);
                let result = skel::Graph::record(|| {
                    if f {
                        launched!(Map::new(add), backend, launch).run(&va, &vb, &mut vo)
                    } else {
                        launched!(Map::new(twice_minus), backend, launch).run(&va, &vb, &mut vo)
                    }
                })
                .and_then(|g| (0..launches).try_for_each(|_| g.launch()));
                vs[dst] = out;
                prop_assert!(result.is_ok(), "step {step}: {result:?}");
                let (ma, mb) = (model[a].clone(), model[b].clone());
                for k in 0..len {
                    model[dst][d + k] = if f {
                        ma[x + k] + mb[y + k]
                    } else {
                        2 * ma[x + k] - mb[y + k]
                    };
                }
            }
            Op::Scan { src, dst, launch } | Op::Stencil { src, dst, launch } => {
                let stencil = matches!(op, Op::Stencil { .. });
                let mut out = std::mem::replace(&mut vs[dst], Vector::zeroed(0));
                let mut fresh = None;
                let input = source(&vs, &model, src, dst, &mut fresh);
                let result = if stencil {
                    launched!(MapOverlap::new(sum3, 1), backend, launch).run(input, &mut out)
                } else {
                    launched!(Scan::new(add), backend, launch).run(input, &mut out)
                };
                vs[dst] = out;
                prop_assert!(result.is_ok(), "step {step}: {result:?}");
                let m = model[src].clone();
                model[dst] = if stencil {
                    (0..LEN)
                        .map(|i| m[i.saturating_sub(1)] + m[i] + m[(i + 1).min(LEN - 1)])
                        .collect()
                } else {
                    m.iter()
                        .scan(0, |acc, x| {
                            *acc += x;
                            Some(*acc)
                        })
                        .collect()
                };
            }
            Op::Reduce {
                src,
                x,
                len,
                launch,
            } => {
                let got =
                    launched!(Reduce::new(add), backend, launch).run(&vs[src].view(x..x + len));
                prop_assert_eq!(
                    got.ok(),
                    Some(model[src][x..x + len].iter().sum::<i64>()),
                    "step {}",
                    step
                );
            }
            Op::Read { c, i } => prop_assert_eq!(vs[c][i], model[c][i], "step {}", step),
            Op::ReadView { c, x, len } => prop_assert_eq!(
                vs[c].view(x..x + len).as_slice(),
                &model[c][x..x + len],
                "step {}",
                step
            ),
            Op::WriteView { c, x, len, value } => {
                vs[c].view_mut(x..x + len).as_mut_slice().fill(value);
                model[c][x..x + len].fill(value);
            }
            Op::Write { c, i, value } => {
                vs[c][i] = value;
                model[c][i] = value;
            }
            Op::Fill { c, value } => {
                vs[c].as_mut_slice().fill(value);
                model[c].fill(value);
            }
            Op::ReduceInto {
                src,
                x,
                len,
                dst,
                at,
                launch,
            } => {
                let mut out = std::mem::replace(&mut vs[dst], Vector::zeroed(0));
                let mut fresh = None;
                let input = source(&vs, &model, src, dst, &mut fresh).view(x..x + len);
                let result = launched!(Reduce::new(add), backend, launch)
                    .run_into(&input, &mut out.view_mut(at..at + 1));
                vs[dst] = out;
                prop_assert!(result.is_ok(), "step {step}: {result:?}");
                model[dst][at] = model[src][x..x + len].iter().sum::<i64>();
            }
            Op::LazyMap { a, b, dst, launch } => {
                let mut out = std::mem::replace(&mut vs[dst], Vector::zeroed(0));
                let (mut fa, mut fb) = (None, None);
                let va = source(&vs, &model, a, dst, &mut fa);
                let vb = source(&vs, &model, b, dst, &mut fb);
                let lazy = Map::new(twice_minus).lazy(va, vb);
                let result = launched!(Map::new(add), backend, launch).run(&lazy, va, &mut out);
                vs[dst] = out;
                prop_assert!(result.is_ok(), "step {step}: {result:?}");
                let (ma, mb) = (model[a].clone(), model[b].clone());
                model[dst] = (0..LEN).map(|k| 2 * ma[k] - mb[k] + ma[k]).collect();
            }
        }
    }
    for (c, (v, m)) in vs.iter().zip(&model).enumerate() {
        prop_assert_eq!(&v.to_vec(), m, "container {} at the end", c);
    }
    Ok(())
}

/// `coherence_model!(name, backend)` runs 64 sequences of up to 40 operations;
/// `coherence_model!(name, backend, cases, max_ops)` sets both (longer sequences give more
/// interleavings of chunked device calls with host reads and writes).
macro_rules! coherence_model {
    ($name:ident, $backend:expr) => {
        coherence_model!($name, $backend, 64, 40);
    };
    ($name:ident, $backend:expr, $cases:expr, $max_ops:expr) => {
        #[test]
        fn $name() {
            let backend: Backend = $backend;
            if !common::available(backend) {
                return;
            }
            let config = ProptestConfig { cases: $cases, ..ProptestConfig::default() };
            proptest!(config, |(ops in proptest::collection::vec(op(), 1..$max_ops))| {
                run_sequence(backend, &ops)?;
            });
        }
    };
}

coherence_model!(cpu_matches_the_model, Backend::Cpu);
coherence_model!(rayon_matches_the_model, Backend::Rayon);
coherence_model!(opencl_matches_the_model, Backend::OpenCl);
coherence_model!(cuda_matches_the_model, Backend::Cuda, 256, 120);

// Matrices seen through row views and 3D tensors (issue 27): the same protocol, reached
// through `view_rows` / `view_rows_mut` (ranges of a matrix's storage) and `Tensor3`.

const ROWS: usize = 8;
const COLS: usize = 5;
const T3: (usize, usize, usize) = (2, 4, 5);

#[userfn]
fn twice(a: i64) -> i64 {
    2 * a
}

#[userfn]
fn sum7(w: Window3<i64>) -> i64 {
    w[(-1, 0, 0)] + w[(1, 0, 0)] + w[(0, -1, 0)] + w[(0, 1, 0)] + w[(0, 0, -1)] + w[(0, 0, 1)]
        - 2 * w[(0, 0, 0)]
}

#[derive(Clone, Debug)]
enum GridOp {
    /// Rows `rb..rb+len` of matrix `b` = twice rows `ra..ra+len` of matrix `a` (`a != b`).
    MapRows {
        a: usize,
        ra: usize,
        b: usize,
        rb: usize,
        len: usize,
        launch: Launch,
    },
    /// Tensor `dst` = cyclic 7-point stencil of tensor `src` (`src != dst`).
    Stencil3 {
        src: usize,
        dst: usize,
        launch: Launch,
    },
    /// Tensor `dst` = twice tensor `src` (`src != dst`).
    MapT {
        src: usize,
        dst: usize,
        launch: Launch,
    },
    /// Compare rows `r..r+len` of matrix `c` (a view) with the model.
    ReadRows { c: usize, r: usize, len: usize },
    /// Rows `r..r+len` of matrix `c` = value, through a mutable view.
    WriteRows {
        c: usize,
        r: usize,
        len: usize,
        value: i64,
    },
    /// Compare element `i` (flat) of tensor `c` with the model.
    ReadT { c: usize, i: usize },
    /// Element `i` (flat) of tensor `c` = value, through `IndexMut`.
    WriteT { c: usize, i: usize, value: i64 },
}

fn grid_op() -> impl Strategy<Value = GridOp> {
    let n = T3.0 * T3.1 * T3.2;
    prop_oneof![
        (0..2usize, 0..ROWS, 0..ROWS, 0..=ROWS, launch()).prop_map(|(a, ra, rb, len, launch)| {
            let len = len.min(ROWS - ra).min(ROWS - rb);
            GridOp::MapRows {
                a,
                ra,
                b: 1 - a,
                rb,
                len,
                launch,
            }
        }),
        (0..2usize, launch()).prop_map(|(src, launch)| GridOp::Stencil3 {
            src,
            dst: 1 - src,
            launch
        }),
        (0..2usize, launch()).prop_map(|(src, launch)| GridOp::MapT {
            src,
            dst: 1 - src,
            launch
        }),
        (0..2usize, 0..ROWS, 0..=ROWS).prop_map(|(c, r, len)| GridOp::ReadRows {
            c,
            r,
            len: len.min(ROWS - r)
        }),
        (0..2usize, 0..ROWS, 0..=ROWS, -9i64..9).prop_map(|(c, r, len, value)| GridOp::WriteRows {
            c,
            r,
            len: len.min(ROWS - r),
            value
        }),
        (0..2usize, 0..n).prop_map(|(c, i)| GridOp::ReadT { c, i }),
        (0..2usize, 0..n, -9i64..9).prop_map(|(c, i, value)| GridOp::WriteT { c, i, value }),
    ]
}

fn at3(i: usize) -> (usize, usize, usize) {
    (i / (T3.1 * T3.2), i / T3.2 % T3.1, i % T3.2)
}

fn run_grid_sequence(backend: Backend, ops: &[GridOp]) -> Result<(), TestCaseError> {
    let n = T3.0 * T3.1 * T3.2;
    let mut mm: Vec<Vec<i64>> = (0..2)
        .map(|c| {
            (0..(ROWS * COLS) as i64)
                .map(|i| i * (c + 2) % 11)
                .collect()
        })
        .collect();
    let mut ms: Vec<Matrix<i64>> = mm
        .iter()
        .map(|m| Matrix::from_vec(ROWS, COLS, m.clone()).unwrap())
        .collect();
    let mut tm: Vec<Vec<i64>> = (0..2)
        .map(|c| (0..n as i64).map(|i| i * (c + 3) % 7).collect())
        .collect();
    let mut ts: Vec<Tensor3<i64>> = tm
        .iter()
        .map(|t| Tensor3::from_vec(T3.0, T3.1, T3.2, t.clone()).unwrap())
        .collect();
    for (step, op) in ops.iter().enumerate() {
        match *op {
            GridOp::MapRows {
                a,
                ra,
                b,
                rb,
                len,
                launch,
            } => {
                let (lo, hi) = ms.split_at_mut(1);
                let (src, dst) = if a == 0 {
                    (&lo[0], &mut hi[0])
                } else {
                    (&hi[0], &mut lo[0])
                };
                let result = launched!(Map::new(twice), backend, launch).run(
                    &src.view_rows(ra..ra + len),
                    &mut dst.view_rows_mut(rb..rb + len),
                );
                prop_assert!(result.is_ok(), "step {step}: {result:?}");
                for k in 0..len * COLS {
                    mm[b][rb * COLS + k] = 2 * mm[a][ra * COLS + k];
                }
            }
            GridOp::Stencil3 { src, dst, launch } | GridOp::MapT { src, dst, launch } => {
                let stencil = matches!(op, GridOp::Stencil3 { .. });
                let (lo, hi) = ts.split_at_mut(1);
                let (s, d) = if src == 0 {
                    (&lo[0], &mut hi[0])
                } else {
                    (&hi[0], &mut lo[0])
                };
                let result = if stencil {
                    launched!(
                        MapOverlap::new(sum7, (1, 1, 1)).edge(Edge::Cyclic),
                        backend,
                        launch
                    )
                    .run(s, d)
                } else {
                    launched!(Map::new(twice), backend, launch).run(s, d)
                };
                prop_assert!(result.is_ok(), "step {step}: {result:?}");
                let m = tm[src].clone();
                let get = |i: isize, j: isize, k: isize| {
                    let (i, j, k) = (
                        i.rem_euclid(T3.0 as isize) as usize,
                        j.rem_euclid(T3.1 as isize) as usize,
                        k.rem_euclid(T3.2 as isize) as usize,
                    );
                    m[(i * T3.1 + j) * T3.2 + k]
                };
                for x in 0..n {
                    let (i, j, k) = at3(x);
                    let (i, j, k) = (i as isize, j as isize, k as isize);
                    tm[dst][x] = if stencil {
                        get(i - 1, j, k)
                            + get(i + 1, j, k)
                            + get(i, j - 1, k)
                            + get(i, j + 1, k)
                            + get(i, j, k - 1)
                            + get(i, j, k + 1)
                            - 2 * get(i, j, k)
                    } else {
                        2 * m[x]
                    };
                }
            }
            GridOp::ReadRows { c, r, len } => prop_assert_eq!(
                ms[c].view_rows(r..r + len).as_slice(),
                &mm[c][r * COLS..(r + len) * COLS],
                "step {}",
                step
            ),
            GridOp::WriteRows { c, r, len, value } => {
                ms[c].view_rows_mut(r..r + len).as_mut_slice().fill(value);
                mm[c][r * COLS..(r + len) * COLS].fill(value);
            }
            GridOp::ReadT { c, i } => prop_assert_eq!(ts[c][at3(i)], tm[c][i], "step {}", step),
            GridOp::WriteT { c, i, value } => {
                ts[c][at3(i)] = value;
                tm[c][i] = value;
            }
        }
    }
    for c in 0..2 {
        prop_assert_eq!(ms[c].to_vec(), mm[c].clone(), "matrix {} at the end", c);
        prop_assert_eq!(ts[c].to_vec(), tm[c].clone(), "tensor {} at the end", c);
    }
    Ok(())
}

macro_rules! grid_coherence_model {
    ($name:ident, $backend:expr, $cases:expr, $max_ops:expr) => {
        #[test]
        fn $name() {
            let backend: Backend = $backend;
            if !common::available(backend) {
                return;
            }
            let config = ProptestConfig { cases: $cases, ..ProptestConfig::default() };
            proptest!(config, |(ops in proptest::collection::vec(grid_op(), 1..$max_ops))| {
                run_grid_sequence(backend, &ops)?;
            });
        }
    };
}

grid_coherence_model!(
    cpu_row_views_and_tensors_match_the_model,
    Backend::Cpu,
    32,
    30
);
grid_coherence_model!(
    rayon_row_views_and_tensors_match_the_model,
    Backend::Rayon,
    32,
    30
);
grid_coherence_model!(
    opencl_row_views_and_tensors_match_the_model,
    Backend::OpenCl,
    32,
    30
);
grid_coherence_model!(
    cuda_row_views_and_tensors_match_the_model,
    Backend::Cuda,
    128,
    80
);
