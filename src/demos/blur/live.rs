//! Kernels that change while the demo runs: the background compile arriving, and live edits of
//! the source ([`LiveKernels`]).

use super::engine::{Engine, cuda_engine, settle_filter};
use super::kernels::BlurKernels;
use super::{Blur, KERNEL, mismatch};
use crate::cuda::module::{CompiledModule, PendingCompile};
use crate::demo_kit::{KernelInfo, LiveKernels, OccupancyCache};
use crate::sources::SourceFile;
use crate::error::{Error, Result};

impl Blur {
    /// Takes the background compile's result when it has arrived; returns whether the CUDA engine
    /// is ready. A failed compile is said in the panel and the image stays unfiltered.
    pub(super) fn finish_compile(&mut self) -> bool {
        let Engine::Compiling { pending } = &mut self.engine else { return true };
        let Some(result) = pending.as_ref().and_then(PendingCompile::poll) else { return false };
        *pending = None;
        let ready = result.and_then(|compiled| {
            let cuda = self.pipeline.cuda().ok_or_else(mismatch)?;
            let format = self.settings.format;
            let kernels = BlurKernels::from_compiled(cuda, format, self.settings.pixels_per_thread, &compiled)?;
            let (settings, note) = settle_filter(self.settings.clone(), &kernels, self.size())?;
            log::info!("{} compiled in {:.2} s", KERNEL.name, compiled.compile_time.as_secs_f64());
            Ok((cuda_engine(cuda, &settings, &self.source, kernels)?, settings, note))
        });
        match ready {
            Ok((engine, settings, note)) => {
                self.engine = engine;
                self.settings = settings;
                self.notice = note;
                true
            }
            Err(error) => {
                self.message = Some(format!("the blur kernels are not running: {error}"));
                false
            }
        }
    }

    /// While the kernels compile in the background: which file, and for how long so far.
    pub fn compiling(&self) -> Option<(&str, std::time::Duration)> {
        match &self.engine {
            Engine::Compiling { pending: Some(pending) } => Some((pending.file(), pending.elapsed())),
            _ => None,
        }
    }
}

impl LiveKernels for Blur {
    fn kernel_info(&self) -> Option<KernelInfo> {
        match &self.engine {
            Engine::Cuda { kernels, .. } => {
                let job = self.settings.job(self.size());
                let launch = kernels.launches(&job)[0];
                Some(KernelInfo {
                    name: format!("blur {} ({})", self.settings.filter.name(), self.settings.format.name()),
                    origin: kernels.origin.clone(),
                    launch,
                    attributes: *kernels.attributes(self.settings.filter, self.settings.sigma),
                    occupancy: self
                        .occupancy
                        .get(kernels.first_function(self.settings.filter, self.settings.sigma), &launch),
                })
            }
            Engine::Cpu { .. } | Engine::Compiling { .. } => None,
        }
    }

    fn kernel_builds(&self) -> Vec<(SourceFile, Vec<String>)> {
        match &self.engine {
            Engine::Cuda { .. } => {
                vec![(KERNEL, BlurKernels::options(self.settings.format, self.settings.pixels_per_thread))]
            }
            Engine::Cpu { .. } | Engine::Compiling { .. } => Vec::new(),
        }
    }

    fn swap_kernels(&mut self, _file: &str, _options: &[String], compiled: &CompiledModule) -> Result<()> {
        let Some(cuda) = self.pipeline.cuda().cloned() else {
            return Err(Error::Unavailable("the blur runs on the CPU: no kernel to replace".to_owned()));
        };
        let fresh = BlurKernels::from_compiled(&cuda, self.settings.format, self.settings.pixels_per_thread, compiled)?;
        fresh.validate(&self.settings.job(self.size()))?;
        self.synchronize()?;
        let Engine::Cuda { kernels, .. } = &mut self.engine else { return Err(mismatch()) };
        **kernels = fresh;
        self.occupancy = OccupancyCache::default();
        self.pass_us.clear();
        Ok(())
    }
}
