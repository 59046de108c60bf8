//! The shared backend suite, instantiated for every backend. Backends that are not
//! compiled in or have no device print `skipped: ...` and pass.

mod common;
#[macro_use]
mod suite;

backend_suite!(cpu, Backend::Cpu);
backend_suite!(rayon, Backend::Rayon);
backend_suite!(opencl, Backend::OpenCl);
backend_suite!(cuda, Backend::Cuda);
