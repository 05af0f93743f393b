//! The windowed app: a winit `ApplicationHandler` that owns everything (no globals). The GL
//! context, the demo and the panel are built in `resumed` and torn down, in order, on close.

mod vulkan;

use std::path::PathBuf;
use std::time::Instant;

use winit::application::ApplicationHandler;
use winit::event::{ElementState, MouseButton, MouseScrollDelta, WindowEvent};
use winit::event_loop::{ActiveEventLoop, ControlFlow, EventLoop};
use winit::keyboard::{Key, ModifiersState, NamedKey};
use winit::window::WindowId;

use self::vulkan::{Flow, VulkanWindow};
use crate::demo_kit::{DemoSpec, Drag, View};
use crate::gl;
use crate::gl::context::window::{WindowGl, catch_window_panics, winit_error_text};
use crate::guard::Guard;
use crate::record::{FrameRecorder, RecordReport};
use crate::render::Graphics;
use crate::runtime::{self, CudaOptions};
use crate::session::{RunFacts, Session};
use crate::transfer::WhatIf;
use crate::ui::{self, PanelAction};
use crate::{Error, Result};

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
    /// Draw with Vulkan (going on with OpenGL, and saying why, where it cannot).
    pub vulkan: bool,
    /// Demo flags that only some paths use (the panel says when its path ignores them).
    pub path_flags: Vec<crate::args::PathFlag>,
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
    catch_window_panics(|| {
        let event_loop = EventLoop::new().map_err(|e| {
            Error::Window(format!(
                "{}. Run inside a desktop session (or under Xvfb: `xvfb-run interop-lab`), or use headless mode \
                 (e.g. `interop-lab wave --headless`)",
                winit_error_text(&e)
            ))
        })?;
        event_loop.set_control_flow(ControlFlow::Poll);
        let mut app = App {
            options,
            running: None,
            vulkan: None,
            error: None,
            frames: 0,
            closing: false,
            relaunch: false,
            recordings: Vec::new(),
        };
        event_loop.run_app(&mut app).map_err(|e| Error::Window(winit_error_text(&e)))?;
        match app.error {
            Some(error) => Err(error),
            None => Ok(WindowReport { frames: app.frames, relaunch: app.relaunch, recordings: app.recordings }),
        }
    })
}

struct App {
    options: WindowOptions,
    running: Option<Running>,
    /// The window drawn with Vulkan, when that was asked for and could start.
    vulkan: Option<VulkanWindow>,
    error: Option<Error>,
    frames: u64,
    /// Closing was asked for (Esc, the window's close button): the next frame is the last, so
    /// that `--screenshot` is written as on every other way out.
    closing: bool,
    relaunch: bool,
    recordings: Vec<RecordReport>,
}

/// Everything that exists while the window is open. Torn down by [`Running::shut_down`].
struct Running {
    session: Session,
    egui: EguiWindow,
    input: Input,
    last_frame: Instant,
    relaunch: bool,
    /// The panel asked to draw with Vulkan instead.
    switch_renderer: bool,
    /// Frames go to this recording, when one runs.
    recorder: Option<FrameRecorder>,
    /// Recordings finished while the window ran.
    recordings: Vec<RecordReport>,
    /// Where `--stats` goes, and when the first frame started.
    stats: Option<(PathBuf, Option<Instant>)>,
    window: WindowGl,
}

struct EguiWindow {
    context: egui::Context,
    state: egui_winit::State,
    painter: egui_glow::Painter,
}

#[derive(Default)]
struct Input {
    orbiting: bool,
    panning: bool,
    cursor: Option<(f64, f64)>,
    modifiers: ModifiersState,
}

impl ApplicationHandler for App {
    fn resumed(&mut self, event_loop: &ActiveEventLoop) {
        if self.running.is_none() && self.vulkan.is_none() {
            self.open_window(event_loop);
        }
    }

