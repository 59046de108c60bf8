//! The CUDA backend: cudarc (driver API, loaded at run time) and NVRTC.
//!
//! - `context.rs`: the device slots, their primary contexts and pools of streams;
//! - `devices.rs`: how a call is split over several device slots (`.devices(n)`);
//! - `multistream.rs`: how a call is split into chunks over several streams, and the cost
//!   model that picks how many;
//! - `trace.rs`: `SKEL_TRACE`, a timeline of every copy and kernel;
//! - `module_cache.rs`: NVRTC compilation for the device's own architecture, the on-disk
//!   kernel cache (the in-memory one is `backends/kernel_cache.rs`), kernel arguments and
//!   launches;
//! - `memory/`: containers' device copies, scratch and result buffers, pinned host memory,
//!   events, staging, and the ordering of work on different streams (one file per job);
//! - one file per skeleton: `map.rs`, `map_array.rs`, `reduce.rs`, `map_reduce.rs`,
//!   `scan.rs`, `map_overlap.rs`, `map_pairs.rs`, `map_pairs_reduce.rs`, `filter.rs`, `sort.rs`; their kernels are the templates in `cuda/*.cu` (embedded
//!   with `include_str!`), completed by the generated user functions and a few `#define`s.
//!
//! Calls are asynchronous: a skeleton call enqueues its chunks' uploads (of what is
//! missing), kernels and, if the host will read the result, downloads, and returns; the
//! output container records each chunk's events, which host access waits on (device errors
//! surface there). Reduce and MapReduce return a value, so they wait.

mod arrays;
mod chain;
pub(super) mod context;
mod devices;
mod fault;
mod filter;
pub(crate) mod graph;
mod histogram;
mod loopnest;
mod map;
mod map_array;
mod map_overlap;
mod map_overlap3;
mod map_overlap_windows;
mod map_pairs;
mod map_pairs_reduce;
mod map_reduce;
mod memory;
mod module_cache;
pub(crate) use module_cache::warm_up_if_cold;
mod multistream;
mod reduce;
mod reduce_by_key;
mod scan;
mod sort;
mod trace;
mod wavefront;

pub(crate) use context::probe;
pub(crate) use memory::transfers as buffer_transfers;
pub(crate) use trace::flush as flush_trace;

use cudarc::driver::{sys, DriverError};

use super::overlap_windows::Job;
use super::Execute;
use crate::backends::args;
use crate::backends::cpu::combine;
use crate::check::host_call;
use crate::codegen::ir::{FnDef, ParamKind};
use crate::codegen::{c_type, Dialect, Ty};
use crate::containers::State;
use crate::containers::{Arg, OutArgs};
use crate::plan::{
    self, FilterSig, FoldSig, HistogramSig, MapArraySig, MapReduceSig, MapSig, PairsReduceSig,
    PairsSig, ReduceByKeySig, SortSig, WavefrontSig,
};
use crate::plan::{ArgTuple, ArgVisitor};
use crate::skeletons::Options;
use crate::userfn::{UserFn, Window2Fn, WindowFn};
use crate::{DeviceType, Error, Result};

/// Helpers every template includes, after the user functions and its `#define`s.
const COMMON: &str = include_str!("../../../cuda/common.cuh");

/// The CUDA executor, with one call's options.
#[derive(Clone, Copy)]
pub(crate) struct Cuda {
    /// `.devices(..)`, if given.
    devices: Option<crate::skeletons::Devices>,
    /// `.streams(k)`, if given.
    streams: Option<usize>,
    /// `.download(eager)`, if given.
    download: Option<bool>,
    /// Whether the call runs the checked variant of the user functions (`fault.rs`).
    pub(crate) checked: bool,
    /// Added to every `#[index]`: the global flat index of the call's first element when
    /// the call is one part of a larger one (a distributed block, a device's share), else 0.
    index_base: usize,
}

impl Cuda {
    pub(crate) fn new(options: &Options) -> Self {
        Cuda {
            devices: options.devices,
            streams: options.streams,
            download: options.download,
            checked: options.checked(),
            index_base: options.base(),
        }
    }
}

/// The device's MultiStream cost model (see `skel::debug::stream_model`).
pub(crate) fn stream_model() -> Result<crate::debug::StreamModel> {
    multistream::model(context::ctx()?)
}

/// Pure pinned copies of `up` and `down` bytes (see `skel::debug::copy_bound`).
pub(crate) fn copy_bound(up: usize, down: usize) -> Result<crate::debug::CopyBound> {
    multistream::copy_bound(context::ctx()?, up, down)
}

