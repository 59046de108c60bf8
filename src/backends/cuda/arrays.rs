//! Container arguments on CUDA: each `Mat<T>` / `&[T]` bound with `.arrays(..)` is made
//! readable whole on every stream a call uses (uploaded once: later chunks and later calls
//! find it valid on the device) and passed to the kernel as a pointer with its rows and
//! columns (see [`crate::backends::args`] for the names).

use std::sync::Arc;

use cudarc::driver::sys;

use super::context::{Ctx, Lane};
use super::memory::{self, CuEvent};
use super::module_cache::KernelArgs;
use super::trace::Tag;
use super::ty_name;
use crate::backends::args::{containers, single_array};
use crate::codegen::ir::FnDef;
use crate::containers::Arg;
use crate::plan::{ArgTuple, ArgVisitor};
use crate::{DeviceType, Result};

/// Kernel parameters for the container arguments of `def`: `, const T* __restrict__ ca<k>,
/// skel_u64 ca<k>_rows, skel_u64 ca<k>_cols` each (`arr` for a lone `&[T]`).
pub(crate) fn container_params(def: &FnDef) -> String {
    prefixed_params(def, "")
}

/// [`container_params`] with each name prefixed by `prefix` (a lazy input's user function,
/// `backends::chain`).
pub(crate) fn prefixed_params(def: &FnDef, prefix: &str) -> String {
    let single = single_array(def);
    containers(def)
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let name = if single {
                format!("{prefix}arr")
            } else {
                format!("{prefix}ca{k}")
            };
            format!(
                ", const {}* __restrict__ {name}, skel_u64 {name}_rows, skel_u64 {name}_cols",
                ty_name(p.ty)
            )
        })
        .collect()
}

/// Device address, rows and columns of each container argument, readable on one stream.
pub(crate) type Staged = Vec<(sys::CUdeviceptr, u64, u64)>;

struct Whole<'c> {
    ctx: &'c Ctx,
    lane: Lane,
    tag: Tag,
    done: Option<&'c Arc<CuEvent>>,
    staged: Staged,
}

impl ArgVisitor for Whole<'_> {
    fn visit<T: DeviceType>(&mut self, arg: Arg<'_, T>) -> Result<()> {
        let all = 0..arg.shape().len();
        match self.done {
            None => {
                let ptr = if all.is_empty() {
                    0
                } else {
                    memory::input_part(self.ctx, &arg, all, self.lane, self.tag)?
                };
                let (rows, cols) = arg.shape().dims();
                self.staged.push((ptr, rows as u64, cols as u64));
            }
            Some(ev) if !all.is_empty() => memory::read_by(self.ctx, &arg, all, ev)?,
            Some(_) => {}
        }
        Ok(())
    }
}

/// Makes every container of `arrays` readable by work on `lane`.
pub(crate) fn stage<'a>(
    ctx: &Ctx,
    arrays: &impl ArgTuple<'a>,
    lane: Lane,
    tag: Tag,
) -> Result<Staged> {
    let mut w = Whole {
        ctx,
        lane,
        tag,
        done: None,
        staged: Vec::new(),
    };
    arrays.visit(&mut w)?;
    Ok(w.staged)
}

/// Records that the work before `ev` (on `lane`) read every container of `arrays`.
pub(crate) fn read<'a>(
    ctx: &Ctx,
    arrays: &impl ArgTuple<'a>,
    (lane, tag): (Lane, Tag),
    ev: &Arc<CuEvent>,
) -> Result<()> {
    arrays.visit(&mut Whole {
        ctx,
        lane,
        tag,
        done: Some(ev),
        staged: Vec::new(),
    })
}

/// Appends the staged containers to a kernel's arguments: pointers only (`dims` false,
/// MapArray's array) or each with its rows and columns.
pub(crate) fn push(args: &mut KernelArgs, staged: &Staged, dims: bool) {
    for &(ptr, rows, cols) in staged {
        args.ptr(ptr);
        if dims {
            args.u64(rows).u64(cols);
        }
    }
}
