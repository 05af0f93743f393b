//! `wave`: the "hello interop" demo. A kernel writes the heights of a W×H grid of vertices each
//! frame, straight into the vertex buffer that is then drawn as points or a shaded mesh.

pub mod args;
pub mod cpu;
mod kernel;

use std::f64::consts::TAU;

use self::cpu::WaveFrame;
use crate::camera::OrbitCamera;
use crate::cuda::module::CompiledModule;
use crate::cuda::{DeviceLimits, Function, LaunchConfig, Module};
use crate::demo::{
    Demo, DemoEnv, DemoSpec, KernelInfo, LiveKernels, OccupancyCache, Pipeline, Settings, View, ViewControls,
};
use crate::render::{Graphics, Grid, Scene};
use crate::sources::SourceFile;
use crate::stats::StageTimes;
use crate::transfer::{Access, SharedBuffer, Target, TransferKind};
use crate::widgets::launch::LaunchEditor;
use crate::{Error, Result, source_file};

/// The kernel source.
pub const KERNEL: SourceFile = source_file!("kernels/wave.cu");
/// Largest grid side, and most vertices (256 MiB of float4).
const MAX_SIDE: u32 = 8192;
const MAX_VERTICES: u64 = 1 << 24;

/// How the grid is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DrawMode {
    /// One point per vertex.
    Points,
    /// Triangles between neighbouring vertices, lit.
    Mesh,
}

/// Everything that defines a wave frame; each is also a command-line flag.
#[derive(Debug, Clone, PartialEq)]
pub struct WaveSettings {
    /// Vertices per row.
    pub width: u32,
    /// Rows.
    pub height: u32,
    /// Spatial frequency.
    pub frequency: f32,
    /// Height of the crests.
    pub amplitude: f32,
    /// Phase speed, radians per second.
    pub speed: f32,
    /// Threads per block in x and y.
    pub block: [u32; 2],
    /// Blocks in x and y; `None` covers the grid exactly.
    pub grid: Option<[u32; 2]>,
    /// Points or mesh.
    pub mode: DrawMode,
    /// Point size in pixels (points mode).
    pub point_size: f32,
}

impl Default for WaveSettings {
    fn default() -> Self {
        Self {
            width: 256,
            height: 256,
            frequency: 4.0,
            amplitude: 0.3,
            speed: 1.0,
            block: [16, 16],
            grid: None,
            mode: DrawMode::Mesh,
            point_size: 2.0,
        }
    }
}

impl WaveSettings {
    /// Checks sizes and parameters; the message says which value is wrong and what is allowed.
    pub fn validate(&self) -> Result<()> {
        if self.width == 0 || self.height == 0 || self.width > MAX_SIDE || self.height > MAX_SIDE {
            return Err(Error::InvalidInput(format!(
                "wave grid {}x{}: each side must be 1..={MAX_SIDE}",
                self.width, self.height
            )));
        }
        if u64::from(self.width) * u64::from(self.height) > MAX_VERTICES {
            return Err(Error::InvalidInput(format!(
                "wave grid {}x{} has more than {MAX_VERTICES} vertices",
                self.width, self.height
            )));
        }
        for (name, value) in [("frequency", self.frequency), ("amplitude", self.amplitude), ("speed", self.speed)] {
            if !value.is_finite() || value.abs() > 1e4 {
                return Err(Error::InvalidInput(format!("wave {name} {value} must be a finite number within ±10000")));
            }
        }
        if !(self.point_size.is_finite() && (0.5..=64.0).contains(&self.point_size)) {
            return Err(Error::InvalidInput(format!("point size {} must be 0.5..=64", self.point_size)));
        }
        Ok(())
    }

    /// The launch configuration these settings ask for.
    pub fn launch_config(&self) -> LaunchConfig {
        let mut config = LaunchConfig::for_grid_2d(self.width, self.height, self.block);
        if let Some(grid) = self.grid {
            config.grid = [grid[0], grid[1], 1];
        }
        config
    }

    fn vertices(&self) -> usize {
        self.width as usize * self.height as usize
    }
}

impl Settings for WaveSettings {
    const NAME: &'static str = "wave";

