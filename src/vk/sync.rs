//! Ordering on the GPU: timeline semaphores (a 64-bit counter that submissions, CUDA streams and
//! the host wait on and signal), optionally exportable as a file descriptor CUDA imports
//! (`cuImportExternalSemaphore`), and a ring of command buffers submitted with timeline waits and
//! signals. Nothing here waits on the host unless asked to.
#![allow(unsafe_code)]

use std::os::fd::{FromRawFd, OwnedFd};
use std::rc::Rc;
use std::time::Duration;

use ash::vk;

use super::device::VulkanContext;
use super::memory::Buffer;
use super::vk_error;
use crate::{Error, Result};

/// A timeline semaphore, destroyed on drop.
pub struct TimelineSemaphore {
    semaphore: vk::Semaphore,
    exportable: bool,
    context: Rc<VulkanContext>,
}

impl TimelineSemaphore {
    /// A timeline semaphore at 0; `exportable` makes it exportable as an opaque file descriptor.
    pub fn new(context: &Rc<VulkanContext>, exportable: bool) -> Result<Self> {
        if exportable {
            context.external_semaphore()?;
        }
        let mut timeline = vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE);
        let mut export =
            vk::ExportSemaphoreCreateInfo::default().handle_types(vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD);
        let mut create_info = vk::SemaphoreCreateInfo::default().push_next(&mut timeline);
        if exportable {
            create_info = create_info.push_next(&mut export);
        }
        // SAFETY: valid create info whose chain outlives the call; destroyed in Drop.
        let semaphore = unsafe { context.device().create_semaphore(&create_info, None) }
            .map_err(|e| vk_error("vkCreateSemaphore", e))?;
        Ok(Self { semaphore, exportable, context: context.clone() })
    }

    /// The Vulkan handle, for submissions.
    pub fn raw(&self) -> vk::Semaphore {
        self.semaphore
    }

    /// A new file descriptor for the semaphore (`vkGetSemaphoreFdKHR`); the importer takes it over.
    pub fn export_fd(&self) -> Result<OwnedFd> {
        if !self.exportable {
            return Err(Error::InvalidInput("this timeline semaphore was not made exportable".to_owned()));
        }
        let info = vk::SemaphoreGetFdInfoKHR::default()
            .semaphore(self.semaphore)
            .handle_type(vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD);
        // SAFETY: a semaphore created with this export type; the new descriptor is owned below.
        let fd = unsafe { self.context.external_semaphore()?.get_semaphore_fd(&info) }
            .map_err(|e| vk_error("vkGetSemaphoreFdKHR", e))?;
        // SAFETY: a fresh descriptor the call gave to us and to no one else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// The counter now (`vkGetSemaphoreCounterValue`).
    pub fn value(&self) -> Result<u64> {
        // SAFETY: a live timeline semaphore.
        unsafe { self.context.device().get_semaphore_counter_value(self.semaphore) }
            .map_err(|e| vk_error("vkGetSemaphoreCounterValue", e))
    }

    /// Waits on the host until the counter reaches `value`; `Ok(false)` when `timeout` passed first.
    pub fn wait(&self, value: u64, timeout: Duration) -> Result<bool> {
        let semaphores = [self.semaphore];
        let values = [value];
        let info = vk::SemaphoreWaitInfo::default().semaphores(&semaphores).values(&values);
        let nanoseconds = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        // SAFETY: a live timeline semaphore; the arrays outlive the call.
        match unsafe { self.context.device().wait_semaphores(&info, nanoseconds) } {
            Ok(()) => Ok(true),
            Err(vk::Result::TIMEOUT) => Ok(false),
            Err(e) => Err(vk_error("vkWaitSemaphores", e)),
        }
    }

    /// Sets the counter to `value` from the host (it must be above the current value).
    pub fn signal(&self, value: u64) -> Result<()> {
        let info = vk::SemaphoreSignalInfo::default().semaphore(self.semaphore).value(value);
        // SAFETY: a live timeline semaphore.
        unsafe { self.context.device().signal_semaphore(&info) }.map_err(|e| vk_error("vkSignalSemaphore", e))
    }
}

impl Drop for TimelineSemaphore {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once; submissions that use it are the owner's to
        // finish first (the device context waits for idle before it goes, too).
        unsafe { self.context.device().destroy_semaphore(self.semaphore, None) };
    }
}

