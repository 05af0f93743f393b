//! An offscreen colour + depth target drawn into with dynamic rendering, and read back as RGBA8
//! rows (top row first, like the GL framebuffer's `read_rgba`). Rectangles come in GL's
//! convention (origin at the lower left), and the viewport is flipped, so a scene drawn with the
//! same matrices lands on the same pixels as with GL.
#![allow(unsafe_code)]

use std::cell::Cell;
use std::rc::Rc;

use ash::vk;

use super::commands::{CommandRing, Recorder};
use super::device::VulkanContext;
use super::image::{Image, subresource, whole_image_copy};
use super::memory::{Buffer, MemoryKind};
use super::pipeline::{COLOR_FORMAT, DEPTH_FORMAT};
use crate::error::{Error, Result};

/// A rectangle in GL's convention: `origin` is its lower-left corner, in pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rect {
    /// Lower-left corner.
    pub origin: [u32; 2],
    /// Width and height.
    pub size: [u32; 2],
}

/// Colour and depth images of one size, and host memory to read the colour back into.
pub struct OffscreenTarget {
    // Drop order: the images and the buffer before the device they hold.
    color: Image,
    depth: Image,
    readback: Buffer,
    size: [u32; 2],
    /// The colour image's layout after the last recorded command (commands are submitted in the
    /// order they are recorded, so this is the layout the next one finds).
    color_layout: Cell<vk::ImageLayout>,
    /// The frame's clear colour, until the clear is recorded (see [`Self::clear`]).
    pending_clear: Cell<Option<[f32; 4]>>,
}

impl OffscreenTarget {
    /// A target of `size` pixels.
    pub fn new(context: &Rc<VulkanContext>, size: [u32; 2]) -> Result<Self> {
        if size[0] == 0 || size[1] == 0 {
            return Err(Error::InvalidInput(format!("a {}x{} target has no pixels", size[0], size[1])));
        }
        let largest = context.max_image_size();
        if size[0] > largest || size[1] > largest {
            return Err(Error::InvalidInput(format!(
                "a {}x{} frame is larger than Vulkan device {} allows ({largest} pixels a side): choose a smaller --size",
                size[0],
                size[1],
                context.description().name
            )));
        }
        let color = Image::new(
            context,
            size,
            COLOR_FORMAT,
            vk::ImageUsageFlags::COLOR_ATTACHMENT | vk::ImageUsageFlags::TRANSFER_SRC,
            vk::ImageAspectFlags::COLOR,
            false,
        )?;
        let depth = Image::new(
            context,
            size,
            DEPTH_FORMAT,
            vk::ImageUsageFlags::DEPTH_STENCIL_ATTACHMENT,
            vk::ImageAspectFlags::DEPTH,
            false,
        )?;
        let bytes = size[0] as usize * size[1] as usize * 4;
        let readback = Buffer::new(context, bytes, vk::BufferUsageFlags::TRANSFER_DST, MemoryKind::HostVisible)?;
        Ok(Self {
            color,
            depth,
            readback,
            size,
            color_layout: Cell::new(vk::ImageLayout::UNDEFINED),
            pending_clear: Cell::new(None),
        })
    }

    /// Width and height in pixels.
    pub fn size(&self) -> [u32; 2] {
        self.size
    }

    /// Clears the whole target's colour to `clear`, with the frame's first rendering: a pass that
    /// covers the whole target clears it anyway, so the frame's clear is folded into it; before
    /// any other pass (or the panel, or the end of the frame) it is recorded as a pass of its own.
    /// On a GPU with little graphics hardware a full-target clear is worth not making twice.
    pub fn clear(&self, clear: [f32; 4]) {
        self.pending_clear.set(Some(clear));
    }

    /// Records the clear [`Self::clear`] asked for, if it is still to be made.
    pub fn flush_clear(&self, recorder: &Recorder<'_>) -> Result<()> {
        let Some(clear) = self.pending_clear.take() else { return Ok(()) };
        let whole = Rect { origin: [0, 0], size: self.size };
        self.begin_rendering(recorder, whole, clear, false)?;
        self.end_rendering(recorder);
        Ok(())
    }

