//! `interop-lab bench nbody`: the forces kernel over a sweep of variants (CUDA events, median
//! after a warm-up), the best one's whole step, the best split across devices, and full headless
//! frames through the app itself; on the CPU backend, the accelerations pass.

use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;
use serde_json::json;

use super::cpu::{self, Params, Scratch};
use super::kernels::{Kernels, Precision, Variant, time_forces};
use super::multi::{self, DeviceSummary, DeviceTimes, MultiSimulation};
use super::presets::{Bodies, Preset};
use super::sim::StepBuffers;
use super::{FLOPS_PER_INTERACTION, NBodySettings, sim};
use crate::cuda::{DeviceBuffer, Event, Stream};
use crate::demo_kit::DemoSpec;
use crate::demo_kit::bench::{BenchReport, FrameRun, FrameRunner, write_json};
use crate::progress::Progress;
use crate::runtime::{self, BackendRequest, CudaOptions, CudaRuntime, TransferRequest};
use crate::stats::Percentiles;
use crate::stop::StopRequest;
use crate::{Error, Result};

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
    /// Set by Ctrl-C: finish the variant being timed, then report what was measured.
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
    let report = match runtime::cuda_without_gl(&options.cuda) {
        Ok(cuda) => nbody_cuda(options, &cuda, frames)?,
        Err(error) if options.devices.is_some() => {
            return Err(Error::Unavailable(format!(
                "--devices splits n-body across CUDA devices, and CUDA can't run here: {error}; drop --devices to \
                 bench on the CPU"
            )));
        }
        Err(error) if options.cuda.backend == BackendRequest::Auto || options.cuda.backend == BackendRequest::Cpu => {
            log::info!("bench on the CPU backend: {error}");
            nbody_cpu(options, frames)?
        }
        Err(error) => return Err(error),
    };
    write_json(&options.json, &report.json)?;
    Ok(report)
}

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
        variants.extend(super::tune::candidates(options.precision));
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

fn to_vectors(bodies: &Bodies, precision: Precision) -> Vec<u8> {
    match precision {
        Precision::F32 => {
            bytemuck::cast_slice(&bodies.positions.iter().map(|p| p.map(|v| v as f32)).collect::<Vec<_>>()).to_vec()
        }
        Precision::F64 => bytemuck::cast_slice(&bodies.positions).to_vec(),
    }
}

fn nbody_cuda(options: &NBodyBench, cuda: &CudaRuntime, frames: FrameRunner<'_>) -> Result<BenchReport> {
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
        "{:>9} {:<44} {:>6} {:>10} {:>14} {:>9} {:>7} {:>10} {:>10}\n",
        "bodies",
        "best variant",
        "slices",
        "forces ms",
        "interactions/s",
        "GFLOP/s",
        "% peak",
        "frames/s",
        "Vulkan f/s"
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
        let Some(best) = results.iter().max_by(|a, b| a.interactions_per_s.total_cmp(&b.interactions_per_s)).cloned()
        else {
            if progress.stopped() {
                break;
            }
            return Err(Error::Unavailable(format!("no forces variant ran for {n} bodies: {failures:?}")));
        };
        let step_us = time_step(cuda, &stream, &bodies, &best, &params, options)?;
        // A failed frame run is said in its row; what was measured before it is kept.
        let frame = if options.frames > 0 && !progress.stopped() {
            progress.step(format!("{n} bodies, {} full frames", options.frames));
            Some(
                frame_benchmark(options, n, &best, false, frames).unwrap_or_else(|e| json!({ "error": e.to_string() })),
            )
        } else {
            None
        };
        // The same frames drawn by the Vulkan renderer, CUDA writing the buffers Vulkan allocated.
        let frame_vulkan = if options.frames > 0 && !progress.stopped() {
            progress.step(format!("{n} bodies, {} full frames on Vulkan", options.frames));
            Some(frame_benchmark(options, n, &best, true, frames).unwrap_or_else(|e| json!({ "error": e.to_string() })))
        } else {
            None
        };
        let multi_device = match &devices {
            Some(devices) => Some(multi_benchmark(cuda, &stream, &bodies, &best, &params, options, devices, step_us)?),
            None => None,
        };
        let frames_per_second = frame.as_ref().and_then(|f| f["steps_per_s"].as_f64());
        let vulkan_per_second = frame_vulkan.as_ref().and_then(|f| f["steps_per_s"].as_f64());
        table.push_str(&format!(
            "{:>9} {:<44} {:>6} {:>10.3} {:>14.3e} {:>9.0} {:>7} {:>10} {:>10}\n",
            n,
            best.variant.label(),
            best.slices,
            best.forces_us.median / 1e3,
            best.interactions_per_s,
            best.gflops,
            best.percent_of_peak.map(|p| format!("{p:.1}")).unwrap_or_else(|| "?".to_owned()),
            frames_per_second.map(|f| format!("{f:.0}")).unwrap_or_else(|| "–".to_owned()),
            vulkan_per_second.map(|f| format!("{f:.0}")).unwrap_or_else(|| "–".to_owned()),
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
        "interrupted": progress.stopped(),
    });
    if progress.stopped() {
        table.push_str(&format!("stopped ({}): the table holds what was measured before\n", options.stop.cause()));
    }
    Ok(BenchReport { json, table })
}

