//! `nbody`: all-pairs gravity, integrated by CUDA straight in the GL vertex buffers it is drawn
//! from. Positions and masses are float4 in two GL buffers used ping-pong (the one read this step
//! mapped read-only, the one written mapped write-discard), velocities in a third.

pub mod args;
pub mod bench;
pub mod cpu;
pub mod kernels;
pub mod multi;
pub mod presets;
pub mod sim;
pub mod state;

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::time::Instant;

use self::cpu::{Params, Scratch};
use self::kernels::{Kernels, Precision, Variant};
use self::multi::{DeviceTimes, MultiSimulation};
use self::presets::{Bodies, Preset};
use self::sim::{Simulation, StepBuffers};
use self::state::SavedState;
use crate::camera::OrbitCamera;
use crate::cuda::module::CompiledModule;
use crate::demo::{Demo, DemoEnv, DemoSpec, KernelInfo, OccupancyCache, Pipeline, Settings, View};
use crate::gl::{self, Attribute, DrawState};
use crate::runtime::CudaRuntime;
use crate::sources::SourceFile;
use crate::stats::{LateGpuTimes, StageTimes};
use crate::transfer::{Access, SharedBuffer, Target, TransferKind};
use crate::{Error, Result, source_file};

pub use self::kernels::KERNEL;

const VERTEX_SHADER: SourceFile = source_file!("shaders/nbody.vert");
const FRAGMENT_SHADER: SourceFile = source_file!("shaders/nbody.frag");

/// One body's float4 as GL holds it.
pub type Float4 = [f32; 4];

/// Flops per body-body interaction, by the convention of CUDA's nbody sample.
pub const FLOPS_PER_INTERACTION: f64 = 20.0;
/// Most bodies accepted.
pub const MAX_BODIES: u32 = 1 << 24;
/// Default body count on CUDA and on the CPU.
pub const DEFAULT_BODIES_CUDA: u32 = 65_536;
/// Default on the CPU backend: what two cores step at interactive rates.
pub const DEFAULT_BODIES_CPU: u32 = 4_096;

/// Everything that defines an n-body run; each is also a command-line flag.
#[derive(Debug, Clone, PartialEq)]
pub struct NBodySettings {
    /// Bodies (`None`: 65,536 on CUDA, 4,096 on the CPU).
    pub bodies: Option<u32>,
    /// Initial conditions.
    pub preset: Preset,
    /// Seed of the initial conditions.
    pub seed: u64,
    /// Time step (`None`: the preset's).
    pub dt: Option<f64>,
    /// Softening length (`None`: the preset's).
    pub softening: Option<f64>,
    /// Velocity factor per step (1 = none).
    pub damping: f64,
    /// Gravitational constant.
    pub gravity: f64,
    /// Forces kernel variant (its precision is the run's precision).
    pub variant: Variant,
    /// Slices of the j range (`None`: enough to fill the GPU).
    pub slices: Option<u32>,
    /// Sprite radius in world units.
    pub point_size: f32,
    /// Brightness factor.
    pub brightness: f32,
    /// Speed of the hottest colour, as a multiple of the initial RMS speed.
    pub colour_scale: f32,
    /// Compute the energy every this many steps (0: only when asked).
    pub energy_every: u32,
    /// Start from this state file instead of the preset.
    pub load: Option<PathBuf>,
    /// Save the state here when the run ends.
    pub save: Option<PathBuf>,
    /// CUDA devices to split the bodies across, one context each, the first rendering (empty:
    /// the computing device alone). Repeating an ordinal gives it another context.
    pub devices: Vec<i32>,
}

impl Default for NBodySettings {
    fn default() -> Self {
        Self {
            bodies: None,
            preset: Preset::Collision,
            seed: 1,
            dt: None,
            softening: None,
            damping: 1.0,
            gravity: 1.0,
            variant: Variant::default(),
            slices: None,
            point_size: 0.006,
            brightness: 1.0,
            colour_scale: 2.0,
            energy_every: 30,
            load: None,
            save: None,
            devices: Vec::new(),
        }
    }
}

impl NBodySettings {
    /// The physical parameters, with the preset's defaults filled in.
    pub fn params(&self) -> Params {
        Params {
            dt: self.dt.unwrap_or_else(|| self.preset.default_dt()),
            softening: self.softening.unwrap_or_else(|| self.preset.default_softening()),
            gravity: self.gravity,
            damping: self.damping,
        }
    }

    /// The body count for a backend.
    pub fn body_count(&self, cuda: bool) -> u32 {
        self.bodies.unwrap_or(if cuda { DEFAULT_BODIES_CUDA } else { DEFAULT_BODIES_CPU })
    }
}

