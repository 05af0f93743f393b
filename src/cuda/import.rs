//! What CUDA imports from another API (Vulkan): memory, as an opaque file descriptor mapped to a
//! device pointer kernels write (`cuImportExternalMemory`, `cuExternalMemoryGetMappedBuffer`) or,
//! for an image, to a CUDA array kernels write through a surface object
//! (`cuExternalMemoryGetMappedMipmappedArray`, `cuMipmappedArrayGetLevel`, `cuSurfObjectCreate`); and
//! semaphores (timeline or binary) a stream waits on and signals without the host
//! (`cuImportExternalSemaphore`, `cuWaitExternalSemaphoresAsync`, `cuSignalExternalSemaphoresAsync`).
//! Importing takes the file descriptor over; each object is released on drop.
#![allow(unsafe_code)]

use std::os::fd::{IntoRawFd, OwnedFd};
use std::rc::Rc;

use cudarc::driver::sys;

use super::context::Context;
use super::memory::DeviceSpan;
use super::stream::Stream;
use super::surface::SurfaceObject;
use crate::error::Result;

/// Memory another API allocated, mapped for kernels. The mapping is freed, then the import
/// destroyed, on drop; the exporting API keeps its own allocation until it frees it.
pub struct ImportedMemory {
    external: sys::CUexternalMemory,
    ptr: sys::CUdeviceptr,
    bytes: usize,
    context: Rc<Context>,
}

impl ImportedMemory {
    /// Imports `fd` (an opaque file descriptor for a dedicated allocation of `allocation_size`
    /// bytes) and maps its first `bytes` bytes. CUDA owns the descriptor once the import succeeds;
    /// on failure it is closed here.
    pub fn new(context: &Rc<Context>, fd: OwnedFd, allocation_size: u64, bytes: usize) -> Result<Self> {
        let external = import_memory(context, fd, allocation_size)?;
        let trace = context.trace();
        let mut memory = Self { external, ptr: 0, bytes, context: context.clone() };
        let buffer =
            sys::CUDA_EXTERNAL_MEMORY_BUFFER_DESC { offset: 0, size: bytes as u64, flags: 0, reserved: [0; 16] };
        let mut ptr = 0;
        // SAFETY: a live import; the range lies inside the allocation (bytes ≤ allocation_size).
        trace.call(
            "cuExternalMemoryGetMappedBuffer",
            || format!("{bytes} bytes at offset 0"),
            || unsafe { sys::cuExternalMemoryGetMappedBuffer(&mut ptr, external, &buffer) },
        )?;
        memory.ptr = ptr;
        Ok(memory)
    }

    /// The mapped range kernels read and write.
    pub fn span(&self) -> DeviceSpan {
        DeviceSpan { ptr: self.ptr, bytes: self.bytes }
    }
}

impl Drop for ImportedMemory {
    fn drop(&mut self) {
        let trace = self.context.trace();
        // SAFETY: the mapping (if made) is freed with cuMemFree, as the driver documents, then the
        // import is destroyed; each once.
        if self.ptr != 0
            && let Err(error) = trace.call("cuMemFree", String::new, || unsafe { sys::cuMemFree_v2(self.ptr) })
        {
            self.context.defer_error(error);
        }
        destroy_import(&self.context, self.external);
    }
}

/// `cuImportExternalMemory` of `fd`, a dedicated allocation of `allocation_size` bytes. CUDA owns
/// the descriptor once the import succeeds; on failure it is closed here.
fn import_memory(context: &Context, fd: OwnedFd, allocation_size: u64) -> Result<sys::CUexternalMemory> {
    let raw = fd.into_raw_fd();
    let description = memory_description(raw, allocation_size);
    let mut external = std::ptr::null_mut();
    // SAFETY: a valid description; on success the driver owns `raw`.
    let imported = context.trace().call(
        "cuImportExternalMemory",
        || format!("opaque fd, {allocation_size} bytes, dedicated"),
        || unsafe { sys::cuImportExternalMemory(&mut external, &description) },
    );
    if let Err(error) = imported {
        // SAFETY: the import failed, so the descriptor is still ours; closed once.
        drop(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) });
        return Err(error);
    }
    Ok(external)
}

