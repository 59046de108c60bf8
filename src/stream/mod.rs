//! Streams of tasks: pipelines of stages and farms over an iterator of items.
//!
//! The task-parallel half that complements the data-parallel skeletons (FastFlow's
//! `ff_pipeline` / `ff_farm` feeding SkePU, in the MultiStream thesis): a [`Pipeline`] reads
//! items from an iterator and sends each through a chain of stages. A `.stage(f)` is one
//! thread that sees the items in input order; a `.farm(w, f)` is `w` worker threads that
//! take items as they come and whose outputs are put back into input order by sequence
//! number. Stages are joined by bounded channels, so a slow stage holds back the ones before
//! it (back-pressure) and the number of items in flight stays bounded even on an endless
//! iterator.
//!
//! ```
//! use skel::prelude::*;
//! use skel::stream::Pipeline;
//!
//! #[userfn]
//! fn square(x: f32) -> f32 { x * x }
//!
//! let report = Pipeline::from_iter(1..=6usize)
//!     .farm(3, |n| Ok(Vector::from_fn(n, |i| i as f32)))       // 3 workers
//!     .stage(|v: Vector<f32>| {
//!         let mut out = Vector::zeroed(v.len());
//!         Map::new(square).run(&v, &mut out)?;                    // a skeleton per item
//!         Ok(out)
//!     })
//!     .farm(2, |out| Ok(out.to_vec().iter().sum::<f32>()))
//!     .run()?;
//! assert_eq!(report.outputs(), &[0.0, 1.0, 5.0, 14.0, 30.0, 55.0]);  // input order
//! assert_eq!(report.items(), 6);
//! println!("{report}");                                          // busy time per stage
//! # Ok::<(), skel::Error>(())
//! ```
//!
//! # Errors and panics
//!
//! Stage closures return [`skel::Result`](crate::Result); [`Error::other`](crate::Error::other)
//! wraps an error of the user's own. When a stage returns `Err` or panics on an item, the
//! pipeline stops taking new input, lets the items ahead of the failing one finish, drains
//! everything else without calling any more stages on it, joins every thread, and `run()`
//! returns `Err(Error::Stage { stage, item, source })`. If several items fail, the error is
//! the one a plain sequential loop over the items would have met first: the earliest failing
//! item in input order, at the first stage it failed in. A panic's message comes back as
//! [`Error::Other`] holding a [`StagePanic`].
//!
//! ```
//! use skel::{stream::Pipeline, Error};
//! let err = Pipeline::from_iter(0..100u32)
//!     .farm(4, |x| if x % 10 == 7 { Err(Error::other(format!("{x} is unlucky"))) } else { Ok(x) })
//!     .stage(|x| Ok(x + 1))
//!     .run()
//!     .unwrap_err();
//! match err {
//!     Error::Stage { stage, item, source } => {
//!         assert_eq!((stage, item), (0, 7));
//!         assert_eq!(source.to_string(), "7 is unlucky");
//!     }
//!     other => panic!("unexpected {other}"),
//! }
//! ```

mod farm;
mod pipeline;
mod report;

pub use pipeline::Pipeline;
pub use report::{Report, StageReport};

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::{Error, Result};

/// The payload of a panic inside a stage, as an error: what [`Error::Stage`]'s `source`
/// holds (inside [`Error::Other`]) when a stage panicked instead of returning `Err`.
///
/// ```
/// use skel::{stream::{Pipeline, StagePanic}, Error};
/// let err = Pipeline::from_iter([1, 2, 0, 4])
///     .stage(|x: i32| Ok(12 / x))          // divides by zero on item 2
///     .run()
///     .unwrap_err();
/// let Error::Stage { item, source, .. } = err else { panic!("not a stage error") };
/// assert_eq!(item, 2);
/// let Error::Other(inner) = *source else { panic!("not a panic") };
/// let panic = inner.downcast_ref::<StagePanic>().expect("a StagePanic");
/// assert!(panic.message().contains("divide by zero"), "{panic}");
/// ```
#[derive(Debug, Clone)]
pub struct StagePanic {
    message: String,
}

impl StagePanic {
    fn from_payload(payload: Box<dyn std::any::Any + Send>) -> Self {
        let message = match payload.downcast::<String>() {
            Ok(s) => *s,
            Err(payload) => match payload.downcast::<&'static str>() {
                Ok(s) => (*s).to_string(),
                Err(_) => "(a panic payload that is not a string)".to_string(),
            },
        };
        StagePanic { message }
    }

    /// The panic's message (`"(a panic payload that is not a string)"` for other payloads).
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for StagePanic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "panicked: {}", self.message)
    }
}

impl std::error::Error for StagePanic {}

