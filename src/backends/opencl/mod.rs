//! The OpenCL backend (feature `opencl`): every skeleton as real parallel kernels on one
//! OpenCL device, with the containers' device copies kept lazily coherent.
//!
//! - `context.rs`: device choice (`SKEL_OPENCL_DEVICE`), context and the in-order queue;
//! - `memory.rs`: per-container device buffers ([`memory::ClBuffer`]), uploads of missing
//!   ranges, results left on the device, transfer counters;
//! - `program_cache.rs`: programs built once per (skeleton, user function, types);
//! - one file per skeleton, each instantiating its template from `opencl/*.cl` with the
//!   OpenCL C that `#[userfn]`'s code generator emits.
//!
//! A kernel source is: `#define`s for the address spaces, the generated user functions
//! (prelude, structs, functions), then `#define`s naming the types and the call of the
//! user function, then the template.

mod arrays;
mod chain;
pub(super) mod context;
mod fault;
mod filter;
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
pub(crate) mod memory;
mod program_cache;
mod reduce;
mod reduce_by_key;
mod scan;
mod sort;
mod wavefront;

use std::fmt::Write as _;

use ocl::core as cl;

use super::overlap_windows::Job;
use super::Execute;
use crate::backends::args;
use crate::codegen::ir::{FnDef, ParamKind};
use crate::codegen::{c_type, device_source_checked, Dialect};
use crate::containers::host::as_bytes;
use crate::containers::{Arg, Shape};
use crate::plan::ArgVisitor;
use crate::plan::{
    self, FilterSig, FoldSig, HistogramSig, MapArraySig, MapReduceSig, MapSig, PairsReduceSig,
    PairsSig, ReduceByKeySig, SortSig, WavefrontSig,
};
use crate::userfn::{UniformTuple, UserFn, Window2Fn, WindowFn};
use crate::{DeviceType, Error, Result};

use context::{ctx, Ctx};
pub(crate) use context::{is_gpu, probe};

/// The OpenCL executor of one call.
pub(crate) struct OpenCl {
    /// Whether the call's kernels run the checked variant of the user functions (see
    /// `fault.rs`).
    pub(crate) checked: bool,
    /// Added to every `#[index]`: the global flat index of the call's first element when it
    /// is one part of a larger call (the block of a distributed call), else 0.
    pub(crate) index_base: usize,
}

/// Where container copies of the OpenCL backend live (for `Backend::Auto`).
pub(crate) fn location() -> crate::containers::Location {
    crate::containers::Location::Device(context::LOCATION_ID)
}

/// Waits until everything enqueued on the OpenCL queue is done (`Ok` if it never opened:
/// `skel::tune::synchronize` after CUDA work must not open the OpenCL device, which takes
/// 0.1 s or more and on a CPU device starts worker threads).
pub(crate) fn finish() -> Result<()> {
    match context::opened_ctx() {
        Some(ctx) => cl::finish(&ctx.queue).map_err(driver),
        None => Ok(()),
    }
}

/// An OpenCL error as a skel error: failed allocations (device or host) become
/// [`Error::OutOfMemory`], a buffer size the device refuses [`Error::InvalidArgument`],
/// everything else (`CL_OUT_OF_RESOURCES` included: on many drivers it reports a kernel
/// that could not be launched, not a lack of memory) [`Error::Driver`] with the driver's
/// message.
pub(crate) fn driver(e: cl::Error) -> Error {
    classify(
        e.api_status(),
        crate::DriverError::with_source(format!("OpenCL: {e}"), e),
    )
}

/// `Err` when [`crate::debug::inject_fault`] makes this operation fail: the error the
/// driver's status for such a failure gives, returned where the driver call is made.
pub(crate) fn injected(kind: crate::debug::Fault) -> Result<()> {
    if !crate::debug::fault_fires(kind) {
        return Ok(());
    }
    let status = match kind {
        crate::debug::Fault::Alloc => cl::Status::CL_MEM_OBJECT_ALLOCATION_FAILURE,
        _ => cl::Status::CL_OUT_OF_RESOURCES,
    };
    Err(classify(
        Some(status),
        format!("OpenCL: {status:?} (injected {kind:?} fault)").into(),
    ))
}

