//! OpenGL objects the egui_glow way: each wrapper owns one GL name, is released by an explicit
//! `destroy(&gl)` while the context is current, and only warns from `Drop` if that was forgotten
//! (a `Drop` can't know whether the context is still current).
//!
//! All `unsafe` GL calls of the app live here. Their common contract: the `glow::Context` passed
//! in is current on this thread, and the names passed were created by it.
#![allow(unsafe_code)]

pub mod context;
pub mod external;
pub mod timer;

use glow::HasContext;
use serde::Serialize;

use crate::{Error, Result};

pub use self::timer::TimerQueries;

/// Vendor, renderer and version strings of a GL context.
#[derive(Debug, Clone, Serialize)]
pub struct GlInfo {
    /// `GL_VENDOR`, e.g. "NVIDIA Corporation" or "Mesa".
    pub vendor: String,
    /// `GL_RENDERER`, e.g. "NVIDIA H200/PCIe/SSE2" or "llvmpipe (LLVM 15.0.6, 256 bits)".
    pub renderer: String,
    /// `GL_VERSION`.
    pub version: String,
}

impl GlInfo {
    /// Reads the strings of the current context.
    pub fn query(gl: &glow::Context) -> Self {
        // SAFETY: plain queries on the current context.
        unsafe {
            Self {
                vendor: gl.get_parameter_string(glow::VENDOR),
                renderer: gl.get_parameter_string(glow::RENDERER),
                version: gl.get_parameter_string(glow::VERSION),
            }
        }
    }

    /// Whether the renderer is NVIDIA's driver (as opposed to Mesa, Intel, AMD...).
    pub fn is_nvidia(&self) -> bool {
        self.vendor.contains("NVIDIA")
    }
}

/// Returns the first pending GL error as an [`Error`] naming `what` was being done.
pub fn check_error(gl: &glow::Context, what: &str) -> Result<()> {
    // SAFETY: glGetError on the current context.
    let code = unsafe { gl.get_error() };
    if code == glow::NO_ERROR {
        return Ok(());
    }
    let name = match code {
        glow::INVALID_ENUM => "GL_INVALID_ENUM",
        glow::INVALID_VALUE => "GL_INVALID_VALUE",
        glow::INVALID_OPERATION => "GL_INVALID_OPERATION",
        glow::OUT_OF_MEMORY => "GL_OUT_OF_MEMORY",
        glow::INVALID_FRAMEBUFFER_OPERATION => "GL_INVALID_FRAMEBUFFER_OPERATION",
        _ => "unknown GL error",
    };
    Err(Error::Gl(format!("{what}: {name} (0x{code:04x})")))
}

fn warn_leak(what: &str) {
    log::warn!("{what} dropped without destroy(): its GL object leaks until the context is destroyed");
}

/// A linked vertex + fragment shader program.
pub struct Program {
    raw: Option<glow::Program>,
}

impl Program {
    /// Compiles and links. Errors carry the GL info log with the shader's name.
    pub fn new(gl: &glow::Context, name: &str, vertex_source: &str, fragment_source: &str) -> Result<Self> {
        // SAFETY: GL calls on the current context; every object created is deleted on each path.
        unsafe {
            let program = gl.create_program().map_err(Error::Gl)?;
            let mut shaders = Vec::new();
            for (kind, source, label) in
                [(glow::VERTEX_SHADER, vertex_source, "vertex"), (glow::FRAGMENT_SHADER, fragment_source, "fragment")]
            {
                let shader = gl.create_shader(kind).map_err(Error::Gl)?;
                gl.shader_source(shader, source);
                gl.compile_shader(shader);
                if !gl.get_shader_compile_status(shader) {
                    let log = gl.get_shader_info_log(shader);
                    gl.delete_shader(shader);
                    for s in shaders {
                        gl.delete_shader(s);
                    }
                    gl.delete_program(program);
                    return Err(Error::Gl(format!("{name}: {label} shader does not compile:\n{log}")));
                }
                gl.attach_shader(program, shader);
                shaders.push(shader);
            }
            gl.link_program(program);
            let linked = gl.get_program_link_status(program);
            let log = gl.get_program_info_log(program);
            for shader in shaders {
                gl.detach_shader(program, shader);
                gl.delete_shader(shader);
            }
            if !linked {
                gl.delete_program(program);
                return Err(Error::Gl(format!("{name}: program does not link:\n{log}")));
            }
            Ok(Self { raw: Some(program) })
        }
    }