/// Checks the physical parameters; the message says which is wrong and what is allowed.
pub fn validate_params(params: &Params) -> Result<()> {
    let rules = [
        (params.dt.is_finite() && params.dt > 0.0 && params.dt <= 1.0, "dt must be a number in (0, 1]"),
        (
            params.softening.is_finite() && params.softening > 0.0 && params.softening <= 10.0,
            "softening must be in (0, 10]: without it a close pair's force is unbounded and a body's own term divides by zero",
        ),
        (params.gravity.is_finite() && params.gravity > 0.0 && params.gravity <= 1e6, "gravity G must be in (0, 1e6]"),
        (
            params.damping.is_finite() && params.damping > 0.0 && params.damping <= 1.0,
            "damping must be in (0, 1] (1 = none)",
        ),
    ];
    match rules.iter().find(|(ok, _)| !ok) {
        Some((_, rule)) => Err(Error::InvalidInput(format!(
            "{rule}; got dt {}, softening {}, G {}, damping {}",
            params.dt, params.softening, params.gravity, params.damping
        ))),
        None => Ok(()),
    }
}

/// Checks a body count.
pub fn validate_bodies(n: u32) -> Result<()> {
    if n == 0 || n > MAX_BODIES {
        return Err(Error::InvalidInput(format!("the number of bodies must be 1..={MAX_BODIES}, not {n}")));
    }
    Ok(())
}

impl Settings for NBodySettings {
    const NAME: &'static str = "nbody";

    fn create(&self, env: &DemoEnv<'_>) -> Result<Box<dyn Demo>> {
        Ok(Box::new(NBody::new(env, self.clone())?))
    }

    /// The CPU computes all bodies itself: a split across CUDA devices is dropped.
    fn on_cpu(&self) -> Self {
        Self { devices: Vec::new(), ..self.clone() }
    }
}

/// The compute side: CUDA or the CPU.
enum Engine {
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
}

/// CPU-side state beyond the GL buffers.
struct CpuEngine {
    accelerations: Vec<[f32; 4]>,
    scratch: Scratch<f32>,
    double: Option<CpuDouble>,
    /// Time of the last accelerations pass, µs.
    forces_us: Option<f64>,
}

struct CpuDouble {
    positions: [Vec<[f64; 4]>; 2],
    velocities: Vec<[f64; 4]>,
    accelerations: Vec<[f64; 4]>,
    scratch: Scratch<f64>,
    current: usize,
}

/// A change asked for in the panel, applied at the next step (which has the GL context).
#[derive(Debug, Clone, PartialEq)]
enum Change {
    Reset,
    Variant(Variant),
    Slices(Option<u32>),
    Save(PathBuf),
    Load(PathBuf),
    Energy,
}

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
    velocities: SharedBuffer,
    current: usize,
    program: gl::Program,
    vertex_arrays: [gl::VertexArray; 2],
    camera: OrbitCamera,
    step: u64,
    speed_reference: f32,
    readouts: Readouts,
    pending: Vec<Change>,
    edit: Edit,
    message: Option<String>,
    occupancy: OccupancyCache,
}

impl NBody {
    /// Creates the demo: bodies from the preset (or `settings.load`), kernels for the variant.
    pub fn new(env: &DemoEnv<'_>, settings: NBodySettings) -> Result<Self> {
        let gl = env.gl;
        let mut pipeline = Pipeline::new(env.cuda.clone(), env.transfer)?;
        let (bodies, params, step) = initial_state(&settings, env.cuda.is_some())?;
        let engine = make_engine(pipeline.cuda().map(|c| &**c), &settings, &bodies)?;
        let (positions, velocities) = make_buffers(&mut pipeline, gl, &bodies)?;
        let (vertex_source, _) = VERTEX_SHADER.read(env.shaders_dir.as_deref())?;
        let (fragment_source, _) = FRAGMENT_SHADER.read(env.shaders_dir.as_deref())?;
        let program = gl::Program::new(gl, "nbody", &vertex_source, &fragment_source);
        let arrays = gl::VertexArray::new(gl).and_then(|a| gl::VertexArray::new(gl).map(|b| [a, b]));
        let (program, vertex_arrays) = match (program, arrays) {
            (Ok(program), Ok(arrays)) => (program, arrays),
            (program, arrays) => {
                let [p0, p1] = positions;
                for buffer in [p0, p1, velocities] {
                    buffer.destroy(gl);
                }
                let error = program
                    .as_ref()
                    .err()
                    .map(|e| e.to_string())
                    .or_else(|| arrays.as_ref().err().map(|e| e.to_string()));
                if let Ok(mut program) = program {
                    program.destroy(gl);
                }
                if let Ok(mut arrays) = arrays {
                    arrays.iter_mut().for_each(|a| a.destroy(gl));
                }
                return Err(Error::Gl(error.unwrap_or_default()));
            }
        };
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
            program,
            vertex_arrays,
            step,
            readouts: Readouts::default(),
            pending: Vec::new(),
            edit,
            message: None,
            occupancy: OccupancyCache::default(),
        };
        if let Err(error) = demo.bind_vertex_arrays(gl).and_then(|()| demo.initialise_accelerations(gl)) {
            Box::new(demo).destroy(gl);
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

    /// The forces kernel variant in use (CUDA).
    pub fn variant(&self) -> Option<Variant> {
        match &self.engine {
            Engine::Cuda { simulation, .. } => Some(simulation.kernels().variant),
            Engine::Cpu(_) => None,
        }
    }

    /// Slices of the j range (CUDA).
    pub fn slices(&self) -> Option<u32> {
        match &self.engine {
            Engine::Cuda { simulation, .. } => Some(simulation.slices()),
            Engine::Cpu(_) => None,
        }
    }

    /// The current bodies in f64, read back from wherever the state lives.
    pub fn read_bodies(&mut self, gl: &glow::Context) -> Result<Bodies> {
        self.pipeline.transfer().synchronize()?;
        let from_gl = |transfer: &mut dyn crate::transfer::Transfer,
                       positions: &SharedBuffer,
                       velocities: &SharedBuffer|
         -> Result<Bodies> {
            let p = transfer.read_buffer(gl, positions)?;
            let v = transfer.read_buffer(gl, velocities)?;
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
                match simulation.read_double_state(&stream)? {
                    Some(bodies) => Ok(bodies),
                    None => from_gl(self.pipeline.transfer(), &self.positions[self.current], &self.velocities),
                }
            }
            Engine::Cpu(engine) => match &engine.double {
                Some(double) => Ok(Bodies {
                    positions: double.positions[double.current].clone(),
                    velocities: double.velocities.iter().map(|v| [v[0], v[1], v[2]]).collect(),
                }),
                None => from_gl(self.pipeline.transfer(), &self.positions[self.current], &self.velocities),
            },
        }
    }

