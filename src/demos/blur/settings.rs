//! Everything that defines a blur, with the checks that say which value is wrong and what is
//! allowed.

use std::path::PathBuf;

use super::kernels::{Filter, Job};
use super::{Blur, cpu, kernels};
use crate::demo_kit::{Demo, DemoEnv, Output, Settings};
use crate::numbers::Ranged;
use crate::output::OutputKind;
use crate::pixel::PixelFormat;
use crate::error::{Error, Result};
use crate::graphics::GraphicsApi;

/// Smallest and largest σ accepted.
pub const SIGMA_RANGE: (f64, f64) = (0.3, 2000.0);

/// σ as the command line takes it.
pub const SIGMA: Ranged<f64> = Ranged::new(SIGMA_RANGE.0, SIGMA_RANGE.1).unit("pixels");

/// Largest radius accepted (the separable and box passes stage 2·radius extra pixels per tile row).
pub const MAX_RADIUS: u32 = 4096;

/// `--radius`.
pub const RADIUS: Ranged<u32> = Ranged::new(1, MAX_RADIUS).unit("pixels");

/// `--segment`: the rows of a recursive filter's tile. Whether it is a power of two of at least
/// the format's smallest is checked with the format (`check_recursive_segment`), and whether its
/// shared memory fits, against the device.
pub const SEGMENT: Ranged<u32> = Ranged::new(16, 8192).unit("rows");

/// `--pixels-per-thread`: outputs each thread computes per tile row.
pub const PIXELS_PER_THREAD: Ranged<u32> = Ranged::new(1, 8).unit("pixels");

/// `--split`: where the before | after line is, as a fraction of the view width.
pub const SPLIT: Ranged<f32> = Ranged::new(0.0, 1.0);

/// The naive filter's cost grows as (2r + 1)²: beyond this radius it would stall the app.
pub const MAX_NAIVE_RADIUS: u32 = 100;

/// The box cascade can't represent σ below this (its boxes would be 1 pixel wide).
pub const MIN_BOX_SIGMA: f64 = 2.0;

/// How kernel output reaches the texture shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Route {
    /// Into the texture itself, through a surface object (interop only).
    Texture,
    /// Into a pixel-buffer object, then `glTexSubImage2D` from it into the texture.
    Pbo,
}

impl Route {
    /// The route in words, naming the calls of `api`, which draws it.
    pub fn label(self, api: GraphicsApi) -> &'static str {
        crate::transfer::image_route_words(self == Route::Texture, api)
    }
}

/// Everything that defines a blur; each is also a command-line flag.
#[derive(Debug, Clone, PartialEq)]
pub struct BlurSettings {
    /// Image file (`None`: the generated test pattern).
    pub image: Option<PathBuf>,
    /// Gaussian σ in pixels.
    pub sigma: f64,
    /// Kernel radius (`None`: ⌈3σ⌉).
    pub radius: Option<u32>,
    /// Which filter (when `auto_filter`, the one [`Filter::fastest_for`] σ picks).
    pub filter: Filter,
    /// Pick the filter by σ: the fastest whose accuracy bound holds (`--variant auto`).
    pub auto_filter: bool,
    /// How results reach the texture (texture falls back to pbo off the interop path).
    pub route: Route,
    /// Pixel format of the image, the kernels and the textures.
    pub format: PixelFormat,
    /// Threads per block in x and y (`None`: the filter's own default, [`Filter::default_block`]).
    pub block: Option<[u32; 2]>,
    /// Rows per segment of the recursive filter, its tile (`None`: the largest power of two up to
    /// 256 whose shared memory fits a budget for the block; see [`kernels::auto_recursive_segment`]).
    /// Other filters ignore it.
    pub segment: Option<u32>,
    /// Outputs each thread computes per tile row.
    pub pixels_per_thread: u32,
    /// Write the blurred image here at full resolution when the run ends.
    pub output: Option<PathBuf>,
    /// Before/after split line, as a fraction of the view width.
    pub split: f32,
}

impl Default for BlurSettings {
    fn default() -> Self {
        Self {
            image: None,
            sigma: 3.0,
            radius: None,
            filter: Filter::Separable,
            auto_filter: false,
            route: Route::Texture,
            format: PixelFormat::Rgba8,
            block: None,
            segment: None,
            pixels_per_thread: 5,
            output: None,
            split: 0.5,
        }
    }
}

