//! CUDA graphs behind `skel::Graph` (see `crate::graph`): while a recording runs its calls
//! eagerly, this thread's kernel launches (and the zeroing of their temporary buffers) are
//! logged with their arguments, the container ranges each call stages are logged as
//! operands (`memory/replay.rs`), and the temporary buffers are kept instead of freed. At
//! the end the log becomes one CUDA graph, a chain of kernel and memset nodes in launch
//! order, built node by node (`cuGraphAddKernelNode`), not by stream capture: the
//! recording runs as eager calls do (uploads, events, synchronous reads by host code in
//! the closure), and only what the graph must repeat goes into it.
//!
//! Issue order is a valid order for the whole chain: every cross-stream dependency of the
//! eager calls points from earlier work to later work. A launch checks the operands,
//! orders the graph's stream after other streams' conflicting work, launches the graph
//! once and marks the operands (`memory::replay`).
//!
//! What the graph cannot repeat makes the recording ineligible ([`refuse`]): a call that
//! copies host values into its buffers or reads device words back (checked calls, counts),
//! calls on several device slots, containers made and dropped inside the closure. The
//! recording then replays by running its closure again, and says why in the log.

use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{result, sys};

use super::context::{slot_ctx, Ctx, Lane};
use super::driver;
use super::memory::{self, Containers, CuEvent, Found, Kept, Operand};
use super::module_cache::{Dims, KernelArgs};
use crate::containers::ReadyEvent;
use crate::{Error, Result};

/// Why a launch is refused when a container the graph uses is gone.
pub(crate) const DROPPED: &str = "a container that the recorded graph uses was dropped or replaced since the recording: record the graph again with the containers it should use";

/// One node of the graph, in launch order.
enum Node {
    Kernel {
        func: sys::CUfunction,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        shared: u32,
        words: Vec<u64>,
        starts: Vec<usize>,
    },
    Memset {
        dst: sys::CUdeviceptr,
        bytes: usize,
    },
}

/// What a recording on this thread has logged so far.
#[derive(Default)]
struct Capture {
    /// The device slot of the first launch (every launch must be on it).
    slot: Option<u32>,
    nodes: Vec<Node>,
    operands: Vec<Operand>,
    kept: Vec<Kept>,
    /// The streams the logged work ran on.
    lanes: Vec<Lane>,
    /// Why the graph cannot repeat the recording (the first reason found).
    refused: Option<String>,
}

impl Capture {
    fn lane(&mut self, lane: Lane) {
        if !self.lanes.iter().any(|l| l.index == lane.index) {
            self.lanes.push(lane);
        }
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        // A recording that ended without a graph: its kept buffers are freed after the
        // work that used them (their own stream, and the users on others).
        for k in self.kept.drain(..) {
            k.free(None);
        }
    }
}

thread_local! {
    static CAPTURE: RefCell<Option<Capture>> = const { RefCell::new(None) };
    /// Whether [`CAPTURE`] is set: what every launch and staging reads, one load.
    static CAPTURING: Cell<bool> = const { Cell::new(false) };
}

/// Whether a recording logs this thread's work.
#[inline]
pub(crate) fn capturing() -> bool {
    CAPTURING.get()
}

fn with(f: impl FnOnce(&mut Capture)) {
    CAPTURE.with_borrow_mut(|c| {
        if let Some(c) = c {
            f(c)
        }
    });
}

/// Starts logging this thread's work for a recording (ended by [`end`], or by dropping the
/// returned guard).
pub(crate) fn begin() -> Logging {
    CAPTURE.with_borrow_mut(|c| *c = Some(Capture::default()));
    CAPTURING.set(true);
    Logging
}

/// Ends the logging when a recording ends, by return or by unwind.
pub(crate) struct Logging;

impl Drop for Logging {
    fn drop(&mut self) {
        CAPTURING.set(false);
        let c = CAPTURE.with_borrow_mut(Option::take);
        drop(c);
    }
}

/// Logs a kernel launched on `lane` of `ctx`.
pub(crate) fn launched(ctx: &Ctx, lane: Lane, func: sys::CUfunction, d: &Dims, a: &KernelArgs) {
    with(|c| {
        match c.slot {
            None => c.slot = Some(ctx.slot),
            Some(s) if s != ctx.slot => {
                c.refused
                    .get_or_insert_with(|| "its calls run on several device slots".into());
            }
            Some(_) => {}
        }
        c.lane(lane);
        let (words, starts) = a.parts();
        c.nodes.push(Node::Kernel {
            func,
            grid: d.grid,
            block: d.block,
            shared: d.shared,
            words: words.to_vec(),
            starts: starts.to_vec(),
        });
    });
}

