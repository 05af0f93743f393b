//! The three ways a frame's results reach the GL buffers that are drawn, behind one trait:
//!
//! - [`Interop`]: the GL buffer is registered with CUDA once; each frame it is mapped, the kernel
//!   writes it directly, and it is unmapped before GL draws it. No copy at all.
//! - [`HostCopy`]: the kernel writes ordinary device memory, which is copied to pinned host memory
//!   (`cuMemcpyDtoHAsync`) and from there into the GL buffer (`glBufferSubData`). The baseline
//!   interop is measured against.
//! - [`CpuPath`]: no CUDA; the CPU computes into host memory and uploads it with `glBufferSubData`.
//!
//! A demo creates its [`SharedBuffer`]s through the path in use and runs each compute step with
//! [`Transfer::run`], which hands the compute a [`Target`] (device pointers or host slices).

use std::rc::Rc;
use std::time::Instant;

use serde::Serialize;

use crate::cuda::external::ExportableMemory;
use crate::cuda::interop::{self, GlEntryPoints, GraphicsResource, MapAccess};
use crate::cuda::memory::{copy_from_device, copy_to_device};
use crate::cuda::surface::SurfaceObject;
use crate::cuda::timing::EventRing;
use crate::cuda::{Context, DeviceBuffer, DeviceSpan, PinnedBuffer, Stream};
use crate::gl;
use crate::gl::external::GlMemoryObjects;
use crate::runtime::CudaRuntime;
use crate::stats::{LateGpuTimes, Stage, StageTimes};
use crate::{Error, Result};

/// Which path a frame's data takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransferKind {
    /// CUDA writes the GL buffer in place (register once, map / unmap each frame).
    Interop,
    /// CUDA writes device memory; it is copied through pinned host memory into GL.
    HostCopy,
    /// As `HostCopy`, through ordinary (pageable) host memory: what a naive copy costs.
    HostCopyPageable,
    /// CUDA writes memory it exported and GL imported (`GL_EXT_memory_object_fd`): no map, no unmap.
    External,
    /// The CPU computes and uploads; no CUDA.
    Cpu,
}

impl TransferKind {
    /// A short label for the panel.
    pub fn label(self) -> &'static str {
        match self {
            Self::Interop => "GL interop",
            Self::HostCopy => "host copy (pinned)",
            Self::HostCopyPageable => "host copy (pageable)",
            Self::External => "external memory",
            Self::Cpu => "CPU",
        }
    }

    /// One sentence for learners.
    pub fn explanation(self) -> &'static str {
        match self {
            Self::Interop => {
                "The GL buffer is registered with CUDA once; each frame CUDA maps it, the kernel writes it in \
                 place, and unmapping hands it back to GL. The data never leaves the GPU."
            }
            Self::HostCopy => {
                "The kernel writes CUDA memory, which is copied to pinned host memory and then uploaded into \
                 the GL buffer: two trips over PCIe per frame."
            }
            Self::HostCopyPageable => {
                "As host copy, but through ordinary pageable memory: the driver stages each copy through its \
                 own pinned buffer, so it is slower still."
            }
            Self::External => {
                "CUDA allocates exportable memory (cuMemCreate), hands GL a file descriptor, and GL builds the \
                 buffer on that memory: both see the same bytes with no map or unmap. Ordering is the app's \
                 job: wait for GL before the kernel, for the kernel before GL draws."
            }
            Self::Cpu => "No CUDA: the CPU computes the data and uploads it into the GL buffer with glBufferSubData.",
        }
    }

    /// Whether the path computes with CUDA.
    pub fn uses_cuda(self) -> bool {
        !matches!(self, Self::Cpu)
    }
}

impl std::fmt::Display for TransferKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// Switches for learners: each breaks or slows one rule of the transfer paths on purpose, so its
/// effect can be seen. Paths a switch does not concern ignore it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WhatIf {
    /// Interop: unregister and register the buffers every frame instead of once.
    pub register_every_frame: bool,
    /// Host copy: upload the staging memory without waiting for the copy into it to finish.
    pub skip_copy_sync: bool,
}

