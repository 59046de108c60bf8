//! `skel::stream`: order, errors, panics, back-pressure; property tests with random stage
//! shapes, worker counts, channel capacities, delays and failures.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use proptest::prelude::*;
use skel::prelude::*;
use skel::stream::{Pipeline, StagePanic};

#[userfn]
fn triple(x: f32) -> f32 {
    3.0 * x
}

/// The parts of an `Error::Stage`; any other error fails the test.
fn stage_error(err: Error) -> (usize, usize, Error) {
    match err {
        Error::Stage {
            stage,
            item,
            source,
        } => (stage, item, *source),
        other => panic!("not a stage error: {other}"),
    }
}

#[test]
fn a_skeleton_inside_a_stage_keeps_order_through_farms() -> Result<()> {
    let report = Pipeline::from_iter(0..24usize)
        .farm(4, |n| Ok(Vector::from_fn(n + 1, |i| i as f32)))
        .stage(|v: Vector<f32>| {
            let mut out = Vector::zeroed(v.len());
            Map::new(triple).backend(Backend::Cpu).run(&v, &mut out)?;
            Ok(out)
        })
        .farm(3, |out| Ok(out.to_vec().iter().sum::<f32>()))
        .run()?;
    let want: Vec<f32> = (0..24).map(|n| 3.0 * (n * (n + 1) / 2) as f32).collect();
    assert_eq!(report.outputs(), &want[..]);
    assert_eq!(report.stages().len(), 3);
    assert!(report.stages().iter().all(|s| s.items() == 24));
    Ok(())
}

#[test]
fn a_sequential_stage_after_a_farm_sees_input_order() -> Result<()> {
    let mut seen = Vec::new();
    Pipeline::from_iter(0..50u64)
        .farm(5, |x| {
            // Later items finish first.
            std::thread::sleep(Duration::from_micros(50 * (50 - x)));
            Ok(x)
        })
        .for_each(|x| {
            seen.push(x);
            Ok(())
        })?;
    assert_eq!(seen, (0..50).collect::<Vec<_>>());
    Ok(())
}

#[test]
fn errors_name_stage_and_item_and_keep_the_source() {
    let err = Pipeline::from_iter(0..10)
        .stage(Ok)
        .farm(3, |x: i32| {
            if x == 6 {
                Err(Error::other(std::io::Error::other("disk full")))
            } else {
                Ok(x)
            }
        })
        .run()
        .unwrap_err();
    assert_eq!(err.to_string(), "stage 1 failed on item 6: disk full");
    let (stage, item, source) = stage_error(err);
    assert_eq!((stage, item), (1, 6));
    assert!(matches!(source, Error::Other(ref e) if e.is::<std::io::Error>()));
}

#[test]
fn skeleton_errors_pass_through_unchanged() {
    let err = Pipeline::from_iter([3usize, 4])
        .stage(|n| {
            let v = Vector::filled(n, 1.0f32);
            let mut out = Vector::zeroed(3);
            Map::new(triple).backend(Backend::Cpu).run(&v, &mut out)?;
            Ok(out)
        })
        .run()
        .unwrap_err();
    let (stage, item, source) = stage_error(err);
    assert_eq!((stage, item), (0, 1));
    assert!(matches!(source, Error::ShapeMismatch { .. }), "{source}");
}

#[test]
fn panics_become_errors() {
    let err = Pipeline::from_iter(0..8)
        .farm(2, |x: i32| {
            assert!(x != 5, "item five is bad");
            Ok(x)
        })
        .run()
        .unwrap_err();
    let (stage, item, source) = stage_error(err);
    assert_eq!((stage, item), (0, 5));
    let Error::Other(inner) = source else {
        panic!("not wrapped")
    };
    let panic = inner.downcast_ref::<StagePanic>().expect("a StagePanic");
    assert_eq!(panic.message(), "item five is bad");
}

