//! Images kernels write and the graphics side draws. Two routes: the texture itself written
//! through a surface object, no copy — a GL texture registered with CUDA
//! (`cuGraphicsGLRegisterImage`, GL interop) or a Vulkan image whose memory CUDA imports
//! (`cuExternalMemoryGetMappedMipmappedArray`, the Vulkan path) — or a pixel buffer the path
//! shares like any buffer, copied into the texture on the GPU (`glTexSubImage2D` from the bound
//! pixel buffer, `vkCmdCopyBufferToImage`) after each compute.

use std::time::Instant;

use super::memory::{ImageLink, SharedImage, TextureMemory};
use super::{Access, Target, Transfer};
use crate::cuda::Stream;
use crate::error::Result;
use crate::graphics::Graphics;
use crate::guard::Guard;
use crate::pixel::PixelFormat;
use crate::stats::{Stage, StageTimes};

/// What a path that shares Vulkan images with CUDA can do (the Vulkan path).
pub trait ImageSharing {
    /// A Vulkan image of `size` pixels in `format` holding `initial`, imported by CUDA.
    fn create_shared_image(
        &mut self,
        graphics: Graphics<'_>,
        size: [u32; 2],
        format: PixelFormat,
        initial: &[u8],
    ) -> Result<SharedImage>;

    /// Runs `compute` with a surface over the imported `image`, ordered after the draws that
    /// sampled it and before the ones that will.
    fn run_shared_image(
        &mut self,
        graphics: Graphics<'_>,
        frame: u64,
        image: &mut SharedImage,
        compute: &mut dyn FnMut(ImageTarget<'_>) -> Result<()>,
    ) -> Result<StageTimes>;

    /// The image's pixels (bytes of its format, top row first), once every kernel writing it
    /// is done.
    fn read_shared_image(&mut self, image: &SharedImage) -> Result<Vec<u8>>;
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
        if in_place && let Some(sharing) = self.image_sharing() {
            match sharing.create_shared_image(graphics, size, format, initial) {
                Ok(image) => return Ok(image),
                Err(error) => {
                    log::warn!("CUDA cannot import the Vulkan image, so it goes through a pixel buffer: {error}")
                }
            }
        }
        let texture = TextureMemory::new(graphics, size, format, initial)?;
        if in_place && let Some(mapping) = self.mapping() {
            return mapping.register_image(graphics, texture);
        }
        let texture = Guard::new(texture, |texture: TextureMemory| texture.destroy(graphics));
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
            let unavailable =
                || crate::error::Error::Unavailable(format!("the {label} path cannot write textures directly"));
            return if image.imported_by_cuda() {
                self.image_sharing().ok_or_else(unavailable)?.run_shared_image(graphics, frame, image, compute)
            } else {
                self.mapping().ok_or_else(unavailable)?.run_registered(frame, image, compute)
            };
        }
        let SharedImage { link, texture } = image;
        match link {
            ImageLink::Registered(_) | ImageLink::Imported { .. } => Ok(StageTimes::default()),
            ImageLink::PixelBuffer(buffer) => {
                let mut buffers = [(&mut *buffer, Access::Write)];
                let mut times =
                    self.run(graphics, frame, &mut buffers, &mut |target| compute(ImageTarget::Buffer(target)))?;
                let started = Instant::now();
                texture.upload_from(graphics, buffer)?;
                let upload = times.host(Stage::Upload).unwrap_or(0.0) + started.elapsed().as_secs_f64() * 1e6;
                times.set_host(Stage::Upload, upload);
                times.set_host_span(
                    Stage::Upload,
                    crate::stats::clock_us(started),
                    started.elapsed().as_secs_f64() * 1e6,
                );
                Ok(times)
            }
        }
    }

    /// The image's pixels as the texture shows them (bytes of its format, top row first).
    pub fn read_image(&mut self, graphics: Graphics<'_>, image: &SharedImage) -> Result<Vec<u8>> {
        self.synchronize()?;
        match &image.link {
            ImageLink::PixelBuffer(buffer) => self.read_buffer(graphics, buffer),
            ImageLink::Registered(_) => image.texture.read(graphics),
            ImageLink::Imported { .. } => {
                let label = self.kind().label();
                match self.image_sharing() {
                    Some(sharing) => sharing.read_shared_image(image),
                    None => {
                        Err(crate::error::Error::Unavailable(format!("the {label} path cannot read Vulkan images")))
                    }
                }
            }
        }
    }

    /// Overwrites the image (texture and pixel buffer) with `bytes`, so a test can tell written
    /// pixels from stale ones.
    pub fn fill_image(&mut self, graphics: Graphics<'_>, image: &mut SharedImage, bytes: &[u8]) -> Result<()> {
        self.synchronize()?;
        image.fill_texture(graphics, bytes)?;
        if let ImageLink::PixelBuffer(buffer) = &mut image.link {
            let fresh = self.create_buffer(graphics, bytes)?;
            std::mem::replace(buffer, fresh).destroy(graphics);
        }
        Ok(())
    }
}
