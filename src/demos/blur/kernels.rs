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
use crate::pixel::PixelFormat;
use crate::runtime::CudaRuntime;
use crate::{Error, Result};

pub use super::recursive::{
    PAIR_FORM_MAX_SIGMA, RecursiveParams, auto_recursive_segment, check_recursive_segment, recursive_chunk,
    recursive_shared_bytes, recursive_slot_bytes, recursive_tolerance, smallest_recursive_segment, uses_pair_form,
};

/// The largest σ at which the recursive filter is held to the accuracy bound (and picked by auto).
pub const RECURSIVE_MAX_SIGMA: f64 = 100.0;

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

    /// Whether the filter's cost and limits depend on the Gaussian's radius (the others ignore it).
    pub fn uses_radius(self) -> bool {
        matches!(self, Filter::Naive | Filter::Separable)
    }

    /// Threads per block the filter runs fastest with by default (4K RGBA8 on an H200: the
    /// recursive filter 133.4 µs at 64×2 against 145.6 µs at 64×4, σ = 10; the separable one is
    /// fastest at 64×4; docs/blur-performance.md).
    pub fn default_block(self) -> [u32; 2] {
        match self {
            Filter::Recursive => [64, 2],
            _ => [64, 4],
        }
    }

    /// The fastest filter whose accuracy bound (6 levels of 255 at most, 1.5 on average, against
    /// the sampled Gaussian) holds at `sigma`. Measured on an H200, 4K RGBA8
    /// (docs/blur-performance.md): at σ = 2 the separable filter takes 232 µs, the box cascade
    /// 444; at σ = 5 the recursive 123, separable 295, box 457; at σ = 100 recursive 297 (block
    /// 64×2), box 1529, separable 4973. The recursive filter holds the bound from σ = 4 to 100;
    /// beyond, its edges drift (up to 21 levels at σ 500 on small images: the CPU tests), and the
    /// box cascade, within bound up to σ 2000, is the fastest that holds it — on the GPU while its
    /// tile fits in shared memory (it stages 2·reach pixels a row; the blur demo falls back to the
    /// recursive filter beyond, and says so).
    pub fn fastest_for(sigma: f64) -> Filter {
        if sigma < super::cpu::MIN_RECURSIVE_SIGMA {
            Filter::Separable
        } else if sigma <= RECURSIVE_MAX_SIGMA {
            Filter::Recursive
        } else {
            Filter::Box
        }
    }

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

/// Bytes per pixel of the intermediate between the two passes: RGBA8 goes through value × 256 as
/// four 16-bit integers, RGBA32F through float4.
pub fn intermediate_bytes(filter: Filter, format: PixelFormat) -> usize {
    match (filter, format) {
        (Filter::Recursive, PixelFormat::Rgba8) => 8,
        _ => 16,
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
    /// Rows per segment of the recursive filter (`None`: [`auto_recursive_segment`]).
    pub segment: Option<u32>,
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
                let (function, target) = match (output, pair) {
                    (Output::Buffer(span), false) => (&mut self.recursive_second_to_buffer, span.ptr),
                    (Output::Surface(surface), false) => (&mut self.recursive_second_to_surface, surface),
                    (Output::Buffer(span), true) => (&mut self.recursive_pair_second_to_buffer, span.ptr),
                    (Output::Surface(surface), true) => (&mut self.recursive_pair_second_to_surface, surface),
                };
                let mut second = [arg(&scratch.ptr), arg(&target), arg(&h), arg(&w), arg(&params)];
                // SAFETY: matches blur_recursive[_pair]_second_*(const mid_pixel*, packed_pixel* |
                // cudaSurfaceObject_t, int, int, Recursive) on the h×w transposed scratch; it
                // writes the w×h output (transposing back); packed_pixel is this format's pixel.
                unsafe { function.launch(stream, &limits, &launches[1], &mut second) }
            }
        }
    }
}

