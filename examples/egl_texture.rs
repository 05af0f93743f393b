//! A GL texture written by CUDA, headless: an EGL context on the CUDA device (no display), a
//! texture registered with CUDA once, mapped, written by a kernel through a surface object (the
//! kernel compiled by NVRTC at run time), unmapped, and read back by GL. The program checks every
//! texel against the same pattern computed on the CPU and writes the texture as a PNG.
//!
//!     cargo run --release --example egl_texture [-- OUT.png]
//!
//! Where it cannot run (no NVIDIA driver, no EGL device, no GL context on the CUDA device) it says
//! what is missing and exits with status 1.
#![allow(unsafe_code)] // a kernel launch: its arguments must match the kernel's signature

use std::process::ExitCode;

use interop_lab::{
    BackendRequest, CudaOptions, DeviceLimits, Error, GlTexture, GraphicsResource, HeadlessGl, LaunchConfig, MapAccess,
    Module, PixelFormat, Result, Stream, SurfaceObject, TransferRequest, kernel_arg as arg, load_cuda_driver, map,
    select,
};

const SIZE: [u32; 2] = [320, 240];

/// Concentric rings around the centre, one RGBA8 texel per thread, written through the surface.
const KERNEL: &str = r#"
extern "C" __global__ void rings(cudaSurfaceObject_t surface, unsigned int width, unsigned int height)
{
    unsigned int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    int dx = (int)x - (int)(width / 2), dy = (int)y - (int)(height / 2);
    unsigned int d = (unsigned int)(dx * dx + dy * dy) / 64u;
    uchar4 texel = make_uchar4((d * 7u) & 255u, (d * 3u) & 255u, 255u - (d & 255u), 255u);
    surf2Dwrite(texel, surface, x * 4, y);
}
"#;

/// The kernel's texel at (x, y), on the CPU.
fn reference(x: u32, y: u32) -> [u8; 4] {
    let (dx, dy) = (x as i32 - (SIZE[0] / 2) as i32, y as i32 - (SIZE[1] / 2) as i32);
    let d = (dx * dx + dy * dy) as u32 / 64;
    [((d * 7) & 255) as u8, ((d * 3) & 255) as u8, (255 - (d & 255)) as u8, 255]
}

fn main() -> ExitCode {
    let out = std::env::args().nth(1).unwrap_or_else(|| "egl_texture.png".to_owned());
    match run(&out) {
        Ok(()) => {
            println!("every texel CUDA wrote into the GL texture matches the CPU's; written to {out}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("egl_texture: {error}");
            ExitCode::from(1)
        }
    }
}

fn run(out: &str) -> Result<()> {
    load_cuda_driver()?; // said first: without the driver nothing else matters
    // A surfaceless EGL context on the EGL device that is CUDA's, and CUDA with GL interop there.
    let options =
        CudaOptions { backend: BackendRequest::Cuda, transfer: TransferRequest::Interop, ..Default::default() };
    let context = HeadlessGl::new(Some(0))?; // the EGL device that is CUDA device 0
    let gl = context.gl();
    let selection = select(&options, gl, &|name| context.proc_address(name));
    let (cuda, entry_points) = selection.gl_interop()?;

    // The texture starts poisoned; CUDA registers it once.
    let [width, height] = SIZE;
    let mut texture = GlTexture::new(gl, SIZE, PixelFormat::Rgba8, Some(&vec![0xA5; (width * height * 4) as usize]))?;
    let mut resource = GraphicsResource::register_image(&cuda.context, entry_points, texture.name(), glow::TEXTURE_2D)?;
    let module = Module::load(&cuda.context, &cuda.compiler.compile_source("rings.cu", KERNEL, "egl_texture", &[])?)?;
    let mut rings = module.function("rings")?;
    let limits = DeviceLimits::from(cuda.context.device());
    let stream = Stream::new(&cuda.context)?;

    // Map, write through a surface object over the mapped array, unmap: GL owns it again.
    let mapped = map(&stream, &mut [(&mut resource, MapAccess::WriteDiscard)])?;
    let surface = SurfaceObject::new(&cuda.context, mapped.array(0)?)?;
    let config =
        LaunchConfig { grid: [width.div_ceil(16), height.div_ceil(16), 1], block: [16, 16, 1], shared_memory_bytes: 0 };
    let handle = surface.raw();
    let mut args = [arg(&handle), arg(&width), arg(&height)];
    // SAFETY: matches rings(cudaSurfaceObject_t, unsigned, unsigned); it writes inside the
    // width × height RGBA8 array the surface covers.
    unsafe { rings.launch(&stream, &limits, &config, &mut args)? };
    drop(surface); // before the unmap: the array is the mapping's
    mapped.unmap()?;

    let texels = texture.read(gl)?; // top row first
    drop(resource); // unregistered before GL deletes the texture
    texture.destroy(gl);
    let wrong = (0..height)
        .flat_map(|y| (0..width).map(move |x| (x, y)))
        .filter(|&(x, y)| texels[((y * width + x) * 4) as usize..][..4] != reference(x, y))
        .count();
    if wrong > 0 {
        return Err(Error::InvalidInput(format!(
            "{wrong} of {} texels differ from the CPU's (bound: 0)",
            width * height
        )));
    }
    image::save_buffer(out, &texels, width, height, image::ColorType::Rgba8)
        .map_err(|error| Error::InvalidInput(format!("{out}: {error}")))
}
