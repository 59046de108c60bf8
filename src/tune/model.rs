//! The performance models: per (skeleton, user function, element types, backend), the
//! history of measured times per power-of-two size bucket (StarPU's history-based model:
//! mean, spread and count), and a prediction for any size from it (the bucket's own history
//! where measured, else log-log interpolation between the nearest measured buckets).
//!
//! The models persist as one small JSON file, `model.json`, in the tune directory
//! (`$SKEL_TUNE_DIR`, else `tune/` in the kernel cache directory), read and written with
//! `serde_json`. Every save re-reads the file and merges it with this process's models (per
//! bucket the history with more samples wins) under an exclusive lock of `model.lock`
//! beside it (`fs4`), then writes a temporary file and persists it over the old one
//! (`tempfile`), so concurrent processes never see a torn file and never lose each other's
//! samples. A file that is damaged or of another version is reported in a log warning and
//! replaced on the next save; the models start afresh.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use fs4::fs_std::FileExt;
use serde::{Deserialize, Serialize};

use crate::{Backend, Error, Result};

/// The `format` field of a model file.
const FORMAT: &str = "skel-tune";

/// The `version` field this code writes; a file of another version than this or
/// [`READS`] is reported and replaced on the next save. Version 4 added a bucket's
/// `first_run` mark: a reader of version 3 refuses the field, so the version changed
/// rather than let an older skel take such a file for a damaged one.
const VERSION: u32 = 4;

/// The versions this code reads: version 3 is version 4 without `first_run` marks.
const READS: [u32; 2] = [3, VERSION];

/// The file name of the models inside the tune directory.
pub(crate) const FILE: &str = "model.json";

/// The text file of earlier versions (`skel-tune 2` and before): reported once when it is
/// all there is, never read.
const OLD_FILE: &str = "model-v2.txt";

/// What a model is kept for: one skeleton form with one user function on element types.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Key {
    /// `map`, `reduce`, `map_reduce`, ...
    pub skeleton: String,
    /// The element types of the operands, comma-separated (`f32,f32->f32`).
    pub types: String,
    /// The user function's Rust type path (its identity).
    pub function: String,
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of {} on {}",
            self.skeleton, self.function, self.types
        )
    }
}

/// The measured history of one size bucket.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bucket {
    /// How many calls were measured.
    pub count: u32,
    /// Their mean size in elements.
    pub mean_n: f64,
    /// Their mean time in nanoseconds, transfers of operands not already in place
    /// excluded.
    pub mean_ns: f64,
    /// The sum of the squared differences of the times from their mean (ns², Welford's
    /// running form): the spread, see [`Bucket::sd_ns`].
    pub m2_ns: f64,
}

impl Bucket {
    fn add(&mut self, n: usize, ns: f64) {
        let c = f64::from(self.count);
        self.mean_n = (self.mean_n * c + n as f64) / (c + 1.0);
        let delta = ns - self.mean_ns;
        self.mean_ns += delta / (c + 1.0);
        self.m2_ns += delta * (ns - self.mean_ns);
        self.count = self.count.saturating_add(1);
    }

    /// The sample standard deviation of the measured times (ns; 0 below two samples).
    ///
    /// ```
    /// let b = skel::tune::Bucket { count: 3, mean_n: 1024.0, mean_ns: 2000.0, m2_ns: 8.0e4 };
    /// assert_eq!(b.sd_ns(), 200.0);
    /// ```
    pub fn sd_ns(&self) -> f64 {
        if self.count < 2 {
            return 0.0;
        }
        (self.m2_ns.max(0.0) / f64::from(self.count - 1)).sqrt()
    }

    /// Half the width of the interval that holds the true mean time with about 95 %
    /// confidence (two standard errors; infinite below two samples).
    pub(crate) fn half_interval_ns(&self) -> f64 {
        if self.count < 2 {
            return f64::INFINITY;
        }
        2.0 * self.sd_ns() / f64::from(self.count).sqrt()
    }
}

