//! `bench nbody --method tree`: the Barnes-Hut step stage by stage (CUDA events between the
//! stages, medians after a warm-up), its interactions per body and its force error against direct
//! summation in f64, all-pairs beside it where all-pairs is practical, and full headless frames.
//! On the CPU backend, the tree's accelerations pass beside all-pairs', by the wall clock.

use std::time::Instant;

use serde_json::json;

use super::super::cpu::{self, Params, Scratch};
use super::super::kernels::{Kernels, Precision, Variant};
use super::super::presets::Bodies;
use super::super::tree::check::{ForceErrors, direct_accelerations, force_errors, sample};
use super::super::tree::gpu::{GpuTree, STAGES, StageMarks};
use super::super::tree::{Method, TreeForces};
use super::super::{NBodySettings, sim, tune};
use super::frames::frame_run;
use super::sweep::time_step;
use super::{NBodyBench, to_vectors};
use crate::graphics::GraphicsApi;
use crate::cuda::{DeviceBuffer, DeviceInfo, Event, Stream};
use crate::demo_kit::DemoSpec;
use crate::demo_kit::bench::{BenchReport, FrameRunner, Repeats, cell};
use crate::progress::Progress;
use crate::runtime::{CudaOptions, CudaRuntime};
use crate::stats::Percentiles;
use crate::error::{Error, Result};

/// Bodies whose force error is measured against direct summation, spread over the index range.
const ERROR_SAMPLE: usize = 1024;
/// All-pairs is timed beside the tree up to this many bodies on CUDA (beyond, a step takes
/// seconds: 1,048,576 bodies run about 2 steps/s on an H100).
const ALL_PAIRS_UP_TO_CUDA: u32 = 262_144;
/// On the CPU backend, up to this many (a pass of 16,384 takes about a second on 2 cores).
const ALL_PAIRS_UP_TO_CPU: u32 = 16_384;

/// The relative force error of `accelerations` (G = 1) at `positions` (as the method saw them)
/// against direct summation in f64 over [`ERROR_SAMPLE`] bodies.
fn errors_against_direct(positions: &[[f64; 4]], accelerations: &[[f64; 4]], params: &Params) -> ForceErrors {
    let bodies = sample(positions.len(), ERROR_SAMPLE);
    let direct = direct_accelerations(positions, &bodies, params);
    force_errors(accelerations, &bodies, &direct)
}

fn errors_json(errors: &ForceErrors) -> serde_json::Value {
    let finite = |v: f64| v.is_finite().then_some(v);
    json!({ "median": finite(errors.median), "p99": finite(errors.p99), "max": finite(errors.max), "bodies": errors.bodies })
}

fn errors_cell(errors: &ForceErrors) -> String {
    format!("{:.1e}/{:.1e}/{:.1e}", errors.median, errors.p99, errors.max)
}

fn frame_settings(options: &NBodyBench, n: u32, precision: Precision) -> NBodySettings {
    NBodySettings {
        bodies: Some(n),
        preset: options.preset,
        variant: Variant { precision, ..Variant::default() },
        energy_every: 0,
        force_check_every: 0.0, // the bench measures the error itself, outside the frames
        pipeline_depth: options.pipeline_depth,
        method: Method::Tree,
        theta: options.theta,
        ..NBodySettings::default()
    }
}

/// The tree on CUDA, size by size.
pub(super) fn tree_cuda(options: &NBodyBench, cuda: &CudaRuntime, frames: FrameRunner<'_>) -> Result<BenchReport> {
    check_tree_on_cuda(options)?;
    let device = cuda.context.device().clone();
    let stream = Stream::new(&cuda.context)?;
    let integrator = Kernels::load(cuda, Variant { precision: Precision::F32, ..Variant::default() })?;
    let (all_pairs_variant, _) = tune::starting_variant(cuda, Precision::F32);
    let mut table = tree_table_header(options, &device);
    let frame_runs = if options.frames > 0 { 2 } else { 0 };
    let progress =
        Progress::new("bench nbody --method tree", (options.bodies.len() * (1 + frame_runs)) as u64, &options.stop);
    let mut sizes = Vec::new();
    let mut state = TreeBenchState { cuda, stream: &stream, integrator, options };
    for &n in &options.bodies {
        if progress.stopped() {
            break;
        }
        progress.step(format!("{n} bodies: tree steps"));
        let measured = match state.measure(n) {
            Ok(Some(measured)) => measured,
            Ok(None) => break, // stopped before a step of this size was timed
            Err(error) => {
                table.push_str(&format!("{n:>9} not measured: {error}\n"));
                sizes.push(json!({ "bodies": n, "error": error.to_string() }));
                progress.done_one();
                continue;
            }
        };
        progress.done_one();
        let all_pairs_us = if n <= ALL_PAIRS_UP_TO_CUDA && !progress.stopped() {
            let slices = sim::auto_slices(
                device.multiprocessors,
                all_pairs_variant.bodies_per_block(),
                all_pairs_variant.tile_size,
                n,
            );
            let bodies = options.preset.generate(n as usize, 1);
            Some(time_step(cuda, &stream, &bodies, all_pairs_variant, slices, &Params::defaults_for(options.preset), options)?)
        } else {
            None
        };
        let frame_rows = tree_frames(options, n, frame_runs, &progress, frames);
        table.push_str(&tree_row(n, &measured, all_pairs_us, &frame_rows));
        sizes.push(tree_size_json(options, n, &measured, all_pairs_us, all_pairs_variant, &frame_rows));
    }
    let json = tree_cuda_json(options, &device, sizes);
    Ok(BenchReport { json, table })
}

