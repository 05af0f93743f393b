//! CUDA ↔ OpenGL interop: register a GL object with CUDA once, map it for each frame's kernels,
//! unmap it before GL draws it.
//!
//! Ownership carries the rules: a [`GraphicsResource`] unregisters itself on drop, and [`map`]
//! borrows every resource it maps for as long as the returned [`Mapped`] guard lives; dropping the
//! guard (or calling [`Mapped::unmap`]) hands them back to GL.
//!
//! Mapping, using the pointer, unmapping, and only then letting the resource go compiles:
//!
//! ```no_run
//! # use interop_lab::cuda::interop::{self, GraphicsResource, MapAccess};
//! # use interop_lab::cuda::Stream;
//! fn write_then_release(stream: &Stream, mut resource: GraphicsResource) -> interop_lab::Result<()> {
//!     let mapped = interop::map(stream, &mut [(&mut resource, MapAccess::WriteDiscard)])?;
//!     let _pointer = mapped.buffer(0)?; // kernels write here
//!     mapped.unmap()?;
//!     drop(resource); // unregistered after the unmap
//!     Ok(())
//! }
//! ```
//!
//! Releasing (or otherwise touching) a resource while it is mapped does not:
//!
//! ```compile_fail,E0505
//! # use interop_lab::cuda::interop::{self, GraphicsResource, MapAccess};
//! # use interop_lab::cuda::Stream;
//! fn release_while_mapped(stream: &Stream, mut resource: GraphicsResource) -> interop_lab::Result<()> {
//!     let mapped = interop::map(stream, &mut [(&mut resource, MapAccess::WriteDiscard)])?;
//!     drop(resource); // error[E0505]: cannot move out of `resource` because it is borrowed
//!     mapped.unmap()
//! }
//! ```
#![allow(unsafe_code)]

pub mod sys;

use std::marker::PhantomData;
use std::rc::Rc;

use cudarc::driver::sys as cu;

pub use self::sys::GlEntryPoints;
use super::context::Context;
use super::driver::cuda_error;
use super::memory::DeviceSpan;
use super::stream::Stream;
use crate::error::{Error, Result};

/// What a kernel will do with a mapped resource this frame (`cuGraphicsResourceSetMapFlags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MapAccess {
    /// Read and write; GL's contents are kept.
    ReadWrite,
    /// CUDA only reads; GL's contents are not written back.
    ReadOnly,
    /// CUDA overwrites everything; GL's previous contents need not be kept.
    WriteDiscard,
}

impl MapAccess {
    fn flags(self) -> u32 {
        use cu::CUgraphicsMapResourceFlags as F;
        match self {
            Self::ReadWrite => F::CU_GRAPHICS_MAP_RESOURCE_FLAGS_NONE as u32,
            Self::ReadOnly => F::CU_GRAPHICS_MAP_RESOURCE_FLAGS_READ_ONLY as u32,
            Self::WriteDiscard => F::CU_GRAPHICS_MAP_RESOURCE_FLAGS_WRITE_DISCARD as u32,
        }
    }
}

/// Which kind of GL object a resource is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GlObject {
    /// A buffer object (`glGenBuffers`).
    Buffer {
        /// GL name.
        name: u32,
    },
    /// A texture or renderbuffer.
    Image {
        /// GL name.
        name: u32,
        /// GL target, e.g. `GL_TEXTURE_2D`.
        target: u32,
    },
}

/// The CUDA devices the current GL context renders on (`cuGLGetDevices`). An empty list means
/// the context is on a GPU CUDA can't use (another vendor, or a software renderer).
pub fn gl_devices(entry_points: &GlEntryPoints) -> Result<Vec<cu::CUdevice>> {
    let mut devices = [0 as cu::CUdevice; 16];
    let mut count = 0u32;
    log::trace!("cuGLGetDevices");
    // SAFETY: the array has room for 16 devices and we say so; a GL context is current (callers
    // make it so; without one the driver returns an error, not UB).
    let status = unsafe {
        (entry_points.get_devices)(&mut count, devices.as_mut_ptr(), devices.len() as u32, sys::GL_DEVICE_LIST_ALL)
    };
    match status {
        cu::CUresult::CUDA_SUCCESS => Ok(devices[..(count as usize).min(devices.len())].to_vec()),
        // The documented answer when the GL context runs on a GPU that is not a CUDA device.
        cu::CUresult::CUDA_ERROR_NO_DEVICE => Ok(Vec::new()),
        other => Err(cuda_error(other, "cuGLGetDevices")),
    }
}

