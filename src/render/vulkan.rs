//! The Vulkan renderer: draws a [`Scene`] into the frame [`VulkanGraphics`] is recording, with the
//! GL renderer's look (the same matrices, colour ramps, light, sprite shape, clear colours, depth
//! test and blending), so the two APIs give the same picture: the wave's grid (lit mesh or points)
//! and n-body's sprites. Blur's picture is drawn with OpenGL only, so far.

use super::{Graphics, Grid, Renderer, Scene, Sprites, View};
use crate::sources::SourceFile;
use crate::vk::frame::VulkanGraphics;
use crate::vk::memory::Buffer;
use crate::vk::pipeline::{Blend, GraphicsPipeline, PipelineDescription, Topology};
use crate::vk::target::Rect;
use crate::{Error, Result, source_file};

const GRID_VERTEX: SourceFile = source_file!("shaders/vulkan/wave.vert");
const GRID_FRAGMENT: SourceFile = source_file!("shaders/vulkan/wave.frag");
const SPRITES_VERTEX: SourceFile = source_file!("shaders/vulkan/nbody.vert");
const SPRITES_FRAGMENT: SourceFile = source_file!("shaders/vulkan/nbody.frag");

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

/// The grid's pipelines (mesh and points) and its triangles for one size.
struct GridPasses {
    mesh: GraphicsPipeline,
    points: GraphicsPipeline,
    triangles: Option<([u32; 2], Buffer, u32)>,
}

/// Draws scenes with Vulkan.
#[derive(Default)]
pub struct VulkanRenderer {
    grid: Option<GridPasses>,
    sprites: Option<GraphicsPipeline>,
}

impl VulkanRenderer {
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

    fn sprites_pass(&mut self, vulkan: &VulkanGraphics) -> Result<&GraphicsPipeline> {
        if self.sprites.is_none() {
            let description = PipelineDescription {
                vertex: &SPRITES_VERTEX,
                fragment: &SPRITES_FRAGMENT,
                topology: Topology::Points,
                vertex_buffers: 2,
                blend: Blend::Additive,
                push_constant_bytes: std::mem::size_of::<SpriteConstants>() as u32,
            };
            self.sprites = Some(GraphicsPipeline::new(vulkan.context(), &description)?);
        }
        self.sprites.as_ref().ok_or_else(|| Error::Unavailable("the sprite pipeline was not built".to_owned()))
    }

    fn draw_sprites(&mut self, vulkan: &VulkanGraphics, sprites: &Sprites<'_>, view: &View) -> Result<()> {
        let pipeline = self.sprites_pass(vulkan)?;
        let constants = SpriteConstants {
            view_projection: sprites.view_projection.to_cols_array(),
            pixels_per_unit: sprites.pixels_per_unit,
            point_radius: sprites.radius,
            speed_scale: sprites.speed_scale,
            brightness: sprites.brightness,
        };
        let buffers = [sprites.bodies.vulkan()?, sprites.velocities.vulkan()?];
        let rect = Rect { origin: view.origin, size: view.size };
        vulkan.record(|recorder, target| {
            target.begin_rendering(recorder, rect, SPRITES_CLEAR)?;
            let drawn = recorder.draw(pipeline, bytemuck::bytes_of(&constants), &buffers, sprites.count);
            target.end_rendering(recorder);
            drawn
        })
    }

    fn draw_grid(&mut self, vulkan: &VulkanGraphics, grid: &Grid<'_>, view: &View) -> Result<()> {
        let passes = self.grid_passes(vulkan)?;
        let vertices = grid.vertices.vulkan()?;
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
        vulkan.record(|recorder, target| {
            target.begin_rendering(recorder, rect, GRID_CLEAR)?;
            let drawn = match &passes.triangles {
                Some((_, indices, count)) if grid.mesh && *count > 0 => {
                    recorder.draw_indexed(&passes.mesh, constants, &[vertices], indices, *count)
                }
                _ => recorder.draw(&passes.points, constants, &[vertices], vertex_count as u32),
            };
            target.end_rendering(recorder);
            drawn
        })
    }
}

impl Renderer for VulkanRenderer {
    fn prepare(&mut self, graphics: Graphics<'_>, scene: &Scene<'_>) -> Result<()> {
        let vulkan = graphics.vulkan()?;
        match scene {
            Scene::Grid(_) => self.grid_passes(vulkan).map(|_| ()),
            Scene::Sprites(_) => self.sprites_pass(vulkan).map(|_| ()),
            Scene::Picture(_) => Err(not_yet()),
        }
    }

    fn draw(&mut self, graphics: Graphics<'_>, scene: &Scene<'_>, view: &View) -> Result<()> {
        let vulkan = graphics.vulkan()?;
        match scene {
            Scene::Grid(grid) => self.draw_grid(vulkan, grid, view),
            Scene::Sprites(sprites) => self.draw_sprites(vulkan, sprites, view),
            Scene::Picture(_) => Err(not_yet()),
        }
    }

    fn destroy(&mut self, graphics: Graphics<'_>) {
        let (grid, sprites) = (self.grid.take(), self.sprites.take());
        if let Ok(vulkan) = graphics.vulkan() {
            // The pipelines and the index buffer go once the frames that use them are done.
            if let Err(error) = vulkan.wait_idle() {
                log::warn!("releasing the Vulkan renderer: {error}");
            }
        }
        drop((grid, sprites));
    }
}

fn not_yet() -> Error {
    Error::Unavailable(
        "the Vulkan renderer draws the wave and n-body so far; blur draws with OpenGL (--renderer gl)".to_owned(),
    )
}
