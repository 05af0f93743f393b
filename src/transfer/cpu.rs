//! The CPU path: no CUDA; the CPU computes into host memory and uploads it with `glBufferSubData`
//! (on Vulkan: copies it into the host-visible buffer Vulkan draws from).

use std::time::Instant;

use super::memory::{HostBytes, wait_for_readers};
use super::mismatch;

use super::{Access, BufferMemory, Compute, Link, SharedBuffer, Target, Transfer, TransferKind};
use crate::error::Result;
use crate::graphics::Graphics;
use crate::stats::{LateGpuTimes, Stage, StageTimes};

/// The CPU path.
pub struct CpuPath;

impl Transfer for CpuPath {
    fn kind(&self) -> TransferKind {
        TransferKind::Cpu
    }

    fn create_buffer(&mut self, graphics: Graphics<'_>, initial: &[u8]) -> Result<SharedBuffer> {
        let memory = BufferMemory::filled_by_host(graphics, initial)?;
        Ok(SharedBuffer { link: Link::Cpu(HostBytes::new(initial)), memory })
    }

    fn read_buffer(&mut self, graphics: Graphics<'_>, buffer: &SharedBuffer) -> Result<Vec<u8>> {
        let Link::Cpu(data) = &buffer.link else { return Err(mismatch(TransferKind::Cpu)) };
        // What is drawn: the host-visible memory itself where the API draws from it, else the
        // bytes it was uploaded from.
        let drawn = buffer.memory.host_visible_bytes(graphics, data.bytes().len())?;
        Ok(drawn.unwrap_or_else(|| data.bytes().to_vec()))
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

        // Where the API draws from the very memory written next, the frames that read it are
        // waited for: a stage of its own, so the upload below is the copy alone.
        let started = Instant::now();
        if wait_for_readers(graphics)? {
            times.set_host_since(Stage::Sync, started);
        }
        let started = Instant::now();
        for (buffer, access) in buffers.iter_mut() {
            if let (Link::Cpu(data), true) = (&buffer.link, access.writes()) {
                buffer.memory.upload(graphics, data.bytes())?;
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
