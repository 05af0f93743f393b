//! `interop-lab soak`: many interop frames, many re-allocations (each re-registers its buffer) and
//! many kernel recompiles with module swaps, on one headless GL context, measuring device memory,
//! host memory and live GL objects before and after, and the peak host memory of the frames
//! phase's first and last frames ([`FramePeaks`]). Nothing may grow beyond [`Bounds`].

use std::path::PathBuf;
use std::rc::Rc;
use std::time::Instant;

use clap::{Args, ValueEnum};

use crate::demo_kit::{DemoSpec, LiveKernels};
use crate::demos::wave::{self, Wave, WaveSettings};
use crate::error::{Error, Result};
use crate::graphics::GraphicsApi;
use crate::numbers::Ranged;
use crate::progress::Progress;
use crate::renderer::{self, Canvas};
use crate::rng::Rng;
use crate::runtime::{BackendRequest, CudaOptions, CudaRuntime, TransferRequest};
use crate::session::{FrameInput, Session, SessionOptions};
use crate::stop::StopRequest;
use crate::transfer::TransferKind;

mod frame_peaks;
mod report;
use self::frame_peaks::FRAMES_PER_SAMPLE;
pub use self::frame_peaks::FramePeaks;
pub use self::report::{BOUNDS, Bounds, Footprint, Phase, SoakReport, exceeded};

#[derive(Args, Debug)]
/// `interop-lab soak`. The counts' ranges keep their sum within a `u32`.
// A negative number typed reaches the flag's range check instead of reading as an unknown flag.
#[command(allow_negative_numbers = true)]
pub struct SoakArgs {
    /// Interop frames, 1 to 1000000000 frames.
    #[arg(long, default_value_t = 10_000, value_parser = Ranged::<u32>::new(1, 1_000_000_000).unit("frames"))]
    pub frames: u32,
    /// Buffer re-allocations to random sizes, 0 to 1000000 (each registers the new buffer with
    /// CUDA).
    #[arg(long, default_value_t = 1_000, value_parser = REALLOCATIONS)]
    pub reallocations: u32,
    /// Kernel recompiles, 0 to 10000, each followed by a module swap.
    #[arg(long, default_value_t = 100, value_parser = Ranged::<u32>::new(0, 10_000))]
    pub recompiles: u32,
    /// Re-allocations in the warm-up, 0 to 1000000, before the first measurement (GL's buffer
    /// heap reaches its working size there).
    #[arg(long, default_value_t = WARMUP_REALLOCATIONS, value_parser = REALLOCATIONS)]
    pub warmup_reallocations: u32,
    /// CUDA device, 0 or more (default: the one running the GL context, else 0).
    #[arg(long, value_parser = crate::args::DEVICE)]
    pub device: Option<i32>,
    /// Path to soak: interop (GL's default); vulkan (Vulkan's default: memory Vulkan allocates,
    /// imported by CUDA); copy (no registration); cpu (no CUDA allocation at all: buffers the CPU
    /// writes, with CUDA, when present, only measuring free memory — what the graphics driver
    /// alone keeps; runs without CUDA too, and skips the recompiles: there are no kernels).
    #[arg(long, value_enum)]
    pub transfer: Option<SoakPath>,
    /// Graphics API to soak: gl (default) or vulkan (its default path: vulkan, the memory CUDA
    /// imports).
    #[arg(long, value_enum, default_value_t = GraphicsApi::Gl)]
    pub renderer: GraphicsApi,
    /// Also write the report as JSON.
    #[arg(long, value_name = "FILE.json")]
    pub json: Option<PathBuf>,
}

/// Buffer re-allocations a soak may be asked for, in the warm-up and measured.
const REALLOCATIONS: Ranged<u32> = Ranged::new(0, 1_000_000);

/// The transfer paths `soak` can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SoakPath {
    /// GL interop: each re-allocation registers the new buffer.
    Interop,
    /// Vulkan's memory imported by CUDA: each re-allocation imports the new buffer.
    Vulkan,
    /// Copy through pinned host memory: device buffers, no registration.
    Copy,
    /// The CPU writes the GL buffers: no CUDA allocation at all.
    Cpu,
}

