//! What a demo's benchmark gives and gets: its report (a table and JSON), and a way to run whole
//! frames of the app headless, passed in by the `bench` command that sits above the demos.

use std::path::PathBuf;

use super::DemoSpec;
use crate::runtime::CudaOptions;
use crate::stats::Summary;
use crate::{Error, Result};

/// Output of a benchmark.
#[derive(Debug, Clone)]
pub struct BenchReport {
    /// Everything, as written to `--json`.
    pub json: serde_json::Value,
    /// The table for stdout.
    pub table: String,
}

/// Whole frames of a demo to render headless.
#[derive(Debug, Clone)]
pub struct FrameRun {
    /// The demo and its settings.
    pub spec: DemoSpec,
    /// Frames to render.
    pub frames: u32,
    /// Framebuffer size in pixels.
    pub size: [u32; 2],
    /// Backend and transfer choices.
    pub cuda: CudaOptions,
    /// Draw with the Vulkan renderer (CUDA then writes Vulkan memory it imported), not OpenGL.
    pub vulkan: bool,
    /// Set by Ctrl-C: stop after the current frame.
    pub stop: crate::stop::StopRequest,
    /// The frames' anatomy to write as a Chrome trace when the run ends.
    pub trace: Option<crate::args::TraceRequest>,
}

/// The trace of a bench's frame run named `name` in `dir` (`--trace-dir`): its last 120 frames.
pub fn trace_in(dir: Option<&std::path::Path>, name: &str) -> Option<crate::args::TraceRequest> {
    let path = dir?.join(format!("{name}.trace.json"));
    Some(crate::args::TraceRequest { path, frames: 120 })
}

/// What such a run measured.
#[derive(Debug, Clone)]
pub struct FramesMeasured {
    /// The transfer path the frames ran on, as the headless report names it.
    pub transfer: serde_json::Value,
    /// Frames per second over the whole run (GPU finished at the end).
    pub frames_per_second: f64,
    /// Per-stage timings.
    pub timings: Summary,
}

/// Renders a [`FrameRun`] headless.
pub type FrameRunner<'a> = &'a dyn Fn(&FrameRun) -> Result<FramesMeasured>;

/// Writes `json` to `path`, when one was given.
pub fn write_json(path: &Option<PathBuf>, json: &serde_json::Value) -> Result<()> {
    if let Some(path) = path {
        let text = serde_json::to_string_pretty(json).map_err(|e| Error::InvalidInput(e.to_string()))?;
        crate::output::write(path, (text + "\n").as_bytes())?;
    }
    Ok(())
}
