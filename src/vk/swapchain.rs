//! Presenting to a window: the swapchain of the device's window surface. A frame is drawn into
//! the offscreen target as headless, then copied (blitted) into the swapchain image it acquired
//! and presented. Two binary semaphores per frame carry the order: the image is ready (acquire →
//! the frame's copy) and the frame is drawn (the frame's submission → present).
#![allow(unsafe_code)]

use std::rc::Rc;

use ash::vk;

use super::commands::Recorder;
use super::device::VulkanContext;
use super::image::subresource;
use super::vk_error;
use crate::error::{Error, Result};

/// Acquire semaphores in turn: one per frame the host may record ahead.
const ACQUIRE_SLOTS: usize = 4;

/// An image acquired for this frame.
#[derive(Debug, Clone, Copy)]
pub struct Acquired {
    /// Index of the swapchain image.
    pub index: u32,
    /// Signalled when the image may be written.
    pub(crate) ready: vk::Semaphore,
    /// To be signalled by the frame's submission; present waits for it.
    pub(crate) drawn: vk::Semaphore,
}

/// The swapchain, recreated when the window's size changes.
pub struct Swapchain {
    swapchain: vk::SwapchainKHR,
    images: Vec<vk::Image>,
    extent: vk::Extent2D,
    format: vk::Format,
    vsync: bool,
    /// Image-ready semaphores, used in turn.
    ready: Vec<vk::Semaphore>,
    next_ready: usize,
    /// Frame-drawn semaphores, one per image (an image is not acquired again before its present).
    drawn: Vec<vk::Semaphore>,
    context: Rc<VulkanContext>,
}

impl Swapchain {
    /// A swapchain for the window the device was opened with, of `size` pixels (the surface's
    /// own size where it has one). `vsync` waits for vertical blank (FIFO); off, it takes
    /// MAILBOX or IMMEDIATE when the surface offers them.
    pub fn new(context: &Rc<VulkanContext>, size: [u32; 2], vsync: bool) -> Result<Self> {
        let mut swapchain = Self {
            swapchain: vk::SwapchainKHR::null(),
            images: Vec::new(),
            extent: vk::Extent2D::default(),
            format: vk::Format::UNDEFINED,
            vsync,
            ready: Vec::new(),
            next_ready: 0,
            drawn: Vec::new(),
            context: context.clone(),
        };
        for _ in 0..ACQUIRE_SLOTS {
            let semaphore = swapchain.binary_semaphore()?;
            swapchain.ready.push(semaphore);
        }
        swapchain.recreate(size)?;
        Ok(swapchain)
    }

    /// Whether presenting waits for vertical blank.
    pub fn vsync(&self) -> bool {
        self.vsync
    }

    /// Waits for vertical blank (FIFO) or not, from the next [`Self::recreate`] on.
    pub fn set_vsync(&mut self, on: bool) {
        self.vsync = on;
    }

    /// The image size in pixels.
    pub fn size(&self) -> [u32; 2] {
        [self.extent.width, self.extent.height]
    }

    fn binary_semaphore(&self) -> Result<vk::Semaphore> {
        // SAFETY: a plain binary semaphore, destroyed in Drop.
        unsafe { self.context.device().create_semaphore(&vk::SemaphoreCreateInfo::default(), None) }
            .map_err(|e| vk_error("vkCreateSemaphore", e))
    }

