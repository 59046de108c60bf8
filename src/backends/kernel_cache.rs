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

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use crate::{Error, Result};

/// A build's outcome as the cache keeps it.
type Built<T> = std::result::Result<T, Error>;

/// One cell per key; a cell is built once.
type Cells<K, T> = HashMap<K, Arc<OnceLock<Built<T>>>>;

/// Compiled artefacts `T` per key `K`, built once each (see the module docs).
pub(crate) struct KernelCache<K, T> {
    cells: OnceLock<Mutex<Cells<K, T>>>,
}

impl<K: Clone + Eq + Hash, T: Clone> KernelCache<K, T> {
    /// An empty cache, for a `static`.
    pub(crate) const fn new() -> Self {
        KernelCache {
            cells: OnceLock::new(),
        }
    }

    fn cells(&self) -> MutexGuard<'_, Cells<K, T>> {
        self.cells
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The artefact for `key`, built on first use by `build` from the source `source()`
    /// generates.
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
        if matches!(built, Err(e) if !matches!(e, Error::Compile { .. })) {
            let mut cells = self.cells();
            if cells.get(&key).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
                cells.remove(&key);
            }
        }
        replay(built)
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
        let cache: KernelCache<u32, u64> = KernelCache::new();
        let builds = AtomicUsize::new(0);
        let get = |key: u32| {
            cache.get_or_build(
                key,
                || Ok(format!("source {key}")),
                |src| {
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
        let cache: KernelCache<u32, u64> = KernelCache::new();
        let builds = AtomicUsize::new(0);
        for _ in 0..3 {
            let err = cache
                .get_or_build(
                    7,
                    || Ok("int x = ;".into()),
                    |src| {
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
        let cache: KernelCache<u32, u64> = KernelCache::new();
        let builds = AtomicUsize::new(0);
        let oom = cache.get_or_build(
            3,
            || Ok(String::new()),
            |_| {
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
            |_| {
                builds.fetch_add(1, Ordering::Relaxed);
                Ok(5)
            },
        );
        assert_eq!(ok.unwrap(), 5);
        assert_eq!(builds.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn concurrent_callers_share_one_build() {
        let cache: KernelCache<u32, u64> = KernelCache::new();
        let builds = AtomicUsize::new(0);
        let start = std::sync::Barrier::new(8);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    start.wait();
                    let v = cache.get_or_build(
                        1,
                        || Ok("src".into()),
                        |_| {
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
