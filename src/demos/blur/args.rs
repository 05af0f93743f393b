//! The `blur` and `bench blur` commands' flags.

use std::path::PathBuf;

use clap::Args;

use super::bench::{self, BlurBench};
use super::kernels::Filter;
use super::settings::{PIXELS_PER_THREAD, RADIUS, SEGMENT, SIGMA, SPLIT};
use super::{BlurSettings, Route};
use crate::error::Result;
use crate::args::{
    CUDA_BLOCK, CudaArgs, PathFlag, PathNeed, REPEATS, RunArgs, SIZE, WARMUP, pair_text,
};
use crate::demo_kit::{DemoArgs, DemoSpec};
use crate::demo_kit::bench::{BenchReport, FrameRunner};
use crate::numbers::Ranged;
use crate::pixel::PixelFormat;

#[derive(Args, Debug)]
/// `interop-lab blur`.
pub struct BlurArgs {
    /// Options every demo run shares.
    #[command(flatten)]
    pub run: RunArgs,
    /// PNG or JPEG to blur (default: a generated test pattern).
    #[arg(long, value_name = "FILE")]
    pub image: Option<PathBuf>,
    /// Gaussian σ, 0.3 to 2000 pixels.
    #[arg(long, default_value_t = 3.0, allow_negative_numbers = true, value_parser = SIGMA)]
    pub sigma: f64,
    /// Kernel radius, 1 to 4096 pixels (default: ⌈3σ⌉).
    #[arg(long, value_parser = RADIUS)]
    pub radius: Option<u32>,
    /// Filter: auto (the fastest whose accuracy bound holds at this σ: separable below 4,
    /// recursive to 100, box beyond), separable (two 1-D passes), recursive (IIR Gaussian, σ ≥ 4), box
    /// (σ-independent cascade, σ ≥ 2) or naive (full 2-D window).
    #[arg(long, value_enum, default_value_t = FilterChoice::Auto)]
    pub variant: FilterChoice,
    /// How results reach the texture: texture (CUDA writes it through a surface: GL interop and
    /// Vulkan) or pbo (default: texture where CUDA can write it, else pbo).
    #[arg(long, value_enum)]
    pub route: Option<Route>,
    /// Pixel format of image, kernels and textures.
    #[arg(long, value_enum, default_value_t = PixelFormat::Rgba8)]
    pub format: PixelFormat,
    /// CUDA threads per block, XxY, each 1 to 1024 threads (default: each filter's fastest, 64x2
    /// for recursive, 64x4 for the others).
    ///
    /// y a power of two for separable and box; x·y a multiple of 64 for recursive; the device
    /// checks the threads of the whole block when the kernel launches.
    #[arg(long, value_parser = CUDA_BLOCK)]
    pub block: Option<[u32; 2]>,
    /// Rows per segment of the recursive filter, its tile, 16 to 8192 rows (default: the largest
    /// up to 256 that fits a shared-memory budget for the block).
    ///
    /// A power of two ≥ 32 for rgba8, ≥ 16 for rgba32f.
    #[arg(long, value_name = "ROWS", value_parser = SEGMENT)]
    pub segment: Option<u32>,
    /// Outputs each thread computes per tile row, 1 to 8 pixels (the tile is block.x × this wide;
    /// odd avoids shared-memory bank conflicts).
    #[arg(long, default_value_t = 5, value_parser = PIXELS_PER_THREAD)]
    pub pixels_per_thread: u32,
    /// Write the blurred image when the run ends: PNG (16-bit for rgba32f) or JPEG, by the
    /// extension. Headless without --frames, one frame is rendered.
    #[arg(long, value_name = "FILE.png")]
    pub output: Option<PathBuf>,
    /// Before | after split line, 0 to 1 (a fraction of the view width).
    #[arg(long, default_value_t = 0.5, value_parser = SPLIT)]
    pub split: f32,
}

impl DemoArgs for BlurArgs {
    fn demo_run(&self) -> Result<(RunArgs, DemoSpec)> {
        Ok((self.run.clone().with_path_flags(self.path_flags()), DemoSpec::new(self.settings())))
    }
}

impl BlurArgs {
    /// The flags typed that only some paths use.
    pub fn path_flags(&self) -> Vec<PathFlag> {
        let mut flags = Vec::new();
        if self.route == Some(Route::Texture) {
            flags.push(PathFlag::new("--route texture", PathNeed::TextureInPlace));
        }
        if let Some(block) = self.block {
            flags.push(PathFlag::new(format!("--block {}", pair_text(block)), PathNeed::Cuda));
        }
        if let Some(segment) = self.segment {
            flags.push(PathFlag::new(format!("--segment {segment}"), PathNeed::Cuda));
        }
        flags
    }

