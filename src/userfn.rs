//! The traits that `#[userfn]` and `#[derive(DeviceType)]` implement.
//!
//! A user function is a unit value (`add`) whose type implements [`UserFn`] plus exactly one
//! of the call traits below, chosen by its parameter kinds:
//!
//! | parameters                                   | trait             | skeletons                         |
//! |----------------------------------------------|-------------------|-----------------------------------|
//! | `#[index]`?, elements, `#[uniform]`s         | [`ElementwiseFn`] | Map, Reduce, MapReduce, Scan, MapPairs, MapPairsReduce |
//! | the same plus up to four container parameters `Mat<T>` / `&[T]` | [`ElementwiseFn`] (`Arrays` not `()`) | Map, MapReduce, MapPairs, MapPairsReduce, bound with `.arrays((..))` |
//! | `#[index]`?, one `&[T]`, elements, uniforms  | [`ArrayFn`] (also the row above) | MapArray                          |
//! | any of the above plus one `rng: &mut Random` (not a stencil) | the same (`Uniforms` is a [`crate::plumbing::Seeded`] tuple, `Index` at least `usize`) | every per-element skeleton; not a combining function (see [`crate::random`]) |
//! | one `Window<T>`, uniforms                    | [`WindowFn`] + [`StencilFn`] | MapOverlap 1D, rowwise, colwise   |
//! | one `Window2<T>`, uniforms                   | [`Window2Fn`] + [`StencilFn`] | MapOverlap 2D                     |
//! | one `Window3<T>`, uniforms                   | [`Window3Fn`] + [`StencilFn`] | MapOverlap 3D (on a `Tensor3`)    |
//! | `#[index]`?, 1..=4 `Window<T>` or `Window2<T>`, containers, uniforms | [`Overlap1Fn`] / [`Overlap2Fn`] (every window function) | MapOverlap with `.arrays`, several inputs, `run_in_place` |
//!
//! The Rust body is kept as `name::call(..)` and inlined into the CPU loops; the same body is
//! described by [`UserFn::definition`] for the C code generator of the GPU backends. The
//! types the macro fills these traits' associated types with (the `#[index]` kind, the
//! uniform tuple, the container parameters) are in [`crate::plumbing`].
//!
//! ## The language of a body
//!
//! Literals, `let`/`let mut`, (compound) assignment, arithmetic, comparison, logical and bit
//! operators, `as` between numbers, `if`/`else` (statement and value), `for i in a..b` and
//! `a..=b`, `while`, `loop`, `break`, `continue` and `return` anywhere, struct literals and
//! fields, calls of other `#[userfn]` functions (not recursive), and:
//!
//! - **arrays**: `[0.0f32; 9]`, `[x, y, z]`, `a[i]` reads and writes (also `m[i][j]`,
//!   `s.taps[i]`), `a.len()`; `[T; N]` of any device type is a device type (elements,
//!   uniforms, struct fields, return values). In C an array is a struct `{ T v[N]; }`, so it
//!   is copied by value as in Rust. CUDA keeps a local array in registers when every index
//!   is a constant after unrolling (e.g. `for` loops over `0..a.len()` with constant bounds);
//!   indexed with a run-time value (a histogram bin, an insertion sort) it lives in the
//!   thread's local memory, which is cached but slower. Indexing out of bounds is an
//!   `Err(Error::UserFunction)` in a checked call (see [`crate::check`]).
//! - **`bool`**, a device type (a byte, 0 or 1; `uchar` in OpenCL C, which has no `bool` in
//!   memory).
//! - **tuples** of 2 to 4 values as return types (`-> (f32, f32)`, a C struct with members
//!   `f0`, `f1`, ..; see [`UserFn::outputs`]), tuple expressions, `let (a, b) = g(x);`
//!   (also `_`) and `t.0`. Like every device type a tuple has no padding: `(f32, u32)` or
//!   `(u16, u8, bool)`, not `(f32, u8)` (a compile error that says so).
//! - **`.len()`** of local arrays and of `&[T]` parameters (the C function then takes the
//!   length after the pointer, see [`crate::plumbing::codegen::array_len_param`]).
//! - **math** for `f32`/`f64`, as `x.sqrt()` or `f32::sqrt(x)`: `abs sqrt cbrt powf powi exp
//!   exp2 ln log2 log10 sin cos tan asin acos atan atan2 sinh cosh tanh hypot floor ceil
//!   round round_ties_even trunc fract min max clamp mul_add signum copysign is_nan
//!   is_finite`; for integers `min max abs clamp pow wrapping_add wrapping_sub wrapping_mul
//!   rotate_left rotate_right count_ones leading_zeros trailing_zeros`, with Rust's
//!   semantics: `round` rounds half away from zero, `signum(-0.0) == -1.0`, `min`/`max`
//!   return the other operand of a NaN, `leading_zeros(0)` is the width, and integer
//!   arithmetic wraps on every backend in every build, as in a release build (`#[userfn]`
//!   rewrites `+ - *`, `-x`, shifts, `pow` and `abs` of the Rust body into their wrapping
//!   forms, so a debug build does not panic where a GPU wraps). `clamp` with `min > max` (a panic in Rust) is not checked on a device. The
//!   exactly rounded operations (`+ - * /`, `sqrt`, `mul_add`, rounding, `fract`, `min`,
//!   `max`, ...) give the `cpu` backend's bits; the transcendental ones may differ by a few
//!   units in the last place (the tests allow 16, the OpenCL 1.2 bound for `pow`; CUDA's
//!   are lower).
//! - **constants**: `f32::MAX`, `f32::EPSILON`, `u32::MAX`, `f64::consts::PI`, ... and
//!   module-level `const` items of any device type, named in `SCREAMING_CASE` (as Rust
//!   names constants) directly or by path (`K`, `filters::GAUSS`, `Pixel::WHITE`). A
//!   `SCREAMING_CASE` name that the function binds itself (a parameter or local) is that
//!   local. The expansion reads the constant's value when the function is translated to C.
//!
//! Closures, heap types (`Vec`, `String`, `Box`, ..), references other than the parameter
//! kinds, generics, `unsafe`, macros, `match`, labels and recursion are compile errors at
//! their span that say what to write instead (mutual recursion, which the macro cannot see,
//! is an [`crate::Error::Compile`] when a GPU backend translates the function).
//!
//! ```
//! use skel::prelude::*;
//!
//! #[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
//! #[repr(C)]
//! struct Sample { taps: [f32; 4], valid: bool, pad: [u8; 3] }
//!
//! const BIAS: [f32; 4] = [0.5, 0.25, 0.0, -0.25];
//!
//! #[userfn]
//! fn polar(x: f32, y: f32) -> (f32, f32) { ((x * x + y * y).sqrt(), y.atan2(x)) }
//!
//! #[userfn]
//! fn filter(s: Sample, #[uniform] k: [f32; 3]) -> f32 {
//!     if !s.valid {
//!         return 0.0;
//!     }
//!     let mut v = [0.0f32; 4];
//!     for i in 0..v.len() {
//!         v[i] = s.taps[i] * k[i % k.len()] + BIAS[i];
//!     }
//!     let (r, _) = polar(v[0], v[1]);
//!     let mut n = 0;
//!     loop {
//!         n += 1;
//!         if n == 3 { break; }
//!     }
//!     r.max(v[2]).clamp(0.0, 10.0) + n as f32 + f32::EPSILON
//! }
//!
//! let s = Vector::from(vec![Sample { taps: [3.0, 4.0, 1.0, 0.0], valid: true, pad: [0; 3] }]);
//! let mut out = Vector::zeroed(1);
//! Map::new(filter).uniforms(([1.0f32, 1.0, 1.0],)).run(&s, &mut out)?;
//! assert_eq!(out[0], (3.5f32 * 3.5 + 4.25 * 4.25).sqrt() + 3.0 + f32::EPSILON);
//! # Ok::<(), skel::Error>(())
//! ```

