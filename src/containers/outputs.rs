//! Multi-output: a Map of a function returning a tuple writes each element of the tuple to
//! its own container.
//!
//! [`Outputs`] is what `Map::run` writes: any single [`Output`] (the whole result, also a
//! tuple result in a `Vector<(A, B)>`), or a tuple of two to four `&mut` outputs, one per
//! element of the tuple the function returns. Backends see the operands as [`OutArgs`]:
//! the host slices through [`HostOut`], the device operands one by one through
//! [`OutCollector`].

use std::ops::Range;

use super::{ArgMut, Output, Shape};
use crate::{DeviceType, Error, Result};

/// What a Map writes: one [`Output`], or a tuple of two to four `&mut` outputs of one shape
/// (containers or views) for a user function that returns a tuple, element `k` of each
/// result going to output `k`.
///
/// ```
/// use skel::prelude::*;
///
/// #[userfn]
/// fn divmod(a: u32, b: u32) -> (u32, u32) { (a / b, a % b) }
///
/// let a = Vector::from(vec![7u32, 9, 20]);
/// let b = Vector::from(vec![2u32, 4, 6]);
/// let (mut q, mut r) = (Vector::zeroed(3), Vector::zeroed(3));
/// Map::new(divmod).run(&a, &b, &mut (&mut q, &mut r))?;
/// assert_eq!((q.to_vec(), r.to_vec()), (vec![3, 2, 3], vec![1, 1, 2]));
///
/// // Views work too; every output has the shape of the inputs.
/// let mut big = Vector::filled(5, 0u32);
/// Map::new(divmod).run(&a, &b, &mut (&mut q, &mut big.view_mut(1..4)))?;
/// assert_eq!(big.to_vec(), vec![0, 1, 1, 2, 0]);
/// # Ok::<(), skel::Error>(())
/// ```
pub trait Outputs<T: DeviceType> {
    /// The operands handed to a backend.
    type Args<'s>: OutArgs<'s, Elems = T>
    where
        Self: 's;
    /// The operands, borrowed for one call.
    fn args_mut(&mut self) -> Self::Args<'_>;
}

impl<T: DeviceType, O: Output<T> + ?Sized> Outputs<T> for O {
    type Args<'s>
        = ArgMut<'s, T>
    where
        Self: 's;
    fn args_mut(&mut self) -> ArgMut<'_, T> {
        self.arg_mut()
    }
}

/// The operands one Map call writes: one [`ArgMut`], or a tuple of them, one per element of
/// a tuple result.
pub trait OutArgs<'a>: Sized {
    /// The value the user function returns.
    type Elems: DeviceType;
    /// The host slices of the operands.
    type Host<'h>: HostOut<Elems = Self::Elems>
    where
        Self: 'h;
    /// How many containers are written (1, or the tuple's length).
    const COUNT: usize;
    /// The shape every operand has (checked by [`OutArgs::shape`]).
    fn shapes(&self) -> Vec<Shape>;
    /// Where each operand lies among the processes (`skel::dist`), in order.
    #[doc(hidden)]
    #[cfg(feature = "mpi")]
    fn spreads(&self) -> Vec<Option<crate::dist::Spread>>;
    /// Whether any operand is distributed, without the allocation of `spreads`.
    #[doc(hidden)]
    #[cfg(feature = "mpi")]
    fn any_distributed(&self) -> bool;
    /// The elements of the first operand (a call's size), without the allocation of
    /// `shapes`.
    #[doc(hidden)]
    fn elems(&self) -> usize;
    /// The operands' host slices for a call that overwrites all of them (nothing is brought
    /// back; device copies of the ranges become invalid).
    fn host_overwrite(&mut self) -> Result<Self::Host<'_>>;
    /// Hands every operand to `c`, in order.
    #[cfg_attr(not(any(feature = "opencl", feature = "cuda")), allow(dead_code))]
    fn collect<C: OutCollector<'a>>(self, c: &mut C);
    /// The operands borrowed again, restricted to elements `range` (as vectors).
    type Part<'p>: OutArgs<'p, Elems = Self::Elems>
    where
        Self: 'p;
    /// Elements `range` of every operand (`Backend::Auto` splits a call with it).
    fn part(&mut self, range: Range<usize>) -> Self::Part<'_>;
    /// Rows `rows` of every operand, keeping a matrix's columns (a split over CUDA devices
    /// cuts a call in whole rows with it, so a 2D `#[index]` stays right).
    fn rows(&mut self, rows: Range<usize>) -> Self::Part<'_>;

    /// The common shape of the operands, or a `ShapeMismatch` naming the two that differ.
    fn shape(&self, skeleton: &str) -> Result<Shape> {
        let shapes = self.shapes();
        let first = shapes[0];
        match shapes.iter().enumerate().find(|(_, s)| **s != first) {
            Some((k, &s)) => Err(Error::shape(
                format!("{skeleton} output {k} against output 0 (all outputs have one shape)"),
                first,
                s,
            )),
            None => Ok(first),
        }
    }
}

/// What [`OutArgs::collect`] calls with each written operand.
pub trait OutCollector<'a> {
    /// Called once per operand, in order.
    fn push<T: DeviceType>(&mut self, arg: ArgMut<'a, T>);
}

