//! Surface objects: how a kernel writes a CUDA array (here: a mapped GL texture) by coordinates.
#![allow(unsafe_code)]

use std::rc::Rc;

use cudarc::driver::sys;

use super::context::Context;
use crate::error::Result;

/// A surface object over a CUDA array (`cuSurfObjectCreate`), the handle a kernel writes a mapped
/// GL texture through by coordinates (`surf2Dwrite`); destroyed on drop (`cuSurfObjectDestroy`).
/// The array must outlive it: drop it before the texture is unmapped.
pub struct SurfaceObject {
    raw: sys::CUsurfObject,
    context: Rc<Context>,
}

impl SurfaceObject {
    /// `cuSurfObjectCreate` for `array` (e.g. from `Mapped::array`).
    pub fn new(context: &Rc<Context>, array: sys::CUarray) -> Result<Self> {
        // SAFETY: CUDA_RESOURCE_DESC is plain data; all-zero is a valid starting value.
        let mut description: sys::CUDA_RESOURCE_DESC = unsafe { std::mem::zeroed() };
        description.resType = sys::CUresourcetype::CU_RESOURCE_TYPE_ARRAY;
        description.res.array.hArray = array;
        let mut raw = 0;
        // SAFETY: valid out-pointer; the description names a live array (caller's contract, and
        // the driver rejects a bad one).
        context
            .trace()
            .call("cuSurfObjectCreate", String::new, || unsafe { sys::cuSurfObjectCreate(&mut raw, &description) })?;
        Ok(Self { raw, context: context.clone() })
    }

    /// The handle kernels take (`cudaSurfaceObject_t`).
    pub fn raw(&self) -> u64 {
        self.raw
    }
}

impl Drop for SurfaceObject {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once.
        if let Err(error) = self
            .context
            .trace()
            .call("cuSurfObjectDestroy", String::new, || unsafe { sys::cuSurfObjectDestroy(self.raw) })
        {
            self.context.defer_error(error);
        }
    }
}