/// The bucket of a size: `b` holds sizes in `[2^(b-1), 2^b)`, bucket 0 the empty calls.
pub(crate) fn bucket_of(n: usize) -> u32 {
    usize::BITS - n.leading_zeros()
}

/// Measurements a bucket needs before its own history is trusted (one run can be an
/// outlier: page faults of fresh buffers, another process); the backend a call runs on
/// keeps being timed until its bucket has them.
const MIN_SAMPLES: u32 = 2;

/// How far (in buckets) a measured bucket may be for interpolation to stand in for a
/// measurement of its own.
const BRACKET: u32 = 2;

/// How far (in buckets: a factor of 16 in size) one measured bucket may be for
/// extrapolation from it to stand in for a measurement of its own (a job whose every call
/// has a new size, photos, then calibrates each candidate once, not once per size).
pub(crate) const EXTRAPOLATE: u32 = 4;

/// Every model of the process: histories per key and backend, and the measured link
/// bandwidth per device backend.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Models {
    pub history: BTreeMap<(Key, Backend), BTreeMap<u32, Bucket>>,
    /// Buckets whose only measurement is a device's (or a host backend's) first run of the
    /// size in a process: pessimistic (fresh allocations), replaced by the bucket's next
    /// steady run, in this process or a later one (saved with a `first_run` mark).
    pub provisional: BTreeSet<(Key, Backend, u32)>,
    /// Bytes per second between host and device, per device backend.
    pub link: BTreeMap<Backend, f64>,
}

impl Models {
    /// Adds one measurement.
    pub(crate) fn record(&mut self, key: &Key, backend: Backend, n: usize, ns: f64) {
        self.history
            .entry((key.clone(), backend))
            .or_default()
            .entry(bucket_of(n))
            .or_insert(Bucket {
                count: 0,
                mean_n: 0.0,
                mean_ns: 0.0,
                m2_ns: 0.0,
            })
            .add(n, ns);
    }

    /// The history of `key` on `backend`.
    pub(crate) fn buckets(&self, key: &Key, backend: Backend) -> Option<&BTreeMap<u32, Bucket>> {
        self.history.get(&(key.clone(), backend))
    }

    /// The history of the bucket of `n` itself on `backend`, if measured.
    pub(crate) fn own(&self, key: &Key, backend: Backend, n: usize) -> Option<&Bucket> {
        self.buckets(key, backend)?.get(&bucket_of(n))
    }

    /// Whether `backend` has a measurement `n` can be predicted from: its own bucket, a
    /// bracketing pair at most [`BRACKET`] away, or any measured bucket at most
    /// [`EXTRAPOLATE`] away (one sample is enough: a job of varied sizes shares the first
    /// measurements of a function across its size buckets instead of calibrating every
    /// candidate again for each new size).
    pub(crate) fn known(&self, key: &Key, backend: Backend, n: usize) -> bool {
        let Some(h) = self.buckets(key, backend) else {
            return false;
        };
        let b = bucket_of(n);
        self.bracketed(key, backend, n)
            || h.range(b.saturating_sub(EXTRAPOLATE)..=b + EXTRAPOLATE)
                .next()
                .is_some()
    }

    /// Whether the bucket of `n` itself has fewer than [`MIN_SAMPLES`] measurements on
    /// `backend` (the backend that runs such a call is timed: a free measurement).
    pub(crate) fn thin(&self, key: &Key, backend: Backend, n: usize) -> bool {
        self.own(key, backend, n)
            .map_or(true, |own| own.count < MIN_SAMPLES)
    }

    /// Replaces the history of the bucket of `n` on `backend` with one measurement: a
    /// steady run supersedes a pessimistic first run (see [`Models::provisional`]).
    pub(crate) fn replace(&mut self, key: &Key, backend: Backend, n: usize, ns: f64) {
        if let Some(h) = self.history.get_mut(&(key.clone(), backend)) {
            h.remove(&bucket_of(n));
        }
        self.record(key, backend, n, ns);
    }