fn classify(status: Option<cl::Status>, msg: crate::DriverError) -> Error {
    use cl::Status;
    match status {
        Some(Status::CL_MEM_OBJECT_ALLOCATION_FAILURE | Status::CL_OUT_OF_HOST_MEMORY) => {
            Error::OutOfMemory(msg)
        }
        // The message names the limit; the driver's status code adds nothing to act on.
        Some(Status::CL_INVALID_BUFFER_SIZE) => Error::InvalidArgument(format!(
            "container larger than the device's max allocation \
             (CL_DEVICE_MAX_MEM_ALLOC_SIZE): {msg}"
        )),
        _ => Error::Driver(msg),
    }
}

/// `Ok` if `bytes` of `__local` memory fit the device; otherwise an
/// [`Error::InvalidArgument`] naming `what` needs them (rather than a build or launch
/// failure).
pub(crate) fn check_local(ctx: &Ctx, bytes: usize, what: &str) -> Result<()> {
    local_fits(bytes, ctx.local_mem, &ctx.name, what)
}

fn local_fits(bytes: usize, local_mem: u64, device: &str, what: &str) -> Result<()> {
    if bytes as u64 > local_mem {
        return Err(Error::InvalidArgument(format!(
            "{what} on OpenCL needs {bytes} bytes of local memory per work-group, the device \
             ({device}) has {local_mem}; use a smaller element type or another backend"
        )));
    }
    Ok(())
}

/// Bytes copied to / from the OpenCL device for a container, see [`crate::debug`].
pub(crate) fn transfers(st: &crate::containers::State) -> Option<(u64, u64)> {
    memory::transfers(st)
}

/// One kernel argument.
#[derive(Clone)]
pub(crate) enum KArg {
    Mem(cl::Mem),
    U64(u64),
    I64(i64),
    I32(i32),
    /// A value passed by value (a scalar or a `#[repr(C)]` struct), as its bytes.
    Bytes(Vec<u8>),
    /// `__local` memory of this many bytes.
    Local(usize),
}

impl KArg {
    /// A device value by value.
    pub(crate) fn value<T: DeviceType>(v: &T) -> KArg {
        KArg::Bytes(as_bytes(std::slice::from_ref(v)).to_vec())
    }
}

/// Appends one argument per uniform, in declaration order.
pub(crate) fn push_uniforms<U: UniformTuple>(u: &U, args: &mut Vec<KArg>) {
    u.for_each_bytes(&mut |b| args.push(KArg::Bytes(b.to_vec())));
}

/// Uploads each input operand and appends `(buffer, offset)` for it.
pub(crate) struct Inputs<'c> {
    pub(crate) ctx: &'c Ctx,
    pub(crate) args: Vec<KArg>,
}

impl ArgVisitor for Inputs<'_> {
    fn visit<T: DeviceType>(&mut self, arg: Arg<'_, T>) -> Result<()> {
        let mem = memory::input(self.ctx, &arg)?;
        self.args.push(KArg::Mem(mem));
        self.args.push(KArg::U64(arg.offset() as u64));
        Ok(())
    }

    // A lazy input's arguments, in the order of `chain::fused_elem_params`.
    fn chain(&mut self, _: &'static FnDef) -> bool {
        true
    }

    fn array<T: DeviceType>(&mut self, arg: Arg<'_, T>) -> Result<()> {
        let (rows, cols) = arg.shape().dims();
        self.args.push(KArg::Mem(memory::input(self.ctx, &arg)?));
        self.args.push(KArg::U64(arg.offset() as u64));
        self.args.push(KArg::U64(rows as u64));
        self.args.push(KArg::U64(cols as u64));
        Ok(())
    }

    fn uniform(&mut self, bytes: &[u8]) {
        self.args.push(KArg::Bytes(bytes.to_vec()));
    }
}

