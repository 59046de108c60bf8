//! Backend-neutral call plans: what a skeleton hands a backend.
//!
//! A plan is a set of operands ([`Arg`], [`ArgMut`], tuples of them as [`ArgTuple`]) plus
//! plain options ([`ScanMode`], [`Edge`], [`Axis`]). It says nothing about how the work is
//! split or where it runs; that is the backend's business.

use std::ops::Range;

use crate::containers::{Arg, Shape};
use crate::dist::Spread;
use crate::{DeviceType, Result};

pub use crate::skeletons::{Edge, ScanMode};

/// Which way a 1D stencil or a matrix reduction runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Axis {
    /// Over the flat element sequence (vectors).
    Flat,
    /// Along each row of a matrix.
    Rows,
    /// Along each column of a matrix.
    Cols,
}

/// The element inputs of one call: `()`, `(Arg<A>,)`, `(Arg<A>, Arg<B>)`, ... up to four.
pub trait ArgTuple<'a>: Sized + Copy + Send + Sync {
    /// The tuple of element values a user function receives.
    type Elems: Copy + Send + Sync;
    /// The inputs' host slices.
    type Host: HostSlices<Elems = Self::Elems>;
    /// Shapes of the inputs, in order.
    fn shapes(&self) -> Vec<Shape>;
    /// Host slices of every input, brought back from devices where stale.
    fn host(&self) -> Result<Self::Host>;
    /// Calls `v` with each input, in order (device backends upload through it).
    #[cfg_attr(not(any(feature = "opencl", feature = "cuda")), allow(dead_code))]
    fn visit<V: ArgVisitor>(&self, v: &mut V) -> Result<()>;
    /// Where each input lies among the processes (`skel::dist`), in order.
    fn spreads(&self) -> Vec<Option<Spread>>;
    /// Whether any input is distributed (`skel::dist`): what every call asks, without the
    /// allocation of [`ArgTuple::spreads`].
    fn any_distributed(&self) -> bool;
    /// Elements `range` of every input, as vector operands.
    fn sub(&self, range: Range<usize>) -> Self;
}

/// What [`ArgTuple::visit`] calls with each operand of a tuple.
#[cfg_attr(not(any(feature = "opencl", feature = "cuda")), allow(dead_code))]
pub trait ArgVisitor {
    /// Called once per operand, in order.
    fn visit<T: DeviceType>(&mut self, arg: Arg<'_, T>) -> Result<()>;
}

/// Host slices of the inputs of one call, all of one length.
pub trait HostSlices: Copy + Send + Sync {
    /// The tuple of element values at one position.
    type Elems: Copy + Send + Sync;
    /// The values at position `i`.
    fn at(&self, i: usize) -> Self::Elems;
    /// The same inputs restricted to `range`.
    fn slice(&self, range: Range<usize>) -> Self;
}

impl<'a> ArgTuple<'a> for () {
    type Elems = ();
    type Host = ();
    fn shapes(&self) -> Vec<Shape> {
        Vec::new()
    }
    fn host(&self) -> Result<()> {
        Ok(())
    }
    fn visit<V: ArgVisitor>(&self, _: &mut V) -> Result<()> {
        Ok(())
    }
    fn spreads(&self) -> Vec<Option<Spread>> {
        Vec::new()
    }
    fn any_distributed(&self) -> bool {
        false
    }
    fn sub(&self, _: Range<usize>) {}
}

impl HostSlices for () {
    type Elems = ();
    #[inline(always)]
    fn at(&self, _: usize) {}
    #[inline(always)]
    fn slice(&self, _: Range<usize>) {}
}

macro_rules! arg_tuples {
    ($(($($t:ident $i:tt),+))*) => {$(
        impl<'a, $($t: DeviceType),+> ArgTuple<'a> for ($(Arg<'a, $t>,)+) {
            type Elems = ($($t,)+);
            type Host = ($(&'a [$t],)+);
            fn shapes(&self) -> Vec<Shape> {
                vec![$(self.$i.shape()),+]
            }
            fn host(&self) -> Result<Self::Host> {
                Ok(($(self.$i.host()?,)+))
            }
            fn visit<V: ArgVisitor>(&self, v: &mut V) -> Result<()> {
                $(v.visit(self.$i)?;)+
                Ok(())
            }
            fn spreads(&self) -> Vec<Option<Spread>> {
                vec![$(self.$i.spread()),+]
            }
            fn any_distributed(&self) -> bool {
                $(self.$i.spread().is_some())||+
            }
            fn sub(&self, range: Range<usize>) -> Self {
                ($(self.$i.sub(range.clone()),)+)
            }
        }

        impl<'a, $($t: DeviceType),+> HostSlices for ($(&'a [$t],)+) {
            type Elems = ($($t,)+);
            #[inline(always)]
            fn at(&self, i: usize) -> Self::Elems {
                ($(self.$i[i],)+)
            }
            #[inline(always)]
            fn slice(&self, range: Range<usize>) -> Self {
                ($(&self.$i[range.clone()],)+)
            }
        }
    )*};
}

arg_tuples! {
    (A 0)
    (A 0, B 1)
    (A 0, B 1, C 2)
    (A 0, B 1, C 2, D 3)
}