/// A GL buffer or texture registered with CUDA (`cuGraphicsGLRegisterBuffer`,
/// `cuGraphicsGLRegisterImage`): registered once, mapped for each frame's kernels with [`map`].
/// It owns the registration, not the GL object, and unregisters it on drop
/// (`cuGraphicsUnregisterResource`), which must happen before the GL object is deleted (declare
/// it before the GL object in structs: fields drop in order).
pub struct GraphicsResource {
    raw: cu::CUgraphicsResource,
    object: GlObject,
    map_flags: u32,
    context: Rc<Context>,
    /// Mapped ahead of its frame ([`Self::map_ahead`]), on this stream, until released.
    held: Option<Rc<Stream>>,
}

impl std::fmt::Debug for GraphicsResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphicsResource").field("object", &self.object).finish()
    }
}

impl GraphicsResource {
    /// `cuGraphicsGLRegisterBuffer`. The GL context that owns `buffer` must be current. Costs
    /// about a millisecond: do it once per buffer allocation, not per frame.
    pub fn register_buffer(context: &Rc<Context>, entry_points: &GlEntryPoints, buffer: u32) -> Result<Self> {
        let mut raw = std::ptr::null_mut();
        let flags = cu::CUgraphicsRegisterFlags::CU_GRAPHICS_REGISTER_FLAGS_NONE as u32;
        // SAFETY: valid out-pointer; `buffer` is a GL buffer name of the current context (an
        // invalid one makes the driver return an error).
        context.trace().call(
            "cuGraphicsGLRegisterBuffer",
            || format!("GL buffer {buffer}"),
            || unsafe { (entry_points.register_buffer)(&mut raw, buffer, flags) },
        )?;
        Ok(Self { raw, object: GlObject::Buffer { name: buffer }, map_flags: 0, context: context.clone(), held: None })
    }

    /// `cuGraphicsGLRegisterImage` with `SURFACE_LDST`, so kernels can write the texture through
    /// a surface object. The GL context that owns `texture` must be current.
    pub fn register_image(
        context: &Rc<Context>,
        entry_points: &GlEntryPoints,
        texture: u32,
        target: u32,
    ) -> Result<Self> {
        let mut raw = std::ptr::null_mut();
        let flags = cu::CUgraphicsRegisterFlags::CU_GRAPHICS_REGISTER_FLAGS_SURFACE_LDST as u32;
        // SAFETY: valid out-pointer; `texture`/`target` name a GL texture of the current context.
        context.trace().call(
            "cuGraphicsGLRegisterImage",
            || format!("GL texture {texture}, SURFACE_LDST"),
            || unsafe { (entry_points.register_image)(&mut raw, texture, target, flags) },
        )?;
        Ok(Self {
            raw,
            object: GlObject::Image { name: texture, target },
            map_flags: 0,
            context: context.clone(),
            held: None,
        })
    }

    /// The GL object this resource stands for.
    pub fn object(&self) -> GlObject {
        self.object
    }

    /// Maps this resource now, alone, on `stream`, and keeps it mapped for a later frame's
    /// kernels until [`Self::release_held`] (or drop). The map's wait for GL starts at this call,
    /// so calling it while the stream is busy with the frame before hides that wait
    /// (docs/interop-map.md). GL must not use the object meanwhile.
    pub fn map_ahead(&mut self, stream: &Rc<Stream>, access: MapAccess) -> Result<()> {
        if self.held.is_some() {
            return Ok(());
        }
        self.set_access(access)?;
        let mut raw = [self.raw];
        // SAFETY: a live, unmapped resource (not held; a `Mapped` guard borrowing it would forbid
        // this `&mut self`); the stream is live.
        self.context.trace().call(
            "cuGraphicsMapResources",
            || format!("1 resource on stream {:?}, ahead of its frame", stream.raw()),
            || unsafe { cu::cuGraphicsMapResources(1, raw.as_mut_ptr(), stream.raw()) },
        )?;
        self.held = Some(stream.clone());
        Ok(())
    }

    /// Whether the resource is mapped ahead ([`Self::map_ahead`]).
    pub fn is_held(&self) -> bool {
        self.held.is_some()
    }

