//! `interop-lab bench anatomy`: what recording the frame anatomy costs. The same headless wave
//! run four times — nothing recorded; the anatomy recorded (every call, the CUDA lane's
//! calibration) and written as a trace; the panel drawn with the anatomy closed; the panel with
//! the anatomy view open — each reported as frames/s and median frame time, with the panel's
//! host time where drawn. Ctrl-C or SIGTERM ends it within a frame, with what was measured.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use crate::args::{CudaArgs, PanelSection, TraceRequest};
use crate::demo_kit::DemoSpec;
use crate::demo_kit::bench::{BenchReport, cell};
use crate::demos::wave::WaveSettings;
use crate::error::Result;
use crate::graphics::GraphicsApi;
use crate::headless::{self, HeadlessOptions};
use crate::progress::Progress;
use crate::stats::Stage;
use crate::stop::StopRequest;

#[derive(Args, Debug)]
/// `interop-lab bench anatomy`.
pub struct AnatomyBenchArgs {
    /// Frames per run, 1 or more frames (medians over all of them: the few slow first frames
    /// barely move a median).
    #[arg(long, default_value_t = 600, value_parser = crate::args::FRAMES)]
    pub frames: u32,
    /// Graphics API to draw with.
    #[arg(long, value_enum, default_value_t = GraphicsApi::Gl)]
    pub renderer: GraphicsApi,
    /// Framebuffer size, WIDTHxHEIGHT, each 1 to 16384 pixels.
    #[arg(long, value_parser = crate::args::SIZE, default_value = "1280x800")]
    pub size: [u32; 2],
    /// Write the results as JSON.
    #[arg(long, value_name = "FILE.json")]
    pub json: Option<PathBuf>,
    /// Backend and transfer path.
    #[command(flatten)]
    pub cuda: CudaArgs,
}

/// Runs the four modes one after the other. A stop request (Ctrl-C, SIGTERM) ends the mode
/// running within a frame; the modes measured, that one with the frames it ran, are reported and
/// marked interrupted.
pub fn run(args: &AnatomyBenchArgs, stop: &StopRequest) -> Result<BenchReport> {
    crate::output::check_optional(&args.json, crate::output::OutputKind::Data, "--json")?;
    let trace_path = std::env::temp_dir().join(format!("interop-lab-bench-anatomy-{}.json", std::process::id()));
    let modes: [(&str, bool, bool, bool); 4] = [
        ("nothing recorded", false, false, false),
        ("anatomy recorded (--trace-json)", true, false, false),
        ("panel, anatomy closed", false, true, false),
        ("panel, anatomy open", false, true, true),
    ];
    let mut rows = Vec::new();
    let mut table = format!("{:<34} {:>10} {:>14} {:>16}\n", "mode", "frames/s", "frame µs (med)", "panel host µs");
    let progress = Progress::new("bench anatomy", modes.len() as u64, stop);
    for (label, traced, panel, open) in modes {
        if progress.stopped() {
            break;
        }
        progress.step(format!("{label}, {} frames", args.frames));
        let mut options = HeadlessOptions::new(
            DemoSpec::new(WaveSettings::default()),
            args.renderer,
            args.frames,
            args.size,
            args.cuda.options(),
        );
        options.panel = panel;
        options.stop = stop.clone();
        if open {
            options.open_sections = vec![PanelSection::Anatomy];
        }
        if traced {
            options.trace = Some(TraceRequest { path: trace_path.clone(), frames: 120 });
        }
        let report = headless::run(&options)?;
        let frame_us = report.summary.frame_us.map(|p| p.median);
        let panel_us = report.summary.stage(Stage::Panel).and_then(|s| s.host_us).map(|p| p.median);
        table.push_str(&format!(
            "{:<34} {:>10.0} {:>14} {:>16}\n",
            label,
            report.frames_per_second,
            cell(frame_us, 1),
            cell(panel_us, 1)
        ));
        rows.push(json!({
            "mode": label,
            "frames": report.frames,
            "frames_per_second": report.frames_per_second,
            "frame_us_median": frame_us,
            "panel_host_us_median": panel_us,
            "transfer": report.json["transfer"].clone(),
        }));
        progress.done_one();
    }
    let _ = std::fs::remove_file(&trace_path);
    let json = json!({ "bench": "anatomy", "demo": "wave", "renderer": args.renderer.label(), "rows": rows });
    BenchReport::finish(json, table, stop, &args.json)
}
