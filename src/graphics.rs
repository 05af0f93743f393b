//! The graphics API a frame is drawn with, as a handle the layers above pass on: the transfer
//! paths (which give CUDA the API's memory) and the renderer take what they need from it; the
//! demos never look inside.

/// The graphics API a frame is drawn with, as demos pass it on: the context (current on this
/// thread) that the transfer paths and the renderer work in.
#[derive(Clone, Copy)]
pub enum Graphics<'a> {
    /// OpenGL.
    Gl(&'a glow::Context),
}

impl<'a> Graphics<'a> {
    /// The GL context, for the GL implementations of the transfer paths and of drawing.
    pub fn gl(self) -> &'a glow::Context {
        match self {
            Graphics::Gl(gl) => gl,
        }
    }
}

impl<'a> From<&'a glow::Context> for Graphics<'a> {
    fn from(gl: &'a glow::Context) -> Self {
        Graphics::Gl(gl)
    }
}
