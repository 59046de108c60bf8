//! Recorded replay ([`Graph`]): a sequence of skeleton calls that a program repeats,
//! recorded once and launched again and again. See [`Graph`] for the design.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::backends::device_graph::{self, DeviceGraph};
use crate::{Backend, Error, Result};

/// One call of a recording: which user function, on which backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Step {
    /// The user function's name (what a call is told apart by on a launch).
    name: &'static str,
    /// The backend the call asked for (`None`: the process default).
    choice: Option<Backend>,
    /// The backend it ran on.
    backend: Backend,
}

/// What the calls on this thread are part of.
enum Mode {
    /// Eager calls.
    Off,
    /// A recording, with the calls so far.
    Record(Vec<Step>),
    /// A launch: the recorded calls and how many have been made.
    Replay { steps: Rc<[Step]>, next: usize },
}

thread_local! {
    static MODE: RefCell<Mode> = const { RefCell::new(Mode::Off) };
    /// How many skeleton calls are running on this thread: a call made while another runs
    /// (the tuner measuring a link under `Backend::Auto`) is the library's own business,
    /// neither recorded nor expected on a launch.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// Whether [`MODE`] is not `Off`: what an eager call reads, one thread-local load.
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
}

/// Recordings in progress on any thread, and the skeleton calls made outside a recording
/// or launch (on other threads) while one was: a recording during which the count grew may
/// have handed calls to threads of its own, which a device graph would not repeat.
static RECORDINGS: AtomicUsize = AtomicUsize::new(0);
static CALLS_ELSEWHERE: AtomicU64 = AtomicU64::new(0);

/// A recording in progress (see [`RECORDINGS`]), ended when dropped, by return or unwind.
struct Recording;

