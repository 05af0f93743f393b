//! One scripted run on both renderers: the same session, the same actions — path switches, a demo
//! switch, pause and step, a recording, the what-if on and off, a live kernel edit (with CUDA), a
//! renderer switch — and the same checks: the wave the renderer draws against the f64 reference,
//! the two renderers' pictures against each other, and `--stats` against its schema. On CI this is
//! llvmpipe and lavapipe with the CPU backend; on the GPU machine, NVIDIA with CUDA
//! (`--include-ignored` runs the CUDA one).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

mod common;

use interop_lab::demo_kit::DemoSpec;
use interop_lab::demos::nbody::NBodySettings;
use interop_lab::demos::wave::Wave;
use interop_lab::demos::wave::cpu::{WaveFrame, reference, relative_error};
use interop_lab::graphics::GraphicsApi;
use interop_lab::headless::panel_input;
use interop_lab::renderer::{self, Canvas};
use interop_lab::runtime::{BackendRequest, CudaOptions};
use interop_lab::session::{
    FrameInput, FrameReport, PanelAction, Request, RunFacts, STATS_SCHEMA, Session, SessionOptions,
};
use interop_lab::transfer::{TransferKind, WhatIf};

const SIZE: [u32; 2] = [480, 300];

/// The keys every `--stats` document has (docs/stats.md), whatever drew it.
const STATS_KEYS: [&str; 20] = [
    "schema",
    "demo",
    "renderer",
    "window",
    "graphics",
    "backend",
    "transfer",
    "reason",
    "device",
    "size",
    "frames",
    "frames_asked",
    "wall_seconds",
    "frames_per_second",
    "host_peak_rss_bytes",
    "recoveries",
    "kernel",
    "what_if",
    "demo_stats",
    "timings_us",
];

fn open(api: GraphicsApi, cuda: &CudaOptions) -> (Box<dyn renderer::Renderer>, interop_lab::runtime::Selection) {
    renderer::open(api, Canvas::Offscreen { size: SIZE }, cuda, None)
        .unwrap_or_else(|e| panic!("{} offscreen: {e}", api.label()))
}

/// `count` frames with the panel; every report free of errors.
fn frames(session: &mut Session, count: u32, dt: f32) -> FrameReport {
    let mut last = FrameReport::default();
    for _ in 0..count {
        let report =
            session.frame(FrameInput { dt, panel: Some(panel_input(SIZE, 0.0)), capture: true, ..Default::default() });
        assert!(report.errors.is_empty(), "a frame reported {:?}", report.errors);
        assert!(report.drawn, "a frame was drawn");
        last = report;
    }
    last
}

fn act(session: &mut Session, action: PanelAction) -> FrameReport {
    let report = session.act(action.clone());
    assert!(report.errors.is_empty(), "{action:?} reported {:?}", report.errors);
    report
}

/// Steps the wave once at `phase` (dt 0) and checks what the renderer draws from against the
/// f64 reference, the buffer poisoned with NaN first.
fn wave_matches_the_reference(session: &mut Session, phase: f64, bound: f64) {
    let settings = session
        .with_demo(|demo, graphics| {
            let wave = demo.as_any_mut().and_then(|d| d.downcast_mut::<Wave>()).expect("the wave runs");
            wave.poison_positions(graphics)?;
            wave.set_phase(phase);
            Ok(wave.settings().clone())
        })
        .expect("poison");
    frames(session, 1, 0.0);
    let out = session
        .with_demo(|demo, graphics| {
            demo.as_any_mut().and_then(|d| d.downcast_mut::<Wave>()).expect("the wave").read_positions(graphics)
        })
        .expect("read back");
    let frame = WaveFrame {
        width: settings.width,
        height: settings.height,
        phase: phase as f32,
        frequency: settings.frequency,
        amplitude: settings.amplitude,
    };
    assert!(out.iter().flatten().all(|v| v.is_finite()), "every vertex written (poison was NaN)");
    let error = relative_error(&out, &reference(&frame));
    let path = session.transfer_kind();
    eprintln!("{} on {path}: ‖out − ref‖/‖ref‖ = {error:e}", session.renderer().info().api.label());
    assert!(error < bound, "on {path}: {error:e} (bound {bound:e})");
}

fn stats_follow_the_schema(session: &mut Session, frames: u64, api: GraphicsApi) {
    let facts = RunFacts { frames, frames_asked: None, size: session.renderer().size() };
    let json = session.stats_json(&facts).expect("stats");
    for key in STATS_KEYS {
        assert!(json.get(key).is_some(), "--stats has {key:?}: {json:#}");
    }
    assert_eq!(json["schema"], STATS_SCHEMA);
    assert_eq!(json["renderer"], serde_json::to_value(api).expect("api"));
    assert!(json["timings_us"]["frame_us"]["median"].as_f64().is_some_and(|us| us > 0.0), "{json:#}");
    assert!(json["timings_us"]["stages"].as_array().is_some_and(|stages| !stages.is_empty()), "{json:#}");
}

