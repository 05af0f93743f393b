//! Full headless frames through the app itself, on OpenGL or Vulkan, for the CUDA and the CPU
//! benchmarks alike.

use serde_json::json;

use super::super::NBodySettings;
use super::{NBodyBench, VariantResult};
use crate::graphics::GraphicsApi;
use crate::error::Result;
use crate::demo_kit::DemoSpec;
use crate::demo_kit::bench::{FrameRun, FrameRunner};
use crate::runtime::CudaOptions;

/// Full headless frames (map, step, unmap, draw) with `variant`, through the app itself.
pub(super) fn frame_benchmark(
    options: &NBodyBench,
    n: u32,
    best: &VariantResult,
    renderer: GraphicsApi,
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
    let cuda = CudaOptions { transfer: options.cuda.transfer.on(renderer), ..options.cuda.clone() };
    frame_run(options, n, DemoSpec::new(settings), cuda, renderer, frames)
}

/// Full headless frames of `spec` through the app: JSON with the whole run's rate
/// (`steps_per_s`), the rate of its median frame (`frames_per_s_median`) and the stage timings.
pub(super) fn frame_run(
    options: &NBodyBench,
    n: u32,
    spec: DemoSpec,
    cuda: CudaOptions,
    renderer: GraphicsApi,
    frames: FrameRunner<'_>,
) -> Result<serde_json::Value> {
    let name = format!("nbody-{n}-{}-depth{}", renderer.flag(), options.pipeline_depth);
    let trace = crate::demo_kit::bench::trace_in(options.trace_dir.as_deref(), &name);
    let run =
        FrameRun { spec, frames: options.frames, size: options.size, cuda, renderer, stop: options.stop.clone(), trace };
    let measured = frames(&run)?;
    let mut row = json!({
        "bodies": n,
        "frames": options.frames,
        "size": options.size,
        "transfer": measured.transfer,
        "steps_per_s": measured.frames_per_second,
        "timings_us": measured.timings,
    });
    // The steady rate: the whole run's rate above counts its start (compiles, the first frames).
    let median_us = row.pointer("/timings_us/frame_us/median").and_then(|v| v.as_f64());
    row["frames_per_s_median"] = json!(median_us.filter(|us| *us > 0.0).map(|us| 1e6 / us));
    Ok(row)
}