#[test]
fn a_panicking_input_iterator_is_an_error() {
    let items = (0..10).map(|i| if i == 4 { panic!("bad input") } else { i });
    let err = Pipeline::from_iter(items).stage(Ok).run().unwrap_err();
    assert!(err.to_string().contains("bad input"), "{err}");
}

#[test]
fn zero_workers_is_an_invalid_argument() {
    let err = Pipeline::from_iter(0..3)
        .stage(Ok)
        .farm(0, Ok)
        .run()
        .unwrap_err();
    assert!(
        matches!(err, Error::InvalidArgument(ref m) if m.contains("stage 1")),
        "{err}"
    );
}

#[test]
fn an_endless_stream_stops_on_the_first_error() {
    let pulled = AtomicUsize::new(0);
    let items = (0u64..).inspect(|_| {
        pulled.fetch_add(1, Ordering::Relaxed);
    });
    let err = Pipeline::from_iter(items)
        .farm(3, |x| {
            if x == 1000 {
                Err(Error::other("enough"))
            } else {
                Ok(x)
            }
        })
        .stage(|_| Ok(()))
        .run()
        .unwrap_err();
    assert!(matches!(
        err,
        Error::Stage {
            stage: 0,
            item: 1000,
            ..
        }
    ));
    // Bounded channels: only the items in flight were read past the failing one.
    assert!(pulled.load(Ordering::Relaxed) < 1000 + 20);
}

#[test]
fn empty_input_and_no_stages() -> Result<()> {
    let none = Pipeline::from_iter(Vec::<u8>::new()).farm(4, Ok).run()?;
    assert_eq!((none.items(), none.stages()[0].items()), (0, 0));
    let bare = Pipeline::from_iter("abc".chars()).run()?;
    assert_eq!(bare.into_outputs(), vec!['a', 'b', 'c']);
    Ok(())
}

#[test]
fn report_displays_every_stage() -> Result<()> {
    let report = Pipeline::from_iter(0..6)
        .farm(2, Ok)
        .name("decode")
        .stage(Ok)
        .run()?;
    let text = report.to_string();
    assert!(text.contains("0 decode"), "{text}");
    assert!(text.contains("1 stage"), "{text}");
    assert!(text.contains("total (wall)"), "{text}");
    assert_eq!(report.busiest().map(|s| s.items()), Some(6));
    Ok(())
}

/// How one stage treats one item in a property case.
#[derive(Clone, Copy, Debug)]
enum Fate {
    Err,
    Panic,
}

#[derive(Clone, Debug)]
struct Case {
    items: usize,
    /// Workers per stage; `None` is a sequential `.stage`.
    stages: Vec<Option<usize>>,
    capacity: usize,
    fates: HashMap<(usize, usize), Fate>,
    /// Microseconds each (stage, item) sleeps.
    delays: HashMap<(usize, usize), u64>,
}

fn cases() -> impl Strategy<Value = Case> {
    (
        0usize..60,
        prop::collection::vec(prop::option::of(1usize..9), 1..5),
        0usize..4,
    )
        .prop_flat_map(|(items, stages, capacity)| {
            let n_stages = stages.len();
            let cell = (0..n_stages, 0..items.max(1));
            let fate = prop_oneof![Just(Fate::Err), Just(Fate::Panic)];
            (
                Just(items),
                Just(stages),
                Just(capacity),
                prop::collection::hash_map(cell.clone(), fate, 0..3),
                prop::collection::hash_map(cell, 0u64..300, 0..12),
            )
        })
        .prop_map(|(items, stages, capacity, fates, delays)| Case {
            items,
            stages,
            capacity,
            fates,
            delays,
        })
}

