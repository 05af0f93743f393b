//! `interop-lab doctor`: what this machine has, what the app will do with it, and for each problem
//! the exact fix. Exit code 0 when interop works, 1 when the app will fall back, 2 when it cannot
//! render at all.

mod window;

use clap::Args;
use serde::Serialize;

pub use self::window::probe_window_context;

use crate::args::CudaArgs;
use crate::cuda::interop::{self, GlEntryPoints};
use crate::cuda::module::{self, Compiler, Module};
use crate::cuda::{Context, DeviceInfo, device, driver};
use crate::gl::GlInfo;
use crate::gl::context::headless::{self, EglDeviceInfo, HeadlessGl};
use crate::runtime::{self, BackendRequest, CudaOptions};
use crate::transfer::TransferKind;

#[derive(Args, Debug)]
/// `interop-lab doctor`.
pub struct DoctorArgs {
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Backend and device to examine.
    #[command(flatten)]
    pub cuda: CudaArgs,
    /// Probe only the headless context and print it as JSON (doctor runs itself with this so
    /// that the window's probe and the headless one are in processes of their own).
    #[arg(long, hide = true)]
    pub headless_probe: bool,
}

impl DoctorArgs {
    /// Examines the machine; returns the report as the flags ask (text or JSON) and the exit code.
    pub fn run(&self) -> (String, u8) {
        let options = self.cuda.options();
        let query_cuda = options.backend != BackendRequest::Cpu && crate::cuda::driver::driver_library_present();
        if self.headless_probe {
            let device = query_cuda.then(|| options.device.unwrap_or(0));
            let check = check_headless(device, query_cuda && driver::load().is_ok());
            return (serde_json::to_string(&check).map(|text| text + "\n").unwrap_or_default(), 0);
        }
        let window_check = move || probe_window_context(query_cuda);
        let headless_elsewhere = move |device: Option<i32>| headless_in_child(device, &options_for_child(self));
        let report = examine(&options, Some(&window_check), Some(&headless_elsewhere));
        let text = if self.json {
            match serde_json::to_string_pretty(&report) {
                Ok(text) => text + "\n",
                Err(error) => {
                    eprintln!("error: {error}");
                    String::new()
                }
            }
        } else {
            render(&report)
        };
        (text, report.exit_code.clamp(0, 255) as u8)
    }
}

/// The flags a child doctor gets to probe the same backend and device.
fn options_for_child(args: &DoctorArgs) -> Vec<String> {
    let mut flags = vec!["--backend".to_owned(), format!("{:?}", args.cuda.backend).to_lowercase()];
    if args.cuda.no_cache {
        flags.push("--no-cache".to_owned());
    }
    flags
}

/// The headless context probed by a child process of this program (`doctor --headless-probe`).
/// Measured on an H200 machine under Xvfb with NVIDIA's GLX: in one process, cuGLGetDevices
/// answers for contexts of the first GL platform used (GLX or EGL) and refuses the other's with
/// CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, in either order, on any thread. The app uses one platform
/// per process, so doctor probes each in a process of its own to report what the app would get.
fn headless_in_child(device: Option<i32>, flags: &[String]) -> GlCheck {
    let failed = |error: String| GlCheck::failed(HEADLESS, error);
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(error) => return failed(format!("the headless probe could not start: {error}")),
    };
    let mut command = std::process::Command::new(exe);
    command.args(["doctor", "--headless-probe"]).args(flags);
    if let Some(device) = device {
        command.args(["--device", &device.to_string()]);
    }
    match command.output() {
        Ok(output) => serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
            failed(format!(
                "the headless probe said nothing readable ({error}): {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ))
        }),
        Err(error) => failed(format!("the headless probe could not start: {error}")),
    }
}

/// One problem and what to do about it.
#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    /// What is wrong.
    pub problem: String,
    /// The fix.
    pub fix: String,
}