impl Recording {
    fn begin() -> Recording {
        RECORDINGS.fetch_add(1, Ordering::SeqCst);
        Recording
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        RECORDINGS.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One skeleton call of a recording or launch (see [`DEPTH`]), ended when dropped; an
/// eager call's guard does nothing.
pub(crate) struct Running(bool);

impl Drop for Running {
    fn drop(&mut self) {
        if self.0 {
            DEPTH.set(DEPTH.get() - 1);
        }
    }
}

/// Sets [`MODE`] (and [`ACTIVE`] with it).
fn set_mode(mode: Mode) {
    ACTIVE.set(!matches!(mode, Mode::Off));
    MODE.with_borrow_mut(|m| *m = mode);
}

/// A recorded sequence of skeleton calls, launched again with [`launch`](Graph::launch).
///
/// # How a recording holds its containers
///
/// A [`Graph`] keeps the closure it recorded and runs it again on every
/// [`launch`](Graph::launch). The closure borrows the containers it uses, so a `Graph<'a>`
/// borrows them for `'a`: the borrow checker refuses to drop, move or touch from outside a
/// container that a live graph writes (or to write one that it reads) — a recording can
/// neither outlive nor alias its containers, with no `unsafe` and no shared handles.
/// Read the results once the graph is dropped (or give it a scope, `{ let g = ..; for .. {
/// g.launch()?; } }`). Every launch leaves the containers' coherence state (which copies
/// are valid where, which device events guard them) as the eager calls would: what they
/// wrote is valid where they ran, and uploads happen where they would have happened.
///
/// A graph stays on the thread that recorded it (it is neither `Send` nor `Sync`): the
/// recorder that tells its calls apart is per thread.
///
/// # What a launch runs
///
/// **On CUDA** a recording whose calls all ran on CUDA becomes one CUDA graph
/// ([`device_graph`](Graph::device_graph)): while the recording runs the calls eagerly, the
/// kernels they launch are logged with their arguments, and the chain of them is built into
/// a graph. A launch then makes one graph launch, after the coherence work the eager calls
/// would do at that point: it checks that every container the kernels use still exists with
/// the device copy they were recorded with, orders the graph after other work on those
/// containers, and afterwards marks what the kernels wrote as valid on the device only (a
/// host read downloads it, as after an eager call). The closure itself does not run again,
/// so what it computes on the host, and the uniforms of its calls, are frozen at the
/// recording: a value that changes between launches belongs in a one-element container
/// that the calls read as a container argument (`.arrays((&alpha,))`), which a
/// `run_into` fold of the same graph can write. When the host wrote a container that the
/// graph reads since the last launch (through a `RefCell`, say), that launch runs the
/// closure again as eager calls (uploading what the host wrote); the next launch replays
/// the graph. So does a launch after the host read a container that the graph writes: a
/// view of it (`&[T]`, `&T`) may still be alive, which the graph's writes would make
/// stale under it; the closure's own borrows (a `RefCell::borrow_mut` that panics, or a
/// `try_borrow_mut` that returns your error) then decide, as for eager calls. Read results
/// after the last launch of a batch, and the batch replays. A launch is
/// [`Error::Recording`] when the graph can no longer run: a container it uses was dropped
/// or replaced, or another CUDA device is current on the thread; record it again. What is
/// **not** detected: two containers exchanged (`std::mem::swap` of two `RefCell`'d
/// vectors between launches, for double buffering) while both stay alive. The graph's
/// kernels keep the device buffers they were recorded with, so a launch replays the old
/// roles (the closure, which would read the swapped cells, does not run). Record a pair
/// of iterations instead, one per role (`examples/cg.rs` does), and swap nothing. When the
/// CUDA driver refuses to build the graph, the recording stands and its launches run the
/// closure (a warning in the log says why).
///
/// A recording on CUDA is launched by running its closure again, as on the other backends,
/// when a call cannot be repeated by the device alone: a checked call (its fault record is
/// read by the host), a call that reads a count back (a `Sort`, a `Filter`) or copies a
/// host value into its buffers, calls on several devices, or a container made and dropped
/// inside the closure (make it outside), or skeleton calls made on other threads while it
/// was recorded (calls the closure hands to threads it joins, or unrelated calls of other
/// threads at the same time: the recorder cannot tell them apart, so it keeps the closure,
/// which repeats them). The log (target `skel::graph`, level info) says which.
///
/// **On the other backends**, and for recordings that are not CUDA graphs, a launch runs
/// the closure again: recording resolved each call's backend (the instance's `.backend(..)`
/// or the process default, checked for a device) once; a launch takes the recorded backend
/// of each call instead, and checks that the closure makes the calls it recorded (the same
/// user functions, as many), else [`Error::Recording`]. Each call still builds its plan (a
/// few borrows) and runs its shape checks: they cost tens of nanoseconds, and they are what
/// keeps a closure that hands other containers to a call on a later launch from giving a
/// kernel operands it was not built for. Under [`Backend::Auto`] each call of a launch is
/// still chosen per call (where the operands are valid changes between the first
/// iteration and the next); name a backend to fix it.
///
/// Write the closure as a fixed sequence of calls on containers made outside it, with no
/// other effect, and a launch gives the same results on every backend.
///
/// # Example
///
/// ```
/// use skel::prelude::*;
/// #[userfn]
/// fn axpy(x: f32, y: f32, #[uniform] a: f32) -> f32 { a * x + y }
/// #[userfn]
/// fn mul(a: f32, b: f32) -> f32 { a * b }
/// #[userfn]
/// fn add(a: f32, b: f32) -> f32 { a + b }
///
/// let x = Vector::filled(1000, 1.0f32);
/// let mut y = Vector::filled(1000, 0.0f32);
/// let mut t = Vector::zeroed(1000);
/// let mut dot = Vector::zeroed(1);
/// {
///     let step = Map::new(axpy).uniforms((0.5,));
///     let g = skel::Graph::record(|| {
///         step.run(&x, &y, &mut t)?;                               // t = 0.5 x + y
///         Map::new(add).run(&t, &x, &mut y)?;                      // y = t + x
///         MapReduce::new(mul, add).run_into(&y, &y, &mut dot)      // dot[0] = y . y
///     })?;                                        // ran once: the recording is a first launch
///     assert_eq!(g.calls(), 3);
///     for _ in 0..3 {
///         g.launch()?;
///     }
/// }                                               // the graph's borrows end here
/// assert_eq!(y[0], 6.0);                          // four times y += 1.5
/// assert_eq!(dot[0], 36.0 * 1000.0);
///
/// // A call that returns a value to the host cannot be recorded:
/// let err = skel::Graph::record(|| Reduce::new(add).run(&x).map(|_| ())).unwrap_err();
/// assert!(matches!(err, Error::Recording(_)));
/// assert!(err.to_string().contains("run_into"));
/// # Ok::<(), skel::Error>(())
/// ```
pub struct Graph<'a> {
    body: RefCell<Box<dyn FnMut() -> Result<()> + 'a>>,
    steps: Rc<[Step]>,
    /// The recording as one device graph (CUDA), when it can be one.
    device: Option<DeviceGraph>,
    /// Launches of the device graph that ran the closure instead ([`Graph::eager_launches`]).
    eager: Cell<u64>,
}

impl fmt::Debug for Graph<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Graph")
            .field("steps", &self.steps)
            .field(
                "device_nodes",
                &self.device.as_ref().map(DeviceGraph::nodes),
            )
            .field("eager_launches", &self.eager.get())
            .finish()
    }
}

