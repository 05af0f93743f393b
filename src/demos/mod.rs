//! The demos the app knows, one folder each behind the [`Demo`](crate::demo_kit::Demo) trait. A demo
//! owns its kernels, its buffers and images (made through the renderer in use), its panel and its
//! CPU twin; this registry is the one place
//! that names them all, so adding a demo touches this file and its own folder.

pub mod blur;
pub mod nbody;
pub mod wave;

use clap::Subcommand;

use crate::args::RunArgs;
use crate::demo_kit::DemoSpec;
use crate::demo_kit::bench::{BenchReport, FrameRunner};
use crate::stop::StopRequest;
use crate::{Error, Result};

/// The demos the app knows, in menu order.
pub const NAMES: &[&str] = &["nbody", "blur", "wave"];

/// Demo `name` with its default settings.
pub fn default_spec(name: &str) -> Result<DemoSpec> {
    match name {
        "blur" => Ok(DemoSpec::new(blur::BlurSettings::automatic())),
        "nbody" => Ok(DemoSpec::new(nbody::NBodySettings::default())),
        "wave" => Ok(DemoSpec::new(wave::WaveSettings::default())),
        other => Err(Error::InvalidInput(format!("unknown demo {other:?}; the demos are {NAMES:?}"))),
    }
}

/// Each demo as a command of its own, with its flags.
#[derive(Subcommand, Debug)]
pub enum DemoCommand {
    /// All-pairs gravity, integrated by CUDA straight in the vertex buffers it is drawn from.
    Nbody(nbody::args::NBodyArgs),
    /// Gaussian blur of an image, written by CUDA into the graphics API's image (or pixel buffer)
    /// and shown before | after.
    Blur(blur::args::BlurArgs),
    /// The "hello interop" demo: a kernel writes a moving W×H grid of vertices into a vertex buffer.
    Wave(wave::args::WaveArgs),
}

impl DemoCommand {
    /// The run options and the demo with the settings the flags ask for.
    pub fn run(&self) -> Result<(RunArgs, DemoSpec)> {
        let (mut run, spec, flags) = match self {
            Self::Nbody(args) => (args.run_args()?, DemoSpec::new(args.settings()), args.physics.path_flags()),
            Self::Blur(args) => (args.run.clone(), DemoSpec::new(args.settings()), args.path_flags()),
            Self::Wave(args) => (args.run.clone(), DemoSpec::new(args.settings()), args.path_flags()),
        };
        run.path_flags = flags;
        Ok((run, spec))
    }
}

/// Each demo's benchmark as a command of its own.
#[derive(Subcommand, Debug)]
pub enum DemoBenchCommand {
    /// The n-body forces kernel over a sweep of variants, the best one's step and full frames.
    Nbody(nbody::args::NBodyBenchArgs),
    /// Every blur filter at each σ (kernels alone), then full frames per route.
    Blur(blur::args::BlurBenchArgs),
}

impl DemoBenchCommand {
    /// Runs the benchmark; `frames` renders its full-frame part headless; `stop` (Ctrl-C) ends
    /// it early with what was measured.
    pub fn run(&self, frames: FrameRunner<'_>, stop: &StopRequest) -> Result<BenchReport> {
        match self {
            Self::Nbody(args) => args.run(frames, stop),
            Self::Blur(args) => args.run(frames, stop),
        }
    }
}
