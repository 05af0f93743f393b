//! `nbody`: all-pairs gravity, integrated by CUDA straight in the vertex buffers it is drawn from
//! (GL buffers registered with CUDA, or Vulkan buffers CUDA imports). Positions and masses are
//! float4 in two buffers used ping-pong (on GL interop the one read this step mapped read-only,
//! the one written mapped write-discard), velocities in a third.

pub mod args;
pub mod bench;
mod buffers;
mod changes;
pub mod cpu;
pub mod cpu_rate;
mod energy;
mod engine;
pub mod force_check;
mod guard;
pub mod kernels;
mod live;
pub mod multi;
mod overlay;
mod panel;
pub mod presets;
mod readouts;
mod settings;
pub mod sim;
mod start;
pub mod state;
pub mod tree;
pub mod tune;

pub use self::settings::{
    DEFAULT_BODIES_CPU, DEFAULT_BODIES_CUDA, DEFAULT_FORCE_CHECK_EVERY, FLOPS_PER_INTERACTION, MAX_BODIES,
    NBodySettings, validate_bodies, validate_params,
};

use self::buffers::{every_buffer, make_buffers};
use self::changes::Change;
use self::cpu::Params;
use self::engine::{Engine, cast, make_engine};
use self::kernels::Variant;
use self::presets::{Bodies, Preset};
use self::readouts::Readouts;
use self::sim::StepBuffers;
use self::start::{choose_variant, initial_state};
use self::tree::Method;
use crate::camera::OrbitCamera;
use crate::demo_kit::{
    Demo, DemoEnv, DemoSpec, Drawn, LiveKernels, OccupancyCache, Pipeline, SharedParts, View, ViewControls,
};
use crate::scene::{Graphics, Scene, Sprites};
use crate::stats::StageTimes;
use crate::transfer::{Access, SharedBuffer, Target, TransferKind};
use crate::error::{Error, Result};

pub use self::kernels::KERNEL;

/// Every kernel file the demo compiles (for `doctor` and the NVRTC tests, through the registry):
/// all-pairs and the tree.
pub const KERNELS: &[crate::sources::SourceFile] = &[KERNEL, tree::gpu::KERNEL];

/// The demo with its default settings.
pub fn default_spec() -> DemoSpec {
    DemoSpec::new(NBodySettings::default())
}

/// One body's float4 as GL holds it.
pub type Float4 = [f32; 4];

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
    /// The live comparison of the forces with direct summation.
    force_checks: force_check::ForceChecks,
    /// The state to go back to when a step diverges (`guard`).
    last_good: Option<guard::Checkpoint>,
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
    /// Drawn in a window, whose CPU steps must stay short enough to answer input.
    window: bool,
    /// The tree's boxes, drawn over the bodies (`--draw-tree`).
    tree_boxes: Option<overlay::TreeBoxes>,
}

