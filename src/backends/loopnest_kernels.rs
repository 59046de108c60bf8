//! Kernel sources for reduction loop nests ([`crate::codegen::loopnest`]) on both GPU
//! backends: one template (`cuda/loopnest.cu`, which both compile) instantiated with the
//! user's accumulation split into init, step and bound functions, and the choice of kernel
//! and tile shape for a call.

use std::fmt::Write as _;

use crate::codegen::ir::{FnDef, ParamKind};
use crate::codegen::loopnest::{loop_nest, LoopNest, Nest, Pick};
use crate::codegen::{array_len_param_named, c_type, Dialect, Prim, Ty};

/// The template, the same text for CUDA and OpenCL C.
pub(crate) const TEMPLATE: &str = include_str!("../../cuda/loopnest.cu");

/// A loop-nest kernel and its tile shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// `skel_ln_gemm<tile>`: a `tile x tile` block of the output per block of threads.
    Gemm {
        /// Output rows and columns per block (128 or 64).
        tile: usize,
    },
    /// `skel_ln_gemv<band>`: a band of `band` rows (32, 16 or 8) per block of one warp,
    /// a row per thread.
    Gemv {
        /// Rows per block.
        band: usize,
    },
}

impl Kernel {
    /// The kernel's name in the module.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kernel::Gemm { tile: 128 } => "skel_ln_gemm128",
            Kernel::Gemm { .. } => "skel_ln_gemm64",
            Kernel::Gemv { band: 32 } => "skel_ln_gemv32",
            Kernel::Gemv { band: 16 } => "skel_ln_gemv16",
            Kernel::Gemv { .. } => "skel_ln_gemv8",
        }
    }

    /// Threads per block (work-items per work-group).
    pub(crate) fn threads(self) -> usize {
        match self {
            Kernel::Gemm { .. } => 256,
            Kernel::Gemv { .. } => 32,
        }
    }

    /// Blocks (x, y) of [`Kernel::threads`] threads for flat output positions `part` in rows
    /// of `cols`.
    pub(crate) fn grid(self, part: &std::ops::Range<usize>, cols: usize) -> (usize, usize) {
        match self {
            Kernel::Gemm { tile } => {
                let cols = cols.max(1);
                let rows = (part.end.max(1) - 1) / cols - part.start / cols + 1;
                (cols.div_ceil(tile), rows.div_ceil(tile))
            }
            Kernel::Gemv { band } => (part.len().div_ceil(band), 1),
        }
    }
}

/// Rows per block of the matrix-vector kernels (one warp each, a row per folding thread:
/// a row's sum is one sequential fold, so it is never split between threads), tallest
/// first, with the steps of a chunk for elements of at most 4 and of 8 bytes: a chunk is
/// 8 KiB of the matrix whatever the band.
const GEMV_BANDS: [(usize, usize, usize); 3] = [(32, 64, 32), (16, 128, 64), (8, 256, 128)];

/// Stages of the matrix-vector kernels' cp.async ring (CUDA sm_80+): three chunks in
/// flight per block while the fourth is folded, 36 KiB of shared memory a block.
const GEMV_STAGES: usize = 4;

/// Blocks per multiprocessor a band height must give before it is taken: with fewer, a
/// multiprocessor has too few bytes in flight (and the last wave leaves some idle).
const GEMV_BLOCKS_PER_SM: usize = 3;

/// The loop nest of `def` that the GPU kernels run: a recognised matrix product or
/// matrix-vector product over primitive types. The transposed matrix-vector product reads
/// a column per output, already coalesced one thread per output: it keeps the Map launch.
pub(crate) fn gpu_nest(def: &'static FnDef) -> Option<LoopNest> {
    let n = loop_nest(def)?;
    let prim = |t: Ty| matches!(t, Ty::Prim(_));
    let all_prim = prim(def.ret)
        && def
            .params
            .iter()
            .filter(|p| matches!(p.kind, ParamKind::Array | ParamKind::Mat))
            .all(|p| prim(p.ty));
    (all_prim && !matches!(n.nest, Nest::GemvT { .. })).then_some(n)
}

