//! The kernels of `kernels/blur.cu` for one pixel format, and their typed launches: the one place
//! that vouches for their argument lists.
#![allow(unsafe_code)]

use serde::{Deserialize, Serialize};

use super::KERNEL;
use super::cpu::RecursiveGaussian;
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
    /// Two passes of a recursive (IIR) Gaussian walking columns: O(1) in σ per output, plus a
    /// warm-up per segment that grows with σ (approximate Gaussian).
    Recursive,
}

impl Filter {
    /// Every filter, in menu order.
    pub const ALL: [Filter; 4] = [Filter::Separable, Filter::Recursive, Filter::Box, Filter::Naive];

    /// Name as on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Filter::Naive => "naive",
            Filter::Separable => "separable",
            Filter::Box => "box",
            Filter::Recursive => "recursive",
        }
    }
}

/// How far the recursive filter's warm-up may leave its result from the exact recursion, as a
/// fraction of the value range, per direction and pass: four such errors add up to at most
/// 0.1 of a level for RGBA8 and 4e-6 for RGBA32F.
pub fn recursive_tolerance(format: PixelFormat) -> f64 {
    match format {
        PixelFormat::Rgba8 => 1e-4,
        PixelFormat::Rgba32f => 1e-6,
    }
}

/// Shared memory the recursive filter's segment may take per block: at most this, so that at
/// least three blocks fit on an SM of 228 KiB.
const RECURSIVE_SHARED_BUDGET: u64 = 72 * 1024;

/// Steps the recursive kernels load ahead (RECURSIVE_CHUNK in blur.cu).
fn recursive_chunk(format: PixelFormat) -> u32 {
    match format {
        PixelFormat::Rgba8 => 16,
        PixelFormat::Rgba32f => 8,
    }
}

/// Bytes of one shared-memory slot of the recursive kernels (partial_sum in blur.cu).
fn recursive_slot_bytes(format: PixelFormat) -> u64 {
    match format {
        PixelFormat::Rgba8 => 8,
        PixelFormat::Rgba32f => 16,
    }
}

/// Bytes per pixel of the intermediate between the two passes: RGBA8 goes through value × 256 as
/// four 16-bit integers, RGBA32F through float4.
pub fn intermediate_bytes(filter: Filter, format: PixelFormat) -> usize {
    match (filter, format) {
        (Filter::Recursive, PixelFormat::Rgba8) => 8,
        _ => 16,
    }
}

/// The coefficients struct `Recursive` of blur.cu, field for field.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RecursiveParams {
    pole: f32,
    pole_re: f32,
    pole_im: f32,
    causal: f32,
    causal_re: f32,
    causal_im: f32,
    anti: f32,
    anti_re: f32,
    anti_im: f32,
    steady: f32,
    steady_re: f32,
    steady_im: f32,
    /// Steps each walker runs before its segment.
    pub warmup: i32,
    /// Rows per segment.
    pub segment: i32,
}

