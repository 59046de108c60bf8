//! `Backend::Auto`: choices follow the model file deterministically, calls never fail for
//! a model that cannot be read or written, lazy calibration tries every candidate, the
//! place the operands are valid changes the choice, and split calls give the results of
//! the single backends.

mod common;

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use skel::prelude::*;
use skel::tune::{explain, set_model_dir, Choice};

#[userfn]
fn poly(x: f32) -> f32 {
    (x * 0.5 + 1.0) * x - 2.0
}

#[userfn]
fn add_i64(a: i64, b: i64) -> i64 {
    a + b
}

#[userfn]
fn add_f32(a: f32, b: f32) -> f32 {
    a + b
}

#[userfn]
fn widen(x: i32) -> i64 {
    x as i64 * 3 - 1
}

/// The tuner is process-wide: tests that set its model file run one at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("skel-auto-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Points the kernel disk cache at a fresh directory until dropped (then back where it
/// was): a kernel built by an earlier run of the tests would load at once, and the calls
/// that run on the host while it compiles would never happen.
struct FreshKernelCache(Option<PathBuf>);

impl FreshKernelCache {
    fn new(name: &str) -> FreshKernelCache {
        let was = skel::config::CACHE_DIR.get().unwrap();
        skel::config::CACHE_DIR
            .set(Some(temp_dir(&format!("kernels-{name}"))))
            .unwrap();
        FreshKernelCache(was)
    }
}

impl Drop for FreshKernelCache {
    fn drop(&mut self) {
        let _ = skel::config::CACHE_DIR.set(self.0.take());
    }
}

/// The device backend Auto can use here (CUDA first); else prints the skip line (or fails
/// where `SKEL_REQUIRE` names OpenCL).
fn device() -> Option<Backend> {
    let found = [Backend::Cuda, Backend::OpenCl]
        .into_iter()
        .find(|&b| Backend::available().contains(&b));
    if found.is_none() {
        common::available(Backend::OpenCl);
    }
    found.inspect(|&b| probed(b))
}

