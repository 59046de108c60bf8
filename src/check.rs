//! Checked user functions: the faults a user function can hit, the wrapping arithmetic the
//! `#[userfn]` macro gives the Rust side, and the checked-mode switch.
//!
//! The macro rewrites a body so that integer `+ - *`, negation, shifts, `pow` and `abs` wrap
//! (as in a release build and as the generated C does), an index into an array is checked
//! before Rust's own bounds check, and an integer division or remainder by zero is caught.
//! A fault unwinds with a [`Fault`] payload; the CPU backends catch every unwind out of a
//! skeleton call and turn it into [`Error::UserFunction`].
//!
//! ## Checked and unchecked calls, backend by backend
//!
//! `.checked(bool)` on a skeleton, else `SKEL_CHECK=1|0` ([`crate::config::CHECK`]), else the build (checked in debug
//! builds, unchecked in release builds) decides. In every mode integer `+ - *`, `-x`,
//! `pow` and `abs` wrap, shifts take the amount modulo the width and `MIN / -1` is `MIN`.
//!
//! | backend | checked | unchecked |
//! |---------|---------|-----------|
//! | `cpu`, `rayon` | `Err(UserFunction)` with function, index and length; `clamp` with `min > max` (a [`FaultKind::Clamp`] fault, as on the devices) and any other panic too; the output keeps its old values | `Err(UserFunction)` as well (Rust checks every index anyway), but the output may hold what was computed before the fault |
//! | OpenCL, CUDA | every skeleton runs the checked kernel variant (the combining function of Reduce, Scan, MapReduce and MapPairsReduce included): the first fault of the call (of all its kernels and MultiStream chunks) is recorded on the device and read with the result, `Err(UserFunction)` as on the CPU, the output keeps its old values | an index out of range is clamped into range (a window offset into the radius): it reads an unspecified element of the same buffer, never outside it; an integer division or remainder by zero gives 0; `clamp` with `min > max` or a NaN bound gives `x < min ? min : x > max ? max : x` |
//!
//! Where several elements fault, the CPU backends report the first in order and a device
//! the first one its threads recorded. A checked call that fails leaves its outputs as they
//! were on every backend: the CPU backends save them before the call (bringing them to the
//! host first) and put them back when the user function faults; the devices discard the
//! faulting kernel's output. A device output the host does not hold in full (a result left
//! on the device by an earlier call) cannot keep old values the host never had: it then
//! holds what the faulting kernel wrote.
//!
//! ```
//! use skel::prelude::*;
//! #[userfn]
//! fn lookup(#[index] i: usize, t: &[f32]) -> f32 { t[i * 10] }
//! let table = Vector::from(vec![1.0f32, 2.0]);
//! let mut out = Vector::zeroed(2);
//! let err = MapArray::new(lookup).backend(Backend::Cpu).run_index(&table, &mut out).unwrap_err();
//! match err {
//!     Error::UserFunction { function, index, len, .. } => {
//!         assert_eq!((function.as_str(), index, len), ("lookup", Some(10), Some(2)));
//!     }
//!     other => panic!("{other}"),
//! }
//! ```

use std::any::Any;
use std::sync::Once;

use crate::Error;

/// What went wrong inside a user function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FaultKind {
    /// An index into a `&[T]` parameter, a `Mat<T>` (row or column) or a local array is out
    /// of range.
    Index,
    /// A window offset is outside the window's radius.
    Window,
    /// An integer division by zero.
    DivZero,
    /// An integer remainder by zero.
    RemZero,
    /// `clamp(min, max)` with `min > max` or a NaN bound (where Rust's `clamp` panics).
    Clamp,
}

impl FaultKind {
    /// The device code of the fault (the GPU flag buffer stores it).
    pub const fn code(self) -> u32 {
        match self {
            FaultKind::Index => 1,
            FaultKind::Window => 2,
            FaultKind::DivZero => 3,
            FaultKind::RemZero => 4,
            FaultKind::Clamp => 5,
        }
    }

    /// The fault of a device code, if it is one.
    pub fn from_code(code: u32) -> Option<FaultKind> {
        [
            FaultKind::Index,
            FaultKind::Window,
            FaultKind::DivZero,
            FaultKind::RemZero,
            FaultKind::Clamp,
        ]
        .into_iter()
        .find(|k| k.code() == code)
    }
}

/// The payload a faulting user function unwinds with.
#[derive(Clone, Copy, Debug)]
pub struct Fault {
    /// The user function, where the fault site knows it.
    pub function: Option<&'static str>,
    /// What went wrong.
    pub kind: FaultKind,
    /// The offending index (offset for a window; the dividend for a division).
    pub index: i64,
    /// The length of what was indexed (`2 * radius + 1` for a window; 0 for a division).
    pub len: u64,
}

