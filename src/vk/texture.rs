//! Sampled images: a 2D image the fragment shader reads, filled from a buffer by a copy on the
//! queue (`vkCmdCopyBufferToImage`), with its own device memory, view and two samplers (nearest
//! for zooming in, linear for zooming out where the format can be filtered). A *shared* texture's
//! memory is exportable, for CUDA to import and write through a surface: it stays in the GENERAL
//! layout, which both APIs can use without a transition Vulkan would have to record.
#![allow(unsafe_code)]

use std::cell::Cell;
use std::rc::Rc;

use ash::vk;

use super::device::VulkanContext;
use super::image::{Image, subresource};
use super::vk_error;
use crate::error::{Error, Result};
use crate::pixel::PixelFormat;

/// A sampled 2D image; everything is destroyed on drop (after the frames that use it: the owner
/// waits for them).
pub struct Texture {
    nearest: vk::Sampler,
    linear: vk::Sampler,
    size: [u32; 2],
    format: PixelFormat,
    /// Layout after the last recorded command (commands run in the order they are recorded).
    layout: Cell<vk::ImageLayout>,
    /// The layout shaders sample it in: GENERAL for a shared texture.
    sampled_layout: vk::ImageLayout,
    // Dropped after the samplers (destroyed in Drop).
    image: Image,
    context: Rc<VulkanContext>,
}

fn vk_format(format: PixelFormat) -> vk::Format {
    match format {
        PixelFormat::Rgba8 => vk::Format::R8G8B8A8_UNORM,
        PixelFormat::Rgba32f => vk::Format::R32G32B32A32_SFLOAT,
    }
}

impl Texture {
    /// An image of `size` pixels in `format` (contents undefined until the first upload).
    pub fn new(context: &Rc<VulkanContext>, size: [u32; 2], format: PixelFormat) -> Result<Self> {
        Self::make(context, size, format, false)
    }

    /// As [`Self::new`], with exportable memory another API (CUDA) imports and writes.
    pub fn shared(context: &Rc<VulkanContext>, size: [u32; 2], format: PixelFormat) -> Result<Self> {
        Self::make(context, size, format, true)
    }

    fn make(context: &Rc<VulkanContext>, size: [u32; 2], format: PixelFormat, shared: bool) -> Result<Self> {
        let largest = context.max_image_size();
        if size[0] == 0 || size[1] == 0 || size[0] > largest || size[1] > largest {
            return Err(Error::InvalidInput(format!(
                "a {}x{} image does not fit Vulkan device {} (1 to {largest} pixels a side)",
                size[0],
                size[1],
                context.description().name
            )));
        }
        let device = context.device();
        let mut usage = vk::ImageUsageFlags::SAMPLED | vk::ImageUsageFlags::TRANSFER_DST;
        if shared {
            // CUDA's surface loads and stores are storage-image access.
            usage |= vk::ImageUsageFlags::STORAGE | vk::ImageUsageFlags::TRANSFER_SRC;
        }
        let image = Image::new(context, size, vk_format(format), usage, vk::ImageAspectFlags::COLOR, shared)?;
        let mut made = Self {
            nearest: vk::Sampler::null(),
            linear: vk::Sampler::null(),
            size,
            format,
            layout: Cell::new(vk::ImageLayout::UNDEFINED),
            sampled_layout: if shared { vk::ImageLayout::GENERAL } else { vk::ImageLayout::SHADER_READ_ONLY_OPTIMAL },
            image,
            context: context.clone(),
        };
        let filterable = context.can_filter_linearly(vk_format(format));
        for (filter, slot) in [(vk::Filter::NEAREST, &mut made.nearest), (vk::Filter::LINEAR, &mut made.linear)] {
            let filter = if filterable { filter } else { vk::Filter::NEAREST };
            let sampler_info = vk::SamplerCreateInfo::default()
                .mag_filter(filter)
                .min_filter(filter)
                .address_mode_u(vk::SamplerAddressMode::CLAMP_TO_EDGE)
                .address_mode_v(vk::SamplerAddressMode::CLAMP_TO_EDGE)
                .address_mode_w(vk::SamplerAddressMode::CLAMP_TO_EDGE);
            // SAFETY: valid create info; destroyed in Drop.
            *slot =
                unsafe { device.create_sampler(&sampler_info, None) }.map_err(|e| vk_error("vkCreateSampler", e))?;
        }
        Ok(made)
    }

    /// Bytes of the whole image (rows top first, tightly packed).
    pub fn bytes(&self) -> usize {
        self.size[0] as usize * self.size[1] as usize * self.format.bytes_per_pixel()
    }

    /// The image's descriptor, then its sampler's (`nearest`, or linear filtering).
    pub(crate) fn descriptors(&self, nearest: bool) -> [vk::DescriptorImageInfo; 2] {
        let image = vk::DescriptorImageInfo {
            sampler: vk::Sampler::null(),
            image_view: self.image.view,
            image_layout: self.sampled_layout,
        };
        let sampler = vk::DescriptorImageInfo {
            sampler: if nearest { self.nearest } else { self.linear },
            image_view: vk::ImageView::null(),
            image_layout: vk::ImageLayout::UNDEFINED,
        };
        [image, sampler]
    }

    /// Size in pixels.
    pub fn size(&self) -> [u32; 2] {
        self.size
    }

    /// A shared texture's memory: a new file descriptor and the allocation's size, for CUDA's
    /// import (an error for a texture not made with [`Self::shared`]).
    pub fn export(&self) -> Result<(std::os::fd::OwnedFd, u64)> {
        self.image.export()
    }

    /// An identity for caches: equal for the same texture while it lives.
    pub fn id(&self) -> u64 {
        vk::Handle::as_raw(self.image.view)
    }

    /// The image, for commands recorded inside `vk/`.
    pub(crate) fn raw_image(&self) -> vk::Image {
        self.image.image
    }

    /// The layout shaders sample it in.
    pub(crate) fn sampled_layout(&self) -> vk::ImageLayout {
        self.sampled_layout
    }

    /// A barrier from the tracked layout to `layout` (and the tracked layout updated), making the
    /// `before` accesses available to the `after` ones (each must suit its side's stages). The
    /// barrier must be recorded, in the order barriers are made.
    pub(crate) fn barrier(
        &self,
        layout: vk::ImageLayout,
        before: vk::AccessFlags,
        after: vk::AccessFlags,
    ) -> vk::ImageMemoryBarrier<'static> {
        let old = self.layout.replace(layout);
        vk::ImageMemoryBarrier::default()
            .old_layout(old)
            .new_layout(layout)
            .src_access_mask(before)
            .dst_access_mask(after)
            .image(self.image.image)
            .subresource_range(subresource(vk::ImageAspectFlags::COLOR))
    }
}

impl Drop for Texture {
    fn drop(&mut self) {
        let device = self.context.device();
        // SAFETY: each sampler was made in `new` (or is null, which the call accepts) and is
        // destroyed once, after the frames that used it (the owner waits for them); the image
        // goes with its own Drop.
        unsafe {
            device.destroy_sampler(self.nearest, None);
            device.destroy_sampler(self.linear, None);
        }
    }
}