/// Waits until Auto's device probe (started by its first call, on a thread of its own) has
/// found `gpu`: until then Auto's only candidates are the host backends.
fn probed(gpu: Backend) {
    let start = std::time::Instant::now();
    let v = Vector::from(vec![1i64; 8]);
    loop {
        Reduce::new(add_i64).backend(Backend::Auto).run(&v).unwrap();
        let why = explain().unwrap();
        if why.candidates.iter().any(|c| c.backend == gpu) {
            return;
        }
        assert!(
            start.elapsed().as_secs() < 60,
            "Auto never found {gpu}: {why}"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Makes a fresh model file `name` from [`write_model`] the one in use, the times
/// measured without spread.
fn use_model(
    name: &str,
    probe: &skel::tune::Explanation,
    sizes: &[usize],
    time: impl Fn(Backend) -> f64,
) {
    use_model_spread(name, probe, sizes, |b| (time(b), 0.0));
}

/// [`use_model`] where `time` also gives the spread (Welford's sum of squared deviations).
fn use_model_spread(
    name: &str,
    probe: &skel::tune::Explanation,
    sizes: &[usize],
    time: impl Fn(Backend) -> (f64, f64),
) {
    let dir = temp_dir(name);
    write_model(&dir, probe, sizes, time);
    set_model_dir(Some(&dir));
}

/// Asserts that the calling thread's last Auto call was split.
fn assert_split() {
    let why = explain().unwrap();
    assert!(matches!(why.choice, Choice::Split { .. }), "{why}");
}

/// A model file: for every available backend, three samples of `time(backend).0` ns with
/// spread `.1` at each of `sizes` (scaled linearly from the first size), for the function
/// and types of `probe`'s call.
fn write_model(
    dir: &std::path::Path,
    probe: &skel::tune::Explanation,
    sizes: &[usize],
    time: impl Fn(Backend) -> (f64, f64),
) {
    let mut histories = Vec::new();
    for b in Backend::available() {
        let mut buckets = serde_json::Map::new();
        for &n in sizes {
            let bucket = usize::BITS - n.leading_zeros();
            let (ns, m2) = time(b);
            let ns = ns * n as f64 / sizes[0] as f64;
            buckets.insert(
                bucket.to_string(),
                serde_json::json!({ "count": 3, "mean_n": n as f64, "mean_ns": ns, "m2_ns": m2 }),
            );
        }
        histories.push(serde_json::json!({
            "skeleton": probe.skeleton,
            "types": probe.types,
            "function": probe.function,
            "backend": b.to_string(),
            "buckets": buckets,
        }));
    }
    let file = serde_json::json!({
        "format": "skel-tune",
        "version": 3,
        "links": {},
        "histories": histories,
    });
    std::fs::write(dir.join("model.json"), file.to_string()).unwrap();
}

/// The explanation of one Map of `poly` over `n` elements on Auto (models in memory).
fn probe_map(n: usize) -> skel::tune::Explanation {
    set_model_dir(None);
    let x = Vector::from(vec![1.0f32; n]);
    let mut y = Vector::zeroed(n);
    Map::new(poly)
        .backend(Backend::Auto)
        .run(&x, &mut y)
        .unwrap();
    explain().unwrap()
}

#[test]
fn auto_parses_and_displays() {
    assert_eq!("auto".parse::<Backend>().unwrap(), Backend::Auto);
    assert_eq!(Backend::Auto.to_string(), "auto");
    assert!(Backend::Auto.check().is_ok());
    assert!(!Backend::available().contains(&Backend::Auto));
    let err = "gpu".parse::<Backend>().unwrap_err().to_string();
    assert!(err.contains("auto"), "{err}");
}

#[test]
fn choice_is_deterministic_for_a_model_file() {
    let _s = serial();
    let n = 3000;
    let probe = probe_map(n);
    let x = Vector::from((0..n).map(|i| i as f32 * 0.25).collect::<Vec<_>>());
    let mut want = Vector::zeroed(n);
    Map::new(poly)
        .backend(Backend::Cpu)
        .run(&x, &mut want)
        .unwrap();
    for fastest in [Backend::Cpu, Backend::Rayon, Backend::Cpu] {
        use_model("deterministic", &probe, &[n], |b| {
            if b == fastest {
                1e3
            } else {
                1e6
            }
        });
        for _ in 0..3 {
            let mut y = Vector::zeroed(n);
            Map::new(poly)
                .backend(Backend::Auto)
                .run(&x, &mut y)
                .unwrap();
            let why = explain().unwrap();
            assert_eq!(why.choice, Choice::Backend(fastest), "{why}");
            assert!(why.reason.starts_with("predicted fastest"), "{why}");
            assert_eq!(y.to_vec(), want.to_vec());
        }
    }
    set_model_dir(None);
}

/// A damaged model file, one of another version and one of the earlier text format are
/// not used: Auto calibrates afresh (no static order) and the next save leaves a valid
/// model file.
#[test]
fn damaged_or_old_model_files_start_afresh() {
    let _s = serial();
    for (name, file, text) in [
        (
            "damaged",
            "model.json",
            "{\"format\": \"skel-tune\", \"version\": 3, \"histor",
        ),
        (
            "newer",
            "model.json",
            "{\"format\": \"skel-tune\", \"version\": 9}",
        ),
        ("old-text", "model-v2.txt", "skel-tune 2\nh nonsense\n"),
    ] {
        let dir = temp_dir(name);
        std::fs::write(dir.join(file), text).unwrap();
        set_model_dir(Some(&dir));
        let v = Vector::from((1..=100i64).collect::<Vec<_>>());
        let most = Backend::available().len() * 3 + 2 * skel::tune::MAX_SAMPLES as usize;
        let mut reasons = Vec::new();
        while reasons.len() <= most
            && !reasons
                .last()
                .is_some_and(|r: &String| r.starts_with("predicted"))
        {
            let s = Reduce::new(add_i64).backend(Backend::Auto).run(&v).unwrap();
            assert_eq!(s, 5050);
            let why = explain().unwrap();
            assert!(!why.reason.contains("static order"), "{name}: {why}");
            reasons.push(why.reason);
        }
        assert!(reasons[0].contains("calibrating"), "{name}: {reasons:?}");
        set_model_dir(None); // saves what was measured
        let saved = std::fs::read_to_string(dir.join("model.json")).unwrap();
        let saved: serde_json::Value = serde_json::from_str(&saved).unwrap();
        assert_eq!(saved["version"], 4, "{name}: {saved}");
        let functions: Vec<&str> = saved["histories"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|h| h["function"].as_str())
            .collect();
        assert!(
            functions.iter().any(|f| f.contains("add_i64")),
            "{name}: {functions:?}"
        );
    }
}

/// A model path that is a FIFO or a link to `/dev/zero` is not a model: the calls go on
/// in the static order at once (before: the first call hung, or read until memory ran out).
#[test]
fn a_fifo_or_a_device_as_the_model_is_refused_at_once() {
    let _s = serial();
    for kind in ["fifo", "dev-zero"] {
        let dir = temp_dir(kind);
        let path = dir.join("model.json");
        if kind == "fifo" {
            let made = std::process::Command::new("mkfifo").arg(&path).status();
            if !made.is_ok_and(|s| s.success()) {
                println!("skipped: mkfifo is not available");
                continue;
            }
        } else {
            std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
        }
        set_model_dir(Some(&dir));
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let v = Vector::from((1..=100i64).collect::<Vec<_>>());
            let s = Reduce::new(add_i64).backend(Backend::Auto).run(&v);
            let reason = explain().map(|w| w.reason);
            let _ = tx.send((s.ok(), reason));
        });
        let (sum, reason) = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("{kind}: the Auto call did not return"));
        assert_eq!(sum, Some(5050), "{kind}");
        let reason = reason.unwrap_or_default();
        assert!(reason.contains("static order"), "{kind}: {reason}");
    }
    set_model_dir(None);
}