    fn create(&self, env: &DemoEnv<'_>) -> Result<Box<dyn Demo>> {
        Ok(Box::new(Wave::new(env, self.clone())?))
    }
}

/// The compiled kernel and what launching it needs.
struct WaveKernel {
    function: Function,
    origin: String,
    limits: DeviceLimits,
}

/// The wave demo.
pub struct Wave {
    settings: WaveSettings,
    pipeline: Pipeline,
    kernel: Option<WaveKernel>,
    launch: LaunchConfig,
    launch_editor: LaunchEditor,
    positions: SharedBuffer,
    camera: OrbitCamera,
    phase: f64,
    /// A grid size chosen in the panel, applied at the next step (which has the graphics context).
    pending_resize: Option<[u32; 2]>,
    message: Option<String>,
    occupancy: OccupancyCache,
}

impl Wave {
    /// Creates the demo: compiles its kernel (CUDA) and makes its buffer on the requested path.
    pub fn new(env: &DemoEnv<'_>, settings: WaveSettings) -> Result<Self> {
        settings.validate()?;
        let graphics = env.graphics;
        let pipeline = Pipeline::new(env.cuda.clone(), env.transfer)?;
        let kernel = match pipeline.cuda() {
            Some(cuda) => {
                let compiled: CompiledModule = cuda.compiler.compile(&KERNEL, &[])?;
                if !compiled.log.is_empty() {
                    log::info!("NVRTC ({}): {}", compiled.origin, compiled.log);
                }
                let module = Module::load(&cuda.context, &compiled)?;
                Some(WaveKernel {
                    function: module.function("wave")?,
                    origin: compiled.origin,
                    limits: DeviceLimits::from(cuda.context.device()),
                })
            }
            None => None,
        };
        let launch = settings.launch_config();
        if let Some(kernel) = &kernel {
            launch.validate(&kernel.limits, kernel.function.attributes())?;
        }
        let mut pipeline = pipeline;
        let positions = pipeline.transfer().create_buffer(graphics, &initial_positions(&settings))?;
        Ok(Self {
            launch_editor: LaunchEditor::new(launch, settings.grid.is_none()),
            settings,
            pipeline,
            kernel,
            launch,
            positions,
            camera: OrbitCamera::new(3.2),
            phase: 0.0,
            pending_resize: None,
            message: None,
            occupancy: OccupancyCache::default(),
        })
    }

    /// The settings in use.
    pub fn settings(&self) -> &WaveSettings {
        &self.settings
    }

    /// The launch configuration in use.
    pub fn launch_config(&self) -> LaunchConfig {
        self.launch
    }

    /// Reads the vertex buffer back (for tests and screenshots of data).
    pub fn read_positions(&mut self, graphics: Graphics<'_>) -> Result<Vec<[f32; 4]>> {
        self.pipeline.transfer().synchronize()?;
        let bytes = self.pipeline.transfer().read_buffer(graphics, &self.positions)?;
        Ok(bytemuck::pod_collect_to_vec::<u8, [f32; 4]>(&bytes))
    }

    /// Refills the vertex buffer with NaN, so a test can tell written vertices from stale ones.
    pub fn poison_positions(&mut self, graphics: Graphics<'_>) -> Result<()> {
        let poison = vec![f32::NAN; self.settings.vertices() * 4];
        let positions = self.pipeline.transfer().create_buffer(graphics, bytemuck::cast_slice(&poison))?;
        self.pipeline.transfer().synchronize()?;
        std::mem::replace(&mut self.positions, positions).destroy(graphics);
        Ok(())
    }

    /// Sets the phase directly (tests use it to compare with the reference at a known phase).
    pub fn set_phase(&mut self, phase: f64) {
        self.phase = phase.rem_euclid(TAU);
    }

    /// The frame parameters the next step would use after advancing by `dt` seconds.
    fn frame_after(&self, dt: f32) -> WaveFrame {
        WaveFrame {
            width: self.settings.width,
            height: self.settings.height,
            phase: (self.phase + f64::from(dt) * f64::from(self.settings.speed)).rem_euclid(TAU) as f32,
            frequency: self.settings.frequency,
            amplitude: self.settings.amplitude,
        }
    }

