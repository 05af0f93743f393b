//! What computes an n-body step: CUDA (one device, or split across several) or the CPU, in fp32
//! or fp64, and the CPU step itself.

use std::collections::HashMap;
use std::time::Instant;

use super::NBodySettings;
use super::cpu::{self, Params, Scratch};
use super::cpu_rate;
use super::kernels::{Kernels, Precision, Variant};
use super::multi::MultiSimulation;
use super::presets::Bodies;
use super::sim::Simulation;
use super::tree::{ForceMethod, Method, TreeForces};
use crate::cuda::module::PendingCompile;
use crate::runtime::CudaRuntime;
use crate::error::{Error, Result};

/// The compute side: CUDA or the CPU.
pub(super) enum Engine {
    Cuda {
        /// The computing device's simulation: the whole step on one device, or with `--devices`
        /// the energy readout and a one-device forces time measured at each reset.
        simulation: Box<Simulation>,
        /// Variants compiled in this run, for instant switching back.
        compiled: HashMap<Variant, Kernels>,
        /// With `--devices`: the step, split across contexts.
        multi: Option<Box<MultiSimulation>>,
    },
    Cpu(Box<CpuEngine>),
    /// CUDA, while NVRTC compiles the kernels on a thread of its own (the window's first run of
    /// this variant on this device): the bodies are drawn where they start until the kernels arrive.
    Compiling(Box<Compiling>),
}

/// What the CUDA engine is built from once its kernels have compiled.
pub(super) struct Compiling {
    /// The compile; `None` once it has failed (said in the panel, the bodies stay still).
    pub(super) pending: Option<PendingCompile>,
    /// The starting state, uploaded to the device when the simulation is made.
    pub(super) bodies: Bodies,
}

/// CPU-side state beyond the GL buffers.
pub(super) struct CpuEngine {
    pub(super) accelerations: Vec<[f32; 4]>,
    pub(super) scratch: Scratch<f32>,
    pub(super) double: Option<CpuDouble>,
    /// The tree method's tree and scratch (either precision).
    pub(super) tree: TreeForces,
    /// Time of the last accelerations pass, µs.
    pub(super) forces_us: Option<f64>,
    /// Node interactions per body of the last tree step.
    pub(super) tree_interactions_per_body: Option<f64>,
}

pub(super) struct CpuDouble {
    pub(super) positions: [Vec<[f64; 4]>; 2],
    pub(super) velocities: Vec<[f64; 4]>,
    pub(super) accelerations: Vec<[f64; 4]>,
    pub(super) scratch: Scratch<f64>,
    pub(super) current: usize,
}

/// The engine for `settings` on CUDA or, without it, the CPU; in a `window`, a CPU engine whose
/// steps would be too slow for it to answer input is refused.
pub(super) fn make_engine(
    cuda: Option<&CudaRuntime>,
    settings: &NBodySettings,
    bodies: &Bodies,
    window: bool,
) -> Result<Engine> {
    match cuda {
        Some(cuda) => {
            let options = settings.variant.options();
            if cuda.background_compiles
                && settings.devices.len() <= 1
                && cuda.compiler.cached(&super::KERNEL, &options)?.is_none()
            {
                settings.variant.validate()?;
                log::info!(
                    "compiling {} in the background (first run of this variant on this device)",
                    super::KERNEL.name
                );
                let pending = Some(cuda.compiler.compile_in_background(&super::KERNEL, &options));
                return Ok(Engine::Compiling(Box::new(Compiling { pending, bodies: bodies.clone() })));
            }
            let kernels = Kernels::load(cuda, settings.variant)?;
            let mut simulation =
                Simulation::new(&cuda.context, kernels, bodies, settings.slices, settings.pipeline_depth > 1)?;
            simulation.set_method(&cuda.compiler, settings.force_method())?;
            if settings.devices.len() > 1 && settings.method == Method::Tree {
                return Err(Error::InvalidInput(
                    "the tree method runs on one device: drop --devices, or use --method all-pairs".to_owned(),
                ));
            }
            let multi = if settings.devices.len() > 1 {
                let n = u32::try_from(bodies.len()).map_err(|_| Error::InvalidInput("too many bodies".to_owned()))?;
                let multi = MultiSimulation::new(cuda, &settings.devices, settings.variant, n, settings.slices, true)?;
                Some(Box::new(multi))
            } else {
                None
            };
            Ok(Engine::Cuda { simulation: Box::new(simulation), compiled: HashMap::new(), multi })
        }
        None if !settings.devices.is_empty() => Err(Error::Unavailable(format!(
            "--devices {} splits n-body across CUDA devices, but this run computes on the CPU backend (the log and \
             `interop-lab doctor` say why): drop --devices to run on the CPU",
            settings.devices.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
        ))),
        None => {
            let n = bodies.len();
            if window {
                cpu_rate::check_window_bodies(n, settings.variant.precision == Precision::F64, settings.method)?;
            }
            let double = (settings.variant.precision == Precision::F64).then(|| CpuDouble {
                positions: [bodies.positions.clone(), bodies.positions.clone()],
                velocities: bodies.velocities.iter().map(|v| [v[0], v[1], v[2], 0.0]).collect(),
                accelerations: vec![[0.0; 4]; n],
                scratch: Scratch::default(),
                current: 0,
            });
            Ok(Engine::Cpu(Box::new(CpuEngine {
                accelerations: vec![[0.0; 4]; n],
                scratch: Scratch::default(),
                double,
                tree: TreeForces::default(),
                forces_us: None,
                tree_interactions_per_body: None,
            })))
        }
    }
}