/// Waits for every stream of the pool (see `skel::debug::synchronize`).
pub(crate) fn synchronize() -> Result<()> {
    context::opened_slots().try_for_each(context::Ctx::synchronize)
}

/// Where `Backend::Auto` finds container copies of the CUDA backend: the default slot's.
pub(crate) fn location() -> crate::containers::Location {
    crate::containers::Location::Device(0)
}

/// Bytes moved to and from the CUDA devices for a container (`skel::debug::transfers`),
/// summed over the device slots.
pub(crate) fn transfers(st: &State) -> Option<(u64, u64)> {
    context::opened()?;
    context::opened_slots()
        .filter_map(|c| buffer_transfers(st, c.slot))
        .reduce(|a, b| (a.0 + b.0, a.1 + b.1))
}

/// `(used, total)` bytes of the opened device's memory (`skel::debug::device_memory`).
pub(crate) fn device_memory() -> Option<(u64, u64)> {
    let ctx = context::opened()?;
    ctx.bind().ok()?;
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: the device's context is current on this thread; both pointers are valid.
    let r = unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) };
    (r == sys::CUresult::CUDA_SUCCESS).then(|| ((total - free) as u64, total as u64))
}

/// Driver objects alive now (`skel::debug::device_objects`), once the device is open.
pub(crate) fn device_objects() -> Option<crate::debug::DeviceObjects> {
    context::opened()?;
    let (events, spare_events, buffers, result_slots) = memory::live_objects();
    Some(crate::debug::DeviceObjects {
        events,
        spare_events,
        buffers,
        result_slots,
    })
}

/// A driver error as an [`Error::Driver`]; one that leaves the context unusable (an
/// illegal address, a failed launch, ...) as [`Error::DeviceLost`], remembered so that
/// every later call fails with it at once.
pub(crate) fn driver(e: DriverError) -> Error {
    use sys::CUresult as R;
    let sticky = matches!(
        e.0,
        R::CUDA_ERROR_ILLEGAL_ADDRESS
            | R::CUDA_ERROR_LAUNCH_FAILED
            | R::CUDA_ERROR_HARDWARE_STACK_ERROR
            | R::CUDA_ERROR_ILLEGAL_INSTRUCTION
            | R::CUDA_ERROR_MISALIGNED_ADDRESS
            | R::CUDA_ERROR_INVALID_ADDRESS_SPACE
            | R::CUDA_ERROR_INVALID_PC
    );
    let reason = crate::DriverError::with_source(format!("CUDA: {e}"), e);
    if sticky {
        let first = LOST.get_or_init(|| reason);
        return lost(first);
    }
    Error::Driver(reason)
}

/// What lost the CUDA context, once something did.
static LOST: std::sync::OnceLock<crate::DriverError> = std::sync::OnceLock::new();

fn lost(reason: &crate::DriverError) -> Error {
    Error::DeviceLost {
        backend: crate::Backend::Cuda,
        reason: reason.clone(),
    }
}

/// `Err(DeviceLost)` once a sticky error has lost the context.
pub(crate) fn not_lost() -> Result<()> {
    LOST.get().map_or(Ok(()), |r| Err(lost(r)))
}

/// `Err` when [`crate::debug::inject_fault`] makes this operation fail: the driver error
/// such a failure gives, for the caller to map as it maps the real call's.
pub(crate) fn injected(kind: crate::debug::Fault) -> std::result::Result<(), DriverError> {
    use crate::debug::Fault;
    if kind == Fault::Launch && crate::debug::loss_fires() {
        return Err(DriverError(sys::CUresult::CUDA_ERROR_ILLEGAL_ADDRESS));
    }
    if !crate::debug::fault_fires(kind) {
        return Ok(());
    }
    Err(DriverError(match kind {
        Fault::Alloc => sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY,
        Fault::Launch => sys::CUresult::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
        Fault::Upload | Fault::Download => sys::CUresult::CUDA_ERROR_INVALID_VALUE,
    }))
}

/// A driver error from an allocation: [`Error::OutOfMemory`] when it is one.
pub(crate) fn oom_or_driver(e: DriverError, bytes: usize) -> Error {
    if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
        Error::OutOfMemory(crate::DriverError::with_source(
            format!("CUDA: allocating {bytes} bytes"),
            e,
        ))
    } else {
        driver(e)
    }
}

