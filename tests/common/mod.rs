//! What every test binary shares.

use skel::Backend;

/// Whether the backend can run here; prints the skip line the CI log shows if not.
///
/// # Panics
/// If the backend is named in `SKEL_REQUIRE` (comma-separated, e.g. `opencl,cuda`) but
/// cannot run: CI sets it so that a broken device probe fails instead of skipping.
pub fn available(backend: Backend) -> bool {
    match backend.check() {
        Ok(()) => true,
        Err(e) => {
            let required = std::env::var("SKEL_REQUIRE").unwrap_or_default();
            if required.split(',').any(|b| b.trim() == backend.to_string()) {
                panic!("SKEL_REQUIRE names {backend}, but it cannot run: {e}");
            }
            println!("skipped: no {backend} device ({e})");
            false
        }
    }
}
