//! OpenCL-specific tests: lazy device containers (transfer counts), device choice and
//! compile errors, and a model-based test comparing random sequences of skeleton calls,
//! views, host reads and host writes on OpenCL with the same sequence on `cpu`.
//! Without the `opencl` feature or a device, every test prints `skipped: ...` and passes.

use proptest::prelude::*;
use skel::debug::{transfers, Transfers};
use skel::prelude::*;

#[userfn]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

#[userfn]
fn sub(a: i64, b: i64) -> i64 {
    a - b
}

#[userfn]
fn mul(a: i64, b: i64) -> i64 {
    a * b
}

#[userfn]
fn neg(a: i64) -> i64 {
    -a
}

#[userfn]
fn sum3(w: Window<i64>) -> i64 {
    w[-1] + 2 * w[0] + w[1]
}

fn opencl() -> bool {
    match Backend::OpenCl.check() {
        Ok(()) => true,
        Err(e) => {
            println!("skipped: no opencl device ({e})");
            false
        }
    }
}

const B: Backend = Backend::OpenCl;

#[test]
fn chain_uploads_inputs_once_and_downloads_only_the_result() {
    if !opencl() {
        return;
    }
    let n = 10_000usize;
    let bytes = (n * 8) as u64;
    let a = Vector::from_fn(n, |i| i as i64);
    let b = Vector::from_fn(n, |i| 3 * i as i64);
    let mut c = Vector::zeroed(n);
    let mut d = Vector::zeroed(n);
    Map::new(add).backend(B).run(&a, &b, &mut c).unwrap();
    Map::new(sub).backend(B).run(&c, &b, &mut d).unwrap();
    let got = d.to_vec();
    assert!(got.iter().enumerate().all(|(i, &x)| x == i as i64));
    assert_eq!(transfers(&a), Transfers { up: bytes, down: 0 });
    assert_eq!(transfers(&b), Transfers { up: bytes, down: 0 });
    assert_eq!(transfers(&c), Transfers { up: 0, down: 0 });
    assert_eq!(transfers(&d), Transfers { up: 0, down: bytes });
    // Reading again copies nothing; a second call on the same inputs uploads nothing.
    let _ = d.to_vec();
    Map::new(add).backend(B).run(&a, &b, &mut c).unwrap();
    assert_eq!(transfers(&a).up, bytes);
    assert_eq!(transfers(&b).up, bytes);
    assert_eq!(transfers(&d).down, bytes);
}

#[test]
fn host_writes_invalidate_and_only_stale_ranges_move() {
    if !opencl() {
        return;
    }
    let n = 1000usize;
    let mut a = Vector::from_fn(n, |i| i as i64);
    let mut out = Vector::zeroed(n);
    Map::new(neg).backend(B).run(&a, &mut out).unwrap();
    assert_eq!(transfers(&a).up, 8000);
    // One host write invalidates that element on the device: only it is uploaded again.
    a[10] = 5;
    Map::new(neg).backend(B).run(&a, &mut out).unwrap();
    assert_eq!(transfers(&a).up, 8008);
    assert_eq!(out[10], -5);
    // as_mut_slice invalidates the whole device copy.
    a.as_mut_slice()[0] = 7;
    Map::new(neg).backend(B).run(&a, &mut out).unwrap();
    assert_eq!(transfers(&a).up, 16008);
    assert_eq!(out.to_vec()[0], -7);
    // A view writes and marks stale only its range; the rest of `out` stays on the host.
    let mut v = Vector::from_fn(n, |i| i as i64);
    let _ = v.to_vec();
    Map::new(neg)
        .backend(B)
        .run(&a.view(0..100), &mut v.view_mut(200..300))
        .unwrap();
    assert_eq!(v.view(0..200).to_vec(), (0..200).collect::<Vec<i64>>());
    assert_eq!(transfers(&v).down, 0);
    assert_eq!(v[250], -50);
    assert_eq!(v.as_slice()[200], -7);
    assert_eq!(transfers(&v).down, 800);
}

