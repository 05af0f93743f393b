//! A 2D image with device-local memory of its own and a view: what the offscreen target's
//! attachments and the sampled textures are built on. Its memory can be made exportable (a
//! dedicated allocation with `VkExportMemoryAllocateInfo`), for CUDA to import and write.
#![allow(unsafe_code)]

use std::rc::Rc;

use ash::vk;

use super::device::VulkanContext;
use super::vk_error;
use crate::error::{Error, Result};

/// A 2D image with its own device memory and a view, destroyed on drop.
pub(crate) struct Image {
    pub(crate) image: vk::Image,
    memory: vk::DeviceMemory,
    pub(crate) view: vk::ImageView,
    /// Size of the memory (what an importer is told); exportable images only.
    exported_size: Option<u64>,
    context: Rc<VulkanContext>,
}

impl Image {
    /// A 2D image of `size` in `format` for `usage`, its device-local memory bound, and a view
    /// of its `aspect`; with `exportable`, memory of its own that can be exported as an opaque
    /// file descriptor.
    pub(crate) fn new(
        context: &Rc<VulkanContext>,
        size: [u32; 2],
        format: vk::Format,
        usage: vk::ImageUsageFlags,
        aspect: vk::ImageAspectFlags,
        exportable: bool,
    ) -> Result<Self> {
        if exportable {
            context.external_memory()?;
        }
        let device = context.device();
        let handle_type = vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD;
        let mut external = vk::ExternalMemoryImageCreateInfo::default().handle_types(handle_type);
        let mut create_info = vk::ImageCreateInfo::default()
            .image_type(vk::ImageType::TYPE_2D)
            .format(format)
            .extent(vk::Extent3D { width: size[0], height: size[1], depth: 1 })
            .mip_levels(1)
            .array_layers(1)
            .samples(vk::SampleCountFlags::TYPE_1)
            .tiling(vk::ImageTiling::OPTIMAL)
            .usage(usage)
            .initial_layout(vk::ImageLayout::UNDEFINED);
        if exportable {
            create_info = create_info.push_next(&mut external);
        }
        // SAFETY: valid create info whose chain outlives the call; destroyed by `made` below.
        let image = unsafe { device.create_image(&create_info, None) }.map_err(|e| vk_error("vkCreateImage", e))?;
        let mut made = Self {
            image,
            memory: vk::DeviceMemory::null(),
            view: vk::ImageView::null(),
            exported_size: None,
            context: context.clone(),
        };
        super::live::made(super::live::Kind::Image);
        // SAFETY: a live image.
        let requirements = unsafe { device.get_image_memory_requirements(image) };
        let memory_type = context
            .memory_type(requirements.memory_type_bits, vk::MemoryPropertyFlags::DEVICE_LOCAL)
            .ok_or_else(|| Error::Unavailable("the Vulkan device has no device-local memory for images".to_owned()))?;
        let mut export = vk::ExportMemoryAllocateInfo::default().handle_types(handle_type);
        let mut dedicated = vk::MemoryDedicatedAllocateInfo::default().image(image);
        let mut allocate_info =
            vk::MemoryAllocateInfo::default().allocation_size(requirements.size).memory_type_index(memory_type);
        if exportable {
            allocate_info = allocate_info.push_next(&mut dedicated).push_next(&mut export);
            made.exported_size = Some(requirements.size);
        }
        // SAFETY: valid allocate info whose chain outlives the call; freed in Drop.
        made.memory =
            unsafe { device.allocate_memory(&allocate_info, None) }.map_err(|e| vk_error("vkAllocateMemory", e))?;
        // SAFETY: memory of the size the image asked for, bound once at offset 0.
        unsafe { device.bind_image_memory(image, made.memory, 0) }.map_err(|e| vk_error("vkBindImageMemory", e))?;
        let view_info = vk::ImageViewCreateInfo::default()
            .image(image)
            .view_type(vk::ImageViewType::TYPE_2D)
            .format(format)
            .subresource_range(subresource(aspect));
        // SAFETY: a live image with bound memory; destroyed in Drop.
        made.view =
            unsafe { device.create_image_view(&view_info, None) }.map_err(|e| vk_error("vkCreateImageView", e))?;
        Ok(made)
    }
}

impl Image {
    /// A new file descriptor for the memory, and the memory's size: what an importer needs.
    pub(crate) fn export(&self) -> Result<(std::os::fd::OwnedFd, u64)> {
        let size = self
            .exported_size
            .ok_or_else(|| Error::InvalidInput("this Vulkan image was not made exportable".to_owned()))?;
        Ok((super::memory::export_memory_fd(&self.context, self.memory)?, size))
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        super::live::dropped(super::live::Kind::Image);
        let device = self.context.device();
        // SAFETY: each handle was made in `new` (or is null, which the calls accept) and is
        // destroyed once, after the frames that used it (the owner waits for them).
        unsafe {
            device.destroy_image_view(self.view, None);
            device.destroy_image(self.image, None);
            device.free_memory(self.memory, None);
        }
    }
}

/// The one mip level and layer of an image, for `aspect`.
pub(crate) fn subresource(aspect: vk::ImageAspectFlags) -> vk::ImageSubresourceRange {
    vk::ImageSubresourceRange {
        aspect_mask: aspect,
        base_mip_level: 0,
        level_count: 1,
        base_array_layer: 0,
        layer_count: 1,
    }
}

/// A copy between a whole colour image of `size` and tightly packed rows in a buffer (top row
/// first, at offset 0).
pub(crate) fn whole_image_copy(size: [u32; 2]) -> vk::BufferImageCopy {
    vk::BufferImageCopy {
        buffer_offset: 0,
        buffer_row_length: 0,
        buffer_image_height: 0,
        image_subresource: vk::ImageSubresourceLayers {
            aspect_mask: vk::ImageAspectFlags::COLOR,
            mip_level: 0,
            base_array_layer: 0,
            layer_count: 1,
        },
        image_offset: vk::Offset3D::default(),
        image_extent: vk::Extent3D { width: size[0], height: size[1], depth: 1 },
    }
}