/// The tree on CUDA runs in fp32 on one device: anything else is refused before the bench starts.
fn check_tree_on_cuda(options: &NBodyBench) -> Result<()> {
    if options.precision != Precision::F32 {
        return Err(Error::InvalidInput(
            "the tree method runs in fp32 on CUDA: drop --precision f64, or bench --method all-pairs".to_owned(),
        ));
    }
    if options.devices.as_ref().is_some_and(|devices| devices.len() > 1) {
        return Err(Error::InvalidInput(
            "the tree method runs on one device: drop --devices, or bench --method all-pairs".to_owned(),
        ));
    }
    Ok(())
}

/// The CUDA tree table's title (what was measured, on which device) and column names.
fn tree_table_header(options: &NBodyBench, device: &DeviceInfo) -> String {
    let mut table = format!(
        "n-body, Barnes-Hut tree (θ {}), on {} ({} SMs): stage medians of {} steps after {} warm-up (CUDA events); \
         f64 force error over {ERROR_SAMPLE} bodies (median/p99/max); frames/s of the median frame\n",
        options.theta, device.name, device.multiprocessors, options.repeats, options.warmup
    );
    table.push_str(&format!(
        "{:>9} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>8} {:>8} {:>9} {:>23} {:>10} {:>8} {:>8}\n",
        "bodies",
        "codes",
        "sort",
        "build",
        "moments",
        "walk",
        "integr.",
        "step ms",
        "steps/s",
        "nodes/body",
        "force error",
        "all-pairs",
        "GL f/s",
        "Vulkan"
    ));
    table
}

/// Full headless frames of `n` bodies with the tree, on each of the first `frame_runs` renderers
/// in turn until the bench is stopped; a failed run is kept as its error.
fn tree_frames(
    options: &NBodyBench,
    n: u32,
    frame_runs: usize,
    progress: &Progress,
    frames: FrameRunner<'_>,
) -> Vec<serde_json::Value> {
    let mut frame_rows = Vec::new();
    for renderer in GraphicsApi::ALL.into_iter().take(frame_runs) {
        if progress.stopped() {
            break;
        }
        progress.step(format!("{n} bodies: {} full frames on {}", options.frames, renderer.label()));
        let cuda_options = CudaOptions { transfer: options.cuda.transfer.on(renderer), ..options.cuda.clone() };
        let spec = DemoSpec::new(frame_settings(options, n, Precision::F32));
        let run = frame_run(options, n, spec, cuda_options, renderer, frames);
        frame_rows.push(run.unwrap_or_else(|e| json!({ "error": e.to_string() })));
        progress.done_one();
    }
    frame_rows
}

/// One size's row of the CUDA tree table, and a line for each renderer whose frames were not
/// measured.
fn tree_row(
    n: u32,
    measured: &TreeMeasured,
    all_pairs_us: Option<f64>,
    frame_rows: &[serde_json::Value],
) -> String {
    let frame_rate = |at: usize| frame_rows.get(at).and_then(|f| f["frames_per_s_median"].as_f64());
    let stage = |name: &str| measured.stages.iter().find(|(s, _)| *s == name).map(|(_, p)| p.median / 1e3);
    let mut row = format!(
        "{:>9} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>8.3} {:>8.0} {:>9.0} {:>23} {:>10} {:>8} {:>8}\n",
        n,
        cell(stage("codes"), 3),
        cell(stage("sort"), 3),
        cell(stage("build"), 3),
        cell(stage("moments"), 3),
        cell(stage("walk"), 3),
        cell(Some(measured.integrate_us / 1e3), 3),
        measured.step_us / 1e3,
        1e6 / measured.step_us,
        measured.interactions_per_body,
        errors_cell(&measured.errors),
        cell(all_pairs_us.map(|us| 1e6 / us), 0),
        cell(frame_rate(0), 0),
        cell(frame_rate(1), 0),
    );
    for (frame_row, renderer) in frame_rows.iter().zip(["OpenGL", "Vulkan"]) {
        if let Some(error) = frame_row["error"].as_str() {
            row.push_str(&format!("          {renderer} frames not measured: {error}\n"));
        }
    }
    row
}