impl Fault {
    /// The error a skeleton call returns for this fault.
    pub fn into_error(self, function: &str) -> Error {
        let function = self.function.unwrap_or(function).to_string();
        let (index, len) = (self.index, self.len);
        let what = match self.kind {
            FaultKind::Index => format!("index {index} out of range for an array of length {len}"),
            FaultKind::Window => {
                format!("window offset {index} outside a window of {len} elements")
            }
            FaultKind::DivZero => format!("integer division of {index} by zero"),
            FaultKind::RemZero => format!("integer remainder of {index} by zero"),
            FaultKind::Clamp => "clamp with min > max or a NaN bound".to_string(),
        };
        let is_index = matches!(self.kind, FaultKind::Index | FaultKind::Window);
        Error::UserFunction {
            function,
            what,
            index: (self.kind != FaultKind::Clamp).then_some(index),
            len: is_index.then_some(len),
        }
    }
}

#[cold]
#[inline(never)]
fn fault(function: Option<&'static str>, kind: FaultKind, index: i64, len: u64) -> ! {
    quiet_faults();
    std::panic::panic_any(Fault {
        function,
        kind,
        index,
        len,
    })
}

/// `[value; N]`, a local array of a user function: a compile error (E0080, "a local array of
/// a user function holds at most 32 KiB") where `N` elements of `T` are more than
/// [`MAX_LOCAL_ARRAY_BYTES`](crate::userfn::MAX_LOCAL_ARRAY_BYTES). `#[userfn]` writes every
/// `[value; N]` of a body as a call of this, spanned at the array.
#[doc(hidden)]
#[inline(always)]
pub fn local_array<T: Copy, const N: usize>(value: T) -> [T; N] {
    const {
        assert!(
            N.checked_mul(std::mem::size_of::<T>()).is_some()
                && N * std::mem::size_of::<T>() <= crate::userfn::MAX_LOCAL_ARRAY_BYTES,
            "a local array of a user function holds at most 32 KiB (skel::userfn::MAX_LOCAL_ARRAY_BYTES)"
        )
    };
    [value; N]
}

/// `i` if it is below `len`, else a [`FaultKind::Index`] fault of `function`.
#[doc(hidden)]
#[inline(always)]
pub fn index(function: &'static str, len: usize, i: usize) -> usize {
    if i < len {
        i
    } else {
        fault(Some(function), FaultKind::Index, i as i64, len as u64)
    }
}

/// `x.clamp(min, max)` as Rust computes it (NaN stays NaN), except that `min > max` or a
/// NaN bound, where Rust's `clamp` panics, is a [`FaultKind::Clamp`] fault of `function`.
#[doc(hidden)]
#[inline(always)]
pub fn clamp<T: PartialOrd + Copy>(function: &'static str, x: T, min: T, max: T) -> T {
    #[allow(clippy::neg_cmp_op_on_partial_ord)] // a NaN bound must fault too
    if !(min <= max) {
        fault(Some(function), FaultKind::Clamp, 0, 0)
    }
    if x < min {
        min
    } else if x > max {
        max
    } else {
        x
    }
}

/// A `Mat` row (column) `i` outside its `len` rows (columns).
#[cold]
#[inline(never)]
pub(crate) fn mat_fault(i: usize, len: usize) -> ! {
    fault(None, FaultKind::Index, i as i64, len as u64)
}

/// A `Mat` read at `(row, col)` outside `rows x cols`: the row against the rows, else the
/// column against the columns.
#[cold]
#[inline(never)]
pub(crate) fn mat_fault_at((row, col): (usize, usize), (rows, cols): (usize, usize)) -> ! {
    if row >= rows {
        mat_fault(row, rows)
    }
    mat_fault(col, cols)
}

/// A window offset outside `-radius..=radius`.
#[cold]
#[inline(never)]
pub(crate) fn window_fault(offset: isize, radius: usize) -> ! {
    fault(
        None,
        FaultKind::Window,
        offset as i64,
        2 * radius as u64 + 1,
    )
}

/// Arithmetic that wraps for integers (as a release build and the generated C do) and is
/// plain IEEE arithmetic for floats.
#[doc(hidden)]
pub trait Wrap: Copy {
    /// `self + r`, wrapping.
    fn w_add(self, r: Self) -> Self;
    /// `self - r`, wrapping.
    fn w_sub(self, r: Self) -> Self;
    /// `self * r`, wrapping.
    fn w_mul(self, r: Self) -> Self;
    /// `-self`, wrapping.
    fn w_neg(self) -> Self;
    /// `self.abs()`, wrapping (`MIN.abs() == MIN`).
    fn w_abs(self) -> Self;
    /// `self / r`, wrapping (`MIN / -1 == MIN`); `None` for an integer division by zero.
    fn w_div(self, r: Self) -> Option<Self>;
    /// `self % r`, wrapping (`MIN % -1 == 0`); `None` for an integer remainder by zero.
    fn w_rem(self, r: Self) -> Option<Self>;
    /// The value as an `i64` for a fault report.
    fn report(self) -> i64;
}

