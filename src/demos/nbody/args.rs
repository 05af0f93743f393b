//! The `nbody` and `bench nbody` commands' flags.

use std::path::PathBuf;

use clap::Args;

use super::NBodySettings;
use super::bench;
use super::kernels::{BLOCK_SIZES, BODIES_PER_THREAD, Precision, TILE_SIZES, UNROLLS, Variant};
use super::multi;
use super::presets::Preset;
use super::settings::{BODIES, DAMPING, DEFAULT_FORCE_CHECK_EVERY, DT, GRAVITY, PIPELINE_DEPTHS, SOFTENING};
use super::sim::SLICES;
use super::tree::boxes::{DEFAULT_LEVELS, MAX_LEVELS};
use super::tree::{DEFAULT_THETA, MAX_THETA, MIN_THETA, Method};
use crate::args::{CudaArgs, PathFlag, PathNeed, RunArgs, SIZE};
use crate::demo_kit::{DemoArgs, DemoSpec};
use crate::demo_kit::bench::{BenchReport, FrameRunner};
use crate::numbers::Ranged;
use crate::runtime::{BackendRequest, CudaOptions};
use crate::error::{Error, Result};

#[derive(Args, Debug)]
/// `interop-lab nbody`.
pub struct NBodyArgs {
    /// Options every demo run shares.
    #[command(flatten)]
    pub run: RunArgs,
    /// The simulation's own settings.
    #[command(flatten)]
    pub physics: NBodyPhysicsArgs,
    /// Sprite radius, more than 0, up to 1 world units.
    #[arg(long, default_value_t = 0.006, value_parser = Ranged::<f32>::above(0.0, 1.0).unit("world units"))]
    pub point_size: f32,
    /// Brightness factor, more than 0, up to 100 (× the default look).
    #[arg(long, default_value_t = 1.0, value_parser = Ranged::<f32>::above(0.0, 100.0))]
    pub brightness: f32,
    /// Speed drawn with the hottest colour, more than 0, up to 100 (× the initial RMS speed).
    #[arg(long, default_value_t = 2.0, value_parser = Ranged::<f32>::above(0.0, 100.0))]
    pub colour_scale: f32,
    /// Draw the tree's boxes over the bodies: each node's box, written by CUDA (or the CPU backend)
    /// into a second shared buffer that the graphics API draws as lines. Without --method the tree
    /// method is chosen; with --method all-pairs there is no tree to draw (said in the log).
    #[arg(long)]
    pub draw_tree: bool,
    /// Levels of the tree drawn with --draw-tree, 1 to 14 levels (the root and those below it).
    #[arg(long, default_value_t = DEFAULT_LEVELS, value_parser = Ranged::<u32>::new(1, MAX_LEVELS).unit("levels"))]
    pub tree_levels: u32,
    /// Compute the total energy every this many steps, 0 or more steps (0: only when asked).
    #[arg(long, default_value_t = 30, value_parser = Ranged::<u32>::at_least(0).unit("steps"))]
    pub energy_every: u32,
    /// Every this many seconds, 0 to 3600 s (0: never), read the state back and keep it as the
    /// state to go back to if a body becomes NaN or infinite; with the tree method, also compare
    /// its forces for 1024 bodies with direct summation in f64 (shown in the panel, --stats and
    /// the log).
    #[arg(long, default_value_t = DEFAULT_FORCE_CHECK_EVERY, value_parser = Ranged::<f64>::new(0.0, 3600.0).unit("s"))]
    pub force_check_every: f64,
    /// Start from a saved state instead of the preset.
    #[arg(long, value_name = "FILE")]
    pub load: Option<PathBuf>,
    /// Save the state when the run ends.
    #[arg(long, value_name = "FILE")]
    pub save: Option<PathBuf>,
    /// Split the bodies across these CUDA devices, one context each (e.g. 0,1; 0,0 runs two
    /// contexts on one GPU). The first renders. Default: the GL context's device alone.
    #[arg(long, value_name = "0,1,…", value_parser = parse_device_list)]
    pub devices: Option<DeviceList>,
    /// Buffer sets the frames use in turn, 1 to 2. 2: the state on the device and two GL copies
    /// drawn in turn, the next mapped while this one is drawn, hiding the map's wait for GL (GL
    /// interop), or released by GL before this one's draw (external path with semaphores). 1: the
    /// state in the GL buffers.
    #[arg(long, default_value_t = 1, value_parser = PIPELINE_DEPTHS)]
    pub pipeline_depth: u32,
}

/// The ordinals of `--devices`.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceList(pub Vec<i32>);

