//! What `doctor` finds: the driver, NVRTC and the devices, the GL contexts the app can make and
//! which CUDA device runs them, the kernels, Vulkan, and the transfer path all of that leads to.

use super::headless::probe_headless_here;
use super::{GlCheck, KernelCheck, Problem, Report, VulkanCheck};
use crate::cuda::module::{self, Compiler, Module};
use crate::cuda::{Context, DeviceInfo, device, driver};
use crate::gl::context::headless;
use crate::runtime::{self, CudaOptions};
use crate::transfer::TransferKind;

const ENVIRONMENT: &[&str] = &[
    "__NV_PRIME_RENDER_OFFLOAD",
    "__GLX_VENDOR_LIBRARY_NAME",
    "__EGL_VENDOR_LIBRARY_FILENAMES",
    "DRI_PRIME",
    "CUDA_VISIBLE_DEVICES",
    "LIBGL_ALWAYS_SOFTWARE",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XDG_SESSION_TYPE",
];

const PRIME_FIX: &str = "on a laptop with an integrated GPU, start the app on the NVIDIA GPU: \
     `__NV_PRIME_RENDER_OFFLOAD=1 __GLX_VENDOR_LIBRARY_NAME=nvidia interop-lab`; the app falls back to host copy meanwhile";

/// Examines the machine. `window_check` opens an invisible window when a display is present;
/// `headless_elsewhere`, when given, probes the headless context for a CUDA device in another
/// process (used when the window is probed too: see `headless::headless_in_child`).
pub fn examine(
    options: &CudaOptions,
    window_check: Option<&dyn Fn() -> GlCheck>,
    headless_elsewhere: Option<&dyn Fn(Option<i32>) -> GlCheck>,
) -> Report {
    let mut problems = Vec::new();
    let Cuda { driver, devices, nvrtc } = check_cuda(options, &mut problems);
    let egl_devices = headless::list_devices().unwrap_or_default();
    let preferred = devices.first().map(|d| options.device.unwrap_or(d.ordinal));
    let (window_gl, headless_gl) =
        check_gl_contexts(preferred, driver.is_some(), window_check, headless_elsewhere, &mut problems);

    // The context the app would draw with: the window's when there is a display, else headless.
    let app_gl = window_gl.as_ref().filter(|w| w.info.is_some()).unwrap_or(&headless_gl);
    let interop_device = check_interop_device(app_gl, driver.is_some() && !devices.is_empty(), &mut problems);

    let (kernels, kernel_cache) = check_kernels(driver, &devices, options, &mut problems);
    let vulkan = check_vulkan(&devices, preferred);

    let cuda_usable = driver.is_some() && !devices.is_empty() && nvrtc.is_ok();
    let (transfer, reason) = choose_transfer(cuda_usable, &kernels, interop_device, app_gl, options);
    let exit_code = exit_code(app_gl, transfer);
    Report {
        driver_cuda_version: driver.map(|d| format!("{}.{}", d.version.0, d.version.1)),
        nvrtc_version: nvrtc.ok().map(|v| format!("{}.{}", v.0, v.1)),
        devices,
        egl_devices,
        headless_gl,
        window_gl,
        kernels,
        vulkan,
        kernel_cache,
        session_type: session_type().to_owned(),
        environment: environment(),
        transfer,
        reason,
        problems,
        exit_code,
    }
}

/// A problem found and its fix, in the report.
fn problem(problems: &mut Vec<Problem>, problem: String, fix: &str) {
    problems.push(Problem { problem, fix: fix.to_owned() })
}

/// What the CUDA side offers: the driver, its devices and NVRTC.
struct Cuda {
    driver: Option<driver::Driver>,
    devices: Vec<DeviceInfo>,
    nvrtc: crate::error::Result<(i32, i32)>,
}

/// Loads the driver (unless the CPU backend was asked for), lists its devices and asks NVRTC's
/// version, with a problem for each that is missing or does not match.
fn check_cuda(options: &CudaOptions, problems: &mut Vec<Problem>) -> Cuda {
    let driver = if options.backend == runtime::BackendRequest::Cpu {
        None
    } else {
        match driver::load() {
            Ok(driver) => Some(driver),
            Err(error) => {
                let fix = if matches!(error, crate::error::Error::NoCudaDriver) {
                    "install the NVIDIA driver (it provides libcuda.so.1); until then the app runs on the CPU backend"
                } else {
                    "see the message; `nvidia-smi` should list the GPU"
                };
                problem(problems, error.to_string(), fix);
                None
            }
        }
    };
    let devices = if driver.is_some() { device::all_devices().unwrap_or_default() } else { Vec::new() };
    if driver.is_some() && devices.is_empty() {
        problem(
            problems,
            "the driver loads but reports no CUDA device".to_owned(),
            "check `nvidia-smi` and CUDA_VISIBLE_DEVICES",
        );
    }
    let nvrtc = driver::nvrtc_version();
    if let (Some(_), Err(error)) = (&driver, &nvrtc) {
        problem(
            problems,
            error.to_string(),
            "pip install nvidia-cuda-nvrtc==13.0.88, then add its nvidia/cu13/lib folder to LD_LIBRARY_PATH (or install the CUDA toolkit)",
        );
    }
    if let (Some(driver), Ok(nvrtc)) = (&driver, &nvrtc)
        && *nvrtc > driver.version
    {
        problem(
            problems,
            format!(
                "NVRTC {}.{} is newer than the driver's CUDA {}.{}: its kernels may not load",
                nvrtc.0, nvrtc.1, driver.version.0, driver.version.1
            ),
            "update the NVIDIA driver, or install the NVRTC of the driver's CUDA version (e.g. nvidia-cuda-nvrtc-cu12 for a 12.x driver)",
        );
    }
    Cuda { driver, devices, nvrtc }
}

