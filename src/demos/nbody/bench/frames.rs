//! Full headless frames through the app itself, on OpenGL or Vulkan, for the CUDA and the CPU
//! benchmarks alike.

use serde_json::json;

use super::super::NBodySettings;
use super::{NBodyBench, VariantResult};
use crate::Result;
use crate::demo_kit::DemoSpec;
use crate::demo_kit::bench::{FrameRun, FrameRunner};
use crate::runtime::{CudaOptions, TransferRequest};

/// Full headless frames (map, step, unmap, draw) with `variant`, through the app itself.
pub(super) fn frame_benchmark(
    options: &NBodyBench,
    n: u32,
    best: &VariantResult,
    vulkan: bool,
    frames: FrameRunner<'_>,
) -> Result<serde_json::Value> {
    let settings = NBodySettings {
        bodies: Some(n),
        preset: options.preset,
        variant: best.variant,
        slices: Some(best.slices),
        energy_every: 0,
        force_check_every: 0.0, // no state is read back between the frames it times
        pipeline_depth: options.pipeline_depth,
        ..NBodySettings::default()
    };
    // The Vulkan renderer takes no --transfer: its path is the Vulkan one.
    let cuda = CudaOptions {
        transfer: if vulkan { TransferRequest::Auto } else { options.cuda.transfer },
        ..options.cuda.clone()
    };
    frame_run(options, n, DemoSpec::new(settings), cuda, vulkan, frames)
}

pub(super) fn frame_run(
    options: &NBodyBench,
    n: u32,
    spec: DemoSpec,
    cuda: CudaOptions,
    vulkan: bool,
    frames: FrameRunner<'_>,
) -> Result<serde_json::Value> {
    let renderer = if vulkan { "vulkan" } else { "gl" };
    let name = format!("nbody-{n}-{renderer}-depth{}", options.pipeline_depth);
    let trace = crate::demo_kit::bench::trace_in(options.trace_dir.as_deref(), &name);
    let run =
        FrameRun { spec, frames: options.frames, size: options.size, cuda, vulkan, stop: options.stop.clone(), trace };
    let measured = frames(&run)?;
    Ok(json!({
        "bodies": n,
        "frames": options.frames,
        "size": options.size,
        "transfer": measured.transfer,
        "steps_per_s": measured.frames_per_second,
        "timings_us": measured.timings,
    }))
}
