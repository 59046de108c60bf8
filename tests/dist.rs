//! The distributed skeletons (`skel::dist`, feature `mpi`) against the single-process `cpu`
//! backend, the oracle: every skeleton, sizes 0, 1 and sizes not divisible by the rank count,
//! every edge mode, and the errors every rank must get instead of a hang.
//!
//! A plain binary (`harness = false`): `cargo test --features mpi --test dist` runs it as a
//! world of one rank; CI also runs the built binary under `mpirun -np 2/3/4 --oversubscribe`.
//! Every rank checks the whole result (gathered), so all ranks pass or fail together.

use skel::dist::{self, DistMatrix, DistVector, World};
use skel::prelude::*;

#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
struct M2 {
    a: i64,
    b: i64,
    c: i64,
    d: i64,
}

const ID: M2 = M2 {
    a: 1,
    b: 0,
    c: 0,
    d: 1,
};

#[userfn]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

#[userfn]
fn max(a: i64, b: i64) -> i64 {
    a.max(b)
}

#[userfn]
fn mul(a: i64, b: i64) -> i64 {
    a * b
}

#[userfn]
fn sub(a: i64, b: i64) -> i64 {
    a - b
}

#[userfn]
fn addf(a: f64, b: f64) -> f64 {
    a + b
}

/// 2x2 matrix product modulo a prime: associative, not commutative, so any change of
/// order between ranks shows.
#[userfn]
fn mm(x: M2, y: M2) -> M2 {
    M2 {
        a: (x.a * y.a + x.b * y.c) % 1009,
        b: (x.a * y.b + x.b * y.d) % 1009,
        c: (x.c * y.a + x.d * y.c) % 1009,
        d: (x.c * y.b + x.d * y.d) % 1009,
    }
}

#[userfn]
fn near(w: Window<i64>) -> i64 {
    w[-1] - 3 * w[0] + 7 * w[1]
}

#[userfn]
fn far(w: Window<i64>) -> i64 {
    w[-2] + 2 * w[-1] + 3 * w[0] + 5 * w[1] + 11 * w[2]
}

#[userfn]
fn lap(w: Window2<i64>) -> i64 {
    w[(-1, 0)] + 2 * w[(1, 0)] + 3 * w[(0, -1)] + 5 * w[(0, 1)] - 7 * w[(0, 0)]
}

#[userfn]
fn tall(w: Window2<i64>) -> i64 {
    w[(-2, -1)] + 3 * w[(2, 1)] + w[(0, 0)] - w[(1, -1)]
}

#[userfn]
fn div(a: i64, b: i64) -> i64 {
    a / b
}

#[userfn]
fn lookup(table: &[i64], x: u32) -> i64 {
    table[x as usize]
}

/// Reads a matrix and a vector argument whole, at positions far from the element's own.
#[userfn]
fn weigh(m: Mat<i64>, t: &[i64], x: u32) -> i64 {
    let i = x as usize;
    m[(i % m.rows(), i % m.cols())] * 3 + t[(i * 5) % t.len()]
}

/// A pair as a 2x2 matrix, for an order-sensitive fold (`mm`) of the pairs.
#[userfn]
fn pm(a: i64, b: i64) -> M2 {
    M2 {
        a: (a % 7 + 7) % 7,
        b: (b % 5 + 5) % 5 + 1,
        c: ((a + b) % 3 + 3) % 3,
        d: 2,
    }
}

#[userfn]
fn iota(#[index] i: usize) -> i64 {
    i as i64
}

#[userfn]
fn shift(#[index] i: usize, x: i64) -> i64 {
    x * 3 + i as i64
}

#[userfn]
fn at(#[index] i: usize, table: &[i64], x: u32) -> i64 {
    table[x as usize] * 10_000 + i as i64
}

#[userfn]
fn place(#[index] (r, c): (usize, usize), x: i64) -> i64 {
    x + (r * 1000 + c) as i64
}

fn val(i: usize) -> i64 {
    ((i * 7919) % 201) as i64 - 100
}

fn m2(i: usize) -> M2 {
    M2 {
        a: (i % 7) as i64,
        b: (i % 5) as i64 + 1,
        c: (i % 3) as i64,
        d: (i % 11) as i64 + 2,
    }
}

