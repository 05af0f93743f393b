//! The `interop-lab` command line: the window (default), headless runs, and `doctor`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use interop_lab::demo::DemoSpec;
use interop_lab::demos::blur::kernels::Filter;
use interop_lab::demos::blur::{BlurSettings, Route};
use interop_lab::demos::nbody::NBodySettings;
use interop_lab::demos::nbody::kernels::{Precision, Variant};
use interop_lab::demos::nbody::multi;
use interop_lab::demos::nbody::presets::Preset;
use interop_lab::demos::wave::{DrawMode, WaveSettings};
use interop_lab::gl::PixelFormat;
use interop_lab::headless::{self, HeadlessOptions};
use interop_lab::runtime::{BackendRequest, CudaOptions, TransferRequest};
use interop_lab::stats::Stage;
use interop_lab::transfer::{TransferKind, WhatIf};
use interop_lab::{Error, Result, app, bench, bench_transfer, doctor, soak};

/// See CUDA and OpenGL work on the same memory.
///
/// With no command, opens the window on the default demo. Each demo is also a command with
/// its own settings; add --headless to render offscreen and write a PNG and timings.
#[derive(Parser, Debug)]
#[command(name = "interop-lab", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// All-pairs gravity, integrated by CUDA straight in the vertex buffers it is drawn from.
    Nbody(NBodyArgs),
    /// Gaussian blur of an image, written by CUDA into a GL texture (or pixel buffer) and shown
    /// before | after.
    Blur(BlurArgs),
    /// The "hello interop" demo: a kernel writes a moving W×H grid of vertices into a GL buffer.
    Wave(WaveArgs),
    /// Explain what this machine can run: driver, NVRTC, devices, GL contexts, the path the app
    /// takes and how to fix what is missing. Exit 0: interop works; 1: fallback; 2: cannot render.
    Doctor(DoctorArgs),
    /// Measure speed: kernels with CUDA events (median after warm-up), whole frames headless.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Run many interop frames, re-allocations and kernel recompiles; check that device memory,
    /// host memory and GL objects stay within bounds. Exit 0: within bounds; 1: something grew.
    Soak(SoakArgs),
}

#[derive(Args, Debug)]
struct SoakArgs {
    /// Interop frames.
    #[arg(long, default_value_t = 10_000)]
    frames: u32,
    /// Buffer re-allocations to random sizes (each registers the new buffer with CUDA).
    #[arg(long, default_value_t = 1_000)]
    reallocations: u32,
    /// Kernel recompiles, each followed by a module swap.
    #[arg(long, default_value_t = 100)]
    recompiles: u32,
    /// Re-allocations in the warm-up, before the first measurement (GL's buffer heap reaches its
    /// working size there).
    #[arg(long, default_value_t = soak::WARMUP_REALLOCATIONS)]
    warmup_reallocations: u32,
    /// CUDA device.
    #[arg(long)]
    device: Option<i32>,
    /// Path to soak: interop; copy (no registration); cpu (no CUDA allocation at all: GL buffers
    /// the CPU writes, with CUDA only measuring free memory — what the GL driver alone keeps).
    #[arg(long, value_enum, default_value_t = SoakPath::Interop)]
    transfer: SoakPath,
    /// Also write the report as JSON.
    #[arg(long, value_name = "FILE.json")]
    json: Option<PathBuf>,
}

/// The transfer paths `soak` can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum SoakPath {
    /// GL interop: each re-allocation registers the new buffer.
    Interop,
    /// Copy through pinned host memory: device buffers, no registration.
    Copy,
    /// The CPU writes the GL buffers: no CUDA allocation at all.
    Cpu,
}

#[derive(Subcommand, Debug)]
enum BenchCommand {
    /// The n-body forces kernel over a sweep of variants, the best one's step and full frames.
    Nbody(NBodyBenchArgs),
    /// Every blur filter at each σ (kernels alone), then full frames per route.
    Blur(BlurBenchArgs),
    /// What each transfer path (interop, external memory, pinned / pageable copy, CPU) costs per frame.
    Transfer(TransferBenchArgs),
}