    /// Changes the number of vertices: allocates new buffers (registered anew on the interop path)
    /// and frees the old ones. On failure the old grid stays.
    pub fn set_vertices(&mut self, graphics: Graphics<'_>, width: u32, height: u32) -> Result<()> {
        self.resize(graphics, width, height)
    }

    /// Re-allocates the grid (and, on the interop path, re-registers the new buffer).
    fn resize(&mut self, graphics: Graphics<'_>, width: u32, height: u32) -> Result<()> {
        let candidate = WaveSettings { width, height, ..self.settings.clone() };
        candidate.validate()?;
        let launch = if self.launch_editor.auto_grid() {
            LaunchConfig { grid: candidate.launch_config().grid, ..self.launch }
        } else {
            self.launch
        };
        let positions = self.pipeline.transfer().create_buffer(graphics, &initial_positions(&candidate))?;
        self.pipeline.transfer().synchronize()?;
        std::mem::replace(&mut self.positions, positions).destroy(graphics);
        self.settings = candidate;
        self.launch = launch;
        self.launch_editor.set(launch);
        Ok(())
    }
}

/// Zeroed vertices with w = 1, so a frame that writes nothing still draws a flat, visible grid.
fn initial_positions(settings: &WaveSettings) -> Vec<u8> {
    let vertices = vec![[0.0f32, 0.0, 0.0, 1.0]; settings.vertices()];
    bytemuck::cast_slice(&vertices).to_vec()
}

