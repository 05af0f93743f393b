//! The `wave` command's flags.

use clap::Args;

use super::{DrawMode, WaveSettings};
use crate::args::{PathFlag, PathNeed, RunArgs, pair_text, parse_pair};

#[derive(Args, Debug)]
/// `interop-lab wave`.
pub struct WaveArgs {
    /// Options every demo run shares.
    #[command(flatten)]
    pub run: RunArgs,
    /// Vertices of the wave grid, WIDTHxHEIGHT.
    #[arg(long, value_parser = parse_pair, default_value = "256x256")]
    pub vertices: [u32; 2],
    /// CUDA threads per block, XxY (default: 16x16).
    #[arg(long, value_parser = parse_pair)]
    pub block: Option<[u32; 2]>,
    /// CUDA blocks, XxY (default: enough to cover every vertex).
    #[arg(long, value_parser = parse_pair)]
    pub grid: Option<[u32; 2]>,
    /// Draw as a lit mesh or as points.
    #[arg(long, value_enum, default_value_t = DrawMode::Mesh)]
    pub mode: DrawMode,
    /// Spatial frequency of the wave.
    #[arg(long, default_value_t = 4.0, allow_negative_numbers = true)]
    pub frequency: f32,
    /// Height of the crests.
    #[arg(long, default_value_t = 0.3, allow_negative_numbers = true)]
    pub amplitude: f32,
    /// Phase speed, radians per second.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub speed: f32,
    /// Point size in pixels (points mode).
    #[arg(long, default_value_t = 2.0)]
    pub point_size: f32,
    /// Vertex buffers used in turn: from 2, GL interop maps the next frame's buffer while this
    /// frame's is drawn, hiding the map's wait for GL, and the external path's semaphores release
    /// it before this frame's draw (1: one buffer, mapped at the frame's start).
    #[arg(long, default_value_t = 1)]
    pub pipeline_depth: u32,
}

impl WaveArgs {
    /// The flags typed that only CUDA paths use.
    pub fn path_flags(&self) -> Vec<PathFlag> {
        let typed = [("--block", self.block), ("--grid", self.grid)];
        typed
            .into_iter()
            .filter_map(|(flag, value)| Some(PathFlag::new(format!("{flag} {}", pair_text(value?)), PathNeed::Cuda)))
            .collect()
    }

    /// The settings these flags ask for.
    pub fn settings(&self) -> WaveSettings {
        WaveSettings {
            width: self.vertices[0],
            height: self.vertices[1],
            frequency: self.frequency,
            amplitude: self.amplitude,
            speed: self.speed,
            block: self.block.unwrap_or(WaveSettings::default().block),
            grid: self.grid,
            mode: self.mode,
            point_size: self.point_size,
            pipeline_depth: self.pipeline_depth,
        }
    }
}
