//! Command-line options every demo run shares (window or headless, backend, transfer path, the
//! learners' switches) and the parsers of their values. Each demo's own flags live in its folder
//! (`demos/<name>/args.rs`) and flatten these in.

use std::path::PathBuf;

use clap::Args;

use crate::graphics::GraphicsApi;
use crate::numbers::{Pair, Ranged};
use crate::runtime::{BackendRequest, CudaOptions, TransferRequest};
use crate::transfer::WhatIf;

/// The panel's closed-by-default sections, opened from the start with `--panel-open`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PanelSection {
    /// The "What if…" switches and buffer ownership.
    WhatIf,
    /// Kernel attributes and occupancy.
    Inspector,
    /// Kernel source files and live reload.
    Sources,
    /// The driver-call trace (opening it turns per-frame recording on).
    Trace,
    /// Device attributes.
    Device,
    /// The frame anatomy: host, CUDA and graphics work as lanes on one clock (opening it records
    /// every frame's calls).
    Anatomy,
}

/// A Chrome trace of the frames' anatomy to write when a run ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceRequest {
    /// Where.
    pub path: PathBuf,
    /// The last this many frames.
    pub frames: usize,
}

/// `--frames` of a run: whole frames, at least one (a run draws the frames it is asked for, and a
/// run of none has nothing to show or measure).
pub const FRAMES: Ranged<u32> = Ranged::at_least(1).unit("frames");

/// A framebuffer or window size in pixels, WIDTHxHEIGHT.
pub const SIZE: Pair = Pair::each(Ranged::new(1, 16_384).unit("pixels"));

/// CUDA threads per block, XxY: each axis up to the most any CUDA device allows (1024); the
/// device's own limits, and the threads of the whole block, are checked against the device when
/// the kernel launches (`LaunchConfig::validate`, which names the limit).
pub const CUDA_BLOCK: Pair = Pair::each(Ranged::new(1, 1024).unit("threads"));

/// A CUDA device ordinal; the devices there are are checked when the run starts.
pub const DEVICE: Ranged<i32> = Ranged::at_least(0);

/// Untimed runs of a benchmark before it times.
pub const WARMUP: Ranged<u32> = Ranged::new(0, 1000);

/// Timed runs of a benchmark (its median is reported): at least one.
pub const REPEATS: Ranged<u32> = Ranged::new(1, 10_000);

/// Options shared by every demo.
#[derive(Args, Debug, Clone)]
// A negative number typed reaches the flag's range check instead of reading as an unknown flag.
#[command(allow_negative_numbers = true)]
pub struct RunArgs {
    /// Render offscreen (no window: EGL for OpenGL, no surface for Vulkan) and exit after --frames
    /// frames.
    #[arg(long)]
    pub headless: bool,
    /// Frames to render headless (in a window: close after this many), 1 or more frames (default:
    /// 120 headless, or the demo's own; a window runs until closed).
    #[arg(long, value_parser = FRAMES)]
    pub frames: Option<u32>,
    /// Framebuffer (headless) or window size, WIDTHxHEIGHT, each 1 to 16384 pixels.
    #[arg(long, value_parser = SIZE, default_value = "1280x800")]
    pub size: [u32; 2],
    /// Write the last frame as PNG.
    #[arg(long, value_name = "FILE.png")]
    pub screenshot: Option<PathBuf>,
    /// Write per-stage timings (median / p90, µs) as JSON when the run ends.
    #[arg(long, value_name = "FILE.json")]
    pub stats: Option<PathBuf>,
    /// Write the frames' anatomy as a Chrome trace when the run ends (open it in
    /// <https://ui.perfetto.dev> or chrome://tracing): host, CUDA and graphics work as lanes on one
    /// clock, with the edges that order them. Records every frame's calls.
    #[arg(long, value_name = "FILE.json")]
    pub trace_json: Option<PathBuf>,
    /// Frames --trace-json keeps: the last N, 1 to 2000 frames (the frames the timings keep).
    #[arg(long, value_name = "N", default_value_t = 120, value_parser = TRACE_FRAMES)]
    pub trace_frames: u32,
    /// Record every frame into this folder as a numbered PNG sequence (window or headless); the
    /// run prints the ffmpeg line that makes a video of it. The panel's record button does the
    /// same in the window.
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,
    /// Draw the side panel into headless frames too.
    #[arg(long)]
    pub panel: bool,
    /// Simulated seconds per headless frame (the wave's clock; n-body steps by its own --dt), 0 to
    /// 10 s.
    #[arg(long, default_value_t = 1.0 / 60.0, value_parser = Ranged::<f32>::new(0.0, 10.0).unit("s"))]
    pub frame_time: f32,
    /// Learners' switches: register-every-frame (interop), skip-copy-sync (host copy),
    /// skip-semaphore-wait (Vulkan).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub what_if: Vec<WhatIfSwitch>,
    /// Panel sections to show open: what-if, inspector, sources, trace, device, anatomy.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub panel_open: Vec<PanelSection>,
    /// Graphics API to draw with: OpenGL, or Vulkan (CUDA writes memory Vulkan allocated), in a
    /// window or offscreen; a window Vulkan cannot present to goes on with OpenGL and says why.
    #[arg(long, value_enum, default_value_t = GraphicsApi::Gl)]
    pub renderer: GraphicsApi,
    /// Wait for vertical blank in the window.
    #[arg(long, default_value = "on", value_parser = parse_on_off, action = clap::ArgAction::Set)]
    pub vsync: bool,
    /// Backend and transfer-path choices.
    #[command(flatten)]
    pub cuda: CudaArgs,
    /// Flags of the demo's own that only some paths use (set by the demo's command from what was
    /// typed): a run on another path says they have no effect there.
    #[arg(skip)]
    pub path_flags: Vec<PathFlag>,
}

