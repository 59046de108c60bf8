//! Model-based tests of error recovery: random sequences of skeleton calls and host reads
//! and writes (as in `coherence_model.rs`), with device faults injected through
//! `skel::debug::inject_fault` (an allocation, upload, download or kernel launch failing
//! after a random number of successful ones), compared step by step with a host-only
//! model. A call whose fault fired must return the fault's typed error
//! (`OutOfMemory` for an allocation, `Driver` otherwise), leave every input as it was, and
//! leave its output range holding either all of its old or all of its new values (a CUDA
//! call split over streams: new values for a prefix of whole chunks, old ones after;
//! Filter: each element old or new, see [`Left`]); every later call and host access must
//! work as if nothing had failed. A fault
//! that did not fire leaves the call unaffected. Host backends never reach a device
//! operation, so on them every call must succeed. Backends that are not available print
//! `skipped: ...`.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use proptest::prelude::*;
use skel::debug::{clear_fault, inject_fault, Fault};
use skel::prelude::*;
use skel::Error;

const LEN: usize = 2500;
const CONTAINERS: usize = 3;

/// The armed fault is process-wide: the tests of this binary run one at a time.
static DEVICE: Mutex<()> = Mutex::new(());

/// The lock of [`DEVICE`], if `backend` can run here (else the skip line is printed).
fn device(backend: Backend) -> Option<MutexGuard<'static, ()>> {
    let guard = DEVICE.lock().unwrap_or_else(PoisonError::into_inner);
    common::available(backend).then_some(guard)
}

/// `#[test]`s running `$check` on OpenCL and on CUDA.
macro_rules! on_devices {
    ($check:ident: $opencl:ident, $cuda:ident) => {
        #[test]
        fn $opencl() {
            $check(Backend::OpenCl);
        }

        #[test]
        fn $cuda() {
            $check(Backend::Cuda);
        }
    };
}

/// Faults that fired in the running test, by kind (`Fault as usize`): a device test must
/// see every kind fire.
static FIRED: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];

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

/// Used only by `build_failure_is_retried`, so its kernel is built there first.
#[userfn]
fn plus_seven(a: i64) -> i64 {
    a + 7
}

#[userfn]
fn is_odd(x: i64) -> bool {
    x % 2 != 0
}

fn fault() -> impl Strategy<Value = Option<(Fault, usize)>> {
    let kind = prop_oneof![
        Just(Fault::Alloc),
        Just(Fault::Upload),
        Just(Fault::Download),
        Just(Fault::Launch),
    ];
    proptest::option::weighted(0.6, (kind, 0usize..4))
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
        streams: usize,
        fault: Option<(Fault, usize)>,
    },
    /// dst = inclusive scan (or 3-point stencil) of src
    Whole {
        stencil: bool,
        src: usize,
        dst: usize,
        streams: usize,
        fault: Option<(Fault, usize)>,
    },
    /// dst[..kept] = the odd elements of src (Filter), the rest of dst as it was
    Filter {
        src: usize,
        dst: usize,
        streams: usize,
        fault: Option<(Fault, usize)>,
    },
    /// compare Reduce of src[x..x+len] with the model
    Reduce {
        src: usize,
        x: usize,
        len: usize,
        fault: Option<(Fault, usize)>,
    },
    /// compare the host elements c[x..x+len] (a view) with the model
    ReadView {
        c: usize,
        x: usize,
        len: usize,
        fault: Option<(Fault, usize)>,
    },
    /// c[x..x+len] = value through a mutable view (its stale elements are brought back
    /// first: a download that can fail)
    WriteView {
        c: usize,
        x: usize,
        len: usize,
        value: i64,
        fault: Option<(Fault, usize)>,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let c = 0..CONTAINERS;
    prop_oneof![
        3 => (
            (any::<bool>(), c.clone(), c.clone(), c.clone()),
            (0..LEN, 0..LEN, 0..LEN, 0..LEN),
            1usize..=8,
            fault()
        )
            .prop_map(|((f, a, b, dst), (x, y, d, len), streams, fault)| {
                let len = len.min(LEN - x).min(LEN - y).min(LEN - d);
                Op::Map { f, a, b, dst, x, y, d, len, streams, fault }
            }),
        2 => (any::<bool>(), c.clone(), c.clone(), 1usize..=8, fault()).prop_map(
            |(stencil, src, dst, streams, fault)| Op::Whole { stencil, src, dst, streams, fault }
        ),
        1 => (c.clone(), c.clone(), 1usize..=8, fault()).prop_map(
            |(src, dst, streams, fault)| Op::Filter { src, dst, streams, fault }
        ),
        1 => (c.clone(), 0..LEN, 0..LEN, fault()).prop_map(|(src, x, len, fault)| Op::Reduce {
            src,
            x,
            len: len.min(LEN - x),
            fault
        }),
        2 => (c.clone(), 0..LEN, 0..LEN, fault()).prop_map(|(c, x, len, fault)| Op::ReadView {
            c,
            x,
            len: len.min(LEN - x),
            fault
        }),
        1 => (c, 0..LEN, 0..LEN, -50i64..50, fault()).prop_map(|(c, x, len, value, fault)| {
            Op::WriteView {
                c,
                x,
                len: len.min(LEN - x),
                value,
                fault,
            }
        }),
    ]
}