const LENS: &[usize] = &[0, 1, 2, 3, 4, 5, 7, 11, 64, 1001];
const SHAPES: &[(usize, usize)] = &[(0, 3), (1, 1), (2, 3), (3, 4), (5, 5), (7, 3), (13, 6)];
const EDGES: &[Edge] = &[Edge::Duplicate, Edge::Cyclic, Edge::Pad, Edge::None];

type Check = Result<(), String>;
type Suite = fn(&World) -> Check;

fn same<T: PartialEq + std::fmt::Debug>(what: &str, got: T, want: T) -> Check {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: got {got:?}, want {want:?}"))
    }
}

/// Both succeeded with equal values, or both failed with the same kind of error.
fn same_outcome<T: PartialEq + std::fmt::Debug>(
    what: &str,
    got: skel::Result<T>,
    want: skel::Result<T>,
) -> Check {
    match (got, want) {
        (Ok(g), Ok(w)) => same(what, g, w),
        (Err(g), Err(w)) => same(
            &format!("{what} (error kind)"),
            std::mem::discriminant(&g),
            std::mem::discriminant(&w),
        ),
        (g, w) => Err(format!("{what}: got {g:?}, want {w:?}")),
    }
}

/// A skeleton returning a value, on distributed operands and on the cpu oracle: the same
/// value, or the same kind of error.
macro_rules! value {
    ($what:expr, $sk:expr, ($($d:expr),+), ($($l:expr),+)) => {{
        let sk = $sk;
        same_outcome(&$what, sk.run($($d),+), sk.backend(Backend::Cpu).run($($l),+))?;
    }};
}

/// A skeleton writing `$out` on distributed operands and `$want` on the cpu oracle: the same
/// outcome and, gathered, the same elements.
macro_rules! into {
    ($what:expr, $sk:expr, $run:ident, ($($d:expr),+), $out:expr, ($($l:expr),+), $want:expr) => {{
        let sk = $sk;
        let what = $what;
        same_outcome(&what, sk.$run($($d,)+ $out), sk.backend(Backend::Cpu).$run($($l,)+ $want))?;
        same(&format!("{what} values"), gathered($out)?, $want.to_vec())?;
    }};
}

trait Gather<T> {
    fn whole(&self) -> skel::Result<Vec<T>>;
}

impl<T: DeviceType> Gather<T> for DistVector<T> {
    fn whole(&self) -> skel::Result<Vec<T>> {
        Ok(self.all_gather()?.to_vec())
    }
}

impl<T: DeviceType> Gather<T> for DistMatrix<T> {
    fn whole(&self) -> skel::Result<Vec<T>> {
        Ok(self.all_gather()?.to_vec())
    }
}

impl<T: DeviceType> Gather<T> for Vector<T> {
    fn whole(&self) -> skel::Result<Vec<T>> {
        Ok(self.to_vec())
    }
}

fn gathered<T>(c: &impl Gather<T>) -> Result<Vec<T>, String> {
    c.whole().map_err(|e| e.to_string())
}

