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

use std::rc::Rc;
use std::time::Instant;

use super::{Access, BufferMemory, Compute, Link, SharedBuffer, Target, Transfer, TransferKind};
use super::{DeviceSpans, micros_since, mismatch, poll_stages};
use crate::cuda::external::ExportableMemory;
use crate::cuda::import::ImportedSemaphore;
use crate::cuda::memory::{copy_from_device, copy_to_device};
use crate::cuda::timing::EventRing;
use crate::cuda::{Context, Stream};
use crate::gl::external::{GlMemoryObjects, GlSemaphores};
use crate::graphics::Graphics;
use crate::stats::{LateGpuTimes, Stage, StageTimes};
use crate::vk::device::{DeviceChoice, VulkanContext};
use crate::vk::sync::ExportableBinarySemaphore;
use crate::{Error, Result, gl};

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

/// A step ordered from the host: nothing maps or unmaps, so the host waits for GL to be done with
/// the buffers (last frame's draw) before the kernel writes them, and for the kernel before GL
/// draws them.
fn run_with_host_waits(
    gl: &glow::Context,
    stream: &Stream,
    events: &mut EventRing,
    frame: u64,
    compute: &mut dyn FnMut(&Stream) -> Result<()>,
) -> Result<StageTimes> {
    let mut times = StageTimes::default();
    let started = Instant::now();
    gl::wait_for_gl(gl)?;
    let mut sync_us = micros_since(started);

    let timing = events.begin();
    let started = Instant::now();
    timing.mark(0, stream)?;
    compute(stream)?;
    timing.mark(1, stream)?;
    events.commit(frame);
    times.set_host(Stage::Kernel, micros_since(started));

    let started = Instant::now();
    stream.synchronize()?;
    sync_us += micros_since(started);
    times.set_host(Stage::Sync, sync_us);
    Ok(times)
}