impl SoakArgs {
    /// Runs the soak; returns the report as a table and whether everything stayed within bounds.
    pub fn run(&self, stop: &StopRequest) -> Result<(String, bool)> {
        crate::output::check_optional(&self.json, crate::output::OutputKind::Data, "--json")?;
        let report = run(&SoakOptions {
            stop: stop.clone(),
            frames: self.frames,
            reallocations: self.reallocations,
            recompiles: self.recompiles,
            device: self.device,
            warmup_reallocations: self.warmup_reallocations,
            renderer: self.renderer,
            transfer: self.transfer_kind()?,
        })?;
        if let Some(path) = &self.json {
            let text = serde_json::to_string_pretty(&report).map_err(|e| Error::InvalidInput(e.to_string()))?;
            crate::output::write(path, (text + "\n").as_bytes())?;
        }
        Ok(report.table())
    }

    /// The path asked for, or the renderer's own: GL interop, or Vulkan's imported memory. A
    /// path the renderer does not offer is refused with the one it does.
    fn transfer_kind(&self) -> Result<TransferKind> {
        let own = match self.renderer {
            GraphicsApi::Gl => SoakPath::Interop,
            GraphicsApi::Vulkan => SoakPath::Vulkan,
        };
        let path = self.transfer.unwrap_or(own);
        if matches!(path, SoakPath::Interop | SoakPath::Vulkan) && path != own {
            let name = |path: SoakPath| path.to_possible_value().map_or(String::new(), |v| v.get_name().to_owned());
            return Err(Error::InvalidInput(format!(
                "--transfer {} belongs to the other renderer: with --renderer {} soak --transfer {}, copy or cpu",
                name(path),
                self.renderer.flag(),
                name(own),
            )));
        }
        Ok(match path {
            SoakPath::Interop => TransferKind::Interop,
            SoakPath::Vulkan => TransferKind::Vulkan,
            SoakPath::Copy => TransferKind::HostCopy,
            SoakPath::Cpu => TransferKind::Cpu,
        })
    }
}

/// How much of each phase to run.
#[derive(Debug, Clone)]
pub struct SoakOptions {
    /// Interop frames (map → kernel → unmap → draw).
    pub frames: u32,
    /// Re-allocations of the shared buffer to a random size (each registers the new buffer).
    pub reallocations: u32,
    /// Kernel recompiles (NVRTC, no cache) each followed by a module swap.
    pub recompiles: u32,
    /// CUDA device to use.
    pub device: Option<i32>,
    /// The graphics API soaked.
    pub renderer: GraphicsApi,
    /// Interop or Vulkan's import (the point of the soak), host copy or the CPU (to tell the
    /// graphics driver's own memory use from what registration and CUDA allocations cost).
    pub transfer: TransferKind,
    /// Re-allocations during the warm-up, before the first measurement.
    pub warmup_reallocations: u32,
    /// Set by Ctrl-C: end after the current phase step and report what was measured.
    pub stop: StopRequest,
}

/// Re-allocations in the warm-up by default. Measured on the H200, GL's buffer heap grows by
/// 8–12 MiB over the first ~750 random re-allocations on every path — the CPU path, which
/// allocates nothing in CUDA, included — and then holds its size.
pub const WARMUP_REALLOCATIONS: u32 = 1_000;

