//! The boundary between a demo and the graphics API that shows it.
//!
//! A demo never calls a graphics API. Each frame it hands the graphics side a [`Scene`]: which of
//! its shared buffers or images to draw, with a camera and a few drawing parameters. The memory
//! it shares with CUDA comes from its transfer path (`transfer/`), which is where the graphics
//! side gives CUDA that memory and the synchronisation around it. A demo passes the graphics
//! context on as a [`Graphics`] without looking inside.
//!
//! Two implementations: OpenGL ([`gl::GlScenes`]) and Vulkan ([`vulkan`]). A third API adds its
//! variant of [`Graphics`] and [`Image`], its drawer here, its renderer in `renderer/`, and its
//! transfer paths — and no demo changes.
//!
//! ```text
//!   demo ──Scene (buffers, image, camera)──▶ SceneDrawer ──▶ the graphics API
//!     │                                           ▲
//!     └──Transfer::run(compute)──▶ CUDA writes memory the API draws from
//! ```

pub mod gl;
pub mod vulkan;

use glam::{Mat4, Vec2};

use crate::error::Result;
pub use crate::graphics::Graphics;
use crate::pixel::PixelFormat;
use crate::transfer::{SharedBuffer, SharedImage, TextureMemory};

/// The viewport a demo draws into (the part of the framebuffer right of the panel).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct View {
    /// Lower-left corner in physical pixels.
    pub origin: [u32; 2],
    /// Size in physical pixels.
    pub size: [u32; 2],
}

impl View {
    /// Width over height.
    pub fn aspect(&self) -> f32 {
        self.size[0] as f32 / self.size[1].max(1) as f32
    }
}

/// What a demo hands the graphics side to draw this frame.
pub enum Scene<'a> {
    /// One glowing sprite per body (n-body).
    Sprites(Sprites<'a>),
    /// A grid of vertices as a lit mesh or as points (wave).
    Grid(Grid<'a>),
    /// An image beside its original, split by a line (blur).
    Picture(Picture<'a>),
}

/// Bodies drawn as sprites, coloured by speed, blended additively.
pub struct Sprites<'a> {
    /// float4 per body: x, y, z, mass.
    pub bodies: &'a SharedBuffer,
    /// float4 per body: vx, vy, vz, unused.
    pub velocities: &'a SharedBuffer,
    /// Bodies to draw.
    pub count: u32,
    /// World to clip space.
    pub view_projection: Mat4,
    /// Viewport height over 2 tan(fov / 2): pixels per world unit at distance 1.
    pub pixels_per_unit: f32,
    /// Sprite radius in world units.
    pub radius: f32,
    /// The speed drawn with the hottest colour.
    pub speed_scale: f32,
    /// Brightness of one sprite.
    pub brightness: f32,
    /// Lines drawn over the bodies: the tree's boxes (`--draw-tree`).
    pub boxes: Option<Boxes<'a>>,
}

/// Lines in world space, two vertices a line: the boxes of n-body's tree, which the step writes.
pub struct Boxes<'a> {
    /// float4 per vertex: x, y, z, level + 1 (1 the root); w = 0 marks an empty slot, not drawn.
    pub vertices: &'a SharedBuffer,
    /// Vertices to draw (a multiple of 2).
    pub count: u32,
}

/// A `width × height` grid of float4 vertices `(u, height, v, 1)`.
pub struct Grid<'a> {
    /// The vertices, row by row.
    pub vertices: &'a SharedBuffer,
    /// Vertices per row and rows.
    pub size: [u32; 2],
    /// World to clip space.
    pub view_projection: Mat4,
    /// Triangles between neighbours, lit (else one point per vertex).
    pub mesh: bool,
    /// Point size in pixels (points).
    pub point_size: f32,
    /// The height that maps to the top of the colour ramp.
    pub amplitude: f32,
}

/// An image (left of the split line: its original) fitted, zoomed and panned in the view.
pub struct Picture<'a> {
    /// The image before processing.
    pub original: &'a Image,
    /// The image a kernel wrote.
    pub result: &'a SharedImage,
    /// Image size in pixels.
    pub size: [u32; 2],
    /// Screen pixels per image pixel.
    pub zoom: f32,
    /// Image pixels from the image centre to the view centre.
    pub pan: Vec2,
    /// The split line, as a fraction of the view width.
    pub split: f32,
}

/// The triangles of a `width × height` grid of vertices, two per cell, as vertex indices (every
/// renderer draws [`Grid`]'s mesh from these).
pub fn grid_triangles(size: [u32; 2]) -> Vec<u32> {
    let [width, height] = size;
    let cells = width.saturating_sub(1) as usize * height.saturating_sub(1) as usize;
    let mut indices: Vec<u32> = Vec::with_capacity(cells * 6);
    for y in 0..height.saturating_sub(1) {
        for x in 0..width.saturating_sub(1) {
            let corner = y * width + x;
            indices.extend_from_slice(&[
                corner,
                corner + 1,
                corner + width,
                corner + 1,
                corner + width + 1,
                corner + width,
            ]);
        }
    }
    indices
}

/// Draws [`Scene`]s with one graphics API.
pub trait SceneDrawer {
    /// Gets ready to draw scenes like `scene` (builds its shaders), so that a demo whose shaders
    /// do not build fails when it starts rather than at its first frame.
    fn prepare(&mut self, graphics: Graphics<'_>, scene: &Scene<'_>) -> Result<()>;

    /// Clears `view` and draws `scene` into it, into the framebuffer bound now.
    fn draw(&mut self, graphics: Graphics<'_>, scene: &Scene<'_>, view: &View) -> Result<()>;

    /// Releases the renderer's own objects (the context must be current).
    fn destroy(&mut self, graphics: Graphics<'_>);
}

/// An image the graphics side holds for drawing only (no kernel writes it), e.g. the original
/// beside a filtered one.
pub struct Image {
    texture: TextureMemory,
}

impl Image {
    /// An image of `size` pixels in `format`, holding `pixels` (top row first).
    pub fn new(graphics: Graphics<'_>, size: [u32; 2], format: PixelFormat, pixels: &[u8]) -> Result<Self> {
        Ok(Self { texture: TextureMemory::new(graphics, size, format, pixels)? })
    }

    /// The texture, for the renderer of its API.
    pub fn texture(&self) -> &TextureMemory {
        &self.texture
    }

    /// Releases the image (a GL context must be current for a GL texture).
    pub fn destroy(self, graphics: Graphics<'_>) {
        self.texture.destroy(graphics);
    }
}