/// One size's entry in the CUDA tree report.
fn tree_size_json(
    options: &NBodyBench,
    n: u32,
    measured: &TreeMeasured,
    all_pairs_us: Option<f64>,
    all_pairs_variant: Variant,
    frame_rows: &[serde_json::Value],
) -> serde_json::Value {
    let stages: serde_json::Map<String, serde_json::Value> =
        measured.stages.iter().map(|(name, times)| ((*name).to_owned(), json!(times))).collect();
    json!({
        "bodies": n,
        "theta": options.theta,
        "stages_us": stages,
        "integrate_us_median": measured.integrate_us,
        "step_us_median": measured.step_us,
        "steps_per_s": 1e6 / measured.step_us,
        "interactions_per_body": measured.interactions_per_body,
        "force_error": errors_json(&measured.errors),
        "all_pairs_step_us_median": all_pairs_us,
        "all_pairs_steps_per_s": all_pairs_us.map(|us| 1e6 / us),
        "all_pairs_variant": all_pairs_us.map(|_| all_pairs_variant),
        "frame": frame_rows.first(),
        "frame_vulkan": frame_rows.get(1),
    })
}

/// The CUDA tree report: how it was measured, on what, and `sizes`.
fn tree_cuda_json(options: &NBodyBench, device: &DeviceInfo, sizes: Vec<serde_json::Value>) -> serde_json::Value {
    json!({
        "benchmark": "nbody",
        "backend": "cuda",
        "force_method": "tree",
        "theta": options.theta,
        "device": device,
        "precision": Precision::F32,
        "method": format!(
            "CUDA events before the step, between the tree's stages ({}) and after the kick; {} warm-up then {} timed \
             steps, medians; integrate is the step less the tree's stages (drift and kick); force error of one step's \
             accelerations against f64 direct summation at the fp32 positions, over {ERROR_SAMPLE} bodies spread over \
             the index range; all-pairs is the tuned forces kernel's whole step",
            STAGES.join(", "),
            options.warmup,
            options.repeats
        ),
        "preset": options.preset,
        "sizes": sizes,
    })
}

/// What the CUDA tree bench keeps across sizes.
struct TreeBenchState<'a> {
    cuda: &'a CudaRuntime,
    stream: &'a Stream,
    integrator: Kernels,
    options: &'a NBodyBench,
}

