//! Programs, built once per (skeleton, user functions, types) on the process's device and
//! kept in memory. `SKEL_DUMP_SOURCE=dir` writes every generated source to `dir`.

use std::any::TypeId;
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::{Mutex, OnceLock, PoisonError};

use ocl::core as cl;

use super::context::Ctx;
use super::driver;
use crate::backends::kernel_cache::KernelCache;
use crate::{Error, Result};

/// What identifies a program: the skeleton form and the types of everything in it (user
/// functions are unit types, so their `TypeId` names them).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ProgKey {
    pub(crate) kind: &'static str,
    pub(crate) types: TypeId,
    /// The lazy inputs evaluated in the kernel ([`crate::backends::chain::Reads::key`]; 0:
    /// none).
    pub(crate) chain: u64,
}

impl ProgKey {
    /// The key of skeleton form `kind` over the types in the tuple `K`.
    pub(crate) fn of<K: 'static>(kind: &'static str) -> Self {
        ProgKey {
            kind,
            types: TypeId::of::<K>(),
            chain: 0,
        }
    }

    /// The same key for a kernel that evaluates the lazy inputs of key `chain`.
    pub(crate) fn chained(self, chain: u64) -> Self {
        ProgKey { chain, ..self }
    }
}

/// Built programs (see [`crate::backends::kernel_cache`]).
static PROGRAMS: KernelCache<ProgKey, cl::Program> = KernelCache::new();

/// The program for `key`, built from `source()` on first use. A failed compilation is
/// remembered and reported as [`Error::Compile`] each time; a driver failure (out of
/// memory creating the program) is not: the next call builds again.
pub(crate) fn program(
    ctx: &Ctx,
    key: ProgKey,
    name: &str,
    source: impl FnOnce() -> Result<String>,
) -> Result<cl::Program> {
    PROGRAMS.get_or_build(key, source, |src| {
        crate::backends::jit::dump_source(name, "cl", src);
        build(ctx, name, src)
    })
}

fn build(ctx: &Ctx, name: &str, src: &str) -> Result<cl::Program> {
    let csrc = CString::new(src).map_err(|e| Error::driver(e.to_string(), e))?;
    super::injected(crate::debug::Fault::Alloc)?;
    let prog = cl::create_program_with_source(&ctx.context, &[csrc]).map_err(driver)?;
    let opts = CString::new(ctx.build_options).unwrap_or_default();
    match cl::build_program(&prog, Some(&[ctx.device]), &opts, None, None) {
        Ok(()) => {
            let bytes = crate::codegen::local_array_bytes_of(src);
            if bytes > 0 {
                local_bytes()
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(prog.as_ptr() as usize, bytes);
            }
            Ok(prog)
        }
        Err(e) => {
            let log =
                match cl::get_program_build_info(&prog, ctx.device, cl::ProgramBuildInfo::BuildLog)
                {
                    Ok(cl::ProgramBuildInfoResult::BuildLog(l)) => l,
                    _ => e.to_string(),
                };
            Err(Error::Compile {
                kernel: name.to_string(),
                log,
                source_code: src.to_string(),
            })
        }
    }
}

/// Kernel objects not in use, per (program handle, kernel name): creating one costs a
/// driver call per launch, and a kernel object must not be shared between threads while
/// its arguments are set, so each launch takes one from here and gives it back.
type Idle = Mutex<HashMap<(usize, &'static str), Vec<cl::Kernel>>>;

fn idle() -> &'static Idle {
    static IDLE: OnceLock<Idle> = OnceLock::new();
    IDLE.get_or_init(Default::default)
}