    fn window_event(&mut self, event_loop: &ActiveEventLoop, _window: WindowId, event: WindowEvent) {
        let last = self.last_frame();
        if let Some(vulkan) = self.vulkan.as_mut() {
            let screenshot = if last { self.options.screenshot.as_deref() } else { None };
            match vulkan.window_event(&event, screenshot) {
                Ok(Flow::Continue) => {}
                Ok(Flow::Drawn) => {
                    self.frames += 1;
                    if last {
                        self.close(event_loop);
                    }
                }
                Ok(Flow::Close) => self.close_after_a_last_frame(event_loop),
                Ok(Flow::SwitchToGl(spec)) => {
                    self.frames += 1;
                    self.switch_renderer(event_loop, spec, false);
                }
                Err(error) => {
                    self.error = Some(error);
                    self.close(event_loop);
                }
            }
            return;
        }
        let Some(running) = self.running.as_mut() else {
            return;
        };
        let egui_consumed = running.egui.state.on_window_event(running.window.window(), &event).consumed;
        match event {
            WindowEvent::CloseRequested => self.close_after_a_last_frame(event_loop),
            WindowEvent::Resized(_) => running.window.resize(),
            WindowEvent::RedrawRequested => {
                let screenshot = last;
                match running.redraw(screenshot.then_some(self.options.screenshot.as_deref()).flatten()) {
                    Ok(()) => self.frames += 1,
                    Err(error) => {
                        self.error = Some(error);
                        self.close(event_loop);
                        return;
                    }
                }
                if running.relaunch {
                    self.relaunch = true;
                    self.close(event_loop);
                } else if screenshot {
                    self.close(event_loop);
                } else if running.switch_renderer {
                    let gl = running.window.gl().clone();
                    match running.session.demo().and_then(|demo| demo.spec_with_state(Graphics::Gl(&gl))) {
                        Ok(spec) => self.switch_renderer(event_loop, spec, true),
                        Err(error) => ui::push_message(&mut running.session.panel, error.to_string()),
                    }
                }
            }
            WindowEvent::ModifiersChanged(modifiers) => running.input.modifiers = modifiers.state(),
            WindowEvent::DroppedFile(path) => {
                let result = running.session.demo().and_then(|demo| {
                    let name = demo.name();
                    match demo.file_opener() {
                        Some(opener) => opener.open_file(&path),
                        None => Err(Error::Unavailable(format!(
                            "the {name} demo opens no files ({} ignored)",
                            path.display()
                        ))),
                    }
                });
                if let Err(error) = result {
                    ui::push_message(&mut running.session.panel, error.to_string());
                }
            }
            WindowEvent::KeyboardInput { event, .. }
                if !egui_consumed && event.state == ElementState::Pressed && running.key(&event.logical_key) =>
            {
                self.close_after_a_last_frame(event_loop);
            }
            WindowEvent::MouseInput { state, button, .. } if !egui_consumed || state == ElementState::Released => {
                let pressed = state == ElementState::Pressed;
                match button {
                    MouseButton::Left if running.input.modifiers.shift_key() => running.input.panning = pressed,
                    MouseButton::Left => running.input.orbiting = pressed,
                    MouseButton::Right | MouseButton::Middle => running.input.panning = pressed,
                    _ => {}
                }
            }
            WindowEvent::CursorMoved { position, .. } => running.cursor_moved(position.x, position.y),
            WindowEvent::MouseWheel { delta, .. } if !egui_consumed => {
                let steps = match delta {
                    MouseScrollDelta::LineDelta(_, y) => y,
                    MouseScrollDelta::PixelDelta(p) => (p.y / 40.0) as f32,
                };
                if let Some(view) = running.session.demo().ok().and_then(|demo| demo.view_controls()) {
                    view.zoom(steps);
                }
            }
            _ => {}
        }
    }

    fn about_to_wait(&mut self, _event_loop: &ActiveEventLoop) {
        if let Some(running) = &self.running {
            running.window.window().request_redraw();
        }
        if let Some(vulkan) = &self.vulkan {
            vulkan.request_redraw();
        }
    }

