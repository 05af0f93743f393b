//! The command line as a user runs it: headless runs, bad input, `doctor`, and the window under a
//! display (Xvfb in CI, which sets INTEROP_LAB_REQUIRE_DISPLAY=1).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{binary, temp_dir};

fn lit_fraction(path: &std::path::Path, x_range: std::ops::Range<u32>) -> f64 {
    let image = image::open(path).expect("PNG").to_rgba8();
    let background = *image.get_pixel(image.width() - 1, image.height() - 1);
    let mut lit = 0usize;
    let mut total = 0usize;
    for (x, _, pixel) in image.enumerate_pixels() {
        if x_range.contains(&x) {
            total += 1;
            lit += usize::from(*pixel != background);
        }
    }
    lit as f64 / total.max(1) as f64
}

#[test]
fn headless_cpu_wave_writes_a_picture_and_stats() {
    let dir = temp_dir("headless");
    let output = binary()
        .args(["wave", "--headless", "--backend", "cpu", "--frames", "30", "--size", "400x300", "--vertices", "64x48"])
        .arg("--screenshot")
        .arg(dir.join("w.png"))
        .arg("--stats")
        .arg(dir.join("w.json"))
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("wave on cpu") && stdout.contains("kernel") && stdout.contains("upload"), "{stdout}");
    assert!(lit_fraction(&dir.join("w.png"), 0..400) > 0.1, "the picture is not blank");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("w.json")).expect("stats")).expect("JSON");
    assert_eq!(json["frames"], 30);
    assert!(json["timings_us"]["frame_us"]["median"].as_f64().is_some_and(|v| v > 0.0));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_input_gets_a_message_not_a_panic() {
    let cases: [(&[&str], &str); 6] = [
        (&["wave", "--headless", "--backend", "cpu", "--vertices", "0x10"], "the range is each 1 to 8192 vertices"),
        (&["wave", "--headless", "--backend", "cpu", "--vertices", "10"], "is not of the form AxB"),
        (&["wave", "--headless", "--backend", "cpu", "--frames", "0"], "the range is 1 or more frames"),
        // One rule for both: a window is not opened to draw no frame.
        (&["wave", "--backend", "cpu", "--frames", "0"], "the range is 1 or more frames"),
        (&["wave", "--headless", "--backend", "cpu", "--amplitude", "NaN"], "NaN is not a number; the range is"),
        (&["wave", "--headless", "--backend", "cpu", "--size", "0x100"], "0x100: 0 is less than 1"),
    ];
    for (args, expected) in cases {
        let output = binary().args(args).output().expect("run");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} must fail");
        assert_ne!(output.status.code(), Some(101), "{args:?} panicked: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr:?} should say {expected:?}");
    }
}

#[test]
fn bad_blur_segments_get_a_message_not_a_panic() {
    let blur = ["blur", "--headless", "--backend", "cpu", "--frames", "1", "--size", "64x64", "--variant", "recursive"];
    let bench = ["bench", "blur", "--backend", "cpu", "--size", "64x64", "--sigma", "10", "--frames", "0"];
    // Below the smallest segment of any format: refused when the command line is read.
    for args in
        [[&blur[..], &["--segment", "0"]].concat(), [&blur[..], &["--format", "rgba32f", "--segment", "8"]].concat()]
    {
        let output = binary().args(&args).output().expect("run");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?} must be refused: {stderr}");
        assert!(stderr.contains("is less than 16; the range is 16 to 8192 rows"), "{args:?}: {stderr}");
    }
    let cases: [(Vec<&str>, &str); 4] = [
        ([&blur[..], &["--sigma", "10", "--segment", "48"]].concat(), "must be a power of two of at least 32"),
        ([&blur[..], &["--sigma", "10", "--segment", "16"]].concat(), "at least 32 for rgba8"),
        ([&bench[..], &["--segment", "100"]].concat(), "--segment 100"),
        ([&bench[..], &["--variant", "recursive", "--segment", "24"]].concat(), "power of two"),
    ];
    for (args, expected) in cases {
        let output = binary().args(&args).output().expect("run");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?} must fail with a message: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr:?} should say {expected:?}");
        assert!(stderr.contains("leave --segment out"), "{args:?}: the fix is named: {stderr:?}");
    }
    let output = binary().args(blur).args(["--sigma", "10", "--segment", "32"]).output().expect("run");
    assert!(output.status.success(), "a valid segment runs: {}", String::from_utf8_lossy(&output.stderr));
}

