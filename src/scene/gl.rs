//! The OpenGL scene drawer: one program and vertex array per kind of [`Scene`], built the first time
//! a demo needs them, from `shaders/` (or the `--shaders` folder).

use std::path::PathBuf;

use super::{Boxes, Graphics, Grid, Picture, Scene, SceneDrawer, Sprites, View};
use crate::error::Result;
use crate::gl::{self, Attribute, DrawState, Program, VertexArray};
use crate::guard::Guard;
use crate::sources::SourceFile;
use crate::sources::source_file;

const SPRITES_VERTEX: SourceFile = source_file!("shaders/nbody.vert");
const SPRITES_FRAGMENT: SourceFile = source_file!("shaders/nbody.frag");
const BOXES_VERTEX: SourceFile = source_file!("shaders/tree_boxes.vert");
const BOXES_FRAGMENT: SourceFile = source_file!("shaders/tree_boxes.frag");
const GRID_VERTEX: SourceFile = source_file!("shaders/wave.vert");
const GRID_FRAGMENT: SourceFile = source_file!("shaders/wave.frag");
const PICTURE_VERTEX: SourceFile = source_file!("shaders/blur_view.vert");
const PICTURE_FRAGMENT: SourceFile = source_file!("shaders/blur_view.frag");

/// Bytes of one float4 vertex.
const FLOAT4: i32 = 16;

/// A program and the vertex array it draws from.
struct Pass {
    program: Program,
    vertex_array: VertexArray,
}

impl Pass {
    fn new(gl: &glow::Context, name: &str, shaders: [SourceFile; 2], dir: Option<&std::path::Path>) -> Result<Self> {
        let (vertex_source, _) = shaders[0].read(dir)?;
        let (fragment_source, _) = shaders[1].read(dir)?;
        let program = Guard::new(Program::new(gl, name, &vertex_source, &fragment_source)?, |mut program: Program| {
            program.destroy(gl)
        });
        let vertex_array = VertexArray::new(gl)?;
        Ok(Self { program: program.keep(), vertex_array })
    }

    fn destroy(&mut self, gl: &glow::Context) {
        self.program.destroy(gl);
        self.vertex_array.destroy(gl);
    }
}

/// The mesh's triangles for one grid size.
struct GridIndices {
    size: [u32; 2],
    buffer: gl::Buffer,
    count: i32,
}

/// Draws scenes with OpenGL.
#[derive(Default)]
pub struct GlScenes {
    shaders_dir: Option<PathBuf>,
    sprites: Option<Pass>,
    /// The tree's boxes over the sprites.
    boxes: Option<Pass>,
    grid: Option<Pass>,
    grid_indices: Option<GridIndices>,
    picture: Option<Pass>,
}

impl GlScenes {
    /// A renderer reading shader files from `shaders_dir` when given (else the embedded copies).
    pub fn new(shaders_dir: Option<PathBuf>) -> Self {
        Self { shaders_dir, ..Self::default() }
    }

    /// The pass for `scene`'s kind, built on first use.
    fn pass(&mut self, gl: &glow::Context, scene: &Scene<'_>) -> Result<&Pass> {
        let dir = self.shaders_dir.as_deref();
        let (slot, name, shaders) = match scene {
            Scene::Sprites(_) => (&mut self.sprites, "nbody", [SPRITES_VERTEX, SPRITES_FRAGMENT]),
            Scene::Grid(_) => (&mut self.grid, "wave", [GRID_VERTEX, GRID_FRAGMENT]),
            Scene::Picture(_) => (&mut self.picture, "blur view", [PICTURE_VERTEX, PICTURE_FRAGMENT]),
        };
        if slot.is_none() {
            *slot = Some(Pass::new(gl, name, shaders, dir)?);
        }
        match slot {
            Some(pass) => Ok(pass),
            None => Err(crate::error::Error::Gl(format!("the {name} program was not built"))),
        }
    }