pub(super) fn cast<T: bytemuck::Pod>(bytes: &[u8]) -> Result<&[T]> {
    bytemuck::try_cast_slice(bytes).map_err(|e| Error::InvalidInput(format!("n-body buffer: {e}")))
}

pub(super) fn cast_mut<T: bytemuck::Pod>(bytes: &mut [u8]) -> Result<&mut [T]> {
    bytemuck::try_cast_slice_mut(bytes).map_err(|e| Error::InvalidInput(format!("n-body buffer: {e}")))
}

impl CpuEngine {
    /// Writes the overlay's boxes of the tree the last step built into `vertices` (host bytes of
    /// the shared buffer; `tree::boxes`).
    pub(super) fn write_tree_boxes(&self, levels: u32, vertices: &mut [u8]) -> Result<()> {
        super::tree::boxes::write(self.tree.tree(), levels, cast_mut(vertices)?);
        Ok(())
    }

    /// One step on the CPU into the host copies of the GL buffers: fp32 reads positions
    /// (`buffers[0]`) and writes the next ones (`buffers[1]`) and the velocities (`buffers[2]`);
    /// fp64 steps its own state and writes float copies of positions and velocities
    /// (`buffers[0]`, `buffers[1]`).
    pub(super) fn step(&mut self, buffers: &mut [&mut [u8]], params: &Params, method: ForceMethod) -> Result<()> {
        let started = Instant::now();
        let tree = &mut self.tree;
        let mut interactions = None;
        match &mut self.double {
            Some(double) => {
                let from = double.current;
                let [a, b] = &mut double.positions;
                let (from_positions, to_positions) = if from == 0 { (&*a, b) } else { (&*b, a) };
                match method.method {
                    Method::AllPairs => cpu::step(
                        from_positions,
                        to_positions,
                        &mut double.velocities,
                        &mut double.accelerations,
                        params,
                        &mut double.scratch,
                    ),
                    Method::Tree => {
                        let stats = super::tree::step(
                            tree,
                            from_positions,
                            to_positions,
                            &mut double.velocities,
                            &mut double.accelerations,
                            params,
                            method.theta,
                        )?;
                        interactions = Some(stats.interactions);
                    }
                }
                double.current = 1 - from;
                let display_positions: &mut [[f32; 4]] = cast_mut(&mut *buffers[0])?;
                for (out, p) in display_positions.iter_mut().zip(&double.positions[double.current]) {
                    *out = p.map(|v| v as f32);
                }
                let display_velocities: &mut [[f32; 4]] = cast_mut(&mut *buffers[1])?;
                for (out, v) in display_velocities.iter_mut().zip(&double.velocities) {
                    *out = v.map(|v| v as f32);
                }
            }
            None => {
                let (first, rest) = buffers.split_at_mut(1);
                let positions_in: &[[f32; 4]] = cast(&*first[0])?;
                let (second, third) = rest.split_at_mut(1);
                let positions_out: &mut [[f32; 4]] = cast_mut(&mut *second[0])?;
                let velocities: &mut [[f32; 4]] = cast_mut(&mut *third[0])?;
                match method.method {
                    Method::AllPairs => cpu::step(
                        positions_in,
                        positions_out,
                        velocities,
                        &mut self.accelerations,
                        params,
                        &mut self.scratch,
                    ),
                    Method::Tree => {
                        let stats = super::tree::step(
                            tree,
                            positions_in,
                            positions_out,
                            velocities,
                            &mut self.accelerations,
                            params,
                            method.theta,
                        )?;
                        interactions = Some(stats.interactions);
                    }
                }
            }
        }
        self.forces_us = Some(started.elapsed().as_secs_f64() * 1e6);
        // The step is not kept when a body left the finite numbers (NBody::step goes back).
        let not_finite = match &self.double {
            Some(double) => super::guard::first_non_finite(&double.positions[double.current]),
            None => super::guard::first_non_finite(cast::<[f32; 4]>(&*buffers[1])?),
        };
        if let Some(body) = not_finite {
            return Err(super::guard::non_finite(body));
        }
        let n = self.accelerations.len().max(1) as f64;
        self.tree_interactions_per_body = interactions.map(|count| count as f64 / n);
        Ok(())
    }
}
