//! The other sides of a hand-off chain, beside the CUDA stream that leads it: a second CUDA
//! context with its own kernel and stream, GL's imports of a pair of semaphores, and GL's tiny
//! command (a few bytes copied between two buffers).
#![allow(unsafe_code)] // GL calls, each with its SAFETY line

use std::rc::Rc;

use glow::HasContext;

use super::TINY_BYTES;
use crate::cuda::{Context, DeviceBuffer, DeviceLimits, Function, Module, Stream};
use crate::error::{Error, Result};
use crate::gl;
use crate::gl::external::GlSemaphores;
use crate::runtime::CudaRuntime;
use crate::vk::sync::ExportableBinarySemaphore;

/// A second CUDA context on the same device, with what its side of a chain needs. Made current
/// only while its calls are made; its resources go with it current ([`Self::release`]).
pub(super) struct OtherContext {
    pub(super) fill: Function,
    pub(super) limits: DeviceLimits,
    pub(super) scratch: DeviceBuffer,
    pub(super) stream: Stream,
    pub(super) context: Rc<Context>,
}

impl OtherContext {
    pub(super) fn new(home: &Rc<Context>, cuda: &CudaRuntime) -> Result<Self> {
        let context = Context::new_separate(home.driver(), home.device().ordinal)?;
        context.make_current()?;
        let made = (|| -> Result<Self> {
            let compiled = cuda.compiler.compile(&super::super::fill::KERNEL, &[])?;
            let module = Module::load(&context, &compiled)?;
            Ok(Self {
                fill: module.function("fill")?,
                limits: DeviceLimits::from(context.device()),
                scratch: DeviceBuffer::new(&context, TINY_BYTES)?,
                stream: Stream::new(&context)?,
                context: context.clone(),
            })
        })();
        home.make_current()?;
        made
    }

    /// Finishes its stream and frees its resources with the context current, then makes `home`
    /// current again.
    pub(super) fn release(self, home: &Rc<Context>) {
        if self.context.make_current().is_ok() {
            if let Err(error) = self.stream.synchronize() {
                log::warn!("the second CUDA context's stream did not finish: {error}");
            }
            drop(self);
        }
        if let Err(error) = home.make_current() {
            log::warn!("the benchmark's CUDA context could not be made current again: {error}");
        }
    }
}

/// GL's imports of a pair of semaphores.
#[derive(Clone, Copy)]
pub(super) struct GlNames {
    pub(super) there: u32,
    pub(super) back: u32,
}

impl GlNames {
    pub(super) fn import(
        gl: &glow::Context,
        semaphores: GlSemaphores,
        there: &ExportableBinarySemaphore,
        back: &ExportableBinarySemaphore,
    ) -> Result<Self> {
        let there_name = semaphores.import(gl, there.export_fd()?)?;
        match back.export_fd().and_then(|fd| semaphores.import(gl, fd)) {
            Ok(back_name) => Ok(Self { there: there_name, back: back_name }),
            Err(error) => {
                semaphores.delete(there_name);
                Err(error)
            }
        }
    }

    pub(super) fn delete(self, semaphores: GlSemaphores) {
        semaphores.delete(self.there);
        semaphores.delete(self.back);
    }
}

/// Two small GL buffers: GL's tiny command copies 4 bytes from one to the other.
pub(super) struct GlPair {
    source: gl::Buffer,
    destination: gl::Buffer,
}

impl GlPair {
    pub(super) fn new(gl: &glow::Context) -> Result<Self> {
        Ok(Self { source: gl::Buffer::new(gl, &[7u8; 16])?, destination: gl::Buffer::uninitialized(gl, 16)? })
    }

    pub(super) fn copy(&self, gl: &glow::Context) -> Result<()> {
        copy_gl_bytes(gl, &self.source, 0, &self.destination, 4)
    }

    pub(super) fn delete(mut self, gl: &glow::Context) {
        self.source.destroy(gl);
        self.destination.destroy(gl);
    }
}

/// GL's tiny command: copies `bytes` from `source` at `offset` to the start of `destination`
/// (`glCopyBufferSubData`), on the GPU, in GL's order.
pub(super) fn copy_gl_bytes(
    gl: &glow::Context,
    source: &gl::Buffer,
    offset: usize,
    destination: &gl::Buffer,
    bytes: usize,
) -> Result<()> {
    if offset + bytes > source.len() || bytes > destination.len() {
        return Err(Error::InvalidInput(format!("a copy of {bytes} bytes at {offset} does not fit the buffers")));
    }
    // SAFETY: two live buffers of the current context; the range lies inside both (checked).
    unsafe {
        gl.bind_buffer(glow::COPY_READ_BUFFER, source.raw());
        gl.bind_buffer(glow::COPY_WRITE_BUFFER, destination.raw());
        gl.copy_buffer_sub_data(glow::COPY_READ_BUFFER, glow::COPY_WRITE_BUFFER, offset as i32, 0, bytes as i32);
        gl.bind_buffer(glow::COPY_READ_BUFFER, None);
        gl.bind_buffer(glow::COPY_WRITE_BUFFER, None);
    }
    Ok(())
}
