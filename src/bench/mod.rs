//! `interop-lab bench`: speed measured by the program itself. Kernels are timed with CUDA events
//! after a warm-up, as the median of many launches; whole frames are timed headless with the GPU
//! finished at the end. Results go to stdout as a table and to JSON with plainly named fields.
//!
//! Each demo's benchmark lives in its folder (`demos/<name>/bench.rs`); here are what they share
//! with the app above them (headless frames) and the transfer benchmark, which is no demo's.

pub mod anatomy;
pub mod fill;
pub mod handoff;
pub mod map;
pub mod transfer;
pub mod vulkan;

use crate::demo_kit::bench::{FrameRun, FramesMeasured};
use crate::error::Result;
use crate::headless::{self, HeadlessOptions};

/// Renders `run` headless through the app itself: what a demo's benchmark times as full frames.
pub fn headless_frames(run: &FrameRun) -> Result<FramesMeasured> {
    let options = HeadlessOptions {
        stop: run.stop.clone(),
        trace: run.trace.clone(),
        ..HeadlessOptions::new(run.spec.clone(), run.renderer, run.frames, run.size, run.cuda.clone())
    };
    let report = headless::run(&options)?;
    Ok(FramesMeasured {
        transfer: report.json["transfer"].clone(),
        frames_per_second: report.frames_per_second,
        timings: report.summary,
    })
}
