//! Map and index Map on CUDA: a grid-stride kernel (`cuda/map.cu`), one launch per
//! MultiStream chunk, in the launch shape the user function's cost class asks for
//! ([`Launch`]). MapArray (`map_array.rs`) runs through the same code.

use std::ops::Range;

use cudarc::driver::sys;

use super::context::Lane;
use super::context::{ctx, Ctx};
use super::fault::{Record, Settle, Written};
use super::memory::{self, CuEvent};
use super::module_cache::{launch, module, resident_blocks, Dims, KernelArgs};
use super::multistream::{self, Split, Work};
use super::trace::Tag;
use super::{
    arrays, assemble, chain, checked_call_expr, cty, grid_for, input_params, inputs_read,
    push_inputs, stage_operands, uniform_params, vector_defines, with_row_col, CallSite, Cuda,
    MissingBytes,
};
use crate::backends::chain::Reads;
use crate::backends::jit::ProgKey;
use crate::backends::loopnest_kernels::{gpu_nest, Kernel as NestKernel};
use crate::backends::ContainerOps;
use crate::codegen::cost::{classify, Cost};
use crate::codegen::ir::{FnDef, ParamKind};
use crate::codegen::{c_type, device_source_checked, tuple_field, DeviceSource, Dialect};
use crate::containers::{ArgMut, OutArgs, OutCollector, Shape};
use crate::plan::ArgTuple;
use crate::userfn::{ElementwiseFn, UniformTuple};
use crate::{DeviceType, Error, Result};

pub(crate) const TEMPLATE: &str = include_str!("../../../cuda/map.cu");

/// How a Map kernel spreads a chunk over threads: the `SKEL_LAUNCH` form of `cuda/map.cu`
/// that the user function's cost class ([`classify`]) asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Launch {
    /// Memory-bound: four consecutive elements per thread, 16-byte accesses.
    Vector,
    /// Compute-bound: one element per thread.
    One,
    /// Compute-bound 2D index map: one element per thread of a 2D grid.
    Grid2d,
    /// All-pairs MapArray through shared-memory tiles of this many bytes (0 from
    /// [`Launch::of`]: the MapArray backend decides whether the array's type allows it).
    Tiled(u32),
    /// A reduction loop nest's kernel (`cuda/loopnest.cu`, not a form of `cuda/map.cu`).
    Nest(NestKernel),
}

impl Launch {
    /// The launch shape for user function `def`; `SKEL_LAUNCH=memory|compute` forces the
    /// class of every function (for measuring the choice), `auto` or unset classifies.
    pub(crate) fn of(def: &'static FnDef) -> Result<Launch> {
        let class = match forced_class()? {
            Some(c) => c,
            None => classify(def),
        };
        let grid_2d = def.params.iter().any(|p| p.kind == ParamKind::IndexRow);
        Ok(match class {
            Cost::Memory => Launch::Vector,
            Cost::Compute | Cost::AllPairs if grid_2d => Launch::Grid2d,
            Cost::Compute => Launch::One,
            Cost::AllPairs => Launch::Tiled(0),
        })
    }

    /// The `SKEL_LAUNCH` value of `cuda/map.cu` that selects this form.
    fn form(self) -> u8 {
        match self {
            Launch::Vector => 0,
            Launch::One => 1,
            Launch::Grid2d => 2,
            Launch::Tiled(_) => 3,
            // Never a map.cu form: the loop-nest kernels have their own template.
            Launch::Nest(_) => 255,
        }
    }