#[derive(Args, Debug)]
struct TransferBenchArgs {
    /// Buffer sizes, comma-separated (K, M, G suffixes).
    #[arg(long, value_delimiter = ',', value_parser = bench_transfer::parse_bytes, default_value = "1M,16M,64M")]
    bytes: Vec<usize>,
    /// Paths to measure, comma-separated (default: every one available here).
    #[arg(long, value_enum, value_delimiter = ',')]
    path: Vec<TransferKindArg>,
    /// Untimed frames first.
    #[arg(long, default_value_t = 10)]
    warmup: u32,
    /// Timed frames (median and p90 reported).
    #[arg(long, default_value_t = 100)]
    frames: u32,
    /// Write the results as JSON.
    #[arg(long, value_name = "FILE.json")]
    json: Option<PathBuf>,
    #[command(flatten)]
    cuda: CudaArgs,
}

/// `--path` values of `bench transfer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum TransferKindArg {
    Interop,
    External,
    Copy,
    Pageable,
    Cpu,
}

impl From<TransferKindArg> for TransferKind {
    fn from(arg: TransferKindArg) -> Self {
        match arg {
            TransferKindArg::Interop => TransferKind::Interop,
            TransferKindArg::External => TransferKind::External,
            TransferKindArg::Copy => TransferKind::HostCopy,
            TransferKindArg::Pageable => TransferKind::HostCopyPageable,
            TransferKindArg::Cpu => TransferKind::Cpu,
        }
    }
}

#[derive(Args, Debug)]
struct BlurBenchArgs {
    /// Image size, WIDTHxHEIGHT (a generated test pattern).
    #[arg(long, value_parser = parse_pair, default_value = "3840x2160")]
    size: [u32; 2],
    /// σ values, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "2,5,10,25,50,100")]
    sigma: Vec<f64>,
    /// Pixel format.
    #[arg(long, value_enum, default_value_t = PixelFormat::Rgba8)]
    format: PixelFormat,
    /// Filters to time (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    variant: Vec<Filter>,
    /// CUDA threads per block, XxY.
    #[arg(long, value_parser = parse_pair, default_value = "64x4")]
    block: [u32; 2],
    /// Rows per segment of the recursive filter, its tile: a power of two ≥ 32 for rgba8, ≥ 16 for
    /// rgba32f (default: the largest up to 256 that fits a shared-memory budget for the block).
    #[arg(long, value_name = "ROWS")]
    segment: Option<u32>,
    /// Outputs each thread computes per tile row.
    #[arg(long, default_value_t = 5)]
    pixels_per_thread: u32,
    /// Untimed runs before timing.
    #[arg(long, default_value_t = 3)]
    warmup: u32,
    /// Timed runs (the median is reported).
    #[arg(long, default_value_t = 21)]
    repeats: u32,
    /// Headless frames per route (0: skip).
    #[arg(long, default_value_t = 200)]
    frames: u32,
    /// Write the results as JSON.
    #[arg(long, value_name = "FILE.json")]
    json: Option<PathBuf>,
    #[command(flatten)]
    cuda: CudaArgs,
}

