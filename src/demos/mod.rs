//! The demos the app knows, one folder each behind the [`Demo`](crate::demo_kit::Demo) trait. A demo
//! owns its kernels, its buffers and images (made through the renderer in use), its panel and its
//! CPU twin. The registry below is the one place that names them all: adding a demo is its folder
//! and one line there. Each folder gives the registry its command's flags ([`DemoArgs`]), its
//! `default_spec()` and its `KERNELS`, and optionally a benchmark (`bench`).

use clap::Subcommand;

use crate::args::RunArgs;
use crate::demo_kit::bench::{BenchReport, FrameRunner};
use crate::demo_kit::{DemoArgs, DemoSpec};
use crate::error::{Error, Result};
use crate::sources::SourceFile;
use crate::stop::StopRequest;

/// The registry: one line per demo, in menu order — its folder, its command (with the command's
/// help) and, optionally, its benchmark (`interop-lab bench NAME`, with that command's help).
macro_rules! demos {
    ($($module:ident: $variant:ident($args:ty) $help:literal $(, bench($bench:ty) $bench_help:literal)?;)*) => {
        $(pub mod $module;)*

        /// The demos the app knows, in menu order.
        pub const NAMES: &[&str] = &[$(stringify!($module)),*];

        /// Every demo's kernel files, in menu order.
        pub const KERNELS: &[&[SourceFile]] = &[$($module::KERNELS),*];

        /// Demo `name` with its default settings.
        pub fn default_spec(name: &str) -> Result<DemoSpec> {
            match name {
                $(stringify!($module) => Ok($module::default_spec()),)*
                other => Err(Error::InvalidInput(format!("unknown demo {other:?}; the demos are {NAMES:?}"))),
            }
        }

        /// Each demo as a command of its own, with its flags.
        #[derive(Subcommand, Debug)]
        pub enum DemoCommand {
            $(#[doc = $help] $variant($args),)*
        }

        impl DemoCommand {
            /// The run options and the demo with the settings the flags ask for.
            pub fn run(&self) -> Result<(RunArgs, DemoSpec)> {
                match self {
                    $(Self::$variant(args) => args.demo_run(),)*
                }
            }
        }

        /// Each demo's benchmark as a command of its own.
        #[derive(Subcommand, Debug)]
        pub enum DemoBenchCommand {
            $($(#[doc = $bench_help] $variant($bench),)?)*
        }

        impl DemoBenchCommand {
            /// Runs the benchmark; `frames` renders its full-frame part headless; `stop` (Ctrl-C)
            /// ends it early with what was measured.
            pub fn run(&self, frames: FrameRunner<'_>, stop: &StopRequest) -> Result<BenchReport> {
                match self {
                    $($(Self::$variant(args) => <$bench>::run(args, frames, stop),)?)*
                }
            }
        }
    };
}

demos! {
    nbody: Nbody(nbody::args::NBodyArgs) "Gravity, all-pairs or a Barnes-Hut tree, integrated by CUDA straight in the vertex buffers it is drawn from.", bench(nbody::args::NBodyBenchArgs) "The n-body forces kernel over a sweep of variants, the best one's step and full frames.";
    blur: Blur(blur::args::BlurArgs) "Gaussian blur of an image, written by CUDA into the graphics API's image (or pixel buffer) and shown before | after.", bench(blur::args::BlurBenchArgs) "Every blur filter at each σ (kernels alone), then full frames per route.";
    wave: Wave(wave::args::WaveArgs) "The \"hello interop\" demo: a kernel writes a moving W×H grid of vertices into a vertex buffer.";
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A demo folder without its registry line, or a kernel file no demo (or tool) lists, fails
    /// here, not silently in `doctor` or the NVRTC tests.
    #[test]
    fn every_demo_folder_and_kernel_file_is_in_the_registry() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let names_in = |dir: &str, keep: &dyn Fn(&std::path::Path) -> Option<String>| {
            let mut names: Vec<String> = std::fs::read_dir(root.join(dir))
                .expect("dir")
                .flatten()
                .filter_map(|entry| keep(&entry.path()))
                .collect();
            names.sort();
            names
        };
        let folders = names_in("src/demos", &|path| {
            path.join("mod.rs").exists().then(|| path.file_name()?.to_str().map(str::to_owned)).flatten()
        });
        let mut registered: Vec<String> = NAMES.iter().map(|name| name.to_string()).collect();
        registered.sort();
        assert_eq!(folders, registered, "src/demos/* and the registry's lines");
        for name in NAMES {
            assert!(default_spec(name).is_ok(), "{name}");
        }

        let files = names_in("kernels", &|path| {
            (path.extension()? == "cu").then(|| path.file_name()?.to_str().map(str::to_owned)).flatten()
        });
        let mut listed: Vec<String> = crate::kernels::all().iter().map(|file| file.name.to_owned()).collect();
        listed.sort();
        assert_eq!(files, listed, "kernels/*.cu and the kernels the demos and tools list");
    }
}
