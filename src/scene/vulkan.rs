//! The Vulkan scene drawer: draws a [`Scene`] into the frame [`VulkanGraphics`] is recording, with the
//! GL renderer's look (the same matrices, colour ramps, light, sprite shape, clear colours, depth
//! test and blending), so the two APIs give the same picture: the wave's grid (lit mesh or points)
//! n-body's sprites and blur's before/after picture.

use ash::vk::DescriptorSet;

use super::{Boxes, Graphics, Grid, Picture, Scene, SceneDrawer, Sprites, View};
use crate::error::{Error, Result};
use crate::sources::SourceFile;
use crate::sources::source_file;
use crate::vk::frame::VulkanGraphics;
use crate::vk::memory::Buffer;
use crate::vk::pipeline::{Blend, GraphicsPipeline, PipelineDescription, Topology};
use crate::vk::target::Rect;

const GRID_VERTEX: SourceFile = source_file!("shaders/vulkan/wave.vert");
const GRID_FRAGMENT: SourceFile = source_file!("shaders/vulkan/wave.frag");
const SPRITES_VERTEX: SourceFile = source_file!("shaders/vulkan/nbody.vert");
const SPRITES_FRAGMENT: SourceFile = source_file!("shaders/vulkan/nbody.frag");
const BOXES_VERTEX: SourceFile = source_file!("shaders/vulkan/tree_boxes.vert");
const BOXES_FRAGMENT: SourceFile = source_file!("shaders/vulkan/tree_boxes.frag");

const PICTURE_VERTEX: SourceFile = source_file!("shaders/vulkan/blur_view.vert");
const PICTURE_FRAGMENT: SourceFile = source_file!("shaders/vulkan/blur_view.frag");

/// The picture's clear colour (the GL renderer's).
const PICTURE_CLEAR: [f32; 4] = [0.05, 0.05, 0.06, 1.0];

/// The sprites' clear colour (the GL renderer's).
const SPRITES_CLEAR: [f32; 4] = [0.0, 0.0, 0.01, 1.0];

/// The grid's clear colour (the GL renderer's).
const GRID_CLEAR: [f32; 4] = [0.02, 0.025, 0.045, 1.0];

/// Bytes per grid vertex: one float4.
const FLOAT4: usize = 16;

/// The push-constant block of `shaders/vulkan/wave.*` (std430 layout: 76 bytes).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct GridConstants {
    view_projection: [f32; 16],
    point_size: f32,
    amplitude: f32,
    shade_mesh: i32,
}

/// The push-constant block of `shaders/vulkan/nbody.vert` (80 bytes).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct SpriteConstants {
    view_projection: [f32; 16],
    pixels_per_unit: f32,
    point_radius: f32,
    speed_scale: f32,
    brightness: f32,
}

/// The push-constant block of `shaders/vulkan/tree_boxes.vert` (64 bytes).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct BoxesConstants {
    view_projection: [f32; 16],
}

/// The push-constant block of `shaders/vulkan/blur_view.frag` (44 bytes).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct PictureConstants {
    viewport_origin: [f32; 2],
    viewport_size: [f32; 2],
    image_size: [f32; 2],
    pan: [f32; 2],
    zoom: f32,
    split: f32,
    target_height: f32,
}

/// The picture's pipeline and the textures its descriptor set binds now: (original, result,
/// nearest filtering), by texture identity.
struct PicturePass {
    pipeline: GraphicsPipeline,
    bound: Option<((u64, u64, bool), DescriptorSet)>,
}

/// The grid's pipelines (mesh and points) and its triangles for one size.
struct GridPasses {
    mesh: GraphicsPipeline,
    points: GraphicsPipeline,
    triangles: Option<([u32; 2], Buffer, u32)>,
}

/// Draws scenes with Vulkan.
#[derive(Default)]
pub struct VulkanScenes {
    grid: Option<GridPasses>,
    sprites: Option<GraphicsPipeline>,
    /// The tree's boxes over the sprites.
    boxes: Option<GraphicsPipeline>,
    picture: Option<PicturePass>,
}

impl VulkanScenes {
    /// A renderer that builds its pipelines on first use.
    pub fn new() -> Self {
        Self::default()
    }

    fn grid_passes(&mut self, vulkan: &VulkanGraphics) -> Result<&mut GridPasses> {
        if self.grid.is_none() {
            let description = |topology| PipelineDescription {
                vertex: &GRID_VERTEX,
                fragment: &GRID_FRAGMENT,
                topology,
                vertex_buffers: 1,
                textures: 0,
                blend: Blend::DepthTested,
                push_constant_bytes: std::mem::size_of::<GridConstants>() as u32,
            };
            let context = vulkan.context();
            self.grid = Some(GridPasses {
                mesh: GraphicsPipeline::new(context, &description(Topology::Triangles))?,
                points: GraphicsPipeline::new(context, &description(Topology::Points))?,
                triangles: None,
            });
        }
        self.grid.as_mut().ok_or_else(|| Error::Unavailable("the grid pipelines were not built".to_owned()))
    }

