//! Kernels, compiled at run time with NVRTC for the device's own architecture and cached:
//! in memory per (skeleton, user functions, types, device), and on disk as CUBIN under the
//! user cache directory (see [`crate::backends::jit`]), keyed by a hash of the source, the
//! compiler options, the device and the NVRTC version. A second process thus loads the
//! binary (about a millisecond) instead of compiling (hundreds of milliseconds).
//!
//! `SKEL_DUMP_SOURCE=dir` writes every generated source to `dir`; `SKEL_JIT_LOG=1` says
//! whether each kernel was compiled or loaded from disk. A failed compile is
//! [`Error::Compile`] with NVRTC's log and the source, and is remembered (not retried).

use std::ffi::{c_char, c_void, CString};
use std::sync::Arc;

use cudarc::driver::{result, sys};
use cudarc::nvrtc::sys as nv;

use super::context::{ensure_nvrtc, Ctx, Lane};
use super::driver;
use super::trace::{self, Op, Tag};
use crate::backends::jit::{self, ProgKey};
use crate::backends::kernel_cache::KernelCache;
use crate::{Error, Result};

/// A loaded module and the kernels looked up in it.
pub(crate) struct Module {
    /// Kept loaded for the process (functions point into it).
    _module: sys::CUmodule,
    funcs: Vec<(String, sys::CUfunction)>,
}

// SAFETY: module and function handles are process-wide driver objects, immutable once
// loaded; the driver API is thread-safe.
unsafe impl Send for Module {}
// SAFETY: as above.
unsafe impl Sync for Module {}

impl Module {
    /// The kernel `name` (one of the names the module was loaded with).
    pub(crate) fn func(&self, name: &str) -> Result<sys::CUfunction> {
        self.funcs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, f)| *f)
            .ok_or_else(|| Error::Driver(format!("internal: no kernel {name} in module").into()))
    }
}

/// Loaded modules per program, from CUBIN images (see [`crate::backends::kernel_cache`]).
static MODULES: KernelCache<ProgKey, Arc<Module>, Vec<u8>> = KernelCache::new();

/// The module for `key`, built from `source()` on first use, with kernels `entries`.
/// Generation errors (an untranslatable user function) are returned, not cached; nor are
/// driver failures (a module load out of device memory): the next call builds again. Only
/// compile errors, which the next build would repeat, are remembered.
///
/// The compile (the disk cache or NVRTC: no driver, no context) may run on a thread of its
/// own for `Backend::Auto`; the load into the device always runs on the calling thread, so
/// no thread but a caller's ever enters the driver.
pub(crate) fn module(
    ctx: &Ctx,
    key: ProgKey,
    name: &str,
    entries: &[&str],
    source: impl FnOnce() -> Result<String>,
) -> Result<Arc<Module>> {
    // Every call asks: the built module costs one lookup, no build preparations.
    if let Some(built) = MODULES.built(&key) {
        return built;
    }
    let name = name.to_string();
    let opts = options(ctx);
    // The disk key does not include the NVRTC version, so a cache hit needs no NVRTC at
    // all; the driver version and the architecture stand in for the toolchain.
    let stable = (ctx.name.clone(), ctx.arch(), ctx.driver_version);
    let disk_key = move |src: &str| {
        jit::stable_hash(&[
            src.as_bytes(),
            opts.join(" ").as_bytes(),
            stable.0.as_bytes(),
            stable.1.as_bytes(),
            &stable.2.to_le_bytes(),
            env!("CARGO_PKG_VERSION").as_bytes(),
        ])
    };
    let (key_here, opts) = (disk_key.clone(), options(ctx));
    let here = name.clone();
    MODULES.get_or_compile(
        key,
        source,
        // On the calling thread: a binary in the disk cache loads at once (no wait for a
        // thread). A miss inside `Auto` touches no compiler here: the background compile
        // thread warms NVRTC up first (or finds it warmed by the device-probe thread).
        move |src, _behind| {
            jit::dump_source(&here, "cu", src);
            disk_hit(&here, &key_here(src))
        },
        move |src| {
            if crate::backends::kernel_cache::in_background() {
                warm_up_nvrtc(&opts);
            }
            compiled(&name, src, &opts, &disk_key(src))
        },
        |image| load(ctx, &image, entries).map(Arc::new),
    )
}

