//! The Vulkan path: Vulkan allocates the memory it reads (exportable, dedicated) and CUDA imports
//! it once; two timeline semaphores, made by Vulkan and imported by CUDA, order the two on the GPU.
//! Each has one producer, so its values only grow: CUDA signals `written`, Vulkan signals `read`.
//! A frame:
//!
//! ```text
//!   CUDA stream:  wait read ≥ last read of the buffers ─▶ kernel writes ─▶ signal written = w
//!   Vulkan queue:                            wait written ≥ w ─▶ commands read ─▶ signal read = r
//! ```
//!
//! The host only enqueues: no `cuStreamSynchronize`, no fence wait. CUDA's wait is for the last
//! Vulkan submission that read the buffers it is about to write, so with two buffers in turn CUDA
//! writes one while Vulkan still reads the other. (One semaphore for both directions would not do:
//! with nothing ordering CUDA's signal after Vulkan's, the value could be asked to go backwards.)

use std::rc::{Rc, Weak};
use std::time::{Duration, Instant};

use ash::vk as raw;

use super::{Access, BufferMemory, Compute, Link, SharedBuffer, Target, Transfer, TransferKind};
use super::{DeviceSpans, mismatch};
use super::{ImageSharing, ImageTarget, SharedImage};
use crate::cuda::import::{ChannelType, ImportedImage, ImportedMemory, ImportedSemaphore};
use crate::cuda::memory::{copy_from_device, copy_to_device};
use crate::cuda::timing::EventRing;
use crate::cuda::{Context, DeviceSpan, Stream};
use crate::error::{Error, Result};
use crate::graphics::Graphics;
use crate::pixel::PixelFormat;
use crate::stats::{LateGpuTimes, Stage, StageTimes};
use crate::vk::commands::{CommandRing, Recorder};
use crate::vk::device::VulkanContext;
use crate::vk::memory::{Buffer, MemoryKind};
use crate::vk::shared::{ReadMark, SharedTimeline};

/// What a buffer Vulkan allocated and CUDA imported may be used for: vertices, indices, storage,
/// copies either way.
const SHARED_USAGE: raw::BufferUsageFlags = raw::BufferUsageFlags::from_raw(
    raw::BufferUsageFlags::VERTEX_BUFFER.as_raw()
        | raw::BufferUsageFlags::INDEX_BUFFER.as_raw()
        | raw::BufferUsageFlags::STORAGE_BUFFER.as_raw()
        | raw::BufferUsageFlags::TRANSFER_SRC.as_raw()
        | raw::BufferUsageFlags::TRANSFER_DST.as_raw(),
);

/// A Vulkan buffer CUDA writes through its import: it owns both, CUDA's mapping of the imported
/// memory (`cuExternalMemoryGetMappedBuffer`) released before Vulkan's buffer, and the mark of
/// the last Vulkan submission that read it (what CUDA's next write waits for).
pub struct VulkanBuffer {
    // Field order is drop order: CUDA's mapping and import go before Vulkan frees the memory.
    cuda: ImportedMemory,
    vulkan: Buffer,
    /// The last submission that read the buffer.
    mark: ReadMark,
}

impl VulkanBuffer {
    /// The Vulkan buffer, for commands.
    pub fn vulkan(&self) -> &Buffer {
        &self.vulkan
    }

    /// The device range kernels write.
    pub fn span(&self) -> DeviceSpan {
        self.cuda.span()
    }

    /// Set to the submission that last read the buffer.
    pub fn mark(&self) -> &ReadMark {
        &self.mark
    }
}

/// CUDA's side of sharing memory with Vulkan: it owns its imports of the [`SharedTimeline`]'s two
/// semaphores (`cuImportExternalSemaphore`) and the stream its kernels run on, and makes the
/// buffers both APIs use ([`VulkanShare::create_buffer`]: Vulkan allocates exportable memory,
/// CUDA imports it with `cuImportExternalMemory`). A CUDA step waits on the GPU for Vulkan's last
/// read of the buffers it writes and signals "written" when its kernels are done
/// (`cuWaitExternalSemaphoresAsync`, `cuSignalExternalSemaphoresAsync`).
pub struct VulkanShare {
    // CUDA's imports of the semaphores go before Vulkan's semaphores.
    cuda_written: ImportedSemaphore,
    cuda_read: ImportedSemaphore,
    timeline: Rc<SharedTimeline>,
    events: EventRing,
    stream: Rc<Stream>,
    cuda: Rc<Context>,
    vulkan: Rc<VulkanContext>,
}

