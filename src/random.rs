//! Random numbers inside user functions (SkePU's `Random<N>`): a `rng: &mut Random`
//! parameter.
//!
//! The generator is counter-based: Philox4x32-10 (Salmon et al., "Parallel random numbers:
//! as easy as 1, 2, 3", SC 2011) keyed by the call's seed, whose counter is the element's
//! index and the number of 32-bit words the element has drawn so far. What element `i`
//! draws therefore depends only on the seed, `i` and its own earlier draws: never on the
//! backend, the chunking, the thread or device that runs it, or an MPI rank's block (whose
//! `#[index]` is the global one), so every backend gives the same bits.
//!
//! The exact recipe, which the Rust body and the generated C code share (both run the
//! `#[userfn]` functions of this module):
//!
//! - key `(k0, k1)` = the seed's low and high 32 bits (`.seed(u64)` on the skeleton,
//!   default 0);
//! - the `n`-th 32-bit word (from 0) of the element with 1D index `i` is word `n % 4` of
//!   Philox4x32-10 of the counter `(n / 4, 0, i mod 2^32, i / 2^32)`; with a 2D index
//!   `(row, col)` the counter is `(n / 4, 1, col, row)`; a function without `#[index]`
//!   draws as the 1D index of its flat position;
//! - `next_u32` is the next word; `next_u64` is two words, the first the low half;
//!   `next_f32` is `(next_u32 >> 8) * 2^-24` and `next_f64` is `(next_u64 >> 11) * 2^-53`,
//!   uniform in `[0, 1)` and exact in every dialect.
//!
//! An element can draw 2^32 words before its stream repeats.
//!
//! ```
//! use skel::prelude::*;
//!
//! #[userfn]
//! fn hit(#[index] i: usize, rng: &mut Random) -> u32 {
//!     let (x, y) = (rng.next_f32(), rng.next_f32());
//!     (x * x + y * y <= 1.0) as u32
//! }
//! #[userfn]
//! fn add(a: u32, b: u32) -> u32 { a + b }
//!
//! let n = 100_000;
//! let inside: u32 = MapReduce::new(hit, add).seed(42).run_index(n)?;
//! let pi = 4.0 * inside as f64 / n as f64;
//! assert!((pi - std::f64::consts::PI).abs() < 0.05, "{pi}");
//!
//! // The numbers of element 7 are those of `Random::at(seed, 7)` on the host.
//! let mut rng = Random::at(42, 7);
//! let (x, y) = (rng.next_f32(), rng.next_f32());
//! let mut out = Vector::zeroed(8);
//! Map::new(hit).seed(42).run_index(&mut out)?;
//! assert_eq!(out[7], (x * x + y * y <= 1.0) as u32);
//! # Ok::<(), skel::Error>(())
//! ```

use crate::userfn::{DeviceType, UniformTuple};

/// The generator of one element: draws uniform numbers from its own stream.
///
/// A user function takes it as `rng: &mut Random` and calls `rng.next_u32()`,
/// `rng.next_u64()`, `rng.next_f32()` or `rng.next_f64()` (the only uses device code has).
/// See [the module](self) for the exact recipe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Random {
    state: device::SkelRandomState,
}

impl Random {
    /// The stream that element `index` of a call with seed `seed` draws from (a function
    /// with a 1D `#[index]`, or without one: its flat position).
    ///
    /// ```
    /// use skel::prelude::*;
    /// let (mut a, mut b) = (Random::at(1, 5), Random::at(1, 5));
    /// assert_eq!(a.next_u64(), b.next_u64());
    /// assert_ne!(Random::at(1, 5).next_u32(), Random::at(1, 6).next_u32());
    /// ```
    pub fn at(seed: u64, index: usize) -> Self {
        Random {
            state: device::skel_random_at::call(index, seed),
        }
    }

