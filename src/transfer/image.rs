//! Images kernels write and the graphics side draws. Two routes: the texture itself written
//! through a surface object, no copy — a GL texture registered with CUDA
//! (`cuGraphicsGLRegisterImage`, GL interop) or a Vulkan image whose memory CUDA imports
//! (`cuExternalMemoryGetMappedMipmappedArray`, the Vulkan path) — or a pixel buffer the path
//! shares like any buffer, copied into the texture on the GPU (`glTexSubImage2D` from the bound
//! pixel buffer, `vkCmdCopyBufferToImage`) after each compute.

use std::time::Instant;

use super::{Access, SharedBuffer, Target, Transfer};
use crate::Result;
use crate::cuda::Stream;
use crate::cuda::import::ImportedImage;
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
    texture: TextureMemory,
}

/// The graphics API's texture behind an image.
pub enum TextureMemory {
    /// A GL texture.
    Gl(gl::Texture),
    /// A sampled Vulkan image.
    Vulkan(crate::vk::texture::Texture),
}

impl TextureMemory {
    /// A texture of `size` pixels in `format` holding `pixels` (top row first), in the API of
    /// `graphics`.
    pub fn new(graphics: Graphics<'_>, size: [u32; 2], format: PixelFormat, pixels: &[u8]) -> Result<Self> {
        Ok(match graphics {
            Graphics::Gl(gl) => TextureMemory::Gl(gl::Texture::new(gl, size, format, Some(pixels))?),
            Graphics::Vulkan(vulkan) => TextureMemory::Vulkan(vulkan.texture(size, format, pixels)?),
        })
    }

    /// The GL texture, for the GL renderer.
    pub fn gl(&self) -> Result<&gl::Texture> {
        match self {
            TextureMemory::Gl(texture) => Ok(texture),
            TextureMemory::Vulkan(_) => {
                Err(crate::Error::Unavailable("a Vulkan image cannot be drawn with OpenGL".to_owned()))
            }
        }
    }

    /// The Vulkan image, for the Vulkan renderer.
    pub fn vulkan(&self) -> Result<&crate::vk::texture::Texture> {
        match self {
            TextureMemory::Vulkan(texture) => Ok(texture),
            TextureMemory::Gl(_) => {
                Err(crate::Error::Unavailable("an OpenGL texture cannot be drawn with Vulkan".to_owned()))
            }
        }
    }

    /// Releases the texture: a GL one now (its context must be current), a Vulkan one once the
    /// frames that sample it are done.
    pub fn destroy(self, graphics: Graphics<'_>) {
        match (self, graphics) {
            (TextureMemory::Gl(mut texture), Graphics::Gl(gl)) => texture.destroy(gl),
            (TextureMemory::Vulkan(texture), Graphics::Vulkan(vulkan)) => {
                if let Err(error) = vulkan.wait_idle() {
                    log::warn!("releasing a Vulkan image: {error}");
                }
                drop(texture);
            }
            (TextureMemory::Gl(texture), Graphics::Vulkan(_)) => {
                log::warn!("a GL texture was released without its GL context; it is leaked");
                std::mem::forget(texture);
            }
            (TextureMemory::Vulkan(texture), Graphics::Gl(_)) => drop(texture),
        }
    }
}

enum ImageLink {
    /// Registered with CUDA: written in place through a surface object.
    Registered(GraphicsResource),
    /// A Vulkan image CUDA imported: written in place through a surface object, after the
    /// submission that last used it (its mark: the draw that sampled it, or an upload).
    Imported { image: ImportedImage, mark: crate::vk::shared::ReadMark },
    /// Fed from a pixel buffer after each compute.
    PixelBuffer(SharedBuffer),
}

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

impl SharedImage {
    /// A texture registered with CUDA (the interop path makes these).
    pub(super) fn registered(resource: GraphicsResource, texture: gl::Texture) -> Self {
        Self { link: ImageLink::Registered(resource), texture: TextureMemory::Gl(texture) }
    }

    /// A Vulkan image CUDA imported (the Vulkan path makes these).
    pub(super) fn imported(
        image: ImportedImage,
        mark: crate::vk::shared::ReadMark,
        texture: crate::vk::texture::Texture,
    ) -> Self {
        Self { link: ImageLink::Imported { image, mark }, texture: TextureMemory::Vulkan(texture) }
    }

    /// The registration, when the texture is written in place.
    pub(super) fn resource_mut(&mut self) -> Option<&mut GraphicsResource> {
        match &mut self.link {
            ImageLink::Registered(resource) => Some(resource),
            _ => None,
        }
    }