#[test]
fn results_stay_on_the_device_across_skeletons() {
    if !opencl() {
        return;
    }
    let n = 5000usize;
    let a = Vector::from_fn(n, |i| (i % 13) as i64);
    let mut s = Vector::zeroed(n);
    let mut t = Vector::zeroed(n);
    Scan::new(add).backend(B).run(&a, &mut s).unwrap();
    MapOverlap::new(sum3, 1).backend(B).run(&s, &mut t).unwrap();
    let r = Reduce::new(add).backend(B).run(&t).unwrap();
    let dot = MapReduce::new(mul, add).backend(B).run(&s, &t).unwrap();
    assert_eq!(transfers(&s), Transfers::default());
    assert_eq!(transfers(&t), Transfers::default());
    let (s, t) = (s.to_vec(), t.to_vec());
    assert_eq!(r, t.iter().sum::<i64>());
    assert_eq!(dot, s.iter().zip(&t).map(|(x, y)| x * y).sum::<i64>());
}

/// Run in a child process by `bad_device_choice_is_reported`, with `SKEL_OPENCL_DEVICE`
/// naming no device: the backend must be unavailable, saying why.
#[test]
#[ignore = "run by bad_device_choice_is_reported in a child process"]
fn child_with_bad_device_choice() {
    if std::env::var_os("SKEL_TEST_CHILD").is_none() {
        return;
    }
    let err = Backend::OpenCl.check().unwrap_err().to_string();
    assert!(err.contains("matches no OpenCL device"), "{err}");
    assert!(err.contains("devices: 0: "), "{err}");
    assert!(!Backend::available().contains(&Backend::OpenCl));
}

