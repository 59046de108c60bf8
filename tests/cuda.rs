//! CUDA-only behaviour the shared suite cannot check: device out-of-memory, the on-disk
//! kernel cache and `SKEL_DUMP_SOURCE` across processes, and device faults surfacing at
//! host access. (NVRTC compile failures are checked by the unit tests in
//! `src/backends/cuda/tests.rs`, which can hand NVRTC broken source directly.)
//!
//! Without a CUDA device every test prints `skipped: no cuda device` and passes. Tests that
//! need a fresh process (a cold in-memory kernel cache, a fault that poisons the context)
//! run this binary again as a child, selected by `SKEL_CUDA_CHILD`; the child tests are
//! `#[ignore]`d and do nothing without that variable.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use skel::prelude::*;

/// Serialises the tests of this binary: the out-of-memory test takes nearly all device
/// memory for a moment, which would fail anything running beside it (children included).
static DEVICE: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    DEVICE.lock().unwrap_or_else(|e| e.into_inner())
}

#[userfn]
fn scale_add(x: f32, y: f32) -> f32 {
    x * 3.0 + y
}

#[userfn]
fn disk_cache_probe(x: i64) -> i64 {
    x * 7 - 3
}

#[userfn]
fn flip_bits(x: u32) -> u32 {
    x ^ 0x5a5a_5a5a
}

#[userfn]
fn wild_gather(#[index] i: usize, table: &[i64], x: i64) -> i64 {
    // Index 2^40 * i: far outside any allocation for i >= 1 (an illegal address on the
    // device; never run on the CPU).
    table[i * 1_099_511_627_776] + x
}

