//! Launch configurations, checked against the device and the kernel before `cuLaunchKernel`, so a
//! bad value from the panel becomes a sentence naming the limit instead of a driver error.
#![allow(unsafe_code)]

use std::ffi::c_void;
use std::marker::PhantomData;

use cudarc::driver::sys;
use serde::{Deserialize, Serialize};

use super::device::DeviceInfo;
use super::module::{Function, FunctionAttributes, Occupancy};
use super::stream::Stream;
pub use crate::error::LaunchError;
use crate::error::Result;

/// Grid, block and dynamic shared memory of one kernel launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchConfig {
    /// Blocks in x, y, z.
    pub grid: [u32; 3],
    /// Threads per block in x, y, z.
    pub block: [u32; 3],
    /// Dynamic shared memory per block, bytes.
    pub shared_memory_bytes: u32,
}

impl LaunchConfig {
    /// A 1-D launch with enough blocks of `block` threads to cover `items`.
    pub fn for_items(items: u32, block: u32) -> Self {
        Self { grid: [items.div_ceil(block.max(1)).max(1), 1, 1], block: [block, 1, 1], shared_memory_bytes: 0 }
    }

    /// A 2-D launch covering `width × height` items with `block` threads per block.
    pub fn for_grid_2d(width: u32, height: u32, block: [u32; 2]) -> Self {
        Self {
            grid: [width.div_ceil(block[0].max(1)).max(1), height.div_ceil(block[1].max(1)).max(1), 1],
            block: [block[0], block[1], 1],
            shared_memory_bytes: 0,
        }
    }

    /// Threads per block.
    pub fn block_threads(&self) -> u64 {
        self.block.iter().map(|&d| u64::from(d)).product()
    }

    /// Checks every limit the driver would check, and names the one that fails.
    pub fn validate(&self, device: &DeviceLimits, function: &FunctionAttributes) -> Result<(), LaunchError> {
        const AXES: [char; 3] = ['x', 'y', 'z'];
        #[allow(clippy::needless_range_loop)] // one index walks four arrays
        for axis in 0..3 {
            if self.block[axis] == 0 || self.grid[axis] == 0 {
                return Err(LaunchError::ZeroExtent { axis: AXES[axis], grid: self.grid, block: self.block });
            }
            if self.block[axis] > device.max_block_dim[axis] {
                return Err(LaunchError::BlockExtent {
                    axis: AXES[axis],
                    value: self.block[axis],
                    limit: device.max_block_dim[axis],
                });
            }
            if self.grid[axis] > device.max_grid_dim[axis] {
                return Err(LaunchError::GridExtent {
                    axis: AXES[axis],
                    value: self.grid[axis],
                    limit: device.max_grid_dim[axis],
                });
            }
        }
        let threads = self.block_threads();
        if threads > u64::from(device.max_threads_per_block) {
            return Err(LaunchError::DeviceThreads { threads, limit: device.max_threads_per_block });
        }
        if threads > function.max_threads_per_block.max(0) as u64 {
            return Err(LaunchError::KernelThreads {
                threads,
                limit: function.max_threads_per_block,
                registers: function.registers,
            });
        }
        let optin_limit = (device.shared_memory_per_block_optin as i64 - function.static_shared_bytes as i64).max(0);
        if i64::from(self.shared_memory_bytes) > optin_limit {
            return Err(LaunchError::SharedMemory {
                requested: self.shared_memory_bytes,
                limit: optin_limit as u32,
                static_bytes: function.static_shared_bytes,
            });
        }
        Ok(())
    }
}

/// The device limits a launch is checked against (a subset of [`DeviceInfo`], so tests can make one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceLimits {
    /// Threads per block.
    pub max_threads_per_block: u32,
    /// Block extent per axis.
    pub max_block_dim: [u32; 3],
    /// Grid extent per axis.
    pub max_grid_dim: [u32; 3],
    /// Shared memory a block may opt in to, bytes.
    pub shared_memory_per_block_optin: u32,
}

impl From<&DeviceInfo> for DeviceLimits {
    fn from(info: &DeviceInfo) -> Self {
        let unsigned = |v: i32| v.max(0) as u32;
        Self {
            max_threads_per_block: unsigned(info.max_threads_per_block),
            max_block_dim: info.max_block_dim.map(unsigned),
            max_grid_dim: info.max_grid_dim.map(unsigned),
            shared_memory_per_block_optin: unsigned(info.shared_memory_per_block_optin),
        }
    }
}

/// One kernel argument, as `cuLaunchKernel` takes it: a pointer to the value, which stays
/// borrowed while the argument list lives. A temporary (`arg(&buffer.span().ptr)`) is therefore
/// a compile error instead of a pointer that dangles by the time the kernel is launched.
#[repr(transparent)]
#[derive(Debug, Clone, Copy)]
pub struct KernelArg<'a> {
    value: *mut c_void,
    borrowed: PhantomData<&'a ()>,
}

/// One kernel argument: see [`KernelArg`].
pub fn arg<T>(value: &T) -> KernelArg<'_> {
    KernelArg { value: (value as *const T).cast_mut().cast(), borrowed: PhantomData }
}