#[test]
fn bad_devices_lists_and_devices_without_cuda_get_a_message() {
    let cases: [(&[&str], &str); 7] = [
        (&["nbody", "--headless", "--backend", "cpu", "--devices", ""], "at least one CUDA device ordinal"),
        (&["nbody", "--headless", "--backend", "cpu", "--devices", "0,x"], "\"x\" is not a CUDA device ordinal"),
        (&["nbody", "--headless", "--backend", "cpu", "--devices=-1"], "\"-1\" is not a CUDA device ordinal"),
        (&["nbody", "--headless", "--backend", "cpu", "--device", "1", "--devices", "0,0"], "disagree"),
        (
            &["nbody", "--headless", "--backend", "cpu", "--frames", "2", "--devices", "0,0"],
            "this run computes on the CPU backend",
        ),
        (&["bench", "nbody", "--backend", "cpu", "--devices", "0,0"], "drop --devices to bench on the CPU"),
        (&["bench", "nbody", "--devices", "0,,1"], "is not a CUDA device ordinal"),
    ];
    for (args, expected) in cases {
        let output = binary().args(args).output().expect("run");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} must fail");
        assert_ne!(output.status.code(), Some(101), "{args:?} panicked: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr:?} should say {expected:?}");
    }
}

#[test]
fn doctor_without_a_driver_explains_and_exits_1() {
    if interop_lab::cuda::driver::driver_library_present() {
        eprintln!("skipped: this machine has an NVIDIA driver (the GPU run checks doctor there)");
        return;
    }
    let output = binary().arg("doctor").env_remove("DISPLAY").output().expect("run");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("libcuda.so.1") && stdout.contains("install the NVIDIA driver"), "{stdout}");
    assert!(stdout.contains("transfer path: CPU"), "{stdout}");
    let json = binary().args(["doctor", "--json"]).env_remove("DISPLAY").output().expect("run");
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).expect("doctor --json is JSON");
    assert_eq!(report["exit_code"], 1);
    assert_eq!(report["transfer"], "cpu");
    assert!(report["headless_gl"]["info"]["renderer"].is_string(), "a GL context was made: {}", report["headless_gl"]);
    // What the context can import is said beside it, as the JSON has it.
    let sharing = report["headless_gl"]["info"]["sharing"].as_array().expect("sharing extensions listed");
    if sharing.len() == interop_lab::gl::SHARING_EXTENSIONS.len() {
        assert!(stdout.contains("imports memory and semaphores"), "{stdout}");
    } else {
        let missing = interop_lab::gl::SHARING_EXTENSIONS.iter().find(|e| !sharing.iter().any(|s| s == **e));
        assert!(stdout.contains(&format!("lacks {}", missing.expect("one missing"))), "{stdout}");
    }
}

