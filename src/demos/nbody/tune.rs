//! Autotuning of the forces kernel: the first time n-body runs on a device, a few candidate
//! variants are compiled and timed (CUDA events, median) at [`TUNE_BODIES`], and the fastest is
//! kept in a small JSON file beside the kernel cache, keyed by device, driver, NVRTC and kernel
//! source. Later starts read it and begin with that variant at once.
//!
//! The window tunes frame by frame ([`Tuner::advance`]: the candidates compile on background
//! threads, each frame times one), so its panel can show the progress; a headless run or the CLI
//! tunes all at once ([`tune_now`]) with a bar on the terminal. `bench nbody`'s default sweep
//! holds every candidate, so the bench sees what the tuner may pick.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::cpu::Params;
use super::kernels::{KERNEL, Kernels, Precision, Variant, time_forces};
use super::presets::Preset;
use super::sim;
use crate::cuda::module::{PendingCompile, cache_key};
use crate::cuda::{DeviceBuffer, Stream};
use crate::progress::Progress;
use crate::runtime::CudaRuntime;
use crate::stats::Percentiles;
use crate::error::{Error, Result};

/// Bodies the candidates are timed at: the demo's default, large enough to fill the GPU.
pub const TUNE_BODIES: u32 = 65_536;

/// Untimed and timed launches per candidate.
const WARMUP: u32 = 2;
const REPEATS: u32 = 7;

/// The variants the tuner times, fastest-known first. fp32: block, tile, unroll and bodies per
/// thread around the best measured on an H200 (512 / 512 / 16 / 4, 1.99e12 interactions/s at
/// 65,536), the earlier default (256 / 256 / 8 / 2) and a long tile (512 / 2048 / 16 / 4).
pub fn candidates(precision: Precision) -> Vec<Variant> {
    let shapes: &[(u32, u32, u32, u32)] = match precision {
        Precision::F32 => &[
            (512, 512, 16, 4),
            (512, 2048, 16, 4),
            (256, 256, 16, 4),
            (512, 1024, 16, 4),
            (256, 512, 16, 4),
            (512, 512, 8, 4),
            (256, 256, 8, 2),
            (128, 128, 16, 4),
        ],
        Precision::F64 => &[
            (256, 256, 4, 2),
            (256, 256, 8, 1),
            (128, 128, 4, 2),
            (512, 512, 4, 2),
            (256, 512, 4, 4),
            (128, 256, 8, 2),
        ],
    };
    shapes
        .iter()
        .map(|&(block_size, tile_size, unroll, bodies_per_thread)| Variant {
            precision,
            block_size,
            tile_size,
            unroll,
            bodies_per_thread,
        })
        .collect()
}

/// What tuning found, as kept on disk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tuned {
    /// The fastest candidate.
    pub variant: Variant,
    /// Its interactions per second at `bodies`.
    pub interactions_per_s: f64,
    /// Bodies timed at.
    pub bodies: u32,
    /// Device name, for the reader.
    pub device: String,
    /// Every candidate timed: variant and interactions per second.
    pub candidates: Vec<(Variant, f64)>,
}

/// Where the result for this device, driver, NVRTC, kernel source and precision is kept (beside
/// the kernel cache; `None` when the cache is off).
fn record_path(cuda: &CudaRuntime, precision: Precision) -> Option<PathBuf> {
    let device = cuda.context.device();
    let (source, _) = KERNEL.read(cuda.compiler.kernels_dir()).ok()?;
    let driver = crate::cuda::driver::load().ok().map(|d| format!("{}.{}", d.version.0, d.version.1))?;
    let (nvrtc_major, nvrtc_minor) = cuda.compiler.nvrtc_version();
    let key = cache_key(&[
        &device.name,
        &format!("{:?} {} {}", device.compute_capability, device.multiprocessors, device.total_memory_bytes),
        &driver,
        &format!("{nvrtc_major}.{nvrtc_minor}"),
        precision.name(),
        &source,
    ]);
    Some(cuda.compiler.cache_dir()?.join(format!("tuned-nbody-{}-{key:016x}.json", precision.name())))
}

/// The tuned variant for this device, when it was tuned before.
pub fn load(cuda: &CudaRuntime, precision: Precision) -> Option<Tuned> {
    let text = std::fs::read(record_path(cuda, precision)?).ok()?;
    let tuned: Tuned = serde_json::from_slice(&text).ok()?;
    (tuned.variant.precision == precision && tuned.variant.validate().is_ok()).then_some(tuned)
}

fn save(cuda: &CudaRuntime, tuned: &Tuned) {
    let Some(path) = record_path(cuda, tuned.variant.precision) else { return };
    let written = serde_json::to_vec_pretty(tuned)
        .map_err(|e| Error::InvalidInput(e.to_string()))
        .and_then(|text| crate::output::write(&path, &text));
    match written {
        Ok(()) => log::info!("tuned n-body kept in {}", path.display()),
        // Not kept only means tuning again next time.
        Err(error) => log::warn!("tuned n-body not kept: {error}"),
    }
}

/// Buffers the candidates are timed on: a Plummer sphere of [`TUNE_BODIES`].
struct Bench {
    stream: Stream,
    positions: DeviceBuffer,
    params: Params,
}

/// Tuning in steps: compiles run on background threads; each [`Tuner::advance`] times one
/// candidate whose compile has arrived (a few milliseconds of GPU time).
pub struct Tuner {
    precision: Precision,
    candidates: Vec<Variant>,
    compiles: Vec<Option<PendingCompile>>,
    results: Vec<(Variant, f64)>,
    failures: Vec<String>,
    next: usize,
    bench: Option<Bench>,
}