/// Runs the soak. Errors (no CUDA, no interop) are returned; bounds exceeded are in the report.
pub fn run(options: &SoakOptions) -> Result<SoakReport> {
    let on_cpu = options.transfer == TransferKind::Cpu;
    let cuda_options = CudaOptions {
        // The CPU path uses CUDA, when there is one, only to read free device memory.
        backend: if on_cpu { BackendRequest::Auto } else { BackendRequest::Cuda },
        transfer: match options.transfer {
            TransferKind::Interop => TransferRequest::Interop,
            // Vulkan's fastest path is its own: CUDA imports its memory where it can.
            TransferKind::Cpu | TransferKind::Vulkan => TransferRequest::Auto,
            _ => TransferRequest::Copy,
        },
        device: options.device,
        device_flag: None,
        kernels_dir: None,
        no_cache: true,
        background_compiles: false,
    };
    let target = Canvas::Offscreen { size: [256, 256] };
    let (renderer, mut selection) = renderer::open(options.renderer, target, &cuda_options, None)?;
    let cuda = selection.cuda.clone();
    // Said in the soak's own terms: the user chose a path (or took the default, interop), not
    // the backend the soak asks the runtime for.
    if cuda.is_none() && !on_cpu {
        return Err(Error::Unavailable(format!(
            "soaking {} (--transfer {}) needs CUDA, and {}; `soak --transfer cpu` soaks the {} side alone",
            options.transfer.label(),
            match options.transfer {
                TransferKind::Interop => "interop, the default",
                TransferKind::Vulkan => "vulkan, the default",
                _ => "copy",
            },
            selection.reason.trim_start_matches("CPU backend, because "),
            options.renderer.label()
        )));
    }
    if let Some(unmet) = &selection.unmet_request {
        return Err(Error::Unavailable(unmet.clone()));
    }
    if options.transfer == TransferKind::Vulkan && selection.transfer != TransferKind::Vulkan {
        return Err(Error::Unavailable(format!(
            "soaking the Vulkan path needs CUDA to import this Vulkan device's memory, and the run would take {}: {}",
            selection.transfer.label(),
            selection.reason
        )));
    }
    // The path asked for, even where CUDA could do more (the CPU path measures the graphics API
    // alone).
    selection.transfer = options.transfer;
    let session_options = SessionOptions {
        spec: DemoSpec::new(WaveSettings::default()),
        what_if: Default::default(),
        open_sections: Vec::new(),
        path_flags: Vec::new(),
        record: None,
    };
    let mut session = Session::new(renderer, selection, session_options)?;
    let result = soak(&mut session, cuda.as_ref(), options);
    let (_, closed) = session.close();
    let report = result?;
    closed.map_or(Ok(report), Err)
}

/// The wave the soak drives (the session runs it; the soak re-allocates it and swaps its kernels).
fn wave(session: &mut Session) -> Result<&mut Wave> {
    session
        .demo()?
        .as_any_mut()
        .and_then(|demo| demo.downcast_mut::<Wave>())
        .ok_or_else(|| Error::Unavailable("the soak runs the wave demo".to_owned()))
}

fn soak(session: &mut Session, cuda: Option<&Rc<CudaRuntime>>, options: &SoakOptions) -> Result<SoakReport> {
    let recompiles = if cuda.is_some() && options.transfer != TransferKind::Cpu { options.recompiles } else { 0 };
    let mut notes = Vec::new();
    if recompiles < options.recompiles {
        notes.push(format!("kernel recompiles skipped: the {} path runs no kernel", options.transfer.label()));
    }
    let total = 200 + options.warmup_reallocations + options.frames + options.reallocations + recompiles;
    let mut frames = Frames { frame: 0, progress: Progress::new("soak", u64::from(total), &options.stop) };
    warm_up(session, &mut frames, options)?;
    let before = footprint(session, cuda)?;
    let mut phases = Vec::new();

    log::info!("soak: measuring {} frames on {}", options.frames, options.transfer.label());
    let started = Instant::now();
    let mut samples = Vec::with_capacity((options.frames / FRAMES_PER_SAMPLE) as usize);
    let ran = frames.run(session, options.frames, Some(&mut samples))?;
    let frame_peaks = FramePeaks::of(&samples);
    if frame_peaks.is_none() && ran > 0 {
        notes.push(format!("skipped: the frames phase's peaks ({ran} frames; {} are needed)", 20 * FRAMES_PER_SAMPLE));
    }
    if ran > 0 {
        phases.push(Phase { name: "frames", count: ran, seconds: secs(started), after: footprint(session, cuda)? });
    }
    reallocations(session, &mut frames, cuda, options, &mut phases)?;
    phases.extend(recompile_phase(session, &mut frames, cuda, options, recompiles)?);
    let interrupted = options.stop.requested();
    if interrupted {
        notes.push(format!(
            "stopped ({}): the counts are those that ran; the verdict covers only them",
            options.stop.cause()
        ));
    }

    let errors = cuda.map(|cuda| cuda.context.take_errors()).unwrap_or_default();
    if let Some(error) = errors.first() {
        return Err(Error::Unavailable(format!("a resource failed to free itself during the soak: {error}")));
    }
    let device = match cuda {
        Some(cuda) => cuda.context.device().name.clone(),
        None => format!("no CUDA device ({} alone)", options.renderer.label()),
    };
    let mut exceeded =
        phases.last().map(|last| exceeded(&before, &last.after, &BOUNDS, options.renderer)).unwrap_or_default();
    exceeded.extend(frame_peaks.and_then(|peaks| peaks.exceeded(BOUNDS.host_rss_bytes)));
    Ok(SoakReport {
        renderer: options.renderer,
        transfer: options.transfer,
        device,
        before,
        phases,
        frame_peaks,
        bounds: BOUNDS,
        exceeded,
        notes,
        interrupted,
    })
}

