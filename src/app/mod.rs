//! The windowed app: a winit `ApplicationHandler` that owns everything (no globals). It opens the
//! window through a renderer — Vulkan when asked for and able to present, else OpenGL, saying why —
//! hands the session each frame's panel input, turns keys and the mouse into actions and view
//! moves, and carries out what a frame asks of it: closing, relaunching, drawing with the other
//! API. The frame loop itself is the session's, the same as offscreen.

mod input;

use std::path::PathBuf;
use std::time::Instant;

use winit::application::ApplicationHandler;
use winit::event::WindowEvent;
use winit::event_loop::{ActiveEventLoop, ControlFlow, EventLoop};
use winit::window::WindowId;

use self::input::Input;
use crate::args::{PathFlag, TraceRequest};
use crate::demo_kit::DemoSpec;
use crate::error::{Error, Result};
use crate::graphics::GraphicsApi;
use crate::record::RecordReport;
use crate::renderer::{self, Canvas};
use crate::runtime::CudaOptions;
use crate::session::{FrameInput, Request, RunFacts, Session, SessionOptions};
use crate::transfer::WhatIf;
use crate::windowing::x_server::XServer;
use crate::windowing::{catch_window_panics, winit_error_text};

/// How the window starts.
#[derive(Debug, Clone)]
pub struct WindowOptions {
    /// The demo and its settings.
    pub spec: DemoSpec,
    /// Backend and transfer choices.
    pub cuda: CudaOptions,
    /// Window size in logical pixels.
    pub size: [u32; 2],
    /// Wait for vertical blank.
    pub vsync: bool,
    /// Folder of shader files replacing the embedded ones.
    pub shaders_dir: Option<PathBuf>,
    /// Close after this many frames (for tests and screenshots).
    pub max_frames: Option<u64>,
    /// Save the last frame, panel included, as PNG when closing.
    pub screenshot: Option<PathBuf>,
    /// The learners' switches.
    pub what_if: WhatIf,
    /// Panel sections open from the start.
    pub open_sections: Vec<crate::ui::PanelSection>,
    /// Set from outside (Ctrl-C): close after the current frame, writing what was asked for.
    pub stop: crate::stop::StopRequest,
    /// Record from the first frame into this folder.
    pub record: Option<PathBuf>,
    /// Write per-stage timings (present included) as JSON when closing.
    pub stats: Option<PathBuf>,
    /// The frames' anatomy to write as a Chrome trace when closing.
    pub trace: Option<TraceRequest>,
    /// The graphics API to draw with (a Vulkan window that cannot present goes on with OpenGL).
    pub renderer: GraphicsApi,
    /// Demo flags that only some paths use (the panel says when its path ignores them).
    pub path_flags: Vec<PathFlag>,
}

/// What a window run leaves behind.
#[derive(Debug, Clone, Default)]
pub struct WindowReport {
    /// Frames drawn.
    pub frames: u64,
    /// The user asked to start the app again as a new process (to get CUDA back after a kernel
    /// fault lost the context): the caller should do so, with the same arguments.
    pub relaunch: bool,
    /// Each recording made (`--record`, the panel's record button), in order.
    pub recordings: Vec<RecordReport>,
}

/// Opens the window and runs until it is closed.
pub fn run(options: WindowOptions) -> Result<WindowReport> {
    let mut app =
        App { options, running: None, error: None, report: WindowReport::default(), closing: false, x_server: None };
    let ran = catch_window_panics(|| {
        let event_loop = EventLoop::new().map_err(|e| {
            let why = match display_asked_for() {
                Some(display) => format!("{display} could not be reached ({})", winit_error_text(&e)),
                None => winit_error_text(&e),
            };
            Error::Window(format!(
                "{why}. Run inside a desktop session (or under Xvfb: `xvfb-run interop-lab`), or use headless mode \
                 (e.g. `interop-lab wave --headless`)"
            ))
        })?;
        event_loop.set_control_flow(ControlFlow::Poll);
        event_loop.run_app(&mut app).map_err(|e| Error::Window(winit_error_text(&e)))
    });
    // The loop can end without `exiting`: winit gives up when its X connection fails, and a
    // windowing library may panic. What is still open is closed (or, the display gone, left).
    let display_gone = app.display_gone();
    if display_gone {
        app.display_lost();
    } else {
        app.shut_down();
    }
    // A stop that took the display with it is a stop: the loop's error is then only winit
    // finding its connection gone.
    let ran = ran.or_else(|error| if display_gone && app.options.stop.requested() { Ok(()) } else { Err(error) });
    match app.error.or(ran.err()) {
        Some(error) => Err(error),
        None => Ok(app.report),
    }
}

