//! Device memory another API can import: allocated with the virtual-memory API (`cuMemCreate`
//! with a POSIX file-descriptor handle type), mapped at an address kernels use, and exported as a
//! file descriptor (`cuMemExportToShareableHandle`) that GL's `GL_EXT_memory_object_fd` imports.
//! Once imported, CUDA and GL see the same bytes with no map or unmap at all.
#![allow(unsafe_code)]

use std::rc::Rc;

use cudarc::driver::sys;

use super::context::Context;
use super::memory::DeviceSpan;
use crate::error::{Error, Result};

/// Exportable device memory, mapped for CUDA: `cuMemCreate` with a file-descriptor handle type,
/// `cuMemAddressReserve`, `cuMemMap`, `cuMemSetAccess`; GL builds its buffer on the descriptor
/// `cuMemExportToShareableHandle` gives. Unmapped, unreserved and released on drop.
pub struct ExportableMemory {
    handle: sys::CUmemGenericAllocationHandle,
    ptr: sys::CUdeviceptr,
    size: usize,
    bytes: usize,
    context: Rc<Context>,
}

fn allocation_properties(ordinal: i32) -> sys::CUmemAllocationProp {
    // SAFETY: plain C struct; all-zero is a valid value for every field (null pointer, zero flags).
    let mut properties: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    properties.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    properties.requestedHandleTypes = sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    properties.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    properties.location.id = ordinal;
    properties
}

impl ExportableMemory {
    /// Allocates at least `bytes` of exportable memory on the context's device, rounded up to the
    /// allocation granularity, and maps it read-write for the device.
    pub fn new(context: &Rc<Context>, bytes: usize) -> Result<Self> {
        let device = context.device();
        if !device.posix_fd_export {
            return Err(Error::Unavailable(format!(
                "{} cannot export memory as a file descriptor (CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED is 0)",
                device.name
            )));
        }
        let properties = allocation_properties(device.ordinal);
        let trace = context.trace();
        let mut granularity = 0usize;
        // SAFETY: valid out-pointer and property struct.
        trace.call("cuMemGetAllocationGranularity", String::new, || unsafe {
            sys::cuMemGetAllocationGranularity(
                &mut granularity,
                &properties,
                sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
            )
        })?;
        let size = bytes.max(1).div_ceil(granularity.max(1)) * granularity.max(1);
        let mut handle = 0;
        // SAFETY: valid out-pointer and properties; size is a multiple of the granularity.
        trace.call(
            "cuMemCreate",
            || format!("{size} bytes, POSIX fd handle"),
            || unsafe { sys::cuMemCreate(&mut handle, size, &properties, 0) },
        )?;
        let mut ptr = 0;
        // SAFETY: reserves a fresh virtual range of `size` bytes.
        let reserved = trace.call(
            "cuMemAddressReserve",
            || format!("{size} bytes"),
            || unsafe { sys::cuMemAddressReserve(&mut ptr, size, 0, 0, 0) },
        );
        if let Err(error) = reserved {
            // SAFETY: the handle was created above and is released once.
            let _ = unsafe { sys::cuMemRelease(handle) };
            return Err(error);
        }
        let memory = Self { handle, ptr, size, bytes, context: context.clone() };
        // SAFETY: maps the whole allocation at the reserved range (same size, offset 0).
        trace.call("cuMemMap", || format!("{size} bytes"), || unsafe { sys::cuMemMap(ptr, size, 0, handle, 0) })?;
        let access = sys::CUmemAccessDesc {
            location: properties.location,
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        // SAFETY: the range is mapped; one access descriptor.
        trace.call(
            "cuMemSetAccess",
            || "read-write for the device".to_owned(),
            || unsafe { sys::cuMemSetAccess(ptr, size, &access, 1) },
        )?;
        Ok(memory)
    }

    /// The mapped range kernels write (the requested size, not the rounded one).
    pub fn span(&self) -> DeviceSpan {
        DeviceSpan { ptr: self.ptr, bytes: self.bytes }
    }

    /// Size of the allocation (rounded up to the granularity): what the importer must be told.
    pub fn allocation_size(&self) -> usize {
        self.size
    }

    /// A new file descriptor for the allocation; the importer takes ownership of it.
    pub fn export_fd(&self) -> Result<i32> {
        let mut fd: i32 = -1;
        // SAFETY: for the POSIX handle type the shareable handle is an int written through the pointer.
        self.context.trace().call(
            "cuMemExportToShareableHandle",
            || "POSIX file descriptor".to_owned(),
            || unsafe {
                sys::cuMemExportToShareableHandle(
                    (&mut fd as *mut i32).cast(),
                    self.handle,
                    sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                    0,
                )
            },
        )?;
        Ok(fd)
    }
}

impl Drop for ExportableMemory {
    fn drop(&mut self) {
        let trace = self.context.trace();
        // SAFETY: the range was mapped, reserved and created in `new`; each is undone once, in order.
        let results = [
            trace.call("cuMemUnmap", String::new, || unsafe { sys::cuMemUnmap(self.ptr, self.size) }),
            trace.call("cuMemAddressFree", String::new, || unsafe { sys::cuMemAddressFree(self.ptr, self.size) }),
            trace.call("cuMemRelease", String::new, || unsafe { sys::cuMemRelease(self.handle) }),
        ];
        for error in results.into_iter().filter_map(|r| r.err()) {
            self.context.defer_error(error);
        }
    }
}