/// Loads NVRTC for the process and runs one tiny compile, once, on a background thread
/// (the device-probe thread where the kernel cache is cold, else the first compile
/// thread), then registers the exit hook that waits for background compiles again. The
/// compiler's exit code (C++ destructors registered as its objects are first made, during
/// a first compile) must be registered *before* that hook, so that an `exit` on a thread
/// other than `main` (whose exit waits in a thread-local destructor, ahead of every hook)
/// runs the hook first and waits for the compiles still running. Without it, a program
/// ending while its first background compile ran crashed in libnvrtc (H200, greyscale on
/// `Backend::Auto` over six photos). It ran on the calling thread before, which cost the
/// first call NVRTC's load from disk (about 0.2 s on a fresh machine).
fn warm_up_nvrtc(opts: &[String]) {
    static DONE: std::sync::Once = std::sync::Once::new();
    DONE.call_once(|| {
        // A panic escaping `call_once` would poison `DONE` (every later compile thread
        // panicking at it) and skip the exit hook: the warm-up is only an optimisation.
        let warmed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if ensure_nvrtc().is_ok() {
                let _ = compile(
                    "skel_warm_up",
                    "extern \"C\" __global__ void skel_warm_up() {}\n",
                    opts,
                );
            }
        }));
        if let Err(payload) = warmed {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            log::error!("the NVRTC warm-up panicked ({message}): kernels compile without it");
        }
        crate::backends::kernel_cache::rearm_exit_hook();
    });
}

/// [`warm_up_nvrtc`] for the first device slot where the disk cache holds no CUDA binary
/// (or is off): the first kernels will be compiled, so a background thread of
/// `Backend::Auto`'s device probe warms the compiler up while the context is still being
/// created (the architecture comes from the driver, without a context) and the calls run
/// on the host. With a warm cache nothing is loaded (a process that only loads binaries
/// never needs NVRTC); without a device, neither.
pub(crate) fn warm_up_if_cold() {
    let cold = jit::cache_dir("cuda").map_or(true, |dir| {
        std::fs::read_dir(dir).map_or(true, |mut entries| entries.next().is_none())
    });
    if !cold {
        return;
    }
    if let Some(arch) = super::context::first_arch() {
        warm_up_nvrtc(&options_for(&arch));
    }
}

/// NVRTC options: the device's own architecture, IEEE float semantics like Rust's (no
/// contraction into FMA, precise division and square root), so results match the CPU.
pub(crate) fn options(ctx: &Ctx) -> Vec<String> {
    options_for(&ctx.arch())
}

/// [`options`] for the architecture `arch` (`sm_XY`).
fn options_for(arch: &str) -> Vec<String> {
    vec![
        format!("--gpu-architecture={arch}"),
        "--std=c++17".into(),
        "--fmad=false".into(),
        "--device-as-default-execution-space".into(),
    ]
}

/// The CUBIN stored under `disk_key`, if any.
pub(crate) fn disk_hit(name: &str, disk_key: &str) -> Option<Vec<u8>> {
    let bin = jit::cache_load("cuda", disk_key, "cubin")?;
    jit::log(|| format!("cuda {name}: loaded from the disk cache ({disk_key}.cubin)"));
    Some(bin)
}

/// The CUBIN for `src` compiled by NVRTC, and stored in the disk cache under `disk_key`.
pub(crate) fn compiled(name: &str, src: &str, opts: &[String], disk_key: &str) -> Result<Vec<u8>> {
    let t = std::time::Instant::now();
    let bin = compile(name, src, opts)?;
    jit::log(|| {
        format!(
            "cuda {name}: compiled by NVRTC in {:.1} ms",
            t.elapsed().as_secs_f64() * 1e3
        )
    });
    jit::cache_store("cuda", disk_key, "cubin", &bin);
    Ok(bin)
}

fn compile(name: &str, src: &str, opts: &[String]) -> std::result::Result<Vec<u8>, Error> {
    ensure_nvrtc()?;
    let csrc = CString::new(src).map_err(|e| Error::driver(e.to_string(), e))?;
    let cname = CString::new(format!("{name}.cu")).map_err(|e| Error::driver(e.to_string(), e))?;
    let prog = cudarc::nvrtc::result::create_program(&csrc, Some(&cname))
        .map_err(|e| Error::driver(format!("nvrtcCreateProgram: {e:?}"), e))?;
    let copts: Vec<CString> = opts
        .iter()
        .filter_map(|o| CString::new(o.as_str()).ok())
        .collect();
    let ptrs: Vec<*const c_char> = copts.iter().map(|c| c.as_ptr()).collect();
    // SAFETY: `prog` is a live program; the option pointers outlive the call.
    let rc = unsafe { nv::nvrtcCompileProgram(prog, ptrs.len() as i32, ptrs.as_ptr()) };
    let out = if rc == nv::nvrtcResult::NVRTC_SUCCESS {
        cubin(prog)
    } else {
        Err(Error::Compile {
            kernel: name.to_string(),
            log: format!("{rc:?}\n{}", log(prog)),
            source_code: src.to_string(),
        })
    };
    // SAFETY: `prog` is not used after this.
    let _ = unsafe { cudarc::nvrtc::result::destroy_program(prog) };
    out
}