/// The C name of device type `T`.
pub(crate) fn cty<T: DeviceType>() -> String {
    c_type(T::TY, Dialect::Cuda)
}

fn ty_name(ty: Ty) -> String {
    c_type(ty, Dialect::Cuda)
}

/// A kernel source: the generated user functions, `#define name value` lines, the common
/// helpers, then the template.
pub(crate) fn assemble(user: &str, defines: &[(&str, String)], template: &str) -> String {
    let mut s = String::with_capacity(user.len() + template.len() + COMMON.len() + 512);
    s.push_str(user);
    s.push('\n');
    for (name, value) in defines {
        s.push_str(&format!("#define {name} {value}\n"));
    }
    s.push_str(COMMON);
    s.push('\n');
    s.push_str(template);
    s
}

/// What a user call's arguments are made of, per parameter kind.
pub(crate) struct CallSite<'s> {
    /// The position in the operand pointers (a C expression).
    pub pos: &'s str,
    /// The flat position in the whole operand, for index parameters.
    pub index: &'s str,
    /// The window pointer (stencils).
    pub window: &'s str,
    /// The window's row stride (2D stencils).
    pub stride: &'s str,
}

/// Row (`op` `/`) or column (`%`) of flat position `index`, as the calls write it.
fn index_part(index: &str, op: &str) -> String {
    args::index_part(index, op, "skel_u64", "unsigned")
}

/// `call` (from [`checked_call_expr`] or `chain::fuse_call`) with the row and column of
/// flat position `index` taken as `row` and `col`: for kernels that keep them as they go
/// (a 2D grid, the vectorised Map's loop, a row fold), where a division would cost more.
pub(crate) fn with_row_col(call: &str, index: &str, (row, col): (&str, &str)) -> String {
    call.replace(&index_part(index, "/"), row)
        .replace(&index_part(index, "%"), col)
}

/// `entry(args...)` for user function `def`: index parameters from the flat position (2D:
/// row and column through `cols`), the array as `arr`, element `k` as `in<k>[pos]`,
/// uniform `k` as `u<k>`, windows as given; in the checked variant (with `checked`) the
/// fault record `skel_fault` goes first and every array its length.
pub(crate) fn checked_call_expr(
    entry: &str,
    def: &'static FnDef,
    site: &CallSite<'_>,
    checked: bool,
) -> String {
    prefixed_call_expr(entry, def, site, "", checked)
}

/// [`checked_call_expr`] with every operand's name (`in<k>`, `ca<k>`, `arr`, `u<k>`)
/// prefixed by `p` (a lazy input's user function in its consumer's kernel,
/// `backends::chain`).
pub(crate) fn prefixed_call_expr(
    entry: &str,
    def: &'static FnDef,
    site: &CallSite<'_>,
    p: &str,
    checked: bool,
) -> String {
    let (mut e, mut u, mut c) = (0, 0, 0);
    let single = args::single_array(def);
    let (pos, index) = (site.pos, site.index);
    let args: Vec<String> = def
        .params
        .iter()
        .map(|param| match param.kind {
            ParamKind::Index => format!("(skel_u64)({index})"),
            ParamKind::IndexRow => index_part(index, "/"),
            ParamKind::IndexCol => index_part(index, "%"),
            ParamKind::Array if single => {
                let name = format!("{p}arr");
                args::call_args(def, param, &name, &name, checked)
            }
            ParamKind::Array | ParamKind::Mat => {
                c += 1;
                let name = format!("{p}ca{}", c - 1);
                args::call_args(def, param, &name, &name, checked)
            }
            ParamKind::Elem => {
                e += 1;
                format!("{p}in{}[{pos}]", e - 1)
            }
            ParamKind::Uniform => {
                u += 1;
                format!("{p}u{}", u - 1)
            }
            // The radii follow, which the checked variant checks offsets against and the
            // unchecked one clamps them into (a stencil template defines SKEL_RR and
            // SKEL_RC; a 1D window's radius is the one that is not 0).
            ParamKind::Window => format!("{}, (skel_i64)(SKEL_RR + SKEL_RC)", site.window),
            ParamKind::Window2 => format!(
                "{}, (skel_i64)({}), (skel_i64)(SKEL_RR), (skel_i64)(SKEL_RC)",
                site.window, site.stride
            ),
            // A 3D template (`cuda/map_overlap3.cu`) defines the strides and radii.
            ParamKind::Window3 => format!(
                "{}, (skel_i64)(SKEL_S0), (skel_i64)(SKEL_S1), (skel_i64)(SKEL_R0), \
                 (skel_i64)(SKEL_R1), (skel_i64)(SKEL_R2)",
                site.window
            ),
        })
        .collect();
    let fault = checked.then(|| "skel_fault".to_string());
    let args: Vec<String> = fault.into_iter().chain(args).collect();
    format!("{entry}({})", args.join(", "))
}

