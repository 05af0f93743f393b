//! The Vulkan renderer on whatever Vulkan driver is installed (CI: Mesa's lavapipe, required there
//! with `INTEROP_LAB_REQUIRE_VULKAN=1`): the CPU backend writes the reference into Vulkan memory,
//! headless wave, n-body and blur frames drawn with Vulkan agree with the same frames drawn with GL, and
//! what the Vulkan renderer does not draw yet is refused with a message, never a panic.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

mod common;

use interop_lab::demo_kit::DemoSpec;
use interop_lab::demos::blur::BlurSettings;
use interop_lab::demos::nbody::NBodySettings;
use interop_lab::demos::wave::{DrawMode, WaveSettings};
use interop_lab::graphics::Graphics;
use interop_lab::headless::{self, HeadlessOptions, HeadlessReport};
use interop_lab::pixel::PixelFormat;
use interop_lab::runtime::{BackendRequest, TransferRequest};
use interop_lab::stats::Stage;
use interop_lab::vk::device::DeviceChoice;
use interop_lab::vk::frame::VulkanGraphics;

fn vulkan_available() -> bool {
    let opened = VulkanGraphics::new(&DeviceChoice::Any, [16, 16]);
    if let Err(error) = &opened {
        eprintln!("Vulkan renderer: {error}");
    }
    common::available(opened.is_ok(), "a Vulkan 1.3 loader and driver", "INTEROP_LAB_REQUIRE_VULKAN")
}

fn options(spec: DemoSpec, size: [u32; 2]) -> HeadlessOptions {
    common::cpu_headless_options(spec, 3, size)
}

/// Share of pixels that differ from the top-left one (the clear colour).
fn drawn_share(report: &HeadlessReport) -> f64 {
    let background = &report.pixels[..4];
    let drawn = report.pixels.chunks_exact(4).filter(|p| p != &background).count();
    drawn as f64 / (report.pixels.len() / 4) as f64
}

#[test]
fn the_cpu_backend_writes_the_reference_into_vulkan_memory() {
    if !vulkan_available() {
        return;
    }
    let vulkan = VulkanGraphics::new(&DeviceChoice::Any, [16, 16]).unwrap();
    // Read back from the host-visible memory Vulkan draws from, not from the CPU's own copy.
    common::check_wave_cpu_step(Graphics::Vulkan(&vulkan), &[(97, 61), (1, 13)]);
}

#[test]
fn a_wave_frame_on_vulkan_matches_the_same_frame_on_gl() {
    if !vulkan_available() {
        return;
    }
    let mut random = common::Random::new();
    for mode in [DrawMode::Mesh, DrawMode::Points] {
        let settings = WaveSettings {
            frequency: random.range(1.0, 8.0) as f32,
            amplitude: random.range(0.2, 1.0) as f32,
            mode,
            point_size: 3.0,
            ..WaveSettings::default()
        };
        let size = [320, 200];
        let gl = headless::run(&options(DemoSpec::new(settings.clone()), size)).unwrap();
        let vulkan = vulkan_run(&options(DemoSpec::new(settings), size)).unwrap();
        let (gl_drawn, vulkan_drawn) = (drawn_share(&gl), drawn_share(&vulkan));
        assert!(vulkan_drawn > 0.1, "{mode:?}: only {:.1} % of the Vulkan frame drawn", vulkan_drawn * 100.0);
        let db = common::psnr(&gl.pixels, &vulkan.pixels);
        eprintln!(
            "{mode:?}: PSNR {db:.1} dB; drawn {:.1} % (GL) / {:.1} % (Vulkan)",
            gl_drawn * 100.0,
            vulkan_drawn * 100.0
        );
        // The same geometry, colours and light through two rasterisers: they differ only at
        // edges and in rounding. A flipped, shifted or unlit frame scores far below 25 dB.
        assert!(db >= 25.0, "{mode:?}: the Vulkan frame differs from GL's: PSNR {db:.1} dB < 25");
    }
}

