//! interop-lab: see CUDA and OpenGL or Vulkan work on the same memory.
//!
//! This library is the app's interop core, for a program of its own. A GL buffer or texture is
//! registered with CUDA once, mapped for each frame's kernels and unmapped before GL draws it; GL
//! and Vulkan allocate memory CUDA imports, with semaphores ordering the two APIs on the GPU; a
//! CUDA device is matched to its EGL and Vulkan devices by UUID; and where CUDA cannot run, the
//! same buffers are written by the CPU. The programs in `examples/` show each in under 200 lines:
//! `gl_buffer` (a window, the Rust counterpart of cuda-samples' simpleGL), `egl_texture`
//! (headless GL) and `vulkan_shared` (headless Vulkan).
//!
//! A GL vertex buffer written by a kernel each frame, as the README shows it (the window, the
//! buffer, its vertex array and the compiled kernel made as in `examples/gl_buffer.rs`):
//!
//! ```no_run
//! use interop_lab::{
//!     CudaOptions, DeviceLimits, Function, GlBuffer, GraphicsResource, LaunchConfig, MapAccess, Result, Stream,
//!     VertexArray, WindowGl, kernel_arg, map, select,
//! };
//!
//! fn frames(window: &WindowGl, buffer: &GlBuffer, vertices: &VertexArray, kernel: &mut Function) -> Result<()> {
//!     let (gl, count) = (window.gl(), 65_536u32);
//!     let selection = select(&CudaOptions::default(), gl, &|name| window.proc_address(name)); // CUDA on GL's GPU
//!     let (cuda, entry_points) = selection.gl_interop()?; // or an error saying why there is none
//!     let mut resource = GraphicsResource::register_buffer(&cuda.context, entry_points, buffer.name())?; // once
//!     let (stream, limits) = (Stream::new(&cuda.context)?, DeviceLimits::from(cuda.context.device()));
//!     let config = LaunchConfig { grid: [count / 256, 1, 1], block: [256, 1, 1], shared_memory_bytes: 0 };
//!     for _frame in 0..60 {
//!         let mapped = map(&stream, &mut [(&mut resource, MapAccess::WriteDiscard)])?;
//!         let pointer = mapped.buffer(0)?.ptr; // GL cannot draw the buffer while `mapped` lives
//!         // SAFETY: the kernel takes (float4*, unsigned int) and writes `count` vertices.
//!         unsafe { kernel.launch(&stream, &limits, &config, &mut [kernel_arg(&pointer), kernel_arg(&count)])? };
//!         mapped.unmap()?; // GL's again
//!         vertices.draw_arrays(gl, glow::POINTS, count as i32);
//!         window.swap_buffers()?;
//!     }
//!     Ok(())
//! }
//! ```
//!
//! The surface is the list below, grouped by purpose; each item says what it owns, what it waits
//! for, and which driver call it wraps. Kernels are CUDA C++ that NVRTC compiles at run time
//! ([`Compiler`]); the CUDA driver and NVRTC are loaded at run time, so a program builds and runs
//! on a machine without them and says so ([`Error`]).
//!
//! With the default feature `app` the crate also holds the app itself: the window, the panel, the
//! demos, the benches and the tools (docs/architecture.md is its map). Those modules, and the
//! modules the surface is taken from, are public for the app's binary and its tests, which reach
//! below the surface; they are hidden from these docs. `--no-default-features` builds the core
//! alone, without egui.

