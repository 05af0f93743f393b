//! The Vulkan renderer: a device (on the CUDA device when CUDA runs), an offscreen target every
//! frame is drawn into — copied into a window's swapchain image when there is a window — the
//! scenes ([`VulkanScenes`]), egui's Vulkan painter, and timestamps around each frame's commands.

use winit::raw_window_handle::{HasDisplayHandle, HasWindowHandle};
use winit::window::Window;

use super::{Canvas, LiveObjects, PanelPaint, Renderer, RendererInfo};
use crate::anatomy::Calibration;
use crate::error::{Error, Result};
use crate::graphics::{Graphics, GraphicsApi};
use crate::runtime::{self, CudaOptions, Selection};
use crate::scene::vulkan::VulkanScenes;
use crate::scene::{Scene, SceneDrawer, View};
use crate::stats::{Lane, LateGpuTimes, Stage, StageTimes};
use crate::vk::device::WindowHandles;
use crate::vk::frame::VulkanGraphics;
use crate::vk::panel::PanelPainter;
use crate::vk::swapchain::{Acquired, Swapchain};

/// The colour the target is cleared to.
const CLEAR: [f32; 4] = [0.0, 0.0, 0.0, 1.0];

/// A window and its swapchain.
struct Presenting {
    swapchain: Swapchain,
    /// The image acquired for the frame being drawn.
    acquired: Option<Acquired>,
    /// The swapchain and the target must be made again (a resize, vsync switched, out of date).
    resized: bool,
    /// The window size they were last made for.
    made_for: [u32; 2],
}

/// Draws with Vulkan.
pub struct VulkanRenderer {
    // Field order is drop order: what draws goes before the swapchain, the swapchain before the
    // device, the device before the window (`Drop` releases the scenes first).
    scenes: VulkanScenes,
    painter: Option<PanelPainter>,
    presenting: Option<Presenting>,
    vulkan: VulkanGraphics,
    info: RendererInfo,
    window: Option<Window>,
}

impl VulkanRenderer {
    /// Opens a Vulkan device drawing into `target`, and chooses what CUDA shares with it: Vulkan's
    /// own path when the device is the CUDA device. A window Vulkan cannot present to fails here,
    /// with the reason, so the caller can go on with OpenGL.
    pub fn open(target: Canvas<'_>, options: &CudaOptions) -> Result<(Self, Selection)> {
        let (vulkan, selection, window, presenting) = match target {
            Canvas::Window { event_loop, title, size, vsync } => {
                let attributes = Window::default_attributes()
                    .with_title(title)
                    .with_inner_size(winit::dpi::LogicalSize::new(size[0].max(1), size[1].max(1)));
                let window = event_loop.create_window(attributes).map_err(|e| Error::Window(e.to_string()))?;
                let handles = WindowHandles {
                    display: window.display_handle().map_err(|e| Error::Window(e.to_string()))?.as_raw(),
                    window: window.window_handle().map_err(|e| Error::Window(e.to_string()))?.as_raw(),
                };
                let size = physical_size(&window);
                let (vulkan, selection) = runtime::open_vulkan(options, size, Some(handles))?;
                let swapchain = Swapchain::new(vulkan.context(), size, vsync)?;
                let presenting = Presenting { swapchain, acquired: None, resized: false, made_for: size };
                (vulkan, selection, Some(window), Some(presenting))
            }
            Canvas::Offscreen { size } => {
                let (vulkan, selection) = runtime::open_vulkan(options, size, None)?;
                (vulkan, selection, None, None)
            }
        };
        let device = vulkan.context().description();
        let info = RendererInfo {
            api: GraphicsApi::Vulkan,
            device: device.name.clone(),
            vendor: device.driver.clone(),
            version: format!("Vulkan {}", device.api_version),
            sharing: [
                ("VK_KHR_external_memory_fd", device.external_memory_fd),
                ("VK_KHR_external_semaphore_fd", device.external_semaphore_fd),
                ("timeline semaphores", device.timeline_semaphore),
            ]
            .into_iter()
            .filter(|(_, offered)| *offered)
            .map(|(name, _)| name.to_owned())
            .collect(),
            window: window.is_some(),
        };
        let renderer = Self { scenes: VulkanScenes::new(), painter: None, presenting, vulkan, info, window };
        Ok((renderer, selection))
    }
}

impl Renderer for VulkanRenderer {
    fn info(&self) -> &RendererInfo {
        &self.info
    }