    /// Grid and block for positions `part` of an operand with `cols` columns.
    fn dims(self, ctx: &Ctx, part: &std::ops::Range<usize>, cols: usize) -> Result<Dims> {
        let n = part.len();
        let too_large = || {
            Error::InvalidArgument(format!(
                "a Map over {n} elements in rows of {cols} needs more thread blocks than CUDA can launch"
            ))
        };
        Ok(match self {
            Launch::Nest(k) => {
                let (gx, gy) = k.grid(part, cols);
                Dims {
                    grid: (
                        u32::try_from(gx).map_err(|_| too_large())?,
                        u32::try_from(gy)
                            .ok()
                            .filter(|&y| y <= 65535)
                            .ok_or_else(too_large)?,
                        1,
                    ),
                    block: (k.threads() as u32, 1, 1),
                    shared: 0,
                }
            }
            Launch::Vector => Dims::line(grid_for(ctx, n, 256, 8), 256, 0),
            Launch::One | Launch::Tiled(_) => {
                // The largest block that still gives two blocks per multiprocessor, so that
                // a short call spreads over all of them.
                let block = [256, 128, 64]
                    .into_iter()
                    .find(|&b| n.div_ceil(b) >= 2 * ctx.sms as usize)
                    .unwrap_or(64);
                let grid = n.div_ceil(block).min(i32::MAX as usize) as u32;
                let shared = match self {
                    Launch::Tiled(bytes) => bytes,
                    _ => 0,
                };
                Dims::line(grid, block as u32, shared)
            }
            Launch::Grid2d => {
                let cols = cols.max(1);
                let rows = (part.end - 1) / cols - part.start / cols + 1;
                // 256 threads, 16 x 16 where the chunk is at least that wide and tall: a
                // warp covers 16 x 2 elements, a compact patch, so the elements whose loops
                // run longest (Mandelbrot's) wait for fewer others than in a row of 32.
                let wide = cols.next_power_of_two().min(16);
                let by = rows.next_power_of_two().min(256 / wide);
                let bx = 256 / by;
                let gx = u32::try_from(cols.div_ceil(bx)).map_err(|_| too_large())?;
                let gy = rows.div_ceil(by).min(65535) as u32;
                Dims {
                    grid: (gx, gy, 1),
                    block: (bx as u32, by as u32, 1),
                    shared: 0,
                }
            }
        })
    }
}

/// The class `SKEL_LAUNCH` forces, fixed for the process at the first use.
fn forced_class() -> Result<Option<Cost>> {
    use crate::config::Launch;
    Ok(match crate::config::LAUNCH.fix()? {
        Launch::Memory => Some(Cost::Memory),
        Launch::Compute => Some(Cost::Compute),
        Launch::Auto => None,
    })
}

/// The Map kernel source for user function `def` writing `out_ty`, with `array` (the
/// MapArray parameter, or nothing) before the inputs, in launch shape `launch`, reading
/// its inputs as `reads` has them (lazy inputs evaluated per element, `backends::chain`;
/// `user` then holds the chains' functions too, in the order of `reads.with_defs`).
pub(crate) fn map_source(
    user: &DeviceSource,
    def: &'static FnDef,
    (out_ty, array): (String, String),
    launch: Launch,
    (checked, reads): (bool, &Reads),
) -> String {
    let defs = reads.with_defs(&[def]);
    let fused = (&defs[..], &user.entries[..]);
    let site = CallSite {
        pos: "SKEL_I",
        index: "skel_base + (SKEL_I)",
        window: "",
        stride: "",
    };
    let call = checked_call_expr(user.entry(), def, &site, checked);
    let call = chain::fuse_call(&call, reads, &site, fused, checked);
    // The 2D grid knows each element's row and column: the call takes them as they are.
    let call2 = with_row_col(&call, site.index, ("(SKEL_ROW)", "(SKEL_COL)"));
    let mut defines = vec![
        ("SKEL_LAUNCH", launch.form().to_string()),
        ("SKEL_OUT_T", out_ty),
        (
            "SKEL_PARAMS",
            format!(
                "{array}{}{}{}",
                if reads.fused() {
                    chain::fused_input_params(reads)
                } else {
                    input_params(def)
                },
                uniform_params(def),
                if checked {
                    ", unsigned int* skel_fault"
                } else {
                    ""
                }
            ),
        ),
        ("SKEL_CALL(SKEL_I)", call),
        ("SKEL_CALL2(SKEL_I, SKEL_ROW, SKEL_COL)", call2),
    ];
    let mut vector = if reads.fused() {
        chain::vector_defines(def, reads, fused, checked)
    } else {
        vector_defines(user.entry(), def, checked)
    };
    // The vectorised loop keeps each element's row and column (`SKEL_RC`): a 2D index
    // (the consumer's or a lazy input's) takes them instead of a division and a remainder.
    let mut rc = false;
    for (name, value) in &mut vector {
        if *name == "SKEL_CALLV(SKEL_I, SKEL_V)" {
            let by_rc = with_row_col(
                value,
                "skel_base + (SKEL_I) + (SKEL_V)",
                ("(skel_r[SKEL_V])", "(skel_c[SKEL_V])"),
            );
            rc = by_rc != *value;
            *value = by_rc;
        }
    }
    defines.extend(vector);
    defines.push(("SKEL_RC", u8::from(rc).to_string()));
    assemble(&user.source, &defines, TEMPLATE)
}