/// A kernel of a built program, for one launch; it goes back to the pool when dropped.
/// Reusing it is sound because OpenCL captures the argument values when the kernel is
/// enqueued (`clEnqueueNDRangeKernel`), so a later launch that sets new arguments does not
/// change one already enqueued.
pub(crate) struct PooledKernel {
    key: (usize, &'static str),
    kernel: Option<cl::Kernel>,
}

impl std::ops::Deref for PooledKernel {
    type Target = cl::Kernel;
    fn deref(&self) -> &cl::Kernel {
        // Always `Some` until dropped.
        self.kernel.as_ref().expect("pooled kernel taken")
    }
}

impl Drop for PooledKernel {
    fn drop(&mut self) {
        if let Some(k) = self.kernel.take() {
            idle()
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(self.key)
                .or_default()
                .push(k);
        }
    }
}

/// A kernel `name` of the built program `prog`, idle or new.
pub(crate) fn kernel(prog: &cl::Program, name: &'static str) -> Result<PooledKernel> {
    // Programs live as long as the cache (never released), so their handles identify them.
    let key = (prog.as_ptr() as usize, name);
    let reused = idle()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get_mut(&key)
        .and_then(Vec::pop);
    let kernel = match reused {
        Some(k) => k,
        None => cl::create_kernel(prog, name).map_err(driver)?,
    };
    Ok(PooledKernel {
        key,
        kernel: Some(kernel),
    })
}

/// The bytes of local arrays each built program's user functions declare, by program
/// handle (programs with none are absent).
fn local_bytes() -> &'static Mutex<HashMap<usize, usize>> {
    static BYTES: OnceLock<Mutex<HashMap<usize, usize>>> = OnceLock::new();
    BYTES.get_or_init(Default::default)
}

/// The private memory (stack) a work-group of a CPU device may take: PoCL runs a
/// work-group's work-items in a loop on one thread of its pool, each with its own copy of
/// the local arrays, on that thread's stack (PoCL 3.1: 2 MiB of local arrays per
/// work-group run, 4 MiB crash the process with SIGSEGV whatever the call's mode). Half
/// of what was seen to work leaves room for the rest of the frame.
pub(crate) const CPU_GROUP_PRIVATE_BYTES: usize = 1 << 20;

