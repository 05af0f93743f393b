//! Loading a compiled image (`cuModuleLoadData`) and looking up its kernels, with the occupancy
//! the driver predicts for them.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::rc::Rc;

use cudarc::driver::sys;

use super::attributes::FunctionAttributes;
use super::compiled::{CompiledModule, ImageKind};
use crate::cuda::context::Context;
use crate::error::{Error, Result};

/// A loaded module (`cuModuleLoadData`), unloaded when the last [`Function`] from it is dropped.
pub struct Module {
    raw: sys::CUmodule,
    context: Rc<Context>,
    origin: String,
}

impl Module {
    /// Loads a compiled image into the current context.
    pub fn load(context: &Rc<Context>, compiled: &CompiledModule) -> Result<Rc<Self>> {
        let mut image = compiled.image.clone();
        if compiled.kind == ImageKind::Ptx && image.last() != Some(&0) {
            image.push(0);
        }
        let trace = context.trace();
        if compiled.from_cache {
            trace.note(
                "kernel cache",
                || format!("{} for {} (no NVRTC needed)", compiled.origin, compiled.target),
                0.0,
            );
        } else {
            let ms = compiled.compile_time.as_secs_f64();
            trace.note("nvrtcCompileProgram", || format!("{} for {}", compiled.origin, compiled.target), ms * 1e6);
        }
        let mut raw = std::ptr::null_mut();
        // SAFETY: `image` is a complete CUBIN or NUL-terminated PTX that outlives the call.
        trace.call(
            "cuModuleLoadData",
            || format!("{} bytes of {:?}", image.len(), compiled.kind),
            || unsafe { sys::cuModuleLoadData(&mut raw, image.as_ptr().cast()) },
        )?;
        Ok(Rc::new(Self { raw, context: context.clone(), origin: compiled.origin.clone() }))
    }

    /// `cuModuleGetFunction` plus the function's attributes.
    pub fn function(self: &Rc<Self>, name: &str) -> Result<Function> {
        let name_c =
            CString::new(name).map_err(|_| Error::InvalidInput(format!("kernel name {name:?} contains a NUL byte")))?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: live module; NUL-terminated name; valid out-pointer.
        let found = self.context.trace().call(
            "cuModuleGetFunction",
            || name.to_owned(),
            || unsafe { sys::cuModuleGetFunction(&mut raw, self.raw, name_c.as_ptr()) },
        );
        match found {
            Err(Error::Cuda { code, .. }) if code == sys::CUresult::CUDA_ERROR_NOT_FOUND as u32 => {
                return Err(Error::MissingKernel { file: self.origin.clone(), function: name.to_owned() });
            }
            other => other?,
        }
        let attributes = FunctionAttributes::query(raw)?;
        Ok(Function { raw, name: name.to_owned(), attributes, module: self.clone() })
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: loaded in `load`, unloaded once; no Function outlives it (they hold an Rc).
        if let Err(error) =
            self.context.trace().call("cuModuleUnload", String::new, || unsafe { sys::cuModuleUnload(self.raw) })
        {
            self.context.defer_error(error);
        }
    }
}

/// A kernel function in a loaded module.
pub struct Function {
    raw: sys::CUfunction,
    name: String,
    attributes: FunctionAttributes,
    module: Rc<Module>,
}

impl Function {
    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its attributes as compiled.
    pub fn attributes(&self) -> &FunctionAttributes {
        &self.attributes
    }

    /// The raw handle, for the launch code of this crate.
    pub(crate) fn raw(&self) -> sys::CUfunction {
        self.raw
    }

    /// The context the function's module was loaded into.
    pub fn context(&self) -> &Rc<Context> {
        &self.module.context
    }

    /// Lets launches ask for up to `bytes` of dynamic shared memory (beyond the 48 KiB default).
    pub fn set_max_dynamic_shared_bytes(&mut self, bytes: i32) -> Result<()> {
        // SAFETY: live function handle.
        self.module.context.trace().call(
            "cuFuncSetAttribute",
            || format!("{}: max dynamic shared memory {bytes} B", self.name),
            || unsafe {
                sys::cuFuncSetAttribute(
                    self.raw,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    bytes,
                )
            },
        )?;
        self.attributes.max_dynamic_shared_bytes = bytes;
        Ok(())
    }

    /// `cuOccupancyMaxActiveBlocksPerMultiprocessor`: resident blocks per SM at this block size.
    pub fn max_active_blocks_per_multiprocessor(&self, block_threads: u32, dynamic_shared_bytes: u32) -> Result<i32> {
        let mut blocks = 0;
        // SAFETY: live function; valid out-pointer.
        self.module.context.trace().call("cuOccupancyMaxActiveBlocksPerMultiprocessor", String::new, || unsafe {
            sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(
                &mut blocks,
                self.raw,
                block_threads as i32,
                dynamic_shared_bytes as usize,
            )
        })?;
        Ok(blocks)
    }

    /// `cuOccupancyMaxPotentialBlockSize`: the block size with the highest occupancy for a fixed
    /// amount of dynamic shared memory per block, and the smallest grid that reaches it.
    pub fn suggested_block_size(&self, dynamic_shared_bytes: u32) -> Result<(i32, i32)> {
        let (mut min_grid, mut block) = (0, 0);
        // SAFETY: live function; valid out-pointers; no per-block-size shared memory callback.
        self.module.context.trace().call(
            "cuOccupancyMaxPotentialBlockSize",
            || format!("{} B dynamic shared", dynamic_shared_bytes),
            || unsafe {
                sys::cuOccupancyMaxPotentialBlockSize(
                    &mut min_grid,
                    &mut block,
                    self.raw,
                    None,
                    dynamic_shared_bytes as usize,
                    0,
                )
            },
        )?;
        Ok((block, min_grid))
    }
}