/// The kernel for an output of `rows x cols` elements of `elem` bytes on a device of `sms`
/// multiprocessors: 128 x 128 tiles where there are enough of them to fill the device
/// (and the elements are at most 4 bytes: larger ones would not fit the registers),
/// else 64 x 64; a matrix-vector product of `rows * cols` outputs takes the tallest band
/// that gives every multiprocessor `GEMV_BLOCKS_PER_SM` blocks (8 rows where none does).
pub(crate) fn choose(
    nest: &LoopNest,
    elem: usize,
    (rows, cols): (usize, usize),
    sms: usize,
) -> Kernel {
    match nest.nest {
        Nest::Gemm { .. } if elem <= 4 && rows.div_ceil(128) * cols.div_ceil(128) >= sms => {
            Kernel::Gemm { tile: 128 }
        }
        Nest::Gemm { .. } => Kernel::Gemm { tile: 64 },
        _ => {
            let outs = rows * cols;
            let band = GEMV_BANDS
                .iter()
                .map(|&(band, ..)| band)
                .find(|&band| outs / band >= GEMV_BLOCKS_PER_SM * sms)
                .unwrap_or(8);
            Kernel::Gemv { band }
        }
    }
}

/// The kernels a module for `nest` with elements of `elem` bytes defines (CUDA loads them
/// by name; an OpenCL program lists its own).
#[cfg(feature = "cuda")]
pub(crate) fn kernels(nest: &LoopNest, elem: usize) -> &'static [&'static str] {
    match nest.nest {
        Nest::Gemm { .. } if elem <= 4 => &["skel_ln_gemm128", "skel_ln_gemm64"],
        Nest::Gemm { .. } => &["skel_ln_gemm64"],
        _ => &["skel_ln_gemv32", "skel_ln_gemv16", "skel_ln_gemv8"],
    }
}

/// The size of the largest of the result and operand types: it sets the tile shapes.
pub(crate) fn elem_bytes(nest: &LoopNest, def: &'static FnDef) -> usize {
    let containers: Vec<_> = def
        .params
        .iter()
        .filter(|p| matches!(p.kind, ParamKind::Array | ParamKind::Mat))
        .collect();
    let (xk, yk) = match nest.nest {
        Nest::Gemm { a, b } => (a, b),
        Nest::Gemv { m, x } | Nest::GemvT { m, x } => (m, x),
    };
    def.ret
        .size()
        .max(containers[xk].ty.size())
        .max(containers[yk].ty.size())
}

/// How a backend names things in the template's defines.
pub(crate) struct Names<'s> {
    /// The C dialect.
    pub dialect: Dialect,
    /// The pointer expression of container `k` (e.g. `ca0` or `(ca0 + ca0_off)`).
    pub ptr: &'s dyn Fn(usize) -> String,
    /// The output's kernel parameters and its element `i`.
    pub out: (&'s str, &'s str),
    /// The kernel parameters after `skel_base` (containers, uniforms).
    pub params: String,
}

