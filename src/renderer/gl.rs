//! The OpenGL renderer: a window's context (glutin: GLX or EGL) or a surfaceless context on an
//! EGL device drawing into a framebuffer, the scenes ([`GlScenes`]), egui's GL painter,
//! `GL_TIMESTAMP` query pairs around the draw and the panel, and a fence after each frame that
//! keeps the host at most [`gl::GL_FRAMES_QUEUED_AT_MOST`] frames ahead of GL.

use std::path::Path;
use std::sync::Arc;

use super::{Canvas, LiveObjects, PanelPaint, Renderer, RendererInfo};
use crate::anatomy::Calibration;
use crate::error::{Error, Result};
use crate::gl::context::headless::HeadlessGl;
use crate::gl::context::window::WindowGl;
use crate::gl::{self, FrameFences, Framebuffer, GlInfo, TimerQueries};
use crate::graphics::{Graphics, GraphicsApi};
use crate::runtime::{self, CudaOptions, Selection};
use crate::scene::gl::GlScenes;
use crate::scene::{Scene, SceneDrawer, View};
use crate::stats::{Lane, LateGpuTimes, Stage, StageTimes};

/// GL names probed per kind when counting live objects; drivers hand out small names first and
/// reuse freed ones.
const GL_NAMES: u32 = 8192;

/// What the GL context draws into.
enum Surface {
    /// A window's default framebuffer.
    Window { window: WindowGl, resized: bool },
    /// A framebuffer of an EGL device's context.
    Offscreen { context: HeadlessGl, framebuffer: Framebuffer },
}

/// Draws with OpenGL.
pub struct GlRenderer {
    // The GL objects below are deleted in `Drop`, with the context current; the surface (and with
    // it the context) goes last.
    scenes: GlScenes,
    painter: Option<egui_glow::Painter>,
    draw_timer: TimerQueries,
    panel_timer: TimerQueries,
    /// Bounds the frames GL holds queued: without it, a driver that never makes the host wait
    /// (Mesa's llvmpipe offscreen) keeps every frame the host runs ahead by, in host memory.
    frame_fences: FrameFences,
    frame: u64,
    /// The frame's clear is still to be made: a scene clears the whole framebuffer as it begins
    /// ([`gl::begin_scene`]), so the frame's own clear is made only if none was drawn.
    clear_pending: bool,
    info: RendererInfo,
    gl: Arc<glow::Context>,
    surface: Surface,
}

impl GlRenderer {
    /// Clears the framebuffer if nothing has since the frame began.
    fn flush_clear(&mut self) {
        if std::mem::take(&mut self.clear_pending) {
            gl::begin_scene(&self.gl, [0, 0], self.size(), [0.0, 0.0, 0.0, 1.0], gl::DrawState::DepthTested);
        }
    }

    /// Opens a GL context drawing into `target` (shader files from `shaders` when given), and
    /// chooses what CUDA shares with it: GL interop when the context runs on the CUDA device.
    pub fn open(target: Canvas<'_>, options: &CudaOptions, shaders: Option<&Path>) -> Result<(Self, Selection)> {
        let (surface, gl, selection) = match target {
            Canvas::Window { event_loop, title, size, vsync } => {
                let window = WindowGl::new(event_loop, title, size, vsync, true)?;
                crate::stats::log_start_phase("window and GL context made");
                let gl = window.gl().clone();
                let selection = runtime::select(options, &gl, &|name| window.proc_address(name));
                (Surface::Window { window, resized: false }, gl, selection)
            }
            Canvas::Offscreen { size } => {
                let context = HeadlessGl::new(runtime::preferred_cuda_device(options))?;
                let gl = context.gl().clone();
                let selection = runtime::select(options, &gl, &|name| context.proc_address(name));
                let framebuffer = Framebuffer::new(&gl, size)?;
                (Surface::Offscreen { context, framebuffer }, gl, selection)
            }
        };
        let renderer = Self::around(surface, gl, shaders);
        let renderer = match renderer {
            Ok(renderer) => renderer,
            Err((error, mut surface, gl)) => {
                if let Surface::Offscreen { framebuffer, .. } = &mut surface {
                    framebuffer.destroy(&gl);
                }
                return Err(error);
            }
        };
        Ok((renderer, selection))
    }