/// The window's GL context (when a display is present) and the headless one, with a problem for
/// each that cannot be made or whose CUDA devices cannot be asked.
fn check_gl_contexts(
    preferred: Option<i32>,
    query_cuda: bool,
    window_check: Option<&dyn Fn() -> GlCheck>,
    headless_elsewhere: Option<&dyn Fn(Option<i32>) -> GlCheck>,
    problems: &mut Vec<Problem>,
) -> (Option<GlCheck>, GlCheck) {
    // With a display, the window's context is probed here and the headless one in a process of
    // its own (the driver answers cuGLGetDevices for one GL platform per process: see
    // `headless_in_child`); without one, the headless context on a thread of its own.
    let display_present = std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some();
    let window_gl = if display_present { window_check.map(|check| check()) } else { None };
    let headless_gl = match (window_gl.is_some(), headless_elsewhere) {
        (true, Some(probe)) => probe(preferred),
        _ => probe_headless_here(preferred, query_cuda),
    };
    match (&headless_gl.info, &headless_gl.error) {
        (None, Some(error)) => problem(
            problems,
            format!("no headless GL context: {error}"),
            "install Mesa's EGL and GL (apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri libgbm1) or the \
             NVIDIA driver's GL libraries",
        ),
        (Some(_), Some(error)) => problem(
            problems,
            format!("the headless GL context works, but asking CUDA which device runs it failed: {error}"),
            "the driver's GL and CUDA parts may not match: check that `nvidia-smi` and the GL vendor report the \
             same driver version",
        ),
        _ => {}
    }
    if let Some(GlCheck { error: Some(error), info, .. }) = &window_gl {
        let what = if info.is_some() {
            "the window's GL context works, but cuGLGetDevices failed"
        } else {
            "no GL context for a window"
        };
        problem(
            problems,
            format!("{what}: {error}"),
            "check the display (e.g. `glxinfo -B`); headless mode still works",
        );
    }
    (window_gl, headless_gl)
}

/// The CUDA device that runs `app_gl`, the context the app would draw with; a problem when CUDA
/// runs (`cuda_runs`) but not on the device that runs that context.
fn check_interop_device(app_gl: &GlCheck, cuda_runs: bool, problems: &mut Vec<Problem>) -> Option<i32> {
    let interop_device = app_gl.cuda_devices.as_ref().and_then(|devices| devices.first().copied());
    if cuda_runs && app_gl.info.is_some() && interop_device.is_none() {
        let renderer = app_gl.info.as_ref().map(|i| format!("{} / {}", i.vendor, i.renderer)).unwrap_or_default();
        let fix = if app_gl.kind.starts_with("window") {
            PRIME_FIX
        } else {
            "headless GL runs on a non-NVIDIA EGL device: make sure the NVIDIA EGL vendor library is installed (10_nvidia.json under /usr/share/glvnd/egl_vendor.d)"
        };
        problem(
            problems,
            format!(
                "the {} GL context runs on {renderer}, not on a CUDA device: GL interop is not possible",
                app_gl.kind
            ),
            fix,
        );
    }
    interop_device
}

/// The transfer path the app will take, and why.
fn choose_transfer(
    cuda_usable: bool,
    kernels: &[KernelCheck],
    interop_device: Option<i32>,
    app_gl: &GlCheck,
    options: &CudaOptions,
) -> (TransferKind, String) {
    if !cuda_usable {
        (TransferKind::Cpu, "CUDA is not usable here (see the problems below)".to_owned())
    } else if kernels.iter().any(|k| k.error.is_some()) {
        (TransferKind::Cpu, "the kernels do not compile or load on this device".to_owned())
    } else if interop_device.is_some() && options.transfer != runtime::TransferRequest::Copy {
        (
            TransferKind::Interop,
            format!("the {} GL context runs on CUDA device {}", app_gl.kind, interop_device.unwrap_or(0)),
        )
    } else {
        (TransferKind::HostCopy, "CUDA works but the GL context is not on a CUDA device".to_owned())
    }
}

/// 0: interop works; 1: the app falls back; 2: it cannot render.
fn exit_code(app_gl: &GlCheck, transfer: TransferKind) -> i32 {
    if app_gl.info.is_none() {
        2
    } else if transfer == TransferKind::Interop {
        0
    } else {
        1
    }
}

