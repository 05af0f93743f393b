//! GPU times of Vulkan frames: a timestamp at the start and at the end of each frame's command
//! buffer (`vkCmdWriteTimestamp`), one pair per buffer of the command ring, read once the ring has
//! waited for that buffer's submission, so reading never stalls.
#![allow(unsafe_code)]

use std::rc::Rc;

use ash::vk;

use super::commands::Recorder;
use super::device::VulkanContext;
use super::vk_error;
use crate::Result;

/// Timestamp pairs for the frames recorded in each slot of a command ring.
pub struct FrameTimer {
    pool: vk::QueryPool,
    /// The frame whose pair each slot holds, not yet read.
    frames: Vec<Option<u64>>,
    context: Rc<VulkanContext>,
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
        Ok(Some(Self { pool, frames: vec![None; slots], context: context.clone() }))
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

    /// The frame and its GPU time in µs held by `slot`, once; call only after the slot's
    /// submission has finished.
    pub fn take(&mut self, slot: usize) -> Result<Option<(u64, f64)>> {
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
        let nanoseconds = ticks[1].saturating_sub(ticks[0]) as f64 * f64::from(self.context.timestamp_period_ns());
        Ok(Some((frame, nanoseconds / 1e3)))
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
