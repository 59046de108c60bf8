//! Calibrated performance models for [`Backend::Auto`]: which backend runs a call.
//!
//! For each call on `Backend::Auto`, the time on every available backend is predicted from
//! a model kept per (skeleton, user function, element types, backend), after StarPU's
//! history-based models (Augonnet, Thibault, Namyst, HPPC 2009): the mean measured time
//! per power-of-two size bucket, and log-log interpolation between buckets for sizes in
//! between. To that is added the cost of moving every operand that is not valid where
//! the backend computes (a chain of calls on device-resident data stays on the device).
//! The minimum wins; ties go to the earlier of CUDA, OpenCL, Rayon, Cpu.
//!
//! Models calibrate lazily: while a candidate has no measurement for a call's size bucket
//! (and no measured buckets close on both sides to interpolate between, nor a measured
//! bucket within a factor of 16 in size to extrapolate from; between `cpu` and Rayon, a
//! candidate predicted from other sizes only and within [`HOST_RIVAL`] of the other counts
//! as unmeasured), the call runs on that
//! candidate and is timed; the backend a call runs on anyway is timed until its bucket has
//! two measurements. Calibration pays for itself: before any measurement each
//! candidate has a prediction, a roofline prior (the call's bytes over a default memory
//! bandwidth per device class, plus a launch latency; a candidate measured on another
//! backend scales that backend's measured time by the ratio of the priors); a candidate
//! predicted more than [`SKIP`] times slower than the best is never calibrated, and trying
//! a candidate other than the predicted best spends a job-wide budget of [`BUDGET_SHARE`]
//! of the time since the first `Auto` call (at least [`BUDGET_FLOOR_NS`];
//! [`crate::config::TUNE_BUDGET`] sets the share). While a CUDA kernel compiles (NVRTC on a
//! thread of its own, started by the first call that needs it; the module is then loaded by
//! the next call, on its own thread), CUDA is no candidate for that function: its calls run
//! on the host until the kernel is ready. Only a call CUDA is predicted fastest for starts
//! a compile; a trial of CUDA as another candidate runs only where the kernel is built, and
//! where it is not, CUDA is tried no more for the function until a build finishes. (OpenCL
//! programs are built in place:
//! `clBuildProgram` needs the driver, and no thread but a caller's enters a driver.)
//! An OpenCL CPU device (PoCL) is a candidate only once a call on `Backend::OpenCl`
//! opened it (its worker threads slow Rayon down on the same cores). The first call of a
//! function on a device in a process is not recorded (it compiles or loads the kernel);
//! the first call of each later size bucket there is (pessimistic: it allocates; the
//! bucket's next measurement replaces it), so a job whose every call has a new size leaves
//! calibration (Rayon's thread pool is created before anything is timed; a first run more
//! than [`SKIP`] times slower than another backend's measurement predicts is dropped, and
//! its backend runs again). A call right after an `Auto` call on another backend is not
//! recorded either where a device is on either side of the switch (a switch between
//! devices, or between host and device, costs the call after it; at most [`MAX_WARMUPS`]
//! times per bucket, for threads that keep switching); between `cpu` and Rayon it is.
//! Then, as StarPU keeps calibrating until a model is stable: while the 95 % intervals of
//! the two fastest candidates' times overlap and one of them is wider than ±[`STABLE`] of
//! its mean, one of them runs again (up to [`MAX_SAMPLES`] per bucket; a bucket of one
//! measurement counts as ±25 %). Between the two host backends a candidate's prediction
//! from the other's measurement scales only the part above the launch cost (a
//! compute-bound call measured on Rayon is about as many times slower on `cpu` as Rayon
//! has threads). Results are always those of the backend that ran. [`calibrate`] measures
//! the host-device links. The sequential `cpu` backend is a candidate up to [`CPU_MAX`]
//! elements only, where Rayon is available on [`SKIP`] threads or more.
//!
//! Map, Reduce and MapReduce calls large enough that both Rayon and a GPU pay are split
//! between them in proportion to their predicted throughput (SkePU's hybrid backend):
//! the GPU takes the tail of the elements, Rayon the head, at the same time.
//!
//! The models persist in `model.json` (JSON, `serde_json`) in `$SKEL_TUNE_DIR`, else in
//! `tune/` next to the compiled kernels (see [`crate::config::CACHE_DIR`]), written when a
//! calibration pauses (the first decision after new samples that needs no measurement)
//! and, for a job that never pauses, as its main thread exits (a bucket measured only by a
//! first run is saved as such, and the next steady run replaces it, in a later process
//! too, so a job of a few calls does not try the same candidates again in every process);
//! deleting it only costs recalibration. A file that is damaged, of another version, or of
//! the earlier text format (`model-v2.txt`) is reported in a log warning (the `log` crate,
//! target `skel::tune`) and `Backend::Auto` calibrates afresh, replacing it on the next save.
//! A file that cannot be read at all (not a regular file, an I/O error) makes
//! `Backend::Auto` use the static order (CUDA, then an OpenCL GPU, then Rayon, then `cpu`)
//! among the backends open now, opening CUDA in the background for later calls (an OpenCL
//! device is not opened then), and logs a warning once; one that cannot be written leaves the models in memory (also logged once).
//! None of these fails a call.
//! [`explain`] returns why the calling thread's last `Auto` call ran where it did;
//! `SKEL_TUNE_LOG=1` logs every decision (`info`). Both variables are in [`crate::config`].
//!
//! ```
//! use skel::prelude::*;
//!
//! #[userfn]
//! fn add(a: f32, b: f32) -> f32 { a + b }
//!
//! skel::tune::set_model_dir(None); // in memory only, for this example
//! let v = Vector::from(vec![1.0f32; 1000]);
//! let s = Reduce::new(add).backend(Backend::Auto).run(&v)?;
//! assert_eq!(s, 1000.0);
//! let why = skel::tune::explain().expect("an Auto call ran on this thread");
//! assert_eq!(why.size, 1000);
//! println!("{why}");
//! # Ok::<(), skel::Error>(())
//! ```

pub(crate) mod model;
#[cfg(test)]
mod tests;
mod watch;

pub(crate) use watch::host_call;

use std::any::TypeId;
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Instant;

pub use model::Bucket;
use model::{bucket_of, Key, Models};

use crate::{Backend, Result};

/// Beyond this many elements the sequential `cpu` backend is no candidate when Rayon is
/// available on at least [`SKIP`] threads (Rayon runs calls below its chunk size inline,
/// so it is never slower there, and above it the priors rule `cpu` out anyway). With fewer
/// threads `cpu` stays a candidate at every size: on 2 cores a parallel scan, which does
/// twice the work, or a call beside busy farm threads may be faster sequentially (SkePU's
/// cma: 8.2 runs/s on `cpu` against 6.9 on Rayon), and the priors leave it within [`SKIP`].
pub const CPU_MAX: usize = 1 << 16;

/// The most measurements a size bucket takes while the two fastest candidates cannot be
/// told apart.
pub const MAX_SAMPLES: u32 = 8;

/// The most warm-up runs (not recorded) per candidate and size bucket.
pub const MAX_WARMUPS: u32 = 3;

/// Two candidates whose 95 % intervals overlap are still told apart once both intervals
/// are within this fraction of their means (the choice is then good to about twice that).
pub const STABLE: f64 = 0.04;

/// The spread assumed for a bucket of one measurement (a fraction of its time), until a
/// second one measures it: two candidates measured once each are told apart when they
/// differ by more than that.
pub(crate) const ONE_RUN_SPREAD: f64 = 0.25;

/// Calls smaller than this are never split between CPU and GPU.
pub const HYBRID_MIN: usize = 1 << 20;

/// A split must be predicted this much faster than the best single backend.
const HYBRID_GAIN: f64 = 0.9;

/// Bytes per second assumed for a host-device link before [`calibrate`] measured it.
const DEFAULT_LINK: f64 = 1.0e10;

/// A candidate predicted this many times slower than the best is never calibrated.
pub const SKIP: f64 = 4.0;

/// How many times its steady time a warm-up run is assumed to take at most.
const WARMUP_FACTOR: f64 = 2.0;

/// The default share of the job's time (since the first `Auto` call) that calibrating
/// candidates other than the predicted best may take ([`crate::config::TUNE_BUDGET`]).
pub const BUDGET_SHARE: f64 = 0.05;

/// The calibration budget at the start of a job (ns) at the default share, before that
/// share of its time exceeds it (in proportion at other shares).
pub const BUDGET_FLOOR_NS: f64 = 50.0e6;

