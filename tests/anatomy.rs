//! The frame anatomy as `--trace-json` writes it: a Chrome trace whose events have the fields the
//! format needs, one process per API, each frame's stages on its lanes, and ordering edges that
//! point forward in time (within the lanes' stated calibration error). CPU runs here (llvmpipe,
//! lavapipe); the CUDA paths on the GPU machine.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

mod common;

use std::collections::HashMap;

use interop_lab::args::TraceRequest;
use interop_lab::demo_kit::DemoSpec;
use interop_lab::demos::nbody::NBodySettings;
use interop_lab::demos::wave::WaveSettings;
use interop_lab::graphics::GraphicsApi;
use interop_lab::headless::{self, HeadlessOptions};
use interop_lab::runtime::{BackendRequest, CudaOptions, TransferRequest};
use interop_lab::vk::device::DeviceChoice;
use interop_lab::vk::frame::VulkanGraphics;
use serde_json::Value;

/// What a trace held, per process name: the stage names seen on its lanes.
struct Checked {
    /// Process name → the names of its stage spans (`cat` "stage").
    stages: HashMap<String, Vec<String>>,
    /// Process name → the names of its call spans (`cat` "call").
    calls: HashMap<String, Vec<String>>,
    /// Ordering edges (flow start → end), as (from process, to process, label).
    edges: Vec<(String, String, String)>,
    /// Frames the trace says it holds.
    frames: u64,
    /// The processes whose lane was calibrated against the host clock, with the error stated.
    calibrated: HashMap<String, f64>,
    /// Every span, in the order written.
    spans: Vec<Row>,
    /// Frame-start markers (`i` events).
    markers: usize,
}

/// One X event.
struct Row {
    process: String,
    name: String,
    call: bool,
    frame: u64,
    ts: f64,
    dur: f64,
}

/// Loads `path` and checks it as a Chrome trace: every event has `ph` among M, X, B, E, s, f, i, a
/// finite `ts` (but M), integer `pid` and `tid`; X events a `dur` ≥ 0; every flow's end is at or
/// after its start, less the two lanes' calibration errors.
fn check_trace(path: &std::path::Path) -> Checked {
    let text = std::fs::read_to_string(path).expect("trace written");
    let trace: Value = serde_json::from_str(&text).expect("the trace is JSON");
    let events = trace["traceEvents"].as_array().expect("traceEvents is an array");
    let mut process_names = HashMap::new();
    for event in events {
        let ph = event["ph"].as_str().expect("every event has ph");
        assert!(["M", "X", "B", "E", "s", "f", "i"].contains(&ph), "unknown ph {ph}: {event}");
        assert!(event["pid"].as_u64().is_some() && event["tid"].as_u64().is_some(), "pid and tid: {event}");
        if ph == "M" {
            if event["name"] == "process_name" {
                process_names
                    .insert(event["pid"].as_u64().unwrap(), event["args"]["name"].as_str().unwrap().to_owned());
            }
            continue;
        }
        let ts = event["ts"].as_f64().expect("ts is a number");
        assert!(ts.is_finite(), "ts {ts}: {event}");
        if ph == "X" {
            let dur = event["dur"].as_f64().expect("X has dur");
            assert!(dur.is_finite() && dur >= 0.0, "dur {dur}: {event}");
        }
    }
    // The error each process's times may have against the host clock.
    let mut error_of: HashMap<String, f64> = HashMap::from([("host".to_owned(), 0.0)]);
    for calibration in trace["otherData"]["calibrations"].as_array().expect("calibrations") {
        let api = match calibration["lane"].as_str().unwrap() {
            "cuda" => "CUDA".to_owned(),
            _ => calibration["name"].as_str().unwrap().to_owned(),
        };
        if let Some(error) = calibration["error_us"].as_f64() {
            assert!(error.is_finite() && error >= 0.0, "{calibration}");
            error_of.insert(api, error);
        }
    }
    let name = |event: &Value| process_names[&event["pid"].as_u64().unwrap()].clone();
    let mut stages: HashMap<String, Vec<String>> = HashMap::new();
    let mut calls: HashMap<String, Vec<String>> = HashMap::new();
    for event in events.iter().filter(|e| e["ph"] == "X") {
        let list = if event["cat"] == "call" { &mut calls } else { &mut stages };
        list.entry(name(event)).or_default().push(event["name"].as_str().unwrap().to_owned());
    }
    let starts: HashMap<u64, &Value> =
        events.iter().filter(|e| e["ph"] == "s").map(|e| (e["id"].as_u64().expect("flow id"), e)).collect();
    let mut edges = Vec::new();
    for end in events.iter().filter(|e| e["ph"] == "f") {
        let start = starts[&end["id"].as_u64().expect("flow id")];
        let (from, to) = (name(start), name(end));
        // A lane with no calibration has no positioned spans, hence no edges.
        let slack = error_of[&from] + error_of[&to] + 0.01;
        let (t0, t1) = (start["ts"].as_f64().unwrap(), end["ts"].as_f64().unwrap());
        assert!(t1 >= t0 - slack, "edge {from} → {to} goes back in time: {t0} → {t1} (slack {slack} µs): {end}");
        edges.push((from, to, end["name"].as_str().unwrap().to_owned()));
    }
    let spans = events
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| Row {
            process: name(e),
            name: e["name"].as_str().unwrap().to_owned(),
            call: e["cat"] == "call",
            frame: e["args"]["frame"].as_u64().expect("each span names its frame"),
            ts: e["ts"].as_f64().unwrap(),
            dur: e["dur"].as_f64().unwrap(),
        })
        .collect();
    error_of.remove("host");
    let frames = trace["otherData"]["frames"].as_u64().expect("frames");
    let markers = events.iter().filter(|e| e["ph"] == "i" && e["cat"] == "frame").count();
    Checked { stages, calls, edges, frames, calibrated: error_of, spans, markers }
}

