//! The external-memory path: CUDA allocates exportable memory once and GL builds its buffer on it
//! (`GL_EXT_memory_object_fd`). No map and no unmap; the app orders the two APIs itself, in one of
//! two ways:
//!
//! - **host waits** ([`TransferKind::External`]): the host waits for GL (a fence) before the kernel
//!   and for the stream after it;
//! - **semaphores** ([`TransferKind::ExternalSemaphores`]): two binary semaphores order them on the
//!   GPU, and the host waits for neither. Neither GL nor CUDA can make a semaphore another API can
//!   import, so a Vulkan device on the same GPU makes them, and both import them (GL through
//!   `GL_EXT_semaphore_fd`). Each step: GL signals `released` after everything it was given so far
//!   (the last draw of the buffers included) → CUDA's stream waits for it → kernel → CUDA signals
//!   `written` → GL's later commands wait for it. Every signal is waited for exactly once, as binary
//!   semaphores require.

mod host_waits;
mod protocol;
mod semaphores;

use std::rc::Rc;

use self::host_waits::run_with_host_waits;
use self::semaphores::GpuOrder;
use super::{Access, BufferMemory, Compute, Link, SharedBuffer, Target, Transfer, TransferKind};
use super::{DeviceSpans, mismatch, poll_stages};
use crate::cuda::external::ExportableMemory;
use crate::cuda::memory::{copy_from_device, copy_to_device};
use crate::cuda::timing::EventRing;
use crate::cuda::{Context, Stream};
use crate::error::{Error, Result};
use crate::gl::external::{GlMemoryObjects, GlSemaphores};
use crate::graphics::Graphics;
use crate::stats::{LateGpuTimes, Stage, StageTimes};

/// The external-memory path.
pub struct External {
    // Field order is drop order: the semaphores wait for both APIs to finish with them first.
    order: Option<GpuOrder>,
    context: Rc<Context>,
    stream: Rc<Stream>,
    gl_memory: GlMemoryObjects,
    events: EventRing,
}

impl External {
    /// The path on `stream`, importing into GL through `gl_memory`, ordered by host waits.
    pub(super) fn new(context: Rc<Context>, stream: Rc<Stream>, gl_memory: GlMemoryObjects, events: EventRing) -> Self {
        Self { order: None, context, stream, gl_memory, events }
    }

    /// As [`Self::new`], ordered by semaphores that a Vulkan device on the CUDA device makes and
    /// GL imports through `gl_semaphores`.
    pub(super) fn with_semaphores(
        context: Rc<Context>,
        stream: Rc<Stream>,
        gl_memory: GlMemoryObjects,
        gl_semaphores: GlSemaphores,
        events: EventRing,
    ) -> Result<Self> {
        let order = GpuOrder::new(&context, &stream, gl_semaphores)?;
        Ok(Self { order: Some(order), context, stream, gl_memory, events })
    }
}

impl Transfer for External {
    fn kind(&self) -> TransferKind {
        if self.order.is_some() { TransferKind::ExternalSemaphores } else { TransferKind::External }
    }

    fn calibration(&self) -> Option<crate::anatomy::Calibration> {
        crate::transfer::cuda_calibration(&self.events)
    }

    fn create_buffer(&mut self, graphics: Graphics<'_>, initial: &[u8]) -> Result<SharedBuffer> {
        let gl = graphics.gl()?;
        if let Some(order) = &mut self.order {
            order.import_into_gl(gl)?;
        }
        let memory = ExportableMemory::new(&self.context, initial.len())?;
        // Synchronous: the data is there before GL can draw the buffer.
        copy_to_device(&self.stream, memory.span(), initial)?;
        let fd = memory.export_fd()?;
        let (object, buffer) = self.gl_memory.import_buffer(gl, fd, memory.allocation_size(), initial.len())?;
        Ok(SharedBuffer {
            link: Link::External { memory, gl_memory: self.gl_memory, object },
            memory: BufferMemory::Gl(buffer),
        })
    }

