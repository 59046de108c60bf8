//! Debug counters for tests and benches (not part of the stable API).

use crate::containers::Input;
use crate::DeviceType;

/// Bytes a container has copied between the host and device memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Transfers {
    /// Host -> device bytes.
    pub up: u64,
    /// Device -> host bytes.
    pub down: u64,
}

/// The bytes `container` has copied to and from its device copies so far (zero on
/// backends without device memory).
///
/// ```
/// use skel::prelude::*;
/// let v = Vector::from(vec![1.0f32; 4]);
/// assert_eq!(skel::debug::transfers(&v), skel::debug::Transfers::default());
/// ```
pub fn transfers<T: DeviceType>(container: &impl Input<T>) -> Transfers {
    #[allow(unused_mut)]
    let mut t = Transfers::default();
    #[cfg(feature = "opencl")]
    {
        let arg = container.arg();
        if let Some((up, down)) = crate::backends::opencl::transfers(&arg.lock()) {
            t.up += up;
            t.down += down;
        }
    }
    #[cfg(not(feature = "opencl"))]
    let _ = container;
    t
}
