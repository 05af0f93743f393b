//! GL buffers and the vertex arrays that read them. The GL context passed in is current and created the names passed (the module contract of [`crate::gl`]).
#![allow(unsafe_code)]

use glow::HasContext;

use super::{check_error, warn_leak};
use crate::error::{Error, Result};

/// A GL buffer object of fixed size.
pub struct Buffer {
    raw: Option<glow::Buffer>,
    bytes: usize,
}

impl Buffer {
    /// A buffer holding `data`, with `GL_DYNAMIC_DRAW` usage (rewritten often, drawn often).
    pub fn new(gl: &glow::Context, data: &[u8]) -> Result<Self> {
        Self::allocate(gl, data.len(), |gl| {
            // SAFETY: a buffer is bound to ARRAY_BUFFER on the current context.
            unsafe { gl.buffer_data_u8_slice(glow::ARRAY_BUFFER, data, glow::DYNAMIC_DRAW) }
        })
    }

    /// A buffer of `bytes` whose contents are undefined until someone writes them
    /// (`glBufferData` with no data), with `GL_DYNAMIC_DRAW` usage.
    pub fn uninitialized(gl: &glow::Context, bytes: usize) -> Result<Self> {
        let size = i32::try_from(bytes)
            .map_err(|_| Error::InvalidInput(format!("a GL buffer of {bytes} bytes exceeds GL's 2 GiB size limit")))?;
        Self::allocate(gl, bytes, |gl| {
            // SAFETY: a buffer is bound to ARRAY_BUFFER on the current context.
            unsafe { gl.buffer_data_size(glow::ARRAY_BUFFER, size, glow::DYNAMIC_DRAW) }
        })
    }

    /// Creates a buffer, binds it to ARRAY_BUFFER while `store` gives it its storage, and checks
    /// GL's error state; the buffer is deleted if that fails.
    fn allocate(gl: &glow::Context, bytes: usize, store: impl FnOnce(&glow::Context)) -> Result<Self> {
        // SAFETY: GL calls on the current context; the buffer is deleted if the allocation fails.
        unsafe {
            let raw = gl.create_buffer().map_err(Error::Gl)?;
            gl.bind_buffer(glow::ARRAY_BUFFER, Some(raw));
            store(gl);
            gl.bind_buffer(glow::ARRAY_BUFFER, None);
            if let Err(error) = check_error(gl, "allocating a GL buffer") {
                gl.delete_buffer(raw);
                return Err(error);
            }
            Ok(Self { raw: Some(raw), bytes })
        }
    }

    /// Takes ownership of a buffer created elsewhere in this module with `bytes` of storage.
    pub(super) fn from_raw(raw: glow::Buffer, bytes: usize) -> Self {
        Self { raw: Some(raw), bytes }
    }

    /// The GL name, for registration with CUDA.
    pub fn name(&self) -> u32 {
        self.raw.map(|raw| raw.0.get()).unwrap_or(0)
    }

