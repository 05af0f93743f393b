//! `blur`: Gaussian blur written by CUDA into GL, two ways. Through a pixel-buffer object (a GL
//! buffer registered with `cuGraphicsGLRegisterBuffer`, then `glTexSubImage2D` into the texture
//! shown — cuda-samples' way), or into the texture itself (registered with
//! `cuGraphicsGLRegisterImage` and written through a surface object: no copy at all).

pub mod args;
pub mod bench;
pub mod cpu;
pub mod image;
pub mod kernels;
mod panel;
mod recursive;
mod settings;

pub use self::settings::{BlurSettings, MAX_NAIVE_RADIUS, MAX_RADIUS, MIN_BOX_SIGMA, Route, SIGMA_RANGE};

use std::path::{Path, PathBuf};
use std::time::Instant;

use self::image::SourceImage;
use self::kernels::{BlurKernels, Filter, Output};
use crate::cuda::module::CompiledModule;
use crate::cuda::timing::EventRing;
use crate::cuda::{DeviceBuffer, DeviceSpan, Stream};
use crate::demo::{
    Demo, DemoEnv, DemoSpec, Drag, KernelInfo, LiveKernels, OccupancyCache, OpensFiles, Pipeline, View, ViewControls,
};
use crate::gl;
use crate::pixel::PixelFormat;
use crate::sources::SourceFile;
use crate::stats::{Percentiles, Stage, StageTimes};
use crate::transfer::{Access, SharedBuffer, SharedImage, Target, TransferKind};
use crate::{Error, Result, source_file};

/// The kernel source.
pub const KERNEL: SourceFile = source_file!("kernels/blur.cu");
const VERTEX_SHADER: SourceFile = source_file!("shaders/blur_view.vert");
const FRAGMENT_SHADER: SourceFile = source_file!("shaders/blur_view.frag");

/// The compute side.
enum Engine {
    Cuda {
        kernels: Box<BlurKernels>,
        input: DeviceBuffer,
        scratch: DeviceBuffer,
        weights: DeviceBuffer,
        timer: EventRing,
    },
    Cpu {
        input: cpu::Image<f32>,
    },
}

/// Where the blurred image lands.
enum Target2d {
    Buffer { pbo: SharedBuffer, texture: gl::Texture },
    Image(SharedImage),
}

impl Target2d {
    fn texture(&self) -> &gl::Texture {
        match self {
            Target2d::Buffer { texture, .. } => texture,
            Target2d::Image(image) => image.texture(),
        }
    }

    fn destroy(self, gl: &glow::Context) {
        match self {
            Target2d::Buffer { pbo, mut texture } => {
                pbo.destroy(gl);
                texture.destroy(gl);
            }
            Target2d::Image(image) => image.destroy(gl),
        }
    }
}

/// A change asked for in the panel or by a dropped file, applied at the next step.
#[derive(Debug, Clone, PartialEq)]
enum Change {
    Settings(Box<BlurSettings>),
    Open(PathBuf),
    Save(PathBuf),
}

/// The blur demo.
pub struct Blur {
    settings: BlurSettings,
    pipeline: Pipeline,
    source: SourceImage,
    engine: Engine,
    target: Target2d,
    original: gl::Texture,
    program: gl::Program,
    vertex_array: gl::VertexArray,
    /// Screen pixels per image pixel; `None` fits the image to the view.
    zoom: Option<f32>,
    pan: glam::Vec2,
    last_view: View,
    pending: Vec<Change>,
    edit: BlurSettings,
    path: String,
    pass_us: Vec<[f64; 2]>,
    message: Option<String>,
    occupancy: OccupancyCache,
}

