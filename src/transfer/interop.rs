//! The GL-interop path: the GL buffer (or texture) is registered with CUDA once; each frame it
//! is mapped with one call, the kernel writes it in place, and it is unmapped before GL draws it.

use std::rc::Rc;
use std::time::Instant;

use super::{
    Access, BufferMemory, Compute, ImageTarget, Link, Mapping, SharedBuffer, SharedImage, Target, TextureMemory,
    Transfer, TransferKind, WhatIf,
};
use super::{micros_since, mismatch};
use crate::cuda::interop::{self, GlEntryPoints, GraphicsResource, MapAccess};
use crate::cuda::memory::copy_to_device;
use crate::cuda::surface::SurfaceObject;
use crate::cuda::timing::EventRing;
use crate::cuda::{Context, DeviceSpan, Stream};
use crate::error::{Error, Result};
use crate::gl;
use crate::graphics::Graphics;
use crate::guard::Guard;
use crate::stats::{Lane, LateGpuTimes, Stage, StageTimes};

/// The interop path.
pub struct Interop {
    context: Rc<Context>,
    stream: Rc<Stream>,
    entry_points: GlEntryPoints,
    /// Five marks a frame: before the map, after it, after the kernels, after the unmap, after
    /// the maps made ahead for the next frame.
    events: EventRing,
    register_every_frame: bool,
}

impl Interop {
    /// The path on `stream`, registering through `entry_points`.
    pub(super) fn new(
        context: Rc<Context>,
        stream: Rc<Stream>,
        entry_points: GlEntryPoints,
        events: EventRing,
    ) -> Self {
        Self { context, stream, entry_points, events, register_every_frame: false }
    }
}

impl Transfer for Interop {
    fn kind(&self) -> TransferKind {
        TransferKind::Interop
    }

    fn calibration(&self) -> Option<crate::anatomy::Calibration> {
        super::cuda_calibration(&self.events)
    }

    fn create_buffer(&mut self, graphics: Graphics<'_>, initial: &[u8]) -> Result<SharedBuffer> {
        let gl = graphics.gl()?;
        // GL allocates, CUDA writes the first contents through the mapping: every byte a kernel
        // later reads was then written on the CUDA side, which is what compute-sanitizer's
        // initcheck can follow (it does not see bytes that glBufferData uploaded).
        let buffer =
            Guard::new(gl::Buffer::uninitialized(gl, initial.len())?, |mut buffer: gl::Buffer| buffer.destroy(gl));
        let mut resource = GraphicsResource::register_buffer(&self.context, &self.entry_points, buffer.name())?;
        let mapped = interop::map(&self.stream, &mut [(&mut resource, MapAccess::WriteDiscard)])?;
        let written = mapped.buffer(0).and_then(|span| copy_to_device(&self.stream, span, initial));
        mapped.unmap().and(written)?;
        // The registration is declared before the GL buffer it registers, so it goes first.
        Ok(SharedBuffer { link: Link::Interop(resource), memory: BufferMemory::Gl(buffer.keep()) })
    }

    fn read_buffer(&mut self, graphics: Graphics<'_>, buffer: &SharedBuffer) -> Result<Vec<u8>> {
        buffer.gl()?.read(graphics.gl()?)
    }

    fn run(
        &mut self,
        _graphics: Graphics<'_>,
        frame: u64,
        buffers: &mut [(&mut SharedBuffer, Access)],
        compute: &mut Compute<'_>,
    ) -> Result<StageTimes> {
        self.run_with(frame, buffers, &mut [], compute)
    }

    fn run_pipelined(
        &mut self,
        _graphics: Graphics<'_>,
        frame: u64,
        buffers: &mut [(&mut SharedBuffer, Access)],
        next: &mut [(&mut SharedBuffer, Access)],
        compute: &mut Compute<'_>,
    ) -> Result<StageTimes> {
        self.run_with(frame, buffers, next, compute)
    }

    fn set_what_if(&mut self, what_if: WhatIf) {
        self.register_every_frame = what_if.register_every_frame;
    }

    fn mapping(&mut self) -> Option<&mut dyn Mapping> {
        Some(self)
    }

    fn what_if_report(&self) -> Option<String> {
        self.register_every_frame
            .then(|| "each frame unregisters and registers its buffers; see Map grow in the timeline".to_owned())
    }

