//! MPI itself: starting it, the world communicator, and the two collectives the
//! distributed skeletons use.

use std::fmt;
use std::rc::{Rc, Weak};

use mpi::datatype::{Partition, PartitionMut};
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use mpi::Count;

use super::Comm;
use crate::{Error, Result};

/// All the processes of an MPI job (`MPI_COMM_WORLD`), from [`init`]. Cloning is cheap; MPI
/// is finalised when the last clone (and the last distributed container) is dropped.
///
/// ```
/// let world = skel::dist::init()?;
/// println!("rank {} of {}", world.rank(), world.size());
/// # Ok::<(), skel::Error>(())
/// ```
#[derive(Clone)]
pub struct World {
    inner: Rc<Mpi>,
}

// Field order is drop order: the communicator goes before the universe finalises MPI.
struct Mpi {
    comm: SimpleCommunicator,
    _universe: Universe,
}

/// Starts MPI and returns the world (call it once per process, on the thread that runs the
/// skeletons: MPI runs single-threaded here).
///
/// Under `mpirun`, each process is one rank; started alone, the program is a world of one
/// rank and runs as it would without MPI. Where `SKEL_CUDA_DEVICE` is not set (from code or
/// in the environment: [`crate::config::CUDA_DEVICE`]), it is set to the rank's node-local
/// rank (`OMPI_COMM_WORLD_LOCAL_RANK`, `MPI_LOCALRANKID` or
/// `SLURM_LOCALID`), so that ranks on one node take one GPU each; a rank beyond the node's
/// GPUs finds CUDA unavailable and the usual selection picks its next backend.
///
/// # Errors
/// `InvalidArgument` if MPI is already initialised in this process.
///
/// ```
/// let world = skel::dist::init()?;
/// assert!(skel::dist::init().is_err()); // once per process
/// # drop(world);
/// # Ok::<(), skel::Error>(())
/// ```
pub fn init() -> Result<World> {
    let device = &crate::config::CUDA_DEVICE;
    if let (crate::config::Source::Default, Some(local)) =
        (device.source(), crate::config::node_local_rank())
    {
        // Refused only once CUDA opened its device slots, which then keep the ones they have.
        let _ = device.set(local);
    }
    let universe = mpi::initialize().ok_or_else(|| {
        Error::InvalidArgument(
            "skel::dist::init: MPI is already initialised in this process; call init once and \
             pass the World (or clones of it) around"
                .into(),
        )
    })?;
    let inner = Rc::new(Mpi {
        comm: universe.world(),
        _universe: universe,
    });
    let weak: Weak<dyn Comm> = Rc::downgrade(&inner) as Weak<dyn Comm>;
    super::register(weak);
    Ok(World { inner })
}

impl World {
    /// This process's rank, `0..size()`.
    ///
    /// ```
    /// let world = skel::dist::init()?;
    /// assert!(world.rank() < world.size());
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn rank(&self) -> usize {
        self.inner.rank()
    }

    /// Number of ranks.
    ///
    /// ```
    /// let world = skel::dist::init()?;
    /// assert!(world.size() >= 1);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn size(&self) -> usize {
        self.inner.size()
    }

    /// Waits until every rank has called it.
    ///
    /// ```
    /// let world = skel::dist::init()?;
    /// world.barrier();
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn barrier(&self) {
        self.inner.comm.barrier();
    }

    /// How many times this rank has all-gathered a distributed container that a call reads
    /// whole (MapArray's array, a container argument bound with `.arrays(..)`). A call that
    /// finds the copy it cached still valid on every rank gathers nothing.
    ///
    /// ```
    /// use skel::prelude::*;
    /// use skel::dist::{self, DistVector};
    /// #[userfn]
    /// fn pick(table: &[i64], i: u32) -> i64 { table[i as usize] }
    /// let world = dist::init()?;
    /// let table = DistVector::from_fn(&world, 8, |i| 10 * i as i64);
    /// let idx = DistVector::from_fn(&world, 8, |i| (7 - i) as u32);
    /// let mut out = DistVector::zeroed(&world, 8);
    /// let before = world.argument_gathers();
    /// MapArray::new(pick).run(&table, &idx, &mut out)?;
    /// MapArray::new(pick).run(&table, &idx, &mut out)?; // the cached copy
    /// assert_eq!(world.argument_gathers(), before + 1);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn argument_gathers(&self) -> usize {
        super::whole_gathers()
    }

    pub(crate) fn comm(&self) -> &dyn Comm {
        &*self.inner
    }
}

impl fmt::Debug for World {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "World {{ rank: {}, size: {} }}",
            self.rank(),
            self.size()
        )
    }
}

/// MPI counts are C ints: a message of more than 2^31 - 1 bytes is refused (on every rank:
/// the fits flags are exchanged before any data).
fn counts(comm: &SimpleCommunicator, lens: &[usize]) -> Result<Vec<Count>> {
    let mine: Vec<Count> = lens
        .iter()
        .map(|&l| Count::try_from(l).unwrap_or(-1))
        .collect();
    let total = lens.iter().try_fold(0usize, |a, &l| a.checked_add(l));
    let fits = Count::from(
        mine.iter().all(|&c| c >= 0) && total.is_some_and(|t| Count::try_from(t).is_ok()),
    );
    let mut all = vec![0 as Count; comm.size() as usize];
    comm.all_gather_into(&fits, &mut all[..]);
    if let Some(r) = all.iter().position(|&f| f == 0) {
        return Err(Error::InvalidArgument(format!(
            "rank {r} would send a message of more than 2^31 - 1 bytes, MPI's limit; use more \
             ranks or smaller containers"
        )));
    }
    Ok(mine)
}