/// Enqueues `name` of `prog` over `global` work-items in groups of `local` (both with
/// `dims` dimensions, global already a multiple of local; `None`: the driver's choice),
/// returning its completion.
pub(crate) fn launch(
    ctx: &Ctx,
    prog: &cl::Program,
    name: &'static str,
    args: &[KArg],
    dims: u32,
    global: [usize; 3],
    local: Option<[usize; 3]>,
) -> Result<cl::Event> {
    let k = program_cache::kernel(prog, name)?;
    if let Some(l) = local {
        let want = l[0] * l[1] * l[2];
        let max = program_cache::max_work_group(ctx, prog, name, &k)?;
        if want > max {
            return Err(Error::Driver(
                format!(
                    "OpenCL: kernel {name} was built for work-groups of {want} work-items, the \
                 device ({}) can run it only with up to {max} (CL_KERNEL_WORK_GROUP_SIZE; \
                 too many registers, too much local memory, or local arrays of the user function \
                 larger than a work-group of this size can hold)",
                    ctx.name
                )
                .into(),
            ));
        }
    }
    for (i, a) in args.iter().enumerate() {
        let i = i as u32;
        let r = match a {
            KArg::Mem(m) => cl::set_kernel_arg(&k, i, cl::ArgVal::mem(m)),
            KArg::U64(v) => cl::set_kernel_arg(&k, i, cl::ArgVal::scalar(v)),
            KArg::I64(v) => cl::set_kernel_arg(&k, i, cl::ArgVal::scalar(v)),
            KArg::I32(v) => cl::set_kernel_arg(&k, i, cl::ArgVal::scalar(v)),
            // SAFETY: the pointer and size describe `b`, alive until set_kernel_arg returns.
            KArg::Bytes(b) => cl::set_kernel_arg(&k, i, unsafe {
                cl::ArgVal::from_raw(b.len(), b.as_ptr().cast(), false)
            }),
            // SAFETY: a __local argument: a size and a null pointer, as OpenCL specifies.
            KArg::Local(n) => cl::set_kernel_arg(&k, i, unsafe {
                cl::ArgVal::from_raw((*n).max(1), std::ptr::null(), false)
            }),
        };
        r.map_err(driver)?;
    }
    let mut ev = cl::Event::null();
    injected(crate::debug::Fault::Launch)?;
    // SAFETY: every argument is set above (by-value arguments are copied by
    // clSetKernelArg). Callers may drop their handles to temporary buffers right after
    // this returns: clReleaseMemObject defers the deletion of a memory object until the
    // commands enqueued that use it have finished, so the buffers outlive the kernel.
    unsafe {
        cl::enqueue_kernel(
            &ctx.queue,
            &k,
            dims,
            None,
            &global,
            local,
            None::<&cl::Event>,
            Some(&mut ev),
        )
    }
    .map_err(driver)?;
    Ok(ev)
}

/// `n` rounded up to a multiple of `m`.
pub(crate) fn round_up(n: usize, m: usize) -> usize {
    n.div_ceil(m) * m
}

/// The C name of `T` in OpenCL C.
pub(crate) fn cty<T: DeviceType>() -> String {
    c_type(T::TY, Dialect::OpenCl)
}

/// Start of a kernel source: address spaces, then the generated user functions, their
/// checked variant with `checked`. Returns the source so far and the C identifiers of
/// `defs`.
pub(crate) fn checked_source_head(
    ctx: &Ctx,
    window_space: &str,
    defs: &[&'static FnDef],
    checked: bool,
) -> Result<(String, Vec<String>)> {
    let gen = device_source_checked(defs, Dialect::OpenCl, checked)?;
    let mut s = String::new();
    let _ = writeln!(s, "// generated by skel for {}", ctx.name);
    if ctx.fp64 {
        s.push_str("#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n");
    }
    let _ = writeln!(s, "#define SKEL_ARRAY_SPACE __global");
    let _ = writeln!(s, "#define SKEL_WINDOW_SPACE {window_space}");
    s.push_str(&gen.source);
    s.push('\n');
    let _ = writeln!(s, "#define SKEL_WG {}", ctx.wg);
    Ok((s, gen.entries))
}

/// How the call of an element-wise user function gets its arguments.
pub(crate) struct CallShape<'s> {
    /// C expression of the flat position (e.g. `(i)`).
    pub(crate) pos: &'s str,
    /// C expression added to the position for an `#[index]` (the kernel's `skel_base`
    /// parameter where a call may be part of a larger one, else `0`).
    pub(crate) base: &'s str,
    /// C expression of the array pointer (MapArray).
    pub(crate) array: &'s str,
    /// C expression of a window pointer and, for 2D, its stride.
    pub(crate) window: (&'s str, &'s str),
}

