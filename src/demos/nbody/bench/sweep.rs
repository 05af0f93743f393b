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
use crate::cuda::{DeviceBuffer, DeviceInfo, Event, Stream};
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
    let mut table = sweep_table_header(options, &device);
    let mut sizes = Vec::new();
    let devices = devices_to_split_over(options)?;
    let mut multi_tables = String::new();
    let variants = candidates(options);
    let progress = Progress::new("bench nbody", (options.bodies.len() * variants.len()) as u64, &options.stop);
    let state =
        SweepState { options, cuda, stream: &stream, progress: &progress, device: &device, peak, variants: &variants, frames };
    for &n in &options.bodies {
        if progress.stopped() {
            break;
        }
        let bodies = options.preset.generate(n as usize, 1);
        let params = Params::defaults_for(options.preset);
        let vector = options.precision.vector_bytes();
        let mut positions = DeviceBuffer::new(&cuda.context, n as usize * vector)?;
        positions.upload(&stream, &to_vectors(&bodies, options.precision))?;
        let (results, failures) = state.time_variants(n, &positions, &params)?;
        if progress.stopped() {
            break; // the sweep of this size was cut short: it is left out, the sizes before are kept
        }
        let Some(best) = results.iter().max_by(|a, b| a.interactions_per_s.total_cmp(&b.interactions_per_s)).cloned()
        else {
            return Err(Error::Unavailable(format!("no forces variant ran for {n} bodies: {failures:?}")));
        };
        let step_us = time_step(cuda, &stream, &bodies, best.variant, best.slices, &params, options)?;
        let frame = state.frames_on(n, &best, GraphicsApi::Gl, format!("{n} bodies, {} full frames", options.frames));
        // The same frames drawn by the Vulkan renderer, CUDA writing the buffers Vulkan allocated.
        let frame_vulkan = state.frames_on(
            n,
            &best,
            GraphicsApi::Vulkan,
            format!("{n} bodies, {} full frames on Vulkan", options.frames),
        );
        let multi_device = match &devices {
            Some(devices) if !progress.stopped() => {
                Some(multi_benchmark(cuda, &stream, &bodies, &best, &params, options, devices, step_us)?)
            }
            _ => None,
        };
        let measured = SizeMeasured { n, results, failures, best, step_us, frame, frame_vulkan };
        table.push_str(&measured.row());
        sizes.push(measured.json(multi_device.as_ref().map(|m| &m.json)));
        if let Some(multi) = multi_device {
            multi_tables.push_str(&multi.table);
        }
    }
    table.push_str(&multi_tables);
    let json = sweep_json(options, &device, peak, sizes);
    Ok(BenchReport { json, table })
}

/// The sweep table's title (what was measured, on which device) and column names.
fn sweep_table_header(options: &NBodyBench, device: &DeviceInfo) -> String {
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
    table
}

/// The devices the best variant is split across: those of `--devices` when it names more than
/// one, else every device when there are several; `None` on one. Refused unless in fp32.
fn devices_to_split_over(options: &NBodyBench) -> Result<Option<Vec<i32>>> {
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
    Ok(devices)
}

/// The sweep report: how it was measured, on what, and `sizes`.
fn sweep_json(
    options: &NBodyBench,
    device: &DeviceInfo,
    peak: Option<f64>,
    sizes: Vec<serde_json::Value>,
) -> serde_json::Value {
    json!({
        "benchmark": "nbody",
        "backend": "cuda",
        "device": device,
        "precision": options.precision,
        "peak_flops": peak,
        "flops_per_interaction": FLOPS_PER_INTERACTION,
        "method": format!("CUDA events around each forces launch, {} warm-up then {} timed, median; interactions counted as N²", options.warmup, options.repeats),
        "preset": options.preset,
        "sizes": sizes,
    })
}

/// What the CUDA sweep keeps across sizes.
struct SweepState<'a> {
    options: &'a NBodyBench,
    cuda: &'a CudaRuntime,
    stream: &'a Stream,
    progress: &'a Progress,
    device: &'a DeviceInfo,
    peak: Option<f64>,
    variants: &'a [Variant],
    frames: FrameRunner<'a>,
}

