//! Headless runs drawn with Vulkan (`--renderer vulkan --headless`): the demo's frames into an
//! offscreen Vulkan target, the last one as PNG, the stage times as JSON. With CUDA, kernels write
//! Vulkan memory CUDA imported, ordered by timeline semaphores (the Vulkan transfer path) on the
//! Vulkan device that is the CUDA device; without it, the CPU backend writes host-visible Vulkan
//! memory. With `--panel` the Vulkan window's panel is drawn into the frames too.

use std::time::Instant;

use serde_json::json;

use crate::demo_kit::{Demo, DemoEnv, View};
use crate::headless::{HeadlessOptions, HeadlessReport};
use crate::record::FrameRecorder;
use crate::render::vulkan::VulkanScenes;
use crate::render::{Graphics, SceneDrawer};
use crate::runtime::{CudaRuntime, TransferRequest};
use crate::stats::{FrameHistory, FrameSample, LateGpuTimes, Stage, StageTimes};
use crate::transfer::TransferKind;
use crate::ui::PanelSection;
use crate::ui::timeline::TimelineState;
use crate::ui::vulkan::{PanelInfo, PanelState, panel};
use crate::vk::frame::VulkanGraphics;
use crate::vk::panel::PanelPainter;
use crate::{Error, Result};

/// Runs the demo headless on Vulkan.
pub fn run(options: &HeadlessOptions) -> Result<HeadlessReport> {
    options.check()?;
    if options.cuda.transfer != TransferRequest::Auto {
        return Err(Error::InvalidInput(
            "--transfer chooses among the OpenGL paths; the Vulkan renderer shares Vulkan memory with CUDA (or the CPU \
             backend writes it): drop --transfer, or use --renderer gl"
                .to_owned(),
        ));
    }
    if options.shaders_dir.is_some() {
        log::warn!("--shaders replaces the GL shaders; the Vulkan renderer uses its built-in ones");
    }
    let (vulkan, cuda, transfer) = crate::runtime::open_vulkan(&options.cuda, options.size, None)?;
    log::info!("Vulkan renderer on {}, transfer path: {}", vulkan.context().description(), transfer.label());
    let graphics = Graphics::Vulkan(&vulkan);
    let env = DemoEnv { graphics, cuda: cuda.clone(), transfer };
    let mut demo = options.spec.create(&env)?;
    demo.pipeline_mut().set_what_if(options.what_if);
    for note in options.what_if.inapplicable(transfer) {
        log::warn!("{note}");
    }
    for note in options.path_flags.iter().filter_map(|flag| flag.ignored_on(transfer)) {
        log::warn!("{note}");
    }
    let mut renderer = VulkanScenes::new();
    let view = View { origin: [0, 0], size: options.size };
    let open_trace = options.open_sections.contains(&PanelSection::Trace);
    if let (Some(cuda), true) = (&cuda, open_trace) {
        cuda.context.trace().set_per_frame(true);
    }
    let mut panel = if options.panel {
        Some(HeadlessPanel::new(&vulkan, open_trace, PanelInfo::of(&vulkan, cuda.as_deref(), transfer))?)
    } else {
        None
    };
    let result = renderer.prepare(graphics, &demo.scene(&view)).and_then(|()| {
        let mut frame =
            Frame { vulkan: &vulkan, cuda: cuda.as_deref(), renderer: &mut renderer, panel: panel.as_mut() };
        render(&mut frame, demo.as_mut(), options)
    });
    let finished = demo.finish(graphics);
    demo.destroy(graphics);
    renderer.destroy(graphics);
    let report = result?;
    finished?;
    Ok(report)
}

/// Each frame's Vulkan timestamps as the GPU time of its draw stage.
fn add_gpu_times(history: &mut FrameHistory, times: Vec<(u64, f64)>) {
    for (frame, microseconds) in times {
        let mut stages = StageTimes::default();
        stages.set_gpu(Stage::Draw, microseconds);
        history.add_late(LateGpuTimes { frame, times: stages });
    }
}

