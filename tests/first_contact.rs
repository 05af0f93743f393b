//! What a new user meets first, on a machine without a GPU: outputs checked before the run and
//! written whole, Ctrl-C that finishes the frame and writes what was asked for, inputs too large
//! for the machine refused with the numbers, flags that name something missing said, and the
//! windowing libraries' failures turned into sentences.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::{binary, temp_dir};

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Fails with the output unless the run failed with exit code 1 (a message, not a panic) and said
/// `expected`.
fn assert_refused(output: &Output, expected: &str, what: &str) {
    let said = stderr(output);
    assert_eq!(output.status.code(), Some(1), "{what}: must fail with a message: {said}");
    assert!(!said.contains("panicked"), "{what}: panicked: {said}");
    assert!(said.contains(expected), "{what}: {said:?} should say {expected:?}");
}

fn cpu_headless(demo: &str) -> Command {
    let mut command = binary();
    command.args([demo, "--headless", "--backend", "cpu", "--size", "96x64"]).env_remove("DISPLAY");
    command
}

#[test]
fn every_output_path_is_checked_before_the_run_starts() {
    let dir = temp_dir("outputs");
    let cases: [(&str, PathBuf, &str); 5] = [
        ("--screenshot", dir.join("frame.gif"), "cannot write .gif images"),
        ("--screenshot", dir.clone(), "is a folder"),
        ("--stats", dir.join("missing").join("s.json"), "does not exist"),
        ("--output", dir.join("blurred"), "no extension"),
        ("--save", dir.join("missing").join("n.state"), "does not exist"),
    ];
    for (flag, path, expected) in cases {
        let demo = match flag {
            "--output" => "blur",
            "--save" => "nbody",
            _ => "wave",
        };
        // 100,000 frames: a check that came after the run would make this test time out.
        let output = cpu_headless(demo).args(["--frames", "100000", flag]).arg(&path).output().expect("run");
        assert_refused(&output, expected, flag);
    }
    let leftovers: Vec<_> = std::fs::read_dir(&dir).expect("list").collect();
    assert!(leftovers.is_empty(), "nothing was written: {leftovers:?}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn blur_output_without_frames_renders_one_frame_and_writes_jpeg_whole() {
    let dir = temp_dir("jpeg");
    let (jpeg, stats) = (dir.join("blurred.jpg"), dir.join("stats.json"));
    let output = cpu_headless("blur").args(["--sigma", "3", "--output"]).arg(&jpeg).arg("--stats").arg(&stats).output();
    let output = output.expect("run");
    assert!(output.status.success(), "{}", stderr(&output));
    let image = image::open(&jpeg).expect("a JPEG that decodes");
    assert_eq!((image.width(), image.height()), (1280, 800), "the generated test pattern, full size");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats).expect("stats")).expect("JSON");
    assert_eq!(report["frames"], 1, "--output without --frames renders one frame: {report:#}");
    let names: Vec<String> = std::fs::read_dir(&dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into())
        .collect();
    assert_eq!(names.len(), 2, "no temporary file is left: {names:?}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn ctrl_c_finishes_the_frame_and_writes_what_was_asked_for() {
    let dir = temp_dir("interrupt");
    let (shot, stats, state) = (dir.join("last.png"), dir.join("stats.json"), dir.join("bodies.state"));
    let mut command = cpu_headless("nbody");
    command.args(["--bodies", "2048", "--frames", "1000000", "--screenshot"]);
    command.arg(&shot).arg("--stats").arg(&stats).arg("--save").arg(&state);
    let output = common::interrupt_after(command, "first frame drawn");
    assert_eq!(output.status.code(), Some(130), "128 + SIGINT after writing: {}", stderr(&output));
    assert!(stderr(&output).contains("interrupted (Ctrl-C)"), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats).expect("stats")).expect("JSON");
    let frames = report["frames"].as_u64().expect("frames");
    assert!((1..1_000_000).contains(&frames), "stopped part-way: {report:#}");
    assert_eq!(report["frames_asked"], 1_000_000);
    image::open(&shot).expect("the last frame was written");
    let saved = interop_lab::demos::nbody::state::load(&state).expect("the state was saved");
    assert_eq!(saved.step, frames, "the state is the last frame's");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn flags_that_name_something_missing_are_said() {
    let missing = Path::new("/nonexistent/interop-lab");
    for flag in ["--kernels", "--shaders"] {
        let output = cpu_headless("wave").args(["--frames", "1", flag]).arg(missing).output().expect("run");
        assert_refused(&output, "no such folder", flag);
    }
    let output = binary()
        .args(["wave", "--headless", "--frames", "1", "--size", "32x32", "--device", "9"])
        .env_remove("DISPLAY")
        .output()
        .expect("run");
    let expected = if interop_lab::cuda::driver::driver_library_present() {
        "--device 9 does not exist"
    } else {
        "--device 9 was asked for, but CUDA can't run here"
    };
    assert_refused(&output, expected, "--device 9");

    let output = cpu_headless("wave").args(["--frames", "2", "--what-if", "register-every-frame"]).output();
    let output = output.expect("run");
    assert!(output.status.success(), "a switch with no effect is a warning, not an error: {}", stderr(&output));
    assert!(stderr(&output).contains("register-every-frame: it concerns GL interop"), "{}", stderr(&output));

    let bench = ["bench", "blur", "--backend", "cpu", "--size", "64x64", "--frames", "0"];
    let output = binary().args(bench).args(["--sigma", "0,3"]).output().expect("run");
    assert_eq!(output.status.code(), Some(2), "bench blur --sigma 0,3 is refused as it is read: {}", stderr(&output));
    assert!(stderr(&output).contains("'0' for '--sigma <SIGMA>': 0 is less than 0.3"), "{}", stderr(&output));
    let output = binary().args(bench).args(["--sigma", "3", "--variant", "recursive,separable"]).output();
    let output = output.expect("run");
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(table.contains("recursive  skipped") && table.contains("σ ≥ 4"), "a skipped row is said: {table}");
}

