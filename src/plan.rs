//! Backend-neutral call plans: what a skeleton hands a backend.
//!
//! A skeleton call becomes one plan value per form ([`Map`], [`Reduce`], ...): the
//! operands ([`Arg`], [`ArgMut`], tuples of them as [`ArgTuple`]), the container
//! arguments, the uniforms and plain options ([`ScanMode`], [`Edge`], [`Axis`],
//! [`Stencil`], a start value). The user functions and operand types are named once, by
//! the plan's signature type (`S`, a tuple such as `(F, I, O)` implementing the form's
//! `*Sig` trait), so an executor method is `fn map<'a, 'o, S: MapSig<'a, 'o>>(&self, plan:
//! Map<'_, 'a, 'o, S>)` and reads the types as `S::F`, `S::I`, ... A plan says nothing
//! about how the work is split or where it runs; that is the executor's business. Plans
//! are plain borrows and copies: building one allocates nothing.
//!
//! Adding a skeleton form: its builder and checks in one file of `src/skeletons/`, which
//! ends in `backends::form(options, plan::Form::<(F, ..)> { .. }, |plan| checks)` (the
//! route in `backends/mod.rs` runs the checks, then `dispatch!`es the plan; with feature
//! `mpi` it hands a plan with a distributed operand to `dist::Distributed`, which runs the
//! checks once the ranks agreed on the call); here the plan struct (operands, uniforms,
//! options) and, when it has more than one type parameter, its `FormSig` trait with the
//! blanket impl for the tuple of its types; one method on `backends::Execute`; then that
//! method in each executor (`cpu.rs`, `rayon.rs`,
//! `auto.rs`, which asks the tuner and forwards the plan, and `cuda/mod.rs` /
//! `opencl/mod.rs`, which destructure the plan and call the form's own file
//! `cuda/form.rs` / `opencl/form.rs`).

use std::ops::Range;

use crate::backends::{BinaryFn, ContainerOps, PredicateFn};
use crate::codegen::ir::FnDef;
use crate::containers::{Arg, ArgMut, OutArgs, Shape};
#[cfg(feature = "mpi")]
use crate::dist::Spread;
use crate::userfn::{
    ArrayFn, ContainerArgs, ElementwiseFn, OverlapFn, UserFn, Window2Fn, WindowFn,
};
use crate::{DeviceType, Result, SortKey};

pub use crate::skeletons::{Edge, ScanMode};

use crate::skeletons::Count;

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

/// A MapOverlap's stencil settings.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stencil<T, R> {
    pub radius: R,
    pub edge: Edge,
    pub pad: T,
}

/// The types of a Map call: the user function, the input tuple, the output(s).
pub(crate) trait MapSig<'a, 'o> {
    type F: ElementwiseFn;
    type I: ArgTuple<'a, Elems = <Self::F as ElementwiseFn>::Elems>;
    type O: OutArgs<'o, Elems = <Self::F as UserFn>::Out>;
}

impl<'a, 'o, F, I, O> MapSig<'a, 'o> for (F, I, O)
where
    F: ElementwiseFn,
    I: ArgTuple<'a, Elems = F::Elems>,
    O: OutArgs<'o, Elems = F::Out>,
{
    type F = F;
    type I = I;
    type O = O;
}

/// `out[i] = F(inputs[i].., arrays, uniforms)`: `out` is one operand, or one per element of
/// a tuple result (multi-output Map); `arrays` are the container arguments, read whole by
/// every element.
pub(crate) struct Map<'c, 'a, 'o, S: MapSig<'a, 'o>> {
    pub arrays: ContainerOps<'c, S::F>,
    pub inputs: S::I,
    pub out: S::O,
    pub uniforms: &'c <S::F as ElementwiseFn>::Uniforms,
}

/// The types of a MapArray call: the user function and the input tuple.
pub(crate) trait MapArraySig<'a> {
    type F: ArrayFn;
    type I: ArgTuple<'a, Elems = <Self::F as ArrayFn>::Elems>;
}

impl<'a, F: ArrayFn, I: ArgTuple<'a, Elems = F::Elems>> MapArraySig<'a> for (F, I) {
    type F = F;
    type I = I;
}

