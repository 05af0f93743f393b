//! `blur`: Gaussian blur written by CUDA into the image the renderer draws, two ways. Through a
//! pixel buffer (on GL a buffer registered with `cuGraphicsGLRegisterBuffer`, then
//! `glTexSubImage2D` into the texture shown — cuda-samples' way; on Vulkan a buffer CUDA imports,
//! copied into the image), or into the image itself through a surface object, no copy at all (a
//! GL texture registered with `cuGraphicsGLRegisterImage`, or a Vulkan image CUDA imports). On
//! the CPU path the filter runs on the host and the result is uploaded.

pub mod args;
pub mod bench;
pub mod cpu;
mod engine;
pub mod image;
pub mod kernels;
mod live;
mod panel;
mod recursive;
mod settings;

pub use self::engine::run_cpu;
pub use self::settings::{BlurSettings, MAX_NAIVE_RADIUS, MAX_RADIUS, MIN_BOX_SIGMA, Route, SIGMA_RANGE};

use std::path::{Path, PathBuf};

use self::engine::{Engine, make_engine, settle_filter};
use self::image::SourceImage;
use self::kernels::{Filter, Output};
use crate::cuda::{DeviceSpan, Stream};
use crate::demo_kit::{
    Demo, DemoEnv, DemoSpec, Drag, Drawn, LiveKernels, OccupancyCache, OpensFiles, Pipeline, SharedParts, View,
    ViewControls,
};
use crate::guard::Guard;
use crate::pixel::PixelFormat;
use crate::scene::{Graphics, Image, Picture, Scene};
use crate::sources::SourceFile;
use crate::stats::{Percentiles, Stage, StageTimes};
use crate::transfer::{ImageTarget, SharedImage, Target, TransferKind};
use crate::error::{Error, Result};
use crate::sources::source_file;

/// The kernel source.
pub const KERNEL: SourceFile = source_file!("kernels/blur.cu");

/// Every kernel file the demo compiles (for `doctor` and the NVRTC tests, through the registry).
pub const KERNELS: &[SourceFile] = &[KERNEL];

/// The demo with its default settings (the generated test pattern, the filter picked by σ).
pub fn default_spec() -> DemoSpec {
    DemoSpec::new(BlurSettings::automatic())
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
    /// The blurred image, as the transfer path made it (written in place or through a pixel buffer).
    target: SharedImage,
    /// The image before blurring, drawn left of the split line.
    original: Image,
    /// Screen pixels per image pixel; `None` fits the image to the view.
    zoom: Option<f32>,
    pan: glam::Vec2,
    last_view: View,
    pending: Vec<Change>,
    edit: BlurSettings,
    path: String,
    pass_us: Vec<[f64; 2]>,
    message: Option<String>,
    /// What the user should know that is not an error (where a save went, what auto chose),
    /// shown in the normal colour.
    notice: Option<String>,
    occupancy: OccupancyCache,
}

