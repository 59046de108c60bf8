//! Lazy inputs as a GPU kernel reads them: each element input of a consumer is a container
//! (a leaf) or a chain, a lazy Map's user function over its own inputs (leaves or chains),
//! container arguments and uniforms, evaluated per element inside the consumer's kernel so
//! that the intermediate never exists (`skeletons::lazy`).
//!
//! A chain's kernel parameters and arguments follow the order in which
//! [`ArgVisitor`] walks a lazy operand: its element inputs (a chain's own parameters in
//! place of a container's), then its container arguments, then its uniforms. Names nest
//! by prefix: input `k` of a consumer that is a chain is `lz<k>_`, input `e` of a chain
//! with prefix `P` is `P<e>_` when it is a chain itself and `Pin<e>` when it is a leaf.

use std::hash::{Hash, Hasher};

use crate::codegen::ir::FnDef;
use crate::codegen::Ty;
use crate::containers::Arg;
use crate::plan::{ArgTuple, ArgVisitor};
use crate::{DeviceType, Result};

/// One element input of a kernel.
#[derive(Clone, Debug)]
pub(crate) enum Read {
    /// A container of this element type.
    Leaf(Ty),
    /// A lazy Map evaluated per element.
    Chain(Node),
}

/// A lazy Map: its user function and its element inputs.
#[derive(Clone, Debug)]
pub(crate) struct Node {
    pub(crate) def: &'static FnDef,
    pub(crate) inputs: Vec<Read>,
}

/// The element inputs of one call, as its kernel reads them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Reads(pub(crate) Vec<Read>);

impl Reads {
    /// The reads of `inputs` (walks the operands; uploads nothing).
    pub(crate) fn of<'a>(inputs: &impl ArgTuple<'a>) -> Result<Reads> {
        let mut r = Shapes::default();
        inputs.visit(&mut r)?;
        Ok(Reads(r.top))
    }

    /// Whether any input is a chain.
    pub(crate) fn fused(&self) -> bool {
        self.0.iter().any(|r| matches!(r, Read::Chain(_)))
    }

    /// A key of the chains' structure for the kernel caches: which user functions (by
    /// address: each `#[userfn]` has one static definition) over which leaves, in order.
    /// 0 where nothing is fused (the key of the plain kernel).
    pub(crate) fn key(&self) -> u64 {
        if !self.fused() {
            return 0;
        }
        fn walk(r: &Read, h: &mut impl Hasher) {
            match r {
                Read::Leaf(t) => {
                    0u8.hash(h);
                    format!("{t:?}").hash(h);
                }
                Read::Chain(n) => {
                    1u8.hash(h);
                    (n.def as *const FnDef as usize).hash(h);
                    n.inputs.len().hash(h);
                    n.inputs.iter().for_each(|r| walk(r, h));
                }
            }
        }
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.0.iter().for_each(|r| walk(r, &mut h));
        // Never 0, the plain kernel's key.
        h.finish() | 1
    }

    /// The user functions a kernel's source holds: the consumer's `own`, then those of
    /// every chain, each once.
    pub(crate) fn with_defs(&self, own: &[&'static FnDef]) -> Vec<&'static FnDef> {
        let mut all = own.to_vec();
        for d in self.defs() {
            if !all.iter().any(|o| std::ptr::eq(*o, d)) {
                all.push(d);
            }
        }
        all
    }

    /// The user functions of every chain, each once, in the order first met.
    pub(crate) fn defs(&self) -> Vec<&'static FnDef> {
        fn walk(r: &Read, out: &mut Vec<&'static FnDef>) {
            if let Read::Chain(n) = r {
                if !out.iter().any(|d| std::ptr::eq(*d, n.def)) {
                    out.push(n.def);
                }
                n.inputs.iter().for_each(|r| walk(r, out));
            }
        }
        let mut out = Vec::new();
        self.0.iter().for_each(|r| walk(r, &mut out));
        out
    }
}

/// The entry name of `def` among `defs` / `entries` (parallel lists, as the device source
/// generator returns them).
pub(crate) fn entry_of<'e>(def: &FnDef, defs: &[&'static FnDef], entries: &'e [String]) -> &'e str {
    let at = defs
        .iter()
        .position(|d| std::ptr::eq(*d, def))
        .unwrap_or_default();
    &entries[at]
}

/// `call` with each `(read, with)` replaced: the reads first by placeholders, longest
/// first (a leaf's name may end in another's: `lz0_in1` in `in1`), then the placeholders by
/// the parenthesised replacements (which may hold names of the other reads).
pub(crate) fn substitute_all(call: &str, pairs: &[(String, String)]) -> String {
    let mut order: Vec<usize> = (0..pairs.len()).collect();
    order.sort_by_key(|&k| std::cmp::Reverse(pairs[k].0.len()));
    let mut s = call.to_string();
    for &k in &order {
        s = s.replace(&pairs[k].0, &format!("\u{1}{k}\u{1}"));
    }
    for (k, (_, with)) in pairs.iter().enumerate() {
        s = s.replace(&format!("\u{1}{k}\u{1}"), &format!("({with})"));
    }
    s
}

/// The visitor that records the reads.
#[derive(Default)]
struct Shapes {
    top: Vec<Read>,
    open: Vec<Node>,
}

impl Shapes {
    fn push(&mut self, r: Read) {
        match self.open.last_mut() {
            Some(n) => n.inputs.push(r),
            None => self.top.push(r),
        }
    }
}

impl ArgVisitor for Shapes {
    fn visit<T: DeviceType>(&mut self, _: Arg<'_, T>) -> Result<()> {
        self.push(Read::Leaf(T::TY));
        Ok(())
    }
    fn chain(&mut self, def: &'static FnDef) -> bool {
        self.open.push(Node {
            def,
            inputs: Vec::new(),
        });
        true
    }
    fn array<T: DeviceType>(&mut self, _: Arg<'_, T>) -> Result<()> {
        Ok(())
    }
    fn chain_end(&mut self) {
        if let Some(n) = self.open.pop() {
            self.push(Read::Chain(n));
        }
    }
}