    /// Whether the bucket of `n` on `backend` is measured, or has measured buckets at most
    /// [`BRACKET`] away on both sides (then [`Models::predict`] interpolates).
    pub(crate) fn bracketed(&self, key: &Key, backend: Backend, n: usize) -> bool {
        let Some(h) = self.buckets(key, backend) else {
            return false;
        };
        let b = bucket_of(n);
        h.contains_key(&b)
            || h.range(b.saturating_sub(BRACKET)..b).next_back().is_some()
                && h.range(b + 1..=b + BRACKET).next().is_some()
    }

    /// The measured bucket nearest to the bucket of `n` on `backend` (the smaller on a tie).
    pub(crate) fn nearest(&self, key: &Key, backend: Backend, n: usize) -> Option<&Bucket> {
        let b = bucket_of(n);
        let h = self.buckets(key, backend)?;
        h.iter().min_by_key(|(k, _)| k.abs_diff(b)).map(|(_, v)| v)
    }

    /// The predicted time of `n` elements on `backend` in nanoseconds (operands in
    /// place), or `None` without any history.
    pub(crate) fn predict(&self, key: &Key, backend: Backend, n: usize) -> Option<f64> {
        let h = self.buckets(key, backend)?;
        let points: Vec<(f64, f64)> = h
            .values()
            .map(|b| (b.mean_n.max(1.0), b.mean_ns.max(1.0)))
            .collect();
        Some(interpolate(&points, (n as f64).max(1.0)))
    }

    /// Merges `other` into these models: per bucket the history with more samples wins
    /// (both are usually the same samples, one saved earlier), and of two as long a steady
    /// one over a first run; links from `self` win.
    pub(crate) fn merge(&mut self, other: &Models) {
        for (k, buckets) in &other.history {
            let mine = self.history.entry(k.clone()).or_default();
            for (b, theirs) in buckets {
                let at = (k.0.clone(), k.1, *b);
                let (mine_first, theirs_first) = (
                    self.provisional.contains(&at),
                    other.provisional.contains(&at),
                );
                let keep = mine.get(b).is_some_and(|m| {
                    m.count > theirs.count
                        || m.count == theirs.count && (!mine_first || theirs_first)
                });
                if !keep {
                    mine.insert(*b, *theirs);
                    match theirs_first {
                        true => self.provisional.insert(at),
                        false => self.provisional.remove(&at),
                    };
                }
            }
        }
        for (b, bw) in &other.link {
            self.link.entry(*b).or_insert(*bw);
        }
    }
}

/// `y` at `x` on the piecewise log-log line through `points` (sorted by `x`, all
/// positive): between the two neighbours, or beyond the ends along the last segment with
/// its slope held to `0..=1.5` (a bigger call never runs faster, and no skeleton here
/// grows much faster than linearly).
fn interpolate(points: &[(f64, f64)], x: f64) -> f64 {
    let len = points.len();
    if len == 1 {
        return points[0].1 * (x / points[0].0).max(1.0);
    }
    let at = points.partition_point(|p| p.0 < x);
    let inside = at > 0 && at < len;
    let (a, b) = match at {
        0 => (points[0], points[1]),
        i if i == len => (points[len - 2], points[len - 1]),
        i => (points[i - 1], points[i]),
    };
    if a.0 == b.0 {
        return b.1;
    }
    let slope = (b.1.ln() - a.1.ln()) / (b.0.ln() - a.0.ln());
    let (slope, base) = if inside {
        (slope, a)
    } else {
        (slope.clamp(0.0, 1.5), if at == 0 { a } else { b })
    };
    (base.1.ln() + slope * (x.ln() - base.0.ln())).exp()
}

/// The directory the models live in: `$SKEL_TUNE_DIR`, else `tune/` next to the compiled
/// kernels (`None` where the kernel cache is disabled and no directory is given).
pub(crate) fn default_dir() -> Option<PathBuf> {
    crate::config::TUNE_DIR.fixed_value()
}