impl RunArgs {
    /// These options, noting the demo's `flags` that only some paths use.
    pub fn with_path_flags(mut self, flags: Vec<PathFlag>) -> Self {
        self.path_flags = flags;
        self
    }
}

/// A demo flag the user typed that only some transfer paths use (a CUDA launch parameter, the
/// texture route), so a run on another path says so instead of ignoring it without a word.
#[derive(Debug, Clone, PartialEq)]
pub struct PathFlag {
    /// The flag as typed, e.g. `--block 32x8`.
    pub flag: String,
    /// What it needs.
    pub needs: PathNeed,
}

/// What a [`PathFlag`] needs to have an effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathNeed {
    /// A path that computes with CUDA (launch parameters).
    Cuda,
    /// A path where CUDA writes the drawn texture itself (GL interop, Vulkan).
    TextureInPlace,
    /// A path that compiles CUDA kernels from their sources (`--kernels`).
    KernelSources,
}

impl PathFlag {
    /// `flag` (as typed), which needs `needs`.
    pub fn new(flag: impl Into<String>, needs: PathNeed) -> Self {
        Self { flag: flag.into(), needs }
    }

    /// Why the flag has no effect on `kind` (`None`: it has one).
    pub fn ignored_on(&self, kind: crate::transfer::TransferKind) -> Option<String> {
        use crate::transfer::TransferKind;
        let applies = match self.needs {
            PathNeed::Cuda | PathNeed::KernelSources => kind.uses_cuda(),
            PathNeed::TextureInPlace => matches!(kind, TransferKind::Interop | TransferKind::Vulkan),
        };
        let needs = match self.needs {
            PathNeed::Cuda => "sets how CUDA launches the kernel",
            PathNeed::KernelSources => "replaces the sources CUDA compiles its kernels from",
            PathNeed::TextureInPlace => {
                "has CUDA write the drawn texture itself, which GL interop and the Vulkan renderer do"
            }
        };
        (!applies)
            .then(|| format!("{} {needs}; this run is on the {} path, so it has no effect", self.flag, kind.label()))
    }
}

/// "32x8", as typed.
pub fn pair_text([a, b]: [u32; 2]) -> String {
    format!("{a}x{b}")
}

/// A switch that breaks or slows one rule of the transfer paths, to show its effect.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhatIfSwitch {
    /// Unregister and register the interop buffers every frame.
    RegisterEveryFrame,
    /// Upload host-copy staging memory without waiting for the copy into it.
    SkipCopySync,
    /// Submit Vulkan's frame without waiting for CUDA's semaphore signal (Vulkan path).
    SkipSemaphoreWait,
}

impl RunArgs {
    /// Checks the files the run will write (`--screenshot`, `--stats`, `--trace-json`) before it
    /// starts.
    pub fn check_outputs(&self) -> crate::error::Result<()> {
        use crate::output::{OutputKind, check_optional};
        check_optional(&self.screenshot, OutputKind::Image, "--screenshot")?;
        check_optional(&self.record, OutputKind::Folder, "--record")?;
        check_optional(&self.stats, OutputKind::Data, "--stats")?;
        check_optional(&self.trace_json, OutputKind::Data, "--trace-json")
    }

    /// What `--trace-json` and `--trace-frames` ask for.
    pub fn trace(&self) -> Option<TraceRequest> {
        let path = self.trace_json.clone()?;
        Some(TraceRequest { path, frames: self.trace_frames as usize })
    }

