//! Recording and submitting commands: a ring of command buffers used in turn (a buffer is
//! re-recorded only once its last submission has finished), and a [`Recorder`] whose commands are
//! checked before they reach the driver, so code outside `vk/` records without `unsafe`.
#![allow(unsafe_code)]

use std::rc::Rc;
use std::time::Duration;

use ash::vk;

use super::device::VulkanContext;
use super::image::whole_image_copy;
use super::memory::Buffer;
use super::pipeline::{FLOAT4, GraphicsPipeline, MAX_VERTEX_BUFFERS};
use super::sync::{Signal, TimelineSemaphore, Wait};
use super::texture::Texture;
use super::vk_error;
use crate::error::{Error, Result};

/// A command buffer being recorded.
pub struct Recorder<'a> {
    device: &'a ash::Device,
    buffer: vk::CommandBuffer,
}

impl Recorder<'_> {
    /// The device and the raw command buffer, for the recording code inside `vk/`.
    pub(crate) fn raw(&self) -> (&ash::Device, vk::CommandBuffer) {
        (self.device, self.buffer)
    }

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

    /// Writes `value` into the first 8 bytes of `destination` (`vkCmdUpdateBuffer`) once every
    /// command recorded before it in this submission has finished: a word another API (CUDA's
    /// `cuStreamWaitValue64`) can wait for instead of a semaphore.
    pub fn write_done_word(&self, destination: &Buffer, value: u64) -> Result<()> {
        if destination.len() < 8 {
            return Err(Error::InvalidInput("a done word needs a buffer of at least 8 bytes".to_owned()));
        }
        // SAFETY: a buffer in the recording state; a live buffer of at least 8 bytes (checked).
        unsafe {
            self.device.cmd_pipeline_barrier(
                self.buffer,
                vk::PipelineStageFlags::ALL_COMMANDS,
                vk::PipelineStageFlags::TRANSFER,
                vk::DependencyFlags::empty(),
                &[],
                &[],
                &[],
            );
            self.device.cmd_update_buffer(self.buffer, destination.raw(), 0, &value.to_ne_bytes());
        }
        Ok(())
    }

    /// Copies `source` (the whole image's bytes, rows top first) into `texture`, then makes it
    /// ready for fragment shaders to sample.
    pub fn upload(&self, texture: &Texture, source: &Buffer) -> Result<()> {
        if source.len() < texture.bytes() {
            let [width, height] = texture.size();
            return Err(Error::InvalidInput(format!(
                "{} bytes cannot fill a {width}x{height} image of {} bytes",
                source.len(),
                texture.bytes()
            )));
        }
        // Earlier samples and copies are done before the copy writes; the copy is done before
        // fragment shaders sample.
        let to_transfer = texture.barrier(
            vk::ImageLayout::TRANSFER_DST_OPTIMAL,
            vk::AccessFlags::SHADER_READ | vk::AccessFlags::TRANSFER_WRITE,
            vk::AccessFlags::TRANSFER_WRITE,
        );
        let region = whole_image_copy(texture.size());
        let to_shader =
            texture.barrier(texture.sampled_layout(), vk::AccessFlags::TRANSFER_WRITE, vk::AccessFlags::SHADER_READ);
        // SAFETY: a buffer in the recording state; the image is in the layouts the barriers say
        // (tracked in recording order); the buffer holds at least the image's bytes (checked).
        unsafe {
            self.device.cmd_pipeline_barrier(
                self.buffer,
                vk::PipelineStageFlags::FRAGMENT_SHADER | vk::PipelineStageFlags::TRANSFER,
                vk::PipelineStageFlags::TRANSFER,
                vk::DependencyFlags::empty(),
                &[],
                &[],
                &[to_transfer],
            );
            self.device.cmd_copy_buffer_to_image(
                self.buffer,
                source.raw(),
                texture.raw_image(),
                vk::ImageLayout::TRANSFER_DST_OPTIMAL,
                &[region],
            );
            self.device.cmd_pipeline_barrier(
                self.buffer,
                vk::PipelineStageFlags::TRANSFER,
                vk::PipelineStageFlags::FRAGMENT_SHADER,
                vk::DependencyFlags::empty(),
                &[],
                &[],
                &[to_shader],
            );
        }
        Ok(())
    }

    /// Orders every copy and fill recorded or submitted before it before every one after it
    /// (their writes visible to later reads, their reads done before later writes).
    pub fn transfer_barrier(&self) -> Result<()> {
        let barrier = vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
            .dst_access_mask(vk::AccessFlags::TRANSFER_READ | vk::AccessFlags::TRANSFER_WRITE);
        // SAFETY: a buffer in the recording state; a global memory barrier between transfers.
        unsafe {
            self.device.cmd_pipeline_barrier(
                self.buffer,
                vk::PipelineStageFlags::TRANSFER,
                vk::PipelineStageFlags::TRANSFER,
                vk::DependencyFlags::empty(),
                &[barrier],
                &[],
                &[],
            )
        };
        Ok(())
    }

    /// Draws `count` vertices of `vertices` (one buffer per attribute, a float4 per vertex) with
    /// `pipeline`, its push constants set to `constants`.
    pub fn draw(&self, pipeline: &GraphicsPipeline, constants: &[u8], vertices: &[&Buffer], count: u32) -> Result<()> {
        for buffer in vertices {
            let available = buffer.len() / FLOAT4 as usize;
            if count as usize > available {
                return Err(Error::InvalidInput(format!(
                    "drawing {count} vertices from a buffer that holds {available}"
                )));
            }
        }
        self.bind(pipeline, constants, vertices)?;
        // SAFETY: a buffer in the recording state inside a rendering scope; the vertices read lie
        // inside the bound buffer (checked above).
        unsafe { self.device.cmd_draw(self.buffer, count, 1, 0, 0) };
        Ok(())
    }

    /// Draws `count` indices of `indices` (u32, each below `vertices`' vertex count, which the
    /// caller vouches for by having built them for this vertex count) with `pipeline`.
    pub fn draw_indexed(
        &self,
        pipeline: &GraphicsPipeline,
        constants: &[u8],
        vertices: &[&Buffer],
        indices: &Buffer,
        count: u32,
    ) -> Result<()> {
        if count as usize * 4 > indices.len() {
            return Err(Error::InvalidInput(format!(
                "drawing {count} indices from a buffer that holds {}",
                indices.len() / 4
            )));
        }
        self.bind(pipeline, constants, vertices)?;
        // SAFETY: a buffer in the recording state inside a rendering scope; the index range lies
        // inside the index buffer (checked above).
        unsafe {
            self.device.cmd_bind_index_buffer(self.buffer, indices.raw(), 0, vk::IndexType::UINT32);
            self.device.cmd_draw_indexed(self.buffer, count, 1, 0, 0, 0);
        }
        Ok(())
    }

    /// Draws one triangle whose vertices the vertex shader makes up (covering the viewport), with
    /// `pipeline`, its push constants and its textures (`set`, from
    /// [`GraphicsPipeline::bind_textures`]).
    pub fn draw_fullscreen(&self, pipeline: &GraphicsPipeline, constants: &[u8], set: vk::DescriptorSet) -> Result<()> {
        self.bind(pipeline, constants, &[])?;
        // SAFETY: a buffer in the recording state inside a rendering scope; a set made for this
        // pipeline's layout whose textures are live (the caller holds them).
        unsafe {
            self.device.cmd_bind_descriptor_sets(
                self.buffer,
                vk::PipelineBindPoint::GRAPHICS,
                pipeline.layout(),
                0,
                &[set],
                &[],
            );
            self.device.cmd_draw(self.buffer, 3, 1, 0, 0);
        }
        Ok(())
    }

    fn bind(&self, pipeline: &GraphicsPipeline, constants: &[u8], vertices: &[&Buffer]) -> Result<()> {
        if vertices.len() != pipeline.vertex_buffers() {
            return Err(Error::InvalidInput(format!(
                "{} vertex buffers for a pipeline that reads {}",
                vertices.len(),
                pipeline.vertex_buffers()
            )));
        }
        let mut handles = [vk::Buffer::null(); MAX_VERTEX_BUFFERS];
        for (handle, buffer) in handles.iter_mut().zip(vertices) {
            *handle = buffer.raw();
        }
        let offsets = [0u64; MAX_VERTEX_BUFFERS];
        if constants.len() != pipeline.push_constant_bytes() as usize {
            return Err(Error::InvalidInput(format!(
                "{} bytes of push constants for a pipeline that takes {}",
                constants.len(),
                pipeline.push_constant_bytes()
            )));
        }
        // SAFETY: a buffer in the recording state; a live pipeline and buffers, as many as it reads;
        // the constants cover exactly the pipeline's push-constant range (checked above).
        unsafe {
            self.device.cmd_bind_pipeline(self.buffer, vk::PipelineBindPoint::GRAPHICS, pipeline.raw());
            self.device.cmd_push_constants(
                self.buffer,
                pipeline.layout(),
                vk::ShaderStageFlags::VERTEX | vk::ShaderStageFlags::FRAGMENT,
                0,
                constants,
            );
            if !vertices.is_empty() {
                self.device.cmd_bind_vertex_buffers(
                    self.buffer,
                    0,
                    &handles[..vertices.len()],
                    &offsets[..vertices.len()],
                );
            }
        }
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
    /// The buffer being recorded, between [`Self::begin`] and [`Self::submit_recorded`].
    open: Option<usize>,
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
            open: None,
            done,
            count: 0,
            context: context.clone(),
        })
    }

    /// Starts recording the next buffer, after waiting for its last submission to finish.
    pub fn begin(&mut self) -> Result<()> {
        if self.open.is_some() {
            return Err(Error::InvalidInput("a command buffer is already being recorded".to_owned()));
        }
        let slot = self.next;
        if !self.done.wait(self.submitted[slot], Duration::from_secs(10))? {
            return Err(Error::Unavailable(
                "a Vulkan submission did not finish within 10 s: the GPU is stuck (restart the app)".to_owned(),
            ));
        }
        self.next = (self.next + 1) % self.buffers.len();
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
        self.open = Some(slot);
        Ok(())
    }

    /// Which of the ring's buffers is being recorded, if one is.
    pub fn open_slot(&self) -> Option<usize> {
        self.open
    }

    /// The buffer being recorded.
    pub fn recorder(&self) -> Result<Recorder<'_>> {
        let slot = self.open.ok_or_else(|| Error::InvalidInput("no command buffer is being recorded".to_owned()))?;
        Ok(Recorder { device: self.context.device(), buffer: self.buffers[slot] })
    }

    /// Ends the buffer being recorded and submits it with `waits` and `signals`.
    pub fn submit_recorded(&mut self, waits: &[Wait<'_>], signals: &[Signal<'_>]) -> Result<()> {
        let slot =
            self.open.take().ok_or_else(|| Error::InvalidInput("no command buffer is being recorded".to_owned()))?;
        if waits.len() > MAX_WAITS || signals.len() > MAX_SIGNALS {
            return Err(Error::InvalidInput(format!(
                "a submission takes at most {MAX_WAITS} waits and {MAX_SIGNALS} signals"
            )));
        }
        let device = self.context.device();
        let buffer = self.buffers[slot];
        // SAFETY: a buffer in the recording state.
        unsafe { device.end_command_buffer(buffer) }.map_err(|e| vk_error("vkEndCommandBuffer", e))?;

        let count = self.count + 1;
        // Fixed arrays: a frame's submission allocates nothing.
        let mut wait_semaphores = [vk::Semaphore::null(); MAX_WAITS];
        let mut wait_values = [0u64; MAX_WAITS];
        let mut wait_stages = [vk::PipelineStageFlags::empty(); MAX_WAITS];
        for (i, wait) in waits.iter().enumerate() {
            (wait_semaphores[i], wait_values[i], wait_stages[i]) = (wait.semaphore, wait.value, wait.stage);
        }
        let mut signal_semaphores = [vk::Semaphore::null(); MAX_SIGNALS + 1];
        let mut signal_values = [0u64; MAX_SIGNALS + 1];
        for (i, signal) in signals.iter().enumerate() {
            (signal_semaphores[i], signal_values[i]) = (signal.semaphore, signal.value);
        }
        (signal_semaphores[signals.len()], signal_values[signals.len()]) = (self.done.raw(), count);
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
        self.count = count;
        self.submitted[slot] = count;
        Ok(())
    }

    /// Records the next buffer with `record` and submits it with `waits` and `signals`. When
    /// `record` fails, nothing is submitted.
    pub fn submit(
        &mut self,
        waits: &[Wait<'_>],
        signals: &[Signal<'_>],
        record: impl FnOnce(&Recorder<'_>) -> Result<()>,
    ) -> Result<()> {
        self.begin()?;
        let recorded = record(&self.recorder()?);
        if let Err(error) = recorded {
            self.abandon();
            return Err(error);
        }
        self.submit_recorded(waits, signals)
    }

    /// Ends the buffer being recorded without submitting it (it is reset at its next use).
    pub fn abandon(&mut self) {
        if let Some(slot) = self.open.take() {
            // SAFETY: a buffer in the recording state; ended, never submitted.
            if let Err(error) = unsafe { self.context.device().end_command_buffer(self.buffers[slot]) } {
                log::warn!("vkEndCommandBuffer on an abandoned recording: {error}");
            }
        }
    }

    /// Waits until every submission made so far has finished.
    pub fn wait_all(&self, timeout: Duration) -> Result<bool> {
        self.done.wait(self.count, timeout)
    }
}

impl Drop for CommandRing {
    fn drop(&mut self) {
        self.abandon();
        // A buffer still executing must not be freed: wait for all of them (bounded; the device
        // context waits for idle before it goes as well).
        if let Err(error) = self.wait_all(Duration::from_secs(10)) {
            log::warn!("waiting for Vulkan submissions before freeing their command buffers: {error}");
        }
        // SAFETY: the pool was created in `new`; its buffers are finished (waited above).
        unsafe { self.context.device().destroy_command_pool(self.pool, None) };
    }
}
