//! `--stats`: what a run did, as one JSON document whatever drew it (OpenGL or Vulkan, a window or
//! offscreen). Its fields are listed in docs/stats.md; [`STATS_SCHEMA`] names their version.

use super::Session;
use crate::error::{Error, Result};

/// The version of the `--stats` document: bumped when a field changes meaning or goes away.
/// Version 2: one document for both renderers (`renderer`, `graphics`, `timings_us` everywhere).
pub const STATS_SCHEMA: &str = "interop-lab.stats/2";

/// What a run did, besides what the session knows.
#[derive(Debug, Clone, Copy)]
pub struct RunFacts {
    /// Frames drawn.
    pub frames: u64,
    /// Frames asked for (`--frames`), if any.
    pub frames_asked: Option<u64>,
    /// The size drawn, in pixels: the caller knows it without asking the window, whose display
    /// may be gone.
    pub size: [u32; 2],
}

impl Session {
    /// The run as `--stats` writes it: what drew and computed it, the path and why, the kernel,
    /// the switches, and the median and p90 of every stage over the frames kept.
    pub fn stats_json(&mut self, run: &RunFacts) -> Result<serde_json::Value> {
        let summary = self.history.summary(None);
        let wall_seconds = self.first_frame_at.map_or(0.0, |at| at.elapsed().as_secs_f64());
        let device = self.selection.cuda.as_ref().map(|cuda| cuda.context.device().clone());
        let graphics = self.renderer.info().clone();
        let (reason, recoveries, what_if) =
            (self.selection.reason.clone(), self.recovery.log.clone(), self.state.what_if);
        let demo = self.demo()?;
        let what_if_report = demo.pipeline().what_if_report();
        let kernel = demo.live_kernels().and_then(|kernels| kernels.kernel_info()).map(|k| {
            serde_json::json!({
                "name": k.name,
                "source": k.origin,
                "grid": k.launch.grid,
                "block": k.launch.block,
                "shared_memory_bytes": k.launch.shared_memory_bytes,
                "attributes": k.attributes,
            })
        });
        let transfer = demo.pipeline().kind();
        let demo_stats = demo.stats();
        let json = serde_json::json!({
            "schema": STATS_SCHEMA,
            "demo": demo.name(),
            "renderer": graphics.api,
            "window": graphics.window,
            "graphics": graphics,
            "backend": if transfer.uses_cuda() { "cuda" } else { "cpu" },
            "transfer": transfer,
            "reason": reason,
            "device": device,
            "size": run.size,
            "frames": run.frames,
            "frames_asked": run.frames_asked,
            "wall_seconds": wall_seconds,
            "frames_per_second": run.frames as f64 / wall_seconds.max(1e-9),
            "host_peak_rss_bytes": crate::host_memory::status_bytes("VmHWM:"),
            "recoveries": recoveries,
            "kernel": kernel,
            "demo_stats": demo_stats,
            "what_if": {
                "register_every_frame": what_if.register_every_frame,
                "skip_copy_sync": what_if.skip_copy_sync,
                "skip_semaphore_wait": what_if.skip_semaphore_wait,
                "report": what_if_report,
            },
            "timings_us": summary,
        });
        Ok(json)
    }

    /// [`Self::stats_json`] written to `path`, whole or not at all.
    pub fn write_stats(&mut self, path: &std::path::Path, run: &RunFacts) -> Result<serde_json::Value> {
        let json = self.stats_json(run)?;
        let text = serde_json::to_string_pretty(&json).map_err(|e| Error::InvalidInput(e.to_string()))?;
        crate::output::write(path, (text + "\n").as_bytes())?;
        Ok(json)
    }
}
