//! The hand-written side of the GPU benches (`kernels.rs`, `stencil.rs`, `transfers.rs`):
//! naive CUDA C baselines compiled with NVRTC with the options skel compiles its own kernels with
//! (`--fmad=false`, `--std=c++17`, the device's own architecture; NVRTC's default precise
//! division and square root), launched with raw driver calls on the process's primary
//! context (the one skel uses) and a stream of their own; device buffers, timing, and the
//! device-to-device copy bound.
//!
//! The benches' only `unsafe` lives here: every raw driver call of a bench goes through
//! this module. Included as `#[path = "common/hand.rs"] mod hand;` by the benches that need
//! cudarc (the `cuda` feature), so the other benches build without it.

#![allow(dead_code)] // each bench uses its own subset

use std::ffi::{c_char, c_void, CString};
use std::time::Instant;

use cudarc::driver::{result, sys};
use skel::prelude::*;

/// Errors of the benches: a message for the report.
pub type Res<T> = std::result::Result<T, String>;

/// Maps a driver error to a message naming the call.
pub fn drv(what: &str) -> impl Fn(cudarc::driver::DriverError) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// Device memory freed on drop.
pub struct DevBuf {
    /// The device address.
    pub ptr: sys::CUdeviceptr,
    bytes: usize,
}

impl DevBuf {
    /// `bytes` bytes of uninitialised device memory.
    pub fn new(bytes: usize) -> Res<Self> {
        // SAFETY: a plain allocation, freed in drop.
        let ptr = unsafe { result::malloc_sync(bytes.max(4)) }.map_err(drv("cuMemAlloc"))?;
        Ok(DevBuf { ptr, bytes })
    }

    /// A device copy of `data`.
    pub fn from<T: Copy>(data: &[T]) -> Res<Self> {
        let b = DevBuf::new(std::mem::size_of_val(data))?;
        // SAFETY: `b` holds exactly the bytes of `data`.
        unsafe { result::memcpy_htod_sync(b.ptr, data) }.map_err(drv("cuMemcpyHtoD"))?;
        Ok(b)
    }

    /// The buffer's contents as values of `T` (synchronous).
    pub fn to_vec<T: Copy + Default>(&self) -> Res<Vec<T>> {
        let mut v = vec![T::default(); self.bytes / std::mem::size_of::<T>()];
        // SAFETY: `v` holds at most the buffer's bytes; the copy is synchronous.
        unsafe { result::memcpy_dtoh_sync(&mut v, self.ptr) }.map_err(drv("cuMemcpyDtoH"))?;
        Ok(v)
    }
}

impl Drop for DevBuf {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemAlloc; every use was synchronised (`Hand::sync`).
        let _ = unsafe { result::free_sync(self.ptr) };
    }
}

/// Kernel arguments: each value in its own 8-byte slot, alive until the launch.
#[derive(Default)]
pub struct Args(Vec<u64>);

impl Args {
    /// Appends one argument (at most 8 bytes: a device pointer, an integer, a float).
    pub fn push<T: Copy>(mut self, v: T) -> Self {
        assert!(
            std::mem::size_of::<T>() <= 8,
            "kernel arguments are at most 8 bytes"
        );
        let mut slot = 0u64;
        // SAFETY: `T` fits in the slot (checked); plain bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (&v as *const T).cast::<u8>(),
                (&mut slot as *mut u64).cast::<u8>(),
                std::mem::size_of::<T>(),
            )
        };
        self.0.push(slot);
        self
    }
}

/// A module of hand-written kernels on the primary context, with a stream of its own.
pub struct Hand {
    /// The stream every launch and copy of this side goes to.
    stream: sys::CUstream,
    module: sys::CUmodule,
    /// Multiprocessors of the device (grid sizes of grid-stride kernels).
    pub sms: u32,
    /// One pinned f32 for results read back.
    pinned: *mut f32,
}