/// The launch shape of a Map of `F` writing `outputs` containers.
fn map_launch<F: ElementwiseFn>(outputs: usize) -> Result<Launch> {
    Ok(match Launch::of(F::definition())? {
        // Several outputs of different types cannot be stored as one vector of four, so
        // memory-bound functions run one element per thread too.
        Launch::Vector if outputs > 1 => Launch::One,
        // Tiles are MapArray's: a loop over a container argument runs untiled.
        Launch::Tiled(_) => Launch::One,
        other => other,
    })
}

/// The kernel source for `F`, writing `outputs` containers: one (the whole result), or one
/// per element of a tuple result (multi-output: element `k` goes to `skel_out<k>`). The
/// container arguments come first among the kernel's parameters after the outputs.
#[cfg(test)]
pub(crate) fn source<F: ElementwiseFn>(outputs: usize, checked: bool) -> Result<String> {
    fused_source::<F>(outputs, checked, &Reads::default())
}

/// [`source`] for inputs read as `reads` has them (lazy inputs evaluated per element).
pub(crate) fn fused_source<F: ElementwiseFn>(
    outputs: usize,
    checked: bool,
    reads: &Reads,
) -> Result<String> {
    let def = F::definition();
    let user = device_source_checked(&reads.with_defs(&[def]), Dialect::Cuda, checked)?;
    let launch = map_launch::<F>(outputs)?;
    let arrays = arrays::container_params(def);
    if outputs == 1 {
        return Ok(map_source(
            &user,
            def,
            (cty::<F::Out>(), arrays),
            launch,
            (checked, reads),
        ));
    }
    let tys = F::outputs();
    let params: String = tys
        .iter()
        .enumerate()
        .map(|(k, t)| format!(", {}* __restrict__ skel_out{k}", c_type(*t, Dialect::Cuda)))
        .collect();
    let stores: String = (0..tys.len())
        .map(|k| format!(" skel_out{k}[i] = skel_r.{};", tuple_field(k)))
        .collect();
    Ok(format!(
        "#define SKEL_STORE(i, r) {{ const SKEL_OUT_T skel_r = (r);{stores} }}\n{}",
        map_source(
            &user,
            def,
            (cty::<F::Out>(), params + &arrays),
            launch,
            (checked, reads)
        )
    ))
}