#[doc(hidden)]
pub mod anatomy;
#[cfg(feature = "app")]
#[doc(hidden)]
pub mod app;
#[cfg(feature = "app")]
#[doc(hidden)]
pub mod args;
#[cfg(feature = "app")]
#[doc(hidden)]
pub mod bench;
#[cfg(feature = "app")]
#[doc(hidden)]
pub mod camera;
#[doc(hidden)]
pub mod cuda;
#[cfg(feature = "app")]
#[doc(hidden)]
pub mod demo_kit;
#[cfg(feature = "app")]
#[doc(hidden)]
pub mod demos;
#[cfg(feature = "app")]
#[doc(hidden)]
pub mod doctor;
#[doc(hidden)]
pub mod error;
#[doc(hidden)]
pub mod gl;
#[doc(hidden)]
pub mod graphics;
#[doc(hidden)]
pub mod guard;
#[cfg(feature = "app")]
#[doc(hidden)]
pub mod headless;
#[doc(hidden)]
pub mod host_memory;
#[cfg(feature = "app")]
#[doc(hidden)]
pub mod kernel_watch;
#[cfg(feature = "app")]
#[doc(hidden)]
pub mod kernels;
#[doc(hidden)]
pub mod numbers;
#[doc(hidden)]
pub mod output;
#[doc(hidden)]
pub mod pixel;
#[doc(hidden)]
pub mod progress;
#[cfg(feature = "app")]
#[doc(hidden)]
pub mod record;
#[cfg(feature = "app")]
#[doc(hidden)]
pub mod renderer;
#[doc(hidden)]
pub mod rng;
#[doc(hidden)]
pub mod runtime;
#[cfg(feature = "app")]
#[doc(hidden)]
pub mod scene;
#[cfg(feature = "app")]
#[doc(hidden)]
pub mod session;
#[cfg(feature = "app")]
#[doc(hidden)]
pub mod soak;
#[doc(hidden)]
pub mod sources;
#[doc(hidden)]
pub mod stats;
#[doc(hidden)]
pub mod stop;
#[doc(hidden)]
pub mod transfer;
#[cfg(feature = "app")]
#[doc(hidden)]
pub mod ui;
#[doc(hidden)]
pub mod vk;
#[doc(hidden)]
pub mod watchdog;
#[cfg(feature = "app")]
#[doc(hidden)]
pub mod widgets;
#[doc(hidden)]
pub mod windowing;

// The surface, by purpose.

/// Errors, each naming the call that failed and, where there is one, the fix.
pub use crate::error::{Error, Result};

// CUDA: the context and its streams, device memory, kernels compiled at run time and launched.
pub use crate::cuda::driver::load as load_cuda_driver;
pub use crate::cuda::launch::arg as kernel_arg;
pub use crate::cuda::{
    Compiler, Context, DeviceBuffer, DeviceLimits, DeviceSpan, Function, LaunchConfig, Module, Stream,
};

// GL interop: a GL buffer or texture registered once, mapped for a frame's kernels (the guard
// borrows it: GL cannot draw it while mapped), unmapped before GL draws it.
pub use crate::cuda::interop::{GlEntryPoints, GraphicsResource, MapAccess, Mapped, map};
pub use crate::cuda::surface::SurfaceObject;

// GL external memory and semaphores: CUDA allocates exportable memory GL builds its buffer on,
// ordered by host waits or by semaphores.
pub use crate::cuda::external::ExportableMemory;
pub use crate::gl::external::{GlMemoryObjects, GlSemaphores};

// Vulkan: memory Vulkan allocates and CUDA imports, ordered by a pair of timeline semaphores.
pub use crate::transfer::vulkan::{VulkanBuffer, VulkanShare};
pub use crate::vk::commands::CommandRing;
pub use crate::vk::device::{DeviceChoice, VulkanContext};
pub use crate::vk::memory::{Buffer as VkBuffer, MemoryKind};
pub use crate::vk::shared::SharedTimeline;

// GL contexts and objects: a window's context, a surfaceless EGL context on the CUDA device, the
// buffers, textures and programs they make.
pub use crate::gl::context::headless::HeadlessGl;
pub use crate::gl::context::window::WindowGl;
pub use crate::gl::{Attribute, Buffer as GlBuffer, Program, Texture as GlTexture, VertexArray, read_framebuffer_rgba};
pub use crate::pixel::PixelFormat;

// Device matching and the choice of path: CUDA on the GL context's device (or the Vulkan device
// with the CUDA device's UUID), with the reason when a path cannot run.
pub use crate::runtime::{
    BackendRequest, CudaOptions, CudaRuntime, Selection, TransferRequest, cuda_without_gl, select,
};

// The transfer paths behind one trait, the CPU fallback among them.
pub use crate::graphics::{Graphics, GraphicsApi};
pub use crate::transfer::{Access, SharedBuffer, Target, Transfer, TransferKind};
