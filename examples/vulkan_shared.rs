//! Vulkan memory written by CUDA, headless: Vulkan allocates a buffer, CUDA imports it once, a
//! kernel that NVRTC compiles at run time writes an image into it, a timeline semaphore orders the
//! two APIs on the GPU, and Vulkan copies the buffer into host memory. The program checks every
//! pixel against the same pattern computed on the CPU and writes the image as a PNG.
//!
//!     cargo run --release --example vulkan_shared [-- OUT.png]
//!
//! Where it cannot run (no NVIDIA driver, no NVRTC, no Vulkan device that is the CUDA device) it
//! says what is missing and exits with status 1.
#![allow(unsafe_code)] // a kernel launch: its arguments must match the kernel's signature

use std::process::ExitCode;
use std::rc::Rc;
use std::time::Duration;

use ash::vk as raw;
use interop_lab::{
    CommandRing, CudaOptions, DeviceChoice, DeviceLimits, Error, LaunchConfig, MemoryKind, Module, Result,
    SharedTimeline, Stream, VkBuffer, VulkanContext, VulkanShare, cuda_without_gl, kernel_arg as arg,
};

const SIZE: [u32; 2] = [512, 384];

/// One RGBA8 pixel per thread: red across, green down, blue the XOR of both.
const KERNEL: &str = r#"
extern "C" __global__ void pattern(unsigned int* pixels, unsigned int width, unsigned int height)
{
    unsigned int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    unsigned int r = x * 255u / (width - 1u), g = y * 255u / (height - 1u), b = (x ^ y) & 255u;
    pixels[y * width + x] = r | (g << 8) | (b << 16) | (255u << 24);
}
"#;

/// The kernel's pixel at (x, y), on the CPU.
fn reference(x: u32, y: u32) -> u32 {
    let [width, height] = SIZE;
    (x * 255 / (width - 1)) | ((y * 255 / (height - 1)) << 8) | (((x ^ y) & 255) << 16) | (255 << 24)
}

fn main() -> ExitCode {
    let out = std::env::args().nth(1).unwrap_or_else(|| "vulkan_shared.png".to_owned());
    match run(&out) {
        Ok(()) => {
            println!("every pixel CUDA wrote into Vulkan's memory matches the CPU's; written to {out}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("vulkan_shared: {error}");
            ExitCode::from(1)
        }
    }
}

fn run(out: &str) -> Result<()> {
    // CUDA (driver and NVRTC, loaded at run time), then the Vulkan device with the same UUID.
    let cuda = cuda_without_gl(&CudaOptions::default())?;
    let device = cuda.context.device();
    let vulkan =
        VulkanContext::new(&DeviceChoice::CudaDevice { uuid: device.uuid.clone(), name: device.name.clone() })?;
    let stream = Rc::new(Stream::new(&cuda.context)?);
    let timeline = Rc::new(SharedTimeline::new(&vulkan)?);
    let mut share = VulkanShare::new(&vulkan, &timeline, &cuda.context, &stream)?;
    let mut ring = CommandRing::new(&vulkan, 2)?;

    let compiled = cuda.compiler.compile_source("pattern.cu", KERNEL, "examples/vulkan_shared.rs", &[])?;
    let module = Module::load(&cuda.context, &compiled)?;
    let mut pattern = module.function("pattern")?;
    let limits = DeviceLimits::from(device);

    // Vulkan allocates; CUDA imports the memory once. The host copy starts poisoned.
    let [width, height] = SIZE;
    let bytes = (width * height * 4) as usize;
    let shared = share.create_buffer(bytes, raw::BufferUsageFlags::STORAGE_BUFFER)?;
    let mut host = VkBuffer::new(&vulkan, bytes, raw::BufferUsageFlags::empty(), MemoryKind::HostVisible)?;
    host.host_bytes_mut().ok_or_else(|| Error::Unavailable("host memory is not mapped".to_owned()))?.fill(0xA5);

    // CUDA's step: wait for Vulkan's last read of the buffer, run the kernel, signal "written".
    share.cuda_step(0, shared.mark().value(), |stream| {
        let config = LaunchConfig {
            grid: [width.div_ceil(16), height.div_ceil(16), 1],
            block: [16, 16, 1],
            shared_memory_bytes: 0,
        };
        let ptr = shared.span().ptr;
        let mut args = [arg(&ptr), arg(&width), arg(&height)];
        // SAFETY: matches pattern(unsigned*, unsigned, unsigned); it writes width × height words,
        // which is the size of the imported buffer.
        unsafe { pattern.launch(stream, &limits, &config, &mut args) }
    })?;
    // Vulkan's submission waits on the GPU for CUDA's signal, then copies into host memory.
    let read = share.submit_read(&mut ring, raw::PipelineStageFlags::TRANSFER, &[&shared], |commands| {
        commands.copy(shared.vulkan(), 0, &host, 0, bytes)
    })?;
    if !share.timeline().wait_read(read, Duration::from_secs(10))? {
        return Err(Error::Unavailable("Vulkan's copy did not finish within 10 s".to_owned()));
    }

    let bytes_seen = host.host_bytes().ok_or_else(|| Error::Unavailable("host memory is not mapped".to_owned()))?;
    let pixels: Vec<u32> = bytemuck::pod_collect_to_vec(bytes_seen);
    let wrong = (0..height)
        .flat_map(|y| (0..width).map(move |x| (x, y)))
        .filter(|&(x, y)| pixels[(y * width + x) as usize] != reference(x, y))
        .count();
    if wrong > 0 {
        return Err(Error::InvalidInput(format!(
            "{wrong} of {} pixels differ from the CPU's (bound: 0)",
            width * height
        )));
    }
    image::save_buffer(out, bytes_seen, width, height, image::ColorType::Rgba8)
        .map_err(|error| Error::InvalidInput(format!("{out}: {error}")))
}
