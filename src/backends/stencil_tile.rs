//! The tile geometry of MapOverlap on the GPU backends, shared by `cuda/map_overlap.cu` and
//! `opencl/map_overlap.cl` (one template each, defines of the same names): every form is
//! a stencil over a `rows x cols` matrix (a vector is one row; row-wise is radius
//! `(0, r)`, column-wise `(r, 0)`), computed by blocks of `bx x by` threads, each thread
//! `ex` outputs along a row (`bx` apart) and `iy` down a column (consecutive).
//!
//! Kernels are specialised on the radius: the tile's shape is then a constant and its loops
//! unroll. The edge mode is an argument: only border tiles read it.
//!
//! The CUDA template also has a direct kernel ([`Plan::direct`]): one thread per output,
//! the window read in place, blocks of `bx x by` outputs. Measured on an H100 it is slower
//! than the tiles from 2^18 elements up and no faster below, so it runs only when
//! `SKEL_STENCIL=direct` asks for it.

// Only the GPU backends use this module; without them it is dead code.
#![allow(dead_code)]

use crate::backends::Stencil;
use crate::containers::Shape;
use crate::plan::{Axis, Edge};

/// Block shape and work per thread of one form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Layout {
    pub(crate) bx: usize,
    pub(crate) by: usize,
    /// Outputs per thread along a row, `bx` apart.
    pub(crate) ex: usize,
    /// Outputs per thread down a column, consecutive.
    pub(crate) iy: usize,
    window: Window,
}

/// Where the user function reads its window from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Window {
    /// The shared tile (in the direct kernel: global memory, in place).
    Shared,
    /// A copy in registers, slid down the thread's column: needed where a 1D window runs
    /// down a column (the window must be contiguous).
    Registers,
    /// Registers for windows up to [`REGWIN_MAX_BYTES`]: each tile row is then read from
    /// shared memory once per thread column instead of once per output.
    RegistersIfSmall,
}

/// A vector: a block of 128 threads covers 2048 outputs, so the halo is a small part of
/// its tile and each thread has several 16-byte loads in flight (measured on an H100:
/// 0.96 of the copy bandwidth at 2^28, against 0.90 with 256 threads x 8 outputs).
const FLAT: Layout = Layout {
    bx: 128,
    by: 1,
    ex: 16,
    iy: 1,
    window: Window::Shared,
};
const ROWS: Layout = Layout {
    bx: 64,
    by: 4,
    ex: 4,
    iy: 1,
    window: Window::Shared,
};
const COLS: Layout = Layout {
    bx: 32,
    by: 8,
    ex: 2,
    iy: 8,
    window: Window::Registers,
};
/// Column-wise with a wide window: one output per thread, so the window is not slid.
const COLS_WIDE: Layout = Layout {
    bx: 32,
    by: 8,
    ex: 1,
    iy: 1,
    window: Window::Registers,
};
/// 2D: warps along rows (conflict-free shared reads), each thread a column of 16 outputs,
/// so a small window's rows are read from the tile (16 + 2r) / 16 times per output
/// (measured on an H100, the best of ten shapes for 5x5 and 9x9 windows).
const TILE2D: Layout = Layout {
    bx: 64,
    by: 2,
    ex: 1,
    iy: 16,
    window: Window::RegistersIfSmall,
};

/// The direct kernel on a vector: one output per thread, as many threads per block as the
/// naive kernel it replaces.
const DIRECT_LINE: Layout = Layout {
    bx: 256,
    by: 1,
    ex: 1,
    iy: 1,
    window: Window::Shared,
};
/// The direct kernel on a matrix: a warp along a row, eight rows per block.
const DIRECT_2D: Layout = Layout {
    bx: 32,
    by: 8,
    ex: 1,
    iy: 1,
    window: Window::Shared,
};
/// Column-wise, the direct kernel copies the window into registers (it must be contiguous).
const DIRECT_COLS: Layout = Layout {
    window: Window::Registers,
    ..DIRECT_2D
};

