//! The CUDA benchmark: for each body count, the forces kernel over a sweep of variants (CUDA
//! events, median after a warm-up), then the best one's whole step, its frames and its split
//! across devices.

use serde_json::json;

use super::super::cpu::Params;
use super::super::kernels::{Kernels, Precision, Variant, time_forces};
use super::super::multi;
use super::super::presets::Bodies;
use super::super::{FLOPS_PER_INTERACTION, sim};
use super::frames::frame_benchmark;
use super::multi_device::multi_benchmark;
use super::{NBodyBench, VariantResult, to_vectors};
use crate::graphics::GraphicsApi;
use crate::cuda::{DeviceBuffer, Event, Stream};
use crate::demo_kit::bench::{BenchReport, FrameRunner};
use crate::progress::Progress;
use crate::runtime::CudaRuntime;
use crate::stats::Percentiles;
use crate::error::{Error, Result};

fn sweep(values: &[u32], default: &[u32]) -> Vec<u32> {
    if values.is_empty() { default.to_vec() } else { values.to_vec() }
}

/// The variants to time: the cross product of the flags (or a default sweep) and, when no
/// variant flag is given, every variant the autotuner may pick.
fn candidates(options: &NBodyBench) -> Vec<Variant> {
    let mut variants = Vec::new();
    let by_hand = !(options.block_sizes.is_empty()
        && options.tile_sizes.is_empty()
        && options.unrolls.is_empty()
        && options.bodies_per_thread.is_empty());
    if !by_hand {
        variants.extend(super::super::tune::candidates(options.precision));
    }
    for &block_size in &sweep(&options.block_sizes, &[128, 256, 512]) {
        let tiles = if options.tile_sizes.is_empty() { vec![block_size] } else { options.tile_sizes.clone() };
        for &tile_size in &tiles {
            for &unroll in &sweep(&options.unrolls, &[4, 16]) {
                for &bodies_per_thread in &sweep(&options.bodies_per_thread, &[1, 2, 4]) {
                    let variant =
                        Variant { precision: options.precision, block_size, tile_size, unroll, bodies_per_thread };
                    if !variants.contains(&variant) {
                        variants.push(variant);
                    }
                }
            }
        }
    }
    variants
}