    /// CUDA's import and the last submission that sampled it, for an imported Vulkan image.
    pub(super) fn import(&self) -> Option<(&ImportedImage, &crate::vk::shared::ReadMark)> {
        match &self.link {
            ImageLink::Imported { image, mark } => Some((image, mark)),
            _ => None,
        }
    }

    /// The Vulkan image, for commands of the submission `frame` is recording, which is noted as
    /// its reader when CUDA writes it: CUDA waits for that submission before writing it again.
    pub fn vulkan(&self, frame: &crate::vk::frame::VulkanGraphics) -> Result<&crate::vk::texture::Texture> {
        if let ImageLink::Imported { mark, .. } = &self.link {
            frame.reads(mark);
        }
        self.texture.vulkan()
    }

    /// The texture, for drawing (borrowing it means no kernel writes it right now).
    pub fn texture(&self) -> &TextureMemory {
        &self.texture
    }

    /// Whether kernels write the texture in place (else through a pixel buffer).
    pub fn in_place(&self) -> bool {
        !matches!(self.link, ImageLink::PixelBuffer(_))
    }

    /// Whether the texture is a Vulkan image CUDA imported.
    pub fn imported_by_cuda(&self) -> bool {
        matches!(self.link, ImageLink::Imported { .. })
    }

    /// The pixel buffer, on the pixel-buffer route.
    pub fn pixel_buffer_mut(&mut self) -> Option<&mut SharedBuffer> {
        match &mut self.link {
            ImageLink::PixelBuffer(buffer) => Some(buffer),
            _ => None,
        }
    }

    /// Releases the CUDA side, then deletes the texture. The context must be current.
    pub fn destroy(self, graphics: Graphics<'_>) {
        let SharedImage { link, texture } = self;
        match link {
            ImageLink::Registered(resource) => drop(resource),
            ImageLink::Imported { image, .. } => {
                // CUDA's import goes first; the texture's destroy waits for Vulkan's frames.
                drop(image);
            }
            ImageLink::PixelBuffer(buffer) => buffer.destroy(graphics),
        }
        texture.destroy(graphics);
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
        if in_place
            && matches!(graphics, Graphics::Vulkan(_))
            && let Some(sharing) = self.image_sharing()
        {
            match sharing.create_shared_image(graphics, size, format, initial) {
                Ok(image) => return Ok(image),
                Err(error) => {
                    log::warn!("CUDA cannot import the Vulkan image, so it goes through a pixel buffer: {error}")
                }
            }
        }
        let texture = TextureMemory::new(graphics, size, format, initial)?;
        let texture = match texture {
            TextureMemory::Gl(texture) if in_place && self.mapping().is_some() => {
                let label = self.kind().label();
                return match self.mapping() {
                    Some(mapping) => mapping.register_image(graphics, texture),
                    None => Err(crate::Error::Unavailable(format!("the {label} path cannot register textures"))),
                };
            }
            other => other,
        };
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
            let unavailable = || crate::Error::Unavailable(format!("the {label} path cannot write textures directly"));
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
                match texture {
                    TextureMemory::Gl(texture) => texture.upload_from_buffer(graphics.gl()?, buffer.gl()?)?,
                    TextureMemory::Vulkan(texture) => {
                        let vulkan = graphics.vulkan()?;
                        vulkan.upload_texture(texture, buffer.vulkan(vulkan)?)?
                    }
                }
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
            ImageLink::Registered(_) => image.texture.gl()?.read(graphics.gl()?),
            ImageLink::Imported { .. } => {
                let label = self.kind().label();
                match self.image_sharing() {
                    Some(sharing) => sharing.read_shared_image(image),
                    None => Err(crate::Error::Unavailable(format!("the {label} path cannot read Vulkan images"))),
                }
            }
        }
    }

    /// Overwrites the image (texture and pixel buffer) with `bytes`, so a test can tell written
    /// pixels from stale ones.
    pub fn fill_image(&mut self, graphics: Graphics<'_>, image: &mut SharedImage, bytes: &[u8]) -> Result<()> {
        self.synchronize()?;
        match &image.texture {
            TextureMemory::Gl(texture) => texture.upload(graphics.gl()?, bytes)?,
            TextureMemory::Vulkan(texture) => {
                let vulkan = graphics.vulkan()?;
                let staging = vulkan.host_buffer(bytes)?;
                if let ImageLink::Imported { mark, .. } = &image.link {
                    // The upload uses the image: CUDA's next write waits for it, like for a draw.
                    vulkan.reads(mark);
                }
                vulkan.upload_texture(texture, &staging)?;
                vulkan.release_after_frame(staging);
            }
        }
        if let ImageLink::PixelBuffer(buffer) = &mut image.link {
            let fresh = self.create_buffer(graphics, bytes)?;
            std::mem::replace(buffer, fresh).destroy(graphics);
        }
        Ok(())
    }
}
