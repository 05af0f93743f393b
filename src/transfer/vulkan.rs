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

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use ash::vk as raw;

use crate::cuda::import::{ImportedMemory, ImportedSemaphore};
use crate::cuda::timing::EventRing;
use crate::cuda::{Context, DeviceSpan, Stream};
use crate::stats::{LateGpuTimes, Stage};
use crate::vk::commands::{CommandRing, Recorder};
use crate::vk::device::VulkanContext;
use crate::vk::memory::{Buffer, MemoryKind};
use crate::vk::sync::{Signal, TimelineSemaphore, Wait};
use crate::{Error, Result};

/// A Vulkan buffer CUDA writes through its import.
pub struct VulkanBuffer {
    // Field order is drop order: CUDA's mapping and import go before Vulkan frees the memory.
    cuda: ImportedMemory,
    vulkan: Buffer,
    /// The `read` value after which Vulkan no longer reads the buffer (0: never read).
    last_read: Cell<u64>,
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
}

/// CUDA and Vulkan sharing buffers, ordered by two timeline semaphores.
pub struct VulkanShare {
    // CUDA's imports of the semaphores go before Vulkan's semaphores.
    cuda_written: ImportedSemaphore,
    cuda_read: ImportedSemaphore,
    written: TimelineSemaphore,
    read: TimelineSemaphore,
    /// The last value CUDA's steps signal on `written`.
    written_value: u64,
    /// The last value Vulkan's submissions signal on `read`.
    read_value: u64,
    events: EventRing,
    stream: Rc<Stream>,
    cuda: Rc<Context>,
    vulkan: Rc<VulkanContext>,
}

impl VulkanShare {
    /// Makes the timeline semaphore on `vulkan` and imports it into `cuda`, whose `stream` the
    /// kernels run on. `vulkan` must be the CUDA device (same UUID).
    pub fn new(vulkan: &Rc<VulkanContext>, cuda: &Rc<Context>, stream: &Rc<Stream>) -> Result<Self> {
        let uuid = &cuda.device().uuid;
        if !vulkan.description().device_uuid.eq_ignore_ascii_case(uuid) {
            return Err(Error::Unavailable(format!(
                "Vulkan device {} (UUID {}) is not CUDA device {} (UUID {uuid}): memory cannot be shared between them",
                vulkan.description().name,
                vulkan.description().device_uuid,
                cuda.device().name
            )));
        }
        let written = TimelineSemaphore::new(vulkan, true)?;
        let read = TimelineSemaphore::new(vulkan, true)?;
        let cuda_written = ImportedSemaphore::new_timeline(cuda, written.export_fd()?, "written")?;
        let cuda_read = ImportedSemaphore::new_timeline(cuda, read.export_fd()?, "read")?;
        let events = EventRing::new(cuda, crate::cuda::timing::FRAMES_IN_FLIGHT, 3)?;
        Ok(Self {
            cuda_written,
            cuda_read,
            written,
            read,
            written_value: 0,
            read_value: 0,
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
        Ok(VulkanBuffer { cuda, vulkan, last_read: Cell::new(0) })
    }

    /// The semaphore Vulkan's submissions signal when they have read (host waits use it).
    pub fn read_semaphore(&self) -> &TimelineSemaphore {
        &self.read
    }

    /// CUDA's half of frame `frame`: on the stream, waits until Vulkan has finished reading
    /// `buffers`, runs `compute` on their device ranges, and signals. Returns the value Vulkan
    /// must wait for before reading what `compute` wrote.
    pub fn cuda_step(
        &mut self,
        frame: u64,
        buffers: &[&VulkanBuffer],
        compute: impl FnOnce(&[DeviceSpan], &Stream) -> Result<()>,
    ) -> Result<u64> {
        const MAX: usize = crate::cuda::interop::MAX_MAPPED;
        if buffers.len() > MAX {
            return Err(Error::InvalidInput(format!("at most {MAX} buffers per step")));
        }
        let mut spans = [DeviceSpan { ptr: 0, bytes: 0 }; MAX];
        for (buffer, span) in buffers.iter().zip(spans.iter_mut()) {
            *span = buffer.span();
        }
        let stream = &*self.stream;
        let released = buffers.iter().map(|b| b.last_read.get()).max().unwrap_or(0);
        let marks = self.events.begin();
        marks.mark(0, stream)?;
        if released > 0 {
            self.cuda_read.wait_async(stream, released)?;
        }
        marks.mark(1, stream)?;
        compute(&spans[..buffers.len()], stream)?;
        marks.mark(2, stream)?;
        self.events.commit(frame);
        self.cuda_written.signal_async(stream, self.written_value + 1)?;
        self.written_value += 1;
        Ok(self.written_value)
    }

    /// Vulkan's half: submits commands (recorded by `record`) that read `buffers` once CUDA's step
    /// has signalled `ready`, from pipeline `stage` on. The submission signals a new value, which
    /// CUDA's next step on these buffers waits for; returns it.
    pub fn submit_read(
        &mut self,
        ring: &mut CommandRing,
        ready: u64,
        stage: raw::PipelineStageFlags,
        buffers: &[&VulkanBuffer],
        record: impl FnOnce(&Recorder<'_>) -> Result<()>,
    ) -> Result<u64> {
        if ready > self.written_value {
            return Err(Error::InvalidInput(format!(
                "a Vulkan submission may wait for written ≥ {ready} only after CUDA's step signalled it (the last is {})",
                self.written_value
            )));
        }
        let read = self.read_value + 1;
        let wait = Wait { semaphore: &self.written, value: ready, stage };
        let signal = Signal { semaphore: &self.read, value: read };
        let started = Instant::now();
        let submitted = ring.submit(&[wait], &[signal], record);
        self.read_value = read;
        let trace = self.cuda.trace();
        if trace.is_recording() {
            // Vulkan's calls go into the same trace as CUDA's, so a frame reads in order.
            let host_us = started.elapsed().as_secs_f64() * 1e6;
            trace.note("vkQueueSubmit", format!("waits written ≥ {ready}, signals read = {read}"), host_us);
        }
        if let Err(error) = submitted {
            // Nothing will signal `read` now, and CUDA may be told to wait for it: signal it from
            // the host, after the submissions before it (values only grow), rather than hang.
            if self.read.wait(read - 1, Duration::from_secs(10)).unwrap_or(false) {
                let _ = self.read.signal(read);
            }
            return Err(error);
        }
        for buffer in buffers {
            buffer.last_read.set(read);
        }
        Ok(read)
    }

    /// GPU times of an earlier CUDA step (semaphore wait as `Sync`, compute as `Kernel`).
    pub fn poll_gpu_times(&mut self) -> Result<Option<LateGpuTimes>> {
        super::poll_stages(&mut self.events, &[Stage::Sync, Stage::Kernel])
    }

    /// Waits on the host, at most `timeout` for each API, until everything enqueued so far is
    /// done (before reading results on the host or tearing down).
    pub fn synchronize(&self, timeout: Duration) -> Result<()> {
        if !self.read.wait(self.read_value, timeout)? {
            return Err(Error::Unavailable(format!(
                "the Vulkan queue did not reach read = {} within {timeout:?}: the GPU is stuck (restart the app)",
                self.read_value
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
