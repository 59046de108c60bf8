//! The performance models: per (skeleton, user function, element types, backend), the
//! history of measured times per power-of-two size bucket (StarPU's history-based model:
//! mean, spread and count), and a prediction for any size from it (the bucket's own history
//! where measured, else log-log interpolation between the nearest measured buckets).
//!
//! The models persist as one small text file, `model-v2.txt`, in the tune directory
//! (`$SKEL_TUNE_DIR`, else `tune/` in the kernel cache directory). Every save re-reads the
//! file and merges it with this process's models (per bucket the history with more
//! samples wins) under an exclusive lock of `model-v2.lock` beside it (`fs4`), then writes
//! a temporary file and persists it over the old one (`tempfile`), so concurrent processes
//! never see a torn file and never lose each other's samples.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use fs4::fs_std::FileExt;

use crate::Backend;

/// The first line of a model file; a file of another version is ignored (and replaced on
/// the next save).
pub(crate) const HEADER: &str = "skel-tune 2";

/// The file name of the models inside the tune directory (version 1 files, which had no
/// spread, are left alone).
pub(crate) const FILE: &str = "model-v2.txt";

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
/// outlier: page faults of fresh buffers, another process).
const MIN_SAMPLES: u32 = 2;

/// How far (in buckets) a measured bucket may be for interpolation to stand in for a
/// measurement of its own.
const BRACKET: u32 = 2;

/// How far (in buckets: a factor of 16 in size) one well-measured bucket may be for
/// extrapolation from it to stand in for a measurement of its own (a job whose every call
/// has a new size, photos, then calibrates each candidate once, not once per size).
pub(crate) const EXTRAPOLATE: u32 = 4;

/// Every model of the process: histories per key and backend, and the measured link
/// bandwidth per device backend.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Models {
    pub history: BTreeMap<(Key, Backend), BTreeMap<u32, Bucket>>,
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

    /// Whether `n` needs a measurement on `backend` before a prediction can be trusted:
    /// its bucket has none and is neither bracketed by measured buckets at most [`BRACKET`]
    /// away on both sides nor at most [`EXTRAPOLATE`] away from a bucket of at least
    /// [`MIN_SAMPLES`] measurements.
    pub(crate) fn needs_sample(&self, key: &Key, backend: Backend, n: usize) -> bool {
        let Some(h) = self.buckets(key, backend) else {
            return true;
        };
        let b = bucket_of(n);
        if let Some(own) = h.get(&b) {
            return own.count < MIN_SAMPLES;
        }
        let below = h.range(b.saturating_sub(BRACKET)..b).next_back().is_some();
        let above = h.range(b + 1..=b + BRACKET).next().is_some();
        let near = h
            .range(b.saturating_sub(EXTRAPOLATE)..=b + EXTRAPOLATE)
            .any(|(_, m)| m.count >= MIN_SAMPLES);
        !(below && above || near)
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
    /// (both are usually the same samples, one saved earlier); links from `self` win.
    pub(crate) fn merge(&mut self, other: &Models) {
        for (k, buckets) in &other.history {
            let mine = self.history.entry(k.clone()).or_default();
            for (b, theirs) in buckets {
                let keep = mine.get(b).is_some_and(|m| m.count >= theirs.count);
                if !keep {
                    mine.insert(*b, *theirs);
                }
            }
        }
        for (b, bw) in &other.link {
            self.link.entry(*b).or_insert(*bw);
        }
    }

    /// The models as the text of a model file.
    pub(crate) fn to_text(&self) -> String {
        let mut s = format!("{HEADER}\n");
        for (b, bw) in &self.link {
            let _ = writeln!(s, "link {b} {bw:.0}");
        }
        for ((key, backend), buckets) in &self.history {
            for (b, h) in buckets {
                let _ = writeln!(
                    s,
                    "h {backend} {b} {} {:.1} {:.1} {:.1} {} {} {}",
                    h.count, h.mean_n, h.mean_ns, h.m2_ns, key.skeleton, key.types, key.function
                );
            }
        }
        s
    }

    /// Parses the text of a model file: `Ok(None)` for a file of another version,
    /// `Err(why)` for one that is damaged.
    pub(crate) fn from_text(text: &str) -> Result<Option<Models>, String> {
        let mut lines = text.lines();
        if lines.next().map(str::trim) != Some(HEADER) {
            return Ok(None);
        }
        let mut m = Models::default();
        for (i, line) in lines.enumerate() {
            let bad = |what: &str| format!("line {}: {what}: {line:?}", i + 2);
            let mut f = line.split_whitespace();
            match f.next() {
                None => {}
                Some("link") => {
                    let b: Backend = parse(f.next()).ok_or_else(|| bad("backend"))?;
                    let bw: f64 = parse(f.next()).ok_or_else(|| bad("bandwidth"))?;
                    if !(bw.is_finite() && bw > 0.0) {
                        return Err(bad("bandwidth"));
                    }
                    m.link.insert(b, bw);
                }
                Some("h") => {
                    let backend: Backend = parse(f.next()).ok_or_else(|| bad("backend"))?;
                    let b: u32 = parse(f.next()).ok_or_else(|| bad("bucket"))?;
                    let count: u32 = parse(f.next()).ok_or_else(|| bad("count"))?;
                    let mean_n: f64 = parse(f.next()).ok_or_else(|| bad("size"))?;
                    let mean_ns: f64 = parse(f.next()).ok_or_else(|| bad("time"))?;
                    let m2_ns: f64 = parse(f.next()).ok_or_else(|| bad("spread"))?;
                    let skeleton = f.next().ok_or_else(|| bad("skeleton"))?.to_string();
                    let types = f.next().ok_or_else(|| bad("types"))?.to_string();
                    let function = f.collect::<Vec<_>>().join(" ");
                    if function.is_empty()
                        || backend == Backend::Auto
                        || count == 0
                        || !(mean_ns.is_finite() && mean_ns >= 0.0 && mean_n.is_finite())
                        || !(m2_ns.is_finite() && m2_ns >= 0.0)
                    {
                        return Err(bad("entry"));
                    }
                    let key = Key {
                        skeleton,
                        types,
                        function,
                    };
                    let bucket = Bucket {
                        count,
                        mean_n,
                        mean_ns,
                        m2_ns,
                    };
                    m.history
                        .entry((key, backend))
                        .or_default()
                        .insert(b, bucket);
                }
                Some(_) => return Err(bad("unknown record")),
            }
        }
        Ok(Some(m))
    }
}

