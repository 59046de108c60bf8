//! Run-time kernel building shared by the GPU backends: program keys for the in-memory
//! cache, `SKEL_DUMP_SOURCE=dir` (every generated source written to `dir`), the user cache
//! directory for compiled binaries and a stable hash to name them.
//!
//! The on-disk cache lives in `$SKEL_CACHE_DIR`, else `$XDG_CACHE_HOME/skel`, else
//! `$HOME/.cache/skel`; `SKEL_CACHE_DIR=off` (or `0`) disables it. A file is named by a
//! hash of everything the binary depends on (source, compiler options, device, compiler
//! version), so a stale entry is never picked up; entries are written to a temporary name
//! and renamed, so concurrent processes never see a partial file.
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

/// A 128-bit FNV-1a hash of `parts` (each part length-prefixed), as 32 hex digits. Stable
/// across processes, builds and platforms (unlike `DefaultHasher`).
pub(crate) fn stable_hash(parts: &[&[u8]]) -> String {
    const PRIME: u128 = 0x0000000001000000000000000000013B;
    let mut h: u128 = 0x6c62272e07bb014262b821756295c58d;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= u128::from(b);
            h = h.wrapping_mul(PRIME);
        }
    };
    for p in parts {
        eat(&(p.len() as u64).to_le_bytes());
        eat(p);
    }
    format!("{h:032x}")
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

/// Stores `bytes` as `key.ext` of backend `sub` (atomically: temporary file, then rename).
/// Failures are ignored: the cache is an optimisation.
pub(crate) fn cache_store(sub: &str, key: &str, ext: &str, bytes: &[u8]) {
    let Some(dir) = cache_dir(sub) else {
        return;
    };
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let tmp = dir.join(format!(".{key}.{}.tmp", std::process::id()));
    if std::fs::write(&tmp, bytes).is_ok()
        && std::fs::rename(&tmp, dir.join(format!("{key}.{ext}"))).is_err()
    {
        let _ = std::fs::remove_file(&tmp);
    }
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
