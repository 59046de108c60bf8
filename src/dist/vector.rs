//! `DistVector`: a vector block-distributed over the ranks.

use std::any::Any;
use std::cell::RefCell;
use std::ops::Range;
use std::rc::Rc;

use super::{agree, Blocks, Operand, Spread, WholeCell, World};
use crate::containers::host::{as_bytes, from_bytes};
use crate::containers::{Arg, ArgMut, Input, Output, Shape};
use crate::{DeviceType, Error, Result, Vector};

/// A vector of `len` elements spread over the ranks of a [`World`] in contiguous blocks,
/// in rank order (the first `len % size` ranks hold one element more). Every rank holds
/// its block as an ordinary [`Vector`] ([`DistVector::local`]), which its backend runs
/// and keeps coherent as usual. Skeletons take it wherever they take a `Vector`.
///
/// ```
/// use skel::prelude::*;
/// use skel::dist::{self, DistVector};
/// #[userfn]
/// fn twice(x: i64) -> i64 { 2 * x }
/// let world = dist::init()?;
/// let v = DistVector::from_fn(&world, 10, |i| i as i64); // rank r computes only its block
/// let mut w = DistVector::zeroed(&world, 10);
/// Map::new(twice).run(&v, &mut w)?;
/// assert_eq!(w.all_gather()?.to_vec(), (0..10).map(|i| 2 * i).collect::<Vec<i64>>());
/// # Ok::<(), skel::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct DistVector<T: DeviceType> {
    world: World,
    local: Vector<T>,
    len: usize,
    start: usize,
    /// The whole vector as the last call that read it whole gathered it; `None` once the
    /// block was borrowed mutably.
    whole: RefCell<Option<Rc<Vector<T>>>>,
}

impl<T: DeviceType> DistVector<T> {
    /// Element `i` is `f(i)`; each rank calls `f` only for the indices it holds.
    ///
    /// ```
    /// let world = skel::dist::init()?;
    /// let v = skel::dist::DistVector::from_fn(&world, 5, |i| i as u32);
    /// assert_eq!(v.local().to_vec(), v.local_range().map(|i| i as u32).collect::<Vec<_>>());
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn from_fn(world: &World, len: usize, mut f: impl FnMut(usize) -> T) -> Self {
        let range = Blocks::new(len, world.size()).range(world.rank());
        let start = range.start;
        DistVector {
            world: world.clone(),
            local: Vector::from_fn(range.len(), |i| f(start + i)),
            len,
            start,
            whole: RefCell::new(None),
        }
    }