/// Runs `call` with `fault` armed. `Ok(true)` when the fault fired (the call returned the
/// fault's error), `Ok(false)` when it did not (the call succeeded).
fn faulty<R: std::fmt::Debug>(
    fault: Option<(Fault, usize)>,
    step: usize,
    call: impl FnOnce() -> skel::Result<R>,
) -> Result<(bool, Option<R>), TestCaseError> {
    if let Some((kind, after)) = fault {
        inject_fault(kind, after);
    }
    let result = call();
    let unfired = clear_fault();
    let fired = fault.is_some() && unfired.is_none();
    if let (true, Some((kind, _))) = (fired, fault) {
        FIRED[kind as usize].fetch_add(1, Ordering::Relaxed);
    }
    match (fired, result) {
        (false, Ok(r)) => Ok((false, Some(r))),
        (true, Err(e)) => {
            let typed = match fault.map(|f| f.0) {
                Some(Fault::Alloc) => matches!(e, Error::OutOfMemory(_)),
                _ => matches!(e, Error::Driver(_)),
            };
            prop_assert!(typed, "step {step}: {fault:?} gave {e:?}");
            Ok((true, None))
        }
        (fired, r) => Err(TestCaseError::fail(format!(
            "step {step}: fault {fault:?} fired: {fired}, but the call gave {r:?}"
        ))),
    }
}

/// The container to read as source `src` of a call writing `dst`: the container itself, or
/// a fresh copy of the model when it is the destination.
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

/// What a failed call may leave in its output (README, "Reliability").
#[derive(Clone, Copy, Debug, PartialEq)]
enum Left {
    /// All old values or all new ones.
    OldOrNew,
    /// New values up to some element, old ones from there on (a CUDA call split over
    /// streams fails at a later chunk's launch after the earlier chunks' kernels wrote).
    NewPrefix,
    /// Each element old or new (Filter: its kernels write before the count is read).
    EachOldOrNew,
}

