//! `wave`: the "hello interop" demo. A kernel writes the heights of a W×H grid of vertices each
//! frame, straight into the vertex buffer that is then drawn as points or a shaded mesh.

pub mod args;
pub mod cpu;
mod kernel;
mod panel;
mod settings;

use std::f64::consts::TAU;

use self::cpu::WaveFrame;
pub use self::settings::{DrawMode, WaveSettings};
use crate::camera::OrbitCamera;
use crate::cuda::module::CompiledModule;
use crate::cuda::{DeviceLimits, Function, LaunchConfig, Module};
use crate::demo_kit::{
    Demo, DemoEnv, DemoSpec, Drawn, KernelInfo, LiveKernels, OccupancyCache, Pipeline, SharedParts, View, ViewControls,
};
use crate::scene::{Graphics, Grid, Scene};
use crate::sources::SourceFile;
use crate::stats::StageTimes;
use crate::transfer::{Access, SharedBuffer, Target, TransferKind};
use crate::widgets::launch::LaunchEditor;
use crate::error::{Error, Result};
use crate::sources::source_file;

/// The kernel source.
pub const KERNEL: SourceFile = source_file!("kernels/wave.cu");

/// Every kernel file the demo compiles (for `doctor` and the NVRTC tests, through the registry).
pub const KERNELS: &[SourceFile] = &[KERNEL];

/// The demo with its default settings.
pub fn default_spec() -> DemoSpec {
    DemoSpec::new(WaveSettings::default())
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
    /// The vertex buffers used in turn (`pipeline_depth` of them); `slot` is the one drawn.
    positions: Vec<SharedBuffer>,
    slot: usize,
    camera: OrbitCamera,
    phase: f64,
    /// A grid size chosen in the panel, applied at the next step (which has the graphics context).
    pending_resize: Option<[u32; 2]>,
    /// A pipeline depth chosen in the panel, applied at the next step.
    pending_depth: Option<u32>,
    message: Option<String>,
    occupancy: OccupancyCache,
}