impl Blur {
    /// Creates the demo: the image (or test pattern), kernels, device buffers and textures.
    pub fn new(env: &DemoEnv<'_>, settings: BlurSettings) -> Result<Self> {
        settings.validate()?;
        let gl = env.gl;
        let source = match &settings.image {
            Some(path) => image::load(path)?,
            None => image::test_pattern(1280, 800),
        };
        let pipeline = Pipeline::new(env.cuda.clone(), env.transfer)?;
        let mut pipeline = pipeline;
        let engine = make_engine(&pipeline, &settings, &source)?;
        if let Engine::Cuda { kernels, .. } = &engine {
            kernels.validate(&settings.job([source.width, source.height]))?;
        }
        let original =
            gl::Texture::new(gl, [source.width, source.height], settings.format, Some(source.bytes(settings.format)))?;
        let target = match make_target(&mut pipeline, gl, &settings, &source) {
            Ok(target) => target,
            Err(error) => {
                let mut original = original;
                original.destroy(gl);
                return Err(error);
            }
        };
        let shaders = (|| -> Result<_> {
            let (vertex_source, _) = VERTEX_SHADER.read(env.shaders_dir.as_deref())?;
            let (fragment_source, _) = FRAGMENT_SHADER.read(env.shaders_dir.as_deref())?;
            let program = gl::Program::new(gl, "blur view", &vertex_source, &fragment_source)?;
            Ok((program, gl::VertexArray::new(gl)))
        })();
        let (program, vertex_array) = match shaders {
            Ok((program, Ok(vertex_array))) => (program, vertex_array),
            Ok((mut program, Err(error))) => {
                program.destroy(gl);
                let mut original = original;
                original.destroy(gl);
                target.destroy(gl);
                return Err(error);
            }
            Err(error) => {
                let mut original = original;
                original.destroy(gl);
                target.destroy(gl);
                return Err(error);
            }
        };
        let path = settings.image.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
        Ok(Self {
            edit: settings.clone(),
            settings,
            pipeline,
            source,
            engine,
            target,
            original,
            program,
            vertex_array,
            zoom: None,
            pan: glam::Vec2::ZERO,
            last_view: View { origin: [0, 0], size: [1, 1] },
            pending: Vec::new(),
            path,
            pass_us: Vec::new(),
            message: None,
            occupancy: OccupancyCache::default(),
        })
    }

    /// The settings in use.
    pub fn settings(&self) -> &BlurSettings {
        &self.settings
    }

    /// Image size in pixels.
    pub fn size(&self) -> [u32; 2] {
        [self.source.width, self.source.height]
    }

    /// The route in use (the texture route needs interop, so it can differ from the settings).
    pub fn route(&self) -> Route {
        match self.target {
            Target2d::Image(_) => Route::Texture,
            Target2d::Buffer { .. } => Route::Pbo,
        }
    }

    /// The blurred image as the texture shows it (bytes of the format, top row first).
    pub fn read_output(&mut self, gl: &glow::Context) -> Result<Vec<u8>> {
        self.pipeline.transfer().synchronize()?;
        match &self.target {
            Target2d::Buffer { pbo, .. } => self.pipeline.transfer().read_buffer(gl, pbo),
            Target2d::Image(image) => image.texture().read(gl),
        }
    }

    /// Overwrites the output (pixel buffer or texture) with `byte` in every byte, so a test can
    /// tell written pixels from stale ones.
    pub fn poison_output(&mut self, gl: &glow::Context, byte: u8) -> Result<()> {
        self.pipeline.transfer().synchronize()?;
        let poison =
            vec![
                byte;
                self.source.width as usize * self.source.height as usize * self.settings.format.bytes_per_pixel()
            ];
        match &mut self.target {
            Target2d::Image(image) => image.texture().upload(gl, &poison),
            Target2d::Buffer { pbo, texture } => {
                texture.upload(gl, &poison)?;
                let fresh = self.pipeline.transfer().create_buffer(gl, &poison)?;
                std::mem::replace(pbo, fresh).destroy(gl);
                Ok(())
            }
        }
    }

    /// Queues new settings (validated now, applied at the next step).
    pub fn change(&mut self, settings: BlurSettings) -> Result<()> {
        settings.validate()?;
        self.pending.push(Change::Settings(Box::new(settings)));
        Ok(())
    }