/// The vectorised form of a Map call (see `cuda/map.cu`): `SKEL_VLOAD(SKEL_I)` loads four
/// consecutive values of each input into `x<k>[4]`, `SKEL_CALLV(SKEL_I, SKEL_V)` is the call
/// for the `SKEL_V`-th of them, `SKEL_ALIGNED` checks that every pointer is 16-byte aligned.
pub(crate) fn vector_defines(
    entry: &str,
    def: &'static FnDef,
    checked: bool,
) -> Vec<(&'static str, String)> {
    let elems: Vec<String> = def
        .params
        .iter()
        .filter(|p| p.kind == ParamKind::Elem)
        .map(|p| ty_name(p.ty))
        .collect();
    let load: String = elems
        .iter()
        .enumerate()
        .map(|(k, t)| format!("{t} x{k}[4]; skel_loadv(in{k} + (SKEL_I), x{k}); "))
        .collect();
    let mut aligned = String::from("(size_t)out");
    for k in 0..elems.len() {
        aligned.push_str(&format!(" | (size_t)in{k}"));
    }
    let site = CallSite {
        pos: "(SKEL_I) + (SKEL_V)",
        index: "skel_base + (SKEL_I) + (SKEL_V)",
        window: "",
        stride: "",
    };
    let call = checked_call_expr(entry, def, &site, checked);
    // Element k of the call reads x<k>[SKEL_V] instead of in<k>[pos].
    let mut callv = call;
    for k in 0..elems.len() {
        callv = callv.replace(
            &format!("in{k}[(SKEL_I) + (SKEL_V)]"),
            &format!("x{k}[SKEL_V]"),
        );
    }
    vec![
        ("SKEL_VLOAD(SKEL_I)", load),
        ("SKEL_CALLV(SKEL_I, SKEL_V)", callv),
        ("SKEL_ALIGNED", format!("((({aligned}) & 15) == 0)")),
    ]
}

/// Kernel parameters for the inputs (`, const A* __restrict__ in0, ...`) of `def`.
pub(crate) fn input_params(def: &FnDef) -> String {
    def.params
        .iter()
        .filter(|p| p.kind == ParamKind::Elem)
        .enumerate()
        .map(|(k, p)| format!(", const {}* __restrict__ in{k}", ty_name(p.ty)))
        .collect()
}

/// Kernel parameters for the array of a MapArray function (`, const T* __restrict__ arr,
/// skel_u64 arr_rows, skel_u64 arr_cols`): a container argument named `arr`.
pub(crate) fn array_param(def: &FnDef) -> String {
    arrays::container_params(def)
}

/// Kernel parameters for the uniforms (`, const U u0, ...`) of `def`.
pub(crate) fn uniform_params(def: &FnDef) -> String {
    def.params
        .iter()
        .filter(|p| p.kind == ParamKind::Uniform)
        .enumerate()
        .map(|(k, p)| format!(", const {} u{k}", ty_name(p.ty)))
        .collect()
}

/// Makes positions `part` of each input of a tuple readable on one stream (uploading what
/// is missing), collecting the addresses of their first elements; or, with `done`, records
/// that the work before that event read them. A lazy input (`backends::chain`) adds its
/// leaves' parts, its container arguments whole (address, rows, columns) and its
/// uniforms, in the order of `chain::fused_input_params`.
struct ChunkInputs<'c> {
    ctx: &'c context::Ctx,
    part: std::ops::Range<usize>,
    lane: context::Lane,
    tag: trace::Tag,
    done: Option<&'c std::sync::Arc<memory::CuEvent>>,
    args: Vec<InputArg>,
}

/// One kernel argument for the inputs of a call.
pub(crate) enum InputArg {
    /// A device address, or a container argument's rows or columns.
    Word(u64),
    /// A lazy input's uniform.
    Bytes(Vec<u8>),
}