impl RecursiveParams {
    /// The kernel's coefficients for `filter`, with the warm-up rounded up to whole chunks.
    pub fn new(filter: &RecursiveGaussian, format: PixelFormat, segment: u32) -> Self {
        let chunk = recursive_chunk(format) as usize;
        let warmup = filter.warmup(recursive_tolerance(format)).div_ceil(chunk) * chunk;
        let (p, [pr, pi]) = (filter.real_pole, filter.complex_pole);
        let (c, [cr, ci]) = (filter.real_residue, filter.complex_residue);
        // The backward weights are c·p; the complex weights carry the conjugate's share (× 2).
        let (ar, ai) = (cr * pr - ci * pi, cr * pi + ci * pr);
        let norm = (1.0 - pr) * (1.0 - pr) + pi * pi;
        Self {
            pole: p as f32,
            pole_re: pr as f32,
            pole_im: pi as f32,
            causal: c as f32,
            causal_re: (2.0 * cr) as f32,
            causal_im: (2.0 * ci) as f32,
            anti: (c * p) as f32,
            anti_re: (2.0 * ar) as f32,
            anti_im: (2.0 * ai) as f32,
            steady: (1.0 / (1.0 - p)) as f32,
            steady_re: ((1.0 - pr) / norm) as f32,
            steady_im: (pi / norm) as f32,
            warmup: i32::try_from(warmup).unwrap_or(i32::MAX),
            segment: i32::try_from(segment).unwrap_or(i32::MAX),
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
    /// Poles and residues (recursive).
    pub recursive: RecursiveGaussian,
    /// Threads per block in x and y.
    pub block: [u32; 2],
}

/// The eleven kernels of one pixel format and one `PIXELS_PER_THREAD`.
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
    recursive_first: Function,
    recursive_second_to_buffer: Function,
    recursive_second_to_surface: Function,
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
            recursive_first: module.function("blur_recursive_first")?,
            recursive_second_to_buffer: module.function("blur_recursive_second_to_buffer")?,
            recursive_second_to_surface: module.function("blur_recursive_second_to_surface")?,
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
            Filter::Recursive => self.recursive_first.attributes(),
        }
    }

    /// Rows per segment of the recursive filter for `block`: the largest power of two up to 256
    /// whose shared memory (segment × (columns + 1) slots, columns = threads / 2) stays within
    /// the budget, and at least two chunks.
    pub fn recursive_segment(&self, block: [u32; 2]) -> u32 {
        let columns = u64::from(block[0]) * u64::from(block[1]) / 2;
        let per_row = (columns + 1) * recursive_slot_bytes(self.format);
        let mut segment = 256u32;
        let smallest = 2 * recursive_chunk(self.format);
        while segment > smallest && u64::from(segment) * per_row > RECURSIVE_SHARED_BUDGET {
            segment /= 2;
        }
        segment
    }

    /// The launches `job` makes: one for naive, two row passes otherwise (the second on the
    /// transposed image).
    pub fn launches(&self, job: &Job) -> Vec<LaunchConfig> {
        let [width, height] = job.size;
        let [bx, by] = job.block;
        match job.filter {
            Filter::Naive => vec![LaunchConfig::for_grid_2d(width, height, job.block)],
            Filter::Recursive => {
                let columns = (bx.saturating_mul(by) / 2).max(1);
                let segment = self.recursive_segment(job.block);
                let shared = u64::from(segment) * (u64::from(columns) + 1) * recursive_slot_bytes(self.format);
                let shared_memory_bytes = u32::try_from(shared).unwrap_or(u32::MAX);
                let pass = |w: u32, h: u32| LaunchConfig {
                    grid: [w.div_ceil(columns).max(1), h.div_ceil(segment).max(1), 1],
                    block: [bx, by, 1],
                    shared_memory_bytes,
                };
                vec![pass(width, height), pass(height, width)]
            }
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
        if matches!(job.filter, Filter::Separable | Filter::Box) && !job.block[1].is_power_of_two() {
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
        if job.filter == Filter::Recursive && !(u64::from(job.block[0]) * u64::from(job.block[1])).is_multiple_of(64) {
            return Err(Error::InvalidInput(format!(
                "the recursive filter pairs a forward and a backward warp on every 32 columns, so block.x × block.y \
                 must be a multiple of 64 (not {} × {})",
                job.block[0], job.block[1]
            )));
        }
        let functions = self.functions(job.filter);
        for (config, function) in self.launches(job).iter().zip(functions) {
            config.validate(&self.limits, function.attributes()).map_err(|e| {
                let hint = match job.filter {
                    Filter::Recursive => format!(
                        "The recursive filter keeps a segment of {} rows × (threads/2 + 1) columns in shared memory: \
                         use fewer threads per block",
                        self.recursive_segment(job.block)
                    ),
                    _ => format!(
                        "The {} filter stages a tile of block.y rows × (block.x·{} + 2·reach) pixels: \
                         lower block.y or the radius",
                        job.filter.name(),
                        self.pixels_per_thread
                    ),
                };
                Error::InvalidInput(format!("{e}. {hint}"))
            })?;
        }
        Ok(())
    }

    fn functions(&self, filter: Filter) -> [&Function; 2] {
        match filter {
            Filter::Naive => [&self.naive_to_buffer, &self.naive_to_buffer],
            Filter::Separable => [&self.gaussian_first, &self.gaussian_second_to_buffer],
            Filter::Box => [&self.box_first, &self.box_second_to_buffer],
            Filter::Recursive => [&self.recursive_first, &self.recursive_second_to_buffer],
        }
    }

    /// Queues `job`: `input` holds width × height pixels of this format, `scratch` room for as many
    /// intermediate pixels ([`intermediate_bytes`]), `weights` the Gaussian weights w[0..=radius] as f32. `between` records a timing
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
            Filter::Recursive => {
                check_len("scratch", scratch, pixels * intermediate_bytes(job.filter, self.format))?;
                let segment = self.recursive_segment(job.block);
                let params = RecursiveParams::new(&job.recursive, self.format, segment);
                let mut first = [arg(&input.ptr), arg(&scratch.ptr), arg(&w), arg(&h), arg(&params)];
                // SAFETY: matches blur_recursive_first(const raw_pixel*, mid_pixel*, int, int,
                // Recursive): w×h pixels in, w×h intermediate pixels out (transposed);
                // RecursiveParams is #[repr(C)] with the fields, order and 4-byte alignment of
                // the struct Recursive it is passed as.
                unsafe { self.recursive_first.launch(stream, &limits, &launches[0], &mut first) }?;
                mark(stream)?;
                let (function, target) = match output {
                    Output::Buffer(span) => (&mut self.recursive_second_to_buffer, span.ptr),
                    Output::Surface(surface) => (&mut self.recursive_second_to_surface, surface),
                };
                let mut second = [arg(&scratch.ptr), arg(&target), arg(&h), arg(&w), arg(&params)];
                // SAFETY: matches blur_recursive_second_*(const mid_pixel*, packed_pixel* |
                // cudaSurfaceObject_t, int, int, Recursive) on the h×w transposed scratch; it
                // writes the w×h output (transposing back); packed_pixel is this format's pixel.
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
