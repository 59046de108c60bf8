//! Beyond one process: containers block-distributed over MPI ranks and the skeletons that
//! run on them (feature `mpi`, on [rsmpi](https://docs.rs/mpi) and the system's MPI
//! library).
//!
//! [`init`] starts MPI and returns the [`World`]. A [`DistVector`] holds one contiguous
//! block of a global vector on every rank (balanced: the first `len % ranks` ranks hold one
//! element more); a [`DistMatrix`] holds a block of whole rows. Every skeleton takes them
//! where it takes a `Vector` / `Matrix`, with the same call on every rank:
//!
//! ```
//! # #[cfg(feature = "mpi")] {
//! use skel::prelude::*;
//! use skel::dist::{self, DistVector};
//! #[userfn]
//! fn add(a: f64, b: f64) -> f64 { a + b }
//! let world = dist::init()?;
//! let a = DistVector::from_fn(&world, 1000, |i| i as f64); // each rank fills its own block
//! let mut s = DistVector::zeroed(&world, 1000);
//! Scan::new(add).run(&a, &mut s)?;                          // a global prefix sum
//! let total: f64 = Reduce::new(add).run(&a)?;               // the same on every rank
//! if let Some(all) = s.gather(0)? {
//!     assert_eq!(all[999], total);
//! }
//! # }
//! # Ok::<(), skel::Error>(())
//! ```
//!
//! Each rank runs its block on its own backend (the usual selection; [`init`] points
//! `SKEL_CUDA_DEVICE` at the node-local rank, so one rank per GPU), and the distributed
//! layer (`exec.rs`, which the backends' dispatch picks for a call with a distributed
//! operand) adds the communication:
//! - Map: none (each rank writes its block);
//! - Reduce, MapReduce: a local fold per rank, then the partials of all ranks are exchanged
//!   and folded in rank order with the user function, so the result is the same on every
//!   rank and needs only associativity, as on one process;
//! - Scan: the block totals are exchanged and each rank starts its block from the fold of
//!   the totals before it;
//! - MapOverlap (1D, column-wise and 2D; row-wise needs none): each rank posts
//!   non-blocking sends and receives of the `r` elements (rows) on either side of its block
//!   to and from the ranks that hold them (the neighbours, or further ranks for blocks
//!   shorter than `r`), honouring the edge mode at the global ends, computes the interior
//!   of its block while they are in flight, then its borders; `Reduce::run_rows` /
//!   `run_cols` on a [`DistMatrix`] work too.
//!
//! - MapArray's array and container arguments bound with `.arrays(..)`: every element may
//!   read all of it, so a distributed one is all-gathered on every rank, once: the copy is
//!   cached in the container and used again until some rank borrows its container
//!   mutably (`local_mut`, or as a skeleton's output); then the next call gathers anew on
//!   every rank (the ranks exchange one flag per such argument to agree on it).
//!   [`World::argument_gathers`] counts the gathers.
//!
//! - MapPairs, MapPairsReduce: `v` and the output are distributed by rows (`run_cols`: by
//!   the elements of the output), `h` is needed whole by every rank and gathered and
//!   cached like a container argument; column folds are folded across ranks in rank order.
//!
//! Element indices (`#[index]`) of Map, MapArray and MapReduce (a flat index) on
//! distributed operands are the global ones on every backend (each rank's block starts at
//! its first global element, `Options::index_base`); a 2D index in MapReduce, MapPairs /
//! MapPairsReduce indices and Filter are refused with an error for now.
//!
//! # Errors on several ranks
//! Before any data moves, the ranks compare a description of the call (skeleton, user
//! function, global shapes): if one rank calls something else, or with other global
//! shapes, every rank gets the same `Error::ShapeMismatch` naming both descriptions. After
//! the local work, the ranks exchange whether it succeeded: if it failed on one rank (a
//! checked user function, a device error), that rank returns its own error and every other
//! rank returns [`Error::Distributed`] naming it, and no rank
//! waits forever. A rank that dies (a crash, `abort`) takes the job down: MPI's default
//! error handler aborts all ranks.

