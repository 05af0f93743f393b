//! Vulkan buffers with their own memory: either device memory made to be exported as a file
//! descriptor (a dedicated allocation with `VkExportMemoryAllocateInfo`, which CUDA imports with
//! `cuImportExternalMemory`), or host-visible memory mapped for the CPU (reading results back, the
//! CPU backend). A general allocator cannot do the first (gpu-allocator puts no export info in its
//! chain), and a buffer shared with CUDA wants memory of its own anyway.
#![allow(unsafe_code)]

use std::os::fd::{FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::rc::Rc;

use ash::vk;

use super::device::VulkanContext;
use super::vk_error;
use crate::error::{Error, Result};

/// Where a buffer's memory lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryKind {
    /// Device-local memory that can be exported as an opaque file descriptor.
    Exportable,
    /// Host-visible, coherent memory, mapped for the whole life of the buffer.
    HostVisible,
}

/// A buffer and its dedicated memory; both are released on drop (after the device has finished
/// with them: the owner makes sure of that, as with every Vulkan object).
pub struct Buffer {
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    bytes: usize,
    allocation_size: u64,
    kind: MemoryKind,
    mapped: Option<NonNull<u8>>,
    context: Rc<VulkanContext>,
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer").field("bytes", &self.bytes).field("kind", &self.kind).finish_non_exhaustive()
    }
}

impl Buffer {
    /// A buffer of `bytes` for `usage` (transfer source and destination are always added), its
    /// memory of `kind`.
    pub fn new(
        context: &Rc<VulkanContext>,
        bytes: usize,
        usage: vk::BufferUsageFlags,
        kind: MemoryKind,
    ) -> Result<Self> {
        if bytes == 0 {
            return Err(Error::InvalidInput("a Vulkan buffer needs at least one byte".to_owned()));
        }
        if kind == MemoryKind::Exportable {
            context.external_memory()?;
        }
        let device = context.device();
        let handle_type = vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD;
        let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(handle_type);
        let mut create_info = vk::BufferCreateInfo::default()
            .size(bytes as u64)
            .usage(usage | vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        if kind == MemoryKind::Exportable {
            create_info = create_info.push_next(&mut external);
        }
        // SAFETY: valid create info; the buffer is destroyed by the guard below or in Drop.
        let buffer = unsafe { device.create_buffer(&create_info, None) }.map_err(|e| vk_error("vkCreateBuffer", e))?;
        let destroy_buffer = crate::guard::Guard::new(buffer, |buffer| {
            // SAFETY: created above, unused, destroyed once.
            unsafe { device.destroy_buffer(buffer, None) }
        });

        // SAFETY: a live buffer of this device.
        let requirements = unsafe { device.get_buffer_memory_requirements(buffer) };
        let flags = match kind {
            MemoryKind::Exportable => vk::MemoryPropertyFlags::DEVICE_LOCAL,
            MemoryKind::HostVisible => vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT,
        };
        let memory_type = context.memory_type(requirements.memory_type_bits, flags).ok_or_else(|| {
            let wanted = match kind {
                MemoryKind::Exportable => "device-local",
                MemoryKind::HostVisible => "host-visible, coherent",
            };
            Error::Unavailable(format!(
                "Vulkan device {} has no {wanted} memory for buffers",
                context.description().name
            ))
        })?;
        let mut export = vk::ExportMemoryAllocateInfo::default().handle_types(handle_type);
        let mut dedicated = vk::MemoryDedicatedAllocateInfo::default().buffer(buffer);
        let mut allocate_info = vk::MemoryAllocateInfo::default()
            .allocation_size(requirements.size)
            .memory_type_index(memory_type)
            .push_next(&mut dedicated);
        if kind == MemoryKind::Exportable {
            allocate_info = allocate_info.push_next(&mut export);
        }
        // SAFETY: valid allocate info whose chain outlives the call; freed in Drop.
        let memory = unsafe { device.allocate_memory(&allocate_info, None) }.map_err(|e| {
            if matches!(e, vk::Result::ERROR_OUT_OF_DEVICE_MEMORY | vk::Result::ERROR_OUT_OF_HOST_MEMORY) {
                Error::Vulkan {
                    call: "vkAllocateMemory",
                    result: format!("{e} ({bytes} bytes)"),
                    hint: Some("not enough memory: use fewer or smaller buffers"),
                }
            } else {
                vk_error("vkAllocateMemory", e)
            }
        })?;
        let buffer = destroy_buffer.keep();
        let mut made = Self {
            buffer,
            memory,
            bytes,
            allocation_size: requirements.size,
            kind,
            mapped: None,
            context: context.clone(),
        };
        super::live::made(super::live::Kind::Buffer);
        // SAFETY: memory of the size the buffer asked for, bound once at offset 0.
        unsafe { device.bind_buffer_memory(buffer, memory, 0) }.map_err(|e| vk_error("vkBindBufferMemory", e))?;
        if kind == MemoryKind::HostVisible {
            // SAFETY: host-visible memory, mapped whole once; unmapped implicitly when freed.
            let pointer = unsafe { device.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) }
                .map_err(|e| vk_error("vkMapMemory", e))?;
            made.mapped = NonNull::new(pointer.cast());
        }
        Ok(made)
    }

