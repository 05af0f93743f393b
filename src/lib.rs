//! interop-lab: see CUDA and OpenGL work on the same memory.
//!
//! A GL buffer is registered with CUDA once ([`cuda::interop`]), mapped each frame so a kernel
//! writes it in place, unmapped, then drawn. The same demos run on two other [`transfer`] paths
//! (a copy through host memory, and a CPU backend without CUDA) so their costs can be compared,
//! in a window ([`app`]) or headless ([`headless`]), with [`doctor`] explaining what runs and why.

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
pub mod output;
pub mod pixel;
pub mod progress;
pub mod record;
pub mod render;
pub mod renderer;
pub mod rng;
pub mod runtime;
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

pub use error::{Error, Result};
