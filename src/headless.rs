//! Headless runs: N frames drawn offscreen — OpenGL on an EGL device, or Vulkan on its device —
//! then the last frame as PNG and the per-stage timings as JSON. The same session, panel and
//! reports as the window, without the window; the exit status comes from the frames' reports.

use std::path::PathBuf;

use crate::args::{PathFlag, TraceRequest};
use crate::demo_kit::DemoSpec;
use crate::error::{Error, Result};
use crate::graphics::GraphicsApi;
use crate::progress::Progress;
use crate::record::RecordReport;
use crate::renderer::{self, Canvas};
use crate::runtime::CudaOptions;
use crate::session::{FrameInput, FrameReport, Request, RunFacts, Session, SessionOptions};
use crate::stats::Summary;
use crate::stop::StopRequest;
use crate::transfer::WhatIf;

/// What a headless run does.
#[derive(Debug, Clone)]
pub struct HeadlessOptions {
    /// The demo and its settings.
    pub spec: DemoSpec,
    /// The graphics API frames are drawn with.
    pub renderer: GraphicsApi,
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
    /// The frames' anatomy to write as a Chrome trace.
    pub trace: Option<TraceRequest>,
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
    pub path_flags: Vec<PathFlag>,
    /// Say how far the run is on standard error, as the benches do (a bar on a terminal, else a
    /// line every few seconds once it has taken more than a moment): set by the command line,
    /// whose runs may be slow (n-body on the CPU); benches and tests say their own or nothing.
    pub progress: bool,
}

impl HeadlessOptions {
    /// The options of a run of `spec` drawn with `renderer`: `frames` frames of `size`, nothing
    /// written, no panel, the defaults for everything else.
    pub fn new(spec: DemoSpec, renderer: GraphicsApi, frames: u32, size: [u32; 2], cuda: CudaOptions) -> Self {
        Self {
            spec,
            renderer,
            frames,
            size,
            dt: 1.0 / 60.0,
            screenshot: None,
            stats: None,
            trace: None,
            panel: false,
            cuda,
            shaders_dir: None,
            what_if: WhatIf::default(),
            open_sections: Vec::new(),
            stop: StopRequest::new(),
            record: None,
            path_flags: Vec::new(),
            progress: false,
        }
    }

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
    // From the start: setting a demo up can take as long as one of its frames (n-body's first
    // forces on the CPU).
    let progress = match options.progress {
        true => Progress::new(&format!("{} headless", options.spec.name()), u64::from(options.frames), &options.stop),
        false => Progress::hidden(&options.stop),
    };
    let target = Canvas::Offscreen { size: options.size };
    let (renderer, selection) =
        renderer::open(options.renderer, target, &options.cuda, options.shaders_dir.as_deref())?;
    if let Some(unmet) = &selection.unmet_request {
        return Err(Error::Unavailable(unmet.clone()));
    }
    log::info!("{}, transfer path: {}", renderer.info().line(), selection.transfer.label());
    let session_options = SessionOptions {
        spec: options.spec.clone(),
        what_if: options.what_if,
        open_sections: options.open_sections.clone(),
        path_flags: options.path_flags.clone(),
        record: options.record.clone(),
    };
    let mut session = Session::new(renderer, selection, session_options)?;
    if options.trace.is_some() {
        session.record_anatomy(true);
    }
    let result = render(&mut session, options, &progress);
    let (recordings, failure) = session.close();
    options.stop.outputs_written();
    let mut report = result?;
    if let Some(error) = failure {
        return Err(error);
    }
    report.recording = recordings.into_iter().next();
    Ok(report)
}

fn render(session: &mut Session, options: &HeadlessOptions, progress: &Progress) -> Result<HeadlessReport> {
    let started = std::time::Instant::now();
    let mut frames = 0;
    let mut errors = Vec::new();
    let mut pixels = None;
    while frames < options.frames && !(frames > 0 && options.stop.requested()) {
        frames += 1;
        let last = frames == options.frames || options.stop.requested();
        let input = FrameInput {
            dt: options.dt,
            panel: options.panel.then(|| panel_input(options.size, started.elapsed().as_secs_f64())),
            screenshot: None,
            capture: last,
        };
        let report: FrameReport = session.frame(input);
        errors.extend(report.errors);
        for request in &report.requests {
            match request {
                Request::Relaunch => errors.push("a relaunch was asked for, which a headless run cannot do".to_owned()),
                Request::ReopenRenderer(api) => {
                    if let Err(error) = reopen(session, *api, options) {
                        errors.push(format!(
                            "after the kernel fault, {} could not be opened again: {error}",
                            api.label()
                        ));
                    }
                }
                Request::SwitchRenderer(_) => {} // the panel's switch: offscreen runs get no clicks
            }
        }
        if let Some(frame) = report.pixels {
            pixels = Some(frame);
        }
        progress.done_one();
    }
    // A second Ctrl-C gave the outputs up: the process is ending, nothing more is written.
    if !options.stop.begin_writing() {
        return Err(Error::Unavailable("interrupted again: nothing written".to_owned()));
    }
    session.finish()?;
    let wall = started.elapsed().as_secs_f64();
    if let Some(trace) = &options.trace {
        session.write_trace(trace)?;
    }
    // A recovery from a lost CUDA context is reported (log, JSON) but is not a failed run: the
    // frames were rendered, on the state the recovery made.
    if let Some(message) = errors.first() {
        return Err(Error::Unavailable(format!("the run reported an error: {message}")));
    }
    // Stopped (Ctrl-C) after a frame that was not known to be the last: its pixels are still there.
    let pixels = match pixels {
        Some(pixels) => pixels,
        None => session.read_frame()?,
    };
    if let Some(path) = &options.screenshot {
        crate::output::write_rgba8(path, options.size, &pixels)?;
    }
    if frames < options.frames {
        log::warn!("stopped after {frames} of {} frames; writing what was asked for", options.frames);
    }
    let facts =
        RunFacts { frames: u64::from(frames), frames_asked: Some(u64::from(options.frames)), size: options.size };
    let json = match &options.stats {
        Some(path) => session.write_stats(path, &facts)?,
        None => session.stats_json(&facts)?,
    };
    if let Some(report) = json.pointer("/what_if/report").and_then(|r| r.as_str()) {
        log::warn!("what if: {report}");
    }
    Ok(HeadlessReport {
        summary: session.history().summary(None),
        json,
        pixels,
        frames_per_second: f64::from(frames) / wall,
        frames,
        recording: None,
    })
}

/// Opens `api` offscreen again without CUDA and hands it to the session, which restarts the demo
/// there (after a kernel fault that took the graphics device with it).
fn reopen(session: &mut Session, api: GraphicsApi, options: &HeadlessOptions) -> Result<()> {
    let target = Canvas::Offscreen { size: options.size };
    let (renderer, selection) = renderer::open(api, target, &options.cuda.on_cpu(), options.shaders_dir.as_deref())?;
    session.switch_renderer(renderer, selection)
}

/// The panel's input offscreen: the whole target, one point per pixel, no events.
pub fn panel_input(size: [u32; 2], time: f64) -> egui::RawInput {
    egui::RawInput {
        screen_rect: Some(egui::Rect::from_min_size(egui::Pos2::ZERO, egui::vec2(size[0] as f32, size[1] as f32))),
        time: Some(time),
        ..Default::default()
    }
}