    /// The settings these flags ask for.
    pub fn settings(&self) -> BlurSettings {
        BlurSettings {
            image: self.image.clone(),
            sigma: self.sigma,
            radius: self.radius,
            filter: self.variant.filter().unwrap_or(Filter::Separable),
            auto_filter: self.variant.filter().is_none(),
            route: self.route.unwrap_or(Route::Texture),
            format: self.format,
            block: self.block,
            segment: self.segment,
            pixels_per_thread: self.pixels_per_thread,
            output: self.output.clone(),
            split: self.split,
        }
        .resolved()
    }
}

/// `--variant`: a filter, or auto.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FilterChoice {
    /// The fastest filter whose accuracy bound holds at the σ asked for.
    Auto,
    /// Two 1-D Gaussian passes.
    Separable,
    /// Recursive (IIR) Gaussian, σ ≥ 4.
    Recursive,
    /// Four-box cascade, σ ≥ 2.
    Box,
    /// Full 2-D window.
    Naive,
}

impl FilterChoice {
    /// The filter chosen by hand, `None` for auto.
    pub fn filter(self) -> Option<Filter> {
        match self {
            FilterChoice::Auto => None,
            FilterChoice::Separable => Some(Filter::Separable),
            FilterChoice::Recursive => Some(Filter::Recursive),
            FilterChoice::Box => Some(Filter::Box),
            FilterChoice::Naive => Some(Filter::Naive),
        }
    }
}

#[derive(Args, Debug)]
/// `interop-lab bench blur`.
pub struct BlurBenchArgs {
    /// Image size, WIDTHxHEIGHT, each 1 to 16384 pixels (a generated test pattern).
    #[arg(long, value_parser = SIZE, default_value = "3840x2160")]
    pub size: [u32; 2],
    /// σ values, comma-separated, each 0.3 to 2000 pixels.
    #[arg(long, value_delimiter = ',', default_value = "2,5,10,25,50,100", value_parser = SIGMA)]
    pub sigma: Vec<f64>,
    /// Pixel format.
    #[arg(long, value_enum, default_value_t = PixelFormat::Rgba8)]
    pub format: PixelFormat,
    /// Filters to time (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub variant: Vec<Filter>,
    /// CUDA threads per block, XxY, each 1 to 1024 threads (default: each filter's own, 64x2
    /// recursive, 64x4 the others).
    #[arg(long, value_parser = CUDA_BLOCK)]
    pub block: Option<[u32; 2]>,
    /// Rows per segment of the recursive filter, its tile, 16 to 8192 rows (default: the largest
    /// up to 256 that fits a shared-memory budget for the block).
    ///
    /// A power of two ≥ 32 for rgba8, ≥ 16 for rgba32f.
    #[arg(long, value_name = "ROWS", value_parser = SEGMENT)]
    pub segment: Option<u32>,
    /// Outputs each thread computes per tile row, 1 to 8 pixels.
    #[arg(long, default_value_t = 5, value_parser = PIXELS_PER_THREAD)]
    pub pixels_per_thread: u32,
    /// Untimed runs before timing, 0 to 1000 runs.
    #[arg(long, default_value_t = 3, value_parser = WARMUP)]
    pub warmup: u32,
    /// Timed runs (the median is reported), 1 to 10000 runs.
    #[arg(long, default_value_t = 21, value_parser = REPEATS)]
    pub repeats: u32,
    /// Headless frames per route, 0 or more frames (0: skip).
    #[arg(long, default_value_t = 200, value_parser = Ranged::<u32>::at_least(0).unit("frames"))]
    pub frames: u32,
    /// Write the results as JSON.
    #[arg(long, value_name = "FILE.json")]
    pub json: Option<PathBuf>,
    /// Write each frame run's anatomy (its last 120 frames) as a Chrome trace into this folder,
    /// one file per route: open them in <https://ui.perfetto.dev>. CUDA only: the CPU backend runs no
    /// frames, writes no traces and makes no folder.
    #[arg(long, value_name = "DIR")]
    pub trace_dir: Option<PathBuf>,
    /// Backend and device.
    #[command(flatten)]
    pub cuda: CudaArgs,
}

impl BlurBenchArgs {
    /// Runs the benchmark; `frames` renders the full-frame part headless.
    pub fn run(&self, frames: FrameRunner<'_>, stop: &crate::stop::StopRequest) -> Result<BenchReport> {
        // --trace-dir is checked once the backend is known: the CPU backend writes no traces.
        crate::output::check_optional(&self.json, crate::output::OutputKind::Data, "--json")?;
        bench::blur(
            &BlurBench {
                size: self.size,
                sigmas: self.sigma.clone(),
                format: self.format,
                filters: self.variant.clone(),
                block: self.block,
                segment: self.segment,
                pixels_per_thread: self.pixels_per_thread,
                warmup: self.warmup,
                repeats: self.repeats,
                frames: self.frames,
                cuda: self.cuda.options(),
                json: self.json.clone(),
                trace_dir: self.trace_dir.clone(),
                stop: stop.clone(),
            },
            frames,
        )
    }
}