/// What a compute step does with a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads only.
    Read,
    /// Overwrites all of it.
    Write,
    /// Reads and writes.
    ReadWrite,
}

impl Access {
    fn writes(self) -> bool {
        !matches!(self, Access::Read)
    }

    fn map_access(self) -> MapAccess {
        match self {
            Access::Read => MapAccess::ReadOnly,
            Access::Write => MapAccess::WriteDiscard,
            Access::ReadWrite => MapAccess::ReadWrite,
        }
    }
}

/// A GL buffer that compute writes, plus what its transfer path keeps for it.
pub struct SharedBuffer {
    // Field order is drop order: the CUDA side (registration, mirrors) goes before the GL buffer.
    link: Link,
    gl: gl::Buffer,
}

enum Link {
    Interop(GraphicsResource),
    HostCopy { device: DeviceBuffer, staging: Staging },
    External { memory: ExportableMemory, gl_memory: GlMemoryObjects, object: u32 },
    Cpu(HostBytes),
}

/// Host memory a host-copy path copies through.
enum Staging {
    Pinned(PinnedBuffer),
    Pageable(Vec<u8>),
}

impl Staging {
    fn bytes(&self) -> &[u8] {
        match self {
            Staging::Pinned(pinned) => pinned.as_slice(),
            Staging::Pageable(bytes) => bytes,
        }
    }
}

/// Host memory aligned for any element type a demo views it as (up to 8-byte `f64`).
struct HostBytes {
    words: Vec<u64>,
    len: usize,
}

impl HostBytes {
    fn new(data: &[u8]) -> Self {
        let mut words = vec![0u64; data.len().div_ceil(8)];
        bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..data.len()].copy_from_slice(data);
        Self { words, len: data.len() }
    }

    fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice::<u64, u8>(&self.words)[..self.len]
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut::<u64, u8>(&mut self.words)[..self.len]
    }
}

impl SharedBuffer {
    /// The GL buffer, for drawing. Borrowing it immutably means no [`Transfer::run`] (which borrows
    /// the buffer mutably, and maps it on the interop path) can be in progress:
    ///
    /// ```compile_fail,E0502
    /// # use interop_lab::transfer::{Access, SharedBuffer, Transfer};
    /// fn draw_while_mapped(transfer: &mut dyn Transfer, gl: &glow::Context, buffer: &mut SharedBuffer) {
    ///     let mut buffers = [(&mut *buffer, Access::Write)];
    ///     let _ = transfer.run(gl, 0, &mut buffers, &mut |_target| {
    ///         let _ = buffer.gl(); // error[E0502]: `*buffer` is also borrowed as mutable
    ///         Ok(())
    ///     });
    /// }
    /// ```
    ///
    /// while drawing after the run compiles:
    ///
    /// ```no_run
    /// # use interop_lab::transfer::{Access, SharedBuffer, Transfer};
    /// fn draw_after_the_run(transfer: &mut dyn Transfer, gl: &glow::Context, buffer: &mut SharedBuffer) {
    ///     let mut buffers = [(&mut *buffer, Access::Write)];
    ///     let _ = transfer.run(gl, 0, &mut buffers, &mut |_target| Ok(()));
    ///     let _ = buffer.gl();
    /// }
    /// ```
    pub fn gl(&self) -> &gl::Buffer {
        &self.gl
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.gl.len()
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.gl.is_empty()
    }

    /// Releases the CUDA side, then deletes the GL buffer. The GL context must be current.
    pub fn destroy(self, gl: &glow::Context) {
        let SharedBuffer { link, gl: mut buffer } = self;
        match link {
            // GL's buffer and memory object go first; the CUDA allocation stays alive for GL until
            // its import is released, so the order is safe either way, but this one reads right.
            Link::External { memory, gl_memory, object } => {
                buffer.destroy(gl);
                gl_memory.delete(object);
                drop(memory);
            }
            other => {
                drop(other);
                buffer.destroy(gl);
            }
        }
    }
}