    /// The Vulkan handle, for commands.
    pub fn raw(&self) -> vk::Buffer {
        self.buffer
    }

    /// Size in bytes, as asked for.
    pub fn len(&self) -> usize {
        self.bytes
    }

    /// Whether the buffer holds no bytes (never: creation refuses that).
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// Size of the memory behind it (at least [`Self::len`]): what an importer must be told.
    pub fn allocation_size(&self) -> u64 {
        self.allocation_size
    }

    /// A new file descriptor for the memory (`vkGetMemoryFdKHR`); the importer takes it over.
    pub fn export_fd(&self) -> Result<OwnedFd> {
        if self.kind != MemoryKind::Exportable {
            return Err(Error::InvalidInput("only exportable Vulkan memory can be exported".to_owned()));
        }
        export_memory_fd(&self.context, self.memory)
    }

    /// The bytes of host-visible memory (coherent: what the device wrote before a completed wait).
    pub fn host_bytes(&self) -> Option<&[u8]> {
        // SAFETY: a mapping of `bytes` bytes that lives as long as `self`.
        self.mapped.map(|p| unsafe { std::slice::from_raw_parts(p.as_ptr(), self.bytes) })
    }

    /// The bytes of host-visible memory, to write (the device must not be using them).
    pub fn host_bytes_mut(&mut self) -> Option<&mut [u8]> {
        // SAFETY: as above; `&mut self` makes this the only view.
        self.mapped.map(|p| unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), self.bytes) })
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        super::live::dropped(super::live::Kind::Buffer);
        let device = self.context.device();
        // SAFETY: created in `new`, destroyed once; the owner has waited for the device to finish
        // with it (the device context also waits for idle before it goes).
        unsafe {
            device.destroy_buffer(self.buffer, None);
            device.free_memory(self.memory, None);
        }
    }
}

/// `vkGetMemoryFdKHR` for memory allocated exportable as an opaque file descriptor: a new
/// descriptor, which the importer takes over.
pub(crate) fn export_memory_fd(context: &VulkanContext, memory: vk::DeviceMemory) -> Result<OwnedFd> {
    let info =
        vk::MemoryGetFdInfoKHR::default().memory(memory).handle_type(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD);
    // SAFETY: memory allocated with this export type; the new descriptor is owned below.
    let fd = unsafe { context.external_memory()?.get_memory_fd(&info) }.map_err(|e| vk_error("vkGetMemoryFdKHR", e))?;
    // SAFETY: a fresh descriptor the call gave to us and to no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