    /// GPU time of the two passes of recent frames, µs (CUDA only).
    pub fn pass_times(&self) -> Option<(Percentiles, Percentiles)> {
        Some((Percentiles::of(self.pass_us.iter().map(|p| p[0]))?, Percentiles::of(self.pass_us.iter().map(|p| p[1]))?))
    }

    fn apply(&mut self, gl: &glow::Context, change: Change) -> Result<()> {
        match change {
            Change::Settings(settings) => self.rebuild(gl, *settings, None),
            Change::Open(path) => {
                let source = image::load(&path)?;
                let settings = BlurSettings { image: Some(path), ..self.settings.clone() };
                self.rebuild(gl, settings, Some(source))?;
                self.zoom = None;
                self.pan = glam::Vec2::ZERO;
                Ok(())
            }
            Change::Save(path) => {
                let bytes = self.read_output(gl)?;
                image::save_png(&path, self.size(), self.settings.format, &bytes)?;
                self.message = Some(format!("saved {}", path.display()));
                Ok(())
            }
        }
    }

    /// Rebuilds what the new settings need; on failure everything stays as it was.
    fn rebuild(&mut self, gl: &glow::Context, settings: BlurSettings, source: Option<SourceImage>) -> Result<()> {
        settings.validate()?;
        let new_image = source.is_some();
        let source_ref = source.as_ref().unwrap_or(&self.source);
        let engine_changes = new_image
            || settings.format != self.settings.format
            || settings.pixels_per_thread != self.settings.pixels_per_thread
            || settings.sigma != self.settings.sigma
            || settings.radius() != self.settings.radius();
        let target_changes =
            new_image || settings.format != self.settings.format || settings.route != self.settings.route;
        self.pipeline.transfer().synchronize()?;
        let engine = if engine_changes { Some(make_engine(&self.pipeline, &settings, source_ref)?) } else { None };
        if let (Engine::Cuda { kernels, .. }, None) = (&self.engine, &engine) {
            kernels.validate(&settings.job([source_ref.width, source_ref.height]))?;
        }
        if let Some(Engine::Cuda { kernels, .. }) = &engine {
            kernels.validate(&settings.job([source_ref.width, source_ref.height]))?;
        }
        let target =
            if target_changes { Some(make_target(&mut self.pipeline, gl, &settings, source_ref)?) } else { None };
        let original = if new_image || settings.format != self.settings.format {
            match gl::Texture::new(
                gl,
                [source_ref.width, source_ref.height],
                settings.format,
                Some(source_ref.bytes(settings.format)),
            ) {
                Ok(texture) => Some(texture),
                Err(error) => {
                    if let Some(target) = target {
                        target.destroy(gl);
                    }
                    return Err(error);
                }
            }
        } else {
            None
        };
        if let Some(engine) = engine {
            self.engine = engine;
            self.pass_us.clear();
        }
        if let Some(target) = target {
            std::mem::replace(&mut self.target, target).destroy(gl);
        }
        if let Some(original) = original {
            std::mem::replace(&mut self.original, original).destroy(gl);
        }
        if let Some(source) = source {
            self.source = source;
        }
        self.settings = settings;
        Ok(())
    }

    fn fitted_zoom(&self, view: &View) -> f32 {
        let [w, h] = self.size();
        (view.size[0] as f32 / w as f32).min(view.size[1] as f32 / h as f32)
    }
}

