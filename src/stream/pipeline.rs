//! The pipeline builder: a source iterator, then stages and farms, then `run`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::Scope;
use std::time::Instant;

use crossbeam_channel::{bounded, Receiver};

use super::farm::FarmLink;
use super::report::{Report, StageReport};
use super::{Ctx, Msg, StagePanic, Worker};
use crate::{Error, Result};

/// Channel capacity between two stages unless [`Pipeline::capacity`] says otherwise.
const DEFAULT_CAPACITY: usize = 2;

/// The part of a pipeline that ends in items of type `T`: when run, it starts its threads
/// and hands back the channel its items come out of, in input order.
pub(super) trait Link<'a, T>: Send + 'a {
    fn spawn<'s>(
        self: Box<Self>,
        scope: &'s Scope<'s, 'a>,
        ctx: &Arc<Ctx>,
        capacity: usize,
    ) -> Receiver<Msg<T>>;
}

/// The input: one thread pulling items from the iterator.
struct Source<I>(I);

/// Marks a failure of the input iterator itself (it panicked), which is no stage's.
pub(super) const SOURCE: usize = usize::MAX;

impl<'a, I> Link<'a, I::Item> for Source<I>
where
    I: Iterator + Send + 'a,
    I::Item: Send + 'a,
{
    fn spawn<'s>(
        self: Box<Self>,
        scope: &'s Scope<'s, 'a>,
        ctx: &Arc<Ctx>,
        capacity: usize,
    ) -> Receiver<Msg<I::Item>> {
        let (tx, rx) = bounded(capacity);
        let mut items = self.0;
        let shared = Arc::clone(ctx);
        ctx.spawn(scope, "input".into(), move || {
            let ctx = shared;
            for seq in 0.. {
                if ctx.skips(seq) {
                    break;
                }
                // Caught so that `run` returns an error instead of panicking; the iterator
                // is never touched again afterwards.
                let item = match catch_unwind(AssertUnwindSafe(|| items.next())) {
                    Ok(Some(item)) => item,
                    Ok(None) => break,
                    Err(payload) => {
                        ctx.fail(SOURCE, seq, Error::other(StagePanic::from_payload(payload)));
                        break;
                    }
                };
                if tx
                    .send(Msg {
                        seq,
                        item: Some(item),
                    })
                    .is_err()
                {
                    break;
                }
            }
        });
        rx
    }
}

/// A sequential stage: one thread, items in input order.
struct StageLink<'a, T, F> {
    prev: Box<dyn Link<'a, T>>,
    f: F,
    stage: usize,
}

impl<'a, T, U, F> Link<'a, U> for StageLink<'a, T, F>
where
    T: Send + 'a,
    U: Send + 'a,
    F: FnMut(T) -> Result<U> + Send + 'a,
{
    fn spawn<'s>(
        self: Box<Self>,
        scope: &'s Scope<'s, 'a>,
        ctx: &Arc<Ctx>,
        capacity: usize,
    ) -> Receiver<Msg<U>> {
        let StageLink { prev, mut f, stage } = *self;
        let input = prev.spawn(scope, ctx, capacity);
        let (tx, rx) = bounded(capacity);
        let shared = Arc::clone(ctx);
        ctx.spawn(scope, format!("stage-{stage}"), move || {
            let mut worker = Worker::new(&shared, stage);
            for msg in input {
                if tx.send(worker.process(msg, &mut f)).is_err() {
                    break;
                }
            }
        });
        rx
    }
}

/// What the report needs to know about each stage before the run.
pub(super) struct StageInfo {
    pub(super) name: Option<String>,
    pub(super) workers: usize,
}

/// A stream of items through stages and farms; see the [module docs](super).
///
/// Build it with [`from_iter`](Pipeline::from_iter), add [`stage`](Pipeline::stage)s and
/// [`farm`](Pipeline::farm)s, and [`run`](Pipeline::run) it: every stage starts its threads,
/// the items flow, and `run` returns when the input is exhausted and every item has come
/// out of the last stage (or a stage failed). Closures may borrow from the caller's stack
/// (the threads are scoped to `run`).
///
/// ```
/// use skel::stream::Pipeline;
/// let words = ["stream", "of", "tasks"];
/// let report = Pipeline::from_iter(words)
///     .farm(2, |w: &str| Ok(w.len()))
///     .name("measure")
///     .stage(|n| Ok(n * 10))
///     .run()?;
/// assert_eq!(report.into_outputs(), vec![60, 20, 50]);
/// # Ok::<(), skel::Error>(())
/// ```
#[must_use = "a pipeline does nothing until `.run()` or `.for_each(..)` is called"]
pub struct Pipeline<'a, T> {
    head: Box<dyn Link<'a, T>>,
    stages: Vec<StageInfo>,
    capacity: usize,
    progress: Option<Box<dyn FnMut(usize) + 'a>>,
}