/// Makes libnvrtc loadable: the loader path first, then the usual CUDA directories (kept
/// loaded, so cudarc's lookup by name finds it).
fn ensure_nvrtc() -> Res<()> {
    // SAFETY: only dlopens NVIDIA's library by its usual names.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Ok(());
    }
    let dirs = [
        std::env::var("CUDA_HOME")
            .map(|d| format!("{d}/lib64"))
            .ok(),
        Some("/usr/local/cuda/lib64".to_string()),
    ];
    for dir in dirs.into_iter().flatten() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut libs: Vec<_> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.to_string_lossy().contains("libnvrtc.so"))
            .collect();
        libs.sort();
        for lib in libs {
            // SAFETY: loading NVRTC runs its initialisers only.
            if let Ok(l) = unsafe { libloading::Library::new(&lib) } {
                std::mem::forget(l);
                // SAFETY: as above.
                if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
                    return Ok(());
                }
            }
        }
    }
    Err("libnvrtc not found (set LD_LIBRARY_PATH or CUDA_HOME)".into())
}

/// CUBIN of `src` for `arch`, with the options skel uses (no FMA contraction).
fn compile(src: &str, arch: &str) -> Res<Vec<u8>> {
    use cudarc::nvrtc::sys as nv;
    ensure_nvrtc()?;
    let csrc = CString::new(src).map_err(|e| e.to_string())?;
    let prog = cudarc::nvrtc::result::create_program(&csrc, None)
        .map_err(|e| format!("nvrtcCreateProgram: {e:?}"))?;
    let opts: Vec<CString> = [
        format!("--gpu-architecture={arch}"),
        "--std=c++17".into(),
        "--fmad=false".into(),
    ]
    .into_iter()
    .filter_map(|o| CString::new(o).ok())
    .collect();
    let ptrs: Vec<*const c_char> = opts.iter().map(|c| c.as_ptr()).collect();
    // SAFETY: a live program; the option strings outlive the call.
    let rc = unsafe { nv::nvrtcCompileProgram(prog, ptrs.len() as i32, ptrs.as_ptr()) };
    let out = if rc == nv::nvrtcResult::NVRTC_SUCCESS {
        let mut size = 0usize;
        // SAFETY: a compiled program; an out-pointer to a local, then a buffer of that size.
        unsafe {
            let _ = nv::nvrtcGetCUBINSize(prog, &mut size);
            let mut bin = vec![0u8; size];
            let rc = nv::nvrtcGetCUBIN(prog, bin.as_mut_ptr().cast::<c_char>());
            (rc == nv::nvrtcResult::NVRTC_SUCCESS && size > 0)
                .then_some(bin)
                .ok_or_else(|| format!("nvrtcGetCUBIN: {rc:?}"))
        }
    } else {
        // SAFETY: a live program.
        let log = unsafe { cudarc::nvrtc::result::get_program_log(prog) }
            .map(|l| l.iter().map(|&c| c as u8 as char).collect::<String>())
            .unwrap_or_default();
        Err(format!(
            "the hand-written kernels do not compile: {rc:?}\n{log}"
        ))
    };
    // SAFETY: not used afterwards.
    let _ = unsafe { cudarc::nvrtc::result::destroy_program(prog) };
    out
}