    /// `len` copies of `value`.
    ///
    /// ```
    /// let world = skel::dist::init()?;
    /// let v = skel::dist::DistVector::filled(&world, 7, 1.5f32);
    /// assert_eq!(v.len(), 7);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn filled(world: &World, len: usize, value: T) -> Self {
        Self::from_fn(world, len, |_| value)
    }

    /// `len` elements of `T::default()`.
    ///
    /// ```
    /// let world = skel::dist::init()?;
    /// let v: skel::dist::DistVector<f64> = skel::dist::DistVector::zeroed(&world, 3);
    /// assert!(v.local().iter().all(|&x| x == 0.0));
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn zeroed(world: &World, len: usize) -> Self
    where
        T: Default,
    {
        Self::filled(world, len, T::default())
    }

    /// Spreads `data`, given on rank `root` (`None` on every other rank), over the ranks.
    ///
    /// # Errors
    /// On every rank: `InvalidArgument` if `root` is not a rank, if `root` passes no data
    /// or another rank passes some.
    ///
    /// ```
    /// let world = skel::dist::init()?;
    /// let all: Vec<f32> = (0..100).map(|i| i as f32).collect();
    /// let data = (world.rank() == 0).then_some(&all[..]);
    /// let v = skel::dist::DistVector::scatter(0, &world, data)?;
    /// assert_eq!(v.len(), 100);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn scatter(root: usize, world: &World, data: Option<&[T]>) -> Result<Self> {
        let (local, len, _) = scatter_units(root, world, data.map(|d| (d, d.len(), 1)))?;
        let start = Blocks::new(len, world.size()).range(world.rank()).start;
        Ok(DistVector {
            world: world.clone(),
            local: Vector::from_vec(local),
            len,
            start,
            whole: RefCell::new(None),
        })
    }

    /// The whole vector on rank `root` (`Some` there, `None` on the others).
    ///
    /// ```
    /// let world = skel::dist::init()?;
    /// let v = skel::dist::DistVector::from_fn(&world, 4, |i| i as u8);
    /// if let Some(all) = v.gather(0)? {
    ///     assert_eq!(all.to_vec(), vec![0, 1, 2, 3]);
    /// }
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn gather(&self, root: usize) -> Result<Option<Vector<T>>> {
        let what = format!("DistVector::gather(root {root})");
        Ok(
            gather_units(&what, Some(root), self.arg(), self.local.try_as_slice())?
                .map(Vector::from_vec),
        )
    }

    /// The whole vector on every rank.
    ///
    /// ```
    /// let world = skel::dist::init()?;
    /// let v = skel::dist::DistVector::from_fn(&world, 4, |i| i as u8);
    /// assert_eq!(v.all_gather()?.to_vec(), vec![0, 1, 2, 3]);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn all_gather(&self) -> Result<Vector<T>> {
        let all = gather_units(
            "DistVector::all_gather",
            None,
            self.arg(),
            self.local.try_as_slice(),
        )?;
        Ok(Vector::from_vec(all.unwrap_or_default()))
    }

    /// The global length.
    ///
    /// ```
    /// let world = skel::dist::init()?;
    /// assert_eq!(skel::dist::DistVector::filled(&world, 9, 0u8).len(), 9);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the global vector is empty.
    ///
    /// ```
    /// let world = skel::dist::init()?;
    /// assert!(skel::dist::DistVector::filled(&world, 0, 0u8).is_empty());
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The global indices this rank holds.
    ///
    /// ```
    /// let world = skel::dist::init()?;
    /// let v = skel::dist::DistVector::filled(&world, 10, 0u8);
    /// assert_eq!(v.local_range().len(), v.local().len());
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn local_range(&self) -> Range<usize> {
        self.start..self.start + self.local.len()
    }

    /// This rank's block.
    ///
    /// ```
    /// let world = skel::dist::init()?;
    /// let v = skel::dist::DistVector::from_fn(&world, 6, |i| i as i32);
    /// assert_eq!(v.local()[0], v.local_range().start as i32);
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn local(&self) -> &Vector<T> {
        &self.local
    }

    /// This rank's block, writable on the host (device copies become stale).
    ///
    /// ```
    /// let world = skel::dist::init()?;
    /// let mut v = skel::dist::DistVector::filled(&world, 6, 0i32);
    /// for x in v.local_mut()? { *x = 1; }
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn local_mut(&mut self) -> Result<&mut [T]> {
        *self.whole.get_mut() = None;
        self.local.try_as_mut_slice()
    }

    /// The world the vector is spread over.
    ///
    /// ```
    /// let world = skel::dist::init()?;
    /// let v = skel::dist::DistVector::filled(&world, 6, 0i32);
    /// assert_eq!(v.world().size(), world.size());
    /// # Ok::<(), skel::Error>(())
    /// ```
    pub fn world(&self) -> &World {
        &self.world
    }

    fn spread(&self) -> Spread {
        Spread {
            global: Shape::Vector(self.len),
            start: self.start,
        }
    }

    fn assemble(&self, all: Vec<T>) -> Result<Vector<T>> {
        Ok(Vector::from_vec(all))
    }
}

block_operand!(DistVector, Vector);

