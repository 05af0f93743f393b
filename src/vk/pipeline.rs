//! Graphics pipelines for the offscreen target (dynamic rendering: no render pass objects), built
//! from two shader files, one or two vertex buffers of float4s and a push-constant block.
#![allow(unsafe_code)]

use std::rc::Rc;

use ash::vk;

use super::device::VulkanContext;
use super::shader::{ShaderModule, ShaderStage};
use super::vk_error;
use crate::Result;
use crate::sources::SourceFile;

/// Format of the colour attachment pipelines draw into (the offscreen target's).
pub const COLOR_FORMAT: vk::Format = vk::Format::R8G8B8A8_UNORM;
/// Format of the depth attachment.
pub const DEPTH_FORMAT: vk::Format = vk::Format::D32_SFLOAT;

/// Most vertex buffers a pipeline reads.
pub const MAX_VERTEX_BUFFERS: usize = 2;
/// Bytes per vertex in each vertex buffer: one float4.
pub const FLOAT4: u32 = 16;

/// How fragments are combined with what is already drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blend {
    /// Depth-tested, written over (a lit surface).
    DepthTested,
    /// Added (source × its alpha + destination, as GL's `SRC_ALPHA, ONE`), no depth: glowing
    /// sprites.
    Additive,
}

/// The primitives a pipeline assembles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// Every three indices or vertices a triangle.
    Triangles,
    /// Every vertex a point.
    Points,
}

/// What a pipeline draws.
#[derive(Debug, Clone, Copy)]
pub struct PipelineDescription<'a> {
    /// The vertex shader.
    pub vertex: &'a SourceFile,
    /// The fragment shader.
    pub fragment: &'a SourceFile,
    /// Triangles or points.
    pub topology: Topology,
    /// Vertex buffers: buffer `i` feeds attribute `location = i`, one float4 per vertex.
    pub vertex_buffers: u32,
    /// How fragments combine.
    pub blend: Blend,
    /// Size of the push-constant block both stages read.
    pub push_constant_bytes: u32,
}

/// A pipeline and its layout, destroyed on drop.
pub struct GraphicsPipeline {
    pipeline: vk::Pipeline,
    layout: vk::PipelineLayout,
    push_constant_bytes: u32,
    vertex_buffers: usize,
    context: Rc<VulkanContext>,
}

