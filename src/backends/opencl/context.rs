//! Platform, device and queue choice: one OpenCL device per process, probed once.
//!
//! Default: the first GPU over all platforms, else the first device of any kind.
//! `SKEL_OPENCL_DEVICE=<index or name substring>` overrides (the index counts devices over
//! all platforms in order; the substring is matched case-insensitively against
//! "platform name / device name").

use std::sync::OnceLock;

use ocl::core as cl;

use super::driver;
use crate::containers::Location;
use crate::{Error, Result};

const CL_DEVICE_TYPE: u32 = 0x1000;
const CL_DEVICE_MAX_COMPUTE_UNITS: u32 = 0x1002;
const CL_DEVICE_MAX_WORK_GROUP_SIZE: u32 = 0x1004;
const CL_DEVICE_LOCAL_MEM_SIZE: u32 = 0x1023;
const CL_DEVICE_NAME: u32 = 0x102B;
const CL_DEVICE_EXTENSIONS: u32 = 0x1030;
const CL_DEVICE_SINGLE_FP_CONFIG: u32 = 0x101B;
const CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT: u64 = 1 << 7;
const CL_PLATFORM_NAME: u32 = 0x0902;
const CL_DEVICE_TYPE_GPU: u64 = 1 << 2;

/// The coherence location of the OpenCL device (distinct from CUDA's device numbers).
pub(crate) const LOCATION_ID: u32 = 0x0C10;

/// The chosen device, its context and its one in-order queue.
pub(crate) struct Ctx {
    pub(crate) device: cl::DeviceId,
    pub(crate) context: cl::Context,
    pub(crate) queue: cl::CommandQueue,
    /// "platform / device".
    pub(crate) name: String,
    /// Work-group size the kernels are built for (a power of two).
    pub(crate) wg: usize,
    pub(crate) compute_units: usize,
    pub(crate) local_mem: u64,
    pub(crate) fp64: bool,
    pub(crate) gpu: bool,
    /// Options every program is built with. Single-precision `/` and `sqrt` are correctly
    /// rounded where the device can (NVIDIA's default is 2.5 ulp), so results match Rust's.
    pub(crate) build_options: &'static str,
}

impl Ctx {
    /// Where the device copies of containers live in their coherence state.
    pub(crate) fn location(&self) -> Location {
        Location::Device(LOCATION_ID)
    }
}

struct Candidate {
    device: cl::DeviceId,
    name: String,
    gpu: bool,
}

fn info_raw(device: cl::DeviceId, what: u32) -> Result<Vec<u8>> {
    cl::get_device_info_raw(device, what).map_err(driver)
}

fn info_u64(device: cl::DeviceId, what: u32) -> Result<u64> {
    let raw = info_raw(device, what)?;
    let mut b = [0u8; 8];
    let n = raw.len().min(8);
    b[..n].copy_from_slice(&raw[..n]);
    Ok(u64::from_le_bytes(b))
}

fn text(raw: Vec<u8>) -> String {
    String::from_utf8_lossy(&raw)
        .trim_end_matches('\0')
        .trim()
        .to_string()
}

fn platform_name(p: cl::PlatformId) -> String {
    let mut size = 0usize;
    // SAFETY: a size query with a null value pointer, as clGetPlatformInfo documents.
    let rc = unsafe {
        cl::ffi::clGetPlatformInfo(
            p.as_ptr(),
            CL_PLATFORM_NAME,
            0,
            std::ptr::null_mut(),
            &mut size,
        )
    };
    if rc != 0 || size == 0 {
        return String::from("?");
    }
    let mut buf = vec![0u8; size];
    // SAFETY: `buf` holds `size` bytes, the size the driver asked for.
    let rc = unsafe {
        cl::ffi::clGetPlatformInfo(
            p.as_ptr(),
            CL_PLATFORM_NAME,
            size,
            buf.as_mut_ptr().cast(),
            std::ptr::null_mut(),
        )
    };
    if rc != 0 {
        return String::from("?");
    }
    text(buf)
}

fn candidates() -> Result<Vec<Candidate>> {
    let platforms = cl::get_platform_ids().map_err(driver)?;
    let mut out = Vec::new();
    for p in platforms {
        let pname = platform_name(p);
        let Ok(devices) = cl::get_device_ids(p, Some(cl::DeviceType::ALL), None) else {
            continue;
        };
        for d in devices {
            let dname = info_raw(d, CL_DEVICE_NAME).map(text).unwrap_or_default();
            let gpu = info_u64(d, CL_DEVICE_TYPE).unwrap_or(0) & CL_DEVICE_TYPE_GPU != 0;
            out.push(Candidate {
                device: d,
                name: format!("{pname} / {dname}"),
                gpu,
            });
        }
    }
    Ok(out)
}

/// The index of the device to use among candidates `(name, is_gpu)`: `wanted` (the value
/// of `SKEL_OPENCL_DEVICE`) as an index or a case-insensitive name substring, else the
/// first GPU, else the first device.
fn choose(cands: &[(&str, bool)], wanted: Option<&str>) -> Result<usize> {
    if let Some(w) = wanted.map(str::trim).filter(|w| !w.is_empty()) {
        let pick = match w.parse::<usize>() {
            Ok(i) => (i < cands.len()).then_some(i),
            Err(_) => {
                let lw = w.to_lowercase();
                cands
                    .iter()
                    .position(|(name, _)| name.to_lowercase().contains(&lw))
            }
        };
        return pick.ok_or_else(|| {
            let listed = cands
                .iter()
                .enumerate()
                .map(|(i, (name, _))| format!("{i}: {name}"))
                .collect::<Vec<_>>()
                .join(", ");
            Error::Driver(
                format!("SKEL_OPENCL_DEVICE={w} matches no OpenCL device (devices: {listed})")
                    .into(),
            )
        });
    }
    if cands.is_empty() {
        return Err(Error::Driver("no OpenCL device found".into()));
    }
    Ok(cands.iter().position(|&(_, gpu)| gpu).unwrap_or(0))
}

