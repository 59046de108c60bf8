//! Kernel sources for MapOverlap of the general form (SkePU 3's window functions: an
//! `#[index]`, 1..=4 windowed inputs, container arguments, uniforms, update modes) on both
//! GPU backends: one template (`cuda/map_overlap_windows.cu`, which both compile), the
//! geometry of a call's tiles, and the user call with its windows in the tiles.
//!
//! Every form is a 2D stencil over a `rows x cols` grid: a vector is one row, a 1D window
//! along rows has radius `(0, r)`, one down columns `(r, 0)` with its tiles stored column by
//! column (the window is then contiguous, as `Window<T>` needs).

use crate::backends::stencil_tile::edge_code;
use crate::codegen::ir::{FnDef, ParamKind};
use crate::codegen::{c_type, Dialect, Prim, Ty};
use crate::containers::Shape;
use crate::plan::{Axis, Cells, Edge};
use crate::{Error, Result};

/// The template, the same text for CUDA and OpenCL C.
pub(crate) const TEMPLATE: &str = include_str!("../../cuda/map_overlap_windows.cu");

/// The kernel's name in the module.
pub(crate) const KERNEL: &str = "skel_overlap_windows";

/// One general stencil call as the kernel sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Job {
    /// The grid (a vector is one row).
    pub rows: usize,
    pub cols: usize,
    /// `(rows, cols)` radius.
    pub radius: (usize, usize),
    /// A 1D window down columns: tiles stored column by column.
    pub cols_major: bool,
    pub edge: Edge,
    /// Only the outputs with `(i + j) % 2 == p` are computed.
    pub parity: Option<usize>,
    /// The outputs not computed get input 0's element (an in-place sweep).
    pub keep: bool,
    /// Windowed inputs.
    pub windows: usize,
    /// One colour sweep in place: input 0 is the output (see [`in_place_exact`]).
    pub in_place: bool,
}

impl Job {
    /// A 1D call over `shape` along `axis`.
    pub(crate) fn one_d<T, O>(
        shape: Shape,
        r: usize,
        axis: Axis,
        edge: Edge,
        cells: &Cells<T, O>,
        windows: usize,
    ) -> Job {
        let (rows, cols) = shape.dims();
        let (radius, cols_major) = match axis {
            Axis::Cols => ((r, 0), true),
            Axis::Rows | Axis::Flat => ((0, r), false),
        };
        Job {
            rows,
            cols,
            radius,
            cols_major,
            edge,
            parity: cells.parity,
            keep: cells.keep.is_some(),
            windows,
            in_place: false,
        }
    }

    /// A 2D call over a `rows x cols` matrix.
    pub(crate) fn two_d<T, O>(
        (rows, cols): (usize, usize),
        radius: (usize, usize),
        edge: Edge,
        cells: &Cells<T, O>,
        windows: usize,
    ) -> Job {
        Job {
            rows,
            cols,
            radius,
            cols_major: false,
            edge,
            parity: cells.parity,
            keep: cells.keep.is_some(),
            windows,
            in_place: false,
        }
    }

    /// Whether the output's old values must be valid where the kernel runs: some outputs
    /// are not computed and not overwritten with input 0's.
    pub(crate) fn reads_old_output(&self) -> bool {
        !self.keep && (self.edge == Edge::None || self.parity.is_some())
    }

    /// The kernel's `edge` argument.
    pub(crate) fn edge_code(&self) -> i32 {
        edge_code(self.edge)
    }

    /// The kernel's `parity` argument (negative: every output).
    pub(crate) fn parity_code(&self) -> i32 {
        self.parity.map_or(-1, |p| (p % 2) as i32)
    }
}

impl Job {
    /// One colour sweep in place over a `rows x cols` matrix: the cells with
    /// `(i + j) % 2 == parity` from the matrix itself, written into it.
    pub(crate) fn in_place_sweep(
        (rows, cols): (usize, usize),
        radius: (usize, usize),
        edge: Edge,
        parity: usize,
    ) -> Job {
        Job {
            rows,
            cols,
            radius,
            cols_major: false,
            edge,
            parity: Some(parity % 2),
            keep: false,
            windows: 1,
            in_place: true,
        }
    }
}

