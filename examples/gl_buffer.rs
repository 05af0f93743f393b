//! A GL vertex buffer written by CUDA, in a window: the buffer is registered with CUDA once; each
//! frame it is mapped, a kernel that NVRTC compiles at run time writes a moving sine sheet into
//! it, it is unmapped, and GL draws it as points. The Rust counterpart of cuda-samples' simpleGL.
//!
//!     cargo run --release --example gl_buffer [-- FRAMES [OUT.png]]
//!
//! With FRAMES it closes after that many frames, checks the last frame's vertices against the CPU
//! (f64) and writes the window to OUT.png. Where it cannot run (no NVIDIA driver, no display, a GL
//! context on another device than CUDA's) it says what is missing and exits with status 1.
#![allow(unsafe_code)] // a kernel launch (its arguments must match the kernel's) and GL's state calls

use std::process::ExitCode;

use glow::HasContext;
use interop_lab::{
    Attribute, BackendRequest, CudaOptions, DeviceLimits, Error, Function, GlBuffer, GraphicsResource, LaunchConfig,
    MapAccess, Module, Program, Result, Stream, TransferRequest, VertexArray, WindowGl, kernel_arg as arg,
    load_cuda_driver, map, read_framebuffer_rgba, select,
};
use winit::application::ApplicationHandler;
use winit::event::WindowEvent;
use winit::event_loop::{ActiveEventLoop, EventLoop};

const GRID: [u32; 2] = [256, 256];
const KERNEL: &str = r#"
extern "C" __global__ void sine_sheet(float4* vertices, unsigned int width, unsigned int height, float time)
{
    unsigned int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    float u = x / (float)width * 2.0f - 1.0f, v = y / (float)height * 2.0f - 1.0f;
    vertices[y * width + x] = make_float4(u, 0.5f * sinf(u * 4.0f + time) * cosf(v * 4.0f + time), v, 1.0f);
}
"#;
const VERTEX: &str = "#version 330 core\nlayout(location = 0) in vec4 p;\nvoid main() {\n  \
    gl_Position = vec4(0.7 * p.x, 0.8 * p.y - 0.4 * p.z, 0.0, 1.0);\n  gl_PointSize = 2.0;\n}\n";
const FRAGMENT: &str = "#version 330 core\nout vec4 colour;\nvoid main() { colour = vec4(1.0, 0.55, 0.1, 1.0); }\n";

/// What stays between frames. Field order is drop order: the registration before the buffer.
struct Sheet {
    resource: GraphicsResource,
    buffer: GlBuffer,
    program: Program,
    vertices: VertexArray,
    kernel: (Function, DeviceLimits),
    stream: Stream,
    window: WindowGl,
    frame: u32,
}

impl Sheet {
    fn open(event_loop: &ActiveEventLoop) -> Result<Self> {
        let window = WindowGl::new(event_loop, "gl_buffer", [800, 600], true, true)?;
        let gl = window.gl().clone();
        // CUDA on the GL context's device, with GL interop's entry points (cudaGL.h).
        let options =
            CudaOptions { backend: BackendRequest::Cuda, transfer: TransferRequest::Interop, ..Default::default() };
        let selection = select(&options, &gl, &|name| window.proc_address(name));
        let (cuda, entry_points) = selection.gl_interop()?;
        let buffer = GlBuffer::uninitialized(&gl, (GRID[0] * GRID[1] * 16) as usize)?;
        let resource = GraphicsResource::register_buffer(&cuda.context, entry_points, buffer.name())?; // once
        let module = Module::load(&cuda.context, &cuda.compiler.compile_source("sine.cu", KERNEL, "gl_buffer", &[])?)?;
        let kernel = (module.function("sine_sheet")?, DeviceLimits::from(cuda.context.device()));
        let program = Program::new(&gl, "sheet", VERTEX, FRAGMENT)?;
        let vertices = VertexArray::new(&gl)?;
        let position = Attribute { location: 0, components: 4, stride: 16, offset: 0 };
        vertices.set_attributes(&gl, &buffer, &[position], None)?;
        let stream = Stream::new(&cuda.context)?;
        Ok(Self { resource, buffer, program, vertices, kernel, stream, window, frame: 0 })
    }