/// Median time of a whole step (drift, forces, kick) with the best variant, µs.
fn time_step(
    cuda: &CudaRuntime,
    stream: &Stream,
    bodies: &Bodies,
    best: &VariantResult,
    params: &Params,
    options: &NBodyBench,
) -> Result<f64> {
    let n = bodies.len() as u32;
    let vector = best.variant.precision.vector_bytes();
    let mut kernels = Kernels::load(cuda, best.variant)?;
    let slice_length = sim::slice_length(n, best.slices, best.variant.tile_size);
    let slices = n.div_ceil(slice_length);
    let buffer = |bytes: usize| DeviceBuffer::new(&cuda.context, bytes);
    let mut positions = [buffer(n as usize * vector)?, buffer(n as usize * vector)?];
    for p in &mut positions {
        p.upload(stream, &to_vectors(bodies, best.variant.precision))?;
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

/// A multi-device measurement: JSON and the lines of the table.
struct MultiBench {
    json: serde_json::Value,
    table: String,
}

/// Steps of `devices` timed against the same code on the first device alone.
struct MultiRun {
    step_us: Percentiles,
    times: Vec<DeviceTimes>,
    summary: Vec<DeviceSummary>,
    routes: String,
    slices: u32,
}

/// The best variant split across `devices`: whole steps (drift, forces, exchange, kick) timed on
/// the first device's stream, which waits for every device, against the same code on one device.
#[allow(clippy::too_many_arguments)]
fn multi_benchmark(
    cuda: &CudaRuntime,
    stream: &Stream,
    bodies: &Bodies,
    best: &VariantResult,
    params: &Params,
    options: &NBodyBench,
    devices: &[i32],
    single_step_us: f64,
) -> Result<MultiBench> {
    let n = bodies.len() as u32;
    let one = multi_run(cuda, stream, bodies, best, params, options, &devices[..1])?;
    let all = multi_run(cuda, stream, bodies, best, params, options, devices)?;
    let count = devices.len() as f64;
    let interactions = f64::from(n) * f64::from(n);
    let efficiency = 100.0 * one.step_us.median / (count * all.step_us.median);
    let per_device: Vec<serde_json::Value> = all
        .summary
        .iter()
        .zip(&all.times)
        .map(|(device, times)| {
            json!({
                "ordinal": device.ordinal,
                "name": device.name,
                "context": device.context,
                "first_body": device.first_body,
                "bodies": device.bodies,
                "kernel_us": times.kernel_us(),
                "forces_us": times.own_forces_us + times.remote_forces_us,
                "times_us": times,
                "exchange_us": times.exchange_us,
                "interactions_per_s": f64::from(device.bodies) * f64::from(n)
                    / ((times.own_forces_us + times.remote_forces_us) * 1e-6),
            })
        })
        .collect();
    let list = devices.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
    let mut table = format!(
        "\nn-body across devices {list}, {n} bodies, {}, {} slices; exchange: {}\n",
        best.variant.label(),
        all.slices,
        all.routes
    );
    table.push_str(&format!(
        "{:>6} {:>8} {:>9} {:>10} {:>10} {:>9} {:>12} {:>14}\n",
        "device", "context", "bodies", "kernel ms", "forces ms", "wait ms", "exchange ms", "interactions/s"
    ));
    for (device, times) in all.summary.iter().zip(&all.times) {
        let forces_us = times.own_forces_us + times.remote_forces_us;
        table.push_str(&format!(
            "{:>6} {:>8} {:>9} {:>10.3} {:>10.3} {:>9.3} {:>12.3} {:>14.3e}\n",
            device.ordinal,
            device.context,
            device.bodies,
            times.kernel_us() / 1e3,
            forces_us / 1e3,
            times.wait_us / 1e3,
            times.exchange_us / 1e3,
            f64::from(device.bodies) * f64::from(n) / (forces_us * 1e-6),
        ));
    }
    table.push_str(&format!(
        "step: {:.3} ms on {} device(s) = {:.3e} interactions/s; {:.3} ms on device {} alone = {:.3e}; scaling \
         efficiency {efficiency:.1} % (single-device path: {:.3} ms)\n",
        all.step_us.median / 1e3,
        devices.len(),
        interactions / (all.step_us.median * 1e-6),
        one.step_us.median / 1e3,
        devices[0],
        interactions / (one.step_us.median * 1e-6),
        single_step_us / 1e3,
    ));
    let distinct = devices.iter().collect::<std::collections::BTreeSet<_>>().len();
    if distinct < devices.len() {
        table.push_str(
            "(several contexts share one GPU: this checks the split and the exchange, it cannot speed anything up)\n",
        );
    }
    let json = json!({
        "devices": devices,
        "per_device": per_device,
        "exchange": all.routes,
        "slices": all.slices,
        "step_us": all.step_us,
        "interactions_per_s": interactions / (all.step_us.median * 1e-6),
        "one_device_step_us": one.step_us,
        "one_device_interactions_per_s": interactions / (one.step_us.median * 1e-6),
        "single_device_path_step_us": single_step_us,
        "scaling_efficiency_percent": efficiency,
        "method": format!(
            "whole steps timed with CUDA events on the first device's stream, which waits for every device; {} warm-up \
             then {} timed, median; per-device times are medians of each device's own events; efficiency = one-device \
             step / (devices × multi-device step)",
            options.warmup, options.repeats
        ),
    });
    Ok(MultiBench { json, table })
}

fn multi_run(
    cuda: &CudaRuntime,
    stream: &Stream,
    bodies: &Bodies,
    best: &VariantResult,
    params: &Params,
    options: &NBodyBench,
    devices: &[i32],
) -> Result<MultiRun> {
    let n = bodies.len() as u32;
    let vector = Precision::F32.vector_bytes();
    // Slices chosen for the split (each device filled for its share, the same number on each),
    // not the best single-device count, which need not divide evenly among the devices.
    let mut simulation = MultiSimulation::new(cuda, devices, best.variant, n, None, false)?;
    let buffer = |bytes: usize| DeviceBuffer::new(&cuda.context, bytes);
    let mut positions = [buffer(n as usize * vector)?, buffer(n as usize * vector)?];
    for p in &mut positions {
        p.upload(stream, &to_vectors(bodies, Precision::F32))?;
    }
    let mut velocities = buffer(n as usize * vector)?;
    let host_velocities: Vec<[f32; 4]> =
        bodies.velocities.iter().map(|v| [v[0] as f32, v[1] as f32, v[2] as f32, 0.0]).collect();
    velocities.upload(stream, bytemuck::cast_slice(&host_velocities))?;
    let spans = |round: u32| {
        let (from, to) = (round as usize % 2, 1 - round as usize % 2);
        StepBuffers {
            positions_in: positions[from].span(),
            positions_out: positions[to].span(),
            velocities: velocities.span(),
        }
    };
    simulation.initialise(stream, &spans(0), params)?;
    let context = stream.context();
    let (start, end) = (Event::new(context)?, Event::new(context)?);
    let mut step_times = Vec::new();
    let mut device_times: Vec<Vec<DeviceTimes>> = vec![Vec::new(); devices.len()];
    for round in 0..(options.warmup + options.repeats) {
        start.record(stream)?;
        simulation.step(stream, &spans(round), params, u64::from(round))?;
        end.record(stream)?;
        end.synchronize()?;
        simulation.synchronize()?;
        let times = simulation.poll_times()?;
        if round >= options.warmup {
            step_times.push(f64::from(end.elapsed_ms_since(&start)?) * 1e3);
            if let Some((_, times)) = times {
                for (list, time) in device_times.iter_mut().zip(times) {
                    list.push(time);
                }
            }
        }
    }
    let median = |list: &[DeviceTimes], field: fn(&DeviceTimes) -> f64| {
        Percentiles::of(list.iter().map(field)).map(|p| p.median).unwrap_or(f64::NAN)
    };
    let times = device_times
        .iter()
        .map(|list| DeviceTimes {
            drift_us: median(list, |t| t.drift_us),
            own_forces_us: median(list, |t| t.own_forces_us),
            remote_forces_us: median(list, |t| t.remote_forces_us),
            kick_us: median(list, |t| t.kick_us),
            wait_us: median(list, |t| t.wait_us),
            exchange_us: median(list, |t| t.exchange_us),
        })
        .collect();
    let step_us =
        Percentiles::of(step_times.into_iter()).ok_or_else(|| Error::InvalidInput("no step timings".to_owned()))?;
    Ok(MultiRun {
        step_us,
        times,
        summary: simulation.devices(),
        routes: simulation.routes_label(),
        slices: simulation.slices(),
    })
}

/// Full headless frames (map, step, unmap, draw) with `variant`, through the app itself.
fn frame_benchmark(
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

fn frame_run(
    options: &NBodyBench,
    n: u32,
    spec: DemoSpec,
    cuda: CudaOptions,
    vulkan: bool,
    frames: FrameRunner<'_>,
) -> Result<serde_json::Value> {
    let run = FrameRun { spec, frames: options.frames, size: options.size, cuda, vulkan, stop: options.stop.clone() };
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

fn nbody_cpu(options: &NBodyBench, frames: FrameRunner<'_>) -> Result<BenchReport> {
    let threads = rayon::current_num_threads();
    // The plan, from this machine's measured rate, before any size runs: how long each takes,
    // and which sizes' frames the demo refuses (a step longer than the window can wait for).
    let rate = match options.precision {
        Precision::F32 => cpu::measured_rate::<f32>(),
        Precision::F64 => cpu::measured_rate::<f64>(),
    };
    let passes = f64::from(options.warmup.min(2) + options.repeats.min(20));
    let plan: Vec<(u32, f64, Option<String>)> = options
        .bodies
        .iter()
        .map(|&n| {
            let step_s = f64::from(n) * f64::from(n) / rate;
            let frames_refused = (options.frames > 0 && step_s > cpu::MAX_STEP_SECONDS).then(|| {
                format!(
                    "a step of {n} bodies takes ~{step_s:.1} s on this CPU, and the demo runs steps of at most {} s",
                    cpu::MAX_STEP_SECONDS
                )
            });
            let frames_s = if frames_refused.is_none() { f64::from(options.frames) * step_s } else { 0.0 };
            (n, passes * step_s + frames_s, frames_refused)
        })
        .collect();
    let estimate: f64 = plan.iter().map(|(_, seconds, _)| seconds).sum();
    log::info!("bench nbody on the CPU: about {estimate:.0} s here ({rate:.2e} interactions/s measured)");
    let progress = Progress::new("bench nbody (CPU)", plan.len() as u64, &options.stop);
    let mut table = format!(
        "n-body on the CPU ({threads} threads), {}: accelerations pass median of {} after {} warm-up\n",
        options.precision.name(),
        options.repeats,
        options.warmup
    );
    table.push_str(&format!(
        "{:>9} {:>12} {:>14} {:>9} {:>10}\n",
        "bodies", "forces ms", "interactions/s", "GFLOP/s", "frames/s"
    ));
    let mut sizes = Vec::new();
    for (n, _, frames_refused) in plan {
        if progress.stopped() {
            break;
        }
        progress.step(format!("{n} bodies"));
        let bodies = options.preset.generate(n as usize, 1);
        let params = Params {
            dt: options.preset.default_dt(),
            softening: options.preset.default_softening(),
            gravity: 1.0,
            damping: 1.0,
        };
        let times = match options.precision {
            Precision::F32 => time_cpu::<f32>(&bodies, &params, options),
            Precision::F64 => time_cpu::<f64>(&bodies, &params, options),
        };
        let forces_us =
            Percentiles::of(times.into_iter()).ok_or_else(|| Error::InvalidInput("no CPU timings".to_owned()))?;
        let interactions_per_s = f64::from(n) * f64::from(n) / (forces_us.median * 1e-6);
        let frame = match (&frames_refused, options.frames > 0 && !progress.stopped()) {
            (Some(why), _) => Some(json!({ "error": why })),
            (None, true) => {
                let settings = NBodySettings {
                    bodies: Some(n),
                    preset: options.preset,
                    variant: Variant { precision: options.precision, ..Variant::default() },
                    energy_every: 0,
                    ..NBodySettings::default()
                };
                let cpu = CudaOptions { backend: BackendRequest::Cpu, ..options.cuda.clone() };
                let measured = frame_run(options, n, DemoSpec::new(settings), cpu, false, frames);
                Some(measured.unwrap_or_else(|e| json!({ "error": e.to_string() })))
            }
            (None, false) => None,
        };
        let frames_per_second = frame.as_ref().and_then(|f| f["steps_per_s"].as_f64());
        table.push_str(&format!(
            "{:>9} {:>12.2} {:>14.3e} {:>9.1} {:>10}\n",
            n,
            forces_us.median / 1e3,
            interactions_per_s,
            interactions_per_s * FLOPS_PER_INTERACTION / 1e9,
            frames_per_second.map(|f| format!("{f:.1}")).unwrap_or_else(|| "–".to_owned())
        ));
        if let Some(error) = frame.as_ref().and_then(|f| f["error"].as_str()) {
            table.push_str(&format!("          frames not measured: {error}\n"));
        }
        sizes.push(json!({
            "bodies": n,
            "forces_us": forces_us,
            "interactions_per_s": interactions_per_s,
            "gflops": interactions_per_s * FLOPS_PER_INTERACTION / 1e9,
            "steps_per_s": frames_per_second,
            "frame": frame,
        }));
        progress.done_one();
    }
    let json = json!({
        "benchmark": "nbody",
        "backend": "cpu",
        "threads": threads,
        "precision": options.precision,
        "flops_per_interaction": FLOPS_PER_INTERACTION,
        "method": format!("wall clock around each accelerations pass, {} warm-up then {} timed, median", options.warmup, options.repeats),
        "preset": options.preset,
        "sizes": sizes,
        "interrupted": progress.stopped(),
    });
    if progress.stopped() {
        table.push_str(&format!("stopped ({}): the table holds what was measured before\n", options.stop.cause()));
    }
    Ok(BenchReport { json, table })
}

fn time_cpu<T: cpu::Real>(bodies: &Bodies, params: &Params, options: &NBodyBench) -> Vec<f64> {
    let positions: Vec<[T; 4]> = bodies.positions.iter().map(|p| p.map(T::from_f64)).collect();
    let mut out = vec![[T::ZERO; 4]; bodies.len()];
    let mut scratch = Scratch::default();
    for _ in 0..options.warmup.min(2) {
        cpu::accelerations(&positions, params, &mut scratch, &mut out);
    }
    (0..options.repeats.min(20))
        .map(|_| {
            let started = Instant::now();
            cpu::accelerations(&positions, params, &mut scratch, &mut out);
            started.elapsed().as_secs_f64() * 1e6
        })
        .collect()
}