    fn poll_gpu_times(&mut self) -> Result<Option<LateGpuTimes>> {
        // Intervals: map, kernel, unmap, maps made ahead (counted with the map).
        let mut intervals = [0.0; 4];
        let Some(frame) = self.events.poll(&mut intervals)? else { return Ok(None) };
        let mut times = StageTimes::default();
        // On the host clock (while calibrated): the map's span is its part before the kernel.
        let marks = self.events.marks_us();
        for (index, stage) in [Stage::Map, Stage::Kernel, Stage::Unmap].into_iter().enumerate() {
            let start = marks.get(index).copied().unwrap_or(f64::NAN);
            times.set_gpu_at(stage, Lane::Cuda, start, intervals[index]);
        }
        // The map's time counts the maps made ahead for the next frame too.
        times.set_gpu(Stage::Map, intervals[0] + intervals[3]);
        Ok(Some(LateGpuTimes { frame, times }))
    }

    fn synchronize(&mut self) -> Result<()> {
        self.stream.synchronize()
    }

    fn release_prepared(&mut self, buffers: &mut [&mut SharedBuffer]) -> Result<()> {
        for buffer in buffers.iter_mut() {
            if let Link::Interop(resource) = &mut buffer.link {
                resource.release_held()?;
            }
        }
        Ok(())
    }
}

impl Interop {
    /// One frame: maps `buffers` (those mapped ahead by the frame before are used as they are),
    /// runs `compute`, unmaps `buffers`, maps `next` ahead for the next frame. Host times and GPU
    /// events for each boundary.
    fn run_with(
        &mut self,
        frame: u64,
        buffers: &mut [(&mut SharedBuffer, Access)],
        next: &mut [(&mut SharedBuffer, Access)],
        compute: &mut Compute<'_>,
    ) -> Result<StageTimes> {
        let count = buffers.len();
        if count > interop::MAX_MAPPED {
            return Err(Error::InvalidInput(format!("at most {} buffers per step", interop::MAX_MAPPED)));
        }
        let registering = Instant::now();
        if self.register_every_frame {
            // What not to do: registration costs about a millisecond per buffer (see the trace).
            for (buffer, _) in buffers.iter_mut() {
                let fresh = GraphicsResource::register_buffer(&self.context, &self.entry_points, buffer.gl()?.name())?;
                if let Link::Interop(resource) = &mut buffer.link {
                    *resource = fresh;
                }
            }
        }
        let register_us = micros_since(registering);
        // Buffers mapped ahead (prepare_next) are used as they are; the others are mapped now.
        let mut held = Vec::new();
        let mut fresh = Vec::with_capacity(count);
        let mut fresh_slots = [0usize; interop::MAX_MAPPED];
        for (slot, (buffer, access)) in buffers.iter_mut().enumerate() {
            let Link::Interop(resource) = &mut buffer.link else { return Err(mismatch(TransferKind::Interop)) };
            if resource.is_held() {
                held.push((slot, resource));
            } else {
                fresh_slots[fresh.len()] = slot;
                fresh.push((resource, access.map_access()));
            }
        }
        let mut times = StageTimes::default();
        let stream = self.stream.clone();
        let timing = self.events.begin_calibrated()?;
        timing.mark(0, &stream)?;
        let started = Instant::now();
        let mapped = if fresh.is_empty() { None } else { Some(interop::map(&stream, &mut fresh)?) };
        let mut spans = [DeviceSpan { ptr: 0, bytes: 0 }; interop::MAX_MAPPED];
        if let Some(mapped) = &mapped {
            for (index, &slot) in fresh_slots[..fresh.len()].iter().enumerate() {
                spans[slot] = mapped.buffer(index)?;
            }
        }
        for (slot, resource) in &held {
            spans[*slot] = resource.held_buffer()?;
        }
        timing.mark(1, &stream)?;
        let mut map_us = micros_since(started);
        times.set_host_span(Stage::Map, crate::stats::clock_us(started), map_us);

        let started = Instant::now();
        compute(Target::Device { buffers: &spans[..count], stream: &stream })?;
        timing.mark(2, &stream)?;
        times.set_host_since(Stage::Kernel, started);

        let started = Instant::now();
        if let Some(mapped) = mapped {
            mapped.unmap()?;
        }
        for (_, resource) in held {
            resource.release_held()?;
        }
        timing.mark(3, &stream)?;
        times.set_host_since(Stage::Unmap, started);

        // After the unmap, before GL is given this frame: the next frame's map then waits only
        // for GL's earlier frames, and its wait for GL overlaps GL's wait for this unmap (halves
        // bench transfer's hand-off on an H200). The call itself first waits, on the host, for
        // the unmap, hence for the kernels. Mapping before the unmap was measured too: the wait
        // then moved into the next kernel and gained nothing (docs/interop-map.md).
        let started = Instant::now();
        if !self.register_every_frame {
            for (buffer, access) in next.iter_mut() {
                let Link::Interop(resource) = &mut buffer.link else { return Err(mismatch(TransferKind::Interop)) };
                resource.map_ahead(&stream, access.map_access())?;
            }
        }
        timing.mark(4, &stream)?;
        map_us += micros_since(started);
        if self.register_every_frame {
            map_us += register_us;
        }
        times.set_host(Stage::Map, map_us);
        self.events.commit(frame);
        Ok(times)
    }
}