fn map_reduce_scan(world: &World) -> Check {
    for &n in LENS {
        let a = DistVector::from_fn(world, n, val);
        let b = DistVector::from_fn(world, n, |i| val(i + 3));
        let (la, lb) = (Vector::from_fn(n, val), Vector::from_fn(n, |i| val(i + 3)));
        let (mut out, mut want) = (DistVector::zeroed(world, n), Vector::zeroed(n));
        into!(
            format!("Map n={n}"),
            Map::new(sub),
            run,
            (&a, &b),
            &mut out,
            (&la, &lb),
            &mut want
        );

        value!(
            format!("Reduce add start n={n}"),
            Reduce::new(add).start(10),
            (&a),
            (&la)
        );
        value!(format!("Reduce max n={n}"), Reduce::new(max), (&a), (&la));
        value!(
            format!("Reduce max start n={n}"),
            Reduce::new(max).start(i64::MIN),
            (&a),
            (&la)
        );
        value!(
            format!("MapReduce n={n}"),
            MapReduce::new(mul, add).start(-5),
            (&a, &b),
            (&la, &lb)
        );

        // MapArray: a distributed table is gathered whole; a local one is the same everywhere.
        let idx = |i: usize| ((i * 37 + 11) % n.max(1)) as u32;
        let (di, li) = (DistVector::from_fn(world, n, idx), Vector::from_fn(n, idx));
        let (mut out, mut want) = (DistVector::zeroed(world, n), Vector::zeroed(n));
        let ma = MapArray::new(lookup);
        into!(
            format!("MapArray n={n}"),
            ma,
            run,
            (&a, &di),
            &mut out,
            (&la, &li),
            &mut want
        );
        into!(
            format!("MapArray local table n={n}"),
            ma,
            run,
            (&la, &di),
            &mut out,
            (&la, &li),
            &mut want
        );

        let (dm, lm) = (DistVector::from_fn(world, n, m2), Vector::from_fn(n, m2));
        let start = m2(5);
        value!(
            format!("Reduce mm n={n}"),
            Reduce::new(mm).start(ID),
            (&dm),
            (&lm)
        );
        value!(
            format!("Reduce mm start n={n}"),
            Reduce::new(mm).start(start),
            (&dm),
            (&lm)
        );

        for mode in [ScanMode::Inclusive, ScanMode::Exclusive] {
            let (mut out, mut want) = (DistVector::zeroed(world, n), Vector::zeroed(n));
            let scan = Scan::new(mm).mode(mode).start(start);
            into!(
                format!("Scan mm {mode:?} n={n}"),
                scan,
                run,
                (&dm),
                &mut out,
                (&lm),
                &mut want
            );
            let (mut out, mut want) = (DistVector::zeroed(world, n), Vector::zeroed(n));
            let scan = Scan::new(add).mode(mode).start(7);
            into!(
                format!("Scan add {mode:?} n={n}"),
                scan,
                run,
                (&a),
                &mut out,
                (&la),
                &mut want
            );
        }

        // Floats: the rank partials regroup the sum, so within rounding, not bit for bit.
        let x = |i: usize| 0.1 * i as f64 + 1.0 / (i + 1) as f64;
        let (f, lf) = (DistVector::from_fn(world, n, x), Vector::from_fn(n, x));
        let got = Reduce::new(addf).run(&f).map_err(|e| e.to_string())?;
        let want = Reduce::new(addf)
            .backend(Backend::Cpu)
            .run(&lf)
            .map_err(|e| e.to_string())?;
        if (got - want).abs() > 1e-9 * want.abs().max(1.0) {
            return Err(format!("Reduce f64 n={n}: got {got}, want {want}"));
        }
    }
    Ok(())
}

fn overlap_1d(world: &World) -> Check {
    for &n in LENS {
        let (a, la) = (DistVector::from_fn(world, n, val), Vector::from_fn(n, val));
        for &edge in EDGES {
            // Edge::None leaves the border as it was: start from something recognisable.
            let mut out = DistVector::from_fn(world, n, |i| 1000 + i as i64);
            let mut want = Vector::from_fn(n, |i| 1000 + i as i64);
            let near1 = MapOverlap::new(near, 1).edge(edge).pad(9);
            into!(
                format!("MapOverlap r1 {edge:?} n={n}"),
                near1,
                run,
                (&a),
                &mut out,
                (&la),
                &mut want
            );
            let far2 = MapOverlap::new(far, 2).edge(edge).pad(-4);
            into!(
                format!("MapOverlap r2 {edge:?} n={n}"),
                far2,
                run,
                (&a),
                &mut out,
                (&la),
                &mut want
            );
        }
    }
    Ok(())
}