/// Options shared by every demo.
#[derive(Args, Debug, Clone)]
struct RunArgs {
    /// Render offscreen (EGL, no window) and exit after --frames frames.
    #[arg(long)]
    headless: bool,
    /// Frames to render headless (in a window: close after this many).
    #[arg(long)]
    frames: Option<u32>,
    /// Framebuffer (headless) or window size, WIDTHxHEIGHT.
    #[arg(long, value_parser = parse_pair, default_value = "1280x800")]
    size: [u32; 2],
    /// Write the last frame as PNG.
    #[arg(long, value_name = "FILE.png")]
    screenshot: Option<PathBuf>,
    /// Write per-stage timings (median / p90, µs) as JSON (headless).
    #[arg(long, value_name = "FILE.json")]
    stats: Option<PathBuf>,
    /// Draw the side panel into headless frames too.
    #[arg(long)]
    panel: bool,
    /// Simulated seconds per headless frame (the wave's clock; n-body steps by its own --dt).
    #[arg(long, default_value_t = 1.0 / 60.0)]
    frame_time: f32,
    /// Learners' switches: register-every-frame (interop), skip-copy-sync (host copy).
    #[arg(long, value_enum, value_delimiter = ',')]
    what_if: Vec<WhatIfSwitch>,
    /// Panel sections to show open: what-if, inspector, sources, trace, device.
    #[arg(long, value_enum, value_delimiter = ',')]
    panel_open: Vec<interop_lab::ui::PanelSection>,
    /// Wait for vertical blank in the window.
    #[arg(long, default_value = "on", value_parser = parse_on_off, action = clap::ArgAction::Set)]
    vsync: bool,
    #[command(flatten)]
    cuda: CudaArgs,
}

/// A switch that breaks or slows one rule of the transfer paths, to show its effect.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
enum WhatIfSwitch {
    /// Unregister and register the interop buffers every frame.
    RegisterEveryFrame,
    /// Upload host-copy staging memory without waiting for the copy into it.
    SkipCopySync,
}

impl RunArgs {
    fn what_if(&self) -> WhatIf {
        WhatIf {
            register_every_frame: self.what_if.contains(&WhatIfSwitch::RegisterEveryFrame),
            skip_copy_sync: self.what_if.contains(&WhatIfSwitch::SkipCopySync),
        }
    }
}

/// Backend and transfer-path choices.
#[derive(Args, Debug, Clone)]
struct CudaArgs {
    /// Compute backend: CUDA when it works (auto), CUDA, or the CPU.
    #[arg(long, value_enum, default_value_t = BackendRequest::Auto)]
    backend: BackendRequest,
    /// How results reach GL: interop when possible (auto), GL interop, or a copy through host memory.
    #[arg(long, value_enum, default_value_t = TransferRequest::Auto)]
    transfer: TransferRequest,
    /// CUDA device to compute on (default: the one running the GL context, else 0).
    #[arg(long)]
    device: Option<i32>,
    /// Read kernels/*.cu from this folder instead of the copies built into the binary.
    #[arg(long, value_name = "DIR", env = "INTEROP_LAB_KERNELS")]
    kernels: Option<PathBuf>,
    /// Read shaders from this folder instead of the copies built into the binary.
    #[arg(long, value_name = "DIR", env = "INTEROP_LAB_SHADERS")]
    shaders: Option<PathBuf>,
    /// Compile kernels every start instead of using the on-disk cache.
    #[arg(long)]
    no_cache: bool,
}

#[derive(Args, Debug)]
struct WaveArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Vertices of the wave grid, WIDTHxHEIGHT.
    #[arg(long, value_parser = parse_pair, default_value = "256x256")]
    vertices: [u32; 2],
    /// CUDA threads per block, XxY.
    #[arg(long, value_parser = parse_pair, default_value = "16x16")]
    block: [u32; 2],
    /// CUDA blocks, XxY (default: enough to cover every vertex).
    #[arg(long, value_parser = parse_pair)]
    grid: Option<[u32; 2]>,
    /// Draw as a lit mesh or as points.
    #[arg(long, value_enum, default_value_t = DrawMode::Mesh)]
    mode: DrawMode,
    /// Spatial frequency of the wave.
    #[arg(long, default_value_t = 4.0, allow_negative_numbers = true)]
    frequency: f32,
    /// Height of the crests.
    #[arg(long, default_value_t = 0.3, allow_negative_numbers = true)]
    amplitude: f32,
    /// Phase speed, radians per second.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    speed: f32,
    /// Point size in pixels (points mode).
    #[arg(long, default_value_t = 2.0)]
    point_size: f32,
}