pub(super) fn nbody_cuda(options: &NBodyBench, cuda: &CudaRuntime, frames: FrameRunner<'_>) -> Result<BenchReport> {
    let device = cuda.context.device().clone();
    let peak = match options.precision {
        Precision::F32 => device.fp32_peak_flops(),
        Precision::F64 => device.fp64_peak_flops(),
    };
    let stream = Stream::new(&cuda.context)?;
    let mut table = format!(
        "n-body on {} ({} SMs, {} MHz), {}: forces kernel median of {} launches after {} warm-up\n",
        device.name,
        device.multiprocessors,
        device.clock_rate_khz / 1000,
        options.precision.name(),
        options.repeats,
        options.warmup
    );
    table.push_str(&format!(
        "{:>9} {:<44} {:>6} {:>10} {:>14} {:>9} {:>7} {:>9} {:>14} {:>14}\n",
        "bodies",
        "best variant",
        "slices",
        "forces ms",
        "interactions/s",
        "GFLOP/s",
        "% peak",
        "steps/s",
        "GL f/s (%)",
        "Vulkan f/s (%)"
    ));
    let mut sizes = Vec::new();
    let devices = match &options.devices {
        Some(devices) => Some(devices.clone()).filter(|d| d.len() > 1),
        None => {
            let count = crate::cuda::device::device_count()?;
            (count > 1).then(|| (0..count).collect())
        }
    };
    if let Some(devices) = &devices {
        multi::check_ordinals(devices, crate::cuda::device::device_count()?)?;
    }
    if devices.is_some() && options.precision != Precision::F32 {
        return Err(Error::InvalidInput(
            "n-body across devices runs in fp32 only: drop --precision f64 or --devices".to_owned(),
        ));
    }
    let mut multi_tables = String::new();
    let variants = candidates(options);
    let progress = Progress::new("bench nbody", (options.bodies.len() * variants.len()) as u64, &options.stop);
    for &n in &options.bodies {
        if progress.stopped() {
            break;
        }
        let bodies = options.preset.generate(n as usize, 1);
        let params = Params {
            dt: options.preset.default_dt(),
            softening: options.preset.default_softening(),
            gravity: 1.0,
            damping: 1.0,
        };
        let vector = options.precision.vector_bytes();
        let mut positions = DeviceBuffer::new(&cuda.context, n as usize * vector)?;
        positions.upload(&stream, &to_vectors(&bodies, options.precision))?;
        let mut results: Vec<VariantResult> = Vec::new();
        let mut failures = Vec::new();
        for &variant in &variants {
            if progress.stopped() {
                break;
            }
            progress.step(format!("{n} bodies, {}", variant.label()));
            let slice_counts = if options.slices.is_empty() {
                vec![sim::auto_slices(device.multiprocessors, variant.bodies_per_block(), variant.tile_size, n)]
            } else {
                options.slices.clone()
            };
            let mut kernels = match Kernels::load(cuda, variant) {
                Ok(kernels) => kernels,
                Err(error) => {
                    failures.push(json!({ "variant": variant, "error": error.to_string() }));
                    continue;
                }
            };
            for slices in slice_counts {
                let slice_length = sim::slice_length(n, slices, variant.tile_size);
                let slices = n.div_ceil(slice_length);
                let partial = DeviceBuffer::new(&cuda.context, slices as usize * n as usize * vector)?;
                let timed = time_forces(
                    &mut kernels,
                    &stream,
                    &positions,
                    &partial,
                    n,
                    slice_length,
                    &params,
                    options.warmup,
                    options.repeats,
                );
                match timed {
                    Ok(times) => {
                        let Some(forces_us) = Percentiles::of(times.into_iter()) else {
                            continue;
                        };
                        let interactions_per_s = f64::from(n) * f64::from(n) / (forces_us.median * 1e-6);
                        let gflops = interactions_per_s * FLOPS_PER_INTERACTION / 1e9;
                        results.push(VariantResult {
                            variant,
                            slices,
                            registers: kernels.forces_attributes().registers,
                            blocks_per_sm: kernels.forces_blocks_per_multiprocessor()?,
                            forces_us,
                            interactions_per_s,
                            gflops,
                            percent_of_peak: peak.map(|p| 100.0 * gflops * 1e9 / p),
                        });
                    }
                    Err(error) => {
                        failures.push(json!({ "variant": variant, "slices": slices, "error": error.to_string() }))
                    }
                }
            }
            progress.done_one();
        }
        if progress.stopped() {
            break; // the sweep of this size was cut short: it is left out, the sizes before are kept
        }
        let Some(best) = results.iter().max_by(|a, b| a.interactions_per_s.total_cmp(&b.interactions_per_s)).cloned()
        else {
            return Err(Error::Unavailable(format!("no forces variant ran for {n} bodies: {failures:?}")));
        };
        let step_us = time_step(cuda, &stream, &bodies, best.variant, best.slices, &params, options)?;
        // A failed frame run is said in its row; what was measured before it is kept.
        let frame = if options.frames > 0 && !progress.stopped() {
            progress.step(format!("{n} bodies, {} full frames", options.frames));
            Some(
                frame_benchmark(options, n, &best, GraphicsApi::Gl, frames).unwrap_or_else(|e| json!({ "error": e.to_string() })),
            )
        } else {
            None
        };
        // The same frames drawn by the Vulkan renderer, CUDA writing the buffers Vulkan allocated.
        let frame_vulkan = if options.frames > 0 && !progress.stopped() {
            progress.step(format!("{n} bodies, {} full frames on Vulkan", options.frames));
            Some(frame_benchmark(options, n, &best, GraphicsApi::Vulkan, frames).unwrap_or_else(|e| json!({ "error": e.to_string() })))
        } else {
            None
        };
        let multi_device = match &devices {
            Some(devices) if !progress.stopped() => {
                Some(multi_benchmark(cuda, &stream, &bodies, &best, &params, options, devices, step_us)?)
            }
            _ => None,
        };
        let frames_per_second = frame.as_ref().and_then(|f| f["steps_per_s"].as_f64());
        let vulkan_per_second = frame_vulkan.as_ref().and_then(|f| f["steps_per_s"].as_f64());
        // The step alone (drift, forces, kick back to back on the stream) sets the rate frames
        // could reach: each frame's rate is shown beside it as a share of it.
        let steps_per_second = 1e6 / step_us;
        let beside = |rate: Option<f64>| match rate {
            Some(rate) => format!("{rate:.0} ({:.0} %)", 100.0 * rate / steps_per_second),
            None => "–".to_owned(),
        };
        table.push_str(&format!(
            "{:>9} {:<44} {:>6} {:>10.3} {:>14.3e} {:>9.0} {:>7} {:>9.0} {:>14} {:>14}\n",
            n,
            best.variant.label(),
            best.slices,
            best.forces_us.median / 1e3,
            best.interactions_per_s,
            best.gflops,
            best.percent_of_peak.map(|p| format!("{p:.1}")).unwrap_or_else(|| "?".to_owned()),
            steps_per_second,
            beside(frames_per_second),
            beside(vulkan_per_second),
        ));
        if let Some(error) = frame.as_ref().and_then(|f| f["error"].as_str()) {
            table.push_str(&format!("          OpenGL frames not measured: {error}\n"));
        }
        if let Some(error) = frame_vulkan.as_ref().and_then(|f| f["error"].as_str()) {
            table.push_str(&format!("          Vulkan frames not measured: {error}\n"));
        }
        let mut sorted = results.clone();
        sorted.sort_by(|a, b| b.interactions_per_s.total_cmp(&a.interactions_per_s));
        sizes.push(json!({
            "bodies": n,
            "best": best,
            "interactions_per_s": best.interactions_per_s,
            "gflops": best.gflops,
            "percent_of_peak": best.percent_of_peak,
            "step_us_median": step_us,
            "steps_per_s": steps_per_second,
            "frame_share_of_step_rate": frames_per_second.map(|f| f / steps_per_second),
            "frame_vulkan_share_of_step_rate": vulkan_per_second.map(|f| f / steps_per_second),
            "frame": frame,
            "frame_vulkan": frame_vulkan,
            "variants": sorted,
            "failed_variants": failures,
            "multi_device": multi_device.as_ref().map(|m| &m.json),
        }));
        if let Some(multi) = multi_device {
            multi_tables.push_str(&multi.table);
        }
    }
    table.push_str(&multi_tables);
    let json = json!({
        "benchmark": "nbody",
        "backend": "cuda",
        "device": device,
        "precision": options.precision,
        "peak_flops": peak,
        "flops_per_interaction": FLOPS_PER_INTERACTION,
        "method": format!("CUDA events around each forces launch, {} warm-up then {} timed, median; interactions counted as N²", options.warmup, options.repeats),
        "preset": options.preset,
        "sizes": sizes,
    });
    Ok(BenchReport { json, table })
}

