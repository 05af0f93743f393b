//! The CPU path: no CUDA; the CPU computes into host memory and uploads it with `glBufferSubData`
//! (on Vulkan: copies it into the host-visible buffer Vulkan draws from).

use std::time::Instant;

use super::mismatch;
use super::{Access, BufferMemory, Compute, Link, SharedBuffer, Target, Transfer, TransferKind};
use crate::Result;
use crate::gl;
use crate::graphics::Graphics;
use crate::stats::{LateGpuTimes, Stage, StageTimes};

/// Host memory aligned for any element type a demo views it as (up to 8-byte `f64`).
pub(super) struct HostBytes {
    words: Vec<u64>,
    len: usize,
}

impl HostBytes {
    pub(super) fn new(data: &[u8]) -> Self {
        let mut words = vec![0u64; data.len().div_ceil(8)];
        bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..data.len()].copy_from_slice(data);
        Self { words, len: data.len() }
    }

    pub(super) fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice::<u64, u8>(&self.words)[..self.len]
    }

    pub(super) fn bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut::<u64, u8>(&mut self.words)[..self.len]
    }
}

/// The CPU path.
pub struct CpuPath;

impl Transfer for CpuPath {
    fn kind(&self) -> TransferKind {
        TransferKind::Cpu
    }

    fn create_buffer(&mut self, graphics: Graphics<'_>, initial: &[u8]) -> Result<SharedBuffer> {
        let memory = match graphics {
            Graphics::Gl(gl) => BufferMemory::Gl(gl::Buffer::new(gl, initial)?),
            Graphics::Vulkan(vulkan) => BufferMemory::Vulkan(vulkan.host_buffer(initial)?),
        };
        Ok(SharedBuffer { link: Link::Cpu(HostBytes::new(initial)), memory })
    }

    fn read_buffer(&mut self, graphics: Graphics<'_>, buffer: &SharedBuffer) -> Result<Vec<u8>> {
        match (&buffer.link, &buffer.memory) {
            // On Vulkan, what is drawn: the host-visible memory itself, once no frame uses it.
            (Link::Cpu(data), BufferMemory::Vulkan(memory)) => {
                graphics.vulkan()?.wait_idle()?;
                Ok(memory.host_bytes().map(|bytes| bytes[..data.bytes().len()].to_vec()).unwrap_or_default())
            }
            (Link::Cpu(data), BufferMemory::Gl(_)) => Ok(data.bytes().to_vec()),
            _ => Err(mismatch(TransferKind::Cpu)),
        }
    }

    fn run(
        &mut self,
        graphics: Graphics<'_>,
        _frame: u64,
        buffers: &mut [(&mut SharedBuffer, Access)],
        compute: &mut Compute<'_>,
    ) -> Result<StageTimes> {
        let mut times = StageTimes::default();
        let started = Instant::now();
        {
            let mut slices = Vec::with_capacity(buffers.len());
            for (buffer, _) in buffers.iter_mut() {
                match &mut buffer.link {
                    Link::Cpu(data) => slices.push(data.bytes_mut()),
                    _ => return Err(mismatch(TransferKind::Cpu)),
                }
            }
            compute(Target::Host { buffers: &mut slices })?;
        }
        times.set_host_since(Stage::Kernel, started);

        if let Graphics::Vulkan(vulkan) = graphics {
            // Vulkan draws from the very memory written next: wait for the frames that read it
            // (a stage of its own, so the upload below is the copy alone).
            let started = Instant::now();
            vulkan.wait_idle()?;
            times.set_host_since(Stage::Sync, started);
        }
        let started = Instant::now();
        for (buffer, access) in buffers.iter_mut() {
            if let (Link::Cpu(data), true) = (&buffer.link, access.writes()) {
                match &mut buffer.memory {
                    BufferMemory::Gl(memory) => memory.write(graphics.gl()?, data.bytes())?,
                    // Vulkan draws from host-visible memory: the upload is a copy into it (the
                    // frames that read it have finished: waited above).
                    BufferMemory::Vulkan(memory) => graphics.vulkan()?.write_host_buffer(memory, data.bytes())?,
                }
            }
        }
        times.set_host_since(Stage::Upload, started);
        Ok(times)
    }

    fn poll_gpu_times(&mut self) -> Result<Option<LateGpuTimes>> {
        Ok(None)
    }

    fn synchronize(&mut self) -> Result<()> {
        Ok(())
    }
}