use std::ops::Index;

mod window3;
pub use window3::{Window3, Window3Fn};

use crate::codegen::{FnDef, Ty};
use crate::containers::{Arg, Input, Shape};
use crate::plan::ArgTuple;

/// The most bytes one local array of a user function (`[value; N]`) may hold: 32 KiB, on
/// every backend.
///
/// A larger one is a compile error at the array (E0080 "a local array of a user function
/// holds at most 32 KiB", reported by `cargo build`/`cargo test`; `cargo check` does not
/// evaluate it), so no backend meets it at run time. Up to the limit an array works on every
/// backend: the OpenCL backend sizes the work-groups of a CPU device (PoCL, which runs a
/// work-group on one thread's stack) so that their local arrays fit, and a GPU keeps them in
/// the thread's local memory. A kernel whose private memory the device cannot give any
/// work-group is `Err(Error::Driver)` before launch.
///
/// ```
/// use skel::prelude::*;
///
/// #[userfn]
/// fn spread(x: u32) -> u32 {
///     let mut seen = [0u32; 8192]; // 32 KiB: the limit
///     seen[(x as usize) % 8192] = x;
///     seen[(x as usize * 7) % 8192] + 1
/// }
/// let mut out = Vector::zeroed(3);
/// Map::new(spread).run(&Vector::from(vec![0u32, 1, 2]), &mut out)?;
/// assert_eq!(out.to_vec(), vec![1, 1, 1]);
/// assert_eq!(skel::userfn::MAX_LOCAL_ARRAY_BYTES, 32 * 1024);
/// # Ok::<(), skel::Error>(())
/// ```
///
/// One more element does not compile:
///
/// ```compile_fail,E0080
/// use skel::prelude::*;
///
/// #[userfn]
/// fn too_big(x: u32) -> u32 {
///     let seen = [x; 8193];
///     seen[0]
/// }
/// let mut out = Vector::zeroed(1);
/// Map::new(too_big).run(&Vector::from(vec![1u32]), &mut out).unwrap();
/// ```
pub const MAX_LOCAL_ARRAY_BYTES: usize = 32 * 1024;

/// A plain-old-data type that can live in device memory and be named in C.
///
/// Implemented for `f32 f64 i8 i16 i32 i64 u8 u16 u32 u64 bool`, for arrays `[T; N]` and
/// tuples of two to four device types (padding-free ones; a tuple is what a multi-output
/// user function returns), and derivable with `#[derive(DeviceType)]` for `#[repr(C)]`
/// structs whose fields are device types (arrays included).
///
/// ```
/// use skel::prelude::*;
/// #[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
/// #[repr(C)]
/// struct Pixel { r: f32, g: f32, b: f32 }
/// assert_eq!(<Pixel as DeviceType>::TY.c_struct_name(), Some("Pixel"));
/// ```
///
/// # Safety
/// The type must be `#[repr(C)]` (or a primitive), contain no pointers, padding-free layout
/// described exactly by [`DeviceType::TY`], and every bit pattern copied from a device
/// must be a valid value. The derive checks this; implement it by hand only for such types.
pub unsafe trait DeviceType: Copy + Send + Sync + 'static {
    /// How the code generator lays the type out and names it.
    const TY: Ty;
}