/// What a compute step writes into: device memory on CUDA paths, host memory on the CPU path.
pub enum Target<'a> {
    /// Device pointers of the buffers passed to [`Transfer::run`], in that order, and the stream
    /// to launch on.
    Device {
        /// The buffers.
        buffers: &'a [DeviceSpan],
        /// The stream.
        stream: &'a Stream,
    },
    /// Host memory of the buffers, in order, 8-byte aligned (view it with `bytemuck`).
    Host {
        /// The buffers.
        buffers: &'a mut [&'a mut [u8]],
    },
}

/// The compute step of one frame: writes a [`Target`].
pub type Compute<'c> = dyn FnMut(Target<'_>) -> Result<()> + 'c;

/// One way of getting compute results into GL buffers.
pub trait Transfer {
    /// Which path this is.
    fn kind(&self) -> TransferKind;

    /// Creates a GL buffer holding `initial`, set up for this path (registered with CUDA on the
    /// interop path, mirrored in device memory on the host-copy path).
    fn create_buffer(&mut self, gl: &glow::Context, initial: &[u8]) -> Result<SharedBuffer>;

    /// Reads the buffer's current contents (to carry a simulation over to another path).
    fn read_buffer(&mut self, gl: &glow::Context, buffer: &SharedBuffer) -> Result<Vec<u8>>;

    /// Runs `compute` with access to `buffers` and makes what it wrote visible to GL. Returns the
    /// host time of each stage; GPU times arrive later through [`Transfer::poll_gpu_times`].
    fn run(
        &mut self,
        gl: &glow::Context,
        frame: u64,
        buffers: &mut [(&mut SharedBuffer, Access)],
        compute: &mut Compute<'_>,
    ) -> Result<StageTimes>;

    /// GPU stage times of an earlier frame, once the GPU has finished it (never blocks).
    fn poll_gpu_times(&mut self) -> Result<Option<LateGpuTimes>>;

    /// Waits for all GPU work of this path (before reading results or tearing down).
    fn synchronize(&mut self) -> Result<()>;

    /// Applies the learners' switches (paths they do not concern ignore them).
    fn set_what_if(&mut self, _what_if: WhatIf) {}

    /// What the switches in effect did so far, in a sentence (`None` when none concerns this path).
    fn what_if_report(&self) -> Option<String> {
        None
    }

    /// Maps `buffer` and, while it is mapped, asks the driver to map it again — what using a buffer
    /// CUDA holds amounts to — and returns the driver's answer (interop only).
    fn use_while_mapped(&mut self, _buffer: &mut SharedBuffer) -> Result<String> {
        Err(Error::Unavailable(format!(
            "the {} path never maps a buffer: there is nothing to misuse",
            self.kind().label()
        )))
    }

    /// Registers `texture` for kernels to write through a surface object (interop only).
    fn create_image(&mut self, gl: &glow::Context, texture: gl::Texture) -> Result<SharedImage> {
        let mut texture = texture;
        texture.destroy(gl);
        Err(Error::Unavailable(format!(
            "writing a texture directly needs GL interop; the {} path goes through a pixel buffer",
            self.kind().label()
        )))
    }

    /// Maps `image`, runs `compute` with a surface object over it, unmaps (interop only).
    fn run_image(
        &mut self,
        _gl: &glow::Context,
        _frame: u64,
        _image: &mut SharedImage,
        _compute: &mut dyn FnMut(ImageTarget<'_>) -> Result<()>,
    ) -> Result<StageTimes> {
        Err(Error::Unavailable(format!("the {} path cannot write textures directly", self.kind().label())))
    }
}

/// A GL texture registered with CUDA (`cuGraphicsGLRegisterImage`), written by kernels through a
/// surface object: no pixel buffer, no copy.
pub struct SharedImage {
    // Field order is drop order: unregister before the texture is deleted.
    resource: GraphicsResource,
    texture: gl::Texture,
}

impl SharedImage {
    /// The texture, for drawing (borrowing it means no kernel writes it right now).
    pub fn texture(&self) -> &gl::Texture {
        &self.texture
    }

