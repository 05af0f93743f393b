//! Textures and their pixel formats. The GL context passed in is current and created the names passed (the module contract of [`crate::gl`]).
#![allow(unsafe_code)]

use glow::HasContext;

use super::{Buffer, check_error, warn_leak};
use crate::error::{Error, Result};
use crate::pixel::PixelFormat;

/// `GL_MAX_TEXTURE_SIZE`: the largest side a texture may have.
pub fn max_texture_size(gl: &glow::Context) -> u32 {
    // SAFETY: a plain query on the current context.
    unsafe { gl.get_parameter_i32(glow::MAX_TEXTURE_SIZE) }.max(0) as u32
}

/// A 2-D texture of one level.
pub struct Texture {
    raw: Option<glow::Texture>,
    size: [u32; 2],
    format: PixelFormat,
}

impl Texture {
    /// A texture of `size` pixels, filled from `data` (tightly packed rows, top row first) or
    /// left undefined.
    pub fn new(gl: &glow::Context, size: [u32; 2], format: PixelFormat, data: Option<&[u8]>) -> Result<Self> {
        let limit = max_texture_size(gl);
        if size[0] == 0 || size[1] == 0 || size[0] > limit || size[1] > limit {
            return Err(Error::InvalidInput(format!(
                "an image of {}x{} does not fit a GL texture here (each side 1..={limit})",
                size[0], size[1]
            )));
        }
        let bytes = size[0] as usize * size[1] as usize * format.bytes_per_pixel();
        if let Some(data) = data
            && data.len() != bytes
        {
            return Err(Error::InvalidInput(format!("texture data has {} bytes, {bytes} expected", data.len())));
        }
        // SAFETY: object creation and a full upload of `bytes` bytes (checked) on the current
        // context; on a GL error the texture is deleted before returning.
        unsafe {
            let raw = gl.create_texture().map_err(Error::Gl)?;
            gl.bind_texture(glow::TEXTURE_2D, Some(raw));
            for (parameter, value) in [
                (glow::TEXTURE_MIN_FILTER, glow::LINEAR),
                (glow::TEXTURE_MAG_FILTER, glow::LINEAR),
                (glow::TEXTURE_WRAP_S, glow::CLAMP_TO_EDGE),
                (glow::TEXTURE_WRAP_T, glow::CLAMP_TO_EDGE),
            ] {
                gl.tex_parameter_i32(glow::TEXTURE_2D, parameter, value as i32);
            }
            gl.pixel_store_i32(glow::UNPACK_ALIGNMENT, 1);
            gl.tex_image_2d(
                glow::TEXTURE_2D,
                0,
                internal_format(format) as i32,
                size[0] as i32,
                size[1] as i32,
                0,
                glow::RGBA,
                component_type(format),
                glow::PixelUnpackData::Slice(data),
            );
            gl.bind_texture(glow::TEXTURE_2D, None);
            if let Err(error) = check_error(gl, "allocating a texture") {
                gl.delete_texture(raw);
                return Err(error);
            }
            Ok(Self { raw: Some(raw), size, format })
        }
    }

    /// The GL name, for registration with CUDA.
    pub fn name(&self) -> u32 {
        self.raw.map(|raw| raw.0.get()).unwrap_or(0)
    }

    /// Size in pixels.
    pub fn size(&self) -> [u32; 2] {
        self.size
    }

    /// Pixel format.
    pub fn format(&self) -> PixelFormat {
        self.format
    }

    fn raw(&self) -> Result<glow::Texture> {
        self.raw.ok_or_else(|| Error::Gl("texture used after destroy()".to_owned()))
    }

    fn bytes(&self) -> usize {
        self.size[0] as usize * self.size[1] as usize * self.format.bytes_per_pixel()
    }

    /// Replaces the contents from host memory.
    pub fn upload(&self, gl: &glow::Context, data: &[u8]) -> Result<()> {
        if data.len() != self.bytes() {
            return Err(Error::InvalidInput(format!(
                "texture data has {} bytes, {} expected",
                data.len(),
                self.bytes()
            )));
        }
        self.sub_image(gl, glow::PixelUnpackData::Slice(Some(data)))
    }