    fn draw_sprites(&mut self, gl: &glow::Context, sprites: &Sprites<'_>, pass: &Pass) -> Result<()> {
        let body = Attribute { location: 0, components: 4, stride: FLOAT4, offset: 0 };
        let velocity = Attribute { location: 1, components: 4, stride: FLOAT4, offset: 0 };
        pass.vertex_array.set_attributes(gl, sprites.bodies.gl()?, &[body], None)?;
        pass.vertex_array.set_attributes(gl, sprites.velocities.gl()?, &[velocity], None)?;
        let program = &pass.program;
        program.bind(gl)?;
        program.set_mat4(gl, "view_projection", &sprites.view_projection);
        program.set_f32(gl, "pixels_per_unit", sprites.pixels_per_unit);
        program.set_f32(gl, "point_radius", sprites.radius);
        program.set_f32(gl, "speed_scale", sprites.speed_scale);
        program.set_f32(gl, "brightness", sprites.brightness);
        pass.vertex_array.draw_arrays(gl, glow::POINTS, sprites.count as i32);
        Ok(())
    }

    /// The tree's boxes as lines, blended over the sprites.
    fn draw_boxes(&mut self, gl: &glow::Context, boxes: &Boxes<'_>, view_projection: &glam::Mat4) -> Result<()> {
        if self.boxes.is_none() {
            let dir = self.shaders_dir.as_deref();
            self.boxes = Some(Pass::new(gl, "tree boxes", [BOXES_VERTEX, BOXES_FRAGMENT], dir)?);
        }
        let Some(pass) = &self.boxes else { return Ok(()) };
        let corner = Attribute { location: 0, components: 4, stride: FLOAT4, offset: 0 };
        pass.vertex_array.set_attributes(gl, boxes.vertices.gl()?, &[corner], None)?;
        pass.program.bind(gl)?;
        pass.program.set_mat4(gl, "view_projection", view_projection);
        pass.vertex_array.draw_arrays(gl, glow::LINES, boxes.count as i32);
        Ok(())
    }

    fn draw_grid(&mut self, gl: &glow::Context, grid: &Grid<'_>, pass: &Pass) -> Result<()> {
        let indices = match self.grid_indices.take() {
            Some(indices) if indices.size == grid.size => indices,
            stale => {
                if let Some(mut stale) = stale {
                    stale.buffer.destroy(gl);
                }
                mesh_indices(gl, grid.size)?
            }
        };
        let vertex = Attribute { location: 0, components: 4, stride: FLOAT4, offset: 0 };
        let bound = grid
            .vertices
            .gl()
            .and_then(|vertices| pass.vertex_array.set_attributes(gl, vertices, &[vertex], Some(&indices.buffer)));
        let (count, mesh) = (indices.count, grid.mesh && indices.count > 0);
        self.grid_indices = Some(indices);
        bound?;
        let program = &pass.program;
        program.bind(gl)?;
        program.set_mat4(gl, "view_projection", &grid.view_projection);
        program.set_f32(gl, "point_size", grid.point_size);
        program.set_f32(gl, "amplitude", grid.amplitude.abs());
        program.set_i32(gl, "shade_mesh", i32::from(mesh));
        if mesh {
            pass.vertex_array.draw_elements(gl, glow::TRIANGLES, count);
        } else {
            pass.vertex_array.draw_arrays(gl, glow::POINTS, (grid.size[0] * grid.size[1]) as i32);
        }
        Ok(())
    }