impl VulkanShare {
    /// Imports `timeline`'s semaphores (made on `vulkan`) into `cuda`, whose `stream` the kernels
    /// run on. `vulkan` must be the CUDA device (same UUID).
    pub fn new(
        vulkan: &Rc<VulkanContext>,
        timeline: &Rc<SharedTimeline>,
        cuda: &Rc<Context>,
        stream: &Rc<Stream>,
    ) -> Result<Self> {
        let uuid = &cuda.device().uuid;
        if !vulkan.description().device_uuid.eq_ignore_ascii_case(uuid) {
            return Err(Error::Unavailable(format!(
                "Vulkan device {} (UUID {}) is not CUDA device {} (UUID {uuid}): memory cannot be shared between them",
                vulkan.description().name,
                vulkan.description().device_uuid,
                cuda.device().name
            )));
        }
        let (written, read) = timeline.export_fds()?;
        let cuda_written = ImportedSemaphore::new_timeline(cuda, written, "written")?;
        let cuda_read = ImportedSemaphore::new_timeline(cuda, read, "read")?;
        let events = EventRing::new(cuda, crate::cuda::timing::TIMED_FRAMES, 3)?;
        // Vulkan's submissions go into the same trace as CUDA's calls, so a frame reads in order.
        let trace_owner: Weak<Context> = Rc::downgrade(cuda);
        timeline.observe(Box::new(move |note| {
            if let Some(context) = trace_owner.upgrade() {
                let detail = || match note.waited {
                    0 => format!("signals read = {}", note.signals),
                    waited => format!("waits written ≥ {waited}, signals read = {}", note.signals),
                };
                context.trace().note("vkQueueSubmit", detail, note.host_us);
            }
        }));
        Ok(Self {
            cuda_written,
            cuda_read,
            timeline: timeline.clone(),
            events,
            stream: stream.clone(),
            cuda: cuda.clone(),
            vulkan: vulkan.clone(),
        })
    }

    /// A buffer of `bytes` Vulkan allocates (for `usage`) and CUDA imports.
    pub fn create_buffer(&self, bytes: usize, usage: raw::BufferUsageFlags) -> Result<VulkanBuffer> {
        let vulkan = Buffer::new(&self.vulkan, bytes, usage, MemoryKind::Exportable)?;
        let cuda = ImportedMemory::new(&self.cuda, vulkan.export_fd()?, vulkan.allocation_size(), bytes)?;
        Ok(VulkanBuffer { cuda, vulkan, mark: ReadMark::default() })
    }

    /// The semaphore pair.
    pub fn timeline(&self) -> &Rc<SharedTimeline> {
        &self.timeline
    }

    /// CUDA's half of frame `frame`: on the stream, waits until Vulkan's submission `released`
    /// (the last that read the buffers about to be written) is done, runs `compute`, and signals
    /// `written`. Every Vulkan submission from now on waits for that signal.
    pub fn cuda_step(&mut self, frame: u64, released: u64, compute: impl FnOnce(&Stream) -> Result<()>) -> Result<()> {
        let stream = &*self.stream;
        let marks = self.events.begin_calibrated()?;
        marks.mark(0, stream)?;
        if released > 0 {
            self.cuda_read.wait_async(stream, released)?;
        }
        marks.mark(1, stream)?;
        compute(stream)?;
        marks.mark(2, stream)?;
        self.events.commit(frame);
        let written = self.timeline.next_written();
        self.cuda_written.signal_async(stream, written)?;
        self.timeline.written_signalled(written);
        Ok(())
    }

