//! The window drawn with Vulkan (`--renderer vulkan`): a winit window, its swapchain, the demo on
//! the Vulkan transfer path (CUDA writing memory Vulkan allocated) or the CPU backend, and an
//! egui panel drawn with Vulkan: the device and path, the frame's stages, the timeline and the
//! demo's own settings (launch parameters included). `app/mod.rs` runs it inside its event loop and
//! goes on with OpenGL when it cannot start.

use std::path::Path;
use std::rc::Rc;
use std::time::Instant;

use winit::event::{ElementState, MouseButton, MouseScrollDelta, WindowEvent};
use winit::event_loop::ActiveEventLoop;
use winit::keyboard::{Key, NamedKey};
use winit::raw_window_handle::{HasDisplayHandle, HasWindowHandle};
use winit::window::Window;

use crate::demo_kit::{Demo, DemoEnv, Drag, View};
use crate::record::{FrameRecorder, RecordReport};
use crate::render::vulkan::VulkanScenes;
use crate::render::{Graphics, SceneDrawer};
use crate::runtime::CudaRuntime;
use crate::stats::{FrameHistory, FrameSample, LateGpuTimes, Stage, StageTimes};
use crate::ui::timeline::TimelineState;
use crate::ui::vulkan::{PanelInfo, PanelState, panel};
use crate::vk::device::WindowHandles;
use crate::vk::frame::VulkanGraphics;
use crate::vk::panel::PanelPainter;
use crate::vk::swapchain::Swapchain;
use crate::{Error, Result};

/// Frames the renderer may have in flight (the command ring's size).
const FRAMES_IN_FLIGHT: usize = 3;

/// What a window event asks of the event loop.
pub(crate) enum Flow {
    /// Nothing.
    Continue,
    /// A frame was drawn.
    Drawn,
    /// Close the window.
    Close,
    /// Close this window and draw the demo, its settings kept, with OpenGL.
    SwitchToGl(crate::demo_kit::DemoSpec),
}

/// Everything that exists while the Vulkan window is open.
pub(crate) struct VulkanWindow {
    // Field order is drop order: what draws goes before the device, the device before the window.
    demo: Option<Box<dyn Demo>>,
    renderer: VulkanScenes,
    painter: PanelPainter,
    swapchain: Swapchain,
    vulkan: VulkanGraphics,
    cuda: Option<Rc<CudaRuntime>>,
    egui: egui::Context,
    egui_state: egui_winit::State,
    history: FrameHistory,
    /// The devices and the path, in words (they do not change while the window is open).
    info: PanelInfo,
    timeline: TimelineState,
    /// The trace section shows the setup's calls (else the last frame's).
    trace_setup: bool,
    messages: Vec<String>,
    paused: bool,
    step_once: bool,
    panel_width_points: f32,
    frame: u64,
    last_frame: Instant,
    /// The swapchain and the target must be made again (a resize, vsync switched, out of date).
    resized: bool,
    /// The window size they were last made for.
    made_for: [u32; 2],
    drag: Option<Drag>,
    cursor: Option<(f64, f64)>,
    shift: bool,
    /// Frames go to this recording, when one runs (`--record`, or the panel's button).
    recorder: Option<FrameRecorder>,
    /// Recordings finished while the window ran.
    recordings: Vec<RecordReport>,
    /// The panel's record button was pressed.
    toggle_recording: bool,
    /// The panel asked to draw with OpenGL instead.
    switch_renderer: bool,
    /// The panel's vsync box changed.
    toggle_vsync: bool,
    /// Where `--stats` goes, and when the window started.
    stats: Option<std::path::PathBuf>,
    started: Instant,
    window: Window,
}

