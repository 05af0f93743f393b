//! The Vulkan rows of `bench transfer`: a buffer Vulkan allocates and CUDA imports, filled by the
//! same kernel as the GL paths; Vulkan's submission waits on the GPU for CUDA's semaphore signal
//! and copies the buffer's last 16 bytes into host-visible memory, and the frame ends when the
//! host sees that submission's signal. Every frame's 16 bytes are checked against the fill pattern.

use std::rc::Rc;
use std::time::{Duration, Instant};

use ash::vk as raw;
use serde_json::json;

use super::fill::launch_fill;
use crate::cuda::{Context, DeviceLimits, Function, Stream};
use crate::demo_kit::bench::{Ran, Repeats, cell};
use crate::error::{Error, Result};
use crate::stats::{FrameHistory, FrameSample, Percentiles, Stage, StageTimes, Summary};
use crate::stop::StopRequest;
use crate::transfer::vulkan::VulkanShare;
use crate::vk::commands::CommandRing;
use crate::vk::device::{DeviceChoice, VulkanContext};
use crate::vk::memory::{Buffer, MemoryKind};
use crate::vk::shared::SharedTimeline;

/// The label of the Vulkan rows.
pub const VULKAN_LABEL: &str = "Vulkan + timeline";

/// The label of the row that measures the period of frames with no host wait.
const PERIOD_LABEL: &str = "Vulkan, period";

/// The ways a Vulkan frame is run: the real hand-off, and two that take a part away to show what
/// the hand-off itself costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// CUDA's step and Vulkan's submission enqueued back to back, ordered on the GPU.
    Shared,
    /// As `Shared`, but the host waits for CUDA's step before submitting (so Vulkan's wait is
    /// already met when it is submitted).
    CudaFirst,
    /// Vulkan's submission alone (its wait already met), no CUDA work.
    VulkanAlone,
    /// CUDA's step alone, then a host wait for the stream: no Vulkan submission.
    CudaAlone,
    /// What if: as `Shared`, but Vulkan's submission does not wait for CUDA's signal. The frames
    /// that read the wrong bytes are counted.
    SkipWait,
}

impl Mode {
    fn label(self) -> &'static str {
        match self {
            Mode::Shared => VULKAN_LABEL,
            Mode::CudaFirst => "Vulkan, CUDA waited",
            Mode::VulkanAlone => "Vulkan alone",
            Mode::CudaAlone => "CUDA alone (no Vulkan)",
            Mode::SkipWait => "what if: no Vulkan wait",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Mode::Shared => "vulkan",
            Mode::CudaFirst => "vulkan_cuda_waited_on_host",
            Mode::VulkanAlone => "vulkan_alone",
            Mode::CudaAlone => "vulkan_cuda_alone",
            Mode::SkipWait => "vulkan_what_if_no_wait",
        }
    }
}

/// Bytes Vulkan copies back each frame to check it saw this frame's fill.
const CHECKED_BYTES: usize = 16;

/// The Vulkan side of the benchmark, set up once.
pub struct VulkanBench {
    // Drop order: the share (CUDA's imports) and the Vulkan objects before the device.
    share: VulkanShare,
    commands: CommandRing,
    readback: Buffer,
    vulkan: Rc<VulkanContext>,
}

impl VulkanBench {
    /// Opens Vulkan on the CUDA device of `context` and imports its semaphore.
    pub fn new(context: &Rc<Context>, stream: &Rc<Stream>) -> Result<Self> {
        let device = context.device();
        let vulkan =
            VulkanContext::new(&DeviceChoice::CudaDevice { uuid: device.uuid.clone(), name: device.name.clone() })?;
        let timeline = Rc::new(SharedTimeline::new(&vulkan)?);
        let share = VulkanShare::new(&vulkan, &timeline, context, stream)?;
        let commands = CommandRing::new(&vulkan, 3)?;
        let readback =
            Buffer::new(&vulkan, CHECKED_BYTES, raw::BufferUsageFlags::TRANSFER_DST, MemoryKind::HostVisible)?;
        Ok(Self { share, commands, readback, vulkan })
    }

    /// Measures `bytes`, the hand-off and the rows that take it apart: returns the table lines and
    /// the JSON results. `stop` ends it within a frame; the rows measured whole are returned.
    pub fn run(
        &mut self,
        bytes: usize,
        counts: Repeats,
        function: &mut Function,
        limits: &DeviceLimits,
        stop: &StopRequest,
    ) -> Result<(String, Vec<serde_json::Value>)> {
        let mut lines = String::new();
        let mut results = Vec::new();
        for mode in [Mode::Shared, Mode::CudaFirst, Mode::VulkanAlone, Mode::CudaAlone, Mode::SkipWait] {
            self.share.timeline().set_skip_wait(mode == Mode::SkipWait);
            let measured = self.run_mode(mode, bytes, counts, function, limits, stop);
            self.share.timeline().set_skip_wait(false);
            let Some((line, result)) = measured? else {
                return Ok((lines, results));
            };
            lines.push_str(&line);
            results.push(result);
        }
        if let Some((line, result)) = self.run_period(bytes, counts, function, limits, stop)? {
            lines.push_str(&line);
            results.push(result);
        }
        Ok((lines, results))
    }