    /// The glow handle.
    pub fn raw(&self) -> Option<glow::Buffer> {
        self.raw
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.bytes
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// `glBufferSubData` of `data` at offset 0.
    pub fn write(&self, gl: &glow::Context, data: &[u8]) -> Result<()> {
        let raw = self.raw.ok_or_else(|| Error::Gl("buffer used after destroy()".to_owned()))?;
        if data.len() > self.bytes {
            return Err(Error::Gl(format!("writing {} bytes into a buffer of {}", data.len(), self.bytes)));
        }
        // SAFETY: live buffer; the range fits (checked above).
        unsafe {
            gl.bind_buffer(glow::ARRAY_BUFFER, Some(raw));
            gl.buffer_sub_data_u8_slice(glow::ARRAY_BUFFER, 0, data);
            gl.bind_buffer(glow::ARRAY_BUFFER, None);
        }
        Ok(())
    }

    /// `glGetBufferSubData` of the whole buffer (waits for GL work that writes it).
    pub fn read(&self, gl: &glow::Context) -> Result<Vec<u8>> {
        let raw = self.raw.ok_or_else(|| Error::Gl("buffer used after destroy()".to_owned()))?;
        let mut data = vec![0u8; self.bytes];
        // SAFETY: live buffer; `data` has exactly the buffer's size.
        unsafe {
            gl.bind_buffer(glow::ARRAY_BUFFER, Some(raw));
            gl.get_buffer_sub_data(glow::ARRAY_BUFFER, 0, &mut data);
            gl.bind_buffer(glow::ARRAY_BUFFER, None);
        }
        check_error(gl, "reading a GL buffer")?;
        Ok(data)
    }

    /// Deletes the buffer.
    pub fn destroy(&mut self, gl: &glow::Context) {
        if let Some(raw) = self.raw.take() {
            // SAFETY: live buffer of the current context, deleted once.
            unsafe { gl.delete_buffer(raw) };
        }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if self.raw.is_some() {
            warn_leak("Buffer");
        }
    }
}

/// One vertex attribute read from a buffer: `components` floats at `offset` every `stride` bytes.
#[derive(Debug, Clone, Copy)]
pub struct Attribute {
    /// Shader attribute location.
    pub location: u32,
    /// Floats per vertex (1–4).
    pub components: i32,
    /// Bytes between consecutive vertices.
    pub stride: i32,
    /// Byte offset of the first one.
    pub offset: i32,
}

/// A vertex array object.
pub struct VertexArray {
    raw: Option<glow::VertexArray>,
}

impl VertexArray {
    /// An empty vertex array.
    pub fn new(gl: &glow::Context) -> Result<Self> {
        // SAFETY: object creation on the current context.
        let raw = unsafe { gl.create_vertex_array() }.map_err(Error::Gl)?;
        Ok(Self { raw: Some(raw) })
    }

    /// Points the given float attributes at `buffer` (and sets `indices` as the element buffer).
    pub fn set_attributes(
        &self,
        gl: &glow::Context,
        buffer: &Buffer,
        attributes: &[Attribute],
        indices: Option<&Buffer>,
    ) -> Result<()> {
        let raw = self.raw.ok_or_else(|| Error::Gl("vertex array used after destroy()".to_owned()))?;
        // SAFETY: live objects of the current context; offsets are within the buffer for the
        // vertex counts the callers draw.
        unsafe {
            gl.bind_vertex_array(Some(raw));
            gl.bind_buffer(glow::ARRAY_BUFFER, buffer.raw());
            for attribute in attributes {
                gl.enable_vertex_attrib_array(attribute.location);
                gl.vertex_attrib_pointer_f32(
                    attribute.location,
                    attribute.components,
                    glow::FLOAT,
                    false,
                    attribute.stride,
                    attribute.offset,
                );
            }
            if let Some(indices) = indices {
                gl.bind_buffer(glow::ELEMENT_ARRAY_BUFFER, indices.raw());
            }
            gl.bind_vertex_array(None);
            gl.bind_buffer(glow::ARRAY_BUFFER, None);
        }
        check_error(gl, "setting vertex attributes")
    }

    /// Draws `count` vertices as `mode` (e.g. `glow::POINTS`).
    pub fn draw_arrays(&self, gl: &glow::Context, mode: u32, count: i32) {
        // SAFETY: live vertex array; the caller's count fits its buffers.
        unsafe {
            gl.bind_vertex_array(self.raw);
            gl.draw_arrays(mode, 0, count);
            gl.bind_vertex_array(None);
        }
    }

    /// Draws `count` 32-bit indices from the element buffer as `mode`.
    pub fn draw_elements(&self, gl: &glow::Context, mode: u32, count: i32) {
        // SAFETY: live vertex array with an element buffer of ≥ count u32 indices.
        unsafe {
            gl.bind_vertex_array(self.raw);
            gl.draw_elements(mode, count, glow::UNSIGNED_INT, 0);
            gl.bind_vertex_array(None);
        }
    }

    /// Deletes the vertex array.
    pub fn destroy(&mut self, gl: &glow::Context) {
        if let Some(raw) = self.raw.take() {
            // SAFETY: live object, deleted once.
            unsafe { gl.delete_vertex_array(raw) };
        }
    }
}

impl Drop for VertexArray {
    fn drop(&mut self) {
        if self.raw.is_some() {
            warn_leak("VertexArray");
        }
    }
}
