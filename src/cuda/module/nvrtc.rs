//! The raw NVRTC calls: one source in, a CUBIN or PTX image and NVRTC's log out.
#![allow(unsafe_code)]

use std::ffi::{CString, c_char};

use cudarc::nvrtc::sys as nvrtc;

use crate::cuda::driver::nvrtc_check;
use crate::error::{Error, Result};

/// The architectures NVRTC can compile for, as `major * 10 + minor`.
pub fn supported_archs() -> Result<Vec<i32>> {
    let mut count = 0;
    // SAFETY: valid out-pointer; NVRTC presence was checked when the Compiler was made (callers
    // outside a Compiler check `nvrtc_library_present` first).
    nvrtc_check(unsafe { nvrtc::nvrtcGetNumSupportedArchs(&mut count) }, "nvrtcGetNumSupportedArchs")?;
    let mut archs = vec![0; count.max(0) as usize];
    // SAFETY: `archs` has room for `count` ints.
    nvrtc_check(unsafe { nvrtc::nvrtcGetSupportedArchs(archs.as_mut_ptr()) }, "nvrtcGetSupportedArchs")?;
    Ok(archs)
}

/// Compiles one source with NVRTC for `target` (`sm_XY` → CUBIN, `compute_XY` → PTX).
/// Returns the image and NVRTC's log.
pub fn compile_with_nvrtc(
    name: &str,
    source: &str,
    target: &str,
    options: &[String],
    nvrtc_version: (i32, i32),
) -> Result<(Vec<u8>, String)> {
    let source_c = CString::new(source)
        .map_err(|_| Error::InvalidInput(format!("{name} contains a NUL byte and cannot be compiled")))?;
    let name_c =
        CString::new(name).map_err(|_| Error::InvalidInput(format!("kernel name {name:?} contains a NUL byte")))?;
    let mut all_options =
        vec![format!("--gpu-architecture={target}"), "--std=c++17".to_owned(), "-lineinfo".to_owned()];
    all_options.extend(options.iter().cloned());
    let options_c: Vec<CString> = all_options
        .iter()
        .map(|o| CString::new(o.as_str()))
        .collect::<Result<_, _>>()
        .map_err(|_| Error::InvalidInput("an NVRTC option contains a NUL byte".to_owned()))?;
    let option_ptrs: Vec<*const c_char> = options_c.iter().map(|o| o.as_ptr()).collect();

    let mut program: nvrtc::nvrtcProgram = std::ptr::null_mut();
    // SAFETY: both strings are NUL-terminated and outlive the program (destroyed below).
    nvrtc_check(
        unsafe {
            nvrtc::nvrtcCreateProgram(
                &mut program,
                source_c.as_ptr(),
                name_c.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        },
        "nvrtcCreateProgram",
    )?;
    let program = ProgramGuard(program);
    // SAFETY: the program is live; option pointers stay valid during the call.
    let status = unsafe { nvrtc::nvrtcCompileProgram(program.0, option_ptrs.len() as i32, option_ptrs.as_ptr()) };
    let log = program_log(program.0)?;
    if status == nvrtc::nvrtcResult::NVRTC_ERROR_COMPILATION {
        return Err(Error::Compile {
            file: name.to_owned(),
            arch: target.to_owned(),
            nvrtc_version: format!("{}.{}", nvrtc_version.0, nvrtc_version.1),
            log,
        });
    }
    nvrtc_check(status, "nvrtcCompileProgram")?;
    let image = if target.starts_with("sm_") {
        let mut size = 0usize;
        // SAFETY: program compiled; valid out-pointer.
        nvrtc_check(unsafe { nvrtc::nvrtcGetCUBINSize(program.0, &mut size) }, "nvrtcGetCUBINSize")?;
        let mut image = vec![0u8; size];
        // SAFETY: `image` has `size` bytes.
        nvrtc_check(unsafe { nvrtc::nvrtcGetCUBIN(program.0, image.as_mut_ptr().cast()) }, "nvrtcGetCUBIN")?;
        image
    } else {
        let mut size = 0usize;
        // SAFETY: program compiled; valid out-pointer.
        nvrtc_check(unsafe { nvrtc::nvrtcGetPTXSize(program.0, &mut size) }, "nvrtcGetPTXSize")?;
        let mut image = vec![0u8; size];
        // SAFETY: `image` has `size` bytes; NVRTC writes the PTX with its NUL terminator.
        nvrtc_check(unsafe { nvrtc::nvrtcGetPTX(program.0, image.as_mut_ptr().cast()) }, "nvrtcGetPTX")?;
        image
    };
    Ok((image, log))
}

struct ProgramGuard(nvrtc::nvrtcProgram);

impl Drop for ProgramGuard {
    fn drop(&mut self) {
        // SAFETY: created by nvrtcCreateProgram, destroyed once.
        let status = unsafe { nvrtc::nvrtcDestroyProgram(&mut self.0) };
        if let Err(error) = nvrtc_check(status, "nvrtcDestroyProgram") {
            log::warn!("{error}");
        }
    }
}

fn program_log(program: nvrtc::nvrtcProgram) -> Result<String> {
    let mut size = 0usize;
    // SAFETY: live program; valid out-pointer.
    nvrtc_check(unsafe { nvrtc::nvrtcGetProgramLogSize(program, &mut size) }, "nvrtcGetProgramLogSize")?;
    let mut log = vec![0u8; size.max(1)];
    // SAFETY: `log` has `size` bytes.
    nvrtc_check(unsafe { nvrtc::nvrtcGetProgramLog(program, log.as_mut_ptr().cast()) }, "nvrtcGetProgramLog")?;
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    Ok(String::from_utf8_lossy(&log[..end]).trim_end().to_owned())
}