/// What a headless Vulkan frame draws with.
struct Frame<'a> {
    vulkan: &'a VulkanGraphics,
    cuda: Option<&'a CudaRuntime>,
    renderer: &'a mut VulkanScenes,
    panel: Option<&'a mut HeadlessPanel>,
}

/// The Vulkan panel drawn into headless frames (`--panel`): one egui point is one pixel.
struct HeadlessPanel {
    painter: PanelPainter,
    context: egui::Context,
    started: Instant,
    timeline: TimelineState,
    trace_setup: bool,
    messages: Vec<String>,
    open_trace: bool,
    /// The devices and the path, in words.
    info: PanelInfo,
}

impl HeadlessPanel {
    fn new(vulkan: &VulkanGraphics, open_trace: bool, info: PanelInfo) -> Result<Self> {
        Ok(Self {
            painter: PanelPainter::new(vulkan, 3)?,
            context: egui::Context::default(),
            started: Instant::now(),
            timeline: TimelineState::default(),
            trace_setup: false,
            messages: Vec::new(),
            open_trace,
            info,
        })
    }

    /// Lays the panel out for this frame and uploads what its textures need; returns what to
    /// paint and the panel's width in pixels.
    fn layout(
        &mut self,
        frame: (&VulkanGraphics, Option<&CudaRuntime>),
        demo: &mut dyn Demo,
        history: &FrameHistory,
    ) -> Result<(Vec<egui::ClippedPrimitive>, f32, u32)> {
        let (vulkan, cuda) = frame;
        let [width, height] = vulkan.target().size();
        let input = egui::RawInput {
            screen_rect: Some(egui::Rect::from_min_size(egui::Pos2::ZERO, egui::vec2(width as f32, height as f32))),
            time: Some(self.started.elapsed().as_secs_f64()),
            ..Default::default()
        };
        let (mut paused, mut step_once, mut toggle_recording, mut switch_renderer, mut toggle_vsync) =
            (false, false, false, false, false);
        let mut state = PanelState {
            history,
            timeline: &mut self.timeline,
            trace: cuda.map(|cuda| cuda.context.trace()),
            trace_setup: &mut self.trace_setup,
            messages: &mut self.messages,
            paused: &mut paused,
            step_once: &mut step_once,
            recording: None,
            toggle_recording: &mut toggle_recording,
            switch_renderer: &mut switch_renderer,
            vsync: false,
            toggle_vsync: &mut toggle_vsync,
            open_trace: self.open_trace,
            window: false,
        };
        let mut width_points = 0.0;
        let mut output = self.context.run_ui(input, |ui| width_points = panel(ui, demo, &self.info, &mut state));
        self.painter.update_textures(vulkan, &mut output.textures_delta)?;
        let primitives = self.context.tessellate(output.shapes, output.pixels_per_point);
        let width_px = ((width_points * output.pixels_per_point) as u32).min(width.saturating_sub(1));
        Ok((primitives, output.pixels_per_point, width_px))
    }
}

