//! The kernels of `kernels/blur.cu` for one pixel format, and their typed launches: the one place
//! that vouches for their argument lists.
#![allow(unsafe_code)]

use serde::{Deserialize, Serialize};

use super::KERNEL;
use crate::cuda::launch::arg;
use crate::cuda::module::FunctionAttributes;
use crate::cuda::timing::Marks;
use crate::cuda::{DeviceLimits, DeviceSpan, Function, LaunchConfig, Module, Stream};
use crate::gl::PixelFormat;
use crate::runtime::CudaRuntime;
use crate::{Error, Result};

/// Which filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Filter {
    /// Full 2-D window per pixel: O(r²).
    Naive,
    /// Two 1-D Gaussian passes from shared-memory tiles: O(r).
    Separable,
    /// Two passes of a four-box cascade from prefix sums: O(1) in σ (approximate Gaussian).
    Box,
}

impl Filter {
    /// Every filter, in menu order.
    pub const ALL: [Filter; 3] = [Filter::Separable, Filter::Box, Filter::Naive];

    /// Name as on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Filter::Naive => "naive",
            Filter::Separable => "separable",
            Filter::Box => "box",
        }
    }
}

/// Where the final pass writes.
#[derive(Debug, Clone, Copy)]
pub enum Output {
    /// A linear buffer of pixels (a mapped pixel-buffer object, or device memory).
    Buffer(DeviceSpan),
    /// A surface object over a mapped texture.
    Surface(u64),
}

/// One blur's parameters as the kernels take them.
#[derive(Debug, Clone, Copy)]
pub struct Job {
    /// Which filter.
    pub filter: Filter,
    /// Image size.
    pub size: [u32; 2],
    /// Gaussian radius (separable, naive).
    pub radius: u32,
    /// Box radii (box).
    pub box_radii: [u32; 4],
    /// Threads per block in x and y.
    pub block: [u32; 2],
}

/// The eight kernels of one pixel format and one `PIXELS_PER_THREAD`.
pub struct BlurKernels {
    /// Pixel format they were compiled for.
    pub format: PixelFormat,
    /// Outputs per thread per tile row.
    pub pixels_per_thread: u32,
    /// Where the source came from.
    pub origin: String,
    naive_to_buffer: Function,
    naive_to_surface: Function,
    gaussian_first: Function,
    gaussian_second_to_buffer: Function,
    gaussian_second_to_surface: Function,
    box_first: Function,
    box_second_to_buffer: Function,
    box_second_to_surface: Function,
    limits: DeviceLimits,
}

impl BlurKernels {
    /// Compiles (or takes from the cache) and loads the kernels.
    pub fn load(cuda: &CudaRuntime, format: PixelFormat, pixels_per_thread: u32) -> Result<Self> {
        if !(1..=8).contains(&pixels_per_thread) {
            return Err(Error::InvalidInput(format!("pixels per thread must be 1..=8, not {pixels_per_thread}")));
        }
        let compiled = cuda.compiler.compile(&KERNEL, &Self::options(format, pixels_per_thread))?;
        Self::from_compiled(cuda, format, pixels_per_thread, &compiled)
    }

    /// NVRTC options for a pixel format and tile width.
    pub fn options(format: PixelFormat, pixels_per_thread: u32) -> Vec<String> {
        let mut options = vec![format!("-DPIXELS_PER_THREAD={pixels_per_thread}")];
        if format == PixelFormat::Rgba32f {
            options.push("-DFORMAT_F32".to_owned());
        }
        options
    }

    /// Loads `compiled` (built with [`Self::options`], e.g. by a background recompile).
    pub fn from_compiled(
        cuda: &CudaRuntime,
        format: PixelFormat,
        pixels_per_thread: u32,
        compiled: &crate::cuda::module::CompiledModule,
    ) -> Result<Self> {
        let module = Module::load(&cuda.context, compiled)?;
        Ok(Self {
            format,
            pixels_per_thread,
            origin: compiled.origin.clone(),
            naive_to_buffer: module.function("blur_naive_to_buffer")?,
            naive_to_surface: module.function("blur_naive_to_surface")?,
            gaussian_first: module.function("blur_gaussian_first")?,
            gaussian_second_to_buffer: module.function("blur_gaussian_second_to_buffer")?,
            gaussian_second_to_surface: module.function("blur_gaussian_second_to_surface")?,
            box_first: module.function("blur_box_first")?,
            box_second_to_buffer: module.function("blur_box_second_to_buffer")?,
            box_second_to_surface: module.function("blur_box_second_to_surface")?,
            limits: DeviceLimits::from(cuda.context.device()),
        })
    }