/// Runs a case: stage `s` adds `10^s`-ish marks so the output proves every stage ran once.
fn run_case(case: &Case) -> (Result<Vec<u64>>, Vec<Vec<usize>>, usize) {
    let calls: Vec<Vec<AtomicUsize>> = (0..case.stages.len())
        .map(|_| (0..case.items).map(|_| AtomicUsize::new(0)).collect())
        .collect();
    let pulled = AtomicUsize::new(0);
    let max_ahead = Mutex::new(0usize);
    let step = |s: usize, (i, v): (usize, u64)| -> Result<(usize, u64)> {
        calls[s][i].fetch_add(1, Ordering::SeqCst);
        if let Some(&us) = case.delays.get(&(s, i)) {
            std::thread::sleep(Duration::from_micros(us));
        }
        match case.fates.get(&(s, i)) {
            Some(Fate::Err) => Err(Error::other(format!("fail {s} {i}"))),
            Some(Fate::Panic) => panic!("panic {s} {i}"),
            None => Ok((i, v * 2 + s as u64 + 1)),
        }
    };
    let step = &step;
    let input = (0..case.items).map(|i| {
        pulled.fetch_add(1, Ordering::SeqCst);
        (i, i as u64)
    });
    let mut p = Pipeline::from_iter(input).capacity(case.capacity);
    for (s, kind) in case.stages.iter().enumerate() {
        p = match kind {
            None => p.stage(move |x| step(s, x)),
            Some(w) => p.farm(*w, move |x| step(s, x)),
        };
    }
    let result = p
        .stage(|(i, v)| {
            let ahead = pulled.load(Ordering::SeqCst).saturating_sub(i);
            let mut m = max_ahead.lock().unwrap();
            *m = (*m).max(ahead);
            Ok(v)
        })
        .run()
        .map(|r| r.into_outputs());
    let calls = calls
        .iter()
        .map(|row| row.iter().map(|c| c.load(Ordering::SeqCst)).collect())
        .collect();
    let ahead = *max_ahead.lock().unwrap();
    (result, calls, ahead)
}

/// What a sequential loop computes for item `i` through `stages` stages.
fn expected_value(i: usize, stages: usize) -> u64 {
    (0..stages).fold(i as u64, |v, s| v * 2 + s as u64 + 1)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn no_item_lost_or_duplicated(case in cases()) {
        let (result, calls, ahead) = run_case(&case);
        let n_stages = case.stages.len();
        // The failure a sequential loop meets first: the earliest item, at its first stage.
        let first_failure = (0..case.items)
            .find_map(|i| (0..n_stages).find(|&s| case.fates.contains_key(&(s, i))).map(|s| (s, i)));
        match first_failure {
            None => {
                let outputs = result.expect("no stage fails");
                let want: Vec<u64> = (0..case.items).map(|i| expected_value(i, n_stages)).collect();
                prop_assert_eq!(outputs, want);
                for row in &calls {
                    prop_assert!(row.iter().all(|&c| c == 1), "calls {:?}", calls);
                }
            }
            Some((stage, item)) => {
                match result {
                    Err(Error::Stage { stage: s, item: i, .. }) => {
                        prop_assert_eq!((s, i), (stage, item));
                    }
                    other => prop_assert!(false, "expected a stage error, got {:?}", other.map(|v| v.len())),
                }
                for (s, row) in calls.iter().enumerate() {
                    for (i, &c) in row.iter().enumerate() {
                        // Items before the failing one ran everywhere exactly once; the
                        // failing one up to its failing stage; nothing ran twice.
                        let must = i < item || (i == item && s <= stage);
                        prop_assert!(c <= 1, "stage {} item {} ran {} times", s, i, c);
                        prop_assert!(!must || c == 1, "stage {} item {} never ran", s, i);
                        prop_assert!(!(i == item && s > stage) || c == 0);
                    }
                }
            }
        }
        // Back-pressure: what the source has read beyond the item leaving the pipeline is
        // bounded by the channels and the farms' windows.
        let bound = 2 + case.capacity
            + case.stages.iter().map(|w| w.unwrap_or(1) + 2 * case.capacity + 2).sum::<usize>();
        prop_assert!(ahead <= bound, "{} items ahead, bound {}", ahead, bound);
    }
}