/// Whether a colour sweep of the one-window function `def` may read and write the same
/// matrix and still give the bits of a sweep from a copy: every cell the sweep writes is
/// read by its own output alone. That holds when the function reads its window only at
/// constant offsets whose sum is odd (the other colour, which the sweep does not write) or
/// at `(0, 0)` (its own cell, read before the same thread writes it), and the edge mode
/// maps no such offset onto another cell of the sweep's colour: `None` and `Pad` map none,
/// `Duplicate` only where no offset exceeds 1 (a clamped one lands on the cell itself),
/// `Cyclic` only on a matrix of even extents (wrapping keeps the parity). Anything else
/// (an offset computed at run time, the window passed on to another function) is not
/// proven, and the sweep goes through a second matrix.
pub(crate) fn in_place_exact(
    def: &'static FnDef,
    (rows, cols): (usize, usize),
    edge: Edge,
) -> bool {
    use crate::codegen::ir::{visit_block, Expr, Node, UnOp};
    let windows: Vec<&str> = def
        .params
        .iter()
        .filter(|p| p.kind == ParamKind::Window2)
        .map(|p| p.name)
        .collect();
    let [window] = windows[..] else {
        return false;
    };
    fn constant(e: &Expr) -> Option<i128> {
        match e {
            Expr::Int { value, .. } => i128::try_from(*value).ok(),
            Expr::Unary {
                op: UnOp::Neg,
                expr,
            } => constant(expr).map(|v| -v),
            _ => None,
        }
    }
    let (mut uses, mut exact, mut widest) = (0usize, 0usize, 0i128);
    visit_block(&def.body, &mut |node| match node {
        Node::Expr(Expr::Var(name)) if *name == window => uses += 1,
        Node::Expr(Expr::Index2 { base, row, col }) => {
            if let (Expr::Var(name), Some(di), Some(dj)) = (base, constant(row), constant(col)) {
                if *name == window && ((di + dj) % 2 != 0 || (di, dj) == (0, 0)) {
                    exact += 1;
                    widest = widest.max(di.abs()).max(dj.abs());
                }
            }
        }
        _ => {}
    });
    let edge_ok = match edge {
        Edge::None | Edge::Pad => true,
        Edge::Duplicate => widest <= 1,
        Edge::Cyclic => rows % 2 == 0 && cols % 2 == 0,
    };
    uses == exact && edge_ok
}

/// The block shape of a call and the tiles it loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    /// Threads (and outputs) along x.
    pub bx: usize,
    /// Threads along y.
    pub by: usize,
    /// Outputs per thread along y.
    pub iy: usize,
}

impl Geometry {
    /// The tiles for `job` with elements of `elem` bytes: at most `threads` threads per
    /// block and `local` bytes of tiles. A one-row grid (a vector) runs rows of 256
    /// outputs; a matrix 32 x 32 outputs per block of 32 x 8 threads (4 rows each), or
    /// 32 x 8 where the tiles would not fit or the grid is short.
    pub(crate) fn choose(job: &Job, elem: usize, threads: usize, local: usize) -> Result<Self> {
        let threads = threads.max(1);
        let mut candidates = Vec::with_capacity(4);
        if job.rows <= 1 {
            // The largest power of two up to 256 that the device allows.
            let bx = 1usize << (usize::BITS - 1 - threads.min(256).leading_zeros());
            candidates.push(Geometry { bx, by: 1, iy: 1 });
            candidates.push(Geometry {
                bx: bx.min(32),
                by: 1,
                iy: 1,
            });
        } else {
            let bx = 32usize.min(threads);
            let by = (threads / bx).clamp(1, 8);
            if job.rows >= 4 * by {
                candidates.push(Geometry { bx, by, iy: 4 });
            }
            candidates.push(Geometry { bx, by, iy: 1 });
            candidates.push(Geometry { bx, by: 1, iy: 1 });
        }
        candidates
            .into_iter()
            .find(|g| g.tile_bytes(job, elem).is_some_and(|b| b <= local))
            .ok_or_else(|| {
                let (rr, rc) = job.radius;
                Error::InvalidArgument(format!(
                    "MapOverlap: {} windows of radius ({rr}, {rc}) need tiles larger than the {local} bytes of shared memory a block may use on this device; use a smaller radius or fewer windowed inputs",
                    job.windows
                ))
            })
    }