    /// The first kernel `filter` runs.
    pub fn first_function(&self, filter: Filter) -> &Function {
        self.functions(filter)[0]
    }

    /// Attributes of the first kernel `filter` runs (for the panel).
    pub fn attributes(&self, filter: Filter) -> &FunctionAttributes {
        match filter {
            Filter::Naive => self.naive_to_buffer.attributes(),
            Filter::Separable => self.gaussian_first.attributes(),
            Filter::Box => self.box_first.attributes(),
        }
    }

    /// The launches `job` makes: one for naive, two row passes otherwise (the second on the
    /// transposed image).
    pub fn launches(&self, job: &Job) -> Vec<LaunchConfig> {
        let [width, height] = job.size;
        let [bx, by] = job.block;
        match job.filter {
            Filter::Naive => vec![LaunchConfig::for_grid_2d(width, height, job.block)],
            Filter::Separable | Filter::Box => {
                let reach = match job.filter {
                    Filter::Box => job.box_radii.iter().sum::<u32>(),
                    _ => job.radius,
                };
                let tile = bx.saturating_mul(self.pixels_per_thread);
                // As tile_span() in blur.cu: padded for the register window, rounded up to odd.
                let span = (tile.saturating_add(reach.saturating_mul(2)).saturating_add(self.pixels_per_thread)) | 1;
                let mut shared = 2u64 * u64::from(by) * u64::from(span) * 16;
                if job.filter == Filter::Box {
                    shared += u64::from(by) * u64::from(bx) * 16;
                }
                let shared_memory_bytes = u32::try_from(shared).unwrap_or(u32::MAX);
                let pass = |w: u32, h: u32| LaunchConfig {
                    grid: [w.div_ceil(tile.max(1)).max(1), h.div_ceil(by.max(1)).max(1), 1],
                    block: [bx, by, 1],
                    shared_memory_bytes,
                };
                vec![pass(width, height), pass(height, width)]
            }
        }
    }

    /// Checks `job`'s launches against the device and kernels; the message names the limit.
    pub fn validate(&self, job: &Job) -> Result<()> {
        if job.filter != Filter::Naive && !job.block[1].is_power_of_two() {
            return Err(Error::InvalidInput(format!(
                "the {} filter writes its tiles transposed with a shift, so block.y must be a power of two (not {})",
                job.filter.name(),
                job.block[1]
            )));
        }
        if job.filter == Filter::Box && !job.block[0].is_multiple_of(32) {
            return Err(Error::InvalidInput(format!(
                "the box filter scans each tile row with one warp, so block.x must be a multiple of 32 (not {})",
                job.block[0]
            )));
        }
        let functions = self.functions(job.filter);
        for (config, function) in self.launches(job).iter().zip(functions) {
            config.validate(&self.limits, function.attributes()).map_err(|e| {
                Error::InvalidInput(format!(
                    "{e}. The {} filter stages a tile of block.y rows × (block.x·{} + 2·reach) pixels: \
                     lower block.y or the radius",
                    job.filter.name(),
                    self.pixels_per_thread
                ))
            })?;
        }
        Ok(())
    }

    fn functions(&self, filter: Filter) -> [&Function; 2] {
        match filter {
            Filter::Naive => [&self.naive_to_buffer, &self.naive_to_buffer],
            Filter::Separable => [&self.gaussian_first, &self.gaussian_second_to_buffer],
            Filter::Box => [&self.box_first, &self.box_second_to_buffer],
        }
    }