    /// Refills the buffers the next step writes (never reads) with NaN, so a test can tell
    /// written values from stale ones.
    pub fn poison_next_output(&mut self, gl: &glow::Context) -> Result<()> {
        self.pipeline.transfer().synchronize()?;
        let poison = vec![f32::NAN; self.len() as usize * 4];
        let next = 1 - self.current;
        let buffer = self.pipeline.transfer().create_buffer(gl, bytemuck::cast_slice(&poison))?;
        std::mem::replace(&mut self.positions[next], buffer).destroy(gl);
        if self.settings.variant.precision == Precision::F64 {
            let buffer = self.pipeline.transfer().create_buffer(gl, bytemuck::cast_slice(&poison))?;
            std::mem::replace(&mut self.velocities, buffer).destroy(gl);
        }
        self.bind_vertex_arrays(gl)
    }

    /// What the GL buffers hold now (float copies of the state in fp64 runs), for tests.
    pub fn read_gl_buffers(&mut self, gl: &glow::Context) -> Result<(Vec<Float4>, Vec<Float4>)> {
        self.pipeline.transfer().synchronize()?;
        let positions = self.pipeline.transfer().read_buffer(gl, &self.positions[self.current])?;
        let velocities = self.pipeline.transfer().read_buffer(gl, &self.velocities)?;
        Ok((bytemuck::pod_collect_to_vec(&positions), bytemuck::pod_collect_to_vec(&velocities)))
    }

    /// Saves the current state.
    pub fn save(&mut self, gl: &glow::Context, path: &std::path::Path) -> Result<()> {
        let bodies = self.read_bodies(gl)?;
        state::save(path, &SavedState { bodies, params: self.params, step: self.step })
    }

    /// The last energy readout: `(step, kinetic, potential)` and the energy at the reset.
    pub fn energy(&self) -> (Option<(u64, f64, f64)>, Option<f64>) {
        (self.readouts.energy, self.readouts.initial_energy)
    }

    /// Queues an energy computation of the current state (CUDA) or computes it (CPU); the result
    /// arrives through the next steps or [`Self::collect_energy`].
    pub fn request_energy(&mut self, gl: &glow::Context) -> Result<()> {
        self.apply(gl, Change::Energy)
    }

    /// Waits for outstanding work and collects a pending energy result.
    pub fn collect_energy(&mut self) -> Result<()> {
        self.pipeline.transfer().synchronize()?;
        self.poll_energy()
    }

    fn bind_vertex_arrays(&self, gl: &glow::Context) -> Result<()> {
        let body = Attribute { location: 0, components: 4, stride: 16, offset: 0 };
        let velocity = Attribute { location: 1, components: 4, stride: 16, offset: 0 };
        for (array, positions) in self.vertex_arrays.iter().zip(&self.positions) {
            array.set_attributes(gl, positions.gl(), &[body], None)?;
            array.set_attributes(gl, self.velocities.gl(), &[velocity], None)?;
        }
        Ok(())
    }