/// The largest model file read: far more than every skeleton, type and size bucket of a
/// program take (an entry is about 150 bytes).
const MODEL_FILE_CAP: u64 = 16 << 20;

/// A model file as JSON: a format tag and version, the measured links, and one entry per
/// (skeleton, types, function, backend) with its buckets.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelFile {
    format: String,
    version: u32,
    /// Bytes per second between host and device, by backend name.
    links: BTreeMap<String, f64>,
    histories: Vec<HistoryRecord>,
}

/// Only the tag and version of a model file: read first, so that a file of another version
/// is named as such rather than as a damaged one.
#[derive(Deserialize)]
struct Header {
    format: Option<String>,
    version: Option<u32>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct HistoryRecord {
    skeleton: String,
    types: String,
    function: String,
    backend: String,
    /// By bucket number (JSON object keys are strings: `"11"` holds sizes 1024..2047).
    buckets: BTreeMap<u32, BucketRecord>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BucketRecord {
    count: u32,
    mean_n: f64,
    mean_ns: f64,
    m2_ns: f64,
    /// Only a first run measured it ([`Models::provisional`]); written only where true, so
    /// files without such buckets read as before.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    first_run: bool,
}

impl Models {
    /// The models as the JSON text of a model file.
    pub(crate) fn to_json(&self) -> String {
        let file = ModelFile {
            format: FORMAT.into(),
            version: VERSION,
            links: self
                .link
                .iter()
                .map(|(b, bw)| (b.to_string(), *bw))
                .collect(),
            histories: self
                .history
                .iter()
                .map(|((key, backend), buckets)| HistoryRecord {
                    skeleton: key.skeleton.clone(),
                    types: key.types.clone(),
                    function: key.function.clone(),
                    backend: backend.to_string(),
                    buckets: buckets
                        .iter()
                        .map(|(b, h)| {
                            let at = (key.clone(), *backend, *b);
                            let record = BucketRecord {
                                count: h.count,
                                mean_n: h.mean_n,
                                mean_ns: h.mean_ns,
                                m2_ns: h.m2_ns,
                                first_run: self.provisional.contains(&at),
                            };
                            (*b, record)
                        })
                        .collect(),
                })
                .collect(),
        };
        // Strings, integers and floats only: serde_json cannot fail on them (a non-finite
        // float would be written as `null`, and the file then read as damaged and
        // replaced). A pretty file is easier to read and diff.
        serde_json::to_string_pretty(&file).unwrap_or_default()
    }

    /// Parses the JSON text of a model file; `Err(why)` for one that is damaged or of
    /// another format or version.
    pub(crate) fn from_json(text: &str) -> std::result::Result<Models, String> {
        let header: Header =
            serde_json::from_str(text).map_err(|e| format!("not a model file: {e}"))?;
        if header.format.as_deref() != Some(FORMAT) {
            return Err(format!("not a model file (format {:?})", header.format));
        }
        if !header.version.is_some_and(|v| READS.contains(&v)) {
            let found = header.version.map_or("none".into(), |v| v.to_string());
            return Err(format!(
                "model file version {found}; this version of skel reads versions 3 and \
                 {VERSION}"
            ));
        }
        let file: ModelFile = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let mut m = Models::default();
        for (name, bw) in file.links {
            let b: Backend = name.parse().map_err(|e| format!("links: {e}"))?;
            if !(bw.is_finite() && bw > 0.0) {
                return Err(format!("links: bandwidth {bw} of {name}"));
            }
            m.link.insert(b, bw);
        }
        for (i, h) in file.histories.into_iter().enumerate() {
            let bad = |what: &str| format!("histories[{i}]: {what}");
            let backend: Backend = h.backend.parse().map_err(|e| bad(&format!("{e}")))?;
            if backend == Backend::Auto || h.function.is_empty() {
                return Err(bad("entry"));
            }
            let key = Key {
                skeleton: h.skeleton,
                types: h.types,
                function: h.function,
            };
            let buckets = m.history.entry((key.clone(), backend)).or_default();
            for (b, r) in h.buckets {
                let sane = r.count > 0
                    && r.mean_ns.is_finite()
                    && r.mean_ns >= 0.0
                    && r.mean_n.is_finite()
                    && r.m2_ns.is_finite()
                    && r.m2_ns >= 0.0;
                if !sane {
                    return Err(bad(&format!("bucket {b}")));
                }
                let bucket = Bucket {
                    count: r.count,
                    mean_n: r.mean_n,
                    mean_ns: r.mean_ns,
                    m2_ns: r.m2_ns,
                };
                buckets.insert(b, bucket);
                if r.first_run {
                    m.provisional.insert((key.clone(), backend, b));
                }
            }
        }
        Ok(m)
    }
}

/// What reading the model file in a directory found.
enum Read {
    /// Its models (empty where there is no file).
    Models(Models),
    /// A file that is damaged or of another version: why.
    Damaged(String),
}

/// Reads the model file in `dir`; `Err` when it exists but cannot be read (not a regular
/// file, too large, an I/O error).
fn read(dir: &Path) -> Result<Read> {
    let path = dir.join(FILE);
    match crate::backends::jit::read_regular(&path, MODEL_FILE_CAP) {
        Ok(bytes) => Ok(match String::from_utf8(bytes) {
            Ok(text) => Models::from_json(&text).map_or_else(Read::Damaged, Read::Models),
            Err(e) => Read::Damaged(format!("not UTF-8 text: {e}")),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Read::Models(Models::default())),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Reads the model file in `dir`: empty models when there is none; empty models and a log
/// warning when it is damaged, of another version, or only a file of the earlier text
/// format is there; `Err` when it exists but cannot be read.
pub(crate) fn load(dir: &Path) -> Result<Models> {
    match read(dir)? {
        Read::Models(m) => {
            let old = dir.join(OLD_FILE);
            if m == Models::default() && !dir.join(FILE).exists() && old.exists() {
                log::warn!(
                    target: "skel::tune",
                    "{} is a model file of an earlier skel (a text format); it is not read:                      Backend::Auto calibrates afresh and saves {FILE} beside it (the old                      file can be deleted)",
                    old.display()
                );
            }
            Ok(m)
        }
        Read::Damaged(why) => {
            log::warn!(
                target: "skel::tune",
                "the tune model {} is ignored ({why}): Backend::Auto calibrates afresh and                  replaces the file on its next save",
                dir.join(FILE).display()
            );
            Ok(Models::default())
        }
    }
}

/// Merges `models` with the file in `dir` (if readable) and writes the result atomically,
/// holding an exclusive lock on `dir/model.lock` from the read to the write, so two
/// processes saving at once both keep their samples (the second merges the first's). A
/// damaged file is replaced. `Err` ([`Error::Io`], the operating system's error as its
/// source) when the directory, the lock or the file cannot be written.
pub(crate) fn save(dir: &Path, models: &Models) -> Result<()> {
    save_locked(dir, models, true).map(|_| ())
}

/// [`save`] only where no other process holds the lock: whether it saved. For the save at
/// the main thread's exit, which must not wait on another process.
pub(crate) fn save_if_unlocked(dir: &Path, models: &Models) -> Result<bool> {
    save_locked(dir, models, false)
}

fn save_locked(dir: &Path, models: &Models, wait: bool) -> Result<bool> {
    let path = dir.join(FILE);
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let lock_path = dir.join(LOCK);
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| Error::io(&lock_path, e))?;
    if wait {
        FileExt::lock_exclusive(&lock).map_err(|e| Error::io(&lock_path, e))?;
    } else if !FileExt::try_lock_exclusive(&lock).map_err(|e| Error::io(&lock_path, e))? {
        return Ok(false);
    }
    let mut merged = models.clone();
    if let Ok(Read::Models(on_disk)) = read(dir) {
        merged.merge(&on_disk);
    }
    let written = crate::backends::jit::write_atomic(&path, merged.to_json().as_bytes());
    // Closing the file releases the lock too; unlocking first says when it ends.
    let _ = FileExt::unlock(&lock);
    written.map_err(|e| Error::io(path, e))?;
    Ok(true)
}

/// The lock file beside [`FILE`], held while a save reads, merges and writes.
pub(crate) const LOCK: &str = "model.lock";

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Key {
        Key {
            skeleton: "map".into(),
            types: "f32->f32".into(),
            function: "app::square fn".into(),
        }
    }

    #[test]
    fn buckets_are_powers_of_two() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1), 1);
        assert_eq!(bucket_of(1023), 10);
        assert_eq!(bucket_of(1024), 11);
    }