impl Blur {
    /// Creates the demo: the image (or test pattern), kernels, device buffers and textures.
    pub fn new(env: &DemoEnv<'_>, settings: BlurSettings) -> Result<Self> {
        settings.validate()?;
        let graphics = env.graphics;
        let source = match &settings.image {
            Some(path) => image::load(path, host_bytes_per_pixel(env.transfer, settings.format))?,
            None => image::test_pattern(1280, 800),
        };
        let pipeline = Pipeline::new(env.cuda.clone(), env.transfer)?;
        let mut pipeline = pipeline;
        let engine = make_engine(&pipeline, &settings, &source)?;
        let mut settings = settings;
        let mut auto_note = None;
        if let Engine::Cuda { kernels, .. } = &engine {
            (settings, auto_note) = settle_filter(settings, kernels, [source.width, source.height])?;
        }
        let original = Guard::new(
            Image::new(graphics, [source.width, source.height], settings.format, &source.bytes(settings.format))?,
            |image: Image| image.destroy(graphics),
        );
        let target = make_target(&mut pipeline, graphics, &settings, &source)?;
        let original = original.keep();
        let path = settings.image.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
        Ok(Self {
            edit: settings.clone(),
            settings,
            pipeline,
            source,
            engine,
            target,
            original,
            zoom: None,
            pan: glam::Vec2::ZERO,
            last_view: View { origin: [0, 0], size: [1, 1] },
            pending: Vec::new(),
            path,
            pass_us: Vec::new(),
            message: None,
            notice: auto_note,
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
        if self.target.in_place() { Route::Texture } else { Route::Pbo }
    }

    /// The route in words, naming the calls of the API that draws (GL's or Vulkan's).
    pub fn route_label(&self) -> &'static str {
        self.target.route_label()
    }

    /// The blurred image as the texture shows it (bytes of the format, top row first).
    pub fn read_output(&mut self, graphics: Graphics<'_>) -> Result<Vec<u8>> {
        self.pipeline.transfer().read_image(graphics, &self.target)
    }

    /// Overwrites the output (pixel buffer or texture) with `byte` in every byte, so a test can
    /// tell written pixels from stale ones.
    pub fn poison_output(&mut self, graphics: Graphics<'_>, byte: u8) -> Result<()> {
        let poison =
            vec![
                byte;
                self.source.width as usize * self.source.height as usize * self.settings.format.bytes_per_pixel()
            ];
        self.pipeline.transfer().fill_image(graphics, &mut self.target, &poison)
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

    fn apply(&mut self, graphics: Graphics<'_>, change: Change) -> Result<()> {
        match change {
            Change::Settings(settings) => self.rebuild(graphics, *settings, None),
            Change::Open(path) => {
                let source = image::load(&path, host_bytes_per_pixel(self.pipeline.kind(), self.settings.format))?;
                let settings = BlurSettings { image: Some(path), ..self.settings.clone() };
                self.rebuild(graphics, settings, Some(source))?;
                self.zoom = None;
                self.pan = glam::Vec2::ZERO;
                Ok(())
            }
            Change::Save(path) => {
                let bytes = self.read_output(graphics)?;
                image::save(&path, self.size(), self.settings.format, &bytes)?;
                self.notice = Some(format!("saved {}", path.display()));
                Ok(())
            }
        }
    }

    /// Rebuilds what the new settings need; on failure everything stays as it was.
    fn rebuild(&mut self, graphics: Graphics<'_>, settings: BlurSettings, source: Option<SourceImage>) -> Result<()> {
        settings.validate()?;
        let mut settings = settings;
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
        let size = [source_ref.width, source_ref.height];
        let mut auto_note = None;
        if let (Engine::Cuda { kernels, .. }, None) = (&self.engine, &engine) {
            (settings, auto_note) = settle_filter(settings, kernels, size)?;
        } else if let Some(Engine::Cuda { kernels, .. }) = &engine {
            (settings, auto_note) = settle_filter(settings, kernels, size)?;
        }
        self.notice = auto_note;
        let target = Guard::new(
            if target_changes { Some(make_target(&mut self.pipeline, graphics, &settings, source_ref)?) } else { None },
            |target: Option<SharedImage>| target.into_iter().for_each(|target| target.destroy(graphics)),
        );
        let original = if new_image || settings.format != self.settings.format {
            let size = [source_ref.width, source_ref.height];
            Some(Image::new(graphics, size, settings.format, &source_ref.bytes(settings.format))?)
        } else {
            None
        };
        let target = target.keep();
        if let Some(engine) = engine {
            self.engine = engine;
            self.pass_us.clear();
        }
        if let Some(target) = target {
            std::mem::replace(&mut self.target, target).destroy(graphics);
        }
        if let Some(original) = original {
            std::mem::replace(&mut self.original, original).destroy(graphics);
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

/// The output image: written in place (texture route on interop) or through a pixel buffer made
/// by the transfer path.
fn make_target(
    pipeline: &mut Pipeline,
    graphics: Graphics<'_>,
    settings: &BlurSettings,
    source: &SourceImage,
) -> Result<SharedImage> {
    let size = [source.width, source.height];
    // In place where CUDA can write the texture itself: GL's registered, or Vulkan's imported.
    let in_place =
        settings.route == Route::Texture && matches!(pipeline.kind(), TransferKind::Interop | TransferKind::Vulkan);
    pipeline.transfer().create_image(graphics, size, settings.format, &source.bytes(settings.format), in_place)
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

    /// The output is made again every frame, so a switch carries no buffer: the target (and,
    /// between CUDA and the CPU, the engine) is made anew on the new path.
    fn shared(&mut self) -> SharedParts<'_> {
        let drawn = match self.target.pixel_buffer_mut() {
            Some(pbo) => Drawn::Other(pbo),
            None => Drawn::Unavailable(
                "the texture route maps an image, not a buffer: choose the pixel-buffer route to try this".to_owned(),
            ),
        };
        SharedParts { pipeline: &mut self.pipeline, carried: Vec::new(), drawn }
    }

    fn path_changed(&mut self, graphics: Graphics<'_>, previous: TransferKind) -> Result<()> {
        let kind = self.pipeline.kind();
        let (engine, target) = (|| -> Result<_> {
            let engine = if previous.uses_cuda() != kind.uses_cuda() {
                Some(make_engine(&self.pipeline, &self.settings, &self.source)?)
            } else {
                None
            };
            Ok((engine, make_target(&mut self.pipeline, graphics, &self.settings, &self.source)?))
        })()?;
        if let Some(engine) = engine {
            self.engine = engine;
            self.pass_us.clear();
        }
        std::mem::replace(&mut self.target, target).destroy(graphics);
        Ok(())
    }

    fn step(&mut self, graphics: Graphics<'_>, frame: u64, _dt: f32) -> Result<StageTimes> {
        for change in std::mem::take(&mut self.pending) {
            match self.apply(graphics, change) {
                Ok(()) => {}
                Err(error) => self.message = Some(format!("{error} (kept the previous settings)")),
            }
        }
        if matches!(self.engine, Engine::Compiling { .. }) && !self.finish_compile() {
            return Ok(StageTimes::default()); // the image shows unfiltered until the kernels arrive
        }
        let job = self.settings.job(self.size());
        let settings = self.settings.clone();
        let (engine, source) = (&mut self.engine, &self.source);
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
        let mut times =
            self.pipeline.transfer().run_image(graphics, frame, &mut self.target, &mut |target| match target {
                ImageTarget::Surface { surface, stream, .. } => {
                    run_cuda(stream, Output::Surface(surface), &mut *engine)
                }
                ImageTarget::Buffer(Target::Device { buffers, stream }) => {
                    run_cuda(stream, Output::Buffer(buffers[0]), &mut *engine)
                }
                ImageTarget::Buffer(Target::Host { buffers }) => {
                    let Engine::Cpu { planes } = &mut *engine else {
                        return Err(mismatch());
                    };
                    run_cpu(source, &settings, planes, buffers[0]);
                    Ok(())
                }
            })?;
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

    fn scene(&mut self, view: &View) -> Scene<'_> {
        self.last_view = *view;
        Scene::Picture(Picture {
            original: &self.original,
            result: &self.target,
            size: self.size(),
            zoom: self.zoom.unwrap_or_else(|| self.fitted_zoom(view)),
            pan: self.pan,
            split: self.settings.split,
        })
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

    fn finish(&mut self, graphics: Graphics<'_>) -> Result<()> {
        if let Some(path) = self.settings.output.clone() {
            let bytes = self.read_output(graphics)?;
            image::save(&path, self.size(), self.settings.format, &bytes)?;
            log::info!("wrote {}", path.display());
        }
        Ok(())
    }

    fn destroy(mut self: Box<Self>, graphics: Graphics<'_>) {
        if let Err(error) = self.synchronize() {
            log::warn!("blur: {error}");
        }
        let Blur { target, original, .. } = *self;
        original.destroy(graphics);
        target.destroy(graphics);
    }
}

/// Host memory per pixel of an image the demo blurs on path `kind` in `format`, beyond the
/// decoder's: the RGBA8 source and, at worst, its 16-bit copy (12); on the CPU, the filters'
/// plane (16), the bytes uploaded, and the two textures and pixel buffer a software GL keeps in
/// host memory (4 texels); with CUDA, the RGBA32F copy an upload is made from and a host copy's
/// staging (3 texels). Large images are refused with these numbers before they are decoded.
pub fn host_bytes_per_pixel(kind: TransferKind, format: PixelFormat) -> u64 {
    let texel = format.bytes_per_pixel() as u64;
    let source = 4 + 8;
    match kind {
        TransferKind::Cpu => source + cpu::Planes::BYTES_PER_PIXEL + 4 * texel,
        _ => source + 3 * texel,
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