/// What every user function has: a name, a return type and a device-code description.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a user function",
    label = "not a `#[userfn]`",
    note = "mark the function `#[userfn]`: skeletons, and user functions that call it, need its device-code description"
)]
pub trait UserFn: Copy + Send + Sync + 'static {
    /// The return type.
    type Out: DeviceType;
    /// The function's name, also its C identifier.
    const NAME: &'static str;
    /// The typed body the C code generator translates (see [`crate::plumbing::codegen`]).
    fn definition() -> &'static FnDef;

    /// The types of the values the function returns: the elements of a tuple return
    /// (`-> (f32, u32)`, one per output of a multi-output Map), else the one return type.
    ///
    /// ```
    /// use skel::prelude::*;
    /// use skel::userfn::UserFn;
    /// #[userfn]
    /// fn polar(x: f32, y: f32) -> (f32, f32) { ((x * x + y * y).sqrt(), y.atan2(x)) }
    /// assert_eq!(polar::outputs().len(), 2);
    /// assert_eq!(polar::call(3.0, 0.0), (3.0, 0.0));
    /// ```
    fn outputs() -> Vec<Ty> {
        let ty = <Self::Out as DeviceType>::TY;
        match ty.tuple_elems() {
            Some(elems) => elems.to_vec(),
            None => vec![ty],
        }
    }
}

/// The definition of the user function `f`, for a call of it inside another user
/// function's definition (a `const fn`, so that the caller's static tree can name it).
// Called by the code `#[userfn]` generates.
#[doc(hidden)]
pub const fn definition_of<F: UserFn>(_f: F) -> fn() -> &'static FnDef {
    F::definition
}

/// How the optional `#[index]` parameter is computed from a flat element position.
// Documented in `skel::plumbing` (re-exported there); this path stays for existing code.
#[doc(hidden)]
pub trait IndexKind: Copy + Send + Sync + 'static {
    /// 0 (no index parameter), 1 (`usize`) or 2 (`(usize, usize)`).
    const DIMS: u8;
    /// The index of flat position `flat` in a container with `cols` columns
    /// (`cols` is the length for a vector).
    fn from_flat(flat: usize, cols: usize) -> Self;
    /// [`IndexKind::from_flat`] for a caller that already knows the position's row and
    /// column (`flat == row * cols + col`): the host backends walk rows and columns with
    /// counters instead of dividing per element.
    #[doc(hidden)]
    #[inline(always)]
    fn from_parts(flat: usize, (_row, _col): (usize, usize), cols: usize) -> Self {
        Self::from_flat(flat, cols)
    }
}

impl IndexKind for () {
    const DIMS: u8 = 0;
    #[inline(always)]
    fn from_flat(_: usize, _: usize) -> Self {}
}

impl IndexKind for usize {
    const DIMS: u8 = 1;
    #[inline(always)]
    fn from_flat(flat: usize, _: usize) -> Self {
        flat
    }
}

impl IndexKind for (usize, usize) {
    const DIMS: u8 = 2;
    #[inline(always)]
    fn from_flat(flat: usize, cols: usize) -> Self {
        (flat / cols, flat % cols)
    }
    #[inline(always)]
    fn from_parts(_: usize, at: (usize, usize), _: usize) -> Self {
        at
    }
}

/// A function of elements (`fn f(#[index] i: usize, a: A, b: B, #[uniform] u: U) -> R`),
/// possibly with container arguments (`m: Mat<T>`, `x: &[T]`, bound with `.arrays(..)`).
pub trait ElementwiseFn: UserFn {
    /// `()`, `usize` or `(usize, usize)`.
    type Index: IndexKind;
    /// The element parameters as a tuple: `()`, `(A,)`, `(A, B)`, ...
    type Elems: Copy + Send + Sync;
    /// The uniform parameters as a tuple.
    type Uniforms: UniformTuple;
    /// The container parameters as a tuple of [`MatArg`] / [`SliceArg`], `()` for none.
    type Arrays: ContainerArgs;
    /// Calls the Rust body with the container arguments `arrays`.
    fn apply_with(
        index: Self::Index,
        arrays: <Self::Arrays as ContainerArgs>::Refs<'_>,
        elems: Self::Elems,
        uniforms: &Self::Uniforms,
    ) -> Self::Out;
    /// Flat output positions `first .. first + n` (rows of `cols`) of an index Map whose
    /// body is a reduction loop nest (a matrix or matrix-vector product,
    /// [`crate::codegen`]'s loop-nest forms), by a cache-blocked loop over contiguous rows
    /// that applies the body's accumulation step to each element in the body's order;
    /// `None` where the body is no such nest or an index would leave its container (the
    /// per-element call then runs, and reports it). `#[userfn]` implements it.
    #[doc(hidden)]
    #[inline(always)]
    fn nest_block(
        _arrays: <Self::Arrays as ContainerArgs>::Refs<'_>,
        _first: usize,
        _n: usize,
        _cols: usize,
        _uniforms: &Self::Uniforms,
    ) -> Option<Vec<Self::Out>> {
        None
    }
    /// Calls the Rust body of a function without container parameters.
    #[inline(always)]
    fn apply(index: Self::Index, elems: Self::Elems, uniforms: &Self::Uniforms) -> Self::Out
    where
        Self: ElementwiseFn<Arrays = ()>,
    {
        Self::apply_with(index, (), elems, uniforms)
    }
}

