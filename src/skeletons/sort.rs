//! Sort: stable ascending sort of keys (integers, floats in total order), of key-value
//! pairs, and of records by a user-function key.

use std::cmp::Ordering;

use super::{common_options, Map, Options};
use crate::backends;
use crate::containers::{Input, Output, Shape};
use crate::plan;
use crate::userfn::ElementwiseFn;
use crate::{DeviceType, Error, Matrix, Result, Vector};

mod sealed {
    pub trait Bits {}
    pub trait Key {}
}

/// How a key's bits map to its order: what a device kernel needs to know of a key type.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// Unsigned integers: the bits are the order.
    Unsigned,
    /// Two's complement integers: flip the sign bit.
    Signed,
    /// IEEE floats in total order: flip every bit of a negative, the sign bit of the rest.
    Float,
}

/// The unsigned integer whose order a [`SortKey`]'s order maps to (`u8` .. `u64`).
pub trait RadixBits: Copy + Ord + Send + Sync + sealed::Bits + 'static {
    /// Width in bits.
    const BITS: u32;
    /// The 8-bit digit starting at bit `shift`.
    fn digit(self, shift: u32) -> usize;
}

macro_rules! radix_bits {
    ($($u:ty),*) => {$(
        impl sealed::Bits for $u {}
        impl RadixBits for $u {
            const BITS: u32 = <$u>::BITS;
            #[inline(always)]
            fn digit(self, shift: u32) -> usize {
                ((self >> shift) & 0xff) as usize
            }
        }
    )*};
}

radix_bits!(u8, u16, u32, u64);

/// A type [`Sort`] orders: every integer type and `f32`/`f64`.
///
/// Integers sort by value; floats by IEEE total order (`f32::total_cmp`): `-NaN < -inf <
/// ... < -0.0 < +0.0 < ... < +inf < +NaN`, every bit pattern kept as it was.
///
/// ```
/// use skel::SortKey;
/// assert!((-0.0f32).order_bits() < 0.0f32.order_bits());
/// assert!((-1i32).order_bits() < 0i32.order_bits());
/// ```
pub trait SortKey: DeviceType + sealed::Key {
    /// The unsigned integer of the same width whose order is this type's order.
    type Bits: RadixBits;
    /// How the bits map to the order (for device kernels).
    #[doc(hidden)]
    const KIND: KeyKind;
    /// The order-preserving unsigned bit pattern: `a < b` in total order iff
    /// `a.order_bits() < b.order_bits()`.
    fn order_bits(self) -> Self::Bits;
    /// The total order of the type (`f32::total_cmp` for floats).
    fn total_order(&self, other: &Self) -> Ordering {
        self.order_bits().cmp(&other.order_bits())
    }
}

macro_rules! unsigned_keys {
    ($($t:ty),*) => {$(
        impl sealed::Key for $t {}
        impl SortKey for $t {
            type Bits = $t;
            const KIND: KeyKind = KeyKind::Unsigned;
            #[inline(always)]
            fn order_bits(self) -> $t {
                self
            }
        }
    )*};
}

macro_rules! signed_keys {
    ($($t:ty => $u:ty),*) => {$(
        impl sealed::Key for $t {}
        impl SortKey for $t {
            type Bits = $u;
            const KIND: KeyKind = KeyKind::Signed;
            #[inline(always)]
            fn order_bits(self) -> $u {
                (self as $u) ^ (1 << (<$u>::BITS - 1))
            }
        }
    )*};
}

macro_rules! float_keys {
    ($($t:ty => $u:ty, $s:ty),*) => {$(
        impl sealed::Key for $t {}
        impl SortKey for $t {
            type Bits = $u;
            const KIND: KeyKind = KeyKind::Float;
            #[inline(always)]
            fn order_bits(self) -> $u {
                let b = self.to_bits();
                // All ones for a negative (reverses their order), the sign bit otherwise.
                let mask = (((b as $s) >> (<$u>::BITS - 1)) as $u) | (1 << (<$u>::BITS - 1));
                b ^ mask
            }
        }
    )*};
}