/// Offsets of consecutive parts of `counts`; `Err` past 2^31 - 1 bytes in all.
fn displacements(counts: &[Count]) -> Result<(Vec<Count>, usize)> {
    let mut displs = Vec::with_capacity(counts.len());
    let mut total: Count = 0;
    for &c in counts {
        displs.push(total);
        total = total.checked_add(c).ok_or_else(|| {
            Error::InvalidArgument(
                "the messages to one rank exceed 2^31 - 1 bytes, MPI's limit; use more ranks or smaller containers".into(),
            )
        })?;
    }
    Ok((displs, total as usize))
}

fn split(buf: &[u8], counts: &[Count], displs: &[Count]) -> Vec<Vec<u8>> {
    counts
        .iter()
        .zip(displs)
        .map(|(&c, &d)| buf[d as usize..(d + c) as usize].to_vec())
        .collect()
}

impl Comm for Mpi {
    fn rank(&self) -> usize {
        self.comm.rank() as usize
    }

    fn size(&self) -> usize {
        self.comm.size() as usize
    }

    fn all_gather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        let n = counts(&self.comm, &[mine.len()])?[0];
        let mut lens = vec![0 as Count; self.size()];
        self.comm.all_gather_into(&n, &mut lens[..]);
        // Every rank has the same lens, so an overflow here is an error on every rank.
        let (displs, total) = displacements(&lens)?;
        // One spare byte: two empty buffers could share a dangling address, which MPI
        // takes for an in-place call it rejects.
        let mut buf = vec![0u8; total + 1];
        {
            let mut parts = PartitionMut::new(&mut buf[..total], &lens[..], &displs[..]);
            self.comm.all_gather_varcount_into(mine, &mut parts);
        }
        Ok(split(&buf, &lens, &displs))
    }

    fn all_to_all(&self, send: &[Vec<u8>]) -> Result<Vec<Vec<u8>>> {
        let lens: Vec<usize> = send.iter().map(Vec::len).collect();
        let send_counts = counts(&self.comm, &lens)?;
        let (send_displs, send_total) = displacements(&send_counts)?;
        let mut recv_counts = vec![0 as Count; self.size()];
        self.comm
            .all_to_all_into(&send_counts[..], &mut recv_counts[..]);
        // A rank whose receive total overflows cannot tell the others before the exchange:
        // it receives nothing and reports the error after it, on every rank (see call.rs).
        let (recv_displs, recv_total) = match displacements(&recv_counts) {
            Ok(d) => d,
            Err(e) => {
                let fits = Count::from(false);
                let mut all = vec![0 as Count; self.size()];
                self.comm.all_gather_into(&fits, &mut all[..]);
                return Err(e);
            }
        };
        let fits = Count::from(true);
        let mut all = vec![0 as Count; self.size()];
        self.comm.all_gather_into(&fits, &mut all[..]);
        if let Some(r) = all.iter().position(|&f| f == 0) {
            return Err(Error::InvalidArgument(format!(
                "rank {r} would receive more than 2^31 - 1 bytes in one exchange, MPI's limit; use more ranks or smaller containers"
            )));
        }
        // Spare bytes, as in all_gather: never two empty buffers at one address.
        let mut flat = Vec::with_capacity(send_total + 1);
        for part in send {
            flat.extend_from_slice(part);
        }
        flat.push(0);
        let mut buf = vec![0u8; recv_total + 1];
        {
            let parts = Partition::new(&flat[..send_total], &send_counts[..], &send_displs[..]);
            let mut into =
                PartitionMut::new(&mut buf[..recv_total], &recv_counts[..], &recv_displs[..]);
            self.comm.all_to_all_varcount_into(&parts, &mut into);
        }
        Ok(split(&buf, &recv_counts, &recv_displs))
    }

    fn exchange_during(
        &self,
        sends: &[(usize, Vec<u8>)],
        recvs: &[(usize, usize)],
        meanwhile: &mut dyn FnMut(),
    ) -> Vec<Vec<u8>> {
        let mut got: Vec<Vec<u8>> = recvs.iter().map(|&(_, n)| vec![0u8; n]).collect();
        let peer = |q: usize| self.comm.process_at_rank(q as mpi::Rank);
        mpi::request::scope(|scope| {
            let sent: Vec<_> = sends
                .iter()
                .map(|(q, m)| peer(*q).immediate_send_with_tag(scope, &m[..], HALO_TAG))
                .collect();
            let received: Vec<_> = got
                .iter_mut()
                .zip(recvs)
                .map(|(buf, &(q, _))| {
                    peer(q).immediate_receive_into_with_tag(scope, &mut buf[..], HALO_TAG)
                })
                .collect();
            meanwhile();
            for r in received {
                r.wait();
            }
            for s in sent {
                s.wait();
            }
        });
        got
    }
}

/// The tag of the point-to-point messages: MPI keeps messages between two ranks with one
/// tag in order, and every call sends at most one from a rank to another, so calls never
/// mix up their messages.
const HALO_TAG: mpi::Tag = 15;
