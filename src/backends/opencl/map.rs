//! Map on OpenCL: one work-item per output element (`opencl/map.cl`), over a 2D range for
//! compute-bound 2D index maps.

use std::fmt::Write as _;

use ocl::core as cl;

use super::context::Ctx;
use super::program_cache::{self, program, ProgKey};
use super::{
    arrays, chain, checked_call_expr, checked_source_head, cty, fault, fault_param, launch, memory,
    push_uniforms, round_up, uniform_params, CallShape, Inputs, KArg, OpenCl,
};
use crate::backends::chain::Reads;
use crate::backends::ContainerOps;
use crate::codegen::cost::{classify, Cost};
use crate::codegen::ir::{FnDef, ParamKind};
use crate::codegen::{c_type, tuple_field, Dialect};
use crate::containers::{ArgMut, OutArgs, OutCollector};
use crate::plan::ArgTuple;
use crate::userfn::ElementwiseFn;
use crate::{DeviceType, Result};

const TEMPLATE: &str = include_str!("../../../opencl/map.cl");

/// The kernel source for `F` writing `outputs` buffers: one (the whole result, `out`), or one
/// per element of a tuple result (multi-output: element `k` goes to `skel_out<k>`).
fn source<F: ElementwiseFn>(
    ctx: &Ctx,
    outputs: usize,
    checked: bool,
    reads: &Reads,
) -> Result<String> {
    let def = F::definition();
    let defs = reads.with_defs(&[def]);
    let (mut s, entries) = checked_source_head(ctx, "__global", &defs, checked)?;
    let shape = CallShape {
        pos: "i",
        base: "skel_base",
        array: "(ca0 + ca0_off)",
        window: ("", ""),
    };
    let _ = writeln!(s, "#define SKEL_OUT_T {}", cty::<F::Out>());
    let mut outs = String::new();
    if outputs > 1 {
        let tys = F::outputs();
        let mut stores = String::new();
        for (k, t) in tys.iter().enumerate() {
            let _ = write!(
                outs,
                ", __global {}* skel_out{k}, ulong skel_out{k}_off",
                c_type(*t, Dialect::OpenCl)
            );
            let _ = write!(
                stores,
                " skel_out{k}[skel_out{k}_off + (i)] = skel_r.{};",
                tuple_field(k)
            );
        }
        let _ = writeln!(
            s,
            "#define SKEL_STORE(i, r) {{ SKEL_OUT_T skel_r = (r);{stores} }}"
        );
    }
    let _ = writeln!(
        s,
        "#define SKEL_PARAMS {outs}{}{}{}{}",
        arrays::container_params(def, ""),
        chain::fused_elem_params(def, reads),
        uniform_params(def, ""),
        fault_param(checked)
    );
    let call = checked_call_expr(def, &entries[0], &shape, "", checked);
    let call = chain::fuse_call(call, reads, &shape, (&defs, &entries), checked);
    if grid_2d(def) {
        let call2 = call
            .replace("(ulong)((skel_base + (i)) / cols)", "(ulong)(row)")
            .replace("(ulong)((skel_base + (i)) % cols)", "(ulong)(col)");
        let _ = writeln!(s, "#define SKEL_GRID2D 1");
        let _ = writeln!(s, "#define SKEL_CALL2(i, row, col) {call2}");
    }
    let _ = writeln!(s, "#define SKEL_CALL(i) {call}");
    s.push_str(TEMPLATE);
    Ok(s)
}

/// Whether `def` is a 2D index map, launched as a 2D range: each work-item's row and
/// column are its coordinates, where the flat range would divide per element.
fn grid_2d(def: &'static FnDef) -> bool {
    def.params.iter().any(|p| p.kind == ParamKind::IndexRow)
}

/// Work-items per row of a 2D index map's work-group, of `wg`: 16 for a compute-bound
/// function (compact patches, see `opencl/map.cl`); a memory-bound one reads and writes
/// along rows, so its work-group spans as much of a row as the row has.
fn grid_2d_width(def: &'static FnDef, wg: usize, cols: usize) -> usize {
    match classify(def) {
        Cost::Memory => cols.next_power_of_two().clamp(1, wg),
        _ => 16.min(wg),
    }
}