    /// The stream of element `(row, col)` of a call with a 2D `#[index]` and seed `seed`.
    ///
    /// ```
    /// use skel::prelude::*;
    /// assert_ne!(Random::at2(0, (1, 0)).next_u32(), Random::at2(0, (0, 1)).next_u32());
    /// ```
    pub fn at2(seed: u64, (row, col): (usize, usize)) -> Self {
        Random {
            state: device::skel_random_at2::call(row, col, seed),
        }
    }

    /// The next 32 random bits.
    #[inline(always)]
    pub fn next_u32(&mut self) -> u32 {
        self.state = device::skel_random_step32::call(self.state);
        device::skel_random_u32::call(self.state)
    }

    /// The next 64 random bits (two words, the first the low half).
    #[inline(always)]
    pub fn next_u64(&mut self) -> u64 {
        self.state = device::skel_random_step64::call(self.state);
        device::skel_random_u64::call(self.state)
    }

    /// A uniform `f32` in `[0, 1)`: `(next_u32() >> 8) * 2^-24`.
    ///
    /// ```
    /// use skel::prelude::*;
    /// let mut r = Random::at(3, 0);
    /// let x = r.next_f32();
    /// assert!((0.0..1.0).contains(&x));
    /// let mut s = Random::at(3, 0);
    /// assert_eq!(x, (s.next_u32() >> 8) as f32 / 16_777_216.0);
    /// ```
    #[inline(always)]
    pub fn next_f32(&mut self) -> f32 {
        self.state = device::skel_random_step32::call(self.state);
        device::skel_random_f32::call(self.state)
    }

    /// A uniform `f64` in `[0, 1)`: `(next_u64() >> 11) * 2^-53`.
    #[inline(always)]
    pub fn next_f64(&mut self) -> f64 {
        self.state = device::skel_random_step64::call(self.state);
        device::skel_random_f64::call(self.state)
    }
}

/// How an `#[index]` value selects an element's stream (`usize` or `(usize, usize)`).
// Called by the code `#[userfn]` generates.
#[doc(hidden)]
pub trait RandomIndex: Copy {
    /// The stream of this element for `seed`.
    fn stream(self, seed: u64) -> Random;
}

impl RandomIndex for usize {
    #[inline(always)]
    fn stream(self, seed: u64) -> Random {
        Random::at(seed, self)
    }
}

impl RandomIndex for (usize, usize) {
    #[inline(always)]
    fn stream(self, seed: u64) -> Random {
        Random::at2(seed, self)
    }
}

/// The uniforms of a function with a `&mut Random` parameter: the user's uniform tuple
/// and the call's seed, which device code receives as one more uniform after the user's.
// Named by the code `#[userfn]` generates; documented in `skel::plumbing`.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Seeded<U> {
    /// The user's `#[uniform]` values.
    pub user: U,
    /// The skeleton's `.seed(..)`.
    pub seed: u64,
}

impl<U: UniformTuple<User = U>> UniformTuple for Seeded<U> {
    const LEN: usize = U::LEN + 1;
    type User = U;

    fn for_each_bytes(&self, f: &mut dyn FnMut(&[u8])) {
        self.user.for_each_bytes(f);
        f(&self.seed.to_ne_bytes());
    }

    fn from_user(user: U) -> Self {
        Seeded { user, seed: 0 }
    }

    fn unbound() -> Option<Self> {
        U::unbound().map(Self::from_user)
    }

    fn with_seed(self, seed: u64) -> Self {
        Seeded { seed, ..self }
    }
}

// `u64` must stay what the seed uniform is declared as in device code.
const _: () = assert!(matches!(
    <u64 as DeviceType>::TY,
    crate::codegen::Ty::Prim(crate::codegen::Prim::U64)
));

/// The generator as user functions: the Rust methods of [`Random`] call them, and the C
/// translation of a user function calls their C translations, so both give the same bits.
// Named by the code `#[userfn]` generates.
#[doc(hidden)]
pub mod device {
    use crate::prelude::*;

