//! The total energy readout: computed on the GPU (fp64 reduction, read back later) or on the
//! CPU, every `--energy-every` steps or when asked, and its drift since the reset.

use super::changes::Change;
use super::engine::Engine;
use super::sim::StepBuffers;
use super::{NBody, cpu, mismatch};
use crate::error::Result;
use crate::scene::Graphics;
use crate::transfer::{Access, Target};

/// Most bodies whose energy CUDA sums by itself: at 262,144 the all-pairs sum costs about what one
/// all-pairs step does (34 ms on an H200), 256 times that at 4 M. The bench's first frames stalled
/// 20 s at 4 M bodies and minutes at 16 M, most likely on this sum (not timed apart).
pub const ENERGY_BY_ITSELF_CUDA: u32 = 262_144;
/// The same on the CPU backend.
pub const ENERGY_BY_ITSELF_CPU: u32 = 8_192;

impl NBody {
    /// The last energy readout: `(step, kinetic, potential)` and the energy at the reset.
    pub fn energy(&self) -> (Option<(u64, f64, f64)>, Option<f64>) {
        (self.readouts.energy, self.readouts.initial_energy)
    }

    /// Whether the energy is computed by itself (at the start and every `--energy-every` steps):
    /// it is an O(N²) sum, so only up to [`ENERGY_BY_ITSELF_CUDA`] bodies on CUDA (about 30 ms on
    /// an H200) and 8,192 on the CPU; above, only when asked.
    pub(super) fn energy_by_itself(&self) -> bool {
        let n = self.len();
        match &self.engine {
            Engine::Cuda { .. } => n <= ENERGY_BY_ITSELF_CUDA,
            Engine::Cpu(_) | Engine::Compiling(_) => n <= ENERGY_BY_ITSELF_CPU,
        }
    }

    /// Queues an energy computation of the current state (CUDA) or computes it (CPU); the result
    /// arrives through the next steps or [`Self::collect_energy`].
    pub fn request_energy(&mut self, graphics: Graphics<'_>) -> Result<()> {
        self.apply(graphics, Change::Energy)
    }

    /// Waits for outstanding work and collects a pending energy result.
    pub fn collect_energy(&mut self) -> Result<()> {
        self.pipeline.transfer().synchronize()?;
        self.poll_energy()
    }

    /// Energy of the CPU state (f64 sums on all cores).
    pub(super) fn cpu_energy(&mut self, graphics: Graphics<'_>) -> Result<()> {
        let bodies = self.read_bodies(graphics)?;
        let velocities: Vec<[f64; 4]> = bodies.velocities.iter().map(|v| [v[0], v[1], v[2], 0.0]).collect();
        let (kinetic, potential) = cpu::energy(&bodies.positions, &velocities, &self.params);
        self.record_energy(self.step, kinetic, potential);
        Ok(())
    }

    pub(super) fn record_energy(&mut self, step: u64, kinetic: f64, potential: f64) {
        if self.readouts.initial_energy.is_none() {
            self.readouts.initial_energy = Some(kinetic + potential);
        }
        self.readouts.energy = Some((step, kinetic, potential));
    }

    pub(super) fn poll_energy(&mut self) -> Result<()> {
        if let Engine::Cuda { simulation, .. } = &mut self.engine
            && let Some((step, kinetic, potential)) = simulation.poll_energy()?
        {
            // All-pairs on CUDA has no other check of every body: a NaN or infinite one makes
            // the energy so.
            if !(kinetic + potential).is_finite() {
                return Err(crate::error::Error::Diverged(format!(
                    "the energy at step {step} is not a finite number (a body's position or velocity became NaN or \
                     infinite)"
                )));
            }
            self.record_energy(step, kinetic, potential);
        }
        Ok(())
    }

    pub(super) fn request_cuda_energy(&mut self, graphics: Graphics<'_>) -> Result<()> {
        let (params, step) = (self.params, self.step);
        let drawn_velocities = self.velocities_for(self.current);
        let engine = &mut self.engine;
        let [p0, p1] = &mut self.positions;
        let positions = if self.current == 0 { p0 } else { p1 };
        let mut buffers = [(positions, Access::Read), (&mut self.velocities[drawn_velocities], Access::Read)];
        self.pipeline.transfer().run(graphics, u64::MAX, &mut buffers, &mut |target| match (target, &mut *engine) {
            (Target::Device { buffers, stream }, Engine::Cuda { simulation, .. }) => {
                let spans = StepBuffers { positions_in: buffers[0], positions_out: buffers[0], velocities: buffers[1] };
                simulation.request_energy(stream, &spans, &params, step)
            }
            _ => Err(mismatch()),
        })?;
        Ok(())
    }
}
