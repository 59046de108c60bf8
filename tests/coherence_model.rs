//! Model-based tests of the smart-container coherence protocol: random sequences of
//! skeleton calls (whole containers and views), host reads and host writes over several
//! containers, run on a backend and compared step by step with a host-only model.
//! On backends with device memory this exercises lazy copy-back, partial (view) uploads,
//! host-write invalidation and buffer reuse; on the CPU backends it checks the same
//! sequences stay correct. Backends that are not available print `skipped: ...`.

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
    },
    /// dst = inclusive scan of src
    Scan { src: usize, dst: usize },
    /// dst = 3-point stencil of src with duplicated edges
    Stencil { src: usize, dst: usize },
    /// compare Reduce of src[x..x+len] with the model
    Reduce { src: usize, x: usize, len: usize },
    /// compare one host element with the model
    Read { c: usize, i: usize },
    /// c[i] = value through IndexMut
    Write { c: usize, i: usize, value: i64 },
    /// overwrite c through as_mut_slice
    Fill { c: usize, value: i64 },
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
            0..LEN
        )
            .prop_map(|(f, a, b, dst, x, y, d, len)| {
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
                }
            }),
        (c.clone(), c.clone()).prop_map(|(src, dst)| Op::Scan { src, dst }),
        (c.clone(), c.clone()).prop_map(|(src, dst)| Op::Stencil { src, dst }),
        (c.clone(), 0..LEN, 0..LEN).prop_map(|(src, x, len)| Op::Reduce {
            src,
            x,
            len: len.min(LEN - x)
        }),
        (c.clone(), 0..LEN).prop_map(|(c, i)| Op::Read { c, i }),
        (c.clone(), 0..LEN, -50i64..50).prop_map(|(c, i, value)| Op::Write { c, i, value }),
        (c, -5i64..5).prop_map(|(c, value)| Op::Fill { c, value }),
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
            } => {
                let mut out = std::mem::replace(&mut vs[dst], Vector::zeroed(0));
                let (mut fa, mut fb) = (None, None);
                let va = source(&vs, &model, a, dst, &mut fa).view(x..x + len);
                let vb = source(&vs, &model, b, dst, &mut fb).view(y..y + len);
                let mut vo = out.view_mut(d..d + len);
                let result = if f {
                    Map::new(add).backend(backend).run(&va, &vb, &mut vo)
                } else {
                    Map::new(twice_minus)
                        .backend(backend)
                        .run(&va, &vb, &mut vo)
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
            Op::Scan { src, dst } | Op::Stencil { src, dst } => {
                let stencil = matches!(op, Op::Stencil { .. });
                let mut out = std::mem::replace(&mut vs[dst], Vector::zeroed(0));
                let mut fresh = None;
                let input = source(&vs, &model, src, dst, &mut fresh);
                let result = if stencil {
                    MapOverlap::new(sum3, 1)
                        .backend(backend)
                        .run(input, &mut out)
                } else {
                    Scan::new(add).backend(backend).run(input, &mut out)
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
            Op::Reduce { src, x, len } => {
                let got = Reduce::new(add)
                    .backend(backend)
                    .run(&vs[src].view(x..x + len));
                prop_assert_eq!(
                    got.ok(),
                    Some(model[src][x..x + len].iter().sum::<i64>()),
                    "step {}",
                    step
                );
            }
            Op::Read { c, i } => prop_assert_eq!(vs[c][i], model[c][i], "step {}", step),
            Op::Write { c, i, value } => {
                vs[c][i] = value;
                model[c][i] = value;
            }
            Op::Fill { c, value } => {
                vs[c].as_mut_slice().fill(value);
                model[c].fill(value);
            }
        }
    }
    for (c, (v, m)) in vs.iter().zip(&model).enumerate() {
        prop_assert_eq!(&v.to_vec(), m, "container {} at the end", c);
    }
    Ok(())
}

macro_rules! coherence_model {
    ($name:ident, $backend:expr) => {
        #[test]
        fn $name() {
            let backend: Backend = $backend;
            if !common::available(backend) {
                return;
            }
            let config = ProptestConfig { cases: 64, ..ProptestConfig::default() };
            proptest!(config, |(ops in proptest::collection::vec(op(), 1..40))| {
                run_sequence(backend, &ops)?;
            });
        }
    };
}

coherence_model!(cpu_matches_the_model, Backend::Cpu);
coherence_model!(rayon_matches_the_model, Backend::Rayon);
coherence_model!(opencl_matches_the_model, Backend::OpenCl);
coherence_model!(cuda_matches_the_model, Backend::Cuda);