    /// One frame: map, write, unmap, draw, and after the last one the check. Some(what was
    /// checked) ends the run.
    fn frame(&mut self, frames: Option<u32>, out: &str) -> Result<Option<String>> {
        let time = self.frame as f32 / 60.0;
        let mapped = map(&self.stream, &mut [(&mut self.resource, MapAccess::WriteDiscard)])?;
        let (pointer, [width, height]) = (mapped.buffer(0)?.ptr, GRID);
        let config = LaunchConfig { grid: [width / 16, height / 16, 1], block: [16, 16, 1], shared_memory_bytes: 0 };
        let mut args = [arg(&pointer), arg(&width), arg(&height), arg(&time)];
        let (function, limits) = &mut self.kernel;
        // SAFETY: matches sine_sheet(float4*, unsigned, unsigned, float); it writes GRID vertices,
        // which is the mapped buffer's size.
        unsafe { function.launch(&self.stream, limits, &config, &mut args)? };
        mapped.unmap()?; // GL may use the buffer from here on
        let (gl, [w, h]) = (self.window.gl(), self.window.size());
        // SAFETY: state calls on the window's context, current on this thread.
        unsafe {
            gl.viewport(0, 0, w as i32, h as i32);
            gl.clear_color(0.05, 0.05, 0.08, 1.0);
            gl.clear(glow::COLOR_BUFFER_BIT);
            gl.enable(glow::PROGRAM_POINT_SIZE);
        }
        self.program.bind(gl)?;
        self.vertices.draw_arrays(gl, glow::POINTS, (width * height) as i32);
        self.frame += 1;
        let checked =
            if frames.is_some_and(|frames| self.frame >= frames) { Some(self.check(time, out)?) } else { None };
        self.window.swap_buffers()?;
        Ok(checked)
    }

    /// The frame's vertices against the CPU's, in f64, and the window (its back buffer) as a PNG.
    fn check(&self, time: f32, out: &str) -> Result<String> {
        let (gl, [width, height], time) = (self.window.gl(), GRID, f64::from(time));
        let seen: Vec<f32> = bytemuck::pod_collect_to_vec(&self.buffer.read(gl)?);
        let mut worst = 0.0f64;
        for (i, vertex) in seen.chunks_exact(4).enumerate() {
            let (x, y) = ((i as u32 % width) as f64, (i as u32 / width) as f64);
            let (u, v) = (x / f64::from(width) * 2.0 - 1.0, y / f64::from(height) * 2.0 - 1.0);
            let reference = [u, 0.5 * (u * 4.0 + time).sin() * (v * 4.0 + time).cos(), v, 1.0];
            for (reference, &got) in reference.iter().zip(vertex) {
                let error = (reference - f64::from(got)).abs();
                if error.is_nan() || error > 1e-4 {
                    return Err(Error::InvalidInput(format!("vertex {i} is {error:e} from the CPU's (bound 1e-4)")));
                }
                worst = worst.max(error);
            }
        }
        let [w, h] = self.window.size();
        image::save_buffer(out, &read_framebuffer_rgba(gl, None, [w, h])?, w, h, image::ColorType::Rgba8)
            .map_err(|e| Error::InvalidInput(format!("{out}: {e}")))?;
        Ok(format!("largest error {worst:.1e}: every vertex matches the CPU's; written to {out}"))
    }

    /// GL's objects go with GL's context: the registration first, then what GL made.
    fn close(mut self) {
        let gl = self.window.gl().clone();
        drop(self.resource);
        self.buffer.destroy(&gl);
        self.program.destroy(&gl);
        self.vertices.destroy(&gl);
    }
}

struct App {
    frames: Option<u32>,
    out: String,
    sheet: Option<Sheet>,
    /// What the run ends with: what was checked (after FRAMES), or why it stopped.
    outcome: Result<Option<String>>,
}

impl App {
    fn stop(&mut self, event_loop: &ActiveEventLoop, outcome: Result<Option<String>>) {
        self.outcome = outcome;
        event_loop.exit();
    }
}

impl ApplicationHandler for App {
    fn resumed(&mut self, event_loop: &ActiveEventLoop) {
        if self.sheet.is_none() {
            match Sheet::open(event_loop) {
                Ok(sheet) => self.sheet = Some(sheet),
                Err(error) => self.stop(event_loop, Err(error)),
            }
        }
    }

    fn window_event(&mut self, event_loop: &ActiveEventLoop, _: winit::window::WindowId, event: WindowEvent) {
        let Some(sheet) = self.sheet.as_mut() else { return };
        match event {
            WindowEvent::CloseRequested => event_loop.exit(),
            WindowEvent::Resized(_) => sheet.window.resize(),
            WindowEvent::RedrawRequested => match sheet.frame(self.frames, &self.out) {
                Ok(None) => sheet.window.window().request_redraw(),
                outcome => self.stop(event_loop, outcome),
            },
            _ => {}
        }
    }
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let frames = args.next().and_then(|text| text.parse().ok());
    let out = args.next().unwrap_or_else(|| "gl_buffer.png".to_owned());
    let mut app = App { frames, out, sheet: None, outcome: Ok(None) };
    let ran = load_cuda_driver().and_then(|_| {
        let event_loop = EventLoop::new().map_err(|e| Error::Window(e.to_string()))?;
        event_loop.run_app(&mut app).map_err(|e| Error::Window(e.to_string()))
    });
    if let Some(sheet) = app.sheet.take() {
        sheet.close();
    }
    match ran.and(app.outcome) {
        Ok(checked) => {
            checked.into_iter().for_each(|checked| println!("{checked}"));
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("gl_buffer: {error}");
            ExitCode::FAILURE
        }
    }
}
