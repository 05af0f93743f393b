//! Per-frame stage timings and their summaries (median, p90), for the panel and `--stats`.

use std::collections::VecDeque;
use std::time::Instant;

use serde::Serialize;

/// The steps of a frame a learner should see, in the order they happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// `cuGraphicsMapResources` + `cuGraphicsResourceGetMappedPointer` (interop path).
    Map,
    /// The compute step: kernel launch(es) on CUDA, the CPU loop on the CPU backend.
    Kernel,
    /// `cuGraphicsUnmapResources` (interop path).
    Unmap,
    /// `cuMemcpyDtoHAsync` into pinned memory + stream sync (host-copy path).
    Download,
    /// Host memory into the graphics API's buffer (host-copy and CPU paths: `glBufferSubData`,
    /// or a write into mapped Vulkan memory), or a GPU copy from a pixel buffer.
    Upload,
    /// Ordering CUDA and the graphics API around shared memory (external-memory paths): host waits,
    /// or a semaphore one API signals and the other waits for (GL's or Vulkan's timeline).
    Sync,
    /// The demo's draw: GL draw calls, or a Vulkan command buffer recorded and submitted.
    Draw,
    /// The side panel: egui's layout, tessellation and paint (window, or headless with `--panel`).
    Panel,
    /// Handing the frame to the display (`glXSwapBuffers` / `eglSwapBuffers`, or `vkQueuePresentKHR`
    /// after acquiring the next image; window only): host time, which includes any wait for a free
    /// back buffer or for vertical blank.
    Present,
}

impl Stage {
    /// Every stage, in frame order.
    pub const ALL: [Stage; 9] = [
        Stage::Map,
        Stage::Kernel,
        Stage::Unmap,
        Stage::Download,
        Stage::Upload,
        Stage::Sync,
        Stage::Draw,
        Stage::Panel,
        Stage::Present,
    ];

    /// Short lowercase name, as in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Map => "map",
            Stage::Kernel => "kernel",
            Stage::Unmap => "unmap",
            Stage::Download => "download",
            Stage::Upload => "upload",
            Stage::Sync => "sync",
            Stage::Draw => "draw",
            Stage::Panel => "panel",
            Stage::Present => "present",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Where a stage's work ran, for the frame anatomy: the host thread, the CUDA stream, or the
/// graphics API's queue (OpenGL or Vulkan).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lane {
    /// The thread that runs the frame: driver calls, graphics calls, host waits.
    Host,
    /// The demo's CUDA stream (times from CUDA events).
    Cuda,
    /// The graphics API's queue (GL timestamp queries, Vulkan timestamps).
    Graphics,
}

/// Host and GPU microseconds of each stage in one frame; `None` where a stage did not run or its
/// GPU time is not known (yet). Where known, each also has its start on the one clock of
/// [`clock_us`] (the frame anatomy's time axis).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StageTimes {
    host_us: [Option<f64>; Stage::ALL.len()],
    gpu_us: [Option<f64>; Stage::ALL.len()],
    host_span: [Option<(f64, f64)>; Stage::ALL.len()],
    /// Where the GPU part ran: lane, start and length (the span's own; the GPU time above may
    /// count more, e.g. interop's map with the maps made ahead).
    gpu_at: [Option<(Lane, f64, f64)>; Stage::ALL.len()],
}

impl StageTimes {
    /// Sets the host time of `stage`.
    pub fn set_host(&mut self, stage: Stage, microseconds: f64) {
        self.host_us[stage.index()] = Some(microseconds);
    }

    /// Sets the host time of `stage` from `started` until now, and its span.
    pub fn set_host_since(&mut self, stage: Stage, started: Instant) {
        self.set_host_at(stage, clock_us(started), started.elapsed().as_secs_f64() * 1e6);
    }

    /// Sets the host time of `stage` and its span: from `start_us` on [`clock_us`]'s clock, that
    /// long.
    pub fn set_host_at(&mut self, stage: Stage, start_us: f64, microseconds: f64) {
        self.host_us[stage.index()] = Some(microseconds);
        self.host_span[stage.index()] = Some((start_us, microseconds));
    }

