//! The panel's readouts of speed: steps per second, the forces kernel's recent times (per device
//! with `--devices`) and the peak rate they are measured against. The energy readout is in
//! `energy.rs`.

use std::collections::VecDeque;
use std::time::Instant;

use super::NBody;
use super::engine::Engine;
use super::kernels::Precision;
use super::multi::DeviceTimes;
use crate::error::Result;

/// Recent measurements for the panel.
#[derive(Default)]
pub(super) struct Readouts {
    pub(super) steps: VecDeque<Instant>,
    pub(super) forces_us: VecDeque<f64>,
    pub(super) initial_energy: Option<f64>,
    pub(super) energy: Option<(u64, f64, f64)>,
    /// With `--devices`: recent GPU times of each step, per device.
    pub(super) devices: VecDeque<Vec<DeviceTimes>>,
    /// With `--devices`: the forces kernel over all bodies on the first device alone, µs
    /// (measured at each reset), the reference of the scaling efficiency.
    pub(super) one_device_forces_us: Option<f64>,
    /// The tree method: node interactions per body of a recent step.
    pub(super) tree_interactions_per_body: Option<f64>,
}

impl Readouts {
    pub(super) fn median_forces_us(&self) -> Option<f64> {
        crate::stats::Percentiles::of(self.forces_us.iter().copied()).map(|p| p.median)
    }
}

impl NBody {
    /// Moves the timings the step left (kernel times, per-device times) into the panel's readouts.
    pub(super) fn collect_readouts(&mut self) -> Result<()> {
        match &mut self.engine {
            Engine::Cuda { simulation, multi: None, .. } => {
                while let Some((_, microseconds)) = simulation.poll_force_time()? {
                    self.readouts.forces_us.push_back(microseconds);
                }
                // A walk that hit its stack or visit bound becomes the frame's error here.
                if let Some(interactions) = simulation.poll_tree_status()? {
                    self.readouts.tree_interactions_per_body = Some(interactions as f64 / f64::from(simulation.len()));
                }
            }
            Engine::Cuda { simulation, multi: Some(multi), .. } => {
                while let Some((_, microseconds)) = simulation.poll_force_time()? {
                    self.readouts.one_device_forces_us = Some(microseconds);
                }
                while let Some((_, times)) = multi.poll_times()? {
                    self.readouts.devices.push_back(times);
                }
                while self.readouts.devices.len() > 60 {
                    self.readouts.devices.pop_front();
                }
            }
            Engine::Cpu(engine) => {
                if let Some(microseconds) = engine.forces_us.take() {
                    self.readouts.forces_us.push_back(microseconds);
                }
                if let Some(per_body) = engine.tree_interactions_per_body.take() {
                    self.readouts.tree_interactions_per_body = Some(per_body);
                }
            }
            Engine::Compiling(_) => {}
        }
        while self.readouts.forces_us.len() > 60 {
            self.readouts.forces_us.pop_front();
        }
        Ok(())
    }

    pub(super) fn note_step(&mut self) {
        let now = Instant::now();
        self.readouts.steps.push_back(now);
        while self.readouts.steps.front().is_some_and(|t| now.duration_since(*t).as_secs_f64() > 1.0) {
            self.readouts.steps.pop_front();
        }
    }

    /// Steps per second over the recent steps; `None` when none was taken in the last second
    /// (paused), so a stale figure is not shown as current.
    pub(super) fn steps_per_second(&self) -> Option<f64> {
        let steps = &self.readouts.steps;
        match (steps.front(), steps.back()) {
            (Some(_), Some(last)) if last.elapsed().as_secs_f64() > 1.0 => None,
            (Some(first), Some(last)) if steps.len() > 1 => {
                Some((steps.len() - 1) as f64 / last.duration_since(*first).as_secs_f64().max(1e-9))
            }
            _ => None,
        }
    }

    pub(super) fn peak_flops(&self) -> Option<f64> {
        let cuda = self.pipeline.cuda()?;
        let device = cuda.context.device();
        match self.settings.variant.precision {
            Precision::F32 => device.fp32_peak_flops(),
            Precision::F64 => device.fp64_peak_flops(),
        }
    }
}
