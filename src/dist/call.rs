//! What every distributed call does around its local work: the ranks agree on the call
//! before any data moves, exchange values with their status, and agree on the outcome.

use std::rc::Rc;

use super::{Comm, Spread};
use crate::backends::BinaryFn;
use crate::containers::host::{as_bytes, from_bytes};
use crate::containers::{Arg, ArgMut, Shape};
use crate::skeletons::Options;
use crate::{DeviceType, Error, Result};

/// One operand of a call as the ranks compare it: its local shape and, for a block of a
/// distributed container, where the block lies.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Operand {
    shape: Shape,
    spread: Option<Spread>,
}

impl Operand {
    pub(crate) fn new(shape: Shape, spread: Option<Spread>) -> Self {
        Operand { shape, spread }
    }

    pub(crate) fn of<T: DeviceType>(arg: &Arg<'_, T>) -> Self {
        Operand::new(arg.shape(), arg.spread())
    }

    pub(crate) fn of_mut<T: DeviceType>(arg: &ArgMut<'_, T>) -> Self {
        Operand::new(arg.shape(), arg.spread())
    }

    /// Every operand of a tuple (inputs or outputs).
    pub(crate) fn all(shapes: Vec<Shape>, spreads: Vec<Option<Spread>>) -> Vec<Operand> {
        shapes
            .into_iter()
            .zip(spreads)
            .map(|(shape, spread)| Operand::new(shape, spread))
            .collect()
    }

    /// The shape of the whole operand: the global one of a distributed container.
    pub(crate) fn global(&self) -> Shape {
        self.spread.map_or(self.shape, |s| s.global)
    }

    pub(crate) fn is_distributed(&self) -> bool {
        self.spread.is_some()
    }

    fn describe(&self) -> String {
        match self.spread {
            Some(s) => format!("distributed {}", s.global),
            None => format!("local {}", self.shape),
        }
    }
}

/// The error for a distributed operand of a skeleton that has no distributed form.
pub(crate) fn refusal(skeleton: &str) -> Error {
    Error::InvalidArgument(format!(
        "{skeleton} does not take distributed containers (skel::dist) yet: gather them \
         (DistVector::all_gather) and run it on the whole containers"
    ))
}

/// [`Call::agree`] where some operand is distributed; `None` (and no communication) when
/// none is.
pub(crate) fn agree(call: impl FnOnce() -> String, operands: &[Operand]) -> Result<Option<Call>> {
    if !operands.iter().any(Operand::is_distributed) {
        return Ok(None);
    }
    Call::agree(call(), operands).map(Some)
}

/// `options` for this rank's part of a distributed call: `#[index]` counts
/// from where its block of the element-wise `operands` starts in the whole container, as a
/// flat row-major index. The operands have one global shape, hence one block layout.
pub(crate) fn block_options(options: Options, operands: &[Operand]) -> Options {
    let Some(spread) = operands.first().and_then(|o| o.spread) else {
        return options;
    };
    let base = match spread.global {
        Shape::Vector(_) => spread.start,
        Shape::Matrix { cols, .. } => spread.start * cols,
        // No distributed tensor exists; its block would start at a row of `d2`.
        Shape::Tensor3 { d2, .. } => spread.start * d2,
    };
    Options {
        index_base: Some(base),
        ..options
    }
}

/// A call the ranks agreed on.
pub(crate) struct Call {
    comm: Rc<dyn Comm>,
    name: String,
}

const OK: u8 = 1;
const FAILED: u8 = 0;

impl Call {
    /// Every rank describes its call (`call`, e.g. `"Map(add)"`, and every operand's
    /// global shape) and compares it with rank 0's; ranks that disagree get the same
    /// `ShapeMismatch` on every rank.
    pub(crate) fn agree(call: String, operands: &[Operand]) -> Result<Call> {
        let comm = super::comm()?;
        let described: Vec<String> = operands.iter().map(Operand::describe).collect();
        let mine = format!("{call} on [{}]", described.join(", "));
        let all = comm.all_gather(mine.as_bytes())?;
        if let Some((r, theirs)) = all.iter().enumerate().find(|(_, d)| **d != all[0]) {
            return Err(Error::shape(
                format!(
                    "distributed call: rank {r} and rank 0 disagree (every rank makes the same \
                     call on containers of the same global shapes)"
                ),
                String::from_utf8_lossy(&all[0]),
                String::from_utf8_lossy(theirs),
            ));
        }
        Ok(Call { comm, name: call })
    }

    pub(crate) fn rank(&self) -> usize {
        self.comm.rank()
    }

    pub(crate) fn size(&self) -> usize {
        self.comm.size()
    }