/// A timeline value to wait for before a submission's commands run, from `stage` on.
#[derive(Clone, Copy)]
pub struct Wait<'a> {
    /// The semaphore.
    pub semaphore: &'a TimelineSemaphore,
    /// The value it must reach.
    pub value: u64,
    /// The first pipeline stage that waits.
    pub stage: vk::PipelineStageFlags,
}

/// A timeline value a submission sets when its commands are done.
#[derive(Clone, Copy)]
pub struct Signal<'a> {
    /// The semaphore.
    pub semaphore: &'a TimelineSemaphore,
    /// The value it is set to.
    pub value: u64,
}

/// A command buffer being recorded, with the commands the app records checked before they reach
/// the driver.
pub struct Recorder<'a> {
    device: &'a ash::Device,
    buffer: vk::CommandBuffer,
}

impl Recorder<'_> {
    /// Copies `bytes` bytes from `source` at `source_offset` to `destination` at
    /// `destination_offset` (`vkCmdCopyBuffer`).
    pub fn copy(
        &self,
        source: &Buffer,
        source_offset: usize,
        destination: &Buffer,
        destination_offset: usize,
        bytes: usize,
    ) -> Result<()> {
        let fits = |offset: usize, buffer: &Buffer| offset.checked_add(bytes).is_some_and(|end| end <= buffer.len());
        if bytes == 0 || !fits(source_offset, source) || !fits(destination_offset, destination) {
            return Err(Error::InvalidInput(format!(
                "a copy of {bytes} bytes from offset {source_offset} of {} to offset {destination_offset} of {} bytes \
                 does not fit",
                source.len(),
                destination.len()
            )));
        }
        let region = vk::BufferCopy {
            src_offset: source_offset as u64,
            dst_offset: destination_offset as u64,
            size: bytes as u64,
        };
        // SAFETY: a buffer in the recording state; both buffers are live (borrowed) and the region
        // lies inside each (checked above).
        unsafe { self.device.cmd_copy_buffer(self.buffer, source.raw(), destination.raw(), &[region]) };
        Ok(())
    }

    /// Fills `destination` with copies of `word` (`vkCmdFillBuffer`, whole buffer).
    pub fn fill(&self, destination: &Buffer, word: u32) -> Result<()> {
        // SAFETY: a buffer in the recording state; a live buffer, filled whole.
        unsafe { self.device.cmd_fill_buffer(self.buffer, destination.raw(), 0, vk::WHOLE_SIZE, word) };
        Ok(())
    }
}

/// Most timeline waits one submission takes.
pub const MAX_WAITS: usize = 4;
/// Most timeline signals one submission takes (besides the ring's own).
pub const MAX_SIGNALS: usize = 3;

/// Command buffers used in turn. Each submission also signals the ring's own timeline, so a buffer
/// is re-recorded only once its last submission has finished (the ring waits for that itself).
pub struct CommandRing {
    pool: vk::CommandPool,
    buffers: Vec<vk::CommandBuffer>,
    /// For each buffer, the value of `done` its last submission signals (0: never submitted).
    submitted: Vec<u64>,
    next: usize,
    done: TimelineSemaphore,
    count: u64,
    context: Rc<VulkanContext>,
}

