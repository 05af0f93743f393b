//! Kernels that change while the demo runs: the background compile arriving, autotuning timing
//! one candidate per frame and switching to the winner, and live edits of the source
//! ([`LiveKernels`]).

use super::engine::Engine;
use super::kernels::Kernels;
use super::{KERNEL, NBody, mismatch, sim, tune};
use crate::cuda::module::{CompiledModule, PendingCompile};
use crate::demo_kit::{KernelInfo, LiveKernels, OccupancyCache};
use crate::scene::Graphics;
use crate::sources::SourceFile;
use crate::error::{Error, Result};

impl NBody {
    /// Starts autotuning when it was asked for and has not started.
    pub(super) fn start_tuner(&mut self) {
        if let (true, Some(cuda)) = (std::mem::take(&mut self.tune_when_compiled), self.pipeline.cuda()) {
            self.tuner = Some(tune::Tuner::start(cuda, self.settings.variant.precision));
        }
    }

    /// Takes the background compile's result when it has arrived and builds the CUDA engine;
    /// returns whether it runs. A failed compile is said in the panel and the bodies stay still.
    pub(super) fn finish_compile(&mut self, graphics: Graphics<'_>) -> Result<bool> {
        let Engine::Compiling(compiling) = &mut self.engine else { return Ok(true) };
        let Some(result) = compiling.pending.as_ref().and_then(PendingCompile::poll) else { return Ok(false) };
        compiling.pending = None;
        let (variant, slices) = (self.settings.variant, self.settings.slices);
        let pipelined = self.settings.pipeline_depth > 1;
        let method = self.settings.force_method();
        let built = result.and_then(|compiled| {
            let cuda = self.pipeline.cuda().ok_or_else(mismatch)?;
            log::info!("{} compiled in {:.2} s", KERNEL.name, compiled.compile_time.as_secs_f64());
            let kernels = Kernels::from_compiled(cuda, variant, &compiled)?;
            let mut simulation = sim::Simulation::new(&cuda.context, kernels, &compiling.bodies, slices, pipelined)?;
            simulation.set_method(&cuda.compiler, method)?;
            Ok(simulation)
        });
        match built {
            Ok(simulation) => {
                let compiled = std::collections::HashMap::new();
                self.engine = Engine::Cuda { simulation: Box::new(simulation), compiled, multi: None };
                self.initialise_accelerations(graphics)?;
                self.start_tuner();
                Ok(true)
            }
            Err(error) => {
                self.message = Some(format!("the n-body kernels are not running: {error}"));
                Ok(false)
            }
        }
    }

    /// While the kernels compile in the background: which file, and for how long so far.
    pub fn compiling(&self) -> Option<(&str, std::time::Duration)> {
        match &self.engine {
            Engine::Compiling(compiling) => compiling.pending.as_ref().map(|p| (p.file(), p.elapsed())),
            _ => None,
        }
    }

    /// One step of autotuning, when it runs: the GPU is idle first, so the candidate's timing
    /// does not share it with the demo's own kernels. The winner is switched to when all are timed.
    pub(super) fn advance_tuning(&mut self, graphics: Graphics<'_>) -> Result<()> {
        if self.tuner.is_none() {
            return Ok(());
        }
        let Some(cuda) = self.pipeline.cuda().cloned() else { return Ok(()) };
        self.pipeline.transfer().synchronize()?;
        let Some(tuner) = self.tuner.as_mut() else { return Ok(()) };
        match tuner.advance(&cuda, false) {
            Ok(None) => Ok(()),
            Ok(Some(tuned)) => {
                self.tuner = None;
                if let Err(error) = self.set_variant(graphics, tuned.variant) {
                    self.message = Some(format!("the tuned variant {} did not start: {error}", tuned.variant.label()));
                }
                self.edit.variant = self.settings.variant;
                self.tuned = Some(tuned);
                Ok(())
            }
            Err(error) => {
                self.tuner = None;
                self.message = Some(format!("autotuning stopped: {error}"));
                Ok(())
            }
        }
    }

    /// Autotuning: candidates timed and how many (while it runs), and what it found.
    pub fn tuning(&self) -> (Option<(usize, usize)>, Option<&tune::Tuned>) {
        (self.tuner.as_ref().map(tune::Tuner::progress), self.tuned.as_ref())
    }
}

impl LiveKernels for NBody {
    fn kernel_info(&self) -> Option<KernelInfo> {
        match &self.engine {
            Engine::Cuda { simulation, .. } => {
                let kernels = simulation.kernels();
                let launch = kernels.forces_config(
                    simulation.len(),
                    sim::slice_length(simulation.len(), simulation.slices(), kernels.variant.tile_size),
                );
                Some(KernelInfo {
                    name: format!("nbody_forces ({})", kernels.variant.label()),
                    origin: kernels.origin.clone(),
                    launch,
                    attributes: *kernels.forces_attributes(),
                    occupancy: self.occupancy.get(kernels.forces_function(), &launch),
                })
            }
            Engine::Cpu(_) | Engine::Compiling(_) => None,
        }
    }

    fn kernel_builds(&self) -> Vec<(SourceFile, Vec<String>)> {
        match &self.engine {
            Engine::Cuda { simulation, .. } => vec![(KERNEL, simulation.kernels().variant.options())],
            Engine::Cpu(_) | Engine::Compiling(_) => Vec::new(),
        }
    }

    fn swap_kernels(&mut self, _file: &str, _options: &[String], compiled: &CompiledModule) -> Result<()> {
        let Some(cuda) = self.pipeline.cuda().cloned() else {
            return Err(Error::Unavailable("n-body runs on the CPU: no kernel to replace".to_owned()));
        };
        self.synchronize()?;
        let Engine::Cuda { simulation, compiled: variants, multi } = &mut self.engine else { return Err(mismatch()) };
        if multi.is_some() {
            return Err(Error::Unavailable(
                "live kernel edits apply to one device: restart without --devices to try them, or restart with \
                 --kernels DIR to split the edited kernels across devices"
                    .to_owned(),
            ));
        }
        let kernels = Kernels::from_compiled(&cuda, simulation.kernels().variant, compiled)?;
        simulation.set_kernels(kernels)?;
        // Other variants were built from the old source.
        variants.clear();
        self.occupancy = OccupancyCache::default();
        Ok(())
    }
}