unsigned_keys!(u8, u16, u32, u64);
signed_keys!(i8 => u8, i16 => u16, i32 => u32, i64 => u64);
float_keys!(f32 => u32, i32, f64 => u64, i64);

/// The key function of a by-key [`Sort`]: a user function of one record, without
/// `#[index]`, uniforms or container parameters, returning a [`SortKey`].
pub trait KeyFn<T>: ElementwiseFn<Index = (), Elems = (T,), Uniforms = (), Arrays = ()> {}

impl<T, F> KeyFn<T> for F where
    F: ElementwiseFn<Index = (), Elems = (T,), Uniforms = (), Arrays = ()>
{
}

/// The key of a plain [`Sort`]: the element itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct ByValue;

/// Sorts ascending and stably (equal keys keep their order).
///
/// - `Sort::new().run(&mut v)`: the elements themselves, integers by value, floats in IEEE
///   total order (as `f32::total_cmp`: `-NaN < -inf < .. < -0.0 < +0.0 < .. < +inf <
///   +NaN`; bit patterns are kept).
/// - `Sort::new().run_pairs(&mut keys, &mut values)`: the keys, the values following their
///   keys; both of one length, else [`Error::ShapeMismatch`] and nothing moves.
/// - `Sort::by_key(key).run(&mut records)`: records of any device type by the key a
///   `#[userfn]` computes of each (integer or float), as `slice::sort_by_key`.
///
/// Matrices sort as their row-major element sequence. On Rayon it is a parallel LSD radix
/// sort on the keys' order-preserving bits; on CUDA and OpenCL an LSD radix sort of 8-bit
/// digits, one pass per digit with decoupled look-back (as CUB's onesweep).
///
/// ```
/// use skel::prelude::*;
///
/// let mut v = Vector::from(vec![3.5f32, -0.0, f32::NAN, -2.0, 0.0, f32::NEG_INFINITY]);
/// Sort::new().run(&mut v)?;
/// let bits: Vec<u32> = v.to_vec().iter().map(|x| x.to_bits()).collect();
/// let want = [f32::NEG_INFINITY, -2.0, -0.0, 0.0, 3.5, f32::NAN].map(f32::to_bits);
/// assert_eq!(bits, want);
///
/// let mut keys = Vector::from(vec![2u32, 1, 2, 0]);
/// let mut vals = Vector::from(vec!['a' as u8, b'b', b'c', b'd']);
/// Sort::new().run_pairs(&mut keys, &mut vals)?;
/// assert_eq!((keys.to_vec(), vals.to_vec()), (vec![0, 1, 2, 2], b"dbac".to_vec()));
///
/// #[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
/// #[repr(C)]
/// struct Item { price: f32, id: u32 }
/// #[userfn]
/// fn price(it: Item) -> f32 { it.price }
///
/// let mut items = Vector::from_fn(4, |i| Item { price: [2.0, 0.5, 2.0, 1.0][i], id: i as u32 });
/// Sort::by_key(price).run(&mut items)?;
/// let ids: Vec<u32> = items.to_vec().iter().map(|it| it.id).collect();
/// assert_eq!(ids, vec![1, 3, 0, 2]);
/// # Ok::<(), skel::Error>(())
/// ```
#[must_use = "a skeleton does nothing until one of its `run` methods is called"]
#[derive(Clone, Copy, Debug)]
pub struct Sort<F = ByValue> {
    key: F,
    options: Options,
}

impl Sort<ByValue> {
    /// A Sort of the elements themselves.
    pub fn new() -> Self {
        Sort {
            key: ByValue,
            options: Options::default(),
        }
    }