impl VulkanWindow {
    /// Opens the window and everything it draws with; fails (with the reason) where Vulkan cannot
    /// present to it, so the caller can go on with OpenGL.
    pub(crate) fn start(event_loop: &ActiveEventLoop, options: &super::WindowOptions) -> Result<Self> {
        let title = format!("interop-lab — {} (Vulkan)", options.spec.name());
        let attributes = Window::default_attributes()
            .with_title(title)
            .with_inner_size(winit::dpi::LogicalSize::new(options.size[0], options.size[1]));
        let window = event_loop.create_window(attributes).map_err(|e| Error::Window(e.to_string()))?;
        let handles = WindowHandles {
            display: window.display_handle().map_err(|e| Error::Window(e.to_string()))?.as_raw(),
            window: window.window_handle().map_err(|e| Error::Window(e.to_string()))?.as_raw(),
        };
        let size = physical_size(&window);
        let (vulkan, cuda, transfer) = crate::runtime::open_vulkan(&options.cuda, size, Some(handles))?;
        let swapchain = Swapchain::new(vulkan.context(), size, options.vsync)?;
        let painter = PanelPainter::new(&vulkan, FRAMES_IN_FLIGHT)?;
        log::info!("Vulkan window on {}, transfer path: {}", vulkan.context().description(), transfer.label());
        let graphics = Graphics::Vulkan(&vulkan);
        let env = DemoEnv { graphics, cuda: cuda.clone(), transfer };
        let mut demo = options.spec.create(&env)?;
        let mut renderer = VulkanScenes::new();
        let view = View { origin: [0, 0], size };
        if let Err(error) = renderer.prepare(graphics, &demo.scene(&view)) {
            demo.destroy(graphics);
            renderer.destroy(graphics);
            return Err(error);
        }
        let info = PanelInfo::of(&vulkan, cuda.as_deref(), transfer);
        let egui = egui::Context::default();
        let egui_state = egui_winit::State::new(
            egui.clone(),
            egui::ViewportId::ROOT,
            event_loop,
            Some(window.scale_factor() as f32),
            event_loop.system_theme(),
            Some(vulkan.context().max_image_size() as usize),
        );
        let mut messages = Vec::new();
        let recorder = options.record.as_deref().map(|dir| FrameRecorder::start(dir, "--record")).transpose()?;
        demo.pipeline_mut().set_what_if(options.what_if);
        messages.extend(options.what_if.inapplicable(transfer));
        messages.extend(options.path_flags.iter().filter_map(|flag| flag.ignored_on(transfer)));
        window.request_redraw();
        Ok(Self {
            demo: Some(demo),
            renderer,
            painter,
            swapchain,
            vulkan,
            cuda,
            egui,
            egui_state,
            history: FrameHistory::new(600),
            info,
            timeline: TimelineState::default(),
            trace_setup: false,
            messages,
            paused: false,
            step_once: false,
            panel_width_points: 0.0,
            frame: 0,
            last_frame: Instant::now(),
            resized: false,
            made_for: size,
            drag: None,
            cursor: None,
            shift: false,
            recorder,
            recordings: Vec::new(),
            toggle_recording: false,
            switch_renderer: false,
            toggle_vsync: false,
            stats: options.stats.clone(),
            started: Instant::now(),
            window,
        })
    }

    /// Asks for the next frame.
    pub(crate) fn request_redraw(&self) {
        self.window.request_redraw();
    }

    /// Handles a window event; `screenshot` is where a frame drawn now is written, when it is the
    /// last one.
    pub(crate) fn window_event(&mut self, event: &WindowEvent, screenshot: Option<&Path>) -> Result<Flow> {
        let consumed = self.egui_state.on_window_event(&self.window, event).consumed;
        match event {
            WindowEvent::CloseRequested => return Ok(Flow::Close),
            WindowEvent::Resized(_) => self.resized = true,
            WindowEvent::RedrawRequested => {
                self.redraw(screenshot)?;
                let graphics = Graphics::Vulkan(&self.vulkan);
                return Ok(match self.demo.as_mut().filter(|_| std::mem::take(&mut self.switch_renderer)) {
                    Some(demo) => match demo.spec_with_state(graphics) {
                        Ok(spec) => Flow::SwitchToGl(spec),
                        Err(error) => {
                            self.messages.push(format!("cannot keep the demo's state for OpenGL: {error}"));
                            Flow::Drawn
                        }
                    },
                    None => Flow::Drawn,
                });
            }
            WindowEvent::ModifiersChanged(modifiers) => self.shift = modifiers.state().shift_key(),
            WindowEvent::KeyboardInput { event, .. } if !consumed && event.state == ElementState::Pressed => {
                match &event.logical_key {
                    Key::Named(NamedKey::Escape) => return Ok(Flow::Close),
                    Key::Named(NamedKey::Space) => self.paused = !self.paused,
                    Key::Character(c) if c.as_str() == "s" => (self.paused, self.step_once) = (true, true),
                    Key::Character(c) if c.as_str() == "v" => self.toggle_vsync(),
                    _ => {}
                }
            }
            WindowEvent::MouseInput { state, button, .. } if !consumed || *state == ElementState::Released => {
                self.drag = match (state, button) {
                    (ElementState::Released, _) => None,
                    (_, MouseButton::Left) if self.shift => Some(Drag::Secondary),
                    (_, MouseButton::Left) => Some(Drag::Primary),
                    (_, MouseButton::Right | MouseButton::Middle) => Some(Drag::Secondary),
                    _ => self.drag,
                };
            }
            WindowEvent::CursorMoved { position, .. } => {
                let previous = self.cursor.replace((position.x, position.y));
                let height = physical_size(&self.window)[1] as f32;
                if let (Some((x, y)), Some(drag), Some(demo)) = (previous, self.drag, self.demo.as_mut())
                    && let Some(view) = demo.view_controls()
                {
                    view.drag(drag, (position.x - x) as f32, (position.y - y) as f32, height);
                }
            }
            WindowEvent::MouseWheel { delta, .. } if !consumed => {
                let steps = match delta {
                    MouseScrollDelta::LineDelta(_, y) => *y,
                    MouseScrollDelta::PixelDelta(p) => (p.y / 40.0) as f32,
                };
                if let Some(view) = self.demo.as_mut().and_then(|demo| demo.view_controls()) {
                    view.zoom(steps);
                }
            }
            WindowEvent::DroppedFile(path) => {
                if let Some(demo) = self.demo.as_mut() {
                    let name = demo.name();
                    let opened = match demo.file_opener() {
                        Some(opener) => opener.open_file(path),
                        None => Err(Error::Unavailable(format!("the {name} demo opens no files"))),
                    };
                    if let Err(error) = opened {
                        self.messages.push(error.to_string());
                    }
                }
            }
            _ => {}
        }
        Ok(Flow::Continue)
    }

