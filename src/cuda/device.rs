//! Devices and the attributes a learner of the driver API meets first (`cuDeviceGetAttribute`).
#![allow(unsafe_code)]

use cudarc::driver::sys::{self, CUdevice_attribute as A};
use serde::Serialize;

use super::driver::check;
use crate::error::Result;

/// One CUDA device as the driver describes it.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceInfo {
    /// Ordinal for `cuDeviceGet`.
    pub ordinal: i32,
    /// `cuDeviceGetName`.
    pub name: String,
    /// PCI location `domain:bus:device`, to tell several GPUs apart.
    pub pci_bus_id: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Streaming multiprocessors.
    pub multiprocessors: i32,
    /// `cuDeviceTotalMem`, bytes.
    pub total_memory_bytes: usize,
    /// Maximum threads in one block.
    pub max_threads_per_block: i32,
    /// Maximum block extent in x, y, z.
    pub max_block_dim: [i32; 3],
    /// Maximum grid extent in x, y, z.
    pub max_grid_dim: [i32; 3],
    /// Shared memory a block gets without opting in, bytes.
    pub shared_memory_per_block: i32,
    /// Shared memory a block may opt in to (`cuFuncSetAttribute`), bytes.
    pub shared_memory_per_block_optin: i32,
    /// Shared memory of one multiprocessor, bytes.
    pub shared_memory_per_multiprocessor: i32,
    /// 32-bit registers available to one block.
    pub registers_per_block: i32,
    /// 32-bit registers of one multiprocessor.
    pub registers_per_multiprocessor: i32,
    /// Threads per warp.
    pub warp_size: i32,
    /// Resident threads per multiprocessor.
    pub max_threads_per_multiprocessor: i32,
    /// Resident blocks per multiprocessor.
    pub max_blocks_per_multiprocessor: i32,
    /// Peak SM clock, kHz.
    pub clock_rate_khz: i32,
    /// Peak memory clock, kHz.
    pub memory_clock_rate_khz: i32,
    /// Memory bus width, bits.
    pub memory_bus_width_bits: i32,
    /// L2 cache, bytes.
    pub l2_cache_bytes: i32,
    /// One virtual address space for host and all devices.
    pub unified_addressing: bool,
    /// Shares memory with the host (an integrated GPU).
    pub integrated: bool,
    /// Copy engines that can overlap with kernels.
    pub async_engines: i32,
    /// How many times faster fp32 arithmetic is than fp64 on this device.
    pub fp32_to_fp64_ratio: i32,
    /// Memory can be exported as a POSIX file descriptor (for GL_EXT_memory_object_fd).
    pub posix_fd_export: bool,
    /// `cuDeviceGetUuid`: the identity a Vulkan device is matched against
    /// (`VkPhysicalDeviceIDProperties::deviceUUID`), as 32 hex digits.
    pub uuid: String,
}

