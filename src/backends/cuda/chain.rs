//! Lazy inputs evaluated inside a CUDA kernel (see [`crate::backends::chain`]): the kernel
//! parameters that stand for a consumer's element inputs and the element reads of its
//! call, each chain's read replaced by the call of its user function on its own operands.
//! The arguments come from `stage_operands`, which walks a lazy operand in the same order.

use std::fmt::Write as _;

use super::{arrays, prefixed_call_expr, ty_name, CallSite};
use crate::backends::chain::{entry_of, substitute_all, Node, Read, Reads};
use crate::codegen::ir::{FnDef, ParamKind};
use crate::codegen::Ty;

/// `, const A* __restrict__ in0, ..` for the element parameters of a consumer, a chain's
/// parameters in place of each input that is one (`reads` fused).
pub(crate) fn fused_input_params(reads: &Reads) -> String {
    let mut s = String::new();
    for (k, r) in reads.0.iter().enumerate() {
        read_params(&mut s, r, &format!("in{k}"), &format!("lz{k}_"));
    }
    s
}

fn read_params(s: &mut String, r: &Read, leaf: &str, prefix: &str) {
    match r {
        Read::Leaf(t) => {
            let _ = write!(s, ", const {}* __restrict__ {leaf}", ty_name(*t));
        }
        Read::Chain(n) => {
            for (e, r) in n.inputs.iter().enumerate() {
                read_params(s, r, &format!("{prefix}in{e}"), &format!("{prefix}{e}_"));
            }
            s.push_str(&arrays::prefixed_params(n.def, prefix));
            let uniforms = n.def.params.iter().filter(|p| p.kind == ParamKind::Uniform);
            for (k, p) in uniforms.enumerate() {
                let _ = write!(s, ", const {} {prefix}u{k}", ty_name(p.ty));
            }
        }
    }
}

/// Every container a fused call reads per element: its name in the kernel and its
/// element type (the vectorised form loads each into `x_<name>[4]`).
pub(crate) fn leaves(reads: &Reads) -> Vec<(String, Ty)> {
    fn walk(r: &Read, leaf: String, prefix: &str, out: &mut Vec<(String, Ty)>) {
        match r {
            Read::Leaf(t) => out.push((leaf, *t)),
            Read::Chain(n) => {
                for (e, r) in n.inputs.iter().enumerate() {
                    walk(r, format!("{prefix}in{e}"), &format!("{prefix}{e}_"), out);
                }
            }
        }
    }
    let mut out = Vec::new();
    for (k, r) in reads.0.iter().enumerate() {
        walk(r, format!("in{k}"), &format!("lz{k}_"), &mut out);
    }
    out
}

/// `call` (the consumer's call, made with `site`) with the read of each input that is a
/// chain replaced by the chain's call.
pub(crate) fn fuse_call(
    call: &str,
    reads: &Reads,
    site: &CallSite<'_>,
    (defs, entries): (&[&'static FnDef], &[String]),
    checked: bool,
) -> String {
    let mut pairs = Vec::new();
    for (k, r) in reads.0.iter().enumerate() {
        if let Read::Chain(n) = r {
            let read = format!("in{k}[{}]", site.pos);
            let with = node_call(n, &format!("lz{k}_"), site, (defs, entries), checked);
            pairs.push((read, with));
        }
    }
    substitute_all(call, &pairs)
}

fn node_call(
    n: &Node,
    p: &str,
    site: &CallSite<'_>,
    (defs, entries): (&[&'static FnDef], &[String]),
    checked: bool,
) -> String {
    let entry = entry_of(n.def, defs, entries);
    let call = prefixed_call_expr(entry, n.def, site, p, checked);
    let mut pairs = Vec::new();
    for (e, r) in n.inputs.iter().enumerate() {
        if let Read::Chain(c) = r {
            let read = format!("{p}in{e}[{}]", site.pos);
            let with = node_call(c, &format!("{p}{e}_"), site, (defs, entries), checked);
            pairs.push((read, with));
        }
    }
    substitute_all(&call, &pairs)
}

/// The vectorised form (`cuda/map.cu`'s `SKEL_VLOAD`, `SKEL_CALLV`, `SKEL_ALIGNED`) of a
/// fused call: every leaf, the chains' included, is loaded four at a time, and the whole
/// fused call reads the loaded values.
pub(crate) fn vector_defines(
    def: &'static FnDef,
    reads: &Reads,
    (defs, entries): (&[&'static FnDef], &[String]),
    checked: bool,
) -> Vec<(&'static str, String)> {
    let leaves = leaves(reads);
    let load: String = leaves
        .iter()
        .map(|(name, t)| {
            format!(
                "{} x_{name}[4]; skel_loadv({name} + (SKEL_I), x_{name}); ",
                ty_name(*t)
            )
        })
        .collect();
    let mut aligned = String::from("(size_t)out");
    for (name, _) in &leaves {
        let _ = write!(aligned, " | (size_t){name}");
    }
    let site = CallSite {
        pos: "(SKEL_I) + (SKEL_V)",
        index: "skel_base + (SKEL_I) + (SKEL_V)",
        window: "",
        stride: "",
    };
    let call = prefixed_call_expr(&entries[0], def, &site, "", checked);
    let call = fuse_call(&call, reads, &site, (defs, entries), checked);
    let pairs: Vec<(String, String)> = leaves
        .iter()
        .map(|(name, _)| {
            (
                format!("{name}[(SKEL_I) + (SKEL_V)]"),
                format!("x_{name}[SKEL_V]"),
            )
        })
        .collect();
    vec![
        ("SKEL_VLOAD(SKEL_I)", load),
        ("SKEL_CALLV(SKEL_I, SKEL_V)", substitute_all(&call, &pairs)),
        ("SKEL_ALIGNED", format!("((({aligned}) & 15) == 0)")),
    ]
}