/// The host slices a Map writes: `&mut [T]`, or a tuple of them for a tuple result.
pub trait HostOut: Send + Sized {
    /// The value stored at one position.
    type Elems;
    /// Number of positions.
    fn len(&self) -> usize;
    /// Whether there is no position.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Stores `v` at position `k` (each element of a tuple in its own slice).
    fn set(&mut self, k: usize, v: Self::Elems);
    /// Positions `..mid` and `mid..`.
    fn split_at(self, mid: usize) -> (Self, Self);
}

impl<'a, T: DeviceType> OutArgs<'a> for ArgMut<'a, T> {
    type Elems = T;
    type Host<'h>
        = &'h mut [T]
    where
        Self: 'h;
    const COUNT: usize = 1;
    fn shapes(&self) -> Vec<Shape> {
        vec![ArgMut::shape(self)]
    }
    #[cfg(feature = "mpi")]
    fn spreads(&self) -> Vec<Option<crate::dist::Spread>> {
        vec![ArgMut::spread(self)]
    }
    #[cfg(feature = "mpi")]
    fn any_distributed(&self) -> bool {
        ArgMut::spread(self).is_some()
    }
    fn elems(&self) -> usize {
        ArgMut::shape(self).len()
    }
    fn host_overwrite(&mut self) -> Result<&mut [T]> {
        ArgMut::host_overwrite(self)
    }
    fn collect<C: OutCollector<'a>>(self, c: &mut C) {
        c.push(self);
    }
    type Part<'p>
        = ArgMut<'p, T>
    where
        Self: 'p;
    fn part(&mut self, range: Range<usize>) -> ArgMut<'_, T> {
        ArgMut::part(self, range)
    }
    fn rows(&mut self, rows: Range<usize>) -> ArgMut<'_, T> {
        ArgMut::rows(self, rows)
    }
}

impl<T: Send> HostOut for &mut [T] {
    type Elems = T;
    #[inline(always)]
    fn len(&self) -> usize {
        <[T]>::len(self)
    }
    #[inline(always)]
    fn set(&mut self, k: usize, v: T) {
        self[k] = v;
    }
    fn split_at(self, mid: usize) -> (Self, Self) {
        self.split_at_mut(mid)
    }
}

macro_rules! out_tuples {
    ($(($n:expr; $($t:ident $o:ident $i:tt),+))*) => {$(
        impl<'x, $($t: DeviceType, $o: Output<$t> + ?Sized),+> Outputs<($($t,)+)>
            for ($(&'x mut $o,)+)
        where
            ($($t,)+): DeviceType,
        {
            type Args<'s>
                = ($(ArgMut<'s, $t>,)+)
            where
                Self: 's;
            fn args_mut(&mut self) -> Self::Args<'_> {
                ($(self.$i.arg_mut(),)+)
            }
        }

        impl<'a, $($t: DeviceType),+> OutArgs<'a> for ($(ArgMut<'a, $t>,)+)
        where
            ($($t,)+): DeviceType,
        {
            type Elems = ($($t,)+);
            type Host<'h>
                = ($(&'h mut [$t],)+)
            where
                Self: 'h;
            const COUNT: usize = $n;
            fn shapes(&self) -> Vec<Shape> {
                vec![$(self.$i.shape()),+]
            }
            #[cfg(feature = "mpi")]
            fn spreads(&self) -> Vec<Option<crate::dist::Spread>> {
                vec![$(self.$i.spread()),+]
            }
            #[cfg(feature = "mpi")]
            fn any_distributed(&self) -> bool {
                $(self.$i.spread().is_some())||+
            }
            fn elems(&self) -> usize {
                self.0.shape().len()
            }
            fn host_overwrite(&mut self) -> Result<Self::Host<'_>> {
                Ok(($(self.$i.host_overwrite()?,)+))
            }
            fn collect<Co: OutCollector<'a>>(self, c: &mut Co) {
                $(c.push(self.$i);)+
            }
            type Part<'p>
                = ($(ArgMut<'p, $t>,)+)
            where
                Self: 'p;
            fn part(&mut self, range: Range<usize>) -> Self::Part<'_> {
                ($(self.$i.part(range.clone()),)+)
            }
            fn rows(&mut self, rows: Range<usize>) -> Self::Part<'_> {
                ($(self.$i.rows(rows.clone()),)+)
            }
        }

        impl<$($t: Send),+> HostOut for ($(&mut [$t],)+) {
            type Elems = ($($t,)+);
            #[inline(always)]
            fn len(&self) -> usize {
                self.0.len()
            }
            #[inline(always)]
            fn set(&mut self, k: usize, v: Self::Elems) {
                $(self.$i[k] = v.$i;)+
            }
            fn split_at(self, mid: usize) -> (Self, Self) {
                let halves = ($(self.$i.split_at_mut(mid),)+);
                (($(halves.$i.0,)+), ($(halves.$i.1,)+))
            }
        }
    )*};
}

out_tuples! {
    (2; A OA 0, B OB 1)
    (3; A OA 0, B OB 1, C OC 2)
    (4; A OA 0, B OB 1, C OC 2, D OD 3)
}