/// `entry(args..)` for `def`: index from the position and `cols`, element `k` from
/// `in{k}[in{k}_off + pos]`, uniform `k` as `u{k}`; with `checked`, the checked variant's:
/// the fault record `skel_fault` goes first and every array its length.
pub(crate) fn checked_call_expr(
    def: &'static FnDef,
    entry: &str,
    c: &CallShape<'_>,
    prefix: &str,
    checked: bool,
) -> String {
    let (mut e, mut u, mut k) = (0, 0, 0);
    let single = args::single_array(def);
    let flat = format!("{} + ({})", c.base, c.pos);
    let args: Vec<String> = def
        .params
        .iter()
        .map(|p| match p.kind {
            ParamKind::Index => format!("(ulong)({} + ({}))", c.base, c.pos),
            ParamKind::IndexRow => args::index_part(&flat, "/", "ulong", "uint"),
            ParamKind::IndexCol => args::index_part(&flat, "%", "ulong", "uint"),
            ParamKind::Elem => {
                e += 1;
                format!("{prefix}in{0}[{prefix}in{0}_off + ({1})]", e - 1, c.pos)
            }
            ParamKind::Uniform => {
                u += 1;
                format!("{prefix}u{}", u - 1)
            }
            ParamKind::Array if single => {
                args::call_args(def, p, c.array, &format!("{prefix}ca0"), checked)
            }
            ParamKind::Array | ParamKind::Mat => {
                k += 1;
                let name = format!("{prefix}ca{}", k - 1);
                args::call_args(def, p, &format!("({name} + {name}_off)"), &name, checked)
            }
            // The radii follow, which the checked variant checks offsets against and the
            // unchecked one clamps them into (the stencil template defines SKEL_RR and
            // SKEL_RC; a 1D window's radius is the one that is not 0).
            ParamKind::Window => format!("{}, (long)(SKEL_RR + SKEL_RC)", c.window.0),
            ParamKind::Window2 => format!(
                "{}, {}, (long)(SKEL_RR), (long)(SKEL_RC)",
                c.window.0, c.window.1
            ),
            // A 3D template (`opencl/map_overlap3.cl`) defines the strides and radii.
            ParamKind::Window3 => format!(
                "{}, (long)(SKEL_S0), (long)(SKEL_S1), (long)(SKEL_R0), (long)(SKEL_R1), \
                 (long)(SKEL_R2)",
                c.window.0
            ),
        })
        .collect();
    let fault = checked.then(|| "skel_fault".to_string());
    let args: Vec<String> = fault.into_iter().chain(args).collect();
    format!("{entry}({})", args.join(", "))
}

/// The kernel parameter of the fault record in the checked variant, else nothing.
pub(crate) fn fault_param(checked: bool) -> &'static str {
    if checked {
        ", __global uint* skel_fault"
    } else {
        ""
    }
}

/// `, __global const A* in0, ulong in0_off, ..` for the element parameters of `def`.
pub(crate) fn elem_params(def: &FnDef, prefix: &str) -> String {
    let mut s = String::new();
    for (k, p) in def
        .params
        .iter()
        .filter(|p| p.kind == ParamKind::Elem)
        .enumerate()
    {
        let _ = write!(
            s,
            ", __global const {t}* {prefix}in{k}, ulong {prefix}in{k}_off",
            t = c_type(p.ty, Dialect::OpenCl)
        );
    }
    s
}

/// `, T0 u0, T1 u1, ..` for the uniform parameters of `def`.
pub(crate) fn uniform_params(def: &FnDef, prefix: &str) -> String {
    let mut s = String::new();
    for (k, p) in def
        .params
        .iter()
        .filter(|p| p.kind == ParamKind::Uniform)
        .enumerate()
    {
        let _ = write!(s, ", {} {prefix}u{k}", c_type(p.ty, Dialect::OpenCl));
    }
    s
}

