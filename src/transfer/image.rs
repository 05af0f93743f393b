//! Images kernels write and the graphics side draws. Two routes: the texture itself registered
//! with CUDA (`cuGraphicsGLRegisterImage`) and written through a surface object — GL interop, no
//! copy — or a pixel buffer the path shares like any buffer, copied into the texture on the GPU
//! (`glTexSubImage2D` from the bound pixel buffer) after each compute.

use std::time::Instant;

use super::{Access, SharedBuffer, Target, Transfer};
use crate::Result;
use crate::cuda::Stream;
use crate::cuda::interop::GraphicsResource;
use crate::gl;
use crate::graphics::Graphics;
use crate::guard::Guard;
use crate::pixel::PixelFormat;
use crate::stats::{Stage, StageTimes};

/// A texture kernels write, with what its route keeps for it.
pub struct SharedImage {
    // Field order is drop order: the CUDA side (registration, pixel buffer) before the texture.
    link: ImageLink,
    texture: gl::Texture,
}

enum ImageLink {
    /// Registered with CUDA: written in place through a surface object.
    Registered(GraphicsResource),
    /// Fed from a pixel buffer after each compute.
    PixelBuffer(SharedBuffer),
}

/// What an image compute step writes.
pub enum ImageTarget<'a> {
    /// A surface object over the mapped texture (`cudaSurfaceObject_t`), the texture's size in
    /// pixels, and the stream to launch on.
    Surface {
        /// The surface object.
        surface: u64,
        /// Texture size in pixels.
        size: [u32; 2],
        /// The stream.
        stream: &'a Stream,
    },
    /// The pixel buffer, as the path hands any buffer to compute (device memory or host bytes).
    Buffer(Target<'a>),
}

impl SharedImage {
    /// A texture registered with CUDA (the interop path makes these).
    pub(super) fn registered(resource: GraphicsResource, texture: gl::Texture) -> Self {
        Self { link: ImageLink::Registered(resource), texture }
    }

    /// The registration, when the texture is written in place.
    pub(super) fn resource_mut(&mut self) -> Option<&mut GraphicsResource> {
        match &mut self.link {
            ImageLink::Registered(resource) => Some(resource),
            ImageLink::PixelBuffer(_) => None,
        }
    }

    /// The texture, for drawing (borrowing it means no kernel writes it right now).
    pub fn texture(&self) -> &gl::Texture {
        &self.texture
    }

    /// Whether kernels write the texture in place (else through a pixel buffer).
    pub fn in_place(&self) -> bool {
        matches!(self.link, ImageLink::Registered(_))
    }

    /// The pixel buffer, on the pixel-buffer route.
    pub fn pixel_buffer_mut(&mut self) -> Option<&mut SharedBuffer> {
        match &mut self.link {
            ImageLink::PixelBuffer(buffer) => Some(buffer),
            ImageLink::Registered(_) => None,
        }
    }

    /// Releases the CUDA side, then deletes the texture. The context must be current.
    pub fn destroy(self, graphics: Graphics<'_>) {
        let SharedImage { link, mut texture } = self;
        match link {
            ImageLink::Registered(resource) => drop(resource),
            ImageLink::PixelBuffer(buffer) => buffer.destroy(graphics),
        }
        if let Ok(gl) = graphics.gl() {
            texture.destroy(gl);
        }
    }
}

/// Images on any path: in place where the path maps registered objects (and that was asked
/// for), through a pixel buffer otherwise.
impl dyn Transfer + '_ {
    /// An image of `size` pixels in `format` holding `initial`, written in place when `in_place`
    /// and the path can, else through a pixel buffer of this path.
    pub fn create_image(
        &mut self,
        graphics: Graphics<'_>,
        size: [u32; 2],
        format: PixelFormat,
        initial: &[u8],
        in_place: bool,
    ) -> Result<SharedImage> {
        let gl = graphics.gl()?;
        let texture = gl::Texture::new(gl, size, format, Some(initial))?;
        if in_place && let Some(mapping) = self.mapping() {
            return mapping.register_image(graphics, texture);
        }
        let texture = Guard::new(texture, |mut texture: gl::Texture| texture.destroy(gl));
        let buffer = self.create_buffer(graphics, initial)?;
        Ok(SharedImage { link: ImageLink::PixelBuffer(buffer), texture: texture.keep() })
    }

    /// Runs `compute` on `image` and makes what it wrote visible to the graphics side; the copy
    /// from a pixel buffer into the texture counts as upload.
    pub fn run_image(
        &mut self,
        graphics: Graphics<'_>,
        frame: u64,
        image: &mut SharedImage,
        compute: &mut dyn FnMut(ImageTarget<'_>) -> Result<()>,
    ) -> Result<StageTimes> {
        if image.in_place() {
            let label = self.kind().label();
            return match self.mapping() {
                Some(mapping) => mapping.run_registered(frame, image, compute),
                None => Err(crate::Error::Unavailable(format!("the {label} path cannot write textures directly"))),
            };
        }
        let SharedImage { link, texture } = image;
        match link {
            ImageLink::Registered(_) => Ok(StageTimes::default()),
            ImageLink::PixelBuffer(buffer) => {
                let mut buffers = [(&mut *buffer, Access::Write)];
                let mut times =
                    self.run(graphics, frame, &mut buffers, &mut |target| compute(ImageTarget::Buffer(target)))?;
                let started = Instant::now();
                texture.upload_from_buffer(graphics.gl()?, buffer.gl()?)?;
                let upload = times.host(Stage::Upload).unwrap_or(0.0) + started.elapsed().as_secs_f64() * 1e6;
                times.set_host(Stage::Upload, upload);
                Ok(times)
            }
        }
    }

    /// The image's pixels as the texture shows them (bytes of its format, top row first).
    pub fn read_image(&mut self, graphics: Graphics<'_>, image: &SharedImage) -> Result<Vec<u8>> {
        self.synchronize()?;
        match &image.link {
            ImageLink::PixelBuffer(buffer) => self.read_buffer(graphics, buffer),
            ImageLink::Registered(_) => image.texture.read(graphics.gl()?),
        }
    }

    /// Overwrites the image (texture and pixel buffer) with `bytes`, so a test can tell written
    /// pixels from stale ones.
    pub fn fill_image(&mut self, graphics: Graphics<'_>, image: &mut SharedImage, bytes: &[u8]) -> Result<()> {
        self.synchronize()?;
        image.texture.upload(graphics.gl()?, bytes)?;
        if let ImageLink::PixelBuffer(buffer) = &mut image.link {
            let fresh = self.create_buffer(graphics, bytes)?;
            std::mem::replace(buffer, fresh).destroy(graphics);
        }
        Ok(())
    }
}