    fn draw_picture(gl: &glow::Context, picture: &Picture<'_>, pass: &Pass, view: &View) -> Result<()> {
        let nearest = picture.zoom >= 1.0;
        picture.original.texture().gl()?.bind(gl, 0, nearest)?;
        picture.result.texture().gl()?.bind(gl, 1, nearest)?;
        let program = &pass.program;
        program.bind(gl)?;
        program.set_i32(gl, "original", 0);
        program.set_i32(gl, "blurred", 1);
        program.set_vec2(gl, "viewport_origin", glam::Vec2::new(view.origin[0] as f32, view.origin[1] as f32));
        program.set_vec2(gl, "viewport_size", glam::Vec2::new(view.size[0] as f32, view.size[1] as f32));
        let [w, h] = picture.size;
        program.set_vec2(gl, "image_size", glam::Vec2::new(w as f32, h as f32));
        program.set_vec2(gl, "pan", picture.pan);
        program.set_f32(gl, "zoom", picture.zoom);
        program.set_f32(gl, "split", picture.split);
        gl::draw_fullscreen_triangle(gl, &pass.vertex_array);
        Ok(())
    }
}

impl SceneDrawer for GlScenes {
    fn prepare(&mut self, graphics: Graphics<'_>, scene: &Scene<'_>) -> Result<()> {
        self.pass(graphics.gl()?, scene).map(|_| ())
    }

    fn draw(&mut self, graphics: Graphics<'_>, scene: &Scene<'_>, view: &View) -> Result<()> {
        let gl = graphics.gl()?;
        // The pass is taken out while drawing, so the grid's index cache can be updated beside it.
        self.pass(gl, scene)?;
        let slot = match scene {
            Scene::Sprites(_) => &mut self.sprites,
            Scene::Grid(_) => &mut self.grid,
            Scene::Picture(_) => &mut self.picture,
        };
        let Some(pass) = slot.take() else { return Ok(()) };
        let drawn = match scene {
            Scene::Sprites(sprites) => {
                gl::begin_scene(gl, view.origin, view.size, [0.0, 0.0, 0.01, 1.0], DrawState::Additive);
                let mut drawn = self.draw_sprites(gl, sprites, &pass);
                if let (Ok(()), Some(boxes)) = (&drawn, &sprites.boxes) {
                    drawn = self.draw_boxes(gl, boxes, &sprites.view_projection);
                }
                gl::end_scene(gl);
                drawn.and_then(|()| gl::check_error(gl, "drawing the bodies"))
            }
            Scene::Grid(grid) => {
                gl::begin_scene(gl, view.origin, view.size, [0.02, 0.025, 0.045, 1.0], DrawState::DepthTested);
                let drawn = self.draw_grid(gl, grid, &pass);
                gl::end_scene(gl);
                drawn.and_then(|()| gl::check_error(gl, "drawing the wave"))
            }
            Scene::Picture(picture) => {
                gl::begin_scene(gl, view.origin, view.size, [0.05, 0.05, 0.06, 1.0], DrawState::Additive);
                gl::end_scene(gl);
                Self::draw_picture(gl, picture, &pass, view).and_then(|()| gl::check_error(gl, "drawing the image"))
            }
        };
        let slot = match scene {
            Scene::Sprites(_) => &mut self.sprites,
            Scene::Grid(_) => &mut self.grid,
            Scene::Picture(_) => &mut self.picture,
        };
        *slot = Some(pass);
        drawn
    }

    fn destroy(&mut self, graphics: Graphics<'_>) {
        let Ok(gl) = graphics.gl() else { return };
        for pass in [&mut self.sprites, &mut self.boxes, &mut self.grid, &mut self.picture] {
            if let Some(mut pass) = pass.take() {
                pass.destroy(gl);
            }
        }
        if let Some(mut indices) = self.grid_indices.take() {
            indices.buffer.destroy(gl);
        }
    }
}

/// Two triangles per grid cell.
fn mesh_indices(gl: &glow::Context, size: [u32; 2]) -> Result<GridIndices> {
    let mut indices = super::grid_triangles(size);
    // A 1-wide grid has no triangles; keep a non-empty buffer so GL objects stay valid.
    let count = indices.len() as i32;
    if indices.is_empty() {
        indices.push(0);
    }
    Ok(GridIndices { size, buffer: gl::Buffer::new(gl, bytemuck::cast_slice(&indices))?, count })
}
