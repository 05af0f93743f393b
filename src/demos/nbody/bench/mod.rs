//! `interop-lab bench nbody`: the forces kernel over a sweep of variants (CUDA events, median
//! after a warm-up), the best one's whole step, the best split across devices, and full headless
//! frames through the app itself; on the CPU backend, the accelerations pass.

mod cpu_backend;
mod frames;
mod multi_device;
mod sweep;
mod tree;

use std::path::PathBuf;

use serde::Serialize;

use self::cpu_backend::nbody_cpu;
use self::sweep::nbody_cuda;
use super::kernels::{Precision, Variant};
use super::presets::{Bodies, Preset};
use super::tree::Method;
use crate::demo_kit::bench::{BenchReport, FrameRunner};
use crate::runtime::{self, BackendRequest, CudaOptions};
use crate::stats::Percentiles;
use crate::stop::StopRequest;
use crate::error::{Error, Result};

/// What `bench nbody` measures.
#[derive(Debug, Clone)]
pub struct NBodyBench {
    /// Body counts.
    pub bodies: Vec<u32>,
    /// Precision of every variant.
    pub precision: Precision,
    /// Block sizes to try (empty: a default sweep).
    pub block_sizes: Vec<u32>,
    /// Tile sizes to try (empty: the block size).
    pub tile_sizes: Vec<u32>,
    /// Unroll factors to try (empty: a default sweep).
    pub unrolls: Vec<u32>,
    /// Bodies per thread to try (empty: a default sweep).
    pub bodies_per_thread: Vec<u32>,
    /// Slice counts to try (empty: automatic).
    pub slices: Vec<u32>,
    /// Untimed launches first.
    pub warmup: u32,
    /// Timed launches (median reported).
    pub repeats: u32,
    /// Frames of the headless frame benchmark (0: skip it).
    pub frames: u32,
    /// `--pipeline-depth` of the frame benchmark.
    pub pipeline_depth: u32,
    /// Framebuffer size of the frame benchmark.
    pub size: [u32; 2],
    /// Initial conditions.
    pub preset: Preset,
    /// Backend and device.
    pub cuda: CudaOptions,
    /// Devices to split the best variant across (`None`: every CUDA device when there are
    /// several; fewer than two: no multi-device measurement).
    pub devices: Option<Vec<i32>>,
    /// Where to write the JSON.
    pub json: Option<PathBuf>,
    /// Where to write each frame run's anatomy as a Chrome trace.
    pub trace_dir: Option<PathBuf>,
    /// How the forces are summed: the all-pairs sweep, or the tree stage by stage.
    pub method: Method,
    /// The tree's opening angle.
    pub theta: f64,
    /// Set by Ctrl-C or SIGTERM: finish the variant (CUDA) or the band of a pass (CPU) being timed,
    /// then report the sizes measured.
    pub stop: StopRequest,
}

/// One variant's measurement.
#[derive(Debug, Clone, Serialize)]
pub struct VariantResult {
    /// The variant.
    pub variant: Variant,
    /// Slices of the j range.
    pub slices: u32,
    /// Registers per thread.
    pub registers: i32,
    /// Resident blocks per SM.
    pub blocks_per_sm: i32,
    /// Forces kernel time, µs.
    pub forces_us: Percentiles,
    /// N² / median forces time.
    pub interactions_per_s: f64,
    /// 20 flops per interaction.
    pub gflops: f64,
    /// Of the device's peak in this precision.
    pub percent_of_peak: Option<f64>,
}

/// Runs `bench nbody`: CUDA when it runs (or was asked for), else the CPU backend.
pub fn nbody(options: &NBodyBench, frames: FrameRunner<'_>) -> Result<BenchReport> {
    if options.bodies.is_empty() {
        return Err(Error::InvalidInput("--bodies needs at least one count".to_owned()));
    }
    for &n in &options.bodies {
        super::validate_bodies(n)?;
    }
    if options.repeats == 0 {
        return Err(Error::InvalidInput("--repeats must be at least 1".to_owned()));
    }
    let tree = options.method == Method::Tree;
    if tree {
        super::tree::validate_theta(options.theta)?;
    }
    let report = match runtime::cuda_without_gl(&options.cuda) {
        Ok(cuda) if tree => tree::tree_cuda(options, &cuda, frames)?,
        Ok(cuda) => nbody_cuda(options, &cuda, frames)?,
        Err(error) if options.devices.is_some() => {
            return Err(Error::Unavailable(format!(
                "--devices splits n-body across CUDA devices, and CUDA can't run here: {error}; drop --devices to \
                 bench on the CPU"
            )));
        }
        Err(error) if options.cuda.backend == BackendRequest::Auto || options.cuda.backend == BackendRequest::Cpu => {
            log::info!("bench on the CPU backend: {error}");
            if tree { tree::tree_cpu(options, frames)? } else { nbody_cpu(options, frames)? }
        }
        Err(error) => return Err(error),
    };
    BenchReport::finish(report.json, report.table, &options.stop, &options.json)
}

fn to_vectors(bodies: &Bodies, precision: Precision) -> Vec<u8> {
    match precision {
        Precision::F32 => {
            bytemuck::cast_slice(&bodies.positions.iter().map(|p| p.map(|v| v as f32)).collect::<Vec<_>>()).to_vec()
        }
        Precision::F64 => bytemuck::cast_slice(&bodies.positions).to_vec(),
    }
}
