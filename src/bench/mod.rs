//! `interop-lab bench`: speed measured by the program itself. Kernels are timed with CUDA events
//! after a warm-up, as the median of many launches; whole frames are timed headless with the GPU
//! finished at the end. Results go to stdout as a table and to JSON with plainly named fields.
//!
//! Each demo's benchmark lives in its folder (`demos/<name>/bench.rs`); here are what they share
//! with the app above them (headless frames) and the transfer benchmark, which is no demo's.

pub mod fill;
pub mod map;
pub mod transfer;
pub mod vulkan;

use crate::Result;
use crate::demo_kit::bench::{FrameRun, FramesMeasured};
use crate::headless::{self, HeadlessOptions};
use crate::headless_vulkan;

/// Renders `run` headless through the app itself: what a demo's benchmark times as full frames.
pub fn headless_frames(run: &FrameRun) -> Result<FramesMeasured> {
    let options = HeadlessOptions {
        spec: run.spec.clone(),
        frames: run.frames,
        size: run.size,
        dt: 1.0 / 60.0,
        screenshot: None,
        stats: None,
        panel: false,
        cuda: run.cuda.clone(),
        shaders_dir: None,
        what_if: Default::default(),
        open_sections: Vec::new(),
        stop: run.stop.clone(),
        record: None,
        path_flags: Vec::new(),
    };
    let report = if run.vulkan { headless_vulkan::run(&options)? } else { headless::run(&options)? };
    Ok(FramesMeasured {
        transfer: report.json["transfer"].clone(),
        frames_per_second: report.frames_per_second,
        timings: report.summary,
    })
}
