//! Sort on all cores: a parallel LSD radix sort of 8-bit digits on the keys'
//! order-preserving bits (`SortKey::order_bits`), the values moved with their keys.
//!
//! Each pass cuts the input into chunks; every chunk counts its digits (in parallel), the
//! counts give every (chunk, digit) its first output position (digit-major, chunk order
//! inside a digit, which keeps the sort stable), and every chunk scatters its elements to
//! those positions (in parallel, to disjoint positions). A pass whose digit is the same for
//! every key moves nothing and is skipped. The sort ping-pongs between the operand and one
//! scratch buffer per sequence and copies back if it ends in the scratch buffer.

use std::mem::MaybeUninit;

use rayon::prelude::*;

use crate::skeletons::RadixBits;
use crate::{DeviceType, SortKey};

/// Digit values of one pass.
const RADIX: usize = 256;

/// A pointer that chunks of one pass write through at disjoint positions.
#[derive(Clone, Copy)]
struct Shared<T>(*mut T);

impl<T> Shared<T> {
    /// The pointer (a method, so that closures capture the `Send` wrapper, not the field).
    fn get(self) -> *mut T {
        self.0
    }
}

// SAFETY: every pass hands each position of the buffer behind the pointer to exactly one
// chunk (the positions of a chunk's elements are disjoint from every other chunk's), and
// the passes are separated by rayon's joins.
unsafe impl<T> Send for Shared<T> {}
// SAFETY: as for `Send`: no position is accessed by two threads within a pass.
unsafe impl<T> Sync for Shared<T> {}

/// Elements per chunk of a pass over `n`: about four chunks per thread (load balance on a
/// busy machine), at least 2^14 (the counts of a chunk stay small against its work).
fn chunk_len(n: usize) -> usize {
    n.div_ceil(4 * rayon::current_num_threads()).max(1 << 14)
}

/// One pass's sources and destinations: the keys and, when sorted in pairs, the values.
struct Buffers<K, V> {
    keys: [Shared<K>; 2],
    values: Option<[Shared<V>; 2]>,
}

/// Sorts `keys` ascending in total order, stably, moving `values` (of the keys' length, if
/// given) with their keys.
pub(crate) fn radix_sort<K: SortKey, V: DeviceType>(keys: &mut [K], values: Option<&mut [V]>) {
    let n = keys.len();
    let chunk = chunk_len(n);
    let chunks = n.div_ceil(chunk);
    let mut key_tmp: Vec<MaybeUninit<K>> = Vec::with_capacity(n);
    let mut value_tmp: Vec<MaybeUninit<V>> =
        Vec::with_capacity(if values.is_some() { n } else { 0 });
    let values_ptr = values.map(|v| v.as_mut_ptr());
    let bufs = Buffers {
        keys: [
            Shared(keys.as_mut_ptr()),
            Shared(key_tmp.as_mut_ptr().cast::<K>()),
        ],
        values: values_ptr.map(|v| [Shared(v), Shared(value_tmp.as_mut_ptr().cast::<V>())]),
    };
    // Which buffer holds the current sequence: 0 the operands, 1 the scratch buffers.
    let mut at = 0;
    for shift in (0..<K::Bits as RadixBits>::BITS).step_by(8) {
        // SAFETY: buffer `at` is initialised: the operands, or the scratch buffers after a
        // pass that wrote every position.
        let src = unsafe { std::slice::from_raw_parts(bufs.keys[at].0, n) };
        let counts: Vec<[usize; RADIX]> = src
            .par_chunks(chunk)
            .map(|part| {
                let mut c = [0usize; RADIX];
                for &k in part {
                    c[k.order_bits().digit(shift)] += 1;
                }
                c
            })
            .collect();
        let mut totals = [0usize; RADIX];
        for c in &counts {
            for (t, &x) in totals.iter_mut().zip(c) {
                *t += x;
            }
        }
        if totals.contains(&n) {
            continue; // one digit for all: the pass would move nothing
        }
        let mut starts = vec![[0usize; RADIX]; chunks];
        let mut next = 0;
        for d in 0..RADIX {
            for (s, c) in starts.iter_mut().zip(&counts) {
                s[d] = next;
                next += c[d];
            }
        }
        let (dst_k, dst_v) = (bufs.keys[1 - at], bufs.values.map(|v| v[1 - at]));
        let src_v = bufs.values.map(|v| v[at]);
        starts.into_par_iter().enumerate().for_each(|(c, mut pos)| {
            let range = c * chunk..((c + 1) * chunk).min(n);
            for i in range {
                let k = src[i];
                let d = k.order_bits().digit(shift);
                // SAFETY: `pos[d]` runs through this chunk's own positions for digit `d`
                // (disjoint from every other chunk's and digit's, all below `n`); the
                // destination buffer holds `n` elements and is not read in this pass; the
                // source values (initialised, `n` of them) are only read.
                unsafe {
                    dst_k.get().add(pos[d]).write(k);
                    if let (Some(sv), Some(dv)) = (src_v, dst_v) {
                        dv.get().add(pos[d]).write(sv.get().add(i).read());
                    }
                }
                pos[d] += 1;
            }
        });
        at = 1 - at;
    }
    if at == 1 {
        // SAFETY: the scratch buffers hold the `n` sorted elements (written by the last
        // pass); the operands are `n` long and do not overlap them.
        unsafe {
            let sorted = std::slice::from_raw_parts(bufs.keys[1].0, n);
            std::slice::from_raw_parts_mut(bufs.keys[0].0, n)
                .par_chunks_mut(chunk)
                .zip(sorted.par_chunks(chunk))
                .for_each(|(d, s)| d.copy_from_slice(s));
            if let Some([Shared(dst), Shared(src)]) = bufs.values {
                let sorted = std::slice::from_raw_parts(src, n);
                std::slice::from_raw_parts_mut(dst, n)
                    .par_chunks_mut(chunk)
                    .zip(sorted.par_chunks(chunk))
                    .for_each(|(d, s)| d.copy_from_slice(s));
            }
        }
    }
    drop((key_tmp, value_tmp));
}
