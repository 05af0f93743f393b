//! The driver library itself: is it there, `cuInit`, versions, error names, `cuGetProcAddress`.
//!
//! cudarc loads `libcuda` lazily and panics when it is missing, so every path into CUDA starts
//! with [`load`], which asks first.
#![allow(unsafe_code)]

use std::ffi::{CStr, c_void};

use cudarc::driver::sys;

use crate::error::{Error, Result};

/// The CUDA version the app asks `cuGetProcAddress` for. 12.0 keeps every entry point we resolve
/// that way at the signature it had in 12.0, so a 12.x driver and a 13.x driver give the same ABI.
pub const ENTRY_POINT_VERSION: i32 = 12000;

/// A loaded, initialised CUDA driver.
#[derive(Debug, Clone, Copy)]
pub struct Driver {
    /// `cuDriverGetVersion`: the newest CUDA version the driver supports, e.g. `(13, 0)`.
    pub version: (i32, i32),
    /// Host time of `cuInit` and `cuDriverGetVersion`, µs (for the setup trace).
    pub init_us: [f64; 2],
}

/// Whether `libcuda.so.1` can be loaded (without initialising anything).
pub fn driver_library_present() -> bool {
    // SAFETY: only tries to dlopen the library and drops the handle.
    unsafe { sys::is_culib_present() }
}