    /// Unregisters, then deletes the texture. The GL context must be current.
    pub fn destroy(self, gl: &glow::Context) {
        let SharedImage { resource, mut texture } = self;
        drop(resource);
        texture.destroy(gl);
    }
}

/// What an image compute step writes: a surface object over the mapped texture.
pub struct ImageTarget<'a> {
    /// `cudaSurfaceObject_t` for the kernel.
    pub surface: u64,
    /// Texture size in pixels.
    pub size: [u32; 2],
    /// The stream to launch on.
    pub stream: &'a Stream,
}

/// Creates the transfer of `kind`. CUDA paths need the context, the demo's stream and, for interop,
/// the GL entry points.
pub fn create(
    kind: TransferKind,
    cuda: Option<&CudaRuntime>,
    stream: Option<&Rc<Stream>>,
) -> Result<Box<dyn Transfer>> {
    let needs_cuda = || Error::Unavailable(format!("the {} path needs CUDA, which is not running", kind.label()));
    if kind == TransferKind::Cpu {
        return Ok(Box::new(CpuPath));
    }
    let (cuda, stream) = cuda.zip(stream).ok_or_else(needs_cuda)?;
    let context = &cuda.context;
    let events = EventRing::new(context, crate::cuda::timing::FRAMES_IN_FLIGHT, 4)?;
    let (context, stream) = (context.clone(), stream.clone());
    Ok(match kind {
        TransferKind::HostCopy => {
            Box::new(HostCopy { context, stream, events, pinned: true, skip_sync: false, raced: RaceCount::default() })
        }
        TransferKind::HostCopyPageable => {
            Box::new(HostCopy { context, stream, events, pinned: false, skip_sync: false, raced: RaceCount::default() })
        }
        TransferKind::Interop => {
            let entry_points = cuda.interop.ok_or_else(|| {
                Error::Unavailable("GL interop is not available: the GL context is not on this CUDA device".to_owned())
            })?;
            Box::new(Interop { context, stream, entry_points, events, register_every_frame: false })
        }
        TransferKind::External => {
            let gl_memory = cuda.external.ok_or_else(|| {
                Error::Unavailable(
                    "external memory needs GL_EXT_memory_object_fd on the CUDA device's GL context and a device that \
                     exports file descriptors"
                        .to_owned(),
                )
            })?;
            Box::new(External { context, stream, gl_memory, events })
        }
        TransferKind::Cpu => Box::new(CpuPath),
    })
}

/// The interop path.
pub struct Interop {
    context: Rc<Context>,
    stream: Rc<Stream>,
    entry_points: GlEntryPoints,
    events: EventRing,
    register_every_frame: bool,
}

impl Transfer for Interop {
    fn kind(&self) -> TransferKind {
        TransferKind::Interop
    }

    fn create_buffer(&mut self, gl: &glow::Context, initial: &[u8]) -> Result<SharedBuffer> {
        // GL allocates, CUDA writes the first contents through the mapping: every byte a kernel
        // later reads was then written on the CUDA side, which is what compute-sanitizer's
        // initcheck can follow (it does not see bytes that glBufferData uploaded).
        let mut buffer = gl::Buffer::uninitialized(gl, initial.len())?;
        let filled = GraphicsResource::register_buffer(&self.context, &self.entry_points, buffer.name()).and_then(
            |mut resource| {
                let mapped = interop::map(&self.stream, &mut [(&mut resource, MapAccess::WriteDiscard)])?;
                let written = mapped.buffer(0).and_then(|span| copy_to_device(&self.stream, span, initial));
                let unmapped = mapped.unmap();
                written.and(unmapped).map(|()| resource)
            },
        );
        match filled {
            Ok(resource) => Ok(SharedBuffer { link: Link::Interop(resource), gl: buffer }),
            Err(error) => {
                buffer.destroy(gl);
                Err(error)
            }
        }
    }

    fn read_buffer(&mut self, gl: &glow::Context, buffer: &SharedBuffer) -> Result<Vec<u8>> {
        buffer.gl.read(gl)
    }

