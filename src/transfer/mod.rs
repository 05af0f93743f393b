//! How a frame's results reach the buffers and images that are drawn: six paths behind one
//! trait, one file each. The first four draw with OpenGL, the Vulkan path with Vulkan; the host
//! copy and the CPU path serve both.
//!
//! - [`interop::Interop`]: the GL buffer is registered with CUDA once; each frame it is mapped, the
//!   kernel writes it directly, and it is unmapped before GL draws it. No copy at all.
//! - [`external::External`]: CUDA allocates exportable memory and GL builds its buffer on it; no
//!   map, no unmap, and the app orders the two APIs itself: with host waits, or with semaphores
//!   on the GPU.
//! - [`host_copy::HostCopy`] (pinned or pageable): the kernel writes ordinary device memory, which
//!   is copied to host memory (`cuMemcpyDtoHAsync`) and from there into the graphics buffer
//!   (`glBufferSubData`, or a write into mapped Vulkan memory). The baseline interop is measured
//!   against.
//! - [`cpu::CpuPath`]: no CUDA; the CPU computes into host memory and uploads it as above.
//! - [`vulkan::VulkanPath`]: Vulkan allocates the memory it draws from, CUDA imports it once, and
//!   two timeline semaphores order the two APIs on the GPU ([`vulkan::VulkanShare`] holds them;
//!   `bench transfer` uses it directly).
//!
//! A demo creates its [`SharedBuffer`]s through the path in use and runs each compute step with
//! [`Transfer::run`], which hands the compute a [`Target`] (device pointers or host slices). The
//! runtime creates the paths ([`create`] with the [`CudaSide`] it set up).

pub mod cpu;
pub mod external;
pub mod host_copy;
mod image;
pub mod interop;
mod kind;
mod memory;
pub mod vulkan;

use std::rc::Rc;
use std::time::Instant;

use self::cpu::CpuPath;
use self::external::External;
use self::host_copy::HostCopy;
pub use self::image::{ImageSharing, ImageTarget};
use self::interop::Interop;
pub use self::kind::{TransferKind, WhatIf};
use self::memory::{BufferMemory, Link};
pub use self::memory::{SharedBuffer, SharedImage, TextureMemory, image_route_words};
use crate::anatomy::Calibration;
use crate::cuda::interop::{GlEntryPoints, MapAccess};
use crate::cuda::timing::EventRing;
use crate::cuda::{Context, DeviceSpan, Stream};
use crate::error::{Error, Result};
use crate::gl::external::{GlMemoryObjects, GlSemaphores};
use crate::graphics::Graphics;
use crate::stats::{Lane, LateGpuTimes, Stage, StageTimes};

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

/// One way of getting compute results into the buffers and images the renderer draws (GL or Vulkan).
pub trait Transfer {
    /// Which path this is.
    fn kind(&self) -> TransferKind;

    /// How the GPU times of its CUDA work are put on the host clock (the frame anatomy's CUDA
    /// lane), or why they are not; `None`: the path runs no CUDA work.
    fn calibration(&self) -> Option<Calibration> {
        None
    }