/// Roofline priors: bytes per second one host core streams through a call.
const CORE_BYTES_PER_S: f64 = 4.0e9;
/// ... a GPU (CUDA, or an OpenCL GPU): a conservative figure for current cards.
const GPU_BYTES_PER_S: f64 = 5.0e11;
/// Launch latency (ns) of a Rayon call that splits, a CUDA launch, an OpenCL launch.
const RAYON_LATENCY_NS: f64 = 5_000.0;
const CUDA_LATENCY_NS: f64 = 10_000.0;
const OPENCL_LATENCY_NS: f64 = 30_000.0;
/// A Rayon call right after a `cpu` one, predicted under this many times
/// [`RAYON_LATENCY_NS`], is a warm-up: waking the parked workers is much of its time.
const WAKE_FACTOR: f64 = 10.0;

/// Fixed cost of one transfer (ns): driver call and synchronisation.
const TRANSFER_LATENCY_NS: f64 = 10_000.0;

/// How a call was placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Choice {
    /// The whole call ran on one backend.
    Backend(Backend),
    /// Elements `..cpu_elems` ran on `cpu`, the rest on `gpu`, at the same time.
    Split {
        /// The host backend (Rayon).
        cpu: Backend,
        /// The device backend.
        gpu: Backend,
        /// How many leading elements the host backend computed.
        cpu_elems: usize,
    },
}

impl fmt::Display for Choice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Choice::Backend(b) => write!(f, "{b}"),
            Choice::Split {
                cpu,
                gpu,
                cpu_elems,
            } => write!(f, "{cpu} (first {cpu_elems} elements) + {gpu} (the rest)"),
        }
    }
}

/// One candidate backend of a decision.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// The backend.
    pub backend: Backend,
    /// Predicted compute time in ns with the operands in place (`None`: no history yet).
    pub predicted_ns: Option<f64>,
    /// Predicted time to move the operands not valid where this backend computes (ns).
    pub transfer_ns: f64,
    /// The measured history: (size bucket `b`, holding sizes `2^(b-1)..2^b`, its samples).
    pub history: Vec<(u32, Bucket)>,
}

/// Why a `Backend::Auto` call ran where it did (see [`explain`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Explanation {
    /// The skeleton form (`map`, `reduce`, `map_reduce`, `scan`, ...).
    pub skeleton: String,
    /// The user function's Rust path.
    pub function: String,
    /// The element types, `inputs->output`.
    pub types: String,
    /// Elements in the call.
    pub size: usize,
    /// Where it ran.
    pub choice: Choice,
    /// Why: `predicted fastest`, `calibrating`, `static order: ...`, ...
    pub reason: String,
    /// Every backend considered.
    pub candidates: Vec<Candidate>,
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} of {} on {}, {} elements: {} ({})",
            self.skeleton, self.function, self.types, self.size, self.choice, self.reason
        )?;
        for c in &self.candidates {
            let predicted = c
                .predicted_ns
                .map_or("no history".to_string(), |t| format!("{:.1} us", t / 1e3));
            write!(
                f,
                "  {:<7} compute {predicted}, transfers {:.1} us; history:",
                c.backend.to_string(),
                c.transfer_ns / 1e3
            )?;
            for (b, h) in &c.history {
                write!(
                    f,
                    " [2^{}: {:.1} us x{}]",
                    b.saturating_sub(1),
                    h.mean_ns / 1e3,
                    h.count
                )?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

/// What [`calibrate`] measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Calibration {
    /// Host-to-device bytes per second, per device backend measured.
    pub links: Vec<(Backend, f64)>,
    /// The model file written, if any.
    pub model_file: Option<PathBuf>,
}

impl fmt::Display for Calibration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (b, bw) in &self.links {
            writeln!(f, "{b}: host-device link {:.2} GB/s", bw / 1e9)?;
        }
        match &self.model_file {
            Some(p) => write!(f, "models in {}", p.display()),
            None => write!(f, "models in memory only"),
        }
    }
}

/// How a decided call is to be run and measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Measure {
    /// Not timed.
    No,
    /// The first run of this function on this backend in the process: timed runs would
    /// include the kernel build.
    Warmup,
    /// Timed and recorded.
    Sample,
    /// The first run of a size bucket on a backend whose kernel is loaded: timed and
    /// recorded (pessimistic: fresh allocations), replaced by the bucket's next sample.
    FirstRun,
}

/// A decision: where the call runs and whether it is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Decision {
    pub choice: Choice,
    pub measure: Measure,
    /// A trial of a candidate other than the predicted best: its time spends the
    /// calibration budget.
    pub explore: bool,
}

/// One call as the tuner sees it.
#[derive(Clone, Debug)]
pub(crate) struct Call {
    pub key: Key,
    pub size: usize,
    /// Per candidate: the bytes it would have to move, with the link they cross.
    pub moves: Vec<(Backend, Vec<(Backend, u64)>)>,
    /// Whether the call may be split between Rayon and a GPU.
    pub splittable: bool,
    /// Bytes of all its operands: the most any candidate could have to move.
    pub total_bytes: u64,
}

impl Call {
    pub(crate) fn new(skeleton: &str, function: &str, types: String, size: usize) -> Call {
        Call {
            key: Key {
                skeleton: skeleton.to_string(),
                types: types.replace(char::is_whitespace, ""),
                function: function.replace(char::is_whitespace, ""),
            },
            size,
            moves: Vec::new(),
            splittable: false,
            total_bytes: 0,
        }
    }

    fn moved_bytes(&self, backend: Backend) -> u64 {
        self.moves
            .iter()
            .find(|(b, _)| *b == backend)
            .map_or(0, |(_, m)| m.iter().map(|(_, bytes)| bytes).sum())
    }
}

struct Tuner {
    models: Models,
    dir: Option<PathBuf>,
    /// Why the model file could not be read: decisions then follow the static order.
    unreadable: Option<String>,
    /// A save failed (reported once); later failures are silent.
    unwritable: bool,
    /// Samples were recorded since the last save (saved once calibration pauses: file I/O
    /// between samples would disturb the next one).
    unsaved: bool,
    /// Warm-up runs per (function key, backend, size bucket) in this process.
    warmed: HashMap<(Key, Backend, u32), u32>,
    /// Device backends whose kernel for a function is being compiled: no candidates for
    /// it until a build finishes.
    compiling: std::collections::HashSet<(Key, Backend)>,
    /// Device backends whose kernel for a function is not built, and whose trial was not
    /// worth a compile: no trials of them until a build finishes (they still run where
    /// predicted fastest, which compiles).
    unbuilt: std::collections::HashSet<(Key, Backend)>,
    /// When the first `Auto` call of the job was decided.
    started: Option<Instant>,
    /// Time spent trying candidates other than the predicted best (ns).
    explore_ns: f64,
    /// The fastest warm-up run seen per function and backend, as (elements, ns): an upper
    /// bound on its steady time where no sample is recorded yet.
    first_runs: HashMap<(Key, Backend), (usize, f64)>,
    /// Functions that ran on a device backend in this process: their kernel is loaded, so
    /// the first run of a new size there is timed as a measurement (pessimistic: it
    /// allocates), not as a warm-up. Host backends have no kernel to load.
    loaded: std::collections::HashSet<(Key, Backend)>,
    /// Functions and backends whose first run was dropped as far slower than another
    /// backend's measurement predicted: once only (a backend truly that much slower than
    /// the priors say would otherwise never be recorded in a job of ever new sizes).
    doubted: std::collections::HashSet<(Key, Backend)>,
    /// The threads Rayon runs on, for the roofline priors.
    cores: usize,
    /// Decisions replayed by the unit tests: the job's elapsed time and the backend the
    /// last call ran on, instead of the clock and the process-wide record.
    sim: Option<Sim>,
}

/// What the unit tests inject into a [`Tuner`] (see `Tuner::sim`).
#[derive(Clone, Copy, Debug, Default)]
struct Sim {
    elapsed_ns: f64,
    last: Option<Backend>,
}

impl Tuner {
    fn open(dir: Option<PathBuf>) -> Tuner {
        let (models, unreadable) = match dir.as_deref().map(model::load) {
            None => (Models::default(), None),
            Some(Ok(m)) => (m, None),
            Some(Err(why)) => {
                log::warn!(
                    "the tune model cannot be read ({why}): Backend::Auto uses the static \
                     order (CUDA, then an OpenCL GPU, then Rayon); delete the file to \
                     recalibrate"
                );
                (Models::default(), Some(why.to_string()))
            }
        };
        Tuner {
            models,
            dir,
            unreadable,
            unwritable: false,
            unsaved: false,
            warmed: HashMap::new(),
            compiling: Default::default(),
            unbuilt: Default::default(),
            started: None,
            explore_ns: 0.0,
            first_runs: HashMap::new(),
            loaded: Default::default(),
            doubted: Default::default(),
            cores: rayon_threads(),
            sim: None,
        }
    }

