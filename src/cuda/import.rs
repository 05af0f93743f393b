//! What CUDA imports from another API (Vulkan): memory, as an opaque file descriptor mapped to a
//! device pointer kernels write (`cuImportExternalMemory`, `cuExternalMemoryGetMappedBuffer`), and
//! timeline semaphores a stream waits on and signals without the host (`cuImportExternalSemaphore`,
//! `cuWaitExternalSemaphoresAsync`, `cuSignalExternalSemaphoresAsync`). Importing takes the file
//! descriptor over; each object is released on drop.
#![allow(unsafe_code)]

use std::os::fd::{IntoRawFd, OwnedFd};
use std::rc::Rc;

use cudarc::driver::sys;

use super::context::Context;
use super::memory::DeviceSpan;
use super::stream::Stream;
use crate::Result;

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
        // SAFETY: plain C struct; all-zero is valid for every field.
        let mut description: sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC = unsafe { std::mem::zeroed() };
        description.type_ = sys::CUexternalMemoryHandleType::CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD;
        description.size = allocation_size;
        description.flags = sys::CUDA_EXTERNAL_MEMORY_DEDICATED;
        let raw = fd.into_raw_fd();
        description.handle.fd = raw;
        let trace = context.trace();
        let mut external = std::ptr::null_mut();
        // SAFETY: a valid description; on success the driver owns `raw`.
        let imported = trace.call(
            "cuImportExternalMemory",
            || format!("opaque fd, {allocation_size} bytes, dedicated"),
            || unsafe { sys::cuImportExternalMemory(&mut external, &description) },
        );
        if let Err(error) = imported {
            // SAFETY: the import failed, so the descriptor is still ours; closed once.
            drop(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) });
            return Err(error);
        }
        let mut memory = Self { external, ptr: 0, bytes, context: context.clone() };
        // SAFETY: plain C struct; all-zero is valid.
        let mut buffer: sys::CUDA_EXTERNAL_MEMORY_BUFFER_DESC = unsafe { std::mem::zeroed() };
        buffer.offset = 0;
        buffer.size = bytes as u64;
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
        if let Err(error) = trace
            .call("cuDestroyExternalMemory", String::new, || unsafe { sys::cuDestroyExternalMemory(self.external) })
        {
            self.context.defer_error(error);
        }
    }
}

/// A timeline semaphore another API made, that CUDA streams wait on and signal.
pub struct ImportedSemaphore {
    external: sys::CUexternalSemaphore,
    context: Rc<Context>,
}

impl ImportedSemaphore {
    /// Imports `fd`, an opaque file descriptor of a timeline semaphore. CUDA owns the descriptor
    /// once the import succeeds; on failure it is closed here.
    pub fn new_timeline(context: &Rc<Context>, fd: OwnedFd) -> Result<Self> {
        // SAFETY: plain C struct; all-zero is valid for every field.
        let mut description: sys::CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC = unsafe { std::mem::zeroed() };
        description.type_ = sys::CUexternalSemaphoreHandleType::CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD;
        let raw = fd.into_raw_fd();
        description.handle.fd = raw;
        let mut external = std::ptr::null_mut();
        // SAFETY: a valid description; on success the driver owns `raw`.
        let imported = context.trace().call(
            "cuImportExternalSemaphore",
            || "timeline semaphore, opaque fd".to_owned(),
            || unsafe { sys::cuImportExternalSemaphore(&mut external, &description) },
        );
        if let Err(error) = imported {
            // SAFETY: the import failed, so the descriptor is still ours; closed once.
            drop(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) });
            return Err(error);
        }
        Ok(Self { external, context: context.clone() })
    }

    /// Makes `stream` wait, on the GPU, until the semaphore reaches `value`.
    pub fn wait_async(&self, stream: &Stream, value: u64) -> Result<()> {
        // SAFETY: plain C struct; all-zero is valid.
        let mut parameters: sys::CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS = unsafe { std::mem::zeroed() };
        parameters.params.fence.value = value;
        // SAFETY: one live semaphore and its parameters, both outliving the call.
        self.context.trace().call(
            "cuWaitExternalSemaphoresAsync",
            || format!("timeline ≥ {value}"),
            || unsafe { sys::cuWaitExternalSemaphoresAsync(&self.external, &parameters, 1, stream.raw()) },
        )
    }

    /// Sets the semaphore to `value` when `stream` reaches this point.
    pub fn signal_async(&self, stream: &Stream, value: u64) -> Result<()> {
        // SAFETY: plain C struct; all-zero is valid.
        let mut parameters: sys::CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS = unsafe { std::mem::zeroed() };
        parameters.params.fence.value = value;
        // SAFETY: as in `wait_async`.
        self.context.trace().call(
            "cuSignalExternalSemaphoresAsync",
            || format!("timeline = {value}"),
            || unsafe { sys::cuSignalExternalSemaphoresAsync(&self.external, &parameters, 1, stream.raw()) },
        )
    }
}

impl Drop for ImportedSemaphore {
    fn drop(&mut self) {
        // SAFETY: imported in `new_timeline`, destroyed once; streams that use it are the owner's
        // to finish first.
        if let Err(error) = self.context.trace().call("cuDestroyExternalSemaphore", String::new, || unsafe {
            sys::cuDestroyExternalSemaphore(self.external)
        }) {
            self.context.defer_error(error);
        }
    }
}