    fn run(
        &mut self,
        _gl: &glow::Context,
        frame: u64,
        buffers: &mut [(&mut SharedBuffer, Access)],
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
                let fresh = GraphicsResource::register_buffer(&self.context, &self.entry_points, buffer.gl.name())?;
                if let Link::Interop(resource) = &mut buffer.link {
                    *resource = fresh;
                }
            }
        }
        let register_us = micros_since(registering);
        let mut resources = Vec::with_capacity(count);
        for (buffer, access) in buffers.iter_mut() {
            match &mut buffer.link {
                Link::Interop(resource) => resources.push((resource, access.map_access())),
                _ => return Err(mismatch(TransferKind::Interop)),
            }
        }
        self.mapped(
            frame,
            &mut resources,
            |mapped| {
                let mut spans = [DeviceSpan { ptr: 0, bytes: 0 }; interop::MAX_MAPPED];
                for (index, span) in spans.iter_mut().enumerate().take(count) {
                    *span = mapped.buffer(index)?;
                }
                Ok(spans)
            },
            |spans, stream| compute(Target::Device { buffers: &spans[..count], stream }),
        )
        .map(|mut times| {
            if self.register_every_frame {
                times.set_host(Stage::Map, times.host(Stage::Map).unwrap_or(0.0) + register_us);
            }
            times
        })
    }

    fn set_what_if(&mut self, what_if: WhatIf) {
        self.register_every_frame = what_if.register_every_frame;
    }

    fn what_if_report(&self) -> Option<String> {
        self.register_every_frame
            .then(|| "each frame unregisters and registers its buffers; see Map grow in the timeline".to_owned())
    }

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

    fn create_image(&mut self, gl: &glow::Context, texture: gl::Texture) -> Result<SharedImage> {
        let mut texture = texture;
        match GraphicsResource::register_image(&self.context, &self.entry_points, texture.name(), glow::TEXTURE_2D) {
            Ok(resource) => Ok(SharedImage { resource, texture }),
            Err(error) => {
                texture.destroy(gl);
                Err(error)
            }
        }
    }

    fn run_image(
        &mut self,
        _gl: &glow::Context,
        frame: u64,
        image: &mut SharedImage,
        compute: &mut dyn FnMut(ImageTarget<'_>) -> Result<()>,
    ) -> Result<StageTimes> {
        let size = image.texture.size();
        let context = self.context.clone();
        let mut resources = [(&mut image.resource, MapAccess::WriteDiscard)];
        self.mapped(
            frame,
            &mut resources,
            // A surface object per frame: the array behind a mapped texture may change between maps.
            |mapped| SurfaceObject::new(&context, mapped.array(0)?),
            |surface, stream| compute(ImageTarget { surface: surface.raw(), size, stream }),
        )
    }

    fn poll_gpu_times(&mut self) -> Result<Option<LateGpuTimes>> {
        poll_stages(&mut self.events, &[Stage::Map, Stage::Kernel, Stage::Unmap])
    }

    fn synchronize(&mut self) -> Result<()> {
        self.stream.synchronize()
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
        let timing = self.events.begin();

        let started = Instant::now();
        timing.mark(0, stream)?;
        let mapped = interop::map(stream, resources)?;
        let prepared = prepare(&mapped)?;
        timing.mark(1, stream)?;
        times.set_host(Stage::Map, micros_since(started));

        let started = Instant::now();
        compute(prepared, stream)?;
        timing.mark(2, stream)?;
        times.set_host(Stage::Kernel, micros_since(started));

        let started = Instant::now();
        mapped.unmap()?;
        timing.mark(3, stream)?;
        times.set_host(Stage::Unmap, micros_since(started));
        self.events.commit(frame);
        Ok(times)
    }
}

/// The host-copy path.
pub struct HostCopy {
    context: Rc<Context>,
    stream: Rc<Stream>,
    events: EventRing,
    pinned: bool,
    skip_sync: bool,
    raced: RaceCount,
}

/// Frames uploaded without waiting for their copy, and how many of those were uploaded while the
/// copy was still running (stale or torn).
#[derive(Debug, Default, Clone, Copy)]
struct RaceCount {
    unsynchronized: u64,
    raced: u64,
}

impl Transfer for HostCopy {
    fn kind(&self) -> TransferKind {
        if self.pinned { TransferKind::HostCopy } else { TransferKind::HostCopyPageable }
    }

