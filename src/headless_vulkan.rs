//! Headless runs drawn with Vulkan (`--renderer vulkan --headless`): the demo's frames into an
//! offscreen Vulkan target, the last one as PNG, the stage times as JSON. With CUDA, kernels write
//! Vulkan memory CUDA imported, ordered by timeline semaphores (the Vulkan transfer path) on the
//! Vulkan device that is the CUDA device; without it, the CPU backend writes host-visible Vulkan
//! memory. The panel is drawn with OpenGL only.

use std::time::Instant;

use serde_json::json;

use crate::demo::{Demo, DemoEnv, View};
use crate::headless::{HeadlessOptions, HeadlessReport};
use crate::record::Recorder;
use crate::render::vulkan::VulkanRenderer;
use crate::render::{Graphics, Renderer};
use crate::runtime::TransferRequest;
use crate::stats::{FrameHistory, FrameSample, LateGpuTimes, Stage, StageTimes};
use crate::transfer::TransferKind;
use crate::vk::frame::VulkanGraphics;
use crate::{Error, Result};

/// Runs the demo headless on Vulkan.
pub fn run(options: &HeadlessOptions) -> Result<HeadlessReport> {
    options.check()?;
    if options.panel {
        return Err(Error::InvalidInput(
            "the panel is drawn with OpenGL only so far: drop --panel, or use --renderer gl".to_owned(),
        ));
    }
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
    let (vulkan, cuda) = crate::runtime::open_vulkan(&options.cuda, options.size, None)?;
    let transfer = if cuda.is_some() { TransferKind::Vulkan } else { TransferKind::Cpu };
    log::info!(
        "Vulkan renderer on {} ({}), transfer path: {}",
        vulkan.context().description().name,
        vulkan.context().description().driver,
        transfer.label()
    );
    let graphics = Graphics::Vulkan(&vulkan);
    let env = DemoEnv { graphics, cuda, transfer };
    let mut demo = options.spec.create(&env)?;
    demo.pipeline_mut().set_what_if(options.what_if);
    for note in options.what_if.inapplicable(transfer) {
        log::warn!("{note}");
    }
    let mut renderer = VulkanRenderer::new();
    let view = View { origin: [0, 0], size: options.size };
    let result = renderer
        .prepare(graphics, &demo.scene(&view))
        .and_then(|()| render(&vulkan, demo.as_mut(), &mut renderer, view, options));
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

fn render(
    vulkan: &VulkanGraphics,
    demo: &mut dyn Demo,
    renderer: &mut VulkanRenderer,
    view: View,
    options: &HeadlessOptions,
) -> Result<HeadlessReport> {
    let graphics = Graphics::Vulkan(vulkan);
    let mut recorder = options.record.as_deref().map(Recorder::start).transpose()?;
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
        let draw_started = Instant::now();
        vulkan.begin_frame([0.0, 0.0, 0.0, 1.0], frame)?;
        let drawn = renderer.draw(graphics, &demo.scene(&view), &view);
        vulkan.end_frame()?;
        drawn?;
        stages.set_host(Stage::Draw, draw_started.elapsed().as_secs_f64() * 1e6);
        history.push(FrameSample { frame, frame_us, stages });
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
        "stages_us": summary.stages,
        "what_if": { "skip_semaphore_wait": options.what_if.skip_semaphore_wait, "report": what_if },
    });
    if let Some(path) = &options.stats {
        let text = serde_json::to_string_pretty(&json).map_err(|e| Error::InvalidInput(e.to_string()))?;
        crate::output::write(path, (text + "\n").as_bytes())?;
    }
    let recording = recorder.map(Recorder::finish).transpose()?;
    Ok(HeadlessReport { json, summary, pixels, frames_per_second, frames, recording })
}
