//! The best variant split across several devices, timed against the same code on the first
//! device alone: the scaling efficiency of the split and its exchange.

use serde_json::json;

use super::super::cpu::Params;
use super::super::kernels::Precision;
use super::super::multi::{DeviceSummary, DeviceTimes, MultiSimulation};
use super::super::presets::Bodies;
use super::super::sim::StepBuffers;
use super::{NBodyBench, VariantResult, to_vectors};
use crate::cuda::{DeviceBuffer, Event, Stream};
use crate::runtime::CudaRuntime;
use crate::stats::Percentiles;
use crate::error::{Error, Result};

/// A multi-device measurement: JSON and the lines of the table.
pub(super) struct MultiBench {
    pub(super) json: serde_json::Value,
    pub(super) table: String,
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
pub(super) fn multi_benchmark(
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