    /// Sets where the host part of `stage` lies on [`clock_us`]'s clock (start and length, µs)
    /// for the frame anatomy, without changing its time: a stage made of two separate parts
    /// shows its main one.
    pub fn set_host_span(&mut self, stage: Stage, start_us: f64, microseconds: f64) {
        self.host_span[stage.index()] = Some((start_us, microseconds));
    }

    /// Sets the GPU time of `stage`, measured on `lane`, and its start on [`clock_us`]'s clock
    /// (a calibrated GPU timestamp). A time that is not finite leaves the stage unknown; a start
    /// that is not finite, without a position.
    pub fn set_gpu_at(&mut self, stage: Stage, lane: Lane, start_us: f64, microseconds: f64) {
        if microseconds.is_finite() {
            self.gpu_us[stage.index()] = Some(microseconds);
            if start_us.is_finite() {
                self.gpu_at[stage.index()] = Some((lane, start_us, microseconds));
            }
        }
    }

    /// Where the host part of `stage` lies: start on [`clock_us`]'s clock and length, µs.
    pub fn host_span(&self, stage: Stage) -> Option<(f64, f64)> {
        self.host_span[stage.index()]
    }

    /// Where and when the GPU part of `stage` started.
    pub fn gpu_start(&self, stage: Stage) -> Option<(Lane, f64)> {
        self.gpu_at[stage.index()].map(|(lane, start, _)| (lane, start))
    }

    /// Where the GPU part of `stage` ran: lane, start and length, µs. The length is the span set
    /// with its start ([`Self::set_gpu_at`]), which a later [`Self::set_gpu`] (a GPU time that
    /// counts more than the span) does not change.
    pub fn gpu_span(&self, stage: Stage) -> Option<(Lane, f64, f64)> {
        self.gpu_at[stage.index()]
    }

    /// Sets the GPU time of `stage`; a value that is not finite (an interval whose events were
    /// not both recorded) leaves it unknown.
    pub fn set_gpu(&mut self, stage: Stage, microseconds: f64) {
        if microseconds.is_finite() {
            self.gpu_us[stage.index()] = Some(microseconds);
        }
    }

    /// Host time of `stage`.
    pub fn host(&self, stage: Stage) -> Option<f64> {
        self.host_us[stage.index()]
    }

    /// GPU time of `stage`.
    pub fn gpu(&self, stage: Stage) -> Option<f64> {
        self.gpu_us[stage.index()]
    }

    /// Copies every value `other` has into `self`.
    pub fn merge(&mut self, other: &StageTimes) {
        for i in 0..Stage::ALL.len() {
            if other.host_us[i].is_some() {
                self.host_us[i] = other.host_us[i];
            }
            if other.gpu_us[i].is_some() {
                self.gpu_us[i] = other.gpu_us[i];
            }
            if other.host_span[i].is_some() {
                self.host_span[i] = other.host_span[i];
            }
            if other.gpu_at[i].is_some() {
                self.gpu_at[i] = other.gpu_at[i];
            }
        }
    }
}

/// Times that arrive after their frame's record: GPU events and queries (read back without
/// stalling), and stages that run after the frame's step and draw (panel, present).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LateGpuTimes {
    /// The frame they belong to.
    pub frame: u64,
    /// The stages measured.
    pub times: StageTimes,
}

/// One frame's record.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FrameSample {
    /// Frame number.
    pub frame: u64,
    /// Wall time from the start of this frame to the start of the next, µs.
    pub frame_us: f64,
    /// Stage times.
    pub stages: StageTimes,
}

/// The last frames' samples.
#[derive(Debug, Clone)]
pub struct FrameHistory {
    samples: VecDeque<FrameSample>,
    capacity: usize,
}

impl FrameHistory {
    /// Keeps at most `capacity` frames.
    pub fn new(capacity: usize) -> Self {
        Self { samples: VecDeque::with_capacity(capacity), capacity: capacity.max(1) }
    }