fn parse<T: std::str::FromStr>(s: Option<&str>) -> Option<T> {
    s?.parse().ok()
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
/// program take (a line is about 100 bytes).
const MODEL_FILE_CAP: u64 = 16 << 20;

/// Reads the model file in `dir`: empty models when there is none (or one of another
/// version), `Err(why)` when it exists but cannot be read or parsed.
pub(crate) fn load(dir: &Path) -> Result<Models, String> {
    let path = dir.join(FILE);
    let text = crate::backends::jit::read_regular(&path, MODEL_FILE_CAP).and_then(|b| {
        String::from_utf8(b).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    });
    match text {
        Ok(text) => Models::from_text(&text)
            .map(Option::unwrap_or_default)
            .map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Models::default()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Merges `models` with the file in `dir` (if readable) and writes the result atomically,
/// holding an exclusive lock on `dir/model-v2.lock` from the read to the write, so two
/// processes saving at once both keep their samples (the second merges the first's).
pub(crate) fn save(dir: &Path, models: &Models) -> Result<(), String> {
    let path = dir.join(FILE);
    let fail = |e: std::io::Error| format!("{}: {e}", path.display());
    std::fs::create_dir_all(dir).map_err(fail)?;
    let lock_path = dir.join(LOCK);
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| format!("{}: {e}", lock_path.display()))?;
    FileExt::lock_exclusive(&lock).map_err(|e| format!("{}: {e}", lock_path.display()))?;
    let mut merged = models.clone();
    if let Ok(on_disk) = load(dir) {
        merged.merge(&on_disk);
    }
    let written = crate::backends::jit::write_atomic(&path, merged.to_text().as_bytes());
    // Closing the file releases the lock too; unlocking first says when it ends.
    let _ = FileExt::unlock(&lock);
    written.map_err(fail)
}

/// The lock file beside [`FILE`], held while a save reads, merges and writes.
const LOCK: &str = "model-v2.lock";

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
        assert!(!m.needs_sample(&key(), Backend::Rayon, 1 << 12));
        assert!(m.needs_sample(&key(), Backend::Rayon, 1 << 20));
        assert!(m.needs_sample(&key(), Backend::Cpu, 1 << 10));
        // Up to four buckets beyond a well-measured one, extrapolation stands in.
        assert!(!m.needs_sample(&key(), Backend::Rayon, 1 << 18));
        assert!(m.needs_sample(&key(), Backend::Rayon, 1 << 19));
    }

    #[test]
    fn text_round_trip_and_damage() {
        let mut m = Models::default();
        m.record(&key(), Backend::Cuda, 4096, 12345.5);
        m.link.insert(Backend::Cuda, 2.5e10);
        let back = Models::from_text(&m.to_text()).unwrap().unwrap();
        assert_eq!(back, m);
        assert_eq!(Models::from_text("skel-tune 0\nwhatever").unwrap(), None);
        let err = Models::from_text(&format!("{HEADER}\nh cuda x 1 2 3 0 map f32 f")).unwrap_err();
        assert!(err.contains("line 2"), "{err}");
        let err = Models::from_text(&format!("{HEADER}\nh cuda 3 1 2 3 -1 map f32 f")).unwrap_err();
        assert!(err.contains("line 2"), "{err}");
        assert_eq!(
            Models::from_text("skel-tune 1\nh cuda 3 1 2 3 map f32 f").unwrap(),
            None
        );
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