/// The soak's frames, counted across its phases, with its progress line.
struct Frames {
    frame: u64,
    progress: Progress,
}

impl Frames {
    /// Runs up to `count` frames (fewer after Ctrl-C), adding resident memory to `samples` every
    /// [`FRAMES_PER_SAMPLE`] frames when given; returns how many ran.
    fn run(&mut self, session: &mut Session, count: u32, mut samples: Option<&mut Vec<u64>>) -> Result<u32> {
        let mut ran = 0;
        while ran < count && !self.progress.stopped() {
            self.progress.done_one();
            let report = session.frame(FrameInput { dt: 1.0 / 60.0, ..FrameInput::default() });
            if let Some(error) = report.errors.into_iter().next() {
                return Err(Error::Unavailable(format!("frame {} of the soak failed: {error}", self.frame)));
            }
            self.frame += 1;
            ran += 1;
            if let Some(samples) = samples.as_deref_mut()
                && ran % FRAMES_PER_SAMPLE == 0
            {
                samples.push(resident_bytes()?);
            }
        }
        session.finish()?;
        Ok(ran)
    }
}

/// The wave's grid the soak measures from and returns to after its re-allocations: its default.
fn original_grid() -> [u32; 2] {
    let default = WaveSettings::default();
    [default.width, default.height]
}

/// Warm-up: caches, the driver's lazily created state, the allocators' first arenas, GL's buffer
/// heap at its working size (re-allocations drawn from another seed than the measured ones).
fn warm_up(session: &mut Session, frames: &mut Frames, options: &SoakOptions) -> Result<()> {
    frames.run(session, 200, None)?;
    let mut warmup_sizes = Rng::new(0x3a11);
    for _ in 0..options.warmup_reallocations {
        if options.stop.requested() {
            break;
        }
        let [width, height] = random_grid(&mut warmup_sizes);
        set_vertices(session, width, height)?;
        frames.run(session, 1, None)?;
    }
    let [width, height] = original_grid();
    set_vertices(session, width, height)?;
    frames.run(session, 1, None)?;
    Ok(())
}

/// Re-allocations in four quarters, each measured, so growth that levels off (a driver's heap
/// reaching its working size) is told from growth that goes on (a leak).
fn reallocations(
    session: &mut Session,
    frames: &mut Frames,
    cuda: Option<&Rc<CudaRuntime>>,
    options: &SoakOptions,
    phases: &mut Vec<Phase>,
) -> Result<()> {
    let mut random = Rng::new(0x50a4);
    let mut done = 0;
    for quarter in 1..=4u32 {
        let started = Instant::now();
        let until = (u64::from(options.reallocations) * u64::from(quarter) / 4) as u32;
        let mut count = 0;
        for _ in done..until {
            if options.stop.requested() {
                break;
            }
            let [width, height] = random_grid(&mut random);
            set_vertices(session, width, height)?;
            frames.run(session, 1, None)?;
            count += 1;
        }
        if quarter == 4 {
            let [width, height] = original_grid();
            set_vertices(session, width, height)?;
            frames.run(session, 1, None)?;
        }
        done = until;
        if count == 0 {
            continue; // stopped before it, or no re-allocations asked for: nothing to show
        }
        phases.push(Phase {
            name: match options.transfer {
                TransferKind::Interop => "re-allocations with re-registration",
                TransferKind::Vulkan => "re-allocations with re-import",
                _ => "re-allocations",
            },
            count,
            seconds: secs(started),
            after: footprint(session, cuda)?,
        });
    }
    Ok(())
}

