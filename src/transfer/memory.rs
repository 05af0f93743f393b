//! The graphics API's memory behind shared buffers and images, and what each transfer path
//! keeps beside it. The one file of the transfer layer besides each API's own paths (GL interop
//! and external memory for GL, `vulkan.rs` for Vulkan) that names both APIs' types: the paths that
//! serve both (the host copy, the CPU path) and the image routes ask it what differs — how a
//! buffer the host fills is made, whether the host waits for frames in flight before writing it,
//! how an upload is done — instead of branching on the API. A third API adds its variants here
//! and in `graphics.rs`.

use crate::cuda::external::ExportableMemory;
use crate::cuda::import::ImportedImage;
use crate::cuda::interop::GraphicsResource;
use crate::cuda::{DeviceBuffer, PinnedBuffer};
use crate::error::{Error, Result};
use crate::gl::external::GlMemoryObjects;
use crate::graphics::{Graphics, GraphicsApi};
use crate::pixel::PixelFormat;
use crate::{gl, vk};

/// A graphics buffer (GL or Vulkan) that compute writes, plus what its transfer path keeps for it.
pub struct SharedBuffer {
    // Field order is drop order: the CUDA side (registration, mirrors) goes before the buffer.
    pub(super) link: Link,
    pub(super) memory: BufferMemory,
}

/// The graphics API's buffer behind a [`SharedBuffer`].
pub(super) enum BufferMemory {
    Gl(gl::Buffer),
    /// A Vulkan buffer: host-visible on the CPU path, CUDA's import of it on the Vulkan path.
    Vulkan(vk::memory::Buffer),
}

/// What a path keeps beside the graphics API's buffer.
pub(super) enum Link {
    Interop(GraphicsResource),
    HostCopy {
        device: DeviceBuffer,
        staging: Staging,
    },
    External {
        memory: ExportableMemory,
        gl_memory: GlMemoryObjects,
        object: u32,
    },
    Cpu(HostBytes),
    /// CUDA's import of the Vulkan buffer, and the submission that last read it.
    Vulkan {
        memory: crate::cuda::import::ImportedMemory,
        mark: vk::shared::ReadMark,
    },
}

/// Host memory aligned for any element type a demo views it as (up to 8-byte `f64`).
pub(super) struct HostBytes {
    words: Vec<u64>,
    len: usize,
}

impl HostBytes {
    pub(super) fn new(data: &[u8]) -> Self {
        let mut words = vec![0u64; data.len().div_ceil(8)];
        bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..data.len()].copy_from_slice(data);
        Self { words, len: data.len() }
    }

    pub(super) fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice::<u64, u8>(&self.words)[..self.len]
    }

    pub(super) fn bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut::<u64, u8>(&mut self.words)[..self.len]
    }
}

/// Host memory a host-copy path copies through.
pub(super) enum Staging {
    Pinned(PinnedBuffer),
    Pageable(Vec<u8>),
}

impl Staging {
    pub(super) fn bytes(&self) -> &[u8] {
        match self {
            Staging::Pinned(pinned) => pinned.as_slice(),
            Staging::Pageable(bytes) => bytes,
        }
    }
}

impl SharedBuffer {
    /// The GL buffer, for drawing. Borrowing it immutably means no
    /// [`Transfer::run`](super::Transfer::run) (which borrows the buffer mutably, and maps it on
    /// the interop path) can be in progress:
    ///
    /// ```compile_fail,E0502
    /// # use interop_lab::graphics::Graphics;
    /// # use interop_lab::transfer::{Access, SharedBuffer, Transfer};
    /// fn draw_while_mapped(transfer: &mut dyn Transfer, graphics: Graphics<'_>, buffer: &mut SharedBuffer) {
    ///     let mut buffers = [(&mut *buffer, Access::Write)];
    ///     let _ = transfer.run(graphics, 0, &mut buffers, &mut |_target| {
    ///         let _ = buffer.gl(); // error[E0502]: `*buffer` is also borrowed as mutable
    ///         Ok(())
    ///     });
    /// }
    /// ```
    ///
    /// while drawing after the run compiles:
    ///
    /// ```no_run
    /// # use interop_lab::graphics::Graphics;
    /// # use interop_lab::transfer::{Access, SharedBuffer, Transfer};
    /// fn draw_after_the_run(transfer: &mut dyn Transfer, graphics: Graphics<'_>, buffer: &mut SharedBuffer) {
    ///     let mut buffers = [(&mut *buffer, Access::Write)];
    ///     let _ = transfer.run(graphics, 0, &mut buffers, &mut |_target| Ok(()));
    ///     let _ = buffer.gl();
    /// }
    /// ```
    pub fn gl(&self) -> Result<&gl::Buffer> {
        match &self.memory {
            BufferMemory::Gl(buffer) => Ok(buffer),
            BufferMemory::Vulkan(_) => {
                Err(Error::Unavailable("a Vulkan buffer cannot be drawn with OpenGL".to_owned()))
            }
        }
    }

