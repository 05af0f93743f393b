//! Kernels: NVRTC compiles `kernels/*.cu` at run time for the device's exact architecture, an
//! on-disk cache makes the second start compile nothing, and `cuModuleLoadData` loads the result.

mod attributes;
mod background;
mod cache;
mod compile;
mod compiled;
mod load;
mod nvrtc;

pub use self::attributes::{FunctionAttributes, Occupancy};
pub use self::background::PendingCompile;
pub use self::cache::{cache_key, default_cache_dir};
pub use self::compile::Compiler;
pub use self::compiled::{CompiledModule, ImageKind};
pub use self::load::{Function, Module};
pub use self::nvrtc::{compile_with_nvrtc, supported_archs};