    /// Philox4x32's multipliers and Weyl key increments (Random123).
    const PHILOX_M0: u32 = 0xD251_1F53;
    const PHILOX_M1: u32 = 0xCD9E_8D57;
    const PHILOX_W0: u32 = 0x9E37_79B9;
    const PHILOX_W1: u32 = 0xBB67_AE85;

    /// One element's generator: its key and counter words, the last Philox block and the
    /// words the last draw produced.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, DeviceType)]
    #[repr(C)]
    pub struct SkelRandomState {
        pub k0: u32,
        pub k1: u32,
        pub tag: u32,
        pub lo: u32,
        pub hi: u32,
        /// Words drawn so far.
        pub n: u32,
        pub b0: u32,
        pub b1: u32,
        pub b2: u32,
        pub b3: u32,
        pub out0: u32,
        pub out1: u32,
    }

    #[userfn]
    pub fn skel_philox_round(
        c0: u32,
        c1: u32,
        c2: u32,
        c3: u32,
        k0: u32,
        k1: u32,
    ) -> (u32, u32, u32, u32) {
        let p0 = (PHILOX_M0 as u64) * (c0 as u64);
        let p1 = (PHILOX_M1 as u64) * (c2 as u64);
        (
            ((p1 >> 32) as u32) ^ c1 ^ k0,
            p1 as u32,
            ((p0 >> 32) as u32) ^ c3 ^ k1,
            p0 as u32,
        )
    }

    /// Philox4x32-10 of counter `(c0, c1, c2, c3)` under key `(k0, k1)`.
    #[userfn]
    pub fn skel_philox(
        c0: u32,
        c1: u32,
        c2: u32,
        c3: u32,
        k0: u32,
        k1: u32,
    ) -> (u32, u32, u32, u32) {
        let (mut x0, mut x1, mut x2, mut x3) = (c0, c1, c2, c3);
        let (mut key0, mut key1) = (k0, k1);
        for r in 0..10 {
            if r > 0 {
                key0 = key0.wrapping_add(PHILOX_W0);
                key1 = key1.wrapping_add(PHILOX_W1);
            }
            let (y0, y1, y2, y3) = skel_philox_round(x0, x1, x2, x3, key0, key1);
            x0 = y0;
            x1 = y1;
            x2 = y2;
            x3 = y3;
        }
        (x0, x1, x2, x3)
    }

    #[userfn]
    pub fn skel_random_at(i: usize, seed: u64) -> SkelRandomState {
        let id = i as u64;
        SkelRandomState {
            k0: seed as u32,
            k1: (seed >> 32) as u32,
            tag: 0,
            lo: id as u32,
            hi: (id >> 32) as u32,
            n: 0,
            b0: 0,
            b1: 0,
            b2: 0,
            b3: 0,
            out0: 0,
            out1: 0,
        }
    }

    #[userfn]
    pub fn skel_random_at2(row: usize, col: usize, seed: u64) -> SkelRandomState {
        SkelRandomState {
            k0: seed as u32,
            k1: (seed >> 32) as u32,
            tag: 1,
            lo: col as u32,
            hi: row as u32,
            n: 0,
            b0: 0,
            b1: 0,
            b2: 0,
            b3: 0,
            out0: 0,
            out1: 0,
        }
    }

    /// Draws one word into `out0`.
    #[userfn]
    pub fn skel_random_step32(s: SkelRandomState) -> SkelRandomState {
        let mut t = s;
        let w = t.n & 3;
        if w == 0 {
            let (b0, b1, b2, b3) = skel_philox(t.n >> 2, t.tag, t.lo, t.hi, t.k0, t.k1);
            t.b0 = b0;
            t.b1 = b1;
            t.b2 = b2;
            t.b3 = b3;
        }
        t.out0 = if w == 0 {
            t.b0
        } else if w == 1 {
            t.b1
        } else if w == 2 {
            t.b2
        } else {
            t.b3
        };
        t.n = t.n.wrapping_add(1);
        t
    }