/// Tiles a call should have at least (several per multiprocessor of a large GPU): smaller
/// data gets smaller tiles, fewer outputs per thread first.
const MIN_TILES: usize = 1024;

/// Largest window (in bytes) kept in registers by choice: a 9 x 9 window of `f32` fits.
const REGWIN_MAX_BYTES: usize = 400;

/// The code of an edge mode in the templates.
pub(crate) fn edge_code(edge: Edge) -> i32 {
    match edge {
        Edge::Duplicate => 0,
        Edge::Cyclic => 1,
        Edge::Pad => 2,
        Edge::None => 3,
    }
}

/// The largest power of two up to 16 that divides `size`: a tile row's offset modulo 16
/// bytes repeats every `16 / copy_unit(size)` elements.
fn copy_unit(size: usize) -> usize {
    1 << size.trailing_zeros().min(4)
}

/// One compiled variant of a stencil template and the shape of its data.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    /// The form (a program-cache kind).
    pub(crate) kind: &'static str,
    pub(crate) layout: Layout,
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) radius: (usize, usize),
    pub(crate) edge: Edge,
    pub(crate) elem_size: usize,
    /// The direct kernel (`SKEL_DIRECT`) instead of tiles.
    pub(crate) direct: bool,
    /// Blocks per multiprocessor the register allocation must allow (`SKEL_MIN_BLOCKS`);
    /// 0: the compiler's choice.
    pub(crate) min_blocks: usize,
}

impl Plan {
    /// A 1D stencil of elements `T` along `axis` of data of `shape`.
    pub(crate) fn one_d<T>(axis: Axis, shape: Shape, stencil: &Stencil<T, usize>) -> Plan {
        let (r, size) = (stencil.radius, std::mem::size_of::<T>());
        let (kind, layout, radius) = match axis {
            Axis::Flat => ("overlap_flat", FLAT, (0, r)),
            Axis::Rows => ("overlap_rows", ROWS, (0, r)),
            Axis::Cols if (2 * r + 1) * size <= REGWIN_MAX_BYTES => ("overlap_cols", COLS, (r, 0)),
            Axis::Cols => ("overlap_cols_wide", COLS_WIDE, (r, 0)),
        };
        let dims = match axis {
            Axis::Flat => (1, shape.len()),
            _ => shape.dims(),
        };
        Plan::new(kind, layout, dims, radius, stencil.edge, size)
    }

    /// A 2D stencil of elements `T` over a matrix of `shape`.
    pub(crate) fn two_d<T>(shape: Shape, stencil: &Stencil<T, (usize, usize)>) -> Plan {
        let size = std::mem::size_of::<T>();
        Plan::new(
            "overlap_2d",
            TILE2D,
            shape.dims(),
            stencil.radius,
            stencil.edge,
            size,
        )
    }

    fn new(
        kind: &'static str,
        layout: Layout,
        (rows, cols): (usize, usize),
        radius: (usize, usize),
        edge: Edge,
        elem_size: usize,
    ) -> Plan {
        Plan {
            kind,
            layout,
            rows,
            cols,
            radius,
            edge,
            elem_size,
            direct: false,
            min_blocks: 0,
        }
        .fill_device()
    }

    /// The same stencil through the direct kernel (one thread per output, no tile).
    pub(crate) fn direct(mut self) -> Plan {
        self.layout = if self.layout.window == Window::Registers {
            DIRECT_COLS
        } else if self.rows == 1 {
            DIRECT_LINE
        } else {
            DIRECT_2D
        };
        self.direct = true;
        self.min_blocks = 0;
        self
    }

    /// Whether capping the registers of a tiled 2D kernel (full occupancy) pays: measured
    /// through the library on an H100 for a 3x3 window sliding in registers (0.79 -> 0.94
    /// of the copy bandwidth at 2^28, 0.75 -> 0.89 at 2^26); 5x5 gained nothing in a
    /// standalone sweep.
    pub(crate) fn cap_pays(&self) -> bool {
        let (rr, rc) = self.radius;
        self.kind == "overlap_2d" && self.regwin() && (2 * rr + 1) * (2 * rc + 1) <= 9
    }