    /// The device pointer of a buffer mapped ahead.
    pub fn held_buffer(&self) -> Result<DeviceSpan> {
        if self.held.is_none() || !matches!(self.object, GlObject::Buffer { .. }) {
            return Err(Error::InvalidInput(format!("{:?} is not a buffer mapped ahead", self.object)));
        }
        let (mut ptr, mut bytes) = (0, 0usize);
        // SAFETY: the resource is mapped (held) and is a buffer.
        self.context.trace().call(
            "cuGraphicsResourceGetMappedPointer",
            || "mapped ahead".to_owned(),
            || unsafe { cu::cuGraphicsResourceGetMappedPointer_v2(&mut ptr, &mut bytes, self.raw) },
        )?;
        Ok(DeviceSpan { ptr, bytes })
    }

    /// Unmaps a resource mapped ahead, on the stream it was mapped on: CUDA work queued there
    /// before this call completes before GL uses the object. Nothing when it is not held.
    pub fn release_held(&mut self) -> Result<()> {
        let Some(stream) = self.held.take() else { return Ok(()) };
        let mut raw = [self.raw];
        // SAFETY: mapped once by `map_ahead` on this stream, unmapped once here.
        self.context.trace().call(
            "cuGraphicsUnmapResources",
            || "1 resource mapped ahead".to_owned(),
            || unsafe { cu::cuGraphicsUnmapResources(1, raw.as_mut_ptr(), stream.raw()) },
        )
    }

    fn set_access(&mut self, access: MapAccess) -> Result<()> {
        if self.held.is_some() {
            return Err(Error::InvalidInput(format!(
                "{:?} is mapped ahead of its frame: it cannot be mapped again",
                self.object
            )));
        }
        let flags = access.flags();
        if flags != self.map_flags {
            // SAFETY: live, unmapped resource (mapped ones are borrowed by a `Mapped` guard, so
            // this `&mut self` can't exist while they are mapped).
            self.context.trace().call(
                "cuGraphicsResourceSetMapFlags",
                || format!("flags {flags}"),
                || unsafe { cu::cuGraphicsResourceSetMapFlags_v2(self.raw, flags) },
            )?;
            self.map_flags = flags;
        }
        Ok(())
    }
}

impl Drop for GraphicsResource {
    fn drop(&mut self) {
        if let Err(error) = self.release_held() {
            self.context.defer_error(error);
        }
        // SAFETY: registered in a constructor, unregistered once; not mapped here (a mapping held
        // ahead was released above, and a `Mapped` guard borrowing it would still be alive).
        if let Err(error) = self
            .context
            .trace()
            .call("cuGraphicsUnregisterResource", String::new, || unsafe { cu::cuGraphicsUnregisterResource(self.raw) })
        {
            self.context.defer_error(error);
        }
    }
}

/// Most resources one [`map`] call takes; enough for every demo, and no allocation per frame.
pub const MAX_MAPPED: usize = 8;

/// Resources mapped for CUDA (`cuGraphicsMapResources`, which waits on the stream for the GL work
/// issued before it). While this guard lives the resources are borrowed, so GL cannot draw them;
/// [`Mapped::unmap`] or dropping it unmaps them (`cuGraphicsUnmapResources`, after which GL's
/// later work waits for the kernels queued before it; errors of a drop go to the context's
/// deferred errors).
#[must_use = "dropping the guard unmaps at once; keep it while kernels use the pointers"]
pub struct Mapped<'a> {
    raws: [cu::CUgraphicsResource; MAX_MAPPED],
    objects: [Option<GlObject>; MAX_MAPPED],
    count: usize,
    stream: &'a Stream,
    unmapped: bool,
    _borrow: PhantomData<&'a mut GraphicsResource>,
}

/// Maps every resource in `resources` with one `cuGraphicsMapResources` call on `stream`, after
/// setting each one's access flags. GL work issued before this call completes before any CUDA
/// work queued after it on `stream`.
pub fn map<'a, 's: 'a, 'r: 'a>(
    stream: &'s Stream,
    resources: &mut [(&'r mut GraphicsResource, MapAccess)],
) -> Result<Mapped<'a>> {
    if resources.len() > MAX_MAPPED {
        return Err(Error::InvalidInput(format!(
            "{} resources in one map call; at most {MAX_MAPPED}",
            resources.len()
        )));
    }
    let mut raws = [std::ptr::null_mut(); MAX_MAPPED];
    let mut objects = [None; MAX_MAPPED];
    for (slot, (resource, access)) in resources.iter_mut().enumerate() {
        resource.set_access(*access)?;
        raws[slot] = resource.raw;
        objects[slot] = Some(resource.object);
    }
    let count = resources.len();
    // SAFETY: `raws[..count]` are live registered resources, none mapped (each is borrowed
    // mutably here, so no other guard holds it); the stream is live.
    stream.context().trace().call(
        "cuGraphicsMapResources",
        || format!("{count} resource(s) on stream {:?}", stream.raw()),
        || unsafe { cu::cuGraphicsMapResources(count as u32, raws.as_mut_ptr(), stream.raw()) },
    )?;
    Ok(Mapped { raws, objects, count, stream, unmapped: false, _borrow: PhantomData })
}

