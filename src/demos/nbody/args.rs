//! The `nbody` and `bench nbody` commands' flags.

use std::path::PathBuf;

use clap::Args;

use super::NBodySettings;
use super::bench;
use super::kernels::{Precision, Variant};
use super::multi;
use super::presets::Preset;
use super::tree::{DEFAULT_THETA, Method, validate_theta};
use crate::args::{CudaArgs, PathFlag, PathNeed, RunArgs, parse_pair};
use crate::demo_kit::bench::{BenchReport, FrameRunner};
use crate::runtime::{BackendRequest, CudaOptions};
use crate::{Error, Result};

#[derive(Args, Debug)]
/// `interop-lab nbody`.
pub struct NBodyArgs {
    /// Options every demo run shares.
    #[command(flatten)]
    pub run: RunArgs,
    /// The simulation's own settings.
    #[command(flatten)]
    pub physics: NBodyPhysicsArgs,
    /// Sprite radius in world units.
    #[arg(long, default_value_t = 0.006)]
    pub point_size: f32,
    /// Brightness factor.
    #[arg(long, default_value_t = 1.0)]
    pub brightness: f32,
    /// Speed drawn with the hottest colour, as a multiple of the initial RMS speed.
    #[arg(long, default_value_t = 2.0)]
    pub colour_scale: f32,
    /// Compute the total energy every this many steps (0: only when asked).
    #[arg(long, default_value_t = 30)]
    pub energy_every: u32,
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
    /// 2: the state on the device and two GL copies drawn in turn, the next mapped while this
    /// one is drawn, hiding the map's wait for GL (GL interop), or released by GL before this
    /// one's draw (external path with semaphores). 1: the state in the GL buffers.
    #[arg(long, default_value_t = 1)]
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
    /// Number of bodies (default: 65536 on CUDA, 4096 on the CPU).
    #[arg(long)]
    pub bodies: Option<u32>,
    /// Initial conditions.
    #[arg(long, value_enum, default_value_t = Preset::Collision)]
    pub preset: Preset,
    /// Seed of the initial conditions.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Time step (default: the preset's).
    #[arg(long, allow_negative_numbers = true)]
    pub dt: Option<f64>,
    /// Softening length, > 0 (default: the preset's).
    #[arg(long, allow_negative_numbers = true)]
    pub softening: Option<f64>,
    /// Velocity factor per step, in (0, 1].
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub damping: f64,
    /// Gravitational constant.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub gravity: f64,
    /// Arithmetic precision.
    #[arg(long, value_enum, default_value_t = Precision::F32)]
    pub precision: Precision,
    /// Threads per block of the forces kernel. Without any of the four variant flags the kernel
    /// is autotuned: the variant found fastest on this device (timed once, then kept beside the
    /// kernel cache); with some, the others default to 256 / the block size / 8 / 2.
    #[arg(long)]
    pub block_size: Option<u32>,
    /// Bodies per shared-memory tile (default: the block size).
    #[arg(long)]
    pub tile_size: Option<u32>,
    /// Unroll factor of the inner loop.
    #[arg(long)]
    pub unroll: Option<u32>,
    /// Bodies each thread accumulates.
    #[arg(long)]
    pub bodies_per_thread: Option<u32>,
    /// Slices the j range is cut into (default: enough to fill the GPU).
    #[arg(long)]
    pub slices: Option<u32>,
    /// How the forces are summed: every pair exactly, or the Barnes-Hut tree (O(N log N)).
    #[arg(long, value_enum, default_value_t = Method::AllPairs)]
    pub method: Method,
    /// The tree's opening angle θ, 0.2..=1.0 (a node's radius over its distance; smaller is
    /// more exact and slower).
    #[arg(long, default_value_t = DEFAULT_THETA, value_parser = parse_theta)]
    pub theta: f64,
}

fn parse_theta(text: &str) -> std::result::Result<f64, String> {
    let theta: f64 = text.parse().map_err(|_| format!("{text:?} is not a number"))?;
    validate_theta(theta).map(|()| theta).map_err(|error| error.to_string())
}

#[derive(Args, Debug)]
/// `interop-lab bench nbody`.
pub struct NBodyBenchArgs {
    /// Body counts, comma-separated (default: 65536,262144 on CUDA, 4096 on the CPU).
    #[arg(long, value_delimiter = ',')]
    pub bodies: Vec<u32>,
    /// Block sizes to try (default: 128,256,512).
    #[arg(long, value_delimiter = ',')]
    pub block_size: Vec<u32>,
    /// Tile sizes to try (default: the block size).
    #[arg(long, value_delimiter = ',')]
    pub tile_size: Vec<u32>,
    /// Unroll factors to try (default: 4,16).
    #[arg(long, value_delimiter = ',')]
    pub unroll: Vec<u32>,
    /// Bodies per thread to try (default: 1,2,4).
    #[arg(long, value_delimiter = ',')]
    pub bodies_per_thread: Vec<u32>,
    /// Slice counts to try (default: automatic).
    #[arg(long, value_delimiter = ',')]
    pub slices: Vec<u32>,
    /// Arithmetic precision.
    #[arg(long, value_enum, default_value_t = Precision::F32)]
    pub precision: Precision,
    /// Initial conditions.
    #[arg(long, value_enum, default_value_t = Preset::Plummer)]
    pub preset: Preset,
    /// Untimed launches before timing.
    #[arg(long, default_value_t = 3)]
    pub warmup: u32,
    /// Timed launches (the median is reported).
    #[arg(long, default_value_t = 21)]
    pub repeats: u32,
    /// Headless frames for the full-frame measurement (0: skip).
    #[arg(long, default_value_t = 300)]
    pub frames: u32,
    /// Pipeline depth of the full-frame measurement (see `nbody --pipeline-depth`).
    #[arg(long, default_value_t = 1)]
    pub pipeline_depth: u32,
    /// Framebuffer size of the frame measurement.
    #[arg(long, value_parser = parse_pair, default_value = "1280x800")]
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
    /// one file per run: open them in https://ui.perfetto.dev.
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
            colour_scale: self.colour_scale,
            energy_every: self.energy_every,
            load: self.load.clone(),
            save: self.save.clone(),
            devices: self.devices.as_ref().map(|list| list.0.clone()).unwrap_or_default(),
            pipeline_depth: self.pipeline_depth,
            method: p.method,
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
        let bodies = if !args.bodies.is_empty() {
            args.bodies.clone()
        } else if cpu {
            vec![4096]
        } else {
            vec![65_536, 262_144]
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
            stop: stop.clone(),
        };
        let mut report = bench::nbody(&options, frames)?;
        if let Some(path) = &args.json {
            report.table.push_str(&format!("json: {}\n", path.display()));
        }
        Ok(report)
    }
}