/// Appends the arguments of a call's inputs.
pub(crate) fn push_inputs(args: &mut module_cache::KernelArgs, inputs: &[InputArg]) {
    for a in inputs {
        match a {
            InputArg::Word(w) => {
                args.u64(*w);
            }
            InputArg::Bytes(b) => args.push_bytes(b),
        }
    }
}

impl ArgVisitor for ChunkInputs<'_> {
    fn visit<T: DeviceType>(&mut self, arg: Arg<'_, T>) -> Result<()> {
        match self.done {
            None => self.args.push(InputArg::Word(memory::input_part(
                self.ctx,
                &arg,
                self.part.clone(),
                self.lane,
                self.tag,
            )?)),
            Some(ev) => memory::read_by(self.ctx, &arg, self.part.clone(), ev)?,
        }
        Ok(())
    }

    fn chain(&mut self, _: &'static FnDef) -> bool {
        true
    }

    fn array<T: DeviceType>(&mut self, arg: Arg<'_, T>) -> Result<()> {
        let all = 0..arg.shape().len();
        match self.done {
            None => {
                let ptr = if all.is_empty() {
                    0
                } else {
                    memory::input_part(self.ctx, &arg, all, self.lane, self.tag)?
                };
                let (rows, cols) = arg.shape().dims();
                self.args
                    .extend([ptr, rows as u64, cols as u64].map(InputArg::Word));
            }
            Some(ev) if !all.is_empty() => memory::read_by(self.ctx, &arg, all, ev)?,
            Some(_) => {}
        }
        Ok(())
    }

    fn uniform(&mut self, bytes: &[u8]) {
        if self.done.is_none() {
            self.args.push(InputArg::Bytes(bytes.to_vec()));
        }
    }
}

/// The device addresses of positions `part` of every input of a tuple, readable by work on
/// `lane` (what is missing is uploaded there).
pub(crate) fn stage_inputs<'a, I: ArgTuple<'a>>(
    ctx: &context::Ctx,
    inputs: &I,
    part: std::ops::Range<usize>,
    lane: context::Lane,
    tag: trace::Tag,
) -> Result<Vec<sys::CUdeviceptr>> {
    Ok(stage_operands(ctx, inputs, part, lane, tag)?
        .into_iter()
        .filter_map(|a| match a {
            InputArg::Word(w) => Some(w),
            InputArg::Bytes(_) => None,
        })
        .collect())
}

/// [`stage_inputs`] for a kernel that evaluates lazy inputs: every kernel argument of the
/// inputs, in order.
pub(crate) fn stage_operands<'a, I: ArgTuple<'a>>(
    ctx: &context::Ctx,
    inputs: &I,
    part: std::ops::Range<usize>,
    lane: context::Lane,
    tag: trace::Tag,
) -> Result<Vec<InputArg>> {
    let mut chunk = ChunkInputs {
        ctx,
        part,
        lane,
        tag,
        done: None,
        args: Vec::new(),
    };
    inputs.visit(&mut chunk)?;
    Ok(chunk.args)
}

/// Records that the work before `event` (on `lane`) read positions `part` of every input.
pub(crate) fn inputs_read<'a, I: ArgTuple<'a>>(
    ctx: &context::Ctx,
    inputs: &I,
    part: std::ops::Range<usize>,
    (lane, tag): (context::Lane, trace::Tag),
    event: &std::sync::Arc<memory::CuEvent>,
) -> Result<()> {
    inputs.visit(&mut ChunkInputs {
        ctx,
        part,
        lane,
        tag,
        done: Some(event),
        args: Vec::new(),
    })
}

/// Bytes of a tuple's inputs that are not on the device yet (`bytes`), and their whole size
/// (`total`): what a call's cost model needs.
pub(crate) struct MissingBytes<'c> {
    pub ctx: &'c context::Ctx,
    pub bytes: usize,
    pub total: usize,
}

impl ArgVisitor for MissingBytes<'_> {
    fn visit<T: DeviceType>(&mut self, arg: Arg<'_, T>) -> Result<()> {
        let n = arg.shape().len();
        self.bytes += memory::missing_bytes(self.ctx, &arg, 0..n);
        self.total += n * std::mem::size_of::<T>();
        Ok(())
    }
}