#[test]
fn unwritable_model_keeps_calls_working() {
    let _s = serial();
    // A directory below a regular file can be neither created nor written.
    let blocker = temp_dir("unwritable").join("a-file");
    std::fs::write(&blocker, "not a directory").unwrap();
    set_model_dir(Some(&blocker.join("tune")));
    let v = Vector::from((0..5000i32).collect::<Vec<_>>());
    let want: i64 = (0..5000i64).map(|x| x * 3 - 1).sum();
    for _ in 0..8 {
        let got = MapReduce::new(widen, add_i64)
            .backend(Backend::Auto)
            .run(&v)
            .unwrap();
        assert_eq!(got, want);
    }
    set_model_dir(None);
}

#[test]
fn lazy_calibration_tries_the_close_candidates_then_predicts() {
    let _s = serial();
    let _ = device(); // Auto's device probe done, so every backend is a candidate
    let dir = temp_dir("lazy");
    set_model_dir(Some(&dir));
    let n = 2000;
    let v = Vector::from((0..n).map(|i| (i % 7) as f32).collect::<Vec<_>>());
    let want = Reduce::new(add_f32).backend(Backend::Cpu).run(&v).unwrap();
    let mut ran = Vec::new();
    let mut reasons: Vec<String> = Vec::new();
    // Per candidate a warm-up and two samples, then more samples of the two fastest while
    // they are within noise: the calls until a prediction are bounded.
    let most = Backend::available().len() * 3 + 2 * skel::tune::MAX_SAMPLES as usize;
    while reasons.len() <= most && !reasons.last().is_some_and(|r| r.starts_with("predicted")) {
        let s = Reduce::new(add_f32).backend(Backend::Auto).run(&v).unwrap();
        assert_eq!(s, want, "small integers in f32 sum exactly in any order");
        let why = explain().unwrap();
        if let Choice::Backend(b) = why.choice {
            ran.push(b);
        }
        reasons.push(why.reason);
    }
    // The first call runs the candidate predicted fastest, and on a host backend (no
    // kernel to load) its first run of the size counts as a measurement.
    assert!(reasons[0].contains("first run"), "{reasons:?}");
    assert!(reasons[0].contains("counted"), "{reasons:?}");
    let last = reasons.last().unwrap();
    assert!(last.starts_with("predicted fastest"), "{reasons:?}");
    // Every other candidate was tried, or the final decision says why not (on this size
    // a device's launch alone is several times the host's whole call).
    for b in Backend::available() {
        let skipped = last.contains(&format!("{b} not calibrated"));
        assert!(ran.contains(&b) != skipped, "{b}: {ran:?} {reasons:?}");
    }
    let text = std::fs::read_to_string(dir.join("model.json")).unwrap();
    let model: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(model["format"], "skel-tune", "{text}");
    assert!(text.contains("add_f32"), "{text}");
    set_model_dir(None);
}

