//! Changes asked for in the panel (reset, another kernel variant, slices, save, load, energy),
//! applied at the next step, which has the GL context. A change that can't be had leaves the
//! running simulation as it was.

use std::path::PathBuf;

use super::cpu::Params;
use super::engine::{Engine, make_engine};
use super::kernels::{Kernels, Variant};
use super::presets::Bodies;
use super::tree::{ForceMethod, Method};
use super::{
    NBody, NBodySettings, Readouts, camera_distance, make_buffers, mismatch, state, validate_bodies, validate_params,
};
use crate::error::Result;
use crate::camera::OrbitCamera;
use crate::scene::Graphics;

/// A change asked for in the panel, applied at the next step (which has the GL context).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Change {
    Reset,
    Variant(Variant),
    Slices(Option<u32>),
    PipelineDepth(u32),
    /// Another force method or opening angle: the bodies stay, the accelerations are recomputed.
    Method(ForceMethod),
    Save(PathBuf),
    Load(PathBuf),
    Energy,
}

impl NBody {
    /// Replaces bodies, engine and buffers together; on failure the old ones stay.
    pub(super) fn rebuild(
        &mut self,
        graphics: Graphics<'_>,
        settings: NBodySettings,
        bodies: Bodies,
        params: Params,
        step: u64,
    ) -> Result<()> {
        validate_params(&params)?;
        validate_bodies(bodies.len() as u32)?;
        settings.validate_pipeline()?;
        self.release_prepared()?;
        self.pipeline.transfer().synchronize()?;
        let engine = make_engine(self.pipeline.cuda().map(|c| &**c), &settings, &bodies, self.window)?;
        let depth = if self.pipeline.cuda().is_some() { settings.pipeline_depth as usize } else { 1 };
        let (positions, velocities) = make_buffers(&mut self.pipeline, graphics, &bodies, depth)?;
        let [old0, old1] = std::mem::replace(&mut self.positions, positions);
        let old_velocities = std::mem::replace(&mut self.velocities, velocities);
        for buffer in [old0, old1].into_iter().chain(old_velocities) {
            buffer.destroy(graphics);
        }
        self.engine = engine;
        self.settings = settings;
        self.params = params;
        self.step = step;
        self.current = 0;
        self.speed_reference = bodies.rms_speed().max(1e-6) as f32;
        self.readouts = Readouts::default();
        self.last_good = None; // other bodies: the state to go back to is this one's start
        if matches!(self.engine, Engine::Compiling(_)) {
            return Ok(()); // initialised when the kernels arrive
        }
        self.initialise_accelerations(graphics)
    }

    pub(super) fn apply(&mut self, graphics: Graphics<'_>, change: Change) -> Result<()> {
        match change {
            Change::Reset => {
                let settings = NBodySettings {
                    bodies: Some(self.edit.bodies),
                    preset: self.edit.preset,
                    seed: self.edit.seed,
                    load: None,
                    ..self.settings.clone()
                };
                validate_bodies(self.edit.bodies)?;
                let bodies = settings.preset.generate(self.edit.bodies as usize, settings.seed);
                let params = Params { dt: self.edit.params.dt, softening: self.edit.params.softening, ..self.params };
                let preset_changed = settings.preset != self.settings.preset;
                self.rebuild(graphics, settings, bodies, params, 0)?;
                if preset_changed {
                    self.camera = OrbitCamera::new(camera_distance(self.settings.preset));
                }
                Ok(())
            }
            Change::Variant(variant) => {
                // A variant chosen by hand wins over a tuning still running.
                self.tuner = None;
                self.set_variant(graphics, variant)
            }
            Change::PipelineDepth(pipeline_depth) => {
                let settings = NBodySettings { pipeline_depth, ..self.settings.clone() };
                let bodies = self.read_bodies(graphics)?;
                self.rebuild(graphics, settings, bodies, self.params, self.step)
            }
            Change::Method(method) => self.set_method(graphics, method),
            Change::Slices(slices) => {
                let settings = NBodySettings { slices, ..self.settings.clone() };
                let bodies = self.read_bodies(graphics)?;
                self.rebuild(graphics, settings, bodies, self.params, self.step)
            }
            Change::Save(path) => self.save(graphics, &path).map(|()| {
                let path = std::path::absolute(&path).unwrap_or(path);
                self.notice = Some(format!("saved {} bodies to {}", self.len(), path.display()));
            }),
            Change::Load(path) => {
                let saved = state::load(&path)?;
                let settings = NBodySettings { bodies: Some(saved.bodies.len() as u32), ..self.settings.clone() };
                self.rebuild(graphics, settings, saved.bodies, saved.params, saved.step)?;
                self.edit.params = self.params;
                self.edit.bodies = self.len();
                self.notice = Some(format!("loaded {} bodies from {}", self.len(), path.display()));
                Ok(())
            }
            Change::Energy => match &self.engine {
                Engine::Cpu(_) => self.cpu_energy(graphics),
                Engine::Cuda { .. } => self.request_cuda_energy(graphics),
                Engine::Compiling(_) => {
                    Err(crate::error::Error::Unavailable("the energy is measured once the kernels have compiled".to_owned()))
                }
            },
        }
    }