impl Tuner {
    /// Starts compiling every candidate of `precision` in the background.
    pub fn start(cuda: &CudaRuntime, precision: Precision) -> Self {
        let candidates = candidates(precision);
        let compiles =
            candidates.iter().map(|v| Some(cuda.compiler.compile_in_background(&KERNEL, &v.options()))).collect();
        Self { precision, candidates, compiles, results: Vec::new(), failures: Vec::new(), next: 0, bench: None }
    }

    /// Candidates timed so far, and how many there are.
    pub fn progress(&self) -> (usize, usize) {
        (self.next, self.candidates.len())
    }

    /// The precision being tuned.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// Times the next candidate if its compile has arrived (`wait`: waits for it). Returns the
    /// result once every candidate is done, and keeps it on disk.
    pub fn advance(&mut self, cuda: &CudaRuntime, wait: bool) -> Result<Option<Tuned>> {
        if self.next < self.candidates.len() {
            let variant = self.candidates[self.next];
            let compiled = match self.compiles[self.next].take() {
                Some(pending) if wait => pending.wait(),
                Some(pending) => match pending.poll() {
                    Some(result) => result,
                    None => {
                        self.compiles[self.next] = Some(pending);
                        return Ok(None);
                    }
                },
                None => Err(Error::Unavailable("compiled twice".to_owned())),
            };
            match compiled.and_then(|compiled| self.time(cuda, variant, &compiled)) {
                Ok(rate) => self.results.push((variant, rate)),
                Err(error) => self.failures.push(format!("{}: {error}", variant.label())),
            }
            self.next += 1;
            if self.next < self.candidates.len() {
                return Ok(None);
            }
        }
        let Some(&(variant, interactions_per_s)) = self.results.iter().max_by(|a, b| a.1.total_cmp(&b.1)) else {
            return Err(Error::Unavailable(format!("no n-body candidate ran: {}", self.failures.join("; "))));
        };
        let tuned = Tuned {
            variant,
            interactions_per_s,
            bodies: TUNE_BODIES,
            device: cuda.context.device().name.clone(),
            candidates: self.results.clone(),
        };
        save(cuda, &tuned);
        Ok(Some(tuned))
    }

    /// Interactions per second of `variant` at [`TUNE_BODIES`], median of [`REPEATS`] launches.
    fn time(
        &mut self,
        cuda: &CudaRuntime,
        variant: Variant,
        compiled: &crate::cuda::module::CompiledModule,
    ) -> Result<f64> {
        let mut kernels = Kernels::from_compiled(cuda, variant, compiled)?;
        if self.bench.is_none() {
            let bodies = Preset::Plummer.generate(TUNE_BODIES as usize, 1);
            let stream = Stream::new(&cuda.context)?;
            let vectors: Vec<u8> = match self.precision {
                Precision::F32 => {
                    bytemuck::cast_slice(&bodies.positions.iter().map(|p| p.map(|v| v as f32)).collect::<Vec<_>>())
                        .to_vec()
                }
                Precision::F64 => bytemuck::cast_slice(&bodies.positions).to_vec(),
            };
            let mut positions = DeviceBuffer::new(&cuda.context, vectors.len())?;
            positions.upload(&stream, &vectors)?;
            let params = Params::defaults_for(Preset::Plummer);
            self.bench = Some(Bench { stream, positions, params });
        }
        let Some(bench) = &self.bench else { return Err(Error::Unavailable("no tuning buffers".to_owned())) };
        let n = TUNE_BODIES;
        let device = cuda.context.device();
        let slices = sim::auto_slices(device.multiprocessors, variant.bodies_per_block(), variant.tile_size, n);
        let slice_length = sim::slice_length(n, slices, variant.tile_size);
        kernels.validate_forces(n, slice_length)?;
        let vector = variant.precision.vector_bytes();
        let partial = DeviceBuffer::new(&cuda.context, n.div_ceil(slice_length) as usize * n as usize * vector)?;
        let times = time_forces(
            &mut kernels,
            &bench.stream,
            &bench.positions,
            &partial,
            n,
            slice_length,
            &bench.params,
            WARMUP,
            REPEATS,
        )?;
        let median = Percentiles::of(times.into_iter()).ok_or_else(|| Error::Unavailable("no timings".to_owned()))?;
        Ok(f64::from(n) * f64::from(n) / (median.median * 1e-6))
    }
}

/// Tunes all at once, with a bar on the terminal: a headless run or the CLI.
pub fn tune_now(cuda: &CudaRuntime, precision: Precision, progress: &Progress) -> Result<Tuned> {
    let mut tuner = Tuner::start(cuda, precision);
    loop {
        let (done, _) = tuner.progress();
        if let Some(variant) = tuner.candidates.get(done) {
            progress.step(variant.label());
        }
        let finished = tuner.advance(cuda, true)?;
        progress.done_one();
        if let Some(tuned) = finished {
            return Ok(tuned);
        }
    }
}

/// The variant to start from when none was chosen: the tuned one if this device was tuned, else
/// the first candidate (the fastest measured on an H200) and a [`Tuner`] to find this device's.
pub fn starting_variant(cuda: &CudaRuntime, precision: Precision) -> (Variant, Option<Tuned>) {
    match load(cuda, precision) {
        Some(tuned) => (tuned.variant, Some(tuned)),
        None => (candidates(precision)[0], None),
    }
}