#[test]
fn kernels_given_as_a_file_is_told_its_folder_and_on_the_cpu_is_said_to_do_nothing() {
    let kernels = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
    let output = cpu_headless("wave").args(["--frames", "1", "--kernels"]).arg(kernels.join("wave.cu")).output();
    let output = output.expect("run");
    assert_refused(&output, "is a file; give its folder", "--kernels FILE");
    assert!(stderr(&output).contains(&format!("--kernels {})", kernels.display())), "{}", stderr(&output));

    let output = cpu_headless("wave").args(["--frames", "1", "--kernels"]).arg(&kernels).output().expect("run");
    assert!(output.status.success(), "a flag with no effect is a warning, not an error: {}", stderr(&output));
    let notice = format!("--kernels {} replaces the sources CUDA compiles", kernels.display());
    let said = stderr(&output);
    assert!(said.contains(&notice) && said.contains("CPU path, so it has no effect"), "{said}");
}

#[test]
fn inputs_too_large_for_this_machine_are_refused_with_the_numbers() {
    // The window answers input only between steps, so it refuses CPU steps of hours; an offscreen
    // run does what it is asked, however slowly (tests/flags.rs).
    let display = std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some();
    if common::available(display, "a display (Xvfb)", "INTEROP_LAB_REQUIRE_DISPLAY") {
        let window = ["nbody", "--backend", "cpu", "--size", "96x64", "--bodies", "10000000", "--frames", "1"];
        let output = binary().args(window).output().expect("run");
        assert_refused(&output, "per step on this machine", "10 million CPU bodies in a window");
        let said = stderr(&output);
        assert!(said.contains("use --bodies") && said.contains("--headless"), "the fixes are named: {said}");
    }

    // A PNG whose header claims 12000 × 12000 pixels (4 GB decoded), under a 2.5 GB address-space
    // limit: refused before any pixel is decoded.
    let dir = temp_dir("huge");
    let png = dir.join("huge.png");
    std::fs::write(&png, png_header(12_000, 12_000)).expect("write");
    let bin = std::env::var_os("INTEROP_LAB_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_interop-lab")));
    let output = Command::new("sh")
        .args(["-c", "ulimit -v 2500000 && exec \"$@\"", "sh"])
        .arg(bin)
        .args(["blur", "--headless", "--backend", "cpu", "--frames", "1", "--size", "64x64", "--image"])
        .arg(&png)
        .env_remove("DISPLAY")
        .output()
        .expect("run");
    assert_refused(&output, "needs about", "a 12000² image under ulimit -v");
    assert!(stderr(&output).contains("12000x12000") && stderr(&output).contains("available"), "{}", stderr(&output));
    std::fs::remove_dir_all(&dir).ok();
}

