//! interop-lab: see CUDA and OpenGL or Vulkan work on the same memory.
//!
//! A GL buffer is registered with CUDA once ([`cuda::interop`]), mapped each frame so a kernel
//! writes it in place, unmapped, then drawn; or GL and Vulkan allocate memory CUDA imports, with
//! semaphores ordering the two. The same demos run on the other [`transfer`] paths (a copy through
//! host memory, and a CPU backend without CUDA) so their costs can be compared, with either
//! [`renderer`], in a window ([`app`]) or headless ([`headless`]), one frame loop for all
//! ([`session`]), with [`doctor`] explaining what runs and why. docs/architecture.md is the map.

pub mod anatomy;
#[cfg(feature = "app")]
pub mod app;
#[cfg(feature = "app")]
pub mod args;
#[cfg(feature = "app")]
pub mod bench;
#[cfg(feature = "app")]
pub mod camera;
pub mod cuda;
#[cfg(feature = "app")]
pub mod demo_kit;
#[cfg(feature = "app")]
pub mod demos;
#[cfg(feature = "app")]
pub mod doctor;
pub mod error;
pub mod gl;
pub mod graphics;
pub mod guard;
#[cfg(feature = "app")]
pub mod headless;
pub mod host_memory;
#[cfg(feature = "app")]
pub mod kernel_watch;
#[cfg(feature = "app")]
pub mod kernels;
pub mod numbers;
pub mod output;
pub mod pixel;
pub mod progress;
#[cfg(feature = "app")]
pub mod record;
#[cfg(feature = "app")]
pub mod renderer;
pub mod rng;
pub mod runtime;
#[cfg(feature = "app")]
pub mod scene;
#[cfg(feature = "app")]
pub mod session;
#[cfg(feature = "app")]
pub mod soak;
pub mod sources;
pub mod stats;
pub mod stop;
pub mod transfer;
#[cfg(feature = "app")]
pub mod ui;
pub mod vk;
pub mod watchdog;
#[cfg(feature = "app")]
pub mod widgets;
pub mod windowing;

pub use error::{Error, Result};
