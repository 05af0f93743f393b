//! What a frame drawn with Vulkan works in: the device, an offscreen target, and the command
//! buffer being recorded between [`VulkanGraphics::begin_frame`] and
//! [`VulkanGraphics::end_frame`]. It is what [`crate::graphics::Graphics::Vulkan`] carries, so
//! the transfer paths can make buffers on the device and the renderer can record into the frame.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use ash::vk;

use super::commands::{CommandRing, Recorder};
use super::device::GpuClockReading;
use super::device::{DeviceChoice, VulkanContext};
use super::memory::{Buffer, MemoryKind};
use super::shared::{ReadMark, SharedTimeline};
use super::swapchain::{Acquired, Swapchain};
use super::sync::{Signal, Wait};
use super::target::OffscreenTarget;
use super::texture::Texture;
use super::timing::{FrameTimer, VkTime};
use crate::error::{Error, Result};
use crate::pixel::PixelFormat;

/// Command buffers in flight: enough for the host to record a frame while the GPU runs two.
pub const FRAMES_IN_FLIGHT: usize = 3;

/// The Vulkan device and offscreen target of a headless run.
pub struct VulkanGraphics {
    // Drop order: the ring (which waits for the GPU), the timer and the target before the device.
    commands: RefCell<CommandRing>,
    /// Timestamps around each frame's commands, where the queue writes them.
    timer: RefCell<Option<FrameTimer>>,
    /// GPU times read and not yet taken.
    gpu_times: RefCell<Vec<VkTime>>,
    /// The semaphores shared with CUDA, once a transfer path asked for them: every submission
    /// then waits for CUDA's writes and signals that it has read.
    shared: RefCell<Option<Rc<SharedTimeline>>>,
    target: OffscreenTarget,
    context: Rc<VulkanContext>,
}

impl VulkanGraphics {
    /// Opens a device as `choice` says, with a target of `size` pixels.
    pub fn new(choice: &DeviceChoice, size: [u32; 2]) -> Result<Self> {
        Self::on(VulkanContext::new(choice)?, size)
    }

    /// As [`Self::new`], on a device already open (one that presents to a window).
    pub fn on(context: Rc<VulkanContext>, size: [u32; 2]) -> Result<Self> {
        if !context.can_render() {
            return Err(Error::Unavailable(format!(
                "Vulkan device {} is Vulkan {}, and the renderer needs 1.3 (dynamic rendering): update the driver",
                context.description().name,
                context.description().api_version
            )));
        }
        let target = OffscreenTarget::new(&context, size)?;
        let commands = RefCell::new(CommandRing::new(&context, FRAMES_IN_FLIGHT)?);
        let timer = RefCell::new(FrameTimer::new(&context, FRAMES_IN_FLIGHT)?);
        Ok(Self { commands, timer, gpu_times: RefCell::new(Vec::new()), shared: RefCell::new(None), target, context })
    }

    /// The device.
    pub fn context(&self) -> &Rc<VulkanContext> {
        &self.context
    }

    /// The offscreen target.
    pub fn target(&self) -> &OffscreenTarget {
        &self.target
    }

    /// The timeline semaphores this device shares with CUDA (made on first use). From then on
    /// every submission of a frame or upload waits for what CUDA was asked to write and signals
    /// that it has read.
    pub fn shared_timeline(&self) -> Result<Rc<SharedTimeline>> {
        let mut shared = self.shared.try_borrow_mut().map_err(|_| busy())?;
        if let Some(timeline) = shared.as_ref() {
            return Ok(timeline.clone());
        }
        let timeline = Rc::new(SharedTimeline::new(&self.context)?);
        *shared = Some(timeline.clone());
        Ok(timeline)
    }

    /// Notes that the submission being recorded reads the buffer marked `mark`, so CUDA waits for
    /// it before writing the buffer again (nothing to note before CUDA shares this device).
    pub fn reads(&self, mark: &ReadMark) {
        if let Some(timeline) = self.shared.borrow().as_ref() {
            timeline.read_by_next(mark);
        }
    }

