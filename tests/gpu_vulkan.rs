//! Tests that need an NVIDIA GPU with its Vulkan driver: Vulkan allocates, CUDA imports and
//! writes, a timeline semaphore orders the two, and Vulkan reads back what the CPU reference
//! computes; frames without host waits; the driver-call order of a frame; no leak across buffers.
//! Then the demos on the Vulkan path: the wave against its reference, the three demos drawn
//! headless as on the CPU backend, a demo frame's calls in order, and re-allocation without leaks
//! (n-body and blur against their references: tests/gpu_nbody.rs, tests/gpu_blur.rs).
//!
//! Run on the GPU machine with `--include-ignored --test-threads=1` (the leak check reads the
//! device's free memory).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

mod common;

use std::rc::Rc;
use std::time::Duration;

use ash::vk as raw;
use interop_lab::bench::fill::{KERNEL, launch_fill};
use interop_lab::cuda::{Context, DeviceLimits, Function, Module, Stream};
use interop_lab::demo_kit::{Demo, DemoEnv, DemoSpec, View};
use interop_lab::demos::blur::BlurSettings;
use interop_lab::demos::nbody::NBodySettings;
use interop_lab::demos::wave::{Wave, WaveSettings};
use interop_lab::graphics::Graphics;
use interop_lab::runtime::TransferRequest;
use interop_lab::runtime::{BackendRequest, CudaOptions};
use interop_lab::scene::SceneDrawer;
use interop_lab::scene::vulkan::VulkanScenes;
use interop_lab::transfer::TransferKind;
use interop_lab::transfer::vulkan::{VulkanBuffer, VulkanShare};
use interop_lab::vk::commands::CommandRing;
use interop_lab::vk::device::{DeviceChoice, VulkanContext};
use interop_lab::vk::memory::{Buffer, MemoryKind};
use interop_lab::vk::shared::SharedTimeline;

struct Setup {
    // Drop order: Vulkan-side objects and the share before the contexts.
    share: VulkanShare,
    ring: CommandRing,
    vulkan: Rc<VulkanContext>,
    fill: (Function, DeviceLimits),
    _module: Rc<Module>,
    _stream: Rc<Stream>,
    context: Rc<Context>,
    _gl: interop_lab::gl::context::headless::HeadlessGl,
}

fn setup() -> Setup {
    let options = CudaOptions { backend: BackendRequest::Cuda, ..CudaOptions::default() };
    let (gl, selection) = common::gpu_setup(&options);
    let cuda = selection.cuda.clone().unwrap();
    let context = cuda.context.clone();
    let device = context.device();
    let vulkan =
        VulkanContext::new(&DeviceChoice::CudaDevice { uuid: device.uuid.clone(), name: device.name.clone() }).unwrap();
    let stream = Rc::new(Stream::new(&context).unwrap());
    let timeline = Rc::new(SharedTimeline::new(&vulkan).unwrap());
    let share = VulkanShare::new(&vulkan, &timeline, &context, &stream).unwrap();
    let ring = CommandRing::new(&vulkan, 3).unwrap();
    let module = Module::load(&context, &cuda.compiler.compile(&KERNEL, &[]).unwrap()).unwrap();
    let fill = (module.function("fill").unwrap(), DeviceLimits::from(context.device()));
    Setup { share, ring, vulkan, fill, _module: module, _stream: stream, context, _gl: gl }
}

impl Setup {
    /// CUDA fills `buffer` with `value ^ i`; returns the value it signals when done.
    fn fill(&mut self, frame: u64, buffer: &VulkanBuffer, value: u32) -> u64 {
        let (function, limits) = &mut self.fill;
        self.share
            .cuda_step(frame, buffer.mark().value(), |stream| {
                launch_fill(function, limits, stream, buffer.span(), value)
            })
            .unwrap();
        self.share.timeline().written_value()
    }
}