/// One size's tree measurement.
struct TreeMeasured {
    stages: Vec<(&'static str, Percentiles)>,
    integrate_us: f64,
    step_us: f64,
    interactions_per_body: f64,
    errors: ForceErrors,
}

impl TreeBenchState<'_> {
    /// Times whole tree steps (drift, tree forces, kick) of `n` bodies; `None` when stopped before
    /// one was timed.
    fn measure(&mut self, n: u32) -> Result<Option<TreeMeasured>> {
        let (options, stream, context) = (self.options, self.stream, &self.cuda.context);
        let mut tree = GpuTree::new(&self.cuda.compiler, context, n)?;
        let bodies = options.preset.generate(n as usize, 1);
        let params = Params::defaults_for(options.preset);
        let vectors = n as usize * 16;
        let buffer = |bytes: usize| DeviceBuffer::new(context, bytes);
        let start = to_vectors(&bodies, Precision::F32);
        let mut positions = [buffer(vectors)?, buffer(vectors)?];
        positions[0].upload(stream, &start)?;
        let mut velocities = buffer(vectors)?;
        velocities.fill(stream, 0)?;
        let mut accelerations = buffer(vectors)?;
        accelerations.fill(stream, 0)?;
        let partial = buffer(vectors)?;
        let marks = StageMarks::new(context)?;
        let (begin, end) = (Event::new(context)?, Event::new(context)?);
        let mut stage_times: Vec<Vec<f64>> = vec![Vec::new(); STAGES.len()];
        let (mut steps, mut integrate) = (Vec::new(), Vec::new());
        let mut current = 0;
        let repeats = Repeats { warmup: options.warmup, timed: options.repeats };
        let _ = repeats.run(&options.stop, |_, timed| {
            let (from, to) = (current, 1 - current);
            begin.record(stream)?;
            let (velocity, acceleration) = (velocities.span(), accelerations.span());
            let (p_from, p_to) = (positions[from].span(), positions[to].span());
            self.integrator.drift(stream, p_from, p_to, velocity, acceleration, None, n, &params)?;
            tree.forces_marked(stream, p_to, partial.span(), options.theta, params.softening, Some(&marks))?;
            self.integrator.kick(stream, velocity, acceleration, partial.span(), None, n, 1, &params)?;
            end.record(stream)?;
            end.synchronize()?;
            current = to;
            if timed {
                let stages = marks.stage_us()?;
                let step = f64::from(end.elapsed_ms_since(&begin)?) * 1e3;
                integrate.push(step - stages.iter().sum::<f64>());
                steps.push(step);
                for (times, time) in stage_times.iter_mut().zip(stages) {
                    times.push(time);
                }
            }
            Ok(())
        })?;
        stream.synchronize()?;
        // The status counts the node interactions of a whole walk, over every body.
        let interactions_per_body = tree.finish()? as f64 / f64::from(n);
        let Some(step) = Percentiles::of(steps.into_iter()) else { return Ok(None) };
        let integrate_us = Percentiles::of(integrate.into_iter()).map_or(f64::NAN, |p| p.median);
        let stages = STAGES
            .iter()
            .zip(stage_times)
            .filter_map(|(name, times)| Some((*name, Percentiles::of(times.into_iter())?)))
            .collect();
        // One more tree pass at the positions now held, its output poisoned first, for the error.
        let mut poisoned = partial;
        poisoned.fill(stream, 0xff)?;
        tree.forces(stream, positions[current].span(), poisoned.span(), options.theta, params.softening)?;
        stream.synchronize()?;
        tree.finish()?;
        let (mut at, mut forces) = (vec![0u8; vectors], vec![0u8; vectors]);
        positions[current].download(stream, &mut at)?;
        poisoned.download(stream, &mut forces)?;
        let wide = |bytes: &[u8]| -> Vec<[f64; 4]> {
            bytemuck::pod_collect_to_vec::<u8, [f32; 4]>(bytes).iter().map(|v| v.map(f64::from)).collect()
        };
        let errors = errors_against_direct(&wide(&at), &wide(&forces), &params);
        Ok(Some(TreeMeasured { stages, integrate_us, step_us: step.median, interactions_per_body, errors }))
    }
}

/// The tree on the CPU backend: its accelerations pass and all-pairs' beside it, by the wall
/// clock, with the tree's force error.
pub(super) fn tree_cpu(options: &NBodyBench, frames: FrameRunner<'_>) -> Result<BenchReport> {
    let threads = rayon::current_num_threads();
    let params = Params::defaults_for(options.preset);
    let mut table = format!(
        "n-body, Barnes-Hut tree (θ {}), on the CPU ({threads} threads), {}: accelerations pass median of {} after \
         {} warm-up (wall clock); force error against f64 direct summation over {ERROR_SAMPLE} bodies; frames/s \
         from the median frame\n",
        options.theta,
        options.precision.name(),
        options.repeats.min(20),
        options.warmup.min(2)
    );
    table.push_str(&format!(
        "{:>9} {:>9} {:>10} {:>23} {:>13} {:>9}\n",
        "bodies", "tree ms", "nodes/body", "force error", "all-pairs ms", "frames/s"
    ));
    let progress = Progress::new("bench nbody --method tree (CPU)", options.bodies.len() as u64, &options.stop);
    let mut sizes = Vec::new();
    for &n in &options.bodies {
        if progress.stopped() {
            break;
        }
        progress.step(format!("{n} bodies"));
        let bodies = options.preset.generate(n as usize, 1);
        let timed = match options.precision {
            Precision::F32 => time_cpu_tree::<f32>(&bodies, &params, options)?,
            Precision::F64 => time_cpu_tree::<f64>(&bodies, &params, options)?,
        };
        let Some(timed) = timed else { break };
        let all_pairs_ms = if n <= ALL_PAIRS_UP_TO_CPU && !progress.stopped() {
            match options.precision {
                Precision::F32 => time_cpu_all_pairs::<f32>(&bodies, &params, options),
                Precision::F64 => time_cpu_all_pairs::<f64>(&bodies, &params, options),
            }
            .map(|us| us / 1e3)
        } else {
            None
        };
        let frame = (options.frames > 0 && !progress.stopped()).then(|| {
            let spec = DemoSpec::new(frame_settings(options, n, options.precision));
            frame_run(options, n, spec, options.cuda.on_cpu(), GraphicsApi::Gl, frames)
                .unwrap_or_else(|e| json!({ "error": e.to_string() }))
        });
        let frame_rate = frame.as_ref().and_then(|f| f["frames_per_s_median"].as_f64());
        table.push_str(&format!(
            "{:>9} {:>9.2} {:>10.0} {:>23} {:>13} {:>9}\n",
            n,
            timed.pass_us.median / 1e3,
            timed.interactions_per_body,
            errors_cell(&timed.errors),
            cell(all_pairs_ms, 2),
            cell(frame_rate, 1)
        ));
        if let Some(error) = frame.as_ref().and_then(|f| f["error"].as_str()) {
            table.push_str(&format!("          frames not measured: {error}\n"));
        }
        sizes.push(json!({
            "bodies": n,
            "theta": options.theta,
            "tree_us": timed.pass_us,
            "interactions_per_body": timed.interactions_per_body,
            "force_error": errors_json(&timed.errors),
            "all_pairs_ms_median": all_pairs_ms,
            "steps_per_s": frame_rate,
            "frame": frame,
        }));
        progress.done_one();
    }
    let json = json!({
        "benchmark": "nbody",
        "backend": "cpu",
        "force_method": "tree",
        "theta": options.theta,
        "threads": threads,
        "precision": options.precision,
        "method": format!(
            "wall clock around each accelerations pass (tree: build and walk), {} warm-up then {} timed, median; \
             force error against f64 direct summation over {ERROR_SAMPLE} bodies",
            options.warmup.min(2),
            options.repeats.min(20)
        ),
        "preset": options.preset,
        "sizes": sizes,
    });
    Ok(BenchReport { json, table })
}