/// The launches `job` makes with kernels of `format` and `pixels_per_thread`: one for naive, two
/// row passes otherwise (the second on the transposed image).
pub fn launches(format: PixelFormat, pixels_per_thread: u32, job: &Job) -> Vec<LaunchConfig> {
    let [width, height] = job.size;
    let [bx, by] = job.block;
    match job.filter {
        Filter::Naive => vec![LaunchConfig::for_grid_2d(width, height, job.block)],
        Filter::Recursive => {
            let columns = (bx.saturating_mul(by) / 2).max(1);
            let segment = job.segment.unwrap_or_else(|| auto_recursive_segment(format, job.block)).max(1);
            let shared = recursive_shared_bytes(format, job.block, segment);
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
            let tile = bx.saturating_mul(pixels_per_thread);
            // As tile_span() in blur.cu: padded for the register window, rounded up to odd.
            let span = (tile.saturating_add(reach.saturating_mul(2)).saturating_add(pixels_per_thread)) | 1;
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

/// Checks `job`'s launches against `limits` and the attributes of the two kernels it runs (for
/// naive, the one kernel twice); the message names the limit and what to change.
pub fn validate_job(
    format: PixelFormat,
    pixels_per_thread: u32,
    limits: &DeviceLimits,
    attributes: [&FunctionAttributes; 2],
    job: &Job,
) -> Result<()> {
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
    if job.filter == Filter::Recursive {
        if !(u64::from(job.block[0]) * u64::from(job.block[1])).is_multiple_of(64) {
            return Err(Error::InvalidInput(format!(
                "the recursive filter pairs a forward and a backward warp on every 32 columns, so block.x × block.y \
                 must be a multiple of 64 (not {} × {})",
                job.block[0], job.block[1]
            )));
        }
        if let Some(segment) = job.segment {
            check_recursive_segment(format, segment)?;
        }
    }
    for (config, function) in launches(format, pixels_per_thread, job).iter().zip(attributes) {
        config.validate(limits, function).map_err(|e| {
            let hint = match job.filter {
                Filter::Recursive => {
                    let segment = job.segment.unwrap_or_else(|| auto_recursive_segment(format, job.block));
                    let columns = u64::from(job.block[0]) * u64::from(job.block[1]) / 2;
                    let chosen = if job.segment.is_some() { "set by --segment" } else { "the automatic choice" };
                    let smallest = smallest_recursive_segment(format);
                    let fix = if segment > smallest {
                        format!("lower --segment (a power of two ≥ {smallest}) or use fewer threads per block")
                    } else {
                        "use fewer threads per block".to_owned()
                    };
                    format!(
                        "The recursive filter keeps a segment of {segment} rows ({chosen}) × (threads/2 + 1 = {}) \
                         columns × {} bytes = {} bytes in shared memory: {fix}",
                        columns + 1,
                        recursive_slot_bytes(format),
                        recursive_shared_bytes(format, job.block, segment),
                    )
                }
                _ => format!(
                    "The {} filter stages a tile of block.y rows × (block.x·{pixels_per_thread} + 2·reach) pixels: \
                     lower block.y or the radius",
                    job.filter.name(),
                ),
            };
            Error::InvalidInput(format!("{e}. {hint}"))
        })?;
    }
    Ok(())
}

fn check_len(name: &str, span: DeviceSpan, needed: usize) -> Result<()> {
    if span.bytes < needed {
        return Err(Error::InvalidInput(format!("blur: {name} buffer has {} bytes, {needed} needed", span.bytes)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

    use super::*;

    /// Runs one walker of the kernel's recursion over `line` in f64 with the coefficients as the
    /// kernel gets them, in either form, from the steady state of the first sample; returns its
    /// share of each output.
    fn walk(params: &RecursiveParams, backward: bool, pair: bool, line: &[f64]) -> Vec<f64> {
        let f = |v: f32| f64::from(v);
        let edge = line[0];
        let (mut real, mut re, mut im) =
            (f(params.steady) * edge, f(params.steady_re) * edge, f(params.steady_im) * edge);
        let (mut v1, mut v2) = (f(params.pair_steady) * edge, f(params.pair_steady) * edge);
        let weight = if backward { f(params.anti) } else { f(params.causal) };
        let (weight_re, weight_im) =
            if backward { (f(params.anti_re), f(params.anti_im)) } else { (f(params.causal_re), f(params.causal_im)) };
        let (g0, g1) =
            if backward { (f(params.anti_g0), f(params.anti_g1)) } else { (f(params.causal_g0), f(params.causal_g1)) };
        let (pole, pr, pi) = (f(params.pole), f(params.pole_re), f(params.pole_im));
        let (a1, a2) = (f(params.pair_a1), f(params.pair_a2));
        line.iter()
            .map(|&x| {
                real = pole * real + x;
                if pair {
                    let v = a1 * v1 + a2 * v2 + x;
                    (v2, v1) = (v1, v);
                    weight * real + g0 * v1 + g1 * v2
                } else {
                    (re, im) = (pr * re - pi * im + x, pr * im + pi * re);
                    weight * real + weight_re * re - weight_im * im
                }
            })
            .collect()
    }

    #[test]
    fn the_pair_form_walks_the_same_filter_as_the_complex_form() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let line: Vec<f64> = (0..600)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state % 256) as f64
            })
            .collect();
        for sigma in [4.0, 10.0, 25.0, 40.0, 60.0, 90.0, 100.0] {
            let params = RecursiveParams::new(&RecursiveGaussian::new(sigma), PixelFormat::Rgba8, 128);
            assert!(uses_pair_form(PixelFormat::Rgba8, sigma), "σ {sigma}");
            for backward in [false, true] {
                let complex = walk(&params, backward, false, &line);
                let pair = walk(&params, backward, true, &line);
                let worst = complex.iter().zip(&pair).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
                // Both from the same f64 poles, rounded to f32 differently. The pair's DC gain
                // 1 / (1 − a1 − a2) is sensitive to that rounding as σ grows: 2e-3 of a level at
                // σ = 90, 5e-3 to 1.3e-2 between σ = 110 and 200, hence the form's σ limit.
                assert!(worst < 5e-3, "σ {sigma} backward {backward}: {worst} levels apart");
                assert!(complex.iter().all(|v| v.is_finite()));
            }
        }
        assert!(!uses_pair_form(PixelFormat::Rgba8, 101.0));
        assert!(!uses_pair_form(PixelFormat::Rgba32f, 10.0));
    }

    /// H200-like limits (227 KiB of shared memory per block with opt-in).
    const LIMITS: DeviceLimits = DeviceLimits {
        max_threads_per_block: 1024,
        max_block_dim: [1024, 1024, 64],
        max_grid_dim: [2_147_483_647, 65535, 65535],
        shared_memory_per_block_optin: 232_448,
    };

    fn job(block: [u32; 2], segment: Option<u32>) -> Job {
        Job {
            filter: Filter::Recursive,
            size: [3840, 2160],
            radius: 30,
            box_radii: [1; 4],
            recursive: RecursiveGaussian::new(10.0),
            block,
            segment,
        }
    }

    fn check(format: PixelFormat, block: [u32; 2], segment: Option<u32>) -> Result<()> {
        let attributes = FunctionAttributes { max_threads_per_block: 1024, ..Default::default() };
        validate_job(format, 5, &LIMITS, [&attributes, &attributes], &job(block, segment))
    }

    #[test]
    fn segments_must_be_powers_of_two_of_at_least_two_chunks() {
        for segment in [32, 64, 128, 256, 512, 1 << 20] {
            assert!(check_recursive_segment(PixelFormat::Rgba8, segment).is_ok(), "{segment}");
        }
        assert!(check_recursive_segment(PixelFormat::Rgba32f, 16).is_ok());
        for (format, segment) in [
            (PixelFormat::Rgba8, 0),
            (PixelFormat::Rgba8, 16),
            (PixelFormat::Rgba8, 48),
            (PixelFormat::Rgba8, 100),
            (PixelFormat::Rgba32f, 8),
            (PixelFormat::Rgba32f, 24),
            (PixelFormat::Rgba8, u32::MAX),
        ] {
            let message = check_recursive_segment(format, segment).unwrap_err().to_string();
            assert!(message.contains(&format!("--segment {segment}")), "{message}");
            assert!(message.contains("power of two"), "{message}");
            let smallest = smallest_recursive_segment(format);
            assert!(message.contains(&format!("at least {smallest}")), "{message}");
            assert!(check(format, [64, 2], Some(segment)).is_err(), "the launch check refuses {segment} too");
        }
    }

    #[test]
    fn the_automatic_segment_is_unchanged_and_fits_the_budget() {
        // segment × (threads/2 + 1) × 8 bytes ≤ 72 KiB for RGBA8.
        assert_eq!(auto_recursive_segment(PixelFormat::Rgba8, [64, 4]), 64);
        assert_eq!(auto_recursive_segment(PixelFormat::Rgba8, [64, 2]), 128);
        assert_eq!(auto_recursive_segment(PixelFormat::Rgba8, [32, 4]), 128);
        assert_eq!(auto_recursive_segment(PixelFormat::Rgba8, [64, 1]), 256);
        assert_eq!(auto_recursive_segment(PixelFormat::Rgba32f, [64, 2]), 64);
        assert_eq!(auto_recursive_segment(PixelFormat::Rgba8, [1024, 1]), 32, "never below two chunks");
        let launches = launches(PixelFormat::Rgba8, 5, &job([64, 2], None));
        assert_eq!(launches[0].grid, [3840 / 64, 2160u32.div_ceil(128), 1]);
        assert_eq!(launches[0].shared_memory_bytes, 128 * 65 * 8);
        assert_eq!(launches[1].grid, [2160u32.div_ceil(64), 3840 / 128, 1]);
    }

    #[test]
    fn a_segment_set_by_hand_is_used_and_its_shared_memory_checked() {
        let launches = launches(PixelFormat::Rgba8, 5, &job([64, 4], Some(256)));
        assert_eq!(launches[0].shared_memory_bytes, 256 * 129 * 8);
        assert_eq!(launches[0].grid[1], 2160u32.div_ceil(256));
        assert!(check(PixelFormat::Rgba8, [64, 4], Some(128)).is_ok());
        assert!(check(PixelFormat::Rgba8, [64, 2], Some(256)).is_ok(), "beyond the budget, within the device");
        // 512 × 129 × 8 = 528384 bytes: more than a block can have.
        let message = check(PixelFormat::Rgba8, [64, 4], Some(512)).unwrap_err().to_string();
        assert!(message.contains("shared memory") && message.contains("528384 bytes"), "{message}");
        assert!(message.contains("lower --segment") && message.contains("fewer threads per block"), "{message}");
        assert!(message.contains("set by --segment"), "{message}");
    }
}