    fn exiting(&mut self, _event_loop: &ActiveEventLoop) {
        if let Some(running) = self.running.take() {
            self.shut_down(running);
        }
        self.shut_down_vulkan();
    }
}

impl App {
    /// Opens the window: drawn with Vulkan when that is asked for, else (or when Vulkan cannot
    /// start, saying why in the panel) with OpenGL.
    fn open_window(&mut self, event_loop: &ActiveEventLoop) {
        let mut fallback = None;
        if self.options.vulkan {
            match VulkanWindow::start(event_loop, &self.options) {
                Ok(window) => {
                    self.vulkan = Some(window);
                    return;
                }
                Err(error) => {
                    let note = format!("the Vulkan window could not start ({error}); drawing with OpenGL instead");
                    log::warn!("{note}");
                    fallback = Some(note);
                }
            }
        }
        match Running::start(event_loop, &self.options) {
            Ok(mut running) => {
                if let Some(note) = fallback {
                    ui::push_message(&mut running.session.panel, note);
                }
                running.window.window().request_redraw();
                self.running = Some(running);
            }
            Err(error) => {
                self.error = Some(error);
                event_loop.exit();
            }
        }
    }

    /// Closes the window and opens one drawn with Vulkan (`vulkan`) or OpenGL, on `spec`: the
    /// demo starts again with the settings it had.
    fn switch_renderer(&mut self, event_loop: &ActiveEventLoop, spec: DemoSpec, vulkan: bool) {
        if let Some(running) = self.running.take() {
            self.shut_down(running);
        }
        self.shut_down_vulkan();
        if self.error.is_some() {
            return event_loop.exit();
        }
        log::info!("drawing with {} from now on", if vulkan { "Vulkan" } else { "OpenGL" });
        self.options.spec = spec;
        self.options.vulkan = vulkan;
        self.open_window(event_loop);
    }

    fn shut_down(&mut self, running: Running) {
        let (recordings, failure) = running.shut_down();
        self.recordings.extend(recordings);
        if let Some(error) = failure {
            log::error!("{error}");
            self.error.get_or_insert(error);
        }
    }

    fn shut_down_vulkan(&mut self) {
        let Some(window) = self.vulkan.take() else { return };
        let (recordings, failure) = window.shut_down();
        self.recordings.extend(recordings);
        if let Some(error) = failure {
            log::error!("{error}");
            self.error.get_or_insert(error);
        }
    }

    /// Whether the frame about to be drawn is the last: `--frames` reached, a stop asked for
    /// (Ctrl-C), or the window asked to close.
    fn last_frame(&self) -> bool {
        self.closing
            || self.options.max_frames.is_some_and(|max| self.frames + 1 >= max)
            || self.options.stop.requested()
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
        if let Some(running) = self.running.take() {
            self.shut_down(running);
        }
        self.shut_down_vulkan();
        event_loop.exit();
    }
}