    fn redraw(&mut self, screenshot: Option<&Path>) -> Result<()> {
        let size = physical_size(&self.window);
        if size[0] == 0 || size[1] == 0 {
            return Ok(()); // minimised: nothing to draw into
        }
        if self.resized || size != self.made_for {
            (self.resized, self.made_for) = (false, size);
            self.vulkan.resize(size)?;
            self.swapchain.recreate(size)?;
        }
        let Some(acquired) = self.swapchain.acquire()? else {
            self.resized = true; // out of date: made again next frame
            return Ok(());
        };
        let started = Instant::now();
        let frame_us = (started - self.last_frame).as_secs_f64() * 1e6;
        let dt = (started - self.last_frame).as_secs_f32().min(0.1);
        self.last_frame = started;
        let graphics = Graphics::Vulkan(&self.vulkan);
        let Some(demo) = self.demo.as_mut() else { return Ok(()) };

        let mut stages = StageTimes::default();
        if !self.paused || self.step_once {
            self.step_once = false;
            match demo.step(graphics, self.frame, dt) {
                Ok(times) => stages = times,
                Err(error) => {
                    log::error!("{error}");
                    self.messages.push(error.to_string());
                    self.paused = true;
                }
            }
        }

        // The panel's layout first: the demo is drawn right of it.
        let panel_started = Instant::now();
        let raw_input = self.egui_state.take_egui_input(&self.window);
        let info = &self.info;
        let mut state = PanelState {
            history: &self.history,
            timeline: &mut self.timeline,
            trace: self.cuda.as_ref().map(|cuda| cuda.context.trace()),
            trace_setup: &mut self.trace_setup,
            messages: &mut self.messages,
            paused: &mut self.paused,
            step_once: &mut self.step_once,
            recording: self.recorder.as_ref().map(|r| (r.dir().display().to_string(), r.counts())),
            toggle_recording: &mut self.toggle_recording,
            switch_renderer: &mut self.switch_renderer,
            vsync: self.swapchain.vsync(),
            toggle_vsync: &mut self.toggle_vsync,
            open_trace: false,
            window: true,
        };
        let mut width_points = self.panel_width_points;
        let mut output = self.egui.run_ui(raw_input, |ui| width_points = panel(ui, demo.as_mut(), info, &mut state));
        self.panel_width_points = width_points;
        self.egui_state.handle_platform_output(&self.window, output.platform_output);
        let primitives = self.egui.tessellate(output.shapes, output.pixels_per_point);
        self.painter.update_textures(&self.vulkan, &mut output.textures_delta)?;
        let panel_host_us = panel_started.elapsed().as_secs_f64() * 1e6;

        let scale = self.window.scale_factor() as f32;
        let panel_px = ((self.panel_width_points * scale) as u32).min(size[0] - 1);
        let view = View { origin: [panel_px, 0], size: [size[0] - panel_px, size[1]] };
        let draw_started = Instant::now();
        self.vulkan.begin_frame([0.02, 0.02, 0.03, 1.0], self.frame)?;
        let drawn = self.renderer.draw(graphics, &demo.scene(&view), &view);
        let painted = self.painter.paint(&self.vulkan, output.pixels_per_point, &primitives);
        let presenting = Instant::now();
        let fits = self.vulkan.end_frame_presenting(&mut self.swapchain, &acquired)?;
        if let Some(cuda) = &self.cuda {
            cuda.context.trace().end_frame(); // the frame's calls, the submission included
        }
        stages.set_host(Stage::Present, presenting.elapsed().as_secs_f64() * 1e6);
        stages.set_host(Stage::Draw, (presenting - draw_started).as_secs_f64() * 1e6);
        stages.set_host(Stage::Panel, panel_host_us);
        if let Err(error) = drawn.and(painted) {
            self.messages.push(error.to_string());
        }
        if !fits {
            self.resized = true;
        }
        self.history.push(FrameSample { frame: self.frame, frame_us, stages });
        self.collect_gpu_times()?;
        if self.frame == 0
            && let Some(age) = crate::stats::since_process_start()
        {
            log::info!("first frame drawn {:.2} s after the process started", age.as_secs_f64());
        }
        self.frame += 1;
        if self.recorder.is_some() || screenshot.is_some() {
            let pixels = self.vulkan.read_rgba()?;
            if let Some(path) = screenshot {
                crate::output::write_rgba8(path, size, &pixels)?;
            }
            if let Some(recorder) = self.recorder.as_mut() {
                recorder.frame(size, pixels);
            }
        }
        if std::mem::take(&mut self.toggle_recording) {
            self.toggle_recording();
        }
        if std::mem::take(&mut self.toggle_vsync) {
            self.toggle_vsync();
        }
        Ok(())
    }

