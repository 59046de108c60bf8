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
//! `Backend::Auto` asks for kernels in the background ([`deferred`]). A backend whose build
//! splits into a pure compile (source to binary image: NVRTC; no driver, no context) and a
//! load into the device ([`KernelCache::get_or_compile`]) then takes an image found quickly
//! (the disk cache) at once, and otherwise runs only the compile on a thread of its own;
//! the call gets [`pending`] at once, before it has changed anything, so it can run on the
//! host meanwhile. The load happens on a calling thread, the first call after the image is
//! ready. A process that ends while a compile (or another background job,
//! [`spawn_background`]: Auto's CUDA probe) runs waits for it at exit
//! ([`wait_for_background_compiles`], [`guard_this_threads_exit`]): the compiler library's
//! own exit code frees memory the compile still uses; the finished binary lands in the
//! disk cache for the next run. A backend whose build needs the driver
//! (`clBuildProgram`) builds in place ([`KernelCache::get_or_build`]), as without `Auto`.

use std::cell::Cell;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use crate::{Error, Result};

/// A build's outcome as the cache keeps it.
type Built<T> = std::result::Result<T, Error>;

/// One cell per key; a cell is built once.
type Cells<K, T> = HashMap<K, Arc<OnceLock<Built<T>>>>;

/// A compile running (or done) on a thread of its own: its image, once there.
struct Behind<I> {
    image: Mutex<Option<Built<I>>>,
    done: Condvar,
}

impl<I> Behind<I> {
    fn image(&self) -> MutexGuard<'_, Option<Built<I>>> {
        self.image.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the compile finished.
    fn ready(&self) -> bool {
        self.image().is_some()
    }