    /// Appends a frame, dropping the oldest when full.
    pub fn push(&mut self, sample: FrameSample) {
        if self.samples.len() == self.capacity {
            self.samples.pop_front();
        }
        self.samples.push_back(sample);
    }

    /// Attaches GPU times that arrived late to their frame (ignored if it already left the history).
    pub fn add_late(&mut self, late: LateGpuTimes) {
        if let Some(sample) = self.samples.iter_mut().rev().find(|s| s.frame == late.frame) {
            sample.stages.merge(&late.times);
        }
    }

    /// The samples, oldest first.
    pub fn samples(&self) -> impl DoubleEndedIterator<Item = &FrameSample> + ExactSizeIterator {
        self.samples.iter()
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Summary of the last `last` frames (all when `None`).
    pub fn summary(&self, last: Option<usize>) -> Summary {
        let skip = last.map(|n| self.samples.len().saturating_sub(n)).unwrap_or(0);
        let window: Vec<&FrameSample> = self.samples.iter().skip(skip).collect();
        let stages = Stage::ALL
            .iter()
            .filter_map(|&stage| {
                let host = Percentiles::of(window.iter().filter_map(|s| s.stages.host(stage)));
                let gpu = Percentiles::of(window.iter().filter_map(|s| s.stages.gpu(stage)));
                (host.is_some() || gpu.is_some()).then_some(StageSummary { stage, host_us: host, gpu_us: gpu })
            })
            .collect();
        let frame_us = Percentiles::of(window.iter().map(|s| s.frame_us));
        Summary { frames: window.len(), frame_us, stages }
    }
}

/// Median and 90th percentile of a set of samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Percentiles {
    /// 50th percentile.
    pub median: f64,
    /// 90th percentile.
    pub p90: f64,
    /// Samples summarised.
    pub samples: usize,
}

impl Percentiles {
    /// `None` for no samples. Non-finite values are ignored.
    pub fn of(values: impl Iterator<Item = f64>) -> Option<Self> {
        let mut sorted: Vec<f64> = values.filter(|v| v.is_finite()).collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        Some(Self { median: percentile(&sorted, 0.5), p90: percentile(&sorted, 0.9), samples: sorted.len() })
    }
}

/// Nearest-rank percentile with linear interpolation between neighbours, of sorted values.
fn percentile(sorted: &[f64], fraction: f64) -> f64 {
    let position = fraction * (sorted.len() - 1) as f64;
    let below = position.floor() as usize;
    let above = position.ceil() as usize;
    let weight = position - below as f64;
    sorted[below] * (1.0 - weight) + sorted[above] * weight
}

/// One stage's summary.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StageSummary {
    /// Which stage.
    pub stage: Stage,
    /// Host time, µs.
    pub host_us: Option<Percentiles>,
    /// GPU time, µs.
    pub gpu_us: Option<Percentiles>,
}

/// Summary of a window of frames.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Frames summarised.
    pub frames: usize,
    /// Frame-to-frame wall time, µs.
    pub frame_us: Option<Percentiles>,
    /// Per-stage times, for the stages that ran.
    pub stages: Vec<StageSummary>,
}

impl Summary {
    /// The summary of `stage`, if it ran.
    pub fn stage(&self, stage: Stage) -> Option<&StageSummary> {
        self.stages.iter().find(|s| s.stage == stage)
    }
}

/// When `main` began, if the program marked it ([`mark_program_start`]).
static PROGRAM_START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// Microseconds from the program's start ([`mark_program_start`]; where nothing marked it, the
/// first call) to `at`: the one clock host times and calibrated GPU timestamps are put on.
pub fn clock_us(at: Instant) -> f64 {
    static UNMARKED: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let start = *PROGRAM_START.get().unwrap_or_else(|| UNMARKED.get_or_init(Instant::now));
    match at.checked_duration_since(start) {
        Some(after) => after.as_secs_f64() * 1e6,
        None => -((start - at).as_secs_f64() * 1e6),
    }
}

