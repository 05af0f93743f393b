//! The window probe of `doctor`: opens an invisible window to see which GL context the app would
//! get there, and which CUDA devices run it.

use winit::application::ApplicationHandler;
use winit::event::WindowEvent;
use winit::event_loop::{ActiveEventLoop, EventLoop};
use winit::window::WindowId;

use super::GlCheck;
use crate::gl::context::window::{WindowGl, catch_window_panics, winit_error_text};

/// Opens an invisible window to see which GL context the app would get there, and which CUDA
/// devices run it (`doctor` uses this). `query_cuda`: the driver is loaded and may be asked.
pub fn probe_window_context(query_cuda: bool) -> GlCheck {
    let failed =
        |error: String| GlCheck { kind: "window".to_owned(), info: None, cuda_devices: None, error: Some(error) };
    catch_window_panics(|| Ok(probe(query_cuda))).unwrap_or_else(|error| failed(error.to_string()))
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
                    GlCheck { kind, info: Some(info), cuda_devices, error }
                }
                Err(error) => GlCheck { kind, info: None, cuda_devices: None, error: Some(error.to_string()) },
            });
            event_loop.exit();
        }

        fn window_event(&mut self, _: &ActiveEventLoop, _: WindowId, _: WindowEvent) {}
    }
    let failed =
        |error: String| GlCheck { kind: "window".to_owned(), info: None, cuda_devices: None, error: Some(error) };
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
