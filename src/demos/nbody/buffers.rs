//! The GL buffers the bodies are drawn from: made, handed back to GL, read back (the bodies, a
//! state save, tests) and poisoned for tests.

use super::engine::Engine;
use super::kernels::Precision;
use super::presets::Bodies;
use super::state::{self, SavedState};
use super::{Float4, NBody};
use crate::error::Result;
use crate::demo_kit::Pipeline;
use crate::guard::Guard;
use crate::scene::Graphics;
use crate::transfer::SharedBuffer;

impl NBody {
    /// The velocity buffer drawn with `positions[index]`.
    pub(super) fn velocities_for(&self, index: usize) -> usize {
        if self.velocities.len() > 1 { index } else { 0 }
    }

    /// Whether the GL buffers hold only float copies to draw, the state living elsewhere (the
    /// device, or the CPU's f64 arrays): the step then writes them and never reads them.
    pub(super) fn display_only(&self) -> bool {
        self.settings.variant.precision == Precision::F64
            || matches!(&self.engine, Engine::Cuda { simulation, .. } if simulation.has_device_state())
    }

    /// Hands buffers mapped ahead for the next step back to GL (before GL reads or replaces them).
    pub(super) fn release_prepared(&mut self) -> Result<()> {
        self.pipeline.transfer().release_prepared(&mut every_buffer(&mut self.positions, &mut self.velocities))
    }

    /// The current bodies in f64, read back from wherever the state lives.
    pub fn read_bodies(&mut self, graphics: Graphics<'_>) -> Result<Bodies> {
        self.release_prepared()?;
        self.pipeline.transfer().synchronize()?;
        let drawn_velocities = self.velocities_for(self.current);
        let from_gl = |transfer: &mut dyn crate::transfer::Transfer,
                       positions: &SharedBuffer,
                       velocities: &SharedBuffer|
         -> Result<Bodies> {
            let p = transfer.read_buffer(graphics, positions)?;
            let v = transfer.read_buffer(graphics, velocities)?;
            let p: Vec<[f32; 4]> = bytemuck::pod_collect_to_vec(&p);
            let v: Vec<[f32; 4]> = bytemuck::pod_collect_to_vec(&v);
            Ok(Bodies {
                positions: p.iter().map(|p| p.map(f64::from)).collect(),
                velocities: v.iter().map(|v| [f64::from(v[0]), f64::from(v[1]), f64::from(v[2])]).collect(),
            })
        };
        match &self.engine {
            Engine::Cuda { simulation, .. } => {
                let stream = crate::cuda::Stream::new(simulation.context())?;
                match simulation.read_device_state(&stream)? {
                    Some(bodies) => Ok(bodies),
                    None => from_gl(
                        self.pipeline.transfer(),
                        &self.positions[self.current],
                        &self.velocities[drawn_velocities],
                    ),
                }
            }
            Engine::Cpu(engine) => match &engine.double {
                Some(double) => Ok(Bodies {
                    positions: double.positions[double.current].clone(),
                    velocities: double.velocities.iter().map(|v| [v[0], v[1], v[2]]).collect(),
                }),
                None => {
                    from_gl(self.pipeline.transfer(), &self.positions[self.current], &self.velocities[drawn_velocities])
                }
            },
            Engine::Compiling(compiling) => Ok(compiling.bodies.clone()),
        }
    }

    /// Refills the buffers the next step writes (never reads) with NaN, so a test can tell
    /// written values from stale ones: the overlay's too, when it has one.
    pub fn poison_next_output(&mut self, graphics: Graphics<'_>) -> Result<()> {
        self.release_prepared()?;
        self.pipeline.transfer().synchronize()?;
        let poison = vec![f32::NAN; self.len() as usize * 4];
        let next = 1 - self.current;
        let buffer = self.pipeline.transfer().create_buffer(graphics, bytemuck::cast_slice(&poison))?;
        std::mem::replace(&mut self.positions[next], buffer).destroy(graphics);
        if self.display_only() {
            let buffer = self.pipeline.transfer().create_buffer(graphics, bytemuck::cast_slice(&poison))?;
            let index = self.velocities_for(next);
            std::mem::replace(&mut self.velocities[index], buffer).destroy(graphics);
        }
        self.poison_tree_boxes(graphics)
    }

    /// What the drawn buffers hold now (float copies of the state in fp64 runs), for tests.
    pub fn read_drawn_buffers(&mut self, graphics: Graphics<'_>) -> Result<(Vec<Float4>, Vec<Float4>)> {
        self.release_prepared()?;
        self.pipeline.transfer().synchronize()?;
        let drawn_velocities = self.velocities_for(self.current);
        let positions = self.pipeline.transfer().read_buffer(graphics, &self.positions[self.current])?;
        let velocities = self.pipeline.transfer().read_buffer(graphics, &self.velocities[drawn_velocities])?;
        Ok((bytemuck::pod_collect_to_vec(&positions), bytemuck::pod_collect_to_vec(&velocities)))
    }

    /// Saves the current state.
    pub fn save(&mut self, graphics: Graphics<'_>, path: &std::path::Path) -> Result<()> {
        let bodies = self.read_bodies(graphics)?;
        state::save(path, &SavedState { bodies, params: self.params, step: self.step })
    }

    /// Waits for the demo's GPU work.
    pub fn synchronize(&mut self) -> Result<()> {
        self.pipeline.transfer().synchronize()
    }
}

/// Every GL buffer of the demo: both positions and each velocity buffer.
pub(super) fn every_buffer<'a>(
    positions: &'a mut [SharedBuffer; 2],
    velocities: &'a mut [SharedBuffer],
) -> Vec<&'a mut SharedBuffer> {
    positions.iter_mut().chain(velocities.iter_mut()).collect()
}

/// The two position buffers and `depth` velocity buffers, filled with `bodies` (as float).
pub(super) fn make_buffers(
    pipeline: &mut Pipeline,
    graphics: Graphics<'_>,
    bodies: &Bodies,
    depth: usize,
) -> Result<([SharedBuffer; 2], Vec<SharedBuffer>)> {
    let positions: Vec<[f32; 4]> = bodies.positions.iter().map(|p| p.map(|v| v as f32)).collect();
    let velocities: Vec<[f32; 4]> =
        bodies.velocities.iter().map(|v| [v[0] as f32, v[1] as f32, v[2] as f32, 0.0]).collect();
    let transfer = pipeline.transfer();
    let release = |buffer: SharedBuffer| buffer.destroy(graphics);
    let first = Guard::new(transfer.create_buffer(graphics, bytemuck::cast_slice(&positions))?, release);
    let second = Guard::new(transfer.create_buffer(graphics, bytemuck::cast_slice(&positions))?, release);
    let velocities = transfer.create_buffers(graphics, bytemuck::cast_slice(&velocities), depth)?;
    Ok(([first.keep(), second.keep()], velocities))
}
