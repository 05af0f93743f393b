//! Graphics pipelines for the offscreen target (dynamic rendering: no render pass objects), built
//! from two shader files, one or two vertex buffers of float4s and a push-constant block.
#![allow(unsafe_code)]

use std::rc::Rc;

use ash::vk;

use super::device::VulkanContext;
use super::shader::{ShaderModule, ShaderStage};
use super::texture::Texture;
use super::vk_error;
use crate::error::{Error, Result};
use crate::guard::Guard;
use crate::sources::SourceFile;

/// Format of the colour attachment pipelines draw into (the offscreen target's).
pub const COLOR_FORMAT: vk::Format = vk::Format::R8G8B8A8_UNORM;
/// Format of the depth attachment.
pub const DEPTH_FORMAT: vk::Format = vk::Format::D32_SFLOAT;

/// Most vertex buffers a pipeline reads.
pub const MAX_VERTEX_BUFFERS: usize = 2;
/// Most textures a pipeline samples.
pub const MAX_TEXTURES: usize = 2;
/// Descriptor sets a pipeline's pool holds.
const SETS: usize = 1;
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
    /// Written over, no depth: a picture that covers its view.
    Opaque,
}

impl Blend {
    /// Whether pipelines of this kind test depth; those that do not are made without a depth
    /// attachment, and so are the passes that draw them (no depth to clear or keep).
    pub fn tests_depth(self) -> bool {
        self == Blend::DepthTested
    }
}

/// The primitives a pipeline assembles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// Every three indices or vertices a triangle.
    Triangles,
    /// Every vertex a point.
    Points,
    /// Every two vertices a line.
    Lines,
}

/// What a pipeline draws.
#[derive(Debug, Clone, Copy)]
pub struct PipelineDescription<'a> {
    /// The vertex shader.
    pub vertex: &'a SourceFile,
    /// The fragment shader.
    pub fragment: &'a SourceFile,
    /// Triangles, points or lines.
    pub topology: Topology,
    /// Vertex buffers: buffer `i` feeds attribute `location = i`, one float4 per vertex (0: the
    /// vertex shader makes its vertices up from `gl_VertexIndex`).
    pub vertex_buffers: u32,
    /// Sampled textures: texture i's image at `binding = 2i` of set 0, its sampler at `2i + 1`.
    pub textures: u32,
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
    textures: usize,
    /// Made with a depth attachment, for depth testing ([`Blend::tests_depth`]).
    tests_depth: bool,
    pool: vk::DescriptorPool,
    set_layout: vk::DescriptorSetLayout,
    context: Rc<VulkanContext>,
}

impl Topology {
    fn vk(self) -> vk::PrimitiveTopology {
        match self {
            Topology::Triangles => vk::PrimitiveTopology::TRIANGLE_LIST,
            Topology::Points => vk::PrimitiveTopology::POINT_LIST,
            Topology::Lines => vk::PrimitiveTopology::LINE_LIST,
        }
    }
}

impl Blend {
    /// The colour attachment's blending: none, or additive (source × alpha + destination).
    fn attachment(self) -> vk::PipelineColorBlendAttachmentState {
        match self {
            Blend::DepthTested | Blend::Opaque => vk::PipelineColorBlendAttachmentState::default()
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
        }
    }
}

/// The layout of the textures' descriptor set: texture i is an image at binding 2i and its
/// sampler at 2i + 1 (GLSL `texture2D` and `sampler`, combined in the shader with
/// `sampler2D(image, sampler)`); destroyed by the guard unless kept.
fn descriptor_set_layout(
    device: &ash::Device,
    textures: usize,
) -> Result<Guard<vk::DescriptorSetLayout, impl FnOnce(vk::DescriptorSetLayout) + '_>> {
    let bindings: [vk::DescriptorSetLayoutBinding; 2 * MAX_TEXTURES] = std::array::from_fn(|i| {
        vk::DescriptorSetLayoutBinding::default()
            .binding(i as u32)
            .descriptor_type(descriptor_type(i))
            .descriptor_count(1)
            .stage_flags(vk::ShaderStageFlags::FRAGMENT)
    });
    let set_info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings[..2 * textures]);
    // SAFETY: valid create info; destroyed in the pipeline's Drop (or by the guard).
    let set_layout = unsafe { device.create_descriptor_set_layout(&set_info, None) }
        .map_err(|e| vk_error("vkCreateDescriptorSetLayout", e))?;
    Ok(Guard::new(set_layout, move |layout| {
        // SAFETY: created above, used by nothing yet.
        unsafe { device.destroy_descriptor_set_layout(layout, None) }
    }))
}