/// The display the window tries, as the environment names it (winit tries Wayland first), for
/// messages: "the X server at :1 (DISPLAY)". `None` when none is set.
fn display_asked_for() -> Option<String> {
    let set =
        |name: &'static str| std::env::var(name).ok().filter(|value| !value.is_empty()).map(|value| (name, value));
    match set("WAYLAND_DISPLAY").or_else(|| set("WAYLAND_SOCKET")) {
        Some((name, value)) => Some(format!("the Wayland compositor at {value} ({name})")),
        None => set("DISPLAY").map(|(name, value)| format!("the X server at {value} ({name})")),
    }
}

struct App {
    options: WindowOptions,
    running: Option<Running>,
    error: Option<Error>,
    report: WindowReport,
    /// Closing was asked for (Esc, the window's close button): the next frame is the last, so
    /// that `--screenshot` is written as on every other way out.
    closing: bool,
    /// The X server the window is on, watched for it going away (`None` on Wayland).
    x_server: Option<XServer>,
}

/// Everything that exists while the window is open.
struct Running {
    session: Session,
    egui: egui_winit::State,
    input: Input,
    last_frame: Instant,
    /// The window's size in pixels, from its resize events: what `--stats` says even when the
    /// display is gone and cannot be asked.
    size: [u32; 2],
}

impl ApplicationHandler for App {
    fn resumed(&mut self, event_loop: &ActiveEventLoop) {
        if self.running.is_none() && self.error.is_none() {
            match self.open(event_loop) {
                Ok(running) => self.running = Some(running),
                Err(error) => {
                    self.error = Some(error);
                    event_loop.exit();
                }
            }
        }
    }

    fn window_event(&mut self, event_loop: &ActiveEventLoop, _window: WindowId, event: WindowEvent) {
        if self.display_gone() {
            return event_loop.exit();
        }
        let last = self.last_frame();
        let Some(running) = self.running.as_mut() else { return };
        let Some(window) = running.session.renderer().window() else { return };
        let consumed = running.egui.on_window_event(window, &event).consumed;
        match event {
            WindowEvent::CloseRequested => self.close_after_a_last_frame(event_loop),
            WindowEvent::Resized(size) => {
                running.size = [size.width.max(1), size.height.max(1)];
                running.session.resized();
            }
            WindowEvent::RedrawRequested => self.redraw(event_loop, last),
            other => {
                if running.input.event(&other, consumed, &mut running.session) {
                    self.close_after_a_last_frame(event_loop);
                }
            }
        }
    }

    fn about_to_wait(&mut self, event_loop: &ActiveEventLoop) {
        if self.display_gone() {
            return event_loop.exit();
        }
        if let Some(window) = self.running.as_ref().and_then(|running| running.session.renderer().window()) {
            window.request_redraw();
        }
    }

    fn exiting(&mut self, _event_loop: &ActiveEventLoop) {
        // With the display gone nothing may be released here: `run` writes what it still can.
        if !self.display_gone() {
            self.shut_down();
        }
    }
}

impl App {
    /// Opens the window with the renderer asked for; one that cannot start goes on with the API's
    /// fallback (Vulkan's: OpenGL), and the panel says why.
    fn open(&mut self, event_loop: &ActiveEventLoop) -> Result<Running> {
        // From a checkout, kernels are read from its kernels/ folder and watched for edits; the
        // window draws while kernels compile: its first frame does not wait for NVRTC.
        let mut cuda = self.options.cuda.clone();
        if cuda.kernels_dir.is_none() {
            cuda.kernels_dir = crate::kernel_watch::checkout_kernels_dir();
        }
        cuda.background_compiles = true;
        self.options.cuda = cuda;
        if self.x_server.is_none() {
            self.x_server = XServer::watch(event_loop);
        }
        let api = self.options.renderer;
        let (renderer, selection, fallback) = match self.open_renderer(event_loop, api, false) {
            Ok((renderer, selection)) => (renderer, selection, None),
            Err(error) => {
                let Some(next) = api.fallback() else { return Err(error) };
                let note = format!(
                    "the {} window could not start ({error}); drawing with {} instead",
                    api.label(),
                    next.label()
                );
                log::warn!("{note}");
                let (renderer, selection) = self.open_renderer(event_loop, next, false)?;
                (renderer, selection, Some(note))
            }
        };
        log::info!("{}, transfer path: {}", renderer.info().line(), selection.transfer.label());
        crate::stats::log_start_phase(&format!("backend chosen ({:?})", selection.transfer));
        let options = SessionOptions {
            spec: self.options.spec.clone(),
            what_if: self.options.what_if,
            open_sections: self.options.open_sections.clone(),
            path_flags: self.options.path_flags.clone(),
            record: self.options.record.clone(),
        };
        let mut session = Session::new(renderer, selection, options)?;
        if self.options.trace.is_some() {
            session.record_anatomy(true);
        }
        if let Some(note) = fallback {
            session.act(crate::ui::PanelAction::Say(note));
        }
        let window =
            session.renderer().window().ok_or_else(|| Error::Window("the renderer has no window".to_owned()))?;
        let egui = egui_winit::State::new(
            egui::Context::default(),
            egui::ViewportId::ROOT,
            event_loop,
            Some(window.scale_factor() as f32),
            event_loop.system_theme(),
            Some(session.renderer().max_texture_side()),
        );
        let size = window.inner_size();
        window.request_redraw();
        let size = [size.width.max(1), size.height.max(1)];
        Ok(Running { session, egui, input: Input::default(), last_frame: Instant::now(), size })
    }