/// One size's CPU tree measurement.
struct CpuTreeTimed {
    pass_us: Percentiles,
    interactions_per_body: f64,
    errors: ForceErrors,
}

/// The tree's accelerations pass timed `repeats` times (at most 20) after `warmup` (at most 2);
/// `None` when stopped before one was timed.
fn time_cpu_tree<T: cpu::Real>(bodies: &Bodies, params: &Params, options: &NBodyBench) -> Result<Option<CpuTreeTimed>> {
    let positions: Vec<[T; 4]> = bodies.positions.iter().map(|p| p.map(T::from_f64)).collect();
    let mut out = vec![[T::from_f64(f64::NAN); 4]; bodies.len()];
    let mut forces = TreeForces::default();
    let repeats = Repeats { warmup: options.warmup.min(2), timed: options.repeats.min(20) };
    let (mut times, mut interactions) = (Vec::new(), 0);
    let _ = repeats.run(&options.stop, |_, timed| {
        let started = Instant::now();
        let stats = forces.accelerations(&positions, params, options.theta, &mut out)?;
        if timed {
            times.push(started.elapsed().as_secs_f64() * 1e6);
        }
        interactions = stats.interactions;
        Ok(())
    })?;
    let Some(pass_us) = Percentiles::of(times.into_iter()) else { return Ok(None) };
    let seen: Vec<[f64; 4]> = positions.iter().map(|p| p.map(T::to_f64)).collect();
    let wide: Vec<[f64; 4]> = out.iter().map(|a| a.map(T::to_f64)).collect();
    Ok(Some(CpuTreeTimed {
        pass_us,
        interactions_per_body: interactions as f64 / bodies.len().max(1) as f64,
        errors: errors_against_direct(&seen, &wide, params),
    }))
}

/// Median µs of all-pairs' accelerations pass (at most 5 timed after 1 warm-up), `None` when
/// stopped first.
fn time_cpu_all_pairs<T: cpu::Real>(bodies: &Bodies, params: &Params, options: &NBodyBench) -> Option<f64> {
    let positions: Vec<[T; 4]> = bodies.positions.iter().map(|p| p.map(T::from_f64)).collect();
    let mut out = vec![[T::ZERO; 4]; bodies.len()];
    let mut scratch = Scratch::default();
    let stop = &options.stop;
    let mut times = Vec::new();
    let repeats = Repeats { warmup: 1, timed: options.repeats.clamp(1, 5) };
    let _ = repeats.run(stop, |_, timed| {
        let started = Instant::now();
        let whole = cpu::accelerations_in_bands(positions.as_slice(), params, &mut scratch, &mut out, 1024, || {
            !stop.requested()
        });
        if whole && timed {
            times.push(started.elapsed().as_secs_f64() * 1e6);
        }
        Ok(())
    });
    Percentiles::of(times.into_iter()).map(|p| p.median)
}