/// `out[i] = F(array, inputs[i].., uniforms)`, every element reading all of `array`.
pub(crate) struct MapArray<'c, 'a, S: MapArraySig<'a>> {
    pub array: Arg<'c, <S::F as ArrayFn>::Array>,
    pub inputs: S::I,
    pub out: ArgMut<'c, <S::F as UserFn>::Out>,
    pub uniforms: &'c <S::F as ArrayFn>::Uniforms,
}

/// The types of a fold (Reduce, Scan): the binary user function and its element type.
pub(crate) trait FoldSig {
    type T: DeviceType;
    type F: BinaryFn<Self::T>;
}

impl<F: BinaryFn<T>, T: DeviceType> FoldSig for (F, T) {
    type T = T;
    type F = F;
}

/// `start ⊕ input[0] ⊕ ... ⊕ input[n-1]`.
pub(crate) struct Reduce<'p, S: FoldSig> {
    pub input: Arg<'p, S::T>,
    pub start: S::T,
}

/// One fold per row (`axis` `Rows`) or per column (`Cols`) of the matrix `input`, into
/// `out`.
pub(crate) struct ReduceAxis<'p, S: FoldSig> {
    pub input: Arg<'p, S::T>,
    pub out: ArgMut<'p, S::T>,
    pub axis: Axis,
}

/// The types of a MapReduce call: the map and reduce functions and the input tuple.
pub(crate) trait MapReduceSig<'a> {
    type M: ElementwiseFn;
    type R: BinaryFn<<Self::M as UserFn>::Out>;
    type I: ArgTuple<'a, Elems = <Self::M as ElementwiseFn>::Elems>;
}

impl<'a, M, R, I> MapReduceSig<'a> for (M, R, I)
where
    M: ElementwiseFn,
    R: BinaryFn<M::Out>,
    I: ArgTuple<'a, Elems = M::Elems>,
{
    type M = M;
    type R = R;
    type I = I;
}

/// `start ⊕ M(inputs[0]..) ⊕ ... ⊕ M(inputs[n-1]..)` folded with `R`, over `shape`.
pub(crate) struct MapReduce<'c, 'a, S: MapReduceSig<'a>> {
    pub arrays: ContainerOps<'c, S::M>,
    pub inputs: S::I,
    pub shape: Shape,
    pub uniforms: &'c <S::M as ElementwiseFn>::Uniforms,
    pub start: <S::M as UserFn>::Out,
}

/// An inclusive or exclusive prefix scan of `input` into `out`.
pub(crate) struct Scan<'p, S: FoldSig> {
    pub input: Arg<'p, S::T>,
    pub out: ArgMut<'p, S::T>,
    pub mode: ScanMode,
    pub start: S::T,
}

/// A 1D stencil over a vector (`axis` `Flat`) or along the rows or columns of a matrix.
pub(crate) struct MapOverlap<'p, F: WindowFn> {
    pub input: Arg<'p, F::Elem>,
    pub out: ArgMut<'p, F::Out>,
    pub stencil: Stencil<F::Elem, usize>,
    pub axis: Axis,
    pub uniforms: &'p F::Uniforms,
}

/// A 2D stencil over a matrix.
pub(crate) struct MapOverlap2d<'p, F: Window2Fn> {
    pub input: Arg<'p, F::Elem>,
    pub out: ArgMut<'p, F::Out>,
    pub stencil: Stencil<F::Elem, (usize, usize)>,
    pub uniforms: &'p F::Uniforms,
}

/// Fills an output row with the values kept from an input row ([`Cells::keep`]).
pub(crate) type KeepRow<T, O> = fn(&[T], &mut [O]);

/// Which outputs of a general stencil call are computed: with `parity` `Some(p)` only those
/// at `(i, j)` with `(i + j) % 2 == p` (an update mode's half sweep); every other output
/// (and, with [`Edge::None`], every border output) is input 0's element when `keep` is set
/// (an in-place update writes a whole new matrix: `keep(input row, output row)` fills a
/// whole row before its computed outputs are written), else left as it was.
pub(crate) struct Cells<T, O> {
    pub parity: Option<usize>,
    pub keep: Option<KeepRow<T, O>>,
}

impl<T, O> Cells<T, O> {
    /// Every output computed, border outputs of `Edge::None` left as they were.
    pub(crate) fn all() -> Self {
        Cells {
            parity: None,
            keep: None,
        }
    }

