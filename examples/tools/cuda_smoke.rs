//! One call of every CUDA kernel form, checked against the sequential backend: small
//! enough to run under `compute-sanitizer --tool racecheck` (which makes every kernel
//! launch slow), with partial tiles everywhere. Covers every kernel: Map (scalar and
//! vectorised paths, 2D index and uniforms), MapArray, Reduce (whole, rows, cols; scalars
//! and structs), MapReduce, Scan (inclusive, exclusive, structs, multi-tile), MapOverlap
//! (1D flat, rowwise, colwise, 2D; every edge mode), Sort (keys; pairs with 4-byte values
//! carried and with 16-byte values gathered; several tiles, look-back across them).
//!
//! `cargo run --release --features cuda --example cuda_smoke`

use skel::prelude::*;

#[userfn]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

#[userfn]
fn mul(a: i64, b: i64) -> i64 {
    a * b
}

#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
struct Aff {
    m: i64,
    c: i64,
}

#[userfn]
fn compose(a: Aff, b: Aff) -> Aff {
    Aff {
        m: a.m * b.m,
        c: a.c * b.m + b.c,
    }
}

#[userfn]
fn where2d(#[index] (row, col): (usize, usize), x: i64, #[uniform] k: i64) -> i64 {
    (row * 1000 + col) as i64 + x * k
}

#[userfn]
fn gather(#[index] i: usize, table: &[i64], x: i64) -> i64 {
    table[(x + 100) as usize] + table[i % 37]
}

#[userfn]
fn halve(x: f32) -> f32 {
    x * 0.5 + 1.0
}

#[userfn]
fn addf(a: f32, b: f32) -> f32 {
    a + b
}

#[userfn]
fn sum3(w: Window<i64>) -> i64 {
    w[-1] + 2 * w[0] + 3 * w[1]
}

#[userfn]
fn cross(w: Window2<i64>) -> i64 {
    w[(-1, 0)] + 2 * w[(1, 0)] + 3 * w[(0, -1)] + 5 * w[(0, 1)] - 7 * w[(0, 0)]
}

