//! The CPU path: no CUDA; the CPU computes into host memory and uploads it with `glBufferSubData`.

use std::time::Instant;

use super::{Access, Compute, Link, SharedBuffer, Target, Transfer, TransferKind};
use super::{micros_since, mismatch};
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
        let gl = graphics.gl();
        Ok(SharedBuffer { link: Link::Cpu(HostBytes::new(initial)), gl: gl::Buffer::new(gl, initial)? })
    }

    fn read_buffer(&mut self, _graphics: Graphics<'_>, buffer: &SharedBuffer) -> Result<Vec<u8>> {
        match &buffer.link {
            Link::Cpu(data) => Ok(data.bytes().to_vec()),
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
        let gl = graphics.gl();
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
        times.set_host(Stage::Kernel, micros_since(started));

        let started = Instant::now();
        for (buffer, access) in buffers.iter() {
            if let (Link::Cpu(data), true) = (&buffer.link, access.writes()) {
                buffer.gl.write(gl, data.bytes())?;
            }
        }
        times.set_host(Stage::Upload, micros_since(started));
        Ok(times)
    }

    fn poll_gpu_times(&mut self) -> Result<Option<LateGpuTimes>> {
        Ok(None)
    }

    fn synchronize(&mut self) -> Result<()> {
        Ok(())
    }
}