    fn raw(&self) -> Result<glow::Program> {
        self.raw.ok_or_else(|| Error::Gl("program used after destroy()".to_owned()))
    }

    /// Makes the program current.
    pub fn bind(&self, gl: &glow::Context) -> Result<()> {
        let raw = self.raw()?;
        // SAFETY: live program of the current context.
        unsafe { gl.use_program(Some(raw)) };
        Ok(())
    }

    fn location(&self, gl: &glow::Context, name: &str) -> Option<glow::UniformLocation> {
        // SAFETY: live program of the current context.
        self.raw.and_then(|raw| unsafe { gl.get_uniform_location(raw, name) })
    }

    /// Sets a `mat4` uniform (the program must be bound). A uniform the shader optimised away is skipped.
    pub fn set_mat4(&self, gl: &glow::Context, name: &str, value: &glam::Mat4) {
        let location = self.location(gl, name);
        // SAFETY: uniform of the bound program; 16 floats.
        unsafe { gl.uniform_matrix_4_f32_slice(location.as_ref(), false, &value.to_cols_array()) };
    }

    /// Sets a `float` uniform (the program must be bound).
    pub fn set_f32(&self, gl: &glow::Context, name: &str, value: f32) {
        let location = self.location(gl, name);
        // SAFETY: uniform of the bound program.
        unsafe { gl.uniform_1_f32(location.as_ref(), value) };
    }

    /// Sets a `vec2` uniform (the program must be bound).
    pub fn set_vec2(&self, gl: &glow::Context, name: &str, value: glam::Vec2) {
        let location = self.location(gl, name);
        // SAFETY: uniform of the bound program.
        unsafe { gl.uniform_2_f32(location.as_ref(), value.x, value.y) };
    }

    /// Sets an `int` uniform (the program must be bound).
    pub fn set_i32(&self, gl: &glow::Context, name: &str, value: i32) {
        let location = self.location(gl, name);
        // SAFETY: uniform of the bound program.
        unsafe { gl.uniform_1_i32(location.as_ref(), value) };
    }

    /// Deletes the program.
    pub fn destroy(&mut self, gl: &glow::Context) {
        if let Some(raw) = self.raw.take() {
            // SAFETY: live program of the current context, deleted once.
            unsafe { gl.delete_program(raw) };
        }
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        if self.raw.is_some() {
            warn_leak("Program");
        }
    }
}

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
    fn from_raw(raw: glow::Buffer, bytes: usize) -> Self {
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

/// Blending and depth state a demo draws with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrawState {
    /// Opaque geometry with depth testing.
    DepthTested,
    /// Additive blending, no depth test (glowing particles).
    Additive,
}

/// Clears the framebuffer, sets the viewport to `origin`/`size`, then sets `state`.
pub fn begin_scene(gl: &glow::Context, origin: [u32; 2], size: [u32; 2], clear: [f32; 4], state: DrawState) {
    // SAFETY: state changes on the current context.
    unsafe {
        gl.disable(glow::SCISSOR_TEST);
        gl.viewport(origin[0] as i32, origin[1] as i32, size[0].max(1) as i32, size[1].max(1) as i32);
        gl.clear_color(clear[0], clear[1], clear[2], clear[3]);
        gl.clear_depth_f32(1.0);
        gl.clear(glow::COLOR_BUFFER_BIT | glow::DEPTH_BUFFER_BIT);
        gl.enable(glow::PROGRAM_POINT_SIZE);
        match state {
            DrawState::DepthTested => {
                gl.enable(glow::DEPTH_TEST);
                gl.depth_func(glow::LESS);
                gl.disable(glow::BLEND);
            }
            DrawState::Additive => {
                gl.disable(glow::DEPTH_TEST);
                gl.enable(glow::BLEND);
                gl.blend_func(glow::SRC_ALPHA, glow::ONE);
            }
        }
    }
}

/// Ends a scene: leaves the state egui expects (no depth test).
pub fn end_scene(gl: &glow::Context) {
    // SAFETY: state changes on the current context.
    unsafe {
        gl.disable(glow::DEPTH_TEST);
        gl.disable(glow::BLEND);
        gl.disable(glow::PROGRAM_POINT_SIZE);
    }
}