    #[test]
    fn history_then_interpolation() {
        let mut m = Models::default();
        m.record(&key(), Backend::Rayon, 1 << 10, 1000.0);
        m.record(&key(), Backend::Rayon, 1 << 10, 3000.0);
        m.record(&key(), Backend::Rayon, 1 << 14, 32000.0);
        m.record(&key(), Backend::Rayon, 1 << 14, 32000.0);
        let p = |n| m.predict(&key(), Backend::Rayon, n).unwrap();
        assert!((p(1 << 10) - 2000.0).abs() < 1e-6);
        // 1000 and 3000 ns: sd sqrt(2) * 1000, 95 % half interval 2 * sd / sqrt(2).
        let own = m.own(&key(), Backend::Rayon, 1 << 10).unwrap();
        assert!((own.sd_ns() - 2f64.sqrt() * 1000.0).abs() < 1e-6, "{own:?}");
        assert!((own.half_interval_ns() - 2000.0).abs() < 1e-6, "{own:?}");
        assert!(m.own(&key(), Backend::Rayon, 1 << 12).is_none());
        // Halfway in log size between 2000 ns and 32000 ns: their geometric mean.
        assert!((p(1 << 12) - 8000.0).abs() < 1.0, "{}", p(1 << 12));
        assert!(p(1 << 20) > p(1 << 14));
        assert!(m.predict(&key(), Backend::Cpu, 10).is_none());
        assert!(m.known(&key(), Backend::Rayon, 1 << 12));
        assert!(m.thin(&key(), Backend::Rayon, 1 << 12));
        assert!(!m.thin(&key(), Backend::Rayon, 1 << 14));
        assert!(!m.known(&key(), Backend::Rayon, 1 << 20));
        assert!(!m.known(&key(), Backend::Cpu, 1 << 10));
        // Up to four buckets beyond a measured one, extrapolation stands in.
        assert!(m.known(&key(), Backend::Rayon, 1 << 18));
        assert!(!m.known(&key(), Backend::Rayon, 1 << 19));
        // One measurement is enough to extrapolate from; a steady run replaces it.
        m.record(&key(), Backend::Cpu, 1 << 16, 9.0e6);
        assert!(m.known(&key(), Backend::Cpu, 1 << 13));
        m.replace(&key(), Backend::Cpu, 1 << 16, 3.0e6);
        let own = m.own(&key(), Backend::Cpu, 1 << 16).unwrap();
        assert_eq!((own.count, own.mean_ns), (1, 3.0e6));
    }