/// Shifts that take the amount modulo the width, as `wrapping_shl`/`wrapping_shr`.
#[doc(hidden)]
pub trait Shift<S>: Copy {
    /// `self << s`, the amount modulo the width.
    fn w_shl(self, s: S) -> Self;
    /// `self >> s`, the amount modulo the width.
    fn w_shr(self, s: S) -> Self;
}

/// `min` and `max` with one answer on every backend: Rust's for integers; for floats a
/// NaN operand gives the other operand (as `f32::min`), and of two zeros `min` gives `-0.0`
/// and `max` gives `+0.0` (IEEE 754-2019 `minimumNumber`/`maximumNumber`, where `f32::min`
/// may give either, depending on the optimisation level).
#[doc(hidden)]
pub trait MinMax: Copy {
    /// The smaller operand.
    fn w_min(self, r: Self) -> Self;
    /// The larger operand.
    fn w_max(self, r: Self) -> Self;
}

macro_rules! min_max_int {
    ($($t:ty),*) => {$(
        impl MinMax for $t {
            #[inline(always)]
            fn w_min(self, r: Self) -> Self { Ord::min(self, r) }
            #[inline(always)]
            fn w_max(self, r: Self) -> Self { Ord::max(self, r) }
        }
    )*};
}

min_max_int!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);

macro_rules! min_max_float {
    ($($t:ty),*) => {$(
        impl MinMax for $t {
            #[inline(always)]
            fn w_min(self, r: Self) -> Self {
                if self < r {
                    self
                } else if r < self || self.is_nan() {
                    r
                } else if r.is_nan() || self.is_sign_negative() {
                    self
                } else {
                    r
                }
            }
            #[inline(always)]
            fn w_max(self, r: Self) -> Self {
                if self > r {
                    self
                } else if r > self || self.is_nan() {
                    r
                } else if r.is_nan() || self.is_sign_positive() {
                    self
                } else {
                    r
                }
            }
        }
    )*};
}

min_max_float!(f32, f64);

/// `powf` as every backend computes it: 1 for a base of 1 or an exponent of ±0 whatever
/// the other operand, a NaN (quiet or signaling) included, as IEEE 754 recommends and
/// OpenCL and CUDA specify (glibc's `pow(1, sNaN)` is NaN); otherwise the platform's
/// `powf`.
#[doc(hidden)]
pub trait Powf: Copy {
    /// `self.powf(e)`, with the special cases above.
    fn w_powf(self, e: Self) -> Self;
}

macro_rules! powf_float {
    ($($t:ty),*) => {$(
        impl Powf for $t {
            #[inline(always)]
            fn w_powf(self, e: Self) -> Self {
                if self == 1.0 || e == 0.0 {
                    1.0
                } else {
                    self.powf(e)
                }
            }
        }
    )*};
}

powf_float!(f32, f64);

/// `pow` that wraps.
#[doc(hidden)]
pub trait Pow: Copy {
    /// `self.pow(e)`, wrapping.
    fn w_pow(self, e: u32) -> Self;
}

/// `l / r` with [`Wrap::w_div`], a [`FaultKind::DivZero`] fault of `function` on zero.
#[doc(hidden)]
#[inline(always)]
pub fn div<T: Wrap>(function: &'static str, l: T, r: T) -> T {
    match l.w_div(r) {
        Some(v) => v,
        None => fault(Some(function), FaultKind::DivZero, l.report(), 0),
    }
}

/// `l % r` with [`Wrap::w_rem`], a [`FaultKind::RemZero`] fault of `function` on zero.
#[doc(hidden)]
#[inline(always)]
pub fn rem<T: Wrap>(function: &'static str, l: T, r: T) -> T {
    match l.w_rem(r) {
        Some(v) => v,
        None => fault(Some(function), FaultKind::RemZero, l.report(), 0),
    }
}

macro_rules! wrap_int {
    ($($t:ty),*) => {$(
        impl Wrap for $t {
            #[inline(always)]
            fn w_add(self, r: Self) -> Self { self.wrapping_add(r) }
            #[inline(always)]
            fn w_sub(self, r: Self) -> Self { self.wrapping_sub(r) }
            #[inline(always)]
            fn w_mul(self, r: Self) -> Self { self.wrapping_mul(r) }
            #[inline(always)]
            fn w_neg(self) -> Self { self.wrapping_neg() }
            #[inline(always)]
            #[allow(unused_comparisons)]
            fn w_abs(self) -> Self { if self < 0 { self.wrapping_neg() } else { self } }
            #[inline(always)]
            fn w_div(self, r: Self) -> Option<Self> {
                if r == 0 { None } else { Some(self.wrapping_div(r)) }
            }
            #[inline(always)]
            fn w_rem(self, r: Self) -> Option<Self> {
                if r == 0 { None } else { Some(self.wrapping_rem(r)) }
            }
            #[inline(always)]
            fn report(self) -> i64 { self as i64 }
        }
        impl Pow for $t {
            #[inline(always)]
            fn w_pow(self, e: u32) -> Self { self.wrapping_pow(e) }
        }
        shift_int!($t; i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);
    )*};
}

