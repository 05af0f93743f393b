//! Everything that defines a wave frame, with the checks that say which value is wrong and what
//! is allowed.

use super::Wave;
use crate::cuda::LaunchConfig;
use crate::demo_kit::{Demo, DemoEnv, Settings};
use crate::numbers::{Pair, Ranged};
use crate::error::{Error, Result};

/// Largest grid side.
pub const MAX_SIDE: u32 = 8192;
/// Most vertices (256 MiB of float4).
pub const MAX_VERTICES: u64 = 1 << 24;

/// `--vertices`: each side of the grid (the product is checked against [`MAX_VERTICES`]).
pub const VERTICES: Pair = Pair::each(Ranged::new(1, MAX_SIDE).unit("vertices"));

/// `--grid`: CUDA blocks in x and y, up to the most any CUDA device allows (the device's own
/// limits are checked when the kernel launches).
pub const GRID: Pair = Pair::new(Ranged::new(1, i32::MAX as u32).unit("blocks"), Ranged::new(1, 65_535).unit("blocks"));

/// Frequency, amplitude and speed: finite, and small enough that the sine stays accurate in f32.
pub const PARAMETER: Ranged<f32> = Ranged::new(-1e4, 1e4);

/// Point size in pixels (points mode).
pub const POINT_SIZE: Ranged<f32> = Ranged::new(0.5, 64.0).unit("pixels");

/// How the grid is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DrawMode {
    /// One point per vertex.
    Points,
    /// Triangles between neighbouring vertices, lit.
    Mesh,
}

/// Everything that defines a wave frame; each is also a command-line flag.
#[derive(Debug, Clone, PartialEq)]
pub struct WaveSettings {
    /// Vertices per row.
    pub width: u32,
    /// Rows.
    pub height: u32,
    /// Spatial frequency.
    pub frequency: f32,
    /// Height of the crests.
    pub amplitude: f32,
    /// Phase speed, radians per second.
    pub speed: f32,
    /// Threads per block in x and y.
    pub block: [u32; 2],
    /// Blocks in x and y; `None` covers the grid exactly.
    pub grid: Option<[u32; 2]>,
    /// Points or mesh.
    pub mode: DrawMode,
    /// Point size in pixels (points mode).
    pub point_size: f32,
    /// Vertex buffers used in turn (1..=4): with 2 or more, GL interop maps the next frame's
    /// buffer while this frame's is drawn (docs/interop-map.md). No frame of latency is added:
    /// each frame draws what its own kernel wrote.
    pub pipeline_depth: u32,
}

/// Most buffers a pipeline may rotate through.
pub const MAX_PIPELINE_DEPTH: u32 = 4;

/// `--pipeline-depth`: vertex buffers used in turn.
pub const PIPELINE_DEPTHS: Ranged<u32> = Ranged::new(1, MAX_PIPELINE_DEPTH).unit("buffers");

impl Default for WaveSettings {
    fn default() -> Self {
        Self {
            width: 256,
            height: 256,
            frequency: 4.0,
            amplitude: 0.3,
            speed: 1.0,
            block: [16, 16],
            grid: None,
            mode: DrawMode::Mesh,
            point_size: 2.0,
            pipeline_depth: 1,
        }
    }
}

impl WaveSettings {
    /// Checks sizes and parameters; the message says which value is wrong and what is allowed.
    pub fn validate(&self) -> Result<()> {
        PIPELINE_DEPTHS.check_value("--pipeline-depth", self.pipeline_depth).map_err(Error::InvalidInput)?;
        if self.width == 0 || self.height == 0 || self.width > MAX_SIDE || self.height > MAX_SIDE {
            return Err(Error::InvalidInput(format!(
                "wave grid {}x{}: each side must be 1..={MAX_SIDE}",
                self.width, self.height
            )));
        }
        if u64::from(self.width) * u64::from(self.height) > MAX_VERTICES {
            return Err(Error::InvalidInput(format!(
                "wave grid {}x{} has more than {MAX_VERTICES} vertices",
                self.width, self.height
            )));
        }
        for (name, value) in [("frequency", self.frequency), ("amplitude", self.amplitude), ("speed", self.speed)] {
            PARAMETER.check_value(&format!("wave {name}"), value).map_err(Error::InvalidInput)?;
        }
        POINT_SIZE.check_value("point size", self.point_size).map_err(Error::InvalidInput)?;
        Ok(())
    }

    /// The launch configuration these settings ask for.
    pub fn launch_config(&self) -> LaunchConfig {
        let mut config = LaunchConfig::for_grid_2d(self.width, self.height, self.block);
        if let Some(grid) = self.grid {
            config.grid = [grid[0], grid[1], 1];
        }
        config
    }

    /// Vertices in the grid.
    pub fn vertices(&self) -> usize {
        self.width as usize * self.height as usize
    }
}

impl Settings for WaveSettings {
    const NAME: &'static str = "wave";

    fn create(&self, env: &DemoEnv<'_>) -> Result<Box<dyn Demo>> {
        Ok(Box::new(Wave::new(env, self.clone())?))
    }
}