    /// The same plan with registers capped so that `blocks` blocks fit on a multiprocessor
    /// (0: uncapped); only the tiled kernel reads it.
    pub(crate) fn min_blocks(mut self, blocks: usize) -> Plan {
        self.min_blocks = if self.direct { 0 } else { blocks };
        self
    }

    /// Fewer outputs per thread (down a column first, then along a row) until the call has
    /// [`MIN_TILES`] tiles or each thread computes one output.
    fn fill_device(mut self) -> Plan {
        let tiles = |p: &Plan| {
            let (th, tw) = p.tile_outputs();
            p.rows.div_ceil(th).saturating_mul(p.cols.div_ceil(tw))
        };
        while tiles(&self) < MIN_TILES && self.layout.iy * self.layout.ex > 1 {
            let l = &mut self.layout;
            if l.iy > 1 {
                l.iy /= 2;
            } else {
                l.ex /= 2;
            }
        }
        self
    }

    /// The same plan with blocks of at most `max` threads (a device's work-group limit):
    /// fewer rows of threads first, then fewer columns.
    pub(crate) fn fit_block(mut self, max: usize) -> Plan {
        let l = &mut self.layout;
        while l.bx * l.by > max.max(1) {
            if l.by > 1 {
                l.by /= 2;
            } else {
                l.bx /= 2;
            }
        }
        self
    }

    /// Whether the user function reads a copy of its window in registers.
    pub(crate) fn regwin(&self) -> bool {
        let (rr, rc) = self.radius;
        match self.layout.window {
            Window::Shared => false,
            Window::Registers => true,
            Window::RegistersIfSmall => {
                (2 * rr + 1) * (2 * rc + 1) * self.elem_size <= REGWIN_MAX_BYTES
            }
        }
    }

    /// Outputs of one tile: `(rows, cols)`.
    pub(crate) fn tile_outputs(&self) -> (usize, usize) {
        let l = self.layout;
        (l.by * l.iy, l.bx * l.ex)
    }

    /// The tile's row pitch in elements: congruent to `cols` modulo the elements in 16
    /// bytes' worth of copy units, so that every tile row sits at the same offset modulo 16
    /// bytes as its row in global memory, and at least 32 bytes longer than a tile row, for
    /// the aligned 16-byte words around each row that the fast copy writes.
    pub(crate) fn pitch(&self) -> Option<i32> {
        let min = self
            .row_elems()?
            .checked_add(32usize.div_ceil(self.elem_size))?;
        let q = 16 / copy_unit(self.elem_size);
        let pitch = min + (self.cols % q + q - min % q) % q;
        i32::try_from(pitch).ok()
    }

    /// Elements of a tile row: the outputs and the halo on both sides.
    fn row_elems(&self) -> Option<usize> {
        self.tile_outputs()
            .1
            .checked_add(self.radius.1.checked_mul(2)?)
    }

    /// Bytes of shared (local) memory per block: the tile at its widest row pitch, plus up
    /// to 16 bytes for aligning it like the input; `None` if that overflows.
    pub(crate) fn shared_bytes(&self) -> Option<usize> {
        let th = self
            .tile_outputs()
            .0
            .checked_add(self.radius.0.checked_mul(2)?)?;
        let pitch =
            self.row_elems()? + 32usize.div_ceil(self.elem_size) + 16 / copy_unit(self.elem_size)
                - 1;
        th.checked_mul(pitch)?
            .checked_mul(self.elem_size)?
            .checked_add(16)
    }

    /// A name for the compiled variant: the form, block, outputs per thread, radius,
    /// window, kernel and register cap.
    pub(crate) fn variant(&self) -> String {
        let l = self.layout;
        format!(
            "{}_{}x{}_{}x{}_r{}x{}{}{}_b{}",
            self.kind,
            l.bx,
            l.by,
            l.ex,
            l.iy,
            self.radius.0,
            self.radius.1,
            if self.regwin() { "_reg" } else { "" },
            if self.direct { "_direct" } else { "" },
            self.min_blocks
        )
    }

