//! The Vulkan path: Vulkan allocates the memory it reads (exportable, dedicated) and CUDA imports
//! it once; a timeline semaphore, made by Vulkan and imported by CUDA, orders the two on the GPU.
//! A frame, with `v` the semaphore's value:
//!
//! ```text
//!   CUDA stream:  wait v ≥ last read ─▶ kernel writes ─▶ signal ready
//!   Vulkan queue:                        (waits ready) ─▶ commands read ─▶ signal read
//! ```
//!
//! The host only enqueues: no `cuStreamSynchronize`, no fence wait. The next frame's CUDA wait is
//! for the value of the last Vulkan submission that read the buffers it writes, so with two
//! buffers in turn CUDA writes one while Vulkan still reads the other.

use std::cell::Cell;
use std::rc::Rc;

use ash::vk as raw;

use crate::cuda::import::{ImportedMemory, ImportedSemaphore};
use crate::cuda::timing::EventRing;
use crate::cuda::{Context, DeviceSpan, Stream};
use crate::stats::{LateGpuTimes, Stage};
use crate::vk::device::VulkanContext;
use crate::vk::memory::{Buffer, MemoryKind};
use crate::vk::sync::{CommandRing, Recorder, Signal, TimelineSemaphore, Wait};
use crate::{Error, Result};

/// A Vulkan buffer CUDA writes through its import.
pub struct VulkanBuffer {
    // Field order is drop order: CUDA's mapping and import go before Vulkan frees the memory.
    cuda: ImportedMemory,
    vulkan: Buffer,
    /// The semaphore value after which Vulkan no longer reads the buffer (0: never read).
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

/// CUDA and Vulkan sharing buffers, ordered by one timeline semaphore.
pub struct VulkanShare {
    // CUDA's import of the semaphore goes before Vulkan's semaphore.
    cuda_semaphore: ImportedSemaphore,
    semaphore: TimelineSemaphore,
    /// The last value handed out (signalled, or to be signalled, by CUDA or Vulkan).
    value: u64,
    events: EventRing,
    skip_wait: bool,
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
        let semaphore = TimelineSemaphore::new(vulkan, true)?;
        let cuda_semaphore = ImportedSemaphore::new_timeline(cuda, semaphore.export_fd()?)?;
        let events = EventRing::new(cuda, crate::cuda::timing::FRAMES_IN_FLIGHT, 3)?;
        Ok(Self {
            cuda_semaphore,
            semaphore,
            value: 0,
            events,
            skip_wait: false,
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

    /// The semaphore, for Vulkan submissions and host waits.
    pub fn semaphore(&self) -> &TimelineSemaphore {
        &self.semaphore
    }

    /// What if CUDA did not wait for Vulkan's last read before writing (torn frames, on purpose).
    pub fn set_skip_wait(&mut self, skip: bool) {
        self.skip_wait = skip;
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
        if released > 0 && !self.skip_wait {
            self.cuda_semaphore.wait_async(stream, released)?;
        }
        marks.mark(1, stream)?;
        compute(&spans[..buffers.len()], stream)?;
        marks.mark(2, stream)?;
        self.events.commit(frame);
        self.value += 1;
        self.cuda_semaphore.signal_async(stream, self.value)?;
        Ok(self.value)
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
        let read = self.value + 1;
        let wait = Wait { semaphore: &self.semaphore, value: ready, stage };
        let signal = Signal { semaphore: &self.semaphore, value: read };
        let started = std::time::Instant::now();
        let submitted = ring.submit(&[wait], &[signal], record);
        self.value = read;
        let trace = self.cuda.trace();
        if trace.is_recording() {
            // Vulkan's calls go into the same trace as CUDA's, so a frame reads in order.
            let host_us = started.elapsed().as_secs_f64() * 1e6;
            trace.note("vkQueueSubmit", format!("waits timeline ≥ {ready}, signals timeline = {read}"), host_us);
        }
        if let Err(error) = submitted {
            // Nothing will signal `read` now, and CUDA may be told to wait for it: signal it from
            // the host (once `ready` is reached, so the order stays monotonic) rather than hang.
            if self.semaphore.wait(ready, std::time::Duration::from_secs(10)).unwrap_or(false) {
                let _ = self.semaphore.signal(read);
            }
            return Err(error);
        }
        for buffer in buffers {
            buffer.last_read.set(read);
        }
        Ok(read)
    }

    /// The last value handed out: once the semaphore reaches it, all work so far is done.
    pub fn last_value(&self) -> u64 {
        self.value
    }

    /// GPU times of an earlier CUDA step (semaphore wait as `Sync`, compute as `Kernel`).
    pub fn poll_gpu_times(&mut self) -> Result<Option<LateGpuTimes>> {
        super::poll_stages(&mut self.events, &[Stage::Sync, Stage::Kernel])
    }

    /// Waits on the host until everything handed out so far is done (before reading results on
    /// the host or tearing down), at most `timeout`.
    pub fn synchronize(&self, timeout: std::time::Duration) -> Result<()> {
        self.stream.synchronize()?;
        if !self.semaphore.wait(self.value, timeout)? {
            return Err(Error::Unavailable(format!(
                "the Vulkan queue did not reach semaphore value {} within {timeout:?}",
                self.value
            )));
        }
        Ok(())
    }
}

impl Drop for VulkanShare {
    fn drop(&mut self) {
        // The stream may still wait on or signal the semaphore: finish it before the import goes.
        if let Err(error) = self.stream.synchronize() {
            self.cuda.defer_error(error);
        }
    }
}