    /// Nanoseconds since the job's first `Auto` call.
    fn elapsed_ns(&self) -> f64 {
        match self.sim {
            Some(sim) => sim.elapsed_ns,
            None => self
                .started
                .map_or(0.0, |s| s.elapsed().as_secs_f64() * 1e9),
        }
    }

    /// Whether the last `Auto` call ran on `backend`.
    fn ran_last(&self, backend: Backend) -> bool {
        match self.sim {
            Some(sim) => sim.last == Some(backend),
            None => ran_last(backend),
        }
    }

    /// Whether a run of `call` on `backend` now is timed as a steady run would be: the
    /// last `Auto` call ran there too, or both are host backends (a switch between `cpu`
    /// and Rayon moves nothing and loads nothing; only one to or from a device costs the
    /// call after it, which is then a warm-up). But Rayon right after `cpu` wakes its
    /// parked workers first: a call predicted under [`WAKE_FACTOR`] times Rayon's launch
    /// cost would take that for its own time, so it is a warm-up.
    fn switch_free(&self, call: &Call, backend: Backend) -> bool {
        let last = match self.sim {
            Some(sim) => sim.last,
            None => last_ran(),
        };
        if last == Some(backend) {
            return true;
        }
        let host = last.is_some_and(|l| !is_device(l)) && !is_device(backend);
        let waking = backend == Backend::Rayon && last == Some(Backend::Cpu) && {
            let n = call.size as f64;
            let rayon = self.predicted(call, backend);
            rayon.unwrap_or_else(|| self.prior(call, backend, n)) < WAKE_FACTOR * RAYON_LATENCY_NS
        };
        host && !waking
    }

    /// The roofline prior of `call` on `backend` ([`prior_at`]) at `n` elements.
    fn prior(&self, call: &Call, backend: Backend, n: f64) -> f64 {
        prior_at(call, backend, n, self.cores)
    }

    /// Whether trying a candidate other than the predicted best, predicted to take
    /// `cost_ns`, still fits the budget.
    fn within_budget(&self, cost_ns: f64) -> bool {
        let share = f64::from(crate::config::TUNE_BUDGET.value()) / 100.0;
        if share == 0.0 {
            return false;
        }
        let elapsed = self.elapsed_ns();
        let floor = BUDGET_FLOOR_NS * share / BUDGET_SHARE;
        self.explore_ns + cost_ns <= floor.max(share * elapsed)
    }

    /// The predicted total time of `c` (compute and transfers): its model where it has
    /// history, else its roofline prior scaled by the measured candidate's time over that
    /// candidate's prior (the same function's cost on another backend), else the prior.
    fn estimate(&self, call: &Call, c: &Candidate, rows: &[Candidate]) -> f64 {
        let compute = c.predicted_ns.unwrap_or_else(|| {
            let n = call.size as f64;
            rows.iter()
                .find_map(|r| Some(self.scaled(call, r.backend, r.predicted_ns?, c.backend)))
                .unwrap_or_else(|| self.prior(call, c.backend, n))
        });
        compute + c.transfer_ns
    }

    /// The compute time of `call` on `to` predicted from `measured` on `from`: the measured
    /// time scaled by the ratio of their roofline priors; but between the two host
    /// backends, which share one model of the cores, a measurement [`SKIP`] times above
    /// `from`'s prior or more is read as its launch cost plus work, and only the work is
    /// scaled (a compute-bound call measured at 2.6 ms on 16 cores' Rayon is about 16 times
    /// that on `cpu`, not the 4 times a prior dominated by Rayon's launch cost says). A
    /// measurement nearer its prior is mostly launch cost and noise (Rayon waking its
    /// workers): read as work, a 25 us Map of 8192 `f32` would predict `cpu` 13 times
    /// slower, never tried, where it takes about as long.
    fn scaled(&self, call: &Call, from: Backend, measured: f64, to: Backend) -> f64 {
        let n = call.size as f64;
        let (from_fixed, from_work) = prior_parts(call, from, n, self.cores);
        let (to_fixed, to_work) = prior_parts(call, to, n, self.cores);
        let host = |b| matches!(b, Backend::Cpu | Backend::Rayon);
        let compute_bound = measured >= SKIP * (from_fixed + from_work);
        if host(from) && host(to) && from_work > 0.0 && compute_bound {
            return to_fixed + (measured - from_fixed) * to_work / from_work;
        }
        measured * (to_fixed + to_work) / (from_fixed + from_work).max(1e-9)
    }

    /// What trying `c` is predicted to cost: [`Tuner::estimate`], but at least the time of
    /// its fastest warm-up run so far over [`WARMUP_FACTOR`] (a warm-up, with allocation
    /// and first upload, takes at most a few times the steady time), so a candidate whose
    /// warm-up showed it far slower is not tried again on a prior's optimism.
    fn trial_cost(&self, call: &Call, c: &Candidate, rows: &[Candidate]) -> f64 {
        let first = match c.predicted_ns {
            Some(_) => 0.0,
            None => self
                .first_runs
                .get(&(call.key.clone(), c.backend))
                .map_or(0.0, |&(n, ns)| {
                    ns * call.size.max(1) as f64 / n.max(1) as f64
                }),
        };
        self.estimate(call, c, rows).max(first / WARMUP_FACTOR)
    }

    fn link(&self, backend: Backend) -> f64 {
        self.models
            .link
            .get(&backend)
            .copied()
            .unwrap_or(DEFAULT_LINK)
    }

    fn transfer_ns(&self, call: &Call, backend: Backend) -> f64 {
        call.moves
            .iter()
            .filter(|(b, _)| *b == backend)
            .flat_map(|(_, m)| m)
            .filter(|(_, bytes)| *bytes > 0)
            .map(|&(link, bytes)| bytes as f64 / self.link(link) * 1e9 + TRANSFER_LATENCY_NS)
            .fold(0.0, |a, b| a + b)
    }

    /// The compute time of `call` on `backend` from its history: the measured or bracketed
    /// bucket's interpolation, else the nearest measured bucket's time as the backend's
    /// launch latency plus a part in proportion to the size (a GPU measured near its
    /// latency stays there for larger calls; a call measured far above it, compute-bound,
    /// grows with the size).
    fn predicted(&self, call: &Call, backend: Backend) -> Option<f64> {
        let (key, n) = (&call.key, call.size);
        if self.models.bracketed(key, backend, n) {
            return self.models.predict(key, backend, n);
        }
        let near = self.models.nearest(key, backend, n)?;
        let measured = near.mean_ns.max(1.0);
        let fixed = latency_ns(backend).min(measured);
        Some(fixed + (measured - fixed) * n.max(1) as f64 / near.mean_n.max(1.0))
    }

    fn candidate(&self, call: &Call, backend: Backend) -> Candidate {
        Candidate {
            backend,
            predicted_ns: self.predicted(call, backend),
            transfer_ns: self.transfer_ns(call, backend),
            history: self
                .models
                .buckets(&call.key, backend)
                .map(|h| h.iter().map(|(b, v)| (*b, *v)).collect())
                .unwrap_or_default(),
        }
    }

    /// A timed run of `call` on `b`: a warm-up, not recorded, where it is the first of its
    /// size bucket in this process or the last `Auto` call ran elsewhere (up to
    /// [`MAX_WARMUPS`] warm-ups).
    fn trial(&self, call: &Call, b: Backend, why: &str, explore: bool) -> (Decision, String) {
        let warmups = self
            .warmed
            .get(&(call.key.clone(), b, bucket_of(call.size)))
            .copied()
            .unwrap_or(0);
        let warm = warmups > 0;
        let loaded = !is_device(b) || self.loaded.contains(&(call.key.clone(), b));
        let unmeasured = self.models.own(&call.key, b, call.size).is_none();
        let (measure, why) = if !warm && loaded && unmeasured {
            // Without this, a job whose every call has a new size (photos) never records a
            // device measurement: each first run of a size would be a warm-up.
            let first = "first run of this size, counted (its kernel is loaded; allocation \
                         included, replaced by the next run)";
            (Measure::FirstRun, format!("calibrating: {why}; {first}"))
        } else if warm && (self.switch_free(call, b) || warmups >= MAX_WARMUPS) {
            (Measure::Sample, format!("calibrating: {why}"))
        } else if warm {
            (
                Measure::Warmup,
                "calibrating: first run after a call elsewhere".into(),
            )
        } else if is_device(b) {
            (
                Measure::Warmup,
                "calibrating: first run of this size (kernel build, allocation, upload)".into(),
            )
        } else {
            (
                Measure::Warmup,
                "calibrating: first run of this size in this process (fresh memory)".into(),
            )
        };
        (
            Decision {
                choice: Choice::Backend(b),
                measure,
                explore,
            },
            why,
        )
    }