/// Each frame's calls are written in the order the driver-call trace recorded them: their start
/// times never go back.
fn check_call_order(checked: &Checked) {
    let mut last: HashMap<u64, (f64, &str)> = HashMap::new();
    for row in checked.spans.iter().filter(|r| r.call) {
        if let Some(&(ts, previous)) = last.get(&row.frame) {
            assert!(row.ts >= ts, "frame {}: {} starts before {previous}, recorded ahead of it", row.frame, row.name);
        }
        last.insert(row.frame, (row.ts, &row.name));
    }
}

fn traced_run(name: &str, options: HeadlessOptions, frames: usize) -> Checked {
    let path = common::temp_dir(name).join("trace.json");
    let options = HeadlessOptions { trace: Some(TraceRequest { path: path.clone(), frames }), ..options };
    headless::run(&options).expect("headless run");
    check_trace(&path)
}

fn count(names: &[String], name: &str) -> usize {
    names.iter().filter(|n| *n == name).count()
}

/// The traces the GPU machine wrote (docs/traces: n-body on GL interop and on external memory
/// with semaphores in a GL window, and offscreen on Vulkan) load as Chrome traces: a calibrated
/// CUDA lane with a kernel in every frame, the graphics API's lane with its draws, and edges both
/// ways between the two (the hand-over to the draw, and the release from the frame before), each
/// forward in time within the stated error.
#[test]
fn the_gpu_machines_traces_load_as_chrome_traces() {
    let mut paths: Vec<_> = std::fs::read_dir("docs/traces")
        .expect("docs/traces (tests run from the project's root)")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.to_string_lossy().ends_with(".trace.json"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 3, "the GPU machine's traces: {paths:?}");
    for path in &paths {
        let checked = check_trace(path);
        let graphics = if path.to_string_lossy().contains("vulkan") { "Vulkan" } else { "OpenGL" };
        let frames = checked.frames as usize;
        assert!(frames >= 30, "{path:?}: {frames} frames");
        assert!(checked.calibrated.contains_key("CUDA"), "{path:?}: the CUDA lane is calibrated");
        assert_eq!(count(&checked.stages["CUDA"], "kernel"), frames, "{path:?}: a kernel per frame");
        assert_eq!(count(&checked.stages[graphics], "draw"), frames, "{path:?}: a draw per frame");
        for (from, to) in [("CUDA", graphics), (graphics, "CUDA")] {
            let crossing = checked.edges.iter().filter(|(f, t, _)| f == from && t == to).count();
            assert!(crossing >= frames - 1, "{path:?}: {crossing} edges {from} → {to} in {frames} frames");
        }
        check_call_order(&checked);
    }
}

#[test]
fn a_cpu_run_on_gl_writes_host_and_gl_lanes_with_forward_edges() {
    let options = HeadlessOptions {
        panel: true,
        ..common::cpu_headless_options(DemoSpec::new(WaveSettings::default()), 20, [320, 200])
    };
    let checked = traced_run("anatomy-gl", options, 8);
    assert_eq!(checked.frames, 8, "--trace-frames bounds the frames written");
    assert_eq!(checked.markers, 8, "a marker where each frame starts");
    let host = &checked.stages["host"];
    // Each frame: the CPU step, its upload, the draw, the panel's layout and paint, the submit.
    for stage in ["kernel", "upload", "draw", "panel", "panel paint", "submit"] {
        assert_eq!(count(host, stage), 8, "{stage} once per frame on the host lane: {host:?}");
    }
    // GL's timer queries land on the graphics lane, placed by the calibration.
    let gl = checked.stages.get("OpenGL").expect("an OpenGL lane");
    assert!(count(gl, "draw") >= 4, "GL draws timed for most frames: {gl:?}");
    // The CPU path's order: computed → upload → draw, every frame.
    let labels: Vec<&str> = checked.edges.iter().map(|(_, _, label)| label.as_str()).collect();
    assert_eq!(labels.iter().filter(|l| **l == "computed: upload").count(), 8, "{labels:?}");
    assert_eq!(labels.iter().filter(|l| **l == "uploaded: the draw may read").count(), 8, "{labels:?}");
    assert!(checked.calls.is_empty(), "no CUDA driver calls on the CPU backend");
}

