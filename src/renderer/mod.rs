//! The graphics API a run draws with, behind one trait: [`Renderer`]. One implementation per
//! API — [`gl::GlRenderer`] (OpenGL: a window's GLX or EGL context, or an EGL device offscreen)
//! and [`vulkan::VulkanRenderer`] (Vulkan: a window's swapchain, or an offscreen target) — each
//! owning its context or device, the drawing of scenes, the panel's painter, presentation or read
//! back, and its GPU timers. The frame loop (`session`) drives either through this trait and knows
//! no GL or Vulkan type; opening one also chooses what CUDA shares with it ([`Selection`]).
//!
//! ```text
//!   Session ──begin_frame · draw(Scene) · paint_panel · end_frame──▶ dyn Renderer
//!                                                                     ├─ GlRenderer     (glow, egui_glow)
//!                                                                     └─ VulkanRenderer (ash, egui-ash-renderer)
//! ```

pub mod gl;
pub mod vulkan;

use winit::event_loop::ActiveEventLoop;

use crate::anatomy::Calibration;
use crate::error::Result;
use crate::graphics::Graphics;
pub use crate::graphics::GraphicsApi;
use crate::runtime::{CudaOptions, Selection};
use crate::scene::{Scene, View};
use crate::stats::LateGpuTimes;

/// Where a renderer draws: a window or an offscreen image.
pub enum Canvas<'a> {
    /// A window of `size` logical pixels, presenting with or without vsync.
    Window {
        /// The event loop the window belongs to.
        event_loop: &'a ActiveEventLoop,
        /// Its title.
        title: &'a str,
        /// Logical pixels.
        size: [u32; 2],
        /// Wait for vertical blank.
        vsync: bool,
    },
    /// An offscreen image of `size` pixels (headless runs, benchmarks, tests).
    Offscreen {
        /// Pixels.
        size: [u32; 2],
    },
}

/// What a renderer says about itself: the panel's device lines, the log, `--stats`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RendererInfo {
    /// The API.
    pub api: GraphicsApi,
    /// The device it draws on, e.g. "NVIDIA H200" or "llvmpipe (LLVM 15.0.6, 256 bits)".
    pub device: String,
    /// The driver: GL's vendor string ("NVIDIA Corporation", "Mesa"), Vulkan's driver name and
    /// version.
    pub vendor: String,
    /// The API version and the driver's, in the API's words.
    pub version: String,
    /// The extensions the API offers for sharing memory and semaphores with CUDA.
    pub sharing: Vec<String>,
    /// In a window (else offscreen).
    pub window: bool,
}

impl RendererInfo {
    /// "OpenGL window on NVIDIA H200 (4.6.0 NVIDIA 580.159.04)", as the log says it.
    pub fn line(&self) -> String {
        let place = if self.window { "window" } else { "offscreen" };
        format!("{} {place} on {} ({})", self.api.label(), self.device, self.version)
    }
}

/// The panel of one frame as egui laid it out, for the renderer to paint over the scene.
pub struct PanelPaint<'a> {
    /// What to draw.
    pub primitives: &'a [egui::ClippedPrimitive],
    /// The texture changes since the last paint; the renderer applies and empties them.
    pub textures: &'a mut egui::TexturesDelta,
    /// Physical pixels per egui point.
    pub pixels_per_point: f32,
}

/// One graphics API, with its context or device and what it draws into.
///
/// A frame is `begin_frame`, then `draw` and `paint_panel` in any number, then `end_frame`. The
/// demo's compute step comes before `begin_frame`: Vulkan records the frame's commands from there
/// on, and the transfer paths submit their own work before.
///
/// Required: what every backend must do to draw offscreen. Provided, with defaults that say what
/// a backend without them lacks: a window and what goes with it (`window`, `resized`, `vsync`,
/// `set_vsync`), a context to make current, shaders built ahead (`prepare`), and GPU times
/// (`gpu_times`, `calibration`).
pub trait Renderer {
    /// Which API this is, on what device, in what.
    fn info(&self) -> &RendererInfo;

    /// The context demos and transfer paths make their graphics objects with.
    fn graphics(&self) -> Graphics<'_>;

    /// The window, when drawing into one.
    fn window(&self) -> Option<&winit::window::Window> {
        None
    }