    /// Records a run of `call` on `backend` as `d` asked; whether the models changed.
    fn finish(&mut self, call: &Call, backend: Backend, d: Decision, elapsed_ns: f64) -> bool {
        if d.explore {
            self.explore_ns += elapsed_ns;
        }
        let bucket = (call.key.clone(), backend, bucket_of(call.size));
        if is_device(backend) && d.measure != Measure::No {
            self.loaded.insert((call.key.clone(), backend));
        }
        match d.measure {
            Measure::No => return false,
            Measure::Warmup => {
                let first = self
                    .first_runs
                    .entry((call.key.clone(), backend))
                    .or_insert((call.size, elapsed_ns));
                if elapsed_ns / (call.size.max(1) as f64) < first.1 / (first.0.max(1) as f64) {
                    *first = (call.size, elapsed_ns);
                }
                *self.warmed.entry(bucket).or_default() += 1;
                return false;
            }
            Measure::Sample | Measure::FirstRun => {}
        }
        let moved = self.transfer_ns(call, backend);
        let ns = (elapsed_ns - moved).max(0.1 * elapsed_ns);
        let outlier = d.measure == Measure::FirstRun
            && self
                .predicted(call, backend)
                .is_some_and(|p| ns > SKIP * p.max(1.0));
        // Without a prediction of its own, a first run is held against the other backends'
        // measurements (a host backend's first run of a function in the process may pay
        // for more than its call: page faults of fresh memory, a thread pool).
        let doubted = d.measure == Measure::FirstRun
            && self.predicted(call, backend).is_none()
            && !self.doubted.contains(&(call.key.clone(), backend))
            && self
                .predicted_by_others(call, backend)
                .is_some_and(|e| ns > SKIP * e.max(1.0));
        if doubted {
            self.doubted.insert((call.key.clone(), backend));
        }
        let outlier = outlier || doubted;
        if outlier {
            // A first run far slower than the function's other sizes (or backends) predict
            // built something (another kernel of the form): a warm-up after all.
            *self.warmed.entry(bucket).or_default() += 1;
            return false;
        }
        if d.measure == Measure::FirstRun {
            self.models.record(&call.key, backend, call.size, ns);
            self.models.provisional.insert(bucket.clone());
        } else if self.models.provisional.remove(&bucket) {
            self.models.replace(&call.key, backend, call.size, ns);
        } else {
            self.models.record(&call.key, backend, call.size, ns);
        }
        // The bucket has run here: its next run is no first run (not a warm-up count).
        self.warmed.entry(bucket).or_insert(1);
        self.drop_outlying_first_runs(call, backend);
        self.unsaved = true;
        true
    }

    /// The compute time of `call` on `backend` predicted from the other backends'
    /// measurements of the function (each scaled as [`Tuner::scaled`] says; the most
    /// generous of them), if any has one.
    fn predicted_by_others(&self, call: &Call, backend: Backend) -> Option<f64> {
        self.models
            .history
            .keys()
            .filter(|(k, b)| *k == call.key && *b != backend)
            .filter_map(|&(_, b)| Some(self.scaled(call, b, self.predicted(call, b)?, backend)))
            .reduce(f64::max)
    }

    /// Drops the first runs (provisional buckets, the only history of their backend) of
    /// `call`'s size bucket that a measurement just recorded on `measured` shows more
    /// than [`SKIP`] times too slow (once per function and backend): such a run paid for something else (a host backend's
    /// first call creates its thread pool), and kept, it would make its backend lose
    /// every later decision without another trial. The bucket's next run is then a
    /// warm-up or a sample, never a first run again.
    fn drop_outlying_first_runs(&mut self, call: &Call, measured: Backend) {
        let b = bucket_of(call.size);
        let suspects: Vec<Backend> = self
            .models
            .provisional
            .iter()
            .filter(|(k, other, pb)| *k == call.key && *other != measured && *pb == b)
            .map(|&(_, other, _)| other)
            .collect();
        for other in suspects {
            let only = self
                .models
                .buckets(&call.key, other)
                .is_some_and(|h| h.len() == 1);
            let (Some(own), Some(expected)) = (
                self.models
                    .own(&call.key, other, call.size)
                    .map(|h| h.mean_ns),
                self.predicted_by_others(call, other),
            ) else {
                continue;
            };
            if only
                && own > SKIP * expected.max(1.0)
                && self.doubted.insert((call.key.clone(), other))
            {
                self.models.history.remove(&(call.key.clone(), other));
                self.models
                    .provisional
                    .remove(&(call.key.clone(), other, b));
            }
        }
    }

    fn save(&mut self) {
        self.save_with(true);
    }

    /// Saves the models; where `wait` is false, only if no other process is saving (else
    /// skipped, logged at `debug`).
    fn save_with(&mut self, wait: bool) {
        self.unsaved = false;
        let Some(dir) = &self.dir else { return };
        let saved = match wait {
            true => model::save(dir, &self.models).map(|()| true),
            false => model::save_if_unlocked(dir, &self.models),
        };
        if let Ok(false) = saved {
            log::debug!(
                "the tune model is not saved at exit: another process holds {}",
                dir.join(model::LOCK).display()
            );
        }
        if let Err(why) = saved {
            if !self.unwritable {
                log::warn!("the tune model cannot be saved ({why}): models stay in memory");
            }
            self.unwritable = true;
        }
    }
}

static TUNER: OnceLock<Mutex<Tuner>> = OnceLock::new();

fn tuner() -> MutexGuard<'static, Tuner> {
    TUNER
        .get_or_init(|| {
            crate::backends::start_host_pool();
            Mutex::new(Tuner::open(model::default_dir()))
        })
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// What a call's decision is remembered by on the fast path: the user function (which fixes
/// the element types), the skeleton form, the size bucket, and which of host / CUDA device
/// / OpenCL device hold all of the operands (bits 0, 1, 2). Built from constants and the
/// size without allocating; the skeleton name is compared and hashed by address (each call
/// site passes its own literal, so one form is one address; two addresses for one name
/// would only cost a second remembered decision).
#[derive(Clone, Copy, Debug)]
pub(crate) struct FastKey {
    pub function: TypeId,
    pub skeleton: &'static str,
    pub bucket: u32,
    pub places: u8,
}

impl PartialEq for FastKey {
    fn eq(&self, other: &FastKey) -> bool {
        self.function == other.function
            && std::ptr::eq(self.skeleton, other.skeleton)
            && self.bucket == other.bucket
            && self.places == other.places
    }
}

impl Eq for FastKey {}

impl std::hash::Hash for FastKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.function.hash(state);
        state.write_usize(self.skeleton.as_ptr() as usize);
        state.write_u64(u64::from(self.bucket) | u64::from(self.places) << 32);
    }
}

/// A remembered decision: a split is kept as the Rayon share of the elements.
#[derive(Clone, Copy)]
enum Remembered {
    Backend(Backend),
    Split {
        cpu: Backend,
        gpu: Backend,
        share: f64,
    },
}

/// Bumped whenever the models change: remembered decisions of older generations are stale.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The backend the last `Auto` call ran on (`backend as u8 + 1`, 0 before any).
static LAST_RAN: AtomicU8 = AtomicU8::new(0);

/// Notes that an `Auto` call ran on `backend` (one relaxed store per call).
pub(crate) fn ran(backend: Backend) {
    LAST_RAN.store(backend as u8 + 1, Ordering::Relaxed);
}

fn ran_last(backend: Backend) -> bool {
    LAST_RAN.load(Ordering::Relaxed) == backend as u8 + 1
}

/// The backend the last `Auto` call ran on, if any.
fn last_ran() -> Option<Backend> {
    let v = LAST_RAN.load(Ordering::Relaxed);
    Backend::ALL.into_iter().find(|&b| b as u8 + 1 == v)
}

/// What each thread keeps: one thread-local, so the fast path pays one access.
#[derive(Default)]
struct Local {
    /// The thread's last decision (its explanation, the call's size and choice).
    last: Option<(Rc<Explanation>, usize, Choice)>,
    /// Decisions that needed no measurement, per fast key, with their generation.
    decided: Decided,
    /// The remembered decision `last` came from (a loop repeats one call: no hashing).
    hit: Option<(FastKey, u64, Remembered)>,
}

thread_local! {
    static LOCAL: RefCell<Local> = RefCell::new(Local::default());
}

/// The hasher of [`FastKey`]s (a few words, no untrusted input): FxHash, as rustc's own
/// tables; the lookup is on every `Auto` call, where SipHash alone cost about as much as a
/// small call.
type FastHash = rustc_hash::FxBuildHasher;