/// A pool for `SETS` sets of `textures` textures; destroyed by the guard unless kept.
fn descriptor_pool(
    device: &ash::Device,
    textures: usize,
) -> Result<Guard<vk::DescriptorPool, impl FnOnce(vk::DescriptorPool) + '_>> {
    let sizes = [vk::DescriptorType::SAMPLED_IMAGE, vk::DescriptorType::SAMPLER]
        .map(|ty| vk::DescriptorPoolSize { ty, descriptor_count: (textures.max(1) * SETS) as u32 });
    let pool_info = vk::DescriptorPoolCreateInfo::default().max_sets(SETS as u32).pool_sizes(&sizes);
    // SAFETY: valid create info; destroyed in the pipeline's Drop (or by the guard).
    let pool = unsafe { device.create_descriptor_pool(&pool_info, None) }
        .map_err(|e| vk_error("vkCreateDescriptorPool", e))?;
    Ok(Guard::new(pool, move |pool| {
        // SAFETY: created above, no set in use.
        unsafe { device.destroy_descriptor_pool(pool, None) }
    }))
}

/// Vertex buffer `i` feeds attribute `location = i`, one float4 per vertex.
fn vertex_inputs()
-> ([vk::VertexInputBindingDescription; MAX_VERTEX_BUFFERS], [vk::VertexInputAttributeDescription; MAX_VERTEX_BUFFERS])
{
    let bindings = std::array::from_fn(|i| vk::VertexInputBindingDescription {
        binding: i as u32,
        stride: FLOAT4,
        input_rate: vk::VertexInputRate::VERTEX,
    });
    let attributes = std::array::from_fn(|i| vk::VertexInputAttributeDescription {
        location: i as u32,
        binding: i as u32,
        format: vk::Format::R32G32B32A32_SFLOAT,
        offset: 0,
    });
    (bindings, attributes)
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
        let textures = description.textures.min(MAX_TEXTURES as u32) as usize;
        let set_layout = descriptor_set_layout(device, textures)?;
        let pool = descriptor_pool(device, textures)?;
        let set_layouts = [*set_layout];
        let layout_info =
            vk::PipelineLayoutCreateInfo::default().push_constant_ranges(&ranges).set_layouts(&set_layouts);
        // SAFETY: valid create info; destroyed in Drop (or below on failure).
        let layout = unsafe { device.create_pipeline_layout(&layout_info, None) }
            .map_err(|e| vk_error("vkCreatePipelineLayout", e))?;
        let layout = Guard::new(layout, |layout| {
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
        let count = description.vertex_buffers.min(MAX_VERTEX_BUFFERS as u32) as usize;
        let (bindings, attributes) = vertex_inputs();
        let vertex_input = vk::PipelineVertexInputStateCreateInfo::default()
            .vertex_binding_descriptions(&bindings[..count])
            .vertex_attribute_descriptions(&attributes[..count]);
        let assembly = vk::PipelineInputAssemblyStateCreateInfo::default().topology(description.topology.vk());
        let viewport = vk::PipelineViewportStateCreateInfo::default().viewport_count(1).scissor_count(1);
        let raster = vk::PipelineRasterizationStateCreateInfo::default()
            .polygon_mode(vk::PolygonMode::FILL)
            .cull_mode(vk::CullModeFlags::NONE)
            .front_face(vk::FrontFace::COUNTER_CLOCKWISE)
            .line_width(1.0);
        let multisample =
            vk::PipelineMultisampleStateCreateInfo::default().rasterization_samples(vk::SampleCountFlags::TYPE_1);
        let depth_tested = description.blend.tests_depth();
        let depth = vk::PipelineDepthStencilStateCreateInfo::default()
            .depth_test_enable(depth_tested)
            .depth_write_enable(depth_tested)
            .depth_compare_op(vk::CompareOp::LESS);
        let attachment = description.blend.attachment();
        let attachments = [attachment];
        let blend = vk::PipelineColorBlendStateCreateInfo::default().attachments(&attachments);
        let dynamic_states = [vk::DynamicState::VIEWPORT, vk::DynamicState::SCISSOR];
        let dynamic = vk::PipelineDynamicStateCreateInfo::default().dynamic_states(&dynamic_states);
        let color_formats = [COLOR_FORMAT];
        let mut rendering = vk::PipelineRenderingCreateInfo::default()
            .color_attachment_formats(&color_formats)
            .depth_attachment_format(if depth_tested { DEPTH_FORMAT } else { vk::Format::UNDEFINED });
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
            textures,
            tests_depth: depth_tested,
            pool: pool.keep(),
            set_layout: set_layout.keep(),
            context: context.clone(),
        })
    }

    /// Whether the pipeline tests depth: the pass that draws it must then have a depth
    /// attachment, and must not otherwise.
    pub fn tests_depth(&self) -> bool {
        self.tests_depth
    }

    /// The Vulkan handle.
    pub fn raw(&self) -> vk::Pipeline {
        self.pipeline
    }

    /// Its layout, for push constants.
    pub fn layout(&self) -> vk::PipelineLayout {
        self.layout
    }

    /// A descriptor set binding `textures` (each with nearest or linear filtering) to the
    /// pipeline's texture bindings. Every set made earlier is freed first, so the caller must
    /// have waited for the frames that used them.
    pub fn bind_textures(&self, textures: &[(&Texture, bool)]) -> Result<vk::DescriptorSet> {
        if textures.len() != self.textures {
            return Err(Error::InvalidInput(format!(
                "{} textures for a pipeline that samples {}",
                textures.len(),
                self.textures
            )));
        }
        let device = self.context.device();
        // SAFETY: the pool is live and, as the caller guarantees, none of its sets is in use.
        unsafe { device.reset_descriptor_pool(self.pool, vk::DescriptorPoolResetFlags::empty()) }
            .map_err(|e| vk_error("vkResetDescriptorPool", e))?;
        let layouts = [self.set_layout];
        let allocate_info = vk::DescriptorSetAllocateInfo::default().descriptor_pool(self.pool).set_layouts(&layouts);
        // SAFETY: a live pool with room for a set of this layout.
        let set = unsafe { device.allocate_descriptor_sets(&allocate_info) }
            .map_err(|e| vk_error("vkAllocateDescriptorSets", e))?[0];
        let infos: Vec<[vk::DescriptorImageInfo; 1]> =
            textures.iter().flat_map(|(texture, nearest)| texture.descriptors(*nearest)).map(|info| [info]).collect();
        let writes: Vec<vk::WriteDescriptorSet<'_>> = infos
            .iter()
            .enumerate()
            .map(|(binding, info)| {
                vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(binding as u32)
                    .descriptor_type(descriptor_type(binding))
                    .image_info(info)
            })
            .collect();
        // SAFETY: a freshly allocated set; the views and samplers are live (borrowed textures).
        unsafe { device.update_descriptor_sets(&writes, &[]) };
        Ok(set)
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

/// What binding `index` of a pipeline's set holds: images at even bindings, samplers at odd.
fn descriptor_type(index: usize) -> vk::DescriptorType {
    if index.is_multiple_of(2) { vk::DescriptorType::SAMPLED_IMAGE } else { vk::DescriptorType::SAMPLER }
}

impl Drop for GraphicsPipeline {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once, after the frames that used it (the owner
        // waits for them; the device context waits for idle before it goes).
        unsafe {
            self.context.device().destroy_pipeline(self.pipeline, None);
            self.context.device().destroy_pipeline_layout(self.layout, None);
            self.context.device().destroy_descriptor_pool(self.pool, None);
            self.context.device().destroy_descriptor_set_layout(self.set_layout, None);
        }
    }
}
