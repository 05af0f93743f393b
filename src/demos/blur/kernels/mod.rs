//! The kernels of `kernels/blur.cu` for one pixel format, and their typed launches: the one place
//! that vouches for their argument lists.
#![allow(unsafe_code)]

mod filter;
mod geometry;
#[cfg(test)]
mod tests;

use super::KERNEL;
use crate::cuda::launch::arg;
use crate::cuda::module::FunctionAttributes;
use crate::cuda::timing::Marks;
use crate::cuda::{DeviceLimits, DeviceSpan, Function, LaunchConfig, Module, Stream};
use crate::pixel::PixelFormat;
use crate::runtime::CudaRuntime;
use crate::error::{Error, Result};

pub use self::filter::{Filter, RECURSIVE_MAX_SIGMA, intermediate_bytes};
pub use self::geometry::{Job, launches, validate_job};
pub use super::recursive::{
    PAIR_FORM_MAX_SIGMA, RecursiveParams, auto_recursive_segment, check_recursive_segment, recursive_chunk,
    recursive_shared_bytes, recursive_slot_bytes, recursive_tolerance, smallest_recursive_segment, uses_pair_form,
};

/// Where the final pass writes.
#[derive(Debug, Clone, Copy)]
pub enum Output {
    /// A linear buffer of pixels (a mapped pixel-buffer object, or device memory).
    Buffer(DeviceSpan),
    /// A surface object over a mapped texture.
    Surface(u64),
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
    recursive_pair_first: Function,
    recursive_pair_second_to_buffer: Function,
    recursive_pair_second_to_surface: Function,
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
            recursive_pair_first: module.function("blur_recursive_pair_first")?,
            recursive_pair_second_to_buffer: module.function("blur_recursive_pair_second_to_buffer")?,
            recursive_pair_second_to_surface: module.function("blur_recursive_pair_second_to_surface")?,
            limits: DeviceLimits::from(cuda.context.device()),
        })
    }

    /// The first kernel `filter` runs at `sigma`.
    pub fn first_function(&self, filter: Filter, sigma: f64) -> &Function {
        self.functions(filter, sigma)[0]
    }

    /// Attributes of the first kernel `filter` runs at `sigma` (for the panel).
    pub fn attributes(&self, filter: Filter, sigma: f64) -> &FunctionAttributes {
        self.first_function(filter, sigma).attributes()
    }

    /// Rows per segment of the recursive filter: `segment` when set, else
    /// [`auto_recursive_segment`] for `block`.
    pub fn recursive_segment(&self, block: [u32; 2], segment: Option<u32>) -> u32 {
        segment.unwrap_or_else(|| auto_recursive_segment(self.format, block))
    }

    /// The launches `job` makes: one for naive, two row passes otherwise (the second on the
    /// transposed image).
    pub fn launches(&self, job: &Job) -> Vec<LaunchConfig> {
        launches(self.format, self.pixels_per_thread, job)
    }

    /// Checks `job`'s launches against the device and kernels; the message names the limit.
    pub fn validate(&self, job: &Job) -> Result<()> {
        let [first, second] = self.functions(job.filter, job.recursive.sigma);
        validate_job(self.format, self.pixels_per_thread, &self.limits, [first.attributes(), second.attributes()], job)
    }

    fn functions(&self, filter: Filter, sigma: f64) -> [&Function; 2] {
        match filter {
            Filter::Naive => [&self.naive_to_buffer, &self.naive_to_buffer],
            Filter::Separable => [&self.gaussian_first, &self.gaussian_second_to_buffer],
            Filter::Box => [&self.box_first, &self.box_second_to_buffer],
            Filter::Recursive if uses_pair_form(self.format, sigma) => {
                [&self.recursive_pair_first, &self.recursive_pair_second_to_buffer]
            }
            Filter::Recursive => [&self.recursive_first, &self.recursive_second_to_buffer],
        }
    }

    /// The kernel that writes `filter`'s output (its only pass for naive, else its second; `pair`:
    /// the recursive filter's pair form), and what it writes to: the buffer's device pointer or
    /// the surface object.
    fn writer(&mut self, filter: Filter, pair: bool, output: Output) -> (&mut Function, u64) {
        let (to_buffer, to_surface) = match (filter, pair) {
            (Filter::Naive, _) => (&mut self.naive_to_buffer, &mut self.naive_to_surface),
            (Filter::Separable, _) => (&mut self.gaussian_second_to_buffer, &mut self.gaussian_second_to_surface),
            (Filter::Box, _) => (&mut self.box_second_to_buffer, &mut self.box_second_to_surface),
            (Filter::Recursive, false) => (&mut self.recursive_second_to_buffer, &mut self.recursive_second_to_surface),
            (Filter::Recursive, true) => {
                (&mut self.recursive_pair_second_to_buffer, &mut self.recursive_pair_second_to_surface)
            }
        };
        match output {
            Output::Buffer(span) => (to_buffer, span.ptr),
            Output::Surface(surface) => (to_surface, surface),
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
                let (function, target) = self.writer(job.filter, false, output);
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
                let (function, target) = self.writer(job.filter, false, output);
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
                let (function, target) = self.writer(job.filter, false, output);
                let mut second = [arg(&scratch.ptr), arg(&target), arg(&h), arg(&w), arg(&radii)];
                // SAFETY: as the first pass, on the transposed scratch, writing the w×h output.
                unsafe { function.launch(stream, &limits, &launches[1], &mut second) }
            }
            Filter::Recursive => {
                check_len("scratch", scratch, pixels * intermediate_bytes(job.filter, self.format))?;
                let segment = self.recursive_segment(job.block, job.segment);
                let params = RecursiveParams::new(&job.recursive, self.format, segment);
                let pair = uses_pair_form(self.format, job.recursive.sigma);
                let mut first = [arg(&input.ptr), arg(&scratch.ptr), arg(&w), arg(&h), arg(&params)];
                let function = if pair { &mut self.recursive_pair_first } else { &mut self.recursive_first };
                // SAFETY: matches blur_recursive[_pair]_first(const raw_pixel*, mid_pixel*, int,
                // int, Recursive): w×h pixels in, w×h intermediate pixels out (transposed);
                // RecursiveParams is #[repr(C)] with the fields, order and 4-byte alignment of
                // the struct Recursive it is passed as.
                unsafe { function.launch(stream, &limits, &launches[0], &mut first) }?;
                mark(stream)?;
                let (function, target) = self.writer(job.filter, pair, output);
                let mut second = [arg(&scratch.ptr), arg(&target), arg(&h), arg(&w), arg(&params)];
                // SAFETY: matches blur_recursive[_pair]_second_*(const mid_pixel*, packed_pixel* |
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