/// Runs this test binary again with only the child test `name`, `SKEL_CUDA_CHILD=name` and
/// `env`; returns (success, stdout, stderr).
fn run_child(name: &str, env: &[(&str, &Path)]) -> (bool, String, String) {
    let exe = std::env::current_exe().expect("current_exe");
    let mut cmd = Command::new(exe);
    cmd.args([
        name,
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads",
        "1",
    ])
    .env("SKEL_CUDA_CHILD", name);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("spawn the test binary");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn is_child(name: &str) -> bool {
    std::env::var("SKEL_CUDA_CHILD").is_ok_and(|c| c == name)
}

fn fresh_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("skel-cuda-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn files_with_ext(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = walk(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Device memory held by the test (plain `cuMemAlloc`, never managed memory), freed on drop.
#[cfg(feature = "cuda")]
struct Ballast(Vec<cudarc::driver::sys::CUdeviceptr>);

#[cfg(feature = "cuda")]
impl Ballast {
    /// Allocates until less than `leave` bytes of device memory are free (the CUDA context
    /// must be current on this thread: any skel call on it makes it so).
    fn fill(leave: usize) -> Ballast {
        use cudarc::driver::result;
        let mut held = Vec::new();
        for chunk in [4usize << 30, 1 << 30, 256 << 20, 64 << 20] {
            loop {
                let (free, _) = result::mem_get_info().expect("cuMemGetInfo");
                if free < leave + chunk {
                    break;
                }
                // SAFETY: a plain device allocation, only freed by `drop`.
                match unsafe { result::malloc_sync(chunk) } {
                    Ok(p) => held.push(p),
                    Err(_) => break,
                }
            }
        }
        Ballast(held)
    }
}

#[cfg(feature = "cuda")]
impl Drop for Ballast {
    fn drop(&mut self) {
        for &p in &self.0 {
            // SAFETY: `p` came from `malloc_sync` and nothing uses it.
            let _ = unsafe { cudarc::driver::result::free_sync(p) };
        }
    }
}

#[test]
#[cfg(feature = "cuda")]
fn device_out_of_memory_is_an_error_and_inputs_stay_intact() {
    let _g = lock();
    if !common::available(Backend::Cuda) {
        return;
    }
    let b = Backend::Cuda;
    // Warm up: context, module and the stream-ordered pool exist before the ballast.
    let small = Vector::from_fn(1000, |i| i as f32);
    let mut so = Vector::zeroed(1000);
    Map::new(scale_add)
        .backend(b)
        .run(&small, &small, &mut so)
        .unwrap();
    assert_eq!(so.as_slice()[10], 40.0);

    // 256 Mi f32 = 1 GiB per operand: with 2.5 GiB left, the two inputs fit and the output
    // does not.
    let n = 256 << 20;
    let gib = 1usize << 30;
    let x = Vector::from_fn(n, |i| (i % 1000) as f32);
    let y = Vector::from_fn(n, |i| (i % 7) as f32);
    let mut out = Vector::from_fn(n, |i| -((i % 5) as f32));
    let ballast = Ballast::fill(2 * gib + gib / 2);
    let (free, total) = cudarc::driver::result::mem_get_info().unwrap();
    println!(
        "ballast: {} chunks, {:.2} GiB free of {:.1} GiB",
        ballast.0.len(),
        free as f64 / gib as f64,
        total as f64 / gib as f64
    );
    let err = Map::new(scale_add)
        .backend(b)
        .run(&x, &y, &mut out)
        .expect_err("a map needing more than the free device memory must fail");
    println!("out of memory surfaced as: {err}");
    assert!(
        matches!(err, Error::OutOfMemory(_)),
        "expected Error::OutOfMemory, got {err:?}"
    );
    // The inputs (possibly uploaded already) and the untouched output still read back
    // their host values.
    let xs = x.try_as_slice().expect("input readable after OOM");
    assert!(xs.iter().enumerate().all(|(i, &v)| v == (i % 1000) as f32));
    let ys = y.try_as_slice().expect("input readable after OOM");
    assert!(ys.iter().enumerate().all(|(i, &v)| v == (i % 7) as f32));
    let os = out.try_as_slice().expect("output readable after OOM");
    assert!(os.iter().enumerate().all(|(i, &v)| v == -((i % 5) as f32)));
    drop(ballast);
    // The backend recovers once memory is free again.
    Map::new(scale_add)
        .backend(b)
        .run(&x, &y, &mut out)
        .unwrap();
    let os = out.as_slice();
    assert!(os
        .iter()
        .enumerate()
        .step_by(4099)
        .all(|(i, &v)| v == (i % 1000) as f32 * 3.0 + (i % 7) as f32));
    println!("device OOM: Error::OutOfMemory, inputs intact, recovered after freeing");
}

/// The child of [`disk_cache_and_dump_across_processes`]: one Map with a kernel no other
/// test uses.
#[test]
#[ignore = "run as a child process by disk_cache_and_dump_across_processes"]
fn child_disk_cache() {
    if !is_child("child_disk_cache") || !common::available(Backend::Cuda) {
        return;
    }
    // SKEL_JIT_LOG's records go through the `log` crate: write them to stderr, where the
    // parent looks for them.
    struct Stderr;
    impl log::Log for Stderr {
        fn enabled(&self, _: &log::Metadata<'_>) -> bool {
            true
        }
        fn log(&self, record: &log::Record<'_>) {
            eprintln!("{}: {}", record.target(), record.args());
        }
        fn flush(&self) {}
    }
    log::set_logger(&Stderr).expect("the only logger of this child");
    log::set_max_level(log::LevelFilter::Info);
    let x = Vector::from_fn(4097, |i| i as i64);
    let mut y = Vector::zeroed(4097);
    Map::new(disk_cache_probe)
        .backend(Backend::Cuda)
        .run(&x, &mut y)
        .unwrap();
    assert!(y
        .as_slice()
        .iter()
        .enumerate()
        .all(|(i, &v)| v == i as i64 * 7 - 3));
    println!("child ok");
}

#[test]
fn disk_cache_and_dump_across_processes() {
    let _g = lock();
    if !common::available(Backend::Cuda) {
        return;
    }
    let cache = fresh_dir("cache");
    let dump = fresh_dir("dump");
    let env: [(&str, &Path); 3] = [
        ("SKEL_CACHE_DIR", &cache),
        ("SKEL_DUMP_SOURCE", &dump),
        ("SKEL_JIT_LOG", Path::new("1")),
    ];
    let (ok1, out1, err1) = run_child("child_disk_cache", &env);
    assert!(
        ok1 && out1.contains("child ok"),
        "first child failed:\n{out1}\n{err1}"
    );
    let bins = files_with_ext(&cache, "cubin");
    let srcs = files_with_ext(&dump, "cu");
    assert!(
        !bins.is_empty(),
        "no CUBIN in the disk cache {cache:?}\n{err1}"
    );
    assert!(
        srcs.iter().any(|p| std::fs::read_to_string(p)
            .is_ok_and(|s| s.contains("disk_cache_probe") && s.contains("skel_map"))),
        "SKEL_DUMP_SOURCE wrote no source of the probe kernel: {srcs:?}"
    );
    assert!(
        err1.contains("compiled by NVRTC"),
        "first process did not compile:\n{err1}"
    );

    let (ok2, out2, err2) = run_child("child_disk_cache", &env);
    assert!(
        ok2 && out2.contains("child ok"),
        "second child failed:\n{out2}\n{err2}"
    );
    assert!(
        err2.contains("from the disk cache") && !err2.contains("compiled by NVRTC"),
        "second process did not load every kernel from disk:\n{err2}"
    );
    assert_eq!(files_with_ext(&cache, "cubin"), bins, "the cache changed");
    println!(
        "disk cache: {} CUBIN(s), {} dumped source(s); second process loaded from disk",
        bins.len(),
        srcs.len()
    );
    let _ = std::fs::remove_dir_all(&cache);
    let _ = std::fs::remove_dir_all(&dump);
}

/// The child of [`an_unchecked_wild_index_stays_inside_its_buffer`]: an index 2^40 * i
/// past a 64-element table, unchecked. Before unchecked kernels clamped their indices this
/// was an illegal address that poisoned the process's CUDA context; it runs in a child so
/// that a regression cannot take the other tests down with it.
#[test]
#[ignore = "run as a child process by an_unchecked_wild_index_stays_inside_its_buffer"]
fn child_wild_index() {
    if !is_child("child_wild_index") || !common::available(Backend::Cuda) {
        return;
    }
    let table = Vector::from_fn(64, |i| i as i64);
    let x = Vector::from_fn(1024, |i| i as i64);
    let mut out = Vector::zeroed(1024);
    let r = MapArray::new(wild_gather)
        .backend(Backend::Cuda)
        .checked(false)
        .run(&table, &x, &mut out);
    match r.and_then(|()| out.try_to_vec()) {
        // The index is clamped into the table: element 0 for i = 0, the last one after.
        Ok(v)
            if v.iter()
                .enumerate()
                .all(|(i, &o)| o == i as i64 + if i == 0 { 0 } else { 63 }) =>
        {
            println!("child: clamped")
        }
        Ok(v) => println!("child: wrong values {:?}", &v[..4]),
        Err(e) => println!("child: error {e}"),
    }
}

#[test]
fn an_unchecked_wild_index_stays_inside_its_buffer() {
    let _g = lock();
    if !common::available(Backend::Cuda) {
        return;
    }
    let (ok, out, err) = run_child("child_wild_index", &[]);
    assert!(ok, "child failed:\n{out}\n{err}");
    // With --nocapture the line follows the harness's `test name ... ` on the same line.
    let line = out
        .lines()
        .find_map(|l| l.find("child: ").map(|k| &l[k..]))
        .unwrap_or_else(|| panic!("child printed nothing:\n{out}\n{err}"));
    assert_eq!(line, "child: clamped", "{out}\n{err}");
}

/// The child of [`a_lost_device_is_device_lost_for_every_later_call`]: a context marked
/// lost (`skel::debug::inject_device_loss`, the sticky error of an illegal address at the
/// next launch) makes that call and every later one `Err(DeviceLost)` naming what lost it;
/// host reads never panic.
#[test]
#[ignore = "run as a child process by a_lost_device_is_device_lost_for_every_later_call"]
fn child_device_lost() {
    if !is_child("child_device_lost") || !common::available(Backend::Cuda) {
        return;
    }
    let b = Backend::Cuda;
    let x = Vector::from_fn(4096, |i| i as f32);
    let mut before = Vector::zeroed(4096);
    Map::new(scale_add)
        .backend(b)
        .run(&x, &x, &mut before)
        .unwrap();
    let mut out = Vector::filled(4096, -1.0f32);
    skel::debug::inject_device_loss();
    let lost = |r: Result<()>, what: &str| match r {
        Err(Error::DeviceLost { backend, reason }) => {
            assert_eq!(backend, Backend::Cuda, "{what}");
            assert!(
                reason.message().contains("ILLEGAL_ADDRESS"),
                "{what}: {reason}"
            );
            // The driver's own error stays reachable behind skel's message.
            let cause = std::error::Error::source(&reason).map(ToString::to_string);
            assert!(
                cause
                    .as_deref()
                    .is_some_and(|c| c.contains("ILLEGAL_ADDRESS")),
                "{what}: source {cause:?}"
            );
            let msg = Error::DeviceLost { backend, reason }.to_string();
            assert!(
                msg.contains("device lost for the rest of the process"),
                "{msg}"
            );
        }
        other => panic!("{what}: expected Err(DeviceLost), got {other:?}"),
    };
    lost(
        Map::new(scale_add).backend(b).run(&x, &x, &mut out),
        "the call that lost it",
    );
    lost(
        Map::new(scale_add).backend(b).run(&x, &x, &mut out),
        "the next call",
    );
    lost(
        Reduce::new(scale_add).backend(b).run(&x).map(|_| ()),
        "a Reduce after it",
    );
    // the failed calls' output: its old values, or the loss as an error (never a panic);
    // with its old values, the infallible accessors read them too
    match out.try_to_vec() {
        Ok(v) => {
            assert!(v.iter().all(|&v| v == -1.0), "{:?}", &v[..4]);
            assert!(out.to_vec().iter().all(|&v| v == -1.0));
            assert_eq!(out[17], -1.0);
        }
        Err(e) => lost(Err(e), "reading the failed call's output"),
    }
    // a result computed before the loss: its values, or the loss as an error
    match before.try_to_vec() {
        Ok(v) => assert!(v.iter().enumerate().all(|(i, &o)| o == i as f32 * 4.0)),
        Err(e) => lost(Err(e), "reading a result left on the device"),
    }
    assert_eq!(x.to_vec()[4095], 4095.0);
    // the host backends are unaffected
    let mut host = Vector::zeroed(4096);
    Map::new(scale_add)
        .backend(Backend::Cpu)
        .run(&x, &x, &mut host)
        .unwrap();
    assert_eq!(host[3], 12.0);
    println!("child: lost as expected");
}

#[test]
fn a_lost_device_is_device_lost_for_every_later_call() {
    let _g = lock();
    if !common::available(Backend::Cuda) {
        return;
    }
    let (ok, out, err) = run_child("child_device_lost", &[]);
    assert!(ok, "child failed:\n{out}\n{err}");
    let line = out
        .lines()
        .find_map(|l| l.find("child: ").map(|k| &l[k..]))
        .unwrap_or_else(|| panic!("child printed nothing:\n{out}\n{err}"));
    assert_eq!(line, "child: lost as expected", "{out}\n{err}");
}

/// A recording whose CUDA graph the driver refuses to build (an injected fault where the
/// driver checks a kernel node) still stands: its launches run the closure, with the same
/// results.
#[test]
fn a_graph_the_driver_refuses_launches_its_closure() {
    let _g = lock();
    if !common::available(Backend::Cuda) {
        return;
    }
    use skel::debug::{clear_fault, inject_fault, Fault};
    let x = Vector::from_fn(1000, |i| i as f32);
    let mut y = Vector::filled(1000, 1.0f32);
    let mut t = Vector::zeroed(1000);
    // The recording's own kernel launches come first (as many as the calls make): the
    // fault is moved one launch later each time until it falls on the graph's build.
    let mut fell_back = false;
    for after in 0..8 {
        let runs = std::cell::Cell::new(0);
        inject_fault(Fault::Launch, after);
        // `Some(device_graph)` when the recording stood, `None` when the fault fell on one
        // of its eager launches (a call's own error).
        let stood = {
            let recorded = skel::Graph::record(|| {
                runs.set(runs.get() + 1);
                Map::new(scale_add)
                    .backend(Backend::Cuda)
                    .run(&x, &y, &mut t)?;
                Map::new(scale_add)
                    .backend(Backend::Cuda)
                    .run(&t, &x, &mut y)
            });
            let unfired = clear_fault().is_some();
            match recorded {
                Err(e) => {
                    assert!(matches!(e, Error::Driver(_)), "after {after}: {e:?}");
                    None
                }
                Ok(g) => {
                    if !unfired && !g.device_graph() {
                        for _ in 0..3 {
                            g.launch().unwrap();
                        }
                    }
                    Some((g.device_graph(), unfired))
                }
            }
        };
        match stood {
            None => y = Vector::filled(1000, 1.0f32),
            // Past the last launch: nothing failed, the graph was built.
            Some((device, true)) => {
                assert!(device, "after {after}");
                break;
            }
            Some((device, false)) => {
                assert!(!device, "after {after}: the graph was built");
                assert_eq!(
                    runs.get(),
                    4,
                    "after {after}: the closure runs on every launch"
                );
                // Four times: t = 3x + y, y = 3t + x (integers below 2^24: exact).
                let mut ey: Vec<f32> = vec![1.0; 1000];
                for _ in 0..4 {
                    for (i, e) in ey.iter_mut().enumerate() {
                        let xi = i as f32;
                        *e = (xi * 3.0 + *e) * 3.0 + xi;
                    }
                }
                assert_eq!(y.to_vec(), ey, "after {after}");
                fell_back = true;
                break;
            }
        }
    }
    assert!(fell_back, "no injected fault fell on the graph's build");
    println!("a refused CUDA graph: the recording launches its closure");
}

#[test]
fn pageable_copies_through_bounce_buffers_match_the_host() {
    let _g = lock();
    if !common::available(Backend::Cuda) {
        return;
    }
    let expected = |x: &[i64]| x.iter().map(|&v| v * 7 - 3).collect::<Vec<i64>>();
    // Elements of 8 bytes: just below the 4 MiB bounce threshold (the driver's path), at
    // it (two chunks), five chunks and a part, and 64 MiB and a part (33 chunks through the
    // ring of four buffers: every buffer is reused after its copy's event). With four
    // streams each part is a copy of its own (bounced where it is large enough).
    for n in [524_287, 524_288, 5 * 262_144 + 12_345, 8_388_608 + 7] {
        let mut x = Vector::pageable((0..n as i64).collect());
        assert!(!x.is_pinned());
        for streams in [1, 4] {
            let map = Map::new(disk_cache_probe)
                .backend(Backend::Cuda)
                .streams(streams);
            // Pageable too: its reads download through the bounce buffers, synchronously
            // the first time, eagerly after it (the host read the previous result).
            let mut out = Vector::pageable(vec![0; n]);
            map.run(&x, &mut out).unwrap();
            assert_eq!(
                out.to_vec(),
                expected(x.as_slice()),
                "n {n}, {streams} streams"
            );
            // Host writes right after the call (the bounce buffers, not `x`, are read by
            // the copies still running), of a small and of a large range at an offset:
            // only the stale ranges go up again.
            for (k, part) in [(1, n / 3..n / 3 + 1000), (2, n / 2..n)] {
                for v in x.view_mut(part).as_mut_slice() {
                    *v = -*v * k;
                }
                map.run(&x, &mut out).unwrap();
                assert_eq!(
                    out.to_vec(),
                    expected(x.as_slice()),
                    "n {n}, {streams} streams, host write {k}"
                );
            }
        }
    }
    println!("pageable copies through the bounce buffers: the host's results");
}

#[test]
fn pinned_vectors_of_every_size_are_aligned_and_hold_their_data() {
    let _g = lock();
    if !common::available(Backend::Cuda) {
        return;
    }
    // The driver hands out small page-locked blocks off page boundaries (a 256 KiB
    // `Vector::pinned` once failed as misaligned); from two pages on, a container's host
    // memory is page-aligned, below that 64-byte aligned.
    for bytes in [
        4,
        100,
        4096,
        8192,
        65_536,
        262_144,
        1 << 20,
        1920 * 1080 * 3,
    ] {
        let n = bytes / 4;
        let data: Vec<u32> = (0..n as u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let v = Vector::pinned(data.clone()).unwrap();
        assert!(v.is_pinned(), "{bytes} bytes");
        let align = if bytes >= 8192 { 4096 } else { 64 };
        assert_eq!(v.as_slice().as_ptr() as usize % align, 0, "{bytes} bytes");
        assert_eq!(v.as_slice(), &data[..], "{bytes} bytes");
        let mut back = Vector::zeroed(n);
        Map::new(flip_bits)
            .backend(Backend::Cuda)
            .run(&v, &mut back)
            .unwrap();
        let want: Vec<u32> = data.iter().map(|&x| x ^ 0x5a5a_5a5a).collect();
        assert_eq!(back.to_vec(), want, "{bytes} bytes");
    }
    println!("pinned vectors of every size: aligned, with their data");
}