/// Remembered decisions: per fast key, the models' generation, the decision, and why.
type Decided = HashMap<FastKey, (u64, Remembered, Rc<Explanation>), FastHash>;

fn log_enabled() -> bool {
    crate::config::TUNE_LOG.value()
}

/// The decision remembered for `fast` (same models, same size bucket, operands in the
/// same places), if any: the per-call fast path, which skips prediction.
pub(crate) fn remembered(fast: &FastKey, size: usize) -> Option<Decision> {
    let generation = GENERATION.load(Ordering::Acquire);
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        let l = &mut *l;
        let repeated = l
            .hit
            .filter(|(k, g, _)| k == fast && *g == generation)
            .map(|(_, _, r)| r);
        let (r, why) = match repeated {
            Some(r) => (r, None),
            None => {
                let (g, r, why) = l.decided.get(fast)?;
                if *g != generation {
                    return None;
                }
                l.hit = Some((*fast, generation, *r));
                (*r, Some(why.clone()))
            }
        };
        let choice = match r {
            Remembered::Backend(b) => Choice::Backend(b),
            Remembered::Split { cpu, gpu, share } => Choice::Split {
                cpu,
                gpu,
                cpu_elems: ((size as f64 * share) as usize).clamp(1, size.saturating_sub(2)),
            },
        };
        match (why, &mut l.last) {
            (None, Some(last)) => (last.1, last.2) = (size, choice),
            (why, last) => *last = why.map(|why| (why, size, choice)),
        }
        Some(Decision {
            choice,
            measure: Measure::No,
            explore: false,
        })
    })
}

/// The roofline prior of a call like `call` but of `n` elements on `backend` (ns, operands
/// in place) with Rayon on `cores` threads: its bytes (read, and about half as many
/// written) over the device class's default bandwidth, plus a launch.
fn prior_at(call: &Call, backend: Backend, n: f64, cores: usize) -> f64 {
    let (latency, work) = prior_parts(call, backend, n, cores);
    latency + work
}

/// [`prior_at`] as its two parts: the fixed cost of a launch, and the part in proportion to
/// the bytes (ns).
fn prior_parts(call: &Call, backend: Backend, n: f64, cores: usize) -> (f64, f64) {
    let per_elem = call.total_bytes.max(call.size as u64) as f64 / call.size.max(1) as f64;
    let bytes = per_elem * n * 1.5;
    let cores = cores.max(1) as f64;
    let one_core = bytes / CORE_BYTES_PER_S * 1e9;
    let all_cores = one_core / cores + RAYON_LATENCY_NS;
    match backend {
        Backend::Cpu => (0.0, one_core),
        // Below its chunk size Rayon runs inline, as fast as `cpu`.
        Backend::Rayon if one_core <= all_cores => (0.0, one_core),
        Backend::Rayon => (RAYON_LATENCY_NS, one_core / cores),
        Backend::Cuda => (CUDA_LATENCY_NS, bytes / GPU_BYTES_PER_S * 1e9),
        // Asked of an open device only: a prior (of a backend in the model file, say)
        // must not open one on the calling thread.
        Backend::OpenCl if crate::backends::opencl_opened() && crate::backends::opencl_is_gpu() => {
            (OPENCL_LATENCY_NS, bytes / GPU_BYTES_PER_S * 1e9)
        }
        // An OpenCL CPU device (PoCL) has the cores Rayon has.
        _ => (OPENCL_LATENCY_NS, one_core / cores),
    }
}

/// The fixed cost of a call on `backend` in the roofline priors (ns).
fn latency_ns(backend: Backend) -> f64 {
    match backend {
        Backend::Cpu => 0.0,
        Backend::Rayon => RAYON_LATENCY_NS,
        Backend::Cuda => CUDA_LATENCY_NS,
        _ => OPENCL_LATENCY_NS,
    }
}

/// The threads Rayon runs calls on (the machine's cores where Rayon is not built in).
fn rayon_threads() -> usize {
    static THREADS: OnceLock<usize> = OnceLock::new();
    *THREADS.get_or_init(|| {
        std::thread::available_parallelism()
            .map(std::num::NonZeroUsize::get)
            .unwrap_or(1)
    })
}

/// The best host backend: where calls run while their GPU kernel compiles.
pub(crate) fn host_backend() -> Backend {
    if Backend::Rayon.check().is_ok() {
        Backend::Rayon
    } else {
        Backend::Cpu
    }
}

/// Notes that `call` (where known) could not run on `backend` because its kernel is still
/// compiling in the background (`started`), or is not built and not worth building for a
/// trial, and that it ran on `host` instead: `backend` is no candidate for the call's
/// function until a kernel build finishes ([`kernel_ready`]), or in the second case no
/// candidate for a trial (it still runs the calls it is predicted fastest for, which start
/// the compile).
pub(crate) fn compiling(
    call: Option<&Call>,
    backend: Backend,
    host: Backend,
    started: bool,
    finished_before: u64,
) {
    // Only a compile under way rules the device out for the function (until a compile
    // finishes, [`kernel_ready`]); a trial that was not worth a compile leaves it a
    // candidate where it is predicted fastest, but no more trials elsewhere (each would
    // run on the host again, untimed, and keep the calls off the remembered decisions);
    // a compile that finished since the call began must not leave either mark.
    if let Some(call) = call {
        let mut t = tuner();
        // Read under the tuner's lock: a compile finishing after this reading clears the
        // mark ([`kernel_ready`] takes the lock after counting itself finished).
        let none_finished = crate::backends::kernel_cache::compiles_finished() == finished_before;
        let marks = match started {
            true => &mut t.compiling,
            false => &mut t.unbuilt,
        };
        if none_finished && marks.insert((call.key.clone(), backend)) {
            GENERATION.fetch_add(1, Ordering::AcqRel);
        }
    }
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        if let Some((e, size, _)) = l.last.take() {
            let mut e = Explanation::clone(&e);
            let what = match started {
                true => "kernel compiling in the background (first run)",
                false => "not tried: its kernel is not built, and a compile is not worth a trial",
            };
            e.reason = format!("{backend} {what}, ran on {host}; was: {}", e.reason);
            e.choice = Choice::Backend(host);
            l.last = Some((Rc::new(e), size, Choice::Backend(host)));
        }
        l.hit = None;
    });
}

/// A background kernel build finished: every device backend is a candidate again.
pub(crate) fn kernel_ready() {
    // Before any Auto call there is nothing to tell (and no model file to open for it).
    let Some(t) = TUNER.get() else { return };
    let mut t = t.lock().unwrap_or_else(PoisonError::into_inner);
    t.compiling.clear();
    t.unbuilt.clear();
    GENERATION.fetch_add(1, Ordering::AcqRel);
}

/// The backends found here. Probing a device (opening a driver takes 0.1 to 0.3 s) waits
/// until it can pay: CUDA once a call is predicted (or seen in a warm-up) to take at least
/// [`PROBE_NS`] on the host, a decided host call has run that long ([`watch`]), the job is
/// past [`PROBE_AFTER_NS`], or the model file says the GPU wins the call clearly
/// ([`DEVICE_WINS`]); OpenCL once a call is predicted to take ten times [`PROBE_NS`] on
/// the host or the job is past ten times [`PROBE_AFTER_NS`] (neither the watcher nor the
/// model file opens it), and only where `SKEL_OPENCL_DEVICE` names a device: its platform enumeration loads every
/// installed implementation, and PoCL's starts worker threads that halve Rayon's speed on a
/// small machine. Before that, the host backends and the devices something else opened.
/// An OpenCL CPU device (PoCL) shares the cores with Rayon: it is a candidate only once
/// something else opened it (a call on `Backend::OpenCl`). CUDA is opened on a thread of
/// its own ([`probe_cuda_in_background`]): the calls run on the host meanwhile. A job that
/// never starts it never waits for the driver; one that does waits for the probe at exit
/// where it is still running then (a short job whose one host call ran [`PROBE_NS`]). The OpenCL probe runs on the calling thread: a process
/// that exited while PoCL initialised on another thread crashed in PoCL's LLVM.
fn probed(due: Due) -> Vec<Backend> {
    if due.cuda && CUDA_PROBED.get().is_none() {
        probe_cuda_in_background();
    }
    let cuda = CUDA_PROBED.get() == Some(&true) || crate::backends::cuda_opened();
    let opencl = match OPENCL_PROBED.get() {
        Some(&found) => found,
        None if due.opencl => *OPENCL_PROBED.get_or_init(|| {
            crate::backends::opencl_device_is_gpu() && Backend::OpenCl.check().is_ok()
        }),
        None => false,
    } || crate::backends::opencl_opened();
    Backend::ALL
        .into_iter()
        .filter(|&b| match b {
            Backend::Cuda => cuda,
            Backend::OpenCl => opencl,
            Backend::Rayon => b.check().is_ok(),
            _ => b == Backend::Cpu,
        })
        .collect()
}