    /// Bytes of the tiles of all windowed inputs.
    pub(crate) fn tile_bytes(&self, job: &Job, elem: usize) -> Option<usize> {
        let (rr, rc) = job.radius;
        let h = (self.by * self.iy).checked_add(rr.checked_mul(2)?)?;
        let w = self.bx.checked_add(rc.checked_mul(2)?)?;
        h.checked_mul(w)?
            .checked_mul(job.windows)?
            .checked_mul(elem)
    }

    /// Outputs of a tile: `(rows, cols)`.
    pub(crate) fn tile_outputs(&self) -> (usize, usize) {
        (self.by * self.iy, self.bx)
    }

    /// Tiles `(x, y)` covering `rows` rows of `cols` outputs.
    pub(crate) fn tiles(&self, rows: usize, cols: usize) -> (usize, usize) {
        let (th, tw) = self.tile_outputs();
        (cols.div_ceil(tw), rows.div_ceil(th))
    }

    /// The name of the kernel variant for `job` (what its module is cached under).
    pub(crate) fn variant(&self, job: &Job, checked: bool) -> String {
        format!(
            "overlap_windows_{}x{}x{}_r{}_{}{}{}{}{}",
            self.bx,
            self.by,
            self.iy,
            job.radius.0,
            job.radius.1,
            if job.cols_major { "_cols" } else { "" },
            if job.keep { "_keep" } else { "" },
            if job.in_place { "_inplace" } else { "" },
            if checked { "_checked" } else { "" }
        )
    }
}

/// The `#define`s of the template for user function `def` (its C entry point `entry`, the
/// checked variant with `checked`), windowed inputs of C type `elem`, results of `out`.
pub(crate) fn defines(
    def: &'static FnDef,
    entry: &str,
    (elem, out): (String, String),
    (job, geometry): (&Job, &Geometry),
    dialect: Dialect,
    checked: bool,
) -> Result<Vec<(&'static str, String)>> {
    let ocl = dialect == Dialect::OpenCl;
    let ty = |t: Ty| c_type(t, dialect);
    let n = job.windows;
    let (in_params, in_setup): (String, String) = (0..n)
        .map(|q| {
            if job.in_place {
                // Input 0 is the output itself (no `__restrict__` on either).
                let space = if ocl { "__global " } else { "" };
                (
                    String::new(),
                    format!("{space}const SKEL_OW_T* in{q} = ({space}const SKEL_OW_T*)out; "),
                )
            } else if ocl {
                (
                    format!(", __global const SKEL_OW_T* in{q}_buf, ulong in{q}_off"),
                    format!("__global const SKEL_OW_T* in{q} = in{q}_buf + in{q}_off; "),
                )
            } else {
                (
                    format!(", const SKEL_OW_T* __restrict__ in{q}"),
                    String::new(),
                )
            }
        })
        .unzip();
    let (out_params, out_setup) = if ocl {
        (
            "__global SKEL_OW_OUT_T* out_buf, ulong out_off",
            "__global SKEL_OW_OUT_T* out = out_buf + out_off;",
        )
    } else if job.in_place {
        ("SKEL_OW_OUT_T* out", "")
    } else {
        ("SKEL_OW_OUT_T* __restrict__ out", "")
    };
    let u64_t = ty(Ty::Prim(Prim::Usize));
    let mut params = String::new();
    for (k, p) in crate::backends::args::containers(def).iter().enumerate() {
        params.push_str(&if ocl {
            format!(
                ", __global const {t}* ca{k}, ulong ca{k}_off, ulong ca{k}_rows, ulong ca{k}_cols",
                t = ty(p.ty)
            )
        } else {
            format!(
                ", const {t}* __restrict__ ca{k}, {u64_t} ca{k}_rows, {u64_t} ca{k}_cols",
                t = ty(p.ty)
            )
        });
    }
    for (k, p) in def
        .params
        .iter()
        .filter(|p| p.kind == ParamKind::Uniform)
        .enumerate()
    {
        params.push_str(&format!(", const {} u{k}", ty(p.ty)));
    }
    if checked {
        params.push_str(if ocl {
            ", __global uint* skel_fault"
        } else {
            ", unsigned int* skel_fault"
        });
    }
    let loads: String = (0..n)
        .map(|q| format!("SKEL_OW_LOAD({q}, in{q}) "))
        .collect();
    Ok(vec![
        ("SKEL_OW_T", elem),
        ("SKEL_OW_OUT_T", out),
        ("SKEL_OW_N", n.to_string()),
        ("SKEL_RR", job.radius.0.to_string()),
        ("SKEL_RC", job.radius.1.to_string()),
        ("SKEL_OW_COLS", u8::from(job.cols_major).to_string()),
        ("SKEL_OW_KEEP", u8::from(job.keep).to_string()),
        ("SKEL_OW_BX", geometry.bx.to_string()),
        ("SKEL_OW_BY", geometry.by.to_string()),
        ("SKEL_OW_IY", geometry.iy.to_string()),
        ("SKEL_OW_IN_PARAMS", in_params),
        ("SKEL_OW_IN_SETUP", in_setup),
        ("SKEL_OW_OUT_PARAMS", out_params.into()),
        ("SKEL_OW_OUT_SETUP", out_setup.into()),
        ("SKEL_OW_PARAMS", params),
        ("SKEL_OW_LOAD_ALL", loads),
        ("SKEL_OW_CALL", call(def, entry, dialect, checked)?),
    ])
}

