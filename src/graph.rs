//! Recorded replay ([`Graph`]): a sequence of skeleton calls that a program repeats,
//! recorded once and launched again and again. See [`Graph`] for the design.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::rc::Rc;

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
/// g.launch()?; } }`). Because every launch runs the same calls on the same containers as
/// eager code would, the containers' coherence state (which copies are valid where, which
/// device events guard them) is exactly what the eager calls leave: uploads and downloads
/// happen where they would have happened.
///
/// A graph stays on the thread that recorded it (it is neither `Send` nor `Sync`): the
/// recorder that tells its calls apart is per thread.
///
/// # What a launch skips
///
/// Recording resolves each call's backend (the instance's `.backend(..)` or the process
/// default, checked for a device) once; a launch takes the recorded backend of each call
/// instead, and checks that the closure makes the calls it recorded (the same user
/// functions, as many), else [`Error::Recording`]. Each call still builds its plan (a few
/// borrows) and runs its shape checks: they cost tens of nanoseconds, and they are what
/// keeps a closure that hands other containers to a call on a later launch from giving a
/// kernel operands it was not built for. Under [`Backend::Auto`] each call of a launch is
/// still chosen per call (where the operands are valid changes between the first
/// iteration and the next); name a backend to fix it.
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
}

impl fmt::Debug for Graph<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Graph").field("steps", &self.steps).finish()
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
    /// records (and later launches); calls that the closure hands to other threads run
    /// eagerly on every launch.
    pub fn record(calls: impl FnMut() -> Result<()> + 'a) -> Result<Graph<'a>> {
        idle("Graph::record")?;
        let mut body: Box<dyn FnMut() -> Result<()> + 'a> = Box::new(calls);
        let steps = {
            set_mode(Mode::Record(Vec::new()));
            let _restore = Restore;
            body()?;
            MODE.with_borrow_mut(|m| match m {
                Mode::Record(steps) => std::mem::take(steps),
                _ => Vec::new(),
            })
        };
        Ok(Graph {
            body: RefCell::new(body),
            steps: steps.into(),
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
}

/// The backend a call of user function `name` that asked for `choice` runs on: resolved
/// (and recorded, in a recording) or, in a launch, the one recorded for this call.
/// The call counts as running until the returned guard drops.
pub(crate) fn backend(choice: Option<Backend>, name: &'static str) -> Result<(Backend, Running)> {
    if !ACTIVE.get() {
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
