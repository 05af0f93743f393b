//! The headless context's probe: made in this process on a thread of its own, or in a child
//! process when the window's context is probed too, and asked which CUDA devices run it.

use super::{GlCheck, HEADLESS};
use crate::cuda::interop::{self, GlEntryPoints};
use crate::gl::GlInfo;
use crate::gl::context::headless::HeadlessGl;

/// The headless context probed by a child process of this program (`doctor --headless-probe`).
/// Measured on an H200 machine under Xvfb with NVIDIA's GLX: in one process, cuGLGetDevices
/// answers for contexts of the first GL platform used (GLX or EGL) and refuses the other's with
/// CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, in either order, on any thread. The app uses one platform
/// per process, so doctor probes each in a process of its own to report what the app would get.
pub(super) fn headless_in_child(device: Option<i32>, flags: &[String]) -> GlCheck {
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

/// The headless context probed in this process, on a thread of its own (a thread keeps its
/// current context; the probe's must not stay current on the caller's).
pub(super) fn probe_headless_here(cuda_device: Option<i32>, cuda: bool) -> GlCheck {
    std::thread::Builder::new()
        .name("doctor headless GL".to_owned())
        .spawn(move || check_headless(cuda_device, cuda))
        .map_err(|e| e.to_string())
        .and_then(|probe| probe.join().map_err(|_| "the headless GL probe panicked".to_owned()))
        .unwrap_or_else(|error| GlCheck::failed(HEADLESS, error))
}

pub(super) fn check_headless(cuda_device: Option<i32>, cuda: bool) -> GlCheck {
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