/// After a call writing `dst` failed: every other container still matches the model, and
/// `dst` holds what `left` allows of its old values and `new` (the model becomes what it
/// holds).
fn check_failed(
    vs: &[Vector<i64>],
    model: &mut [Vec<i64>],
    (dst, new): (usize, Vec<i64>),
    left: Left,
    step: usize,
) -> Result<(), TestCaseError> {
    for (c, (v, m)) in vs.iter().zip(model.iter()).enumerate() {
        let got = v.try_as_slice();
        prop_assert!(
            got.is_ok(),
            "step {step}: reading {c} after a fault: {got:?}"
        );
        let got = got.unwrap_or_default();
        if c != dst {
            prop_assert_eq!(
                got,
                &m[..],
                "step {}: input {} changed by a failed call",
                step,
                c
            );
            continue;
        }
        // The longest prefix that is new; the rest must be old.
        let p = got.iter().zip(&new).take_while(|(g, n)| g == n).count();
        let consistent = match left {
            Left::OldOrNew => got == &m[..] || p == LEN,
            Left::NewPrefix => got[p..] == m[p..],
            Left::EachOldOrNew => (0..LEN).all(|i| got[i] == m[i] || got[i] == new[i]),
        };
        // Report the first element that is neither old nor new, or else where the new
        // prefix ends (a few elements each: the containers are long).
        let at = (0..LEN)
            .find(|&i| got[i] != m[i] && got[i] != new[i])
            .unwrap_or(p);
        let near = |v: &[i64]| v[at.saturating_sub(2)..(at + 3).min(LEN)].to_vec();
        prop_assert!(
            consistent,
            "step {step}: output {c} is not {left:?}: from element {}, got {:?}, old {:?}, new {:?}",
            at.saturating_sub(2),
            near(got),
            near(m),
            near(&new)
        );
    }
    model[dst] = vs[dst].to_vec();
    Ok(())
}

fn run_sequence(backend: Backend, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut model: Vec<Vec<i64>> = (0..CONTAINERS)
        .map(|c| (0..LEN as i64).map(|i| i * (c as i64 + 1) % 13).collect())
        .collect();
    let mut vs: Vec<Vector<i64>> = model.iter().cloned().map(Vector::from).collect();
    let chunks = if backend == Backend::Cuda {
        Left::NewPrefix
    } else {
        Left::OldOrNew
    };
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
                streams,
                fault,
            } => {
                let mut new = model[dst].clone();
                for k in 0..len {
                    let (va, vb) = (model[a][x + k], model[b][y + k]);
                    new[d + k] = if f { va + vb } else { 2 * va - vb };
                }
                let mut out = std::mem::replace(&mut vs[dst], Vector::zeroed(0));
                let (mut fa, mut fb) = (None, None);
                let va = source(&vs, &model, a, dst, &mut fa).view(x..x + len);
                let vb = source(&vs, &model, b, dst, &mut fb).view(y..y + len);
                let mut vo = out.view_mut(d..d + len);
                let result = faulty(fault, step, || {
                    if f {
                        Map::new(add)
                            .backend(backend)
                            .streams(streams)
                            .run(&va, &vb, &mut vo)
                    } else {
                        Map::new(twice_minus)
                            .backend(backend)
                            .streams(streams)
                            .run(&va, &vb, &mut vo)
                    }
                });
                vs[dst] = out;
                if result?.0 {
                    check_failed(&vs, &mut model, (dst, new), chunks, step)?;
                } else {
                    model[dst] = new;
                }
            }
            Op::Whole {
                stencil,
                src,
                dst,
                streams,
                fault,
            } => {
                let m = &model[src];
                let new: Vec<i64> = if stencil {
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
                let mut out = std::mem::replace(&mut vs[dst], Vector::zeroed(0));
                let mut fresh = None;
                let input = source(&vs, &model, src, dst, &mut fresh);
                let result = faulty(fault, step, || {
                    if stencil {
                        MapOverlap::new(sum3, 1)
                            .backend(backend)
                            .streams(streams)
                            .run(input, &mut out)
                    } else {
                        Scan::new(add)
                            .backend(backend)
                            .streams(streams)
                            .run(input, &mut out)
                    }
                });
                vs[dst] = out;
                if result?.0 {
                    check_failed(&vs, &mut model, (dst, new), chunks, step)?;
                } else {
                    model[dst] = new;
                }
            }
            Op::Filter {
                src,
                dst,
                streams,
                fault,
            } => {
                let mut new = model[dst].clone();
                let odd: Vec<i64> = model[src].iter().copied().filter(|x| x % 2 != 0).collect();
                new[..odd.len()].copy_from_slice(&odd);
                let mut out = std::mem::replace(&mut vs[dst], Vector::zeroed(0));
                let mut fresh = None;
                let input = source(&vs, &model, src, dst, &mut fresh);
                let result = faulty(fault, step, || {
                    Filter::new(is_odd)
                        .backend(backend)
                        .streams(streams)
                        .run(input, &mut out)
                });
                vs[dst] = out;
                match result? {
                    (true, _) => {
                        check_failed(&vs, &mut model, (dst, new), Left::EachOldOrNew, step)?
                    }
                    (false, kept) => {
                        prop_assert_eq!(kept, Some(odd.len()), "step {}", step);
                        model[dst] = new;
                    }
                }
            }
            Op::Reduce { src, x, len, fault } => {
                let view = vs[src].view(x..x + len);
                let (fired, got) =
                    faulty(fault, step, || Reduce::new(add).backend(backend).run(&view))?;
                if !fired {
                    prop_assert_eq!(got, Some(model[src][x..x + len].iter().sum::<i64>()));
                }
            }
            Op::ReadView { c, x, len, fault } => {
                let view = vs[c].view(x..x + len);
                let (_, got) = faulty(fault, step, || view.try_as_slice().map(<[i64]>::to_vec))?;
                if let Some(got) = got {
                    prop_assert_eq!(got, &model[c][x..x + len], "step {}", step);
                }
                // Failed or not, the next read gives the data.
                prop_assert_eq!(view.as_slice(), &model[c][x..x + len], "step {}", step);
            }
            Op::WriteView {
                c,
                x,
                len,
                value,
                fault,
            } => {
                let mut view = vs[c].view_mut(x..x + len);
                let (fired, _) = faulty(fault, step, || {
                    view.try_as_mut_slice().map(|s| s.fill(value))
                })?;
                if fired {
                    // Nothing was written: the container is as it was, and writing works.
                    prop_assert_eq!(vs[c].try_as_slice().ok(), Some(&model[c][..]));
                    vs[c].view_mut(x..x + len).as_mut_slice().fill(value);
                }
                model[c][x..x + len].fill(value);
            }
        }
    }
    for (c, (v, m)) in vs.iter().zip(&model).enumerate() {
        prop_assert_eq!(&v.to_vec(), m, "container {} at the end", c);
    }
    Ok(())
}

