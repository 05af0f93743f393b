//! `interop-lab doctor`: what this machine has, what the app will do with it, and for each problem
//! the exact fix. Exit code 0 when interop works, 1 when the app will fall back, 2 when it cannot
//! render at all.

mod examine;
mod headless;
mod render;
mod window;

use clap::Args;
use serde::Serialize;

pub use self::examine::examine;
pub use self::headless::query_gl_devices;
pub use self::render::render;
pub use self::window::probe_window_context;

use self::headless::{check_headless, headless_in_child};
use crate::args::CudaArgs;
use crate::cuda::DeviceInfo;
use crate::cuda::driver;
use crate::gl::GlInfo;
use crate::gl::context::headless::EglDeviceInfo;
use crate::runtime::BackendRequest;
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