/// The defines and template that follow the emitted user functions `entries` (init, step,
/// bound of `nest`, in that order) for user function `def` with elements of `elem` bytes.
pub(crate) fn instantiate(
    nest: &LoopNest,
    def: &'static FnDef,
    entries: &[String],
    names: &Names<'_>,
) -> String {
    let ty = |t: Ty| c_type(t, names.dialect);
    let containers: Vec<_> = def
        .params
        .iter()
        .filter(|p| matches!(p.kind, ParamKind::Array | ParamKind::Mat))
        .collect();
    let uniforms: Vec<String> = def
        .params
        .iter()
        .filter(|p| p.kind == ParamKind::Uniform)
        .enumerate()
        .map(|(k, _)| format!("u{k}"))
        .collect();
    let (xk, yk) = match nest.nest {
        Nest::Gemm { a, b } => (a, b),
        Nest::Gemv { m, x } | Nest::GemvT { m, x } => (m, x),
    };
    let ptr = names.ptr;
    // Each read clamped as the unchecked user function clamps it; an empty container
    // (which no in-range index reads) gives 0 instead of a read past its end.
    let mat = |k: usize, t: &str, r: &str, c: &str| {
        format!(
            "(ca{k}_rows && ca{k}_cols ? {p}[skel_ln_idx({r}, ca{k}_rows) * ca{k}_cols + skel_ln_idx({c}, ca{k}_cols)] : ({t})0)",
            p = ptr(k)
        )
    };
    let ta = ty(containers[xk].ty);
    let tb = ty(containers[yk].ty);
    let read_b = match nest.nest {
        Nest::Gemm { .. } => mat(yk, &tb, "(l)", "(c)"),
        _ => format!(
            "(ca{yk}_cols ? {p}[skel_ln_idx((l), ca{yk}_cols)] : ({tb})0)",
            p = ptr(yk)
        ),
    };
    let bound_args: Vec<String> = nest
        .bound
        .params
        .iter()
        .map(|p| match p.kind {
            ParamKind::Uniform => {
                let k = def
                    .params
                    .iter()
                    .filter(|q| q.kind == ParamKind::Uniform)
                    .position(|q| q.name == p.name)
                    .unwrap_or(0);
                uniforms[k].clone()
            }
            _ => {
                let k = containers
                    .iter()
                    .position(|q| q.name == p.name)
                    .unwrap_or(0);
                match p.kind {
                    ParamKind::Mat => format!("{}, ca{k}_rows, ca{k}_cols", ptr(k)),
                    _ if array_len_param_named(nest.bound, p.name) => {
                        format!("{}, ca{k}_cols", ptr(k))
                    }
                    _ => ptr(k),
                }
            }
        })
        .collect();
    let more: String = uniforms.iter().map(|u| format!(", {u}")).collect();
    let mut s = String::new();
    let mut def_line = |name: &str, value: String| {
        let _ = writeln!(s, "#define {name} {value}");
    };
    def_line("SKEL_LN_T", ty(def.ret));
    def_line("SKEL_LN_TA", ta.clone());
    def_line("SKEL_LN_TB", tb.clone());
    def_line("SKEL_LN_OUT_PARAMS", names.out.0.to_string());
    def_line("SKEL_LN_OUT(i)", names.out.1.to_string());
    def_line("SKEL_LN_PARAMS", names.params.clone());
    def_line("SKEL_LN_A(r, l)", mat(xk, &ta, "(r)", "(l)"));
    def_line("SKEL_LN_B(l, c)", read_b);
    // The same reads where a whole tile is inside its container (no clamp to compute):
    // SKEL_LN_*_FITS(ends) says whether it is.
    def_line(
        "SKEL_LN_A_RAW(r, l)",
        format!("{}[(r) * ca{xk}_cols + (l)]", ptr(xk)),
    );
    def_line(
        "SKEL_LN_A_FITS(r_end, l_end)",
        format!("((r_end) <= ca{xk}_rows && (l_end) <= ca{xk}_cols)"),
    );
    match nest.nest {
        Nest::Gemm { .. } => {
            def_line(
                "SKEL_LN_B_RAW(l, c)",
                format!("{}[(l) * ca{yk}_cols + (c)]", ptr(yk)),
            );
            def_line(
                "SKEL_LN_B_FITS(l_end, c_end)",
                format!("((l_end) <= ca{yk}_rows && (c_end) <= ca{yk}_cols)"),
            );
        }
        _ => {
            def_line("SKEL_LN_B_RAW(l, c)", format!("{}[(l)]", ptr(yk)));
            def_line(
                "SKEL_LN_B_FITS(l_end, c_end)",
                format!("((l_end) <= ca{yk}_cols)"),
            );
        }
    }
    def_line(
        "SKEL_LN_K",
        format!("{}({})", entries[2], bound_args.join(", ")),
    );
    def_line(
        "SKEL_LN_INIT",
        format!("{}({})", entries[0], uniforms.join(", ")),
    );
    def_line(
        "SKEL_LN_STEP(acc, x, y)",
        format!("{}((acc), (x), (y){more})", entries[1]),
    );
    // A min/max step runs as a plain comparison and select (two instructions where the
    // exact NaN- and signed-zero-aware `min` takes a chain of them). It differs from the
    // exact step only while the accumulator is a NaN (a NaN start, or NaN terms from the
    // start) or a zero (the sign of a zero taken against a zero): a NaN stays a NaN and a
    // zero stays a zero or gives way to a strictly smaller (min) / larger (max) term,
    // which every form selects the same. So an output whose final value is neither NaN
    // nor zero is exact; the others (rare: SKEL_LN_REDO) are folded again with the exact
    // step. Integers select exactly: nothing to redo.
    let mut pick_fn = String::new();
    match nest.pick {
        Some((pick, _)) => {
            let t = ty(def.ret);
            let cmp = if pick == Pick::Min { "<" } else { ">" };
            pick_fn = format!(
                "SKEL_FN {t} skel_ln_pick({t} acc, {t} v) {{ return v {cmp} acc ? v : acc; }}\n"
            );
            def_line(
                "SKEL_LN_FSTEP(acc, x, y)",
                format!("skel_ln_pick((acc), {}((x), (y){more}))", entries[3]),
            );
            let redo = match def.ret {
                Ty::Prim(Prim::F32 | Prim::F64) => "((v) != (v) || (v) == (SKEL_LN_T)0)",
                _ => "0",
            };
            def_line("SKEL_LN_REDO(v)", redo.to_string());
        }
        None => {
            def_line(
                "SKEL_LN_FSTEP(acc, x, y)",
                "SKEL_LN_STEP(acc, x, y)".to_string(),
            );
            def_line("SKEL_LN_REDO(v)", "0".to_string());
        }
    }
    s.push_str(&pick_fn);
    let elem = elem_bytes(nest, def);
    let tiles: &[(usize, usize, usize)] = match nest.nest {
        // (tile, steps per stage, outputs per thread along each side)
        Nest::Gemm { .. } if elem <= 4 => &[(128, 8, 8), (64, 16, 4)],
        Nest::Gemm { .. } => &[(64, 16, 4)],
        _ => &[],
    };
    for &(tile, bk, t) in tiles {
        let _ = writeln!(
            s,
            "#define SKEL_LN_GEMM 1\n#define SKEL_LN_NAME skel_ln_gemm{tile}\n#define SKEL_BM {tile}\n\
             #define SKEL_BN {tile}\n#define SKEL_BK {bk}\n#define SKEL_TM {t}\n#define SKEL_TN {t}"
        );
        s.push_str(TEMPLATE);
        s.push_str(
            "\n#undef SKEL_LN_GEMM\n#undef SKEL_LN_NAME\n#undef SKEL_BM\n#undef SKEL_BN\n\
             #undef SKEL_BK\n#undef SKEL_TM\n#undef SKEL_TN\n",
        );
    }
    if tiles.is_empty() {
        let vw = 16 / containers[xk].ty.size().max(1);
        let _ = writeln!(
            s,
            "#define SKEL_LN_A_PTR {}\n#define SKEL_LN_A_ROWS ca{xk}_rows\n\
             #define SKEL_LN_A_COLS ca{xk}_cols\n#define SKEL_LN_X_PTR {}\n\
             #define SKEL_LN_X_LEN ca{yk}_cols\n#define SKEL_VW {vw}\n#define SKEL_NS {GEMV_STAGES}",
            ptr(xk),
            ptr(yk)
        );
        for (band, ch4, ch8) in GEMV_BANDS {
            let ch = if elem <= 4 { ch4 } else { ch8 };
            let _ = writeln!(
                s,
                "#define SKEL_LN_GEMV 1\n#define SKEL_LN_NAME skel_ln_gemv{band}\n\
                 #define SKEL_GR {band}\n#define SKEL_CH {ch}"
            );
            s.push_str(TEMPLATE);
            s.push_str(
                "\n#undef SKEL_LN_GEMV\n#undef SKEL_LN_NAME\n#undef SKEL_GR\n#undef SKEL_CH\n",
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::{choose, gpu_nest, Kernel};
    use crate::prelude::*;
    use crate::userfn::UserFn;

    #[userfn]
    fn mv(#[index] i: usize, a: Mat<f32>, x: &[f32]) -> f32 {
        let mut s = 0.0f32;
        for l in 0..a.cols() {
            s += a[(i, l)] * x[l];
        }
        s
    }

    /// The tallest band that still gives each of 132 multiprocessors three blocks: 32 rows
    /// at 16384 rows, 16 at 8192, 8 at 4096 and below (and for no rows at all); the band
    /// sets the grid.
    #[test]
    fn a_matrix_vector_band_fills_every_multiprocessor() {
        let n = gpu_nest(<mv as UserFn>::definition()).unwrap();
        let band = |rows: usize| match choose(&n, 4, (1, rows), 132) {
            Kernel::Gemv { band } => band,
            k => panic!("{k:?}"),
        };
        assert_eq!(band(16384), 32);
        assert_eq!(band(12672), 32);
        assert_eq!(band(12671), 16);
        assert_eq!(band(8192), 16);
        assert_eq!(band(4096), 8);
        assert_eq!(band(1), 8);
        assert_eq!(band(0), 8);
        assert_eq!(Kernel::Gemv { band: 16 }.grid(&(100..8292), 1), (512, 1));
        assert_eq!(Kernel::Gemv { band: 8 }.threads(), 32);
    }
}