/// X11, Wayland or none.
fn session_type() -> &'static str {
    if std::env::var_os("WAYLAND_DISPLAY").is_some() {
        "wayland"
    } else if std::env::var_os("DISPLAY").is_some() {
        "x11"
    } else {
        "none (headless only)"
    }
}

/// The PRIME / vendor-selection environment variables that are set.
fn environment() -> Vec<(String, String)> {
    ENVIRONMENT.iter().filter_map(|name| std::env::var(name).ok().map(|value| ((*name).to_owned(), value))).collect()
}

/// Vulkan's devices, and the one that is CUDA device `cuda_device` (same UUID). Nothing here is a
/// problem for the app, which draws with GL; the verdict says what a Vulkan renderer would have.
fn check_vulkan(devices: &[DeviceInfo], cuda_device: Option<i32>) -> VulkanCheck {
    let probe = match crate::vk::probe() {
        Ok(probe) => probe,
        Err(error) => return VulkanCheck { probe: None, cuda_match: None, verdict: error.to_string() },
    };
    let cuda = cuda_device.and_then(|ordinal| devices.iter().find(|d| d.ordinal == ordinal));
    let cuda_match = cuda.and_then(|c| probe.devices.iter().position(|v| v.device_uuid == c.uuid));
    let verdict = match (cuda, cuda_match) {
        (_, _) if probe.devices.is_empty() => {
            "the Vulkan loader found no device: install a Vulkan driver (the NVIDIA driver's ICD, or \
             mesa-vulkan-drivers)"
                .to_owned()
        }
        (None, _) => format!("{} Vulkan device(s), and no CUDA device to share memory with", probe.devices.len()),
        (Some(c), None) => format!(
            "no Vulkan device is CUDA device {} ({}, UUID {}): install the NVIDIA driver's Vulkan ICD \
             (nvidia_icd.json), or point VK_DRIVER_FILES at it",
            c.ordinal, c.name, c.uuid
        ),
        (Some(c), Some(index)) => {
            let device = &probe.devices[index];
            match device.missing_for_cuda().as_slice() {
                [] => format!(
                    "Vulkan device {index} ({}) is CUDA device {} (same UUID) and has external memory, external \
                     semaphores and timeline semaphores: it can share memory with CUDA",
                    device.name, c.ordinal
                ),
                missing => format!(
                    "Vulkan device {index} ({}) is CUDA device {}, but lacks {}: update the NVIDIA driver",
                    device.name,
                    c.ordinal,
                    missing.join(", ")
                ),
            }
        }
    };
    let renderer = match probe.devices.iter().position(|d| d.dynamic_rendering && d.timeline_semaphore) {
        Some(index) => format!("; headless frames can be drawn with --renderer vulkan (device {index})"),
        None if probe.devices.is_empty() => String::new(),
        None => "; no device has Vulkan 1.3 dynamic rendering, so --renderer vulkan cannot draw here".to_owned(),
    };
    VulkanCheck { probe: Some(probe), cuda_match, verdict: verdict + &renderer }
}

fn check_kernels(
    driver: Option<driver::Driver>,
    devices: &[DeviceInfo],
    options: &CudaOptions,
    problems: &mut Vec<Problem>,
) -> (Vec<KernelCheck>, Option<String>) {
    let cache_dir = if options.no_cache { None } else { module::default_cache_dir() };
    let cache = cache_dir.as_ref().map(|d| d.display().to_string());
    let (Some(driver), Some(device)) = (driver, devices.first()) else {
        return (Vec::new(), cache);
    };
    if !driver::nvrtc_library_present() {
        return (Vec::new(), cache);
    }
    let ordinal = options.device.unwrap_or(device.ordinal);
    let context = match Context::new(driver, ordinal) {
        Ok(context) => context,
        Err(error) => {
            problems.push(Problem { problem: error.to_string(), fix: "see the message".to_owned() });
            return (Vec::new(), cache);
        }
    };
    let compiler = match Compiler::new(context.device().compute_capability, options.kernels_dir.clone(), cache_dir) {
        Ok(compiler) => compiler,
        Err(error) => {
            problems.push(Problem { problem: error.to_string(), fix: "install a matching NVRTC".to_owned() });
            return (Vec::new(), cache);
        }
    };
    let checks = crate::kernels::all()
        .iter()
        .map(|file| {
            let compiled = compiler.compile(file, &[]);
            let (target, cached, compile_ms) = match &compiled {
                Ok(c) => (Some(c.target.clone()), c.from_cache, c.compile_time.as_secs_f64() * 1e3),
                Err(_) => (None, false, 0.0),
            };
            let error = compiled.and_then(|c| Module::load(&context, &c)).err().map(|e| e.to_string());
            if let Some(error) = &error {
                problems.push(Problem {
                    problem: format!("{}: {error}", file.name),
                    fix: "fix the kernel (the log above has file:line), or match NVRTC to the driver".to_owned(),
                });
            }
            KernelCheck { file: file.name.to_owned(), target, cached, compile_ms, error }
        })
        .collect();
    (checks, cache)
}