    /// Records: start drawing into `rect` (clearing it to `clear`), with the viewport and scissor
    /// set to it. `with_depth` (the pipeline's [`tests_depth`](super::pipeline::GraphicsPipeline::tests_depth)): the depth
    /// attachment, cleared to 1; without it the pass has none, so a pipeline that does not test
    /// depth (additive sprites, a picture) costs no depth clear.
    pub fn begin_rendering(
        &self,
        recorder: &Recorder<'_>,
        rect: Rect,
        clear: [f32; 4],
        with_depth: bool,
    ) -> Result<()> {
        if rect.origin == [0, 0] && rect.size == self.size {
            self.pending_clear.set(None); // this pass clears every pixel itself
        } else {
            self.flush_clear(recorder)?;
        }
        let [x, y] = rect.origin;
        let [width, height] = rect.size;
        if width == 0 || height == 0 || x + width > self.size[0] || y + height > self.size[1] {
            return Err(Error::InvalidInput(format!(
                "a view of {width}x{height} at ({x}, {y}) does not fit a {}x{} target",
                self.size[0], self.size[1]
            )));
        }
        let (device, commands) = recorder.raw();
        self.transition(recorder, vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL);
        let depth_barrier = vk::ImageMemoryBarrier::default()
            .old_layout(vk::ImageLayout::UNDEFINED)
            .new_layout(vk::ImageLayout::DEPTH_ATTACHMENT_OPTIMAL)
            .src_access_mask(vk::AccessFlags::DEPTH_STENCIL_ATTACHMENT_WRITE)
            .dst_access_mask(
                vk::AccessFlags::DEPTH_STENCIL_ATTACHMENT_READ | vk::AccessFlags::DEPTH_STENCIL_ATTACHMENT_WRITE,
            )
            .image(self.depth.image)
            .subresource_range(subresource(vk::ImageAspectFlags::DEPTH));
        let top = self.size[1] - (y + height);
        let area =
            vk::Rect2D { offset: vk::Offset2D { x: x as i32, y: top as i32 }, extent: vk::Extent2D { width, height } };
        let color = [vk::RenderingAttachmentInfo::default()
            .image_view(self.color.view)
            .image_layout(vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL)
            .load_op(vk::AttachmentLoadOp::CLEAR)
            .store_op(vk::AttachmentStoreOp::STORE)
            .clear_value(vk::ClearValue { color: vk::ClearColorValue { float32: clear } })];
        let depth = vk::RenderingAttachmentInfo::default()
            .image_view(self.depth.view)
            .image_layout(vk::ImageLayout::DEPTH_ATTACHMENT_OPTIMAL)
            .load_op(vk::AttachmentLoadOp::CLEAR)
            .store_op(vk::AttachmentStoreOp::DONT_CARE)
            .clear_value(vk::ClearValue { depth_stencil: vk::ClearDepthStencilValue { depth: 1.0, stencil: 0 } });
        let mut rendering = vk::RenderingInfo::default().render_area(area).layer_count(1).color_attachments(&color);
        if with_depth {
            rendering = rendering.depth_attachment(&depth);
        }
        // Flipped viewport (negative height): clip-space y up, as in GL.
        let viewport = vk::Viewport {
            x: x as f32,
            y: (top + height) as f32,
            width: width as f32,
            height: -(height as f32),
            min_depth: 0.0,
            max_depth: 1.0,
        };
        // SAFETY: a buffer in the recording state; the images and views are live; the area lies
        // inside the target (checked above).
        unsafe {
            if with_depth {
                device.cmd_pipeline_barrier(
                    commands,
                    vk::PipelineStageFlags::EARLY_FRAGMENT_TESTS | vk::PipelineStageFlags::LATE_FRAGMENT_TESTS,
                    vk::PipelineStageFlags::EARLY_FRAGMENT_TESTS | vk::PipelineStageFlags::LATE_FRAGMENT_TESTS,
                    vk::DependencyFlags::empty(),
                    &[],
                    &[],
                    &[depth_barrier],
                );
            }
            device.cmd_begin_rendering(commands, &rendering);
            device.cmd_set_viewport(commands, 0, &[viewport]);
            device.cmd_set_scissor(commands, 0, &[area]);
        }
        Ok(())
    }