/// Puts this thread back to eager calls when a recording or launch ends, by return or by
/// unwind.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        set_mode(Mode::Off);
    }
}

/// `Err` when this thread is recording or launching already.
fn idle(what: &str) -> Result<()> {
    if ACTIVE.get() {
        return Err(Error::Recording(format!(
            "{what} inside a recording or a launch: record the calls of both into one graph instead"
        )));
    }
    Ok(())
}

impl<'a> Graph<'a> {
    /// Runs `calls` once, as eager calls would run (its results are those of a first
    /// iteration), and records the skeleton calls it made for [`launch`](Self::launch).
    ///
    /// A call that returns a value to the host (`Reduce::run`, `MapReduce::run`,
    /// `run_index`, `Filter::run`) is [`Error::Recording`]: write the value into a
    /// one-element container with `run_into` / `run_index_into`, which a later call of the
    /// recording reads as an input or container argument. Calls run on the thread that
    /// records (and later launches); calls that the closure hands to other threads (and
    /// joins before it returns) run eagerly on every launch: a skeleton call on another
    /// thread during the recording keeps the recording from becoming a device graph.
    pub fn record(calls: impl FnMut() -> Result<()> + 'a) -> Result<Graph<'a>> {
        idle("Graph::record")?;
        let mut body: Box<dyn FnMut() -> Result<()> + 'a> = Box::new(calls);
        let log = device_graph::begin();
        let (steps, elsewhere) = {
            let _recording = Recording::begin();
            // SeqCst: a thread the closure spawns sees the count raised (the spawn orders
            // it), and its calls are seen below once the closure joined it.
            let before = CALLS_ELSEWHERE.load(Ordering::SeqCst);
            set_mode(Mode::Record(Vec::new()));
            let _restore = Restore;
            body()?;
            let steps = MODE.with_borrow_mut(|m| match m {
                Mode::Record(steps) => std::mem::take(steps),
                _ => Vec::new(),
            });
            (steps, CALLS_ELSEWHERE.load(Ordering::SeqCst) - before)
        };
        let on_cuda = |s: &Step| s.backend == Backend::Cuda;
        let cuda_only = !steps.is_empty() && steps.iter().all(on_cuda);
        let built = if elsewhere > 0 {
            // Ends the kernel log; a graph is not built.
            let _ = device_graph::end(log, false);
            Err(format!(
                "{elsewhere} skeleton calls ran on other threads while it was recorded (the closure may hand calls to threads, which a device graph would not repeat)"
            ))
        } else {
            device_graph::end(log, cuda_only)
        };
        let device = match built {
            Ok(d) => {
                log::debug!(
                    target: "skel::graph",
                    "{} recorded calls as one CUDA graph of {} nodes",
                    steps.len(),
                    d.nodes()
                );
                Some(d)
            }
            Err(why) => {
                if steps.iter().any(on_cuda) {
                    log::info!(
                        target: "skel::graph",
                        "the recording of {} calls is launched by running its closure again, not as one CUDA graph: {why}",
                        steps.len()
                    );
                }
                None
            }
        };
        Ok(Graph {
            body: RefCell::new(body),
            steps: steps.into(),
            device,
            eager: Cell::new(0),
        })
    }

    /// Runs the recorded calls again, each on the backend it was recorded on.
    ///
    /// `Err` with the call's own error when one fails (the calls after it do not run), and
    /// [`Error::Recording`] when the closure makes other calls than it made when it was
    /// recorded (another user function, a call more or fewer) or when a launch is made from
    /// inside a recording or launch.
    pub fn launch(&self) -> Result<()> {
        idle("Graph::launch")?;
        if let Some(d) = &self.device {
            // Counted like a device call, so that `skel::tune::synchronize` waits for it.
            let _counted = crate::backends::Issued;
            let Some(why) = d.launch()? else {
                return Ok(());
            };
            let eager = self.eager.get() + 1;
            self.eager.set(eager);
            // Once per graph at info: a batch that never replays is worth knowing about.
            if eager == 1 {
                log::info!(
                    target: "skel::graph",
                    "{why}: this launch runs the calls eagerly (later ones that do are logged at debug; see Graph::eager_launches)"
                );
            } else {
                log::debug!(
                    target: "skel::graph",
                    "{why}: this launch runs the calls eagerly"
                );
            }
        }
        let mut body = self
            .body
            .try_borrow_mut()
            .map_err(|_| Error::Recording("Graph::launch from inside its own launch".into()))?;
        let steps = Rc::clone(&self.steps);
        set_mode(Mode::Replay { steps, next: 0 });
        let _restore = Restore;
        body()?;
        let made = MODE.with_borrow(|m| match m {
            Mode::Replay { next, .. } => *next,
            _ => 0,
        });
        if made != self.steps.len() {
            return Err(Error::Recording(format!(
                "the launch made {made} skeleton calls, the recording {}: a recorded closure must make the same calls every time",
                self.steps.len()
            )));
        }
        Ok(())
    }

    /// How many skeleton calls were recorded.
    pub fn calls(&self) -> usize {
        self.steps.len()
    }

    /// Whether launches replay one device graph (a CUDA graph: every recorded call ran on
    /// CUDA and each can be repeated by the device alone) instead of running the closure
    /// again. See "What a launch runs" in [`Graph`]'s docs; the log (target `skel::graph`)
    /// says why a recording on CUDA is not one.
    ///
    /// ```
    /// use skel::prelude::*;
    /// #[userfn]
    /// fn twice(x: f32) -> f32 { 2.0 * x }
    ///
    /// let x = Vector::filled(8, 1.0f32);
    /// let mut y = Vector::zeroed(8);
    /// let g = skel::Graph::record(|| Map::new(twice).backend(Backend::Cpu).run(&x, &mut y))?;
    /// assert!(!g.device_graph()); // the cpu backend runs the closure again
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn device_graph(&self) -> bool {
        self.device.is_some()
    }

    /// How many launches of the device graph ran the closure as eager calls instead of
    /// replaying it (the host wrote a container the graph reads, or read one it writes,
    /// since the last launch). Always 0 for a graph that is no device graph
    /// ([`device_graph`](Graph::device_graph) false): its launches all run the closure.
    ///
    /// ```
    /// use skel::prelude::*;
    /// #[userfn]
    /// fn twice(x: f32) -> f32 { 2.0 * x }
    ///
    /// let x = Vector::filled(8, 1.0f32);
    /// let mut y = Vector::zeroed(8);
    /// let g = skel::Graph::record(|| Map::new(twice).run(&x, &mut y))?;
    /// g.launch()?;
    /// assert!(g.device_graph() || g.eager_launches() == 0);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn eager_launches(&self) -> u64 {
        self.eager.get()
    }
}

