//! The compute side: the CUDA kernels with the image and the weights on the device (or the
//! kernels compiling in the background), or the CPU filters; which filter a device can launch.

use super::image::{self, SourceImage};
use super::kernels::{self, BlurKernels, Filter};
use super::{BlurSettings, KERNEL, cpu};
use crate::cuda::module::PendingCompile;
use crate::cuda::timing::EventRing;
use crate::cuda::{DeviceBuffer, Stream};
use crate::demo_kit::Pipeline;
use crate::error::{Error, Result};

/// The compute side.
pub(super) enum Engine {
    Cuda {
        kernels: Box<BlurKernels>,
        input: DeviceBuffer,
        scratch: DeviceBuffer,
        weights: DeviceBuffer,
        timer: EventRing,
    },
    /// The CPU filters' working memory, kept between frames.
    Cpu { planes: cpu::Planes },
    /// CUDA, with the kernels compiling on a background thread (a window's first start on a
    /// device): frames show the image unfiltered meanwhile. `None` once the compile failed.
    Compiling { pending: Option<PendingCompile> },
}

/// Checks that `settings` can launch with `kernels` on an image of `size`. With the filter picked
/// automatically, a box cascade whose tile does not fit in this device's shared memory (large σ:
/// it stages 2·reach pixels per row) gives way to the recursive filter, and the note says so.
pub(super) fn settle_filter(
    settings: BlurSettings,
    kernels: &BlurKernels,
    size: [u32; 2],
) -> Result<(BlurSettings, Option<String>)> {
    let refused = match kernels.validate(&settings.job(size)) {
        Ok(()) => return Ok((settings, None)),
        Err(error) => error,
    };
    if !(settings.auto_filter && settings.filter == Filter::Box) {
        return Err(refused);
    }
    let recursive = BlurSettings { filter: Filter::Recursive, ..settings };
    kernels.validate(&recursive.job(size))?;
    let note = format!(
        "auto: at σ {} the box cascade's tile does not fit in this GPU's shared memory, so the recursive filter \
         runs; beyond σ {} its edges drift from the exact Gaussian (docs/blur.md)",
        recursive.sigma,
        kernels::RECURSIVE_MAX_SIGMA
    );
    log::info!("{note}");
    Ok((recursive, Some(note)))
}

/// Kernels and device buffers for CUDA (source uploaded, weights computed), or the float image
/// for the CPU.
pub(super) fn make_engine(pipeline: &Pipeline, settings: &BlurSettings, source: &SourceImage) -> Result<Engine> {
    let Some(cuda) = pipeline.cuda() else {
        return Ok(Engine::Cpu { planes: cpu::Planes::default() });
    };
    let options = BlurKernels::options(settings.format, settings.pixels_per_thread);
    if cuda.background_compiles && cuda.compiler.cached(&KERNEL, &options)?.is_none() {
        log::info!("compiling {} in the background (first run with these options on this device)", KERNEL.name);
        return Ok(Engine::Compiling { pending: Some(cuda.compiler.compile_in_background(&KERNEL, &options)) });
    }
    let kernels = BlurKernels::load(cuda, settings.format, settings.pixels_per_thread)?;
    cuda_engine(cuda, settings, source, kernels)
}

/// The CUDA engine around `kernels`: the source on the device, scratch and weights.
pub(super) fn cuda_engine(
    cuda: &crate::runtime::CudaRuntime,
    settings: &BlurSettings,
    source: &SourceImage,
    kernels: BlurKernels,
) -> Result<Engine> {
    let pixels = source.width as usize * source.height as usize;
    let bytes = source.bytes(settings.format);
    let bytes = &*bytes;
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
        timer: EventRing::new(&cuda.context, crate::cuda::timing::TIMED_FRAMES, 3)?,
    })
}

/// The CPU backend's filter of `settings` over `source`, into `out` (tightly packed texels of
/// the settings' format); `planes` is the filters' working memory, kept between frames.
pub fn run_cpu(source: &SourceImage, settings: &BlurSettings, planes: &mut cpu::Planes, out: &mut [u8]) {
    let format = settings.format;
    let (width, height) = (source.width as usize, source.height as usize);
    let weights: Vec<f32> =
        cpu::gaussian_weights(settings.sigma, settings.radius() as usize).iter().map(|&w| w as f32).collect();
    let read = |y: usize, x: usize, pixels: &mut [[f32; 4]]| source.read_pixels(format, y, x, pixels);
    let write = |pixels: &[[f32; 4]], bytes: &mut [u8]| image::float_row_bytes(pixels, format, bytes);
    let row_len = width * format.bytes_per_pixel();
    let recursive;
    let line = match settings.filter {
        Filter::Naive => {
            return cpu::naive_rows(width, height, &weights, read, planes, out, row_len, write);
        }
        Filter::Separable => cpu::Line::Gaussian(&weights),
        Filter::Box => cpu::Line::Boxes(cpu::box_radii(settings.sigma).0),
        Filter::Recursive => {
            recursive = cpu::RecursiveGaussian::new(settings.sigma);
            cpu::Line::Recursive(&recursive)
        }
    };
    cpu::blur_lines(width, height, line, read, planes, out, row_len, write);
}