    /// Switches the force method and θ now, as the panel does: the bodies stay where they are.
    pub fn switch_method(&mut self, graphics: Graphics<'_>, method: Method, theta: f64) -> Result<()> {
        self.set_method(graphics, ForceMethod { method, theta })
    }

    /// Switches the force method or θ live: the bodies stay where they are, and the accelerations
    /// the next kick uses are recomputed by the new method. On failure the old method stays.
    pub(super) fn set_method(&mut self, graphics: Graphics<'_>, method: ForceMethod) -> Result<()> {
        if method.method == Method::Tree {
            super::tree::validate_theta(method.theta)?;
        }
        if method == self.settings.force_method() {
            return Ok(());
        }
        let cuda = self.pipeline.cuda().cloned();
        match (&mut self.engine, cuda) {
            (Engine::Cuda { multi: Some(_), .. }, _) if method.method == Method::Tree => {
                return Err(crate::error::Error::InvalidInput(
                    "the tree method runs on one device: restart without --devices to use it".to_owned(),
                ));
            }
            (Engine::Cuda { simulation, .. }, Some(cuda)) => {
                self.pipeline.transfer().synchronize()?;
                simulation.set_method(&cuda.compiler, method)?;
            }
            _ => {}
        }
        self.settings.method = method.method;
        self.settings.theta = method.theta;
        self.readouts = Readouts::default();
        self.last_good = None; // other bodies: the state to go back to is this one's start
        if matches!(self.engine, Engine::Compiling(_)) {
            return Ok(()); // applied when the kernels arrive
        }
        self.initialise_accelerations(graphics)
    }

    /// Switches the forces kernel; a precision change converts the state.
    pub(super) fn set_variant(&mut self, graphics: Graphics<'_>, variant: Variant) -> Result<()> {
        variant.validate()?;
        let Some(cuda) = self.pipeline.cuda().cloned() else {
            // The CPU backend has no kernel variants, only the precision.
            let settings = NBodySettings { variant, ..self.settings.clone() };
            let bodies = self.read_bodies(graphics)?;
            return self.rebuild(graphics, settings, bodies, self.params, self.step);
        };
        let current = self.variant();
        if current == Some(variant) {
            return Ok(());
        }
        let split = matches!(self.engine, Engine::Cuda { multi: Some(_), .. });
        if split || current.map(|v| v.precision) != Some(variant.precision) {
            // A precision change, or a split across devices (where every context needs the new
            // kernels): rebuild the engine.
            let settings = NBodySettings { variant, ..self.settings.clone() };
            let bodies = self.read_bodies(graphics)?;
            return self.rebuild(graphics, settings, bodies, self.params, self.step);
        }
        self.pipeline.transfer().synchronize()?;
        let Engine::Cuda { simulation, compiled, .. } = &mut self.engine else {
            return Err(mismatch());
        };
        let kernels = match compiled.remove(&variant) {
            Some(kernels) => kernels,
            None => Kernels::load(&cuda, variant)?,
        };
        match simulation.set_kernels(kernels) {
            Ok(previous) => {
                compiled.insert(previous.variant, previous);
                self.settings.variant = variant;
                Ok(())
            }
            Err(error) => Err(error),
        }
    }
}
