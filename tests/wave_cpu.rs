//! The wave demo on the CPU backend, end to end through GL: the vertex buffer GL holds after a
//! step equals the f64 reference, and a headless run renders a non-blank picture.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

mod common;

use interop_lab::demo_kit::DemoSpec;
use interop_lab::demos::wave::WaveSettings;
use interop_lab::gl::context::headless::HeadlessGl;
use interop_lab::graphics::Graphics;
use interop_lab::headless::{self, HeadlessOptions};
use interop_lab::stats::Stage;

#[test]
fn cpu_step_writes_the_reference_into_the_gl_buffer() {
    let context = HeadlessGl::new(None).expect("headless GL");
    let gl = context.gl().clone();
    common::check_wave_cpu_step(Graphics::Gl(&gl), &[(97, 61), (1, 13), (200, 1)]);
}

#[test]
fn headless_cpu_run_renders_and_reports_its_stages() {
    let dir = std::env::temp_dir().join(format!("interop-lab-headless-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let options = HeadlessOptions {
        screenshot: Some(dir.join("wave.png")),
        stats: Some(dir.join("wave.json")),
        ..common::cpu_headless_options(DemoSpec::new(WaveSettings::default()), 12, [320, 200])
    };
    let report = headless::run(&options).expect("headless run");
    // Not blank: a good share of the pixels differ from the background colour.
    let background = &report.pixels[..4];
    let lit = report.pixels.chunks_exact(4).filter(|p| p != &background).count();
    let total = report.pixels.len() / 4;
    assert!(lit * 10 > total, "only {lit} of {total} pixels drawn");
    for stage in [Stage::Kernel, Stage::Upload, Stage::Draw] {
        let times = report.summary.stage(stage).unwrap_or_else(|| panic!("{} was timed", stage.name()));
        assert_eq!(times.host_us.map(|p| p.samples), Some(12), "{}: one sample per frame", stage.name());
    }
    assert!(report.summary.stage(Stage::Map).is_none(), "the CPU path does not map");
    let png = image::open(dir.join("wave.png")).expect("PNG written").to_rgba8();
    assert_eq!(png.dimensions(), (320, 200));
    assert_eq!(png.as_raw(), &report.pixels, "the PNG holds the last frame");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("wave.json")).expect("stats written"))
            .expect("valid JSON");
    assert_eq!(json["backend"], "cpu");
    assert_eq!(json["transfer"], "cpu");
    assert_eq!(json["frames"], 12);
    assert!(json["timings_us"]["stages"].as_array().is_some_and(|s| s.len() == 3), "{}", json["timings_us"]);
    std::fs::remove_dir_all(&dir).ok();
}