#[test]
fn an_nbody_frame_on_vulkan_matches_the_same_frame_on_gl() {
    if !vulkan_available() {
        return;
    }
    // The CPU backend's bodies and steps are deterministic, so both runs draw the same bodies.
    let size = [320, 200];
    let gl = headless::run(&options(DemoSpec::new(NBodySettings::default()), size)).unwrap();
    let vulkan = vulkan_run(&options(DemoSpec::new(NBodySettings::default()), size)).unwrap();
    let (gl_drawn, vulkan_drawn) = (drawn_share(&gl), drawn_share(&vulkan));
    let db = common::psnr(&gl.pixels, &vulkan.pixels);
    eprintln!("n-body: PSNR {db:.1} dB; drawn {:.1} % (GL) / {:.1} % (Vulkan)", gl_drawn * 100.0, vulkan_drawn * 100.0);
    assert!(vulkan_drawn > 0.01, "only {:.2} % of the Vulkan frame drawn", vulkan_drawn * 100.0);
    assert!(db >= 25.0, "the Vulkan frame differs from GL's: PSNR {db:.1} dB < 25");
}

#[test]
fn a_blur_frame_on_vulkan_matches_the_same_frame_on_gl() {
    if !vulkan_available() {
        return;
    }
    for format in [PixelFormat::Rgba8, PixelFormat::Rgba32f] {
        let settings = BlurSettings { format, ..BlurSettings::default() };
        let size = [320, 200];
        let gl = headless::run(&options(DemoSpec::new(settings.clone()), size)).unwrap();
        let vulkan = vulkan_run(&options(DemoSpec::new(settings), size)).unwrap();
        let db = common::psnr(&gl.pixels, &vulkan.pixels);
        eprintln!("blur {format:?}: PSNR {db:.1} dB");
        assert!(drawn_share(&vulkan) > 0.5, "{format:?}: the picture covers the view");
        assert!(db >= 25.0, "{format:?}: the Vulkan frame differs from GL's: PSNR {db:.1} dB < 25");
    }
}

#[test]
fn every_vulkan_frame_gets_its_gpu_time_from_timestamps() {
    if !vulkan_available() {
        return;
    }
    let probe = VulkanGraphics::new(&DeviceChoice::Any, [16, 16]).unwrap();
    if !probe.context().timestamps() {
        eprintln!("skipped: {} writes no timestamps", probe.context().description().name);
        return;
    }
    drop(probe);
    let mut run = options(DemoSpec::new(WaveSettings::default()), [160, 100]);
    run.frames = 7; // more frames than command buffers: every slot is reused
    let report = vulkan_run(&run).unwrap();
    let draw = report.summary.stage(Stage::Draw).and_then(|s| s.gpu_us).expect("GPU draw times");
    assert_eq!(draw.samples, 7, "one GPU time per frame");
    assert!(draw.median.is_finite() && draw.median > 0.0, "a frame takes some GPU time: {}", draw.median);
    // The CPU path's wait for the frames that read its memory is a stage of its own.
    let sync = report.summary.stage(Stage::Sync).and_then(|s| s.host_us).expect("the wait is timed");
    assert_eq!(sync.samples, 7);
}

#[test]
fn a_flipped_frame_would_fail_the_comparison() {
    // The comparison must be able to fail: the GL frame against itself upside down.
    let size = [320, 200];
    let gl = headless::run(&options(DemoSpec::new(WaveSettings::default()), size)).unwrap();
    let row = size[0] as usize * 4;
    let flipped: Vec<u8> = gl.pixels.chunks_exact(row).rev().flatten().copied().collect();
    let db = common::psnr(&gl.pixels, &flipped);
    assert!(db < 25.0, "a flipped frame scored {db:.1} dB");
}

#[test]
fn what_the_vulkan_renderer_cannot_do_is_refused_with_the_way_out() {
    if !vulkan_available() {
        return;
    }
    let mut on_gl_path = options(DemoSpec::new(WaveSettings::default()), [64, 64]);
    on_gl_path.cuda.transfer = TransferRequest::Interop;
    let message = vulkan_run(&on_gl_path).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("--transfer interop") && message.contains("OpenGL path"), "a GL transfer path: {message}");

    // A copy through host memory is one of Vulkan's paths: asked for without CUDA it is the
    // CUDA request that cannot be met, said as such, not the renderer's refusal.
    if !interop_lab::cuda::driver::driver_library_present() {
        let mut copy = options(DemoSpec::new(WaveSettings::default()), [64, 64]);
        copy.cuda.backend = BackendRequest::Auto;
        copy.cuda.transfer = TransferRequest::Copy;
        let message = vulkan_run(&copy).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("--transfer copy was asked for, but CUDA can't run here"), "{message}");
    }

    if interop_lab::cuda::driver::driver_library_present() {
        println!("skipped: `--backend cuda` without a driver (this machine has one; tests/gpu_vulkan.rs runs it)");
    } else {
        let mut on_cuda = options(DemoSpec::new(WaveSettings::default()), [64, 64]);
        on_cuda.cuda.backend = BackendRequest::Cuda;
        let message = vulkan_run(&on_cuda).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("driver"), "CUDA asked for without a driver: {message}");
    }

    let huge = vulkan_run(&options(DemoSpec::new(WaveSettings::default()), [1 << 20, 8]));
    let message = huge.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("--size"), "a frame wider than the device allows: {message}");
}

