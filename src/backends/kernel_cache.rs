//! The build-once cache of compiled kernels shared by the GPU backends (CUDA modules,
//! OpenCL programs), generic over the key and the compiled artefact.
//!
//! Per key, the first caller generates the source and builds; callers arriving meanwhile
//! wait for that build, later ones get its result. A compile error, which a rebuild would
//! repeat, is remembered: every later call gets the same [`Error::Compile`], with the
//! compiler's log and the source. Any other build failure (out of device memory loading a
//! module) goes to the callers that waited for that build and is then forgotten, so the
//! next call builds again. An error generating the source (an untranslatable user
//! function) is never cached: it is cheap to repeat. The on-disk cache of compiled
//! binaries, where a backend keeps one, lies under the build (see [`super::jit`]).
//!
//! `Backend::Auto` asks for kernels in the background ([`deferred`]): a missing kernel is
//! then built on a thread of its own and the call gets [`pending`] at once, before it has
//! changed anything, so it can run on the host meanwhile; every later call of any kind
//! finds the kernel built (or waits for that one build, as before).

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use crate::{Error, Result};

/// A build's outcome as the cache keeps it.
type Built<T> = std::result::Result<T, Error>;

/// One cell per key; a cell is built once.
type Cells<K, T> = HashMap<K, Arc<OnceLock<Built<T>>>>;

/// Compiled artefacts `T` per key `K`, built once each (see the module docs).
pub(crate) struct KernelCache<K, T> {
    cells: OnceLock<Mutex<Cells<K, T>>>,
    /// Keys being built in the background.
    building: OnceLock<Mutex<HashSet<K>>>,
}