/// The script, on `api` first and the other API after the switch. Returns the last picture drawn
/// with each.
fn scripted_run(api: GraphicsApi, cuda: &CudaOptions, kernels: Option<&std::path::Path>) -> [Vec<u8>; 2] {
    let dir = common::temp_dir(&format!("parity-{api:?}"));
    let (renderer, selection) = open(api, cuda);
    let paths = selection.available_transfers();
    let options = SessionOptions {
        spec: DemoSpec::new(NBodySettings { bodies: Some(1024), ..NBodySettings::default() }),
        what_if: WhatIf::default(),
        open_sections: Vec::new(),
        path_flags: Vec::new(),
        record: Some(dir.join("frames")),
    };
    let mut session = Session::new(renderer, selection, options).expect("session");
    frames(&mut session, 3, 0.01);
    // Every path this renderer offers, the bodies carried over each time.
    for &path in &paths {
        act(&mut session, PanelAction::SwitchTransfer(path));
        assert_eq!(session.transfer_kind(), path);
        frames(&mut session, 2, 0.01);
    }
    act(&mut session, PanelAction::SwitchDemo("wave"));
    frames(&mut session, 2, 0.01);
    for &path in &paths {
        act(&mut session, PanelAction::SwitchTransfer(path));
        wave_matches_the_reference(&mut session, 1.3, 1e-5);
    }
    // Pause: frames draw, the wave does not move; a step moves it once.
    // (the scene only: the panel's numbers change every frame)
    act(&mut session, PanelAction::Pause(true));
    let paused = scene(&mut session, 2, 0.25);
    let still = scene(&mut session, 1, 0.25);
    assert!(paused == still, "paused frames draw the same picture");
    act(&mut session, PanelAction::Step);
    let stepped = scene(&mut session, 1, 0.25);
    assert!(stepped != still, "a step moves the wave");
    act(&mut session, PanelAction::Pause(false));
    // The what-if switches, on and off: each one that does nothing here says so.
    act(&mut session, PanelAction::SetWhatIf(WhatIf { skip_copy_sync: true, ..WhatIf::default() }));
    if session.transfer_kind() != TransferKind::HostCopy {
        let (_, notices) = session.messages();
        assert!(notices.iter().any(|n| n.contains("skip-copy-sync")), "said to do nothing here: {notices:?}");
    }
    frames(&mut session, 2, 0.01);
    act(&mut session, PanelAction::SetWhatIf(WhatIf::default()));
    // A live kernel edit (CUDA only: the CPU runs no kernel): one that shows in what it writes
    // (w = 2), then the original back while on the CPU path, which runs when CUDA comes back.
    if let Some(kernels) = kernels {
        let cuda_path = paths[0];
        assert!(cuda_path.uses_cuda(), "the first path offered runs CUDA: {paths:?}");
        act(&mut session, PanelAction::SwitchTransfer(cuda_path));
        let source = include_str!("../kernels/wave.cu");
        let edited = source.replace("make_float4(u, h, v, 1.0f)", "make_float4(u, h, v, 2.0f)");
        assert_ne!(edited, source, "the edit changes the kernel");
        std::fs::write(kernels.join("wave.cu"), edited).expect("edit");
        assert!(reloaded(&mut session), "the edited kernel was compiled and swapped in");
        let out = positions(&mut session);
        assert!(out.iter().all(|p| p[3] == 2.0), "the edited kernel writes the vertices");
        act(&mut session, PanelAction::SwitchTransfer(TransferKind::Cpu));
        std::fs::write(kernels.join("wave.cu"), source).expect("edit back");
        frames(&mut session, 30, 0.01);
        let status = session.kernel_watch_status();
        assert!(
            !matches!(status, Some(interop_lab::kernel_watch::WatchStatus::Failed { .. })),
            "an edit on the CPU path is no failure: {status:?}"
        );
        act(&mut session, PanelAction::SwitchTransfer(cuda_path));
        wave_matches_the_reference(&mut session, 0.7, 1e-5);
    }
    // Stop the recording: every frame since the start was written.
    let stopped = act(&mut session, PanelAction::ToggleRecording);
    assert!(stopped.notices.iter().any(|n| n.contains("recorded")), "{:?}", stopped.notices);
    let recorded = std::fs::read_dir(dir.join("frames")).expect("frames").count() as u64;
    assert_eq!(recorded, session.frames(), "one PNG per frame drawn while recording");
    let first = scene(&mut session, 1, 0.0);
    let drawn = session.frames();
    stats_follow_the_schema(&mut session, drawn, api);

    // The other renderer, asked for from the panel: the wave goes on there.
    let other = GraphicsApi::ALL.into_iter().find(|&a| a != api).expect("a second API");
    let switch = act(&mut session, PanelAction::SwitchRenderer(other));
    assert_eq!(switch.requests, vec![Request::SwitchRenderer(other)]);
    let (renderer, selection) = open(other, cuda);
    session.switch_renderer(renderer, selection).expect("the other renderer");
    assert_eq!(session.renderer().info().api, other);
    assert!(session.demo().expect("demo").name() == "wave", "the demo came along");
    wave_matches_the_reference(&mut session, 2.1, 1e-5);
    let second = scene(&mut session, 1, 0.0);
    stats_follow_the_schema(&mut session, 1, other);
    session.finish().expect("finish");
    let (_, failure) = session.close();
    assert!(failure.is_none(), "{failure:?}");
    std::fs::remove_dir_all(&dir).ok();
    [first, second]
}