    /// Makes the swapchain again for `size` (after a resize, or when presenting said it is out of
    /// date). Waits for the device first: the old images may still be in use.
    pub fn recreate(&mut self, size: [u32; 2]) -> Result<()> {
        let window = self.context.window()?;
        let (_, physical) = self.context.instance_and_physical();
        // SAFETY: a live surface of this device's instance.
        let capabilities =
            unsafe { window.surfaces.get_physical_device_surface_capabilities(physical, window.surface) }
                .map_err(|e| cannot_present(&self.context, "vkGetPhysicalDeviceSurfaceCapabilitiesKHR", e))?;
        // SAFETY: as above.
        let formats = unsafe { window.surfaces.get_physical_device_surface_formats(physical, window.surface) }
            .map_err(|e| cannot_present(&self.context, "vkGetPhysicalDeviceSurfaceFormatsKHR", e))?;
        // SAFETY: as above.
        let modes = unsafe { window.surfaces.get_physical_device_surface_present_modes(physical, window.surface) }
            .map_err(|e| cannot_present(&self.context, "vkGetPhysicalDeviceSurfacePresentModesKHR", e))?;
        // UNORM like the offscreen target, so the copy changes no colour.
        let format = [vk::Format::B8G8R8A8_UNORM, vk::Format::R8G8B8A8_UNORM]
            .into_iter()
            .find_map(|wanted| formats.iter().find(|f| f.format == wanted))
            .or(formats.first())
            .copied()
            .ok_or_else(|| Error::Unavailable("the window's surface offers no image format".to_owned()))?;
        let mode = if self.vsync {
            vk::PresentModeKHR::FIFO
        } else {
            [vk::PresentModeKHR::MAILBOX, vk::PresentModeKHR::IMMEDIATE]
                .into_iter()
                .find(|m| modes.contains(m))
                .unwrap_or(vk::PresentModeKHR::FIFO)
        };
        let extent = if capabilities.current_extent.width != u32::MAX {
            capabilities.current_extent
        } else {
            vk::Extent2D {
                width: size[0].clamp(capabilities.min_image_extent.width, capabilities.max_image_extent.width),
                height: size[1].clamp(capabilities.min_image_extent.height, capabilities.max_image_extent.height),
            }
        };
        if extent.width == 0 || extent.height == 0 {
            return Err(Error::InvalidInput("the window has no pixels (minimised)".to_owned()));
        }
        if !capabilities.supported_usage_flags.contains(vk::ImageUsageFlags::TRANSFER_DST) {
            return Err(Error::Unavailable(
                "the window's surface cannot be copied into (no TRANSFER_DST usage): use --renderer gl".to_owned(),
            ));
        }
        let mut count = capabilities.min_image_count + 1;
        if capabilities.max_image_count > 0 {
            count = count.min(capabilities.max_image_count);
        }
        let create_info = vk::SwapchainCreateInfoKHR::default()
            .surface(window.surface)
            .min_image_count(count)
            .image_format(format.format)
            .image_color_space(format.color_space)
            .image_extent(extent)
            .image_array_layers(1)
            .image_usage(vk::ImageUsageFlags::TRANSFER_DST | vk::ImageUsageFlags::COLOR_ATTACHMENT)
            .image_sharing_mode(vk::SharingMode::EXCLUSIVE)
            .pre_transform(capabilities.current_transform)
            .composite_alpha(vk::CompositeAlphaFlagsKHR::OPAQUE)
            .present_mode(mode)
            .clipped(true)
            .old_swapchain(self.swapchain);
        // SAFETY: nothing runs on the device while the swapchain changes.
        unsafe { self.context.device().device_wait_idle() }.map_err(|e| vk_error("vkDeviceWaitIdle", e))?;
        // SAFETY: valid create info; the old swapchain (retired by it) is destroyed below.
        let swapchain = unsafe { window.swapchains.create_swapchain(&create_info, None) }
            .map_err(|e| vk_error("vkCreateSwapchainKHR", e))?;
        if self.swapchain != vk::SwapchainKHR::null() {
            // SAFETY: retired, and the device is idle.
            unsafe { window.swapchains.destroy_swapchain(self.swapchain, None) };
        }
        self.swapchain = swapchain;
        // SAFETY: a live swapchain.
        self.images = unsafe { window.swapchains.get_swapchain_images(swapchain) }
            .map_err(|e| vk_error("vkGetSwapchainImagesKHR", e))?;
        while self.drawn.len() < self.images.len() {
            let semaphore = self.binary_semaphore()?;
            self.drawn.push(semaphore);
        }
        self.extent = extent;
        self.format = format.format;
        let mode_name = match mode {
            vk::PresentModeKHR::FIFO => "FIFO (vsync)",
            vk::PresentModeKHR::MAILBOX => "MAILBOX",
            vk::PresentModeKHR::IMMEDIATE => "IMMEDIATE",
            _ => "other",
        };
        log::debug!(
            "Vulkan swapchain: {} images of {}x{}, format {}, present mode {mode_name}",
            self.images.len(),
            extent.width,
            extent.height,
            format.format.as_raw()
        );
        Ok(())
    }

    /// Acquires the next image (waits on the host for one to be free: with vsync, the display's
    /// pace). `None`: the swapchain no longer fits the window; recreate it.
    pub fn acquire(&mut self) -> Result<Option<Acquired>> {
        let window = self.context.window()?;
        let ready = self.ready[self.next_ready];
        // SAFETY: a live swapchain and an unsignalled semaphore (the last frame that used this slot
        // has waited on it).
        let acquired =
            unsafe { window.swapchains.acquire_next_image(self.swapchain, u64::MAX, ready, vk::Fence::null()) };
        match acquired {
            Ok((index, _suboptimal)) => {
                self.next_ready = (self.next_ready + 1) % self.ready.len();
                Ok(Some(Acquired { index, ready, drawn: self.drawn[index as usize] }))
            }
            Err(vk::Result::ERROR_OUT_OF_DATE_KHR) => Ok(None),
            Err(error) => Err(vk_error("vkAcquireNextImageKHR", error)),
        }
    }