    /// The image, waiting for the compile to finish.
    fn take(&self) -> Built<I> {
        let mut image = self.image();
        loop {
            if let Some(built) = image.take() {
                return built;
            }
            image = self
                .done
                .wait(image)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Compiled artefacts `T` per key `K`, built once each (see the module docs); `I` is the
/// binary image a background compile hands to the load ([`KernelCache::get_or_compile`]).
pub(crate) struct KernelCache<K, T, I = ()> {
    cells: OnceLock<Mutex<Cells<K, T>>>,
    /// Compiles started in the background, per key, until their image is loaded.
    behind: OnceLock<Mutex<HashMap<K, Arc<Behind<I>>>>>,
}

thread_local! {
    /// Whether a missing kernel is compiled in the background ([`deferred`]).
    static DEFER: Cell<bool> = const { Cell::new(false) };
    /// Whether a deferred call may start that compile ([`deferred`]'s `start`).
    static START: Cell<bool> = const { Cell::new(true) };
    /// Whether the last deferred call stopped at a kernel still compiling.
    static PENDING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` (one skeleton call) with missing kernels compiled in the background: the first
/// kernel it asks for that is not built yet starts that compile on its own thread (unless
/// one is running, or `start` is false: a trial that is not worth a compile) and fails the
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
/// being compiled (and clears that).
pub(crate) fn pending() -> bool {
    PENDING.with(|p| p.replace(false))
}

/// The error a deferred call gets while its kernel compiles (never seen by users: `Auto`
/// runs the call on the host instead).
fn pending_error() -> Error {
    PENDING.with(|p| p.set(true));
    Error::Driver("internal: kernel still being compiled in the background".into())
}

/// Compiles running on background threads now, and the signal that one finished.
static COMPILING: Mutex<usize> = Mutex::new(0);
static COMPILED: Condvar = Condvar::new();

/// The longest a process exit waits for background compiles: skel's kernels compile in well
/// under a second; this only bounds a compiler that hangs.
const EXIT_WAIT: Duration = Duration::from_secs(30);

extern "C" {
    // The C library's exit hooks (C99; every platform Rust's std runs on has it).
    fn atexit(hook: extern "C" fn()) -> std::ffi::c_int;
}

/// Process-exit hook: waits (at most [`EXIT_WAIT`]) for the compiles still running on
/// background threads. `exit` runs the compiler library's own exit code (NVRTC's C++
/// static destructors), which frees memory a compile running on another thread still
/// uses: without this wait a short program that ends while a kernel compiles dies with
/// SIGSEGV inside NVRTC (the greyscale example on `Backend::Auto` over the sample photos,
/// every run on the H200). `exit` runs hooks in the reverse order of their registration;
/// this one is registered as each background compile starts, after the compiler library
/// is loaded (`cached` loads it, see [`KernelCache::get_or_compile`]), so it runs first.
extern "C" fn wait_for_background_compiles() {
    // The hook is registered once per background job: after one wait ran out, the others
    // do not wait again.
    static GAVE_UP: AtomicBool = AtomicBool::new(false);
    if GAVE_UP.load(Ordering::Acquire) {
        return;
    }
    let deadline = Instant::now() + EXIT_WAIT;
    let mut running = COMPILING.lock().unwrap_or_else(PoisonError::into_inner);
    while *running > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            GAVE_UP.store(true, Ordering::Release);
            log::warn!(
                target: "skel::tune",
                "process exit: a background kernel compile still runs after {EXIT_WAIT:?}"
            );
            return;
        }
        running = COMPILED
            .wait_timeout(running, left)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
}

/// Counts a background compile in and registers the exit hook for it (see
/// [`wait_for_background_compiles`]).
fn compile_started() {
    *COMPILING.lock().unwrap_or_else(PoisonError::into_inner) += 1;
    guard_this_threads_exit();
    rearm_exit_hook();
}

/// Registers the exit hook that waits for background jobs once more, so that it runs
/// ahead of every exit handler registered so far (`exit` runs them last-registered-first):
/// called after a compiler library registered its own (the CUDA backend's NVRTC warm-up).
pub(crate) fn rearm_exit_hook() {
    // SAFETY: registers a plain `extern "C"` function that cannot unwind (a lock taken
    // poison or not, a bounded wait). A failed registration (the C library's table full)
    // leaves the process as it was, without the hook.
    unsafe {
        atexit(wait_for_background_compiles);
    }
}

thread_local! {
    /// Whether this thread is a background job's ([`spawn_background`]).
    static BACKGROUND: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread runs a background job ([`spawn_background`]): a compile or
/// a warm-up there delays no call.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn in_background() -> bool {
    BACKGROUND.with(Cell::get)
}

/// Counts a background compile out and wakes an exit waiting for it.
fn compile_finished() {
    *COMPILING.lock().unwrap_or_else(PoisonError::into_inner) -= 1;
    COMPILED.notify_all();
}

/// Background compiles finished so far in this process.
static FINISHED: AtomicU64 = AtomicU64::new(0);

/// How many background compiles have finished (a caller that saw a compile pending compares
/// two readings to learn whether one finished meanwhile).
pub(crate) fn compiles_finished() -> u64 {
    FINISHED.load(Ordering::Acquire)
}

/// Counts a background job out when it ends, panicking or not.
struct Counted;

impl Drop for Counted {
    fn drop(&mut self) {
        compile_finished();
    }
}

/// Runs `job` (work that loads or enters a GPU library: a compile, a device probe) on a
/// thread of its own, counted like a background compile, so that a process exit waits for
/// it ([`wait_for_background_compiles`]).
pub(crate) fn spawn_background(
    name: &str,
    job: impl FnOnce() + Send + 'static,
) -> std::io::Result<()> {
    compile_started();
    let counted = move || {
        let _counted = Counted;
        BACKGROUND.with(|b| b.set(true));
        job();
    };
    std::thread::Builder::new()
        .name(name.into())
        .spawn(counted)
        .map(drop)
        .inspect_err(|_| compile_finished())
}

/// Waits for background work ([`wait_for_background_compiles`]) when its thread ends.
struct ExitGuard;

impl Drop for ExitGuard {
    fn drop(&mut self) {
        wait_for_background_compiles();
        // A job of varied sizes may never pause its calibration (where models are saved):
        // what it measured is saved as the main thread exits.
        crate::tune::save_at_exit();
    }
}

thread_local! {
    static EXIT_GUARD: ExitGuard = const { ExitGuard };
}

/// On the main thread, makes the process exit wait for background work before anything
/// else runs: `exit` (which returning from `main` calls) runs the exiting thread's
/// thread-local destructors first, ahead of every exit hook and C++ static destructor,
/// whatever their registration order. The `atexit` hook alone runs after the destructors
/// NVRTC registers while a compile is under way, which then crashed that compile (SIGSEGV
/// in `nvrtcCompileProgram`, the greyscale example on `Backend::Auto`, H100). Called where
/// a main thread passes before any compile can start: making a container, checking a
/// backend, an `Auto` decision. Other threads (whose end should not wait for a compile,
/// and which rarely call `exit`) rely on the hook.
pub(crate) fn guard_this_threads_exit() {
    thread_local! {
        static SEEN: Cell<bool> = const { Cell::new(false) };
    }
    if !SEEN.with(|s| s.replace(true)) && std::thread::current().name() == Some("main") {
        EXIT_GUARD.with(|_| ());
    }
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

impl<K: Clone + Eq + Hash, T: Clone, I> KernelCache<K, T, I> {
    /// An empty cache, for a `static`.
    pub(crate) const fn new() -> Self {
        KernelCache {
            cells: OnceLock::new(),
            behind: OnceLock::new(),
        }
    }

    fn cells(&self) -> MutexGuard<'_, Cells<K, T>> {
        self.cells
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn behind(&self) -> MutexGuard<'_, HashMap<K, Arc<Behind<I>>>> {
        self.behind
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The artefact for `key`, built on first use by `build` from the source `source()`
    /// generates, on the calling thread (also inside [`deferred`]: `build` may need the
    /// driver).
    #[cfg_attr(not(feature = "opencl"), allow(dead_code))]
    pub(crate) fn get_or_build(
        &self,
        key: K,
        source: impl FnOnce() -> Result<String>,
        build: impl FnOnce(&str) -> Result<T>,
    ) -> Result<T> {
        let cell = self.cells().entry(key.clone()).or_default().clone();
        if let Some(built) = cell.get() {
            return replay(built);
        }
        let src = source()?;
        let built = cell.get_or_init(|| build(&src));
        self.forget_failed(&key, &cell, built);
        replay(built)
    }

    /// The artefact for `key` where it is built already (the steady state: one lookup,
    /// nothing prepared for a build); `None` where it is not built yet.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn built(&self, key: &K) -> Option<Result<T>> {
        let cell = self.cells().get(key)?.clone();
        let built = cell.get()?;
        // The call has its kernel: any further one it needs is built in place.
        DEFER.with(|d| d.set(false));
        Some(replay(built))
    }

    /// The artefact for `key`: `cached` finds an image of the source `source()` generates
    /// where that is quick (a disk cache; its flag: whether a miss will compile in the
    /// background), else `compile` makes it without touching a driver (on a thread of its
    /// own inside [`deferred`]); `load` makes the artefact from the image, always on a
    /// calling thread.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn get_or_compile(
        &'static self,
        key: K,
        source: impl FnOnce() -> Result<String>,
        cached: impl FnOnce(&str, bool) -> Option<I>,
        compile: impl FnOnce(&str) -> Result<I> + Send + 'static,
        load: impl FnOnce(I) -> Result<T>,
    ) -> Result<T>
    where
        K: Send + 'static,
        I: Send + 'static,
    {
        let cell = self.cells().entry(key.clone()).or_default().clone();
        if let Some(built) = cell.get() {
            // The call has its kernel: any further one it needs is built in place.
            DEFER.with(|d| d.set(false));
            return replay(built);
        }
        let defer = DEFER.with(|d| d.replace(false));
        let running = self.behind().get(&key).cloned();
        let built = match running {
            // Inside `deferred`, a compile still running is waited for by nobody.
            Some(b) if defer && !b.ready() => return Err(pending_error()),
            Some(b) => {
                let built = cell.get_or_init(|| b.take().and_then(load));
                // Loaded (or failed): that compile is done with.
                let mut behind = self.behind();
                if behind.get(&key).is_some_and(|x| Arc::ptr_eq(x, &b)) {
                    behind.remove(&key);
                }
                built
            }
            None => {
                let src = source()?;
                let start = defer && START.with(Cell::get);
                match cached(&src, start) {
                    Some(image) => cell.get_or_init(|| load(image)),
                    None if defer => return self.compile_behind(key, src, compile),
                    None => cell.get_or_init(|| compile(&src).and_then(load)),
                }
            }
        };
        self.forget_failed(&key, &cell, built);
        replay(built)
    }

    /// Starts compiling `src` for `key` on a thread of its own (where `START` allows) and
    /// returns [`pending_error`]. The thread runs `compile` only: no driver call, no context.
    fn compile_behind(
        &'static self,
        key: K,
        src: String,
        compile: impl FnOnce(&str) -> Result<I> + Send + 'static,
    ) -> Result<T>
    where
        K: Send + 'static,
        I: Send + 'static,
    {
        if !START.with(Cell::get) {
            return Err(pending_error());
        }
        let behind = Arc::new(Behind {
            image: Mutex::new(None),
            done: Condvar::new(),
        });
        {
            let mut map = self.behind();
            if map.contains_key(&key) {
                // Another thread started it meanwhile.
                return Err(pending_error());
            }
            map.insert(key.clone(), behind.clone());
        }
        announce();
        let job = move || {
            let start = Instant::now();
            // A panicking compiler is a failed build, never a waiter left hanging.
            let image = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| compile(&src)))
                .unwrap_or_else(|_| {
                    Err(Error::Driver(
                        "the kernel compiler panicked on a background thread".into(),
                    ))
                });
            if crate::config::TUNE_LOG.value() {
                let ms = crate::tune::ms_since(start);
                log::info!(target: "skel::tune", "a kernel compiled in the background in {ms:.1} ms");
            }
            *behind.image() = Some(image);
            behind.done.notify_all();
            FINISHED.fetch_add(1, Ordering::AcqRel);
            crate::tune::kernel_ready();
        };
        if let Err(e) = spawn_background("skel-kernel-compile", job) {
            // No thread: this call runs on the host, the next one tries again (nothing is
            // left marked).
            self.behind().remove(&key);
            log::warn!(target: "skel::tune", "spawning a kernel compile thread: {e}");
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
        Error::DeviceLost { backend, reason } => Error::DeviceLost {
            backend: *backend,
            reason: reason.clone(),
        },
        Error::InvalidArgument(m) => Error::InvalidArgument(m.clone()),
        Error::BackendUnavailable { backend, reason } => Error::BackendUnavailable {
            backend: *backend,
            reason: reason.clone(),
        },
        other => Error::Driver(other.to_string().into()),
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
    fn a_deferred_call_pends_while_the_compile_runs_behind() {
        let cache: &'static KernelCache<u32, u64, u64> = Box::leak(Box::new(KernelCache::new()));
        let loads: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
        let load = |image: u64| {
            loads.fetch_add(1, Ordering::Relaxed);
            Ok(image + 1)
        };
        // A trial not worth a compile pends without starting one.
        let trial = deferred(false, || {
            cache.get_or_compile(
                5,
                || Ok("src".into()),
                |_, _| None,
                |_| -> Result<u64> { unreachable!("no compile for a trial") },
                load,
            )
        });
        assert!(trial.is_err() && pending());
        assert!(cache.behind().is_empty());
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let (began, started) = std::sync::mpsc::channel::<std::thread::ThreadId>();
        let first = deferred(true, || {
            cache.get_or_compile(
                5,
                || Ok("src".into()),
                |_, behind| {
                    assert!(behind);
                    None
                },
                move |_| {
                    let _ = began.send(std::thread::current().id());
                    let _ = wait.recv();
                    Ok(50)
                },
                load,
            )
        });
        assert!(first.is_err() && pending());
        // The compile runs on a thread of its own (not yet done).
        assert_ne!(started.recv().unwrap(), std::thread::current().id());
        // A second deferred call does not wait, nor start another compile.
        let second = deferred(true, || {
            cache.get_or_compile(5, || Ok("src".into()), |_, _| None, |_| Ok(99), load)
        });
        assert!(second.is_err() && pending());
        assert_eq!(loads.load(Ordering::Relaxed), 0);
        go.send(()).unwrap();
        // A call outside `deferred` waits for that compile and loads its image here.
        assert_eq!(
            cache
                .get_or_compile(5, || Ok("src".into()), |_, _| None, |_| Ok(99), load)
                .unwrap(),
            51
        );
        let ready = deferred(true, || {
            cache.get_or_compile(5, || Ok("src".into()), |_, _| None, |_| Ok(99), load)
        });
        assert_eq!(ready.unwrap(), 51);
        assert!(!pending());
        assert_eq!(loads.load(Ordering::Relaxed), 1);
        assert!(cache.behind().is_empty());
    }

    #[test]
    fn a_deferred_call_loads_a_finished_image_on_its_own_thread() {
        let cache: &'static KernelCache<u32, u64, u64> = Box::leak(Box::new(KernelCache::new()));
        let first = deferred(true, || {
            cache.get_or_compile(
                9,
                || Ok("src".into()),
                |_, _| None,
                |_| Ok(7),
                |i| Ok(i * 2),
            )
        });
        assert!(first.is_err() && pending());
        let b = cache.behind().get(&9).cloned().unwrap();
        while !b.ready() {
            std::thread::yield_now();
        }
        let caller = std::thread::current().id();
        let loaded = deferred(true, || {
            cache.get_or_compile(
                9,
                || Ok("src".into()),
                |_, _| None,
                |_| Ok(0),
                move |i| {
                    assert_eq!(std::thread::current().id(), caller);
                    Ok(i * 3)
                },
            )
        });
        assert_eq!(loaded.unwrap(), 21);
        assert!(!pending());
    }

    #[test]
    fn built_answers_only_once_built() {
        let cache: &'static KernelCache<u32, u64, u64> = Box::leak(Box::new(KernelCache::new()));
        assert!(cache.built(&3).is_none());
        let got = cache.get_or_compile_here(3);
        assert_eq!(got.unwrap(), 4);
        assert_eq!(cache.built(&3).unwrap().unwrap(), 4);
    }

    impl KernelCache<u32, u64, u64> {
        /// A build in place of `key`, its image `key`, loaded as `key + 1`.
        fn get_or_compile_here(&'static self, key: u32) -> Result<u64> {
            self.get_or_compile(
                key,
                || Ok("src".into()),
                |_, _| None,
                move |_| Ok(u64::from(key)),
                |i| Ok(i + 1),
            )
        }
    }

    #[test]
    fn a_quick_hit_loads_at_once_without_a_thread() {
        let cache: &'static KernelCache<u32, u64, u64> = Box::leak(Box::new(KernelCache::new()));
        let got = deferred(true, || {
            cache.get_or_compile(
                4,
                || Ok("src".into()),
                |_, _| Some(8),
                |_| -> Result<u64> { unreachable!("a disk hit compiles nothing") },
                |i| Ok(i + 1),
            )
        });
        assert_eq!(got.unwrap(), 9);
        assert!(!pending());
        assert!(cache.behind().is_empty());
    }

    #[test]
    fn a_compile_error_behind_is_remembered() {
        let cache: &'static KernelCache<u32, u64, u64> = Box::leak(Box::new(KernelCache::new()));
        let first = deferred(true, || {
            cache.get_or_compile(
                2,
                || Ok("int x = ;".into()),
                |_, _| None,
                |src| Err(compile_error(src)),
                Ok,
            )
        });
        assert!(first.is_err() && pending());
        for _ in 0..2 {
            let err = cache
                .get_or_compile(2, || Ok("x".into()), |_, _| None, |_| Ok(1), Ok)
                .unwrap_err();
            assert!(
                matches!(err, Error::Compile { source_code, .. } if source_code == "int x = ;")
            );
        }
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