impl Function {
    /// What the occupancy API says about launching with `config`.
    pub fn occupancy(&self, config: &LaunchConfig) -> Result<Occupancy> {
        let device = self.context().device();
        let threads = config.block_threads() as u32;
        let blocks_per_multiprocessor =
            self.max_active_blocks_per_multiprocessor(threads, config.shared_memory_bytes)?;
        let warps_per_block = threads.div_ceil(device.warp_size.max(1) as u32) as i32;
        let most_warps = device.max_threads_per_multiprocessor / device.warp_size.max(1);
        let (suggested_block, suggested_grid) = self.suggested_block_size(config.shared_memory_bytes)?;
        Ok(Occupancy {
            blocks_per_multiprocessor,
            warps_per_multiprocessor: blocks_per_multiprocessor * warps_per_block,
            max_warps_per_multiprocessor: most_warps,
            suggested_block,
            suggested_grid,
        })
    }

    /// Validates `config` against `device` and this kernel, opts in to more dynamic shared memory
    /// when the launch needs it, then queues the kernel on `stream`.
    ///
    /// # Safety
    /// `args` must point to values whose types, order and count match the kernel's parameters, and
    /// every device pointer among them must be valid for the accesses the kernel makes under this
    /// launch configuration.
    pub unsafe fn launch(
        &mut self,
        stream: &Stream,
        device: &DeviceLimits,
        config: &LaunchConfig,
        args: &mut [KernelArg<'_>],
    ) -> Result<()> {
        config.validate(device, self.attributes())?;
        if config.shared_memory_bytes as i32 > self.attributes().max_dynamic_shared_bytes {
            self.set_max_dynamic_shared_bytes(config.shared_memory_bytes as i32)?;
        }
        // SAFETY: the configuration was validated; the caller vouches for the arguments.
        self.context().trace().call(
            "cuLaunchKernel",
            || {
                format!(
                    "{} grid {:?} block {:?} shared {} B",
                    self.name(),
                    config.grid,
                    config.block,
                    config.shared_memory_bytes
                )
            },
            || unsafe {
                sys::cuLaunchKernel(
                    self.raw(),
                    config.grid[0],
                    config.grid[1],
                    config.grid[2],
                    config.block[0],
                    config.block[1],
                    config.block[2],
                    config.shared_memory_bytes,
                    stream.raw(),
                    // KernelArg is a transparent pointer: the array is the `void**` the driver reads.
                    args.as_mut_ptr().cast::<*mut c_void>(),
                    std::ptr::null_mut(),
                )
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h200_like() -> DeviceLimits {
        DeviceLimits {
            max_threads_per_block: 1024,
            max_block_dim: [1024, 1024, 64],
            max_grid_dim: [2_147_483_647, 65535, 65535],
            shared_memory_per_block_optin: 232_448,
        }
    }

    fn kernel(max_threads: i32, static_shared: i32) -> FunctionAttributes {
        FunctionAttributes {
            max_threads_per_block: max_threads,
            registers: 64,
            static_shared_bytes: static_shared,
            max_dynamic_shared_bytes: 49152 - static_shared,
            ..Default::default()
        }
    }

    #[test]
    fn accepts_a_config_inside_every_limit() {
        let config = LaunchConfig { grid: [256, 1, 1], block: [256, 1, 1], shared_memory_bytes: 100_000 };
        assert_eq!(config.validate(&h200_like(), &kernel(1024, 0)), Ok(()));
    }

    #[test]
    fn names_the_limit_each_bad_config_breaks() {
        let device = h200_like();
        let cases = [
            (LaunchConfig { grid: [0, 1, 1], block: [64, 1, 1], shared_memory_bytes: 0 }, "zero extent in x"),
            (LaunchConfig { grid: [1, 1, 1], block: [2048, 1, 1], shared_memory_bytes: 0 }, "MAX_BLOCK_DIM_X"),
            (LaunchConfig { grid: [1, 1, 1], block: [8, 8, 128], shared_memory_bytes: 0 }, "MAX_BLOCK_DIM_Z"),
            (LaunchConfig { grid: [1, 70000, 1], block: [32, 1, 1], shared_memory_bytes: 0 }, "MAX_GRID_DIM_Y"),
            (
                LaunchConfig { grid: [1, 1, 1], block: [64, 32, 1], shared_memory_bytes: 0 },
                "limit of 1024 threads per block",
            ),
            (
                LaunchConfig { grid: [1, 1, 1], block: [512, 1, 1], shared_memory_bytes: 0 },
                "this kernel's limit of 256",
            ),
            (LaunchConfig { grid: [1, 1, 1], block: [64, 1, 1], shared_memory_bytes: 232_448 }, "minus 1024 bytes"),
        ];
        for (config, expected) in cases {
            let message = config.validate(&device, &kernel(256, 1024)).map_err(|e| e.to_string());
            let message = message.expect_err("config must be rejected");
            assert!(message.contains(expected), "{config:?}: {message:?} should mention {expected:?}");
        }
    }

    #[test]
    fn helpers_cover_every_item() {
        let config = LaunchConfig::for_items(1000, 256);
        assert_eq!(config.grid, [4, 1, 1]);
        let config = LaunchConfig::for_grid_2d(17, 33, [16, 16]);
        assert_eq!(config.grid, [2, 3, 1]);
        assert_eq!(LaunchConfig::for_items(0, 128).grid, [1, 1, 1]);
    }
}
