//! `nbody`: all-pairs gravity, integrated by CUDA straight in the GL vertex buffers it is drawn
//! from. Positions and masses are float4 in two GL buffers used ping-pong (the one read this step
//! mapped read-only, the one written mapped write-discard), velocities in a third.

pub mod args;
pub mod bench;
mod changes;
pub mod cpu;
mod energy;
mod engine;
pub mod kernels;
pub mod multi;
mod panel;
pub mod presets;
mod settings;
pub mod sim;
pub mod state;
pub mod tune;

pub use self::settings::{
    DEFAULT_BODIES_CPU, DEFAULT_BODIES_CUDA, FLOPS_PER_INTERACTION, MAX_BODIES, NBodySettings, validate_bodies,
    validate_params,
};

use std::collections::VecDeque;
use std::time::Instant;

use self::changes::Change;
use self::cpu::Params;
use self::engine::{Engine, cast, make_engine};
use self::kernels::{Kernels, Precision, Variant};
use self::multi::DeviceTimes;
use self::presets::{Bodies, Preset};
use self::sim::StepBuffers;
use self::state::SavedState;
use crate::camera::OrbitCamera;
use crate::cuda::module::{CompiledModule, PendingCompile};
use crate::demo_kit::{
    Demo, DemoEnv, DemoSpec, Drawn, KernelInfo, LiveKernels, OccupancyCache, Pipeline, SharedParts, View, ViewControls,
};
use crate::guard::Guard;
use crate::render::{Graphics, Scene, Sprites};
use crate::sources::SourceFile;
use crate::stats::StageTimes;
use crate::transfer::{Access, SharedBuffer, Target, TransferKind};
use crate::{Error, Result};

pub use self::kernels::KERNEL;

/// One body's float4 as GL holds it.
pub type Float4 = [f32; 4];

/// Recent measurements for the panel.
#[derive(Default)]
struct Readouts {
    steps: VecDeque<Instant>,
    forces_us: VecDeque<f64>,
    initial_energy: Option<f64>,
    energy: Option<(u64, f64, f64)>,
    /// With `--devices`: recent GPU times of each step, per device.
    devices: VecDeque<Vec<DeviceTimes>>,
    /// With `--devices`: the forces kernel over all bodies on the first device alone, µs
    /// (measured at each reset), the reference of the scaling efficiency.
    one_device_forces_us: Option<f64>,
}

impl Readouts {
    fn median_forces_us(&self) -> Option<f64> {
        crate::stats::Percentiles::of(self.forces_us.iter().copied()).map(|p| p.median)
    }
}

/// Editable copies of settings that are applied with a button (or validated before use).
#[derive(Debug, Clone)]
struct Edit {
    bodies: u32,
    preset: Preset,
    seed: u64,
    params: Params,
    variant: Variant,
    slices_auto: bool,
    slices: u32,
    path: String,
}

/// The n-body demo.
pub struct NBody {
    settings: NBodySettings,
    params: Params,
    pipeline: Pipeline,
    engine: Engine,
    positions: [SharedBuffer; 2],
    /// One buffer, or with `--pipeline-depth 2` one per positions buffer (drawn together).
    velocities: Vec<SharedBuffer>,
    current: usize,
    camera: OrbitCamera,
    step: u64,
    speed_reference: f32,
    readouts: Readouts,
    pending: Vec<Change>,
    edit: Edit,
    message: Option<String>,
    /// What the last save or load did (not an error: shown in the normal colour).
    notice: Option<String>,
    occupancy: OccupancyCache,
    /// Autotuning in progress (the window, first run on a device): one candidate per frame.
    tuner: Option<tune::Tuner>,
    /// What autotuning found, when the variant came from it.
    tuned: Option<tune::Tuned>,
    /// Autotuning waits for the demo's own kernels, which are still compiling.
    tune_when_compiled: bool,
    /// The bodies read before a switch between CUDA and the CPU, for the engine on the new path.
    carried_bodies: Option<Bodies>,
}