/// The backend a call of user function `name` that asked for `choice` runs on: resolved
/// (and recorded, in a recording) or, in a launch, the one recorded for this call.
/// The call counts as running until the returned guard drops.
pub(crate) fn backend(choice: Option<Backend>, name: &'static str) -> Result<(Backend, Running)> {
    if !ACTIVE.get() {
        // A load of a line that is rarely written: eager calls stay cheap.
        if RECORDINGS.load(Ordering::SeqCst) != 0 {
            CALLS_ELSEWHERE.fetch_add(1, Ordering::SeqCst);
        }
        return Ok((crate::backends::resolve(choice)?, Running(false)));
    }
    let depth = DEPTH.get();
    let backend = if depth > 0 {
        crate::backends::resolve(choice)?
    } else {
        step(choice, name)?
    };
    DEPTH.set(depth + 1);
    Ok((backend, Running(true)))
}

/// [`backend`] for a call that no other call is running: resolved, recorded or replayed.
fn step(choice: Option<Backend>, name: &'static str) -> Result<Backend> {
    MODE.with_borrow_mut(|m| match m {
        Mode::Off => crate::backends::resolve(choice),
        Mode::Record(steps) => {
            let backend = crate::backends::resolve(choice)?;
            steps.push(Step {
                name,
                choice,
                backend,
            });
            Ok(backend)
        }
        Mode::Replay { steps, next } => {
            let k = *next;
            *next += 1;
            match steps.get(k) {
                Some(s) if s.name == name && s.choice == choice => Ok(s.backend),
                Some(s) => Err(Error::Recording(format!(
                    "call {k} of the launch is `{name}`, the recording's was `{}`: a recorded closure must make the same calls every time",
                    s.name
                ))),
                None => Err(Error::Recording(format!(
                    "the launch made more skeleton calls than the {} recorded (the extra one is `{name}`): a recorded closure must make the same calls every time",
                    steps.len()
                ))),
            }
        }
    })
}

/// `Err` when a call of `form` (user function `name`), which returns its value to the host,
/// is made in a recording or launch (`run_into` forms write a container and take other
/// routes).
pub(crate) fn value_to_host(form: &str, name: &str) -> Result<()> {
    if !ACTIVE.get() || DEPTH.get() > 0 {
        return Ok(());
    }
    Err(Error::Recording(format!(
        "{form} of `{name}` returns its value to the host, which a recorded graph cannot do: write the value into a one-element container with `run_into` (`run_index_into` for `run_index`) and read that container in the calls that need it"
    )))
}