/// Logs the zeroing of `bytes` bytes at `dst` on `lane`.
pub(crate) fn memset(lane: Lane, dst: sys::CUdeviceptr, bytes: usize) {
    with(|c| {
        c.lane(lane);
        c.nodes.push(Node::Memset { dst, bytes });
    });
}

/// Logs a container range a call staged for its kernels.
pub(crate) fn operand(op: Operand) {
    // The same access again (a Map chain reading one container in every call) needs no
    // second check and mark on a launch.
    with(|c| {
        if !c.operands.iter().any(|o| o.same(&op)) {
            c.operands.push(op)
        }
    });
}

/// Keeps a call's temporary buffer for the graph.
pub(crate) fn keep(k: Kept) {
    with(|c| c.kept.push(k));
}

/// Marks the recording as one the graph cannot repeat, because `why`.
pub(crate) fn refuse(why: &str) {
    if capturing() {
        with(|c| {
            c.refused.get_or_insert_with(|| why.to_string());
        });
    }
}

/// Ends the logging: the device graph of the recording, or why there is none.
/// `cuda_only`: every recorded call ran on CUDA. A driver that refuses the graph (a node,
/// the instantiation) leaves the recording to run its closure on every launch, with a
/// warning: the recording itself ran and its results are there.
pub(crate) fn end(log: Logging, cuda_only: bool) -> std::result::Result<DeviceGraph, String> {
    CAPTURING.set(false);
    let c = CAPTURE.with_borrow_mut(Option::take);
    drop(log);
    let Some(c) = c else {
        return Err("nothing was logged".into());
    };
    if !cuda_only {
        return Err("not every call ran on the CUDA backend".into());
    }
    match graph_of(c) {
        Ok(made) => made,
        Err(e) => {
            log::warn!(
                target: "skel::graph",
                "the CUDA driver did not build the recording's graph ({e}): its launches run the closure again"
            );
            Err(format!("the CUDA driver did not build the graph: {e}"))
        }
    }
}

/// The device graph of the log `c`, or why there is none (`Err`: the driver refused it;
/// `c`'s kept buffers are then freed with it).
fn graph_of(mut c: Capture) -> Result<std::result::Result<DeviceGraph, String>> {
    if let Some(why) = c.refused.take() {
        return Ok(Err(why));
    }
    if c.operands.iter().any(Operand::detached) {
        return Ok(Err(
            "a call used a container made and dropped inside the recorded closure (make it outside, before the recording)".into(),
        ));
    }
    let Some(slot) = c.slot else {
        // No kernel: every call was empty; a launch has nothing to repeat.
        return Ok(Ok(DeviceGraph::empty(std::mem::take(&mut c.operands))));
    };
    let ctx = slot_ctx(slot as usize)?;
    ctx.bind()?;
    let lane = ctx.lanes(1)[0];
    // The graph's first launch follows everything the recording did on other streams (the
    // temporary buffers' last users among it).
    let mut first = Vec::with_capacity(c.lanes.len());
    for &l in &c.lanes {
        first.push(CuEvent::record(l)?);
    }
    let (graph, exec) = build(ctx, &c.nodes)?;
    Ok(Ok(DeviceGraph {
        graph,
        exec,
        slot,
        lane: Some(lane),
        nodes: c.nodes.len(),
        containers: Containers::of(&c.operands),
        operands: std::mem::take(&mut c.operands),
        kept: std::mem::take(&mut c.kept),
        first: RefCell::new(first),
        last: RefCell::new(None),
    }))
}