#[test]
fn window_opens_draws_the_panel_and_closes() {
    let display = std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some();
    if !common::available(display, "a display (Xvfb)", "INTEROP_LAB_REQUIRE_DISPLAY") {
        return;
    }
    let dir = temp_dir("window");
    let (shot, stats) = (dir.join("window.png"), dir.join("stats.json"));
    let output = binary()
        .args(["wave", "--backend", "cpu", "--frames", "8", "--size", "900x600", "--vsync", "off"])
        .arg("--screenshot")
        .arg(&shot)
        .arg("--stats")
        .arg(&stats)
        .output()
        .expect("run");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    // The window's stats time what happens after the demo's draw too: the panel and the present.
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats).expect("stats")).expect("JSON");
    assert_eq!(report["frames"], 8, "{report:#}");
    assert_eq!(report["frames_asked"], 8, "{report:#}");
    let stages = report["timings_us"]["stages"].as_array().expect("stages");
    for name in ["kernel", "draw", "panel", "present"] {
        let stage = stages.iter().find(|s| s["stage"] == name).unwrap_or_else(|| panic!("{name}: {report:#}"));
        let host = stage["host_us"]["median"].as_f64().expect("a host time");
        assert!(host.is_finite() && host > 0.0, "{name}: {stage}");
    }
    let image = image::open(&shot).expect("window screenshot").to_rgba8();
    assert_eq!(image.dimensions(), (900, 600));
    // The panel (left) has text and widgets; the scene (right) has the wave.
    assert!(lit_fraction(&shot, 0..250) > 0.5, "the panel is drawn");
    assert!(lit_fraction(&shot, 400..900) > 0.05, "the scene is drawn");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn doctor_on_a_gpu_reports_interop_and_exits_0() {
    let output = binary().args(["doctor", "--json"]).env_remove("DISPLAY").output().expect("run");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(output.status.code(), Some(0), "{report:#}");
    assert_eq!(report["transfer"], "interop");
    assert!(report["headless_gl"]["cuda_devices"].as_array().is_some_and(|d| !d.is_empty()), "{report:#}");
    assert!(report["kernels"].as_array().is_some_and(|k| k.iter().all(|k| k["error"].is_null())), "{report:#}");
    // NVIDIA's GL imports memory and semaphores (--transfer external and external-semaphores).
    let sharing = report["headless_gl"]["info"]["sharing"].as_array().expect("sharing");
    assert_eq!(sharing.len(), interop_lab::gl::SHARING_EXTENSIONS.len(), "{sharing:?}");
    // The Vulkan device of the same GPU is found by UUID, with what sharing memory with CUDA needs.
    let vulkan = &report["vulkan"];
    if common::available(vulkan["probe"].is_object(), "a Vulkan loader and driver", "INTEROP_LAB_REQUIRE_VULKAN") {
        let index =
            vulkan["cuda_match"].as_u64().unwrap_or_else(|| panic!("no Vulkan device is the CUDA device: {vulkan:#}"));
        let device = &vulkan["probe"]["devices"][index as usize];
        assert_eq!(device["device_uuid"], report["devices"][0]["uuid"], "{vulkan:#}");
        for feature in ["external_memory_fd", "external_semaphore_fd", "timeline_semaphore"] {
            assert_eq!(device[feature], true, "{feature}: {device}");
        }
    }
}

#[test]
fn nbody_bad_input_is_named_and_state_files_round_trip() {
    let dir = temp_dir("nbody");
    let base = ["nbody", "--headless", "--backend", "cpu", "--size", "160x100"];
    let garbage = dir.join("garbage.state");
    std::fs::write(&garbage, b"this is not a state file").expect("write");
    let garbage = garbage.display().to_string();
    let cases: [(&[&str], &str); 7] = [
        (&["--bodies", "0"], "0 is less than 1; the range is 1 to 16777216 bodies"),
        (&["--bodies", "20000000"], "20000000 is more than 16777216; the range is 1 to 16777216 bodies"),
        (&["--dt", "-0.01"], "-0.01 is less than 0; the range is more than 0, up to 1"),
        (&["--dt", "NaN"], "NaN is not a number; the range is more than 0, up to 1"),
        (&["--softening", "0"], "0 is not more than 0; the range is more than 0, up to 10"),
        (&["--block-size", "100"], "100 is not a multiple of 32; the range is 32 to 1024 threads, a multiple of 32"),
        (&["--load", &garbage], "does not start with ILNBODY1"),
    ];
    for (extra, expected) in cases {
        let output = binary().args(base).args(["--frames", "2"]).args(extra).output().expect("run");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{extra:?} must fail");
        assert_ne!(output.status.code(), Some(101), "{extra:?} panicked: {stderr}");
        assert!(stderr.contains(expected), "{extra:?}: {stderr:?} should say {expected:?}");
    }

    let saved = dir.join("run.state");
    let output = binary()
        .args(base)
        .args(["--bodies", "300", "--preset", "plummer", "--frames", "5"])
        .arg("--save")
        .arg(&saved)
        .output()
        .expect("run");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let state = interop_lab::demos::nbody::state::load(&saved).expect("the saved state loads");
    assert_eq!(state.bodies.len(), 300);
    assert_eq!(state.step, 5, "five frames, one step each");
    let output = binary()
        .args(base)
        .args(["--frames", "2"])
        .arg("--load")
        .arg(&saved)
        .arg("--save")
        .arg(dir.join("again.state"))
        .output()
        .expect("run");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let again = interop_lab::demos::nbody::state::load(&dir.join("again.state")).expect("loads");
    assert_eq!(again.step, 7, "continued from step 5");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_display_that_cannot_be_reached_is_named() {
    if std::path::Path::new("/tmp/.X11-unix/X77").exists() {
        eprintln!("skipped: an X server runs at :77 here");
        return;
    }
    let output = binary()
        .args(["wave", "--frames", "1", "--backend", "cpu"])
        .env("DISPLAY", ":77")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("WAYLAND_SOCKET")
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("the X server at :77 (DISPLAY) could not be reached"), "{stderr}");
    assert!(stderr.contains("--headless"), "{stderr}");
}

