//! ReduceByKey on OpenCL (`opencl/reduce_by_key.cl`): each work-group groups every tile of
//! (key, value)s by key with an integer counting sort in local memory and merges each key's
//! run into the group's table (in local memory where it fits, else in a row of global
//! scratch); a second kernel merges the groups' tables into `sums`.

use std::fmt::Write as _;

use super::context::Ctx;
use super::program_cache::{program, ProgKey};
use super::{
    arrays, checked_call_expr, checked_source_head, cty, elem_params, fault, fault_param, launch,
    memory, push_uniforms, uniform_params, CallShape, Inputs, KArg, OpenCl,
};
use crate::backends::cpu::Outside;
use crate::backends::{BinaryFn, ContainerOps};
use crate::containers::{ArgMut, Shape};
use crate::plan::ArgTuple;
use crate::userfn::{ElementwiseFn, UserFn};
use crate::{DeviceType, Error, Result};

const TEMPLATE: &str = include_str!("../../../opencl/reduce_by_key.cl");

/// Bytes the global rows of the scratch form may take.
const GLOBAL_ROWS_BYTES: usize = 256 << 20;

/// How one call runs: work-group size, positions per work-item and tile, whether the table
/// is in local memory, work-groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub wg: usize,
    pub items: usize,
    pub local_table: bool,
    pub groups: usize,
}

impl Layout {
    /// Local memory of the tile (values, sub-run results, flags, scan) for values of
    /// `elem` bytes.
    fn tile_bytes(&self, elem: usize) -> usize {
        self.wg * self.items * elem + self.wg * (elem + 8)
    }

    /// Sub-runs per key: several work-items share each key's run when the keys are fewer
    /// than the work-items.
    pub(crate) fn parts(&self, keys: usize) -> usize {
        (self.wg / keys).max(1)
    }
}

/// The layout for `keys` values of `elem` bytes with `local_mem` bytes of local memory, work-
/// groups of at most `wg`, `units` compute units (`gpu`: many work-groups per unit).
pub(crate) fn layout(
    keys: usize,
    elem: usize,
    (local_mem, wg, units, gpu): (usize, usize, usize, bool),
    n: usize,
) -> Result<Layout> {
    let room = local_mem.saturating_sub(1024);
    let mut lay = Layout {
        wg: wg.clamp(1, 256),
        items: 4,
        local_table: false,
        groups: 1,
    };
    while lay.items > 1 && lay.tile_bytes(elem) > room / 2 {
        lay.items /= 2;
    }
    while lay.wg > 1 && lay.tile_bytes(elem) > room / 2 {
        lay.wg /= 2;
    }
    if lay.tile_bytes(elem) > room {
        return Err(Error::InvalidArgument(format!(
            "ReduceByKey on OpenCL: a value of {elem} bytes does not fit the device's \
             {local_mem} bytes of local memory; use the cpu, rayon or cuda backend"
        )));
    }
    lay.local_table = lay.tile_bytes(elem) + keys * (elem + 12) <= room;
    let per_unit = if gpu { (2048 / lay.wg).max(1) } else { 4 };
    let tiles = n.div_ceil(lay.wg * lay.items).max(1);
    lay.groups = (units.max(1) * per_unit).min(tiles);
    if !lay.local_table {
        lay.groups = lay
            .groups
            .min((GLOBAL_ROWS_BYTES / (keys * (elem + 12))).max(1));
    }
    Ok(lay)
}

fn source<F, R, V>(ctx: &Ctx, lay: &Layout, checked: bool) -> Result<String>
where
    F: ElementwiseFn + UserFn<Out = (u32, V)>,
    R: BinaryFn<V>,
    V: DeviceType,
{
    let def = F::definition();
    let (mut s, entries) = checked_source_head(ctx, "__global", &[def, R::definition()], checked)?;
    let shape = CallShape {
        pos: "p",
        base: "skel_base",
        array: "(ca0 + ca0_off)",
        window: ("", ""),
    };
    let _ = writeln!(s, "#define SKEL_V {}", cty::<V>());
    let _ = writeln!(s, "#define SKEL_KVT {}", cty::<F::Out>());
    let _ = writeln!(s, "#define SKEL_WG_RBK {}", lay.wg);
    let _ = writeln!(s, "#define SKEL_ITEMS {}", lay.items);
    let _ = writeln!(s, "#define SKEL_LOCAL_TABLE {}", u8::from(lay.local_table));
    let space = if lay.local_table {
        "__local"
    } else {
        "__global"
    };
    let _ = writeln!(s, "#define SKEL_TS {space}");
    let _ = writeln!(
        s,
        "#define SKEL_MERGE(a, b) {}({}(a), (b))",
        entries[1],
        fault::arg(checked)
    );
    fault::defines(&mut s, checked);
    let _ = writeln!(
        s,
        "#define SKEL_PARAMS {}{}{}{}",
        arrays::container_params(def, ""),
        elem_params(def, ""),
        uniform_params(def, ""),
        fault_param(checked)
    );
    let call = checked_call_expr(def, &entries[0], &shape, "", checked);
    let _ = writeln!(s, "#define SKEL_KV(p) {call}");
    s.push_str(TEMPLATE);
    Ok(s)
}