    fn create_buffer(&mut self, gl: &glow::Context, initial: &[u8]) -> Result<SharedBuffer> {
        let mut device = DeviceBuffer::new(&self.context, initial.len())?;
        device.upload(&self.stream, initial)?;
        let staging = if self.pinned {
            Staging::Pinned(PinnedBuffer::new(&self.context, initial.len())?)
        } else {
            Staging::Pageable(vec![0u8; initial.len()])
        };
        let buffer = gl::Buffer::new(gl, initial)?;
        Ok(SharedBuffer { link: Link::HostCopy { device, staging }, gl: buffer })
    }

    fn read_buffer(&mut self, _gl: &glow::Context, buffer: &SharedBuffer) -> Result<Vec<u8>> {
        match &buffer.link {
            Link::HostCopy { device, .. } => {
                let mut data = vec![0u8; device.len()];
                device.download(&self.stream, &mut data)?;
                Ok(data)
            }
            _ => Err(mismatch(self.kind())),
        }
    }

    fn run(
        &mut self,
        gl: &glow::Context,
        frame: u64,
        buffers: &mut [(&mut SharedBuffer, Access)],
        compute: &mut Compute<'_>,
    ) -> Result<StageTimes> {
        let kind = self.kind();
        let mut times = StageTimes::default();
        let stream = &*self.stream;
        if buffers.len() > interop::MAX_MAPPED {
            return Err(Error::InvalidInput(format!("at most {} buffers per step", interop::MAX_MAPPED)));
        }
        let mut spans = [DeviceSpan { ptr: 0, bytes: 0 }; interop::MAX_MAPPED];
        for ((buffer, _), span) in buffers.iter().zip(spans.iter_mut()) {
            match &buffer.link {
                Link::HostCopy { device, .. } => *span = device.span(),
                _ => return Err(mismatch(kind)),
            }
        }
        let timing = self.events.begin();

        let started = Instant::now();
        timing.mark(0, stream)?;
        compute(Target::Device { buffers: &spans[..buffers.len()], stream })?;
        timing.mark(1, stream)?;
        times.set_host(Stage::Kernel, micros_since(started));

        let started = Instant::now();
        for (buffer, access) in buffers.iter_mut() {
            if let (Link::HostCopy { device, staging }, true) = (&mut buffer.link, access.writes()) {
                match staging {
                    Staging::Pinned(pinned) => pinned.download_async(stream, device.span())?,
                    // A pageable destination makes the copy synchronous for the host.
                    Staging::Pageable(bytes) => device.download(stream, bytes)?,
                }
            }
        }
        timing.mark(2, stream)?;
        self.events.commit(frame);
        // The CPU must not read the staging memory before the copies land (unless a learner
        // switched this off to see stale and torn frames).
        let racing = if self.skip_sync {
            self.raced.unsynchronized += 1;
            let racing = !stream.is_idle()?;
            self.raced.raced += u64::from(racing);
            racing
        } else {
            stream.synchronize()?;
            false
        };
        times.set_host(Stage::Download, micros_since(started));

        let started = Instant::now();
        for (buffer, access) in buffers.iter() {
            if let (Link::HostCopy { staging, .. }, true) = (&buffer.link, access.writes()) {
                match staging {
                    Staging::Pinned(pinned) if racing => buffer.gl.write(gl, &pinned.snapshot_racing())?,
                    staging => buffer.gl.write(gl, staging.bytes())?,
                }
            }
        }
        times.set_host(Stage::Upload, micros_since(started));
        Ok(times)
    }

    fn poll_gpu_times(&mut self) -> Result<Option<LateGpuTimes>> {
        poll_stages(&mut self.events, &[Stage::Kernel, Stage::Download])
    }

    fn set_what_if(&mut self, what_if: WhatIf) {
        if what_if.skip_copy_sync != self.skip_sync {
            self.raced = RaceCount::default();
        }
        self.skip_sync = what_if.skip_copy_sync;
    }

    fn what_if_report(&self) -> Option<String> {
        let RaceCount { unsynchronized, raced } = self.raced;
        self.skip_sync.then(|| {
            format!(
                "{raced} of {unsynchronized} frames were uploaded while their copy was still running (stale or torn)"
            )
        })
    }