fn log(prog: nv::nvrtcProgram) -> String {
    // SAFETY: `prog` is live.
    match unsafe { cudarc::nvrtc::result::get_program_log(prog) } {
        Ok(chars) => {
            let bytes: Vec<u8> = chars
                .iter()
                .map(|&c| c as u8)
                .take_while(|&b| b != 0)
                .collect();
            String::from_utf8_lossy(&bytes).into_owned()
        }
        Err(e) => format!("(no log: {e:?})"),
    }
}

fn cubin(prog: nv::nvrtcProgram) -> std::result::Result<Vec<u8>, Error> {
    let mut size = 0usize;
    // SAFETY: `prog` compiled successfully; out-pointer to a local.
    let rc = unsafe { nv::nvrtcGetCUBINSize(prog, &mut size) };
    if rc != nv::nvrtcResult::NVRTC_SUCCESS || size == 0 {
        return Err(Error::Driver(format!("nvrtcGetCUBINSize: {rc:?}").into()));
    }
    let mut bin = vec![0u8; size];
    // SAFETY: `bin` holds the `size` bytes NVRTC asked for.
    let rc = unsafe { nv::nvrtcGetCUBIN(prog, bin.as_mut_ptr().cast::<c_char>()) };
    if rc != nv::nvrtcResult::NVRTC_SUCCESS {
        return Err(Error::Driver(format!("nvrtcGetCUBIN: {rc:?}").into()));
    }
    Ok(bin)
}

fn load(ctx: &Ctx, image: &[u8], entries: &[&str]) -> Result<Module> {
    ctx.bind()?;
    // Loading allocates the module's code and constants in device memory.
    super::injected(crate::debug::Fault::Alloc)
        .map_err(|e| super::oom_or_driver(e, image.len()))?;
    // SAFETY: `image` is a complete CUBIN produced by NVRTC for this device's architecture;
    // the driver copies it during the call.
    let module = unsafe { result::module::load_data(image.as_ptr().cast::<c_void>()) }
        .map_err(|e| super::oom_or_driver(e, image.len()))?;
    let mut funcs = Vec::with_capacity(entries.len());
    for &e in entries {
        let cname = CString::new(e).map_err(|x| Error::driver(x.to_string(), x))?;
        // SAFETY: `module` was just loaded and is never unloaded.
        let f = unsafe { result::module::get_function(module, cname) }.map_err(driver)?;
        funcs.push((e.to_string(), f));
    }
    Ok(Module {
        _module: module,
        funcs,
    })
}

/// Blocks of `threads` threads of `func`, each with `shared` bytes of dynamic shared
/// memory, that one multiprocessor holds at once, from the driver's occupancy calculator
/// (its registers and shared memory decide), remembered per kernel and shape once known.
/// `u32::MAX` (no cap) where the calculator answers 0, as it may before a launch raises
/// the kernel's shared memory limit. A grid-stride kernel launched with more blocks than
/// the device holds runs a second, partly filled wave, too few loads in flight to keep
/// memory busy: its grid is capped at what fits instead.
pub(crate) fn resident_blocks(func: sys::CUfunction, threads: u32, shared: u32) -> Result<u32> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock, PoisonError};
    type Known = Mutex<HashMap<(usize, u32, u32), u32>>;
    static KNOWN: OnceLock<Known> = OnceLock::new();
    let known = KNOWN.get_or_init(Default::default);
    let key = (func as usize, threads, shared);
    if let Some(&n) = known
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
    {
        return Ok(n);
    }
    // SAFETY: `func` is a kernel of a loaded module (modules stay loaded for the process).
    let n = unsafe {
        result::occupancy::max_active_block_per_multiprocessor(
            func,
            threads as std::ffi::c_int,
            shared as usize,
        )
    }
    .map_err(driver)?;
    // Failures return above and are never remembered; only the driver's answer is.
    let n = u32::try_from(n).ok().filter(|&n| n > 0).unwrap_or(u32::MAX);
    known
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(key, n);
    Ok(n)
}

/// Kernel arguments, kept alive until the launch: each value in its own 8-byte-aligned
/// run of words of one buffer (two allocations per launch, whatever the arguments).
#[derive(Default)]
pub(crate) struct KernelArgs {
    words: Vec<u64>,
    /// Where each argument starts in `words`.
    starts: Vec<usize>,
}