    /// Creates a GL buffer holding `initial`, set up for this path (registered with CUDA on the
    /// interop path, mirrored in device memory on the host-copy path).
    fn create_buffer(&mut self, graphics: Graphics<'_>, initial: &[u8]) -> Result<SharedBuffer>;

    /// Reads the buffer's current contents (to carry a simulation over to another path).
    fn read_buffer(&mut self, graphics: Graphics<'_>, buffer: &SharedBuffer) -> Result<Vec<u8>>;

    /// Runs `compute` with access to `buffers` and makes what it wrote visible to GL. Returns the
    /// host time of each stage; GPU times arrive later through [`Transfer::poll_gpu_times`].
    fn run(
        &mut self,
        graphics: Graphics<'_>,
        frame: u64,
        buffers: &mut [(&mut SharedBuffer, Access)],
        compute: &mut Compute<'_>,
    ) -> Result<StageTimes>;

    /// GPU stage times of an earlier frame, once the GPU has finished it (never blocks).
    fn poll_gpu_times(&mut self) -> Result<Option<LateGpuTimes>>;

    /// Waits for all GPU work of this path (before reading results or tearing down).
    fn synchronize(&mut self) -> Result<()>;

    /// [`Self::run`], and prepares `next` (the buffers the next frame's run will write) before GL
    /// is given this frame: GL interop maps them right after this frame's unmap, so that map waits
    /// only for GL's earlier frames and its wait overlaps this frame's hand-off instead of starting
    /// the next frame (docs/interop-map.md). GL must not use `next` until it has been run. Other
    /// paths have nothing to prepare.
    fn run_pipelined(
        &mut self,
        graphics: Graphics<'_>,
        frame: u64,
        buffers: &mut [(&mut SharedBuffer, Access)],
        _next: &mut [(&mut SharedBuffer, Access)],
        compute: &mut Compute<'_>,
    ) -> Result<StageTimes> {
        self.run(graphics, frame, buffers, compute)
    }

    /// Undoes the preparation of [`Self::run_pipelined`] for `buffers` (before GL reads, draws
    /// or replaces them outside a run).
    fn release_prepared(&mut self, _buffers: &mut [&mut SharedBuffer]) -> Result<()> {
        Ok(())
    }

    /// Applies the learners' switches (paths they do not concern ignore them).
    fn set_what_if(&mut self, _what_if: WhatIf) {}

    /// CUDA's context is lost (a kernel fault): whatever the graphics API was told to wait for
    /// from CUDA will never come. A path whose graphics work waits on CUDA's signals releases
    /// what it can of those waits here and answers `true`: the graphics device may be held by
    /// them for good (NVIDIA's Vulkan driver: measured), so the caller replaces it.
    fn cuda_lost(&mut self) -> bool {
        false
    }

    /// What the switches in effect did so far, in a sentence (`None` when none concerns this path).
    fn what_if_report(&self) -> Option<String> {
        None
    }

    /// Capability: the path maps GL objects it registered with CUDA (GL interop). Only such a
    /// path can write a texture in place and show what using a buffer CUDA holds amounts to.
    fn mapping(&mut self) -> Option<&mut dyn Mapping> {
        None
    }

    /// Capability: the path shares Vulkan images with CUDA (the Vulkan path), so kernels write
    /// the image the renderer samples.
    fn image_sharing(&mut self) -> Option<&mut dyn ImageSharing> {
        None
    }
}

/// What a path that maps registered GL objects can do beyond buffers.
pub trait Mapping {
    /// Maps `buffer` and, while it is mapped, asks the driver to map it again — what using a buffer
    /// CUDA holds amounts to — and returns the driver's answer.
    fn use_while_mapped(&mut self, buffer: &mut SharedBuffer) -> Result<String>;

    /// Registers `texture` for kernels to write through a surface object (on failure the texture
    /// is deleted). A texture of another API than the path's is refused.
    fn register_image(&mut self, graphics: Graphics<'_>, texture: TextureMemory) -> Result<SharedImage>;

    /// Maps the registered `image`, runs `compute` with a surface object over it, unmaps.
    fn run_registered(
        &mut self,
        frame: u64,
        image: &mut SharedImage,
        compute: &mut dyn FnMut(ImageTarget<'_>) -> Result<()>,
    ) -> Result<StageTimes>;
}

/// The [`Mapping`] calls on any path, answering with what the path does instead when it maps
/// nothing.
impl dyn Transfer + '_ {
    /// `count` (at least 1) buffers holding `initial` each, as a ring for pipelined frames; on
    /// failure the ones already made are freed.
    pub fn create_buffers(
        &mut self,
        graphics: Graphics<'_>,
        initial: &[u8],
        count: usize,
    ) -> Result<Vec<SharedBuffer>> {
        let mut made = crate::guard::Guard::new(Vec::with_capacity(count), |made: Vec<SharedBuffer>| {
            made.into_iter().for_each(|buffer| buffer.destroy(graphics))
        });
        for _ in 0..count.max(1) {
            made.push(self.create_buffer(graphics, initial)?);
        }
        Ok(made.keep())
    }

    /// [`Mapping::use_while_mapped`], or why the path has nothing to misuse.
    pub fn use_while_mapped(&mut self, buffer: &mut SharedBuffer) -> Result<String> {
        let label = self.kind().label();
        match self.mapping() {
            Some(mapping) => mapping.use_while_mapped(buffer),
            None => {
                Err(Error::Unavailable(format!("the {label} path never maps a buffer: there is nothing to misuse")))
            }
        }
    }
}

/// What CUDA brings to a transfer path: the context, the demo's stream, and the GL entry points
/// the runtime found (interop: `cudaGL.h`; external memory: GL's memory objects).
pub struct CudaSide<'a> {
    /// The context kernels run in.
    pub context: &'a Rc<Context>,
    /// The demo's stream.
    pub stream: &'a Rc<Stream>,
    /// `cudaGL.h` entry points, when the GL context runs on this CUDA device.
    pub interop: Option<GlEntryPoints>,
    /// GL's memory-object entry points, when GL can import memory CUDA exports.
    pub external: Option<GlMemoryObjects>,
    /// GL's semaphore entry points, when GL can import semaphores (`GL_EXT_semaphore_fd`).
    pub gl_semaphores: Option<GlSemaphores>,
}

/// From a ring of buffers, slot `this` (written this frame) and, when the ring has more than one,
/// the slot after it (written next frame, so mapped ahead in a pipelined frame).
pub fn this_and_next(ring: &mut [SharedBuffer], this: usize) -> (&mut SharedBuffer, Option<&mut SharedBuffer>) {
    let next = (this + 1) % ring.len().max(1);
    if next == this {
        return (&mut ring[this], None);
    }
    let (low, high) = ring.split_at_mut(this.max(next));
    if this < next { (&mut low[this], Some(&mut high[0])) } else { (&mut high[0], Some(&mut low[next])) }
}

/// Creates the transfer of `kind`; every path but the CPU's needs `cuda`.
pub fn create(kind: TransferKind, cuda: Option<CudaSide<'_>>) -> Result<Box<dyn Transfer>> {
    if kind == TransferKind::Cpu {
        return Ok(Box::new(CpuPath));
    }
    let cuda =
        cuda.ok_or_else(|| Error::Unavailable(format!("the {} path needs CUDA, which is not running", kind.label())))?;
    // Interop marks one more boundary: the maps made ahead for the next frame (run_pipelined).
    let marks = if kind == TransferKind::Interop { 5 } else { 4 };
    let events = EventRing::new(cuda.context, crate::cuda::timing::TIMED_FRAMES, marks)?;
    let (context, stream) = (cuda.context.clone(), cuda.stream.clone());
    Ok(match kind {
        TransferKind::HostCopy => Box::new(HostCopy::new(context, stream, events, true)),
        TransferKind::HostCopyPageable => Box::new(HostCopy::new(context, stream, events, false)),
        TransferKind::Interop => {
            let entry_points = cuda.interop.ok_or_else(|| {
                Error::Unavailable("GL interop is not available: the GL context is not on this CUDA device".to_owned())
            })?;
            Box::new(Interop::new(context, stream, entry_points, events))
        }
        TransferKind::External | TransferKind::ExternalSemaphores => {
            let gl_memory = cuda.external.ok_or_else(|| {
                Error::Unavailable(
                    "external memory needs GL_EXT_memory_object_fd on the CUDA device's GL context and a device that \
                     exports file descriptors"
                        .to_owned(),
                )
            })?;
            if kind == TransferKind::External {
                Box::new(External::new(context, stream, gl_memory, events))
            } else {
                let gl_semaphores = cuda.gl_semaphores.ok_or_else(|| {
                    Error::Unavailable(
                        "external memory with semaphores needs GL_EXT_semaphore_fd, which this GL context lacks: \
                         --transfer external orders the same memory with host waits"
                            .to_owned(),
                    )
                })?;
                Box::new(External::with_semaphores(context, stream, gl_memory, gl_semaphores, events)?)
            }
        }
        TransferKind::Vulkan => Box::new(vulkan::VulkanPath::new(context, stream)),
        TransferKind::Cpu => Box::new(CpuPath),
    })
}

/// The device ranges of a step's buffers, in order (at most [`MAX_MAPPED`] of them).
///
/// [`MAX_MAPPED`]: crate::cuda::interop::MAX_MAPPED
struct DeviceSpans {
    spans: [DeviceSpan; crate::cuda::interop::MAX_MAPPED],
    len: usize,
}

impl DeviceSpans {
    /// The ranges of `buffers`, as `span` reads each from its link (`None`: the buffer belongs to
    /// another path than `kind`).
    fn of(
        buffers: &[(&mut SharedBuffer, Access)],
        kind: TransferKind,
        span: impl Fn(&Link) -> Option<DeviceSpan>,
    ) -> Result<Self> {
        const MAX: usize = crate::cuda::interop::MAX_MAPPED;
        if buffers.len() > MAX {
            return Err(Error::InvalidInput(format!("at most {MAX} buffers per step")));
        }
        let mut spans = [DeviceSpan { ptr: 0, bytes: 0 }; MAX];
        for ((buffer, _), slot) in buffers.iter().zip(spans.iter_mut()) {
            *slot = span(&buffer.link).ok_or_else(|| mismatch(kind))?;
        }
        Ok(Self { spans, len: buffers.len() })
    }

    /// The ranges, in the buffers' order.
    fn as_slice(&self) -> &[DeviceSpan] {
        &self.spans[..self.len]
    }
}

pub(crate) fn mismatch(kind: TransferKind) -> Error {
    Error::InvalidInput(format!("a buffer made for another transfer path was passed to the {} path", kind.label()))
}

pub(crate) fn micros_since(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1e6
}

/// GPU times of the oldest finished frame: stage `i` lasts from mark `i` to mark `i + 1`.
pub(crate) fn poll_stages(events: &mut EventRing, stages: &[Stage]) -> Result<Option<LateGpuTimes>> {
    let mut intervals = [0.0; 3];
    let intervals = &mut intervals[..stages.len()];
    let Some(frame) = events.poll(intervals)? else {
        return Ok(None);
    };
    let mut times = StageTimes::default();
    for (index, (&stage, &microseconds)) in stages.iter().zip(intervals.iter()).enumerate() {
        // Placed on the host clock where the ring was calibrated (a NaN start places nothing).
        let start = events.marks_us().get(index).copied().unwrap_or(f64::NAN);
        times.set_gpu_at(stage, Lane::Cuda, start, microseconds);
    }
    Ok(Some(LateGpuTimes { frame, times }))
}

/// The CUDA lane's calibration for a path whose GPU times come from `events`.
pub(crate) fn cuda_calibration(events: &EventRing) -> Option<Calibration> {
    let (error_us, note) = match events.clock_error_us() {
        Some(error) => (
            Some(error),
            "CUDA events; an epoch event recorded on the idle stream between two host clock reads, every 2 s"
                .to_owned(),
        ),
        None => (None, "not calibrated yet: calibration runs while the anatomy is recorded".to_owned()),
    };
    Some(Calibration { lane: Lane::Cuda, name: "CUDA stream".to_owned(), error_us, note })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skipped_semaphore_wait_keeps_its_edge_labelled_as_not_waited_for() {
        let skipped = WhatIf { skip_semaphore_wait: true, ..WhatIf::default() };
        let edges = TransferKind::Vulkan.edges_with(skipped);
        assert_eq!(edges.len(), TransferKind::Vulkan.edges().len());
        assert!(edges[0].label.starts_with("what if: the draw does not wait"), "{:?}", edges[0]);
        assert_eq!((edges[0].from, edges[0].to), (Stage::Kernel, Stage::Draw));
        // Nothing changes without the switch, nor on a path the switch does not apply to.
        assert_eq!(TransferKind::Vulkan.edges_with(WhatIf::default()), TransferKind::Vulkan.edges());
        assert_eq!(TransferKind::Interop.edges_with(skipped), TransferKind::Interop.edges());
    }
}