/// Whether `libnvrtc` can be loaded.
pub fn nvrtc_library_present() -> bool {
    // SAFETY: only tries to dlopen the library and drops the handle.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// Loads the driver library, calls `cuInit(0)` and reads the driver's CUDA version.
pub fn load() -> Result<Driver> {
    if !driver_library_present() {
        return Err(Error::NoCudaDriver);
    }
    let started = std::time::Instant::now();
    // SAFETY: the library is present (checked above), so cudarc's lazy loader will not panic.
    check(unsafe { sys::cuInit(0) }, "cuInit")?;
    let init_us = started.elapsed().as_secs_f64() * 1e6;
    let started = std::time::Instant::now();
    let mut version = 0;
    // SAFETY: `version` is a valid out-pointer.
    check(unsafe { sys::cuDriverGetVersion(&mut version) }, "cuDriverGetVersion")?;
    Ok(Driver { version: split_version(version), init_us: [init_us, started.elapsed().as_secs_f64() * 1e6] })
}

/// NVRTC's version, `(major, minor)`.
pub fn nvrtc_version() -> Result<(i32, i32)> {
    if !nvrtc_library_present() {
        return Err(Error::NoNvrtc);
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: the library is present; both are valid out-pointers.
    let status = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    nvrtc_check(status, "nvrtcVersion")?;
    Ok((major, minor))
}

/// `12080` → `(12, 8)`.
pub fn split_version(version: i32) -> (i32, i32) {
    (version / 1000, (version % 1000) / 10)
}

/// Turns a `CUresult` into a [`Result`], with the driver's own name and description of the error.
pub fn check(status: sys::CUresult, call: &'static str) -> Result<()> {
    if status == sys::CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    Err(cuda_error(status, call))
}

/// The [`Error`] for a failed driver call.
pub fn cuda_error(status: sys::CUresult, call: &'static str) -> Error {
    if !driver_library_present() {
        // Only reachable from tests that fabricate a status without a driver.
        return Error::Cuda {
            call,
            code: status as u32,
            name: format!("{status:?}"),
            description: String::new(),
            hint: hint(status, call),
        };
    }
    let mut name_ptr: *const std::ffi::c_char = std::ptr::null();
    let mut text_ptr: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: a CUresult exists only if the library was loaded; both are valid out-pointers, and
    // the strings they receive are static in the driver.
    let (name, description) = unsafe {
        let name = if sys::cuGetErrorName(status, &mut name_ptr) == sys::CUresult::CUDA_SUCCESS && !name_ptr.is_null() {
            CStr::from_ptr(name_ptr).to_string_lossy().into_owned()
        } else {
            format!("CUresult {}", status as u32)
        };
        let description =
            if sys::cuGetErrorString(status, &mut text_ptr) == sys::CUresult::CUDA_SUCCESS && !text_ptr.is_null() {
                CStr::from_ptr(text_ptr).to_string_lossy().into_owned()
            } else {
                "no description".to_owned()
            };
        (name, description)
    };
    Error::Cuda { call, code: status as u32, name, description, hint: hint(status, call) }
}

pub use crate::error::context_lost;

/// What a user can do about a driver error, where there is something to say.
fn hint(status: sys::CUresult, call: &'static str) -> Option<&'static str> {
    use sys::CUresult as E;
    let gl_call = call.starts_with("cuGraphicsGL") || call == "cuGLGetDevices";
    Some(match status {
        E::CUDA_ERROR_OUT_OF_MEMORY => {
            "not enough free device memory: choose a smaller size or close other programs using the GPU"
        }
        E::CUDA_ERROR_NO_DEVICE => "no CUDA device is visible: check `nvidia-smi` and CUDA_VISIBLE_DEVICES",
        E::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH | E::CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE => {
            "the NVIDIA driver is too old for this CUDA library: update the driver"
        }
        E::CUDA_ERROR_UNSUPPORTED_PTX_VERSION => {
            "the kernel was compiled by an NVRTC newer than the driver: update the NVIDIA driver, or install \
             the NVRTC of the driver's CUDA version (`interop-lab doctor` shows both)"
        }
        E::CUDA_ERROR_NO_BINARY_FOR_GPU | E::CUDA_ERROR_INVALID_IMAGE | E::CUDA_ERROR_INVALID_PTX => {
            "the compiled kernel does not fit this GPU or driver: delete the kernel cache \
             (`interop-lab doctor` shows its folder) or use the NVRTC of the driver's CUDA version"
        }
        E::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES => {
            "the kernel needs more registers or shared memory than this block size allows: lower the block size"
        }
        status if context_lost(status as u32) => {
            "a kernel faulted and the CUDA context is lost; the driver allows no more CUDA work in this process: \
             the demo continues on the CPU backend; fix the kernel, then relaunch the app to use CUDA again"
        }
        E::CUDA_ERROR_ALREADY_MAPPED => "the resource is still mapped by CUDA: unmap it before GL uses it",
        E::CUDA_ERROR_NOT_MAPPED => "the resource is not mapped: map it before asking for its pointer",
        E::CUDA_ERROR_INVALID_GRAPHICS_CONTEXT
        | E::CUDA_ERROR_OPERATING_SYSTEM
        | E::CUDA_ERROR_NOT_SUPPORTED
        | E::CUDA_ERROR_INVALID_DEVICE
            if gl_call =>
        {
            "the OpenGL context is not on this NVIDIA GPU: on a hybrid laptop launch with \
             __NV_PRIME_RENDER_OFFLOAD=1 __GLX_VENDOR_LIBRARY_NAME=nvidia, or use --transfer copy"
        }
        _ => return None,
    })
}

/// Turns an `nvrtcResult` into a [`Result`].
pub fn nvrtc_check(status: cudarc::nvrtc::sys::nvrtcResult, call: &'static str) -> Result<()> {
    if status == cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS {
        return Ok(());
    }
    // SAFETY: returns a pointer to a static string for any status.
    let message = unsafe {
        let text = cudarc::nvrtc::sys::nvrtcGetErrorString(status);
        if text.is_null() { format!("{status:?}") } else { CStr::from_ptr(text).to_string_lossy().into_owned() }
    };
    Err(Error::Nvrtc { call, message })
}

/// Resolves a driver entry point by name through `cuGetProcAddress`, at the ABI of
/// [`ENTRY_POINT_VERSION`]. This is how the app reaches `cudaGL.h`, which cudarc does not bind,
/// and how it keeps working on drivers older than the headers cudarc was generated from.
pub fn proc_address(symbol: &'static CStr) -> Result<*mut c_void> {
    let mut function: *mut c_void = std::ptr::null_mut();
    let mut status = sys::CUdriverProcAddressQueryResult::CU_GET_PROC_ADDRESS_SUCCESS;
    // SAFETY: `symbol` is NUL-terminated; both out-pointers are valid; cuGetProcAddress_v2 exists
    // in every driver since CUDA 12.0.
    check(
        unsafe {
            sys::cuGetProcAddress_v2(
                symbol.as_ptr(),
                &mut function,
                ENTRY_POINT_VERSION,
                sys::CUdriverProcAddress_flags::CU_GET_PROC_ADDRESS_DEFAULT as u64,
                &mut status,
            )
        },
        "cuGetProcAddress",
    )?;
    if function.is_null() || status != sys::CUdriverProcAddressQueryResult::CU_GET_PROC_ADDRESS_SUCCESS {
        return Err(Error::Unavailable(format!(
            "the NVIDIA driver has no entry point {} ({status:?}): update the driver",
            symbol.to_string_lossy()
        )));
    }
    Ok(function)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_split_as_the_driver_encodes_them() {
        assert_eq!(split_version(13000), (13, 0));
        assert_eq!(split_version(12080), (12, 8));
        assert_eq!(split_version(11040), (11, 4));
    }
}
