//! A window with a GL context (glutin + winit): GLX or EGL on X11, EGL on Wayland.
#![allow(unsafe_code)]

use std::ffi::CStr;
use std::num::NonZeroU32;
use std::sync::Arc;

use glutin::config::{Config, ConfigTemplateBuilder, GlConfig};
use glutin::context::{ContextApi, ContextAttributesBuilder, GlProfile, PossiblyCurrentContext, Version};
use glutin::display::{Display, DisplayApiPreference};
use glutin::prelude::*;
use glutin::surface::{Surface, SwapInterval, WindowSurface};
use glutin_winit::GlWindow;
use winit::event_loop::ActiveEventLoop;
use winit::raw_window_handle::HasWindowHandle;
use winit::window::{Window, WindowAttributes};

use super::GL_VERSIONS;
use crate::error::{Error, Result};

/// A window and the GL context that draws into it.
pub struct WindowGl {
    // Field order is drop order: GL function table, surface, context, then the window itself.
    gl: Arc<glow::Context>,
    surface: Surface<WindowSurface>,
    context: PossiblyCurrentContext,
    window: Window,
    vsync: bool,
}

impl WindowGl {
    /// Opens a resizable window of `size` logical pixels with a GL 3.3+ core context. An invisible
    /// window (`visible: false`) serves to inspect the context the app would get.
    pub fn new(event_loop: &ActiveEventLoop, title: &str, size: [u32; 2], vsync: bool, visible: bool) -> Result<Self> {
        let attributes = WindowAttributes::default()
            .with_title(title)
            .with_visible(visible)
            .with_inner_size(winit::dpi::LogicalSize::new(size[0].max(1), size[1].max(1)))
            .with_resizable(true);
        let display = create_display(event_loop)?;
        let template = ConfigTemplateBuilder::new().with_alpha_size(8).with_depth_size(24).build();
        // SAFETY: plain template; the display is initialised.
        let configs: Vec<Config> = unsafe { display.find_configs(template) }
            .map_err(|e| Error::GlContext(format!("no GL config for a window: {e}")))?
            .collect();
        let config = pick_config(configs).ok_or_else(|| {
            Error::GlContext("no GL config with 8-bit alpha and 24-bit depth for a window".to_owned())
        })?;
        let window =
            glutin_winit::finalize_window(event_loop, attributes, &config).map_err(|e| Error::Window(e.to_string()))?;
        let handle = window.window_handle().map_err(|e| Error::Window(e.to_string()))?.as_raw();

        let mut not_current = None;
        let mut last_error = String::new();
        for (major, minor) in GL_VERSIONS {
            let context_attributes = ContextAttributesBuilder::new()
                .with_context_api(ContextApi::OpenGl(Some(Version::new(major, minor))))
                .with_profile(GlProfile::Core)
                .build(Some(handle));
            // SAFETY: the config comes from this display and the handle from a live window.
            match unsafe { display.create_context(&config, &context_attributes) } {
                Ok(context) => {
                    not_current = Some(context);
                    break;
                }
                Err(error) => last_error = error.to_string(),
            }
        }
        let not_current = not_current
            .ok_or_else(|| Error::GlContext(format!("no OpenGL 3.3+ core context for the window: {last_error}")))?;

        let physical = window.inner_size();
        let (width, height) = (
            NonZeroU32::new(physical.width.max(1)).unwrap_or(NonZeroU32::MIN),
            NonZeroU32::new(physical.height.max(1)).unwrap_or(NonZeroU32::MIN),
        );
        let surface_attributes =
            glutin::surface::SurfaceAttributesBuilder::<WindowSurface>::new().build(handle, width, height);
        // SAFETY: the window behind `handle` outlives the surface (field order above).
        let surface = unsafe { display.create_window_surface(&config, &surface_attributes) }
            .map_err(|e| Error::GlContext(format!("window surface: {e}")))?;
        let context = not_current.make_current(&surface).map_err(|e| Error::GlContext(format!("make current: {e}")))?;
        // SAFETY: the context is current on this thread; the loader returns its entry points.
        let gl = unsafe { glow::Context::from_loader_function_cstr(|name: &CStr| display.get_proc_address(name)) };
        let window_gl = Self { gl: Arc::new(gl), surface, context, window, vsync };
        window_gl.set_vsync(vsync)?;
        Ok(window_gl)
    }

