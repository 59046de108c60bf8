//! The decision logic replayed on injected times: a [`Tuner`] with in-memory models, the
//! job's clock and the last backend simulated, every run's time given by a model of the
//! machine. Nothing here reads a clock or asserts a real speed.

use super::*;

/// A machine: each backend's steady time (ns) for `n` elements of the call, and what a
/// device's first run of a function (kernel load) and of a size (allocation) add.
struct Machine {
    steady: fn(Backend, usize) -> f64,
    load_ns: f64,
    alloc_ns: f64,
}

/// A job's decisions: where each call ran, how it was measured, and why.
type Decisions = Vec<(Backend, Decision, String)>;

/// One job: the tuner, the simulated machine, and what the decisions did.
struct Job {
    t: Tuner,
    machine: Machine,
    backends: Vec<Backend>,
    ran_once: std::collections::HashSet<(Backend, u32)>,
    loaded: std::collections::HashSet<Backend>,
    decisions: Decisions,
    spent_ns: f64,
    /// What a host backend's first run in the process adds (Rayon creating its pool).
    cold_host_ns: f64,
    /// The call of `n` elements the job makes.
    make: fn(usize) -> Call,
}

impl Job {
    fn new(cores: usize, backends: &[Backend], machine: Machine) -> Job {
        Job::process(cores, backends, machine, None)
    }

    /// A job in a process of its own, with the model file in `dir` (if any) as the
    /// processes before it left it.
    fn process(cores: usize, backends: &[Backend], machine: Machine, dir: Option<&Path>) -> Job {
        let mut t = Tuner::open(dir.map(Path::to_path_buf));
        t.cores = cores;
        t.sim = Some(Sim::default());
        Job {
            t,
            machine,
            backends: backends.to_vec(),
            ran_once: Default::default(),
            loaded: Default::default(),
            decisions: Vec::new(),
            spent_ns: 0.0,
            cold_host_ns: 0.0,
            make: Job::call,
        }
    }

    /// The process exits: its models are saved as at the main thread's exit.
    fn exit(mut self) -> Decisions {
        if self.t.unsaved {
            self.t.save_with(false);
        }
        self.decisions
    }

    /// A Map of `n` pixels of 3 bytes each, its input on the host.
    fn call(n: usize) -> Call {
        let mut call = Call::new("map", "app::grey8", "Rgb8->u8".into(), n);
        let bytes = 3 * n as u64;
        call.total_bytes = bytes;
        call.moves = vec![
            (Backend::Cpu, vec![(Backend::Cuda, 0)]),
            (Backend::Rayon, vec![(Backend::Cuda, 0)]),
            (Backend::Cuda, vec![(Backend::Cuda, bytes)]),
        ];
        call
    }

    /// Decides and "runs" a call of `n` elements; the backend it ran on.
    fn run(&mut self, n: usize) -> Backend {
        let call = (self.make)(n);
        let rows = self.rows(&call);
        let (d, why) = choose(&self.t, &call, &rows);
        let Choice::Backend(b) = d.choice else {
            panic!("no split expected: {why}")
        };
        let mut ns = (self.machine.steady)(b, n) + self.t.transfer_ns(&call, b);
        if !is_device(b) && self.loaded.insert(b) {
            ns += self.cold_host_ns;
        }
        if is_device(b) {
            if self.loaded.insert(b) {
                ns += self.machine.load_ns;
            }
            if self.ran_once.insert((b, bucket_of(n))) {
                ns += self.machine.alloc_ns;
            }
        }
        self.t.finish(&call, b, d, ns);
        self.spent_ns += ns;
        self.t.sim = Some(Sim {
            elapsed_ns: self.spent_ns,
            last: Some(b),
        });
        self.decisions.push((b, d, why));
        b
    }

    /// The candidates of `call`: the job's backends (`cpu` up to [`CPU_MAX`]).
    fn rows(&self, call: &Call) -> Vec<Candidate> {
        self.backends
            .iter()
            .filter(|&&b| b != Backend::Cpu || cpu_competes(call.size, self.t.cores))
            .map(|&b| self.t.candidate(call, b))
            .collect()
    }

    /// Trials of a candidate other than the predicted best.
    fn explored(&self) -> usize {
        self.decisions.iter().filter(|(_, d, _)| d.explore).count()
    }
}

/// The six sample photos' sizes (pixels), in the order the example reads them.
const PHOTOS: [usize; 6] = [
    512 * 512,
    451 * 300,
    600 * 400,
    1000 * 872,
    1411 * 1411,
    640 * 427,
];

/// A 16-core host with a GPU that is 3 times faster than Rayon on the greyscale Map
/// (compute-bound: 80 ns a pixel on one core).
fn gpu_machine() -> Machine {
    Machine {
        steady: |b, n| match b {
            Backend::Cpu => 80.0 * n as f64,
            Backend::Rayon => 5.0 * n as f64 + 20_000.0,
            _ => 1.6 * n as f64 + 15_000.0,
        },
        load_ns: 1.0e6,
        alloc_ns: 200_000.0,
    }
}

