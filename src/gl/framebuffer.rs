//! Offscreen framebuffers (headless frames, screenshots). The GL context passed in is current and created the names passed (the module contract of [`crate::gl`]).
#![allow(unsafe_code)]

use glow::HasContext;

use super::{check_error, warn_leak};
use crate::error::{Error, Result};

/// An offscreen framebuffer (RGBA8 color + depth renderbuffers) for headless rendering.
pub struct Framebuffer {
    raw: Option<glow::Framebuffer>,
    color: Option<glow::Renderbuffer>,
    depth: Option<glow::Renderbuffer>,
    size: [u32; 2],
}

impl Framebuffer {
    /// A complete framebuffer of `size` pixels.
    pub fn new(gl: &glow::Context, size: [u32; 2]) -> Result<Self> {
        if size[0] == 0 || size[1] == 0 {
            return Err(Error::InvalidInput(format!("framebuffer size {}x{} has a zero side", size[0], size[1])));
        }
        // SAFETY: object creation and attachment on the current context; on an incomplete
        // framebuffer every object created is deleted before returning.
        unsafe {
            let raw = gl.create_framebuffer().map_err(Error::Gl)?;
            let color = gl.create_renderbuffer().map_err(Error::Gl)?;
            let depth = gl.create_renderbuffer().map_err(Error::Gl)?;
            let mut framebuffer = Self { raw: Some(raw), color: Some(color), depth: Some(depth), size };
            gl.bind_renderbuffer(glow::RENDERBUFFER, Some(color));
            gl.renderbuffer_storage(glow::RENDERBUFFER, glow::RGBA8, size[0] as i32, size[1] as i32);
            gl.bind_renderbuffer(glow::RENDERBUFFER, Some(depth));
            gl.renderbuffer_storage(glow::RENDERBUFFER, glow::DEPTH_COMPONENT24, size[0] as i32, size[1] as i32);
            gl.bind_renderbuffer(glow::RENDERBUFFER, None);
            gl.bind_framebuffer(glow::FRAMEBUFFER, Some(raw));
            gl.framebuffer_renderbuffer(glow::FRAMEBUFFER, glow::COLOR_ATTACHMENT0, glow::RENDERBUFFER, Some(color));
            gl.framebuffer_renderbuffer(glow::FRAMEBUFFER, glow::DEPTH_ATTACHMENT, glow::RENDERBUFFER, Some(depth));
            let status = gl.check_framebuffer_status(glow::FRAMEBUFFER);
            if status != glow::FRAMEBUFFER_COMPLETE {
                gl.bind_framebuffer(glow::FRAMEBUFFER, None);
                framebuffer.destroy(gl);
                return Err(Error::Gl(format!(
                    "offscreen framebuffer {}x{} incomplete (status 0x{status:x}): try a smaller --size",
                    size[0], size[1]
                )));
            }
            Ok(framebuffer)
        }
    }

    /// Size in pixels.
    pub fn size(&self) -> [u32; 2] {
        self.size
    }

    /// Directs drawing into this framebuffer.
    pub fn bind(&self, gl: &glow::Context) {
        // SAFETY: live framebuffer of the current context.
        unsafe { gl.bind_framebuffer(glow::FRAMEBUFFER, self.raw) };
    }

    /// Reads the color attachment as tightly packed RGBA8 rows, top row first.
    pub fn read_rgba(&self, gl: &glow::Context) -> Result<Vec<u8>> {
        read_rgba(gl, self.raw, self.size)
    }

    /// Deletes the framebuffer and its attachments.
    pub fn destroy(&mut self, gl: &glow::Context) {
        // SAFETY: live objects of the current context, each deleted once.
        unsafe {
            if let Some(raw) = self.raw.take() {
                gl.delete_framebuffer(raw);
            }
            if let Some(color) = self.color.take() {
                gl.delete_renderbuffer(color);
            }
            if let Some(depth) = self.depth.take() {
                gl.delete_renderbuffer(depth);
            }
        }
    }
}

impl Drop for Framebuffer {
    fn drop(&mut self) {
        if self.raw.is_some() {
            warn_leak("Framebuffer");
        }
    }
}

/// Reads `size` pixels of framebuffer `raw` (`None`: the window's back buffer) as tightly packed
/// RGBA8 rows, top row first.
pub fn read_rgba(gl: &glow::Context, raw: Option<glow::Framebuffer>, size: [u32; 2]) -> Result<Vec<u8>> {
    let [width, height] = size;
    let row = width as usize * 4;
    let mut pixels = vec![0u8; row * height as usize];
    // SAFETY: `pixels` holds exactly width × height RGBA8 pixels; pack alignment 1 matches.
    unsafe {
        gl.bind_framebuffer(glow::READ_FRAMEBUFFER, raw);
        if raw.is_none() {
            gl.read_buffer(glow::BACK);
        }
        gl.pixel_store_i32(glow::PACK_ALIGNMENT, 1);
        gl.read_pixels(
            0,
            0,
            width as i32,
            height as i32,
            glow::RGBA,
            glow::UNSIGNED_BYTE,
            glow::PixelPackData::Slice(Some(&mut pixels)),
        );
        gl.bind_framebuffer(glow::READ_FRAMEBUFFER, None);
    }
    check_error(gl, "reading pixels")?;
    // GL's first row is the bottom one.
    let mut flipped = vec![0u8; pixels.len()];
    for (y, source) in pixels.chunks_exact(row).enumerate() {
        let target = (height as usize - 1 - y) * row;
        flipped[target..target + row].copy_from_slice(source);
    }
    Ok(flipped)
}

/// Binds the default framebuffer (the window).
pub fn bind_default_framebuffer(gl: &glow::Context) {
    // SAFETY: binding 0 is always valid.
    unsafe { gl.bind_framebuffer(glow::FRAMEBUFFER, None) };
}