/// A model file with `(backend, ns)` for the function of `probe` at size `n` only (three
/// samples, no spread); backends not named have no history.
fn use_partial_model(
    name: &str,
    probe: &skel::tune::Explanation,
    n: usize,
    times: &[(Backend, f64)],
) {
    let dir = temp_dir(name);
    let bucket = usize::BITS - n.leading_zeros();
    let histories: Vec<serde_json::Value> = times
        .iter()
        .map(|(b, ns)| {
            serde_json::json!({
                "skeleton": probe.skeleton,
                "types": probe.types,
                "function": probe.function,
                "backend": b.to_string(),
                "buckets": { bucket.to_string(): { "count": 3, "mean_n": n as f64, "mean_ns": ns, "m2_ns": 0.0 } },
            })
        })
        .collect();
    let file = serde_json::json!({
        "format": "skel-tune", "version": 3, "links": {}, "histories": histories,
    });
    std::fs::write(dir.join("model.json"), file.to_string()).unwrap();
    set_model_dir(Some(&dir));
}

/// A device with no history, on a call where the host takes a microsecond: its launch
/// alone is predicted several times that, so Auto never runs the call there to measure it.
#[test]
fn a_candidate_predicted_far_slower_is_never_calibrated() {
    let _s = serial();
    let Some(gpu) = device() else { return };
    let n = 1000;
    let probe = probe_map(n);
    use_partial_model(
        "far-slower",
        &probe,
        n,
        &[(Backend::Cpu, 1e3), (Backend::Rayon, 1e3)],
    );
    let x = Vector::from((0..n).map(|i| i as f32).collect::<Vec<_>>());
    let mut want = Vector::zeroed(n);
    Map::new(poly)
        .backend(Backend::Cpu)
        .run(&x, &mut want)
        .unwrap();
    for _ in 0..20 {
        let mut y = Vector::zeroed(n);
        Map::new(poly)
            .backend(Backend::Auto)
            .run(&x, &mut y)
            .unwrap();
        assert_eq!(y.to_vec(), want.to_vec());
        let why = explain().unwrap();
        assert_ne!(why.choice, Choice::Backend(gpu), "{why}");
        assert!(why.reason.starts_with("predicted fastest"), "{why}");
        assert!(
            why.reason
                .contains(&format!("{gpu} not calibrated: predicted")),
            "{why}"
        );
    }
    set_model_dir(None);
}

/// With no budget, no candidate other than the one predicted fastest is tried (the
/// candidate predicted fastest may still change as measurements come in: on a call this
/// small `cpu` and Rayon are within noise of each other, so which ones run is not
/// asserted); with the default one, the close candidates are tried too.
#[test]
fn the_calibration_budget_bounds_trials_of_other_candidates() {
    let _s = serial();
    let n = 3000;
    let x = Vector::from((0..n).map(|i| i as f32).collect::<Vec<_>>());
    let mut want = Vector::zeroed(n);
    Map::new(poly)
        .backend(Backend::Cpu)
        .run(&x, &mut want)
        .unwrap();
    let tried = |budget: u32| {
        skel::config::TUNE_BUDGET.set(budget).unwrap();
        set_model_dir(Some(&temp_dir(&format!("budget-{budget}"))));
        let mut ran = std::collections::BTreeSet::new();
        let mut reasons = Vec::new();
        for _ in 0..40 {
            let mut y = Vector::zeroed(n);
            Map::new(poly)
                .backend(Backend::Auto)
                .run(&x, &mut y)
                .unwrap();
            assert_eq!(y.to_vec(), want.to_vec());
            let why = explain().unwrap();
            if let Choice::Backend(b) = why.choice {
                ran.insert(b.to_string());
            }
            reasons.push(why.reason);
        }
        (ran, reasons)
    };
    let (none, reasons) = tried(0);
    // No candidate but the one predicted fastest is tried: an exploring trial's reason says
    // "predicted N.Nx the best". Where a candidate was close enough to want one, the reason
    // says "calibration budget spent" instead; whether one was close depends on the
    // machine's timings (under load, Rayon's wake-ups put it far behind `cpu` and neither
    // reason appears: CI, round 11), so that one is not required.
    assert!(
        !reasons.iter().any(|r| r.contains("x the best")),
        "{none:?} {reasons:?}"
    );
    // cpu and rayon are predicted within a factor of each other on a call this small.
    let (some, reasons) = tried(5);
    let last = reasons.last().cloned().unwrap_or_default();
    skel::config::TUNE_BUDGET.set(5).unwrap();
    assert!(
        some.contains("cpu") && some.contains("rayon"),
        "{some:?} {last}"
    );
    set_model_dir(None);
}