#[test]
fn no_display_and_empty_or_truncated_images_get_a_message() {
    let output = binary()
        .args(["nbody", "--frames", "1", "--backend", "cpu"])
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("WAYLAND_SOCKET")
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "no display: {stderr}");
    assert!(stderr.contains("cannot open a window") && stderr.contains("--headless"), "{stderr}");

    let dir = temp_dir("images");
    let empty = dir.join("empty.png");
    std::fs::write(&empty, b"").expect("write");
    let pattern = interop_lab::demos::blur::image::test_pattern(96, 64);
    let whole = dir.join("whole.png");
    interop_lab::demos::blur::image::save(&whole, [96, 64], interop_lab::pixel::PixelFormat::Rgba8, &pattern.rgba8)
        .expect("save");
    let bytes = std::fs::read(&whole).expect("read");
    let truncated = dir.join("truncated.png");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).expect("write");
    for path in [&empty, &truncated] {
        let output = binary()
            .args(["blur", "--headless", "--backend", "cpu", "--frames", "1", "--size", "64x64", "--image"])
            .arg(path)
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{}: {stderr}", path.display());
        let named = stderr.contains(&*path.display().to_string());
        let why = stderr.contains("not a readable PNG or JPEG image") || stderr.contains("cannot decode it");
        assert!(named && why, "{}: {stderr}", path.display());
    }
    let output = binary()
        .args(["blur", "--headless", "--backend", "cpu", "--frames", "1", "--size", "64x64", "--image"])
        .arg(&whole)
        .output()
        .expect("run");
    assert!(output.status.success(), "the whole file loads: {}", String::from_utf8_lossy(&output.stderr));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_kernel_file_that_faults_is_survived_and_said() {
    fault_is_survived("gl");
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_kernel_file_that_faults_on_vulkan_is_survived_and_said() {
    fault_is_survived("vulkan");
}

/// Runs the wave offscreen on `renderer` with a kernel whose store lands 2⁴⁰ elements past its
/// buffer: the context is lost, the run goes on on the CPU path, drawn with OpenGL, says so and
/// exits 0.
fn fault_is_survived(renderer: &str) {
    let dir = temp_dir(&format!("fault-{renderer}"));
    // Embedded: the test executable also runs on machines without this checkout.
    let wave = include_str!("../kernels/wave.cu");
    let store = "positions[(size_t)y * width + x] =";
    assert!(wave.contains(store));
    std::fs::write(dir.join("wave.cu"), wave.replace(store, "positions[(size_t)y * width + x + (1ull << 40)] ="))
        .expect("write");
    let stats = dir.join("stats.json");
    let output = binary()
        .args(["wave", "--headless", "--frames", "30", "--size", "160x100", "--renderer", renderer, "--kernels"])
        .arg(&dir)
        .arg("--stats")
        .arg(&stats)
        .env_remove("DISPLAY")
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{renderer}: the run completes after recovering: {stderr}");
    assert!(stderr.contains("CUDA context lost") && stderr.contains("relaunch"), "{renderer}: {stderr}");
    if renderer == "vulkan" {
        assert!(stderr.contains("goes on drawn with OpenGL"), "the recovery says where it draws: {stderr}");
    }
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats).expect("stats")).expect("JSON");
    // After a fault on the Vulkan path no Vulkan device of the process makes progress on
    // NVIDIA's driver: the demo goes on drawn with OpenGL (docs/vulkan.md).
    assert_eq!(report["renderer"], "gl", "{renderer}: {report:#}");
    assert_eq!(report["backend"], "cpu", "{renderer}: the demo went on, on the CPU: {report:#}");
    assert_eq!(report["transfer"], "cpu", "{renderer}: {report:#}");
    assert_eq!(report["recoveries"].as_array().map(Vec::len), Some(1), "{renderer}: {report:#}");
}