impl Wave {
    /// Creates the demo: compiles its kernel (CUDA) and makes its buffer on the requested path.
    pub fn new(env: &DemoEnv<'_>, settings: WaveSettings) -> Result<Self> {
        settings.validate()?;
        let graphics = env.graphics;
        let pipeline = Pipeline::new(env.cuda.clone(), env.transfer)?;
        let kernel = load_kernel(&pipeline)?;
        let launch = settings.launch_config();
        if let Some(kernel) = &kernel {
            launch.validate(&kernel.limits, kernel.function.attributes())?;
        }
        let mut pipeline = pipeline;
        let positions = make_ring(&mut pipeline, graphics, &settings)?;
        Ok(Self {
            launch_editor: LaunchEditor::new(launch, settings.grid.is_none()),
            settings,
            pipeline,
            kernel,
            launch,
            positions,
            slot: 0,
            camera: OrbitCamera::new(3.2),
            phase: 0.0,
            pending_resize: None,
            pending_depth: None,
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
    /// The buffer the last frame wrote and drew.
    pub fn read_positions(&mut self, graphics: Graphics<'_>) -> Result<Vec<[f32; 4]>> {
        self.release_prepared()?;
        self.pipeline.transfer().synchronize()?;
        let bytes = self.pipeline.transfer().read_buffer(graphics, &self.positions[self.slot])?;
        Ok(bytemuck::pod_collect_to_vec::<u8, [f32; 4]>(&bytes))
    }

    /// Refills every vertex buffer with NaN, so a test can tell written vertices from stale ones.
    pub fn poison_positions(&mut self, graphics: Graphics<'_>) -> Result<()> {
        let poison = vec![f32::NAN; self.settings.vertices() * 4];
        let ring =
            self.pipeline.transfer().create_buffers(graphics, bytemuck::cast_slice(&poison), self.positions.len())?;
        self.pipeline.transfer().synchronize()?;
        for old in std::mem::replace(&mut self.positions, ring) {
            old.destroy(graphics);
        }
        Ok(())
    }

    /// Hands buffers mapped ahead for the next frame back to GL (before GL reads or replaces them).
    fn release_prepared(&mut self) -> Result<()> {
        let SharedParts { pipeline, mut carried, .. } = self.shared();
        pipeline.transfer().release_prepared(&mut carried)
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
        self.reallocate(graphics, WaveSettings { width, height, ..self.settings.clone() })
    }

    /// Changes how many vertex buffers are used in turn (reallocating them). On failure the old
    /// ones stay.
    pub fn set_pipeline_depth(&mut self, graphics: Graphics<'_>, pipeline_depth: u32) -> Result<()> {
        self.reallocate(graphics, WaveSettings { pipeline_depth, ..self.settings.clone() })
    }

    /// Makes the buffers `candidate` asks for and frees the old ones.
    fn reallocate(&mut self, graphics: Graphics<'_>, candidate: WaveSettings) -> Result<()> {
        candidate.validate()?;
        let launch = if self.launch_editor.auto_grid() {
            LaunchConfig { grid: candidate.launch_config().grid, ..self.launch }
        } else {
            self.launch
        };
        let ring = make_ring(&mut self.pipeline, graphics, &candidate)?;
        self.pipeline.transfer().synchronize()?;
        for old in std::mem::replace(&mut self.positions, ring) {
            old.destroy(graphics);
        }
        self.slot = 0;
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

/// `settings.pipeline_depth` vertex buffers of the grid, on the pipeline's path.
fn make_ring(pipeline: &mut Pipeline, graphics: Graphics<'_>, settings: &WaveSettings) -> Result<Vec<SharedBuffer>> {
    pipeline.transfer().create_buffers(graphics, &initial_positions(settings), settings.pipeline_depth as usize)
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

    fn buffer_sets(&self) -> u32 {
        self.positions.len() as u32
    }

    fn shared(&mut self) -> SharedParts<'_> {
        SharedParts {
            pipeline: &mut self.pipeline,
            carried: self.positions.iter_mut().collect(),
            drawn: Drawn::Carried(self.slot),
        }
    }

    fn path_changed(&mut self, _graphics: Graphics<'_>, _previous: TransferKind) -> Result<()> {
        let kind = self.pipeline.kind();
        // The CPU path runs no kernel: the wave lets it go, and loads it again on the way back to
        // CUDA, from the kernel folder, so an edit made meanwhile is what runs there.
        if !kind.uses_cuda() {
            self.kernel = None;
            self.occupancy = OccupancyCache::default();
        }
        if self.kernel.is_none() && kind.uses_cuda() {
            let launch = self.launch;
            let kernel = load_kernel(&self.pipeline).and_then(|kernel| {
                if let Some(kernel) = &kernel {
                    launch.validate(&kernel.limits, kernel.function.attributes())?;
                }
                Ok(kernel)
            })?;
            self.kernel = kernel;
        }
        Ok(())
    }

    fn step(&mut self, graphics: Graphics<'_>, frame: u64, dt: f32) -> Result<StageTimes> {
        if let Some([width, height]) = self.pending_resize.take() {
            // A size that can't be had leaves the old grid running; the panel says why.
            self.message = self.resize(graphics, width, height).err().map(|e| e.to_string());
        }
        if let Some(depth) = self.pending_depth.take() {
            self.message = self.set_pipeline_depth(graphics, depth).err().map(|e| e.to_string());
        }
        let wave_frame = self.frame_after(dt);
        self.phase = f64::from(wave_frame.phase);
        let launch = self.launch;
        let kernel = &mut self.kernel;
        let depth = self.positions.len();
        self.slot = (self.slot + 1) % depth;
        // From depth 2 the next frame's buffer is mapped during this frame (GL interop).
        let (this, next) = crate::transfer::this_and_next(&mut self.positions, self.slot);
        let mut buffers = [(this, Access::Write)];
        let mut next_one;
        let next: &mut [(&mut SharedBuffer, Access)] = match next {
            Some(buffer) => {
                next_one = [(buffer, Access::Write)];
                &mut next_one
            }
            None => &mut [],
        };
        self.pipeline.transfer().run_pipelined(graphics, frame, &mut buffers, next, &mut |target| match target {
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
            vertices: &self.positions[self.slot],
            size: [self.settings.width, self.settings.height],
            view_projection: self.camera.view_projection(view.aspect()),
            mesh: self.settings.mode == DrawMode::Mesh,
            point_size: self.settings.point_size,
            amplitude: self.settings.amplitude,
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

    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }

    fn destroy(mut self: Box<Self>, graphics: Graphics<'_>) {
        if let Err(error) = self.synchronize() {
            log::warn!("wave: {error}");
        }
        let Wave { positions, .. } = *self;
        for buffer in positions {
            buffer.destroy(graphics);
        }
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

/// The wave kernel, compiled and loaded, when the pipeline's path runs on CUDA.
fn load_kernel(pipeline: &Pipeline) -> Result<Option<WaveKernel>> {
    let Some(cuda) = pipeline.cuda() else { return Ok(None) };
    let compiled: CompiledModule = cuda.compiler.compile(&KERNEL, &[])?;
    if !compiled.log.is_empty() {
        log::info!("NVRTC ({}): {}", compiled.origin, compiled.log);
    }
    let module = Module::load(&cuda.context, &compiled)?;
    Ok(Some(WaveKernel {
        function: module.function("wave")?,
        origin: compiled.origin,
        limits: DeviceLimits::from(cuda.context.device()),
    }))
}