impl BlurSettings {
    /// What a user gets without choosing: the filter picked by σ, each filter's own block.
    pub fn automatic() -> Self {
        Self { auto_filter: true, ..Self::default() }.resolved()
    }

    /// Picks the filter by σ when `auto_filter` is on.
    pub fn resolve(&mut self) {
        if self.auto_filter {
            self.filter = Filter::fastest_for(self.sigma);
        }
    }

    /// These settings with the filter picked by σ when `auto_filter` is on.
    pub fn resolved(mut self) -> Self {
        self.resolve();
        self
    }

    /// Threads per block in use: the one set, else the filter's default.
    pub fn block(&self) -> [u32; 2] {
        self.block.unwrap_or(self.filter.default_block())
    }

    /// The radius in use: the one set, else ⌈3σ⌉.
    pub fn radius(&self) -> u32 {
        self.radius.unwrap_or_else(|| cpu::default_radius(self.sigma) as u32)
    }

    /// Checks σ, radius and the filter's own limits; the message says what is allowed.
    pub fn validate(&self) -> Result<()> {
        SIGMA.check_value("σ", self.sigma).map_err(Error::InvalidInput)?;
        let radius = self.radius();
        if self.radius == Some(0) || (self.filter.uses_radius() && radius > MAX_RADIUS) {
            let why = match self.radius {
                Some(_) => format!("--radius must be 1..={MAX_RADIUS}, not {radius}"),
                None => format!(
                    "the {} filter's radius ⌈3σ⌉ = {radius} is beyond its limit of {MAX_RADIUS} (a tile row stages 2r \
                     extra pixels)",
                    self.filter.name()
                ),
            };
            return Err(Error::InvalidInput(format!(
                "{why}: use --variant recursive or box (their cost does not depend on σ; --variant auto picks one), or \
                 --radius {MAX_RADIUS} or less to cut the Gaussian short"
            )));
        }
        if self.filter == Filter::Naive && radius > MAX_NAIVE_RADIUS {
            return Err(Error::InvalidInput(format!(
                "the naive filter's cost grows as (2r + 1)²: radius {radius} is beyond its limit of {MAX_NAIVE_RADIUS}; \
                 use the separable or box filter for larger σ"
            )));
        }
        if self.filter == Filter::Recursive && self.sigma < cpu::MIN_RECURSIVE_SIGMA {
            return Err(Error::InvalidInput(format!(
                "the recursive filter needs σ ≥ {} (below it the recursion departs from the Gaussian by more than 6 levels); \
                 use the separable filter",
                cpu::MIN_RECURSIVE_SIGMA
            )));
        }
        if self.filter == Filter::Box && self.sigma < MIN_BOX_SIGMA {
            return Err(Error::InvalidInput(format!(
                "the box cascade needs σ ≥ {MIN_BOX_SIGMA} (smaller σ would need boxes under one pixel); use the separable filter"
            )));
        }
        if let Some(segment) = self.segment {
            // Checked for every filter, so a bad value is said even where it is not used yet.
            kernels::check_recursive_segment(self.format, segment)?;
        }
        SPLIT.check_value("split", self.split).map_err(Error::InvalidInput)?;
        Ok(())
    }

    /// The kernel job for an image of `size`.
    pub fn job(&self, size: [u32; 2]) -> Job {
        Job {
            filter: self.filter,
            size,
            radius: self.radius(),
            box_radii: cpu::box_radii(self.sigma).0,
            recursive: cpu::RecursiveGaussian::new(self.sigma),
            block: self.block(),
            segment: self.segment,
        }
    }
}

impl Settings for BlurSettings {
    const NAME: &'static str = "blur";

    fn create(&self, env: &DemoEnv<'_>) -> Result<Box<dyn Demo>> {
        Ok(Box::new(Blur::new(env, self.clone())?))
    }

    fn outputs(&self) -> Vec<Output> {
        let output = |path: &PathBuf| Output { path: path.clone(), kind: OutputKind::Image, flag: "--output" };
        self.output.iter().map(output).collect()
    }

    /// Every frame filters the same image the same way: one frame gives the output.
    fn headless_frames(&self) -> Option<u32> {
        self.output.is_some().then_some(1)
    }
}