/// `count` frames, then the part of the last one right of the panel: the scene.
fn scene(session: &mut Session, count: u32, dt: f32) -> Vec<u8> {
    let pixels = frames(session, count, dt).pixels.expect("pixels");
    let panel = session.panel_width() as usize;
    pixels.chunks_exact(SIZE[0] as usize * 4).flat_map(|row| row[panel * 4..].to_vec()).collect()
}

/// Frames until the watcher says the edited kernel was reloaded (the panel's kernel sources
/// section), for up to 12 s.
fn reloaded(session: &mut Session) -> bool {
    for _ in 0..600 {
        frames(session, 1, 0.01);
        let status = session.kernel_watch_status();
        if matches!(status, Some(interop_lab::kernel_watch::WatchStatus::Reloaded { .. })) {
            return true;
        }
        assert!(
            !matches!(status, Some(interop_lab::kernel_watch::WatchStatus::Failed { .. })),
            "the edit compiles: {status:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    false
}

/// The vertices the wave's last frame wrote.
fn positions(session: &mut Session) -> Vec<[f32; 4]> {
    session
        .with_demo(|demo, graphics| {
            demo.as_any_mut().and_then(|d| d.downcast_mut::<Wave>()).expect("the wave").read_positions(graphics)
        })
        .expect("read back")
}

/// The same demo, path and phase drawn with both APIs: the pictures agree.
fn pictures_agree(gl: &[u8], vulkan: &[u8]) {
    let db = common::psnr(gl, vulkan);
    eprintln!("OpenGL against Vulkan: {db:.1} dB");
    assert!(db > 30.0, "the two renderers draw the same frame ({db:.1} dB)");
}

fn vulkan_available() -> bool {
    let opened = interop_lab::vk::frame::VulkanGraphics::new(&interop_lab::vk::device::DeviceChoice::Any, [8, 8]);
    common::available(opened.is_ok(), "a Vulkan 1.3 loader and driver", "INTEROP_LAB_REQUIRE_VULKAN")
}

#[test]
fn the_same_script_runs_on_both_renderers_on_the_cpu() {
    if !vulkan_available() {
        return;
    }
    let cpu = CudaOptions { backend: BackendRequest::Cpu, ..CudaOptions::default() };
    let [gl_first, vulkan_after_gl] = scripted_run(GraphicsApi::Gl, &cpu, None);
    let [vulkan_first, gl_after_vulkan] = scripted_run(GraphicsApi::Vulkan, &cpu, None);
    pictures_agree(&gl_first, &vulkan_first);
    pictures_agree(&gl_after_vulkan, &vulkan_after_gl);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn the_same_script_runs_on_both_renderers_with_cuda() {
    let dir = common::temp_dir("parity-kernels");
    std::fs::write(dir.join("wave.cu"), include_str!("../kernels/wave.cu")).expect("kernel");
    let cuda = CudaOptions {
        backend: BackendRequest::Cuda,
        kernels_dir: Some(dir.clone()),
        no_cache: true,
        ..CudaOptions::default()
    };
    for api in [GraphicsApi::Gl, GraphicsApi::Vulkan] {
        std::fs::write(dir.join("wave.cu"), include_str!("../kernels/wave.cu")).expect("kernel");
        let [first, _] = scripted_run(api, &cuda, Some(&dir));
        assert!(first.chunks_exact(4).any(|p| p != &first[..4]), "{api:?}: drawn");
    }
    std::fs::remove_dir_all(&dir).ok();
}