    /// Presents with vsync on or off from the next frame (the swapchain is made again).
    fn toggle_vsync(&mut self) {
        let on = !self.swapchain.vsync();
        self.swapchain.set_vsync(on);
        self.resized = true;
    }

    /// Starts a recording into a new folder of the working directory, or ends the one running.
    fn toggle_recording(&mut self) {
        match self.recorder.take() {
            Some(recorder) => match recorder.finish() {
                Ok(report) => {
                    self.messages.push(format!("recorded {} frames; video: {}", report.frames, report.ffmpeg_line(60)));
                    self.recordings.push(report);
                }
                Err(error) => self.messages.push(error.to_string()),
            },
            None => {
                let stamp = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or_default();
                match FrameRecorder::start(Path::new(&format!("interop-lab-recording-{stamp}")), "the record button") {
                    Ok(recorder) => self.recorder = Some(recorder),
                    Err(error) => self.messages.push(error.to_string()),
                }
            }
        }
    }

    /// GPU times that arrived: the frame's commands (timestamps) and CUDA's stages (events).
    fn collect_gpu_times(&mut self) -> Result<()> {
        for (frame, microseconds) in self.vulkan.take_gpu_times(false)? {
            let mut times = StageTimes::default();
            times.set_gpu(Stage::Draw, microseconds);
            self.history.add_late(LateGpuTimes { frame, times });
        }
        if let Some(demo) = self.demo.as_mut() {
            while let Some(late) = demo.pipeline_mut().transfer().poll_gpu_times()? {
                self.history.add_late(late);
            }
        }
        Ok(())
    }

    /// Finishes the GPU work and releases everything (the demo's buffers while the device lives);
    /// ends a recording still running. Returns the recordings made and the first error met.
    pub(crate) fn shut_down(mut self) -> (Vec<RecordReport>, Option<Error>) {
        let graphics = Graphics::Vulkan(&self.vulkan);
        let mut failure = None;
        if let Some(mut demo) = self.demo.take() {
            failure = demo.pipeline_mut().transfer().synchronize().err();
            failure = failure.or(demo.finish(graphics).err());
            demo.destroy(graphics);
        }
        self.renderer.destroy(graphics);
        failure = failure.or(self.vulkan.wait_idle().err());
        if let Some(path) = self.stats.take() {
            failure = failure.or(self.write_stats(&path).err());
        }
        if let Some(recorder) = self.recorder.take() {
            match recorder.finish() {
                Ok(report) => self.recordings.push(report),
                Err(error) => failure = failure.or(Some(error)),
            }
        }
        (std::mem::take(&mut self.recordings), failure)
    }

    /// `--stats`: the stage timings of the frames drawn, as the headless runs write them.
    fn write_stats(&mut self, path: &Path) -> Result<()> {
        self.collect_gpu_times()?;
        let device = self.vulkan.context().description();
        let json = serde_json::json!({
            "renderer": "vulkan",
            "window": true,
            "vulkan_device": { "name": device.name, "driver": device.driver, "api_version": device.api_version },
            "backend": if self.cuda.is_some() { "cuda" } else { "cpu" },
            "size": physical_size(&self.window),
            "frames": self.frame,
            "wall_seconds": self.started.elapsed().as_secs_f64(),
            "stages_us": self.history.summary(None).stages,
        });
        let text = serde_json::to_string_pretty(&json).map_err(|e| Error::InvalidInput(e.to_string()))?;
        crate::output::write(path, (text + "\n").as_bytes())
    }
}

/// The window's size in physical pixels.
fn physical_size(window: &Window) -> [u32; 2] {
    let size = window.inner_size();
    [size.width, size.height]
}