    /// Submits what `commands` is recording, with `waits` and `signals`: through the shared
    /// timeline when CUDA shares the device (waits for its writes from `stage` on), plainly
    /// otherwise.
    fn submit_recorded(
        &self,
        commands: &mut CommandRing,
        stage: vk::PipelineStageFlags,
        waits: &[Wait<'_>],
        signals: &[Signal<'_>],
    ) -> Result<()> {
        match self.shared.borrow().as_ref() {
            Some(timeline) => timeline.submit_recorded(commands, stage, waits, signals).map(|_| ()),
            None => commands.submit_recorded(waits, signals),
        }
    }

    /// A new target of `size` pixels (the window was resized), once every frame is done.
    pub fn resize(&mut self, size: [u32; 2]) -> Result<()> {
        if size == self.target.size() {
            return Ok(());
        }
        self.wait_idle()?;
        self.target = OffscreenTarget::new(&self.context, size)?;
        Ok(())
    }

    /// Records, into the frame begun, drawing over the whole target with no depth: `record` gets
    /// the raw command buffer (for a library that records its own commands: the panel).
    pub fn record_overlay<R>(&self, record: impl FnOnce(vk::CommandBuffer) -> Result<R>) -> Result<R> {
        let commands = self.commands.try_borrow().map_err(|_| busy())?;
        let recorder = commands.recorder()?;
        self.target.begin_overlay(&recorder)?;
        let recorded = record(recorder.raw().1);
        self.target.end_rendering(&recorder);
        recorded
    }

    /// Ends a recording without submitting it.
    fn abandon(&self, commands: &mut CommandRing) {
        commands.abandon();
        if let Some(timeline) = self.shared.borrow().as_ref() {
            timeline.abandon();
        }
    }

    /// A host-visible buffer holding `initial`, usable as vertex, index and storage buffer.
    pub fn host_buffer(&self, initial: &[u8]) -> Result<Buffer> {
        let usage = vk::BufferUsageFlags::VERTEX_BUFFER
            | vk::BufferUsageFlags::INDEX_BUFFER
            | vk::BufferUsageFlags::STORAGE_BUFFER;
        let mut buffer = Buffer::new(&self.context, initial.len().max(4), usage, MemoryKind::HostVisible)?;
        if let Some(bytes) = buffer.host_bytes_mut() {
            bytes[..initial.len()].copy_from_slice(initial);
        }
        Ok(buffer)
    }

    /// A sampled image of `size` pixels in `format` holding `pixels` (top row first), uploaded
    /// through a staging buffer; returns once the upload has finished.
    pub fn texture(&self, size: [u32; 2], format: PixelFormat, pixels: &[u8]) -> Result<Texture> {
        self.filled(Texture::new(&self.context, size, format)?, pixels)
    }

    /// As [`Self::texture`], with memory CUDA can import ([`Texture::shared`]).
    pub fn shared_texture(&self, size: [u32; 2], format: PixelFormat, pixels: &[u8]) -> Result<Texture> {
        self.filled(Texture::shared(&self.context, size, format)?, pixels)
    }

    fn filled(&self, texture: Texture, pixels: &[u8]) -> Result<Texture> {
        let size = texture.size();
        if pixels.len() != texture.bytes() {
            return Err(Error::InvalidInput(format!(
                "{} bytes for a {}x{} image of {} bytes",
                pixels.len(),
                size[0],
                size[1],
                texture.bytes()
            )));
        }
        let staging = self.host_buffer(pixels)?;
        self.upload_texture(&texture, &staging)?;
        self.wait_idle()?;
        Ok(texture)
    }

    /// Copies `source` (the image's bytes, rows top first) into `texture` with a submission of its
    /// own, ahead of the frames submitted after it.
    pub fn upload_texture(&self, texture: &Texture, source: &Buffer) -> Result<()> {
        let mut commands = self.commands.try_borrow_mut().map_err(|_| busy())?;
        commands.begin()?;
        if let Err(error) = commands.recorder().and_then(|recorder| recorder.upload(texture, source)) {
            self.abandon(&mut commands);
            return Err(error);
        }
        self.submit_recorded(&mut commands, vk::PipelineStageFlags::TRANSFER, &[], &[])
    }

    /// Copies `bytes` into the host-visible `buffer`, once every frame submitted so far (which may
    /// read it) has finished.
    pub fn write_host_buffer(&self, buffer: &mut Buffer, bytes: &[u8]) -> Result<()> {
        self.wait_idle()?;
        let memory = buffer.host_bytes_mut().ok_or_else(|| {
            Error::InvalidInput("only host-visible Vulkan memory can be written by the CPU".to_owned())
        })?;
        if bytes.len() > memory.len() {
            return Err(Error::InvalidInput(format!("{} bytes do not fit a buffer of {}", bytes.len(), memory.len())));
        }
        memory[..bytes.len()].copy_from_slice(bytes);
        Ok(())
    }

    /// Releases `buffer` once the frames that may use it have finished.
    pub fn release_after_frame(&self, buffer: Buffer) {
        if let Err(error) = self.wait_idle() {
            log::warn!("releasing a Vulkan buffer: {error}");
        }
        drop(buffer);
    }

    /// Starts recording frame `frame`, the target cleared to `clear`.
    pub fn begin_frame(&self, clear: [f32; 4], frame: u64) -> Result<()> {
        let mut commands = self.commands.try_borrow_mut().map_err(|_| busy())?;
        commands.begin()?;
        let mut timer = self.timer.try_borrow_mut().map_err(|_| busy())?;
        if let (Some(timer), Some(slot)) = (timer.as_mut(), commands.open_slot()) {
            // The ring has waited for this slot's last submission: its times can be read.
            let taken = timer.take(slot);
            if let Err(error) = &taken {
                self.abandon(&mut commands);
                return Err(Error::Unavailable(error.to_string()));
            }
            if let Ok(Some(time)) = taken {
                self.gpu_times.borrow_mut().push(time);
            }
            timer.begin(&commands.recorder()?, slot, frame);
        }
        self.target.clear(clear);
        Ok(())
    }

    /// Records into the frame begun by [`Self::begin_frame`].
    pub fn record<R>(&self, record: impl FnOnce(&Recorder<'_>, &OffscreenTarget) -> Result<R>) -> Result<R> {
        let commands = self.commands.try_borrow().map_err(|_| busy())?;
        record(&commands.recorder()?, &self.target)
    }

    /// Submits the frame.
    pub fn end_frame(&self) -> Result<()> {
        self.finish_frame(None)
    }

    /// Copies the frame into the swapchain image `acquired`, submits it and presents it.
    /// `Ok(false)`: the swapchain no longer fits the window; recreate it.
    pub fn end_frame_presenting(&self, swapchain: &mut Swapchain, acquired: &Acquired) -> Result<bool> {
        self.finish_frame(Some((swapchain, acquired)))?;
        swapchain.present(acquired)
    }

    fn finish_frame(&self, present: Option<(&Swapchain, &Acquired)>) -> Result<()> {
        let mut commands = self.commands.try_borrow_mut().map_err(|_| busy())?;
        // A frame that drew nothing over the whole target still clears it.
        if let Err(error) = commands.recorder().and_then(|recorder| self.target.flush_clear(&recorder)) {
            self.abandon(&mut commands);
            return Err(error);
        }
        if let Some((swapchain, acquired)) = present {
            let recorder = commands.recorder()?;
            let source = self.target.prepare_copy(&recorder);
            if let Err(error) = swapchain.record_copy(&recorder, source, self.target.size(), acquired) {
                self.abandon(&mut commands);
                return Err(error);
            }
        }
        if let (Some(timer), Some(slot)) = (self.timer.borrow().as_ref(), commands.open_slot()) {
            timer.end(&commands.recorder()?, slot);
        }
        // CUDA's writes are waited for where vertices are first read; the clear before may run.
        let first_read = vk::PipelineStageFlags::VERTEX_INPUT
            | vk::PipelineStageFlags::VERTEX_SHADER
            | vk::PipelineStageFlags::FRAGMENT_SHADER
            | vk::PipelineStageFlags::TRANSFER;
        match present {
            Some((_, acquired)) => self.submit_recorded(
                &mut commands,
                first_read,
                &[Wait::binary(acquired.ready, vk::PipelineStageFlags::TRANSFER)],
                &[Signal::binary(acquired.drawn)],
            ),
            None => self.submit_recorded(&mut commands, first_read, &[], &[]),
        }
    }

    /// GPU times of finished frames not taken before: (frame, µs of its commands), oldest first.
    /// With `all`, waits for every frame first, so none is left behind.
    pub fn take_gpu_times(&self, all: bool) -> Result<Vec<VkTime>> {
        if all {
            self.wait_idle()?;
            let mut timer = self.timer.try_borrow_mut().map_err(|_| busy())?;
            if let Some(timer) = timer.as_mut() {
                for slot in 0..timer.slots() {
                    if let Some(time) = timer.take(slot)? {
                        self.gpu_times.borrow_mut().push(time);
                    }
                }
            }
        }
        let mut times = std::mem::take(&mut *self.gpu_times.borrow_mut());
        times.sort_by_key(|time| time.frame);
        Ok(times)
    }

    /// The last reading of the device clock, where the device offers calibrated timestamps.
    pub fn gpu_clock(&self) -> Option<GpuClockReading> {
        self.timer.try_borrow().ok()?.as_ref()?.clock()
    }

    /// Waits for every frame submitted so far.
    pub fn wait_idle(&self) -> Result<()> {
        let commands = self.commands.try_borrow().map_err(|_| busy())?;
        if !commands.wait_all(Duration::from_secs(10))? {
            return Err(Error::Unavailable("a Vulkan frame did not finish within 10 s: the GPU is stuck".to_owned()));
        }
        Ok(())
    }

    /// The target's pixels after every frame submitted so far: RGBA8, top row first.
    pub fn read_rgba(&self) -> Result<Vec<u8>> {
        let mut commands = self.commands.try_borrow_mut().map_err(|_| busy())?;
        self.target.read_rgba(&mut commands)
    }
}

fn busy() -> Error {
    Error::InvalidInput("the Vulkan frame is being recorded elsewhere (re-entrant use)".to_owned())
}