#[test]
fn a_cpu_run_on_vulkan_writes_host_and_vulkan_lanes() {
    let opened = VulkanGraphics::new(&DeviceChoice::Any, [16, 16]);
    if !common::available(opened.is_ok(), "a Vulkan 1.3 loader and driver", "INTEROP_LAB_REQUIRE_VULKAN") {
        return;
    }
    drop(opened);
    let options = HeadlessOptions {
        renderer: GraphicsApi::Vulkan,
        ..common::cpu_headless_options(DemoSpec::new(WaveSettings::default()), 12, [320, 200])
    };
    let checked = traced_run("anatomy-vulkan", options, 12);
    let host = &checked.stages["host"];
    for stage in ["kernel", "upload", "draw", "submit"] {
        assert_eq!(count(host, stage), 12, "{stage} once per frame on the host lane: {host:?}");
    }
    // A Vulkan lane has spans where the device offers calibrated timestamps (lavapipe does);
    // without them the lane is empty rather than guessed.
    let vulkan = checked.stages.get("Vulkan").map_or(0, |names| count(names, "draw"));
    if checked.calibrated.contains_key("Vulkan") {
        assert!(vulkan >= 6, "calibrated, so most frames' draws are placed on the Vulkan lane: {vulkan}");
    } else {
        assert_eq!(vulkan, 0, "an uncalibrated lane places nothing");
        eprintln!("skipped: this Vulkan device offers no calibrated timestamps, so its lane is empty");
    }
}

#[test]
fn a_window_writes_its_trace_when_it_closes() {
    let display = std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some();
    if !common::available(display, "a display (Xvfb)", "INTEROP_LAB_REQUIRE_DISPLAY") {
        return;
    }
    let path = common::temp_dir("anatomy-window").join("trace.json");
    let output = common::binary()
        .args(["wave", "--backend", "cpu", "--frames", "12", "--size", "900x600", "--vsync", "off"])
        .args(["--panel-open", "anatomy", "--trace-frames", "6", "--trace-json"])
        .arg(&path)
        .output()
        .expect("run");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let checked = check_trace(&path);
    assert_eq!(checked.frames, 6);
    let host = &checked.stages["host"];
    // In a window the frame ends with its present, and the panel is laid out and painted.
    for stage in ["kernel", "upload", "draw", "panel", "panel paint", "present"] {
        assert_eq!(count(host, stage), 6, "{stage} once per frame on the host lane: {host:?}");
    }
}

#[test]
fn a_bench_writes_a_trace_per_frame_run() {
    let dir = common::temp_dir("anatomy-bench");
    let output = common::binary()
        .args(["bench", "nbody", "--backend", "cpu", "--bodies", "1024", "--frames", "20", "--trace-dir"])
        .arg(&dir)
        .output()
        .expect("run");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let checked = check_trace(&dir.join("nbody-1024-gl-depth1.trace.json"));
    assert_eq!(checked.frames, 20, "every frame of the run (fewer than 120)");
    assert_eq!(count(&checked.stages["host"], "kernel"), 20);
}

// --- GPU: the CUDA paths ---------------------------------------------------------------------

fn gpu_options(spec: DemoSpec, renderer: GraphicsApi, transfer: TransferRequest) -> HeadlessOptions {
    HeadlessOptions {
        renderer,
        cuda: CudaOptions { backend: BackendRequest::Cuda, transfer, ..CudaOptions::default() },
        ..common::cpu_headless_options(spec, 90, [640, 400])
    }
}