/// Which devices a decision probes ([`probed`]).
#[derive(Clone, Copy, Default)]
struct Due {
    cuda: bool,
    opencl: bool,
}

/// A call predicted to take this long on the host (ns) probes CUDA (OpenCL: ten times).
pub const PROBE_NS: f64 = 3.0e6;

/// A job running this long (ns, since its first `Auto` call) probes CUDA (OpenCL: ten
/// times).
pub const PROBE_AFTER_NS: f64 = 0.3e9;

static CUDA_PROBED: OnceLock<bool> = OnceLock::new();
static CUDA_PROBING: AtomicBool = AtomicBool::new(false);
static OPENCL_PROBED: OnceLock<bool> = OnceLock::new();

/// Opens CUDA on a thread of its own, once; when it is open, decisions are made afresh
/// (a new generation) with the GPU among the candidates. A process that ends meanwhile
/// waits for it at exit, as for a background compile (opening a driver while its exit code
/// runs can crash). Without a thread, the probe runs here.
fn probe_cuda_in_background() {
    if CUDA_PROBING.swap(true, Ordering::AcqRel) {
        return;
    }
    watch::stop();
    if !spawn_cuda_probe() {
        // No thread: the probe runs here, the warm-up waits for the first compile thread.
        CUDA_PROBED.get_or_init(|| {
            std::panic::catch_unwind(|| Backend::Cuda.check().is_ok()).unwrap_or(false)
        });
        GENERATION.fetch_add(1, Ordering::AcqRel);
    }
}

/// Opens CUDA on a background thread (one the process waits for at exit); `false` where
/// no thread could be started. With a cold kernel cache the first kernels compile: NVRTC
/// is loaded and warmed up on a thread of its own meanwhile (it needs the device's
/// architecture, not its context: 50-70 ms beside an open of 150-260 ms on the H200
/// machine), off the calling threads, while the calls run on the host.
fn spawn_cuda_probe() -> bool {
    let probe = || {
        let start = Instant::now();
        let found = *CUDA_PROBED.get_or_init(|| {
            // A driver library that panics (cudarc on a missing symbol) means no CUDA.
            std::panic::catch_unwind(|| Backend::Cuda.check().is_ok()).unwrap_or(false)
        });
        GENERATION.fetch_add(1, Ordering::AcqRel);
        if log_enabled() {
            let what = if found { "opened" } else { "not found" };
            log::info!("CUDA {what} in the background in {:.1} ms", ms_since(start));
        }
    };
    let warm_up = || {
        let start = Instant::now();
        let _ = std::panic::catch_unwind(crate::backends::warm_up_cuda_compiler);
        if log_enabled() {
            log::info!("CUDA compiler ready in {:.1} ms", ms_since(start));
        }
    };
    use crate::backends::kernel_cache::spawn_background;
    // Without a thread for the warm-up, the first compile loads NVRTC itself.
    let _ = spawn_background("skel-nvrtc-warm-up", warm_up);
    spawn_background("skel-device-probe", probe).is_ok()
}

/// Milliseconds since `start`, for the log.
pub(crate) fn ms_since(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

/// Starts opening CUDA in the background now, unless it is open or opening (a host call
/// has run for [`PROBE_NS`]: [`watch`]).
fn probe_cuda_now() {
    let start = CUDA_PROBED.get().is_none() && !CUDA_PROBING.swap(true, Ordering::AcqRel);
    if start && !spawn_cuda_probe() {
        // No thread: the watcher, which holds the host calls' lock, does not open the
        // driver itself (0.1-0.3 s with every host call's end waiting); it stops watching
        // and the next decision that finds the probe due opens it on its calling thread.
        CUDA_PROBING.store(false, Ordering::Release);
    }
    watch::stop();
}

/// Which device probes can pay for themselves now (see [`probed`], [`Tuner::opens_cuda`]).
fn probe_due(t: &Tuner, call: &Call, rows: &[Candidate]) -> Due {
    Due {
        cuda: CUDA_PROBED.get().is_none()
            && !CUDA_PROBING.load(Ordering::Acquire)
            && t.opens_cuda(call, rows),
        opencl: OPENCL_PROBED.get().is_none()
            && crate::config::OPENCL_DEVICE.value().is_some()
            && t.probe_pays(call, rows, 10.0),
    }
}

/// A device the models predict at most this share of the best host backend's time for a
/// call (its own measurements of the function, saved by an earlier process) is opened at
/// that call, whatever the call's size: it wins clearly, so the sooner it is open the more
/// calls it takes.
pub const DEVICE_WINS: f64 = 0.8;

impl Tuner {
    /// Whether `call` opens CUDA (in the background: the calls run on the host meanwhile):
    /// the model file says it wins clearly ([`Tuner::device_wins`]), or the call or the job
    /// is long enough ([`Tuner::probe_pays`]), or the model file is unreadable (the static
    /// order then prefers the GPU).
    fn opens_cuda(&self, call: &Call, rows: &[Candidate]) -> bool {
        self.unreadable.is_some()
            || self.device_wins(call, rows, Backend::Cuda)
            || self.probe_pays(call, rows, 1.0)
    }

    /// Whether opening a device can pay for itself now: the call is predicted (or seen in
    /// a warm-up) to take `k` times [`PROBE_NS`] on the best of `rows`, or the job has run
    /// for `k` times [`PROBE_AFTER_NS`].
    fn probe_pays(&self, call: &Call, rows: &[Candidate], k: f64) -> bool {
        let host = rows
            .iter()
            .map(|c| self.trial_cost(call, c, rows))
            .fold(f64::INFINITY, f64::min);
        self.elapsed_ns() >= k * PROBE_AFTER_NS || host >= k * PROBE_NS
    }

    /// Whether `device`, not among `rows` (not open yet), has measurements of `call`'s
    /// function near its size (from the model file) that predict it, transfers included,
    /// at most [`DEVICE_WINS`] of the best of `rows`.
    fn device_wins(&self, call: &Call, rows: &[Candidate], device: Backend) -> bool {
        if rows.iter().any(|c| c.backend == device)
            || !self.models.known(&call.key, device, call.size)
        {
            return false;
        }
        let Some(compute) = self.predicted(call, device) else {
            return false;
        };
        let host = rows
            .iter()
            .map(|c| self.estimate(call, c, rows))
            .fold(f64::INFINITY, f64::min);
        compute + self.transfer_ns(call, device) <= DEVICE_WINS * host
    }
}

/// The candidate rows of `call` (with the devices probed where `probe`), but for devices
/// whose kernel for it is compiling.
fn rows_of(t: &Tuner, call: &Call, due: Due) -> Vec<Candidate> {
    candidates(call.size, due)
        .into_iter()
        .filter(|&b| !t.compiling.contains(&(call.key.clone(), b)))
        .map(|b| t.candidate(call, b))
        .collect()
}

/// The backends `Auto` chooses among for `size` elements, in tie-break order.
fn candidates(size: usize, due: Due) -> Vec<Backend> {
    let available = probed(due);
    let rayon = available.contains(&Backend::Rayon);
    available
        .into_iter()
        .filter(|&b| {
            b != Backend::Auto
                && (b != Backend::Cpu || !rayon || cpu_competes(size, rayon_threads()))
        })
        .collect()
}

/// Whether the sequential `cpu` backend is a candidate next to Rayon on `cores` threads
/// for `size` elements (see [`CPU_MAX`]). `cores` is the machine's
/// `available_parallelism` ([`rayon_threads`]), not the threads of Rayon's pool: a pool
/// a program made smaller keeps `cpu` out above [`CPU_MAX`] on a machine of 4 cores or
/// more all the same.
fn cpu_competes(size: usize, cores: usize) -> bool {
    size <= CPU_MAX || (cores as f64) < SKIP
}

fn is_device(b: Backend) -> bool {
    matches!(b, Backend::Cuda | Backend::OpenCl)
}

/// [`FastKey::places`] of a decision that holds wherever the operands are valid.
pub(crate) const ANYWHERE: u8 = 0x80;
/// [`FastKey::places`] bit of a call that may be split.
const SPLITTABLE: u8 = 0x08;

/// Whether `decision` would be the same wherever the operands were valid: it runs on a
/// host backend that beats every device's compute time alone even after copying every
/// operand back over the slowest link (both host backends pay the same copy, so their
/// order holds too). Only a host choice can be: a device's advantage always depends on
/// what it holds.
fn holds_anywhere(t: &Tuner, call: &Call, rows: &[Candidate], decision: Decision) -> bool {
    let Choice::Backend(chosen) = decision.choice else {
        return false;
    };
    // A split depends on the inputs being on the host, so a call that may split is not
    // decided without looking.
    if is_device(chosen) || call.splittable {
        return false;
    }
    let Some(own) = rows
        .iter()
        .find(|c| c.backend == chosen)
        .and_then(|c| c.predicted_ns)
    else {
        return false;
    };
    let slowest = rows
        .iter()
        .filter(|c| is_device(c.backend))
        .map(|c| t.link(c.backend))
        .fold(f64::INFINITY, f64::min);
    let worst = own + TRANSFER_LATENCY_NS + call.total_bytes as f64 / slowest * 1e9;
    rows.iter()
        .filter(|c| is_device(c.backend))
        .all(|c| c.predicted_ns.is_some_and(|p| worst < p))
}

/// Decides where `call` runs; remembers the explanation for [`explain`], and the decision
/// for [`remembered`] when it needs no measurement.
pub(crate) fn decide(call: &Call, fast: &FastKey) -> Decision {
    crate::backends::kernel_cache::guard_this_threads_exit();
    let mut t = tuner();
    let generation = GENERATION.load(Ordering::Acquire);
    t.started.get_or_insert_with(Instant::now);
    let mut rows = rows_of(&t, call, Due::default());
    let due = probe_due(&t, call, &rows);
    if due.cuda || due.opencl {
        // The devices found may change remembered decisions: a new generation.
        rows = rows_of(&t, call, due);
        GENERATION.fetch_add(1, Ordering::AcqRel);
    }
    let (decision, reason) = choose(&t, call, &rows);
    if decision.measure == Measure::No && t.unsaved {
        t.save();
    }
    let anywhere = decision.measure == Measure::No && holds_anywhere(&t, call, &rows, decision);
    drop(t);
    let e = Rc::new(Explanation {
        skeleton: call.key.skeleton.clone(),
        function: call.key.function.clone(),
        types: call.key.types.clone(),
        size: call.size,
        choice: decision.choice,
        reason,
        candidates: rows,
    });
    if log_enabled() {
        log::info!("{}", e.to_string().trim_end());
    }
    if decision.measure == Measure::No {
        let r = match decision.choice {
            Choice::Backend(b) => Remembered::Backend(b),
            Choice::Split {
                cpu,
                gpu,
                cpu_elems,
            } => Remembered::Split {
                cpu,
                gpu,
                share: cpu_elems as f64 / call.size.max(1) as f64,
            },
        };
        LOCAL.with(|l| {
            let decided = &mut l.borrow_mut().decided;
            if anywhere {
                let key = FastKey {
                    places: ANYWHERE | (fast.places & SPLITTABLE),
                    ..*fast
                };
                decided.insert(key, (generation, r, e.clone()));
            }
            decided.insert(*fast, (generation, r, e.clone()))
        });
    }
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        l.last = Some((e, call.size, decision.choice));
        l.hit = None;
    });
    decision
}