/// What travels on the channels: an item with its input position. `None` is an item that was
/// skipped (it failed in an earlier stage, or the pipeline is stopping); it still flows, so
/// that farms can put the items back in order without waiting for a gap to fill.
struct Msg<T> {
    seq: usize,
    item: Option<T>,
}

/// Busy time and item count of one stage, summed over its threads.
#[derive(Default)]
struct StageClock {
    busy_ns: AtomicU64,
    items: AtomicUsize,
}

/// State shared by every thread of one run.
struct Ctx {
    /// Input position of the earliest failure so far (`usize::MAX`: none). Items after it
    /// are skipped; items before it still run, so that an earlier failure can still be found.
    stop_after: AtomicUsize,
    /// The earliest failure: (stage, item, error).
    failure: Mutex<Option<(usize, usize, Error)>>,
    clocks: Vec<StageClock>,
}

impl Ctx {
    fn new(stages: usize) -> Self {
        Ctx {
            stop_after: AtomicUsize::new(usize::MAX),
            failure: Mutex::new(None),
            clocks: (0..stages).map(|_| StageClock::default()).collect(),
        }
    }

    /// Whether the item at input position `seq` is no longer worth running.
    fn skips(&self, seq: usize) -> bool {
        seq > self.stop_after.load(Ordering::Acquire)
    }

    /// Records that `stage` failed on input item `seq`; keeps the earliest item's failure.
    fn fail(&self, stage: usize, seq: usize, error: Error) {
        // A poisoned lock only means another thread panicked while holding it, which the
        // code below never does; the data is still consistent.
        let mut failure = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        if failure.as_ref().map_or(true, |&(_, item, _)| seq < item) {
            *failure = Some((stage, seq, error));
        }
        self.stop_after.fetch_min(seq, Ordering::AcqRel);
    }

    /// Starts a named thread of the pipeline (`skel-stream-<what>`, seen in panic messages
    /// and debuggers). If the system refuses, the closure is dropped with its channels, so
    /// the threads around it wind down, and the run fails with that reason.
    fn spawn<'s, 'e>(
        self: &Arc<Self>,
        scope: &'s std::thread::Scope<'s, 'e>,
        what: String,
        f: impl FnOnce() + Send + 's,
    ) {
        let name = format!("skel-stream-{what}");
        if let Err(e) = std::thread::Builder::new()
            .name(name)
            .spawn_scoped(scope, f)
        {
            let error = Error::other(format!("cannot start a thread for {what}: {e}"));
            self.fail(pipeline::SOURCE, 0, error);
        }
    }

    fn take_failure(&self) -> Option<Error> {
        let mut failure = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        failure.take().map(|(stage, item, source)| match stage {
            pipeline::SOURCE => source,
            _ => Error::Stage {
                stage,
                item,
                source: Box::new(source),
            },
        })
    }
}

/// One thread's share of a stage: runs the stage function on items and keeps its clock.
struct Worker<'c> {
    ctx: &'c Ctx,
    stage: usize,
    busy: Duration,
    items: usize,
}

impl<'c> Worker<'c> {
    fn new(ctx: &'c Ctx, stage: usize) -> Self {
        Worker {
            ctx,
            stage,
            busy: Duration::ZERO,
            items: 0,
        }
    }

    /// Runs `f` on the message's item unless it is skipped; an `Err` or a panic is recorded
    /// and the item continues as skipped.
    fn process<T, U>(&mut self, msg: Msg<T>, f: impl FnOnce(T) -> Result<U>) -> Msg<U> {
        let seq = msg.seq;
        let item = match msg.item {
            Some(item) if !self.ctx.skips(seq) => item,
            _ => return Msg { seq, item: None },
        };
        let start = Instant::now();
        // The stage's state may be left half-updated by a panic; the pipeline stops running
        // items after this one, and items before it see what a sequential loop would have.
        let result = catch_unwind(AssertUnwindSafe(|| f(item)));
        self.busy += start.elapsed();
        self.items += 1;
        let error = match result {
            Ok(Ok(out)) => {
                return Msg {
                    seq,
                    item: Some(out),
                }
            }
            Ok(Err(e)) => e,
            Err(payload) => Error::other(StagePanic::from_payload(payload)),
        };
        self.ctx.fail(self.stage, seq, error);
        Msg { seq, item: None }
    }
}

impl Drop for Worker<'_> {
    fn drop(&mut self) {
        let clock = &self.ctx.clocks[self.stage];
        let ns = u64::try_from(self.busy.as_nanos()).unwrap_or(u64::MAX);
        clock.busy_ns.fetch_add(ns, Ordering::Relaxed);
        clock.items.fetch_add(self.items, Ordering::Relaxed);
    }
}