    /// Records the copy of `source` (`source_size` pixels, in TRANSFER_SRC layout) into the
    /// acquired image, leaving it ready to present.
    pub(crate) fn record_copy(
        &self,
        recorder: &Recorder<'_>,
        source: vk::Image,
        source_size: [u32; 2],
        acquired: &Acquired,
    ) -> Result<()> {
        let image = *self
            .images
            .get(acquired.index as usize)
            .ok_or_else(|| Error::InvalidInput(format!("no swapchain image {}", acquired.index)))?;
        let (device, commands) = recorder.raw();
        let to_transfer = vk::ImageMemoryBarrier::default()
            .old_layout(vk::ImageLayout::UNDEFINED)
            .new_layout(vk::ImageLayout::TRANSFER_DST_OPTIMAL)
            .dst_access_mask(vk::AccessFlags::TRANSFER_WRITE)
            .image(image)
            .subresource_range(subresource(vk::ImageAspectFlags::COLOR));
        let to_present = vk::ImageMemoryBarrier::default()
            .old_layout(vk::ImageLayout::TRANSFER_DST_OPTIMAL)
            .new_layout(vk::ImageLayout::PRESENT_SRC_KHR)
            .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
            .image(image)
            .subresource_range(subresource(vk::ImageAspectFlags::COLOR));
        let layers = vk::ImageSubresourceLayers::default().aspect_mask(vk::ImageAspectFlags::COLOR).layer_count(1);
        let corner = |size: [u32; 2]| vk::Offset3D { x: size[0] as i32, y: size[1] as i32, z: 1 };
        let blit = vk::ImageBlit::default()
            .src_subresource(layers)
            .src_offsets([vk::Offset3D::default(), corner(source_size)])
            .dst_subresource(layers)
            .dst_offsets([vk::Offset3D::default(), corner(self.size())]);
        // SAFETY: a recording command buffer; both images live; layouts as the barriers say.
        unsafe {
            device.cmd_pipeline_barrier(
                commands,
                vk::PipelineStageFlags::TRANSFER,
                vk::PipelineStageFlags::TRANSFER,
                vk::DependencyFlags::empty(),
                &[],
                &[],
                &[to_transfer],
            );
            device.cmd_blit_image(
                commands,
                source,
                vk::ImageLayout::TRANSFER_SRC_OPTIMAL,
                image,
                vk::ImageLayout::TRANSFER_DST_OPTIMAL,
                &[blit],
                vk::Filter::NEAREST,
            );
            device.cmd_pipeline_barrier(
                commands,
                vk::PipelineStageFlags::TRANSFER,
                vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                vk::DependencyFlags::empty(),
                &[],
                &[],
                &[to_present],
            );
        }
        Ok(())
    }

    /// Presents the acquired image once its frame is drawn. `Ok(false)`: the swapchain no longer
    /// fits the window; recreate it.
    pub fn present(&mut self, acquired: &Acquired) -> Result<bool> {
        let window = self.context.window()?;
        let waits = [acquired.drawn];
        let swapchains = [self.swapchain];
        let indices = [acquired.index];
        let info =
            vk::PresentInfoKHR::default().wait_semaphores(&waits).swapchains(&swapchains).image_indices(&indices);
        // SAFETY: an image acquired from this swapchain, its frame submitted to signal `drawn`.
        match unsafe { window.swapchains.queue_present(self.context.queue(), &info) } {
            Ok(suboptimal) => Ok(!suboptimal),
            Err(vk::Result::ERROR_OUT_OF_DATE_KHR) => Ok(false),
            Err(error) => Err(vk_error("vkQueuePresentKHR", error)),
        }
    }
}

/// A surface query that failed: the device cannot present to this window.
fn cannot_present(context: &VulkanContext, call: &str, error: vk::Result) -> Error {
    Error::Unavailable(format!(
        "Vulkan device {} cannot present to this window ({call}: {error}); a display served by software (Xvfb) or \
         by another GPU does this: run on a display of this GPU, or use --renderer gl",
        context.description().name
    ))
}

impl Drop for Swapchain {
    fn drop(&mut self) {
        let device = self.context.device();
        // SAFETY: waited idle first, so no frame uses the images or semaphores; each destroyed once.
        unsafe {
            if let Err(error) = device.device_wait_idle() {
                log::warn!("vkDeviceWaitIdle before destroying the swapchain: {error}");
            }
            if let Ok(window) = self.context.window()
                && self.swapchain != vk::SwapchainKHR::null()
            {
                window.swapchains.destroy_swapchain(self.swapchain, None);
            }
            for &semaphore in self.ready.iter().chain(&self.drawn) {
                device.destroy_semaphore(semaphore, None);
            }
        }
    }
}
