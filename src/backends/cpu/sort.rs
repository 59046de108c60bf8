//! Sort on one core: the oracle every other backend's sort is tested against.

use crate::{DeviceType, SortKey};

/// Sorts `keys` ascending in the key type's total order, stably, moving `values[i]` (if
/// given, of the keys' length) with `keys[i]`.
pub(crate) fn sort_range<K: SortKey, V: DeviceType>(keys: &mut [K], values: Option<&mut [V]>) {
    let Some(values) = values else {
        keys.sort_by(|a, b| a.total_order(b));
        return;
    };
    let mut pairs: Vec<(K, V)> = keys.iter().copied().zip(values.iter().copied()).collect();
    pairs.sort_by(|a, b| a.0.total_order(&b.0));
    for ((k, v), (sk, sv)) in keys.iter_mut().zip(values.iter_mut()).zip(pairs) {
        (*k, *v) = (sk, sv);
    }
}