/// `recompiles` NVRTC compiles of the wave's kernel (no cache), each swapped in and run.
fn recompile_phase(
    session: &mut Session,
    frames: &mut Frames,
    cuda: Option<&Rc<CudaRuntime>>,
    options: &SoakOptions,
    recompiles: u32,
) -> Result<Option<Phase>> {
    let started = Instant::now();
    let (source, origin) = wave::KERNEL.read(None)?;
    let builds = wave(session)?.kernel_builds();
    let options_for_wave =
        builds.iter().find(|(file, _)| file.name == wave::KERNEL.name).map(|(_, o)| o.clone()).unwrap_or_default();
    let mut recompiled = 0;
    for index in 0..recompiles {
        let Some(cuda) = cuda else { break };
        if options.stop.requested() {
            break;
        }
        // A different comment each time: a new text, so NVRTC compiles it for real.
        let text = format!("{source}\n// soak recompile {index}\n");
        let compiled = cuda.compiler.compile_source(wave::KERNEL.name, &text, &origin, &options_for_wave)?;
        wave(session)?.swap_kernels(wave::KERNEL.name, &options_for_wave, &compiled)?;
        frames.run(session, 1, None)?;
        recompiled += 1;
    }
    if recompiled == 0 {
        return Ok(None);
    }
    Ok(Some(Phase {
        name: "kernel recompiles and module swaps",
        count: recompiled,
        seconds: secs(started),
        after: footprint(session, cuda)?,
    }))
}

/// Re-allocates the wave's grid to `width × height` vertices (registered anew on interop).
fn set_vertices(session: &mut Session, width: u32, height: u32) -> Result<()> {
    session.with_demo(|demo, graphics| {
        let wave = demo
            .as_any_mut()
            .and_then(|demo| demo.downcast_mut::<Wave>())
            .ok_or_else(|| Error::Unavailable("the soak runs the wave demo".to_owned()))?;
        wave.set_vertices(graphics, width, height)
    })
}

/// A random wave grid from 16×16 to 512×512 vertices (4 KiB to 4 MiB of vertex buffer).
fn random_grid(random: &mut Rng) -> [u32; 2] {
    [16 + (random.next_u64() % 497) as u32, 16 + (random.next_u64() % 497) as u32]
}

fn secs(started: Instant) -> f64 {
    started.elapsed().as_secs_f64()
}

/// Device memory, host memory and the renderer's objects once all work is done. GL frees a
/// deleted buffer's memory only after the GPU has finished with it, and a headless run never swaps
/// buffers (where a window's driver would catch up), so the renderer is finished first: what is
/// still taken then is held.
fn footprint(session: &mut Session, cuda: Option<&Rc<CudaRuntime>>) -> Result<Footprint> {
    session.finish()?;
    let device_free_bytes = match cuda {
        Some(cuda) => {
            cuda.context.synchronize()?;
            Some(cuda.context.memory_info()?.0 as u64)
        }
        None => None,
    };
    let objects = session.live_objects()?;
    Ok(Footprint { device_free_bytes, host_rss_bytes: resident_bytes()?, objects })
}

/// Resident set size of this process (`VmRSS` in /proc/self/status).
pub fn resident_bytes() -> Result<u64> {
    crate::host_memory::status_bytes("VmRSS:")
        .ok_or_else(|| Error::Unavailable("no VmRSS line in /proc/self/status".to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resident_memory_is_read() {
        let rss = resident_bytes().expect("VmRSS");
        assert!(rss > 1 << 20, "a running test binary holds more than 1 MiB: {rss}");
    }
}
