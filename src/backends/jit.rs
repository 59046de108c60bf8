//! Run-time kernel building shared by the GPU backends: program keys for the in-memory
//! cache, `SKEL_DUMP_SOURCE=dir` (every generated source written to `dir`), the user cache
//! directory for compiled binaries and a stable hash to name them.
//!
//! The on-disk cache lives in `$SKEL_CACHE_DIR`, else the platform's cache directory
//! (`dirs::cache_dir()`: `$XDG_CACHE_HOME` or `~/.cache` on Linux, `~/Library/Caches` on
//! macOS, `%LOCALAPPDATA%` on Windows) under `skel`; `SKEL_CACHE_DIR=off` (or `0`)
//! disables it. A file is named by a 128-bit xxh3 hash of everything the binary depends on
//! (source, compiler options, device, compiler version), so a stale entry is never picked
//! up; entries are written to a temporary file in the same directory and persisted over the
//! name (`tempfile`), so concurrent processes never see a partial file.
//!
//! `SKEL_JIT_LOG=1` logs one line per kernel build (the `log` crate, `info`): compiled (and
//! how long it took) or loaded from the disk cache. All three are in [`crate::config`].

// Only the GPU backends use this module; without them it is dead code.
#![allow(dead_code)]

use std::any::TypeId;
use std::path::PathBuf;

/// What identifies a program in memory: the skeleton form, the types of everything in it
/// (user functions are unit types, so their `TypeId` names them) and the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ProgKey {
    pub(crate) kind: &'static str,
    pub(crate) types: TypeId,
    pub(crate) device: u32,
    /// The lazy inputs evaluated in the kernel (`chain::Reads::key`; 0: none).
    pub(crate) chain: u64,
}

impl ProgKey {
    /// The key of skeleton form `kind` over the types in the tuple `K` on `device`.
    pub(crate) fn of<K: 'static>(kind: &'static str, device: u32) -> Self {
        ProgKey {
            kind,
            types: TypeId::of::<K>(),
            device,
            chain: 0,
        }
    }

    /// The same key for a kernel that evaluates the lazy inputs of key `chain`.
    pub(crate) fn chained(self, chain: u64) -> Self {
        ProgKey { chain, ..self }
    }
}

/// A 128-bit xxh3 hash of `parts` (each part length-prefixed), as 32 hex digits. Stable
/// across processes, builds and platforms (unlike `DefaultHasher`): the names of cached
/// binaries. (Until 0.1 it was FNV-1a: entries of older versions are never looked up again,
/// so each kernel is compiled once more.)
pub(crate) fn stable_hash(parts: &[&[u8]]) -> String {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for p in parts {
        h.update(&(p.len() as u64).to_le_bytes());
        h.update(p);
    }
    format!("{:032x}", h.digest128())
}

/// Writes `source` to `$SKEL_DUMP_SOURCE/<name>_<hash>.<ext>` if that variable is set.
/// Failures are ignored: dumping is a debugging aid.
pub(crate) fn dump_source(name: &str, ext: &str, source: &str) {
    let Some(dir) = crate::config::DUMP_SOURCE.value() else {
        return;
    };
    let hash = stable_hash(&[source.as_bytes()]);
    let file = format!("{name}_{}.{ext}", &hash[..16]);
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(dir.join(file), source);
}

/// Logs `message` (`info`) if `SKEL_JIT_LOG` is on.
pub(crate) fn log(message: impl FnOnce() -> String) {
    if crate::config::JIT_LOG.value() {
        log::info!(target: "skel::jit", "{}", message());
    }
}

/// The directory for compiled kernels of backend `sub` (`cuda`, `opencl`), or `None` if
/// the disk cache is disabled or no home directory is known.
pub(crate) fn cache_dir(sub: &str) -> Option<PathBuf> {
    Some(crate::config::CACHE_DIR.value()?.join(sub))
}

/// The largest compiled kernel binary read from the cache (a module of every skeleton of a
/// large program is a few MiB).
const CACHE_FILE_CAP: u64 = 256 << 20;

/// The cached binary `key.ext` of backend `sub`, if present (a regular file of at most
/// [`CACHE_FILE_CAP`] bytes).
pub(crate) fn cache_load(sub: &str, key: &str, ext: &str) -> Option<Vec<u8>> {
    let path = cache_dir(sub)?.join(format!("{key}.{ext}"));
    read_regular(&path, CACHE_FILE_CAP)
        .ok()
        .filter(|b| !b.is_empty())
}