/// Runs `args` in a private mount namespace whose linker cache lists every folder of the system's
/// cache except those holding libnvrtc: the NVIDIA driver and GL libraries load, NVRTC does not.
fn without_nvrtc(args: &[&str], dir: &std::path::Path) -> std::process::Output {
    let bin = std::env::var_os("INTEROP_LAB_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_interop-lab")));
    let script = r#"set -e
cache="$1"; shift
nvrtc_dirs=$(ldconfig -p | sed -n 's/.*libnvrtc.* => //p' | xargs -r -n1 dirname | sort -u)
ldconfig -p | sed -n 's/.* => //p' | xargs -n1 dirname | sort -u | grep -vxF "${nvrtc_dirs:-/nonexistent}" > "$cache.conf"
ldconfig -C "$cache" -f "$cache.conf"
mount --bind "$cache" /etc/ld.so.cache
exec "$@""#;
    Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", script, "sh"])
        .arg(dir.join("ld.so.cache"))
        .arg(bin)
        .args(args)
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("DISPLAY")
        .output()
        .expect("unshare (util-linux) runs; the test needs root for the bind mount")
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn with_the_driver_but_no_nvrtc_the_cpu_runs_and_says_why() {
    let dir = temp_dir("no-nvrtc");
    let doctor = without_nvrtc(&["doctor", "--json"], &dir);
    let report: serde_json::Value = serde_json::from_slice(&doctor.stdout)
        .unwrap_or_else(|e| panic!("doctor JSON ({e}): {}", String::from_utf8_lossy(&doctor.stderr)));
    assert!(report["driver_cuda_version"].is_string(), "the driver is still found: {report:#}");
    assert!(report["nvrtc_version"].is_null(), "NVRTC must be hidden for this test to mean anything: {report:#}");
    assert_eq!(doctor.status.code(), Some(1), "a fallback, not interop: {report:#}");
    let text = report.to_string();
    assert!(text.contains("nvidia-cuda-nvrtc"), "the fix is named: {report:#}");

    let stats = dir.join("stats.json");
    let run = without_nvrtc(
        &["wave", "--headless", "--frames", "3", "--size", "64x64", "--stats", stats.to_str().expect("utf-8")],
        &dir,
    );
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats).expect("stats")).expect("JSON");
    assert_eq!(report["backend"], "cpu", "{report:#}");
    assert!(report["reason"].as_str().is_some_and(|r| r.contains("NVRTC")), "the reason names NVRTC: {report:#}");
}

#[test]
fn a_cuda_path_asked_for_by_name_without_cuda_is_refused_with_the_reason() {
    if interop_lab::cuda::driver::driver_library_present() {
        eprintln!("skipped: this machine has an NVIDIA driver, so these paths exist");
        return;
    }
    for path in ["interop", "copy", "external", "external-semaphores"] {
        let output = binary()
            .args(["wave", "--headless", "--frames", "1", "--size", "32x32", "--transfer", path])
            .env_remove("DISPLAY")
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{path}: {stderr}");
        assert!(stderr.contains(&format!("--transfer {path} was asked for")) && stderr.contains("libcuda"), "{stderr}");
    }
}