/// Kernels and device buffers for CUDA (source uploaded, weights computed), or the float image
/// for the CPU.
fn make_engine(pipeline: &Pipeline, settings: &BlurSettings, source: &SourceImage) -> Result<Engine> {
    let Some(cuda) = pipeline.cuda() else {
        return Ok(Engine::Cpu { input: source.to_float_image(settings.format) });
    };
    let kernels = BlurKernels::load(cuda, settings.format, settings.pixels_per_thread)?;
    let pixels = source.width as usize * source.height as usize;
    let bytes = source.bytes(settings.format);
    let weights: Vec<f32> =
        cpu::gaussian_weights(settings.sigma, settings.radius() as usize).iter().map(|&w| w as f32).collect();
    let (free, _) = cuda.context.memory_info()?;
    let needed = bytes.len() + pixels * 16 + weights.len() * 4 + 3 * bytes.len();
    if needed > free {
        return Err(Error::InvalidInput(format!(
            "a {}x{} {} image needs {} MiB of device memory and {} MiB are free",
            source.width,
            source.height,
            settings.format.name(),
            needed >> 20,
            free >> 20
        )));
    }
    let stream = Stream::new(&cuda.context)?;
    let mut input = DeviceBuffer::new(&cuda.context, bytes.len())?;
    input.upload(&stream, bytes)?;
    let scratch = DeviceBuffer::new(&cuda.context, pixels * 16)?;
    let mut weights_buffer = DeviceBuffer::new(&cuda.context, weights.len() * 4)?;
    weights_buffer.upload(&stream, bytemuck::cast_slice(&weights))?;
    Ok(Engine::Cuda {
        kernels: Box::new(kernels),
        input,
        scratch,
        weights: weights_buffer,
        timer: EventRing::new(&cuda.context, crate::cuda::timing::FRAMES_IN_FLIGHT, 3)?,
    })
}

/// The output texture, registered for surface writes (texture route on interop) or fed from a
/// pixel buffer made by the transfer path.
fn make_target(
    pipeline: &mut Pipeline,
    gl: &glow::Context,
    settings: &BlurSettings,
    source: &SourceImage,
) -> Result<Target2d> {
    let size = [source.width, source.height];
    let texture = gl::Texture::new(gl, size, settings.format, Some(source.bytes(settings.format)))?;
    if settings.route == Route::Texture && pipeline.kind() == TransferKind::Interop {
        return Ok(Target2d::Image(pipeline.transfer().create_image(gl, texture)?));
    }
    match pipeline.transfer().create_buffer(gl, source.bytes(settings.format)) {
        Ok(pbo) => Ok(Target2d::Buffer { pbo, texture }),
        Err(error) => {
            let mut texture = texture;
            texture.destroy(gl);
            Err(error)
        }
    }
}