/// "0,1", as typed.
impl std::fmt::Display for DeviceList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.iter().map(i32::to_string).collect::<Vec<_>>().join(","))
    }
}

fn parse_device_list(text: &str) -> std::result::Result<DeviceList, String> {
    multi::parse_devices(text).map(DeviceList)
}

/// The simulation's own settings (shared by `nbody` and `bench nbody`).
#[derive(Args, Debug, Clone)]
pub struct NBodyPhysicsArgs {
    /// Number of bodies, 1 to 16777216 bodies (default: 65536 on CUDA, 4096 on the CPU; the
    /// merger preset 1048576 on CUDA, 16384 on the CPU).
    #[arg(long, value_parser = BODIES)]
    pub bodies: Option<u32>,
    /// Initial conditions.
    #[arg(long, value_enum, default_value_t = Preset::Collision)]
    pub preset: Preset,
    /// Seed of the initial conditions, 0 or more.
    #[arg(long, default_value_t = 1, value_parser = Ranged::<u64>::at_least(0))]
    pub seed: u64,
    /// Time step, more than 0, up to 1 (simulation time units; default: the preset's).
    #[arg(long, allow_negative_numbers = true, value_parser = DT)]
    pub dt: Option<f64>,
    /// Softening length, more than 0, up to 10 (simulation length units; default: the preset's).
    #[arg(long, allow_negative_numbers = true, value_parser = SOFTENING)]
    pub softening: Option<f64>,
    /// Velocity factor per step, more than 0, up to 1 (1: no damping).
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true, value_parser = DAMPING)]
    pub damping: f64,
    /// Gravitational constant G, more than 0, up to 1000000 (simulation units).
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true, value_parser = GRAVITY)]
    pub gravity: f64,
    /// Arithmetic precision.
    #[arg(long, value_enum, default_value_t = Precision::F32)]
    pub precision: Precision,
    /// Threads per block of the forces kernel, 32 to 1024 threads, a multiple of 32 (default:
    /// autotuned, see below; 256 when another variant flag is given).
    ///
    /// Without any of the four variant flags the kernel is autotuned: the variant found fastest
    /// on this device (timed once, then kept beside the kernel cache); with some, the others
    /// default to 256 / the block size / 8 / 2.
    #[arg(long, value_parser = BLOCK_SIZES)]
    pub block_size: Option<u32>,
    /// Bodies per shared-memory tile, 1 to 8192 bodies (default: the block size).
    #[arg(long, value_parser = TILE_SIZES)]
    pub tile_size: Option<u32>,
    /// Unroll factor of the inner loop, 1 to 64 (default: autotuned, or 8).
    #[arg(long, value_parser = UNROLLS)]
    pub unroll: Option<u32>,
    /// Bodies each thread accumulates, 1 to 8 bodies (default: autotuned, or 2).
    #[arg(long, value_parser = BODIES_PER_THREAD)]
    pub bodies_per_thread: Option<u32>,
    /// Slices the j range is cut into, 1 to 64 slices (default: enough to fill the GPU).
    #[arg(long, value_parser = SLICES)]
    pub slices: Option<u32>,
    /// How the forces are summed: every pair exactly, or the Barnes-Hut tree (O(N log N)).
    /// Default: the faster for the body count, the tree from 131072 bodies on CUDA and 8192 on
    /// the CPU (and for the merger preset); the log says which.
    #[arg(long, value_enum)]
    pub method: Option<Method>,
    /// The tree's opening angle θ, 0.2 to 1.0 (a node's radius over its distance; smaller is
    /// more exact and slower).
    #[arg(long, default_value_t = DEFAULT_THETA, value_parser = THETA)]
    pub theta: f64,
}

/// The opening angles the tree takes: the range `validate_theta` holds for the panel and state.
const THETA: crate::numbers::Ranged<f64> = crate::numbers::Ranged::new(MIN_THETA, MAX_THETA);