    /// Vulkan's half for a ring of its own (the benchmark's): submits commands recorded by
    /// `record` that read `buffers` once CUDA's writes are done, from pipeline `stage` on; returns
    /// the `read` value the submission signals.
    pub fn submit_read(
        &mut self,
        ring: &mut CommandRing,
        stage: raw::PipelineStageFlags,
        buffers: &[&VulkanBuffer],
        record: impl FnOnce(&Recorder<'_>) -> Result<()>,
    ) -> Result<u64> {
        for buffer in buffers {
            self.timeline.read_by_next(&buffer.mark);
        }
        self.timeline.submit(ring, stage, record)
    }

    /// GPU times of an earlier CUDA step (semaphore wait as `Sync`, compute as `Kernel`).
    pub fn poll_gpu_times(&mut self) -> Result<Option<LateGpuTimes>> {
        super::poll_stages(&mut self.events, &[Stage::Sync, Stage::Kernel])
    }

    /// Waits on the host, at most `timeout` for each API, until everything enqueued so far is
    /// done (before reading results on the host or tearing down).
    pub fn synchronize(&self, timeout: Duration) -> Result<()> {
        let read = self.timeline.read_value();
        if !self.timeline.wait_read(read, timeout)? {
            return Err(Error::Unavailable(format!(
                "the Vulkan queue did not reach read = {read} within {timeout:?}: the GPU is stuck (restart the app)"
            )));
        }
        // Every value CUDA waits for has now been signalled, so the stream can finish.
        let started = Instant::now();
        while !self.stream.is_idle()? {
            if started.elapsed() > timeout {
                return Err(Error::Unavailable(format!(
                    "the CUDA stream did not finish within {timeout:?}: the GPU is stuck (restart the app)"
                )));
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        Ok(())
    }
}

impl Drop for VulkanShare {
    fn drop(&mut self) {
        // The stream may still wait on or signal the semaphores: finish both sides before the
        // imports go (bounded, so a stuck GPU cannot hang the app here).
        if let Err(error) = self.synchronize(Duration::from_secs(10)) {
            self.cuda.defer_error(error);
        }
    }
}

/// The Vulkan path for demos drawn by the Vulkan renderer: their buffers are Vulkan's, imported
/// by CUDA, and each frame's submission is ordered after the kernels by the renderer device's
/// [`SharedTimeline`]. The host waits nowhere in a frame.
pub struct VulkanPath {
    /// Made with the first buffer: that is when the renderer's device is known.
    share: Option<VulkanShare>,
    /// What if the renderer's submissions skipped the wait for CUDA.
    skip_wait: bool,
    context: Rc<Context>,
    stream: Rc<Stream>,
}

impl VulkanPath {
    /// The path for kernels on `stream`.
    pub(super) fn new(context: Rc<Context>, stream: Rc<Stream>) -> Self {
        Self { share: None, skip_wait: false, context, stream }
    }

    fn share(&mut self, graphics: Graphics<'_>) -> Result<&mut VulkanShare> {
        let share = match self.share.take() {
            Some(share) => share,
            None => {
                let vulkan = graphics.vulkan()?;
                let share =
                    VulkanShare::new(vulkan.context(), &vulkan.shared_timeline()?, &self.context, &self.stream)?;
                share.timeline().set_skip_wait(self.skip_wait);
                share
            }
        };
        Ok(self.share.insert(share))
    }
}

impl Transfer for VulkanPath {
    fn kind(&self) -> TransferKind {
        TransferKind::Vulkan
    }

    fn calibration(&self) -> Option<crate::anatomy::Calibration> {
        super::cuda_calibration(&self.share.as_ref()?.events)
    }

    fn create_buffer(&mut self, graphics: Graphics<'_>, initial: &[u8]) -> Result<SharedBuffer> {
        let stream = self.stream.clone();
        let VulkanBuffer { cuda, vulkan, mark } =
            self.share(graphics)?.create_buffer(initial.len().max(4), SHARED_USAGE)?;
        copy_to_device(&stream, cuda.span().range(0, initial.len())?, initial)?;
        // Vulkan may draw the buffer before any kernel signals: let the copy land first.
        stream.synchronize()?;
        Ok(SharedBuffer { link: Link::Vulkan { memory: cuda, mark }, memory: BufferMemory::Vulkan(vulkan) })
    }

    fn read_buffer(&mut self, _graphics: Graphics<'_>, buffer: &SharedBuffer) -> Result<Vec<u8>> {
        let Link::Vulkan { memory, .. } = &buffer.link else {
            return Err(mismatch(TransferKind::Vulkan));
        };
        self.synchronize()?;
        let mut data = vec![0u8; memory.span().bytes];
        copy_from_device(&self.stream, memory.span(), &mut data)?;
        Ok(data)
    }

    fn run(
        &mut self,
        graphics: Graphics<'_>,
        frame: u64,
        buffers: &mut [(&mut SharedBuffer, Access)],
        compute: &mut Compute<'_>,
    ) -> Result<StageTimes> {
        let spans = DeviceSpans::of(buffers, TransferKind::Vulkan, |link| match link {
            Link::Vulkan { memory, .. } => Some(memory.span()),
            _ => None,
        })?;
        // The last submission that read any buffer about to be written.
        let released = buffers
            .iter()
            .filter(|(_, access)| access.writes())
            .filter_map(|(buffer, _)| match &buffer.link {
                Link::Vulkan { mark, .. } => Some(mark.value()),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        let started = Instant::now();
        let spans = spans.as_slice();
        self.share(graphics)?
            .cuda_step(frame, released, |stream| compute(Target::Device { buffers: spans, stream }))?;
        let mut times = StageTimes::default();
        // The host only enqueued: the semaphore wait, the kernel and the signal.
        times.set_host_since(Stage::Kernel, started);
        Ok(times)
    }

    fn poll_gpu_times(&mut self) -> Result<Option<LateGpuTimes>> {
        match self.share.as_mut() {
            Some(share) => share.poll_gpu_times(),
            None => Ok(None),
        }
    }

    fn synchronize(&mut self) -> Result<()> {
        match &self.share {
            Some(share) => share.synchronize(Duration::from_secs(10)),
            None => self.stream.synchronize(),
        }
    }

    fn cuda_lost(&mut self) -> bool {
        let Some(share) = &self.share else { return false };
        match share.timeline().release_cuda_waits() {
            Ok(Some(value)) => log::info!("CUDA is lost: Vulkan's wait for its signal {value} released from the host"),
            Ok(None) => {}
            Err(error) => log::warn!("releasing Vulkan's waits for the lost CUDA context: {error}"),
        }
        true
    }

    fn set_what_if(&mut self, what_if: super::WhatIf) {
        self.skip_wait = what_if.skip_semaphore_wait;
        if let Some(share) = &self.share {
            share.timeline().set_skip_wait(self.skip_wait);
        }
    }

    fn image_sharing(&mut self) -> Option<&mut dyn ImageSharing> {
        Some(self)
    }

    fn what_if_report(&self) -> Option<String> {
        let (made, unfinished) = self.share.as_ref()?.timeline().skipped_waits()?;
        Some(format!(
            "{unfinished} of {made} frames were submitted without the wait while CUDA had not finished writing their \
             buffers (each may draw torn or stale data)"
        ))
    }
}

/// Blur's image on the Vulkan path: Vulkan allocates it (exportable), CUDA maps it as an array and
/// writes it through a surface object, the renderer samples it. No copy, and the same semaphores
/// order it as the buffers.
impl ImageSharing for VulkanPath {
    fn create_shared_image(
        &mut self,
        graphics: Graphics<'_>,
        size: [u32; 2],
        format: PixelFormat,
        initial: &[u8],
    ) -> Result<SharedImage> {
        self.share(graphics)?;
        // Uploaded and finished before CUDA can write it.
        let texture = graphics.vulkan()?.shared_texture(size, format, initial)?;
        let (fd, allocation_size) = texture.export()?;
        let channels = match format {
            PixelFormat::Rgba8 => ChannelType::Unorm8,
            PixelFormat::Rgba32f => ChannelType::Float32,
        };
        let image = ImportedImage::new(&self.context, fd, allocation_size, size, channels)?;
        Ok(SharedImage::imported(image, ReadMark::default(), texture))
    }

    fn run_shared_image(
        &mut self,
        graphics: Graphics<'_>,
        frame: u64,
        image: &mut SharedImage,
        compute: &mut dyn FnMut(ImageTarget<'_>) -> Result<()>,
    ) -> Result<StageTimes> {
        let (imported, mark) = image.import().ok_or_else(|| mismatch(TransferKind::Vulkan))?;
        let (surface, size, released) = (imported.surface(), imported.size(), mark.value());
        let started = Instant::now();
        self.share(graphics)?
            .cuda_step(frame, released, |stream| compute(ImageTarget::Surface { surface, size, stream }))?;
        let mut times = StageTimes::default();
        times.set_host_since(Stage::Kernel, started);
        Ok(times)
    }

    fn read_shared_image(&mut self, image: &SharedImage) -> Result<Vec<u8>> {
        let (imported, _) = image.import().ok_or_else(|| mismatch(TransferKind::Vulkan))?;
        self.synchronize()?;
        imported.download(&self.stream)
    }
}