    /// The Vulkan buffer, for commands of the submission `frame` is recording, which is noted
    /// as its reader: CUDA waits for that submission before writing the buffer again.
    pub fn vulkan(&self, frame: &vk::frame::VulkanGraphics) -> Result<&vk::memory::Buffer> {
        match &self.memory {
            BufferMemory::Vulkan(buffer) => {
                if let Link::Vulkan { mark, .. } = &self.link {
                    frame.reads(mark);
                }
                Ok(buffer)
            }
            BufferMemory::Gl(_) => Err(Error::Unavailable("an OpenGL buffer cannot be drawn with Vulkan".to_owned())),
        }
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        match &self.memory {
            BufferMemory::Gl(buffer) => buffer.len(),
            BufferMemory::Vulkan(buffer) => buffer.len(),
        }
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Releases the CUDA side, then deletes the buffer. A GL context must be current for a GL
    /// buffer; a Vulkan buffer is released by its own `Drop` once the device is done with it.
    pub fn destroy(self, graphics: Graphics<'_>) {
        let SharedBuffer { link, memory } = self;
        let mut buffer = match memory {
            BufferMemory::Gl(buffer) => buffer,
            BufferMemory::Vulkan(buffer) => {
                drop(link);
                if let Ok(vulkan) = graphics.vulkan() {
                    vulkan.release_after_frame(buffer);
                }
                return;
            }
        };
        let Ok(gl) = graphics.gl() else {
            log::warn!("a GL buffer was released without its GL context; it is leaked");
            std::mem::forget(buffer);
            return;
        };
        match link {
            // GL's buffer and memory object go first; the CUDA allocation stays alive for GL until
            // its import is released, so the order is safe either way, but this one reads right.
            Link::External { memory, gl_memory, object } => {
                buffer.destroy(gl);
                gl_memory.delete(object);
                drop(memory);
            }
            other => {
                drop(other);
                buffer.destroy(gl);
            }
        }
    }
}

impl BufferMemory {
    /// A buffer the API draws, holding `initial`, that the host fills: a GL buffer
    /// (`glBufferData`), or host-visible Vulkan memory.
    pub(super) fn filled_by_host(graphics: Graphics<'_>, initial: &[u8]) -> Result<Self> {
        Ok(match graphics {
            Graphics::Gl(gl) => BufferMemory::Gl(gl::Buffer::new(gl, initial)?),
            Graphics::Vulkan(vulkan) => BufferMemory::Vulkan(vulkan.host_buffer(initial)?),
        })
    }

    /// Copies `bytes` from the host into the buffer: `glBufferSubData`, or a write into the
    /// host-visible Vulkan memory (whose readers [`wait_for_readers`] waited for).
    pub(super) fn upload(&mut self, graphics: Graphics<'_>, bytes: &[u8]) -> Result<()> {
        match self {
            BufferMemory::Gl(memory) => memory.write(graphics.gl()?, bytes),
            BufferMemory::Vulkan(memory) => graphics.vulkan()?.write_host_buffer(memory, bytes),
        }
    }

    /// The first `len` bytes of what is drawn, read by the host where the API draws from
    /// host-visible memory (Vulkan: once no frame uses it). `None` where the upload is a copy
    /// (GL): what the path uploaded from is what is drawn.
    pub(super) fn host_visible_bytes(&self, graphics: Graphics<'_>, len: usize) -> Result<Option<Vec<u8>>> {
        match self {
            BufferMemory::Gl(_) => Ok(None),
            BufferMemory::Vulkan(memory) => {
                graphics.vulkan()?.wait_idle()?;
                Ok(Some(memory.host_bytes().map(|bytes| bytes[..len].to_vec()).unwrap_or_default()))
            }
        }
    }
}

/// How kernels reach an image on `api`, in words naming the API's calls: written in place through
/// a surface object, or through a pixel buffer copied into the texture.
pub fn image_route_words(in_place: bool, api: GraphicsApi) -> &'static str {
    match (in_place, api) {
        (true, GraphicsApi::Gl) => "texture (surface writes)",
        (true, GraphicsApi::Vulkan) => "image imported by CUDA (surface writes)",
        (false, GraphicsApi::Gl) => "pixel buffer + glTexSubImage2D",
        (false, GraphicsApi::Vulkan) => "pixel buffer + vkCmdCopyBufferToImage",
    }
}

/// Before the host overwrites buffers that frames in flight may still read. Where the API draws
/// from the very memory the host writes (Vulkan's host-visible buffers), waits for those frames
/// and answers `true`; where the upload is a copy that the API orders itself (GL's
/// `glBufferSubData`), there is nothing to wait for (`false`).
pub(super) fn wait_for_readers(graphics: Graphics<'_>) -> Result<bool> {
    match graphics {
        Graphics::Gl(_) => Ok(false),
        Graphics::Vulkan(vulkan) => vulkan.wait_idle().map(|()| true),
    }
}