macro_rules! fault_model {
    ($name:ident, $backend:expr, $cases:expr, $max_ops:expr) => {
        #[test]
        fn $name() {
            let backend: Backend = $backend;
            let Some(_device) = device(backend) else {
                return;
            };
            FIRED.iter().for_each(|f| f.store(0, Ordering::Relaxed));
            let config = ProptestConfig { cases: $cases, ..ProptestConfig::default() };
            proptest!(config, |(ops in proptest::collection::vec(op(), 1..$max_ops))| {
                let r = run_sequence(backend, &ops);
                clear_fault();
                r?;
            });
            let fired: Vec<usize> = FIRED.iter().map(|f| f.load(Ordering::Relaxed)).collect();
            println!("{backend}: injected faults fired (alloc, upload, download, launch): {fired:?}");
            // Host backends have no device operation to fail; on a device, the sequences
            // are long enough that every kind fires several times.
            let device = matches!(backend, Backend::Cuda | Backend::OpenCl);
            assert!(fired.iter().all(|&f| (f > 0) == device), "{backend}: {fired:?}");
        }
    };
}

/// `inject_fault(kind, after)` lets `after` operations of that kind through, fails the next
/// one, and then disarms: a Map of one chunk is one launch.
fn after_counts_operations(backend: Backend) {
    let Some(_device) = device(backend) else {
        return;
    };
    let a = Vector::from(vec![1i64; 64]);
    let mut out = Vector::zeroed(64);
    let mut map = || {
        Map::new(add)
            .backend(backend)
            .streams(1)
            .run(&a, &a, &mut out)
    };
    assert!(map().is_ok(), "warm-up");
    inject_fault(Fault::Launch, 2);
    assert!(map().is_ok() && map().is_ok());
    assert!(matches!(map(), Err(Error::Driver(_))));
    assert_eq!(clear_fault(), None, "the fault disarms when it fires");
    assert!(map().is_ok());
    assert_eq!(out.to_vec(), vec![2; 64]);
}