/// `entry(args..)` for window function `def` at the template's output `(i, j)`:
/// `#[index]` from the output's position, container `k` as `ca<k>` (with its dimensions),
/// uniform `k` as `u<k>`, window `q` as its centre in tile `q` with the tile's stride and
/// the radius; in the checked variant the fault record `skel_fault` goes first.
fn call(def: &'static FnDef, entry: &str, dialect: Dialect, checked: bool) -> Result<String> {
    let ocl = dialect == Dialect::OpenCl;
    let u64_t = c_type(Ty::Prim(Prim::Usize), dialect);
    let i64_t = c_type(Ty::Prim(Prim::I64), dialect);
    let (mut q, mut u, mut k) = (0, 0, 0);
    let mut args: Vec<String> = checked
        .then(|| "skel_fault".to_string())
        .into_iter()
        .collect();
    for p in def.params {
        args.push(match p.kind {
            ParamKind::Index => format!("({u64_t})(i * cols + j)"),
            ParamKind::IndexRow => format!("({u64_t})(i)"),
            ParamKind::IndexCol => format!("({u64_t})(j)"),
            ParamKind::Uniform => {
                u += 1;
                format!("u{}", u - 1)
            }
            ParamKind::Array | ParamKind::Mat => {
                k += 1;
                let name = format!("ca{}", k - 1);
                let ptr = if ocl {
                    format!("({name} + {name}_off)")
                } else {
                    name.clone()
                };
                crate::backends::args::call_args(def, p, &ptr, &name, checked)
            }
            ParamKind::Window => {
                q += 1;
                format!("SKEL_OW_W({}), ({i64_t})(SKEL_RR + SKEL_RC)", q - 1)
            }
            ParamKind::Window2 => {
                q += 1;
                format!(
                    "SKEL_OW_W({}), ({i64_t})(SKEL_OW_STRIDE), ({i64_t})(SKEL_RR), ({i64_t})(SKEL_RC)",
                    q - 1
                )
            }
            other => {
                return Err(Error::InvalidArgument(format!(
                    "MapOverlap `{}`: a window function takes no {other:?} parameter (`{}`)",
                    def.name, p.name
                )))
            }
        });
    }
    Ok(format!("{entry}({})", args.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::{in_place_exact, Geometry, Job};
    use crate::prelude::*;
    use crate::userfn::UserFn;

    #[userfn]
    fn heat(w: Window2<f32>) -> f32 {
        (w[(-1, 0)] + w[(1, 0)] + w[(0, -1)] + w[(0, 1)]) * 0.25 - w[(0, 0)]
    }
    #[userfn]
    fn far(w: Window2<f32>) -> f32 {
        w[(2, 1)] + w[(0, -3)]
    }
    #[userfn]
    fn diagonal(w: Window2<f32>) -> f32 {
        w[(1, 1)] + w[(1, 0)]
    }
    #[userfn]
    fn computed(w: Window2<f32>) -> f32 {
        let mut s = 0.0;
        for d in 0..2 {
            s += w[(d as isize, 1)];
        }
        s
    }
    #[userfn]
    fn sized(w: Window2<f32>) -> f32 {
        w[(1, 0)] * w.radius().0 as f32
    }
    #[userfn]
    fn two(a: Window2<f32>, b: Window2<f32>) -> f32 {
        a[(1, 0)] + b[(0, 1)]
    }

    #[test]
    fn in_place_only_where_a_sweep_reads_the_other_colour() {
        let (even, odd) = ((64, 66), (63, 66));
        for edge in [Edge::None, Edge::Pad, Edge::Duplicate] {
            assert!(in_place_exact(heat::definition(), odd, edge), "{edge:?}");
        }
        assert!(in_place_exact(heat::definition(), even, Edge::Cyclic));
        // An odd extent: wrapping onto the other side changes the parity.
        assert!(!in_place_exact(heat::definition(), odd, Edge::Cyclic));
        // Offsets of the other colour, but past 1: clamping could land on the own colour.
        assert!(in_place_exact(far::definition(), odd, Edge::Pad));
        assert!(!in_place_exact(far::definition(), odd, Edge::Duplicate));
        // The own colour, an offset computed at run time, the window used otherwise.
        for def in [
            diagonal::definition(),
            computed::definition(),
            sized::definition(),
        ] {
            assert!(!in_place_exact(def, even, Edge::None), "{}", def.name);
        }
        assert!(!in_place_exact(two::definition(), even, Edge::None));
    }
    use crate::containers::Shape;
    use crate::plan::{Axis, Cells, Edge};
    use crate::Error;

    #[test]
    fn tiles_fit_the_device_or_the_call_is_an_invalid_argument() {
        let all = Cells::<f32, f32>::all();
        // A vector: rows of 256 outputs, or what the device allows.
        let v = Job::one_d(Shape::Vector(1000), 2, Axis::Flat, Edge::Pad, &all, 2);
        assert_eq!(
            Geometry::choose(&v, 4, 1024, 48 << 10).unwrap(),
            Geometry {
                bx: 256,
                by: 1,
                iy: 1
            }
        );
        assert_eq!(Geometry::choose(&v, 4, 100, 48 << 10).unwrap().bx, 64);
        // Down columns: radius (r, 0), tiles column-major.
        let c = Job::one_d(
            Shape::Matrix { rows: 50, cols: 3 },
            3,
            Axis::Cols,
            Edge::Pad,
            &all,
            1,
        );
        assert_eq!((c.radius, c.cols_major), ((3, 0), true));
        // A matrix: 32 x 32 outputs where they fit, fewer rows per thread where not.
        let m = Job::two_d((100, 100), (1, 1), Edge::None, &all, 4);
        let g = Geometry::choose(&m, 4, 1024, 48 << 10).unwrap();
        assert_eq!(
            (g, g.tile_bytes(&m, 4)),
            (
                Geometry {
                    bx: 32,
                    by: 8,
                    iy: 4
                },
                Some(4 * 34 * 34 * 4)
            )
        );
        assert_eq!(g.tiles(100, 100), (4, 4));
        let big = Job::two_d((100, 100), (8, 8), Edge::None, &all, 4);
        assert_eq!(Geometry::choose(&big, 8, 1024, 48 << 10).unwrap().iy, 1);
        let huge = Job::two_d((1000, 1000), (200, 200), Edge::None, &all, 4);
        match Geometry::choose(&huge, 8, 1024, 48 << 10) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("radius (200, 200)"), "{m}"),
            other => panic!("{other:?}"),
        }
        // Which outputs a sweep writes, and whether the old output must be read.
        let red = Cells::<f32, f32> {
            parity: Some(0),
            keep: None,
        };
        let r = Job::two_d((9, 9), (1, 1), Edge::Pad, &red, 1);
        assert!(r.reads_old_output());
        assert_eq!((r.parity_code(), m.parity_code()), (0, -1));
        assert!(m.reads_old_output());
        let kept = Cells::<f32, f32> {
            parity: Some(1),
            keep: Some(|a: &[f32], b: &mut [f32]| b.copy_from_slice(a)),
        };
        assert!(!Job::two_d((9, 9), (1, 1), Edge::None, &kept, 1).reads_old_output());
    }
}