    /// [`Plan::variant`], interned: calls of a compiled variant look its name up instead of
    /// formatting it (this runs on every call).
    pub(crate) fn variant_name(&self) -> &'static str {
        type Key = (&'static str, Layout, (usize, usize), bool, bool, usize);
        static NAMES: std::sync::OnceLock<
            std::sync::Mutex<std::collections::HashMap<Key, &'static str>>,
        > = std::sync::OnceLock::new();
        let key = (
            self.kind,
            self.layout,
            self.radius,
            self.regwin(),
            self.direct,
            self.min_blocks,
        );
        let mut names = NAMES
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        names
            .entry(key)
            .or_insert_with(|| crate::backends::jit::interned(self.variant()))
    }

    /// The template's geometry defines.
    pub(crate) fn defines(&self) -> Vec<(&'static str, String)> {
        let l = self.layout;
        let mut defines = vec![
            ("SKEL_BX", l.bx.to_string()),
            ("SKEL_BY", l.by.to_string()),
            ("SKEL_EX", l.ex.to_string()),
            ("SKEL_IY", l.iy.to_string()),
            ("SKEL_RR", self.radius.0.to_string()),
            ("SKEL_RC", self.radius.1.to_string()),
            ("SKEL_REGWIN", u8::from(self.regwin()).to_string()),
            ("SKEL_DIRECT", u8::from(self.direct).to_string()),
        ];
        if self.min_blocks > 0 {
            defines.push(("SKEL_MIN_BLOCKS", self.min_blocks.to_string()));
        }
        defines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_d<T: Default>(axis: Axis, (rows, cols): (usize, usize), radius: usize) -> Plan {
        let stencil = Stencil {
            radius,
            edge: Edge::Pad,
            pad: T::default(),
        };
        Plan::one_d(axis, Shape::Matrix { rows, cols }, &stencil)
    }

    fn two_d<T: Default>(side: usize, r: usize) -> Plan {
        let stencil = Stencil {
            radius: (r, r),
            edge: Edge::Pad,
            pad: T::default(),
        };
        Plan::two_d(
            Shape::Matrix {
                rows: side,
                cols: side,
            },
            &stencil,
        )
    }

    #[test]
    fn copy_unit_divides_the_size_and_16() {
        for size in 1..=64 {
            let u = copy_unit(size);
            assert_eq!((size % u, 16 % u), (0, 0), "size {size}");
            assert!(
                u == 16 || (size / u) % 2 == 1,
                "size {size}: {u} is not the largest"
            );
        }
    }

    #[test]
    fn blocks_fit_the_device_limit() {
        let p = two_d::<f32>(100, 2);
        for max in [1, 2, 16, 64, 128, 1024] {
            let l = p.fit_block(max).layout;
            assert!(
                l.bx * l.by <= max && l.bx >= 1 && l.by >= 1,
                "max {max}: {l:?}"
            );
        }
        assert_eq!(p.fit_block(1024).layout, p.layout);
    }

    #[test]
    fn small_windows_go_to_registers_and_wide_column_windows_are_not_slid() {
        assert!(two_d::<f32>(64, 2).regwin() && two_d::<f32>(64, 4).regwin());
        assert!(!two_d::<f32>(64, 5).regwin());
        let cols = |r| one_d::<f64>(Axis::Cols, (4096, 4096), r);
        assert_eq!(cols(2).layout, COLS);
        assert_eq!(cols(40).layout, COLS_WIDE);
        assert!(cols(40).regwin() && cols(2).variant() != cols(3).variant());
        let flat = one_d::<f32>(Axis::Flat, (3, 5), 1);
        assert_eq!((flat.rows, flat.cols, flat.radius), (1, 15, (0, 1)));
    }

    #[test]
    fn small_data_gets_small_tiles() {
        let flat = |n| one_d::<f32>(Axis::Flat, (1, n), 1).layout;
        assert_eq!(flat(1 << 28), FLAT);
        // the sizes of the suite's full-size tile test
        assert_eq!(
            (flat((1 << 21) + 5), two_d::<f32>(1501, 1).layout),
            (FLAT, TILE2D)
        );
        let ex = (flat(1 << 20).ex, flat(1 << 18).ex, flat(1 << 16).ex);
        assert_eq!(ex, (8, 2, 1));
        let square = |side| two_d::<f32>(side, 1).layout;
        assert_eq!(square(8192), TILE2D);
        assert_eq!((square(1024).iy, square(1024).ex), (8, 1));
        assert_eq!((square(256).iy, square(256).ex), (1, 1));
        assert_ne!(
            two_d::<f32>(256, 1).variant(),
            two_d::<f32>(8192, 1).variant()
        );
    }

    #[test]
    fn the_direct_kernel_has_one_output_per_thread() {
        let flat = one_d::<f32>(Axis::Flat, (1, 1 << 16), 1);
        assert_eq!(flat.direct().layout, DIRECT_LINE);
        assert_eq!(two_d::<f32>(64, 1).direct().layout, DIRECT_2D);
        let cols = one_d::<f32>(Axis::Cols, (64, 64), 1).direct();
        assert!(cols.regwin() && !two_d::<f32>(64, 1).direct().regwin());
        assert_eq!(cols.tile_outputs(), (8, 32));
        // A one-row matrix still copies a column-wise window (it must be contiguous).
        assert!(one_d::<f32>(Axis::Cols, (1, 64), 1).direct().regwin());
        let direct = flat.direct();
        assert_ne!(direct.variant(), flat.variant());
        assert!(direct.defines().contains(&("SKEL_DIRECT", "1".into())));
        // The register cap is for tiled kernels only.
        assert_eq!(direct.min_blocks(8).min_blocks, 0);
    }

    #[test]
    fn registers_are_capped_for_tiled_3x3_only() {
        let p = two_d::<f32>(8192, 1);
        assert!(p.cap_pays() && !two_d::<f32>(8192, 2).cap_pays());
        assert!(!one_d::<f32>(Axis::Flat, (1, 1 << 28), 1).cap_pays());
        let capped = p.min_blocks(8);
        assert!(capped.defines().contains(&("SKEL_MIN_BLOCKS", "8".into())));
        assert!(!p.defines().iter().any(|(k, _)| *k == "SKEL_MIN_BLOCKS"));
        assert_ne!(capped.variant(), p.variant());
        assert_eq!(capped.variant_name(), capped.variant());
        assert_eq!(p.variant_name(), p.variant());
    }

    /// Rows of `T` along a 3 x `cols` matrix, radius 2: the pitch keeps tile rows aligned
    /// like global rows, 32 bytes apart, inside the shared bytes.
    fn check_pitch<T: Default>(cols: usize) {
        let p = one_d::<T>(Axis::Rows, (3, cols), 2);
        let size = std::mem::size_of::<T>();
        let pitch = p.pitch().unwrap() as usize;
        assert_eq!(
            (pitch * size) % 16,
            (cols * size) % 16,
            "cols {cols} size {size}"
        );
        let (th, tw) = p.tile_outputs();
        assert!((pitch - tw - 4) * size >= 32);
        assert!(th * pitch * size + 16 <= p.shared_bytes().unwrap());
    }

    #[test]
    fn shared_bytes_cover_the_tile_and_overflow_is_none() {
        let p = one_d::<f32>(Axis::Flat, (1, 1 << 28), 3);
        assert_eq!(p.shared_bytes(), Some((2048 + 6 + 8 + 3) * 4 + 16));
        let huge = one_d::<f32>(Axis::Flat, (1, 10), usize::MAX / 2);
        assert_eq!(huge.shared_bytes(), None);
        check_pitch::<f32>(1000);
        check_pitch::<f32>(1001);
        check_pitch::<[f32; 3]>(7);
        check_pitch::<u8>(33);
        check_pitch::<f64>(5);
        check_pitch::<[f32; 4]>(9);
    }
}