    fn graphics(&self) -> Graphics<'_> {
        Graphics::Vulkan(&self.vulkan)
    }

    fn window(&self) -> Option<&Window> {
        self.window.as_ref()
    }

    fn size(&self) -> [u32; 2] {
        self.vulkan.target().size()
    }

    fn begin_frame(&mut self, frame: u64) -> Result<bool> {
        if let (Some(window), Some(presenting)) = (&self.window, self.presenting.as_mut()) {
            let size = physical_size(window);
            if size[0] == 0 || size[1] == 0 {
                return Ok(false); // minimised: nothing to draw into
            }
            if presenting.resized || size != presenting.made_for {
                (presenting.resized, presenting.made_for) = (false, size);
                self.vulkan.resize(size)?;
                presenting.swapchain.recreate(size)?;
            }
            match presenting.swapchain.acquire()? {
                Some(acquired) => presenting.acquired = Some(acquired),
                None => {
                    presenting.resized = true; // out of date: made again next frame
                    return Ok(false);
                }
            }
        }
        self.vulkan.begin_frame(CLEAR, frame)?;
        Ok(true)
    }

    fn prepare(&mut self, scene: &Scene<'_>) -> Result<()> {
        self.scenes.prepare(Graphics::Vulkan(&self.vulkan), scene)
    }

    fn draw(&mut self, scene: &Scene<'_>, view: &View) -> Result<()> {
        self.scenes.draw(Graphics::Vulkan(&self.vulkan), scene, view)
    }

    fn paint_panel(&mut self, panel: PanelPaint<'_>) -> Result<()> {
        if self.painter.is_none() {
            self.painter = Some(PanelPainter::new(&self.vulkan, crate::vk::frame::FRAMES_IN_FLIGHT)?);
        }
        let Some(painter) = self.painter.as_mut() else { return Ok(()) };
        painter.update_textures(&self.vulkan, panel.textures)?;
        painter.paint(&self.vulkan, panel.pixels_per_point, panel.primitives)
    }

    fn end_frame(&mut self, capture: bool) -> Result<Option<Vec<u8>>> {
        match self.presenting.as_mut() {
            Some(presenting) => {
                let acquired = presenting.acquired.take().ok_or_else(|| {
                    Error::InvalidInput("a Vulkan frame ended that had no swapchain image".to_owned())
                })?;
                if !self.vulkan.end_frame_presenting(&mut presenting.swapchain, &acquired)? {
                    presenting.resized = true;
                }
            }
            None => self.vulkan.end_frame()?,
        }
        capture.then(|| self.vulkan.read_rgba()).transpose()
    }

    fn gpu_times(&mut self, all: bool) -> Result<Vec<LateGpuTimes>> {
        // The timestamps bracket the frame's commands: the scene and the panel together.
        Ok(self
            .vulkan
            .take_gpu_times(all)?
            .into_iter()
            .map(|time| {
                let mut times = StageTimes::default();
                match time.start_us {
                    Some(start_us) => times.set_gpu_at(Stage::Draw, Lane::Graphics, start_us, time.microseconds),
                    None => times.set_gpu(Stage::Draw, time.microseconds),
                }
                LateGpuTimes { frame: time.frame, times }
            })
            .collect())
    }

    fn calibration(&self) -> Calibration {
        let (error_us, note) = match self.vulkan.gpu_clock() {
            Some(reading) => (
                Some(reading.error_us),
                "vkCmdWriteTimestamp around each frame's commands; vkGetCalibratedTimestamps (device domain) read \
                 between two host clock reads, every 2 s"
                    .to_owned(),
            ),
            None => (
                None,
                format!(
                    "{} offers no VK_KHR_calibrated_timestamps or VK_EXT_calibrated_timestamps (or writes no \
                     timestamps): GPU times without positions",
                    self.info.device
                ),
            ),
        };
        Calibration { lane: Lane::Graphics, name: "Vulkan".to_owned(), error_us, note }
    }

    fn resized(&mut self) {
        if let Some(presenting) = self.presenting.as_mut() {
            presenting.resized = true;
        }
    }

    fn vsync(&self) -> Option<bool> {
        self.presenting.as_ref().map(|presenting| presenting.swapchain.vsync())
    }

    fn set_vsync(&mut self, on: bool) -> Result<()> {
        let presenting = self
            .presenting
            .as_mut()
            .ok_or_else(|| Error::Unavailable("an offscreen run presents nothing: no vsync".to_owned()))?;
        presenting.swapchain.set_vsync(on);
        presenting.resized = true; // the swapchain is made again with the new present mode
        Ok(())
    }

    fn read_frame(&mut self) -> Result<Vec<u8>> {
        self.vulkan.read_rgba()
    }

    fn finish(&mut self) -> Result<()> {
        self.vulkan.wait_idle()
    }

    fn max_texture_side(&self) -> usize {
        self.vulkan.context().max_image_size() as usize
    }

    fn live_objects(&mut self) -> Result<LiveObjects> {
        self.finish()?;
        Ok(crate::vk::live::counts().to_vec())
    }
}

impl Drop for VulkanRenderer {
    fn drop(&mut self) {
        // The pipelines go once the frames that use them are done (the scenes wait); the painter
        // waits for the device itself when dropped.
        let graphics = Graphics::Vulkan(&self.vulkan);
        self.scenes.destroy(graphics);
    }
}

/// The window's size in physical pixels.
fn physical_size(window: &Window) -> [u32; 2] {
    let size = window.inner_size();
    [size.width, size.height]
}
