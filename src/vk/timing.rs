//! GPU times of Vulkan frames: a timestamp at the start and at the end of each frame's command
//! buffer (`vkCmdWriteTimestamp`), one pair per buffer of the command ring, read once the ring has
//! waited for that buffer's submission, so reading never stalls. Where the device offers
//! calibrated timestamps, they are put on the host clock too (read again every 2 s).
#![allow(unsafe_code)]

use std::rc::Rc;
use std::time::{Duration, Instant};

use ash::vk;

use super::commands::Recorder;
use super::device::{GpuClockReading, VulkanContext};
use super::vk_error;
use crate::error::Result;

/// How often the device clock is compared with the host's again.
const RECALIBRATE: Duration = Duration::from_secs(2);

/// Timestamp pairs for the frames recorded in each slot of a command ring.
pub struct FrameTimer {
    pool: vk::QueryPool,
    /// The frame whose pair each slot holds, not yet read.
    frames: Vec<Option<u64>>,
    /// The last reading of the device clock (`None`: no calibrated timestamps).
    clock: Option<(GpuClockReading, Instant)>,
    context: Rc<VulkanContext>,
}

/// One frame's GPU time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VkTime {
    /// The frame.
    pub frame: u64,
    /// Its start on the host clock, µs (`None`: the device clock cannot be read from the host).
    pub start_us: Option<f64>,
    /// From its first command to its last, µs.
    pub microseconds: f64,
}

impl FrameTimer {
    /// A timer for a ring of `slots` command buffers, or `None` when the queue writes no
    /// timestamps.
    pub fn new(context: &Rc<VulkanContext>, slots: usize) -> Result<Option<Self>> {
        if !context.timestamps() {
            return Ok(None);
        }
        let create_info =
            vk::QueryPoolCreateInfo::default().query_type(vk::QueryType::TIMESTAMP).query_count(2 * slots as u32);
        // SAFETY: valid create info; destroyed in Drop.
        let pool = unsafe { context.device().create_query_pool(&create_info, None) }
            .map_err(|e| vk_error("vkCreateQueryPool", e))?;
        let clock = context.read_gpu_clock().map(|reading| (reading, Instant::now()));
        Ok(Some(Self { pool, frames: vec![None; slots], clock, context: context.clone() }))
    }

    /// Records: the start of frame `frame` in `slot` (whose earlier submission has finished).
    pub fn begin(&mut self, recorder: &Recorder<'_>, slot: usize, frame: u64) {
        let (device, commands) = recorder.raw();
        // SAFETY: a buffer in the recording state; the two queries of `slot` exist and are not in
        // use by any pending submission (the ring waited for this slot's last one).
        unsafe {
            device.cmd_reset_query_pool(commands, self.pool, 2 * slot as u32, 2);
            device.cmd_write_timestamp(commands, vk::PipelineStageFlags::TOP_OF_PIPE, self.pool, 2 * slot as u32);
        }
        self.frames[slot] = Some(frame);
    }

    /// Records: the end of the frame in `slot`.
    pub fn end(&self, recorder: &Recorder<'_>, slot: usize) {
        let (device, commands) = recorder.raw();
        // SAFETY: a buffer in the recording state; the query was reset by `begin` in this buffer.
        unsafe {
            device.cmd_write_timestamp(
                commands,
                vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                self.pool,
                2 * slot as u32 + 1,
            );
        }
    }

    /// The last reading of the device clock, if it can be read.
    pub fn clock(&self) -> Option<GpuClockReading> {
        self.clock.map(|(reading, _)| reading)
    }

    /// The frame and its GPU time held by `slot`, once; call only after the slot's submission
    /// has finished.
    pub fn take(&mut self, slot: usize) -> Result<Option<VkTime>> {
        let Some(frame) = self.frames.get_mut(slot).and_then(Option::take) else {
            return Ok(None);
        };
        let mut ticks = [0u64; 2];
        // SAFETY: both queries were written by a finished submission; 64-bit results into a
        // two-element array.
        unsafe {
            self.context.device().get_query_pool_results(
                self.pool,
                2 * slot as u32,
                &mut ticks,
                vk::QueryResultFlags::TYPE_64,
            )
        }
        .map_err(|e| vk_error("vkGetQueryPoolResults", e))?;
        let period_ns = f64::from(self.context.timestamp_period_ns());
        let nanoseconds = ticks[1].saturating_sub(ticks[0]) as f64 * period_ns;
        if self.clock.is_some_and(|(_, at)| at.elapsed() > RECALIBRATE) {
            self.clock = self.context.read_gpu_clock().map(|reading| (reading, Instant::now()));
        }
        let start_us = self.clock.map(|(c, _)| ticks[0] as f64 * period_ns / 1e3 - c.device_us + c.host_us);
        Ok(Some(VkTime { frame, start_us, microseconds: nanoseconds / 1e3 }))
    }

    /// Slots in the timer.
    pub fn slots(&self) -> usize {
        self.frames.len()
    }
}

impl Drop for FrameTimer {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once, after the frames that wrote it (the owner
        // waits for them).
        unsafe { self.context.device().destroy_query_pool(self.pool, None) };
    }
}