/// `sums[k]` = the merge of the values with key `k`, from `V::default()`.
pub(super) fn run<'a, 'c, F, R, I, V>(
    ctx: &Ctx,
    arrays: ContainerOps<'c, F>,
    inputs: I,
    shape: Shape,
    (sums, uniforms): (ArgMut<'_, V>, &F::Uniforms),
    exec: &OpenCl,
) -> Result<()>
where
    F: ElementwiseFn + UserFn<Out = (u32, V)>,
    R: BinaryFn<V>,
    I: ArgTuple<'a, Elems = F::Elems>,
    V: DeviceType + Default,
{
    let (checked, index_base) = (exec.checked, exec.index_base);
    let n = shape.len();
    let keys = sums.shape().len();
    let elem = std::mem::size_of::<V>();
    let device = (ctx.local_mem as usize, ctx.wg, ctx.compute_units, ctx.gpu);
    let lay = layout(keys, elem, device, n)?;
    // The layout's sizes depend only on the device and `V`; the table's place is the kind.
    let kind = match (lay.local_table, checked) {
        (true, false) => "reduce_by_key_local",
        (true, true) => "reduce_by_key_local_checked",
        (false, false) => "reduce_by_key_global",
        (false, true) => "reduce_by_key_global_checked",
    };
    let prog = program(ctx, ProgKey::of::<(F, R)>(kind), F::NAME, || {
        source::<F, R, V>(ctx, &lay, checked)
    })?;
    let rows = if n == 0 { 0 } else { lay.groups };
    let zero = KArg::value(&V::default());
    let tbl = memory::alloc_elems::<V>(ctx, (rows * keys).max(1))?;
    let seen = memory::alloc_elems::<u32>(ctx, (rows * keys).max(1))?;
    let outside = fault::record(ctx)?;
    let rec = fault::record_if(ctx, checked)?;
    let local = Some([lay.wg, 1, 1]);
    if n > 0 {
        let mut args = vec![
            KArg::U64(n as u64),
            KArg::U64(shape.cols().max(1) as u64),
            KArg::U64(index_base as u64),
            KArg::I32(keys as i32),
            KArg::I32(lay.parts(keys) as i32),
            KArg::value(&V::default()),
        ];
        if lay.local_table {
            args.extend([
                KArg::Local(keys * 4),
                KArg::Local(keys * 4),
                KArg::Local(keys * 4),
                KArg::Local(keys * elem),
            ]);
        } else {
            args.extend([
                KArg::Mem(memory::alloc_elems::<u32>(ctx, rows * keys)?),
                KArg::Mem(memory::alloc_elems::<u32>(ctx, rows * keys)?),
                KArg::Mem(seen.clone()),
                KArg::Mem(tbl.clone()),
            ]);
        }
        args.extend([
            KArg::Mem(tbl.clone()),
            KArg::Mem(seen.clone()),
            KArg::Mem(outside.clone()),
            KArg::Local(lay.wg * lay.items * elem),
            KArg::Local(lay.wg * elem),
            KArg::Local(lay.wg * 4),
            KArg::Local(lay.wg * 4),
        ]);
        arrays::push(ctx, &arrays, &mut args)?;
        let mut up = Inputs { ctx, args };
        inputs.visit(&mut up)?;
        let mut args = up.args;
        push_uniforms(uniforms, &mut args);
        args.extend(rec.iter().map(|r| KArg::Mem(r.clone())));
        let global = [lay.groups * lay.wg, 1, 1];
        launch(ctx, &prog, "skel_rbk", &args, 1, global, local)?;
    }
    if checked {
        if let Some(rec) = &rec {
            if let Some(err) = fault::read(ctx, rec, &[F::definition(), R::definition()])? {
                return Err(err);
            }
        }
        let words = memory::read_elems::<u32>(ctx, &outside, 2)?;
        let report = Outside {
            count: u64::from(words[0]),
            max: words[1],
        };
        report.check(F::NAME, "key", keys)?;
    }
    let out = memory::output(ctx, &sums, false)?;
    let mut args = vec![
        KArg::Mem(tbl),
        KArg::Mem(seen),
        KArg::I32(rows as i32),
        KArg::I32(keys as i32),
        zero,
        KArg::Mem(out),
        KArg::U64(sums.offset() as u64),
    ];
    args.extend(rec.iter().map(|r| KArg::Mem(r.clone())));
    let wg = lay.wg;
    let global = [keys.div_ceil(wg).min(1024) * wg, 1, 1];
    let ev = launch(ctx, &prog, "skel_rbk_sum", &args, 1, global, local)?;
    if let Some(rec) = &rec {
        if let Some(err) = fault::read(ctx, rec, &[F::definition(), R::definition()])? {
            memory::discarded(ctx, &sums, ev);
            return Err(err);
        }
    }
    memory::written(ctx, &sums, ev);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::layout;

    #[test]
    fn tiles_fit_local_memory_and_tables_move_to_global() {
        let nvidia = (49152, 256, 132, true);
        let k16 = layout(16, 12, nvidia, 1 << 24).unwrap();
        assert!(k16.local_table && k16.tile_bytes(12) + 16 * 24 <= 49152);
        assert_eq!(k16.parts(16), k16.wg / 16);
        let big = layout(100_000, 12, nvidia, 1 << 24).unwrap();
        assert!(!big.local_table && big.parts(100_000) == 1);
        // A 1 KiB value still gets a tile, with smaller work-groups.
        let wide = layout(16, 1024, nvidia, 1 << 20).unwrap();
        assert!(wide.tile_bytes(1024) <= 49152 && wide.wg >= 8, "{wide:?}");
        assert!(layout(16, 1 << 20, nvidia, 1).is_err());
    }
}