/// `(rows, cols)` of a shape.
pub(crate) fn dims(shape: Shape) -> (usize, usize) {
    shape.dims()
}

impl Execute for OpenCl {
    fn map<'a, 'o, S: MapSig<'a, 'o>>(&self, plan: plan::Map<'_, 'a, 'o, S>) -> Result<()> {
        let plan::Map {
            arrays,
            inputs,
            out,
            uniforms,
        } = plan;
        map::run::<S::F, S::I, S::O>(ctx()?, arrays, inputs, out, uniforms, self)
    }

    fn map_array<'a, S: MapArraySig<'a>>(&self, plan: plan::MapArray<'_, 'a, S>) -> Result<()> {
        let plan::MapArray {
            array,
            inputs,
            out,
            uniforms,
        } = plan;
        map_array::run::<S::F, S::I>(ctx()?, array, inputs, out, uniforms, self)
    }

    fn reduce<S: FoldSig>(&self, plan: plan::Reduce<'_, S>) -> Result<S::T> {
        let plan::Reduce { input, start } = plan;
        reduce::run::<S::F, S::T>(ctx()?, input, start, self.checked)
    }

    fn reduce_axis<S: FoldSig>(&self, plan: plan::ReduceAxis<'_, S>) -> Result<()> {
        let plan::ReduceAxis { input, out, axis } = plan;
        reduce::run_axis::<S::F, S::T>(ctx()?, input, out, axis, self.checked)
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
        map_reduce::run::<S::M, S::R, S::I>(ctx()?, arrays, inputs, shape, uniforms, start, self)
    }

    fn scan<S: FoldSig>(&self, plan: plan::Scan<'_, S>) -> Result<()> {
        let plan::Scan {
            input,
            out,
            mode,
            start,
        } = plan;
        scan::run::<S::F, S::T>(ctx()?, input, out, mode, start, self.checked)
    }

    fn map_overlap<F: WindowFn>(&self, plan: plan::MapOverlap<'_, F>) -> Result<()> {
        let plan::MapOverlap {
            input,
            out,
            stencil,
            axis,
            uniforms,
        } = plan;
        map_overlap::run_1d::<F>(ctx()?, input, out, stencil, axis, uniforms, self.checked)
    }

    fn map_overlap_2d<F: Window2Fn>(&self, plan: plan::MapOverlap2d<'_, F>) -> Result<()> {
        let plan::MapOverlap2d {
            input,
            out,
            stencil,
            uniforms,
        } = plan;
        map_overlap::run_2d::<F>(ctx()?, input, out, stencil, uniforms, self.checked)
    }

    fn map_pairs<S: PairsSig>(&self, plan: plan::MapPairs<'_, '_, S>) -> Result<()> {
        let plan::MapPairs {
            arrays,
            v,
            h,
            out,
            uniforms,
        } = plan;
        map_pairs::run::<S::F, S::A, S::B>(ctx()?, arrays, v, h, out, uniforms, self.checked)
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
        let checked = self.checked;
        map_pairs_reduce::run::<S::M, S::R, S::A, S::B>(
            ctx()?,
            arrays,
            v,
            h,
            out,
            axis,
            uniforms,
            checked,
        )
    }

    fn filter<S: FilterSig>(&self, plan: plan::Filter<'_, S>) -> Result<usize> {
        let plan::Filter {
            input,
            out,
            uniforms,
        } = plan;
        filter::run::<S::F, S::T>(ctx()?, input, out, uniforms, self)
    }

