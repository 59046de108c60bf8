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
fn iota(#[index] i: usize) -> i64 {
    i as i64
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

fn map_reduce_scan(world: &World) -> Check {
    for &n in LENS {
        let a = DistVector::from_fn(world, n, val);
        let b = DistVector::from_fn(world, n, |i| val(i + 3));
        let (la, lb) = (Vector::from_fn(n, val), Vector::from_fn(n, |i| val(i + 3)));
        let cpu = Backend::Cpu;

        let mut out = DistVector::zeroed(world, n);
        Map::new(sub)
            .run(&a, &b, &mut out)
            .map_err(|e| e.to_string())?;
        let mut want = Vector::zeroed(n);
        Map::new(sub)
            .backend(cpu)
            .run(&la, &lb, &mut want)
            .map_err(|e| e.to_string())?;
        same(
            &format!("Map n={n}"),
            out.all_gather().map_err(|e| e.to_string())?.to_vec(),
            want.to_vec(),
        )?;

        same_outcome(
            &format!("Reduce add start n={n}"),
            Reduce::new(add).start(10).run(&a),
            Reduce::new(add).backend(cpu).start(10).run(&la),
        )?;
        same_outcome(
            &format!("Reduce max n={n}"),
            Reduce::new(max).run(&a),
            Reduce::new(max).backend(cpu).run(&la),
        )?;
        same_outcome(
            &format!("Reduce max start n={n}"),
            Reduce::new(max).start(i64::MIN).run(&a),
            Reduce::new(max).backend(cpu).start(i64::MIN).run(&la),
        )?;
        same_outcome(
            &format!("MapReduce n={n}"),
            MapReduce::new(mul, add).start(-5).run(&a, &b),
            MapReduce::new(mul, add)
                .backend(cpu)
                .start(-5)
                .run(&la, &lb),
        )?;

        let (dm, lm) = (DistVector::from_fn(world, n, m2), Vector::from_fn(n, m2));
        same_outcome(
            &format!("Reduce mm n={n}"),
            Reduce::new(mm).start(ID).run(&dm),
            Reduce::new(mm).backend(cpu).start(ID).run(&lm),
        )?;
        let start = m2(5);
        same_outcome(
            &format!("Reduce mm start n={n}"),
            Reduce::new(mm).start(start).run(&dm),
            Reduce::new(mm).backend(cpu).start(start).run(&lm),
        )?;

        for mode in [ScanMode::Inclusive, ScanMode::Exclusive] {
            let mut out = DistVector::zeroed(world, n);
            Scan::new(mm)
                .mode(mode)
                .start(start)
                .run(&dm, &mut out)
                .map_err(|e| e.to_string())?;
            let mut want = Vector::zeroed(n);
            Scan::new(mm)
                .backend(cpu)
                .mode(mode)
                .start(start)
                .run(&lm, &mut want)
                .map_err(|e| e.to_string())?;
            same(
                &format!("Scan mm {mode:?} n={n}"),
                out.all_gather().map_err(|e| e.to_string())?.to_vec(),
                want.to_vec(),
            )?;

            let mut out = DistVector::zeroed(world, n);
            Scan::new(add)
                .mode(mode)
                .start(7)
                .run(&a, &mut out)
                .map_err(|e| e.to_string())?;
            let mut want = Vector::zeroed(n);
            Scan::new(add)
                .backend(cpu)
                .mode(mode)
                .start(7)
                .run(&la, &mut want)
                .map_err(|e| e.to_string())?;
            same(
                &format!("Scan add {mode:?} n={n}"),
                out.all_gather().map_err(|e| e.to_string())?.to_vec(),
                want.to_vec(),
            )?;
        }

        // Floats: the rank partials regroup the sum, so within rounding, not bit for bit.
        let f = DistVector::from_fn(world, n, |i| 0.1 * i as f64 + 1.0 / (i + 1) as f64);
        let lf = Vector::from_fn(n, |i| 0.1 * i as f64 + 1.0 / (i + 1) as f64);
        let (got, want) = (
            Reduce::new(addf).run(&f).map_err(|e| e.to_string())?,
            Reduce::new(addf)
                .backend(cpu)
                .run(&lf)
                .map_err(|e| e.to_string())?,
        );
        if (got - want).abs() > 1e-9 * want.abs().max(1.0) {
            return Err(format!("Reduce f64 n={n}: got {got}, want {want}"));
        }
    }
    Ok(())
}

fn overlap_1d(world: &World) -> Check {
    for &n in LENS {
        for &edge in EDGES {
            let a = DistVector::from_fn(world, n, val);
            let la = Vector::from_fn(n, val);
            // Edge::None leaves the border as it was: start from something recognisable.
            let mut out = DistVector::from_fn(world, n, |i| 1000 + i as i64);
            let mut want = Vector::from_fn(n, |i| 1000 + i as i64);
            let got = MapOverlap::new(near, 1).edge(edge).pad(9).run(&a, &mut out);
            let exp = MapOverlap::new(near, 1)
                .backend(Backend::Cpu)
                .edge(edge)
                .pad(9)
                .run(&la, &mut want);
            same_outcome(&format!("MapOverlap r1 {edge:?} n={n}"), got, exp)?;
            same(
                &format!("MapOverlap r1 {edge:?} n={n} values"),
                out.all_gather().map_err(|e| e.to_string())?.to_vec(),
                want.to_vec(),
            )?;

            let got = MapOverlap::new(far, 2).edge(edge).pad(-4).run(&a, &mut out);
            let exp = MapOverlap::new(far, 2)
                .backend(Backend::Cpu)
                .edge(edge)
                .pad(-4)
                .run(&la, &mut want);
            same_outcome(&format!("MapOverlap r2 {edge:?} n={n}"), got, exp)?;
            same(
                &format!("MapOverlap r2 {edge:?} n={n} values"),
                out.all_gather().map_err(|e| e.to_string())?.to_vec(),
                want.to_vec(),
            )?;
        }
    }
    Ok(())
}

fn matrices(world: &World) -> Check {
    let cpu = Backend::Cpu;
    for &(rows, cols) in SHAPES {
        let f = |r: usize, c: usize| val(r * cols + c);
        let m = DistMatrix::from_fn(world, rows, cols, f);
        let lm = Matrix::from_fn(rows, cols, f);
        let shape = format!("{rows}x{cols}");
        same(
            &format!("DistMatrix {shape} all_gather"),
            m.all_gather().map_err(|e| e.to_string())?.to_vec(),
            lm.to_vec(),
        )?;
        for &edge in EDGES {
            let mut out = DistMatrix::filled(world, rows, cols, 77);
            let mut want = Matrix::filled(rows, cols, 77);
            let got = MapOverlap::new(lap, (1, 1))
                .edge(edge)
                .pad(3)
                .run(&m, &mut out);
            let exp = MapOverlap::new(lap, (1, 1))
                .backend(cpu)
                .edge(edge)
                .pad(3)
                .run(&lm, &mut want);
            same_outcome(&format!("MapOverlap 2D (1,1) {edge:?} {shape}"), got, exp)?;
            same(
                &format!("MapOverlap 2D (1,1) {edge:?} {shape} values"),
                out.all_gather().map_err(|e| e.to_string())?.to_vec(),
                want.to_vec(),
            )?;

            let got = MapOverlap::new(tall, (2, 1)).edge(edge).run(&m, &mut out);
            let exp = MapOverlap::new(tall, (2, 1))
                .backend(cpu)
                .edge(edge)
                .run(&lm, &mut want);
            same_outcome(&format!("MapOverlap 2D (2,1) {edge:?} {shape}"), got, exp)?;
            same(
                &format!("MapOverlap 2D (2,1) {edge:?} {shape} values"),
                out.all_gather().map_err(|e| e.to_string())?.to_vec(),
                want.to_vec(),
            )?;

            let got = MapOverlap::new(near, 1)
                .colwise()
                .edge(edge)
                .run(&m, &mut out);
            let exp = MapOverlap::new(near, 1)
                .backend(cpu)
                .colwise()
                .edge(edge)
                .run(&lm, &mut want);
            same_outcome(&format!("MapOverlap colwise {edge:?} {shape}"), got, exp)?;
            same(
                &format!("MapOverlap colwise {edge:?} {shape} values"),
                out.all_gather().map_err(|e| e.to_string())?.to_vec(),
                want.to_vec(),
            )?;

            let got = MapOverlap::new(near, 1)
                .rowwise()
                .edge(edge)
                .run(&m, &mut out);
            let exp = MapOverlap::new(near, 1)
                .backend(cpu)
                .rowwise()
                .edge(edge)
                .run(&lm, &mut want);
            same_outcome(&format!("MapOverlap rowwise {edge:?} {shape}"), got, exp)?;
            same(
                &format!("MapOverlap rowwise {edge:?} {shape} values"),
                out.all_gather().map_err(|e| e.to_string())?.to_vec(),
                want.to_vec(),
            )?;
        }

        let mut out = DistMatrix::zeroed(world, rows, cols);
        let mut want = Matrix::zeroed(rows, cols);
        Map::new(sub)
            .run(&m, &m, &mut out)
            .map_err(|e| e.to_string())?;
        Map::new(sub)
            .backend(cpu)
            .run(&lm, &lm, &mut want)
            .map_err(|e| e.to_string())?;
        same(
            &format!("Map matrix {shape}"),
            out.all_gather().map_err(|e| e.to_string())?.to_vec(),
            want.to_vec(),
        )?;
        same_outcome(
            &format!("Reduce matrix {shape}"),
            Reduce::new(add).run(&m),
            Reduce::new(add).backend(cpu).run(&lm),
        )?;
        same_outcome(
            &format!("MapReduce matrix {shape}"),
            MapReduce::new(mul, add).run(&m, &m),
            MapReduce::new(mul, add).backend(cpu).run(&lm, &lm),
        )?;

        let mut per_row = DistVector::zeroed(world, rows);
        let mut want_rows = Vector::zeroed(rows);
        same_outcome(
            &format!("Reduce rows {shape}"),
            Reduce::new(add).run_rows(&m, &mut per_row),
            Reduce::new(add).backend(cpu).run_rows(&lm, &mut want_rows),
        )?;
        same(
            &format!("Reduce rows {shape} values"),
            per_row.all_gather().map_err(|e| e.to_string())?.to_vec(),
            want_rows.to_vec(),
        )?;
        // Columns fold across the ranks' blocks: an order-sensitive function shows the order.
        let mm_m = DistMatrix::from_fn(world, rows, cols, |r, c| m2(r * cols + c));
        let mm_l = Matrix::from_fn(rows, cols, |r, c| m2(r * cols + c));
        let mut per_col = Vector::filled(cols, ID);
        let mut want_cols = Vector::filled(cols, ID);
        same_outcome(
            &format!("Reduce cols {shape}"),
            Reduce::new(mm).run_cols(&mm_m, &mut per_col),
            Reduce::new(mm).backend(cpu).run_cols(&mm_l, &mut want_cols),
        )?;
        same(
            &format!("Reduce cols {shape} values"),
            per_col.to_vec(),
            want_cols.to_vec(),
        )?;
    }
    Ok(())
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
        "Map with #[index]",
        Map::new(iota).run_index(&mut out),
        "InvalidArgument",
    )?;
    expect_err(
        "MapPairs",
        MapPairs::new(sub).run(&a, &a, &mut Matrix::zeroed(10, 10)),
        "InvalidArgument",
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
    let checks: [(&str, Suite); 5] = [
        ("map_reduce_scan", map_reduce_scan),
        ("overlap_1d", overlap_1d),
        ("matrices", matrices),
        ("moves", moves),
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
