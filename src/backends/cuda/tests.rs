//! Checks that need no GPU: every kernel template, completed for a few user functions,
//! is valid C++ (compiled with the host's `g++` against a stub of the CUDA built-ins, when
//! `g++` exists). NVRTC itself runs only on the GPU machine: the compile-failure test
//! hands it broken source there (and prints `skipped: no cuda device` elsewhere).

use std::path::PathBuf;
use std::process::Command;

use super::{
    filter, histogram, map, map_array, map_overlap, map_reduce, module_cache, reduce,
    reduce_by_key, scan,
};
use crate::backends::chain::{Node, Read, Reads};
use crate::backends::jit::ProgKey;
use crate::backends::stencil_tile::Plan;
use crate::backends::Stencil;
use crate::containers::Shape;
use crate::plan::Axis;
use crate::prelude::*;

#[userfn]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

#[userfn]
fn addi(a: i64, b: i64) -> i64 {
    a + b
}

#[userfn]
fn add32(a: i32, b: i32) -> i32 {
    a + b
}

#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
struct Aff {
    m: i64,
    c: i64,
}

#[userfn]
fn compose(a: Aff, b: Aff) -> Aff {
    Aff {
        m: a.m * b.m,
        c: a.c * b.m + b.c,
    }
}

#[userfn]
fn small(a: u8, b: u8) -> u8 {
    a.max(b)
}

#[userfn]
fn where2d(#[index] (row, col): (usize, usize), x: i32, #[uniform] k: i32) -> i32 {
    (row * 1000 + col) as i32 + x * k
}

#[userfn]
fn lookup(#[index] i: usize, table: &[i64], x: u32, #[uniform] o: i64) -> i64 {
    table[x as usize] + table[i % 3] + o
}

#[userfn]
fn blur(w: Window<f32>, #[uniform] s: f32) -> f32 {
    (w[-1] + w[0] + w[1]) * s
}

#[userfn]
fn lap(w: Window2<f64>) -> f64 {
    w[(-1, 0)] + w[(1, 0)] + w[(0, -1)] + w[(0, 1)] - 4.0 * w[(0, 0)]
}

#[userfn]
fn multiple(x: u32, #[uniform] t: u32) -> bool {
    x % t == 0
}

#[userfn]
fn early(#[index] i: usize, a: Aff) -> bool {
    a.m > 0 && i < 1000
}

#[userfn]
fn byte_bin(x: u8) -> u32 {
    x as u32
}

#[userfn]
fn cell_bin(#[index] (row, col): (usize, usize), edges: &[f32], x: f32, #[uniform] k: u32) -> u32 {
    let mut b = (row + col) as u32 % k;
    for e in 0..edges.len() {
        if x >= edges[e] {
            b += 1;
        }
    }
    b
}

#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
struct Tally {
    sum: f32,
    count: u32,
}

#[userfn]
fn tally_of(#[index] i: usize, edges: &[f32], x: f32, #[uniform] k: u32) -> (u32, Tally) {
    let mut b = i as u32 % k;
    for e in 0..edges.len() {
        if x >= edges[e] {
            b += 1;
        }
    }
    (b, Tally { sum: x, count: 1 })
}

#[userfn]
fn merge_tally(a: Tally, b: Tally) -> Tally {
    Tally {
        sum: a.sum + b.sum,
        count: a.count + b.count,
    }
}