#[derive(Args, Debug)]
struct NBodyArgs {
    #[command(flatten)]
    run: RunArgs,
    #[command(flatten)]
    physics: NBodyPhysicsArgs,
    /// Sprite radius in world units.
    #[arg(long, default_value_t = 0.006)]
    point_size: f32,
    /// Brightness factor.
    #[arg(long, default_value_t = 1.0)]
    brightness: f32,
    /// Speed drawn with the hottest colour, as a multiple of the initial RMS speed.
    #[arg(long, default_value_t = 2.0)]
    colour_scale: f32,
    /// Compute the total energy every this many steps (0: only when asked).
    #[arg(long, default_value_t = 30)]
    energy_every: u32,
    /// Start from a saved state instead of the preset.
    #[arg(long, value_name = "FILE")]
    load: Option<PathBuf>,
    /// Save the state when the run ends.
    #[arg(long, value_name = "FILE")]
    save: Option<PathBuf>,
    /// Split the bodies across these CUDA devices, one context each (e.g. 0,1; 0,0 runs two
    /// contexts on one GPU). The first renders. Default: the GL context's device alone.
    #[arg(long, value_name = "0,1,…", value_parser = parse_device_list)]
    devices: Option<DeviceList>,
}

/// The ordinals of `--devices`.
#[derive(Debug, Clone, PartialEq)]
struct DeviceList(Vec<i32>);

fn parse_device_list(text: &str) -> std::result::Result<DeviceList, String> {
    multi::parse_devices(text).map(DeviceList)
}

/// The simulation's own settings (shared by `nbody` and `bench nbody`).
#[derive(Args, Debug, Clone)]
struct NBodyPhysicsArgs {
    /// Number of bodies (default: 65536 on CUDA, 4096 on the CPU).
    #[arg(long)]
    bodies: Option<u32>,
    /// Initial conditions.
    #[arg(long, value_enum, default_value_t = Preset::Collision)]
    preset: Preset,
    /// Seed of the initial conditions.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Time step (default: the preset's).
    #[arg(long, allow_negative_numbers = true)]
    dt: Option<f64>,
    /// Softening length, > 0 (default: the preset's).
    #[arg(long, allow_negative_numbers = true)]
    softening: Option<f64>,
    /// Velocity factor per step, in (0, 1].
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    damping: f64,
    /// Gravitational constant.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    gravity: f64,
    /// Arithmetic precision.
    #[arg(long, value_enum, default_value_t = Precision::F32)]
    precision: Precision,
    /// Threads per block of the forces kernel.
    #[arg(long, default_value_t = 256)]
    block_size: u32,
    /// Bodies per shared-memory tile (default: the block size).
    #[arg(long)]
    tile_size: Option<u32>,
    /// Unroll factor of the inner loop.
    #[arg(long, default_value_t = 8)]
    unroll: u32,
    /// Bodies each thread accumulates.
    #[arg(long, default_value_t = 2)]
    bodies_per_thread: u32,
    /// Slices the j range is cut into (default: enough to fill the GPU).
    #[arg(long)]
    slices: Option<u32>,
}

