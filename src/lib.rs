//! interop-lab: see CUDA and OpenGL or Vulkan work on the same memory.
//!
//! A GL buffer is registered with CUDA once ([`cuda::interop`]), mapped each frame so a kernel
//! writes it in place, unmapped, then drawn; or GL and Vulkan allocate memory CUDA imports, with
//! semaphores ordering the two. The same demos run on the other [`transfer`] paths (a copy through
//! host memory, and a CPU backend without CUDA) so their costs can be compared, with either
//! [`renderer`], in a window ([`app`]) or headless ([`headless`]), one frame loop for all
//! ([`session`]), with [`doctor`] explaining what runs and why. docs/architecture.md is the map.

pub mod anatomy;
pub mod app;
pub mod args;
pub mod bench;
pub mod camera;
pub mod cuda;
pub mod demo_kit;
pub mod demos;
pub mod doctor;
pub mod error;
pub mod gl;
pub mod graphics;
pub mod guard;
pub mod headless;
pub mod host_memory;
pub mod kernel_watch;
pub mod kernels;
pub mod numbers;
pub mod output;
pub mod pixel;
pub mod progress;
pub mod record;
pub mod renderer;
pub mod rng;
pub mod runtime;
pub mod scene;
pub mod session;
pub mod soak;
pub mod sources;
pub mod stats;
pub mod stop;
pub mod transfer;
pub mod ui;
pub mod vk;
pub mod watchdog;
pub mod widgets;
pub mod windowing;

pub use error::{Error, Result};
