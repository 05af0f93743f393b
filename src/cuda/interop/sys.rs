//! The `cudaGL.h` entry points, the only raw CUDA–OpenGL functions in the project.
//!
//! cudarc does not bind `cudaGL.h`, so each one is resolved by name through `cuGetProcAddress`
//! and given its documented C signature here.
#![allow(unsafe_code)]

use cudarc::driver::sys::{CUdevice, CUgraphicsResource, CUresult};

use crate::cuda::driver::proc_address;
use crate::error::Result;

/// `cuGraphicsGLRegisterBuffer(CUgraphicsResource*, GLuint buffer, unsigned int flags)`.
pub type RegisterBufferFn = unsafe extern "C" fn(*mut CUgraphicsResource, u32, u32) -> CUresult;
/// `cuGraphicsGLRegisterImage(CUgraphicsResource*, GLuint image, GLenum target, unsigned int flags)`.
pub type RegisterImageFn = unsafe extern "C" fn(*mut CUgraphicsResource, u32, u32, u32) -> CUresult;
/// `cuGLGetDevices(unsigned int* count, CUdevice* devices, unsigned int capacity, CUGLDeviceList which)`.
pub type GetDevicesFn = unsafe extern "C" fn(*mut u32, *mut CUdevice, u32, u32) -> CUresult;

/// `CU_GL_DEVICE_LIST_ALL`: every CUDA device the current GL context runs on.
pub const GL_DEVICE_LIST_ALL: u32 = 1;

/// The three `cudaGL.h` functions the app uses.
#[derive(Clone, Copy)]
pub struct GlEntryPoints {
    /// Registers a GL buffer object.
    pub register_buffer: RegisterBufferFn,
    /// Registers a GL texture or renderbuffer.
    pub register_image: RegisterImageFn,
    /// Lists the CUDA devices of the current GL context.
    pub get_devices: GetDevicesFn,
}

impl std::fmt::Debug for GlEntryPoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GlEntryPoints")
    }
}

impl GlEntryPoints {
    /// Resolves the entry points. The driver must be initialised.
    pub fn load() -> Result<Self> {
        let register_buffer = proc_address(c"cuGraphicsGLRegisterBuffer")?;
        let register_image = proc_address(c"cuGraphicsGLRegisterImage")?;
        let get_devices = proc_address(c"cuGLGetDevices")?;
        // SAFETY: each pointer is the driver's entry point for exactly the symbol named, at the
        // CUDA 12.0 ABI, whose C signatures are the ones in the type aliases above.
        unsafe {
            Ok(Self {
                register_buffer: std::mem::transmute::<*mut std::ffi::c_void, RegisterBufferFn>(register_buffer),
                register_image: std::mem::transmute::<*mut std::ffi::c_void, RegisterImageFn>(register_image),
                get_devices: std::mem::transmute::<*mut std::ffi::c_void, GetDevicesFn>(get_devices),
            })
        }
    }
}