/// `out[i] = F(index(i), inputs[i], uniforms)`, `out` one buffer or one per element of a
/// tuple result.
pub(super) fn run<'a, 'c, 'o, F, I, O>(
    ctx: &Ctx,
    arrays: ContainerOps<'c, F>,
    inputs: I,
    out: O,
    uniforms: &F::Uniforms,
    exec: &OpenCl,
) -> Result<()>
where
    F: ElementwiseFn,
    I: ArgTuple<'a, Elems = F::Elems>,
    O: OutArgs<'o, Elems = F::Out>,
{
    let (checked, index_base) = (exec.checked, exec.index_base);
    let shape = out.shapes()[0];
    let n = shape.len();
    if n == 0 {
        return Ok(());
    }
    let kind = match (O::COUNT == 1, checked) {
        (true, false) => "map",
        (true, true) => "map_checked",
        (false, false) => "map_multi",
        (false, true) => "map_multi_checked",
    };
    let reads = Reads::of(&inputs)?;
    // A matrix or matrix-vector product runs tiled (the checked variant keeps this
    // launch, which reports the first bad index of each element; lazy inputs are read
    // only by the Map kernel).
    let mut nest =
        super::loopnest::nest::<F>(ctx).filter(|_| O::COUNT == 1 && !checked && !reads.fused());
    let tiled = nest.as_ref().map(|nest| {
        program(ctx, ProgKey::of::<F>("loopnest"), F::NAME, || {
            super::loopnest::source::<F>(ctx, nest)
        })
    });
    let prog = match tiled {
        Some(Ok(prog)) => prog,
        other => {
            // The Map kernel computes the same: a tiled kernel that does not build costs
            // speed, not the call (logged, so that a slow product can be explained).
            if let Some(Err(e)) = other {
                log::warn!(
                    target: "skel::jit",
                    "{}: the loop-nest kernel did not build, the Map kernel runs: {e}",
                    F::NAME
                );
            }
            nest = None;
            let key = ProgKey::of::<F>(kind).chained(reads.key());
            program(ctx, key, F::NAME, || {
                source::<F>(ctx, O::COUNT, checked, &reads)
            })?
        }
    };
    let mut outs = OutParts(Vec::with_capacity(O::COUNT));
    out.collect(&mut outs);
    let outs = outs.0;
    let mut mems = Vec::with_capacity(outs.len());
    for o in &outs {
        mems.push((o.mem(ctx)?, o.offset() as u64));
    }
    let cols = shape.cols().max(1);
    // Several outputs follow `skel_base` as `skel_out<k>, skel_out<k>_off`; `out` is then the
    // first of them again, unused.
    let mut args = vec![
        KArg::Mem(mems[0].0.clone()),
        KArg::U64(mems[0].1),
        KArg::U64(n as u64),
        KArg::U64(cols as u64),
        KArg::U64(index_base as u64),
    ];
    if mems.len() > 1 {
        for (mem, off) in mems {
            args.push(KArg::Mem(mem));
            args.push(KArg::U64(off));
        }
    }
    arrays::push(ctx, &arrays, &mut args)?;
    let mut up = Inputs { ctx, args };
    inputs.visit(&mut up)?;
    let mut args = up.args;
    push_uniforms(uniforms, &mut args);
    let rec = checked.then(|| fault::record(ctx)).transpose()?;
    args.extend(rec.iter().map(|r| KArg::Mem(r.clone())));
    // Smaller work-groups where the user function's local arrays need it (CPU devices); a
    // loop-nest program has no `skel_map` and its bodies no local arrays.
    let wg = match &nest {
        Some(_) => ctx.wg,
        None => program_cache::fit_work_group(ctx, &prog, "skel_map")?,
    };
    let (name, dims, global, local) = if let Some(nest) = &nest {
        let whole = index_base..index_base + n;
        let (which, global) = super::loopnest::launch_shape::<F>(ctx, nest, shape.dims(), whole);
        (which.name(), 2, global, [which.threads(), 1, 1])
    } else if grid_2d(F::definition()) {
        // `opencl/map.cl` takes the row of its first work-item as `skel_base / cols`: a
        // part must start at a whole row.
        debug_assert!(
            cols == 0 || index_base % cols == 0,
            "a 2D index map's part starts inside a row ({index_base} of {cols} columns)"
        );
        let wide = grid_2d_width(F::definition(), wg, cols);
        let tall = wg / wide;
        let rows = n.div_ceil(cols);
        (
            "skel_map",
            2,
            [round_up(cols, wide), round_up(rows, tall), 1],
            [wide, tall, 1],
        )
    } else {
        ("skel_map", 1, [round_up(n, wg), 1, 1], [wg, 1, 1])
    };
    let ev = launch(ctx, &prog, name, &args, dims, global, Some(local))?;
    if let Some(rec) = rec {
        let fault = fault::read(ctx, &rec, &reads.with_defs(&[F::definition()]));
        for o in &outs {
            match &fault {
                Ok(None) => o.written(ctx, ev.clone()),
                Ok(Some(_)) => o.discarded(ctx, ev.clone()),
                // the record could not be read: as after any failed call
                Err(_) => o.maybe_written(ctx, ev.clone()),
            }
        }
        return match fault? {
            Some(err) => Err(err),
            None => Ok(()),
        };
    }
    for o in &outs {
        o.written(ctx, ev.clone());
    }
    Ok(())
}

/// One buffer a Map writes, whatever its element type.
trait OutPart {
    fn offset(&self) -> usize;
    fn mem(&self, ctx: &Ctx) -> Result<cl::Mem>;
    fn written(&self, ctx: &Ctx, ev: cl::Event);
    fn discarded(&self, ctx: &Ctx, ev: cl::Event);
    fn maybe_written(&self, ctx: &Ctx, ev: cl::Event);
}

impl<T: DeviceType> OutPart for ArgMut<'_, T> {
    fn offset(&self) -> usize {
        ArgMut::offset(self)
    }
    fn mem(&self, ctx: &Ctx) -> Result<cl::Mem> {
        memory::output(ctx, self, false)
    }
    fn written(&self, ctx: &Ctx, ev: cl::Event) {
        memory::written(ctx, self, ev);
    }
    fn discarded(&self, ctx: &Ctx, ev: cl::Event) {
        memory::discarded(ctx, self, ev);
    }
    fn maybe_written(&self, ctx: &Ctx, ev: cl::Event) {
        memory::maybe_written(ctx, self, ev);
    }
}

/// The outputs of a call, in order.
struct OutParts<'o>(Vec<Box<dyn OutPart + 'o>>);

impl<'o> OutCollector<'o> for OutParts<'o> {
    fn push<T: DeviceType>(&mut self, arg: ArgMut<'o, T>) {
        self.0.push(Box::new(arg));
    }
}
