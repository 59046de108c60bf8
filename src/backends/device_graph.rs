//! The device graph behind `skel::Graph` (`crate::graph`) where the build has one: CUDA
//! graphs (`cuda/graph.rs`). Without the `cuda` feature a recording has none and every
//! launch runs its closure again.

#[cfg(feature = "cuda")]
pub(crate) use super::cuda::graph::{begin, end, refuse, DeviceGraph};

#[cfg(not(feature = "cuda"))]
pub(crate) use none::{begin, end, refuse, DeviceGraph};

#[cfg(not(feature = "cuda"))]
mod none {
    use crate::Result;

    /// Nothing to log.
    pub(crate) struct Logging;

    /// Starts nothing.
    pub(crate) fn begin() -> Logging {
        Logging
    }

    /// Nothing is logged.
    #[inline]
    pub(crate) fn refuse(_why: &str) {}

    /// No device graph in this build.
    pub(crate) fn end(_: Logging, _cuda_only: bool) -> std::result::Result<DeviceGraph, String> {
        Err("this build has no CUDA backend".into())
    }

    /// Never made in this build.
    pub(crate) enum DeviceGraph {}

    impl DeviceGraph {
        pub(crate) fn nodes(&self) -> usize {
            match *self {}
        }

        pub(crate) fn launch(&self) -> Result<Option<&'static str>> {
            match *self {}
        }
    }
}