fn matrices(world: &World) -> Check {
    for &(rows, cols) in SHAPES {
        let f = |r: usize, c: usize| val(r * cols + c);
        let m = DistMatrix::from_fn(world, rows, cols, f);
        let lm = Matrix::from_fn(rows, cols, f);
        let shape = format!("{rows}x{cols}");
        same(
            &format!("DistMatrix {shape} all_gather"),
            gathered(&m)?,
            lm.to_vec(),
        )?;
        let mut out = DistMatrix::filled(world, rows, cols, 77);
        let mut want = Matrix::filled(rows, cols, 77);
        for &edge in EDGES {
            let lap11 = MapOverlap::new(lap, (1, 1)).edge(edge).pad(3);
            into!(
                format!("MapOverlap 2D (1,1) {edge:?} {shape}"),
                lap11,
                run,
                (&m),
                &mut out,
                (&lm),
                &mut want
            );
            let tall21 = MapOverlap::new(tall, (2, 1)).edge(edge);
            into!(
                format!("MapOverlap 2D (2,1) {edge:?} {shape}"),
                tall21,
                run,
                (&m),
                &mut out,
                (&lm),
                &mut want
            );
            let cols1 = MapOverlap::new(near, 1).colwise().edge(edge);
            into!(
                format!("MapOverlap colwise {edge:?} {shape}"),
                cols1,
                run,
                (&m),
                &mut out,
                (&lm),
                &mut want
            );
            let rows1 = MapOverlap::new(near, 1).rowwise().edge(edge);
            into!(
                format!("MapOverlap rowwise {edge:?} {shape}"),
                rows1,
                run,
                (&m),
                &mut out,
                (&lm),
                &mut want
            );
        }
        into!(
            format!("Map matrix {shape}"),
            Map::new(sub),
            run,
            (&m, &m),
            &mut out,
            (&lm, &lm),
            &mut want
        );
        value!(
            format!("Reduce matrix {shape}"),
            Reduce::new(add),
            (&m),
            (&lm)
        );
        value!(
            format!("MapReduce matrix {shape}"),
            MapReduce::new(mul, add),
            (&m, &m),
            (&lm, &lm)
        );

        let (mut per_row, mut want_rows) = (DistVector::zeroed(world, rows), Vector::zeroed(rows));
        into!(
            format!("Reduce rows {shape}"),
            Reduce::new(add),
            run_rows,
            (&m),
            &mut per_row,
            (&lm),
            &mut want_rows
        );
        // A lazy Map's row fold on a host backend into a distributed output, or over
        // distributed container arguments, takes the materialised path (the one-pass row
        // fold is for local operands), whose own errors name what the user called: a local
        // matrix into a DistVector is refused as a Reduce's, a distributed table over local
        // keys as a Map's.
        let placed = Map::new(place);
        let refused = Reduce::new(add)
            .backend(Backend::Rayon)
            .run_rows(&placed.lazy(&lm), &mut per_row);
        match refused {
            Err(Error::InvalidArgument(e)) if e.contains("Reduce rows") => {}
            other => return Err(format!("lazy rows into a DistVector {shape}: {other:?}")),
        }
        let keys = Matrix::from_fn(rows, cols, |r, c| ((r * cols + c) % 5) as u32);
        let table = DistVector::from_fn(world, 5, val);
        let looked = Map::new(lookup).arrays((&table,));
        let refused = Reduce::new(add)
            .backend(Backend::Rayon)
            .run_rows(&looked.lazy(&keys), &mut want_rows);
        match refused {
            Err(Error::InvalidArgument(e)) if e.contains("Map(lookup)") => {}
            other => {
                return Err(format!(
                    "lazy rows over a distributed .arrays {shape}: {other:?}"
                ))
            }
        }
        // Columns fold across the ranks' blocks: an order-sensitive function shows the order.
        let mm_m = DistMatrix::from_fn(world, rows, cols, |r, c| m2(r * cols + c));
        let mm_l = Matrix::from_fn(rows, cols, |r, c| m2(r * cols + c));
        let (mut per_col, mut want_cols) = (Vector::filled(cols, ID), Vector::filled(cols, ID));
        into!(
            format!("Reduce cols {shape}"),
            Reduce::new(mm),
            run_cols,
            (&mm_m),
            &mut per_col,
            (&mm_l),
            &mut want_cols
        );
    }
    Ok(())
}