#[test]
fn doctor_lists_vulkan_devices_with_their_uuids_or_says_why_not() {
    let json = binary().args(["doctor", "--json"]).env_remove("DISPLAY").output().expect("run");
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).expect("doctor --json is JSON");
    let vulkan = &report["vulkan"];
    let verdict = vulkan["verdict"].as_str().expect("a verdict, whatever Vulkan offers");
    if !common::available(vulkan["probe"].is_object(), "a Vulkan loader and driver", "INTEROP_LAB_REQUIRE_VULKAN") {
        assert!(verdict.contains("install"), "without Vulkan the verdict names the fix: {verdict}");
        return;
    }
    let devices = vulkan["probe"]["devices"].as_array().expect("devices");
    assert!(!devices.is_empty(), "{vulkan:#}");
    for device in devices {
        let uuid = device["device_uuid"].as_str().expect("uuid");
        assert!(uuid.len() == 32 && uuid.chars().all(|c| c.is_ascii_hexdigit()), "{device}");
    }
    // A loader that finds no driver is said, with the variable that points at one.
    let output = binary()
        .args(["doctor", "--json"])
        .env_remove("DISPLAY")
        .env("VK_DRIVER_FILES", "/nonexistent/icd.json")
        .env("VK_ICD_FILENAMES", "/nonexistent/icd.json")
        .output()
        .expect("run");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert!(report["vulkan"]["probe"].is_null(), "{:#}", report["vulkan"]);
    let verdict = report["vulkan"]["verdict"].as_str().expect("verdict");
    assert!(verdict.contains("VK_DRIVER_FILES") || verdict.contains("install"), "{verdict}");
}

#[test]
fn bench_handoff_refuses_bad_counts_and_says_when_cuda_cannot_run() {
    for (args, expected) in [(&["--rounds", "1"][..], "--rounds"), (&["--batches", "0"][..], "--batches")] {
        let output = binary().args(["bench", "handoff"]).args(args).output().expect("run");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr:?} should name {expected:?}");
    }
    // On the CPU backend no hand-off to CUDA can run: the run ends with the reason, not a panic
    // or an empty table.
    let output = binary().args(["bench", "handoff", "--backend", "cpu"]).env_remove("DISPLAY").output().expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("measures hand-offs to and from CUDA") && stderr.contains("--backend cpu"), "{stderr}");
}

#[test]
fn bench_transfer_reports_latency_and_period_for_each_path_it_runs_and_why_it_skips_others() {
    let dir = temp_dir("bench-transfer");
    let json = dir.join("transfer.json");
    let output = binary()
        .args(["bench", "transfer", "--bytes", "64K", "--frames", "6", "--warmup", "1", "--backend", "cpu"])
        .arg("--json")
        .arg(&json)
        .env_remove("DISPLAY")
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("period µs"), "{stdout}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).expect("JSON written")).expect("JSON");
    let results = report["results"].as_array().expect("results");
    let cpu = results.iter().find(|r| r["path"] == "cpu").unwrap_or_else(|| panic!("a CPU row: {report:#}"));
    let median = cpu["frame_us"]["median"].as_f64().expect("a median");
    let period = cpu["period_us"].as_f64().expect("a period");
    assert!(median.is_finite() && median > 0.0 && period.is_finite() && period > 0.0, "{cpu}");
    // Without CUDA the Vulkan rows cannot run: said, not left out.
    let vulkan = results.iter().find(|r| r["path"] == "vulkan").unwrap_or_else(|| panic!("a Vulkan row: {report:#}"));
    assert!(vulkan["skipped"].as_str().is_some_and(|why| why.contains("CUDA")), "{vulkan}");
    std::fs::remove_dir_all(&dir).ok();
}