/// The signature, an IHDR chunk for `width` × `height` RGBA8, one IDAT holding a single byte and
/// an IEND: enough for a decoder to read the size, with no pixels behind it.
fn png_header(width: u32, height: u32) -> Vec<u8> {
    fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
        out.extend((data.len() as u32).to_be_bytes());
        let start = out.len();
        out.extend(kind);
        out.extend(data);
        let crc = crc32(&out[start..]);
        out.extend(crc.to_be_bytes());
    }
    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &byte in bytes {
            crc ^= u32::from(byte);
            for _ in 0..8 {
                crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
            }
        }
        !crc
    }
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut header = Vec::new();
    header.extend(width.to_be_bytes());
    header.extend(height.to_be_bytes());
    header.extend([8, 6, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &header);
    chunk(&mut out, b"IDAT", &[0x78, 0x9c, 0x63, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01]); // zlib of one zero byte
    chunk(&mut out, b"IEND", &[]);
    out
}

#[test]
fn the_whole_advertised_sigma_range_runs() {
    for sigma in ["0.3", "2000"] {
        let output = cpu_headless("blur").args(["--frames", "1", "--sigma", sigma]).output().expect("run");
        assert!(output.status.success(), "σ {sigma}: {}", stderr(&output));
    }
    let output = cpu_headless("blur").args(["--frames", "1", "--sigma", "2000", "--variant", "separable"]).output();
    assert_refused(&output.expect("run"), "--radius", "separable at σ 2000");
}

#[test]
fn soak_runs_the_cpu_path_without_cuda() {
    let output = binary()
        .args(["soak", "--transfer", "cpu", "--frames", "40", "--reallocations", "8", "--warmup-reallocations", "4"])
        .env_remove("DISPLAY")
        .output()
        .expect("run");
    let table = String::from_utf8_lossy(&output.stdout);
    // A run this short ends before GL's own heaps settle (Mesa grew RSS by 78 MB over its first 40
    // frames once): whether it stays within bounds is the long soak's question. This one asks
    // that the CPU path runs with no CUDA and reports: exit 0 within bounds, 1 with what grew.
    let verdict = (output.status.code() == Some(0) && table.contains("within bounds"))
        || (output.status.code() == Some(1) && table.contains("exceeded: "));
    assert!(verdict && !stderr(&output).contains("error:"), "{table}\n{}", stderr(&output));
    assert!(table.contains("recompiles skipped") && table.contains("re-allocations"), "{table}");
}

/// A folder whose X keyboard libraries are empty files: winit cannot load them.
fn broken_keyboard_libraries(dir: &Path) -> PathBuf {
    let libraries = dir.join("broken-xkb");
    std::fs::create_dir_all(&libraries).expect("dir");
    for name in ["libxkbcommon-x11.so.0", "libxkbcommon.so.0"] {
        std::fs::write(libraries.join(name), b"").expect("write");
    }
    libraries
}