#[derive(Args, Debug)]
struct NBodyBenchArgs {
    /// Body counts, comma-separated (default: 65536,262144 on CUDA, 4096 on the CPU).
    #[arg(long, value_delimiter = ',')]
    bodies: Vec<u32>,
    /// Block sizes to try (default: 128,256,512).
    #[arg(long, value_delimiter = ',')]
    block_size: Vec<u32>,
    /// Tile sizes to try (default: the block size).
    #[arg(long, value_delimiter = ',')]
    tile_size: Vec<u32>,
    /// Unroll factors to try (default: 4,16).
    #[arg(long, value_delimiter = ',')]
    unroll: Vec<u32>,
    /// Bodies per thread to try (default: 1,2,4).
    #[arg(long, value_delimiter = ',')]
    bodies_per_thread: Vec<u32>,
    /// Slice counts to try (default: automatic).
    #[arg(long, value_delimiter = ',')]
    slices: Vec<u32>,
    /// Arithmetic precision.
    #[arg(long, value_enum, default_value_t = Precision::F32)]
    precision: Precision,
    /// Initial conditions.
    #[arg(long, value_enum, default_value_t = Preset::Plummer)]
    preset: Preset,
    /// Untimed launches before timing.
    #[arg(long, default_value_t = 3)]
    warmup: u32,
    /// Timed launches (the median is reported).
    #[arg(long, default_value_t = 21)]
    repeats: u32,
    /// Headless frames for the full-frame measurement (0: skip).
    #[arg(long, default_value_t = 300)]
    frames: u32,
    /// Framebuffer size of the frame measurement.
    #[arg(long, value_parser = parse_pair, default_value = "1280x800")]
    size: [u32; 2],
    /// Also time the best variant split across these CUDA devices, one context each (e.g. 0,1;
    /// 0,0 runs two contexts on one GPU), against the first alone. Default: every CUDA device,
    /// when there are several.
    #[arg(long, value_name = "0,1,…", value_parser = parse_device_list)]
    devices: Option<DeviceList>,
    /// Write the results as JSON.
    #[arg(long, value_name = "FILE.json")]
    json: Option<PathBuf>,
    #[command(flatten)]
    cuda: CudaArgs,
}

#[derive(Args, Debug)]
struct BlurArgs {
    #[command(flatten)]
    run: RunArgs,
    /// PNG or JPEG to blur (default: a generated test pattern).
    #[arg(long, value_name = "FILE")]
    image: Option<PathBuf>,
    /// Gaussian σ in pixels.
    #[arg(long, default_value_t = 3.0, allow_negative_numbers = true)]
    sigma: f64,
    /// Kernel radius (default: ⌈3σ⌉).
    #[arg(long)]
    radius: Option<u32>,
    /// Filter: separable (two 1-D passes), recursive (IIR Gaussian, σ ≥ 4), box (σ-independent
    /// cascade, σ ≥ 2) or naive (full 2-D window).
    #[arg(long, value_enum, default_value_t = Filter::Separable)]
    variant: Filter,
    /// How results reach the texture: texture (surface writes, interop only) or pbo.
    #[arg(long, value_enum, default_value_t = Route::Texture)]
    route: Route,
    /// Pixel format of image, kernels and textures.
    #[arg(long, value_enum, default_value_t = PixelFormat::Rgba8)]
    format: PixelFormat,
    /// CUDA threads per block, XxY (y a power of two for separable and box; x·y a multiple of 64
    /// for recursive).
    #[arg(long, value_parser = parse_pair, default_value = "64x4")]
    block: [u32; 2],
    /// Rows per segment of the recursive filter, its tile: a power of two ≥ 32 for rgba8, ≥ 16 for
    /// rgba32f (default: the largest up to 256 that fits a shared-memory budget for the block).
    #[arg(long, value_name = "ROWS")]
    segment: Option<u32>,
    /// Outputs each thread computes per tile row (the tile is block.x × this wide; odd avoids
    /// shared-memory bank conflicts).
    #[arg(long, default_value_t = 5)]
    pixels_per_thread: u32,
    /// Write the blurred image as PNG (16-bit for rgba32f) when the run ends.
    #[arg(long, value_name = "FILE.png")]
    output: Option<PathBuf>,
    /// Before | after split line, as a fraction of the view width.
    #[arg(long, default_value_t = 0.5)]
    split: f32,
}

impl BlurArgs {
    fn spec(&self) -> DemoSpec {
        DemoSpec::new(BlurSettings {
            image: self.image.clone(),
            sigma: self.sigma,
            radius: self.radius,
            filter: self.variant,
            route: self.route,
            format: self.format,
            block: self.block,
            segment: self.segment,
            pixels_per_thread: self.pixels_per_thread,
            output: self.output.clone(),
            split: self.split,
        })
    }
}