impl KernelArgs {
    /// The argument words and where each argument starts among them.
    pub(crate) fn parts(&self) -> (&[u64], &[usize]) {
        (&self.words, &self.starts)
    }

    /// Appends the bytes of one argument (a device pointer, an integer, a uniform struct).
    pub(crate) fn push_bytes(&mut self, bytes: &[u8]) {
        if self.words.capacity() == 0 {
            self.words.reserve(16);
            self.starts.reserve(16);
        }
        let at = self.words.len();
        self.starts.push(at);
        self.words.resize(at + bytes.len().div_ceil(8).max(1), 0);
        // SAFETY: the words from `at` hold at least `bytes.len()` bytes; the regions do not
        // overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.words.as_mut_ptr().add(at).cast::<u8>(),
                bytes.len(),
            )
        };
    }

    /// Appends a device pointer.
    pub(crate) fn ptr(&mut self, p: sys::CUdeviceptr) -> &mut Self {
        self.push_bytes(&p.to_le_bytes());
        self
    }

    /// Appends a 64-bit unsigned integer.
    pub(crate) fn u64(&mut self, v: u64) -> &mut Self {
        self.push_bytes(&v.to_le_bytes());
        self
    }

    /// Appends a 64-bit signed integer.
    pub(crate) fn i64(&mut self, v: i64) -> &mut Self {
        self.push_bytes(&v.to_le_bytes());
        self
    }

    /// Appends a 32-bit signed integer.
    pub(crate) fn i32(&mut self, v: i32) -> &mut Self {
        self.push_bytes(&v.to_le_bytes());
        self
    }

    /// Appends a device value by its bytes.
    pub(crate) fn value<T: crate::DeviceType>(&mut self, v: &T) -> &mut Self {
        // SAFETY: a DeviceType is plain data without padding; its bytes are only read.
        let bytes = unsafe {
            std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>())
        };
        self.push_bytes(bytes);
        self
    }

    /// Appends every uniform, in order.
    pub(crate) fn uniforms<U: crate::userfn::UniformTuple>(&mut self, u: &U) -> &mut Self {
        u.for_each_bytes(&mut |b| self.push_bytes(b));
        self
    }
}

/// A kernel launch's shape: grid, block, dynamic shared memory bytes.
pub(crate) struct Dims {
    pub(crate) grid: (u32, u32, u32),
    pub(crate) block: (u32, u32, u32),
    pub(crate) shared: u32,
}

impl Dims {
    /// A 1D launch of `grid` blocks of `block` threads.
    pub(crate) fn line(grid: u32, block: u32, shared: u32) -> Dims {
        Dims {
            grid: (grid, 1, 1),
            block: (block, 1, 1),
            shared,
        }
    }
}

/// Launches `func` on `lane` with `args` (in the kernel's parameter order).
pub(crate) fn launch(
    ctx: &Ctx,
    lane: Lane,
    tag: Tag,
    func: sys::CUfunction,
    dims: Dims,
    args: &mut KernelArgs,
) -> Result<()> {
    let shared = dims.shared;
    if shared > 48 * 1024 {
        if shared > ctx.smem_optin {
            return Err(Error::InvalidArgument(format!(
                "the kernel needs {shared} bytes of shared memory; the device allows {}",
                ctx.smem_optin
            )));
        }
        // SAFETY: a valid function handle; raising its dynamic shared memory limit.
        unsafe {
            result::function::set_function_attribute(
                func,
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                shared as i32,
            )
        }
        .map_err(driver)?;
    }
    let base = args.words.as_mut_ptr();
    // SAFETY: every start lies inside `words`, which is not resized until the launch.
    let mut ptrs: Vec<*mut c_void> = args
        .starts
        .iter()
        .map(|&at| unsafe { base.add(at) }.cast::<c_void>())
        .collect();
    let span = trace::begin(lane, Op::Kernel, 0, tag)?;
    super::injected(crate::debug::Fault::Launch).map_err(driver)?;
    // SAFETY: `func` is a kernel of a loaded module whose parameters are, in order, the
    // values in `args` (each builder pushes exactly the parameters its template declares);
    // every device pointer among them addresses a live allocation whose earlier uses on
    // other streams are ordered before this launch (memory/); the argument values are
    // copied by the driver during the call.
    unsafe { result::launch_kernel(func, dims.grid, dims.block, shared, lane.raw, &mut ptrs) }
        .map_err(driver)?;
    if super::graph::capturing() {
        super::graph::launched(ctx, lane, func, &dims, args);
    }
    trace::end(span, lane)
}