impl Mapped<'_> {
    /// The device pointer of mapped buffer `index` (`cuGraphicsResourceGetMappedPointer`).
    pub fn buffer(&self, index: usize) -> Result<DeviceSpan> {
        self.expect(index, |o| matches!(o, GlObject::Buffer { .. }), "a buffer")?;
        let (mut ptr, mut bytes) = (0, 0usize);
        // SAFETY: the resource is mapped (this guard exists) and is a buffer.
        self.stream.context().trace().call(
            "cuGraphicsResourceGetMappedPointer",
            || format!("resource {index}"),
            || unsafe { cu::cuGraphicsResourceGetMappedPointer_v2(&mut ptr, &mut bytes, self.raws[index]) },
        )?;
        Ok(DeviceSpan { ptr, bytes })
    }

    /// The CUDA array behind mapped image `index` (`cuGraphicsSubResourceGetMappedArray`, level 0).
    pub fn array(&self, index: usize) -> Result<cu::CUarray> {
        self.expect(index, |o| matches!(o, GlObject::Image { .. }), "an image")?;
        let mut array = std::ptr::null_mut();
        // SAFETY: the resource is mapped and is an image.
        self.stream.context().trace().call(
            "cuGraphicsSubResourceGetMappedArray",
            || format!("resource {index}, level 0"),
            || unsafe { cu::cuGraphicsSubResourceGetMappedArray(&mut array, self.raws[index], 0, 0) },
        )?;
        Ok(array)
    }

    fn expect(&self, index: usize, is: impl Fn(&GlObject) -> bool, what: &str) -> Result<()> {
        match self.objects.get(index).copied().flatten() {
            Some(object) if index < self.count && is(&object) => Ok(()),
            Some(object) => Err(Error::InvalidInput(format!("mapped resource {index} is {object:?}, not {what}"))),
            None => Err(Error::InvalidInput(format!("no mapped resource {index} (mapped {})", self.count))),
        }
    }

    /// Unmaps every resource with one `cuGraphicsUnmapResources` call; CUDA work queued before it
    /// on the stream completes before GL uses the resources.
    pub fn unmap(mut self) -> Result<()> {
        self.unmap_inner()
    }

    fn unmap_inner(&mut self) -> Result<()> {
        if self.unmapped {
            return Ok(());
        }
        self.unmapped = true;
        // SAFETY: exactly the resources mapped in `map`, on the same stream, unmapped once.
        self.stream.context().trace().call(
            "cuGraphicsUnmapResources",
            || format!("{} resource(s)", self.count),
            || unsafe { cu::cuGraphicsUnmapResources(self.count as u32, self.raws.as_mut_ptr(), self.stream.raw()) },
        )
    }
}

/// Asks the driver to map resource `index` of `mapped` again while it is mapped, and returns its
/// answer (`CUDA_ERROR_ALREADY_MAPPED`): how the driver guards a resource CUDA holds. For
/// demonstration only; it cannot leave anything mapped twice.
pub fn map_again_raw(stream: &Stream, mapped: &Mapped<'_>, index: usize) -> Result<()> {
    if index >= mapped.count {
        return Err(Error::InvalidInput(format!("no mapped resource {index}")));
    }
    let mut raw = [mapped.raws[index]];
    // SAFETY: the resource is live and mapped (the guard exists); the driver refuses the second
    // map with an error, so nothing changes.
    let result = stream.context().trace().call(
        "cuGraphicsMapResources",
        || "again, while mapped".to_owned(),
        || unsafe { cu::cuGraphicsMapResources(1, raw.as_mut_ptr(), stream.raw()) },
    );
    if result.is_ok() {
        // Should the driver ever accept it, undo it at once.
        // SAFETY: the resource was just mapped a second time by the call above.
        let _ = unsafe { cu::cuGraphicsUnmapResources(1, raw.as_mut_ptr(), stream.raw()) };
    }
    result
}

impl Drop for Mapped<'_> {
    fn drop(&mut self) {
        if let Err(error) = self.unmap_inner() {
            self.stream.context().defer_error(error);
        }
    }
}