    /// Replaces the contents from a GL buffer used as pixel-unpack buffer: a copy on the GPU.
    pub fn upload_from_buffer(&self, gl: &glow::Context, buffer: &Buffer) -> Result<()> {
        if buffer.len() < self.bytes() {
            return Err(Error::InvalidInput(format!(
                "pixel buffer has {} bytes, {} needed",
                buffer.len(),
                self.bytes()
            )));
        }
        // SAFETY: binding a live buffer of the current context.
        unsafe { gl.bind_buffer(glow::PIXEL_UNPACK_BUFFER, buffer.raw()) };
        let result = self.sub_image(gl, glow::PixelUnpackData::BufferOffset(0));
        // SAFETY: unbinding.
        unsafe { gl.bind_buffer(glow::PIXEL_UNPACK_BUFFER, None) };
        result
    }

    fn sub_image(&self, gl: &glow::Context, pixels: glow::PixelUnpackData) -> Result<()> {
        let raw = self.raw()?;
        // SAFETY: the source holds the whole image (checked by the callers).
        unsafe {
            gl.bind_texture(glow::TEXTURE_2D, Some(raw));
            gl.pixel_store_i32(glow::UNPACK_ALIGNMENT, 1);
            gl.tex_sub_image_2d(
                glow::TEXTURE_2D,
                0,
                0,
                0,
                self.size[0] as i32,
                self.size[1] as i32,
                glow::RGBA,
                component_type(self.format),
                pixels,
            );
            gl.bind_texture(glow::TEXTURE_2D, None);
        }
        check_error(gl, "updating a texture")
    }

    /// Reads the contents back (tightly packed rows, top row first).
    pub fn read(&self, gl: &glow::Context) -> Result<Vec<u8>> {
        let raw = self.raw()?;
        let mut data = vec![0u8; self.bytes()];
        // SAFETY: `data` holds exactly the texture's size; pack alignment 1.
        unsafe {
            gl.bind_texture(glow::TEXTURE_2D, Some(raw));
            gl.pixel_store_i32(glow::PACK_ALIGNMENT, 1);
            gl.get_tex_image(
                glow::TEXTURE_2D,
                0,
                glow::RGBA,
                component_type(self.format),
                glow::PixelPackData::Slice(Some(&mut data)),
            );
            gl.bind_texture(glow::TEXTURE_2D, None);
        }
        check_error(gl, "reading a texture")?;
        Ok(data)
    }

    /// Binds the texture to texture unit `unit`, sampled with nearest (pixel-exact) or linear filtering.
    pub fn bind(&self, gl: &glow::Context, unit: u32, nearest: bool) -> Result<()> {
        let raw = self.raw()?;
        let filter = if nearest { glow::NEAREST } else { glow::LINEAR } as i32;
        // SAFETY: live texture of the current context.
        unsafe {
            gl.active_texture(glow::TEXTURE0 + unit);
            gl.bind_texture(glow::TEXTURE_2D, Some(raw));
            gl.tex_parameter_i32(glow::TEXTURE_2D, glow::TEXTURE_MIN_FILTER, filter);
            gl.tex_parameter_i32(glow::TEXTURE_2D, glow::TEXTURE_MAG_FILTER, filter);
            gl.active_texture(glow::TEXTURE0);
        }
        Ok(())
    }

    /// Deletes the texture.
    pub fn destroy(&mut self, gl: &glow::Context) {
        if let Some(raw) = self.raw.take() {
            // SAFETY: live texture of the current context, deleted once.
            unsafe { gl.delete_texture(raw) };
        }
    }
}

impl Drop for Texture {
    fn drop(&mut self) {
        if self.raw.is_some() {
            warn_leak("Texture");
        }
    }
}

/// GL's internal format for `format`.
fn internal_format(format: PixelFormat) -> u32 {
    match format {
        PixelFormat::Rgba8 => glow::RGBA8,
        PixelFormat::Rgba32f => glow::RGBA32F,
    }
}

/// GL's component type for `format`.
fn component_type(format: PixelFormat) -> u32 {
    match format {
        PixelFormat::Rgba8 => glow::UNSIGNED_BYTE,
        PixelFormat::Rgba32f => glow::FLOAT,
    }
}
