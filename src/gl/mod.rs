//! OpenGL objects the egui_glow way: each wrapper owns one GL name, is released by an explicit
//! `destroy(&gl)` while the context is current, and only warns from `Drop` if that was forgotten
//! (a `Drop` can't know whether the context is still current).
//!
//! All `unsafe` GL calls of the app live here. Their common contract: the `glow::Context` passed
//! in is current on this thread, and the names passed were created by it.
#![allow(unsafe_code)]

mod buffer;
pub mod context;
pub mod external;
mod frame_fences;
mod framebuffer;
mod program;
mod texture;
pub mod timer;

use glow::HasContext;
use serde::Serialize;

use crate::error::{Error, Result};

pub use self::buffer::{Attribute, Buffer, VertexArray};
pub use self::frame_fences::{FrameFences, GL_FRAME_WAIT_LIMIT, GL_FRAMES_QUEUED_AT_MOST};
pub use self::framebuffer::{Framebuffer, bind_default_framebuffer, read_rgba as read_framebuffer_rgba};
pub use self::program::Program;
pub use self::texture::{Texture, max_texture_size};
pub use self::timer::TimerQueries;

/// Vendor, renderer and version strings of a GL context.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct GlInfo {
    /// `GL_VENDOR`, e.g. "NVIDIA Corporation" or "Mesa".
    pub vendor: String,
    /// `GL_RENDERER`, e.g. "NVIDIA H200/PCIe/SSE2" or "llvmpipe (LLVM 15.0.6, 256 bits)".
    pub renderer: String,
    /// `GL_VERSION`.
    pub version: String,
    /// The extensions for sharing with other APIs that the context offers (of
    /// [`SHARING_EXTENSIONS`]).
    #[serde(default)]
    pub sharing: Vec<String>,
}

/// What GL needs to import memory (`--transfer external`) and semaphores
/// (`--transfer external-semaphores`) that another API made.
pub const SHARING_EXTENSIONS: [&str; 4] =
    ["GL_EXT_memory_object", "GL_EXT_memory_object_fd", "GL_EXT_semaphore", "GL_EXT_semaphore_fd"];

impl GlInfo {
    /// Reads the strings of the current context.
    pub fn query(gl: &glow::Context) -> Self {
        let extensions = gl.supported_extensions();
        let sharing = SHARING_EXTENSIONS.iter().filter(|e| extensions.contains(**e)).map(|e| e.to_string()).collect();
        // SAFETY: plain queries on the current context.
        unsafe {
            Self {
                vendor: gl.get_parameter_string(glow::VENDOR),
                renderer: gl.get_parameter_string(glow::RENDERER),
                version: gl.get_parameter_string(glow::VERSION),
                sharing,
            }
        }
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

pub(crate) fn warn_leak(what: &str) {
    log::warn!("{what} dropped without destroy(): its GL object leaks until the context is destroyed");
}

/// Blending and depth state a demo draws with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrawState {
    /// Opaque geometry with depth testing.
    DepthTested,
    /// Additive blending, no depth test (glowing particles).
    Additive,
}

/// Clears the whole framebuffer (depth too where `state` tests it: additive scenes do not, and
/// every depth-tested scene clears it as it begins), sets the viewport to `origin`/`size`, then
/// sets `state`.
pub fn begin_scene(gl: &glow::Context, origin: [u32; 2], size: [u32; 2], clear: [f32; 4], state: DrawState) {
    // SAFETY: state changes on the current context.
    unsafe {
        gl.disable(glow::SCISSOR_TEST);
        gl.viewport(origin[0] as i32, origin[1] as i32, size[0].max(1) as i32, size[1].max(1) as i32);
        gl.clear_color(clear[0], clear[1], clear[2], clear[3]);
        gl.clear_depth_f32(1.0);
        match state {
            DrawState::DepthTested => gl.clear(glow::COLOR_BUFFER_BIT | glow::DEPTH_BUFFER_BIT),
            DrawState::Additive => gl.clear(glow::COLOR_BUFFER_BIT),
        }
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

/// An empty vertex array bound for a draw whose vertices the shader makes up (a full-screen
/// triangle from `gl_VertexID`).
pub fn draw_fullscreen_triangle(gl: &glow::Context, vertex_array: &VertexArray) {
    vertex_array.draw_arrays(gl, glow::TRIANGLES, 3);
}

/// Blocks until GL has executed every command issued so far (a fence and a client wait: unlike
/// `glFinish`, it says when the work is done without draining anything issued later).
pub fn wait_for_gl(gl: &glow::Context) -> Result<()> {
    Fence::place(gl)?.wait(gl)
}

/// A GL fence: placed after some commands, waited for on the host, deleted once waited (the
/// wait consumes it, so it is never deleted twice or leaked on the wait's path).
#[derive(Debug)]
pub struct Fence(glow::Fence);

impl Fence {
    /// Places a fence after every command issued so far.
    pub fn place(gl: &glow::Context) -> Result<Self> {
        // SAFETY: fence creation on the current context.
        unsafe { gl.fence_sync(glow::SYNC_GPU_COMMANDS_COMPLETE, 0).map(Self).map_err(Error::Gl) }
    }

    /// Blocks until GL has passed the fence (flushing first), then deletes it.
    pub fn wait(self, gl: &glow::Context) -> Result<()> {
        // SAFETY: the fence is live; it is deleted once, here.
        unsafe {
            let mut flags = glow::SYNC_FLUSH_COMMANDS_BIT;
            let outcome = loop {
                match gl.client_wait_sync(self.0, flags, 1_000_000_000) {
                    glow::TIMEOUT_EXPIRED => flags = 0,
                    status => break status,
                }
            };
            gl.delete_sync(self.0);
            if outcome == glow::WAIT_FAILED {
                return Err(Error::Gl("glClientWaitSync failed".to_owned()));
            }
        }
        Ok(())
    }

    /// Blocks until GL has passed the fence (flushing first) or `limit` has passed, then deletes
    /// it. `false`: `limit` passed first.
    pub fn wait_at_most(self, gl: &glow::Context, limit: std::time::Duration) -> Result<bool> {
        let started = std::time::Instant::now();
        // SAFETY: the fence is live; it is deleted once, here.
        unsafe {
            let mut flags = glow::SYNC_FLUSH_COMMANDS_BIT;
            let outcome = loop {
                let left = limit.saturating_sub(started.elapsed());
                // glClientWaitSync takes nanoseconds as a GLuint64; glow passes an i32, so the
                // wait goes in slices of at most a second.
                let slice = left.min(std::time::Duration::from_secs(1)).as_nanos() as i32;
                match gl.client_wait_sync(self.0, flags, slice) {
                    glow::TIMEOUT_EXPIRED if !left.is_zero() => flags = 0,
                    status => break status,
                }
            };
            gl.delete_sync(self.0);
            match outcome {
                glow::WAIT_FAILED => Err(Error::Gl("glClientWaitSync failed".to_owned())),
                glow::TIMEOUT_EXPIRED => Ok(false),
                _ => Ok(true),
            }
        }
    }

    /// Deletes the fence without waiting.
    pub fn delete(self, gl: &glow::Context) {
        // SAFETY: the fence is live; it is deleted once, here.
        unsafe { gl.delete_sync(self.0) };
    }
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

    /// Each kind with its count, named.
    pub fn kinds(self) -> [(&'static str, u64); 4] {
        [
            ("buffers", self.buffers),
            ("textures", self.textures),
            ("framebuffers", self.framebuffers),
            ("programs", self.programs),
        ]
    }
}
