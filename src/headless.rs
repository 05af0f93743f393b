//! Headless runs: N frames into an offscreen framebuffer on an EGL device, then the last frame as
//! PNG and the per-stage timings as JSON. The same code path as the window, without the window.

use std::path::PathBuf;
use std::time::Instant;

use crate::demo_kit::{DemoSpec, View};
use crate::gl::context::headless::HeadlessGl;
use crate::gl::{self, Framebuffer};
use crate::guard::Guard;
use crate::record::{FrameRecorder, RecordReport};
use crate::runtime::{self, CudaOptions};
use crate::session::{RunFacts, Session};
use crate::stats::Summary;
use crate::stop::StopRequest;
use crate::transfer::WhatIf;
use crate::{Error, Result};

/// What a headless run does.
#[derive(Debug, Clone)]
pub struct HeadlessOptions {
    /// The demo and its settings.
    pub spec: DemoSpec,
    /// Frames to render.
    pub frames: u32,
    /// Framebuffer size in pixels.
    pub size: [u32; 2],
    /// Simulated seconds per frame.
    pub dt: f32,
    /// Where to write the last frame as PNG.
    pub screenshot: Option<PathBuf>,
    /// Where to write the timings as JSON.
    pub stats: Option<PathBuf>,
    /// Draw the side panel into the frames too.
    pub panel: bool,
    /// Backend and transfer choices.
    pub cuda: CudaOptions,
    /// Folder of shader files replacing the embedded ones.
    pub shaders_dir: Option<PathBuf>,
    /// The learners' switches.
    pub what_if: WhatIf,
    /// Panel sections open from the start.
    pub open_sections: Vec<crate::ui::PanelSection>,
    /// Set from outside (Ctrl-C): stop after the current frame and write what was asked for.
    pub stop: StopRequest,
    /// Record every frame into this folder.
    pub record: Option<PathBuf>,
    /// Demo flags that only some paths use (the run says when its path ignores them).
    pub path_flags: Vec<crate::args::PathFlag>,
}

impl HeadlessOptions {
    /// Refuses what no headless run can do: no frames, a time step that is not a number ≥ 0, a
    /// frame too large for host memory to read back.
    pub fn check(&self) -> Result<()> {
        if self.frames == 0 {
            return Err(Error::InvalidInput("--frames must be at least 1".to_owned()));
        }
        if !(self.dt.is_finite() && self.dt >= 0.0) {
            return Err(Error::InvalidInput(format!("time step {} must be a finite number ≥ 0", self.dt)));
        }
        let [width, height] = self.size;
        crate::host_memory::check(
            &format!("a {width}x{height} headless frame (read back and encoded)"),
            u64::from(width) * u64::from(height) * 8,
            "choose a smaller --size",
        )
    }
}

/// What a headless run measured.
#[derive(Debug, Clone)]
pub struct HeadlessReport {
    /// Everything, as written to `--stats`.
    pub json: serde_json::Value,
    /// The timing summary.
    pub summary: Summary,
    /// The last frame, RGBA8, top row first.
    pub pixels: Vec<u8>,
    /// Frames per second over the whole run (wall clock, GPU finished at the end).
    pub frames_per_second: f64,
    /// Frames rendered: fewer than asked when the run was stopped.
    pub frames: u32,
    /// What `--record` wrote.
    pub recording: Option<RecordReport>,
}

/// Runs the demo headless.
pub fn run(options: &HeadlessOptions) -> Result<HeadlessReport> {
    options.check()?;
    let context = HeadlessGl::new(runtime::preferred_cuda_device(&options.cuda))?;
    let gl = context.gl().clone();
    let selection = runtime::select(&options.cuda, &gl, &|name| context.proc_address(name));
    if let Some(unmet) = &selection.unmet_request {
        return Err(Error::Unavailable(unmet.clone()));
    }
    let framebuffer =
        Guard::new(Framebuffer::new(&gl, options.size)?, |mut framebuffer: Framebuffer| framebuffer.destroy(&gl));
    let mut session = Session::new(&gl, selection, &options.spec, options.shaders_dir.clone())?;
    let framebuffer = framebuffer.keep();
    session.set_what_if(options.what_if);
    session.say_flags_without_effect(&options.path_flags);
    session.open_panel_sections(&options.open_sections);
    let mut overlay = if options.panel { Some(PanelOverlay::new(gl.clone())?) } else { None };
    let result = render(&gl, &mut session, &framebuffer, overlay.as_mut(), options, context.device());
    if let Some(overlay) = overlay.as_mut() {
        overlay.painter.destroy();
    }
    let mut framebuffer = framebuffer;
    framebuffer.destroy(&gl);
    session.destroy(&gl);
    result
}