/// The bytes of the local arrays of the program of `defs` (see
/// [`DeviceSource::local_array_bytes`](crate::codegen::DeviceSource::local_array_bytes)),
/// generated once per list of functions: what a plan fixed before the program is built
/// needs to size its work-groups.
pub(crate) fn local_array_bytes(defs: &[&'static crate::codegen::FnDef]) -> Result<usize> {
    type Cache = Mutex<HashMap<Vec<usize>, usize>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let key: Vec<usize> = defs.iter().map(|d| *d as *const _ as usize).collect();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(&b) = cache
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
    {
        return Ok(b);
    }
    let b = crate::codegen::device_source_checked(defs, crate::codegen::Dialect::OpenCl, false)?
        .local_array_bytes();
    cache
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(key, b);
    Ok(b)
}

/// The largest work-group kernel `name` of `prog` (whose kernel object is `k`) can run
/// with on the device, queried once per program and kernel: `CL_KERNEL_WORK_GROUP_SIZE`,
/// and on a CPU device no more work-items than [`CPU_GROUP_PRIVATE_BYTES`] holds at the
/// kernel's private memory per work-item (the larger of `CL_KERNEL_PRIVATE_MEM_SIZE` and
/// the local arrays its source states: PoCL reports a fixed 1024). 0 when not even one
/// work-item fits.
pub(crate) fn max_work_group(
    ctx: &Ctx,
    prog: &cl::Program,
    name: &'static str,
    k: &cl::Kernel,
) -> Result<usize> {
    // Programs live as long as the cache (never released), so their handles identify them.
    static MAX: OnceLock<Mutex<HashMap<(usize, &'static str), usize>>> = OnceLock::new();
    let key = (prog.as_ptr() as usize, name);
    let map = MAX.get_or_init(Default::default);
    if let Some(&m) = map.lock().unwrap_or_else(PoisonError::into_inner).get(&key) {
        return Ok(m);
    }
    let m =
        match cl::get_kernel_work_group_info(k, ctx.device, cl::KernelWorkGroupInfo::WorkGroupSize)
        {
            Ok(cl::KernelWorkGroupInfoResult::WorkGroupSize(m)) if m > 0 => m,
            Ok(_) => ctx.wg,
            Err(e) => return Err(driver(e)),
        };
    let m = if ctx.gpu {
        m
    } else {
        let stated = local_bytes()
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key.0)
            .copied()
            .unwrap_or(0);
        let queried = match cl::get_kernel_work_group_info(
            k,
            ctx.device,
            cl::KernelWorkGroupInfo::PrivateMemSize,
        ) {
            Ok(cl::KernelWorkGroupInfoResult::PrivateMemSize(b)) => b as usize,
            _ => 0,
        };
        m.min(CPU_GROUP_PRIVATE_BYTES / stated.max(queried).max(1))
    };
    map.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(key, m);
    Ok(m)
}

/// The work-group size (a power of two, at most `ctx.wg`) for a kernel that takes any:
/// `ctx.wg`, or less where the kernel's private memory allows less (see
/// [`max_work_group`]). `Err` before launch when not even one work-item fits.
pub(crate) fn fit_work_group(ctx: &Ctx, prog: &cl::Program, name: &'static str) -> Result<usize> {
    let k = kernel(prog, name)?;
    let max = max_work_group(ctx, prog, name, &k)?;
    if max == 0 {
        return Err(Error::Driver(
            format!(
                "OpenCL: kernel {name} needs more private memory per work-item than the device \
             ({}) gives a work-group (the user function's local arrays are too large for it)",
                ctx.name
            )
            .into(),
        ));
    }
    let mut wg = ctx.wg;
    while wg > max {
        wg /= 2;
    }
    Ok(wg)
}

#[cfg(test)]
mod tests {
    use super::{program, ProgKey};
    use crate::Error;

    /// Names the broken program in the in-memory cache.
    struct BrokenProgram;

    #[test]
    fn build_failure_is_a_compile_error_with_log_and_source_every_time() {
        let ctx = match super::super::context::ctx() {
            Ok(c) => c,
            Err(e) => {
                println!("skipped: no OpenCL device ({e})");
                return;
            }
        };
        let src = "__kernel void skel_broken(__global int* p) {\n    p[0] = skel_undeclared_name + ;\n}\n";
        let generated = std::cell::Cell::new(0);
        for _ in 0..2 {
            let err = program(
                ctx,
                ProgKey::of::<BrokenProgram>("broken"),
                "broken",
                || {
                    generated.set(generated.get() + 1);
                    Ok(src.to_string())
                },
            )
            .expect_err("broken source must not build");
            match err {
                Error::Compile {
                    kernel,
                    log,
                    source_code,
                } => {
                    assert_eq!(kernel, "broken");
                    assert!(
                        log.contains("error"),
                        "the compiler's log is missing: {log}"
                    );
                    assert_eq!(source_code, src);
                }
                other => panic!("expected Error::Compile, got {other:?}"),
            }
        }
        // The second call got the remembered failure: no new source, no new build.
        assert_eq!(generated.get(), 1);
    }

    /// A failed driver call (a kernel name the program lacks: `CL_INVALID_KERNEL_NAME`)
    /// keeps ocl's error as the source of the `Error::Driver`.
    #[test]
    fn a_driver_failure_keeps_the_opencl_error_as_its_source() {
        use std::error::Error as _;
        let ctx = match super::super::context::ctx() {
            Ok(c) => c,
            Err(e) => {
                println!("skipped: no OpenCL device ({e})");
                return;
            }
        };
        let src = "__kernel void skel_probe(__global int* p) { p[0] = 1; }\n";
        let prog = super::build(ctx, "probe", src).expect("a valid kernel builds");
        let err = super::kernel(&prog, "skel_no_such_kernel")
            .err()
            .expect("a missing kernel is an error");
        let Error::Driver(driver) = &err else {
            panic!("expected Error::Driver, got {err:?}");
        };
        assert!(driver.message().contains("OpenCL"), "{driver}");
        let level1 = err.source().expect("the DriverError");
        let cause = level1.source().expect("ocl's error behind it");
        let ocl = cause
            .downcast_ref::<ocl::core::Error>()
            .unwrap_or_else(|| panic!("not an ocl error: {cause:?}"));
        assert_eq!(
            ocl.api_status(),
            Some(ocl::core::Status::CL_INVALID_KERNEL_NAME),
            "{ocl}"
        );
    }
}
