//! A GL context with no window: EGL's device platform, made current without a surface.
//!
//! On NVIDIA it picks the EGL device whose `EGL_CUDA_DEVICE_NV` is the CUDA device the app
//! computes on, so interop works; without an NVIDIA GPU it finds Mesa's software device.
#![allow(unsafe_code)]

use std::ffi::CStr;
use std::sync::Arc;

use glutin::api::egl::context::PossiblyCurrentContext;
use glutin::api::egl::device::Device;
use glutin::api::egl::display::Display;
use glutin::config::{ConfigSurfaceTypes, ConfigTemplateBuilder};
use glutin::context::{ContextApi, ContextAttributesBuilder, GlProfile, Version};
use glutin::prelude::*;

use super::GL_VERSIONS;
use crate::error::{Error, Result};

/// `EGL_CUDA_DEVICE_NV` from `EGL_NV_device_cuda`: the CUDA ordinal of an EGL device.
const EGL_CUDA_DEVICE_NV: i32 = 0x323A;

/// One EGL device as the app describes it to the user.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EglDeviceInfo {
    /// Index in `eglQueryDevicesEXT` order.
    pub index: usize,
    /// Vendor string, when the driver reports one.
    pub vendor: Option<String>,
    /// Device name, when the driver reports one.
    pub name: Option<String>,
    /// The CUDA device ordinal, for NVIDIA devices (`EGL_NV_device_cuda`).
    pub cuda_device: Option<i32>,
    /// Mesa's software renderer (`EGL_MESA_device_software`).
    pub software: bool,
}

/// A current, surfaceless GL context on an EGL device.
pub struct HeadlessGl {
    // Field order is drop order: the glow wrapper, then the context, then the display.
    gl: Arc<glow::Context>,
    context: PossiblyCurrentContext,
    _display: Display,
    device: EglDeviceInfo,
}

impl HeadlessGl {
    /// Creates a context on the EGL device of CUDA device `cuda_device` when given and present,
    /// else on the first NVIDIA device, else on Mesa's software device, else on the first device.
    pub fn new(cuda_device: Option<i32>) -> Result<Self> {
        let devices: Vec<Device> = Device::query_devices()
            .map_err(|e| {
                Error::GlContext(format!(
                    "EGL devices can't be listed ({e}): install an EGL with EGL_EXT_device_enumeration \
                     (Mesa's libegl-mesa0 or the NVIDIA driver's libEGL_nvidia)"
                ))
            })?
            .collect();
        if devices.is_empty() {
            return Err(Error::GlContext(
                "no EGL device found: install the NVIDIA driver or Mesa (libegl-mesa0, libgl1-mesa-dri)".to_owned(),
            ));
        }
        let described: Vec<(EglDeviceInfo, &Device)> =
            devices.iter().enumerate().map(|(index, device)| (describe(index, device), device)).collect();
        let chosen = cuda_device
            .and_then(|ordinal| described.iter().find(|(info, _)| info.cuda_device == Some(ordinal)))
            .or_else(|| described.iter().find(|(info, _)| info.cuda_device.is_some()))
            .or_else(|| described.iter().find(|(info, _)| info.software))
            .or_else(|| described.first());
        let Some((info, device)) = chosen else {
            return Err(Error::GlContext("no usable EGL device".to_owned()));
        };
        Self::on_device(device, info.clone())
    }