/// The contents of `path` if it is a regular file (after symbolic links) of at most `cap`
/// bytes; an error of kind `NotFound` where there is none, `InvalidData` for anything
/// else there. A FIFO, a device (`/dev/zero`) or a directory under a cache or model path
/// is refused before it is opened, so it can neither block the call nor fill the memory.
pub(crate) fn read_regular(path: &std::path::Path, cap: u64) -> std::io::Result<Vec<u8>> {
    use std::io::{Error, ErrorKind, Read};
    let refuse = |what: String| Err(Error::new(ErrorKind::InvalidData, what));
    if !std::fs::metadata(path)?.is_file() {
        return refuse("not a regular file".into());
    }
    let file = std::fs::File::open(path)?;
    // What was opened, not what was looked at: the path may have changed in between.
    let len = file.metadata()?;
    if !len.is_file() {
        return refuse("not a regular file".into());
    }
    let mut bytes = Vec::with_capacity(len.len().min(cap) as usize);
    file.take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return refuse(format!("larger than {cap} bytes"));
    }
    Ok(bytes)
}

/// Stores `bytes` as `key.ext` of backend `sub` (atomically: see [`write_atomic`]).
/// Failures are logged (`debug`), not returned: the cache is an optimisation.
pub(crate) fn cache_store(sub: &str, key: &str, ext: &str, bytes: &[u8]) {
    let Some(dir) = cache_dir(sub) else {
        return;
    };
    let path = dir.join(format!("{key}.{ext}"));
    if let Err(e) = write_atomic(&path, bytes) {
        log::debug!(target: "skel::jit", "not cached: {}: {e}", path.display());
    }
}

/// Writes `bytes` to `path` atomically: into a temporary file in the same directory
/// (created if missing), then persisted over `path`, so a reader sees the old file or the
/// whole new one, never a part; the temporary file is removed on any failure.
pub(crate) fn write_atomic(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::Builder::new().prefix(".skel-").tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// `name` as a `&'static str` for a [`ProgKey`] kind, leaked once per distinct name: for
/// kernels specialised on per-call values (a stencil's radius), whose variants are few.
pub(crate) fn interned(name: String) -> &'static str {
    static NAMES: std::sync::OnceLock<std::sync::Mutex<std::collections::HashSet<&'static str>>> =
        std::sync::OnceLock::new();
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(&s) = names.get(name.as_str()) {
        return s;
    }
    let s: &'static str = Box::leak(name.into_boxed_str());
    names.insert(s);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_stable_and_separates_parts() {
        assert_eq!(stable_hash(&[b"ab", b"c"]), stable_hash(&[b"ab", b"c"]));
        assert_ne!(stable_hash(&[b"ab", b"c"]), stable_hash(&[b"a", b"bc"]));
        assert_eq!(stable_hash(&[]).len(), 32);
        // The cache's file names: fixed for good (a change recompiles every kernel once).
        assert_eq!(
            stable_hash(&[b"skel"]),
            format!("{:032x}", {
                let mut h = xxhash_rust::xxh3::Xxh3::new();
                h.update(&4u64.to_le_bytes());
                h.update(b"skel");
                h.digest128()
            })
        );
    }

    #[test]
    fn atomic_writes_replace_the_whole_file_and_leave_no_temporary() {
        let d = std::env::temp_dir().join(format!("skel-atomic-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let path = d.join("sub").join("k.bin");
        write_atomic(&path, b"first, longer").unwrap();
        write_atomic(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        let names: Vec<_> = std::fs::read_dir(d.join("sub"))
            .unwrap()
            .flatten()
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        let _ = std::fs::remove_dir_all(&d);
    }
}

#[cfg(test)]
mod read_tests {
    use super::read_regular;
    use std::io::ErrorKind;

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("skel-read-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn only_regular_files_up_to_the_cap_are_read() {
        let d = dir("regular");
        let file = d.join("f");
        std::fs::write(&file, b"0123456789").unwrap();
        assert_eq!(read_regular(&file, 10).unwrap(), b"0123456789");
        let big = read_regular(&file, 9).unwrap_err();
        assert_eq!(big.kind(), ErrorKind::InvalidData, "{big}");
        let none = read_regular(&d.join("missing"), 10).unwrap_err();
        assert_eq!(none.kind(), ErrorKind::NotFound);
        // a directory, and a link to a device that never ends
        assert_eq!(
            read_regular(&d, 10).unwrap_err().kind(),
            ErrorKind::InvalidData
        );
        let zero = d.join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        assert_eq!(
            read_regular(&zero, 1 << 40).unwrap_err().kind(),
            ErrorKind::InvalidData
        );
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let d = dir("fifo");
        let fifo = d.join("p");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|s| s.success()) {
            println!("skipped: mkfifo is not available");
            return;
        }
        // Opening a FIFO without a writer blocks: the read must not get that far.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(read_regular(&fifo, 10).map_err(|e| e.kind())));
        let got = rx.recv_timeout(std::time::Duration::from_secs(30));
        assert_eq!(got, Ok(Err(ErrorKind::InvalidData)));
    }
}