impl<T> std::fmt::Debug for Pipeline<'_, T> {
    /// The stages (name and workers) and the channel capacity; the closures are not
    /// printable.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let stages: Vec<(Option<&str>, usize)> = self
            .stages
            .iter()
            .map(|s| (s.name.as_deref(), s.workers))
            .collect();
        f.debug_struct("Pipeline")
            .field("stages", &stages)
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl<'a, T: Send + 'a> Pipeline<'a, T> {
    /// A pipeline over `items`, read by a thread of its own, one at a time, as the first
    /// stage can take them: an endless iterator is fine.
    ///
    /// ```
    /// use skel::stream::Pipeline;
    /// let endless = Pipeline::from_iter(0u64..).farm(4, |x| Ok(x * x));
    /// // Not run here: it would never end. With `.take(n)` on the input it would.
    /// # drop(endless);
    /// ```
    // Not `FromIterator`: that trait cannot require the iterator to be `Send`, and the
    // iterator runs on its own thread.
    #[allow(clippy::should_implement_trait)]
    pub fn from_iter<I>(items: I) -> Self
    where
        I: IntoIterator<Item = T>,
        I::IntoIter: Send + 'a,
    {
        Pipeline {
            head: Box::new(Source(items.into_iter())),
            stages: Vec::new(),
            capacity: DEFAULT_CAPACITY,
            progress: None,
        }
    }

    /// Adds a sequential stage: one thread calls `f` on every item, in input order (also
    /// after a farm). `f` may keep state between items (`FnMut`).
    ///
    /// ```
    /// use skel::stream::Pipeline;
    /// let mut total = 0;
    /// let report = Pipeline::from_iter(1..=4)
    ///     .stage(|x| { total += x; Ok(total) })     // running sum, in order
    ///     .run()?;
    /// assert_eq!(report.outputs(), &[1, 3, 6, 10]);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn stage<U, F>(self, f: F) -> Pipeline<'a, U>
    where
        U: Send + 'a,
        F: FnMut(T) -> Result<U> + Send + 'a,
    {
        let stage = self.stages.len();
        self.then(1, move |prev| Box::new(StageLink { prev, f, stage }))
    }

    /// Adds a farm: `workers` threads each take the next waiting item and call `f` on it;
    /// the outputs leave the farm in input order (by sequence number). For stages whose
    /// items are independent and whose cost dominates: decoding, encoding, per-item CPU work.
    ///
    /// A farm of 0 workers makes [`run`](Pipeline::run) return
    /// [`Error::InvalidArgument`].
    ///
    /// ```
    /// use skel::stream::Pipeline;
    /// let report = Pipeline::from_iter(0..20u64)
    ///     .farm(4, |n| Ok((0..=n).sum::<u64>()))
    ///     .run()?;
    /// assert_eq!(report.outputs()[19], 190);
    /// assert_eq!(report.stages()[0].workers(), 4);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn farm<U, F>(self, workers: usize, f: F) -> Pipeline<'a, U>
    where
        U: Send + 'a,
        F: Fn(T) -> Result<U> + Send + Sync + 'a,
    {
        let stage = self.stages.len();
        self.then(workers, move |prev| {
            Box::new(FarmLink {
                prev,
                f,
                workers,
                stage,
            })
        })
    }

    /// Names the last stage added, for the report.
    ///
    /// ```
    /// use skel::stream::Pipeline;
    /// let report = Pipeline::from_iter([1, 2]).stage(Ok).name("pass").run()?;
    /// assert_eq!(report.stages()[0].name(), Some("pass"));
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        if let Some(last) = self.stages.last_mut() {
            last.name = Some(name.into());
        }
        self
    }

    /// Capacity of every channel between stages (default 2): how many finished items may
    /// wait for the next stage before the one before it blocks. With a farm, up to
    /// `workers + capacity` items are inside it. 0 makes every hand-over a rendezvous.
    ///
    /// ```
    /// use skel::stream::Pipeline;
    /// let report = Pipeline::from_iter(0..5).stage(Ok).capacity(0).run()?;
    /// assert_eq!(report.items(), 5);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self
    }

    /// Calls `f` on the thread that called `run` each time an item leaves the pipeline,
    /// with the number of items done so far: drive a progress bar with it.
    ///
    /// ```
    /// use skel::stream::Pipeline;
    /// let mut seen = Vec::new();
    /// Pipeline::from_iter(0..3).farm(2, Ok).progress(|done| seen.push(done)).run()?;
    /// assert_eq!(seen, vec![1, 2, 3]);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn progress(mut self, f: impl FnMut(usize) + 'a) -> Self {
        self.progress = Some(Box::new(f));
        self
    }

    /// Runs the pipeline to the end of its input and returns the [`Report`], which holds
    /// the last stage's outputs in input order ([`Report::outputs`]). For a long or endless
    /// stream, end with a stage that returns `()` (or use [`for_each`](Pipeline::for_each)),
    /// so that nothing is kept.
    ///
    /// # Errors
    ///
    /// [`Error::Stage`] when a stage returned `Err` or panicked (see the
    /// [module docs](super) for which failure is reported); [`Error::InvalidArgument`] for a
    /// farm of 0 workers; [`Error::Other`] with a [`StagePanic`] if the input iterator
    /// panicked. Every thread has been joined when `run` returns.
    ///
    /// ```
    /// use skel::stream::Pipeline;
    /// let report = Pipeline::from_iter(vec!["1", "2", "x"])
    ///     .stage(|s: &str| s.parse::<i32>().map_err(skel::Error::other))
    ///     .run();
    /// assert!(matches!(report, Err(skel::Error::Stage { stage: 0, item: 2, .. })));
    /// ```
    pub fn run(self) -> Result<Report<T>> {
        let Pipeline {
            head,
            stages,
            capacity,
            mut progress,
        } = self;
        if let Some(stage) = stages.iter().position(|s| s.workers == 0) {
            return Err(Error::InvalidArgument(format!(
                "the farm at stage {stage} has 0 workers; it needs at least 1"
            )));
        }
        let ctx = Arc::new(Ctx::new(stages.len()));
        let mut outputs = Vec::new();
        let start = Instant::now();
        std::thread::scope(|scope| {
            for msg in head.spawn(scope, &ctx, capacity) {
                if let Some(out) = msg.item {
                    outputs.push(out);
                    if let Some(report) = progress.as_mut() {
                        report(outputs.len());
                    }
                }
            }
        });
        let wall = start.elapsed();
        if let Some(error) = ctx.take_failure() {
            return Err(error);
        }
        let stages = stages
            .into_iter()
            .zip(&ctx.clocks)
            .enumerate()
            .map(|(position, (info, clock))| StageReport::new(position, info, clock))
            .collect();
        Ok(Report::new(outputs, wall, stages))
    }

    /// Runs the pipeline with `f` as its last, sequential stage, called on every item in
    /// input order; keeps no outputs. Same errors as [`run`](Pipeline::run) (a failure of
    /// `f` is reported as the last stage's).
    ///
    /// ```
    /// use skel::stream::Pipeline;
    /// let mut lines = Vec::new();
    /// let report = Pipeline::from_iter(["a", "b"])
    ///     .farm(2, |s: &str| Ok(s.to_uppercase()))
    ///     .for_each(|s| { lines.push(s); Ok(()) })?;
    /// assert_eq!((lines.join(""), report.items()), ("AB".to_string(), 2));
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn for_each<F>(self, f: F) -> Result<Report<()>>
    where
        F: FnMut(T) -> Result<()> + Send + 'a,
    {
        self.stage(f).run()
    }

    /// Appends a stage of `workers` threads made by `link` from the pipeline so far.
    fn then<U>(
        mut self,
        workers: usize,
        link: impl FnOnce(Box<dyn Link<'a, T>>) -> Box<dyn Link<'a, U>>,
    ) -> Pipeline<'a, U> {
        self.stages.push(StageInfo {
            name: None,
            workers,
        });
        Pipeline {
            head: link(self.head),
            stages: self.stages,
            capacity: self.capacity,
            progress: self.progress,
        }
    }
}