#[derive(Args, Debug)]
/// `interop-lab bench nbody`.
pub struct NBodyBenchArgs {
    /// Body counts, comma-separated, each 1 to 16777216 bodies (default: 65536,262144 on CUDA,
    /// 4096 on the CPU; with --method tree 65536,262144,1048576,4194304,16777216 on CUDA,
    /// 16384,65536 on the CPU).
    #[arg(long, value_delimiter = ',', value_parser = BODIES)]
    pub bodies: Vec<u32>,
    /// How the forces are summed: all-pairs (a sweep of kernel variants) or the Barnes-Hut tree
    /// (each stage timed, the force error measured, all-pairs beside it where practical).
    #[arg(long, value_enum, default_value_t = Method::AllPairs)]
    pub method: Method,
    /// The tree's opening angle θ, 0.2 to 1.0 (with --method tree).
    #[arg(long, default_value_t = DEFAULT_THETA, value_parser = THETA)]
    pub theta: f64,
    /// Block sizes to try, each 32 to 1024 threads, a multiple of 32 (default: 128,256,512).
    #[arg(long, value_delimiter = ',', value_parser = BLOCK_SIZES)]
    pub block_size: Vec<u32>,
    /// Tile sizes to try, each 1 to 8192 bodies (default: the block size).
    #[arg(long, value_delimiter = ',', value_parser = TILE_SIZES)]
    pub tile_size: Vec<u32>,
    /// Unroll factors to try, each 1 to 64 (default: 4,16).
    #[arg(long, value_delimiter = ',', value_parser = UNROLLS)]
    pub unroll: Vec<u32>,
    /// Bodies per thread to try, each 1 to 8 bodies (default: 1,2,4).
    #[arg(long, value_delimiter = ',', value_parser = BODIES_PER_THREAD)]
    pub bodies_per_thread: Vec<u32>,
    /// Slice counts to try, each 1 to 64 slices (default: automatic).
    #[arg(long, value_delimiter = ',', value_parser = SLICES)]
    pub slices: Vec<u32>,
    /// Arithmetic precision.
    #[arg(long, value_enum, default_value_t = Precision::F32)]
    pub precision: Precision,
    /// Initial conditions.
    #[arg(long, value_enum, default_value_t = Preset::Plummer)]
    pub preset: Preset,
    /// Untimed launches before timing, 0 to 1000 launches.
    #[arg(long, default_value_t = 3, value_parser = crate::args::WARMUP)]
    pub warmup: u32,
    /// Timed launches (the median is reported), 1 to 10000 launches.
    #[arg(long, default_value_t = 21, value_parser = crate::args::REPEATS)]
    pub repeats: u32,
    /// Headless frames for the full-frame measurement, 0 or more frames (0: skip).
    #[arg(long, default_value_t = 300, value_parser = Ranged::<u32>::at_least(0).unit("frames"))]
    pub frames: u32,
    /// Pipeline depth of the full-frame measurement, 1 to 2 (see `nbody --pipeline-depth`).
    #[arg(long, default_value_t = 1, value_parser = PIPELINE_DEPTHS)]
    pub pipeline_depth: u32,
    /// Framebuffer size of the frame measurement, WIDTHxHEIGHT, each 1 to 16384 pixels.
    #[arg(long, value_parser = SIZE, default_value = "1280x800")]
    pub size: [u32; 2],
    /// Also time the best variant split across these CUDA devices, one context each (e.g. 0,1;
    /// 0,0 runs two contexts on one GPU), against the first alone. Default: every CUDA device,
    /// when there are several.
    #[arg(long, value_name = "0,1,…", value_parser = parse_device_list)]
    pub devices: Option<DeviceList>,
    /// Write the results as JSON.
    #[arg(long, value_name = "FILE.json")]
    pub json: Option<PathBuf>,
    /// Write each frame run's anatomy (its last 120 frames) as a Chrome trace into this folder,
    /// one file per run: open them in <https://ui.perfetto.dev>.
    #[arg(long, value_name = "DIR")]
    pub trace_dir: Option<PathBuf>,
    /// Backend and device.
    #[command(flatten)]
    pub cuda: CudaArgs,
}

impl NBodyPhysicsArgs {
    /// The variant flags typed (launch parameters: only CUDA paths use them).
    pub fn path_flags(&self) -> Vec<PathFlag> {
        [
            ("--block-size", self.block_size),
            ("--tile-size", self.tile_size),
            ("--unroll", self.unroll),
            ("--bodies-per-thread", self.bodies_per_thread),
            ("--slices", self.slices),
        ]
        .into_iter()
        .filter_map(|(flag, value)| Some(PathFlag::new(format!("{flag} {}", value?), PathNeed::Cuda)))
        .collect()
    }

    /// The forces-kernel variant the flags name, unnamed parts at their defaults.
    pub fn variant(&self) -> Variant {
        let manual = Variant::default();
        let block_size = self.block_size.unwrap_or(manual.block_size);
        Variant {
            precision: self.precision,
            block_size,
            tile_size: self.tile_size.unwrap_or(block_size),
            unroll: self.unroll.unwrap_or(manual.unroll),
            bodies_per_thread: self.bodies_per_thread.unwrap_or(manual.bodies_per_thread),
        }
    }
}

