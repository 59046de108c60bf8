//! The entry points: a program of user functions (each emitted once, callees first) and its
//! C source.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;

use super::array_len::visit_block;
use super::types::aggregate_decl;
use super::{key, R};
use crate::codegen::dialect::{prelude, Dialect};
use crate::codegen::ir::{Expr, FnDef};
use crate::codegen::typeck;
use crate::codegen::Ty;
use crate::userfn::UserFn;
use crate::Error;

/// Generated C source of one or more user functions, ready to be prepended to a kernel.
///
/// ```
/// use skel::prelude::*;
/// use skel::plumbing::codegen::{device_source, Dialect};
/// #[userfn]
/// fn add(a: f32, b: f32) -> f32 { a + b }
/// let src = device_source::<add>(Dialect::Cuda)?;
/// assert_eq!(src.entry(), "skel_fn_add");
/// assert!(src.source.contains("float skel_fn_add(float a, float b)"));
/// # Ok::<(), skel::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceSource {
    /// Prelude, struct typedefs, helpers and every needed function, in dependency order.
    pub source: String,
    /// C identifiers of the requested functions, in the order they were requested.
    pub entries: Vec<String>,
}

/// The comment a generated source states its local arrays' bytes with.
const LOCAL_BYTES: &str = "/* skel: local arrays of ";

impl DeviceSource {
    /// C identifier of the first requested function.
    pub fn entry(&self) -> &str {
        &self.entries[0]
    }

    /// The bytes of the local arrays of every function in the source, added up: the
    /// private memory one thread needs beyond its scalars (at most
    /// [`MAX_LOCAL_ARRAY_BYTES`](crate::userfn::MAX_LOCAL_ARRAY_BYTES) per array).
    ///
    /// ```
    /// use skel::plumbing::codegen::{device_source, Dialect};
    /// use skel::prelude::*;
    ///
    /// #[userfn]
    /// fn hist(x: u32) -> u32 {
    ///     let mut bins = [0u32; 256];
    ///     bins[(x % 256) as usize] += 1;
    ///     bins[0]
    /// }
    /// assert_eq!(device_source::<hist>(Dialect::OpenCl)?.local_array_bytes(), 1024);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn local_array_bytes(&self) -> usize {
        local_array_bytes_of(&self.source)
    }
}

/// The bytes a generated source (or a kernel source containing one) states for its local
/// arrays, 0 when it states none.
#[doc(hidden)]
pub fn local_array_bytes_of(source: &str) -> usize {
    source
        .find(LOCAL_BYTES)
        .and_then(|at| {
            let rest = &source[at + LOCAL_BYTES.len()..];
            rest[..rest.find(' ')?].parse().ok()
        })
        .unwrap_or(0)
}

/// Translates user function `F` (and everything it calls) to C in `dialect`.
///
/// The emitted function follows the calling convention of [`crate::codegen`]. Errors are
/// [`Error::Compile`] with the reason in `log`.
///
/// ```
/// use skel::prelude::*;
/// use skel::plumbing::codegen::{device_source, Dialect};
/// #[userfn]
/// fn half(x: f32) -> f32 { x * 0.5 }
/// let src = device_source::<half>(Dialect::OpenCl)?;
/// assert!(src.source.contains("0.5f"));
/// # Ok::<(), skel::Error>(())
/// ```
pub fn device_source<F: UserFn>(dialect: Dialect) -> crate::Result<DeviceSource> {
    device_source_multi(&[F::definition()], dialect)
}

