//! `Options::index_base` on every executor that takes it: a call split into parts, each run
//! with its first global position as the index base (the blocks of a distributed call, a
//! device's share of a call over several GPUs), gives the whole call's result on every
//! backend. The cpu backend on the whole call is the oracle; a device backend without a
//! device prints `skipped`.

use std::ops::Range;

use super::concrete;
use crate::containers::{Input, Output};
use crate::plan;
use crate::prelude::*;
use crate::skeletons::Options;

#[userfn]
fn tag(#[index] i: usize, x: i32) -> i32 {
    (i as i32) * 1000 + x
}

/// A 2D index map heavy enough for the GPUs' 2D launch shape (its loop makes it
/// compute-bound), so that shape's row arithmetic sees the base too.
#[userfn]
fn spin(#[index] (r, c): (usize, usize), x: i32) -> i32 {
    let mut s = x;
    for k in 0..48 {
        s = (s ^ ((r * 31 + c * 7 + k) as i32)) & 0xffff;
    }
    s + (r * 100000 + c) as i32
}

#[userfn]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

#[userfn]
fn weigh(#[index] i: usize, x: i32) -> i64 {
    (i as i64) * (x as i64)
}

#[userfn]
fn low_index_even(#[index] i: usize, x: i32) -> bool {
    i < 50 && x % 2 == 0
}

/// Parts that cover `0..n`, the first one empty and one of a single element.
fn parts(n: usize) -> Vec<Range<usize>> {
    let cuts = [0, 0, 1, n / 3, n / 2 + 1, n];
    cuts.windows(2).map(|w| w[0]..w[1]).collect()
}

fn options(backend: Backend, base: usize) -> Options {
    Options {
        backend: Some(backend),
        index_base: Some(base),
        ..Options::default()
    }
}

/// The backends compiled in, each with whether it can run here.
fn backends() -> Vec<Backend> {
    let mut all = vec![Backend::Cpu, Backend::Rayon, Backend::Cuda, Backend::OpenCl];
    all.retain(|b| match b.check() {
        Ok(()) => true,
        Err(e) => {
            println!("skipped on {b:?}: {e}");
            false
        }
    });
    all
}

fn input(n: usize) -> Vector<i32> {
    Vector::from_fn(n, |i| ((i * 37 + 11) % 101) as i32 - 50)
}

#[test]
fn map_parts_see_global_flat_indices() -> Result<()> {
    let n = 1031;
    let x = input(n);
    let mut want = Vector::zeroed(n);
    Map::new(tag).backend(Backend::Cpu).run(&x, &mut want)?;
    for backend in backends() {
        let mut got = Vector::filled(n, -1);
        for part in parts(n) {
            let o = options(backend, part.start);
            let a = (x.arg().sub(part.clone()),);
            let mut out = got.arg_mut();
            concrete!(backend, o, "tag", |exec| exec.map(
                plan::Map::<(tag, _, _)> {
                    arrays: (),
                    inputs: a,
                    out: out.part(part.clone()),
                    uniforms: &()
                }
            ))?;
        }
        assert_eq!(got.to_vec(), want.to_vec(), "{backend:?}");
    }
    Ok(())
}

#[test]
fn matrix_row_parts_see_global_2d_indices() -> Result<()> {
    let (rows, cols) = (41, 67);
    let x = Matrix::from_fn(rows, cols, |r, c| ((r * 7 + c * 3) % 13) as i32);
    let mut want = Matrix::zeroed(rows, cols);
    Map::new(spin).backend(Backend::Cpu).run(&x, &mut want)?;
    for backend in backends() {
        let mut got = Matrix::filled(rows, cols, -1);
        for part in parts(rows) {
            let o = options(backend, part.start * cols);
            let a = (x.arg().rows(part.clone()),);
            let mut out = got.arg_mut();
            concrete!(backend, o, "spin", |exec| exec.map(plan::Map::<(
                spin,
                _,
                _
            )> {
                arrays: (),
                inputs: a,
                out: out.rows(part.clone()),
                uniforms: &()
            }))?;
        }
        assert_eq!(got.to_vec(), want.to_vec(), "{backend:?}");
    }
    Ok(())
}

#[test]
fn map_reduce_parts_see_global_indices() -> Result<()> {
    let n = 4099;
    let x = input(n);
    let want = MapReduce::new(weigh, add).backend(Backend::Cpu).run(&x)?;
    for backend in backends() {
        let mut total = 0i64;
        for part in parts(n) {
            let o = options(backend, part.start);
            let a = (x.arg().sub(part.clone()),);
            let shape = a.0.shape();
            total += concrete!(backend, o, "weigh", |exec| exec.map_reduce(
                plan::MapReduce::<(weigh, add, _)> {
                    arrays: (),
                    inputs: a,
                    shape,
                    uniforms: &(),
                    start: 0
                }
            ))?;
        }
        assert_eq!(total, want, "{backend:?}");
    }
    Ok(())
}

#[test]
fn filter_parts_see_global_indices() -> Result<()> {
    let n = 97;
    let x = input(n);
    let mut whole = Vector::zeroed(n);
    let kept = Filter::new(low_index_even)
        .backend(Backend::Cpu)
        .run(&x, &mut whole)?;
    let want = whole.to_vec()[..kept].to_vec();
    assert!(
        kept > 5 && kept < 50,
        "the predicate keeps some elements: {kept}"
    );
    for backend in backends() {
        let mut got = Vec::new();
        for part in parts(n) {
            let o = options(backend, part.start);
            let mut kept = Vector::filled(part.len(), 0);
            let k = concrete!(backend, o, "low_index_even", |exec| exec.filter(
                plan::Filter::<(low_index_even, i32)> {
                    input: x.arg().sub(part.clone()),
                    out: kept.arg_mut(),
                    uniforms: &()
                }
            ))?;
            got.extend_from_slice(&kept.to_vec()[..k]);
        }
        assert_eq!(got, want, "{backend:?}");
    }
    Ok(())
}