/// Container arguments (`.arrays`) and MapArray's array, distributed: gathered whole, once,
/// and gathered again after any rank changes its block.
fn arguments(world: &World) -> Check {
    let last = world.size() - 1;
    for &n in LENS {
        let (rows, cols) = (n.div_ceil(3), 3.min(n));
        let f = |r: usize, c: usize| val(r * 31 + c);
        let (dm, lm) = (
            DistMatrix::from_fn(world, rows, cols, f),
            Matrix::from_fn(rows, cols, f),
        );
        let (mut dt, mut lt) = (DistVector::from_fn(world, n, val), Vector::from_fn(n, val));
        let idx = |i: usize| (i * 13 + 5) as u32;
        let (di, li) = (DistVector::from_fn(world, n, idx), Vector::from_fn(n, idx));
        let (mut out, mut want) = (DistVector::zeroed(world, n), Vector::zeroed(n));
        let gathers = world.argument_gathers();
        let cpu = Map::new(weigh).backend(Backend::Cpu);
        for round in 0..2 {
            let what = format!("Map .arrays n={n} round {round}");
            same_outcome(
                &what,
                Map::new(weigh).arrays((&dm, &dt)).run(&di, &mut out),
                cpu.arrays((&lm, &lt)).run(&li, &mut want),
            )?;
            same(&what, gathered(&out)?, want.to_vec())?;
        }
        // Two containers, gathered on the first call only.
        same(
            &format!("gathers after two Maps n={n}"),
            world.argument_gathers(),
            gathers + 2,
        )?;
        same_outcome(
            &format!("MapReduce .arrays n={n}"),
            MapReduce::new(weigh, add).arrays((&dm, &dt)).run(&di),
            MapReduce::new(weigh, add)
                .backend(Backend::Cpu)
                .arrays((&lm, &lt))
                .run(&li),
        )?;
        same(
            &format!("gathers after MapReduce n={n}"),
            world.argument_gathers(),
            gathers + 2,
        )?;
        // One rank changes its block: every rank sees it in the next call.
        if world.rank() == last {
            for x in dt.local_mut().map_err(|e| e.to_string())? {
                *x += 1000;
            }
        }
        let range = dist_range(world, n, last);
        for x in &mut lt.as_mut_slice()[range] {
            *x += 1000;
        }
        let what = format!("Map .arrays after a change on rank {last} n={n}");
        same_outcome(
            &what,
            Map::new(weigh).arrays((&dm, &dt)).run(&di, &mut out),
            cpu.arrays((&lm, &lt)).run(&li, &mut want),
        )?;
        same(&what, gathered(&out)?, want.to_vec())?;
        same(
            &format!("gathers after a change n={n}"),
            world.argument_gathers(),
            gathers + 3,
        )?;
        // MapArray's array: the copy the last Map gathered serves it; a skeleton writing
        // the table invalidates the copy.
        let ma = MapArray::new(lookup);
        let small = |i: usize| (i * 7 % n) as u32;
        let (ds, ls) = (
            DistVector::from_fn(world, n, small),
            Vector::from_fn(n, small),
        );
        for round in 0..2 {
            into!(
                format!("MapArray n={n} round {round}"),
                ma,
                run,
                (&dt, &ds),
                &mut out,
                (&lt, &ls),
                &mut want
            );
        }
        same(
            &format!("gathers after two MapArrays n={n}"),
            world.argument_gathers(),
            gathers + 3,
        )?;
        let neg = DistVector::from_fn(world, n, |i| -(i as i64));
        Map::new(add)
            .run(&neg, &neg, &mut dt)
            .map_err(|e| e.to_string())?;
        let lneg = Vector::from_fn(n, |i| -(i as i64));
        Map::new(add)
            .backend(Backend::Cpu)
            .run(&lneg, &lneg, &mut lt)
            .map_err(|e| e.to_string())?;
        into!(
            format!("MapArray after a Map wrote the table n={n}"),
            ma,
            run,
            (&dt, &ds),
            &mut out,
            (&lt, &ls),
            &mut want
        );
        same(
            &format!("gathers after the table was written n={n}"),
            world.argument_gathers(),
            gathers + 4,
        )?;
    }
    Ok(())
}

