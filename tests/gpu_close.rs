//! Closing the app at any moment ends it cleanly, a kernel compile in flight included: NVRTC
//! cannot be stopped, so the app waits for it rather than ending the process under it (which
//! crashed in the library's teardown: exit 139). Offscreen, in a window during the first compile,
//! and in a window during the recompile a kernel edit starts. GPU tests: the background compiles
//! run only with CUDA. The window ones need a display (Xvfb on the GPU machine).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic in a test is its failure message

mod common;

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use common::{Watched, binary, temp_dir};

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Neither killed by a signal (a crash) nor a panic.
fn ended_cleanly(output: &std::process::Output) {
    assert_eq!(output.status.signal(), None, "killed by a signal: {}", stderr(output));
    assert_ne!(output.status.code(), Some(101), "panicked: {}", stderr(output));
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn ctrl_c_while_an_offscreen_run_compiles_its_kernels_ends_it_with_its_outputs() {
    let dir = temp_dir("close-offscreen");
    let stats = dir.join("stats.json");
    let mut command = binary();
    command
        .args(["blur", "--headless", "--backend", "cuda", "--frames", "100000", "--size", "320x200", "--stats"])
        .arg(&stats)
        .env("XDG_CACHE_HOME", dir.join("empty-cache"))
        .env_remove("DISPLAY");
    let mut watched = Watched::start(command);
    // An empty kernel cache: set-up compiles blur.cu (seconds); the signal lands during it.
    assert!(watched.wait_for("transfer path", Duration::from_secs(60)), "{}", watched.stderr());
    watched.signal("INT");
    let output = watched.finish(Duration::from_secs(120));
    ended_cleanly(&output);
    assert_eq!(output.status.code(), Some(130), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats).expect("stats")).expect("JSON");
    assert!(report["frames"].as_u64().is_some_and(|frames| frames >= 1), "{report:#}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_blur_window_closed_during_its_first_compile_exits_0() {
    if !common::available(std::env::var_os("DISPLAY").is_some(), "an X display", "INTEROP_LAB_REQUIRE_DISPLAY") {
        return;
    }
    let dir = temp_dir("close-window-compile");
    let output = binary()
        .args(["blur", "--backend", "cuda", "--frames", "3", "--size", "480x300", "--vsync", "off"])
        .env("XDG_CACHE_HOME", dir.join("empty-cache"))
        .env("RUST_LOG", "interop_lab=info")
        .output()
        .expect("run");
    ended_cleanly(&output);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("waiting for NVRTC to finish compiling blur.cu"),
        "the window closed while the compile ran: {}",
        stderr(&output)
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_window_interrupted_while_an_edited_kernel_recompiles_ends_cleanly() {
    if !common::available(std::env::var_os("DISPLAY").is_some(), "an X display", "INTEROP_LAB_REQUIRE_DISPLAY") {
        return;
    }
    let dir = temp_dir("close-window-edit");
    let kernels = dir.join("kernels");
    std::fs::create_dir_all(&kernels).expect("kernels folder");
    let source = include_str!("../kernels/wave.cu");
    std::fs::write(kernels.join("wave.cu"), source).expect("write");
    let mut command = binary();
    command
        .args(["wave", "--backend", "cuda", "--size", "480x300", "--kernels"])
        .arg(&kernels)
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env("RUST_LOG", "interop_lab=info");
    let mut watched = Watched::start(command);
    assert!(watched.wait_for("first frame drawn", Duration::from_secs(120)), "{}", watched.stderr());
    // A new text (a comment), so NVRTC compiles it for real rather than taking it from the cache.
    std::fs::write(kernels.join("wave.cu"), format!("{source}\n// edited while the window runs\n")).expect("edit");
    assert!(watched.wait_for("NVRTC recompiles it", Duration::from_secs(30)), "{}", watched.stderr());
    watched.signal("INT");
    let output = watched.finish(Duration::from_secs(120));
    ended_cleanly(&output);
    assert_eq!(output.status.code(), Some(130), "{}", stderr(&output));
    std::fs::remove_dir_all(&dir).ok();
}
