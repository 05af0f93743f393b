//! The graphics API a frame is drawn with, as a handle the layers above pass on: the transfer
//! paths (which give CUDA the API's memory) and the renderer take what they need from it; the
//! demos never look inside.

use crate::error::{Error, Result};
use crate::vk::frame::VulkanGraphics;

/// Which graphics API a run draws with (`--renderer`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GraphicsApi {
    /// OpenGL: every transfer path (GL interop, external memory, host copy, CPU).
    Gl,
    /// Vulkan: CUDA writes memory Vulkan allocated, ordered by timeline semaphores; or a copy
    /// through host memory; or the CPU.
    Vulkan,
}

impl GraphicsApi {
    /// "OpenGL" or "Vulkan".
    pub fn label(self) -> &'static str {
        match self {
            GraphicsApi::Gl => "OpenGL",
            GraphicsApi::Vulkan => "Vulkan",
        }
    }

    /// The API as `--renderer` takes it: "gl" or "vulkan".
    pub fn flag(self) -> &'static str {
        match self {
            GraphicsApi::Gl => "gl",
            GraphicsApi::Vulkan => "vulkan",
        }
    }

    /// Every API, in the order a run tries them.
    pub const ALL: [GraphicsApi; 2] = [GraphicsApi::Gl, GraphicsApi::Vulkan];

    /// The API a run moves to when this one cannot go on: a window that cannot start, or a
    /// device whose frames waited for a lost CUDA context. `None`: this is the last resort.
    pub fn fallback(self) -> Option<GraphicsApi> {
        match self {
            GraphicsApi::Vulkan => Some(GraphicsApi::Gl),
            GraphicsApi::Gl => None,
        }
    }

    /// The pipeline depth (buffers used in turn) that pays on this API, for a demo whose default
    /// follows the API. Vulkan's frames in flight spread each hand-off over several frames: the
    /// wave at depths 1, 2, 3 ran 1,375, 1,737, 1,842 frames/s at 1280×800 on an H100
    /// (2026-12-06). On GL a deeper ring does not change the period
    /// (docs/frames-at-kernel-speed.md): 1.
    pub fn preferred_pipeline_depth(self) -> u32 {
        match self {
            GraphicsApi::Vulkan => 3,
            GraphicsApi::Gl => 1,
        }
    }

    /// What a window's title says after the demo's name: nothing for the first API, the API's
    /// name for the others.
    pub fn title_note(self) -> String {
        if self == GraphicsApi::ALL[0] { String::new() } else { format!(" ({})", self.label()) }
    }
}

/// The graphics API a frame is drawn with, as demos pass it on: the context (current on this
/// thread) that the transfer paths and the renderer work in.
#[derive(Clone, Copy)]
pub enum Graphics<'a> {
    /// OpenGL.
    Gl(&'a glow::Context),
    /// Vulkan: the device, the offscreen target and the frame being recorded.
    Vulkan(&'a VulkanGraphics),
}

impl<'a> Graphics<'a> {
    /// Which API this is.
    pub fn api(self) -> GraphicsApi {
        match self {
            Graphics::Gl(_) => GraphicsApi::Gl,
            Graphics::Vulkan(_) => GraphicsApi::Vulkan,
        }
    }

    /// The GL context, for the GL implementations of the transfer paths and of drawing.
    pub fn gl(self) -> Result<&'a glow::Context> {
        match self {
            Graphics::Gl(gl) => Ok(gl),
            Graphics::Vulkan(_) => Err(Error::Unavailable(
                "this needs OpenGL, and the frame is drawn with Vulkan: use --renderer gl, or a path Vulkan \
                 offers (--transfer auto, copy or pageable)"
                    .to_owned(),
            )),
        }
    }

    /// The Vulkan side, for the Vulkan implementations.
    pub fn vulkan(self) -> Result<&'a VulkanGraphics> {
        match self {
            Graphics::Vulkan(vulkan) => Ok(vulkan),
            Graphics::Gl(_) => {
                Err(Error::Unavailable("this needs Vulkan, and the frame is drawn with OpenGL".to_owned()))
            }
        }
    }
}

impl<'a> From<&'a glow::Context> for Graphics<'a> {
    fn from(gl: &'a glow::Context) -> Self {
        Graphics::Gl(gl)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fallback_chain_ends_and_each_api_declares_what_differs() {
        use clap::ValueEnum;
        assert_eq!(GraphicsApi::value_variants(), &GraphicsApi::ALL, "an API left out of GraphicsApi::ALL");
        for api in GraphicsApi::ALL {
            let mut seen = vec![api];
            let mut at = api;
            while let Some(next) = at.fallback() {
                assert!(!seen.contains(&next), "{api:?}'s fallbacks come back to {next:?}");
                seen.push(next);
                at = next;
            }
            assert!((1..=4).contains(&api.preferred_pipeline_depth()), "{api:?}: a depth --pipeline-depth takes");
        }
        assert_eq!(GraphicsApi::Gl.title_note(), "");
        assert_eq!(GraphicsApi::Vulkan.title_note(), " (Vulkan)");
    }
}
