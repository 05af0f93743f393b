//! Tests that need an NVIDIA GPU: the interop round trip (register → map → kernel writes → unmap →
//! GL reads back what the CPU reference computes), the host-copy path, switching between them,
//! re-registration on re-allocation without leaks, and headless renders through interop; path
//! switching and pipelined frames on both renderers.
//!
//! Run on the GPU machine with `--include-ignored --test-threads=1` (the leak check reads the
//! device's free memory, which other tests running at the same time would disturb).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

mod common;

use interop_lab::cuda::interop;
use interop_lab::demo_kit::{Demo, DemoEnv, DemoSpec, DemoTransfer, LiveKernels};
use interop_lab::demos::wave::cpu::{WaveFrame, reference, relative_error};
use interop_lab::demos::wave::{Wave, WaveSettings};
use interop_lab::gl;
use interop_lab::graphics::Graphics;
use interop_lab::headless::{self, HeadlessOptions};
use interop_lab::runtime::{BackendRequest, CudaOptions, TransferRequest};
use interop_lab::stats::Stage;
use interop_lab::transfer::{TransferKind, WhatIf};

/// float32 evaluation of the wave against the f64 reference: the sine arguments are rounded to f32
/// (|arg| ≤ ~30, so ~2e-6 absolute) and the GPU's sinf/cosf are within 2 ulp. Relative error over
/// the whole grid stays far below this bound.
const WAVE_BOUND: f64 = 1e-5;

fn cuda_options() -> CudaOptions {
    CudaOptions { backend: BackendRequest::Cuda, no_cache: false, ..CudaOptions::default() }
}

fn random_settings(random: &mut common::Random, width: u32, height: u32, block: [u32; 2]) -> WaveSettings {
    WaveSettings {
        width,
        height,
        frequency: random.range(0.5, 12.0) as f32,
        amplitude: random.range(0.05, 1.0) as f32,
        block,
        ..WaveSettings::default()
    }
}

/// Poisons the buffer, steps once at a random phase, reads the buffer back through GL (interop) or
/// the path's own read, and compares with the reference.
fn step_and_compare(graphics: Graphics<'_>, wave: &mut Wave, random: &mut common::Random) -> Vec<[f32; 4]> {
    let phase = random.range(0.0, std::f64::consts::TAU);
    step_at_phase(graphics, wave, phase)
}