    /// The renderer around a context and what it draws into; on failure, both back.
    #[allow(clippy::result_large_err)] // handed back once, at start-up
    fn around(
        surface: Surface,
        gl: Arc<glow::Context>,
        shaders: Option<&Path>,
    ) -> std::result::Result<Self, (Error, Surface, Arc<glow::Context>)> {
        let draw_timer = match TimerQueries::new(&gl) {
            Ok(timer) => timer,
            Err(error) => return Err((error, surface, gl)),
        };
        let panel_timer = match TimerQueries::new(&gl) {
            Ok(timer) => timer,
            Err(error) => {
                let mut draw_timer = draw_timer;
                draw_timer.destroy(&gl);
                return Err((error, surface, gl));
            }
        };
        let strings = GlInfo::query(&gl);
        let info = RendererInfo {
            api: GraphicsApi::Gl,
            device: strings.renderer,
            vendor: strings.vendor,
            version: strings.version,
            sharing: strings.sharing,
            window: matches!(surface, Surface::Window { .. }),
        };
        Ok(Self {
            scenes: GlScenes::new(shaders.map(Path::to_path_buf)),
            painter: None,
            draw_timer,
            panel_timer,
            frame_fences: FrameFences::new(),
            frame: 0,
            clear_pending: false,
            info,
            gl,
            surface,
        })
    }

    /// The egui painter, made on the first panel painted.
    fn painter(&mut self) -> Result<&mut egui_glow::Painter> {
        if self.painter.is_none() {
            let painter = egui_glow::Painter::new(self.gl.clone(), "", None, false)
                .map_err(|error| Error::Gl(format!("egui painter: {error}")))?;
            self.painter = Some(painter);
        }
        self.painter.as_mut().ok_or_else(|| Error::Gl("egui painter".to_owned()))
    }
}

impl Renderer for GlRenderer {
    fn info(&self) -> &RendererInfo {
        &self.info
    }