/// Median time of a whole all-pairs step (drift, forces, kick) with `variant` and `slices`, µs.
pub(super) fn time_step(
    cuda: &CudaRuntime,
    stream: &Stream,
    bodies: &Bodies,
    variant: Variant,
    slices: u32,
    params: &Params,
    options: &NBodyBench,
) -> Result<f64> {
    let n = bodies.len() as u32;
    let vector = variant.precision.vector_bytes();
    let mut kernels = Kernels::load(cuda, variant)?;
    let slice_length = sim::slice_length(n, slices, variant.tile_size);
    let slices = n.div_ceil(slice_length);
    let buffer = |bytes: usize| DeviceBuffer::new(&cuda.context, bytes);
    let mut positions = [buffer(n as usize * vector)?, buffer(n as usize * vector)?];
    for p in &mut positions {
        p.upload(stream, &to_vectors(bodies, variant.precision))?;
    }
    let mut velocities = buffer(n as usize * vector)?;
    velocities.fill(stream, 0)?;
    let mut accelerations = buffer(n as usize * vector)?;
    accelerations.fill(stream, 0)?;
    let partial = buffer(slices as usize * n as usize * vector)?;
    let context = stream.context();
    let mut times = Vec::new();
    for round in 0..(options.warmup + options.repeats) {
        let (from, to) = (round as usize % 2, 1 - round as usize % 2);
        let (start, end) = (Event::new(context)?, Event::new(context)?);
        start.record(stream)?;
        kernels.drift(
            stream,
            positions[from].span(),
            positions[to].span(),
            velocities.span(),
            accelerations.span(),
            None,
            n,
            params,
        )?;
        kernels.forces(stream, positions[to].span(), partial.span(), n, slice_length, params)?;
        kernels.kick(stream, velocities.span(), accelerations.span(), partial.span(), None, n, slices, params)?;
        end.record(stream)?;
        end.synchronize()?;
        if round >= options.warmup {
            times.push(f64::from(end.elapsed_ms_since(&start)?) * 1e3);
        }
    }
    Ok(Percentiles::of(times.into_iter()).map(|p| p.median).unwrap_or(f64::NAN))
}