fn host_buffer(vulkan: &Rc<VulkanContext>, bytes: usize) -> Buffer {
    Buffer::new(vulkan, bytes, raw::BufferUsageFlags::empty(), MemoryKind::HostVisible).unwrap()
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn cuda_writes_vulkan_memory_and_vulkan_reads_what_the_reference_computes() {
    let mut s = setup();
    let mut random = common::Random::new();
    let words = (1 << 20) + (random.next_u64() % 65536) as usize;
    let value = random.next_u64() as u32;
    let buffer = s.share.create_buffer(words * 4, raw::BufferUsageFlags::STORAGE_BUFFER).unwrap();
    let mut out = host_buffer(&s.vulkan, words * 4);
    out.host_bytes_mut().unwrap().fill(0x5A);

    // Vulkan poisons the shared buffer first; CUDA's step waits for that submission.
    let poisoned = s.share.submit_read(&mut s.ring, raw::PipelineStageFlags::TRANSFER, &[&buffer], |r| {
        r.fill(buffer.vulkan(), 0xFFFF_FFFF)
    });
    assert!(poisoned.is_ok());
    s.fill(0, &buffer, value);
    let read = s
        .share
        .submit_read(&mut s.ring, raw::PipelineStageFlags::TRANSFER, &[&buffer], |r| {
            r.copy(buffer.vulkan(), 0, &out, 0, words * 4)
        })
        .unwrap();
    assert!(s.share.timeline().wait_read(read, Duration::from_secs(10)).unwrap(), "Vulkan never saw CUDA's signal");
    let seen: Vec<u32> = bytemuck::pod_collect_to_vec(out.host_bytes().unwrap());
    let wrong = seen.iter().enumerate().filter(|&(i, &w)| w != value ^ i as u32).count();
    assert_eq!(wrong, 0, "{wrong} of {words} words differ from value ^ index (exact integers: the bound is 0)");
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn frames_without_host_waits_each_see_their_own_fill() {
    let mut s = setup();
    let mut random = common::Random::new();
    let frames = 60usize;
    let words = 1 << 18;
    let base = random.next_u64() as u32;
    // Two buffers in turn: CUDA writes one while Vulkan may still read the other.
    let buffers = [
        s.share.create_buffer(words * 4, raw::BufferUsageFlags::STORAGE_BUFFER).unwrap(),
        s.share.create_buffer(words * 4, raw::BufferUsageFlags::STORAGE_BUFFER).unwrap(),
    ];
    let mut out = host_buffer(&s.vulkan, frames * 8);
    out.host_bytes_mut().unwrap().fill(0);
    for frame in 0..frames {
        let buffer = &buffers[frame % 2];
        let value = base.wrapping_add(frame as u32);
        s.fill(frame as u64, buffer, value);
        // Copy the first and the last word of this frame's fill to the frame's own slot.
        s.share
            .submit_read(&mut s.ring, raw::PipelineStageFlags::TRANSFER, &[buffer], |r| {
                r.copy(buffer.vulkan(), 0, &out, frame * 8, 4)?;
                r.copy(buffer.vulkan(), (words - 1) * 4, &out, frame * 8 + 4, 4)
            })
            .unwrap();
    }
    // The only host wait: after the last frame.
    s.share.synchronize(Duration::from_secs(10)).unwrap();
    let seen: Vec<u32> = bytemuck::pod_collect_to_vec(out.host_bytes().unwrap());
    for frame in 0..frames {
        let value = base.wrapping_add(frame as u32);
        assert_eq!(
            [seen[frame * 2], seen[frame * 2 + 1]],
            [value, value ^ (words as u32 - 1)],
            "frame {frame} read another frame's data"
        );
    }
}

/// The calls of the last traced frame, and where in them the hand-off's four calls are:
/// CUDA's semaphore wait, the launch, CUDA's signal, Vulkan's submit — asserted in that order.
fn handoff_in_order(trace: &interop_lab::cuda::trace::Trace) -> (Vec<(&'static str, String)>, [usize; 4]) {
    let calls: Vec<(&str, String)> = trace.last_frame().into_iter().map(|e| (e.call, e.detail)).collect();
    let position =
        |name: &str| calls.iter().position(|(c, _)| *c == name).unwrap_or_else(|| panic!("{name} missing: {calls:?}"));
    let order = [
        position("cuWaitExternalSemaphoresAsync"),
        position("cuLaunchKernel"),
        position("cuSignalExternalSemaphoresAsync"),
        position("vkQueueSubmit"),
    ];
    // Four different calls: sorted positions are strictly increasing.
    assert!(order.is_sorted(), "order: {calls:?}");
    (calls, order)
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_frame_traces_wait_then_launch_then_signal_then_the_vulkan_submit() {
    let mut s = setup();
    let buffer = s.share.create_buffer(1 << 20, raw::BufferUsageFlags::STORAGE_BUFFER).unwrap();
    let out = host_buffer(&s.vulkan, 4);
    let frame = |s: &mut Setup, n: u64| {
        let ready = s.fill(n, &buffer, n as u32);
        let read = s
            .share
            .submit_read(&mut s.ring, raw::PipelineStageFlags::TRANSFER, &[&buffer], |r| {
                r.copy(buffer.vulkan(), 0, &out, 0, 4)
            })
            .unwrap();
        (ready, read)
    };
    let context = s.context.clone();
    let trace = context.trace();
    trace.end_frame(); // closes the setup list
    let (_, first_read) = frame(&mut s, 0);
    trace.set_per_frame(true);
    let (ready, read) = frame(&mut s, 1);
    trace.end_frame();
    let (calls, [wait, _, signal, submit]) = handoff_in_order(trace);
    // The values: CUDA waits for the last read of the buffer (frame 0's submit) and signals its
    // write; Vulkan's submit waits for exactly that write and signals the next read.
    assert_eq!((first_read, ready, read), (1, 2, 2), "one step and one submit per frame");
    assert_eq!(calls[wait].1, format!("read ≥ {first_read}"));
    assert_eq!(calls[signal].1, format!("written = {ready}"));
    assert_eq!(calls[submit].1, format!("waits written ≥ {ready}, signals read = {read}"));
    s.share.synchronize(Duration::from_secs(10)).unwrap();
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn making_and_dropping_shared_buffers_leaks_no_device_memory() {
    let s = setup();
    let bytes = 64 << 20;
    let make_and_drop = |count: usize| {
        for _ in 0..count {
            let buffer = s.share.create_buffer(bytes, raw::BufferUsageFlags::STORAGE_BUFFER).unwrap();
            drop(buffer);
        }
    };
    make_and_drop(2); // the driver's first-use allocations
    let (free_before, _) = s.context.memory_info().unwrap();
    make_and_drop(20);
    let (free_after, _) = s.context.memory_info().unwrap();
    let lost = free_before.saturating_sub(free_after);
    eprintln!("free before {free_before}, after {free_after}: {lost} bytes lost over 20 × 64 MiB");
    assert!(lost < 16 << 20, "{lost} bytes of device memory lost over 20 buffers of 64 MiB");
}

fn wave_on_vulkan(
    vulkan: &interop_lab::vk::frame::VulkanGraphics,
    cuda: &Rc<interop_lab::runtime::CudaRuntime>,
    settings: WaveSettings,
) -> Wave {
    let env = DemoEnv {
        graphics: Graphics::Vulkan(vulkan),
        cuda: Some(cuda.clone()),
        transfer: TransferKind::Vulkan,
        window: false,
    };
    let wave = Wave::new(&env, settings).expect("wave on the Vulkan path");
    assert_eq!(wave.pipeline().kind(), TransferKind::Vulkan);
    wave
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn the_wave_on_the_vulkan_path_writes_the_reference_values() {
    let (vulkan, cuda) = common::vulkan_cuda_setup([64, 64]);
    // f32 sin/cos of the kernel against the f64 reference (as on the GL paths), read back through
    // CUDA's import.
    let sizes = [(257, 131), (1, 1000), (1024, 1024)];
    common::check_wave_step(Graphics::Vulkan(&vulkan), Some(cuda), TransferKind::Vulkan, &sizes, 1e-5);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn the_three_demos_drawn_headless_on_the_vulkan_path_match_the_cpu_backend() {
    let size = [320, 200];
    for spec in [
        DemoSpec::new(WaveSettings::default()),
        DemoSpec::new(NBodySettings { bodies: Some(8192), ..NBodySettings::default() }),
        DemoSpec::new(BlurSettings::default()),
    ] {
        let mut on_cuda = common::cpu_headless_options(spec.clone(), 5, size);
        on_cuda.cuda.backend = interop_lab::runtime::BackendRequest::Cuda;
        let cuda = vulkan_run(&on_cuda).expect("Vulkan headless with CUDA");
        let cpu = vulkan_run(&common::cpu_headless_options(spec, 5, size)).expect("Vulkan headless, CPU");
        let name = cuda.json["demo"].as_str().unwrap_or("?").to_owned();
        assert_eq!(cuda.json["transfer"], "vulkan", "{name}: {}", cuda.json);
        assert_eq!(cuda.json["backend"], "cuda", "{name}");
        let background = &cuda.pixels[..4];
        let drawn =
            cuda.pixels.chunks_exact(4).filter(|p| p != &background).count() as f64 / (size[0] * size[1]) as f64;
        let db = common::psnr(&cuda.pixels, &cpu.pixels);
        eprintln!("{name}: CUDA on Vulkan vs CPU on Vulkan: PSNR {db:.1} dB, {:.1} % drawn", drawn * 100.0);
        // The same state drawn by the same renderer: CUDA and the CPU differ in float rounding only
        // (n-body after 5 steps: ~1e-6 relative positions), far below a pixel.
        assert!(drawn > 0.005, "{name}: only {:.2} % of the frame drawn", drawn * 100.0);
        assert!(db >= 30.0, "{name}: CUDA's frame differs from the CPU's: PSNR {db:.1} dB < 30");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn the_vulkan_renderer_starts_on_a_host_copy_when_asked_and_draws_what_the_cpu_draws() {
    let size = [320, 200];
    for (request, path) in [(TransferRequest::Copy, "host_copy"), (TransferRequest::Pageable, "host_copy_pageable")] {
        let mut copy = common::cpu_headless_options(DemoSpec::new(WaveSettings::default()), 5, size);
        copy.cuda.backend = interop_lab::runtime::BackendRequest::Cuda;
        copy.cuda.transfer = request;
        let run = vulkan_run(&copy).expect("Vulkan headless on a host copy");
        assert_eq!(run.json["transfer"], path, "{}", run.json);
        let cpu = vulkan_run(&common::cpu_headless_options(DemoSpec::new(WaveSettings::default()), 5, size))
            .expect("Vulkan headless, CPU");
        let db = common::psnr(&run.pixels, &cpu.pixels);
        eprintln!("{path}: PSNR {db:.1} dB against the CPU backend");
        assert!(db >= 30.0, "{path}: the copied frame differs from the CPU's: PSNR {db:.1} dB < 30");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_wave_frame_on_vulkan_traces_wait_launch_signal_then_the_submit_that_waits_for_it() {
    let (vulkan, cuda) = common::vulkan_cuda_setup([64, 64]);
    let graphics = Graphics::Vulkan(&vulkan);
    let settings = WaveSettings { width: 128, height: 128, ..WaveSettings::default() };
    let mut wave = wave_on_vulkan(&vulkan, &cuda, settings);
    let mut renderer = VulkanScenes::new();
    let view = View { origin: [0, 0], size: [64, 64] };
    renderer.prepare(graphics, &wave.scene(&view)).expect("prepare");
    let mut frame = |wave: &mut Wave, n: u64| {
        wave.step(graphics, n, 1.0 / 60.0).expect("step");
        vulkan.begin_frame([0.0; 4], n).expect("begin");
        renderer.draw(graphics, &wave.scene(&view), &view).expect("draw");
        vulkan.end_frame().expect("submit");
    };
    let trace = cuda.context.trace();
    trace.end_frame(); // closes the setup list
    for n in 0..3 {
        frame(&mut wave, n); // every slot of the wave's buffer ring drawn once
    }
    trace.set_per_frame(true);
    frame(&mut wave, 3);
    trace.end_frame();
    let (calls, [_, _, signal, submit]) = handoff_in_order(trace);
    // The anatomy's clock reading (an event on an idle stream of its own, every 2 s while the
    // calls are recorded) waits for no work; nothing else may synchronize.
    let waits = calls.iter().filter(|(c, d)| c.contains("Synchronize") && !d.starts_with("clock reading"));
    assert_eq!(waits.count(), 0, "no host wait in the frame: {calls:?}");
    // The submit waits for exactly the value CUDA signalled.
    let written = calls[signal].1.trim_start_matches("written = ").to_owned();
    assert!(calls[submit].1.starts_with(&format!("waits written ≥ {written},")), "{calls:?}");
    wave.read_positions(graphics).expect("finish");
    renderer.destroy(graphics);
    Box::new(wave).destroy(graphics);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn re_allocating_demo_buffers_on_the_vulkan_path_leaks_no_device_memory() {
    let (vulkan, cuda) = common::vulkan_cuda_setup([64, 64]);
    let graphics = Graphics::Vulkan(&vulkan);
    // 2048 × 2048 vertices of 16 bytes: 64 MiB per buffer, a ring of them per wave.
    let settings = WaveSettings { width: 2048, height: 2048, ..WaveSettings::default() };
    let mut wave = wave_on_vulkan(&vulkan, &cuda, settings);
    let mut reallocate = |count: usize| {
        for n in 0..count {
            wave.poison_positions(graphics).expect("re-allocate");
            wave.step(graphics, n as u64, 0.0).expect("step");
        }
        wave.read_positions(graphics).expect("finish");
    };
    reallocate(2); // the driver's first-use allocations
    let (free_before, _) = cuda.context.memory_info().unwrap();
    reallocate(20);
    let (free_after, _) = cuda.context.memory_info().unwrap();
    let lost = free_before.saturating_sub(free_after);
    eprintln!("free before {free_before}, after {free_after}: {lost} bytes lost over 20 re-allocations");
    assert!(lost < 16 << 20, "{lost} bytes of device memory lost over 20 re-allocations of 64 MiB buffers");
    Box::new(wave).destroy(graphics);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn bench_transfer_vulkan_rows_read_every_frame_right_with_and_without_host_waits() {
    // Every row of the Vulkan part of bench transfer checks the bytes Vulkan read; the period row
    // enqueues frames with no host wait, each copying into its own slot, all checked at the end.
    let mut s = setup();
    let stream = Rc::new(Stream::new(&s.context).unwrap());
    let mut bench = interop_lab::bench::vulkan::VulkanBench::new(&s.context, &stream).unwrap();
    let counts = interop_lab::demo_kit::bench::Repeats { warmup: 3, timed: 40 };
    let (function, limits) = &mut s.fill;
    let stop = interop_lab::stop::StopRequest::new();
    let (table, results) = bench.run(1 << 20, counts, function, limits, &stop).unwrap();
    eprintln!("{table}");
    for path in ["vulkan", "vulkan_cuda_waited_on_host", "vulkan_period"] {
        let row = results.iter().find(|r| r["path"] == path).unwrap_or_else(|| panic!("{path}: {results:?}"));
        assert_eq!(row["wrong_frames"], 0, "{path}: {row}");
    }
    let period = results.iter().find(|r| r["path"] == "vulkan_period").unwrap()["period_us"].as_f64().unwrap();
    assert!(period.is_finite() && period > 0.0, "{period}");
    let skipped = results.iter().find(|r| r["path"] == "vulkan_what_if_no_wait").unwrap();
    assert!(skipped["wrong_frames"].as_u64().is_some(), "the what-if row counts its wrong frames: {skipped}");
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn images_cuda_imports_from_vulkan_are_released_with_the_demo() {
    // Blur's texture route on Vulkan: an exportable image, CUDA's import, its mipmapped array
    // and surface. Made and dropped 20 times (1280 × 800 RGBA32F: 16 MiB each).
    let (vulkan, cuda) = common::vulkan_cuda_setup([64, 64]);
    let graphics = Graphics::Vulkan(&vulkan);
    let settings = BlurSettings { format: interop_lab::pixel::PixelFormat::Rgba32f, ..BlurSettings::default() };
    let make_and_drop = |count: usize| {
        for n in 0..count {
            let env = DemoEnv { graphics, cuda: Some(cuda.clone()), transfer: TransferKind::Vulkan, window: false };
            let mut blur = interop_lab::demos::blur::Blur::new(&env, settings.clone()).expect("blur");
            assert_eq!(blur.route(), interop_lab::demos::blur::Route::Texture, "{}", blur.route_label());
            blur.step(graphics, n as u64, 0.0).expect("step");
            blur.read_output(graphics).expect("finish");
            Box::new(blur).destroy(graphics);
        }
    };
    make_and_drop(2); // the driver's first-use allocations
    let (free_before, _) = cuda.context.memory_info().unwrap();
    make_and_drop(20);
    let (free_after, _) = cuda.context.memory_info().unwrap();
    let lost = free_before.saturating_sub(free_after);
    eprintln!("free before {free_before}, after {free_after}: {lost} bytes lost over 20 imported images");
    assert!(lost < 16 << 20, "{lost} bytes of device memory lost over 20 images of 16 MiB");
    assert!(cuda.context.take_errors().is_empty(), "no deferred errors from Drop");
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn what_if_the_semaphore_wait_is_skipped_says_how_many_frames_were_at_risk() {
    let mut options = common::cpu_headless_options(DemoSpec::new(WaveSettings::default()), 40, [320, 200]);
    options.cuda.backend = interop_lab::runtime::BackendRequest::Cuda;
    options.what_if.skip_semaphore_wait = true;
    let report = vulkan_run(&options).expect("Vulkan headless, wait skipped");
    let text = report.json["what_if"]["report"].as_str().unwrap_or_default().to_owned();
    eprintln!("{text}");
    // "U of M frames were submitted without the wait ...": one submission per frame skipped it.
    let numbers: Vec<u64> = text.split_whitespace().filter_map(|w| w.parse().ok()).take(2).collect();
    assert_eq!(numbers.len(), 2, "{text}");
    assert_eq!(numbers[1], 40, "every frame's submission skipped the wait: {text}");
    assert!(numbers[0] <= numbers[1], "{text}");

    options.what_if.skip_semaphore_wait = false;
    let waited = vulkan_run(&options).expect("Vulkan headless");
    assert!(waited.json["what_if"]["report"].is_null(), "no report without the switch: {}", waited.json);
}

/// A headless run of `options` drawn with Vulkan.
fn vulkan_run(
    options: &interop_lab::headless::HeadlessOptions,
) -> interop_lab::Result<interop_lab::headless::HeadlessReport> {
    let mut options = options.clone();
    options.renderer = interop_lab::graphics::GraphicsApi::Vulkan;
    interop_lab::headless::run(&options)
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn bench_transfer_through_the_vulkan_renderer_times_its_own_path_and_the_copy() {
    let dir = common::temp_dir("bench-transfer-vulkan-gpu");
    let json = dir.join("transfer.json");
    let output = common::binary()
        .args(["bench", "transfer", "--renderer", "vulkan", "--path", "vulkan,copy", "--bytes", "1M"])
        .args(["--frames", "20", "--warmup", "2", "--json"])
        .arg(&json)
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).expect("JSON written")).expect("JSON");
    for path in ["vulkan", "host_copy"] {
        let row = report["results"]
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["path"] == path))
            .unwrap_or_else(|| panic!("{path}: {report:#}"));
        let median = row["frame_us"]["median"].as_f64();
        assert!(median.is_some_and(|m| m.is_finite() && m > 0.0), "{path} measured, not skipped: {row}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
