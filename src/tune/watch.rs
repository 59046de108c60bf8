//! Opens CUDA while a long host call runs: once decided `Auto` calls on a host backend
//! have kept the host busy for [`super::PROBE_NS`] without a break (one long call, or
//! overlapping calls of several threads), the device probe starts (on a thread of its
//! own) without waiting for the call to end, so the GPU may take the next call.
//!
//! Before this, a compute-bound call (a 5x5 median of 1024^2 pixels: 60 ms on 16 cores)
//! whose roofline prior is small (a few bytes a pixel) probed only at the call after its
//! measurement: a whole host call later. Only calls that went through a full decision are
//! watched (a new size, a calibration): a remembered decision comes from measurements, so
//! a host call that long would have opened the device when it was decided. Steady-state
//! calls pay one relaxed load of [`WATCHING`] and nothing else.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Whether host calls are watched: CUDA is compiled in and neither opened nor being
/// opened. Cleared once the probe starts (by the watcher or a decision).
static WATCHING: AtomicBool = AtomicBool::new(cfg!(feature = "cuda"));

/// The host calls in flight: how many, and since when the oldest has run (a new call
/// leaves an older start where one still runs).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct InFlight {
    running: usize,
    since: Option<Instant>,
}

impl InFlight {
    /// A call started at `now`.
    pub(super) fn begin(&mut self, now: Instant) {
        self.running += 1;
        self.since.get_or_insert(now);
    }

    /// A call ended; with none left, nothing runs since any time.
    pub(super) fn end(&mut self) {
        self.running = self.running.saturating_sub(1);
        if self.running == 0 {
            self.since = None;
        }
    }

    /// When the probe is due while this state lasts: [`super::PROBE_NS`] after the
    /// oldest running call began (`None`: no call runs).
    pub(super) fn due(&self) -> Option<Instant> {
        let after = Duration::from_nanos(super::PROBE_NS as u64);
        self.since.map(|s| s + after)
    }
}

static STATE: Mutex<InFlight> = Mutex::new(InFlight {
    running: 0,
    since: None,
});
static CHANGED: Condvar = Condvar::new();
static WATCHER: AtomicBool = AtomicBool::new(false);

/// The longest the watcher sleeps while no host call runs before it checks [`WATCHING`]
/// again: [`stop`] notifies without the lock (the watcher calls it holding the lock), so
/// a notification between the watcher's check and its wait is lost, and this bounds how
/// long the parked thread outlives the watching.
const IDLE_RECHECK: Duration = Duration::from_secs(1);

/// No more watching: the probe started (or CUDA is open).
pub(super) fn stop() {
    WATCHING.store(false, Ordering::Relaxed);
    CHANGED.notify_all();
}

/// Runs `f`, a decided host call, watched while CUDA is not open: the probe starts once it
/// has run for [`super::PROBE_NS`] (not before; a shorter call never opens anything).
pub(crate) fn host_call<R>(f: impl FnOnce() -> R) -> R {
    if !WATCHING.load(Ordering::Relaxed) {
        return f();
    }
    start_watcher();
    state().begin(Instant::now());
    CHANGED.notify_all();
    // Counted out also when `f` panics (a user function on the host backends).
    struct Ended;
    impl Drop for Ended {
        fn drop(&mut self) {
            state().end();
        }
    }
    let _ended = Ended;
    f()
}

fn state() -> std::sync::MutexGuard<'static, InFlight> {
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Starts the watcher thread once. It is no background job: a process exit does not wait
/// for it (it only waits on a condition variable); the probe it starts is one.
fn start_watcher() {
    if WATCHER.swap(true, Ordering::AcqRel) {
        return;
    }
    let watch = || {
        let mut s = state();
        while WATCHING.load(Ordering::Relaxed) {
            match s.due() {
                None => {
                    s = CHANGED
                        .wait_timeout(s, IDLE_RECHECK)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
                Some(at) => {
                    let now = Instant::now();
                    if now >= at {
                        // Started under the lock: the call cannot end meanwhile, so a main
                        // thread returning from `main` finds the probe counted and waits.
                        super::probe_cuda_now();
                        return;
                    }
                    s = CHANGED
                        .wait_timeout(s, at - now)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
            }
        }
    };
    let spawned = std::thread::Builder::new()
        .name("skel-host-watch".into())
        .spawn(watch);
    if spawned.is_err() {
        // No thread: host calls are not watched (decisions still probe).
        WATCHING.store(false, Ordering::Relaxed);
    }
}