    fn picture_pass(&mut self, vulkan: &VulkanGraphics) -> Result<&mut PicturePass> {
        if self.picture.is_none() {
            let description = PipelineDescription {
                vertex: &PICTURE_VERTEX,
                fragment: &PICTURE_FRAGMENT,
                topology: Topology::Triangles,
                vertex_buffers: 0,
                textures: 2,
                blend: Blend::Opaque,
                push_constant_bytes: std::mem::size_of::<PictureConstants>() as u32,
            };
            let pipeline = GraphicsPipeline::new(vulkan.context(), &description)?;
            self.picture = Some(PicturePass { pipeline, bound: None });
        }
        self.picture.as_mut().ok_or_else(|| Error::Unavailable("the picture pipeline was not built".to_owned()))
    }

    fn draw_picture(&mut self, vulkan: &VulkanGraphics, picture: &Picture<'_>, view: &View) -> Result<()> {
        let pass = self.picture_pass(vulkan)?;
        let original = picture.original.texture().vulkan()?;
        let result = picture.result.vulkan(vulkan)?;
        let nearest = picture.zoom >= 1.0;
        let key = (original.id(), result.id(), nearest);
        let set = match pass.bound {
            Some((bound, set)) if bound == key => set,
            _ => {
                // The set is rewritten: the frames that use the old one must be done first.
                vulkan.wait_idle()?;
                let set = pass.pipeline.bind_textures(&[(original, nearest), (result, nearest)])?;
                pass.bound = Some((key, set));
                set
            }
        };
        let [width, height] = picture.size;
        let constants = PictureConstants {
            viewport_origin: [view.origin[0] as f32, view.origin[1] as f32],
            viewport_size: [view.size[0] as f32, view.size[1] as f32],
            image_size: [width as f32, height as f32],
            pan: picture.pan.to_array(),
            zoom: picture.zoom,
            split: picture.split,
            target_height: vulkan.target().size()[1] as f32,
        };
        let rect = Rect { origin: view.origin, size: view.size };
        let pipeline = &pass.pipeline;
        vulkan.record(|recorder, target| {
            target.begin_rendering(recorder, rect, PICTURE_CLEAR, pipeline.tests_depth())?;
            let drawn = recorder.draw_fullscreen(pipeline, bytemuck::bytes_of(&constants), set);
            target.end_rendering(recorder);
            drawn
        })
    }

    fn sprites_pass(&mut self, vulkan: &VulkanGraphics) -> Result<&GraphicsPipeline> {
        let description =
            additive(&SPRITES_VERTEX, &SPRITES_FRAGMENT, Topology::Points, 2, size_of::<SpriteConstants>());
        built(&mut self.sprites, vulkan, &description)
    }

    fn boxes_pass(&mut self, vulkan: &VulkanGraphics) -> Result<&GraphicsPipeline> {
        let description = additive(&BOXES_VERTEX, &BOXES_FRAGMENT, Topology::Lines, 1, size_of::<BoxesConstants>());
        built(&mut self.boxes, vulkan, &description)
    }

    fn draw_sprites(&mut self, vulkan: &VulkanGraphics, sprites: &Sprites<'_>, view: &View) -> Result<()> {
        if sprites.boxes.is_some() {
            self.boxes_pass(vulkan)?;
        }
        self.sprites_pass(vulkan)?;
        let Some(pipeline) = &self.sprites else { return Ok(()) };
        let boxes = match (&sprites.boxes, &self.boxes) {
            (Some(Boxes { vertices, count }), Some(pipeline)) => Some((vertices.vulkan(vulkan)?, *count, pipeline)),
            _ => None,
        };
        let boxes_constants = BoxesConstants { view_projection: sprites.view_projection.to_cols_array() };
        let constants = SpriteConstants {
            view_projection: sprites.view_projection.to_cols_array(),
            pixels_per_unit: sprites.pixels_per_unit,
            point_radius: sprites.radius,
            speed_scale: sprites.speed_scale,
            brightness: sprites.brightness,
        };
        let buffers = [sprites.bodies.vulkan(vulkan)?, sprites.velocities.vulkan(vulkan)?];
        let rect = Rect { origin: view.origin, size: view.size };
        vulkan.record(|recorder, target| {
            target.begin_rendering(recorder, rect, SPRITES_CLEAR, pipeline.tests_depth())?;
            let mut drawn = recorder.draw(pipeline, bytemuck::bytes_of(&constants), &buffers, sprites.count);
            if let (Ok(()), Some((vertices, count, boxes))) = (&drawn, boxes) {
                drawn = recorder.draw(boxes, bytemuck::bytes_of(&boxes_constants), &[vertices], count);
            }
            target.end_rendering(recorder);
            drawn
        })
    }