    /// Sorts `v` ascending (stable; floats in total order).
    pub fn run<K: SortKey>(&self, v: &mut (impl Output<K> + ?Sized)) -> Result<()> {
        self.options.validate()?;
        let plan = plan::Sort::<(K, K)> {
            keys: v.arg_mut(),
            values: None,
        };
        backends::sort(self.options, plan, |_| Ok(()))
    }

    /// Sorts `keys` ascending (stable; floats in total order) and moves each value with
    /// its key. `keys` and `values` have one length, else [`Error::ShapeMismatch`] and
    /// neither is touched.
    pub fn run_pairs<K: SortKey, V: DeviceType>(
        &self,
        keys: &mut (impl Output<K> + ?Sized),
        values: &mut (impl Output<V> + ?Sized),
    ) -> Result<()> {
        self.options.validate()?;
        let plan = plan::Sort::<(K, V)> {
            keys: keys.arg_mut(),
            values: Some(values.arg_mut()),
        };
        backends::sort(self.options, plan, |plan| {
            let Some(values) = &plan.values else {
                return Ok(());
            };
            let (k, v) = (plan.keys.shape().len(), values.shape().len());
            if k != v {
                return Err(Error::shape(
                    format!(
                        "Sort::run_pairs values against the keys (one value per key: {k} \
                         keys, {v} values)"
                    ),
                    plan.keys.shape(),
                    values.shape(),
                ));
            }
            Ok(())
        })
    }
}

impl Default for Sort<ByValue> {
    fn default() -> Self {
        Sort::new()
    }
}

impl<F: Copy> Sort<F> {
    /// A Sort of records by `key(record)`, a `#[userfn]` of one record returning an
    /// integer or a float.
    pub fn by_key(key: F) -> Self {
        Sort {
            key,
            options: Options::default(),
        }
    }

    common_options!();
}

impl<F: Copy + ElementwiseFn> Sort<F> {
    /// Sorts `records` ascending by their keys (stable; float keys in total order): the
    /// keys are computed by a Map on this Sort's backend, then sorted with the records as
    /// their values.
    pub fn run<T: DeviceType, R>(&self, records: &mut R) -> Result<()>
    where
        F: KeyFn<T>,
        F::Out: SortKey + Default,
        R: Input<T> + Output<T>,
    {
        self.options.validate()?;
        // The keys take the records' shape: a Map checks that its operands agree.
        match records.arg().shape() {
            Shape::Matrix { rows, cols } => self.by_keys(records, &mut Matrix::zeroed(rows, cols)),
            shape => self.by_keys(records, &mut Vector::zeroed(shape.len())),
        }
    }

    /// The keys of `records` into `keys`, then both sorted as pairs.
    fn by_keys<T: DeviceType, R>(
        &self,
        records: &mut R,
        keys: &mut impl Output<F::Out>,
    ) -> Result<()>
    where
        F: KeyFn<T>,
        F::Out: SortKey,
        R: Input<T> + Output<T>,
    {
        Map::new(self.key)
            .with_options(self.options)
            .run(&*records, keys)?;
        Sort {
            key: ByValue,
            options: self.options,
        }
        .run_pairs(keys, records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_bits_follow_total_order() {
        let fs = [
            f32::from_bits(0xffc0_0000),
            f32::NEG_INFINITY,
            -1.5,
            -f32::MIN_POSITIVE,
            -0.0,
            0.0,
            f32::from_bits(1),
            2.0,
            f32::INFINITY,
            f32::NAN,
        ];
        for w in fs.windows(2) {
            assert_eq!(w[0].total_cmp(&w[1]), Ordering::Less);
            assert!(w[0].order_bits() < w[1].order_bits(), "{w:?}");
        }
        let is = [i64::MIN, -7, -1, 0, 1, i64::MAX];
        for w in is.windows(2) {
            assert!(w[0].order_bits() < w[1].order_bits(), "{w:?}");
        }
        assert_eq!((-3i8).total_order(&2), Ordering::Less);
        assert_eq!(f64::NAN.total_order(&f64::INFINITY), Ordering::Greater);
    }
}