    fn read_buffer(&mut self, _graphics: Graphics<'_>, buffer: &SharedBuffer) -> Result<Vec<u8>> {
        match &buffer.link {
            Link::External { memory, .. } => {
                // On the stream, so after every kernel that wrote it; GL only reads these buffers.
                let mut data = vec![0u8; memory.span().bytes];
                copy_from_device(&self.stream, memory.span(), &mut data)?;
                Ok(data)
            }
            _ => Err(mismatch(self.kind())),
        }
    }

    fn run(
        &mut self,
        graphics: Graphics<'_>,
        frame: u64,
        buffers: &mut [(&mut SharedBuffer, Access)],
        compute: &mut Compute<'_>,
    ) -> Result<StageTimes> {
        self.run_with(graphics, frame, buffers, GlNames::NONE, compute)
    }

    /// With semaphores, GL's `released` signal for the next step is given right after this
    /// step's wait, before this frame's draw: the next step's buffers were last drawn in an earlier
    /// frame, so its kernel need not wait for this frame's draw, and the two overlap. With host
    /// waits there is nothing to do ahead.
    fn run_pipelined(
        &mut self,
        graphics: Graphics<'_>,
        frame: u64,
        buffers: &mut [(&mut SharedBuffer, Access)],
        next: &mut [(&mut SharedBuffer, Access)],
        compute: &mut Compute<'_>,
    ) -> Result<StageTimes> {
        let next = GlNames::of(next)?;
        self.run_with(graphics, frame, buffers, next, compute)
    }

    fn poll_gpu_times(&mut self) -> Result<Option<LateGpuTimes>> {
        match self.order {
            Some(_) => poll_stages(&mut self.events, &[Stage::Sync, Stage::Kernel]),
            None => poll_stages(&mut self.events, &[Stage::Kernel]),
        }
    }

    fn synchronize(&mut self) -> Result<()> {
        self.stream.synchronize()
    }
}

impl External {
    /// A step on `buffers`; `next` names the GL buffers the next step will write (empty: the same
    /// ones, or not known).
    fn run_with(
        &mut self,
        graphics: Graphics<'_>,
        frame: u64,
        buffers: &mut [(&mut SharedBuffer, Access)],
        next: GlNames,
        compute: &mut Compute<'_>,
    ) -> Result<StageTimes> {
        let gl = graphics.gl()?;
        let spans = DeviceSpans::of(buffers, self.kind(), |link| match link {
            Link::External { memory, .. } => Some(memory.span()),
            _ => None,
        })?;
        let mut compute = |stream: &Stream| compute(Target::Device { buffers: spans.as_slice(), stream });
        match &mut self.order {
            Some(order) => {
                let names = GlNames::of(buffers)?;
                order.run(gl, names, next, &mut self.events, frame, &mut compute)
            }
            None => run_with_host_waits(gl, &self.stream, &mut self.events, frame, &mut compute),
        }
    }
}

/// The GL names of a step's buffers (at most [`MAX_MAPPED`] of them).
///
/// [`MAX_MAPPED`]: crate::cuda::interop::MAX_MAPPED
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct GlNames {
    names: [u32; crate::cuda::interop::MAX_MAPPED],
    len: usize,
}

impl GlNames {
    /// No buffers.
    const NONE: Self = Self { names: [0; crate::cuda::interop::MAX_MAPPED], len: 0 };

    fn of(buffers: &[(&mut SharedBuffer, Access)]) -> Result<Self> {
        let mut names = [0u32; crate::cuda::interop::MAX_MAPPED];
        if buffers.len() > names.len() {
            return Err(Error::InvalidInput(format!("at most {} buffers per step", names.len())));
        }
        for ((buffer, _), name) in buffers.iter().zip(names.iter_mut()) {
            *name = buffer.gl()?.name();
        }
        Ok(Self { names, len: buffers.len() })
    }

    fn as_slice(&self) -> &[u32] {
        &self.names[..self.len]
    }
}