/// A read-only random-access matrix: what a `Mat<T>` parameter of a user function sees of
/// the `Matrix` bound to it with `.arrays(..)` (SkePU's `Mat<T>` proxy).
///
/// ```
/// use skel::prelude::*;
/// let data = [1, 2, 3, 4, 5, 6];
/// let m = Mat::new(&data, 2, 3);
/// assert_eq!((m.rows(), m.cols(), m[(1, 0)]), (2, 3, 4));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Mat<'a, T> {
    data: &'a [T],
    rows: usize,
    cols: usize,
}

impl<'a, T> Mat<'a, T> {
    /// The `rows x cols` matrix stored row-major in `data`.
    ///
    /// # Panics
    /// If `data.len() != rows * cols`.
    #[inline(always)]
    pub fn new(data: &'a [T], rows: usize, cols: usize) -> Self {
        assert_eq!(
            Some(data.len()),
            rows.checked_mul(cols),
            "a {rows}x{cols} Mat holds {rows} * {cols} elements"
        );
        Mat { data, rows, cols }
    }

    /// Number of rows.
    #[inline(always)]
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns.
    #[inline(always)]
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The elements, row-major.
    #[inline(always)]
    pub fn as_slice(&self) -> &'a [T] {
        self.data
    }
}

impl<'a, T> Mat<'a, T> {
    /// The elements, row-major (the cpu loop-nest kernels read rows as slices).
    pub(crate) fn data(&self) -> &'a [T] {
        self.data
    }
}

impl<T> Index<(usize, usize)> for Mat<'_, T> {
    type Output = T;
    /// # Panics
    /// If `row >= rows` or `col >= cols`: a [`crate::check::Fault`] (the row against the
    /// rows, else the column against the columns), which a skeleton call returns as
    /// [`crate::Error::UserFunction`].
    #[inline(always)]
    fn index(&self, (row, col): (usize, usize)) -> &T {
        // One branch for both checks (the fault tells which failed), out of the hot path.
        if (row >= self.rows) | (col >= self.cols) {
            crate::check::mat_fault_at((row, col), (self.rows, self.cols));
        }
        let k = row * self.cols + col;
        // SAFETY: `row < rows` and `col < cols` (checked above), so `k <= (rows - 1) * cols
        // + cols - 1 < rows * cols`, which is `data.len()` (asserted by `new`; the fields
        // are private and never change). The slice's own check stayed in the loop after a
        // clamp meant to remove it (LLVM cannot tell that `data` is not empty): a heat
        // stencil reading five elements per output took 1.5-1.7x the time of the same loop
        // over a plain slice; without it, the time of that loop.
        unsafe { self.data.get_unchecked(k) }
    }
}

/// What kind of container a container parameter takes.
// Documented in `skel::plumbing` (re-exported there); this path stays for existing code.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ContainerKind {
    /// `Mat<T>`: a `Matrix`.
    Mat,
    /// `&[T]`: a `Vector` or a vector view.
    Slice,
}

/// A type other crates cannot name: a trait method taking it cannot be overridden there.
pub(crate) mod sealed {
    /// The token ([`super::ContainerArg::inside`]).
    #[derive(Clone, Copy, Debug)]
    pub struct Only;
}

/// One container parameter's kind, as a type: [`MatArg`] or [`SliceArg`].
// Documented in `skel::plumbing` (re-exported there); this path stays for existing code.
#[doc(hidden)]
pub trait ContainerArg: 'static {
    /// The element type.
    type Elem: DeviceType;
    /// What the Rust body receives: `Mat<'a, T>` or `&'a [T]`.
    type Ref<'a>: Copy + Send + Sync;
    /// The kind, for the shape check and messages.
    const KIND: ContainerKind;
    /// The parameter over `data`, which has shape `shape` (checked to be of [`Self::KIND`]).
    fn make(data: &[Self::Elem], shape: Shape) -> Self::Ref<'_>;
    /// Whether `r[(row, col)]` is inside `r` (it has an element there): a `Mat`'s shape;
    /// always for a slice, which checks its own reads. See [`ContainerArgs::inside`].
    /// Cannot be overridden outside this crate (its last parameter's type cannot be
    /// named there): the host stencil loops rely on its answer being monotone in the
    /// column; `cpu::map_range`'s interior copy (`interior`, `assume_inside` in
    /// src/backends/cpu.rs: a 3 x 3 neighbourhood inside from its far corner) and `rayon`'s
    /// MapPairsReduce bands on its being monotone in the row and the column
    /// (`unreachable_unchecked`), so only this crate's implementations may give it.
    #[inline(always)]
    fn inside(_r: Self::Ref<'_>, _at: (usize, usize), _: sealed::Only) -> bool {
        true
    }
}

/// A `Mat<T>` parameter.
// Documented in `skel::plumbing` (re-exported there); this path stays for existing code.
#[doc(hidden)]
#[derive(Debug)]
pub struct MatArg<T>(std::marker::PhantomData<T>);