/// Puts the whole of a distributed container in `slot` for a call that reads it whole:
/// the copy in `cache` where every rank still has its copy, else the blocks all-gathered
/// anew (on every rank, which then caches them).
pub(super) fn cache_whole<T: DeviceType, C: 'static>(
    world: &World,
    cache: &RefCell<Option<Rc<C>>>,
    slot: &WholeCell,
    arg: Arg<'_, T>,
    assemble: impl FnOnce(Vec<T>) -> Result<C>,
) -> Result<()> {
    let cached = cache.borrow().clone();
    let flags = world.comm().all_gather(&[u8::from(cached.is_some())])?;
    let whole = match cached {
        Some(whole) if flags.iter().all(|f| f[..] == [1]) => whole,
        _ => {
            let all = gather_units("a container read whole", None, arg, arg.host())?;
            super::count_whole_gather();
            let whole = Rc::new(assemble(all.unwrap_or_default())?);
            *cache.borrow_mut() = Some(Rc::clone(&whole));
            whole
        }
    };
    // A slot serves one parameter of one call: it is empty here.
    let _ = slot.set(whole as Rc<dyn Any>);
    Ok(())
}

/// Spreads `data` (on `root`: its elements, `units` units of `unit` elements) in blocks of
/// whole units; returns this rank's block, the number of units and the unit, as the root
/// gave them.
pub(super) fn scatter_units<T: DeviceType>(
    root: usize,
    world: &World,
    data: Option<(&[T], usize, usize)>,
) -> Result<(Vec<T>, usize, usize)> {
    let comm = world.comm();
    let (me, size) = (comm.rank(), comm.size());
    let (units, unit) = data.map_or((0, 0), |(_, n, u)| (n, u));
    let mine = [
        u64::from(data.is_some()),
        units as u64,
        unit as u64,
        root as u64,
    ];
    let all = comm.all_gather(as_bytes(&mine))?;
    let all: Vec<Vec<u64>> = all.iter().map(|b| from_bytes::<u64>(b)).collect();
    let fail = |msg: String| {
        Err(Error::InvalidArgument(format!(
            "DistVector/DistMatrix scatter: {msg}"
        )))
    };
    if let Some(r) = all.iter().position(|d| d.get(3) != Some(&(root as u64))) {
        return fail(format!(
            "rank {r} names another root than rank {me} ({root})"
        ));
    }
    if root >= size {
        return fail(format!("root {root} is not a rank (the world has {size})"));
    }
    if let Some(r) = (0..size).find(|&r| (all[r][0] == 1) != (r == root)) {
        return fail(format!(
            "rank {r} {} data; only the root ({root}) passes Some(data)",
            if r == root { "passes no" } else { "passes" }
        ));
    }
    let (units, unit) = (all[root][1] as usize, all[root][2] as usize);
    let blocks = Blocks::new(units, size);
    let send: Vec<Vec<u8>> = (0..size)
        .map(|p| match data {
            Some((d, _, _)) => {
                let r = blocks.range(p);
                as_bytes(&d[r.start * unit..r.end * unit]).to_vec()
            }
            None => Vec::new(),
        })
        .collect();
    let got = comm.all_to_all(&send)?;
    Ok((from_bytes(&got[root]), units, unit))
}

/// The blocks of all ranks in rank order, on `root` (`None` there on the others) or, for
/// no root, on every rank.
pub(super) fn gather_units<T: DeviceType>(
    what: &str,
    root: Option<usize>,
    arg: Arg<'_, T>,
    local: Result<&[T]>,
) -> Result<Option<Vec<T>>> {
    let Some(call) = agree(|| what.to_string(), &[Operand::of(&arg)])? else {
        return Err(Error::InvalidArgument(format!(
            "{what}: not a distributed container"
        )));
    };
    let local = local.map(<[T]>::to_vec);
    match root {
        None => Ok(Some(call.exchange(local)?.concat())),
        Some(root) => {
            if root >= call.size() {
                return Err(Error::InvalidArgument(format!(
                    "{what}: root {root} is not a rank (the world has {})",
                    call.size()
                )));
            }
            let send = local.map(|l| {
                (0..call.size())
                    .map(|p| {
                        if p == root {
                            as_bytes(&l).to_vec()
                        } else {
                            Vec::new()
                        }
                    })
                    .collect()
            });
            let got = call.all_to_all(send)?;
            Ok(
                (call.rank() == root)
                    .then(|| got.iter().flat_map(|b| from_bytes::<T>(b)).collect()),
            )
        }
    }
}