/// The photos (twice over) leave calibration: the GPU, fastest here, is found from the
/// prior scaled by Rayon's first measurement, its first run of each later size counts as
/// a measurement, and from the fourth photo on every call runs on it without a trial.
#[test]
fn photos_leave_calibration_on_the_best_backend() {
    let mut job = Job::new(16, &[Backend::Cuda, Backend::Rayon], gpu_machine());
    for n in PHOTOS.iter().chain(&PHOTOS) {
        job.run(*n);
    }
    let log = format!("{:#?}", job.decisions);
    assert!(job.explored() <= 1, "{log}");
    for (b, d, why) in &job.decisions[3..] {
        assert_eq!(*b, Backend::Cuda, "{why}\n{log}");
        assert!(!d.explore && d.measure != Measure::Warmup, "{why}\n{log}");
    }
    // Rayon was measured once and never again: a new size shares that measurement.
    let rayon = job.decisions.iter().filter(|(b, ..)| *b == Backend::Rayon);
    assert!(rayon.count() <= 2, "{log}");
}

/// Where the host is fastest (a GPU behind a slow link), the device is tried at most once
/// per function, and only while the budget allows.
#[test]
fn a_slower_device_is_tried_once_then_left() {
    let machine = Machine {
        steady: |b, n| match b {
            Backend::Rayon => 5.0 * n as f64,
            _ => 8.0 * n as f64 + 15_000.0,
        },
        load_ns: 1.0e6,
        alloc_ns: 200_000.0,
    };
    let mut job = Job::new(16, &[Backend::Cuda, Backend::Rayon], machine);
    for n in PHOTOS.iter().chain(&PHOTOS).chain(&PHOTOS) {
        job.run(*n);
    }
    let log = format!("{:#?}", job.decisions);
    let on_cuda = job
        .decisions
        .iter()
        .filter(|(b, ..)| *b == Backend::Cuda)
        .count();
    assert!(on_cuda <= 2, "{log}");
    assert!(
        job.decisions[6..]
            .iter()
            .all(|(b, ..)| *b == Backend::Rayon),
        "{log}"
    );
}

/// The sequential backend is never calibrated where it is predicted several times slower
/// than Rayon (16 cores, from 2^15 elements of 3 bytes); on 2 cores, where it is predicted
/// as fast at small sizes and about twice as slow at large ones, it is tried once for the
/// function, and the sizes after that share the measurement.
#[test]
fn cpu_is_calibrated_only_where_it_might_pay() {
    let sixteen_cores = Machine {
        steady: |b, n| match b {
            Backend::Cpu => 2.0 * n as f64,
            _ => 2.0 * n as f64 / 16.0 + 5_000.0,
        },
        load_ns: 0.0,
        alloc_ns: 0.0,
    };
    let mut sixteen = Job::new(16, &[Backend::Rayon, Backend::Cpu], sixteen_cores);
    for n in [1 << 15, (1 << 15) + 7, 1 << 16, 60_000, 50_000] {
        sixteen.run(n);
    }
    let log = format!("{:#?}", sixteen.decisions);
    let all_rayon = sixteen.decisions.iter().all(|(b, ..)| *b == Backend::Rayon);
    assert!(all_rayon, "{log}");
    assert!(log.contains("cpu not calibrated: predicted"), "{log}");

    let two_cores = Machine {
        steady: |b, n| match b {
            Backend::Cpu => 3.0 * n as f64,
            _ => n as f64 + 1_000.0,
        },
        load_ns: 0.0,
        alloc_ns: 0.0,
    };
    let mut two = Job::new(2, &[Backend::Rayon, Backend::Cpu], two_cores);
    let sizes: Vec<usize> = (12..=16).flat_map(|e| [1 << e, (1 << e) + 7]).collect();
    for &n in sizes.iter().chain(&sizes) {
        two.run(n);
    }
    let log = format!("{:#?}", two.decisions);
    let on_cpu = two
        .decisions
        .iter()
        .filter(|(b, ..)| *b == Backend::Cpu)
        .count();
    assert!(on_cpu <= 1, "{log}");
    assert!(two.explored() <= 1, "{log}");
    assert!(
        two.decisions[2..]
            .iter()
            .all(|(b, ..)| *b == Backend::Rayon),
        "{log}"
    );
}

/// Trials of candidates other than the predicted best stop once they have spent the
/// job's budget; the predicted best is still measured (for free: it runs anyway).
#[test]
fn the_budget_stops_trials_elsewhere() {
    let mut job = Job::new(2, &[Backend::Rayon, Backend::Cpu], gpu_machine());
    job.t.explore_ns = 1.0e12;
    for n in [1 << 10, 1 << 12, 1 << 14, 1 << 16] {
        job.run(n);
    }
    let log = format!("{:#?}", job.decisions);
    assert_eq!(job.explored(), 0, "{log}");
    assert!(log.contains("calibration budget spent"), "{log}");
    assert!(
        job.decisions.iter().all(|(b, ..)| *b == Backend::Rayon),
        "{log}"
    );
}