#[derive(Args, Debug)]
struct DoctorArgs {
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    cuda: CudaArgs,
}

fn parse_pair(text: &str) -> std::result::Result<[u32; 2], String> {
    let (a, b) =
        text.split_once(['x', 'X']).ok_or_else(|| format!("{text:?} is not of the form AxB, e.g. 1280x800"))?;
    let number = |s: &str| s.trim().parse::<u32>().map_err(|_| format!("{s:?} in {text:?} is not a whole number"));
    Ok([number(a)?, number(b)?])
}

fn parse_on_off(text: &str) -> std::result::Result<bool, String> {
    match text {
        "on" | "true" | "1" => Ok(true),
        "off" | "false" | "0" => Ok(false),
        _ => Err(format!("{text:?}: use on or off")),
    }
}

impl CudaArgs {
    fn options(&self) -> CudaOptions {
        CudaOptions {
            backend: self.backend,
            transfer: self.transfer,
            device: self.device,
            kernels_dir: self.kernels.clone(),
            no_cache: self.no_cache,
        }
    }
}

impl WaveArgs {
    fn spec(&self) -> DemoSpec {
        DemoSpec::new(WaveSettings {
            width: self.vertices[0],
            height: self.vertices[1],
            frequency: self.frequency,
            amplitude: self.amplitude,
            speed: self.speed,
            block: self.block,
            grid: self.grid,
            mode: self.mode,
            point_size: self.point_size,
        })
    }
}

impl NBodyArgs {
    fn spec(&self) -> DemoSpec {
        let p = &self.physics;
        DemoSpec::new(NBodySettings {
            bodies: p.bodies,
            preset: p.preset,
            seed: p.seed,
            dt: p.dt,
            softening: p.softening,
            damping: p.damping,
            gravity: p.gravity,
            variant: Variant {
                precision: p.precision,
                block_size: p.block_size,
                tile_size: p.tile_size.unwrap_or(p.block_size),
                unroll: p.unroll,
                bodies_per_thread: p.bodies_per_thread,
            },
            slices: p.slices,
            point_size: self.point_size,
            brightness: self.brightness,
            colour_scale: self.colour_scale,
            energy_every: self.energy_every,
            load: self.load.clone(),
            save: self.save.clone(),
            devices: self.devices.as_ref().map(|list| list.0.clone()).unwrap_or_default(),
        })
    }