/// `Input` / `Output` of a distributed container: its local block, marked with where the
/// block lies (`spread()`).
macro_rules! block_operand {
    ($container:ident, $whole:ident) => {
        impl<T: DeviceType> crate::containers::sealed::Container for $container<T> {}

        impl<T: DeviceType> Input<T> for $container<T> {
            fn arg(&self) -> Arg<'_, T> {
                let spread = self.spread();
                self.local.arg().spread_over(spread)
            }

            fn gather_whole(&self, slot: &super::WholeCell) -> Result<()> {
                super::vector::cache_whole(&self.world, &self.whole, slot, self.arg(), |all| {
                    self.assemble(all)
                })
            }

            fn whole_arg<'k>(&'k self, slot: &'k super::WholeCell) -> Arg<'k, T> {
                match slot.get().and_then(|w| (**w).downcast_ref::<$whole<T>>()) {
                    Some(whole) => whole.arg(),
                    None => self.arg(),
                }
            }
        }

        impl<T: DeviceType> Output<T> for $container<T> {
            fn arg_mut(&mut self) -> ArgMut<'_, T> {
                // Whatever writes the block makes every rank's whole copy stale.
                *self.whole.get_mut() = None;
                let spread = self.spread();
                self.local.arg_mut().spread_over(spread)
            }
        }
    };
}

mod matrix;
mod vector;
mod world;

mod call;
mod exec;
mod layout;
mod map_overlap;
mod map_pairs;
mod map_pairs_reduce;
mod map_reduce;
mod reduce;
mod scan;

pub use matrix::DistMatrix;
pub use vector::DistVector;
pub use world::{init, World};

use call::refusal;
use call::{agree, block_options, fold, Call, Operand};
pub(crate) use exec::Distributed;
use layout::Blocks;
use map_overlap::{map_overlap, map_overlap_2d};
use map_pairs_reduce::map_pairs_reduce_cols;
use map_reduce::map_reduce;
use reduce::{reduce, reduce_axis};
use scan::scan;

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

use crate::containers::{Shape, WholeCell, WholeCells};
use crate::{Error, Result};

/// Where the block an operand holds lies in its distributed container.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spread {
    /// The shape of the whole container.
    pub(crate) global: Shape,
    /// The first unit of the block: an element of a vector, a row of a matrix.
    pub(crate) start: usize,
}

thread_local! {
    static WHOLE_GATHERS: Cell<usize> = const { Cell::new(0) };
}

/// Counts one all-gather of a whole distributed container for a call.
fn count_whole_gather() {
    WHOLE_GATHERS.with(|g| g.set(g.get() + 1));
}

/// How many times this thread has all-gathered a distributed container for a call.
fn whole_gathers() -> usize {
    WHOLE_GATHERS.with(Cell::get)
}

/// What the skeletons need of MPI: two collectives on byte messages.
pub(crate) trait Comm {
    /// This process's rank.
    fn rank(&self) -> usize;
    /// Number of ranks.
    fn size(&self) -> usize;
    /// Every rank's `mine`, in rank order (all ranks call it).
    fn all_gather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>>;
    /// Sends `send[q]` to rank `q`; returns what each rank sent to this one, in rank order.
    fn all_to_all(&self, send: &[Vec<u8>]) -> Result<Vec<Vec<u8>>>;
    /// Point to point, without blocking: sends `sends[i].1` to rank `sends[i].0` and
    /// receives `recvs[i].1` bytes from rank `recvs[i].0` (both sides know every size; at
    /// most one message from one rank to another per call, none to itself), runs
    /// `meanwhile` while the messages are in flight, then waits for all of them. Returns
    /// the received messages in the order of `recvs`.
    fn exchange_during(
        &self,
        sends: &[(usize, Vec<u8>)],
        recvs: &[(usize, usize)],
        meanwhile: &mut dyn FnMut(),
    ) -> Vec<Vec<u8>>;
}

thread_local! {
    // Weak: the `World` the user holds owns MPI, and dropping it finalises MPI.
    static COMM: RefCell<Option<Weak<dyn Comm>>> = const { RefCell::new(None) };
}

/// Makes `comm` the communicator of the distributed skeletons on this thread.
pub(crate) fn register(comm: Weak<dyn Comm>) {
    COMM.with(|c| *c.borrow_mut() = Some(comm));
}

/// The communicator [`init`] registered, while its `World` lives.
pub(crate) fn comm() -> Result<Rc<dyn Comm>> {
    COMM.with(|c| c.borrow().as_ref().and_then(Weak::upgrade))
        .ok_or_else(|| {
            Error::InvalidArgument(
                "a distributed container was used on a thread other than the one that called \
                 skel::dist::init (MPI runs single-threaded here), or after its World was dropped"
                    .into(),
            )
        })
}