/// Two binary semaphores, made by Vulkan and imported by CUDA and GL, that order the external
/// path's steps on the GPU.
struct GpuOrder {
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
struct GlSemaphoreNames {
    released: u32,
    written: u32,
}

impl GpuOrder {
    fn new(context: &Rc<Context>, stream: &Rc<Stream>, gl: GlSemaphores) -> Result<Self> {
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
    fn import_into_gl(&mut self, gl: &glow::Context) -> Result<GlSemaphoreNames> {
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
    fn run(
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
        let timing = events.begin();
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
        times.set_host(Stage::Kernel, kernel_us);
        // Host time of the calls that order the step; nothing here waits on the host.
        times.set_host(Stage::Sync, (micros_since(started) - kernel_us).max(0.0));
        Ok(times)
    }
}

/// The calls that order one step of the external path, in the order [`Protocol::step`] makes
/// them: on GL and CUDA ([`GpuCalls`]), or, in the tests, on a model of binary semaphores.
trait StepCalls {
    /// GL's later commands wait for CUDA's signal of `written`.
    fn gl_wait_written(&mut self) -> Result<()>;
    /// GL signals `released` after every command given so far (then flushes); `buffers` are the
    /// ones it was given for, the next step's when `ahead`.
    fn gl_signal_released(&mut self, buffers: GlNames, ahead: bool) -> Result<()>;
    /// CUDA's stream waits for GL's signal of `released`; `timed` for the step's own wait (an
    /// earlier signal consumed first is not).
    fn cuda_wait_released(&mut self, timed: bool) -> Result<()>;
    /// The kernels.
    fn compute(&mut self) -> Result<()>;
    /// CUDA's stream signals `written`.
    fn cuda_signal_written(&mut self) -> Result<()>;
}

/// What is pending between steps of the external path's semaphores. Binary semaphores: every
/// signal must be waited for exactly once, and no wait may come before its signal. A signal a
/// step leaves (given ahead for the next step, or by a step that failed half-way) is waited for,
/// never signalled again.
#[derive(Debug, Default)]
struct Protocol {
    /// GL signalled `released` and CUDA has not waited for it.
    released_pending: bool,
    /// CUDA signalled `written` and GL has not waited for it.
    written_pending: bool,
    /// The buffers `released` was signalled ahead for: a step that writes others waits for a new
    /// signal, since the one ahead may have come before their last draw.
    released_for: Option<GlNames>,
}

impl Protocol {
    /// One step writing `buffers`; `next` (empty: not pipelined) are the next step's buffers, for
    /// which GL's `released` is signalled right after this step's wait, before this frame's draw.
    fn step(&mut self, calls: &mut impl StepCalls, buffers: GlNames, next: GlNames) -> Result<()> {
        if self.written_pending {
            calls.gl_wait_written()?;
            self.written_pending = false;
        }
        if self.released_pending && self.released_for != Some(buffers) {
            // Signalled ahead for other buffers: consumed, and signalled again below.
            calls.cuda_wait_released(false)?;
            self.released_pending = false;
        }
        if !self.released_pending {
            calls.gl_signal_released(buffers, false)?;
            self.released_pending = true;
            self.released_for = None;
        }
        calls.cuda_wait_released(true)?;
        self.released_pending = false;
        calls.compute()?;
        calls.cuda_signal_written()?;
        self.written_pending = true;
        calls.gl_wait_written()?;
        self.written_pending = false;
        if !next.as_slice().is_empty() {
            calls.gl_signal_released(next, true)?;
            self.released_pending = true;
            self.released_for = Some(next);
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    impl GlNames {
        fn from_slice(slice: &[u32]) -> Self {
            let mut names = Self::NONE;
            names.names[..slice.len()].copy_from_slice(slice);
            names.len = slice.len();
            names
        }
    }

    /// The two binary semaphores and the two queues, modelled: every GL and CUDA operation is
    /// numbered in order of issue, and a signal covers its queue's operations issued before it.
    /// What the protocol must never do is recorded as a violation.
    #[derive(Default)]
    struct Model {
        ops: u64,
        /// GL's pending signal of `released`: GL operations before this number are done.
        released: Option<u64>,
        /// CUDA's pending signal of `written`: CUDA operations before this number are done.
        written: Option<u64>,
        /// CUDA's stream runs after the GL operations before this.
        cuda_after_gl: u64,
        /// GL's later commands run after the CUDA operations before this.
        gl_after_cuda: u64,
        last_draw: HashMap<u32, u64>,
        last_write: HashMap<u32, u64>,
        /// The buffers of the step being made.
        writing: Vec<u32>,
        /// Calls made, and the one to fail (1-based), if any.
        calls: u32,
        fail_at: Option<u32>,
        violations: Vec<String>,
    }

    impl Model {
        fn call(&mut self) -> Result<()> {
            self.calls += 1;
            if self.fail_at == Some(self.calls) {
                return Err(Error::Unavailable("a call failed (as the test asked)".to_owned()));
            }
            Ok(())
        }

        fn op(&mut self) -> u64 {
            self.ops += 1;
            self.ops
        }

        /// GL draws `buffer`; `checked`: the step that wrote it succeeded, so the draw must come
        /// after its kernel.
        fn draw(&mut self, buffer: u32, checked: bool) {
            let write = self.last_write.get(&buffer).copied().unwrap_or(0);
            if checked && write >= self.gl_after_cuda {
                self.violations.push(format!("GL draws buffer {buffer} before the kernel that wrote it is done"));
            }
            let op = self.op();
            self.last_draw.insert(buffer, op);
        }
    }

    impl StepCalls for Model {
        fn gl_wait_written(&mut self) -> Result<()> {
            self.call()?;
            match self.written.take() {
                Some(covered) => self.gl_after_cuda = self.gl_after_cuda.max(covered),
                None => self.violations.push("GL waits for `written` with no signal pending".to_owned()),
            }
            Ok(())
        }

        fn gl_signal_released(&mut self, _buffers: GlNames, _ahead: bool) -> Result<()> {
            self.call()?;
            if self.released.is_some() {
                self.violations.push("GL signals `released` while a signal is pending".to_owned());
            }
            let op = self.op();
            self.released = Some(op);
            Ok(())
        }

        fn cuda_wait_released(&mut self, _timed: bool) -> Result<()> {
            self.call()?;
            match self.released.take() {
                Some(covered) => self.cuda_after_gl = self.cuda_after_gl.max(covered),
                None => self.violations.push("CUDA waits for `released` with no signal pending".to_owned()),
            }
            Ok(())
        }

        fn compute(&mut self) -> Result<()> {
            self.call()?;
            for buffer in self.writing.clone() {
                let draw = self.last_draw.get(&buffer).copied().unwrap_or(0);
                if draw >= self.cuda_after_gl {
                    self.violations.push(format!("the kernel writes buffer {buffer} while GL may still draw it"));
                }
                let op = self.op();
                self.last_write.insert(buffer, op);
            }
            Ok(())
        }

        fn cuda_signal_written(&mut self) -> Result<()> {
            self.call()?;
            if self.written.is_some() {
                self.violations.push("CUDA signals `written` while a signal is pending".to_owned());
            }
            let op = self.op();
            self.written = Some(op);
            Ok(())
        }
    }

    /// Frames on a ring of `depth` buffers, each step followed by the frame's draw; now and then
    /// the buffers are made again (new names), the demo pauses (draws with no step), or, with
    /// `failures`, one call of a step fails. Returns the model's violations and the steps that
    /// succeeded.
    fn frames(depth: u32, count: u64, seed: u64, failures: bool) -> (Vec<String>, u64) {
        let mut rng = crate::rng::Rng::new(seed);
        let mut model = Model::default();
        let mut protocol = Protocol::default();
        let mut base = 1u32;
        let mut drawn = None;
        let mut succeeded = 0;
        for frame in 0..count {
            if rng.uniform() < 0.05 {
                base += 100; // re-allocated: the ring's buffers have new names
            }
            let slot = (frame % u64::from(depth)) as u32;
            let this = base + slot;
            let next = (depth > 1).then(|| base + (slot + 1) % depth);
            model.writing = vec![this];
            model.calls = 0;
            model.fail_at = (failures && rng.uniform() < 0.2).then(|| 1 + (rng.next_u64() % 8) as u32);
            let next = match next {
                Some(next) => GlNames::from_slice(&[next]),
                None => GlNames::NONE,
            };
            let ok = protocol.step(&mut model, GlNames::from_slice(&[this]), next).is_ok();
            model.fail_at = None;
            if ok {
                succeeded += 1;
                model.draw(this, true);
                drawn = Some(this);
            } else if let Some(buffer) = drawn {
                model.draw(buffer, false);
            }
            while rng.uniform() < 0.1 {
                if let Some(buffer) = drawn {
                    model.draw(buffer, ok); // paused: the same picture again
                }
            }
        }
        (model.violations, succeeded)
    }

    #[test]
    fn every_binary_signal_is_waited_for_once_and_orders_kernel_and_draw_at_every_depth() {
        for depth in 1..=4 {
            for seed in 0..20 {
                let (violations, succeeded) = frames(depth, 300, seed, false);
                assert!(violations.is_empty(), "depth {depth}, seed {seed}: {violations:?}");
                assert_eq!(succeeded, 300);
            }
        }
    }

    #[test]
    fn a_step_that_fails_half_way_leaves_nothing_the_next_steps_trip_on() {
        for depth in 1..=3 {
            for seed in 0..50 {
                let (violations, succeeded) = frames(depth, 300, seed, true);
                assert!(violations.is_empty(), "depth {depth}, seed {seed}: {violations:?}");
                assert!(succeeded > 150, "most steps still succeed: {succeeded}");
            }
        }
    }

    #[test]
    fn the_model_catches_a_kernel_that_overwrites_what_gl_still_draws() {
        // The checks above must be able to fail. `run_pipelined` forbids GL to use the next
        // step's buffers before that step: drawing one after the signal given ahead for it means
        // the next kernel may overwrite it mid-draw, and the model says so.
        let mut model = Model::default();
        let mut protocol = Protocol::default();
        let (a, b) = (GlNames::from_slice(&[1]), GlNames::from_slice(&[2]));
        model.writing = vec![1];
        protocol.step(&mut model, a, b).unwrap();
        model.draw(1, true);
        assert!(model.violations.is_empty(), "{:?}", model.violations);
        model.draw(2, false); // against the contract
        model.writing = vec![2];
        protocol.step(&mut model, b, GlNames::NONE).unwrap();
        assert!(
            model.violations.iter().any(|v| v.contains("the kernel writes buffer 2 while GL may still draw it")),
            "{:?}",
            model.violations
        );
    }
}
