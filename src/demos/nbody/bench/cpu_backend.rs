//! The benchmark on the CPU backend: the accelerations pass timed by the wall clock, planned from
//! this machine's measured rate so that sizes too slow for frames are said, not run, and each
//! pass runs in bands short enough that a stop request ends it within a fraction of a second.

use std::time::Instant;

use serde_json::json;

use super::super::cpu::{self, Params, Scratch};
use super::super::cpu_rate;
use super::super::kernels::{Precision, Variant};
use super::super::presets::Bodies;
use super::super::{FLOPS_PER_INTERACTION, NBodySettings};
use super::NBodyBench;
use super::frames::frame_run;
use crate::graphics::GraphicsApi;
use crate::demo_kit::DemoSpec;
use crate::demo_kit::bench::{BenchReport, FrameRunner, Repeats};
use crate::progress::Progress;
use crate::stats::Percentiles;
use crate::error::{Error, Result};

pub(super) fn nbody_cpu(options: &NBodyBench, frames: FrameRunner<'_>) -> Result<BenchReport> {
    let threads = rayon::current_num_threads();
    let rate = match options.precision {
        Precision::F32 => cpu_rate::measured_rate::<f32>(),
        Precision::F64 => cpu_rate::measured_rate::<f64>(),
    };
    let plan = plan(options, rate);
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
        let params = Params::defaults_for(options.preset);
        let times = match options.precision {
            Precision::F32 => time_cpu::<f32>(&bodies, &params, options, rate)?,
            Precision::F64 => time_cpu::<f64>(&bodies, &params, options, rate)?,
        };
        let timed_passes = times.len();
        let Some(forces_us) = Percentiles::of(times.into_iter()) else {
            if progress.stopped() {
                break; // stopped before a pass of this size was timed: the size is left out
            }
            return Err(Error::InvalidInput("no CPU timings".to_owned()));
        };
        let interactions_per_s = f64::from(n) * f64::from(n) / (forces_us.median * 1e-6);
        let frame = match (&frames_refused, options.frames > 0 && !progress.stopped()) {
            (Some(why), _) => Some(json!({ "error": why })),
            (None, true) => Some(cpu_frames(options, n, frames)),
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
        let asked = options.repeats.min(20);
        if timed_passes < asked as usize {
            table.push_str(&format!("          {timed_passes} of {asked} passes timed before the stop\n"));
        }
        sizes.push(json!({
            "bodies": n,
            "forces_us": forces_us,
            "interactions_per_s": interactions_per_s,
            "gflops": interactions_per_s * FLOPS_PER_INTERACTION / 1e9,
            "timed_passes": timed_passes,
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
    });
    Ok(BenchReport { json, table })
}

/// The plan, from this machine's measured `rate` (interactions/s), before any size runs: each
/// size's body count, about how long it takes, and why the demo refuses its frames, if it does
/// (a step longer than the window can wait for).
fn plan(options: &NBodyBench, rate: f64) -> Vec<(u32, f64, Option<String>)> {
    let passes = f64::from(options.warmup.min(2) + options.repeats.min(20));
    options
        .bodies
        .iter()
        .map(|&n| {
            let step_s = f64::from(n) * f64::from(n) / rate;
            let frames_refused = (options.frames > 0 && step_s > cpu_rate::MAX_STEP_SECONDS).then(|| {
                format!(
                    "a step of {n} bodies takes ~{step_s:.1} s on this CPU, longer than the window's {} s a step; \
                     `nbody --headless --backend cpu --bodies {n}` runs such frames",
                    cpu_rate::MAX_STEP_SECONDS
                )
            });
            let frames_s = if frames_refused.is_none() { f64::from(options.frames) * step_s } else { 0.0 };
            (n, passes * step_s + frames_s, frames_refused)
        })
        .collect()
}

/// Full headless frames of `n` bodies on the CPU backend, or why they were not measured.
fn cpu_frames(options: &NBodyBench, n: u32, frames: FrameRunner<'_>) -> serde_json::Value {
    let settings = NBodySettings {
        bodies: Some(n),
        preset: options.preset,
        variant: Variant { precision: options.precision, ..Variant::default() },
        energy_every: 0,
        force_check_every: 0.0, // no state is read back between the frames it times
        ..NBodySettings::default()
    };
    let measured = frame_run(options, n, DemoSpec::new(settings), options.cuda.on_cpu(), GraphicsApi::Gl, frames);
    measured.unwrap_or_else(|e| json!({ "error": e.to_string() }))
}

/// A pass runs in bands this long at most (at the measured rate), so that a stop request ends it
/// within one band, however many bodies there are.
const BAND_SECONDS: f64 = 0.1;

/// The accelerations pass timed `repeats` times (at most 20) after `warmup` (at most 2), until a
/// stop request: the passes timed whole (a pass cut short is not counted), µs each.
fn time_cpu<T: cpu::Real>(bodies: &Bodies, params: &Params, options: &NBodyBench, rate: f64) -> Result<Vec<f64>> {
    let positions: Vec<[T; 4]> = bodies.positions.iter().map(|p| p.map(T::from_f64)).collect();
    let mut out = vec![[T::ZERO; 4]; bodies.len()];
    let mut scratch = Scratch::default();
    let band = (BAND_SECONDS * rate / bodies.len().max(1) as f64) as usize;
    let stop = &options.stop;
    let repeats = Repeats { warmup: options.warmup.min(2), timed: options.repeats.min(20) };
    let mut times = Vec::new();
    let _ = repeats.run(stop, |_, timed| {
        let started = Instant::now();
        let whole = cpu::accelerations_in_bands(&positions, params, &mut scratch, &mut out, band, || !stop.requested());
        if whole && timed {
            times.push(started.elapsed().as_secs_f64() * 1e6);
        }
        Ok(())
    })?;
    Ok(times)
}