/// A tiled kernel's shape `(threads per block, values of T per thread, min blocks per SM)`:
/// from the tuning setting `tune` (for benchmarking; fixed into `cell` at first use), else
/// `default` (the same three, bytes per thread in the middle). Values per thread are 1 to
/// 32.
pub(crate) fn tuned_shape<T>(
    cell: &'static std::sync::OnceLock<(usize, usize, usize)>,
    tune: &crate::config::Setting<Option<crate::config::KernelShape>>,
    default: (usize, usize, usize),
) -> (usize, usize, usize) {
    let &(block, bytes, minb) = cell.get_or_init(|| {
        tune.fixed_value()
            .map(|s| (s.threads, s.bytes_per_thread, s.min_blocks_per_sm))
            .unwrap_or(default)
    });
    (
        block,
        (bytes / std::mem::size_of::<T>().max(1)).clamp(1, 32),
        minb,
    )
}

/// Blocks for a grid-stride kernel over `n` items with `threads` per block: enough to fill
/// the device, no more.
pub(crate) fn grid_for(ctx: &context::Ctx, n: usize, threads: usize, per_sm: usize) -> u32 {
    let needed = n.div_ceil(threads).max(1);
    needed.min(ctx.sms as usize * per_sm).max(1) as u32
}

impl Execute for Cuda {
    fn map<'a, 'o, S: MapSig<'a, 'o>>(&self, plan: plan::Map<'_, 'a, 'o, S>) -> Result<()> {
        let plan::Map {
            arrays,
            inputs,
            out,
            uniforms,
        } = plan;
        let shape = out.shape("Map")?;
        if let Some(parts) = self.device_parts(shape, &inputs)? {
            let mut out = out;
            return devices::in_turn(self.checked, &parts, |p| {
                let (one, r) = (self.part_at(p), p.range.clone());
                let out = out.rows(p.rows(shape));
                map::run::<S::F, S::I, _>(&one, arrays, inputs.sub(r), out, uniforms)
            });
        }
        map::run::<S::F, S::I, S::O>(self, arrays, inputs, out, uniforms)
    }

    fn map_array<'a, S: MapArraySig<'a>>(&self, plan: plan::MapArray<'_, 'a, S>) -> Result<()> {
        let plan::MapArray {
            array,
            inputs,
            out,
            uniforms,
        } = plan;
        let shape = out.shape();
        if let Some(parts) = self.device_parts(shape, &inputs)? {
            let mut out = out;
            return devices::in_turn(self.checked, &parts, |p| {
                let (one, r) = (self.part_at(p), p.range.clone());
                let out = out.rows(p.rows(shape));
                map_array::run::<S::F, S::I>(&one, array, inputs.sub(r), out, uniforms)
            });
        }
        map_array::run::<S::F, S::I>(self, array, inputs, out, uniforms)
    }

    fn reduce<S: FoldSig>(&self, plan: plan::Reduce<'_, S>) -> Result<S::T> {
        let plan::Reduce { input, start } = plan;
        if let Some(parts) = self.device_parts(input.shape(), &(input,))? {
            let one = self.on_one();
            let partials = devices::at_once(&parts, |p| {
                reduce::partial::<S::F, S::T>(&one, input.sub(p.range.clone()), None)
            })?;
            let total = devices::fold::<S::F, S::T>(partials)?;
            return host_call(<S::F as UserFn>::NAME, || {
                combine::<S::F, S::T>(start, total)
            });
        }
        let total = reduce::partial::<S::F, S::T>(self, input, None)?;
        host_call(<S::F as UserFn>::NAME, || {
            combine::<S::F, S::T>(start, total)
        })
    }

    fn reduce_axis<S: FoldSig>(&self, plan: plan::ReduceAxis<'_, S>) -> Result<()> {
        let plan::ReduceAxis { input, out, axis } = plan;
        reduce::run_axis::<S::F, S::T>(self, input, out, axis)
    }

    fn map_reduce<'a, S: MapReduceSig<'a>>(
        &self,
        plan: plan::MapReduce<'_, 'a, S>,
    ) -> Result<<S::M as UserFn>::Out> {
        let plan::MapReduce {
            arrays,
            inputs,
            shape,
            uniforms,
            start,
        } = plan;
        if let Some(parts) = self.device_parts(shape, &inputs)? {
            let partials = devices::at_once(&parts, |p| {
                let (one, r) = (self.part_at(p), p.range.clone());
                let part = shape.rows_part(p.rows(shape)).1;
                map_reduce::partial::<S::M, S::R, S::I>(
                    &one,
                    arrays,
                    inputs.sub(r),
                    part,
                    uniforms,
                    false,
                    None,
                )
            })?;
            let total = devices::fold::<S::R, _>(partials)?;
            return host_call(<S::R as UserFn>::NAME, || combine::<S::R, _>(start, total));
        }
        let total = map_reduce::partial::<S::M, S::R, S::I>(
            self, arrays, inputs, shape, uniforms, false, None,
        )?;
        host_call(<S::R as UserFn>::NAME, || combine::<S::R, _>(start, total))
    }

