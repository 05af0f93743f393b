//! The egui panel drawn with Vulkan (egui-ash-renderer) over the frame in the offscreen target,
//! before the frame is copied to the window. Texture uploads (the font atlas, mostly) go through
//! a command pool of the device's queue; a freed texture is released once no frame samples it.
#![allow(unsafe_code)]

use std::rc::Rc;

use ash::vk;
use egui_ash_renderer::{DynamicRendering, Options, RenderMode, Renderer};

use super::device::VulkanContext;
use super::frame::VulkanGraphics;
use super::pipeline::COLOR_FORMAT;
use super::vk_error;
use crate::error::{Error, Result};

/// egui's painter on a Vulkan device.
pub struct PanelPainter {
    renderer: Option<Renderer<egui_ash_renderer::allocator::DefaultAllocator>>,
    pool: vk::CommandPool,
    context: Rc<VulkanContext>,
}

fn painter_error(error: egui_ash_renderer::RendererError) -> Error {
    Error::Unavailable(format!("drawing the panel with Vulkan: {error}"))
}

impl PanelPainter {
    /// A painter for frames of `vulkan` (`frames_in_flight`: how many frames may be in flight).
    pub fn new(vulkan: &VulkanGraphics, frames_in_flight: usize) -> Result<Self> {
        let context = vulkan.context().clone();
        let (instance, physical) = context.instance_and_physical();
        let mode = RenderMode::DynamicRendering(DynamicRendering {
            color_attachment_format: COLOR_FORMAT,
            depth_attachment_format: None,
            stencil_attachment_format: None,
        });
        let options = Options {
            in_flight_frames: frames_in_flight,
            enable_depth_test: false,
            enable_depth_write: false,
            // The target is UNORM and egui's colours are already gamma-encoded.
            srgb_framebuffer: false,
        };
        let renderer = Renderer::with_default_allocator(instance, physical, context.device().clone(), mode, options)
            .map_err(painter_error)?;
        let info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(context.queue_family())
            .flags(vk::CommandPoolCreateFlags::TRANSIENT);
        // SAFETY: a valid create info; destroyed in Drop.
        let pool = unsafe { context.device().create_command_pool(&info, None) }
            .map_err(|e| vk_error("vkCreateCommandPool", e))?;
        Ok(Self { renderer: Some(renderer), pool, context })
    }

    /// Uploads what egui changed in its textures (the upload waits for the queue), and releases
    /// the ones it freed once every frame submitted so far is done. The delta is emptied either
    /// way: egui asserts (in debug builds) that no delta is dropped unapplied.
    pub fn update_textures(&mut self, vulkan: &VulkanGraphics, delta: &mut egui::TexturesDelta) -> Result<()> {
        let applied = self.apply_textures(vulkan, delta);
        delta.clear();
        applied
    }

    fn apply_textures(&mut self, vulkan: &VulkanGraphics, delta: &egui::TexturesDelta) -> Result<()> {
        let Some(renderer) = self.renderer.as_mut() else { return Ok(()) };
        for (id, images) in &delta.set {
            for image in images {
                renderer.set_texture(self.context.queue(), self.pool, *id, image).map_err(painter_error)?;
            }
        }
        if !delta.free.is_empty() {
            vulkan.wait_idle()?;
            for id in &delta.free {
                renderer.free_texture(*id).map_err(painter_error)?;
            }
        }
        Ok(())
    }

    /// Records `primitives` over the frame being recorded in `vulkan`.
    pub fn paint(
        &mut self,
        vulkan: &VulkanGraphics,
        pixels_per_point: f32,
        primitives: &[egui::ClippedPrimitive],
    ) -> Result<()> {
        let Some(renderer) = self.renderer.as_mut() else { return Ok(()) };
        let [width, height] = vulkan.target().size();
        vulkan.record_overlay(|commands| {
            renderer
                .cmd_draw(commands, vk::Extent2D { width, height }, pixels_per_point, primitives)
                .map_err(painter_error)
        })
    }
}

impl Drop for PanelPainter {
    fn drop(&mut self) {
        // The renderer frees its buffers and images without waiting: wait here first.
        // SAFETY: the device is live (this holds an Rc to it).
        if let Err(error) = unsafe { self.context.device().device_wait_idle() } {
            log::warn!("vkDeviceWaitIdle before releasing the panel's objects: {error}");
        }
        drop(self.renderer.take());
        // SAFETY: created in `new`; its command buffers were freed by the renderer after use.
        unsafe { self.context.device().destroy_command_pool(self.pool, None) };
    }
}