/// `out[i] = F(index(i), inputs[i], uniforms)`, `out` one container or one per element of a
/// tuple result.
pub(crate) fn run<'a, 'c, 'o, F, I, O>(
    exec: &Cuda,
    arrays: ContainerOps<'c, F>,
    inputs: I,
    out: O,
    uniforms: &F::Uniforms,
) -> Result<()>
where
    F: ElementwiseFn,
    I: ArgTuple<'a, Elems = F::Elems>,
    O: OutArgs<'o, Elems = F::Out>,
{
    let ctx = ctx()?;
    if out.shapes()[0].is_empty() {
        return Ok(());
    }
    let checked = exec.checked;
    let reads = Reads::of(&inputs)?;
    // A matrix or matrix-vector product runs tiled (the checked variant keeps this
    // launch, which reports the first bad index of each element; lazy inputs are read
    // only by the Map kernel).
    let tiled = O::COUNT == 1 && !checked && !reads.fused();
    if let Some(nest) = gpu_nest(F::definition()).filter(|_| tiled) {
        match super::loopnest::build::<F>(ctx, &nest) {
            Ok(m) => {
                let nest = (nest, &*m);
                return super::loopnest::run::<F, I, O>(
                    exec, ctx, nest, arrays, inputs, out, uniforms,
                );
            }
            // The Map kernel computes the same: a tiled kernel that does not build costs
            // speed, not the call (logged, so that a slow product can be explained).
            Err(e) => log::warn!(
                target: "skel::jit",
                "{}: the loop-nest kernel did not build, the Map kernel runs: {e}",
                F::NAME
            ),
        }
    }
    let (kind, key) = match (O::COUNT == 1, checked) {
        (true, false) => ("map", "map"),
        (true, true) => ("map", "map_checked"),
        (false, false) => ("map_multi", "map_multi"),
        (false, true) => ("map_multi", "map_multi_checked"),
    };
    let m = module(
        ctx,
        ProgKey::of::<F>(key, ctx.ordinal).chained(reads.key()),
        kind,
        &["skel_map"],
        || fused_source::<F>(O::COUNT, checked, &reads),
    )?;
    let kernel = Kernel {
        func: m.func("skel_map")?,
        launch: map_launch::<F>(O::COUNT)?,
        defs: reads.with_defs(&[F::definition()]),
        checked,
    };
    chunked(
        exec,
        ctx,
        "map",
        kernel,
        ((&arrays, true), &inputs),
        out,
        uniforms,
    )
}

/// A Map kernel: the function, its launch shape, the user function it calls and whether
/// it is the checked variant (whose fault record the call reads with the result).
pub(crate) struct Kernel {
    pub(crate) func: sys::CUfunction,
    pub(crate) launch: Launch,
    /// The user functions of its source, in order (the consumer's first, then those of its
    /// lazy inputs): a checked kernel's fault names one of them.
    pub(crate) defs: Vec<&'static FnDef>,
    pub(crate) checked: bool,
}

type CuPtr = sys::CUdeviceptr;

/// One container a call writes, whatever its element type: what [`chunked`] does with
/// each output.
trait OutPart: Settle {
    fn shape(&self) -> Shape;
    fn elem_bytes(&self) -> usize;
    fn eager(&self, choice: Option<bool>) -> bool;
    fn busy(&self, ctx: &Ctx) -> Option<usize>;
    fn part_ptr(&self, ctx: &Ctx, part: Range<usize>, at: (Lane, Tag)) -> Result<CuPtr>;
    fn download(&self, ctx: &Ctx, split: &Split) -> Result<()>;
}

impl<T: DeviceType> OutPart for ArgMut<'_, T> {
    fn shape(&self) -> Shape {
        ArgMut::shape(self)
    }
    fn elem_bytes(&self) -> usize {
        std::mem::size_of::<T>()
    }
    fn eager(&self, choice: Option<bool>) -> bool {
        memory::eager_download(self, choice)
    }
    fn busy(&self, ctx: &Ctx) -> Option<usize> {
        memory::busy_lane(ctx, &self.lock())
    }
    fn part_ptr(&self, ctx: &Ctx, part: Range<usize>, (lane, tag): (Lane, Tag)) -> Result<CuPtr> {
        memory::output_part(ctx, self, part, false, lane, tag)
    }
    fn download(&self, ctx: &Ctx, split: &Split) -> Result<()> {
        split.download(ctx, self, |part| part)
    }
}

/// The outputs of a call, in order.
struct OutParts<'o>(Vec<Box<dyn OutPart + 'o>>);

impl<'o> OutCollector<'o> for OutParts<'o> {
    fn push<T: DeviceType>(&mut self, arg: ArgMut<'o, T>) {
        self.0.push(Box::new(arg));
    }
}

