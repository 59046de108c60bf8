//! Sort on one core: the oracle every other backend's sort is tested against.

use crate::{DeviceType, SortKey};

/// Sorts `keys` ascending in the key type's total order, stably, moving `values[i]` (if
/// given, of the keys' length) with `keys[i]`.
pub(crate) fn sort_range<K: SortKey, V: DeviceType>(keys: &mut [K], values: Option<&mut [V]>) {
    let Some(values) = values else {
        keys.sort_by(|a, b| a.total_order(b));
        return;
    };
    // The stable order of positions, then both sequences gathered through it.
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by(|&a, &b| keys[a].total_order(&keys[b]));
    let sorted_keys: Vec<K> = order.iter().map(|&i| keys[i]).collect();
    let sorted_values: Vec<V> = order.iter().map(|&i| values[i]).collect();
    keys.copy_from_slice(&sorted_keys);
    values.copy_from_slice(&sorted_values);
}