/// Measurements at one size stand in for the buckets up to 16x away (extrapolated from
/// it); farther sizes are measured again.
#[test]
fn models_are_shared_across_nearby_size_buckets() {
    let _s = serial();
    let n = 1 << 12;
    let probe = probe_map(n);
    // Every other backend far slower: the real times recorded by the calls below (the
    // backend that runs is timed) keep Rayon the fastest.
    use_model("buckets", &probe, &[n], |b| match b {
        Backend::Rayon => 1e3,
        _ => 1e8,
    });
    // The far size first: the calls record what they measure, and a measured bucket
    // stands in for its neighbours too.
    for (size, predicted) in [
        (n * 40, false),
        (n * 2, true),
        (n * 5, true),
        (n * 15, true),
    ] {
        let x = Vector::from((0..size).map(|i| i as f32).collect::<Vec<_>>());
        let mut y = Vector::zeroed(size);
        Map::new(poly)
            .backend(Backend::Auto)
            .run(&x, &mut y)
            .unwrap();
        let why = explain().unwrap();
        // Shared: no candidate is tried for the new size (the backend predicted fastest
        // runs it, timed while its own bucket has fewer than two measurements).
        assert_eq!(
            !why.reason.contains("no history for this size"),
            predicted,
            "{size}: {why}"
        );
        if predicted {
            assert_eq!(why.choice, Choice::Backend(Backend::Rayon), "{why}");
        }
        let mut want = Vector::zeroed(size);
        Map::new(poly)
            .backend(Backend::Cpu)
            .run(&x, &mut want)
            .unwrap();
        assert_eq!(y.to_vec(), want.to_vec());
    }
    set_model_dir(None);
}

#[userfn]
fn fresh_kernel(x: f32) -> f32 {
    x * x * 0.25 - x + 3.0
}

#[userfn]
fn fresh_window(w: Window2<f32>) -> f32 {
    0.5 * w[(0, 0)] + 0.25 * (w[(-1, 0)] + w[(0, 1)]) - 0.125 * w[(1, -1)]
}