    /// Queues `job`: `input` holds width × height pixels of this format, `scratch` room for as many
    /// float4, `weights` the Gaussian weights w[0..=radius] as f32. `between` records a timing
    /// mark after the first pass (for naive, after its only one).
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &mut self,
        stream: &Stream,
        job: &Job,
        input: DeviceSpan,
        scratch: DeviceSpan,
        weights: DeviceSpan,
        output: Output,
        between: Option<(&Marks<'_>, usize)>,
    ) -> Result<()> {
        let mark = |stream: &Stream| -> Result<()> {
            match between {
                Some((marks, index)) => marks.mark(index, stream),
                None => Ok(()),
            }
        };
        self.validate(job)?;
        let [width, height] = job.size;
        let pixels = width as usize * height as usize;
        let bytes = self.format.bytes_per_pixel();
        check_len("input image", input, pixels * bytes)?;
        if let Output::Buffer(span) = output {
            check_len("output image", span, pixels * bytes)?;
        }
        let launches = self.launches(job);
        let (w, h, radius) = (width as i32, height as i32, job.radius as i32);
        let limits = self.limits;
        match job.filter {
            Filter::Naive => {
                check_len("weights", weights, (job.radius as usize + 1) * 4)?;
                let (function, target) = match output {
                    Output::Buffer(span) => (&mut self.naive_to_buffer, span.ptr),
                    Output::Surface(surface) => (&mut self.naive_to_surface, surface),
                };
                let mut args = [arg(&input.ptr), arg(&target), arg(&w), arg(&h), arg(&weights.ptr), arg(&radius)];
                // SAFETY: matches blur_naive_to_*(const pixel*, pixel* | cudaSurfaceObject_t, int,
                // int, const float*, int); the input holds w×h pixels, the output w×h (buffer,
                // checked) or is a surface of that size; weights hold radius + 1 floats.
                unsafe { function.launch(stream, &limits, &launches[0], &mut args) }?;
                mark(stream)
            }
            Filter::Separable => {
                check_len("scratch", scratch, pixels * 16)?;
                check_len("weights", weights, (job.radius as usize + 1) * 4)?;
                let mut first = [arg(&input.ptr), arg(&scratch.ptr), arg(&w), arg(&h), arg(&weights.ptr), arg(&radius)];
                // SAFETY: matches blur_gaussian_first(const pixel*, float4*, int, int, const float*,
                // int): w×h pixels in, w×h float4 out (transposed), radius + 1 weights.
                unsafe { self.gaussian_first.launch(stream, &limits, &launches[0], &mut first) }?;
                mark(stream)?;
                let (function, target) = match output {
                    Output::Buffer(span) => (&mut self.gaussian_second_to_buffer, span.ptr),
                    Output::Surface(surface) => (&mut self.gaussian_second_to_surface, surface),
                };
                // The second pass works on the transposed image: its width is the height.
                let mut second = [arg(&scratch.ptr), arg(&target), arg(&h), arg(&w), arg(&weights.ptr), arg(&radius)];
                // SAFETY: matches blur_gaussian_second_*(const float4*, pixel* |
                // cudaSurfaceObject_t, int, int, const float*, int) on the h×w transposed scratch;
                // it writes the w×h output (transposing back).
                unsafe { function.launch(stream, &limits, &launches[1], &mut second) }
            }
            Filter::Box => {
                check_len("scratch", scratch, pixels * 16)?;
                let radii = job.box_radii.map(|r| r as i32);
                let mut first = [arg(&input.ptr), arg(&scratch.ptr), arg(&w), arg(&h), arg(&radii)];
                // SAFETY: matches blur_box_first(const pixel*, float4*, int, int, int4): `radii`
                // is [i32; 4], laid out as int4 (16 bytes, 16-aligned as a kernel parameter).
                unsafe { self.box_first.launch(stream, &limits, &launches[0], &mut first) }?;
                mark(stream)?;
                let (function, target) = match output {
                    Output::Buffer(span) => (&mut self.box_second_to_buffer, span.ptr),
                    Output::Surface(surface) => (&mut self.box_second_to_surface, surface),
                };
                let mut second = [arg(&scratch.ptr), arg(&target), arg(&h), arg(&w), arg(&radii)];
                // SAFETY: as the first pass, on the transposed scratch, writing the w×h output.
                unsafe { function.launch(stream, &limits, &launches[1], &mut second) }
            }
        }
    }
}

fn check_len(name: &str, span: DeviceSpan, needed: usize) -> Result<()> {
    if span.bytes < needed {
        return Err(Error::InvalidInput(format!("blur: {name} buffer has {} bytes, {needed} needed", span.bytes)));
    }
    Ok(())
}
