//! The fill kernel the transfer benchmarks write every byte with (`kernels/fill.cu`): word i
//! becomes `value ^ i`, so a reader can tell which frame's fill it sees.
#![allow(unsafe_code)]

use crate::cuda::launch::arg;
use crate::cuda::{DeviceLimits, Function, LaunchConfig, Stream};
use crate::error::Result;
use crate::sources::SourceFile;
use crate::sources::source_file;

/// The kernel source.
pub const KERNEL: SourceFile = source_file!("kernels/fill.cu");

/// Launches `fill` (from [`KERNEL`]) over `span` on `stream`: word i becomes `value ^ i`.
pub fn launch_fill(
    function: &mut Function,
    limits: &DeviceLimits,
    stream: &Stream,
    span: crate::cuda::DeviceSpan,
    value: u32,
) -> Result<()> {
    launch_fill_blocks(function, limits, stream, span, value, 1024)
}

/// As [`launch_fill`], with `blocks` blocks of 256 threads (the kernel strides over the rest).
pub fn launch_fill_blocks(
    function: &mut Function,
    limits: &DeviceLimits,
    stream: &Stream,
    span: crate::cuda::DeviceSpan,
    value: u32,
    blocks: u32,
) -> Result<()> {
    let words = (span.bytes / 4) as u64;
    let config = LaunchConfig { grid: [blocks.max(1), 1, 1], block: [256, 1, 1], shared_memory_bytes: 0 };
    let mut args = [arg(&span.ptr), arg(&words), arg(&value)];
    // SAFETY: matches fill(unsigned*, unsigned long long, unsigned); the kernel writes words
    // < span.bytes / 4 only, inside `span` (a mapped or allocated buffer).
    unsafe { function.launch(stream, limits, &config, &mut args) }
}