impl SweepState<'_> {
    /// The forces kernel of every variant, at each slice count, on `positions` (`n` bodies), until
    /// the bench is stopped; the variants that failed to load or to run are kept with their errors.
    fn time_variants(
        &self,
        n: u32,
        positions: &DeviceBuffer,
        params: &Params,
    ) -> Result<(Vec<VariantResult>, Vec<serde_json::Value>)> {
        let options = self.options;
        let vector = options.precision.vector_bytes();
        let mut results: Vec<VariantResult> = Vec::new();
        let mut failures = Vec::new();
        for &variant in self.variants {
            if self.progress.stopped() {
                break;
            }
            self.progress.step(format!("{n} bodies, {}", variant.label()));
            let slice_counts = if options.slices.is_empty() {
                vec![sim::auto_slices(self.device.multiprocessors, variant.bodies_per_block(), variant.tile_size, n)]
            } else {
                options.slices.clone()
            };
            let mut kernels = match Kernels::load(self.cuda, variant) {
                Ok(kernels) => kernels,
                Err(error) => {
                    failures.push(json!({ "variant": variant, "error": error.to_string() }));
                    continue;
                }
            };
            for slices in slice_counts {
                let slice_length = sim::slice_length(n, slices, variant.tile_size);
                let slices = n.div_ceil(slice_length);
                let partial = DeviceBuffer::new(&self.cuda.context, slices as usize * n as usize * vector)?;
                let timed = time_forces(
                    &mut kernels,
                    self.stream,
                    positions,
                    &partial,
                    n,
                    slice_length,
                    params,
                    options.warmup,
                    options.repeats,
                );
                match timed {
                    Ok(times) => {
                        let Some(forces_us) = Percentiles::of(times.into_iter()) else {
                            continue;
                        };
                        results.push(self.variant_result(&kernels, variant, slices, n, forces_us)?);
                    }
                    Err(error) => {
                        failures.push(json!({ "variant": variant, "slices": slices, "error": error.to_string() }))
                    }
                }
            }
            self.progress.done_one();
        }
        Ok((results, failures))
    }

    /// `variant` with `slices` slices as measured: its forces kernel's times, the rates they give
    /// at `n` bodies and the kernel's registers and occupancy.
    fn variant_result(
        &self,
        kernels: &Kernels,
        variant: Variant,
        slices: u32,
        n: u32,
        forces_us: Percentiles,
    ) -> Result<VariantResult> {
        let interactions_per_s = f64::from(n) * f64::from(n) / (forces_us.median * 1e-6);
        let gflops = interactions_per_s * FLOPS_PER_INTERACTION / 1e9;
        Ok(VariantResult {
            variant,
            slices,
            registers: kernels.forces_attributes().registers,
            blocks_per_sm: kernels.forces_blocks_per_multiprocessor()?,
            forces_us,
            interactions_per_s,
            gflops,
            percent_of_peak: self.peak.map(|p| 100.0 * gflops * 1e9 / p),
        })
    }

    /// Full frames of `n` bodies with `best` on `renderer` (`step` names them in the progress),
    /// unless no frames were asked for or the bench was stopped. A failed frame run is said in its
    /// row; what was measured before it is kept.
    fn frames_on(
        &self,
        n: u32,
        best: &VariantResult,
        renderer: GraphicsApi,
        step: String,
    ) -> Option<serde_json::Value> {
        if self.options.frames > 0 && !self.progress.stopped() {
            self.progress.step(step);
            Some(
                frame_benchmark(self.options, n, best, renderer, self.frames)
                    .unwrap_or_else(|e| json!({ "error": e.to_string() })),
            )
        } else {
            None
        }
    }
}

/// One size's measurements: the sweep, and the best variant's whole step and frames.
struct SizeMeasured {
    n: u32,
    results: Vec<VariantResult>,
    failures: Vec<serde_json::Value>,
    best: VariantResult,
    step_us: f64,
    frame: Option<serde_json::Value>,
    frame_vulkan: Option<serde_json::Value>,
}

impl SizeMeasured {
    /// The step alone (drift, forces, kick back to back on the stream) sets the rate frames could
    /// reach: each frame's rate is shown beside it as a share of it.
    fn steps_per_second(&self) -> f64 {
        1e6 / self.step_us
    }

    /// Frames per second on OpenGL and on Vulkan, where they were measured.
    fn frame_rates(&self) -> (Option<f64>, Option<f64>) {
        let rate = |frame: &Option<serde_json::Value>| frame.as_ref().and_then(|f| f["steps_per_s"].as_f64());
        (rate(&self.frame), rate(&self.frame_vulkan))
    }

    /// Its row of the sweep table, and a line for each renderer whose frames were not measured.
    fn row(&self) -> String {
        let (frames_per_second, vulkan_per_second) = self.frame_rates();
        let steps_per_second = self.steps_per_second();
        let beside = |rate: Option<f64>| match rate {
            Some(rate) => format!("{rate:.0} ({:.0} %)", 100.0 * rate / steps_per_second),
            None => "–".to_owned(),
        };
        let best = &self.best;
        let mut row = format!(
            "{:>9} {:<44} {:>6} {:>10.3} {:>14.3e} {:>9.0} {:>7} {:>9.0} {:>14} {:>14}\n",
            self.n,
            best.variant.label(),
            best.slices,
            best.forces_us.median / 1e3,
            best.interactions_per_s,
            best.gflops,
            best.percent_of_peak.map(|p| format!("{p:.1}")).unwrap_or_else(|| "?".to_owned()),
            steps_per_second,
            beside(frames_per_second),
            beside(vulkan_per_second),
        );
        if let Some(error) = self.frame.as_ref().and_then(|f| f["error"].as_str()) {
            row.push_str(&format!("          OpenGL frames not measured: {error}\n"));
        }
        if let Some(error) = self.frame_vulkan.as_ref().and_then(|f| f["error"].as_str()) {
            row.push_str(&format!("          Vulkan frames not measured: {error}\n"));
        }
        row
    }

    /// Its entry in the sweep report, with the split across devices where there was one.
    fn json(&self, multi_device: Option<&serde_json::Value>) -> serde_json::Value {
        let (frames_per_second, vulkan_per_second) = self.frame_rates();
        let steps_per_second = self.steps_per_second();
        let best = &self.best;
        let mut sorted = self.results.clone();
        sorted.sort_by(|a, b| b.interactions_per_s.total_cmp(&a.interactions_per_s));
        json!({
            "bodies": self.n,
            "best": best,
            "interactions_per_s": best.interactions_per_s,
            "gflops": best.gflops,
            "percent_of_peak": best.percent_of_peak,
            "step_us_median": self.step_us,
            "steps_per_s": steps_per_second,
            "frame_share_of_step_rate": frames_per_second.map(|f| f / steps_per_second),
            "frame_vulkan_share_of_step_rate": vulkan_per_second.map(|f| f / steps_per_second),
            "frame": self.frame,
            "frame_vulkan": self.frame_vulkan,
            "variants": sorted,
            "failed_variants": self.failures,
            "multi_device": multi_device,
        })
    }
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