macro_rules! shift_int {
    ($t:ty; $($s:ty),*) => {$(
        impl Shift<$s> for $t {
            // The low bits of the amount are all a shift modulo the width reads.
            #[inline(always)]
            fn w_shl(self, s: $s) -> Self { self.wrapping_shl(s as u32) }
            #[inline(always)]
            fn w_shr(self, s: $s) -> Self { self.wrapping_shr(s as u32) }
        }
    )*};
}

wrap_int!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);

macro_rules! wrap_float {
    ($($t:ty),*) => {$(
        impl Wrap for $t {
            #[inline(always)]
            fn w_add(self, r: Self) -> Self { self + r }
            #[inline(always)]
            fn w_sub(self, r: Self) -> Self { self - r }
            #[inline(always)]
            fn w_mul(self, r: Self) -> Self { self * r }
            #[inline(always)]
            fn w_neg(self) -> Self { -self }
            #[inline(always)]
            fn w_abs(self) -> Self { self.abs() }
            #[inline(always)]
            fn w_div(self, r: Self) -> Option<Self> { Some(self / r) }
            #[inline(always)]
            fn w_rem(self, r: Self) -> Option<Self> { Some(self % r) }
            #[inline(always)]
            fn report(self) -> i64 { self as i64 }
        }
    )*};
}

wrap_float!(f32, f64);

/// The error of an unwind out of a CPU skeleton call of `function`: a [`Fault`] says what
/// went wrong; any other panic (a `clamp` with `min > max`, ...) keeps its message.
pub(crate) fn panic_error(function: &str, payload: Box<dyn Any + Send>) -> Error {
    if let Some(f) = payload.downcast_ref::<Fault>() {
        return f.into_error(function);
    }
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into());
    Error::UserFunction {
        function: function.to_string(),
        what: format!("panicked: {message}"),
        index: None,
        len: None,
    }
}

/// Runs one CPU skeleton call of `function`, an unwind out of it (a fault or a panic in
/// the user function, also on a Rayon worker, which Rayon hands back here) becoming
/// [`Error::UserFunction`].
pub(crate) fn catch<R>(
    function: &str,
    call: impl FnOnce() -> crate::Result<R>,
) -> crate::Result<R> {
    // Unwind safety: on an unwind the call's output may be partly written, which the
    // returned error says; inputs are only read and the containers' bookkeeping is updated
    // only after the loops (a host backend marks the host copy newest up front, which it is).
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(call))
        .unwrap_or_else(|payload| Err(panic_error(function, payload)))
}

/// Runs `call`, one call of user function `function` the host makes outside a CPU skeleton
/// loop (a device's `.start(v)` fold, a merge of partial results, `Backend::Auto`'s combine
/// of a CPU+device split), an unwind out of it (a [`Fault`], or a panic such as `clamp`
/// with `min > max`) becoming [`Error::UserFunction`] naming `function`.
pub(crate) fn host_call<R>(function: &str, call: impl FnOnce() -> R) -> crate::Result<R> {
    // Unwind safety: `call` only computes a value from copies of its operands.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(call))
        .map_err(|payload| panic_error(function, payload))
}

/// Runs one device skeleton call of `function`: a [`Fault`] of a user function run on the
/// host (Reduce, MapReduce folding `.start(v)` with the device's result) becomes
/// [`Error::UserFunction`]; any other panic is a bug of the library and goes on unwinding.
#[cfg(any(feature = "cuda", feature = "opencl"))]
pub(crate) fn catch_faults<R>(
    function: &str,
    call: impl FnOnce() -> crate::Result<R>,
) -> crate::Result<R> {
    // Unwind safety: the host fold runs after the device work is done and recorded.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)) {
        Ok(r) => r,
        Err(payload) => match payload.downcast::<Fault>() {
            Ok(f) => Err(f.into_error(function)),
            Err(other) => std::panic::resume_unwind(other),
        },
    }
}

/// A [`Fault`] is an expected outcome that comes back as an `Err`: the default panic hook
/// would print a confusing "Box<dyn Any>" line for it, so it is kept quiet; every other panic
/// goes to the hook that was installed before.
fn quiet_faults() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<Fault>().is_none() {
                previous(info);
            }
        }));
    });
}