    /// a(x) of the current state, which the first kick of the next step needs.
    fn initialise_accelerations(&mut self, gl: &glow::Context) -> Result<()> {
        let params = self.params;
        let (current, step) = (self.current, self.step);
        let energy_every = self.settings.energy_every;
        let engine = &mut self.engine;
        let [p0, p1] = &mut self.positions;
        let (positions_in, positions_out) = if current == 0 { (p0, p1) } else { (p1, p0) };
        let mut buffers =
            [(positions_in, Access::Read), (positions_out, Access::Read), (&mut self.velocities, Access::ReadWrite)];
        self.pipeline.transfer().run(gl, u64::MAX, &mut buffers, &mut |target| match (target, &mut *engine) {
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
            self.cpu_energy(gl)?;
        }
        Ok(())
    }

    /// Energy of the CPU state (f64 sums on all cores).
    fn cpu_energy(&mut self, gl: &glow::Context) -> Result<()> {
        let bodies = self.read_bodies(gl)?;
        let velocities: Vec<[f64; 4]> = bodies.velocities.iter().map(|v| [v[0], v[1], v[2], 0.0]).collect();
        let (kinetic, potential) = cpu::energy(&bodies.positions, &velocities, &self.params);
        self.record_energy(self.step, kinetic, potential);
        Ok(())
    }

    fn record_energy(&mut self, step: u64, kinetic: f64, potential: f64) {
        if self.readouts.initial_energy.is_none() {
            self.readouts.initial_energy = Some(kinetic + potential);
        }
        self.readouts.energy = Some((step, kinetic, potential));
    }

    fn poll_energy(&mut self) -> Result<()> {
        if let Engine::Cuda { simulation, .. } = &mut self.engine
            && let Some((step, kinetic, potential)) = simulation.poll_energy()?
        {
            self.record_energy(step, kinetic, potential);
        }
        Ok(())
    }

    /// Replaces bodies, engine and buffers together; on failure the old ones stay.
    fn rebuild(
        &mut self,
        gl: &glow::Context,
        settings: NBodySettings,
        bodies: Bodies,
        params: Params,
        step: u64,
    ) -> Result<()> {
        validate_params(&params)?;
        validate_bodies(bodies.len() as u32)?;
        self.pipeline.transfer().synchronize()?;
        let engine = make_engine(self.pipeline.cuda().map(|c| &**c), &settings, &bodies)?;
        let (positions, velocities) = make_buffers(&mut self.pipeline, gl, &bodies)?;
        let [old0, old1] = std::mem::replace(&mut self.positions, positions);
        let old_velocities = std::mem::replace(&mut self.velocities, velocities);
        for buffer in [old0, old1, old_velocities] {
            buffer.destroy(gl);
        }
        self.engine = engine;
        self.settings = settings;
        self.params = params;
        self.step = step;
        self.current = 0;
        self.speed_reference = bodies.rms_speed().max(1e-6) as f32;
        self.readouts = Readouts::default();
        self.bind_vertex_arrays(gl)?;
        self.initialise_accelerations(gl)
    }

    fn apply(&mut self, gl: &glow::Context, change: Change) -> Result<()> {
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
                self.rebuild(gl, settings, bodies, params, 0)?;
                if preset_changed {
                    self.camera = OrbitCamera::new(camera_distance(self.settings.preset));
                }
                Ok(())
            }
            Change::Variant(variant) => self.set_variant(gl, variant),
            Change::Slices(slices) => {
                let settings = NBodySettings { slices, ..self.settings.clone() };
                let bodies = self.read_bodies(gl)?;
                self.rebuild(gl, settings, bodies, self.params, self.step)
            }
            Change::Save(path) => self.save(gl, &path).map(|()| {
                self.message = Some(format!("saved {} bodies to {}", self.len(), path.display()));
            }),
            Change::Load(path) => {
                let saved = state::load(&path)?;
                let settings = NBodySettings { bodies: Some(saved.bodies.len() as u32), ..self.settings.clone() };
                self.rebuild(gl, settings, saved.bodies, saved.params, saved.step)?;
                self.edit.params = self.params;
                self.edit.bodies = self.len();
                self.message = Some(format!("loaded {} bodies from {}", self.len(), path.display()));
                Ok(())
            }
            Change::Energy => match &self.engine {
                Engine::Cpu(_) => self.cpu_energy(gl),
                Engine::Cuda { .. } => self.request_cuda_energy(gl),
            },
        }
    }

    fn request_cuda_energy(&mut self, gl: &glow::Context) -> Result<()> {
        let (params, step) = (self.params, self.step);
        let engine = &mut self.engine;
        let [p0, p1] = &mut self.positions;
        let positions = if self.current == 0 { p0 } else { p1 };
        let mut buffers = [(positions, Access::Read), (&mut self.velocities, Access::Read)];
        self.pipeline.transfer().run(gl, u64::MAX, &mut buffers, &mut |target| match (target, &mut *engine) {
            (Target::Device { buffers, stream }, Engine::Cuda { simulation, .. }) => {
                let spans = StepBuffers { positions_in: buffers[0], positions_out: buffers[0], velocities: buffers[1] };
                simulation.request_energy(stream, &spans, &params, step)
            }
            _ => Err(mismatch()),
        })?;
        Ok(())
    }

    /// Switches the forces kernel; a precision change converts the state.
    fn set_variant(&mut self, gl: &glow::Context, variant: Variant) -> Result<()> {
        variant.validate()?;
        let Some(cuda) = self.pipeline.cuda().cloned() else {
            // The CPU backend has no kernel variants, only the precision.
            let settings = NBodySettings { variant, ..self.settings.clone() };
            let bodies = self.read_bodies(gl)?;
            return self.rebuild(gl, settings, bodies, self.params, self.step);
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
            let bodies = self.read_bodies(gl)?;
            return self.rebuild(gl, settings, bodies, self.params, self.step);
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

    fn note_step(&mut self) {
        let now = Instant::now();
        self.readouts.steps.push_back(now);
        while self.readouts.steps.front().is_some_and(|t| now.duration_since(*t).as_secs_f64() > 1.0) {
            self.readouts.steps.pop_front();
        }
    }

    fn steps_per_second(&self) -> f64 {
        let steps = &self.readouts.steps;
        match (steps.front(), steps.back()) {
            (Some(first), Some(last)) if steps.len() > 1 => {
                (steps.len() - 1) as f64 / last.duration_since(*first).as_secs_f64().max(1e-9)
            }
            _ => 0.0,
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

fn cast<T: bytemuck::Pod>(bytes: &[u8]) -> Result<&[T]> {
    bytemuck::try_cast_slice(bytes).map_err(|e| Error::InvalidInput(format!("n-body buffer: {e}")))
}

fn cast_mut<T: bytemuck::Pod>(bytes: &mut [u8]) -> Result<&mut [T]> {
    bytemuck::try_cast_slice_mut(bytes).map_err(|e| Error::InvalidInput(format!("n-body buffer: {e}")))
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

/// Bodies, parameters and step count to start from.
fn initial_state(settings: &NBodySettings, cuda: bool) -> Result<(Bodies, Params, u64)> {
    settings.variant.validate()?;
    match &settings.load {
        Some(path) => {
            let saved = state::load(path)?;
            validate_params(&saved.params)?;
            Ok((saved.bodies, saved.params, saved.step))
        }
        None => {
            let n = settings.body_count(cuda);
            validate_bodies(n)?;
            let params = settings.params();
            validate_params(&params)?;
            Ok((settings.preset.generate(n as usize, settings.seed), params, 0))
        }
    }
}

fn make_engine(cuda: Option<&CudaRuntime>, settings: &NBodySettings, bodies: &Bodies) -> Result<Engine> {
    match cuda {
        Some(cuda) => {
            let kernels = Kernels::load(cuda, settings.variant)?;
            let simulation = Simulation::new(&cuda.context, kernels, bodies, settings.slices)?;
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
                forces_us: None,
            })))
        }
    }
}

/// The two position buffers and the velocity buffer, filled with `bodies` (as float).
fn make_buffers(
    pipeline: &mut Pipeline,
    gl: &glow::Context,
    bodies: &Bodies,
) -> Result<([SharedBuffer; 2], SharedBuffer)> {
    let positions: Vec<[f32; 4]> = bodies.positions.iter().map(|p| p.map(|v| v as f32)).collect();
    let velocities: Vec<[f32; 4]> =
        bodies.velocities.iter().map(|v| [v[0] as f32, v[1] as f32, v[2] as f32, 0.0]).collect();
    let transfer = pipeline.transfer();
    let first = transfer.create_buffer(gl, bytemuck::cast_slice(&positions))?;
    let second = match transfer.create_buffer(gl, bytemuck::cast_slice(&positions)) {
        Ok(buffer) => buffer,
        Err(error) => {
            first.destroy(gl);
            return Err(error);
        }
    };
    match transfer.create_buffer(gl, bytemuck::cast_slice(&velocities)) {
        Ok(velocities) => Ok(([first, second], velocities)),
        Err(error) => {
            first.destroy(gl);
            second.destroy(gl);
            Err(error)
        }
    }
}

impl Demo for NBody {
    fn name(&self) -> &'static str {
        "nbody"
    }

    fn spec(&self) -> DemoSpec {
        DemoSpec::new(self.settings.clone())
    }

    fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    fn pipeline_mut(&mut self) -> &mut Pipeline {
        &mut self.pipeline
    }

    fn use_while_mapped(&mut self) -> Result<String> {
        self.pipeline.transfer().use_while_mapped(&mut self.positions[self.current])
    }

    fn set_transfer(&mut self, gl: &glow::Context, kind: TransferKind) -> Result<()> {
        let previous = self.pipeline.kind();
        if previous.uses_cuda() == kind.uses_cuda() {
            let [p0, p1] = &mut self.positions;
            self.pipeline.switch(gl, kind, &mut [p0, p1, &mut self.velocities])?;
            return self.bind_vertex_arrays(gl);
        }
        // Between CUDA and the CPU the engine changes too: carry the bodies over.
        let bodies = self.read_bodies(gl)?;
        let [p0, p1] = &mut self.positions;
        self.pipeline.switch(gl, kind, &mut [p0, p1, &mut self.velocities])?;
        let (settings, params, step) = (self.settings.clone(), self.params, self.step);
        if let Err(error) = self.rebuild(gl, settings, bodies, params, step) {
            let [p0, p1] = &mut self.positions;
            self.pipeline.switch(gl, previous, &mut [p0, p1, &mut self.velocities])?;
            self.bind_vertex_arrays(gl)?;
            return Err(error);
        }
        Ok(())
    }

    fn step(&mut self, gl: &glow::Context, frame: u64, _dt: f32) -> Result<StageTimes> {
        for change in std::mem::take(&mut self.pending) {
            if let Err(error) = self.apply(gl, change) {
                self.message = Some(error.to_string());
            }
        }
        let params = self.params;
        let step = self.step;
        let energy_due =
            self.settings.energy_every > 0 && (step + 1).is_multiple_of(u64::from(self.settings.energy_every));
        let precision = self.settings.variant.precision;
        let engine = &mut self.engine;
        let [p0, p1] = &mut self.positions;
        let (positions_in, positions_out) = if self.current == 0 { (p0, p1) } else { (p1, p0) };
        let velocities = &mut self.velocities;
        // fp32: the state is in the GL buffers (read one, write the other, update velocities);
        // fp64: the state is in device memory and both GL buffers only receive float copies.
        let mut f32_buffers;
        let mut f64_buffers;
        let buffers: &mut [(&mut SharedBuffer, Access)] = match precision {
            Precision::F32 => {
                f32_buffers =
                    [(positions_in, Access::Read), (positions_out, Access::Write), (velocities, Access::ReadWrite)];
                &mut f32_buffers
            }
            Precision::F64 => {
                f64_buffers = [(positions_out, Access::Write), (velocities, Access::Write)];
                &mut f64_buffers
            }
        };
        let times = self.pipeline.transfer().run(gl, frame, buffers, &mut |target| match (target, &mut *engine) {
            (Target::Device { buffers, stream }, Engine::Cuda { simulation, multi, .. }) => {
                let spans = match precision {
                    Precision::F32 => {
                        StepBuffers { positions_in: buffers[0], positions_out: buffers[1], velocities: buffers[2] }
                    }
                    Precision::F64 => {
                        StepBuffers { positions_in: buffers[0], positions_out: buffers[0], velocities: buffers[1] }
                    }
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
            (Target::Host { buffers }, Engine::Cpu(engine)) => {
                let started = Instant::now();
                match &mut engine.double {
                    Some(double) => {
                        let from = double.current;
                        let [a, b] = &mut double.positions;
                        let (from_positions, to_positions) = if from == 0 { (&*a, b) } else { (&*b, a) };
                        cpu::step(
                            from_positions,
                            to_positions,
                            &mut double.velocities,
                            &mut double.accelerations,
                            &params,
                            &mut double.scratch,
                        );
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
                        cpu::step(
                            positions_in,
                            positions_out,
                            velocities,
                            &mut engine.accelerations,
                            &params,
                            &mut engine.scratch,
                        );
                    }
                }
                engine.forces_us = Some(started.elapsed().as_secs_f64() * 1e6);
                Ok(())
            }
            _ => Err(mismatch()),
        })?;
        self.current = 1 - self.current;
        self.step += 1;
        self.note_step();
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
        }
        while self.readouts.forces_us.len() > 60 {
            self.readouts.forces_us.pop_front();
        }
        self.poll_energy()?;
        if energy_due && matches!(self.engine, Engine::Cpu(_)) && u64::from(self.len()).pow(2) <= 1 << 26 {
            self.cpu_energy(gl)?;
        }
        Ok(times)
    }

    fn poll_gpu_times(&mut self) -> Result<Option<LateGpuTimes>> {
        self.pipeline.transfer().poll_gpu_times()
    }

    fn draw(&mut self, gl: &glow::Context, view: &View) -> Result<()> {
        gl::begin_scene(gl, view.origin, view.size, [0.0, 0.0, 0.01, 1.0], DrawState::Additive);
        self.program.bind(gl)?;
        self.program.set_mat4(gl, "view_projection", &self.camera.view_projection(view.aspect()));
        let pixels_per_unit = view.size[1] as f32 / (2.0 * (self.camera.fov_y * 0.5).tan());
        self.program.set_f32(gl, "pixels_per_unit", pixels_per_unit);
        self.program.set_f32(gl, "point_radius", self.settings.point_size);
        self.program.set_f32(gl, "speed_scale", self.speed_reference * self.settings.colour_scale);
        // Many bodies overlap: dim each so the dense parts saturate gently.
        let density = (16_384.0 / self.len().max(1) as f32).sqrt().min(1.0);
        self.program.set_f32(gl, "brightness", self.settings.brightness * density);
        self.vertex_arrays[self.current].draw_arrays(gl, glow::POINTS, self.len() as i32);
        gl::end_scene(gl);
        gl::check_error(gl, "drawing the bodies")
    }

    fn controls(&mut self, ui: &mut egui::Ui) {
        controls(self, ui);
    }

    fn camera_mut(&mut self) -> Option<&mut OrbitCamera> {
        Some(&mut self.camera)
    }

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
            Engine::Cpu(_) => None,
        }
    }

    fn synchronize(&mut self) -> Result<()> {
        self.pipeline.transfer().synchronize()
    }

    fn kernel_builds(&self) -> Vec<(SourceFile, Vec<String>)> {
        match &self.engine {
            Engine::Cuda { simulation, .. } => vec![(KERNEL, simulation.kernels().variant.options())],
            Engine::Cpu(_) => Vec::new(),
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

    fn finish(&mut self, gl: &glow::Context) -> Result<()> {
        self.collect_energy()?;
        if let Some(path) = self.settings.save.clone() {
            self.save(gl, &path)?;
            log::info!("saved {} bodies to {}", self.len(), path.display());
        }
        Ok(())
    }

    fn destroy(mut self: Box<Self>, gl: &glow::Context) {
        if let Err(error) = self.synchronize() {
            log::warn!("nbody: {error}");
        }
        self.program.destroy(gl);
        for array in &mut self.vertex_arrays {
            array.destroy(gl);
        }
        let NBody { positions: [p0, p1], velocities, .. } = *self;
        for buffer in [p0, p1, velocities] {
            buffer.destroy(gl);
        }
    }
}

/// The n-body section of the panel.
fn controls(demo: &mut NBody, ui: &mut egui::Ui) {
    let n = demo.len();
    // Readouts first: what the user came to see.
    let steps_per_second = demo.steps_per_second();
    ui.label(format!("{} bodies, step {}, {:.1} steps/s", n, demo.step, steps_per_second));
    if let Some(forces_us) = demo.readouts.median_forces_us() {
        let interactions = f64::from(n) * f64::from(n) / (forces_us * 1e-6);
        let gflops = interactions * FLOPS_PER_INTERACTION / 1e9;
        let peak = demo
            .peak_flops()
            .map(|peak| {
                format!(", {:.0} % of {} peak", 100.0 * gflops * 1e9 / peak, demo.settings.variant.precision.name())
            })
            .unwrap_or_default();
        ui.label(format!(
            "forces: {:.1} µs, {:.3e} interactions/s, {:.0} GFLOP/s{peak}",
            forces_us, interactions, gflops
        ));
    }
    if let Engine::Cuda { multi: Some(multi), .. } = &demo.engine {
        devices_readout(ui, multi, &demo.readouts);
    }
    match demo.energy() {
        (Some((step, kinetic, potential)), Some(initial)) => {
            let total = kinetic + potential;
            ui.label(format!("energy {total:.6} (K {kinetic:.4}, W {potential:.4}) at step {step}"));
            ui.label(format!("drift since reset: {:+.2e} (relative)", (total - initial) / initial.abs().max(1e-300)));
        }
        _ => {
            ui.label("energy: not computed yet");
        }
    }
    if ui.button("compute energy now").clicked() {
        demo.pending.push(Change::Energy);
    }

    ui.separator();
    ui.horizontal(|ui| {
        egui::ComboBox::new("nbody_preset", "preset").selected_text(demo.edit.preset.name()).show_ui(ui, |ui| {
            for preset in Preset::ALL {
                ui.selectable_value(&mut demo.edit.preset, preset, preset.name());
            }
        });
    });
    ui.horizontal(|ui| {
        ui.label("bodies");
        ui.add(egui::DragValue::new(&mut demo.edit.bodies).range(1..=MAX_BODIES).speed(64));
        ui.label("seed");
        ui.add(egui::DragValue::new(&mut demo.edit.seed));
    });
    if ui.button("reset").on_hover_text("regenerate the preset with this body count and seed").clicked() {
        demo.pending.push(Change::Reset);
    }

    ui.separator();
    let mut params = demo.edit.params;
    ui.horizontal(|ui| {
        ui.label("dt");
        ui.add(egui::DragValue::new(&mut params.dt).speed(0.0001).max_decimals(5));
        ui.label("softening");
        ui.add(egui::DragValue::new(&mut params.softening).speed(0.001).max_decimals(4));
    });
    ui.horizontal(|ui| {
        ui.label("damping");
        ui.add(egui::DragValue::new(&mut params.damping).speed(0.0001).max_decimals(5));
        ui.label("G");
        ui.add(egui::DragValue::new(&mut params.gravity).speed(0.01).max_decimals(3));
    });
    if params != demo.edit.params {
        demo.edit.params = params;
        match validate_params(&params) {
            Ok(()) => {
                demo.params = params;
                demo.message = None;
            }
            Err(error) => demo.message = Some(format!("{error} (still running with the previous values)")),
        }
    }

    ui.separator();
    ui.add(egui::Slider::new(&mut demo.settings.point_size, 0.001..=0.05).logarithmic(true).text("point size"));
    ui.add(egui::Slider::new(&mut demo.settings.brightness, 0.05..=20.0).logarithmic(true).text("brightness"));
    ui.add(
        egui::Slider::new(&mut demo.settings.colour_scale, 0.2..=10.0).logarithmic(true).text("colour: speed scale"),
    );

    ui.separator();
    variant_controls(demo, ui);

    ui.separator();
    ui.horizontal(|ui| {
        ui.label("state file");
        ui.text_edit_singleline(&mut demo.edit.path);
    });
    ui.horizontal(|ui| {
        if ui.button("save").clicked() {
            demo.pending.push(Change::Save(PathBuf::from(&demo.edit.path)));
        }
        if ui.button("load").clicked() {
            demo.pending.push(Change::Load(PathBuf::from(&demo.edit.path)));
        }
    });
    if let Some(message) = &demo.message {
        ui.colored_label(egui::Color32::LIGHT_RED, message);
    }
}

/// The split across devices: who computes what, how positions travel, and what each device's
/// GPU time went to (medians of the last second or so of steps).
fn devices_readout(ui: &mut egui::Ui, multi: &MultiSimulation, readouts: &Readouts) {
    let summary = multi.devices();
    let n = f64::from(multi.len());
    ui.label(egui::RichText::new(format!("Split across {} contexts", summary.len())).strong());
    ui.label(format!("exchange: {}", multi.routes_label()));
    let median = |index: usize, field: fn(&DeviceTimes) -> f64| {
        crate::stats::Percentiles::of(readouts.devices.iter().filter_map(|times| times.get(index)).map(field))
            .map(|p| p.median)
    };
    let mut slowest_span_us: Option<f64> = None;
    for (index, device) in summary.iter().enumerate() {
        let kernel = median(index, DeviceTimes::kernel_us);
        let forces = median(index, |t| t.own_forces_us + t.remote_forces_us);
        let wait = median(index, |t| t.wait_us);
        let exchange = median(index, |t| t.exchange_us);
        if let (Some(kernel), Some(wait)) = (kernel, wait) {
            slowest_span_us = Some(slowest_span_us.unwrap_or(0.0).max(kernel + wait));
        }
        let ms = |value: Option<f64>| value.map(|v| format!("{:.3}", v / 1e3)).unwrap_or_else(|| "–".to_owned());
        ui.label(format!(
            "device {} ({}, {} context): bodies {}..{}; kernels {} ms (forces {}), waiting {} ms, exchange {} ms",
            device.ordinal,
            device.name,
            device.context,
            device.first_body,
            device.first_body + device.bodies,
            ms(kernel),
            ms(forces),
            ms(wait),
            ms(exchange),
        ));
    }
    if let Some(step_us) = slowest_span_us {
        let interactions = n * n / (step_us * 1e-6);
        let efficiency = readouts
            .one_device_forces_us
            .map(|one| {
                format!(
                    "; scaling efficiency {:.0} % against the forces kernel on device {} alone ({:.3} ms, measured at reset)",
                    100.0 * one / (summary.len() as f64 * step_us),
                    summary.first().map(|d| d.ordinal).unwrap_or(0),
                    one / 1e3
                )
            })
            .unwrap_or_default();
        ui.label(format!(
            "step ≈ {:.3} ms (slowest device): {interactions:.3e} interactions/s{efficiency}",
            step_us / 1e3
        ));
    }
    let distinct = summary.iter().map(|d| d.ordinal).collect::<std::collections::BTreeSet<_>>().len();
    if distinct < summary.len() {
        ui.label("several contexts share one GPU: this checks the split and the exchange, it cannot speed anything up");
    }
}

fn variant_controls(demo: &mut NBody, ui: &mut egui::Ui) {
    let mut variant = demo.edit.variant;
    ui.label(egui::RichText::new("Forces kernel").strong());
    ui.horizontal(|ui| {
        ui.radio_value(&mut variant.precision, Precision::F32, "fp32");
        ui.radio_value(&mut variant.precision, Precision::F64, "fp64");
    });
    let cuda = matches!(demo.engine, Engine::Cuda { .. });
    if cuda {
        let choice = |ui: &mut egui::Ui, id: &str, label: &str, value: &mut u32, options: &[u32]| {
            egui::ComboBox::new(id, label).selected_text(value.to_string()).show_ui(ui, |ui| {
                for &option in options {
                    ui.selectable_value(value, option, option.to_string());
                }
            });
        };
        ui.horizontal(|ui| {
            choice(ui, "nbody_block", "block", &mut variant.block_size, &[64, 128, 256, 512, 1024]);
            choice(ui, "nbody_tile", "tile", &mut variant.tile_size, &[64, 128, 256, 512, 1024, 2048]);
        });
        ui.horizontal(|ui| {
            choice(ui, "nbody_unroll", "unroll", &mut variant.unroll, &[1, 2, 4, 8, 16, 32]);
            choice(ui, "nbody_per_thread", "bodies/thread", &mut variant.bodies_per_thread, &[1, 2, 4, 8]);
        });
        ui.horizontal(|ui| {
            let mut auto = demo.edit.slices_auto;
            ui.checkbox(&mut auto, "slices: fill the GPU");
            if !auto {
                ui.add(egui::DragValue::new(&mut demo.edit.slices).range(1..=64));
            }
            if auto != demo.edit.slices_auto {
                demo.edit.slices_auto = auto;
            }
            let wanted = (!demo.edit.slices_auto).then_some(demo.edit.slices);
            if ui.button("apply slices").clicked() && wanted != demo.settings.slices {
                demo.pending.push(Change::Slices(wanted));
            }
        });
    }
    if variant != demo.edit.variant {
        demo.edit.variant = variant;
        demo.pending.push(Change::Variant(variant));
    }
    if let Engine::Cuda { simulation, .. } = &demo.engine {
        let kernels = simulation.kernels();
        let attributes = kernels.forces_attributes();
        let device = simulation.context().device();
        let occupancy = kernels.forces_blocks_per_multiprocessor().ok().map(|blocks| {
            let warps = blocks * kernels.variant.block_size as i32 / device.warp_size.max(1);
            let most = device.max_threads_per_multiprocessor / device.warp_size.max(1);
            format!("{blocks} blocks/SM, {:.0} % occupancy", 100.0 * warps as f64 / most.max(1) as f64)
        });
        ui.label(format!(
            "{} registers/thread, {} B shared/block, {} slices{}",
            attributes.registers,
            kernels.variant.shared_bytes() + attributes.static_shared_bytes as u32,
            simulation.slices(),
            occupancy.map(|o| format!(", {o}")).unwrap_or_default()
        ));
        ui.label(if kernels.from_cache {
            "from the kernel cache".to_owned()
        } else {
            format!("compiled in {:.0} ms", kernels.compile_ms)
        });
    } else {
        ui.label("CPU backend: the same integrator on all cores (rayon, SIMD lanes)");
    }
}