    /// Whether the output at `(i, j)` is computed (before the edge mode's say).
    #[inline(always)]
    pub(crate) fn computes(&self, (i, j): (usize, usize)) -> bool {
        self.parity.map_or(true, |p| (i + j) % 2 == p)
    }
}

/// A stencil of the general form ([`OverlapFn`]): 1..=4 windowed inputs of one shape,
/// container arguments, uniforms; 1D along `axis`, 2D (`axis` unused) by the radius type.
pub(crate) struct MapOverlapWindows<'p, F: OverlapFn> {
    pub inputs: Vec<Arg<'p, F::Elem>>,
    pub arrays: <F::Arrays as ContainerArgs>::Args<'p>,
    pub out: ArgMut<'p, F::Out>,
    pub stencil: Stencil<F::Elem, F::Radius>,
    pub axis: Axis,
    pub cells: Cells<F::Elem, F::Out>,
    pub uniforms: &'p F::Uniforms,
}

/// The types of a MapPairs call: the user function and the two element types.
pub(crate) trait PairsSig {
    type A: DeviceType;
    type B: DeviceType;
    type F: ElementwiseFn<Elems = (Self::A, Self::B)>;
}

impl<F: ElementwiseFn<Elems = (A, B)>, A: DeviceType, B: DeviceType> PairsSig for (F, A, B) {
    type A = A;
    type B = B;
    type F = F;
}

/// `out` is the `v.len() x h.len()` matrix of `F(v[i], h[j])`.
pub(crate) struct MapPairs<'c, 'p, S: PairsSig> {
    pub arrays: ContainerOps<'c, S::F>,
    pub v: Arg<'p, S::A>,
    pub h: Arg<'p, S::B>,
    pub out: ArgMut<'p, <S::F as UserFn>::Out>,
    pub uniforms: &'c <S::F as ElementwiseFn>::Uniforms,
}

/// The types of a MapPairsReduce call: the map and reduce functions, the element types.
pub(crate) trait PairsReduceSig {
    type A: DeviceType;
    type B: DeviceType;
    type M: ElementwiseFn<Elems = (Self::A, Self::B)>;
    type R: BinaryFn<<Self::M as UserFn>::Out>;
}

impl<M, R, A, B> PairsReduceSig for (M, R, A, B)
where
    M: ElementwiseFn<Elems = (A, B)>,
    R: BinaryFn<M::Out>,
    A: DeviceType,
    B: DeviceType,
{
    type A = A;
    type B = B;
    type M = M;
    type R = R;
}

/// `axis` `Rows`: `out[i]` folds row `i` of the pairs `M(v[i], h[j])`; `Cols`: column `j`.
/// Every fold has at least one pair.
pub(crate) struct MapPairsReduce<'c, 'p, S: PairsReduceSig> {
    pub arrays: ContainerOps<'c, S::M>,
    pub v: Arg<'p, S::A>,
    pub h: Arg<'p, S::B>,
    pub out: ArgMut<'p, <S::M as UserFn>::Out>,
    pub axis: Axis,
    pub uniforms: &'c <S::M as ElementwiseFn>::Uniforms,
}

/// The types of a Filter call: the predicate and the element type.
pub(crate) trait FilterSig {
    type T: DeviceType;
    type F: PredicateFn<Self::T>;
}

impl<F: PredicateFn<T>, T: DeviceType> FilterSig for (F, T) {
    type T = T;
    type F = F;
}

/// The elements of `input` for which `F` holds, written to `out[..kept]` in order; `out`
/// has at least `input`'s length and `out[kept..]` is not touched.
pub(crate) struct Filter<'p, S: FilterSig> {
    pub input: Arg<'p, S::T>,
    pub out: ArgMut<'p, S::T>,
    pub uniforms: &'p <S::F as ElementwiseFn>::Uniforms,
}

/// The types of a Sort call: the key type and the value type (the key type again, unused,
/// for a sort of keys alone).
pub(crate) trait SortSig {
    type K: SortKey;
    type V: DeviceType;
}

impl<K: SortKey, V: DeviceType> SortSig for (K, V) {
    type K = K;
    type V = V;
}