/// The chain of `nodes` as an instantiated graph.
fn build(ctx: &Ctx, nodes: &[Node]) -> Result<(sys::CUgraph, sys::CUgraphExec)> {
    let mut graph: sys::CUgraph = std::ptr::null_mut();
    // SAFETY: `graph` is written by the call; flags must be 0.
    unsafe { sys::cuGraphCreate(&mut graph, 0) }
        .result()
        .map_err(driver)?;
    let destroy = |graph: sys::CUgraph| {
        // SAFETY: a graph created above, not used afterwards.
        let _ = unsafe { result::graph::destroy(graph) };
    };
    let mut prev: Option<sys::CUgraphNode> = None;
    for node in nodes {
        // The driver checks a kernel node's launch as it adds it: an injected launch fault
        // (`skel::debug::inject_fault`) fails here as that check would.
        if let Err(e) = super::injected(crate::debug::Fault::Launch) {
            destroy(graph);
            return Err(driver(e));
        }
        let mut made: sys::CUgraphNode = std::ptr::null_mut();
        let deps: Vec<sys::CUgraphNode> = prev.into_iter().collect();
        let status = match node {
            Node::Kernel {
                func,
                grid,
                block,
                shared,
                words,
                starts,
            } => {
                let mut words = words.clone();
                let base = words.as_mut_ptr();
                // SAFETY: every start lies inside `words` (they come from one KernelArgs).
                let mut ptrs: Vec<*mut c_void> = starts
                    .iter()
                    .map(|&at| unsafe { base.add(at) }.cast::<c_void>())
                    .collect();
                let params = sys::CUDA_KERNEL_NODE_PARAMS {
                    func: *func,
                    gridDimX: grid.0,
                    gridDimY: grid.1,
                    gridDimZ: grid.2,
                    blockDimX: block.0,
                    blockDimY: block.1,
                    blockDimZ: block.2,
                    sharedMemBytes: *shared,
                    kernelParams: ptrs.as_mut_ptr(),
                    extra: std::ptr::null_mut(),
                    kern: std::ptr::null_mut(),
                    ctx: std::ptr::null_mut(),
                };
                // SAFETY: `func` is a loaded kernel whose parameters are, in order, the
                // values at `ptrs` (the arguments it was launched with at the recording);
                // the driver copies them into the node during the call; `deps` holds the
                // previous node of this graph, if any.
                unsafe {
                    sys::cuGraphAddKernelNode_v2(
                        &mut made,
                        graph,
                        deps.as_ptr(),
                        deps.len(),
                        &params,
                    )
                }
            }
            Node::Memset { dst, bytes } => {
                let params = sys::CUDA_MEMSET_NODE_PARAMS {
                    dst: *dst,
                    pitch: 0,
                    value: 0,
                    elementSize: 1,
                    width: *bytes,
                    height: 1,
                };
                // SAFETY: `dst` is a kept temporary buffer of at least `bytes` bytes (the
                // recording zeroed the same bytes); `deps` as above.
                unsafe {
                    sys::cuGraphAddMemsetNode(
                        &mut made,
                        graph,
                        deps.as_ptr(),
                        deps.len(),
                        &params,
                        ctx.ctx,
                    )
                }
            }
        };
        if let Err(e) = status.result() {
            destroy(graph);
            return Err(driver(e));
        }
        prev = Some(made);
    }
    // SAFETY: a valid graph; default flags.
    match unsafe { result::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0)) } {
        Ok(exec) => Ok((graph, exec)),
        Err(e) => {
            destroy(graph);
            Err(driver(e))
        }
    }
}

/// A recording as one CUDA graph, launched by [`DeviceGraph::launch`].
pub(crate) struct DeviceGraph {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
    slot: u32,
    /// The stream every launch runs on (`None`: no kernel, nothing to launch).
    lane: Option<Lane>,
    nodes: usize,
    operands: Vec<Operand>,
    /// The distinct containers of `operands`, locked together by a launch.
    containers: Containers,
    kept: Vec<Kept>,
    /// Events the first launch waits for (the recording's work on other streams).
    first: RefCell<Vec<Arc<CuEvent>>>,
    /// The last launch's event (the kept buffers are freed after it).
    last: RefCell<Option<Arc<CuEvent>>>,
}

impl DeviceGraph {
    fn empty(operands: Vec<Operand>) -> DeviceGraph {
        DeviceGraph {
            graph: std::ptr::null_mut(),
            exec: std::ptr::null_mut(),
            slot: 0,
            lane: None,
            nodes: 0,
            containers: Containers::of(&operands),
            operands,
            kept: Vec::new(),
            first: RefCell::new(Vec::new()),
            last: RefCell::new(None),
        }
    }

    /// How many kernel and memset nodes the graph has.
    pub(crate) fn nodes(&self) -> usize {
        self.nodes
    }