/// MapPairs and MapPairsReduce: v and the output distributed, h distributed or local.
fn pairs(world: &World) -> Check {
    const LENGTHS: &[usize] = &[0, 1, 2, 5, 13];
    for &nv in LENGTHS {
        for &nh in LENGTHS {
            let shape = format!("{nv}x{nh}");
            let (dv, lv) = (
                DistVector::from_fn(world, nv, val),
                Vector::from_fn(nv, val),
            );
            let hf = |j: usize| val(j * 3 + 1);
            let (dh, lh) = (DistVector::from_fn(world, nh, hf), Vector::from_fn(nh, hf));
            let mut out = DistMatrix::filled(world, nv, nh, 5);
            let mut want = Matrix::filled(nv, nh, 5);
            let cpu = MapPairs::new(sub).backend(Backend::Cpu);
            let what = format!("MapPairs {shape}");
            same_outcome(
                &what,
                MapPairs::new(sub).run(&dv, &dh, &mut out),
                cpu.run(&lv, &lh, &mut want),
            )?;
            same(&what, gathered(&out)?, want.to_vec())?;
            let what = format!("MapPairs local h {shape}");
            same_outcome(
                &what,
                MapPairs::new(mul).run(&dv, &lh, &mut out),
                MapPairs::new(mul)
                    .backend(Backend::Cpu)
                    .run(&lv, &lh, &mut want),
            )?;
            same(&what, gathered(&out)?, want.to_vec())?;
            let mpr = MapPairsReduce::new(pm, mm);
            let (mut rows, mut want_rows) =
                (DistVector::filled(world, nv, ID), Vector::filled(nv, ID));
            into!(
                format!("MapPairsReduce rows {shape}"),
                mpr,
                run_rows,
                (&dv, &dh),
                &mut rows,
                (&lv, &lh),
                &mut want_rows
            );
            let (mut cols, mut want_cols) =
                (DistVector::filled(world, nh, ID), Vector::filled(nh, ID));
            into!(
                format!("MapPairsReduce cols {shape}"),
                mpr,
                run_cols,
                (&dv, &dh),
                &mut cols,
                (&lv, &lh),
                &mut want_cols
            );
            into!(
                format!("MapPairsReduce cols local h {shape}"),
                mpr,
                run_cols,
                (&dv, &lh),
                &mut cols,
                (&lv, &lh),
                &mut want_cols
            );
        }
    }
    Ok(())
}

/// The global indices rank `rank` holds of a distributed vector of `n`.
fn dist_range(world: &World, n: usize, rank: usize) -> std::ops::Range<usize> {
    let (base, extra) = (n / world.size(), n % world.size());
    let start = rank * base + rank.min(extra);
    start..start + base + usize::from(rank < extra)
}

fn moves(world: &World) -> Check {
    let root = world.size() - 1;
    for &n in LENS {
        let all: Vec<i64> = (0..n).map(val).collect();
        let v = DistVector::scatter(root, world, (world.rank() == root).then_some(&all[..]))
            .map_err(|e| e.to_string())?;
        same(
            &format!("scatter n={n}"),
            v.local().to_vec(),
            all[v.local_range()].to_vec(),
        )?;
        let back = v.gather(0).map_err(|e| e.to_string())?;
        same(
            &format!("gather n={n}"),
            back.map(|b| b.to_vec()),
            (world.rank() == 0).then(|| all.clone()),
        )?;
    }
    let lm = Matrix::from_fn(7, 3, |r, c| (r * 3 + c) as u16);
    let m = DistMatrix::scatter(0, world, (world.rank() == 0).then_some(&lm))
        .map_err(|e| e.to_string())?;
    same("DistMatrix scatter", (m.rows(), m.cols()), (7, 3))?;
    same(
        "DistMatrix gather",
        m.gather(root)
            .map_err(|e| e.to_string())?
            .map(|g| g.to_vec()),
        (world.rank() == root).then(|| lm.to_vec()),
    )?;
    Ok(())
}

fn kind(e: &Error) -> &'static str {
    match e {
        Error::ShapeMismatch { .. } => "ShapeMismatch",
        Error::InvalidArgument(_) => "InvalidArgument",
        Error::UserFunction { .. } => "UserFunction",
        Error::Distributed { .. } => "Distributed",
        _ => "other",
    }
}

fn expect_err<T: std::fmt::Debug>(what: &str, r: skel::Result<T>, want: &str) -> Check {
    match r {
        Err(e) if kind(&e) == want => Ok(()),
        other => Err(format!("{what}: want {want} on every rank, got {other:?}")),
    }
}