/// A texture kernels write, with what its route keeps for it.
pub struct SharedImage {
    // Field order is drop order: the CUDA side (registration, pixel buffer) before the texture.
    pub(super) link: ImageLink,
    pub(super) texture: TextureMemory,
}

/// The graphics API's texture behind an image.
pub enum TextureMemory {
    /// A GL texture.
    Gl(gl::Texture),
    /// A sampled Vulkan image.
    Vulkan(vk::texture::Texture),
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
                Err(crate::error::Error::Unavailable("a Vulkan image cannot be drawn with OpenGL".to_owned()))
            }
        }
    }

    /// The Vulkan image, for the Vulkan renderer.
    pub fn vulkan(&self) -> Result<&vk::texture::Texture> {
        match self {
            TextureMemory::Vulkan(texture) => Ok(texture),
            TextureMemory::Gl(_) => {
                Err(crate::error::Error::Unavailable("an OpenGL texture cannot be drawn with Vulkan".to_owned()))
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

/// How kernels reach an image's texture.
pub(super) enum ImageLink {
    /// Registered with CUDA: written in place through a surface object.
    Registered(GraphicsResource),
    /// A Vulkan image CUDA imported: written in place through a surface object, after the
    /// submission that last used it (its mark: the draw that sampled it, or an upload).
    Imported { image: ImportedImage, mark: vk::shared::ReadMark },
    /// Fed from a pixel buffer after each compute.
    PixelBuffer(SharedBuffer),
}

impl SharedImage {
    /// A texture registered with CUDA (the interop path makes these).
    pub(super) fn registered(resource: GraphicsResource, texture: gl::Texture) -> Self {
        Self { link: ImageLink::Registered(resource), texture: TextureMemory::Gl(texture) }
    }

    /// A Vulkan image CUDA imported (the Vulkan path makes these).
    pub(super) fn imported(image: ImportedImage, mark: vk::shared::ReadMark, texture: vk::texture::Texture) -> Self {
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
    pub(super) fn import(&self) -> Option<(&ImportedImage, &vk::shared::ReadMark)> {
        match &self.link {
            ImageLink::Imported { image, mark } => Some((image, mark)),
            _ => None,
        }
    }

    /// The Vulkan image, for commands of the submission `frame` is recording, which is noted as
    /// its reader when CUDA writes it: CUDA waits for that submission before writing it again.
    pub fn vulkan(&self, frame: &vk::frame::VulkanGraphics) -> Result<&vk::texture::Texture> {
        if let ImageLink::Imported { mark, .. } = &self.link {
            frame.reads(mark);
        }
        self.texture.vulkan()
    }

    /// The texture, for drawing (borrowing it means no kernel writes it right now).
    pub fn texture(&self) -> &TextureMemory {
        &self.texture
    }

    /// How kernels reach the texture, in words naming the API's calls ([`image_route_words`]).
    pub fn route_label(&self) -> &'static str {
        let api = match self.texture {
            TextureMemory::Gl(_) => GraphicsApi::Gl,
            TextureMemory::Vulkan(_) => GraphicsApi::Vulkan,
        };
        image_route_words(self.in_place(), api)
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

impl TextureMemory {
    /// Copies `buffer` (a pixel buffer the same path wrote) into the texture on the GPU:
    /// `glTexSubImage2D` from the bound pixel buffer, or `vkCmdCopyBufferToImage`.
    pub(super) fn upload_from(&self, graphics: Graphics<'_>, buffer: &SharedBuffer) -> Result<()> {
        match self {
            TextureMemory::Gl(texture) => texture.upload_from_buffer(graphics.gl()?, buffer.gl()?),
            TextureMemory::Vulkan(texture) => {
                let vulkan = graphics.vulkan()?;
                vulkan.upload_texture(texture, buffer.vulkan(vulkan)?)
            }
        }
    }

    /// The texture's pixels, read by the graphics API (a GL texture; a Vulkan image is read
    /// through the path that shares it).
    pub(super) fn read(&self, graphics: Graphics<'_>) -> Result<Vec<u8>> {
        self.gl()?.read(graphics.gl()?)
    }
}

impl SharedImage {
    /// Overwrites the texture with `bytes` from the host. An imported Vulkan image notes the
    /// upload as its reader: CUDA's next write waits for it, as for a draw.
    pub(super) fn fill_texture(&self, graphics: Graphics<'_>, bytes: &[u8]) -> Result<()> {
        match &self.texture {
            TextureMemory::Gl(texture) => texture.upload(graphics.gl()?, bytes),
            TextureMemory::Vulkan(texture) => {
                let vulkan = graphics.vulkan()?;
                let staging = vulkan.host_buffer(bytes)?;
                if let ImageLink::Imported { mark, .. } = &self.link {
                    vulkan.reads(mark);
                }
                let uploaded = vulkan.upload_texture(texture, &staging);
                vulkan.release_after_frame(staging);
                uploaded
            }
        }
    }
}