/// `glFinish`: waits until GL has executed everything issued.
pub fn finish(gl: &glow::Context) {
    // SAFETY: no arguments.
    unsafe { gl.finish() };
}

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
        let [width, height] = self.size;
        let row = width as usize * 4;
        let mut pixels = vec![0u8; row * height as usize];
        // SAFETY: `pixels` holds exactly width × height RGBA8 pixels; pack alignment 1 matches.
        unsafe {
            gl.bind_framebuffer(glow::READ_FRAMEBUFFER, self.raw);
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

/// Binds the default framebuffer (the window).
pub fn bind_default_framebuffer(gl: &glow::Context) {
    // SAFETY: binding 0 is always valid.
    unsafe { gl.bind_framebuffer(glow::FRAMEBUFFER, None) };
}

/// Pixel formats of the images the app shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum PixelFormat {
    /// 8 bits per channel, unsigned normalised.
    Rgba8,
    /// 32-bit float per channel.
    Rgba32f,
}

impl PixelFormat {
    /// Bytes per pixel.
    pub fn bytes_per_pixel(self) -> usize {
        match self {
            PixelFormat::Rgba8 => 4,
            PixelFormat::Rgba32f => 16,
        }
    }

    fn internal_format(self) -> u32 {
        match self {
            PixelFormat::Rgba8 => glow::RGBA8,
            PixelFormat::Rgba32f => glow::RGBA32F,
        }
    }

    fn component_type(self) -> u32 {
        match self {
            PixelFormat::Rgba8 => glow::UNSIGNED_BYTE,
            PixelFormat::Rgba32f => glow::FLOAT,
        }
    }

    /// "rgba8" or "rgba32f".
    pub fn name(self) -> &'static str {
        match self {
            PixelFormat::Rgba8 => "rgba8",
            PixelFormat::Rgba32f => "rgba32f",
        }
    }
}

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
                format.internal_format() as i32,
                size[0] as i32,
                size[1] as i32,
                0,
                glow::RGBA,
                format.component_type(),
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
                self.format.component_type(),
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
                self.format.component_type(),
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

/// An empty vertex array bound for a draw whose vertices the shader makes up (a full-screen
/// triangle from `gl_VertexID`).
pub fn draw_fullscreen_triangle(gl: &glow::Context, vertex_array: &VertexArray) {
    vertex_array.draw_arrays(gl, glow::TRIANGLES, 3);
}

/// Blocks until GL has executed every command issued so far (a fence and a client wait: unlike
/// `glFinish`, it says when the work is done without draining anything issued later).
pub fn wait_for_gl(gl: &glow::Context) -> Result<()> {
    // SAFETY: fence creation, waits and deletion on the current context.
    unsafe {
        let fence = gl.fence_sync(glow::SYNC_GPU_COMMANDS_COMPLETE, 0).map_err(Error::Gl)?;
        let mut flags = glow::SYNC_FLUSH_COMMANDS_BIT;
        let outcome = loop {
            match gl.client_wait_sync(fence, flags, 1_000_000_000) {
                glow::TIMEOUT_EXPIRED => flags = 0,
                status => break status,
            }
        };
        gl.delete_sync(fence);
        if outcome == glow::WAIT_FAILED {
            return Err(Error::Gl("glClientWaitSync failed".to_owned()));
        }
    }
    Ok(())
}

/// Live GL names of each kind, counted with `glIs*` over the first names (drivers hand out small
/// names first and reuse freed ones), to see whether objects leak.
#[derive(Debug, Clone, Copy, serde::Serialize, PartialEq, Eq)]
pub struct GlObjects {
    /// Buffers.
    pub buffers: u64,
    /// Textures.
    pub textures: u64,
    /// Framebuffers.
    pub framebuffers: u64,
    /// Programs.
    pub programs: u64,
}

impl GlObjects {
    /// Counts live names among `1..=names` of each kind. The context must be current.
    pub fn count(gl: &glow::Context, names: u32) -> Self {
        let all = || (1..=names).filter_map(std::num::NonZeroU32::new);
        // SAFETY: glIs* only query; the context is current on this thread.
        unsafe {
            GlObjects {
                buffers: all().filter(|&n| gl.is_buffer(glow::NativeBuffer(n))).count() as u64,
                textures: all().filter(|&n| gl.is_texture(glow::NativeTexture(n))).count() as u64,
                framebuffers: all().filter(|&n| gl.is_framebuffer(glow::NativeFramebuffer(n))).count() as u64,
                programs: all().filter(|&n| gl.is_program(glow::NativeProgram(n))).count() as u64,
            }
        }
    }
}