/// A CUDA path's trace: the CUDA lane has the path's stages, every frame's driver calls are on
/// the host lane, and the path's edges are there and point forward (within calibration error):
/// `edge` from CUDA to the graphics lane within a frame, `released` from the graphics lane (the
/// draw of the frame before) to CUDA.
fn check_cuda_path(
    name: &str,
    renderer: GraphicsApi,
    transfer: TransferRequest,
    graphics: &str,
    edge: &str,
    released: &str,
) -> Checked {
    let spec = DemoSpec::new(NBodySettings { bodies: Some(16384), ..NBodySettings::default() });
    let checked = traced_run(name, gpu_options(spec, renderer, transfer), 40);
    assert_eq!(checked.frames, 40);
    let cuda = checked.stages.get("CUDA").expect("a CUDA lane with spans (calibrated)");
    assert!(count(cuda, "kernel") >= 30, "kernels on the CUDA lane for most frames: {cuda:?}");
    let drawn = checked.stages.get(graphics).map_or(0, |names| count(names, "draw"));
    assert!(drawn >= 30, "draws on the {graphics} lane for most frames: {drawn}");
    let calls = &checked.calls["host"];
    assert!(count(calls, "cuLaunchKernel") >= 40, "each frame's launches on the host lane: {calls:?}");
    let crossing =
        checked.edges.iter().filter(|(from, to, label)| from == "CUDA" && to == graphics && label.starts_with(edge));
    assert!(crossing.count() >= 30, "the {edge:?} edge from CUDA to {graphics} in most frames: {:?}", checked.edges);
    let back = checked
        .edges
        .iter()
        .filter(|(from, to, label)| from == graphics && to == "CUDA" && label.starts_with(released));
    assert!(back.count() >= 30, "the {released:?} edge from {graphics} to CUDA in most frames: {:?}", checked.edges);
    check_call_order(&checked);
    checked
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gl_interop_frames_order_the_unmap_before_the_draw() {
    check_cuda_path(
        "anatomy-interop",
        GraphicsApi::Gl,
        TransferRequest::Interop,
        "OpenGL",
        "unmapped: the draw may read",
        "GL has finished with the buffer: the map returns",
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn semaphore_frames_order_the_signal_before_the_draw() {
    check_cuda_path(
        "anatomy-semaphores",
        GraphicsApi::Gl,
        TransferRequest::ExternalSemaphores,
        "OpenGL",
        "CUDA signals the semaphore the draw waits for",
        "GL signals it has finished with the buffers; CUDA waits",
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn vulkan_frames_order_the_timeline_signal_before_the_draw() {
    let checked = check_cuda_path(
        "anatomy-vulkan-cuda",
        GraphicsApi::Vulkan,
        TransferRequest::Auto,
        "Vulkan",
        "CUDA signals the timeline value the draw waits for",
        "Vulkan signals it has read the buffer; CUDA waits",
    );
    // The timeline edges name their semaphore and value (the calls are recorded).
    for value in ["(written = ", "(read ≥ "] {
        let named = checked.edges.iter().filter(|(_, _, label)| label.contains(value)).count();
        assert!(named >= 30, "edges naming {value:?} in most frames: {:?}", checked.edges);
    }
}

/// A wave kernel whose first thread spins for `SPIN_US` on the GPU's global timer: the CUDA lane
/// must show each kernel at least that long (and not much longer), starting after the host
/// launched it, within the lane's calibration error.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_kernel_that_spins_300_us_shows_that_long_after_its_launch() {
    use interop_lab::demos::wave::KERNEL;
    const SPIN_US: f64 = 300.0;
    let body = "    const unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;";
    assert!(KERNEL.embedded.contains(body), "the wave kernel starts where this test expects");
    let spin = "    unsigned long long spin_start, spin_now;\n\
                asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(spin_start));\n\
                if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0) {\n\
                    do { asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(spin_now)); }\n\
                    while (spin_now - spin_start < 300000ull);\n\
                }\n";
    let dir = common::temp_dir("anatomy-spin");
    std::fs::write(dir.join("wave.cu"), KERNEL.embedded.replace(body, &format!("{spin}{body}"))).expect("kernel");
    let mut options = gpu_options(DemoSpec::new(WaveSettings::default()), GraphicsApi::Gl, TransferRequest::Interop);
    options.cuda.kernels_dir = Some(dir);
    let checked = traced_run("anatomy-spin", options, 40);
    let error = checked.calibrated.get("CUDA").copied().expect("the CUDA lane is calibrated");
    let mut lengths = Vec::new();
    for row in checked.spans.iter().filter(|r| r.process == "CUDA" && r.name == "kernel") {
        let launch = checked
            .spans
            .iter()
            .find(|h| h.process == "host" && !h.call && h.name == "kernel" && h.frame == row.frame)
            .expect("each frame's launch on the host lane");
        assert!(
            row.ts >= launch.ts - error - 0.01,
            "frame {}: the kernel starts at {} µs, before its launch at {} µs (error ±{error} µs)",
            row.frame,
            row.ts,
            launch.ts
        );
        lengths.push(row.dur);
    }
    assert!(lengths.len() >= 30, "most frames' kernels placed: {}", lengths.len());
    lengths.sort_by(f64::total_cmp);
    let median = lengths[lengths.len() / 2];
    assert!(lengths[0] >= SPIN_US * 0.99, "no kernel shorter than its spin: {lengths:?}");
    assert!(median <= SPIN_US + 100.0, "the median kernel lasts about its spin: {median} µs");
    eprintln!("spin kernel: median {median:.1} µs for a {SPIN_US} µs spin; CUDA lane ±{error:.1} µs");
}
