//! A blur job and the launches it makes: each filter's grid, block and shared memory, checked
//! against the device and the kernels with a message that names the limit and what to change.

use super::super::cpu::RecursiveGaussian;
use super::super::recursive::{
    auto_recursive_segment, check_recursive_segment, recursive_shared_bytes, recursive_slot_bytes,
    smallest_recursive_segment,
};
use super::Filter;
use crate::cuda::module::FunctionAttributes;
use crate::cuda::{DeviceLimits, LaunchConfig};
use crate::pixel::PixelFormat;
use crate::error::{Error, Result};

/// One blur's parameters as the kernels take them.
#[derive(Debug, Clone, Copy)]
pub struct Job {
    /// Which filter.
    pub filter: Filter,
    /// Image size.
    pub size: [u32; 2],
    /// Gaussian radius (separable, naive).
    pub radius: u32,
    /// Box radii (box).
    pub box_radii: [u32; 4],
    /// Poles and residues (recursive).
    pub recursive: RecursiveGaussian,
    /// Threads per block in x and y.
    pub block: [u32; 2],
    /// Rows per segment of the recursive filter (`None`: [`auto_recursive_segment`]).
    pub segment: Option<u32>,
}

/// The launches `job` makes with kernels of `format` and `pixels_per_thread`: one for naive, two
/// row passes otherwise (the second on the transposed image).
pub fn launches(format: PixelFormat, pixels_per_thread: u32, job: &Job) -> Vec<LaunchConfig> {
    let [width, height] = job.size;
    let [bx, by] = job.block;
    match job.filter {
        Filter::Naive => vec![LaunchConfig::for_grid_2d(width, height, job.block)],
        Filter::Recursive => {
            let columns = (bx.saturating_mul(by) / 2).max(1);
            let segment = job.segment.unwrap_or_else(|| auto_recursive_segment(format, job.block)).max(1);
            let shared = recursive_shared_bytes(format, job.block, segment);
            let shared_memory_bytes = u32::try_from(shared).unwrap_or(u32::MAX);
            let pass = |w: u32, h: u32| LaunchConfig {
                grid: [w.div_ceil(columns).max(1), h.div_ceil(segment).max(1), 1],
                block: [bx, by, 1],
                shared_memory_bytes,
            };
            vec![pass(width, height), pass(height, width)]
        }
        Filter::Separable | Filter::Box => {
            let reach = match job.filter {
                Filter::Box => job.box_radii.iter().sum::<u32>(),
                _ => job.radius,
            };
            let tile = bx.saturating_mul(pixels_per_thread);
            // As tile_span() in blur.cu: padded for the register window, rounded up to odd.
            let span = (tile.saturating_add(reach.saturating_mul(2)).saturating_add(pixels_per_thread)) | 1;
            let mut shared = 2u64 * u64::from(by) * u64::from(span) * 16;
            if job.filter == Filter::Box {
                shared += u64::from(by) * u64::from(bx) * 16;
            }
            let shared_memory_bytes = u32::try_from(shared).unwrap_or(u32::MAX);
            let pass = |w: u32, h: u32| LaunchConfig {
                grid: [w.div_ceil(tile.max(1)).max(1), h.div_ceil(by.max(1)).max(1), 1],
                block: [bx, by, 1],
                shared_memory_bytes,
            };
            vec![pass(width, height), pass(height, width)]
        }
    }
}

/// Checks `job`'s launches against `limits` and the attributes of the two kernels it runs (for
/// naive, the one kernel twice); the message names the limit and what to change.
pub fn validate_job(
    format: PixelFormat,
    pixels_per_thread: u32,
    limits: &DeviceLimits,
    attributes: [&FunctionAttributes; 2],
    job: &Job,
) -> Result<()> {
    if matches!(job.filter, Filter::Separable | Filter::Box) && !job.block[1].is_power_of_two() {
        return Err(Error::InvalidInput(format!(
            "the {} filter writes its tiles transposed with a shift, so block.y must be a power of two (not {})",
            job.filter.name(),
            job.block[1]
        )));
    }
    if job.filter == Filter::Box && !job.block[0].is_multiple_of(32) {
        return Err(Error::InvalidInput(format!(
            "the box filter scans each tile row with one warp, so block.x must be a multiple of 32 (not {})",
            job.block[0]
        )));
    }
    if job.filter == Filter::Recursive {
        if !(u64::from(job.block[0]) * u64::from(job.block[1])).is_multiple_of(64) {
            return Err(Error::InvalidInput(format!(
                "the recursive filter pairs a forward and a backward warp on every 32 columns, so block.x × block.y \
                 must be a multiple of 64 (not {} × {})",
                job.block[0], job.block[1]
            )));
        }
        if let Some(segment) = job.segment {
            check_recursive_segment(format, segment)?;
        }
    }
    for (config, function) in launches(format, pixels_per_thread, job).iter().zip(attributes) {
        config.validate(limits, function).map_err(|e| {
            let hint = match job.filter {
                Filter::Recursive => {
                    let segment = job.segment.unwrap_or_else(|| auto_recursive_segment(format, job.block));
                    let columns = u64::from(job.block[0]) * u64::from(job.block[1]) / 2;
                    let chosen = if job.segment.is_some() { "set by --segment" } else { "the automatic choice" };
                    let smallest = smallest_recursive_segment(format);
                    let fix = if segment > smallest {
                        format!("lower --segment (a power of two ≥ {smallest}) or use fewer threads per block")
                    } else {
                        "use fewer threads per block".to_owned()
                    };
                    format!(
                        "The recursive filter keeps a segment of {segment} rows ({chosen}) × (threads/2 + 1 = {}) \
                         columns × {} bytes = {} bytes in shared memory: {fix}",
                        columns + 1,
                        recursive_slot_bytes(format),
                        recursive_shared_bytes(format, job.block, segment),
                    )
                }
                _ => format!(
                    "The {} filter stages a tile of block.y rows × (block.x·{pixels_per_thread} + 2·reach) pixels: \
                     lower block.y or the radius",
                    job.filter.name(),
                ),
            };
            Error::InvalidInput(format!("{e}. {hint}"))
        })?;
    }
    Ok(())
}