impl Hand {
    /// Compiles `src` (kernels declared `extern "C"`) for the device `SKEL_CUDA_DEVICE`
    /// names (default 0) and loads it on that device's primary context.
    pub fn new(src: &str) -> Res<Self> {
        // SAFETY: dlopen of the driver by its usual names.
        if !unsafe { sys::is_culib_present() } {
            return Err("no CUDA driver".into());
        }
        result::init().map_err(drv("cuInit"))?;
        let ordinal = std::env::var("SKEL_CUDA_DEVICE")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        let dev = result::device::get(ordinal).map_err(drv("cuDeviceGet"))?;
        // SAFETY: the primary context is retained for the process (skel retains it too).
        let ctx = unsafe { result::primary_ctx::retain(dev) }.map_err(drv("retain"))?;
        // SAFETY: just retained.
        unsafe { result::ctx::set_current(ctx) }.map_err(drv("cuCtxSetCurrent"))?;
        use sys::CUdevice_attribute as A;
        // SAFETY: a valid device.
        let at = |a| unsafe { result::device::get_attribute(dev, a) }.map_err(drv("attribute"));
        let arch = format!(
            "sm_{}{}",
            at(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            at(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?
        );
        let sms = at(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?.max(1) as u32;
        let image = compile(src, &arch)?;
        // SAFETY: a complete CUBIN for this device; never unloaded.
        let module = unsafe { result::module::load_data(image.as_ptr().cast::<c_void>()) }
            .map_err(drv("cuModuleLoadData"))?;
        let stream = result::stream::create(result::stream::StreamKind::NonBlocking)
            .map_err(drv("cuStreamCreate"))?;
        // SAFETY: a plain pinned allocation kept for the process.
        let pinned = unsafe { result::malloc_host(64, 0) }.map_err(drv("cuMemHostAlloc"))?;
        Ok(Hand {
            stream,
            module,
            sms,
            pinned: pinned.cast::<f32>(),
        })
    }

    /// Launches kernel `name` of the module on the stream (asynchronous). The caller passes
    /// exactly the kernel's parameters, in order, each device pointer a live [`DevBuf`] of
    /// the size the kernel indexes: the benches launch only their own kernels this way.
    pub fn launch(&self, name: &str, grid: (u32, u32), block: (u32, u32), args: Args) -> Res<()> {
        let cname = CString::new(name).map_err(|e| e.to_string())?;
        // SAFETY: the module is loaded for the process.
        let f = unsafe { result::module::get_function(self.module, cname) }
            .map_err(drv("cuModuleGetFunction"))?;
        let mut vals = args.0;
        let mut ptrs: Vec<*mut c_void> = vals.iter_mut().map(|v| (v as *mut u64).cast()).collect();
        // SAFETY: the kernel gets exactly its parameters, in order (the contract above),
        // each value in an 8-byte slot alive until the call returns.
        unsafe {
            result::launch_kernel(
                f,
                (grid.0, grid.1, 1),
                (block.0, block.1, 1),
                0,
                self.stream,
                &mut ptrs,
            )
        }
        .map_err(drv(name))
    }

    /// Waits for everything issued on this side's stream.
    pub fn sync(&self) -> Res<()> {
        // SAFETY: our stream.
        unsafe { result::stream::synchronize(self.stream) }.map_err(drv("sync"))
    }

    /// `*out = 0`, `kernel`, the result back into pinned memory, waited for.
    pub fn reduce_to_host(&self, out: &DevBuf, kernel: impl Fn() -> Res<()>) -> Res<f32> {
        // SAFETY: `out` holds at least 4 bytes; the pinned slot outlives the synchronised
        // copy.
        unsafe {
            result::memset_d8_async(out.ptr, 0, 4, self.stream).map_err(drv("memset"))?;
            kernel()?;
            sys::cuMemcpyDtoHAsync_v2(self.pinned.cast(), out.ptr, 4, self.stream)
                .result()
                .map_err(drv("cuMemcpyDtoHAsync"))?;
            self.sync()?;
            Ok(*self.pinned)
        }
    }

    /// The first f32 of `buf` read back through pinned memory, waited for.
    pub fn read_f32(&self, buf: &DevBuf) -> Res<f32> {
        // SAFETY: `buf` holds at least 4 bytes; the pinned slot outlives the synchronised
        // copy.
        unsafe { sys::cuMemcpyDtoHAsync_v2(self.pinned.cast(), buf.ptr, 4, self.stream) }
            .result()
            .map_err(drv("cuMemcpyDtoHAsync"))?;
        self.sync()?;
        // SAFETY: written by the copy just waited for.
        Ok(unsafe { *self.pinned })
    }

    /// Blocks of `per` threads covering `n` items.
    pub fn blocks(n: usize, per: usize) -> u32 {
        n.div_ceil(per).max(1) as u32
    }

    /// Issues a device-to-device copy of `bytes` bytes from `src` to `dst` (asynchronous).
    pub fn copy(&self, dst: &DevBuf, src: &DevBuf, bytes: usize) -> Res<()> {
        if bytes > dst.bytes.min(src.bytes) {
            return Err(format!("copy of {bytes} bytes: buffers too small"));
        }
        // SAFETY: both buffers hold at least `bytes` (checked); the stream orders the uses.
        unsafe { result::memcpy_dtod_async(dst.ptr, src.ptr, bytes, self.stream) }
            .map_err(drv("cuMemcpyDtoD"))
    }

    /// Copies `src` to `dst` through the driver's own path (the link's direct DMA where
    /// `src` is pinned, the driver's staging where it is pageable), waited for.
    pub fn upload<T: Copy>(&self, dst: &DevBuf, src: &[T]) -> Res<()> {
        let bytes = std::mem::size_of_val(src);
        if bytes > dst.bytes {
            return Err(format!("upload of {bytes} bytes: buffer too small"));
        }
        // SAFETY: `dst` holds at least the bytes of `src` (checked); `src` outlives the
        // copy, which is waited for before returning.
        unsafe { result::memcpy_htod_async(dst.ptr, src, self.stream) }
            .map_err(drv("cuMemcpyHtoD"))?;
        self.sync()
    }

    /// Copies `src` into `dst` through the driver's own path, waited for.
    pub fn download<T: Copy>(&self, dst: &mut [T], src: &DevBuf) -> Res<()> {
        let bytes = std::mem::size_of_val(dst);
        if bytes > src.bytes {
            return Err(format!("download of {bytes} bytes: buffer too small"));
        }
        // SAFETY: `src` holds at least the bytes of `dst` (checked); `dst` outlives the
        // copy, which is waited for before returning.
        unsafe { result::memcpy_dtoh_async(dst, src.ptr, self.stream) }
            .map_err(drv("cuMemcpyDtoH"))?;
        self.sync()
    }

    /// The d2d copy of `bytes` bytes (best of `reps`): the memory-bound floor of a kernel
    /// that reads and writes `2 * bytes` in total.
    pub fn copy_time(&self, bytes: usize, reps: usize) -> Res<f64> {
        let (a, b) = (DevBuf::new(bytes)?, DevBuf::new(bytes)?);
        best(reps, || {
            self.copy(&b, &a, bytes)?;
            self.sync()
        })
    }

    /// What the driver calls a small skeleton call is made of cost (`kernels --anatomy`):
    /// per call over `calls` calls (best of 5), one row per driver sequence. `add` names a
    /// kernel of the module with parameters `(const float*, const float*, float*, u64)`.
    pub fn anatomy(&self, add: &str, calls: usize) -> Res<Vec<(&'static str, f64)>> {
        let n = 1000usize;
        let (a, o) = (DevBuf::new(n * 4)?, DevBuf::new(n * 4)?);
        let mut host = vec![0u8; 8];
        let launch = || {
            let args = Args::default()
                .push(a.ptr)
                .push(a.ptr)
                .push(o.ptr)
                .push(n as u64);
            self.launch(add, (4, 1), (256, 1), args)
        };
        let ev = result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
            .map_err(drv("event"))?;
        let s = self.stream;
        let sync = || self.sync();
        let per =
            |f: &mut dyn FnMut() -> Res<()>, end: &dyn Fn() -> Res<()>| per_call(5, calls, f, end);
        let none = || Ok(());
        // SAFETY (every closure below): valid handles and buffers of the sizes copied; the
        // pinned slot and `host` outlive the synchronised copies.
        let rows = vec![
            (
                "cuLaunchKernel (async, 1000-element add)",
                per(&mut || launch(), &sync)?,
            ),
            (
                "cuLaunchKernel + cuEventRecord",
                per(
                    &mut || {
                        launch()?;
                        unsafe { result::event::record(ev, s) }.map_err(drv("record"))
                    },
                    &sync,
                )?,
            ),
            (
                "cuEventQuery (done event)",
                per(
                    &mut || {
                        let _ = unsafe { sys::cuEventQuery(ev) };
                        Ok(())
                    },
                    &sync,
                )?,
            ),
            (
                "cuStreamQuery (idle stream)",
                per(
                    &mut || {
                        let _ = unsafe { sys::cuStreamQuery(s) };
                        Ok(())
                    },
                    &sync,
                )?,
            ),
            (
                "cuCtxGetCurrent + cuCtxSetCurrent",
                per(
                    &mut || {
                        let c = result::ctx::get_current()
                            .map_err(drv("ctx"))?
                            .ok_or("no context")?;
                        unsafe { result::ctx::set_current(c) }.map_err(drv("ctx"))
                    },
                    &sync,
                )?,
            ),
            (
                "cuMemAllocAsync + cuMemFreeAsync (64 B)",
                per(
                    &mut || unsafe {
                        let p = result::malloc_async(s, 64).map_err(drv("alloc"))?;
                        result::free_async(p, s).map_err(drv("free"))
                    },
                    &sync,
                )?,
            ),
            (
                "cuMemsetD8Async (64 B)",
                per(
                    &mut || {
                        unsafe { result::memset_d8_async(o.ptr, 0, 64, s) }.map_err(drv("memset"))
                    },
                    &sync,
                )?,
            ),
            (
                "launch + cuStreamSynchronize",
                per(
                    &mut || {
                        launch()?;
                        sync()
                    },
                    &none,
                )?,
            ),
            (
                "launch + 8 B to pinned + cuStreamSynchronize",
                per(
                    &mut || {
                        launch()?;
                        unsafe { sys::cuMemcpyDtoHAsync_v2(self.pinned.cast(), o.ptr, 8, s) }
                            .result()
                            .map_err(drv("copy"))?;
                        sync()
                    },
                    &none,
                )?,
            ),
            (
                "launch + 8 B to pageable + cuStreamSynchronize",
                per(
                    &mut || {
                        launch()?;
                        unsafe { result::memcpy_dtoh_async(&mut host, o.ptr, s) }
                            .map_err(drv("copy"))?;
                        sync()
                    },
                    &none,
                )?,
            ),
        ];
        // SAFETY: not used afterwards.
        let _ = unsafe { result::event::destroy(ev) };
        Ok(rows)
    }
}

/// Best of `reps` host timings of `f` (which ends with a synchronisation); one untimed
/// warm-up call first.
pub fn best(reps: usize, mut f: impl FnMut() -> Res<()>) -> Res<f64> {
    f()?;
    let mut t = f64::INFINITY;
    for _ in 0..reps {
        let s = Instant::now();
        f()?;
        t = t.min(s.elapsed().as_secs_f64());
    }
    Ok(t)
}

/// Seconds per call of `call`: best of `reps` batches of `calls` back-to-back calls, each
/// batch ended by `end` (a synchronisation); one untimed batch first (compiles, uploads).
pub fn per_call(
    reps: usize,
    calls: usize,
    mut call: impl FnMut() -> Res<()>,
    end: impl Fn() -> Res<()>,
) -> Res<f64> {
    let t = best(reps, || {
        for _ in 0..calls {
            call()?;
        }
        end()
    })?;
    Ok(t / calls as f64)
}

#[userfn]
fn sync_add(a: f32, b: f32) -> f32 {
    a + b
}

/// Waits for everything skel enqueued on backend `b`.
pub fn skel_sync(b: Backend, probe: &Vector<f32>) -> Res<()> {
    match b {
        Backend::Cuda => skel::debug::synchronize().map_err(|e| e.to_string()),
        // One in-order queue: a Reduce, which reads its result back, waits for all of it.
        _ => Reduce::new(sync_add)
            .backend(b)
            .run(probe)
            .map(|_| ())
            .map_err(|e| e.to_string()),
    }
}