on_devices!(after_counts_operations: opencl_after_counts_operations, cuda_after_counts_operations);

/// A kernel whose first build fails for lack of memory (creating the OpenCL program,
/// loading the CUDA module: the call's first allocation) is built again by the next call:
/// the failure is not cached as if the user function could not compile.
fn build_failure_is_retried(backend: Backend) {
    let Some(_device) = device(backend) else {
        return;
    };
    let a = Vector::from((0..100i64).collect::<Vec<_>>());
    let mut out = Vector::from(vec![-1i64; 100]);
    inject_fault(Fault::Alloc, 0);
    let r = Map::new(plus_seven).backend(backend).run(&a, &mut out);
    assert_eq!(clear_fault(), None, "the call allocated nothing");
    assert!(matches!(r, Err(Error::OutOfMemory(_))), "{r:?}");
    assert_eq!(out.to_vec(), vec![-1; 100]);
    let r = Map::new(plus_seven).backend(backend).run(&a, &mut out);
    assert!(r.is_ok(), "the call after a failed build: {r:?}");
    assert_eq!(out.to_vec(), (7..107).collect::<Vec<i64>>());
}

on_devices!(build_failure_is_retried: opencl_build_failure_is_retried, cuda_build_failure_is_retried);

/// A Filter whose count download fails after its kernels ran: the output holds the old
/// values or the kept ones, never memory no kernel wrote (the device buffer of a container
/// never used on the device is uninitialised beyond the kept elements).
fn failed_filter_count_keeps_old_values(backend: Backend) {
    let Some(_device) = device(backend) else {
        return;
    };
    let n = 3000;
    let input = Vector::from((0..n as i64).collect::<Vec<_>>());
    let odd: Vec<i64> = (0..n as i64).filter(|x| x % 2 != 0).collect();
    for streams in [1, 3] {
        let old = vec![-5i64; n];
        let mut out = Vector::from(old.clone());
        // The device copy of `out` is current for its first half only.
        let mut head = out.view_mut(0..n / 2);
        let half = input.view(0..n / 2);
        Map::new(twice_minus)
            .backend(backend)
            .run(&half, &half, &mut head)
            .expect("map");
        let before: Vec<i64> = (0..n as i64 / 2).chain(vec![-5; n / 2]).collect();
        inject_fault(Fault::Download, 0);
        let r = Filter::new(is_odd)
            .backend(backend)
            .streams(streams)
            .run(&input, &mut out);
        assert_eq!(clear_fault(), None, "the count was never downloaded");
        assert!(matches!(r, Err(Error::Driver(_))), "{r:?}");
        let got = out.to_vec();
        for (i, &g) in got.iter().enumerate() {
            let new = odd.get(i).copied().unwrap_or(before[i]);
            assert!(
                g == before[i] || g == new,
                "{backend}, {streams} streams: out[{i}] = {g}, neither {} nor {new}",
                before[i]
            );
        }
        assert_eq!(
            Filter::new(is_odd)
                .backend(backend)
                .run(&input, &mut out)
                .ok(),
            Some(odd.len())
        );
        assert_eq!(&out.to_vec()[..odd.len()], &odd[..]);
        assert_eq!(&out.to_vec()[odd.len()..], &before[odd.len()..]);
    }
}

on_devices!(failed_filter_count_keeps_old_values: opencl_failed_filter_count_keeps_old_values, cuda_failed_filter_count_keeps_old_values);

fault_model!(cpu_never_faults, Backend::Cpu, 16, 20);
fault_model!(opencl_recovers_from_faults, Backend::OpenCl, 128, 30);
fault_model!(cuda_recovers_from_faults, Backend::Cuda, 256, 60);
