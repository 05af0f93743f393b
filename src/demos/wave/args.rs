//! The `wave` command's flags.

use clap::Args;

use super::settings::{GRID, PARAMETER, PIPELINE_DEPTHS, POINT_SIZE, VERTICES};
use super::{DrawMode, WaveSettings};
use crate::error::Result;
use crate::args::{CUDA_BLOCK, PathFlag, PathNeed, RunArgs, pair_text};
use crate::demo_kit::{DemoArgs, DemoSpec};

#[derive(Args, Debug)]
/// `interop-lab wave`.
pub struct WaveArgs {
    /// Options every demo run shares.
    #[command(flatten)]
    pub run: RunArgs,
    /// Vertices of the wave grid, WIDTHxHEIGHT, each 1 to 8192 vertices (16777216 in all at most).
    #[arg(long, value_parser = VERTICES, default_value = "256x256")]
    pub vertices: [u32; 2],
    /// CUDA threads per block, XxY, each 1 to 1024 threads (default: 16x16; the device checks the
    /// threads of the whole block when the kernel launches).
    #[arg(long, value_parser = CUDA_BLOCK)]
    pub block: Option<[u32; 2]>,
    /// CUDA blocks, XxY, x 1 to 2147483647 blocks, y 1 to 65535 blocks (default: enough to cover
    /// every vertex).
    #[arg(long, value_parser = GRID)]
    pub grid: Option<[u32; 2]>,
    /// Draw as a lit mesh or as points.
    #[arg(long, value_enum, default_value_t = DrawMode::Mesh)]
    pub mode: DrawMode,
    /// Spatial frequency of the wave, -10000 to 10000 (radians per half the grid's width).
    #[arg(long, default_value_t = 4.0, allow_negative_numbers = true, value_parser = PARAMETER)]
    pub frequency: f32,
    /// Height of the crests, -10000 to 10000 (the grid is 2 units wide).
    #[arg(long, default_value_t = 0.3, allow_negative_numbers = true, value_parser = PARAMETER)]
    pub amplitude: f32,
    /// Phase speed, -10000 to 10000 (radians per second).
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true, value_parser = PARAMETER)]
    pub speed: f32,
    /// Point size (points mode), 0.5 to 64 pixels.
    #[arg(long, default_value_t = 2.0, value_parser = POINT_SIZE)]
    pub point_size: f32,
    /// Vertex buffers used in turn, 1 to 4 buffers (default: 3 on the Vulkan renderer, 1 on GL).
    ///
    /// From 2, GL interop maps the next frame's buffer while this frame's is drawn, hiding the
    /// map's wait for GL, and the external path's semaphores release it before this frame's draw
    /// (1: one buffer, mapped at the frame's start). The Vulkan renderer's frames in flight spread
    /// each hand-off over several frames (measured on an H100: 1,375 → 1,842 frames/s); on GL a
    /// deeper ring does not change the period (docs/frames-at-kernel-speed.md).
    #[arg(long, value_parser = PIPELINE_DEPTHS)]
    pub pipeline_depth: Option<u32>,
}

impl DemoArgs for WaveArgs {
    fn demo_run(&self) -> Result<(RunArgs, DemoSpec)> {
        Ok((self.run.clone().with_path_flags(self.path_flags()), DemoSpec::new(self.settings())))
    }
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
            pipeline_depth: self.pipeline_depth.unwrap_or(self.run.renderer.preferred_pipeline_depth()),
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
        assert_eq!(depth(&["--renderer", "vulkan"]), 3);
        assert_eq!(depth(&["--renderer", "vulkan", "--pipeline-depth", "1"]), 1, "a typed depth wins");
        assert_eq!(depth(&["--pipeline-depth", "2"]), 2);
    }
}