    /// Draws two words into `out0` (low) and `out1` (high).
    #[userfn]
    pub fn skel_random_step64(s: SkelRandomState) -> SkelRandomState {
        let first = skel_random_step32(s);
        let mut t = skel_random_step32(first);
        t.out1 = t.out0;
        t.out0 = first.out0;
        t
    }

    #[userfn]
    pub fn skel_random_u32(s: SkelRandomState) -> u32 {
        s.out0
    }

    #[userfn]
    pub fn skel_random_u64(s: SkelRandomState) -> u64 {
        ((s.out1 as u64) << 32) | (s.out0 as u64)
    }

    #[userfn]
    pub fn skel_random_f32(s: SkelRandomState) -> f32 {
        // 2^-24, exactly.
        ((s.out0 >> 8) as f32) * 5.960_464_5e-8_f32
    }

    #[userfn]
    pub fn skel_random_f64(s: SkelRandomState) -> f64 {
        let bits = ((s.out1 as u64) << 32) | (s.out0 as u64);
        // 2^-53, exactly.
        ((bits >> 11) as f64) * 1.110_223_024_625_156_5e-16_f64
    }
}

#[cfg(test)]
mod tests {
    use super::device::skel_philox;
    use super::*;

    /// Random123's known-answer vectors for philox4x32_10 (kat_vectors).
    #[test]
    fn philox4x32_10_known_answers() {
        let kat: [([u32; 4], [u32; 2], [u32; 4]); 3] = [
            (
                [0, 0, 0, 0],
                [0, 0],
                [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8],
            ),
            (
                [u32::MAX; 4],
                [u32::MAX; 2],
                [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd],
            ),
            (
                [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
                [0xa4093822, 0x299f31d0],
                [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1],
            ),
        ];
        for (c, k, want) in kat {
            let got = skel_philox::call(c[0], c[1], c[2], c[3], k[0], k[1]);
            assert_eq!(
                [got.0, got.1, got.2, got.3],
                want,
                "counter {c:x?} key {k:x?}"
            );
        }
    }

    #[test]
    fn words_follow_the_recipe() {
        let seed = 0x1234_5678_9abc_def0u64;
        let i = (7u64 << 32 | 3) as usize;
        let mut r = Random::at(seed, i);
        let words: Vec<u32> = (0..9).map(|_| r.next_u32()).collect();
        for (n, w) in words.iter().enumerate() {
            let b = skel_philox::call((n / 4) as u32, 0, 3, 7, seed as u32, (seed >> 32) as u32);
            assert_eq!(*w, [b.0, b.1, b.2, b.3][n % 4], "word {n}");
        }
        let mut a = Random::at(seed, 9);
        let mut b = Random::at(seed, 9);
        let (lo, hi) = (b.next_u32(), b.next_u32());
        assert_eq!(a.next_u64(), (hi as u64) << 32 | lo as u64);
        let f = a.next_f64();
        let bits = b.next_u64();
        assert_eq!(f, (bits >> 11) as f64 / (1u64 << 53) as f64);
        assert!((0.0..1.0).contains(&f));
    }

    #[test]
    fn floats_are_in_the_unit_interval_with_the_right_mean() {
        let n = 20_000;
        let (mut s32, mut s64) = (0.0f64, 0.0f64);
        for i in 0..n {
            let mut r = Random::at(11, i);
            let (x, y) = (r.next_f32(), r.next_f64());
            assert!((0.0..1.0).contains(&x) && (0.0..1.0).contains(&y));
            s32 += x as f64;
            s64 += y;
        }
        // The mean of n uniforms has standard deviation 1 / sqrt(12 n) ~ 0.002.
        assert!((s32 / n as f64 - 0.5).abs() < 0.01, "{}", s32 / n as f64);
        assert!((s64 / n as f64 - 0.5).abs() < 0.01, "{}", s64 / n as f64);
    }
}