/// `keys` sorted ascending and stably in place (floats in total order), each of `values`
/// (when given; of the keys' length) moved with its key.
pub(crate) struct Sort<'p, S: SortSig> {
    pub keys: ArgMut<'p, S::K>,
    pub values: Option<ArgMut<'p, S::V>>,
}

/// The types of a Histogram call: the bin function, the input tuple, the count type.
pub(crate) trait HistogramSig<'a> {
    type F: ElementwiseFn + UserFn<Out = u32>;
    type I: ArgTuple<'a, Elems = <Self::F as ElementwiseFn>::Elems>;
    type C: Count;
}

impl<'a, F, I, C> HistogramSig<'a> for (F, I, C)
where
    F: ElementwiseFn + UserFn<Out = u32>,
    I: ArgTuple<'a, Elems = F::Elems>,
    C: Count,
{
    type F = F;
    type I = I;
    type C = C;
}

/// `counts[b] = #{i : F(inputs[i]..) == b}` over `shape`, `counts` overwritten; bins
/// outside `0..counts.len()` are not counted (a checked call fails instead).
pub(crate) struct Histogram<'c, 'a, 'k, S: HistogramSig<'a>> {
    pub arrays: ContainerOps<'c, S::F>,
    pub inputs: S::I,
    pub shape: Shape,
    pub counts: ArgMut<'k, S::C>,
    pub uniforms: &'c <S::F as ElementwiseFn>::Uniforms,
}

/// The types of a ReduceByKey call: the key function, the merge, the inputs, the value.
pub(crate) trait ReduceByKeySig<'a> {
    type F: ElementwiseFn + UserFn<Out = (u32, Self::V)>;
    type R: BinaryFn<Self::V>;
    type I: ArgTuple<'a, Elems = <Self::F as ElementwiseFn>::Elems>;
    type V: DeviceType + Default;
}

impl<'a, F, R, I, V> ReduceByKeySig<'a> for (F, R, I, V)
where
    F: ElementwiseFn + UserFn<Out = (u32, V)>,
    R: BinaryFn<V>,
    I: ArgTuple<'a, Elems = F::Elems>,
    V: DeviceType + Default,
{
    type F = F;
    type R = R;
    type I = I;
    type V = V;
}

/// `sums[k]` = `V::default()` merged with `R` with every value `F` pairs with key `k`,
/// over `shape`; `sums` overwritten; keys outside `0..sums.len()` dropped (a checked call
/// fails instead).
pub(crate) struct ReduceByKey<'c, 'a, S: ReduceByKeySig<'a>> {
    pub arrays: ContainerOps<'c, S::F>,
    pub inputs: S::I,
    pub shape: Shape,
    pub sums: ArgMut<'c, S::V>,
    pub uniforms: &'c <S::F as ElementwiseFn>::Uniforms,
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
    #[cfg(feature = "mpi")]
    fn spreads(&self) -> Vec<Option<Spread>>;
    /// Whether any input is distributed (`skel::dist`): what every call asks, without the
    /// allocation of [`ArgTuple::spreads`].
    #[cfg(feature = "mpi")]
    fn any_distributed(&self) -> bool;
    /// Elements `range` of every input, as vector operands.
    fn sub(&self, range: Range<usize>) -> Self;
}