const STUB: &str = r#"
#include <cmath>
#include <cstddef>
#include <algorithm>
using std::min; using std::max;
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __restrict__
#define __launch_bounds__(...)
#define __align__(x) __attribute__((aligned(x)))
struct skel_dim3 { unsigned x, y, z; };
extern skel_dim3 threadIdx, blockIdx, blockDim, gridDim;
struct uint4 { unsigned x, y, z, w; };
template <typename T> T __shfl_down_sync(unsigned, T v, unsigned) { return v; }
template <typename T> T __shfl_up_sync(unsigned, T v, unsigned) { return v; }
template <typename T> T __ldg(const T* p) { return *p; }
template <typename T> T __ldcg(const T* p) { return *p; }
template <typename T> void __stcg(T* p, T v) { *p = v; }
unsigned atomicAdd(unsigned* p, unsigned v);
unsigned atomicMax(unsigned* p, unsigned v);
unsigned atomicCAS(unsigned* p, unsigned compare, unsigned value);
void __syncthreads(); void __threadfence(); void __syncwarp();
unsigned __ballot_sync(unsigned, int);
template <typename T> T __shfl_sync(unsigned, T v, int) { return v; }
int __popc(unsigned);
int __clz(unsigned);
"#;

fn check(name: &str, src: &str) {
    let dir = std::env::temp_dir().join(format!("skel-cuda-src-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file: PathBuf = dir.join(format!("{name}.cpp"));
    // `extern __shared__` becomes `extern static`: drop the storage class for the stub.
    let body = src.replace("extern __shared__", "extern");
    std::fs::write(&file, format!("{STUB}\n{body}")).unwrap();
    let out = match Command::new("g++")
        .args(["-std=c++17", "-fsyntax-only", "-Wno-attributes"])
        .arg(&file)
        .output()
    {
        Ok(o) => o,
        Err(_) => {
            println!("skipped: no g++ to check {name}");
            return;
        }
    };
    assert!(
        out.status.success(),
        "{name} does not compile:\n{}\n--- source ---\n{src}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A lazy input of `def` over `inputs`.
fn chain(def: &'static crate::codegen::ir::FnDef, inputs: Vec<Read>) -> Read {
    Read::Chain(Node { def, inputs })
}

#[test]
fn fused_lazy_inputs_are_valid_cpp() {
    use crate::codegen::{Prim, Ty};
    use crate::userfn::UserFn;
    let f32t = Ty::Prim(Prim::F32);
    // add(add(add(x, y), z), w): a chain of two, nested, and a leaf; the vectorised form.
    let inner = chain(add::definition(), vec![Read::Leaf(f32t), Read::Leaf(f32t)]);
    let outer = chain(add::definition(), vec![inner, Read::Leaf(f32t)]);
    let nested = Reads(vec![outer, Read::Leaf(f32t)]);
    // Two chains with a container argument, a uniform and `#[index]` each.
    let u32t = Ty::Prim(Prim::U32);
    let looked = Reads(vec![
        chain(lookup::definition(), vec![Read::Leaf(u32t)]),
        chain(lookup::definition(), vec![Read::Leaf(u32t)]),
    ]);
    // A 2D index chain under a MapReduce.
    let i32t = Ty::Prim(Prim::I32);
    let grid = Reads(vec![
        chain(where2d::definition(), vec![Read::Leaf(i32t)]),
        Read::Leaf(i32t),
    ]);
    for c in [false, true] {
        let name = |n: &str| format!("{n}{}", if c { "_checked" } else { "" });
        let src = map::fused_source::<add>(1, c, &nested).unwrap();
        assert!(src.contains("lz0_0_in1"), "{src}");
        check(&name("fused_nested"), &src);
        check(
            &name("fused_multi"),
            &map::fused_source::<addi>(1, c, &looked).unwrap(),
        );
        check(
            &name("fused_map_reduce"),
            &map_reduce::source::<add32, add32>(4, c, &grid).unwrap(),
        );
    }
}

/// Softmax's row statistic (`examples/softmax.rs`): a struct folded along rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
struct RowStat {
    max: f32,
    sum: f32,
}

#[userfn]
fn to_stat(x: f32) -> RowStat {
    RowStat { max: x, sum: 1.0 }
}

#[userfn]
fn merge_stat(a: RowStat, b: RowStat) -> RowStat {
    let mut hi = a;
    let mut lo = b;
    if b.max > a.max {
        hi = b;
        lo = a;
    }
    RowStat {
        max: hi.max,
        sum: hi.sum + lo.sum * (lo.max - hi.max).exp(),
    }
}

#[userfn]
fn normalise(#[index] (i, _j): (usize, usize), x: f32, stats: &[RowStat]) -> f32 {
    let s = stats[i];
    (x - s.max).exp() / s.sum
}

#[userfn]
fn shift_row(#[index] (i, _j): (usize, usize), x: f32, row_max: &[f32]) -> f32 {
    (x - row_max[i]).exp()
}

#[test]
fn row_and_column_kernels_take_the_index_without_division() {
    use crate::codegen::{Prim, Ty};
    use crate::userfn::UserFn;
    for c in [false, true] {
        let name = |n: &str| format!("{n}{}", if c { "_checked" } else { "" });
        // The vectorised Map: each element's row and column from the loop.
        let src = map::source::<normalise>(1, c).unwrap();
        assert!(src.contains("#define SKEL_RC 1"), "{src}");
        check(&name("map_normalise"), &src);
        // A lazy 2D-index input of a 2D-index consumer: both take them.
        let f32t = Ty::Prim(Prim::F32);
        let lazy = Reads(vec![chain(shift_row::definition(), vec![Read::Leaf(f32t)])]);
        let src = map::fused_source::<normalise>(1, c, &lazy).unwrap();
        let callv = src
            .lines()
            .find(|l| l.starts_with("#define SKEL_CALLV"))
            .unwrap_or_default();
        assert!(
            callv.contains("skel_r[SKEL_V]") && !callv.contains("/ cols"),
            "{callv}"
        );
        check(&name("map_fused_rc"), &src);
        // Row folds: a struct accumulator, and a 2D index read through the row and column.
        check(
            &name("map_reduce_stat"),
            &map_reduce::source::<to_stat, merge_stat>(4, c, &Default::default()).unwrap(),
        );
        let src = map_reduce::source::<shift_row, add>(4, c, &Default::default()).unwrap();
        assert!(
            src.contains("SKEL_ELEM_RC(SKEL_I, SKEL_ROW, SKEL_COL)"),
            "{src}"
        );
        check(&name("map_reduce_rc"), &src);
        let pair = Reads(vec![
            chain(shift_row::definition(), vec![Read::Leaf(f32t)]),
            Read::Leaf(f32t),
        ]);
        let src = map_reduce::source::<add, add>(4, c, &pair).unwrap();
        let elem_rc = src
            .lines()
            .find(|l| l.starts_with("#define SKEL_ELEM_RC"))
            .unwrap_or_default();
        assert!(
            elem_rc.contains("(SKEL_ROW)") && !elem_rc.contains("/ cols"),
            "{elem_rc}"
        );
        check(&name("map_reduce_lazy_rc"), &src);
    }
}

#[test]
fn every_template_is_valid_cpp() {
    check("map_add", &map::source::<add>(1, false).unwrap());
    check("map_where2d", &map::source::<where2d>(1, false).unwrap());
    check("map_array", &map_array::source::<lookup>(false).unwrap());
    check("map_add_checked", &map::source::<add>(1, true).unwrap());
    check(
        "map_where2d_checked",
        &map::source::<where2d>(1, true).unwrap(),
    );
    check(
        "map_array_checked",
        &map_array::source::<lookup>(true).unwrap(),
    );
    for c in [false, true] {
        let name = |n: &str| format!("{n}{}", if c { "_checked" } else { "" });
        check(&name("reduce_f32"), &reduce::source::<add, f32>(c).unwrap());
        check(
            &name("reduce_aff"),
            &reduce::source::<compose, Aff>(c).unwrap(),
        );
        check(&name("reduce_u8"), &reduce::source::<small, u8>(c).unwrap());
        check(
            &name("map_reduce"),
            &map_reduce::source::<where2d, add32>(4, c, &Default::default()).unwrap(),
        );
        check(&name("scan_i64"), &scan::source::<addi, i64>(c).unwrap());
        check(
            &name("scan_f32_packed"),
            &scan::source::<add, f32>(c).unwrap(),
        );
        check(
            &name("scan_u8_packed"),
            &scan::source::<small, u8>(c).unwrap(),
        );
        check(&name("scan_aff"), &scan::source::<compose, Aff>(c).unwrap());
    }
    for (axis, r, edge) in [
        (Axis::Flat, 1, Edge::Duplicate),
        (Axis::Rows, 2, Edge::Cyclic),
        (Axis::Cols, 1, Edge::Pad),
        (Axis::Cols, 30, Edge::None),
    ] {
        let stencil = Stencil {
            radius: r,
            edge,
            pad: 0.0f32,
        };
        let plan = Plan::one_d(
            axis,
            Shape::Matrix {
                rows: 4096,
                cols: 4096,
            },
            &stencil,
        );
        // Both kernels of the template: tiled (registers capped or not) and direct.
        for (plan, c) in [plan, plan.min_blocks(8), plan.direct()]
            .into_iter()
            .flat_map(|p| [(p, false), (p, true)])
        {
            let types = ("float".into(), "float".into());
            check(
                &format!("{}_{c}", plan.variant()),
                &map_overlap::source::<blur>(&plan, types, c).unwrap(),
            );
        }
    }
    for r in [1, 7] {
        let stencil = Stencil {
            radius: (r, r),
            edge: Edge::Duplicate,
            pad: 0.0f64,
        };
        let plan = Plan::two_d(
            Shape::Matrix {
                rows: 8192,
                cols: 8192,
            },
            &stencil,
        );
        for (plan, c) in [plan, plan.direct()]
            .into_iter()
            .flat_map(|p| [(p, false), (p, true)])
        {
            let types = ("double".into(), "double".into());
            check(
                &format!("{}_{c}", plan.variant()),
                &map_overlap::source::<lap>(&plan, types, c).unwrap(),
            );
        }
    }
    for c in [false, true] {
        check(
            &format!("filter_u32_{c}"),
            &filter::source::<multiple, u32>(c).unwrap(),
        );
        check(
            &format!("filter_aff_index_{c}"),
            &filter::source::<early, Aff>(c).unwrap(),
        );
        for local in [false, true] {
            check(
                &format!("reduce_by_key_{local}_{c}"),
                &reduce_by_key::source::<tally_of, merge_tally, Tally>((256, 4), local, c).unwrap(),
            );
        }
        for shared in [false, true] {
            check(
                &format!("histogram_u8_{shared}_{c}"),
                &histogram::source::<byte_bin, u32>(shared, c).unwrap(),
            );
            check(
                &format!("histogram_cell_{shared}_{c}"),
                &histogram::source::<cell_bin, u64>(shared, c).unwrap(),
            );
        }
    }
}

/// Names the broken program in the in-memory cache.
struct BrokenKernel;

#[test]
fn nvrtc_failure_is_a_compile_error_with_log_and_source() {
    let ctx = match super::context::ctx() {
        Ok(c) => c,
        Err(e) => {
            println!("skipped: no cuda device ({e})");
            return;
        }
    };
    let src = "extern \"C\" __global__ void skel_broken(int* p) {\n    p[0] = skel_undeclared_name + ;\n}\n";
    let key = ProgKey::of::<BrokenKernel>("broken", ctx.ordinal);
    // The second call gets the remembered failure, not a retry.
    for attempt in 0..2 {
        let err =
            module_cache::module(ctx, key, "broken", &["skel_broken"], || Ok(src.to_string()))
                .err()
                .expect("broken source must not build");
        match err {
            Error::Compile {
                kernel,
                log,
                source_code,
            } => {
                assert_eq!(kernel, "broken");
                assert!(
                    log.contains("skel_undeclared_name") && log.contains("error"),
                    "NVRTC's log is missing: {log}"
                );
                assert_eq!(source_code, src);
                if attempt == 0 {
                    let first = log.lines().find(|l| l.contains("error")).unwrap_or("");
                    println!("compile failure surfaced as Error::Compile: {first}");
                }
            }
            other => panic!("expected Error::Compile, got {other:?}"),
        }
    }
}

#[test]
fn disk_cache_round_trip_in_process() {
    let ctx = match super::context::ctx() {
        Ok(c) => c,
        Err(e) => {
            println!("skipped: no cuda device ({e})");
            return;
        }
    };
    if crate::backends::jit::cache_dir("cuda").is_none() {
        println!("skipped: disk cache disabled");
        return;
    }
    // A source no earlier run can have cached.
    let nonce = format!(
        "{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    );
    let src = format!("extern \"C\" __global__ void skel_probe_{nonce}(int* p) {{ p[0] = 1; }}\n");
    let opts = module_cache::options(ctx);
    let key = crate::backends::jit::stable_hash(&[src.as_bytes(), b"unit-test"]);
    assert!(
        module_cache::disk_hit("probe", &key).is_none(),
        "a fresh source came from the disk cache"
    );
    let first = module_cache::compiled("probe", &src, &opts, &key).unwrap();
    let second = module_cache::disk_hit("probe", &key);
    assert_eq!(
        second.as_ref(),
        Some(&first),
        "the compiled binary is not in the disk cache"
    );
    let path = crate::backends::jit::cache_dir("cuda")
        .unwrap()
        .join(format!("{key}.cubin"));
    let _ = std::fs::remove_file(path);
    println!("disk cache: compiled once, then loaded from disk");
}

#[userfn]
fn pair_dist(p: f32, q: f64) -> f32 {
    (p as f64 - q).abs() as f32
}

#[userfn]
fn pair_tag(#[index] (row, col): (usize, usize), p: Aff, q: i32, #[uniform] k: i64) -> i64 {
    p.m * k + p.c - q as i64 + (row * 1000 + col) as i64
}

#[userfn]
fn pair_aff(#[index] i: usize, p: i64, q: i64) -> Aff {
    Aff {
        m: p - q,
        c: i as i64,
    }
}

#[test]
fn pair_templates_are_valid_cpp() {
    use super::{map_pairs, map_pairs_reduce};
    for c in [false, true] {
        check(
            &format!("map_pairs_dist_{c}"),
            &map_pairs::source::<pair_dist, f32, f64>(c).unwrap(),
        );
        check(
            &format!("map_pairs_tag_{c}"),
            &map_pairs::source::<pair_tag, Aff, i32>(c).unwrap(),
        );
        for cols in [false, true] {
            check(
                &format!("pairs_fold_add_{cols}_{c}"),
                &map_pairs_reduce::source::<pair_dist, add, f32, f64>(cols, c).unwrap(),
            );
            check(
                &format!("pairs_fold_index_{cols}_{c}"),
                &map_pairs_reduce::source::<pair_tag, addi, Aff, i32>(cols, c).unwrap(),
            );
            check(
                &format!("pairs_fold_aff_{cols}_{c}"),
                &map_pairs_reduce::source::<pair_aff, compose, i64, i64>(cols, c).unwrap(),
            );
        }
    }
}

#[userfn]
fn win_hot(
    #[index] (i, j): (usize, usize),
    t: Window2<f32>,
    p: Mat<f32>,
    #[uniform] c: Aff,
) -> f32 {
    t[(0, 0)] + (c.m as f32) * (p[(i, j)] + t[(-1, 0)] + t[(1, 1)]) + j as f32
}

#[userfn]
fn win_four(a: Window2<i64>, b: Window2<i64>, c: Window2<i64>, d: Window2<i64>) -> i64 {
    let (rr, rc) = a.radius();
    a[(rr as isize, rc as isize)] + b[(0, 0)] - c[(-1, 0)] * d[(0, -1)]
}

#[userfn]
fn win_line(#[index] i: usize, a: Window<f64>, b: Window<f64>, v: &[f64]) -> f64 {
    a[-1] + b[1] * v[i % v.len()]
}

#[test]
fn general_stencil_template_is_valid_cpp() {
    use super::map_overlap_windows::source;
    use crate::backends::overlap_windows::{Geometry, Job};
    use crate::plan::{Cells, Edge};
    let all = Cells::<f32, f32>::all();
    let red = Cells::<f32, f32> {
        parity: Some(0),
        keep: Some(|a: &[f32], b: &mut [f32]| b.copy_from_slice(a)),
    };
    for c in [false, true] {
        let name = |n: &str| format!("{n}{}", if c { "_checked" } else { "" });
        let hot = Job::two_d((40, 33), (1, 1), Edge::Duplicate, &all, 1);
        let g = Geometry::choose(&hot, 4, 1024, 48 * 1024).unwrap();
        check(
            &name("windows_hot"),
            &source::<win_hot>(&hot, &g, c).unwrap(),
        );
        let four = Job::two_d((9, 7), (2, 1), Edge::Cyclic, &red, 4);
        let g = Geometry::choose(&four, 8, 1024, 48 * 1024).unwrap();
        check(
            &name("windows_four_keep"),
            &source::<win_four>(&four, &g, c).unwrap(),
        );
        for axis in [Axis::Flat, Axis::Cols] {
            let shape = if axis == Axis::Flat {
                Shape::Vector(1000)
            } else {
                Shape::Matrix { rows: 30, cols: 5 }
            };
            let line = Job::one_d(shape, 1, axis, Edge::Pad, &all, 2);
            let g = Geometry::choose(&line, 8, 1024, 48 * 1024).unwrap();
            let src = source::<win_line>(&line, &g, c).unwrap();
            check(&name(&format!("windows_line_{axis:?}")), &src);
        }
    }
}

#[userfn]
fn wf_score(
    #[index] (i, j): (usize, usize),
    up: i32,
    left: i32,
    diag: i32,
    a: &[i32],
    b: &[i32],
    score: Mat<i32>,
    #[uniform] gap: i32,
) -> i32 {
    (diag + score[(a[i - 1] as usize, b[j - 1] as usize)])
        .max(up - gap)
        .max(left - gap)
}

#[userfn]
fn wf_flat(#[index] k: usize, up: f64, left: f64, diag: f64) -> f64 {
    up.min(left).min(diag) + k as f64
}

/// A lone `&[T]`: the kernel names it `arr`.
#[userfn]
fn wf_one(up: i64, left: i64, diag: i64, w: &[i64]) -> i64 {
    up * w[0] + left * w[1] + diag * w[2]
}

/// 64 bytes: a tile of them does not fit in static shared memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
struct WfWide {
    v: [i64; 8],
}

#[userfn]
fn wf_wide(up: WfWide, left: WfWide, diag: WfWide) -> WfWide {
    let mut v = up.v;
    v[0] = left.v[0] + diag.v[7];
    WfWide { v }
}

#[test]
fn wavefront_template_is_valid_cpp() {
    use super::wavefront::{self, source};
    assert!(wavefront::tile_in_shared::<i32>() && !wavefront::tile_in_shared::<WfWide>());
    for c in [false, true] {
        let score = source::<wf_score, i32>(c).unwrap();
        // The kernel keeps the cell's row and column: no division for the 2D index.
        assert!(
            !score.contains("/ cols") && !score.contains("% cols"),
            "{score}"
        );
        assert!(score.contains("#define SKEL_LOCAL 1"));
        check(&format!("wavefront_score_{c}"), &score);
        check(
            &format!("wavefront_flat_{c}"),
            &source::<wf_flat, f64>(c).unwrap(),
        );
        check(
            &format!("wavefront_one_{c}"),
            &source::<wf_one, i64>(c).unwrap(),
        );
        let wide = source::<wf_wide, WfWide>(c).unwrap();
        assert!(wide.contains("#define SKEL_LOCAL 0"));
        check(&format!("wavefront_wide_{c}"), &wide);
    }
}