    fn synchronize(&mut self) -> Result<()> {
        self.stream.synchronize()
    }
}

/// The external-memory path.
pub struct External {
    context: Rc<Context>,
    stream: Rc<Stream>,
    gl_memory: GlMemoryObjects,
    events: EventRing,
}

impl Transfer for External {
    fn kind(&self) -> TransferKind {
        TransferKind::External
    }

    fn create_buffer(&mut self, gl: &glow::Context, initial: &[u8]) -> Result<SharedBuffer> {
        let memory = ExportableMemory::new(&self.context, initial.len())?;
        copy_to_device(&self.stream, memory.span(), initial)?;
        let fd = memory.export_fd()?;
        let (object, buffer) = self.gl_memory.import_buffer(gl, fd, memory.allocation_size(), initial.len())?;
        Ok(SharedBuffer { link: Link::External { memory, gl_memory: self.gl_memory, object }, gl: buffer })
    }

    fn read_buffer(&mut self, _gl: &glow::Context, buffer: &SharedBuffer) -> Result<Vec<u8>> {
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
        gl: &glow::Context,
        frame: u64,
        buffers: &mut [(&mut SharedBuffer, Access)],
        compute: &mut Compute<'_>,
    ) -> Result<StageTimes> {
        let mut times = StageTimes::default();
        let stream = &*self.stream;
        if buffers.len() > interop::MAX_MAPPED {
            return Err(Error::InvalidInput(format!("at most {} buffers per step", interop::MAX_MAPPED)));
        }
        let mut spans = [DeviceSpan { ptr: 0, bytes: 0 }; interop::MAX_MAPPED];
        for ((buffer, _), span) in buffers.iter().zip(spans.iter_mut()) {
            match &buffer.link {
                Link::External { memory, .. } => *span = memory.span(),
                _ => return Err(mismatch(TransferKind::External)),
            }
        }
        // Nothing maps or unmaps here, so nothing orders GL and CUDA but the app: GL must be done
        // with the buffers (last frame's draw) before the kernel writes them...
        let started = Instant::now();
        gl::wait_for_gl(gl)?;
        let mut sync_us = micros_since(started);

        let timing = self.events.begin();
        let started = Instant::now();
        timing.mark(0, stream)?;
        compute(Target::Device { buffers: &spans[..buffers.len()], stream })?;
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

/// The CPU path.
pub struct CpuPath;

impl Transfer for CpuPath {
    fn kind(&self) -> TransferKind {
        TransferKind::Cpu
    }

    fn create_buffer(&mut self, gl: &glow::Context, initial: &[u8]) -> Result<SharedBuffer> {
        Ok(SharedBuffer { link: Link::Cpu(HostBytes::new(initial)), gl: gl::Buffer::new(gl, initial)? })
    }

    fn read_buffer(&mut self, _gl: &glow::Context, buffer: &SharedBuffer) -> Result<Vec<u8>> {
        match &buffer.link {
            Link::Cpu(data) => Ok(data.bytes().to_vec()),
            _ => Err(mismatch(TransferKind::Cpu)),
        }
    }

    fn run(
        &mut self,
        gl: &glow::Context,
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

fn mismatch(kind: TransferKind) -> Error {
    Error::InvalidInput(format!("a buffer made for another transfer path was passed to the {} path", kind.label()))
}

fn micros_since(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1e6
}

/// GPU times of the oldest finished frame: stage `i` lasts from mark `i` to mark `i + 1`.
fn poll_stages(events: &mut EventRing, stages: &[Stage]) -> Result<Option<LateGpuTimes>> {
    let mut intervals = [0.0; 3];
    let intervals = &mut intervals[..stages.len()];
    let Some(frame) = events.poll(intervals)? else {
        return Ok(None);
    };
    let mut times = StageTimes::default();
    for (&stage, &microseconds) in stages.iter().zip(intervals.iter()) {
        times.set_gpu(stage, microseconds);
    }
    Ok(Some(LateGpuTimes { frame, times }))
}