fn choose(t: &Tuner, call: &Call, rows: &[Candidate]) -> (Decision, String) {
    let run = |b, measure| Decision {
        choice: Choice::Backend(b),
        measure,
        explore: false,
    };
    if let Some(why) = &t.unreadable {
        let b = static_choice(rows);
        return (
            run(b, Measure::No),
            format!("static order: model file unreadable: {why}"),
        );
    }
    let total = |c: &Candidate| t.estimate(call, c, rows);
    // Stable: equal times keep the tie-break order.
    let mut order: Vec<&Candidate> = rows.iter().filter(|c| total(c).is_finite()).collect();
    order.sort_by(|a, b| total(a).total_cmp(&total(b)));
    let Some(&best) = order.first() else {
        let b = static_choice(rows);
        return (run(b, Measure::No), "static order: no candidate".into());
    };
    let mut skipped = String::new();
    // Each candidate is tried until the function has one measurement on it near this
    // size; a measurement at another size up to 16x away is shared (`Tuner::predicted`).
    for c in &order {
        if t.models.known(&call.key, c.backend, call.size) && !host_rival(t, call, c, best, rows) {
            continue;
        }
        let explore = c.backend != best.backend;
        let cost = t.trial_cost(call, c, rows);
        let ratio = cost / total(best).max(1.0);
        if explore && t.unbuilt.contains(&(call.key.clone(), c.backend)) {
            skipped += &format!("; {} not calibrated: its kernel is not built", c.backend);
        } else if explore && ratio > SKIP {
            skipped += &format!(
                "; {} not calibrated: predicted {ratio:.1}x slower",
                c.backend
            );
        } else if explore && !t.within_budget(cost) {
            skipped += &format!("; {} not calibrated: calibration budget spent", c.backend);
        } else {
            let why = match explore {
                true => format!("no history for this size, predicted {ratio:.1}x the best"),
                false => "no history for this size, predicted fastest".into(),
            };
            return t.trial(call, c.backend, &why, explore);
        }
    }
    if let Some(again) = refine(t, call, rows, total) {
        return again;
    }
    if call.splittable {
        if let Some(split) = hybrid(t, call, rows, total(best)) {
            return split;
        }
    }
    // The backend that runs the call anyway is timed while its bucket has fewer than two
    // measurements: a free sample, no trial elsewhere.
    if t.models.thin(&call.key, best.backend, call.size) {
        let why = format!("predicted fastest, timed: few measurements of this size{skipped}");
        return t.trial(call, best.backend, &why, false);
    }
    (
        run(best.backend, Measure::No),
        format!("predicted fastest: {:.1} us{skipped}", total(best) / 1e3),
    )
}

/// Whether `c`, a host backend predicted within [`HOST_RIVAL`] of `best`, the other host
/// backend, for `call`, is tried at this size although another size predicts it: its
/// prediction comes from other size buckets only (neither its own bucket nor a bracketing
/// pair), so from as little as one sample, and between the two host backends one sample
/// taken while other threads of the process held the cores (a pipeline's decode and encode
/// farms) can be off by 2x: on 2 cores, one Rayon run of the greyscale Map at 14 ms for
/// 262144 pixels, extrapolated, sent every larger photo to `cpu` (photos at 0.71-0.78 of
/// fixed Rayon). A trial on the host costs no kernel and no transfer, and still spends the
/// calibration budget.
fn host_rival(t: &Tuner, call: &Call, c: &Candidate, best: &Candidate, rows: &[Candidate]) -> bool {
    let host = |b| matches!(b, Backend::Cpu | Backend::Rayon);
    host(c.backend)
        && host(best.backend)
        && c.backend != best.backend
        && !t.models.bracketed(&call.key, c.backend, call.size)
        && t.estimate(call, c, rows) <= HOST_RIVAL * t.estimate(call, best, rows)
}

/// How much slower than the best host backend the other one may be predicted, from other
/// sizes only, and still be tried at a new size: between `cpu` and Rayon one measurement
/// taken while other threads of the process held the cores can be off by 2x, and shared
/// across sizes it would decide every larger call.
pub const HOST_RIVAL: f64 = 2.0;

/// The first of `rows` in the static order (CUDA, then an OpenCL GPU, then Rayon, then
/// `cpu`): among the backends open now, so that no call waits for a device to open (a
/// device not open yet is opened in the background, [`probe_due`], and a later call
/// takes it).
fn static_choice(rows: &[Candidate]) -> Backend {
    rows.iter()
        .map(|c| c.backend)
        .find(|&b| b != Backend::OpenCl || crate::backends::opencl_is_gpu())
        .unwrap_or(Backend::Cpu)
}