impl NBody {
    /// Creates the demo: bodies from the preset (or `settings.load`), kernels for the variant.
    pub fn new(env: &DemoEnv<'_>, settings: NBodySettings) -> Result<Self> {
        let graphics = env.graphics;
        let (mut settings, start_tuner, tuned) = choose_variant(env, settings);
        let mut pipeline = Pipeline::new(env.cuda.clone(), env.transfer)?;
        let (bodies, params, step) = initial_state(&mut settings, env.cuda.is_some(), env.window)?;
        let engine = make_engine(pipeline.cuda().map(|c| &**c), &settings, &bodies, env.window)?;
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
            force_checks: force_check::ForceChecks::default(),
            last_good: None,
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
            window: env.window,
            tree_boxes: None,
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

    /// a(x) of the current state, which the first kick of the next step needs.
    fn initialise_accelerations(&mut self, graphics: Graphics<'_>) -> Result<()> {
        let params = self.params;
        let (current, step) = (self.current, self.step);
        let energy_every = self.settings.energy_every;
        let energy_now = (energy_every > 0 || step == 0) && self.energy_by_itself();
        let method = self.settings.force_method();
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
                if energy_now {
                    simulation.request_energy(stream, &spans, &params, step)?;
                }
                Ok(())
            }
            (Target::Host { buffers }, Engine::Cpu(engine)) => {
                let tree = (method.method == Method::Tree).then_some(&mut engine.tree);
                match &mut engine.double {
                    Some(double) => {
                        let current = double.current;
                        let positions = &double.positions[current];
                        match tree {
                            Some(tree) => tree
                                .accelerations(positions, &params, method.theta, &mut double.accelerations)
                                .map(drop)?,
                            None => {
                                cpu::accelerations(positions, &params, &mut double.scratch, &mut double.accelerations)
                            }
                        }
                    }
                    None => {
                        let positions: &[[f32; 4]] = cast(&*buffers[0])?;
                        match tree {
                            Some(tree) => tree
                                .accelerations(positions, &params, method.theta, &mut engine.accelerations)
                                .map(drop)?,
                            None => {
                                cpu::accelerations(positions, &params, &mut engine.scratch, &mut engine.accelerations)
                            }
                        }
                    }
                }
                Ok(())
            }
            _ => Err(mismatch()),
        })?;
        if energy_now && matches!(self.engine, Engine::Cpu(_)) {
            self.cpu_energy(graphics)?;
        }
        Ok(())
    }

    /// One step with what comes with it (changes asked for, tuning, readouts, force checks);
    /// a [`Error::Diverged`] is turned back into the last good state by [`Demo::step`].
    fn advance(&mut self, graphics: Graphics<'_>, frame: u64) -> Result<StageTimes> {
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
        let energy_due = self.settings.energy_every > 0
            && (step + 1).is_multiple_of(u64::from(self.settings.energy_every))
            && self.energy_by_itself();
        self.prepare_tree_boxes(graphics)?;
        let levels = self.tree_boxes.as_ref().map(overlay::TreeBoxes::levels);
        let display_only = self.display_only();
        let method = self.settings.force_method();
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
        let mut buffers: Vec<(&mut SharedBuffer, Access)> = if display_only {
            if let (true, Some(velocities_next)) = (pipelined, velocities_next) {
                // The positions this step read are the ones the next step writes (as a copy).
                next_pair = [(positions_in, Access::Write), (velocities_next, Access::Write)];
                next = &mut next_pair;
            }
            vec![(positions_out, Access::Write), (velocities, Access::Write)]
        } else {
            vec![(positions_in, Access::Read), (positions_out, Access::Write), (velocities, Access::ReadWrite)]
        };
        // The tree's boxes go last (the overlay, when on).
        let boxes_slot = buffers.len();
        if let Some(boxes) = self.tree_boxes.as_mut() {
            buffers.push((boxes.buffer(), Access::Write));
        }
        let times =
            self.pipeline.transfer().run_pipelined(graphics, frame, &mut buffers, next, &mut |target| match (
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
                    match (levels, buffers.get(boxes_slot)) {
                        (Some(levels), Some(&vertices)) => simulation.write_tree_boxes(stream, vertices, levels),
                        _ => Ok(()),
                    }
                }
                (Target::Host { buffers }, Engine::Cpu(engine)) => {
                    engine.step(buffers, &params, method)?;
                    match (levels, buffers.get_mut(boxes_slot)) {
                        (Some(levels), Some(vertices)) => engine.write_tree_boxes(levels, vertices),
                        _ => Ok(()),
                    }
                }
                _ => Err(mismatch()),
            })?;
        if let Some(boxes) = self.tree_boxes.as_mut() {
            boxes.wrote();
        }
        self.current = 1 - self.current;
        self.step += 1;
        self.note_step();
        self.collect_readouts()?;
        self.poll_energy()?;
        if energy_due && matches!(self.engine, Engine::Cpu(_)) {
            self.cpu_energy(graphics)?;
        }
        self.advance_force_check(graphics)?;
        Ok(times)
    }
}

fn mismatch() -> Error {
    Error::InvalidInput("n-body: the compute backend and the transfer path disagree".to_owned())
}

fn camera_distance(preset: Preset) -> f32 {
    match preset {
        Preset::Collision | Preset::Merger => 5.0,
        Preset::Disk => 2.6,
        Preset::Plummer => 6.0,
        Preset::Cube | Preset::Expanding => 4.5,
        Preset::Shell => 3.5,
    }
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

    fn buffer_sets(&self) -> u32 {
        self.velocities.len() as u32
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
        if self.tree_boxes.is_some() {
            self.synchronize()?;
            self.drop_tree_boxes(graphics); // made again on the new path by the next step
        }
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
        match self.advance(graphics, frame) {
            Err(Error::Diverged(what)) => Err(self.restore_last_good(graphics, &what)),
            other => other,
        }
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
            boxes: self.tree_boxes.as_ref().and_then(|boxes| boxes.drawn()),
        })
    }

    fn panel(&mut self, ui: &mut egui::Ui) {
        panel::controls(self, ui);
    }

    fn stats(&self) -> Option<serde_json::Value> {
        let (energy, initial) = self.energy();
        let drift = match (energy, initial) {
            (Some((_, kinetic, potential)), Some(initial)) => {
                Some((kinetic + potential - initial) / initial.abs().max(1e-300)).filter(|d| d.is_finite())
            }
            _ => None,
        };
        let tree = self.settings.method == Method::Tree;
        Some(serde_json::json!({
            "bodies": self.len(),
            "step": self.step,
            "method": self.settings.method.name(),
            "theta": tree.then_some(self.settings.theta),
            "tree_interactions_per_body": self.readouts.tree_interactions_per_body.filter(|_| tree),
            "energy_drift": drift,
            "force_check": self.force_check().map(|check| check.to_json()),
        }))
    }

    fn view_controls(&mut self) -> Option<&mut dyn ViewControls> {
        Some(&mut self.camera)
    }

    fn live_kernels(&mut self) -> Option<&mut dyn LiveKernels> {
        Some(self)
    }

    fn finish(&mut self, graphics: Graphics<'_>) -> Result<()> {
        self.collect_energy()?;
        self.collect_force_check(true)?;
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
        let NBody { positions: [p0, p1], velocities, tree_boxes, .. } = *self;
        let boxes = tree_boxes.map(overlay::TreeBoxes::into_buffer);
        for buffer in [p0, p1].into_iter().chain(velocities).chain(boxes) {
            buffer.destroy(graphics);
        }
    }
}