    /// The run options, with `--device` taken from the first of `--devices` (the device that
    /// renders) when only `--devices` is given.
    fn run_args(&self) -> Result<RunArgs> {
        let mut run = self.run.clone();
        if let Some(DeviceList(devices)) = &self.devices {
            run.cuda.device = first_device(run.cuda.device, devices)?;
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

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn,interop_lab=info")).init();
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        None => run_demo(&cli.run, interop_lab::demos::default_spec("nbody")?),
        Some(Command::Nbody(args)) => run_demo(&args.run_args()?, args.spec()),
        Some(Command::Wave(args)) => run_demo(&args.run, args.spec()),
        Some(Command::Blur(args)) => run_demo(&args.run, args.spec()),
        Some(Command::Doctor(args)) => Ok(run_doctor(&args)),
        Some(Command::Soak(args)) => run_soak(&args),
        Some(Command::Bench(BenchCommand::Nbody(args))) => run_nbody_bench(&args),
        Some(Command::Bench(BenchCommand::Transfer(args))) => {
            let report = bench_transfer::run(&bench_transfer::TransferBench {
                sizes: args.bytes.clone(),
                paths: args.path.iter().map(|&p| p.into()).collect(),
                warmup: args.warmup,
                frames: args.frames,
                cuda: args.cuda.options(),
                json: args.json.clone(),
            })?;
            print!("{}", report.table);
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Bench(BenchCommand::Blur(args))) => {
            let report = bench::blur(&bench::BlurBench {
                size: args.size,
                sigmas: args.sigma.clone(),
                format: args.format,
                filters: args.variant.clone(),
                block: args.block,
                segment: args.segment,
                pixels_per_thread: args.pixels_per_thread,
                warmup: args.warmup,
                repeats: args.repeats,
                frames: args.frames,
                cuda: args.cuda.options(),
                json: args.json.clone(),
            })?;
            print!("{}", report.table);
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn run_demo(run: &RunArgs, spec: DemoSpec) -> Result<ExitCode> {
    if run.headless {
        let options = HeadlessOptions {
            spec,
            frames: run.frames.unwrap_or(120),
            size: run.size,
            dt: run.frame_time,
            screenshot: run.screenshot.clone(),
            stats: run.stats.clone(),
            panel: run.panel,
            cuda: run.cuda.options(),
            shaders_dir: run.cuda.shaders.clone(),
            what_if: run.what_if(),
            open_sections: run.panel_open.clone(),
        };
        let report = headless::run(&options)?;
        print_headless(&report, &options);
        return Ok(ExitCode::SUCCESS);
    }
    if run.stats.is_some() {
        return Err(Error::InvalidInput("--stats is written by headless runs: add --headless".to_owned()));
    }
    let report = app::run(app::WindowOptions {
        spec,
        cuda: run.cuda.options(),
        size: run.size,
        vsync: run.vsync,
        shaders_dir: run.cuda.shaders.clone(),
        max_frames: run.frames.map(u64::from),
        screenshot: run.screenshot.clone(),
        what_if: run.what_if(),
        open_sections: run.panel_open.clone(),
    })?;
    log::info!("closed after {} frames", report.frames);
    if report.relaunch {
        return relaunch();
    }
    Ok(ExitCode::SUCCESS)
}

fn print_headless(report: &headless::HeadlessReport, options: &HeadlessOptions) {
    let json = &report.json;
    let text = |key: &str| json.get(key).and_then(|v| v.as_str()).unwrap_or("?").to_owned();
    let device = json.pointer("/device/name").and_then(|v| v.as_str()).unwrap_or("no CUDA device");
    println!(
        "{} on {} ({}), transfer {}: {} frames at {}x{}, {:.0} frames/s",
        text("demo"),
        text("backend"),
        device,
        text("transfer"),
        options.frames,
        options.size[0],
        options.size[1],
        report.frames_per_second
    );
    println!("{:<9} {:>22} {:>22}", "stage", "host µs median / p90", "GPU µs median / p90");
    for stage in Stage::ALL {
        let Some(times) = report.summary.stage(stage) else {
            continue;
        };
        let cell = |p: Option<interop_lab::stats::Percentiles>| {
            p.map(|p| format!("{:.1} / {:.1}", p.median, p.p90)).unwrap_or_else(|| "–".to_owned())
        };
        println!("{:<9} {:>22} {:>22}", stage.name(), cell(times.host_us), cell(times.gpu_us));
    }
    for (what, path) in [("screenshot", &options.screenshot), ("stats", &options.stats)] {
        if let Some(path) = path {
            println!("{what}: {}", path.display());
        }
    }
}

fn run_nbody_bench(args: &NBodyBenchArgs) -> Result<ExitCode> {
    let cpu = args.cuda.backend == BackendRequest::Cpu || !interop_lab::cuda::driver::driver_library_present();
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
        size: args.size,
        preset: args.preset,
        cuda: CudaOptions {
            device: match &args.devices {
                Some(DeviceList(devices)) => first_device(args.cuda.device, devices)?,
                None => args.cuda.device,
            },
            ..args.cuda.options()
        },
        devices: args.devices.as_ref().map(|list| list.0.clone()),
        json: args.json.clone(),
    };
    let report = bench::nbody(&options)?;
    print!("{}", report.table);
    if let Some(path) = &args.json {
        println!("json: {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn run_doctor(args: &DoctorArgs) -> ExitCode {
    let options = args.cuda.options();
    let query_cuda = options.backend != BackendRequest::Cpu && interop_lab::cuda::driver::driver_library_present();
    let window_check = move || doctor::probe_window_context(query_cuda);
    let report = doctor::examine(&options, Some(&window_check));
    if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(error) => eprintln!("error: {error}"),
        }
    } else {
        print!("{}", doctor::render(&report));
    }
    ExitCode::from(report.exit_code.clamp(0, 255) as u8)
}

fn run_soak(args: &SoakArgs) -> Result<ExitCode> {
    let report = soak::run(&soak::SoakOptions {
        frames: args.frames,
        reallocations: args.reallocations,
        recompiles: args.recompiles,
        device: args.device,
        warmup_reallocations: args.warmup_reallocations,
        transfer: match args.transfer {
            SoakPath::Interop => TransferKind::Interop,
            SoakPath::Copy => TransferKind::HostCopy,
            SoakPath::Cpu => TransferKind::Cpu,
        },
    })?;
    let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
    let line = |name: &str, count: u32, seconds: Option<f64>, at: &soak::Footprint| {
        let o = at.gl_objects;
        println!(
            "{name:<38} {count:>6} {:>8} {:>12.1} {:>10.1} {:>5} {:>5} {:>5} {:>5}",
            seconds.map(|s| format!("{s:.1}")).unwrap_or_default(),
            mib(at.device_free_bytes),
            mib(at.host_rss_bytes),
            o.buffers,
            o.textures,
            o.framebuffers,
            o.programs
        );
    };
    println!("soak on {}, transfer {}", report.device, report.transfer.label());
    println!(
        "{:<38} {:>6} {:>8} {:>12} {:>10} {:>5} {:>5} {:>5} {:>5}",
        "phase", "count", "s", "dev free MiB", "RSS MiB", "buf", "tex", "fbo", "prog"
    );
    line("before", 0, None, &report.before);
    for phase in &report.phases {
        line(phase.name, phase.count, Some(phase.seconds), &phase.after);
    }
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report).map_err(|e| Error::InvalidInput(e.to_string()))?;
        std::fs::write(path, text + "\n").map_err(|e| Error::io(path, e))?;
    }
    if report.exceeded.is_empty() {
        println!(
            "within bounds: device memory −{} MiB, host RSS +{} MiB, GL objects +{}",
            mib(report.bounds.device_bytes),
            mib(report.bounds.host_rss_bytes),
            report.bounds.gl_objects
        );
        Ok(ExitCode::SUCCESS)
    } else {
        for what in &report.exceeded {
            println!("exceeded: {what}");
        }
        Ok(ExitCode::from(1))
    }
}

/// Replaces this process by a new run of the app with the same arguments: after a kernel fault
/// the driver allows no more CUDA work in a process, and a new one gets a fresh context.
fn relaunch() -> Result<ExitCode> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().map_err(|e| Error::io("the running executable", e))?;
    log::info!("relaunching {}", exe.display());
    let error = std::process::Command::new(&exe).args(std::env::args_os().skip(1)).exec();
    Err(Error::io(exe, error))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::first_device;

    #[test]
    fn devices_name_the_device_that_renders() {
        assert_eq!(first_device(None, &[1, 0]).ok(), Some(Some(1)));
        assert_eq!(first_device(Some(1), &[1, 1]).ok(), Some(Some(1)));
        assert_eq!(first_device(Some(2), &[]).ok(), Some(Some(2)));
        let message = first_device(Some(1), &[0, 1]).map_err(|e| e.to_string());
        assert!(message.is_err_and(|m| m.contains("disagree") && m.contains("list device 1 first")));
    }

    #[test]
    fn command_line_definition_is_consistent() {
        // Catches duplicate flag names among flattened option groups, among other mistakes.
        super::Cli::command().debug_assert();
    }
}