    /// Replays the recording with one graph launch: `Ok(None)`; `Ok(Some(why))` when the
    /// caller must run the calls eagerly this time: something the graph reads is not
    /// current on the device (the host wrote it since the last launch; the eager calls
    /// upload it), or the host may still view a container it writes (the eager calls'
    /// `&mut` borrows prove the view gone), a container's device copy is gone (the eager
    /// calls make one), or another device slot is current on this thread. `Err` when the
    /// graph can no longer run (a container dropped or its device copy made again), or a
    /// driver error.
    pub(crate) fn launch(&self) -> Result<Option<&'static str>> {
        let Some(lane) = self.lane else {
            // No kernel; the operands are still checked (a dropped container is an error
            // whatever the graph holds).
            if self.operands.iter().any(Operand::detached) {
                return Err(Error::Recording(DROPPED.into()));
            }
            return Ok(None);
        };
        let ctx = super::context::ctx()?;
        if ctx.slot != self.slot {
            // The eager calls run on the current slot; a later launch on the graph's own
            // slot finds what they wrote stale there and runs them again too.
            return Ok(Some(
                "another CUDA device slot than the recording's is current on this thread",
            ));
        }
        ctx.bind()?;
        // Every container stays locked until the graph's writes are marked: a host read on
        // another thread waits for the marks (and downloads), and one that formed a view
        // before has set the flag that `prepare` reads (`Shared::viewed`).
        let mut held = self.containers.lock(&self.operands);
        let cs = &self.containers;
        match memory::replay::prepare(ctx, &self.operands, cs, &mut held, lane)? {
            Found::Ready => {}
            Found::Stale => {
                return Ok(Some(
                    "the host wrote what the graph reads since the last launch",
                ))
            }
            Found::Gone => {
                return Ok(Some(
                    "the device copy of a container that the graph uses was dropped since the recording",
                ))
            }
            Found::Viewed => {
                return Ok(Some(
                    "the host read a container that the graph writes since a call last borrowed it `&mut` (a view of it may be alive)",
                ))
            }
        }
        {
            let mut first = self.first.borrow_mut();
            for ev in first.iter() {
                ev.order(lane)?;
            }
            first.clear();
        }
        // SAFETY: an instantiated graph of this context; its kernels' operands are the
        // checked device buffers (ordered on `lane` above) and kept temporary buffers, all
        // alive while the graph is.
        unsafe { result::graph::launch(self.exec, lane.raw) }.map_err(driver)?;
        // From here on the graph may be running: an error waits for it before it returns,
        // so that nothing the caller frees next (the kept buffers, when the graph drops with
        // no event of this launch) is still in use.
        let after = |e: Error| {
            // SAFETY: a stream of this context, bound above.
            let _ = unsafe { result::stream::synchronize(lane.raw) };
            e
        };
        let ev = match CuEvent::record(lane) {
            Ok(ev) => ev,
            Err(e) => {
                // SAFETY: a stream of this context, bound above.
                match unsafe { result::stream::synchronize(lane.raw) } {
                    // The graph ran (or failed, which the next wait reports): what it
                    // wrote is on the device, which the coherence state must say.
                    Ok(()) => memory::replay::mark_done(ctx, &self.operands, cs, &mut held),
                    // Not known to have run: the device copy of what it writes is lost.
                    Err(s) => {
                        memory::replay::mark_lost(ctx, &self.operands, cs, &mut held);
                        log::warn!(
                            target: "skel::graph",
                            "recording the event after a graph launch failed ({e}), and so did waiting for its stream"
                        );
                        return Err(driver(s));
                    }
                }
                return Err(e);
            }
        };
        *self.last.borrow_mut() = Some(ev.clone());
        memory::replay::mark(ctx, &self.operands, cs, &mut held, &ev).map_err(after)?;
        Ok(None)
    }
}

impl Drop for DeviceGraph {
    fn drop(&mut self) {
        let last = self.last.borrow_mut().take();
        // The executable graph and the kept buffers go once the last launch is over.
        if let Some(ev) = &last {
            let _ = ev.wait();
        }
        for k in self.kept.drain(..) {
            k.free(last.as_ref());
        }
        if self.graph.is_null() {
            return;
        }
        if let Ok(ctx) = slot_ctx(self.slot as usize) {
            let _ = ctx.bind();
        }
        // SAFETY: created by `build`, not used afterwards; its last launch is over (waited
        // for above).
        unsafe {
            let _ = result::graph::exec_destroy(self.exec);
            let _ = result::graph::destroy(self.graph);
        }
    }
}