/// Destroys an import, or keeps the error for the context to report (from `Drop`).
fn destroy_import(context: &Context, external: sys::CUexternalMemory) {
    // SAFETY: a live import, destroyed once, after everything mapped from it was freed.
    if let Err(error) = context
        .trace()
        .call("cuDestroyExternalMemory", String::new, || unsafe { sys::cuDestroyExternalMemory(external) })
    {
        context.defer_error(error);
    }
}

/// An image another API allocated (one mip level, 2D, four channels), mapped as a CUDA array that
/// kernels write through a surface object. On drop: the surface, the mipmapped array, the import.
pub struct ImportedImage {
    external: sys::CUexternalMemory,
    mipmapped: sys::CUmipmappedArray,
    /// Level 0 of `mipmapped`, which owns it.
    array: sys::CUarray,
    surface: Option<SurfaceObject>,
    size: [u32; 2],
    bytes_per_pixel: usize,
    context: Rc<Context>,
}

/// The channel type of an imported image's four channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelType {
    /// 8-bit unsigned normalised (RGBA8).
    Unorm8,
    /// 32-bit float (RGBA32F).
    Float32,
}

impl ImportedImage {
    /// Imports `fd` (a dedicated allocation of `allocation_size` bytes holding an optimally tiled
    /// image of `size` pixels, four channels of `channels`) and maps its level 0 for surface
    /// loads and stores.
    pub fn new(
        context: &Rc<Context>,
        fd: OwnedFd,
        allocation_size: u64,
        size: [u32; 2],
        channels: ChannelType,
    ) -> Result<Self> {
        let external = import_memory(context, fd, allocation_size)?;
        let (format, bytes_per_pixel) = match channels {
            ChannelType::Unorm8 => (sys::CUarray_format::CU_AD_FORMAT_UNSIGNED_INT8, 4),
            ChannelType::Float32 => (sys::CUarray_format::CU_AD_FORMAT_FLOAT, 16),
        };
        let mut image = Self {
            external,
            mipmapped: std::ptr::null_mut(),
            array: std::ptr::null_mut(),
            surface: None,
            size,
            bytes_per_pixel,
            context: context.clone(),
        };
        let description = mipmapped_description(size, format);
        let trace = context.trace();
        // SAFETY: a live import and a valid description; the array is destroyed in Drop.
        trace.call(
            "cuExternalMemoryGetMappedMipmappedArray",
            || format!("{}x{}, 4 × {format:?}, 1 level, surface load/store", size[0], size[1]),
            || unsafe { sys::cuExternalMemoryGetMappedMipmappedArray(&mut image.mipmapped, external, &description) },
        )?;
        // SAFETY: level 0 of a live mipmapped array of one level.
        trace.call(
            "cuMipmappedArrayGetLevel",
            || "level 0".to_owned(),
            || unsafe { sys::cuMipmappedArrayGetLevel(&mut image.array, image.mipmapped, 0) },
        )?;
        image.surface = Some(SurfaceObject::new(context, image.array)?);
        Ok(image)
    }

    /// The surface object kernels write (`cudaSurfaceObject_t`).
    pub fn surface(&self) -> u64 {
        self.surface.as_ref().map(SurfaceObject::raw).unwrap_or(0)
    }

    /// Size in pixels.
    pub fn size(&self) -> [u32; 2] {
        self.size
    }

