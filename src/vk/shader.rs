//! Vulkan shader modules from GLSL files (`shaders/vulkan/`), compiled to SPIR-V at run time by
//! naga's GLSL front end, so a shader edit needs no tool beyond the app, as with NVRTC's kernels.
//! A shader that does not compile fails with naga's message, naming the file and the line.
#![allow(unsafe_code)]

use std::rc::Rc;

use ash::vk;

use super::device::VulkanContext;
use super::vk_error;
use crate::error::{Error, Result};
use crate::sources::SourceFile;

/// The pipeline stage a shader file is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShaderStage {
    /// Vertex shader.
    Vertex,
    /// Fragment shader.
    Fragment,
}

/// GLSL (Vulkan flavour, `#version 450`) compiled to SPIR-V words.
pub fn compile(file: &SourceFile, stage: ShaderStage) -> Result<Vec<u32>> {
    let source = file.embedded;
    let naga_stage = match stage {
        ShaderStage::Vertex => naga::ShaderStage::Vertex,
        ShaderStage::Fragment => naga::ShaderStage::Fragment,
    };
    let failed = |message: String| Error::Vulkan {
        call: "compiling a shader",
        result: format!("{}: {message}", file.name),
        hint: Some("fix the shader file (GLSL #version 450, Vulkan flavour)"),
    };
    let mut frontend = naga::front::glsl::Frontend::default();
    let module = frontend
        .parse(&naga::front::glsl::Options::from(naga_stage), source)
        .map_err(|e| failed(e.emit_to_string_with_path(source, file.name)))?;
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::all())
        .validate(&module)
        .map_err(|e| failed(e.emit_to_string_with_path(source, file.name)))?;
    let pipeline = naga::back::spv::PipelineOptions { shader_stage: naga_stage, entry_point: "main".to_owned() };
    // naga flips gl_Position.y by default (wgpu's convention); the shaders here mean what they say,
    // and the target flips its viewport instead, as GL's y-up needs.
    let mut options = naga::back::spv::Options::default();
    options.flags.remove(naga::back::spv::WriterFlags::ADJUST_COORDINATE_SPACE);
    naga::back::spv::write_vec(&module, &info, &options, Some(&pipeline)).map_err(|e| failed(e.to_string()))
}

/// A shader module, destroyed on drop.
pub struct ShaderModule {
    module: vk::ShaderModule,
    context: Rc<VulkanContext>,
}

impl ShaderModule {
    /// Compiles `file` for `stage` and makes a module of it.
    pub fn new(context: &Rc<VulkanContext>, file: &SourceFile, stage: ShaderStage) -> Result<Self> {
        let words = compile(file, stage)?;
        let create_info = vk::ShaderModuleCreateInfo::default().code(&words);
        // SAFETY: valid SPIR-V words (naga validated the module); destroyed in Drop.
        let module = unsafe { context.device().create_shader_module(&create_info, None) }
            .map_err(|e| vk_error("vkCreateShaderModule", e))?;
        Ok(Self { module, context: context.clone() })
    }

    /// The Vulkan handle, for pipelines.
    pub fn raw(&self) -> vk::ShaderModule {
        self.module
    }
}

impl Drop for ShaderModule {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once; pipelines made from it keep their own copy.
        unsafe { self.context.device().destroy_shader_module(self.module, None) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_shader_fails_with_its_file_name_and_the_reason() {
        let broken =
            SourceFile { name: "broken.frag", embedded: "#version 450\nvoid main() { undefined_thing = 1.0; }\n" };
        let message = compile(&broken, ShaderStage::Fragment).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("broken.frag") && message.contains("undefined_thing"), "{message}");
    }
}