    /// Point-to-point messages overlapped with `meanwhile` (see `Comm::exchange_during`).
    pub(crate) fn exchange_during(
        &self,
        sends: &[(usize, Vec<u8>)],
        recvs: &[(usize, usize)],
        meanwhile: &mut dyn FnMut(),
    ) -> Vec<Vec<u8>> {
        self.comm.exchange_during(sends, recvs, meanwhile)
    }

    /// `Err` unless every operand is distributed and all have one global shape (checked
    /// before the local shapes, which differ between ranks).
    pub(crate) fn same_global_shape(&self, operands: &[Operand]) -> Result<Shape> {
        if let Some(k) = operands.iter().position(|o| !o.is_distributed()) {
            return Err(Error::InvalidArgument(format!(
                "distributed {}: operand {k} is a local container; the element-wise operands \
                 of a distributed call are all distributed (DistVector / DistMatrix)",
                self.name
            )));
        }
        let first = operands[0].global();
        for (k, o) in operands.iter().enumerate() {
            if o.global() != first {
                return Err(Error::shape(
                    format!("distributed {} operand {k} against operand 0", self.name),
                    first,
                    o.global(),
                ));
            }
        }
        Ok(first)
    }

    /// `Err` for a user function taking an `#[index]` of `dims` dimensions where this call
    /// can give at most `max_dims` of them their global values (0: none).
    pub(crate) fn no_index(&self, function: &str, dims: u8, max_dims: u8) -> Result<()> {
        if dims > max_dims {
            return Err(Error::InvalidArgument(format!(
                "distributed {}: `{function}` takes a {dims}D #[index], which this skeleton \
                 does not support on distributed containers yet (build the indices with \
                 DistVector::from_fn / DistMatrix::from_fn instead)",
                self.name
            )));
        }
        Ok(())
    }

    /// Every rank's `local` values, in rank order; the error of this rank, or
    /// `Error::Distributed` naming the first rank that failed.
    pub(crate) fn exchange<T: DeviceType>(&self, local: Result<Vec<T>>) -> Result<Vec<Vec<T>>> {
        let msg = status(&local, |v| as_bytes(v).to_vec());
        let all = self.comm.all_gather(&msg)?;
        local?;
        all.iter()
            .enumerate()
            .map(|(r, m)| open(r, m).map(from_bytes))
            .collect()
    }

    /// The outcome of the call on this rank once every rank has finished its part: its own
    /// error, or `Error::Distributed` if another rank failed.
    pub(crate) fn finish<R>(&self, local: Result<R>) -> Result<R> {
        let msg = status(&local, |_| Vec::new());
        let all = self.comm.all_gather(&msg)?;
        let local = local?;
        for (r, m) in all.iter().enumerate() {
            open(r, m)?;
        }
        Ok(local)
    }

    /// Sends `send[q]` to rank `q` (or this rank's error to all), returns what each rank
    /// sent here; fails on every rank when one failed.
    pub(crate) fn all_to_all(&self, send: Result<Vec<Vec<u8>>>) -> Result<Vec<Vec<u8>>> {
        let msgs: Vec<Vec<u8>> = match &send {
            Ok(parts) => parts.iter().map(|p| with_status(OK, p)).collect(),
            Err(e) => vec![with_status(FAILED, e.to_string().as_bytes()); self.size()],
        };
        let got = self.comm.all_to_all(&msgs)?;
        send?;
        got.iter()
            .enumerate()
            .map(|(r, m)| open(r, m).map(<[u8]>::to_vec))
            .collect()
    }
}

fn with_status(tag: u8, payload: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(payload.len() + 1);
    m.push(tag);
    m.extend_from_slice(payload);
    m
}

fn status<R>(local: &Result<R>, payload: impl FnOnce(&R) -> Vec<u8>) -> Vec<u8> {
    match local {
        Ok(v) => with_status(OK, &payload(v)),
        Err(e) => with_status(FAILED, e.to_string().as_bytes()),
    }
}

/// The payload of rank `rank`'s message, or the error it reported.
fn open(rank: usize, msg: &[u8]) -> Result<&[u8]> {
    match msg.split_first() {
        Some((&OK, payload)) => Ok(payload),
        Some((_, text)) => Err(Error::Distributed {
            rank,
            message: String::from_utf8_lossy(text).into_owned(),
        }),
        None => Err(Error::Distributed {
            rank,
            message: "sent an empty message (a different skel version?)".into(),
        }),
    }
}

/// `acc ⊕ v0 ⊕ v1 ...` in order with the user function, on the host (`None` when both
/// are empty).
pub(crate) fn fold<F: BinaryFn<T>, T: DeviceType>(
    acc: Option<T>,
    values: impl IntoIterator<Item = T>,
) -> Result<Option<T>> {
    crate::check::catch(F::NAME, || {
        let mut acc = acc;
        for v in values {
            acc = Some(match acc {
                Some(a) => F::apply((), (a, v), &()),
                None => v,
            });
        }
        Ok(acc)
    })
}