impl DeviceInfo {
    /// Reads every attribute of device `ordinal`. `cuInit` must have succeeded.
    pub fn query(ordinal: i32) -> Result<Self> {
        let mut device: sys::CUdevice = 0;
        // SAFETY: valid out-pointer; the driver is initialised (caller's contract, checked by cuInit).
        check(unsafe { sys::cuDeviceGet(&mut device, ordinal) }, "cuDeviceGet")?;
        let attribute = |attribute: A| -> Result<i32> {
            let mut value = 0;
            // SAFETY: valid out-pointer and device handle.
            check(unsafe { sys::cuDeviceGetAttribute(&mut value, attribute, device) }, "cuDeviceGetAttribute")?;
            Ok(value)
        };
        let mut name = [0 as std::ffi::c_char; 256];
        // SAFETY: the buffer is 256 bytes and we pass that length.
        check(unsafe { sys::cuDeviceGetName(name.as_mut_ptr(), name.len() as i32, device) }, "cuDeviceGetName")?;
        // SAFETY: the driver writes a NUL-terminated string into the buffer.
        let name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }.to_string_lossy().into_owned();
        let mut uuid = sys::CUuuid { bytes: [0; 16] };
        // SAFETY: valid out-pointer and device handle.
        check(unsafe { sys::cuDeviceGetUuid_v2(&mut uuid, device) }, "cuDeviceGetUuid")?;
        let uuid = uuid.bytes.iter().map(|b| format!("{:02x}", *b as u8)).collect();
        let mut total_memory_bytes = 0usize;
        // SAFETY: valid out-pointer and device handle.
        check(unsafe { sys::cuDeviceTotalMem_v2(&mut total_memory_bytes, device) }, "cuDeviceTotalMem")?;
        Ok(Self {
            ordinal,
            name,
            pci_bus_id: format!(
                "{:04x}:{:02x}:{:02x}",
                attribute(A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?,
                attribute(A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?,
                attribute(A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?
            ),
            compute_capability: (
                attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
                attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
            ),
            multiprocessors: attribute(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            total_memory_bytes,
            max_threads_per_block: attribute(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_block_dim: [
                attribute(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
                attribute(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
                attribute(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
            ],
            max_grid_dim: [
                attribute(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
                attribute(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
                attribute(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
            ],
            shared_memory_per_block: attribute(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
            shared_memory_per_block_optin: attribute(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
            shared_memory_per_multiprocessor: attribute(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?,
            registers_per_block: attribute(A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK)?,
            registers_per_multiprocessor: attribute(A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR)?,
            warp_size: attribute(A::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
            max_threads_per_multiprocessor: attribute(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?,
            max_blocks_per_multiprocessor: attribute(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR)?,
            clock_rate_khz: attribute(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)?,
            memory_clock_rate_khz: attribute(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)?,
            memory_bus_width_bits: attribute(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)?,
            l2_cache_bytes: attribute(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?,
            unified_addressing: attribute(A::CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING)? != 0,
            integrated: attribute(A::CU_DEVICE_ATTRIBUTE_INTEGRATED)? != 0,
            async_engines: attribute(A::CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT)?,
            fp32_to_fp64_ratio: attribute(A::CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO)?,
            posix_fd_export: attribute(A::CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)? != 0
                && attribute(A::CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED)? != 0,
            uuid,
        })
    }

    /// The architecture name NVRTC compiles for, e.g. `sm_90`.
    pub fn arch(&self) -> String {
        format!("sm_{}{}", self.compute_capability.0, self.compute_capability.1)
    }

    /// fp32 lanes per multiprocessor for this compute capability (from NVIDIA's tables), used to
    /// compute the fp32 peak. `None` for a capability the table does not know.
    pub fn fp32_lanes_per_multiprocessor(&self) -> Option<i32> {
        Some(match self.compute_capability {
            (7, _) => 64,
            (8, 0) => 64,
            (8, _) => 128,
            (9, 0) => 128,
            (10, _) | (11, _) | (12, _) => 128,
            _ => return None,
        })
    }

    /// Peak fp32 rate in FLOP/s (one fused multiply-add counts two), at the peak SM clock.
    pub fn fp32_peak_flops(&self) -> Option<f64> {
        let lanes = self.fp32_lanes_per_multiprocessor()? as f64;
        Some(self.multiprocessors as f64 * lanes * 2.0 * self.clock_rate_khz as f64 * 1e3)
    }

    /// Peak fp64 rate in FLOP/s (the fp32 peak over the device's fp32:fp64 ratio).
    pub fn fp64_peak_flops(&self) -> Option<f64> {
        Some(self.fp32_peak_flops()? / f64::from(self.fp32_to_fp64_ratio.max(1)))
    }

    /// Theoretical DRAM bandwidth in bytes/s (double data rate × bus width).
    pub fn dram_bandwidth_bytes_per_s(&self) -> f64 {
        2.0 * self.memory_clock_rate_khz as f64 * 1e3 * self.memory_bus_width_bits as f64 / 8.0
    }
}

/// Number of CUDA devices. `cuInit` must have succeeded.
pub fn device_count() -> Result<i32> {
    let mut count = 0;
    // SAFETY: valid out-pointer.
    check(unsafe { sys::cuDeviceGetCount(&mut count) }, "cuDeviceGetCount")?;
    Ok(count)
}

/// Every device's attributes. `cuInit` must have succeeded.
pub fn all_devices() -> Result<Vec<DeviceInfo>> {
    (0..device_count()?).map(DeviceInfo::query).collect()
}