thread_local! {
    /// Whether a missing kernel is built in the background ([`deferred`]).
    static DEFER: Cell<bool> = const { Cell::new(false) };
    /// Whether a deferred call may start that build ([`deferred`]'s `start`).
    static START: Cell<bool> = const { Cell::new(true) };
    /// Whether the last deferred call stopped at a kernel still building.
    static PENDING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` (one skeleton call) with missing kernels built in the background: the first
/// kernel it asks for that is not built yet starts that build on its own thread (unless one
/// is running, or `start` is false: a trial that is not worth a compile) and fails the
/// call with [`pending`] set, before the call has launched or written anything. Once the
/// call has a kernel, further kernels it needs are built in place, as always, so a call
/// that pends never stops half-way through its launches.
pub(crate) fn deferred<R>(start: bool, f: impl FnOnce() -> Result<R>) -> Result<R> {
    PENDING.with(|p| p.set(false));
    let before = DEFER.with(|d| d.replace(true));
    let started = START.with(|s| s.replace(start));
    let r = f();
    DEFER.with(|d| d.set(before));
    START.with(|s| s.set(started));
    r
}

/// Whether the last [`deferred`] call on this thread failed because its kernel is still
/// being built (and clears that).
pub(crate) fn pending() -> bool {
    PENDING.with(|p| p.replace(false))
}

/// The error a deferred call gets while its kernel builds (never seen by users: `Auto`
/// runs the call on the host instead).
fn pending_error() -> Error {
    PENDING.with(|p| p.set(true));
    Error::Driver("internal: kernel still being built in the background".into())
}

/// Whether the calling thread is inside [`deferred`] and may start a background build (a
/// backend loads its compiler first, so its exit handlers are in place before
/// [`wait_at_exit`]'s).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn deferring() -> bool {
    DEFER.with(Cell::get) && START.with(Cell::get)
}

/// Background builds in flight, and their end signalled.
static IN_FLIGHT: (Mutex<usize>, std::sync::Condvar) = (Mutex::new(0), std::sync::Condvar::new());

fn in_flight() -> MutexGuard<'static, usize> {
    IN_FLIGHT.0.lock().unwrap_or_else(PoisonError::into_inner)
}

fn build_done() {
    *in_flight() -= 1;
    IN_FLIGHT.1.notify_all();
}

extern "C" {
    fn atexit(handler: extern "C" fn()) -> std::ffi::c_int;
}

/// At process exit, waits (at most a minute) for background builds still running: a
/// compiler torn down by its exit handlers while another thread runs it crashes, and the
/// finished build lands in the disk cache for the next run.
extern "C" fn wait_at_exit() {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut n = in_flight();
    while *n > 0 {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return;
        }
        n = IN_FLIGHT
            .1
            .wait_timeout(n, left)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
}

/// Registers [`wait_at_exit`] once, after the compiler of the first background build was
/// loaded (handlers run in reverse order of registration: this one before the compiler's).
fn wait_at_exit_once() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: `atexit` only records a plain function pointer to a function that lives
        // for the whole process and takes no arguments.
        if unsafe { atexit(wait_at_exit) } != 0 {
            log::warn!(target: "skel::tune", "atexit failed: a background kernel build may be cut short at exit");
        }
    });
}

/// Says once per process that kernels compile in the background.
fn announce() {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        log::info!(
            target: "skel::tune",
            "compiling GPU kernels in the background (first run; later runs load them from \
             the kernel cache); Backend::Auto runs those calls on the host meanwhile"
        );
    }
}

impl<K: Clone + Eq + Hash, T: Clone> KernelCache<K, T> {
    /// An empty cache, for a `static`.
    pub(crate) const fn new() -> Self {
        KernelCache {
            cells: OnceLock::new(),
            building: OnceLock::new(),
        }
    }

    fn building(&self) -> MutexGuard<'_, HashSet<K>> {
        self.building
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn cells(&self) -> MutexGuard<'_, Cells<K, T>> {
        self.cells
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The artefact for `key`, built on first use by `build` from the source `source()`
    /// generates (in the background inside [`deferred`]).
    pub(crate) fn get_or_build(
        &'static self,
        key: K,
        source: impl FnOnce() -> Result<String>,
        build: impl FnOnce(&str) -> Result<T> + Send + 'static,
    ) -> Result<T>
    where
        K: Send + Sync + 'static,
        T: Send + Sync + 'static,
    {
        let cell = self.cells().entry(key.clone()).or_default().clone();
        if let Some(built) = cell.get() {
            // The call has its kernel: any further one it needs is built in place.
            DEFER.with(|d| d.set(false));
            return replay(built);
        }
        if DEFER.with(|d| d.replace(false)) {
            return self.build_behind(key, cell, source, build);
        }
        let src = source()?;
        let built = cell.get_or_init(|| build(&src));
        self.forget_failed(&key, &cell, built);
        replay(built)
    }

    /// Starts building `key` on a thread of its own (unless it is building already) and
    /// returns [`pending_error`].
    fn build_behind(
        &'static self,
        key: K,
        cell: Arc<OnceLock<Built<T>>>,
        source: impl FnOnce() -> Result<String>,
        build: impl FnOnce(&str) -> Result<T> + Send + 'static,
    ) -> Result<T>
    where
        K: Send + Sync + 'static,
        T: Send + Sync + 'static,
    {
        if !START.with(Cell::get) || !self.building().insert(key.clone()) {
            return Err(pending_error());
        }
        let src = match source() {
            Ok(src) => src,
            Err(e) => {
                self.building().remove(&key);
                return Err(e);
            }
        };
        announce();
        wait_at_exit_once();
        *in_flight() += 1;
        let again = key.clone();
        let job = move || {
            let built = cell.get_or_init(|| build(&src));
            self.forget_failed(&key, &cell, built);
            self.building().remove(&key);
            crate::tune::kernel_ready();
            build_done();
        };
        if let Err(e) = std::thread::Builder::new()
            .name("skel-kernel-build".into())
            .spawn(job)
        {
            // No thread: the next call builds in place (nothing was left marked).
            self.building().remove(&again);
            build_done();
            return Err(Error::Driver(format!(
                "spawning a kernel build thread: {e}"
            )));
        }
        Err(pending_error())
    }

    /// Forgets a build that failed other than by a compile error (the next call retries).
    fn forget_failed(&self, key: &K, cell: &Arc<OnceLock<Built<T>>>, built: &Built<T>) {
        if matches!(built, Err(e) if !matches!(e, Error::Compile { .. })) {
            let mut cells = self.cells();
            if cells.get(key).is_some_and(|c| Arc::ptr_eq(c, cell)) {
                cells.remove(key);
            }
        }
    }
}

/// The kept outcome of a build, for one more caller.
fn replay<T: Clone>(built: &Built<T>) -> Result<T> {
    match built {
        Ok(t) => Ok(t.clone()),
        Err(e) => Err(copy_error(e)),
    }
}

/// A copy of a kept build error. `Error` is not `Clone` (`Error::Other` holds the user's
/// own error), so the variants a build returns are copied as they are; any other becomes
/// [`Error::Driver`] with its message.
fn copy_error(e: &Error) -> Error {
    match e {
        Error::Compile {
            kernel,
            log,
            source_code,
        } => Error::Compile {
            kernel: kernel.clone(),
            log: log.clone(),
            source_code: source_code.clone(),
        },
        Error::OutOfMemory(m) => Error::OutOfMemory(m.clone()),
        Error::Driver(m) => Error::Driver(m.clone()),
        Error::InvalidArgument(m) => Error::InvalidArgument(m.clone()),
        Error::BackendUnavailable { backend, reason } => Error::BackendUnavailable {
            backend: *backend,
            reason: reason.clone(),
        },
        other => Error::Driver(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn compile_error(src: &str) -> Error {
        Error::Compile {
            kernel: "k".into(),
            log: "error: expected an expression".into(),
            source_code: src.into(),
        }
    }

    #[test]
    fn builds_once_per_key() {
        let cache: &'static KernelCache<u32, u64> = Box::leak(Box::new(KernelCache::new()));
        let builds: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
        let get = |key: u32| {
            cache.get_or_build(
                key,
                || Ok(format!("source {key}")),
                move |src| {
                    builds.fetch_add(1, Ordering::Relaxed);
                    Ok(src.len() as u64 + u64::from(key))
                },
            )
        };
        assert_eq!(get(1).unwrap(), 9);
        assert_eq!(get(1).unwrap(), 9);
        assert_eq!(get(20).unwrap(), 29);
        assert_eq!(builds.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn a_compile_error_is_remembered_and_typed() {
        let cache: &'static KernelCache<u32, u64> = Box::leak(Box::new(KernelCache::new()));
        let builds: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
        for _ in 0..3 {
            let err = cache
                .get_or_build(
                    7,
                    || Ok("int x = ;".into()),
                    move |src| {
                        builds.fetch_add(1, Ordering::Relaxed);
                        Err(compile_error(src))
                    },
                )
                .unwrap_err();
            match err {
                Error::Compile {
                    kernel,
                    log,
                    source_code,
                } => {
                    assert_eq!(kernel, "k");
                    assert_eq!(log, "error: expected an expression");
                    assert_eq!(source_code, "int x = ;");
                }
                other => panic!("expected Error::Compile, got {other:?}"),
            }
        }
        assert_eq!(builds.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn other_failures_and_source_errors_are_retried() {
        let cache: &'static KernelCache<u32, u64> = Box::leak(Box::new(KernelCache::new()));
        let builds: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
        let oom = cache.get_or_build(
            3,
            || Ok(String::new()),
            move |_| {
                builds.fetch_add(1, Ordering::Relaxed);
                Err(Error::OutOfMemory("loading the module".into()))
            },
        );
        assert!(matches!(oom, Err(Error::OutOfMemory(m)) if m == "loading the module"));
        let gen = cache.get_or_build(
            3,
            || Err(Error::InvalidArgument("untranslatable".into())),
            |_| -> Result<u64> { unreachable!("no source, no build") },
        );
        assert!(matches!(gen, Err(Error::InvalidArgument(_))));
        let ok = cache.get_or_build(
            3,
            || Ok(String::new()),
            move |_| {
                builds.fetch_add(1, Ordering::Relaxed);
                Ok(5)
            },
        );
        assert_eq!(ok.unwrap(), 5);
        assert_eq!(builds.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn concurrent_callers_share_one_build() {
        let cache: &'static KernelCache<u32, u64> = Box::leak(Box::new(KernelCache::new()));
        let builds: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
        let start = std::sync::Barrier::new(8);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    start.wait();
                    let v = cache.get_or_build(
                        1,
                        || Ok("src".into()),
                        move |_| {
                            builds.fetch_add(1, Ordering::Relaxed);
                            std::thread::sleep(std::time::Duration::from_millis(20));
                            Ok(42)
                        },
                    );
                    assert_eq!(v.unwrap(), 42);
                });
            }
        });
        assert_eq!(builds.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_deferred_call_pends_while_the_build_runs_behind() {
        let cache: &'static KernelCache<u32, u64> = Box::leak(Box::new(KernelCache::new()));
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let wait = Mutex::new(wait);
        // A trial not worth a compile pends without starting one.
        let trial = deferred(false, || {
            cache.get_or_build(
                5,
                || Ok("src".into()),
                |_| -> Result<u64> { unreachable!() },
            )
        });
        assert!(trial.is_err() && pending());
        assert!(cache.building().is_empty());
        let (began, started) = std::sync::mpsc::channel::<()>();
        let first = deferred(true, || {
            cache.get_or_build(
                5,
                || Ok("src".into()),
                move |_| {
                    let _ = began.send(());
                    let _ = wait.lock().unwrap().recv();
                    Ok(50)
                },
            )
        });
        assert!(first.is_err() && pending());
        started.recv().unwrap(); // the build runs behind (not yet done)
                                 // A second deferred call does not wait, nor start another build.
        let second = deferred(true, || {
            cache.get_or_build(5, || Ok("src".into()), |_| Ok(99))
        });
        assert!(second.is_err() && pending());
        go.send(()).unwrap();
        // A call outside `deferred` waits for that build and gets its result.
        assert_eq!(
            cache
                .get_or_build(5, || Ok("src".into()), |_| Ok(99))
                .unwrap(),
            50
        );
        let ready = deferred(true, || {
            cache.get_or_build(5, || Ok("src".into()), |_| Ok(99))
        });
        assert_eq!(ready.unwrap(), 50);
        assert!(!pending());
    }

    #[test]
    fn kept_errors_are_copied_with_their_variant() {
        let driver = copy_error(&Error::Driver("module load failed".into()));
        assert!(matches!(driver, Error::Driver(m) if m == "module load failed"));
        let arg = copy_error(&Error::InvalidArgument("max allocation".into()));
        assert!(matches!(arg, Error::InvalidArgument(m) if m == "max allocation"));
        let oom = copy_error(&Error::OutOfMemory("4 MiB".into()));
        assert!(matches!(oom, Error::OutOfMemory(m) if m == "4 MiB"));
        let compile = copy_error(&compile_error("src"));
        assert!(matches!(compile, Error::Compile { source_code, .. } if source_code == "src"));
    }
}