/// Another measurement while the two fastest candidates are within each other's noise
/// (both measured in this size bucket, their 95 % intervals overlapping, one of them wider
/// than ±[`STABLE`]): of the one that ran last while its interval is wide (each switch
/// costs a warm-up), else of the one whose interval is wider relative to its time, while
/// it has fewer than [`MAX_SAMPLES`] measurements. `None` once the models tell them apart.
fn refine(
    t: &Tuner,
    call: &Call,
    rows: &[Candidate],
    total: impl Fn(&Candidate) -> f64,
) -> Option<(Decision, String)> {
    let mut order: Vec<&Candidate> = rows.iter().filter(|c| total(c).is_finite()).collect();
    // Stable: equal times keep the tie-break order.
    order.sort_by(|a, b| total(a).total_cmp(&total(b)));
    let [first, second, ..] = order[..] else {
        return None;
    };
    let leaders = [first, second].map(|c| {
        let own = t.models.own(&call.key, c.backend, call.size)?;
        // One run (a first run of its size, maybe) has no spread of its own yet. A device's
        // first run alone (allocation, first upload) may be up to [`WARMUP_FACTOR`] times
        // its steady time: it reaches down that far, so one steady run replaces it, in a
        // later process too (else a device that lost on its first run would lose in every
        // process). A host backend's first run allocates little: its mark stays as it is.
        let first =
            t.models
                .provisional
                .contains(&(call.key.clone(), c.backend, bucket_of(call.size)));
        let half = match own.count {
            1 if first && is_device(c.backend) => (1.0 - 1.0 / WARMUP_FACTOR) * total(c),
            0 | 1 => ONE_RUN_SPREAD * total(c),
            _ => own.half_interval_ns(),
        };
        Some((c.backend, total(c), half, own.count))
    });
    let [Some(a), Some(b)] = leaders else {
        return None;
    };
    let overlap = a.1 + a.2 >= b.1 - b.2;
    let wide = |l: &(Backend, f64, f64, u32)| l.2 > STABLE * l.1;
    if !overlap || !(wide(&a) || wide(&b)) {
        return None;
    }
    let spread = |l: &(Backend, f64, f64, u32)| l.2 / l.1.max(1.0);
    // A trial of a device whose kernel is not built would run on the host, untimed.
    let unbuilt =
        |l: &(Backend, f64, f64, u32)| l.0 != a.0 && t.unbuilt.contains(&(call.key.clone(), l.0));
    let open = [a, b]
        .into_iter()
        .filter(|l| l.3 < MAX_SAMPLES && !unbuilt(l));
    let pick = open
        .clone()
        .find(|l| t.ran_last(l.0) && wide(l))
        .or_else(|| open.reduce(|x, y| if spread(&y) > spread(&x) { y } else { x }))?;
    let explore = pick.0 != a.0;
    if explore && !t.within_budget(pick.1) {
        return None;
    }
    Some(t.trial(
        call,
        pick.0,
        &format!(
            "{} and {} within noise ({:.1} ± {:.1} us, {:.1} ± {:.1} us)",
            a.0,
            b.0,
            a.1 / 1e3,
            a.2 / 1e3,
            b.1 / 1e3,
            b.2 / 1e3
        ),
        explore,
    ))
}

/// A CPU+GPU split of `call` if one is predicted at least [`HYBRID_GAIN`] of `best`.
fn hybrid(t: &Tuner, call: &Call, rows: &[Candidate], best: f64) -> Option<(Decision, String)> {
    let n = call.size;
    if n < HYBRID_MIN || call.moved_bytes(Backend::Rayon) > 0 {
        return None;
    }
    let r = rows.iter().find(|c| c.backend == Backend::Rayon)?;
    let gpus = rows.iter().filter(|c| is_device(c.backend));
    let g = gpus.min_by(|a, b| {
        let ta = a.predicted_ns.unwrap_or(f64::INFINITY) + a.transfer_ns;
        let tb = b.predicted_ns.unwrap_or(f64::INFINITY) + b.transfer_ns;
        ta.total_cmp(&tb)
    })?;
    let (tr, tg) = (r.predicted_ns?, g.predicted_ns? + g.transfer_ns);
    // Shares in proportion to throughput: each side then needs about the same time.
    let cpu_elems = ((n as f64) * tg / (tr + tg)) as usize;
    if cpu_elems == 0 || cpu_elems >= n - 1 {
        return None;
    }
    let gpu_part = (n - cpu_elems) as f64 / n as f64;
    let pr = t.models.predict(&call.key, Backend::Rayon, cpu_elems)?;
    let pg = t.models.predict(&call.key, g.backend, n - cpu_elems)? + g.transfer_ns * gpu_part;
    let predicted = pr.max(pg);
    (predicted < HYBRID_GAIN * best).then(|| {
        (
            Decision {
                choice: Choice::Split {
                    cpu: Backend::Rayon,
                    gpu: g.backend,
                    cpu_elems,
                },
                measure: Measure::No,
                explore: false,
            },
            format!(
                "split predicted {:.1} us against {:.1} us on one backend",
                predicted / 1e3,
                best / 1e3
            ),
        )
    })
}

/// Records how long `call` took on `backend` (its operands' transfers estimated and taken
/// out), or that it ran once.
pub(crate) fn finish(call: &Call, backend: Backend, d: Decision, elapsed_ns: f64) {
    if tuner().finish(call, backend, d, elapsed_ns) {
        GENERATION.fetch_add(1, Ordering::AcqRel);
    }
}

/// Why the calling thread's most recent `Backend::Auto` call ran where it did: the
/// candidates' predictions and measured histories (`None` before any such call).
///
/// ```
/// use skel::prelude::*;
/// #[userfn]
/// fn twice(x: i32) -> i32 { 2 * x }
///
/// skel::tune::set_model_dir(None);
/// let v = Vector::from(vec![1i32; 64]);
/// let mut out = Vector::zeroed(64);
/// Map::new(twice).backend(Backend::Auto).run(&v, &mut out)?;
/// let why = skel::tune::explain().unwrap();
/// assert_eq!(why.skeleton, "map");
/// assert!(why.function.ends_with("twice"));
/// assert!(why.candidates.iter().any(|c| c.backend == Backend::Cpu));
/// # Ok::<(), skel::Error>(())
/// ```
pub fn explain() -> Option<Explanation> {
    LOCAL.with(|l| {
        let l = l.borrow();
        let (e, size, choice) = l.last.as_ref()?;
        let mut e = Explanation::clone(e);
        if e.size != *size {
            e.reason += &format!(" (decided for {} elements, same size bucket)", e.size);
        }
        e.size = *size;
        e.choice = *choice;
        Some(e)
    })
}

/// Uses the model file in `dir` from now on (`None`: keep models in memory only), reading
/// it afresh; what this process measured so far is dropped. Useful for tests and for tools
/// that keep models per machine.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("skel-tune-doc-{}", std::process::id()));
/// skel::tune::set_model_dir(Some(&dir));
/// assert_eq!(skel::tune::model_file(), Some(dir.join("model.json")));
/// skel::tune::set_model_dir(None);
/// assert_eq!(skel::tune::model_file(), None);
/// ```
pub fn set_model_dir(dir: Option<&Path>) {
    let mut t = tuner();
    if t.unsaved {
        t.save();
    }
    *t = Tuner::open(dir.map(Path::to_path_buf));
    GENERATION.fetch_add(1, Ordering::AcqRel);
}

/// Saves models measured since the last save, as the main thread exits (its thread-local
/// exit guard); skipped where another thread holds the tuner or another process the
/// model file's lock (a thread-local destructor must not wait).
pub(crate) fn save_at_exit() {
    let Some(t) = TUNER.get() else { return };
    if let Ok(mut t) = t.try_lock() {
        if t.unsaved {
            t.save_with(false);
        }
    }
}

/// The model file in use (`None`: in memory only).
pub fn model_file() -> Option<PathBuf> {
    tuner().dir.as_ref().map(|d| d.join(model::FILE))
}

/// Waits until every call enqueued on a device (CUDA, OpenCL) is done: for timing calls
/// whose results stay on the device. `Ok` where no device was used; with nothing enqueued
/// since the last wait it returns at once (two atomic loads, no driver call).
///
/// # Errors
///
/// What the device reported for work enqueued earlier ([`crate::Error::Driver`],
/// [`crate::Error::DeviceLost`], ...).
///
/// ```
/// skel::tune::synchronize()?;
/// # Ok::<(), skel::Error>(())
/// ```
pub fn synchronize() -> Result<()> {
    crate::backends::synchronize()
}

/// Measures the host-device link of every available device backend and stores it in the
/// model file; returns what it measured. Function models calibrate themselves on first use
/// (see the module documentation).
///
/// # Errors
///
/// A measurement that fails on a device (its probe buffers do not fit:
/// [`crate::Error::OutOfMemory`]; a driver failure: [`crate::Error::Driver`]). A model file
/// that cannot be written is not an error: the models stay in memory (logged once).
///
/// ```
/// skel::tune::set_model_dir(None);
/// let c = skel::tune::calibrate()?;
/// for (backend, bytes_per_s) in &c.links {
///     assert!(*bytes_per_s > 0.0, "{backend}");
/// }
/// # Ok::<(), skel::Error>(())
/// ```
pub fn calibrate() -> Result<Calibration> {
    let mut links = Vec::new();
    for b in Backend::available().into_iter().filter(|&b| is_device(b)) {
        links.push((b, crate::backends::auto::measure_link(b)?));
    }
    let mut t = tuner();
    for &(b, bw) in &links {
        t.models.link.insert(b, bw);
    }
    GENERATION.fetch_add(1, Ordering::AcqRel);
    t.save();
    Ok(Calibration {
        links,
        model_file: t.dir.as_ref().map(|d| d.join(model::FILE)),
    })
}