/// An element-wise call split into chunks: per chunk, its part of every input (and the
/// whole of every container argument in `arrays`, uploaded once) is made readable on its
/// stream, then its kernel writes its part of every output, then, for each output the host
/// will read, its part is copied back. One output is the kernel's `out`; several (a
/// multi-output Map) follow `skel_base` as `skel_out0..`, and `out` is null. The containers
/// follow, as pointers, each with its rows and columns when `dims` (MapArray passes only its
/// array's pointer), then the inputs and uniforms.
pub(crate) fn chunked<'a, 'c, 'o, I: ArgTuple<'a>, C: ArgTuple<'c>, O: OutArgs<'o>>(
    exec: &Cuda,
    ctx: &Ctx,
    skeleton: &'static str,
    kernel: Kernel,
    ((arrays, dims), inputs): ((&C, bool), &I),
    out: O,
    uniforms: &impl UniformTuple,
) -> Result<()> {
    let mut outs = OutParts(Vec::with_capacity(O::COUNT));
    out.collect(&mut outs);
    let outs = outs.0;
    let out_shape = outs[0].shape();
    let n = out_shape.len();
    let eager: Vec<bool> = outs.iter().map(|o| o.eager(exec.download)).collect();
    let mut missing = MissingBytes {
        ctx,
        bytes: 0,
        total: 0,
    };
    inputs.visit(&mut missing)?;
    arrays.visit(&mut missing)?;
    let bytes: Vec<usize> = outs.iter().map(|o| n * o.elem_bytes()).collect();
    let work = Work {
        up: missing.bytes,
        kernel: missing.total + bytes.iter().sum::<usize>(),
        down: bytes
            .iter()
            .zip(&eager)
            .filter(|(_, e)| **e)
            .map(|(b, _)| b)
            .sum(),
        follows: outs.iter().find_map(|o| o.busy(ctx)),
    };
    // Chunk boundaries at multiples of 4 keep every chunk's pointers 16-byte aligned for
    // the vectorised loads.
    let split = multistream::split(
        ctx,
        skeleton,
        n,
        4,
        multistream::forced(exec.streams)?,
        work,
    )?;
    let lanes: Vec<Lane> = split.parts().map(|(_, _, lane, _)| lane).collect();
    let fault = Record::new(kernel.checked, &lanes)?;
    let mut staged = Vec::with_capacity(split.len());
    for (_, part, lane, tag) in split.parts() {
        let whole = arrays::stage(ctx, arrays, lane, tag)?;
        staged.push((whole, stage_operands(ctx, inputs, part, lane, tag)?));
    }
    // Every output's chunks become results once the record (checked) says there was no
    // fault; chunks issued before a failure are recorded as written (`fault::Written`).
    let mut written = Written::new(ctx, outs.iter().map(|o| &**o).collect());
    for ((_, part, lane, tag), (whole, ptrs)) in split.parts().zip(staged) {
        let mut dsts = Vec::with_capacity(outs.len());
        for o in &outs {
            dsts.push(o.part_ptr(ctx, part.clone(), (lane, tag))?);
        }
        let mut args = KernelArgs::default();
        args.ptr(if dsts.len() == 1 { dsts[0] } else { 0 })
            .u64(part.len() as u64)
            .u64(out_shape.cols() as u64)
            .u64((exec.index_base + part.start) as u64);
        if dsts.len() > 1 {
            for &d in &dsts {
                args.ptr(d);
            }
        }
        arrays::push(&mut args, &whole, dims);
        push_inputs(&mut args, &ptrs);
        args.uniforms(uniforms);
        if let Some(rec) = &fault {
            args.ptr(rec.ptr());
        }
        // A 2D index map's grid covers the rows of the part's global positions.
        let global = exec.index_base + part.start..exec.index_base + part.end;
        let mut grid = kernel.launch.dims(ctx, &global, out_shape.cols())?;
        if kernel.launch == Launch::Vector {
            // The grid-stride loop in one wave: as many blocks as the device holds.
            let per_sm = resident_blocks(kernel.func, grid.block.0, grid.shared)?;
            let fits = ctx.sms.saturating_mul(per_sm);
            grid.grid.0 = grid.grid.0.min(fits.max(1));
        }
        launch(ctx, lane, tag, kernel.func, grid, &mut args)?;
        let ev = CuEvent::record(lane)?;
        arrays::read(ctx, arrays, (lane, tag), &ev)?;
        inputs_read(ctx, inputs, part.clone(), (lane, tag), &ev)?;
        written.push(part, ev);
    }
    written.settle(fault.as_ref(), &kernel.defs)?;
    for (o, _) in outs.iter().zip(&eager).filter(|(_, e)| **e) {
        o.download(ctx, &split)?;
    }
    Ok(())
}