impl NBody {
    /// Creates the demo: bodies from the preset (or `settings.load`), kernels for the variant.
    pub fn new(env: &DemoEnv<'_>, settings: NBodySettings) -> Result<Self> {
        let graphics = env.graphics;
        let (settings, start_tuner, tuned) = choose_variant(env, settings);
        let mut pipeline = Pipeline::new(env.cuda.clone(), env.transfer)?;
        let (bodies, params, step) = initial_state(&settings, env.cuda.is_some())?;
        let engine = make_engine(pipeline.cuda().map(|c| &**c), &settings, &bodies)?;
        let depth = if pipeline.cuda().is_some() { settings.pipeline_depth as usize } else { 1 };
        let (positions, velocities) = make_buffers(&mut pipeline, graphics, &bodies, depth)?;
        let n = bodies.len() as u32;
        let edit = Edit {
            bodies: n,
            preset: settings.preset,
            seed: settings.seed,
            params,
            variant: settings.variant,
            slices_auto: settings.slices.is_none(),
            slices: settings.slices.unwrap_or(1),
            path: settings
                .save
                .as_ref()
                .or(settings.load.as_ref())
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "nbody.state".to_owned()),
        };
        let mut demo = Self {
            camera: OrbitCamera::new(camera_distance(settings.preset)),
            speed_reference: bodies.rms_speed().max(1e-6) as f32,
            settings,
            params,
            pipeline,
            engine,
            positions,
            velocities,
            current: 0,
            step,
            readouts: Readouts::default(),
            pending: Vec::new(),
            edit,
            message: None,
            notice: None,
            occupancy: OccupancyCache::default(),
            // Started once the demo's own kernels are loaded: its compiles must not delay the first frame.
            tuner: None,
            tuned,
            tune_when_compiled: start_tuner,
            carried_bodies: None,
        };
        if matches!(demo.engine, Engine::Compiling(_)) {
            return Ok(demo); // the first frame shows the bodies; the rest starts with the kernels
        }
        demo.start_tuner();
        if let Err(error) = demo.initialise_accelerations(graphics) {
            Box::new(demo).destroy(graphics);
            return Err(error);
        }
        Ok(demo)
    }

    /// Number of bodies.
    pub fn len(&self) -> u32 {
        self.positions[0].len() as u32 / 16
    }

    /// Whether there are no bodies (never).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Steps taken since the preset was generated.
    pub fn steps(&self) -> u64 {
        self.step
    }

    /// The physical parameters in use.
    pub fn params(&self) -> Params {
        self.params
    }

    /// Starts autotuning when it was asked for and has not started.
    fn start_tuner(&mut self) {
        if let (true, Some(cuda)) = (std::mem::take(&mut self.tune_when_compiled), self.pipeline.cuda()) {
            self.tuner = Some(tune::Tuner::start(cuda, self.settings.variant.precision));
        }
    }

    /// Takes the background compile's result when it has arrived and builds the CUDA engine;
    /// returns whether it runs. A failed compile is said in the panel and the bodies stay still.
    fn finish_compile(&mut self, graphics: Graphics<'_>) -> Result<bool> {
        let Engine::Compiling(compiling) = &mut self.engine else { return Ok(true) };
        let Some(result) = compiling.pending.as_ref().and_then(PendingCompile::poll) else { return Ok(false) };
        compiling.pending = None;
        let (variant, slices) = (self.settings.variant, self.settings.slices);
        let pipelined = self.settings.pipeline_depth > 1;
        let built = result.and_then(|compiled| {
            let cuda = self.pipeline.cuda().ok_or_else(mismatch)?;
            log::info!("{} compiled in {:.2} s", KERNEL.name, compiled.compile_time.as_secs_f64());
            let kernels = Kernels::from_compiled(cuda, variant, &compiled)?;
            sim::Simulation::new(&cuda.context, kernels, &compiling.bodies, slices, pipelined)
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
    fn advance_tuning(&mut self, graphics: Graphics<'_>) -> Result<()> {
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

    /// The forces kernel variant in use (CUDA).
    pub fn variant(&self) -> Option<Variant> {
        match &self.engine {
            Engine::Cuda { simulation, .. } => Some(simulation.kernels().variant),
            Engine::Cpu(_) | Engine::Compiling(_) => None,
        }
    }

    /// Slices of the j range (CUDA).
    pub fn slices(&self) -> Option<u32> {
        match &self.engine {
            Engine::Cuda { simulation, .. } => Some(simulation.slices()),
            Engine::Cpu(_) | Engine::Compiling(_) => None,
        }
    }

    /// The velocity buffer drawn with `positions[index]`.
    fn velocities_for(&self, index: usize) -> usize {
        if self.velocities.len() > 1 { index } else { 0 }
    }

    /// Whether the GL buffers hold only float copies to draw, the state living elsewhere (the
    /// device, or the CPU's f64 arrays): the step then writes them and never reads them.
    fn display_only(&self) -> bool {
        self.settings.variant.precision == Precision::F64
            || matches!(&self.engine, Engine::Cuda { simulation, .. } if simulation.has_device_state())
    }

    /// Hands buffers mapped ahead for the next step back to GL (before GL reads or replaces them).
    fn release_prepared(&mut self) -> Result<()> {
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
    /// written values from stale ones.
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
        Ok(())
    }

    /// What the GL buffers hold now (float copies of the state in fp64 runs), for tests.
    pub fn read_gl_buffers(&mut self, graphics: Graphics<'_>) -> Result<(Vec<Float4>, Vec<Float4>)> {
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

    /// a(x) of the current state, which the first kick of the next step needs.
    fn initialise_accelerations(&mut self, graphics: Graphics<'_>) -> Result<()> {
        let params = self.params;
        let (current, step) = (self.current, self.step);
        let energy_every = self.settings.energy_every;
        let drawn_velocities = self.velocities_for(current);
        let engine = &mut self.engine;
        let [p0, p1] = &mut self.positions;
        let (positions_in, positions_out) = if current == 0 { (p0, p1) } else { (p1, p0) };
        let mut buffers = [
            (positions_in, Access::Read),
            (positions_out, Access::Read),
            (&mut self.velocities[drawn_velocities], Access::ReadWrite),
        ];
        self.pipeline.transfer().run(graphics, u64::MAX, &mut buffers, &mut |target| match (target, &mut *engine) {
            (Target::Device { buffers, stream }, Engine::Cuda { simulation, multi, .. }) => {
                let spans = StepBuffers { positions_in: buffers[0], positions_out: buffers[1], velocities: buffers[2] };
                // With --devices this also times the forces of all bodies on one device, the
                // reference the panel's scaling efficiency is measured against.
                simulation.initialise(stream, &spans, &params)?;
                if let Some(multi) = multi {
                    multi.initialise(stream, &spans, &params)?;
                }
                if energy_every > 0 || step == 0 {
                    simulation.request_energy(stream, &spans, &params, step)?;
                }
                Ok(())
            }
            (Target::Host { buffers }, Engine::Cpu(engine)) => {
                match &mut engine.double {
                    Some(double) => {
                        let current = double.current;
                        cpu::accelerations(
                            &double.positions[current],
                            &params,
                            &mut double.scratch,
                            &mut double.accelerations,
                        );
                    }
                    None => {
                        let positions: &[[f32; 4]] = cast(&*buffers[0])?;
                        cpu::accelerations(positions, &params, &mut engine.scratch, &mut engine.accelerations);
                    }
                }
                Ok(())
            }
            _ => Err(mismatch()),
        })?;
        if matches!(self.engine, Engine::Cpu(_)) {
            self.cpu_energy(graphics)?;
        }
        Ok(())
    }

    /// Moves the timings the step left (kernel times, per-device times) into the panel's readouts.
    fn collect_readouts(&mut self) -> Result<()> {
        match &mut self.engine {
            Engine::Cuda { simulation, multi: None, .. } => {
                while let Some((_, microseconds)) = simulation.poll_force_time()? {
                    self.readouts.forces_us.push_back(microseconds);
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
            }
            Engine::Compiling(_) => {}
        }
        while self.readouts.forces_us.len() > 60 {
            self.readouts.forces_us.pop_front();
        }
        Ok(())
    }

    fn note_step(&mut self) {
        let now = Instant::now();
        self.readouts.steps.push_back(now);
        while self.readouts.steps.front().is_some_and(|t| now.duration_since(*t).as_secs_f64() > 1.0) {
            self.readouts.steps.pop_front();
        }
    }

    /// Steps per second over the recent steps; `None` when none was taken in the last second
    /// (paused), so a stale figure is not shown as current.
    fn steps_per_second(&self) -> Option<f64> {
        let steps = &self.readouts.steps;
        match (steps.front(), steps.back()) {
            (Some(_), Some(last)) if last.elapsed().as_secs_f64() > 1.0 => None,
            (Some(first), Some(last)) if steps.len() > 1 => {
                Some((steps.len() - 1) as f64 / last.duration_since(*first).as_secs_f64().max(1e-9))
            }
            _ => None,
        }
    }

    fn peak_flops(&self) -> Option<f64> {
        let cuda = self.pipeline.cuda()?;
        let device = cuda.context.device();
        match self.settings.variant.precision {
            Precision::F32 => device.fp32_peak_flops(),
            Precision::F64 => device.fp64_peak_flops(),
        }
    }
}

fn mismatch() -> Error {
    Error::InvalidInput("n-body: the compute backend and the transfer path disagree".to_owned())
}

fn camera_distance(preset: Preset) -> f32 {
    match preset {
        Preset::Collision => 5.0,
        Preset::Disk => 2.6,
        Preset::Plummer => 6.0,
        Preset::Cube | Preset::Expanding => 4.5,
        Preset::Shell => 3.5,
    }
}

/// The variant to start from. Chosen by hand: as given. Otherwise (`auto_variant`, on CUDA) the
/// one tuned for this device; never tuned: the window begins with the fastest variant known and
/// asks for a [`tune::Tuner`] (the `bool`), a headless run tunes now, with a bar on the terminal.
fn choose_variant(env: &DemoEnv<'_>, mut settings: NBodySettings) -> (NBodySettings, bool, Option<tune::Tuned>) {
    let Some(cuda) = env.cuda.as_deref() else { return (settings, false, None) };
    if !settings.auto_variant || settings.devices.len() > 1 {
        return (settings, false, None);
    }
    let precision = settings.variant.precision;
    let (variant, known) = tune::starting_variant(cuda, precision);
    settings.variant = variant;
    if known.is_some() {
        return (settings, false, known);
    }
    if cuda.background_compiles {
        return (settings, true, None);
    }
    let candidates = tune::candidates(precision).len() as u64;
    let progress = crate::progress::Progress::new("tuning n-body", candidates, &crate::stop::StopRequest::new());
    match tune::tune_now(cuda, precision, &progress) {
        Ok(tuned) => {
            log::info!(
                "tuned n-body on {}: {} ({:.3e} interactions/s at {} bodies)",
                tuned.device,
                tuned.variant.label(),
                tuned.interactions_per_s,
                tuned.bodies
            );
            settings.variant = tuned.variant;
            (settings, false, Some(tuned))
        }
        Err(error) => {
            log::warn!("n-body autotuning failed, starting from {}: {error}", variant.label());
            (settings, false, None)
        }
    }
}

/// Bodies, parameters and step count to start from.
fn initial_state(settings: &NBodySettings, cuda: bool) -> Result<(Bodies, Params, u64)> {
    settings.variant.validate()?;
    settings.validate_pipeline()?;
    match &settings.load {
        Some(path) => {
            let saved = state::load(path)?;
            validate_params(&saved.params)?;
            Ok((saved.bodies, saved.params, saved.step))
        }
        None => {
            let n = settings.body_count(cuda);
            validate_bodies(n)?;
            if !cuda {
                // Before the bodies are made: 10 million of them take seconds to generate.
                cpu::check_step_time(n as usize, settings.variant.precision == Precision::F64)?;
            }
            let params = settings.params();
            validate_params(&params)?;
            Ok((settings.preset.generate(n as usize, settings.seed), params, 0))
        }
    }
}

/// Every GL buffer of the demo: both positions and each velocity buffer.
fn every_buffer<'a>(
    positions: &'a mut [SharedBuffer; 2],
    velocities: &'a mut [SharedBuffer],
) -> Vec<&'a mut SharedBuffer> {
    positions.iter_mut().chain(velocities.iter_mut()).collect()
}

/// The two position buffers and `depth` velocity buffers, filled with `bodies` (as float).
fn make_buffers(
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

impl Demo for NBody {
    fn name(&self) -> &'static str {
        "nbody"
    }

    fn spec(&self) -> DemoSpec {
        DemoSpec::new(self.settings.clone())
    }

    /// The bodies, their parameters and the step go through a state file in the temporary folder,
    /// which the new demo loads.
    fn spec_with_state(&mut self, graphics: Graphics<'_>) -> Result<DemoSpec> {
        let path = std::env::temp_dir().join(format!("interop-lab-nbody-{}.state", std::process::id()));
        self.save(graphics, &path)?;
        Ok(DemoSpec::new(NBodySettings { load: Some(path), ..self.settings.clone() }))
    }

    fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    fn shared(&mut self) -> SharedParts<'_> {
        SharedParts {
            pipeline: &mut self.pipeline,
            carried: every_buffer(&mut self.positions, &mut self.velocities),
            drawn: Drawn::Carried(self.current),
        }
    }

    /// Between CUDA and the CPU the engine changes too: the bodies are read while the old one
    /// holds them, and carried over.
    fn before_path_change(&mut self, graphics: Graphics<'_>, next: TransferKind) -> Result<()> {
        self.carried_bodies = None;
        if self.pipeline.kind().uses_cuda() != next.uses_cuda() {
            self.carried_bodies = Some(self.read_bodies(graphics)?);
        }
        Ok(())
    }

    fn path_changed(&mut self, graphics: Graphics<'_>, _previous: TransferKind) -> Result<()> {
        let Some(bodies) = self.carried_bodies.take() else { return Ok(()) };
        let (settings, params, step) = (self.settings.clone(), self.params, self.step);
        self.rebuild(graphics, settings, bodies, params, step)
    }

    fn step(&mut self, graphics: Graphics<'_>, frame: u64, _dt: f32) -> Result<StageTimes> {
        for change in std::mem::take(&mut self.pending) {
            if let Err(error) = self.apply(graphics, change) {
                self.message = Some(error.to_string());
            }
        }
        if !self.finish_compile(graphics)? {
            return Ok(StageTimes::default()); // the bodies stand still until the kernels arrive
        }
        self.advance_tuning(graphics)?;
        let params = self.params;
        let step = self.step;
        let energy_due =
            self.settings.energy_every > 0 && (step + 1).is_multiple_of(u64::from(self.settings.energy_every));
        let display_only = self.display_only();
        // With --pipeline-depth 2 (CUDA) the copies the next step writes are mapped during this one.
        let pipelined = display_only && self.velocities.len() > 1 && matches!(self.engine, Engine::Cuda { .. });
        let velocities_out = self.velocities_for(if display_only { 1 - self.current } else { self.current });
        let engine = &mut self.engine;
        let [p0, p1] = &mut self.positions;
        let (positions_in, positions_out) = if self.current == 0 { (p0, p1) } else { (p1, p0) };
        let (velocities, velocities_next) = crate::transfer::this_and_next(&mut self.velocities, velocities_out);
        // fp32 at depth 1: the state is in the GL buffers (read one, write the other, update the
        // velocities); fp64, or a pipeline: the state is elsewhere and the GL buffers only
        // receive float copies to draw.
        let mut next_pair;
        let mut next: &mut [(&mut SharedBuffer, Access)] = &mut [];
        let mut state_buffers;
        let mut display_buffers;
        let buffers: &mut [(&mut SharedBuffer, Access)] = if display_only {
            if let (true, Some(velocities_next)) = (pipelined, velocities_next) {
                // The positions this step read are the ones the next step writes (as a copy).
                next_pair = [(positions_in, Access::Write), (velocities_next, Access::Write)];
                next = &mut next_pair;
            }
            display_buffers = [(positions_out, Access::Write), (velocities, Access::Write)];
            &mut display_buffers
        } else {
            state_buffers =
                [(positions_in, Access::Read), (positions_out, Access::Write), (velocities, Access::ReadWrite)];
            &mut state_buffers
        };
        let times = self.pipeline.transfer().run_pipelined(graphics, frame, buffers, next, &mut |target| match (
            target,
            &mut *engine,
        ) {
            (Target::Device { buffers, stream }, Engine::Cuda { simulation, multi, .. }) => {
                let spans = if display_only {
                    StepBuffers { positions_in: buffers[0], positions_out: buffers[0], velocities: buffers[1] }
                } else {
                    StepBuffers { positions_in: buffers[0], positions_out: buffers[1], velocities: buffers[2] }
                };
                match multi {
                    Some(multi) => multi.step(stream, &spans, &params, step)?,
                    None => simulation.step(stream, &spans, &params, step)?,
                }
                if energy_due {
                    let after = StepBuffers { positions_in: spans.positions_out, ..spans };
                    simulation.request_energy(stream, &after, &params, step + 1)?;
                }
                Ok(())
            }
            (Target::Host { buffers }, Engine::Cpu(engine)) => engine.step(buffers, &params),
            _ => Err(mismatch()),
        })?;
        self.current = 1 - self.current;
        self.step += 1;
        self.note_step();
        self.collect_readouts()?;
        self.poll_energy()?;
        if energy_due && matches!(self.engine, Engine::Cpu(_)) && u64::from(self.len()).pow(2) <= 1 << 26 {
            self.cpu_energy(graphics)?;
        }
        Ok(times)
    }

    fn scene(&mut self, view: &View) -> Scene<'_> {
        // Many bodies overlap: dim each so the dense parts saturate gently.
        let density = (16_384.0 / self.len().max(1) as f32).sqrt().min(1.0);
        Scene::Sprites(Sprites {
            bodies: &self.positions[self.current],
            velocities: &self.velocities[self.velocities_for(self.current)],
            count: self.len(),
            view_projection: self.camera.view_projection(view.aspect()),
            pixels_per_unit: view.size[1] as f32 / (2.0 * (self.camera.fov_y * 0.5).tan()),
            radius: self.settings.point_size,
            speed_scale: self.speed_reference * self.settings.colour_scale,
            brightness: self.settings.brightness * density,
        })
    }

    fn panel(&mut self, ui: &mut egui::Ui) {
        panel::controls(self, ui);
    }

    fn view_controls(&mut self) -> Option<&mut dyn ViewControls> {
        Some(&mut self.camera)
    }

    fn live_kernels(&mut self) -> Option<&mut dyn LiveKernels> {
        Some(self)
    }

    fn finish(&mut self, graphics: Graphics<'_>) -> Result<()> {
        self.collect_energy()?;
        if let Some(path) = self.settings.save.clone() {
            self.save(graphics, &path)?;
            log::info!("saved {} bodies to {}", self.len(), path.display());
        }
        Ok(())
    }

    fn destroy(mut self: Box<Self>, graphics: Graphics<'_>) {
        if let Err(error) = self.synchronize() {
            log::warn!("nbody: {error}");
        }
        let NBody { positions: [p0, p1], velocities, .. } = *self;
        for buffer in [p0, p1].into_iter().chain(velocities) {
            buffer.destroy(graphics);
        }
    }
}

impl NBody {
    /// Waits for the demo's GPU work.
    pub fn synchronize(&mut self) -> Result<()> {
        self.pipeline.transfer().synchronize()
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