#[test]
fn the_vulkan_window_draws_the_demo_and_its_panel_and_closes_on_ctrl_c() {
    let display = std::env::var_os("DISPLAY").is_some();
    if !vulkan_available() || !common::available(display, "an X display (Xvfb)", "INTEROP_LAB_REQUIRE_DISPLAY") {
        return;
    }
    let dir = common::temp_dir("vulkan-window");
    let shot = dir.join("window.png");
    let mut command = common::binary();
    command
        .args(["wave", "--renderer", "vulkan", "--backend", "cpu", "--size", "480x300", "--screenshot"])
        .arg(&shot)
        .env("RUST_LOG", "interop_lab=info");
    let output = common::interrupt_after(command, "first frame drawn");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("Vulkan window on") && !stderr.contains("OpenGL instead"), "drawn with Vulkan: {stderr}");
    let image = image::open(&shot).expect("the screenshot of the last frame").to_rgba8();
    assert_eq!(image.dimensions(), (480, 300));
    // The panel on the left, the wave right of it: both halves hold more than the clear colour.
    let background = *image.get_pixel(479, 0);
    let drawn = |x0: u32, x1: u32| {
        (x0..x1)
            .flat_map(|x| (0..300).map(move |y| (x, y)))
            .filter(|&(x, y)| *image.get_pixel(x, y) != background)
            .count()
    };
    assert!(drawn(0, 120) > 2000, "the panel is drawn");
    assert!(drawn(360, 480) > 2000, "the wave is drawn");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn without_a_vulkan_driver_the_window_says_why_and_goes_on_with_opengl() {
    let display = std::env::var_os("DISPLAY").is_some();
    if !common::available(display, "an X display (Xvfb)", "INTEROP_LAB_REQUIRE_DISPLAY") {
        return;
    }
    let output = common::binary()
        .args(["wave", "--renderer", "vulkan", "--backend", "cpu", "--size", "320x200", "--frames", "5"])
        .env("VK_DRIVER_FILES", "/nonexistent/icd.json")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("drawing with OpenGL instead") && stderr.contains("driver"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn the_vulkan_window_records_every_frame() {
    let display = std::env::var_os("DISPLAY").is_some();
    if !vulkan_available() || !common::available(display, "an X display (Xvfb)", "INTEROP_LAB_REQUIRE_DISPLAY") {
        return;
    }
    let dir = common::temp_dir("vulkan-window-record");
    let output = common::binary()
        .args(["wave", "--renderer", "vulkan", "--backend", "cpu", "--size", "160x100", "--frames", "6", "--record"])
        .arg(dir.join("frames"))
        .env("RUST_LOG", "interop_lab=info")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success() && stderr.contains("Vulkan window on"), "{stderr}");
    let frames: Vec<_> = std::fs::read_dir(dir.join("frames")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(frames.len(), 6, "one PNG per frame: {frames:?}");
    for frame in &frames {
        assert_eq!(image::open(frame).expect("a PNG").to_rgba8().dimensions(), (160, 100), "{}", frame.display());
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn doctor_says_whether_a_vulkan_window_can_present_here() {
    let display = std::env::var_os("DISPLAY").is_some();
    if !vulkan_available() || !common::available(display, "an X display (Xvfb)", "INTEROP_LAB_REQUIRE_DISPLAY") {
        return;
    }
    let doctor = |driver: Option<&str>| {
        let mut command = common::binary();
        command.arg("doctor");
        if let Some(file) = driver {
            command.env("VK_DRIVER_FILES", file);
        }
        String::from_utf8_lossy(&command.output().unwrap().stdout).into_owned()
    };
    let here = doctor(None);
    assert!(here.contains("ok Vulkan window: presents"), "{here}");
    let without = doctor(Some("/nonexistent/icd.json"));
    let line = without.lines().find(|l| l.contains("Vulkan window")).unwrap_or_default().to_owned();
    assert!(line.starts_with("--") && line.contains("driver") && line.contains("OpenGL"), "{without}");
}

#[test]
fn headless_vulkan_frames_draw_the_panel_beside_the_demo() {
    if !vulkan_available() {
        return;
    }
    let size = [800, 480];
    let mut with_panel = options(DemoSpec::new(WaveSettings::default()), size);
    with_panel.panel = true;
    let report = vulkan_run(&with_panel).unwrap();
    let plain = vulkan_run(&options(DemoSpec::new(WaveSettings::default()), size)).unwrap();
    // The left strip: empty without the panel, text and widgets with it.
    let differing = |a: &[u8], b: &[u8], x0: usize, x1: usize| {
        (0..size[1] as usize)
            .flat_map(|y| (x0..x1).map(move |x| (y * size[0] as usize + x) * 4))
            .filter(|&i| a[i..i + 3] != b[i..i + 3])
            .count()
    };
    let strip = differing(&report.pixels, &plain.pixels, 0, 150);
    assert!(strip > 5000, "the panel is drawn on the left ({strip} pixels differ)");
    assert!(report.summary.stage(Stage::Panel).is_some(), "the panel's host time is a stage of its own");
}

#[test]
fn switching_renderer_carries_the_bodies_over() {
    use interop_lab::demo_kit::{Demo, DemoEnv};
    use interop_lab::demos::nbody::NBody;
    use interop_lab::transfer::TransferKind;
    if !vulkan_available() {
        return;
    }
    let settings = NBodySettings { bodies: Some(1000), energy_every: 0, ..NBodySettings::default() };
    let gl_context = interop_lab::gl::context::headless::HeadlessGl::new(None).expect("headless GL");
    let gl = Graphics::Gl(gl_context.gl());
    let vulkan_graphics = VulkanGraphics::new(&DeviceChoice::Any, [64, 64]).unwrap();
    let vulkan = Graphics::Vulkan(&vulkan_graphics);
    let mut on_gl =
        NBody::new(&DemoEnv { graphics: gl, cuda: None, transfer: TransferKind::Cpu, window: false }, settings)
            .unwrap();
    for frame in 0..5 {
        on_gl.step(gl, frame, 0.0).unwrap();
    }
    let spec = on_gl.spec_with_state(gl).unwrap();
    let carried = spec.settings::<NBodySettings>().unwrap().clone();
    assert!(carried.load.is_some(), "the state goes through a file the new demo loads");
    let mut on_vulkan =
        NBody::new(&DemoEnv { graphics: vulkan, cuda: None, transfer: TransferKind::Cpu, window: false }, carried)
            .unwrap();
    let (before, after) = (on_gl.read_bodies(gl).unwrap(), on_vulkan.read_bodies(vulkan).unwrap());
    assert_eq!(before.positions, after.positions, "the bodies where the GL demo left them");
    assert_eq!(before.velocities, after.velocities);
    assert_eq!(on_vulkan.steps(), 5, "and the step count");
    // Both go on alike: the CPU backend's steps are deterministic.
    on_gl.step(gl, 5, 0.0).unwrap();
    on_vulkan.step(vulkan, 0, 0.0).unwrap();
    assert_eq!(on_gl.read_bodies(gl).unwrap().positions, on_vulkan.read_bodies(vulkan).unwrap().positions);
    Box::new(on_gl).destroy(gl);
    Box::new(on_vulkan).destroy(vulkan);
}

#[test]
fn re_making_targets_buffers_and_textures_keeps_host_memory_flat() {
    use interop_lab::transfer::{TextureMemory, TransferKind};
    if !vulkan_available() {
        return;
    }
    // On a software driver every Vulkan allocation is host memory, so a Vulkan object that is
    // not released shows as resident memory that grows with each round.
    let mut vulkan = VulkanGraphics::new(&DeviceChoice::Any, [64, 64]).unwrap();
    let mut transfer = interop_lab::transfer::create(TransferKind::Cpu, None).unwrap();
    let mut round = |vulkan: &mut VulkanGraphics, n: u32| {
        let size = [512 + (n % 2) * 256, 384];
        vulkan.resize(size).unwrap(); // a new offscreen target (colour, depth, read-back buffer)
        let graphics = Graphics::Vulkan(vulkan);
        let bytes = vec![7u8; 4 << 20];
        let buffer = transfer.create_buffer(graphics, &bytes).unwrap();
        let texture = TextureMemory::new(graphics, [512, 512], PixelFormat::Rgba8, &bytes[..512 * 512 * 4]).unwrap();
        vulkan.begin_frame([0.0; 4], u64::from(n)).unwrap();
        vulkan.end_frame().unwrap();
        buffer.destroy(graphics);
        texture.destroy(graphics);
    };
    for n in 0..10 {
        round(&mut vulkan, n); // the allocator's and driver's first-use growth
    }
    // Resident memory is the whole process's, and the other tests of this file run beside this
    // one: three batches, of which the least growth counts. A leak grows every batch.
    let mut growth = Vec::new();
    for _ in 0..3 {
        let before = interop_lab::soak::resident_bytes().unwrap();
        for n in 0..60 {
            round(&mut vulkan, n);
        }
        let after = interop_lab::soak::resident_bytes().unwrap();
        eprintln!("resident {before} → {after} bytes over 60 rounds of ~7 MiB each");
        growth.push(after.saturating_sub(before));
    }
    let grown = growth.iter().copied().min().unwrap_or(u64::MAX);
    // 60 rounds × (4 MiB buffer + 1 MiB texture + ~2 MiB target) ≈ 420 MiB if nothing were freed.
    assert!(grown < 32 << 20, "resident memory grew by at least {grown} bytes in each batch of 60 rounds: {growth:?}");
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
fn soak_runs_on_vulkan_and_counts_its_buffers_and_images() {
    if !vulkan_available() {
        return;
    }
    let dir = common::temp_dir("soak-vulkan");
    let json = dir.join("soak.json");
    let output = common::binary()
        .args(["soak", "--renderer", "vulkan", "--transfer", "cpu", "--frames", "30", "--reallocations", "8"])
        .args(["--warmup-reallocations", "4", "--json"])
        .arg(&json)
        .output()
        .expect("run");
    let said = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    // Whether host memory stays within bounds is the long soak's question; the objects are not:
    // every re-allocation makes new buffers and drops the old, so a count that only rose would
    // exceed its bound of +0 here.
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).expect("--json")).expect("JSON");
    assert_eq!(report["renderer"], "vulkan", "{report}");
    let objects = &report["before"]["objects"];
    assert!(objects["buffers"].as_u64().unwrap_or(0) > 0 && objects["images"].as_u64().unwrap_or(0) > 0, "{report}");
    let exceeded: Vec<String> = serde_json::from_value(report["exceeded"].clone()).expect("exceeded");
    assert!(!exceeded.iter().any(|what| what.starts_with("Vulkan")), "{exceeded:?}\n{said}");
    assert!(said.contains("buffers") && said.contains("images") && said.contains("Vulkan"), "{said}");

    let refused =
        common::binary().args(["soak", "--renderer", "vulkan", "--transfer", "interop"]).output().expect("run");
    assert_eq!(refused.status.code(), Some(1));
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(message.contains("--transfer vulkan, copy or cpu"), "GL interop on Vulkan: {message}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bench_transfer_runs_its_paths_through_the_vulkan_renderer() {
    if !vulkan_available() {
        return;
    }
    let dir = common::temp_dir("bench-transfer-vulkan");
    let json = dir.join("transfer.json");
    let output = common::binary()
        .args(["bench", "transfer", "--renderer", "vulkan", "--backend", "cpu", "--path", "cpu,vulkan,interop"])
        .args(["--bytes", "64K", "--frames", "6", "--warmup", "1", "--json"])
        .arg(&json)
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("then wait for Vulkan"), "{stdout}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).expect("JSON written")).expect("JSON");
    assert_eq!(report["renderer"], "vulkan", "{report:#}");
    let results = report["results"].as_array().expect("results");
    let row = |path: &str| results.iter().find(|r| r["path"] == path).unwrap_or_else(|| panic!("{path}: {report:#}"));
    let cpu = row("cpu");
    let (median, period) = (cpu["frame_us"]["median"].as_f64(), cpu["period_us"].as_f64());
    assert!(median.is_some_and(|m| m.is_finite() && m > 0.0) && period.is_some_and(|p| p > 0.0), "{cpu}");
    // Each path that cannot run says why, not left out: the Vulkan path needs CUDA, GL interop
    // is the other renderer's.
    assert!(row("vulkan")["skipped"].as_str().is_some_and(|why| why.contains("CPU backend")), "{report:#}");
    assert!(row("interop")["skipped"].as_str().is_some_and(|why| why.contains("Vulkan renderer")), "{report:#}");
    std::fs::remove_dir_all(&dir).ok();
}
