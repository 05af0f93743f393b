//! The external path ordered on the GPU: two binary semaphores that a Vulkan device on the CUDA
//! device makes, CUDA and GL import, and each step signals and waits for as [`Protocol`] says.

use std::rc::Rc;
use std::time::Instant;

use super::GlNames;
use super::protocol::{Protocol, StepCalls};
use crate::cuda::import::ImportedSemaphore;
use crate::cuda::timing::EventRing;
use crate::cuda::{Context, Stream};
use crate::error::{Error, Result};
use crate::gl::external::GlSemaphores;
use crate::stats::{Stage, StageTimes};
use crate::transfer::micros_since;
use crate::vk::device::{DeviceChoice, VulkanContext};
use crate::vk::sync::ExportableBinarySemaphore;

/// Two binary semaphores, made by Vulkan and imported by CUDA and GL, that order the external
/// path's steps on the GPU.
pub(super) struct GpuOrder {
    // Field order is drop order (after `Drop::drop` has waited for both APIs): CUDA's imports, then
    // Vulkan's semaphores, then its device. GL's names are deleted in `Drop::drop`.
    /// GL → CUDA: GL is done with the buffers.
    cuda_released: ImportedSemaphore,
    /// CUDA → GL: the kernel wrote them.
    cuda_written: ImportedSemaphore,
    /// GL's imports of the same two, made with the first buffer (a GL context is needed).
    gl_semaphores: Option<GlSemaphoreNames>,
    /// What is pending between steps.
    protocol: Protocol,
    gl: GlSemaphores,
    stream: Rc<Stream>,
    released: ExportableBinarySemaphore,
    written: ExportableBinarySemaphore,
    _vulkan: Rc<VulkanContext>,
}

#[derive(Clone, Copy)]
pub(super) struct GlSemaphoreNames {
    released: u32,
    written: u32,
}

impl GpuOrder {
    pub(super) fn new(context: &Rc<Context>, stream: &Rc<Stream>, gl: GlSemaphores) -> Result<Self> {
        let device = context.device();
        let choice = DeviceChoice::CudaDevice { uuid: device.uuid.clone(), name: device.name.clone() };
        let vulkan = VulkanContext::new(&choice).map_err(|error| {
            Error::Unavailable(format!(
                "external memory with semaphores needs a Vulkan device on {} to make the semaphores GL and CUDA \
                 share, and {error}; --transfer external orders the same memory with host waits instead",
                device.name
            ))
        })?;
        let released = ExportableBinarySemaphore::new(&vulkan)?;
        let written = ExportableBinarySemaphore::new(&vulkan)?;
        let cuda_released = ImportedSemaphore::new_binary(context, released.export_fd()?, "released")?;
        let cuda_written = ImportedSemaphore::new_binary(context, written.export_fd()?, "written")?;
        Ok(Self {
            cuda_released,
            cuda_written,
            gl_semaphores: None,
            protocol: Protocol::default(),
            gl,
            stream: stream.clone(),
            released,
            written,
            _vulkan: vulkan,
        })
    }

    /// Imports the semaphores into the current GL context, once.
    pub(super) fn import_into_gl(&mut self, gl: &glow::Context) -> Result<GlSemaphoreNames> {
        if let Some(names) = self.gl_semaphores {
            return Ok(names);
        }
        let released = self.gl.import(gl, self.released.export_fd()?)?;
        let written = match self.written.export_fd().and_then(|fd| self.gl.import(gl, fd)) {
            Ok(written) => written,
            Err(error) => {
                self.gl.delete(released);
                return Err(error);
            }
        };
        let names = GlSemaphoreNames { released, written };
        self.gl_semaphores = Some(names);
        Ok(names)
    }