impl GraphicsPipeline {
    /// Compiles the shaders and builds the pipeline.
    pub fn new(context: &Rc<VulkanContext>, description: &PipelineDescription<'_>) -> Result<Self> {
        let device = context.device();
        let vertex = ShaderModule::new(context, description.vertex, ShaderStage::Vertex)?;
        let fragment = ShaderModule::new(context, description.fragment, ShaderStage::Fragment)?;
        let ranges = [vk::PushConstantRange {
            stage_flags: vk::ShaderStageFlags::VERTEX | vk::ShaderStageFlags::FRAGMENT,
            offset: 0,
            size: description.push_constant_bytes,
        }];
        let layout_info = vk::PipelineLayoutCreateInfo::default().push_constant_ranges(&ranges);
        // SAFETY: valid create info; destroyed in Drop (or below on failure).
        let layout = unsafe { device.create_pipeline_layout(&layout_info, None) }
            .map_err(|e| vk_error("vkCreatePipelineLayout", e))?;
        let layout = crate::guard::Guard::new(layout, |layout| {
            // SAFETY: created above and not used by any pipeline.
            unsafe { device.destroy_pipeline_layout(layout, None) }
        });

        let stages = [
            vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::VERTEX)
                .module(vertex.raw())
                .name(c"main"),
            vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::FRAGMENT)
                .module(fragment.raw())
                .name(c"main"),
        ];
        let count = description.vertex_buffers.clamp(1, MAX_VERTEX_BUFFERS as u32) as usize;
        let bindings: [vk::VertexInputBindingDescription; MAX_VERTEX_BUFFERS] =
            std::array::from_fn(|i| vk::VertexInputBindingDescription {
                binding: i as u32,
                stride: FLOAT4,
                input_rate: vk::VertexInputRate::VERTEX,
            });
        let attributes: [vk::VertexInputAttributeDescription; MAX_VERTEX_BUFFERS] =
            std::array::from_fn(|i| vk::VertexInputAttributeDescription {
                location: i as u32,
                binding: i as u32,
                format: vk::Format::R32G32B32A32_SFLOAT,
                offset: 0,
            });
        let vertex_input = vk::PipelineVertexInputStateCreateInfo::default()
            .vertex_binding_descriptions(&bindings[..count])
            .vertex_attribute_descriptions(&attributes[..count]);
        let topology = match description.topology {
            Topology::Triangles => vk::PrimitiveTopology::TRIANGLE_LIST,
            Topology::Points => vk::PrimitiveTopology::POINT_LIST,
        };
        let assembly = vk::PipelineInputAssemblyStateCreateInfo::default().topology(topology);
        let viewport = vk::PipelineViewportStateCreateInfo::default().viewport_count(1).scissor_count(1);
        let raster = vk::PipelineRasterizationStateCreateInfo::default()
            .polygon_mode(vk::PolygonMode::FILL)
            .cull_mode(vk::CullModeFlags::NONE)
            .front_face(vk::FrontFace::COUNTER_CLOCKWISE)
            .line_width(1.0);
        let multisample =
            vk::PipelineMultisampleStateCreateInfo::default().rasterization_samples(vk::SampleCountFlags::TYPE_1);
        let depth_tested = description.blend == Blend::DepthTested;
        let depth = vk::PipelineDepthStencilStateCreateInfo::default()
            .depth_test_enable(depth_tested)
            .depth_write_enable(depth_tested)
            .depth_compare_op(vk::CompareOp::LESS);
        let attachment = match description.blend {
            Blend::DepthTested => vk::PipelineColorBlendAttachmentState::default()
                .blend_enable(false)
                .color_write_mask(vk::ColorComponentFlags::RGBA),
            Blend::Additive => vk::PipelineColorBlendAttachmentState::default()
                .blend_enable(true)
                .src_color_blend_factor(vk::BlendFactor::SRC_ALPHA)
                .dst_color_blend_factor(vk::BlendFactor::ONE)
                .color_blend_op(vk::BlendOp::ADD)
                .src_alpha_blend_factor(vk::BlendFactor::SRC_ALPHA)
                .dst_alpha_blend_factor(vk::BlendFactor::ONE)
                .alpha_blend_op(vk::BlendOp::ADD)
                .color_write_mask(vk::ColorComponentFlags::RGBA),
        };
        let attachments = [attachment];
        let blend = vk::PipelineColorBlendStateCreateInfo::default().attachments(&attachments);
        let dynamic_states = [vk::DynamicState::VIEWPORT, vk::DynamicState::SCISSOR];
        let dynamic = vk::PipelineDynamicStateCreateInfo::default().dynamic_states(&dynamic_states);
        let color_formats = [COLOR_FORMAT];
        let mut rendering = vk::PipelineRenderingCreateInfo::default()
            .color_attachment_formats(&color_formats)
            .depth_attachment_format(DEPTH_FORMAT);
        let create_info = vk::GraphicsPipelineCreateInfo::default()
            .stages(&stages)
            .vertex_input_state(&vertex_input)
            .input_assembly_state(&assembly)
            .viewport_state(&viewport)
            .rasterization_state(&raster)
            .multisample_state(&multisample)
            .depth_stencil_state(&depth)
            .color_blend_state(&blend)
            .dynamic_state(&dynamic)
            .layout(*layout)
            .push_next(&mut rendering);
        // SAFETY: every structure in the chain outlives the call; the modules are live until after it.
        let pipelines = unsafe { device.create_graphics_pipelines(vk::PipelineCache::null(), &[create_info], None) }
            .map_err(|(_, e)| vk_error("vkCreateGraphicsPipelines", e))?;
        Ok(Self {
            pipeline: pipelines[0],
            layout: layout.keep(),
            push_constant_bytes: description.push_constant_bytes,
            vertex_buffers: count,
            context: context.clone(),
        })
    }

    /// The Vulkan handle.
    pub fn raw(&self) -> vk::Pipeline {
        self.pipeline
    }

    /// Its layout, for push constants.
    pub fn layout(&self) -> vk::PipelineLayout {
        self.layout
    }

    /// Vertex buffers it reads.
    pub fn vertex_buffers(&self) -> usize {
        self.vertex_buffers
    }

    /// Bytes of push constants it takes.
    pub fn push_constant_bytes(&self) -> u32 {
        self.push_constant_bytes
    }
}

impl Drop for GraphicsPipeline {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once, after the frames that used it (the owner
        // waits for them; the device context waits for idle before it goes).
        unsafe {
            self.context.device().destroy_pipeline(self.pipeline, None);
            self.context.device().destroy_pipeline_layout(self.layout, None);
        }
    }
}
