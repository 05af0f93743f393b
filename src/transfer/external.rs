//! The external-memory path: CUDA allocates exportable memory once and GL builds its buffer on it
//! (`GL_EXT_memory_object_fd`). No map and no unmap; the app orders the two APIs itself.

use std::rc::Rc;
use std::time::Instant;

use super::{Access, BufferMemory, Compute, Link, SharedBuffer, Target, Transfer, TransferKind};
use super::{DeviceSpans, micros_since, mismatch, poll_stages};
use crate::Result;
use crate::cuda::external::ExportableMemory;
use crate::cuda::memory::{copy_from_device, copy_to_device};
use crate::cuda::timing::EventRing;
use crate::cuda::{Context, Stream};
use crate::gl;
use crate::gl::external::GlMemoryObjects;
use crate::graphics::Graphics;
use crate::stats::{LateGpuTimes, Stage, StageTimes};

/// The external-memory path.
pub struct External {
    context: Rc<Context>,
    stream: Rc<Stream>,
    gl_memory: GlMemoryObjects,
    events: EventRing,
}

impl External {
    /// The path on `stream`, importing into GL through `gl_memory`.
    pub(super) fn new(context: Rc<Context>, stream: Rc<Stream>, gl_memory: GlMemoryObjects, events: EventRing) -> Self {
        Self { context, stream, gl_memory, events }
    }
}

impl Transfer for External {
    fn kind(&self) -> TransferKind {
        TransferKind::External
    }

    fn create_buffer(&mut self, graphics: Graphics<'_>, initial: &[u8]) -> Result<SharedBuffer> {
        let gl = graphics.gl()?;
        let memory = ExportableMemory::new(&self.context, initial.len())?;
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
                let mut data = vec![0u8; memory.span().bytes];
                copy_from_device(&self.stream, memory.span(), &mut data)?;
                Ok(data)
            }
            _ => Err(mismatch(TransferKind::External)),
        }
    }

    fn run(
        &mut self,
        graphics: Graphics<'_>,
        frame: u64,
        buffers: &mut [(&mut SharedBuffer, Access)],
        compute: &mut Compute<'_>,
    ) -> Result<StageTimes> {
        let gl = graphics.gl()?;
        let mut times = StageTimes::default();
        let stream = &*self.stream;
        let spans = DeviceSpans::of(buffers, TransferKind::External, |link| match link {
            Link::External { memory, .. } => Some(memory.span()),
            _ => None,
        })?;
        // Nothing maps or unmaps here, so nothing orders GL and CUDA but the app: GL must be done
        // with the buffers (last frame's draw) before the kernel writes them...
        let started = Instant::now();
        gl::wait_for_gl(gl)?;
        let mut sync_us = micros_since(started);

        let timing = self.events.begin();
        let started = Instant::now();
        timing.mark(0, stream)?;
        compute(Target::Device { buffers: spans.as_slice(), stream })?;
        timing.mark(1, stream)?;
        self.events.commit(frame);
        times.set_host(Stage::Kernel, micros_since(started));

        // ... and the kernel must be done before GL draws them.
        let started = Instant::now();
        stream.synchronize()?;
        sync_us += micros_since(started);
        times.set_host(Stage::Sync, sync_us);
        Ok(times)
    }

    fn poll_gpu_times(&mut self) -> Result<Option<LateGpuTimes>> {
        poll_stages(&mut self.events, &[Stage::Kernel])
    }

    fn synchronize(&mut self) -> Result<()> {
        self.stream.synchronize()
    }
}
