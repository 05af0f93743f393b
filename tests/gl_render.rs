//! GL through a headless EGL context (Mesa's software device without a GPU): draw known points
//! from a buffer, read the pixels back and compare with the image they must make; and a headless
//! GL run's memory, which must not grow with its frame count when the CPU is busy.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use interop_lab::gl::context::headless::HeadlessGl;
use interop_lab::gl::{self, Attribute, DrawState, Framebuffer, Program, VertexArray};

const VERTEX: &str = "#version 330 core
layout(location = 0) in vec4 position;   // x, y in pixels; z, w unused
layout(location = 1) in vec4 colour;
uniform vec2 size;
out vec4 v_colour;
void main() {
    gl_Position = vec4(position.xy / size * 2.0 - 1.0, 0.0, 1.0);
    gl_PointSize = 1.0;
    v_colour = colour;
}";
const FRAGMENT: &str = "#version 330 core
in vec4 v_colour;
out vec4 colour;
void main() { colour = v_colour; }";

#[test]
fn points_from_a_buffer_land_on_the_expected_pixels() {
    let context = HeadlessGl::new(None).expect("an EGL device (install Mesa's libegl-mesa0)");
    let gl = context.gl().clone();
    let size = [64u32, 48u32];
    let mut framebuffer = Framebuffer::new(&gl, size).expect("framebuffer");
    let mut program = Program::new(&gl, "test", VERTEX, FRAGMENT).expect("program");

    // Pixel centres (x + 0.5, y + 0.5) in GL's bottom-up coordinates, each with its own colour.
    let points: [([u32; 2], [u8; 3]); 4] =
        [([0, 0], [255, 0, 0]), ([63, 0], [0, 255, 0]), ([10, 20], [0, 0, 255]), ([63, 47], [255, 255, 0])];
    let mut vertices: Vec<f32> = Vec::new();
    for ([x, y], [r, g, b]) in points {
        vertices.extend_from_slice(&[x as f32 + 0.5, y as f32 + 0.5, 0.0, 1.0]);
        vertices.extend_from_slice(&[r as f32 / 255.0, g as f32 / 255.0, b as f32 / 255.0, 1.0]);
    }
    let mut buffer = gl::Buffer::new(&gl, bytemuck::cast_slice(&vertices)).expect("buffer");
    let mut vertex_array = VertexArray::new(&gl).expect("vertex array");
    let attributes = [
        Attribute { location: 0, components: 4, stride: 32, offset: 0 },
        Attribute { location: 1, components: 4, stride: 32, offset: 16 },
    ];
    vertex_array.set_attributes(&gl, &buffer, &attributes, None).expect("attributes");

    framebuffer.bind(&gl);
    gl::begin_scene(&gl, [0, 0], size, [0.0, 0.0, 0.0, 1.0], DrawState::Additive);
    program.bind(&gl).expect("bind");
    program.set_vec2(&gl, "size", glam::Vec2::new(size[0] as f32, size[1] as f32));
    vertex_array.draw_arrays(&gl, glow::POINTS, points.len() as i32);
    gl::end_scene(&gl);
    gl::check_error(&gl, "draw").expect("no GL error");
    let pixels = framebuffer.read_rgba(&gl).expect("read pixels");

    // Expected image: black with the four points; rows in `pixels` are top row first.
    let mut expected = vec![0u8; pixels.len()];
    for chunk in expected.chunks_exact_mut(4) {
        chunk[3] = 255;
    }
    for ([x, y], [r, g, b]) in points {
        let row = (size[1] - 1 - y) as usize;
        let at = (row * size[0] as usize + x as usize) * 4;
        expected[at..at + 3].copy_from_slice(&[r, g, b]);
    }
    let wrong: Vec<usize> =
        (0..pixels.len() / 4).filter(|&i| pixels[i * 4..i * 4 + 4] != expected[i * 4..i * 4 + 4]).collect();
    assert!(wrong.is_empty(), "{} pixels differ, first at index {:?}", wrong.len(), wrong.first());

    // The buffer reads back exactly as written.
    let read = buffer.read(&gl).expect("read buffer");
    assert_eq!(read, bytemuck::cast_slice::<f32, u8>(&vertices));

    vertex_array.destroy(&gl);
    buffer.destroy(&gl);
    program.destroy(&gl);
    framebuffer.destroy(&gl);
}

#[test]
fn shader_errors_carry_the_compiler_log() {
    let context = HeadlessGl::new(None).expect("an EGL device");
    let gl = context.gl().clone();
    let broken = "#version 330 core\nout vec4 colour;\nvoid main() { colour = undefined_name; }";
    let error = Program::new(&gl, "broken", VERTEX, broken).err().expect("must not compile").to_string();
    assert!(error.contains("broken: fragment shader does not compile"), "{error}");
    assert!(error.contains("undefined_name"), "the GL log names the problem: {error}");
}

/// Threads that keep every core busy until dropped, as a build beside the run does.
struct BusyCores {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl BusyCores {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        let threads = (0..cores)
            .map(|_| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut spins = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        spins = std::hint::black_box(spins.wrapping_add(1));
                    }
                })
            })
            .collect();
        Self { stop, threads }
    }
}

impl Drop for BusyCores {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            thread.join().ok();
        }
    }
}

/// Peak resident memory (VmHWM, as `--stats` reports it) of a headless GL run of `frames` frames
/// of the wave on the CPU backend. A large framebuffer and a small grid: rasterising is the work,
/// so a host that may run ahead of GL does, and quickly.
fn peak_memory_of_headless_gl_run(frames: u32, dir: &std::path::Path) -> u64 {
    let stats = dir.join(format!("{frames}.json"));
    let output = common::binary()
        .args(["wave", "--headless", "--renderer", "gl", "--backend", "cpu", "--size", "384x384"])
        .args(["--vertices", "16x16", "--frames", &frames.to_string(), "--stats"])
        .arg(&stats)
        .output()
        .expect("run");
    assert!(output.status.success(), "{frames} frames: {}", String::from_utf8_lossy(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats).expect("stats")).expect("JSON");
    json["host_peak_rss_bytes"].as_u64().expect("host_peak_rss_bytes in --stats")
}

#[test]
fn headless_gl_memory_does_not_grow_with_the_frames_when_the_cpu_is_busy() {
    let dir = common::temp_dir("gl-memory");
    let busy = BusyCores::start();
    let short = peak_memory_of_headless_gl_run(300, &dir);
    let long = peak_memory_of_headless_gl_run(3_000, &dir);
    drop(busy);
    std::fs::remove_dir_all(&dir).ok();
    let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
    eprintln!("peak memory beside busy cores: 300 frames {:.1} MiB, 3,000 frames {:.1} MiB", mib(short), mib(long));
    // With the frames GL holds queued bounded, 3,000 frames peak 1-2 MiB above 300 on llvmpipe;
    // unbounded, beside busy cores, they peaked 18-250 MiB above (how far the host gets ahead
    // depends on how the cores are shared out).
    let bound = 8 << 20;
    assert!(
        long <= short + bound,
        "3,000 headless GL frames peaked at {:.1} MiB, 300 at {:.1} MiB: more than {:.0} MiB apart, so GL is \
         queueing frames without bound",
        mib(long),
        mib(short),
        mib(bound)
    );
}