impl DemoArgs for NBodyArgs {
    fn demo_run(&self) -> Result<(RunArgs, DemoSpec)> {
        Ok((self.run_args()?.with_path_flags(self.physics.path_flags()), DemoSpec::new(self.settings())))
    }
}

impl NBodyArgs {
    /// The settings these flags ask for.
    pub fn settings(&self) -> NBodySettings {
        let p = &self.physics;
        NBodySettings {
            bodies: p.bodies,
            preset: p.preset,
            seed: p.seed,
            dt: p.dt,
            softening: p.softening,
            damping: p.damping,
            gravity: p.gravity,
            variant: p.variant(),
            auto_variant: p.block_size.is_none()
                && p.tile_size.is_none()
                && p.unroll.is_none()
                && p.bodies_per_thread.is_none(),
            slices: p.slices,
            point_size: self.point_size,
            brightness: self.brightness,
            draw_tree: self.draw_tree,
            tree_levels: self.tree_levels,
            colour_scale: self.colour_scale,
            energy_every: self.energy_every,
            force_check_every: self.force_check_every,
            load: self.load.clone(),
            save: self.save.clone(),
            devices: self.devices.as_ref().map(|list| list.0.clone()).unwrap_or_default(),
            pipeline_depth: self.pipeline_depth,
            method: p.method.unwrap_or_default(),
            auto_method: p.method.is_none(),
            theta: p.theta,
        }
    }

    /// The run options, with `--device` taken from the first of `--devices` (the device that
    /// renders) when only `--devices` is given.
    pub fn run_args(&self) -> Result<RunArgs> {
        let mut run = self.run.clone();
        if let Some(list) = &self.devices {
            run.cuda.device = first_device(run.cuda.device, &list.0)?;
            run.cuda.device_flag = Some(format!("--devices {}", list));
        }
        Ok(run)
    }
}

/// `--device` and `--devices` together: the first of `--devices` is the device the app computes
/// (and renders) on, so both must agree.
fn first_device(device: Option<i32>, devices: &[i32]) -> Result<Option<i32>> {
    match (device, devices.first()) {
        (Some(device), Some(&first)) if device != first => Err(Error::InvalidInput(format!(
            "--device {device} and --devices {} disagree: the first of --devices is the device that computes \
             and renders, so drop --device or list device {device} first",
            devices.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
        ))),
        (None, Some(&first)) => Ok(Some(first)),
        (device, _) => Ok(device),
    }
}

impl NBodyBenchArgs {
    /// Runs the benchmark; `frames` renders the full-frame part headless.
    pub fn run(&self, frames: FrameRunner<'_>, stop: &crate::stop::StopRequest) -> Result<BenchReport> {
        let args = self;
        crate::output::check_optional(&args.json, crate::output::OutputKind::Data, "--json")?;
        crate::output::check_optional(&args.trace_dir, crate::output::OutputKind::Folder, "--trace-dir")?;
        let cpu = args.cuda.backend == BackendRequest::Cpu || !crate::cuda::driver::driver_library_present();
        let tree = args.method == Method::Tree;
        let bodies = match (!args.bodies.is_empty(), cpu, tree) {
            (true, _, _) => args.bodies.clone(),
            (false, true, false) => vec![4096],
            (false, false, false) => vec![65_536, 262_144],
            (false, true, true) => vec![16_384, 65_536],
            (false, false, true) => vec![65_536, 262_144, 1 << 20, 1 << 22, 1 << 24],
        };
        let options = bench::NBodyBench {
            bodies,
            precision: args.precision,
            block_sizes: args.block_size.clone(),
            tile_sizes: args.tile_size.clone(),
            unrolls: args.unroll.clone(),
            bodies_per_thread: args.bodies_per_thread.clone(),
            slices: args.slices.clone(),
            warmup: args.warmup,
            repeats: args.repeats,
            frames: args.frames,
            pipeline_depth: args.pipeline_depth,
            size: args.size,
            preset: args.preset,
            cuda: CudaOptions {
                device: match &args.devices {
                    Some(DeviceList(devices)) => first_device(args.cuda.device, devices)?,
                    None => args.cuda.device,
                },
                device_flag: args.devices.as_ref().map(|list| format!("--devices {}", list)),
                ..args.cuda.options()
            },
            devices: args.devices.as_ref().map(|list| list.0.clone()),
            json: args.json.clone(),
            trace_dir: args.trace_dir.clone(),
            method: args.method,
            theta: args.theta,
            stop: stop.clone(),
        };
        let mut report = bench::nbody(&options, frames)?;
        if let Some(path) = &args.json {
            report.table.push_str(&format!("json: {}\n", path.display()));
        }
        Ok(report)
    }
}