/// A device's first run of a function loads its kernel (a warm-up, not recorded); its
/// first run of each later size is recorded, and the next run of that size replaces it.
#[test]
fn a_first_run_counts_once_the_kernel_is_loaded() {
    let mut t = Tuner::open(None);
    t.sim = Some(Sim::default());
    let call = Job::call(1 << 18);
    let (d, _) = t.trial(&call, Backend::Cuda, "test", false);
    assert_eq!(d.measure, Measure::Warmup);
    t.finish(&call, Backend::Cuda, d, 5.0e6);
    assert!(t.models.own(&call.key, Backend::Cuda, call.size).is_none());
    let other = Job::call(1 << 20);
    let (d, why) = t.trial(&other, Backend::Cuda, "test", false);
    assert_eq!(d.measure, Measure::FirstRun, "{why}");
    let moved = t.transfer_ns(&other, Backend::Cuda);
    t.finish(&other, Backend::Cuda, d, 900_000.0 + moved);
    let own = *t.models.own(&other.key, Backend::Cuda, other.size).unwrap();
    assert_eq!(own.count, 1);
    assert!((own.mean_ns - 900_000.0).abs() < 1e-3, "{own:?}");
    t.sim = Some(Sim {
        elapsed_ns: 0.0,
        last: Some(Backend::Cuda),
    });
    let (d, _) = t.trial(&other, Backend::Cuda, "test", false);
    assert_eq!(d.measure, Measure::Sample);
    t.finish(&other, Backend::Cuda, d, 300_000.0 + moved);
    let own = *t.models.own(&other.key, Backend::Cuda, other.size).unwrap();
    assert_eq!(own.count, 1, "replaced");
    assert!((own.mean_ns - 300_000.0).abs() < 1e-3, "replaced: {own:?}");
    let (d, _) = t.trial(&other, Backend::Cuda, "test", false);
    t.finish(&other, Backend::Cuda, d, 320_000.0 + moved);
    assert_eq!(
        t.models
            .own(&other.key, Backend::Cuda, other.size)
            .unwrap()
            .count,
        2
    );
    // A host backend has no kernel: its first run of a size counts at once.
    let (d, _) = t.trial(&call, Backend::Rayon, "test", false);
    assert_eq!(d.measure, Measure::FirstRun);
}

/// A first run far slower than the function's other sizes predict (it built another
/// kernel) is a warm-up after all: not recorded, and the next run of its size counts.
#[test]
fn an_outlying_first_run_is_not_recorded() {
    let mut t = Tuner::open(None);
    t.sim = Some(Sim {
        elapsed_ns: 0.0,
        last: Some(Backend::Rayon),
    });
    let small = Job::call(1 << 16);
    let (d, _) = t.trial(&small, Backend::Rayon, "test", false);
    t.finish(&small, Backend::Rayon, d, 100_000.0);
    let large = Job::call(1 << 18);
    let (d, _) = t.trial(&large, Backend::Rayon, "test", false);
    assert_eq!(d.measure, Measure::FirstRun);
    assert!(!t.finish(&large, Backend::Rayon, d, 1.0e8), "an outlier");
    assert!(t
        .models
        .own(&large.key, Backend::Rayon, large.size)
        .is_none());
    let (d, _) = t.trial(&large, Backend::Rayon, "test", false);
    assert_eq!(d.measure, Measure::Sample);
    assert!(t.finish(&large, Backend::Rayon, d, 400_000.0));
}

/// A host backend whose first run in the process takes 100 times its steady time (Rayon
/// creating its thread pool inside the first timed call) is not left for a slower one:
/// the first run is dropped once the other backend's measurement shows it far too slow,
/// Rayon runs again, and every later call, at this size and larger ones, runs on it.
#[test]
fn a_slow_first_host_run_is_measured_again() {
    let machine = Machine {
        steady: |b, n| match b {
            Backend::Cpu => 2.0 * n as f64,
            _ => 2.0 * n as f64 / 16.0 + 2_000.0,
        },
        load_ns: 0.0,
        alloc_ns: 0.0,
    };
    let mut job = Job::new(16, &[Backend::Rayon, Backend::Cpu], machine);
    job.cold_host_ns = 100.0 * (2.0 * 8192.0 / 16.0 + 2_000.0);
    let sizes = [
        8192, 8192, 8192, 8192, 8192, 9000, 20_000, 40_000, 60_000, 65_536,
    ];
    for n in sizes {
        job.run(n);
    }
    let log = format!("{:#?}", job.decisions);
    assert_eq!(job.decisions[0].0, Backend::Rayon, "{log}");
    for (b, _, why) in &job.decisions[4..] {
        assert_eq!(*b, Backend::Rayon, "{why}\n{log}");
    }
    let key = Job::call(8192).key;
    let rayon = job.t.models.own(&key, Backend::Rayon, 8192).unwrap();
    assert!(
        rayon.mean_ns < 10_000.0,
        "the first run is gone: {rayon:?}\n{log}"
    );
}