/// `#[index]` on distributed operands is the global index (1D, and (row, col) of matrices)
/// on every backend.
fn indices(world: &World) -> Check {
    for backend in Backend::available() {
        indices_on(world, backend)?;
    }
    let default =
        |what: &str, r: skel::Result<()>| -> Check { r.map_err(|e| format!("{what}: {e}")) };
    // The default backend: the same values on a host one, else the same error on every rank.
    let a = DistVector::from_fn(world, 11, val);
    let mut out = DistVector::zeroed(world, 11);
    default(
        "Map #[index] default backend",
        Map::new(shift).run(&a, &mut out),
    )?;
    default(
        "MapReduce #[index] default backend",
        MapReduce::new(shift, add).run(&a).map(|_| ()),
    )?;
    let m = DistMatrix::from_fn(world, 7, 3, |r, c| val(r * 3 + c));
    let mut mo = DistMatrix::zeroed(world, 7, 3);
    default(
        "Map 2D #[index] default backend",
        Map::new(place).run(&m, &mut mo),
    )?;
    Ok(())
}

/// [`indices`] on one backend, against the cpu oracle on whole containers.
fn indices_on(world: &World, backend: Backend) -> Check {
    // 40 000: more than one Rayon chunk, so its chunks offset the index too.
    for &n in LENS.iter().chain(&[40_000]) {
        let a = DistVector::from_fn(world, n, val);
        let la = Vector::from_fn(n, val);
        let (mut out, mut want) = (DistVector::zeroed(world, n), Vector::zeroed(n));
        into!(
            format!("Map #[index] {backend} n={n}"),
            Map::new(shift).backend(backend),
            run,
            (&a),
            &mut out,
            (&la),
            &mut want
        );
        let iota_on = Map::new(iota).backend(backend);
        same_outcome(
            &format!("Map run_index {backend} n={n}"),
            iota_on.run_index(&mut out),
            Map::new(iota).backend(Backend::Cpu).run_index(&mut want),
        )?;
        same(
            &format!("Map run_index {backend} n={n} values"),
            gathered(&out)?,
            want.to_vec(),
        )?;
        value!(
            format!("MapReduce #[index] {backend} n={n}"),
            MapReduce::new(shift, add).start(7).backend(backend),
            (&a),
            (&la)
        );
        let idx = |i: usize| ((i * 37 + 11) % n.max(1)) as u32;
        let (di, li) = (DistVector::from_fn(world, n, idx), Vector::from_fn(n, idx));
        into!(
            format!("MapArray #[index] {backend} n={n}"),
            MapArray::new(at).backend(backend),
            run,
            (&a, &di),
            &mut out,
            (&la, &li),
            &mut want
        );
    }
    for &(rows, cols) in SHAPES {
        let f = |r: usize, c: usize| val(r * cols + c);
        let (m, lm) = (
            DistMatrix::from_fn(world, rows, cols, f),
            Matrix::from_fn(rows, cols, f),
        );
        let mut out = DistMatrix::zeroed(world, rows, cols);
        let mut want = Matrix::zeroed(rows, cols);
        into!(
            format!("Map 2D #[index] {backend} {rows}x{cols}"),
            Map::new(place).backend(backend),
            run,
            (&m),
            &mut out,
            (&lm),
            &mut want
        );
        expect_err(
            &format!("MapReduce 2D #[index] {backend} {rows}x{cols}"),
            MapReduce::new(place, add).backend(backend).run(&m),
            "InvalidArgument",
        )?;
        value!(
            format!("MapReduce flat #[index] {backend} {rows}x{cols}"),
            MapReduce::new(shift, add).backend(backend),
            (&m),
            (&lm)
        );
    }
    Ok(())
}

