//! The CUDA driver API, in layers like cudarc's: raw calls stay in these files, every `CUresult`
//! becomes a [`crate::error::Result`], and the rest of the app sees owned, safe types.
//!
//! The order a learner meets them is the order a frame uses them: [`driver::load`] (`cuInit`),
//! [`device`] attributes, a primary [`context::Context`], [`module`]s compiled by NVRTC,
//! [`stream::Stream`]s and [`stream::Event`]s, [`launch`] (`cuLaunchKernel`), and the GL
//! [`interop`] that lets kernels write the buffers GL draws.

pub mod context;
pub mod device;
pub mod driver;
pub mod external;
pub mod import;
pub mod interop;
pub mod launch;
pub mod memory;
pub mod module;
pub mod stream;
pub mod surface;
pub mod timing;
pub mod trace;

pub use self::context::Context;
pub use self::device::DeviceInfo;
pub use self::launch::{DeviceLimits, LaunchConfig, LaunchError};
pub use self::memory::{DeviceBuffer, DeviceSpan, PinnedBuffer};
pub use self::module::{Compiler, Function, Module};
pub use self::stream::{Event, Stream};