impl Demo for Blur {
    fn name(&self) -> &'static str {
        "blur"
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
        match &mut self.target {
            Target2d::Buffer { pbo, .. } => self.pipeline.transfer().use_while_mapped(pbo),
            Target2d::Image(_) => Err(Error::Unavailable(
                "the texture route maps an image, not a buffer: choose the pixel-buffer route to try this".to_owned(),
            )),
        }
    }

    fn set_transfer(&mut self, gl: &glow::Context, kind: TransferKind) -> Result<()> {
        if kind == self.pipeline.kind() {
            return Ok(());
        }
        // The output is recomputed every frame, so only the target (and, between CUDA and the CPU,
        // the engine) needs to move.
        let previous = self.pipeline.kind();
        self.pipeline.switch(gl, kind, &mut [])?;
        let rebuilt = (|| -> Result<_> {
            let engine = if previous.uses_cuda() != kind.uses_cuda() {
                Some(make_engine(&self.pipeline, &self.settings, &self.source)?)
            } else {
                None
            };
            Ok((engine, make_target(&mut self.pipeline, gl, &self.settings, &self.source)?))
        })();
        match rebuilt {
            Ok((engine, target)) => {
                if let Some(engine) = engine {
                    self.engine = engine;
                    self.pass_us.clear();
                }
                std::mem::replace(&mut self.target, target).destroy(gl);
                Ok(())
            }
            Err(error) => {
                self.pipeline.switch(gl, previous, &mut [])?;
                Err(error)
            }
        }
    }

    fn step(&mut self, gl: &glow::Context, frame: u64, _dt: f32) -> Result<StageTimes> {
        for change in std::mem::take(&mut self.pending) {
            match self.apply(gl, change) {
                Ok(()) => {}
                Err(error) => self.message = Some(format!("{error} (kept the previous settings)")),
            }
        }
        let job = self.settings.job(self.size());
        let format = self.settings.format;
        let settings = self.settings.clone();
        let engine = &mut self.engine;
        // One compute for every target: CUDA kernels into an output, or the CPU filter into bytes.
        let run_cuda = |stream: &Stream, output: Output, engine: &mut Engine| -> Result<()> {
            let Engine::Cuda { kernels, input, scratch, weights, timer } = engine else {
                return Err(mismatch());
            };
            let marks = timer.begin();
            marks.mark(0, stream)?;
            let (input, scratch, weights): (DeviceSpan, DeviceSpan, DeviceSpan) =
                (input.span(), scratch.span(), weights.span());
            kernels.run(stream, &job, input, scratch, weights, output, Some((&marks, 1)))?;
            marks.mark(2, stream)?;
            timer.commit(frame);
            Ok(())
        };
        let mut times = match &mut self.target {
            Target2d::Image(image) => self.pipeline.transfer().run_image(gl, frame, image, &mut |target| {
                run_cuda(target.stream, Output::Surface(target.surface), &mut *engine)
            })?,
            Target2d::Buffer { pbo, texture } => {
                let mut buffers = [(&mut *pbo, Access::Write)];
                let mut times = self.pipeline.transfer().run(gl, frame, &mut buffers, &mut |target| match target {
                    Target::Device { buffers, stream } => run_cuda(stream, Output::Buffer(buffers[0]), &mut *engine),
                    Target::Host { buffers } => {
                        let Engine::Cpu { input } = &*engine else {
                            return Err(mismatch());
                        };
                        let out = run_cpu(input, &settings);
                        image::float_image_bytes(&out, format, buffers[0]);
                        Ok(())
                    }
                })?;
                let started = Instant::now();
                texture.upload_from_buffer(gl, pbo.gl())?;
                let upload = times.host(Stage::Upload).unwrap_or(0.0) + started.elapsed().as_secs_f64() * 1e6;
                times.set_host(Stage::Upload, upload);
                times
            }
        };
        if let Engine::Cuda { timer, .. } = &mut self.engine {
            let mut passes = [0.0; 2];
            while timer.poll(&mut passes)?.is_some() {
                self.pass_us.push(passes);
            }
            let excess = self.pass_us.len().saturating_sub(60);
            self.pass_us.drain(..excess);
        }
        if times.host(Stage::Kernel).is_none() {
            times.set_host(Stage::Kernel, 0.0);
        }
        Ok(times)
    }

    fn draw(&mut self, gl: &glow::Context, view: &View) -> Result<()> {
        self.last_view = *view;
        gl::begin_scene(gl, view.origin, view.size, [0.05, 0.05, 0.06, 1.0], gl::DrawState::Additive);
        gl::end_scene(gl);
        let zoom = self.zoom.unwrap_or_else(|| self.fitted_zoom(view));
        let nearest = zoom >= 1.0;
        self.original.bind(gl, 0, nearest)?;
        self.target.texture().bind(gl, 1, nearest)?;
        self.program.bind(gl)?;
        self.program.set_i32(gl, "original", 0);
        self.program.set_i32(gl, "blurred", 1);
        self.program.set_vec2(gl, "viewport_origin", glam::Vec2::new(view.origin[0] as f32, view.origin[1] as f32));
        self.program.set_vec2(gl, "viewport_size", glam::Vec2::new(view.size[0] as f32, view.size[1] as f32));
        let [w, h] = self.size();
        self.program.set_vec2(gl, "image_size", glam::Vec2::new(w as f32, h as f32));
        self.program.set_vec2(gl, "pan", self.pan);
        self.program.set_f32(gl, "zoom", zoom);
        self.program.set_f32(gl, "split", self.settings.split);
        gl::draw_fullscreen_triangle(gl, &self.vertex_array);
        gl::check_error(gl, "drawing the image")
    }

    fn panel(&mut self, ui: &mut egui::Ui) {
        panel::controls(self, ui);
    }

    fn view_controls(&mut self) -> Option<&mut dyn ViewControls> {
        Some(self)
    }

    fn live_kernels(&mut self) -> Option<&mut dyn LiveKernels> {
        Some(self)
    }

    fn file_opener(&mut self) -> Option<&mut dyn OpensFiles> {
        Some(self)
    }

    fn finish(&mut self, gl: &glow::Context) -> Result<()> {
        if let Some(path) = self.settings.output.clone() {
            let bytes = self.read_output(gl)?;
            image::save_png(&path, self.size(), self.settings.format, &bytes)?;
            log::info!("wrote {}", path.display());
        }
        Ok(())
    }

    fn destroy(mut self: Box<Self>, gl: &glow::Context) {
        if let Err(error) = self.synchronize() {
            log::warn!("blur: {error}");
        }
        self.program.destroy(gl);
        self.vertex_array.destroy(gl);
        self.original.destroy(gl);
        let Blur { target, .. } = *self;
        target.destroy(gl);
    }
}