    /// Makes the context current on this thread again, if it is not (another window's context
    /// was made current meanwhile: switching renderers).
    pub fn make_current(&self) -> Result<()> {
        if self.context.is_current() {
            return Ok(());
        }
        self.context.make_current(&self.surface).map_err(|e| Error::GlContext(format!("make current: {e}")))
    }

    /// The address of GL entry point `name` (for extensions glow does not bind).
    pub fn proc_address(&self, name: &CStr) -> *const std::ffi::c_void {
        glutin::display::GetGlDisplay::display(&self.context).get_proc_address(name)
    }

    /// The glow context.
    pub fn gl(&self) -> &Arc<glow::Context> {
        &self.gl
    }

    /// The winit window.
    pub fn window(&self) -> &Window {
        &self.window
    }

    /// Drawable size in physical pixels.
    pub fn size(&self) -> [u32; 2] {
        let size = self.window.inner_size();
        [size.width.max(1), size.height.max(1)]
    }

    /// Resizes the surface to the window (call on `Resized`).
    pub fn resize(&self) {
        self.window.resize_surface(&self.surface, &self.context);
    }

    /// Presents the frame.
    pub fn swap_buffers(&self) -> Result<()> {
        self.surface.swap_buffers(&self.context).map_err(|e| Error::GlContext(format!("swap buffers: {e}")))
    }

    /// Whether presentation waits for the display's vertical blank.
    pub fn vsync(&self) -> bool {
        self.vsync
    }

    /// Turns waiting for vertical blank on or off.
    pub fn set_vsync(&self, on: bool) -> Result<()> {
        let interval = if on { SwapInterval::Wait(NonZeroU32::MIN) } else { SwapInterval::DontWait };
        self.surface
            .set_swap_interval(&self.context, interval)
            .map_err(|e| Error::GlContext(format!("swap interval: {e}")))
    }

    /// Records the vsync setting after [`Self::set_vsync`] succeeded.
    pub fn set_vsync_flag(&mut self, on: bool) {
        self.vsync = on;
    }
}

impl Drop for WindowGl {
    fn drop(&mut self) {
        // See HeadlessGl: a context destroyed while current lingers and blocks the next one.
        if let Err(error) = self.context.make_not_current_in_place() {
            log::warn!("releasing the window's GL context: {error}");
        }
    }
}

/// The platform's GL display: GLX first on X11 (EGL if that fails), EGL on Wayland.
fn create_display(event_loop: &ActiveEventLoop) -> Result<Display> {
    use winit::raw_window_handle::{HasDisplayHandle, RawDisplayHandle};
    let handle = event_loop.display_handle().map_err(|e| Error::Window(e.to_string()))?.as_raw();
    let preference = match handle {
        RawDisplayHandle::Xlib(_) | RawDisplayHandle::Xcb(_) => {
            DisplayApiPreference::GlxThenEgl(Box::new(winit::platform::x11::register_xlib_error_hook))
        }
        _ => DisplayApiPreference::Egl,
    };
    // SAFETY: the handle is the event loop's live display connection, which outlives the app.
    unsafe { Display::new(handle, preference) }.map_err(|e| {
        Error::GlContext(format!(
            "GL display: {e}: no GL library serves this display; install Mesa's GL (apt-get install libgl1 \
             libglx-mesa0 libegl1 libegl-mesa0 libgl1-mesa-dri) or the NVIDIA driver, or run headless (--headless)"
        ))
    })
}

/// Prefers configs without multisampling (we draw points; MSAA costs fill rate), then with alpha.
fn pick_config(configs: Vec<Config>) -> Option<Config> {
    configs.into_iter().reduce(|best, candidate| {
        let better = (candidate.num_samples() < best.num_samples())
            || (candidate.num_samples() == best.num_samples() && candidate.alpha_size() > best.alpha_size());
        if better { candidate } else { best }
    })
}