    /// One step: the calls of [`Protocol::step`], made on GL and CUDA. GPU marks: before CUDA's
    /// wait, after it, after the kernel.
    pub(super) fn run(
        &mut self,
        gl: &glow::Context,
        buffers: GlNames,
        next: GlNames,
        events: &mut EventRing,
        frame: u64,
        compute: &mut dyn FnMut(&Stream) -> Result<()>,
    ) -> Result<StageTimes> {
        let names = self.import_into_gl(gl)?;
        let started = Instant::now();
        let timing = events.begin_calibrated()?;
        let mut calls = GpuCalls {
            gl,
            semaphores: self.gl,
            names,
            buffers,
            cuda_released: &self.cuda_released,
            cuda_written: &self.cuda_written,
            stream: &self.stream,
            timing: &timing,
            compute,
            kernel_us: 0.0,
        };
        self.protocol.step(&mut calls, buffers, next)?;
        let kernel_us = calls.kernel_us;
        events.commit(frame);
        let mut times = StageTimes::default();
        // The step interleaves the ordering calls and the launches; the spans show their sums one
        // after the other (the driver calls, recorded with their own starts, show the order).
        let start_us = crate::stats::clock_us(started);
        let sync_us = (micros_since(started) - kernel_us).max(0.0);
        // Host time of the calls that order the step; nothing here waits on the host.
        times.set_host_at(Stage::Sync, start_us, sync_us);
        times.set_host_at(Stage::Kernel, start_us + sync_us, kernel_us);
        Ok(times)
    }
}

/// [`StepCalls`] on GL and CUDA, traced.
struct GpuCalls<'a, 'c> {
    gl: &'a glow::Context,
    semaphores: GlSemaphores,
    names: GlSemaphoreNames,
    /// The step's buffers (GL's barrier list for its wait).
    buffers: GlNames,
    cuda_released: &'a ImportedSemaphore,
    cuda_written: &'a ImportedSemaphore,
    stream: &'a Stream,
    timing: &'a crate::cuda::timing::Marks<'a>,
    compute: &'a mut (dyn FnMut(&Stream) -> Result<()> + 'c),
    /// Host time of `compute`, µs.
    kernel_us: f64,
}

impl StepCalls for GpuCalls<'_, '_> {
    fn gl_wait_written(&mut self) -> Result<()> {
        let started = Instant::now();
        let buffers = self.buffers.as_slice();
        self.semaphores.wait(self.gl, self.names.written, buffers)?;
        let detail = || format!("written, {} buffer(s)", buffers.len());
        self.stream.context().trace().note("glWaitSemaphoreEXT", detail, micros_since(started));
        Ok(())
    }

    fn gl_signal_released(&mut self, buffers: GlNames, ahead: bool) -> Result<()> {
        let started = Instant::now();
        self.semaphores.signal(self.gl, self.names.released, buffers.as_slice())?;
        let count = buffers.as_slice().len();
        let detail = || match ahead {
            true => format!("released, ahead for the next step's {count} buffer(s); glFlush"),
            false => format!("released, {count} buffer(s); glFlush"),
        };
        self.stream.context().trace().note("glSignalSemaphoreEXT", detail, micros_since(started));
        Ok(())
    }

    fn cuda_wait_released(&mut self, timed: bool) -> Result<()> {
        if timed {
            self.timing.mark(0, self.stream)?;
        }
        self.cuda_released.wait_async(self.stream, 0)?;
        if timed {
            self.timing.mark(1, self.stream)?;
        }
        Ok(())
    }

    fn compute(&mut self) -> Result<()> {
        let started = Instant::now();
        (self.compute)(self.stream)?;
        self.timing.mark(2, self.stream)?;
        self.kernel_us = micros_since(started);
        Ok(())
    }

    fn cuda_signal_written(&mut self) -> Result<()> {
        self.cuda_written.signal_async(self.stream, 0)
    }
}

impl Drop for GpuOrder {
    fn drop(&mut self) {
        // Neither API may still be waiting on or signalling the semaphores when they go: CUDA's
        // stream first, then GL (whose last wait CUDA's last signal satisfied).
        if let Err(error) = self.stream.synchronize() {
            log::warn!("the stream could not be finished before its semaphores were released: {error}");
        }
        if let Some(names) = self.gl_semaphores.take() {
            self.gl.finish();
            self.gl.delete(names.released);
            self.gl.delete(names.written);
        }
    }
}