    fn graphics(&self) -> Graphics<'_> {
        Graphics::Gl(&self.gl)
    }

    fn window(&self) -> Option<&winit::window::Window> {
        match &self.surface {
            Surface::Window { window, .. } => Some(window.window()),
            Surface::Offscreen { .. } => None,
        }
    }

    fn size(&self) -> [u32; 2] {
        match &self.surface {
            Surface::Window { window, .. } => window.size(),
            Surface::Offscreen { framebuffer, .. } => framebuffer.size(),
        }
    }

    fn make_current(&mut self) -> Result<()> {
        match &self.surface {
            Surface::Window { window, .. } => window.make_current(),
            Surface::Offscreen { context, .. } => context.make_current(),
        }
    }

    fn begin_frame(&mut self, frame: u64) -> Result<bool> {
        self.make_current()?;
        self.frame_fences.begin_frame(&self.gl, frame)?;
        self.frame = frame;
        match &mut self.surface {
            Surface::Window { window, resized } => {
                if std::mem::take(resized) {
                    window.resize();
                }
                gl::bind_default_framebuffer(&self.gl);
            }
            Surface::Offscreen { framebuffer, .. } => framebuffer.bind(&self.gl),
        }
        self.clear_pending = true;
        Ok(true)
    }

    fn prepare(&mut self, scene: &Scene<'_>) -> Result<()> {
        self.scenes.prepare(Graphics::Gl(&self.gl), scene)
    }

    fn draw(&mut self, scene: &Scene<'_>, view: &View) -> Result<()> {
        self.draw_timer.begin(&self.gl, self.frame);
        let drawn = self.scenes.draw(Graphics::Gl(&self.gl), scene, view);
        self.draw_timer.end(&self.gl);
        if drawn.is_ok() {
            self.clear_pending = false; // the scene cleared the whole framebuffer as it began
        }
        drawn
    }

    fn paint_panel(&mut self, panel: PanelPaint<'_>) -> Result<()> {
        self.flush_clear();
        let size = self.size();
        let (frame, gl) = (self.frame, self.gl.clone());
        self.panel_timer.begin(&gl, frame);
        let painted = self.painter().map(|painter| {
            painter.paint_and_update_textures(size, panel.pixels_per_point, panel.primitives, panel.textures)
        });
        self.panel_timer.end(&gl);
        painted
    }

    fn end_frame(&mut self, capture: bool) -> Result<Option<Vec<u8>>> {
        self.flush_clear();
        let size = self.size();
        let pixels = match &self.surface {
            Surface::Window { window, .. } => {
                // The back buffer, read before it is presented.
                let pixels = capture.then(|| read_back_buffer(&self.gl, size)).transpose()?;
                window.swap_buffers()?;
                pixels
            }
            Surface::Offscreen { framebuffer, .. } => {
                let pixels = capture.then(|| framebuffer.read_rgba(&self.gl)).transpose()?;
                gl::bind_default_framebuffer(&self.gl);
                pixels
            }
        };
        self.frame_fences.end_frame(&self.gl)?;
        Ok(pixels)
    }

    fn gpu_times(&mut self, all: bool) -> Result<Vec<LateGpuTimes>> {
        if all {
            gl::finish(&self.gl);
        }
        let mut late = Vec::new();
        for (timer, stage) in [(&mut self.draw_timer, Stage::Draw), (&mut self.panel_timer, Stage::Panel)] {
            while let Some(time) = timer.poll(&self.gl) {
                let mut times = StageTimes::default();
                match time.start_us {
                    Some(start_us) => times.set_gpu_at(stage, Lane::Graphics, start_us, time.microseconds),
                    None => times.set_gpu(stage, time.microseconds),
                }
                late.push(LateGpuTimes { frame: time.tag, times });
            }
        }
        Ok(late)
    }

    fn calibration(&self) -> Calibration {
        let name = "OpenGL".to_owned();
        match self.draw_timer.clock() {
            Some(clock) => Calibration {
                lane: Lane::Graphics,
                name,
                error_us: Some(clock.error_us),
                note: "glQueryCounter timestamps; glGetInteger64v(GL_TIMESTAMP) read between two host clock \
                       reads, every 2 s"
                    .to_owned(),
            },
            None => Calibration {
                lane: Lane::Graphics,
                name,
                error_us: None,
                note: "glGetInteger64v(GL_TIMESTAMP) gave no time on this driver: GPU times without positions"
                    .to_owned(),
            },
        }
    }

    fn resized(&mut self) {
        if let Surface::Window { resized, .. } = &mut self.surface {
            *resized = true;
        }
    }

    fn vsync(&self) -> Option<bool> {
        match &self.surface {
            Surface::Window { window, .. } => Some(window.vsync()),
            Surface::Offscreen { .. } => None,
        }
    }

    fn set_vsync(&mut self, on: bool) -> Result<()> {
        match &mut self.surface {
            Surface::Window { window, .. } => {
                window.set_vsync(on)?;
                window.set_vsync_flag(on);
                Ok(())
            }
            Surface::Offscreen { .. } => {
                Err(Error::Unavailable("an offscreen run presents nothing: no vsync".to_owned()))
            }
        }
    }

    fn read_frame(&mut self) -> Result<Vec<u8>> {
        self.make_current()?;
        match &self.surface {
            Surface::Offscreen { framebuffer, .. } => framebuffer.read_rgba(&self.gl),
            Surface::Window { .. } => {
                Err(Error::Unavailable("a window's frame is read as it is drawn (--screenshot)".to_owned()))
            }
        }
    }

    fn finish(&mut self) -> Result<()> {
        self.make_current()?;
        gl::finish(&self.gl);
        Ok(())
    }

    fn max_texture_side(&self) -> usize {
        gl::max_texture_size(&self.gl) as usize
    }

    fn live_objects(&mut self) -> Result<LiveObjects> {
        self.finish()?;
        Ok(gl::GlObjects::count(&self.gl, GL_NAMES).kinds().to_vec())
    }
}

impl Drop for GlRenderer {
    fn drop(&mut self) {
        if let Err(error) = self.make_current() {
            log::warn!("the GL objects of the renderer are leaked: {error}");
            return;
        }
        self.scenes.destroy(Graphics::Gl(&self.gl));
        if let Some(mut painter) = self.painter.take() {
            painter.destroy();
        }
        self.draw_timer.destroy(&self.gl);
        self.panel_timer.destroy(&self.gl);
        self.frame_fences.destroy(&self.gl);
        if let Surface::Offscreen { framebuffer, .. } = &mut self.surface {
            framebuffer.destroy(&self.gl);
        }
    }
}

/// The window's back buffer, RGBA8, top row first.
fn read_back_buffer(gl: &glow::Context, size: [u32; 2]) -> Result<Vec<u8>> {
    gl::read_framebuffer_rgba(gl, None, size)
}