/// What [`ArgTuple::visit`] calls with each operand of a tuple.
#[cfg_attr(not(any(feature = "opencl", feature = "cuda")), allow(dead_code))]
pub trait ArgVisitor {
    /// Called once per operand, in order.
    fn visit<T: DeviceType>(&mut self, arg: Arg<'_, T>) -> Result<()>;

    /// A lazy operand of user function `def` begins. `true`: this visitor reads it as a
    /// chain, which a GPU kernel evaluates per element: its element inputs follow (through
    /// [`visit`](Self::visit), or as chains themselves), then its container arguments
    /// through [`array`](Self::array), its uniforms through [`uniform`](Self::uniform), and
    /// [`chain_end`](Self::chain_end). `false` (the default): its containers are visited as
    /// operands, inputs and container arguments alike (what is uploaded, what is read).
    fn chain(&mut self, _def: &'static FnDef) -> bool {
        false
    }

    /// A container argument of the chain begun last (whole, not a part).
    fn array<T: DeviceType>(&mut self, arg: Arg<'_, T>) -> Result<()> {
        self.visit(arg)
    }

    /// The bytes of one uniform of the chain begun last.
    fn uniform(&mut self, _bytes: &[u8]) {}

    /// The chain begun last ends.
    fn chain_end(&mut self) {}
}

/// Host slices of the inputs of one call, all of one length.
pub trait HostSlices: Copy + Send + Sync {
    /// The tuple of element values at one position.
    type Elems: Copy + Send + Sync;
    /// The values at position `i`.
    fn at(&self, i: usize) -> Self::Elems;
    /// [`HostSlices::at`] for a caller that knows the (row, column) of its element `i`
    /// (a 2D loop): a lazy input with a 2D `#[index]` takes it instead of dividing.
    #[inline(always)]
    fn at_cell(&self, i: usize, _cell: (usize, usize)) -> Self::Elems {
        self.at(i)
    }
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
    #[cfg(feature = "mpi")]
    fn spreads(&self) -> Vec<Option<Spread>> {
        Vec::new()
    }
    #[cfg(feature = "mpi")]
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
        impl<'a, $($t: Operand<'a>),+> ArgTuple<'a> for ($($t,)+) {
            type Elems = ($($t::Elem,)+);
            type Host = ($($t::Host,)+);
            fn shapes(&self) -> Vec<Shape> {
                vec![$(self.$i.shape()),+]
            }
            fn host(&self) -> Result<Self::Host> {
                Ok(($(self.$i.host()?,)+))
            }
            fn visit<V: ArgVisitor>(&self, v: &mut V) -> Result<()> {
                $(self.$i.visit(v)?;)+
                Ok(())
            }
            #[cfg(feature = "mpi")]
            fn spreads(&self) -> Vec<Option<Spread>> {
                vec![$(self.$i.spread()),+]
            }
            #[cfg(feature = "mpi")]
            fn any_distributed(&self) -> bool {
                $(self.$i.spread().is_some())||+
            }
            fn sub(&self, range: Range<usize>) -> Self {
                ($(self.$i.sub(range.clone()),)+)
            }
        }

        impl<$($t: HostAt),+> HostSlices for ($($t,)+) {
            type Elems = ($($t::Elem,)+);
            #[inline(always)]
            fn at(&self, i: usize) -> Self::Elems {
                ($(self.$i.at(i),)+)
            }
            #[inline(always)]
            fn at_cell(&self, i: usize, cell: (usize, usize)) -> Self::Elems {
                ($(self.$i.at_cell(i, cell),)+)
            }
            #[inline(always)]
            fn slice(&self, range: Range<usize>) -> Self {
                ($(self.$i.slice(range.clone()),)+)
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

/// One element operand of a call: a container range ([`Arg`]) or a lazy Map evaluated
/// per element by the host backends (`skeletons::lazy`).
pub trait Operand<'a>: Copy + Send + Sync {
    /// The element type.
    type Elem: Copy + Send + Sync;
    /// What the host backends read it through.
    type Host: HostAt<Elem = Self::Elem>;
    /// Its shape.
    fn shape(&self) -> Shape;
    /// Its host view, brought back from devices where stale.
    fn host(&self) -> Result<Self::Host>;
    /// Calls `v` with each container it reads, in order.
    #[cfg_attr(not(any(feature = "opencl", feature = "cuda")), allow(dead_code))]
    fn visit<V: ArgVisitor>(&self, v: &mut V) -> Result<()>;
    /// Where it lies among the processes (`skel::dist`).
    #[cfg(feature = "mpi")]
    fn spread(&self) -> Option<Spread>;
    /// Elements `range` of it.
    fn sub(&self, range: Range<usize>) -> Self;
}

/// The host view of one operand: its value at each position.
pub trait HostAt: Copy + Send + Sync {
    /// The element type.
    type Elem: Copy + Send + Sync;
    /// The value at position `i`.
    fn at(&self, i: usize) -> Self::Elem;
    /// The value at position `i`, which is at `cell` (row, column) of the consumer's
    /// operands.
    #[inline(always)]
    fn at_cell(&self, i: usize, _cell: (usize, usize)) -> Self::Elem {
        self.at(i)
    }
    /// The same operand restricted to `range`.
    fn slice(&self, range: Range<usize>) -> Self;
}

impl<T: Copy + Send + Sync> HostAt for &[T] {
    type Elem = T;
    #[inline(always)]
    fn at(&self, i: usize) -> T {
        self[i]
    }
    #[inline(always)]
    fn slice(&self, range: Range<usize>) -> Self {
        &self[range]
    }
}

impl<'a, T: DeviceType> Operand<'a> for Arg<'a, T> {
    type Elem = T;
    type Host = &'a [T];
    #[inline]
    fn shape(&self) -> Shape {
        Arg::shape(self)
    }
    #[inline]
    fn host(&self) -> Result<&'a [T]> {
        Arg::host(self)
    }
    fn visit<V: ArgVisitor>(&self, v: &mut V) -> Result<()> {
        v.visit(*self)
    }
    #[cfg(feature = "mpi")]
    fn spread(&self) -> Option<Spread> {
        Arg::spread(self)
    }
    #[inline]
    fn sub(&self, range: Range<usize>) -> Self {
        Arg::sub(self, range)
    }
}