fn render(frame_parts: &mut Frame<'_>, demo: &mut dyn Demo, options: &HeadlessOptions) -> Result<HeadlessReport> {
    let Frame { vulkan, cuda, renderer, panel } = frame_parts;
    let (vulkan, cuda) = (*vulkan, *cuda);
    let graphics = Graphics::Vulkan(vulkan);
    let mut recorder = options.record.as_deref().map(|dir| FrameRecorder::start(dir, "--record")).transpose()?;
    let mut history = FrameHistory::new(options.frames.min(10_000) as usize);
    let started = Instant::now();
    let mut frames = 0;
    let mut last_start: Option<Instant> = None;
    while frames < options.frames && !(frames > 0 && options.stop.requested()) {
        let frame = u64::from(frames);
        frames += 1;
        let frame_started = Instant::now();
        let frame_us = last_start.map_or(f64::NAN, |t| (frame_started - t).as_secs_f64() * 1e6);
        last_start = Some(frame_started);
        let mut stages = demo.step(graphics, frame, options.dt)?;
        let panel_started = Instant::now();
        let laid_out = match panel.as_deref_mut() {
            Some(panel) => Some(panel.layout((vulkan, cuda), demo, &history)?),
            None => None,
        };
        if laid_out.is_some() {
            stages.set_host(Stage::Panel, panel_started.elapsed().as_secs_f64() * 1e6);
        }
        let panel_px = laid_out.as_ref().map_or(0, |(_, _, width)| *width);
        let view = View { origin: [panel_px, 0], size: [options.size[0] - panel_px, options.size[1]] };
        let draw_started = Instant::now();
        vulkan.begin_frame([0.0, 0.0, 0.0, 1.0], frame)?;
        let mut drawn = renderer.draw(graphics, &demo.scene(&view), &view);
        if let (Some(panel), Some((primitives, pixels_per_point, _))) = (panel.as_deref_mut(), &laid_out) {
            drawn = drawn.and(panel.painter.paint(vulkan, *pixels_per_point, primitives));
        }
        vulkan.end_frame()?;
        if let Some(cuda) = cuda {
            cuda.context.trace().end_frame(); // the frame's calls, the submission included
        }
        drawn?;
        stages.set_host(Stage::Draw, draw_started.elapsed().as_secs_f64() * 1e6);
        history.push(FrameSample { frame, frame_us, stages });
        if frame == 0
            && let Some(age) = crate::stats::since_process_start()
        {
            log::info!("first frame drawn {:.2} s after the process started", age.as_secs_f64());
        }
        if let Some(recorder) = recorder.as_mut() {
            recorder.frame(options.size, vulkan.read_rgba()?);
        }
        add_gpu_times(&mut history, vulkan.take_gpu_times(false)?);
        while let Some(late) = demo.pipeline_mut().transfer().poll_gpu_times()? {
            history.add_late(late);
        }
    }
    demo.pipeline_mut().transfer().synchronize()?;
    add_gpu_times(&mut history, vulkan.take_gpu_times(true)?);
    while let Some(late) = demo.pipeline_mut().transfer().poll_gpu_times()? {
        history.add_late(late);
    }
    let pixels = vulkan.read_rgba()?;
    let wall = started.elapsed().as_secs_f64();
    if let Some(path) = &options.screenshot {
        crate::output::write_rgba8(path, options.size, &pixels)?;
    }
    if frames < options.frames {
        log::warn!("stopped after {frames} of {} frames; writing what was asked for", options.frames);
    }
    let summary = history.summary(None);
    let transfer = demo.pipeline().kind();
    let what_if = demo.pipeline().what_if_report();
    if let Some(report) = &what_if {
        log::warn!("what if: {report}");
    }
    let frames_per_second = f64::from(frames) / wall;
    let device = vulkan.context().description();
    let json = json!({
        "demo": demo.name(),
        "renderer": "vulkan",
        "vulkan_device": { "name": device.name, "driver": device.driver, "api_version": device.api_version },
        "backend": if transfer == TransferKind::Cpu { "cpu" } else { "cuda" },
        "transfer": transfer,
        "size": options.size,
        "frames": frames,
        "frames_asked": options.frames,
        "wall_seconds": wall,
        "frames_per_second": frames_per_second,
        "host_peak_rss_bytes": crate::host_memory::status_bytes("VmHWM:"),
        "stages_us": summary.stages,
        "what_if": { "skip_semaphore_wait": options.what_if.skip_semaphore_wait, "report": what_if },
    });
    if let Some(path) = &options.stats {
        let text = serde_json::to_string_pretty(&json).map_err(|e| Error::InvalidInput(e.to_string()))?;
        crate::output::write(path, (text + "\n").as_bytes())?;
    }
    let recording = recorder.map(FrameRecorder::finish).transpose()?;
    Ok(HeadlessReport { json, summary, pixels, frames_per_second, frames, recording })
}