fn open() -> Result<Ctx> {
    let mut cands = candidates()?;
    let named: Vec<(&str, bool)> = cands.iter().map(|c| (c.name.as_str(), c.gpu)).collect();
    let wanted = crate::config::OPENCL_DEVICE.fix()?;
    let i = choose(&named, wanted.as_deref())?;
    let chosen = cands.swap_remove(i);
    let device = chosen.device;
    let context = cl::create_context(None, &[device], None, None).map_err(driver)?;
    let queue = cl::create_command_queue(&context, device, None).map_err(driver)?;
    let max_wg = info_u64(device, CL_DEVICE_MAX_WORK_GROUP_SIZE)? as usize;
    let mut wg = 256usize;
    while wg > max_wg.max(1) {
        wg /= 2;
    }
    let local_mem = info_u64(device, CL_DEVICE_LOCAL_MEM_SIZE)?;
    let compute_units = (info_u64(device, CL_DEVICE_MAX_COMPUTE_UNITS)? as usize).max(1);
    let ext = info_raw(device, CL_DEVICE_EXTENSIONS)
        .map(text)
        .unwrap_or_default();
    Ok(Ctx {
        device,
        context,
        queue,
        name: chosen.name,
        wg,
        compute_units,
        local_mem,
        fp64: ext.contains("cl_khr_fp64"),
        gpu: chosen.gpu,
        build_options: if info_u64(device, CL_DEVICE_SINGLE_FP_CONFIG)?
            & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT
            != 0
        {
            "-cl-fp32-correctly-rounded-divide-sqrt"
        } else {
            ""
        },
    })
}

static CTX: OnceLock<std::result::Result<Ctx, String>> = OnceLock::new();

/// The process's OpenCL device, opened on first use (the probe result is cached).
pub(crate) fn ctx() -> Result<&'static Ctx> {
    CTX.get_or_init(|| open().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|reason| Error::BackendUnavailable {
            backend: crate::Backend::OpenCl,
            reason: reason.clone(),
        })
}

/// `Ok` if an OpenCL device can be used (for `Backend::check`).
pub(crate) fn probe() -> std::result::Result<(), String> {
    ctx().map(|_| ()).map_err(|e| match e {
        Error::BackendUnavailable { reason, .. } => reason,
        other => other.to_string(),
    })
}

/// Whether the chosen device is a GPU (false if there is none).
pub(crate) fn is_gpu() -> bool {
    ctx().map(|c| c.gpu).unwrap_or(false)
}

/// Whether the device [`ctx`] opens (or opened) is a GPU, found without opening it where
/// it is not open yet (opening a CPU device such as PoCL starts its worker threads).
pub(crate) fn device_is_gpu() -> bool {
    if let Some(opened) = CTX.get() {
        return opened.as_ref().is_ok_and(|c| c.gpu);
    }
    let Ok(cands) = candidates() else {
        return false;
    };
    let named: Vec<(&str, bool)> = cands.iter().map(|c| (c.name.as_str(), c.gpu)).collect();
    let wanted = crate::config::OPENCL_DEVICE.value();
    choose(&named, wanted.as_deref()).is_ok_and(|i| cands[i].gpu)
}

/// Whether the device is open (something used the OpenCL backend).
pub(crate) fn opened() -> bool {
    opened_ctx().is_some()
}

/// The device's context where something opened it already (never opens it).
pub(crate) fn opened_ctx() -> Option<&'static Ctx> {
    CTX.get()?.as_ref().ok()
}

#[cfg(test)]
mod tests {
    use super::choose;
    use crate::Error;

    const DEVICES: &[(&str, bool)] = &[
        ("Portable Computing Language / cpu-haswell", false),
        ("NVIDIA CUDA / NVIDIA H200", true),
        ("NVIDIA CUDA / NVIDIA A100", true),
    ];

    fn refused(wanted: &str) -> String {
        match choose(DEVICES, Some(wanted)) {
            Err(Error::Driver(msg)) => msg.to_string(),
            other => panic!("{wanted}: expected a driver error, got {other:?}"),
        }
    }

    #[test]
    fn default_is_the_first_gpu_else_the_first_device() {
        assert_eq!(choose(DEVICES, None).unwrap(), 1);
        assert_eq!(choose(DEVICES, Some("  ")).unwrap(), 1);
        assert_eq!(choose(&DEVICES[..1], None).unwrap(), 0);
        assert!(matches!(choose(&[], None), Err(Error::Driver(_))));
    }

    #[test]
    fn index_or_case_insensitive_substring() {
        assert_eq!(choose(DEVICES, Some("0")).unwrap(), 0);
        assert_eq!(choose(DEVICES, Some(" 2 ")).unwrap(), 2);
        assert_eq!(choose(DEVICES, Some("a100")).unwrap(), 2);
        assert_eq!(choose(DEVICES, Some("nvidia")).unwrap(), 1);
        assert_eq!(choose(DEVICES, Some("portable")).unwrap(), 0);
    }

    #[test]
    fn no_match_lists_the_devices() {
        for wanted in ["3", "99", "radeon"] {
            let msg = refused(wanted);
            assert!(
                msg.contains(&format!("SKEL_OPENCL_DEVICE={wanted}")),
                "{msg}"
            );
            for (i, (name, _)) in DEVICES.iter().enumerate() {
                assert!(msg.contains(&format!("{i}: {name}")), "{msg}");
            }
        }
        assert!(matches!(choose(&[], Some("0")), Err(Error::Driver(_))));
    }
}