    fn on_device(device: &Device, info: EglDeviceInfo) -> Result<Self> {
        // SAFETY: no native display is passed; the device comes from eglQueryDevicesEXT.
        let display = unsafe { Display::with_device(device, None) }
            .map_err(|e| Error::GlContext(format!("eglGetPlatformDisplay on {}: {e}", describe_short(&info))))?;
        let template = ConfigTemplateBuilder::new()
            .with_surface_type(ConfigSurfaceTypes::empty())
            .with_api(glutin::config::Api::OPENGL)
            .build();
        // SAFETY: the template is plain data; the display is initialised.
        let config = unsafe { display.find_configs(template) }
            .map_err(|e| Error::GlContext(format!("no EGL config on {}: {e}", describe_short(&info))))?
            .next()
            .ok_or_else(|| Error::GlContext(format!("no OpenGL EGL config on {}", describe_short(&info))))?;
        let mut last_error = None;
        for (major, minor) in GL_VERSIONS {
            let attributes = ContextAttributesBuilder::new()
                .with_context_api(ContextApi::OpenGl(Some(Version::new(major, minor))))
                .with_profile(GlProfile::Core)
                .build(None);
            // SAFETY: the config belongs to this display; no window handle.
            match unsafe { display.create_context(&config, &attributes) } {
                Ok(not_current) => {
                    let context = not_current
                        .make_current_surfaceless()
                        .map_err(|e| Error::GlContext(format!("eglMakeCurrent (surfaceless): {e}")))?;
                    // SAFETY: the context is current on this thread; the loader returns entry
                    // points of this display.
                    let gl = unsafe {
                        glow::Context::from_loader_function_cstr(|name: &CStr| display.get_proc_address(name))
                    };
                    return Ok(Self { gl: Arc::new(gl), context, _display: display, device: info });
                }
                Err(error) => last_error = Some(error),
            }
        }
        Err(Error::GlContext(format!(
            "no OpenGL 3.3+ core context on {}: {}",
            describe_short(&info),
            last_error.map(|e| e.to_string()).unwrap_or_default()
        )))
    }

    /// Makes the context current on this thread again, if it is not (another context was made
    /// current meanwhile: a second renderer, a driver that released it).
    pub fn make_current(&self) -> Result<()> {
        if self.context.is_current() {
            return Ok(());
        }
        self.context
            .make_current_surfaceless()
            .map_err(|e| Error::GlContext(format!("eglMakeCurrent (surfaceless): {e}")))
    }

    /// The address of GL entry point `name` (for extensions glow does not bind).
    pub fn proc_address(&self, name: &CStr) -> *const std::ffi::c_void {
        self._display.get_proc_address(name)
    }

    /// The glow context.
    pub fn gl(&self) -> &Arc<glow::Context> {
        &self.gl
    }

    /// The EGL device the context runs on.
    pub fn device(&self) -> &EglDeviceInfo {
        &self.device
    }
}

impl Drop for HeadlessGl {
    fn drop(&mut self) {
        // A context still current when destroyed stays alive in the driver and blocks the next
        // context made current on this thread; release it first.
        if let Err(error) = self.context.make_not_current_in_place() {
            log::warn!("releasing the headless GL context: {error}");
        }
    }
}

/// Every EGL device, described. Errors when EGL can't enumerate devices.
pub fn list_devices() -> Result<Vec<EglDeviceInfo>> {
    let devices = Device::query_devices().map_err(|e| Error::GlContext(format!("EGL devices can't be listed: {e}")))?;
    Ok(devices.enumerate().map(|(index, device)| describe(index, &device)).collect())
}

fn describe(index: usize, device: &Device) -> EglDeviceInfo {
    let extensions = device.extensions();
    EglDeviceInfo {
        index,
        vendor: device.vendor().map(str::to_owned),
        name: device.name().map(str::to_owned),
        cuda_device: if extensions.contains("EGL_NV_device_cuda") { cuda_ordinal(device) } else { None },
        software: extensions.contains("EGL_MESA_device_software"),
    }
}

fn describe_short(info: &EglDeviceInfo) -> String {
    format!("EGL device {} ({})", info.index, info.name.as_deref().or(info.vendor.as_deref()).unwrap_or("unnamed"))
}

/// `eglQueryDeviceAttribEXT(device, EGL_CUDA_DEVICE_NV)`.
fn cuda_ordinal(device: &Device) -> Option<i32> {
    // The EGL function table lives on a display; a display of this very device is cheap to get.
    // SAFETY: no native display; the device comes from eglQueryDevicesEXT.
    let display = unsafe { Display::with_device(device, None) }.ok()?;
    let mut value: isize = -1;
    // SAFETY: the device advertises EGL_NV_device_cuda (checked by the caller), which defines this
    // attribute; `value` is a valid EGLAttrib out-pointer.
    let ok = unsafe { display.egl().QueryDeviceAttribEXT(device.raw_device(), EGL_CUDA_DEVICE_NV, &mut value) };
    (ok != 0 && value >= 0).then_some(value as i32)
}
