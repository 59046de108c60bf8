//! What a run did: outputs, wall time, and busy time per stage.

use std::fmt;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::pipeline::StageInfo;
use super::StageClock;

/// The result of [`Pipeline::run`](super::Pipeline::run): the last stage's outputs in input
/// order, the wall time, and for every stage the time its threads spent inside the stage
/// function. The stage whose busy time per worker is closest to the wall time bounds the
/// stream; `Display` prints the table.
///
/// ```
/// use skel::stream::Pipeline;
/// let report = Pipeline::from_iter(0..8u32)
///     .farm(2, |x| Ok(x * 2)).name("double")
///     .stage(|x| Ok(x + 1))
///     .run()?;
/// assert_eq!(report.items(), 8);
/// assert_eq!(report.stages().len(), 2);
/// assert_eq!(report.stages()[0].items(), 8);
/// assert!(report.busiest().is_some());
/// assert!(report.to_string().contains("double"));
/// # Ok::<(), skel::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Report<T> {
    outputs: Vec<T>,
    wall: Duration,
    stages: Vec<StageReport>,
}

impl<T> Report<T> {
    pub(super) fn new(outputs: Vec<T>, wall: Duration, stages: Vec<StageReport>) -> Self {
        Report {
            outputs,
            wall,
            stages,
        }
    }

    /// The last stage's outputs, in input order.
    pub fn outputs(&self) -> &[T] {
        &self.outputs
    }

    /// The last stage's outputs, in input order, by value.
    pub fn into_outputs(self) -> Vec<T> {
        self.outputs
    }

    /// Items that went through the whole pipeline (all of the input).
    pub fn items(&self) -> usize {
        self.outputs.len()
    }

    /// From the start of `run` to the last item leaving the pipeline.
    pub fn wall(&self) -> Duration {
        self.wall
    }

    /// Items per second over the wall time.
    pub fn items_per_sec(&self) -> f64 {
        self.items() as f64 / self.wall.as_secs_f64().max(1e-12)
    }

    /// Every stage, in pipeline order.
    pub fn stages(&self) -> &[StageReport] {
        &self.stages
    }

    /// The stage with the most busy time per worker: the one that bounds the stream when
    /// the pipeline is not starved by its input.
    pub fn busiest(&self) -> Option<&StageReport> {
        self.stages
            .iter()
            .max_by_key(|s| s.busy / s.workers.max(1) as u32)
    }
}

/// One stage's share of a [`Report`].
///
/// ```
/// use skel::stream::Pipeline;
/// let report = Pipeline::from_iter(0..4).farm(3, Ok).run()?;
/// let s = &report.stages()[0];
/// assert_eq!((s.position(), s.workers(), s.items(), s.name()), (0, 3, 4, None));
/// assert!(s.utilisation(report.wall()) <= 1.0);
/// # Ok::<(), skel::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct StageReport {
    position: usize,
    name: Option<String>,
    workers: usize,
    items: usize,
    busy: Duration,
}

impl StageReport {
    pub(super) fn new(position: usize, info: StageInfo, clock: &StageClock) -> Self {
        StageReport {
            position,
            name: info.name,
            workers: info.workers,
            items: clock.items.load(Ordering::Relaxed),
            busy: Duration::from_nanos(clock.busy_ns.load(Ordering::Relaxed)),
        }
    }

    /// 0-based position in the pipeline (the `stage` of [`Error::Stage`](crate::Error::Stage)).
    pub fn position(&self) -> usize {
        self.position
    }

    /// The name given with [`Pipeline::name`](super::Pipeline::name).
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Threads of the stage: 1 for `.stage`, `w` for `.farm(w, ..)`.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// Items the stage function was called on.
    pub fn items(&self) -> usize {
        self.items
    }

    /// Time spent inside the stage function, summed over the stage's threads.
    pub fn busy(&self) -> Duration {
        self.busy
    }

    /// Busy time per item (zero when there were none).
    pub fn busy_per_item(&self) -> Duration {
        self.busy / u32::try_from(self.items.max(1)).unwrap_or(u32::MAX)
    }

    /// Fraction of the stage's thread time spent busy over `wall` (1.0: never waited).
    pub fn utilisation(&self, wall: Duration) -> f64 {
        self.busy.as_secs_f64() / (wall.as_secs_f64() * self.workers.max(1) as f64).max(1e-12)
    }
}

impl<T> fmt::Display for Report<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "  {:<22} {:>7} {:>7} {:>10} {:>10} {:>6}",
            "stage", "workers", "items", "busy ms", "ms/item", "busy%"
        )?;
        for s in &self.stages {
            let kind = if s.workers == 1 && s.name.is_none() {
                "stage"
            } else {
                s.name.as_deref().unwrap_or("farm")
            };
            writeln!(
                f,
                "  {:<22} {:>7} {:>7} {:>10.1} {:>10.3} {:>6.1}",
                format!("{} {kind}", s.position),
                s.workers,
                s.items,
                s.busy.as_secs_f64() * 1e3,
                s.busy_per_item().as_secs_f64() * 1e3,
                100.0 * s.utilisation(self.wall)
            )?;
        }
        let ms = self.wall.as_secs_f64() * 1e3;
        write!(
            f,
            "  {:<22} {:>7} {:>7} {:>10.1} {:>10.3}  -> {:.1} items/s",
            "total (wall)",
            "",
            self.items(),
            ms,
            ms / self.items().max(1) as f64,
            self.items_per_sec()
        )
    }
}