/// A GL context the app can make, and which CUDA devices it runs on.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct GlCheck {
    /// "headless (EGL device)" or "window (X11)", ...
    pub kind: String,
    /// Its strings, when it was created.
    pub info: Option<GlInfo>,
    /// `cuGLGetDevices` for it, when CUDA runs.
    pub cuda_devices: Option<Vec<i32>>,
    /// Why it could not be created or queried.
    pub error: Option<String>,
    /// The window only: whether Vulkan can present to such a window (`--renderer vulkan`), and
    /// what it found or why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vulkan_window: Option<Result<String, String>>,
}

impl GlCheck {
    /// A context of `kind` that could not be made or queried, and why.
    pub fn failed(kind: &str, error: String) -> Self {
        Self { kind: kind.to_owned(), info: None, cuda_devices: None, error: Some(error), vulkan_window: None }
    }
}

/// The headless context's kind, as the report names it.
const HEADLESS: &str = "headless (EGL device)";

/// The result of compiling and loading one kernel.
#[derive(Debug, Clone, Serialize)]
pub struct KernelCheck {
    /// Kernel file.
    pub file: String,
    /// NVRTC target.
    pub target: Option<String>,
    /// Came from the cache.
    pub cached: bool,
    /// NVRTC time, ms.
    pub compile_ms: f64,
    /// Failure, if any.
    pub error: Option<String>,
}

/// What Vulkan offers here, matched against the CUDA device by UUID.
#[derive(Debug, Clone, Serialize)]
pub struct VulkanCheck {
    /// The loader's devices, when a loader and a driver were found.
    pub probe: Option<crate::vk::VulkanProbe>,
    /// Index in `probe.devices` of the device whose UUID is the CUDA device's.
    pub cuda_match: Option<usize>,
    /// One sentence: what this means, and the fix when something is missing.
    pub verdict: String,
}