    /// The switches as the transfer paths take them.
    pub fn what_if(&self) -> WhatIf {
        WhatIf {
            register_every_frame: self.what_if.contains(&WhatIfSwitch::RegisterEveryFrame),
            skip_copy_sync: self.what_if.contains(&WhatIfSwitch::SkipCopySync),
            skip_semaphore_wait: self.what_if.contains(&WhatIfSwitch::SkipSemaphoreWait),
        }
    }
}

/// Backend and transfer-path choices.
#[derive(Args, Debug, Clone)]
// A negative number typed reaches the flag's range check instead of reading as an unknown flag.
#[command(allow_negative_numbers = true)]
pub struct CudaArgs {
    /// Compute backend: CUDA when it works (auto), CUDA, or the CPU.
    #[arg(long, value_enum, default_value_t = BackendRequest::Auto)]
    pub backend: BackendRequest,
    /// How results reach the graphics API: its fastest path (auto: GL interop, or on Vulkan memory
    /// CUDA imports), a GL-only path (interop, external, external-semaphores), or a copy through
    /// host memory.
    #[arg(long, value_enum, default_value_t = TransferRequest::Auto)]
    pub transfer: TransferRequest,
    /// CUDA device to compute on, 0 or more (default: the one running the GL context, else 0).
    #[arg(long, value_parser = DEVICE)]
    pub device: Option<i32>,
    /// The flag that chose the device when it was not `--device` (set by the demo that reads it,
    /// e.g. n-body's `--devices`), so that messages name what the user typed.
    #[arg(skip)]
    pub device_flag: Option<String>,
    /// Read kernels/*.cu from this folder instead of the copies built into the binary.
    #[arg(long, value_name = "DIR", env = "INTEROP_LAB_KERNELS")]
    pub kernels: Option<PathBuf>,
    /// Read shaders from this folder instead of the copies built into the binary.
    #[arg(long, value_name = "DIR", env = "INTEROP_LAB_SHADERS")]
    pub shaders: Option<PathBuf>,
    /// Compile kernels every start instead of using the on-disk cache.
    #[arg(long)]
    pub no_cache: bool,
}

impl CudaArgs {
    /// Checks that `--kernels` and `--shaders` name folders that exist.
    pub fn check_folders(&self) -> crate::error::Result<()> {
        for (flag, folder) in [("--kernels", &self.kernels), ("--shaders", &self.shaders)] {
            if let Some(folder) = folder
                && !folder.is_dir()
            {
                // A file (`--kernels kernels/wave.cu`) is a likely slip: its folder is what to give.
                let what = match folder.parent().filter(|_| folder.is_file()) {
                    Some(parent) => format!("is a file; give its folder ({flag} {})", parent.display()),
                    None => "no such folder".to_owned(),
                };
                return Err(crate::error::Error::InvalidInput(format!(
                    "{flag} {}: {what} (it should hold the files to use instead of the built-in ones, \
                     e.g. {flag} {} in a checkout)",
                    folder.display(),
                    if flag == "--kernels" { "kernels" } else { "shaders" }
                )));
            }
        }
        Ok(())
    }

    /// `--kernels` as a flag only CUDA paths use: a run on the CPU says it has no effect.
    pub fn kernels_flag(&self) -> Option<PathFlag> {
        let folder = self.kernels.as_ref()?;
        Some(PathFlag::new(format!("--kernels {}", folder.display()), PathNeed::KernelSources))
    }

    /// The options as the runtime takes them.
    pub fn options(&self) -> CudaOptions {
        CudaOptions {
            backend: self.backend,
            transfer: self.transfer,
            device: self.device,
            device_flag: self.device_flag.clone(),
            kernels_dir: self.kernels.clone(),
            no_cache: self.no_cache,
            background_compiles: false,
        }
    }
}

/// The most frames a trace keeps: the frames a run's history keeps.
pub const TRACE_FRAMES_MAX: u32 = 2000;

/// `--trace-frames`: 1 to [`TRACE_FRAMES_MAX`].
pub const TRACE_FRAMES: Ranged<u32> = Ranged::new(1, TRACE_FRAMES_MAX).unit("frames");

/// Parses `on` / `off` (or true / false, 1 / 0).
pub fn parse_on_off(text: &str) -> std::result::Result<bool, String> {
    match text {
        "on" | "true" | "1" => Ok(true),
        "off" | "false" | "0" => Ok(false),
        _ => Err(format!("{text:?}: use on or off")),
    }
}
