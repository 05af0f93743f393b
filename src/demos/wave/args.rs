//! The `wave` command's flags.

use clap::Args;

use super::{DrawMode, WaveSettings};
use crate::args::{PathFlag, PathNeed, RunArgs, pair_text, parse_pair};
use crate::graphics::GraphicsApi;

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
    /// it before this frame's draw (1: one buffer, mapped at the frame's start). Default: 3 on
    /// the Vulkan renderer, whose frames in flight then spread each hand-off over several frames
    /// (measured on an H100: 1,375 → 1,842 frames/s), 1 on GL, where a deeper ring does not
    /// change the period (docs/frames-at-kernel-speed.md).
    #[arg(long)]
    pub pipeline_depth: Option<u32>,
}

/// The wave's default pipeline depth on the Vulkan renderer: the fastest measured (depths 1, 2, 3:
/// 1,375, 1,737, 1,842 frames/s at 1280×800 on an H100, 2026-12-06).
pub const VULKAN_PIPELINE_DEPTH: u32 = 3;

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
            pipeline_depth: self.pipeline_depth.unwrap_or(match self.run.renderer {
                GraphicsApi::Vulkan => VULKAN_PIPELINE_DEPTH,
                GraphicsApi::Gl => WaveSettings::default().pipeline_depth,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        wave: WaveArgs,
    }

    fn depth(args: &[&str]) -> u32 {
        let cli = Cli::try_parse_from([&["wave"], args].concat()).expect("flags parse");
        cli.wave.settings().pipeline_depth
    }

    #[test]
    fn the_default_pipeline_depth_is_the_fastest_measured_for_the_renderer() {
        assert_eq!(depth(&[]), 1, "GL: a deeper ring does not change its period");
        assert_eq!(depth(&["--renderer", "vulkan"]), VULKAN_PIPELINE_DEPTH);
        assert_eq!(depth(&["--renderer", "vulkan", "--pipeline-depth", "1"]), 1, "a typed depth wins");
        assert_eq!(depth(&["--pipeline-depth", "2"]), 2);
    }
}