/// Calls `auto` (one Auto call of a function whose kernel is not built yet, after a model
/// that makes `gpu` far faster) until one runs on `gpu`: each result must be `want`. On
/// CUDA the calls run on the host while the kernel compiles in the background (the disk
/// cache is a fresh one, [`FreshKernelCache`]), then on the device; OpenCL builds in place
/// (the first call runs there).
fn host_then_device(gpu: Backend, want: &[f32], mut auto: impl FnMut() -> Vec<f32>) {
    let (mut on_host, mut then_device) = (0, false);
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_secs(120) {
        let got = auto();
        let why = explain().unwrap();
        assert_eq!(got, want, "{why}");
        match why.choice {
            Choice::Backend(b) if b == gpu => {
                then_device = true;
                break;
            }
            Choice::Backend(b) => {
                assert!(!skel::Backend::available().is_empty() && b != gpu);
                if on_host == 0 {
                    assert!(why.reason.contains("compiling in the background"), "{why}");
                }
                on_host += 1;
            }
            other => panic!("{other:?}"),
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // CUDA: a compile runs behind while the host serves (the disk cache is fresh, so
    // nothing loads at once); OpenCL builds in place, on the calling thread.
    match gpu {
        Backend::Cuda => assert!(on_host > 0, "the first CUDA call compiled in place"),
        _ => {
            println!("no CUDA: the host path while a kernel compiles is not exercised");
            assert_eq!(on_host, 0, "OpenCL builds in place, on the calling thread");
        }
    }
    assert!(then_device, "the device never took over");
}

/// A device whose kernel is not built yet: on CUDA the calls run on the host while it
/// compiles in the background, then on the device ([`host_then_device`]); every result is
/// the oracle's, also for operands that are valid on the device only when the host runs
/// the call.
#[test]
fn calls_run_on_the_host_while_the_kernel_compiles_then_on_the_device() {
    let _s = serial();
    let Some(gpu) = device() else { return };
    let _cache = FreshKernelCache::new("background");
    let n = 1 << 14;
    set_model_dir(None);
    let x = Vector::from((0..n).map(|i| (i % 97) as f32).collect::<Vec<_>>());
    let mut probe_out = Vector::zeroed(n);
    Map::new(fresh_kernel)
        .backend(Backend::Cpu)
        .run(&x, &mut probe_out)
        .unwrap();
    // The probe: an Auto call on the host (the model of this test is written next).
    let mut tmp = Vector::zeroed(4);
    Map::new(fresh_kernel)
        .backend(Backend::Auto)
        .run(&Vector::from(vec![1.0f32; 4]), &mut tmp)
        .unwrap();
    let probe = explain().unwrap();
    use_model(
        "background",
        &probe,
        &[n],
        |b| if b == gpu { 1e3 } else { 1e7 },
    );
    // The input of every call is valid on the device only (written there by another
    // function), so a call that runs on the host copies it back first.
    let mut on_device = Vector::zeroed(n);
    let mut want_dev = Vector::zeroed(n);
    Map::new(poly).backend(gpu).run(&x, &mut on_device).unwrap();
    Map::new(poly)
        .backend(Backend::Cpu)
        .run(&x, &mut want_dev)
        .unwrap();
    let mut want = Vector::zeroed(n);
    Map::new(fresh_kernel)
        .backend(Backend::Cpu)
        .run(&want_dev, &mut want)
        .unwrap();
    host_then_device(gpu, &want.to_vec(), || {
        let mut y = Vector::zeroed(n);
        Map::new(fresh_kernel)
            .backend(Backend::Auto)
            .run(&on_device, &mut y)
            .unwrap();
        y.to_vec()
    });
    set_model_dir(None);
}

/// The same for a 2D MapOverlap (SkePU's median is one): its CUDA kernel compiles in the
/// background too, the calls on the host meanwhile, on an input valid on the device only.
#[test]
fn a_stencil_runs_on_the_host_while_its_kernel_compiles() {
    let _s = serial();
    let Some(gpu) = device() else { return };
    let _cache = FreshKernelCache::new("background-stencil");
    let (rows, cols) = (96, 130);
    set_model_dir(None);
    let stencil = || MapOverlap::new(fresh_window, (1, 1)).edge(Edge::Duplicate);
    let mut tmp = Matrix::zeroed(3, 3);
    stencil()
        .backend(Backend::Auto)
        .run(&Matrix::from_fn(3, 3, |r, c| (r + c) as f32), &mut tmp)
        .unwrap();
    let probe = explain().unwrap();
    use_model("background-stencil", &probe, &[rows * cols], |b| {
        if b == gpu {
            1e3
        } else {
            1e7
        }
    });
    let x = Matrix::from_fn(rows, cols, |r, c| ((r * 31 + c * 7) % 53) as f32);
    let mut on_device = Matrix::zeroed(rows, cols);
    let mut want_dev = Matrix::zeroed(rows, cols);
    Map::new(poly).backend(gpu).run(&x, &mut on_device).unwrap();
    Map::new(poly)
        .backend(Backend::Cpu)
        .run(&x, &mut want_dev)
        .unwrap();
    let mut want = Matrix::zeroed(rows, cols);
    stencil()
        .backend(Backend::Cpu)
        .run(&want_dev, &mut want)
        .unwrap();
    host_then_device(gpu, &want.to_vec(), || {
        let mut y = Matrix::zeroed(rows, cols);
        stencil()
            .backend(Backend::Auto)
            .run(&on_device, &mut y)
            .unwrap();
        y.to_vec()
    });
    set_model_dir(None);
}

#[test]
fn device_resident_operands_stay_on_the_device() {
    let _s = serial();
    let Some(gpu) = device() else { return };
    let n = 1 << 16;
    let probe = probe_map(n);
    // Equal but for 10 %: the 256 KiB each way decide.
    use_model("location", &probe, &[n], |b| match b {
        Backend::Rayon => 100e3,
        b if b == gpu => 110e3,
        _ => 1e9,
    });
    let x = Vector::from((0..n).map(|i| i as f32).collect::<Vec<_>>());
    let mut y = Vector::zeroed(n);
    Map::new(poly)
        .backend(Backend::Auto)
        .run(&x, &mut y)
        .unwrap();
    let why = explain().unwrap();
    assert_eq!(why.choice, Choice::Backend(Backend::Rayon), "{why}");
    // Now the input of the next call is valid on the device only.
    let mut on_device = Vector::zeroed(n);
    Map::new(poly).backend(gpu).run(&x, &mut on_device).unwrap();
    Map::new(poly)
        .backend(Backend::Auto)
        .run(&on_device, &mut y)
        .unwrap();
    let why = explain().unwrap();
    assert_eq!(why.choice, Choice::Backend(gpu), "{why}");
    let mut want = Vector::zeroed(n);
    let mut tmp = Vector::zeroed(n);
    Map::new(poly)
        .backend(Backend::Cpu)
        .run(&x, &mut tmp)
        .unwrap();
    Map::new(poly)
        .backend(Backend::Cpu)
        .run(&tmp, &mut want)
        .unwrap();
    assert_eq!(y.to_vec(), want.to_vec());
    set_model_dir(None);
}

/// A model's times where Rayon and the GPU are equally fast and every other backend far
/// slower: a split halves the time.
fn rayon_and_gpu_equal(gpu: Backend) -> impl Fn(Backend) -> f64 + Copy {
    move |b| {
        if b == Backend::Rayon || b == gpu {
            1e6
        } else {
            1e10
        }
    }
}

#[test]
fn split_calls_match_the_single_backends() {
    let _s = serial();
    let Some(gpu) = device() else { return };
    let n = skel::tune::HYBRID_MIN + 12345;
    let equal = rayon_and_gpu_equal(gpu);
    let sizes = [n / 4, n];

    let probe = probe_map(n);
    use_model("split-map", &probe, &sizes, equal);
    let x = Vector::from((0..n).map(|i| (i % 1000) as f32 * 0.01).collect::<Vec<_>>());
    let mut y = Vector::zeroed(n);
    // Checked Maps are not split (their error names the first failing element).
    let map = Map::new(poly).backend(Backend::Auto).checked(false);
    map.run(&x, &mut y).unwrap();
    assert_split();
    let mut want = Vector::zeroed(n);
    Map::new(poly)
        .backend(Backend::Cpu)
        .run(&x, &mut want)
        .unwrap();
    assert_eq!(y.to_vec(), want.to_vec());

    set_model_dir(None);
    let v = Vector::from((0..n as i64).map(|i| i % 1001 - 500).collect::<Vec<_>>());
    Reduce::new(add_i64).backend(Backend::Auto).run(&v).unwrap();
    let probe = explain().unwrap();
    use_model("split-reduce", &probe, &sizes, equal);
    let got = Reduce::new(add_i64)
        .backend(Backend::Auto)
        .start(7)
        .run(&v)
        .unwrap();
    assert_split();
    let want = Reduce::new(add_i64)
        .backend(Backend::Cpu)
        .start(7)
        .run(&v)
        .unwrap();
    assert_eq!(got, want);

    set_model_dir(None);
    let w = Vector::from((0..n as i32).map(|i| i % 77).collect::<Vec<_>>());
    MapReduce::new(widen, add_i64)
        .backend(Backend::Auto)
        .run(&w)
        .unwrap();
    let probe = explain().unwrap();
    use_model("split-map-reduce", &probe, &sizes, equal);
    let got = MapReduce::new(widen, add_i64)
        .backend(Backend::Auto)
        .start(-3)
        .run(&w)
        .unwrap();
    assert_split();
    let want = MapReduce::new(widen, add_i64)
        .backend(Backend::Cpu)
        .start(-3)
        .run(&w)
        .unwrap();
    assert_eq!(got, want);
    set_model_dir(None);
}

/// A fold of elements (`count` of them, `last` if the last element is in it), `mark` if the
/// start value is.
#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
struct Tally {
    count: i64,
    mark: i64,
    last: i64,
}

/// Counts, and faults (`clamp` with min > max) only where the start value meets the fold
/// of several elements ending with the last one: never in a sequential fold (one element
/// at a time), never on a device (which never sees the start) and never on Rayon's half of
/// a split (without the last element); only in the combine of a split's two halves.
#[userfn]
fn tally(a: Tally, b: Tally) -> Tally {
    let hi = if a.mark == 1 && b.last == 1 && b.count > 1 {
        0
    } else {
        i64::MAX
    };
    Tally {
        count: (a.count + b.count).clamp(1, hi),
        mark: a.mark | b.mark,
        last: a.last | b.last,
    }
}

/// `x == -1` marks the last element.
#[userfn]
fn one(x: i64) -> Tally {
    Tally {
        count: 1,
        mark: 0,
        last: if x == -1 { 1 } else { 0 },
    }
}

/// The host's combine of a CPU+device split runs under the unwind guard: a fault there is
/// the call's `Err(UserFunction)` naming the combining function (it was a panic out of the
/// call before).
#[test]
fn a_fault_in_the_combine_of_a_split_is_an_err() {
    let _s = serial();
    let Some(gpu) = device() else { return };
    let n = skel::tune::HYBRID_MIN + 12345;
    let equal = rayon_and_gpu_equal(gpu);
    let sizes = [n / 4, n];
    let start = Tally {
        count: 0,
        mark: 1,
        last: 0,
    };
    let w = Vector::from_fn(n, |i| if i == n - 1 { -1 } else { i as i64 });
    let mut v = Vector::zeroed(n);
    Map::new(one).backend(Backend::Cpu).run(&w, &mut v).unwrap();
    // Either half alone folds without a fault: the start with elements short of the last,
    // the elements up to the last without the start.
    let half = Reduce::new(tally)
        .backend(Backend::Cpu)
        .start(start)
        .run(&v.view(0..n - 1))
        .unwrap();
    assert_eq!((half.count, half.mark, half.last), (n as i64 - 1, 1, 0));
    let rest = Reduce::new(tally).backend(gpu).run(&v.view(1..n)).unwrap();
    assert_eq!((rest.count, rest.mark, rest.last), (n as i64 - 1, 0, 1));

    set_model_dir(None);
    Reduce::new(tally).backend(Backend::Auto).run(&v).unwrap();
    let probe = explain().unwrap();
    use_model("split-combine-reduce", &probe, &sizes, equal);
    let err = Reduce::new(tally)
        .backend(Backend::Auto)
        .checked(false)
        .start(start)
        .run(&v)
        .unwrap_err();
    assert_split();
    match err {
        Error::UserFunction { function, .. } => assert_eq!(function, "tally"),
        other => panic!("{other}"),
    }

    set_model_dir(None);
    MapReduce::new(one, tally)
        .backend(Backend::Auto)
        .run(&w)
        .unwrap();
    let probe = explain().unwrap();
    use_model("split-combine-map-reduce", &probe, &sizes, equal);
    let err = MapReduce::new(one, tally)
        .backend(Backend::Auto)
        .checked(false)
        .start(start)
        .run(&w)
        .unwrap_err();
    assert_split();
    match err {
        Error::UserFunction { function, .. } => assert_eq!(function, "tally"),
        other => panic!("{other}"),
    }
    set_model_dir(None);
}

#[test]
fn leaders_within_noise_are_sampled_until_told_apart() {
    let _s = serial();
    let n = 3000;
    let probe = probe_map(n);
    // Rayon and cpu 1.0 and 1.05 us from three samples each, spread 0.3 us: the intervals
    // overlap, so the models are not yet stable.
    use_model_spread("noise", &probe, &[n], |b| match b {
        Backend::Rayon => (1000.0, 180_000.0),
        Backend::Cpu => (1050.0, 180_000.0),
        _ => (1e9, 0.0),
    });
    let x = Vector::from((0..n).map(|i| i as f32).collect::<Vec<_>>());
    let mut want = Vector::zeroed(n);
    Map::new(poly)
        .backend(Backend::Cpu)
        .run(&x, &mut want)
        .unwrap();
    let mut reasons = Vec::new();
    // Per leader a warm-up and at most MAX_SAMPLES - 3 more samples.
    let most = 2 * skel::tune::MAX_SAMPLES as usize;
    for _ in 0..most {
        let mut y = Vector::zeroed(n);
        Map::new(poly)
            .backend(Backend::Auto)
            .run(&x, &mut y)
            .unwrap();
        assert_eq!(y.to_vec(), want.to_vec());
        let why = explain().unwrap();
        assert!(
            matches!(why.choice, Choice::Backend(Backend::Cpu | Backend::Rayon)),
            "{why}"
        );
        reasons.push(why.reason);
        if reasons.last().unwrap().starts_with("predicted") {
            break;
        }
    }
    assert!(reasons[0].starts_with("calibrating"), "{reasons:?}");
    assert!(
        reasons.iter().any(|r| r.contains("within noise")),
        "{reasons:?}"
    );
    assert!(
        reasons.last().unwrap().starts_with("predicted fastest"),
        "{reasons:?}"
    );
    set_model_dir(None);
}