/// Everything `doctor` found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Driver's CUDA version, e.g. "13.0".
    pub driver_cuda_version: Option<String>,
    /// NVRTC's version.
    pub nvrtc_version: Option<String>,
    /// CUDA devices.
    pub devices: Vec<DeviceInfo>,
    /// EGL devices.
    pub egl_devices: Vec<EglDeviceInfo>,
    /// The headless context.
    pub headless_gl: GlCheck,
    /// The window's context, when a display is present.
    pub window_gl: Option<GlCheck>,
    /// Kernels compiled and loaded for the first device.
    pub kernels: Vec<KernelCheck>,
    /// Vulkan's devices and which one is the CUDA device (informational: the app draws with GL).
    pub vulkan: VulkanCheck,
    /// The kernel cache folder.
    pub kernel_cache: Option<String>,
    /// X11, Wayland or none.
    pub session_type: String,
    /// PRIME / vendor-selection environment variables that are set.
    pub environment: Vec<(String, String)>,
    /// The path the app will take (window if a display is present, else headless).
    pub transfer: TransferKind,
    /// Why.
    pub reason: String,
    /// Problems found, each with its fix.
    pub problems: Vec<Problem>,
    /// 0: interop works; 1: the app falls back; 2: it cannot render.
    pub exit_code: i32,
}

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
/// process (used when the window is probed too: see [`headless_in_child`]).
pub fn examine(
    options: &CudaOptions,
    window_check: Option<&dyn Fn() -> GlCheck>,
    headless_elsewhere: Option<&dyn Fn(Option<i32>) -> GlCheck>,
) -> Report {
    let mut problems = Vec::new();
    let problem = |problems: &mut Vec<Problem>, problem: String, fix: &str| {
        problems.push(Problem { problem, fix: fix.to_owned() })
    };

    let driver = if options.backend == runtime::BackendRequest::Cpu {
        None
    } else {
        match driver::load() {
            Ok(driver) => Some(driver),
            Err(error) => {
                let fix = if matches!(error, crate::Error::NoCudaDriver) {
                    "install the NVIDIA driver (it provides libcuda.so.1); until then the app runs on the CPU backend"
                } else {
                    "see the message; `nvidia-smi` should list the GPU"
                };
                problem(&mut problems, error.to_string(), fix);
                None
            }
        }
    };
    let devices = if driver.is_some() { device::all_devices().unwrap_or_default() } else { Vec::new() };
    if driver.is_some() && devices.is_empty() {
        problem(
            &mut problems,
            "the driver loads but reports no CUDA device".to_owned(),
            "check `nvidia-smi` and CUDA_VISIBLE_DEVICES",
        );
    }
    let nvrtc = driver::nvrtc_version();
    if let (Some(_), Err(error)) = (&driver, &nvrtc) {
        problem(
            &mut problems,
            error.to_string(),
            "pip install nvidia-cuda-nvrtc==13.0.88, then add its nvidia/cu13/lib folder to LD_LIBRARY_PATH (or install the CUDA toolkit)",
        );
    }
    if let (Some(driver), Ok(nvrtc)) = (&driver, &nvrtc)
        && *nvrtc > driver.version
    {
        problem(
            &mut problems,
            format!(
                "NVRTC {}.{} is newer than the driver's CUDA {}.{}: its kernels may not load",
                nvrtc.0, nvrtc.1, driver.version.0, driver.version.1
            ),
            "update the NVIDIA driver, or install the NVRTC of the driver's CUDA version (e.g. nvidia-cuda-nvrtc-cu12 for a 12.x driver)",
        );
    }

    // With a display, the window's context is probed here and the headless one in a process of
    // its own (the driver answers cuGLGetDevices for one GL platform per process: see
    // `headless_in_child`); without one, the headless context on a thread of its own.
    let display_present = std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some();
    let egl_devices = headless::list_devices().unwrap_or_default();
    let preferred = devices.first().map(|d| options.device.unwrap_or(d.ordinal));
    let query_cuda = driver.is_some();
    let window_gl = if display_present { window_check.map(|check| check()) } else { None };
    let headless_gl = match (window_gl.is_some(), headless_elsewhere) {
        (true, Some(probe)) => probe(preferred),
        _ => probe_headless_here(preferred, query_cuda),
    };
    match (&headless_gl.info, &headless_gl.error) {
        (None, Some(error)) => problem(
            &mut problems,
            format!("no headless GL context: {error}"),
            "install Mesa's EGL and GL (apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri libgbm1) or the \
             NVIDIA driver's GL libraries",
        ),
        (Some(_), Some(error)) => problem(
            &mut problems,
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
            &mut problems,
            format!("{what}: {error}"),
            "check the display (e.g. `glxinfo -B`); headless mode still works",
        );
    }

    // The context the app would draw with: the window's when there is a display, else headless.
    let app_gl = window_gl.as_ref().filter(|w| w.info.is_some()).unwrap_or(&headless_gl);
    let interop_device = app_gl.cuda_devices.as_ref().and_then(|devices| devices.first().copied());
    if driver.is_some() && !devices.is_empty() && app_gl.info.is_some() && interop_device.is_none() {
        let renderer = app_gl.info.as_ref().map(|i| format!("{} / {}", i.vendor, i.renderer)).unwrap_or_default();
        let fix = if app_gl.kind.starts_with("window") {
            PRIME_FIX
        } else {
            "headless GL runs on a non-NVIDIA EGL device: make sure the NVIDIA EGL vendor library is installed (10_nvidia.json under /usr/share/glvnd/egl_vendor.d)"
        };
        problem(
            &mut problems,
            format!(
                "the {} GL context runs on {renderer}, not on a CUDA device: GL interop is not possible",
                app_gl.kind
            ),
            fix,
        );
    }

    let (kernels, kernel_cache) = check_kernels(driver, &devices, options, &mut problems);
    let vulkan = check_vulkan(&devices, preferred);

    let (transfer, reason) = if driver.is_none() || devices.is_empty() || nvrtc.is_err() {
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
    };
    let exit_code = if app_gl.info.is_none() {
        2
    } else if transfer == TransferKind::Interop {
        0
    } else {
        1
    };
    let session_type = if std::env::var_os("WAYLAND_DISPLAY").is_some() {
        "wayland"
    } else if std::env::var_os("DISPLAY").is_some() {
        "x11"
    } else {
        "none (headless only)"
    };
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
        session_type: session_type.to_owned(),
        environment: ENVIRONMENT
            .iter()
            .filter_map(|name| std::env::var(name).ok().map(|value| ((*name).to_owned(), value)))
            .collect(),
        transfer,
        reason,
        problems,
        exit_code,
    }
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