/// A `&[T]` parameter bound as a container argument.
// Documented in `skel::plumbing` (re-exported there); this path stays for existing code.
#[doc(hidden)]
#[derive(Debug)]
pub struct SliceArg<T>(std::marker::PhantomData<T>);

impl<T: DeviceType> ContainerArg for MatArg<T> {
    type Elem = T;
    type Ref<'a> = Mat<'a, T>;
    const KIND: ContainerKind = ContainerKind::Mat;
    #[inline(always)]
    fn make(data: &[T], shape: Shape) -> Mat<'_, T> {
        let (rows, cols) = shape.dims();
        Mat::new(data, rows, cols)
    }
    #[inline(always)]
    fn inside(r: Mat<'_, T>, (row, col): (usize, usize), _: sealed::Only) -> bool {
        // The flat position's bound follows from the other two (`new`), but stated it lets
        // LLVM drop the clamp in `Index` as well (`row < rows`, so no overflow).
        row < r.rows && col < r.cols && row * r.cols + col < r.data.len()
    }
}

impl<T: DeviceType> ContainerArg for SliceArg<T> {
    type Elem = T;
    type Ref<'a> = &'a [T];
    const KIND: ContainerKind = ContainerKind::Slice;
    #[inline(always)]
    fn make(data: &[T], _: Shape) -> &[T] {
        data
    }
}

/// The container parameters of a user function: `()` or a tuple of up to four
/// [`ContainerArg`]s.
///
/// ```
/// use skel::prelude::*;
/// use skel::plumbing::{ContainerArgs, ContainerKind};
/// use skel::userfn::ElementwiseFn;
/// #[userfn]
/// fn mv(#[index] i: usize, m: Mat<f32>, x: &[f32]) -> f32 { m[(i, 0)] * x[0] }
/// #[userfn]
/// fn twice(x: f32) -> f32 { 2.0 * x }
/// type Of<F> = <F as ElementwiseFn>::Arrays;
/// assert_eq!(Of::<mv>::KINDS, [ContainerKind::Mat, ContainerKind::Slice]);
/// assert!(Of::<twice>::KINDS.is_empty());
/// ```
// Documented in `skel::plumbing` (re-exported there); this path stays for existing code.
#[doc(hidden)]
pub trait ContainerArgs: 'static {
    /// What the Rust body receives: a tuple of `Mat<'a, T>` / `&'a [T]`.
    type Refs<'a>: Copy + Send + Sync;
    /// The bound operands a backend gets.
    type Args<'a>: ArgTuple<'a>;
    /// The kind of each parameter, in order.
    const KINDS: &'static [ContainerKind];
    /// The parameters over the operands' host slices `host` of shapes `shapes`.
    fn refs<'a>(host: <Self::Args<'a> as ArgTuple<'a>>::Host, shapes: &[Shape]) -> Self::Refs<'a>;
    /// Whether every `Mat` of `refs` has an element at `(row, col)` ([`ContainerArg::inside`]).
    /// A host loop over the outputs `(i, j)`, `j` rising, checks this once at its last
    /// output and then tells LLVM it holds at each (`unreachable_unchecked` where not): a
    /// read `m[(i, j)]` at the output's own index then has no check and the loop vectorises.
    /// Not overridable outside this crate, as [`ContainerArg::inside`].
    #[inline(always)]
    fn inside(_refs: Self::Refs<'_>, _at: (usize, usize), _: sealed::Only) -> bool {
        true
    }
}

impl ContainerArgs for () {
    type Refs<'a> = ();
    type Args<'a> = ();
    const KINDS: &'static [ContainerKind] = &[];
    #[inline(always)]
    fn refs<'a>(_: <Self::Args<'a> as ArgTuple<'a>>::Host, _: &[Shape]) -> Self::Refs<'a> {}
}

macro_rules! container_args {
    ($(($($k:ident $i:tt),+))*) => {$(
        impl<$($k: ContainerArg),+> ContainerArgs for ($($k,)+) {
            type Refs<'a> = ($($k::Ref<'a>,)+);
            type Args<'a> = ($(Arg<'a, $k::Elem>,)+);
            const KINDS: &'static [ContainerKind] = &[$($k::KIND),+];
            #[inline(always)]
            fn refs<'a>(
                host: <Self::Args<'a> as ArgTuple<'a>>::Host,
                shapes: &[Shape],
            ) -> Self::Refs<'a> {
                ($($k::make(host.$i, shapes[$i]),)+)
            }
            #[inline(always)]
            fn inside(refs: Self::Refs<'_>, at: (usize, usize), _: sealed::Only) -> bool {
                true $(&& $k::inside(refs.$i, at, sealed::Only))+
            }
        }
    )*};
}

/// What `.arrays(..)` binds to container parameters `K`: `()` for none, else a tuple of
/// references to containers or views, one per parameter in declaration order (a `Matrix`
/// for a `Mat<T>`, a `Vector` or a vector view for a `&[T]`; the kinds are checked when the
/// skeleton runs).
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not bind the container parameters `{K}`",
    label = "bind one container per `Mat<T>` / `&[T]` parameter, in order: `.arrays((&m, &v))`"
)]
// Documented in `skel::plumbing` (re-exported there); this path stays for existing code.
#[doc(hidden)]
pub trait BindArrays<K: ContainerArgs> {
    /// The bound containers as operands.
    fn bind(&self) -> K::Args<'_>;
    /// Puts the whole of each distributed bound container in its slot (every rank calls it
    /// together; see [`Input::gather_whole`]).
    #[doc(hidden)]
    fn gather_wholes(&self, slots: &crate::containers::WholeCells) -> crate::Result<()>;
    /// The bound containers as operands, the distributed ones whole, from `slots`.
    #[doc(hidden)]
    fn bind_whole<'k>(&'k self, slots: &'k crate::containers::WholeCells) -> K::Args<'k>;
}