fn render(
    gl: &std::sync::Arc<glow::Context>,
    session: &mut Session,
    framebuffer: &Framebuffer,
    mut overlay: Option<&mut PanelOverlay>,
    options: &HeadlessOptions,
    egl_device: &crate::gl::context::headless::EglDeviceInfo,
) -> Result<HeadlessReport> {
    let size = framebuffer.size();
    let mut recorder = options.record.as_deref().map(|dir| FrameRecorder::start(dir, "--record")).transpose()?;
    let started = Instant::now();
    let mut frames = 0;
    while frames < options.frames && !(frames > 0 && options.stop.requested()) {
        frames += 1;
        framebuffer.bind(gl);
        let panel_px = overlay.as_ref().map(|o| o.panel_width_px(session)).unwrap_or(0);
        let view =
            View { origin: [panel_px.min(size[0] - 1), 0], size: [size[0].saturating_sub(panel_px).max(1), size[1]] };
        session.frame(gl, view, options.dt);
        if let Some(overlay) = overlay.as_deref_mut() {
            session.time_panel(gl, |session| overlay.paint(gl, session, size));
        }
        if let Some(recorder) = recorder.as_mut() {
            recorder.frame(size, framebuffer.read_rgba(gl)?);
        }
    }
    session.finish(gl)?;
    let wall = started.elapsed().as_secs_f64();
    // A recovery from a lost CUDA context is reported (log, JSON) but is not a failed run: the
    // frames were rendered, on the state the recovery made.
    let recoveries = session.recoveries().to_vec();
    if let Some(message) = session.panel.messages.iter().find(|m| !recoveries.contains(m)) {
        return Err(Error::Unavailable(format!("the run reported an error: {message}")));
    }
    let pixels = framebuffer.read_rgba(gl)?;
    gl::bind_default_framebuffer(gl);
    if let Some(path) = &options.screenshot {
        crate::output::write_rgba8(path, size, &pixels)?;
    }
    let summary = session.history().summary(None);
    let frames_per_second = f64::from(frames) / wall;
    if frames < options.frames {
        log::warn!("stopped after {frames} of {} frames; writing what was asked for", options.frames);
    }
    let run = RunFacts { size, frames: u64::from(frames), frames_asked: Some(options.frames), wall_seconds: wall };
    let mut json = session.stats_json(&run)?;
    json["egl_device"] = serde_json::to_value(egl_device).map_err(|e| Error::InvalidInput(e.to_string()))?;
    if let Some(path) = &options.stats {
        let text = serde_json::to_string_pretty(&json).map_err(|e| Error::InvalidInput(e.to_string()))?;
        crate::output::write(path, (text + "\n").as_bytes())?;
    }
    let recording = recorder.map(FrameRecorder::finish).transpose()?;
    Ok(HeadlessReport { json, summary, pixels, frames_per_second, frames, recording })
}

/// The side panel painted into offscreen frames (for screenshots of the whole app).
struct PanelOverlay {
    context: egui::Context,
    painter: egui_glow::Painter,
    started: Instant,
}

impl PanelOverlay {
    fn new(gl: std::sync::Arc<glow::Context>) -> Result<Self> {
        let painter = egui_glow::Painter::new(gl, "", None, false).map_err(|e| Error::Gl(e.to_string()))?;
        Ok(Self { context: egui::Context::default(), painter, started: Instant::now() })
    }

    fn panel_width_px(&self, session: &Session) -> u32 {
        // One egui point is one pixel offscreen.
        session.panel.width_points.max(0.0) as u32
    }

    fn paint(&mut self, gl: &glow::Context, session: &mut Session, size: [u32; 2]) {
        let input = egui::RawInput {
            screen_rect: Some(egui::Rect::from_min_size(egui::Pos2::ZERO, egui::vec2(size[0] as f32, size[1] as f32))),
            time: Some(self.started.elapsed().as_secs_f64()),
            ..Default::default()
        };
        let output = self.context.run_ui(input, |ui| {
            let _ = session.panel(ui, gl);
        });
        let primitives = self.context.tessellate(output.shapes, output.pixels_per_point);
        let mut textures = output.textures_delta;
        self.painter.paint_and_update_textures(size, output.pixels_per_point, &primitives, &mut textures);
    }
}