/// The CPU backend's filter.
pub fn run_cpu(input: &cpu::Image<f32>, settings: &BlurSettings) -> cpu::Image<f32> {
    let weights: Vec<f32> =
        cpu::gaussian_weights(settings.sigma, settings.radius() as usize).iter().map(|&w| w as f32).collect();
    match settings.filter {
        Filter::Naive => cpu::naive(input, &weights),
        Filter::Separable => cpu::gaussian(input, &weights),
        Filter::Box => cpu::boxes(input, cpu::box_radii(settings.sigma).0),
        Filter::Recursive => cpu::recursive(input, &cpu::RecursiveGaussian::new(settings.sigma)),
    }
}

fn mismatch() -> Error {
    Error::InvalidInput("blur: the compute backend and the transfer path disagree".to_owned())
}

/// `photo.jpg` → `photo-blurred.png`.
fn blurred_name(path: &Path) -> PathBuf {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "image".to_owned());
    path.with_file_name(format!("{stem}-blurred.png"))
}

/// Bytes a blur must read and write at least: each pass reads its input once and writes its output
/// once (the separable and box passes go through a float4 intermediate, the recursive one through
/// [`kernels::intermediate_bytes`]: 8 bytes for RGBA8; naive reads the source once).
pub fn bytes_moved(filter: Filter, format: PixelFormat, pixels: f64) -> f64 {
    let pixel = format.bytes_per_pixel() as f64;
    let intermediate = kernels::intermediate_bytes(filter, format) as f64;
    match filter {
        Filter::Naive => 2.0 * pixel * pixels,
        Filter::Separable | Filter::Box | Filter::Recursive => (pixel + 2.0 * intermediate + pixel) * pixels,
    }
}

impl Blur {
    /// Waits for the demo's GPU work.
    pub fn synchronize(&mut self) -> Result<()> {
        self.pipeline.transfer().synchronize()
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
            Engine::Cpu { .. } => None,
        }
    }

    fn kernel_builds(&self) -> Vec<(SourceFile, Vec<String>)> {
        match &self.engine {
            Engine::Cuda { .. } => {
                vec![(KERNEL, BlurKernels::options(self.settings.format, self.settings.pixels_per_thread))]
            }
            Engine::Cpu { .. } => Vec::new(),
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

impl ViewControls for Blur {
    /// Any button pans the image.
    fn drag(&mut self, _drag: Drag, dx: f32, dy: f32, _view_height: f32) {
        let zoom = self.zoom.unwrap_or_else(|| self.fitted_zoom(&self.last_view));
        self.pan -= glam::Vec2::new(dx, dy) / zoom.max(1e-6);
    }

    fn zoom(&mut self, steps: f32) {
        let zoom = self.zoom.unwrap_or_else(|| self.fitted_zoom(&self.last_view));
        self.zoom = Some((zoom * 1.15f32.powf(steps)).clamp(1.0 / 64.0, 64.0));
    }
}

impl OpensFiles for Blur {
    fn open_file(&mut self, path: &Path) -> Result<()> {
        self.pending.push(Change::Open(path.to_owned()));
        Ok(())
    }
}
