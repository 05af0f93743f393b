//! A linked vertex + fragment shader program and its uniforms. The GL context passed in is current and created the names passed (the module contract of [`crate::gl`]).
#![allow(unsafe_code)]

use glow::HasContext;

use super::warn_leak;
use crate::error::{Error, Result};

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