    fn open_renderer(
        &self,
        event_loop: &ActiveEventLoop,
        api: GraphicsApi,
        without_cuda: bool,
    ) -> Result<(Box<dyn renderer::Renderer>, crate::runtime::Selection)> {
        let title = format!("interop-lab — {}{}", self.options.spec.name(), api.title_note());
        let target = Canvas::Window { event_loop, title: &title, size: self.options.size, vsync: self.options.vsync };
        let cuda = if without_cuda { self.options.cuda.on_cpu() } else { self.options.cuda.clone() };
        renderer::open(api, target, &cuda, self.options.shaders_dir.as_deref())
    }

    /// Whether the frame about to be drawn is the last: `--frames` reached, a stop asked for
    /// (Ctrl-C), or the window asked to close.
    fn last_frame(&self) -> bool {
        self.closing
            || self.options.max_frames.is_some_and(|max| self.report.frames + 1 >= max)
            || self.options.stop.requested()
    }

    fn redraw(&mut self, event_loop: &ActiveEventLoop, last: bool) {
        let Some(running) = self.running.as_mut() else { return };
        let Some(window) = running.session.renderer().window() else { return };
        let raw_input = running.egui.take_egui_input(window);
        let now = Instant::now();
        // Simulated time follows wall time, but a stall (a drag of the window) is not a jump.
        let dt = (now - running.last_frame).as_secs_f32().min(0.1);
        running.last_frame = now;
        // The last frame writes the screenshot: a second Ctrl-C from here on finds it being written.
        let screenshot =
            if last && self.options.stop.begin_writing() { self.options.screenshot.as_deref() } else { None };
        let report = running.session.frame(FrameInput { dt, panel: Some(raw_input), screenshot, capture: false });
        // The frame's swap may be what found the X server gone: nothing more may ask the window.
        if self.x_server.as_ref().is_some_and(XServer::lost) {
            return event_loop.exit();
        }
        if let (Some(output), Some(window)) = (report.platform_output, running.session.renderer().window()) {
            running.egui.handle_platform_output(window, output);
        }
        for error in &report.errors {
            log::error!("{error}");
        }
        for request in &report.requests {
            match *request {
                Request::Relaunch => {
                    self.report.relaunch = true;
                    return self.close(event_loop);
                }
                Request::SwitchRenderer(api) => self.switch_renderer(event_loop, api, false),
                Request::ReopenRenderer(api) => self.switch_renderer(event_loop, api, true),
            }
        }
        if !report.drawn {
            return;
        }
        self.report.frames += 1;
        if last {
            self.close(event_loop);
        }
    }

    /// Draws with `api` from now on, the demo's state carried over; where it cannot open, the
    /// window goes on as it was and the panel says why. `without_cuda`: opened with the CPU
    /// backend (after a kernel fault, when the session restarts its demo on a new device).
    fn switch_renderer(&mut self, event_loop: &ActiveEventLoop, api: GraphicsApi, without_cuda: bool) {
        let opened = self.open_renderer(event_loop, api, without_cuda);
        let Some(running) = self.running.as_mut() else { return };
        let switched = opened.and_then(|(renderer, selection)| running.session.switch_renderer(renderer, selection));
        match switched {
            Ok(()) => {
                self.options.renderer = api;
                let Some(window) = running.session.renderer().window() else { return };
                running.egui = egui_winit::State::new(
                    egui::Context::default(),
                    egui::ViewportId::ROOT,
                    event_loop,
                    Some(window.scale_factor() as f32),
                    event_loop.system_theme(),
                    Some(running.session.renderer().max_texture_side()),
                );
                window.request_redraw();
            }
            Err(error) => {
                let note = format!("could not draw with {}: {error}", api.label());
                log::warn!("{note}");
                running.session.act(crate::ui::PanelAction::Say(note));
            }
        }
    }