    /// What a renderer pays: two buffers in turn and no host wait per frame, so CUDA fills one
    /// while Vulkan reads the other. The frames are enqueued back to back (the command ring holds
    /// the host back only when all its buffers are in flight) and waited for once at the end; the
    /// row's time is the period, the timed frames' wall time over their count. Each frame copies
    /// its last 16 bytes into a slot of its own, all checked at the end.
    /// `None` when a stop came before its end.
    fn run_period(
        &mut self,
        bytes: usize,
        counts: Repeats,
        function: &mut Function,
        limits: &DeviceLimits,
        stop: &StopRequest,
    ) -> Result<Option<(String, serde_json::Value)>> {
        let buffers = [
            self.share.create_buffer(bytes, raw::BufferUsageFlags::STORAGE_BUFFER)?,
            self.share.create_buffer(bytes, raw::BufferUsageFlags::STORAGE_BUFFER)?,
        ];
        let checked = CHECKED_BYTES.min(bytes);
        let first_word = (bytes - checked) / 4;
        let total = (counts.warmup + counts.timed) as usize;
        let slots =
            Buffer::new(&self.vulkan, total * checked, raw::BufferUsageFlags::TRANSFER_DST, MemoryKind::HostVisible)?;
        let mut elapsed = Duration::ZERO;
        for (first, count, timed) in [(0, counts.warmup, false), (counts.warmup, counts.timed, true)] {
            let started = Instant::now();
            let ran = Repeats::timed(count).run(stop, |index, _| {
                let frame = u64::from(first) + index;
                let buffer = &buffers[(frame % 2) as usize];
                let value = frame as u32;
                self.share.cuda_step(frame, buffer.mark().value(), |stream| {
                    launch_fill(function, limits, stream, buffer.span(), value)
                })?;
                let slot = frame as usize * checked;
                self.share.submit_read(&mut self.commands, raw::PipelineStageFlags::TRANSFER, &[buffer], |r| {
                    r.copy(buffer.vulkan(), bytes - checked, &slots, slot, checked)
                })?;
                Ok(())
            })?;
            self.share.synchronize(Duration::from_secs(10))?;
            if ran == Ran::Stopped {
                while self.share.poll_gpu_times()?.is_some() {}
                return Ok(None);
            }
            if timed {
                elapsed = started.elapsed();
            }
        }
        while self.share.poll_gpu_times()?.is_some() {}
        let seen: &[u32] = slots.host_bytes().and_then(|b| bytemuck::try_cast_slice(b).ok()).unwrap_or(&[]);
        let words = checked / 4;
        let wrong_frames = (0..total)
            .filter(|&frame| {
                let expected = (0..words).map(|i| frame as u32 ^ (first_word + i) as u32);
                seen.get(frame * words..(frame + 1) * words).is_none_or(|got| !got.iter().copied().eq(expected))
            })
            .count();
        drop(buffers);
        let period = elapsed.as_secs_f64() * 1e6 / f64::from(counts.timed.max(1));
        let gbps = bytes as f64 / (period * 1e3);
        let mut line = format!(
            "{bytes:>9} {:<22} {:>5} {:>10} {:>10} {gbps:>10.2} {period:>10.1}  {} frames enqueued back to back, \
             one host wait at the end\n",
            PERIOD_LABEL, 2, "–", "–", counts.timed
        );
        if wrong_frames > 0 {
            line.insert_str(line.len() - 1, &format!("; {wrong_frames} frame(s) read the wrong bytes"));
        }
        let result = json!({
            "bytes": bytes,
            "path": "vulkan_period",
            "device": self.vulkan.description().name,
            "pipeline_depth": 2,
            "period_us": period,
            "gigabytes_per_s": gbps,
            "wrong_frames": wrong_frames,
        });
        Ok(Some((line, result)))
    }