    fn scan<S: FoldSig>(&self, plan: plan::Scan<'_, S>) -> Result<()> {
        let plan::Scan {
            input,
            out,
            mode,
            start,
        } = plan;
        if let Some(parts) = self.device_parts(input.shape(), &(input,))? {
            let one = self.on_one();
            return devices::scan::<S::F, S::T>(&one, &parts, input, out, (mode, start));
        }
        scan::run::<S::F, S::T>(self, input, out, (mode, start), None)
    }

    fn map_overlap<F: WindowFn>(&self, plan: plan::MapOverlap<'_, F>) -> Result<()> {
        let plan::MapOverlap {
            input,
            out,
            stencil,
            axis,
            uniforms,
        } = plan;
        map_overlap::run_1d::<F>(self, input, out, stencil, axis, uniforms)
    }

    fn map_overlap_2d<F: Window2Fn>(&self, plan: plan::MapOverlap2d<'_, F>) -> Result<()> {
        let plan::MapOverlap2d {
            input,
            out,
            stencil,
            uniforms,
        } = plan;
        map_overlap::run_2d::<F>(self, input, out, stencil, uniforms)
    }

    fn map_pairs<S: PairsSig>(&self, plan: plan::MapPairs<'_, '_, S>) -> Result<()> {
        let plan::MapPairs {
            arrays,
            v,
            h,
            out,
            uniforms,
        } = plan;
        map_pairs::run::<S::F, S::A, S::B>(self, arrays, v, h, out, uniforms)
    }

    fn map_pairs_reduce<S: PairsReduceSig>(
        &self,
        plan: plan::MapPairsReduce<'_, '_, S>,
    ) -> Result<()> {
        let plan::MapPairsReduce {
            arrays,
            v,
            h,
            out,
            axis,
            uniforms,
        } = plan;
        map_pairs_reduce::run::<S::M, S::R, S::A, S::B>(self, arrays, v, h, out, axis, uniforms)
    }

    fn filter<S: FilterSig>(&self, plan: plan::Filter<'_, S>) -> Result<usize> {
        let plan::Filter {
            input,
            out,
            uniforms,
        } = plan;
        if let Some(parts) = self.device_parts(input.shape(), &(input,))? {
            return devices::filter::<S::F, S::T>(self, &parts, input, out, uniforms);
        }
        filter::run::<S::F, S::T>(self, input, out, uniforms)
    }

    fn sort<S: SortSig>(&self, plan: plan::Sort<'_, S>) -> Result<()> {
        let plan::Sort { keys, values } = plan;
        sort::run::<S::K, S::V>(self, keys, values)
    }

    /// One device slot: a Histogram split over several devices (`.devices(n)`) runs on
    /// the first, whose counts the others would only have to be added to.
    fn histogram<'a, S: HistogramSig<'a>>(
        &self,
        plan: plan::Histogram<'_, 'a, '_, S>,
    ) -> Result<()> {
        let plan::Histogram {
            arrays,
            inputs,
            shape,
            counts,
            uniforms,
        } = plan;
        histogram::run::<S::F, S::I, S::C>(self, arrays, inputs, shape, (counts, uniforms))
    }

    /// One device slot, as for Histogram.
    fn reduce_by_key<'a, S: ReduceByKeySig<'a>>(
        &self,
        plan: plan::ReduceByKey<'_, 'a, S>,
    ) -> Result<()> {
        let plan::ReduceByKey {
            arrays,
            inputs,
            shape,
            sums,
            uniforms,
        } = plan;
        let ops = (sums, uniforms);
        reduce_by_key::run::<S::F, S::R, S::I, S::V>(self, arrays, inputs, shape, ops)
    }

    fn map_overlap_3d<F: crate::userfn::Window3Fn>(
        &self,
        plan: plan::MapOverlap3d<'_, F>,
    ) -> Result<()> {
        let plan::MapOverlap3d {
            input,
            out,
            stencil,
            dims,
            uniforms,
        } = plan;
        map_overlap3::run_3d::<F>(self, input, out, stencil, dims, uniforms)
    }