/// Notes that the program starts now (first thing in `main`). A process can be older than the
/// program it runs: `cargo run` builds, then execs the app in its own process, whose start time
/// would count the build.
pub fn mark_program_start() {
    PROGRAM_START.get_or_init(std::time::Instant::now);
}

/// Time since the program started: since [`mark_program_start`], or where nothing marked it (the
/// library in a test) since the process started, from the kernel's records (`/proc/self/stat`
/// start time against `/proc/uptime`; 10 ms resolution). How long a start took.
pub fn since_program_start() -> Option<std::time::Duration> {
    match PROGRAM_START.get() {
        Some(start) => Some(start.elapsed()),
        None => since_process_start(),
    }
}

fn since_process_start() -> Option<std::time::Duration> {
    const CLOCK_TICKS_PER_SECOND: f64 = 100.0; // USER_HZ: 100 on every Linux the app targets
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Field 22 (starttime); fields after the command name, which is in parentheses and may hold spaces.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let start_ticks: f64 = after_name.split_whitespace().nth(19)?.parse().ok()?;
    let uptime: f64 = std::fs::read_to_string("/proc/uptime").ok()?.split_whitespace().next()?.parse().ok()?;
    Some(std::time::Duration::from_secs_f64((uptime - start_ticks / CLOCK_TICKS_PER_SECOND).max(0.0)))
}

/// Logs (at debug level) that a phase of the start has ended, with the time since the process
/// started: `RUST_LOG=interop_lab=debug` shows where a slow start goes.
pub fn log_start_phase(phase: &str) {
    if log::log_enabled!(log::Level::Debug)
        && let Some(age) = since_program_start()
    {
        log::debug!("start: {phase} at {:.2} s", age.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_gpu_interval_leaves_the_stage_unknown() {
        let mut times = StageTimes::default();
        times.set_gpu(Stage::Map, f64::NAN);
        assert_eq!(times.gpu(Stage::Map), None);
        times.set_gpu(Stage::Map, 12.5);
        times.set_gpu(Stage::Map, f64::INFINITY);
        assert_eq!(times.gpu(Stage::Map), Some(12.5), "a non-finite value never replaces a measured one");
    }

    #[test]
    fn percentiles_interpolate_between_ranks() {
        let p = Percentiles::of([5.0, 1.0, 3.0, 2.0, 4.0].into_iter()).expect("samples");
        assert_eq!(p.median, 3.0);
        assert!((p.p90 - 4.6).abs() < 1e-12, "{}", p.p90);
        assert_eq!(p.samples, 5);
        assert_eq!(Percentiles::of(std::iter::empty()), None);
        let p = Percentiles::of([f64::NAN, 7.0].into_iter()).expect("one finite sample");
        assert_eq!((p.median, p.samples), (7.0, 1));
    }

    #[test]
    fn late_gpu_times_land_on_their_frame() {
        let mut history = FrameHistory::new(3);
        for frame in 0..4 {
            let mut stages = StageTimes::default();
            stages.set_host(Stage::Kernel, frame as f64);
            history.push(FrameSample { frame, frame_us: 1000.0, stages });
        }
        assert_eq!(history.len(), 3, "capacity is respected");
        let mut times = StageTimes::default();
        times.set_gpu(Stage::Kernel, 42.0);
        history.add_late(LateGpuTimes { frame: 2, times });
        history.add_late(LateGpuTimes { frame: 0, times }); // already dropped: ignored
        let kernel_gpu: Vec<Option<f64>> = history.samples().map(|s| s.stages.gpu(Stage::Kernel)).collect();
        assert_eq!(kernel_gpu, vec![None, Some(42.0), None]);
        let summary = history.summary(None);
        let kernel = summary.stage(Stage::Kernel).expect("kernel ran");
        assert_eq!(kernel.gpu_us.map(|p| p.samples), Some(1));
        assert_eq!(kernel.host_us.map(|p| p.median), Some(2.0));
        assert!(summary.stage(Stage::Map).is_none());
    }
}