/// The headless context probed in this process, on a thread of its own (a thread keeps its
/// current context; the probe's must not stay current on the caller's).
fn probe_headless_here(cuda_device: Option<i32>, cuda: bool) -> GlCheck {
    std::thread::Builder::new()
        .name("doctor headless GL".to_owned())
        .spawn(move || check_headless(cuda_device, cuda))
        .map_err(|e| e.to_string())
        .and_then(|probe| probe.join().map_err(|_| "the headless GL probe panicked".to_owned()))
        .unwrap_or_else(|error| GlCheck::failed(HEADLESS, error))
}

fn check_headless(cuda_device: Option<i32>, cuda: bool) -> GlCheck {
    match HeadlessGl::new(cuda_device) {
        Ok(context) => {
            let info = GlInfo::query(context.gl());
            let (cuda_devices, error) = if cuda { query_gl_devices() } else { (None, None) };
            GlCheck { kind: HEADLESS.to_owned(), info: Some(info), cuda_devices, error, vulkan_window: None }
        }
        Err(error) => GlCheck::failed(HEADLESS, error.to_string()),
    }
}

/// `cuGLGetDevices` for the current GL context (the driver must be loaded).
pub fn query_gl_devices() -> (Option<Vec<i32>>, Option<String>) {
    match GlEntryPoints::load().and_then(|entry_points| interop::gl_devices(&entry_points)) {
        Ok(devices) => (Some(devices), None),
        Err(error) => (None, Some(error.to_string())),
    }
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
    let checks = crate::kernels::ALL_KERNELS
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

/// The report as text for a terminal.
pub fn render(report: &Report) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let mark = |ok: bool| if ok { "ok " } else { "-- " };
    let _ = writeln!(out, "interop-lab doctor\n");
    let _ = writeln!(
        out,
        "{}CUDA driver: {}",
        mark(report.driver_cuda_version.is_some()),
        report
            .driver_cuda_version
            .as_deref()
            .map(|v| format!("supports CUDA {v}"))
            .unwrap_or_else(|| "not available".to_owned())
    );
    let _ = writeln!(
        out,
        "{}NVRTC: {}",
        mark(report.nvrtc_version.is_some()),
        report.nvrtc_version.as_deref().unwrap_or("not available")
    );
    for d in &report.devices {
        let _ = writeln!(
            out,
            "   device {}: {} (sm_{}{}), {} SMs, {:.1} GiB, {} MHz, PCI {}, UUID {}",
            d.ordinal,
            d.name,
            d.compute_capability.0,
            d.compute_capability.1,
            d.multiprocessors,
            d.total_memory_bytes as f64 / (1u64 << 30) as f64,
            d.clock_rate_khz / 1000,
            d.pci_bus_id,
            d.uuid
        );
    }
    for e in &report.egl_devices {
        let _ = writeln!(
            out,
            "   EGL device {}: {}{}{}",
            e.index,
            e.name.as_deref().or(e.vendor.as_deref()).unwrap_or("unnamed"),
            e.cuda_device.map(|c| format!(", CUDA device {c}")).unwrap_or_default(),
            if e.software { ", software" } else { "" }
        );
    }
    for check in std::iter::once(&report.headless_gl).chain(report.window_gl.as_ref()) {
        match &check.info {
            Some(info) => {
                let _ = writeln!(out, "ok GL {}: {} / {} / {}", check.kind, info.vendor, info.renderer, info.version);
                let missing: Vec<&str> = crate::gl::SHARING_EXTENSIONS
                    .iter()
                    .copied()
                    .filter(|e| !info.sharing.iter().any(|s| s == e))
                    .collect();
                let _ = match missing.as_slice() {
                    [] => writeln!(
                        out,
                        "     imports memory and semaphores (GL_EXT_memory_object_fd, GL_EXT_semaphore_fd)"
                    ),
                    _ => writeln!(
                        out,
                        "     lacks {}: --transfer external{} cannot run on it",
                        missing.join(", "),
                        if missing.iter().any(|e| e.contains("memory_object")) { "" } else { "-semaphores" }
                    ),
                };
                match &check.cuda_devices {
                    Some(devices) if !devices.is_empty() => {
                        let _ = writeln!(out, "ok   cuGLGetDevices: CUDA device(s) {devices:?} own this context");
                    }
                    Some(_) => {
                        let _ = writeln!(out, "--   cuGLGetDevices: no CUDA device owns this context");
                    }
                    None => {}
                }
            }
            None => {
                let _ = writeln!(out, "-- GL {}: {}", check.kind, check.error.as_deref().unwrap_or("not created"));
            }
        }
        match &check.vulkan_window {
            Some(Ok(found)) => {
                let _ = writeln!(out, "ok Vulkan {}: presents ({found}): --renderer vulkan opens here", check.kind);
            }
            Some(Err(why)) => {
                let _ = writeln!(out, "-- Vulkan {}: {why}; --renderer vulkan draws with OpenGL here", check.kind);
            }
            None => {}
        }
    }
    for k in &report.kernels {
        let _ = writeln!(
            out,
            "{}kernel {}: {}",
            mark(k.error.is_none()),
            k.file,
            match (&k.error, &k.target) {
                (Some(e), _) => e.clone(),
                (None, Some(t)) if k.cached => format!("{t}, from the cache"),
                (None, Some(t)) => format!("{t}, compiled in {:.0} ms", k.compile_ms),
                (None, None) => String::new(),
            }
        );
    }
    if let Some(probe) = &report.vulkan.probe {
        let _ = writeln!(out, "   Vulkan loader {}", probe.instance_version);
        for (index, v) in probe.devices.iter().enumerate() {
            let features: Vec<&str> = [
                (v.external_memory_fd, "external memory fd"),
                (v.external_semaphore_fd, "external semaphore fd"),
                (v.timeline_semaphore, "timeline semaphores"),
                (v.dynamic_rendering, "dynamic rendering (--renderer vulkan)"),
            ]
            .iter()
            .filter_map(|(has, name)| has.then_some(*name))
            .collect();
            let _ = writeln!(
                out,
                "   Vulkan device {index}: {} ({}, Vulkan {}, {}), UUID {}; {}",
                v.name,
                v.kind,
                v.api_version,
                v.driver,
                v.device_uuid,
                if features.is_empty() { "no sharing extensions".to_owned() } else { features.join(", ") }
            );
        }
    }
    let _ = writeln!(out, "{}Vulkan: {}", mark(report.vulkan.cuda_match.is_some()), report.vulkan.verdict);
    if let Some(cache) = &report.kernel_cache {
        let _ = writeln!(out, "   kernel cache: {cache}");
    }
    let _ = writeln!(out, "   session: {}", report.session_type);
    for (name, value) in &report.environment {
        let _ = writeln!(out, "   {name}={value}");
    }
    let _ = writeln!(out, "\ntransfer path: {} ({})", report.transfer.label(), report.reason);
    if report.problems.is_empty() {
        let _ = writeln!(out, "no problems found");
    }
    for p in &report.problems {
        let _ = writeln!(out, "\nproblem: {}\n    fix: {}", p.problem, p.fix);
    }
    let _ = writeln!(
        out,
        "\nexit code {}: {}",
        report.exit_code,
        match report.exit_code {
            0 => "GL interop works",
            1 => "the app runs, on a fallback path",
            _ => "the app cannot render",
        }
    );
    out
}