/// As [`step_and_compare`], at a given phase.
fn step_at_phase(graphics: Graphics<'_>, wave: &mut Wave, phase: f64) -> Vec<[f32; 4]> {
    wave.poison_positions(graphics).expect("poison");
    wave.set_phase(phase);
    wave.step(graphics, 0, 0.0).expect("step");
    let out = wave.read_positions(graphics).expect("read back");
    let s = wave.settings().clone();
    let frame = WaveFrame {
        width: s.width,
        height: s.height,
        phase: phase as f32,
        frequency: s.frequency,
        amplitude: s.amplitude,
    };
    assert!(out.iter().flatten().all(|v| v.is_finite()), "{}x{}: every vertex written", s.width, s.height);
    let error = relative_error(&out, &reference(&frame));
    assert!(
        error < WAVE_BOUND,
        "{}x{} on {}: ‖out − ref‖/‖ref‖ = {error:e}",
        s.width,
        s.height,
        wave.pipeline().kind()
    );
    out
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gl_context_runs_on_the_cuda_device_and_interop_is_chosen() {
    let (_gl, selection) = common::gpu_setup(&cuda_options());
    let cuda = selection.cuda.as_ref().expect("cuda");
    let entry_points = cuda.interop.as_ref().expect("cudaGL entry points resolved through cuGetProcAddress");
    let devices = interop::gl_devices(entry_points).expect("cuGLGetDevices");
    assert!(devices.contains(&cuda.context.raw_device()), "cuGLGetDevices {devices:?}");
    assert_eq!(selection.transfer, TransferKind::Interop, "{}", selection.reason);
}

/// Makes a buffer, a texture and a framebuffer, and deletes them: GL still takes new objects.
fn gl_makes_objects(gl: &glow::Context, after: &str) {
    let buffer = gl::Buffer::new(gl, &[7u8; 256]).unwrap_or_else(|e| panic!("a GL buffer after {after}: {e}"));
    let mut framebuffer =
        gl::Framebuffer::new(gl, [16, 16]).unwrap_or_else(|e| panic!("a GL framebuffer after {after}: {e}"));
    assert_eq!(buffer.read(gl).expect("read back"), vec![7u8; 256], "the buffer holds what was written after {after}");
    framebuffer.destroy(gl);
    let mut buffer = buffer;
    buffer.destroy(gl);
    gl::check_error(gl, after).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gl_makes_objects_after_every_paths_set_up_and_tear_down() {
    // The headless (EGL) context: NVIDIA's driver terminated the process's EGL displays when the
    // Vulkan instance made for the semaphores was destroyed, and GL made no object after it
    // ("Unable to create Buffer object").
    let (context, selection) = common::gpu_setup(&cuda_options());
    let gl = context.gl().clone();
    let paths = selection.available_transfers();
    assert!(paths.contains(&TransferKind::ExternalSemaphores), "the semaphore path is offered: {paths:?}");
    // Every path after every other: each set up, used, torn down, then GL asked for new objects.
    for transfer in paths.iter().chain(paths.iter()).copied() {
        let env = DemoEnv { graphics: Graphics::Gl(&gl), cuda: selection.cuda.clone(), transfer, window: false };
        let mut wave = Wave::new(&env, WaveSettings::default()).unwrap_or_else(|e| panic!("wave on {transfer}: {e}"));
        gl_makes_objects(&gl, &format!("setting up {transfer}"));
        wave.step(Graphics::Gl(&gl), 0, 0.01).unwrap_or_else(|e| panic!("a step on {transfer}: {e}"));
        gl_makes_objects(&gl, &format!("a step on {transfer}"));
        Box::new(wave).destroy(Graphics::Gl(&gl));
        gl_makes_objects(&gl, &format!("tearing down {transfer}"));
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_window_on_the_semaphore_path_draws_and_closes() {
    // The window's context (GLX under X): the same path, whole frames, a screenshot that is drawn.
    if !common::available(std::env::var_os("DISPLAY").is_some(), "an X display", "INTEROP_LAB_REQUIRE_DISPLAY") {
        return;
    }
    let dir = common::temp_dir("window-semaphores");
    let shot = dir.join("window.png");
    let output = common::binary()
        .args(["wave", "--backend", "cuda", "--transfer", "external-semaphores", "--frames", "60", "--vsync", "off"])
        .args(["--size", "480x300", "--screenshot"])
        .arg(&shot)
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let image = image::open(&shot).expect("screenshot").to_rgba8();
    let background = *image.get_pixel(479, 0);
    let drawn = image.pixels().filter(|pixel| **pixel != background).count();
    assert!(drawn > 10_000, "the panel and the wave are drawn ({drawn} pixels): {stderr}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn interop_and_copy_paths_write_the_reference_values() {
    let (context, selection) = common::gpu_setup(&cuda_options());
    let gl = context.gl().clone();
    let mut random = common::Random::new();
    for (width, height, block) in
        [(257u32, 131u32, [32u32, 4u32]), (1, 1000, [1, 256]), (1023, 1, [128, 1]), (512, 512, [16, 16])]
    {
        let settings = random_settings(&mut random, width, height, block);
        let phase = random.range(0.0, std::f64::consts::TAU);
        let mut outputs = Vec::new();
        let paths = [
            TransferKind::Interop,
            TransferKind::External,
            TransferKind::ExternalSemaphores,
            TransferKind::HostCopy,
            TransferKind::HostCopyPageable,
        ];
        for transfer in paths {
            let env = DemoEnv { graphics: Graphics::Gl(&gl), cuda: selection.cuda.clone(), transfer, window: false };
            let mut wave = Wave::new(&env, settings.clone()).unwrap_or_else(|e| panic!("wave on {transfer}: {e}"));
            assert_eq!(wave.pipeline().kind(), transfer);
            outputs.push((wave.launch_config(), step_at_phase(Graphics::Gl(&gl), &mut wave, phase)));
            Box::new(wave).destroy(Graphics::Gl(&gl));
        }
        assert!(outputs.iter().all(|o| o.0 == outputs[0].0), "same launch on every path");
        assert!(outputs.iter().all(|o| o.1 == outputs[0].1), "same kernel, same bits on every path");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn switching_paths_keeps_the_buffer_contents() {
    let (context, selection) = common::gpu_setup(&cuda_options());
    let gl = context.gl().clone();
    let path = [
        TransferKind::HostCopy,
        TransferKind::External,
        TransferKind::ExternalSemaphores,
        TransferKind::Cpu,
        TransferKind::HostCopyPageable,
        TransferKind::Interop,
    ];
    switch_every_path(Graphics::Gl(&gl), selection.cuda.clone(), TransferKind::Interop, &path);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn switching_paths_on_vulkan_keeps_the_buffer_contents() {
    let (vulkan, cuda) = common::vulkan_cuda_setup([64, 64]);
    let path = [TransferKind::HostCopy, TransferKind::Cpu, TransferKind::HostCopyPageable, TransferKind::Vulkan];
    switch_every_path(Graphics::Vulkan(&vulkan), Some(cuda), TransferKind::Vulkan, &path);
}

/// Starts a wave on `start`, writes it, switches along `path` checking after each switch that the
/// contents were carried over, then steps on the last path against the reference.
fn switch_every_path(
    graphics: Graphics<'_>,
    cuda: Option<std::rc::Rc<interop_lab::runtime::CudaRuntime>>,
    start: TransferKind,
    path: &[TransferKind],
) {
    let mut random = common::Random::new();
    let env = DemoEnv { graphics, cuda, transfer: start, window: false };
    let mut wave = Wave::new(&env, random_settings(&mut random, 300, 200, [16, 16])).expect("wave");
    assert_eq!(wave.pipeline().kind(), start);
    let written = step_and_compare(graphics, &mut wave, &mut random);
    for &transfer in path {
        wave.switch_transfer(graphics, transfer).unwrap_or_else(|e| panic!("switch to {transfer}: {e}"));
        assert_eq!(wave.pipeline().kind(), transfer);
        let carried = wave.read_positions(graphics).expect("read");
        assert!(carried == written, "contents survive the switch to {transfer}");
    }
    step_and_compare(graphics, &mut wave, &mut random);
    Box::new(wave).destroy(graphics);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn reallocation_reregisters_and_leaks_no_device_memory() {
    let (context, selection) = common::gpu_setup(&cuda_options());
    let gl = context.gl().clone();
    let cuda = selection.cuda.clone().expect("cuda");
    let mut random = common::Random::new();
    for transfer in [TransferKind::Interop, TransferKind::HostCopy, TransferKind::ExternalSemaphores] {
        let env = DemoEnv { graphics: Graphics::Gl(&gl), cuda: Some(cuda.clone()), transfer, window: false };
        let mut wave = Wave::new(&env, random_settings(&mut random, 256, 256, [16, 16])).expect("wave");
        step_and_compare(Graphics::Gl(&gl), &mut wave, &mut random);
        let sizes = [[1024u32, 1024u32], [100, 700], [2048, 512], [256, 256]];
        let reallocate = |wave: &mut Wave, rounds: u64| {
            for round in 0..rounds {
                for [width, height] in sizes {
                    wave.set_vertices(Graphics::Gl(&gl), width, height).expect("re-allocate");
                    wave.step(Graphics::Gl(&gl), round, 1.0 / 60.0).expect("step after re-allocation");
                }
            }
            gl::finish(&gl);
            cuda.context.synchronize().expect("sync");
        };
        // Warm-up: the GL driver keeps freed blocks in its own pools; let them reach their
        // steady size before measuring, so only memory that keeps growing counts as lost.
        reallocate(&mut wave, 2);
        let (free_before, _) = cuda.context.memory_info().expect("cuMemGetInfo");
        reallocate(&mut wave, 25);
        assert_eq!((wave.settings().width, wave.settings().height), (256, 256));
        let (free_after, _) = cuda.context.memory_info().expect("cuMemGetInfo");
        step_and_compare(Graphics::Gl(&gl), &mut wave, &mut random);
        let lost = free_before as i64 - free_after as i64;
        eprintln!(
            "{transfer}: 100 re-allocations, device memory free before {free_before}, after {free_after} ({lost} bytes lost)"
        );
        // A leak of one buffer per re-allocation would lose over 100 MiB (the smallest grid is
        // 1.1 MB); 1 MiB leaves room for the driver's page granularity.
        assert!(lost < 1 << 20, "{transfer}: {lost} bytes of device memory not returned");
        assert!(cuda.context.take_errors().is_empty(), "no deferred errors from Drop");
        Box::new(wave).destroy(Graphics::Gl(&gl));
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn headless_interop_and_copy_render_the_same_picture() {
    let mut pictures = Vec::new();
    for transfer in [TransferRequest::Interop, TransferRequest::Copy] {
        let options = HeadlessOptions {
            renderer: interop_lab::graphics::GraphicsApi::Gl,
            spec: DemoSpec::new(WaveSettings::default()),
            frames: 60,
            size: [640, 400],
            dt: 1.0 / 60.0,
            screenshot: None,
            stats: None,
            trace: None,
            panel: false,
            cuda: CudaOptions { transfer, ..cuda_options() },
            shaders_dir: None,
            what_if: WhatIf::default(),
            open_sections: Vec::new(),
            stop: Default::default(),
            record: None,
            path_flags: Vec::new(),
            progress: false,
        };
        let report = headless::run(&options).expect("headless run");
        let stages: Vec<Stage> = report.summary.stages.iter().filter(|s| s.gpu_us.is_some()).map(|s| s.stage).collect();
        match transfer {
            TransferRequest::Interop => {
                assert_eq!(report.json["transfer"], "interop");
                assert_eq!(stages, vec![Stage::Map, Stage::Kernel, Stage::Unmap, Stage::Draw], "GPU-timed stages");
            }
            _ => {
                assert_eq!(report.json["transfer"], "host_copy");
                assert_eq!(stages, vec![Stage::Kernel, Stage::Download, Stage::Draw], "GPU-timed stages");
                assert!(report.summary.stage(Stage::Upload).is_some_and(|s| s.host_us.is_some()));
            }
        }
        let background = report.pixels[..4].to_vec();
        let lit = report.pixels.chunks_exact(4).filter(|p| *p != background.as_slice()).count();
        assert!(lit * 10 > report.pixels.len() / 4, "not blank");
        pictures.push(report.pixels);
    }
    assert!(pictures[0] == pictures[1], "the same kernel output draws the same picture on both paths");
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn launch_limits_come_from_the_device_and_the_kernel() {
    let (context, selection) = common::gpu_setup(&cuda_options());
    let gl = context.gl().clone();
    let cases: [(WaveSettings, &str); 3] = [
        (WaveSettings { block: [64, 32], ..WaveSettings::default() }, "threads per block"),
        (WaveSettings { block: [2048, 1], ..WaveSettings::default() }, "MAX_BLOCK_DIM_X"),
        (WaveSettings { block: [1, 1], grid: Some([1, 70_000]), ..WaveSettings::default() }, "MAX_GRID_DIM_Y"),
    ];
    for (settings, expected) in cases {
        let env = DemoEnv {
            graphics: Graphics::Gl(&gl),
            cuda: selection.cuda.clone(),
            transfer: TransferKind::Interop,
            window: false,
        };
        let error = Wave::new(&env, settings.clone()).err().expect("invalid launch rejected").to_string();
        assert!(error.contains(expected), "{:?}: {error}", settings.block);
    }
}

/// Runs one wave step with per-frame tracing on and checks that the frame's calls include
/// `expected` in that order; returns their positions in the frame's trace.
fn traced_step_in_order(
    gl: &glow::Context,
    wave: &mut Wave,
    trace: &interop_lab::cuda::trace::Trace,
    expected: &[&str],
) -> Vec<usize> {
    trace.set_per_frame(true);
    wave.step(Graphics::Gl(gl), 1, 0.0).expect("step");
    trace.end_frame();
    let calls: Vec<&str> = trace.last_frame().iter().map(|e| e.call).collect();
    let order: Vec<usize> = expected
        .iter()
        .map(|call| calls.iter().position(|c| c == call).unwrap_or_else(|| panic!("{call} missing from {calls:?}")))
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{} in order: {calls:?}", expected.join(" → "));
    order
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn trace_of_a_wave_frame_lists_map_launch_unmap_in_order() {
    let (context, selection) = common::gpu_setup(&cuda_options());
    let gl = context.gl().clone();
    let cuda = selection.cuda.clone().expect("cuda");
    let env = DemoEnv {
        graphics: Graphics::Gl(&gl),
        cuda: Some(cuda.clone()),
        transfer: TransferKind::Interop,
        window: false,
    };
    let mut wave = Wave::new(&env, WaveSettings::default()).expect("wave");
    let trace = cuda.context.trace();
    trace.end_frame(); // the setup list ends here
    let setup: Vec<&str> = trace.setup().iter().map(|e| e.call).collect();
    for call in
        ["cuInit", "cuDevicePrimaryCtxRetain", "cuModuleLoadData", "cuModuleGetFunction", "cuGraphicsGLRegisterBuffer"]
    {
        assert!(setup.contains(&call), "setup lists {call}: {setup:?}");
    }
    assert!(setup.contains(&"nvrtcCompileProgram") || setup.contains(&"kernel cache"), "{setup:?}");
    wave.step(Graphics::Gl(&gl), 0, 0.0).expect("step without recording");
    trace.end_frame();
    assert!(trace.last_frame().is_empty(), "off by default: nothing recorded per frame");
    let order = traced_step_in_order(
        &gl,
        &mut wave,
        trace,
        &["cuGraphicsMapResources", "cuGraphicsResourceGetMappedPointer", "cuLaunchKernel", "cuGraphicsUnmapResources"],
    );
    let launch = &trace.last_frame()[order[2]];
    assert!(launch.detail.contains("wave grid [16, 16, 1] block [16, 16, 1]"), "{}", launch.detail);
    trace.set_per_frame(false);
    Box::new(wave).destroy(Graphics::Gl(&gl));
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn trace_of_a_frame_ordered_by_semaphores_lists_signal_wait_launch_signal_wait() {
    // The external path ordered on the GPU: GL signals `released` (after its last use of the
    // buffer), CUDA's stream waits for it, launches, signals `written`, and GL waits for that,
    // with no host wait (no cuStreamSynchronize, no GL fence) in the frame.
    let (context, selection) = common::gpu_setup(&cuda_options());
    let gl = context.gl().clone();
    let cuda = selection.cuda.clone().expect("cuda");
    assert!(
        selection.available_transfers().contains(&TransferKind::ExternalSemaphores),
        "the NVIDIA GL context offers GL_EXT_semaphore_fd"
    );
    let env = DemoEnv {
        graphics: Graphics::Gl(&gl),
        cuda: Some(cuda.clone()),
        transfer: TransferKind::ExternalSemaphores,
        window: false,
    };
    let mut wave = Wave::new(&env, WaveSettings::default()).expect("wave on external + semaphores");
    let trace = cuda.context.trace();
    trace.end_frame();
    let setup: Vec<&str> = trace.setup().iter().map(|e| e.call).collect();
    assert!(setup.iter().filter(|c| **c == "cuImportExternalSemaphore").count() == 2, "{setup:?}");
    wave.step(Graphics::Gl(&gl), 0, 0.0).expect("first step");
    trace.end_frame();
    traced_step_in_order(
        &gl,
        &mut wave,
        trace,
        &[
            "glSignalSemaphoreEXT",
            "cuWaitExternalSemaphoresAsync",
            "cuLaunchKernel",
            "cuSignalExternalSemaphoresAsync",
            "glWaitSemaphoreEXT",
        ],
    );
    let calls: Vec<&str> = trace.last_frame().iter().map(|e| e.call).collect();
    assert!(!calls.contains(&"cuStreamSynchronize"), "no host wait for the stream: {calls:?}");
    trace.set_per_frame(false);
    Box::new(wave).destroy(Graphics::Gl(&gl));
    assert!(cuda.context.take_errors().is_empty(), "no deferred errors from Drop");
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn semaphores_order_many_frames_without_a_host_wait() {
    // 200 frames back to back, read back only at the end. Each binary signal must be waited for
    // exactly once: a protocol that signalled twice or waited with no signal pending would make
    // a call fail or the GPU stall here; the last frame must hold the last phase.
    let (context, selection) = common::gpu_setup(&cuda_options());
    let gl = context.gl().clone();
    let mut random = common::Random::new();
    let settings = random_settings(&mut random, 640, 480, [32, 8]);
    let env = DemoEnv {
        graphics: Graphics::Gl(&gl),
        cuda: selection.cuda.clone(),
        transfer: TransferKind::ExternalSemaphores,
        window: false,
    };
    let mut wave = Wave::new(&env, settings.clone()).expect("wave");
    let started = std::time::Instant::now();
    frames_then_compare(Graphics::Gl(&gl), &mut wave, &settings, &mut random, 200, "external + semaphores");
    eprintln!("200 frames ordered by semaphores, read back, in {:.1} ms", started.elapsed().as_secs_f64() * 1e3);
    Box::new(wave).destroy(Graphics::Gl(&gl));
}

/// Poisons the wave's buffers, runs `frames` steps back to back at random phases, reads the
/// positions back and compares them with the reference at the last phase.
fn frames_then_compare(
    graphics: Graphics<'_>,
    wave: &mut Wave,
    settings: &WaveSettings,
    random: &mut common::Random,
    frames: u32,
    label: &str,
) {
    wave.poison_positions(graphics).expect("poison");
    let mut phase = 0.0;
    for frame in 0..frames {
        phase = random.range(0.0, std::f64::consts::TAU);
        wave.set_phase(phase);
        wave.step(graphics, u64::from(frame), 0.0).expect("step");
    }
    let out = wave.read_positions(graphics).expect("read back");
    assert!(out.iter().flatten().all(|v| v.is_finite()), "{label}: every vertex written");
    let frame = WaveFrame {
        width: settings.width,
        height: settings.height,
        phase: phase as f32,
        frequency: settings.frequency,
        amplitude: settings.amplitude,
    };
    let error = relative_error(&out, &reference(&frame));
    assert!(error < WAVE_BOUND, "{label}, {frames} frames: {error:e}");
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn inspector_occupancy_is_what_the_driver_and_the_limits_say() {
    let (context, selection) = common::gpu_setup(&cuda_options());
    let gl = context.gl().clone();
    let cuda = selection.cuda.clone().expect("cuda");
    let device = cuda.context.device().clone();
    for block in [[16u32, 16u32], [32, 8], [8, 4], [32, 32]] {
        let env = DemoEnv {
            graphics: Graphics::Gl(&gl),
            cuda: Some(cuda.clone()),
            transfer: TransferKind::Interop,
            window: false,
        };
        let wave = Wave::new(&env, WaveSettings { block, ..WaveSettings::default() }).expect("wave");
        let info = wave.kernel_info().expect("kernel info");
        let occupancy = info.occupancy.expect("occupancy");
        // The same by hand: blocks per SM are limited by the block count, threads and registers
        // (registers are allocated per warp in units of 256; the wave kernel has no shared memory).
        let threads = (block[0] * block[1]) as i32;
        let warps = (threads + 31) / 32;
        let registers_per_warp = (info.attributes.registers * 32 + 255) / 256 * 256;
        let expected = device
            .max_blocks_per_multiprocessor
            .min(device.max_threads_per_multiprocessor / threads)
            .min(device.registers_per_multiprocessor / (registers_per_warp * warps).max(1));
        assert_eq!(
            occupancy.blocks_per_multiprocessor, expected,
            "block {block:?}: {occupancy:?} {:?}",
            info.attributes
        );
        assert!(
            occupancy.suggested_block > 0 && occupancy.suggested_block as u32 <= device.max_threads_per_block as u32
        );
        Box::new(wave).destroy(Graphics::Gl(&gl));
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_saved_kernel_edit_reloads_and_a_broken_one_keeps_the_old_kernel() {
    use interop_lab::demos::wave::KERNEL;
    use interop_lab::kernel_watch::{KernelWatcher, WatchStatus};
    let dir = std::env::temp_dir().join(format!("interop-lab-watch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("wave.cu"), KERNEL.embedded).expect("copy");
    let options = CudaOptions { kernels_dir: Some(dir.clone()), no_cache: true, ..cuda_options() };
    let (context, selection) = common::gpu_setup(&options);
    let gl = context.gl().clone();
    let cuda = selection.cuda.clone().expect("cuda");
    let env = DemoEnv {
        graphics: Graphics::Gl(&gl),
        cuda: Some(cuda.clone()),
        transfer: TransferKind::Interop,
        window: false,
    };
    let mut wave = Wave::new(&env, WaveSettings::default()).expect("wave");
    let mut watcher = KernelWatcher::new(dir.clone(), cuda.compiler.clone());
    let mut random = common::Random::new();
    let save = |text: &str, watcher: &mut KernelWatcher, wave: &mut Wave| {
        std::thread::sleep(std::time::Duration::from_millis(450));
        std::fs::write(dir.join("wave.cu"), text).expect("save");
        watcher.poll(wave);
        assert!(matches!(watcher.status(), WatchStatus::Compiling { .. }), "{:?}", watcher.status());
        watcher.wait(wave);
    };

    save(&format!("{}\nthis is not CUDA;\n", KERNEL.embedded), &mut watcher, &mut wave);
    match watcher.status() {
        WatchStatus::Failed { message, .. } => {
            assert!(message.contains("wave.cu("), "NVRTC's log has file:line: {message}")
        }
        other => panic!("a broken edit must fail: {other:?}"),
    }
    step_and_compare(Graphics::Gl(&gl), &mut wave, &mut random); // the old kernel still runs, still right

    let doubled = KERNEL.embedded.replace("const float h = amplitude *", "const float h = 2.0f * amplitude *");
    assert_ne!(doubled, KERNEL.embedded, "the edit applies");
    save(&doubled, &mut watcher, &mut wave);
    assert!(matches!(watcher.status(), WatchStatus::Reloaded { .. }), "{:?}", watcher.status());
    let phase = random.range(0.0, std::f64::consts::TAU);
    wave.poison_positions(Graphics::Gl(&gl)).expect("poison");
    wave.set_phase(phase);
    wave.step(Graphics::Gl(&gl), 0, 0.0).expect("step");
    let out = wave.read_positions(Graphics::Gl(&gl)).expect("read");
    let s = wave.settings().clone();
    let frame = WaveFrame {
        width: s.width,
        height: s.height,
        phase: phase as f32,
        frequency: s.frequency,
        amplitude: 2.0 * s.amplitude,
    };
    let error = relative_error(&out, &reference(&frame));
    assert!(error < WAVE_BOUND, "the reloaded kernel doubles the heights: {error:e}");
    Box::new(wave).destroy(Graphics::Gl(&gl));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn what_if_switches_do_what_the_panel_says() {
    let (context, selection) = common::gpu_setup(&cuda_options());
    let gl = context.gl().clone();
    let cuda = selection.cuda.clone().expect("cuda");
    let mut random = common::Random::new();
    let env = DemoEnv {
        graphics: Graphics::Gl(&gl),
        cuda: Some(cuda.clone()),
        transfer: TransferKind::Interop,
        window: false,
    };
    let mut wave = Wave::new(&env, random_settings(&mut random, 200, 120, [16, 16])).expect("wave");

    // Drawing while mapped: the driver refuses the second map, and the buffer is usable after.
    let answer = wave.use_while_mapped().expect("the demonstration itself works");
    assert!(answer.contains("ALREADY_MAPPED"), "driver's answer: {answer}");
    step_and_compare(Graphics::Gl(&gl), &mut wave, &mut random);

    // Registering every frame: the frame's trace shows register and unregister, results stay right.
    wave.pipeline_mut().set_what_if(WhatIf { register_every_frame: true, ..WhatIf::default() });
    let trace = cuda.context.trace();
    trace.end_frame();
    trace.set_per_frame(true);
    step_and_compare(Graphics::Gl(&gl), &mut wave, &mut random);
    trace.end_frame();
    let calls: Vec<&str> = trace.last_frame().iter().map(|e| e.call).collect();
    let register = calls.iter().position(|c| *c == "cuGraphicsGLRegisterBuffer").expect("registered in the frame");
    let map = calls.iter().position(|c| *c == "cuGraphicsMapResources").expect("mapped");
    assert!(register < map && calls.contains(&"cuGraphicsUnregisterResource"), "{calls:?}");
    trace.set_per_frame(false);
    assert!(wave.pipeline().what_if_report().is_some());

    // Skipping the copy's sync: the path counts every unsynchronised frame, and once the stream is
    // idle the buffer holds the right values again.
    wave.pipeline_mut().set_what_if(WhatIf { skip_copy_sync: true, ..WhatIf::default() });
    wave.switch_transfer(Graphics::Gl(&gl), TransferKind::HostCopy).expect("to host copy");
    let steps = 5;
    for frame in 0..steps {
        wave.step(Graphics::Gl(&gl), frame, 0.0).expect("step");
    }
    let report = wave.pipeline().what_if_report().expect("report on the host-copy path");
    assert!(report.contains(&format!("of {steps} frames")), "{report}");
    wave.pipeline_mut().set_what_if(WhatIf::default());
    step_and_compare(Graphics::Gl(&gl), &mut wave, &mut random);
    assert!(cuda.context.take_errors().is_empty(), "no deferred errors");
    Box::new(wave).destroy(Graphics::Gl(&gl));
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_pipeline_of_buffers_draws_each_frame_what_its_own_kernel_wrote() {
    // With a pipeline depth of 2 or more, each frame's buffer was mapped during the frame before
    // (prepare_next) and is written through that mapping. Frames run back to back, without reads
    // between them (a read hands the mapped-ahead buffer back to GL); then the last frame's buffer
    // must hold the last phase, not an older frame's (stale) nor the poison (unwritten).
    let (context, selection) = common::gpu_setup(&cuda_options());
    let gl = context.gl().clone();
    let paths =
        [TransferKind::Interop, TransferKind::External, TransferKind::ExternalSemaphores, TransferKind::HostCopy];
    pipelined_frames_match(Graphics::Gl(&gl), selection.cuda.clone(), &paths);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_pipeline_of_vulkan_buffers_draws_each_frame_what_its_own_kernel_wrote() {
    // As on GL: on the Vulkan path each frame slot has its own buffer and timeline value.
    let (vulkan, cuda) = common::vulkan_cuda_setup([64, 64]);
    pipelined_frames_match(Graphics::Vulkan(&vulkan), Some(cuda), &[TransferKind::Vulkan, TransferKind::HostCopy]);
}

/// Runs the wave at pipeline depths 1 to 3 on each path, frames back to back, and checks the last
/// frame's buffer against the reference.
fn pipelined_frames_match(
    graphics: Graphics<'_>,
    cuda: Option<std::rc::Rc<interop_lab::runtime::CudaRuntime>>,
    paths: &[TransferKind],
) {
    let mut random = common::Random::new();
    for &transfer in paths {
        for depth in 1..=3u32 {
            let settings = WaveSettings { pipeline_depth: depth, ..random_settings(&mut random, 301, 77, [32, 8]) };
            let env = DemoEnv { graphics, cuda: cuda.clone(), transfer, window: false };
            let mut wave = Wave::new(&env, settings.clone()).expect("wave");
            assert_eq!(wave.pipeline().kind(), transfer);
            for frames in depth..depth + 3 {
                let label = format!("{} {transfer} depth {depth}", graphics.api().label());
                frames_then_compare(graphics, &mut wave, &settings, &mut random, frames, &label);
            }
            Box::new(wave).destroy(graphics);
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn bench_handoff_measures_every_pair_and_each_chain_keeps_its_order() {
    let args = interop_lab::bench::handoff::HandoffBenchArgs {
        rounds: 20,
        batches: 2,
        json: None,
        cuda: interop_lab::args::CudaArgs {
            backend: BackendRequest::Cuda,
            transfer: TransferRequest::Auto,
            device: None,
            device_flag: None,
            kernels: None,
            shaders: None,
            no_cache: false,
        },
    };
    let report = interop_lab::bench::handoff::run(&args, &Default::default()).expect("bench handoff");
    let results = report.json["results"].as_array().expect("results");
    assert_eq!(results.len(), 10, "{}", report.table);
    for row in results {
        assert!(row["skipped"].is_null(), "every pair runs on the GPU machine: {row}\n{}", report.table);
        if let Some(latency) = row["latency_us"]["median"].as_f64() {
            assert!(latency.is_finite() && latency > 0.0, "{row}");
            continue;
        }
        let round = row["round_trip_us"].as_f64().expect("a round trip");
        assert!(round.is_finite() && round > 0.0, "{row}");
        // The CUDA stream's own time per round is inside the wall time per round (plus the
        // clock's reading error): a GPU figure above it would mean the events were misplaced.
        if let Some(gpu) = row["gpu_round_trip_us"].as_f64() {
            assert!(gpu > 0.0 && gpu <= round * 1.05 + 5.0, "{row}");
        }
        // Where the pair checks its order, the other side's last command saw the last round.
        assert_ne!(row["order_checked"], false, "{row}\n{}", report.table);
    }
    println!("{}", report.table);
}