/// A bucket whose only measurement is a first run is saved as such (marked in the file):
/// the next process does not try its backend again, and its first steady run there
/// replaces it.
#[test]
fn a_first_run_alone_is_saved_as_such() {
    let dir = std::env::temp_dir().join(format!("skel-tune-provisional-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut t = Tuner::open(Some(dir.clone()));
    t.sim = Some(Sim::default());
    let call = Job::call(1 << 12);
    let at = (call.key.clone(), Backend::Rayon, bucket_of(call.size));
    let (d, _) = t.trial(&call, Backend::Rayon, "test", false);
    assert_eq!(d.measure, Measure::FirstRun);
    assert!(t.finish(&call, Backend::Rayon, d, 90_000.0));
    t.save();
    let saved = model::load(&dir).unwrap();
    assert!(saved.provisional.contains(&at));
    assert_eq!(
        saved
            .own(&call.key, Backend::Rayon, call.size)
            .unwrap()
            .count,
        1
    );
    let mut next = Tuner::open(Some(dir.clone()));
    next.sim = Some(Sim {
        elapsed_ns: 0.0,
        last: Some(Backend::Rayon),
    });
    assert!(next.models.known(&call.key, Backend::Rayon, call.size));
    let (d, _) = next.trial(&call, Backend::Rayon, "test", false);
    next.finish(&call, Backend::Rayon, d, 40_000.0);
    let (d, _) = next.trial(&call, Backend::Rayon, "test", false);
    assert_eq!(d.measure, Measure::Sample);
    assert!(next.finish(&call, Backend::Rayon, d, 30_000.0));
    next.save();
    let saved = model::load(&dir).unwrap();
    assert!(!saved.provisional.contains(&at));
    let own = saved.own(&call.key, Backend::Rayon, call.size).unwrap();
    assert_eq!(own.count, 1, "replaced");
    assert!((own.mean_ns - 30_000.0).abs() < 1e-3, "{own:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// SkePU's coulombic (examples/skepu/coulombic.rs, 256^2): an index MapArray whose only
/// operand is 100 atoms (1600 bytes), compute-bound: 2.5 ms a call on 16 cores' Rayon,
/// 8 times that on `cpu`.
fn coulombic_call(n: usize) -> Call {
    let mut call = Call::new("map_array", "skepu::potential", "Atom->f32".into(), n);
    call.total_bytes = 1600;
    call.moves = vec![
        (Backend::Cpu, vec![(Backend::Cuda, 0)]),
        (Backend::Rayon, vec![(Backend::Cuda, 0)]),
        (Backend::Cuda, vec![(Backend::Cuda, 1600)]),
    ];
    call
}

fn coulombic_machine(cores: usize) -> Machine {
    // Rayon pays 1.27 ms a call besides its share of the work (on the H100's host a call
    // took 2.6 ms, where 16 cores' share of `cpu`'s time is less than half of that).
    let steady: fn(Backend, usize) -> f64 = match cores {
        16 => |b, n| match b {
            Backend::Cpu => 300.0 * n as f64,
            Backend::Rayon => 300.0 * n as f64 / 16.0 + 1.27e6,
            _ => 3.0 * n as f64 + 15_000.0,
        },
        _ => |b, n| match b {
            Backend::Cpu => 300.0 * n as f64,
            Backend::Rayon => 300.0 * n as f64 / 2.0 + 1.27e6,
            _ => 3.0 * n as f64 + 15_000.0,
        },
    };
    Machine {
        steady,
        load_ns: 20.0e6,
        alloc_ns: 300_000.0,
    }
}

/// The bench's coulombic job (three calls a process) in three processes sharing the
/// model file: cold, then warm twice. Each job's time, and its decisions.
fn coulombic_processes(cores: usize, dir: &Path) -> Vec<(f64, Decisions)> {
    let _ = std::fs::remove_dir_all(dir);
    let runs = (0..3)
        .map(|_| {
            // A job of 8 ms opens no GPU: its calls are predicted under `PROBE_NS` on the
            // host and it ends long before `PROBE_AFTER_NS`.
            let backends = [Backend::Rayon, Backend::Cpu];
            let mut job = Job::process(cores, &backends, coulombic_machine(cores), Some(dir));
            job.make = coulombic_call;
            for _ in 0..3 {
                job.run(256 * 256);
            }
            let spent = job.spent_ns;
            (spent, job.exit())
        })
        .collect();
    let _ = std::fs::remove_dir_all(dir);
    runs
}

/// The regression of round 7 (Auto at 0.34-0.38 of Rayon on coulombic in every state):
/// Rayon's measurement, far above its prior, scaled by the ratio of the priors (dominated
/// by Rayon's launch cost: 1 byte an element) predicted `cpu` only 3.8 times slower, so
/// the second call tried it (16 times slower), the third ran on Rayon as a warm-up after
/// a call elsewhere, and neither first run was saved, so every process did it again. Now
/// the cold process runs every call on Rayon, as fast as fixed Rayon, and so do the warm
/// ones.
#[test]
fn coulombic_stays_on_rayon_in_every_process() {
    let dir = std::env::temp_dir().join(format!("skel-tune-coulombic-{}", std::process::id()));
    let n = 256 * 256;
    let rayon = 3.0 * (coulombic_machine(16).steady)(Backend::Rayon, n);
    for (i, (spent, decisions)) in coulombic_processes(16, &dir).iter().enumerate() {
        let log = format!("process {i}: {decisions:#?}");
        assert!(*spent <= 1.1 * rayon, "{:.1} ms\n{log}", spent / 1e6);
        assert!(
            decisions.iter().all(|(b, ..)| *b == Backend::Rayon),
            "{log}"
        );
    }
}

/// On 2 cores `cpu` may pay (predicted twice Rayon's time): the cold process tries it
/// once, and the next call on Rayon, a switch between host backends, is recorded. The
/// first runs are saved with their mark, so the warm processes neither try `cpu` again
/// nor pay a warm-up: they run as fast as fixed Rayon.
#[test]
fn a_trial_is_not_repeated_in_the_next_process() {
    let dir = std::env::temp_dir().join(format!("skel-tune-two-cores-{}", std::process::id()));
    let n = 256 * 256;
    let rayon = 3.0 * (coulombic_machine(2).steady)(Backend::Rayon, n);
    let runs = coulombic_processes(2, &dir);
    let log = format!("{runs:#?}");
    let cold = &runs[0].1;
    assert_eq!(cold[1].0, Backend::Cpu, "{log}");
    assert_eq!(
        (cold[2].0, cold[2].1.measure),
        (Backend::Rayon, Measure::Sample),
        "{log}"
    );
    for (spent, decisions) in &runs[1..] {
        assert!(*spent <= 1.1 * rayon, "{:.1} ms\n{log}", spent / 1e6);
        assert!(
            decisions
                .iter()
                .all(|(b, d, _)| *b == Backend::Rayon && !d.explore),
            "{log}"
        );
    }
}

/// A host backend's first run is doubted once per function: one truly far slower than the
/// other backend's measurement predicts is recorded at the next new size, not dropped at
/// every size of a job whose sizes all differ.
#[test]
fn a_first_run_is_doubted_once() {
    let mut t = Tuner::open(None);
    t.cores = 16;
    t.sim = Some(Sim::default());
    let first = Job::call(1 << 12);
    let (d, _) = t.trial(&first, Backend::Cpu, "test", false);
    assert!(t.finish(&first, Backend::Cpu, d, 20_000.0));
    let (d, _) = t.trial(&first, Backend::Rayon, "test", false);
    assert_eq!(d.measure, Measure::FirstRun);
    assert!(!t.finish(&first, Backend::Rayon, d, 2.0e6), "doubted");
    let next = Job::call(1 << 14);
    let (d, _) = t.trial(&next, Backend::Rayon, "test", false);
    assert_eq!(d.measure, Measure::FirstRun);
    assert!(t.finish(&next, Backend::Rayon, d, 8.0e6), "recorded");
    assert!(t.models.own(&next.key, Backend::Rayon, next.size).is_some());
}

/// A device trial that was not worth a compile (its kernel is not built) ran on the host,
/// untimed: the device is tried no more for that function (each trial would run on the
/// host again and keep the calls from a remembered decision), but where it is predicted
/// fastest it still runs, which starts the compile.
#[test]
fn a_device_not_worth_a_compile_is_not_tried_again() {
    let mut t = Tuner::open(None);
    t.cores = 16;
    t.sim = Some(Sim {
        elapsed_ns: 0.0,
        last: Some(Backend::Rayon),
    });
    let call = coulombic_call(256 * 256);
    for _ in 0..2 {
        t.models.record(&call.key, Backend::Rayon, call.size, 2.5e6);
    }
    let rows =
        |t: &Tuner, call: &Call| [Backend::Cuda, Backend::Rayon].map(|b| t.candidate(call, b));
    let (d, why) = choose(&t, &call, &rows(&t, &call));
    assert_eq!(d.choice, Choice::Backend(Backend::Cuda), "{why}");
    assert!(d.explore, "{why}");
    t.unbuilt.insert((call.key.clone(), Backend::Cuda));
    let (d, why) = choose(&t, &call, &rows(&t, &call));
    assert_eq!(d.choice, Choice::Backend(Backend::Rayon), "{why}");
    assert_eq!(d.measure, Measure::No, "{why}");
    assert!(
        why.contains("cuda not calibrated: its kernel is not built"),
        "{why}"
    );
    // A call the device is predicted fastest for (3 bytes a pixel, a million pixels).
    let big = Job::call(1 << 20);
    for _ in 0..2 {
        t.models.record(&big.key, Backend::Rayon, big.size, 5.0e6);
    }
    t.unbuilt.insert((big.key.clone(), Backend::Cuda));
    let (d, why) = choose(&t, &big, &rows(&t, &big));
    assert_eq!(d.choice, Choice::Backend(Backend::Cuda), "{why}");
    assert!(!d.explore, "{why}");
}

/// A small Map of 8192 `f32` (4 bytes read, 4 written an element) measured at 25 us on 16
/// cores' Rayon, a few times its prior (launch cost, waking the workers): that is no
/// compute-bound call, and `cpu` (about as fast here) is predicted by the ratio of the
/// priors, under [`SKIP`] times Rayon, so it is tried. Read as launch plus work it would
/// be predicted 12.8 times slower and never tried.
#[test]
fn a_small_rayon_run_near_its_prior_still_lets_cpu_be_tried() {
    let mut t = Tuner::open(None);
    t.cores = 16;
    t.sim = Some(Sim {
        elapsed_ns: 0.0,
        last: Some(Backend::Rayon),
    });
    let n = 8192;
    let mut call = Call::new("map", "app::scale", "f32->f32".into(), n);
    call.total_bytes = 8 * n as u64;
    t.models.record(&call.key, Backend::Rayon, n, 25_000.0);
    let rows = [Backend::Rayon, Backend::Cpu].map(|b| t.candidate(&call, b));
    let cpu = t.estimate(&call, &rows[1], &rows);
    assert!(cpu < SKIP * 25_000.0, "cpu predicted {:.0} us", cpu / 1e3);
    let (d, why) = choose(&t, &call, &rows);
    assert_eq!(d.choice, Choice::Backend(Backend::Cpu), "{why}");
    assert!(d.explore, "{why}");
}

/// A CUDA bucket from the model file, within noise of Rayon, whose kernel is not built in
/// this process: refining the two would run the CUDA trial on the host, untimed, again at
/// every call; so it is left out of the refinement (Rayon, the leader, is refined alone).
#[test]
fn an_unbuilt_device_is_not_refined() {
    let mut t = Tuner::open(None);
    t.cores = 16;
    t.sim = Some(Sim {
        elapsed_ns: 0.0,
        last: Some(Backend::Rayon),
    });
    let call = coulombic_call(256 * 256);
    for _ in 0..2 {
        t.models.record(&call.key, Backend::Rayon, call.size, 2.5e6);
    }
    t.models.record(&call.key, Backend::Cuda, call.size, 2.55e6);
    let rows =
        |t: &Tuner, call: &Call| [Backend::Cuda, Backend::Rayon].map(|b| t.candidate(call, b));
    let (d, why) = choose(&t, &call, &rows(&t, &call));
    assert_eq!(d.choice, Choice::Backend(Backend::Cuda), "{why}");
    assert!(d.explore, "{why}");
    t.unbuilt.insert((call.key.clone(), Backend::Cuda));
    let (d, why) = choose(&t, &call, &rows(&t, &call));
    assert_eq!(d.choice, Choice::Backend(Backend::Rayon), "{why}");
    assert!(!d.explore, "{why}");
}

/// A device whose only run of a size was its first (allocation and first upload, here 1.6
/// times Rayon) is measured once more in a later process, a steady run that replaces it:
/// the device, 0.7 times Rayon once warm, then wins. A host backend's first-run mark is
/// not measured again (`a_trial_is_not_repeated_in_the_next_process`).
#[test]
fn a_device_first_run_is_measured_again_once() {
    let mut t = Tuner::open(None);
    t.cores = 16;
    t.sim = Some(Sim {
        elapsed_ns: 0.0,
        last: Some(Backend::Rayon),
    });
    let call = Job::call(1 << 20);
    for _ in 0..2 {
        t.models.record(&call.key, Backend::Rayon, call.size, 1.0e6);
    }
    t.models.record(&call.key, Backend::Cuda, call.size, 1.6e6);
    let at = (call.key.clone(), Backend::Cuda, bucket_of(call.size));
    t.models.provisional.insert(at.clone());
    t.loaded.insert((call.key.clone(), Backend::Cuda));
    let rows =
        |t: &Tuner, call: &Call| [Backend::Cuda, Backend::Rayon].map(|b| t.candidate(call, b));
    let mut ran = Vec::new();
    for _ in 0..4 {
        let (d, why) = choose(&t, &call, &rows(&t, &call));
        let Choice::Backend(b) = d.choice else {
            panic!("{why}")
        };
        let ns = match b {
            Backend::Cuda if d.measure == Measure::Warmup => 1.6e6,
            Backend::Cuda => 0.7e6,
            _ => 1.0e6,
        };
        t.finish(&call, b, d, ns);
        t.sim.as_mut().unwrap().last = Some(b);
        ran.push((b, d.measure, why));
    }
    assert!(!t.models.provisional.contains(&at), "{ran:#?}");
    let own = t.models.own(&call.key, Backend::Cuda, call.size).unwrap();
    // Its transfers are taken out of each measurement.
    let steady = 0.7e6 - t.transfer_ns(&call, Backend::Cuda);
    assert!(
        (own.mean_ns - steady).abs() < 1.0,
        "replaced: {own:?}\n{ran:#?}"
    );
    assert_eq!(ran.last().unwrap().0, Backend::Cuda, "{ran:#?}");
}

/// The marks `compiling` leaves: a trial not worth a compile marks the device unbuilt for
/// the function, a compile under way marks it compiling, a compile that finished since
/// the call began leaves neither, and a finished build (`kernel_ready`) clears both.
#[test]
fn compiling_and_kernel_ready_mark_and_clear() {
    use crate::backends::kernel_cache::compiles_finished;
    let call = Call::new("map", "tests::marks", "f32->f32".into(), 1000);
    let at = (call.key.clone(), Backend::Cuda);
    let marked = |unbuilt: bool| {
        let t = tuner();
        match unbuilt {
            true => t.unbuilt.contains(&at),
            false => t.compiling.contains(&at),
        }
    };
    // Another test's background compile may finish meanwhile: then the mark is rightly
    // not left (or cleared), and the step is tried again. A mark missing while none
    // finished fails.
    for started in [false, true] {
        let left = (0..100).find_map(|_| {
            let before = compiles_finished();
            compiling(Some(&call), Backend::Cuda, Backend::Rayon, started, before);
            let left = marked(!started);
            (left || compiles_finished() == before).then_some(left)
        });
        assert_eq!(left, Some(true), "started {started}");
    }
    kernel_ready();
    assert!(!marked(true) && !marked(false));
    let stale = compiles_finished().wrapping_sub(1);
    compiling(Some(&call), Backend::Cuda, Backend::Rayon, false, stale);
    assert!(!marked(true), "a compile finished since the call began");
}

/// A small Rayon call right after a `cpu` one includes waking Rayon's parked workers: a
/// warm-up, not a sample; a large one (coulombic's 2.5 ms) is a sample.
#[test]
fn a_small_rayon_run_after_cpu_is_a_warm_up() {
    let mut t = Tuner::open(None);
    t.cores = 16;
    t.sim = Some(Sim {
        elapsed_ns: 0.0,
        last: Some(Backend::Cpu),
    });
    let small = Job::call(8192);
    let big = coulombic_call(256 * 256);
    for (call, ns, want) in [
        (&small, 20_000.0, Measure::Warmup),
        (&big, 2.5e6, Measure::Sample),
    ] {
        t.models.record(&call.key, Backend::Rayon, call.size, ns);
        t.warmed
            .insert((call.key.clone(), Backend::Rayon, bucket_of(call.size)), 1);
        let (d, why) = t.trial(call, Backend::Rayon, "test", false);
        assert_eq!(d.measure, want, "{why}");
    }
}

/// The photos twice on a machine with a GPU, in a process that saves its models in `dir`.
fn photos_with_a_gpu(machine: Machine, dir: &Path) {
    let mut job = Job::process(16, &[Backend::Cuda, Backend::Rayon], machine, Some(dir));
    for n in PHOTOS.iter().chain(&PHOTOS) {
        job.run(*n);
    }
    job.exit();
}

/// Issue 29, the median job warm: where the model file says the GPU wins a function
/// clearly, a process whose GPU is not open yet opens it (in the background) at its first
/// call of that function, also where that call is too short on the host to open it
/// otherwise; not where the GPU lost, nor without a model file.
#[test]
fn a_device_the_model_file_says_wins_is_opened_at_the_first_call() {
    let dir = std::env::temp_dir().join(format!("skel-tune-wins-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    photos_with_a_gpu(gpu_machine(), &dir);
    // The next process: the GPU not open yet, so not among the candidates.
    let job = Job::process(16, &[Backend::Rayon], gpu_machine(), Some(&dir));
    let call = Job::call(512 * 512);
    let rows = job.rows(&call);
    assert!(!job.t.probe_pays(&call, &rows, 1.0), "a short call");
    assert!(job.t.device_wins(&call, &rows, Backend::Cuda));
    assert!(job.t.opens_cuda(&call, &rows));
    // A function the model file does not know opens nothing at that size.
    let other = Call {
        key: Key {
            function: "app::other".into(),
            ..call.key.clone()
        },
        ..call.clone()
    };
    assert!(!job.t.opens_cuda(&other, &job.rows(&other)));
    // Without a model file: nothing known, nothing opened for a short call.
    let fresh = Job::process(16, &[Backend::Rayon], gpu_machine(), None);
    assert!(!fresh.t.opens_cuda(&call, &fresh.rows(&call)));
    let _ = std::fs::remove_dir_all(&dir);

    // Where the GPU lost (behind a slow link), the model file opens nothing early.
    let slower = Machine {
        steady: |b, n| match b {
            Backend::Rayon => 5.0 * n as f64,
            _ => 8.0 * n as f64 + 15_000.0,
        },
        load_ns: 1.0e6,
        alloc_ns: 200_000.0,
    };
    photos_with_a_gpu(slower, &dir);
    let job = Job::process(16, &[Backend::Rayon], gpu_machine(), Some(&dir));
    // The model file knows CUDA at that size: it is the prediction that keeps it closed.
    assert!(job.t.models.known(&call.key, Backend::Cuda, call.size));
    assert!(!job.t.device_wins(&call, &job.rows(&call), Backend::Cuda));
    let _ = std::fs::remove_dir_all(&dir);
}

/// An unreadable model file: the static order among the backends open now (CUDA when it
/// is open, else Rayon, never a CPU OpenCL device), and CUDA is opened in the background.
#[test]
fn the_static_order_takes_only_open_backends() {
    let t = Tuner::open(None);
    let call = Job::call(1 << 10);
    let rows = |bs: &[Backend]| {
        bs.iter()
            .map(|&b| t.candidate(&call, b))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        static_choice(&rows(&[Backend::Rayon, Backend::Cpu])),
        Backend::Rayon
    );
    assert_eq!(
        static_choice(&rows(&[Backend::Cuda, Backend::Rayon])),
        Backend::Cuda
    );
    assert_eq!(static_choice(&rows(&[])), Backend::Cpu);
    // A short call that opens nothing with a readable model file: with an unreadable one it
    // runs on the open Rayon, unmeasured, and opens CUDA (the static order prefers it).
    let mut broken = Tuner::open(None);
    broken.unreadable = Some("a FIFO".into());
    let open = rows(&[Backend::Rayon, Backend::Cpu]);
    assert!(!t.opens_cuda(&call, &open));
    let (d, why) = choose(&broken, &call, &open);
    assert_eq!(d.choice, Choice::Backend(Backend::Rayon), "{why}");
    assert_eq!(d.measure, Measure::No, "{why}");
    assert!(
        why.starts_with("static order: model file unreadable"),
        "{why}"
    );
    assert!(broken.opens_cuda(&call, &open));
}

/// The host-call watch: the probe is due `PROBE_NS` after the host became busy with
/// decided calls, and not while none runs.
#[test]
fn a_host_call_is_watched_from_its_start() {
    let mut s = watch::InFlight::default();
    assert_eq!(s.due(), None);
    let t0 = std::time::Instant::now();
    s.begin(t0);
    let after = std::time::Duration::from_nanos(PROBE_NS as u64);
    assert_eq!(s.due(), Some(t0 + after));
    // A second call on another thread keeps the first one's start.
    s.begin(t0 + after / 2);
    assert_eq!(s.due(), Some(t0 + after));
    s.end();
    assert_eq!(s.due(), Some(t0 + after));
    s.end();
    assert_eq!(s.due(), None);
    s.end(); // no underflow
    s.begin(t0 + after);
    assert_eq!(s.due(), Some(t0 + 2 * after));
}

/// SkePU's cma on the 2-core dev machine: a Scan of 4M elements, which Rayon does in two
/// passes (twice the work), is faster on `cpu`. With 2 threads `cpu` stays a candidate
/// above [`CPU_MAX`]: it is tried once and then takes the calls; with 16 it is none.
#[test]
fn cpu_competes_at_every_size_on_two_cores() {
    let machine = Machine {
        steady: |b, n| match b {
            Backend::Cpu => 2.5 * n as f64,
            _ => 3.0 * n as f64 + 20_000.0,
        },
        load_ns: 0.0,
        alloc_ns: 0.0,
    };
    let mut job = Job::new(2, &[Backend::Rayon, Backend::Cpu], machine);
    job.make = |n| {
        let mut call = Call::new("scan", "skepu::add", "f32->f32".into(), n);
        call.total_bytes = 4 * n as u64;
        call
    };
    for _ in 0..12 {
        job.run(1 << 22);
    }
    // Within each other's noise at first (20 % apart): a few more samples of each, then
    // `cpu` for good.
    let log = format!("{:#?}", job.decisions);
    assert_eq!(job.decisions[1].0, Backend::Cpu, "{log}");
    assert!(
        job.decisions[8..].iter().all(|(b, ..)| *b == Backend::Cpu),
        "{log}"
    );
    assert!(cpu_competes(1 << 22, 2) && cpu_competes(1 << 22, 3));
    assert!(!cpu_competes(1 << 22, 4) && cpu_competes(CPU_MAX, 16));
}

/// Between the two host backends a prediction from other sizes alone does not keep a
/// close rival from a trial at a new size: on 2 cores one Rayon run of the greyscale Map
/// taken while the pipeline's farms held the other core (54 ns a pixel against `cpu`'s 40)
/// would otherwise send every larger photo to `cpu`. A rival predicted more than
/// [`HOST_RIVAL`] slower is still not tried.
#[test]
fn a_close_host_rival_is_tried_at_a_new_size() {
    let decide_at = |rayon_ns: f64| {
        let job = Job::new(2, &[Backend::Rayon, Backend::Cpu], gpu_machine());
        let mut t = job.t;
        let call = Job::call(872_000);
        t.models.record(&call.key, Backend::Cpu, 135_300, 5.4e6);
        t.models.record(&call.key, Backend::Cpu, 500_000, 20.0e6);
        t.models
            .record(&call.key, Backend::Rayon, 262_144, rayon_ns);
        let rows: Vec<Candidate> = [Backend::Rayon, Backend::Cpu]
            .map(|b| t.candidate(&call, b))
            .into();
        choose(&t, &call, &rows)
    };
    let (d, why) = decide_at(14.3e6);
    assert_eq!(d.choice, Choice::Backend(Backend::Rayon), "{why}");
    assert!(d.explore, "{why}");
    let (d, why) = decide_at(40.0e6);
    assert_eq!(d.choice, Choice::Backend(Backend::Cpu), "{why}");
    assert!(!d.explore, "{why}");
}