/// A 3D stencil over a tensor of extents `dims` (settled by the skeleton's checks).
pub(crate) struct MapOverlap3d<'p, F: crate::userfn::Window3Fn> {
    pub input: Arg<'p, F::Elem>,
    pub out: ArgMut<'p, F::Out>,
    pub stencil: Stencil<F::Elem, (usize, usize, usize)>,
    pub dims: (usize, usize, usize),
    pub uniforms: &'p F::Uniforms,
}

/// How a fold of mapped values delivers its result and which grouping it keeps.
pub(crate) struct Fold<'o, T: DeviceType> {
    /// The mapped values are a lazy input's: fold them exactly as `Reduce` folds the
    /// materialised values on the same backend (same grouping, bit-identical), rather than
    /// as `MapReduce` groups them.
    pub as_reduce: bool,
    /// `Some`: the result (`start` folded in) goes to element 0 of this one-element
    /// container, where it is computed (on a GPU: device-resident, no host round trip);
    /// `None`: it is returned.
    pub into: Option<ArgMut<'o, T>>,
}

/// `out[r]` (`axis` `Rows`) or `out[c]` (`Cols`) = the `R`-fold, from its first value, of
/// `M` over that row or column of the `shape` matrix inputs, grouped as `ReduceAxis`
/// groups the materialised values (bit-identical to it on the same backend).
pub(crate) struct MapReduceAxis<'c, 'a, S: MapReduceSig<'a>> {
    pub map_reduce: MapReduce<'c, 'a, S>,
    pub out: ArgMut<'c, <S::M as UserFn>::Out>,
    pub axis: Axis,
}

/// One colour sweep of a 2D stencil in place: the cells with `(i + j) % 2 == parity` of
/// `m` computed from `m` itself, written back into it (its one windowed input; the
/// function's element and result types are the same). Only the GPU backends read all of it.
#[cfg_attr(not(any(feature = "opencl", feature = "cuda")), allow(dead_code))]
pub(crate) struct MapOverlapInPlace<'p, F: OverlapFn> {
    pub m: ArgMut<'p, F::Out>,
    pub arrays: <F::Arrays as ContainerArgs>::Args<'p>,
    pub stencil: Stencil<F::Elem, F::Radius>,
    pub parity: usize,
    pub uniforms: &'p F::Uniforms,
}

/// The types of a Wavefront call: the user function of three neighbours and the cell type.
pub(crate) trait WavefrontSig {
    type T: DeviceType;
    type F: ElementwiseFn<Elems = (Self::T, Self::T, Self::T), Out = Self::T>;
}

impl<F, T> WavefrontSig for (F, T)
where
    F: ElementwiseFn<Elems = (T, T, T), Out = T>,
    T: DeviceType,
{
    type T = T;
    type F = F;
}

/// `m[(i, j)] = F((i, j), m[(i-1, j)], m[(i, j-1)], m[(i-1, j-1)], arrays, uniforms)` for
/// every `i >= 1`, `j >= 1`, each cell after its three neighbours: the matrix `m` is read
/// and written in place; its row 0 and column 0 are the boundary, never written.
pub(crate) struct Wavefront<'c, 'p, S: WavefrontSig> {
    pub arrays: ContainerOps<'c, S::F>,
    pub m: ArgMut<'p, S::T>,
    pub uniforms: &'c <S::F as ElementwiseFn>::Uniforms,
}