    fn draw_grid(&mut self, vulkan: &VulkanGraphics, grid: &Grid<'_>, view: &View) -> Result<()> {
        let passes = self.grid_passes(vulkan)?;
        let vertices = grid.vertices.vulkan(vulkan)?;
        let vertex_count = grid.size[0] as u64 * grid.size[1] as u64;
        if vertex_count * FLOAT4 as u64 > vertices.len() as u64 {
            return Err(Error::InvalidInput(format!(
                "a {}x{} grid needs {} bytes of vertices; the buffer has {}",
                grid.size[0],
                grid.size[1],
                vertex_count * FLOAT4 as u64,
                vertices.len()
            )));
        }
        if passes.triangles.as_ref().is_none_or(|(size, _, _)| *size != grid.size) {
            if let Some((_, old, _)) = passes.triangles.take() {
                vulkan.release_after_frame(old);
            }
            let indices = super::grid_triangles(grid.size);
            let count = indices.len() as u32;
            passes.triangles = Some((grid.size, vulkan.host_buffer(bytemuck::cast_slice(&indices))?, count));
        }
        let constants = GridConstants {
            view_projection: grid.view_projection.to_cols_array(),
            point_size: grid.point_size,
            amplitude: grid.amplitude.abs(),
            shade_mesh: i32::from(grid.mesh),
        };
        let constants = bytemuck::bytes_of(&constants);
        let rect = Rect { origin: view.origin, size: view.size };
        let triangles = match &passes.triangles {
            Some((_, indices, count)) if grid.mesh && *count > 0 => Some((indices, *count)),
            _ => None,
        };
        let pipeline = if triangles.is_some() { &passes.mesh } else { &passes.points };
        vulkan.record(|recorder, target| {
            target.begin_rendering(recorder, rect, GRID_CLEAR, pipeline.tests_depth())?;
            let drawn = match triangles {
                Some((indices, count)) => recorder.draw_indexed(pipeline, constants, &[vertices], indices, count),
                None => recorder.draw(pipeline, constants, &[vertices], vertex_count as u32),
            };
            target.end_rendering(recorder);
            drawn
        })
    }
}

impl SceneDrawer for VulkanScenes {
    fn prepare(&mut self, graphics: Graphics<'_>, scene: &Scene<'_>) -> Result<()> {
        let vulkan = graphics.vulkan()?;
        match scene {
            Scene::Grid(_) => self.grid_passes(vulkan).map(|_| ()),
            Scene::Sprites(_) => self.sprites_pass(vulkan).map(|_| ()),
            Scene::Picture(_) => self.picture_pass(vulkan).map(|_| ()),
        }
    }

    fn draw(&mut self, graphics: Graphics<'_>, scene: &Scene<'_>, view: &View) -> Result<()> {
        let vulkan = graphics.vulkan()?;
        match scene {
            Scene::Grid(grid) => self.draw_grid(vulkan, grid, view),
            Scene::Sprites(sprites) => self.draw_sprites(vulkan, sprites, view),
            Scene::Picture(picture) => self.draw_picture(vulkan, picture, view),
        }
    }

    fn destroy(&mut self, graphics: Graphics<'_>) {
        let (grid, sprites, boxes, picture) =
            (self.grid.take(), self.sprites.take(), self.boxes.take(), self.picture.take());
        if let Ok(vulkan) = graphics.vulkan() {
            // The pipelines and the index buffer go once the frames that use them are done.
            if let Err(error) = vulkan.wait_idle() {
                log::warn!("releasing the Vulkan renderer: {error}");
            }
        }
        drop((grid, sprites, boxes, picture));
    }
}

/// An additively blended pipeline without textures, reading `vertex_buffers` float4 buffers.
fn additive<'a>(
    vertex: &'a SourceFile,
    fragment: &'a SourceFile,
    topology: Topology,
    vertex_buffers: u32,
    push_constant_bytes: usize,
) -> PipelineDescription<'a> {
    PipelineDescription {
        vertex,
        fragment,
        topology,
        vertex_buffers,
        textures: 0,
        blend: Blend::Additive,
        push_constant_bytes: push_constant_bytes as u32,
    }
}

/// The pipeline in `slot`, built from `description` the first time it is asked for.
fn built<'a>(
    slot: &'a mut Option<GraphicsPipeline>,
    vulkan: &VulkanGraphics,
    description: &PipelineDescription<'_>,
) -> Result<&'a GraphicsPipeline> {
    if slot.is_none() {
        *slot = Some(GraphicsPipeline::new(vulkan.context(), description)?);
    }
    slot.as_ref().ok_or_else(|| Error::Unavailable("a Vulkan pipeline was not built".to_owned()))
}