    /// Copies the image into host memory (rows top first, tightly packed) and waits for it.
    pub fn download(&self, stream: &Stream) -> Result<Vec<u8>> {
        let row = self.size[0] as usize * self.bytes_per_pixel;
        let mut out = vec![0u8; row * self.size[1] as usize];
        let copy = sys::CUDA_MEMCPY2D {
            srcXInBytes: 0,
            srcY: 0,
            srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_ARRAY,
            srcHost: std::ptr::null(),
            srcDevice: 0,
            srcArray: self.array,
            srcPitch: 0,
            dstXInBytes: 0,
            dstY: 0,
            dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_HOST,
            dstHost: out.as_mut_ptr().cast(),
            dstDevice: 0,
            dstArray: std::ptr::null_mut(),
            dstPitch: row,
            WidthInBytes: row,
            Height: self.size[1] as usize,
        };
        // SAFETY: the whole of a live array into `out`, which holds exactly its rows; the host
        // waits for the copy before `out` is used or dropped.
        self.context.trace().call(
            "cuMemcpy2DAsync",
            || format!("{} bytes, array to host", out.len()),
            || unsafe { sys::cuMemcpy2DAsync_v2(&copy, stream.raw()) },
        )?;
        stream.synchronize()?;
        Ok(out)
    }
}

impl Drop for ImportedImage {
    fn drop(&mut self) {
        drop(self.surface.take());
        // SAFETY: the mapped array (if made) is destroyed once, after its surface; then the import.
        if !self.mipmapped.is_null()
            && let Err(error) = self.context.trace().call("cuMipmappedArrayDestroy", String::new, || unsafe {
                sys::cuMipmappedArrayDestroy(self.mipmapped)
            })
        {
            self.context.defer_error(error);
        }
        destroy_import(&self.context, self.external);
    }
}

fn mipmapped_description(
    size: [u32; 2],
    format: sys::CUarray_format,
) -> sys::CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC {
    sys::CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC {
        offset: 0,
        arrayDesc: sys::CUDA_ARRAY3D_DESCRIPTOR {
            Width: size[0] as usize,
            Height: size[1] as usize,
            Depth: 0,
            Format: format,
            NumChannels: 4,
            Flags: sys::CUDA_ARRAY3D_SURFACE_LDST,
        },
        numLevels: 1,
        reserved: [0; 16],
    }
}

// The descriptions are built field by field: their handle types have no zero value, so they
// cannot be zeroed (`mem::zeroed` panics on them).

fn memory_description(fd: i32, allocation_size: u64) -> sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC {
    sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC {
        type_: sys::CUexternalMemoryHandleType::CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
        handle: sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC_st__bindgen_ty_1 { fd },
        size: allocation_size,
        flags: sys::CUDA_EXTERNAL_MEMORY_DEDICATED,
        reserved: [0; 16],
    }
}

fn semaphore_description(fd: i32, timeline: bool) -> sys::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC {
    use sys::CUexternalSemaphoreHandleType::{
        CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD, CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD,
    };
    sys::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC {
        type_: if timeline {
            CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD
        } else {
            CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD
        },
        handle: sys::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC_st__bindgen_ty_1 { fd },
        flags: 0,
        reserved: [0; 16],
    }
}

fn wait_parameters(value: u64) -> sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS {
    // SAFETY: integers, pointers and unions of them: all-zero is a valid value.
    let mut parameters: sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS = unsafe { std::mem::zeroed() };
    parameters.params.fence.value = value;
    parameters
}

fn signal_parameters(value: u64) -> sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS {
    // SAFETY: as in `wait_parameters`.
    let mut parameters: sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS = unsafe { std::mem::zeroed() };
    parameters.params.fence.value = value;
    parameters
}

/// A semaphore another API made, that CUDA streams wait on and signal: a timeline (waits and
/// signals name a value) or a binary one (each signal is consumed by exactly one wait).
pub struct ImportedSemaphore {
    external: sys::CUexternalSemaphore,
    name: &'static str,
    timeline: bool,
    context: Rc<Context>,
}

impl ImportedSemaphore {
    /// Imports `fd`, an opaque file descriptor of a timeline semaphore, which the trace calls
    /// `name`. CUDA owns the descriptor once the import succeeds; on failure it is closed here.
    pub fn new_timeline(context: &Rc<Context>, fd: OwnedFd, name: &'static str) -> Result<Self> {
        Self::import(context, fd, name, true)
    }