#[test]
fn missing_x_keyboard_support_is_said_not_panicked_by_the_window_and_doctor() {
    let display = std::env::var_os("DISPLAY").is_some();
    if !common::available(display, "an X display (Xvfb)", "INTEROP_LAB_REQUIRE_DISPLAY") {
        return;
    }
    let dir = temp_dir("xkb");
    let libraries = broken_keyboard_libraries(&dir);
    let output = binary()
        .args(["wave", "--backend", "cpu", "--frames", "3"])
        .env("LD_LIBRARY_PATH", &libraries)
        .env_remove("WAYLAND_DISPLAY")
        .output()
        .expect("run");
    assert_refused(&output, "xkb-data", "window without libxkbcommon-x11");
    assert!(stderr(&output).contains("--headless"), "{}", stderr(&output));

    let output = binary()
        .args(["doctor", "--backend", "cpu"])
        .env("LD_LIBRARY_PATH", &libraries)
        .env_remove("WAYLAND_DISPLAY")
        .output()
        .expect("run");
    let report = String::from_utf8_lossy(&output.stdout);
    assert_ne!(output.status.code(), Some(101), "doctor panicked: {}", stderr(&output));
    assert!(!stderr(&output).contains("panicked"), "{}", stderr(&output));
    assert!(report.contains("xkb-data") && report.contains("headless"), "the window check says why: {report}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_window_closes_on_ctrl_c_with_its_screenshot() {
    let display = std::env::var_os("DISPLAY").is_some();
    if !common::available(display, "an X display (Xvfb)", "INTEROP_LAB_REQUIRE_DISPLAY") {
        return;
    }
    let dir = temp_dir("window-interrupt");
    let shot = dir.join("window.png");
    let mut command = binary();
    command.args(["wave", "--backend", "cpu", "--frames", "1000000", "--size", "400x300", "--screenshot"]).arg(&shot);
    let output = common::interrupt_after(command, "first frame drawn");
    assert_eq!(output.status.code(), Some(130), "{}", stderr(&output));
    let image = image::open(&shot).expect("the screenshot of the last frame");
    assert_eq!((image.width(), image.height()), (400, 300));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_second_ctrl_c_closes_the_window_at_once_and_says_truly_what_was_written() {
    let display = std::env::var_os("DISPLAY").is_some();
    if !common::available(display, "an X display (Xvfb)", "INTEROP_LAB_REQUIRE_DISPLAY") {
        return;
    }
    let dir = temp_dir("window-interrupt-twice");
    let (shot, stats) = (dir.join("window.png"), dir.join("stats.json"));
    // The second Ctrl-C lands at different points: in the frames, in the last frame or while the
    // outputs are written, or after the process ended. Which one depends on the machine's speed,
    // so each gap checks only that what is said is true.
    for gap_ms in [0, 15, 30, 45, 60, 90, 150, 300] {
        std::fs::remove_dir_all(&dir).ok();
        std::fs::create_dir_all(&dir).expect("dir");
        let mut command = binary();
        command.args(["wave", "--backend", "cpu", "--frames", "1000000", "--size", "400x300", "--screenshot"]);
        command.arg(&shot).arg("--stats").arg(&stats);
        let mut watched = common::Watched::start(command);
        assert!(watched.wait_for("first frame drawn", Duration::from_secs(60)), "{}", watched.stderr());
        watched.signal("INT");
        std::thread::sleep(Duration::from_millis(gap_ms));
        let again = std::process::Command::new("kill").args(["-INT", &watched.id().to_string()]).status();
        let output = watched.finish(Duration::from_secs(120));
        let said = stderr(&output);
        assert_eq!(output.status.code(), Some(130), "{gap_ms} ms: {said}");
        let written = [shot.exists(), stats.exists()];
        if said.contains("interrupted again: exiting without writing") {
            let left: Vec<_> = std::fs::read_dir(&dir).expect("dir").flatten().map(|entry| entry.file_name()).collect();
            assert!(left.is_empty(), "{gap_ms} ms: said so, then wrote {left:?}: {said}");
        } else if said.contains("interrupted again: exiting part-way through writing") {
            eprintln!("{gap_ms} ms: the second Ctrl-C came while the outputs were written");
        } else {
            let why = if said.contains("interrupted again") { "said written" } else { "no second Ctrl-C in time" };
            assert_eq!(written, [true, true], "{gap_ms} ms ({why}, {again:?}): {said}");
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_second_signal_within_a_frame_gives_the_outputs_up() {
    let display = std::env::var_os("DISPLAY").is_some();
    if !common::available(display, "an X display (Xvfb)", "INTEROP_LAB_REQUIRE_DISPLAY") {
        return;
    }
    let dir = temp_dir("window-interrupt-in-a-frame");
    let (shot, stats) = (dir.join("window.png"), dir.join("stats.json"));
    // Frames of tens of ms (all-pairs on the CPU), and the second signal a fraction of a ms after
    // the first, from one shell: it lands before the frame ends on any machine. It is a SIGTERM,
    // since two SIGINTs that close together may reach the process as one.
    let mut command = binary();
    command.args(["nbody", "--backend", "cpu", "--method", "all-pairs", "--bodies", "8192", "--frames", "1000000"]);
    command.args(["--size", "400x300", "--screenshot"]).arg(&shot).arg("--stats").arg(&stats);
    let mut watched = common::Watched::start(command);
    assert!(watched.wait_for("first frame drawn", Duration::from_secs(60)), "{}", watched.stderr());
    let pid = watched.id().to_string();
    let sent = Command::new("sh").args(["-c", "kill -INT $0 && kill -TERM $0", &pid]).status().expect("sh");
    assert!(sent.success(), "both signals sent");
    let output = watched.finish(Duration::from_secs(120));
    let said = stderr(&output);
    // 128 + the signal that came second; both may be pending at once, in either order.
    assert!(matches!(output.status.code(), Some(130 | 143)), "a signal's status: {said}");
    assert!(said.contains("interrupted again: exiting without writing"), "{said}");
    let left: Vec<_> = std::fs::read_dir(&dir).expect("dir").flatten().map(|entry| entry.file_name()).collect();
    assert!(left.is_empty(), "said so, then wrote {left:?}: {said}");
    std::fs::remove_dir_all(&dir).ok();
}

/// An X server of the test's own, on a display number it picks (-displayfd), to be killed; with
/// that display's name. `None` (said as skipped) where Xvfb is missing.
fn own_x_server() -> Option<(std::process::Child, String)> {
    use std::io::BufRead;
    let xvfb = Command::new("Xvfb")
        .args(["-displayfd", "1", "-screen", "0", "640x480x24", "-nolisten", "tcp"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn();
    if !common::available(xvfb.is_ok(), "Xvfb", "INTEROP_LAB_REQUIRE_DISPLAY") {
        return None;
    }
    let mut xvfb = xvfb.expect("Xvfb");
    let mut number = String::new();
    std::io::BufReader::new(xvfb.stdout.take().expect("stdout")).read_line(&mut number).expect("display number");
    Some((xvfb, format!(":{}", number.trim())))
}

#[test]
fn losing_the_x_server_is_said_and_what_needs_no_display_is_written() {
    let Some((mut xvfb, display)) = own_x_server() else { return };
    let dir = temp_dir("x-server-lost");
    let (shot, stats, trace) = (dir.join("window.png"), dir.join("stats.json"), dir.join("trace.json"));
    let mut command = binary();
    command.args(["wave", "--backend", "cpu", "--frames", "1000000", "--size", "400x300", "--screenshot"]).arg(&shot);
    command.arg("--stats").arg(&stats).arg("--trace-json").arg(&trace).env("DISPLAY", &display);
    command.env_remove("WAYLAND_DISPLAY");
    let mut watched = common::Watched::start(command);
    let drawn = watched.wait_for("first frame drawn", Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(300));
    xvfb.kill().expect("kill Xvfb");
    xvfb.wait().expect("Xvfb ended");
    assert!(drawn, "{}", watched.stderr());
    let output = watched.finish(Duration::from_secs(60));
    let said = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "a message and exit 1, not Xlib's exit or a crash: {said}");
    assert!(said.contains(&format!("the X server at {display} went away")), "{said}");
    assert!(!said.contains("XIO") && !said.contains("panicked"), "{said}");
    assert!(said.contains("--stats written") && said.contains("--trace-json written"), "{said}");
    assert!(said.contains("not written (it is read from the display)") && !shot.exists(), "{said}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats).expect("stats")).expect("JSON");
    assert!(report["frames"].as_u64().is_some_and(|frames| frames >= 1), "{report:#}");
    let trace: serde_json::Value = serde_json::from_slice(&std::fs::read(&trace).expect("trace")).expect("JSON");
    assert!(trace["traceEvents"].is_array(), "a Chrome trace: {trace}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn ctrl_c_that_takes_the_x_server_with_it_is_a_stop_not_an_error() {
    // `xvfb-run` ends its server on the same Ctrl-C that stops the window: the run is stopped, as
    // asked, whichever of the two it notices first.
    let Some((mut xvfb, display)) = own_x_server() else { return };
    let dir = temp_dir("x-server-with-ctrl-c");
    let stats = dir.join("stats.json");
    let mut command = binary();
    command.args(["wave", "--backend", "cpu", "--frames", "1000000", "--size", "400x300", "--stats"]).arg(&stats);
    command.env("DISPLAY", &display).env_remove("WAYLAND_DISPLAY");
    let mut watched = common::Watched::start(command);
    let drawn = watched.wait_for("first frame drawn", Duration::from_secs(60));
    watched.signal("INT");
    xvfb.kill().expect("kill Xvfb");
    xvfb.wait().expect("Xvfb ended");
    assert!(drawn, "{}", watched.stderr());
    let output = watched.finish(Duration::from_secs(60));
    let said = stderr(&output);
    assert_eq!(output.status.code(), Some(130), "stopped by Ctrl-C: {said}");
    assert!(!said.contains("error:") && !said.contains("XIO") && !said.contains("panicked"), "{said}");
    assert!(stats.exists(), "--stats is written either way: {said}");
    std::fs::remove_dir_all(&dir).ok();
}

fn gpu_run(args: &[&str], cache: &Path) -> Output {
    binary().args(args).env("XDG_CACHE_HOME", cache).env_remove("DISPLAY").output().expect("run")
}

fn stats_of(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).expect("stats")).expect("JSON")
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn nbody_autotunes_once_per_device_and_starts_from_the_winner() {
    let dir = temp_dir("autotune");
    let cache = dir.join("cache");
    let stats = dir.join("stats.json");
    let run = ["nbody", "--headless", "--frames", "5", "--size", "160x100", "--stats", stats.to_str().expect("utf-8")];
    let first = gpu_run(&run, &cache);
    assert!(first.status.success(), "{}", stderr(&first));
    assert!(stderr(&first).contains("tuned n-body on"), "the first run tunes: {}", stderr(&first));
    let tuned_files: Vec<PathBuf> = std::fs::read_dir(cache.join("interop-lab/kernels"))
        .expect("kernel cache")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("tuned-nbody-f32")))
        .collect();
    assert_eq!(tuned_files.len(), 1, "one record for this device: {tuned_files:?}");
    let tuned: interop_lab::demos::nbody::tune::Tuned =
        serde_json::from_slice(&std::fs::read(&tuned_files[0]).expect("read")).expect("a tuning record");
    let best = tuned.candidates.iter().map(|c| c.1).fold(0.0, f64::max);
    assert_eq!(tuned.interactions_per_s, best, "the winner is the fastest candidate: {tuned:?}");
    assert_eq!(tuned.candidates.len(), interop_lab::demos::nbody::tune::candidates(tuned.variant.precision).len());
    let label = tuned.variant.label();
    assert!(stats_of(&stats)["kernel"]["name"].as_str().is_some_and(|n| n.contains(&label)), "runs the winner");

    let second = gpu_run(&run, &cache);
    assert!(second.status.success(), "{}", stderr(&second));
    assert!(!stderr(&second).contains("tuned n-body on"), "the second run reads the record: {}", stderr(&second));
    assert!(stats_of(&stats)["kernel"]["name"].as_str().is_some_and(|n| n.contains(&label)), "and runs the winner");
    // A variant chosen by hand is run as given, with no tuning.
    let by_hand = [&run[..], &["--block-size", "128"]].concat();
    let third = gpu_run(&by_hand, &cache);
    assert!(third.status.success(), "{}", stderr(&third));
    let name = stats_of(&stats)["kernel"]["name"].as_str().unwrap_or_default().to_owned();
    assert!(name.contains("block 128 tile 128 unroll 8"), "the hand-picked one, the rest at their defaults: {name}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn blur_auto_picks_the_fastest_filter_whose_bound_holds_at_each_sigma() {
    let dir = temp_dir("auto-filter");
    let stats = dir.join("stats.json");
    // Beyond σ 100 the box cascade while its tile fits in shared memory (σ 150 here), then the
    // recursive filter (σ 2000), which is what runs there.
    let cases = [("2", "separable"), ("10", "recursive"), ("100", "recursive"), ("150", "box"), ("2000", "recursive")];
    for (sigma, filter) in cases {
        let stats_path = stats.to_str().expect("utf-8");
        let run = ["blur", "--headless", "--frames", "2", "--size", "160x100", "--sigma", sigma, "--stats", stats_path];
        let output = gpu_run(&run, &dir.join("cache"));
        assert!(output.status.success(), "σ {sigma}: {}", stderr(&output));
        let name = stats_of(&stats)["kernel"]["name"].as_str().unwrap_or_default().to_owned();
        assert!(name.contains(filter), "σ {sigma}: auto picked {name}, expected {filter}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_stalling_driver_is_said_within_seconds_and_the_run_moves_to_host_copy() {
    let dir = temp_dir("stall");
    let (stats, shot, clean_shot) = (dir.join("stats.json"), dir.join("stalled.png"), dir.join("clean.png"));
    let frames = ["wave", "--headless", "--frames", "12", "--size", "200x120", "--frame-time", "0.05"];
    let output = binary()
        .args(frames)
        .arg("--stats")
        .arg(&stats)
        .arg("--screenshot")
        .arg(&shot)
        .env("INTEROP_LAB_SIMULATE_STALL_MS", "5500")
        .env_remove("DISPLAY")
        .output()
        .expect("run");
    assert!(output.status.success(), "the run completes: {}", stderr(&output));
    let said = stderr(&output);
    assert!(said.contains("has not returned after 4 s") && said.contains("--transfer copy"), "{said}");
    assert!(said.contains("moved to host copy"), "{said}");
    assert_eq!(stats_of(&stats)["transfer"], "host_copy", "the run went on on host copy");
    let clean = binary()
        .args(frames)
        .args(["--transfer", "copy", "--screenshot"])
        .arg(&clean_shot)
        .env_remove("DISPLAY")
        .output()
        .expect("run");
    assert!(clean.status.success(), "{}", stderr(&clean));
    let (a, b) = (image::open(&shot).expect("png").to_rgba8(), image::open(&clean_shot).expect("png").to_rgba8());
    assert!(a == b, "after moving paths the frame is what host copy draws");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn ctrl_c_in_bench_and_soak_stops_and_reports_what_ran() {
    let dir = temp_dir("interrupt-bench-soak");
    // bench blur on the CPU at 720p: a filter takes ~0.05 s on two cores in release, seconds in a
    // debug build, and the whole sweep minutes.
    let json = dir.join("bench.json");
    let mut command = binary();
    command
        .args(["bench", "blur", "--backend", "cpu", "--size", "1280x720", "--json"])
        .arg(&json)
        .env_remove("DISPLAY");
    // Interrupted once a filter is timed, whatever the build's speed: a progress line says "N/24
    // done" with N ≥ 1 (where output is not a terminal, one comes at least every 5 s).
    let mut watched = common::Watched::start(command);
    let one_done = |line: &str| {
        let done = line.strip_prefix("bench blur (CPU): ").and_then(|rest| rest.split('/').next());
        done.and_then(|n| n.parse::<u32>().ok()).is_some_and(|n| n >= 1)
    };
    assert!(watched.wait_for_line(one_done, Duration::from_secs(120)), "{}", watched.stderr());
    watched.signal("INT");
    let output = watched.finish(Duration::from_secs(120));
    assert_eq!(output.status.code(), Some(130), "128 + SIGINT after writing: {}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).expect("bench JSON")).expect("JSON");
    assert_eq!(report["interrupted"], true, "{report:#}");
    let timed = report["kernels"].as_array().expect("kernels").iter().filter(|k| k["total_us"].is_object()).count();
    assert!(timed >= 1, "the filters timed before Ctrl-C are kept: {report:#}");
    // soak on the CPU path: stopped in its frames phase, the table counts the frames that ran.
    let json = dir.join("soak.json");
    let mut command = binary();
    command.args(["soak", "--transfer", "cpu", "--warmup-reallocations", "2", "--frames", "100000000", "--json"]);
    command.arg(&json).env_remove("DISPLAY");
    // SIGTERM this time, once the measured frames run (after the warm-up): the report names it.
    let mut watched = common::Watched::start(command);
    assert!(watched.wait_for("measuring", Duration::from_secs(120)), "{}", watched.stderr());
    std::thread::sleep(Duration::from_millis(300));
    watched.signal("TERM");
    let output = watched.finish(Duration::from_secs(120));
    let table = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(143), "128 + SIGTERM after the report: {table}\n{}", stderr(&output));
    assert!(table.contains("stopped (SIGTERM)"), "{table}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).expect("soak JSON")).expect("JSON");
    let frames = report["phases"][0]["count"].as_u64().expect("frames count");
    assert!((1..100_000_000).contains(&frames), "the frames that ran, not those asked for: {report:#}");
    assert_eq!(report["interrupted"], true, "{report:#}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn record_writes_every_frame_as_a_numbered_png_and_says_how_to_make_a_video() {
    let dir = temp_dir("record");
    let (frames_dir, shot) = (dir.join("frames"), dir.join("last.png"));
    let output = cpu_headless("wave")
        .args(["--frames", "12", "--record"])
        .arg(&frames_dir)
        .arg("--screenshot")
        .arg(&shot)
        .output()
        .expect("run");
    assert!(output.status.success(), "{}", stderr(&output));
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), stderr(&output));
    // Twelve frames never fill the encoders' 48-frame queue: none is dropped, whatever the speed.
    let written: Vec<_> =
        std::fs::read_dir(&frames_dir).expect("frames folder").flatten().map(|e| e.file_name()).collect();
    assert_eq!(written.len(), 12, "{written:?}");
    assert!(said.contains("recorded 12 frames"), "{said}");
    assert!(said.contains("ffmpeg -framerate 60 -i") && said.contains("frame-%06d.png"), "{said}");
    assert_eq!(
        image::open(frames_dir.join("frame-000012.png")).expect("last frame").to_rgba8(),
        image::open(&shot).expect("screenshot").to_rgba8(),
        "the last recorded frame is the frame the screenshot shows"
    );
    std::fs::remove_dir_all(&dir).ok();
}