impl Mapping for Interop {
    fn use_while_mapped(&mut self, buffer: &mut SharedBuffer) -> Result<String> {
        let Link::Interop(resource) = &mut buffer.link else { return Err(mismatch(TransferKind::Interop)) };
        let stream = &*self.stream;
        let mapped = interop::map(stream, &mut [(&mut *resource, MapAccess::ReadWrite)])?;
        // Safe Rust cannot reach the buffer while `mapped` borrows it; the driver's own check is
        // shown by mapping the same resource a second time through its raw handle.
        let answer = interop::map_again_raw(stream, &mapped, 0);
        mapped.unmap()?;
        Ok(match answer {
            Ok(()) => "the driver accepted a second map (unexpected)".to_owned(),
            Err(error) => error.to_string(),
        })
    }

    fn register_image(&mut self, graphics: Graphics<'_>, texture: TextureMemory) -> Result<SharedImage> {
        let gl = graphics.gl()?;
        let TextureMemory::Gl(texture) = texture else {
            texture.destroy(graphics);
            return Err(Error::Unavailable("GL interop registers OpenGL textures only".to_owned()));
        };
        let texture = Guard::new(texture, |mut texture: gl::Texture| texture.destroy(gl));
        let resource =
            GraphicsResource::register_image(&self.context, &self.entry_points, texture.name(), glow::TEXTURE_2D)?;
        Ok(SharedImage::registered(resource, texture.keep()))
    }

    fn run_registered(
        &mut self,
        frame: u64,
        image: &mut SharedImage,
        compute: &mut dyn FnMut(ImageTarget<'_>) -> Result<()>,
    ) -> Result<StageTimes> {
        let size = image.texture().gl()?.size();
        let context = self.context.clone();
        let Some(resource) = image.resource_mut() else {
            return Err(Error::InvalidInput("this image goes through a pixel buffer, not a registration".to_owned()));
        };
        let mut resources = [(resource, MapAccess::WriteDiscard)];
        self.mapped(
            frame,
            &mut resources,
            // A surface object per frame: the array behind a mapped texture may change between maps.
            |mapped| SurfaceObject::new(&context, mapped.array(0)?),
            |surface, stream| compute(ImageTarget::Surface { surface: surface.raw(), size, stream }),
        )
    }
}

impl Interop {
    /// Maps `resources` with one call, lets `prepare` take what the kernels need from the mapping
    /// (pointers, surface objects: timed as part of the map), runs `compute`, unmaps. Records host
    /// times and GPU events for map, kernel and unmap.
    fn mapped<R>(
        &mut self,
        frame: u64,
        resources: &mut [(&mut GraphicsResource, MapAccess)],
        prepare: impl FnOnce(&interop::Mapped<'_>) -> Result<R>,
        compute: impl FnOnce(R, &Stream) -> Result<()>,
    ) -> Result<StageTimes> {
        let mut times = StageTimes::default();
        let stream = &*self.stream;
        let timing = self.events.begin_calibrated()?;

        let started = Instant::now();
        timing.mark(0, stream)?;
        let mapped = interop::map(stream, resources)?;
        let prepared = prepare(&mapped)?;
        timing.mark(1, stream)?;
        times.set_host_since(Stage::Map, started);

        let started = Instant::now();
        compute(prepared, stream)?;
        timing.mark(2, stream)?;
        times.set_host_since(Stage::Kernel, started);

        let started = Instant::now();
        mapped.unmap()?;
        timing.mark(3, stream)?;
        // No maps ahead on this route: the fifth mark closes an empty interval, so every set
        // this path polls has all its marks recorded.
        timing.mark(4, stream)?;
        times.set_host_since(Stage::Unmap, started);
        self.events.commit(frame);
        Ok(times)
    }
}