impl BindArrays<()> for () {
    fn bind(&self) {}
    fn gather_wholes(&self, _: &crate::containers::WholeCells) -> crate::Result<()> {
        Ok(())
    }
    fn bind_whole<'k>(&'k self, _: &'k crate::containers::WholeCells) {}
}

macro_rules! bind_arrays {
    ($(($($k:ident $x:ident $i:tt),+))*) => {$(
        impl<'x, $($k: ContainerArg, $x: Input<$k::Elem> + ?Sized),+> BindArrays<($($k,)+)>
            for ($(&'x $x,)+)
        {
            fn bind(&self) -> ($(Arg<'_, $k::Elem>,)+) {
                ($(self.$i.arg(),)+)
            }
            fn gather_wholes(&self, slots: &crate::containers::WholeCells) -> crate::Result<()> {
                $(self.$i.gather_whole(&slots[$i])?;)+
                Ok(())
            }
            fn bind_whole<'k>(&'k self, slots: &'k crate::containers::WholeCells) -> ($(Arg<'k, $k::Elem>,)+) {
                ($(self.$i.whole_arg(&slots[$i]),)+)
            }
        }
    )*};
}

bind_arrays! {
    (K0 X0 0)
    (K0 X0 0, K1 X1 1)
    (K0 X0 0, K1 X1 1, K2 X2 2)
    (K0 X0 0, K1 X1 1, K2 X2 2, K3 X3 3)
}

container_args! {
    (K0 0)
    (K0 0, K1 1)
    (K0 0, K1 1, K2 2)
    (K0 0, K1 1, K2 2, K3 3)
}

/// A function that also reads one whole array (`&[T]`), for MapArray.
pub trait ArrayFn: UserFn {
    /// `()`, `usize` or `(usize, usize)`.
    type Index: IndexKind;
    /// Element type of the `&[T]` parameter.
    type Array: DeviceType;
    /// The element parameters as a tuple.
    type Elems: Copy + Send + Sync;
    /// The uniform parameters as a tuple.
    type Uniforms: UniformTuple;
    /// Calls the Rust body.
    fn apply(
        index: Self::Index,
        array: &[Self::Array],
        elems: Self::Elems,
        uniforms: &Self::Uniforms,
    ) -> Self::Out;
}

/// What the 1D and 2D stencil functions share; `#[userfn]` implements it next to
/// [`WindowFn`] (`Radius = usize`) or [`Window2Fn`] (`Radius = (usize, usize)`), so that
/// `MapOverlap::new(f, radius)` knows the radius type from `f`.
pub trait StencilFn: UserFn {
    /// `usize` for a 1D window, `(usize, usize)` (rows, columns) for a 2D window.
    type Radius: Copy + std::fmt::Debug + Send + Sync + 'static;
    /// Element type of the window.
    type Elem: DeviceType;
    /// The uniform parameters as a tuple.
    type Uniforms: UniformTuple;
    /// The windowed inputs: [`crate::plumbing::PlainWindow`] for a function of one window
    /// and uniforms (the form of [`WindowFn`] / [`Window2Fn`]), else a tuple of one
    /// element type per window (`(T,)`, `(T, T)`, ..; see [`OverlapFn`]). It picks the
    /// `run` of the right arity and is always inferred.
    type Windows: Copy + Send + Sync + 'static;
}

/// A window function of any form SkePU 3 has: an optional `#[index]`, 1..=4 windows (all
/// `Window<T>` or all `Window2<T>`, one element type), container parameters (`Mat<T>`,
/// `&[T]`) and uniforms. `#[userfn]` implements it for every window function, next to
/// [`Overlap1Fn`] or [`Overlap2Fn`].
pub trait OverlapFn: StencilFn {
    /// `()`, `usize` (1D: the flat position) or `(usize, usize)` (2D: row and column).
    type Index: IndexKind;
    /// The container parameters, bound with `.arrays((..))`.
    type Arrays: ContainerArgs;
    /// How many windowed inputs the function takes (1..=4).
    const WINDOWS: usize;
}

/// [`OverlapFn`] with 1D windows.
pub trait Overlap1Fn: OverlapFn<Radius = usize> {
    /// Calls the Rust body; `windows` holds one window per windowed input, in order.
    fn apply_windows(
        index: Self::Index,
        windows: &[Window<'_, Self::Elem>],
        arrays: <Self::Arrays as ContainerArgs>::Refs<'_>,
        uniforms: &Self::Uniforms,
    ) -> Self::Out;
}

/// [`OverlapFn`] with 2D windows.
pub trait Overlap2Fn: OverlapFn<Radius = (usize, usize)> {
    /// Calls the Rust body; `windows` holds one window per windowed input, in order.
    fn apply_windows(
        index: Self::Index,
        windows: &[Window2<'_, Self::Elem>],
        arrays: <Self::Arrays as ContainerArgs>::Refs<'_>,
        uniforms: &Self::Uniforms,
    ) -> Self::Out;
}

/// The `Windows` of a stencil function of one window and uniforms, the form every backend
/// has a dedicated path for ([`WindowFn`], [`Window2Fn`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlainWindow;

/// A 1D stencil (`fn f(w: Window<T>, #[uniform] ..) -> R`), for MapOverlap.
pub trait WindowFn: StencilFn<Radius = usize> {
    /// Calls the Rust body.
    fn apply(window: Window<'_, Self::Elem>, uniforms: &Self::Uniforms) -> Self::Out;
}

/// A 2D stencil (`fn f(w: Window2<T>, #[uniform] ..) -> R`), for MapOverlap on a Matrix.
pub trait Window2Fn: StencilFn<Radius = (usize, usize)> {
    /// Calls the Rust body.
    fn apply(window: Window2<'_, Self::Elem>, uniforms: &Self::Uniforms) -> Self::Out;
}

/// The neighbourhood `-r..=r` of one element, seen by a 1D MapOverlap function.
///
/// ```
/// use skel::prelude::*;
/// let data = [1.0f32, 2.0, 3.0];
/// let w = Window::new(&data, 1);
/// assert_eq!((w[-1], w[0], w[1]), (1.0, 2.0, 3.0));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Window<'a, T> {
    data: &'a [T],
    radius: usize,
}

impl<'a, T> Window<'a, T> {
    /// A window over `data`, which holds exactly `2 * radius + 1` elements, centre in the middle.
    ///
    /// # Panics
    /// If `data.len() != 2 * radius + 1`.
    #[inline(always)]
    pub fn new(data: &'a [T], radius: usize) -> Self {
        assert_eq!(
            data.len(),
            2 * radius + 1,
            "a window of radius {radius} holds {} elements",
            2 * radius + 1
        );
        Window { data, radius }
    }

    /// The radius `r`: valid offsets are `-r..=r`.
    #[inline(always)]
    pub fn radius(&self) -> usize {
        self.radius
    }
}

impl<T> Index<isize> for Window<'_, T> {
    type Output = T;
    /// # Panics
    /// If the offset is outside `-r..=r`.
    #[inline(always)]
    fn index(&self, offset: isize) -> &T {
        if offset.unsigned_abs() > self.radius {
            crate::check::window_fault(offset, self.radius);
        }
        &self.data[(self.radius as isize + offset) as usize]
    }
}

/// The neighbourhood of one matrix element, indexed by `(row offset, column offset)`.
///
/// ```
/// use skel::prelude::*;
/// // a 3x3 neighbourhood stored row-major with stride 3
/// let data = [1, 2, 3, 4, 5, 6, 7, 8, 9];
/// let w = Window2::new(&data, 3, (1, 1));
/// assert_eq!((w[(-1, 0)], w[(0, 0)], w[(1, 1)]), (2, 5, 9));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Window2<'a, T> {
    data: &'a [T],
    stride: usize,
    radius: (usize, usize),
}

impl<'a, T> Window2<'a, T> {
    /// A window whose top-left element is `data[0]`, rows `stride` apart, with radii
    /// `(row radius, column radius)`.
    ///
    /// # Panics
    /// If `data` is too short to hold `2 * rows_radius + 1` rows of `2 * cols_radius + 1`.
    #[inline(always)]
    pub fn new(data: &'a [T], stride: usize, radius: (usize, usize)) -> Self {
        // Checked: [`Index`] relies on `needed` being the true count (see there).
        let needed = (2 * radius.0 as u128) * stride as u128 + 2 * radius.1 as u128 + 1;
        assert!(
            data.len() as u128 >= needed,
            "a window of radius {radius:?} with stride {stride} needs {needed} elements"
        );
        Window2 {
            data,
            stride,
            radius,
        }
    }

    /// The radii `(row radius, column radius)`.
    #[inline(always)]
    pub fn radius(&self) -> (usize, usize) {
        self.radius
    }
}

impl<T> Index<(isize, isize)> for Window2<'_, T> {
    type Output = T;
    /// # Panics
    /// If an offset is outside the window's radius.
    #[inline(always)]
    fn index(&self, (di, dj): (isize, isize)) -> &T {
        let (ri, rj) = (self.radius.0 as isize, self.radius.1 as isize);
        if di.abs() > ri {
            crate::check::window_fault(di, self.radius.0);
        }
        if dj.abs() > rj {
            crate::check::window_fault(dj, self.radius.1);
        }
        // The offsets are within the radii, so `k < needed <= len` (`new`): the clamp moves
        // no index, but it bounds `k` in a way LLVM sees, which drops the bounds check and
        // lets a loop of windows over a row vectorise (measured: hotspot's interior 1.5x
        // the time of a hand-written loop with the check, at parity without).
        let k = ((ri + di) as usize) * self.stride + (rj + dj) as usize;
        &self.data[k.min(self.data.len().wrapping_sub(1))]
    }
}

macro_rules! primitive_device_types {
    ($($t:ty => $p:ident),* $(,)?) => {$(
        // SAFETY: a primitive number: no padding, no pointers, every bit pattern valid.
        unsafe impl DeviceType for $t {
            const TY: Ty = Ty::Prim(crate::codegen::Prim::$p);
        }
    )*};
}

primitive_device_types!(
    f32 => F32, f64 => F64,
    i8 => I8, i16 => I16, i32 => I32, i64 => I64,
    u8 => U8, u16 => U16, u32 => U32, u64 => U64,
);

// `usize` (an `#[index]`, a length, a uniform) is C's 64-bit unsigned integer on every
// device; a target whose `usize` is narrower would pass it with the wrong size.
const _: () = assert!(
    std::mem::size_of::<usize>() == 8,
    "skel's device code needs a 64-bit usize"
);

// SAFETY: eight bytes (asserted above), no padding, no pointers, every bit pattern valid;
// C declares it as a 64-bit unsigned integer (`unsigned long long`, OpenCL's `ulong`).
unsafe impl DeviceType for usize {
    const TY: Ty = Ty::Prim(crate::codegen::Prim::Usize);
}

// SAFETY: one byte, no padding, no pointers. Not every bit pattern is a valid `bool`, but
// every value device code stores is: C's `bool` (CUDA, host C) converts to 0 or 1, and in
// OpenCL C, where `bool` may not live in buffers, it is a `uchar` that the generated code
// only ever sets from comparisons and logical operators (0 or 1).
unsafe impl DeviceType for bool {
    const TY: Ty = Ty::Prim(crate::codegen::Prim::Bool);
}

// SAFETY: an array of device types is laid out as its elements back to back, with no
// padding between them (size = N * size_of::<T>()); C's wrapper struct `{ T v[N]; }` has
// the same size and alignment.
unsafe impl<T: DeviceType, const N: usize> DeviceType for [T; N] {
    const TY: Ty = Ty::Array(&crate::codegen::ArrayTy {
        elem: T::TY,
        len: N,
    });
}

macro_rules! tuple_device_types {
    ($(($($t:ident $i:tt),*))*) => {$(
        // SAFETY: the elements are device types; TY records each element's offset in
        // Rust's layout (the C struct declares them in that order), and the assertion
        // rejects, when TY is used, a tuple whose elements leave padding.
        unsafe impl<$($t: DeviceType),*> DeviceType for ($($t,)*) {
            const TY: Ty = {
                assert!(
                    0 $(+ std::mem::size_of::<$t>())* == std::mem::size_of::<Self>(),
                    "a tuple used in device code must not contain padding: order its \
                     elements so that none needs alignment (e.g. all f32, or f64 before u8)"
                );
                Ty::Tuple(&crate::codegen::TupleTy {
                    elems: &[$($t::TY),*],
                    offsets: &[$(std::mem::offset_of!(Self, $i)),*],
                })
            };
        }
    )*};
}

tuple_device_types! {
    (A 0, B 1)
    (A 0, B 1, C 2)
    (A 0, B 1, C 2, D 3)
}

/// The `#[uniform]` arguments of a user function: `()` or a tuple of up to 12 device types.
/// Device backends use it to pass each uniform to a kernel by value, as raw bytes.
///
/// ```
/// use skel::plumbing::UniformTuple;
/// let mut sizes = Vec::new();
/// (1.0f32, 2u64).for_each_bytes(&mut |b| sizes.push(b.len()));
/// assert_eq!(sizes, vec![4, 8]);
/// ```
// Documented in `skel::plumbing` (re-exported there); this path stays for existing code.
#[doc(hidden)]
pub trait UniformTuple: Copy + Send + Sync + 'static {
    /// Number of uniforms (a function with a `&mut Random` parameter has one more: the
    /// seed, after the user's).
    const LEN: usize;
    /// What `.uniforms(..)` takes: the tuple itself, or the user's tuple of a
    /// [`crate::plumbing::Seeded`] one.
    type User: Copy + Send + Sync + 'static;
    /// Calls `f` with the bytes of each uniform, in declaration order.
    fn for_each_bytes(&self, f: &mut dyn FnMut(&[u8]));
    /// The uniforms from what `.uniforms(..)` took (seed 0).
    fn from_user(user: Self::User) -> Self;
    /// The uniforms of a function without `#[uniform]` parameters, which need no
    /// `.uniforms(..)`; `None` where there are some.
    fn unbound() -> Option<Self>;
    /// These uniforms with the skeleton's seed (unchanged for a function without
    /// `&mut Random`).
    #[inline(always)]
    fn with_seed(self, _seed: u64) -> Self {
        self
    }
}

macro_rules! uniform_tuples {
    ($(($n:expr; $($t:ident $i:tt),*))*) => {$(
        impl<$($t: DeviceType),*> UniformTuple for ($($t,)*) {
            const LEN: usize = $n;
            type User = Self;
            #[allow(unused_variables)]
            fn for_each_bytes(&self, f: &mut dyn FnMut(&[u8])) {
                $(f(crate::containers::host::as_bytes(std::slice::from_ref(&self.$i)));)*
            }
            #[inline(always)]
            fn from_user(user: Self) -> Self {
                user
            }
            fn unbound() -> Option<Self> {
                // `()` is the only tuple without elements.
                <dyn std::any::Any>::downcast_ref::<Self>(&()).copied()
            }
        }
    )*};
}

uniform_tuples! {
    (0;)
    (1; A 0)
    (2; A 0, B 1)
    (3; A 0, B 1, C 2)
    (4; A 0, B 1, C 2, D 3)
    (5; A 0, B 1, C 2, D 3, E 4)
    (6; A 0, B 1, C 2, D 3, E 4, F 5)
    (7; A 0, B 1, C 2, D 3, E 4, F 5, G 6)
    (8; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7)
    (9; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8)
    (10; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9)
    (11; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10)
    (12; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11)
}
