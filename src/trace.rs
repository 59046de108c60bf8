//! Timelines of device work: `SKEL_TRACE=path.json` ([`crate::config::TRACE`]).
//!
//! With `SKEL_TRACE` set, the CUDA backend records every upload, kernel and download
//! (stream, start, end, bytes, chunk, call) and writes them as Chrome-trace JSON, viewable
//! in Perfetto (<https://ui.perfetto.dev>) or as an SVG timeline with
//! `cargo run --release --example skel_trace -- path.json -o timeline.svg`. The file is
//! written at process exit and whenever [`flush`] is called.
//!
//! ```
//! // Without SKEL_TRACE (or without CUDA) there is nothing to write.
//! if skel::config::TRACE.get()?.is_none() {
//!     assert_eq!(skel::trace::flush()?, None);
//! }
//! # Ok::<(), skel::Error>(())
//! ```

use std::path::PathBuf;

/// Writes the trace file now (everything recorded so far, waiting for it to finish), and
/// returns its path; `None` when `SKEL_TRACE` is not set or the CUDA backend was never
/// used.
pub fn flush() -> crate::Result<Option<PathBuf>> {
    #[cfg(feature = "cuda")]
    return crate::backends::cuda::flush_trace();
    #[cfg(not(feature = "cuda"))]
    Ok(None)
}
