//! Lazy inputs evaluated inside an OpenCL kernel (see [`crate::backends::chain`]): the
//! kernel parameters that stand for a consumer's element inputs and the element reads of
//! its call, each chain's read replaced by the call of its user function on its own
//! operands. The arguments come from [`super::Inputs`], which walks a lazy operand in the
//! same order.

use std::fmt::Write as _;

use super::{arrays, checked_call_expr, elem_params, uniform_params, CallShape};
use crate::backends::chain::{entry_of, substitute_all, Node, Read, Reads};
use crate::codegen::ir::FnDef;
use crate::codegen::{c_type, Dialect};

/// `, __global const A* in0, ulong in0_off, ..` for the element parameters of `def`, a
/// chain's parameters in place of each input that is one.
pub(crate) fn fused_elem_params(def: &FnDef, reads: &Reads) -> String {
    if !reads.fused() {
        return elem_params(def, "");
    }
    let mut s = String::new();
    for (k, r) in reads.0.iter().enumerate() {
        read_params(&mut s, r, &format!("in{k}"), &format!("lz{k}_"));
    }
    s
}

fn read_params(s: &mut String, r: &Read, leaf: &str, prefix: &str) {
    match r {
        Read::Leaf(t) => {
            let _ = write!(
                s,
                ", __global const {}* {leaf}, ulong {leaf}_off",
                c_type(*t, Dialect::OpenCl)
            );
        }
        Read::Chain(n) => node_params(s, n, prefix),
    }
}

fn node_params(s: &mut String, n: &Node, p: &str) {
    for (e, r) in n.inputs.iter().enumerate() {
        read_params(s, r, &format!("{p}in{e}"), &format!("{p}{e}_"));
    }
    s.push_str(&arrays::container_params(n.def, p));
    s.push_str(&uniform_params(n.def, p));
}

/// `call` (the consumer's call, made by [`checked_call_expr`] with `shape` and no prefix)
/// with the read of each input that is a chain replaced by the chain's call.
pub(crate) fn fuse_call(
    call: String,
    reads: &Reads,
    shape: &CallShape<'_>,
    (defs, entries): (&[&'static FnDef], &[String]),
    checked: bool,
) -> String {
    let mut pairs = Vec::new();
    for (k, r) in reads.0.iter().enumerate() {
        if let Read::Chain(n) = r {
            let read = format!("in{k}[in{k}_off + ({})]", shape.pos);
            let with = node_call(n, &format!("lz{k}_"), shape, (defs, entries), checked);
            pairs.push((read, with));
        }
    }
    substitute_all(&call, &pairs)
}

fn node_call(
    n: &Node,
    p: &str,
    shape: &CallShape<'_>,
    (defs, entries): (&[&'static FnDef], &[String]),
    checked: bool,
) -> String {
    let array = format!("({p}ca0 + {p}ca0_off)");
    let own = CallShape {
        pos: shape.pos,
        base: shape.base,
        array: &array,
        window: ("", ""),
    };
    let entry = entry_of(n.def, defs, entries);
    let call = checked_call_expr(n.def, entry, &own, p, checked);
    let mut pairs = Vec::new();
    for (e, r) in n.inputs.iter().enumerate() {
        if let Read::Chain(c) = r {
            let read = format!("{p}in{e}[{p}in{e}_off + ({})]", shape.pos);
            let with = node_call(c, &format!("{p}{e}_"), shape, (defs, entries), checked);
            pairs.push((read, with));
        }
    }
    substitute_all(&call, &pairs)
}