impl Demo for Wave {
    fn name(&self) -> &'static str {
        "wave"
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
        self.pipeline.transfer().use_while_mapped(&mut self.positions)
    }

    fn set_transfer(&mut self, graphics: Graphics<'_>, kind: TransferKind) -> Result<()> {
        self.pipeline.switch(graphics, kind, &mut [&mut self.positions])
    }

    fn step(&mut self, graphics: Graphics<'_>, frame: u64, dt: f32) -> Result<StageTimes> {
        if let Some([width, height]) = self.pending_resize.take() {
            // A size that can't be had leaves the old grid running; the panel says why.
            self.message = self.resize(graphics, width, height).err().map(|e| e.to_string());
        }
        let wave_frame = self.frame_after(dt);
        self.phase = f64::from(wave_frame.phase);
        let launch = self.launch;
        let kernel = &mut self.kernel;
        let mut buffers = [(&mut self.positions, Access::Write)];
        self.pipeline.transfer().run(graphics, frame, &mut buffers, &mut |target| match target {
            Target::Device { buffers, stream } => {
                let kernel = kernel.as_mut().ok_or_else(|| Error::Unavailable("wave kernel not loaded".to_owned()))?;
                kernel::launch(&mut kernel.function, stream, &kernel.limits, &launch, buffers[0], &wave_frame)
            }
            Target::Host { buffers } => {
                let positions: &mut [[f32; 4]] = bytemuck::try_cast_slice_mut(&mut *buffers[0])
                    .map_err(|e| Error::InvalidInput(format!("wave vertex buffer: {e}")))?;
                cpu::fill(positions, &wave_frame);
                Ok(())
            }
        })
    }

    fn scene(&mut self, view: &View) -> Scene<'_> {
        Scene::Grid(Grid {
            vertices: &self.positions,
            size: [self.settings.width, self.settings.height],
            view_projection: self.camera.view_projection(view.aspect()),
            mesh: self.settings.mode == DrawMode::Mesh,
            point_size: self.settings.point_size,
            amplitude: self.settings.amplitude,
        })
    }

    fn panel(&mut self, ui: &mut egui::Ui) {
        let gl_size = (self.settings.width, self.settings.height);
        let mut size = [gl_size.0, gl_size.1];
        ui.horizontal(|ui| {
            ui.label("Vertices");
            ui.add(egui::DragValue::new(&mut size[0]).range(1..=MAX_SIDE).speed(4));
            ui.label("×");
            ui.add(egui::DragValue::new(&mut size[1]).range(1..=MAX_SIDE).speed(4));
        });
        if size != [gl_size.0, gl_size.1] {
            self.pending_resize = Some(size);
        }
        ui.add(egui::Slider::new(&mut self.settings.frequency, 0.0..=20.0).text("frequency"));
        ui.add(egui::Slider::new(&mut self.settings.amplitude, 0.0..=1.0).text("amplitude"));
        ui.add(egui::Slider::new(&mut self.settings.speed, -5.0..=5.0).text("speed (rad/s)"));
        ui.horizontal(|ui| {
            ui.radio_value(&mut self.settings.mode, DrawMode::Mesh, "mesh");
            ui.radio_value(&mut self.settings.mode, DrawMode::Points, "points");
        });
        if self.settings.mode == DrawMode::Points {
            ui.add(egui::Slider::new(&mut self.settings.point_size, 1.0..=16.0).text("point size"));
        }
        ui.separator();
        match &self.kernel {
            Some(kernel) => {
                let problem = [self.settings.width, self.settings.height];
                if let Some(config) = self.launch_editor.show(ui, &kernel.limits, kernel.function.attributes(), problem)
                {
                    self.launch = config;
                    self.settings.block = [config.block[0], config.block[1]];
                    self.settings.grid = (!self.launch_editor.auto_grid()).then_some([config.grid[0], config.grid[1]]);
                }
                let threads =
                    self.launch.block_threads() * u64::from(self.launch.grid[0]) * u64::from(self.launch.grid[1]);
                if threads < self.settings.vertices() as u64 {
                    ui.colored_label(
                        egui::Color32::YELLOW,
                        format!(
                            "{threads} threads for {} vertices: the grid does not cover every vertex, so part of \
                             the surface keeps its old values",
                            self.settings.vertices()
                        ),
                    );
                }
            }
            None => {
                ui.label(format!(
                    "CPU backend: the loop runs on {} threads (rayon); launch parameters apply to CUDA only.",
                    rayon::current_num_threads()
                ));
            }
        }
        if let Some(message) = &self.message {
            ui.colored_label(egui::Color32::LIGHT_RED, message);
        }
    }

    fn view_controls(&mut self) -> Option<&mut dyn ViewControls> {
        Some(&mut self.camera)
    }

    fn live_kernels(&mut self) -> Option<&mut dyn LiveKernels> {
        Some(self)
    }

    fn destroy(mut self: Box<Self>, graphics: Graphics<'_>) {
        if let Err(error) = self.synchronize() {
            log::warn!("wave: {error}");
        }
        let Wave { positions, .. } = *self;
        positions.destroy(graphics);
    }
}

impl Wave {
    /// Waits for the demo's GPU work.
    pub fn synchronize(&mut self) -> Result<()> {
        self.pipeline.transfer().synchronize()
    }
}

impl LiveKernels for Wave {
    fn kernel_info(&self) -> Option<KernelInfo> {
        self.kernel.as_ref().map(|kernel| KernelInfo {
            name: kernel.function.name().to_owned(),
            origin: kernel.origin.clone(),
            launch: self.launch,
            attributes: *kernel.function.attributes(),
            occupancy: self.occupancy.get(&kernel.function, &self.launch),
        })
    }

    fn kernel_builds(&self) -> Vec<(SourceFile, Vec<String>)> {
        if self.kernel.is_some() { vec![(KERNEL, Vec::new())] } else { Vec::new() }
    }

    fn swap_kernels(&mut self, _file: &str, _options: &[String], compiled: &CompiledModule) -> Result<()> {
        let Some(cuda) = self.pipeline.cuda() else {
            return Err(Error::Unavailable("the wave runs on the CPU: no kernel to replace".to_owned()));
        };
        let module = Module::load(&cuda.context, compiled)?;
        let function = module.function("wave")?;
        let limits = DeviceLimits::from(cuda.context.device());
        self.launch.validate(&limits, function.attributes())?;
        self.synchronize()?;
        self.kernel = Some(WaveKernel { function, origin: compiled.origin.clone(), limits });
        self.occupancy = OccupancyCache::default();
        Ok(())
    }
}