impl CommandRing {
    /// `size` command buffers on the context's queue family.
    pub fn new(context: &Rc<VulkanContext>, size: usize) -> Result<Self> {
        let device = context.device();
        let create_info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(context.queue_family())
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        // SAFETY: valid create info; destroyed in Drop (or by the guard below).
        let pool = unsafe { device.create_command_pool(&create_info, None) }
            .map_err(|e| vk_error("vkCreateCommandPool", e))?;
        let pool = crate::guard::Guard::new(pool, |pool| {
            // SAFETY: created above, nothing submitted from it.
            unsafe { device.destroy_command_pool(pool, None) }
        });
        let allocate_info = vk::CommandBufferAllocateInfo::default()
            .command_pool(*pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(size.max(1) as u32);
        // SAFETY: a live pool; the buffers are freed with it.
        let buffers = unsafe { device.allocate_command_buffers(&allocate_info) }
            .map_err(|e| vk_error("vkAllocateCommandBuffers", e))?;
        let done = TimelineSemaphore::new(context, false)?;
        Ok(Self {
            pool: pool.keep(),
            submitted: vec![0; buffers.len()],
            buffers,
            next: 0,
            done,
            count: 0,
            context: context.clone(),
        })
    }

    /// Records the next buffer with `record` (after waiting for its last submission to finish)
    /// and submits it with `waits` and `signals`.
    pub fn submit(
        &mut self,
        waits: &[Wait<'_>],
        signals: &[Signal<'_>],
        record: impl FnOnce(&Recorder<'_>) -> Result<()>,
    ) -> Result<()> {
        if waits.len() > MAX_WAITS || signals.len() > MAX_SIGNALS {
            return Err(Error::InvalidInput(format!(
                "a submission takes at most {MAX_WAITS} waits and {MAX_SIGNALS} signals"
            )));
        }
        let slot = self.next;
        self.next = (self.next + 1) % self.buffers.len();
        if !self.done.wait(self.submitted[slot], Duration::from_secs(10))? {
            return Err(Error::Unavailable(
                "a Vulkan submission did not finish within 10 s: the GPU is stuck (restart the app)".to_owned(),
            ));
        }
        let device = self.context.device();
        let buffer = self.buffers[slot];
        let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        // SAFETY: the buffer's last submission has finished (waited above), so it may be reset and
        // recorded; recording happens on this thread only.
        unsafe {
            device
                .reset_command_buffer(buffer, vk::CommandBufferResetFlags::empty())
                .map_err(|e| vk_error("vkResetCommandBuffer", e))?;
            device.begin_command_buffer(buffer, &begin).map_err(|e| vk_error("vkBeginCommandBuffer", e))?;
        }
        let recorded = record(&Recorder { device, buffer });
        // SAFETY: a buffer in the recording state.
        unsafe { device.end_command_buffer(buffer) }.map_err(|e| vk_error("vkEndCommandBuffer", e))?;
        recorded?;

        self.count += 1;
        // Fixed arrays: a frame's submission allocates nothing.
        let mut wait_semaphores = [vk::Semaphore::null(); MAX_WAITS];
        let mut wait_values = [0u64; MAX_WAITS];
        let mut wait_stages = [vk::PipelineStageFlags::empty(); MAX_WAITS];
        for (i, wait) in waits.iter().enumerate() {
            (wait_semaphores[i], wait_values[i], wait_stages[i]) = (wait.semaphore.raw(), wait.value, wait.stage);
        }
        let mut signal_semaphores = [vk::Semaphore::null(); MAX_SIGNALS + 1];
        let mut signal_values = [0u64; MAX_SIGNALS + 1];
        for (i, signal) in signals.iter().enumerate() {
            (signal_semaphores[i], signal_values[i]) = (signal.semaphore.raw(), signal.value);
        }
        (signal_semaphores[signals.len()], signal_values[signals.len()]) = (self.done.raw(), self.count);
        let (wait_semaphores, wait_values, wait_stages) =
            (&wait_semaphores[..waits.len()], &wait_values[..waits.len()], &wait_stages[..waits.len()]);
        let (signal_semaphores, signal_values) =
            (&signal_semaphores[..=signals.len()], &signal_values[..=signals.len()]);
        let mut timeline = vk::TimelineSemaphoreSubmitInfo::default()
            .wait_semaphore_values(wait_values)
            .signal_semaphore_values(signal_values);
        let command_buffers = [buffer];
        let submit = vk::SubmitInfo::default()
            .wait_semaphores(wait_semaphores)
            .wait_dst_stage_mask(wait_stages)
            .command_buffers(&command_buffers)
            .signal_semaphores(signal_semaphores)
            .push_next(&mut timeline);
        // SAFETY: a recorded buffer; every array outlives the call; the queue is used from this
        // thread only.
        unsafe { device.queue_submit(self.context.queue(), &[submit], vk::Fence::null()) }
            .map_err(|e| vk_error("vkQueueSubmit", e))?;
        self.submitted[slot] = self.count;
        Ok(())
    }

    /// Waits until every submission made so far has finished.
    pub fn wait_all(&self, timeout: Duration) -> Result<bool> {
        self.done.wait(self.count, timeout)
    }
}

impl Drop for CommandRing {
    fn drop(&mut self) {
        // A buffer still executing must not be freed: wait for all of them (bounded; the device
        // context waits for idle before it goes as well).
        if let Err(error) = self.wait_all(Duration::from_secs(10)) {
            log::warn!("waiting for Vulkan submissions before freeing their command buffers: {error}");
        }
        // SAFETY: the pool was created in `new`; its buffers are finished (waited above).
        unsafe { self.context.device().destroy_command_pool(self.pool, None) };
    }
}
