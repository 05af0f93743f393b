//! The typed launch of `kernels/wave.cu`: the one place that vouches for its argument list.
#![allow(unsafe_code)]

use super::cpu::WaveFrame;
use crate::error::Error;
use crate::error::Result;
use crate::cuda::launch::arg;
use crate::cuda::{DeviceLimits, DeviceSpan, Function, LaunchConfig, Stream};

/// Queues `wave` writing `frame.width × frame.height` float4 vertices into `positions`.
pub fn launch(
    function: &mut Function,
    stream: &Stream,
    device: &DeviceLimits,
    config: &LaunchConfig,
    positions: DeviceSpan,
    frame: &WaveFrame,
) -> Result<()> {
    let needed = frame.width as usize * frame.height as usize * 16;
    if positions.bytes < needed {
        return Err(Error::InvalidInput(format!(
            "wave: buffer of {} bytes is too small for {}x{} vertices",
            positions.bytes, frame.width, frame.height
        )));
    }
    let mut args = [
        arg(&positions.ptr),
        arg(&frame.width),
        arg(&frame.height),
        arg(&frame.phase),
        arg(&frame.frequency),
        arg(&frame.amplitude),
    ];
    // SAFETY: the arguments match `wave(float4*, unsigned, unsigned, float, float, float)` in type
    // and order; the kernel writes only indices < width × height, which fit `positions` (checked).
    unsafe { function.launch(stream, device, config, &mut args) }
}
