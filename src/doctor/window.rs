//! The window probe of `doctor`: opens an invisible window to see which GL context the app would
//! get there, and which CUDA devices run it.

use winit::application::ApplicationHandler;
use winit::event::WindowEvent;
use winit::event_loop::{ActiveEventLoop, EventLoop};
use winit::window::WindowId;

use super::GlCheck;
use crate::gl::context::window::WindowGl;
use crate::vk::device::{DeviceChoice, VulkanContext, WindowHandles};
use crate::vk::swapchain::Swapchain;
use crate::windowing::{catch_window_panics, winit_error_text};

/// Opens an invisible window to see which GL context the app would get there, and which CUDA
/// devices run it (`doctor` uses this). `query_cuda`: the driver is loaded and may be asked.
pub fn probe_window_context(query_cuda: bool) -> GlCheck {
    catch_window_panics(|| Ok(probe(query_cuda))).unwrap_or_else(|error| GlCheck::failed("window", error.to_string()))
}

fn probe(query_cuda: bool) -> GlCheck {
    struct Probe {
        query_cuda: bool,
        result: Option<GlCheck>,
    }
    impl ApplicationHandler for Probe {
        fn resumed(&mut self, event_loop: &ActiveEventLoop) {
            let kind = "window".to_owned();
            self.result = Some(match WindowGl::new(event_loop, "interop-lab doctor", [64, 64], false, false) {
                Ok(window) => {
                    let info = crate::gl::GlInfo::query(window.gl());
                    let (cuda_devices, error) = if self.query_cuda { super::query_gl_devices() } else { (None, None) };
                    GlCheck { kind, info: Some(info), cuda_devices, error, vulkan_window: None }
                }
                Err(error) => GlCheck::failed(&kind, error.to_string()),
            });
            if let Some(check) = self.result.as_mut() {
                check.vulkan_window = Some(probe_vulkan_window(event_loop));
            }
            event_loop.exit();
        }

        fn window_event(&mut self, _: &ActiveEventLoop, _: WindowId, _: WindowEvent) {}
    }
    let failed = |error: String| GlCheck::failed("window", error);
    let event_loop = match EventLoop::new() {
        Ok(event_loop) => event_loop,
        Err(error) => return failed(winit_error_text(&error)),
    };
    let mut probe = Probe { query_cuda, result: None };
    if let Err(error) = event_loop.run_app(&mut probe) {
        return failed(winit_error_text(&error));
    }
    probe.result.unwrap_or_else(|| failed("the event loop ended before the window was created".to_owned()))
}

/// Whether Vulkan can present to a window here: opens a second invisible window and makes a
/// device for it and a swapchain (what `--renderer vulkan` needs), then lets them go.
fn probe_vulkan_window(event_loop: &ActiveEventLoop) -> Result<String, String> {
    use winit::raw_window_handle::{HasDisplayHandle, HasWindowHandle};
    let attributes = winit::window::Window::default_attributes()
        .with_title("interop-lab doctor (Vulkan)")
        .with_inner_size(winit::dpi::PhysicalSize::new(64, 64))
        .with_visible(false);
    let window = event_loop.create_window(attributes).map_err(|e| e.to_string())?;
    let handles = WindowHandles {
        display: window.display_handle().map_err(|e| e.to_string())?.as_raw(),
        window: window.window_handle().map_err(|e| e.to_string())?.as_raw(),
    };
    let context = VulkanContext::with_window(&DeviceChoice::Any, handles).map_err(|e| e.to_string())?;
    let swapchain = Swapchain::new(&context, [64, 64], true).map_err(|e| e.to_string())?;
    let found =
        format!("{}, a swapchain of {}x{}", context.description().name, swapchain.size()[0], swapchain.size()[1]);
    drop(swapchain);
    drop(context);
    drop(window);
    Ok(found)
}