    /// As [`Self::new_timeline`], for a binary semaphore: values passed to waits and signals are
    /// ignored.
    pub fn new_binary(context: &Rc<Context>, fd: OwnedFd, name: &'static str) -> Result<Self> {
        Self::import(context, fd, name, false)
    }

    fn import(context: &Rc<Context>, fd: OwnedFd, name: &'static str, timeline: bool) -> Result<Self> {
        let raw = fd.into_raw_fd();
        let description = semaphore_description(raw, timeline);
        let mut external = std::ptr::null_mut();
        let kind = if timeline { "timeline" } else { "binary" };
        // SAFETY: a valid description; on success the driver owns `raw`.
        let imported = context.trace().call(
            "cuImportExternalSemaphore",
            || format!("{kind} semaphore '{name}', opaque fd"),
            || unsafe { sys::cuImportExternalSemaphore(&mut external, &description) },
        );
        if let Err(error) = imported {
            // SAFETY: the import failed, so the descriptor is still ours; closed once.
            drop(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) });
            return Err(error);
        }
        Ok(Self { external, name, timeline, context: context.clone() })
    }

    /// Makes `stream` wait, on the GPU, until the semaphore reaches `value`.
    pub fn wait_async(&self, stream: &Stream, value: u64) -> Result<()> {
        let parameters = wait_parameters(value);
        // SAFETY: one live semaphore and its parameters, both outliving the call.
        self.context.trace().call(
            "cuWaitExternalSemaphoresAsync",
            || if self.timeline { format!("{} ≥ {value}", self.name) } else { format!("{} (binary)", self.name) },
            || unsafe { sys::cuWaitExternalSemaphoresAsync(&self.external, &parameters, 1, stream.raw()) },
        )
    }

    /// Sets the semaphore to `value` when `stream` reaches this point.
    pub fn signal_async(&self, stream: &Stream, value: u64) -> Result<()> {
        let parameters = signal_parameters(value);
        // SAFETY: as in `wait_async`.
        self.context.trace().call(
            "cuSignalExternalSemaphoresAsync",
            || if self.timeline { format!("{} = {value}", self.name) } else { format!("{} (binary)", self.name) },
            || unsafe { sys::cuSignalExternalSemaphoresAsync(&self.external, &parameters, 1, stream.raw()) },
        )
    }
}

impl Drop for ImportedSemaphore {
    fn drop(&mut self) {
        // SAFETY: imported in `import`, destroyed once; streams that use it are the owner's
        // to finish first.
        if let Err(error) = self.context.trace().call("cuDestroyExternalSemaphore", String::new, || unsafe {
            sys::cuDestroyExternalSemaphore(self.external)
        }) {
            self.context.defer_error(error);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_import_descriptions_are_built_without_a_gpu() {
        // These run before any driver call, so a description that cannot be built would fail on
        // every machine: build each here.
        let memory = memory_description(7, 4096);
        assert_eq!((memory.size, memory.flags), (4096, sys::CUDA_EXTERNAL_MEMORY_DEDICATED));
        // SAFETY: the union was written through `fd`.
        assert_eq!(unsafe { memory.handle.fd }, 7);
        let semaphore = semaphore_description(9, true);
        assert_eq!(
            semaphore.type_,
            sys::CUexternalSemaphoreHandleType::CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD
        );
        let binary = semaphore_description(11, false);
        assert_eq!(binary.type_, sys::CUexternalSemaphoreHandleType::CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD);
        // SAFETY: as above.
        assert_eq!(unsafe { binary.handle.fd }, 11);
        // SAFETY: as above.
        assert_eq!(unsafe { (semaphore.handle.fd, wait_parameters(5).params.fence.value) }, (9, 5));
        assert_eq!(signal_parameters(6).params.fence.value, 6);
        let image = mipmapped_description([640, 480], sys::CUarray_format::CU_AD_FORMAT_FLOAT);
        let array = image.arrayDesc;
        assert_eq!((array.Width, array.Height, array.Depth, array.NumChannels), (640, 480, 0, 4));
        assert_eq!((array.Flags, image.numLevels), (sys::CUDA_ARRAY3D_SURFACE_LDST, 1));
    }
}