/// Like [`device_source`] for several functions sharing one program (e.g. the map and the
/// reduce function of a MapReduce): structs and common callees are emitted once.
///
/// ```
/// use skel::prelude::*;
/// use skel::userfn::UserFn;
/// use skel::plumbing::codegen::{device_source_multi, Dialect};
/// #[userfn]
/// fn mult(a: f32, b: f32) -> f32 { a * b }
/// #[userfn]
/// fn add(a: f32, b: f32) -> f32 { a + b }
/// let src = device_source_multi(&[mult::definition(), add::definition()], Dialect::Cuda)?;
/// assert_eq!(src.entries, ["skel_fn_mult", "skel_fn_add"]);
/// # Ok::<(), skel::Error>(())
/// ```
pub fn device_source_multi(
    defs: &[&'static FnDef],
    dialect: Dialect,
) -> crate::Result<DeviceSource> {
    device_source_checked(defs, dialect, false)
}

/// Like [`device_source_multi`]; with `checked`, the checked variant: every function takes
/// a fault record `SKEL_FAULT_SPACE unsigned* skel_fault` first (every array parameter its
/// length after the pointer, a window its radius, a 2D window its row and column radii
/// after the stride); an index out of range of an array parameter or a local array, a
/// window offset beyond the radius, or an integer division or remainder by zero, stores the
/// first fault there
/// (`[code, index low, index high, len low, len high, function]`, code from
/// [`crate::check::FaultKind::code`], function the position in
/// [`checked_functions`]) and goes on with index 0 / result 0.
///
/// ```
/// use skel::prelude::*;
/// use skel::userfn::UserFn;
/// use skel::plumbing::codegen::{device_source_checked, Dialect};
/// #[userfn]
/// fn pick(t: &[f32], i: u32) -> f32 { t[i as usize] }
/// let src = device_source_checked(&[pick::definition()], Dialect::OpenCl, true)?;
/// assert!(src.source.contains("skel_fn_pick(SKEL_FAULT_SPACE uint* skel_fault"));
/// assert!(src.source.contains("skel_chk(skel_fault"));
/// # Ok::<(), skel::Error>(())
/// ```
#[doc(hidden)]
pub fn device_source_checked(
    defs: &[&'static FnDef],
    dialect: Dialect,
    checked: bool,
) -> crate::Result<DeviceSource> {
    let kernel = defs.first().map(|d| d.name).unwrap_or("");
    let mut prog = Program {
        checked,
        current: 0,
        dialect,
        names: HashMap::new(),
        used_fn_names: HashSet::new(),
        order: Vec::new(),
        aggregates: Vec::new(),
        helpers: BTreeMap::new(),
    };
    let build = |prog: &mut Program| -> R<DeviceSource> {
        for d in defs {
            prog.collect(d, &mut Vec::new())?;
        }
        let mut fns = String::new();
        let mut local_bytes = 0;
        for (id, def) in prog.order.clone().into_iter().enumerate() {
            prog.current = id;
            let body =
                typeck::check(def).map_err(|m| format!("in user function `{}`: {m}", def.name))?;
            local_bytes += body.local_array_bytes();
            fns.push_str(
                &prog
                    .emit_fn(def, &body)
                    .map_err(|m| format!("in user function `{}`: {m}", def.name))?,
            );
        }
        let mut out = String::from(prelude(dialect));
        out.push('\n');
        if local_bytes > 0 {
            let _ = writeln!(out, "{LOCAL_BYTES}{local_bytes} bytes per thread */");
        }
        for t in &prog.aggregates {
            out.push_str(&aggregate_decl(*t, dialect));
        }
        for code in prog.helpers.values() {
            out.push_str(code);
        }
        out.push_str(&fns);
        let entries = defs.iter().map(|d| prog.names[&key(d)].clone()).collect();
        Ok(DeviceSource {
            source: out,
            entries,
        })
    };
    build(&mut prog).map_err(|log| Error::Compile {
        kernel: kernel.to_string(),
        log,
        source_code: String::new(),
    })
}

/// The functions of the program of `defs`, in the order a fault record numbers them.
#[doc(hidden)]
pub fn checked_functions(defs: &[&'static FnDef]) -> Vec<&'static str> {
    let mut prog = Program {
        checked: true,
        current: 0,
        dialect: Dialect::HostC,
        names: HashMap::new(),
        used_fn_names: HashSet::new(),
        order: Vec::new(),
        aggregates: Vec::new(),
        helpers: BTreeMap::new(),
    };
    for d in defs {
        // A recursive program never compiles, so it never records a fault.
        if prog.collect(d, &mut Vec::new()).is_err() {
            return Vec::new();
        }
    }
    prog.order.iter().map(|d| d.name).collect()
}

pub(super) struct Program {
    /// The checked variant (see [`device_source_checked`]).
    pub(super) checked: bool,
    /// The position in `order` of the function being emitted (its id in a fault record).
    pub(super) current: usize,
    pub(super) dialect: Dialect,
    pub(super) names: HashMap<usize, String>,
    pub(super) used_fn_names: HashSet<String>,
    pub(super) order: Vec<&'static FnDef>,
    /// Struct, array and tuple types in dependency order.
    pub(super) aggregates: Vec<Ty>,
    pub(super) helpers: BTreeMap<String, String>,
}

impl Program {
    fn collect(&mut self, def: &'static FnDef, stack: &mut Vec<usize>) -> R<()> {
        let k = key(def);
        if self.names.contains_key(&k) {
            return Ok(());
        }
        if stack.contains(&k) {
            return Err(format!(
                "user function `{}` is recursive, which device code does not allow",
                def.name
            ));
        }
        stack.push(k);
        let mut callees = Vec::new();
        visit_block(&def.body, &mut |e| {
            if let Expr::Call { callee, .. } = e {
                callees.push(callee());
            }
        });
        for c in callees {
            self.collect(c, stack)?;
        }
        stack.pop();
        let base = format!("skel_fn_{}", def.name);
        let mut name = base.clone();
        let mut n = 2;
        while self.used_fn_names.contains(&name) {
            name = format!("{base}_{n}");
            n += 1;
        }
        self.used_fn_names.insert(name.clone());
        self.names.insert(k, name);
        self.order.push(def);
        Ok(())
    }
}