    /// Esc or the close button: with `--screenshot`, one more frame is drawn and written, then
    /// the window closes; without, it closes now.
    fn close_after_a_last_frame(&mut self, event_loop: &ActiveEventLoop) {
        if self.options.screenshot.is_none() || self.closing || self.error.is_some() {
            return self.close(event_loop);
        }
        self.closing = true;
        self.about_to_wait(event_loop);
    }

    fn close(&mut self, event_loop: &ActiveEventLoop) {
        self.shut_down();
        event_loop.exit();
    }

    /// Finishes the GPU work, writes `--stats`, releases everything (a recording still running
    /// is finished).
    fn shut_down(&mut self) {
        let Some(mut running) = self.running.take() else { return };
        // Gone from the screen at once: what follows may wait (the GPU, a compile in flight).
        if let Some(window) = running.session.renderer().window() {
            window.set_visible(false);
        }
        // A second Ctrl-C gave the outputs up: the process is ending, nothing more is written.
        if !self.options.stop.begin_writing() {
            return;
        }
        let mut failure = running.session.finish().err();
        if let Some(path) = &self.options.stats {
            let facts = self.run_facts(&running);
            failure = failure.or(running.session.write_stats(path, &facts).err());
        }
        if let Some(trace) = &self.options.trace {
            failure = failure.or(running.session.write_trace(trace).err());
        }
        let (recordings, closed) = running.session.close();
        self.options.stop.outputs_written();
        self.report.recordings.extend(recordings);
        if let Some(error) = failure.or(closed) {
            log::error!("{error}");
            self.error.get_or_insert(error);
        }
    }

    /// What `--stats` says of the run besides what the session knows.
    fn run_facts(&self, running: &Running) -> RunFacts {
        RunFacts { frames: running.session.frames(), frames_asked: self.options.max_frames, size: running.size }
    }

    /// Whether the X server went away: nothing more can be drawn, and the window cannot be asked
    /// anything.
    fn display_gone(&self) -> bool {
        self.x_server.as_ref().is_some_and(XServer::lost)
    }

    /// The X server went away: writes what needs no display (`--stats`, `--trace-json`), leaves
    /// the rest, and ends the run with a sentence that says which is which.
    fn display_lost(&mut self) {
        let Some(mut running) = self.running.take() else { return };
        // A second Ctrl-C gave the outputs up: the process is ending, nothing more is written.
        if !self.options.stop.begin_writing() {
            return std::mem::forget(running);
        }
        let name = self.x_server.as_ref().map_or("", XServer::name);
        let mut said = vec![format!("the X server at {name} went away")];
        if let Some(path) = &self.options.stats {
            let facts = self.run_facts(&running);
            said.push(match running.session.write_stats(path, &facts) {
                Ok(_) => format!("--stats written to {}", path.display()),
                Err(error) => format!("--stats not written: {error}"),
            });
        }
        if let Some(trace) = &self.options.trace {
            said.push(match running.session.write_trace(trace) {
                Ok(_) => format!("--trace-json written to {}", trace.path.display()),
                Err(error) => format!("--trace-json not written: {error}"),
            });
        }
        if let Some(path) = &self.options.screenshot {
            said.push(format!("--screenshot {} not written (it is read from the display)", path.display()));
        }
        if let Some(dir) = &self.options.record {
            said.push(format!("the recording into {} ends where the display went", dir.display()));
        }
        // Its GL objects, context and window belong to a connection that is gone: releasing them
        // would call the X server, and the process ends next.
        std::mem::forget(running);
        self.options.stop.outputs_written();
        if self.options.stop.requested() {
            // Asked to stop first: the display went with it (`xvfb-run` ends its server on the same
            // Ctrl-C), so the run ends as stopped, and its exit status names the signal.
            log::warn!("stopped ({}): {}", self.options.stop.cause(), said.join("; "));
        } else {
            self.error.get_or_insert(Error::DisplayLost(said.join("; ")));
        }
    }
}
