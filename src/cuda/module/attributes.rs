//! What the driver says about a kernel as compiled (`cuFuncGetAttribute`) and the occupancy a
//! launch of it reaches.
#![allow(unsafe_code)]

use cudarc::driver::sys;

use crate::cuda::driver::check;
use crate::error::Result;

/// What `cuFuncGetAttribute` says about a kernel as compiled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct FunctionAttributes {
    /// Most threads a block of this kernel can have (registers can make it less than the device's).
    pub max_threads_per_block: i32,
    /// Registers per thread.
    pub registers: i32,
    /// Statically declared shared memory, bytes.
    pub static_shared_bytes: i32,
    /// Dynamic shared memory a launch may ask for now, bytes (raise with `cuFuncSetAttribute`).
    pub max_dynamic_shared_bytes: i32,
    /// Local memory per thread (spills, stack arrays), bytes.
    pub local_bytes: i32,
    /// Constant memory, bytes.
    pub const_bytes: i32,
    /// PTX ISA version the kernel was compiled from, e.g. 90 for 9.0.
    pub ptx_version: i32,
    /// Binary (SASS) architecture, e.g. 90.
    pub binary_version: i32,
}

impl FunctionAttributes {
    pub(super) fn query(function: sys::CUfunction) -> Result<Self> {
        use sys::CUfunction_attribute as F;
        let attribute = |attribute: F| -> Result<i32> {
            let mut value = 0;
            // SAFETY: live function handle; valid out-pointer.
            check(unsafe { sys::cuFuncGetAttribute(&mut value, attribute, function) }, "cuFuncGetAttribute")?;
            Ok(value)
        };
        Ok(Self {
            max_threads_per_block: attribute(F::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            registers: attribute(F::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
            static_shared_bytes: attribute(F::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
            max_dynamic_shared_bytes: attribute(F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)?,
            local_bytes: attribute(F::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
            const_bytes: attribute(F::CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES)?,
            ptx_version: attribute(F::CU_FUNC_ATTRIBUTE_PTX_VERSION)?,
            binary_version: attribute(F::CU_FUNC_ATTRIBUTE_BINARY_VERSION)?,
        })
    }
}

/// Theoretical occupancy of a launch, from the driver's occupancy API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Occupancy {
    /// `cuOccupancyMaxActiveBlocksPerMultiprocessor` at this block size and shared memory.
    pub blocks_per_multiprocessor: i32,
    /// Resident warps per SM that gives.
    pub warps_per_multiprocessor: i32,
    /// The SM's limit.
    pub max_warps_per_multiprocessor: i32,
    /// `cuOccupancyMaxPotentialBlockSize`'s block size.
    pub suggested_block: i32,
    /// ... and the minimum grid that fills the device with it.
    pub suggested_grid: i32,
}

impl Occupancy {
    /// Resident warps over the SM's maximum.
    pub fn fraction(&self) -> f64 {
        f64::from(self.warps_per_multiprocessor) / f64::from(self.max_warps_per_multiprocessor.max(1))
    }
}