    fn map_overlap_windows<F: crate::userfn::Overlap1Fn>(
        &self,
        plan: plan::MapOverlapWindows<'_, F>,
    ) -> Result<()> {
        let plan::MapOverlapWindows {
            inputs,
            arrays,
            out,
            stencil,
            axis,
            cells,
            uniforms,
        } = plan;
        let shape = inputs[0].shape();
        let job = Job::one_d(
            shape,
            stencil.radius,
            axis,
            stencil.edge,
            &cells,
            F::WINDOWS,
        );
        let ops = (&inputs[..], &arrays);
        map_overlap_windows::run::<F>(self, job, ops, out, stencil.pad, uniforms)
    }

    fn map_overlap_windows_2d<F: crate::userfn::Overlap2Fn>(
        &self,
        plan: plan::MapOverlapWindows<'_, F>,
    ) -> Result<()> {
        let plan::MapOverlapWindows {
            inputs,
            arrays,
            out,
            stencil,
            cells,
            uniforms,
            ..
        } = plan;
        let dims = inputs[0].shape().dims();
        let job = Job::two_d(dims, stencil.radius, stencil.edge, &cells, F::WINDOWS);
        let ops = (&inputs[..], &arrays);
        map_overlap_windows::run::<F>(self, job, ops, out, stencil.pad, uniforms)
    }

    fn map_reduce_fold<'a, S: MapReduceSig<'a>>(
        &self,
        plan: plan::MapReduce<'_, 'a, S>,
        fold: plan::Fold<'_, <S::M as UserFn>::Out>,
    ) -> Result<Option<<S::M as UserFn>::Out>> {
        // Split over device slots: each slot's part comes back to the host to be folded.
        if self.device_parts(plan.shape, &plan.inputs)?.is_some() {
            return super::fold_materialised(self, plan, fold);
        }
        let plan::MapReduce {
            arrays,
            inputs,
            shape,
            uniforms,
            start,
        } = plan;
        let plan::Fold { as_reduce, into } = fold;
        let mut into = into;
        let total = map_reduce::partial::<S::M, S::R, S::I>(
            self,
            arrays,
            inputs,
            shape,
            uniforms,
            as_reduce,
            into.as_mut().map(|out| (out, start)),
        )?;
        if into.is_some() {
            return Ok(None);
        }
        host_call(<S::R as UserFn>::NAME, || combine::<S::R, _>(start, total)).map(Some)
    }

    fn map_reduce_axis<'a, S: MapReduceSig<'a>>(
        &self,
        plan: plan::MapReduceAxis<'_, 'a, S>,
    ) -> Result<()> {
        let p = &plan.map_reduce;
        if plan.axis != plan::Axis::Rows && self.device_parts(p.shape, &p.inputs)?.is_some() {
            return super::axis_materialised(self, plan);
        }
        let plan::MapReduceAxis {
            map_reduce: p,
            out,
            axis,
        } = plan;
        map_reduce::axis::<S::M, S::R, S::I>(
            self,
            (p.arrays, p.inputs, p.shape, p.uniforms),
            out,
            axis,
        )
    }

    fn reduce_into<S: FoldSig>(
        &self,
        plan: plan::Reduce<'_, S>,
        mut out: crate::containers::ArgMut<'_, S::T>,
    ) -> Result<()> {
        if self
            .device_parts(plan.input.shape(), &(plan.input,))?
            .is_some()
        {
            return super::reduce_into_host(self, plan, out);
        }
        reduce::partial::<S::F, S::T>(self, plan.input, Some((&mut out, plan.start))).map(drop)
    }

    fn map_overlap_in_place<F: crate::userfn::Overlap2Fn>(
        &self,
        plan: plan::MapOverlapInPlace<'_, F>,
    ) -> Result<bool> {
        let plan::MapOverlapInPlace {
            m,
            arrays,
            stencil,
            parity,
            uniforms,
        } = plan;
        let dims = m.shape().dims();
        let job = Job::in_place_sweep(dims, stencil.radius, stencil.edge, parity);
        map_overlap_windows::run_in_place::<F>(self, job, &arrays, m, stencil.pad, uniforms)
    }

    fn wavefront<S: WavefrontSig>(&self, plan: plan::Wavefront<'_, '_, S>) -> Result<()> {
        let plan::Wavefront {
            arrays,
            m,
            uniforms,
        } = plan;
        wavefront::run::<S::F, S::T>(self, arrays, m, uniforms)
    }
}

#[cfg(test)]
mod tests;