    /// Size of what is drawn into, in physical pixels.
    fn size(&self) -> [u32; 2];

    /// Makes this renderer's context current on this thread (OpenGL; nothing to do for Vulkan).
    /// Needed only where two renderers live at once: switching from one to the other.
    fn make_current(&mut self) -> Result<()> {
        Ok(())
    }

    /// Starts frame `frame`, the target cleared. `false`: there is nothing to draw into this time
    /// (a minimised window, a swapchain that no longer fits): skip drawing and ending it.
    fn begin_frame(&mut self, frame: u64) -> Result<bool>;

    /// Builds what scenes like `scene` need (shaders), so a demo whose shaders fail fails at once.
    fn prepare(&mut self, _scene: &Scene<'_>) -> Result<()> {
        Ok(())
    }

    /// Draws `scene` into `view` of the frame begun.
    fn draw(&mut self, scene: &Scene<'_>, view: &View) -> Result<()>;

    /// Paints the panel over the frame begun.
    fn paint_panel(&mut self, panel: PanelPaint<'_>) -> Result<()>;

    /// Ends the frame: presents it (a window) or submits it (offscreen). With `capture`, returns
    /// its pixels, RGBA8, top row first, panel included.
    fn end_frame(&mut self, capture: bool) -> Result<Option<Vec<u8>>>;

    /// GPU times of finished frames (draw, panel) that arrived since the last call; with `all`,
    /// waits for every frame first.
    fn gpu_times(&mut self, _all: bool) -> Result<Vec<LateGpuTimes>> {
        Ok(Vec::new())
    }

    /// How its GPU times are put on the host clock (the frame anatomy's graphics lane), or why
    /// they are not.
    fn calibration(&self) -> Calibration {
        Calibration {
            lane: crate::stats::Lane::Graphics,
            name: self.info().api.label().to_owned(),
            error_us: None,
            note: "this renderer measures no GPU times".to_owned(),
        }
    }

    /// The window was resized: what is drawn into follows at the next frame.
    fn resized(&mut self) {}

    /// Whether presenting waits for vertical blank (`None` offscreen).
    fn vsync(&self) -> Option<bool> {
        None
    }

    /// Turns waiting for vertical blank on or off (a window).
    fn set_vsync(&mut self, _on: bool) -> Result<()> {
        Err(crate::error::Error::Unavailable(format!(
            "the {} renderer presents nothing: no vsync",
            self.info().api.label()
        )))
    }

    /// The last frame drawn, RGBA8, top row first (offscreen: what the target holds).
    fn read_frame(&mut self) -> Result<Vec<u8>>;

    /// Waits for every frame submitted so far.
    fn finish(&mut self) -> Result<()>;

    /// The largest texture side the panel's painter takes.
    fn max_texture_side(&self) -> usize;

    /// What a leak would grow, once every frame has finished: the objects this backend holds,
    /// by kind (GL's live buffer, texture, framebuffer and program names; Vulkan's buffers and
    /// images with their memory). `soak` compares them before and after its phases.
    fn live_objects(&mut self) -> Result<LiveObjects>;
}

/// Objects a renderer holds, by kind, in the renderer's own words ("buffers", "textures", …).
pub type LiveObjects = Vec<(&'static str, u64)>;

/// Opens `api` drawing into `target`, and chooses what CUDA shares with it as `options` ask;
/// `shaders`: a folder of GL shader files replacing the built-in ones.
pub fn open(
    api: GraphicsApi,
    target: Canvas<'_>,
    options: &CudaOptions,
    shaders: Option<&std::path::Path>,
) -> Result<(Box<dyn Renderer>, Selection)> {
    match api {
        GraphicsApi::Gl => {
            let (renderer, selection) = gl::GlRenderer::open(target, options, shaders)?;
            Ok((Box::new(renderer), selection))
        }
        GraphicsApi::Vulkan => {
            if shaders.is_some() {
                log::warn!("--shaders replaces the OpenGL shaders; the Vulkan renderer uses its built-in ones");
            }
            let (renderer, selection) = vulkan::VulkanRenderer::open(target, options)?;
            Ok((Box::new(renderer), selection))
        }
    }
}