    fn sort<S: SortSig>(&self, plan: plan::Sort<'_, S>) -> Result<()> {
        let plan::Sort { keys, values } = plan;
        sort::run::<S::K, S::V>(ctx()?, keys, values)
    }

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
        histogram::run::<S::F, S::I, S::C>(ctx()?, arrays, inputs, shape, (counts, uniforms), self)
    }

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
        let ctx = ctx()?;
        let ops = (sums, uniforms);
        reduce_by_key::run::<S::F, S::R, S::I, S::V>(ctx, arrays, inputs, shape, ops, self)
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
        map_overlap3::run_3d::<F>(ctx()?, input, out, stencil, dims, uniforms, self.checked)
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
        let (pad, checked) = (&stencil.pad, self.checked);
        map_overlap_windows::run::<F>(ctx()?, job, &inputs, &arrays, out, pad, uniforms, checked)
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
        let (pad, checked) = (&stencil.pad, self.checked);
        map_overlap_windows::run::<F>(ctx()?, job, &inputs, &arrays, out, pad, uniforms, checked)
    }

    fn map_reduce_fold<'a, S: MapReduceSig<'a>>(
        &self,
        plan: plan::MapReduce<'_, 'a, S>,
        fold: plan::Fold<'_, <S::M as UserFn>::Out>,
    ) -> Result<Option<<S::M as UserFn>::Out>> {
        // Reduce's grouping is MapReduce's here (`reduce.cl` either way, one plan per
        // element size), so `as_reduce` needs nothing else.
        let plan::MapReduce {
            arrays,
            inputs,
            shape,
            uniforms,
            start,
        } = plan;
        let mut into = fold.into;
        map_reduce::run_to::<S::M, S::R, S::I>(
            ctx()?,
            (arrays, inputs, shape, uniforms),
            start,
            into.as_mut(),
            self,
        )
    }

    fn map_reduce_axis<'a, S: MapReduceSig<'a>>(
        &self,
        plan: plan::MapReduceAxis<'_, 'a, S>,
    ) -> Result<()> {
        if plan.axis == plan::Axis::Rows {
            let p = &plan.map_reduce;
            let call = (p.arrays, p.inputs, p.shape, p.uniforms);
            if map_reduce::rows::<S::M, S::R, S::I>(ctx()?, call, &plan.out, self)? {
                return Ok(());
            }
        }
        // Narrow rows and columns: the map materialised, then `reduce_axis`.
        super::axis_materialised(self, plan)
    }

    fn reduce_into<S: FoldSig>(
        &self,
        plan: plan::Reduce<'_, S>,
        out: crate::containers::ArgMut<'_, S::T>,
    ) -> Result<()> {
        let plan::Reduce { input, start } = plan;
        reduce::run_into::<S::F, S::T>(ctx()?, input, start, out, self.checked)
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
        let (pad, checked) = (&stencil.pad, self.checked);
        map_overlap_windows::run_in_place::<F>(ctx()?, job, &arrays, m, pad, uniforms, checked)
    }

    fn wavefront<S: WavefrontSig>(&self, plan: plan::Wavefront<'_, '_, S>) -> Result<()> {
        let plan::Wavefront {
            arrays,
            m,
            uniforms,
        } = plan;
        wavefront::run::<S::F, S::T>(ctx()?, arrays, m, uniforms, self.checked)
    }
}

#[cfg(test)]
mod tests {
    use super::{classify, local_fits};
    use crate::Error;
    use ocl::core as cl;

    #[test]
    fn local_memory_overflow_is_an_invalid_argument() {
        assert!(local_fits(4096, 4096, "dev", "Scan").is_ok());
        match local_fits(4097, 4096, "dev", "Scan") {
            Err(Error::InvalidArgument(m)) => {
                assert!(
                    m.contains("Scan") && m.contains("4097") && m.contains("dev"),
                    "{m}"
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn driver_statuses_map_to_errors() {
        use cl::Status::*;
        let e = |s: cl::Status| classify(Some(s), "x".into());
        assert!(matches!(
            e(CL_MEM_OBJECT_ALLOCATION_FAILURE),
            Error::OutOfMemory(_)
        ));
        assert!(matches!(e(CL_OUT_OF_HOST_MEMORY), Error::OutOfMemory(_)));
        match e(CL_INVALID_BUFFER_SIZE) {
            Error::InvalidArgument(m) => assert!(m.contains("max allocation"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(e(CL_OUT_OF_RESOURCES), Error::Driver(_)));
        assert!(matches!(e(CL_INVALID_KERNEL_ARGS), Error::Driver(_)));
        assert!(matches!(classify(None, "x".into()), Error::Driver(_)));
    }
}