    /// Warnings of `skel::tune`, captured for the tests that expect one.
    fn warnings() -> &'static std::sync::Mutex<Vec<String>> {
        struct Capture;
        static WARNINGS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
        impl log::Log for Capture {
            fn enabled(&self, m: &log::Metadata<'_>) -> bool {
                m.target() == "skel::tune" && m.level() <= log::Level::Warn
            }
            fn log(&self, r: &log::Record<'_>) {
                if self.enabled(r.metadata()) {
                    let mut w = WARNINGS.lock().unwrap_or_else(|p| p.into_inner());
                    w.push(r.args().to_string());
                }
            }
            fn flush(&self) {}
        }
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // The lib tests install no other logger.
            let _ = log::set_logger(&Capture);
            log::set_max_level(log::LevelFilter::Warn);
        });
        &WARNINGS
    }

    fn warned_about(dir: &Path) -> Option<String> {
        let dir = dir.display().to_string();
        let w = warnings().lock().unwrap_or_else(|p| p.into_inner());
        w.iter().find(|m| m.contains(&dir)).cloned()
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("skel-model-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn json_round_trip_and_damage() {
        let mut m = Models::default();
        m.record(&key(), Backend::Cuda, 4096, 12345.5);
        m.record(&key(), Backend::Cuda, 4000, 0.1 + 0.2);
        m.record(&key(), Backend::Rayon, 1 << 20, 7.0e6);
        m.link.insert(Backend::Cuda, 2.5e10);
        m.provisional
            .insert((key(), Backend::Rayon, bucket_of(1 << 20)));
        let text = m.to_json();
        let back = Models::from_json(&text).unwrap();
        assert_eq!(back, m, "floats and first-run marks round-trip exactly");
        assert_eq!(text.matches("\"first_run\": true").count(), 1, "{text}");
        assert_eq!(
            text.matches("first_run").count(),
            1,
            "only where true: {text}"
        );
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["format"], "skel-tune");
        // A reader of version 3 refuses `first_run`: a file with it has another version.
        assert_eq!(v["version"], 4);
        assert_eq!(v["histories"][0]["function"], "app::square fn");
        // A version-3 file (an older skel's, no marks) reads as before.
        let mut steady = m.clone();
        steady.provisional.clear();
        let v3 = steady
            .to_json()
            .replacen("\"version\": 4", "\"version\": 3", 1);
        assert!(v3.contains("\"version\": 3"), "{v3}");
        assert_eq!(Models::from_json(&v3).unwrap(), steady);
        let bad = |t: &str| Models::from_json(t).unwrap_err();
        assert!(bad("skel-tune 2\nh cuda 3 1 2 3 0 map f32 f").contains("not a model file"));
        assert!(bad(r#"{"format": "other", "version": 3}"#).contains("format"));
        let newer = bad(r#"{"format": "skel-tune", "version": 5, "links": {}}"#);
        assert!(newer.contains("version 5;"), "{newer}");
        let truncated = &text[..text.len() / 2];
        assert!(!bad(truncated).is_empty());
        let negative = text.replacen("\"count\": 1", "\"count\": 0", 1);
        assert!(bad(&negative).contains("bucket"), "{}", bad(&negative));
        let auto = text.replace("\"rayon\"", "\"auto\"");
        assert!(bad(&auto).contains("entry"), "{}", bad(&auto));
        let unknown = text.replacen("\"links\"", "\"linkz\"", 1);
        assert!(!bad(&unknown).is_empty());
    }

    /// A damaged file, one of another version and one of the old text format each give a
    /// warning naming the file and empty models (never a panic); the next save replaces
    /// the damaged file with a valid one.
    #[test]
    fn damaged_or_old_files_start_afresh_with_a_warning() {
        warnings(); // the capturing logger, before the first load
        for (name, file, text) in [
            ("corrupt", FILE, "{\"format\": \"skel-tune\", \"vers"),
            ("binary", FILE, "\u{0}\u{1}\u{2}"),
            ("newer", FILE, r#"{"format": "skel-tune", "version": 99}"#),
            ("old-text", OLD_FILE, "skel-tune 2\nlink cuda 25000000000\n"),
        ] {
            let dir = scratch(name);
            std::fs::write(dir.join(file), text).unwrap();
            let loaded = load(&dir).unwrap();
            assert_eq!(loaded, Models::default(), "{name}");
            let warning = warned_about(&dir).unwrap_or_else(|| panic!("{name}: no warning"));
            assert!(warning.contains("afresh"), "{name}: {warning}");
            let mut m = Models::default();
            m.record(&key(), Backend::Cpu, 10, 1.0);
            save(&dir, &m).unwrap();
            assert_eq!(load(&dir).unwrap(), m, "{name}: replaced by a valid file");
            let _ = std::fs::remove_dir_all(&dir);
        }
        // Bytes that are not UTF-8 at all.
        let dir = scratch("latin1");
        std::fs::write(dir.join(FILE), [0xff, 0xfe, 0x7b]).unwrap();
        assert_eq!(load(&dir).unwrap(), Models::default());
        assert!(warned_about(&dir).is_some_and(|w| w.contains("UTF-8")));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The exit save does not wait for another process's lock: it skips, and saves once
    /// the lock is free.
    #[test]
    fn the_exit_save_skips_a_held_lock() {
        let dir = scratch("held-lock");
        let held = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(LOCK))
            .unwrap();
        FileExt::lock_exclusive(&held).unwrap();
        let mut m = Models::default();
        m.record(&key(), Backend::Cpu, 10, 1.0);
        assert!(!save_if_unlocked(&dir, &m).unwrap());
        assert!(!dir.join(FILE).exists());
        FileExt::unlock(&held).unwrap();
        assert!(save_if_unlocked(&dir, &m).unwrap());
        assert_eq!(load(&dir).unwrap(), m);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// An I/O failure keeps the operating system's error as the source.
    #[test]
    fn unwritable_directory_keeps_the_io_error_as_source() {
        use std::error::Error as _;
        let dir = scratch("unwritable");
        let blocker = dir.join("a-file");
        std::fs::write(&blocker, "not a directory").unwrap();
        let err = save(&blocker.join("tune"), &Models::default()).unwrap_err();
        assert!(matches!(err, Error::Io { .. }), "{err:?}");
        let io = err.source().expect("the io::Error is the source");
        assert!(io.downcast_ref::<std::io::Error>().is_some(), "{io:?}");
        assert!(err.to_string().contains("a-file"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn merge_keeps_the_longer_history() {
        let mut a = Models::default();
        a.record(&key(), Backend::Cpu, 100, 10.0);
        let mut b = a.clone();
        b.record(&key(), Backend::Cpu, 100, 30.0);
        b.record(&key(), Backend::Rayon, 100, 5.0);
        a.merge(&b);
        assert_eq!(a, b);
        // Of two buckets of one run each, a steady one wins over a first run, either way.
        let first = (key(), Backend::Cuda, bucket_of(100));
        let mut early = Models::default();
        early.record(&key(), Backend::Cuda, 100, 90.0);
        early.provisional.insert(first.clone());
        let mut steady = Models::default();
        steady.record(&key(), Backend::Cuda, 100, 30.0);
        let mut merged = early.clone();
        merged.merge(&steady);
        assert_eq!(merged, steady);
        merged = steady.clone();
        merged.merge(&early);
        assert_eq!(merged, steady);
    }

    /// Without the lock, two saves that read the file before either wrote it lose one
    /// side's samples; with it every save merges every earlier one.
    #[test]
    fn concurrent_saves_keep_every_process_samples() {
        let dir = std::env::temp_dir().join(format!("skel-tune-lock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let threads: Vec<_> = (0..4usize)
            .map(|t| {
                let dir = dir.clone();
                std::thread::spawn(move || {
                    for round in 0..10usize {
                        let mut m = Models::default();
                        let n = 1usize << (t * 10 + round); // a bucket of its own
                        m.record(&key(), Backend::Cpu, n, 1.0 + t as f64);
                        save(&dir, &m).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let all = load(&dir).unwrap();
        let buckets = all.buckets(&key(), Backend::Cpu).map_or(0, |b| b.len());
        assert_eq!(buckets, 40, "every save's bucket survives");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