    /// Starts drawing over the whole target, keeping what is there and with no depth (an overlay:
    /// the panel); the viewport is the caller's to set. End with [`Self::end_rendering`].
    pub fn begin_overlay(&self, recorder: &Recorder<'_>) -> Result<()> {
        self.flush_clear(recorder)?;
        let (device, commands) = recorder.raw();
        self.transition(recorder, vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL);
        let color = [vk::RenderingAttachmentInfo::default()
            .image_view(self.color.view)
            .image_layout(vk::ImageLayout::COLOR_ATTACHMENT_OPTIMAL)
            .load_op(vk::AttachmentLoadOp::LOAD)
            .store_op(vk::AttachmentStoreOp::STORE)];
        let area = vk::Rect2D {
            offset: vk::Offset2D::default(),
            extent: vk::Extent2D { width: self.size[0], height: self.size[1] },
        };
        let rendering = vk::RenderingInfo::default().render_area(area).layer_count(1).color_attachments(&color);
        // SAFETY: a recording command buffer; the attachment is in the layout named.
        unsafe { device.cmd_begin_rendering(commands, &rendering) };
        Ok(())
    }

    /// Records what makes the colour image the source of a copy; returns the image.
    pub(crate) fn prepare_copy(&self, recorder: &Recorder<'_>) -> vk::Image {
        self.transition(recorder, vk::ImageLayout::TRANSFER_SRC_OPTIMAL);
        self.color.image
    }

    /// Records: stop drawing.
    pub fn end_rendering(&self, recorder: &Recorder<'_>) {
        let (device, commands) = recorder.raw();
        // SAFETY: inside a rendering scope begun by `begin_rendering` on this buffer.
        unsafe { device.cmd_end_rendering(commands) };
    }

    /// Copies the colour image into host memory with a submission of its own and waits for it:
    /// RGBA8, top row first.
    pub fn read_rgba(&self, ring: &mut CommandRing) -> Result<Vec<u8>> {
        ring.submit(&[], &[], |recorder| {
            self.transition(recorder, vk::ImageLayout::TRANSFER_SRC_OPTIMAL);
            let (device, commands) = recorder.raw();
            let region = whole_image_copy(self.size);
            // SAFETY: the image is in TRANSFER_SRC layout (transition above) and the buffer holds
            // exactly width × height × 4 bytes.
            unsafe {
                device.cmd_copy_image_to_buffer(
                    commands,
                    self.color.image,
                    vk::ImageLayout::TRANSFER_SRC_OPTIMAL,
                    self.readback.raw(),
                    &[region],
                );
            }
            Ok(())
        })?;
        if !ring.wait_all(std::time::Duration::from_secs(10))? {
            return Err(Error::Unavailable("reading the Vulkan frame back took over 10 s".to_owned()));
        }
        Ok(self.readback.host_bytes().map(<[u8]>::to_vec).unwrap_or_default())
    }

    /// Records a barrier moving the colour image to `layout`, after every earlier use.
    fn transition(&self, recorder: &Recorder<'_>, layout: vk::ImageLayout) {
        let old = self.color_layout.replace(layout);
        if old == layout {
            return;
        }
        let (device, commands) = recorder.raw();
        let barrier = vk::ImageMemoryBarrier::default()
            .old_layout(old)
            .new_layout(layout)
            .src_access_mask(vk::AccessFlags::COLOR_ATTACHMENT_WRITE | vk::AccessFlags::TRANSFER_READ)
            .dst_access_mask(
                vk::AccessFlags::COLOR_ATTACHMENT_READ
                    | vk::AccessFlags::COLOR_ATTACHMENT_WRITE
                    | vk::AccessFlags::TRANSFER_READ,
            )
            .image(self.color.image)
            .subresource_range(subresource(vk::ImageAspectFlags::COLOR));
        // SAFETY: a buffer in the recording state; a live image whose layout at this point of the
        // queue is `old` (tracked in recording order).
        unsafe {
            device.cmd_pipeline_barrier(
                commands,
                vk::PipelineStageFlags::COLOR_ATTACHMENT_OUTPUT | vk::PipelineStageFlags::TRANSFER,
                vk::PipelineStageFlags::COLOR_ATTACHMENT_OUTPUT | vk::PipelineStageFlags::TRANSFER,
                vk::DependencyFlags::empty(),
                &[],
                &[],
                &[barrier],
            );
        }
    }
}
