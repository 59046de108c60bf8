//! The checked variant's guards: the fault record helpers, index checks and window-offset
//! checks.

use super::function::FnEmitter;
use crate::check::FaultKind;
use crate::codegen::dialect::{c_type, Dialect};
use crate::codegen::{Prim, Ty};

impl FnEmitter<'_> {
    /// The checked variant's fault recording: `skel_fault_rec` keeps the first fault of a
    /// launch (an atomic compare-and-swap of its code), `skel_chk` passes an index in range
    /// and records any other, going on with index 0.
    pub(super) fn fault_helpers(&mut self) {
        let d = self.d();
        let (u32t, u64t, i64t) = (
            c_type(Ty::Prim(Prim::U32), d),
            c_type(Ty::Prim(Prim::U64), d),
            c_type(Ty::Prim(Prim::I64), d),
        );
        let (space, claim) = match d {
            Dialect::Cuda => ("", "atomicCAS(f, 0u, code) == 0u"),
            Dialect::OpenCl => (
                "__global",
                "atomic_cmpxchg((volatile __global uint*)f, 0u, code) == 0u",
            ),
            Dialect::HostC => ("", "f[0] == 0u && (f[0] = code, 1)"),
        };
        let code = FaultKind::Index.code();
        // `skel_0` sorts before every other helper, which may call these.
        self.helper_fn("skel_0fault".into(), |_| {
            format!(
                "#ifndef SKEL_FAULT_SPACE\n#define SKEL_FAULT_SPACE {space}\n#endif\n\
                 SKEL_FN void skel_fault_rec(SKEL_FAULT_SPACE {u32t}* f, {u32t} code, {i64t} index, {u64t} len, {u32t} id) {{ \
                 if ({claim}) {{ f[1] = ({u32t})index; f[2] = ({u32t})(({u64t})index >> 32); \
                 f[3] = ({u32t})len; f[4] = ({u32t})(len >> 32); f[5] = id; }} }}\n\
                 SKEL_FN {u64t} skel_chk(SKEL_FAULT_SPACE {u32t}* f, {u64t} i, {u64t} len, {u32t} id) {{ \
                 if (i < len) return i; skel_fault_rec(f, {code}u, ({i64t})i, len, id); return 0; }}\n"
            )
        });
    }

    /// `i` checked against `len` (the checked variant) or clamped into `0..len` (the
    /// unchecked one: an index out of range reads the last element, an unspecified but
    /// valid value, so no unchecked call leaves its buffers). A `len` of 0 gives 0.
    pub(super) fn safe_index(&mut self, i: &str, len: &str) -> String {
        if self.prog.checked {
            return self.check_index(i, len);
        }
        let u64t = c_type(Ty::Prim(Prim::U64), self.d());
        let name = self.helper_fn("skel_0idx".into(), |n| {
            format!(
                "SKEL_FN {u64t} {n}({u64t} i, {u64t} len) {{ return i < len ? i : len - (len != 0); }}\n"
            )
        });
        format!("{name}(({u64t})({i}), ({u64t})({len}))")
    }

    /// `i`, checked against `len` in the checked variant.
    pub(super) fn check_index(&mut self, i: &str, len: &str) -> String {
        self.fault_helpers();
        let u64t = c_type(Ty::Prim(Prim::U64), self.d());
        let id = self.prog.current;
        format!("skel_chk(skel_fault, ({u64t})({i}), ({u64t})({len}), {id}u)")
    }

    /// The position in a checked window of offset `offs[0]` (a 1D window of radius
    /// `radii[0]`) or of offsets `(offs[0], offs[1])` (a 2D window of radii `radii`, rows
    /// `stride` apart): an offset beyond its radius is a [`FaultKind::Window`] fault, the row
    /// offset checked first as on the CPU, and reads the centre.
    pub(super) fn check_window(
        &mut self,
        offs: &[&str],
        radii: &[String],
        stride: Option<&str>,
    ) -> String {
        if !self.prog.checked {
            return self.clamp_window(offs, radii, stride);
        }
        self.fault_helpers();
        let d = self.d();
        let (u32t, u64t, i64t) = (
            c_type(Ty::Prim(Prim::U32), d),
            c_type(Ty::Prim(Prim::U64), d),
            c_type(Ty::Prim(Prim::I64), d),
        );
        let code = FaultKind::Window.code();
        let name = self.helper_fn("skel_chkw".into(), |n| {
            format!(
                "SKEL_FN int {n}(SKEL_FAULT_SPACE {u32t}* f, {i64t} i, {i64t} r, {u32t} id) {{ \
                 if (i >= -r && i <= r) return 1; \
                 skel_fault_rec(f, {code}u, i, ({u64t})(2 * r + 1), id); return 0; }}\n"
            )
        });
        let id = self.prog.current;
        let ok = |k: usize| {
            format!(
                "{name}(skel_fault, ({i64t})({}), {}, {id}u)",
                offs[k], radii[k]
            )
        };
        match stride {
            None => format!("({} ? ({}) : 0)", ok(0), offs[0]),
            // `&&` stops at the row: a bad row offset is the fault, as on the CPU.
            Some(s) => format!(
                "({} && {} ? ({}) * {s} + ({}) : 0)",
                ok(0),
                ok(1),
                offs[0],
                offs[1]
            ),
        }
    }

    /// The element offset of `w[(di, dj, dk)]` in a 3D window whose planes and rows are
    /// `strides` apart: each offset checked against its radius (the first bad one is the
    /// fault, as on the CPU), or in the unchecked variant clamped into it.
    pub(super) fn check_window3(
        &mut self,
        offs: [&str; 3],
        radii: &[String],
        strides: &[String; 2],
    ) -> String {
        let [s0, s1] = strides;
        if !self.prog.checked {
            let i64t = c_type(Ty::Prim(Prim::I64), self.d());
            let name = self.helper_fn("skel_0win".into(), |n| {
                format!("SKEL_FN {i64t} {n}({i64t} i, {i64t} r) {{ return i < -r ? -r : i > r ? r : i; }}\n")
            });
            let at = |k: usize| format!("{name}(({i64t})({}), {})", offs[k], radii[k]);
            return format!("{} * {s0} + {} * {s1} + {}", at(0), at(1), at(2));
        }
        self.fault_helpers();
        let d = self.d();
        let (u32t, u64t, i64t) = (
            c_type(Ty::Prim(Prim::U32), d),
            c_type(Ty::Prim(Prim::U64), d),
            c_type(Ty::Prim(Prim::I64), d),
        );
        let code = FaultKind::Window.code();
        let name = self.helper_fn("skel_chkw".into(), |n| {
            format!(
                "SKEL_FN int {n}(SKEL_FAULT_SPACE {u32t}* f, {i64t} i, {i64t} r, {u32t} id) {{ \
                 if (i >= -r && i <= r) return 1; \
                 skel_fault_rec(f, {code}u, i, ({u64t})(2 * r + 1), id); return 0; }}\n"
            )
        });
        let id = self.prog.current;
        let ok = |k: usize| {
            format!(
                "{name}(skel_fault, ({i64t})({}), {}, {id}u)",
                offs[k], radii[k]
            )
        };
        format!(
            "({} && {} && {} ? ({}) * {s0} + ({}) * {s1} + ({}) : 0)",
            ok(0),
            ok(1),
            ok(2),
            offs[0],
            offs[1],
            offs[2]
        )
    }

    /// [`check_window`](Self::check_window) of the unchecked variant: each offset clamped
    /// into its radius (an unspecified but valid element of the window).
    fn clamp_window(&mut self, offs: &[&str], radii: &[String], stride: Option<&str>) -> String {
        let i64t = c_type(Ty::Prim(Prim::I64), self.d());
        let name = self.helper_fn("skel_0win".into(), |n| {
            format!("SKEL_FN {i64t} {n}({i64t} i, {i64t} r) {{ return i < -r ? -r : i > r ? r : i; }}\n")
        });
        let at = |k: usize| format!("{name}(({i64t})({}), {})", offs[k], radii[k]);
        match stride {
            None => at(0),
            Some(s) => format!("{} * {s} + {}", at(0), at(1)),
        }
    }
}