fn main() -> Result<()> {
    let (g, c) = (Backend::Cuda, Backend::Cpu);
    g.check()?;
    let n = 100_003;
    let v = Vector::from_fn(n, |i| (i as i64 * 7919) % 201 - 100);
    let w = Vector::from_fn(n, |i| (i as i64 * 104_729) % 31 - 15);
    let (mut got, mut want) = (Vector::zeroed(n), Vector::zeroed(n));

    Map::new(add).backend(g).run(&v, &w, &mut got)?;
    Map::new(add).backend(c).run(&v, &w, &mut want)?;
    assert_eq!(got, want, "map");
    // Scalar tail and misaligned path: a view starting at an odd offset.
    Map::new(add).backend(g).run(
        &v.view(1..n),
        &w.view(0..n - 1),
        &mut got.view_mut(0..n - 1),
    )?;
    Map::new(add).backend(c).run(
        &v.view(1..n),
        &w.view(0..n - 1),
        &mut want.view_mut(0..n - 1),
    )?;
    assert_eq!(got, want, "map, unaligned views");
    // Small integers: every partial sum is exact in f32, so any grouping agrees.
    let f = Vector::from_fn(n, |i| (i % 4) as f32);
    let (mut fgot, mut fwant) = (Vector::zeroed(n), Vector::zeroed(n));
    Map::new(halve).backend(g).run(&f, &mut fgot)?;
    Map::new(halve).backend(c).run(&f, &mut fwant)?;
    assert_eq!(fgot, fwant, "map f32");
    assert_eq!(
        Reduce::new(addf).backend(g).run(&f)?,
        Reduce::new(addf).backend(c).run(&f)?
    );
    let table = Vector::from_fn(201, |i| (i as i64 * 37) % 101);
    MapArray::new(gather).backend(g).run(&table, &v, &mut got)?;
    MapArray::new(gather)
        .backend(c)
        .run(&table, &v, &mut want)?;
    assert_eq!(got, want, "map_array");
    assert_eq!(
        Reduce::new(add).backend(g).run(&v)?,
        Reduce::new(add).backend(c).run(&v)?
    );
    let mr = MapReduce::new(mul, add).start(3);
    assert_eq!(mr.backend(g).run(&v, &w)?, mr.backend(c).run(&v, &w)?);
    for mode in [ScanMode::Inclusive, ScanMode::Exclusive] {
        let s = Scan::new(add).mode(mode).start(5);
        s.backend(g).run(&v, &mut got)?;
        s.backend(c).run(&v, &mut want)?;
        assert_eq!(got, want, "scan {mode:?}");
    }
    let fs = Vector::from_fn(n, |i| Aff {
        m: if i % 3 == 0 { -1 } else { 1 },
        c: (i % 11) as i64,
    });
    let (mut fg, mut fc) = (Vector::zeroed(n), Vector::zeroed(n));
    Scan::new(compose).backend(g).run(&fs, &mut fg)?;
    Scan::new(compose).backend(c).run(&fs, &mut fc)?;
    assert_eq!(fg, fc, "scan of structs");
    let one = Aff { m: 1, c: 0 };
    assert_eq!(
        Reduce::new(compose).start(one).backend(g).run(&fs)?,
        Reduce::new(compose).start(one).backend(c).run(&fs)?
    );
    for edge in [Edge::Duplicate, Edge::Cyclic, Edge::Pad, Edge::None] {
        let o = MapOverlap::new(sum3, 1).edge(edge).pad(4);
        o.backend(g).run(&v, &mut got)?;
        o.backend(c).run(&v, &mut want)?;
        assert_eq!(got, want, "overlap 1D {edge:?}");
    }
    let (rows, cols) = (301, 259);
    let m = Matrix::from_fn(rows, cols, |r, k| ((r * 31 + k * 17) % 97) as i64 - 48);
    for edge in [Edge::Duplicate, Edge::Cyclic, Edge::Pad, Edge::None] {
        let (mut mg, mut mc) = (
            Matrix::filled(rows, cols, -1),
            Matrix::filled(rows, cols, -1),
        );
        let o = MapOverlap::new(cross, (1, 1)).edge(edge).pad(2);
        o.backend(g).run(&m, &mut mg)?;
        o.backend(c).run(&m, &mut mc)?;
        assert_eq!(mg, mc, "overlap 2D {edge:?}");
        for rowwise in [true, false] {
            let o = MapOverlap::new(sum3, 1).edge(edge).pad(2);
            let o = if rowwise { o.rowwise() } else { o.colwise() };
            o.backend(g).run(&m, &mut mg)?;
            o.backend(c).run(&m, &mut mc)?;
            assert_eq!(mg, mc, "overlap rowwise={rowwise} {edge:?}");
        }
    }
    let (mut mg, mut mc) = (Matrix::zeroed(rows, cols), Matrix::zeroed(rows, cols));
    Map::new(where2d)
        .uniforms((3,))
        .backend(g)
        .run(&m, &mut mg)?;
    Map::new(where2d)
        .uniforms((3,))
        .backend(c)
        .run(&m, &mut mc)?;
    assert_eq!(mg, mc, "map 2D index");
    let (mut rg, mut rc) = (Vector::zeroed(rows), Vector::zeroed(rows));
    Reduce::new(add).backend(g).run_rows(&m, &mut rg)?;
    Reduce::new(add).backend(c).run_rows(&m, &mut rc)?;
    assert_eq!(rg, rc, "rows");
    let (mut cg, mut cc) = (Vector::zeroed(cols), Vector::zeroed(cols));
    Reduce::new(add).backend(g).run_cols(&m, &mut cg)?;
    Reduce::new(add).backend(c).run_cols(&m, &mut cc)?;
    assert_eq!(cg, cc, "cols");
    // Sort: 3 tiles of 4096 keys and a partial one, some keys repeated (stability).
    let n = 3 * 4096 + 1001;
    let key = |i: usize| ((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as i32 % 5000;
    let (mut kg, mut kc) = (Vector::from_fn(n, key), Vector::from_fn(n, key));
    let (mut vg, mut vc) = (
        Vector::from_fn(n, |i| i as u32),
        Vector::from_fn(n, |i| i as u32),
    );
    Sort::new().backend(g).run_pairs(&mut kg, &mut vg)?;
    Sort::new().backend(c).run_pairs(&mut kc, &mut vc)?;
    assert_eq!(
        (kg.to_vec(), vg.to_vec()),
        (kc.to_vec(), vc.to_vec()),
        "sort pairs"
    );
    let fkey = |i: usize| (key(i) as f32 - 2500.0) * 0.25;
    let (mut fg, mut fc) = (Vector::from_fn(n, fkey), Vector::from_fn(n, fkey));
    let aff = |i: usize| Aff {
        m: i as i64,
        c: -(i as i64),
    };
    let (mut ag, mut ac) = (Vector::from_fn(n, aff), Vector::from_fn(n, aff));
    Sort::new().backend(g).run_pairs(&mut fg, &mut ag)?;
    Sort::new().backend(c).run_pairs(&mut fc, &mut ac)?;
    assert_eq!(
        (fg.to_vec(), ag.to_vec()),
        (fc.to_vec(), ac.to_vec()),
        "sort f32 -> struct"
    );
    Sort::new().backend(g).run(&mut kg)?;
    assert_eq!(kg.to_vec(), kc.to_vec(), "sort sorted keys");
    println!("cuda_smoke: every kernel form matches the cpu backend");
    Ok(())
}