#[test]
fn bad_device_choice_is_reported() {
    if !opencl() {
        return;
    }
    // The device is chosen once per process: ask a fresh one (this test binary).
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_with_bad_device_choice", "--ignored"])
        .env("SKEL_TEST_CHILD", "1")
        .env("SKEL_OPENCL_DEVICE", "no-such-device-zz")
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn failed_device_choice_by_index() {
    if !opencl() {
        return;
    }
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_with_bad_device_choice", "--ignored"])
        .env("SKEL_TEST_CHILD", "1")
        .env("SKEL_OPENCL_DEVICE", "4096")
        .status()
        .unwrap();
    assert!(status.success());
}

// ---- model-based: OpenCL against cpu -------------------------------------------------

/// Below one work-group on most devices.
const LEN: usize = 48;
/// Up to several work-groups, reduce tiles and scan blocks.
const LONG: usize = 3000;
const CONTAINERS: usize = 3;

#[derive(Clone, Debug)]
enum Op {
    Map {
        a: usize,
        b: usize,
        dst: usize,
        x: usize,
        y: usize,
        d: usize,
        len: usize,
    },
    Neg {
        src: usize,
        dst: usize,
    },
    Scan {
        src: usize,
        dst: usize,
        exclusive: bool,
    },
    Stencil {
        src: usize,
        dst: usize,
        edge: u8,
    },
    Reduce {
        src: usize,
        x: usize,
        len: usize,
    },
    MapReduce {
        a: usize,
        b: usize,
    },
    Read {
        c: usize,
        i: usize,
    },
    ReadRange {
        c: usize,
        x: usize,
        len: usize,
    },
    Write {
        c: usize,
        i: usize,
        value: i64,
    },
    Fill {
        c: usize,
        value: i64,
    },
}

/// One operation on containers of `n > 0` elements.
fn op(n: usize) -> impl Strategy<Value = Op> {
    let c = 0..CONTAINERS;
    prop_oneof![
        (c.clone(), c.clone(), c.clone(), 0..n, 0..n, 0..n, 0..n).prop_map(
            move |(a, b, dst, x, y, d, len)| {
                let len = len.min(n - x).min(n - y).min(n - d);
                Op::Map {
                    a,
                    b,
                    dst,
                    x,
                    y,
                    d,
                    len,
                }
            }
        ),
        (c.clone(), c.clone()).prop_map(move |(src, dst)| Op::Neg { src, dst }),
        (c.clone(), c.clone(), any::<bool>()).prop_map(move |(src, dst, exclusive)| Op::Scan {
            src,
            dst,
            exclusive
        }),
        (c.clone(), c.clone(), 0..4u8).prop_map(move |(src, dst, edge)| Op::Stencil {
            src,
            dst,
            edge
        }),
        (c.clone(), 0..n, 0..=n).prop_map(move |(src, x, len)| Op::Reduce {
            src,
            x,
            len: len.min(n - x)
        }),
        (c.clone(), c.clone()).prop_map(move |(a, b)| Op::MapReduce { a, b }),
        (c.clone(), 0..n).prop_map(move |(c, i)| Op::Read { c, i }),
        (c.clone(), 0..n, 0..=n).prop_map(move |(c, x, len)| Op::ReadRange {
            c,
            x,
            len: len.min(n - x)
        }),
        (c.clone(), 0..n, -50i64..50).prop_map(move |(c, i, value)| Op::Write { c, i, value }),
        (c, -50i64..50).prop_map(move |(c, value)| Op::Fill { c, value }),
    ]
}

/// Runs `ops` on `backend`; returns every observation (reads, reductions) and the final
/// contents. Aliasing operands (src == dst) go through a host copy, as Rust requires.
fn run(backend: Backend, len: usize, ops: &[Op]) -> (Vec<i64>, Vec<Vec<i64>>) {
    let mut cs: Vec<Vector<i64>> = (0..CONTAINERS)
        .map(|k| Vector::from_fn(len, |i| ((i * 7 + k * 3) % 11) as i64 - 5))
        .collect();
    let mut seen = Vec::new();
    for op in ops {
        match *op {
            Op::Map {
                a,
                b,
                dst,
                x,
                y,
                d,
                len,
            } => {
                let mut out = std::mem::replace(&mut cs[dst], Vector::zeroed(0));
                let alias = if a == dst || b == dst {
                    Vector::from(out.to_vec())
                } else {
                    Vector::zeroed(0)
                };
                let ra = if a == dst { &alias } else { &cs[a] };
                let rb = if b == dst { &alias } else { &cs[b] };
                Map::new(add)
                    .backend(backend)
                    .run(
                        &ra.view(x..x + len),
                        &rb.view(y..y + len),
                        &mut out.view_mut(d..d + len),
                    )
                    .unwrap();
                cs[dst] = out;
            }
            Op::Neg { src, dst } => {
                let mut out = std::mem::replace(&mut cs[dst], Vector::zeroed(0));
                let s = if src == dst {
                    &Vector::from(out.to_vec())
                } else {
                    &cs[src]
                };
                Map::new(neg).backend(backend).run(s, &mut out).unwrap();
                cs[dst] = out;
            }
            Op::Scan {
                src,
                dst,
                exclusive,
            } => {
                let mut out = std::mem::replace(&mut cs[dst], Vector::zeroed(0));
                let s = if src == dst {
                    &Vector::from(out.to_vec())
                } else {
                    &cs[src]
                };
                let mode = if exclusive {
                    ScanMode::Exclusive
                } else {
                    ScanMode::Inclusive
                };
                Scan::new(add)
                    .mode(mode)
                    .start(3)
                    .backend(backend)
                    .run(s, &mut out)
                    .unwrap();
                cs[dst] = out;
            }
            Op::Stencil { src, dst, edge } => {
                let mut out = std::mem::replace(&mut cs[dst], Vector::zeroed(0));
                let s = if src == dst {
                    &Vector::from(out.to_vec())
                } else {
                    &cs[src]
                };
                let edge = [Edge::Duplicate, Edge::Cyclic, Edge::Pad, Edge::None][edge as usize];
                MapOverlap::new(sum3, 1)
                    .edge(edge)
                    .pad(1)
                    .backend(backend)
                    .run(s, &mut out)
                    .unwrap();
                cs[dst] = out;
            }
            Op::Reduce { src, x, len } => {
                seen.push(
                    Reduce::new(add)
                        .start(1)
                        .backend(backend)
                        .run(&cs[src].view(x..x + len))
                        .unwrap(),
                );
            }
            Op::MapReduce { a, b } => {
                seen.push(
                    MapReduce::new(mul, add)
                        .backend(backend)
                        .run(&cs[a], &cs[b])
                        .unwrap(),
                );
            }
            Op::Read { c, i } => seen.push(cs[c][i]),
            Op::ReadRange { c, x, len } => seen.extend(cs[c].view(x..x + len).to_vec()),
            Op::Write { c, i, value } => cs[c][i] = value,
            Op::Fill { c, value } => cs[c].as_mut_slice().fill(value),
        }
    }
    (seen, cs.iter().map(Vector::to_vec).collect())
}

/// `(len, ops)`: containers of `len` elements and operations on them.
fn case(lens: std::ops::Range<usize>, ops: usize) -> impl Strategy<Value = (usize, Vec<Op>)> {
    lens.prop_flat_map(move |len| (Just(len), proptest::collection::vec(op(len), 1..ops)))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn random_sequences_match_cpu((len, ops) in case(LEN..LEN + 1, 30)) {
        if Backend::OpenCl.check().is_err() {
            return Ok(());
        }
        prop_assert_eq!(run(Backend::OpenCl, len, &ops), run(Backend::Cpu, len, &ops));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]
    #[test]
    fn random_sequences_over_several_work_groups_match_cpu((len, ops) in case(1..LONG, 20)) {
        if Backend::OpenCl.check().is_err() {
            return Ok(());
        }
        prop_assert_eq!(run(Backend::OpenCl, len, &ops), run(Backend::Cpu, len, &ops));
    }
}

/// Asserts that the row and column reductions of the `rows x cols` matrix `m` by `f` on
/// OpenCL equal those on `cpu`.
macro_rules! assert_rows_and_cols_match_cpu {
    ($f:expr, $m:expr, $rows:expr, $cols:expr) => {
        for by_rows in [true, false] {
            let per = |b| {
                let mut out = Vector::zeroed(if by_rows { $rows } else { $cols });
                let r = Reduce::new($f).backend(b);
                if by_rows {
                    r.run_rows(&$m, &mut out).unwrap();
                } else {
                    r.run_cols(&$m, &mut out).unwrap();
                }
                out.to_vec()
            };
            let (rows, cols) = ($rows, $cols);
            assert_eq!(per(B), per(Backend::Cpu), "{rows}x{cols} rows={by_rows}");
        }
    };
}

// ---- order: associative, not commutative ----------------------------------------------

#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
struct Affine {
    m: i64,
    c: i64,
}

/// x -> a(x) then b: associative, not commutative.
#[userfn]
fn compose(a: Affine, b: Affine) -> Affine {
    Affine {
        m: a.m * b.m,
        c: a.c * b.m + b.c,
    }
}

#[userfn]
fn to_affine(i: i64) -> Affine {
    Affine {
        m: if i % 3 == 0 { -1 } else { 1 },
        c: i % 11,
    }
}

#[test]
fn order_is_kept_across_work_groups_and_tiles() {
    if !opencl() {
        return;
    }
    let id = Affine { m: 1, c: 0 };
    for n in [
        1usize, 2, 255, 256, 257, 511, 512, 513, 2047, 2048, 2049, 4095, 4096, 4097, 4099, 70_001,
        600_003,
    ] {
        let ints = Vector::from_fn(n, |i| (i as i64 * 7919) % 1009);
        let fs = Vector::from_fn(n, |i| Affine {
            m: if (i * 31) % 5 == 0 { -1 } else { 1 },
            c: (i % 13) as i64 - 6,
        });
        let reduce = |b| Reduce::new(compose).start(id).backend(b).run(&fs).unwrap();
        assert_eq!(reduce(B), reduce(Backend::Cpu), "reduce n={n}");
        let map_reduce = |b| {
            MapReduce::new(to_affine, compose)
                .start(id)
                .backend(b)
                .run(&ints)
                .unwrap()
        };
        assert_eq!(map_reduce(B), map_reduce(Backend::Cpu), "map_reduce n={n}");
        for mode in [ScanMode::Inclusive, ScanMode::Exclusive] {
            let scan = |b| {
                let mut out = Vector::zeroed(n);
                Scan::new(compose)
                    .mode(mode)
                    .start(Affine { m: -1, c: 2 })
                    .backend(b)
                    .run(&fs, &mut out)
                    .unwrap();
                out.to_vec()
            };
            assert_eq!(scan(B), scan(Backend::Cpu), "scan {mode:?} n={n}");
        }
    }
    for (rows, cols) in [
        (3, 5000),
        (5000, 3),
        (17, 2049),
        (1, 4097),
        (4097, 1),
        (1, 1),
    ] {
        let m = Matrix::from_fn(rows, cols, |r, c| Affine {
            m: if (r + 2 * c) % 7 == 0 { -1 } else { 1 },
            c: ((r * 3 + c) % 9) as i64 - 4,
        });
        assert_rows_and_cols_match_cpu!(compose, m, rows, cols);
    }
}

// ---- 4-byte values: 16-byte loads and stores, at every alignment ----------------------

/// x -> m*x + c (mod 2^15), packed as `m << 16 | c`: associative, not commutative, and 4
/// bytes wide, so Reduce and Scan take their 16-byte load (and store) paths where aligned.
#[userfn]
fn compose15(a: u32, b: u32) -> u32 {
    let m = ((a >> 16) * (b >> 16)) % 32768;
    let c = ((a & 65535) * (b >> 16) + (b & 65535)) % 32768;
    (m << 16) | c
}

fn packed15(i: usize) -> u32 {
    let m = [1u32, 3, 32767, 5, 1, 1, 7][(i * 13) % 7];
    (m << 16) | ((i * 7919) % 32768) as u32
}

#[test]
fn order_is_kept_for_four_byte_values_at_every_alignment() {
    if !opencl() {
        return;
    }
    let start = packed15(12345);
    for n in [
        1usize,
        3,
        4,
        5,
        4095,
        4096,
        4097,
        3 * 4096 + 5,
        70_001,
        600_003,
    ] {
        let all = Vector::from_fn(n + 4, packed15);
        for off in 0..4 {
            let input = all.view(off..off + n);
            let reduce = |b| {
                Reduce::new(compose15)
                    .start(start)
                    .backend(b)
                    .run(&input)
                    .unwrap()
            };
            assert_eq!(reduce(B), reduce(Backend::Cpu), "reduce n={n} off={off}");
            for mode in [ScanMode::Inclusive, ScanMode::Exclusive] {
                let scan = |b| {
                    let mut out = Vector::zeroed(n + 4);
                    let o = (off + 1) % 4;
                    Scan::new(compose15)
                        .mode(mode)
                        .start(start)
                        .backend(b)
                        .run(&input, &mut out.view_mut(o..o + n))
                        .unwrap();
                    out.to_vec()
                };
                assert_eq!(scan(B), scan(Backend::Cpu), "scan {mode:?} n={n} off={off}");
            }
        }
    }
    for (rows, cols) in [
        (1, 1),
        (1, 5000),
        (5000, 1),
        (7, 4096),
        (3, 4099),
        (4099, 3),
        (300, 16),
        (300, 17),
        (130, 32),
        (130, 33),
    ] {
        let m = Matrix::from_fn(rows, cols, |r, c| packed15(r * 31 + c));
        assert_rows_and_cols_match_cpu!(compose15, m, rows, cols);
    }
}