impl Running {
    fn start(event_loop: &ActiveEventLoop, options: &WindowOptions) -> Result<Self> {
        let title = format!("interop-lab — {}", options.spec.name());
        // From a checkout, kernels are read from its kernels/ folder and watched for edits.
        let mut options = options.clone();
        if options.cuda.kernels_dir.is_none() {
            options.cuda.kernels_dir = crate::kernel_watch::checkout_kernels_dir();
        }
        // The window draws while kernels compile: its first frame does not wait for NVRTC.
        options.cuda.background_compiles = true;
        let options = &options;
        let window = WindowGl::new(event_loop, &title, options.size, options.vsync, true)?;
        let gl = window.gl().clone();
        crate::stats::log_start_phase("window and GL context made");
        let selection = runtime::select(&options.cuda, &gl, &|name| window.proc_address(name));
        crate::stats::log_start_phase(&format!("backend chosen ({:?})", selection.transfer));
        let mut session = Guard::new(
            Session::new(&gl, selection, &options.spec, options.shaders_dir.clone())?,
            |session: Session| session.destroy(&gl),
        );
        session.panel.vsync = Some(options.vsync);
        session.set_what_if(options.what_if);
        session.say_flags_without_effect(&options.path_flags);
        session.open_panel_sections(&options.open_sections);
        if let Some(unmet) = session.selection().unmet_request.clone() {
            ui::push_message(&mut session.panel, unmet);
        }
        let painter = egui_glow::Painter::new(gl.clone(), "", None, false)
            .map_err(|error| Error::Gl(format!("egui painter: {error}")))?;
        let session = session.keep();
        crate::stats::log_start_phase("egui painter made");
        let context = egui::Context::default();
        let state = egui_winit::State::new(
            context.clone(),
            egui::ViewportId::ROOT,
            event_loop,
            Some(window.window().scale_factor() as f32),
            event_loop.system_theme(),
            Some(painter.max_texture_side()),
        );
        let recorder = options.record.as_deref().map(|dir| FrameRecorder::start(dir, "--record")).transpose()?;
        Ok(Self {
            session,
            egui: EguiWindow { context, state, painter },
            input: Input::default(),
            last_frame: Instant::now(),
            relaunch: false,
            switch_renderer: false,
            recorder,
            recordings: Vec::new(),
            stats: options.stats.clone().map(|path| (path, None)),
            window,
        })
    }

    fn redraw(&mut self, screenshot: Option<&std::path::Path>) -> Result<()> {
        if let Some((_, first_frame @ None)) = &mut self.stats {
            *first_frame = Some(Instant::now());
        }
        let gl = self.window.gl().clone();
        let size = self.window.size();
        let now = Instant::now();
        // Simulated time follows wall time, but a stall (a drag of the window) is not a jump.
        let dt = (now - self.last_frame).as_secs_f32().min(0.1);
        self.last_frame = now;

        gl::bind_default_framebuffer(&gl);
        let scale = self.window.window().scale_factor() as f32;
        let panel_px = ((self.session.panel.width_points * scale) as u32).min(size[0].saturating_sub(1));
        let view = View { origin: [panel_px, 0], size: [size[0] - panel_px, size[1]] };
        self.session.frame(&gl, view, dt);

        let (egui, window) = (&mut self.egui, &self.window);
        let (actions, platform_output) = self.session.time_panel(&gl, |session| {
            let raw_input = egui.state.take_egui_input(window.window());
            let mut actions = Vec::new();
            let output = egui.context.run_ui(raw_input, |ui| actions = session.panel(ui, &gl));
            let primitives = egui.context.tessellate(output.shapes, output.pixels_per_point);
            let mut textures = output.textures_delta;
            egui.painter.paint_and_update_textures(size, output.pixels_per_point, &primitives, &mut textures);
            (actions, output.platform_output)
        });
        egui.state.handle_platform_output(window.window(), platform_output);

        for action in actions {
            match action {
                PanelAction::SetVsync(on) => self.set_vsync(on),
                PanelAction::Relaunch => self.relaunch = true,
                PanelAction::ToggleRecording => self.toggle_recording(),
                PanelAction::SwitchToVulkan => self.switch_renderer = true,
                _ => {}
            }
        }
        if self.recorder.is_some() || screenshot.is_some() {
            let image = self.egui.painter.read_screen_rgba(size);
            let pixels: Vec<u8> = image.pixels.iter().flat_map(|c| c.to_array()).collect();
            if let Some(path) = screenshot {
                crate::output::write_rgba8(path, size, &pixels)?;
            }
            if let Some(recorder) = self.recorder.as_mut() {
                recorder.frame(size, pixels);
                let (frames, dropped) = recorder.counts();
                self.session.panel.recording = Some((recorder.dir().to_owned(), frames, dropped));
            }
        }
        let presenting = Instant::now();
        self.window.swap_buffers()?;
        self.session.add_host_time(crate::stats::Stage::Present, presenting);
        Ok(())
    }