fn errors(world: &World) -> Check {
    let (rank, size) = (world.rank(), world.size());
    let a = DistVector::from_fn(world, 10, val);
    let b = DistVector::from_fn(world, 11, val);
    let mut out = DistVector::zeroed(world, 10);
    expect_err(
        "Map of lengths 10 and 11",
        Map::new(sub).run(&a, &b, &mut out),
        "ShapeMismatch",
    )?;
    expect_err(
        "Scan of lengths 11 into 10",
        Scan::new(add).run(&b, &mut out),
        "ShapeMismatch",
    )?;
    // Ranks disagreeing on the call: one rank calls with other shapes, or another skeleton.
    let mine = if rank == 0 { &a } else { &b };
    let r = Reduce::new(add).run(mine);
    if size > 1 {
        expect_err(
            "Reduce on 10 on rank 0, on 11 elsewhere",
            r,
            "ShapeMismatch",
        )?;
        let r = if rank == 0 {
            Reduce::new(add).run(&a).map(|_| ())
        } else {
            Scan::new(add).run(&a, &mut out)
        };
        expect_err("Reduce on rank 0, Scan elsewhere", r, "ShapeMismatch")?;
        let r = DistVector::scatter(0, world, Some(&[1i64, 2][..]));
        expect_err("scatter with data on every rank", r, "InvalidArgument")?;
    }
    let local = Vector::from_fn(10, val);
    expect_err(
        "Map of a DistVector and a Vector",
        Map::new(sub).run(&a, &local, &mut out),
        "InvalidArgument",
    )?;
    expect_err(
        "MapPairs into a local matrix",
        MapPairs::new(sub).run(&a, &a, &mut Matrix::zeroed(10, 10)),
        "InvalidArgument",
    )?;
    expect_err(
        "MapPairs of a local v",
        MapPairs::new(sub).run(&local, &a, &mut DistMatrix::zeroed(world, 10, 10)),
        "InvalidArgument",
    )?;
    expect_err(
        "MapPairs into a matrix of the wrong shape",
        MapPairs::new(sub).run(&a, &a, &mut DistMatrix::zeroed(world, 10, 9)),
        "ShapeMismatch",
    )?;
    expect_err("gather to rank 99", a.gather(99), "InvalidArgument")?;
    expect_err(
        "radius beyond the length",
        MapOverlap::new(far, 2).run(
            &DistVector::filled(world, 3, 1i64),
            &mut DistVector::zeroed(world, 3),
        ),
        "InvalidArgument",
    )?;
    expect_err("init twice", dist::init(), "InvalidArgument")?;

    // A user function failing on one rank only: that rank reports it, the others name it.
    let n = 10;
    let zero_at_end = DistVector::from_fn(world, n, |i| if i == n - 1 { 0 } else { 1 + i as i64 });
    let owner = (0..size).find(|&r| {
        let b = skel::dist::DistVector::<u8>::filled(world, n, 0);
        r == rank && b.local_range().contains(&(n - 1))
    });
    let fails_here = owner.is_some();
    let want = if fails_here {
        "UserFunction"
    } else {
        "Distributed"
    };
    let ones = DistVector::filled(world, n, 100i64);
    let mut q = DistVector::zeroed(world, n);
    expect_err(
        "Map div by zero on one rank",
        Map::new(div).checked(true).run(&ones, &zero_at_end, &mut q),
        want,
    )?;
    expect_err(
        "MapReduce div by zero on one rank",
        MapReduce::new(div, add)
            .checked(true)
            .run(&ones, &zero_at_end),
        want,
    )?;

    // Still in step after every error above.
    same(
        "in step",
        Reduce::new(add)
            .run(&DistVector::filled(world, 5, 2i64))
            .map_err(|e| e.to_string())?,
        10,
    )?;
    Ok(())
}

fn main() {
    let world = match dist::init() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("dist: MPI did not start: {e}");
            std::process::exit(1);
        }
    };
    let checks: [(&str, Suite); 8] = [
        ("map_reduce_scan", map_reduce_scan),
        ("overlap_1d", overlap_1d),
        ("matrices", matrices),
        ("arguments", arguments),
        ("pairs", pairs),
        ("moves", moves),
        ("indices", indices),
        ("errors", errors),
    ];
    let mut failed = 0;
    for (name, check) in checks {
        match check(&world) {
            Ok(()) => println!("rank {}/{}: {name} ... ok", world.rank(), world.size()),
            Err(e) => {
                failed += 1;
                println!(
                    "rank {}/{}: {name} ... FAILED: {e}",
                    world.rank(),
                    world.size()
                );
            }
        }
    }
    println!(
        "rank {}/{}: dist: {} passed, {failed} failed (backend {})",
        world.rank(),
        world.size(),
        checks.len() - failed,
        skel::default_backend().map_or("none".to_string(), |b| b.to_string())
    );
    drop(world);
    if failed > 0 {
        std::process::exit(1);
    }
}