    /// `None` when a stop came before its end.
    fn run_mode(
        &mut self,
        mode: Mode,
        bytes: usize,
        counts: Repeats,
        function: &mut Function,
        limits: &DeviceLimits,
        stop: &StopRequest,
    ) -> Result<Option<(String, serde_json::Value)>> {
        let buffer = self.share.create_buffer(bytes, raw::BufferUsageFlags::STORAGE_BUFFER)?;
        let checked = CHECKED_BYTES.min(bytes);
        let first_word = (bytes - checked) / 4;
        let mut history = FrameHistory::new(counts.timed as usize);
        let mut frame_us = Vec::with_capacity(counts.timed as usize);
        let mut wrong_frames = 0u32;
        let ran = counts.run(stop, |frame, timed| {
            let value = frame as u32;
            let mut times = StageTimes::default();
            let started = Instant::now();
            if mode != Mode::VulkanAlone {
                self.share.cuda_step(frame, buffer.mark().value(), |stream| {
                    launch_fill(function, limits, stream, buffer.span(), value)
                })?;
                times.set_host(Stage::Kernel, micros(started));
            }
            if mode == Mode::CudaFirst {
                self.share.synchronize(Duration::from_secs(10))?;
            }
            if mode == Mode::CudaAlone {
                let waited = Instant::now();
                self.share.synchronize(Duration::from_secs(10))?;
                times.set_host(Stage::Sync, micros(waited));
            } else {
                let submitted = Instant::now();
                let read =
                    self.share.submit_read(&mut self.commands, raw::PipelineStageFlags::TRANSFER, &[&buffer], |r| {
                        r.copy(buffer.vulkan(), bytes - checked, &self.readback, 0, checked)
                    })?;
                times.set_host(Stage::Draw, micros(submitted));
                let waited = Instant::now();
                if !self.share.timeline().wait_read(read, Duration::from_secs(10))? {
                    return Err(Error::Unavailable(format!("Vulkan did not signal {read} within 10 s")));
                }
                times.set_host(Stage::Sync, micros(waited));
            }
            let seen: &[u32] =
                self.readback.host_bytes().and_then(|b| bytemuck::try_cast_slice(&b[..checked]).ok()).unwrap_or(&[]);
            let expected = (0..checked / 4).map(|i| value ^ (first_word + i) as u32);
            if matches!(mode, Mode::Shared | Mode::CudaFirst | Mode::SkipWait)
                && (seen.len() != checked / 4 || !seen.iter().copied().eq(expected))
            {
                wrong_frames += 1;
            }
            if timed {
                frame_us.push(micros(started));
                history.push(FrameSample { frame, frame_us: f64::NAN, stages: times });
            }
            while let Some(late) = self.share.poll_gpu_times()? {
                history.add_late(late);
            }
            Ok(())
        })?;
        self.share.synchronize(Duration::from_secs(10))?;
        while let Some(late) = self.share.poll_gpu_times()? {
            history.add_late(late);
        }
        drop(buffer);
        if ran == Ran::Stopped {
            return Ok(None);
        }
        let frame = Percentiles::of(frame_us.into_iter()).ok_or_else(|| Error::Unavailable("no frames".to_owned()))?;
        Ok(Some(self.mode_row(mode, bytes, frame, &history.summary(None), wrong_frames)))
    }

    /// A mode's table line and JSON row.
    fn mode_row(
        &self,
        mode: Mode,
        bytes: usize,
        frame: Percentiles,
        summary: &Summary,
        wrong_frames: u32,
    ) -> (String, serde_json::Value) {
        // A stage the mode does not run (Vulkan alone enqueues no CUDA work; CUDA alone submits
        // nothing to Vulkan) has no median: "–" in the table, null in the JSON.
        let median = |stage: Stage, gpu: bool| {
            summary.stage(stage).and_then(|s| if gpu { s.gpu_us } else { s.host_us }).map(|p| p.median)
        };
        let gbps = bytes as f64 / (frame.median * 1e3);
        let mut line = format!(
            "{bytes:>9} {:<22} {:>5} {:>10.1} {:>10.1} {gbps:>10.2} {:>10}  CUDA enqueue {}, submit {}, host wait {} \
             (GPU: semaphore wait {}, kernel {})",
            mode.label(),
            1,
            frame.median,
            frame.p90,
            "–",
            cell(median(Stage::Kernel, false), 0),
            cell(median(Stage::Draw, false), 0),
            cell(median(Stage::Sync, false), 0),
            cell(median(Stage::Sync, true), 0),
            cell(median(Stage::Kernel, true), 0),
        );
        if wrong_frames > 0 {
            line.push_str(&format!("; {wrong_frames} frame(s) read the wrong bytes"));
        }
        line.push('\n');
        let result = json!({
            "bytes": bytes,
            "path": mode.key(),
            "device": self.vulkan.description().name,
            "pipeline_depth": 1,
            "frame_us": frame,
            "gigabytes_per_s": gbps,
            "wrong_frames": wrong_frames,
            "stages_us": {
                "cuda_enqueue_host": median(Stage::Kernel, false),
                "submit_host": median(Stage::Draw, false),
                "host_wait": median(Stage::Sync, false),
                "semaphore_wait_gpu": median(Stage::Sync, true),
                "kernel_gpu": median(Stage::Kernel, true),
            },
        });
        (line, result)
    }
}

fn micros(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e6
}