    /// Starts a recording into a new folder of the working directory, or ends the one running.
    fn toggle_recording(&mut self) {
        match self.recorder.take() {
            Some(recorder) => {
                self.session.panel.recording = None;
                match recorder.finish() {
                    Ok(report) => {
                        let note = format!("recorded {} frames; video: {}", report.frames, report.ffmpeg_line(60));
                        log::info!("{note}");
                        ui::push_notice(&mut self.session.panel, note);
                        self.recordings.push(report);
                    }
                    Err(error) => ui::push_message(&mut self.session.panel, error.to_string()),
                }
            }
            None => {
                let stamp = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or_default();
                let dir = PathBuf::from(format!("interop-lab-recording-{stamp}"));
                match FrameRecorder::start(&dir, "the record button") {
                    Ok(recorder) => self.recorder = Some(recorder),
                    Err(error) => ui::push_message(&mut self.session.panel, error.to_string()),
                }
            }
        }
    }

    fn set_vsync(&mut self, on: bool) {
        match self.window.set_vsync(on) {
            Ok(()) => {
                self.window.set_vsync_flag(on);
                self.session.panel.vsync = Some(on);
            }
            Err(error) => ui::push_message(&mut self.session.panel, error.to_string()),
        }
    }

    /// Handles a key; returns true when the app should close.
    fn key(&mut self, key: &Key) -> bool {
        let panel = &mut self.session.panel;
        match key {
            Key::Named(NamedKey::Escape) => return true,
            Key::Named(NamedKey::Space) => panel.paused = !panel.paused,
            Key::Character(c) if c.as_str() == "s" => {
                panel.paused = true;
                panel.step_once = true;
            }
            Key::Character(c) if c.as_str() == "v" => {
                let on = !self.window.vsync();
                self.set_vsync(on);
            }
            _ => {}
        }
        false
    }

    fn cursor_moved(&mut self, x: f64, y: f64) {
        let previous = self.input.cursor.replace((x, y));
        let Some((px, py)) = previous else { return };
        let (dx, dy) = ((x - px) as f32, (y - py) as f32);
        let height = self.window.size()[1] as f32;
        let (orbiting, panning) = (self.input.orbiting, self.input.panning);
        if let Some(view) = self.session.demo().ok().and_then(|demo| demo.view_controls()) {
            if panning {
                view.drag(Drag::Secondary, dx, dy, height);
            } else if orbiting {
                view.drag(Drag::Primary, dx, dy, height);
            }
        }
    }

    /// Finishes the GPU work and writes `--stats`, then releases GL objects while the context is
    /// current, then the context and window; ends a recording still running. Returns the
    /// recordings made and the first error met.
    fn shut_down(mut self) -> (Vec<RecordReport>, Option<Error>) {
        // Gone from the screen at once: what follows may wait (the GPU, a compile in flight).
        self.window.window().set_visible(false);
        let mut failure = self.session.finish(self.window.gl()).err();
        if let Some((path, Some(first_frame))) = &self.stats {
            let run = RunFacts {
                size: self.window.size(),
                frames: self.session.frames(),
                frames_asked: None,
                wall_seconds: first_frame.elapsed().as_secs_f64(),
            };
            let written = self.session.stats_json(&run).and_then(|json| {
                let text = serde_json::to_string_pretty(&json).map_err(|e| Error::InvalidInput(e.to_string()))?;
                crate::output::write(path, (text + "\n").as_bytes())
            });
            failure = failure.or(written.err());
        }
        self.session.destroy(self.window.gl());
        self.egui.painter.destroy();
        if let Some(recorder) = self.recorder.take() {
            match recorder.finish() {
                Ok(report) => self.recordings.push(report),
                Err(error) => log::error!("{error}"),
            }
        }
        (self.recordings, failure)
    }
}
